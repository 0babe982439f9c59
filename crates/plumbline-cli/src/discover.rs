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

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::config::ServerConfig;

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

// ---------------------------------------------------------------------------
// Where each client keeps its servers.

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

fn locations(home: &Path, project: &Path) -> Vec<Location> {
    let at = |client, path: PathBuf, layout, jsonc| Location {
        client,
        path,
        layout,
        jsonc,
    };
    use Client::*;
    use Layout::*;
    vec![
        at(
            ClaudeDesktop,
            home.join(".config/Claude/claude_desktop_config.json"),
            McpServers,
            false,
        ),
        at(
            ClaudeDesktop,
            home.join("Library/Application Support/Claude/claude_desktop_config.json"),
            McpServers,
            false,
        ),
        at(ClaudeCode, home.join(".claude.json"), ClaudeJson, false),
        at(ClaudeCode, project.join(".mcp.json"), McpServers, false),
        at(Cursor, home.join(".cursor/mcp.json"), McpServers, false),
        at(Cursor, project.join(".cursor/mcp.json"), McpServers, false),
        at(
            VsCode,
            home.join(".config/Code/User/settings.json"),
            VsCodeSettings,
            true,
        ),
        at(
            VsCode,
            home.join(".config/Code/User/mcp.json"),
            VsCodeMcp,
            true,
        ),
        at(VsCode, project.join(".vscode/mcp.json"), VsCodeMcp, true),
        at(
            Windsurf,
            home.join(".codeium/windsurf/mcp_config.json"),
            McpServers,
            false,
        ),
        at(
            GeminiCli,
            home.join(".gemini/settings.json"),
            GeminiSettings,
            true,
        ),
        at(
            GeminiCli,
            project.join(".gemini/settings.json"),
            GeminiSettings,
            true,
        ),
    ]
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

fn read_location(
    ctx: &Ctx,
    location: &Location,
    entries: &mut Vec<Entry>,
    skipped: &mut Vec<Skipped>,
) {
    let path = &location.path;
    let skip_file = |skipped: &mut Vec<Skipped>, reason: String| {
        skipped.push(Skipped {
            file: path.clone(),
            name: None,
            reason: format!("{}: {reason}", path.display()),
        });
    };
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => return skip_file(skipped, format!("cannot read: {e}")),
    };
    let Ok(text) = String::from_utf8(bytes) else {
        return skip_file(skipped, "not UTF-8 text".to_owned());
    };
    // Clients create empty files before the first server is added.
    if text.trim().is_empty() {
        return;
    }
    let text = if location.jsonc {
        strip_jsonc(&text)
    } else {
        text
    };
    let root: Value = match serde_json::from_str(&text) {
        Ok(root) => root,
        Err(e) => {
            let message = e.to_string();
            let position = format!(" at line {} column {}", e.line(), e.column());
            let message = message.strip_suffix(&position).unwrap_or(&message);
            let reason = format!(
                "invalid JSON at line {}, column {}: {message}",
                e.line(),
                e.column()
            );
            return skip_file(skipped, reason);
        }
    };
    let Value::Object(root) = root else {
        return skip_file(skipped, "the top level is not a JSON object".to_owned());
    };

    let mut groups = Vec::new();
    match location.layout {
        Layout::McpServers => {
            if let Some(servers) = root.get("mcpServers") {
                groups.push(Group::new("mcpServers", servers));
            }
        }
        Layout::ClaudeJson => {
            if let Some(servers) = root.get("mcpServers") {
                groups.push(Group::new("mcpServers", servers));
            }
            match root.get("projects") {
                None => {}
                Some(Value::Object(projects)) => {
                    for (dir, settings) in projects {
                        if let Some(servers) = settings.get("mcpServers") {
                            groups.push(Group {
                                scope: dir.clone(),
                                note: Some(format!("Claude Code local scope of project {dir}")),
                                ..Group::new("mcpServers", servers)
                            });
                        }
                    }
                }
                Some(_) => skip_file(skipped, "`projects` is not a JSON object".to_owned()),
            }
        }
        Layout::VsCodeMcp => {
            if let Some(servers) = root.get("servers") {
                groups.push(Group {
                    inputs: root.get("inputs"),
                    ..Group::new("servers", servers)
                });
            }
        }
        Layout::VsCodeSettings => {
            let mcp = root.get("mcp");
            if let Some(servers) = mcp.and_then(|m| m.get("servers")) {
                groups.push(Group {
                    inputs: mcp.and_then(|m| m.get("inputs")),
                    ..Group::new("servers", servers)
                });
            }
        }
        Layout::GeminiSettings => {
            if let Some(servers) = root.get("mcpServers") {
                let excluded = root
                    .get("mcp")
                    .and_then(|m| m.get("excluded"))
                    .and_then(Value::as_array)
                    .map(|names| names.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                groups.push(Group {
                    excluded,
                    ..Group::new("mcpServers", servers)
                });
            }
        }
    }

    for group in groups {
        let Value::Object(servers) = group.servers else {
            skip_file(skipped, format!("`{}` is not a JSON object", group.key));
            continue;
        };
        let inputs = input_descriptions(group.inputs);
        for (name, value) in servers {
            let skip = |reason: String| Skipped {
                file: path.clone(),
                name: Some(name.clone()),
                reason,
            };
            if group.excluded.contains(&name.as_str()) {
                skipped.push(skip("disabled (listed in mcp.excluded)".to_owned()));
                continue;
            }
            let Value::Object(obj) = value else {
                skipped.push(skip("the entry is not a JSON object".to_owned()));
                continue;
            };
            if obj.get("disabled") == Some(&Value::Bool(true)) {
                skipped.push(skip("disabled".to_owned()));
                continue;
            }
            match parse_entry(ctx, obj, &inputs) {
                Ok((config, mut review)) => {
                    if let Some(note) = &group.note {
                        review.notes.insert(0, note.clone());
                    }
                    entries.push(Entry {
                        client: ctx.client,
                        file: path.clone(),
                        scope: group.scope.clone(),
                        name: name.clone(),
                        config,
                        review,
                    });
                }
                Err(reason) => skipped.push(skip(reason)),
            }
        }
    }
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

impl<'a> Group<'a> {
    fn new(key: &'static str, servers: &'a Value) -> Self {
        Group {
            key,
            servers,
            scope: String::new(),
            inputs: None,
            excluded: Vec::new(),
            note: None,
        }
    }
}

/// VS Code `inputs`: id → description, for notes.
fn input_descriptions(inputs: Option<&Value>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for input in inputs.and_then(Value::as_array).into_iter().flatten() {
        if let Some(id) = input.get("id").and_then(Value::as_str) {
            let description = input
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or("");
            out.insert(id.to_owned(), description.to_owned());
        }
    }
    out
}

// ---------------------------------------------------------------------------
// One entry, per client format.
//
// Claude Desktop. `mcpServers.<name>` with `command`, `args`, `env`; the file
// defines local (stdio) servers only. Source: modelcontextprotocol.io user
// quickstart as quoted in confluentinc/mcp-confluent
// docs/configuring-claude-desktop.md and mcpbundles.com "Claude Desktop MCP
// Setup" (Linux path ~/.config/Claude/, macOS ~/Library/Application Support/
// Claude/). Values are passed as written: no variable expansion documented.
//
// Claude Code. `~/.claude.json` top-level `mcpServers` (user scope) and
// `projects.<abs path>.mcpServers` (local scope); `<project>/.mcp.json`
// `mcpServers` (project scope). Entries: `type` "stdio" (default when
// absent) with `command`, `args`, `env`; `type` "http" or "sse" with `url`,
// `headers`. `${VAR}` and `${VAR:-default}` are expanded in command, args,
// env, url and headers. Source: code.claude.com/docs/en/mcp as quoted by
// docs.anthropic.com/zh-CN/docs/claude-code/sdk/sdk-mcp (the `type`/`url`/
// `headers` examples, `"DEBUG": "${DEBUG:-false}"`), cnblogs.com/LexLuc
// (the `projects` layout of ~/.claude.json) and aiskillcerts.com
// "environment variable expansion in MCP config".
//
// Cursor. `~/.cursor/mcp.json` and `<project>/.cursor/mcp.json`,
// `mcpServers.<name>` with `command`, `args`, `env` (stdio) or `url`,
// `headers` (SSE or Streamable HTTP, chosen by Cursor); interpolation
// `${env:NAME}`, `${userHome}`, `${workspaceFolder}`. Source: userjot.com/
// docs/mcp-cursor, zuplo.com/docs/mcp-gateway/connect-clients/cursor,
// syllago.dev/using-syllago/providers/cursor/mcp (cites cursor.com/docs/mcp).
//
// VS Code. `.vscode/mcp.json` and the user profile's `mcp.json` have
// `servers` (not `mcpServers`) and `inputs` (`promptString` with `id`,
// `description`, `password`); user settings.json has the same under `mcp`.
// Entries: `type` "stdio" with `command`, `args`, `env`, `envFile`; `type`
// "http" or "sse" with `url`, `headers`. Values reference `${env:NAME}`,
// `${input:ID}`, `${workspaceFolder}`. Source: code.visualstudio.com/docs/
// copilot/reference/mcp-configuration, the microsoft/vscode commit adding
// `type: "sse"`, alivemcp.com/seo/mcp-server-vscode (`mcp.servers` in
// ~/.config/Code/User/settings.json).
//
// Windsurf. `~/.codeium/windsurf/mcp_config.json`, `mcpServers.<name>` with
// `command`, `args`, `env`, or `serverUrl` (or `url`) and `headers` for
// remote servers (stdio, Streamable HTTP, SSE); `disabled`; interpolation of
// `${env:NAME}` (and `${file:path}`) in command, args, env, serverUrl, url,
// headers. Source: docs.windsurf.com/windsurf/cascade/mcp (mirror
// codeium.mintlify.app), docs.rs lorum docs/tools/windsurf.md,
// newtalaria/docs mcp/windsurf.md.
//
// Gemini CLI. `~/.gemini/settings.json` and `<project>/.gemini/settings.json`,
// `mcpServers.<name>` with exactly one of `command` (stdio, with `args`,
// `env`, `cwd`), `url` (SSE) or `httpUrl` (Streamable HTTP), plus `headers`,
// `timeout`, `trust`, `includeTools`, `excludeTools`; env values reference
// `$VAR_NAME` or `${VAR_NAME}`; `mcp.excluded` lists servers not to connect.
// Transport precedence httpUrl → url → command. Newer releases also accept
// `type: "http"` with `url` (google-gemini/gemini-cli issue #16913). Source:
// google-gemini/gemini-cli docs/tools/mcp-server.md (its own examples carry
// `//` comments, hence JSONC).

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transport {
    Stdio,
    Http,
    Sse,
}

impl Transport {
    fn name(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::Http => "Streamable HTTP",
            Transport::Sse => "legacy HTTP+SSE",
        }
    }
}

fn parse_entry(
    ctx: &Ctx,
    obj: &Map<String, Value>,
    inputs: &BTreeMap<String, String>,
) -> Result<(ServerConfig, Review), String> {
    let mut review = Review::default();
    let notes = &mut review.notes;
    let declared = match obj.get("type").or_else(|| obj.get("transport")) {
        None => None,
        Some(Value::String(t)) => Some(match t.to_ascii_lowercase().as_str() {
            "stdio" => Transport::Stdio,
            "http" | "streamable-http" | "streamable_http" | "streamablehttp" => Transport::Http,
            "sse" => Transport::Sse,
            _ => return Err(format!("unsupported transport type {t:?}")),
        }),
        Some(_) => return Err("`type` is not a string".to_owned()),
    };
    let command = string_field(obj, "command")?;
    // Where the URL lives, and the transport it implies, per client.
    let (url, implied) = match ctx.client {
        Client::GeminiCli => match (string_field(obj, "httpUrl")?, string_field(obj, "url")?) {
            (Some(url), _) => (Some(url), Some(Transport::Http)),
            (None, Some(url)) => (Some(url), Some(Transport::Sse)),
            (None, None) => (None, None),
        },
        Client::Windsurf => {
            let url = string_field(obj, "serverUrl")?.or(string_field(obj, "url")?);
            (url, None)
        }
        _ => (string_field(obj, "url")?, None),
    };
    // A declared type wins; then Gemini CLI's httpUrl → url → command order.
    let transport = match (declared.or(implied), &command, &url) {
        (Some(t), _, _) => t,
        (None, Some(_), None) => Transport::Stdio,
        (None, None, Some(url)) => {
            let t = infer_from_url(url);
            notes.push(format!(
                "no transport type given; {} inferred from the URL",
                t.name()
            ));
            t
        }
        (None, Some(_), Some(_)) => {
            return Err("has both a command and a URL but no `type`".to_owned());
        }
        (None, None, None) => return Err("has neither a command nor a URL".to_owned()),
    };

    let config = match transport {
        Transport::Stdio => {
            let Some(command) = command else {
                return Err("a stdio server without `command`".to_owned());
            };
            let command = client_paths(ctx, "command", &command, notes);
            let args = match obj.get("args") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(items)) => items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| {
                        scalar(item)
                            .map(|s| client_paths(ctx, &format!("argument {}", i + 1), &s, notes))
                            .ok_or_else(|| format!("argument {} is not a string", i + 1))
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err("`args` is not an array".to_owned()),
            };
            if let Some(i) = args.iter().position(|a| looks_secret(a)) {
                notes.push(format!(
                    "argument {} may carry a secret; arguments are kept as written, so review them",
                    i + 1
                ));
            }
            let cwd = string_field(obj, "cwd")?
                .map(|c| PathBuf::from(client_paths(ctx, "cwd", &c, notes)));
            if cwd.as_ref().is_some_and(|c| c.is_relative()) {
                notes.push(
                    "the working directory is relative: check it from where Plumbline runs"
                        .to_owned(),
                );
            }
            if let Some(file) = string_field(obj, "envFile")? {
                notes.push(format!(
                    "envFile {file:?} is not imported; set its variables yourself"
                ));
            }
            let env = values(ctx, obj, "env", "environment variable", inputs, &mut review)?;
            ServerConfig::Stdio {
                command,
                args,
                env,
                cwd,
                inherit_env: Vec::new(),
            }
        }
        Transport::Http | Transport::Sse => {
            let Some(url) = url else {
                return Err(format!("a {} server without a URL", transport.name()));
            };
            if url.contains("${") {
                notes.push(
                    "the URL contains a client variable, which Plumbline does not expand"
                        .to_owned(),
                );
            }
            if looks_secret(&url) || url.contains('?') {
                notes.push(
                    "the URL may carry a secret; it is kept as written, so review it".to_owned(),
                );
            }
            let headers = values(ctx, obj, "headers", "header", inputs, &mut review)?;
            if transport == Transport::Http {
                ServerConfig::Http { url, headers }
            } else {
                ServerConfig::Sse { url, headers }
            }
        }
    };
    Ok((config, review))
}

