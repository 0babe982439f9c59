//! Observations per second one process records into each backend, in the
//! same run: a 50-tool server observed unchanged N times (after a first
//! observation stores its content), into a SQLite file in a temporary
//! directory and into a new PostgreSQL database on the test server
//! (`$PLUMBLINE_TEST_POSTGRES`, else 127.0.0.1:5432), dropped afterwards.
//! Also prints each store's bytes per unchanged observation.
//!
//! ```sh
//! cargo run --release -p plumbline-store --features testing --example record_rate [N]
//! ```

#[path = "../tests/support/mod.rs"]
mod support;

use plumbline_store::prelude::*;
use std::process::ExitCode;
use std::time::Instant;

use plumbline_store::testing::{Backend, TestStore};
use plumbline_store::AnyStore;

fn bytes(fx: &TestStore, store: &AnyStore) -> u64 {
    match store {
        AnyStore::Sqlite(s) => {
            s.checkpoint().expect("checkpoint");
            std::fs::metadata(s.path()).map(|m| m.len()).unwrap_or(0)
        }
        AnyStore::Postgres(_) => {
            let mut client = fx.database().expect("a database").client();
            let row = client
                .query_one(
                    "SELECT sum(pg_total_relation_size(c.oid))::bigint FROM pg_class c
                     JOIN pg_namespace n ON n.oid = c.relnamespace
                     WHERE n.nspname = 'public' AND c.relkind = 'r'",
                    &[],
                )
                .expect("sizes");
            row.get::<_, i64>(0) as u64
        }
    }
}

fn main() -> ExitCode {
    let n = match std::env::args().nth(1).map(|n| n.parse::<u32>()) {
        None => 5_000,
        Some(Ok(n)) if n >= 1 => n,
        Some(_) => {
            eprintln!("usage: record_rate [N ≥ 1]");
            return ExitCode::from(2);
        }
    };
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let fx = TestStore::new(backend);
        let mut store = fx.open();
        store
            .put_server("docs", r#"{"transport":"stdio","command":"docs"}"#)
            .expect("server");
        let tools = support::fifty_tools();
        store
            .record_observation(&support::ok_observation("docs", 0, tools.clone()))
            .expect("first");
        let before = bytes(&fx, &store);
        let started = Instant::now();
        for i in 1..=n {
            store
                .record_observation(&support::ok_observation(
                    "docs",
                    i64::from(i),
                    tools.clone(),
                ))
                .expect("recorded");
        }
        let seconds = started.elapsed().as_secs_f64();
        let after = bytes(&fx, &store);
        println!(
            "{backend:?}: {n} unchanged observations of 50 tools in {seconds:.2} s: {:.0} per second, {:.0} bytes each",
            f64::from(n) / seconds,
            (after.saturating_sub(before)) as f64 / f64::from(n)
        );
    }
    ExitCode::SUCCESS
}
