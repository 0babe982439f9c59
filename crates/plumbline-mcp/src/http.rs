//! Streamable HTTP: each request is a POST whose answer is JSON or an SSE
//! stream; notifications come on a GET stream (session era) or a
//! `subscriptions/listen` stream (stateless era), opened before listing.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Once};
use std::time::Duration;

use tokio::sync::Notify;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};
use reqwest::{Client, Response, StatusCode};
use serde_json::{json, Value};
use tokio::sync::oneshot;
use tokio::time::{timeout, timeout_at, Instant};

use plumbline_base::redact::redact_url;

use crate::error::{excerpt, ListError, ListErrorKind};
use crate::limits::Limits;
use crate::listing::{Era, Listing, ListingProblem};
use crate::protocol::{
    self, answer_to, parse_inbound, Inbound, Reply, RpcError, Transport, STATELESS_VERSION,
};
use crate::sse;

/// A server reached over Streamable HTTP.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HttpSpec {
    pub url: String,
    /// Sent with every request, e.g. `Authorization`.
    pub headers: Vec<(String, String)>,
    /// How a refusal for want of authorization (401, or 403
    /// `insufficient_scope`) is answered: a new token and the request
    /// again. Without it the refusal is an error.
    pub auth: Option<Auth>,
}

/// A server's authorization (OAuth 2.1), shared by every session opened
/// to it: its registration and tokens outlive one listing.
#[derive(Clone)]
pub struct Auth(pub Arc<plumbline_auth::Authorizer>);

impl PartialEq for Auth {
    fn eq(&self, other: &Auth) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Auth {}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Auth")
    }
}

impl Auth {
    /// `Authorization: Bearer TOKEN`, marked sensitive.
    pub fn header(token: &str) -> Option<HeaderValue> {
        let mut value = HeaderValue::from_str(&format!("Bearer {token}")).ok()?;
        value.set_sensitive(true);
        Some(value)
    }

    /// Whether an answer with `status` is a refusal a new authorization
    /// may answer (401; 403, which the Authorizer takes up only for
    /// `insufficient_scope`).
    pub fn refusal(status: StatusCode) -> bool {
        status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN
    }
}

/// Authorizations one request may go through before its refusal stands
/// (a server that refuses every token would otherwise loop): for the
/// client's requests and the guard's alike.
pub const AUTHORIZATIONS_PER_REQUEST: u32 = 3;

const SESSION_ID: &str = "mcp-session-id";
const PROTOCOL_VERSION: &str = "mcp-protocol-version";
const METHOD: &str = "mcp-method";

/// rustls with the `ring` provider: the default aws-lc-rs build compiles C
/// for minutes on two cores, and we need nothing it adds.
pub fn client(limits: &Limits) -> Result<Client, ListError> {
    static PROVIDER: Once = Once::new();
    PROVIDER.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    Client::builder()
        .connect_timeout(limits.connect_timeout)
        .redirect(redirect_policy())
        .build()
        .map_err(|e| ListErrorKind::Io(crate::error::describe_reqwest(&e)).into())
}

/// Redirects are followed within the origin the request was sent to (a
/// server moving `/mcp` to `/mcp/`, say), up to ten, and never to another
/// origin: configured headers (`X-Api-Key`, `Private-Token`, …) would go
/// with them, and reqwest strips only `Authorization` and `Cookie`. The
/// 3xx answer then comes back to the caller, which says so
/// ([`refusal`]).
fn redirect_policy() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        if attempt.previous().len() > 10 {
            return attempt.error("more than 10 redirects");
        }
        let same = attempt
            .previous()
            .first()
            .is_some_and(|first| same_origin(first, attempt.url()));
        if same {
            attempt.follow()
        } else {
            attempt.stop()
        }
    })
}

/// RFC 6454 origins: scheme, host and port.
pub(crate) fn same_origin(a: &reqwest::Url, b: &reqwest::Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str() == b.host_str()
        && a.port_or_known_default() == b.port_or_known_default()
}

/// A URL fit for an error message: no user information, no secret-looking
/// query values, sanitised for a terminal.
pub(crate) fn redacted_url(url: &reqwest::Url) -> String {
    excerpt(redact_url(url.as_str()).as_bytes(), 200)
}

