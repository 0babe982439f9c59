//! The history's promise: every listing recorded once and graded once;
//! readers (the log, the dashboard's overview and timelines) never grade.

mod support;

use plumbline_history::{read, record, Grader};
use plumbline_store::prelude::*;
use plumbline_store::{ProblemKind, RawTool, SqliteStore};
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
    let recorded = |grader: &Grader| -> Vec<bool> {
        let (steps, _) = read::recent(&store, grader, "docs", 200).expect("timeline");
        steps
            .iter()
            .filter(|s| !s.changes.is_empty())
            .map(|s| s.changes.regraded)
            .collect()
    };
    // The grades made when recording are not re-grades; another
    // taxonomy's are, and say so.
    assert!(recorded(&Grader::new(Taxonomy::V1)).iter().all(|r| !r));
    let other = Grader::new(Taxonomy::V2);
    let regraded = recorded(&other);
    assert_eq!(regraded.len(), 39);
    assert!(regraded.iter().all(|r| *r));
    assert_eq!(other.graded(), 39);
    let again = Grader::new(Taxonomy::V2);
    read::recent(&store, &again, "docs", 200).expect("timeline");
    assert_eq!(again.graded(), 39, "nothing was written");
    let written = read::backfill(&mut store, &Grader::new(Taxonomy::V2)).expect("backfill");
    assert_eq!(written, 39);
    let after = Grader::new(Taxonomy::V2);
    let (steps, _) = read::recent(&store, &after, "docs", 200).expect("timeline");
    assert_eq!(after.graded(), 0);
    assert!(
        steps
            .iter()
            .filter(|s| !s.changes.is_empty())
            .all(|s| s.changes.regraded),
        "a backfill records its grades as re-grades"
    );
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

/// A grade is a function of what is stored. A change that names `fetch`
/// is a reference to another tool (v2's R05, HIGH) only when another
/// server of the history owns `fetch`: recorded beside it, the recorder,
/// the stored summary (overview, timeline), the change page and `diff`
/// all say HIGH [R05], even after that server drops `fetch` and in a new
/// process; recorded without it, all of them say LOW [R08].
#[test]
fn a_change_is_graded_with_the_inventory_kept_with_it_by_every_reader() {
    fn tool(description: &str) -> RawTool {
        let raw = serde_json::json!({
            "name": "read_file",
            "description": description,
            "inputSchema": {"type": "object", "properties": {}}
        })
        .to_string();
        RawTool {
            name: Some("read_file".to_owned()),
            raw: raw.into_bytes(),
            normalized: None,
        }
    }
    fn web(name: &str) -> RawTool {
        let raw = format!(
            r#"{{"name":"{name}","description":"Fetches a URL.","inputSchema":{{"type":"object"}}}}"#
        );
        RawTool {
            name: Some(name.to_owned()),
            raw: raw.into_bytes(),
            normalized: None,
        }
    }
    let before = tool("Reads a file and returns its text.");
    let after = tool("Reads a file and returns its text. Use fetch for remote files.");
    for beside in [true, false] {
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("p.db");
        let mut store = SqliteStore::open(&path).expect("store");
        let grader = Grader::new(Taxonomy::V2);
        let at = 1_700_000_000_000;
        record(
            &mut store,
            &grader,
            vec![support::observed("files", at, vec![before.clone()])],
        )
        .expect("recorded");
        if beside {
            record(
                &mut store,
                &grader,
                vec![support::observed("web", at, vec![web("fetch")])],
            )
            .expect("recorded");
        }
        let recorded = record(
            &mut store,
            &grader,
            vec![support::observed("files", at + 60_000, vec![after.clone()])],
        )
        .expect("recorded")
        .remove(0);
        let (severity, rules) = if beside {
            ("HIGH", vec!["R05"])
        } else {
            ("LOW", vec!["R08"])
        };
        let drift = recorded.drift.as_ref().expect("graded");
        let graded = &drift.tools[0].classification;
        assert_eq!(graded.severity.to_string(), severity);
        let names = |rules: &[plumbline_taxonomy::RuleId]| -> Vec<String> {
            rules.iter().map(|r| r.as_str().to_owned()).collect()
        };
        assert_eq!(names(&graded.rules), rules);
        if beside {
            // The other server no longer owns `fetch`: what was graded with
            // it stays graded with it.
            record(
                &mut store,
                &grader,
                vec![support::observed("web", at + 120_000, vec![web("get_url")])],
            )
            .expect("recorded");
        }
        drop(store);
        let store = SqliteStore::open(&path).expect("store");
        let reader = Grader::new(Taxonomy::V2);
        let (steps, _) = read::recent(&store, &reader, "files", 10).expect("timeline");
        let stored = steps
            .iter()
            .find(|s| s.summary.id == recorded.observation)
            .expect("the change");
        assert_eq!(stored.changes.severity.to_string(), severity);
        assert_eq!(
            reader.graded(),
            0,
            "the stored grade is read, not made again"
        );
        let page = read::change(&store, &reader, "files", recorded.observation, "read_file")
            .expect("change page");
        assert_eq!(page.drift.classification.severity.to_string(), severity);
        assert_eq!(names(&page.drift.classification.rules), rules);
        let diff = read::drift_between(
            &store,
            &reader,
            recorded.previous.expect("previous"),
            recorded.observation,
        )
        .expect("diff");
        assert_eq!(diff.severity.to_string(), severity);
        let overview = read::overview(&store, &reader).expect("overview");
        let files = overview.iter().find(|o| o.name == "files").expect("files");
        assert_eq!(
            files.worst_unreviewed.map(|s| s.to_string()).as_deref(),
            Some(severity)
        );
        // Under another taxonomy nothing is stored: graded again, with the
        // names kept with the change (v1 has no foreign references, so
        // only that it reads them without failing is checked here).
        let v1 = Grader::new(Taxonomy::V1);
        read::change(&store, &v1, "files", recorded.observation, "read_file").expect("v1");
        assert_eq!(v1.graded(), 2, "the summary, then the change's evidence");
    }
}
