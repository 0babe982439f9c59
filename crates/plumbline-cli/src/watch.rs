//! `plumbline watch`: a long-running monitor over the configured servers.
//!
//! Each server has a worker task. It connects, lists and reports the
//! listing to the loop that owns the store; a failing server backs off
//! exponentially. When the server declares `tools.listChanged` and the
//! connection can carry the notification, the worker keeps the session open
//! and lists again as soon as a `list_changed` settles (debounced), and at
//! the interval as before; when the session drops it reconnects and lists
//! at once, since an announcement made while disconnected is lost. Other
//! servers are polled at the interval (with jitter) on a fresh connection.
//!
//! Every observation is stored and its drift graded; alerts go to the
//! configured channels through the store's outbox, so a restart neither
//! loses an undelivered alert nor sends a delivered one again. A failure
//! alerts once per streak, and a recovery once. SIGHUP reloads
//! plumbline.toml (restarting only the workers whose server changed);
//! SIGTERM and SIGINT cancel what is in flight (every started server is
//! killed and reaped) and exit 0 with nothing half-written: the store only
//! ever sees whole observations.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use plumbline_alert::{post_body, run_hook_with, Alert, AlertKind, Hook, Retry, WebhookFormat};
use plumbline_history::Grader;
use plumbline_mcp::{HttpClient, Limits, Session};
use plumbline_store::{NewAlert, ObservationId, SqliteStore, Store};
use plumbline_taxonomy::{Severity, Taxonomy};
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::cli::WatchArgs;
use crate::config::{AlertConfig, ChannelConfig, Config, ServerConfig};
use crate::exit::Outcome;
use crate::metrics::Metrics;
use crate::observe::{collect_with, record, Collected, Report};
use plumbline_store::time::now_ms;

/// A small generator for jitter; nothing here needs cryptographic quality.
struct Jitter(u64);

impl Jitter {
    fn fraction(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// One server's timing, from the configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Schedule {
    interval: Duration,
    jitter: f64,
    debounce: Duration,
}

impl Schedule {
    fn of(config: &Config, server: &str) -> Schedule {
        let seconds = config
            .watch
            .intervals
            .get(server)
            .copied()
            .or(config.watch.interval_secs)
            .unwrap_or(300.0);
        Schedule {
            interval: Duration::from_secs_f64(seconds.clamp(1.0, 86_400.0)),
            jitter: config.watch.jitter.unwrap_or(0.1).clamp(0.0, 0.5),
            debounce: Duration::from_secs_f64(
                config.watch.debounce_secs.unwrap_or(2.0).clamp(0.0, 600.0),
            ),
        }
    }