/// Why an answer that is not 2xx failed `method`: a redirect to another
/// origin says that it was not followed and why; anything else gives its
/// status and the start of its body.
pub(crate) fn refusal(
    method: &'static str,
    from: &reqwest::Url,
    status: StatusCode,
    location: Option<&HeaderValue>,
    body: &[u8],
) -> ListError {
    if status.is_redirection() {
        let target = location
            .and_then(|l| l.to_str().ok())
            .and_then(|l| from.join(l).ok());
        return ListErrorKind::Redirect {
            method,
            status: status.as_u16(),
            location: target
                .as_ref()
                .map_or_else(|| "an unreadable location".to_owned(), redacted_url),
        }
        .into();
    }
    status_error(method, status, body)
}

/// An HTTP client for many connections: one connection pool and one TLS
/// configuration (its root certificates alone weigh about 100 kB) shared
/// by every HTTP and SSE session opened with it, where each listing
/// otherwise builds its own. Cheap to clone; use it within the tokio
/// runtime it was first used in, as its pooled connections belong there.
#[derive(Clone)]
pub struct HttpClient {
    pub(crate) client: Client,
    /// Streams resumed by the sessions opened with this client.
    pub(crate) resumptions: Arc<AtomicU64>,
}

impl HttpClient {
    pub fn new(limits: &Limits) -> Result<HttpClient, ListError> {
        Ok(HttpClient {
            client: client(limits)?,
            resumptions: Arc::default(),
        })
    }

    /// Counts resumptions in `counter` (a watcher's metrics) from now on.
    pub fn counting_resumptions_in(mut self, counter: Arc<AtomicU64>) -> HttpClient {
        self.resumptions = counter;
        self
    }

    /// How many SSE streams the sessions opened with this client resumed
    /// after the server ended them (with `Last-Event-ID` when the server
    /// gave event IDs, after the `retry` it asked for).
    pub fn resumptions(&self) -> u64 {
        self.resumptions.load(Ordering::Relaxed)
    }
}

/// How long to wait before reconnecting a stream whose server named no
/// `retry`, and the longest wait honoured when it did.
const DEFAULT_RETRY: Duration = Duration::from_secs(1);
const MAX_RETRY: Duration = Duration::from_secs(60);
/// Resumptions of one request's answer stream before it is given up.
const REQUEST_RESUMPTIONS: u32 = 5;

pub(crate) async fn list_tools(spec: &HttpSpec, limits: &Limits) -> Result<Listing, ListError> {
    let mut t = HttpTransport::new(spec, limits, &HttpClient::new(limits)?)?;
    let mut result = protocol::list(&mut t, limits).await;
    if let Ok(listing) = &mut result {
        t.add_published(limits, listing).await;
    }
    t.shutdown().await;
    result
}

pub(crate) fn extra_headers(spec: &HttpSpec) -> Result<HeaderMap, ListError> {
    let mut map = HeaderMap::new();
    for (k, v) in &spec.headers {
        let name = HeaderName::from_bytes(k.as_bytes()).map_err(|_| ListErrorKind::Protocol {
            method: "configuration",
            message: format!("invalid header name {}", excerpt(k.as_bytes(), 40)),
        })?;
        // The value is a secret more often than not: never echo it.
        let value = HeaderValue::from_str(v).map_err(|_| ListErrorKind::Protocol {
            method: "configuration",
            message: format!("invalid value for header {k}"),
        })?;
        map.insert(name, value);
    }
    Ok(map)
}

pub(crate) struct HttpTransport {
    /// The reqwest client, and where resumptions are counted.
    http: HttpClient,
    url: String,
    headers: HeaderMap,
    session: Option<String>,
    version: Option<String>,
    era: Era,
    next_id: u64,
    heard: Arc<Heard>,
    stream: Option<tokio::task::JoinHandle<()>>,
    max: usize,
    auth: Option<Auth>,
}

fn status_error(method: &'static str, status: StatusCode, body: &[u8]) -> ListError {
    ListErrorKind::Protocol {
        method,
        message: format!("HTTP {status}: {}", excerpt(body, 200)),
    }
    .into()
}

