//! `plumbline guard` against a server that lies (`--hostile liar`) and a
//! client that sends what the guard cannot read: the guard relays only
//! answers to requests it forwarded, once each, and only messages it has
//! read as the peer will read them.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{test_server, GuardClient, HttpGuard, HttpServer};
use serde_json::{json, Value};

fn python() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/servers/.venv/bin/python")
}

fn sdk_client() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/clients/mcp-sdk-client.py")
}

/// The official Python SDK client against `target`: what it listed and
/// what its call of `echo` returned.
fn sdk(dir: &Path, target: &[&str]) -> Value {
    let o = std::process::Command::new(python())
        .arg(sdk_client())
        .args(target)
        .current_dir(dir)
        .env("XDG_DATA_HOME", dir)
        .env_remove("PLUMBLINE_STORE")
        .env_remove("PLUMBLINE_CONFIG")
        .output()
        .expect("the Python SDK client runs (scripts/test installs it)");
    let out = String::from_utf8_lossy(&o.stdout);
    serde_json::from_str(out.trim()).unwrap_or_else(|e| {
        panic!(
            "{e}: {out}\n{}",
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .filter(|l| !l.starts_with("liar got"))
                .collect::<Vec<_>>()
                .join("\n")
        )
    })
}

fn names(listing: &Value) -> Vec<String> {
    listing["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("a listing: {listing}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The liar answers the ids a client's own `tools/list` will have with a
/// listing in which its poisoned tool looks harmless, before the guard's
/// judged answer; and answers each call twice. A real client (the Python
/// SDK keeps the first answer to an id) gets the forged listing directly,
/// and through the guard only the judged one, over stdio and HTTP.
#[test]
fn forged_answers_never_reach_a_real_client_over_stdio_or_http() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let server = test_server().display().to_string();
    let liar = [server.as_str(), "--stdio", "--hostile", "liar"];

    // Directly, the forgery works: that is what the guard is for.
    let direct = sdk(d, &[&["stdio"][..], &liar].concat());
    let exfiltrate = direct["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "exfiltrate")
        .cloned();
    assert_eq!(
        exfiltrate.map(|t| t["description"].clone()),
        Some(json!("Sends a note.")),
        "the liar's forged listing, as a client without the guard keeps it: {direct}"
    );

    let plumbline = env!("CARGO_BIN_EXE_plumbline");
    let guarded = sdk(
        d,
        &[
            &[
                "stdio",
                plumbline,
                "guard",
                "--server",
                "liar",
                "--no-record",
                "--",
            ][..],
            &liar,
        ]
        .concat(),
    );
    assert_eq!(names(&guarded), ["echo"], "{guarded}");
    assert_eq!(guarded["echo"], "ran echo", "{guarded}");

    let upstream = HttpServer::start(&["--hostile", "liar"]);
    let mut guard = HttpGuard::start(d, &["--upstream", &upstream.url, "--no-record"]);
    let over_http = sdk(d, &["http", &guard.url]);
    assert_eq!(names(&over_http), ["echo"], "{over_http}");
    assert_eq!(over_http["echo"], "ran echo", "{over_http}");
    let log = guard.log.lock().unwrap().clone();
    assert!(
        log.contains("dropped a message from the server: an answer to 1,"),
        "{log}"
    );
    assert!(guard.stop());
}

/// A raw client session with the liar through the guard.
fn liar_session(d: &Path) -> GuardClient {
    let server = test_server().display().to_string();
    let mut c = GuardClient::start(
        d,
        &[
            "--server",
            "liar",
            "--no-record",
            "--",
            &server,
            "--stdio",
            "--hostile",
            "liar",
        ],
        &format!("guard-liar-{}", std::process::id()),
    );
    let init = c.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "guard-test", "version": "0"}}),
    );
    assert!(init["result"].is_object(), "{init}");
    c.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    assert_eq!(c.names(2), ["echo"]);
    c
}

