//! One story end to end on each backend, through the real binary: a
//! watcher records a server and alerts its rug pull once, `log` reads the
//! history, the gate fails against the accepted baseline, a reviewer
//! accepts the change on the dashboard, and the gate passes. On
//! PostgreSQL every process (two watchers, `log`, the dashboard, the gate)
//! is a different client of one database: what one writes, the next reads.

mod common;

use std::path::Path;

use common::{http, http_post_json, plumbline, receiver, text, Dashboard};
use plumbline_store::testing::TestDatabase;
use serde_json::Value;

/// The demo server at `phase` (1: clean, 2: the rug pull), alerting `url`.
fn config(dir: &Path, phase: u8, url: &str) {
    let exe = env!("CARGO_BIN_EXE_plumbline");
    std::fs::write(
        dir.join("plumbline.toml"),
        format!(
            "[[alerts]]\nname = \"security\"\ntype = \"webhook\"\nurl = \"{url}\"\nmin_severity = \"high\"\n\n[servers.shop]\ntransport = \"stdio\"\ncommand = {exe:?}\nargs = [\"__demo-server\"]\nenv = {{ PLUMBLINE_DEMO_PHASE = \"{phase}\" }}\n"
        ),
    )
    .expect("config");
}

fn run(dir: &Path, args: &[&str], code: i32) -> Value {
    let out = plumbline(dir, args);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

fn story(store: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let (url, received) = receiver();
    config(d, 1, &url);
    run(d, &["watch", "--once", "--store", store], 0);
    config(d, 2, &url);
    run(d, &["watch", "--once", "--store", store], 0);
    // Another watcher process, the same history: nothing new to alert.
    run(d, &["watch", "--once", "--store", store], 0);
    let alerts = received.lock().unwrap().clone();
    assert_eq!(alerts.len(), 1, "one alert for the rug pull");
    let alert: Value = serde_json::from_slice(&alerts[0].0).expect("JSON");
    assert_eq!(alert["severity"], "CRITICAL");

    let log = run(d, &["log", "shop", "--store", store, "--format", "json"], 0);
    assert_eq!(
        log["servers"][0]["observations"].as_array().unwrap().len(),
        3
    );
    let gate = ["check", "shop", "--against-store", "--store", store];
    run(d, &gate, 1);

    let dashboard = Dashboard::start_on(d, store);
    let observation = alert["observation"].as_i64().expect("observation id");
    let (status, body) = http_post_json(
        &format!(
            "{}api/v1/servers/shop/observations/{observation}/tools/add/review",
            dashboard.url
        ),
        r#"{"status":"accepted","reviewer":"alice"}"#,
    )
    .expect("the dashboard answers");
    assert_eq!(status, 200, "{body}");
    let (status, body) = http(
        "GET",
        &format!("{}api/v1/servers/shop/baseline", dashboard.url),
    )
    .expect("the dashboard answers");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("alice"), "{body}");
    assert!(dashboard.stop().success());
    // What the reviewer accepted is what the gate reads.
    run(d, &gate, 0);
}

#[test]
fn the_story_on_sqlite() {
    story("p.db");
}

#[test]
fn the_story_on_postgresql() {
    let database = TestDatabase::create();
    story(database.url());
}

#[test]
fn a_history_copied_to_postgresql_and_back_reads_the_same_and_checks_sound() {
    let database = TestDatabase::create();
    let url = database.url();
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let (hook, _) = receiver();
    for phase in [1, 2] {
        config(d, phase, &hook);
        run(d, &["watch", "--once", "--store", "p.db"], 0);
    }
    let copied = plumbline(d, &["store", "copy", "--from", "p.db", "--to", url]);
    assert_eq!(copied.status.code(), Some(0), "{}", text(&copied));
    let said = String::from_utf8_lossy(&copied.stdout);
    assert!(said.contains("both hold the same rows"), "{said}");
    assert!(
        said.lines()
            .any(|l| l.starts_with("observations") && l.contains("same")),
        "{said}"
    );
    // The log of each store, but for the line naming the store.
    let log = |store: &str| {
        let mut v = run(d, &["log", "shop", "--store", store, "--format", "json"], 0);
        v.as_object_mut().unwrap().remove("store");
        v
    };
    assert_eq!(log(url), log("p.db"));
    let checked = plumbline(d, &["store", "check", "--store", url]);
    assert_eq!(checked.status.code(), Some(0), "{}", text(&checked));
    assert!(text(&checked).contains("sound"), "{}", text(&checked));

    // Again (idempotent), and back into a new file.
    let again = plumbline(d, &["store", "copy", "--from", "p.db", "--to", url]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    let back = plumbline(d, &["store", "copy", "--from", url, "--to", "back.db"]);
    assert_eq!(back.status.code(), Some(0), "{}", text(&back));
    assert_eq!(log("back.db"), log("p.db"));

    // Into a store that holds another history: refused after the fact,
    // with what differs.
    config(d, 1, &hook);
    run(d, &["watch", "--once", "--store", "other.db"], 0);
    let before = log("other.db");
    let mixed = plumbline(d, &["store", "copy", "--from", "p.db", "--to", "other.db"]);
    assert_eq!(mixed.status.code(), Some(2), "{}", text(&mixed));
    assert!(
        text(&mixed).contains("holds another history"),
        "{}",
        text(&mixed)
    );
    assert!(
        text(&mixed).contains("nothing was copied"),
        "{}",
        text(&mixed)
    );
    assert_eq!(log("other.db"), before, "nothing written");
    // A store that is not there is not copied from.
    let missing = plumbline(d, &["store", "copy", "--from", "nope.db", "--to", "x.db"]);
    assert_eq!(missing.status.code(), Some(2), "{}", text(&missing));
    assert!(!d.join("x.db").exists());
}

#[test]
fn two_processes_opening_a_new_database_at_once_both_migrate_it() {
    for _ in 0..3 {
        let database = TestDatabase::create();
        let dir = tempfile::tempdir().expect("temp dir");
        let start = |d: &Path| {
            std::process::Command::new(env!("CARGO_BIN_EXE_plumbline"))
                .args(["store", "check", "--store", database.url()])
                .current_dir(d)
                .env_remove("PLUMBLINE_STORE")
                .env_remove("PLUMBLINE_CONFIG")
                .output()
        };
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| start(dir.path()).expect("runs"));
            let b = s.spawn(|| start(dir.path()).expect("runs"));
            (a.join().unwrap(), b.join().unwrap())
        });
        for out in [a, b] {
            assert_eq!(out.status.code(), Some(0), "{}", text(&out));
            assert!(text(&out).contains("sound"), "{}", text(&out));
        }
    }
}
