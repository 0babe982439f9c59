//! `plumbline discover`: finds the MCP servers people already configured in
//! their MCP clients and maps each one to a Plumbline [`ServerConfig`].
//!
//! Clients and files, under a home directory and a project (working)
//! directory:
//!
//! | client         | files |
//! |----------------|-------|
//! | Claude Desktop | `~/.config/Claude/claude_desktop_config.json`, `~/Library/Application Support/Claude/claude_desktop_config.json` |
//! | Claude Code    | `~/.claude.json` (top level and every `projects.<path>`), `<project>/.mcp.json` |
//! | Cursor         | `~/.cursor/mcp.json`, `<project>/.cursor/mcp.json` |
//! | VS Code        | `~/.config/Code/User/settings.json` (`mcp` section), `~/.config/Code/User/mcp.json`, `<project>/.vscode/mcp.json` |
//! | Windsurf       | `~/.codeium/windsurf/mcp_config.json` |
//! | Gemini CLI     | `~/.gemini/settings.json`, `<project>/.gemini/settings.json` |
//!
//! Invariants:
//!
//! - Discovery never fails as a whole. A missing file is not an error; an
//!   unreadable or invalid file, or an entry that cannot be mapped, becomes a
//!   [`Skipped`] naming the file (and the line and column of a JSON syntax
//!   error) while every other file and entry is still imported.
//! - No literal secret is carried over. An environment or header value is kept
//!   only when it is entirely a variable reference (rewritten to Plumbline's
//!   `${NAME}`); any other value is replaced by `${PLUMBLINE_<SERVER>_<KEY>}`
//!   and that variable is reported in [`Found::secrets_to_set`].
//! - Output is deterministic: sorted by client, then file, then name.
//! - This module reads files and returns values: it never prints or writes.
//!
//! [`locations`] says where each client keeps its servers and reads a file;
//! [`entry`] maps one entry of each client's format; [`names`] settles
//! names, duplicates and secrets across all files; [`jsonc`] reads JSON with
//! comments.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::config::ServerConfig;

mod entry;
mod jsonc;
mod locations;
mod names;
#[cfg(test)]
mod tests;
pub(crate) mod wrap;

use entry::*;
use jsonc::*;
use locations::*;
use names::*;

/// An MCP client whose configuration files `discover` reads. The order of the
/// variants is the order of the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Client {
    ClaudeDesktop,
    ClaudeCode,
    Cursor,
    VsCode,
    Windsurf,
    GeminiCli,
}

impl Client {
    /// A short name, itself a valid server-name suffix.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Client::ClaudeDesktop => "claude-desktop",
            Client::ClaudeCode => "claude-code",
            Client::Cursor => "cursor",
            Client::VsCode => "vscode",
            Client::Windsurf => "windsurf",
            Client::GeminiCli => "gemini-cli",
        }
    }
}

/// A server found in a client's configuration, ready for `plumbline.toml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    pub client: Client,
    pub file: PathBuf,
    /// A valid Plumbline server name, unique among the results.
    pub name: String,
    /// Environment and header values are variable references only.
    pub config: ServerConfig,
    /// Variables the user must set before observing this server, sorted.
    pub secrets_to_set: Vec<String>,
    /// What was changed or guessed on the way (renames, inferred transports,
    /// replaced values, merged duplicates), for the user to review.
    pub notes: Vec<String>,
    /// Every entry imported as this server: its file, its Claude Code
    /// project scope (empty elsewhere) and its key there.
    pub origins: Vec<Origin>,
}

/// Where a client keeps one entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Origin {
    pub file: PathBuf,
    pub scope: String,
    pub key: String,
}

/// A file or an entry that could not be imported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Skipped {
    pub file: PathBuf,
    /// The server's name in the file; `None` when the whole file is skipped.
    pub name: Option<String>,
    pub reason: String,
}

