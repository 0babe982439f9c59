//! `plumbline.lock`: the reviewed baseline of every server's tools.
//!
//! Made for reading in a `git diff`: one `[[servers.NAME.tools]]` block
//! per tool, sorted by name, holding the tool's full definition in RFC 8785
//! canonical form on one line and its SHA-256. A changed tool shows as a
//! change to its own block alone; the same tools always give the same
//! bytes, whatever order or formatting the server used.
//!
//! No database here: the lock is a file, read and written by `pin`, `check`
//! and the guard alike. [`plan`] holds what they decide with it: which
//! elements of a listing can be pinned, the drift from the lock to a
//! listing, and the plan of a `pin --update`.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context as _, Result};
use plumbline_base::canonical::{canonicalize, canonicalize_value};
use plumbline_base::digest::digest;
use plumbline_taxonomy::json::{parse_tool, Value};
use plumbline_taxonomy::sanitize::for_terminal;
use plumbline_taxonomy::Taxonomy;
use serde::{Deserialize, Serialize};

pub mod plan;

pub use plan::{pin_tools, plan_update, split_readable, NotPinned, Pinned, Update, UpdateKind};

pub const LOCK_VERSION: u32 = 1;

/// The largest lock file read: every server's tools at the client's
/// listing bound, with room to spare.
pub const MAX_LOCK_BYTES: u64 = 256 << 20;

