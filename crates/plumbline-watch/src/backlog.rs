//! Listings waiting for the store, and recorded observations waiting for
//! their alerts: what the watcher keeps when the store cannot be written
//! (PostgreSQL restarting, the network to it down), and tries again at
//! each heartbeat until it can. Each listing is recorded in its own
//! transaction, so a failure part way through a batch keeps exactly the
//! listings not yet recorded; alerts are enqueued idempotently, so
//! enqueueing a batch again after a failure never alerts twice.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use plumbline_config::Config;
use plumbline_history::{
    Grader, History, HistoryError, LeaseToken, ObservationId, Recorded, StoreError,
};
use tokio::task::JoinHandle;

use crate::delivery::Channels;
use crate::metrics::Metrics;
use crate::observe::Collected;
use crate::{alerting, process};

/// Whether `e` is the database's own (unreachable, refused, a lost
/// connection): worth trying again. Anything else would fail again.
fn is_store_error(e: &anyhow::Error) -> bool {
    let transient = |e: &StoreError| {
        matches!(
            e,
            StoreError::Open { .. }
                | StoreError::Read { .. }
                | StoreError::Write { .. }
                | StoreError::WriteDerived { .. }
        )
    };
    e.chain().any(|cause| {
        cause.downcast_ref::<StoreError>().is_some_and(transient)
            || matches!(
                cause.downcast_ref::<HistoryError>(),
                Some(HistoryError::Store(s)) if transient(s)
            )
    })
}

/// A listing with the lease it was made under.
pub(crate) type Listed = (Collected, Option<LeaseToken>);

/// Listings recorded at most this many at a time.
const BATCH: usize = 64;

/// What one recording task did: what it recorded, what it did not
/// (after the store failed), and why.
pub(crate) struct Attempt {
    recorded: Vec<Recorded>,
    /// Recorded but not graded: graded again before anything else.
    ungraded: Vec<(ObservationId, Listed)>,
    left: Vec<Listed>,
    error: Option<anyhow::Error>,
}

impl Attempt {
    /// An attempt that recorded `recorded` and left nothing.
    pub fn recorded(recorded: Vec<Recorded>) -> Attempt {
        Attempt {
            recorded,
            ungraded: Vec::new(),
            left: Vec::new(),
            error: None,
        }
    }
}

pub(crate) struct Backlog {
    waiting: VecDeque<Listed>,
    ungraded: Vec<(ObservationId, Listed)>,
    unalerted: Vec<Recorded>,
    /// The most listings kept; past it the oldest are dropped, said and
    /// counted (the store has been unreachable for that many intervals).
    cap: usize,
}

impl Backlog {
    pub fn new(cap: usize) -> Backlog {
        Backlog {
            waiting: VecDeque::new(),
            ungraded: Vec::new(),
            unalerted: Vec::new(),
            cap,
        }
    }

    /// Keeps a listing under the lease its server is held with now; one
    /// of a server no longer held is not this watcher's to record.
    pub fn push(&mut self, c: Collected, held: &BTreeMap<String, LeaseToken>, metrics: &Metrics) {
        let Some(lease) = held.get(&c.server).cloned() else {
            tracing::debug!(server = %c.server, "plumbline watch: a listing of a server no longer held is not recorded");
            return;
        };
        self.waiting.push_back((c, Some(lease)));
        let mut dropped = 0;
        while self.waiting.len() > self.cap {
            if let Some((old, _)) = self.waiting.pop_front() {
                dropped += 1;
                tracing::error!(
                    server = %old.server,
                    "plumbline watch: the store has been unreachable too long; dropping the oldest listing kept"
                );
            }
        }
        metrics.waiting(self.waiting.len() as u64, dropped);
    }