/// A string field, absent or null as `None`, another type as an error.
fn string_field(obj: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("`{key}` is not a string")),
    }
}

/// Strings, numbers and booleans as text (clients pass them to a process
/// environment as text); anything else is `None`.
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A legacy SSE endpoint conventionally ends in `/sse`; everything else is
/// taken to be Streamable HTTP, which is what current clients try first.
fn infer_from_url(url: &str) -> Transport {
    let path = url
        .split(['?', '#'])
        .next()
        .unwrap_or(url)
        .trim_end_matches('/');
    if path.ends_with("/sse") {
        Transport::Sse
    } else {
        Transport::Http
    }
}

/// Words that suggest a value in an argument or URL is a credential.
fn looks_secret(s: &str) -> bool {
    let s = s.to_ascii_lowercase();
    [
        "token",
        "secret",
        "password",
        "passwd",
        "apikey",
        "api-key",
        "api_key",
        "bearer",
        "authorization",
    ]
    .iter()
    .any(|w| s.contains(w))
}

/// Resolves `${workspaceFolder}` and `${userHome}` (VS Code, Cursor) in a
/// command, argument or working directory, which Plumbline does not expand;
/// notes anything else that looks like a client variable.
fn client_paths(ctx: &Ctx, what: &str, value: &str, notes: &mut Vec<String>) -> String {
    let mut out = value.to_owned();
    if matches!(ctx.client, Client::VsCode | Client::Cursor) {
        let project = ctx.project.display().to_string();
        let home = ctx.home.display().to_string();
        for (var, with) in [("${workspaceFolder}", &project), ("${userHome}", &home)] {
            if out.contains(var) {
                out = out.replace(var, with);
                notes.push(format!("{what}: {var} resolved to {with}"));
            }
        }
    }
    if out.contains("${") {
        notes.push(format!(
            "{what} contains a client variable, which Plumbline does not expand"
        ));
    }
    out
}

