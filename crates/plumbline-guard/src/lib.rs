//! The runtime guard: a relay between an MCP client and one server that
//! keeps a changed tool away from the model.
//!
//! The guard starts the server (stdio) and passes every message on
//! unchanged, except three:
//!
//! - **`tools/list`**: it fetches every page upstream itself (bounded:
//!   pages, tools, bytes, time), judges the whole set against the accepted
//!   baseline ([`judge`]) and answers with one page of the tools the policy
//!   allows. A cursor it did not issue is an error.
//! - **`tools/call`** is the authoritative check: a call to a name outside
//!   the allowed set never reaches the server; the client gets a JSON-RPC
//!   error naming the tool, its grade, the rules and how to review it. A
//!   listing older than [`Policy::max_age`] is fetched again first.
//! - **`notifications/tools/list_changed`** marks the set stale: the guard
//!   re-lists and re-judges, then forwards it; calls wait for the verdict.
//!   When the baseline changes on our side (`pin --update`, an accept on
//!   the dashboard), the guard tells the client with a `list_changed` of
//!   its own, once, and only when the allowed set changed.
//!
//! What the guard cannot judge (the baseline unreadable, a listing that
//! broke its bounds) follows [`OnError`]; by default it blocks.

pub mod http;
pub mod judge;
mod mask;
pub mod message;
pub mod pipe;
mod said;
pub mod secrets;
pub mod stdio;

/// What the unit tests share.
#[cfg(test)]
pub(crate) mod testing {
    /// Draws below `n` (xorshift: the same every run, for the tests that
    /// compare two ways of reading on many drawn texts).
    pub(crate) fn draws(seed: u64) -> impl FnMut(usize) -> usize {
        let mut state = seed;
        move |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n.max(1) as u64) as usize
        }
    }
}

use std::time::Duration;

use plumbline_lock::LockedServer;
use plumbline_taxonomy::Severity;

/// What a tool not in the baseline gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NewTools {
    /// Offered whatever it says.
    Allow,
    /// Withheld when its own grade reaches the threshold.
    #[default]
    Review,
    /// Withheld until it is accepted.
    Block,
}

/// Whether the guard withholds, or only says what it would withhold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    #[default]
    Enforce,
    Warn,
}

/// What happens when the guard cannot judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnError {
    /// Nothing is offered and every call is refused.
    #[default]
    Block,
    /// Everything passes, and stderr says so.
    Pass,
}

/// What a call whose arguments hold secret material gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnSecret {
    /// Refused: it never reaches the server.
    #[default]
    Block,
    /// Relayed, and stderr says what it held (kind and place, never the
    /// value).
    Warn,
}

/// What a tool result that holds text aimed at the model gets (read with
/// taxonomy-v3's R01, R02 and R14).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnInjected {
    /// Relayed; stderr and `/metrics` say so.
    #[default]
    Warn,
    /// Relayed with each such text wrapped in markers a client can show,
    /// and `_meta["io.plumbline/injected"]` naming the rules.
    Mark,
    /// Not relayed: the client gets an error instead of the result.
    Block,
}

/// Where secret material in a call is expected: a tool, or one argument
/// of it (a JSON pointer into `arguments`, or below it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretAllowed {
    pub tool: String,
    pub pointer: Option<String>,
}

impl SecretAllowed {
    /// From `TOOL` or `TOOL/POINTER`.
    pub fn parse(s: &str) -> SecretAllowed {
        match s.split_once('/') {
            Some((tool, rest)) => SecretAllowed {
                tool: tool.to_owned(),
                pointer: Some(format!("/{rest}")),
            },
            None => SecretAllowed {
                tool: s.to_owned(),
                pointer: None,
            },
        }
    }

    /// Whether a string at `path` of a call to `tool` may hold a secret.
    pub fn covers(&self, tool: &str, path: &str) -> bool {
        self.tool == tool
            && self.pointer.as_deref().is_none_or(|p| {
                path == p
                    || path
                        .strip_prefix(p)
                        .is_some_and(|rest| rest.starts_with('/'))
            })
    }
}

/// The guard's policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// A change graded at or above this withholds the tool.
    pub block_on: Severity,
    pub new_tools: NewTools,
    pub mode: Mode,
    pub on_error: OnError,
    /// A call decided on a listing older than this lists again first.
    pub max_age: Duration,
    pub on_secret: OnSecret,
    pub allow_secrets: Vec<SecretAllowed>,
    pub on_injected_result: OnInjected,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            block_on: Severity::High,
            new_tools: NewTools::Review,
            mode: Mode::Enforce,
            on_error: OnError::Block,
            max_age: Duration::from_secs(60),
            on_secret: OnSecret::Block,
            allow_secrets: Vec::new(),
            on_injected_result: OnInjected::Warn,
        }
    }
}

