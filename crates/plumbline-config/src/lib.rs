//! `plumbline.toml`: the servers Plumbline watches.
//!
//! ```toml
//! [servers.github]
//! transport = "stdio"
//! command = "npx"
//! args = ["-y", "@modelcontextprotocol/server-github"]
//! env = { GITHUB_PERSONAL_ACCESS_TOKEN = "${GITHUB_TOKEN}" }
//!
//! [servers.docs]
//! transport = "http"            # Streamable HTTP; "sse" for legacy HTTP+SSE
//! url = "https://mcp.example.com/mcp"
//! headers = { Authorization = "Bearer ${DOCS_TOKEN}" }
//! ```
//!
//! Header and environment values, arguments and URLs may name environment
//! variables as `${NAME}`; they are expanded only when connecting, so
//! secrets never sit in the file, the store or a log, and an error that
//! quotes an expanded value is redacted ([`redact_for`]). A server's
//! *identity* (what the store and the lock record) is its transport and
//! command or URL, never those values, with literal credentials in
//! arguments and URLs redacted.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};
use plumbline_base::redact::Known;
use plumbline_mcp::{HttpSpec, ServerSpec, StdioSpec};
use plumbline_taxonomy::{Severity, Taxonomy};
use serde::{Deserialize, Serialize};

pub mod normalize;
pub use normalize::{NormalizeRule, Normalizer};

/// The file as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The taxonomy that grades (`"v1"`, the default, `"v2"` or `"v3"`), for
    /// every command reading this file unless `--taxonomy` says otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taxonomy: Option<Taxonomy>,
    #[serde(default, skip_serializing_if = "LimitsConfig::is_default")]
    pub limits: LimitsConfig,
    #[serde(default, skip_serializing_if = "WatchConfig::is_default")]
    pub watch: WatchConfig,
    /// Where `plumbline watch` sends alerts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alerts: Vec<AlertConfig>,
    #[serde(default)]
    pub servers: BTreeMap<String, ServerConfig>,
    /// `[guard.NAME]`: how `plumbline guard` treats calls to server NAME.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub guard: BTreeMap<String, GuardConfig>,
}

/// `[guard.NAME]`: the guard's policy for one server's calls.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct GuardConfig {
    /// A call whose arguments hold secret material: `"block"` (the
    /// default) or `"warn"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_secret: Option<String>,
    /// Where secret material is expected: `TOOL` (any argument of it) or
    /// `TOOL/POINTER` (one argument, a JSON pointer into `arguments`:
    /// `login/password`), for tools whose purpose is to receive one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_secrets: Vec<String>,
    /// A tool result holding text aimed at the model: `"warn"` (the
    /// default), `"mark"` or `"block"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_injected_result: Option<String>,
}

/// `[watch]`: how often `plumbline watch` observes each server.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WatchConfig {
    /// Seconds between observations of a server (default 300).
    pub interval_secs: Option<f64>,
    /// Spread each interval by up to this fraction either way (default 0.1).
    pub jitter: Option<f64>,
    /// Servers observed at once (default 16).
    pub concurrency: Option<usize>,
    /// A dashboard base URL; alerts link to its change pages.
    pub dashboard_url: Option<String>,
    /// Where `/healthz` and `/metrics` are served (default
    /// "127.0.0.1:9464"; "" to serve nothing).
    pub listen: Option<String>,
    /// After a server announces `list_changed`, wait this long for it to
    /// settle before listing (default 2; further announcements restart the
    /// wait, up to ten times this in all).
    pub debounce_secs: Option<f64>,
    /// Delivery attempts of one alert before it is marked failed
    /// (default 8).
    pub alert_attempts: Option<u32>,
    /// The wait after an alert's first failed attempt, doubled after each
    /// further one (with jitter), at most an hour (default 5).
    pub alert_backoff_secs: Option<f64>,
    /// How long one delivery attempt may take (default 10).
    pub alert_timeout_secs: Option<f64>,
    /// How long a watcher holds a server without renewing its lease
    /// (default 30): when several watchers share one history, a server
    /// whose watcher died is taken over within this long.
    pub lease_secs: Option<f64>,
    /// Per-server intervals in seconds, overriding `interval_secs`:
    /// `[watch.intervals]` then `github = 60`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub intervals: BTreeMap<String, f64>,
}

impl WatchConfig {
    fn is_default(&self) -> bool {
        *self == WatchConfig::default()
    }
}

/// `[[alerts]]`: one alert channel.
///
/// ```toml
/// [[alerts]]
/// name = "security"
/// type = "webhook"          # webhook | slack | jsonl | exec
/// url = "https://hooks.example.com/plumbline"
/// secret = "${PLUMBLINE_WEBHOOK_SECRET}"
/// min_severity = "high"
/// ```
// Read through `ChannelFile`: serde cannot combine `deny_unknown_fields`
// with `flatten`, and a misspelt key must be an error.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(try_from = "ChannelFile")]
pub struct AlertConfig {
    pub name: String,
    #[serde(flatten)]
    pub channel: ChannelConfig,
    /// Changed tools below this are not sent (default "high"); failures
    /// and recoveries always are.
    #[serde(default = "default_min_severity")]
    pub min_severity: Severity,
}

fn default_min_severity() -> Severity {
    Severity::High
}

/// An `[[alerts]]` table as written. A plain table (not a tagged one) so
/// that the reader points at the offending key or value; which keys each
/// type takes is checked when it becomes an [`AlertConfig`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ChannelFile {
    name: String,
    #[serde(rename = "type")]
    kind: ChannelType,
    url: Option<String>,
    secret: Option<String>,
    command: Option<Vec<String>>,
    env: Option<BTreeMap<String, String>>,
    inherit_env: Option<Vec<String>>,
    #[serde(default = "default_min_severity")]
    min_severity: Severity,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum ChannelType {
    Webhook,
    Slack,
    Jsonl,
    Exec,
}

impl TryFrom<ChannelFile> for AlertConfig {
    type Error = String;