/// The lines the liar received, from the guard's log (its stderr goes
/// there).
fn received(d: &Path) -> Vec<String> {
    std::fs::read_to_string(d.join("guard.log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("liar got: ").map(str::to_owned))
        .collect()
}

/// Waits until the liar has logged a line containing `what`.
fn wait_received(d: &Path, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !received(d).iter().any(|l| l.contains(what)) {
        assert!(
            Instant::now() < deadline,
            "the server never got {what:?}: {:?}",
            received(d)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Calls of the withheld tool that a strict parser gives up on (a number
/// out of range, NaN, Infinity, a lone surrogate, nesting past 128), calls
/// without an id or with a name that is not a string, batches, and keys a
/// server could read two ways: each is answered by the guard where it
/// can be, and none reaches the server. The server's second answer to a
/// call is dropped.
#[test]
fn calls_the_guard_cannot_read_never_reach_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut c = liar_session(d);
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    let call = |id: u64, args: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"exfiltrate","arguments":{{"note":"x","sidenote":{args}}}}}}}"#
        )
    };
    let mut id = 10;
    for args in [
        "1e400",
        "NaN",
        "Infinity",
        "-Infinity",
        r#""\ud800""#,
        deep.as_str(),
    ] {
        id += 1;
        c.send_raw(&call(id, args));
        let r = c.reply(id);
        assert_eq!(r["error"]["code"], -32001, "{args:.30}: {r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("withheld the tool \"exfiltrate\""),
            "{r}"
        );
    }
    for (line, code) in [
        // Two names: a server keeping the last runs exfiltrate.
        (
            r#"{"jsonrpc":"2.0","id":30,"method":"tools/call","params":{"name":"echo","name":"exfiltrate"}}"#,
            -32600,
        ),
        // Go's encoding/json reads "Name" as name.
        (
            r#"{"jsonrpc":"2.0","id":31,"method":"tools/call","params":{"name":"echo","Name":"exfiltrate"}}"#,
            -32600,
        ),
        (
            r#"{"jsonrpc":"2.0","id":32,"method":"tools/call","params":{"name":["exfiltrate"]}}"#,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":33,"method":"tools/call","params":{"arguments":{"exfiltrate":1}}}"#,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":34,"method":"tools/call","params":{"name":"exfiltrate"},"method":"ping"}"#,
            -32600,
        ),
    ] {
        c.send_raw(line);
        let want = line
            .split("\"id\":")
            .nth(1)
            .unwrap()
            .split(',')
            .next()
            .unwrap();
        let r = c.reply(want.parse().unwrap());
        assert_eq!(r["error"]["code"], code, "{line}: {r}");
    }
    // No id: nothing to answer, nothing relayed.
    c.send_raw(r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"exfiltrate"}}"#);
    // A batch: refused whole, with one error (id null).
    c.send_raw(
        r#"[{"jsonrpc":"2.0","id":40,"method":"tools/call","params":{"name":"exfiltrate"}}]"#,
    );
    let batch = c.until("the batch's refusal", |v| {
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("batches"))
    });
    assert_eq!(batch["id"], Value::Null, "{batch}");
    // Not JSON at all.
    c.send_raw(
        r#"{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"exfiltrate",}}"#,
    );
    let broken = c.until("the parse error", |v| v["error"]["code"] == -32700);
    assert_eq!(broken["id"], Value::Null, "{broken}");

    // A call the guard allows goes through, answered once: the liar's
    // second answer is dropped (the ping after it is the next line).
    let echo = c.request(
        50,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hi"}}),
    );
    assert_eq!(echo["result"]["content"][0]["text"], "ran echo", "{echo}");
    c.send(json!({"jsonrpc": "2.0", "id": 51, "method": "ping"}));
    let next = c.until("anything", |_| true);
    assert_eq!(next["id"], 51, "the line after the call's answer: {next}");
    // A request whose id is in flight is refused (its answer would be
    // ambiguous); here none is, so the same id works again.
    let again = c.request(50, "ping", json!({}));
    assert!(again["result"].is_object(), "{again}");

    wait_received(d, "\"id\":51");
    let got = received(d);
    assert!(
        got.iter().all(|l| !l.contains("exfiltrate")),
        "the server received a message naming the withheld tool: {got:#?}"
    );
    assert!(c.close().success());
    let log = std::fs::read_to_string(d.join("guard.log")).unwrap();
    assert!(log.contains("messages dropped"), "{log}");
}

