//! `plumbline watch --once` end to end: a real MCP server changes its
//! tools, and a webhook receiver inside the test gets exactly one signed
//! alert for the rug pull, none for the cosmetic edit, and none again on
//! a later round or a restart.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};

use common::{plumbline, text};
use serde_json::Value;

/// Accepted webhook requests: (body, X-Plumbline-Signature).
type Received = Arc<Mutex<Vec<(Vec<u8>, Option<String>)>>>;

/// A minimal HTTP receiver on 127.0.0.1 that answers 204 to every POST.
fn receiver() -> (String, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let received: Received = Arc::default();
    let sink = Arc::clone(&received);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut length = 0usize;
            let mut signature = None;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let line = line.trim_end();
                if line.is_empty() {
                    break;
                }
                if let Some((k, v)) = line.split_once(':') {
                    match k.to_ascii_lowercase().as_str() {
                        "content-length" => length = v.trim().parse().unwrap_or(0),
                        "x-plumbline-signature" => signature = Some(v.trim().to_owned()),
                        _ => {}
                    }
                }
            }
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_ok() {
                sink.lock().unwrap().push((body, signature));
            }
            let mut stream = stream;
            let _ = stream.write_all(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
        }
    });
    (url, received)
}

fn config(dir: &Path, phase: u8, url: &str) {
    let exe = env!("CARGO_BIN_EXE_plumbline");
    std::fs::write(
        dir.join("plumbline.toml"),
        format!(
            "[[alerts]]\nname = \"security\"\ntype = \"webhook\"\nurl = \"{url}\"\nsecret = \"${{HOOK_SECRET}}\"\nmin_severity = \"high\"\n\n[servers.shop]\ntransport = \"stdio\"\ncommand = {exe:?}\nargs = [\"__demo-server\"]\nenv = {{ PLUMBLINE_DEMO_PHASE = \"{phase}\" }}\n"
        ),
    )
    .expect("config");
}

fn watch_once(dir: &Path) {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_plumbline"))
        .args(["watch", "--once", "--store", "p.db"])
        .current_dir(dir)
        .env("HOOK_SECRET", "s3cret")
        .env_remove("PLUMBLINE_CONFIG")
        .output()
        .expect("watch runs");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn a_rug_pull_sends_exactly_one_signed_alert() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let (url, received) = receiver();
    config(d, 1, &url);
    watch_once(d);
    assert!(
        received.lock().unwrap().is_empty(),
        "a first observation alerts nothing"
    );
    config(d, 2, &url);
    watch_once(d);
    watch_once(d); // an unchanged round
    let got = received.lock().unwrap().clone();
    assert_eq!(got.len(), 1, "exactly one alert: {got:?}");
    let (body, signature) = &got[0];
    assert!(plumbline_alert::verify(
        b"s3cret",
        body,
        signature.as_deref().expect("signed")
    ));
    let v: Value = serde_json::from_slice(body).expect("JSON");
    assert_eq!(v["tool"], "add");
    assert_eq!(v["severity"], "CRITICAL");
    assert_eq!(v["kind"], "drift");
    // The store has both observations, and nothing is left to deliver.
    let log = plumbline(d, &["log", "shop", "--store", "p.db", "--format", "json"]);
    let v: Value = serde_json::from_slice(&log.stdout).expect("JSON");
    assert_eq!(v["servers"][0]["observations"].as_array().unwrap().len(), 3);
}

#[test]
fn a_server_that_goes_down_alerts_once_and_recovers_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let (url, received) = receiver();
    config(d, 1, &url);
    watch_once(d);
    // Down: the command no longer exists.
    let down = std::fs::read_to_string(d.join("plumbline.toml"))
        .unwrap()
        .replace(env!("CARGO_BIN_EXE_plumbline"), "/nonexistent/mcp-server");
    std::fs::write(d.join("plumbline.toml"), down).unwrap();
    watch_once(d);
    watch_once(d);
    config(d, 1, &url);
    watch_once(d);
    let kinds: Vec<String> = received
        .lock()
        .unwrap()
        .iter()
        .map(|(b, _)| {
            serde_json::from_slice::<Value>(b).unwrap()["kind"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(kinds, ["failure", "recovery"]);
}

/// `GET path` on 127.0.0.1:`port`: the status code and body, or None while
/// nothing listens.
fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Some((status, body))
}

#[test]
fn the_daemon_serves_health_and_metrics_and_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let (url, _received) = receiver();
    config(d, 1, &url);
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut toml = std::fs::read_to_string(d.join("plumbline.toml")).unwrap();
    toml = format!("[watch]\ninterval_secs = 3600\nlisten = \"127.0.0.1:{port}\"\n\n{toml}");
    std::fs::write(d.join("plumbline.toml"), toml).unwrap();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_plumbline"))
        .args(["watch", "--store", "p.db"])
        .current_dir(d)
        .env("HOOK_SECRET", "s3cret")
        .env_remove("PLUMBLINE_CONFIG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("watch starts");
    // Wait for the first round to be counted.
    let mut metrics = String::new();
    for _ in 0..400 {
        if let Some((200, body)) = http_get(port, "/metrics") {
            if body.contains("plumbline_observations_total{outcome=\"ok\"} 1") {
                metrics = body;
                break;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(!metrics.is_empty(), "no observation counted on /metrics");
    assert!(
        metrics.contains("# TYPE plumbline_observation_duration_seconds histogram"),
        "{metrics}"
    );
    assert_eq!(http_get(port, "/healthz").map(|(s, _)| s), Some(200));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM");
    let out = child.wait_with_output().expect("watch exits");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // The store is whole: the observation is there and reads back.
    let log = plumbline(d, &["log", "shop", "--store", "p.db", "--format", "json"]);
    let v: Value = serde_json::from_slice(&log.stdout).expect("JSON");
    assert_eq!(v["servers"][0]["observations"][0]["outcome"], "ok");
}
