//! The MCP exchange that lists tools, independent of the transport:
//! era detection, the handshake, and the paginated `tools/list` walk.

use std::collections::{BTreeMap, HashSet};

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::error::{ListError, ListErrorKind};
use crate::limits::Limits;
use crate::listing::{Era, ListedTool, Listing, ListingProblem};

/// The newest session-era version we speak.
pub(crate) const SESSION_VERSION: &str = "2025-11-25";
/// The stateless era's version.
pub(crate) const STATELESS_VERSION: &str = "2026-07-28";

/// A deadline that never comes: waiting for a notification has no end
/// other than the notification, the connection closing, or the caller
/// giving up.
const FOREVER: std::time::Duration = std::time::Duration::from_secs(100 * 365 * 86_400);

/// A JSON-RPC error object.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct RpcError {
    pub code: i64,
    #[serde(default)]
    pub message: String,
    /// What the server added: for -32022 (unsupported protocol version),
    /// the versions it supports (`{"supported": [...]}`).
    #[serde(default)]
    pub data: Option<Value>,
}

impl RpcError {
    pub(crate) fn new(code: i64, message: String) -> RpcError {
        RpcError {
            code,
            message,
            data: None,
        }
    }

    /// Whether this refuses the protocol version asked for while naming
    /// ours among those the server supports (2026-07-28's negotiation: a
    /// client then asks again with a version the server offers).
    pub(crate) fn offers_stateless(&self) -> bool {
        self.code == -32022
            && self
                .data
                .as_ref()
                .and_then(|d| d.get("supported"))
                .and_then(Value::as_array)
                .is_some_and(|v| v.iter().any(|v| v == STATELESS_VERSION))
    }
}

/// The answer to one request: its raw `result`, or its `error`.
pub(crate) type Reply = Result<Box<RawValue>, RpcError>;

/// One message from the server, as far as a listing cares.
pub(crate) enum Inbound {
    /// An answer to request `id`.
    Response {
        id: Value,
        reply: Reply,
    },
    /// A request from the server, which must be answered.
    Request {
        id: Value,
        method: String,
    },
    Notification {
        method: String,
    },
}

#[derive(Deserialize)]
struct Incoming<'a> {
    #[serde(default)]
    id: Option<Value>,
    method: Option<String>,
    #[serde(borrow)]
    result: Option<&'a RawValue>,
    error: Option<RpcError>,
}

/// Reads one JSON-RPC message.
pub(crate) fn parse_inbound(bytes: &[u8], method: &'static str) -> Result<Inbound, ListError> {
    let msg: Incoming<'_> =
        serde_json::from_slice(bytes).map_err(|e| ListErrorKind::NotJsonRpc {
            method,
            error: e.to_string(),
            excerpt: crate::error::excerpt(bytes, 120),
        })?;
    Ok(match (msg.id, msg.method) {
        (Some(id), Some(method)) => Inbound::Request { id, method },
        (None, Some(method)) => Inbound::Notification { method },
        (Some(id), None) => {
            let reply = match (msg.result, msg.error) {
                (_, Some(err)) => Err(err),
                (Some(result), None) => Ok(result.to_owned()),
                (None, None) => {
                    return Err(ListErrorKind::Protocol {
                        method,
                        message: "a response with neither result nor error".to_owned(),
                    }
                    .into())
                }
            };
            Inbound::Response { id, reply }
        }
        (None, None) => {
            return Err(ListErrorKind::NotJsonRpc {
                method,
                error: "neither a method nor an id".to_owned(),
                excerpt: crate::error::excerpt(bytes, 120),
            }
            .into())
        }
    })
}

/// Our answer to a request from the server. We declared roots, sampling
/// and elicitation so servers show every tool, but we only list: roots are
/// empty and everything else is declined.
pub(crate) fn answer_to(id: Value, method: &str) -> Value {
    match method {
        "ping" => json!({"jsonrpc": "2.0", "id": id, "result": {}}),
        "roots/list" => json!({"jsonrpc": "2.0", "id": id, "result": {"roots": []}}),
        _ => {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "not supported by a monitor"}})
        }
    }
}

