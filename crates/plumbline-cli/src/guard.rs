//! `plumbline guard`: the runtime guard over stdio (plumbline-guard does
//! the work; this picks the server, the baseline and the policy).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use plumbline_guard::{
    Baseline, LockBaseline, Mode, NewTools, OnError, OnInjected, OnSecret, Policy, Recorder,
    SecretAllowed, Seen,
};
use plumbline_history::{Grader, Observed};
use plumbline_history::{Problem, ProblemKind};
use plumbline_lock::LockedServer;
use plumbline_mcp::{ServerSpec, StdioSpec};
use plumbline_taxonomy::sanitize::for_terminal;
use plumbline_taxonomy::{Classifier, Taxonomy};

use crate::cli::{GuardArgs, GuardMode, NewToolsArg, OnErrorArg};
use crate::config::Config;
use crate::exit::Outcome;

/// The store's accepted baseline of one server, read again at every poll.
struct StoreBaseline {
    store: Option<PathBuf>,
    registry: PathBuf,
    server: String,
    /// The store was there at an earlier read: its going is an error,
    /// not "no baseline".
    seen: bool,
}

impl Baseline for StoreBaseline {
    fn load(&mut self) -> Result<Option<LockedServer>> {
        // No store yet: no baseline (every tool is new), not an error.
        let location = crate::commands::store_path(self.store.as_deref(), &self.registry)?;
        if !crate::commands::store_exists(&location) {
            if self.seen {
                bail!("the store {} is gone", location.display());
            }
            return Ok(None);
        }
        self.seen = true;
        let store = crate::commands::open_existing_store(self.store.as_deref(), &self.registry)?;
        let mut lock = crate::gate::lock_from_store(
            &store,
            std::slice::from_ref(&self.server),
            Taxonomy::default(),
        )?;
        Ok(lock.servers.remove(&self.server))
    }

    fn how_to_review(&self, tool: &str, _severity: plumbline_taxonomy::Severity) -> String {
        format!(
            "review and accept the change of {}/{tool} on the dashboard (`plumbline serve`)",
            self.server
        )
    }
}

/// Each judged listing as an observation in the history, graded once as
/// `watch` records it, with what the guard withheld as its problems.
struct HistoryRecorder {
    store: Option<PathBuf>,
    registry: PathBuf,
    identity: serde_json::Value,
    normalize: Option<std::sync::Arc<plumbline_config::Normalizer>>,
    grader: Grader,
    open: Option<plumbline_history::History>,
    /// The configuration's alert channels: what the guard records is queued
    /// in the store's outbox as `watch` queues it (a running watcher, or
    /// `watch --once`, sends it).
    alerts: Option<crate::config::Config>,
    taxonomy: Taxonomy,
    /// The baseline is the store's: a server's first observation is its
    /// baseline until a change is accepted, so the guard must not be the
    /// one to make it (trust on first use is what it exists to avoid).
    store_is_baseline: bool,
}

impl HistoryRecorder {
    /// The recorder for `guard`'s listings, unless --no-record.
    fn unless_off(
        args: &GuardArgs,
        identity: serde_json::Value,
        normalize: Option<std::sync::Arc<plumbline_config::Normalizer>>,
        taxonomy: Taxonomy,
        config: Option<&Config>,
        store_is_baseline: bool,
    ) -> Option<Box<dyn Recorder>> {
        (!args.no_record).then(|| {
            Box::new(HistoryRecorder {
                store: args.store.path.clone(),
                registry: args.config.path.clone(),
                identity,
                normalize,
                grader: Grader::new(taxonomy),
                open: None,
                alerts: config.filter(|c| !c.alerts.is_empty()).cloned(),
                taxonomy,
                store_is_baseline,
            }) as Box<dyn Recorder>
        })
    }
}

