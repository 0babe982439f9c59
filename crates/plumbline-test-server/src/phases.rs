//! The tool lists the well-behaved server moves through, kept as raw JSON text.
//!
//! A phase is the complete list of tools served at one time. Tools are stored
//! as the exact text of each object in the phases file, minus the whitespace
//! between tokens (stdio frames messages by newline), so key order, number
//! spelling, string escapes and unknown fields all reach the wire unchanged.

use std::path::Path;

use anyhow::{bail, Context as _};
use serde_json::value::RawValue;

/// Every phase's tools, as compact raw JSON text.
#[derive(Debug, Clone)]
pub struct Phases {
    phases: Vec<Vec<String>>,
}

impl Phases {
    /// Reads a phases file: a JSON array of phases, each an array of tools.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading phases file {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("phases file {}", path.display()))
    }

    /// Parses the text of a phases file.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let raw: Vec<Vec<Box<RawValue>>> = serde_json::from_str(text)
            .context("expected a JSON array of phases, each a JSON array of tool objects")?;
        if raw.is_empty() {
            bail!("there must be at least one phase");
        }
        let phases = raw
            .iter()
            .map(|tools| tools.iter().map(|tool| minify(tool.get())).collect())
            .collect();
        Ok(Self { phases })
    }

    /// One phase of three realistic tools, used without `--phases`.
    pub fn builtin() -> Self {
        Self::parse(BUILTIN).expect("the built-in phases are valid JSON")
    }

    /// How many phases there are (at least one).
    pub fn len(&self) -> usize {
        self.phases.len()
    }

    /// The tools of `phase`, each as compact raw JSON text.
    pub fn tools(&self, phase: usize) -> &[String] {
        self.phases.get(phase).map_or(&[], Vec::as_slice)
    }
}

/// Removes the whitespace between JSON tokens of valid JSON text, leaving the
/// contents of strings (and everything else) byte-for-byte as they were.
pub fn minify(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let mut in_string = false;
    let mut escaped = false;
    for c in json.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !matches!(c, ' ' | '\t' | '\n' | '\r') {
            out.push(c);
        }
    }
    out
}

/// Three tools shaped like real servers' tools, with fields `rmcp`'s typed
/// `Tool` would drop (`execution`, a vendor key, an unknown annotation).
const BUILTIN: &str = r#"[[
  {
    "name": "read_file",
    "title": "Read file",
    "description": "Read the complete contents of a file from the file system. Only works within allowed directories.",
    "inputSchema": {
      "type": "object",
      "properties": {
        "path": {"type": "string", "description": "Absolute path of the file"},
        "head": {"type": "integer", "minimum": 1, "description": "Return only the first N lines"}
      },
      "required": ["path"],
      "additionalProperties": false
    },
    "annotations": {"readOnlyHint": true, "openWorldHint": false}
  },
  {
    "name": "search_issues",
    "description": "Search issues and pull requests across repositories using the issue search syntax.",
    "inputSchema": {
      "$schema": "https://json-schema.org/draft/2020-12/schema",
      "type": "object",
      "properties": {
        "query": {"type": "string"},
        "perPage": {"type": "number", "minimum": 1, "maximum": 100, "default": 30}
      },
      "required": ["query"]
    },
    "outputSchema": {
      "type": "object",
      "properties": {"total": {"type": "integer"}, "items": {"type": "array", "items": {"type": "object"}}},
      "required": ["total", "items"]
    },
    "annotations": {"title": "Search issues", "readOnlyHint": true, "x-rate-limit": "30/min"},
    "execution": {"taskSupport": "optional"}
  },
  {
    "name": "send_message",
    "title": "Send message",
    "description": "Post a message to a channel. The message is visible to every member of the channel.",
    "inputSchema": {
      "type": "object",
      "properties": {
        "channel": {"type": "string", "pattern": "^[a-z0-9-]+$"},
        "text": {"type": "string", "maxLength": 4000}
      },
      "required": ["channel", "text"]
    },
    "annotations": {"readOnlyHint": false, "destructiveHint": false, "idempotentHint": false},
    "icons": [{"src": "https://example.com/icons/send.svg", "mimeType": "image/svg+xml", "sizes": ["any"], "theme": "light"}],
    "_meta": {"com.example/owner": "messaging-team"},
    "x-vendor-category": "communication"
  }
]]"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minify_keeps_strings_and_key_order() {
        let text = "{ \"b\" : 1.50 ,\n \"a\": \"x  \\\" y\\\\\" , \"c\" : [ 1 , { } ] }";
        assert_eq!(minify(text), r#"{"b":1.50,"a":"x  \" y\\","c":[1,{}]}"#);
    }

    #[test]
    fn builtin_has_one_phase_of_three_tools() {
        let phases = Phases::builtin();
        assert_eq!(phases.len(), 1);
        assert_eq!(phases.tools(0).len(), 3);
        for tool in phases.tools(0) {
            let value: serde_json::Value = serde_json::from_str(tool).expect("valid JSON");
            assert!(value["name"].is_string());
        }
    }

    #[test]
    fn phases_must_be_arrays_of_arrays() {
        assert!(Phases::parse("[]").is_err());
        assert!(Phases::parse("{}").is_err());
        assert!(Phases::parse("[{}]").is_err());
        assert!(Phases::parse("[[]]").is_ok());
        assert!(Phases::parse(r#"[[{"name":"a"}],[]]"#).is_ok());
    }
}
