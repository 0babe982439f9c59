//! Known secret formats: gitleaks' default rules (`data/gitleaks.toml`,
//! MIT), read as data. A rule applies to a text that holds one of its
//! keywords (found for every rule at once), then its regex finds the
//! secret, which the rule's and the global allowlists may excuse. Nothing
//! is scored: a rule's `entropy` is ignored, and the rules whose
//! precision rests on it are left out (`EXCLUDED`).

use std::sync::OnceLock;

use aho_corasick::AhoCorasick;
use regex::bytes::Regex;
use serde::Deserialize;

const GITLEAKS: &str = include_str!("../../data/gitleaks.toml");

/// Rules left out, each for a reason a test holds to:
///
/// - `generic-api-key`: any `key`/`token`/`secret` assignment with a value
///   of ten word characters; without its entropy threshold it flags
///   ordinary names and ids (and an argument named `api_key` is the
///   allow-list's business, not a format).
pub const EXCLUDED: &[&str] = &["generic-api-key"];

#[derive(Deserialize)]
struct File {
    allowlist: Option<RawAllow>,
    #[serde(default)]
    rules: Vec<RawRule>,
}

#[derive(Deserialize)]
struct RawRule {
    id: String,
    description: Option<String>,
    regex: Option<String>,
    #[serde(rename = "secretGroup")]
    secret_group: Option<usize>,
    #[serde(default)]
    keywords: Vec<String>,
    path: Option<String>,
    #[serde(default)]
    allowlists: Vec<RawAllow>,
}

#[derive(Deserialize)]
struct RawAllow {
    #[serde(default)]
    regexes: Vec<String>,
    #[serde(default)]
    stopwords: Vec<String>,
    #[serde(rename = "regexTarget")]
    regex_target: Option<String>,
    /// A path-only allowlist is for files, not text: skipped.
    #[serde(default)]
    paths: Vec<String>,
    condition: Option<String>,
}

/// What an allowlist's regexes are matched against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Secret,
    Match,
    Line,
}

struct Allow {
    regexes: Vec<Regex>,
    stopwords: Vec<String>,
    target: Target,
}

impl Allow {
    fn of(raw: &RawAllow) -> Result<Option<Allow>, String> {
        if raw.regexes.is_empty() && raw.stopwords.is_empty() {
            return Ok(None);
        }
        // "AND" joins a path condition, which text never meets.
        if raw.condition.as_deref() == Some("AND") && !raw.paths.is_empty() {
            return Ok(None);
        }
        let regexes = raw
            .regexes
            .iter()
            .map(|r| compile(r))
            .collect::<Result<_, _>>()?;
        Ok(Some(Allow {
            regexes,
            stopwords: raw.stopwords.iter().map(|s| s.to_lowercase()).collect(),
            target: match raw.regex_target.as_deref() {
                Some("match") => Target::Match,
                Some("line") => Target::Line,
                _ => Target::Secret,
            },
        }))
    }

    fn excuses(&self, secret: &[u8], whole: &[u8], line: &[u8]) -> bool {
        let against = match self.target {
            Target::Secret => secret,
            Target::Match => whole,
            Target::Line => line,
        };
        if self.regexes.iter().any(|r| r.is_match(against)) {
            return true;
        }
        let lower = String::from_utf8_lossy(secret).to_lowercase();
        self.stopwords.iter().any(|w| lower.contains(w.as_str()))
    }
}

/// Go's RE2 syntax as Rust's `regex` reads it: RE2 takes a `{` that does
/// not start a repetition (`{{` in a template pattern) for a literal, Rust
/// asks for it escaped. Nothing else differs in the rules.
fn from_go(re: &str) -> String {
    let mut out = String::with_capacity(re.len() + 8);
    let mut class = false;
    let mut i = 0;
    // `{m}`, `{m,}` or `{m,n}` starting at `at`: its length.
    let repetition = |at: usize| -> Option<usize> {
        let end = re[at..].find('}')?;
        let inner = &re[at + 1..at + end];
        let (lo, hi) = inner.split_once(',').unwrap_or((inner, ""));
        let digits = |s: &str| s.bytes().all(|c| c.is_ascii_digit());
        (!lo.is_empty() && digits(lo) && digits(hi)).then_some(end + 1)
    };
    while i < re.len() {
        let rest = &re[i..];
        let ch = rest.chars().next().expect("a char");
        if ch == '\\' {
            let escaped = rest[1..].chars().next().map_or(0, char::len_utf8);
            out.push_str(&rest[..1 + escaped]);
            i += 1 + escaped;
            continue;
        }
        match ch {
            '[' if !class => {
                class = true;
                out.push('[');
                // A `]` (or `^]`) first in a class is a literal.
                if rest[1..].starts_with("^]") {
                    out.push_str("^\\]");
                    i += 3;
                    continue;
                }
                if rest[1..].starts_with(']') {
                    out.push_str("\\]");
                    i += 2;
                    continue;
                }
            }
            ']' if class => {
                class = false;
                out.push(']');
            }
            '{' if !class => match repetition(i) {
                Some(len) => {
                    out.push_str(&re[i..i + len]);
                    i += len;
                    continue;
                }
                None => out.push_str("\\{"),
            },
            '}' if !class => out.push_str("\\}"),
            c => out.push(c),
        }
        i += ch.len_utf8();
    }
    out
}

