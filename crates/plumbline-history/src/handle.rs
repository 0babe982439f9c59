//! [`History`]: one history, opened where it is kept. The watcher, the
//! dashboard and the CLI reach the store only through it
//! (`ARCHITECTURE.md`): they record and read with this crate's functions,
//! which take the history's store ([`History::store`],
//! [`History::store_mut`], opaque to them), and put alerts in the outbox,
//! deliver them and review changes with its methods. A second backend
//! (PostgreSQL, the Teams issue) changes what a `History` holds, not its
//! callers.

use std::path::Path;

use plumbline_store::prelude::*;
use plumbline_store::{AnyStore, Lease, LeaseClaim, Location};

use plumbline_store::{
    AlertCounts, AlertId, Baseline, BaselineEdit, Digest, NewAlert, NewReview, Observation,
    ObservationId, ObservationSummary, OutboxAlert, Review, Server, SqliteStore, Store, StoreError,
    ToolHistoryEntry,
};

/// One history over its store.
pub struct History {
    store: AnyStore,
    /// Each server's last observation recorded through this handle, for
    /// recording a listing that repeats it as a copy ([`History::record`]).
    repeats: crate::Repeats,
}

impl History {
    /// Opens the history kept at `location` (a SQLite file, given as a
    /// path too, or a PostgreSQL database), creating it and bringing its
    /// schema up to date.
    pub fn open(location: impl Into<Location>) -> Result<History, StoreError> {
        Ok(History {
            store: plumbline_store::open(&location.into())?,
            repeats: Default::default(),
        })
    }

    /// A history kept in memory only (tests, `check` without a store).
    pub fn in_memory() -> Result<History, StoreError> {
        Ok(History {
            store: AnyStore::Sqlite(SqliteStore::open_in_memory()?),
            repeats: Default::default(),
        })
    }

    /// Where the history is kept, for messages: the file, or the
    /// database's URL without user information and query.
    pub fn path(&self) -> &Path {
        self.store.location()
    }

    /// The store, for this crate's readers (`read::overview(h.store(),
    /// …)`): its type is not the caller's to name.
    pub fn store(&self) -> &impl Store {
        &self.store
    }

    /// The store, for this crate's writers (`record(h.store_mut(), …)`).
    pub fn store_mut(&mut self) -> &mut impl Store {
        &mut self.store
    }

    /// Records `batch` ([`crate::record`]), a listing that repeats what
    /// this handle last recorded of its server as a copy of that
    /// observation ([`crate::record_with`]): what a watcher records most.
    pub fn record(
        &mut self,
        grader: &crate::Grader,
        batch: Vec<crate::Observed>,
    ) -> Result<Vec<crate::Recorded>, crate::HistoryError> {
        crate::record_with(&mut self.store, grader, batch, &mut self.repeats)
    }

    /// Records each of `batch` that repeats what this handle last recorded
    /// of its server as a copy, all in one transaction
    /// ([`crate::record_repeats`]); the rest are left (`None`) for
    /// [`History::record`].
    pub fn record_repeats(
        &mut self,
        batch: &[crate::Observed],
    ) -> Result<Vec<Option<crate::Recorded>>, crate::HistoryError> {
        crate::record_repeats(&mut self.store, batch, &mut self.repeats)
    }

    /// This history's id, for alerts' delivery ids
    /// ([`plumbline_store::Store::history_id`]).
    pub fn history_id(&self) -> Result<String, StoreError> {
        self.store.history_id()
    }

    /// Statements this process has sent to stores of this history's kind
    /// ([`plumbline_store::Store::statements`]).
    pub fn statements(&self) -> u64 {
        self.store.statements()
    }

