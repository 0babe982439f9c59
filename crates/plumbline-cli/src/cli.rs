//! Command-line arguments.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use plumbline_taxonomy::{RuleId, Severity, Taxonomy};

/// Plumbline grades changes to the tools an MCP server publishes, with the
/// deterministic taxonomy-v1 severity rules.
#[derive(Debug, Parser)]
#[command(name = "plumbline", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Classify the change between two versions of one tool.
    ///
    /// Exit status: 0 when the result is below --fail-on (or no --fail-on
    /// is given), 1 when it is at or above it, 2 when an input could not
    /// be read or parsed.
    Classify(ClassifyArgs),
    /// List a taxonomy's rules with their severities and titles.
    Rules(RulesArgs),
    /// Print a rule's documentation.
    Explain(ExplainArgs),
    /// List the tools of configured MCP servers, store the observation, and
    /// report the drift since each server's previous successful one.
    ///
    /// Exit status: 0; 1 when drift reaches --fail-on; 2 when any server
    /// could not be observed (the others are still observed, stored and
    /// reported).
    Observe(ObserveArgs),
    /// Authorize Plumbline at a server behind OAuth and keep its tokens.
    ///
    /// Opens a browser (or prints the URL) with a redirect to a loopback
    /// port, then lists the server's tools to check the token. The tokens
    /// are kept in a file only you can read (PLUMBLINE_TOKENS, else
    /// ~/.config/plumbline/tokens.json) for observe, watch, check and
    /// guard, which renew them.
    ///
    /// Exit status: 0 when logged in; 2 when not.
    Login(LoginArgs),
    /// Forget the tokens and client registration kept for a server.
    Logout(LoginArgs),
    /// The timeline of observations, newest first, under a line naming
    /// the history it reads (`plumbline store path` says more).
    Log(LogArgs),
    /// The drift between two observations of a server (by default the two
    /// latest successful ones).
    Diff(DiffArgs),
    /// A tool's definition as observed.
    Show(ShowArgs),
    /// Observe a built-in MCP server before and after a rug pull, in a
    /// temporary store, and show the graded drift.
    Demo(DemoArgs),
    /// Import the MCP servers configured in MCP clients (Claude Desktop,
    /// Claude Code, Cursor, VS Code, Windsurf, Gemini CLI).
    Discover(DiscoverArgs),
    /// Write the servers' current tools to the lock file (the baseline that
    /// `check` compares with).
    Pin(PinArgs),
    /// Compare what the servers publish now with the lock file.
    ///
    /// Exit status: 0 when no drift reaches --fail-on; 1 when some does;
    /// 2 when a server could not be evaluated, a configured server is not
    /// pinned (unless --allow-unpinned), or the lock file is bad.
    Check(CheckArgs),
    /// Stand between an MCP client and a stdio server: relay every message,
    /// and keep from the model each tool whose change since the accepted
    /// baseline reaches --block-on.
    ///
    /// The client starts `plumbline guard [OPTIONS] COMMAND [ARGS…]` in
    /// place of the server (or `plumbline guard --server NAME` for a server
    /// in plumbline.toml). `tools/list` is answered in one page of the
    /// allowed tools, after the guard has read every upstream page and
    /// judged them; `tools/call` to a withheld or unknown tool never
    /// reaches the server (JSON-RPC error -32001 naming the tool and its
    /// grade; how to release it goes to the guard's log, not to the
    /// model). The server's instructions and prompts are judged against the
    /// pinned ones the same way. A message the guard cannot read, and an
    /// answer to no request it forwarded, is never relayed. A server's
    /// `list_changed` is re-judged before it is passed on; a review (`pin
    /// --update`, an accept on the dashboard) reaches the client as a
    /// `list_changed` of the guard's own. With COMMAND, the server gets the
    /// environment the client gave the guard. Exit status: 0 when the
    /// client closed the session; 2 when the server could not be started or
    /// went away.
    Guard(GuardArgs),
    /// Watch the configured servers continuously and send alerts.
    ///
    /// Each server is observed every `[watch] interval_secs` (default 300,
    /// per server in `[watch.intervals]`, with jitter and backoff for
    /// failures), and at once when it announces `list_changed`. Each
    /// observation is recorded and graded; alerts go to the `[[alerts]]`
    /// channels, one per observation and channel, retried with backoff.
    /// `/healthz` and Prometheus `/metrics` are served on `[watch] listen`
    /// (default 127.0.0.1:9464; "" for none). SIGHUP reloads the file;
    /// SIGTERM or Ctrl-C stops cleanly. The whole file is checked at start:
    /// exit status 2 names what is wrong.
    Watch(WatchArgs),
    /// Serve the dashboard: every server's drift, each change's evidence,
    /// reviews and the baseline, as web pages and a JSON API (/api/v1).
    ///
    /// Listens on 127.0.0.1:8077 by default. Any other than a loopback
    /// address needs a token, checked on every request.
    Serve(ServeArgs),
    /// Copy a whole history from one store to another, or check one.
    #[command(subcommand)]
    Store(StoreCommand),
    /// Score a labelled corpus of tool changes: attacks caught, benign
    /// changes flagged, per rule.
    ///
    /// Each line of each FILE is `{"id", "label": "attack"|"benign",
    /// "old": {...}, "new": {...}}`, optionally with `"group"` (default:
    /// the file name), `"family"` (figures per attack family) and
    /// `"inventory": {"siblings": [...], "foreign": [...]}` (the other
    /// tools' names, which taxonomy-v2 and v3 use; v3 also reads tool
    /// objects under "sibling_tools" and "foreign_tools"). `"old": null`
    /// grades an added tool. Exit status 2 when a line cannot be read.
    Evaluate(EvaluateArgs),
    /// Print a shell completion script: bash, zsh, fish, elvish or
    /// powershell.
    ///
    /// For example `mkdir -p ~/.local/share/bash-completion/completions &&
    /// plumbline completions bash > ~/.local/share/bash-completion/completions/plumbline`.
    Completions(CompletionsArgs),
    /// Print the manual page (roff), for `man -l -` or to install as
    /// plumbline.1; with a COMMAND, that command's page (plumbline-COMMAND.1).
    Man(ManArgs),
    /// The demo's MCP server (stdio); used by `plumbline demo`.
    #[command(name = "__demo-server", hide = true)]
    DemoServer,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// A command whose page to print (default: the whole program's).
    #[arg(value_name = "COMMAND")]
    pub command: Option<String>,
}