    /// Records the first listings waiting on a blocking thread, over the
    /// recorder's connection.
    pub fn start(
        &mut self,
        recorder: &Arc<Mutex<History>>,
        grader: &Arc<Grader>,
        metrics: &Arc<Metrics>,
    ) -> Option<JoinHandle<Attempt>> {
        if self.waiting.is_empty() {
            return None;
        }
        let n = self.waiting.len().min(BATCH);
        let batch: Vec<Listed> = self.waiting.drain(..n).collect();
        let (recorder, grader, metrics) = (
            Arc::clone(recorder),
            Arc::clone(grader),
            Arc::clone(metrics),
        );
        Some(tokio::task::spawn_blocking(move || {
            let mut store = recorder
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let p = process(&mut store, &grader, &metrics, &batch);
            let mut ungraded = Vec::new();
            let mut left = Vec::new();
            for (i, listed) in batch.into_iter().enumerate() {
                if let Some((id, _)) = p.ungraded.iter().find(|(_, at)| *at == i) {
                    ungraded.push((*id, listed));
                } else if !p.done[i] {
                    left.push(listed);
                }
            }
            Attempt {
                recorded: p.recorded,
                ungraded,
                left,
                error: p.failed,
            }
        }))
    }

    /// Takes back what a recording task did not record, to try again.
    pub fn finish(&mut self, attempt: Attempt, metrics: &Metrics) {
        self.unalerted.extend(attempt.recorded);
        self.ungraded.extend(attempt.ungraded);
        for listed in attempt.left.into_iter().rev() {
            self.waiting.push_front(listed);
        }
        match attempt.error {
            None => metrics.store_up(),
            Some(e) => {
                metrics.store_down(&format!("{e:#}"));
                tracing::error!(
                    waiting = self.waiting.len(),
                    "plumbline watch: cannot record (the listings are kept and tried again): {e:#}"
                );
            }
        }
        metrics.waiting(self.waiting.len() as u64, 0);
    }

    /// Grades what was recorded but not graded, then puts the alerts of
    /// what was recorded in the outbox, one observation at a time, and
    /// wakes their channels (none when stopping: the next run delivers
    /// them). What the store could not take waits for the next try; an
    /// observation whose alerts cannot be decided for another reason is
    /// said and let go, so that it never holds up the others. Whether any
    /// alert was queued.
    pub fn enqueue(
        &mut self,
        store: &mut History,
        config: &Config,
        grader: &Grader,
        channels: Option<&Channels>,
        metrics: &Metrics,
    ) -> bool {
        let mut queued = false;
        while let Some((id, listed)) = self.ungraded.first() {
            match crate::observe::regrade(store, grader, *id, listed) {
                Ok(recorded) => {
                    self.ungraded.remove(0);
                    self.unalerted.push(recorded);
                }
                Err(e) if is_store_error(&e) => {
                    metrics.store_down(&format!("{e:#}"));
                    return queued;
                }
                Err(e) => {
                    tracing::error!(
                        observation = id.0,
                        "plumbline watch: cannot grade a recorded observation: {e:#}"
                    );
                    self.ungraded.remove(0);
                }
            }
        }
        while let Some(recorded) = self.unalerted.first() {
            match alerting::enqueue(
                store,
                config,
                std::slice::from_ref(recorded),
                grader.taxonomy(),
            ) {
                Ok(woken) => {
                    self.unalerted.remove(0);
                    queued |= !woken.is_empty();
                    for channel in woken {
                        if let Some(channels) = channels {
                            channels.wake(&channel);
                        }
                    }
                }
                Err(e) if is_store_error(&e) => {
                    metrics.store_down(&format!("{e:#}"));
                    tracing::error!(
                        observations = self.unalerted.len(),
                        "plumbline watch: cannot queue the alerts (tried again): {e:#}"
                    );
                    return queued;
                }
                Err(e) => {
                    tracing::error!(
                        observation = recorded.observation.0,
                        "plumbline watch: cannot decide the alerts of an observation: {e:#}"
                    );
                    self.unalerted.remove(0);
                }
            }
        }
        queued
    }

    /// Whatever is left when the watcher stops: said, since it is lost.
    pub fn left_behind(&self) -> (usize, usize) {
        (self.waiting.len(), self.unalerted.len())
    }

    /// Every listing still waiting, for a last try.
    pub fn take_waiting(&mut self) -> Vec<Listed> {
        self.waiting.drain(..).collect()
    }
}