    fn try_from(f: ChannelFile) -> Result<AlertConfig, String> {
        use ChannelType::*;
        let kind = format!("{:?}", f.kind).to_lowercase();
        // Each key a type does not take is an error, in the reader's words
        // so that its line is found.
        let extra = [
            ("url", f.url.is_some(), matches!(f.kind, Webhook | Slack)),
            ("secret", f.secret.is_some(), f.kind == Webhook),
            ("command", f.command.is_some(), f.kind == Exec),
            ("env", f.env.is_some(), f.kind == Exec),
            ("inherit_env", f.inherit_env.is_some(), f.kind == Exec),
        ];
        if let Some((key, ..)) = extra.iter().find(|(_, set, takes)| *set && !takes) {
            return Err(format!(
                "unknown field `{key}`: a {kind} channel does not take it"
            ));
        }
        let missing = |key: &str| format!("missing field `{key}` (a {kind} channel needs it)");
        let channel = match f.kind {
            Webhook => ChannelConfig::Webhook {
                url: f.url.ok_or_else(|| missing("url"))?,
                secret: f.secret,
            },
            Slack => ChannelConfig::Slack {
                url: f.url.ok_or_else(|| missing("url"))?,
            },
            Jsonl => ChannelConfig::Jsonl,
            Exec => ChannelConfig::Exec {
                command: f.command.ok_or_else(|| missing("command"))?,
                env: f.env.unwrap_or_default(),
                inherit_env: f.inherit_env.unwrap_or_default(),
            },
        };
        Ok(AlertConfig {
            name: f.name,
            channel,
            min_severity: f.min_severity,
        })
    }
}

pub use plumbline_base::file::read_file;

/// The largest `plumbline.toml` read.
pub const MAX_CONFIG_BYTES: u64 = 4 << 20;

/// A TOML error, with the line of the offending key when the reader could
/// only point at its table (serde reads a tagged table whole, so an
/// unknown key in `[servers.x]` or `[[alerts]]` is reported at the
/// table's header).
fn toml_error(path: &Path, text: &str, e: &toml::de::Error) -> anyhow::Error {
    let message = e.message();
    let key = message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split('`').next());
    if let (Some(key), Some(span)) = (key, e.span()) {
        if let Some(line) = key_line(text, span.start, key) {
            return anyhow::anyhow!("{}: line {line}: {message}", path.display());
        }
    }
    anyhow::anyhow!("{}: {e}", path.display())
}

/// The 1-based line, at or after byte `from` and within the table it lies
/// in, where `key` is set.
fn key_line(text: &str, from: usize, key: &str) -> Option<usize> {
    let first = text.get(..from)?.matches('\n').count();
    for (i, line) in text.lines().enumerate().skip(first) {
        let line = line.trim_start();
        if i > first && line.starts_with('[') {
            return None;
        }
        let rest = line
            .strip_prefix(key)
            .or_else(|| line.strip_prefix(&format!("\"{key}\"")));
        if rest.is_some_and(|r| r.trim_start().starts_with('=')) {
            return Some(i + 1);
        }
    }
    None
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ChannelConfig {
    /// Plumbline's JSON, signed with `secret` (HMAC-SHA256).
    Webhook { url: String, secret: Option<String> },
    /// A Slack-compatible incoming webhook.
    Slack { url: String },
    /// JSON Lines on standard output.
    Jsonl,
    /// A command that reads the alert's JSON on stdin. Like a stdio
    /// server, it starts with only the default variables, the names in
    /// `inherit_env` and its own `env` (`${VAR}` expanded).
    Exec {
        command: Vec<String>,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        env: BTreeMap<String, String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        inherit_env: Vec<String>,
    },
}

/// `[limits]`: overrides of the client's bounds, all optional.
///
/// ```toml
/// [limits]
/// initialize_timeout_secs = 30
/// list_timeout_secs = 60
/// max_message_bytes = 33554432
/// max_tools = 10000
/// max_pages = 1000
/// ```
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    pub connect_timeout_secs: Option<f64>,
    pub initialize_timeout_secs: Option<f64>,
    pub list_timeout_secs: Option<f64>,
    pub discover_timeout_secs: Option<f64>,
    pub max_message_bytes: Option<usize>,
    pub max_tools: Option<usize>,
    pub max_pages: Option<usize>,
    pub stderr_bytes: Option<usize>,
}

impl LimitsConfig {
    fn is_default(&self) -> bool {
        *self == LimitsConfig::default()
    }

    /// The client's limits with these overrides applied.
    pub fn limits(&self) -> Result<plumbline_mcp::Limits> {
        let mut l = plumbline_mcp::Limits::default();
        let secs = |v: Option<f64>, name: &str, into: &mut std::time::Duration| -> Result<()> {
            if let Some(s) = v {
                if !(s.is_finite() && s > 0.0 && s <= 86_400.0) {
                    bail!("limits.{name}: {s} is not a number of seconds between 0 and 86400");
                }
                *into = std::time::Duration::from_secs_f64(s);
            }
            Ok(())
        };
        secs(
            self.connect_timeout_secs,
            "connect_timeout_secs",
            &mut l.connect_timeout,
        )?;
        secs(
            self.initialize_timeout_secs,
            "initialize_timeout_secs",
            &mut l.initialize_timeout,
        )?;
        secs(
            self.list_timeout_secs,
            "list_timeout_secs",
            &mut l.list_timeout,
        )?;
        secs(
            self.discover_timeout_secs,
            "discover_timeout_secs",
            &mut l.discover_timeout,
        )?;
        let count = |v: Option<usize>, name: &str, into: &mut usize| -> Result<()> {
            if let Some(n) = v {
                if n == 0 {
                    bail!("limits.{name} must be at least 1");
                }
                *into = n;
            }
            Ok(())
        };
        count(
            self.max_message_bytes,
            "max_message_bytes",
            &mut l.max_message_bytes,
        )?;
        count(self.max_tools, "max_tools", &mut l.max_tools)?;
        count(self.max_pages, "max_pages", &mut l.max_pages)?;
        count(self.stderr_bytes, "stderr_bytes", &mut l.stderr_bytes)?;
        Ok(l)
    }
}