/// Which taxonomy grades.
#[derive(Debug, Args)]
pub struct TaxonomyArg {
    /// The taxonomy that grades: v1 (the normative taxonomy-v1), v2
    /// (docs/taxonomy-v2.md: fewer false alarms, more attack families) or
    /// v3 (docs/taxonomy-v3.md: CRITICAL only when certain, six more
    /// attack families).
    #[arg(
        id = "taxonomy",
        long = "taxonomy",
        value_name = "v1|v2|v3",
        value_parser = parse_taxonomy()
    )]
    pub taxonomy: Option<Taxonomy>,
}

#[derive(Debug, Args)]
pub struct EvaluateArgs {
    /// Labelled JSON Lines files.
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub taxonomy: TaxonomyArg,
    /// Replace the built-in imperative phrase list (R02).
    #[arg(long, value_name = "FILE")]
    pub imperatives: Option<PathBuf>,
    /// `human`: tables; `json`: one JSON document with every figure.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// `plumbline store …`.
#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Copy every observation, review, baseline, alert and grade from one
    /// store to another (SQLite to PostgreSQL and back), then verify that
    /// both hold the same rows (counts and digests, table by table).
    ///
    /// Rows the destination already holds are skipped, so a copy can be
    /// run again (after an interruption, say); stop the watchers that
    /// write to the source first. Exit status 2, with nothing written,
    /// when the destination holds another history.
    Copy(StoreCopyArgs),
    /// Verify a store: every digest is its content's, every tool set's
    /// digest its entries', every reference names a row that is there.
    ///
    /// Exit status 0 when it is sound, 2 when it is not (each finding is
    /// printed) or cannot be read.
    Check(StoreCheckArgs),
    /// Print where this project's history is kept: the SQLite file, or the
    /// PostgreSQL database's URL (without user information or query), and
    /// what chose it (--store, $PLUMBLINE_STORE, or the project's
    /// default). Exit status 0 whether or not the store exists yet.
    Path(StorePathArgs),
}

