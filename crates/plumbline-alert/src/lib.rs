//! Alerts on drift: what a watcher sends when a server changes what it
//! tells the model, and the channels it sends it on.
//!
//! - [`Alert`]: one per observation and channel: the server, every changed
//!   tool with its severity, rules and evidence, worst first, and a
//!   dashboard link when one is configured.
//! - [`sign`]: `X-Plumbline-Signature: sha256=<hex>`, an HMAC-SHA256 over
//!   the exact body bytes with a shared secret, so a receiver can verify
//!   who sent it and that it was not altered.
//! - Channels: a generic webhook (signed JSON, retried with backoff), a
//!   Slack-compatible incoming webhook, and a command hook that reads the
//!   JSON on stdin; the JSON body also serves as a JSON Lines record.
//!
//! Delivery that still fails after its retries is returned as an error so
//! the caller can keep the alert and retry later: nothing is dropped here.

use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use plumbline_base::redact::redact_url;
use plumbline_taxonomy::sanitize::for_terminal;
use plumbline_taxonomy::{RuleId, Severity, Taxonomy};
use serde::Serialize;
use sha2::Sha256;

/// The header that carries the body's signature.
pub const SIGNATURE_HEADER: &str = "X-Plumbline-Signature";

/// The header naming one alert's delivery: the same on every attempt, by
/// every watcher of its history, and never the same for two alerts, of
/// one history or of two, so a receiver can drop a duplicate
/// (docs/configuration.md says when one is sent).
pub const DELIVERY_HEADER: &str = "X-Plumbline-Delivery";

/// An alert's delivery id ([`DELIVERY_HEADER`]): 32 hex digits of the
/// SHA-256 of what identifies the alert: the history it is kept in (its
/// id, drawn when the store was made: observation ids restart in every
/// store), its observation, channel and key.
pub fn delivery_id(history: &str, observation: i64, channel: &str, key: &str) -> String {
    let mut bytes = Vec::with_capacity(64 + history.len() + channel.len() + key.len());
    bytes.extend_from_slice(b"plumbline delivery v2\0");
    bytes.extend_from_slice(&(history.len() as u64).to_be_bytes());
    bytes.extend_from_slice(history.as_bytes());
    bytes.extend_from_slice(&observation.to_be_bytes());
    bytes.extend_from_slice(&(channel.len() as u64).to_be_bytes());
    bytes.extend_from_slice(channel.as_bytes());
    bytes.extend_from_slice(key.as_bytes());
    plumbline_base::digest::digest(&bytes).to_hex()[..32].to_owned()
}

/// What an alert is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    /// Tools changed (or appeared, or were renamed) at or above the
    /// channel's minimum severity.
    Drift,
    /// The server could not be observed (once per failure streak).
    Failure,
    /// The server can be observed again after a failure.
    Recovery,
    /// What the server publishes about its authorization (OAuth metadata)
    /// changed.
    Authorization,
    /// The runtime guard refused a call with secret material, or read a
    /// result holding text aimed at the model (`guard` says which).
    Guard,
}

/// What the runtime guard refused or saw, for a guard alert: never a
/// secret, only its kind and place.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GuardAlert {
    /// The guard event's id in the history.
    pub event: i64,
    /// `secret` or `injected_result`.
    pub kind: String,
    pub tool: String,
    /// For a person: what it was and what was done.
    pub what: String,
    /// The event as the history keeps it (the place, the material's kind
    /// or the rules, the action).
    pub detail: serde_json::Value,
}

