//! The guard over stdio: the client starts `plumbline guard -- COMMAND`,
//! the guard starts COMMAND and relays newline-delimited JSON-RPC both
//! ways, one message per line, the bytes of every message it does not
//! interpret unchanged.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::Duration;

use plumbline_lock::plan::RawTool;
use plumbline_lock::LockedServer;
use plumbline_mcp::wire::{command, read_line, ProcessGroup};
use plumbline_mcp::{Limits, StdioSpec};
use plumbline_taxonomy::sanitize::for_terminal;
use plumbline_taxonomy::Classifier;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::judge::{judge, ungraded, Judged, Withheld};
use crate::message::{Id, Kind, Message, INVALID_PARAMS, INVALID_REQUEST};
use crate::{Baseline, Counters, Mode, OnError, Policy, Recorder, Seen};

/// How many times in a row a walk is started again because the server
/// announced a change while it ran; then the latest listing is judged.
const MAX_REWALKS: u32 = 3;

/// The JSON-RPC error code of a refused call or a listing the guard could
/// not judge.
pub const REFUSED: i64 = -32001;

/// How many requests may wait for an answer in each direction; past that
/// a new one is refused (the ids kept are the guard's memory of what it
/// may relay, and a peer must not grow it without bound).
const MAX_OUTSTANDING: usize = 4096;

/// A JSON-RPC error answering the id `id_json` (JSON text).
pub(crate) fn error_reply(id_json: &str, code: i64, message: &str, data: Option<Value>) -> String {
    let mut error = json!({"code": code, "message": message});
    if let Some(d) = data {
        error["data"] = d;
    }
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id_json},\"error\":{error}}}")
}

/// What a refused call's answer says: the tool, its grade and that a
/// person must review it. Never how to release it: the model reads this,
/// and may have a shell.
pub(crate) fn refusal(server: &str, name: &str, withheld: Option<&Withheld>) -> (String, Value) {
    match withheld {
        Some(w) => (
            format!(
                "plumbline guard withheld the tool {name:?} of {server}: {}; a person must review the change before it can be called",
                w.describe()
            ),
            json!({"tool": name, "severity": w.severity, "rules": w.rules, "why": w.why}),
        ),
        None => (
            format!("plumbline guard: {server} lists no tool {name:?}"),
            json!({"tool": name, "why": {"kind": "not_listed"}}),
        ),
    }
}

/// One guarded stdio server.
pub struct Options {
    /// The server's name (in the lock, in messages).
    pub server: String,
    pub spec: StdioSpec,
    pub policy: Policy,
    pub classifier: Classifier,
    pub limits: Limits,
    /// How often the baseline is read again.
    pub poll: Duration,
    /// The secrets calls are checked for (none: calls are not checked).
    pub secrets: Option<std::sync::Arc<crate::SecretWatch>>,
    /// Where the counts go (`/metrics`, and the summary at the end).
    pub metrics: std::sync::Arc<crate::Metrics>,
}

enum Event {
    Client(Vec<u8>),
    /// The client's side ended (`None`: cleanly), or broke.
    ClientEnd(Option<String>),
    Server(Vec<u8>),
    ServerEnd(Option<String>),
}

/// Reads bounded lines from `input` into `tx` until it ends.
fn spawn_reader<R: AsyncRead + Unpin + Send + 'static>(
    input: R,
    max: usize,
    tx: mpsc::Sender<Event>,
    line: fn(Vec<u8>) -> Event,
    end: fn(Option<String>) -> Event,
) {
    tokio::spawn(async move {
        let mut reader = BufReader::with_capacity(64 << 10, input);
        let mut buf = Vec::new();
        loop {
            let ended = match read_line(&mut reader, &mut buf, max).await {
                Ok(Ok(true)) => {
                    let l = std::mem::take(&mut buf);
                    if l.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    if tx.send(line(l)).await.is_err() {
                        return;
                    }
                    continue;
                }
                Ok(Ok(false)) => None,
                Ok(Err(limit)) => Some(format!("a message longer than {limit} bytes")),
                Err(e) => Some(e.to_string()),
            };
            let _ = tx.send(end(ended)).await;
            return;
        }
    });
}

