//! How the stdio transport treats processes that misbehave: every case
//! ends within its limits with an error naming what failed, and nothing
//! the server started is left running.

use std::time::Duration;

use plumbline_mcp::{list_tools, Limits, ServerSpec, StdioSpec};

fn sh(script: &str) -> ServerSpec {
    ServerSpec::Stdio(StdioSpec {
        command: "sh".into(),
        args: vec!["-c".into(), script.into()],
        ..StdioSpec::default()
    })
}

fn quick() -> Limits {
    Limits {
        discover_timeout: Duration::from_millis(200),
        initialize_timeout: Duration::from_millis(500),
        list_timeout: Duration::from_millis(500),
        shutdown_grace: Duration::from_millis(200),
        ..Limits::default()
    }
}

/// Whether `pid` is still a live (not zombie) process.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|s| s.split_whitespace().next());
            state != Some("Z")
        }
        Err(_) => false,
    }
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_and_its_whole_group_is_killed() {
    // The shell starts a grandchild and reports both pids on stderr.
    let spec = sh("sleep 1000 & echo \"pids $$ $!\" >&2; wait");
    let err = list_tools(&spec, &quick()).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("initialize timed out"), "{text}");
    let tail = err.stderr_tail.clone().expect("stderr kept");
    let pids: Vec<u32> = tail
        .split_whitespace()
        .skip_while(|w| *w != "pids")
        .skip(1)
        .take(2)
        .map(|p| p.parse().expect("pid"))
        .collect();
    assert_eq!(pids.len(), 2, "{tail}");
    // Give the kernel a moment to deliver SIGKILL to the group.
    for _ in 0..50 {
        if pids.iter().all(|p| !alive(*p)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("still running after the listing ended: {pids:?}");
}

#[tokio::test]
async fn a_server_that_exits_reports_its_status_and_stderr() {
    let err = list_tools(
        &sh("read line; echo 'fatal: no config' >&2; exit 3"),
        &quick(),
    )
    .await
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("the server exited (exit status: 3) before answering"),
        "{text}"
    );
    assert!(text.contains("fatal: no config"), "{text}");
}

#[tokio::test]
async fn output_that_is_never_json_rpc_fails_within_the_bound_with_an_excerpt() {
    // A few stray lines are skipped (and kept as problems); a server that
    // prints nothing else fails once past the bound, not at its timeout.
    let err = list_tools(
        &sh("read line; while :; do printf 'Server started\\033[31m!\\n'; done"),
        &quick(),
    )
    .await
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("more than 100 lines") && text.contains("not JSON-RPC"),
        "{text}"
    );
    // The excerpt is shown sanitised: the escape is not emitted raw.
    assert!(text.contains(r"Server started\u{1b}[31m!"), "{text}");
    assert!(!text.contains('\u{1b}'));
}

#[tokio::test]
async fn an_oversized_message_is_refused_without_reading_it_all() {
    let limits = Limits {
        max_message_bytes: 1 << 20,
        ..quick()
    };
    let err = list_tools(
        &sh("read line; head -c 50000000 /dev/zero | tr '\\0' a"),
        &limits,
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("exceeded 1048576 bytes"), "{err}");
}

#[tokio::test]
async fn a_flood_on_stderr_does_not_block_the_server_and_only_its_end_is_kept() {
    let limits = Limits {
        stderr_bytes: 1024,
        ..quick()
    };
    let err = list_tools(
        &sh("head -c 5000000 /dev/zero | tr '\\0' x >&2; echo END >&2; exit 1"),
        &limits,
    )
    .await
    .unwrap_err();
    let tail = err.stderr_tail.expect("stderr kept");
    assert!(
        tail.contains("earlier bytes not kept") && tail.trim_end().ends_with("END"),
        "{}",
        &tail[..80]
    );
    assert!(tail.len() < 2048);
}

#[tokio::test]
async fn stray_lines_between_messages_are_skipped_and_kept() {
    // A hand-written 2025 server that logs to stdout before every answer:
    // the probe (id 1) is refused, initialize (2) answered, the
    // initialized notification read, tools/list (3) answered.
    let script = r#"
        read line; echo 'log: probe'; echo '{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}'
        read line; echo 'log: initialize'; echo '{"jsonrpc":"2.0","id":2,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}}}}'
        read line; read line; echo '[otel] listing'; echo ''; echo '{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"a","inputSchema":{"type":"object"}}]}}'
        read line
    "#;
    let listing = list_tools(&sh(script), &quick()).await.expect("listing");
    assert_eq!(listing.tools.len(), 1);
    let skipped: Vec<String> = listing
        .problems
        .iter()
        .filter_map(|p| match p {
            plumbline_mcp::ListingProblem::SkippedOutput { excerpt } => Some(excerpt.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        skipped,
        ["log: probe", "log: initialize", "[otel] listing"],
        "{:?}",
        listing.problems
    );
}
