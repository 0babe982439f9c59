//! The well-behaved server: `rmcp` serving the phases' raw tools.
//!
//! The current phase lives in a `watch` channel. It advances after every N
//! `tools/list` calls (`--advance-after`), on SIGUSR1, over HTTP on
//! `POST /control/advance`, and on a call to the conformance suite's hook
//! tool `test_trigger_tool_change` when a phase lists it; it stops at the
//! last phase. Every change is announced with
//! `notifications/tools/list_changed`: to 2025-era peers (those that sent
//! `notifications/initialized`) through their session, and to 2026-07-28
//! peers on each `subscriptions/listen` stream that asked for
//! `toolsListChanged`.

use std::{
    borrow::Cow,
    collections::VecDeque,
    future::IntoFuture as _,
    num::NonZeroUsize,
    pin::Pin,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    task::Poll,
    time::Duration,
};

use anyhow::Context as _;
use axum::{routing::post, Json, Router};
use rmcp::{
    model::{
        CallToolRequestMethod, CallToolRequestParams, CallToolResponse, CallToolResult,
        ContentBlock, Extensions, Implementation, ListToolsResult, MetaObject,
        PaginatedRequestParams, PingRequest, PingRequestMethod, ProtocolVersion,
        ServerCapabilities, ServerConfig, ServerRequest, SubscriptionFilter,
    },
    service::{NotificationContext, RequestContext, ServerInitializeError, SubscriptionContext},
    transport::{
        streamable_http_server::session::local::LocalSessionManager, StreamableHttpServerConfig,
        StreamableHttpService,
    },
    ErrorData as McpError, Peer, RoleServer, ServerHandler, ServiceExt as _,
};
use tokio::{
    io::{AsyncBufReadExt as _, AsyncRead, AsyncWriteExt as _, BufReader, ReadBuf},
    signal::unix::{signal, Signal, SignalKind},
    sync::watch,
};
use tokio_util::sync::CancellationToken;

use crate::{
    net,
    phases::Phases,
    splice::{self, PageRef, PAGE_KEY},
    Transport,
};

/// What the command line chose for the well-behaved server.
#[derive(Debug)]
pub struct Options {
    pub phases: Phases,
    pub advance_after: Option<NonZeroUsize>,
    pub page_size: Option<NonZeroUsize>,
    pub legacy_only: bool,
    pub stateless: bool,
    pub ping_before_list_changed: bool,
    /// Behind OAuth, with access tokens that live this long.
    pub oauth_token_lifetime: Option<Duration>,
}

/// State shared by every session (one over stdio, many over HTTP).
#[derive(Debug)]
struct Shared {
    phases: Arc<Phases>,
    phase: watch::Sender<usize>,
    list_calls: AtomicUsize,
    advance_after: Option<NonZeroUsize>,
    page_size: Option<NonZeroUsize>,
    legacy_only: bool,
    /// Ping before each `list_changed` of the session era.
    ping_before_list_changed: bool,
    /// Peers that completed the `initialize` handshake, for `list_changed`.
    legacy_peers: Mutex<Vec<Peer<RoleServer>>>,
    /// Cancelled when stdin reaches EOF or HTTP shuts down. Open
    /// `subscriptions/listen` handlers end on it: rmcp waits up to 5 s for
    /// in-flight handlers after EOF, and a listen never finishes on its own.
    closing: CancellationToken,
    /// The phase when each pending `subscriptions/listen` was accepted.
    listen_baselines: Mutex<VecDeque<usize>>,
}

/// The conformance suite's hook for "change the tool list now".
pub const TRIGGER_TOOL_CHANGE: &str = "test_trigger_tool_change";

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    /// Moves to the next phase unless already at the last; returns the phase.
    fn advance(&self, cause: &str) -> usize {
        let last = self.phases.len() - 1;
        let moved = self.phase.send_if_modified(|phase| {
            let moved = *phase < last;
            if moved {
                *phase += 1;
            }
            moved
        });
        let phase = *self.phase.borrow();
        if moved {
            tracing::info!(phase, cause, "phase advanced");
        } else {
            tracing::info!(phase, cause, "already at the last phase");
        }
        phase
    }
}