/// Runs the guard until the client goes away (then the server is stopped)
/// or the server does (an error naming how).
pub async fn run<I, O>(
    opts: Options,
    baseline: Box<dyn Baseline>,
    recorder: Option<Box<dyn Recorder>>,
    client_in: I,
    client_out: O,
) -> anyhow::Result<Counters>
where
    I: AsyncRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin,
{
    let mut child = command(&opts.spec)
        .spawn()
        .map_err(|e| anyhow::anyhow!("starting {:?}: {e}", opts.spec.command))?;
    let group = ProcessGroup::of(&child);
    let (Some(upstream), Some(stdout), Some(mut stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        anyhow::bail!("the server's pipes are missing");
    };
    // The server's log lines are the client's to see, as they would be
    // without the guard.
    tokio::spawn(async move {
        let _ = tokio::io::copy(&mut stderr, &mut tokio::io::stderr()).await;
    });
    let (tx, mut rx) = mpsc::channel(64);
    let max = opts.limits.max_message_bytes;
    spawn_reader(client_in, max, tx.clone(), Event::Client, Event::ClientEnd);
    spawn_reader(stdout, max, tx, Event::Server, Event::ServerEnd);
    let record = recorder.map(crate::Recording::start);
    let mut relay = Relay {
        record,
        peer: Peer::default(),
        id_prefix: format!("plumbline-guard/{:016x}/", rand_id()),
        out: client_out,
        upstream: Some(upstream),
        baseline: Box::new(crate::Kept::new(baseline, &opts.server)),
        loaded: None,
        opts,
        next: 0,
        ready: false,
        init_ids: Vec::new(),
        forwarded: HashMap::new(),
        call_tools: HashMap::new(),
        prompts: crate::said::Prompts::default(),
        prompts_paging: false,
        server_asked: HashSet::new(),
        drops: 0,
        client_caps: None,
        told_unrecorded: false,
        meta: None,
        listen_id: None,
        walk: None,
        listing: None,
        judged: None,
        stale: true,
        client_listed: false,
        waiting_lists: Vec::new(),
        waiting_calls: Vec::new(),
        held: Vec::new(),
        superseded: false,
        rewalks: 0,
    };
    let mut poll = tokio::time::interval(relay.opts.poll);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let outcome = loop {
        let deadline = relay.walk.as_ref().map(|w| w.deadline);
        tokio::select! {
            event = rx.recv() => match event {
                Some(Event::Client(line)) => relay.on_client(line).await?,
                Some(Event::Server(line)) => relay.on_server(line).await?,
                Some(Event::ClientEnd(None)) | None => break Ok(()),
                Some(Event::ClientEnd(Some(e))) => break Err(anyhow::anyhow!("reading the client: {e}")),
                Some(Event::ServerEnd(e)) => {
                    let status = match tokio::time::timeout(Duration::from_millis(500), child.wait()).await {
                        Ok(Ok(s)) => s.to_string(),
                        _ => "still running".to_owned(),
                    };
                    let why = match e {
                        Some(e) => format!("the server broke the stream ({e}; {status})"),
                        None => format!("the server closed its output ({status})"),
                    };
                    relay.server_gone(&why).await?;
                    break Err(anyhow::anyhow!(why));
                }
            },
            () = sleep_until(deadline), if deadline.is_some() => {
                let after = relay.opts.limits.list_timeout;
                relay.walk_failed(format!("listing the server's tools took more than {after:?}")).await?;
            }
            _ = poll.tick() => relay.poll_baseline().await?,
        }
    };
    // Closing the server's stdin is how stdio says "stop"; then the group
    // is signalled and reaped.
    drop(relay.upstream.take());
    group
        .shut_down(&mut child, relay.opts.limits.shutdown_grace)
        .await;
    if let Some(recording) = relay.record.take() {
        recording.finish().await;
    }
    outcome.map(|()| relay.opts.metrics.snapshot())
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

fn rand_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish()
}

/// What the server said of itself in its handshake reply.
#[derive(Default, Clone)]
pub(crate) struct Peer {
    pub(crate) protocol_version: Option<String>,
    pub(crate) server_info: Option<Vec<u8>>,
    pub(crate) capabilities: Option<Vec<u8>>,
    pub(crate) instructions: Option<String>,
}

impl Seen {
    /// One judged listing for the recorder, with what the server said of
    /// itself in its handshake.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn of(
        server: &str,
        stateless: bool,
        peer: &Peer,
        protocol_version: String,
        tools: &[RawTool],
        judged: &Judged,
        pages: usize,
        started_at_ms: i64,
    ) -> Seen {
        Seen {
            server: server.to_owned(),
            listing: plumbline_mcp::Listing {
                era: if stateless {
                    plumbline_mcp::Era::Stateless
                } else {
                    plumbline_mcp::Era::Session
                },
                protocol_version,
                server_info: peer.server_info.clone(),
                capabilities: peer.capabilities.clone(),
                instructions: peer.instructions.clone(),
                // A stdio server has no authorization.
                authorization: None,
                tools: tools
                    .iter()
                    .map(|(name, raw)| plumbline_mcp::ListedTool {
                        raw: raw.clone(),
                        name: name.clone(),
                    })
                    .collect(),
                prompts: None,
                problems: Vec::new(),
                pages,
                relisted: false,
            },
            withheld: judged.withheld.values().cloned().collect(),
            started_at_ms,
            finished_at_ms: now_ms(),
        }
    }
}