/// Where the accepted tools come from: the lock file, or the history's
/// accepted baseline. Loaded again and again (every poll), so a review
/// takes effect while the guard runs.
pub trait Baseline: Send {
    /// The server's accepted tools; `None` when it has none (every tool is
    /// then new).
    fn load(&mut self) -> anyhow::Result<Option<LockedServer>>;

    /// How a person accepts `tool`'s current definition, a change graded
    /// `severity`: a command, or a dashboard URL. For the guard's log and
    /// never for the model.
    fn how_to_review(&self, tool: &str, severity: Severity) -> String;
}

/// A baseline as one guard session holds it: the last one read is kept,
/// and judged against while a later read fails. A baseline that was
/// there and is gone (the store deleted, the server's entry removed) is a
/// failure, never "no baseline": that would make every tool new, and
/// `--new-tools allow` would pass them all. So an outage of the baseline
/// releases nothing that was withheld; with none read yet, the error
/// policy decides.
pub struct Kept {
    inner: Box<dyn Baseline>,
    server: String,
    last: Option<Option<LockedServer>>,
    /// The read error stderr was last told of.
    failing: Option<String>,
}

impl Kept {
    pub fn new(inner: Box<dyn Baseline>, server: &str) -> Kept {
        Kept {
            inner,
            server: server.to_owned(),
            last: None,
            failing: None,
        }
    }
}

impl Baseline for Kept {
    fn load(&mut self) -> anyhow::Result<Option<LockedServer>> {
        let now = match self.inner.load() {
            Ok(None) if matches!(self.last, Some(Some(_))) => Err(anyhow::anyhow!(
                "the accepted baseline of {} is no longer there",
                self.server
            )),
            other => other,
        };
        let say = |what: &str| {
            eprintln!(
                "plumbline guard: {}: {}",
                plumbline_taxonomy::sanitize::for_terminal(&self.server, false),
                plumbline_taxonomy::sanitize::for_terminal(what, false)
            )
        };
        match now {
            Ok(base) => {
                if self.failing.take().is_some() {
                    say("the baseline can be read again");
                }
                self.last = Some(base.clone());
                Ok(base)
            }
            Err(e) => {
                let Some(last) = &self.last else {
                    return Err(e);
                };
                let e = format!("{e:#}");
                if self.failing.as_ref() != Some(&e) {
                    say(&format!(
                        "the baseline cannot be read ({e}); tools are judged against the one read before until it can be, and nothing withheld is released"
                    ));
                    self.failing = Some(e);
                }
                Ok(last.clone())
            }
        }
    }

    fn how_to_review(&self, tool: &str, severity: Severity) -> String {
        self.inner.how_to_review(tool, severity)
    }
}

/// The baseline in a lock file: one server's pins.
pub struct LockBaseline {
    pub path: std::path::PathBuf,
    pub server: String,
    /// The file's modification time and length when last read, and what it
    /// held: a file that did not change is not parsed again.
    seen: Option<(std::time::SystemTime, u64, Option<LockedServer>)>,
}

impl LockBaseline {
    pub fn new(path: std::path::PathBuf, server: String) -> LockBaseline {
        LockBaseline {
            path,
            server,
            seen: None,
        }
    }
}

impl Baseline for LockBaseline {
    fn load(&mut self) -> anyhow::Result<Option<LockedServer>> {
        let meta = std::fs::metadata(&self.path)
            .map_err(|e| anyhow::anyhow!("{}: {e}", self.path.display()))?;
        let stamp = (meta.modified()?, meta.len());
        if let Some((at, len, held)) = &self.seen {
            if (*at, *len) == stamp {
                return Ok(held.clone());
            }
        }
        let lock = plumbline_lock::LockFile::load(&self.path)?;
        let held = lock.servers.get(&self.server).cloned();
        self.seen = Some((stamp.0, stamp.1, held.clone()));
        Ok(held)
    }