#[derive(Debug, Args)]
pub struct StorePathArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    #[command(flatten)]
    pub store: StoreArg,
    /// human, or json: {"location", "backend", "from", "exists"}.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct StoreCopyArgs {
    /// The store to copy from: a file path, sqlite:PATH or a PostgreSQL
    /// URL.
    // Read as a store location, not by clap (a URL's password).
    #[arg(long = "from", value_name = "LOCATION")]
    pub from: PathBuf,
    /// The store to copy to (created if it does not exist).
    #[arg(long = "to", value_name = "LOCATION")]
    pub to: PathBuf,
}

#[derive(Debug, Args)]
pub struct StoreCheckArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    #[command(flatten)]
    pub store: StoreArg,
}

/// Where the observations are kept.
#[derive(Debug, Args)]
pub struct StoreArg {
    /// The store: a file path, sqlite:PATH, or a PostgreSQL URL
    /// postgres://USER:${PASSWORD_VARIABLE}@HOST/DB (default: $PLUMBLINE_STORE,
    /// else the project's own store,
    /// DATA/plumbline/projects/FOLDER-HASH/plumbline.db, where the project
    /// is the folder of plumbline.toml and DATA is $XDG_DATA_HOME or
    /// ~/.local/share).
    // Read as a store location by `commands::store_path`, not by clap,
    // whose error would repeat a URL's password.
    #[arg(id = "store", long = "store", value_name = "LOCATION")]
    pub path: Option<PathBuf>,
}

/// The server registry.
#[derive(Debug, Args)]
pub struct ConfigArg {
    /// The server registry.
    #[arg(
        id = "config",
        long = "config",
        value_name = "PATH",
        env = "PLUMBLINE_CONFIG",
        default_value = "plumbline.toml"
    )]
    pub path: PathBuf,
}

#[derive(Debug, Args)]
pub struct LoginArgs {
    /// The server, by its name in plumbline.toml.
    #[arg(value_name = "SERVER")]
    pub server: String,
    #[command(flatten)]
    pub config: ConfigArg,
}

#[derive(Debug, Args)]
pub struct ObserveArgs {
    #[command(flatten)]
    pub taxonomy: TaxonomyArg,
    /// Servers to observe (default: every configured server).
    #[arg(value_name = "SERVER")]
    pub servers: Vec<String>,
    #[command(flatten)]
    pub config: ConfigArg,
    #[command(flatten)]
    pub store: StoreArg,
    /// human, or json: one document {"taxonomy", "servers": [{"server",
    /// "observation", "outcome", "error", "tools", "problems", "baseline",
    /// "drift"}]}.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Exit with status 1 when any drift is at or above this severity.
    #[arg(long, value_name = "SEVERITY", value_parser = parse_severity())]
    pub fail_on: Option<Severity>,
    /// How many servers to observe at once.
    #[arg(long, default_value_t = 8)]
    pub concurrency: usize,
    /// Also write each server's listing to DIR/SERVER.json, tools exactly
    /// as received (for `pin --tools` and `check --tools`).
    #[arg(long, value_name = "DIR")]
    pub save: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct WatchArgs {
    #[command(flatten)]
    pub taxonomy: TaxonomyArg,
    #[command(flatten)]
    pub config: ConfigArg,
    #[command(flatten)]
    pub store: StoreArg,
    /// Observe every server once, record, make one delivery attempt at
    /// every due alert, print a summary like `observe`, and exit.
    #[arg(long)]
    pub once: bool,
    /// With --once: the summary's format.
    #[arg(long, value_enum, default_value_t = Format::Human, requires = "once")]
    pub format: Format,
    /// How the watcher logs (to standard error): one line per
    /// observation, per alert delivered or failed, and per reload.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Where to serve /healthz and /metrics, overriding `[watch] listen`
    /// (default 127.0.0.1:9464): an address (port 0 picks a free one,
    /// said in the log), or `none`. Two watchers on one machine need two.
    #[arg(long, value_name = "ADDR|none", conflicts_with = "once")]
    pub listen: Option<String>,
}

/// How the watcher logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One line of text per event.
    Text,
    /// One JSON object per line per event.
    Json,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub taxonomy: TaxonomyArg,
    #[command(flatten)]
    pub store: StoreArg,
    /// The address to listen on; a non-loopback one needs --token.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8077")]
    pub listen: SocketAddr,
    /// The token every request must carry (`Authorization: Bearer TOKEN`,
    /// or open the dashboard once with ?token=TOKEN in a browser).
    #[arg(
        long,
        value_name = "TOKEN",
        env = "PLUMBLINE_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// The reviewer name review forms start with (default: $USER).
    #[arg(long, value_name = "NAME")]
    pub reviewer: Option<String>,
}

