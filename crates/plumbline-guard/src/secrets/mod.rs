//! Secret material in a `tools/call`'s arguments: every string of them
//! (keys too), and each one's base64, hex and percent decoding one level
//! down, is looked at for a known secret format ([`rules`]: gitleaks'
//! rules as data) and for a run of the user's own secrets ([`local`]:
//! fingerprints of their keys, credentials and secret-named variables).
//! Deterministic: patterns and exact runs, no score.

pub mod fingerprints;
pub mod local;
pub mod rules;
pub mod runs;

use std::borrow::Cow;
use std::ops::ControlFlow;

use base64::Engine as _;
use serde::Serialize;

/// What kind of secret material was found (never the material).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Material {
    /// A known format: the rule's id (`aws-access-token`, `private-key`).
    Format { rule: String },
    /// A run of one of the user's own secrets: where that secret lives
    /// (`~/.ssh/id_ed25519`, `$GITHUB_TOKEN`).
    Own { source: String },
}

impl Material {
    /// For a person: what it is, without the value.
    pub fn describe(&self) -> String {
        match self {
            Material::Format { rule } => format!("a secret in a known format ({rule})"),
            Material::Own { source } => format!("a piece of your secret in {source}"),
        }
    }
}

/// Secret material found in a call's arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Where, as a JSON pointer into `arguments` (`/sidenote`); for a
    /// key, the object holding it.
    pub path: String,
    /// The material is an object's key, not a value.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub key: bool,
    #[serde(flatten)]
    pub material: Material,
    /// How it was encoded there, when it was (`base64`, `hex`, `percent`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encoding: Option<&'static str>,
}

impl Finding {
    pub fn describe(&self) -> String {
        format!(
            "{}{} {} arguments{}",
            self.material.describe(),
            self.encoding
                .map(|e| format!(", {e}-encoded,"))
                .unwrap_or_default(),
            if self.key { "as a key in" } else { "at" },
            self.path
        )
    }
}

/// The shortest string decoded for a second look.
const MIN_ENCODED: usize = 16;

/// A string as sent, and one level of its decodings.
fn readings(text: &str) -> Vec<(Option<&'static str>, Cow<'_, [u8]>)> {
    let mut out: Vec<(Option<&'static str>, Cow<'_, [u8]>)> =
        vec![(None, Cow::Borrowed(text.as_bytes()))];
    let compact: String;
    let t = text.trim();
    if t.len() >= MIN_ENCODED {
        // Base64 (standard or URL-safe, padded or not, wrapped in lines).
        if t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+/=-_\r\n".contains(&b))
        {
            compact = t.chars().filter(|c| !c.is_ascii_whitespace()).collect();
            let unpadded = compact.trim_end_matches('=');
            let engines = [
                base64::engine::general_purpose::STANDARD_NO_PAD,
                base64::engine::general_purpose::URL_SAFE_NO_PAD,
            ];
            if let Some(bytes) = engines.iter().find_map(|e| e.decode(unpadded).ok()) {
                out.push((Some("base64"), Cow::Owned(bytes)));
            }
        }
        if t.len().is_multiple_of(2) && t.bytes().all(|b| b.is_ascii_hexdigit()) {
            let bytes = (0..t.len())
                .step_by(2)
                .filter_map(|i| u8::from_str_radix(&t[i..i + 2], 16).ok())
                .collect();
            out.push((Some("hex"), Cow::Owned(bytes)));
        }
    }
    if memchr::memchr(b'%', text.as_bytes()).is_some() {
        let bytes: Vec<u8> = percent_decode(text.as_bytes());
        if bytes != text.as_bytes() {
            out.push((Some("percent"), Cow::Owned(bytes)));
        }
    }
    out
}

fn percent_decode(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'%' {
            if let Some(b) = s
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                out.push(b);
                i += 3;
                continue;
            }
        } else if s[i] == b'+' {
            out.push(b' ');
            i += 1;
            continue;
        }
        out.push(s[i]);
        i += 1;
    }
    out
}

/// Looks at one text (a string of the arguments, or a decoding of one).
pub fn inspect(
    bytes: &[u8],
    rules: &rules::Rules,
    own: Option<&local::Sources>,
) -> Option<Material> {
    // The text's runs of token bytes, read once for both checks.
    let least = own.map_or(runs::RUN, |o| o.least_run().min(runs::RUN));
    let mut long = Vec::new();
    runs::runs(bytes, least, &mut long);
    if let Some(source) = own.and_then(|o| o.found_in_runs(bytes, &long)) {
        return Some(Material::Own {
            source: source.to_owned(),
        });
    }
    rules
        .find_in_runs(bytes, &long)
        .map(|f| Material::Format { rule: f.rule })
}

/// The first secret material in `arguments` (raw JSON, read leniently),
/// skipping the strings under a path `allowed` accepts.
pub fn scan(
    arguments: &[u8],
    rules: &rules::Rules,
    own: Option<&local::Sources>,
    allowed: &dyn Fn(&str) -> bool,
) -> Result<Option<Finding>, String> {
    let mut found = None;
    let _stopped = crate::message::visit_strings(arguments, &mut |path, text, key| {
        if allowed(path) {
            return ControlFlow::Continue(());
        }
        for (encoding, bytes) in readings(text) {
            if let Some(material) = inspect(&bytes, rules, own) {
                found = Some(Finding {
                    path: path.to_owned(),
                    key,
                    material,
                    encoding,
                });
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    })?;
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_are_read_one_level_down() {
        let rules = rules::Rules::builtin();
        let token = format!("ghp_{}", "x7Fq2LmN9pR4sT6vW8yZ0aB3cD5eG1hJ2kL4");
        let b64 = base64::engine::general_purpose::STANDARD.encode(format!("token={token}"));
        let hex: String = token.bytes().map(|b| format!("{b:02x}")).collect();
        let pct: String = format!("t%3D{}", token.replace('_', "%5F"));
        let args = serde_json::json!({"plain": "hello", "a": {"b": [b64]}, "h": hex, "p": pct, "k": {token.clone(): 1}});
        let mut paths = Vec::new();
        for key in ["a", "h", "p", "k"] {
            let only = serde_json::json!({key: args[key].clone()}).to_string();
            let f = scan(only.as_bytes(), rules, None, &|_| false)
                .unwrap()
                .expect(key);
            assert_eq!(
                f.material,
                Material::Format {
                    rule: "github-pat".into()
                },
                "{key}"
            );
            paths.push((f.path, f.encoding));
        }
        assert_eq!(
            paths,
            [
                ("/a/b/0".to_owned(), Some("base64")),
                ("/h".to_owned(), Some("hex")),
                ("/p".to_owned(), Some("percent")),
                ("/k".to_owned(), None),
            ]
        );
        // An allowed path is not looked at; a plain value is fine.
        let only = serde_json::json!({"token": token}).to_string();
        assert_eq!(
            scan(only.as_bytes(), rules, None, &|p| p == "/token").unwrap(),
            None
        );
        assert_eq!(
            scan(br#"{"q":"SELECT 1"}"#, rules, None, &|_| false).unwrap(),
            None
        );
        // The finding never shows the value.
        let f = scan(
            serde_json::json!({"x": token}).to_string().as_bytes(),
            rules,
            None,
            &|_| false,
        )
        .unwrap()
        .unwrap();
        assert!(!f.describe().contains("x7Fq2"), "{}", f.describe());
        assert!(!serde_json::to_string(&f).unwrap().contains("x7Fq2"));
    }
}
