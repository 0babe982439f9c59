//! [`AnyStore`]: the backend a store location names, opened by
//! [`open`]. Callers hold this one type whichever database is behind it.

use crate::model::{
    AlertCounts, AlertId, Baseline, BaselineEdit, NewAlert, NewObservation, NewReview, Observation,
    ObservationId, ObservationSummary, OutboxAlert, Review, Server, ToolHistoryEntry,
};
use crate::prelude::*;
use crate::{
    Digest, Lease, LeaseClaim, LeaseToken, Location, PostgresStore, SqliteStore, StoreError,
};

/// A store of either backend.
#[derive(Debug)]
pub enum AnyStore {
    Sqlite(SqliteStore),
    Postgres(PostgresStore),
}

/// Opens the store at `location`, creating it (a SQLite file, or the
/// schema of an empty PostgreSQL database) and bringing its schema up to
/// date.
pub fn open(location: &Location) -> Result<AnyStore, StoreError> {
    Ok(match location {
        Location::Sqlite(path) => AnyStore::Sqlite(SqliteStore::open(path)?),
        Location::Postgres(url) => AnyStore::Postgres(PostgresStore::open(url)?),
    })
}

impl AnyStore {
    /// Where the store is, for messages: the file, or the database's URL
    /// without user information and query.
    pub fn location(&self) -> &std::path::Path {
        match self {
            AnyStore::Sqlite(s) => s.path(),
            AnyStore::Postgres(s) => s.location(),
        }
    }

    /// The schema version recorded in the store.
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        match self {
            AnyStore::Sqlite(s) => s.schema_version(),
            AnyStore::Postgres(s) => s.schema_version(),
        }
    }
}

/// The same call on whichever backend `$self` holds.
macro_rules! each {
    ($self:ident, $s:ident => $call:expr) => {
        match $self {
            AnyStore::Sqlite($s) => $call,
            AnyStore::Postgres($s) => $call,
        }
    };
}

impl HistoryStore for AnyStore {
    fn record_repeats(
        &mut self,
        repeats: &[crate::Repeat],
    ) -> Result<Vec<Option<ObservationId>>, StoreError> {
        each!(self, s => s.record_repeats(repeats))
    }

    fn foreign_names(&self, server: &str) -> Result<Vec<String>, StoreError> {
        each!(self, s => s.foreign_names(server))
    }

    fn history_id(&self) -> Result<String, StoreError> {
        each!(self, s => s.history_id())
    }

    fn statements(&self) -> u64 {
        each!(self, s => s.statements())
    }

    fn record_observation_under(
        &mut self,
        observation: &NewObservation,
        lease: &LeaseToken,
    ) -> Result<ObservationId, StoreError> {
        each!(self, s => s.record_observation_under(observation, lease))
    }

    fn drift_summary(
        &self,
        old: &Digest,
        new: &Digest,
        grader: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        each!(self, s => s.drift_summary(old, new, grader))
    }

    fn put_drift_summary(
        &mut self,
        old: &Digest,
        new: &Digest,
        grader: &str,
        summary: &[u8],
    ) -> Result<(), StoreError> {
        each!(self, s => s.put_drift_summary(old, new, grader, summary))
    }

    fn put_inventory(
        &mut self,
        observation: ObservationId,
        names: &[String],
    ) -> Result<Digest, StoreError> {
        each!(self, s => s.put_inventory(observation, names))
    }

    fn inventory(&self, observation: ObservationId) -> Result<Option<Digest>, StoreError> {
        each!(self, s => s.inventory(observation))
    }

    fn inventory_names(&self, inventory: &Digest) -> Result<Option<Vec<String>>, StoreError> {
        each!(self, s => s.inventory_names(inventory))
    }

    fn put_server(&mut self, name: &str, identity: &str) -> Result<(), StoreError> {
        each!(self, s => s.put_server(name, identity))
    }

    fn servers(&self) -> Result<Vec<Server>, StoreError> {
        each!(self, s => s.servers())
    }

    fn server(&self, name: &str) -> Result<Option<Server>, StoreError> {
        each!(self, s => s.server(name))
    }

    fn record_observation(
        &mut self,
        observation: &NewObservation,
    ) -> Result<ObservationId, StoreError> {
        each!(self, s => s.record_observation(observation))
    }

    fn timeline(&self, server: &str, limit: u32) -> Result<Vec<ObservationSummary>, StoreError> {
        each!(self, s => s.timeline(server, limit))
    }

    fn tool_set_changes(
        &self,
        server: &str,
    ) -> Result<Vec<(ObservationSummary, ObservationSummary)>, StoreError> {
        each!(self, s => s.tool_set_changes(server))
    }

    fn observation_summary(
        &self,
        id: ObservationId,
    ) -> Result<Option<ObservationSummary>, StoreError> {
        each!(self, s => s.observation_summary(id))
    }

    fn observation(&self, id: ObservationId) -> Result<Option<Observation>, StoreError> {
        each!(self, s => s.observation(id))
    }

    fn latest_successful(
        &self,
        server: &str,
        before: Option<ObservationId>,
    ) -> Result<Option<ObservationSummary>, StoreError> {
        each!(self, s => s.latest_successful(server, before))
    }

    fn latest_authorization(
        &self,
        server: &str,
        before: Option<ObservationId>,
    ) -> Result<Option<ObservationSummary>, StoreError> {
        each!(self, s => s.latest_authorization(server, before))
    }

    fn document_by_digest(&self, digest: &Digest) -> Result<Option<Vec<u8>>, StoreError> {
        each!(self, s => s.document_by_digest(digest))
    }

    fn tool_version(&self, canonical: &Digest) -> Result<Option<Vec<u8>>, StoreError> {
        each!(self, s => s.tool_version(canonical))
    }