impl Peer {
    /// From an `initialize` or `server/discover` reply, raw where raw.
    pub(crate) fn of(line: &[u8], client_meta: Option<&Value>) -> Peer {
        #[derive(serde::Deserialize)]
        struct Reply<'a> {
            #[serde(borrow)]
            result: Option<Handshake<'a>>,
        }
        #[derive(serde::Deserialize)]
        struct Handshake<'a> {
            #[serde(rename = "protocolVersion")]
            protocol_version: Option<String>,
            #[serde(borrow, rename = "serverInfo")]
            server_info: Option<&'a RawValue>,
            #[serde(borrow)]
            capabilities: Option<&'a RawValue>,
            instructions: Option<String>,
            #[serde(borrow, rename = "_meta")]
            meta: Option<std::collections::HashMap<String, &'a RawValue>>,
        }
        let Ok(Reply { result: Some(h) }) = serde_json::from_slice::<Reply<'_>>(line) else {
            return Peer::default();
        };
        let meta_info = h
            .meta
            .as_ref()
            .and_then(|m| m.get("io.modelcontextprotocol/serverInfo").copied());
        Peer {
            protocol_version: h.protocol_version.or_else(|| {
                client_meta
                    .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            }),
            server_info: h
                .server_info
                .or(meta_info)
                .map(|r| r.get().as_bytes().to_vec()),
            capabilities: h.capabilities.map(|r| r.get().as_bytes().to_vec()),
            instructions: h.instructions,
        }
    }
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// An upstream `tools/list` walk in progress.
struct Walk {
    started_at_ms: i64,
    id: String,
    pages: usize,
    cursors: HashSet<String>,
    tools: Vec<RawTool>,
    deadline: Instant,
}

struct Relay<O> {
    record: Option<crate::Recording>,
    peer: Peer,
    out: O,
    upstream: Option<tokio::process::ChildStdin>,
    opts: Options,
    baseline: Box<dyn Baseline>,
    /// The baseline as last loaded (or why it could not be).
    loaded: Option<Result<Option<LockedServer>, String>>,
    id_prefix: String,
    next: u64,
    /// The client finished its handshake (or speaks the stateless era):
    /// the guard may send requests of its own.
    ready: bool,
    /// Ids of the client's `initialize` / `server/discover` requests.
    init_ids: Vec<Id>,
    /// The client's requests forwarded to the server and not yet answered.
    forwarded: HashMap<Id, String>,
    /// The tool each forwarded call names (its result is read).
    call_tools: HashMap<Id, String>,
    /// The prompts judged in this session's `prompts/list` answers: only
    /// an allowed one may be got.
    prompts: crate::said::Prompts,
    /// The last `prompts/list` page named a next one.
    prompts_paging: bool,
    /// The server's requests relayed to the client and not yet answered.
    server_asked: HashSet<Id>,
    /// Messages dropped so far.
    drops: u64,
    /// The capabilities the client declared: its listings are recorded
    /// only when they are Plumbline's own ([`crate::same_view`]).
    client_caps: Option<Value>,
    /// Stderr was told this session's listings are not recorded.
    told_unrecorded: bool,
    /// The 2026-07-28 `_meta` the client sends with each request; the
    /// guard's own requests carry the same.
    meta: Option<Value>,
    /// The client's `subscriptions/listen` for tool list changes (2026).
    listen_id: Option<Id>,
    walk: Option<Walk>,
    /// The last complete listing and when it was fetched.
    listing: Option<(Vec<RawTool>, Instant)>,
    judged: Option<Judged>,
    /// The server said its tools changed since `listing`.
    stale: bool,
    /// The client has been offered a listing: a change of verdict is
    /// worth a `list_changed`.
    client_listed: bool,
    waiting_lists: Vec<(Id, bool)>,
    waiting_calls: Vec<(Vec<u8>, Id, String)>,
    /// The server's `list_changed`, held until the new listing is judged.
    held: Vec<Vec<u8>>,
    /// A `list_changed` came while a walk was under way.
    superseded: bool,
    /// Walks started again in a row because of that.
    rewalks: u32,
}

impl<O: AsyncWrite + Unpin> Relay<O> {
    async fn send_down(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        self.out.write_all(bytes).await?;
        self.out.write_all(b"\n").await?;
        self.out.flush().await?;
        Ok(())
    }

    async fn send_up(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        let Some(up) = self.upstream.as_mut() else {
            return Ok(());
        };
        // A server that stopped reading is noticed when its output ends.
        let _ = async {
            up.write_all(bytes).await?;
            up.write_all(b"\n").await?;
            up.flush().await
        }
        .await;
        Ok(())
    }

    async fn error_to_client(
        &mut self,
        id: &Id,
        code: i64,
        message: &str,
        data: Option<Value>,
    ) -> anyhow::Result<()> {
        let reply = error_reply(id.json(), code, message, data);
        self.send_down(reply.as_bytes()).await
    }

    /// A message the guard will not relay: said on stderr (bounded: a
    /// flood of them is counted, not printed line by line).
    fn dropped(&mut self, from: &str, why: &str) {
        self.opts.metrics.dropped();
        self.drops += 1;
        if self.drops <= 20 || self.drops.is_power_of_two() {
            eprintln!(
                "plumbline guard: {}: dropped a message from the {from}: {} ({} so far)",
                for_terminal(&self.opts.server, false),
                for_terminal(why, false),
                self.drops
            );
        }
    }

    /// Whether `id` is already the id of a request of the client's in
    /// flight (forwarded, or waiting for the guard's verdict): a second
    /// request with it would make the answers ambiguous.
    fn in_flight(&self, id: &Id) -> bool {
        self.forwarded.contains_key(id)
            || self.waiting_lists.iter().any(|(i, _)| i == id)
            || self.waiting_calls.iter().any(|(_, i, _)| i == id)
    }

