//! The client against a published MCP server, `@modelcontextprotocol/
//! server-everything` from npm (installed into tests/servers by
//! scripts/test), over stdio, Streamable HTTP and legacy SSE on 127.0.0.1.
//! What the client keeps must equal what the server sent, byte for byte.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use plumbline_mcp::{list_tools, Era, HttpSpec, Limits, ServerSpec, StdioSpec};
use serde_json::value::RawValue;
use serde_json::{json, Value};

fn servers_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/servers")
}

fn everything() -> String {
    let entry =
        servers_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        entry.exists(),
        "{} is missing: run scripts/test (or npm ci --prefix tests/servers) first",
        entry.display()
    );
    entry.to_string_lossy().into_owned()
}

/// The server's `tools/list` answer captured by hand over stdio, with the
/// same initialize parameters the client sends: the reference bytes.
fn raw_capture() -> Vec<String> {
    let mut child = Command::new("node")
        .arg(everything())
        .arg("stdio")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("node starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut send = |v: Value| {
        writeln!(stdin, "{v}").expect("write");
        stdin.flush().expect("flush");
    };
    // The next line that `wanted` accepts, raw; lines before it are skipped.
    let mut read_until = |wanted: &dyn Fn(&Value) -> bool| -> (String, Value) {
        loop {
            let mut line = String::new();
            assert!(
                stdout.read_line(&mut line).expect("read") > 0,
                "server closed"
            );
            let v: Value = serde_json::from_str(&line).expect("JSON line");
            if wanted(&v) {
                return (line, v);
            }
        }
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"roots": {"listChanged": false}, "sampling": {}, "elicitation": {}},
        "clientInfo": {"name": "raw-capture", "version": "0"}}}),
    );
    read_until(&|v| v.get("id") == Some(&json!(1)));
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized", "params": {}}));
    // The server handles `initialized` (registering what depends on the
    // client's capabilities) and then asks for the client's roots: once
    // that request is here, `initialized` has been handled. Answer it as
    // the client does, then list.
    let (_, roots) = read_until(&|v| v.get("method") == Some(&json!("roots/list")));
    send(json!({"jsonrpc": "2.0", "id": roots["id"], "result": {"roots": []}}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}));
    let (line, _) = read_until(&|v| v.get("id") == Some(&json!(2)));
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();

    tools_of(&line)
}

/// The raw tool elements of a `tools/list` reply line.
fn tools_of(line: &str) -> Vec<String> {
    #[derive(serde::Deserialize)]
    struct Reply<'a> {
        #[serde(borrow)]
        result: Tools<'a>,
    }
    #[derive(serde::Deserialize)]
    struct Tools<'a> {
        #[serde(borrow)]
        tools: Vec<&'a RawValue>,
    }
    let reply: Reply<'_> = serde_json::from_str(line).expect("tools/list result");
    reply
        .result
        .tools
        .iter()
        .map(|t| t.get().to_owned())
        .collect()
}

/// A server-everything in an HTTP mode on a free loopback port, killed on drop.
struct HttpServer {
    child: Child,
    port: u16,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_http(mode: &str) -> HttpServer {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let child = Command::new("node")
        .arg("--require")
        .arg(servers_dir().join("loopback.cjs"))
        .arg(everything())
        .arg(mode)
        .env("PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("node starts");
    let server = HttpServer { child, port };
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "server-everything did not listen"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        listen_addresses(port),
        ["127.0.0.1"],
        "the server must listen on loopback only"
    );
    server
}

/// The local addresses listening on `port`, from /proc/net/tcp{,6}.
fn listen_addresses(port: u16) -> Vec<String> {
    let mut out = Vec::new();
    for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(state)) = (cols.get(1), cols.get(3)) else {
                continue;
            };
            let Some((addr, p)) = local.split_once(':') else {
                continue;
            };
            if *state != "0A" || u16::from_str_radix(p, 16) != Ok(port) {
                continue;
            }
            out.push(match addr {
                "0100007F" => "127.0.0.1".to_owned(),
                other => other.to_owned(),
            });
        }
    }
    out
}

async fn assert_listing_matches_capture(spec: ServerSpec, capture: &[String]) {
    let listing = list_tools(&spec, &Limits::default())
        .await
        .unwrap_or_else(|e| panic!("{spec:?}: {e}"));
    assert_eq!(listing.era, Era::Session);
    assert_eq!(listing.protocol_version, "2025-11-25");
    assert!(listing.problems.is_empty(), "{:?}", listing.problems);
    let kept: Vec<String> = listing
        .tools
        .iter()
        .map(|t| String::from_utf8(t.raw.clone()).expect("UTF-8"))
        .collect();
    assert_eq!(kept.len(), capture.len());
    for (k, c) in kept.iter().zip(capture) {
        assert_eq!(k, c, "kept bytes differ from the raw capture");
    }
    let info: Value =
        serde_json::from_slice(listing.server_info.as_deref().expect("serverInfo")).unwrap();
    assert!(
        info["name"]
            .as_str()
            .is_some_and(|n| n.contains("everything")),
        "{info}"
    );
}

