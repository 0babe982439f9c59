//! Tokens over time, against the test server behind OAuth
//! (`plumbline-test-server --oauth-token-lifetime`, its own authorization
//! server on the same loopback port): a person logs in once, an access
//! token that expired is renewed with the refresh token (no second
//! authorization), and a revoked refresh token makes `observe` fail the
//! server (exit 2) saying who must log in.

mod common;

use std::path::Path;

use common::{plumbline_env, text, HttpGuard, HttpServer};

/// Writes `dir`/plumbline.toml naming `server` as `tickets`, after
/// `before` (TOML that must come first: `[watch]`, `[[alerts]]`): the
/// directory's own token file.
fn tickets(dir: &Path, server: &HttpServer, before: &str) -> String {
    std::fs::write(
        dir.join("plumbline.toml"),
        format!(
            "{before}[servers.tickets]\ntransport = \"http\"\nurl = \"{}\"\n",
            server.url
        ),
    )
    .unwrap();
    dir.join("config/tokens.json").display().to_string()
}

/// A person's environment: `tokens` as the token file, and curl as the
/// browser (it follows the authorization server's redirect to
/// Plumbline's loopback port).
fn person(tokens: &str) -> [(&'static str, &str); 2] {
    [
        ("PLUMBLINE_TOKENS", tokens),
        ("PLUMBLINE_BROWSER", "curl -s -L -o /dev/null"),
    ]
}

/// `plumbline login tickets`, which must succeed.
fn login(dir: &Path, env: &[(&str, &str)]) {
    let out = plumbline_env(dir, &["login", "tickets"], env);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

/// `dir`/through.toml: the guard as the one server, `through`.
fn through(dir: &Path, guard: &HttpGuard) {
    std::fs::write(
        dir.join("through.toml"),
        format!(
            "[servers.through]\ntransport = \"http\"\nurl = {:?}\n",
            guard.url
        ),
    )
    .unwrap();
}

/// The token file is readable by its owner only.
fn owner_only(tokens: impl AsRef<Path>) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(tokens).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}

#[test]
fn expired_tokens_are_renewed_and_a_revoked_refresh_token_asks_for_a_login() {
    let server = HttpServer::start(&["--oauth-token-lifetime", "1"]);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let tokens = tickets(d, &server, "");
    let env = person(&tokens);
    let store = dir.path().join("p.db").display().to_string();
    let observe = || plumbline_env(dir.path(), &["observe", "--store", &store], &env);

    // Nobody has logged in: exit 2, the login to run named, nothing asked.
    asks_for_a_login(observe());
    assert_eq!(server.oauth_counts()["authorizations"], 0);

    login(d, &env);
    assert_eq!(server.oauth_counts()["authorizations"], 1);
    owner_only(&tokens);

    // The access token (1 s) has expired on the server's clock; the
    // refresh token renews it, and no one is asked again.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let refreshes = server.oauth_counts()["refreshes"].as_u64().unwrap();
    let out = observe();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let counts = server.oauth_counts();
    assert_eq!(counts["authorizations"], 1, "{counts}");
    assert!(
        counts["refreshes"].as_u64().unwrap() > refreshes,
        "{counts}"
    );

    // Revoked: the refresh token is refused, the server is failed, and
    // the message says who must log in; the file keeps no dead token.
    server.revoke_tokens();
    asks_for_a_login(observe());
    let counts = server.oauth_counts();
    assert_eq!(counts["authorizations"], 1, "{counts}");
    assert!(
        counts["refused_refreshes"].as_u64().unwrap() >= 1,
        "{counts}"
    );
    let kept = std::fs::read_to_string(&tokens).unwrap();
    assert!(!kept.contains("access-"), "{kept}");

    // Logged in again, it works; logged out, the entry is gone.
    login(d, &env);
    assert_eq!(observe().status.code(), Some(0));
    let out = plumbline_env(dir.path(), &["logout", "tickets"], &env);
    assert!(text(&out).contains("Forgot"), "{}", text(&out));
    assert!(!std::fs::read_to_string(&tokens)
        .unwrap()
        .contains(&server.url));
}

/// `observe` failed the server (exit 2), naming the login to run.
fn asks_for_a_login(out: std::process::Output) {
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("plumbline login tickets"),
        "{}",
        text(&out)
    );
}

