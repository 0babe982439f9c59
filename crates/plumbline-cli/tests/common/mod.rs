//! Running the built `plumbline` binary in a test directory, and the
//! workspace's test MCP server beside it.

#![allow(dead_code)] // each test binary uses a different part

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Output};

/// Runs `plumbline ARGS` in `dir`, with no store or registry taken from
/// the environment.
pub fn plumbline(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_plumbline"))
        .args(args)
        .current_dir(dir)
        .env_remove("PLUMBLINE_STORE")
        .env_remove("PLUMBLINE_CONFIG")
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

/// The test server over Streamable HTTP on 127.0.0.1, killed on drop.
pub struct HttpServer {
    child: std::process::Child,
    /// `http://127.0.0.1:PORT/mcp`
    pub url: String,
}

impl HttpServer {
    pub fn start(args: &[&str]) -> HttpServer {
        let mut child = std::process::Command::new(test_server())
            .args(["--http", "127.0.0.1:0"])
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
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
        let base = self.url.trim_end_matches("/mcp");
        let port: u16 = base.rsplit(':').next().unwrap().parse().unwrap();
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        write!(
            stream,
            "POST /control/advance HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        assert!(response.starts_with("HTTP/1.1 2"), "{response}");
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
