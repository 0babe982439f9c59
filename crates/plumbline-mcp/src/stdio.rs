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

use crate::error::{Ended, ListError, ListErrorKind};
use crate::framing::read_line;
use crate::limits::Limits;
use crate::listing::Era;
use crate::listing::Listing;
use crate::protocol::{self, parse_inbound, Announced, Inbound, Reply, Transport};

/// A server started as a local process.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StdioSpec {
    pub command: String,
    pub args: Vec<String>,
    /// The server's own variables. Nothing else of Plumbline's
    /// environment reaches the server but [`crate::DEFAULT_INHERITED`],
    /// `LC_*` and the names in `inherit_env`: Plumbline's environment holds
    /// every other server's secrets.
    pub env: Vec<(String, String)>,
    /// Names of Plumbline's own variables to pass through as well.
    pub inherit_env: Vec<String>,
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

/// The command that starts `spec`'s server: its environment by the rules of
/// [`crate::child_environment_from_ours`], its working directory, all three
/// pipes, and a process group of its own (a launcher such as npx, uvx or a
/// shell and everything it starts can be signalled together, and a
/// terminal's Ctrl-C reaches us, not them, so we reap in order). Killed if
/// dropped.
pub fn command(spec: &StdioSpec) -> Command {
    let mut cmd = Command::new(&spec.command);
    crate::environment::apply(
        &mut cmd,
        &crate::environment::child_environment_from_ours(&spec.inherit_env, &spec.env),
    );
    cmd.args(&spec.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    if let Some(dir) = &spec.cwd {
        cmd.current_dir(dir);
    }
    cmd
}

/// A child's process group, killed (SIGKILL) when this is dropped: on an
/// error path, a timeout, or a caller's future dropped on Ctrl-C, nothing
/// the server started outlives us.
#[derive(Debug)]
pub struct ProcessGroup {
    pgid: Option<Pid>,
}

impl ProcessGroup {
    /// The group `child` leads (it was started by [`command`]).
    pub fn of(child: &Child) -> ProcessGroup {
        ProcessGroup {
            pgid: child.id().map(|id| Pid::from_raw(id as i32)),
        }
    }

    fn signal(&self, signal: Signal) {
        if let Some(pgid) = self.pgid {
            let _ = killpg(pgid, signal);
        }
    }

    /// Stops a server the way MCP's stdio transport says: its stdin is
    /// already closed; wait `grace`, then SIGTERM to the group, wait
    /// `grace` again, then SIGKILL; always reaps the leader, and then kills
    /// whatever it left in its group.
    pub async fn shut_down(mut self, child: &mut Child, grace: std::time::Duration) {
        if timeout(grace, child.wait()).await.is_err() {
            self.signal(Signal::SIGTERM);
            if timeout(grace, child.wait()).await.is_err() {
                self.signal(Signal::SIGKILL);
                let _ = child.wait().await;
            }
        }
        self.signal(Signal::SIGKILL);
        self.pgid = None;
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.signal(Signal::SIGKILL);
    }
}

/// The end of what the server wrote to stderr, bounded.
#[derive(Default)]
struct Tail {
    bytes: Vec<u8>,
    dropped: usize,
}

pub(crate) struct StdioTransport {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    stderr: Arc<Mutex<Tail>>,
    stderr_task: Option<tokio::task::JoinHandle<()>>,
    guard: Option<ProcessGroup>,
    next_id: u64,
    announced: Announced,
    era: Era,
    /// Our `subscriptions/listen` is open: 2026-07-28 notifications come.
    listening: bool,
    max_message: usize,
    grace: std::time::Duration,
    line: Vec<u8>,
    /// Lines that were not JSON-RPC, skipped (excerpts), and their bytes.
    skipped: Vec<String>,
    skipped_total: usize,
    skipped_bytes: usize,
}

/// How much output that is not JSON-RPC a stdio server may print before
/// it fails: a few log lines at start-up are common (the official SDK
/// client skips them too); a server that prints nothing else is not.
const MAX_SKIPPED_LINES: usize = 100;
const MAX_SKIPPED_BYTES: usize = 64 << 10;

impl StdioTransport {
    pub(crate) fn spawn(spec: &StdioSpec, limits: &Limits) -> Result<Self, ListError> {
        let mut child = command(spec)
            .spawn()
            .map_err(|source| ListErrorKind::Spawn {
                command: spec.command.clone(),
                source,
            })?;
        let guard = Some(ProcessGroup::of(&child));
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
            announced: Announced::default(),
            era: Era::Session,
            listening: false,
            max_message: limits.max_message_bytes,
            grace: limits.shutdown_grace,
            line: Vec::new(),
            skipped: Vec::new(),
            skipped_total: 0,
            skipped_bytes: 0,
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
        let how = match timeout(std::time::Duration::from_millis(500), self.child.wait()).await {
            Ok(Ok(s)) => Ended::Process(s.to_string()),
            _ => Ended::StillRunning,
        };
        ListErrorKind::Exited { stage, how }.into()
    }

    /// Closes stdin, waits, then SIGTERM and SIGKILL to the process group;
    /// always reaps. Returns the end of the server's stderr.
    pub(crate) async fn shutdown(mut self) -> Option<String> {
        drop(self.stdin.take());
        if let Some(group) = self.guard.take() {
            group.shut_down(&mut self.child, self.grace).await;
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
            out.push_str(&plumbline_base::sanitize::for_terminal(line, false));
            out.push('\n');
        }
        Some(out)
    }
}

impl protocol::Stream for StdioTransport {
    async fn send(&mut self, message: &Value, stage: &'static str) -> Result<(), ListError> {
        StdioTransport::send(self, message, stage).await
    }

    /// One line; a line left half-read by an abandoned wait is finished
    /// first (see [`read_line`]).
    async fn receive(
        &mut self,
        stage: &'static str,
        started: Instant,
        deadline: Instant,
    ) -> Result<Option<Inbound>, ListError> {
        let read = timeout_at(
            deadline,
            read_line(&mut self.stdout, &mut self.line, self.max_message),
        )
        .await;
        match read {
            Err(_) => {
                return Err(ListErrorKind::Timeout {
                    stage,
                    after: deadline.saturating_duration_since(started),
                }
                .into())
            }
            Ok(Err(e)) => return Err(ListErrorKind::Io(e).into()),
            Ok(Ok(Err(limit))) => return Err(ListErrorKind::MessageTooLarge { limit }.into()),
            Ok(Ok(Ok(false))) => return Err(self.exited(stage).await),
            Ok(Ok(Ok(true))) => {}
        }
        let parsed = if self.line.iter().all(u8::is_ascii_whitespace) {
            Ok(None)
        } else {
            match parse_inbound(&self.line, stage) {
                // A line that names "jsonrpc" was meant as a message: broken,
                // it is an error. Anything else (a log line, a JSON log
                // record) is output to skip.
                Err(ListError {
                    kind: ListErrorKind::NotJsonRpc { excerpt, .. },
                    ..
                }) if !self.line.windows(9).any(|w| w == b"\"jsonrpc\"") => {
                    self.skipped_total += 1;
                    self.skipped_bytes += self.line.len();
                    if self.skipped_total > MAX_SKIPPED_LINES
                        || self.skipped_bytes > MAX_SKIPPED_BYTES
                    {
                        Err(ListErrorKind::Protocol {
                            method: stage,
                            message: format!(
                                "the server printed more than {MAX_SKIPPED_LINES} lines (or {} KiB) that are not JSON-RPC; the last: {excerpt}",
                                MAX_SKIPPED_BYTES >> 10,
                            ),
                        }
                        .into())
                    } else {
                        if self.skipped.len() < 10 {
                            self.skipped.push(excerpt);
                        }
                        Ok(None)
                    }
                }
                other => other.map(Some),
            }
        };
        self.line.clear();
        parsed
    }

    fn announced(&mut self) -> &mut Announced {
        &mut self.announced
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
        protocol::request_on(self, self.next_id, method, params, deadline).await
    }

    fn take_late_answer(&mut self, method: &'static str) -> Option<Reply> {
        self.announced.take_late(method)
    }

    async fn notify(&mut self, method: &'static str, params: Value) -> Result<(), ListError> {
        let message = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.send(&message, method).await
    }

    fn take_list_changed(&mut self) -> bool {
        std::mem::take(&mut self.announced.list_changed)
    }

    fn negotiated(&mut self, era: Era, _version: &str) {
        self.era = era;
    }

    /// Notifications share stdout with responses, in order. A 2025-era
    /// server sends them unasked; a 2026-07-28 one only on a
    /// `subscriptions/listen` request, which stays open (unanswered) for as
    /// long as we listen and counts from its acknowledgement.
    async fn ready_to_list(&mut self, era: Era, deadline: Instant) -> Result<(), ListError> {
        if era == Era::Session {
            return Ok(());
        }
        self.next_id += 1;
        let message = json!({
            "jsonrpc": "2.0",
            "id": self.next_id,
            "method": "subscriptions/listen",
            "params": {"_meta": protocol::stateless_meta(), "notifications": {"toolsListChanged": true}},
        });
        self.send(&message, "subscriptions/listen").await?;
        let started = Instant::now();
        while !self.announced.subscribed {
            match protocol::pump(self, "subscriptions/listen", started, deadline).await {
                // A server without subscriptions refuses the request: list
                // anyway, as for an HTTP server without a stream.
                Ok(Some((id, _))) if id == json!(self.next_id) => return Ok(()),
                Ok(_) => {}
                // Not acknowledged in time: listing still works.
                Err(e) if matches!(e.kind, ListErrorKind::Timeout { .. }) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        self.listening = true;
        Ok(())
    }

    fn hears_notifications(&self) -> bool {
        self.era == Era::Session || self.listening
    }

    fn take_skipped(&mut self) -> Vec<String> {
        let mut out = std::mem::take(&mut self.skipped);
        if self.skipped_total > out.len() {
            out.push(format!(
                "… {} more lines that are not JSON-RPC",
                self.skipped_total - out.len()
            ));
        }
        self.skipped_total = 0;
        self.skipped_bytes = 0;
        out
    }

    async fn wait_list_changed(&mut self) -> Result<(), ListError> {
        protocol::wait_on(self).await
    }
}
