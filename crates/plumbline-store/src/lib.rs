//! Plumbline's history: every observation of every monitored MCP server,
//! with the tools exactly as each server published them.
//!
//! # What is kept
//!
//! - **Tool versions, content-addressed.** A tool version is identified by
//!   the SHA-256 of its RFC 8785 (JCS) canonical form ([`canonicalize`],
//!   [`digest`]); its canonical bytes are stored once per digest.
//! - **Raw bytes, exactly.** The bytes of each tool as received are kept
//!   byte for byte, once per SHA-256 of those bytes: two servers may format
//!   the same tool differently, and what was sent is the evidence. A tool
//!   that is not a valid tool object is kept raw only and recorded as a
//!   problem of its observation.
//! - **Tool sets.** A listing is the ordered list of (position, name, raw
//!   digest, canonical digest), content-addressed and stored once, so an
//!   observation of an unchanged server adds one small row, not a copy.
//! - **Observations.** Server, start and end times (Unix milliseconds),
//!   outcome (ok, or failed with its error), negotiated protocol version,
//!   `serverInfo`, capabilities and instructions (each stored once per
//!   digest), the tool set, and problems (malformed tools, duplicate names)
//!   when there are any. A failed observation has no tool set: it can never
//!   read as "every tool removed".
//! - **Reviews and baselines.** A reviewer's verdict on a change (one
//!   tool's drift at one observation): reviewed, or accepted. A server's
//!   baseline is the tools of its first successful observation until a
//!   change is accepted; accepting materialises it, then moves that tool to
//!   the change's new version, in one transaction.
//!
//! # Where
//!
//! [`project_location`] is the default store of one project (the folder that
//! holds its `plumbline.toml`), so that two projects that name a server
//! alike never see each other's history:
//!
//! 1. `$PLUMBLINE_STORE`, if set and not empty (one store shared on
//!    purpose);
//! 2. `DATA/plumbline/projects/<folder>-<hash>/plumbline.db`, where `DATA`
//!    is `$XDG_DATA_HOME` if that is an absolute path (the XDG Base
//!    Directory specification says to ignore a relative one), else
//!    `$HOME/.local/share`, `<folder>` the project folder's name and
//!    `<hash>` the start of the SHA-256 of its absolute path.
//!
//! [`default_location`] is the one store Plumbline used for every project
//! before, `DATA/plumbline/plumbline.db`; the CLI points to it when a
//! project has no store of its own yet. The CLI's `--store PATH` overrides
//! both.
//!
//! # How
//!
//! Callers use the [`Store`] trait over the backend [`open`] returns for a
//! [`Location`] ([`AnyStore`]): [`SqliteStore`], an embedded SQLite file
//! in WAL mode with its migrations compiled in (the default: nothing to
//! set up), or [`PostgresStore`], a PostgreSQL database a team shares.
//! Recording an observation is one transaction on either, so a process
//! killed mid-write never leaves half an observation.
//!
//! ```
//! use plumbline_store::prelude::*;
//! use plumbline_store::{NewObservation, Outcome, RawTool, SqliteStore};
//!
//! let mut store = SqliteStore::open_in_memory()?;
//! store.put_server("demo", r#"{"transport":"stdio","command":"demo-server"}"#)?;
//! let id = store.record_observation(&NewObservation {
//!     server: "demo".into(),
//!     started_at_ms: 1_700_000_000_000,
//!     finished_at_ms: 1_700_000_000_120,
//!     outcome: Outcome::Ok,
//!     protocol_version: Some("2025-06-18".into()),
//!     server_info: None,
//!     capabilities: None,
//!     instructions: None,
//!     authorization: None,
//!     tools: vec![RawTool {
//!         name: Some("add".into()),
//!         raw: br#"{ "name": "add", "description": "Adds." }"#.to_vec(),
//!         normalized: None,
//!     }],
//!     problems: vec![],
//! })?;
//! let observation = store.observation(id)?.expect("just recorded");
//! let tool = &observation.tools[0];
//! let raw = store.raw_tool(&tool.raw_digest)?.expect("kept");
//! assert_eq!(raw, br#"{ "name": "add", "description": "Adds." }"#);
//! let canonical = store.tool_version(&tool.canonical_digest.expect("valid"))?;
//! assert_eq!(canonical.as_deref(), Some(&br#"{"description":"Adds.","name":"add"}"#[..]));
//! # Ok::<(), plumbline_store::StoreError>(())
//! ```

