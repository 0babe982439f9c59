//! Per-server normalisation: text that varies with where a server is
//! observed from (a working directory, a home directory, a user name, a
//! per-user greeting) rewritten before anything is compared, so that it
//! never reads as drift.
//!
//! ```toml
//! [servers.figma.normalize.workdir]
//! token = "cwd"                 # or literal = "…", or regex = "…"
//! pointers = ["/description"]   # where in each tool (RFC 6901); default: all of it
//! tools = ["get_figma_data"]    # which tools; default: every tool
//! replace = "{cwd}"             # default: "{cwd}", "{home}", "{user}" or "{RULE}"
//! ```
//!
//! A rule rewrites every string value at or under each pointer (object
//! keys are left alone). Rules apply in name order. The raw bytes a server
//! sent are never rewritten: the store keeps them beside the rewritten
//! tool, and reports name each rewritten string and its rule.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context as _, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One rule as written under `[servers.NAME.normalize.RULE]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NormalizeRule {
    /// A value of the environment the server is observed from: `"cwd"`
    /// (the server's working directory), `"home"` or `"user"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<Token>,
    /// Text replaced wherever it occurs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub literal: Option<String>,
    /// A regular expression (Rust `regex` syntax) whose matches are
    /// replaced; `$1`, `${name}` in `replace` refer to its groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
    /// Where in each tool: RFC 6901 pointers (default `[""]`, the whole
    /// tool).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pointers: Vec<String>,
    /// Which tools, by name (default: every tool).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// The replacement (default `{cwd}`, `{home}`, `{user}` for a token,
    /// else `{RULE}` with the rule's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace: Option<String>,
}

/// A value of the environment Plumbline observes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Token {
    /// The server's working directory: its `cwd`, else Plumbline's.
    Cwd,
    /// `$HOME`.
    Home,
    /// `$USER` (else `$LOGNAME`).
    User,
}

impl Token {
    fn name(self) -> &'static str {
        match self {
            Token::Cwd => "cwd",
            Token::Home => "home",
            Token::User => "user",
        }
    }
}

/// What the tokens stand for where Plumbline runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Environment {
    pub cwd: Option<String>,
    pub home: Option<String>,
    pub user: Option<String>,
}

impl Environment {
    /// The process's: its working directory (or `server_cwd`, where a
    /// server is started), `$HOME`, `$USER` or `$LOGNAME`.
    pub fn of_process(server_cwd: Option<&PathBuf>) -> Environment {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        // A relative `cwd` is where the server runs relative to Plumbline,
        // and the server itself only ever sees the absolute path.
        let here = std::env::current_dir().ok();
        let cwd = match (server_cwd, &here) {
            (Some(dir), Some(here)) => Some(here.join(dir)),
            (Some(dir), None) => Some(dir.clone()),
            (None, here) => here.clone(),
        };
        Environment {
            cwd: cwd.map(|d| d.display().to_string()).filter(|d| d != "/"),
            home: var("HOME").filter(|h| h != "/"),
            user: var("USER").or_else(|| var("LOGNAME")),
        }
    }

    fn value(&self, t: Token) -> Option<&str> {
        match t {
            Token::Cwd => self.cwd.as_deref(),
            Token::Home => self.home.as_deref(),
            Token::User => self.user.as_deref(),
        }
    }
}

/// Checks the rules of one server; the error names the rule and key.
pub fn check_rules(rules: &BTreeMap<String, NormalizeRule>) -> Result<()> {
    for (name, rule) in rules {
        compile(name, rule).with_context(|| format!("normalize.{name}"))?;
    }
    Ok(())
}

enum Matcher {
    Token(Token),
    Literal(String),
    Regex(regex::Regex),
}

struct Compiled {
    name: String,
    matcher: Matcher,
    pointers: Vec<String>,
    tools: Vec<String>,
    replace: String,
}