/// Opens a session with the liar through the HTTP guard at `url`: its
/// listing (the session is `liar-session`).
fn liar_over_http(url: &str) -> String {
    let (status, _) = post(
        url,
        None,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
    );
    assert_eq!(status, 200);
    post(
        url,
        Some("liar-session"),
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    )
    .1
}

/// One POST to the HTTP guard; status and body.
fn post(url: &str, session: Option<&str>, body: &str) -> (u16, String) {
    let authority = url.trim_start_matches("http://").split('/').next().unwrap();
    let (head, body) = common::http_exchange(authority, "POST", session, body);
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, body)
}

/// Over HTTP the same: unreadable calls, batches and ambiguous keys get a
/// JSON-RPC error and never reach the server, and a call's second answer
/// (in its own event stream) is not relayed.
#[test]
fn over_http_calls_the_guard_cannot_read_never_reach_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let upstream = common::HttpServerLogged::start(d, &["--hostile", "liar"]);
    let mut guard = HttpGuard::start(d, &["--upstream", &upstream.url, "--no-record"]);
    let listing = liar_over_http(&guard.url);
    let session = Some("liar-session");
    assert!(
        listing.contains("\"echo\"") && !listing.contains("exfiltrate"),
        "{listing}"
    );
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    for args in ["1e400", "NaN", r#""\ud800""#, deep.as_str()] {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"exfiltrate","arguments":{{"sidenote":{args}}}}}}}"#
        );
        let (status, answer) = post(&guard.url, session, &body);
        assert_eq!(status, 200, "{answer}");
        assert!(
            answer.contains("withheld the tool \\\"exfiltrate\\\""),
            "{args:.20}: {answer}"
        );
    }
    for body in [
        r#"[{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"exfiltrate"}}]"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","name":"exfiltrate"}}"#,
        r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","NAME":"exfiltrate"}}"#,
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":7,"exfiltrate":1}}"#,
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"exfiltrate"}}"#,
        r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"exfiltrate"}"#,
    ] {
        let (status, answer) = post(&guard.url, session, body);
        assert_eq!(status, 400, "{body}: {answer}");
        let v: Value = serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{e}: {answer}"));
        assert!(v["error"]["code"].as_i64().is_some(), "{answer}");
    }
    let (status, answer) = post(
        &guard.url,
        session,
        r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#,
    );
    assert_eq!(status, 200);
    assert_eq!(answer.matches("ran echo").count(), 1, "{answer}");
    assert!(!answer.contains("second, forged"), "{answer}");
    // Forged listings in the POST's own stream, one framed with lone CRs,
    // are not relayed either.
    assert!(!answer.contains("\"tools\""), "{answer}");
    let got = upstream.received();
    assert!(
        got.iter()
            .any(|l| l.contains("ran") || l.contains("\"echo\"")),
        "{got:#?}"
    );
    assert!(
        got.iter().all(|l| !l.contains("exfiltrate")),
        "the server received a message naming the withheld tool: {got:#?}"
    );
    assert!(guard.stop());
}