pub use plumbline_base::canonical;
mod any;
mod error;
pub mod lease;
mod listing;
mod location;
pub mod model;

/// The store's traits, for calling a backend's methods directly.
pub mod prelude {
    pub use crate::{GuardLog, HistoryStore, Leases, Outbox, ReviewStore, Rows, Store};
}
mod pg;
pub(crate) mod sqlite;
pub mod tables;
#[cfg(feature = "testing")]
pub mod testing;
pub mod time;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

pub use any::{open, AnyStore};
pub use error::{BackendError, StoreError};
pub use lease::{Lease, LeaseClaim, LeaseToken};
pub use listing::inventory_text;
pub use location::Location;
pub use model::{
    AlertCounts, AlertId, Baseline, BaselineEdit, BaselineTool, GuardEvent, NewAlert,
    NewGuardEvent, NewObservation, NewReview, Normalized, NormalizedTool, NormalizedValue,
    Observation, ObservationId, ObservationSummary, OutboxAlert, Outcome, Problem, ProblemKind,
    RawTool, Review, ReviewStatus, Server, ToolEntry, ToolHistoryEntry,
};
pub use pg::{PostgresLocation, PostgresStore};
pub use plumbline_base::canonical::{canonicalize, canonicalize_value, CanonicalError};
pub use plumbline_base::digest::{digest, Digest, DigestParseError};
pub use sqlite::SqliteStore;

/// The store as callers see it, whatever the backend: one trait per
/// concern, and [`Store`] for all of them.
///
/// Reads take `&self` and writes `&mut self`. Methods are synchronous; an
/// async caller runs them on a blocking thread. To call a backend's
/// methods directly, `use plumbline_store::prelude::*`.
pub trait Store: HistoryStore + ReviewStore + Outbox + Leases + Rows + GuardLog {}

impl<T: HistoryStore + ReviewStore + Outbox + Leases + Rows + GuardLog> Store for T {}

/// What the runtime guard refused or saw, kept beside the observations.
pub trait GuardLog {
    /// Keeps one event of a server the store knows; its id.
    fn record_guard_event(&mut self, event: &NewGuardEvent) -> Result<i64, StoreError>;

    /// The latest `limit` events, newest first.
    fn guard_events(&self, limit: u32) -> Result<Vec<GuardEvent>, StoreError>;
}

/// The history: servers, observations with their content, and what is
/// derived from them (graded summaries, inventories).
pub trait HistoryStore {
    /// The summary of the drift from tool set `old` to `new` that
    /// `grader` stored with [`Store::put_drift_summary`], if any. Derived
    /// data: the store keeps the bytes and never reads them.
    fn drift_summary(
        &self,
        old: &Digest,
        new: &Digest,
        grader: &str,
    ) -> Result<Option<Vec<u8>>, StoreError>;

    /// Keeps `grader`'s summary of the drift from tool set `old` to `new`,
    /// replacing one stored under the same key.
    fn put_drift_summary(
        &mut self,
        old: &Digest,
        new: &Digest,
        grader: &str,
        summary: &[u8],
    ) -> Result<(), StoreError>;

    /// Keeps the foreign inventory (the tool names of the other servers)
    /// that `observation`'s change was graded with; returns its digest
    /// ([`inventory_text`]). Replaces one kept before.
    fn put_inventory(
        &mut self,
        observation: ObservationId,
        names: &[String],
    ) -> Result<Digest, StoreError>;

