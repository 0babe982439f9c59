//! The watcher's `/healthz` and Prometheus `/metrics`, on a loopback
//! address by default.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::routing::get;
use axum::Router;
use plumbline_taxonomy::Severity;

/// Upper bounds (seconds) of the observation-duration histogram.
const BUCKETS: [f64; 9] = [0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

/// Counters the watcher updates; read by `/metrics`.
#[derive(Default)]
pub struct Metrics {
    observations_ok: AtomicU64,
    observations_failed: AtomicU64,
    drift: [AtomicU64; 5],
    alerts_delivered: AtomicU64,
    alerts_failed: AtomicU64,
    duration_buckets: [AtomicU64; BUCKETS.len()],
    duration_count: AtomicU64,
    duration_sum_ms: AtomicU64,
    sessions_open: AtomicU64,
    /// Streams resumed after their server ended them, counted by the MCP
    /// client ([`plumbline_mcp::HttpClient::counting_resumptions_in`]).
    stream_resumptions: std::sync::Arc<AtomicU64>,
    alerts_abandoned: AtomicU64,
    outbox_pending: AtomicU64,
    outbox_failed: AtomicU64,
    /// When the loop that records observations last ran (Unix ms; 0:
    /// not started).
    beat_ms: AtomicU64,
    /// The servers this watcher holds, with their lease's epoch.
    leases: std::sync::Mutex<Vec<(String, i64)>>,
    lease_claims_failed: AtomicU64,
    /// Listings not recorded because their lease was lost meanwhile.
    lease_lost: AtomicU64,
    /// Why the store cannot be written now; `None` while it can.
    store_down: std::sync::Mutex<Option<String>>,
    store_errors: AtomicU64,
    /// Listings kept in memory until the store can record them.
    listings_waiting: AtomicU64,
    /// Listings dropped because too many were waiting.
    listings_dropped: AtomicU64,
    /// Statements this process has sent to its store
    /// ([`plumbline_history::History::statements`]).
    store_statements: AtomicU64,
}

/// How long the recording loop may go without running before `/healthz`
/// reports the watcher unhealthy.
pub const LAG_BOUND: std::time::Duration = std::time::Duration::from_secs(60);

/// Counts one open session while it lives.
pub struct OpenSession<'a>(&'a AtomicU64);

impl Drop for OpenSession<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Metrics {
    pub fn observed(&self, ok: bool, seconds: f64) {
        let counter = if ok {
            &self.observations_ok
        } else {
            &self.observations_failed
        };
        counter.fetch_add(1, Ordering::Relaxed);
        for (i, bound) in BUCKETS.iter().enumerate() {
            if seconds <= *bound {
                self.duration_buckets[i].fetch_add(1, Ordering::Relaxed);
            }
        }
        self.duration_count.fetch_add(1, Ordering::Relaxed);
        self.duration_sum_ms
            .fetch_add((seconds * 1000.0) as u64, Ordering::Relaxed);
    }