/// One `rmcp` handler per session, all over the same [`Shared`] state.
#[derive(Debug, Clone)]
struct Server(Arc<Shared>);

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new(
            "plumbline-test-server",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions("A test server for Plumbline; its tools change between phases.")
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        if self.0.legacy_only {
            Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
        } else {
            Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
        }
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let shared = &self.0;
        let phase = *shared.phase.borrow();
        let count = shared.phases.tools(phase).len();
        let start = match request.and_then(|request| request.cursor) {
            None => 0,
            Some(cursor) => cursor
                .parse::<usize>()
                .ok()
                .filter(|start| *start <= count)
                .ok_or_else(|| {
                    McpError::invalid_params(format!("unknown cursor {cursor:?}"), None)
                })?,
        };
        let end = shared
            .page_size
            .map_or(count, |size| start.saturating_add(size.get()).min(count));
        let page = PageRef { phase, start, end };
        // The tools themselves are spliced in on the way out (see `splice`).
        let mut result = ListToolsResult::with_all_items(Vec::new());
        result.next_cursor = (end < count).then(|| end.to_string());
        let mut meta = MetaObject::new();
        meta.0.insert(
            PAGE_KEY.to_owned(),
            serde_json::to_value(page)
                .map_err(|e| McpError::internal_error(e.to_string(), None))?,
        );
        result.meta = Some(meta);
        tracing::info!(phase, start, end, "tools/list");

        let calls = shared.list_calls.fetch_add(1, Ordering::SeqCst) + 1;
        if shared
            .advance_after
            .is_some_and(|every| calls.is_multiple_of(every.get()))
        {
            shared.advance("--advance-after");
        }
        Ok(result)
    }

    /// Only the conformance suite's diagnostic hook is callable: a tool
    /// named [`TRIGGER_TOOL_CHANGE`] listed in the current phase advances
    /// the phase when called, as the suite's example server mutates its
    /// tool list (its `server-stateless` scenario then waits for
    /// `list_changed` on a listen stream). Every other call is answered as
    /// rmcp answers a server without tools/call.
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let shared = &self.0;
        let phase = *shared.phase.borrow();
        let listed = shared.phases.tools(phase).iter().any(|tool| {
            serde_json::from_str::<serde_json::Value>(tool)
                .ok()
                .and_then(|t| t.get("name").and_then(|n| n.as_str()).map(str::to_owned))
                .is_some_and(|name| name == request.name)
        });
        if request.name != TRIGGER_TOOL_CHANGE || !listed {
            return Err(McpError::method_not_found::<CallToolRequestMethod>());
        }
        let now = shared.advance(TRIGGER_TOOL_CHANGE);
        Ok(CallToolResult::success(vec![ContentBlock::text(format!("phase {now}"))]).into())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        tracing::info!("client initialized");
        let mut peers = lock(&self.0.legacy_peers);
        peers.retain(|peer| !peer.is_transport_closed());
        peers.push(context.peer);
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // rmcp acknowledges the subscription before `listen` runs; a phase
        // change in between must not be lost, so remember the phase now.
        let phase = *self.0.phase.borrow();
        lock(&self.0.listen_baselines).push_back(phase);
        Some(requested.supported_by(&self.get_info().capabilities))
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        // Concurrent listens may pop each other's baselines; the worst case is
        // one extra `list_changed`, never a missed one.
        let baseline = lock(&self.0.listen_baselines).pop_front();
        if context.accepted().tools_list_changed != Some(true) {
            tokio::select! {
                () = context.cancelled() => {}
                () = self.0.closing.cancelled() => {}
            }
            return Ok(());
        }
        tracing::info!("subscriptions/listen: toolsListChanged");
        let mut phase = self.0.phase.subscribe();
        let current = *phase.borrow_and_update();
        if baseline.is_some_and(|baseline| baseline != current)
            && context.sink().notify_tool_list_changed().await.is_err()
        {
            return Ok(());
        }
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                () = self.0.closing.cancelled() => return Ok(()),
                changed = phase.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    phase.borrow_and_update();
                    if let Err(error) = context.sink().notify_tool_list_changed().await {
                        tracing::info!(%error, "subscription closed");
                        return Ok(());
                    }
                }
            }
        }
    }
}

/// Announces every phase change to the peers of the `initialize` era.
async fn notify_legacy_peers(shared: Arc<Shared>) {
    let mut phase = shared.phase.subscribe();
    while phase.changed().await.is_ok() {
        phase.borrow_and_update();
        let peers = {
            let mut peers = lock(&shared.legacy_peers);
            peers.retain(|peer| !peer.is_transport_closed());
            peers.clone()
        };
        for peer in peers {
            if shared.ping_before_list_changed {
                let ping = ServerRequest::PingRequest(PingRequest {
                    method: PingRequestMethod,
                    extensions: Extensions::default(),
                });
                match tokio::time::timeout(Duration::from_secs(5), peer.send_request(ping)).await {
                    Ok(Ok(_)) => tracing::info!("ping answered"),
                    Ok(Err(error)) => {
                        tracing::info!(%error, "ping failed; not announcing");
                        continue;
                    }
                    Err(_) => {
                        tracing::info!("ping unanswered after 5 s; not announcing");
                        continue;
                    }
                }
            }
            if let Err(error) = peer.notify_tool_list_changed().await {
                tracing::info!(%error, "could not send notifications/tools/list_changed");
            }
        }
    }
}

