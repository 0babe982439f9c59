-- Schema version 11: what a server publishes about its authorization.
--
-- A server behind OAuth publishes its protected resource metadata
-- (RFC 9728) and names an authorization server, whose metadata
-- (RFC 8414) says its issuer, scopes and endpoints. Both are part of
-- what the server tells a client: a JSON document of the two is kept with
-- each observation, once per digest in documents like serverInfo, so that
-- a new issuer or new scopes show as the server's drift. NULL for a server
-- without authorization and for every observation recorded before.
ALTER TABLE observations ADD COLUMN authorization_id INTEGER REFERENCES documents (id);

-- "The previous authorization document" of a server: only the observations
-- that have one are indexed.
CREATE INDEX observations_authorized ON observations (server_id, id)
    WHERE authorization_id IS NOT NULL;