    /// The digest of the inventory kept for `observation`: `None` when its
    /// change was graded without one (or it has no change). Readers need
    /// only this to find a stored grade; the names, only to grade again.
    fn inventory(&self, observation: ObservationId) -> Result<Option<Digest>, StoreError>;

    /// The names of the inventory with digest `inventory`, sorted, each
    /// once; `None` when the store has none by that digest.
    fn inventory_names(&self, inventory: &Digest) -> Result<Option<Vec<String>>, StoreError>;

    /// Registers a server, or replaces the identity of one already known.
    /// `identity` is a JSON object (transport and command or URL, no
    /// secrets); it is stored in RFC 8785 canonical form.
    fn put_server(&mut self, name: &str, identity: &str) -> Result<(), StoreError>;

    /// Every registered server, sorted by name.
    fn servers(&self) -> Result<Vec<Server>, StoreError>;

    /// One registered server; `None` when the name is not registered.
    fn server(&self, name: &str) -> Result<Option<Server>, StoreError>;

    /// Records one observation of a registered server, all or nothing.
    ///
    /// The store computes each tool's canonical form from its raw bytes,
    /// records a malformed tool (kept raw only) and each repeated tool name
    /// as problems, and adds the caller's problems; identical problems are
    /// recorded once.
    fn record_observation(
        &mut self,
        observation: &NewObservation,
    ) -> Result<ObservationId, StoreError>;

    /// A server's observations, newest first, at most `limit` of them.
    fn timeline(&self, server: &str, limit: u32) -> Result<Vec<ObservationSummary>, StoreError>;

    /// Where the server's tool set changed: each successful observation
    /// whose tool set differs from the server's previous successful one,
    /// paired with that one, oldest first. Recorded with each observation,
    /// so this costs the number of changes, not of observations.
    fn tool_set_changes(
        &self,
        server: &str,
    ) -> Result<Vec<(ObservationSummary, ObservationSummary)>, StoreError>;

    /// One observation's summary, without its tools; `None` if there is no
    /// observation with that id.
    fn observation_summary(
        &self,
        id: ObservationId,
    ) -> Result<Option<ObservationSummary>, StoreError>;

    /// One observation with its tools and problems; `None` if there is no
    /// observation with that id.
    fn observation(&self, id: ObservationId) -> Result<Option<Observation>, StoreError>;

    /// The server's latest successful observation recorded before `before`,
    /// or its latest successful one overall when `before` is `None`: the
    /// baseline that drift is measured against.
    fn latest_successful(
        &self,
        server: &str,
        before: Option<ObservationId>,
    ) -> Result<Option<ObservationSummary>, StoreError>;

    /// The server's latest observation before `before` (or overall) that
    /// recorded what the server publishes about its authorization
    /// ([`NewObservation::authorization`]): what a newer document is
    /// compared with.
    fn latest_authorization(
        &self,
        server: &str,
        before: Option<ObservationId>,
    ) -> Result<Option<ObservationSummary>, StoreError>;

    /// A recorded document (serverInfo, capabilities, instructions, an
    /// authorization document) by the digest of its bytes.
    fn document_by_digest(&self, digest: &Digest) -> Result<Option<Vec<u8>>, StoreError>;

    /// The canonical bytes of the tool version with this digest.
    fn tool_version(&self, canonical: &Digest) -> Result<Option<Vec<u8>>, StoreError>;

    /// The raw bytes, as received, with this digest.
    fn raw_tool(&self, raw: &Digest) -> Result<Option<Vec<u8>>, StoreError>;

    /// The successful observations at which the server's tool called `tool`
    /// first appeared, changed canonical form, disappeared or came back,
    /// oldest first. Failed observations are not part of a history. When a
    /// listing holds the name twice, the first is the tool.
    fn tool_history(&self, server: &str, tool: &str) -> Result<Vec<ToolHistoryEntry>, StoreError>;

