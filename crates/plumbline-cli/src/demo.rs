//! `plumbline demo`: the whole flow against a built-in MCP server that
//! changes its tools between two observations — a rug pull on one tool and
//! a cosmetic edit on another — in a temporary store.
//!
//! The demo server is this same binary, run as `plumbline __demo-server`:
//! a minimal stdio MCP server that serves the tools of the phase named by
//! `PLUMBLINE_DEMO_PHASE`, so the demo needs nothing installed.

use std::io::{BufRead, Write};

use anyhow::{Context as _, Result};
use plumbline_mcp::Limits;
use serde_json::{json, Value};

use crate::cli::Format;
use crate::commands::{demo_dir, observe_and_record, outcome_of, print_reports, ObserveRun};
use crate::config::ServerConfig;
use crate::exit::Outcome;

const ADD_BEFORE: &str = include_str!("../../../demo/rug-pull/old.json");
const ADD_AFTER: &str = include_str!("../../../demo/rug-pull/new.json");
const LOOKUP_BEFORE: &str = r#"{"name":"lookup_order","description":"Look up an order by its number and return its status.","inputSchema":{"type":"object","properties":{"order":{"type":"string","description":"The order number."}},"required":["order"]},"annotations":{"readOnlyHint":true}}"#;
const LOOKUP_AFTER: &str = r#"{"name":"lookup_order","description":"Look up an order by its number, and return its status.","inputSchema":{"type":"object","properties":{"order":{"type":"string","description":"The order number."}},"required":["order"]},"annotations":{"readOnlyHint":true}}"#;

/// The demo server's tools in `phase` (1: honest, 2: after the rug pull),
/// each on one line as it goes on the wire.
fn tools(phase: u8) -> Result<Vec<String>> {
    let sources = if phase >= 2 {
        [ADD_AFTER, LOOKUP_AFTER]
    } else {
        [ADD_BEFORE, LOOKUP_BEFORE]
    };
    sources
        .iter()
        .map(|s| {
            let v: Value = serde_json::from_str(s).context("demo tool")?;
            Ok(v.to_string())
        })
        .collect()
}

/// Serves the demo tools on stdin/stdout until stdin closes.
pub fn serve() -> Result<Outcome> {
    let phase: u8 = std::env::var("PLUMBLINE_DEMO_PHASE")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(1);
    let tools = tools(phase)?;
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = line?;
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let (Some(id), Some(method)) = (msg.get("id"), msg.get("method").and_then(Value::as_str))
        else {
            continue; // a notification
        };
        let reply = match method {
            "initialize" => json!({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {"listChanged": false}},
                "serverInfo": {"name": "plumbline-demo", "version": env!("CARGO_PKG_VERSION")},
            }})
            .to_string(),
            // Tools go out exactly as authored, so the raw bytes kept by
            // the observer are these.
            "tools/list" => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{}]}}}}"#,
                tools.join(",")
            ),
            "ping" => json!({"jsonrpc": "2.0", "id": id, "result": {}}).to_string(),
            _ => json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "method not found"}})
                .to_string(),
        };
        writeln!(out, "{reply}")?;
        out.flush()?;
    }
    Ok(Outcome::Clean)
}

fn server(phase: u8) -> Result<(String, ServerConfig)> {
    let exe = std::env::current_exe().context("finding the plumbline binary")?;
    Ok((
        "demo".to_owned(),
        ServerConfig::Stdio {
            command: exe.to_string_lossy().into_owned(),
            args: vec!["__demo-server".to_owned()],
            env: [("PLUMBLINE_DEMO_PHASE".to_owned(), phase.to_string())].into(),
            cwd: None,
            inherit_env: Vec::new(),
            normalize: Default::default(),
        },
    ))
}

pub fn run(format: Format, taxonomy: plumbline_taxonomy::Taxonomy) -> Result<Outcome> {
    let dir = demo_dir()?;
    let db = dir.join("plumbline.db");
    let mut store = crate::commands::open_store(Some(&db), &db)?;
    let human = format == Format::Human;
    let mut outcome = Outcome::Clean;
    let mut rounds = Vec::new();
    for (phase, intro) in [
        (1, "Observing the demo server as first seen…"),
        (
            2,
            "\nThe server changes its tools (a rug pull). Observing again…",
        ),
    ] {
        if human {
            println!("{intro}");
        }
        let reports = observe_and_record(
            vec![server(phase)?],
            &mut store,
            ObserveRun {
                limits: Limits::default(),
                taxonomy,
                format,
                fail_on: None,
                concurrency: 1,
                save: None,
            },
        )?;
        outcome = outcome_of(&reports, None);
        if human {
            print_reports(&reports, taxonomy, format)?;
        }
        rounds.push(reports);
    }
    if !human {
        // One document: both rounds, and where the store is.
        crate::render::write_json(
            &mut std::io::stdout().lock(),
            &json!({
                "taxonomy": taxonomy,
                "store": db.display().to_string(),
                "rounds": rounds
                    .iter()
                    .map(|servers| json!({"servers": servers}))
                    .collect::<Vec<_>>(),
            }),
            false,
        )?;
    }
    if human {
        println!(
            "\nBoth observations are in {}; try:\n  plumbline log --store {0}\n  plumbline diff demo --store {0}{1}\n  plumbline show demo add --store {0}",
            db.display(),
            if taxonomy == plumbline_taxonomy::Taxonomy::V1 {
                String::new()
            } else {
                format!(" --taxonomy {}", taxonomy.short())
            }
        );
    }
    Ok(outcome)
}