/// Reads `env` or `headers`: each value becomes a `${NAME}` reference when it
/// is one in the client's syntax, and is otherwise kept for now and its key
/// listed in `literal_keys` (replaced once the server's name is final).
fn values(
    ctx: &Ctx,
    obj: &Map<String, Value>,
    field: &str,
    what: &str,
    inputs: &BTreeMap<String, String>,
    review: &mut Review,
) -> Result<BTreeMap<String, String>, String> {
    let map = match obj.get(field) {
        None | Some(Value::Null) => return Ok(BTreeMap::new()),
        Some(Value::Object(map)) => map,
        Some(_) => return Err(format!("`{field}` is not a JSON object")),
    };
    let mut out = BTreeMap::new();
    for (key, value) in map {
        let Some(value) = scalar(value) else {
            return Err(format!("{what} {key}: the value is not a string"));
        };
        // A header such as `Authorization: Bearer ${TOKEN}` keeps its scheme:
        // the scheme is no secret, and the reference is what the user set.
        let (scheme, rest) = match value.split_once(' ') {
            Some((s, rest)) if what == "header" && ["Bearer", "Basic", "Token"].contains(&s) => {
                (format!("{s} "), rest)
            }
            _ => (String::new(), value.as_str()),
        };
        match reference(ctx.client, rest) {
            Some(Reference::Env { name, default }) => {
                if let Some(default) = default {
                    review.notes.push(format!(
                        "{what} {key}: the default {default:?} of ${{{name}:-…}} is dropped; set {name}"
                    ));
                }
                out.insert(key.clone(), format!("{scheme}${{{name}}}"));
            }
            Some(Reference::Input(id)) => {
                let name = env_name(&id);
                let asked = match inputs.get(&id).filter(|d| !d.is_empty()) {
                    Some(description) => format!("input {id:?} ({description})"),
                    None => format!("input {id:?}"),
                };
                review.notes.push(format!(
                    "{what} {key}: VS Code prompts for {asked}; set {name}"
                ));
                review.secrets_to_set.push(name.clone());
                out.insert(key.clone(), format!("{scheme}${{{name}}}"));
            }
            None => {
                review.literal_keys.push(key.clone());
                out.insert(key.clone(), value);
            }
        }
    }
    Ok(out)
}

