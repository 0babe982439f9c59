//! Keeping credentials out of what Plumbline writes.
//!
//! A server's configuration can carry secrets in places that are not
//! marked as secret: `https://user:pass@host/mcp?key=…`, `--api-key …`,
//! `Authorization: Bearer …` among a command's arguments. Those places also
//! make up the server's *identity* (what the store, the lock file, the
//! dashboard and error messages show), so they are redacted before they are
//! written anywhere. And a value Plumbline expanded from `${VAR}` can come
//! back in a server's error or stderr: [`Known`] replaces each such value
//! wherever Plumbline writes text.
//!
//! Redaction is by form, so it can only err towards hiding: a parameter
//! called `author` is kept, one called `monkey` is hidden. A value that is
//! entirely a `${NAME}` reference is never redacted: it is the name of a
//! secret, not the secret.

use std::borrow::Cow;

/// What a redacted value is replaced with, where the text must stay a URL
/// or an argument.
pub const REDACTED: &str = "REDACTED";

/// Whether a query parameter, flag, header or variable called `name`
/// holds a credential: by its letters and digits, lowercased.
pub fn is_secret_name(name: &str) -> bool {
    let n: String = name
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    // Names that hold where to find a secret, not the secret itself.
    const POINTERS: &[&str] = &["file", "path", "dir", "env", "url", "name", "type"];
    if n.is_empty() || POINTERS.iter().any(|p| n.ends_with(p)) {
        return false;
    }
    const WITHIN: &[&str] = &[
        "token",
        "secret",
        "password",
        "passwd",
        "passphrase",
        "apikey",
        "authoriz",
        "credential",
        "signature",
        "cookie",
        "bearer",
        "privatekey",
        "accesskey",
        "clientkey",
        "sessionid",
    ];
    const EXACTLY: &[&str] = &["key", "sig", "pwd", "pass", "auth", "jwt", "session", "sid"];
    WITHIN.iter().any(|w| n.contains(w)) || EXACTLY.contains(&n.as_str()) || n.ends_with("key")
}

/// Whether `value` is entirely one `${NAME}` reference.
pub fn is_reference(value: &str) -> bool {
    value
        .strip_prefix("${")
        .and_then(|v| v.strip_suffix('}'))
        .is_some_and(|name| {
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

/// `url` with its user information and the values of secret-looking query
/// (and fragment) parameters replaced by [`REDACTED`]. Text that is not a
/// URL (no `://`) is returned as it is.
pub fn redact_url(url: &str) -> Cow<'_, str> {
    replace_url(url, &mut |_, _| REDACTED.to_owned())
}

/// `url` with its user information and the values of secret-looking query
/// (and fragment) parameters replaced by what `replace` returns for
/// (`userinfo` or the parameter's name, the value). `${NAME}` references
/// are kept.
pub fn replace_url<'a>(
    url: &'a str,
    replace: &mut dyn FnMut(&str, &str) -> String,
) -> Cow<'a, str> {
    let Some(scheme_end) = url.find("://") else {
        return Cow::Borrowed(url);
    };
    let start = scheme_end + 3;
    let end = url[start..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| start + i);
    let authority = &url[start..end];
    let (rest, fragment) = match url[end..].split_once('#') {
        Some((rest, fragment)) => (rest, Some(fragment)),
        None => (&url[end..], None),
    };
    let (path, query) = match rest.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (rest, None),
    };
    let mut changed = false;
    let mut out = String::with_capacity(url.len());
    out.push_str(&url[..start]);
    match authority.rfind('@') {
        Some(at) if !is_reference(&authority[..at]) => {
            out.push_str(&replace("userinfo", &authority[..at]));
            out.push_str(&authority[at..]);
            changed = true;
        }
        _ => out.push_str(authority),
    }
    out.push_str(path);
    for (mark, params) in [('?', query), ('#', fragment)] {
        let Some(params) = params else { continue };
        out.push(mark);
        for (i, pair) in params.split('&').enumerate() {
            if i > 0 {
                out.push('&');
            }
            match pair.split_once('=') {
                Some((k, v)) if is_secret_name(k) && !v.is_empty() && !is_reference(v) => {
                    out.push_str(k);
                    out.push('=');
                    out.push_str(&replace(k, v));
                    changed = true;
                }
                _ => out.push_str(pair),
            }
        }
    }
    if changed {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(url)
    }
}