const HEADER: &str = "# plumbline.lock: the reviewed definitions of each MCP server's tools.\n# Written by `plumbline pin`; checked by `plumbline check`. Review changes\n# to it like code. Each definition is RFC 8785 canonical JSON.\n\n";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockFile {
    pub version: u32,
    /// The taxonomy the pinned grades refer to.
    pub taxonomy: String,
    /// `sha256:` of the imperative phrase list in force when pinned.
    pub imperatives: String,
    #[serde(default)]
    pub servers: BTreeMap<String, LockedServer>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedServer {
    /// Transport and command or URL, as canonical JSON; never a secret.
    pub identity: String,
    /// The server's `instructions` (its handshake's text for the model),
    /// as pinned; absent when it sent none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    #[serde(default)]
    pub tools: Vec<LockedTool>,
    /// The server's prompts, each in the shape of a tool
    /// ([`plan::prompt_as_tool`]) so that the taxonomy grades their text
    /// and arguments as it grades a tool's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prompts: Vec<LockedTool>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedTool {
    pub name: String,
    pub sha256: String,
    pub definition: String,
}

impl LockedTool {
    /// Pins one tool from the bytes a server sent.
    pub fn from_raw(name: &str, raw: &[u8]) -> Result<LockedTool> {
        let value = parse_tool(raw).map_err(|e| anyhow::anyhow!("tool {name:?}: {e}"))?;
        LockedTool::from_value(name, &value)
    }

    /// Pins one tool already parsed.
    pub fn from_value(name: &str, value: &Value) -> Result<LockedTool> {
        let canonical = canonicalize_value(value).with_context(|| format!("tool {name:?}"))?;
        let sha256 = digest(&canonical).to_hex();
        let definition = String::from_utf8(canonical).context("canonical JSON is UTF-8")?;
        Ok(LockedTool {
            name: name.to_owned(),
            sha256,
            definition,
        })
    }

    /// The parsed definition.
    pub fn value(&self) -> Result<Value> {
        parse_tool(self.definition.as_bytes())
            .map_err(|e| anyhow::anyhow!("tool {:?}: {e}", self.name))
    }
}

impl LockedServer {
    /// The pinned tools, parsed, in the lock's order.
    pub fn parsed(&self) -> Result<Vec<(String, Value)>> {
        self.tools
            .iter()
            .map(|t| Ok((t.name.clone(), t.value()?)))
            .collect()
    }
}

/// How a server is reached (transport, command or URL; never a secret) in
/// the canonical form the lock keeps, so that equal identities are equal
/// strings.
pub fn canonical_identity(identity: &serde_json::Value) -> Result<String> {
    let canonical = canonicalize(identity.to_string().as_bytes())?;
    Ok(String::from_utf8(canonical)?)
}

/// The `sha256:` digest of the imperative list `taxonomy` grades with.
pub fn imperatives_digest(taxonomy: Taxonomy) -> String {
    phrases_digest(match taxonomy {
        Taxonomy::V1 => plumbline_taxonomy::phrases::IMPERATIVES_V1,
        Taxonomy::V2 => plumbline_taxonomy::lexicon::IMPERATIVES_V2,
        Taxonomy::V3 => plumbline_taxonomy::lexicon::IMPERATIVES_V3,
    })
}

/// The `sha256:` digest of a phrase list's text.
pub fn phrases_digest(text: &str) -> String {
    format!("sha256:{}", digest(text.as_bytes()).to_hex())
}

impl LockFile {
    /// An empty lock for tools pinned under `taxonomy`.
    pub fn new(taxonomy: Taxonomy) -> LockFile {
        LockFile {
            version: LOCK_VERSION,
            taxonomy: taxonomy.id().to_owned(),
            imperatives: imperatives_digest(taxonomy),
            servers: BTreeMap::new(),
        }
    }

    /// The taxonomy the lock was pinned under (checked by [`LockFile::load`]).
    pub fn taxonomy(&self) -> Taxonomy {
        self.taxonomy.parse().unwrap_or_default()
    }

    /// Records that the lock's grades refer to `taxonomy`.
    pub fn set_taxonomy(&mut self, taxonomy: Taxonomy) {
        self.taxonomy = taxonomy.id().to_owned();
        self.imperatives = imperatives_digest(taxonomy);
    }

    pub fn load(path: &Path) -> Result<LockFile> {
        if !path.exists() {
            bail!(
                "there is no {}: run `plumbline pin` to write one from the current tools",
                path.display()
            );
        }
        let text = plumbline_base::file::read_file(path, MAX_LOCK_BYTES)?;
        // A reviewed file must show what it holds: a hidden, bidi or tag
        // character is accepted only as a `\u` escape (as `pin` writes it).
        for (i, line) in text.lines().enumerate() {
            if let Some(c) = line
                .chars()
                .find(|&c| plumbline_base::sanitize::needs_escape(c) && c != '\r')
            {
                bail!(
                    "{}: line {}: a raw {} character; a lock file holds such characters only as \\u escapes (pin again, or write it as \\u{:04X})",
                    path.display(),
                    i + 1,
                    plumbline_base::sanitize::escape_char_for_message(c),
                    c as u32
                );
            }
        }
        let lock: LockFile =
            toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        if lock.version != LOCK_VERSION {
            bail!(
                "{}: lock file version {} (this plumbline reads {LOCK_VERSION})",
                path.display(),
                lock.version
            );
        }
        let taxonomy: Taxonomy = lock.taxonomy.parse().map_err(|e| {
            anyhow::anyhow!(
                "{}: taxonomy: {e} (taxonomy-v1 or taxonomy-v2)",
                path.display()
            )
        })?;
        if lock.taxonomy != taxonomy.id() {
            bail!(
                "{}: taxonomy {:?}: write it as {:?}",
                path.display(),
                lock.taxonomy,
                taxonomy.id()
            );
        }
        if lock.imperatives != imperatives_digest(taxonomy) {
            bail!(
                "{}: imperatives {} is not the digest of {taxonomy}'s imperative list ({}): pin again with this plumbline",
                path.display(),
                lock.imperatives,
                imperatives_digest(taxonomy)
            );
        }
        // A hand-edited definition must still match its digest, carry the
        // name it is filed under, and appear once.
        for (server, s) in &lock.servers {
            for (kind, entries) in [("tools", &s.tools), ("prompts", &s.prompts)] {
                let mut seen = std::collections::BTreeSet::new();
                // Names as a terminal may show them.
                let at = |t: &LockedTool| {
                    format!(
                        "{}: {}/{}{}",
                        path.display(),
                        for_terminal(server, false),
                        if kind == "prompts" { "prompt " } else { "" },
                        for_terminal(&t.name, false)
                    )
                };
                for t in entries {
                    if !seen.insert((&t.name, &t.sha256)) {
                        bail!("{}: the same definition is pinned twice", at(t));
                    }
                    let named = t
                        .value()?
                        .get("name")
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                    if named.as_deref() != Some(t.name.as_str()) {
                        bail!(
                            "{}: the definition's name is {}",
                            at(t),
                            for_terminal(&format!("{:?}", named.unwrap_or_default()), false)
                        );
                    }
                    let canonical = canonicalize(t.definition.as_bytes())
                        .map_err(|e| anyhow::anyhow!("{}: {e}", at(t)))?;
                    if digest(&canonical).to_hex() != t.sha256 {
                        bail!(
                            "{}: sha256 does not match the definition (edited by hand?)",
                            at(t)
                        );
                    }
                }
            }
        }
        Ok(lock)
    }

    /// The file's text: deterministic for equal contents. Written here, not
    /// by a generic TOML writer, so that a string holding a hidden or bidi
    /// character is a basic string with that character as a `\u` escape:
    /// a reviewed lock file cannot show one thing and hold another.
    pub fn render(&self) -> Result<String> {
        use std::fmt::Write as _;
        let mut sorted = self.clone();
        for s in sorted.servers.values_mut() {
            s.tools.sort();
            s.prompts.sort();
        }
        let mut out = String::from(HEADER);
        let _ = writeln!(out, "version = {}", sorted.version);
        let _ = writeln!(out, "taxonomy = {}", toml_string(&sorted.taxonomy));
        let _ = writeln!(out, "imperatives = {}", toml_string(&sorted.imperatives));
        for (name, server) in &sorted.servers {
            let key = toml_key(name);
            let _ = write!(
                out,
                "\n[servers.{key}]\nidentity = {}\n",
                toml_string(&server.identity)
            );
            if let Some(text) = &server.instructions {
                let _ = writeln!(out, "instructions = {}", toml_string(text));
            }
            for (kind, entries) in [("tools", &server.tools), ("prompts", &server.prompts)] {
                for t in entries {
                    let _ = write!(
                        out,
                        "\n[[servers.{key}.{kind}]]\nname = {}\nsha256 = {}\ndefinition = {}\n",
                        toml_string(&t.name),
                        toml_string(&t.sha256),
                        toml_string(&t.definition)
                    );
                }
            }
        }
        // What was written must read back as what was meant.
        let back: LockFile = toml::from_str(&out).context("writing the lock file")?;
        if back != sorted {
            bail!("writing the lock file: it would not read back as written");
        }
        Ok(out)
    }

    /// Writes atomically: a reader never sees half a lock file.
    pub fn save(&self, path: &Path) -> Result<()> {
        let text = self.render()?;
        let tmp = path.with_extension("lock.tmp");
        std::fs::write(&tmp, &text).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("replacing {}", path.display()))?;
        Ok(())
    }
}

