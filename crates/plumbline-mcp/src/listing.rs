//! What one successful listing holds.

/// The protocol era a server spoke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// 2025-11-25 and earlier: `initialize`, then requests in a session.
    Session,
    /// 2026-07-28 and later: stateless, discovered with `server/discover`.
    Stateless,
}

/// One element of the `tools` arrays, in wire order across pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedTool {
    /// The element exactly as the server sent it, byte for byte.
    pub raw: Vec<u8>,
    /// Its top-level `name` string, when it has one: also for a tool the
    /// taxonomy's reader refuses (`plumbline_base::json::tool_name`).
    pub name: Option<String>,
}

/// Something wrong with part of a listing that did not stop it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListingProblem {
    /// The element at `position` is not a tool: not valid JSON under the
    /// taxonomy's reader, not an object, or without a string `name`.
    MalformedTool { position: usize, error: String },
    /// More than one tool carries `name`; all are kept, at `positions`.
    DuplicateName { name: String, positions: Vec<usize> },
    /// A line of a stdio server's output that was not JSON-RPC (a log line
    /// printed to stdout, say), skipped within a bound; its start,
    /// sanitised.
    SkippedOutput { excerpt: String },
    /// What the server publishes about its authorization could not be
    /// read this time (the listing itself succeeded).
    AuthorizationMetadata { error: String },
    /// The server offers prompts, and `prompts/list` failed (the tools
    /// were listed).
    Prompts { error: String },
}

/// A complete listing of a server's tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    pub era: Era,
    /// The negotiated (or, for stateless servers, chosen) protocol version.
    pub protocol_version: String,
    /// `serverInfo` exactly as sent, when sent.
    pub server_info: Option<Vec<u8>>,
    /// The server's `capabilities` exactly as sent, when sent.
    pub capabilities: Option<Vec<u8>>,
    /// The server's `instructions`, when sent.
    pub instructions: Option<String>,
    /// For a server behind OAuth, what it publishes about its
    /// authorization, read after the listing
    /// (`plumbline_auth::metadata::published`): canonical JSON.
    pub authorization: Option<Vec<u8>>,
    /// Every tool, in order.
    pub tools: Vec<ListedTool>,
    /// Every prompt (`prompts/list`, every page), as sent, where the
    /// server declares the `prompts` capability.
    pub prompts: Option<Vec<ListedTool>>,
    pub problems: Vec<ListingProblem>,
    /// How many `tools/list` pages were read.
    pub pages: usize,
    /// Whether the server announced `notifications/tools/list_changed`
    /// while the listing ran (the listing was then taken again, once).
    pub relisted: bool,
}
