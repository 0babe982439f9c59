//! Who may use the dashboard, and which requests a browser may be tricked
//! into sending.
//!
//! **Token.** When a token is configured, every request must carry it: as
//! `Authorization: Bearer <token>` (scripts, the API), or as the session
//! cookie that a browser receives by opening any URL with `?token=<token>`
//! once (the answer sets an `HttpOnly; SameSite=Strict` cookie and
//! redirects to the same URL without the token, so it leaves the address
//! bar and history). The cookie holds a digest of the token and of this
//! process's secret, not the token, and lasts twelve hours at most. Every
//! comparison is constant-time.
//!
//! **Rebinding.** Without a token the dashboard is bound to loopback, but a
//! web page whose DNS name is rebound to 127.0.0.1 could still reach it; so
//! without a token, a request must name a loopback host (`127.0.0.1`,
//! `[::1]`, `localhost`) in `Host`.
//!
//! **Forgery.** Review forms carry a token derived from a random secret of
//! this process; a cross-site page cannot read it, so it cannot build a
//! form that passes. The session cookie is `SameSite=Strict`, so a
//! cross-site form does not carry it either. Requests that the browser
//! labels cross-site (`Sec-Fetch-Site: cross-site`) or whose `Origin`
//! names another host are refused outright. The JSON API's writes take
//! `application/json` only, which no cross-site form can send without a
//! CORS preflight that this server never grants.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use plumbline_history::digest;

use crate::error::Failure;
use crate::AppState;

/// The name of the session cookie.
pub const SESSION_COOKIE: &str = "plumbline_session";

/// The query parameter a browser brings the token in once.
const TOKEN_PARAM: &str = "token";

/// The configured token and what is derived from it.
pub(crate) struct Access {
    token: Option<String>,
    /// The session cookie's value: a digest of the token.
    session: Option<String>,
    form_token: String,
}

impl Access {
    pub(crate) fn new(token: Option<String>, secret: &[u8; 32]) -> Access {
        // Bound to this process: a restart ends every browser session.
        let session = token.as_deref().map(|t| {
            let mut material = secret.to_vec();
            material.extend_from_slice(t.as_bytes());
            derive(b"plumbline dashboard session v2\0", &material)
        });
        Access {
            token,
            session,
            form_token: derive(b"plumbline dashboard form v1\0", secret),
        }
    }

    pub(crate) fn form_token(&self) -> &str {
        &self.form_token
    }
}

/// SHA-256 of `label || value`, in hex.
fn derive(label: &[u8], value: &[u8]) -> String {
    let mut bytes = label.to_vec();
    bytes.extend_from_slice(value);
    digest(&bytes).to_string()
}

/// Compares two secrets in time that depends on neither: both are hashed
/// first (so their lengths do not show either), then every byte of the
/// digests is compared.
pub fn constant_time_eq(a: &str, b: &str) -> bool {
    let (x, y) = (digest(a.as_bytes()), digest(b.as_bytes()));
    let diff = x
        .as_bytes()
        .iter()
        .zip(y.as_bytes())
        .fold(0u8, |acc, (p, q)| acc | (p ^ q));
    std::hint::black_box(diff) == 0
}

/// The value of cookie `name` in the request's `Cookie` headers.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// The access check around every route.
pub(crate) async fn require_access(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let access = &state.inner.access;
    let (Some(token), Some(session)) = (access.token.as_deref(), access.session.as_deref()) else {
        if !names_loopback(request.headers()) {
            return (
                StatusCode::MISDIRECTED_REQUEST,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                "This dashboard answers only to a loopback host name (127.0.0.1, [::1], localhost); \
                 serve it with --token to reach it by another name.\n",
            )
                .into_response();
        }
        return next.run(request).await;
    };
    let headers = request.headers();
    let by_bearer = bearer(headers).is_some_and(|given| constant_time_eq(given, token));
    let by_cookie =
        cookie(headers, SESSION_COOKIE).is_some_and(|given| constant_time_eq(given, session));
    if by_bearer || by_cookie {
        return next.run(request).await;
    }

    let query: Vec<(String, String)> = request
        .uri()
        .query()
        .and_then(|q| serde_urlencoded::from_str(q).ok())
        .unwrap_or_default();
    let given = query.iter().find(|(k, _)| k == TOKEN_PARAM).map(|(_, v)| v);
    if let Some(given) = given {
        if constant_time_eq(given, token) {
            return login_redirect(request.uri().path(), &query, session);
        }
    }
    unauthorized()
}

