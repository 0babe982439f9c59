//! The guard over Streamable HTTP: `plumbline guard --listen ADDR
//! --upstream URL`. Every request is passed upstream and its answer
//! streamed back (JSON or SSE, event ids and `retry` as sent), with the
//! same three exceptions as over stdio: `tools/list` is answered by the
//! guard from its own judged listing, `tools/call` is checked against it,
//! and a `list_changed` on any stream marks the session's listing stale.
//! Sessions are the upstream's own: the `Mcp-Session-Id` goes through
//! unchanged, so one client session is one upstream session.
//!
//! Checked on every request: `Host` and `Origin` name the guard's own
//! loopback address (403 otherwise, against DNS rebinding); on the
//! 2026-07-28 wire a request whose `Mcp-Method` or `Mcp-Name` header is
//! missing or differs from its body is refused (400, -32020). The client's `Authorization` is never
//! passed upstream; upstream credentials are the configuration's headers.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::Response;
use futures_util::StreamExt as _;
use plumbline_lock::plan::RawTool;
use plumbline_mcp::wire::SseParser;
use plumbline_mcp::Limits;
use plumbline_taxonomy::sanitize::for_terminal;
use plumbline_taxonomy::Classifier;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::judge::{judge, ungraded, Judged};
use crate::message::{Id, Kind, Message, INVALID_PARAMS, INVALID_REQUEST};
use crate::stdio::{error_reply, now_ms, refusal, REFUSED};
use crate::{Baseline, Counters, OnError, Policy, Recorder, Recording, Seen};

/// One guarded Streamable HTTP server.
pub struct Options {
    pub server: String,
    /// The upstream endpoint.
    pub upstream: String,
    /// Sent upstream with every request (credentials from the
    /// configuration); the client's own `Authorization` never is.
    pub upstream_headers: Vec<(String, String)>,
    /// The upstream's authorization (OAuth): its token goes with every
    /// request, and a refusal (401, 403 `insufficient_scope`) is answered
    /// with a new one and the request again.
    pub upstream_auth: Option<plumbline_mcp::Auth>,
    /// Without `upstream_auth`: what stderr says, once, when the upstream
    /// answers 401 (how to give the guard a way to authorize).
    pub unauthorized_hint: Option<String>,
    pub policy: Policy,
    pub classifier: Classifier,
    pub limits: Limits,
    /// The secrets calls are checked for (none: calls are not checked).
    pub secrets: Option<std::sync::Arc<crate::SecretWatch>>,
    /// Where the counts go (`/metrics`, and the summary at the end).
    pub metrics: Arc<crate::Metrics>,
    /// When set, every request must carry `Authorization: Bearer` with it
    /// (compared in constant time); the guard adds upstream credentials,
    /// so without it any local user can use them.
    pub listen_token: Option<String>,
}

/// Whether `headers` carry `Authorization: Bearer TOKEN`. The digests are
/// compared, byte by byte without an early exit, so the time taken says
/// nothing of how much of the token was right, nor of its length.
fn authorized(headers: &HeaderMap, token: &str) -> bool {
    let given = headers
        .get("authorization")
        .map(|v| v.as_bytes())
        .and_then(|v| {
            let (scheme, rest) = v.split_at(v.iter().position(|&b| b == b' ').unwrap_or(v.len()));
            scheme
                .eq_ignore_ascii_case(b"bearer")
                .then(|| rest.trim_ascii())
        })
        .unwrap_or_default();
    let a = plumbline_base::digest::digest(given);
    let b = plumbline_base::digest::digest(token.as_bytes());
    let differ = a
        .as_bytes()
        .iter()
        .zip(b.as_bytes())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(differ) == 0 && !given.is_empty()
}

/// What the guard knows of one session's tools.
#[derive(Default)]
struct Session {
    /// The last listing, as sent, and its verdict.
    tools: Option<Vec<RawTool>>,
    judged: Option<Judged>,
    at: Option<Instant>,
    stale: bool,
    /// How many `list_changed` the session's streams carried: a listing
    /// read while one came is stale from the start.
    changes: u64,
    /// The session's GET streams: each is told (once) when a verdict
    /// changes on the guard's side, and sends the client a `list_changed`.
    streams: Vec<tokio::sync::mpsc::Sender<()>>,
    /// Ids of the client's requests forwarded and not yet answered (how
    /// many of each: without a session, clients' ids may coincide).
    forwarded: HashMap<Id, u32>,
    /// Ids of the client's requests the guard is answering itself.
    held: std::collections::HashSet<Id>,
    /// The capabilities the client declared in its handshake.
    client_caps: Option<Value>,
    /// The prompts judged in the session's `prompts/list` answers.
    prompts: crate::said::Prompts,
    /// The last prompts page named a next one.
    prompts_paging: bool,
    /// Stderr was told this session's listings are not recorded.
    told_unrecorded: bool,
    /// Forwarded requests whose POST stream ended before their answer:
    /// only these may be answered on the GET stream (a resumed stream),
    /// and their answers are judged as their own stream would have
    /// judged them (a result read for injected text, a prompts page or a
    /// handshake's instructions against the baseline).
    orphaned: HashMap<Id, Orphan>,
    /// Ids of the server's requests relayed to the client, not yet
    /// answered.
    server_asked: std::collections::HashSet<Id>,
}

/// The guard's own `list_changed`, as one SSE event.
const OWN_LIST_CHANGED: &[u8] =
    b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n";

struct App {
    opts: Options,
    /// The guard's own address: `Host` and `Origin` must name it.
    local: SocketAddr,
    client: reqwest::Client,
    baseline: Mutex<Box<dyn Baseline>>,
    sessions: Mutex<HashMap<String, Session>>,
    next: std::sync::atomic::AtomicU64,
    /// The baseline as last loaded, to notice a review.
    loaded: Mutex<Option<Result<Option<plumbline_lock::LockedServer>, String>>>,
    record: Mutex<Option<Recording>>,
    /// What the server said of itself in its last handshake reply.
    peer: Mutex<crate::stdio::Peer>,
    /// Whether stderr was told that the upstream asks for an
    /// authorization the guard was given no way to obtain.
    told_unauthorized: std::sync::atomic::AtomicBool,
    /// Messages dropped so far.
    drops: std::sync::atomic::AtomicU64,
}

impl App {
    /// An event for the history.
    fn event(&self, e: crate::Event) {
        if let Some(r) = self.record.lock().expect("recording").as_ref() {
            r.send_event(e);
        }
    }

    /// A message not relayed: said on stderr (a flood is counted, not
    /// printed line by line).
    fn dropped(&self, from: &str, why: &str) {
        self.opts.metrics.dropped();
        let n = self
            .drops
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        if n <= 20 || n.is_power_of_two() {
            eprintln!(
                "plumbline guard: {}: dropped a message from the {from}: {} ({n} so far)",
                for_terminal(&self.opts.server, false),
                for_terminal(why, false),
            );
        }
    }
}

