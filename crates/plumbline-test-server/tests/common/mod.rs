//! A minimal hand-written JSON-RPC client for driving the test server.
//!
//! Every wait is bounded by a timeout, and every server started here is killed
//! when its handle drops.

#![allow(dead_code)] // each test binary uses a different part

use std::{process::Stdio, time::Duration};

use serde_json::{json, Value};
use tokio::{
    io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader},
    process::{Child, ChildStderr, ChildStdin, ChildStdout, Command},
};

pub const BIN: &str = env!("CARGO_BIN_EXE_plumbline-test-server");
/// The longest any single step may take before a test fails.
pub const STEP: Duration = Duration::from_secs(10);

pub fn meta_2026() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "plumbline-tests", "version": "0"}
    })
}

pub fn initialize_params() -> Value {
    json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "plumbline-tests", "version": "0"}
    })
}

/// Writes `text` to a file under the test target's scratch directory.
pub fn scratch_file(name: &str, text: &str) -> std::path::PathBuf {
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::write(&path, text).expect("write scratch file");
    path
}

/// Names of the tools in a `tools/list` result.
pub fn tool_names(result: &Value) -> Vec<String> {
    result["tools"]
        .as_array()
        .expect("tools array")
        .iter()
        .map(|tool| tool["name"].as_str().expect("tool name").to_owned())
        .collect()
}

/// The peak resident memory of a process, from /proc, in bytes.
pub fn peak_rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc status");
    let line = status
        .lines()
        .find(|line| line.starts_with("VmHWM:"))
        .expect("VmHWM line");
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("VmHWM value");
    kib * 1024
}

pub fn send_signal(child: &Child, signal: nix::sys::signal::Signal) {
    let pid = child.id().expect("child still running");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal).expect("kill");
}

/// A server speaking JSON-RPC lines on its stdin/stdout.
pub struct StdioServer {
    pub child: Child,
    stdin: Option<ChildStdin>,
    pub stdout: BufReader<ChildStdout>,
    pub stderr: Option<ChildStderr>,
    /// Notifications seen while waiting for responses, in order.
    pub notifications: Vec<Value>,
}

impl StdioServer {
    /// Starts the server with stderr discarded.
    pub fn spawn(args: &[&str]) -> Self {
        Self::spawn_with_stderr(args, false)
    }

    /// Starts the server; with `capture_stderr` its stderr is piped to
    /// [`Self::stderr`], which the test must then drain.
    pub fn spawn_with_stderr(args: &[&str], capture_stderr: bool) -> Self {
        let mut child = Command::new(BIN)
            .arg("--stdio")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(if capture_stderr {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .kill_on_drop(true)
            .spawn()
            .expect("spawn plumbline-test-server");
        Self {
            stdin: child.stdin.take(),
            stdout: BufReader::new(child.stdout.take().expect("stdout")),
            stderr: child.stderr.take(),
            child,
            notifications: Vec::new(),
        }
    }

    pub async fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).await.expect("write stdin");
        stdin.write_all(b"\n").await.expect("write stdin");
        stdin.flush().await.expect("flush stdin");
    }

    pub async fn send(&mut self, message: &Value) {
        self.send_raw(&message.to_string()).await;
    }

    pub async fn notify(&mut self, method: &str) {
        self.send(&json!({"jsonrpc": "2.0", "method": method}))
            .await;
    }

    /// The next stdout line (without its newline), or `None` if nothing comes
    /// within `wait`.
    pub async fn read_line_within(&mut self, wait: Duration) -> Option<Vec<u8>> {
        let mut line = Vec::new();
        match tokio::time::timeout(wait, self.stdout.read_until(b'\n', &mut line)).await {
            Ok(read) => {
                assert!(read.expect("read stdout") > 0, "stdout closed");
                line.pop();
                Some(line)
            }
            Err(_) => None,
        }
    }

    pub async fn read_line(&mut self) -> Vec<u8> {
        self.read_line_within(STEP)
            .await
            .expect("a stdout line within the step timeout")
    }

    pub async fn recv(&mut self) -> Value {
        let line = self.read_line().await;
        serde_json::from_slice(&line).unwrap_or_else(|error| {
            panic!("invalid JSON ({error}): {}", String::from_utf8_lossy(&line))
        })
    }

    pub async fn send_request(&mut self, id: u64, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
    }

