//! A server's long history, recorded through the history as `plumbline
//! observe` records it: shared by the tests and the `synthetic_history`
//! example.

#![allow(dead_code)] // each user takes a part

use plumbline_history::{record, Grader, HistoryError, Observed};
use plumbline_store::{NewObservation, Outcome, RawTool, Store};

/// 50 real tool objects, one per line (the store's test data).
const TOOLS_50: &str = include_str!("../data/tools-50.jsonl");

/// The 50 tools, the first one's description carrying `revision`.
pub fn listing(revision: u64) -> Vec<RawTool> {
    TOOLS_50
        .lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, line)| {
            let line = if i == 0 {
                line.replacen(
                    "\"description\":\"",
                    &format!("\"description\":\"(revision {revision}) "),
                    1,
                )
            } else {
                line.to_owned()
            };
            let name = plumbline_base::json::parse_tool(line.as_bytes())
                .ok()
                .and_then(|v| v.get("name")?.as_str().map(str::to_owned));
            RawTool {
                name,
                raw: line.into_bytes(),
                normalized: None,
            }
        })
        .collect()
}

/// An observation of `server` listing `tools` at `at_ms`.
pub fn observed(server: &str, at_ms: i64, tools: Vec<RawTool>) -> Observed {
    Observed {
        lease: None,
        identity: format!(r#"{{"transport":"stdio","command":"{server}"}}"#),
        observation: NewObservation {
            server: server.to_owned(),
            started_at_ms: at_ms,
            finished_at_ms: at_ms + 150,
            outcome: Outcome::Ok,
            protocol_version: Some("2025-11-25".to_owned()),
            server_info: None,
            capabilities: None,
            instructions: None,
            authorization: None,
            tools,
            problems: Vec::new(),
        },
    }
}

/// `n` observations of `docs`, its tool set changing every `n / changes`.
pub fn long_history(
    store: &mut impl Store,
    grader: &Grader,
    n: u64,
    changes: u64,
) -> Result<(), HistoryError> {
    let every = (n / changes.max(1)).max(1);
    for i in 0..n {
        let at = 1_700_000_000_000 + i as i64 * 60_000;
        record(
            store,
            grader,
            vec![observed("docs", at, listing(i / every))],
        )?;
    }
    Ok(())
}
