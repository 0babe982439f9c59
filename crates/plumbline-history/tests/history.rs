//! The history's promise: every listing recorded once and graded once;
//! readers (the log, the dashboard's overview and timelines) never grade.

mod support;

use plumbline_history::{read, record, Grader};
use plumbline_store::{ProblemKind, RawTool, SqliteStore, Store};
use plumbline_taxonomy::Taxonomy;

/// 10,000 observations with 2,000 changes: recording grades each change
/// once; reading the whole timeline afterwards, in a new process (a new
/// grader), grades nothing.
#[test]
fn readers_of_a_long_history_grade_nothing() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("p.db");
    let mut store = SqliteStore::open(&path).expect("store");
    let recorder = Grader::new(Taxonomy::V1);
    support::long_history(&mut store, &recorder, 10_000, 2_000).expect("recorded");
    assert_eq!(
        recorder.graded(),
        1_999,
        "each change graded once when recorded, unchanged listings not at all"
    );

    let reader = Grader::new(Taxonomy::V1);
    let store = SqliteStore::open(&path).expect("store");
    let (steps, more) = read::recent(&store, &reader, "docs", 10_000).expect("timeline");
    assert!(!more);
    assert_eq!(steps.len(), 10_000);
    let changed = steps.iter().filter(|s| !s.changes.is_empty()).count();
    assert_eq!(changed, 1_999);
    let overview = read::overview(&store, &reader).expect("overview");
    assert_eq!(overview[0].changes, 1_999);
    assert_eq!(reader.graded(), 0, "readers read the recorded grades");
}

/// Grades are kept per taxonomy: another taxonomy finds none of its own,
/// grades in memory and writes nothing, until a backfill (what `plumbline
/// serve` runs at start) keeps them.
#[test]
fn another_taxonomy_grades_in_memory_until_a_backfill() {
    let mut store = SqliteStore::open_in_memory().expect("store");
    support::long_history(&mut store, &Grader::new(Taxonomy::V1), 200, 40).expect("recorded");
    let other = Grader::new(Taxonomy::V2);
    read::recent(&store, &other, "docs", 200).expect("timeline");
    assert_eq!(other.graded(), 39);
    let again = Grader::new(Taxonomy::V2);
    read::recent(&store, &again, "docs", 200).expect("timeline");
    assert_eq!(again.graded(), 39, "nothing was written");
    let written = read::backfill(&mut store, &Grader::new(Taxonomy::V2)).expect("backfill");
    assert_eq!(written, 39);
    let after = Grader::new(Taxonomy::V2);
    read::recent(&store, &after, "docs", 200).expect("timeline");
    assert_eq!(after.graded(), 0);
}

/// A valid tool object without a name is kept and recorded as a problem of
/// its listing, beside what the store finds itself.
#[test]
fn a_tool_without_a_name_is_a_recorded_problem() {
    let mut store = SqliteStore::open_in_memory().expect("store");
    let grader = Grader::new(Taxonomy::V1);
    let mut tools = support::listing(0);
    tools.truncate(2);
    tools.push(RawTool {
        name: None,
        raw: br#"{"description":"A tool with no name."}"#.to_vec(),
        normalized: None,
    });
    let mut observed = support::observed("docs", 1, tools);
    observed
        .observation
        .problems
        .push(plumbline_store::Problem {
            position: Some(2),
            kind: ProblemKind::MalformedTool,
            tool_name: None,
            message: "element 2 has no string \"name\"".to_owned(),
        });
    let recorded = record(&mut store, &grader, vec![observed]).expect("recorded");
    assert_eq!(recorded[0].problems.len(), 1, "{:?}", recorded[0].problems);
    assert_eq!(recorded[0].problems[0].position, Some(2));
    let o = store
        .observation(recorded[0].observation)
        .expect("read")
        .expect("there");
    assert_eq!(o.tools.len(), 3, "the nameless tool is kept");
    assert_eq!(o.problems.len(), 1);
}