fn compile(name: &str, rule: &NormalizeRule) -> Result<Compiled> {
    let matcher = match (&rule.token, &rule.literal, &rule.regex) {
        (Some(t), None, None) => Matcher::Token(*t),
        (None, Some(l), None) => {
            if l.is_empty() {
                bail!("literal: empty text would match everywhere");
            }
            Matcher::Literal(l.clone())
        }
        (None, None, Some(r)) => {
            let re = regex::Regex::new(r).with_context(|| format!("regex {r:?}"))?;
            if re.is_match("") {
                bail!("regex {r:?} matches the empty string, so it would match everywhere");
            }
            Matcher::Regex(re)
        }
        _ => bail!("give exactly one of token, literal or regex"),
    };
    for p in &rule.pointers {
        if !(p.is_empty() || p.starts_with('/')) {
            bail!("pointers: {p:?} is not a JSON pointer (\"\" or starting with \"/\")");
        }
    }
    let replace = rule.replace.clone().unwrap_or_else(|| match &matcher {
        Matcher::Token(t) => format!("{{{}}}", t.name()),
        _ => format!("{{{name}}}"),
    });
    Ok(Compiled {
        name: name.to_owned(),
        matcher,
        pointers: if rule.pointers.is_empty() {
            vec![String::new()]
        } else {
            rule.pointers.clone()
        },
        tools: rule.tools.clone(),
        replace,
    })
}

/// A server's rules, ready to apply.
pub struct Normalizer {
    rules: Vec<Compiled>,
    env: Environment,
}

impl std::fmt::Debug for Normalizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.rules.iter().map(|r| r.name.as_str()).collect();
        f.debug_struct("Normalizer").field("rules", &names).finish()
    }
}

/// A tool as rewritten, and what was rewritten by which rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewritten {
    /// The rewritten tool's JSON.
    pub tool: Vec<u8>,
    /// `(pointer, rule)` for each string rewritten, in document order per
    /// rule.
    pub by: Vec<(String, String)>,
}

impl Normalizer {
    /// `None` when there are no rules. The rules were checked at load.
    pub fn new(rules: &BTreeMap<String, NormalizeRule>, env: Environment) -> Result<Option<Self>> {
        if rules.is_empty() {
            return Ok(None);
        }
        let rules = rules
            .iter()
            .map(|(name, rule)| compile(name, rule).with_context(|| format!("normalize.{name}")))
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(Normalizer { rules, env }))
    }

    /// The tool `raw` as rewritten by the rules, or `None` when no rule
    /// changed it (or it is not a JSON object); an error when the rules
    /// could not read it (the tool is then compared as sent).
    pub fn apply(&self, name: Option<&str>, raw: &[u8]) -> Result<Option<Rewritten>, String> {
        let mut tool: Value = match serde_json::from_slice(raw) {
            Ok(tool) => tool,
            Err(e) => {
                return Err(format!(
                "the normalisation rules could not read the tool, so it is compared as sent: {e}"
            ))
            }
        };
        if !tool.is_object() {
            return Ok(None);
        }
        let mut by = Vec::new();
        for rule in &self.rules {
            if !rule.tools.is_empty() && !name.is_some_and(|n| rule.tools.iter().any(|t| t == n)) {
                continue;
            }
            let needle = match &rule.matcher {
                Matcher::Token(t) => match self.env.value(*t) {
                    Some(v) => Some(v),
                    None => continue,
                },
                Matcher::Literal(l) => Some(l.as_str()),
                Matcher::Regex(_) => None,
            };
            for pointer in &rule.pointers {
                // The name is the tool's identity, never rewritten.
                if pointer == "/name" {
                    continue;
                }
                let Some(at) = tool.pointer_mut(pointer) else {
                    continue;
                };
                let mut path = pointer.clone();
                let mut f = |s: &str| match (&rule.matcher, needle) {
                    (Matcher::Regex(re), _) => match re.replace_all(s, rule.replace.as_str()) {
                        std::borrow::Cow::Borrowed(_) => None,
                        std::borrow::Cow::Owned(o) => Some(o),
                    },
                    (Matcher::Token(_), Some(n)) => replace_bounded(s, n, &rule.replace),
                    (_, Some(n)) if s.contains(n) => Some(s.replace(n, &rule.replace)),
                    _ => None,
                };
                rewrite(at, &mut path, &mut f, &mut |p| {
                    by.push((p, rule.name.clone()))
                });
            }
        }
        if by.is_empty() {
            return Ok(None);
        }
        Ok(Some(Rewritten {
            tool: serde_json::to_vec(&tool).expect("a JSON value serialises"),
            by,
        }))
    }
}

