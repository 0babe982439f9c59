//! Where each client keeps its servers.

use super::*;

pub(super) fn locations(home: &Path, project: &Path) -> Vec<Location> {
    let at = |client, path: PathBuf, layout, jsonc| Location {
        client,
        path,
        layout,
        jsonc,
    };
    use Client::*;
    use Layout::*;
    vec![
        at(
            ClaudeDesktop,
            home.join(".config/Claude/claude_desktop_config.json"),
            McpServers,
            false,
        ),
        at(
            ClaudeDesktop,
            home.join("Library/Application Support/Claude/claude_desktop_config.json"),
            McpServers,
            false,
        ),
        at(ClaudeCode, home.join(".claude.json"), ClaudeJson, false),
        at(ClaudeCode, project.join(".mcp.json"), McpServers, false),
        at(Cursor, home.join(".cursor/mcp.json"), McpServers, false),
        at(Cursor, project.join(".cursor/mcp.json"), McpServers, false),
        at(
            VsCode,
            home.join(".config/Code/User/settings.json"),
            VsCodeSettings,
            true,
        ),
        at(
            VsCode,
            home.join(".config/Code/User/mcp.json"),
            VsCodeMcp,
            true,
        ),
        at(VsCode, project.join(".vscode/mcp.json"), VsCodeMcp, true),
        at(
            Windsurf,
            home.join(".codeium/windsurf/mcp_config.json"),
            McpServers,
            false,
        ),
        at(
            GeminiCli,
            home.join(".gemini/settings.json"),
            GeminiSettings,
            true,
        ),
        at(
            GeminiCli,
            project.join(".gemini/settings.json"),
            GeminiSettings,
            true,
        ),
    ]
}

pub(super) fn read_location(
    ctx: &Ctx,
    location: &Location,
    entries: &mut Vec<Entry>,
    skipped: &mut Vec<Skipped>,
) {
    let path = &location.path;
    let skip_file = |skipped: &mut Vec<Skipped>, reason: String| {
        skipped.push(Skipped {
            file: path.clone(),
            name: None,
            reason: format!("{}: {reason}", path.display()),
        });
    };
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => return skip_file(skipped, format!("cannot read: {e}")),
    };
    let Ok(text) = String::from_utf8(bytes) else {
        return skip_file(skipped, "not UTF-8 text".to_owned());
    };
    // Clients create empty files before the first server is added.
    if text.trim().is_empty() {
        return;
    }
    let text = if location.jsonc {
        strip_jsonc(&text)
    } else {
        text
    };
    let root: Value = match serde_json::from_str(&text) {
        Ok(root) => root,
        Err(e) => {
            let message = e.to_string();
            let position = format!(" at line {} column {}", e.line(), e.column());
            let message = message.strip_suffix(&position).unwrap_or(&message);
            let reason = format!(
                "invalid JSON at line {}, column {}: {message}",
                e.line(),
                e.column()
            );
            return skip_file(skipped, reason);
        }
    };
    let Value::Object(root) = root else {
        return skip_file(skipped, "the top level is not a JSON object".to_owned());
    };

    let mut groups = Vec::new();
    match location.layout {
        Layout::McpServers => {
            if let Some(servers) = root.get("mcpServers") {
                groups.push(Group::new("mcpServers", servers));
            }
        }
        Layout::ClaudeJson => {
            if let Some(servers) = root.get("mcpServers") {
                groups.push(Group::new("mcpServers", servers));
            }
            match root.get("projects") {
                None => {}
                Some(Value::Object(projects)) => {
                    for (dir, settings) in projects {
                        if let Some(servers) = settings.get("mcpServers") {
                            groups.push(Group {
                                scope: dir.clone(),
                                note: Some(format!("Claude Code local scope of project {dir}")),
                                ..Group::new("mcpServers", servers)
                            });
                        }
                    }
                }
                Some(_) => skip_file(skipped, "`projects` is not a JSON object".to_owned()),
            }
        }
        Layout::VsCodeMcp => {
            if let Some(servers) = root.get("servers") {
                groups.push(Group {
                    inputs: root.get("inputs"),
                    ..Group::new("servers", servers)
                });
            }
        }
        Layout::VsCodeSettings => {
            let mcp = root.get("mcp");
            if let Some(servers) = mcp.and_then(|m| m.get("servers")) {
                groups.push(Group {
                    inputs: mcp.and_then(|m| m.get("inputs")),
                    ..Group::new("servers", servers)
                });
            }
        }
        Layout::GeminiSettings => {
            if let Some(servers) = root.get("mcpServers") {
                let excluded = root
                    .get("mcp")
                    .and_then(|m| m.get("excluded"))
                    .and_then(Value::as_array)
                    .map(|names| names.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                groups.push(Group {
                    excluded,
                    ..Group::new("mcpServers", servers)
                });
            }
        }
    }

    for group in groups {
        let Value::Object(servers) = group.servers else {
            skip_file(skipped, format!("`{}` is not a JSON object", group.key));
            continue;
        };
        let inputs = input_descriptions(group.inputs);
        for (name, value) in servers {
            let skip = |reason: String| Skipped {
                file: path.clone(),
                name: Some(name.clone()),
                reason,
            };
            if group.excluded.contains(&name.as_str()) {
                skipped.push(skip("disabled (listed in mcp.excluded)".to_owned()));
                continue;
            }
            let Value::Object(obj) = value else {
                skipped.push(skip("the entry is not a JSON object".to_owned()));
                continue;
            };
            if obj.get("disabled") == Some(&Value::Bool(true)) {
                skipped.push(skip("disabled".to_owned()));
                continue;
            }
            match parse_entry(ctx, obj, &inputs) {
                Ok((config, mut review)) => {
                    if let Some(note) = &group.note {
                        review.notes.insert(0, note.clone());
                    }
                    entries.push(Entry {
                        client: ctx.client,
                        file: path.clone(),
                        scope: group.scope.clone(),
                        name: name.clone(),
                        config,
                        review,
                    });
                }
                Err(reason) => skipped.push(skip(reason)),
            }
        }
    }
}

impl<'a> Group<'a> {
    pub(super) fn new(key: &'static str, servers: &'a Value) -> Self {
        Group {
            key,
            servers,
            scope: String::new(),
            inputs: None,
            excluded: Vec::new(),
            note: None,
        }
    }
}

/// VS Code `inputs`: id → description, for notes.
pub(super) fn input_descriptions(inputs: Option<&Value>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for input in inputs.and_then(Value::as_array).into_iter().flatten() {
        if let Some(id) = input.get("id").and_then(Value::as_str) {
            let description = input
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or("");
            out.insert(id.to_owned(), description.to_owned());
        }
    }
    out
}