impl Recorder for HistoryRecorder {
    fn event(&mut self, e: plumbline_guard::Event) -> Result<String> {
        let alerts = self.alerts.clone();
        let store = self.opened()?;
        if store.server(&e.server)?.is_none() {
            return Ok(format!(
                "{}: the event is not recorded: the store has no observation of {0} (run `plumbline observe {0}`)",
                e.server
            ));
        }
        let new = plumbline_history::NewGuardEvent {
            server: e.server.clone(),
            at_ms: e.at_ms,
            kind: e.kind.to_owned(),
            tool: e.tool.clone(),
            detail: serde_json::json!({"what": e.what, "detail": e.detail}).to_string(),
        };
        let id = store.record_guard_event(&new)?;
        let event = plumbline_history::GuardEvent {
            id,
            server: new.server,
            at_ms: new.at_ms,
            kind: new.kind,
            tool: new.tool,
            detail: new.detail,
        };
        let queued = match &alerts {
            Some(config) => {
                plumbline_watch::alerting::enqueue_guard_event(store, config, &event, &e.what)?
                    .len()
            }
            None => 0,
        };
        Ok(format!(
            "{}: recorded guard event {id} ({} {}){}",
            e.server,
            e.kind,
            e.tool,
            if queued > 0 {
                format!(
                    "; alerts queued for {}",
                    crate::gate::plural(queued, "channel")
                )
            } else {
                String::new()
            }
        ))
    }

    fn record(&mut self, seen: Seen) -> Result<String> {
        if self.open.is_none() {
            self.open = Some(crate::commands::open_store(
                self.store.as_deref(),
                &self.registry,
            )?);
        }
        let store = self.open.as_mut().expect("opened above");
        if self.store_is_baseline && store.server(&seen.server)?.is_none() {
            return Ok(format!(
                "{0}: not recorded: the store has no observation of {0}, and the guard's first would become its baseline unreviewed; run `plumbline observe {0}` and review it first",
                seen.server
            ));
        }
        let collected = plumbline_watch::observe::Collected {
            server: seen.server.clone(),
            identity: self.identity.clone(),
            started_at_ms: seen.started_at_ms,
            finished_at_ms: seen.finished_at_ms,
            result: Ok(seen.listing),
            normalize: self.normalize.clone(),
        };
        let mut observation = plumbline_watch::observe::new_observation(&collected);
        for w in &seen.withheld {
            observation.problems.push(Problem {
                position: None,
                kind: ProblemKind::Other,
                tool_name: Some(w.name.clone()),
                message: format!("withheld by plumbline guard: {}", w.describe()),
            });
        }
        let recorded = plumbline_history::record(
            store.store_mut(),
            &self.grader,
            vec![Observed {
                lease: None,
                identity: self.identity.to_string(),
                observation,
            }],
        )?;
        let queued = match &self.alerts {
            Some(config) => {
                plumbline_watch::alerting::enqueue(store, config, &recorded, self.taxonomy)?.len()
            }
            None => 0,
        };
        let r = recorded.first().context("nothing recorded")?;
        Ok(format!(
            "{}: recorded observation {} ({}, drift {}, {} withheld{})",
            seen.server,
            r.observation.0,
            crate::gate::plural(r.tools, "tool"),
            r.severity(),
            seen.withheld.len(),
            if queued > 0 {
                format!(
                    "; alerts queued for {}",
                    crate::gate::plural(queued, "channel")
                )
            } else {
                String::new()
            }
        ))
    }
}

/// A client's stdio entry that runs a server under `plumbline guard`
/// (`discover --wrap` writes them): the `--server` name it gives and the
/// server's own command and arguments. Read with the guard's own argument
/// parser, so every form the guard accepts is recognised.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Wrapped {
    pub server: Option<String>,
    /// The server's command and arguments; empty when the guard starts the
    /// server `plumbline.toml` configures under `server` (or relays to an
    /// `--upstream`): the entry then holds no server of its own.
    pub inner: Vec<String>,
}

