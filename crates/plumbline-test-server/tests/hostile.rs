//! The scripted hostile modes, each checked on the wire with bounded waits.

mod common;

use std::{collections::HashSet, time::Duration};

use common::{initialize_params, read_response, tool_names, HttpServer, StdioServer, STEP};
use serde_json::{json, Value};
use tokio::io::AsyncReadExt as _;

async fn hostile(kind: &str) -> StdioServer {
    let mut server = StdioServer::spawn(&["--hostile", kind]);
    let init = server.initialize().await;
    assert_eq!(
        init["serverInfo"]["name"], "plumbline-test-server",
        "{kind}"
    );
    server
}

/// Sends `tools/list` and returns the raw reply line.
async fn list_raw(server: &mut StdioServer, id: u64, params: Value) -> Vec<u8> {
    server.send_request(id, "tools/list", params).await;
    server.read_line().await
}

#[tokio::test]
async fn never_answers_reads_but_never_replies() {
    let mut server = StdioServer::spawn(&["--hostile", "never-answers"]);
    server
        .send_request(1, "initialize", initialize_params())
        .await;
    assert!(server
        .read_line_within(Duration::from_millis(500))
        .await
        .is_none());
    server.close_stdin();
    assert!(server.wait_exit().await.success());
}

#[tokio::test]
async fn slow_answers_tools_list_a_byte_at_a_time() {
    let mut server = hostile("slow").await;
    server.send_request(2, "tools/list", json!({})).await;
    let mut received = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_millis(2_500);
    let mut buf = [0_u8; 256];
    while let Ok(read) = tokio::time::timeout_at(deadline, server.stdout.read(&mut buf)).await {
        let read = read.expect("read stdout");
        assert!(read > 0, "stdout closed");
        received.extend_from_slice(&buf[..read]);
    }
    assert!(!received.is_empty(), "the first byte comes at once");
    assert!(received.len() <= 5, "{} bytes in 2.5 s", received.len());
    assert!(br#"{"jsonrpc""#.starts_with(&received), "{received:?}");
}

#[tokio::test]
async fn huge_reply_streams_over_100_mb_without_holding_it() {
    let mut server = hostile("huge-reply").await;
    let pid = server.child.id().expect("pid");
    server.send_request(2, "tools/list", json!({})).await;
    let mut total = 0_usize;
    let mut head = Vec::new();
    let mut buf = vec![0_u8; 1 << 16];
    let read_all = async {
        loop {
            let read = server.stdout.read(&mut buf).await.expect("read stdout");
            assert!(read > 0, "stdout closed mid-reply");
            let wanted = 128_usize.saturating_sub(head.len()).min(read);
            head.extend_from_slice(&buf[..wanted]);
            total += read;
            if buf[..read].ends_with(b"\n") {
                break;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), read_all)
        .await
        .expect("the whole reply within 30 s");
    assert!(total > 100_000_000, "{total} bytes");
    assert!(
        head.starts_with(br#"{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"huge_tool_000""#),
        "{}",
        String::from_utf8_lossy(&head)
    );
    let peak = common::peak_rss_bytes(pid);
    assert!(peak < 64 << 20, "the server peaked at {peak} bytes");
}

#[tokio::test]
async fn many_tools_sends_100_000_tools_in_one_reply() {
    let mut server = hostile("many-tools").await;
    let line = list_raw(&mut server, 2, json!({})).await;
    let reply: Value = serde_json::from_slice(&line).expect("valid JSON");
    let names = tool_names(&reply["result"]);
    assert_eq!(names.len(), 100_000);
    assert_eq!(names.iter().collect::<HashSet<_>>().len(), 100_000);
}

#[tokio::test]
async fn looping_cursor_repeats_the_same_cursor() {
    let mut server = hostile("looping-cursor").await;
    let mut params = json!({});
    let mut seen = Vec::new();
    for id in 2..7 {
        let page = server.call(id, "tools/list", params).await;
        let cursor = page["nextCursor"].as_str().expect("a cursor").to_owned();
        params = json!({ "cursor": cursor });
        seen.push(cursor);
    }
    assert!(seen.iter().all(|cursor| *cursor == seen[0]), "{seen:?}");
}

#[tokio::test]
async fn endless_pages_give_a_new_cursor_every_page() {
    let mut server = hostile("endless-pages").await;
    let mut params = json!({});
    let mut seen = HashSet::new();
    for id in 2..52 {
        let page = server.call(id, "tools/list", params).await;
        assert_eq!(tool_names(&page).len(), 1);
        let cursor = page["nextCursor"].as_str().expect("a cursor").to_owned();
        assert!(seen.insert(cursor.clone()), "cursor {cursor} repeated");
        params = json!({ "cursor": cursor });
    }
}

#[tokio::test]
async fn duplicate_names_lists_two_tools_with_one_name() {
    let mut server = hostile("duplicate-names").await;
    let result = server.call(2, "tools/list", json!({})).await;
    let names = tool_names(&result);
    assert_eq!(
        names.iter().filter(|n| *n == "search").count(),
        2,
        "{names:?}"
    );
}

#[tokio::test]
async fn invalid_json_reply_is_not_json_and_the_server_lives_on() {
    let mut server = hostile("invalid-json").await;
    let line = list_raw(&mut server, 2, json!({})).await;
    assert!(!line.is_empty());
    assert!(serde_json::from_slice::<Value>(&line).is_err());
    let pong = server.call(3, "ping", json!({})).await;
    assert_eq!(pong, json!({}));
}

#[tokio::test]
async fn non_object_tool_sits_beside_valid_tools() {
    let mut server = hostile("non-object-tool").await;
    let result = server.call(2, "tools/list", json!({})).await;
    let tools = result["tools"].as_array().expect("tools array");
    assert!(tools.iter().any(Value::is_string));
    assert!(tools.iter().any(Value::is_number));
    assert!(tools.iter().filter(|t| t.is_object()).count() >= 2);
}

#[tokio::test]
async fn escapes_put_terminal_and_bidi_controls_in_descriptions() {
    let mut server = hostile("escapes").await;
    let line = list_raw(&mut server, 2, json!({})).await;
    let text = String::from_utf8(line).expect("utf-8");
    assert!(
        text.contains('\u{202e}') && text.contains('\u{200b}'),
        "raw on the wire"
    );
    let reply: Value = serde_json::from_str(&text).expect("valid JSON");
    let descriptions: String = reply["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|tool| tool["description"].as_str())
        .collect();
    for needle in [
        "\u{1b}[2J",
        "\u{1b}]8;;",
        "\u{1b}]0;",
        "\u{7}",
        "\u{202e}",
        "\u{200b}",
    ] {
        assert!(
            descriptions.contains(needle),
            "{needle:?} in {descriptions:?}"
        );
    }
}

#[tokio::test]
async fn crash_after_initialize_answers_then_exits_3() {
    let mut server = StdioServer::spawn_with_stderr(&["--hostile", "crash-after-initialize"], true);
    let init = server.call(1, "initialize", initialize_params()).await;
    assert_eq!(init["protocolVersion"], "2025-11-25");
    let status = server.wait_exit().await;
    assert_eq!(status.code(), Some(3));
    let stderr = server.stderr_text().await;
    assert!(stderr.contains("crashing after initialize"), "{stderr}");
}

#[tokio::test]
async fn stderr_flood_writes_megabytes_while_answering() {
    let mut server = StdioServer::spawn_with_stderr(&["--hostile", "stderr-flood"], true);
    let mut stderr = server.stderr.take().expect("stderr");
    let drained = tokio::spawn(async move {
        let mut total = 0_usize;
        let mut buf = vec![0_u8; 1 << 16];
        loop {
            match stderr.read(&mut buf).await {
                Ok(0) | Err(_) => return total,
                Ok(read) => total += read,
            }
            if total >= 4 << 20 {
                return total;
            }
        }
    });
    server.initialize().await;
    let result = server.call(2, "tools/list", json!({})).await;
    assert_eq!(tool_names(&result), ["get_time", "echo"]);
    let total = tokio::time::timeout(STEP, drained)
        .await
        .expect("4 MiB of stderr within the step timeout")
        .expect("drain task");
    assert!(total >= 4 << 20, "{total} bytes");
}

#[tokio::test]
async fn hostile_servers_answer_discover_like_legacy_servers() {
    let mut server = StdioServer::spawn(&["--hostile", "duplicate-names"]);
    let reply = server
        .request(1, "server/discover", json!({"_meta": common::meta_2026()}))
        .await;
    assert_eq!(reply["error"]["code"], -32601, "{reply}");
}

async fn http_initialize(server: &HttpServer) {
    let init =
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize_params()});
    let response = server.send(&init, &[]).await;
    assert_eq!(response.status(), 200);
    assert!(response.headers().get("mcp-session-id").is_some());
    let init = read_response(response, 1).await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(server.send(&initialized, &[]).await.status(), 202);
}

#[tokio::test]
async fn http_hostile_answers_as_json_or_sse() {
    for reply_as in ["json", "sse"] {
        let server =
            HttpServer::spawn(&["--hostile", "duplicate-names", "--reply-as", reply_as]).await;
        http_initialize(&server).await;
        let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}});
        let response = server.send(&list, &[]).await;
        let content_type = response.headers()["content-type"]
            .to_str()
            .expect("ascii")
            .to_owned();
        let expected = if reply_as == "json" {
            "application/json"
        } else {
            "text/event-stream"
        };
        assert_eq!(content_type, expected);
        let names = tool_names(&read_response(response, 2).await["result"]);
        assert_eq!(
            names.iter().filter(|n| *n == "search").count(),
            2,
            "{reply_as}"
        );
    }
}