#[tokio::test]
async fn stdio_listing_keeps_the_bytes_the_server_sent() {
    let capture = raw_capture();
    assert!(capture.len() >= 13, "{} tools", capture.len());
    let spec = ServerSpec::Stdio(StdioSpec {
        command: "node".into(),
        args: vec![everything(), "stdio".into()],
        ..StdioSpec::default()
    });
    assert_listing_matches_capture(spec, &capture).await;
}

#[tokio::test]
async fn streamable_http_listing_keeps_the_bytes_the_server_sent() {
    let capture = raw_capture();
    let server = start_http("streamableHttp");
    let spec = ServerSpec::Http(HttpSpec {
        url: format!("http://127.0.0.1:{}/mcp", server.port),
        headers: vec![("Authorization".into(), "Bearer not-a-secret".into())],
        auth: None,
    });
    assert_listing_matches_capture(spec, &capture).await;
}

#[tokio::test]
async fn legacy_sse_listing_keeps_the_bytes_the_server_sent() {
    let capture = raw_capture();
    let server = start_http("sse");
    let spec = ServerSpec::Sse(HttpSpec {
        url: format!("http://127.0.0.1:{}/sse", server.port),
        headers: Vec::new(),
        auth: None,
    });
    assert_listing_matches_capture(spec, &capture).await;
}

#[tokio::test]
async fn a_missing_command_is_a_clear_error() {
    let spec = ServerSpec::Stdio(StdioSpec {
        command: "/nonexistent/mcp-server".into(),
        ..StdioSpec::default()
    });
    let err = list_tools(&spec, &Limits::default()).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("could not start `/nonexistent/mcp-server`"),
        "{err}"
    );
}

#[tokio::test]
async fn a_refused_connection_is_a_clear_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let spec = ServerSpec::Http(HttpSpec {
        url: format!("http://127.0.0.1:{port}/mcp"),
        headers: Vec::new(),
        auth: None,
    });
    let err = list_tools(&spec, &Limits::default()).await.unwrap_err();
    assert!(err.to_string().contains("Connection refused"), "{err}");
}

/// `mcp-server-time` from PyPI (installed into tests/servers/.venv by
/// scripts/test): a 2026-07-28 server, so this exercises the stateless era.
fn time_server() -> (String, Vec<String>) {
    let python = servers_dir().join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/test (it installs tests/servers/requirements.txt)",
        python.display()
    );
    (
        python.to_string_lossy().into_owned(),
        vec![
            "-m".into(),
            "mcp_server_time".into(),
            "--local-timezone".into(),
            "UTC".into(),
        ],
    )
}

/// The time server's tools captured by hand, the stateless way: a
/// `tools/list` carrying `_meta`, without `initialize`.
fn raw_time_capture() -> Vec<String> {
    let (python, args) = time_server();
    let mut child = Command::new(python)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("python starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"roots": {"listChanged": false}, "sampling": {}, "elicitation": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-capture", "version": "0"},
    });
    let request =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}});
    writeln!(stdin, "{request}").expect("write");
    stdin.flush().expect("flush");
    let line = loop {
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).expect("read") > 0,
            "server closed"
        );
        let v: Value = serde_json::from_str(&line).expect("JSON line");
        if v.get("id") == Some(&json!(1)) {
            break line;
        }
    };
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    let v: Value = serde_json::from_str(&line).expect("reply");
    assert!(v.get("result").is_some(), "tools/list failed: {line}");
    tools_of(&line)
}

#[tokio::test]
async fn a_pypi_server_in_the_stateless_era_keeps_its_bytes() {
    let capture = raw_time_capture();
    let (command, args) = time_server();
    let listing = list_tools(
        &ServerSpec::Stdio(StdioSpec {
            command,
            args,
            ..StdioSpec::default()
        }),
        &Limits::default(),
    )
    .await
    .unwrap_or_else(|e| panic!("mcp-server-time: {e}"));
    assert_eq!(listing.era, Era::Stateless);
    assert_eq!(listing.protocol_version, "2026-07-28");
    let names: Vec<_> = listing
        .tools
        .iter()
        .filter_map(|t| t.name.as_deref())
        .collect();
    assert_eq!(names, ["get_current_time", "convert_time"]);
    let kept: Vec<String> = listing
        .tools
        .iter()
        .map(|t| String::from_utf8(t.raw.clone()).expect("UTF-8"))
        .collect();
    assert_eq!(kept, capture);
}
