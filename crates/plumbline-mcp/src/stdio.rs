//! The stdio transport: a child process speaking newline-delimited
//! JSON-RPC, its stderr captured, and the whole process group reaped
//! however the listing ends.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::time::{timeout, timeout_at, Instant};

use crate::error::{ListError, ListErrorKind};
use crate::framing::read_line;
use crate::limits::Limits;
use crate::listing::Era;
use crate::listing::Listing;
use crate::protocol::{self, answer_to, parse_inbound, Inbound, Reply, Transport};

/// A server started as a local process.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StdioSpec {
    pub command: String,
    pub args: Vec<String>,
    /// Added to the inherited environment.
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
}

pub(crate) async fn list_tools(spec: &StdioSpec, limits: &Limits) -> Result<Listing, ListError> {
    let mut transport = StdioTransport::spawn(spec, limits)?;
    let result = protocol::list(&mut transport, limits).await;
    let tail = transport.shutdown().await;
    result.map_err(|mut e| {
        e.stderr_tail = tail;
        e
    })
}

/// Kills the child's process group if the listing is abandoned (an error
/// path, a timeout, or the caller's future dropped on Ctrl-C), so nothing
/// the server started outlives us.
struct GroupGuard {
    pgid: Option<Pid>,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            let _ = killpg(pgid, Signal::SIGKILL);
        }
    }
}

/// The end of what the server wrote to stderr, bounded.
#[derive(Default)]
struct Tail {
    bytes: Vec<u8>,
    dropped: usize,
}

struct StdioTransport {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    stderr: Arc<Mutex<Tail>>,
    stderr_task: Option<tokio::task::JoinHandle<()>>,
    guard: GroupGuard,
    next_id: u64,
    list_changed: bool,
    max_message: usize,
    grace: std::time::Duration,
    line: Vec<u8>,
}

impl StdioTransport {
    fn spawn(spec: &StdioSpec, limits: &Limits) -> Result<Self, ListError> {
        let mut cmd = Command::new(&spec.command);
        cmd.args(&spec.args)
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            // Its own process group: a launcher (npx, uvx, a shell) and
            // everything it starts can be signalled together, and a
            // terminal's Ctrl-C reaches us, not them, so we reap in order.
            .process_group(0);
        if let Some(dir) = &spec.cwd {
            cmd.current_dir(dir);
        }
        let mut child = cmd.spawn().map_err(|source| ListErrorKind::Spawn {
            command: spec.command.clone(),
            source,
        })?;
        let pgid = child.id().map(|id| Pid::from_raw(id as i32));
        let guard = GroupGuard { pgid };
        let (Some(stdin), Some(stdout), Some(mut err)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(ListErrorKind::Io(std::io::Error::other("child pipes missing")).into());
        };
        let stderr = Arc::new(Mutex::new(Tail::default()));
        let keep = limits.stderr_bytes;
        let sink = Arc::clone(&stderr);
        // Drain stderr continuously: a server that floods it must not block
        // on a full pipe, and only its end is worth keeping.
        let stderr_task = tokio::spawn(async move {
            let mut buf = vec![0u8; 8192];
            while let Ok(n) = err.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                if let Ok(mut t) = sink.lock() {
                    t.bytes.extend_from_slice(&buf[..n]);
                    if t.bytes.len() > keep {
                        let excess = t.bytes.len() - keep;
                        t.bytes.drain(..excess);
                        t.dropped += excess;
                    }
                }
            }
        });
        Ok(StdioTransport {
            child,
            stdin: Some(stdin),
            stdout: BufReader::with_capacity(64 << 10, stdout),
            stderr,
            stderr_task: Some(stderr_task),
            guard,
            next_id: 0,
            list_changed: false,
            max_message: limits.max_message_bytes,
            grace: limits.shutdown_grace,
            line: Vec::new(),
        })
    }

    async fn send(&mut self, message: &Value, stage: &'static str) -> Result<(), ListError> {
        let mut bytes = serde_json::to_vec(message).map_err(|e| ListErrorKind::Io(e.into()))?;
        bytes.push(b'\n');
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(self.exited(stage).await);
        };
        let written = async {
            stdin.write_all(&bytes).await?;
            stdin.flush().await
        }
        .await;
        match written {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(self.exited(stage).await),
            Err(e) => Err(ListErrorKind::Io(e).into()),
        }
    }

    /// The error for a server that stopped talking: its exit status if it
    /// has one within a moment.
    async fn exited(&mut self, stage: &'static str) -> ListError {
        let status = match timeout(std::time::Duration::from_millis(500), self.child.wait()).await {
            Ok(Ok(s)) => s.to_string(),
            _ => "still running".to_owned(),
        };
        ListErrorKind::Exited { stage, status }.into()
    }

    /// Closes stdin, waits, then SIGTERM and SIGKILL to the process group;
    /// always reaps. Returns the end of the server's stderr.
    async fn shutdown(mut self) -> Option<String> {
        drop(self.stdin.take());
        let pgid = self.guard.pgid;
        if timeout(self.grace, self.child.wait()).await.is_err() {
            if let Some(pgid) = pgid {
                let _ = killpg(pgid, Signal::SIGTERM);
            }
            if timeout(self.grace, self.child.wait()).await.is_err() {
                if let Some(pgid) = pgid {
                    let _ = killpg(pgid, Signal::SIGKILL);
                }
                let _ = self.child.wait().await;
            }
        }
        // The leader is gone; anything it left in its group goes too.
        if let Some(pgid) = self.guard.pgid.take() {
            let _ = killpg(pgid, Signal::SIGKILL);
        }
        if let Some(task) = self.stderr_task.take() {
            let _ = timeout(std::time::Duration::from_millis(500), task).await;
        }
        let tail = self.stderr.lock().ok()?;
        if tail.bytes.is_empty() {
            return None;
        }
        let text = String::from_utf8_lossy(&tail.bytes);
        let mut out = String::new();
        if tail.dropped > 0 {
            out.push_str(&format!("[{} earlier bytes not kept]\n", tail.dropped));
        }
        for line in text.lines() {
            out.push_str(&plumbline_taxonomy::sanitize::for_terminal(line, false));
            out.push('\n');
        }
        Some(out)
    }
}