/// Serves until `stop` resolves.
pub async fn serve(
    opts: Options,
    baseline: Box<dyn Baseline>,
    recorder: Option<Box<dyn Recorder>>,
    listener: tokio::net::TcpListener,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<Counters> {
    let local = listener.local_addr()?;
    let client = plumbline_mcp::wire::http_client(&opts.limits)
        .map_err(|e| anyhow::anyhow!("the HTTP client: {e}"))?;
    let server = opts.server.clone();
    let app = Arc::new(App {
        opts,
        local,
        client,
        baseline: Mutex::new(Box::new(crate::Kept::new(baseline, &server))),
        sessions: Mutex::new(HashMap::new()),
        next: Default::default(),
        loaded: Mutex::new(None),
        record: Mutex::new(recorder.map(Recording::start)),
        peer: Mutex::new(Default::default()),
        told_unauthorized: Default::default(),
        drops: Default::default(),
    });
    // A review (pin --update, an accept on the dashboard) re-judges every
    // session's last listing; a session whose allowed set changed is told.
    let polling = Arc::clone(&app);
    let poll = tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
        loop {
            tick.tick().await;
            rejudge_on_review(&polling);
        }
    });
    let router = axum::Router::new()
        .fallback(handle)
        .with_state(Arc::clone(&app));
    // On `stop`, requests in flight get a moment to finish; an open
    // notification stream would otherwise keep the guard up for ever.
    let (stopping, stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        stop.await;
        let _ = stopping.send(true);
    });
    let mut graceful = stopped.clone();
    let mut deadline = stopped;
    let served = axum::serve(listener, router).with_graceful_shutdown(async move {
        let _ = graceful.wait_for(|s| *s).await;
    });
    let served = tokio::select! {
        r = served => r,
        () = async move {
            let _ = deadline.wait_for(|s| *s).await;
            tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        } => Ok(()),
    };
    poll.abort();
    let recording = app.record.lock().expect("recording").take();
    if let Some(r) = recording {
        r.finish().await;
    }
    served?;
    Ok(app.opts.metrics.snapshot())
}

/// Loads the baseline; when it changed since last loaded, re-judges each
/// session's last listing and tells the sessions whose allowed set changed.
fn rejudge_on_review(app: &Arc<App>) {
    let now = app
        .baseline
        .lock()
        .expect("baseline")
        .load()
        .map_err(|e| format!("{e:#}"));
    {
        let mut loaded = app.loaded.lock().expect("loaded");
        if loaded.as_ref() == Some(&now) {
            return;
        }
        let first = loaded.is_none();
        *loaded = Some(now.clone());
        if first {
            return;
        }
    }
    let block = app.opts.policy.on_error == OnError::Block;
    let mut told = 0;
    let mut sessions = app.sessions.lock().expect("sessions");
    for s in sessions.values_mut() {
        let (Some(tools), Some(before)) = (&s.tools, &s.judged) else {
            continue;
        };
        let judged = match &now {
            Ok(base) => judge(&app.opts.classifier, base.as_ref(), tools, &app.opts.policy)
                .unwrap_or_else(|e| ungraded(tools, &format!("{e:#}"), block)),
            Err(e) => ungraded(tools, e, block),
        };
        if judged.allowed != before.allowed {
            s.streams.retain(|tx| !tx.is_closed());
            for tx in &s.streams {
                let _ = tx.try_send(());
            }
            told += 1;
        }
        s.judged = Some(judged);
    }
    drop(sessions);
    if told > 0 {
        app.opts.metrics.told(told);
    }
}

fn plain(status: StatusCode, text: &str) -> Response {
    Response::builder()
        .status(status)
        .header("content-type", "text/plain; charset=utf-8")
        .body(Body::from(text.to_owned()))
        .expect("a valid response")
}

fn json_text(status: StatusCode, body: String) -> Response {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .expect("a valid response")
}

/// `Host` and `Origin` name the guard itself (a loopback name and its
/// port): a page elsewhere that a browser was made to send here (DNS
/// rebinding) is refused.
fn same_host(app: &App, headers: &HeaderMap) -> bool {
    let port = app.local.port();
    let ok = |authority: &str| {
        let allowed = [
            format!("127.0.0.1:{port}"),
            format!("localhost:{port}"),
            format!("[::1]:{port}"),
        ];
        allowed.iter().any(|a| a.eq_ignore_ascii_case(authority))
    };
    let host = headers.get("host").and_then(|h| h.to_str().ok());
    if !host.is_some_and(ok) {
        return false;
    }
    match headers.get("origin").map(|o| o.to_str()) {
        None => true,
        Some(Ok(origin)) => origin
            .strip_prefix("http://")
            .is_some_and(|rest| ok(rest.trim_end_matches('/'))),
        Some(Err(_)) => false,
    }
}

/// Headers that belong to one connection, never passed on.
fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "host"
            | "connection"
            | "content-length"
            | "transfer-encoding"
            | "te"
            | "trailer"
            | "upgrade"
            | "keep-alive"
            | "proxy-authorization"
            | "proxy-connection"
            | "authorization"
            | "cookie"
    )
}

async fn handle(
    State(app): State<Arc<App>>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !same_host(&app, &headers) {
        return plain(
            StatusCode::FORBIDDEN,
            "plumbline guard: Host or Origin is not this guard's own address",
        );
    }
    if let Some(token) = &app.opts.listen_token {
        if !authorized(&headers, token) {
            let mut r = plain(
                StatusCode::UNAUTHORIZED,
                "plumbline guard: this guard needs Authorization: Bearer with its --listen-token",
            );
            r.headers_mut().insert(
                "www-authenticate",
                HeaderValue::from_static("Bearer realm=\"plumbline guard\""),
            );
            return r;
        }
    }
    let session = headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let mut asked = Asked {
        expect: None,
        handshake: None,
        method: None,
        tool: None,
    };
    if method == Method::POST {
        match judge_post(&app, &headers, &session, &body).await {
            Ok(Posted::Answered(response)) => return response,
            Ok(Posted::Forward(a)) => asked = a,
            Err(refused) => return refused,
        }
    }
    if method == Method::DELETE {
        app.sessions.lock().expect("sessions").remove(&session);
    }
    forward(&app, method, &headers, body, session, asked).await
}

/// What the guard makes of a client's POST.
enum Posted {
    /// The guard answers it itself (a listing, a refusal).
    Answered(Response),
    /// It goes upstream.
    Forward(Asked),
}

/// What a forwarded POST asked, for reading its answer.
struct Asked {
    /// The id of the answer its stream may carry (a request's).
    expect: Option<Id>,
    /// The client's handshake, when it is one.
    handshake: Option<Handshake>,
    /// The request's method, for the answers the guard reads whole.
    method: Option<String>,
    /// The tool a `tools/call` names.
    tool: Option<String>,
}

/// What a request whose POST stream ended unanswered asked, for judging
/// its answer when it comes on the GET stream.
struct Orphan {
    handshake: Option<Handshake>,
    asked: Option<String>,
    tool: Option<String>,
}

/// A client's handshake request, read as its reply passes.
#[derive(Clone)]
struct Handshake {
    /// The client's `_meta` (2026-07-28).
    meta: Option<Value>,
    /// The capabilities it declared (`initialize`).
    caps: Option<Value>,
}