    fn how_to_review(&self, tool: &str, severity: Severity) -> String {
        let accept = if severity >= Severity::High {
            format!(" --accept-severity {}", severity.to_string().to_lowercase())
        } else {
            String::new()
        };
        use plumbline_base::sanitize::shell_word;
        format!(
            "review it, then run `plumbline pin --update {} {}{accept} --lock {}`",
            shell_word(&self.server),
            shell_word(tool),
            shell_word(&self.path.display().to_string())
        )
    }
}

/// One listing the guard judged, for the history: the listing as the
/// server sent it (every page's tools in order) and what was withheld.
#[derive(Debug, Clone)]
pub struct Seen {
    pub server: String,
    pub listing: plumbline_mcp::Listing,
    pub withheld: Vec<judge::Withheld>,
    pub started_at_ms: i64,
    pub finished_at_ms: i64,
}

/// Whether a client declared the capabilities Plumbline declares when it
/// lists a server itself (by name: `roots`, `sampling`, `elicitation`).
/// A server may list other tools to a client without them
/// (server-everything keeps two back from one without roots and
/// elicitation), so only a listing made for a client that declared the
/// same is the server's listing; another is that client's view, and
/// recording it would show its difference as drift.
pub(crate) fn same_view(declared: Option<&serde_json::Value>) -> bool {
    let names = |v: &serde_json::Value| {
        v.as_object()
            .map(|o| o.keys().cloned().collect::<std::collections::BTreeSet<_>>())
    };
    declared.and_then(names) == names(&plumbline_mcp::client_capabilities())
}

/// What stderr says of a listing not recorded for that reason.
pub(crate) fn not_the_servers_view(server: &str, declared: Option<&serde_json::Value>) -> String {
    format!(
        "plumbline guard: {}: listings are not recorded in this session: the client declared the capabilities {}, not those Plumbline lists with ({}), and a server may list other tools to it",
        plumbline_taxonomy::sanitize::for_terminal(server, false),
        plumbline_taxonomy::sanitize::for_terminal(
            &declared.map_or("(none)".to_owned(), |d| d.to_string()),
            false
        ),
        plumbline_mcp::client_capabilities()
    )
}

/// What the guard refused or saw in a call, for the history: the server,
/// the tool, and the kind and place of what was found (never a secret).
#[derive(Debug, Clone)]
pub struct Event {
    pub server: String,
    pub at_ms: i64,
    /// `secret` or `injected_result`.
    pub kind: &'static str,
    pub tool: String,
    /// For a person.
    pub what: String,
    /// For the record: the finding or the rules, and what was done.
    pub detail: serde_json::Value,
}

/// Where judged listings and events are recorded (the history, for the
/// CLI). Runs on a thread of its own: recording never holds up the
/// session.
pub trait Recorder: Send + 'static {
    /// Records one listing; the line returned is logged on stderr.
    fn record(&mut self, seen: Seen) -> anyhow::Result<String>;

    /// Records one event (and queues its alerts); the line returned is
    /// logged on stderr.
    fn event(&mut self, event: Event) -> anyhow::Result<String>;
}

enum Job {
    Listing(Seen),
    Event(Event),
}

/// The recorder on a thread of its own, fed in order; a full queue drops
/// (and the sender says so) rather than holding up the session.
pub(crate) struct Recording {
    queue: std::sync::mpsc::SyncSender<Job>,
    thread: std::thread::JoinHandle<()>,
}

impl Recording {
    pub(crate) fn start(mut recorder: Box<dyn Recorder>) -> Recording {
        let (queue, rx) = std::sync::mpsc::sync_channel::<Job>(16);
        let thread = std::thread::spawn(move || {
            for job in rx {
                let (server, done) = match job {
                    Job::Listing(seen) => (seen.server.clone(), recorder.record(seen)),
                    Job::Event(e) => (e.server.clone(), recorder.event(e)),
                };
                match done {
                    Ok(line) => eprintln!(
                        "plumbline guard: {}",
                        plumbline_taxonomy::sanitize::for_terminal(&line, false)
                    ),
                    Err(e) => eprintln!(
                        "plumbline guard: {}: recording failed: {}",
                        plumbline_taxonomy::sanitize::for_terminal(&server, false),
                        plumbline_taxonomy::sanitize::for_terminal(&format!("{e:#}"), false)
                    ),
                }
            }
        });
        Recording { queue, thread }
    }

    /// Hands one event over; says on stderr when the recorder is behind.
    pub(crate) fn send_event(&self, event: Event) {
        let server = event.server.clone();
        if self.queue.try_send(Job::Event(event)).is_err() {
            eprintln!(
                "plumbline guard: {}: the recorder is behind; an event is not recorded",
                plumbline_taxonomy::sanitize::for_terminal(&server, false)
            );
        }
    }

