//! `plumbline-conformance-client URL`: Plumbline's MCP client (the
//! `plumbline-mcp` crate) as the official conformance suite
//! (`@modelcontextprotocol/conformance client --command …`) runs a client:
//! the suite starts a scenario server, appends its URL to the command and
//! names the scenario in `MCP_CONFORMANCE_SCENARIO`.
//!
//! Every scenario gets what Plumbline does: open a Streamable HTTP session
//! and list every tool. Scenarios that check how a client takes up a tool
//! call also get that call (`sse-retry`: the server ends the call's answer
//! stream, and the answer must be fetched with `Last-Event-ID` after the
//! announced `retry`). Exits 0 when every step worked, 1 naming the step
//! that failed.

use std::process::ExitCode;

use plumbline_mcp::{HttpSpec, Limits, ServerSpec, Session};
use serde_json::json;

fn main() -> ExitCode {
    let Some(url) = std::env::args().nth(1) else {
        eprintln!("usage: plumbline-conformance-client URL");
        return ExitCode::from(2);
    };
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    match runtime.block_on(run(&url, &scenario)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("plumbline-conformance-client: {scenario}: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(url: &str, scenario: &str) -> Result<(), String> {
    let spec = ServerSpec::Http(HttpSpec {
        url: url.to_owned(),
        headers: Vec::new(),
        auth: None,
    });
    let limits = Limits::default();
    let mut session = Session::open(&spec, &limits)
        .await
        .map_err(|e| format!("connecting: {e}"))?;
    let listing = session
        .list()
        .await
        .map_err(|e| format!("listing tools: {e}"))?;
    println!(
        "listed {} tools ({})",
        listing.tools.len(),
        listing.protocol_version
    );
    let call = match scenario {
        "sse-retry" => Some(("test_reconnection", json!({}))),
        "tools_call" => Some(("add_numbers", json!({"a": 5, "b": 3}))),
        _ => None,
    };
    if let Some((tool, arguments)) = call {
        let result = session
            .call_tool(tool, arguments)
            .await
            .map_err(|e| format!("calling {tool}: {e}"))?;
        println!("{tool}: {}", result.get());
    }
    session.close().await;
    Ok(())
}