    /// When to observe again: the interval, spread by the jitter; doubled
    /// per consecutive failure, at most an hour (or the interval, if
    /// longer).
    fn next_delay(&self, failures: u32, jitter: &mut Jitter) -> Duration {
        let backed_off = self.interval.saturating_mul(1u32 << failures.min(10));
        let cap = self.interval.max(Duration::from_secs(3600));
        let d = backed_off.min(cap);
        d.mul_f64(1.0 + self.jitter * (2.0 * jitter.fraction() - 1.0))
    }
}

fn min_severity(channel: &AlertConfig) -> Result<Severity> {
    channel
        .min_severity
        .parse()
        .map_err(|e| anyhow::anyhow!("alert channel {:?}: {e}", channel.name))
}

/// The alerts one observation calls for, before channel filtering.
fn alerts_for(
    store: &SqliteStore,
    report: &Report,
    link_base: Option<&str>,
    taxonomy: Taxonomy,
) -> Result<Vec<(String, Alert)>> {
    let mut out = Vec::new();
    let previous_failed = store
        .timeline(&report.server, 2)?
        .get(1)
        .map(|o| !o.outcome.is_ok());
    let base = |kind, error: Option<String>| Alert {
        kind,
        server: report.server.clone(),
        tool: None,
        change: None,
        severity: Severity::None,
        rules: Vec::new(),
        evidence: Vec::new(),
        error,
        observation: report.observation,
        link: None,
        taxonomy: None,
    };
    if let Some(error) = &report.error {
        // Once per streak: only the first failure after a success (or the
        // very first observation) alerts.
        if previous_failed != Some(true) {
            out.push((
                "failure".to_owned(),
                base(AlertKind::Failure, Some(error.clone())),
            ));
        }
        return Ok(out);
    }
    if previous_failed == Some(true) {
        out.push(("recovery".to_owned(), base(AlertKind::Recovery, None)));
    }
    if let Some(drift) = &report.drift {
        for mut alert in Alert::from_drift(
            &report.server,
            report.observation,
            drift,
            Severity::Low,
            taxonomy,
        ) {
            alert.link = link_base.map(|b| {
                format!(
                    "{}/servers/{}/observations/{}",
                    b.trim_end_matches('/'),
                    report.server,
                    report.observation
                )
            });
            let key = format!(
                "{} {}",
                alert.tool.as_deref().unwrap_or(""),
                alert.change.as_deref().unwrap_or("")
            );
            out.push((key, alert));
        }
    }
    Ok(out)
}

/// Puts each alert in the outbox once per channel that wants it.
fn enqueue(
    store: &mut SqliteStore,
    config: &Config,
    reports: &[Report],
    taxonomy: Taxonomy,
) -> Result<usize> {
    let mut queued = 0;
    for report in reports {
        let link = config.watch.dashboard_url.as_deref();
        for (key, alert) in alerts_for(store, report, link, taxonomy)? {
            for channel in &config.alerts {
                let wanted =
                    alert.kind != AlertKind::Drift || alert.severity >= min_severity(channel)?;
                if !wanted {
                    continue;
                }
                let body = match channel.channel {
                    ChannelConfig::Slack { .. } => alert.slack_body(),
                    _ => alert.body(),
                };
                let id = store.enqueue_alert(&NewAlert {
                    server: report.server.clone(),
                    observation: ObservationId(report.observation),
                    channel: channel.name.clone(),
                    key: key.clone(),
                    body,
                    created_at_ms: now_ms(),
                })?;
                queued += usize::from(id.is_some());
            }
        }
    }
    Ok(queued)
}

/// Delivers what is pending; a failure is recorded and retried on a later
/// round, never dropped.
async fn deliver(
    store: &mut SqliteStore,
    config: &Config,
    client: &reqwest::Client,
    metrics: &Metrics,
) -> Result<()> {
    for pending in store.pending_alerts(200)? {
        let Some(channel) = config.alerts.iter().find(|c| c.name == pending.channel) else {
            store.mark_alert_failed(pending.id, "the channel is no longer configured")?;
            continue;
        };
        let result = match &channel.channel {
            ChannelConfig::Webhook { url, secret } => {
                let url = crate::config::expand_env(url)?;
                let secret = secret
                    .as_deref()
                    .map(crate::config::expand_env)
                    .transpose()?;
                post_body(
                    client,
                    &url,
                    WebhookFormat::Generic,
                    secret.as_deref().map(str::as_bytes),
                    &pending.body,
                    Retry::default(),
                )
                .await
                .map(|_| ())
            }
            ChannelConfig::Slack { url } => {
                let url = crate::config::expand_env(url)?;
                post_body(
                    client,
                    &url,
                    WebhookFormat::Slack,
                    None,
                    &pending.body,
                    Retry::default(),
                )
                .await
                .map(|_| ())
            }
            ChannelConfig::Jsonl => {
                println!("{}", String::from_utf8_lossy(&pending.body));
                Ok(())
            }
            ChannelConfig::Exec {
                command,
                env,
                inherit_env,
            } => match command.split_first() {
                Some((cmd, args)) => {
                    let own = env
                        .iter()
                        .map(|(k, v)| Ok((k.clone(), crate::config::expand_env(v)?)))
                        .collect::<Result<Vec<_>>>()?;
                    let hook = Hook {
                        command: cmd.clone(),
                        args: args.to_vec(),
                        env: plumbline_mcp::child_environment_from_ours(inherit_env, &own),
                    };
                    run_hook_with(&hook, &pending.body, Duration::from_secs(30)).await
                }
                None => Ok(()),
            },
        };
        metrics.delivered(result.is_ok());
        match result {
            Ok(()) => store.mark_alert_delivered(pending.id, now_ms())?,
            Err(e) => store.mark_alert_failed(pending.id, &e.to_string())?,
        }
    }
    Ok(())
}

/// Records collected listings, counts them, and queues their alerts.
fn process(
    store: &mut SqliteStore,
    grader: &Grader,
    config: &Config,
    metrics: &Metrics,
    collected: Vec<Collected>,
) -> Result<()> {
    for c in &collected {
        let seconds = (c.finished_at_ms - c.started_at_ms).max(0) as f64 / 1000.0;
        metrics.observed(c.result.is_ok(), seconds);
    }
    let reports = record(store, grader, collected)?;
    for r in &reports {
        if let Some(d) = r.drift.as_ref().filter(|d| d.changes().next().is_some()) {
            metrics.record_drift(d.severity);
        }
    }
    enqueue(store, config, &reports, grader.taxonomy())?;
    Ok(())
}

pub fn run(args: &WatchArgs) -> Result<Outcome> {
    crate::commands::runtime()?.block_on(watch(args))
}

/// The signals that stop the watcher.
struct Stop {
    terminate: Signal,
    interrupt: Signal,
}

impl Stop {
    async fn requested(&mut self) {
        tokio::select! {
            _ = self.terminate.recv() => {}
            _ = self.interrupt.recv() => {}
        }
    }

