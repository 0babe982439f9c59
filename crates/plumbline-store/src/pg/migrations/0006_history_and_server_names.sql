-- PostgreSQL schema version 6: the history's identity, and each server's
-- tool names, as SQLite's version 13
-- (src/migrations/0013_history_and_server_names.sql).
CREATE TABLE history (
    id TEXT NOT NULL
);
INSERT INTO history (id)
VALUES (md5(random()::text || clock_timestamp()::text || pg_backend_pid()::text));

CREATE TABLE server_names (
    server_id BIGINT NOT NULL REFERENCES servers (id),
    name      BYTEA NOT NULL,
    PRIMARY KEY (server_id, name)
);

INSERT INTO server_names (server_id, name)
SELECT o.server_id, e.name
FROM observations o
JOIN tool_set_entries e ON e.tool_set_id = o.tool_set_id
WHERE e.name IS NOT NULL
  AND o.id IN (SELECT max(id) FROM observations WHERE outcome = 'ok' GROUP BY server_id)
ON CONFLICT DO NOTHING;

-- Who was told of a server's failure streak: its alerts by key, newest
-- observations last.
CREATE INDEX alerts_by_server ON alerts (server_id, key, observation_id);
