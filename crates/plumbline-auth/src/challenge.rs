//! The Bearer challenge of a `WWW-Authenticate` header (RFC 6750 §3, with
//! RFC 9728 §5.1's `resource_metadata`), read generically: parameters in
//! any order, quoted or not, beside challenges of other schemes.

/// What a server's Bearer challenge says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Challenge {
    /// Where the server's protected resource metadata is (RFC 9728).
    pub resource_metadata: Option<String>,
    /// The scopes the request needs, space-separated.
    pub scope: Option<String>,
    /// `invalid_token`, `insufficient_scope`, …
    pub error: Option<String>,
}

impl Challenge {
    /// The scopes the challenge names, each once, in order.
    pub fn scopes(&self) -> Vec<String> {
        split_scopes(self.scope.as_deref().unwrap_or(""))
    }
}

/// Scopes written space-separated (RFC 6749 §3.3), each once, in order.
pub fn split_scopes(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in text.split(' ').filter(|s| !s.is_empty()) {
        if !out.iter().any(|o| o == s) {
            out.push(s.to_owned());
        }
    }
    out
}

/// The `WWW-Authenticate` values of an answer, as text (what
/// [`crate::Authorizer::refused`] reads).
pub fn challenges_of(headers: &reqwest::header::HeaderMap) -> Vec<String> {
    headers
        .get_all(reqwest::header::WWW_AUTHENTICATE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::to_owned)
        .collect()
}

/// The Bearer challenge among the values of `WWW-Authenticate` headers,
/// if there is one.
pub fn parse<'a>(headers: impl IntoIterator<Item = &'a str>) -> Option<Challenge> {
    let mut found: Option<Challenge> = None;
    for header in headers {
        let mut rest = header;
        let mut bearer = false;
        loop {
            rest = rest.trim_start_matches([' ', '\t', ',']);
            if rest.is_empty() {
                break;
            }
            let end = rest
                .find(|c: char| c == '=' || c == ',' || c.is_ascii_whitespace())
                .unwrap_or(rest.len());
            let (token, after) = rest.split_at(end);
            let after_space = after.trim_start_matches([' ', '\t']);
            if let Some(value_text) = after_space.strip_prefix('=') {
                // `name=value`: a parameter of the current scheme.
                let value_text = value_text.trim_start_matches([' ', '\t']);
                let (value, next) = read_value(value_text);
                if bearer {
                    let c = found.get_or_insert_with(Challenge::default);
                    let slot = match token.to_ascii_lowercase().as_str() {
                        "resource_metadata" => Some(&mut c.resource_metadata),
                        "scope" => Some(&mut c.scope),
                        "error" => Some(&mut c.error),
                        _ => None,
                    };
                    if let Some(slot) = slot {
                        if slot.is_none() {
                            *slot = Some(value);
                        }
                    }
                }
                rest = next;
            } else {
                // A scheme name (or a token68 after one, which ends with
                // `=` signs and is skipped with it).
                bearer = token.eq_ignore_ascii_case("bearer");
                if bearer && found.is_none() {
                    found = Some(Challenge::default());
                }
                rest = after;
            }
        }
    }
    found
}

/// A parameter's value: a quoted string (with `\` escapes) or a token;
/// and what follows it.
fn read_value(text: &str) -> (String, &str) {
    if let Some(quoted) = text.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = quoted.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, escaped)) = chars.next() {
                        out.push(escaped);
                    }
                }
                '"' => return (out, &quoted[i + 1..]),
                c => out.push(c),
            }
        }
        return (out, "");
    }
    let end = text.find([',', ' ', '\t']).unwrap_or(text.len());
    (text[..end].to_owned(), &text[end..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_in_any_order_quoted_or_not() {
        let c = parse([r#"Bearer error="invalid_token", error_description="Missing Authorization header", resource_metadata="http://localhost:1/.well-known/oauth-protected-resource/mcp""#]).unwrap();
        assert_eq!(c.error.as_deref(), Some("invalid_token"));
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("http://localhost:1/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(c.scope, None);
        let c = parse([r#"Bearer scope="mcp:basic mcp:write", resource_metadata="http://x/m", error="insufficient_scope""#]).unwrap();
        assert_eq!(c.scopes(), ["mcp:basic", "mcp:write"]);
        assert_eq!(c.error.as_deref(), Some("insufficient_scope"));
        let c = parse(["bearer scope=read,error=insufficient_scope"]).unwrap();
        assert_eq!(c.scope.as_deref(), Some("read"));
        assert_eq!(c.error.as_deref(), Some("insufficient_scope"));
    }

    #[test]
    fn other_schemes_are_passed_over() {
        let c = parse([r#"Basic realm="x", Bearer scope="a""#]).unwrap();
        assert_eq!(c.scope.as_deref(), Some("a"));
        let c = parse([
            r#"Bearer scope="a", Basic realm="b" scope="z""#,
            "DPoP algs=ES256",
        ])
        .unwrap();
        assert_eq!(c.scope.as_deref(), Some("a"));
        assert_eq!(parse([r#"Basic realm="x""#]), None);
        assert_eq!(parse(["Bearer"]), Some(Challenge::default()));
        assert_eq!(
            parse(["Negotiate abc==, Bearer error=x"])
                .unwrap()
                .error
                .as_deref(),
            Some("x")
        );
    }

    #[test]
    fn hostile_values_end() {
        let c = parse([r#"Bearer scope="unterminated \"quote"#]).unwrap();
        assert_eq!(c.scope.as_deref(), Some("unterminated \"quote"));
        assert!(parse(["=,=,,==="]).is_none());
        let long = format!("Bearer {}", "a=b,".repeat(10_000));
        assert!(parse([long.as_str()]).is_some());
    }
}