#[derive(Debug, Args)]
pub struct PinArgs {
    #[command(flatten)]
    pub taxonomy: TaxonomyArg,
    /// Servers to pin (default: all); with --update, SERVER [TOOL...]. A
    /// server already in the lock is re-pinned as `--update SERVER` does.
    #[arg(value_name = "SERVER")]
    pub servers: Vec<String>,
    /// The lock file.
    #[arg(long, value_name = "FILE", default_value = "plumbline.lock")]
    pub lock: PathBuf,
    /// Saved tools/list results (a file, or a directory of SERVER.json)
    /// instead of observing the servers.
    #[arg(long, value_name = "PATH")]
    pub tools: Option<PathBuf>,
    #[command(flatten)]
    pub config: ConfigArg,
    /// Re-pin chosen tools of one server: `pin --update SERVER [TOOL...]`.
    #[arg(long)]
    pub update: bool,
    /// With --update: refuse to pin a change graded above this severity.
    #[arg(long, value_name = "SEVERITY", value_parser = parse_severity(), requires = "update")]
    pub max_severity: Option<Severity>,
    /// With --update: pin even what --max-severity refuses.
    #[arg(long, requires = "update")]
    pub force: bool,
    /// Accept changes graded HIGH or CRITICAL up to this severity, when
    /// re-pinning a server the lock holds (with or without --update).
    /// Without it such a change is pinned only after a yes at the
    /// terminal's prompt, and refused where there is none (a script, an
    /// agent's shell).
    #[arg(long, value_name = "SEVERITY", value_parser = parse_severity())]
    pub accept_severity: Option<Severity>,
    /// human, or json: one document {"lock", "taxonomy", "wrote",
    /// "events": [{"server", "tool", "outcome", "severity"}]}.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub taxonomy: TaxonomyArg,
    /// Servers to check (default: every server in the lock file and every
    /// configured one; a configured server that is not pinned fails the
    /// check unless --allow-unpinned).
    #[arg(value_name = "SERVER")]
    pub servers: Vec<String>,
    /// Report configured servers that have no baseline instead of failing
    /// on them (they are still named, and not checked).
    #[arg(long)]
    pub allow_unpinned: bool,
    /// The lock file to check against (written by `plumbline pin`).
    #[arg(long, value_name = "FILE", default_value = "plumbline.lock")]
    pub lock: PathBuf,
    /// Compare with the baselines in the store (changes accepted on the
    /// dashboard, else each server's first observation) instead of the
    /// lock file.
    #[arg(long, conflicts_with = "lock")]
    pub against_store: bool,
    #[command(flatten)]
    pub store: StoreArg,
    /// Saved tools/list results instead of observing the servers.
    #[arg(long, value_name = "PATH")]
    pub tools: Option<PathBuf>,
    #[command(flatten)]
    pub config: ConfigArg,
    /// Fail (exit 1) on drift at or above this severity.
    #[arg(long, value_name = "SEVERITY", value_parser = parse_severity(), default_value = "high")]
    pub fail_on: Severity,
    #[arg(long, value_enum, default_value_t = CheckFormat::Human)]
    pub format: CheckFormat,
    /// Also write a report to a file, from the same run (repeatable):
    /// FORMAT=FILE, with FORMAT one of human, json, sarif, markdown.
    #[arg(long = "output", value_name = "FORMAT=FILE", value_parser = parse_output)]
    pub outputs: Vec<(CheckFormat, PathBuf)>,
}

