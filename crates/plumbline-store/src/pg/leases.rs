//! Leases and claims on PostgreSQL: a claim reads the lease rows without
//! a lock and writes only those it changes, each only if it is still as
//! read (`FOR UPDATE SKIP LOCKED` on that one row), so watchers claiming at
//! the same moment never wait on each other and never take the same row,
//! and a claim that renews (the usual one) locks no row. Due alerts are
//! taken with `FOR UPDATE SKIP LOCKED` too.

use postgres::Row;

use super::{opt_text, text, Session};
use crate::lease::{decide, Lease, LeaseClaim, LeaseWrite};
use crate::model::OutboxAlert;
use crate::StoreError;

/// Each lease with its holder's expiry (a lease lasts while its holder
/// renews), over `leases l`.
const LEASES: &str = "SELECT l.server, l.holder, l.epoch, COALESCE(w.expires_at_ms, 0)
     FROM leases l LEFT JOIN watchers w ON w.holder = l.holder";

impl Session {
    fn to_lease(&self, row: &Row, what: &str) -> Result<Lease, StoreError> {
        Ok(Lease {
            server: text(&self.label, self.get(row, 0, what)?, what)?,
            holder: opt_text(&self.label, self.get(row, 1, what)?, what)?,
            epoch: self.get(row, 2, what)?,
            expires_at_ms: self.get(row, 3, what)?,
        })
    }

    /// A claim: the rows read without a lock, decided on, and only the
    /// rows that change written, each under the condition that it is
    /// still as read (and skipped if another claim or a recorder holds it
    /// locked this moment): a watcher that renews what it holds, the
    /// usual claim, locks and writes no lease row at all.
    pub(super) fn claim_leases(&mut self, claim: &LeaseClaim) -> Result<Vec<Lease>, StoreError> {
        let what = "the leases";
        let err = self.derived_err(what);

        let label = self.label.clone();
        let me = claim.holder.as_bytes();
        let mut db = self.db().map_err(&err)?;
        let mut tx = db.transaction().map_err(&err)?;
        let expires = claim.now_ms.saturating_add(claim.lease_ms);
        tx.execute(
            "INSERT INTO watchers (holder, last_seen_ms, expires_at_ms) VALUES ($1, $2, $3)
             ON CONFLICT (holder) DO UPDATE SET last_seen_ms = excluded.last_seen_ms,
                 expires_at_ms = excluded.expires_at_ms",
            &[&me, &claim.now_ms, &expires],
        )
        .map_err(&err)?;
        // Watchers gone for ten leases are forgotten (their leases read as
        // free without them).
        tx.execute(
            "DELETE FROM watchers WHERE expires_at_ms < $1",
            &[&claim
                .now_ms
                .saturating_sub(claim.lease_ms.saturating_mul(10))],
        )
        .map_err(&err)?;
        let live: i64 = tx
            .query_one(
                "SELECT count(*) FROM watchers WHERE last_seen_ms >= $1",
                &[&claim.live_from()],
            )
            .and_then(|row| row.try_get(0))
            .map_err(&err)?;
        let lease = |row: &Row| -> Result<Lease, StoreError> {
            let bytes = |i: usize| row.try_get::<_, Option<Vec<u8>>>(i).map_err(&err);
            let server = bytes(0)?.unwrap_or_default();
            Ok(Lease {
                server: text(&label, server, what)?,
                holder: opt_text(&label, bytes(1)?, what)?,
                epoch: row.try_get(2).map_err(&err)?,
                expires_at_ms: row.try_get(3).map_err(&err)?,
            })
        };
        // Every lease row, read whole and picked here (the servers claimed,
        // and any other this watcher holds): a filter on a thousand-name
        // array cost the database a comparison per name and row. A server
        // without a row yet (the first claim of it) gets one; rows are
        // never deleted, so after the first claim none is inserted.
        let wanted: std::collections::HashSet<&[u8]> =
            claim.servers.iter().map(String::as_bytes).collect();
        let read = |tx: &mut super::Db<'_, postgres::Transaction<'_>>| {
            let rows = tx
                .query(&format!("{LEASES} ORDER BY l.server"), &[])
                .map_err(&err)?;
            rows.iter()
                .filter(|row| {
                    row.try_get::<_, &[u8]>(0)
                        .is_ok_and(|server| wanted.contains(server))
                        || row.try_get::<_, Option<&[u8]>>(1).ok().flatten() == Some(me)
                })
                .map(lease)
                .collect::<Result<Vec<_>, StoreError>>()
        };
        let mut rows = read(&mut tx)?;
        let missing: Vec<&[u8]> = {
            let present: std::collections::HashSet<&[u8]> =
                rows.iter().map(|l| l.server.as_bytes()).collect();
            // In the claim's order, as before: watchers inserting the same
            // new names take their index entries alike.
            claim
                .servers
                .iter()
                .map(String::as_bytes)
                .filter(|s| !present.contains(s))
                .collect()
        };
        if !missing.is_empty() {
            tx.execute(
                "INSERT INTO leases (server) SELECT unnest($1::bytea[]) ON CONFLICT DO NOTHING",
                &[&missing],
            )
            .map_err(&err)?;
            rows = read(&mut tx)?;
        }
        let seen: std::collections::HashMap<&str, &Lease> =
            rows.iter().map(|l| (l.server.as_str(), l)).collect();
        for write in decide(claim, &rows, live.max(1) as u64) {
            match write {
                // Renewed with the watcher's row, above.
                LeaseWrite::Renew(_) => Ok(0),
                LeaseWrite::Take(server, epoch) => {
                    let was = seen[server.as_str()];
                    tx.execute(
                        "UPDATE leases SET holder = $2, epoch = $3, expires_at_ms = $4
                         WHERE server = (SELECT server FROM leases
                             WHERE server = $1 AND holder IS NOT DISTINCT FROM $5 AND epoch = $6
                             FOR UPDATE SKIP LOCKED)",
                        &[
                            &server.as_bytes(),
                            &me,
                            &epoch,
                            &expires,
                            &was.holder.as_deref().map(str::as_bytes),
                            &was.epoch,
                        ],
                    )
                }
                LeaseWrite::Release(server) => tx.execute(
                    "UPDATE leases SET holder = NULL, expires_at_ms = 0
                     WHERE server = (SELECT server FROM leases
                         WHERE server = $1 AND holder = $2 FOR UPDATE SKIP LOCKED)",
                    &[&server.as_bytes(), &me],
                ),
            }
            .map_err(&err)?;
        }
        let held = tx
            .query(
                &format!("{LEASES} WHERE l.holder = $1 ORDER BY l.server"),
                &[&me],
            )
            .map_err(&err)?;
        let held = held.iter().map(lease).collect::<Result<Vec<_>, _>>()?;
        tx.commit().map_err(&err)?;
        Ok(held)
    }