    /// Forwards a request of the client's, remembering its id: only the
    /// server's answer to an id forwarded and not yet answered reaches
    /// the client.
    async fn forward_request(&mut self, id: Id, method: &str, line: &[u8]) -> anyhow::Result<()> {
        if self.forwarded.len() >= MAX_OUTSTANDING {
            return self
                .error_to_client(
                    &id,
                    REFUSED,
                    &format!(
                        "plumbline guard: {MAX_OUTSTANDING} requests are waiting for the server's answer; wait for some"
                    ),
                    None,
                )
                .await;
        }
        self.forwarded.insert(id, method.to_owned());
        self.send_up(line).await
    }

    async fn on_client(&mut self, line: Vec<u8>) -> anyhow::Result<()> {
        // Relayed only once read: its method, its id and, for a call, the
        // tool it names, exactly as the server will read them.
        let msg = match Message::read(&line) {
            Ok(m) => m,
            Err(refusal) => {
                self.dropped("client", &refusal.why());
                let reply = error_reply(&refusal.id_json(), refusal.code(), &refusal.why(), None);
                return self.send_down(reply.as_bytes()).await;
            }
        };
        let meta = match msg.param_value("_meta") {
            Ok(m) => m,
            Err(e) => return self.refuse_request(&msg, INVALID_PARAMS, &e).await,
        };
        if let Some(meta) = meta {
            if meta
                .get("io.modelcontextprotocol/protocolVersion")
                .is_some()
            {
                self.client_caps = meta
                    .get("io.modelcontextprotocol/clientCapabilities")
                    .cloned();
                self.meta = Some(meta);
                self.ready = true;
            }
        }
        let id = msg.id.clone();
        match msg.kind {
            Kind::Response => {
                let id = id.expect("a response has an id");
                if self.server_asked.remove(&id) {
                    return self.send_up(&line).await;
                }
                self.dropped(
                    "client",
                    &format!("an answer to {}, which the server did not ask", id.json()),
                );
                return Ok(());
            }
            Kind::Request => {
                let id = id.as_ref().expect("a request has an id");
                if self.in_flight(id) {
                    return self
                        .refuse_request(
                            &msg,
                            INVALID_REQUEST,
                            &format!(
                                "the id {} is already in use by a request in flight",
                                id.json()
                            ),
                        )
                        .await;
                }
            }
            Kind::Notification => {}
        }
        let method = msg.method.as_deref().unwrap_or_default();
        match (method, id) {
            ("initialize" | "server/discover", Some(id)) => {
                if method == "initialize" {
                    self.client_caps = msg.param_value("capabilities").ok().flatten();
                }
                self.init_ids.push(id.clone());
                self.forward_request(id, method, &line).await
            }
            ("notifications/initialized", None) => {
                self.ready = true;
                self.send_up(&line).await
            }
            ("subscriptions/listen", Some(id)) => {
                match msg.param_value("notifications") {
                    Ok(n) => {
                        if n.as_ref().and_then(|n| n.get("toolsListChanged")) == Some(&json!(true))
                        {
                            self.listen_id = Some(id.clone());
                        }
                    }
                    Err(e) => return self.refuse_request(&msg, INVALID_PARAMS, &e).await,
                }
                self.forward_request(id, method, &line).await
            }
            ("tools/list", Some(id)) => {
                if msg.has_param("cursor") {
                    return self
                        .error_to_client(
                            &id,
                            -32602,
                            "invalid cursor: plumbline guard answers tools/list in one page and issued no cursor",
                            None,
                        )
                        .await;
                }
                let modern =
                    msg.param_value("_meta").ok().flatten().is_some_and(|m| {
                        m.get("io.modelcontextprotocol/protocolVersion").is_some()
                    });
                self.ready = true;
                self.waiting_lists.push((id, modern));
                self.start_walk().await
            }
            ("tools/call", Some(id)) => {
                let name = match msg.param_str("name") {
                    Ok(Some(name)) => name,
                    Ok(None) => {
                        return self
                            .refuse_request(
                                &msg,
                                INVALID_PARAMS,
                                "a tools/call without params.name",
                            )
                            .await
                    }
                    Err(e) => return self.refuse_request(&msg, INVALID_PARAMS, &e).await,
                };
                // Secret material never leaves, whatever tool is called.
                if let Err((code, message, data)) = crate::check_secrets(
                    self.opts.secrets.as_deref(),
                    &self.opts.policy,
                    &self.opts.metrics,
                    &self.opts.server,
                    &name,
                    msg.param("arguments"),
                    &|e| {
                        if let Some(r) = &self.record {
                            r.send_event(e);
                        }
                    },
                ) {
                    return self.error_to_client(&id, code, &message, Some(data)).await;
                }
                if self.fresh() {
                    self.decide(line, id, name).await
                } else {
                    self.waiting_calls.push((line, id, name));
                    self.start_walk().await
                }
            }
            ("tools/call" | "tools/list", None) => {
                // A notification cannot be answered, and a server that
                // took it for a request would act on it unjudged.
                self.dropped("client", &format!("a {method} without an id"));
                Ok(())
            }
            ("notifications/cancelled", None) => {
                let of = match msg.param("requestId").map(Id::read) {
                    Some(Ok(id)) => id,
                    _ => {
                        self.dropped("client", "a cancellation without a readable requestId");
                        return Ok(());
                    }
                };
                let before = self.waiting_lists.len() + self.waiting_calls.len();
                self.waiting_lists.retain(|(id, _)| *id != of);
                self.waiting_calls.retain(|(_, id, _)| *id != of);
                // A request the server never saw is not cancelled there.
                if self.waiting_lists.len() + self.waiting_calls.len() == before {
                    // Its late answer, if the server sends one, is for no
                    // one: the client may use the id again.
                    self.forwarded.remove(&of);
                    self.call_tools.remove(&of);
                    self.send_up(&line).await?;
                }
                Ok(())
            }
            ("prompts/get", Some(id)) => {
                let name = match msg.param_str("name") {
                    Ok(Some(name)) => name,
                    Ok(None) => {
                        return self
                            .refuse_request(
                                &msg,
                                INVALID_PARAMS,
                                "a prompts/get without params.name",
                            )
                            .await
                    }
                    Err(e) => return self.refuse_request(&msg, INVALID_PARAMS, &e).await,
                };
                if self.prompts.allowed.contains(&name)
                    && !self.prompts.withheld.contains_key(&name)
                {
                    return self.forward_request(id, method, &line).await;
                }
                self.opts.metrics.refused();
                let (message, data) = crate::said::refused_prompt(
                    &self.opts.server,
                    &name,
                    self.prompts.withheld.get(&name),
                );
                eprintln!(
                    "plumbline guard: {}: refused prompts/get of {}",
                    for_terminal(&self.opts.server, false),
                    for_terminal(&name, false)
                );
                self.error_to_client(&id, REFUSED, &message, Some(data))
                    .await
            }
            (_, Some(id)) => self.forward_request(id, method, &line).await,
            (_, None) => self.send_up(&line).await,
        }
    }

