//! Putting the alerts the history decides into the store's outbox, one
//! per observation and channel, as the channel will send them.

use anyhow::Result;
use plumbline_alert::Alert;
use plumbline_config::{ChannelConfig, Config};
use plumbline_history::alerts::{decide, Channel, Notice};
use plumbline_history::time::now_ms;
use plumbline_history::Recorded;
use plumbline_history::{History, NewAlert};
use plumbline_taxonomy::Taxonomy;

/// The channels of `config`, as the alert policy sees them.
pub fn channels(config: &Config) -> Vec<Channel> {
    config
        .alerts
        .iter()
        .map(|a| Channel {
            name: a.name.clone(),
            min_severity: a.min_severity,
        })
        .collect()
}

/// Queues the alerts of each recorded observation; returns the channels
/// that got new ones (to wake their delivery).
pub fn enqueue(
    store: &mut History,
    config: &Config,
    recorded: &[Recorded],
    taxonomy: Taxonomy,
) -> Result<Vec<String>> {
    let policy = channels(config);
    let mut woken = Vec::new();
    for r in recorded {
        for decision in decide(store.store(), r, &policy)? {
            let mut alert = match &decision.notice {
                Notice::Failure { error } => Alert::failure(&r.server, r.observation.0, error),
                Notice::Recovery => Alert::recovery(&r.server, r.observation.0),
                Notice::Authorization { fields } => {
                    Alert::authorization(&r.server, r.observation.0, fields.clone())
                }
                Notice::Drift { tools } => {
                    Alert::drift(&r.server, r.observation.0, tools.iter().copied(), taxonomy)
                }
            };
            alert.reached_differently = r.reached_differently.clone();
            alert.at = Some(plumbline_history::time::utc(r.finished_at_ms));
            alert.previous_observation = r.previous.map(|p| p.0);
            alert.link = config.watch.dashboard_url.as_deref().map(|base| {
                format!(
                    "{}{}",
                    base.trim_end_matches('/'),
                    plumbline_history::links::observation(&r.server, r.observation)
                )
            });
            let Some(channel) = config
                .alerts
                .iter()
                .find(|c| c.name == decision.channel.name)
            else {
                continue;
            };
            let body = match channel.channel {
                ChannelConfig::Slack { .. } => alert.slack_body(),
                _ => alert.body(),
            };
            let id = store.enqueue_alert(&NewAlert {
                server: r.server.clone(),
                observation: r.observation,
                channel: channel.name.clone(),
                key: decision.notice.key().to_owned(),
                body,
                created_at_ms: now_ms(),
            })?;
            if id.is_some() && !woken.contains(&channel.name) {
                woken.push(channel.name.clone());
            }
        }
    }
    Ok(woken)
}

/// Queues one alert per channel for a guard event (a refused call, an
/// injected result): every channel, whatever its `min_severity` (it is
/// not drift), kept with the server's latest observation under the key
/// `guard EVENT`, so it is queued once. Returns the channels that got one;
/// none when the server has no observation to keep it with.
pub fn enqueue_guard_event(
    store: &mut History,
    config: &Config,
    event: &plumbline_history::GuardEvent,
    what: &str,
) -> Result<Vec<String>> {
    let Some(latest) = store.timeline(&event.server, 1)?.into_iter().next() else {
        return Ok(Vec::new());
    };
    let guard = plumbline_alert::GuardAlert {
        event: event.id,
        kind: event.kind.clone(),
        tool: event.tool.clone(),
        what: what.to_owned(),
        detail: serde_json::from_str(&event.detail).unwrap_or(serde_json::Value::Null),
    };
    let mut alert = Alert::guard(&event.server, latest.id.0, guard);
    alert.at = Some(plumbline_history::time::utc(event.at_ms));
    let mut woken = Vec::new();
    for channel in &config.alerts {
        let body = match channel.channel {
            ChannelConfig::Slack { .. } => alert.slack_body(),
            _ => alert.body(),
        };
        let id = store.enqueue_alert(&NewAlert {
            server: event.server.clone(),
            observation: latest.id,
            channel: channel.name.clone(),
            key: format!("guard {}", event.id),
            body,
            created_at_ms: now_ms(),
        })?;
        if id.is_some() {
            woken.push(channel.name.clone());
        }
    }
    Ok(woken)
}
