-- Schema version 6: per-alert retry schedule and giving up.
--
-- Each channel's delivery task takes its due alerts (`next_attempt_at_ms`
-- reached) in order; a failed attempt moves the alert's next attempt out
-- by an exponential backoff with jitter. Past its bound of attempts, or
-- when its channel is no longer configured, an alert is marked failed
-- (`failed_at_ms`, with `last_error` saying why): kept and shown, never
-- retried again, never dropped silently.

ALTER TABLE alerts ADD COLUMN next_attempt_at_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE alerts ADD COLUMN failed_at_ms INTEGER;

DROP INDEX alerts_pending;
CREATE INDEX alerts_due ON alerts (channel, next_attempt_at_ms, id)
    WHERE delivered_at_ms IS NULL AND failed_at_ms IS NULL;
CREATE INDEX alerts_failed ON alerts (failed_at_ms) WHERE failed_at_ms IS NOT NULL;