    /// Answers a request the guard will not relay with an error (a
    /// notification cannot be answered: it is dropped).
    async fn refuse_request(
        &mut self,
        msg: &Message<'_>,
        code: i64,
        why: &str,
    ) -> anyhow::Result<()> {
        self.dropped("client", why);
        match &msg.id {
            Some(id) if msg.kind == Kind::Request => {
                let id = id.clone();
                self.error_to_client(&id, code, &format!("plumbline guard: {why}"), None)
                    .await
            }
            _ => Ok(()),
        }
    }

    /// The judged set may decide a call: fetched since the last
    /// `list_changed` and within `max_age`.
    fn fresh(&self) -> bool {
        self.judged.is_some()
            && !self.stale
            && self.walk.is_none()
            && self
                .listing
                .as_ref()
                .is_some_and(|(_, at)| at.elapsed() <= self.opts.policy.max_age)
    }

    async fn decide(&mut self, line: Vec<u8>, id: Id, name: String) -> anyhow::Result<()> {
        let judged = self.judged.as_ref().expect("decided on a judged listing");
        if judged.allowed.contains(&name) {
            self.call_tools.insert(id.clone(), name);
            return self.forward_request(id, "tools/call", &line).await;
        }
        self.opts.metrics.refused();
        let withheld = judged.withheld.get(&name).cloned();
        let (message, data) = refusal(&self.opts.server, &name, withheld.as_ref());
        // How to release it is for a person, not for the model that made
        // the call: it goes to the guard's log only.
        eprintln!(
            "plumbline guard: {}: refused a call to {}{}",
            for_terminal(&self.opts.server, false),
            for_terminal(&name, false),
            match &withheld {
                Some(w) => format!(
                    "; {}",
                    for_terminal(&self.baseline.how_to_review(&name, w.severity), false)
                ),
                None => String::new(),
            }
        );
        self.error_to_client(&id, REFUSED, &message, Some(data))
            .await
    }

    async fn start_walk(&mut self) -> anyhow::Result<()> {
        if self.walk.is_some() {
            return Ok(());
        }
        self.walk = Some(Walk {
            started_at_ms: now_ms(),
            id: String::new(),
            pages: 0,
            cursors: HashSet::new(),
            tools: Vec::new(),
            deadline: Instant::now() + self.opts.limits.list_timeout,
        });
        self.request_page(None).await
    }