    /// Runs `work` unless a stop signal comes first (then `Ok(true)`).
    async fn unless<F: std::future::Future<Output = Result<()>>>(
        &mut self,
        work: F,
    ) -> Result<bool> {
        tokio::select! {
            r = work => r.map(|()| false),
            () = self.requested() => Ok(true),
        }
    }
}

async fn watch(args: &WatchArgs) -> Result<Outcome> {
    let mut config = Config::load(&args.config.path)?;
    let mut store = crate::commands::open_store(args.store.path.as_deref())?;
    let mut grader = Grader::new(config.taxonomy(args.taxonomy.taxonomy));
    let client = plumbline_alert::client().context("building the HTTP client")?;
    let mut hangup = signal(SignalKind::hangup())?;
    let mut stop = Stop {
        terminate: signal(SignalKind::terminate())?,
        interrupt: signal(SignalKind::interrupt())?,
    };
    let metrics = Arc::new(Metrics::default());

    if args.once {
        let servers = config
            .servers
            .iter()
            .map(|(n, c)| (n.clone(), c.clone()))
            .collect();
        let limits = config.limits.limits()?;
        let concurrency = config.watch.concurrency.unwrap_or(16);
        let collected = tokio::select! {
            c = collect_with(servers, limits, concurrency, false) => c?,
            () = stop.requested() => return Ok(Outcome::Clean),
        };
        process(&mut store, &grader, &config, &metrics, collected)?;
        stop.unless(deliver(&mut store, &config, &client, &metrics))
            .await?;
        return Ok(Outcome::Clean);
    }

    let listen = config
        .watch
        .listen
        .clone()
        .unwrap_or_else(|| "127.0.0.1:9464".to_owned());
    if !listen.is_empty() {
        let listener = tokio::net::TcpListener::bind(&listen)
            .await
            .with_context(|| format!("serving /healthz and /metrics on {listen}"))?;
        eprintln!(
            "plumbline watch: /healthz and /metrics on http://{}",
            listener.local_addr()?
        );
        crate::metrics::serve(listener, Arc::clone(&metrics));
    }
    raise_open_file_limit();

    let (tx, mut rx) = mpsc::channel::<Collected>(256);
    let mut ctx = Arc::new(WorkerContext::new(
        &config,
        tx.clone(),
        Arc::clone(&metrics),
    )?);
    let mut workers: BTreeMap<String, Worker> = BTreeMap::new();
    for (name, server) in &config.servers {
        let schedule = Schedule::of(&config, name);
        let due = first_due(&store, name, &schedule)?;
        workers.insert(
            name.clone(),
            Worker::spawn(name, server, schedule, due, &ctx),
        );
    }
    // Alerts left undelivered by an earlier run go first.
    let mut stopping = stop
        .unless(deliver(&mut store, &config, &client, &metrics))
        .await?;
    let mut retry = tokio::time::interval(RETRY_EVERY);
    retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    retry.tick().await;
    while !stopping {
        tokio::select! {
            Some(first) = rx.recv() => {
                let mut batch = vec![first];
                while batch.len() < 64 {
                    match rx.try_recv() {
                        Ok(more) => batch.push(more),
                        Err(_) => break,
                    }
                }
                process(&mut store, &grader, &config, &metrics, batch)?;
                stopping = stop.unless(deliver(&mut store, &config, &client, &metrics)).await?;
            }
            _ = retry.tick() => {
                stopping = stop.unless(deliver(&mut store, &config, &client, &metrics)).await?;
            }
            _ = hangup.recv() => match Config::load(&args.config.path) {
                Ok(new) => {
                    if new.limits != config.limits || new.watch.concurrency != config.watch.concurrency {
                        // Every worker shares the limits and the gate.
                        ctx = Arc::new(WorkerContext::new(&new, tx.clone(), Arc::clone(&metrics))?);
                        for (_, w) in std::mem::take(&mut workers) {
                            w.stop().await;
                        }
                    }
                    let mut kept = BTreeMap::new();
                    for (name, server) in &new.servers {
                        let schedule = Schedule::of(&new, name);
                        match workers.remove(name) {
                            Some(w) if w.server == *server && w.schedule == schedule => {
                                kept.insert(name.clone(), w);
                            }
                            old => {
                                if let Some(w) = old {
                                    w.stop().await;
                                }
                                let w = Worker::spawn(name, server, schedule, Instant::now(), &ctx);
                                kept.insert(name.clone(), w);
                            }
                        }
                    }
                    for (_, w) in std::mem::replace(&mut workers, kept) {
                        w.stop().await;
                    }
                    config = new;
                    grader = Grader::new(config.taxonomy(args.taxonomy.taxonomy));
                    eprintln!("plumbline watch: reloaded {}", args.config.path.display());
                }
                Err(e) => eprintln!("plumbline watch: keeping the old configuration: {e:#}"),
            },
            () = stop.requested() => stopping = true,
        }
    }
    // Cancel what is in flight (each dropped session kills and reaps its
    // server), then keep the listings that were already complete.
    for (_, w) in workers {
        w.stop().await;
    }
    drop(ctx);
    drop(tx);
    let mut finished = Vec::new();
    while let Ok(c) = rx.try_recv() {
        finished.push(c);
    }
    if !finished.is_empty() {
        process(&mut store, &grader, &config, &metrics, finished)?;
    }
    Ok(Outcome::Clean)
}

/// How often undelivered alerts are retried when nothing else happens.
const RETRY_EVERY: Duration = Duration::from_secs(30);

/// When a server is first due: a server observed recently waits out the
/// rest of its interval instead of being observed again at once.
fn first_due(store: &SqliteStore, name: &str, schedule: &Schedule) -> Result<Instant> {
    let last = match store.timeline(name, 1) {
        Ok(timeline) => timeline.into_iter().next(),
        // Never observed: not in the store yet.
        Err(plumbline_store::StoreError::UnknownServer { .. }) => None,
        Err(e) => return Err(e.into()),
    };
    Ok(match last {
        Some(last) => {
            let age = Duration::from_millis((now_ms() - last.finished_at_ms).max(0) as u64);
            Instant::now() + schedule.interval.saturating_sub(age)
        }
        None => Instant::now(),
    })
}

/// A watcher holds a connection per server that keeps its session open;
/// the usual soft limit of 1,024 descriptors is too few for a thousand.
fn raise_open_file_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        if soft < hard {
            let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
        }
    }
}

