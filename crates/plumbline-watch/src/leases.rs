//! This watcher's leases: which of the registry's servers it observes
//! when several watchers share one history (`plumbline_store::lease`).
//!
//! The watcher claims at start, then every third of a lease: it renews
//! what it holds, gives up what is past its share (another watcher
//! started) and takes what is free (a watcher stopped, or died and its
//! leases ran out). It observes only what it holds, and records each
//! listing under the lease it held when recording, so a listing made
//! under a lease lost meanwhile is not recorded. Stopping releases every
//! lease at once. Alone, a watcher holds every server.

use std::collections::BTreeMap;
use std::time::Duration;

use plumbline_history::{History, LeaseClaim, LeaseToken, StoreError};

use crate::now_ms;

/// The leases of one watcher.
pub(crate) struct Leases {
    holder: String,
    lease: Duration,
    held: BTreeMap<String, LeaseToken>,
}

impl Leases {
    pub fn new(lease: Duration) -> Leases {
        Leases {
            holder: holder_id(),
            lease,
            held: BTreeMap::new(),
        }
    }

    /// This watcher's id: host, process and start time.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// How often to claim: a third of a lease, so that two claims can
    /// fail before the lease runs out.
    pub fn every(&self) -> Duration {
        self.lease / 3
    }

    /// What this watcher holds, by server.
    pub fn held(&self) -> &BTreeMap<String, LeaseToken> {
        &self.held
    }

    /// Claims this watcher's share of `servers`. When the store cannot be
    /// reached, it keeps what it held and goes on observing: its listings
    /// wait for the store with the leases they were made under, and are
    /// recorded if those are still its own when the store returns (no
    /// other watcher could reach the store either), else dropped there
    /// (another took the servers over).
    pub fn claim(&mut self, store: &mut History, servers: Vec<String>) -> Result<(), StoreError> {
        let claim = LeaseClaim {
            holder: self.holder.clone(),
            servers,
            lease_ms: self.lease.as_millis() as i64,
            // The store's clock: watchers on machines whose clocks
            // disagree still agree on which leases have run out.
            now_ms: store.clock_ms()?,
        };
        match store.claim_leases(&claim) {
            Ok(leases) => {
                self.held = leases
                    .into_iter()
                    .map(|l| {
                        let token = LeaseToken {
                            holder: self.holder.clone(),
                            epoch: l.epoch,
                        };
                        (l.server, token)
                    })
                    .collect();
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Releases every lease (stopping), so that the others take over at
    /// their next claim instead of after a lease.
    pub fn release(&mut self, store: &mut History) -> Result<u64, StoreError> {
        self.held.clear();
        store.release_leases(&self.holder)
    }

    /// Releases the leases of watchers of this host whose process is
    /// gone (killed, crashed): a watcher restarted on the same machine
    /// need not wait a lease for its predecessor's servers.
    pub fn free_the_dead(&self, store: &mut History) -> Result<(), StoreError> {
        let host = host();
        let mut dead: Vec<String> = store
            .leases()?
            .into_iter()
            .filter_map(|l| l.holder)
            .filter(|h| h != &self.holder && is_dead_here(h, &host))
            .collect();
        dead.sort();
        dead.dedup();
        for holder in dead {
            let released = store.release_leases(&holder)?;
            tracing::info!(
                holder = %plumbline_base::sanitize::for_terminal(&holder, false),
                released,
                "plumbline watch: released the leases of a watcher of this host that is gone"
            );
        }
        Ok(())
    }
}

/// `HOST:PID:START_MS`: unique among the watchers of a history.
fn holder_id() -> String {
    format!("{}:{}:{}", host(), std::process::id(), now_ms())
}

fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// Whether `holder` names a watcher of host `host` whose process is gone.
fn is_dead_here(holder: &str, host: &str) -> bool {
    let mut parts = holder.rsplitn(3, ':');
    let (Some(_start), Some(pid), Some(their_host)) = (parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let Ok(pid) = pid.parse::<i32>() else {
        return false;
    };
    if their_host != host || pid <= 0 {
        return false;
    }
    // Signal 0 checks the process exists without touching it.
    matches!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
        Err(nix::errno::Errno::ESRCH)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_watcher_of_this_host_whose_process_is_gone_is_dead() {
        let host = host();
        let me = format!("{host}:{}:1", std::process::id());
        assert!(!is_dead_here(&me, &host), "this process lives");
        // A child that has exited and been reaped.
        let mut child = std::process::Command::new("true").spawn().expect("true");
        let pid = child.id();
        child.wait().expect("reaped");
        assert!(is_dead_here(&format!("{host}:{pid}:1"), &host));
        assert!(!is_dead_here(&format!("elsewhere:{pid}:1"), &host));
        assert!(!is_dead_here("not an id", &host));
        assert!(holder_id().starts_with(&format!("{host}:{}:", std::process::id())));
    }
}