/// A refusal of a client's message: a JSON-RPC error, HTTP 400.
fn refused(app: &App, id_json: &str, code: i64, why: &str) -> Response {
    app.dropped("client", why);
    json_text(
        StatusCode::BAD_REQUEST,
        error_reply(id_json, code, &format!("plumbline guard: {why}"), None),
    )
}

/// Reads a client's POST as the upstream will read it, and decides: the
/// guard answers it, or it goes upstream. Nothing unread goes on.
async fn judge_post(
    app: &Arc<App>,
    headers: &HeaderMap,
    session: &str,
    body: &[u8],
) -> Result<Posted, Response> {
    let msg = match Message::read(body) {
        Ok(m) => m,
        Err(r) => return Err(refused(app, &r.id_json(), r.code(), &r.why())),
    };
    let meta = msg
        .param_value("_meta")
        .map_err(|e| refused(app, msg.id_json(), INVALID_PARAMS, &e))?;
    let meta = meta.filter(|m| m.get("io.modelcontextprotocol/protocolVersion").is_some());
    let method = msg.method.as_deref().unwrap_or_default();
    let handshake = matches!(method, "initialize" | "server/discover").then(|| Handshake {
        meta: meta.clone(),
        caps: msg.param_value("capabilities").ok().flatten(),
    });
    if let Some(mismatch) = header_mismatch(headers, &msg) {
        return Err(json_text(
            StatusCode::BAD_REQUEST,
            error_reply(msg.id_json(), HEADER_MISMATCH, &mismatch, None),
        ));
    }
    match msg.kind {
        Kind::Response => {
            let id = msg.id.clone().expect("a response has an id");
            let asked = app
                .sessions
                .lock()
                .expect("sessions")
                .get_mut(session)
                .is_some_and(|s| s.server_asked.remove(&id));
            if !asked {
                return Err(refused(
                    app,
                    "null",
                    INVALID_REQUEST,
                    &format!("an answer to {id}, which the server did not ask"),
                ));
            }
            Ok(Posted::Forward(Asked {
                expect: None,
                handshake,
                method: None,
                tool: None,
            }))
        }
        Kind::Notification => {
            if matches!(method, "tools/call" | "tools/list") {
                return Err(refused(
                    app,
                    "null",
                    INVALID_REQUEST,
                    &format!("a {method} without an id"),
                ));
            }
            if method == "notifications/cancelled" {
                if let Some(Ok(of)) = msg.param("requestId").map(Id::read) {
                    take_forwarded(app, session, &of);
                    if let Some(s) = app.sessions.lock().expect("sessions").get_mut(session) {
                        s.orphaned.remove(&of);
                    }
                }
            }
            Ok(Posted::Forward(Asked {
                expect: None,
                handshake,
                method: None,
                tool: None,
            }))
        }
        Kind::Request => {
            let id = msg.id.clone().expect("a request has an id");
            // In a session, one id is one request in flight; without one
            // (2026-07-28), each request's answer is its own POST's.
            {
                let mut sessions = app.sessions.lock().expect("sessions");
                let s = sessions.entry(session.to_owned()).or_default();
                if !session.is_empty()
                    && (s.held.contains(&id) || s.forwarded.get(&id).is_some_and(|n| *n > 0))
                {
                    drop(sessions);
                    return Err(refused(
                        app,
                        id.json(),
                        INVALID_REQUEST,
                        &format!("the id {id} is already in use by a request in flight"),
                    ));
                }
                if s.forwarded.len() >= MAX_OUTSTANDING {
                    drop(sessions);
                    return Err(refused(
                        app,
                        id.json(),
                        REFUSED,
                        &format!("{MAX_OUTSTANDING} requests of this session wait for the server's answer"),
                    ));
                }
                s.held.insert(id.clone());
            }
            let answered = match method {
                "tools/list" => list_for_client(app, headers, session, &msg, &id, meta).await,
                "prompts/get" => match msg.param_str("name") {
                    Ok(Some(name)) => check_prompt(app, session, &name, &id),
                    Ok(None) => Some(refused(
                        app,
                        id.json(),
                        INVALID_PARAMS,
                        "a prompts/get without params.name",
                    )),
                    Err(e) => Some(refused(app, id.json(), INVALID_PARAMS, &e)),
                },
                "tools/call" => match msg.param_str("name") {
                    Ok(Some(name)) => match crate::check_secrets(
                        app.opts.secrets.as_deref(),
                        &app.opts.policy,
                        &app.opts.metrics,
                        &app.opts.server,
                        &name,
                        msg.param("arguments"),
                        &|e| app.event(e),
                    ) {
                        Err((code, message, data)) => Some(json_text(
                            StatusCode::OK,
                            error_reply(id.json(), code, &message, Some(data)),
                        )),
                        Ok(()) => check_call(app, headers, session, &name, &id, meta).await,
                    },
                    Ok(None) => Some(refused(
                        app,
                        id.json(),
                        INVALID_PARAMS,
                        "a tools/call without params.name",
                    )),
                    Err(e) => Some(refused(app, id.json(), INVALID_PARAMS, &e)),
                },
                _ => None,
            };
            let mut sessions = app.sessions.lock().expect("sessions");
            let s = sessions.entry(session.to_owned()).or_default();
            s.held.remove(&id);
            if let Some(response) = answered {
                return Ok(Posted::Answered(response));
            }
            *s.forwarded.entry(id.clone()).or_default() += 1;
            Ok(Posted::Forward(Asked {
                expect: Some(id),
                handshake,
                method: Some(method.to_owned()),
                tool: (method == "tools/call")
                    .then(|| msg.param_str("name").ok().flatten())
                    .flatten(),
            }))
        }
    }
}

/// `None` when the prompt may be got: it was allowed in the session's
/// last judged `prompts/list`; else the refusal.
fn check_prompt(app: &App, session: &str, name: &str, id: &Id) -> Option<Response> {
    let sessions = app.sessions.lock().expect("sessions");
    let prompts = sessions.get(session).map(|s| &s.prompts);
    let withheld = prompts.and_then(|p| p.withheld.get(name));
    if withheld.is_none() && prompts.is_some_and(|p| p.allowed.contains(name)) {
        return None;
    }
    app.opts.metrics.refused();
    let (message, data) = crate::said::refused_prompt(&app.opts.server, name, withheld);
    eprintln!(
        "plumbline guard: {}: refused prompts/get of {}",
        for_terminal(&app.opts.server, false),
        for_terminal(name, false)
    );
    Some(json_text(
        StatusCode::OK,
        error_reply(id.json(), REFUSED, &message, Some(data)),
    ))
}

/// Takes one answer to `id` off what `session` waits for; `false` when
/// it waits for none (the answer is then not relayed).
fn take_forwarded(app: &App, session: &str, id: &Id) -> bool {
    let mut sessions = app.sessions.lock().expect("sessions");
    let Some(s) = sessions.get_mut(session) else {
        return false;
    };
    match s.forwarded.get_mut(id) {
        Some(n) if *n > 1 => {
            *n -= 1;
            true
        }
        Some(_) => {
            s.forwarded.remove(id);
            true
        }
        None => false,
    }
}

