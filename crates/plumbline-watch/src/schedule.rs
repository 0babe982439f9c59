//! When each server is observed: its interval, spread by jitter, backed
//! off after failures.

use std::time::Duration;

use anyhow::Result;
use plumbline_config::Config;
use plumbline_history::time::now_ms;
use plumbline_history::History;
use tokio::time::Instant;

/// A small generator for jitter; nothing here needs cryptographic quality.
pub(crate) struct Jitter(u64);

impl Jitter {
    /// A generator seeded from `what` and the clock (never zero).
    pub(crate) fn seeded(what: &str) -> Jitter {
        let mut seed = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(&(what, now_ms()), &mut seed);
        Jitter(std::hash::Hasher::finish(&seed) | 1)
    }

    /// A number in [0, 1).
    pub(crate) fn fraction(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// One server's timing, from the configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Schedule {
    pub(crate) interval: Duration,
    pub(crate) jitter: f64,
    pub(crate) debounce: Duration,
}

impl Schedule {
    pub(crate) fn of(config: &Config, server: &str) -> Schedule {
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
    pub(crate) fn next_delay(&self, failures: u32, jitter: &mut Jitter) -> Duration {
        let backed_off = self.interval.saturating_mul(1u32 << failures.min(10));
        let cap = self.interval.max(Duration::from_secs(3600));
        let d = backed_off.min(cap);
        d.mul_f64(1.0 + self.jitter * (2.0 * jitter.fraction() - 1.0))
    }
}

/// When a server is first due: a server observed recently waits out the
/// rest of its interval instead of being observed again at once.
pub(crate) fn first_due(store: &History, name: &str, schedule: &Schedule) -> Result<Instant> {
    let last = match store.timeline(name, 1) {
        Ok(timeline) => timeline.into_iter().next(),
        // Never observed: not in the store yet.
        Err(plumbline_history::StoreError::UnknownServer { .. }) => None,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_back_off_to_an_hour_and_jitter_stays_within_its_fraction() {
        let s = Schedule {
            interval: Duration::from_secs(60),
            jitter: 0.1,
            debounce: Duration::from_secs(2),
        };
        let mut j = Jitter::seeded("t");
        for _ in 0..1000 {
            let d = s.next_delay(0, &mut j).as_secs_f64();
            assert!((54.0..=66.0).contains(&d), "{d}");
        }
        let capped = s.next_delay(20, &mut j).as_secs_f64();
        assert!((3240.0..=3960.0).contains(&capped), "{capped}");
    }
}
