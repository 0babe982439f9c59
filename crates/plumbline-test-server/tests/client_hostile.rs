//! Plumbline's MCP client (`plumbline-mcp`) against this crate's servers:
//! the well-behaved rmcp server in both protocol eras, and every hostile
//! mode, each of which must end within its limits with a clear error.

use std::time::{Duration, Instant};

use plumbline_mcp::{
    list_tools, Era, HttpSpec, Limits, ListError, ListingProblem, ServerSpec, StdioSpec,
};

const BIN: &str = env!("CARGO_BIN_EXE_plumbline-test-server");

fn stdio(args: &[&str]) -> ServerSpec {
    ServerSpec::Stdio(StdioSpec {
        command: BIN.into(),
        args: args.iter().map(|a| a.to_string()).collect(),
        ..StdioSpec::default()
    })
}

fn limits() -> Limits {
    Limits {
        discover_timeout: Duration::from_secs(2),
        initialize_timeout: Duration::from_secs(5),
        list_timeout: Duration::from_secs(5),
        max_message_bytes: 8 << 20,
        max_tools: 10_000,
        max_pages: 50,
        shutdown_grace: Duration::from_millis(500),
        ..Limits::default()
    }
}

async fn fails(spec: ServerSpec) -> (ListError, Duration) {
    let start = Instant::now();
    let result = list_tools(&spec, &limits()).await;
    let took = start.elapsed();
    match result {
        Ok(l) => panic!("{spec:?} listed {} tools, expected an error", l.tools.len()),
        Err(e) => (e, took),
    }
}

#[tokio::test]
async fn the_rmcp_server_is_listed_in_the_session_era() {
    let listing = list_tools(&stdio(&["--stdio", "--legacy-only"]), &limits())
        .await
        .expect("listing");
    assert_eq!(listing.era, Era::Session);
    assert_eq!(listing.tools.len(), 3);
    // Unknown fields (`execution`, vendor keys) survive byte for byte.
    let raw: String = listing
        .tools
        .iter()
        .map(|t| String::from_utf8_lossy(&t.raw).into_owned())
        .collect();
    assert!(
        raw.contains("\"execution\"") && raw.contains("\"x-"),
        "{raw}"
    );
}

#[tokio::test]
async fn the_rmcp_server_is_listed_in_the_stateless_era_over_stdio_and_http() {
    let listing = list_tools(&stdio(&["--stdio"]), &limits())
        .await
        .expect("stdio listing");
    assert_eq!(listing.era, Era::Stateless);
    assert_eq!(listing.protocol_version, "2026-07-28");
    assert_eq!(listing.tools.len(), 3);
    assert!(listing.server_info.is_some());

    let server = HttpServer::start(&[]).await;
    let listing = list_tools(&server.spec(), &limits())
        .await
        .expect("http listing");
    assert_eq!(listing.era, Era::Stateless);
    assert_eq!(listing.tools.len(), 3);
}

#[tokio::test]
async fn pages_are_followed() {
    let listing = list_tools(&stdio(&["--stdio", "--page-size", "1"]), &limits())
        .await
        .expect("listing");
    assert_eq!((listing.pages, listing.tools.len()), (3, 3));
}

#[tokio::test]
async fn never_answers_times_out() {
    let (e, took) = fails(stdio(&["--stdio", "--hostile", "never-answers"])).await;
    assert!(e.to_string().contains("initialize timed out"), "{e}");
    assert!(took < Duration::from_secs(20), "{took:?}");
}

#[tokio::test]
async fn a_slow_reply_times_out() {
    let (e, _) = fails(stdio(&["--stdio", "--hostile", "slow"])).await;
    assert!(e.to_string().contains("tools/list timed out"), "{e}");
}

#[tokio::test]
async fn a_huge_reply_is_refused_at_the_message_limit() {
    let (e, _) = fails(stdio(&["--stdio", "--hostile", "huge-reply"])).await;
    assert!(e.to_string().contains("exceeded 8388608 bytes"), "{e}");
}