/// One server, by transport.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(tag = "transport", rename_all = "lowercase", deny_unknown_fields)]
pub enum ServerConfig {
    Stdio {
        command: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        args: Vec<String>,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        env: BTreeMap<String, String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwd: Option<PathBuf>,
        /// Names of Plumbline's own environment variables the server
        /// inherits beyond the defaults (`PATH`, `HOME`, `USER`, `LOGNAME`,
        /// `SHELL`, `TERM`, `LANG`, `LC_*`, `TMPDIR`). Nothing else of
        /// Plumbline's environment reaches a server.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        inherit_env: Vec<String>,
        /// Rewrites before comparing ([`normalize`]).
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        normalize: BTreeMap<String, NormalizeRule>,
    },
    Http {
        url: String,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        headers: BTreeMap<String, String>,
        /// How Plumbline authorizes at a server behind the MCP
        /// authorization flow (OAuth 2.1); without it, a server that asks
        /// is authorized with dynamic registration where it offers one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        oauth: Option<OAuthConfig>,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        normalize: BTreeMap<String, NormalizeRule>,
    },
    Sse {
        url: String,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        headers: BTreeMap<String, String>,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        normalize: BTreeMap<String, NormalizeRule>,
    },
}

/// `[servers.NAME.oauth]`: the client Plumbline is at a server's
/// authorization server.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthConfig {
    /// A client registered beforehand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// Its secret, as `${NAME}` (an environment variable): never written
    /// into the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// Instead of a secret: a PKCS#8 PEM private key (P-256 or RSA) that
    /// signs a JWT client assertion (`private_key_jwt`); a file only its
    /// owner can read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_key_file: Option<PathBuf>,
    /// An HTTPS URL where Plumbline's client metadata document is hosted
    /// (docs/configuration.md says what to host), used where the
    /// authorization server reads such documents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_metadata_url: Option<String>,
    /// Scopes to ask for instead of those the server names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
    /// The authorization server (its issuer, exactly) the configured
    /// client belongs to: its secret or key is never sent to another,
    /// whatever the server names. Required with `client_secret` or
    /// `private_key_file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// `authorization_code` (a person authorizes; the default) or
    /// `client_credentials` (a machine, with `client_id` and
    /// `client_secret`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<String>,
}

/// The key of `oauth.private_key_file`: a file no one but its owner can
/// read (as ssh requires of its keys), at most 64 KiB.
fn private_key(path: &Path) -> Result<plumbline_mcp::auth::AssertionKey> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path)
            .with_context(|| format!("oauth.private_key_file {}", path.display()))?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            bail!(
                "oauth.private_key_file {} can be read by others (mode {:o}): chmod 600 it",
                path.display(),
                mode & 0o777
            );
        }
    }
    let pem = read_file(path, 64 << 10)?;
    plumbline_mcp::auth::AssertionKey::from_pem(&pem)
        .map_err(|e| anyhow::anyhow!("oauth.private_key_file {}: {e}", path.display()))
}

/// The environment variable that makes the authorization flow follow the
/// authorization server's redirect itself instead of asking a person: for
/// tests against an authorization server that redirects at once (the
/// conformance suite's), never for real servers.
pub const FOLLOW_REDIRECT_FOR_TESTS: &str = "PLUMBLINE_TEST_OAUTH_FOLLOW_REDIRECT";

/// Set (to `1`) by `plumbline login` for the server it logs in to: a
/// person is at this machine, and the flow opens a browser.
pub const LOGIN: &str = "PLUMBLINE_OAUTH_LOGIN";

impl OAuthConfig {
    /// The flow's settings, `${NAME}` in the secret expanded (and known,
    /// so that no message shows it).
    fn settings(
        &self,
        lookup: &dyn Fn(&str) -> Option<String>,
        known: &mut Known,
    ) -> Result<plumbline_mcp::auth::Settings> {
        use plumbline_mcp::auth::{Grant, Settings};
        let client_secret = match &self.client_secret {
            None => None,
            Some(s) if !plumbline_base::redact::is_reference(s) => bail!(
                "oauth.client_secret must be written as ${{NAME}} (an environment variable), not the secret itself"
            ),
            Some(s) => Some(expand_known(s, lookup, known).context("oauth.client_secret")?),
        };
        let grant = match self.grant.as_deref() {
            None | Some("authorization_code") => Grant::AuthorizationCode,
            Some("client_credentials") => Grant::ClientCredentials,
            Some(other) => bail!(
                "oauth.grant: {other:?} is neither \"authorization_code\" nor \"client_credentials\""
            ),
        };
        let client_assertion_key = match &self.private_key_file {
            None => None,
            Some(path) => Some(std::sync::Arc::new(private_key(path)?)),
        };
        if client_secret.is_some() && client_assertion_key.is_some() {
            bail!("oauth: give client_secret or private_key_file, not both");
        }
        if (client_secret.is_some() || client_assertion_key.is_some()) && self.issuer.is_none() {
            bail!("oauth: a client_secret or private_key_file needs issuer = \"…\", the authorization server it belongs to (a server must not be able to send it elsewhere)");
        }
        if grant == Grant::ClientCredentials
            && (self.client_id.is_none()
                || (client_secret.is_none() && client_assertion_key.is_none()))
        {
            bail!("oauth.grant = \"client_credentials\" needs client_id, and client_secret or private_key_file");
        }
        if let Some(url) = &self.client_metadata_url {
            if !url.starts_with("https://") {
                bail!("oauth.client_metadata_url must be an https:// URL");
            }
        }
        Ok(Settings {
            client_id: self.client_id.clone(),
            client_secret,
            client_assertion_key,
            client_metadata_url: self.client_metadata_url.clone(),
            scopes: self.scopes.clone(),
            issuer: self.issuer.clone(),
            grant,
            ..Settings::default()
        })
    }
}

