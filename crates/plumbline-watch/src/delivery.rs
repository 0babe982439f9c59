//! Alert delivery: one task per channel, each with its own store
//! connection, so that a dead or slow receiver never delays another
//! channel, and never the loop that records observations.
//!
//! A channel's task takes its due alerts from the outbox in order and
//! makes one attempt at each, bounded by the delivery timeout. A failed
//! attempt is kept with its error and the alert's next attempt moves out
//! by an exponential backoff with jitter (in the outbox, so a restart
//! keeps the schedule); past its bound of attempts the alert is marked
//! failed, logged and counted, and never tried again.

use plumbline_history::Location;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use plumbline_alert::{post_body, run_hook, Hook, WebhookFormat};
use plumbline_config::{AlertConfig, Config, Target};
use plumbline_history::time::now_ms;
use plumbline_history::{History, OutboxAlert};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::metrics::Metrics;
use crate::schedule::Jitter;

/// How a channel retries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Policy {
    /// Attempts before an alert is marked failed.
    pub(crate) attempts: u32,
    /// The wait after the first failed attempt; doubled after each.
    pub(crate) backoff: Duration,
    /// How long one attempt may take.
    pub(crate) timeout: Duration,
}

/// The longest wait between two attempts at one alert.
const MAX_BACKOFF: Duration = Duration::from_secs(3600);

/// How often an idle channel looks at the outbox even when not woken
/// (another watcher may share the store).
const IDLE_POLL: Duration = Duration::from_secs(30);

impl Policy {
    pub(crate) fn of(config: &Config) -> Policy {
        let w = &config.watch;
        Policy {
            attempts: w.alert_attempts.unwrap_or(8).clamp(1, 100),
            backoff: Duration::from_secs_f64(
                w.alert_backoff_secs.unwrap_or(5.0).clamp(0.01, 3600.0),
            ),
            timeout: Duration::from_secs_f64(
                w.alert_timeout_secs.unwrap_or(10.0).clamp(0.1, 600.0),
            ),
        }
    }

    /// The wait after the `failed`-th failed attempt (1 for the first):
    /// the backoff doubled per earlier failure, at most an hour, spread by
    /// ±25% so that alerts failing together do not retry together.
    pub(crate) fn retry_after(&self, failed: u32, jitter: &mut Jitter) -> Duration {
        let doubled = self
            .backoff
            .saturating_mul(1u32 << failed.saturating_sub(1).min(20));
        doubled
            .min(MAX_BACKOFF)
            .mul_f64(0.75 + 0.5 * jitter.fraction())
    }
}

/// The delivery tasks, one per configured channel.
pub(crate) struct Channels {
    store: Location,
    client: reqwest::Client,
    metrics: Arc<Metrics>,
    tasks: BTreeMap<String, ChannelTask>,
}

struct ChannelTask {
    config: AlertConfig,
    policy: Policy,
    wake: Arc<Notify>,
    task: JoinHandle<()>,
}

impl Channels {
    pub(crate) fn new(store: Location, client: reqwest::Client, metrics: Arc<Metrics>) -> Channels {
        Channels {
            store,
            client,
            metrics,
            tasks: BTreeMap::new(),
        }
    }

    /// Runs a task for each channel of `config`: a channel whose settings
    /// did not change keeps its task; the others are (re)started, and the
    /// tasks of channels no longer configured stop.
    pub(crate) async fn configure(&mut self, config: &Config) -> anyhow::Result<()> {
        let policy = Policy::of(config);
        let mut kept = BTreeMap::new();
        let mut targets = Vec::new();
        for channel in &config.alerts {
            // Expanded here, checked at load: an error names the channel.
            let target = channel
                .target_from_env()
                .map_err(|e| anyhow::anyhow!("alert channel {:?}: {e:#}", channel.name))?;
            targets.push((channel, target));
        }
        for (channel, target) in targets {
            match self.tasks.remove(&channel.name) {
                Some(t) if t.config == *channel && t.policy == policy => {
                    kept.insert(channel.name.clone(), t);
                }
                old => {
                    if let Some(t) = old {
                        t.stop().await;
                    }
                    let wake = Arc::new(Notify::new());
                    let task = tokio::spawn(run(
                        channel.name.clone(),
                        target,
                        policy,
                        self.store.clone(),
                        self.client.clone(),
                        Arc::clone(&self.metrics),
                        Arc::clone(&wake),
                    ));
                    kept.insert(
                        channel.name.clone(),
                        ChannelTask {
                            config: channel.clone(),
                            policy,
                            wake,
                            task,
                        },
                    );
                }
            }
        }
        for (_, t) in std::mem::replace(&mut self.tasks, kept) {
            t.stop().await;
        }
        Ok(())
    }

