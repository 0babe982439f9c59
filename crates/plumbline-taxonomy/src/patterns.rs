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

use regex_automata::meta;
use regex_automata::Input;

/// One of the patterns, compiled: the `regex` crate's engine without the
/// literal prefilter it would build. The callers below look for the
/// bytes a match needs before they search, so the prefilter would save
/// little, and building the seven of them cost more (4.8 M instructions,
/// a tenth of what grading the 1,111 real pairs costs) than all the
/// searching they would speed up. The matches are the same: a prefilter
/// only skips text where no match can start.
pub struct Regex(meta::Regex);

impl Regex {
    /// Every match, leftmost-first and non-overlapping, as byte ranges.
    pub fn find_iter<'r, 'h>(&'r self, s: &'h str) -> impl Iterator<Item = Range<usize>> + 'h
    where
        'r: 'h,
    {
        self.0.find_iter(s).map(|m| m.range())
    }

    /// The first match starting at or after `start`, the text before it
    /// still seen by `\b` (as `regex::Regex::find_at`).
    pub fn find_at(&self, s: &str, start: usize) -> Option<Range<usize>> {
        self.0
            .search(&Input::new(s).range(start..))
            .map(|m| m.range())
    }

    /// Group `group` of every match (as `captures_iter`), where it took
    /// part.
    pub fn group_iter<'r, 'h>(
        &'r self,
        s: &'h str,
        group: usize,
    ) -> impl Iterator<Item = Range<usize>> + 'h
    where
        'r: 'h,
    {
        self.0
            .captures_iter(s)
            .filter_map(move |c| c.get_group(group).map(|g| g.range()))
    }
}

fn compile(pattern: &str) -> Regex {
    compile_with(pattern, true)
}

/// `prefilter`: whether to build the literal prefilter (see [`Regex`]).
fn compile_with(pattern: &str, prefilter: bool) -> Regex {
    // The patterns are constants; a unit test compiles each one.
    let config = meta::Config::new().auto_prefilter(prefilter);
    meta::Regex::builder()
        .configure(config)
        .build(pattern)
        .map(Regex)
        .unwrap_or_else(|e| panic!("taxonomy pattern {pattern:?}: {e}"))
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
    compile_with(
        r"(?-u:\b)((?:25[0-5]|2[0-4][0-9]|[01]?[0-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|[01]?[0-9]?[0-9])){3})(?-u:\b)",
        false,
    )
});

/// R03 pattern 5: a domain-like name without a scheme.
pub static DOMAIN: LazyLock<Regex> = LazyLock::new(|| {
    compile_with(
        r"(?i)(?-u:\b)(?:[a-z0-9-]+\.)+(?:com|net|org|io|dev|ai|example|localhost)(?-u:\b)",
        false,
    )
});

/// R05 pattern: a slash-separated `server/tool` token,
/// `(?i)\b([a-z][\w-]{2,})/([a-z][\w-]{2,})\b`.
pub static SERVER_TOOL: LazyLock<Regex> = LazyLock::new(|| {
    compile(r"(?i)(?-u:\b)([a-z][0-9A-Za-z_-]{2,})/([a-z][0-9A-Za-z_-]{2,})(?-u:\b)")
});

