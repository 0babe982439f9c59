//! A thin MCP client for monitoring: it lists every tool a server publishes
//! and keeps each tool object exactly as the server sent it.
//!
//! A monitor needs what general-purpose SDKs deliberately do not give: the
//! raw bytes of every tool (unknown fields included), a listing that goes
//! on when one tool is malformed, hard limits on time, message size, tool
//! count and pages, and no caching. So the protocol logic here is our own
//! and small; `rmcp` appears only in tests, as an independent server.
//!
//! Entry points: [`list_tools`] with a [`ServerSpec`] and [`Limits`] for
//! one listing; [`Session`] to keep a connection open and hear
//! `notifications/tools/list_changed` between listings. [`wire`] is the
//! layer under both, public for a relay that passes on messages it does
//! not interpret (the runtime guard).

mod environment;
mod error;
mod framing;
mod http;
mod legacy_sse;
mod limits;
mod listing;
mod protocol;
mod session;
mod sse;
mod stdio;

pub use environment::{
    child_environment, child_environment_from_ours, is_inherited_by_default,
    is_valid_name as is_valid_env_name, DEFAULT_INHERITED,
};
pub use error::{Ended, ListError};
pub use http::{Auth, HttpClient, HttpSpec, AUTHORIZATIONS_PER_REQUEST};
pub use limits::Limits;
pub use listing::{Era, ListedTool, Listing, ListingProblem};
pub use protocol::client_capabilities;
pub use session::Session;
pub use stdio::StdioSpec;

/// The transport layer without the protocol: bounded lines, bounded SSE
/// events, and a stdio server's process (its environment rules, its
/// process group, its shutdown). For code that relays MCP messages rather
/// than speaking MCP itself.
pub mod wire {
    pub use crate::framing::read_line;
    pub use crate::http::client as http_client;
    pub use crate::sse::{Block as SseBlock, Event as SseEvent, Parser as SseParser};
    pub use crate::stdio::{command, ProcessGroup};
}

/// The authorization flow (OAuth 2.1) that HTTP sessions answer refusals
/// with ([`HttpSpec::auth`]).
pub use plumbline_auth as auth;

/// How to reach a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerSpec {
    /// A local process speaking newline-delimited JSON-RPC on stdin/stdout.
    Stdio(StdioSpec),
    /// A Streamable HTTP endpoint.
    Http(HttpSpec),
    /// A legacy HTTP+SSE endpoint (protocol 2024-11-05): the URL of its
    /// event stream.
    Sse(HttpSpec),
}

/// Connects to `server`, lists every tool, and disconnects. Never caches:
/// each call is a fresh connection and a fresh listing.
pub async fn list_tools(server: &ServerSpec, limits: &Limits) -> Result<Listing, ListError> {
    match server {
        ServerSpec::Stdio(spec) => stdio::list_tools(spec, limits).await,
        ServerSpec::Http(spec) => http::list_tools(spec, limits).await,
        ServerSpec::Sse(spec) => legacy_sse::list_tools(spec, limits).await,
    }
}