/// A connection that can carry requests and notifications.
pub(crate) trait Transport {
    /// Sends `method` and waits, until `deadline`, for the answer. Requests
    /// and notifications the server sends meanwhile are handled inside.
    async fn request(
        &mut self,
        method: &'static str,
        params: Value,
        deadline: Instant,
    ) -> Result<Reply, ListError>;
    async fn notify(&mut self, method: &'static str, params: Value) -> Result<(), ListError>;
    /// Whether `notifications/tools/list_changed` arrived since the last call.
    fn take_list_changed(&mut self) -> bool;
    /// The handshake settled on `era` and `version` (HTTP sends it as a
    /// header on every later request).
    fn negotiated(&mut self, era: Era, version: &str);
    /// Called after the handshake, before the first `tools/list`: a
    /// transport with a separate notification channel opens it here, so a
    /// `list_changed` sent from now on is not lost.
    async fn ready_to_list(&mut self, era: Era, deadline: Instant) -> Result<(), ListError>;
    /// Whether the server could be of the stateless era (legacy HTTP+SSE
    /// cannot), so the `server/discover` probe is worth sending.
    fn may_be_stateless(&self) -> bool {
        true
    }
    /// Whether a `list_changed` can reach us between requests.
    fn hears_notifications(&self) -> bool;
    /// The answer to an earlier `method` request that timed out, if the
    /// server sent it since (a stream transport keeps it; an HTTP request
    /// that timed out is gone).
    fn take_late_answer(&mut self, _method: &'static str) -> Option<Reply> {
        None
    }
    /// Output the transport skipped since the last call (lines that were
    /// not JSON-RPC), as excerpts for the listing's problems.
    fn take_skipped(&mut self) -> Vec<String> {
        Vec::new()
    }
    /// Waits for `notifications/tools/list_changed`, answering the server's
    /// requests meanwhile. Returns at once if one arrived since the last
    /// [`Transport::take_list_changed`]; an error when the connection (or
    /// the notification stream) ends. Cancel-safe: a caller may drop it at
    /// any await and call it, or `request`, again.
    async fn wait_list_changed(&mut self) -> Result<(), ListError>;
}

/// What a server has announced on a connection, and the answers it gave
/// late.
#[derive(Debug, Default)]
pub(crate) struct Announced {
    /// `notifications/tools/list_changed`, since it was last taken.
    pub list_changed: bool,
    /// `notifications/subscriptions/acknowledged` (2026-07-28).
    pub subscribed: bool,
    /// The last request that timed out: its answer may still come.
    abandoned: Option<(u64, &'static str)>,
    /// That answer, when it came, with its method.
    late: Option<(&'static str, Reply)>,
}

impl Announced {
    pub fn note(&mut self, method: &str) {
        match method {
            "notifications/tools/list_changed" => self.list_changed = true,
            "notifications/subscriptions/acknowledged" => self.subscribed = true,
            _ => {}
        }
    }

    /// Request `id` timed out; an answer to it is kept if it comes.
    fn abandon(&mut self, id: u64, method: &'static str) {
        self.abandoned = Some((id, method));
    }

    /// An answer that is not to the request being waited for: kept when it
    /// answers the abandoned request, else dropped.
    fn answered_late(&mut self, id: &Value, reply: Reply) {
        if let Some((a, method)) = self.abandoned {
            if id.as_u64() == Some(a) {
                self.abandoned = None;
                self.late = Some((method, reply));
            }
        }
    }

    /// The late answer to the abandoned `method` request, if it came.
    pub fn take_late(&mut self, method: &str) -> Option<Reply> {
        match self.late.take() {
            Some((m, reply)) if m == method => Some(reply),
            other => {
                self.late = other;
                None
            }
        }
    }
}

/// A connection whose answers, server requests and notifications arrive
/// in order on one stream (stdio, legacy HTTP+SSE); [`pump`],
/// [`request_on`] and [`wait_on`] make a [`Transport`] of it.
pub(crate) trait Stream {
    async fn send(&mut self, message: &Value, stage: &'static str) -> Result<(), ListError>;
    /// The next message, or `None` for one that carries nothing (a blank
    /// line, an event that is not a message), by `deadline`. Cancel-safe.
    async fn receive(
        &mut self,
        stage: &'static str,
        started: Instant,
        deadline: Instant,
    ) -> Result<Option<Inbound>, ListError>;
    fn announced(&mut self) -> &mut Announced;
}

/// Reads and handles one message: a response is returned, a request from
/// the server answered, a notification noted. Cancel-safe up to the
/// answer to a server request.
pub(crate) async fn pump<S: Stream>(
    s: &mut S,
    stage: &'static str,
    started: Instant,
    deadline: Instant,
) -> Result<Option<(Value, Reply)>, ListError> {
    match s.receive(stage, started, deadline).await? {
        None => Ok(None),
        Some(Inbound::Request { id, method }) => {
            s.send(&answer_to(id, &method), stage).await?;
            Ok(None)
        }
        Some(Inbound::Notification { method }) => {
            s.announced().note(&method);
            Ok(None)
        }
        Some(Inbound::Response { id, reply }) => Ok(Some((id, reply))),
    }
}

/// Sends request `id` and waits, until `deadline`, for its answer.
pub(crate) async fn request_on<S: Stream>(
    s: &mut S,
    id: u64,
    method: &'static str,
    params: Value,
    deadline: Instant,
) -> Result<Reply, ListError> {
    let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    s.send(&message, method).await?;
    let started = Instant::now();
    loop {
        match pump(s, method, started, deadline).await {
            Ok(Some((rid, reply))) if rid == json!(id) => return Ok(reply),
            // An answer to an earlier request (a late reply to a probe
            // that timed out): kept for whoever gave up on it.
            Ok(Some((rid, reply))) => s.announced().answered_late(&rid, reply),
            Ok(None) => {}
            Err(e) => {
                if matches!(e.kind, ListErrorKind::Timeout { .. }) {
                    s.announced().abandon(id, method);
                }
                return Err(e);
            }
        }
    }
}

/// [`Transport::wait_list_changed`] on a stream.
pub(crate) async fn wait_on<S: Stream>(s: &mut S) -> Result<(), ListError> {
    let started = Instant::now();
    let never = started + FOREVER;
    while !std::mem::take(&mut s.announced().list_changed) {
        pump(s, "waiting for list_changed", started, never).await?;
    }
    Ok(())
}

/// The capabilities we declare. Servers may list some tools only to
/// clients that can take roots, sampling or elicitation requests, and a
/// monitor must see what a full-featured client is shown. We never start
/// such a request's work: roots are answered with an empty list, anything
/// else with an error (see the transports).
pub fn client_capabilities() -> Value {
    json!({"roots": {"listChanged": false}, "sampling": {}, "elicitation": {}})
}

fn client_info() -> Value {
    json!({"name": "plumbline", "version": env!("CARGO_PKG_VERSION")})
}

pub(crate) fn stateless_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": STATELESS_VERSION,
        "io.modelcontextprotocol/clientCapabilities": client_capabilities(),
        "io.modelcontextprotocol/clientInfo": client_info(),
    })
}

#[derive(Deserialize)]
struct InitializeResult {
    #[serde(rename = "protocolVersion")]
    protocol_version: String,
    capabilities: Option<Box<RawValue>>,
    #[serde(rename = "serverInfo")]
    server_info: Option<Box<RawValue>>,
    instructions: Option<String>,
}

#[derive(Deserialize)]
struct DiscoverResult {
    #[serde(rename = "supportedVersions", default)]
    supported_versions: Vec<String>,
    capabilities: Option<Box<RawValue>>,
    instructions: Option<String>,
    #[serde(rename = "_meta")]
    meta: Option<DiscoverMeta>,
}

#[derive(Deserialize)]
struct DiscoverMeta {
    #[serde(rename = "io.modelcontextprotocol/serverInfo")]
    server_info: Option<Box<RawValue>>,
}

#[derive(Deserialize)]
struct ListResult {
    tools: Vec<Box<RawValue>>,
    #[serde(rename = "nextCursor")]
    next_cursor: Option<String>,
}

#[derive(Deserialize)]
struct PromptsResult {
    prompts: Vec<Box<RawValue>>,
    #[serde(rename = "nextCursor")]
    next_cursor: Option<String>,
}

fn parse<T: for<'de> Deserialize<'de>>(
    method: &'static str,
    raw: &RawValue,
) -> Result<T, ListError> {
    serde_json::from_str(raw.get()).map_err(|e| {
        ListErrorKind::Protocol {
            method,
            message: format!("unexpected result: {e}"),
        }
        .into()
    })
}

fn answered(method: &'static str, reply: Reply) -> Result<Box<RawValue>, ListError> {
    reply.map_err(|e| {
        ListErrorKind::Server {
            method,
            code: e.code,
            message: plumbline_base::sanitize::for_terminal(&e.message, false),
        }
        .into()
    })
}

pub(crate) struct Handshake {
    era: Era,
    protocol_version: String,
    server_info: Option<Vec<u8>>,
    capabilities: Option<Vec<u8>>,
    instructions: Option<String>,
}

fn bytes(raw: Option<Box<RawValue>>) -> Option<Vec<u8>> {
    raw.map(|r| r.get().as_bytes().to_vec())
}

/// Probes for the stateless era, then falls back to `initialize`.
///
/// A probe that is refused means the server does not speak 2026-07-28; a
/// probe that merely went unanswered within `discover_timeout` (a server
/// still starting) decides nothing. Then `initialize` is sent, and if the
/// server meanwhile answered the probe with our era, or refuses
/// `initialize` because it serves 2026-07-28, the stateless era is used:
/// the late answer if it came, else `server/discover` asked again.
///
/// Until the server first answers anything, every wait is also bounded by
/// `connect_timeout` from the start of the handshake: a server that never
/// answers fails then, not after the probe's and `initialize`'s timeouts
/// added up.
async fn handshake<T: Transport>(t: &mut T, limits: &Limits) -> Result<Handshake, ListError> {
    let first_answer_by = Instant::now() + limits.connect_timeout;
    let until_first_answer = |own: std::time::Duration| (Instant::now() + own).min(first_answer_by);
    let probe = if t.may_be_stateless() {
        match discover(t, until_first_answer(limits.discover_timeout)).await {
            // Refused for its version though ours is supported (a server
            // may refuse a first request whatever it carries): once more.
            Ok(Err(refusal)) if refusal.offers_stateless() => {
                discover(t, until_first_answer(limits.discover_timeout)).await
            }
            other => other,
        }
    } else {
        Ok(Err(RpcError::new(-32601, "not probed".to_owned())))
    };
    let mut unanswered = false;
    // Whether the server answered the probe at all (even to refuse it).
    let heard = probe.is_ok();
    match probe {
        Ok(Ok(raw)) => {
            if let Some(h) = stateless(t, &raw)? {
                return Ok(h);
            }
            // A discover answer without our version: use the session era.
        }
        // A legacy server answers an error: fall back.
        Ok(Err(_)) => {}
        // No answer yet: maybe slow, maybe legacy and silent.
        Err(e) if matches!(e.kind, ListErrorKind::Timeout { .. }) => unanswered = true,
        Err(e) => return Err(e),
    }
    let reply = t
        .request(
            "initialize",
            json!({
                "protocolVersion": SESSION_VERSION,
                "capabilities": client_capabilities(),
                "clientInfo": client_info(),
            }),
            if heard {
                Instant::now() + limits.initialize_timeout
            } else {
                until_first_answer(limits.initialize_timeout)
            },
        )
        .await;
    let reply = match reply {
        Err(e)
            if !heard
                && matches!(e.kind, ListErrorKind::Timeout { .. })
                && Instant::now() >= first_answer_by =>
        {
            Err(ListErrorKind::Timeout {
                stage: "connect (no answer to initialize)",
                after: limits.connect_timeout,
            }
            .into())
        }
        other => other,
    };
    if unanswered && !matches!(reply, Ok(Ok(_))) {
        if let Some(h) = stateless_after_all(t, &reply, limits).await? {
            return Ok(h);
        }
    }
    let raw = answered("initialize", reply?)?;
    let init: InitializeResult = parse("initialize", &raw)?;
    t.negotiated(Era::Session, &init.protocol_version);
    t.notify("notifications/initialized", json!({})).await?;
    Ok(Handshake {
        era: Era::Session,
        protocol_version: init.protocol_version,
        server_info: bytes(init.server_info),
        capabilities: bytes(init.capabilities),
        instructions: init.instructions,
    })
}

async fn discover<T: Transport>(t: &mut T, deadline: Instant) -> Result<Reply, ListError> {
    t.request(
        "server/discover",
        json!({"_meta": stateless_meta()}),
        deadline,
    )
    .await
}

/// After a probe that went unanswered and an `initialize` that did not
/// succeed: the stateless era from the probe's late answer, or, when
/// `initialize` was refused for serving 2026-07-28, from a second probe.
/// A late refusal of the probe means the server does not speak that era,
/// and whatever goes wrong with the second probe, the refusal of
/// `initialize` is what is reported.
async fn stateless_after_all<T: Transport>(
    t: &mut T,
    initialize: &Result<Reply, ListError>,
    limits: &Limits,
) -> Result<Option<Handshake>, ListError> {
    match t.take_late_answer("server/discover") {
        Some(Ok(raw)) => return stateless(t, &raw),
        Some(Err(_)) => return Ok(None),
        None => {}
    }
    let Ok(Err(refusal)) = initialize else {
        return Ok(None);
    };
    if !serves_stateless(refusal) {
        return Ok(None);
    }
    match discover(t, Instant::now() + limits.initialize_timeout).await {
        Ok(Ok(raw)) => Ok(stateless(t, &raw).ok().flatten()),
        _ => Ok(None),
    }
}

/// The stateless handshake, if a `server/discover` answer offers our
/// version.
fn stateless<T: Transport>(t: &mut T, raw: &RawValue) -> Result<Option<Handshake>, ListError> {
    let d: DiscoverResult = parse("server/discover", raw)?;
    if !d.supported_versions.iter().any(|v| v == STATELESS_VERSION) {
        return Ok(None);
    }
    t.negotiated(Era::Stateless, STATELESS_VERSION);
    Ok(Some(Handshake {
        era: Era::Stateless,
        protocol_version: STATELESS_VERSION.to_owned(),
        server_info: d.meta.and_then(|m| bytes(m.server_info)),
        capabilities: bytes(d.capabilities),
        instructions: d.instructions,
    }))
}

/// Whether refusing `initialize` said the connection serves 2026-07-28:
/// -32022 (unsupported protocol version) or the era named.
fn serves_stateless(refusal: &RpcError) -> bool {
    refusal.code == -32022 || refusal.message.contains(STATELESS_VERSION)
}

/// Follows `nextCursor` until the last page, within the limits.
async fn walk_pages<T: Transport>(
    t: &mut T,
    era: Era,
    limits: &Limits,
    deadline: Instant,
) -> Result<(Vec<Box<RawValue>>, usize), ListError> {
    walk("tools/list", t, era, limits, deadline).await
}

/// Every page of `method` (`tools/list` or `prompts/list`), bounded.
async fn walk<T: Transport>(
    method: &'static str,
    t: &mut T,
    era: Era,
    limits: &Limits,
    deadline: Instant,
) -> Result<(Vec<Box<RawValue>>, usize), ListError> {
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    let mut seen: HashSet<String> = HashSet::new();
    let mut pages = 0usize;
    loop {
        if pages == limits.max_pages {
            return Err(ListErrorKind::TooManyPages {
                limit: limits.max_pages,
            }
            .into());
        }
        let mut params = serde_json::Map::new();
        if let Some(c) = &cursor {
            params.insert("cursor".into(), Value::String(c.clone()));
        }
        if era == Era::Stateless {
            params.insert("_meta".into(), stateless_meta());
        }
        let reply = t.request(method, Value::Object(params), deadline).await?;
        let raw = answered(method, reply)?;
        let page: ListResult = if method == "prompts/list" {
            let p: PromptsResult = parse(method, &raw)?;
            ListResult {
                tools: p.prompts,
                next_cursor: p.next_cursor,
            }
        } else {
            parse(method, &raw)?
        };
        pages += 1;
        if tools.len() + page.tools.len() > limits.max_tools {
            return Err(ListErrorKind::TooManyTools {
                limit: limits.max_tools,
            }
            .into());
        }
        tools.extend(page.tools);
        match page.next_cursor {
            None => return Ok((tools, pages)),
            Some(next) => {
                if !seen.insert(next.clone()) {
                    return Err(ListErrorKind::CursorRepeated {
                        cursor: crate::error::excerpt(next.as_bytes(), 80),
                        page: pages,
                    }
                    .into());
                }
                cursor = Some(next);
            }
        }
    }
}

/// Checks each element and finds duplicate names. Every element is kept;
/// problems are reported beside them.
fn inspect(raw_tools: Vec<Box<RawValue>>) -> (Vec<ListedTool>, Vec<ListingProblem>) {
    let mut tools = Vec::with_capacity(raw_tools.len());
    let mut problems = Vec::new();
    let mut by_name: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (position, raw) in raw_tools.into_iter().enumerate() {
        let bytes = raw.get().as_bytes().to_vec();
        let name = match plumbline_base::json::parse_tool(&bytes) {
            Ok(tool) => match tool.get("name").and_then(|n| n.as_str()) {
                Some(n) => Some(n.to_owned()),
                None => {
                    problems.push(ListingProblem::MalformedTool {
                        position,
                        error: "no string \"name\"".to_owned(),
                    });
                    None
                }
            },
            Err(e) => {
                problems.push(ListingProblem::MalformedTool {
                    position,
                    error: e.kind.to_string(),
                });
                // Named where a name can be found, so that the tool is
                // reported (and fails closed) by name, not dropped.
                plumbline_base::json::tool_name(&bytes)
            }
        };
        if let Some(n) = &name {
            by_name.entry(n.clone()).or_default().push(position);
        }
        tools.push(ListedTool { raw: bytes, name });
    }
    for (name, positions) in by_name {
        if positions.len() > 1 {
            problems.push(ListingProblem::DuplicateName { name, positions });
        }
    }
    (tools, problems)
}

/// The whole exchange: handshake, then the listing.
pub(crate) async fn list<T: Transport>(t: &mut T, limits: &Limits) -> Result<Listing, ListError> {
    let hs = connect(t, limits).await?;
    relist(t, &hs, limits).await
}

/// The handshake, and whatever the transport opens to hear notifications.
pub(crate) async fn connect<T: Transport>(
    t: &mut T,
    limits: &Limits,
) -> Result<Handshake, ListError> {
    let hs = handshake(t, limits).await?;
    t.ready_to_list(hs.era, Instant::now() + limits.connect_timeout)
        .await?;
    Ok(hs)
}

/// Calls tool `name` with `arguments`; the result as the server sent it.
pub(crate) async fn call_tool<T: Transport>(
    t: &mut T,
    hs: &Handshake,
    name: &str,
    arguments: Value,
    limits: &Limits,
) -> Result<Box<RawValue>, ListError> {
    let mut params = json!({"name": name, "arguments": arguments});
    if hs.era == Era::Stateless {
        params["_meta"] = stateless_meta();
    }
    let deadline = Instant::now() + limits.list_timeout;
    answered(
        "tools/call",
        t.request("tools/call", params, deadline).await?,
    )
}

impl Handshake {
    /// Whether the server declared the `prompts` capability.
    pub(crate) fn offers_prompts(&self) -> bool {
        self.capabilities
            .as_deref()
            .and_then(|c| serde_json::from_slice::<serde_json::Map<String, Value>>(c).ok())
            .is_some_and(|c| c.get("prompts").is_some_and(|p| !p.is_null()))
    }

