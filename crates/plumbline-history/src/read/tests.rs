use super::*;

fn row(
    name: &str,
    drift: Option<i64>,
    worst: Option<Severity>,
    unreviewed: usize,
) -> ServerOverview {
    ServerOverview {
        name: name.into(),
        identity: "{}".into(),
        last: None,
        tool_count: None,
        changes: unreviewed,
        unreviewed,
        worst_unreviewed: worst,
        last_drift_at_ms: drift,
    }
}

#[test]
fn the_overview_sorts_newest_drift_first_by_default_and_ties_by_name() {
    let mut rows = vec![
        row("quiet", None, None, 0),
        row("old", Some(10), Some(Severity::Critical), 1),
        row("new", Some(20), Some(Severity::Low), 3),
        row("also-quiet", None, None, 0),
    ];
    let names = |rows: &[ServerOverview]| rows.iter().map(|r| r.name.clone()).collect::<Vec<_>>();
    sort(&mut rows, Sort::Drift);
    assert_eq!(names(&rows), ["new", "old", "also-quiet", "quiet"]);
    sort(&mut rows, Sort::Severity);
    assert_eq!(names(&rows), ["old", "new", "also-quiet", "quiet"]);
    sort(&mut rows, Sort::Unreviewed);
    assert_eq!(names(&rows), ["new", "old", "also-quiet", "quiet"]);
    sort(&mut rows, Sort::Name);
    assert_eq!(names(&rows), ["also-quiet", "new", "old", "quiet"]);
    for s in Sort::ALL {
        assert_eq!(Sort::parse(s.as_str()), Some(s));
    }
    assert_eq!(Sort::parse("bogus"), None);
}