enum Reference {
    Env {
        name: String,
        default: Option<String>,
    },
    Input(String),
}

/// The variable a value consists of entirely, in the client's own syntax:
/// `${NAME}` everywhere; `${env:NAME}` in VS Code, Cursor and Windsurf;
/// `${input:ID}` in VS Code; `${NAME:-default}` in Claude Code; `$NAME` in
/// Gemini CLI.
fn reference(client: Client, value: &str) -> Option<Reference> {
    let env = |name: &str| Reference::Env {
        name: name.to_owned(),
        default: None,
    };
    if let Some(inner) = value.strip_prefix("${").and_then(|v| v.strip_suffix('}')) {
        if is_env_name(inner) {
            return Some(env(inner));
        }
        if let Some(name) = inner.strip_prefix("env:") {
            if matches!(client, Client::VsCode | Client::Cursor | Client::Windsurf)
                && is_env_name(name)
            {
                return Some(env(name));
            }
        }
        if let Some(id) = inner.strip_prefix("input:") {
            if client == Client::VsCode && !id.is_empty() && !id.contains(['{', '}']) {
                return Some(Reference::Input(id.to_owned()));
            }
        }
        if let Some((name, default)) = inner.split_once(":-") {
            if client == Client::ClaudeCode && is_env_name(name) && !default.contains(['{', '}']) {
                return Some(Reference::Env {
                    name: name.to_owned(),
                    default: Some(default.to_owned()),
                });
            }
        }
        return None;
    }
    match value.strip_prefix('$') {
        Some(name) if client == Client::GeminiCli && is_env_name(name) => Some(env(name)),
        _ => None,
    }
}

fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `parts` joined by `_`, uppercase, every other character as `_`.
fn env_name(s: &str) -> String {
    let name: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    if name.starts_with(|c: char| c.is_ascii_digit()) || name.is_empty() {
        format!("_{name}")
    } else {
        name
    }
}

// ---------------------------------------------------------------------------
// Names, duplicates and secrets across all files.

const MAX_NAME: usize = 100;

fn finish(mut entries: Vec<Entry>) -> Vec<Found> {
    entries.sort_by(|a, b| {
        (a.client, &a.file, &a.scope, &a.name).cmp(&(b.client, &b.file, &b.scope, &b.name))
    });
    let mut kept: Vec<(Found, Vec<String>)> = Vec::new();
    // Final name → index in `kept`.
    let mut taken: BTreeMap<String, usize> = BTreeMap::new();
    for entry in entries {
        let origin = format!("{} ({})", entry.file.display(), entry.client.label());
        // The same server configured twice is observed once.
        if let Some((first, _)) = kept.iter_mut().find(|(k, _)| k.config == entry.config) {
            let also = if first.name == entry.name {
                format!("also defined in {origin}; imported once")
            } else {
                format!(
                    "also defined as {:?} in {origin}; imported once",
                    entry.name
                )
            };
            first.notes.push(also);
            continue;
        }
        let Review {
            literal_keys,
            secrets_to_set,
            mut notes,
        } = entry.review;
        let base = sanitize_name(&entry.name);
        if base != entry.name {
            notes.push(format!(
                "{:?} is not a valid Plumbline server name; imported as {base:?}",
                entry.name
            ));
        }
        let name = unique_name(&base, entry.client, &taken);
        if name != base {
            let (other, _) = &kept[taken[&base]];
            notes.push(format!(
                "renamed to {name:?}: {base:?} is also the name of a different server in {} ({})",
                other.file.display(),
                other.client.label()
            ));
        }
        taken.insert(name.clone(), kept.len());
        kept.push((
            Found {
                client: entry.client,
                file: entry.file,
                name,
                config: entry.config,
                secrets_to_set,
                notes,
            },
            literal_keys,
        ));
    }

    // Literal values are replaced only now, so that the variables carry the
    // final, unique server names.
    let mut vars = BTreeSet::new();
    let mut found: Vec<Found> = kept
        .into_iter()
        .map(|(mut f, literal_keys)| {
            let (what, map) = match &mut f.config {
                ServerConfig::Stdio { env, .. } => ("environment variable", env),
                ServerConfig::Http { headers, .. } | ServerConfig::Sse { headers, .. } => ("header", headers),
            };
            for key in literal_keys {
                let base = format!("PLUMBLINE_{}_{}", env_name(&f.name), env_name(&key));
                let mut var = base.clone();
                let mut n = 2;
                while !vars.insert(var.clone()) {
                    var = format!("{base}_{n}");
                    n += 1;
                }
                map.insert(key.clone(), format!("${{{var}}}"));
                f.notes.push(format!(
                    "{what} {key}: the value in {} is not a variable reference, so it is not copied; set {var} to it",
                    f.file.display()
                ));
                f.secrets_to_set.push(var);
            }
            f.secrets_to_set.sort();
            f.secrets_to_set.dedup();
            f
        })
        .collect();
    found.sort_by(|a, b| (a.client, &a.file, &a.name).cmp(&(b.client, &b.file, &b.name)));
    found
}