    /// [`Store::record_observation`] under `lease`: recorded only while
    /// the server's lease has that holder and epoch, in the same
    /// transaction; otherwise [`StoreError::LeaseLost`] and nothing is
    /// written.
    fn record_observation_under(
        &mut self,
        observation: &NewObservation,
        lease: &LeaseToken,
    ) -> Result<ObservationId, StoreError>;

    /// Records observations that each repeat their `previous` exactly
    /// (the caller knows it recorded that one from a listing with the same
    /// bytes): for each, a new row sharing its content; all in one
    /// transaction, one round trip on PostgreSQL (a function of its
    /// schema). Each answer is `None`, with nothing written for it, unless
    /// its `previous` is still its server's newest observation, successful
    /// and without problems, the server's identity is still as given, and
    /// its lease (if any) is still held: the caller then records it with
    /// [`Store::record_observation`], which finds out why. At most one
    /// repeat per server; they are recorded in the order of the servers'
    /// names (so that two such batches never wait on each other in a
    /// cycle).
    fn record_repeats(
        &mut self,
        repeats: &[Repeat],
    ) -> Result<Vec<Option<ObservationId>>, StoreError>;

    /// The tool names of the latest successful observation of every server
    /// but `server`, sorted, each once: the inventory a change of
    /// `server` is graded with. Kept as observations are recorded, so it
    /// is one statement however many servers the history holds.
    fn foreign_names(&self, server: &str) -> Result<Vec<String>, StoreError>;

    /// This history's id: drawn when the store was made, the same for
    /// every process that opens it, and different for every other store
    /// (a copy included). Alerts name it ([`NewAlert`] delivery ids).
    fn history_id(&self) -> Result<String, StoreError>;

    /// How many statements this process has sent to databases of this
    /// handle's kind, every handle counted (for PostgreSQL round trips, a
    /// prepare, BEGIN and COMMIT included; for SQLite statements run): what
    /// the watcher's metrics show and a benchmark divides by the
    /// observations recorded.
    fn statements(&self) -> u64;
}

/// An observation that repeats the server's previous one
/// ([`Store::record_repeats`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repeat {
    pub server: String,
    /// How the server is reached, canonical ([`canonicalize`]), as stored.
    pub identity: String,
    /// The observation repeated.
    pub previous: ObservationId,
    pub started_at_ms: i64,
    pub finished_at_ms: i64,
    /// The lease the listing was made under, if any.
    pub lease: Option<LeaseToken>,
}

/// Reviews of changes, and the baselines accepting them builds.
pub trait ReviewStore {
    /// Marks a change reviewed, replacing any earlier verdict on it. The
    /// baseline is not touched (an earlier acceptance stays in effect). The
    /// observation must be a successful one: a failure has no changes.
    fn mark_reviewed(&mut self, review: &NewReview) -> Result<(), StoreError>;

    /// Accepts a change, all or nothing: materialises the server's implicit
    /// baseline (its first successful observation's tools) if no change was
    /// accepted before, applies `edits` to it in order, and records the
    /// verdict as accepted, replacing any earlier one. The observation must
    /// be a successful one, and every version set must be in the store.
    fn accept_change(
        &mut self,
        review: &NewReview,
        edits: &[BaselineEdit],
    ) -> Result<(), StoreError>;

    /// Marks every change of `reviews` reviewed, in one transaction: all
    /// of them or none.
    fn mark_all_reviewed(&mut self, reviews: &[NewReview]) -> Result<(), StoreError>;

    /// Accepts every change of `accepts` (each with its baseline edits, in
    /// order) in one transaction: all of them or none, as
    /// [`Store::accept_change`] does one.
    fn accept_changes(
        &mut self,
        accepts: &[(NewReview, Vec<BaselineEdit>)],
    ) -> Result<(), StoreError>;

    /// Every verdict on the changes of a server's observations, by
    /// observation, then tool name.
    fn reviews(&self, server: &str) -> Result<Vec<Review>, StoreError>;

