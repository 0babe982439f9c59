//! [`Store`] for [`PostgresStore`]: each call is a job on the connection's
//! thread ([`Session`]'s methods), its arguments moved there.

use super::PostgresStore;
use crate::model::{
    AlertCounts, AlertId, Baseline, BaselineEdit, NewAlert, NewObservation, NewReview, Observation,
    ObservationId, ObservationSummary, OutboxAlert, Review, ReviewStatus, Server, ToolHistoryEntry,
};
use crate::prelude::*;
use crate::{Digest, Lease, LeaseClaim, LeaseToken, StoreError};

impl HistoryStore for PostgresStore {
    fn record_repeats(
        &mut self,
        repeats: &[crate::Repeat],
    ) -> Result<Vec<Option<ObservationId>>, StoreError> {
        let repeats = repeats.to_vec();
        self.run(move |s| s.record_repeats(&repeats))
    }

    fn foreign_names(&self, server: &str) -> Result<Vec<String>, StoreError> {
        let server = server.to_owned();
        self.run(move |s| s.foreign_names(&server))
    }

    fn history_id(&self) -> Result<String, StoreError> {
        self.run(|s| s.history_id())
    }

    fn statements(&self) -> u64 {
        super::SENT.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn record_observation_under(
        &mut self,
        observation: &NewObservation,
        lease: &LeaseToken,
    ) -> Result<ObservationId, StoreError> {
        let (observation, lease) = (observation.clone(), lease.clone());
        self.run(move |s| s.record_observation(&observation, Some(&lease)))
    }

    fn drift_summary(
        &self,
        old: &Digest,
        new: &Digest,
        grader: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let (old, new, grader) = (*old, *new, grader.to_owned());
        self.run(move |s| {
            let what = "a drift summary".to_owned();
            let row = s.row(
                &what,
                "SELECT summary FROM drift_summaries
                 WHERE old_set = $1 AND new_set = $2 AND grader = $3",
                &[&&old.as_bytes()[..], &&new.as_bytes()[..], &grader],
            )?;
            row.map(|row| s.get(&row, 0, &what)).transpose()
        })
    }

    fn put_drift_summary(
        &mut self,
        old: &Digest,
        new: &Digest,
        grader: &str,
        summary: &[u8],
    ) -> Result<(), StoreError> {
        let (old, new, grader, summary) = (*old, *new, grader.to_owned(), summary.to_vec());
        self.run(move |s| s.put_drift_summary(&old, &new, &grader, &summary))
    }

    fn put_inventory(
        &mut self,
        observation: ObservationId,
        names: &[String],
    ) -> Result<Digest, StoreError> {
        let names = names.to_vec();
        self.run(move |s| s.put_inventory(observation, &names))
    }

    fn inventory(&self, observation: ObservationId) -> Result<Option<Digest>, StoreError> {
        self.run(move |s| {
            let what = format!("the inventory of observation {observation}");
            let row = s.row(
                &what,
                "SELECT i.digest FROM observation_inventories oi
                 JOIN inventories i ON i.id = oi.inventory_id
                 WHERE oi.observation_id = $1",
                &[&observation.0],
            )?;
            row.map(|row| {
                let bytes: Vec<u8> = s.get(&row, 0, &what)?;
                s.digest_from(&bytes, &what)
            })
            .transpose()
        })
    }

    fn inventory_names(&self, inventory: &Digest) -> Result<Option<Vec<String>>, StoreError> {
        let inventory = *inventory;
        self.run(move |s| {
            let what = format!("inventory {inventory}");
            let row = s.row(
                &what,
                "SELECT names FROM inventories WHERE digest = $1",
                &[&&inventory.as_bytes()[..]],
            )?;
            row.map(|row| {
                let text: String = s.get(&row, 0, &what)?;
                serde_json::from_str(&text)
                    .map_err(|e| s.corrupt(format!("{what} is not a JSON array of names: {e}")))
            })
            .transpose()
        })
    }

    fn put_server(&mut self, name: &str, identity: &str) -> Result<(), StoreError> {
        let (name, identity) = (name.to_owned(), identity.to_owned());
        self.run(move |s| s.put_server(&name, &identity))
    }

    fn servers(&self) -> Result<Vec<Server>, StoreError> {
        self.run(|s| s.servers())
    }

    fn server(&self, name: &str) -> Result<Option<Server>, StoreError> {
        let name = name.to_owned();
        self.run(move |s| s.server(&name))
    }

    fn record_observation(
        &mut self,
        observation: &NewObservation,
    ) -> Result<ObservationId, StoreError> {
        let observation = observation.clone();
        self.run(move |s| s.record_observation(&observation, None))
    }

    fn timeline(&self, server: &str, limit: u32) -> Result<Vec<ObservationSummary>, StoreError> {
        let server = server.to_owned();
        self.run(move |s| s.timeline(&server, limit))
    }

    fn tool_set_changes(
        &self,
        server: &str,
    ) -> Result<Vec<(ObservationSummary, ObservationSummary)>, StoreError> {
        let server = server.to_owned();
        self.run(move |s| s.tool_set_changes(&server))
    }

    fn observation_summary(
        &self,
        id: ObservationId,
    ) -> Result<Option<ObservationSummary>, StoreError> {
        self.run(move |s| s.observation_summary(id))
    }

    fn observation(&self, id: ObservationId) -> Result<Option<Observation>, StoreError> {
        self.run(move |s| s.observation(id))
    }

    fn latest_successful(
        &self,
        server: &str,
        before: Option<ObservationId>,
    ) -> Result<Option<ObservationSummary>, StoreError> {
        let server = server.to_owned();
        self.run(move |s| s.latest_successful(&server, before))
    }

    fn latest_authorization(
        &self,
        server: &str,
        before: Option<ObservationId>,
    ) -> Result<Option<ObservationSummary>, StoreError> {
        let server = server.to_owned();
        self.run(move |s| s.latest_authorization(&server, before))
    }

    fn document_by_digest(&self, digest: &Digest) -> Result<Option<Vec<u8>>, StoreError> {
        let digest = *digest;
        self.run(move |s| {
            s.bytes_by_digest(
                format!("document {digest}"),
                "SELECT body FROM documents WHERE digest = $1",
                &digest,
            )
        })
    }

    fn tool_version(&self, canonical: &Digest) -> Result<Option<Vec<u8>>, StoreError> {
        let canonical = *canonical;
        self.run(move |s| {
            s.bytes_by_digest(
                format!("tool version {canonical}"),
                "SELECT canonical FROM tool_versions WHERE digest = $1",
                &canonical,
            )
        })
    }

    fn raw_tool(&self, raw: &Digest) -> Result<Option<Vec<u8>>, StoreError> {
        let raw = *raw;
        self.run(move |s| {
            s.bytes_by_digest(
                format!("raw tool {raw}"),
                "SELECT raw FROM raw_tools WHERE digest = $1",
                &raw,
            )
        })
    }

    fn tool_history(&self, server: &str, tool: &str) -> Result<Vec<ToolHistoryEntry>, StoreError> {
        let (server, tool) = (server.to_owned(), tool.to_owned());
        self.run(move |s| s.tool_history(&server, &tool))
    }
}

impl crate::GuardLog for PostgresStore {
    fn record_guard_event(&mut self, e: &crate::NewGuardEvent) -> Result<i64, StoreError> {
        let e = e.clone();
        self.run(move |s| s.record_guard_event(&e))
    }