/// One alert: everything one observation tells one channel. A drift alert
/// lists every changed tool the channel wants, worst first.
///
/// JSON carries names and evidence as the server sent them (JSON escapes
/// what it must; a receiver escapes for wherever it shows them); the
/// human summary and Slack text are sanitised for display.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Alert {
    pub kind: AlertKind,
    pub server: String,
    /// The worst severity among `tools`, for a drift alert; a failure or a
    /// recovery has none (the key is left out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub severity: Option<Severity>,
    /// When the observation finished, in UTC (RFC 3339), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// The observation the drift is measured against (the server's
    /// previous successful one), when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_observation: Option<i64>,
    /// The changed tools, worst first (empty unless `kind` is drift).
    pub tools: Vec<ToolAlert>,
    /// Why the server could not be observed, for failures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The observation that produced the alert.
    pub observation: i64,
    /// A dashboard page for the observation, when a dashboard URL is
    /// configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// The taxonomy that graded a drift alert.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taxonomy: Option<Taxonomy>,
    /// How the way the server is reached changed since it was last
    /// observed (`args: [...] → [...]`), when it did: another command or
    /// URL may be another server.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reached_differently: Vec<String>,
    /// For an authorization alert: what changed, one line per field of
    /// the resource or authorization server metadata, as the server
    /// published it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub authorization: Vec<String>,
    /// For a guard alert: what the guard refused or saw.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guard: Option<GuardAlert>,
    /// For a drift alert with tools to accept: how a person releases them
    /// after review where the lock file is the baseline (the dashboard's
    /// accept, where the store is). Names are quoted for a POSIX shell:
    /// a tool's name is the server's to choose. Never sent to the model
    /// (the guard tells it only that a person must review).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review: Option<String>,
}

/// The command that accepts `tools` of `server` into the lock after
/// review: `plumbline pin --update SERVER TOOL... [--accept-severity L]`.
pub fn review_command(server: &str, tools: &[&str], worst: Severity) -> String {
    use plumbline_base::sanitize::shell_word;
    let mut command = format!("plumbline pin --update {}", shell_word(server));
    for t in tools {
        command.push(' ');
        command.push_str(&shell_word(t));
    }
    if worst >= Severity::High {
        command.push_str(&format!(
            " --accept-severity {}",
            worst.to_string().to_lowercase()
        ));
    }
    command
}

/// One changed tool within a drift alert.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolAlert {
    /// The tool's name, as the server sent it.
    pub tool: String,
    /// `added`, `changed`, `renamed` or `removed`.
    pub change: &'static str,
    /// The tool's earlier name, for a rename.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    pub severity: Severity,
    pub rules: Vec<RuleId>,
    /// One line per piece of evidence: rule, pointer, message.
    pub evidence: Vec<String>,
}

impl ToolAlert {
    /// The alert line of one graded tool.
    pub fn of(t: &plumbline_drift::ToolDrift) -> ToolAlert {
        use plumbline_drift::Change;
        ToolAlert {
            tool: t.name.clone(),
            change: t.change.kind(),
            from: match &t.change {
                Change::Renamed { from } => Some(from.clone()),
                _ => None,
            },
            severity: t.severity,
            rules: t.classification.rules.clone(),
            evidence: match &t.change {
                Change::Unreadable { reason } => {
                    vec![format!("could not be read, so not graded: {reason}")]
                }
                _ => t
                    .classification
                    .evidence
                    .iter()
                    .map(|e| format!("{} {}: {}", e.rule, e.pointer, e.message()))
                    .collect(),
            },
        }
    }

    /// `add changed CRITICAL (R02)`, sanitised.
    fn line(&self) -> String {
        let rules: Vec<&str> = self.rules.iter().map(|r| r.as_str()).collect();
        let change = match &self.from {
            Some(from) => format!("renamed from {}", for_terminal(from, false)),
            None => self.change.to_owned(),
        };
        let rules = if rules.is_empty() {
            String::new()
        } else {
            format!(" ({})", rules.join(", "))
        };
        format!(
            "{} {change} {}{rules}",
            for_terminal(&self.tool, false),
            self.severity
        )
    }
}

