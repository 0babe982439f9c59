//! Alerts on drift: what a watcher sends when a server changes what it
//! tells the model, and the channels it sends it on.
//!
//! - [`Alert`]: server, tool, severity, rules, evidence (server text
//!   sanitised), and a dashboard link when one is configured.
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

/// What an alert is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    /// A tool changed (or appeared, or was renamed) at or above the
    /// channel's minimum severity.
    Drift,
    /// The server could not be observed (once per failure streak).
    Failure,
    /// The server can be observed again after a failure.
    Recovery,
}

/// One alert, as every channel sends it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Alert {
    pub kind: AlertKind,
    pub server: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// `added`, `changed`, `renamed`, `removed`, for drift.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change: Option<String>,
    pub severity: Severity,
    pub rules: Vec<RuleId>,
    /// One line per piece of evidence, sanitised.
    pub evidence: Vec<String>,
    /// Why the server could not be observed, for failures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The observation that produced the alert.
    pub observation: i64,
    /// A dashboard page for the change, when a dashboard URL is configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// The taxonomy that graded a drift alert.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taxonomy: Option<Taxonomy>,
}

impl Alert {
    /// Alerts for the tools of `drift` at or above `minimum`, worst first.
    /// Server-supplied text (names, evidence) is sanitised.
    pub fn from_drift(
        server: &str,
        observation: i64,
        drift: &plumbline_drift::Drift,
        minimum: Severity,
        taxonomy: Taxonomy,
    ) -> Vec<Alert> {
        use plumbline_drift::Change;
        drift
            .changes()
            .filter(|t| !matches!(t.change, Change::Removed) && t.severity >= minimum)
            .filter(|t| !t.classification.rules.is_empty() || t.is_new_for_review())
            .map(|t| Alert {
                kind: AlertKind::Drift,
                server: for_terminal(server, false),
                tool: Some(for_terminal(&t.name, false)),
                change: Some(match &t.change {
                    Change::Added => "added".into(),
                    Change::Changed => "changed".into(),
                    Change::Renamed { from } => {
                        format!("renamed from {}", for_terminal(from, false))
                    }
                    Change::Removed => "removed".into(),
                    Change::Unchanged => "unchanged".into(),
                }),
                severity: t.severity,
                rules: t.classification.rules.clone(),
                evidence: t
                    .classification
                    .evidence
                    .iter()
                    .map(|e| {
                        for_terminal(&format!("{} {}: {}", e.rule, e.pointer, e.message()), false)
                    })
                    .collect(),
                error: None,
                observation,
                link: None,
                taxonomy: Some(taxonomy),
            })
            .collect()
    }

    /// The JSON body every channel but Slack sends.
    pub fn body(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// A one-line summary for people.
    pub fn summary(&self) -> String {
        match self.kind {
            AlertKind::Drift => {
                let rules: Vec<&str> = self.rules.iter().map(|r| r.as_str()).collect();
                let graded = match self.taxonomy {
                    Some(t) => format!(" under {t}"),
                    None => String::new(),
                };
                format!(
                    "{}: {} {} {} ({}){graded}",
                    self.server,
                    self.tool.as_deref().unwrap_or("?"),
                    self.change.as_deref().unwrap_or("changed"),
                    self.severity,
                    rules.join(", ")
                )
            }
            AlertKind::Failure => format!(
                "{}: could not be observed: {}",
                self.server,
                self.error.as_deref().unwrap_or("unknown error")
            ),
            AlertKind::Recovery => format!("{}: observed again", self.server),
        }
    }

    /// A Slack-compatible incoming-webhook payload.
    pub fn slack_body(&self) -> Vec<u8> {
        let mut text = format!("*Plumbline*: {}", slack_escape(&self.summary()));
        for e in self.evidence.iter().take(10) {
            text.push_str(&format!("\n• {}", slack_escape(e)));
        }
        if let Some(link) = &self.link {
            text.push_str(&format!("\n<{}|Review the change>", slack_escape(link)));
        }
        serde_json::to_vec(&serde_json::json!({"text": text})).unwrap_or_default()
    }
}

/// Slack's three control characters in message text.
fn slack_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
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
    #[error("webhook {url}: {message} (after {attempts} attempts)")]
    Webhook {
        url: String,
        attempts: u32,
        message: String,
    },
    #[error("hook `{command}`: {message}")]
    Hook { command: String, message: String },
}

/// Retry policy for webhooks: `attempts` tries, waiting `first_backoff`,
/// then twice as long each time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    pub attempts: u32,
    pub first_backoff: Duration,
    pub timeout: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            attempts: 4,
            first_backoff: Duration::from_millis(500),
            timeout: Duration::from_secs(10),
        }
    }
}