/// `guard --listen` in front of a server behind OAuth relays with the
/// tokens `plumbline login` kept: the client needs none of its own.
#[test]
fn the_guard_relays_to_an_upstream_behind_oauth_with_the_kept_tokens() {
    let server = HttpServer::start(&["--oauth-token-lifetime", "600"]);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let tokens = tickets(d, &server, "");
    let env = person(&tokens);
    login(d, &env);
    let out = plumbline_env(d, &["pin", "tickets"], &env);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let guard = HttpGuard::start_with_env(
        d,
        &[
            "--server",
            "tickets",
            "--lock",
            "plumbline.lock",
            "--store",
            "g.db",
        ],
        &env,
    );
    through(d, &guard);
    let out = plumbline_env(
        d,
        &[
            "observe",
            "--config",
            "through.toml",
            "--store",
            "o.db",
            "--format",
            "json",
        ],
        &[(
            "PLUMBLINE_TOKENS",
            d.join("client-tokens.json").to_str().unwrap(),
        )],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        text(&out),
        guard.log.lock().unwrap()
    );
    let observed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        observed["servers"][0]["tools"].as_u64().unwrap() >= 1,
        "{observed}"
    );
    // One authorization, by the person; the guard used what was kept.
    assert_eq!(server.oauth_counts()["authorizations"], 1);
    assert!(!d.join("client-tokens.json").exists());
}