/// What every worker shares.
struct WorkerContext {
    limits: Limits,
    /// One connection pool and TLS configuration for every HTTP session.
    http: HttpClient,
    /// Bounds the servers being connected to and listed at once (an idle
    /// open session holds no permit).
    gate: Semaphore,
    tx: mpsc::Sender<Collected>,
    metrics: Arc<Metrics>,
}

impl WorkerContext {
    fn new(
        config: &Config,
        tx: mpsc::Sender<Collected>,
        metrics: Arc<Metrics>,
    ) -> Result<WorkerContext> {
        let limits = config.limits.limits()?;
        Ok(WorkerContext {
            http: HttpClient::new(&limits).context("building the HTTP client")?,
            limits,
            gate: Semaphore::new(config.watch.concurrency.unwrap_or(16).max(1)),
            tx,
            metrics,
        })
    }
}

/// One server's worker task.
struct Worker {
    server: ServerConfig,
    schedule: Schedule,
    task: JoinHandle<()>,
}

impl Worker {
    fn spawn(
        name: &str,
        server: &ServerConfig,
        schedule: Schedule,
        due: Instant,
        ctx: &Arc<WorkerContext>,
    ) -> Worker {
        let mut seed = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(&(name, now_ms()), &mut seed);
        let jitter = Jitter(std::hash::Hasher::finish(&seed) | 1);
        let task = tokio::spawn(work(
            name.to_owned(),
            server.clone(),
            schedule,
            due,
            jitter,
            Arc::clone(ctx),
        ));
        Worker {
            server: server.clone(),
            schedule,
            task,
        }
    }