/// Letters, digits, '-', '_' and '.', at most 100: every run of other
/// characters becomes one '_', and leading or trailing '_' from that are
/// trimmed.
fn sanitize_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut replaced = false;
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
            out.push(c);
            replaced = false;
        } else if !replaced {
            out.push('_');
            replaced = true;
        }
    }
    let trimmed = if out == name {
        out.as_str()
    } else {
        out.trim_matches('_')
    };
    // `.` and `..` would be path segments in every link to the server.
    let mut out = if trimmed.is_empty() || trimmed.bytes().all(|b| b == b'.') {
        "server".to_owned()
    } else {
        trimmed.to_owned()
    };
    // ASCII only by now, so any byte index is a character boundary.
    out.truncate(MAX_NAME);
    out
}

/// `base`, or `base-<client>` (then `base-<client>-2`, …) when taken, within
/// the length limit.
fn unique_name(base: &str, client: Client, taken: &BTreeMap<String, usize>) -> String {
    if !taken.contains_key(base) {
        return base.to_owned();
    }
    let mut n = 1;
    loop {
        let suffix = if n == 1 {
            format!("-{}", client.label())
        } else {
            format!("-{}-{n}", client.label())
        };
        let name = format!(
            "{}{suffix}",
            &base[..base.len().min(MAX_NAME - suffix.len())]
        );
        if !taken.contains_key(&name) {
            return name;
        }
        n += 1;
    }
}

// ---------------------------------------------------------------------------
// JSON with comments.

