//! Puts the raw tool objects into `tools/list` results on their way out.
//!
//! `rmcp`'s typed `Tool` drops every field it does not know (`execution`,
//! vendor keys, unknown annotation or icon keys), so the handler never hands
//! tools to `rmcp` at all. Its `list_tools` returns an empty `tools` array and a
//! page reference under [`PAGE_KEY`] in the result's `_meta`; `rmcp` then does
//! all its protocol work on that result (era checks, `resultType`, cache
//! hints, framing), and this module, sitting between `rmcp` and the wire
//! (stdout lines, HTTP JSON bodies, SSE `data:` lines), removes the reference
//! and writes the page's tools as the raw JSON text from the phases file.

use std::sync::Arc;

use axum::{
    body::{Body, Bytes},
    http::header,
    response::Response,
};
use futures_util::StreamExt as _;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::phases::Phases;

/// The `_meta` key carrying a [`PageRef`] from the handler to the splicer.
/// It never reaches the wire.
pub const PAGE_KEY: &str = "dev.plumbline.test-server/raw-page";

/// Which tools a `tools/list` result holds: `phases.tools(phase)[start..end]`.
/// Phases never change once loaded, so the reference stays valid even if the
/// current phase moves on before the message is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageRef {
    pub phase: usize,
    pub start: usize,
    pub end: usize,
}

/// Rewrites one JSON-RPC message if it is a `tools/list` result carrying a
/// [`PageRef`]; `None` leaves the message as it is.
pub fn splice_message(phases: &Phases, message: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(message).ok()?;
    if !text.contains(PAGE_KEY) {
        return None;
    }
    let mut envelope: Map<String, Value> = serde_json::from_str(text).ok()?;
    let Value::Object(mut result) = envelope.remove("result")? else {
        return None;
    };
    let meta = result.get_mut("_meta")?.as_object_mut()?;
    let page: PageRef = serde_json::from_value(meta.remove(PAGE_KEY)?).ok()?;
    if meta.is_empty() {
        result.remove("_meta");
    }
    let tools = phases.tools(page.phase).get(page.start..page.end)?;
    result.remove("tools");
    let tools = format!("[{}]", tools.join(","));
    let result = object_with_raw_field(&result, "tools", &tools);
    Some(object_with_raw_field(&envelope, "result", &result).into_bytes())
}

/// `object` serialised with one more member whose value is already JSON text.
fn object_with_raw_field(object: &Map<String, Value>, key: &str, raw: &str) -> String {
    let mut text = Value::Object(object.clone()).to_string();
    text.pop(); // the closing brace
    if !object.is_empty() {
        text.push(',');
    }
    text.push_str(&Value::String(key.to_owned()).to_string());
    text.push(':');
    text.push_str(raw);
    text.push('}');
    text
}

/// Rewrites the `data:` lines of complete SSE lines (`bytes` ends in `\n`).
fn splice_sse_lines(phases: &Phases, bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    for line in bytes.split_inclusive(|b| *b == b'\n') {
        let (content, newline) = match line.strip_suffix(b"\n") {
            Some(content) => (content, &b"\n"[..]),
            None => (line, &b""[..]),
        };
        let spliced = content
            .strip_prefix(b"data:")
            .map(|data| data.strip_prefix(b" ").unwrap_or(data))
            .and_then(|data| splice_message(phases, data));
        match spliced {
            Some(message) => {
                out.extend_from_slice(b"data: ");
                out.extend_from_slice(&message);
                out.extend_from_slice(newline);
            }
            None => out.extend_from_slice(line),
        }
    }
    out
}

/// An SSE body with every `tools/list` result spliced, streamed line by line
/// so long-lived notification streams pass through as they come.
fn splice_sse_body(phases: Arc<Phases>, body: Body) -> Body {
    let state = (body.into_data_stream(), Vec::<u8>::new(), false);
    let stream = futures_util::stream::unfold(state, move |(mut inner, mut buf, mut done)| {
        let phases = phases.clone();
        async move {
            loop {
                if let Some(last_newline) = buf.iter().rposition(|b| *b == b'\n') {
                    let rest = buf.split_off(last_newline + 1);
                    let complete = std::mem::replace(&mut buf, rest);
                    let out = Bytes::from(splice_sse_lines(&phases, &complete));
                    return Some((Ok(out), (inner, buf, done)));
                }
                if done {
                    if buf.is_empty() {
                        return None;
                    }
                    let out = Bytes::from(std::mem::take(&mut buf));
                    return Some((Ok(out), (inner, buf, done)));
                }
                match inner.next().await {
                    Some(Ok(chunk)) => buf.extend_from_slice(&chunk),
                    Some(Err(error)) => return Some((Err(error), (inner, buf, true))),
                    None => done = true,
                }
            }
        }
    });
    Body::from_stream(stream)
}