/// Whether `command args` runs `plumbline guard`, directly or through
/// `env` (`env [-i] [NAME=VALUE]... plumbline guard ...`).
pub(crate) fn wrapped(command: &str, args: &[String]) -> Option<Wrapped> {
    let program = Path::new(command).file_name()?.to_str()?;
    if program == "env" {
        let mut rest = args
            .iter()
            .skip_while(|a| a.starts_with('-') || (a.contains('=') && !a.starts_with('=')));
        let inner = rest.next()?;
        let rest: Vec<String> = rest.cloned().collect();
        return wrapped(inner, &rest);
    }
    if !program.starts_with("plumbline") || args.first().map(String::as_str) != Some("guard") {
        return None;
    }
    let parsed = <crate::cli::Cli as clap::Parser>::try_parse_from(
        std::iter::once("plumbline").chain(args.iter().map(String::as_str)),
    )
    .ok()?;
    match parsed.command {
        crate::cli::Command::Guard(g) => Some(Wrapped {
            server: g.server,
            inner: g.command,
        }),
        _ => None,
    }
}

impl HistoryRecorder {
    fn opened(&mut self) -> Result<&mut plumbline_history::History> {
        if self.open.is_none() {
            self.open = Some(crate::commands::open_store(
                self.store.as_deref(),
                &self.registry,
            )?);
        }
        Ok(self.open.as_mut().expect("opened above"))
    }
}

pub fn run(args: &GuardArgs) -> Result<Outcome> {
    if let Some(listen) = args.listen {
        return run_http(args, listen);
    }
    let (server, spec, identity, normalize) = server_and_spec(args)?;
    let (baseline, lock_taxonomy) = baseline_for(args, &server)?;
    let store_is_baseline = lock_taxonomy.is_none();
    let config = if args.config.path.exists() {
        Some(Config::load(&args.config.path)?)
    } else {
        None
    };
    let taxonomy = args
        .taxonomy
        .taxonomy
        .or(lock_taxonomy)
        .or(config.as_ref().and_then(|c| c.taxonomy))
        .unwrap_or_default();
    let policy = policy_of(args, config.as_ref(), &server)?;
    let secrets = secret_watch(&spec.env);
    let limits = match &config {
        Some(c) => c.limits.limits()?,
        None => Default::default(),
    };
    let metrics = std::sync::Arc::new(plumbline_guard::Metrics::default());
    let options = plumbline_guard::stdio::Options {
        server: server.clone(),
        spec,
        policy,
        classifier: Classifier::for_taxonomy(taxonomy),
        limits,
        poll: Duration::from_secs(1),
        secrets: Some(secrets),
        metrics: std::sync::Arc::clone(&metrics),
    };
    let recorder = HistoryRecorder::unless_off(
        args,
        identity,
        normalize,
        taxonomy,
        config.as_ref(),
        store_is_baseline,
    );
    // One thread: a message crosses the relay on the thread that read it,
    // with no hand-off to another worker (the recorder has its own).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let result = runtime.block_on(async {
        serve_metrics(args, &metrics, &server).await?;
        plumbline_guard::stdio::run(
            options,
            baseline,
            recorder,
            plumbline_guard::pipe::stdin(),
            plumbline_guard::pipe::stdout(),
        )
        .await
    });
    // stdin may still be read by a blocking thread: do not wait for it.
    runtime.shutdown_background();
    match result {
        Ok(c) => {
            eprintln!(
                "plumbline guard: {}: session ended; {} judged, {} withheld, {} refused, {} dropped",
                for_terminal(&server, false),
                crate::gate::plural(c.listings as usize, "listing"),
                crate::gate::plural(c.withheld as usize, "tool"),
                crate::gate::plural(c.refused_calls as usize, "call"),
                crate::gate::plural(c.dropped as usize, "message"),
            );
            Ok(Outcome::Clean)
        }
        Err(e) => {
            eprintln!(
                "plumbline guard: {}: {}",
                for_terminal(&server, false),
                for_terminal(&format!("{e:#}"), false)
            );
            Ok(Outcome::InputError)
        }
    }
}

/// The server: its name, how to start it, what the history records of how
/// it is reached, and the rules that normalise its tools before they are
/// compared.
type Server = (
    String,
    StdioSpec,
    serde_json::Value,
    Option<std::sync::Arc<plumbline_config::Normalizer>>,
);