/// What the server publishes about its authorization is recorded with
/// each observation, and a change of it (scopes added to both documents)
/// is drift of the server: one alert (to a channel that wants only
/// CRITICAL tool drift too), in `log`, human and JSON, and on the
/// dashboard's pages and API; an unchanged document is no change.
#[test]
fn a_change_of_the_published_authorization_metadata_is_drift_in_the_log_and_dashboard() {
    let server = HttpServer::start(&["--oauth-token-lifetime", "600"]);
    server.publish_scopes(&["mcp:read"]);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let tokens = tickets(
        d,
        &server,
        "[[alerts]]\nname = \"log\"\ntype = \"jsonl\"\nmin_severity = \"critical\"\n\n",
    );
    let env = person(&tokens);
    login(d, &env);
    // Where the challenge said the resource metadata is, kept for the
    // runs that meet no challenge.
    let kept = std::fs::read_to_string(&tokens).unwrap();
    assert!(
        kept.contains(&format!(
            "\"resource_metadata_url\": \"{}\"",
            server
                .url
                .replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
        )),
        "{kept}"
    );
    // Observed by a watcher, which alerts to standard output.
    let mut alerts = String::new();
    let mut observe = || {
        let out = plumbline_env(d, &["watch", "--once", "--store", "p.db"], &env);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        alerts.push_str(&String::from_utf8_lossy(&out.stdout));
    };
    observe();
    observe();
    server.publish_scopes(&["mcp:read", "mcp:admin"]);
    observe();
    let alerts: Vec<serde_json::Value> = alerts
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(alerts.len(), 1, "{alerts:#?}");
    assert_eq!(alerts[0]["kind"], "authorization");
    assert_eq!(
        alerts[0]["authorization"],
        serde_json::json!([
            "resource metadata scopes_supported: +mcp:admin",
            "authorization server scopes_supported: +mcp:admin"
        ])
    );

    let out = plumbline_env(d, &["log", "--store", "p.db", "--format", "json"], &env);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let log: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = log["servers"][0]["observations"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{log:#}");
    // Newest first: the third observation changed, the second did not.
    let change = &rows[0]["authorization"];
    assert_eq!(
        change["previous_observation"], rows[1]["observation"],
        "{log:#}"
    );
    let fields = change["fields"].as_array().unwrap();
    assert_eq!(fields.len(), 2, "{change:#}");
    for (f, document) in fields
        .iter()
        .zip(["resource_metadata", "authorization_server"])
    {
        assert_eq!(f["document"], document, "{change:#}");
        assert_eq!(f["field"], "scopes_supported");
        assert_eq!(f["added"], serde_json::json!(["mcp:admin"]));
    }
    assert!(rows[1].get("authorization").is_none(), "{log:#}");
    assert!(rows[2].get("authorization").is_none(), "{log:#}");

    let out = plumbline_env(d, &["log", "--store", "p.db"], &env);
    assert!(
        text(&out)
            .contains("authorization changed: resource metadata scopes_supported: +mcp:admin"),
        "{}",
        text(&out)
    );

    // The dashboard: the server's timeline, the observation, the API.
    let dashboard = common::Dashboard::start(d);
    let get = |path: &str| {
        let (status, body) = common::http("GET", &format!("{}{path}", dashboard.url)).unwrap();
        assert_eq!(status, 200, "{path}: {body}");
        body
    };
    let page = get("servers/tickets");
    assert!(
        page.contains("authorization server scopes_supported: +mcp:admin"),
        "{page}"
    );
    let id = rows[0]["observation"].as_i64().unwrap();
    let page = get(&format!("servers/tickets/observations/{id}"));
    assert!(page.contains("Changed since"), "{page}");
    assert!(page.contains("mcp:admin"), "{page}");
    let api: serde_json::Value =
        serde_json::from_str(&get(&format!("api/v1/servers/tickets/observations/{id}"))).unwrap();
    assert_eq!(
        api["authorization"]["resource_metadata"]["scopes_supported"],
        serde_json::json!(["mcp:read", "mcp:admin"]),
        "{api:#}"
    );
    assert_eq!(
        api["observation"]["authorization"]["fields"][0]["added"],
        serde_json::json!(["mcp:admin"]),
        "{api:#}"
    );
}

/// A watcher of a server whose access tokens live two seconds: each is
/// renewed with the refresh token before it runs out, so every
/// observation succeeds and nobody is asked again; once the refresh
/// token is revoked, the server fails with the login to run, alerted
/// once however many rounds fail after.
#[test]
fn a_watcher_renews_short_lived_tokens_and_alerts_once_when_a_login_is_needed() {
    let server = HttpServer::start(&["--oauth-token-lifetime", "2"]);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let tokens = tickets(d, &server, "[watch]\ninterval_secs = 1\njitter = 0\n\n[[alerts]]\nname = \"log\"\ntype = \"jsonl\"\nmin_severity = \"high\"\n\n");
    let env = person(&tokens);
    login(d, &env);

    let watch = std::process::Command::new(env!("CARGO_BIN_EXE_plumbline"))
        .args(["watch", "--store", "p.db"])
        .current_dir(d)
        .envs(env)
        .env_remove("PLUMBLINE_CONFIG")
        .stdout(std::fs::File::create(d.join("alerts.jsonl")).unwrap())
        .stderr(std::fs::File::create(d.join("watch.log")).unwrap())
        .spawn()
        .expect("watch starts");
    let watch = Stopped(watch);
    let rows = || -> Vec<serde_json::Value> {
        let out = plumbline_env(d, &["log", "--store", "p.db", "--format", "json"], &env);
        serde_json::from_slice::<serde_json::Value>(&out.stdout)
            .ok()
            .and_then(|v| v["servers"][0]["observations"].as_array().cloned())
            .unwrap_or_default()
    };
    let until = |what: &str, done: &dyn Fn(&[serde_json::Value]) -> bool| {
        let start = std::time::Instant::now();
        loop {
            let r = rows();
            if done(&r) {
                return r;
            }
            assert!(
                start.elapsed() < std::time::Duration::from_secs(90),
                "never: {what}\n{r:#?}\n{}",
                std::fs::read_to_string(d.join("watch.log")).unwrap_or_default()
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    };
    // Past three lifetimes of a token: every observation succeeded.
    let started = std::time::Instant::now();
    let seen = until("observations over six seconds", &|r| {
        started.elapsed() > std::time::Duration::from_secs(6) && r.len() >= 4
    });
    assert!(seen.iter().all(|o| o["outcome"] == "ok"), "{seen:#?}");
    let counts = server.oauth_counts();
    assert_eq!(counts["authorizations"], 1, "{counts}");
    assert!(counts["refreshes"].as_u64().unwrap() >= 2, "{counts}");
    // The watcher's sessions record what the server publishes about its
    // authorization too: a scope published now is a change.
    server.publish_scopes(&["mcp:write"]);
    let seen = until("the authorization change", &|r| {
        r.iter().any(|o| o.get("authorization").is_some())
    });
    let change = seen.iter().find_map(|o| o.get("authorization")).unwrap();
    assert_eq!(
        change["fields"][0]["field"], "scopes_supported",
        "{change:#}"
    );

    server.revoke_tokens();
    let failed = |r: &[serde_json::Value]| r.iter().filter(|o| o["outcome"] == "failed").count();
    let seen = until("three failed rounds", &|r| failed(r) >= 3);
    let error = seen
        .iter()
        .find(|o| o["outcome"] == "failed")
        .and_then(|o| o["error"].as_str())
        .unwrap()
        .to_owned();
    assert!(error.contains("plumbline login tickets"), "{error}");
    drop(watch);
    let alerts: Vec<serde_json::Value> = std::fs::read_to_string(d.join("alerts.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let changed: Vec<_> = alerts
        .iter()
        .filter(|a| a["kind"] == "authorization")
        .collect();
    assert_eq!(changed.len(), 1, "{alerts:#?}");
    let failures: Vec<_> = alerts.iter().filter(|a| a["kind"] == "failure").collect();
    assert_eq!(failures.len(), 1, "{alerts:#?}");
    assert!(
        failures[0].to_string().contains("plumbline login tickets"),
        "{alerts:#?}"
    );
    // No token and no refresh token in what the watcher wrote.
    let kept = std::fs::read_to_string(&tokens).unwrap_or_default();
    for file in ["alerts.jsonl", "watch.log"] {
        let text = std::fs::read_to_string(d.join(file)).unwrap();
        assert!(
            !text.contains("access-") && !text.contains("refresh-"),
            "{file}: {text}"
        );
    }
    assert!(!kept.contains("access-"), "{kept}");
}

/// A child stopped (SIGTERM, then waited for) when dropped.
struct Stopped(std::process::Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.0.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.0.wait();
    }
}

/// No token reaches anything a run writes or serves: after logging in,
/// observing, pinning, checking with every report format, watching once,
/// reading the log,
/// and a client observing through `guard --listen` with its metrics
/// served, neither the store (and its write-ahead log), nor the lock, the
/// reports, the commands' output, the guard's log and store, nor its
/// metrics hold any token the authorization server issued (the test
/// server names every one `access-…` or `refresh-…`), nor `Bearer`; the
/// token file is the one place they are, readable by its owner only.
#[test]
fn no_token_reaches_the_store_lock_reports_output_logs_or_metrics() {
    let server = HttpServer::start(&["--oauth-token-lifetime", "600"]);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let tokens = tickets(d, &server, "");
    let env = person(&tokens);
    let mut printed = String::new();
    let mut run = |args: &[&str], code: i32| {
        let out = plumbline_env(d, args, &env);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", text(&out));
        printed.push_str(&text(&out));
    };
    run(&["login", "tickets"], 0);
    run(&["observe", "--store", "p.db", "--format", "json"], 0);
    run(&["observe", "--store", "p.db"], 0);
    run(&["pin", "tickets"], 0);
    run(
        &[
            "check",
            "--format",
            "json",
            "--output",
            "sarif=r.sarif",
            "--output",
            "markdown=r.md",
            "--output",
            "human=r.txt",
        ],
        0,
    );
    run(&["watch", "--once", "--store", "p.db"], 0);
    run(&["log", "--store", "p.db", "--format", "json"], 0);

    let guard = HttpGuard::start_with_env(
        d,
        &[
            "--server",
            "tickets",
            "--lock",
            "plumbline.lock",
            "--store",
            "g.db",
            "--metrics-listen",
            "127.0.0.1:0",
        ],
        &env,
    );
    through(d, &guard);
    let out = plumbline_env(
        d,
        &["observe", "--config", "through.toml", "--store", "o.db"],
        &[("PLUMBLINE_TOKENS", d.join("none.json").to_str().unwrap())],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    printed.push_str(&text(&out));
    let metrics_url = {
        let log = guard.log.lock().unwrap().clone();
        log.split("metrics on ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or_else(|| panic!("no metrics address: {log}"))
            .to_owned()
    };
    let (status, metrics) = common::http("GET", &metrics_url).unwrap();
    assert_eq!(status, 200, "{metrics}");
    assert!(metrics.contains("plumbline_guard"), "{metrics}");
    let guard_log = guard.log.lock().unwrap().clone();
    drop(guard);

    let kept = std::fs::read_to_string(&tokens).unwrap();
    assert!(kept.contains("access-"), "the token file keeps the tokens");
    owner_only(&tokens);
    let mut places: Vec<(String, Vec<u8>)> = vec![
        ("the commands' output".into(), printed.into_bytes()),
        ("the guard's log".into(), guard_log.into_bytes()),
        ("the guard's metrics".into(), metrics.into_bytes()),
    ];
    for file in [
        "p.db",
        "p.db-wal",
        "g.db",
        "g.db-wal",
        "o.db",
        "o.db-wal",
        "plumbline.lock",
        "r.sarif",
        "r.md",
        "r.txt",
    ] {
        if let Ok(bytes) = std::fs::read(d.join(file)) {
            places.push((file.to_owned(), bytes));
        } else {
            assert!(file.ends_with("-wal"), "{file} was not written");
        }
    }
    for (place, bytes) in &places {
        for secret in [&b"access-"[..], b"refresh-", b"Bearer"] {
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret),
                "{place} holds {:?}",
                String::from_utf8_lossy(secret)
            );
        }
    }
}

/// `guard --listen --upstream URL` names no configured server, so it has
/// no way to authorize: the upstream's 401 reaches the client, and the
/// guard says once, on stderr, how to give it one.
#[test]
fn a_guard_with_only_an_upstream_url_says_how_to_authorize() {
    let server = HttpServer::start(&["--oauth-token-lifetime", "600"]);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let guard = HttpGuard::start_with_env(d, &["--upstream", &server.url, "--no-record"], &[]);
    through(d, &guard);
    for _ in 0..2 {
        let out = plumbline_env(
            d,
            &["observe", "--config", "through.toml", "--store", "o.db"],
            &[("PLUMBLINE_TOKENS", d.join("none.json").to_str().unwrap())],
        );
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    }
    // The guard's stderr is read by a thread of the test: give it a moment.
    let hint = "run the guard with --server NAME";
    for _ in 0..100 {
        if guard.log.lock().unwrap().contains(hint) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let log = guard.log.lock().unwrap().clone();
    assert_eq!(log.matches(hint).count(), 1, "{log}");
    assert_eq!(server.oauth_counts()["authorizations"], 0);
}
