//! Baselines and the CI gate: `plumbline pin` writes the reviewed tools to
//! `plumbline.lock`; `plumbline check` compares what servers publish now
//! with it and fails the build on drift that matters.

use std::io::{self, Write};
use std::path::Path;

use anyhow::{bail, Result};
use plumbline_drift::Drift;
use plumbline_taxonomy::sanitize::for_terminal;
use plumbline_taxonomy::{Classifier, Severity, Taxonomy};
use serde::Serialize;

use crate::cli::{CheckArgs, CheckFormat, PinArgs};
use crate::config::{Config, ServerConfig};
use crate::exit::Outcome;
use crate::observe::collect;
use crate::render;
use crate::tools_input::{self, RawListing};
use plumbline_lock::{canonical_identity, LockFile, LockedServer, LockedTool, NotPinned};

mod check;
mod pin;
#[cfg(test)]
mod tests;

pub use check::*;
pub use pin::*;

/// What one server publishes now, or why that is unknown.
struct Current {
    server: String,
    identity: serde_json::Value,
    tools: Result<RawListing, String>,
    /// What else the server tells the model, when observed live (a saved
    /// listing holds tools only).
    said: Option<Said>,
}

/// A server's text for the model beside its tools: its `instructions`,
/// and its prompts in the shape of tools (`plumbline_lock::plan::prompt_as_tool`).
struct Said {
    instructions: Option<String>,
    prompts: Vec<(Option<String>, Vec<u8>)>,
}

/// The current tools of `servers` (all available when empty): from saved
/// listings with `--tools`, else by observing the configured servers.
fn current(
    tools: Option<&Path>,
    config: &Path,
    servers: &[String],
    progress: plumbline_watch::observe::Progress,
) -> Result<Vec<Current>> {
    if let Some(path) = tools {
        let saved = tools_input::read(path)?;
        // A saved listing of a configured server is compared as the live
        // one would be: through the server's normalisation rules.
        let configured = if config.exists() {
            Config::load(config)?.servers
        } else {
            Default::default()
        };
        let mut out = Vec::new();
        for s in saved {
            if !servers.is_empty() && !servers.contains(&s.server) {
                continue;
            }
            let normalize = match configured.get(&s.server) {
                Some(c) => c.normalizer()?,
                None => None,
            };
            let tools = s
                .tools
                .into_iter()
                .map(|(name, raw)| compared(normalize.as_ref(), name, raw))
                .collect();
            out.push(Current {
                identity: serde_json::json!({"transport": "saved", "file": format!("{}.json", s.server)}),
                server: s.server,
                tools: Ok(tools),
                said: None,
            });
        }
        for wanted in servers {
            if !out.iter().any(|c| &c.server == wanted) {
                out.push(Current {
                    server: wanted.clone(),
                    identity: serde_json::Value::Null,
                    said: None,
                    tools: Err(format!(
                        "no saved listing for {wanted:?} in {}",
                        path.display()
                    )),
                });
            }
        }
        return Ok(out);
    }
    let config = Config::load(config)?;
    let mut chosen: Vec<(String, ServerConfig)> = Vec::new();
    let mut missing = Vec::new();
    if servers.is_empty() {
        chosen.extend(config.servers.iter().map(|(n, c)| (n.clone(), c.clone())));
    } else {
        for s in servers {
            match config.servers.get(s) {
                Some(c) => chosen.push((s.clone(), c.clone())),
                None => missing.push(s.clone()),
            }
        }
    }
    let limits = config.limits.limits()?;
    let runtime = crate::commands::runtime()?;
    let collected = runtime.block_on(collect(chosen, limits, 8, progress))?;
    let mut out: Vec<Current> = collected
        .into_iter()
        .map(|c| {
            // The lock holds tools as compared: rewritten by the server's
            // normalisation rules, so a lock pinned on one machine checks
            // on another.
            let normalize = c.normalize;
            let said = c.result.as_ref().ok().map(|l| Said {
                instructions: l.instructions.clone(),
                prompts: l
                    .prompts
                    .iter()
                    .flatten()
                    .map(|p| plumbline_lock::plan::prompt_as_tool(&p.raw))
                    .collect(),
            });
            Current {
                server: c.server,
                identity: c.identity,
                said,
                tools: c.result.map(|l| {
                    l.tools
                        .into_iter()
                        .map(|t| compared(normalize.as_deref(), t.name, t.raw))
                        .collect()
                }),
            }
        })
        .collect();
    out.extend(missing.into_iter().map(|s| Current {
        said: None,
        tools: Err(format!("{s:?} is not in the configuration")),
        server: s,
        identity: serde_json::Value::Null,
    }));
    Ok(out)
}

/// A tool as the gate compares it: rewritten by the server's normalisation
/// rules where they apply, else as sent.
fn compared(
    normalize: Option<&plumbline_config::Normalizer>,
    name: Option<String>,
    raw: Vec<u8>,
) -> (Option<String>, Vec<u8>) {
    // A tool the rules cannot read is compared as sent (observe records
    // why); the gate then shows any difference as drift.
    let rewritten = normalize.and_then(|n| n.apply(name.as_deref(), &raw).ok().flatten());
    (name, rewritten.map_or(raw, |r| r.tool))
}

/// Pins every readable tool listed once; says on stderr what was left out
/// (`check` fails on it until the server sends readable tools, each once).
fn pin_tools(server: &str, tools: &[(Option<String>, Vec<u8>)]) -> (Vec<LockedTool>, usize) {
    let pinned = plumbline_lock::pin_tools(tools);
    let server = for_terminal(server, false);
    for n in &pinned.not_pinned {
        match n {
            NotPinned::Unreadable(u) => eprintln!(
                "warning: {server}: {} could not be read as a tool ({}); not pinned, and `check` fails on it",
                for_terminal(&u.label(), false),
                for_terminal(&u.reason, false)
            ),
            NotPinned::Repeated { name, times } => eprintln!(
                "warning: {server}: {} is listed {times} times; not pinned, and `check` fails on it until it is listed once",
                for_terminal(name, false),
            ),
            NotPinned::NoCanonicalForm { error, .. } => {
                eprintln!("warning: {server}: {}; not pinned", for_terminal(error, false))
            }
        }
    }
    let skipped = pinned.skipped();
    (pinned.tools, skipped)
}

// ---------------------------------------------------------------------------
// Types the submodules share (kept here so that their fields are visible to
// every submodule).

/// Whether `check` could compare a server with its baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Compared: the drift is in the result.
    Ok,
    /// Could not be evaluated (unreachable, unreadable, not configured).
    Unavailable,
    /// Configured or listed, but with no baseline to compare with.
    Unpinned,
}

/// What `check` found for one server.
#[derive(Debug, Serialize)]
pub struct ServerCheck {
    pub server: String,
    pub status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<Drift>,
}

impl ServerCheck {
    /// A server that could not be evaluated, and why.
    fn unavailable(server: &str, error: String) -> ServerCheck {
        ServerCheck {
            server: server.to_owned(),
            status: Status::Unavailable,
            error: Some(error),
            drift: None,
        }
    }

    /// A server with no baseline in `source`, and what to run to pin it.
    fn unpinned(server: &str, source: &str, against_store: bool) -> ServerCheck {
        let name = for_terminal(server, false);
        let next = if against_store {
            format!("run `plumbline observe {name}` to record its first observation")
        } else {
            format!("review its tools, then run `plumbline pin {name}`")
        };
        ServerCheck {
            server: server.to_owned(),
            status: Status::Unpinned,
            error: Some(format!("not pinned in {source}: {next}")),
            drift: None,
        }
    }
}