impl Alert {
    /// A drift alert listing `tools` (sorted here: worst first, then by
    /// name).
    pub fn drift<'a>(
        server: &str,
        observation: i64,
        tools: impl IntoIterator<Item = &'a plumbline_drift::ToolDrift>,
        taxonomy: Taxonomy,
    ) -> Alert {
        let mut tools: Vec<ToolAlert> = tools.into_iter().map(ToolAlert::of).collect();
        tools.sort_by(|a, b| {
            b.severity
                .cmp(&a.severity)
                .then_with(|| a.tool.cmp(&b.tool))
        });
        let worst = tools.first().map_or(Severity::None, |t| t.severity);
        // Removed tools have nothing to accept; the others are released
        // together, under the worst grade among them.
        let to_accept: Vec<&str> = tools
            .iter()
            .filter(|t| t.change != "removed")
            .map(|t| t.tool.as_str())
            .collect();
        let review = (!to_accept.is_empty()).then(|| {
            format!(
                "review the change, then accept it on the dashboard or run: {}",
                review_command(server, &to_accept, worst)
            )
        });
        Alert {
            kind: AlertKind::Drift,
            server: server.to_owned(),
            review,
            severity: Some(worst),
            at: None,
            previous_observation: None,
            tools,
            error: None,
            observation,
            link: None,
            taxonomy: Some(taxonomy),
            reached_differently: Vec::new(),
            authorization: Vec::new(),
            guard: None,
        }
    }

    /// The runtime guard refused a call or read an injected result of the
    /// server; `observation` is the server's latest (an alert is kept with
    /// one).
    pub fn guard(server: &str, observation: i64, guard: GuardAlert) -> Alert {
        Alert {
            guard: Some(guard),
            ..Alert::about(AlertKind::Guard, server, observation)
        }
    }

    /// The server could not be observed.
    pub fn failure(server: &str, observation: i64, error: &str) -> Alert {
        Alert {
            error: Some(error.to_owned()),
            ..Alert::about(AlertKind::Failure, server, observation)
        }
    }

    /// The server was observed again after failing.
    pub fn recovery(server: &str, observation: i64) -> Alert {
        Alert::about(AlertKind::Recovery, server, observation)
    }

    /// What the server publishes about its authorization changed, one
    /// line per field.
    pub fn authorization(server: &str, observation: i64, fields: Vec<String>) -> Alert {
        Alert {
            authorization: fields,
            ..Alert::about(AlertKind::Authorization, server, observation)
        }
    }

    fn about(kind: AlertKind, server: &str, observation: i64) -> Alert {
        Alert {
            kind,
            server: server.to_owned(),
            severity: None,
            at: None,
            previous_observation: None,
            tools: Vec::new(),
            error: None,
            observation,
            link: None,
            taxonomy: None,
            reached_differently: Vec::new(),
            authorization: Vec::new(),
            guard: None,
            review: None,
        }
    }

    /// The JSON body every channel but Slack sends: hidden, bidi and
    /// control characters from servers written as `\u` escapes, so that a
    /// terminal or log viewer showing the line cannot be steered (the JSON
    /// value is the same).
    pub fn body(&self) -> Vec<u8> {
        let text = serde_json::to_string(self).unwrap_or_default();
        plumbline_base::sanitize::escape_hidden_in_json(&text)
            .into_owned()
            .into_bytes()
    }

    /// A one-line summary for people, sanitised.
    pub fn summary(&self) -> String {
        let summary = self.what();
        if self.reached_differently.is_empty() {
            return summary;
        }
        format!(
            "{summary} (reached differently than before: {})",
            for_terminal(&self.reached_differently.join("; "), false)
        )
    }

    fn what(&self) -> String {
        let server = for_terminal(&self.server, false);
        match self.kind {
            AlertKind::Drift => {
                let graded = match self.taxonomy {
                    Some(t) => format!(" under {t}"),
                    None => String::new(),
                };
                match self.tools.as_slice() {
                    [one] => format!("{server}: {}{graded}", one.line()),
                    tools => format!(
                        "{server}: {} tools changed, worst {}{graded}",
                        tools.len(),
                        self.severity.unwrap_or_default()
                    ),
                }
            }
            AlertKind::Failure => format!(
                "{server}: could not be observed: {}",
                for_terminal(self.error.as_deref().unwrap_or("unknown error"), false)
            ),
            AlertKind::Recovery => format!("{server}: observed again"),
            AlertKind::Authorization => format!(
                "{server}: what it publishes about its authorization changed: {}",
                for_terminal(&self.authorization.join("; "), false)
            ),
            AlertKind::Guard => format!(
                "{server}: plumbline guard: {}",
                for_terminal(self.guard.as_ref().map_or("", |g| g.what.as_str()), false)
            ),
        }
    }

    /// A Slack-compatible incoming-webhook payload: Block Kit with every
    /// piece of server text in `plain_text` (never read as mrkdwn), the
    /// worst tools first, and a plain fallback `text` for notifications.
    pub fn slack_body(&self) -> Vec<u8> {
        use serde_json::json;
        let plain = |text: String| json!({"type": "plain_text", "text": text, "emoji": false});
        let mut blocks = vec![json!({
            "type": "header",
            "text": plain(clip(&format!("Plumbline: {}", self.summary()), SLACK_HEADER))
        })];
        for t in self.tools.iter().take(SLACK_TOOLS) {
            let mut text = t.line();
            for e in t.evidence.iter().take(SLACK_EVIDENCE) {
                text.push_str("\n• ");
                text.push_str(&for_terminal(e, false));
            }
            if t.evidence.len() > SLACK_EVIDENCE {
                text.push_str(&format!("\n… {} more", t.evidence.len() - SLACK_EVIDENCE));
            }
            blocks.push(json!({"type": "section", "text": plain(clip(&text, SLACK_SECTION))}));
        }
        if self.tools.len() > SLACK_TOOLS {
            blocks.push(json!({"type": "context", "elements": [plain(format!(
                "… and {} more tools",
                self.tools.len() - SLACK_TOOLS
            ))]}));
        }
        if let Some(error) = &self.error {
            blocks.push(json!({"type": "section", "text": plain(clip(&for_terminal(error, false), SLACK_SECTION))}));
        }
        if let Some(review) = &self.review {
            blocks.push(json!({"type": "context", "elements": [plain(clip(&for_terminal(review, false), SLACK_SECTION))]}));
        }
        if let Some(link) = &self.link {
            blocks.push(json!({"type": "section", "text": {
                "type": "mrkdwn",
                "text": format!("<{}|Review on the dashboard>", slack_escape(link))
            }}));
        }
        let text = format!("Plumbline: {}", self.summary());
        serde_json::to_vec(&json!({
            "text": slack_escape(&text),
            "mrkdwn": false,
            "blocks": blocks
        }))
        .unwrap_or_default()
    }
}

