//! `plumbline serve` end to end: the refusal to listen openly without a
//! token, and the dashboard answering on a loopback port until SIGTERM.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{plumbline, text};

#[test]
fn serve_refuses_a_non_loopback_address_without_a_token() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("store.db");
    let store_arg = store.to_str().expect("UTF-8 path");
    let out = plumbline(
        dir.path(),
        &["serve", "--listen", "0.0.0.0:0", "--store", store_arg],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a loopback address"), "{stderr}");
    assert!(stderr.contains("PLUMBLINE_TOKEN"), "{stderr}");
    assert!(!store.exists(), "refused before opening the store");
}

#[test]
fn serve_answers_on_loopback_with_the_security_headers_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("store.db");
    let mut child = Command::new(env!("CARGO_BIN_EXE_plumbline"))
        .args(["serve", "--listen", "127.0.0.1:0", "--store"])
        .arg(&store)
        .env_remove("PLUMBLINE_STORE")
        .env_remove("PLUMBLINE_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("plumbline serve starts");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let mut first = String::new();
    stderr.read_line(&mut first).expect("a line");
    let addr = first
        .trim()
        .strip_prefix("plumbline serve: the dashboard is at http://")
        .and_then(|rest| rest.strip_suffix('/'))
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_owned();

    let mut stream = TcpStream::connect(&addr).expect("connects");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write!(
        stream,
        "GET / HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    let lower = response.to_ascii_lowercase();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(
        lower.contains("content-security-policy: default-src 'none'"),
        "{response}"
    );
    assert!(
        lower.contains("x-content-type-options: nosniff"),
        "{response}"
    );
    assert!(response.contains("No observations yet"), "{response}");

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("signal");
    let status = child.wait().expect("exits");
    assert_eq!(status.code(), Some(0), "a clean stop");
}