/// Reads a whole body, at most `max` bytes.
async fn body(
    mut resp: Response,
    max: usize,
    deadline: Instant,
    stage: &'static str,
) -> Result<Vec<u8>, ListError> {
    let started = Instant::now();
    let mut out = Vec::new();
    loop {
        let chunk = timeout_at(deadline, resp.chunk())
            .await
            .map_err(|_| timeout_error(stage, started, deadline))?
            .map_err(|e| ListErrorKind::Io(crate::error::describe_reqwest(&e)))?;
        let Some(chunk) = chunk else {
            return Ok(out);
        };
        if out.len() + chunk.len() > max {
            return Err(ListErrorKind::MessageTooLarge { limit: max }.into());
        }
        out.extend_from_slice(&chunk);
    }
}

/// A timeout at `deadline` for a stage that began at `started`.
pub(crate) fn timeout_error(stage: &'static str, started: Instant, deadline: Instant) -> ListError {
    ListErrorKind::Timeout {
        stage,
        after: deadline.saturating_duration_since(started),
    }
    .into()
}

impl HttpTransport {
    pub(crate) fn new(
        spec: &HttpSpec,
        limits: &Limits,
        http: &HttpClient,
    ) -> Result<Self, ListError> {
        Ok(HttpTransport {
            http: http.clone(),
            url: spec.url.clone(),
            headers: extra_headers(spec)?,
            session: None,
            version: None,
            era: Era::Session,
            next_id: 0,
            heard: Arc::default(),
            stream: None,
            max: limits.max_message_bytes,
            auth: spec.auth.clone(),
        })
    }

    /// Adds to a listing what a server behind OAuth publishes about its
    /// authorization, or the problem of reading it. Bounded by the
    /// handshake's timeout, on top of the listing's own (two small
    /// documents; a server that hangs on them costs one such bound).
    pub(crate) async fn add_published(&self, limits: &Limits, listing: &mut Listing) {
        let Some(auth) = &self.auth else { return };
        let bound = limits.initialize_timeout;
        let problem = match tokio::time::timeout(bound, auth.0.published()).await {
            Ok(Ok(document)) => {
                listing.authorization = document;
                return;
            }
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no answer within {bound:?}"),
        };
        listing
            .problems
            .push(ListingProblem::AuthorizationMetadata { error: problem });
    }

    /// Sends `Authorization: Bearer` with every request from now on (the
    /// GET stream and answers to the server included).
    fn use_token(&mut self, token: &str) {
        if let Some(value) = Auth::header(token) {
            self.headers.insert(reqwest::header::AUTHORIZATION, value);
        }
    }

    fn post(&self, method: &str, body: &Value) -> reqwest::RequestBuilder {
        self.http
            .client
            .post(&self.url)
            .headers(self.request_headers(method))
            .body(body.to_string())
    }