/// The JSON-RPC error of a request whose standard headers contradict
/// its body (SEP-2243, 2026-07-28 Streamable HTTP).
const HEADER_MISMATCH: i64 = -32020;

/// How many requests of one session may wait for the server's answer.
const MAX_OUTSTANDING: usize = 4096;

/// On the 2026-07-28 wire (by its `MCP-Protocol-Version` header) every
/// request and notification names its method in `Mcp-Method`, and a
/// `tools/call`, `prompts/get` or `resources/read` names what it acts on
/// in `Mcp-Name` (SEP-2243). The guard holds the client to that before it
/// answers or relays anything: a proxy that routes or refuses by header
/// must not let the header say one tool while the body calls another.
/// Values are compared exactly (method names are case-sensitive) after
/// the optional whitespace HTTP allows around a field value. Earlier eras
/// carry no such headers and are not checked.
fn header_mismatch(headers: &HeaderMap, msg: &Message<'_>) -> Option<String> {
    let era = headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)?;
    // Revisions are dates, so their order is the order of their strings.
    if era < "2026-07-28" {
        return None;
    }
    let method = msg.method.as_deref()?;
    let value = |name: &str| {
        headers
            .get(name)
            .map(|v| v.as_bytes().trim_ascii_start().trim_ascii_end())
    };
    match value("mcp-method") {
        None => {
            return Some(format!(
                "header mismatch: no Mcp-Method header for {method:?}"
            ))
        }
        Some(v) if v != method.as_bytes() => {
            return Some(format!(
                "header mismatch: Mcp-Method {:?} differs from the method {method:?}",
                String::from_utf8_lossy(v)
            ))
        }
        Some(_) => {}
    }
    let field = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        _ => return None,
    };
    let named = msg.param_str(field).ok().flatten()?;
    match value("mcp-name") {
        None => Some(format!(
            "header mismatch: no Mcp-Name header for params.{field} {named:?}"
        )),
        Some(v) if v != named.as_bytes() => Some(format!(
            "header mismatch: Mcp-Name {:?} differs from params.{field} {named:?}",
            String::from_utf8_lossy(v)
        )),
        Some(_) => None,
    }
}

/// The headers of a request passed upstream: the client's, less those of
/// its connection and its credentials, plus the configured ones.
fn upstream_headers(app: &App, headers: &HeaderMap) -> reqwest::header::HeaderMap {
    let mut out = reqwest::header::HeaderMap::new();
    for (k, v) in headers {
        if !hop_by_hop(k) {
            if let (Ok(k), Ok(v)) = (
                reqwest::header::HeaderName::from_bytes(k.as_str().as_bytes()),
                reqwest::header::HeaderValue::from_bytes(v.as_bytes()),
            ) {
                out.append(k, v);
            }
        }
    }
    for (k, v) in &app.opts.upstream_headers {
        if let (Ok(k), Ok(v)) = (
            reqwest::header::HeaderName::from_bytes(k.as_bytes()),
            reqwest::header::HeaderValue::from_str(v),
        ) {
            out.insert(k, v);
        }
    }
    out
}

/// Sends a request upstream with the upstream's token, if it has an
/// authorization: a refusal for want of one is answered with a new token
/// and the request again (three times at most); when no token can be had,
/// the refusal is what the client gets, and stderr says why.
async fn send_upstream(
    app: &App,
    method: reqwest::Method,
    mut headers: reqwest::header::HeaderMap,
    body: Bytes,
) -> reqwest::Result<reqwest::Response> {
    let mut authorizations = 0;
    loop {
        if let Some(auth) = &app.opts.upstream_auth {
            if let Some(value) = auth
                .0
                .bearer_detached()
                .await
                .and_then(|t| plumbline_mcp::Auth::header(&t))
            {
                headers.insert(reqwest::header::AUTHORIZATION, value);
            }
        }
        let response = app
            .client
            .request(method.clone(), &app.opts.upstream)
            .headers(headers.clone())
            .body(body.clone())
            .send()
            .await?;
        let Some(auth) = &app.opts.upstream_auth else {
            if let Some(hint) = &app.opts.unauthorized_hint {
                if response.status() == reqwest::StatusCode::UNAUTHORIZED
                    && !app
                        .told_unauthorized
                        .swap(true, std::sync::atomic::Ordering::Relaxed)
                {
                    eprintln!(
                        "plumbline guard: {}: the upstream server asks for authorization \
                         (HTTP 401), which the guard does not pass on from its clients: {hint}",
                        for_terminal(&app.opts.server, false)
                    );
                }
            }
            return Ok(response);
        };
        let status = response.status();
        if status.is_success() {
            auth.0.accepted().await;
            return Ok(response);
        }
        if !plumbline_mcp::Auth::refusal(status)
            || authorizations == plumbline_mcp::AUTHORIZATIONS_PER_REQUEST
        {
            return Ok(response);
        }
        authorizations += 1;
        let challenges = plumbline_mcp::auth::challenges_of(response.headers());
        if let Err(e) = auth.0.refused_detached(status.as_u16(), &challenges).await {
            eprintln!(
                "plumbline guard: {}: the upstream server needs authorization: {e}",
                app.opts.server
            );
            return Ok(response);
        }
    }
}

