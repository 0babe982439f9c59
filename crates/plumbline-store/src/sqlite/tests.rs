use super::*;
use crate::listing::NormalizedEntry;
use std::collections::BTreeSet;

fn ok_observation(server: &str, tools: &[&str]) -> NewObservation {
    NewObservation {
        server: server.to_owned(),
        started_at_ms: 1_700_000_000_000,
        finished_at_ms: 1_700_000_000_250,
        outcome: Outcome::Ok,
        protocol_version: Some("2025-06-18".to_owned()),
        server_info: Some(br#"{"name":"demo","version":"1.0.0"}"#.to_vec()),
        capabilities: Some(br#"{"tools":{"listChanged":true}}"#.to_vec()),
        instructions: None,
        authorization: None,
        tools: tools
            .iter()
            .map(|raw| crate::RawTool {
                name: plumbline_base::json::parse_tool(raw.as_bytes())
                    .ok()
                    .and_then(|v| v.get("name").and_then(|n| n.as_str()).map(str::to_owned)),
                raw: raw.as_bytes().to_vec(),
                normalized: None,
            })
            .collect(),
        problems: Vec::new(),
    }
}

fn store_with(server: &str) -> SqliteStore {
    let mut store = SqliteStore::open_in_memory().expect("in-memory store");
    store
        .put_server(server, r#"{"transport":"stdio","command":"demo"}"#)
        .expect("server registered");
    store
}

#[test]
fn in_memory_store_is_migrated_to_the_current_schema() {
    let store = SqliteStore::open_in_memory().expect("in-memory store");
    assert_eq!(
        store.schema_version().ok(),
        Some(SqliteStore::SCHEMA_VERSION)
    );
    assert!(store.integrity_check().is_ok());
}

#[test]
fn tool_set_digest_depends_on_order_names_and_content() {
    let a = digest(b"a");
    let b = digest(b"b");
    let entry = |position, name, raw| Entry {
        position,
        name,
        raw_tool_id: 0,
        raw_digest: raw,
        canonical_digest: Some(raw),
        normalized: None,
    };
    let ab = tool_set_digest(&[entry(0, Some("x"), a), entry(1, Some("y"), b)]);
    let ba = tool_set_digest(&[entry(0, Some("x"), b), entry(1, Some("y"), a)]);
    let renamed = tool_set_digest(&[entry(0, Some("z"), a), entry(1, Some("y"), b)]);
    let unnamed = tool_set_digest(&[entry(0, None, a), entry(1, Some("y"), b)]);
    let ab_again = tool_set_digest(&[entry(0, Some("x"), a), entry(1, Some("y"), b)]);
    assert_eq!(ab, ab_again);
    let all = BTreeSet::from([ab, ba, renamed, unnamed]);
    assert_eq!(all.len(), 4);
    // Row ids are not content: they must not change the digest.
    let mut other_ids = entry(0, Some("x"), a);
    other_ids.raw_tool_id = 99;
    assert_eq!(tool_set_digest(&[other_ids, entry(1, Some("y"), b)]), ab);
    // A normalised entry differs from the same raw entry, and by its rules.
    let normalized = |by: &str| {
        let mut e = entry(0, Some("x"), a);
        e.normalized = Some(NormalizedEntry {
            raw_tool_id: 7,
            raw_digest: b,
            by: by.to_owned(),
        });
        tool_set_digest(&[e, entry(1, Some("y"), b)])
    };
    assert_ne!(
        normalized(r#"[{"pointer":"/description","rule":"cwd"}]"#),
        ab
    );
    assert_ne!(
        normalized(r#"[{"pointer":"/description","rule":"cwd"}]"#),
        normalized(r#"[{"pointer":"/description","rule":"home"}]"#)
    );
}

#[test]
fn observing_unknown_server_is_an_error_naming_it() {
    let mut store = SqliteStore::open_in_memory().expect("in-memory store");
    let err = store
        .record_observation(&ok_observation("ghost", &[r#"{"name":"a"}"#]))
        .expect_err("unknown server");
    assert!(matches!(err, StoreError::UnknownServer { ref server, .. } if server == "ghost"));
    assert!(err.to_string().contains("\"ghost\""));
}

#[test]
fn failed_observation_with_tools_is_rejected() {
    let mut store = store_with("s");
    let mut obs = ok_observation("s", &[r#"{"name":"a"}"#]);
    obs.outcome = Outcome::Failed {
        error: "timeout".to_owned(),
    };
    assert!(matches!(
        store.record_observation(&obs),
        Err(StoreError::InvalidObservation { .. })
    ));
    assert!(store.timeline("s", 10).expect("timeline").is_empty());
}

#[test]
fn identity_that_is_not_an_object_is_rejected() {
    let mut store = SqliteStore::open_in_memory().expect("in-memory store");
    assert!(matches!(
        store.put_server("s", "[1]"),
        Err(StoreError::InvalidIdentity { .. })
    ));
}

#[test]
fn put_server_updates_identity_and_lists_servers_by_name() {
    let mut store = SqliteStore::open_in_memory().expect("in-memory store");
    store
        .put_server("zeta", r#"{"url":"http://127.0.0.1/a"}"#)
        .expect("put");
    store
        .put_server("alpha", r#"{ "command" : "x" }"#)
        .expect("put");
    store
        .put_server("zeta", r#"{"url":"http://127.0.0.1/b"}"#)
        .expect("put");
    let servers = store.servers().expect("servers");
    assert_eq!(
        servers,
        vec![
            Server {
                name: "alpha".into(),
                identity: r#"{"command":"x"}"#.into()
            },
            Server {
                name: "zeta".into(),
                identity: r#"{"url":"http://127.0.0.1/b"}"#.into()
            },
        ]
    );
    assert_eq!(
        store.server("zeta").unwrap().map(|s| s.identity),
        Some(r#"{"url":"http://127.0.0.1/b"}"#.to_owned())
    );
    assert_eq!(store.server("nobody").unwrap(), None);
}

#[test]
fn tool_history_lists_first_version_changes_removal_and_return() {
    let mut store = store_with("s");
    let v1 = r#"{"name":"t","description":"one"}"#;
    let v2 = r#"{"name":"t","description":"two"}"#;
    let other = r#"{"name":"u"}"#;
    let listings: [&[&str]; 6] = [
        &[other],
        &[other, v1],
        &[v1, other],
        &[v2, other],
        &[other],
        &[v1],
    ];
    let mut ids = Vec::new();
    for tools in listings {
        ids.push(
            store
                .record_observation(&ok_observation("s", tools))
                .expect("recorded"),
        );
    }
    let failed = NewObservation {
        outcome: Outcome::Failed {
            error: "down".into(),
        },
        ..ok_observation("s", &[])
    };
    store.record_observation(&failed).expect("failure recorded");

    let history = store.tool_history("s", "t").expect("history");
    let d = |raw: &str| canonicalize(raw.as_bytes()).map(|c| digest(&c)).ok();
    let got: Vec<(ObservationId, bool, Option<Digest>)> = history
        .iter()
        .map(|h| (h.observation, h.present, h.canonical_digest))
        .collect();
    assert_eq!(
        got,
        vec![
            (ids[1], true, d(v1)),
            (ids[3], true, d(v2)),
            (ids[4], false, None),
            (ids[5], true, d(v1)),
        ]
    );
}

#[test]
fn latest_successful_skips_failures_and_respects_before() {
    let mut store = store_with("s");
    let first = store
        .record_observation(&ok_observation("s", &[r#"{"name":"a"}"#]))
        .expect("ok");
    let failed = store
        .record_observation(&NewObservation {
            outcome: Outcome::Failed {
                error: "boom".into(),
            },
            ..ok_observation("s", &[])
        })
        .expect("failed");
    let latest = store.latest_successful("s", None).expect("read");
    assert_eq!(latest.map(|o| o.id), Some(first));
    let before_first = store.latest_successful("s", Some(first)).expect("read");
    assert_eq!(before_first, None);
    let before_failed = store.latest_successful("s", Some(failed)).expect("read");
    assert_eq!(before_failed.map(|o| o.id), Some(first));
}

#[test]
fn observation_that_does_not_exist_reads_as_none() {
    let store = store_with("s");
    assert_eq!(store.observation(ObservationId(42)).expect("read"), None);
}