impl Config {
    pub fn load(path: &Path) -> Result<Config> {
        if !path.exists() {
            bail!(
                "there is no {}: run `plumbline discover --write {}` to import the servers your MCP clients use, or write one (see README)",
                path.display(),
                path.display()
            );
        }
        let text = read_file(path, MAX_CONFIG_BYTES)?;
        let config: Config = toml::from_str(&text).map_err(|e| toml_error(path, &text, &e))?;
        for (name, server) in &config.servers {
            check_name(name).with_context(|| format!("{}", path.display()))?;
            if let ServerConfig::Stdio { inherit_env, .. } = server {
                check_inherit_env(inherit_env)
                    .with_context(|| format!("{}: servers.{name}.inherit_env", path.display()))?;
            }
            normalize::check_rules(server.normalize_rules())
                .with_context(|| format!("{}: servers.{name}", path.display()))?;
        }
        for (name, g) in &config.guard {
            let key = format!("{}: guard.{name}", path.display());
            if !config.servers.contains_key(name) {
                bail!("{key}: there is no [servers.{name}]");
            }
            if let Some(v) = &g.on_secret {
                if v != "block" && v != "warn" {
                    bail!("{key}.on_secret: {v:?} is neither \"block\" nor \"warn\"");
                }
            }
            if let Some(v) = &g.on_injected_result {
                if !["warn", "mark", "block"].contains(&v.as_str()) {
                    bail!("{key}.on_injected_result: {v:?} is not \"warn\", \"mark\" or \"block\"");
                }
            }
            for a in &g.allow_secrets {
                if a.trim().is_empty() || a.starts_with('/') {
                    bail!("{key}.allow_secrets: {a:?} is not TOOL or TOOL/POINTER");
                }
            }
        }
        let mut names = std::collections::BTreeSet::new();
        for (i, alert) in config.alerts.iter().enumerate() {
            let key = format!("{}: alerts[{i}] ({:?})", path.display(), alert.name);
            if alert.name.trim().is_empty() {
                bail!("{key}.name: a channel needs a name");
            }
            if !names.insert(alert.name.as_str()) {
                bail!("{key}.name: another channel has the same name");
            }
            if let ChannelConfig::Exec { inherit_env, .. } = &alert.channel {
                check_inherit_env(inherit_env).with_context(|| format!("{key}.inherit_env"))?;
            }
        }
        if let Some(url) = &config.watch.dashboard_url {
            check_url(url).with_context(|| format!("{}: watch.dashboard_url", path.display()))?;
        }
        for (name, server) in &config.servers {
            if let ServerConfig::Http { url, .. } | ServerConfig::Sse { url, .. } = server {
                check_url(url)
                    .with_context(|| format!("{}: servers.{name}.url", path.display()))?;
            }
        }
        config
            .limits
            .limits()
            .with_context(|| format!("{}", path.display()))?;
        Ok(config)
    }

    /// Checks what a long-running watcher needs before it starts: every
    /// `${VAR}` of every alert channel is set, and every channel URL, once
    /// expanded, parses (the error names the key): a watcher that cannot
    /// tell anyone must not start. A server whose `${VAR}` is unset does
    /// not stop it: each such server is returned with why (the variable
    /// named), and is observed as failed until the variable is set.
    pub fn check_environment(
        &self,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Vec<(String, String)>> {
        for (i, alert) in self.alerts.iter().enumerate() {
            alert
                .target(lookup)
                .with_context(|| format!("alerts[{i}] ({:?})", alert.name))?;
        }
        Ok(self
            .servers
            .iter()
            .filter_map(|(name, server)| {
                server
                    .spec_with(lookup)
                    .err()
                    .map(|e| (name.clone(), format!("servers.{name}: {e:#}")))
            })
            .collect())
    }

    /// [`Config::check_environment`] against the process environment.
    pub fn check_process_environment(&self) -> Result<Vec<(String, String)>> {
        self.check_environment(&env_lookup)
    }

    /// The taxonomy to grade with: `flag` when given, else this file's.
    pub fn taxonomy(&self, flag: Option<Taxonomy>) -> Taxonomy {
        flag.or(self.taxonomy).unwrap_or_default()
    }

    /// The taxonomy for a command that does not otherwise read the
    /// registry: `flag` when given, else `taxonomy` in the registry at
    /// `$PLUMBLINE_CONFIG` or `plumbline.toml` when that file exists,
    /// else v1. A registry that exists but cannot be read is an error.
    pub fn taxonomy_for(flag: Option<Taxonomy>) -> Result<Taxonomy> {
        if let Some(t) = flag {
            return Ok(t);
        }
        Ok(Config::taxonomy_in(&Config::default_registry())?.unwrap_or_default())
    }

    /// The registry a command without `--config` reads: `$PLUMBLINE_CONFIG`,
    /// else `plumbline.toml` here. Its folder is the project, whose store
    /// is the default one.
    pub fn default_registry() -> PathBuf {
        std::env::var_os("PLUMBLINE_CONFIG")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("plumbline.toml"))
    }

    /// The `taxonomy` the registry at `path` names, if it exists and names
    /// one. A registry that exists but cannot be read is an error.
    pub fn taxonomy_in(path: &Path) -> Result<Option<Taxonomy>> {
        if !path.exists() {
            return Ok(None);
        }
        Ok(Config::load(path)?.taxonomy)
    }

    /// The servers named in `only` (all when empty), in name order; an
    /// unknown name is an error.
    pub fn select(&self, only: &[String]) -> Result<Vec<(&str, &ServerConfig)>> {
        if only.is_empty() {
            return Ok(self.servers.iter().map(|(k, v)| (k.as_str(), v)).collect());
        }
        only.iter()
            .map(|name| {
                self.servers
                    .get_key_value(name)
                    .map(|(k, v)| (k.as_str(), v))
                    .ok_or_else(|| anyhow::anyhow!("no server named {name:?} in the configuration"))
            })
            .collect()
    }
}

fn check_name(name: &str) -> Result<()> {
    // Only dots (`.`, `..`) would be path segments in every link.
    let ok = !name.is_empty()
        && !name.bytes().all(|b| b == b'.')
        && name.len() <= 100
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !ok {
        bail!(
            "server name {name:?}: use letters, digits, '-', '_' and '.' (not dots alone; at most 100)"
        );
    }
    Ok(())
}

fn check_inherit_env(names: &[String]) -> Result<()> {
    for name in names {
        if !plumbline_mcp::is_valid_env_name(name) {
            bail!("{name:?} is not an environment variable name");
        }
    }
    Ok(())
}