/// The shape of a webhook's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookFormat {
    /// Plumbline's JSON, signed when a secret is set.
    Generic,
    /// A Slack-compatible incoming-webhook payload.
    Slack,
}

/// Posts `alert` to `url`, retrying non-2xx answers and connection errors
/// with exponential backoff. Returns the number of attempts it took.
pub async fn post_webhook(
    client: &reqwest::Client,
    url: &str,
    format: WebhookFormat,
    secret: Option<&[u8]>,
    alert: &Alert,
    retry: Retry,
) -> Result<u32, DeliveryError> {
    let body = match format {
        WebhookFormat::Generic => alert.body(),
        WebhookFormat::Slack => alert.slack_body(),
    };
    post_body(client, url, format, secret, &body, retry).await
}

/// Posts an already-built payload (as kept in the store's outbox), signed
/// when `secret` is set and the format is generic, with the same retries.
pub async fn post_body(
    client: &reqwest::Client,
    url: &str,
    format: WebhookFormat,
    secret: Option<&[u8]>,
    body: &[u8],
    retry: Retry,
) -> Result<u32, DeliveryError> {
    let body = body.to_vec();
    let mut backoff = retry.first_backoff;
    let mut last = String::new();
    for attempt in 1..=retry.attempts.max(1) {
        let mut req = client
            .post(url)
            .timeout(retry.timeout)
            .header("Content-Type", "application/json")
            .header(
                "User-Agent",
                concat!("plumbline/", env!("CARGO_PKG_VERSION")),
            )
            .body(body.clone());
        if let (Some(secret), WebhookFormat::Generic) = (secret, format) {
            req = req.header(SIGNATURE_HEADER, sign(secret, &body));
        }
        match req.send().await {
            Ok(resp) if resp.status().is_success() => return Ok(attempt),
            Ok(resp) if resp.status().is_redirection() => {
                // Never retried: the answer will not change, and the body
                // goes only where it was configured to go.
                let to = resp
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|l| l.to_str().ok())
                    .map(|l| redact_url(l).into_owned())
                    .unwrap_or_default();
                return Err(DeliveryError::Webhook {
                    url: redact_url(url).into_owned(),
                    attempts: attempt,
                    message: format!(
                        "HTTP {} redirect to {to:?} not followed: alerts go only to the configured URL",
                        resp.status()
                    ),
                });
            }
            Ok(resp) => last = format!("HTTP {}", resp.status()),
            Err(e) => last = plumbline_base::error_chain(&e),
        }
        if attempt < retry.attempts {
            tokio::time::sleep(backoff).await;
            backoff *= 2;
        }
    }
    Err(DeliveryError::Webhook {
        url: redact_url(url).into_owned(),
        attempts: retry.attempts.max(1),
        message: last,
    })
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

/// Runs `hook`, writing the alert's JSON to its stdin; it must exit 0
/// within `timeout`.
pub async fn run_hook(hook: &Hook, alert: &Alert, timeout: Duration) -> Result<(), DeliveryError> {
    run_hook_with(hook, &alert.body(), timeout).await
}

/// Runs a hook with an already-built payload (as kept in the outbox) on
/// its stdin; it must exit 0 within `timeout`.
pub async fn run_hook_with(
    hook: &Hook,
    body: &[u8],
    timeout: Duration,
) -> Result<(), DeliveryError> {
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
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| fail(format!("could not start: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A hook may exit without reading its input; its exit status, not
        // the closed pipe, says whether it worked.
        if let Err(e) = stdin.write_all(body).await {
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                return Err(fail(e.to_string()));
            }
        }
    }
    match tokio::time::timeout(timeout, child.wait()).await {
        Ok(Ok(status)) if status.success() => Ok(()),
        Ok(Ok(status)) => Err(fail(format!("exited with {status}"))),
        Ok(Err(e)) => Err(fail(e.to_string())),
        Err(_) => Err(fail(format!("did not finish within {:?}", timeout))),
    }
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

    #[test]
    fn slack_text_is_escaped() {
        let alert = Alert {
            kind: AlertKind::Failure,
            server: "s".into(),
            tool: None,
            change: None,
            severity: Severity::None,
            rules: vec![],
            evidence: vec![],
            error: Some("<!channel> & co".into()),
            observation: 1,
            link: None,
            taxonomy: None,
        };
        let v: serde_json::Value = serde_json::from_slice(&alert.slack_body()).unwrap();
        assert_eq!(
            v["text"],
            "*Plumbline*: s: could not be observed: &lt;!channel&gt; &amp; co"
        );
    }
}
