//! Where a server's tool set changed: recorded with each observation, and
//! filled in for observations recorded before schema version 4.

mod support;

use plumbline_store::prelude::*;
use plumbline_store::{ObservationId, RawTool, SqliteStore};
use support::{failed_observation, ok_observation, tool_name};

fn tools(description: &str) -> Vec<RawTool> {
    let text = format!(
        r#"{{"name":"search","description":"{description}","inputSchema":{{"type":"object"}}}}"#
    );
    vec![RawTool {
        name: tool_name(text.as_bytes()),
        raw: text.into_bytes(),
        normalized: None,
    }]
}

/// A, A, failure, B, B, other server, A: two changes of "docs", each
/// against the success just before it, failures and other servers aside.
fn record(store: &mut SqliteStore) -> Vec<ObservationId> {
    store.put_server("docs", "{}").unwrap();
    store.put_server("other", "{}").unwrap();
    let mut ids = Vec::new();
    let mut rec = |o| ids.push(store.record_observation(&o).expect("recorded"));
    rec(ok_observation("docs", 1, tools("A")));
    rec(ok_observation("docs", 2, tools("A")));
    rec(failed_observation("docs", 3, "connection refused"));
    rec(ok_observation("docs", 4, tools("B")));
    rec(ok_observation("docs", 5, tools("B")));
    rec(ok_observation("other", 6, tools("C")));
    rec(ok_observation("docs", 7, tools("A")));
    ids
}

fn changes(store: &SqliteStore, server: &str) -> Vec<(ObservationId, ObservationId)> {
    store
        .tool_set_changes(server)
        .expect("changes")
        .into_iter()
        .map(|(new, old)| (new.id, old.id))
        .collect()
}

#[test]
fn each_change_is_paired_with_the_success_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SqliteStore::open(dir.path().join("p.db")).unwrap();
    let ids = record(&mut store);
    assert_eq!(
        changes(&store, "docs"),
        [(ids[3], ids[1]), (ids[6], ids[4])]
    );
    assert_eq!(changes(&store, "other"), []);
    let (new, old) = &store.tool_set_changes("docs").unwrap()[0];
    assert_ne!(new.tool_set, old.tool_set);
}

#[test]
fn a_store_from_before_version_4_has_its_changes_filled_in() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    let ids = record(&mut SqliteStore::open(&path).unwrap());
    // Take the file back to schema version 3, as an older Plumbline left it.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "DROP INDEX alerts_due; DROP INDEX alerts_failed;
         ALTER TABLE alerts DROP COLUMN next_attempt_at_ms;
         ALTER TABLE alerts DROP COLUMN failed_at_ms;
         CREATE INDEX alerts_pending ON alerts (id) WHERE delivered_at_ms IS NULL;
         ALTER TABLE tool_set_entries DROP COLUMN normalized_raw_tool_id;
         ALTER TABLE tool_set_entries DROP COLUMN normalized_by;
         DROP TABLE observation_inventories; DROP TABLE inventories;
         DROP TABLE drift_summaries; DROP TABLE tool_set_changes;
         DROP TABLE leases; DROP TABLE watchers;
         DROP INDEX observations_authorized;
         ALTER TABLE observations DROP COLUMN authorization_id;
         DROP TABLE guard_events;
         DROP INDEX alerts_by_server; DROP TABLE server_names; DROP TABLE history;
         PRAGMA user_version = 3;",
    )
    .unwrap();
    drop(conn);
    let store = SqliteStore::open(&path).expect("migrates");
    assert_eq!(store.schema_version().unwrap(), SqliteStore::SCHEMA_VERSION);
    assert_eq!(
        changes(&store, "docs"),
        [(ids[3], ids[1]), (ids[6], ids[4])]
    );
}

/// Drift summaries are kept per (old set, new set, grader), replaced under
/// the same key, and outlive the connection that wrote them.
#[test]
fn drift_summaries_are_kept_by_tool_sets_and_grader() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.db");
    let mut store = SqliteStore::open(&path).unwrap();
    record(&mut store);
    let (new, old) = store.tool_set_changes("docs").unwrap()[0].clone();
    let (old, new) = (old.tool_set.unwrap(), new.tool_set.unwrap());
    assert_eq!(store.drift_summary(&old, &new, "g1").unwrap(), None);
    store.put_drift_summary(&old, &new, "g1", b"first").unwrap();
    store
        .put_drift_summary(&old, &new, "g1", b"second")
        .unwrap();
    store.put_drift_summary(&old, &new, "g2", b"other").unwrap();
    drop(store);
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(
        store.drift_summary(&old, &new, "g1").unwrap().as_deref(),
        Some(&b"second"[..])
    );
    assert_eq!(
        store.drift_summary(&old, &new, "g2").unwrap().as_deref(),
        Some(&b"other"[..])
    );
    // The reverse change is another change.
    assert_eq!(store.drift_summary(&new, &old, "g1").unwrap(), None);
}

/// The inventory a change was graded with is kept with its observation,
/// once per distinct set of names, sorted and each once; another
/// observation with the same names shares it, and keeping one again
/// replaces it.
#[test]
fn an_observations_inventory_is_kept_sorted_and_shared() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("i.db");
    let mut store = SqliteStore::open(&path).unwrap();
    let ids = record(&mut store);
    assert_eq!(store.inventory(ids[3]).unwrap(), None);
    let names = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let kept = store
        .put_inventory(ids[3], &names(&["fetch", "add", "fetch"]))
        .unwrap();
    let shared = store
        .put_inventory(ids[6], &names(&["add", "fetch"]))
        .unwrap();
    assert_eq!(kept, shared);
    assert_eq!(
        kept,
        plumbline_store::digest(br#"["add","fetch"]"#),
        "the digest is of the stored text"
    );
    drop(store);
    let mut store = SqliteStore::open(&path).unwrap();
    let kept_as = |store: &SqliteStore, id| {
        let digest = store.inventory(id).unwrap()?;
        Some((digest, store.inventory_names(&digest).unwrap()?))
    };
    assert_eq!(
        kept_as(&store, ids[3]),
        Some((kept, names(&["add", "fetch"])))
    );
    let other = store.put_inventory(ids[3], &names(&["search"])).unwrap();
    assert_ne!(other, kept);
    assert_eq!(kept_as(&store, ids[3]), Some((other, names(&["search"]))));
    assert_eq!(
        kept_as(&store, ids[6]),
        Some((kept, names(&["add", "fetch"])))
    );
    assert_eq!(
        store
            .inventory_names(&plumbline_store::digest(b"[]"))
            .unwrap(),
        None
    );
}
