//! `plumbline observe`: list every configured server's tools (concurrently,
//! bounded), record each observation through the history (graded once),
//! and report the drift since the server's previous successful
//! observation, worst first.

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use anyhow::Result;
use plumbline_drift::Drift;
use plumbline_history::{Grader, LeaseToken, Observed, Recorded};
use plumbline_history::{
    History, NewObservation, NormalizedTool, NormalizedValue, Outcome as StoreOutcome, Problem,
    ProblemKind, RawTool,
};
use plumbline_mcp::{list_tools, Limits, Listing, ListingProblem, ServerSpec};
use plumbline_taxonomy::json::parse_tool;
use plumbline_taxonomy::Severity;
use serde::Serialize;
use tokio::task::JoinSet;

use plumbline_config::{Normalizer, ServerConfig};
use plumbline_history::time::now_ms;

/// One server's listing, or why there is none.
pub struct Collected {
    pub server: String,
    pub identity: serde_json::Value,
    pub started_at_ms: i64,
    pub finished_at_ms: i64,
    pub result: Result<Listing, String>,
    /// The server's normalisation rules, applied when recording.
    pub normalize: Option<Arc<Normalizer>>,
}

/// Lists `servers` with at most `concurrency` at once. A server whose
/// configuration cannot be turned into a connection (an unset variable)
/// fails alone; the others go on. Ctrl-C abandons what is in flight: the
/// transports kill and reap their processes as their futures drop.
pub async fn collect(
    servers: Vec<(String, ServerConfig)>,
    limits: Limits,
    concurrency: usize,
    progress: Progress,
) -> Result<Vec<Collected>> {
    collect_with(servers, limits, concurrency, true, progress).await
}

/// Whether to show, on standard error, which servers are being listed and
/// for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// A live status line, and a line per server as it finishes: only
    /// when standard error is a terminal.
    OnTerminal,
    /// Nothing (JSON output, the watcher).
    Quiet,
}

impl Progress {
    /// Progress on a terminal, unless the output is for a program.
    pub fn unless(machine_readable: bool) -> Progress {
        if machine_readable {
            Progress::Quiet
        } else {
            Progress::OnTerminal
        }
    }

    fn shown(self) -> bool {
        self == Progress::OnTerminal && std::io::stderr().is_terminal()
    }
}

/// [`collect`], optionally leaving Ctrl-C to the caller (the watcher
/// handles its signals itself and drops this future to cancel).
pub async fn collect_with(
    servers: Vec<(String, ServerConfig)>,
    limits: Limits,
    concurrency: usize,
    interruptible: bool,
    progress: Progress,
) -> Result<Vec<Collected>> {
    let total = servers.len();
    let gate = Arc::new(tokio::sync::Semaphore::new(concurrency.max(1)));
    let limits = Arc::new(limits);
    // Servers being listed now (they hold a permit), for the status line.
    let listing: Arc<std::sync::Mutex<std::collections::BTreeSet<String>>> = Arc::default();
    let mut tasks = JoinSet::new();
    for (server, config) in servers {
        let gate = Arc::clone(&gate);
        let limits = Arc::clone(&limits);
        let listing = Arc::clone(&listing);
        tasks.spawn(async move {
            let _permit = gate.acquire_owned().await;
            let _listed = InFlight::enter(&listing, &server);
            let identity = config.identity();
            let started_at_ms = now_ms();
            let (result, normalize) =
                match (config.spec_known_from_env_as(&server), config.normalizer()) {
                    (Ok((spec, known)), Ok(normalize)) => (
                        list(&spec, &limits)
                            .await
                            .map(|mut l| {
                                plumbline_config::redact_listing(&known, &mut l);
                                l
                            })
                            .map_err(|e| plumbline_config::redact_for(&known, &e)),
                        normalize.map(Arc::new),
                    ),
                    (Err(e), _) | (_, Err(e)) => (Err(format!("{e:#}")), None),
                };
            Collected {
                server,
                identity,
                started_at_ms,
                finished_at_ms: now_ms(),
                result,
                normalize,
            }
        });
    }
    let progress = progress.shown();
    let started = tokio::time::Instant::now();
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(250));
    let mut done = Vec::with_capacity(total);
    loop {
        tokio::select! {
            _ = tick.tick(), if progress => {
                status_line(started.elapsed(), done.len(), total, &listing);
            }
            next = tasks.join_next() => match next {
                Some(Ok(c)) => {
                    if progress {
                        let seconds = (c.finished_at_ms - c.started_at_ms).max(0) as f64 / 1000.0;
                        let outcome = if c.result.is_ok() { "listed" } else { "failed" };
                        eprint!("\r\x1b[K");
                        eprintln!(
                            "{}: {outcome} in {seconds:.1} s",
                            plumbline_base::sanitize::for_terminal(&c.server, false)
                        );
                    }
                    done.push(c);
                    if progress {
                        status_line(started.elapsed(), done.len(), total, &listing);
                    }
                }
                Some(Err(e)) => anyhow::bail!("an observation task failed: {e}"),
                None => break,
            },
            _ = tokio::signal::ctrl_c(), if interruptible => {
                tasks.abort_all();
                while tasks.join_next().await.is_some() {}
                anyhow::bail!("interrupted: {} of {total} servers observed, none of the rest recorded", done.len());
            }
        }
    }
    if progress {
        // Clear the status line: what follows starts on a clean line.
        eprint!("\r\x1b[K");
        let _ = std::io::stderr().flush();
    }
    done.sort_by(|a, b| a.server.cmp(&b.server));
    Ok(done)
}

