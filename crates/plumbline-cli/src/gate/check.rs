//! `plumbline check`: the current tools against plumbline.lock (or the store's baseline), and its exit codes.

use super::*;

/// The exit code of `check`: 2 when any server could not be evaluated, has
/// no baseline (`allow_unpinned` lets that pass) or lists a tool that
/// could not be read (it never passes silently), else 1 when drift reached
/// the threshold, else 0.
pub fn check_outcome(results: &[ServerCheck], fail_on: Severity, allow_unpinned: bool) -> Outcome {
    results.iter().fold(Outcome::Clean, |acc, r| {
        let this = match &r.drift {
            None if r.status == Status::Unpinned && allow_unpinned => Outcome::Clean,
            None => Outcome::InputError,
            // A tool that could not be read was not graded, and a name
            // listed twice leaves which definition the model sees to the
            // client: whatever --fail-on says, neither passes.
            Some(d) if unreadable(d) > 0 || listed_twice(d) > 0 => Outcome::InputError,
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

/// The one-line verdict every format leads or ends with.
pub fn verdict(results: &[ServerCheck], outcome: Outcome, fail_on: Severity) -> String {
    let unpinned = results
        .iter()
        .filter(|r| r.status == Status::Unpinned)
        .count();
    let unavailable = results
        .iter()
        .filter(|r| r.status == Status::Unavailable)
        .count();
    match outcome {
        Outcome::Clean if unpinned > 0 => format!(
            "passed: no drift at or above {fail_on} ({} not pinned, allowed)",
            plural(unpinned, "server")
        ),
        Outcome::Clean => format!("passed: no drift at or above {fail_on}"),
        Outcome::ThresholdReached => format!("failed: drift at or above {fail_on}"),
        Outcome::InputError => {
            let mut why = Vec::new();
            let drifts = || results.iter().filter_map(|r| r.drift.as_ref());
            let unreadable: usize = drifts().map(unreadable).sum();
            if unreadable > 0 {
                why.push(format!(
                    "{} could not be read, so not graded",
                    plural(unreadable, "tool")
                ));
            }
            let twice: usize = drifts().map(listed_twice).sum();
            if twice > 0 {
                why.push(format!(
                    "{} listed more than once",
                    plural(twice, "tool name")
                ));
            }
            if unavailable > 0 {
                why.push(format!(
                    "{} could not be evaluated",
                    plural(unavailable, "server")
                ));
            }
            if unpinned > 0 {
                why.push(format!("{} not pinned", plural(unpinned, "server")));
            }
            format!("failed: {}", why.join(", "))
        }
    }
}

/// How many tools of `d` could not be read.
fn unreadable(d: &plumbline_drift::Drift) -> usize {
    d.changes()
        .filter(|t| matches!(t.change, plumbline_drift::Change::Unreadable { .. }))
        .count()
}

/// How many names the current listing of `d` carries more than once.
fn listed_twice(d: &plumbline_drift::Drift) -> usize {
    d.duplicates.iter().filter(|dup| dup.new_count > 1).count()
}

/// What to do after a failed check, one line per kind of failure, each
/// naming the servers and the command.
pub fn next_steps(
    results: &[ServerCheck],
    outcome: Outcome,
    fail_on: Severity,
    against_store: bool,
) -> Vec<String> {
    if outcome == Outcome::Clean {
        return Vec::new();
    }
    let names = |keep: &dyn Fn(&ServerCheck) -> bool| -> Vec<String> {
        results
            .iter()
            .filter(|r| keep(r))
            .map(|r| for_terminal(&r.server, false))
            .collect()
    };
    let mut steps = Vec::new();
    let drifted = names(&|r| {
        r.drift
            .as_ref()
            .is_some_and(|d| d.changes().next().is_some() && d.severity >= fail_on)
    });
    if !drifted.is_empty() {
        steps.push(if against_store {
            format!(
                "review the changes of {} on the dashboard (`plumbline serve`) and accept the expected ones",
                drifted.join(", ")
            )
        } else {
            format!(
                "review the changes above; if they are expected, `plumbline pin --update {}` records them (one SERVER [TOOL …] at a time)",
                drifted.join(" ")
            )
        });
    }
    let broken = names(&|r| {
        r.drift
            .as_ref()
            .is_some_and(|d| unreadable(d) + listed_twice(d) > 0)
    });
    if !broken.is_empty() {
        steps.push(format!(
            "{} lists tools Plumbline cannot grade (unreadable, or one name twice): fix the server; no pin makes them pass",
            broken.join(", ")
        ));
    }
    let unpinned = names(&|r| r.status == Status::Unpinned);
    if !unpinned.is_empty() {
        steps.push(if against_store {
            format!(
                "`plumbline observe {}` records a first observation",
                unpinned.join(" ")
            )
        } else {
            format!(
                "review their tools, then `plumbline pin {}` (or pass --allow-unpinned)",
                unpinned.join(" ")
            )
        });
    }
    let unavailable = names(&|r| r.status == Status::Unavailable);
    if !unavailable.is_empty() {
        steps.push(format!(
            "{} could not be evaluated: see the error above, then run `plumbline observe {}` to try the connection alone",
            unavailable.join(", "),
            unavailable.join(" ")
        ));
    }
    steps
}

/// "1 server", "2 servers".
pub fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// The servers a run of `check` knows of besides the lock: the saved
/// listings given with `--tools`, else the configured servers (none when
/// there is no configuration).
fn listed_servers(tools: Option<&Path>, config: &Path) -> Result<Vec<String>> {
    if let Some(path) = tools {
        return Ok(tools_input::read(path)?
            .into_iter()
            .map(|s| s.server)
            .collect());
    }
    if !config.exists() {
        return Ok(Vec::new());
    }
    Ok(Config::load(config)?.servers.into_keys().collect())
}

/// The store's baselines as a lock: every server with one (or those in
/// `only`), each tool at its accepted canonical version.
pub(crate) fn lock_from_store(
    store: &plumbline_history::History,
    only: &[String],
    taxonomy: Taxonomy,
) -> Result<LockFile> {
    let mut lock = LockFile::new(taxonomy);
    for server in store.servers()? {
        if !only.is_empty() && !only.contains(&server.name) {
            continue;
        }
        let Some(baseline) = store.baseline(&server.name)? else {
            continue;
        };
        let mut tools = Vec::new();
        for (name, tool) in baseline.tools {
            let canonical = store.tool_version(&tool.canonical_digest)?.ok_or_else(|| {
                anyhow::anyhow!(
                    "{}: the baseline's version of {name:?} is missing from the store",
                    server.name
                )
            })?;
            tools.push(LockedTool {
                name,
                sha256: tool.canonical_digest.to_hex(),
                definition: String::from_utf8(canonical)
                    .map_err(|_| anyhow::anyhow!("canonical JSON is not UTF-8"))?,
            });
        }
        lock.servers.insert(
            server.name,
            LockedServer {
                identity: server.identity,
                tools,
                ..Default::default()
            },
        );
    }
    Ok(lock)
}

pub fn check(args: &CheckArgs) -> Result<Outcome> {
    // What the reports name as the baseline: the lock file, or the store.
    let (lock, baseline_file) = if args.against_store {
        let store =
            crate::commands::open_existing_store(args.store.path.as_deref(), &args.config.path)?;
        let path = store.path().to_path_buf();
        let configured = Config::taxonomy_in(&args.config.path)?;
        let taxonomy = args.taxonomy.taxonomy.or(configured).unwrap_or_default();
        (lock_from_store(&store, &args.servers, taxonomy)?, path)
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
    // Every server the run knows of is gated: those in the lock, and those
    // configured (or given as saved listings) that were never pinned.
    let servers: Vec<String> = if args.servers.is_empty() {
        let mut all: std::collections::BTreeSet<String> = lock.servers.keys().cloned().collect();
        all.extend(listed_servers(args.tools.as_deref(), &args.config.path)?);
        all.into_iter().collect()
    } else {
        // A server named here must be one the run knows of: a typo
        // (or a server removed from the file) is not "unpinned", which
        // --allow-unpinned would pass.
        let known: std::collections::BTreeSet<String> = lock
            .servers
            .keys()
            .cloned()
            .chain(listed_servers(args.tools.as_deref(), &args.config.path)?)
            .collect();
        let unknown: Vec<&String> = args
            .servers
            .iter()
            .filter(|s| !known.contains(*s))
            .collect();
        if !unknown.is_empty() {
            bail!(
                "{} neither in {} nor in {}: nothing to check",
                unknown
                    .iter()
                    .map(|s| format!("{:?}", s.as_str()))
                    .collect::<Vec<_>>()
                    .join(", ")
                    + if unknown.len() == 1 { " is" } else { " are" },
                if args.tools.is_some() {
                    "the saved listings".to_owned()
                } else {
                    args.config.path.display().to_string()
                },
                source
            );
        }
        args.servers.clone()
    };
    // Only pinned servers are observed: an unpinned one has nothing to be
    // compared with.
    let pinned: Vec<String> = servers
        .iter()
        .filter(|s| lock.servers.contains_key(*s))
        .cloned()
        .collect();
    let mut currents = current(
        args.tools.as_deref(),
        &args.config.path,
        &pinned,
        plumbline_watch::observe::Progress::unless(args.format != CheckFormat::Human),
    )?;
    let classifier = Classifier::for_taxonomy(taxonomy);
    let mut results = Vec::new();
    for server in &servers {
        let Some(locked) = lock.servers.get(server) else {
            results.push(ServerCheck::unpinned(server, &source, args.against_store));
            continue;
        };
        let now = currents
            .iter()
            .position(|c| &c.server == server)
            .map(|i| currents.swap_remove(i));
        // The lock names how the server was reached when pinned; a
        // different command or URL now may be a different server.
        if let Some(c) = now.as_ref().filter(|_| args.tools.is_none()) {
            if let Ok(identity) = canonical_identity(&c.identity) {
                let changes = plumbline_history::identity_changes(&locked.identity, &identity);
                if !c.identity.is_null() && !changes.is_empty() {
                    eprintln!(
                        "warning: {}: reached differently than when pinned ({}); the tools are compared all the same. If this is the same server, `plumbline pin --update {}` records how it is reached now",
                        for_terminal(server, false),
                        for_terminal(&changes.join("; "), false),
                        for_terminal(server, false),
                    );
                }
            }
        }
        let tools = match now.map(|c| c.tools) {
            Some(Ok(t)) => t,
            Some(Err(e)) => {
                results.push(ServerCheck::unavailable(server, e));
                continue;
            }
            None => {
                results.push(ServerCheck::unavailable(
                    server,
                    "no current listing".into(),
                ));
                continue;
            }
        };
        // What cannot be read cannot be graded, and never passes.
        results.push(ServerCheck {
            server: server.clone(),
            status: Status::Ok,
            error: None,
            drift: Some(locked.drift_to(&classifier, &tools)?),
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
    let outcome = check_outcome(&results, args.fail_on, args.allow_unpinned);
    // Every report comes from this one observation: the printed one, and
    // each `--output FORMAT=FILE`.
    let report = Report {
        results: &results,
        outcome,
        fail_on: args.fail_on,
        baseline_file: &baseline_file,
        source: &source,
        taxonomy,
        against_store: args.against_store,
    };
    for (format, path) in &args.outputs {
        let mut file = Vec::new();
        report.write(&mut file, *format)?;
        std::fs::write(path, file)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
    }
    let mut out = io::stdout().lock();
    report.write(&mut out, args.format)?;
    out.flush()?;
    Ok(outcome)
}

/// What `check` found, ready to be written in any format.
struct Report<'a> {
    results: &'a [ServerCheck],
    outcome: Outcome,
    fail_on: Severity,
    baseline_file: &'a Path,
    /// How the human report names the baseline.
    source: &'a str,
    taxonomy: Taxonomy,
    against_store: bool,
}

impl Report<'_> {
    fn write(&self, out: &mut impl Write, format: CheckFormat) -> Result<()> {
        let Report {
            results,
            outcome,
            fail_on,
            baseline_file,
            source,
            taxonomy,
            against_store,
        } = *self;
        match format {
            CheckFormat::Sarif => {
                crate::render::write_json(
                    out,
                    &crate::report::sarif(results, baseline_file, taxonomy),
                    true,
                )?;
            }
            CheckFormat::Markdown => {
                out.write_all(
                    crate::report::markdown(results, outcome, fail_on, baseline_file, taxonomy)
                        .as_bytes(),
                )?;
            }
            CheckFormat::Json => {
                crate::render::write_json(
                    out,
                    &serde_json::json!({
                        "lock": baseline_file.display().to_string(),
                        "taxonomy": taxonomy,
                        "fail_on": fail_on,
                        "exit_code": crate::exit::code(outcome),
                        "servers": results,
                    }),
                    false,
                )?;
            }
            CheckFormat::Human => {
                for r in results {
                    let name = for_terminal(&r.server, false);
                    match (&r.drift, &r.error) {
                        (Some(d), _) if d.changes().count() == 0 && d.duplicates.is_empty() => {
                            let what = if against_store { "baseline" } else { "lock" };
                            writeln!(out, "{name}: matches the {what}")?;
                        }
                        (Some(d), _) => {
                            writeln!(
                                out,
                                "{name}: {} ({} changed)",
                                d.severity,
                                d.changes().count()
                            )?;
                            render::drift(out, d)?;
                        }
                        (None, e) if r.status == Status::Unpinned => writeln!(
                            out,
                            "{name}: {}",
                            for_terminal(e.as_deref().unwrap_or("not pinned"), false)
                        )?,
                        (None, e) => writeln!(
                            out,
                            "{name}: could not be evaluated: {}",
                            for_terminal(e.as_deref().unwrap_or("unknown"), false)
                        )?,
                    }
                }
                let verdict = verdict(results, outcome, fail_on);
                writeln!(
                    out,
                    "{verdict} ({} checked against {source}, {taxonomy})",
                    plural(results.len(), "server"),
                )?;
                for step in next_steps(results, outcome, fail_on, against_store) {
                    writeln!(out, "next: {step}")?;
                }
            }
        }
        out.flush()?;
        Ok(())
    }
}