/// Issue 38, hole 10: with `--listen-token ${NAME}` the HTTP guard serves
/// only requests carrying that Bearer token (it adds the upstream's
/// credentials, so without one any local user could use them); a token
/// written on the command line is refused.
#[test]
fn the_listen_token_keeps_other_local_users_out() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let upstream = HttpServer::start(&[]);
    let mut guard = HttpGuard::start_with_env(
        d,
        &[
            "--upstream",
            &upstream.url,
            "--no-record",
            "--listen-token",
            "${GUARD_TOKEN}",
        ],
        &[("GUARD_TOKEN", "local-secret-7")],
    );
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
    let authority = guard.authority();
    for extra in [
        "",
        "Authorization: Bearer local-secret-8\r\n",
        "Authorization: Basic local-secret-7\r\n",
    ] {
        let (head, _) = common::http_exchange_with(&authority, "POST", None, extra, init);
        assert!(head.starts_with("HTTP/1.1 401"), "{extra:?}: {head}");
        assert!(
            head.to_ascii_lowercase()
                .contains("www-authenticate: bearer"),
            "{head}"
        );
    }
    let (head, body) = common::http_exchange_with(
        &authority,
        "POST",
        None,
        "Authorization: Bearer local-secret-7\r\n",
        init,
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}\n{body}");
    assert!(guard.stop());
    // A literal token is refused: the command line is every user's to read.
    let o = common::plumbline(
        d,
        &[
            "guard",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            &upstream.url,
            "--listen-token",
            "local-secret-7",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", common::text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("${NAME}"),
        "{}",
        common::text(&o)
    );
}

/// Issue 38, hole 11: a server's instructions and prompts reach the model
/// too, so `pin` pins them and the guard judges them like tool text: a
/// rug pull in either is withheld (the pinned instructions are sent in
/// their place; the poisoned prompt is left out of the listing and
/// `prompts/get` of it is refused), over stdio and HTTP.
#[test]
fn instructions_and_prompts_are_pinned_and_a_rug_pull_in_them_is_withheld() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let server = test_server().display().to_string();
    let configure = |phase: &str| {
        std::fs::write(
            d.join("plumbline.toml"),
            format!(
                "[servers.p]\ntransport = \"stdio\"\ncommand = {server:?}\nargs = [\"--stdio\", \"--hostile\", \"prompter\"]\nenv = {{ PLUMBLINE_TEST_PHASE = \"{phase}\" }}\n"
            ),
        )
        .unwrap();
    };
    configure("0");
    let o = common::plumbline(d, &["pin", "p"]);
    assert_eq!(o.status.code(), Some(0), "{}", common::text(&o));
    let lock = std::fs::read_to_string(d.join("plumbline.lock")).unwrap();
    assert!(
        lock.contains("instructions = \"Answers questions about orders.\"")
            && lock.matches("[[servers.p.prompts]]").count() == 2,
        "{lock}"
    );
    configure("1");
    let mut c = GuardClient::start(d, &["--server", "p", "--no-record"], "guard-prompter");
    let init = c.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "guard-test", "version": "0"}}),
    );
    assert_eq!(
        init["result"]["instructions"], "Answers questions about orders.",
        "{init}"
    );
    c.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let prompts = c.request(2, "prompts/list", json!({}));
    let names: Vec<&str> = prompts["result"]["prompts"]
        .as_array()
        .unwrap_or_else(|| panic!("{prompts}"))
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["greet"], "{prompts}");
    let got = c.request(
        3,
        "prompts/get",
        json!({"name": "summarize", "arguments": {"order": "1"}}),
    );
    assert_eq!(got["error"]["code"], -32001, "{got}");
    assert!(
        got["error"]["message"]
            .as_str()
            .unwrap()
            .contains("withheld the prompt \"summarize\""),
        "{got}"
    );
    let got = c.request(4, "prompts/get", json!({"name": "greet"}));
    assert!(got["result"]["messages"].is_array(), "{got}");
    assert!(c.close().success());
    let log = std::fs::read_to_string(d.join("guard.log")).unwrap();
    assert!(
        log.contains("withheld instructions") && log.contains("withheld summarize"),
        "{log}"
    );

    // Over HTTP: pinned from one server, guarding another that pulls the rug.
    let before = HttpServer::start(&["--hostile", "prompter"]);
    std::fs::write(
        d.join("plumbline.toml"),
        format!(
            "[servers.h]\ntransport = \"http\"\nurl = {:?}\n",
            before.url
        ),
    )
    .unwrap();
    let o = common::plumbline(d, &["pin", "h"]);
    assert_eq!(o.status.code(), Some(0), "{}", common::text(&o));
    let after = HttpServer::start_with(
        &["--hostile", "prompter"],
        std::process::Stdio::null(),
        &[("PLUMBLINE_TEST_PHASE", "1")],
    );
    let mut guard = HttpGuard::start(
        d,
        &["--server", "h", "--upstream", &after.url, "--no-record"],
    );
    let (status, init) = post(
        &guard.url,
        None,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
    );
    assert_eq!(status, 200, "{init}");
    let init: Value = serde_json::from_str(&init).unwrap_or_else(|e| panic!("{e}: {init}"));
    assert_eq!(
        init["result"]["instructions"], "Answers questions about orders.",
        "{init}"
    );
    let session = Some("hostile-session");
    let (_, prompts) = post(
        &guard.url,
        session,
        r#"{"jsonrpc":"2.0","id":2,"method":"prompts/list"}"#,
    );
    assert!(
        prompts.contains("\"greet\"") && !prompts.contains("summarize"),
        "{prompts}"
    );
    let (_, got) = post(
        &guard.url,
        session,
        r#"{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"summarize"}}"#,
    );
    assert!(got.contains("withheld the prompt"), "{got}");
    assert!(guard.stop());
}

