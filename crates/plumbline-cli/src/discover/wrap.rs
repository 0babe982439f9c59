//! `discover --wrap` and `--unwrap`: each stdio server in the clients'
//! configuration files runs under `plumbline guard`, and back.
//!
//! The edit is made on the file's own bytes: only the `command` and `args`
//! values of a stdio entry are replaced, so every other key, comment and
//! the file's formatting stay as they were. Before the first edit the file
//! is copied to `FILE.plumbline-backup`; `--unwrap` puts that copy back
//! byte for byte while the file still holds exactly what `--wrap` wrote,
//! and otherwise (the client or a person changed it since) undoes the
//! wrapping entry by entry.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};

use super::jsonc::strip_jsonc;
use super::locations::locations;
use super::Layout;

/// The suffix of the copy `--wrap` keeps of each file it edits.
pub(crate) const BACKUP_SUFFIX: &str = ".plumbline-backup";

/// A JSON value's place in the text, and for containers their members.
#[derive(Debug)]
struct Node {
    start: usize,
    end: usize,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Object(Vec<(String, Node)>),
    Array(Vec<Node>),
    Scalar,
}

impl Node {
    fn get(&self, key: &str) -> Option<&Node> {
        match &self.kind {
            Kind::Object(members) => members.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn members(&self) -> &[(String, Node)] {
        match &self.kind {
            Kind::Object(m) => m,
            _ => &[],
        }
    }
}

/// A JSON reader that keeps where each value is (over text whose comments
/// and trailing commas were blanked, so offsets are the file's own).
struct Spans<'a> {
    s: &'a [u8],
    i: usize,
    depth: usize,
}

impl Spans<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn value(&mut self) -> Result<Node> {
        self.depth += 1;
        if self.depth > 256 {
            bail!("nested too deeply");
        }
        self.ws();
        let start = self.i;
        let kind = match self.s.get(self.i) {
            Some(b'{') => {
                self.i += 1;
                let mut members = Vec::new();
                loop {
                    self.ws();
                    if self.s.get(self.i) == Some(&b'}') {
                        self.i += 1;
                        break;
                    }
                    let key_start = self.i;
                    self.string()?;
                    let key: String = serde_json::from_slice(&self.s[key_start..self.i])
                        .context("an object key")?;
                    self.ws();
                    if self.s.get(self.i) != Some(&b':') {
                        bail!("expected ':' at byte {}", self.i);
                    }
                    self.i += 1;
                    let v = self.value()?;
                    members.push((key, v));
                    self.ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {}
                        _ => bail!("expected ',' or '}}' at byte {}", self.i),
                    }
                }
                Kind::Object(members)
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                loop {
                    self.ws();
                    if self.s.get(self.i) == Some(&b']') {
                        self.i += 1;
                        break;
                    }
                    items.push(self.value()?);
                    self.ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b']') => {}
                        _ => bail!("expected ',' or ']' at byte {}", self.i),
                    }
                }
                Kind::Array(items)
            }
            Some(b'"') => {
                self.string()?;
                Kind::Scalar
            }
            Some(_) => {
                while self.i < self.s.len()
                    && !matches!(self.s[self.i], b',' | b'}' | b']')
                    && !self.s[self.i].is_ascii_whitespace()
                {
                    self.i += 1;
                }
                if self.i == start {
                    bail!("a value expected at byte {start}");
                }
                Kind::Scalar
            }
            None => bail!("the text ends where a value was expected"),
        };
        self.depth -= 1;
        Ok(Node {
            start,
            end: self.i,
            kind,
        })
    }

    fn string(&mut self) -> Result<()> {
        if self.s.get(self.i) != Some(&b'"') {
            bail!("expected a string at byte {}", self.i);
        }
        self.i += 1;
        while let Some(&b) = self.s.get(self.i) {
            self.i += 1;
            match b {
                b'\\' => self.i += 1,
                b'"' => return Ok(()),
                _ => {}
            }
        }
        bail!("a string does not end")
    }
}

