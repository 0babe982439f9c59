-- PostgreSQL schema version 2: leases, as SQLite's version 9 keeps them
-- (src/migrations/0009_leases.sql). Watchers claim rows with FOR UPDATE
-- SKIP LOCKED, so two claiming at once never wait on each other.
CREATE TABLE leases (
    server        BYTEA PRIMARY KEY,
    holder        BYTEA,
    epoch         BIGINT NOT NULL DEFAULT 0,
    expires_at_ms BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE watchers (
    holder       BYTEA PRIMARY KEY,
    last_seen_ms BIGINT NOT NULL
);
