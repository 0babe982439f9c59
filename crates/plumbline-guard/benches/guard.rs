//! Judging a real listing against its baseline: mcp-atlassian 0.23.1 (98
//! tools) against a lock pinned from itself (nothing changed: the common
//! case at every listing) and from 0.18.1 (65 tools: 33 new, the rest
//! partly reworded; a real release's drift). The target is 5 ms
//! for 100 tools. Ratios to parsing the same listing (serde_json into
//! Values) in the same run are the figures to report.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use plumbline_guard::judge::judge;
use plumbline_guard::Policy;
use plumbline_lock::plan::RawTool;
use plumbline_lock::{pin_tools, LockedServer};
use plumbline_taxonomy::{Classifier, Taxonomy};

fn listing(version: &str) -> Vec<RawTool> {
    let path = format!(
        "{}/../../testdata/listings/mcp-atlassian/{version}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).expect("testdata listing");
    let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    v["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| {
            let raw = serde_json::to_vec(t).expect("bytes");
            (t["name"].as_str().map(str::to_owned), raw)
        })
        .collect()
}

fn baseline(tools: &[RawTool]) -> LockedServer {
    LockedServer {
        identity: "{}".into(),
        tools: pin_tools(tools).tools,
        ..Default::default()
    }
}

fn bench(c: &mut Criterion) {
    let now = listing("0.23.1");
    let same = baseline(&now);
    let older = baseline(&listing("0.18.1"));
    let policy = Policy::default();
    let mut g = c.benchmark_group("judge_98_real_tools");
    g.bench_function("parse_only", |b| {
        b.iter(|| {
            for (_, raw) in &now {
                black_box(serde_json::from_slice::<serde_json::Value>(raw).unwrap());
            }
        })
    });
    for taxonomy in [Taxonomy::V1, Taxonomy::V2] {
        let classifier = Classifier::for_taxonomy(taxonomy);
        g.bench_function(format!("unchanged_{taxonomy:?}"), |b| {
            b.iter(|| black_box(judge(&classifier, Some(&same), &now, &policy).unwrap()))
        });
        g.bench_function(format!("release_drift_{taxonomy:?}"), |b| {
            b.iter(|| black_box(judge(&classifier, Some(&older), &now, &policy).unwrap()))
        });
    }
    g.finish();
}

/// Reading a client's `tools/call` before it is relayed: the guard's
/// lenient reader (every byte checked, the members it reads decoded)
/// against parsing the same message into serde_json values, on a call
/// whose arguments are 10 KB and 1 MB of real tool text.
fn read_calls(c: &mut Criterion) {
    let tools = listing("0.23.1");
    let text: String = tools
        .iter()
        .map(|(_, raw)| String::from_utf8_lossy(raw).into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let mut g = c.benchmark_group("read_call");
    for (label, size) in [("10kb", 10 << 10), ("1mb", 1 << 20)] {
        let body: String = text.chars().cycle().take(size).collect();
        let call = serde_json::json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "jira_create_issue", "arguments": {"description": body, "project": "ABC"}}})
        .to_string();
        g.bench_function(format!("serde_value_{label}"), |b| {
            b.iter(|| black_box(serde_json::from_str::<serde_json::Value>(&call).unwrap()))
        });
        g.bench_function(format!("guard_read_{label}"), |b| {
            b.iter(|| {
                let m = plumbline_guard::message::Message::read(call.as_bytes()).unwrap();
                black_box(m.param_str("name").unwrap())
            })
        });
    }
    g.finish();
}

/// A typical developer's home: an SSH key (ssh-keygen), cloud
/// credentials, a `.netrc`, a project's `.env`.
fn home(dir: &std::path::Path) -> plumbline_guard::secrets::local::Sources {
    let home = dir.join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::create_dir_all(home.join(".aws")).unwrap();
    let key = home.join(".ssh/id_ed25519");
    let rsa = home.join(".ssh/id_rsa");
    for (path, kind) in [(&key, "ed25519"), (&rsa, "rsa")] {
        std::process::Command::new("ssh-keygen")
            .args(["-q", "-t", kind, "-N", "", "-f"])
            .arg(path)
            .status()
            .expect("ssh-keygen");
    }
    std::fs::write(
        home.join(".aws/credentials"),
        "[default]\naws_access_key_id = AKIAQ3EXJ7MPLWD5TZ2N\naws_secret_access_key = 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\n",
    )
    .unwrap();
    std::fs::write(
        home.join(".netrc"),
        "machine h login a password ghp_Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe9Dc8\n",
    )
    .unwrap();
    let project = dir.join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join(".env"),
        "API_TOKEN=tok-2c9f1e7a4b6d8f0a1c3e5\nPORT=3000\n",
    )
    .unwrap();
    plumbline_guard::secrets::local::Sources::new(Some(home), Some(project), std::env::vars())
}

