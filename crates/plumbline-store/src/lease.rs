//! Leases: which watcher observes which server, when several share one
//! history. Both backends keep one row per server (holder, epoch, expiry)
//! and one per live watcher; what a claim changes is decided here, once,
//! from the rows a backend read (and, on PostgreSQL, locked).
//!
//! A watcher claims, at about a third of the lease's length, the servers
//! of its registry: it renews those it holds, releases those past its
//! share (so a watcher that starts takes over part of the work), and takes
//! free ones (never claimed, released, or expired: their holder stopped
//! renewing) up to its share, each under a new epoch. Its share is the
//! servers divided by the watchers seen within a lease (or since
//! [`LeaseClaim::live_since_ms`], when earlier), rounded up. An
//! observation recorded under a lease carries its epoch
//! ([`crate::Store::record_observation_under`]): a watcher that paused past
//! its lease and lost it to another cannot record with the old epoch.

/// A watcher's hold on one server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub server: String,
    /// Who holds it (a watcher's id); `None` when released or never held.
    pub holder: Option<String>,
    /// Increased each time another holder takes the server.
    pub epoch: i64,
    /// Until when the holder holds it without renewing (Unix ms).
    pub expires_at_ms: i64,
}

/// The lease an observation was made under: its holder and epoch.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LeaseToken {
    pub holder: String,
    pub epoch: i64,
}

/// One watcher's claim: every server of its registry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseClaim {
    /// The watcher's id, unique among the watchers of one history.
    pub holder: String,
    /// The servers it could observe.
    pub servers: Vec<String>,
    /// How long a lease lasts without renewal.
    pub lease_ms: i64,
    pub now_ms: i64,
    /// Count as live, besides those seen within a lease, the watchers
    /// seen since this time (a watcher back after an outage counting
    /// those that were live before it).
    pub live_since_ms: Option<i64>,
}

impl LeaseClaim {
    /// The earliest time a watcher counted live was last seen.
    pub(crate) fn live_from(&self) -> i64 {
        let within_a_lease = self.now_ms.saturating_sub(self.lease_ms);
        self.live_since_ms
            .map_or(within_a_lease, |since| since.min(within_a_lease))
    }
}

/// What a claim writes to one lease row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum LeaseWrite {
    /// Held already: extend it.
    Renew(String),
    /// Free: take it under this epoch.
    Take(String, i64),
    /// Held past the watcher's share, or no longer in its registry.
    Release(String),
}

/// The writes of `claim` given the lease rows it may change (on
/// PostgreSQL, rows another watcher is changing at this moment are
/// skipped and so absent) and how many watchers were seen within a lease,
/// this one included.
pub(crate) fn decide(claim: &LeaseClaim, rows: &[Lease], live_watchers: u64) -> Vec<LeaseWrite> {
    let me = claim.holder.as_str();
    let wanted: std::collections::BTreeSet<&str> =
        claim.servers.iter().map(String::as_str).collect();
    let share = wanted.len().div_ceil(live_watchers.max(1) as usize);
    let mut rows: Vec<&Lease> = rows.iter().collect();
    rows.sort_by(|a, b| a.server.cmp(&b.server));
    let mut writes = Vec::new();
    let mut held = 0;
    for row in &rows {
        if row.holder.as_deref() != Some(me) {
            continue;
        }
        // Held, even if expired: nobody took it, so no one else observed.
        if wanted.contains(row.server.as_str()) && held < share {
            held += 1;
            writes.push(LeaseWrite::Renew(row.server.clone()));
        } else {
            writes.push(LeaseWrite::Release(row.server.clone()));
        }
    }
    for row in &rows {
        if held >= share {
            break;
        }
        let free = match row.holder.as_deref() {
            None => true,
            Some(holder) => holder != me && row.expires_at_ms < claim.now_ms,
        };
        if free && wanted.contains(row.server.as_str()) {
            held += 1;
            writes.push(LeaseWrite::Take(row.server.clone(), row.epoch + 1));
        }
    }
    writes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(holder: &str, servers: &[&str]) -> LeaseClaim {
        LeaseClaim {
            holder: holder.to_owned(),
            servers: servers.iter().map(|s| (*s).to_owned()).collect(),
            lease_ms: 30_000,
            now_ms: 100_000,
            live_since_ms: None,
        }
    }

    fn row(server: &str, holder: Option<&str>, epoch: i64, expires_at_ms: i64) -> Lease {
        Lease {
            server: server.to_owned(),
            holder: holder.map(str::to_owned),
            epoch,
            expires_at_ms,
        }
    }

    #[test]
    fn a_lone_watcher_takes_every_free_server_under_a_new_epoch() {
        let rows = [row("a", None, 0, 0), row("b", Some("gone"), 3, 99_999)];
        assert_eq!(
            decide(&claim("w1", &["a", "b"]), &rows, 1),
            [
                LeaseWrite::Take("a".into(), 1),
                LeaseWrite::Take("b".into(), 4)
            ]
        );
    }

    #[test]
    fn a_lease_held_by_a_live_watcher_is_never_taken() {
        let rows = [row("a", Some("w2"), 1, 100_001)];
        assert!(decide(&claim("w1", &["a"]), &rows, 1).is_empty());
    }

    #[test]
    fn a_watcher_keeps_its_share_and_releases_the_rest_for_a_new_one() {
        let rows: Vec<Lease> = ["a", "b", "c", "d"]
            .iter()
            .map(|s| row(s, Some("w1"), 1, 120_000))
            .collect();
        // A second watcher is seen: w1's share is two.
        assert_eq!(
            decide(&claim("w1", &["a", "b", "c", "d"]), &rows, 2),
            [
                LeaseWrite::Renew("a".into()),
                LeaseWrite::Renew("b".into()),
                LeaseWrite::Release("c".into()),
                LeaseWrite::Release("d".into()),
            ]
        );
    }

    #[test]
    fn a_server_no_longer_in_the_registry_is_released() {
        let rows = [
            row("gone", Some("w1"), 2, 120_000),
            row("a", Some("w1"), 1, 120_000),
        ];
        assert_eq!(
            decide(&claim("w1", &["a"]), &rows, 1),
            [
                LeaseWrite::Renew("a".into()),
                LeaseWrite::Release("gone".into())
            ]
        );
    }

    #[test]
    fn an_expired_lease_still_held_is_renewed_under_the_same_epoch() {
        let rows = [row("a", Some("w1"), 5, 1)];
        assert_eq!(
            decide(&claim("w1", &["a"]), &rows, 1),
            [LeaseWrite::Renew("a".into())]
        );
    }
}
