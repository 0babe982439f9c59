//! The regular expressions of R03 and R05, in Go's RE2 dialect (C7).
//!
//! Go's `\b` is an ASCII word boundary and its `\d \s \w` are ASCII
//! classes, while `(?i)` folds case over all of Unicode (so under `(?i)`
//! the Kelvin sign U+212A matches `[a-z]`). The `regex` crate's `\b \d \s
//! \w` are Unicode-aware, so each pattern spells them out: `(?-u:\b)`,
//! `[0-9]`, `[\t\n\x0C\r ]`, `[0-9A-Za-z_]`, inside a pattern that is
//! otherwise in Unicode mode so that case folding still matches Go's.
//! Matches are leftmost-first and non-overlapping in both engines.

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

fn compile(pattern: &str) -> Regex {
    // The patterns are constants; a unit test compiles each one.
    Regex::new(pattern).unwrap_or_else(|e| panic!("taxonomy pattern {pattern:?}: {e}"))
}

/// R03 pattern 1: `(?i)\bhttps?://[^\s\"'<>]+`.
pub static URL: LazyLock<Regex> =
    LazyLock::new(|| compile(r#"(?i)(?-u:\b)https?://[^\t\n\x0C\r "'<>]+"#));

/// R03 pattern 2: `(^|[\s\"'=(])(/(?:[^\s\"']+))`; the match text is group 2.
pub static UNIX_PATH: LazyLock<Regex> =
    LazyLock::new(|| compile(r#"(^|[\t\n\x0C\r "'=(])(/[^\t\n\x0C\r "']+)"#));

/// R03 pattern 3: `(?i)\b[a-z]:\\[^\s\"']+`.
pub static WINDOWS_PATH: LazyLock<Regex> =
    LazyLock::new(|| compile(r#"(?i)(?-u:\b)[a-z]:\\[^\t\n\x0C\r "']+"#));

/// R03 pattern 4: an IPv4 literal between word boundaries.
pub static IPV4: LazyLock<Regex> = LazyLock::new(|| {
    compile(
        r"(?-u:\b)((?:25[0-5]|2[0-4][0-9]|[01]?[0-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|[01]?[0-9]?[0-9])){3})(?-u:\b)",
    )
});

/// R03 pattern 5: a domain-like name without a scheme.
pub static DOMAIN: LazyLock<Regex> = LazyLock::new(|| {
    compile(r"(?i)(?-u:\b)(?:[a-z0-9-]+\.)+(?:com|net|org|io|dev|ai|example|localhost)(?-u:\b)")
});

/// R05 pattern: a slash-separated `server/tool` token,
/// `(?i)\b([a-z][\w-]{2,})/([a-z][\w-]{2,})\b`.
pub static SERVER_TOOL: LazyLock<Regex> = LazyLock::new(|| {
    compile(r"(?i)(?-u:\b)([a-z][0-9A-Za-z_-]{2,})/([a-z][0-9A-Za-z_-]{2,})(?-u:\b)")
});

/// Which R03 pattern matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PatternKind {
    Url,
    UnixPath,
    WindowsPath,
    Ipv4,
    Domain,
}

impl PatternKind {
    pub fn describe(self) -> &'static str {
        match self {
            PatternKind::Url => "URL",
            PatternKind::UnixPath => "absolute Unix path",
            PatternKind::WindowsPath => "absolute Windows path",
            PatternKind::Ipv4 => "IPv4 address",
            PatternKind::Domain => "domain",
        }
    }
}

/// One R03 match: which pattern, and the byte range of its match text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    pub kind: PatternKind,
    pub span: Range<usize>,
}

/// Every R03 match in `s`, pattern by pattern, each pattern scanned left to
/// right as Go's `FindAll` does. Cheap byte tests skip patterns that cannot
/// match, which matters because most strings hold none of them.
pub fn r03_hits(s: &str, out: &mut Vec<Hit>) {
    let has = |b: u8| s.as_bytes().contains(&b);
    let has_dot = has(b'.');
    let has_slash = has(b'/');
    if has_slash && s.contains("://") {
        push_all(&URL, s, PatternKind::Url, out);
    }
    if has_slash {
        for m in UNIX_PATH.find_iter(s) {
            // Group 2 without a capture search: group 1 is either empty (the
            // `^` branch, so the match starts with the slash) or one ASCII
            // separator byte.
            let skip = usize::from(!m.as_str().starts_with('/'));
            out.push(Hit {
                kind: PatternKind::UnixPath,
                span: m.start() + skip..m.end(),
            });
        }
    }
    if s.contains(":\\") {
        push_all(&WINDOWS_PATH, s, PatternKind::WindowsPath, out);
    }
    if has_dot && s.bytes().any(|b| b.is_ascii_digit()) {
        push_all(&IPV4, s, PatternKind::Ipv4, out);
    }
    if has_dot {
        push_all(&DOMAIN, s, PatternKind::Domain, out);
    }
}

fn push_all(re: &Regex, s: &str, kind: PatternKind, out: &mut Vec<Hit>) {
    for m in re.find_iter(s) {
        out.push(Hit {
            kind,
            span: m.range(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(s: &str) -> Vec<(PatternKind, &str)> {
        let mut hits = Vec::new();
        r03_hits(s, &mut hits);
        hits.into_iter().map(|h| (h.kind, &s[h.span])).collect()
    }

    #[test]
    fn every_pattern_compiles() {
        for re in [
            &URL,
            &UNIX_PATH,
            &WINDOWS_PATH,
            &IPV4,
            &DOMAIN,
            &SERVER_TOOL,
        ] {
            LazyLock::force(re);
        }
    }

    #[test]
    fn url_stops_at_ascii_space_but_not_at_nbsp() {
        use PatternKind::*;
        assert_eq!(
            texts("see https://a.example.com next"),
            [(Url, "https://a.example.com"), (Domain, "a.example.com")]
        );
        assert_eq!(
            texts("see https://a.example.com\u{a0}next"),
            [
                (Url, "https://a.example.com\u{a0}next"),
                (Domain, "a.example.com")
            ]
        );
    }

    #[test]
    fn digits_and_boundaries_are_ascii() {
        use PatternKind::*;
        assert_eq!(texts("ip 10.0.0.1 here"), [(Ipv4, "10.0.0.1")]);
        assert_eq!(texts("ip \u{661}\u{660}.\u{660}.\u{660}.\u{661}"), []);
        assert_eq!(texts("256.1.1.1"), []);
        // Under (?i) the Kelvin sign is a letter for [a-z], but not a word
        // character for the ASCII \b.
        assert_eq!(texts("x\u{212A}:\\dir"), [(WindowsPath, "\u{212A}:\\dir")]);
        assert_eq!(texts("\u{212A}ey.com"), [(Domain, "ey.com")]);
        assert_eq!(texts("a\u{212A}ey.com"), [(Domain, "a\u{212A}ey.com")]);
    }

    #[test]
    fn unix_path_needs_a_separator_before_it() {
        use PatternKind::*;
        assert_eq!(texts("/etc/passwd"), [(UnixPath, "/etc/passwd")]);
        assert_eq!(
            texts("read (/etc/x) and a=/b"),
            [(UnixPath, "/etc/x)"), (UnixPath, "/b")]
        );
        assert_eq!(texts("a/b and / alone"), []);
    }

    #[test]
    fn server_tool_follows_re2() {
        let all = |s: &str| -> Vec<String> {
            SERVER_TOOL
                .find_iter(s)
                .map(|m| m.as_str().to_string())
                .collect()
        };
        assert_eq!(all("use github/create_issue now"), ["github/create_issue"]);
        assert_eq!(all("foo-bar/baz- x"), ["foo-bar/baz"]);
        assert_eq!(all("ab/cd"), Vec::<String>::new());
        assert_eq!(all("fo\u{17F}/tool"), ["fo\u{17F}/tool"]);
    }
}