/// What a command-line argument holds, for [`redact_args`].
enum Arg<'a> {
    /// `--name=value`, `-name=value` or `NAME=value` with a secret name.
    Assignment {
        name: &'a str,
    },
    /// `--name` with a secret name: the next argument is its value.
    Flag,
    /// `Name: value` with a secret header name, or `Bearer value`.
    Header {
        keep: &'a str,
    },
    Other,
}

fn classify_arg(arg: &str) -> Arg<'_> {
    if let Some((name, value)) = arg.split_once('=') {
        let bare = name.trim_start_matches('-');
        let assignable = !bare.is_empty()
            && bare
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
        if assignable && is_secret_name(bare) && !value.is_empty() && !is_reference(value) {
            return Arg::Assignment { name };
        }
    }
    if let Some(flag) = arg.strip_prefix('-') {
        let flag = flag.trim_start_matches('-');
        if !flag.contains('=') && is_secret_name(flag) {
            return Arg::Flag;
        }
    }
    if let Some((name, value)) = arg.split_once(':') {
        let value = value.trim_start();
        let header_name = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if header_name && is_secret_name(name) && !value.is_empty() && !is_reference(value) {
            let scheme = scheme_of(value);
            let keep = &arg[..arg.len() - value.len() + scheme.len()];
            return Arg::Header { keep };
        }
    }
    let scheme = scheme_of(arg);
    if !scheme.is_empty() && !is_reference(arg[scheme.len()..].trim()) {
        return Arg::Header { keep: scheme };
    }
    Arg::Other
}

/// `Bearer `, `Basic ` or `Token ` at the start of `value`, with its
/// space; else "".
fn scheme_of(value: &str) -> &str {
    for scheme in ["Bearer ", "Basic ", "Token "] {
        if value.len() > scheme.len()
            && value.is_char_boundary(scheme.len())
            && value[..scheme.len()].eq_ignore_ascii_case(scheme)
        {
            return &value[..scheme.len()];
        }
    }
    ""
}

/// Whether any argument would be redacted by [`redact_args`].
pub fn args_hold_secrets(args: &[String]) -> bool {
    redact_args(args)
        .iter()
        .zip(args)
        .any(|(shown, arg)| shown != arg)
}

/// `args` with secret values replaced by [`REDACTED`]: `--token=…`,
/// `--api-key …` (the argument after a secret-named flag), `API_KEY=…`,
/// `Authorization: Bearer …`, `X-Api-Key: …`, `Bearer …`, and URLs as
/// [`redact_url`] does. `${NAME}` references are kept.
pub fn redact_args(args: &[String]) -> Vec<String> {
    replace_args(args, &mut |_, _| REDACTED.to_owned())
}

/// `args` with each secret value replaced by what `replace` returns for
/// (the flag, variable, header or scheme that names it, the value); the
/// forms are those of [`redact_args`], URLs as [`replace_url`] does.
pub fn replace_args(args: &[String], replace: &mut dyn FnMut(&str, &str) -> String) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut flag: Option<&str> = None;
    for arg in args {
        if let Some(name) = flag.take() {
            if !arg.starts_with('-') {
                out.push(if is_reference(arg) {
                    arg.clone()
                } else {
                    replace(name.trim_start_matches('-'), arg)
                });
                continue;
            }
        }
        out.push(match classify_arg(arg) {
            Arg::Assignment { name } => {
                let value = &arg[name.len() + 1..];
                format!("{name}={}", replace(name.trim_start_matches('-'), value))
            }
            Arg::Flag => {
                flag = Some(arg.as_str());
                arg.clone()
            }
            Arg::Header { keep } => {
                let key = keep
                    .split_once(':')
                    .map_or(keep.trim(), |(name, _)| name.trim());
                format!("{keep}{}", replace(key, &arg[keep.len()..]))
            }
            Arg::Other => replace_url_within(arg, replace).into_owned(),
        });
    }
    out
}