/// Advances the phase on every SIGUSR1.
async fn advance_on_sigusr1(shared: Arc<Shared>, mut usr1: Signal) {
    while usr1.recv().await.is_some() {
        shared.advance("SIGUSR1");
    }
}

pub async fn run(
    options: Options,
    transport: Transport,
    terminated: net::Terminated,
) -> anyhow::Result<()> {
    let (phase, _) = watch::channel(0);
    let shared = Arc::new(Shared {
        phases: Arc::new(options.phases),
        phase,
        list_calls: AtomicUsize::new(0),
        advance_after: options.advance_after,
        page_size: options.page_size,
        legacy_only: options.legacy_only,
        ping_before_list_changed: options.ping_before_list_changed,
        legacy_peers: Mutex::new(Vec::new()),
        closing: CancellationToken::new(),
        listen_baselines: Mutex::new(VecDeque::new()),
    });
    tracing::info!(phases = shared.phases.len(), "serving phase 0");
    tokio::spawn(notify_legacy_peers(shared.clone()));
    let usr1 = signal(SignalKind::user_defined1()).context("installing the SIGUSR1 handler")?;
    tokio::spawn(advance_on_sigusr1(shared.clone(), usr1));
    match transport {
        Transport::Stdio => serve_stdio(shared, terminated).await,
        Transport::Http(addr) => {
            serve_http(
                shared,
                addr,
                options.stateless,
                options.oauth_token_lifetime,
                terminated,
            )
            .await
        }
    }
}

/// Serves one session on stdin/stdout until stdin closes (or SIGTERM/SIGINT).
async fn serve_stdio(shared: Arc<Shared>, mut terminated: net::Terminated) -> anyhow::Result<()> {
    // rmcp writes into a pipe; `splice_lines` copies it to stdout line by line.
    let (rmcp_out, splice_in) = tokio::io::duplex(1 << 16);
    let splicer = tokio::spawn(splice_lines(shared.phases.clone(), splice_in));
    let stdin = SignalEof {
        inner: tokio::io::stdin(),
        eof: shared.closing.clone(),
    };
    let server = Server(shared);
    let served = tokio::select! {
        served = server.serve((stdin, rmcp_out)) => served,
        () = terminated.wait() => return Ok(()),
    };
    match served {
        Ok(running) => {
            tokio::select! {
                quit = running.waiting() => {
                    tracing::info!(?quit, "session ended");
                }
                () = terminated.wait() => {}
            }
        }
        Err(ServerInitializeError::ConnectionClosed(reason)) => {
            tracing::info!(%reason, "stdin closed before a session started");
        }
        Err(error) => return Err(error).context("starting the stdio session"),
    }
    match tokio::time::timeout(Duration::from_secs(5), splicer).await {
        Ok(joined) => joined.context("stdout task")?,
        Err(_) => {
            tracing::warn!("stdout did not drain within 5 s");
            Ok(())
        }
    }
}

/// A reader that cancels `eof` when `inner` reaches end of file.
struct SignalEof<R> {
    inner: R,
    eof: CancellationToken,
}

impl<R: AsyncRead + Unpin> AsyncRead for SignalEof<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(poll, Poll::Ready(Ok(())))
            && buf.filled().len() == before
            && buf.remaining() > 0
        {
            tracing::info!("stdin closed");
            self.eof.cancel();
        }
        poll
    }
}

/// Copies rmcp's newline-delimited output to stdout, splicing raw tools in.
async fn splice_lines(
    phases: Arc<Phases>,
    from_rmcp: tokio::io::DuplexStream,
) -> anyhow::Result<()> {
    let mut reader = BufReader::new(from_rmcp);
    let mut stdout = tokio::io::stdout();
    let mut line = Vec::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).await? == 0 {
            return Ok(());
        }
        let message = line.strip_suffix(b"\n").unwrap_or(&line);
        let spliced = splice::splice_message(&phases, message);
        stdout
            .write_all(spliced.as_deref().unwrap_or(message))
            .await
            .context("writing to stdout")?;
        stdout.write_all(b"\n").await.context("writing to stdout")?;
        stdout.flush().await.context("flushing stdout")?;
    }
}

/// The GET requests that resumed a stream, for the tests to check.
#[derive(Default)]
struct Resumes {
    inner: Mutex<ResumesInner>,
}

#[derive(Default)]
struct ResumesInner {
    /// When the streams were last closed.
    closed_at: Option<std::time::Instant>,
    /// Each resuming GET: its `Last-Event-ID` (if any) and how long after
    /// the close it came.
    seen: Vec<(Option<String>, Duration)>,
}