    fn guard_events(&self, limit: u32) -> Result<Vec<crate::GuardEvent>, StoreError> {
        self.run(move |s| s.guard_events(limit))
    }
}

impl ReviewStore for PostgresStore {
    fn mark_reviewed(&mut self, review: &NewReview) -> Result<(), StoreError> {
        let items = vec![(review.clone(), Vec::new())];
        self.run(move |s| s.write_reviews(ReviewStatus::Reviewed, &items))
    }

    fn accept_change(
        &mut self,
        review: &NewReview,
        edits: &[BaselineEdit],
    ) -> Result<(), StoreError> {
        let items = vec![(review.clone(), edits.to_vec())];
        self.run(move |s| s.write_reviews(ReviewStatus::Accepted, &items))
    }

    fn mark_all_reviewed(&mut self, reviews: &[NewReview]) -> Result<(), StoreError> {
        let items: Vec<(NewReview, Vec<BaselineEdit>)> =
            reviews.iter().map(|r| (r.clone(), Vec::new())).collect();
        self.run(move |s| s.write_reviews(ReviewStatus::Reviewed, &items))
    }

    fn accept_changes(
        &mut self,
        accepts: &[(NewReview, Vec<BaselineEdit>)],
    ) -> Result<(), StoreError> {
        let items = accepts.to_vec();
        self.run(move |s| s.write_reviews(ReviewStatus::Accepted, &items))
    }

    fn reviews(&self, server: &str) -> Result<Vec<Review>, StoreError> {
        let server = server.to_owned();
        self.run(move |s| s.reviews(&server))
    }

    fn baseline(&self, server: &str) -> Result<Option<Baseline>, StoreError> {
        let server = server.to_owned();
        self.run(move |s| s.baseline(&server))
    }
}

impl Outbox for PostgresStore {
    fn claim_due_alerts(
        &mut self,
        channel: &str,
        now_ms: i64,
        claim_ms: i64,
        limit: u32,
    ) -> Result<Vec<OutboxAlert>, StoreError> {
        let channel = channel.to_owned();
        self.run(move |s| s.claim_due_alerts(&channel, now_ms, claim_ms, limit))
    }

    fn enqueue_alert(&mut self, alert: &NewAlert) -> Result<Option<AlertId>, StoreError> {
        let alert = alert.clone();
        self.run(move |s| s.enqueue_alert(&alert))
    }

    fn pending_alerts(&self, limit: u32) -> Result<Vec<OutboxAlert>, StoreError> {
        self.run(move |s| {
            s.outbox(
                "the pending alerts",
                "WHERE a.delivered_at_ms IS NULL AND a.failed_at_ms IS NULL
                 ORDER BY a.id LIMIT $1",
                &[&i64::from(limit)],
            )
        })
    }

