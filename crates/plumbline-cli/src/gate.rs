//! Baselines and the CI gate: `plumbline pin` writes the reviewed tools to
//! `plumbline.lock`; `plumbline check` compares what servers publish now
//! with it and fails the build on drift that matters.

use std::io::{self, Write};
use std::path::Path;

use anyhow::{bail, Result};
use plumbline_drift::Drift;
use plumbline_taxonomy::json::Value;
use plumbline_taxonomy::sanitize::for_terminal;
use plumbline_taxonomy::{Classifier, Severity, Taxonomy};
use serde::Serialize;

use crate::cli::{CheckArgs, CheckFormat, PinArgs};
use crate::config::{Config, ServerConfig};
use crate::exit::Outcome;
use crate::lock::{LockFile, LockedServer, LockedTool};
use crate::observe::collect;
use crate::render;
use crate::tools_input::{self, RawListing};

/// What one server publishes now, or why that is unknown.
struct Current {
    server: String,
    identity: serde_json::Value,
    tools: Result<RawListing, String>,
}

/// The current tools of `servers` (all available when empty): from saved
/// listings with `--tools`, else by observing the configured servers.
fn current(tools: Option<&Path>, config: &Path, servers: &[String]) -> Result<Vec<Current>> {
    if let Some(path) = tools {
        let saved = tools_input::read(path)?;
        let mut out = Vec::new();
        for s in saved {
            if !servers.is_empty() && !servers.contains(&s.server) {
                continue;
            }
            out.push(Current {
                identity: serde_json::json!({"transport": "saved", "file": format!("{}.json", s.server)}),
                server: s.server,
                tools: Ok(s.tools),
            });
        }
        for wanted in servers {
            if !out.iter().any(|c| &c.server == wanted) {
                out.push(Current {
                    server: wanted.clone(),
                    identity: serde_json::Value::Null,
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
    let collected = runtime.block_on(collect(chosen, limits, 8))?;
    let mut out: Vec<Current> = collected
        .into_iter()
        .map(|c| Current {
            server: c.server,
            identity: c.identity,
            tools: c
                .result
                .map(|l| l.tools.into_iter().map(|t| (t.name, t.raw)).collect()),
        })
        .collect();
    out.extend(missing.into_iter().map(|s| Current {
        tools: Err(format!("{s:?} is not in the configuration")),
        server: s,
        identity: serde_json::Value::Null,
    }));
    Ok(out)
}

fn canonical_identity(identity: &serde_json::Value) -> Result<String> {
    let canonical = plumbline_store::canonicalize(identity.to_string().as_bytes())?;
    Ok(String::from_utf8(canonical)?)
}

/// Pins every named tool; elements that are not tools are left out with
/// a warning.
fn pin_tools(server: &str, tools: &[(Option<String>, Vec<u8>)]) -> Result<Vec<LockedTool>> {
    let mut out = Vec::new();
    for (i, (name, raw)) in tools.iter().enumerate() {
        match name {
            Some(n) => out.push(LockedTool::from_raw(n, raw)?),
            None => {
                eprintln!("warning: {server}: element {i} of the listing is not a tool; not pinned")
            }
        }
    }
    Ok(out)
}

pub fn pin(args: &PinArgs) -> Result<Outcome> {
    let mut lock = if args.lock.exists() {
        LockFile::load(&args.lock)?
    } else {
        if args.update {
            bail!(
                "{} does not exist: run plumbline pin first",
                args.lock.display()
            );
        }
        LockFile::new(Taxonomy::default())
    };
    let before = lock.clone();
    let (servers, only_tools): (Vec<String>, Vec<String>) = if args.update {
        let Some((server, tools)) = args.servers.split_first() else {
            bail!("--update needs a SERVER (and optionally TOOL names)");
        };
        (vec![server.clone()], tools.to_vec())
    } else {
        (args.servers.clone(), Vec::new())
    };
    // --taxonomy, else the registry's, else the lock's own.
    let configured = if args.config.path.exists() {
        Config::load(&args.config.path)?.taxonomy
    } else {
        None
    };
    let taxonomy = args
        .taxonomy
        .taxonomy
        .or(configured)
        .unwrap_or_else(|| lock.taxonomy());
    let currents = current(args.tools.as_deref(), &args.config.path, &servers)?;
    if currents.is_empty() {
        bail!("no servers to pin: configure them in plumbline.toml, or pass --tools");
    }
    let classifier = Classifier::for_taxonomy(taxonomy);
    let mut outcome = Outcome::Clean;
    let mut out = io::stdout().lock();
    for c in currents {
        let tools = match &c.tools {
            Ok(t) => t,
            Err(e) => {
                writeln!(
                    out,
                    "{}: could not be observed, not pinned: {}",
                    c.server,
                    for_terminal(e, false)
                )?;
                outcome = outcome.and(Outcome::InputError);
                continue;
            }
        };
        let fresh = pin_tools(&c.server, tools)?;
        if !args.update {
            writeln!(
                out,
                "{}: pinned {} tools",
                for_terminal(&c.server, false),
                fresh.len()
            )?;
            lock.servers.insert(
                c.server.clone(),
                LockedServer {
                    identity: canonical_identity(&c.identity)?,
                    tools: fresh,
                },
            );
            continue;
        }
        let Some(locked) = lock.servers.get(&c.server).cloned() else {
            bail!(
                "{:?} is not in {}: pin it first",
                c.server,
                args.lock.display()
            );
        };
        let mut names: Vec<String> = if only_tools.is_empty() {
            locked
                .tools
                .iter()
                .chain(&fresh)
                .map(|t| t.name.clone())
                .collect()
        } else {
            only_tools.clone()
        };
        names.sort();
        names.dedup();
        let mut updated = locked.tools.clone();
        let mut refused = false;
        let mut changed = 0;
        // The drift from the lock to what is published, by the drift policy
        // every other command uses (added tools, renames).
        let parsed = |tools: &[LockedTool]| -> Result<Vec<(String, Value)>> {
            tools
                .iter()
                .map(|t| Ok((t.name.clone(), t.value()?)))
                .collect()
        };
        let drift = drift_of(&classifier, &parsed(&locked.tools)?, &parsed(&fresh)?);
        for name in &names {
            let before: Vec<&LockedTool> =
                locked.tools.iter().filter(|t| &t.name == name).collect();
            let after: Vec<&LockedTool> = fresh.iter().filter(|t| &t.name == name).collect();
            if before.is_empty() && after.is_empty() {
                bail!("{}: no tool named {name:?} pinned or published", c.server);
            }
            let severity = drift
                .tools
                .iter()
                .filter(|t| {
                    &t.name == name
                        || matches!(&t.change, plumbline_drift::Change::Renamed { from } if from == name)
                })
                .map(|t| t.severity)
                .max()
                .unwrap_or(Severity::None);
            let what = match (before.is_empty(), after.is_empty()) {
                (_, true) => "removed from the lock",
                (true, false) => "pinned (new)",
                (false, false)
                    if before
                        .iter()
                        .map(|t| &t.sha256)
                        .eq(after.iter().map(|t| &t.sha256)) =>
                {
                    "unchanged"
                }
                (false, false) => "re-pinned",
            };
            if args.max_severity.is_some_and(|max| severity > max) && !args.force {
                writeln!(
                    out,
                    "{}/{}: refused: the change is {severity}, above --max-severity (use --force after review)",
                    for_terminal(&c.server, false),
                    for_terminal(name, false)
                )?;
                refused = true;
                continue;
            }
            if what != "unchanged" {
                changed += 1;
            }
            updated.retain(|t| &t.name != name);
            updated.extend(after.into_iter().cloned());
            writeln!(
                out,
                "{}/{}: {what} ({severity})",
                for_terminal(&c.server, false),
                for_terminal(name, false)
            )?;
        }
        if refused {
            outcome = outcome.and(Outcome::ThresholdReached);
        }
        if changed == 0 {
            writeln!(
                out,
                "{}: nothing to change in the lock",
                for_terminal(&c.server, false)
            )?;
        }
        lock.servers.insert(
            c.server.clone(),
            LockedServer {
                identity: locked.identity,
                tools: updated,
            },
        );
    }
    lock.set_taxonomy(taxonomy);
    if args.lock.exists() && lock == before {
        writeln!(out, "{} unchanged", args.lock.display())?;
    } else {
        lock.save(&args.lock)?;
        writeln!(out, "wrote {}", args.lock.display())?;
    }
    out.flush()?;
    Ok(outcome)
}

/// The drift from pinned to current tools (not stored observations: the
/// history is not involved).
fn drift_of(classifier: &Classifier, old: &[(String, Value)], new: &[(String, Value)]) -> Drift {
    fn view(tools: &[(String, Value)]) -> Vec<plumbline_drift::Tool<'_>> {
        tools
            .iter()
            .map(|(name, definition)| plumbline_drift::Tool { name, definition })
            .collect()
    }
    plumbline_drift::drift(classifier, &view(old), &view(new))
}

/// What `check` found for one server.
#[derive(Debug, Serialize)]
pub struct ServerCheck {
    pub server: String,
    /// `ok`, or `unavailable` when the server could not be evaluated.
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<Drift>,
}

/// The exit code of `check`: 2 when any server could not be evaluated (it
/// never passes silently), else 1 when drift reached the threshold, else 0.
pub fn check_outcome(results: &[ServerCheck], fail_on: Severity) -> Outcome {
    results.iter().fold(Outcome::Clean, |acc, r| {
        let this = match &r.drift {
            None => Outcome::InputError,
            // Only actual drift can fail the build: a lock that matches
            // passes even at `--fail-on none`.
            Some(d) if d.changes().next().is_some() && d.severity >= fail_on => {
                Outcome::ThresholdReached
            }
            Some(_) => Outcome::Clean,
        };
        acc.and(this)
    })
}

pub fn check(args: &CheckArgs) -> Result<Outcome> {
    // What the reports name as the baseline: the lock file, or the store.
    let (lock, baseline_file) = if args.against_store {
        let store = crate::commands::open_store(args.store.path.as_deref())?;
        let path = store.path().to_path_buf();
        let configured = if args.config.path.exists() {
            Config::load(&args.config.path)?.taxonomy
        } else {
            None
        };
        let taxonomy = args.taxonomy.taxonomy.or(configured).unwrap_or_default();
        (LockFile::from_store(&store, &args.servers, taxonomy)?, path)
    } else {
        (LockFile::load(&args.lock)?, args.lock.clone())
    };
    // The lock's grades were reviewed under its taxonomy; another one may
    // be asked for, but not silently.
    let taxonomy = args.taxonomy.taxonomy.unwrap_or_else(|| lock.taxonomy());
    if taxonomy != lock.taxonomy() {
        eprintln!(
            "warning: grading with {taxonomy}, but {} was pinned under {}",
            baseline_file.display(),
            lock.taxonomy()
        );
    }
    let source = if args.against_store {
        format!("the baselines in {}", baseline_file.display())
    } else {
        baseline_file.display().to_string()
    };
    let servers: Vec<String> = if args.servers.is_empty() {
        lock.servers.keys().cloned().collect()
    } else {
        args.servers.clone()
    };
    let mut currents = current(args.tools.as_deref(), &args.config.path, &servers)?;
    let classifier = Classifier::for_taxonomy(taxonomy);
    let mut results = Vec::new();
    for server in &servers {
        let Some(locked) = lock.servers.get(server) else {
            results.push(ServerCheck {
                server: server.clone(),
                status: "unavailable",
                error: Some(format!("{server:?} is not in {source}")),
                drift: None,
            });
            continue;
        };
        let now = currents
            .iter()
            .position(|c| &c.server == server)
            .map(|i| currents.swap_remove(i));
        let tools = match now.map(|c| c.tools) {
            Some(Ok(t)) => t,
            Some(Err(e)) => {
                results.push(ServerCheck {
                    server: server.clone(),
                    status: "unavailable",
                    error: Some(e),
                    drift: None,
                });
                continue;
            }
            None => {
                results.push(ServerCheck {
                    server: server.clone(),
                    status: "unavailable",
                    error: Some("no current listing".to_owned()),
                    drift: None,
                });
                continue;
            }
        };
        let old: Vec<(String, Value)> = locked
            .tools
            .iter()
            .map(|t| Ok((t.name.clone(), t.value()?)))
            .collect::<Result<_>>()?;
        let new: Vec<(String, Value)> = tools
            .iter()
            .filter_map(|(name, raw)| {
                let name = name.clone()?;
                plumbline_taxonomy::json::parse_tool(raw)
                    .ok()
                    .map(|v| (name, v))
            })
            .collect();
        results.push(ServerCheck {
            server: server.clone(),
            status: "ok",
            error: None,
            drift: Some(drift_of(&classifier, &old, &new)),
        });
    }
    // Worst first.
    results.sort_by(|a, b| {
        let sev = |r: &ServerCheck| r.drift.as_ref().map(|d| d.severity);
        a.drift
            .is_some()
            .cmp(&b.drift.is_some())
            .then(sev(b).cmp(&sev(a)))
            .then_with(|| a.server.cmp(&b.server))
    });
    let outcome = check_outcome(&results, args.fail_on);
    let mut out = io::stdout().lock();
    match args.format {
        CheckFormat::Sarif => {
            serde_json::to_writer_pretty(
                &mut out,
                &crate::report::sarif(&results, &baseline_file, taxonomy),
            )?;
            writeln!(out)?;
        }
        CheckFormat::Markdown => {
            out.write_all(
                crate::report::markdown(&results, outcome, args.fail_on, &baseline_file, taxonomy)
                    .as_bytes(),
            )?;
        }
        CheckFormat::Json => {
            serde_json::to_writer(
                &mut out,
                &serde_json::json!({
                    "lock": baseline_file.display().to_string(),
                    "taxonomy": taxonomy,
                    "fail_on": args.fail_on,
                    "exit_code": crate::exit::code(outcome),
                    "servers": results,
                }),
            )?;
            writeln!(out)?;
        }
        CheckFormat::Human => {
            for r in &results {
                let name = for_terminal(&r.server, false);
                match (&r.drift, &r.error) {
                    (Some(d), _) if d.changes().count() == 0 && d.duplicates.is_empty() => {
                        let what = if args.against_store {
                            "baseline"
                        } else {
                            "lock"
                        };
                        writeln!(out, "{name}: matches the {what}")?;
                    }
                    (Some(d), _) => {
                        writeln!(
                            out,
                            "{name}: {} ({} changed)",
                            d.severity,
                            d.changes().count()
                        )?;
                        render::drift(&mut out, d)?;
                    }
                    (None, e) => writeln!(
                        out,
                        "{name}: could not be evaluated: {}",
                        for_terminal(e.as_deref().unwrap_or("unknown"), false)
                    )?,
                }
            }
            let verdict = match outcome {
                Outcome::Clean => format!("passed: no drift at or above {}", args.fail_on),
                Outcome::ThresholdReached => format!("failed: drift at or above {}", args.fail_on),
                Outcome::InputError => "failed: a server could not be evaluated".to_owned(),
            };
            writeln!(
                out,
                "{verdict} ({} servers checked against {source}, {taxonomy})",
                results.len(),
            )?;
        }
    }
    out.flush()?;
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;
    use plumbline_drift::Drift;

    /// A check result whose one changed tool has `severity` (`None`: the
    /// server was unavailable).
    fn result(severity: Option<Severity>) -> ServerCheck {
        let changed = |severity| plumbline_drift::ToolDrift {
            name: "t".into(),
            change: plumbline_drift::Change::Changed,
            severity,
            classification: plumbline_taxonomy::Classification {
                severity,
                rules: Vec::new(),
                evidence: Vec::new(),
            },
        };
        ServerCheck {
            server: "s".into(),
            status: if severity.is_some() {
                "ok"
            } else {
                "unavailable"
            },
            error: None,
            drift: severity.map(|severity| Drift {
                severity,
                tools: vec![changed(severity)],
                duplicates: Vec::new(),
            }),
        }
    }

    #[test]
    fn check_exit_codes() {
        use crate::exit::code;
        let high = Severity::High;
        assert_eq!(code(check_outcome(&[], high)), 0);
        assert_eq!(
            code(check_outcome(&[result(Some(Severity::Medium))], high)),
            0
        );
        assert_eq!(
            code(check_outcome(&[result(Some(Severity::High))], high)),
            1
        );
        assert_eq!(
            code(check_outcome(
                &[result(Some(Severity::None))],
                Severity::None
            )),
            1
        );
        let unchanged = ServerCheck {
            drift: Some(Drift {
                severity: Severity::None,
                tools: Vec::new(),
                duplicates: Vec::new(),
            }),
            ..result(Some(Severity::None))
        };
        assert_eq!(code(check_outcome(&[unchanged], Severity::None)), 0);
        // An unavailable server never passes silently, and wins over drift.
        assert_eq!(code(check_outcome(&[result(None)], high)), 2);
        assert_eq!(
            code(check_outcome(
                &[result(Some(Severity::Critical)), result(None)],
                high
            )),
            2
        );
    }
}