/// Every URL inside `text` (from a `scheme://` to the next white space or
/// quote or closing parenthesis) redacted as [`redact_url`] does.
pub fn redact_url_within(text: &str) -> Cow<'_, str> {
    replace_url_within(text, &mut |_, _| REDACTED.to_owned())
}

/// [`redact_url_within`] with [`replace_url`]'s replacement.
pub fn replace_url_within<'a>(
    text: &'a str,
    replace: &mut dyn FnMut(&str, &str) -> String,
) -> Cow<'a, str> {
    if !text.contains("://") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut changed = false;
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        // The scheme: the letters, digits, '+', '-' and '.' before "://".
        let scheme_start = rest[..i]
            .char_indices()
            .rev()
            .find(|&(_, c)| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |(j, c)| j + c.len_utf8());
        let end = rest[i..]
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`' | ')'))
            .map_or(rest.len(), |j| i + j);
        out.push_str(&rest[..scheme_start]);
        let url = &rest[scheme_start..end];
        let shown = replace_url(url, replace);
        changed |= matches!(shown, Cow::Owned(_));
        out.push_str(&shown);
        rest = &rest[end..];
    }
    out.push_str(rest);
    if changed {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(text)
    }
}

/// Values Plumbline expanded from `${NAME}`, each replaced by
/// `<redacted ${NAME}>` in any text passed to [`Known::redact`]. Values
/// shorter than [`Known::MIN_LEN`] characters are not replaced: they would
/// mangle ordinary words and say little about a secret.
#[derive(Debug, Clone, Default)]
pub struct Known {
    /// (value, name), longest value first, so that a value containing
    /// another is replaced whole.
    values: Vec<(String, String)>,
}

impl Known {
    pub const MIN_LEN: usize = 4;

    /// Remembers that `value` was expanded from `${name}`.
    pub fn insert(&mut self, name: &str, value: &str) {
        if value.chars().count() < Self::MIN_LEN || self.values.iter().any(|(v, _)| v == value) {
            return;
        }
        let at = self.values.partition_point(|(v, _)| v.len() >= value.len());
        self.values.insert(at, (value.to_owned(), name.to_owned()));
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// `text` with every known value replaced: as written, and also where
    /// it is echoed JSON-escaped (`\"`, `\u00e9`), percent-encoded (as an
    /// HTTP client rewrites a URL) or cut off (at the end of the text, or
    /// where an excerpt ends with `…`) after at least
    /// [`Known::MIN_CUT_PREFIX`] characters.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for (value, name) in &self.values {
            let mark = format!("<redacted ${{{name}}}>");
            if out.contains(value.as_str()) {
                out = Cow::Owned(out.replace(value.as_str(), &mark));
            }
            for decoding in [Decoding::JsonEscapes, Decoding::PercentEscapes] {
                if let Some(redacted) = redact_decoded(&out, value, &mark, decoding) {
                    out = Cow::Owned(redacted);
                }
            }
            if let Some(redacted) = redact_cut(&out, value, &mark) {
                out = Cow::Owned(redacted);
            }
        }
        out
    }

    /// How much of a value an echo cut off must show to be redacted.
    pub const MIN_CUT_PREFIX: usize = 8;
}

/// Ways a value can be spelt in text that echoes it.
#[derive(Clone, Copy)]
enum Decoding {
    /// JSON string escapes: `\"`, `\\`, `\n`, `\uXXXX` (and surrogate pairs).
    JsonEscapes,
    /// URL percent escapes: `%XX`.
    PercentEscapes,
}

/// Decoded bytes, each with the byte range of the text it came from.
type Decoded = (Vec<u8>, Vec<(usize, usize)>);

