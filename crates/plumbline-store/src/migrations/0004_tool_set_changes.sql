-- Schema version 4: where each server's tool set changed.
--
-- One row per successful observation whose tool set differs from the
-- server's previous successful observation's, naming that observation.
-- Written with the observation, in its transaction, so timelines and the
-- dashboard's overview read the few changes instead of walking every
-- unchanged observation (a watcher adds thousands a day).
CREATE TABLE tool_set_changes (
    observation_id INTEGER PRIMARY KEY REFERENCES observations (id),
    server_id      INTEGER NOT NULL REFERENCES servers (id),
    previous_id    INTEGER NOT NULL REFERENCES observations (id)
);

CREATE INDEX tool_set_changes_by_server ON tool_set_changes (server_id, observation_id);

-- The changes already recorded.
INSERT INTO tool_set_changes (observation_id, server_id, previous_id)
SELECT id, server_id, previous_id
FROM (
    SELECT id, server_id, tool_set_id,
           LAG(id) OVER byserver AS previous_id,
           LAG(tool_set_id) OVER byserver AS previous_set
    FROM observations
    WHERE outcome = 'ok'
    WINDOW byserver AS (PARTITION BY server_id ORDER BY id)
)
WHERE previous_id IS NOT NULL AND tool_set_id != previous_set;
