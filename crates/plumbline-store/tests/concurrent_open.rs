//! Processes that open one new store at the same moment (a watcher
//! starting while `plumbline log` polls it) all get a migrated store.

use std::sync::{Arc, Barrier};

use plumbline_store::SqliteStore;

#[test]
fn a_new_store_opened_from_many_connections_at_once_opens_for_all() {
    let dir = tempfile::tempdir().expect("temp dir");
    for round in 0..20 {
        let path = dir.path().join(format!("s{round}.db"));
        let start = Arc::new(Barrier::new(8));
        let openers: Vec<_> = (0..8)
            .map(|_| {
                let (path, start) = (path.clone(), Arc::clone(&start));
                std::thread::spawn(move || {
                    start.wait();
                    SqliteStore::open(&path).map(|s| s.schema_version().expect("version"))
                })
            })
            .collect();
        for opener in openers {
            let version = opener.join().expect("no panic").expect("the store opens");
            assert_eq!(version, SqliteStore::SCHEMA_VERSION);
        }
    }
}