    /// An observation whose drift's worst severity is `s`.
    pub fn record_drift(&self, s: Severity) {
        self.drift[s.rank() as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The counter the HTTP client adds each stream resumption to.
    pub fn stream_resumptions(&self) -> std::sync::Arc<AtomicU64> {
        std::sync::Arc::clone(&self.stream_resumptions)
    }

    /// A session kept open to hear `list_changed`, until the guard drops.
    pub fn session_open(&self) -> OpenSession<'_> {
        self.sessions_open.fetch_add(1, Ordering::Relaxed);
        OpenSession(&self.sessions_open)
    }

    pub fn delivered(&self, ok: bool) {
        let c = if ok {
            &self.alerts_delivered
        } else {
            &self.alerts_failed
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// An alert given up on after its last attempt.
    pub fn abandoned(&self) {
        self.alerts_abandoned.fetch_add(1, Ordering::Relaxed);
    }

    /// Statements sent to the store so far (read from the store's count).
    pub fn statements(&self, n: u64) {
        self.store_statements.store(n, Ordering::Relaxed);
    }

    /// The outbox as the store holds it: pending and failed alerts.
    pub fn outbox(&self, pending: u64, failed: u64) {
        self.outbox_pending.store(pending, Ordering::Relaxed);
        self.outbox_failed.store(failed, Ordering::Relaxed);
    }

    /// The leases this watcher holds now.
    pub fn leases(&self, held: &std::collections::BTreeMap<String, plumbline_history::LeaseToken>) {
        let held = held.iter().map(|(s, t)| (s.clone(), t.epoch)).collect();
        *self
            .leases
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = held;
    }

    /// A claim of the leases failed (the store could not be reached).
    pub fn lease_claim_failed(&self) {
        self.lease_claims_failed.fetch_add(1, Ordering::Relaxed);
    }

    /// `n` listings were not recorded: their lease was lost meanwhile.
    pub fn lease_lost(&self, n: u64) {
        self.lease_lost.fetch_add(n, Ordering::Relaxed);
    }

    /// The store could not be written: `/healthz` says so until
    /// [`Metrics::store_up`].
    pub fn store_down(&self, error: &str) {
        self.store_errors.fetch_add(1, Ordering::Relaxed);
        *self
            .store_down
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(error.to_owned());
    }

    /// The store was written again.
    pub fn store_up(&self) {
        *self
            .store_down
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }

    /// Why the store cannot be written now, if it cannot.
    pub fn store_problem(&self) -> Option<String> {
        self.store_down
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// How many listings wait for the store, and how many were dropped.
    pub fn waiting(&self, waiting: u64, dropped: u64) {
        self.listings_waiting.store(waiting, Ordering::Relaxed);
        self.listings_dropped.fetch_add(dropped, Ordering::Relaxed);
    }

    /// The recording loop ran at `now_ms`.
    pub fn beat(&self, now_ms: i64) {
        self.beat_ms.store(now_ms.max(0) as u64, Ordering::Relaxed);
    }

    /// `None` when healthy, else how long the recording loop has not run.
    pub fn lag(&self, now_ms: i64) -> Option<std::time::Duration> {
        let beat = self.beat_ms.load(Ordering::Relaxed);
        if beat == 0 {
            return None;
        }
        let lag = std::time::Duration::from_millis((now_ms.max(0) as u64).saturating_sub(beat));
        (lag > LAG_BOUND).then_some(lag)
    }

    /// The Prometheus text exposition format.
    pub fn render(&self) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut s = String::new();
        family(
            &mut s,
            "plumbline_observations_total",
            "counter",
            "Observations by outcome.",
            &[
                ("{outcome=\"ok\"}".into(), get(&self.observations_ok)),
                (
                    "{outcome=\"failed\"}".into(),
                    get(&self.observations_failed),
                ),
            ],
        );
        let drift: Vec<(String, u64)> = Severity::ALL
            .iter()
            .map(|sev| {
                (
                    format!("{{severity=\"{sev}\"}}"),
                    get(&self.drift[sev.rank() as usize]),
                )
            })
            .collect();
        family(
            &mut s,
            "plumbline_drift_total",
            "counter",
            "Observations with drift, by worst severity.",
            &drift,
        );
        family(
            &mut s,
            "plumbline_store_statements_total",
            "counter",
            "Statements sent to the store (PostgreSQL: round trips, BEGIN and COMMIT included; SQLite: statements run).",
            &[(String::new(), get(&self.store_statements))],
        );
        family(
            &mut s,
            "plumbline_alert_deliveries_total",
            "counter",
            "Alert delivery attempts by result.",
            &[
                ("{result=\"delivered\"}".into(), get(&self.alerts_delivered)),
                ("{result=\"failed\"}".into(), get(&self.alerts_failed)),
            ],
        );
        family(
            &mut s,
            "plumbline_alerts_abandoned_total",
            "counter",
            "Alerts given up on after their last delivery attempt.",
            &[(String::new(), get(&self.alerts_abandoned))],
        );
        family(
            &mut s,
            "plumbline_alerts",
            "gauge",
            "Alerts in the outbox by state: pending delivery, or failed (given up on, kept).",
            &[
                ("{state=\"pending\"}".into(), get(&self.outbox_pending)),
                ("{state=\"failed\"}".into(), get(&self.outbox_failed)),
            ],
        );
        family(
            &mut s,
            "plumbline_sessions_open",
            "gauge",
            "Sessions kept open to hear tools/list_changed.",
            &[(String::new(), get(&self.sessions_open))],
        );
        family(
            &mut s,
            "plumbline_stream_resumptions_total",
            "counter",
            "SSE streams resumed (after the server's retry, with Last-Event-ID) when a server ended them.",
            &[(String::new(), get(&self.stream_resumptions))],
        );
        let leases = self
            .leases
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        family(
            &mut s,
            "plumbline_leases_held",
            "gauge",
            "Servers this watcher holds the lease of (and so observes).",
            &[(String::new(), leases.len() as u64)],
        );
        let epochs: Vec<(String, u64)> = leases
            .iter()
            .map(|(server, epoch)| {
                (
                    format!("{{server=\"{}\"}}", label_value(server)),
                    (*epoch).max(0) as u64,
                )
            })
            .collect();
        family(
            &mut s,
            "plumbline_lease_epoch",
            "gauge",
            "The epoch of each lease this watcher holds, by server.",
            &epochs,
        );
        family(
            &mut s,
            "plumbline_lease_claims_failed_total",
            "counter",
            "Lease claims that failed (the store could not be reached).",
            &[(String::new(), get(&self.lease_claims_failed))],
        );
        family(
            &mut s,
            "plumbline_lease_lost_listings_total",
            "counter",
            "Listings not recorded because another watcher took their lease meanwhile.",
            &[(String::new(), get(&self.lease_lost))],
        );
        family(
            &mut s,
            "plumbline_store_up",
            "gauge",
            "Whether the store could be written at the last attempt (1) or not (0).",
            &[(String::new(), u64::from(self.store_problem().is_none()))],
        );
        family(
            &mut s,
            "plumbline_store_errors_total",
            "counter",
            "Failed attempts to write the store (the listings are kept and tried again).",
            &[(String::new(), get(&self.store_errors))],
        );
        family(
            &mut s,
            "plumbline_listings_waiting",
            "gauge",
            "Listings kept in memory until the store can record them.",
            &[(String::new(), get(&self.listings_waiting))],
        );
        family(
            &mut s,
            "plumbline_listings_dropped_total",
            "counter",
            "Listings dropped because too many waited for the store.",
            &[(String::new(), get(&self.listings_dropped))],
        );
        let name = "plumbline_observation_duration_seconds";
        let count = get(&self.duration_count);
        let mut buckets: Vec<(String, u64)> = BUCKETS
            .iter()
            .zip(&self.duration_buckets)
            .map(|(bound, n)| (format!("_bucket{{le=\"{bound}\"}}"), get(n)))
            .collect();
        buckets.push(("_bucket{le=\"+Inf\"}".into(), count));
        family(
            &mut s,
            name,
            "histogram",
            "Time to observe one server.",
            &buckets,
        );
        let _ = writeln!(
            s,
            "{name}_sum {}",
            get(&self.duration_sum_ms) as f64 / 1000.0
        );
        let _ = writeln!(s, "{name}_count {count}");
        s
    }
}

/// One metric family: its help and type lines, then each sample as the
/// name followed by its suffix (labels, or `_bucket{…}`) and value.
fn family(s: &mut String, name: &str, kind: &str, help: &str, samples: &[(String, u64)]) {
    let _ = writeln!(s, "# HELP {name} {help}");
    let _ = writeln!(s, "# TYPE {name} {kind}");
    for (suffix, value) in samples {
        let _ = writeln!(s, "{name}{suffix} {value}");
    }
}

/// Serves `/healthz` and `/metrics` on `listener` until the runtime stops.
/// `/healthz` answers 503 when the loop that records observations has not
/// run for [`LAG_BOUND`], or the store cannot be written.
pub fn serve(listener: tokio::net::TcpListener, metrics: Arc<Metrics>) {
    let health = Arc::clone(&metrics);
    let app = Router::new()
        .route(
            "/healthz",
            get(move || {
                let metrics = Arc::clone(&health);
                async move {
                    if let Some(problem) = metrics.store_problem() {
                        return (
                            axum::http::StatusCode::SERVICE_UNAVAILABLE,
                            format!(
                                "the store cannot be written (listings are kept and tried again): {}\n",
                                plumbline_base::sanitize::for_terminal(&problem, false)
                            ),
                        );
                    }
                    match metrics.lag(plumbline_history::time::now_ms()) {
                        None => (axum::http::StatusCode::OK, "ok\n".to_owned()),
                        Some(lag) => (
                            axum::http::StatusCode::SERVICE_UNAVAILABLE,
                            format!(
                                "lagging: the watcher's loop last ran {:.0} s ago\n",
                                lag.as_secs_f64()
                            ),
                        ),
                    }
                }
            }),
        )
        .route(
            "/metrics",
            get(move || {
                let metrics = Arc::clone(&metrics);
                async move {
                    (
                        [("content-type", "text/plain; version=0.0.4")],
                        metrics.render(),
                    )
                }
            }),
        );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
}

/// A Prometheus label value: backslash, double quote and line feed
/// escaped, other control characters dropped.
fn label_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_leases_held_with_server_names_escaped() {
        let m = Metrics::default();
        let token = |epoch| plumbline_history::LeaseToken {
            holder: "w".into(),
            epoch,
        };
        let held = [
            ("shop".to_owned(), token(3)),
            ("a\"b\\c\nd\u{1b}".to_owned(), token(1)),
        ]
        .into_iter()
        .collect();
        m.leases(&held);
        let text = m.render();
        assert!(text.contains("plumbline_leases_held 2\n"), "{text}");
        assert!(
            text.contains("plumbline_lease_epoch{server=\"shop\"} 3\n"),
            "{text}"
        );
        assert!(
            text.contains("plumbline_lease_epoch{server=\"a\\\"b\\\\c\\nd\"} 1\n"),
            "{text}"
        );
    }

    #[test]
    fn renders_counters_and_a_cumulative_histogram() {
        let m = Metrics::default();
        m.observed(true, 0.3);
        m.record_drift(Severity::Critical);
        m.observed(false, 12.0);
        m.delivered(true);
        let text = m.render();
        assert!(
            text.contains("plumbline_observations_total{outcome=\"ok\"} 1"),
            "{text}"
        );
        assert!(text.contains("plumbline_observations_total{outcome=\"failed\"} 1"));
        assert!(text.contains("plumbline_drift_total{severity=\"CRITICAL\"} 1"));
        assert!(text.contains("plumbline_observation_duration_seconds_bucket{le=\"0.5\"} 1"));
        assert!(text.contains("plumbline_observation_duration_seconds_bucket{le=\"30\"} 2"));
        assert!(text.contains("plumbline_observation_duration_seconds_count 2"));
        assert!(text.contains("plumbline_alert_deliveries_total{result=\"delivered\"} 1"));
    }

    #[test]
    fn the_outbox_and_abandoned_alerts_are_shown() {
        let m = Metrics::default();
        m.abandoned();
        m.outbox(3, 1);
        let text = m.render();
        assert!(
            text.contains("plumbline_alerts_abandoned_total 1"),
            "{text}"
        );
        assert!(text.contains("plumbline_alerts{state=\"pending\"} 3"));
        assert!(text.contains("plumbline_alerts{state=\"failed\"} 1"));
    }

    #[test]
    fn health_reports_a_loop_that_lags() {
        let m = Metrics::default();
        assert_eq!(m.lag(1_000_000), None, "not started yet");
        m.beat(1_000_000);
        assert_eq!(m.lag(1_000_000 + 60_000), None);
        assert_eq!(
            m.lag(1_000_000 + 61_000),
            Some(std::time::Duration::from_secs(61))
        );
    }
}