/// Whether the request's `Host` names a loopback address (or is absent, as
/// from a non-browser client): a page rebound to 127.0.0.1 sends its own
/// name.
fn names_loopback(headers: &HeaderMap) -> bool {
    let mut hosts = headers.get_all(header::HOST).iter();
    let Some(host) = hosts.next() else {
        return true;
    };
    // Two Host headers: which one a proxy or browser meant is unknowable.
    if hosts.next().is_some() {
        return false;
    }
    let Ok(host) = host.to_str() else {
        return false;
    };
    let (name, port) = match host.strip_prefix('[') {
        // [::1]:port
        Some(rest) => match rest.split_once(']') {
            Some((ip, after)) => (ip, after),
            None => return false,
        },
        None => match host.rsplit_once(':') {
            // The port with its colon: `:8080`.
            Some((name, _)) => (name, &host[name.len()..]),
            None => (host, ""),
        },
    };
    // Nothing but `:digits` may follow the name (`localhost:evil` is not
    // a port).
    let port_ok = match port.strip_prefix(':') {
        Some(digits) => {
            !digits.is_empty() && digits.len() <= 5 && digits.bytes().all(|b| b.is_ascii_digit())
        }
        None => port.is_empty(),
    };
    port_ok
        && (name.eq_ignore_ascii_case("localhost")
            || name
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback()))
}

/// How long a browser session lasts.
const SESSION_SECONDS: u32 = 12 * 3600;

/// Sets the session cookie and sends the browser back to where it was
/// going, without the token in the URL.
fn login_redirect(path: &str, query: &[(String, String)], session: &str) -> Response {
    let rest: Vec<&(String, String)> = query.iter().filter(|(k, _)| k != TOKEN_PARAM).collect();
    // `//host` would be a protocol-relative URL to another site, and
    // browsers read `/\host` as `//host`.
    let path = if path.starts_with('/')
        && !path.starts_with("//")
        && !path.contains('\\')
        && !path.chars().any(char::is_control)
    {
        path
    } else {
        "/"
    };
    let mut location = path.to_owned();
    if !rest.is_empty() {
        if let Ok(q) = serde_urlencoded::to_string(&rest) {
            location.push('?');
            location.push_str(&q);
        }
    }
    let cookie = format!(
        "{SESSION_COOKIE}={session}; Path=/; Max-Age={SESSION_SECONDS}; HttpOnly; SameSite=Strict"
    );
    let mut response = StatusCode::SEE_OTHER.into_response();
    let headers = response.headers_mut();
    if let (Ok(location), Ok(cookie)) = (
        HeaderValue::from_str(&location),
        HeaderValue::from_str(&cookie),
    ) {
        headers.insert(header::LOCATION, location);
        headers.insert(header::SET_COOKIE, cookie);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn unauthorized() -> Response {
    let mut response = (
        StatusCode::UNAUTHORIZED,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "This dashboard needs its token: send `Authorization: Bearer <token>`, \
         or open any page once with ?token=<token> in a browser.\n",
    )
        .into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"plumbline\""),
    );
    response
}

/// Refuses a state-changing request that a browser says comes from
/// another site, or whose `Origin` is another host than the one asked.
pub(crate) fn same_site(headers: &HeaderMap) -> Result<(), Failure> {
    let forbidden = || Failure::Forbidden("cross-site requests cannot change reviews".to_owned());
    if headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("cross-site"))
    {
        return Err(forbidden());
    }
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    // With `Referrer-Policy: no-referrer`, browsers send `Origin: null` on
    // form posts; the form token covers those.
    if let Some(origin) = origin.filter(|o| *o != "null") {
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
        let origin_host = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"));
        if host.is_none() || origin_host != host {
            return Err(forbidden());
        }
    }
    Ok(())
}