    /// Tells a channel's task that it has new alerts.
    pub(crate) fn wake(&self, channel: &str) {
        if let Some(t) = self.tasks.get(channel) {
            t.wake.notify_one();
        }
    }

    /// Stops every task; an attempt in flight is abandoned (the alert
    /// stays pending and is tried again by the next run).
    pub(crate) async fn stop(self) {
        for (_, t) in self.tasks {
            t.stop().await;
        }
    }

    /// Makes every due alert's next attempt, channels in parallel, and
    /// returns when all are done (for `watch --once`).
    pub(crate) async fn deliver_due_once(
        config: &Config,
        store: Location,
        client: reqwest::Client,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<()> {
        let policy = Policy::of(config);
        let mut tasks = tokio::task::JoinSet::new();
        for channel in &config.alerts {
            let target = channel
                .target_from_env()
                .map_err(|e| anyhow::anyhow!("alert channel {:?}: {e:#}", channel.name))?;
            let mut delivery = Delivery::open(
                channel.name.clone(),
                target,
                policy,
                &store,
                client.clone(),
                Arc::clone(&metrics),
            )?;
            tasks.spawn(async move { delivery.round().await });
        }
        while let Some(done) = tasks.join_next().await {
            done??;
        }
        Ok(())
    }
}

impl ChannelTask {
    async fn stop(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

/// How long a claimed alert stays claimed beyond its attempt's timeout.
const CLAIM_MARGIN_MS: i64 = 30_000;

/// One channel's delivery, over its own store connection.
struct Delivery {
    channel: String,
    /// The history's id, in every delivery id.
    history: String,
    target: Target,
    policy: Policy,
    store: History,
    client: reqwest::Client,
    metrics: Arc<Metrics>,
    jitter: Jitter,
}

impl Delivery {
    fn open(
        channel: String,
        target: Target,
        policy: Policy,
        store: &Location,
        client: reqwest::Client,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<Delivery> {
        let store = History::open(store)
            .map_err(|e| anyhow::anyhow!("alert channel {channel:?}: opening the store: {e}"))?;
        let history = store.history_id().map_err(|e| {
            anyhow::anyhow!("alert channel {channel:?}: reading the history's id: {e}")
        })?;
        Ok(Delivery {
            history,
            jitter: Jitter::seeded(&channel),
            channel,
            target,
            policy,
            store,
            client,
            metrics,
        })
    }

    /// One attempt at each alert due now (at most a batch), in order.
    /// Each is claimed before it is sent, so that no watcher sharing the
    /// history sends it meanwhile; a claim outlasts the attempt, and one
    /// this watcher dies holding runs out by itself.
    async fn round(&mut self) -> anyhow::Result<()> {
        let claim = self.policy.timeout.as_millis() as i64 + CLAIM_MARGIN_MS;
        for _ in 0..64 {
            let Some(alert) = self
                .store
                .claim_due_alerts(&self.channel, now_ms(), claim, 1)?
                .pop()
            else {
                break;
            };
            self.attempt(alert).await?;
        }
        Ok(())
    }

    /// The wait until this channel's next alert is due, at most
    /// [`IDLE_POLL`].
    fn idle(&self) -> anyhow::Result<Duration> {
        Ok(match self.store.next_alert_due(&self.channel)? {
            Some(at) => {
                Duration::from_millis((at - now_ms()).clamp(0, IDLE_POLL.as_millis() as i64) as u64)
            }
            None => IDLE_POLL,
        })
    }

    async fn attempt(&mut self, alert: OutboxAlert) -> anyhow::Result<()> {
        let started = tokio::time::Instant::now();
        let result = send(
            &self.target,
            &self.history,
            &alert,
            &self.client,
            self.policy.timeout,
        )
        .await;
        let elapsed_ms = started.elapsed().as_millis() as u64;
        let attempt = alert.attempts + 1;
        let at = now_ms();
        match result {
            Ok(()) => {
                self.store.mark_alert_delivered(alert.id, at)?;
                self.metrics.delivered(true);
                tracing::info!(
                    channel = %self.channel,
                    server = %alert.server,
                    observation = alert.observation.0,
                    alert = %alert.key,
                    attempt,
                    elapsed_ms,
                    "alert delivered"
                );
            }
            Err(error) => {
                let error = match self.target.known() {
                    Some(known) => known.redact(&error).into_owned(),
                    None => error,
                };
                self.metrics.delivered(false);
                if attempt >= self.policy.attempts {
                    self.store.give_up_alert(alert.id, &error, at)?;
                    self.metrics.abandoned();
                    tracing::error!(
                        channel = %self.channel,
                        server = %alert.server,
                        observation = alert.observation.0,
                        alert = %alert.key,
                        attempts = attempt,
                        %error,
                        "alert failed: given up after its last attempt"
                    );
                } else {
                    let wait = self.policy.retry_after(attempt, &mut self.jitter);
                    let retry_at = at + wait.as_millis() as i64;
                    self.store.retry_alert(alert.id, &error, retry_at)?;
                    tracing::warn!(
                        channel = %self.channel,
                        server = %alert.server,
                        observation = alert.observation.0,
                        alert = %alert.key,
                        attempt,
                        retry_in_s = wait.as_secs(),
                        %error,
                        "alert delivery failed; will retry"
                    );
                }
            }
        }
        Ok(())
    }
}

/// A channel's task: deliver what is due, then sleep until the next is
/// due, new alerts arrive, or [`IDLE_POLL`] passes. A store error is
/// logged and retried after a pause; the task never ends by itself.
async fn run(
    channel: String,
    target: Target,
    policy: Policy,
    store: Location,
    client: reqwest::Client,
    metrics: Arc<Metrics>,
    wake: Arc<Notify>,
) {
    let mut delivery = loop {
        match Delivery::open(
            channel.clone(),
            target.clone(),
            policy,
            &store,
            client.clone(),
            Arc::clone(&metrics),
        ) {
            Ok(d) => break d,
            Err(e) => {
                tracing::error!(channel = %channel, error = %format!("{e:#}"), "alert delivery cannot start");
                tokio::time::sleep(IDLE_POLL).await;
            }
        }
    };
    loop {
        let wait = match delivery.round().await.and_then(|()| delivery.idle()) {
            Ok(wait) => wait,
            Err(e) => {
                tracing::error!(channel = %channel, error = %format!("{e:#}"), "alert delivery");
                Duration::from_secs(5)
            }
        };
        tokio::select! {
            () = wake.notified() => {}
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// One delivery attempt of `body` to `target`.
async fn send(
    target: &Target,
    history: &str,
    alert: &OutboxAlert,
    client: &reqwest::Client,
    timeout: Duration,
) -> Result<(), String> {
    let body = &alert.body;
    let delivery =
        plumbline_alert::delivery_id(history, alert.observation.0, &alert.channel, &alert.key);
    match target {
        Target::Webhook { url, secret, .. } => post_body(
            client,
            url,
            WebhookFormat::Generic,
            secret.as_deref().map(str::as_bytes),
            Some(&delivery),
            body,
            timeout,
        )
        .await
        .map_err(|e| e.to_string()),
        Target::Slack { url, .. } => post_body(
            client,
            url,
            WebhookFormat::Slack,
            None,
            Some(&delivery),
            body,
            timeout,
        )
        .await
        .map_err(|e| e.to_string()),
        Target::Jsonl => {
            use std::io::Write as _;
            let mut out = std::io::stdout().lock();
            out.write_all(body)
                .and_then(|()| out.write_all(b"\n"))
                .and_then(|()| out.flush())
                .map_err(|e| format!("standard output: {e}"))
        }
        Target::Exec {
            command,
            args,
            env,
            inherit_env,
            ..
        } => {
            let hook = Hook {
                command: command.clone(),
                args: args.clone(),
                env: plumbline_mcp::child_environment_from_ours(inherit_env, env),
            };
            run_hook(&hook, body, timeout)
                .await
                .map_err(|e| e.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_exponentially_with_jitter_up_to_an_hour() {
        let p = Policy {
            attempts: 8,
            backoff: Duration::from_secs(5),
            timeout: Duration::from_secs(10),
        };
        let mut j = Jitter::seeded("t");
        for (failed, base) in [(1, 5.0), (2, 10.0), (3, 20.0), (6, 160.0)] {
            for _ in 0..100 {
                let d = p.retry_after(failed, &mut j).as_secs_f64();
                assert!(d >= base * 0.75 && d <= base * 1.25, "{failed}: {d}");
            }
        }
        let capped = p.retry_after(40, &mut j).as_secs_f64();
        assert!((2700.0..=4500.0).contains(&capped), "{capped}");
    }
}