    /// Hands one listing over; `false` when the recorder is behind.
    pub(crate) fn send(&self, seen: Seen) -> bool {
        self.queue.try_send(Job::Listing(seen)).is_ok()
    }

    /// Waits (bounded) until everything handed over is recorded: what was
    /// judged is recorded before the guard ends, and a store that hangs
    /// does not keep the client's process alive.
    pub(crate) async fn finish(self) {
        drop(self.queue);
        let thread = self.thread;
        let joined = tokio::task::spawn_blocking(move || thread.join());
        if tokio::time::timeout(std::time::Duration::from_secs(10), joined)
            .await
            .is_err()
        {
            eprintln!(
                "plumbline guard: recording did not finish within 10 s; the last listing may not be recorded"
            );
        }
    }
}

/// What the guard looks for in calls: the known secret formats, and the
/// user's own secrets (fingerprints, looked at again as their files
/// change).
pub struct SecretWatch {
    pub rules: &'static secrets::rules::Rules,
    pub own: std::sync::Mutex<secrets::local::Sources>,
}

impl SecretWatch {
    pub fn new(own: secrets::local::Sources) -> SecretWatch {
        SecretWatch {
            rules: secrets::rules::Rules::builtin(),
            own: std::sync::Mutex::new(own),
        }
    }

    /// The first secret material in a call's `arguments` that the policy
    /// does not allow for `tool`; an error when they cannot be read.
    pub fn scan(
        &self,
        policy: &Policy,
        tool: &str,
        arguments: Option<&[u8]>,
    ) -> Result<Option<secrets::Finding>, String> {
        let Some(arguments) = arguments else {
            return Ok(None);
        };
        let mut own = self.own.lock().expect("secret sources");
        own.refresh();
        let allowed = |path: &str| policy.allow_secrets.iter().any(|a| a.covers(tool, path));
        secrets::scan(arguments, self.rules, Some(&own), &allowed)
    }
}

/// What a call's arguments hold, by the policy: `Err` with the refusal's
/// message and data (the kind and place, never the value) when it is
/// refused. Said on stderr either way.
#[allow(clippy::too_many_arguments)]
pub(crate) fn check_secrets(
    watch: Option<&SecretWatch>,
    policy: &Policy,
    metrics: &Metrics,
    server: &str,
    tool: &str,
    arguments: Option<&[u8]>,
    events: &dyn Fn(Event),
) -> Result<(), (i64, String, serde_json::Value)> {
    let Some(watch) = watch else { return Ok(()) };
    let finding = match watch.scan(policy, tool, arguments) {
        Ok(None) => return Ok(()),
        Ok(Some(f)) => f,
        Err(e) => {
            return Err((
                message::INVALID_PARAMS,
                format!(
                    "plumbline guard: the arguments of the call to {tool:?} cannot be read: {e}"
                ),
                serde_json::json!({"tool": tool, "why": {"kind": "unreadable_arguments"}}),
            ))
        }
    };
    metrics.secret();
    let block = policy.on_secret == OnSecret::Block;
    eprintln!(
        "plumbline guard: {}: {} a call to {}: its arguments hold {} (--on-secret {})",
        plumbline_taxonomy::sanitize::for_terminal(server, false),
        if block { "refused" } else { "relayed" },
        plumbline_taxonomy::sanitize::for_terminal(tool, false),
        plumbline_taxonomy::sanitize::for_terminal(&finding.describe(), false),
        if block { "block" } else { "warn" }
    );
    events(Event {
        server: server.to_owned(),
        at_ms: stdio::now_ms(),
        kind: "secret",
        tool: tool.to_owned(),
        what: format!(
            "{} a call to {tool}: its arguments hold {}",
            if block {
                "refused"
            } else {
                "relayed (--on-secret warn)"
            },
            finding.describe()
        ),
        detail: serde_json::json!({"finding": finding, "action": if block { "refused" } else { "relayed" }}),
    });
    if !block {
        return Ok(());
    }
    metrics.refused();
    let (message, data) = secret_refusal(server, tool, &finding);
    Err((stdio::REFUSED, message, data))
}