    /// The server's baseline: tool name to accepted version, with where
    /// each came from. `None` when nothing was accepted and the server has
    /// no successful observation yet.
    fn baseline(&self, server: &str) -> Result<Option<Baseline>, StoreError>;
}

/// The alert outbox: enqueued once per observation, channel and key;
/// claimed, delivered, retried or given up on.
pub trait Outbox {
    /// Puts an alert in the outbox, unless one with the same observation,
    /// channel and key is there already (then `None`): re-examining an
    /// observation, after a restart say, never alerts twice.
    fn enqueue_alert(&mut self, alert: &NewAlert) -> Result<Option<AlertId>, StoreError>;

    /// Pending alerts (neither delivered nor failed), oldest first.
    fn pending_alerts(&self, limit: u32) -> Result<Vec<OutboxAlert>, StoreError>;

    /// The channels that hold an alert with `key` (delivered, pending or
    /// given up) for an observation of `server` newer than `after` (every
    /// observation when `None`), sorted: who was told of a failure streak
    /// that began after `after`, whoever recorded its first failure.
    fn alerted_since(
        &self,
        server: &str,
        key: &str,
        after: Option<ObservationId>,
    ) -> Result<Vec<String>, StoreError>;

    /// The pending alerts of `channel` whose next attempt is due at
    /// `now_ms`, soonest due first.
    fn due_alerts(
        &self,
        channel: &str,
        now_ms: i64,
        limit: u32,
    ) -> Result<Vec<OutboxAlert>, StoreError>;

    /// When the next pending alert of `channel` is due; `None` when it has
    /// none.
    fn next_alert_due(&self, channel: &str) -> Result<Option<i64>, StoreError>;

    /// Alerts given up on, most recent first.
    fn failed_alerts(&self, limit: u32) -> Result<Vec<OutboxAlert>, StoreError>;

    /// How many alerts are pending, failed and delivered.
    fn alert_counts(&self) -> Result<AlertCounts, StoreError>;

    /// Each channel that has pending alerts, with how many.
    fn pending_alert_channels(&self) -> Result<Vec<(String, u64)>, StoreError>;

    /// Marks an alert delivered.
    fn mark_alert_delivered(&mut self, id: AlertId, at_ms: i64) -> Result<(), StoreError>;

    /// Records a failed delivery attempt: the alert is tried again at
    /// `retry_at_ms`.
    fn retry_alert(&mut self, id: AlertId, error: &str, retry_at_ms: i64)
        -> Result<(), StoreError>;

    /// Records a last failed delivery attempt at `at_ms`: the alert is
    /// given up on (marked failed, kept with its error, never tried again).
    fn give_up_alert(&mut self, id: AlertId, error: &str, at_ms: i64) -> Result<(), StoreError>;

    /// Gives up on every pending alert of `channel` (one no longer
    /// configured), recording `reason`; returns how many.
    fn retire_alerts(&mut self, channel: &str, reason: &str, at_ms: i64)
        -> Result<u64, StoreError>;

    /// Takes up to `limit` due alerts of `channel` for delivery, in one
    /// transaction: each is due for nobody else until `now_ms + claim_ms`
    /// (a deliverer that dies mid-delivery leaves it to be claimed again
    /// then). Soonest due first.
    fn claim_due_alerts(
        &mut self,
        channel: &str,
        now_ms: i64,
        claim_ms: i64,
        limit: u32,
    ) -> Result<Vec<OutboxAlert>, StoreError>;
}

/// Leases: which watcher observes which server when several share one
/// history ([`lease`]).
pub trait Leases {
    /// Claims `claim.holder`'s share of `claim.servers`, in one
    /// transaction: renews what it holds, releases what is past its share
    /// or no longer in its registry, takes free servers under a new epoch
    /// ([`lease::decide`]), and records the watcher as seen. Returns the
    /// leases it holds afterwards, by server.
    fn claim_leases(&mut self, claim: &LeaseClaim) -> Result<Vec<Lease>, StoreError>;

