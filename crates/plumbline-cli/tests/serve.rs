//! `plumbline serve` end to end: the refusal to listen openly without a
//! token, and the dashboard answering on a loopback port until SIGTERM.

mod common;

use common::{http_response, plumbline, text, Dashboard};

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
fn serve_refuses_a_blank_or_short_token() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("store.db");
    let store_arg = store.to_str().expect("UTF-8 path");
    for token in ["   ", "short-token", "  fifteen-chars!  "] {
        let out = plumbline(
            dir.path(),
            &[
                "serve",
                "--listen",
                "0.0.0.0:0",
                "--store",
                store_arg,
                "--token",
                token,
            ],
        );
        assert_eq!(out.status.code(), Some(2), "{token:?}: {}", text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("at least 16 characters"), "{stderr}");
        assert!(!store.exists(), "refused before opening the store");
    }
}

#[test]
fn serve_answers_on_loopback_with_the_security_headers_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().expect("temp dir");
    // An empty store, as a first `observe` or `watch` leaves it (serve
    // refuses one that does not exist).
    plumbline_store::SqliteStore::open(dir.path().join("p.db")).expect("a new store");
    let dashboard = Dashboard::start(dir.path());
    let response = http_response("GET", &dashboard.url).expect("an answer");
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
    assert_eq!(dashboard.stop().code(), Some(0), "a clean stop");
}
