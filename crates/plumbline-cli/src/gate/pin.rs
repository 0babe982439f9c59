//! `plumbline pin`: write plumbline.lock from the current tools, or update it change by change.

use super::*;

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
    let (servers, only_tools): (Vec<String>, Vec<String>) = if args.update {
        let Some((server, tools)) = args.servers.split_first() else {
            bail!("--update needs a SERVER (and optionally TOOL names)");
        };
        (vec![server.clone()], tools.to_vec())
    } else {
        (args.servers.clone(), Vec::new())
    };
    // --taxonomy, else the registry's, else the lock's own.
    let taxonomy = args
        .taxonomy
        .taxonomy
        .or(Config::taxonomy_in(&args.config.path)?)
        .unwrap_or_else(|| lock.taxonomy());
    let currents = current(
        args.tools.as_deref(),
        &args.config.path,
        &servers,
        plumbline_watch::observe::Progress::unless(args.format == crate::cli::Format::Json),
    )?;
    if currents.is_empty() {
        bail!("no servers to pin: configure them in plumbline.toml, or pass --tools");
    }
    let classifier = Classifier::for_taxonomy(taxonomy);
    let mut outcome = Outcome::Clean;
    let mut out = io::stdout().lock();
    let mut say = Say {
        json: args.format == crate::cli::Format::Json,
        events: Vec::new(),
    };
    for c in currents {
        let tools = match &c.tools {
            Ok(t) => t,
            Err(e) => {
                say.say(
                    &mut out,
                    format!(
                        "{}: could not be observed, not pinned: {}",
                        c.server,
                        for_terminal(e, false)
                    ),
                    serde_json::json!({"server": c.server, "outcome": "failed", "error": e}),
                )?;
                outcome = outcome.and(Outcome::InputError);
                continue;
            }
        };
        let (fresh, unreadable) = pin_tools(&c.server, tools);
        if unreadable > 0 {
            outcome = outcome.and(Outcome::InputError);
        }
        // A server the lock already holds is re-pinned change by change,
        // under the same rule as `--update SERVER`: a plain `pin` must
        // not be a way around --accept-severity.
        if !args.update && !lock.servers.contains_key(&c.server) {
            say.say(
                &mut out,
                format!(
                    "{}: pinned {}",
                    for_terminal(&c.server, false),
                    super::plural(fresh.len(), "tool")
                ),
                serde_json::json!({"server": c.server, "outcome": "pinned", "tools": fresh.len()}),
            )?;
            let (instructions, prompts) = match &c.said {
                Some(said) => (
                    said.instructions.clone(),
                    pin_tools(&c.server, &said.prompts).0,
                ),
                None => (None, Vec::new()),
            };
            lock.servers.insert(
                c.server.clone(),
                LockedServer {
                    identity: canonical_identity(&c.identity)?,
                    tools: fresh,
                    instructions,
                    prompts,
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
        let mut updated = locked.clone();
        let mut refused = false;
        let mut changed = 0;
        let plan = plumbline_lock::plan_update(&classifier, &locked, &fresh, &only_tools)
            .map_err(|e| anyhow::anyhow!("{}: {e}", c.server))?;
        for step in plan {
            let (name, severity, what) = (&step.name, step.severity, step.what.as_str());
            if args.max_severity.is_some_and(|max| severity > max) && !args.force {
                say.say(
                    &mut out,
                    format!(
                        "{}/{}: refused: the change is {severity}, above --max-severity (use --force after review)",
                        for_terminal(&c.server, false),
                        for_terminal(name, false)
                    ),
                    serde_json::json!({"server": c.server, "tool": name, "outcome": "refused", "severity": severity}),
                )?;
                refused = true;
                continue;
            }
            // A change graded HIGH or worse is a decision a person makes
            // knowingly: by naming the severity, or at the prompt.
            let how = if severity >= Severity::High
                && step.what != plumbline_lock::UpdateKind::Unchanged
            {
                match args.accept_severity {
                    Some(level) if severity <= level => Some(format!(
                        "accepted a {severity} change (--accept-severity {})",
                        level.to_string().to_lowercase()
                    )),
                    _ if !say.json && confirmed(&c.server, name, severity)? => {
                        Some(format!("accepted a {severity} change at the prompt"))
                    }
                    _ => {
                        say.say(
                            &mut out,
                            format!(
                                "{}/{}: refused: the change is {severity}; review it, then pass --accept-severity {}",
                                for_terminal(&c.server, false),
                                for_terminal(name, false),
                                severity.to_string().to_lowercase()
                            ),
                            serde_json::json!({"server": c.server, "tool": name, "outcome": "refused", "severity": severity, "needs": "--accept-severity"}),
                        )?;
                        refused = true;
                        continue;
                    }
                }
            } else {
                None
            };
            if step.what != plumbline_lock::UpdateKind::Unchanged {
                changed += 1;
            }
            updated.take(name, &fresh);
            say.say(
                &mut out,
                format!(
                    "{}/{}: {what} ({severity}){}",
                    for_terminal(&c.server, false),
                    for_terminal(name, false),
                    how.as_deref().map(|h| format!("; {h}")).unwrap_or_default()
                ),
                serde_json::json!({"server": c.server, "tool": name, "outcome": what, "severity": severity, "accepted": how}),
            )?;
        }
        // The whole server updated (no TOOL named), observed live: its
        // instructions and prompts are re-pinned too, under the same rule.
        if let (Some(said), true) = (&c.said, only_tools.is_empty()) {
            for (what, before, now) in text_updates(&classifier, &locked, said)? {
                let Some(severity) = now else { continue };
                let accepted = severity < Severity::High
                    || args.accept_severity.is_some_and(|level| severity <= level)
                    || (!say.json && confirmed(&c.server, what, severity)?);
                if !accepted {
                    say.say(
                        &mut out,
                        format!(
                            "{}: {what}: refused: the change is {severity}; review it, then pass --accept-severity {}",
                            for_terminal(&c.server, false),
                            severity.to_string().to_lowercase()
                        ),
                        serde_json::json!({"server": c.server, "part": what, "outcome": "refused", "severity": severity, "needs": "--accept-severity"}),
                    )?;
                    refused = true;
                    continue;
                }
                changed += 1;
                match what {
                    "instructions" => updated.instructions = said.instructions.clone(),
                    _ => updated.prompts = pin_tools(&c.server, &said.prompts).0,
                }
                say.say(
                    &mut out,
                    format!("{}: {what} re-pinned ({severity})", for_terminal(&c.server, false)),
                    serde_json::json!({"server": c.server, "part": what, "outcome": "re-pinned", "severity": severity, "was": before}),
                )?;
            }
        }
        if refused {
            outcome = outcome.and(Outcome::ThresholdReached);
        }
        if changed == 0 {
            say.say(
                &mut out,
                format!(
                    "{}: nothing to change in the lock",
                    for_terminal(&c.server, false)
                ),
                serde_json::json!({"server": c.server, "outcome": "nothing to change"}),
            )?;
        }
        // How the server is reached now, when observed live (a saved
        // listing says nothing about it): a re-pinned server is checked
        // as it is reached now.
        let identity = if args.tools.is_none() && !c.identity.is_null() {
            canonical_identity(&c.identity)?
        } else {
            locked.identity.clone()
        };
        if identity != locked.identity {
            say.say(
                &mut out,
                format!(
                    "{}: now reached as configured ({})",
                    for_terminal(&c.server, false),
                    for_terminal(
                        &plumbline_history::identity_changes(&locked.identity, &identity)
                            .join("; "),
                        false
                    )
                ),
                serde_json::json!({"server": c.server, "outcome": "identity updated", "identity": identity}),
            )?;
        }
        updated.identity = identity;
        lock.servers.insert(c.server.clone(), updated);
    }
    lock.set_taxonomy(taxonomy);
    // Written only when its bytes would change: an update that changes
    // nothing leaves the file (and its time stamp) alone.
    let wrote = std::fs::read_to_string(&args.lock).ok() != Some(lock.render()?);
    if wrote {
        lock.save(&args.lock)?;
    }
    if say.json {
        crate::render::write_json(
            &mut out,
            &serde_json::json!({
                "lock": args.lock.display().to_string(),
                "taxonomy": taxonomy,
                "wrote": wrote,
                "events": say.events,
            }),
            false,
        )?;
    } else if wrote {
        writeln!(out, "wrote {}", args.lock.display())?;
    } else {
        writeln!(out, "{} unchanged", args.lock.display())?;
    }
    out.flush()?;
    Ok(outcome)
}

/// What `pin` says as it goes: a line for people, or an event for the
/// JSON document printed at the end.
struct Say {
    json: bool,
    events: Vec<serde_json::Value>,
}

impl Say {
    fn say(&mut self, out: &mut impl Write, line: String, event: serde_json::Value) -> Result<()> {
        if self.json {
            self.events.push(event);
        } else {
            writeln!(out, "{line}")?;
        }
        Ok(())
    }
}

/// Asks on the terminal whether to accept a change graded `severity`;
/// `false` without a terminal to ask on.
fn confirmed(server: &str, tool: &str, severity: Severity) -> Result<bool> {
    use std::io::IsTerminal as _;
    if !io::stdin().is_terminal() || !io::stderr().is_terminal() {
        return Ok(false);
    }
    eprint!(
        "{}/{}: the change is {severity}. Accept it into the lock? [y/N] ",
        for_terminal(server, false),
        for_terminal(tool, false)
    );
    io::stderr().flush()?;
    let mut answer = String::new();
    io::stdin().read_line(&mut answer)?;
    Ok(matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

/// The server's instructions and prompts against the lock's: for each
/// part, its name, how many pinned entries it had, and the grade of its
/// change (`None`: unchanged).
fn text_updates(
    classifier: &Classifier,
    locked: &LockedServer,
    said: &super::Said,
) -> Result<Vec<(&'static str, usize, Option<Severity>)>> {
    let mut out = Vec::new();
    let instructions = if locked.instructions == said.instructions {
        None
    } else {
        let now =
            plumbline_lock::plan::instructions_as_tool(said.instructions.as_deref().unwrap_or(""));
        Some(
            locked
                .instructions_baseline()?
                .drift_to(classifier, std::slice::from_ref(&now))?
                .severity,
        )
    };
    out.push((
        "instructions",
        usize::from(locked.instructions.is_some()),
        instructions,
    ));
    let mut fresh = plumbline_lock::pin_tools(&said.prompts).tools;
    fresh.sort();
    let mut pinned = locked.prompts.clone();
    pinned.sort();
    let prompts = if fresh == pinned {
        None
    } else {
        Some(
            locked
                .prompts_baseline()
                .drift_to(classifier, &said.prompts)?
                .severity,
        )
    };
    out.push(("prompts", locked.prompts.len(), prompts));
    Ok(out)
}
