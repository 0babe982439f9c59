use super::*;

fn fixture(dir: &str) -> (PathBuf, PathBuf) {
    let base = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/discover")
        .join(dir);
    (base.join("home"), base.join("project"))
}

fn run(dir: &str) -> (Vec<Found>, Vec<Skipped>) {
    let (home, project) = fixture(dir);
    discover(&home, &project)
}

fn named<'a>(found: &'a [Found], name: &str) -> &'a Found {
    found.iter().find(|f| f.name == name).unwrap_or_else(|| {
        panic!(
            "no server {name:?} in {:#?}",
            found.iter().map(|f| &f.name).collect::<Vec<_>>()
        )
    })
}

fn names(found: &[Found]) -> Vec<&str> {
    found.iter().map(|f| f.name.as_str()).collect()
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn skipped_names(skipped: &[Skipped]) -> Vec<(Option<&str>, &str)> {
    skipped
        .iter()
        .map(|s| (s.name.as_deref(), s.reason.as_str()))
        .collect()
}

/// Every fixture's servers, written as a `plumbline.toml`, parse back and
/// hold no literal secret (every fixture secret contains "s3cr3t").
fn assert_no_secret_in_toml(found: &[Found]) {
    let config = as_config(found);
    let text = toml::to_string(&config).unwrap();
    assert!(!text.contains("s3cr3t"), "{text}");
    let back: crate::config::Config = toml::from_str(&text).unwrap();
    assert_eq!(back, config);
}

#[test]
fn claude_desktop_linux_and_macos_files() {
    let (found, skipped) = run("claude-desktop");
    assert_eq!(skipped, []);
    assert_eq!(
        names(&found),
        ["Postgres_prod", "filesystem", "github", "time"]
    );
    assert!(found.iter().all(|f| f.client == Client::ClaudeDesktop));
    let github = named(&found, "github");
    assert_eq!(
        github.config,
        ServerConfig::Stdio {
            command: "npx".into(),
            args: args(&["-y", "@modelcontextprotocol/server-github"]),
            env: map(&[(
                "GITHUB_PERSONAL_ACCESS_TOKEN",
                "${PLUMBLINE_GITHUB_GITHUB_PERSONAL_ACCESS_TOKEN}"
            )]),
            cwd: None,
            inherit_env: Vec::new(),
            normalize: Default::default(),
        }
    );
    assert_eq!(
        github.secrets_to_set,
        ["PLUMBLINE_GITHUB_GITHUB_PERSONAL_ACCESS_TOKEN"]
    );
    let time = named(&found, "time");
    assert!(time
        .file
        .ends_with("Library/Application Support/Claude/claude_desktop_config.json"));
    // The filesystem server is in both files, identically: imported once.
    let fs = named(&found, "filesystem");
    assert!(fs
        .file
        .ends_with(".config/Claude/claude_desktop_config.json"));
    assert!(
        fs.notes
            .iter()
            .any(|n| n.contains("also defined in") && n.contains("Library")),
        "{:?}",
        fs.notes
    );
    assert!(named(&found, "Postgres_prod")
        .notes
        .iter()
        .any(|n| n.contains("\"Postgres (prod)\"")));
    assert_no_secret_in_toml(&found);
}

#[test]
fn claude_code_user_local_and_project_scopes() {
    let (found, skipped) = run("claude-code");
    assert_eq!(
        names(&found),
        ["context7", "playwright", "sentry", "api-server", "db"]
    );
    assert_eq!(skipped_names(&skipped), [(Some("old-tool"), "disabled")]);
    assert!(named(&found, "playwright").notes[0].contains("/home/alice/src/webapp"));
    let sentry = named(&found, "sentry");
    assert_eq!(
        sentry.config,
        ServerConfig::Http {
            url: "https://mcp.sentry.dev/mcp".into(),
            headers: map(&[("Authorization", "${PLUMBLINE_SENTRY_AUTHORIZATION}")]),
            oauth: None,
            normalize: Default::default(),
        }
    );
    // `${VAR}` is kept, after an auth scheme too; `${VAR:-default}` loses
    // its default, with a note.
    let api = named(&found, "api-server");
    assert_eq!(
        api.config,
        ServerConfig::Sse {
            url: "https://api.example.com/mcp/sse".into(),
            headers: map(&[
                ("Authorization", "Bearer ${API_TOKEN}"),
                ("X-Team", "${TEAM_ID}")
            ]),
            normalize: Default::default(),
        }
    );
    assert_eq!(api.secrets_to_set, Vec::<String>::new());
    assert!(
        api.notes.iter().any(|n| n.contains("\"platform\"")),
        "{:?}",
        api.notes
    );
    let db = named(&found, "db");
    assert_eq!(
        db.config,
        ServerConfig::Stdio {
            command: "npx".into(),
            args: args(&["-y", "@bytebase/dbhub", "--transport", "stdio"]),
            env: map(&[("DSN", "${DATABASE_URL}"), ("LOG_LEVEL", "debug")]),
            cwd: None,
            inherit_env: Vec::new(),
            normalize: Default::default(),
        }
    );
    assert_no_secret_in_toml(&found);
}

#[test]
fn cursor_user_and_project_files() {
    let (found, skipped) = run("cursor");
    assert_eq!(
        names(&found),
        [
            "brave-search",
            "linear",
            "stripe",
            "docs",
            "github",
            "scripts"
        ]
    );
    assert_eq!(skipped_names(&skipped), [(Some("puppeteer"), "disabled")]);
    // No `type`: the transport comes from the URL, with a note.
    let linear = named(&found, "linear");
    assert_eq!(
        linear.config,
        ServerConfig::Sse {
            url: "https://mcp.linear.app/sse".into(),
            headers: BTreeMap::new(),
            normalize: Default::default(),
        }
    );
    assert!(linear.notes.iter().any(|n| n.contains("inferred")));
    assert!(matches!(
        named(&found, "stripe").config,
        ServerConfig::Http { .. }
    ));
    let docs = named(&found, "docs");
    assert_eq!(
        docs.config,
        ServerConfig::Http {
            url: "http://localhost:8000/mcp".into(),
            headers: map(&[("X-Api-Key", "${DOCS_API_KEY}")]),
            oauth: None,
            normalize: Default::default(),
        }
    );
    let github = named(&found, "github");
    assert!(
        matches!(&github.config, ServerConfig::Stdio { env, .. } if env["GITHUB_PERSONAL_ACCESS_TOKEN"] == "${GITHUB_TOKEN}")
    );
    let (_, project) = fixture("cursor");
    let ServerConfig::Stdio { args, .. } = &named(&found, "scripts").config else {
        panic!()
    };
    assert_eq!(
        args[0],
        format!("{}/tools/mcp-server.js", project.display())
    );
    assert_no_secret_in_toml(&found);
}

#[test]
fn vscode_workspace_mcp_json_and_user_settings() {
    let (found, skipped) = run("vscode");
    assert_eq!(skipped, []);
    assert_eq!(
        names(&found),
        [
            "atlassian",
            "memory",
            "everything",
            "fetch",
            "github",
            "perplexity"
        ]
    );
    // `${input:ID}` becomes a variable the user sets, with the prompt's description.
    let perplexity = named(&found, "perplexity");
    assert_eq!(
        perplexity.config,
        ServerConfig::Stdio {
            command: "npx".into(),
            args: args(&["-y", "server-perplexity-ask"]),
            env: map(&[("PERPLEXITY_API_KEY", "${PERPLEXITY_KEY}")]),
            cwd: None,
            inherit_env: Vec::new(),
            normalize: Default::default(),
        }
    );
    assert_eq!(perplexity.secrets_to_set, ["PERPLEXITY_KEY"]);
    assert!(perplexity
        .notes
        .iter()
        .any(|n| n.contains("Perplexity API Key")));
    assert_eq!(
        named(&found, "github").config,
        ServerConfig::Http {
            url: "https://api.githubcopilot.com/mcp/".into(),
            headers: map(&[("Authorization", "Bearer ${GITHUB_TOKEN}")]),
            oauth: None,
            normalize: Default::default(),
        }
    );
    assert!(matches!(
        named(&found, "everything").config,
        ServerConfig::Sse { .. }
    ));
    assert!(named(&found, "fetch")
        .notes
        .iter()
        .any(|n| n.contains("envFile")));
    assert_no_secret_in_toml(&found);
}

#[test]
fn vscode_settings_json_with_comments_and_trailing_commas() {
    let (found, _) = run("vscode");
    let atlassian = named(&found, "atlassian");
    assert!(atlassian.file.ends_with(".config/Code/User/settings.json"));
    assert_eq!(
        atlassian.config,
        ServerConfig::Http {
            // `//` inside a string is not a comment.
            url: "https://mcp.atlassian.com/v1/mcp".into(),
            headers: map(&[("Authorization", "${PLUMBLINE_ATLASSIAN_AUTHORIZATION}")]),
            oauth: None,
            normalize: Default::default(),
        }
    );
    assert_eq!(
        named(&found, "memory").config,
        ServerConfig::Stdio {
            command: "npx".into(),
            args: args(&["-y", "@modelcontextprotocol/server-memory"]),
            // A path is no secret: kept as written (issue 23, hole 8).
            env: map(&[(
                "MEMORY_FILE_PATH",
                "/home/alice/.local/share/mcp/memory.json"
            )]),
            cwd: None,
            inherit_env: Vec::new(),
            normalize: Default::default(),
        }
    );
}

#[test]
fn jsonc_stripping_keeps_strings_and_positions() {
    let text = "{\n  // c\n  \"a\": \"x//y/*z*/\", /* b\n */ \"b\": [1, 2,],\n}\n";
    let stripped = strip_jsonc(text);
    assert_eq!(stripped.len(), text.len());
    assert_eq!(stripped.lines().count(), text.lines().count());
    let v: Value = serde_json::from_str(&stripped).unwrap();
    assert_eq!(v, serde_json::json!({"a": "x//y/*z*/", "b": [1, 2]}));
    // An escaped quote does not end the string.
    let v: Value = serde_json::from_str(&strip_jsonc(r#"{"a": "\"//", }"#)).unwrap();
    assert_eq!(v, serde_json::json!({"a": "\"//"}));
}

#[test]
fn windsurf_server_url_and_disabled() {
    let (found, skipped) = run("windsurf");
    assert_eq!(names(&found), ["figma", "github", "zapier"]);
    assert_eq!(skipped_names(&skipped), [(Some("slack"), "disabled")]);
    assert_eq!(
        named(&found, "figma").config,
        ServerConfig::Http {
            url: "https://mcp.figma.com/mcp".into(),
            headers: map(&[("Authorization", "Bearer ${FIGMA_TOKEN}")]),
            oauth: None,
            normalize: Default::default(),
        }
    );
    let zapier = named(&found, "zapier");
    assert!(matches!(&zapier.config, ServerConfig::Sse { url, .. } if url.ends_with("/sse")));
    assert_no_secret_in_toml(&found);
}

#[test]
fn gemini_cli_transports_and_excluded_servers() {
    let (found, skipped) = run("gemini-cli");
    assert_eq!(
        names(&found),
        ["events", "github", "pythonTools", "nodeServer", "remote"]
    );
    assert_eq!(
        skipped_names(&skipped),
        [(Some("experimental"), "disabled (listed in mcp.excluded)")]
    );
    assert_eq!(
        named(&found, "pythonTools").config,
        ServerConfig::Stdio {
            command: "python".into(),
            args: args(&["-m", "my_mcp_server", "--port", "8080"]),
            env: map(&[
                ("API_KEY", "${EXTERNAL_API_KEY}"),
                ("DATABASE_URL", "${DB_CONNECTION_STRING}")
            ]),
            cwd: Some("./mcp-servers/python".into()),
            inherit_env: Vec::new(),
            normalize: Default::default(),
        }
    );
    // httpUrl is Streamable HTTP; url is SSE unless `type` says http.
    assert!(matches!(
        named(&found, "github").config,
        ServerConfig::Http { .. }
    ));
    assert_eq!(
        named(&found, "events").config,
        ServerConfig::Sse {
            url: "http://localhost:8080/sse".into(),
            headers: map(&[("X-Custom-Header", "custom-value")]),
            normalize: Default::default(),
        }
    );
    assert!(matches!(
        named(&found, "remote").config,
        ServerConfig::Http { .. }
    ));
    assert!(
        matches!(&named(&found, "nodeServer").config, ServerConfig::Stdio { cwd: Some(c), .. } if c == Path::new("./mcp-servers/node"))
    );
    assert_no_secret_in_toml(&found);
}

#[test]
fn literal_secrets_are_replaced_by_reported_variables() {
    for dir in [
        "claude-desktop",
        "claude-code",
        "cursor",
        "vscode",
        "windsurf",
        "gemini-cli",
        "collisions",
    ] {
        let (found, _) = run(dir);
        assert_no_secret_in_toml(&found);
        for f in &found {
            let values = match &f.config {
                ServerConfig::Stdio { env, .. } => env,
                ServerConfig::Http { headers, .. } | ServerConfig::Sse { headers, .. } => headers,
            };
            for (key, value) in values {
                let var = value.rsplit("${").next().and_then(|v| v.strip_suffix('}'));
                // A literal that does not look like a secret stays as written.
                if var.is_none() && !secret_looking(key, value) {
                    continue;
                }
                assert!(
                    var.is_some_and(is_env_name),
                    "{dir}/{}: {value:?} is not a reference",
                    f.name
                );
                let var = var.unwrap();
                if var.starts_with("PLUMBLINE_") {
                    assert!(
                        f.secrets_to_set.iter().any(|s| s == var),
                        "{dir}/{}: {var} not reported",
                        f.name
                    );
                }
            }
        }
    }
    let (found, _) = run("windsurf");
    let github = named(&found, "github");
    assert_eq!(
        github.secrets_to_set,
        ["PLUMBLINE_GITHUB_GITHUB_PERSONAL_ACCESS_TOKEN"]
    );
    assert!(github
        .notes
        .iter()
        .any(|n| n.contains("set PLUMBLINE_GITHUB_GITHUB_PERSONAL_ACCESS_TOKEN")));
}

#[test]
fn secret_variable_names_are_uppercase_and_unique() {
    assert_eq!(env_name("my-server.v2"), "MY_SERVER_V2");
    assert_eq!(env_name("1password"), "_1PASSWORD");
    let entry = |name: &str, key: &str| Entry {
        client: Client::Cursor,
        file: PathBuf::from("/h/.cursor/mcp.json"),
        scope: String::new(),
        name: name.into(),
        config: ServerConfig::Http {
            url: format!("https://{name}.example/mcp"),
            headers: map(&[(key, "literal")]),
            oauth: None,
            normalize: Default::default(),
        },
        review: Review {
            literal_keys: vec![key.into()],
            ..Review::default()
        },
    };
    // Two servers whose names differ only in punctuation.
    let found = finish(vec![entry("a-b", "x-key"), entry("a.b", "X_KEY")]);
    let vars: Vec<_> = found
        .iter()
        .flat_map(|f| f.secrets_to_set.clone())
        .collect();
    assert_eq!(vars, ["PLUMBLINE_A_B_X_KEY", "PLUMBLINE_A_B_X_KEY_2"]);
}

#[test]
fn name_collisions_keep_both_and_identical_servers_merge() {
    let (found, skipped) = run("collisions");
    assert_eq!(skipped, []);
    assert_eq!(
        names(&found),
        [
            "filesystem",
            "github",
            "github-claude-code",
            "My_Server_beta",
            "github-cursor"
        ]
    );
    let clients: Vec<_> = found.iter().map(|f| f.client).collect();
    use Client::*;
    assert_eq!(
        clients,
        [ClaudeDesktop, ClaudeDesktop, ClaudeCode, Cursor, Cursor]
    );
    let cursor_github = named(&found, "github-cursor");
    assert!(
        cursor_github
            .notes
            .iter()
            .any(|n| n.starts_with("renamed to \"github-cursor\"")),
        "{:?}",
        cursor_github.notes
    );
    let fs = named(&found, "filesystem");
    assert_eq!(fs.client, ClaudeDesktop);
    assert!(
        fs.notes
            .iter()
            .any(|n| n.contains(".cursor/mcp.json (cursor)")),
        "{:?}",
        fs.notes
    );
    // A name taken by a suffixed name gets a number.
    let mut taken = BTreeMap::new();
    taken.insert("x".to_owned(), 0);
    taken.insert("x-cursor".to_owned(), 1);
    let mut next = Default::default();
    assert_eq!(
        unique_name("x", Client::Cursor, &taken, &mut next),
        "x-cursor-2"
    );
    let long = "n".repeat(100);
    taken.insert(long.clone(), 2);
    let renamed = unique_name(&long, Client::GeminiCli, &taken, &mut next);
    assert_eq!(renamed.len(), 100);
    assert!(renamed.ends_with("-gemini-cli"));
}

#[test]
fn many_servers_of_one_name_get_distinct_names_and_duplicates_merge() {
    // 3,000 different servers called "same", and each configured twice.
    let entry = |i: usize| Entry {
        client: Client::Cursor,
        file: PathBuf::from("/home/u/.cursor/mcp.json"),
        scope: String::new(),
        name: "same".to_owned(),
        config: ServerConfig::Stdio {
            command: format!("server-{i}"),
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            inherit_env: Vec::new(),
            normalize: Default::default(),
        },
        review: Review::default(),
    };
    let entries: Vec<Entry> = (0..3000).chain(0..3000).map(entry).collect();
    let found = finish(entries);
    assert_eq!(found.len(), 3000);
    let names: BTreeSet<&str> = found.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names.len(), 3000, "every name distinct");
    assert!(
        names.contains("same")
            && names.contains("same-cursor")
            && names.contains("same-cursor-2999")
    );
    assert!(found
        .iter()
        .all(|f| f.notes.iter().any(|n| n.contains("imported once"))));
}

#[test]
fn server_names_are_sanitized() {
    assert_eq!(sanitize_name("github"), "github");
    assert_eq!(sanitize_name("My Server (beta)!"), "My_Server_beta");
    assert_eq!(sanitize_name("_private"), "_private");
    assert_eq!(sanitize_name("日本"), "server");
    assert_eq!(sanitize_name("."), "server");
    assert_eq!(sanitize_name(".."), "server");
    assert_eq!(sanitize_name("..."), "server");
    assert_eq!(sanitize_name("a.b"), "a.b");
    assert_eq!(sanitize_name(&"a".repeat(150)).len(), 100);
}

#[test]
fn invalid_files_and_entries_become_skipped() {
    let (found, skipped) = run("invalid");
    assert_eq!(names(&found), ["time"]);
    let reasons: Vec<_> = skipped
        .iter()
        .map(|s| {
            (
                s.file.file_name().unwrap().to_str().unwrap(),
                s.name.as_deref(),
                s.reason.as_str(),
            )
        })
        .collect();
    assert_eq!(reasons.len(), 5, "{reasons:#?}");
    // A JSON syntax error names the file, line and column.
    let cursor = skipped
        .iter()
        .find(|s| s.file.ends_with(".cursor/mcp.json"))
        .unwrap();
    assert_eq!(cursor.name, None);
    assert!(
        cursor
            .reason
            .starts_with(&cursor.file.display().to_string()),
        "{}",
        cursor.reason
    );
    assert!(
        cursor.reason.contains("invalid JSON at line 4, column 5"),
        "{}",
        cursor.reason
    );
    let windsurf = skipped
        .iter()
        .find(|s| s.file.ends_with("mcp_config.json"))
        .unwrap();
    assert!(
        windsurf
            .reason
            .ends_with("`mcpServers` is not a JSON object"),
        "{}",
        windsurf.reason
    );
    let entry = |name: &str| {
        skipped
            .iter()
            .find(|s| s.name.as_deref() == Some(name))
            .unwrap()
            .reason
            .as_str()
    };
    assert_eq!(entry("broken-entry"), "the entry is not a JSON object");
    assert_eq!(entry("no-command"), "has neither a command nor a URL");
    assert_eq!(entry("ftp"), "unsupported transport type \"ftp\"");
}

#[test]
fn missing_directories_find_nothing() {
    let nowhere = Path::new("/nonexistent/plumbline-discover-test");
    assert_eq!(discover(nowhere, nowhere), (Vec::new(), Vec::new()));
}

#[test]
fn run_from_home_reads_each_file_once() {
    let (home, _) = fixture("gemini-cli");
    let nowhere = Path::new("/nonexistent/plumbline-discover-test");
    let (found, skipped) = discover(&home, &home);
    assert_eq!((found, skipped), discover(&home, nowhere));
}

#[test]
fn output_is_deterministic_and_sorted() {
    for dir in [
        "claude-desktop",
        "claude-code",
        "cursor",
        "vscode",
        "windsurf",
        "gemini-cli",
        "collisions",
        "invalid",
    ] {
        let first = run(dir);
        assert_eq!(first, run(dir), "{dir}");
        let keys: Vec<_> = first
            .0
            .iter()
            .map(|f| (f.client, f.file.clone(), f.name.clone()))
            .collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted, "{dir}");
    }
}

#[test]
fn client_references_by_syntax() {
    let name = |client, v: &str| match reference(client, v) {
        Some(Reference::Env { name, .. }) => Some(name),
        Some(Reference::Input(id)) => Some(format!("input:{id}")),
        None => None,
    };
    assert_eq!(
        name(Client::ClaudeDesktop, "${TOKEN}").as_deref(),
        Some("TOKEN")
    );
    assert_eq!(
        name(Client::Cursor, "${env:TOKEN}").as_deref(),
        Some("TOKEN")
    );
    assert_eq!(name(Client::ClaudeCode, "${env:TOKEN}"), None);
    assert_eq!(
        name(Client::VsCode, "${input:api-key}").as_deref(),
        Some("input:api-key")
    );
    assert_eq!(name(Client::ClaudeCode, "${T:-x}").as_deref(), Some("T"));
    assert_eq!(name(Client::GeminiCli, "$TOKEN").as_deref(), Some("TOKEN"));
    assert_eq!(name(Client::Cursor, "$TOKEN"), None);
    assert_eq!(name(Client::ClaudeCode, "prefix-${TOKEN}"), None);
    assert_eq!(name(Client::ClaudeCode, "${A}${B}"), None);
}

#[test]
fn literal_secrets_in_arguments_and_urls_become_variables() {
    let (found, skipped) = run("secrets");
    assert!(skipped.is_empty(), "{skipped:?}");
    let cli = found.iter().find(|f| f.name == "cli").expect("cli");
    match &cli.config {
        ServerConfig::Stdio { args, .. } => assert_eq!(
            args,
            &[
                "-y",
                "some-mcp",
                "--token=${PLUMBLINE_CLI_TOKEN}",
                "--api-key",
                "${PLUMBLINE_CLI_API_KEY}",
                "Authorization: Bearer ${PLUMBLINE_CLI_AUTHORIZATION}",
                "--region",
                "eu",
                "--key-file",
                "/etc/key.pem",
            ]
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        cli.secrets_to_set,
        [
            "PLUMBLINE_CLI_API_KEY",
            "PLUMBLINE_CLI_AUTHORIZATION",
            "PLUMBLINE_CLI_TOKEN"
        ]
    );
    assert!(
        cli.notes
            .iter()
            .any(|n| n.contains("argument token") && n.contains("set PLUMBLINE_CLI_TOKEN")),
        "{:?}",
        cli.notes
    );
    let remote = found.iter().find(|f| f.name == "remote").expect("remote");
    match &remote.config {
        ServerConfig::Http { url, .. } => assert_eq!(
            url,
            "https://${PLUMBLINE_REMOTE_USERINFO}@mcp.example.com/mcp?key=${PLUMBLINE_REMOTE_KEY}&team=a"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        remote.secrets_to_set,
        ["PLUMBLINE_REMOTE_KEY", "PLUMBLINE_REMOTE_USERINFO"]
    );
    let toml = toml::to_string(&as_config(&found)).expect("TOML");
    assert!(!toml.contains("s3cr3t"), "{toml}");
}

/// Issue 23, hole 8: only values that look like credentials become
/// variables; the rest stay as the client wrote them.
#[test]
fn only_secret_looking_literals_become_variables() {
    for (key, value) in [
        ("GITHUB_PERSONAL_ACCESS_TOKEN", "x"),
        ("API_KEY", "x"),
        ("OPENAI_APIKEY", "x"),
        ("X-Api-Key", "x"),
        ("Authorization", "x"),
        ("DB_PASSWORD", "x"),
        ("SLACK_BOT", "xoxb-1234-5678"),
        ("UPSTREAM", "Bearer abc"),
        ("GH", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
        ("OPAQUE", "a1b2c3d4e5f6a7b8c9d0e1f2a3b4"),
        ("COOKIE", "sid=1"),
    ] {
        assert!(secret_looking(key, value), "{key}={value}");
    }
    for (key, value) in [
        (
            "MEMORY_FILE_PATH",
            "/home/alice/.local/share/mcp/memory.json",
        ),
        ("LOG_LEVEL", "debug"),
        ("PATH", "/usr/bin:/bin"),
        ("AWS_REGION", "eu-west-1"),
        ("KEYBOARD_LAYOUT", "us"),
        ("DEBUG", "true"),
        ("X-Custom-Header", "custom-value"),
        ("BASE_URL", "https://api.example.com/v1/resources/items"),
    ] {
        assert!(!secret_looking(key, value), "{key}={value}");
    }
}