/// The server maps of a file, by its layout, each with its Claude Code
/// project scope (empty elsewhere), as `discover` names them.
fn server_maps<'a>(root: &'a Node, layout: Layout) -> Vec<(String, &'a Node)> {
    let at = |path: &[&str]| -> Option<&'a Node> { path.iter().try_fold(root, |n, k| n.get(k)) };
    let top = |n: Option<&'a Node>| {
        n.into_iter()
            .map(|n| (String::new(), n))
            .collect::<Vec<_>>()
    };
    match layout {
        Layout::McpServers | Layout::GeminiSettings => top(at(&["mcpServers"])),
        Layout::VsCodeMcp => top(at(&["servers"])),
        Layout::VsCodeSettings => top(at(&["mcp", "servers"])),
        Layout::ClaudeJson => {
            let mut maps = top(at(&["mcpServers"]));
            if let Some(projects) = root.get("projects") {
                maps.extend(
                    projects
                        .members()
                        .iter()
                        .filter_map(|(dir, p)| p.get("mcpServers").map(|m| (dir.clone(), m))),
                );
            }
            maps
        }
    }
}

/// A stdio entry's command and arguments as strings, when they are.
fn command_of(text: &str, entry: &Node) -> Option<(String, Vec<String>)> {
    let command: String =
        serde_json::from_str(&text[entry.get("command")?.start..entry.get("command")?.end]).ok()?;
    let args = match entry.get("args").map(|a| &a.kind) {
        None => Vec::new(),
        Some(Kind::Array(items)) => items
            .iter()
            .map(|i| serde_json::from_str::<String>(&text[i.start..i.end]).ok())
            .collect::<Option<_>>()?,
        Some(_) => return None,
    };
    Some((command, args))
}

/// What `--wrap` does to one file.
#[derive(Debug)]
pub(crate) struct FileEdit {
    pub file: PathBuf,
    pub before: String,
    pub after: String,
    /// The entries wrapped, by their names in the file.
    pub wrapped: Vec<String>,
    /// Remote entries, with the guard command to run for them.
    pub remote: Vec<(String, String)>,
    /// Entries `discover` does not import (disabled, unreadable): not
    /// wrapped, since the guard would know them by no name.
    pub unnamed: Vec<String>,
    /// Entries already under the guard, left as they are.
    pub already: Vec<String>,
}

/// How the guard is started for a wrapped entry.
pub(crate) struct GuardCommand {
    /// The `plumbline` executable, absolute (a client may not have our PATH).
    pub exe: String,
    /// `--config` and, when there is one, `--lock`: absolute, since a
    /// client starts servers from a directory of its own.
    pub config: PathBuf,
    pub lock: Option<PathBuf>,
}

