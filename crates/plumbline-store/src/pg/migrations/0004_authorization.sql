-- PostgreSQL schema version 4: what a server publishes about its
-- authorization, as SQLite's version 11 (src/migrations/0011_authorization.sql).
ALTER TABLE observations ADD COLUMN authorization_id BIGINT REFERENCES documents (id);
CREATE INDEX observations_authorized ON observations (server_id, id)
    WHERE authorization_id IS NOT NULL;
