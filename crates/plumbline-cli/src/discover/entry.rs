//! One entry, per client format.
//!
//! Claude Desktop. `mcpServers.<name>` with `command`, `args`, `env`; the file
//! defines local (stdio) servers only. Source: modelcontextprotocol.io user
//! quickstart as quoted in confluentinc/mcp-confluent
//! docs/configuring-claude-desktop.md and mcpbundles.com "Claude Desktop MCP
//! Setup" (Linux path ~/.config/Claude/, macOS ~/Library/Application Support/
//! Claude/). Values are passed as written: no variable expansion documented.
//!
//! Claude Code. `~/.claude.json` top-level `mcpServers` (user scope) and
//! `projects.<abs path>.mcpServers` (local scope); `<project>/.mcp.json`
//! `mcpServers` (project scope). Entries: `type` "stdio" (default when
//! absent) with `command`, `args`, `env`; `type` "http" or "sse" with `url`,
//! `headers`. `${VAR}` and `${VAR:-default}` are expanded in command, args,
//! env, url and headers. Source: code.claude.com/docs/en/mcp as quoted by
//! docs.anthropic.com/zh-CN/docs/claude-code/sdk/sdk-mcp (the `type`/`url`/
//! `headers` examples, `"DEBUG": "${DEBUG:-false}"`), cnblogs.com/LexLuc
//! (the `projects` layout of ~/.claude.json) and aiskillcerts.com
//! "environment variable expansion in MCP config".
//!
//! Cursor. `~/.cursor/mcp.json` and `<project>/.cursor/mcp.json`,
//! `mcpServers.<name>` with `command`, `args`, `env` (stdio) or `url`,
//! `headers` (SSE or Streamable HTTP, chosen by Cursor); interpolation
//! `${env:NAME}`, `${userHome}`, `${workspaceFolder}`. Source: userjot.com/
//! docs/mcp-cursor, zuplo.com/docs/mcp-gateway/connect-clients/cursor,
//! syllago.dev/using-syllago/providers/cursor/mcp (cites cursor.com/docs/mcp).
//!
//! VS Code. `.vscode/mcp.json` and the user profile's `mcp.json` have
//! `servers` (not `mcpServers`) and `inputs` (`promptString` with `id`,
//! `description`, `password`); user settings.json has the same under `mcp`.
//! Entries: `type` "stdio" with `command`, `args`, `env`, `envFile`; `type`
//! "http" or "sse" with `url`, `headers`. Values reference `${env:NAME}`,
//! `${input:ID}`, `${workspaceFolder}`. Source: code.visualstudio.com/docs/
//! copilot/reference/mcp-configuration, the microsoft/vscode commit adding
//! `type: "sse"`, alivemcp.com/seo/mcp-server-vscode (`mcp.servers` in
//! ~/.config/Code/User/settings.json).
//!
//! Windsurf. `~/.codeium/windsurf/mcp_config.json`, `mcpServers.<name>` with
//! `command`, `args`, `env`, or `serverUrl` (or `url`) and `headers` for
//! remote servers (stdio, Streamable HTTP, SSE); `disabled`; interpolation of
//! `${env:NAME}` (and `${file:path}`) in command, args, env, serverUrl, url,
//! headers. Source: docs.windsurf.com/windsurf/cascade/mcp (mirror
//! codeium.mintlify.app), docs.rs lorum docs/tools/windsurf.md,
//! newtalaria/docs mcp/windsurf.md.
//!
//! Gemini CLI. `~/.gemini/settings.json` and `<project>/.gemini/settings.json`,
//! `mcpServers.<name>` with exactly one of `command` (stdio, with `args`,
//! `env`, `cwd`), `url` (SSE) or `httpUrl` (Streamable HTTP), plus `headers`,
//! `timeout`, `trust`, `includeTools`, `excludeTools`; env values reference
//! `$VAR_NAME` or `${VAR_NAME}`; `mcp.excluded` lists servers not to connect.
//! Transport precedence httpUrl → url → command. Newer releases also accept
//! `type: "http"` with `url` (google-gemini/gemini-cli issue #16913). Source:
//! google-gemini/gemini-cli docs/tools/mcp-server.md (its own examples carry
//! `//` comments, hence JSONC).

use super::*;

impl Transport {
    pub(super) fn name(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::Http => "Streamable HTTP",
            Transport::Sse => "legacy HTTP+SSE",
        }
    }
}