/// Slack's limits: a header's text, a section's text, and how many tools
/// and evidence lines per tool a message shows (Slack takes 50 blocks).
const SLACK_HEADER: usize = 150;
const SLACK_SECTION: usize = 3000;
const SLACK_TOOLS: usize = 40;
const SLACK_EVIDENCE: usize = 5;

/// `s` cut to at most `max` characters, marked when cut.
fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Slack's three control characters in message text, and its mrkdwn
/// markers, which cannot be escaped: each is followed by a zero-width
/// space so that no server text turns into formatting.
fn slack_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '*' | '_' | '`' | '~' => {
                out.push(c);
                out.push('\u{200b}');
            }
            c => out.push(c),
        }
    }
    out
}

/// `sha256=<hex>`: HMAC-SHA256 of `body` under `secret`.
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    let mut mac =
        <Hmac<Sha256> as KeyInit>::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(body);
    let tag = mac.finalize().into_bytes();
    let hex: String = tag.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// Whether `signature` (`sha256=<hex>`) is `body`'s, in constant time.
pub fn verify(secret: &[u8], body: &[u8], signature: &str) -> bool {
    let Some(hex) = signature.strip_prefix("sha256=") else {
        return false;
    };
    let Some(tag) = decode_hex(hex) else {
        return false;
    };
    let mut mac =
        <Hmac<Sha256> as KeyInit>::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(body);
    mac.verify_slice(&tag).is_ok()
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Why a delivery failed after its retries.
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    #[error("webhook {url}: {message}")]
    Webhook { url: String, message: String },
    #[error("hook `{command}`: {message}")]
    Hook { command: String, message: String },
}