/// The secret check of a call (issue 37): building the fingerprints of a
/// typical home at start, and checking a call of 10 KB and 1 MB of real
/// tool text against them and the known formats, beside reading the same
/// call (the guard's reader) in the same run.
fn secret_check(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut g = c.benchmark_group("secrets");
    let sources = home(dir.path());
    let n = sources.sources.len();
    assert!(n >= 5, "{n} sources");
    g.bench_function("build_home_fingerprints", |b| {
        b.iter(|| {
            black_box(plumbline_guard::secrets::local::Sources::new(
                Some(dir.path().join("home")),
                Some(dir.path().join("project")),
                std::env::vars(),
            ))
        })
    });
    // Reading the built-in rules (once per guard, when it starts): each
    // rule's syntax is read for where its keywords are looked for.
    g.bench_function("parse_rules", |b| {
        let config = include_str!("../data/gitleaks.toml");
        b.iter(|| black_box(plumbline_guard::secrets::rules::Rules::parse(config).unwrap()))
    });
    let watch = plumbline_guard::SecretWatch::new(sources);
    let policy = Policy::default();
    let tools = listing("0.23.1");
    let text: String = tools
        .iter()
        .map(|(_, raw)| String::from_utf8_lossy(raw).into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    for (label, size) in [("10kb", 10 << 10), ("1mb", 1 << 20)] {
        let body: String = text.chars().cycle().take(size).collect();
        let arguments = serde_json::json!({"description": body, "project": "ABC"}).to_string();
        g.bench_function(format!("scan_call_{label}"), |b| {
            b.iter(|| {
                black_box(
                    watch
                        .scan(&policy, "jira_create_issue", Some(arguments.as_bytes()))
                        .unwrap(),
                )
            })
        });
    }
    // The call `scripts/bench-guard` sends (10 KB of tool descriptions),
    // hot and from a cold cache: in the guard, between two calls, the
    // client and the server run on the same two cores and evict what
    // the check reads (its filters, the rules' automata), so the hot
    // figure understates what a call costs there.
    let body = descriptions(10 << 10);
    let arguments = serde_json::json!({"order": "42", "note": body}).to_string();
    let scan = || {
        black_box(
            watch
                .scan(&policy, "lookup_order", Some(arguments.as_bytes()))
                .unwrap(),
        )
    };
    assert!(scan().is_none());
    let mut trash = vec![0u8; 16 << 20];
    hot_and_cold(&mut g, "scan_descriptions_10kb", &mut trash, scan);
    // Its parts: the fingerprints of the user's secrets alone (the
    // check's own, held while the check is not run).
    let own = watch.own.lock().unwrap();
    let fingerprints = || black_box(own.found_in(black_box(body.as_bytes())));
    assert!(fingerprints().is_none());
    hot_and_cold(
        &mut g,
        "fingerprints_descriptions_10kb",
        &mut trash,
        fingerprints,
    );
    drop(own);
    g.finish();
}

/// Times `f` hot (`name`) and from a cold cache (`name_cold`): before
/// each run of the latter, a buffer larger than the caches (`trash`) is
/// written, so that what `f` reads comes from memory.
fn hot_and_cold<O>(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    trash: &mut [u8],
    f: impl Fn() -> O,
) {
    g.bench_function(name, |b| b.iter(&f));
    g.bench_function(format!("{name}_cold"), |b| {
        b.iter_batched(
            || {
                for at in (0..trash.len()).step_by(64) {
                    trash[at] = trash[at].wrapping_add(1);
                }
                black_box(&mut *trash);
            },
            |()| f(),
            criterion::BatchSize::PerIteration,
        )
    });
}

/// `size` bytes of mcp-atlassian's tool descriptions, joined: the text
/// `scripts/bench-guard` sends as an argument.
fn descriptions(size: usize) -> String {
    let text: String = listing("0.23.1")
        .iter()
        .filter_map(|(_, raw)| {
            let tool: serde_json::Value = serde_json::from_slice(raw).ok()?;
            tool["description"].as_str().map(str::to_owned)
        })
        .collect::<Vec<_>>()
        .join(" ");
    text.chars().cycle().take(size).collect()
}

/// Where the known-format check of 10 KB of real tool descriptions (the
/// text `scripts/bench-guard` sends) spends its time: every rule, none
/// (what any text costs: its runs read and the keyword search, with
/// nothing to find), and the rules alone whose keywords the text holds
/// most near its long runs (JWT's `ey`, searched for in the whole text;
/// Atlassian's product names, tried at each of them).
fn rule_parts(c: &mut Criterion) {
    use plumbline_guard::secrets::rules::Rules;
    let body = descriptions(10 << 10);
    let config = include_str!("../data/gitleaks.toml");
    let (head, rest) = config.split_at(config.find("[[rules]]").unwrap());
    let only = |keep: &dyn Fn(&str) -> bool| {
        let mut t = head.to_owned();
        for rule in rest.split("[[rules]]").filter(|r| !r.trim().is_empty()) {
            let id = rule
                .lines()
                .find_map(|l| l.strip_prefix("id = "))
                .unwrap_or("");
            if keep(id.trim_matches('"')) {
                t.push_str("[[rules]]");
                t.push_str(rule);
            }
        }
        Rules::parse(&t).unwrap()
    };
    let mut trash = vec![0u8; 16 << 20];
    let mut g = c.benchmark_group("rules_10kb_descriptions");
    for (label, rules) in [
        ("all", only(&|_| true)),
        ("none", only(&|_| false)),
        ("jwt", only(&|id| id == "jwt")),
        ("atlassian", only(&|id| id == "atlassian-api-token")),
    ] {
        assert!(rules.find_bytes(body.as_bytes()).is_none());
        hot_and_cold(&mut g, label, &mut trash, || {
            black_box(rules.find_bytes(black_box(body.as_bytes())))
        });
    }
    g.finish();
}

criterion_group!(benches, bench, read_calls, secret_check, rule_parts);
criterion_main!(benches);
