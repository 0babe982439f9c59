-- PostgreSQL schema version 3: a lease lasts as long as its holder renews,
-- as SQLite's version 10 (src/migrations/0010_watcher_expiry.sql).
ALTER TABLE watchers ADD COLUMN expires_at_ms BIGINT NOT NULL DEFAULT 0;
