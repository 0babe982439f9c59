//! Running the built `plumbline` binary in a test directory.

use std::path::Path;
use std::process::{Command, Output};

/// Runs `plumbline ARGS` in `dir`, with no store or registry taken from
/// the environment.
pub fn plumbline(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_plumbline"))
        .args(args)
        .current_dir(dir)
        .env_remove("PLUMBLINE_STORE")
        .env_remove("PLUMBLINE_CONFIG")
        .output()
        .expect("plumbline runs")
}

/// Status, stdout and stderr, for assertion messages.
pub fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