/// What to say of a call with secret material: the refusal's message and
/// data (the kind and place, never the value), for the client.
fn secret_refusal(server: &str, tool: &str, f: &secrets::Finding) -> (String, serde_json::Value) {
    (
        format!(
            "plumbline guard refused the call to {tool:?}: its arguments hold {}; nothing was sent to {server}",
            f.describe()
        ),
        serde_json::json!({"tool": tool, "why": {"kind": "secret", "finding": f}}),
    )
}

/// The guard's counters, shared by its tasks and read by `/metrics`.
#[derive(Debug, Default)]
pub struct Metrics {
    listings: std::sync::atomic::AtomicU64,
    withheld: std::sync::atomic::AtomicU64,
    refused_calls: std::sync::atomic::AtomicU64,
    own_list_changed: std::sync::atomic::AtomicU64,
    dropped: std::sync::atomic::AtomicU64,
    secrets: std::sync::atomic::AtomicU64,
    injected: std::sync::atomic::AtomicU64,
}

impl Metrics {
    pub(crate) fn injected(&self) {
        self.injected
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    pub(crate) fn secret(&self) {
        self.secrets
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    pub(crate) fn dropped(&self) {
        self.dropped
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    pub(crate) fn listed(&self, withheld: usize) {
        use std::sync::atomic::Ordering::Relaxed;
        self.listings.fetch_add(1, Relaxed);
        self.withheld.fetch_add(withheld as u64, Relaxed);
    }

    pub(crate) fn refused(&self) {
        self.refused_calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    pub(crate) fn told(&self, sessions: u64) {
        self.own_list_changed
            .fetch_add(sessions, std::sync::atomic::Ordering::Relaxed);
    }

    /// The counts so far.
    pub fn snapshot(&self) -> Counters {
        use std::sync::atomic::Ordering::Relaxed;
        Counters {
            listings: self.listings.load(Relaxed),
            withheld: self.withheld.load(Relaxed),
            refused_calls: self.refused_calls.load(Relaxed),
            own_list_changed: self.own_list_changed.load(Relaxed),
            dropped: self.dropped.load(Relaxed),
            secrets: self.secrets.load(Relaxed),
            injected: self.injected.load(Relaxed),
        }
    }

    /// Prometheus's text format.
    pub fn render(&self, server: &str) -> String {
        let c = self.snapshot();
        let label = server
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n");
        let mut out = String::new();
        for (name, help, value) in [
            (
                "plumbline_guard_listings_total",
                "Upstream listings judged.",
                c.listings,
            ),
            (
                "plumbline_guard_withheld_total",
                "Tools withheld, summed over listings.",
                c.withheld,
            ),
            (
                "plumbline_guard_refused_calls_total",
                "tools/call requests refused.",
                c.refused_calls,
            ),
            (
                "plumbline_guard_own_list_changed_total",
                "list_changed notifications the guard sent after a review.",
                c.own_list_changed,
            ),
            (
                "plumbline_guard_secret_calls_total",
                "tools/call requests whose arguments held secret material (refused, or relayed with --on-secret warn).",
                c.secrets,
            ),
            (
                "plumbline_guard_injected_results_total",
                "tools/call results holding text aimed at the model (R01, R02, R14).",
                c.injected,
            ),
            (
                "plumbline_guard_dropped_messages_total",
                "Messages not relayed: unreadable, ambiguous, or an answer to no request the guard forwarded.",
                c.dropped,
            ),
        ] {
            out.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} counter\n{name}{{server=\"{label}\"}} {value}\n"
            ));
        }
        out
    }
}

/// Serves `GET /metrics` (Prometheus text) on `listener` until the
/// process ends.
pub async fn serve_metrics(
    listener: tokio::net::TcpListener,
    metrics: std::sync::Arc<Metrics>,
    server: String,
) -> anyhow::Result<()> {
    let router = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let body = metrics.render(&server);
            async move {
                (
                    [("content-type", "text/plain; version=0.0.4; charset=utf-8")],
                    body,
                )
            }
        }),
    );
    axum::serve(listener, router).await?;
    Ok(())
}

/// Counters the guard keeps and reports when it ends.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    /// Complete upstream listings judged.
    pub listings: u64,
    /// Tools withheld, summed over listings.
    pub withheld: u64,
    /// Calls refused.
    pub refused_calls: u64,
    /// `list_changed` the guard sent of its own.
    pub own_list_changed: u64,
    /// Messages not relayed (either direction).
    pub dropped: u64,
    /// Calls with secret material in their arguments.
    pub secrets: u64,
    /// Results with text aimed at the model.
    pub injected: u64,
}
