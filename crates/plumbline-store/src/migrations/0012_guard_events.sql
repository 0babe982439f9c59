-- Schema version 12: what the runtime guard refused or saw in a session.
--
-- A tools/call whose arguments held secret material (refused, or relayed
-- with --on-secret warn), or a result holding text aimed at the model. The
-- detail is JSON that plumbline writes: the kind of material, the
-- argument's place, the rules; never the secret itself.
CREATE TABLE guard_events (
    id        INTEGER PRIMARY KEY,
    server_id INTEGER NOT NULL REFERENCES servers (id),
    at_ms     INTEGER NOT NULL,
    kind      TEXT NOT NULL,
    tool      TEXT NOT NULL,
    detail    TEXT NOT NULL
);

CREATE INDEX guard_events_by_server ON guard_events (server_id, id);
