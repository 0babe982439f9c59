-- Schema version 13: the history's identity, and each server's tool names.
--
-- history: one row, the id of this history, drawn when the store was made
-- (or migrated). Every alert's X-Plumbline-Delivery names it, so that two
-- histories posting to one receiver never give two alerts one id. It is
-- not history itself: a copy of the rows into another store keeps that
-- store's own id.
CREATE TABLE history (
    id TEXT NOT NULL
);
INSERT INTO history (id) VALUES (lower(hex(randomblob(16))));

-- server_names: the tool names of each server's latest successful
-- observation, kept as observations are recorded, so that the names of
-- every other server (the inventory a change is graded with) are read in
-- one statement however many servers the history holds. Derived from the
-- observations (built here from those already recorded, and again after a
-- copy), never copied.
CREATE TABLE server_names (
    server_id INTEGER NOT NULL REFERENCES servers (id),
    name      TEXT NOT NULL,
    PRIMARY KEY (server_id, name)
) WITHOUT ROWID;

INSERT OR IGNORE INTO server_names (server_id, name)
SELECT o.server_id, e.name
FROM observations o
JOIN tool_set_entries e ON e.tool_set_id = o.tool_set_id
WHERE e.name IS NOT NULL
  AND o.id IN (SELECT max(id) FROM observations WHERE outcome = 'ok' GROUP BY server_id);

-- Who was told of a server's failure streak: its alerts by key, newest
-- observations last.
CREATE INDEX alerts_by_server ON alerts (server_id, key, observation_id);