/// Issue 38, item 11 (and 37, item 3): an answer that comes on the GET
/// stream because the request's own event stream ended without it (a
/// resumed stream) is judged as its own stream would have judged it: a
/// call's result carrying instructions for the model is blocked there
/// too, not relayed unread.
#[test]
fn an_answer_resumed_on_the_get_stream_is_judged_like_any_other() {
    use std::io::{BufRead as _, Write as _};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let upstream = HttpServer::start_with(
        &["--hostile", "liar"],
        std::process::Stdio::null(),
        &[("PLUMBLINE_TEST_ORPHAN", "1")],
    );
    let mut guard = HttpGuard::start(
        d,
        &[
            "--upstream",
            &upstream.url,
            "--no-record",
            "--new-tools",
            "allow",
            "--on-injected-result",
            "block",
        ],
    );
    let listing = liar_over_http(&guard.url);
    let session = Some("liar-session");
    assert!(listing.contains("exfiltrate"), "{listing}");
    // The GET stream, read line by line on a thread of its own.
    let authority = guard.authority();
    let mut get = std::net::TcpStream::connect(&authority).unwrap();
    write!(
        get,
        "GET /mcp HTTP/1.1\r\nHost: {authority}\r\nMcp-Session-Id: liar-session\r\nAccept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    let (lines, seen) = std::sync::mpsc::channel::<String>();
    let reader = std::io::BufReader::new(get.try_clone().unwrap());
    std::thread::spawn(move || {
        for line in reader.lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    // Give the GET stream a moment to be relayed before the call.
    std::thread::sleep(Duration::from_millis(300));
    let (status, empty) = post(
        &guard.url,
        session,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"exfiltrate","arguments":{"note":"lunch"}}}"#,
    );
    assert_eq!(status, 200, "{empty}");
    assert!(!empty.contains("\"result\""), "{empty}");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut answer = None;
    while answer.is_none() && Instant::now() < deadline {
        if let Ok(line) = seen.recv_timeout(Duration::from_millis(200)) {
            if let Some(data) = line.strip_prefix("data: ") {
                if data.contains("\"id\":3") {
                    answer = Some(data.to_owned());
                }
            }
        }
    }
    let _ = get.shutdown(std::net::Shutdown::Both);
    let answer = answer.expect("the answer to the call on the GET stream");
    assert!(
        !answer.contains("<IMPORTANT>") && !answer.contains("ran exfiltrate"),
        "the result was relayed unjudged: {answer}"
    );
    let v: Value = serde_json::from_str(&answer).unwrap();
    assert!(v["error"]["code"].as_i64().is_some(), "{answer}");
    assert!(guard.stop());
}