/// Checks a form's token and where the request comes from.
pub(crate) fn check_form(
    state: &AppState,
    headers: &HeaderMap,
    token: &str,
) -> Result<(), Failure> {
    same_site(headers)?;
    if constant_time_eq(token, state.form_token()) {
        Ok(())
    } else {
        Err(Failure::Forbidden(
            "the form is stale or forged: reload the page and submit it again".to_owned(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_time_eq_compares_values() {
        assert!(constant_time_eq("s3cret", "s3cret"));
        assert!(!constant_time_eq("s3cret", "s3creT"));
        assert!(!constant_time_eq("s3cret", "s3cret "));
        assert!(!constant_time_eq("", "x"));
        assert!(constant_time_eq("", ""));
    }

    #[test]
    fn cookies_and_bearer_tokens_are_read_from_headers() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; plumbline_session=abc ; b=2"),
        );
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("bearer  tok"),
        );
        assert_eq!(cookie(&h, SESSION_COOKIE), Some("abc"));
        assert_eq!(cookie(&h, "c"), None);
        assert_eq!(bearer(&h), Some("tok"));
    }

    #[test]
    fn cross_site_requests_are_refused() {
        let with = |pairs: &[(&'static str, &'static str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, HeaderValue::from_static(v));
            }
            same_site(&h)
        };
        assert!(with(&[]).is_ok());
        assert!(with(&[
            ("host", "127.0.0.1:8077"),
            ("origin", "http://127.0.0.1:8077")
        ])
        .is_ok());
        assert!(with(&[("origin", "null")]).is_ok());
        assert!(with(&[("sec-fetch-site", "same-origin")]).is_ok());
        assert!(with(&[
            ("host", "127.0.0.1:8077"),
            ("origin", "http://evil.example")
        ])
        .is_err());
        assert!(with(&[("origin", "http://127.0.0.1:8077")]).is_err());
        assert!(with(&[("sec-fetch-site", "cross-site")]).is_err());
    }

    #[test]
    fn the_login_redirect_stays_on_this_site_and_drops_the_token() {
        let q = vec![
            ("token".to_owned(), "t".to_owned()),
            ("sort".to_owned(), "name".to_owned()),
        ];
        let r = login_redirect("/servers/a", &q, "sess");
        assert_eq!(r.headers()[header::LOCATION], "/servers/a?sort=name");
        let r = login_redirect("//evil.example/x", &q[..1], "sess");
        assert_eq!(r.headers()[header::LOCATION], "/");
        let cookie = r.headers()[header::SET_COOKIE].to_str().expect("ascii");
        assert_eq!(
            cookie,
            "plumbline_session=sess; Path=/; Max-Age=43200; HttpOnly; SameSite=Strict"
        );
        // Browsers read `/\\host` as `//host`.
        let r = login_redirect("/\\evil.example/", &q[..1], "sess");
        assert_eq!(r.headers()[header::LOCATION], "/");
    }

    #[test]
    fn without_a_token_only_loopback_host_names_are_answered() {
        let host = |v: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(header::HOST, HeaderValue::from_static(v));
            names_loopback(&h)
        };
        for ok in [
            "127.0.0.1:8077",
            "127.0.0.2",
            "[::1]:8077",
            "localhost:8077",
            "LOCALHOST",
        ] {
            assert!(host(ok), "{ok}");
        }
        for rebound in [
            "rebind.evil.example:8077",
            "evil.example",
            "10.0.0.1:8077",
            "[::2]:1",
            "localhost.evil.example",
            "localhost:evil",
            "127.0.0.1:80x",
            "[::1]evil",
            "[::1",
            "localhost:",
        ] {
            assert!(!host(rebound), "{rebound}");
        }
        let mut two = HeaderMap::new();
        two.append(header::HOST, HeaderValue::from_static("127.0.0.1:8077"));
        two.append(header::HOST, HeaderValue::from_static("evil.example"));
        assert!(!names_loopback(&two), "duplicate Host headers");
        assert!(
            names_loopback(&HeaderMap::new()),
            "a client that sends no Host"
        );
    }

    #[test]
    fn sessions_belong_to_one_process() {
        let a = Access::new(Some("t".to_owned()), &[1; 32]);
        let b = Access::new(Some("t".to_owned()), &[2; 32]);
        assert_ne!(a.session, b.session);
        assert_ne!(a.session.as_deref(), Some("t"));
    }
}
