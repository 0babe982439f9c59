//! `plumbline observe`: list every configured server's tools (concurrently,
//! bounded), store each observation, and report the drift since the
//! server's previous successful observation, worst first.

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use anyhow::{Context as _, Result};
use plumbline_drift::{drift, Drift, Tool};
use plumbline_mcp::{list_tools, Limits, Listing, ServerSpec};
use plumbline_store::{
    NewObservation, ObservationId, Outcome as StoreOutcome, RawTool, SqliteStore, Store,
};
use plumbline_taxonomy::json::{parse_tool, Value};
use plumbline_taxonomy::{Classifier, Severity};
use serde::Serialize;
use tokio::task::JoinSet;

use crate::config::ServerConfig;
use plumbline_store::time::now_ms;

/// One server's listing, or why there is none.
pub struct Collected {
    pub server: String,
    pub identity: serde_json::Value,
    pub started_at_ms: i64,
    pub finished_at_ms: i64,
    pub result: Result<Listing, String>,
}

/// Lists `servers` with at most `concurrency` at once. A server whose
/// configuration cannot be turned into a connection (an unset variable)
/// fails alone; the others go on. Ctrl-C abandons what is in flight: the
/// transports kill and reap their processes as their futures drop.
pub async fn collect(
    servers: Vec<(String, ServerConfig)>,
    limits: Limits,
    concurrency: usize,
) -> Result<Vec<Collected>> {
    collect_with(servers, limits, concurrency, true).await
}

