-- Schema version 9: leases, for several watchers sharing one history.
--
-- One row per server a watcher has claimed: who holds it, under which
-- epoch (increased each time another watcher takes it), and until when.
-- An observation recorded under a lease is refused unless its holder and
-- epoch are the row's (a watcher that paused past its lease and lost it).
-- One row per watcher seen, so that each claims its share of the servers.
CREATE TABLE leases (
    server        TEXT PRIMARY KEY,
    holder        TEXT,
    epoch         INTEGER NOT NULL DEFAULT 0,
    expires_at_ms INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

CREATE TABLE watchers (
    holder       TEXT PRIMARY KEY,
    last_seen_ms INTEGER NOT NULL
) WITHOUT ROWID;