async fn forward(
    app: &Arc<App>,
    method: Method,
    headers: &HeaderMap,
    body: Bytes,
    session: String,
    // What the POST asked: the one answer its stream may relay, its
    // method, and for a handshake what the client declared.
    asked: Asked,
) -> Response {
    let Asked {
        expect,
        handshake,
        method: asked,
        tool,
    } = asked;
    let Ok(m) = reqwest::Method::from_bytes(method.as_str().as_bytes()) else {
        return plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
    };
    let sent = send_upstream(app, m, upstream_headers(app, headers), body).await;
    let upstream = match sent {
        Ok(r) => r,
        Err(e) => {
            // Not sent: nothing will answer it.
            if let Some(id) = &expect {
                take_forwarded(app, &session, id);
            }
            return plain(
                StatusCode::BAD_GATEWAY,
                &format!(
                    "plumbline guard: the upstream server could not be reached: {}",
                    plumbline_base::error_chain(&e)
                ),
            );
        }
    };
    let status = upstream.status();
    let mut response = Response::builder().status(status.as_u16());
    for (k, v) in upstream.headers() {
        if let (Ok(k), Ok(v)) = (
            HeaderName::from_bytes(k.as_str().as_bytes()),
            HeaderValue::from_bytes(v.as_bytes()),
        ) {
            if !hop_by_hop(&k) {
                response = response.header(k, v);
            }
        }
    }
    let sse = upstream
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| {
            c.trim_start()
                .to_ascii_lowercase()
                .starts_with("text/event-stream")
        });
    // A new session's id is the one the upstream gave.
    let stream_session = upstream
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map_or_else(|| session.clone(), str::to_owned);
    let mut filter = Filter {
        app: Arc::clone(app),
        session: stream_session,
        registered: session,
        expect,
        answered: false,
        get: method == Method::GET,
        handshake,
        asked,
        tool,
    };
    if !sse {
        // One message (or none): read whole, bounded, and judged.
        let max = app.opts.limits.max_message_bytes;
        let body = match read_bounded(upstream, max).await {
            Ok(b) => b,
            Err(e) => return filter.replaced(&e),
        };
        if body.trim_ascii().is_empty() {
            return response.body(Body::from(body)).unwrap_or_else(|_| {
                plain(StatusCode::BAD_GATEWAY, "an unusable upstream response")
            });
        }
        return match filter.message(&body) {
            Verdict::Relay => {
                filter.handshook(&body);
                response.body(Body::from(body)).unwrap_or_else(|_| {
                    plain(StatusCode::BAD_GATEWAY, "an unusable upstream response")
                })
            }
            Verdict::Replace(judged) => {
                filter.handshook(&body);
                // The length is the new body's.
                response.body(Body::from(judged)).unwrap_or_else(|_| {
                    plain(StatusCode::BAD_GATEWAY, "an unusable upstream response")
                })
            }
            // A plain error page (a 404 for an ended session) is no
            // message: it goes on for the client to see.
            Verdict::Unreadable(_) if !status.is_success() => {
                response.body(Body::from(body)).unwrap_or_else(|_| {
                    plain(StatusCode::BAD_GATEWAY, "an unusable upstream response")
                })
            }
            Verdict::Unreadable(why) | Verdict::Drop(why) => filter.replaced(&why),
        };
    }
    let max = app.opts.limits.max_message_bytes;
    let mut parser = SseParser::new(max);
    // A GET stream also carries the guard's own `list_changed`.
    let mut own = if method == Method::GET {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        let mut sessions = app.sessions.lock().expect("sessions");
        sessions
            .entry(filter.session.clone())
            .or_default()
            .streams
            .push(tx);
        Some(rx)
    } else {
        None
    };
    let mut upstream = Box::pin(upstream.bytes_stream());
    let mut ended = false;
    // The stream is read block by block and written back block by block:
    // what reaches the client is only what the guard read and admitted,
    // in a form every client's parser reads the same way. The guard's own
    // events go in between blocks.
    let stream = futures_util::stream::poll_fn(move |cx| {
        use std::task::Poll;
        if ended {
            return Poll::Ready(None);
        }
        if let Some(rx) = own.as_mut() {
            match rx.poll_recv(cx) {
                Poll::Ready(Some(())) => {
                    return Poll::Ready(Some(Ok(Bytes::from_static(OWN_LIST_CHANGED))))
                }
                Poll::Ready(None) => own = None,
                Poll::Pending => {}
            }
        }
        loop {
            return match futures_util::Stream::poll_next(upstream.as_mut(), cx) {
                Poll::Ready(Some(Ok(bytes))) => {
                    let blocks = match parser.push_blocks(&bytes) {
                        Ok(b) => b,
                        Err(max) => {
                            filter.app.dropped(
                                "server",
                                &format!("an event longer than {max} bytes; the stream is ended"),
                            );
                            ended = true;
                            return Poll::Ready(None);
                        }
                    };
                    let mut out = Vec::new();
                    for mut b in blocks {
                        if filter.block(&mut b) {
                            b.write(&mut out);
                        }
                    }
                    if out.is_empty() {
                        continue;
                    }
                    Poll::Ready(Some(Ok(Bytes::from(out))))
                }
                Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => {
                    ended = true;
                    Poll::Ready(None)
                }
                Poll::Pending => Poll::Pending,
            };
        }
    });
    response
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| plain(StatusCode::BAD_GATEWAY, "an unusable upstream response"))
}

