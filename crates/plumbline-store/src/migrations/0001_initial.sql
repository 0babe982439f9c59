-- Schema version 1: content-addressed tool versions and observations.
--
-- Digests are SHA-256 (32-byte BLOBs). Content tables hold each distinct
-- content once; the hot table, observations, holds integer ids only, so
-- observing an unchanged server adds one small row and one index entry.

-- A monitored server. identity is the RFC 8785 canonical form of a JSON
-- object (transport and command or URL) that holds no secret.
CREATE TABLE servers (
    id       INTEGER PRIMARY KEY,
    name     TEXT NOT NULL UNIQUE,
    identity TEXT NOT NULL
);

-- A tool version: the RFC 8785 canonical form of a tool, once per digest.
CREATE TABLE tool_versions (
    id        INTEGER PRIMARY KEY,
    digest    BLOB NOT NULL UNIQUE CHECK (length(digest) = 32),
    canonical BLOB NOT NULL
);

-- A tool's bytes exactly as a server sent them, once per digest of those
-- bytes. tool_version_id is NULL when the bytes are not a valid tool.
CREATE TABLE raw_tools (
    id              INTEGER PRIMARY KEY,
    digest          BLOB NOT NULL UNIQUE CHECK (length(digest) = 32),
    raw             BLOB NOT NULL,
    tool_version_id INTEGER REFERENCES tool_versions (id)
);

-- serverInfo, capabilities and instructions, once per digest of the bytes.
CREATE TABLE documents (
    id     INTEGER PRIMARY KEY,
    digest BLOB NOT NULL UNIQUE CHECK (length(digest) = 32),
    body   BLOB NOT NULL
);

-- An ordered listing of tools, once per digest of its entries.
CREATE TABLE tool_sets (
    id         INTEGER PRIMARY KEY,
    digest     BLOB NOT NULL UNIQUE CHECK (length(digest) = 32),
    tool_count INTEGER NOT NULL CHECK (tool_count >= 0)
);

CREATE TABLE tool_set_entries (
    tool_set_id INTEGER NOT NULL REFERENCES tool_sets (id),
    position    INTEGER NOT NULL CHECK (position >= 0),
    name        TEXT,
    raw_tool_id INTEGER NOT NULL REFERENCES raw_tools (id),
    PRIMARY KEY (tool_set_id, position)
) WITHOUT ROWID;

-- One attempt to list a server's tools. A failure has an error and no tool
-- set, so it can never read as "every tool removed".
CREATE TABLE observations (
    id               INTEGER PRIMARY KEY,
    server_id        INTEGER NOT NULL REFERENCES servers (id),
    started_at_ms    INTEGER NOT NULL,
    finished_at_ms   INTEGER NOT NULL,
    outcome          TEXT NOT NULL CHECK (outcome IN ('ok', 'failed')),
    error            TEXT,
    protocol_version TEXT,
    server_info_id   INTEGER REFERENCES documents (id),
    capabilities_id  INTEGER REFERENCES documents (id),
    instructions_id  INTEGER REFERENCES documents (id),
    tool_set_id      INTEGER REFERENCES tool_sets (id),
    CHECK (
        (outcome = 'ok' AND tool_set_id IS NOT NULL AND error IS NULL)
        OR (outcome = 'failed' AND tool_set_id IS NULL AND error IS NOT NULL)
    )
);

-- Timelines and "the previous successful observation" walk a server's
-- observations by id.
CREATE INDEX observations_by_server ON observations (server_id, id);

-- Problems of one observation, only when there are any.
CREATE TABLE observation_problems (
    observation_id INTEGER NOT NULL REFERENCES observations (id),
    seq            INTEGER NOT NULL,
    kind           TEXT NOT NULL
                   CHECK (kind IN ('malformed_tool', 'duplicate_name', 'other')),
    position       INTEGER,
    tool_name      TEXT,
    message        TEXT NOT NULL,
    PRIMARY KEY (observation_id, seq)
) WITHOUT ROWID;