/// The server to start: COMMAND with the environment the client gave us,
/// or the configured stdio server named by --server.
fn server_and_spec(args: &GuardArgs) -> Result<Server> {
    if let Some((command, rest)) = args.command.split_first() {
        let server = match &args.server {
            Some(s) => s.clone(),
            None => Path::new(command)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| command.clone()),
        };
        // The client started us with the environment it means the server
        // to have: all of it goes on.
        let inherit_env = std::env::vars_os()
            .filter_map(|(k, _)| k.into_string().ok())
            .collect();
        let identity = serde_json::json!({
            "transport": "stdio",
            "command": command,
            "args": plumbline_base::redact::redact_args(rest),
        });
        return Ok((
            server,
            StdioSpec {
                command: command.clone(),
                args: rest.to_vec(),
                env: Vec::new(),
                inherit_env,
                cwd: None,
            },
            identity,
            None,
        ));
    }
    let Some(server) = &args.server else {
        bail!("name a server (--server NAME) or give its command after --");
    };
    let config = Config::load(&args.config.path)?;
    let Some(c) = config.servers.get(server) else {
        bail!("{:?} is not in {}", server, args.config.path.display());
    };
    let normalize = c.normalizer()?.map(std::sync::Arc::new);
    match c.spec().with_context(|| format!("server {server:?}"))? {
        ServerSpec::Stdio(spec) => Ok((server.clone(), spec, c.identity(), normalize)),
        _ => bail!(
            "{server:?} is a remote server: this guard relays stdio (the HTTP form, --listen, is not built yet)"
        ),
    }
}

/// The baseline of `server`: the lock (given, or plumbline.lock here), else
/// the store's; and the taxonomy the lock was pinned under.
fn baseline_for(args: &GuardArgs, server: &str) -> Result<(Box<dyn Baseline>, Option<Taxonomy>)> {
    let lock = args.lock.clone().or_else(|| {
        let default = PathBuf::from("plumbline.lock");
        default.exists().then_some(default)
    });
    Ok(match lock {
        Some(path) => {
            let taxonomy = plumbline_lock::LockFile::load(&path)?.taxonomy();
            (
                Box::new(LockBaseline::new(path, server.to_owned())),
                Some(taxonomy),
            )
        }
        None => (
            Box::new(StoreBaseline {
                store: args.store.path.clone(),
                registry: args.config.path.clone(),
                server: server.to_owned(),
                seen: false,
            }),
            None,
        ),
    })
}

/// The policy: the flags, over `[guard.NAME]` of the configuration.
fn policy_of(args: &GuardArgs, config: Option<&Config>, server: &str) -> Result<Policy> {
    let configured = config.and_then(|c| c.guard.get(server));
    let on_secret = match (
        args.on_secret,
        configured.and_then(|g| g.on_secret.as_deref()),
    ) {
        (Some(crate::cli::OnSecretArg::Warn), _) | (None, Some("warn")) => OnSecret::Warn,
        _ => OnSecret::Block,
    };
    let mut allow_secrets: Vec<SecretAllowed> = configured
        .map(|g| {
            g.allow_secrets
                .iter()
                .map(|a| SecretAllowed::parse(a))
                .collect()
        })
        .unwrap_or_default();
    for a in &args.allow_secret {
        if a.trim().is_empty() || a.starts_with('/') {
            bail!("--allow-secret {a:?}: TOOL or TOOL/POINTER");
        }
        allow_secrets.push(SecretAllowed::parse(a));
    }
    use crate::cli::OnInjectedArg;
    let on_injected_result = match (
        args.on_injected_result,
        configured.and_then(|g| g.on_injected_result.as_deref()),
    ) {
        (Some(OnInjectedArg::Mark), _) | (None, Some("mark")) => OnInjected::Mark,
        (Some(OnInjectedArg::Block), _) | (None, Some("block")) => OnInjected::Block,
        _ => OnInjected::Warn,
    };
    let policy = policy_of_flags(args)?;
    Ok(Policy {
        on_secret,
        allow_secrets,
        on_injected_result,
        ..policy
    })
}

