//! Writes a store with one server's long history, recorded through the
//! history as `plumbline observe` records it (each change graded once),
//! for measuring its readers:
//!
//! ```sh
//! cargo run --release -p plumbline-history --example synthetic_history -- PATH [N [CHANGES]]
//! plumbline log docs --store PATH --limit N
//! ```

#[path = "../tests/support/mod.rs"]
mod support;

use std::process::ExitCode;

use plumbline_history::Grader;
use plumbline_store::SqliteStore;
use plumbline_taxonomy::Taxonomy;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: synthetic_history PATH [N [CHANGES]]");
        return ExitCode::from(2);
    };
    let n: u64 = args.next().and_then(|n| n.parse().ok()).unwrap_or(10_000);
    let changes: u64 = args.next().and_then(|c| c.parse().ok()).unwrap_or(2_000);
    let grader = Grader::new(Taxonomy::V1);
    let result = SqliteStore::open(std::path::Path::new(&path))
        .map_err(plumbline_history::HistoryError::from)
        .and_then(|mut store| support::long_history(&mut store, &grader, n, changes));
    match result {
        Ok(()) => {
            println!(
                "{path}: {n} observations, {} changes graded",
                grader.graded()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{path}: {e}");
            ExitCode::from(1)
        }
    }
}
