//! The worker of each server: connects, lists, and reports each listing
//! to the loop that owns the store; keeps a session open where the server
//! announces `list_changed`.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use plumbline_base::redact::Known;
use plumbline_config::{Config, ServerConfig};
use plumbline_history::time::now_ms;
use plumbline_mcp::{HttpClient, Limits, Session};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::metrics::Metrics;
use crate::observe::Collected;
use crate::schedule::{Jitter, Schedule};

/// A watcher holds a connection per server that keeps its session open;
/// the usual soft limit of 1,024 descriptors is too few for a thousand.
pub(crate) fn raise_open_file_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        if soft < hard {
            let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
        }
    }
}

/// What every worker shares.
pub(crate) struct WorkerContext {
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
    pub(crate) fn new(
        config: &Config,
        tx: mpsc::Sender<Collected>,
        metrics: Arc<Metrics>,
    ) -> Result<WorkerContext> {
        let limits = config.limits.limits()?;
        Ok(WorkerContext {
            http: HttpClient::new(&limits)
                .context("building the HTTP client")?
                .counting_resumptions_in(metrics.stream_resumptions()),
            limits,
            gate: Semaphore::new(config.watch.concurrency.unwrap_or(16).max(1)),
            tx,
            metrics,
        })
    }
}

/// One server's worker task.
pub(crate) struct Worker {
    pub(crate) server: ServerConfig,
    pub(crate) schedule: Schedule,
    task: JoinHandle<()>,
}

impl Worker {
    pub(crate) fn spawn(
        name: &str,
        server: &ServerConfig,
        schedule: Schedule,
        due: Instant,
        ctx: &Arc<WorkerContext>,
    ) -> Worker {
        let jitter = Jitter::seeded(name);
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
    pub(crate) async fn stop(self) {
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
    // Checked when the configuration was loaded.
    let normalize = server.normalizer().ok().flatten().map(Arc::new);
    let mut failures = 0u32;
    let mut quick_drops = 0u32;
    loop {
        tokio::time::sleep_until(due).await;
        let (mut collected, session, known) =
            connect_and_list(&name, &server, &identity, &ctx).await;
        collected.normalize = normalize.clone();
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
            let Ok(mut listing) = listed else { break };
            plumbline_config::redact_listing(&known, &mut listing);
            let collected = Collected {
                server: name.clone(),
                identity: identity.clone(),
                started_at_ms,
                finished_at_ms: now_ms(),
                result: Ok(listing),
                normalize: normalize.clone(),
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
        tracing::info!(
            server = %crate::log_text(&name),
            open_s = opened.elapsed().as_secs(),
            reconnect_in_s = wait.as_secs(),
            "session ended; reconnecting to list again"
        );
        due = Instant::now() + wait;
    }
}

/// Connects and lists once; the session stays open when that worked. Also
/// the values expanded for the server, which whatever it says is redacted
/// of.
async fn connect_and_list(
    name: &str,
    server: &ServerConfig,
    identity: &serde_json::Value,
    ctx: &WorkerContext,
) -> (Collected, Option<Session>, Known) {
    let _permit = ctx.gate.acquire().await;
    let started_at_ms = now_ms();
    let (result, session, known) = match server.spec_known_from_env_as(name) {
        Err(e) => (Err(format!("{e:#}")), None, Known::default()),
        Ok((spec, known)) => {
            // An error may quote what was expanded (a URL, a server's
            // stderr echoing its token): redacted before it is kept.
            let redact = |e: String| plumbline_config::redact_for(&known, &e);
            let (result, session) = match Session::open_with(&spec, &ctx.limits, &ctx.http).await {
                Err(e) => (Err(redact(e.to_string())), None),
                Ok(mut session) => match session.list().await {
                    Ok(mut listing) => {
                        plumbline_config::redact_listing(&known, &mut listing);
                        (Ok(listing), Some(session))
                    }
                    Err(e) => (Err(redact(session.fail(e).await.to_string())), None),
                },
            };
            (result, session, known)
        }
    };
    let collected = Collected {
        server: name.to_owned(),
        identity: identity.clone(),
        started_at_ms,
        finished_at_ms: now_ms(),
        result,
        normalize: None,
    };
    (collected, session, known)
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
