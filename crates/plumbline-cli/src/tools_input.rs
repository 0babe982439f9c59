//! Saved `tools/list` results, for pinning and checking without starting
//! servers (air-gapped CI, other scanners' exports): a file holding the
//! JSON-RPC result `{"tools": [...]}` (or a whole response with `result`),
//! or a bare array of tools; a directory holds one such file per server,
//! named `SERVER.json`.

use std::path::Path;

use anyhow::{bail, Context as _, Result};
use serde::Deserialize;
use serde_json::value::RawValue;

/// A listing's elements in order: (name, raw bytes); the name is `None`
/// for an element without a top-level string name
/// (`plumbline_base::json::tool_name`: found even where the taxonomy's
/// reader refuses the tool).
pub type RawListing = Vec<(Option<String>, Vec<u8>)>;

/// One server's saved tools, raw, in listing order.
pub struct SavedTools {
    pub server: String,
    pub tools: RawListing,
}

#[derive(Deserialize)]
struct ListResult<'a> {
    #[serde(borrow)]
    tools: Vec<&'a RawValue>,
}

#[derive(Deserialize)]
struct Response<'a> {
    #[serde(borrow)]
    result: ListResult<'a>,
}

/// The tools of a saved listing in any of the accepted shapes, raw. (Tried
/// one shape at a time: serde's untagged enums cannot carry raw values.)
fn raw_tools(text: &str) -> Result<Vec<&RawValue>, serde_json::Error> {
    serde_json::from_str::<Vec<&RawValue>>(text)
        .or_else(|_| serde_json::from_str::<ListResult<'_>>(text).map(|r| r.tools))
        .or_else(|_| serde_json::from_str::<Response<'_>>(text).map(|r| r.result.tools))
}

/// The largest saved listing read, in bytes: the client's default bound on
/// one message, twice over.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// Reads a saved listing of at most [`MAX_FILE_BYTES`] as UTF-8
/// ([`plumbline_config::read_file`]): a FIFO, a device (`/dev/zero` behind
/// a symlink), a directory or a `/proc` file is refused before anything
/// hangs, fills memory or is quoted.
pub fn read_bounded(path: &Path) -> Result<String> {
    plumbline_config::read_file(path, MAX_FILE_BYTES)
}

/// The tool names of a saved listing (any shape [`read`] accepts, or JSON
/// Lines with one tool per line), in order; elements without a string name
/// are skipped.
/// As (name, description): the string `name`s of the tools C1 reads, with
/// their string `description` if any.
pub fn read_listing_tools(path: &Path) -> Result<Vec<(String, Option<String>)>> {
    let text = read_bounded(path)?;
    let name_of = |bytes: &[u8]| {
        plumbline_taxonomy::json::parse_tool(bytes)
            .ok()
            .and_then(|v| {
                let name = v.get("name").and_then(|n| n.as_str()).map(str::to_owned)?;
                let description = v
                    .get("description")
                    .and_then(|d| d.as_str())
                    .map(str::to_owned);
                Some((name, description))
            })
    };
    if let Ok(raws) = raw_tools(&text) {
        return Ok(raws
            .iter()
            .filter_map(|r| name_of(r.get().as_bytes()))
            .collect());
    }
    let mut names = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let tool = plumbline_taxonomy::json::parse_tool(line.as_bytes()).map_err(|e| {
            anyhow::anyhow!(
                "{}: line {}: not a tools/list result, an array of tools, or JSON Lines of tools: {e}",
                path.display(),
                i + 1
            )
        })?;
        if let Some(name) = tool.get("name").and_then(|n| n.as_str()) {
            let description = tool.get("description").and_then(|d| d.as_str());
            names.push((name.to_owned(), description.map(str::to_owned)));
        }
    }
    Ok(names)
}

fn read_file(path: &Path, server: String) -> Result<SavedTools> {
    let text = read_bounded(path)?;
    let raws = raw_tools(&text).map_err(|e| {
        anyhow::anyhow!(
            "{}: not a tools/list result ({{\"tools\": [...]}}), a JSON-RPC response, or an array of tools: {e}",
            path.display()
        )
    })?;
    let tools = raws
        .into_iter()
        .map(|r| {
            let bytes = r.get().as_bytes().to_vec();
            (plumbline_taxonomy::json::tool_name(&bytes), bytes)
        })
        .collect();
    Ok(SavedTools { server, tools })
}

/// Reads `path`: a file (its stem names the server) or a directory of
/// `SERVER.json` files, in name order.
pub fn read(path: &Path) -> Result<Vec<SavedTools>> {
    if path.is_dir() {
        let mut files: Vec<_> = std::fs::read_dir(path)
            .with_context(|| format!("reading {}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        if files.is_empty() {
            bail!("{}: no SERVER.json files", path.display());
        }
        files.iter().map(|f| read_file(f, stem(f)?)).collect()
    } else {
        Ok(vec![read_file(path, stem(path)?)?])
    }
}

fn stem(path: &Path) -> Result<String> {
    path.file_stem()
        .and_then(|s| s.to_str())
        .map(str::to_owned)
        .with_context(|| format!("{}: cannot name a server after this file", path.display()))
}

/// Writes one server's listing as `{"tools": [...]}` with every tool's
/// bytes exactly as received.
pub fn save(dir: &Path, server: &str, tools: &[Vec<u8>]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut out = Vec::from(&b"{\"tools\":["[..]);
    for (i, t) in tools.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(b",\n");
        }
        out.extend_from_slice(t);
    }
    out.extend_from_slice(b"]}\n");
    let path = dir.join(format!("{server}.json"));
    std::fs::write(&path, out).with_context(|| format!("writing {}", path.display()))
}
