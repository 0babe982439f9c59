//! Bounds on what one listing may cost.

use std::time::Duration;

/// Every way a server could make a listing take forever or eat memory has a
/// bound here. The defaults suit real servers with room to spare; hostile
/// ones hit them and get a clear error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// From starting the process (or opening the connection) to the
    /// answer of the first request.
    pub connect_timeout: Duration,
    /// For the `initialize` (or `server/discover`) exchange.
    pub initialize_timeout: Duration,
    /// For the whole `tools/list` walk, all pages together.
    pub list_timeout: Duration,
    /// How long a 2026-07-28 probe (`server/discover`) may go unanswered
    /// before the server is taken for a legacy one.
    pub discover_timeout: Duration,
    /// The largest single JSON-RPC message accepted, in bytes.
    pub max_message_bytes: usize,
    /// The most tools accepted in one listing.
    pub max_tools: usize,
    /// The most `tools/list` pages followed.
    pub max_pages: usize,
    /// How much of a stdio server's stderr is kept (its end).
    pub stderr_bytes: usize,
    /// After closing a stdio server's stdin, how long to wait before
    /// SIGTERM, and again before SIGKILL.
    pub shutdown_grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            connect_timeout: Duration::from_secs(30),
            initialize_timeout: Duration::from_secs(30),
            list_timeout: Duration::from_secs(60),
            discover_timeout: Duration::from_secs(3),
            max_message_bytes: 32 << 20,
            max_tools: 10_000,
            max_pages: 1_000,
            stderr_bytes: 16 << 10,
            shutdown_grace: Duration::from_secs(1),
        }
    }
}
