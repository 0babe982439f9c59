//! `--oauth-token-lifetime SECS`: the HTTP server behind the MCP
//! authorization flow, with its own authorization server on the same
//! port, for tests of expiry, refresh and revocation (the conformance
//! suite's mock never issues a refresh token). It serves the protected
//! resource metadata, RFC 8414 metadata, dynamic registration, an
//! authorization endpoint that redirects at once (no login page), and a
//! token endpoint that checks PKCE S256, issues access tokens that expire
//! after the lifetime, and rotates refresh tokens. `POST
//! /control/oauth/revoke` revokes every token; `GET /control/oauth` counts
//! authorizations, code exchanges and refreshes; `POST
//! /control/oauth/scopes` (a JSON array of scopes) sets the
//! `scopes_supported` both metadata documents publish (none by default),
//! for tests of that metadata's drift.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, Request, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::json;

#[derive(Default)]
struct Inner {
    next: u64,
    /// code → its PKCE challenge
    codes: HashMap<String, String>,
    access: HashMap<String, Instant>,
    refresh: HashSet<String>,
    authorizations: u64,
    exchanges: u64,
    refreshes: u64,
    refused_refreshes: u64,
    /// What both metadata documents publish as `scopes_supported`.
    scopes: Option<Vec<String>>,
}

impl Inner {
    /// A new token, code or client id: `PREFIX-N-PID`.
    fn fresh(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}-{}-{}", self.next, std::process::id())
    }
}

/// The authorization server's state, shared by its routes.
#[derive(Clone)]
pub struct OAuth {
    base: String,
    lifetime: Duration,
    inner: Arc<Mutex<Inner>>,
}

impl OAuth {
    pub fn new(base: String, lifetime: Duration) -> OAuth {
        OAuth {
            base,
            lifetime,
            inner: Arc::default(),
        }
    }

    /// The routes of the resource metadata and the authorization server.
    pub fn routes(&self) -> Router {
        Router::new()
            .route("/.well-known/oauth-protected-resource/mcp", get(resource))
            .route("/.well-known/oauth-authorization-server", get(metadata))
            .route("/oauth/register", post(register))
            .route("/oauth/authorize", get(authorize))
            .route("/oauth/token", post(token))
            .route("/control/oauth", get(counts))
            .route("/control/oauth/revoke", post(revoke))
            .route("/control/oauth/scopes", post(set_scopes))
            .with_state(self.clone())
    }

    /// Refuses a request to `/mcp` without a live access token.
    pub async fn guard(self, request: Request<Body>, next: Next) -> Response {
        let token = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::to_owned);
        let live = token.is_some_and(|t| {
            let inner = self.inner.lock().unwrap();
            inner
                .access
                .get(&t)
                .is_some_and(|until| Instant::now() < *until)
        });
        if live {
            return next.run(request).await;
        }
        (
            StatusCode::UNAUTHORIZED,
            [(
                header::WWW_AUTHENTICATE,
                format!(
                    "Bearer error=\"invalid_token\", resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\"",
                    self.base
                ),
            )],
        )
            .into_response()
    }
}

async fn resource(State(o): State<OAuth>) -> Json<serde_json::Value> {
    let mut doc = json!({"resource": format!("{}/mcp", o.base), "authorization_servers": [o.base]});
    if let Some(scopes) = &o.inner.lock().unwrap().scopes {
        doc["scopes_supported"] = json!(scopes);
    }
    Json(doc)
}

async fn set_scopes(State(o): State<OAuth>, Json(scopes): Json<Vec<String>>) -> StatusCode {
    o.inner.lock().unwrap().scopes = Some(scopes);
    StatusCode::NO_CONTENT
}

async fn metadata(State(o): State<OAuth>) -> Json<serde_json::Value> {
    let scopes = o.inner.lock().unwrap().scopes.clone();
    let mut doc = json!({
        "issuer": o.base,
        "authorization_endpoint": format!("{}/oauth/authorize", o.base),
        "token_endpoint": format!("{}/oauth/token", o.base),
        "registration_endpoint": format!("{}/oauth/register", o.base),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "authorization_response_iss_parameter_supported": true,
    });
    if let Some(scopes) = scopes {
        doc["scopes_supported"] = json!(scopes);
    }
    Json(doc)
}

async fn register(State(o): State<OAuth>) -> impl IntoResponse {
    let id = o.inner.lock().unwrap().fresh("client");
    (
        StatusCode::CREATED,
        Json(json!({"client_id": id, "token_endpoint_auth_method": "none"})),
    )
}

async fn authorize(State(o): State<OAuth>, uri: axum::http::Uri) -> Response {
    let q = decode_form(uri.query().unwrap_or(""));
    let (Some(redirect), Some(challenge)) = (q.get("redirect_uri"), q.get("code_challenge")) else {
        return (
            StatusCode::BAD_REQUEST,
            "redirect_uri and code_challenge are required",
        )
            .into_response();
    };
    let mut inner = o.inner.lock().unwrap();
    inner.authorizations += 1;
    let code = inner.fresh("code");
    inner.codes.insert(code.clone(), challenge.clone());
    let state = q.get("state").cloned().unwrap_or_default();
    let location = format!(
        "{redirect}?code={code}&state={}&iss={}",
        encode(&state),
        encode(&o.base)
    );
    (StatusCode::FOUND, [(header::LOCATION, location)]).into_response()
}

async fn token(State(o): State<OAuth>, body: String) -> Response {
    let form = decode_form(&body);
    let get = |k: &str| form.get(k).map(String::as_str).unwrap_or("");
    let mut inner = o.inner.lock().unwrap();
    match get("grant_type") {
        "authorization_code" => {
            let Some(challenge) = inner.codes.remove(get("code")) else {
                return refuse("invalid_grant");
            };
            let digest =
                ring::digest::digest(&ring::digest::SHA256, get("code_verifier").as_bytes());
            if URL_SAFE_NO_PAD.encode(digest.as_ref()) != challenge {
                return refuse("invalid_grant");
            }
            inner.exchanges += 1;
        }
        "refresh_token" => {
            if !inner.refresh.remove(get("refresh_token")) {
                inner.refused_refreshes += 1;
                return refuse("invalid_grant");
            }
            inner.refreshes += 1;
        }
        _ => return refuse("unsupported_grant_type"),
    }
    let access = inner.fresh("access");
    let refresh = inner.fresh("refresh");
    inner
        .access
        .insert(access.clone(), Instant::now() + o.lifetime);
    inner.refresh.insert(refresh.clone());
    Json(json!({
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": o.lifetime.as_secs(),
        "refresh_token": refresh,
    }))
    .into_response()
}

fn refuse(error: &str) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({"error": error}))).into_response()
}

async fn counts(State(o): State<OAuth>) -> Json<serde_json::Value> {
    let inner = o.inner.lock().unwrap();
    Json(json!({
        "authorizations": inner.authorizations,
        "exchanges": inner.exchanges,
        "refreshes": inner.refreshes,
        "refused_refreshes": inner.refused_refreshes,
    }))
}

async fn revoke(State(o): State<OAuth>) -> StatusCode {
    let mut inner = o.inner.lock().unwrap();
    inner.access.clear();
    inner.refresh.clear();
    StatusCode::NO_CONTENT
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// An `application/x-www-form-urlencoded` body.
fn decode_form(body: &str) -> HashMap<String, String> {
    let decode = |s: &str| {
        let bytes = s.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'+' => out.push(b' '),
                b'%' if i + 2 < bytes.len() => match u8::from_str_radix(&s[i + 1..i + 3], 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                },
                b => out.push(b),
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    };
    body.split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect()
}