/// Expands `${NAME}` from `lookup`; `$$` is a literal `$`. An unset name is
/// an error naming it (never its value).
pub fn expand(value: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        if let Some(after) = rest.strip_prefix("$$") {
            out.push('$');
            rest = after;
        } else if let Some(after) = rest.strip_prefix("${") {
            let Some(end) = after.find('}') else {
                bail!("unterminated ${{ in a configured value");
            };
            let name = &after[..end];
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                bail!("invalid variable name {name:?} in a configured value");
            }
            match lookup(name) {
                Some(v) => out.push_str(&v),
                None => bail!("environment variable {name} is not set"),
            }
            rest = &after[end + 1..];
        } else {
            out.push('$');
            rest = &rest[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// [`expand`] from the process environment.
pub fn expand_env(value: &str) -> Result<String> {
    expand(value, &env_lookup)
}

/// [`expand`], remembering each value it put in (so that text showing it
/// can be redacted).
pub fn expand_known(
    value: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    known: &mut Known,
) -> Result<String> {
    let seen = std::cell::RefCell::new(Vec::new());
    let out = expand(value, &|name: &str| {
        let v = lookup(name);
        if let Some(v) = &v {
            seen.borrow_mut().push((name.to_owned(), v.clone()));
        }
        v
    })?;
    for (name, v) in seen.into_inner() {
        known.insert(&name, &v);
    }
    Ok(out)
}

/// A URL Plumbline sends to: it parses, and its scheme is http or https.
fn check_url(url: &str) -> Result<()> {
    if url.contains("${") {
        // Checked once expanded (`check_environment`).
        return Ok(());
    }
    let parsed = url::Url::parse(url).map_err(|e| anyhow::anyhow!("{e}: not a URL"))?;
    match parsed.scheme() {
        "http" | "https" => Ok(()),
        other => bail!("scheme {other:?} is not http or https"),
    }
}

/// Where an alert channel delivers, with every `${VAR}` expanded, and
/// the values expanded (to redact from errors).
#[derive(Debug, Clone)]
pub enum Target {
    Webhook {
        url: String,
        secret: Option<String>,
        known: Known,
    },
    Slack {
        url: String,
        known: Known,
    },
    Jsonl,
    Exec {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        inherit_env: Vec<String>,
        known: Known,
    },
}

impl Target {
    /// The expanded values, to redact from any text about this channel.
    pub fn known(&self) -> Option<&Known> {
        match self {
            Target::Webhook { known, .. }
            | Target::Slack { known, .. }
            | Target::Exec { known, .. } => Some(known),
            Target::Jsonl => None,
        }
    }
}

impl AlertConfig {
    /// The channel's target, expanded from `lookup`; an error names the
    /// key (`url`, `secret`, `env.NAME`, `command`).
    pub fn target(&self, lookup: &dyn Fn(&str) -> Option<String>) -> Result<Target> {
        let mut known = Known::default();
        Ok(match &self.channel {
            ChannelConfig::Webhook { url, secret } => {
                let url = expand_known(url, lookup, &mut known).context("url")?;
                check_url(&url).context("url")?;
                let secret = secret
                    .as_deref()
                    .map(|s| expand_known(s, lookup, &mut known))
                    .transpose()
                    .context("secret")?;
                Target::Webhook { url, secret, known }
            }
            ChannelConfig::Slack { url } => {
                let url = expand_known(url, lookup, &mut known).context("url")?;
                check_url(&url).context("url")?;
                Target::Slack { url, known }
            }
            ChannelConfig::Jsonl => Target::Jsonl,
            ChannelConfig::Exec {
                command,
                env,
                inherit_env,
            } => {
                let Some((cmd, args)) = command.split_first() else {
                    bail!("command: an exec channel needs a command");
                };
                let env = env
                    .iter()
                    .map(|(k, v)| {
                        Ok((
                            k.clone(),
                            expand_known(v, lookup, &mut known)
                                .with_context(|| format!("env.{k}"))?,
                        ))
                    })
                    .collect::<Result<Vec<_>>>()?;
                Target::Exec {
                    command: cmd.clone(),
                    args: args.to_vec(),
                    env,
                    inherit_env: inherit_env.clone(),
                    known,
                }
            }
        })
    }

    /// [`AlertConfig::target`] from the process environment.
    pub fn target_from_env(&self) -> Result<Target> {
        self.target(&env_lookup)
    }
}

fn env_lookup(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

impl ServerConfig {
    /// The rules that rewrite this server's tools before comparing.
    pub fn normalize_rules(&self) -> &BTreeMap<String, NormalizeRule> {
        match self {
            ServerConfig::Stdio { normalize, .. }
            | ServerConfig::Http { normalize, .. }
            | ServerConfig::Sse { normalize, .. } => normalize,
        }
    }

    /// The rules ready to apply where Plumbline runs now (its `$HOME`, its
    /// user, the server's working directory); `None` without rules.
    pub fn normalizer(&self) -> Result<Option<Normalizer>> {
        let cwd = match self {
            ServerConfig::Stdio { cwd, .. } => cwd.as_ref(),
            _ => None,
        };
        Normalizer::new(
            self.normalize_rules(),
            normalize::Environment::of_process(cwd),
        )
    }

    /// What the store records about the server: no secret values.
    pub fn identity(&self) -> serde_json::Value {
        match self {
            ServerConfig::Stdio {
                command,
                args,
                cwd,
                env,
                inherit_env,
                ..
            } => {
                // Literal secrets in arguments never reach the store, the
                // lock or a page; `${NAME}` references are kept.
                let mut id = serde_json::json!({
                    "transport": "stdio",
                    "command": command,
                    "args": plumbline_base::redact::redact_args(args),
                    "cwd": cwd,
                    "env": env.keys().collect::<Vec<_>>(),
                });
                // Only when set, so identities recorded before the key
                // existed stay equal.
                if !inherit_env.is_empty() {
                    id["inherit_env"] = serde_json::json!(inherit_env);
                }
                id
            }
            ServerConfig::Http { url, headers, .. } => serde_json::json!({
                "transport": "http",
                "url": plumbline_base::redact::redact_url(url),
                "headers": headers.keys().collect::<Vec<_>>(),
            }),
            ServerConfig::Sse { url, headers, .. } => serde_json::json!({
                "transport": "sse",
                "url": plumbline_base::redact::redact_url(url),
                "headers": headers.keys().collect::<Vec<_>>(),
            }),
        }
    }

    /// What to connect to, with `${NAME}` expanded from the environment.
    pub fn spec(&self) -> Result<ServerSpec> {
        self.spec_with(&env_lookup)
    }

    pub fn spec_with(&self, lookup: &dyn Fn(&str) -> Option<String>) -> Result<ServerSpec> {
        Ok(self.spec_known(lookup)?.0)
    }

    /// [`ServerConfig::spec_with`], and every value it expanded, to redact
    /// from whatever text the server or its connection produces.
    ///
    /// `${NAME}` is expanded in `env` and `headers` values, in each of
    /// `args` and in `url`, so that a token never has to be written into
    /// the file (or the server's identity) to reach the server.
    pub fn spec_known(
        &self,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(ServerSpec, Known)> {
        self.spec_known_as(None, lookup)
    }

    /// [`ServerConfig::spec_known`] for the server configured as `name`:
    /// a message that a person must log in names `plumbline login NAME`.
    pub fn spec_known_as(
        &self,
        name: Option<&str>,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(ServerSpec, Known)> {
        let mut known = Known::default();
        let pairs = |m: &BTreeMap<String, String>,
                     what: &str,
                     known: &mut Known|
         -> Result<Vec<(String, String)>> {
            m.iter()
                .map(|(k, v)| {
                    Ok((
                        k.clone(),
                        expand_known(v, lookup, known).with_context(|| format!("{what} {k}"))?,
                    ))
                })
                .collect()
        };
        let spec = match self {
            ServerConfig::Stdio {
                command,
                args,
                env,
                cwd,
                inherit_env,
                ..
            } => ServerSpec::Stdio(StdioSpec {
                command: command.clone(),
                args: args
                    .iter()
                    .enumerate()
                    .map(|(i, a)| {
                        expand_known(a, lookup, &mut known).with_context(|| format!("args[{i}]"))
                    })
                    .collect::<Result<_>>()?,
                env: pairs(env, "environment variable", &mut known)?,
                inherit_env: inherit_env.clone(),
                cwd: cwd.clone(),
            }),
            ServerConfig::Http { url, headers, .. } | ServerConfig::Sse { url, headers, .. } => {
                let mut http = HttpSpec {
                    url: expand_known(url, lookup, &mut known).context("url")?,
                    headers: pairs(headers, "header", &mut known)?,
                    auth: None,
                };
                if let ServerConfig::Http { oauth, .. } = self {
                    // A server given its own Authorization header is not
                    // authorized by the flow unless configured for it.
                    let own = headers
                        .keys()
                        .any(|k| k.eq_ignore_ascii_case("authorization"));
                    if oauth.is_some() || !own {
                        let mut settings = match oauth {
                            Some(o) => o.settings(lookup, &mut known)?,
                            None => plumbline_mcp::auth::Settings::default(),
                        };
                        if lookup(FOLLOW_REDIRECT_FOR_TESTS).as_deref() == Some("1") {
                            settings.user_agent = plumbline_mcp::auth::UserAgent::FollowRedirect;
                        }
                        if lookup(LOGIN).as_deref() == Some("1") {
                            settings.user_agent = plumbline_mcp::auth::UserAgent::Browser;
                        }
                        settings.server = http.url.clone();
                        settings.login_hint = name.map(|n| format!("plumbline login {n}"));
                        settings.token_file =
                            plumbline_mcp::auth::tokens::TokenFile::default_location(lookup);
                        let authorizer = plumbline_mcp::auth::Authorizer::new(
                            settings,
                            std::time::Duration::from_secs(10),
                            std::time::Duration::from_secs(30),
                        )
                        .map_err(|e| anyhow::anyhow!("oauth: {e}"))?;
                        http.auth = Some(plumbline_mcp::Auth(std::sync::Arc::new(authorizer)));
                    }
                }
                if matches!(self, ServerConfig::Http { .. }) {
                    ServerSpec::Http(http)
                } else {
                    ServerSpec::Sse(http)
                }
            }
        };
        Ok((spec, known))
    }

    /// [`ServerConfig::spec_known`] from the process environment.
    pub fn spec_known_from_env(&self) -> Result<(ServerSpec, Known)> {
        self.spec_known(&env_lookup)
    }

    /// [`ServerConfig::spec_known_as`] from the process environment.
    pub fn spec_known_from_env_as(&self, name: &str) -> Result<(ServerSpec, Known)> {
        self.spec_known_as(Some(name), &env_lookup)
    }
}

/// Text about a server (an error, its stderr) with every value Plumbline
/// expanded for it and every URL's secrets redacted.
pub fn redact_for(known: &Known, text: &str) -> String {
    let text = known.redact(text);
    plumbline_base::redact::redact_url_within(&text).into_owned()
}

/// A listing's own text about the server (lines it printed on stdout that
/// were skipped) with every value Plumbline expanded for it redacted, as
/// [`redact_for`] does for errors: a server that prints its token never has
/// it stored or shown.
pub fn redact_listing(known: &Known, listing: &mut plumbline_mcp::Listing) {
    for p in &mut listing.problems {
        match p {
            plumbline_mcp::ListingProblem::SkippedOutput { excerpt: text }
            | plumbline_mcp::ListingProblem::AuthorizationMetadata { error: text }
            | plumbline_mcp::ListingProblem::Prompts { error: text } => {
                *text = redact_for(known, text);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_oauth_table_keeps_its_secret_out_of_the_file_and_of_messages() {
        let parse = |extra: &str| -> Config {
            toml::from_str(&format!(
                "[servers.r]\ntransport = \"http\"\nurl = \"https://mcp.example/mcp\"\n[servers.r.oauth]\n{extra}"
            ))
            .unwrap()
        };
        let lookup = |n: &str| (n == "SECRET").then(|| "s3cret-value".to_owned());
        let c = parse(
            "client_id = \"id\"\nclient_secret = \"${SECRET}\"\ngrant = \"client_credentials\"\nissuer = \"https://as.example\"",
        );
        let (spec, known) = c.servers["r"].spec_known(&lookup).unwrap();
        match spec {
            ServerSpec::Http(h) => assert!(h.auth.is_some()),
            other => panic!("{other:?}"),
        }
        // An expanded secret is redacted from whatever is said about the server.
        assert!(!redact_for(&known, "refused s3cret-value").contains("s3cret-value"));
        // A literal secret, an unknown grant, client credentials without a
        // secret, and a client metadata URL that is not https are refused.
        for bad in [
            "client_id = \"id\"\nclient_secret = \"p4ss-literal\"",
            "grant = \"password\"",
            "grant = \"client_credentials\"\nclient_id = \"id\"",
            "client_metadata_url = \"http://example.com/c.json\"",
            "client_id = \"id\"\nclient_secret = \"${SECRET}\"",
        ] {
            let c = parse(bad);
            let e = c.servers["r"].spec_known(&lookup).unwrap_err();
            assert!(!format!("{e:#}").contains("p4ss-literal"), "{e:#}");
        }
        assert!(toml::from_str::<Config>(
            "[servers.r]\ntransport = \"http\"\nurl = \"x\"\n[servers.r.oauth]\nunknown = 1"
        )
        .is_err());
        // A private key file others can read is refused before it is read;
        // one that is not a key is refused without showing it.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let dir = tempfile::tempdir().unwrap();
            let key = dir.path().join("key.pem");
            std::fs::write(
                &key,
                "-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----\n",
            )
            .unwrap();
            let with_key = parse(&format!(
                "client_id = \"id\"\ngrant = \"client_credentials\"\nissuer = \"https://as.example\"\nprivate_key_file = {:?}",
                key.display().to_string()
            ));
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
            let e = format!(
                "{:#}",
                with_key.servers["r"].spec_known(&lookup).unwrap_err()
            );
            assert!(e.contains("chmod 600"), "{e}");
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
            let e = format!(
                "{:#}",
                with_key.servers["r"].spec_known(&lookup).unwrap_err()
            );
            assert!(
                e.contains("neither a P-256") && !e.contains("c2VjcmV0"),
                "{e}"
            );
        }
        // Without a table, a server with its own Authorization header is
        // not authorized by the flow; one without is.
        let c: Config = toml::from_str(
            "[servers.a]\ntransport = \"http\"\nurl = \"https://a.example/mcp\"\nheaders = { Authorization = \"Bearer x\" }\n[servers.b]\ntransport = \"http\"\nurl = \"https://b.example/mcp\"",
        )
        .unwrap();
        let auth = |name: &str| match c.servers[name].spec_known(&lookup).unwrap().0 {
            ServerSpec::Http(h) => h.auth.is_some(),
            other => panic!("{other:?}"),
        };
        assert!(!auth("a"));
        assert!(auth("b"));
    }

    use super::*;

    #[test]
    fn server_names_of_dots_alone_are_refused() {
        for bad in [".", "..", "...", "", "a b", "a/b"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        for good in ["github", "a.b", ".hidden", "v1.2", "a-b_c"] {
            assert!(check_name(good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn urls_and_arguments_take_variables_and_identities_hide_literal_secrets() {
        let c: Config = toml::from_str(
            r#"
            [servers.cli]
            transport = "stdio"
            command = "tool"
            args = ["--token=${TOK}", "--api-key", "literal-key-1", "--region", "eu"]

            [servers.web]
            transport = "http"
            url = "https://u:literal-pass@h.example/mcp?key=${KEY}&x=1"
            "#,
        )
        .unwrap();
        let lookup = |n: &str| Some(format!("value-of-{n}"));
        let (spec, known) = c.servers["cli"].spec_known(&lookup).unwrap();
        match spec {
            ServerSpec::Stdio(s) => assert_eq!(
                s.args,
                [
                    "--token=value-of-TOK",
                    "--api-key",
                    "literal-key-1",
                    "--region",
                    "eu"
                ]
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            redact_for(&known, "echoed value-of-TOK"),
            "echoed <redacted ${TOK}>"
        );
        match c.servers["web"].spec_with(&lookup).unwrap() {
            ServerSpec::Http(h) => {
                assert_eq!(
                    h.url,
                    "https://u:literal-pass@h.example/mcp?key=value-of-KEY&x=1"
                )
            }
            other => panic!("{other:?}"),
        }
        let cli = c.servers["cli"].identity().to_string();
        assert!(
            cli.contains("--token=${TOK}") && !cli.contains("literal-key-1"),
            "{cli}"
        );
        let web = c.servers["web"].identity().to_string();
        assert!(
            web.contains("REDACTED@h.example") && !web.contains("literal-pass"),
            "{web}"
        );
        assert!(web.contains("key=${KEY}"), "{web}");
    }

    /// Issue 23, hole 7: a misspelt key anywhere in the file is an error
    /// naming the key and its line, in alert channels too (`secert` gave an
    /// unsigned webhook, `min_severty` fell back to the default).
    #[test]
    fn unknown_keys_are_errors_naming_the_key_and_its_line() {
        for (text, key, line) in [
            (
                "[[alerts]]\nname = \"hook\"\ntype = \"webhook\"\nurl = \"http://127.0.0.1:9/\"\nsecert = \"${S}\"\n",
                "secert",
                5,
            ),
            (
                "[watch]\n\n[[alerts]]\nname = \"log\"\ntype = \"jsonl\"\nmin_severty = \"low\"\n",
                "min_severty",
                6,
            ),
            (
                "[[alerts]]\nname = \"run\"\ntype = \"exec\"\ncommand = [\"true\"]\nurl = \"http://127.0.0.1:9/\"\n",
                "url",
                5,
            ),
            (
                "[servers.a]\ntransport = \"stdio\"\ncommand = \"x\"\nargz = []\n",
                "argz",
                4,
            ),
            ("[limits]\nmax_toolz = 3\n", "max_toolz", 2),
            ("[watch]\nintervall_secs = 3\n", "intervall_secs", 2),
            ("taxonomi = \"v2\"\n", "taxonomi", 1),
        ] {
            let err = format!("{:#}", load(text).unwrap_err());
            assert!(
                err.contains(&format!("line {line}")) && err.contains(&format!("`{key}`")),
                "{text}: {err}"
            );
        }
        // What each channel type takes still loads.
        let ok = load(
            "[[alerts]]\nname = \"a\"\ntype = \"webhook\"\nurl = \"http://127.0.0.1:9/\"\nsecret = \"s\"\nmin_severity = \"low\"\n\n\
             [[alerts]]\nname = \"b\"\ntype = \"slack\"\nurl = \"http://127.0.0.1:9/\"\n\n\
             [[alerts]]\nname = \"c\"\ntype = \"jsonl\"\n\n\
             [[alerts]]\nname = \"d\"\ntype = \"exec\"\ncommand = [\"true\"]\nenv = { A = \"1\" }\ninherit_env = [\"HOME\"]\n",
        )
        .expect("loads");
        assert_eq!(ok.alerts.len(), 4);
        assert_eq!(ok.alerts[0].min_severity, Severity::Low);
        assert_eq!(ok.alerts[1].min_severity, Severity::High);
    }

    fn load(text: &str) -> Result<Config> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plumbline.toml");
        std::fs::write(&path, text).unwrap();
        Config::load(&path)
    }

    #[test]
    fn normalisation_rules_are_checked_at_load_naming_the_server_and_rule() {
        let e = load(
            "[servers.figma]\ntransport = \"stdio\"\ncommand = \"figma\"\n[servers.figma.normalize.greeting]\nregex = \"Hello, (\"\n",
        )
        .unwrap_err();
        let e = format!("{e:#}");
        assert!(
            e.contains("servers.figma") && e.contains("normalize.greeting") && e.contains("regex"),
            "{e}"
        );
        let c = load(
            "[servers.figma]\ntransport = \"http\"\nurl = \"http://127.0.0.1:1/mcp\"\n[servers.figma.normalize.user]\ntoken = \"user\"\n",
        )
        .unwrap();
        assert_eq!(c.servers["figma"].normalize_rules().len(), 1);
        // The rules are how tools are compared, not how the server is
        // reached: its identity does not change.
        assert!(!c.servers["figma"]
            .identity()
            .to_string()
            .contains("normalize"));
    }

    #[test]
    fn alert_channels_are_checked_at_load_naming_the_key() {
        let e = load("[[alerts]]\nname = \"sec\"\ntype = \"jsonl\"\nmin_severity = \"hihg\"\n")
            .unwrap_err();
        assert!(format!("{e:#}").contains("hihg"), "{e:#}");
        let e = load("[[alerts]]\nname = \"a\"\ntype = \"jsonl\"\n[[alerts]]\nname = \"a\"\ntype = \"jsonl\"\n")
            .unwrap_err();
        assert!(format!("{e:#}").contains("alerts[1] (\"a\").name"), "{e:#}");
        let e = load("[watch]\ndashboard_url = \"not a url\"\n").unwrap_err();
        assert!(format!("{e:#}").contains("watch.dashboard_url"), "{e:#}");
        let e = load("[servers.x]\ntransport = \"http\"\nurl = \"ftp://h/\"\n").unwrap_err();
        assert!(format!("{e:#}").contains("servers.x.url"), "{e:#}");

        let c = load(
            "[[alerts]]\nname = \"hook\"\ntype = \"webhook\"\nurl = \"https://h.example/${PATHPART}\"\nsecret = \"${SECRET}\"\nmin_severity = \"medium\"\n",
        )
        .unwrap();
        assert_eq!(c.alerts[0].min_severity, Severity::Medium);
        let none = |_: &str| None;
        let e = c.check_environment(&none).unwrap_err();
        assert!(
            format!("{e:#}")
                .contains("alerts[0] (\"hook\"): url: environment variable PATHPART is not set"),
            "{e:#}"
        );
        let set = |n: &str| Some(if n == "SECRET" { "topsecretvalue" } else { "x" }.to_owned());
        assert!(c.check_environment(&set).unwrap().is_empty());
        match c.alerts[0].target(&set).unwrap() {
            Target::Webhook { url, secret, known } => {
                assert_eq!(url, "https://h.example/x");
                assert_eq!(secret.as_deref(), Some("topsecretvalue"));
                assert_eq!(
                    known.redact("failed: topsecretvalue"),
                    "failed: <redacted ${SECRET}>"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn parses_every_transport() {
        let c: Config = toml::from_str(
            r#"
            [servers.local]
            transport = "stdio"
            command = "npx"
            args = ["-y", "pkg"]
            env = { TOKEN = "${GH}" }

            [servers.remote]
            transport = "http"
            url = "http://127.0.0.1:9/mcp"
            headers = { Authorization = "Bearer ${TOKEN}" }

            [servers.old]
            transport = "sse"
            url = "http://127.0.0.1:9/sse"
            "#,
        )
        .unwrap();
        assert_eq!(c.servers.len(), 3);
        let lookup = |n: &str| (n == "TOKEN" || n == "GH").then(|| "s3cret".to_owned());
        match c.servers["remote"].spec_with(&lookup).unwrap() {
            ServerSpec::Http(h) => assert_eq!(
                h.headers,
                [("Authorization".into(), "Bearer s3cret".into())]
            ),
            other => panic!("{other:?}"),
        }
        // The identity names the variables, never their values.
        let id = c.servers["local"].identity().to_string();
        assert!(
            id.contains("TOKEN") && !id.contains("s3cret") && !id.contains("${GH}"),
            "{id}"
        );
    }

    #[test]
    fn unknown_fields_and_transports_are_errors() {
        assert!(toml::from_str::<Config>("[servers.a]\ntransport = \"ftp\"\nurl = \"x\"").is_err());
        assert!(toml::from_str::<Config>(
            "[servers.a]\ntransport = \"http\"\nurl = \"x\"\nheader = {}"
        )
        .is_err());
    }

    #[test]
    fn limits_override_the_defaults_and_are_checked() {
        let c: Config =
            toml::from_str("[limits]\nlist_timeout_secs = 2.5\nmax_pages = 7\n").unwrap();
        let l = c.limits.limits().unwrap();
        assert_eq!(l.list_timeout, std::time::Duration::from_millis(2500));
        assert_eq!(l.max_pages, 7);
        assert_eq!(l.max_tools, plumbline_mcp::Limits::default().max_tools);
        let bad: Config = toml::from_str("[limits]\nmax_tools = 0\n").unwrap();
        assert!(bad.limits.limits().is_err());
        let bad: Config = toml::from_str("[limits]\nlist_timeout_secs = -1\n").unwrap();
        assert!(bad.limits.limits().is_err());
    }

    #[test]
    fn expansion() {
        let lookup = |n: &str| (n == "A").then(|| "1".to_owned());
        assert_eq!(expand("x${A}y$$z$", &lookup).unwrap(), "x1y$z$");
        let err = expand("${MISSING}", &lookup).unwrap_err().to_string();
        assert_eq!(err, "environment variable MISSING is not set");
        assert!(expand("${A", &lookup).is_err());
    }
}