    fn due_alerts(
        &self,
        channel: &str,
        now_ms: i64,
        limit: u32,
    ) -> Result<Vec<OutboxAlert>, StoreError> {
        let channel = channel.to_owned();
        self.run(move |s| {
            s.outbox(
                format!("the due alerts of channel {channel:?}"),
                "WHERE a.channel = $1 AND a.delivered_at_ms IS NULL AND a.failed_at_ms IS NULL
                   AND a.next_attempt_at_ms <= $2
                 ORDER BY a.next_attempt_at_ms, a.id LIMIT $3",
                &[&channel.as_bytes(), &now_ms, &i64::from(limit)],
            )
        })
    }

    fn next_alert_due(&self, channel: &str) -> Result<Option<i64>, StoreError> {
        let channel = channel.to_owned();
        self.run(move |s| s.next_alert_due(&channel))
    }

    fn failed_alerts(&self, limit: u32) -> Result<Vec<OutboxAlert>, StoreError> {
        self.run(move |s| {
            s.outbox(
                "the failed alerts",
                "WHERE a.failed_at_ms IS NOT NULL ORDER BY a.failed_at_ms DESC, a.id DESC LIMIT $1",
                &[&i64::from(limit)],
            )
        })
    }

    fn alert_counts(&self) -> Result<AlertCounts, StoreError> {
        self.run(|s| s.alert_counts())
    }

    fn pending_alert_channels(&self) -> Result<Vec<(String, u64)>, StoreError> {
        self.run(|s| s.pending_alert_channels())
    }

    fn alerted_since(
        &self,
        server: &str,
        key: &str,
        after: Option<ObservationId>,
    ) -> Result<Vec<String>, StoreError> {
        let (server, key) = (server.to_owned(), key.to_owned());
        self.run(move |s| s.alerted_since(&server, &key, after))
    }

    fn mark_alert_delivered(&mut self, id: AlertId, at_ms: i64) -> Result<(), StoreError> {
        self.run(move |s| {
            s.update_alert(
                "UPDATE alerts SET delivered_at_ms = $2, attempts = attempts + 1, last_error = NULL
                 WHERE id = $1",
                &[&id.0, &at_ms],
            )
        })
    }

    fn retry_alert(
        &mut self,
        id: AlertId,
        error: &str,
        retry_at_ms: i64,
    ) -> Result<(), StoreError> {
        let error = error.to_owned();
        self.run(move |s| {
            s.update_alert(
                "UPDATE alerts SET attempts = attempts + 1, last_error = $2, next_attempt_at_ms = $3
                 WHERE id = $1",
                &[&id.0, &error.as_bytes(), &retry_at_ms],
            )
        })
    }

    fn give_up_alert(&mut self, id: AlertId, error: &str, at_ms: i64) -> Result<(), StoreError> {
        let error = error.to_owned();
        self.run(move |s| {
            s.update_alert(
                "UPDATE alerts SET attempts = attempts + 1, last_error = $2, failed_at_ms = $3
                 WHERE id = $1",
                &[&id.0, &error.as_bytes(), &at_ms],
            )
        })
    }

    fn retire_alerts(
        &mut self,
        channel: &str,
        reason: &str,
        at_ms: i64,
    ) -> Result<u64, StoreError> {
        let (channel, reason) = (channel.to_owned(), reason.to_owned());
        self.run(move |s| s.retire_alerts(&channel, &reason, at_ms))
    }
}

impl Leases for PostgresStore {
    fn claim_leases(&mut self, claim: &LeaseClaim) -> Result<Vec<Lease>, StoreError> {
        let claim = claim.clone();
        self.run(move |s| s.claim_leases(&claim))
    }

    fn release_leases(&mut self, holder: &str) -> Result<u64, StoreError> {
        let holder = holder.to_owned();
        self.run(move |s| s.release_leases(&holder))
    }

    fn leases(&self) -> Result<Vec<Lease>, StoreError> {
        self.run(|s| s.leases())
    }

    fn clock_ms(&self) -> Result<i64, StoreError> {
        self.run(|s| s.clock_ms())
    }
}

impl Rows for PostgresStore {
    fn read_rows(
        &self,
        table: &str,
        after: Option<&[crate::tables::Cell]>,
        limit: u32,
    ) -> Result<Vec<crate::tables::Row>, StoreError> {
        let (table, after) = (table.to_owned(), after.map(<[_]>::to_vec));
        self.run(move |s| s.rows_of(&table, after.as_deref(), limit))
    }

    fn write_rows(&mut self, table: &str, rows: &[crate::tables::Row]) -> Result<u64, StoreError> {
        let (table, rows) = (table.to_owned(), rows.to_vec());
        self.run(move |s| s.put_rows(&table, &rows))
    }

    fn finish_writing_rows(&mut self) -> Result<(), StoreError> {
        self.run(|s| s.follow_written_ids())
    }
}