/// A TOML string: as a generic writer would spell it, unless it holds a
/// character [`needs_escape`](plumbline_base::sanitize::needs_escape) names;
/// then a basic string with each such character as a `\u` escape.
fn toml_string(s: &str) -> String {
    use plumbline_base::sanitize::needs_escape;
    // A line break is escaped too: a generic writer would make a multi-line
    // string of it, and a name holding `\n[servers.x]` would read, in a
    // diff, as lines of the file.
    if !s
        .chars()
        .any(|c| needs_escape(c) || matches!(c, '\n' | '\r' | '\t'))
    {
        return toml::Value::String(s.to_owned()).to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) && (c as u32) > 0xFFFF => {
                out.push_str(&format!("\\U{:08X}", c as u32));
            }
            c if needs_escape(c) => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A TOML key: bare when it can be, else a quoted string.
fn toml_key(k: &str) -> String {
    if !k.is_empty()
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        k.to_owned()
    } else {
        toml_string(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 23, item 15: a line break in a name cannot forge lines of the
    /// file, and a hand-written lock with a raw hidden character is refused.
    #[test]
    fn a_name_cannot_forge_lines_and_raw_hidden_characters_are_refused() {
        let name = "x\n[servers.evil]\nidentity = \"{}\"";
        let raw = serde_json::json!({"name": name, "description": "d"}).to_string();
        let mut lock = LockFile::new(Taxonomy::V1);
        lock.servers.insert(
            "shop".into(),
            LockedServer {
                identity: "{}".into(),
                tools: vec![LockedTool::from_raw(name, raw.as_bytes()).unwrap()],
                ..Default::default()
            },
        );
        let text = lock.render().unwrap();
        assert!(
            !text.lines().any(|l| l.starts_with("[servers.evil")),
            "{text}"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plumbline.lock");
        std::fs::write(&path, &text).unwrap();
        assert_eq!(LockFile::load(&path).unwrap(), lock);
        for hidden in ['\u{202e}', '\u{200b}', '\u{e0041}'] {
            let forged = text.replacen("description", &format!("desc{hidden}ription"), 1);
            std::fs::write(&path, forged).unwrap();
            let err = format!("{:#}", LockFile::load(&path).unwrap_err());
            assert!(err.contains("a raw") && err.contains("line "), "{err}");
        }
    }

    #[test]
    fn hidden_and_bidi_characters_are_escaped_in_the_file_and_read_back() {
        let tool = LockedTool::from_raw(
            "t",
            "{\"name\":\"t\",\"description\":\"safe \u{202e}evil\u{9b}31m \u{e0041} \u{2066}x\u{2069}\"}"
                .as_bytes(),
        )
        .unwrap();
        let mut lock = LockFile {
            version: LOCK_VERSION,
            taxonomy: "taxonomy-v1".into(),
            imperatives: "sha256:00".into(),
            servers: BTreeMap::new(),
        };
        lock.servers.insert(
            "odd.name".into(),
            LockedServer {
                identity: "{}".into(),
                tools: vec![tool.clone()],
                ..Default::default()
            },
        );
        let text = lock.render().unwrap();
        assert!(
            !text.chars().any(plumbline_base::sanitize::needs_escape),
            "{text}"
        );
        assert!(
            text.contains("\\u202E") && text.contains("\\u009B") && text.contains("\\U000E0041"),
            "{text}"
        );
        assert!(
            text.contains("[servers.'odd.name']") || text.contains("[servers.\"odd.name\"]"),
            "{text}"
        );
        let back: LockFile = toml::from_str(&text).unwrap();
        assert_eq!(back.servers["odd.name"].tools[0], tool);
        // Plain text keeps the usual spelling.
        lock.servers.clear();
        lock.servers.insert(
            "shop".into(),
            LockedServer {
                identity: "{\"a\":1}".into(),
                tools: vec![],
                ..Default::default()
            },
        );
        let plain = lock.render().unwrap();
        assert!(
            plain.contains("[servers.shop]\nidentity = '{\"a\":1}'"),
            "{plain}"
        );
    }

    #[test]
    fn the_same_tools_give_the_same_bytes_whatever_the_key_order() {
        let a = LockedTool::from_raw(
            "t",
            br#"{"name":"t","description":"D","inputSchema":{"type":"object"}}"#,
        )
        .unwrap();
        let b = LockedTool::from_raw(
            "t",
            br#"{ "inputSchema": {"type":"object"}, "description": "D", "name": "t" }"#,
        )
        .unwrap();
        assert_eq!(a, b);
        let mut lock = LockFile::new(Taxonomy::V1);
        lock.servers.insert(
            "s".into(),
            LockedServer {
                identity: "{}".into(),
                tools: vec![LockedTool::from_raw("z", br#"{"name":"z"}"#).unwrap(), a],
                ..Default::default()
            },
        );
        let text = lock.render().unwrap();
        let mut reordered = lock.clone();
        reordered.servers.get_mut("s").unwrap().tools.reverse();
        assert_eq!(reordered.render().unwrap(), text);
        // Round trip, byte for byte.
        let parsed: LockFile = toml::from_str(&text).unwrap();
        assert_eq!(parsed.render().unwrap(), text);
    }
}