/// The shape of a webhook's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookFormat {
    /// Plumbline's JSON, signed when a secret is set.
    Generic,
    /// A Slack-compatible incoming-webhook payload.
    Slack,
}

/// Posts an already-built payload (as kept in the store's outbox) to
/// `url` once, signed when `secret` is set and the format is generic. It
/// is not retried here: the watcher's outbox decides when to try again,
/// and keeps the alert until then. `delivery` is the alert's
/// [`delivery_id`], sent as [`DELIVERY_HEADER`].
pub async fn post_body(
    client: &reqwest::Client,
    url: &str,
    format: WebhookFormat,
    secret: Option<&[u8]>,
    delivery: Option<&str>,
    body: &[u8],
    timeout: Duration,
) -> Result<(), DeliveryError> {
    let fail = |message: String| DeliveryError::Webhook {
        url: redact_url(url).into_owned(),
        message,
    };
    let mut req = client
        .post(url)
        .header("Content-Type", "application/json")
        .header(
            "User-Agent",
            concat!("plumbline/", env!("CARGO_PKG_VERSION")),
        )
        .body(body.to_vec());
    if let (Some(secret), WebhookFormat::Generic) = (secret, format) {
        req = req.header(SIGNATURE_HEADER, sign(secret, body));
    }
    if let Some(delivery) = delivery {
        req = req.header(DELIVERY_HEADER, delivery);
    }
    // Timed by the time this process ran, not by the clock: an answer
    // that came while the watcher was stopped is read, not taken for a
    // timeout and sent again.
    let Some(sent) = within_running(timeout, req.send()).await else {
        return Err(fail(format!(
            "no answer within {timeout:?} (of the watcher's running time)"
        )));
    };
    match sent {
        Ok(resp) if resp.status().is_success() => Ok(()),
        Ok(resp) if resp.status().is_redirection() => {
            // The body goes only where it was configured to go.
            let to = resp
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .map(|l| redact_url(l).into_owned())
                .unwrap_or_default();
            Err(fail(format!(
                "HTTP {} redirect to {to:?} not followed: alerts go only to the configured URL",
                resp.status()
            )))
        }
        Ok(resp) => Err(fail(format!("HTTP {}", resp.status()))),
        Err(e) => Err(fail(plumbline_base::error_chain(&e))),
    }
}

/// A reqwest client for webhooks (rustls with the ring provider). It
/// follows no redirect: the alert and its signature go only to the URL
/// configured.
pub fn client() -> Result<reqwest::Client, reqwest::Error> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
}

/// A command that reads each alert's JSON on its stdin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    pub command: String,
    pub args: Vec<String>,
    /// The hook's whole environment: nothing of Plumbline's own is
    /// inherited but what is listed here (the caller decides, see
    /// `plumbline_mcp::child_environment`).
    pub env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
}

