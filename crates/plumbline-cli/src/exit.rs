//! How a run's outcome maps to the process exit code, in one place.

/// What a run found, as far as the exit code cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Everything was read and nothing reached the `--fail-on` threshold.
    Clean,
    /// Everything was read and a result reached the threshold.
    ThresholdReached,
    /// Some input could not be read or classified. This wins over a
    /// reached threshold: an incomplete result must never look like a
    /// complete one.
    InputError,
}

impl Outcome {
    /// Combines the outcomes of two items of one run.
    pub fn and(self, other: Outcome) -> Outcome {
        use Outcome::*;
        match (self, other) {
            (InputError, _) | (_, InputError) => InputError,
            (ThresholdReached, _) | (_, ThresholdReached) => ThresholdReached,
            _ => Clean,
        }
    }
}

/// Whether a result of `severity` reaches `--fail-on` (none given: never).
pub fn threshold(
    severity: plumbline_taxonomy::Severity,
    fail_on: Option<plumbline_taxonomy::Severity>,
) -> Outcome {
    match fail_on {
        Some(limit) if severity >= limit => Outcome::ThresholdReached,
        _ => Outcome::Clean,
    }
}

/// 0 clean, 1 threshold reached, 2 input error.
pub fn code(outcome: Outcome) -> u8 {
    match outcome {
        Outcome::Clean => 0,
        Outcome::ThresholdReached => 1,
        Outcome::InputError => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes() {
        assert_eq!(code(Outcome::Clean), 0);
        assert_eq!(code(Outcome::ThresholdReached), 1);
        assert_eq!(code(Outcome::InputError), 2);
    }

    #[test]
    fn input_errors_win_over_a_reached_threshold() {
        use Outcome::*;
        assert_eq!(Clean.and(Clean), Clean);
        assert_eq!(Clean.and(ThresholdReached), ThresholdReached);
        assert_eq!(ThresholdReached.and(InputError), InputError);
        assert_eq!(InputError.and(Clean), InputError);
    }
}