/// What calls are checked for: the known formats, and the secrets of this
/// machine's user (`$HOME`), of the client's working directory (the
/// guard's) and of the environment (the guard's, and the server's).
fn secret_watch(extra_env: &[(String, String)]) -> std::sync::Arc<plumbline_guard::SecretWatch> {
    let started = std::time::Instant::now();
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let cwd = std::env::current_dir().ok();
    let env = std::env::vars().chain(extra_env.iter().cloned());
    let sources = plumbline_guard::secrets::local::Sources::new(home, cwd, env);
    let watch = plumbline_guard::SecretWatch::new(sources);
    let n = watch.own.lock().map(|o| o.sources.len()).unwrap_or(0);
    eprintln!(
        "plumbline guard: calls are checked for secret material: {} known formats, and {n} of your secret sources (fingerprints in memory only; read in {} ms)",
        watch.rules.len(),
        started.elapsed().as_millis()
    );
    std::sync::Arc::new(watch)
}

fn policy_of_flags(args: &GuardArgs) -> Result<Policy> {
    if !args.max_age.is_finite() || args.max_age < 0.0 {
        bail!("--max-age: a number of seconds, 0 or more");
    }
    Ok(Policy {
        block_on: args.block_on,
        new_tools: match args.new_tools {
            NewToolsArg::Allow => NewTools::Allow,
            NewToolsArg::Review => NewTools::Review,
            NewToolsArg::Block => NewTools::Block,
        },
        mode: match args.mode {
            GuardMode::Enforce => Mode::Enforce,
            GuardMode::Warn => Mode::Warn,
        },
        on_error: match args.on_error {
            OnErrorArg::Block => OnError::Block,
            OnErrorArg::Pass => OnError::Pass,
        },
        max_age: Duration::from_secs_f64(args.max_age),
        ..Policy::default()
    })
}