    // The whole history, table by table.
    /// Copies every row this history holds that `to` lacks, then returns
    /// what it wrote per table; `progress` hears each page (table, rows
    /// read). Verify with [`History::sums`] on both.
    pub fn copy_to(
        &self,
        to: &mut History,
        progress: impl FnMut(&'static str, u64),
    ) -> Result<Vec<plumbline_store::tables::Copied>, StoreError> {
        plumbline_store::tables::copy(&self.store, &mut to.store, progress)
    }

    /// Where this history holds a row `from` does not hold as it is: a
    /// copy of `from` into it would mix two histories. Empty when this one
    /// is empty or a part of `from`.
    pub fn not_part_of(&self, from: &History) -> Result<Vec<String>, StoreError> {
        plumbline_store::tables::not_part_of(&self.store, &from.store)
    }

    /// Each table's row count and digest: equal on two histories exactly
    /// when they hold the same rows.
    pub fn sums(&self) -> Result<Vec<plumbline_store::tables::TableSum>, StoreError> {
        plumbline_store::tables::sums(&self.store)
    }

    /// What is unsound in the history (digests that are not their
    /// content's, references to missing rows); empty when it is sound.
    pub fn check(&self) -> Result<Vec<String>, StoreError> {
        plumbline_store::tables::check(&self.store)
    }

    // The guard's events.
    /// Keeps what the runtime guard refused or saw (a call with secret
    /// material, a result with text aimed at the model) of a server the
    /// history knows; its id.
    pub fn record_guard_event(
        &mut self,
        event: &plumbline_store::NewGuardEvent,
    ) -> Result<i64, StoreError> {
        self.store.record_guard_event(event)
    }

    /// The latest `limit` guard events, newest first.
    pub fn guard_events(&self, limit: u32) -> Result<Vec<plumbline_store::GuardEvent>, StoreError> {
        self.store.guard_events(limit)
    }

    // The outbox.
    /// Puts an alert in the outbox, unless one with the same observation,
    /// channel and key is there already (then `None`): re-examining an
    /// observation, after a restart say, never alerts twice.
    pub fn enqueue_alert(&mut self, alert: &NewAlert) -> Result<Option<AlertId>, StoreError> {
        self.store.enqueue_alert(alert)
    }

    /// Takes up to `limit` due alerts of `channel` for delivery: due for
    /// nobody else until `now_ms + claim_ms`.
    pub fn claim_due_alerts(
        &mut self,
        channel: &str,
        now_ms: i64,
        claim_ms: i64,
        limit: u32,
    ) -> Result<Vec<OutboxAlert>, StoreError> {
        self.store
            .claim_due_alerts(channel, now_ms, claim_ms, limit)
    }

    // Leases: several watchers, one history.
    /// Claims `claim.holder`'s share of its servers
    /// ([`plumbline_store::lease`]); the leases it holds afterwards.
    pub fn claim_leases(&mut self, claim: &LeaseClaim) -> Result<Vec<Lease>, StoreError> {
        self.store.claim_leases(claim)
    }

    /// Releases every lease of `holder` (a watcher stopping).
    pub fn release_leases(&mut self, holder: &str) -> Result<u64, StoreError> {
        self.store.release_leases(holder)
    }

    /// Every lease, by server.
    pub fn leases(&self) -> Result<Vec<Lease>, StoreError> {
        self.store.leases()
    }

    /// The time leases are measured in: the database's clock on
    /// PostgreSQL, this machine's on SQLite.
    pub fn clock_ms(&self) -> Result<i64, StoreError> {
        self.store.clock_ms()
    }

    /// Pending alerts (neither delivered nor failed), oldest first.
    pub fn pending_alerts(&self, limit: u32) -> Result<Vec<OutboxAlert>, StoreError> {
        self.store.pending_alerts(limit)
    }

    /// The pending alerts of `channel` whose next attempt is due at
    /// `now_ms`, soonest due first.
    pub fn due_alerts(
        &self,
        channel: &str,
        now_ms: i64,
        limit: u32,
    ) -> Result<Vec<OutboxAlert>, StoreError> {
        self.store.due_alerts(channel, now_ms, limit)
    }

    /// When the next pending alert of `channel` is due; `None` when it has
    /// none.
    pub fn next_alert_due(&self, channel: &str) -> Result<Option<i64>, StoreError> {
        self.store.next_alert_due(channel)
    }

    /// Alerts given up on, most recent first.
    pub fn failed_alerts(&self, limit: u32) -> Result<Vec<OutboxAlert>, StoreError> {
        self.store.failed_alerts(limit)
    }

    /// How many alerts are pending, failed and delivered.
    pub fn alert_counts(&self) -> Result<AlertCounts, StoreError> {
        self.store.alert_counts()
    }

    /// Each channel that has pending alerts, with how many.
    pub fn pending_alert_channels(&self) -> Result<Vec<(String, u64)>, StoreError> {
        self.store.pending_alert_channels()
    }

    /// Marks an alert delivered.
    pub fn mark_alert_delivered(&mut self, id: AlertId, at_ms: i64) -> Result<(), StoreError> {
        self.store.mark_alert_delivered(id, at_ms)
    }

    /// Records a failed delivery attempt: the alert is tried again at
    /// `retry_at_ms`.
    pub fn retry_alert(
        &mut self,
        id: AlertId,
        error: &str,
        retry_at_ms: i64,
    ) -> Result<(), StoreError> {
        self.store.retry_alert(id, error, retry_at_ms)
    }

    /// Records a last failed delivery attempt at `at_ms`: the alert is
    /// given up on (marked failed, kept with its error, never tried again).
    pub fn give_up_alert(
        &mut self,
        id: AlertId,
        error: &str,
        at_ms: i64,
    ) -> Result<(), StoreError> {
        self.store.give_up_alert(id, error, at_ms)
    }

    /// Gives up on every pending alert of `channel` (one no longer
    /// configured), recording `reason`; returns how many.
    pub fn retire_alerts(
        &mut self,
        channel: &str,
        reason: &str,
        at_ms: i64,
    ) -> Result<u64, StoreError> {
        self.store.retire_alerts(channel, reason, at_ms)
    }

    // Reviews and baselines.
    /// Marks a change reviewed, replacing any earlier verdict on it. The
    /// baseline is not touched (an earlier acceptance stays in effect). The
    /// observation must be a successful one: a failure has no changes.
    pub fn mark_reviewed(&mut self, review: &NewReview) -> Result<(), StoreError> {
        self.store.mark_reviewed(review)
    }

    /// Accepts a change, all or nothing: materialises the server's implicit
    /// baseline (its first successful observation's tools) if no change was
    /// accepted before, applies `edits` to it in order, and records the
    /// verdict as accepted, replacing any earlier one. The observation must
    /// be a successful one, and every version set must be in the store.
    pub fn accept_change(
        &mut self,
        review: &NewReview,
        edits: &[BaselineEdit],
    ) -> Result<(), StoreError> {
        self.store.accept_change(review, edits)
    }

    /// Marks every change of `reviews` reviewed, in one transaction: all
    /// of them or none.
    pub fn mark_all_reviewed(&mut self, reviews: &[NewReview]) -> Result<(), StoreError> {
        self.store.mark_all_reviewed(reviews)
    }

    /// Accepts every change of `accepts` (each with its baseline edits, in
    /// order) in one transaction: all of them or none, as
    /// [`plumbline_store::Store::accept_change`] does one.
    pub fn accept_changes(
        &mut self,
        accepts: &[(NewReview, Vec<BaselineEdit>)],
    ) -> Result<(), StoreError> {
        self.store.accept_changes(accepts)
    }

    /// Every verdict on the changes of a server's observations, by
    /// observation, then tool name.
    pub fn reviews(&self, server: &str) -> Result<Vec<Review>, StoreError> {
        self.store.reviews(server)
    }

    /// The server's baseline: tool name to accepted version, with where
    /// each came from. `None` when nothing was accepted and the server has
    /// no successful observation yet.
    pub fn baseline(&self, server: &str) -> Result<Option<Baseline>, StoreError> {
        self.store.baseline(server)
    }

    // Reads.
    /// Every registered server, sorted by name.
    pub fn servers(&self) -> Result<Vec<Server>, StoreError> {
        self.store.servers()
    }

    /// One registered server; `None` when the name is not registered.
    pub fn server(&self, name: &str) -> Result<Option<Server>, StoreError> {
        self.store.server(name)
    }

    /// A server's observations, newest first, at most `limit` of them.
    pub fn timeline(
        &self,
        server: &str,
        limit: u32,
    ) -> Result<Vec<ObservationSummary>, StoreError> {
        self.store.timeline(server, limit)
    }

    /// The server's latest successful observation recorded before `before`,
    /// or its latest successful one overall when `before` is `None`: the
    /// baseline that drift is measured against.
    pub fn latest_successful(
        &self,
        server: &str,
        before: Option<ObservationId>,
    ) -> Result<Option<ObservationSummary>, StoreError> {
        self.store.latest_successful(server, before)
    }

    /// The canonical bytes of the tool version with this digest.
    pub fn tool_version(&self, canonical: &Digest) -> Result<Option<Vec<u8>>, StoreError> {
        self.store.tool_version(canonical)
    }

    /// The raw bytes, as received, with this digest.
    pub fn raw_tool(&self, raw: &Digest) -> Result<Option<Vec<u8>>, StoreError> {
        self.store.raw_tool(raw)
    }

    /// The successful observations at which the server's tool called `tool`
    /// first appeared, changed canonical form, disappeared or came back,
    /// oldest first. Failed observations are not part of a history. When a
    /// listing holds the name twice, the first is the tool.
    pub fn tool_history(
        &self,
        server: &str,
        tool: &str,
    ) -> Result<Vec<ToolHistoryEntry>, StoreError> {
        self.store.tool_history(server, tool)
    }

    /// One observation with its tools and problems; `None` if there is no
    /// observation with that id.
    pub fn observation(&self, id: ObservationId) -> Result<Option<Observation>, StoreError> {
        self.store.observation(id)
    }

    /// One observation's summary, without its tools; `None` if there is no
    /// observation with that id.
    pub fn observation_summary(
        &self,
        id: ObservationId,
    ) -> Result<Option<ObservationSummary>, StoreError> {
        self.store.observation_summary(id)
    }
}