/// The context most rules start with, `[\\w.-]{0,50}?` (up to fifty word
/// characters before the keyword, lazily: it may match nothing), left
/// out. Whether a rule matches, and the secret it finds, are the same
/// without it; but a pattern that begins with the keyword lets the regex
/// engine look for the keyword's bytes first, which is what makes a rule
/// cost little on a long text.
fn without_leading_context(re: &str) -> String {
    const CONTEXT: &str = r"[\w.-]{0,50}?";
    let mut out = String::with_capacity(re.len());
    let mut rest = re;
    loop {
        if let Some(r) = rest.strip_prefix(CONTEXT) {
            rest = r;
        } else if let Some(r) = rest.strip_prefix("(?i)") {
            out.push_str("(?i)");
            rest = r;
        } else if let Some(r) = rest.strip_prefix("(?i:") {
            out.push_str("(?i:");
            rest = r;
        } else {
            break;
        }
    }
    out.push_str(rest);
    out
}

/// Compiled as Go reads it: `\\w`, `\\s`, `\\b` and case folding are
/// ASCII's (RE2's are), which also keeps the automata small and fast.
fn compile(re: &str) -> Result<Regex, String> {
    regex::bytes::RegexBuilder::new(&from_go(re))
        .unicode(false)
        .size_limit(64 << 20)
        .build()
        .map_err(|e| format!("{re:.60}: {e}"))
}

/// One rule: compiled when first needed (most never are).
pub struct Rule {
    pub id: String,
    pub description: String,
    source: String,
    secret_group: Option<usize>,
    regex: OnceLock<Option<Regex>>,
    allow: Vec<Allow>,
}

impl Rule {
    fn regex(&self) -> Option<&Regex> {
        self.regex
            .get_or_init(|| compile(&self.source).ok())
            .as_ref()
    }
}

/// A secret in a known format, found in a text: which rule, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub rule: String,
    pub description: String,
    pub start: usize,
    pub end: usize,
}

/// Every rule, with the keyword automaton that picks them.
pub struct Rules {
    rules: Vec<Rule>,
    /// Keyword automaton (lower case); pattern `i` belongs to rule
    /// `owners[i]`.
    keywords: AhoCorasick,
    owners: Vec<usize>,
    global: Vec<Allow>,
}