/// `guard --listen`: the Streamable HTTP form.
fn run_http(args: &GuardArgs, listen: std::net::SocketAddr) -> Result<Outcome> {
    if !listen.ip().is_loopback() {
        bail!(
            "--listen {listen}: the guard serves loopback addresses only (it has no authentication of its own)"
        );
    }
    let config = if args.config.path.exists() {
        Some(Config::load(&args.config.path)?)
    } else {
        None
    };
    let configured = args
        .server
        .as_ref()
        .and_then(|s| config.as_ref().and_then(|c| c.servers.get(s)));
    // What to say when the upstream asks for an authorization the guard
    // has no way to obtain.
    let unauthorized_hint = match (&args.upstream, configured) {
        (Some(_), Some(_)) => Some(
            "--upstream replaces the configured server's address and authorization: \
             drop --upstream to have the guard authorize upstream"
                .to_owned(),
        ),
        (Some(_), None) => Some(
            "name the server in plumbline.toml and run the guard with --server NAME (it then \
             authorizes upstream, with the tokens `plumbline login NAME` keeps or a client's \
             credentials)"
                .to_owned(),
        ),
        (None, _) => None,
    };
    let (upstream, headers, upstream_auth) = match (&args.upstream, configured) {
        (Some(url), _) => (url.clone(), Vec::new(), None),
        (None, Some(c)) => match c
            .spec_known_from_env_as(args.server.as_deref().unwrap_or_default())?
            .0
        {
            ServerSpec::Http(h) | ServerSpec::Sse(h) => (h.url, h.headers, h.auth),
            ServerSpec::Stdio(_) => bail!(
                "{:?} is a stdio server: run `plumbline guard --server NAME` without --listen",
                args.server.as_deref().unwrap_or_default()
            ),
        },
        (None, None) => {
            bail!("--listen needs --upstream URL, or --server NAME of a configured HTTP server")
        }
    };
    let server = args.server.clone().unwrap_or_else(|| upstream.clone());
    let (baseline, lock_taxonomy) = baseline_for(args, &server)?;
    let store_is_baseline = lock_taxonomy.is_none();
    let identity = match configured {
        Some(c) => c.identity(),
        None => serde_json::json!({
            "transport": "http",
            "url": plumbline_base::redact::redact_url(&upstream),
            "headers": Vec::<String>::new(),
        }),
    };
    let normalize = match configured {
        Some(c) => c.normalizer()?.map(std::sync::Arc::new),
        None => None,
    };
    let taxonomy = args
        .taxonomy
        .taxonomy
        .or(lock_taxonomy)
        .or(config.as_ref().and_then(|c| c.taxonomy))
        .unwrap_or_default();
    let limits = match &config {
        Some(c) => c.limits.limits()?,
        None => Default::default(),
    };
    let recorder = HistoryRecorder::unless_off(
        args,
        identity,
        normalize,
        taxonomy,
        config.as_ref(),
        store_is_baseline,
    );
    let listen_token = match &args.listen_token {
        None => {
            if !headers.is_empty() || upstream_auth.is_some() {
                eprintln!(
                    "plumbline guard: warning: without --listen-token, any local user can send requests through this guard with the upstream credentials it adds"
                );
            }
            None
        }
        Some(reference) => Some(listen_token(reference)?),
    };
    let metrics = std::sync::Arc::new(plumbline_guard::Metrics::default());
    let options = plumbline_guard::http::Options {
        listen_token,
        server: server.clone(),
        upstream,
        upstream_headers: headers,
        upstream_auth,
        unauthorized_hint,
        policy: policy_of(args, config.as_ref(), &server)?,
        secrets: Some(secret_watch(&[])),
        classifier: Classifier::for_taxonomy(taxonomy),
        limits,
        metrics: std::sync::Arc::clone(&metrics),
    };
    let runtime = crate::commands::runtime()?;
    let counters = runtime.block_on(async {
        serve_metrics(args, &metrics, &server).await?;
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("listening on {listen}"))?;
        eprintln!(
            "plumbline guard: listening on http://{}/mcp for {}",
            listener.local_addr()?,
            for_terminal(&server, false)
        );
        let stop = async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
            }
        };
        plumbline_guard::http::serve(options, baseline, recorder, listener, stop).await
    })?;
    eprintln!(
        "plumbline guard: {}: stopped; {} judged, {} withheld, {} refused, {} dropped",
        for_terminal(&server, false),
        crate::gate::plural(counters.listings as usize, "listing"),
        crate::gate::plural(counters.withheld as usize, "tool"),
        crate::gate::plural(counters.refused_calls as usize, "call"),
        crate::gate::plural(counters.dropped as usize, "message"),
    );
    Ok(Outcome::Clean)
}

/// `--listen-token ${NAME}`: the token, from the environment.
fn listen_token(reference: &str) -> Result<String> {
    let name = reference
        .strip_prefix("${")
        .and_then(|r| r.strip_suffix('}'))
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
        .with_context(|| {
            "--listen-token: name an environment variable as ${NAME} (quoted for the shell); a token written on the command line is visible to every local user"
        })?;
    match std::env::var(name) {
        Ok(t) if !t.trim().is_empty() => Ok(t.trim().to_owned()),
        _ => bail!("--listen-token: ${{{name}}} is not set or empty"),
    }
}

/// With --metrics-listen: `/metrics` on that loopback address, said on
/// stderr.
async fn serve_metrics(
    args: &GuardArgs,
    metrics: &std::sync::Arc<plumbline_guard::Metrics>,
    server: &str,
) -> Result<()> {
    let Some(addr) = args.metrics_listen else {
        return Ok(());
    };
    if !addr.ip().is_loopback() {
        bail!("--metrics-listen {addr}: loopback addresses only");
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("listening on {addr}"))?;
    eprintln!(
        "plumbline guard: metrics on http://{}/metrics",
        listener.local_addr()?
    );
    let (metrics, server) = (std::sync::Arc::clone(metrics), server.to_owned());
    tokio::spawn(async move {
        if let Err(e) = plumbline_guard::serve_metrics(listener, metrics, server).await {
            eprintln!("plumbline guard: the metrics address stopped: {e:#}");
        }
    });
    Ok(())
}