/// A body read whole, at most `max` bytes.
async fn read_bounded(response: reqwest::Response, max: usize) -> Result<Vec<u8>, String> {
    let mut stream = response.bytes_stream();
    let mut body = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| format!("reading the answer: {e}"))?;
        if body.len() + chunk.len() > max {
            return Err(format!("an answer longer than {max} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// What one message of the server's gets.
enum Verdict {
    Relay,
    /// Relayed as these bytes (instructions or prompts withheld).
    Replace(Vec<u8>),
    /// Read, and not for the client (an answer to no request of its).
    Drop(String),
    /// Not readable as a message.
    Unreadable(String),
}

/// What the guard lets through of one upstream answer (a POST's body or
/// stream, or the GET stream).
struct Filter {
    app: Arc<App>,
    /// The session the stream belongs to (a new one's id for a handshake).
    session: String,
    /// The session the request's id was registered under.
    registered: String,
    expect: Option<Id>,
    answered: bool,
    get: bool,
    handshake: Option<Handshake>,
    /// The method of the request whose answer this stream carries.
    asked: Option<String>,
    /// The tool it calls, for a `tools/call`.
    tool: Option<String>,
}

impl Filter {
    /// Judges one message of the server's.
    fn message(&mut self, data: &[u8]) -> Verdict {
        if self.get {
            // A GET stream carries answers to many requests: each is
            // judged for what its own request asked (set below).
            self.handshake = None;
            self.asked = None;
            self.tool = None;
        }
        let msg = match Message::read(data) {
            Ok(m) => m,
            Err(r) => return Verdict::Unreadable(r.why()),
        };
        match msg.kind {
            Kind::Response => {
                let id = msg.id.clone().expect("a response has an id");
                // On the GET stream, the answer to a request the session
                // forwarded (a resumed stream); on a POST's, the answer to
                // its own request, once. Never an answer to a request the
                // guard answered itself.
                let ours = if self.get {
                    let orphan = self
                        .app
                        .sessions
                        .lock()
                        .expect("sessions")
                        .get_mut(&self.session)
                        .and_then(|s| s.orphaned.remove(&id));
                    match orphan {
                        Some(o) if take_forwarded(&self.app, &self.session, &id) => {
                            // Judged as the request's own stream would
                            // have judged it.
                            self.handshake = o.handshake;
                            self.asked = o.asked;
                            self.tool = o.tool;
                            true
                        }
                        _ => false,
                    }
                } else {
                    self.expect.as_ref() == Some(&id)
                        && !self.answered
                        && take_forwarded(&self.app, &self.registered, &id)
                };
                if ours {
                    if !self.get {
                        self.answered = true;
                    }
                    self.judge_whole(data)
                } else {
                    Verdict::Drop(format!(
                        "an answer to {id}, which is not a request the guard forwarded on this stream and the server has not answered"
                    ))
                }
            }
            Kind::Request => {
                let id = msg.id.clone().expect("a request has an id");
                let mut sessions = self.app.sessions.lock().expect("sessions");
                let s = sessions.entry(self.session.clone()).or_default();
                if s.server_asked.len() >= MAX_OUTSTANDING {
                    return Verdict::Drop(
                        "a request while too many of the server's wait for the client".to_owned(),
                    );
                }
                s.server_asked.insert(id);
                Verdict::Relay
            }
            Kind::Notification => {
                if msg.method.as_deref() == Some("notifications/tools/list_changed") {
                    let mut sessions = self.app.sessions.lock().expect("sessions");
                    let s = sessions.entry(self.session.clone()).or_default();
                    s.stale = true;
                    s.changes += 1;
                }
                Verdict::Relay
            }
        }
    }

    /// The answer to a handshake or a `prompts/list`, read whole: its
    /// instructions or prompts judged, and withheld ones taken out.
    fn judge_whole(&mut self, data: &[u8]) -> Verdict {
        if self.asked.as_deref() == Some("tools/call") {
            let Ok(msg) = Message::read(data) else {
                return Verdict::Relay;
            };
            let app = &self.app;
            return match crate::said::judge_result(
                &msg,
                self.tool.as_deref().unwrap_or_default(),
                &app.opts.server,
                &app.opts.policy,
                &app.opts.metrics,
                &|e| app.event(e),
            ) {
                Some(judged) => Verdict::Replace(judged),
                None => Verdict::Relay,
            };
        }
        let handshake = self.handshake.is_some();
        let prompts = self.asked.as_deref() == Some("prompts/list");
        if !handshake && !prompts {
            return Verdict::Relay;
        }
        let Ok(mut value) = serde_json::from_slice::<Value>(data) else {
            return Verdict::Drop(
                "an answer the guard reads whole that is not plain JSON".to_owned(),
            );
        };
        let app = &self.app;
        let base = app
            .baseline
            .lock()
            .expect("baseline")
            .load()
            .map_err(|e| format!("{e:#}"));
        let (classifier, policy) = (&app.opts.classifier, &app.opts.policy);
        let enforce = policy.mode == crate::Mode::Enforce;
        let say = |w: &crate::judge::Withheld| {
            eprintln!(
                "plumbline guard: {}: {} {}: {}",
                for_terminal(&app.opts.server, false),
                if enforce {
                    "withheld"
                } else {
                    "would withhold"
                },
                for_terminal(&w.name, false),
                for_terminal(&w.describe(), false)
            );
        };
        let mut rewritten = false;
        if handshake {
            if let Some(w) = crate::said::instructions(&mut value, &base, classifier, policy) {
                say(&w);
                rewritten = enforce;
            }
        } else if let Some(p) = crate::said::prompts(&mut value, &base, classifier, policy) {
            p.withheld.values().for_each(say);
            rewritten = enforce && !p.withheld.is_empty();
            let more = value
                .pointer("/result/nextCursor")
                .is_some_and(|c| c.as_str().is_some_and(|c| !c.is_empty()));
            let mut sessions = app.sessions.lock().expect("sessions");
            let s = sessions.entry(self.session.clone()).or_default();
            if !s.prompts_paging {
                s.prompts = crate::said::Prompts::default();
            }
            s.prompts_paging = more;
            s.prompts.allowed.extend(p.allowed);
            s.prompts.withheld.extend(p.withheld);
        }
        if rewritten {
            Verdict::Replace(value.to_string().into_bytes())
        } else {
            Verdict::Relay
        }
    }

    /// A handshake's reply relayed: what the server said of itself, and
    /// what the client declared, are the session's.
    fn handshook(&self, reply: &[u8]) {
        let Some(h) = &self.handshake else { return };
        let peer = crate::stdio::Peer::of(reply, h.meta.as_ref());
        if peer.protocol_version.is_some() {
            *self.app.peer.lock().expect("peer") = peer;
        }
        let mut sessions = self.app.sessions.lock().expect("sessions");
        sessions
            .entry(self.session.clone())
            .or_default()
            .client_caps = h.caps.clone();
    }

    /// Whether one block of an event stream goes on to the client.
    fn block(&mut self, b: &mut plumbline_mcp::wire::SseBlock) -> bool {
        let Some(data) = &b.data else {
            // An id, a retry, a keep-alive: nothing a client acts on.
            return true;
        };
        if b.event_type() != b"message" {
            self.app.dropped(
                "server",
                &format!(
                    "an event of type {:?}, which MCP does not send",
                    String::from_utf8_lossy(b.event_type())
                ),
            );
            return false;
        }
        if data.is_empty() {
            // A priming event: it carries an id, not a message.
            return true;
        }
        match self.message(data) {
            Verdict::Relay => {
                self.handshook(data);
                true
            }
            Verdict::Replace(bytes) => {
                self.handshook(data);
                b.data = Some(bytes);
                true
            }
            Verdict::Drop(why) | Verdict::Unreadable(why) => {
                self.app.dropped("server", &why);
                false
            }
        }
    }

    /// The answer the client gets instead of a body the guard would not
    /// relay: a JSON-RPC error for its request (HTTP 502).
    fn replaced(&self, why: &str) -> Response {
        self.app.dropped("server", why);
        let message = format!("plumbline guard: the server's answer was not relayed: {why}");
        match &self.expect {
            Some(id) => json_text(
                StatusCode::BAD_GATEWAY,
                error_reply(id.json(), REFUSED, &message, None),
            ),
            None => plain(StatusCode::BAD_GATEWAY, &message),
        }
    }
}

impl Drop for Filter {
    fn drop(&mut self) {
        let (Some(id), false) = (&self.expect, self.answered) else {
            return;
        };
        if self.registered.is_empty() {
            // Without a session (2026-07-28) an answer comes only on its
            // own POST's stream: once that ends, none will.
            take_forwarded(&self.app, &self.registered, id);
        } else if let Some(s) = self
            .app
            .sessions
            .lock()
            .expect("sessions")
            .get_mut(&self.registered)
        {
            // The answer may still come on the GET stream, resumed.
            s.orphaned.insert(
                id.clone(),
                Orphan {
                    handshake: self.handshake.take(),
                    asked: self.asked.take(),
                    tool: self.tool.take(),
                },
            );
        }
    }
}

/// Lists every page upstream in the client's session and judges it.
async fn judge_session(
    app: &Arc<App>,
    headers: &HeaderMap,
    session: &str,
    meta: Option<Value>,
) -> Result<Judged, String> {
    let deadline = Instant::now() + app.opts.limits.list_timeout;
    let started_at_ms = now_ms();
    let changes_before = app
        .sessions
        .lock()
        .expect("sessions")
        .get(session)
        .map_or(0, |s| s.changes);
    let stateless = meta.is_some();
    let protocol_version = headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| {
            meta.as_ref()
                .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_default();
    let listed = tokio::time::timeout_at(deadline, list_upstream(app, headers, meta.clone())).await;
    let tools = match listed {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => return Err(e),
        Err(_) => {
            return Err(format!(
                "listing the server's tools took more than {:?}",
                app.opts.limits.list_timeout
            ))
        }
    };
    let judged = {
        let mut baseline = app.baseline.lock().expect("baseline");
        match baseline.load() {
            Ok(base) => judge(
                &app.opts.classifier,
                base.as_ref(),
                &tools,
                &app.opts.policy,
            )
            .map_err(|e| format!("{e:#}")),
            Err(e) => Err(format!("reading the baseline: {e:#}")),
        }
    };
    let judged = match judged {
        Ok(j) => j,
        Err(e) => {
            eprintln!(
                "plumbline guard: {}: {}",
                for_terminal(&app.opts.server, false),
                for_terminal(&e, false)
            );
            ungraded(&tools, &e, app.opts.policy.on_error == OnError::Block)
        }
    };
    for w in judged.withheld.values() {
        eprintln!(
            "plumbline guard: {}: withheld {}: {}",
            for_terminal(&app.opts.server, false),
            for_terminal(&w.name, false),
            for_terminal(&w.describe(), false)
        );
    }
    app.opts.metrics.listed(judged.withheld.len());
    // Recorded only where the client declared what Plumbline declares:
    // else it is that client's view, not the server's listing.
    let declared = match &meta {
        Some(m) => m.get("io.modelcontextprotocol/clientCapabilities").cloned(),
        None => app
            .sessions
            .lock()
            .expect("sessions")
            .get(session)
            .and_then(|s| s.client_caps.clone()),
    };
    let same = crate::same_view(declared.as_ref());
    if !same {
        let mut sessions = app.sessions.lock().expect("sessions");
        let s = sessions.entry(session.to_owned()).or_default();
        if !std::mem::replace(&mut s.told_unrecorded, true) {
            eprintln!(
                "{}",
                crate::not_the_servers_view(&app.opts.server, declared.as_ref())
            );
        }
    }
    if let Some(r) = app
        .record
        .lock()
        .expect("recording")
        .as_ref()
        .filter(|_| same)
    {
        let peer = app.peer.lock().expect("peer").clone();
        let protocol_version = match (&peer.protocol_version, protocol_version.is_empty()) {
            (Some(v), true) => v.clone(),
            _ => protocol_version,
        };
        let seen = Seen::of(
            &app.opts.server,
            stateless,
            &peer,
            protocol_version,
            &tools,
            &judged,
            0,
            started_at_ms,
        );
        if !r.send(seen) {
            eprintln!(
                "plumbline guard: {}: the recorder is behind; this listing is not recorded",
                for_terminal(&app.opts.server, false)
            );
        }
    }
    let mut sessions = app.sessions.lock().expect("sessions");
    let s = sessions.entry(session.to_owned()).or_default();
    s.tools = Some(tools);
    s.judged = Some(judged.clone());
    s.at = Some(Instant::now());
    // A change announced while the pages were read leaves the listing
    // stale: the next call or listing reads it again.
    s.stale = s.changes != changes_before;
    Ok(judged)
}

async fn list_upstream(
    app: &Arc<App>,
    headers: &HeaderMap,
    meta: Option<Value>,
) -> Result<Vec<RawTool>, String> {
    let limits = &app.opts.limits;
    let mut tools: Vec<RawTool> = Vec::new();
    let mut cursors = std::collections::HashSet::new();
    let mut cursor: Option<String> = None;
    for page in 1.. {
        if page > limits.max_pages {
            return Err(format!(
                "the server's listing goes on past {} pages",
                limits.max_pages
            ));
        }
        let n = app.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = format!("plumbline-guard/{n}");
        let mut params = json!({});
        if let Some(c) = &cursor {
            params["cursor"] = json!(c);
        }
        if let Some(m) = &meta {
            params["_meta"] = m.clone();
        }
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params});
        let mut h = upstream_headers(app, headers);
        h.insert(
            reqwest::header::CONTENT_TYPE,
            reqwest::header::HeaderValue::from_static("application/json"),
        );
        h.insert(
            reqwest::header::ACCEPT,
            reqwest::header::HeaderValue::from_static("application/json, text/event-stream"),
        );
        if meta.is_some() {
            h.insert(
                "mcp-method",
                reqwest::header::HeaderValue::from_static("tools/list"),
            );
        }
        let response = send_upstream(
            app,
            reqwest::Method::POST,
            h,
            Bytes::from(request.to_string()),
        )
        .await
        .map_err(|e| format!("listing upstream: {}", plumbline_base::error_chain(&e)))?;
        if !response.status().is_success() {
            return Err(format!(
                "the server answered tools/list with HTTP {}",
                response.status()
            ));
        }
        let sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|c| c.starts_with("text/event-stream"));
        let reply = read_reply(response, sse, &id, limits.max_message_bytes).await?;
        #[derive(serde::Deserialize)]
        struct Page<'a> {
            #[serde(borrow)]
            result: Option<PageResult<'a>>,
            error: Option<Value>,
        }
        #[derive(serde::Deserialize)]
        struct PageResult<'a> {
            #[serde(borrow)]
            tools: Vec<&'a RawValue>,
            #[serde(rename = "nextCursor")]
            next_cursor: Option<String>,
        }
        let page: Page<'_> = serde_json::from_slice(&reply)
            .map_err(|e| format!("a tools/list page is not a list of tools: {e}"))?;
        if let Some(e) = page.error {
            return Err(format!("the server answered tools/list with an error: {e}"));
        }
        let result = page.result.ok_or("a tools/list reply without a result")?;
        for t in result.tools {
            let raw = t.get().as_bytes().to_vec();
            tools.push((plumbline_taxonomy::json::tool_name(&raw), raw));
        }
        if tools.len() > limits.max_tools {
            return Err(format!(
                "the server listed more than {} tools",
                limits.max_tools
            ));
        }
        match result.next_cursor.filter(|c| !c.is_empty()) {
            Some(c) => {
                if !cursors.insert(c.clone()) {
                    return Err(format!("the server repeated the cursor {c:?}"));
                }
                cursor = Some(c);
            }
            None => break,
        }
    }
    Ok(tools)
}