/// Blanks `//` and `/* */` comments and trailing commas outside strings, byte
/// for byte, so that a syntax error still reports the line and column of the
/// original file.
fn strip_jsonc(text: &str) -> String {
    let mut bytes = text.as_bytes().to_vec();
    let blank = |b: &mut u8| {
        if *b != b'\n' && *b != b'\r' {
            *b = b' ';
        }
    };
    // Comments.
    let mut i = 0;
    let mut in_string = false;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match b {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
        } else if b == b'"' {
            in_string = true;
        } else if b == b'/' && bytes.get(i + 1) == Some(&b'/') {
            while i < bytes.len() && bytes[i] != b'\n' {
                blank(&mut bytes[i]);
                i += 1;
            }
            continue;
        } else if b == b'/' && bytes.get(i + 1) == Some(&b'*') {
            let end = bytes[i + 2..]
                .windows(2)
                .position(|w| w == b"*/")
                .map_or(bytes.len(), |p| i + 2 + p + 2);
            for b in &mut bytes[i..end] {
                blank(b);
            }
            i = end;
            continue;
        }
        i += 1;
    }
    // Trailing commas.
    let mut in_string = false;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match b {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
        } else if b == b'"' {
            in_string = true;
        } else if b == b',' {
            let next = bytes[i + 1..].iter().find(|c| !c.is_ascii_whitespace());
            if matches!(next, Some(b'}' | b']')) {
                bytes[i] = b' ';
            }
        }
        i += 1;
    }
    // Only ASCII bytes were replaced, and only whole comments (which may
    // hold multi-byte characters, all blanked), so this stays UTF-8.
    String::from_utf8(bytes).unwrap_or_else(|_| text.to_owned())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(dir: &str) -> (PathBuf, PathBuf) {
        let base = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata/discover")
            .join(dir);
        (base.join("home"), base.join("project"))
    }

    fn run(dir: &str) -> (Vec<Found>, Vec<Skipped>) {
        let (home, project) = fixture(dir);
        discover(&home, &project)
    }

    fn named<'a>(found: &'a [Found], name: &str) -> &'a Found {
        found.iter().find(|f| f.name == name).unwrap_or_else(|| {
            panic!(
                "no server {name:?} in {:#?}",
                found.iter().map(|f| &f.name).collect::<Vec<_>>()
            )
        })
    }

    fn names(found: &[Found]) -> Vec<&str> {
        found.iter().map(|f| f.name.as_str()).collect()
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn skipped_names(skipped: &[Skipped]) -> Vec<(Option<&str>, &str)> {
        skipped
            .iter()
            .map(|s| (s.name.as_deref(), s.reason.as_str()))
            .collect()
    }

    /// Every fixture's servers, written as a `plumbline.toml`, parse back and
    /// hold no literal secret (every fixture secret contains "s3cr3t").
    fn assert_no_secret_in_toml(found: &[Found]) {
        let config = as_config(found);
        let text = toml::to_string(&config).unwrap();
        assert!(!text.contains("s3cr3t"), "{text}");
        let back: crate::config::Config = toml::from_str(&text).unwrap();
        assert_eq!(back, config);
    }

    #[test]
    fn claude_desktop_linux_and_macos_files() {
        let (found, skipped) = run("claude-desktop");
        assert_eq!(skipped, []);
        assert_eq!(
            names(&found),
            ["Postgres_prod", "filesystem", "github", "time"]
        );
        assert!(found.iter().all(|f| f.client == Client::ClaudeDesktop));
        let github = named(&found, "github");
        assert_eq!(
            github.config,
            ServerConfig::Stdio {
                command: "npx".into(),
                args: args(&["-y", "@modelcontextprotocol/server-github"]),
                env: map(&[(
                    "GITHUB_PERSONAL_ACCESS_TOKEN",
                    "${PLUMBLINE_GITHUB_GITHUB_PERSONAL_ACCESS_TOKEN}"
                )]),
                cwd: None,
                inherit_env: Vec::new(),
            }
        );
        assert_eq!(
            github.secrets_to_set,
            ["PLUMBLINE_GITHUB_GITHUB_PERSONAL_ACCESS_TOKEN"]
        );
        let time = named(&found, "time");
        assert!(time
            .file
            .ends_with("Library/Application Support/Claude/claude_desktop_config.json"));
        // The filesystem server is in both files, identically: imported once.
        let fs = named(&found, "filesystem");
        assert!(fs
            .file
            .ends_with(".config/Claude/claude_desktop_config.json"));
        assert!(
            fs.notes
                .iter()
                .any(|n| n.contains("also defined in") && n.contains("Library")),
            "{:?}",
            fs.notes
        );
        assert!(named(&found, "Postgres_prod")
            .notes
            .iter()
            .any(|n| n.contains("\"Postgres (prod)\"")));
        assert_no_secret_in_toml(&found);
    }

    #[test]
    fn claude_code_user_local_and_project_scopes() {
        let (found, skipped) = run("claude-code");
        assert_eq!(
            names(&found),
            ["context7", "playwright", "sentry", "api-server", "db"]
        );
        assert_eq!(skipped_names(&skipped), [(Some("old-tool"), "disabled")]);
        assert!(named(&found, "playwright").notes[0].contains("/home/alice/src/webapp"));
        let sentry = named(&found, "sentry");
        assert_eq!(
            sentry.config,
            ServerConfig::Http {
                url: "https://mcp.sentry.dev/mcp".into(),
                headers: map(&[("Authorization", "${PLUMBLINE_SENTRY_AUTHORIZATION}")]),
            }
        );
        // `${VAR}` is kept, after an auth scheme too; `${VAR:-default}` loses
        // its default, with a note.
        let api = named(&found, "api-server");
        assert_eq!(
            api.config,
            ServerConfig::Sse {
                url: "https://api.example.com/mcp/sse".into(),
                headers: map(&[
                    ("Authorization", "Bearer ${API_TOKEN}"),
                    ("X-Team", "${TEAM_ID}")
                ]),
            }
        );
        assert_eq!(api.secrets_to_set, Vec::<String>::new());
        assert!(
            api.notes.iter().any(|n| n.contains("\"platform\"")),
            "{:?}",
            api.notes
        );
        let db = named(&found, "db");
        assert_eq!(
            db.config,
            ServerConfig::Stdio {
                command: "npx".into(),
                args: args(&["-y", "@bytebase/dbhub", "--transport", "stdio"]),
                env: map(&[
                    ("DSN", "${DATABASE_URL}"),
                    ("LOG_LEVEL", "${PLUMBLINE_DB_LOG_LEVEL}")
                ]),
                cwd: None,
                inherit_env: Vec::new(),
            }
        );
        assert_no_secret_in_toml(&found);
    }

    #[test]
    fn cursor_user_and_project_files() {
        let (found, skipped) = run("cursor");
        assert_eq!(
            names(&found),
            [
                "brave-search",
                "linear",
                "stripe",
                "docs",
                "github",
                "scripts"
            ]
        );
        assert_eq!(skipped_names(&skipped), [(Some("puppeteer"), "disabled")]);
        // No `type`: the transport comes from the URL, with a note.
        let linear = named(&found, "linear");
        assert_eq!(
            linear.config,
            ServerConfig::Sse {
                url: "https://mcp.linear.app/sse".into(),
                headers: BTreeMap::new()
            }
        );
        assert!(linear.notes.iter().any(|n| n.contains("inferred")));
        assert!(matches!(
            named(&found, "stripe").config,
            ServerConfig::Http { .. }
        ));
        let docs = named(&found, "docs");
        assert_eq!(
            docs.config,
            ServerConfig::Http {
                url: "http://localhost:8000/mcp".into(),
                headers: map(&[("X-Api-Key", "${DOCS_API_KEY}")]),
            }
        );
        let github = named(&found, "github");
        assert!(
            matches!(&github.config, ServerConfig::Stdio { env, .. } if env["GITHUB_PERSONAL_ACCESS_TOKEN"] == "${GITHUB_TOKEN}")
        );
        let (_, project) = fixture("cursor");
        let ServerConfig::Stdio { args, .. } = &named(&found, "scripts").config else {
            panic!()
        };
        assert_eq!(
            args[0],
            format!("{}/tools/mcp-server.js", project.display())
        );
        assert_no_secret_in_toml(&found);
    }

    #[test]
    fn vscode_workspace_mcp_json_and_user_settings() {
        let (found, skipped) = run("vscode");
        assert_eq!(skipped, []);
        assert_eq!(
            names(&found),
            [
                "atlassian",
                "memory",
                "everything",
                "fetch",
                "github",
                "perplexity"
            ]
        );
        // `${input:ID}` becomes a variable the user sets, with the prompt's description.
        let perplexity = named(&found, "perplexity");
        assert_eq!(
            perplexity.config,
            ServerConfig::Stdio {
                command: "npx".into(),
                args: args(&["-y", "server-perplexity-ask"]),
                env: map(&[("PERPLEXITY_API_KEY", "${PERPLEXITY_KEY}")]),
                cwd: None,
                inherit_env: Vec::new(),
            }
        );
        assert_eq!(perplexity.secrets_to_set, ["PERPLEXITY_KEY"]);
        assert!(perplexity
            .notes
            .iter()
            .any(|n| n.contains("Perplexity API Key")));
        assert_eq!(
            named(&found, "github").config,
            ServerConfig::Http {
                url: "https://api.githubcopilot.com/mcp/".into(),
                headers: map(&[("Authorization", "Bearer ${GITHUB_TOKEN}")]),
            }
        );
        assert!(matches!(
            named(&found, "everything").config,
            ServerConfig::Sse { .. }
        ));
        assert!(named(&found, "fetch")
            .notes
            .iter()
            .any(|n| n.contains("envFile")));
        assert_no_secret_in_toml(&found);
    }

    #[test]
    fn vscode_settings_json_with_comments_and_trailing_commas() {
        let (found, _) = run("vscode");
        let atlassian = named(&found, "atlassian");
        assert!(atlassian.file.ends_with(".config/Code/User/settings.json"));
        assert_eq!(
            atlassian.config,
            ServerConfig::Http {
                // `//` inside a string is not a comment.
                url: "https://mcp.atlassian.com/v1/mcp".into(),
                headers: map(&[("Authorization", "${PLUMBLINE_ATLASSIAN_AUTHORIZATION}")]),
            }
        );
        assert_eq!(
            named(&found, "memory").config,
            ServerConfig::Stdio {
                command: "npx".into(),
                args: args(&["-y", "@modelcontextprotocol/server-memory"]),
                env: map(&[("MEMORY_FILE_PATH", "${PLUMBLINE_MEMORY_MEMORY_FILE_PATH}")]),
                cwd: None,
                inherit_env: Vec::new(),
            }
        );
    }

    #[test]
    fn jsonc_stripping_keeps_strings_and_positions() {
        let text = "{\n  // c\n  \"a\": \"x//y/*z*/\", /* b\n */ \"b\": [1, 2,],\n}\n";
        let stripped = strip_jsonc(text);
        assert_eq!(stripped.len(), text.len());
        assert_eq!(stripped.lines().count(), text.lines().count());
        let v: Value = serde_json::from_str(&stripped).unwrap();
        assert_eq!(v, serde_json::json!({"a": "x//y/*z*/", "b": [1, 2]}));
        // An escaped quote does not end the string.
        let v: Value = serde_json::from_str(&strip_jsonc(r#"{"a": "\"//", }"#)).unwrap();
        assert_eq!(v, serde_json::json!({"a": "\"//"}));
    }

    #[test]
    fn windsurf_server_url_and_disabled() {
        let (found, skipped) = run("windsurf");
        assert_eq!(names(&found), ["figma", "github", "zapier"]);
        assert_eq!(skipped_names(&skipped), [(Some("slack"), "disabled")]);
        assert_eq!(
            named(&found, "figma").config,
            ServerConfig::Http {
                url: "https://mcp.figma.com/mcp".into(),
                headers: map(&[("Authorization", "Bearer ${FIGMA_TOKEN}")]),
            }
        );
        let zapier = named(&found, "zapier");
        assert!(matches!(&zapier.config, ServerConfig::Sse { url, .. } if url.ends_with("/sse")));
        assert_no_secret_in_toml(&found);
    }

    #[test]
    fn gemini_cli_transports_and_excluded_servers() {
        let (found, skipped) = run("gemini-cli");
        assert_eq!(
            names(&found),
            ["events", "github", "pythonTools", "nodeServer", "remote"]
        );
        assert_eq!(
            skipped_names(&skipped),
            [(Some("experimental"), "disabled (listed in mcp.excluded)")]
        );
        assert_eq!(
            named(&found, "pythonTools").config,
            ServerConfig::Stdio {
                command: "python".into(),
                args: args(&["-m", "my_mcp_server", "--port", "8080"]),
                env: map(&[
                    ("API_KEY", "${EXTERNAL_API_KEY}"),
                    ("DATABASE_URL", "${DB_CONNECTION_STRING}")
                ]),
                cwd: Some("./mcp-servers/python".into()),
                inherit_env: Vec::new(),
            }
        );
        // httpUrl is Streamable HTTP; url is SSE unless `type` says http.
        assert!(matches!(
            named(&found, "github").config,
            ServerConfig::Http { .. }
        ));
        assert_eq!(
            named(&found, "events").config,
            ServerConfig::Sse {
                url: "http://localhost:8080/sse".into(),
                headers: map(&[("X-Custom-Header", "${PLUMBLINE_EVENTS_X_CUSTOM_HEADER}")]),
            }
        );
        assert!(matches!(
            named(&found, "remote").config,
            ServerConfig::Http { .. }
        ));
        assert!(
            matches!(&named(&found, "nodeServer").config, ServerConfig::Stdio { cwd: Some(c), .. } if c == Path::new("./mcp-servers/node"))
        );
        assert_no_secret_in_toml(&found);
    }

    #[test]
    fn literal_secrets_are_replaced_by_reported_variables() {
        for dir in [
            "claude-desktop",
            "claude-code",
            "cursor",
            "vscode",
            "windsurf",
            "gemini-cli",
            "collisions",
        ] {
            let (found, _) = run(dir);
            assert_no_secret_in_toml(&found);
            for f in &found {
                let values = match &f.config {
                    ServerConfig::Stdio { env, .. } => env,
                    ServerConfig::Http { headers, .. } | ServerConfig::Sse { headers, .. } => {
                        headers
                    }
                };
                for value in values.values() {
                    let var = value.rsplit("${").next().and_then(|v| v.strip_suffix('}'));
                    assert!(
                        var.is_some_and(is_env_name),
                        "{dir}/{}: {value:?} is not a reference",
                        f.name
                    );
                    let var = var.unwrap();
                    if var.starts_with("PLUMBLINE_") {
                        assert!(
                            f.secrets_to_set.iter().any(|s| s == var),
                            "{dir}/{}: {var} not reported",
                            f.name
                        );
                    }
                }
            }
        }
        let (found, _) = run("windsurf");
        let github = named(&found, "github");
        assert_eq!(
            github.secrets_to_set,
            ["PLUMBLINE_GITHUB_GITHUB_PERSONAL_ACCESS_TOKEN"]
        );
        assert!(github
            .notes
            .iter()
            .any(|n| n.contains("set PLUMBLINE_GITHUB_GITHUB_PERSONAL_ACCESS_TOKEN")));
    }

    #[test]
    fn secret_variable_names_are_uppercase_and_unique() {
        assert_eq!(env_name("my-server.v2"), "MY_SERVER_V2");
        assert_eq!(env_name("1password"), "_1PASSWORD");
        let entry = |name: &str, key: &str| Entry {
            client: Client::Cursor,
            file: PathBuf::from("/h/.cursor/mcp.json"),
            scope: String::new(),
            name: name.into(),
            config: ServerConfig::Http {
                url: format!("https://{name}.example/mcp"),
                headers: map(&[(key, "literal")]),
            },
            review: Review {
                literal_keys: vec![key.into()],
                ..Review::default()
            },
        };
        // Two servers whose names differ only in punctuation.
        let found = finish(vec![entry("a-b", "x-key"), entry("a.b", "X_KEY")]);
        let vars: Vec<_> = found
            .iter()
            .flat_map(|f| f.secrets_to_set.clone())
            .collect();
        assert_eq!(vars, ["PLUMBLINE_A_B_X_KEY", "PLUMBLINE_A_B_X_KEY_2"]);
    }

    #[test]
    fn name_collisions_keep_both_and_identical_servers_merge() {
        let (found, skipped) = run("collisions");
        assert_eq!(skipped, []);
        assert_eq!(
            names(&found),
            [
                "filesystem",
                "github",
                "github-claude-code",
                "My_Server_beta",
                "github-cursor"
            ]
        );
        let clients: Vec<_> = found.iter().map(|f| f.client).collect();
        use Client::*;
        assert_eq!(
            clients,
            [ClaudeDesktop, ClaudeDesktop, ClaudeCode, Cursor, Cursor]
        );
        let cursor_github = named(&found, "github-cursor");
        assert!(
            cursor_github
                .notes
                .iter()
                .any(|n| n.starts_with("renamed to \"github-cursor\"")),
            "{:?}",
            cursor_github.notes
        );
        let fs = named(&found, "filesystem");
        assert_eq!(fs.client, ClaudeDesktop);
        assert!(
            fs.notes
                .iter()
                .any(|n| n.contains(".cursor/mcp.json (cursor)")),
            "{:?}",
            fs.notes
        );
        // A name taken by a suffixed name gets a number.
        let mut taken = BTreeMap::new();
        taken.insert("x".to_owned(), 0);
        taken.insert("x-cursor".to_owned(), 1);
        assert_eq!(unique_name("x", Client::Cursor, &taken), "x-cursor-2");
        let long = "n".repeat(100);
        taken.insert(long.clone(), 2);
        let renamed = unique_name(&long, Client::GeminiCli, &taken);
        assert_eq!(renamed.len(), 100);
        assert!(renamed.ends_with("-gemini-cli"));
    }

    #[test]
    fn server_names_are_sanitized() {
        assert_eq!(sanitize_name("github"), "github");
        assert_eq!(sanitize_name("My Server (beta)!"), "My_Server_beta");
        assert_eq!(sanitize_name("_private"), "_private");
        assert_eq!(sanitize_name("日本"), "server");
        assert_eq!(sanitize_name("."), "server");
        assert_eq!(sanitize_name(".."), "server");
        assert_eq!(sanitize_name("..."), "server");
        assert_eq!(sanitize_name("a.b"), "a.b");
        assert_eq!(sanitize_name(&"a".repeat(150)).len(), 100);
    }

    #[test]
    fn invalid_files_and_entries_become_skipped() {
        let (found, skipped) = run("invalid");
        assert_eq!(names(&found), ["time"]);
        let reasons: Vec<_> = skipped
            .iter()
            .map(|s| {
                (
                    s.file.file_name().unwrap().to_str().unwrap(),
                    s.name.as_deref(),
                    s.reason.as_str(),
                )
            })
            .collect();
        assert_eq!(reasons.len(), 5, "{reasons:#?}");
        // A JSON syntax error names the file, line and column.
        let cursor = skipped
            .iter()
            .find(|s| s.file.ends_with(".cursor/mcp.json"))
            .unwrap();
        assert_eq!(cursor.name, None);
        assert!(
            cursor
                .reason
                .starts_with(&cursor.file.display().to_string()),
            "{}",
            cursor.reason
        );
        assert!(
            cursor.reason.contains("invalid JSON at line 4, column 5"),
            "{}",
            cursor.reason
        );
        let windsurf = skipped
            .iter()
            .find(|s| s.file.ends_with("mcp_config.json"))
            .unwrap();
        assert!(
            windsurf
                .reason
                .ends_with("`mcpServers` is not a JSON object"),
            "{}",
            windsurf.reason
        );
        let entry = |name: &str| {
            skipped
                .iter()
                .find(|s| s.name.as_deref() == Some(name))
                .unwrap()
                .reason
                .as_str()
        };
        assert_eq!(entry("broken-entry"), "the entry is not a JSON object");
        assert_eq!(entry("no-command"), "has neither a command nor a URL");
        assert_eq!(entry("ftp"), "unsupported transport type \"ftp\"");
    }

    #[test]
    fn missing_directories_find_nothing() {
        let nowhere = Path::new("/nonexistent/plumbline-discover-test");
        assert_eq!(discover(nowhere, nowhere), (Vec::new(), Vec::new()));
    }

    #[test]
    fn run_from_home_reads_each_file_once() {
        let (home, _) = fixture("gemini-cli");
        let nowhere = Path::new("/nonexistent/plumbline-discover-test");
        let (found, skipped) = discover(&home, &home);
        assert_eq!((found, skipped), discover(&home, nowhere));
    }

    #[test]
    fn output_is_deterministic_and_sorted() {
        for dir in [
            "claude-desktop",
            "claude-code",
            "cursor",
            "vscode",
            "windsurf",
            "gemini-cli",
            "collisions",
            "invalid",
        ] {
            let first = run(dir);
            assert_eq!(first, run(dir), "{dir}");
            let keys: Vec<_> = first
                .0
                .iter()
                .map(|f| (f.client, f.file.clone(), f.name.clone()))
                .collect();
            let mut sorted = keys.clone();
            sorted.sort();
            assert_eq!(keys, sorted, "{dir}");
        }
    }

    #[test]
    fn client_references_by_syntax() {
        let name = |client, v: &str| match reference(client, v) {
            Some(Reference::Env { name, .. }) => Some(name),
            Some(Reference::Input(id)) => Some(format!("input:{id}")),
            None => None,
        };
        assert_eq!(
            name(Client::ClaudeDesktop, "${TOKEN}").as_deref(),
            Some("TOKEN")
        );
        assert_eq!(
            name(Client::Cursor, "${env:TOKEN}").as_deref(),
            Some("TOKEN")
        );
        assert_eq!(name(Client::ClaudeCode, "${env:TOKEN}"), None);
        assert_eq!(
            name(Client::VsCode, "${input:api-key}").as_deref(),
            Some("input:api-key")
        );
        assert_eq!(name(Client::ClaudeCode, "${T:-x}").as_deref(), Some("T"));
        assert_eq!(name(Client::GeminiCli, "$TOKEN").as_deref(), Some("TOKEN"));
        assert_eq!(name(Client::Cursor, "$TOKEN"), None);
        assert_eq!(name(Client::ClaudeCode, "prefix-${TOKEN}"), None);
        assert_eq!(name(Client::ClaudeCode, "${A}${B}"), None);
    }
}