impl Resumes {
    fn report(&self) -> serde_json::Value {
        let inner = self.inner.lock().expect("resumes lock");
        let seen: Vec<_> = inner
            .seen
            .iter()
            .map(|(id, after)| {
                serde_json::json!({
                    "last_event_id": id,
                    "ms_after_close": after.as_millis() as u64,
                })
            })
            .collect();
        serde_json::json!({ "gets": seen })
    }
}

/// `POST /control/close-streams/N`: every session's GET stream is ended by
/// the server, announcing `retry: N` (ms) first, as a server behind a proxy
/// that cuts long requests does. The session and rmcp's cache of its events
/// stay, so a client that reconnects with `Last-Event-ID` is sent what it
/// missed.
async fn close_streams(
    sessions: Arc<LocalSessionManager>,
    resumes: Arc<Resumes>,
    retry_ms: u64,
) -> Json<serde_json::Value> {
    let retry = Duration::from_millis(retry_ms);
    let handles: Vec<_> = sessions.sessions.read().await.values().cloned().collect();
    let mut closed = 0;
    for handle in handles {
        if handle
            .close_standalone_sse_stream(Some(retry))
            .await
            .is_ok()
        {
            closed += 1;
        }
    }
    resumes.inner.lock().expect("resumes lock").closed_at = Some(std::time::Instant::now());
    tracing::info!(closed, "closed the GET streams");
    Json(serde_json::json!({ "closed": closed }))
}

/// Notes every GET on `/mcp` that comes after a close (the resumptions).
async fn note_resumption(
    axum::extract::State(resumes): axum::extract::State<Arc<Resumes>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    if request.method() == axum::http::Method::GET && request.uri().path() == "/mcp" {
        let mut inner = resumes.inner.lock().expect("resumes lock");
        if let Some(closed_at) = inner.closed_at {
            let id = request
                .headers()
                .get("last-event-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            inner.seen.push((id, closed_at.elapsed()));
        }
    }
    next.run(request).await
}

/// Serves Streamable HTTP at `/mcp`, `POST /control/advance`,
/// `POST /control/close-streams/N` and `GET /control/resumptions` until
/// SIGTERM or SIGINT.
async fn serve_http(
    shared: Arc<Shared>,
    addr: std::net::SocketAddr,
    stateless: bool,
    oauth_token_lifetime: Option<Duration>,
    mut terminated: net::Terminated,
) -> anyhow::Result<()> {
    let listener = net::bind_and_announce(addr).await?;
    let oauth = oauth_token_lifetime.map(|lifetime| {
        let base = format!("http://{}", listener.local_addr().expect("a bound address"));
        crate::oauth::OAuth::new(base, lifetime)
    });
    let shutdown = CancellationToken::new();
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(!stateless)
        .with_json_response(stateless)
        .with_cancellation_token(shutdown.child_token());
    let sessions = Arc::new(LocalSessionManager::default());
    let service = StreamableHttpService::new(
        {
            let shared = shared.clone();
            move || Ok(Server(shared.clone()))
        },
        sessions.clone(),
        config,
    );
    let phases = shared.phases.clone();
    let closing = shared.closing.clone();
    let resumes = Arc::new(Resumes::default());
    let mcp = Router::new().nest_service("/mcp", service);
    let mcp = match &oauth {
        Some(o) => mcp.layer(axum::middleware::from_fn({
            let o = o.clone();
            move |request, next| o.clone().guard(request, next)
        })),
        None => mcp,
    };
    let router = Router::new()
        .merge(mcp)
        .layer(axum::middleware::map_response(move |response| {
            splice::splice_response(phases.clone(), response)
        }))
        .layer(axum::middleware::from_fn_with_state(
            resumes.clone(),
            note_resumption,
        ))
        .route(
            "/control/advance",
            post(move || async move {
                let phase = shared.advance("POST /control/advance");
                Json(serde_json::json!({ "phase": phase }))
            }),
        )
        .route(
            "/control/close-streams/{retry_ms}",
            post({
                let resumes = resumes.clone();
                move |retry_ms: axum::extract::Path<u64>| {
                    close_streams(sessions.clone(), resumes.clone(), retry_ms.0)
                }
            }),
        )
        .route(
            "/control/resumptions",
            axum::routing::get(move || async move { Json(resumes.report()) }),
        );
    let router = match &oauth {
        Some(o) => router.merge(o.routes()),
        None => router,
    };
    let server = tokio::spawn(
        axum::serve(listener, router)
            .with_graceful_shutdown(shutdown.clone().cancelled_owned())
            .into_future(),
    );
    terminated.wait().await;
    closing.cancel();
    shutdown.cancel();
    match tokio::time::timeout(Duration::from_secs(3), server).await {
        Ok(joined) => joined.context("HTTP server task")?.context("serving HTTP"),
        Err(_) => {
            tracing::warn!("connections still open after 3 s; exiting anyway");
            Ok(())
        }
    }
}