/// `12.3 s  3/8 done · listing github, docs · 3 waiting`, over the line
/// before.
fn status_line(
    elapsed: std::time::Duration,
    done: usize,
    total: usize,
    listing: &std::sync::Mutex<std::collections::BTreeSet<String>>,
) {
    let now: Vec<String> = listing
        .lock()
        .map(|l| {
            l.iter()
                .map(|s| plumbline_base::sanitize::for_terminal(s, false))
                .collect()
        })
        .unwrap_or_default();
    let waiting = total.saturating_sub(done + now.len());
    let mut line = format!("{:.1} s  {done}/{total} done", elapsed.as_secs_f64());
    if !now.is_empty() {
        let mut names = now.iter().take(4).cloned().collect::<Vec<_>>().join(", ");
        if now.len() > 4 {
            names.push_str(&format!(" and {} more", now.len() - 4));
        }
        line.push_str(&format!(" · listing {names}"));
    }
    if waiting > 0 {
        line.push_str(&format!(" · {waiting} waiting"));
    }
    eprint!("\r\x1b[K{line}");
    let _ = std::io::stderr().flush();
}

/// A server's place in the set of servers being listed, while it lives.
struct InFlight {
    set: Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>,
    server: String,
}

impl InFlight {
    fn enter(
        set: &Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>,
        server: &str,
    ) -> InFlight {
        if let Ok(mut s) = set.lock() {
            s.insert(server.to_owned());
        }
        InFlight {
            set: Arc::clone(set),
            server: server.to_owned(),
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Ok(mut s) = self.set.lock() {
            s.remove(&self.server);
        }
    }
}

async fn list(spec: &ServerSpec, limits: &Limits) -> Result<Listing, String> {
    list_tools(spec, limits).await.map_err(|e| e.to_string())
}

/// The store's record of a listing: every element as sent, and the
/// problems the client found that the store does not find itself (an
/// element that is a JSON object but has no string name; the store finds
/// the unreadable ones and the repeated names).
pub fn new_observation(c: &Collected) -> NewObservation {
    let authorization = c.result.as_ref().ok().and_then(|l| l.authorization.clone());
    let (outcome, tools, protocol_version, server_info, capabilities, instructions, problems) =
        match &c.result {
            Ok(l) => {
                let mut problems: Vec<Problem> = l
                    .problems
                    .iter()
                    .filter_map(|p| match p {
                        ListingProblem::MalformedTool { position, error } => {
                            let element = l.tools.get(*position)?;
                            // Unreadable elements are the store's to report.
                            parse_tool(&element.raw).ok()?;
                            Some(Problem {
                                position: u32::try_from(*position).ok(),
                                kind: ProblemKind::MalformedTool,
                                tool_name: None,
                                message: error.clone(),
                            })
                        }
                        ListingProblem::DuplicateName { .. } => None,
                        // Output skipped on the way: kept with the listing,
                        // shown wherever its problems are.
                        ListingProblem::SkippedOutput { excerpt } => Some(Problem {
                            position: None,
                            kind: ProblemKind::Other,
                            tool_name: None,
                            message: format!("skipped a line that is not JSON-RPC: {excerpt}"),
                        }),
                        ListingProblem::AuthorizationMetadata { error } => Some(Problem {
                            position: None,
                            kind: ProblemKind::Other,
                            tool_name: None,
                            message: format!("the authorization metadata: {error}"),
                        }),
                        ListingProblem::Prompts { error } => Some(Problem {
                            position: None,
                            kind: ProblemKind::Other,
                            tool_name: None,
                            message: format!("the prompts could not be listed: {error}"),
                        }),
                    })
                    .collect();
                let mut tools = Vec::with_capacity(l.tools.len());
                for (position, t) in l.tools.iter().enumerate() {
                    let normalized = match c.normalize.as_ref() {
                        // Only a tool the store can read is compared at all.
                        Some(n) if parse_tool(&t.raw).is_ok() => {
                            match n.apply(t.name.as_deref(), &t.raw) {
                                Ok(r) => r,
                                Err(message) => {
                                    problems.push(Problem {
                                        position: u32::try_from(position).ok(),
                                        kind: ProblemKind::Other,
                                        tool_name: t.name.clone(),
                                        message,
                                    });
                                    None
                                }
                            }
                        }
                        _ => None,
                    };
                    tools.push(RawTool {
                        name: t.name.clone(),
                        raw: t.raw.clone(),
                        normalized: normalized.map(|r| NormalizedTool {
                            raw: r.tool,
                            by: r
                                .by
                                .into_iter()
                                .map(|(pointer, rule)| NormalizedValue { pointer, rule })
                                .collect(),
                        }),
                    });
                }
                (
                    StoreOutcome::Ok,
                    tools,
                    Some(l.protocol_version.clone()),
                    l.server_info.clone(),
                    l.capabilities.clone(),
                    l.instructions.clone(),
                    problems,
                )
            }
            Err(e) => (
                StoreOutcome::Failed { error: e.clone() },
                Vec::new(),
                None,
                None,
                None,
                None,
                Vec::new(),
            ),
        };
    NewObservation {
        server: c.server.clone(),
        started_at_ms: c.started_at_ms,
        finished_at_ms: c.finished_at_ms,
        outcome,
        protocol_version,
        server_info,
        capabilities,
        instructions,
        authorization,
        tools,
        problems,
    }
}

/// What `observe` found for one server.
#[derive(Debug, Serialize)]
pub struct Report {
    pub server: String,
    pub observation: i64,
    /// `"outcome"` and, for a failure, `"error"`.
    #[serde(flatten)]
    pub outcome: StoreOutcome,
    pub tools: usize,
    /// What was wrong with parts of the listing (malformed tools, tools
    /// without a name, repeated names); the rest was recorded.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<ProblemReport>,
    /// Strings rewritten by the server's normalisation rules before
    /// comparing (the raw bytes were kept as sent).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub normalized: Vec<NormalizedReport>,
    /// The observation this one is compared with: the server's previous
    /// successful one (none for a first or failed observation).
    pub baseline: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<Drift>,
}

/// One string a normalisation rule rewrote.
#[derive(Debug, Serialize)]
pub struct NormalizedReport {
    pub tool: String,
    /// Its RFC 6901 pointer within the tool.
    pub pointer: String,
    /// The rule, as named in `plumbline.toml`.
    pub rule: String,
}

/// One problem of a listing, as reports show it.
#[derive(Debug, Serialize)]
pub struct ProblemReport {
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    pub message: String,
}

impl Report {
    pub fn severity(&self) -> Severity {
        self.drift.as_ref().map_or(Severity::None, |d| d.severity)
    }

