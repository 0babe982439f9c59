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

-- A listing that repeats the server's newest observation, recorded as a
-- copy of its row in one round trip (crate::Store::record_repeat): the
-- server's row locked (and its lease shared), then the row inserted by a
-- second statement, which, in a function, takes a snapshot of its own
-- after the lock, so it sees every observation of the server committed
-- before. NULL, with nothing written, when the identity or the lease is
-- not as given, or the observation repeated is no longer the newest,
-- successful and without problems.
CREATE FUNCTION plumbline_record_repeat(
    p_server BYTEA, p_identity TEXT, p_previous BIGINT,
    p_started_at_ms BIGINT, p_finished_at_ms BIGINT,
    p_holder BYTEA, p_epoch BIGINT
) RETURNS BIGINT LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    sid BIGINT;
    new_id BIGINT;
BEGIN
    IF p_holder IS NULL THEN
        SELECT s.id INTO sid FROM servers s
        WHERE s.name = p_server AND s.identity = p_identity
        FOR UPDATE;
    ELSE
        SELECT s.id INTO sid FROM servers s JOIN leases l ON l.server = s.name
        WHERE s.name = p_server AND s.identity = p_identity
          AND l.holder = p_holder AND l.epoch = p_epoch
        FOR UPDATE OF s FOR SHARE OF l;
    END IF;
    IF sid IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO observations (server_id, started_at_ms, finished_at_ms, outcome, error,
        protocol_version, server_info_id, capabilities_id, instructions_id, tool_set_id,
        authorization_id)
    SELECT p.server_id, p_started_at_ms, p_finished_at_ms, p.outcome, p.error,
        p.protocol_version, p.server_info_id, p.capabilities_id, p.instructions_id,
        p.tool_set_id, p.authorization_id
    FROM observations p
    WHERE p.id = p_previous AND p.server_id = sid AND p.outcome = 'ok'
      AND p.id = (SELECT max(o.id) FROM observations o WHERE o.server_id = sid)
      AND NOT EXISTS (SELECT 1 FROM observation_problems q WHERE q.observation_id = p.id)
    RETURNING id INTO new_id;
    RETURN new_id;
END
$$;