    /// The headers of a POST carrying `method`: the configured ones, the
    /// session, and the protocol version.
    fn request_headers(&self, method: &str) -> HeaderMap {
        let mut headers = self.headers.clone();
        headers.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        // Both came from the server or the handshake; a value no header
        // can carry is left out rather than sent mangled.
        let mut put = |name: &'static str, value: &str| {
            if let Ok(value) = HeaderValue::from_str(value) {
                headers.insert(HeaderName::from_static(name), value);
            }
        };
        if let Some(s) = &self.session {
            put(SESSION_ID, s);
        }
        if method == "server/discover" || self.era == Era::Stateless {
            put(PROTOCOL_VERSION, STATELESS_VERSION);
            put(METHOD, method);
        } else if let Some(v) = &self.version {
            put(PROTOCOL_VERSION, v);
        }
        headers
    }

    /// What opens (and reopens) this session's GET stream.
    fn stream_get(&self) -> StreamGet {
        // A POST's headers (configured, session, version), without a body.
        let mut headers = self.request_headers("");
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        headers.remove(CONTENT_TYPE);
        StreamGet {
            client: self.http.client.clone(),
            url: self.url.clone(),
            headers,
        }
    }

    /// What answers the server's requests, for this session as it stands.
    fn answerer(&self) -> Answerer {
        Answerer {
            client: self.http.client.clone(),
            url: self.url.clone(),
            headers: self.request_headers(""),
        }
    }

    /// Handles one message that arrived while waiting for `id`.
    async fn dispatch(
        &mut self,
        bytes: &[u8],
        id: u64,
        method: &'static str,
    ) -> Result<Option<Reply>, ListError> {
        match parse_inbound(bytes, method)? {
            Inbound::Response { id: rid, reply } if rid == json!(id) => Ok(Some(reply)),
            Inbound::Response { .. } => Ok(None),
            Inbound::Notification { method: m } => {
                if m == "notifications/tools/list_changed" {
                    self.heard.list_changed();
                }
                Ok(None)
            }
            Inbound::Request { id: rid, method: m } => {
                self.answerer().answer(rid, &m).await;
                Ok(None)
            }
        }
    }

    pub(crate) async fn shutdown(mut self) {
        if let Some(task) = self.stream.take() {
            task.abort();
        }
        if let Some(session) = self.session.take() {
            // Ending the session politely; a server that ignores it is fine.
            let req = self
                .http
                .client
                .delete(&self.url)
                .headers(self.headers.clone())
                .header(SESSION_ID, session);
            let _ = timeout(std::time::Duration::from_secs(2), req.send()).await;
        }
    }

    /// Opens the notification stream and waits until it is open (or known
    /// to be unavailable), then reads it in the background.
    async fn open_stream(&mut self, era: Era, deadline: Instant) -> Result<(), ListError> {
        let get = (era == Era::Session).then(|| self.stream_get());
        let req = match &get {
            Some(get) => get.request(None),
            None => self.post(
                "subscriptions/listen",
                &json!({
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "subscriptions/listen",
                    "params": {"_meta": protocol::stateless_meta(), "notifications": {"toolsListChanged": true}},
                }),
            ),
        };
        let resp = match timeout_at(deadline, req.send()).await {
            Ok(Ok(r)) => r,
            // No stream: the server may not offer one. Listing still works;
            // only a change during the listing could go unnoticed.
            Ok(Err(_)) | Err(_) => return Ok(()),
        };
        if !is_event_stream(&resp) {
            return Ok(());
        }
        let flag = Arc::clone(&self.heard);
        let max = self.max;
        let (acked, ack) = oneshot::channel();
        let need_ack = era == Era::Stateless;
        // A GET stream the server ends is resumed; a 2026-07-28
        // subscription is one request's answer, and ends with it.
        let resume = get.map(|get| Resume {
            get,
            resumptions: Arc::clone(&self.http.resumptions),
        });
        self.stream = Some(tokio::spawn(read_notifications(
            resp,
            flag,
            self.answerer(),
            max,
            need_ack.then_some(acked),
            resume,
        )));
        if need_ack {
            // The subscription counts from its acknowledgement.
            let _ = timeout_at(deadline, ack).await;
        }
        Ok(())
    }
}

/// What the notification stream has told the transport.
#[derive(Default)]
struct Heard {
    list_changed: AtomicBool,
    /// The stream ended: from now on nothing more will be heard.
    closed: AtomicBool,
    wake: Notify,
}

impl Heard {
    fn list_changed(&self) {
        self.list_changed.store(true, Ordering::SeqCst);
        self.wake.notify_one();
    }
}

/// Answers the requests a server sends (a `ping`, or `roots/list` after
/// the handshake), in a POST's answer or on the notification stream, each
/// on its own POST. A server may wait for the answer before it sends
/// anything else, `list_changed` included.
struct Answerer {
    client: Client,
    url: String,
    headers: HeaderMap,
}

impl Answerer {
    /// How long one answer may take; the stream is not read meanwhile.
    const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

    async fn answer(&self, id: Value, method: &str) {
        let req = self
            .client
            .post(&self.url)
            .headers(self.headers.clone())
            .body(answer_to(id, method).to_string());
        // Its reply carries nothing for us, and a server that refuses it
        // shows that by what it does next.
        let _ = timeout(Self::TIMEOUT, req.send()).await;
    }
}

/// Opens a session's GET stream, resuming from an event ID if given.
struct StreamGet {
    client: Client,
    url: String,
    /// The configured headers, `Accept`, the session and the version.
    headers: HeaderMap,
}

impl StreamGet {
    fn request(&self, last_event_id: Option<&str>) -> reqwest::RequestBuilder {
        let mut req = self.client.get(&self.url).headers(self.headers.clone());
        // The parser keeps only IDs a header can carry (UTF-8 included).
        if let Some(id) = last_event_id.and_then(|id| HeaderValue::from_bytes(id.as_bytes()).ok()) {
            req = req.header("last-event-id", id);
        }
        req
    }