    fn raw_tool(&self, raw: &Digest) -> Result<Option<Vec<u8>>, StoreError> {
        each!(self, s => s.raw_tool(raw))
    }

    fn tool_history(&self, server: &str, tool: &str) -> Result<Vec<ToolHistoryEntry>, StoreError> {
        each!(self, s => s.tool_history(server, tool))
    }
}

impl crate::GuardLog for AnyStore {
    fn record_guard_event(&mut self, event: &crate::NewGuardEvent) -> Result<i64, StoreError> {
        each!(self, s => s.record_guard_event(event))
    }

    fn guard_events(&self, limit: u32) -> Result<Vec<crate::GuardEvent>, StoreError> {
        each!(self, s => s.guard_events(limit))
    }
}

impl ReviewStore for AnyStore {
    fn mark_reviewed(&mut self, review: &NewReview) -> Result<(), StoreError> {
        each!(self, s => s.mark_reviewed(review))
    }

    fn accept_change(
        &mut self,
        review: &NewReview,
        edits: &[BaselineEdit],
    ) -> Result<(), StoreError> {
        each!(self, s => s.accept_change(review, edits))
    }

    fn mark_all_reviewed(&mut self, reviews: &[NewReview]) -> Result<(), StoreError> {
        each!(self, s => s.mark_all_reviewed(reviews))
    }

    fn accept_changes(
        &mut self,
        accepts: &[(NewReview, Vec<BaselineEdit>)],
    ) -> Result<(), StoreError> {
        each!(self, s => s.accept_changes(accepts))
    }

    fn reviews(&self, server: &str) -> Result<Vec<Review>, StoreError> {
        each!(self, s => s.reviews(server))
    }

    fn baseline(&self, server: &str) -> Result<Option<Baseline>, StoreError> {
        each!(self, s => s.baseline(server))
    }
}

impl Outbox for AnyStore {
    fn claim_due_alerts(
        &mut self,
        channel: &str,
        now_ms: i64,
        claim_ms: i64,
        limit: u32,
    ) -> Result<Vec<OutboxAlert>, StoreError> {
        each!(self, s => s.claim_due_alerts(channel, now_ms, claim_ms, limit))
    }

    fn enqueue_alert(&mut self, alert: &NewAlert) -> Result<Option<AlertId>, StoreError> {
        each!(self, s => s.enqueue_alert(alert))
    }

    fn pending_alerts(&self, limit: u32) -> Result<Vec<OutboxAlert>, StoreError> {
        each!(self, s => s.pending_alerts(limit))
    }

    fn due_alerts(
        &self,
        channel: &str,
        now_ms: i64,
        limit: u32,
    ) -> Result<Vec<OutboxAlert>, StoreError> {
        each!(self, s => s.due_alerts(channel, now_ms, limit))
    }

    fn next_alert_due(&self, channel: &str) -> Result<Option<i64>, StoreError> {
        each!(self, s => s.next_alert_due(channel))
    }

    fn failed_alerts(&self, limit: u32) -> Result<Vec<OutboxAlert>, StoreError> {
        each!(self, s => s.failed_alerts(limit))
    }

    fn alert_counts(&self) -> Result<AlertCounts, StoreError> {
        each!(self, s => s.alert_counts())
    }

    fn pending_alert_channels(&self) -> Result<Vec<(String, u64)>, StoreError> {
        each!(self, s => s.pending_alert_channels())
    }

    fn alerted_since(
        &self,
        server: &str,
        key: &str,
        after: Option<ObservationId>,
    ) -> Result<Vec<String>, StoreError> {
        each!(self, s => s.alerted_since(server, key, after))
    }

    fn mark_alert_delivered(&mut self, id: AlertId, at_ms: i64) -> Result<(), StoreError> {
        each!(self, s => s.mark_alert_delivered(id, at_ms))
    }

    fn retry_alert(
        &mut self,
        id: AlertId,
        error: &str,
        retry_at_ms: i64,
    ) -> Result<(), StoreError> {
        each!(self, s => s.retry_alert(id, error, retry_at_ms))
    }

    fn give_up_alert(&mut self, id: AlertId, error: &str, at_ms: i64) -> Result<(), StoreError> {
        each!(self, s => s.give_up_alert(id, error, at_ms))
    }

    fn retire_alerts(
        &mut self,
        channel: &str,
        reason: &str,
        at_ms: i64,
    ) -> Result<u64, StoreError> {
        each!(self, s => s.retire_alerts(channel, reason, at_ms))
    }
}

impl Leases for AnyStore {
    fn claim_leases(&mut self, claim: &LeaseClaim) -> Result<Vec<Lease>, StoreError> {
        each!(self, s => s.claim_leases(claim))
    }

    fn release_leases(&mut self, holder: &str) -> Result<u64, StoreError> {
        each!(self, s => s.release_leases(holder))
    }

    fn leases(&self) -> Result<Vec<Lease>, StoreError> {
        each!(self, s => s.leases())
    }

    fn clock_ms(&self) -> Result<i64, StoreError> {
        each!(self, s => s.clock_ms())
    }
}

impl Rows for AnyStore {
    fn read_rows(
        &self,
        table: &str,
        after: Option<&[crate::tables::Cell]>,
        limit: u32,
    ) -> Result<Vec<crate::tables::Row>, StoreError> {
        each!(self, s => s.read_rows(table, after, limit))
    }

    fn write_rows(&mut self, table: &str, rows: &[crate::tables::Row]) -> Result<u64, StoreError> {
        each!(self, s => s.write_rows(table, rows))
    }

    fn finish_writing_rows(&mut self) -> Result<(), StoreError> {
        each!(self, s => s.finish_writing_rows())
    }
}
