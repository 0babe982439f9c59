//! Tokens over time, against the test server behind OAuth
//! (`plumbline-test-server --oauth-token-lifetime`, its own authorization
//! server on the same loopback port): a person logs in once, an access
//! token that expired is renewed with the refresh token (no second
//! authorization), and a revoked refresh token makes `observe` fail the
//! server (exit 2) saying who must log in.

mod common;

use common::{plumbline_env, text, HttpGuard, HttpServer};

#[test]
fn expired_tokens_are_renewed_and_a_revoked_refresh_token_asks_for_a_login() {
    let server = HttpServer::start(&["--oauth-token-lifetime", "1"]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("plumbline.toml"),
        format!(
            "[servers.tickets]\ntransport = \"http\"\nurl = \"{}\"\n",
            server.url
        ),
    )
    .unwrap();
    let tokens = dir.path().join("config/tokens.json");
    let tokens_text = tokens.display().to_string();
    let env = [
        ("PLUMBLINE_TOKENS", tokens_text.as_str()),
        ("PLUMBLINE_BROWSER", "curl -s -L -o /dev/null"),
    ];
    let store = dir.path().join("p.db").display().to_string();
    let observe = || plumbline_env(dir.path(), &["observe", "--store", &store], &env);

    // Nobody has logged in: exit 2, the login to run named, nothing asked.
    asks_for_a_login(observe());
    assert_eq!(server.oauth_counts()["authorizations"], 0);

    let out = plumbline_env(dir.path(), &["login", "tickets"], &env);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(server.oauth_counts()["authorizations"], 1);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&tokens).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

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
    let out = plumbline_env(dir.path(), &["login", "tickets"], &env);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
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
    std::fs::write(
        d.join("plumbline.toml"),
        format!(
            "[servers.tickets]\ntransport = \"http\"\nurl = \"{}\"\n",
            server.url
        ),
    )
    .unwrap();
    let tokens = d.join("tokens.json").display().to_string();
    let env = [
        ("PLUMBLINE_TOKENS", tokens.as_str()),
        ("PLUMBLINE_BROWSER", "curl -s -L -o /dev/null"),
    ];
    let out = plumbline_env(d, &["login", "tickets"], &env);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
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
    std::fs::write(
        d.join("through.toml"),
        format!(
            "[servers.through]\ntransport = \"http\"\nurl = {:?}\n",
            guard.url
        ),
    )
    .unwrap();
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
