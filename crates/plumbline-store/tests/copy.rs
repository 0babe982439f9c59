//! A whole history copied from SQLite to PostgreSQL and back: the same
//! rows (counts and digests) on all three, a second copy writes nothing,
//! each store checks sound, and a tampered one does not.

mod support;

use plumbline_store::prelude::*;
use plumbline_store::tables::{check, copy, not_part_of, sums};
use plumbline_store::testing::{Backend, TestStore};
use plumbline_store::{AnyStore, BaselineEdit, NewAlert, NewReview, ObservationId, RawTool};
use support::{failed_observation, ok_observation, tool_name};

fn raw(text: &str) -> RawTool {
    RawTool {
        name: tool_name(text.as_bytes()),
        raw: text.as_bytes().to_vec(),
        normalized: None,
    }
}

/// A history of `n` observations over three servers: releases every
/// hundred observations, failures, alerts, guard events, reviews, an
/// accepted change, a graded summary and an inventory.
fn history(store: &mut AnyStore, n: usize) {
    let servers = ["docs", "shop", "mail"];
    for s in servers {
        store
            .put_server(s, r#"{"transport":"stdio","command":"x"}"#)
            .expect("server");
    }
    let mut last_change = None;
    for i in 0..n {
        let server = servers[i % 3];
        let release = i / 100;
        let at = 1_700_000_000_000 + i as i64 * 1000;
        let observation = if i % 97 == 5 {
            failed_observation(server, at, "connection refused \u{0} (NUL kept)")
        } else {
            ok_observation(
                server,
                at,
                vec![
                    raw(&format!(
                        r#"{{"name":"search","description":"Searches, release {release}."}}"#
                    )),
                    raw(r#"{"name":"fetch","description":"Fetches a page."}"#),
                    raw(r#"{"name":"fetch","description":"A duplicate name."}"#),
                    raw(r#"{"name":"broken""#),
                ],
            )
        };
        let id = store.record_observation(&observation).expect("recorded");
        if i % 100 == 3 && observation.outcome.is_ok() {
            last_change = Some((server, id));
            store
                .enqueue_alert(&NewAlert {
                    server: server.into(),
                    observation: id,
                    channel: "security".into(),
                    key: format!("drift search {i}"),
                    body: br#"{"severity":"HIGH"}"#.to_vec(),
                    created_at_ms: at,
                })
                .expect("alert");
            store
                .put_inventory(id, &["other".to_owned(), "names".to_owned()])
                .expect("inventory");
            store
                .record_guard_event(&plumbline_store::NewGuardEvent {
                    server: server.into(),
                    at_ms: at,
                    kind: "secret".into(),
                    tool: "send \u{0}note".into(),
                    detail: format!(r#"{{"path":"/sidenote","i":{i}}}"#),
                })
                .expect("guard event");
        }
    }
    let (server, id) = last_change.expect("a change");
    let review = NewReview {
        observation: id,
        tool: "search".into(),
        reviewer: "alice".into(),
        at_ms: 1,
        note: Some("expected release".into()),
    };
    let observed = store.observation(id).expect("read").expect("there");
    let version = observed.tools[0].canonical_digest.expect("valid");
    store
        .accept_change(
            &review,
            &[BaselineEdit::Set {
                tool: "search".into(),
                canonical_digest: version,
            }],
        )
        .expect("accepted");
    assert!(
        store
            .baseline(server)
            .expect("baseline")
            .expect("some")
            .explicit
    );
    let set = observed.summary.tool_set.expect("a set");
    store
        .put_drift_summary(&set, &set, "v3", b"graded")
        .expect("summary");
}

#[test]
fn ten_thousand_observations_copied_to_postgresql_and_back_keep_every_digest() {
    let source = TestStore::new(Backend::Sqlite);
    let mut from = source.open();
    history(&mut from, 10_000);
    assert!(check(&from).expect("check").is_empty());
    let original = sums(&from).expect("sums");
    let observations = original.iter().find(|s| s.table == "observations").unwrap();
    assert_eq!(observations.rows, 10_000);

    let team = TestStore::new(Backend::Postgres);
    let mut shared = team.open();
    let mut pages = 0;
    let copied = copy(&from, &mut shared, |_, _| pages += 1).expect("copied");
    assert!(pages >= 10, "progress is told page by page");
    assert_eq!(
        copied.iter().map(|c| c.written).sum::<u64>(),
        original.iter().map(|s| s.rows).sum::<u64>()
    );
    assert_eq!(sums(&shared).expect("sums"), original);
    assert!(check(&shared).expect("check").is_empty());
    // A copy is a part of its source (so it can be resumed).
    assert!(not_part_of(&shared, &from).expect("compared").is_empty());
    // Again: nothing to write, the same rows.
    let again = copy(&from, &mut shared, |_, _| {}).expect("copied again");
    assert!(again.iter().all(|c| c.written == 0), "{again:?}");
    assert_eq!(sums(&shared).expect("sums"), original);

    // And back into a new SQLite file.
    let back = TestStore::new(Backend::Sqlite);
    let mut returned = back.open();
    copy(&shared, &mut returned, |_, _| {}).expect("copied back");
    assert_eq!(sums(&returned).expect("sums"), original);
    assert!(check(&returned).expect("check").is_empty());

    // The copy is a history to go on with: new rows take new ids.
    let next = shared
        .record_observation(&ok_observation(
            "docs",
            1_800_000_000_000,
            vec![raw(r#"{"name":"new","description":"After the copy."}"#)],
        ))
        .expect("recorded after the copy");
    assert!(next > ObservationId(10_000), "{next}");
    assert_eq!(
        shared
            .tool_history("docs", "search")
            .expect("history")
            .len(),
        from.tool_history("docs", "search").expect("history").len() + 1,
        "search is absent from the new listing"
    );

    // A store holding another history is not a part of this one, and
    // says where.
    let other = TestStore::new(Backend::Sqlite);
    let mut unrelated = other.open();
    history(&mut unrelated, 30);
    let foreign = not_part_of(&unrelated, &from).expect("compared");
    // (Its first thirty observations are the source's; its review and
    // baseline are not.)
    assert!(
        foreign.iter().any(|d| d.starts_with("reviews:")),
        "{foreign:?}"
    );

    // Tampering is found: bytes that are not their digest's.
    back.execute("UPDATE raw_tools SET raw = X'7B7D' WHERE id = 1");
    let findings = check(&back.open()).expect("check");
    assert!(
        findings
            .iter()
            .any(|f| f.contains("raw_tools 1: its digest is not its content's")),
        "{findings:?}"
    );
}
