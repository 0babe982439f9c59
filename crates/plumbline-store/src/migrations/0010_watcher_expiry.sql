-- Schema version 10: a lease lasts as long as its holder renews.
--
-- A watcher's claim renews every lease it holds at once, by moving its
-- own expiry (one row) rather than every lease row's: a lease held by a
-- watcher is held until that watcher's expires_at_ms. leases.expires_at_ms
-- now records only when a lease taken would have run out without renewal.
ALTER TABLE watchers ADD COLUMN expires_at_ms INTEGER NOT NULL DEFAULT 0;