/// The reply with `id` in a JSON answer or an SSE stream, bounded.
async fn read_reply(
    response: reqwest::Response,
    sse: bool,
    id: &str,
    max: usize,
) -> Result<Vec<u8>, String> {
    let mut stream = response.bytes_stream();
    let mut body = Vec::new();
    let mut parser = SseParser::new(max);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| format!("reading the answer: {e}"))?;
        if !sse {
            if body.len() + chunk.len() > max {
                return Err(format!("a message longer than {max} bytes"));
            }
            body.extend_from_slice(&chunk);
            continue;
        }
        let events = parser
            .push(&chunk)
            .map_err(|max| format!("an event longer than {max} bytes"))?;
        for e in events {
            let Ok(v) = serde_json::from_slice::<Value>(&e.data) else {
                continue;
            };
            if v.get("id") == Some(&json!(id)) {
                return Ok(e.data);
            }
        }
    }
    if sse {
        return Err("the event stream ended without the tools/list reply".to_owned());
    }
    Ok(body)
}

/// The judged set of a session, fetched again when stale or old.
async fn fresh_judgment(
    app: &Arc<App>,
    headers: &HeaderMap,
    session: &str,
    meta: Option<Value>,
) -> Result<Judged, String> {
    let cached = {
        let sessions = app.sessions.lock().expect("sessions");
        sessions.get(session).and_then(|s| {
            let fresh = !s.stale
                && s.at
                    .is_some_and(|at| at.elapsed() <= app.opts.policy.max_age);
            fresh.then(|| s.judged.clone()).flatten()
        })
    };
    match cached {
        Some(j) => Ok(j),
        None => judge_session(app, headers, session, meta).await,
    }
}

