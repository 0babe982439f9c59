-- Schema version 2: the alert outbox of the watcher.
--
-- An alert is enqueued in the same store as the observation that caused
-- it, once per (observation, channel, key): a restarted watcher that
-- re-examines an observation finds the alert already there and does not
-- send it again. Delivery marks it; a delivery that fails is kept with its
-- error and retried later, never dropped.

CREATE TABLE alerts (
    id              INTEGER PRIMARY KEY,
    server_id       INTEGER NOT NULL REFERENCES servers (id),
    observation_id  INTEGER NOT NULL REFERENCES observations (id),
    channel         TEXT NOT NULL,
    key             TEXT NOT NULL,
    body            BLOB NOT NULL,
    created_at_ms   INTEGER NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_error      TEXT,
    delivered_at_ms INTEGER,
    UNIQUE (observation_id, channel, key)
);

CREATE INDEX alerts_pending ON alerts (id) WHERE delivered_at_ms IS NULL;