#[derive(Debug, Args)]
pub struct GuardArgs {
    /// The server's name: its key in the lock file and in plumbline.toml
    /// (default: COMMAND's file name).
    #[arg(long, value_name = "NAME")]
    pub server: Option<String>,
    /// The lock file holding the accepted tools (default: plumbline.lock
    /// when it exists, else the store's accepted baseline).
    #[arg(long, value_name = "FILE")]
    pub lock: Option<PathBuf>,
    #[command(flatten)]
    pub store: StoreArg,
    #[command(flatten)]
    pub config: ConfigArg,
    #[command(flatten)]
    pub taxonomy: TaxonomyArg,
    /// Withhold a tool whose change reaches this severity.
    #[arg(long, value_name = "SEVERITY", value_parser = parse_severity(), default_value = "high")]
    pub block_on: Severity,
    /// A tool not in the baseline: offered (allow), withheld when its own
    /// grade reaches --block-on (review), or withheld until accepted
    /// (block).
    #[arg(long, value_enum, default_value_t = NewToolsArg::Review)]
    pub new_tools: NewToolsArg,
    /// enforce: withhold; warn: withhold nothing, only say on stderr what
    /// would be withheld.
    #[arg(long, value_enum, default_value_t = GuardMode::Enforce)]
    pub mode: GuardMode,
    /// When the baseline cannot be read or the listing cannot be judged:
    /// withhold every tool (block) or let every one pass (pass).
    #[arg(long, value_enum, default_value_t = OnErrorArg::Block)]
    pub on_error: OnErrorArg,
    /// A call decided on a listing older than this many seconds lists the
    /// server's tools again first.
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    pub max_age: f64,
    /// Serve Streamable HTTP on this loopback address (PORT 0: any free
    /// port; the address is printed on stderr) and relay to --upstream (or
    /// to the configured HTTP server named by --server).
    #[arg(long, value_name = "127.0.0.1:PORT", conflicts_with = "command")]
    pub listen: Option<std::net::SocketAddr>,
    /// Serve Prometheus counters at /metrics on this loopback address
    /// (listings judged, tools withheld, calls refused, list_changed sent;
    /// PORT 0: any free port, printed on stderr).
    #[arg(long, value_name = "127.0.0.1:PORT")]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// The upstream MCP endpoint for --listen.
    #[arg(long, value_name = "URL", requires = "listen")]
    pub upstream: Option<String>,
    /// With --listen: serve only requests carrying `Authorization: Bearer
    /// TOKEN`, TOKEN read from the environment variable named as
    /// `${NAME}` (never written on the command line, where every local
    /// user can read it). Without it, any local user can use the guard,
    /// and the upstream credentials it adds.
    #[arg(long, value_name = "${NAME}", requires = "listen")]
    pub listen_token: Option<String>,
    /// A call whose arguments hold secret material (a known secret format,
    /// or a piece of your SSH keys, cloud credentials, `.netrc`, `.env*` or
    /// secret-named environment variables): refused (block) or relayed
    /// with a line on stderr (warn). Default: `[guard.NAME] on_secret`,
    /// else block.
    #[arg(long, value_enum)]
    pub on_secret: Option<OnSecretArg>,
    /// Where secret material is expected and allowed: TOOL (any argument)
    /// or TOOL/POINTER (one argument, a JSON pointer into `arguments`:
    /// `login/password`). Repeatable; added to `[guard.NAME]
    /// allow_secrets`.
    #[arg(long, value_name = "TOOL[/POINTER]")]
    pub allow_secret: Vec<String>,
    /// A tool result holding text aimed at the model (taxonomy-v3's R01,
    /// R02, R14 over its text and structured content): relayed with a line
    /// on stderr (warn), relayed with that text wrapped in markers and
    /// `_meta["io.plumbline/injected"]` (mark), or replaced by an error
    /// (block). Default: `[guard.NAME] on_injected_result`, else warn.
    #[arg(long, value_enum)]
    pub on_injected_result: Option<OnInjectedArg>,
    /// Do not record the listings in the store (by default each judged
    /// listing is an observation in the history, as `watch` records it,
    /// with what was withheld).
    #[arg(long)]
    pub no_record: bool,
    /// The server to start, and its arguments: everything from the first
    /// word that is not an option of the guard's on is the server's
    /// (`guard --server memory npx -y @modelcontextprotocol/server-memory`;
    /// a `--` before it is accepted too).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum NewToolsArg {
    Allow,
    Review,
    Block,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GuardMode {
    Enforce,
    Warn,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnInjectedArg {
    Warn,
    Mark,
    Block,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnSecretArg {
    Block,
    Warn,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnErrorArg {
    Block,
    Pass,
}

/// `FORMAT=FILE` for `check --output`.
fn parse_output(s: &str) -> Result<(CheckFormat, PathBuf), String> {
    let (format, file) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected FORMAT=FILE (sarif=plumbline.sarif)"))?;
    let format = CheckFormat::from_str(format, true)?;
    if file.is_empty() {
        return Err(format!("{s:?}: no file after '='"));
    }
    Ok((format, PathBuf::from(file)))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CheckFormat {
    /// A report for people.
    Human,
    /// The stable JSON wire format (schema: docs/check-output.schema.json).
    Json,
    /// SARIF 2.1.0, for code scanning.
    Sarif,
    /// A summary for a pull-request comment.
    Markdown,
}

#[derive(Debug, Args)]
pub struct LogArgs {
    #[command(flatten)]
    pub taxonomy: TaxonomyArg,
    /// One server (default: all).
    pub server: Option<String>,
    #[command(flatten)]
    pub store: StoreArg,
    /// human, or json: one document {"taxonomy", "servers": [{"server",
    /// "observations": [...]}], "failed_alerts": [...]}.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// At most this many observations per server.
    #[arg(long, default_value_t = 20)]
    pub limit: u32,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    #[command(flatten)]
    pub taxonomy: TaxonomyArg,
    /// The server, as named in plumbline.toml when it was observed.
    pub server: String,
    /// The older observation (default: the successful one before --to).
    #[arg(long, value_name = "OBS")]
    pub from: Option<i64>,
    /// The newer observation (default: the latest successful one).
    #[arg(long, value_name = "OBS")]
    pub to: Option<i64>,
    #[command(flatten)]
    pub store: StoreArg,
    /// human, or json: one document {"server", "from", "to", "taxonomy",
    /// "drift"}.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Exit with status 1 when the drift is at or above this severity.
    #[arg(long, value_name = "SEVERITY", value_parser = parse_severity())]
    pub fail_on: Option<Severity>,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The server, as named in plumbline.toml when it was observed.
    pub server: String,
    /// The tool's name.
    pub tool: String,
    /// The observation (default: the latest successful one).
    #[arg(long, value_name = "OBS")]
    pub at: Option<i64>,
    /// The bytes exactly as the server sent them, instead of formatted JSON.
    #[arg(long, conflicts_with = "format")]
    pub raw: bool,
    #[command(flatten)]
    pub store: StoreArg,
    /// human (the definition, formatted), or json: one document
    /// {"server", "tool", "observation", "definitions": [...]} (every tool
    /// of that name, in listing order).
    #[arg(long, value_enum)]
    pub format: Option<Format>,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    #[command(flatten)]
    pub taxonomy: TaxonomyArg,
    /// human, or json: one document {"taxonomy", "store", "rounds":
    /// [{"servers": [...]}]}, the two observations as `observe` reports them.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct DiscoverArgs {
    /// Write the servers found to this file (refuses to overwrite an
    /// existing one without --force).
    #[arg(long, value_name = "PATH")]
    pub write: Option<PathBuf>,
    /// With --write: replace the file if it exists.
    #[arg(long, requires = "write")]
    pub force: bool,
    /// The home directory to search (default: $HOME).
    #[arg(long, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// The project directory to search (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// human, or json: one document {"servers": [{"name", "client",
    /// "file", "config", "secrets_to_set", "notes"}], "skipped": [{"file",
    /// "name", "reason"}], "wrote"}.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Rewrite the client files so that each stdio server runs under
    /// `plumbline guard` (only its `command` and `args` change; the file
    /// is copied to FILE.plumbline-backup first). Remote servers are
    /// listed with the guard command to run for them.
    #[arg(long, conflicts_with_all = ["write", "unwrap"])]
    pub wrap: bool,
    /// Undo --wrap: put each backup back byte for byte (or, in a file
    /// changed since, undo each wrapped entry).
    #[arg(long, conflicts_with = "write")]
    pub unwrap: bool,
    /// With --wrap or --unwrap: show what would change, write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
pub struct ClassifyArgs {
    /// The tool before the change (a JSON object).
    #[arg(
        value_name = "OLD.json",
        required_unless_present = "jsonl",
        conflicts_with = "jsonl"
    )]
    pub old: Option<PathBuf>,

    /// The tool after the change (a JSON object).
    #[arg(
        value_name = "NEW.json",
        required_unless_present = "jsonl",
        conflicts_with = "jsonl"
    )]
    pub new: Option<PathBuf>,

    /// Classify many pairs: each line of FILE (`-` for standard input) is
    /// `{"id": ..., "old": {...}, "new": {...}}` (`"old": null`: an added
    /// tool, graded as drift grades one) and gives one output line
    /// `{"id": ..., "severity": ..., "rules": [...]}`, in input order. A bad
    /// line gives `{"id": ..., "error": "..."}` and the run goes on.
    #[arg(long, value_name = "FILE")]
    pub jsonl: Option<PathBuf>,

    /// With --jsonl: add each pair's evidence to its output line, as in
    /// `--format json`.
    #[arg(long, requires = "jsonl")]
    pub evidence: bool,

    /// Output format (single-pair mode).
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,

    /// Replace the built-in imperative phrase list (R02:
    /// taxonomy/imperatives-v1.txt or imperatives-v2.txt).
    #[arg(long, value_name = "FILE")]
    pub imperatives: Option<PathBuf>,

    #[command(flatten)]
    pub taxonomy: TaxonomyArg,

    /// The other tools of the same server: a saved tools/list result, an
    /// array of tools, or JSON Lines of tools. taxonomy-v2 and v3 do not
    /// take their names for references to other tools, and v3 compares an
    /// added tool with their descriptions. With --jsonl, a line's own
    /// `"inventory": {"siblings": [...], "foreign": [...]}` wins.
    #[arg(long, value_name = "FILE")]
    pub inventory: Option<PathBuf>,

    /// Exit with status 1 when a result is at or above this severity.
    #[arg(long, value_name = "SEVERITY", value_parser = parse_severity())]
    pub fail_on: Option<Severity>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A report for people.
    Human,
    /// One JSON document on standard output (its fields are described
    /// under each command's --format).
    Json,
}

#[derive(Debug, Args)]
pub struct RulesArgs {
    #[command(flatten)]
    pub taxonomy: TaxonomyArg,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The rule code, e.g. R03 (R01–R09 in taxonomy-v1, R01–R13 in v2, R01–R20 in v3).
    #[arg(value_parser = parse_rule)]
    pub rule: RuleId,
    /// human (the rule's documentation), or json: one document {"rule",
    /// "severity", "title", "documentation"}.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// A severity, with its names offered to shell completion and listed in
/// the help.
fn parse_severity() -> impl clap::builder::TypedValueParser<Value = Severity> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser as _};
    PossibleValuesParser::new(
        ["none", "low", "medium", "high", "critical"]
            .into_iter()
            .chain(["NONE", "LOW", "MEDIUM", "HIGH", "CRITICAL"])
            .map(|v| PossibleValue::new(v).hide(v.chars().all(|c| c.is_ascii_uppercase()))),
    )
    .try_map(|s| {
        s.parse()
            .map_err(|e: plumbline_taxonomy::severity::UnknownSeverity| e.to_string())
    })
}

/// A taxonomy (`v1`, `v2`, `v3`, or their full names), offered to completion.
fn parse_taxonomy() -> impl clap::builder::TypedValueParser<Value = Taxonomy> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser as _};
    PossibleValuesParser::new([
        PossibleValue::new("v1"),
        PossibleValue::new("v2"),
        PossibleValue::new("v3"),
        PossibleValue::new("taxonomy-v1").hide(true),
        PossibleValue::new("taxonomy-v2").hide(true),
        PossibleValue::new("taxonomy-v3").hide(true),
    ])
    .try_map(|s| {
        s.parse()
            .map_err(|e: plumbline_taxonomy::taxonomy::UnknownTaxonomy| e.to_string())
    })
}

fn parse_rule(s: &str) -> Result<RuleId, String> {
    s.parse()
        .map_err(|e: plumbline_taxonomy::severity::UnknownRule| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// clap's own consistency checks (unique ids, valid defaults) over
    /// every subcommand, which otherwise only fail when a user runs one.
    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}
