//! The Authorizer against an authorization server on 127.0.0.1: a refresh
//! the caller stops waiting for still completes (the server spends the old
//! refresh token as soon as it reads it, so a refresh cut short would
//! leave a dead refresh token and send a person to log in again), and a
//! machine's client-credentials tokens are kept for the next process
//! without its secret.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};
use plumbline_auth::tokens::{Kept, TokenFile};
use plumbline_auth::{Authorizer, Settings};
use serde_json::json;

#[derive(Clone, Default)]
struct Server {
    base: Arc<Mutex<String>>,
    /// The refresh token it still accepts.
    valid: Arc<Mutex<String>>,
    refreshes: Arc<AtomicU32>,
}

async fn metadata(State(s): State<Server>) -> Json<serde_json::Value> {
    let base = s.base.lock().unwrap().clone();
    Json(json!({
        "issuer": base,
        "authorization_endpoint": format!("{base}/authorize"),
        "token_endpoint": format!("{base}/token"),
        "code_challenge_methods_supported": ["S256"],
    }))
}

async fn resource(State(s): State<Server>) -> Json<serde_json::Value> {
    let base = s.base.lock().unwrap().clone();
    Json(json!({"resource": format!("{base}/mcp"), "authorization_servers": [base]}))
}

async fn token(
    State(s): State<Server>,
    body: String,
) -> (axum::http::StatusCode, Json<serde_json::Value>) {
    if body.contains("grant_type=client_credentials") {
        return (
            axum::http::StatusCode::OK,
            Json(json!({"access_token": "machine-1", "token_type": "Bearer", "expires_in": 3600})),
        );
    }
    let offered = body
        .split('&')
        .find_map(|kv| kv.strip_prefix("refresh_token="))
        .unwrap_or_default()
        .to_owned();
    let n = s.refreshes.fetch_add(1, Ordering::SeqCst) + 2;
    {
        let mut valid = s.valid.lock().unwrap();
        if *valid != offered {
            return (
                axum::http::StatusCode::BAD_REQUEST,
                Json(json!({"error": "invalid_grant"})),
            );
        }
        // Spent on receipt, as a rotating server does.
        *valid = format!("refresh-{n}");
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    (
        axum::http::StatusCode::OK,
        Json(json!({
            "access_token": format!("access-{n}"),
            "token_type": "Bearer",
            "expires_in": 3600,
            "refresh_token": format!("refresh-{n}"),
        })),
    )
}

/// The authorization server on a free loopback port: its state and base
/// URL.
async fn start() -> (Server, String) {
    let server = Server::default();
    *server.valid.lock().unwrap() = "refresh-1".to_owned();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    *server.base.lock().unwrap() = base.clone();
    let app = Router::new()
        .route("/.well-known/oauth-authorization-server", get(metadata))
        .route("/.well-known/oauth-protected-resource/mcp", get(resource))
        .route("/token", post(token))
        .with_state(server.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (server, base)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_outlives_a_caller_that_stopped_waiting() {
    let (server, base) = start().await;

    let dir = tempfile::tempdir().unwrap();
    let file = TokenFile::at(dir.path().join("tokens.json"));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    file.put(
        "srv",
        Some(Kept {
            issuer: base.clone(),
            client_id: "c".to_owned(),
            method: "none".to_owned(),
            access_token: "access-1".to_owned(),
            refresh_token: Some("refresh-1".to_owned()),
            expires_at: Some(now),
            resource: format!("{base}/mcp"),
            ..Kept::default()
        }),
    )
    .unwrap();
    let settings = Settings {
        token_file: Some(TokenFile::at(dir.path().join("tokens.json"))),
        server: "srv".to_owned(),
        ..Settings::default()
    };
    let auth = Arc::new(
        Authorizer::new(settings, Duration::from_secs(5), Duration::from_secs(10)).unwrap(),
    );

    // The caller gives up while the token endpoint is still answering.
    let gave_up = tokio::time::timeout(Duration::from_millis(150), auth.bearer_detached()).await;
    assert!(gave_up.is_err(), "the token endpoint answers slowly");
    tokio::time::sleep(Duration::from_millis(1000)).await;

    // The exchange completed: its tokens are used, with no second refresh
    // (which the spent refresh token would fail), and kept in the file.
    assert_eq!(auth.bearer().await.as_deref(), Some("access-2"));
    assert_eq!(server.refreshes.load(Ordering::SeqCst), 1);
    let kept = file.get("srv").unwrap().unwrap();
    assert_eq!(kept.refresh_token.as_deref(), Some("refresh-2"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_credentials_tokens_are_kept_for_the_next_process_without_the_secret() {
    let (_server, base) = start().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens.json");
    let settings = || Settings {
        client_id: Some("machine".to_owned()),
        client_secret: Some("s3cret-value".to_owned()),
        issuer: Some(base.clone()),
        grant: plumbline_auth::Grant::ClientCredentials,
        token_file: Some(TokenFile::at(path.clone())),
        server: format!("{base}/mcp"),
        ..Settings::default()
    };
    let auth =
        Authorizer::new(settings(), Duration::from_secs(5), Duration::from_secs(10)).unwrap();
    let token = auth.refused(401, &[]).await.unwrap();
    assert_eq!(token, "machine-1");
    let kept = TokenFile::at(path.clone())
        .get(&format!("{base}/mcp"))
        .unwrap()
        .expect("kept");
    assert_eq!(kept.access_token, "machine-1");
    assert_eq!(kept.client_id, "machine");
    assert!(!std::fs::read_to_string(&path)
        .unwrap()
        .contains("s3cret-value"));
    // Another process starts with the kept token: no request needed.
    let next =
        Authorizer::new(settings(), Duration::from_secs(5), Duration::from_secs(10)).unwrap();
    assert_eq!(next.bearer().await.as_deref(), Some("machine-1"));
}
