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
    };
    ServerCheck {
        server: "s".into(),
        status: if severity.is_some() {
            "ok"
        } else {
            "unavailable"
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
    assert_eq!(code(check_outcome(&[], high)), 0);
    assert_eq!(
        code(check_outcome(&[result(Some(Severity::Medium))], high)),
        0
    );
    assert_eq!(
        code(check_outcome(&[result(Some(Severity::High))], high)),
        1
    );
    assert_eq!(
        code(check_outcome(
            &[result(Some(Severity::None))],
            Severity::None
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
    assert_eq!(code(check_outcome(&[unchanged], Severity::None)), 0);
    // An unavailable server never passes silently, and wins over drift.
    assert_eq!(code(check_outcome(&[result(None)], high)), 2);
    assert_eq!(
        code(check_outcome(
            &[result(Some(Severity::Critical)), result(None)],
            high
        )),
        2
    );
}