    /// The database server's time (Unix ms).
    pub(super) fn clock_ms(&mut self) -> Result<i64, StoreError> {
        let what = "the database's clock";
        let row = self.row(
            what,
            "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint",
            &[],
        )?;
        match row {
            Some(row) => self.get(&row, 0, what),
            None => Err(self.corrupt("the database has no clock")),
        }
    }

    pub(super) fn release_leases(&mut self, holder: &str) -> Result<u64, StoreError> {
        let err = self.derived_err("the leases");
        let mut db = self.db().map_err(&err)?;
        let mut tx = db.transaction().map_err(&err)?;
        let released = tx
            .execute(
                "UPDATE leases SET holder = NULL, expires_at_ms = 0 WHERE holder = $1",
                &[&holder.as_bytes()],
            )
            .map_err(&err)?;
        tx.execute(
            "DELETE FROM watchers WHERE holder = $1",
            &[&holder.as_bytes()],
        )
        .map_err(&err)?;
        tx.commit().map_err(&err)?;
        Ok(released)
    }

    pub(super) fn leases(&mut self) -> Result<Vec<Lease>, StoreError> {
        let what = "the leases";
        let rows = self.rows(what, &format!("{LEASES} ORDER BY l.server"), &[])?;
        rows.iter().map(|row| self.to_lease(row, what)).collect()
    }

    pub(super) fn claim_due_alerts(
        &mut self,
        channel: &str,
        now_ms: i64,
        claim_ms: i64,
        limit: u32,
    ) -> Result<Vec<OutboxAlert>, StoreError> {
        let err = self.write_err("", "the alerts being delivered");
        let ids: Vec<i64> = self
            .db()
            .and_then(|mut db| {
                db.query(
                    "WITH due AS (
                         SELECT id, next_attempt_at_ms FROM alerts
                         WHERE channel = $1 AND delivered_at_ms IS NULL AND failed_at_ms IS NULL
                           AND next_attempt_at_ms <= $2
                         ORDER BY next_attempt_at_ms, id LIMIT $3
                         FOR UPDATE SKIP LOCKED),
                     pushed AS (
                         UPDATE alerts a SET next_attempt_at_ms = $4 FROM due
                         WHERE a.id = due.id
                         RETURNING a.id, due.next_attempt_at_ms AS was)
                     SELECT id FROM pushed ORDER BY was, id",
                    &[
                        &channel.as_bytes(),
                        &now_ms,
                        &i64::from(limit),
                        &now_ms.saturating_add(claim_ms),
                    ],
                )
            })
            .map_err(&err)?
            .iter()
            .map(|row| row.try_get(0))
            .collect::<Result<_, _>>()
            .map_err(&err)?;
        let mut claimed = self.outbox(
            format!("the alerts claimed on channel {channel:?}"),
            "WHERE a.id = ANY($1)",
            &[&ids],
        )?;
        // In the order they were due (the claim pushed them all out alike).
        claimed.sort_by_key(|a| ids.iter().position(|id| *id == a.id.0));
        Ok(claimed)
    }
}