impl Transport for StdioTransport {
    async fn request(
        &mut self,
        method: &'static str,
        params: Value,
        deadline: Instant,
    ) -> Result<Reply, ListError> {
        self.next_id += 1;
        let id = self.next_id;
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(&message, method).await?;
        let started = Instant::now();
        loop {
            let mut line = std::mem::take(&mut self.line);
            let read = timeout_at(
                deadline,
                read_line(&mut self.stdout, &mut line, self.max_message),
            )
            .await;
            let outcome = match read {
                Err(_) => Err(ListErrorKind::Timeout {
                    stage: method,
                    after: deadline.saturating_duration_since(started),
                }
                .into()),
                Ok(Err(e)) => Err(ListErrorKind::Io(e).into()),
                Ok(Ok(Err(limit))) => Err(ListErrorKind::MessageTooLarge { limit }.into()),
                Ok(Ok(Ok(false))) => Err(self.exited(method).await),
                Ok(Ok(Ok(true))) => Ok(()),
            };
            if let Err(e) = outcome {
                self.line = line;
                return Err(e);
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                self.line = line;
                continue;
            }
            let handled = match parse_inbound(&line, method) {
                Err(e) => Err(e),
                Ok(Inbound::Request { id: rid, method: m }) => {
                    self.send(&answer_to(rid, &m), method).await.map(|()| None)
                }
                Ok(Inbound::Notification { method: m }) => {
                    if m == "notifications/tools/list_changed" {
                        self.list_changed = true;
                    }
                    Ok(None)
                }
                Ok(Inbound::Response { id: rid, reply }) if rid == json!(id) => Ok(Some(reply)),
                // An answer to an earlier request (a late reply to a probe
                // that timed out): not ours any more.
                Ok(Inbound::Response { .. }) => Ok(None),
            };
            self.line = line;
            match handled {
                Ok(Some(reply)) => return Ok(reply),
                Ok(None) => continue,
                Err(e) => return Err(e),
            }
        }
    }

    async fn notify(&mut self, method: &'static str, params: Value) -> Result<(), ListError> {
        let message = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.send(&message, method).await
    }

    fn take_list_changed(&mut self) -> bool {
        std::mem::take(&mut self.list_changed)
    }

    fn negotiated(&mut self, _era: Era, _version: &str) {}

    /// Notifications share stdout with responses, in order: nothing to open.
    async fn ready_to_list(&mut self, _era: Era, _deadline: Instant) -> Result<(), ListError> {
        Ok(())
    }
}
