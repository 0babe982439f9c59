//! Prints the bytes the store's file grows by per observation of an
//! unchanged 50-tool server (issue 3's storage figure; target ≤ 200).
//!
//! ```sh
//! cargo run --release -p plumbline-store --example bytes_per_observation [N]
//! ```
//!
//! N is the number of observations, 10,000 by default.

#[path = "../tests/support/mod.rs"]
mod support;

use std::process::ExitCode;

fn main() -> ExitCode {
    let observations = match std::env::args().nth(1).map(|n| n.parse::<u64>()) {
        None => 10_000,
        Some(Ok(n)) if n >= 2 => n,
        Some(_) => {
            eprintln!("usage: bytes_per_observation [N ≥ 2]");
            return ExitCode::from(2);
        }
    };
    let dir = match tempfile::tempdir() {
        Ok(dir) => dir,
        Err(e) => {
            eprintln!("cannot create a temporary directory: {e}");
            return ExitCode::from(2);
        }
    };
    let started = std::time::Instant::now();
    match support::measure_unchanged_observations(dir.path(), observations) {
        Ok(m) => {
            println!(
                "{} observations of an unchanged 50-tool server: file {} bytes after the first, \
                 {} after all; {:.1} bytes per observation ({:.2?})",
                m.observations,
                m.bytes_after_first,
                m.bytes_after_all,
                m.bytes_per_observation(),
                started.elapsed(),
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