    /// Cancels the worker and waits until it is gone: its session, and a
    /// stdio server's whole process group, go with it.
    async fn stop(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

/// A session that ends sooner than this after it opened counts as a quick
/// drop: reconnecting then backs off, so a server that cannot hold a
/// session ends up polled, not hammered.
const STEADY: Duration = Duration::from_secs(60);

/// The most often a session is listed on `list_changed` alone.
const SETTLE_CAP_MIN: Duration = Duration::from_secs(5);

async fn work(
    name: String,
    server: ServerConfig,
    schedule: Schedule,
    mut due: Instant,
    mut jitter: Jitter,
    ctx: Arc<WorkerContext>,
) {
    let identity = server.identity();
    let mut failures = 0u32;
    let mut quick_drops = 0u32;
    loop {
        tokio::time::sleep_until(due).await;
        let (collected, session) = connect_and_list(&name, &server, &identity, &ctx).await;
        let ok = collected.result.is_ok();
        if ctx.tx.send(collected).await.is_err() {
            return; // the watcher is stopping
        }
        failures = if ok { 0 } else { failures + 1 };
        due = Instant::now() + schedule.next_delay(failures, &mut jitter);
        let Some(mut session) = session else {
            continue;
        };
        if !session.hears_list_changed() {
            session.close().await;
            continue;
        }
        // Keep the session: list again when the server announces a change,
        // and at the interval.
        let opened = Instant::now();
        let _open = ctx.metrics.session_open();
        loop {
            let announced = tokio::select! {
                heard = session.list_changed() => match heard {
                    Ok(()) => true,
                    Err(_) => break,
                },
                () = tokio::time::sleep_until(due) => false,
            };
            if announced && settle(&mut session, schedule.debounce).await.is_err() {
                break;
            }
            let permit = ctx.gate.acquire().await;
            let started_at_ms = now_ms();
            let listed = session.list().await;
            drop(permit);
            // A failed listing ends the session; the reconnect below lists
            // on a fresh connection and reports how that went.
            let Ok(listing) = listed else { break };
            let collected = Collected {
                server: name.clone(),
                identity: identity.clone(),
                started_at_ms,
                finished_at_ms: now_ms(),
                result: Ok(listing),
            };
            if ctx.tx.send(collected).await.is_err() {
                return;
            }
            due = Instant::now() + schedule.next_delay(0, &mut jitter);
        }
        session.close().await;
        // Reconnect and list at once: what was announced while the session
        // was down is lost. Sessions that keep dropping back off.
        quick_drops = if opened.elapsed() < STEADY {
            quick_drops + 1
        } else {
            0
        };
        let wait = if quick_drops == 0 {
            Duration::ZERO
        } else {
            Duration::from_secs(1u64 << quick_drops.min(12)).min(schedule.interval)
        };
        due = Instant::now() + wait;
    }
}

/// Connects and lists once; the session stays open when that worked.
async fn connect_and_list(
    name: &str,
    server: &ServerConfig,
    identity: &serde_json::Value,
    ctx: &WorkerContext,
) -> (Collected, Option<Session>) {
    let _permit = ctx.gate.acquire().await;
    let started_at_ms = now_ms();
    let (result, session) = match server.spec() {
        Err(e) => (Err(format!("{e:#}")), None),
        Ok(spec) => match Session::open_with(&spec, &ctx.limits, &ctx.http).await {
            Err(e) => (Err(e.to_string()), None),
            Ok(mut session) => match session.list().await {
                Ok(listing) => (Ok(listing), Some(session)),
                Err(e) => (Err(session.fail(e).await.to_string()), None),
            },
        },
    };
    let collected = Collected {
        server: name.to_owned(),
        identity: identity.clone(),
        started_at_ms,
        finished_at_ms: now_ms(),
        result,
    };
    (collected, session)
}

/// After an announcement, waits until the server has been quiet for
/// `debounce` (each further announcement restarts the wait), but no longer
/// than ten times that (at least [`SETTLE_CAP_MIN`]), so a server that
/// announces without end is still listed, just not without pause.
async fn settle(session: &mut Session, debounce: Duration) -> Result<(), plumbline_mcp::ListError> {
    let quiet = debounce.max(Duration::from_millis(100));
    let cap = Instant::now() + (debounce * 10).max(SETTLE_CAP_MIN);
    loop {
        let until = (Instant::now() + quiet).min(cap);
        match tokio::time::timeout_at(until, session.list_changed()).await {
            Err(_) => return Ok(()),
            Ok(Ok(())) if Instant::now() >= cap => return Ok(()),
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
        }
    }
}
