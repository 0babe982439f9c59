//! The dashboard's URLs, built in one place so that its pages, redirects
//! and JSON API, and the watcher's alert links, agree. Server and tool
//! names come from servers and may hold anything, so each path segment is
//! percent-encoded.

use plumbline_store::ObservationId;
use plumbline_taxonomy::RuleId;

/// `segment` percent-encoded for a URL path: RFC 3986 unreserved
/// characters stay, every other byte of its UTF-8 is `%XX`.
pub fn segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A tool name as one path segment. A browser resolves `.` and `..` as dot
/// segments and an empty name leaves no segment, so those names, and any
/// that starts with `~` (keeping the mapping reversible), travel with one
/// `~` in front; [`tool_name`] takes it off.
pub fn tool_segment(name: &str) -> String {
    if name.is_empty() || name == "." || name == ".." || name.starts_with('~') {
        segment(&format!("~{name}"))
    } else {
        segment(name)
    }
}

/// The tool name that a (percent-decoded) path segment stands for.
pub fn tool_name(segment: String) -> String {
    match segment.strip_prefix('~') {
        Some(rest) => rest.to_owned(),
        None => segment,
    }
}

pub fn server(server: &str) -> String {
    format!("/servers/{}", segment(server))
}

pub fn observation(server: &str, id: ObservationId) -> String {
    format!("{}/observations/{id}", self::server(server))
}

/// A change: one tool's drift at an observation.
pub fn change(server: &str, id: ObservationId, tool: &str) -> String {
    format!("{}/tools/{}", observation(server, id), tool_segment(tool))
}

/// The bytes a server sent for one tool in one observation, as a download.
pub fn raw(server: &str, id: ObservationId, tool: &str) -> String {
    format!("{}/raw", change(server, id, tool))
}

/// Reviewing every change of an observation at once.
pub fn review_all(server: &str, id: ObservationId) -> String {
    format!("{}/review", observation(server, id))
}

pub fn review(server: &str, id: ObservationId, tool: &str) -> String {
    format!("{}/review", change(server, id, tool))
}

pub fn tool(server: &str, tool: &str) -> String {
    format!("{}/tools/{}", self::server(server), tool_segment(tool))
}

pub fn rule(rule: RuleId) -> String {
    format!("/rules/{rule}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_percent_encoded() {
        assert_eq!(segment("read_file-2.v~x"), "read_file-2.v~x");
        assert_eq!(segment("a/b c?d#e%"), "a%2Fb%20c%3Fd%23e%25");
        assert_eq!(segment("é\u{200b}"), "%C3%A9%E2%80%8B");
        assert_eq!(
            change("my server", ObservationId(7), "x/y"),
            "/servers/my%20server/observations/7/tools/x%2Fy"
        );
    }

    #[test]
    fn every_tool_name_travels_as_one_segment_and_comes_back() {
        for name in ["", ".", "..", "~", "~.", "~~x", "read_file", "a/b", "..."] {
            let seg = tool_segment(name);
            assert!(
                !seg.is_empty() && seg != "." && seg != "..",
                "{name:?} -> {seg:?}"
            );
            assert!(!seg.contains('/'), "{name:?} -> {seg:?}");
            let decoded = percent_decode(&seg);
            assert_eq!(tool_name(decoded), name, "{seg:?}");
        }
    }

    fn percent_decode(s: &str) -> String {
        let b = s.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'%' {
                out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
                i += 3;
            } else {
                out.push(b[i]);
                i += 1;
            }
        }
        String::from_utf8(out).unwrap()
    }
}