    /// Releases every lease of `holder` (a watcher stopping) and forgets
    /// it as a watcher; returns how many leases it held.
    fn release_leases(&mut self, holder: &str) -> Result<u64, StoreError>;

    /// Every lease, by server.
    fn leases(&self) -> Result<Vec<Lease>, StoreError>;

    /// The time leases are measured in (Unix ms): the database server's
    /// for PostgreSQL, so that watchers whose clocks disagree agree on
    /// which leases have run out; this machine's for SQLite.
    fn clock_ms(&self) -> Result<i64, StoreError>;
}

/// Whole rows of every table, for copying a store and checking one
/// ([`tables`]).
pub trait Rows {
    /// Up to `limit` rows of `table` in key order, after the row whose
    /// key is `after` (from the first when `None`).
    fn read_rows(
        &self,
        table: &str,
        after: Option<&[tables::Cell]>,
        limit: u32,
    ) -> Result<Vec<tables::Row>, StoreError>;

    /// Writes `rows` into `table` in one transaction, each unless a row
    /// with its key (or a unique value of it) is there already; returns
    /// how many were written.
    fn write_rows(&mut self, table: &str, rows: &[tables::Row]) -> Result<u64, StoreError>;

    /// After writing rows: ids this store generates next follow the
    /// highest written.
    fn finish_writing_rows(&mut self) -> Result<(), StoreError>;
}

/// The per-user store every project shared before stores were per project
/// (see the crate documentation for the order of precedence).
pub fn default_location() -> Result<Location, StoreError> {
    default_path_from(|name| std::env::var_os(name))
}

/// The default store of the project whose registry is in folder `project`
/// (an absolute path; see the crate documentation).
pub fn project_location(project: &Path) -> Result<Location, StoreError> {
    project_path_from(project, |name| std::env::var_os(name))
}

/// [`default_location`] over any environment, so the rules are testable
/// without changing the process environment.
fn default_path_from(env: impl Fn(&str) -> Option<OsString>) -> Result<Location, StoreError> {
    if let Some(location) = env("PLUMBLINE_STORE").filter(|v| !v.is_empty()) {
        return from_variable(location);
    }
    Ok(Location::Sqlite(data_dir(&env)?.join("plumbline.db")))
}

/// `PLUMBLINE_STORE`'s store: a store location ([`Location`]); a value
/// that is not Unicode is a path.
fn from_variable(value: OsString) -> Result<Location, StoreError> {
    match value.into_string() {
        Ok(text) => Location::parse(&text),
        Err(path) => Ok(Location::Sqlite(PathBuf::from(path))),
    }
}

