use super::*;
use plumbline_drift::Drift;

/// A check result whose one changed tool has `severity` (`None`: the
/// server was unavailable).
fn result(severity: Option<Severity>) -> ServerCheck {
    let changed = |severity| plumbline_drift::ToolDrift {
        name: "t".into(),
        change: plumbline_drift::Change::Changed,
        severity,
        classification: plumbline_taxonomy::Classification {
            severity,
            rules: Vec::new(),
            evidence: Vec::new(),
        },
        fields: Vec::new(),
    };
    ServerCheck {
        server: "s".into(),
        status: if severity.is_some() {
            Status::Ok
        } else {
            Status::Unavailable
        },
        error: None,
        drift: severity.map(|severity| Drift {
            severity,
            tools: vec![changed(severity)],
            duplicates: Vec::new(),
        }),
    }
}

#[test]
fn check_exit_codes() {
    use crate::exit::code;
    let high = Severity::High;
    assert_eq!(code(check_outcome(&[], high, false)), 0);
    assert_eq!(
        code(check_outcome(
            &[result(Some(Severity::Medium))],
            high,
            false
        )),
        0
    );
    assert_eq!(
        code(check_outcome(&[result(Some(Severity::High))], high, false)),
        1
    );
    assert_eq!(
        code(check_outcome(
            &[result(Some(Severity::None))],
            Severity::None,
            false
        )),
        1
    );
    let unchanged = ServerCheck {
        drift: Some(Drift {
            severity: Severity::None,
            tools: Vec::new(),
            duplicates: Vec::new(),
        }),
        ..result(Some(Severity::None))
    };
    assert_eq!(code(check_outcome(&[unchanged], Severity::None, false)), 0);
    // An unavailable server never passes silently, and wins over drift.
    assert_eq!(code(check_outcome(&[result(None)], high, false)), 2);
    assert_eq!(
        code(check_outcome(
            &[result(Some(Severity::Critical)), result(None)],
            high,
            false
        )),
        2
    );
    // An unpinned server fails the gate unless allowed; an unavailable one
    // fails it whatever is allowed.
    let unpinned = ServerCheck::unpinned("s", "plumbline.lock", false);
    assert_eq!(code(check_outcome(&[unpinned], high, false)), 2);
    let unpinned = ServerCheck::unpinned("s", "plumbline.lock", false);
    assert_eq!(code(check_outcome(&[unpinned], high, true)), 0);
    assert_eq!(code(check_outcome(&[result(None)], high, true)), 2);
}