/// Splices an HTTP response from `rmcp`'s Streamable HTTP service.
pub async fn splice_response(phases: Arc<Phases>, response: Response) -> Response {
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let (mut parts, body) = response.into_parts();
    if content_type.starts_with("text/event-stream") {
        parts.headers.remove(header::CONTENT_LENGTH);
        Response::from_parts(parts, splice_sse_body(phases, body))
    } else if content_type.starts_with("application/json") {
        // One message of our own making: small enough to hold.
        let bytes = match axum::body::to_bytes(body, 256 << 20).await {
            Ok(bytes) => bytes,
            Err(error) => {
                tracing::error!(%error, "reading a JSON response body to splice");
                return Response::from_parts(parts, Body::empty());
            }
        };
        match splice_message(&phases, &bytes) {
            Some(spliced) => {
                parts.headers.remove(header::CONTENT_LENGTH);
                Response::from_parts(parts, Body::from(spliced))
            }
            None => Response::from_parts(parts, Body::from(bytes)),
        }
    } else {
        Response::from_parts(parts, body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phases() -> Phases {
        Phases::parse(r#"[[{"name":"b","x-vendor":1.0},{"name":"a","execution":{"taskSupport":"required"}}]]"#)
            .expect("valid phases")
    }

    fn message(page: PageRef, extra_meta: Option<(&str, Value)>) -> Vec<u8> {
        let mut meta = Map::new();
        meta.insert(
            PAGE_KEY.to_owned(),
            serde_json::to_value(page).expect("page"),
        );
        if let Some((key, value)) = extra_meta {
            meta.insert(key.to_owned(), value);
        }
        serde_json::to_vec(&serde_json::json!({
            "jsonrpc": "2.0", "id": 7,
            "result": {"tools": [], "nextCursor": "1", "_meta": meta}
        }))
        .expect("serialise")
    }

    #[test]
    fn splices_raw_tools_and_drops_the_page_reference() {
        let page = PageRef {
            phase: 0,
            start: 0,
            end: 2,
        };
        let out = splice_message(&phases(), &message(page, None)).expect("spliced");
        let text = String::from_utf8(out).expect("utf-8");
        assert!(text.contains(
            r#""tools":[{"name":"b","x-vendor":1.0},{"name":"a","execution":{"taskSupport":"required"}}]"#
        ));
        let value: Value = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(value["id"], 7);
        assert_eq!(value["result"]["nextCursor"], "1");
        assert!(value["result"].get("_meta").is_none());
    }

    #[test]
    fn other_meta_keys_survive() {
        let page = PageRef {
            phase: 0,
            start: 1,
            end: 2,
        };
        let out = splice_message(&phases(), &message(page, Some(("k", Value::Bool(true)))))
            .expect("spliced");
        let value: Value = serde_json::from_slice(&out).expect("valid JSON");
        assert_eq!(value["result"]["_meta"], serde_json::json!({"k": true}));
        assert_eq!(value["result"]["tools"][0]["name"], "a");
    }

    #[test]
    fn other_messages_are_left_alone() {
        assert!(splice_message(&phases(), br#"{"jsonrpc":"2.0","id":1,"result":{}}"#).is_none());
        let bad_page = PageRef {
            phase: 3,
            start: 0,
            end: 1,
        };
        assert!(splice_message(&phases(), &message(bad_page, None)).is_none());
    }

    #[test]
    fn sse_data_lines_are_spliced_and_other_lines_kept() {
        let page = PageRef {
            phase: 0,
            start: 0,
            end: 1,
        };
        let mut event = b"id: 0\nevent: message\ndata: ".to_vec();
        event.extend_from_slice(&message(page, None));
        event.extend_from_slice(b"\n\n:\n\n");
        let out = String::from_utf8(splice_sse_lines(&phases(), &event)).expect("utf-8");
        assert!(out.starts_with("id: 0\nevent: message\ndata: {"));
        assert!(out.ends_with("}\n\n:\n\n"));
        assert!(out.contains(r#""tools":[{"name":"b","x-vendor":1.0}]"#));
    }
}
