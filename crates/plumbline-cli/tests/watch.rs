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