async fn list_for_client(
    app: &Arc<App>,
    headers: &HeaderMap,
    session: &str,
    msg: &Message<'_>,
    id: &Id,
    meta: Option<Value>,
) -> Option<Response> {
    if msg.has_param("cursor") {
        return Some(json_text(
            StatusCode::OK,
            error_reply(
                id.json(),
                INVALID_PARAMS,
                "invalid cursor: plumbline guard answers tools/list in one page and issued no cursor",
                None,
            ),
        ));
    }
    match judge_session(app, headers, session, meta.clone()).await {
        Ok(judged) => {
            let mut result = String::from("{\"tools\":[");
            for (i, t) in judged.offered.iter().enumerate() {
                if i > 0 {
                    result.push(',');
                }
                result.push_str(std::str::from_utf8(t).unwrap_or("null"));
            }
            result.push(']');
            if meta.is_some() {
                result.push_str(
                    ",\"resultType\":\"complete\",\"ttlMs\":0,\"cacheScope\":\"private\"",
                );
            }
            result.push('}');
            let body = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{result}}}");
            Some(json_text(StatusCode::OK, body))
        }
        Err(e) if app.opts.policy.on_error == OnError::Pass => {
            // The client's own request goes upstream, unjudged, as asked.
            eprintln!(
                "plumbline guard: {}: {}; the listing passes unjudged (--on-error pass)",
                for_terminal(&app.opts.server, false),
                for_terminal(&e, false)
            );
            None
        }
        Err(e) => {
            eprintln!(
                "plumbline guard: {}: {}; every tool is withheld (--on-error block)",
                for_terminal(&app.opts.server, false),
                for_terminal(&e, false)
            );
            let message = format!(
                "plumbline guard could not judge the tools of {}: {e}",
                app.opts.server
            );
            Some(json_text(
                StatusCode::OK,
                error_reply(id.json(), REFUSED, &message, None),
            ))
        }
    }
}

/// `None` when the call may go upstream; else the answer refusing it.
async fn check_call(
    app: &Arc<App>,
    headers: &HeaderMap,
    session: &str,
    name: &str,
    id: &Id,
    meta: Option<Value>,
) -> Option<Response> {
    let refuse = |message: String, data: Value, review: Option<String>| {
        app.opts.metrics.refused();
        eprintln!(
            "plumbline guard: {}: refused a call to {}{}",
            for_terminal(&app.opts.server, false),
            for_terminal(name, false),
            review
                .map(|r| format!("; {}", for_terminal(&r, false)))
                .unwrap_or_default()
        );
        Some(json_text(
            StatusCode::OK,
            error_reply(id.json(), REFUSED, &message, Some(data)),
        ))
    };
    let judged = match fresh_judgment(app, headers, session, meta).await {
        Ok(j) => j,
        Err(e) if app.opts.policy.on_error == OnError::Pass => {
            eprintln!("plumbline guard: {e}; the call passes unjudged (--on-error pass)");
            return None;
        }
        Err(e) => {
            return refuse(
                format!(
                    "plumbline guard refused the call to {name:?}: the tools of {} could not be judged: {e}",
                    app.opts.server
                ),
                json!({"tool": name, "why": {"kind": "not_graded"}}),
                None,
            )
        }
    };
    if judged.allowed.contains(name) {
        return None;
    }
    let withheld = judged.withheld.get(name);
    // How to release it goes to the guard's log, never to the model.
    let review = withheld.map(|w| {
        app.baseline
            .lock()
            .expect("baseline")
            .how_to_review(name, w.severity)
    });
    let (message, data) = refusal(&app.opts.server, name, withheld);
    refuse(message, data, review)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app_at(port: u16) -> App {
        App {
            opts: Options {
                server: "s".into(),
                upstream: "http://127.0.0.1:1/mcp".into(),
                upstream_headers: Vec::new(),
                upstream_auth: None,
                unauthorized_hint: None,
                policy: Policy::default(),
                classifier: Classifier::for_taxonomy(plumbline_taxonomy::Taxonomy::V1),
                limits: Limits::default(),
                secrets: None,
                metrics: Default::default(),
                listen_token: None,
            },
            local: SocketAddr::from(([127, 0, 0, 1], port)),
            client: plumbline_mcp::wire::http_client(&Limits::default()).unwrap(),
            baseline: Mutex::new(Box::new(crate::LockBaseline::new("x".into(), "s".into()))),
            sessions: Mutex::new(HashMap::new()),
            next: Default::default(),
            loaded: Mutex::new(None),
            record: Mutex::new(None),
            peer: Mutex::new(Default::default()),
            told_unauthorized: Default::default(),
            drops: Default::default(),
        }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn only_the_guards_own_loopback_authority_is_served() {
        let app = app_at(8078);
        for ok in [
            "127.0.0.1:8078",
            "localhost:8078",
            "LOCALHOST:8078",
            "[::1]:8078",
        ] {
            assert!(same_host(&app, &headers(&[("host", ok)])), "{ok}");
        }
        for bad in [
            "evil.example:8078",
            "127.0.0.1:8079",
            "127.0.0.1",
            "attacker.127.0.0.1.nip.io:8078",
        ] {
            assert!(!same_host(&app, &headers(&[("host", bad)])), "{bad}");
        }
        assert!(!same_host(&app, &HeaderMap::new()), "no Host at all");
        let host = ("host", "127.0.0.1:8078");
        assert!(same_host(
            &app,
            &headers(&[host, ("origin", "http://localhost:8078")])
        ));
        for bad in [
            "http://evil.example",
            "https://127.0.0.1:8078",
            "null",
            "http://127.0.0.1:8079",
        ] {
            assert!(
                !same_host(&app, &headers(&[host, ("origin", bad)])),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_listen_token_is_checked_whole() {
        let token = "s3cret-token";
        assert!(authorized(
            &headers(&[("authorization", "Bearer s3cret-token")]),
            token
        ));
        assert!(authorized(
            &headers(&[("authorization", "bearer  s3cret-token ")]),
            token
        ));
        for bad in [
            "Bearer s3cret-toke",
            "Bearer s3cret-token2",
            "Basic s3cret-token",
            "s3cret-token",
            "Bearer",
            "",
        ] {
            assert!(
                !authorized(&headers(&[("authorization", bad)]), token),
                "{bad:?}"
            );
        }
        assert!(!authorized(&HeaderMap::new(), token));
    }

    #[test]
    fn credentials_and_connection_headers_never_go_upstream() {
        let app = app_at(8078);
        let h = headers(&[
            ("authorization", "Bearer client-token"),
            ("cookie", "s=1"),
            ("host", "127.0.0.1:8078"),
            ("mcp-session-id", "abc"),
            ("mcp-protocol-version", "2025-11-25"),
            ("last-event-id", "7"),
        ]);
        let up = upstream_headers(&app, &h);
        assert!(up.get("authorization").is_none() && up.get("cookie").is_none());
        assert!(up.get("host").is_none());
        assert_eq!(up.get("mcp-session-id").unwrap(), "abc");
        assert_eq!(up.get("last-event-id").unwrap(), "7");
        // The configuration's credentials are the ones sent.
        let mut app = app;
        app.opts.upstream_headers = vec![("Authorization".into(), "Bearer configured".into())];
        let up = upstream_headers(&app, &h);
        assert_eq!(up.get("authorization").unwrap(), "Bearer configured");
    }
}