/// Reads every known client configuration under `home` and `project`.
pub(crate) fn discover(home: &Path, project: &Path) -> (Vec<Found>, Vec<Skipped>) {
    let mut entries = Vec::new();
    let mut skipped = Vec::new();
    let mut seen = BTreeSet::new();
    for location in locations(home, project) {
        // Run from the home directory, a project file is a home file: read it once.
        let key = std::fs::canonicalize(&location.path).unwrap_or_else(|_| location.path.clone());
        if !seen.insert((location.client, key)) {
            continue;
        }
        let ctx = Ctx {
            client: location.client,
            home,
            project,
        };
        read_location(&ctx, &location, &mut entries, &mut skipped);
    }
    let found = finish(entries);
    skipped.sort_by(|a, b| (&a.file, &a.name, &a.reason).cmp(&(&b.file, &b.name, &b.reason)));
    (found, skipped)
}

/// Every file `discover` reads, with its client's name, in search order.
pub(crate) fn searched(home: &Path, project: &Path) -> Vec<(&'static str, PathBuf)> {
    locations(home, project)
        .into_iter()
        .map(|l| (l.client.label(), l.path))
        .collect()
}

/// The servers found, as a `plumbline.toml` holding just them.
pub fn as_config(found: &[Found]) -> crate::config::Config {
    crate::config::Config {
        servers: found
            .iter()
            .map(|f| (f.name.clone(), f.config.clone()))
            .collect(),
        ..Default::default()
    }
}

// ---------------------------------------------------------------------------
// Types the submodules share (kept here so that their fields are visible to
// every submodule).

/// How a file lays out its servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// `{"mcpServers": {NAME: ENTRY}}`.
    McpServers,
    /// Claude Code's `~/.claude.json`: top-level `mcpServers` (user scope)
    /// and `projects.<absolute path>.mcpServers` (local scope).
    ClaudeJson,
    /// VS Code `mcp.json`: `{"servers": {...}, "inputs": [...]}`.
    VsCodeMcp,
    /// VS Code user settings: `{"mcp": {"servers": {...}, "inputs": [...]}}`.
    VsCodeSettings,
    /// Gemini CLI `settings.json`: `mcpServers`, minus names in `mcp.excluded`.
    GeminiSettings,
}

struct Location {
    client: Client,
    path: PathBuf,
    layout: Layout,
    /// Comments and trailing commas allowed (VS Code and Gemini CLI parse
    /// their settings as JSON with comments).
    jsonc: bool,
}

/// What one entry is read against.
struct Ctx<'a> {
    client: Client,
    home: &'a Path,
    project: &'a Path,
}

/// One server as read from a file, before naming and secret replacement.
struct Entry {
    client: Client,
    file: PathBuf,
    /// Where in the file (a Claude Code project path), for ordering.
    scope: String,
    name: String,
    /// References already rewritten to `${NAME}`; literal values still as
    /// written (they are compared when deduplicating, then replaced).
    config: ServerConfig,
    review: Review,
}

/// What the user must do or know about one server, gathered while reading it.
#[derive(Default)]
struct Review {
    /// Environment or header keys whose values are literal.
    literal_keys: Vec<String>,
    secrets_to_set: Vec<String>,
    notes: Vec<String>,
}

/// The servers of one file, or of one Claude Code project in `~/.claude.json`.
struct Group<'a> {
    /// `mcpServers` or `servers`, for messages.
    key: &'static str,
    servers: &'a Value,
    /// The Claude Code project path, empty elsewhere; orders the output.
    scope: String,
    /// VS Code `inputs`.
    inputs: Option<&'a Value>,
    /// Gemini CLI `mcp.excluded`.
    excluded: Vec<&'a str>,
    /// A note for every server of the group.
    note: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transport {
    Stdio,
    Http,
    Sse,
}

enum Reference {
    Env {
        name: String,
        default: Option<String>,
    },
    Input(String),
}