/// Runs a hook with an already-built payload (as kept in the outbox) on
/// its stdin; it must exit 0 within `timeout`.
pub async fn run_hook(hook: &Hook, body: &[u8], timeout: Duration) -> Result<(), DeliveryError> {
    let command = hook.command.as_str();
    use tokio::io::AsyncWriteExt;
    let fail = |message: String| DeliveryError::Hook {
        command: command.to_owned(),
        message,
    };
    let mut child = tokio::process::Command::new(command)
        .args(&hook.args)
        .env_clear()
        .envs(hook.env.iter().map(|(k, v)| (k.as_os_str(), v.as_os_str())))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        // Its own process group, so that what it starts ends with it.
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| fail(format!("could not start: {e}")))?;
    let group = child.id();
    let mut stdin = child.stdin.take();
    // Writing the body counts against the timeout: a hook that never reads
    // its input must not hold the channel.
    let delivered = within_running(timeout, async {
        if let Some(mut pipe) = stdin.take() {
            // A hook may exit without reading its input; its exit status,
            // not the closed pipe, says whether it worked.
            if let Err(e) = pipe.write_all(body).await {
                if e.kind() != std::io::ErrorKind::BrokenPipe {
                    return Err(fail(e.to_string()));
                }
            }
            // Dropped here: the hook sees the end of its input.
        }
        child.wait().await.map_err(|e| fail(e.to_string()))
    })
    .await;
    // Past the timeout, the hook and everything it started end with the
    // attempt (dropping the child kills only the hook itself).
    if delivered.is_none() {
        if let Some(pid) = group {
            kill_group(pid);
        }
    }
    match delivered {
        Some(Ok(status)) if status.success() => Ok(()),
        Some(Ok(status)) => Err(fail(format!("exited with {status}"))),
        Some(Err(e)) => Err(e),
        None => Err(fail(format!("did not finish within {timeout:?}"))),
    }
}

/// How often [`within_running`] looks at the clock.
const TICK: Duration = Duration::from_millis(100);

/// `work`'s output, unless it takes longer than `limit` of the time this
/// process was running (`None`).
///
/// The clock runs on while a process is stopped (SIGSTOP, a frozen
/// container, a suspended machine): timed by it, an attempt in flight
/// when the watcher was stopped is given up the moment it runs again,
/// even when the receiver's answer is waiting to be read. So time is
/// counted in ticks of [`TICK`]: a tick that took far longer than asked
/// (over a second more) was spent stopped and counts as one tick, and
/// `work` is polled first at every wake-up, so an answer that came
/// meanwhile is read before any time is counted against it.
pub async fn within_running<F: std::future::Future>(limit: Duration, work: F) -> Option<F::Output> {
    tokio::pin!(work);
    let tick = TICK.min(limit.max(Duration::from_millis(1)));
    let mut ran = Duration::ZERO;
    loop {
        let started = tokio::time::Instant::now();
        tokio::select! {
            biased;
            out = &mut work => return Some(out),
            () = tokio::time::sleep(tick) => {}
        }
        let took = started.elapsed();
        ran += if took > tick + Duration::from_secs(1) {
            tick
        } else {
            took
        };
        if ran >= limit {
            // One last look: what became ready in this last tick (the
            // connection's own task may have read the answer) is taken.
            tokio::task::yield_now().await;
            return tokio::select! {
                biased;
                out = &mut work => Some(out),
                () = std::future::ready(()) => None,
            };
        }
    }
}