/// [`project_location`] over any environment.
fn project_path_from(
    project: &Path,
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<Location, StoreError> {
    if let Some(location) = env("PLUMBLINE_STORE").filter(|v| !v.is_empty()) {
        return from_variable(location);
    }
    let folder: String = project
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".to_owned())
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    let hash = digest(project.as_os_str().as_encoded_bytes()).to_hex();
    Ok(Location::Sqlite(
        data_dir(&env)?
            .join("projects")
            .join(format!("{folder}-{}", &hash[..12]))
            .join("plumbline.db"),
    ))
}

/// `DATA/plumbline`: `$XDG_DATA_HOME` when absolute, else
/// `$HOME/.local/share`.
fn data_dir(env: &impl Fn(&str) -> Option<OsString>) -> Result<PathBuf, StoreError> {
    let set = |name: &str| env(name).filter(|v| !v.is_empty());
    if let Some(data) = set("XDG_DATA_HOME").map(PathBuf::from) {
        if data.is_absolute() {
            return Ok(data.join("plumbline"));
        }
    }
    if let Some(home) = set("HOME") {
        return Ok(PathBuf::from(home)
            .join(".local")
            .join("share")
            .join("plumbline"));
    }
    Err(StoreError::NoDefaultPath)
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_project_has_its_own_default_store() {
        let vars = [("HOME", "/home/u")];
        let a = file(project_path_from(Path::new("/work/a/shop"), env(&vars)).unwrap()).unwrap();
        let b = file(project_path_from(Path::new("/work/b/shop"), env(&vars)).unwrap()).unwrap();
        assert_ne!(a, b, "two folders named alike");
        assert!(
            a.to_string_lossy()
                .starts_with("/home/u/.local/share/plumbline/projects/shop-"),
            "{a:?}"
        );
        assert!(a.ends_with("plumbline.db"));
        assert_eq!(
            a,
            file(project_path_from(Path::new("/work/a/shop"), env(&vars)).unwrap()).unwrap(),
            "stable"
        );
        let shared = [("PLUMBLINE_STORE", "/srv/p.db"), ("HOME", "/home/u")];
        assert_eq!(
            file(project_path_from(Path::new("/work/a/shop"), env(&shared)).unwrap()).unwrap(),
            PathBuf::from("/srv/p.db")
        );
        let odd =
            file(project_path_from(Path::new("/work/my project ☃"), env(&vars)).unwrap()).unwrap();
        let folder = odd.parent().unwrap().file_name().unwrap().to_str().unwrap();
        assert!(folder.starts_with("my_project__-"), "{folder}");
    }

    use super::*;

    fn file(location: Location) -> Option<PathBuf> {
        location.sqlite_path().map(Path::to_path_buf)
    }

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn plumbline_store_variable_wins_over_everything() {
        let vars = [
            ("PLUMBLINE_STORE", "/srv/p.db"),
            ("XDG_DATA_HOME", "/x"),
            ("HOME", "/home/u"),
        ];
        assert_eq!(
            default_path_from(env(&vars)).ok().and_then(file),
            Some("/srv/p.db".into())
        );
    }

    #[test]
    fn plumbline_store_variable_is_a_store_location() {
        let vars = [("PLUMBLINE_STORE", "sqlite:///srv/team.db"), ("HOME", "/h")];
        assert_eq!(
            default_path_from(env(&vars)).ok().and_then(file),
            Some("/srv/team.db".into())
        );
        let project = Path::new("/work/p");
        assert_eq!(
            project_path_from(project, env(&vars)).ok().and_then(file),
            Some("/srv/team.db".into())
        );
        // Not a file named after a URL.
        let vars = [("PLUMBLINE_STORE", "postgres://h/db"), ("HOME", "/h")];
        assert!(matches!(
            project_path_from(project, env(&vars)),
            Ok(Location::Postgres(_))
        ));
        let vars = [("PLUMBLINE_STORE", "mysql://h/db"), ("HOME", "/h")];
        assert!(matches!(
            project_path_from(project, env(&vars)),
            Err(StoreError::Location { .. })
        ));
    }

    #[test]
    fn xdg_data_home_comes_before_home() {
        let vars = [("XDG_DATA_HOME", "/x"), ("HOME", "/home/u")];
        assert_eq!(
            default_path_from(env(&vars)).ok().and_then(file),
            Some("/x/plumbline/plumbline.db".into())
        );
    }

    #[test]
    fn relative_or_empty_xdg_data_home_falls_back_to_home() {
        for xdg in ["relative/dir", ""] {
            let vars = [
                ("XDG_DATA_HOME", xdg),
                ("PLUMBLINE_STORE", ""),
                ("HOME", "/home/u"),
            ];
            assert_eq!(
                default_path_from(env(&vars)).ok().and_then(file),
                Some("/home/u/.local/share/plumbline/plumbline.db".into())
            );
        }
    }

    #[test]
    fn no_variables_is_an_error_not_a_guess() {
        assert!(matches!(
            default_path_from(env(&[])),
            Err(StoreError::NoDefaultPath)
        ));
    }
}
