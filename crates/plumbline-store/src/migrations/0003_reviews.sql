-- Schema version 3: reviews of changes, and each server's baseline.
--
-- A change is one tool's drift between an observation and the server's
-- previous successful observation, named by (observation, tool name). A
-- reviewer marks it reviewed (seen, nothing to do) or accepted (the new
-- version becomes the baseline); reviewing it again replaces the row.

CREATE TABLE reviews (
    observation_id INTEGER NOT NULL REFERENCES observations (id),
    tool_name      TEXT NOT NULL,
    status         TEXT NOT NULL CHECK (status IN ('reviewed', 'accepted')),
    reviewer       TEXT NOT NULL,
    at_ms          INTEGER NOT NULL,
    note           TEXT,
    PRIMARY KEY (observation_id, tool_name)
) WITHOUT ROWID;

-- A server's baseline: per tool name, the accepted tool version and the
-- observation it came from. While a server has no row in
-- baseline_servers its baseline is implicit, the tools of its first
-- successful observation; the first accepted change materialises that
-- implicit baseline here, and from then on these rows are the baseline,
-- even when an accepted removal leaves none. accepted_by and
-- accepted_at_ms are NULL for the rows materialised from the implicit
-- baseline: nobody accepted them, they were simply there first.
CREATE TABLE baseline_servers (
    server_id          INTEGER PRIMARY KEY REFERENCES servers (id),
    materialised_at_ms INTEGER NOT NULL
);

CREATE TABLE baselines (
    server_id       INTEGER NOT NULL REFERENCES servers (id),
    tool_name       TEXT NOT NULL,
    tool_version_id INTEGER NOT NULL REFERENCES tool_versions (id),
    observation_id  INTEGER NOT NULL REFERENCES observations (id),
    accepted_by     TEXT,
    accepted_at_ms  INTEGER,
    PRIMARY KEY (server_id, tool_name),
    CHECK ((accepted_by IS NULL) = (accepted_at_ms IS NULL))
) WITHOUT ROWID;
