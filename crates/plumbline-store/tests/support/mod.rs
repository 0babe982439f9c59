//! Helpers shared by the integration tests and the `bytes_per_observation`
//! example: a realistic 50-tool listing and the storage measurement.

#![allow(dead_code)] // Each test binary uses a different subset.

use plumbline_store::prelude::*;
use std::path::Path;

use plumbline_store::{NewObservation, Outcome, RawTool, SqliteStore, StoreError};

/// 50 real tool objects, one per line (see `tests/data/README.md`).
const TOOLS_50: &str = include_str!("../data/tools-50.jsonl");

/// The 50 tools as a listing, each with the name its JSON carries.
pub fn fifty_tools() -> Vec<RawTool> {
    TOOLS_50
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| RawTool {
            name: tool_name(line.as_bytes()),
            raw: line.as_bytes().to_vec(),
            normalized: None,
        })
        .collect()
}

/// The `name` member of a tool, as the MCP client would read it.
pub fn tool_name(raw: &[u8]) -> Option<String> {
    let value = plumbline_base::json::parse_tool(raw).ok()?;
    value.get("name")?.as_str().map(str::to_owned)
}

/// A successful observation of `server` at `at_ms` listing `tools`.
pub fn ok_observation(server: &str, at_ms: i64, tools: Vec<RawTool>) -> NewObservation {
    NewObservation {
        server: server.to_owned(),
        started_at_ms: at_ms,
        finished_at_ms: at_ms + 187,
        outcome: Outcome::Ok,
        protocol_version: Some("2025-06-18".to_owned()),
        server_info: Some(br#"{"name":"example-server","version":"1.4.2"}"#.to_vec()),
        capabilities: Some(br#"{"tools":{"listChanged":true},"logging":{}}"#.to_vec()),
        instructions: Some("Use these tools to search the documentation.".to_owned()),
        authorization: None,
        tools,
        problems: Vec::new(),
    }
}

/// A failed observation of `server` at `at_ms`.
pub fn failed_observation(server: &str, at_ms: i64, error: &str) -> NewObservation {
    NewObservation {
        server: server.to_owned(),
        started_at_ms: at_ms,
        finished_at_ms: at_ms + 30_000,
        outcome: Outcome::Failed {
            error: error.to_owned(),
        },
        protocol_version: None,
        server_info: None,
        capabilities: None,
        instructions: None,
        authorization: None,
        tools: Vec::new(),
        problems: Vec::new(),
    }
}

/// What [`measure_unchanged_observations`] found.
#[derive(Debug)]
pub struct Measurement {
    pub observations: u64,
    /// The database file after the first observation (all content stored).
    pub bytes_after_first: u64,
    /// The database file after all observations.
    pub bytes_after_all: u64,
}

impl Measurement {
    /// Bytes the file grew by per observation after the first.
    pub fn bytes_per_observation(&self) -> f64 {
        let added = self.bytes_after_all.saturating_sub(self.bytes_after_first);
        added as f64 / (self.observations.saturating_sub(1)).max(1) as f64
    }
}

/// Records `observations` observations of one unchanged 50-tool server in
/// a new store under `dir` and measures the database file, with the
/// write-ahead log checkpointed into it before each measurement.
pub fn measure_unchanged_observations(
    dir: &Path,
    observations: u64,
) -> Result<Measurement, StoreError> {
    let path = dir.join("measure.db");
    let mut store = SqliteStore::open(&path)?;
    store.put_server(
        "docs",
        r#"{"transport":"stdio","command":"uvx","args":["example-docs-server"]}"#,
    )?;
    let tools = fifty_tools();
    let start_ms: i64 = 1_767_225_600_000;
    let mut observation = ok_observation("docs", start_ms, tools);
    store.record_observation(&observation)?;
    store.checkpoint()?;
    let bytes_after_first = file_len(&path);
    for i in 1..observations {
        // One observation a minute, each taking a slightly different time.
        let at = start_ms + i as i64 * 60_000;
        observation.started_at_ms = at;
        observation.finished_at_ms = at + 150 + (i as i64 % 97);
        store.record_observation(&observation)?;
    }
    store.checkpoint()?;
    Ok(Measurement {
        observations,
        bytes_after_first,
        bytes_after_all: file_len(&path),
    })
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}
