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

-- Listings that repeat their servers' newest observations, recorded as
-- copies of those rows in one round trip and one transaction
-- (crate::Store::record_repeats): for each, the server's row locked (and
-- its lease shared), then the row inserted by a second statement, which,
-- in a function, takes a snapshot of its own after the lock, so it sees
-- every observation of the server committed before. An element is NULL,
-- with nothing written for it, when the identity or the lease is not as
-- given, or the observation repeated is no longer the newest, successful
-- and without problems. The commit does not wait for the disk
-- (synchronous_commit off, for this transaction only): a crash of the
-- database may lose the last fraction of a second of repeats, as the
-- embedded SQLite store (synchronous=NORMAL) may lose its last commits on
-- a power loss; never a change, an alert or a review, and never leaving
-- the database inconsistent (a later commit that waits makes every
-- earlier one durable).
CREATE FUNCTION plumbline_record_repeats(
    p_servers BYTEA[], p_identities TEXT[], p_previous BIGINT[],
    p_started_at_ms BIGINT[], p_finished_at_ms BIGINT[],
    p_holders BYTEA[], p_epochs BIGINT[]
) RETURNS BIGINT[] LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    i INT;
    sid BIGINT;
    new_id BIGINT;
    ids BIGINT[] := '{}';
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    FOR i IN 1 .. coalesce(array_length(p_servers, 1), 0) LOOP
        sid := NULL;
        new_id := NULL;
        IF p_holders[i] IS NULL THEN
            SELECT s.id INTO sid FROM servers s
            WHERE s.name = p_servers[i] AND s.identity = p_identities[i]
            FOR UPDATE;
        ELSE
            SELECT s.id INTO sid FROM servers s JOIN leases l ON l.server = s.name
            WHERE s.name = p_servers[i] AND s.identity = p_identities[i]
              AND l.holder = p_holders[i] AND l.epoch = p_epochs[i]
            FOR UPDATE OF s FOR SHARE OF l;
        END IF;
        IF sid IS NOT NULL THEN
            INSERT INTO observations (server_id, started_at_ms, finished_at_ms, outcome, error,
                protocol_version, server_info_id, capabilities_id, instructions_id, tool_set_id,
                authorization_id)
            SELECT p.server_id, p_started_at_ms[i], p_finished_at_ms[i], p.outcome, p.error,
                p.protocol_version, p.server_info_id, p.capabilities_id, p.instructions_id,
                p.tool_set_id, p.authorization_id
            FROM observations p
            WHERE p.id = p_previous[i] AND p.server_id = sid AND p.outcome = 'ok'
              AND p.id = (SELECT max(o.id) FROM observations o WHERE o.server_id = sid)
              AND NOT EXISTS (SELECT 1 FROM observation_problems q WHERE q.observation_id = p.id)
            RETURNING id INTO new_id;
        END IF;
        ids := ids || new_id;
    END LOOP;
    RETURN ids;
END
$$;