/// `text` decoded, each decoded byte with the range of `text` it came
/// from; `None` when `text` has nothing to decode.
fn decoded(text: &str, decoding: Decoding) -> Option<Decoded> {
    let bytes = text.as_bytes();
    let escape = match decoding {
        Decoding::JsonEscapes => b'\\',
        Decoding::PercentEscapes => b'%',
    };
    if !bytes.contains(&escape) {
        return None;
    }
    let hex = |s: &[u8]| -> Option<u32> {
        let s = std::str::from_utf8(s).ok()?;
        u32::from_str_radix(s, 16).ok()
    };
    let mut out = Vec::with_capacity(bytes.len());
    let mut from = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let rest = &bytes[i..];
        let (decoded, used): (Vec<u8>, usize) = match (decoding, rest) {
            (Decoding::PercentEscapes, [b'%', a, b, ..])
                if a.is_ascii_hexdigit() && b.is_ascii_hexdigit() =>
            {
                (vec![hex(&rest[1..3]).unwrap_or(0) as u8], 3)
            }
            (Decoding::JsonEscapes, [b'\\', b'u', ..]) if rest.len() >= 6 => match hex(&rest[2..6])
            {
                Some(high @ 0xD800..=0xDBFF) => {
                    let low = (rest.len() >= 12 && rest[6] == b'\\' && rest[7] == b'u')
                        .then(|| hex(&rest[8..12]))
                        .flatten()
                        .filter(|l| (0xDC00..=0xDFFF).contains(l));
                    match low {
                        Some(low) => {
                            let c =
                                char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
                                    .unwrap_or('\u{FFFD}');
                            (c.to_string().into_bytes(), 12)
                        }
                        None => ("\u{FFFD}".as_bytes().to_vec(), 6),
                    }
                }
                Some(code) => (
                    char::from_u32(code)
                        .unwrap_or('\u{FFFD}')
                        .to_string()
                        .into_bytes(),
                    6,
                ),
                None => (vec![rest[0]], 1),
            },
            (Decoding::JsonEscapes, [b'\\', c, ..]) => match c {
                b'"' | b'\\' | b'/' => (vec![*c], 2),
                b'n' => (vec![b'\n'], 2),
                b't' => (vec![b'\t'], 2),
                b'r' => (vec![b'\r'], 2),
                b'b' => (vec![8], 2),
                b'f' => (vec![12], 2),
                _ => (vec![rest[0]], 1),
            },
            _ => (vec![rest[0]], 1),
        };
        for b in decoded {
            out.push(b);
            from.push((i, i + used));
        }
        i += used;
    }
    Some((out, from))
}

/// `text` with each of `spans` (byte ranges, in order, not overlapping)
/// replaced by `mark`; `None` when there is none.
fn replace_spans(text: &str, spans: &[(usize, usize)], mark: &str) -> Option<String> {
    if spans.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for &(start, end) in spans {
        out.push_str(&text[last..start]);
        out.push_str(mark);
        last = end;
    }
    out.push_str(&text[last..]);
    Some(out)
}

/// `text` with every echo of `value` in the `decoding` spelling replaced by
/// `mark`; `None` when there is none.
fn redact_decoded(text: &str, value: &str, mark: &str, decoding: Decoding) -> Option<String> {
    let (plain, from) = decoded(text, decoding)?;
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for at in memchr::memmem::find_iter(&plain, value.as_bytes()) {
        let (start, end) = (from[at].0, from[at + value.len() - 1].1);
        if spans.last().is_some_and(|&(_, e)| start < e) {
            continue;
        }
        // Only an echo that was encoded: the plain one is already gone.
        if end - start != value.len() {
            spans.push((start, end));
        }
    }
    replace_spans(text, &spans, mark)
}