/// [`collect`], optionally leaving Ctrl-C to the caller (the watcher
/// handles its signals itself and drops this future to cancel).
pub async fn collect_with(
    servers: Vec<(String, ServerConfig)>,
    limits: Limits,
    concurrency: usize,
    interruptible: bool,
) -> Result<Vec<Collected>> {
    let total = servers.len();
    let gate = Arc::new(tokio::sync::Semaphore::new(concurrency.max(1)));
    let limits = Arc::new(limits);
    let mut tasks = JoinSet::new();
    for (server, config) in servers {
        let gate = Arc::clone(&gate);
        let limits = Arc::clone(&limits);
        tasks.spawn(async move {
            let _permit = gate.acquire_owned().await;
            let identity = config.identity();
            let started_at_ms = now_ms();
            let result = match config.spec() {
                Ok(spec) => list(&spec, &limits).await,
                Err(e) => Err(format!("{e:#}")),
            };
            Collected {
                server,
                identity,
                started_at_ms,
                finished_at_ms: now_ms(),
                result,
            }
        });
    }
    let progress = std::io::stderr().is_terminal() && total > 1;
    let mut done = Vec::with_capacity(total);
    loop {
        tokio::select! {
            next = tasks.join_next() => match next {
                Some(Ok(c)) => {
                    done.push(c);
                    if progress {
                        eprint!("\robserved {}/{total} servers", done.len());
                        let _ = std::io::stderr().flush();
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
        eprintln!();
    }
    done.sort_by(|a, b| a.server.cmp(&b.server));
    Ok(done)
}

async fn list(spec: &ServerSpec, limits: &Limits) -> Result<Listing, String> {
    list_tools(spec, limits).await.map_err(|e| e.to_string())
}

/// The tools of a stored observation, parsed; malformed ones are left out
/// (they were reported when observed).
pub fn stored_tools(store: &SqliteStore, id: ObservationId) -> Result<Vec<(String, Value)>> {
    let obs = store
        .observation(id)?
        .with_context(|| format!("observation {} is not in the store", id.0))?;
    let mut tools = Vec::new();
    for entry in obs.tools {
        let (Some(name), Some(_)) = (entry.name, entry.canonical_digest) else {
            continue;
        };
        let raw = store.raw_tool(&entry.raw_digest)?.with_context(|| {
            format!(
                "observation {}: raw tool {} is missing",
                id.0, entry.raw_digest
            )
        })?;
        if let Ok(v) = parse_tool(&raw) {
            tools.push((name, v));
        }
    }
    Ok(tools)
}

/// A listing's named tools, parsed; malformed ones are left out, as
/// [`stored_tools`] leaves them out.
fn parsed_tools(listing: &Listing) -> Vec<(String, Value)> {
    listing
        .tools
        .iter()
        .filter_map(|t| Some((t.name.clone()?, parse_tool(&t.raw).ok()?)))
        .collect()
}

fn view(list: &[(String, Value)]) -> Vec<Tool<'_>> {
    list.iter()
        .map(|(name, definition)| Tool { name, definition })
        .collect()
}

pub fn drift_between(
    classifier: &Classifier,
    old: &[(String, Value)],
    new: &[(String, Value)],
) -> Drift {
    drift(classifier, &view(old), &view(new))
}

/// [`drift_between`], knowing the tool names of other servers.
pub fn drift_among(
    classifier: &Classifier,
    old: &[(String, Value)],
    new: &[(String, Value)],
    foreign: &[String],
) -> Drift {
    plumbline_drift::drift_among(classifier, &view(old), &view(new), foreign)
}

/// What `observe` found for one server.
#[derive(Debug, Serialize)]
pub struct Report {
    pub server: String,
    pub observation: i64,
    pub outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub tools: usize,
    /// The observation this one is compared with: the server's previous
    /// successful one (none for a first or failed observation).
    pub baseline: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<Drift>,
}

impl Report {
    pub fn severity(&self) -> Severity {
        self.drift.as_ref().map_or(Severity::None, |d| d.severity)
    }

    pub fn failed(&self) -> bool {
        self.error.is_some()
    }
}

/// Records each collected listing and computes its drift.
pub fn record(
    store: &mut SqliteStore,
    classifier: &Classifier,
    collected: Vec<Collected>,
) -> Result<Vec<Report>> {
    // Each server's tool names, so that every server's drift knows the
    // others' tools (taxonomy-v2: naming another server's tool).
    let names: Vec<(String, Vec<String>)> = collected
        .iter()
        .filter_map(|c| {
            let l = c.result.as_ref().ok()?;
            Some((
                c.server.clone(),
                l.tools.iter().filter_map(|t| t.name.clone()).collect(),
            ))
        })
        .collect();
    let mut reports = Vec::new();
    for c in collected {
        let foreign: Vec<String> = names
            .iter()
            .filter(|(s, _)| *s != c.server)
            .flat_map(|(_, n)| n.iter().cloned())
            .collect();
        store.put_server(&c.server, &c.identity.to_string())?;
        let error = c.result.as_ref().err().cloned();
        // The listing's tools, parsed now for the drift: reading them back
        // from the store would parse the same bytes a second time.
        let parsed = c.result.as_ref().ok().map(parsed_tools);
        let (outcome, tools, protocol_version, server_info, capabilities, instructions) =
            match c.result {
                Ok(l) => (
                    StoreOutcome::Ok,
                    l.tools
                        .into_iter()
                        .map(|t| RawTool {
                            name: t.name,
                            raw: t.raw,
                        })
                        .collect(),
                    Some(l.protocol_version),
                    l.server_info,
                    l.capabilities,
                    l.instructions,
                ),
                Err(e) => (
                    StoreOutcome::Failed { error: e },
                    Vec::new(),
                    None,
                    None,
                    None,
                    None,
                ),
            };
        let tool_count = tools.len();
        let id = store.record_observation(&NewObservation {
            server: c.server.clone(),
            started_at_ms: c.started_at_ms,
            finished_at_ms: c.finished_at_ms,
            outcome,
            protocol_version,
            server_info,
            capabilities,
            instructions,
            tools,
            problems: Vec::new(),
        })?;
        let mut report = Report {
            server: c.server.clone(),
            observation: id.0,
            outcome: if error.is_none() { "ok" } else { "failed" },
            error,
            tools: tool_count,
            baseline: None,
            drift: None,
        };
        if let Some(new) = parsed {
            if let Some(prev) = store.latest_successful(&c.server, Some(id))? {
                let old = stored_tools(store, prev.id)?;
                report.baseline = Some(prev.id.0);
                report.drift = Some(drift_among(classifier, &old, &new, &foreign));
            }
        }
        reports.push(report);
    }
    // Worst first: failures, then by severity, then by name.
    reports.sort_by(|a, b| {
        b.failed()
            .cmp(&a.failed())
            .then(b.severity().cmp(&a.severity()))
            .then_with(|| a.server.cmp(&b.server))
    });
    Ok(reports)
}