    /// Whether the server said it announces changes to its tool list.
    pub(crate) fn announces_list_changed(&self) -> bool {
        #[derive(Deserialize)]
        struct Caps {
            tools: Option<Tools>,
        }
        #[derive(Deserialize)]
        struct Tools {
            #[serde(rename = "listChanged")]
            list_changed: Option<bool>,
        }
        self.capabilities
            .as_deref()
            .and_then(|c| serde_json::from_slice::<Caps>(c).ok())
            .and_then(|c| c.tools?.list_changed)
            == Some(true)
    }
}

/// One listing on a connected transport. A `list_changed` announced during
/// the walk means the list moved under us: walk once more (only once, so a
/// server that announces forever cannot stall us).
pub(crate) async fn relist<T: Transport>(
    t: &mut T,
    hs: &Handshake,
    limits: &Limits,
) -> Result<Listing, ListError> {
    let deadline = Instant::now() + limits.list_timeout;
    t.take_list_changed();
    let (mut raw_tools, mut pages) = walk_pages(t, hs.era, limits, deadline).await?;
    let mut relisted = false;
    if t.take_list_changed() {
        (raw_tools, pages) = walk_pages(t, hs.era, limits, deadline).await?;
        relisted = true;
    }
    let (tools, mut problems) = inspect(raw_tools);
    // Prompts reach the model too (their descriptions, arguments): listed
    // where the server offers them, within a deadline of their own. One
    // that cannot be listed is a problem of the listing, not its failure.
    let prompts = if hs.offers_prompts() {
        let deadline = Instant::now() + limits.list_timeout;
        match walk("prompts/list", t, hs.era, limits, deadline).await {
            Ok((raw, _)) => Some(
                raw.into_iter()
                    .map(|r| {
                        let raw = r.get().as_bytes().to_vec();
                        ListedTool {
                            name: plumbline_base::json::tool_name(&raw),
                            raw,
                        }
                    })
                    .collect(),
            ),
            Err(e) => {
                problems.push(ListingProblem::Prompts {
                    error: e.to_string(),
                });
                None
            }
        }
    } else {
        None
    };
    problems.extend(
        t.take_skipped()
            .into_iter()
            .map(|excerpt| ListingProblem::SkippedOutput { excerpt }),
    );
    Ok(Listing {
        era: hs.era,
        protocol_version: hs.protocol_version.clone(),
        server_info: hs.server_info.clone(),
        capabilities: hs.capabilities.clone(),
        instructions: hs.instructions.clone(),
        authorization: None,
        tools,
        prompts,
        problems,
        pages,
        relisted,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_version_refusal_that_names_ours_is_asked_again() {
        let refusal =
            |v: serde_json::Value| -> super::RpcError { serde_json::from_value(v).unwrap() };
        assert!(refusal(
            serde_json::json!({"code": -32022, "message": "Unsupported protocol version",
            "data": {"supported": ["2026-07-28"], "requested": "x"}})
        )
        .offers_stateless());
        // Another version offered, no data, or another error: no.
        assert!(!refusal(
            serde_json::json!({"code": -32022, "data": {"supported": ["2099-01-01"]}})
        )
        .offers_stateless());
        assert!(!refusal(serde_json::json!({"code": -32022})).offers_stateless());
        assert!(!refusal(
            serde_json::json!({"code": -32601, "data": {"supported": ["2026-07-28"]}})
        )
        .offers_stateless());
    }

    use std::collections::VecDeque;
    use std::time::Duration;

    use super::*;

    /// A transport that answers from a script: each request takes the next
    /// `(method, outcome)`, which must name the method sent.
    #[derive(Default)]
    struct Scripted {
        script: VecDeque<(&'static str, Result<Reply, ListError>)>,
        late: Option<Reply>,
        sent: Vec<&'static str>,
    }

    fn ok(json: &str) -> Result<Reply, ListError> {
        Ok(Ok(RawValue::from_string(json.to_owned()).unwrap()))
    }

    fn refused(code: i64, message: &str) -> Result<Reply, ListError> {
        Ok(Err(RpcError::new(code, message.to_owned())))
    }

    fn timed_out(stage: &'static str) -> Result<Reply, ListError> {
        Err(ListErrorKind::Timeout {
            stage,
            after: Duration::from_secs(3),
        }
        .into())
    }

    const DISCOVERED: &str = r#"{"supportedVersions":["2026-07-28"],"capabilities":{}}"#;
    const INITIALIZED: &str = r#"{"protocolVersion":"2025-11-25","capabilities":{}}"#;
    const ERA: &str = "connection is serving the 2026-07-28 protocol";

    impl Transport for Scripted {
        async fn request(
            &mut self,
            method: &'static str,
            _params: Value,
            _deadline: Instant,
        ) -> Result<Reply, ListError> {
            self.sent.push(method);
            let (expected, outcome) = self.script.pop_front().expect("a scripted answer");
            assert_eq!(method, expected, "sent so far: {:?}", self.sent);
            outcome
        }
        async fn notify(&mut self, _: &'static str, _: Value) -> Result<(), ListError> {
            Ok(())
        }
        fn take_list_changed(&mut self) -> bool {
            false
        }
        fn take_late_answer(&mut self, method: &'static str) -> Option<Reply> {
            assert_eq!(method, "server/discover");
            self.late.take()
        }
        fn negotiated(&mut self, _: Era, _: &str) {}
        async fn ready_to_list(&mut self, _: Era, _: Instant) -> Result<(), ListError> {
            Ok(())
        }
        fn hears_notifications(&self) -> bool {
            false
        }
        async fn wait_list_changed(&mut self) -> Result<(), ListError> {
            Ok(())
        }
    }

    async fn shake(
        script: Vec<(&'static str, Result<Reply, ListError>)>,
        late: Option<Reply>,
    ) -> (Result<Era, String>, Vec<&'static str>) {
        let mut t = Scripted {
            script: script.into(),
            late,
            sent: Vec::new(),
        };
        let result = handshake(&mut t, &Limits::default()).await;
        assert!(t.script.is_empty(), "unused script: {:?}", t.script.len());
        (result.map(|h| h.era).map_err(|e| e.to_string()), t.sent)
    }

    #[tokio::test]
    async fn a_probe_answered_late_gives_the_era_when_initialize_is_refused() {
        let late = ok(DISCOVERED).unwrap();
        let (era, sent) = shake(
            vec![
                ("server/discover", timed_out("server/discover")),
                ("initialize", refused(-32022, ERA)),
            ],
            Some(late),
        )
        .await;
        assert_eq!(era, Ok(Era::Stateless));
        assert_eq!(sent, ["server/discover", "initialize"]);
    }

    #[tokio::test]
    async fn a_refusal_naming_the_era_sends_the_probe_again() {
        for (code, message) in [(-32022, "unsupported protocol version"), (-32600, ERA)] {
            let (era, sent) = shake(
                vec![
                    ("server/discover", timed_out("server/discover")),
                    ("initialize", refused(code, message)),
                    ("server/discover", ok(DISCOVERED)),
                ],
                None,
            )
            .await;
            assert_eq!(era, Ok(Era::Stateless), "{code} {message}");
            assert_eq!(sent, ["server/discover", "initialize", "server/discover"]);
        }
    }

    #[tokio::test]
    async fn a_late_refusal_of_the_probe_is_not_asked_again() {
        let (era, sent) = shake(
            vec![
                ("server/discover", timed_out("server/discover")),
                ("initialize", refused(-32022, ERA)),
            ],
            Some(Err(RpcError::new(-32601, "Method not found".into()))),
        )
        .await;
        assert!(era.unwrap_err().contains("-32022"));
        assert_eq!(sent, ["server/discover", "initialize"]);
    }

    #[tokio::test]
    async fn when_the_second_probe_fails_the_refusal_is_reported() {
        for second in [
            refused(-32601, "Method not found"),
            timed_out("server/discover"),
        ] {
            let (era, _) = shake(
                vec![
                    ("server/discover", timed_out("server/discover")),
                    ("initialize", refused(-32022, ERA)),
                    ("server/discover", second),
                ],
                None,
            )
            .await;
            let error = era.unwrap_err();
            assert!(
                error.contains("initialize failed") && error.contains("-32022"),
                "{error}"
            );
        }
    }

    #[tokio::test]
    async fn a_probe_that_was_refused_is_never_sent_again() {
        // The server answered: it does not speak 2026-07-28. Its refusal of
        // `initialize` is the error.
        let (era, sent) = shake(
            vec![
                ("server/discover", refused(-32601, "Method not found")),
                (
                    "initialize",
                    refused(-32022, "unsupported protocol version"),
                ),
            ],
            Some(ok(DISCOVERED).unwrap()),
        )
        .await;
        assert!(era.is_err());
        assert_eq!(sent, ["server/discover", "initialize"]);
    }

    #[tokio::test]
    async fn an_accepted_initialize_is_kept_even_if_the_probe_answered_late() {
        let (era, sent) = shake(
            vec![
                ("server/discover", timed_out("server/discover")),
                ("initialize", ok(INITIALIZED)),
            ],
            Some(ok(DISCOVERED).unwrap()),
        )
        .await;
        assert_eq!(era, Ok(Era::Session));
        assert_eq!(sent, ["server/discover", "initialize"]);
    }

    #[test]
    fn a_late_answer_is_kept_only_for_a_request_that_was_abandoned() {
        let mut a = Announced::default();
        a.answered_late(&json!(1), ok(DISCOVERED).unwrap());
        assert!(a.take_late("server/discover").is_none(), "never abandoned");
        a.abandon(1, "server/discover");
        a.answered_late(&json!(2), ok(INITIALIZED).unwrap());
        assert!(a.take_late("server/discover").is_none(), "another id");
        a.answered_late(&json!(1), ok(DISCOVERED).unwrap());
        assert!(matches!(a.take_late("server/discover"), Some(Ok(_))));
        assert!(a.take_late("server/discover").is_none(), "taken once");
    }
}