    pub fn failed(&self) -> bool {
        !self.outcome.is_ok()
    }

    fn of(r: Recorded) -> Report {
        Report {
            server: r.server,
            observation: r.observation.0,
            outcome: match r.error {
                None => StoreOutcome::Ok,
                Some(error) => StoreOutcome::Failed { error },
            },
            tools: r.tools,
            problems: r
                .problems
                .into_iter()
                .map(|p| ProblemReport {
                    kind: p.kind.as_str(),
                    position: p.position,
                    tool: p.tool_name,
                    message: p.message,
                })
                .collect(),
            normalized: r
                .normalized
                .into_iter()
                .map(|(tool, v)| NormalizedReport {
                    tool,
                    pointer: v.pointer,
                    rule: v.rule,
                })
                .collect(),
            baseline: r.previous.map(|p| p.0),
            drift: r.drift,
        }
    }
}

/// Records each collected listing through the history (graded once) and
/// reports them worst first: failures, then by severity, then by name.
pub fn record(
    store: &mut History,
    grader: &Grader,
    collected: Vec<Collected>,
) -> Result<Vec<Report>> {
    let batch: Vec<_> = collected.into_iter().map(|c| (c, None)).collect();
    Ok(reports(record_all(store, grader, &batch)?))
}

/// Records each collected listing through the history, in order, each
/// under the lease it was made under when it has one (a daemon sharing
/// the history): a listing whose lease another watcher has since taken is
/// not recorded.
pub fn record_all(
    store: &mut History,
    grader: &Grader,
    batch: &[(Collected, Option<LeaseToken>)],
) -> Result<Vec<Recorded>> {
    let batch = batch.iter().map(observed).collect();
    Ok(store.record(grader, batch)?)
}

/// A collected listing as the history records it.
pub fn observed((c, lease): &(Collected, Option<LeaseToken>)) -> Observed {
    Observed {
        lease: lease.clone(),
        identity: c.identity.to_string(),
        observation: new_observation(c),
    }
}

/// Grades again observation `id`, recorded from `listed` by a
/// [`record_all`] that failed before grading it.
pub fn regrade(
    store: &mut History,
    grader: &Grader,
    id: plumbline_history::ObservationId,
    listed: &(Collected, Option<LeaseToken>),
) -> Result<Recorded> {
    Ok(plumbline_history::regrade(
        store.store_mut(),
        grader,
        id,
        &observed(listed),
    )?)
}

/// What was recorded, as reports, worst first: failures, then by
/// severity, then by name.
pub fn reports(recorded: Vec<Recorded>) -> Vec<Report> {
    let mut reports: Vec<Report> = recorded.into_iter().map(Report::of).collect();
    reports.sort_by(|a, b| {
        b.failed()
            .cmp(&a.failed())
            .then(b.severity().cmp(&a.severity()))
            .then_with(|| a.server.cmp(&b.server))
    });
    reports
}
