//! The dashboard's URLs, built in one place so that pages, redirects and
//! the JSON API agree. Server and tool names come from servers and may hold
//! anything, so each path segment is percent-encoded.

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

pub fn review(server: &str, id: ObservationId, tool: &str) -> String {
    format!("{}/review", change(server, id, tool))
}

pub fn tool(server: &str, tool: &str) -> String {
    format!("{}/tools/{}", self::server(server), tool_segment(tool))
}

pub fn rule(rule: RuleId) -> String {
    format!("/rules/{rule}")
}

/// `2026-12-02T14:03:59Z` for Unix milliseconds (proleptic Gregorian,
/// Howard Hinnant's days-to-civil algorithm; the CLI formats the same way).
pub fn utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
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
    fn known_instants() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_796_220_239_999), "2026-12-02T14:03:59Z");
        assert_eq!(utc(-1000), "1969-12-31T23:59:59Z");
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