    /// Reads messages until the response to `id`, remembering notifications.
    pub async fn response(&mut self, id: u64) -> Value {
        loop {
            let message = self.recv().await;
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                return message;
            }
            assert!(
                message.get("id").is_none(),
                "unexpected message while waiting for {id}: {message}"
            );
            self.notifications.push(message);
        }
    }

    pub async fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send_request(id, method, params).await;
        self.response(id).await
    }

    /// The result of a request, failing the test on an error.
    pub async fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        let response = self.request(id, method, params).await;
        assert!(
            response.get("error").is_none(),
            "{method} failed: {response}"
        );
        response["result"].clone()
    }

    /// The `initialize` handshake of the 2025 era.
    pub async fn initialize(&mut self) -> Value {
        let result = self.call(1, "initialize", initialize_params()).await;
        self.notify("notifications/initialized").await;
        result
    }

    /// The next notification with `method`, from those already seen or new.
    pub async fn notification(&mut self, method: &str) -> Value {
        if let Some(i) = self
            .notifications
            .iter()
            .position(|n| n["method"] == method)
        {
            return self.notifications.remove(i);
        }
        loop {
            let message = self.recv().await;
            if message["method"] == method {
                return message;
            }
            self.notifications.push(message);
        }
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    pub async fn wait_exit(&mut self) -> std::process::ExitStatus {
        tokio::time::timeout(STEP, self.child.wait())
            .await
            .expect("the server exits within the step timeout")
            .expect("wait for the server")
    }

    /// Drains stderr into a string (for servers spawned with stderr captured).
    pub async fn stderr_text(&mut self) -> String {
        let mut text = String::new();
        let mut stderr = self.stderr.take().expect("stderr captured");
        tokio::time::timeout(STEP, stderr.read_to_string(&mut text))
            .await
            .expect("stderr closes within the step timeout")
            .expect("read stderr");
        text
    }
}

/// A server on Streamable HTTP at 127.0.0.1.
pub struct HttpServer {
    pub child: Child,
    /// `http://127.0.0.1:PORT/mcp`
    pub url: String,
    /// `http://127.0.0.1:PORT`
    pub base: String,
    pub client: reqwest::Client,
}

impl HttpServer {
    pub async fn spawn(args: &[&str]) -> Self {
        let mut child = Command::new(BIN)
            .args(["--http", "127.0.0.1:0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn plumbline-test-server");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        tokio::time::timeout(STEP, stdout.read_line(&mut line))
            .await
            .expect("the listening line within the step timeout")
            .expect("read stdout");
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        assert!(
            url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
            "{url}"
        );
        let base = url.trim_end_matches("/mcp").to_owned();
        // The workspace builds reqwest with rustls but no crypto provider
        // (plumbline-mcp installs `ring`); these tests speak plain HTTP but
        // the builder still wants one installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("reqwest client");
        Self {
            child,
            url,
            base,
            client,
        }
    }

    /// POSTs one JSON-RPC message with the usual MCP headers.
    pub fn post(&self, message: &Value, headers: &[(&str, &str)]) -> reqwest::RequestBuilder {
        let mut request = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(message.to_string());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request
    }

    pub async fn send(&self, message: &Value, headers: &[(&str, &str)]) -> reqwest::Response {
        tokio::time::timeout(STEP, self.post(message, headers).send())
            .await
            .expect("an HTTP answer within the step timeout")
            .expect("HTTP request")
    }
}

/// Reads the JSON-RPC message answering `id` from a JSON or SSE response.
pub async fn read_response(response: reqwest::Response, id: u64) -> Value {
    let is_sse = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !is_sse {
        let bytes = tokio::time::timeout(STEP, response.bytes())
            .await
            .expect("body within the step timeout")
            .expect("body");
        return serde_json::from_slice(&bytes).expect("JSON body");
    }
    let mut events = SseReader::new(response);
    loop {
        let message = events.next_message().await.expect("SSE stream ended early");
        if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
            return message;
        }
    }
}

/// Reads the JSON messages of an SSE response one `data:` line at a time.
pub struct SseReader {
    response: reqwest::Response,
    buffer: Vec<u8>,
}

impl SseReader {
    pub fn new(response: reqwest::Response) -> Self {
        Self {
            response,
            buffer: Vec::new(),
        }
    }

    /// The next message, or `None` when the stream ends.
    pub async fn next_message(&mut self) -> Option<Value> {
        loop {
            while let Some(newline) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=newline).collect();
                let line = String::from_utf8(line).expect("utf-8 SSE");
                let Some(data) = line.trim_end().strip_prefix("data:") else {
                    continue;
                };
                let data = data.trim_start();
                if data.is_empty() {
                    continue; // rmcp's priming event
                }
                return Some(serde_json::from_str(data).expect("JSON in SSE data"));
            }
            let chunk = tokio::time::timeout(STEP, self.response.chunk())
                .await
                .expect("an SSE chunk within the step timeout")
                .expect("SSE chunk")?;
            self.buffer.extend_from_slice(&chunk);
        }
    }
}