#[tokio::test]
async fn too_many_tools_are_refused() {
    let (e, _) = fails(stdio(&["--stdio", "--hostile", "many-tools"])).await;
    assert!(
        e.to_string().contains("more than 10000 tools") || e.to_string().contains("exceeded"),
        "{e}"
    );
}

#[tokio::test]
async fn a_looping_cursor_ends_the_listing() {
    let (e, _) = fails(stdio(&["--stdio", "--hostile", "looping-cursor"])).await;
    assert!(e.to_string().contains("repeated the cursor"), "{e}");
}

#[tokio::test]
async fn endless_pages_end_at_the_page_limit() {
    let (e, _) = fails(stdio(&["--stdio", "--hostile", "endless-pages"])).await;
    assert!(e.to_string().contains("past 50 pages"), "{e}");
}

#[tokio::test]
async fn invalid_json_is_a_clear_error() {
    let (e, _) = fails(stdio(&["--stdio", "--hostile", "invalid-json"])).await;
    assert!(
        e.to_string()
            .contains("tools/list: the server sent something that is not JSON-RPC"),
        "{e}"
    );
}

#[tokio::test]
async fn a_crash_reports_the_exit_status_and_stderr() {
    let (e, _) = fails(stdio(&["--stdio", "--hostile", "crash-after-initialize"])).await;
    let text = e.to_string();
    assert!(text.contains("exit status: 3"), "{text}");
    assert!(e.stderr_tail.is_some(), "{text}");
}

#[tokio::test]
async fn duplicate_names_are_kept_and_reported() {
    let l = list_tools(
        &stdio(&["--stdio", "--hostile", "duplicate-names"]),
        &limits(),
    )
    .await
    .expect("listing");
    assert!(
        l.problems.iter().any(
            |p| matches!(p, ListingProblem::DuplicateName { positions, .. } if positions.len() == 2)
        ),
        "{:?}",
        l.problems
    );
}

#[tokio::test]
async fn non_object_tools_are_reported_and_the_rest_kept() {
    let l = list_tools(
        &stdio(&["--stdio", "--hostile", "non-object-tool"]),
        &limits(),
    )
    .await
    .expect("listing");
    let malformed = l
        .problems
        .iter()
        .filter(|p| matches!(p, ListingProblem::MalformedTool { .. }))
        .count();
    assert_eq!(malformed, 2, "{:?}", l.problems);
    assert!(l.tools.iter().filter(|t| t.name.is_some()).count() >= 1);
    assert_eq!(
        l.tools.len(),
        malformed + l.tools.iter().filter(|t| t.name.is_some()).count()
    );
}

#[tokio::test]
async fn escape_sequences_are_kept_raw_in_the_listing() {
    let l = list_tools(&stdio(&["--stdio", "--hostile", "escapes"]), &limits())
        .await
        .expect("listing");
    // Kept exactly as sent (as JSON escapes or raw): sanitising is the
    // renderer's job, never the store's.
    let all: String = l
        .tools
        .iter()
        .map(|t| String::from_utf8_lossy(&t.raw).into_owned())
        .collect();
    assert!(all.contains("\\u001b") || all.contains('\u{1b}'), "{all}");
}

#[tokio::test]
async fn a_stderr_flood_does_not_stop_the_listing() {
    let l = list_tools(&stdio(&["--stdio", "--hostile", "stderr-flood"]), &limits())
        .await
        .expect("listing");
    assert!(!l.tools.is_empty());
}

#[tokio::test]
async fn hostile_http_servers_fail_alone_and_clearly() {
    for (kind, want) in [
        ("never-answers", "timed out"),
        ("invalid-json", "not JSON-RPC"),
        ("looping-cursor", "repeated the cursor"),
        ("huge-reply", "exceeded"),
    ] {
        let server = HttpServer::start(&["--hostile", kind]).await;
        let start = Instant::now();
        let e = list_tools(&server.spec(), &limits())
            .await
            .err()
            .unwrap_or_else(|| panic!("{kind} listed"));
        assert!(e.to_string().contains(want), "{kind}: {e}");
        assert!(start.elapsed() < Duration::from_secs(30), "{kind}");
    }
}