pub(super) fn parse_entry(
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
            // A client entry `discover --wrap` (or a person) put under the
            // guard: the server is the one inside. Imported as the wrapper,
            // observe, pin and check would see the guard's filtered listing
            // and a rug pull it withholds would pass the gate.
            let (command, args) = match crate::guard::wrapped(&command, &args) {
                // The guard of a server Plumbline's own configuration
                // holds: the entry names no server to import.
                Some(w) if w.inner.is_empty() => {
                    return Err(format!(
                        "runs plumbline guard for {}, which plumbline.toml configures; the entry holds no server of its own to import",
                        w.server.as_deref().map_or_else(
                            || "an upstream URL".to_owned(),
                            |s| format!("the server {s:?}")
                        )
                    ));
                }
                Some(w) => {
                    notes.push(
                        "runs under plumbline guard in the client; the server inside it is imported"
                            .to_owned(),
                    );
                    let mut inner = w.inner.into_iter();
                    (inner.next().unwrap_or_default(), inner.collect())
                }
                None => (command, args),
            };
            // Secrets in a recognised form (`--token=…`, `--api-key …`,
            // `Authorization: Bearer …`, a URL's credentials) become
            // variables once the server's name is final (`finish`); only
            // what merely looks like one is left for review.
            if !plumbline_base::redact::args_hold_secrets(&args) {
                if let Some(i) = args.iter().position(|a| looks_secret(a)) {
                    notes.push(format!(
                        "argument {} may carry a secret; it is kept as written, so review it",
                        i + 1
                    ));
                }
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
                normalize: Default::default(),
            }
        }
        Transport::Http | Transport::Sse => {
            let Some(url) = url else {
                return Err(format!("a {} server without a URL", transport.name()));
            };
            if crate::config::expand(&url, &|_| Some(String::new())).is_err() {
                notes.push(
                    "the URL contains a client variable, which Plumbline does not expand"
                        .to_owned(),
                );
            }
            let recognised = plumbline_base::redact::redact_url(&url) != url;
            if !recognised && looks_secret(&url) {
                notes.push(
                    "the URL may carry a secret; it is kept as written, so review it".to_owned(),
                );
            }
            let headers = values(ctx, obj, "headers", "header", inputs, &mut review)?;
            if transport == Transport::Http {
                ServerConfig::Http {
                    url,
                    headers,
                    oauth: None,
                    normalize: Default::default(),
                }
            } else {
                ServerConfig::Sse {
                    url,
                    headers,
                    normalize: Default::default(),
                }
            }
        }
    };
    Ok((config, review))
}

/// A string field, absent or null as `None`, another type as an error.
pub(super) fn string_field(obj: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("`{key}` is not a string")),
    }
}

/// Strings, numbers and booleans as text (clients pass them to a process
/// environment as text); anything else is `None`.
pub(super) fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A legacy SSE endpoint conventionally ends in `/sse`; everything else is
/// taken to be Streamable HTTP, which is what current clients try first.
pub(super) fn infer_from_url(url: &str) -> Transport {
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
pub(super) fn looks_secret(s: &str) -> bool {
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
pub(super) fn client_paths(ctx: &Ctx, what: &str, value: &str, notes: &mut Vec<String>) -> String {
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
/// is one in the client's syntax; a literal that looks like a credential
/// ([`secret_looking`]) is kept for now and its key listed in
/// `literal_keys` (replaced once the server's name is final); any other
/// literal stays as written.
pub(super) fn values(
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
            // A literal that looks like a credential becomes a variable
            // (once the server's name is final); any other literal (a path,
            // a log level) is kept as written, so the server starts as the
            // client started it.
            None if secret_looking(key, &value) => {
                review.literal_keys.push(key.clone());
                out.insert(key.clone(), value);
            }
            None => {
                out.insert(key.clone(), value);
            }
        }
    }
    Ok(out)
}

/// Whether an environment variable's or header's literal value looks like
/// a credential, by its name (a word such as TOKEN, SECRET, PASSWORD, KEY,
/// AUTH, COOKIE or PAT, alone or ending a word: `GITHUB_TOKEN`, `APIKEY`,
/// `X-Api-Key`) or by its value (a scheme such as `Bearer`, a vendor
/// prefix such as `ghp_` or `sk-`, credentials in a URL, or a long run of
/// letters and digits with no path or space in it). Paths, log levels, regions and switches
/// are not.
pub(super) fn secret_looking(key: &str, value: &str) -> bool {
    const WORDS: [&str; 14] = [
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "PASS",
        "KEY",
        "AUTH",
        "AUTHORIZATION",
        "CREDENTIAL",
        "CREDENTIALS",
        "COOKIE",
        "PAT",
        "SESSION",
        "PRIVATE",
    ];
    let words: Vec<String> = key
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_uppercase)
        .collect();
    let named = words.iter().any(|w| {
        WORDS.contains(&w.as_str())
            || ["TOKEN", "SECRET", "KEY", "PASSWORD"]
                .iter()
                .any(|end| w.len() > end.len() && w.ends_with(end))
    });
    if named {
        return true;
    }
    let v = value.trim();
    let lower = v.to_ascii_lowercase();
    if ["bearer ", "basic ", "token "]
        .iter()
        .any(|scheme| lower.starts_with(scheme))
    {
        return true;
    }
    // A URL with credentials in it (`postgresql://user:pw@host/db`,
    // `?key=…`), as the identity redacts them.
    if v.contains("://") && plumbline_base::redact::redact_url(v) != v {
        return true;
    }
    const PREFIXES: [&str; 9] = [
        "ghp_",
        "gho_",
        "ghs_",
        "github_pat_",
        "glpat-",
        "sk-",
        "xoxb-",
        "xoxp-",
        "akia",
    ];
    if PREFIXES.iter().any(|p| lower.starts_with(p)) {
        return true;
    }
    // A long opaque string: letters and digits mixed, no separators a path,
    // a URL or a sentence would have.
    v.len() >= 24
        && !v.contains(['/', ' ', '.', ':'])
        && v.chars().any(|c| c.is_ascii_digit())
        && v.chars().any(|c| c.is_ascii_alphabetic())
}

/// The variable a value consists of entirely, in the client's own syntax:
/// `${NAME}` everywhere; `${env:NAME}` in VS Code, Cursor and Windsurf;
/// `${input:ID}` in VS Code; `${NAME:-default}` in Claude Code; `$NAME` in
/// Gemini CLI.
pub(super) fn reference(client: Client, value: &str) -> Option<Reference> {
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

pub(super) fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `parts` joined by `_`, uppercase, every other character as `_`.
pub(super) fn env_name(s: &str) -> String {
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