#[tokio::test]
async fn http_invalid_json_body_is_not_json() {
    let server = HttpServer::spawn(&["--hostile", "invalid-json"]).await;
    http_initialize(&server).await;
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}});
    let body = server.send(&list, &[]).await.bytes().await.expect("body");
    assert!(serde_json::from_slice::<Value>(&body).is_err());
}

#[tokio::test]
async fn http_never_answers_holds_the_request() {
    let server = HttpServer::spawn(&["--hostile", "never-answers"]).await;
    let init =
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize_params()});
    let outcome =
        tokio::time::timeout(Duration::from_millis(500), server.post(&init, &[]).send()).await;
    assert!(outcome.is_err(), "no answer expected: {outcome:?}");
}

#[tokio::test]
async fn http_huge_reply_streams_without_holding_it() {
    let server = HttpServer::spawn(&["--hostile", "huge-reply", "--reply-as", "sse"]).await;
    http_initialize(&server).await;
    let pid = server.child.id().expect("pid");
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}});
    let mut response = server.send(&list, &[]).await;
    let mut received = Vec::new();
    while received.len() < 8 << 20 {
        let chunk = tokio::time::timeout(STEP, response.chunk())
            .await
            .expect("a chunk within the step timeout")
            .expect("chunk")
            .expect("the body goes on");
        if received.len() < 64 {
            received.extend_from_slice(&chunk);
        } else {
            received.resize(received.len() + chunk.len(), 0);
        }
    }
    assert!(received.starts_with(b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,"));
    drop(response);
    let peak = common::peak_rss_bytes(pid);
    assert!(peak < 64 << 20, "the server peaked at {peak} bytes");
}

#[tokio::test]
async fn http_slow_drips_the_listing() {
    let server = HttpServer::spawn(&["--hostile", "slow"]).await;
    http_initialize(&server).await;
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}});
    let mut response = server.send(&list, &[]).await;
    let mut received = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_millis(2_500);
    while let Ok(chunk) = tokio::time::timeout_at(deadline, response.chunk()).await {
        received.extend_from_slice(&chunk.expect("chunk").expect("the body goes on"));
    }
    assert!(!received.is_empty() && received.len() <= 5, "{received:?}");
}

#[tokio::test]
async fn http_crash_after_initialize_answers_then_exits_3() {
    let mut server = HttpServer::spawn(&["--hostile", "crash-after-initialize"]).await;
    let init =
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize_params()});
    let reply = read_response(server.send(&init, &[]).await, 1).await;
    assert_eq!(reply["result"]["protocolVersion"], "2025-11-25");
    let status = tokio::time::timeout(STEP, server.child.wait())
        .await
        .expect("exit within the step timeout")
        .expect("wait");
    assert_eq!(status.code(), Some(3));
}