/// SIGKILL to process group `pgid` (a hook's, which it leads); a group that
/// is already gone is no error.
fn kill_group(pgid: u32) {
    let Ok(pgid) = i32::try_from(pgid) else {
        return;
    };
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pgid),
        nix::sys::signal::Signal::SIGKILL,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_verify_and_detect_tampering() {
        let body = br#"{"server":"s"}"#;
        let sig = sign(b"secret", body);
        assert!(sig.starts_with("sha256=") && sig.len() == 7 + 64);
        assert!(verify(b"secret", body, &sig));
        assert!(!verify(b"other", body, &sig));
        assert!(!verify(b"secret", br#"{"server":"t"}"#, &sig));
        assert!(!verify(b"secret", body, "sha256=zz"));
        // RFC 4231 test case 2.
        assert_eq!(
            sign(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    /// Issue 23, item 15: the JSON Lines channel (and every JSON body)
    /// carries no raw RLO or C1 character, yet the same value.
    #[test]
    fn bodies_escape_bidi_and_c1_characters() {
        let alert = Alert::failure("s\u{202e}x", 1, "bad \u{9b}31m and \u{1b}[2J");
        let body = alert.body();
        let text = String::from_utf8(body.clone()).unwrap();
        assert!(
            !text.chars().any(plumbline_base::sanitize::needs_escape),
            "{text:?}"
        );
        assert!(
            text.contains("\\u202e") || text.contains("\\u202E"),
            "{text}"
        );
        let back: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(back["server"], "s\u{202e}x");
        assert_eq!(back["error"], "bad \u{9b}31m and \u{1b}[2J");
    }

    #[test]
    fn an_alert_says_when_the_server_is_reached_differently() {
        let mut alert = Alert::failure("s", 2, "refused");
        assert!(!String::from_utf8_lossy(&alert.body()).contains("reached_differently"));
        alert.reached_differently = vec!["args: [\"a\"] → [\"b\"]".into()];
        let v: serde_json::Value = serde_json::from_slice(&alert.body()).unwrap();
        assert_eq!(v["reached_differently"][0], "args: [\"a\"] → [\"b\"]");
        assert!(
            alert
                .summary()
                .ends_with("(reached differently than before: args: [\"a\"] → [\"b\"])"),
            "{}",
            alert.summary()
        );
    }

    #[test]
    fn slack_text_is_escaped() {
        let alert = Alert::failure("s", 1, "<!channel> & *co*");
        let v: serde_json::Value = serde_json::from_slice(&alert.slack_body()).unwrap();
        assert_eq!(
            v["text"],
            "Plumbline: s: could not be observed: &lt;!channel&gt; &amp; *\u{200b}co*\u{200b}"
        );
        assert_eq!(v["mrkdwn"], false);
        // Server text sits in plain_text blocks only.
        for block in v["blocks"].as_array().unwrap() {
            assert_eq!(block["text"]["type"], "plain_text", "{block}");
        }
    }

    /// Issue 38, hole 4: the command that releases a change goes to the
    /// people an alert reaches, with every name quoted for a shell (a
    /// tool's name is the server's to choose).
    #[test]
    fn a_drift_alert_says_how_to_release_the_change_with_names_quoted() {
        use plumbline_base::sanitize::shell_word;
        assert_eq!(shell_word("get_weather"), "get_weather");
        assert_eq!(shell_word("x; rm -rf ~"), "'x; rm -rf ~'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
        assert_eq!(shell_word("-rf"), "'-rf'");
        assert_eq!(shell_word(""), "''");
        assert_eq!(
            review_command("shop", &["add", "$(id)"], Severity::Critical),
            "plumbline pin --update shop add '$(id)' --accept-severity critical"
        );
        assert_eq!(
            review_command("shop", &["add"], Severity::Medium),
            "plumbline pin --update shop add"
        );
    }

    /// Issue 36, fault 1: time the process spent stopped does not count
    /// against an attempt. Here the "stop" is a thread blocking the
    /// runtime's only thread for 1.5 s (as SIGSTOP freezes every thread)
    /// while the answer becomes ready: it is read, not taken for a
    /// timeout of 0.5 s; real time alone still times out.
    #[test]
    fn an_answer_that_came_while_the_process_was_stopped_is_read() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            // The answer, as a connection's own task reads it: on a timer
            // that runs out while the process is stopped.
            let (tx, rx) = tokio::sync::oneshot::channel::<u8>();
            let answer = tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                let _ = tx.send(7);
            });
            let stop = tokio::spawn(async {
                tokio::time::sleep(Duration::from_millis(150)).await;
                // Frozen: nothing on this runtime runs meanwhile.
                std::thread::sleep(Duration::from_millis(1500));
            });
            let got = within_running(Duration::from_millis(500), rx).await;
            assert_eq!(got.map(Result::ok), Some(Some(7)));
            stop.await.unwrap();
            answer.await.unwrap();
            let (_tx, never) = tokio::sync::oneshot::channel::<u8>();
            assert!(within_running(Duration::from_millis(300), never)
                .await
                .is_none());
        });
    }
}
