//! `plumbline watch`: a long-running monitor over the configured servers.
//!
//! Each server is observed every `interval_secs` (with jitter); a failing
//! server backs off exponentially. Every observation is stored and its
//! drift graded; alerts go to the configured channels through the store's
//! outbox, so a restart neither loses an undelivered alert nor sends a
//! delivered one again. A failure alerts once per streak, and a recovery
//! once. SIGHUP reloads plumbline.toml; SIGTERM and SIGINT cancel what is
//! in flight (every started server is killed and reaped) and exit 0 with
//! nothing half-written: the store only ever sees whole observations.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use plumbline_alert::{post_body, run_hook_with, Alert, AlertKind, Retry, WebhookFormat};
use plumbline_store::{NewAlert, ObservationId, SqliteStore, Store};
use plumbline_taxonomy::{Classifier, Severity};
use tokio::signal::unix::{signal, SignalKind};
use tokio::time::Instant;

use crate::cli::WatchArgs;
use crate::config::{AlertConfig, ChannelConfig, Config};
use crate::exit::Outcome;
use crate::metrics::Metrics;
use crate::observe::{collect_with, record, Report};
use crate::timefmt::now_ms;

/// A server's place in the schedule.
struct Slot {
    due: Instant,
    failures: u32,
}

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

fn interval(config: &Config) -> Duration {
    Duration::from_secs_f64(
        config
            .watch
            .interval_secs
            .unwrap_or(300.0)
            .clamp(1.0, 86_400.0),
    )
}

/// When to observe again: the interval, spread by the jitter; doubled per
/// consecutive failure, at most an hour (or the interval, if longer).
fn next_delay(config: &Config, failures: u32, jitter: &mut Jitter) -> Duration {
    let base = interval(config);
    let backed_off = base.saturating_mul(1u32 << failures.min(10));
    let cap = base.max(Duration::from_secs(3600));
    let d = backed_off.min(cap);
    let spread = config.watch.jitter.unwrap_or(0.1).clamp(0.0, 0.5);
    d.mul_f64(1.0 + spread * (2.0 * jitter.fraction() - 1.0))
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
        for mut alert in Alert::from_drift(&report.server, report.observation, drift, Severity::Low)
        {
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
fn enqueue(store: &mut SqliteStore, config: &Config, reports: &[Report]) -> Result<usize> {
    let mut queued = 0;
    for report in reports {
        for (key, alert) in alerts_for(store, report, config.watch.dashboard_url.as_deref())? {
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
            ChannelConfig::Exec { command } => match command.split_first() {
                Some((cmd, args)) => {
                    run_hook_with(cmd, args, &pending.body, Duration::from_secs(30)).await
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

pub fn run(args: &WatchArgs) -> Result<Outcome> {
    crate::commands::runtime()?.block_on(watch(args))
}

async fn watch(args: &WatchArgs) -> Result<Outcome> {
    let mut config = Config::load(&args.config.path)?;
    let mut store = crate::commands::open_store(args.store.path.as_deref())?;
    let classifier = Classifier::default();
    let client = plumbline_alert::client().context("building the HTTP client")?;
    let mut hangup = signal(SignalKind::hangup())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut jitter = Jitter(now_ms() as u64 | 1);
    let metrics = Arc::new(Metrics::default());
    // One round has nothing to report over time: --once serves nothing.
    let listen = config
        .watch
        .listen
        .clone()
        .unwrap_or_else(|| "127.0.0.1:9464".to_owned());
    if !args.once && !listen.is_empty() {
        let listener = tokio::net::TcpListener::bind(&listen)
            .await
            .with_context(|| format!("serving /healthz and /metrics on {listen}"))?;
        eprintln!(
            "plumbline watch: /healthz and /metrics on http://{}",
            listener.local_addr()?
        );
        crate::metrics::serve(listener, Arc::clone(&metrics));
    }
    let mut slots: HashMap<String, Slot> = HashMap::new();
    // Carry on from the store: a server observed recently waits out the
    // rest of its interval instead of being observed again at once.
    for name in config.servers.keys() {
        let last = match store.timeline(name, 1) {
            Ok(timeline) => timeline.into_iter().next(),
            // Never observed: not in the store yet.
            Err(plumbline_store::StoreError::UnknownServer { .. }) => None,
            Err(e) => return Err(e.into()),
        };
        let due = match last {
            Some(last) => {
                let age = Duration::from_millis((now_ms() - last.finished_at_ms).max(0) as u64);
                Instant::now() + interval(&config).saturating_sub(age)
            }
            None => Instant::now(),
        };
        let due = if args.once { Instant::now() } else { due };
        slots.insert(name.clone(), Slot { due, failures: 0 });
    }
    loop {
        let now = Instant::now();
        let due: Vec<(String, crate::config::ServerConfig)> = config
            .servers
            .iter()
            .filter(|(n, _)| slots.get(*n).is_none_or(|s| s.due <= now))
            .map(|(n, c)| (n.clone(), c.clone()))
            .collect();
        if !due.is_empty() {
            let limits = config.limits.limits()?;
            let concurrency = config.watch.concurrency.unwrap_or(16);
            let collected = tokio::select! {
                c = collect_with(due, limits, concurrency, false) => c?,
                _ = terminate.recv() => return Ok(Outcome::Clean),
                _ = interrupt.recv() => return Ok(Outcome::Clean),
            };
            for c in &collected {
                let seconds = (c.finished_at_ms - c.started_at_ms).max(0) as f64 / 1000.0;
                metrics.observed(c.result.is_ok(), seconds);
            }
            let reports = record(&mut store, &classifier, collected)?;
            for r in &reports {
                if let Some(d) = r.drift.as_ref().filter(|d| d.changes().next().is_some()) {
                    metrics.record_drift(d.severity);
                }
            }
            for r in &reports {
                let slot = slots.entry(r.server.clone()).or_insert(Slot {
                    due: now,
                    failures: 0,
                });
                slot.failures = if r.failed() { slot.failures + 1 } else { 0 };
                slot.due = Instant::now() + next_delay(&config, slot.failures, &mut jitter);
            }
            enqueue(&mut store, &config, &reports)?;
        }
        deliver(&mut store, &config, &client, &metrics).await?;
        if args.once {
            return Ok(Outcome::Clean);
        }
        let wake = slots
            .values()
            .map(|s| s.due)
            .min()
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(60))
            .max(Instant::now() + Duration::from_millis(100));
        tokio::select! {
            _ = tokio::time::sleep_until(wake) => {}
            _ = hangup.recv() => {
                match Config::load(&args.config.path) {
                    Ok(c) => {
                        for name in c.servers.keys() {
                            slots.entry(name.clone()).or_insert(Slot { due: Instant::now(), failures: 0 });
                        }
                        slots.retain(|n, _| c.servers.contains_key(n));
                        config = c;
                        eprintln!("plumbline watch: reloaded {}", args.config.path.display());
                    }
                    Err(e) => eprintln!("plumbline watch: keeping the old configuration: {e:#}"),
                }
            }
            _ = terminate.recv() => return Ok(Outcome::Clean),
            _ = interrupt.recv() => return Ok(Outcome::Clean),
        }
    }
}