/// `text` with every beginning of `value` that is cut off (by the end of
/// the text or an excerpt's `…`) after at least [`Known::MIN_CUT_PREFIX`]
/// characters replaced by `mark`; `None` when there is none.
fn redact_cut(text: &str, value: &str, mark: &str) -> Option<String> {
    let head: String = value.chars().take(Known::MIN_CUT_PREFIX).collect();
    if head.chars().count() < Known::MIN_CUT_PREFIX || !text.contains(head.as_str()) {
        return None;
    }
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for (at, _) in text.match_indices(head.as_str()) {
        if spans.last().is_some_and(|&(_, e)| at < e) {
            continue;
        }
        let shared: usize = text[at..]
            .chars()
            .zip(value.chars())
            .take_while(|(a, b)| a == b)
            .map(|(a, _)| a.len_utf8())
            .sum();
        let end = at + shared;
        if shared < value.len() && (end == text.len() || text[end..].starts_with('…')) {
            spans.push((at, end));
        }
    }
    replace_spans(text, &spans, mark)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 23, item 15: echoes of a secret in other spellings are
    /// redacted too.
    #[test]
    fn json_escaped_percent_encoded_and_cut_off_echoes_are_redacted() {
        let mut known = Known::default();
        known.insert("TOKEN", "s3cr\"et/path é|x");
        known.insert("KEY", "abcdefghijklmnop");
        let cases = [
            // JSON-escaped, as a server echoing its config would.
            r#"{"token":"s3cr\"et/path \u00e9|x"}"#,
            r#"{"token":"s3cr\"et\/path é|x"}"#,
            // Percent-encoded, as an HTTP client rewrites a URL.
            "error sending request for url (http://127.0.0.1:9/in/s3cr%22et/path%20%C3%A9%7Cx)",
            "http://h/in/s3cr%22et/path%20%c3%a9|x",
            // Cut off at the end of the text, or of an excerpt.
            "the key was abcdefghijk",
            "skipped: key=abcdefghijkl… and more",
        ];
        for text in cases {
            let out = known.redact(text);
            assert!(
                !out.contains("et/path") && !out.contains("et\\/path") && !out.contains("abcdefgh"),
                "{text} → {out}"
            );
            assert!(out.contains("<redacted ${"), "{text} → {out}");
        }
        // A short shared beginning is not a secret's echo.
        assert_eq!(
            known.redact("abcdefg is the alphabet"),
            "abcdefg is the alphabet"
        );
        // Text that merely has escapes is left alone.
        assert_eq!(known.redact(r#"{"a":"\n%20"}"#), r#"{"a":"\n%20"}"#);
    }

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn secret_names() {
        for name in [
            "token",
            "api_key",
            "apiKey",
            "X-Api-Key",
            "Private-Token",
            "access_token",
            "client_secret",
            "password",
            "key",
            "sig",
            "Authorization",
            "GITHUB_PERSONAL_ACCESS_TOKEN",
            "aws-secret-access-key",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in [
            "author",
            "region",
            "q",
            "page",
            "format",
            "token-file",
            "keyword",
            "api-url",
            "",
        ] {
            assert!(!is_secret_name(name), "{name}");
        }
    }

    #[test]
    fn urls() {
        assert_eq!(
            redact_url("https://user:pass@mcp.example.com:8443/mcp?key=abc123&region=eu#x"),
            "https://REDACTED@mcp.example.com:8443/mcp?key=REDACTED&region=eu#x"
        );
        assert_eq!(
            redact_url("https://h/cb#access_token=abc&state=1"),
            "https://h/cb#access_token=REDACTED&state=1"
        );
        // References, empty values and non-URLs stay.
        assert!(matches!(
            redact_url("https://h/mcp?token=${TOKEN}&apikey="),
            Cow::Borrowed(_)
        ));
        assert!(matches!(redact_url("not a url @ all"), Cow::Borrowed(_)));
        // An '@' in the path is not user information.
        assert_eq!(redact_url("https://h/u/@me?x=1"), "https://h/u/@me?x=1");
    }

    #[test]
    fn arguments() {
        assert_eq!(
            redact_args(&args(&[
                "-y",
                "pkg",
                "--token=ghp_abc",
                "--api-key",
                "sk-123",
                "--header",
                "Authorization: Bearer abc.def",
                "X-Api-Key: k1",
                "API_KEY=zzz",
                "https://u:p@h/mcp?key=1",
                "--verbose",
                "--secret",
                "--port",
                "8080",
                "--token=${GH}",
                "Bearer ${T}",
                "Bearer xyz",
            ])),
            args(&[
                "-y",
                "pkg",
                "--token=REDACTED",
                "--api-key",
                "REDACTED",
                "--header",
                "Authorization: Bearer REDACTED",
                "X-Api-Key: REDACTED",
                "API_KEY=REDACTED",
                "https://REDACTED@h/mcp?key=REDACTED",
                "--verbose",
                "--secret",
                "--port",
                "8080",
                "--token=${GH}",
                "Bearer ${T}",
                "Bearer REDACTED",
            ])
        );
        assert!(!args_hold_secrets(&args(&[
            "-y",
            "@scope/server",
            "--port",
            "1"
        ])));
        assert!(args_hold_secrets(&args(&["--password", "hunter22"])));
    }

    #[test]
    fn replacements_name_what_they_replace() {
        let mut seen = Vec::new();
        let mut name = |key: &str, value: &str| {
            seen.push((key.to_owned(), value.to_owned()));
            format!("${{{}}}", key.to_ascii_uppercase().replace('-', "_"))
        };
        let out = replace_args(
            &args(&[
                "--token=abc",
                "--api-key",
                "k1",
                "Authorization: Bearer t0",
                "https://u:p@h.example/mcp?key=q1&x=1",
                "--keep",
                "${ALREADY}",
            ]),
            &mut name,
        );
        assert_eq!(
            out,
            args(&[
                "--token=${TOKEN}",
                "--api-key",
                "${API_KEY}",
                "Authorization: Bearer ${AUTHORIZATION}",
                "https://${USERINFO}@h.example/mcp?key=${KEY}&x=1",
                "--keep",
                "${ALREADY}",
            ])
        );
        assert_eq!(
            seen,
            [
                ("token", "abc"),
                ("api-key", "k1"),
                ("Authorization", "t0"),
                ("userinfo", "u:p"),
                ("key", "q1"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
        );
        // A URL whose secrets are references already is left alone.
        assert_eq!(
            replace_url("https://${CRED}@h/?token=${T}", &mut |_, _| unreachable!()),
            "https://${CRED}@h/?token=${T}"
        );
    }

    #[test]
    fn urls_within_text() {
        assert_eq!(
            redact_url_within("error sending request for url (https://h/x?token=abc): refused"),
            "error sending request for url (https://h/x?token=REDACTED): refused"
        );
    }

    #[test]
    fn known_values() {
        let mut known = Known::default();
        known.insert("TOKEN", "s3cr3t-value");
        known.insert("LONGER", "s3cr3t-value-and-more");
        known.insert("SHORT", "abc");
        assert_eq!(
            known.redact("got s3cr3t-value-and-more and s3cr3t-value, abc"),
            "got <redacted ${LONGER}> and <redacted ${TOKEN}>, abc"
        );
        assert!(matches!(known.redact("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn a_url_after_a_multi_byte_character_is_found_without_splitting_it() {
        assert_eq!(
            redact_url_within("\u{fffd}https://user:pw@h/x"),
            "\u{fffd}https://REDACTED@h/x"
        );
    }

    proptest::proptest! {
        #[test]
        fn never_panics_and_never_grows_a_secret(s in "\\PC{0,60}") {
            let _ = redact_url(&s);
            let _ = redact_url_within(&s);
            let _ = redact_args(&[s.clone(), s.clone()]);
            // A URL's credentials never survive, whatever text is around it.
            let text = format!("{s} https://user:SEKRETpw@h.example/x?token=SEKRETtok {s}");
            let out = redact_url_within(&text);
            proptest::prop_assert!(
                !out.contains("SEKRETpw") && !out.contains("SEKRETtok"),
                "{text} → {out}"
            );
            let args = redact_args(&[format!("--token=SEKRETarg{s}")]);
            proptest::prop_assert!(!args.concat().contains("SEKRETarg"), "{args:?}");
        }

        /// Echoes in any spelling: never a panic, and the value as written
        /// never survives.
        #[test]
        fn known_values_are_redacted_in_any_text(
            // No letter of the mark (`<redacted ${V}>`), so the mark itself
            // cannot spell the value.
            value in "[fghijklmnopqsuvwxyzé%\\\\\"]{4,12}",
            text in "[fghijklmnopqsuvwxyzé%0-9A-F\\\\\"…]{0,40}",
        ) {
            let mut known = Known::default();
            known.insert("V", &value);
            let echoed = format!("{text}{value}{text}");
            let out = known.redact(&echoed);
            proptest::prop_assert!(!out.contains(value.as_str()), "{echoed} → {out}");
            let _ = known.redact(&text);
        }
    }
}