/// taxonomy-v2's sixth R03 pattern: a path relative to the home directory
/// (`~/…`, `$HOME/…`, `${HOME}/…`), after the same separators as the Unix
/// path or a backtick; the match text is group 2.
pub static HOME_PATH: LazyLock<Regex> = LazyLock::new(|| {
    compile(r#"(^|[\t\n\x0C\r "'=(`])((?:~|\$HOME|\$\{HOME\})/[^\t\n\x0C\r "'`]+)"#)
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
    /// taxonomy-v2 only.
    HomePath,
}

impl PatternKind {
    pub fn describe(self) -> &'static str {
        match self {
            PatternKind::Url => "URL",
            PatternKind::UnixPath => "absolute Unix path",
            PatternKind::WindowsPath => "absolute Windows path",
            PatternKind::Ipv4 => "IPv4 address",
            PatternKind::Domain => "domain",
            PatternKind::HomePath => "home-relative path",
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
    let bytes = s.as_bytes();
    // Every pattern needs a `.`, a `/` or a `\`. Most changed strings are
    // short (names, types, enum values): one pass over their bytes costs
    // less than setting up vectorised searches.
    if bytes.len() <= 64 && !bytes.iter().any(|b| matches!(b, b'.' | b'/' | b'\\')) {
        return;
    }
    let has = |b: u8| memchr::memchr(b, bytes).is_some();
    let has_dot = has(b'.');
    let has_slash = has(b'/');
    if has_slash && s.contains("://") {
        push_all(&URL, s, PatternKind::Url, out);
    }
    // The Unix path pattern needs a `/` at the start or after one of its
    // separators; most slashes in prose (`and/or`) have neither.
    let path_possible = has_slash
        && memchr::memchr_iter(b'/', bytes).any(|i| {
            i == 0
                || matches!(
                    bytes[i - 1],
                    b'\t' | b'\n' | 0x0C | b'\r' | b' ' | b'"' | b'\'' | b'=' | b'('
                )
        });
    if path_possible {
        for m in UNIX_PATH.find_iter(s) {
            // Group 2 without a capture search: group 1 is either empty (the
            // `^` branch, so the match starts with the slash) or one ASCII
            // separator byte.
            let skip = usize::from(!s[m.clone()].starts_with('/'));
            out.push(Hit {
                kind: PatternKind::UnixPath,
                span: m.start + skip..m.end,
            });
        }
    }
    // A backslash is rare in prose: look for one before the pair.
    if memchr::memchr(b'\\', bytes).is_some() && s.contains(":\\") {
        push_all(&WINDOWS_PATH, s, PatternKind::WindowsPath, out);
    }
    // An IPv4 address has a digit right before a `.`; a domain has a `.`
    // right before one of the listed top-level names (in any case, and
    // under (?i) `k` also matches the Kelvin sign, whose UTF-8 starts with
    // 0xE2). Most sentence-ending dots have neither.
    let dots = || memchr::memchr_iter(b'.', bytes);
    if has_dot && dots().any(|i| i > 0 && bytes[i - 1].is_ascii_digit()) {
        push_all(&IPV4, s, PatternKind::Ipv4, out);
    }
    if has_dot {
        push_domains(s, out);
    }
}

/// The matches of [`DOMAIN`], as `find_iter` gives them, searched from
/// near the dots that can begin a listed top-level name instead of from
/// the start of the text (a long description has few of them).
///
/// Every match ends in such a dot and a name, and every character of a
/// match is an ASCII letter, digit, `-` or `.`, or (under `(?i)`) the
/// Kelvin sign or the long s: so no match starts between the previous
/// match's end and the run of such characters that holds the next such
/// dot, and searching from there finds the same next match. Non-ASCII
/// bytes are all counted in a run, so a run starts on a char boundary.
fn push_domains(s: &str, out: &mut Vec<Hit>) {
    let bytes = s.as_bytes();
    let in_run = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.') || !b.is_ascii();
    let mut pos = 0;
    for dot in memchr::memchr_iter(b'.', bytes) {
        if dot < pos || !domain_possible_after(&bytes[dot + 1..]) {
            continue;
        }
        let start = bytes[pos..dot]
            .iter()
            .rposition(|&b| !in_run(b))
            .map_or(pos, |p| pos + p + 1);
        let Some(m) = DOMAIN.find_at(s, start) else {
            return;
        };
        pos = m.end;
        out.push(Hit {
            kind: PatternKind::Domain,
            span: m,
        });
    }
}

/// Whether the text after a `.` can begin one of R03's top-level names:
/// `com net org io dev ai example localhost`, compared ignoring ASCII case;
/// any non-ASCII byte is taken as possible (Unicode case folding, C7).
fn domain_possible_after(rest: &[u8]) -> bool {
    const TLDS: [&[u8]; 8] = [
        b"com",
        b"net",
        b"org",
        b"io",
        b"dev",
        b"ai",
        b"example",
        b"localhost",
    ];
    if rest.iter().take(9).any(|b| !b.is_ascii()) {
        return true;
    }
    TLDS.iter().any(|t| {
        rest.get(..t.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(t))
    })
}

/// taxonomy-v2's R03 matches in `s` (`docs/taxonomy-v2.md` 4.3): v1's
/// five patterns and the home-relative path, each match text without
/// trailing sentence punctuation, and without names reserved for
/// documentation (RFC 2606 and 6761 example names, RFC 5737 addresses),
/// which no tool can reach.
pub fn r03_hits_v2(s: &str, out: &mut Vec<Hit>) {
    r03_hits_trimmed(s, out, is_documentation_name);
}

/// v1's matches and the home-relative paths of `s`, each trimmed of
/// trailing sentence punctuation (V2-C2), without those shorter than two
/// characters, bare home paths, and those `dropped` names.
fn r03_hits_trimmed(s: &str, out: &mut Vec<Hit>, dropped: fn(PatternKind, &str) -> bool) {
    let start = out.len();
    r03_hits(s, out);
    let bytes = s.as_bytes();
    if (memchr::memchr(b'~', bytes).is_some() && s.contains("~/"))
        || memchr::memmem::find(bytes, b"HOME").is_some()
    {
        for m in HOME_PATH.group_iter(s, 2) {
            out.push(Hit {
                kind: PatternKind::HomePath,
                span: m,
            });
        }
    }
    let mut i = start;
    while i < out.len() {
        let h = &mut out[i];
        let text = &s[h.span.clone()];
        let trimmed = text.trim_end_matches(['.', ',', ';', ':', '!', '?', ')']);
        h.span.end = h.span.start + trimmed.len();
        let bare_home = h.kind == PatternKind::HomePath
            && trimmed
                .rsplit_once('/')
                .is_some_and(|(_, rest)| rest.is_empty())
            && trimmed.matches('/').count() == 1;
        if trimmed.len() < 2 || bare_home || dropped(h.kind, trimmed) {
            out.remove(i);
        } else {
            i += 1;
        }
    }
}

/// Whether a URL's host, a domain or an IPv4 address is reserved for
/// documentation: `example.com`, `example.net`, `example.org` and their
/// subdomains, the `.example`, `.test` and `.invalid` top-level names, and
/// 192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24.
fn is_documentation_name(kind: PatternKind, text: &str) -> bool {
    let Some(host) = host_of(kind, text) else {
        return false;
    };
    if ["192.0.2.", "198.51.100.", "203.0.113."]
        .iter()
        .any(|p| host.starts_with(p))
    {
        return true;
    }
    let labels: Vec<&str> = host.split('.').collect();
    match labels.as_slice() {
        [.., "example", "com" | "net" | "org"] => true,
        [.., tld] => matches!(*tld, "example" | "test" | "invalid"),
        [] => false,
    }
}

/// taxonomy-v3's R03 matches in `s` (`docs/taxonomy-v3.md` 4.3): v2's,
/// where a documentation address is a parsed IPv4 address in the RFC 5737
/// ranges (not a text prefix, V2-C5), a host with any label `example` is a
/// documentation name, and placeholders are dropped: a URL with no host,
/// a Unix path whose first segment is `path` (`/path/to/file`), a Unix
/// path with no letter or digit (`/*`), and the `domain.com` family.
pub fn r03_hits_v3(s: &str, out: &mut Vec<Hit>) {
    r03_hits_trimmed(s, out, |kind, text| {
        is_documentation_name_v3(kind, text) || is_placeholder(kind, text)
    });
}

/// The host of a domain, IPv4 or URL match (V2-C4), without trailing dots,
/// ASCII-lowercased; `None` for paths.
fn host_of(kind: PatternKind, text: &str) -> Option<String> {
    let host = match kind {
        PatternKind::Domain | PatternKind::Ipv4 => text,
        PatternKind::Url => {
            let rest = text.split_once("://").map_or(text, |(_, r)| r);
            let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
            let host = authority.rsplit('@').next().unwrap_or(authority);
            host.split(':').next().unwrap_or(host)
        }
        _ => return None,
    };
    Some(host.trim_end_matches('.').to_ascii_lowercase())
}

/// taxonomy-v3's documentation names: a host that is an IPv4 address
/// (four decimal octets, 0–255) in 192.0.2.0/24, 198.51.100.0/24 or
/// 203.0.113.0/24; a host with a label `example` (`example.com`,
/// `api.example.net`, `example.atlassian.net`, `x.example`); or a host
/// whose last label is `test` or `invalid`.
fn is_documentation_name_v3(kind: PatternKind, text: &str) -> bool {
    let Some(host) = host_of(kind, text) else {
        return false;
    };
    let labels: Vec<&str> = host.split('.').collect();
    let octets: Vec<u8> = labels
        .iter()
        .filter_map(|l| {
            (!l.is_empty() && l.len() <= 3 && l.bytes().all(|b| b.is_ascii_digit()))
                .then(|| l.parse::<u16>().ok())
                .flatten()
                .and_then(|n| u8::try_from(n).ok())
        })
        .collect();
    if labels.len() == 4 && octets.len() == 4 {
        return matches!(
            octets.as_slice(),
            [192, 0, 2, _] | [198, 51, 100, _] | [203, 0, 113, _]
        );
    }
    labels.contains(&"example") || matches!(labels.last(), Some(&("test" | "invalid")))
}

/// Placeholders that name no place (taxonomy-v3 4.3 item 5).
fn is_placeholder(kind: PatternKind, text: &str) -> bool {
    match kind {
        PatternKind::Url => {
            text.ends_with("://") || host_of(kind, text).is_some_and(|h| is_placeholder_domain(&h))
        }
        PatternKind::Domain => {
            is_placeholder_domain(&text.trim_end_matches('.').to_ascii_lowercase())
        }
        PatternKind::UnixPath => {
            text == "/path"
                || text.starts_with("/path/")
                || !text.chars().any(char::is_alphanumeric)
        }
        _ => false,
    }
}

/// `domain.com`, `yourdomain.com`, `your-domain.org`, `mydomain.net` and
/// their subdomains: the second-level label is a stand-in for a domain.
fn is_placeholder_domain(host: &str) -> bool {
    let mut labels = host.rsplit('.');
    let _tld = labels.next();
    matches!(
        labels.next(),
        Some("domain" | "yourdomain" | "your-domain" | "mydomain" | "my-domain")
    )
}

fn push_all(re: &Regex, s: &str, kind: PatternKind, out: &mut Vec<Hit>) {
    for span in re.find_iter(s) {
        out.push(Hit { kind, span });
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
            &HOME_PATH,
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
    fn domains_searched_near_their_dots_are_all_of_find_iter() {
        for s in [
            "a.com b.io x_y.com _z.net .com a..com e.g. www.a-b.example.org.",
            "see api.github.com/x and foo.commons, bar.dev\u{212A}, \u{212A}ey.com",
            "ratio.iox then n.net.net.org; a.\u{17F}x.localho\u{17F}t é.com",
            "",
            ".",
            "no dots here",
        ] {
            let want: Vec<_> = DOMAIN.find_iter(s).collect();
            let mut got = Vec::new();
            push_domains(s, &mut got);
            let got: Vec<_> = got.into_iter().map(|h| h.span).collect();
            assert_eq!(got, want, "{s:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn domains_searched_near_their_dots_agree_with_find_iter(
            s in "(com|io|net|org|ai|dev|example|localhost|\\.|[a-zA-Z0-9]|-|_| |\u{212A}|\u{17F}|é){0,40}"
        ) {
            let want: Vec<_> = DOMAIN.find_iter(&s).collect();
            let mut got = Vec::new();
            push_domains(&s, &mut got);
            let got: Vec<_> = got.into_iter().map(|h| h.span).collect();
            proptest::prop_assert_eq!(got, want);
        }
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
    fn v2_adds_home_paths_trims_punctuation_and_skips_documentation_names() {
        use PatternKind::*;
        let v2 = |s: &str| -> Vec<(PatternKind, String)> {
            let mut hits = Vec::new();
            r03_hits_v2(s, &mut hits);
            hits.into_iter()
                .map(|h| (h.kind, s[h.span].to_owned()))
                .collect()
        };
        assert_eq!(
            v2("read ~/.ssh/id_rsa and `~/.aws/credentials`."),
            [
                (HomePath, "~/.ssh/id_rsa".to_owned()),
                (HomePath, "~/.aws/credentials".to_owned())
            ]
        );
        assert_eq!(
            v2("see https://docs.example.com/x, or api.example.org and 192.0.2.1"),
            []
        );
        assert_eq!(v2("post to https://collect.attacker.example/upload."), []);
        assert_eq!(
            v2("post to https://evil.com/upload."),
            [
                (Url, "https://evil.com/upload".to_owned()),
                (Domain, "evil.com".to_owned())
            ]
        );
        assert_eq!(v2("$HOME/.netrc"), [(HomePath, "$HOME/.netrc".to_owned())]);
        assert_eq!(v2("paths under `~/`, or ~/."), []);
    }

    #[test]
    fn server_tool_follows_re2() {
        let all = |s: &str| -> Vec<String> {
            SERVER_TOOL.find_iter(s).map(|m| s[m].to_string()).collect()
        };
        assert_eq!(all("use github/create_issue now"), ["github/create_issue"]);
        assert_eq!(all("foo-bar/baz- x"), ["foo-bar/baz"]);
        assert_eq!(all("ab/cd"), Vec::<String>::new());
        assert_eq!(all("fo\u{17F}/tool"), ["fo\u{17F}/tool"]);
    }
}