    /// The resumed stream, or `None` when the server refuses it.
    async fn resume(&self, last_event_id: Option<&str>) -> Option<Response> {
        let resp = timeout(Answerer::TIMEOUT, self.request(last_event_id).send())
            .await
            .ok()?
            .ok()?;
        is_event_stream(&resp).then_some(resp)
    }
}

/// Whether `resp` is a successful `text/event-stream` answer.
fn is_event_stream(resp: &Response) -> bool {
    resp.status().is_success() && content_type(resp).starts_with("text/event-stream")
}

fn content_type(resp: &Response) -> &str {
    resp.headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// The shortest wait before reconnecting, whatever `retry` says: a server
/// announcing `retry: 0` and closing at once must not make a busy loop.
const MIN_RETRY: Duration = Duration::from_millis(100);
/// A notification stream that ends sooner than this after it opened counts
/// as a quick end: each quick end in a row doubles the least wait before
/// the next reconnection (100 ms, 200 ms, … up to [`MAX_RETRY`]).
const QUICK_END: Duration = Duration::from_secs(10);

/// The wait before reconnecting: what the server asked for, within bounds.
fn retry_delay(parser: &sse::Parser) -> Duration {
    parser
        .retry()
        .unwrap_or(DEFAULT_RETRY)
        .clamp(MIN_RETRY, MAX_RETRY)
}

/// How a notification stream that the server ended is taken up again.
struct Resume {
    get: StreamGet,
    resumptions: Arc<AtomicU64>,
}

async fn read_notifications(
    resp: Response,
    flag: Arc<Heard>,
    answerer: Answerer,
    max: usize,
    mut acked: Option<oneshot::Sender<()>>,
    resume: Option<Resume>,
) {
    let mut parser = sse::Parser::new(max);
    let mut resp = resp;
    // A watcher holds this stream for days; servers and proxies end
    // streams. Each end is followed, after the server's `retry`, by a GET
    // carrying `Last-Event-ID`, from which the server replays what was
    // sent meanwhile. A stream without event IDs cannot be replayed, so a
    // change may have gone unheard: the resumption counts as one.
    //
    // One attempt per end: a server that refuses it (gone, restarted, or
    // no longer knowing the session) ends the stream for good, and the
    // session's owner reconnects with its own backoff and says so. A
    // stream that is resumed and ends again is resumed again, never
    // sooner than the server's `retry` (1 s without one).
    let mut quick_ends = 0u32;
    let mut opened = Instant::now();
    while read_stream(resp, &mut parser, &flag, &answerer, &mut acked).await {
        let Some(resume) = &resume else { break };
        quick_ends = if opened.elapsed() < QUICK_END {
            quick_ends + 1
        } else {
            0
        };
        let least = MIN_RETRY
            .saturating_mul(1 << quick_ends.min(10))
            .min(MAX_RETRY);
        tokio::time::sleep(retry_delay(&parser).max(least)).await;
        opened = Instant::now();
        let Some(next) = resume.get.resume(parser.last_event_id()).await else {
            break;
        };
        resume.resumptions.fetch_add(1, Ordering::Relaxed);
        if parser.last_event_id().is_none() {
            flag.list_changed();
        }
        parser.reconnected();
        resp = next;
    }
    flag.closed.store(true, Ordering::SeqCst);
    flag.wake.notify_one();
}

/// Reads a notification stream to its end: `true` when the server ended
/// it (it may be resumed), `false` when it broke a bound.
async fn read_stream(
    mut resp: Response,
    parser: &mut sse::Parser,
    flag: &Heard,
    answerer: &Answerer,
    acked: &mut Option<oneshot::Sender<()>>,
) -> bool {
    while let Ok(Some(chunk)) = resp.chunk().await {
        let Ok(events) = parser.push(&chunk) else {
            return false;
        };
        for ev in events {
            if ev.data.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match parse_inbound(&ev.data, "notifications") {
                Ok(Inbound::Notification { method }) => match method.as_str() {
                    "notifications/tools/list_changed" => flag.list_changed(),
                    "notifications/subscriptions/acknowledged" => {
                        if let Some(tx) = acked.take() {
                            let _ = tx.send(());
                        }
                    }
                    _ => {}
                },
                Ok(Inbound::Request { id, method }) => answerer.answer(id, &method).await,
                Ok(Inbound::Response { .. }) | Err(_) => {}
            }
        }
    }
    true
}

/// A transport dropped without [`HttpTransport::shutdown`] (a watcher's
/// worker aborted on reload) stops its notification task, which would
/// otherwise keep resuming the stream of a session nobody reads.
impl Drop for HttpTransport {
    fn drop(&mut self) {
        if let Some(task) = self.stream.take() {
            task.abort();
        }
    }
}

impl Transport for HttpTransport {
    async fn request(
        &mut self,
        method: &'static str,
        params: Value,
        deadline: Instant,
    ) -> Result<Reply, ListError> {
        self.next_id += 1;
        let id = self.next_id;
        let started = Instant::now();
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let mut authorizations = 0;
        let resp = loop {
            if let Some(auth) = self.auth.clone() {
                // Renewing a token is part of the request: its deadline holds.
                let token = timeout_at(deadline, auth.0.bearer_detached())
                    .await
                    .map_err(|_| timeout_error("authorization", started, deadline))?;
                if let Some(token) = token {
                    self.use_token(&token);
                }
            }
            let resp = timeout_at(deadline, self.post(method, &message).send())
                .await
                .map_err(|_| timeout_error(method, started, deadline))?
                .map_err(|e| ListErrorKind::Io(crate::error::describe_reqwest(&e)))?;
            let status = resp.status();
            let Some(auth) = self.auth.clone() else {
                break resp;
            };
            if status.is_success() {
                auth.0.accepted().await;
                break resp;
            }
            if !Auth::refusal(status) || authorizations == AUTHORIZATIONS_PER_REQUEST {
                break resp;
            }
            authorizations += 1;
            let challenges = plumbline_auth::challenges_of(resp.headers());
            drop(resp);
            let token = timeout_at(
                deadline,
                auth.0.refused_detached(status.as_u16(), &challenges),
            )
            .await
            .map_err(|_| timeout_error("authorization", started, deadline))?
            .map_err(|source| ListErrorKind::Auth { method, source })?;
            self.use_token(&token);
        };
        let status = resp.status();
        if !status.is_success() {
            let location = resp.headers().get(reqwest::header::LOCATION).cloned();
            let from = resp.url().clone();
            let text = body(resp, 64 << 10, deadline, method)
                .await
                .unwrap_or_default();
            if status.is_redirection() {
                return Err(refusal(method, &from, status, location.as_ref(), &text));
            }
            if method == "server/discover" {
                // A JSON-RPC error with the status (400 with -32022 and
                // the versions supported) is the server's answer; anything
                // else is a legacy server refusing the probe at the HTTP
                // level.
                #[derive(serde::Deserialize)]
                struct Refusal {
                    error: RpcError,
                }
                return Ok(Err(serde_json::from_slice::<Refusal>(&text)
                    .map(|r| r.error)
                    .unwrap_or_else(|_| {
                        RpcError::new(-32601, format!("HTTP {status}"))
                    })));
            }
            return Err(status_error(method, status, &text));
        }
        if method == "initialize" {
            if let Some(s) = resp.headers().get(SESSION_ID).and_then(|v| v.to_str().ok()) {
                self.session = Some(s.to_owned());
            }
        }
        if content_type(&resp).starts_with("text/event-stream") {
            let mut parser = sse::Parser::new(self.max);
            let mut resp = resp;
            let mut resumed = 0;
            loop {
                let chunk = timeout_at(deadline, resp.chunk())
                    .await
                    .map_err(|_| timeout_error(method, started, deadline))?;
                // The server may end the stream before answering (SEP-1699:
                // it frees the connection while it works) and expects a GET
                // with `Last-Event-ID` after its `retry`; the answer comes
                // on that stream. A connection that broke is resumed the
                // same way. Only a session-era stream with an event ID can
                // be resumed.
                let chunk = match chunk {
                    Ok(Some(chunk)) => chunk,
                    ended => {
                        // Not before the handshake settled on the era: a
                        // probe's stream is not a session's.
                        let resumable = self.era == Era::Session
                            && self.version.is_some()
                            && parser.last_event_id().is_some()
                            && resumed < REQUEST_RESUMPTIONS;
                        if !resumable {
                            return Err(match ended {
                                Err(e) => ListErrorKind::Io(crate::error::describe_reqwest(&e)),
                                Ok(_) => ListErrorKind::Protocol {
                                    method,
                                    message: "the event stream ended without a response".to_owned(),
                                },
                            }
                            .into());
                        }
                        resumed += 1;
                        let wait = retry_delay(&parser);
                        timeout_at(deadline, tokio::time::sleep(wait))
                            .await
                            .map_err(|_| timeout_error(method, started, deadline))?;
                        let get = self.stream_get();
                        resp = timeout_at(deadline, get.resume(parser.last_event_id()))
                            .await
                            .map_err(|_| timeout_error(method, started, deadline))?
                            .ok_or_else(|| ListErrorKind::Protocol {
                                method,
                                message: "the event stream ended without a response, and the server refused to resume it (GET with Last-Event-ID)".to_owned(),
                            })?;
                        self.http.resumptions.fetch_add(1, Ordering::Relaxed);
                        parser.reconnected();
                        continue;
                    }
                };
                let events = parser
                    .push(&chunk)
                    .map_err(|limit| ListError::from(ListErrorKind::MessageTooLarge { limit }))?;
                for ev in events {
                    // Servers may prime a stream with an event that has an
                    // id for resumption and no data: nothing to read.
                    if ev.event != "message" || ev.data.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    if let Some(reply) = self.dispatch(&ev.data, id, method).await? {
                        return Ok(reply);
                    }
                }
            }
        }
        let bytes = body(resp, self.max, deadline, method).await?;
        if bytes.is_empty() {
            return Err(ListErrorKind::Protocol {
                method,
                message: format!("HTTP {status} without a response body"),
            }
            .into());
        }
        match self.dispatch(&bytes, id, method).await? {
            Some(reply) => Ok(reply),
            None => Err(ListErrorKind::Protocol {
                method,
                message: "the answer was not the response to this request".to_owned(),
            }
            .into()),
        }
    }

    async fn notify(&mut self, method: &'static str, params: Value) -> Result<(), ListError> {
        let message = json!({"jsonrpc": "2.0", "method": method, "params": params});
        let resp = self
            .post(method, &message)
            .send()
            .await
            .map_err(|e| ListErrorKind::Io(crate::error::describe_reqwest(&e)))?;
        if resp.status().is_success() {
            Ok(())
        } else {
            let status = resp.status();
            let location = resp.headers().get(reqwest::header::LOCATION).cloned();
            let from = resp.url().clone();
            let text = body(
                resp,
                64 << 10,
                Instant::now() + std::time::Duration::from_secs(5),
                method,
            )
            .await
            .unwrap_or_default();
            Err(refusal(method, &from, status, location.as_ref(), &text))
        }
    }

    fn take_list_changed(&mut self) -> bool {
        self.heard.list_changed.swap(false, Ordering::SeqCst)
    }

    fn negotiated(&mut self, era: Era, version: &str) {
        self.era = era;
        self.version = Some(version.to_owned());
    }

    async fn ready_to_list(&mut self, era: Era, deadline: Instant) -> Result<(), ListError> {
        self.open_stream(era, deadline).await
    }

    /// Only with a notification stream open (a server may offer none).
    fn hears_notifications(&self) -> bool {
        self.stream.is_some()
    }

    async fn wait_list_changed(&mut self) -> Result<(), ListError> {
        loop {
            if self.take_list_changed() {
                return Ok(());
            }
            if self.stream.is_none() || self.heard.closed.load(Ordering::SeqCst) {
                return Err(ListErrorKind::Exited {
                    stage: "waiting for list_changed",
                    how: crate::error::Ended::Closed("the notification stream closed"),
                }
                .into());
            }
            // A wake-up stored before this await is not lost (notify_one
            // keeps a permit), so nothing between the checks and here is.
            self.heard.wake.notified().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_and_redacted_urls() {
        let u = |s: &str| reqwest::Url::parse(s).expect("URL");
        assert!(same_origin(
            &u("http://127.0.0.1/mcp"),
            &u("http://127.0.0.1:80/mcp/")
        ));
        assert!(!same_origin(
            &u("http://127.0.0.1:1/mcp"),
            &u("http://127.0.0.1:2/mcp")
        ));
        assert!(!same_origin(&u("https://h/mcp"), &u("http://h/mcp")));
        assert!(!same_origin(&u("https://h/mcp"), &u("https://evil.h/mcp")));
        assert_eq!(
            redacted_url(&u("https://u:p@h/mcp?token=t0k&x=1")),
            "https://REDACTED@h/mcp?token=REDACTED&x=1"
        );
    }
}
