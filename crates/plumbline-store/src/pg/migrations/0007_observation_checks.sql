-- PostgreSQL schema version 7: copies of repeated listings cost a few
-- statements per batch instead of two per copy, and are not re-checked
-- against the content they copy. SQLite's schema is unchanged (its checks
-- run in the process, for a fraction of the cost).
--
-- Why: most observations a watcher records repeat their server's newest
-- one (plumbline_record_repeats), copying its references. PostgreSQL
-- starts an executor for every statement (two per copy before), checks
-- each foreign key of each inserted row with a query of its own that also
-- locks the referenced row, and parses each CHECK expression once per
-- statement. Measured on a copy of a 1,000-server history (pgbench, 8
-- copies per call, the function's share of a call): 1.05-1.14 ms with
-- schema version 6; 0.60-0.80 ms without the five content keys and the
-- redundant CHECK; about 0.35 ms less again with the function below.
--
-- What keeps the references sound: documents and tool sets are written
-- in the transaction that first references them, are addressed by their
-- digest and are never updated or deleted; a copy takes its references
-- from a row that was itself sound; and `plumbline store check` reports
-- any observation naming a missing document or tool set. An observation's
-- server stays a foreign key (the server's row is locked by every write
-- anyway), as do every reference to an observation.
ALTER TABLE observations
    DROP CONSTRAINT observations_server_info_id_fkey,
    DROP CONSTRAINT observations_capabilities_id_fkey,
    DROP CONSTRAINT observations_instructions_id_fkey,
    DROP CONSTRAINT observations_tool_set_id_fkey,
    DROP CONSTRAINT observations_authorization_id_fkey,
    -- Implied by observations_check, which admits 'ok' and 'failed' only.
    DROP CONSTRAINT observations_outcome_check;

-- As version 6's function (same arguments, same results), set-based: one
-- statement locks every server named, in name order (a server named twice
-- is taken for its first element only); one shares the leases named, in
-- name order, keeping the elements whose holder and epoch are still as
-- given (a waiting lock sees the row as committed); then one statement,
-- with a snapshot taken after both, inserts every copy whose predecessor
-- is still the server's newest, successful and without problems. Locks
-- are always taken servers first, each set in name order, as the other
-- writers take them (one server, then its lease), so two writers never
-- wait on each other in a cycle. Each lock statement also says
-- `name = ANY (p_servers)`, which the join already implies: it makes the
-- planner read the names' index rows, where without it it hashed the
-- whole servers table (1,000 rows read for a batch of eight).
CREATE OR REPLACE FUNCTION plumbline_record_repeats(
    p_servers BYTEA[], p_identities TEXT[], p_previous BIGINT[],
    p_started_at_ms BIGINT[], p_finished_at_ms BIGINT[],
    p_holders BYTEA[], p_epochs BIGINT[]
) RETURNS BIGINT[] LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    n INT := coalesce(array_length(p_servers, 1), 0);
    sids BIGINT[] := array_fill(NULL::BIGINT, ARRAY[n]);
    held BOOLEAN[] := array_fill(false, ARRAY[n]);
    last_sid BIGINT;
    r RECORD;
    ids BIGINT[];
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    IF n = 0 THEN
        RETURN '{}';
    END IF;
    FOR r IN SELECT s.id, a.i FROM servers s
        JOIN unnest(p_servers, p_identities) WITH ORDINALITY a(server, identity, i)
          ON s.name = a.server AND s.identity = a.identity
        WHERE s.name = ANY (p_servers)
        ORDER BY s.name, a.i FOR UPDATE OF s
    LOOP
        IF r.id IS DISTINCT FROM last_sid THEN
            sids[r.i] := r.id;
        END IF;
        last_sid := r.id;
    END LOOP;
    IF EXISTS (SELECT 1 FROM unnest(p_holders) h WHERE h IS NOT NULL) THEN
        FOR r IN SELECT a.i FROM leases l
            JOIN unnest(p_servers, p_holders, p_epochs) WITH ORDINALITY a(server, holder, epoch, i)
              ON l.server = a.server
            WHERE l.server = ANY (p_servers) AND l.holder = a.holder AND l.epoch = a.epoch
            ORDER BY l.server, a.i FOR SHARE OF l
        LOOP
            held[r.i] := true;
        END LOOP;
        FOR k IN 1 .. n LOOP
            IF p_holders[k] IS NOT NULL AND NOT held[k] THEN
                sids[k] := NULL;
            END IF;
        END LOOP;
    END IF;
    WITH ins AS (
        INSERT INTO observations (server_id, started_at_ms, finished_at_ms, outcome, error,
            protocol_version, server_info_id, capabilities_id, instructions_id, tool_set_id,
            authorization_id)
        SELECT p.server_id, t.started, t.finished, p.outcome, p.error,
            p.protocol_version, p.server_info_id, p.capabilities_id, p.instructions_id,
            p.tool_set_id, p.authorization_id
        FROM unnest(sids, p_previous, p_started_at_ms, p_finished_at_ms) WITH ORDINALITY
            t(sid, previous, started, finished, i)
        JOIN observations p ON p.id = t.previous AND p.server_id = t.sid
        WHERE p.outcome = 'ok'
          AND p.id = (SELECT max(o.id) FROM observations o WHERE o.server_id = t.sid)
          AND NOT EXISTS (SELECT 1 FROM observation_problems q WHERE q.observation_id = p.id)
        ORDER BY t.i
        RETURNING id, server_id
    )
    SELECT array_agg(ins.id ORDER BY t.i) INTO ids
    FROM unnest(sids) WITH ORDINALITY t(sid, i) LEFT JOIN ins ON ins.server_id = t.sid;
    RETURN ids;
END
$$;
