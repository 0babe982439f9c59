//! The store's errors. Each names the store file and, where one is
//! involved, the server, so a message read in a log says where to look.
//!
//! A database's own error is kept as a [`BackendError`]: boxed, because a
//! driver's errors are large and every `Result` of the store would
//! otherwise carry their size, and opaque, so that no caller depends on
//! which database is behind the store (the chain of `source()` still reads
//! the driver's message).

use std::path::PathBuf;

/// The error of the database behind the store, as its driver gave it.
pub type BackendError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything that can go wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot create the directory {path} for the store")]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("cannot open the store {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: BackendError,
    },

    #[error(
        "the store {path} has schema version {found}, newer than the {known} this \
         build of plumbline knows; use a newer plumbline or another store"
    )]
    NewerSchema {
        path: PathBuf,
        found: i64,
        known: i64,
    },

    #[error("cannot migrate the store {path} to schema version {version}")]
    Migrate {
        path: PathBuf,
        version: i64,
        #[source]
        source: BackendError,
    },

    #[error("no default store path: neither PLUMBLINE_STORE, XDG_DATA_HOME nor HOME is set")]
    NoDefaultPath,

    /// A store location that names no store this build can open (its
    /// password, if it had one, left out).
    #[error("the store location {location:?} cannot be used: {reason}")]
    Location { location: String, reason: String },

    #[error("the identity of server {server:?} is not a JSON object")]
    InvalidIdentity {
        server: String,
        #[source]
        source: Box<crate::CanonicalError>,
    },

    #[error("server {server:?} is not registered in the store {path}")]
    UnknownServer { path: PathBuf, server: String },

    #[error("the observation of server {server:?} is invalid: {reason}")]
    InvalidObservation { server: String, reason: String },

    #[error("cannot write {what} for server {server:?} to the store {path}")]
    Write {
        path: PathBuf,
        server: String,
        what: &'static str,
        #[source]
        source: BackendError,
    },

    #[error("cannot write {what} to the store {path}")]
    WriteDerived {
        path: PathBuf,
        what: &'static str,
        #[source]
        source: BackendError,
    },

    #[error("cannot read {what} from the store {path}")]
    Read {
        path: PathBuf,
        what: String,
        #[source]
        source: BackendError,
    },

    #[error("cannot record a review of tool {tool:?} at observation {observation}: {reason}")]
    InvalidReview {
        observation: crate::ObservationId,
        tool: String,
        reason: String,
    },

    /// An observation made under a lease another watcher has since taken
    /// (this one paused, or lost the database, past its lease).
    #[error(
        "not recording the observation of server {server:?}: its lease (epoch {epoch}) \
         is no longer this watcher's"
    )]
    LeaseLost { server: String, epoch: i64 },

    #[error("the store {path} is inconsistent: {detail}")]
    Corrupt { path: PathBuf, detail: String },
}