impl Rules {
    /// The built-in rules, read once per process.
    pub fn builtin() -> &'static Rules {
        static RULES: OnceLock<Rules> = OnceLock::new();
        RULES.get_or_init(|| Rules::parse(GITLEAKS).expect("the built-in rules read"))
    }

    /// Rules from a gitleaks configuration's text.
    pub fn parse(text: &str) -> Result<Rules, String> {
        let file: File = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut rules = Vec::new();
        let mut patterns = Vec::new();
        let mut owners = Vec::new();
        for r in file.rules {
            let (Some(source), None) = (r.regex, &r.path) else {
                // A rule for file names, or without a pattern.
                continue;
            };
            if EXCLUDED.contains(&r.id.as_str()) {
                continue;
            }
            let allow = r
                .allowlists
                .iter()
                .filter_map(|a| Allow::of(a).transpose())
                .collect::<Result<_, _>>()?;
            let index = rules.len();
            for k in &r.keywords {
                patterns.push(k.to_lowercase());
                owners.push(index);
            }
            rules.push(Rule {
                id: r.id,
                description: r.description.unwrap_or_default(),
                source: without_leading_context(&source),
                secret_group: r.secret_group,
                regex: OnceLock::new(),
                allow,
            });
        }
        // Keywords are ASCII: matched without a lower-case copy of the text.
        let keywords = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .kind(Some(aho_corasick::AhoCorasickKind::DFA))
            .build(&patterns)
            .map_err(|e| e.to_string())?;
        let global = file
            .allowlist
            .as_ref()
            .map(Allow::of)
            .transpose()?
            .flatten()
            .into_iter()
            .collect();
        Ok(Rules {
            rules,
            keywords,
            owners,
            global,
        })
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Every rule's regex, compiled now (a test holds that all compile).
    pub fn compile_all(&self) -> Vec<(String, String)> {
        self.rules
            .iter()
            .filter_map(|r| compile(&r.source).err().map(|e| (r.id.clone(), e)))
            .collect()
    }

    /// The first secret in `text` in a known format.
    pub fn find(&self, text: &str) -> Option<Found> {
        self.find_bytes(text.as_bytes())
    }

    /// [`Rules::find`] over bytes (a decoding need not be UTF-8).
    pub fn find_bytes(&self, text: &[u8]) -> Option<Found> {
        let mut seen = vec![false; self.rules.len()];
        let mut candidates = Vec::new();
        for m in self.keywords.find_overlapping_iter(text) {
            let rule = self.owners[m.pattern().as_usize()];
            if !std::mem::replace(&mut seen[rule], true) {
                candidates.push(rule);
            }
        }
        if candidates.is_empty() {
            return None;
        }
        candidates.sort_unstable();
        let mut locations = None;
        for i in candidates {
            let rule = &self.rules[i];
            let Some(regex) = rule.regex() else { continue };
            // Where it matches, by the fast automaton; the groups (the
            // secret within the match) only there.
            for m in regex.find_iter(text) {
                let locs = locations.get_or_insert_with(|| regex.capture_locations());
                if locs.len() != regex.captures_len() {
                    *locs = regex.capture_locations();
                }
                if regex.captures_read_at(locs, text, m.start()).is_none() {
                    continue;
                }
                let (ws, we) = locs.get(0).unwrap_or((m.start(), m.end()));
                let group = |g: usize| locs.get(g);
                let (ss, se) = rule
                    .secret_group
                    .and_then(group)
                    .or_else(|| (1..regex.captures_len()).find_map(group))
                    .unwrap_or((ws, we));
                let line_start = text[..ws]
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |p| p + 1);
                let line_end = text[we..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(text.len(), |p| we + p);
                let excused =
                    rule.allow.iter().chain(&self.global).any(|a| {
                        a.excuses(&text[ss..se], &text[ws..we], &text[line_start..line_end])
                    });
                if !excused {
                    return Some(Found {
                        rule: rule.id.clone(),
                        description: rule.description.clone(),
                        start: ss,
                        end: se,
                    });
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_syntax_is_read_as_go_reads_it() {
        assert_eq!(from_go(r"a{2,5}b{3}"), r"a{2,5}b{3}");
        assert_eq!(from_go(r"\$?{{[^}]+}}"), r"\$?\{\{[^}]+\}\}");
        assert_eq!(from_go(r"x{,3}"), r"x\{,3\}");
        assert_eq!(from_go(r"[^]]+]"), r"[^\]]+]");
        assert!(compile(r#"['"]?\$?{{[^}]+}}['"]?"#)
            .unwrap()
            .is_match(b"{{ secret }}"));
    }

    #[test]
    fn the_leading_context_is_left_out_and_nothing_else() {
        assert_eq!(
            without_leading_context(r"(?i)[\w.-]{0,50}?(?:adafruit)(?:[ \t\w.-]{0,20})"),
            r"(?i)(?:adafruit)(?:[ \t\w.-]{0,20})"
        );
        assert_eq!(
            without_leading_context(r"[\w.-]{0,50}?(?i:[\w.-]{0,50}?(?:private[_-]?ai))"),
            r"(?i:(?:private[_-]?ai))"
        );
        assert_eq!(
            without_leading_context(r"\b(ghp_[0-9a-zA-Z]{36})"),
            r"\b(ghp_[0-9a-zA-Z]{36})"
        );
    }

    #[test]
    fn every_built_in_rule_compiles() {
        let rules = Rules::builtin();
        assert!(rules.len() > 200, "{}", rules.len());
        assert_eq!(rules.compile_all(), Vec::<(String, String)>::new());
    }

    #[test]
    fn known_formats_are_found_and_look_alikes_are_not() {
        let rules = Rules::builtin();
        // Built here, not written out, so that no scanner flags this file.
        let aws = format!("AKIA{}", "Q3EXJ7MPLWD5TZ2N");
        let github = format!("ghp_{}", "x7Fq2LmN9pR4sT6vW8yZ0aB3cD5eG1hJ2kL4");
        let key = format!(
            "-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n-----END OPENSSH PRIVATE KEY-----",
            "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW".repeat(2)
        );
        for (text, rule) in [
            (format!("key id {aws} here"), "aws-access-token"),
            (format!("token: {github}"), "github-pat"),
            (key.clone(), "private-key"),
        ] {
            let found = rules.find(&text).unwrap_or_else(|| panic!("{text:.40}"));
            assert_eq!(found.rule, rule, "{text:.40}");
        }
        for benign in [
            "SELECT id FROM users WHERE name = 'akia'",
            "commit 3f9c2b1a7d4e5f60718293a4b5c6d7e8f9a0b1c2",
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl alice@example",
            "550e8400-e29b-41d4-a716-446655440000",
            "the api key is in the vault",
        ] {
            assert_eq!(rules.find(benign), None, "{benign}");
        }
    }
}