    async fn request_page(&mut self, cursor: Option<String>) -> anyhow::Result<()> {
        self.next += 1;
        let id = format!("{}{}", self.id_prefix, self.next);
        let mut params = json!({});
        if let Some(c) = cursor {
            params["cursor"] = Value::String(c);
        }
        if let Some(meta) = &self.meta {
            params["_meta"] = meta.clone();
        }
        if let Some(w) = self.walk.as_mut() {
            w.id = id.clone();
            w.pages += 1;
        }
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params});
        self.send_up(request.to_string().as_bytes()).await
    }

    async fn on_server(&mut self, line: Vec<u8>) -> anyhow::Result<()> {
        let msg = match Message::read(&line) {
            Ok(m) => m,
            Err(refusal) => {
                // A broken reply to the guard's own listing fails the
                // listing; nothing the guard cannot read reaches the
                // client, which might read it otherwise.
                let ours = self
                    .walk
                    .as_ref()
                    .is_some_and(|w| line.windows(w.id.len()).any(|x| x == w.id.as_bytes()));
                if ours {
                    return self
                        .walk_failed(format!(
                            "the server's tools/list reply cannot be read: {}",
                            refusal.why()
                        ))
                        .await;
                }
                self.dropped("server", &refusal.why());
                return Ok(());
            }
        };
        match msg.kind {
            Kind::Response => {
                let id = msg.id.clone().expect("a response has an id");
                if self.walk.as_ref().is_some_and(|w| id.is_str(&w.id)) {
                    let value: Value = match serde_json::from_slice(&line) {
                        Ok(v) => v,
                        Err(e) => {
                            return self
                                .walk_failed(format!("a tools/list page is not plain JSON: {e}"))
                                .await
                        }
                    };
                    return self.page(&line, &value).await;
                }
                // Only the answer to a request the guard forwarded, once:
                // not an answer to a request the guard answers itself
                // (tools/list, a refused call), nor a second answer.
                let Some(method) = self.forwarded.remove(&id) else {
                    self.dropped(
                        "server",
                        &format!(
                            "an answer to {}, which is not a request the guard forwarded and the server has not answered",
                            id.json()
                        ),
                    );
                    return Ok(());
                };
                if method == "tools/call" {
                    let tool = self.call_tools.remove(&id).unwrap_or_default();
                    return match crate::said::judge_result(
                        &msg,
                        &tool,
                        &self.opts.server,
                        &self.opts.policy,
                        &self.opts.metrics,
                        &|e| {
                            if let Some(r) = &self.record {
                                r.send_event(e);
                            }
                        },
                    ) {
                        Some(judged) => self.send_down(&judged).await,
                        None => self.send_down(&line).await,
                    };
                }
                let handshake = self.init_ids.iter().position(|i| *i == id);
                if handshake.is_none() && method != "prompts/list" {
                    return self.send_down(&line).await;
                }
                // An answer the guard reads whole: the handshake (its
                // instructions; and the guard says it sends list_changed)
                // and a prompts page. Rewritten only where that changes
                // something: otherwise the bytes go on as sent.
                let Ok(mut value) = serde_json::from_slice::<Value>(&line) else {
                    self.dropped(
                        "server",
                        &format!("an answer to {method} that is not plain JSON"),
                    );
                    return self
                        .error_to_client(
                            &id,
                            REFUSED,
                            &format!(
                                "plumbline guard could not judge the server's answer to {method}"
                            ),
                            None,
                        )
                        .await;
                };
                let mut rewritten = false;
                let base = self.baseline.load().map_err(|e| format!("{e:#}"));
                if let Some(at) = handshake {
                    self.init_ids.remove(at);
                    let peer = Peer::of(&line, self.meta.as_ref());
                    if peer.protocol_version.is_some() {
                        self.peer = peer;
                    }
                    if let Some(tools) = value
                        .pointer_mut("/result/capabilities/tools")
                        .and_then(Value::as_object_mut)
                        .filter(|t| t.get("listChanged") != Some(&Value::Bool(true)))
                    {
                        tools.insert("listChanged".into(), Value::Bool(true));
                        rewritten = true;
                    }
                    if let Some(w) = crate::said::instructions(
                        &mut value,
                        &base,
                        &self.opts.classifier,
                        &self.opts.policy,
                    ) {
                        report(&self.opts.server, &w, self.opts.policy.mode);
                        self.opts.metrics.listed(1);
                        rewritten |= self.opts.policy.mode == Mode::Enforce;
                    }
                } else if let Some(p) = crate::said::prompts(
                    &mut value,
                    &base,
                    &self.opts.classifier,
                    &self.opts.policy,
                ) {
                    for w in p.withheld.values() {
                        report(&self.opts.server, w, self.opts.policy.mode);
                    }
                    rewritten |= !p.withheld.is_empty() && self.opts.policy.mode == Mode::Enforce;
                    // A first page starts the session's set again.
                    if !self.prompts_paging {
                        self.prompts = crate::said::Prompts::default();
                    }
                    self.prompts_paging = value
                        .pointer("/result/nextCursor")
                        .is_some_and(|c| c.as_str().is_some_and(|c| !c.is_empty()));
                    self.prompts.allowed.extend(p.allowed);
                    self.prompts.withheld.extend(p.withheld);
                }
                if rewritten {
                    return self.send_down(value.to_string().as_bytes()).await;
                }
                self.send_down(&line).await
            }
            Kind::Request => {
                let id = msg.id.clone().expect("a request has an id");
                if self.server_asked.len() >= MAX_OUTSTANDING {
                    self.dropped(
                        "server",
                        "a request while too many of its requests wait for the client",
                    );
                    let reply = error_reply(
                        id.json(),
                        REFUSED,
                        "plumbline guard: too many requests are waiting for the client",
                        None,
                    );
                    return self.send_up(reply.as_bytes()).await;
                }
                self.server_asked.insert(id);
                self.send_down(&line).await
            }
            Kind::Notification => {
                let method = msg.method.as_deref().unwrap_or_default();
                if method == "notifications/cancelled" {
                    if let Some(Ok(of)) = msg.param("requestId").map(Id::read) {
                        self.server_asked.remove(&of);
                    }
                }
                if method == "notifications/tools/list_changed" {
                    self.stale = true;
                    // A walk under way may have read pages from before the change.
                    if self.walk.is_some() {
                        self.superseded = true;
                    }
                    if self.ready && (self.client_listed || self.walk.is_some()) {
                        self.held.push(line);
                        return self.start_walk().await;
                    }
                }
                self.send_down(&line).await
            }
        }
    }

    async fn page(&mut self, line: &[u8], msg: &Value) -> anyhow::Result<()> {
        if let Some(e) = msg.get("error") {
            return self
                .walk_failed(format!("the server answered tools/list with an error: {e}"))
                .await;
        }
        #[derive(serde::Deserialize)]
        struct Page<'a> {
            #[serde(borrow)]
            result: PageResult<'a>,
        }
        #[derive(serde::Deserialize)]
        struct PageResult<'a> {
            #[serde(borrow)]
            tools: Vec<&'a RawValue>,
            #[serde(rename = "nextCursor")]
            next_cursor: Option<String>,
        }
        let page: Page<'_> = match serde_json::from_slice(line) {
            Ok(p) => p,
            Err(e) => {
                return self
                    .walk_failed(format!("a tools/list page is not a list of tools: {e}"))
                    .await
            }
        };
        let limits = &self.opts.limits;
        let w = self.walk.as_mut().expect("a page of a walk");
        for t in page.result.tools {
            let raw = t.get().as_bytes().to_vec();
            w.tools
                .push((plumbline_taxonomy::json::tool_name(&raw), raw));
        }
        if w.tools.len() > limits.max_tools {
            let n = limits.max_tools;
            return self
                .walk_failed(format!("the server listed more than {n} tools"))
                .await;
        }
        match page.result.next_cursor {
            Some(c) if !c.is_empty() => {
                if !w.cursors.insert(c.clone()) {
                    return self
                        .walk_failed(format!("the server repeated the cursor {c:?}"))
                        .await;
                }
                if w.pages >= limits.max_pages {
                    let n = limits.max_pages;
                    return self
                        .walk_failed(format!("the server's listing goes on past {n} pages"))
                        .await;
                }
                self.request_page(Some(c)).await
            }
            _ => {
                let w = self.walk.take().expect("walk");
                // The server changed its tools while this walk read them:
                // walk again (a few times at most, then judge the latest).
                if std::mem::take(&mut self.superseded) && self.rewalks < MAX_REWALKS {
                    self.rewalks += 1;
                    return self.start_walk().await;
                }
                self.rewalks = 0;
                let (started, pages) = (w.started_at_ms, w.pages);
                self.listing = Some((w.tools, Instant::now()));
                self.stale = false;
                self.rejudge(true).await?;
                self.record(started, pages);
                Ok(())
            }
        }
    }

    /// A walk that could not finish: what was judged before stays for no
    /// one; the error policy decides.
    async fn walk_failed(&mut self, why: String) -> anyhow::Result<()> {
        let tools = self.walk.take().map(|w| w.tools).unwrap_or_default();
        self.superseded = false;
        self.rewalks = 0;
        let block = self.opts.policy.on_error == OnError::Block;
        eprintln!(
            "plumbline guard: {}: {}; {}",
            for_terminal(&self.opts.server, false),
            for_terminal(&why, false),
            if block {
                "every tool is withheld (--on-error block)"
            } else {
                "every tool passes unjudged (--on-error pass)"
            }
        );
        self.judged = Some(ungraded(&tools, &why, block));
        self.listing = Some((tools, Instant::now()));
        self.stale = true;
        self.settle(None, Some(why)).await
    }

    /// Judges the last listing against the baseline as it is now.
    async fn rejudge(&mut self, listed: bool) -> anyhow::Result<()> {
        let Some((tools, _)) = &self.listing else {
            return Ok(());
        };
        let before = self.judged.as_ref().map(|j| j.allowed.clone());
        let loaded = self.baseline.load().map_err(|e| format!("{e:#}"));
        let judged = match &loaded {
            Ok(base) => judge(
                &self.opts.classifier,
                base.as_ref(),
                tools,
                &self.opts.policy,
            )
            .map_err(|e| format!("{e:#}")),
            Err(e) => Err(format!("reading the baseline: {e}")),
        };
        self.loaded = Some(loaded);
        let (judged, error) = match judged {
            Ok(j) => (j, None),
            Err(e) => {
                let block = self.opts.policy.on_error == OnError::Block;
                eprintln!(
                    "plumbline guard: {}: {}; {}",
                    for_terminal(&self.opts.server, false),
                    for_terminal(&e, false),
                    if block {
                        "every tool is withheld (--on-error block)"
                    } else {
                        "every tool passes unjudged (--on-error pass)"
                    }
                );
                (ungraded(tools, &e, block), Some(e))
            }
        };
        for w in judged.withheld.values() {
            report(&self.opts.server, w, self.opts.policy.mode);
        }
        if listed {
            self.opts.metrics.listed(judged.withheld.len());
        }
        self.judged = Some(judged);
        self.settle(before, error).await
    }

    /// After a verdict: answers the waiting lists and calls, forwards the
    /// held `list_changed`, or sends the guard's own when the allowed set
    /// changed under a client that was offered the old one.
    async fn settle(
        &mut self,
        before: Option<BTreeSet<String>>,
        error: Option<String>,
    ) -> anyhow::Result<()> {
        let judged = self.judged.clone().unwrap_or_default();
        let blocked = error.is_some() && self.opts.policy.on_error == OnError::Block;
        for (id, modern) in std::mem::take(&mut self.waiting_lists) {
            if blocked {
                let why = error.clone().unwrap_or_default();
                self.error_to_client(
                    &id,
                    REFUSED,
                    &format!(
                        "plumbline guard could not judge the tools of {}: {why}",
                        self.opts.server
                    ),
                    None,
                )
                .await?;
                continue;
            }
            let mut result = String::from("{\"tools\":[");
            for (i, t) in judged.offered.iter().enumerate() {
                if i > 0 {
                    result.push(',');
                }
                result.push_str(std::str::from_utf8(t).unwrap_or("null"));
            }
            result.push(']');
            if modern {
                // No client may cache past a verdict.
                result.push_str(
                    ",\"resultType\":\"complete\",\"ttlMs\":0,\"cacheScope\":\"private\"",
                );
            }
            result.push('}');
            let reply = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{result}}}");
            self.send_down(reply.as_bytes()).await?;
            self.client_listed = true;
        }
        for (line, id, name) in std::mem::take(&mut self.waiting_calls) {
            if blocked {
                self.opts.metrics.refused();
                let why = error.clone().unwrap_or_default();
                self.error_to_client(
                    &id,
                    REFUSED,
                    &format!(
                        "plumbline guard refused the call to {name:?}: the tools of {} could not be judged: {why}",
                        self.opts.server
                    ),
                    None,
                )
                .await?;
            } else {
                self.decide(line, id, name).await?;
            }
        }
        let held = std::mem::take(&mut self.held);
        let forwarded = !held.is_empty();
        for line in held {
            self.send_down(&line).await?;
        }
        let changed = before.is_some_and(|b| b != judged.allowed);
        if changed && !forwarded && self.client_listed {
            self.own_list_changed().await?;
        }
        Ok(())
    }

    /// Hands the last listing and its verdict to the recorder.
    fn record(&mut self, started_at_ms: i64, pages: usize) {
        let (Some(tx), Some((tools, _)), Some(judged)) =
            (&self.record, &self.listing, &self.judged)
        else {
            return;
        };
        if !crate::same_view(self.client_caps.as_ref()) {
            if !std::mem::replace(&mut self.told_unrecorded, true) {
                eprintln!(
                    "{}",
                    crate::not_the_servers_view(&self.opts.server, self.client_caps.as_ref())
                );
            }
            return;
        }
        let seen = Seen::of(
            &self.opts.server,
            self.meta.is_some(),
            &self.peer,
            self.peer.protocol_version.clone().unwrap_or_default(),
            tools,
            judged,
            pages,
            started_at_ms,
        );
        if !tx.send(seen) {
            eprintln!(
                "plumbline guard: {}: the recorder is behind; this listing is not recorded",
                for_terminal(&self.opts.server, false)
            );
        }
    }

    async fn own_list_changed(&mut self) -> anyhow::Result<()> {
        let note = match (&self.meta, &self.listen_id) {
            (None, _) => json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
            (Some(_), Some(id)) => {
                json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": id.value()}}})
            }
            // A 2026 client that does not listen gets nothing it did not
            // ask for.
            (Some(_), None) => return Ok(()),
        };
        self.opts.metrics.told(1);
        self.send_down(note.to_string().as_bytes()).await
    }

    /// Reads the baseline again; a changed one re-judges the last listing.
    async fn poll_baseline(&mut self) -> anyhow::Result<()> {
        if self.listing.is_none() || self.walk.is_some() {
            return Ok(());
        }
        let now = self.baseline.load().map_err(|e| format!("{e:#}"));
        if self.loaded.as_ref() == Some(&now) {
            return Ok(());
        }
        self.rejudge(false).await
    }

    /// The server went away: nothing waiting will be answered by it.
    async fn server_gone(&mut self, why: &str) -> anyhow::Result<()> {
        let ids: Vec<Id> = self
            .waiting_lists
            .drain(..)
            .map(|(id, _)| id)
            .chain(self.waiting_calls.drain(..).map(|(_, id, _)| id))
            .collect();
        for id in ids {
            self.error_to_client(&id, REFUSED, &format!("plumbline guard: {why}"), None)
                .await?;
        }
        Ok(())
    }
}

fn report(server: &str, w: &Withheld, mode: Mode) {
    eprintln!(
        "plumbline guard: {}: {} {}: {}",
        for_terminal(server, false),
        if mode == Mode::Warn {
            "would withhold"
        } else {
            "withheld"
        },
        for_terminal(&w.name, false),
        for_terminal(&w.describe(), false)
    );
}