/// The test server on a free 127.0.0.1 port, killed on drop.
struct HttpServer {
    child: tokio::process::Child,
    url: String,
}

impl HttpServer {
    async fn start(extra: &[&str]) -> HttpServer {
        use tokio::io::AsyncBufReadExt;
        let mut child = tokio::process::Command::new(BIN)
            .args(["--http", "127.0.0.1:0"])
            .args(extra)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("server starts");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let first = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .expect("server prints its address")
            .expect("read")
            .expect("a line");
        let url = first
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
            .to_owned();
        HttpServer { child, url }
    }

    fn spec(&self) -> ServerSpec {
        let _ = &self.child;
        ServerSpec::Http(HttpSpec {
            url: self.url.clone(),
            headers: Vec::new(),
            auth: None,
        })
    }
}

/// A server that starts after the probe's time is up: the probe decided
/// nothing, so each era must still be reached, at any concurrency.
fn slow_start(args: &[&str]) -> ServerSpec {
    let mut all = vec!["--stdio", "--start-delay-ms", "1200"];
    all.extend_from_slice(args);
    stdio(&all)
}

fn short_probe() -> Limits {
    Limits {
        discover_timeout: Duration::from_millis(300),
        ..limits()
    }
}

#[tokio::test]
async fn a_slow_start_never_poisons_the_handshake_in_either_era() {
    let cases: [(&[&str], Era); 3] = [
        // Refuses `initialize` once it serves 2026-07-28: the late answer
        // to the probe (or a second probe) gives the era.
        (&["--hostile", "stateless-only"], Era::Stateless),
        // rmcp answers the late probe and accepts `initialize` too: the
        // handshake that succeeded is kept.
        (&[], Era::Session),
        // A 2025 server that is slow refuses the late probe.
        (&["--legacy-only"], Era::Session),
    ];
    for concurrency in [1, 6] {
        let runs =
            cases
                .iter()
                .cycle()
                .take(concurrency.max(cases.len()))
                .map(|(args, era)| async move {
                    let listing = list_tools(&slow_start(args), &short_probe())
                        .await
                        .unwrap_or_else(|e| panic!("{args:?} at concurrency {concurrency}: {e}"));
                    assert_eq!(listing.era, *era, "{args:?}");
                    assert!(!listing.tools.is_empty(), "{args:?}");
                });
        if concurrency == 1 {
            for run in runs {
                run.await;
            }
        } else {
            futures_util::future::join_all(runs).await;
        }
    }
}

#[tokio::test]
async fn a_stateless_only_server_is_listed_when_it_answers_in_time() {
    let listing = list_tools(
        &stdio(&["--stdio", "--hostile", "stateless-only"]),
        &limits(),
    )
    .await
    .expect("listing");
    assert_eq!(listing.era, Era::Stateless);
    assert_eq!(listing.protocol_version, "2026-07-28");
}

/// A server that ends its notification stream at once, every time, with
/// `retry: 0`: the session keeps resuming it, but each quick end doubles
/// the least wait (100 ms, 200 ms, 400 ms, …) instead of a busy loop.
#[tokio::test]
async fn a_stream_that_keeps_ending_is_resumed_with_growing_waits_not_a_busy_loop() {
    let server = HttpServer::start(&["--hostile", "flapping-stream"]).await;
    let mut session = plumbline_mcp::Session::open(&server.spec(), &limits())
        .await
        .expect("open");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let listing = session.list().await.expect("listing");
    let tool: serde_json::Value = serde_json::from_slice(&listing.tools[0].raw).expect("JSON");
    let gets: u64 = tool["description"]
        .as_str()
        .and_then(|d| d.strip_prefix("GET /mcp answered "))
        .and_then(|d| d.strip_suffix(" times"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{tool}"));
    // Opened, then resumed after 200, 600 and 1,400 ms: never more than a
    // handful in 1.5 s, however fast the machine.
    assert!((2..=6).contains(&gets), "{gets} GETs in 1.5 s");
    session.close().await;
}
