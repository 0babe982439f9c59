//! What each recorded observation alerts, and to which channel.
//!
//! The policy, in one place:
//!
//! - a failed observation alerts every channel once per failure streak
//!   (the first failure after a success, or the server's first
//!   observation); the first success after failures alerts a recovery;
//! - a drift alerts a channel once per observation, listing every changed
//!   tool at or above the channel's minimum severity that a rule fired on
//!   (or that is new, for review, or unreadable: what cannot be graded
//!   fails closed); removed tools are alerted to channels that want LOW
//!   (a removal is not graded);
//! - each decision carries a key (`drift`, `failure`, `recovery`) that,
//!   with the observation and channel, the outbox keeps unique, so an
//!   observation examined again (after a restart) never alerts twice.

use plumbline_drift::{Change, ToolDrift};
use plumbline_store::{Store, StoreError};
use plumbline_taxonomy::Severity;

use crate::{HistoryError, Recorded};

/// A configured alert channel, as the policy sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Channel {
    pub name: String,
    /// The least severity of a changed tool the channel is told about.
    pub min_severity: Severity,
}

/// What an observation tells a channel.
#[derive(Debug, PartialEq)]
pub enum Notice<'a> {
    /// The first failure of a streak.
    Failure { error: &'a str },
    /// The first success after failures.
    Recovery,
    /// The changed tools the channel wants, in the drift's order.
    Drift { tools: Vec<&'a ToolDrift> },
}

impl Notice<'_> {
    /// The outbox key: one alert per observation, channel and key.
    pub fn key(&self) -> &'static str {
        match self {
            Notice::Failure { .. } => "failure",
            Notice::Recovery => "recovery",
            Notice::Drift { .. } => "drift",
        }
    }
}

/// One alert to send.
#[derive(Debug, PartialEq)]
pub struct Decision<'a> {
    pub channel: &'a Channel,
    pub notice: Notice<'a>,
}

/// The changed tools of `recorded` at or above `minimum` that alert.
pub fn alerted(recorded: &Recorded, minimum: Severity) -> Vec<&ToolDrift> {
    recorded
        .drift
        .as_ref()
        .map(|d| {
            d.changes()
                .filter(|t| match t.change {
                    // A removal is not graded (NONE); a channel that wants
                    // LOW is told of it all the same.
                    Change::Removed => minimum <= Severity::Low,
                    _ => {
                        t.severity >= minimum
                            && (!t.classification.rules.is_empty()
                                || t.is_new_for_review()
                                || matches!(t.change, Change::Unreadable { .. }))
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

/// What `recorded` (just recorded, so the newest observation of its
/// server) alerts, channel by channel.
pub fn decide<'a>(
    store: &impl Store,
    recorded: &'a Recorded,
    channels: &'a [Channel],
) -> Result<Vec<Decision<'a>>, HistoryError> {
    if channels.is_empty() {
        return Ok(Vec::new());
    }
    let previous_failed = previous_failed(store, recorded)?;
    let mut out = Vec::new();
    if let Some(error) = &recorded.error {
        if previous_failed != Some(true) {
            out.extend(channels.iter().map(|channel| Decision {
                channel,
                notice: Notice::Failure { error },
            }));
        }
        return Ok(out);
    }
    if previous_failed == Some(true) {
        out.extend(channels.iter().map(|channel| Decision {
            channel,
            notice: Notice::Recovery,
        }));
    }
    for channel in channels {
        let tools = alerted(recorded, channel.min_severity);
        if !tools.is_empty() {
            out.push(Decision {
                channel,
                notice: Notice::Drift { tools },
            });
        }
    }
    Ok(out)
}

/// Whether the observation before `recorded` failed (`None`: it is the
/// server's first).
fn previous_failed(store: &impl Store, recorded: &Recorded) -> Result<Option<bool>, HistoryError> {
    // Ours is normally the newest; another writer sharing the store may
    // have recorded a few since, so look further before giving up.
    for limit in [2, 64] {
        let timeline = match store.timeline(&recorded.server, limit) {
            Ok(t) => t,
            Err(StoreError::UnknownServer { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        // The timeline is newest first; the one before ours is the next
        // older.
        let mut older = timeline.iter().skip_while(|o| o.id != recorded.observation);
        if older.next().is_some() {
            if let Some(o) = older.next() {
                return Ok(Some(!o.outcome.is_ok()));
            }
            if timeline.len() < limit as usize {
                return Ok(None);
            }
        } else if timeline.len() < limit as usize {
            break;
        }
    }
    Err(HistoryError::Inconsistent(format!(
        "observation {} of server {:?} is not among its latest",
        recorded.observation, recorded.server
    )))
}