/// Whether `c` continues a word or name: a token's value matches only
/// where it does not (`dev` is not rewritten inside `device`, nor
/// `/home/al` inside `/home/alice`).
fn continues(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '-'
}

/// `s` with each whole occurrence of `needle` replaced, or `None` when
/// there is none.
fn replace_bounded(s: &str, needle: &str, replacement: &str) -> Option<String> {
    let mut out = String::new();
    let mut last = 0;
    let mut from = 0;
    let mut found = false;
    while let Some(i) = s[from..].find(needle).map(|i| i + from) {
        let end = i + needle.len();
        let before = s[..i].chars().next_back();
        let after = s[end..].chars().next();
        if before.is_some_and(continues) || after.is_some_and(continues) {
            from = i + s[i..].chars().next().map_or(1, char::len_utf8);
            continue;
        }
        found = true;
        out.push_str(&s[last..i]);
        out.push_str(replacement);
        last = end;
        from = end;
    }
    if !found {
        return None;
    }
    out.push_str(&s[last..]);
    Some(out)
}

/// Rewrites every string at or under `v` (`path` is its pointer), calling
/// `changed` with the pointer of each string `f` changed.
fn rewrite(
    v: &mut Value,
    path: &mut String,
    f: &mut dyn FnMut(&str) -> Option<String>,
    changed: &mut dyn FnMut(String),
) {
    match v {
        Value::String(s) => {
            if let Some(new) = f(s) {
                if new != *s {
                    *s = new;
                    changed(path.clone());
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                let len = path.len();
                path.push('/');
                path.push_str(&i.to_string());
                rewrite(item, path, f, changed);
                path.truncate(len);
            }
        }
        Value::Object(map) => {
            let top = path.is_empty();
            for (k, item) in map.iter_mut() {
                // The tool's own name is its identity, never rewritten.
                if top && k == "name" {
                    continue;
                }
                let len = path.len();
                path.push('/');
                path.push_str(&k.replace('~', "~0").replace('/', "~1"));
                rewrite(item, path, f, changed);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(toml_text: &str) -> BTreeMap<String, NormalizeRule> {
        toml::from_str(toml_text).expect("rules")
    }

    fn env() -> Environment {
        Environment {
            cwd: Some("/home/alice/work/site".into()),
            home: Some("/home/alice".into()),
            user: Some("alice".into()),
        }
    }

    const TOOL: &str = r#"{"name":"get_figma_data","description":"Files are written under /home/alice/work/site. Ask alice.","inputSchema":{"type":"object","properties":{"out":{"type":"string","description":"Defaults to /home/alice/work/site/out"}}}}"#;

    #[test]
    fn tokens_rewrite_the_working_directory_before_the_home_directory() {
        // Rules apply in name order: "a-cwd" before "b-home" keeps the
        // longer path whole.
        let r = rules(
            "[a-cwd]\ntoken = \"cwd\"\n[b-home]\ntoken = \"home\"\npointers = [\"/description\"]\n[c-user]\ntoken = \"user\"\npointers = [\"/description\"]\n",
        );
        let n = Normalizer::new(&r, env()).unwrap().unwrap();
        let out = n
            .apply(Some("get_figma_data"), TOOL.as_bytes())
            .unwrap()
            .expect("rewritten");
        let v: Value = serde_json::from_slice(&out.tool).unwrap();
        assert_eq!(
            v["description"],
            "Files are written under {cwd}. Ask {user}."
        );
        assert_eq!(
            v["inputSchema"]["properties"]["out"]["description"],
            "Defaults to {cwd}/out"
        );
        assert_eq!(
            out.by,
            [
                ("/description".to_owned(), "a-cwd".to_owned()),
                (
                    "/inputSchema/properties/out/description".to_owned(),
                    "a-cwd".to_owned()
                ),
                ("/description".to_owned(), "c-user".to_owned()),
            ]
        );
    }

    #[test]
    fn literal_and_regex_rules_on_named_pointers_and_tools() {
        let r = rules(
            "[greeting]\nregex = \"Hello, [A-Za-z]+!\"\nreplace = \"Hello!\"\npointers = [\"/description\"]\n[site]\nliteral = \"/home/alice/work/site\"\ntools = [\"other_tool\"]\n",
        );
        let n = Normalizer::new(&r, Environment::default())
            .unwrap()
            .unwrap();
        let tool = r#"{"name":"t","description":"Hello, Alice! Files in /home/alice/work/site."}"#;
        let out = n
            .apply(Some("t"), tool.as_bytes())
            .unwrap()
            .expect("rewritten");
        let v: Value = serde_json::from_slice(&out.tool).unwrap();
        // The literal rule is for another tool only.
        assert_eq!(v["description"], "Hello! Files in /home/alice/work/site.");
        assert_eq!(out.by, [("/description".to_owned(), "greeting".to_owned())]);
        // Nothing to rewrite: no rewritten tool at all.
        assert!(n.apply(Some("t"), br#"{"name":"t"}"#).unwrap().is_none());
    }

    #[test]
    fn tokens_match_whole_names_only_and_never_the_tool_name() {
        let r = rules("[h]\ntoken = \"home\"\n[u]\ntoken = \"user\"\n");
        let env = Environment {
            cwd: None,
            home: Some("/home/dev".into()),
            user: Some("dev".into()),
        };
        let n = Normalizer::new(&r, env).unwrap().unwrap();
        let tool = r#"{"name":"dev","description":"For dev: a device under /home/dev/x and /home/devices.","title":"dev_tools"}"#;
        let out = n
            .apply(Some("dev"), tool.as_bytes())
            .unwrap()
            .expect("rewritten");
        let v: Value = serde_json::from_slice(&out.tool).unwrap();
        assert_eq!(v["name"], "dev");
        assert_eq!(v["title"], "dev_tools");
        assert_eq!(
            v["description"],
            "For {user}: a device under {home}/x and /home/devices."
        );
    }

    #[test]
    fn a_tool_the_rules_cannot_read_is_an_error_not_a_silent_skip() {
        let r = rules("[u]\nliteral = \"x\"\n");
        let n = Normalizer::new(&r, Environment::default())
            .unwrap()
            .unwrap();
        let deep = format!(
            "{{\"name\":\"t\",\"d\":{}{}}}",
            "[".repeat(200),
            "]".repeat(200)
        );
        let e = n.apply(Some("t"), deep.as_bytes()).unwrap_err();
        assert!(e.contains("compared as sent"), "{e}");
    }

    #[test]
    fn bad_rules_are_refused_with_their_name() {
        for (text, want) in [
            ("[x]\n", "exactly one of token, literal or regex"),
            ("[x]\ntoken = \"cwd\"\nliteral = \"a\"\n", "exactly one"),
            ("[x]\nliteral = \"\"\n", "empty text"),
            ("[x]\nregex = \"(\"\n", "regex \"(\""),
            ("[x]\nregex = \"a*\"\n", "matches the empty string"),
            (
                "[x]\nliteral = \"a\"\npointers = [\"description\"]\n",
                "not a JSON pointer",
            ),
        ] {
            let e = check_rules(&rules(text)).unwrap_err();
            let e = format!("{e:#}");
            assert!(e.contains("normalize.x") && e.contains(want), "{text}: {e}");
        }
        assert!(
            toml::from_str::<BTreeMap<String, NormalizeRule>>("[x]\ntoken = \"pwd\"\n").is_err()
        );
    }
}