fn json_string(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

/// The edits `--wrap` would make to every file `discover` reads.
pub(crate) fn plan(home: &Path, project: &Path, guard: &GuardCommand) -> Result<Vec<FileEdit>> {
    let (found, _) = super::discover(home, project);
    let names: std::collections::HashMap<(PathBuf, String, String), String> = found
        .iter()
        .flat_map(|f| {
            f.origins.iter().map(move |o| {
                (
                    (o.file.clone(), o.scope.clone(), o.key.clone()),
                    f.name.clone(),
                )
            })
        })
        .collect();
    let mut edits = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for location in locations(home, project) {
        let key = std::fs::canonicalize(&location.path).unwrap_or_else(|_| location.path.clone());
        if !seen.insert(key) {
            continue;
        }
        let Ok(before) = std::fs::read_to_string(&location.path) else {
            continue;
        };
        if before.trim().is_empty() {
            continue;
        }
        let stripped = if location.jsonc {
            strip_jsonc(&before)
        } else {
            before.clone()
        };
        let root = Spans {
            s: stripped.as_bytes(),
            i: 0,
            depth: 0,
        }
        .value()
        .with_context(|| format!("{}: not JSON", location.path.display()))?;
        let mut replacements: Vec<(usize, usize, String)> = Vec::new();
        let mut wrapped = Vec::new();
        let mut remote = Vec::new();
        let mut unnamed = Vec::new();
        let mut already = Vec::new();
        for (scope, map) in server_maps(&root, location.layout) {
            for (key, entry) in map.members() {
                let text = |n: &Node| &before[n.start..n.end];
                if let Some(url) = entry.get("url").or_else(|| entry.get("httpUrl")) {
                    let url: String = serde_json::from_str(text(url)).unwrap_or_default();
                    remote.push((
                        key.clone(),
                        format!("plumbline guard --listen 127.0.0.1:PORT --upstream {url}"),
                    ));
                    continue;
                }
                let Some(command) = entry.get("command") else {
                    continue;
                };
                let Some((command_text, args_text)) = command_of(&before, entry) else {
                    continue;
                };
                if crate::guard::wrapped(&command_text, &args_text).is_some() {
                    already.push(key.clone());
                    continue;
                }
                // The name discover gave this entry (unique across the
                // clients, `memory-vscode` beside Cursor's `memory`): the
                // guard's key in plumbline.toml, the lock and the history.
                let Some(name) = names.get(&(location.path.clone(), scope.clone(), key.clone()))
                else {
                    unnamed.push(key.clone());
                    continue;
                };
                let args = entry.get("args");
                // No `--` before the server's command: some clients (the
                // MCP Inspector CLI) take a bare `--` among the arguments
                // for their own end of options.
                let mut new_args = vec![
                    json_string("guard"),
                    json_string("--server"),
                    json_string(name),
                    json_string("--config"),
                    json_string(&guard.config.display().to_string()),
                ];
                if let Some(lock) = &guard.lock {
                    new_args.push(json_string("--lock"));
                    new_args.push(json_string(&lock.display().to_string()));
                }
                // The original command and arguments, as written.
                new_args.push(text(command).to_owned());
                if let Some(Kind::Array(items)) = args.map(|a| &a.kind) {
                    new_args.extend(items.iter().map(|i| text(i).to_owned()))
                }
                let new_args = format!("[{}]", new_args.join(", "));
                replacements.push((command.start, command.end, json_string(&guard.exe)));
                match args {
                    Some(a) => replacements.push((a.start, a.end, new_args)),
                    None => replacements.push((
                        command.end,
                        command.end,
                        format!(", \"args\": {new_args}"),
                    )),
                }
                wrapped.push(key.clone());
            }
        }
        if replacements.is_empty() && remote.is_empty() && unnamed.is_empty() && already.is_empty()
        {
            continue;
        }
        replacements.sort_by_key(|r| std::cmp::Reverse(r.0));
        let mut after = before.clone();
        for (start, end, with) in replacements {
            after.replace_range(start..end, &with);
        }
        edits.push(FileEdit {
            file: location.path,
            before,
            after,
            wrapped,
            remote,
            unnamed,
            already,
        });
    }
    Ok(edits)
}

/// Writes the edits: a backup first (kept from the first wrap), then the
/// file, replaced atomically.
pub(crate) fn apply(edits: &[FileEdit]) -> Result<()> {
    for e in edits.iter().filter(|e| e.before != e.after) {
        let backup = backup_of(&e.file);
        if !backup.exists() {
            std::fs::write(&backup, &e.before)
                .with_context(|| format!("writing {}", backup.display()))?;
        }
        write_atomically(&e.file, &e.after)?;
        // What --wrap wrote, so --unwrap can tell an untouched file.
        std::fs::write(wrapped_marker(&e.file), digest(&e.after))
            .with_context(|| format!("writing {}", wrapped_marker(&e.file).display()))?;
    }
    Ok(())
}

fn backup_of(file: &Path) -> PathBuf {
    let mut s = file.as_os_str().to_owned();
    s.push(BACKUP_SUFFIX);
    PathBuf::from(s)
}

fn wrapped_marker(file: &Path) -> PathBuf {
    let mut s = backup_of(file).into_os_string();
    s.push(".wrapped-sha256");
    PathBuf::from(s)
}

fn digest(text: &str) -> String {
    plumbline_base::digest::digest(text.as_bytes()).to_hex()
}

fn write_atomically(file: &Path, text: &str) -> Result<()> {
    let mut tmp = file.as_os_str().to_owned();
    tmp.push(".plumbline-tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    // Keep the file's permissions (a settings file may be private).
    if let Ok(meta) = std::fs::metadata(file) {
        let _ = std::fs::set_permissions(&tmp, meta.permissions());
    }
    std::fs::rename(&tmp, file).with_context(|| format!("replacing {}", file.display()))
}

/// What `--unwrap` did to one file.
#[derive(Debug)]
pub(crate) struct Restored {
    pub file: PathBuf,
    /// The backup put back byte for byte, or the entries undone one by one
    /// (the file changed since it was wrapped).
    pub whole: bool,
}

/// Undoes `--wrap` in every file `discover` reads that has a backup.
pub(crate) fn unwrap(home: &Path, project: &Path, dry_run: bool) -> Result<Vec<Restored>> {
    let mut done = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for location in locations(home, project) {
        let key = std::fs::canonicalize(&location.path).unwrap_or_else(|_| location.path.clone());
        if !seen.insert(key) {
            continue;
        }
        let backup = backup_of(&location.path);
        if !backup.exists() {
            continue;
        }
        let now = std::fs::read_to_string(&location.path).unwrap_or_default();
        let marker = std::fs::read_to_string(wrapped_marker(&location.path)).unwrap_or_default();
        let whole = marker.trim() == digest(&now);
        if !dry_run {
            if whole {
                let original = std::fs::read(&backup)
                    .with_context(|| format!("reading {}", backup.display()))?;
                let text = String::from_utf8(original).context("the backup is not UTF-8")?;
                write_atomically(&location.path, &text)?;
            } else {
                let undone = undo_entries(&now, location.jsonc, location.layout)
                    .with_context(|| format!("{}", location.path.display()))?;
                write_atomically(&location.path, &undone)?;
            }
            let _ = std::fs::remove_file(&backup);
            let _ = std::fs::remove_file(wrapped_marker(&location.path));
        }
        done.push(Restored {
            file: location.path,
            whole,
        });
    }
    Ok(done)
}

/// Undoes each wrapped entry of `text`: `command` becomes the argument
/// after `--`, `args` the ones after that.
fn undo_entries(text: &str, jsonc: bool, layout: Layout) -> Result<String> {
    let stripped = if jsonc {
        strip_jsonc(text)
    } else {
        text.to_owned()
    };
    let root = Spans {
        s: stripped.as_bytes(),
        i: 0,
        depth: 0,
    }
    .value()?;
    let mut replacements = Vec::new();
    for (_, map) in server_maps(&root, layout) {
        for (_, entry) in map.members() {
            let (Some(command), Some(args)) = (entry.get("command"), entry.get("args")) else {
                continue;
            };
            let Kind::Array(items) = &args.kind else {
                continue;
            };
            let Some(w) = command_of(text, entry).and_then(|(c, a)| crate::guard::wrapped(&c, &a))
            else {
                continue;
            };
            // A guard of a configured server holds no command of its own
            // to put back; nor does one started through `env`, whose
            // command is not the guard's.
            let Some(program) = items.iter().position(|n| {
                serde_json::from_str::<String>(&text[n.start..n.end])
                    .ok()
                    .as_deref()
                    == Some("guard")
            }) else {
                continue;
            };
            if w.inner.is_empty() || program != 0 || items.len() < w.inner.len() {
                continue;
            }
            // The server's command and arguments are the last items, in
            // either form the guard accepts (with or without `--`).
            let t = |n: &Node| &text[n.start..n.end];
            let first = items.len() - w.inner.len();
            let rest: Vec<&str> = items[first + 1..].iter().map(t).collect();
            replacements.push((command.start, command.end, t(&items[first]).to_owned()));
            replacements.push((args.start, args.end, format!("[{}]", rest.join(", "))));
        }
    }
    replacements.sort_by_key(|r| std::cmp::Reverse(r.0));
    let mut out = text.to_owned();
    for (start, end, with) in replacements {
        out.replace_range(start..end, &with);
    }
    Ok(out)
}
