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

    /// `text` with every known value replaced.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for (value, name) in &self.values {
            if out.contains(value.as_str()) {
                out = Cow::Owned(out.replace(value.as_str(), &format!("<redacted ${{{name}}}>")));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        }
    }
}
