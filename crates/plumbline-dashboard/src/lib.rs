//! Plumbline's dashboard: server-rendered pages and a JSON API over the
//! store, for reviewing drift and accepting changes into a baseline.
//!
//! [`router`] builds the whole application from an [`AppState`]; the CLI's
//! `plumbline serve` binds it (see [`check_listen`] for when it refuses
//! to). Pages and API read the same views: every server with its latest
//! observation and its worst unreviewed change; a server's timeline; an
//! observation's tools and changes; a change with its old and new
//! definitions side by side, a word diff of each changed field and each
//! fired rule's evidence highlighted in place; a tool's history; the rule
//! documents. A *change* is one tool's drift (added, removed, renamed or
//! changed) between an observation and the server's previous successful
//! one, computed with `plumbline-drift` exactly as `plumbline observe`
//! computes it.
//!
//! # Safety of what is shown
//!
//! Every string from a server reaches HTML through maud, which escapes it,
//! and through [`text`], which draws invisible and bidi code points as
//! badges. No page has a script. Every response carries a strict
//! Content-Security-Policy, `X-Content-Type-Options: nosniff` and
//! `Referrer-Policy: no-referrer`.
//!
//! # Access
//!
//! With a token configured, every request (page, API, stylesheet) needs
//! it: `Authorization: Bearer <token>`, or the session cookie a browser
//! gets by opening any page with `?token=<token>` once. Review forms carry
//! a per-process token against cross-site request forgery, and requests
//! that a browser marks cross-site are refused.

pub mod api;
mod auth;
/// The history's read side, as the pages and the API use it.
pub use plumbline_history::read as changes;
mod error;
pub mod links;
pub mod markdown;
pub mod pages;
pub mod text;
mod views;
pub mod worddiff;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use axum::extract::Request;
use axum::http::{header, HeaderValue};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::Router;
use plumbline_history::{History, StoreError};
use plumbline_taxonomy::Taxonomy;

pub use auth::{constant_time_eq, SESSION_COOKIE};
pub use error::Failure;

/// The Content-Security-Policy of every response: nothing but our own
/// stylesheet and images, no script at all, no framing.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; img-src 'self'; \
     form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// What `plumbline serve` was told.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The access token; `None` (or empty) for none, allowed on loopback
    /// addresses only ([`check_listen`]).
    pub token: Option<String>,
    /// The reviewer name review forms start with.
    pub reviewer: String,
    /// The taxonomy that grades every change shown.
    pub taxonomy: Taxonomy,
}

/// Errors setting the dashboard up.
#[derive(Debug, thiserror::Error)]
pub enum DashboardError {
    #[error(
        "refusing to listen on {addr}: it is not a loopback address, and without a token \
         anyone who can reach it could read the store and accept changes; \
         set --token or PLUMBLINE_TOKEN"
    )]
    TokenRequired { addr: SocketAddr },

    #[error("cannot get random bytes for the form tokens")]
    Random(#[source] getrandom::Error),

    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Whether the dashboard may listen on `addr` with this token: a
/// non-loopback address needs a (non-empty) token, since anyone who can
/// reach it could otherwise read the store and accept changes.
pub fn check_listen(addr: SocketAddr, token: Option<&str>) -> Result<(), DashboardError> {
    let has_token = token.is_some_and(|t| !t.is_empty());
    if addr.ip().is_loopback() || has_token {
        Ok(())
    } else {
        Err(DashboardError::TokenRequired { addr })
    }
}

/// Everything the handlers share.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    /// One connection, used on blocking threads one request at a time;
    /// SQLite's WAL lets the watcher write meanwhile.
    store: Mutex<History>,
    /// Reads the grades the history recorded; grades only a change page's
    /// one change (its evidence), and what the store lacks, in memory.
    pub(crate) grader: plumbline_history::Grader,
    pub(crate) access: auth::Access,
    pub(crate) reviewer: String,
    /// Permits for the costly work of a change (grading it, diffing and
    /// highlighting a megabyte tool): at most this many at once, so that
    /// requests piling up cannot pile up CPU work.
    costly: Arc<tokio::sync::Semaphore>,
}

/// How many changes may be graded and rendered at once; a request beyond
/// is answered 503 at once rather than queued.
pub const COSTLY_AT_ONCE: usize = 2;

impl AppState {
    /// The dashboard over `store`.
    pub fn new(store: History, options: Options) -> Result<AppState, DashboardError> {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(DashboardError::Random)?;
        Ok(AppState {
            inner: Arc::new(Inner {
                store: Mutex::new(store),
                grader: plumbline_history::Grader::new(options.taxonomy),
                access: auth::Access::new(options.token.filter(|t| !t.is_empty()), &secret),
                reviewer: options.reviewer,
                costly: Arc::new(tokio::sync::Semaphore::new(COSTLY_AT_ONCE)),
            }),
        })
    }

    /// The dashboard over the store file at `path`.
    pub fn open(path: &Path, options: Options) -> Result<AppState, DashboardError> {
        AppState::new(History::open(path)?, options)
    }

    /// The taxonomy every change is graded with.
    pub fn taxonomy(&self) -> Taxonomy {
        self.inner.grader.taxonomy()
    }

    /// The token review forms must carry (the same for every form of this
    /// process).
    pub fn form_token(&self) -> &str {
        self.inner.access.form_token()
    }

    /// Runs `f` with the store on a blocking thread, within
    /// [`REQUEST_BUDGET`].
    pub(crate) async fn with_store<T, F>(&self, f: F) -> Result<T, Failure>
    where
        T: Send + 'static,
        F: FnOnce(&mut History, &Inner) -> Result<T, Failure> + Send + 'static,
    {
        let state = self.clone();
        blocking(move || {
            // A panic while holding the lock leaves the connection usable
            // (SQLite rolls back an unfinished transaction), so a poisoned
            // lock is taken over rather than failing every later request.
            let mut store = state
                .inner
                .store
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            f(&mut store, &state.inner)
        })
        .await?
    }
}

impl AppState {
    /// Runs the costly part of a change request, `f`, on a blocking thread
    /// within [`REQUEST_BUDGET`], if one of the [`COSTLY_AT_ONCE`] permits
    /// is free; else answers 503 at once. The permit is held until the work
    /// ends, even past the budget, so at most that many run at any time.
    pub(crate) async fn costly<T, F>(&self, f: F) -> Result<T, Failure>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let Ok(permit) = Arc::clone(&self.inner.costly).try_acquire_owned() else {
            return Err(Failure::Rejected(
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "{COSTLY_AT_ONCE} other changes are being graded right now; try again in a moment"
                ),
            ));
        };
        blocking(move || {
            let _permit = permit;
            f()
        })
        .await
    }
}

/// Refuses a request for a costly page (a change, a raw download) that a
/// browser says comes from another site, unless it is a person opening it
/// (a top-level navigation they started, as from a link in an alert): a
/// page elsewhere cannot make browsers fetch such pages in bulk.
pub(crate) fn not_cross_site(headers: &axum::http::HeaderMap) -> Result<(), Failure> {
    let is = |name: &str, value: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case(value))
    };
    if is("sec-fetch-site", "cross-site")
        && !(is("sec-fetch-mode", "navigate")
            && is("sec-fetch-dest", "document")
            && is("sec-fetch-user", "?1"))
    {
        return Err(Failure::Forbidden(
            "this page is not served to requests from another site; open it from the dashboard"
                .to_owned(),
        ));
    }
    Ok(())
}

/// The longest one request's work may take before the request is answered
/// 503; the work itself finishes on its thread, but no client hangs on it.
pub const REQUEST_BUDGET: std::time::Duration = std::time::Duration::from_secs(30);

/// Runs `f` on a blocking thread, answering 503 past [`REQUEST_BUDGET`].
pub(crate) async fn blocking<T, F>(f: F) -> Result<T, Failure>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    blocking_within(REQUEST_BUDGET, f).await
}

async fn blocking_within<T, F>(budget: std::time::Duration, f: F) -> Result<T, Failure>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    match tokio::time::timeout(budget, tokio::task::spawn_blocking(f)).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(Failure::Internal(format!("a request task failed: {e}"))),
        Err(_) => Err(Failure::Rejected(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "this request took longer than {:.0} s; try again later",
                budget.as_secs_f64()
            ),
        )),
    }
}

/// The whole dashboard: pages, stylesheet, JSON API, with the access check
/// and the security headers around all of it.
pub fn router(state: AppState) -> Router {
    pages::routes()
        .merge(api::routes())
        .fallback(pages::not_found)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_access,
        ))
        .layer(middleware::from_fn(security_headers))
        .with_state(state)
}

/// Adds the security headers to every response, errors included, and
/// `Cache-Control: no-store` where the handler set no caching.
async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    // Pages and API answers carry reviews, tokens in forms and server text:
    // never kept in a shared or browser cache (the stylesheet sets its own).
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn work_past_its_budget_is_answered_503_not_waited_for() {
        let slow = blocking_within(std::time::Duration::from_millis(20), || {
            std::thread::sleep(std::time::Duration::from_millis(500));
        })
        .await;
        match slow {
            Err(Failure::Rejected(status, message)) => {
                assert_eq!(status, axum::http::StatusCode::SERVICE_UNAVAILABLE);
                assert!(message.contains("took longer"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            blocking_within(std::time::Duration::from_secs(5), || 7)
                .await
                .ok(),
            Some(7)
        );
    }

    /// Issue 23, hole 14: costly work is limited to a few at once; one
    /// more is refused at once instead of queued.
    #[tokio::test]
    async fn costly_work_beyond_the_permits_is_refused_at_once() {
        let dir = tempfile::tempdir().expect("temp dir");
        let state = AppState::open(&dir.path().join("p.db"), Options::default()).expect("state");
        let (release, wait) = std::sync::mpsc::channel::<()>();
        let wait = Arc::new(Mutex::new(wait));
        let mut running = Vec::new();
        for _ in 0..COSTLY_AT_ONCE {
            let (state, wait) = (state.clone(), Arc::clone(&wait));
            running.push(tokio::spawn(async move {
                state
                    .costly(move || {
                        let _ = wait.lock().unwrap().recv();
                    })
                    .await
            }));
        }
        // Until every permit is taken, a further request may still get one.
        while state.inner.costly.available_permits() > 0 {
            tokio::task::yield_now().await;
        }
        match state.costly(|| ()).await {
            Err(Failure::Rejected(status, message)) => {
                assert_eq!(status, axum::http::StatusCode::SERVICE_UNAVAILABLE);
                assert!(message.contains("being graded"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        for _ in 0..COSTLY_AT_ONCE {
            release.send(()).unwrap();
        }
        for r in running {
            r.await.unwrap().expect("ran");
        }
        assert_eq!(state.costly(|| 7).await.ok(), Some(7));
    }

    #[test]
    fn only_a_person_opening_a_costly_page_from_another_site_is_served() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut h = axum::http::HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, HeaderValue::from_static(v));
            }
            h
        };
        assert!(not_cross_site(&headers(&[])).is_ok());
        assert!(not_cross_site(&headers(&[("sec-fetch-site", "same-origin")])).is_ok());
        for embedded in [
            &[
                ("sec-fetch-site", "cross-site"),
                ("sec-fetch-dest", "image"),
                ("sec-fetch-mode", "no-cors"),
            ][..],
            &[
                ("sec-fetch-site", "cross-site"),
                ("sec-fetch-dest", "iframe"),
                ("sec-fetch-mode", "navigate"),
            ],
            &[
                ("sec-fetch-site", "cross-site"),
                ("sec-fetch-dest", "empty"),
                ("sec-fetch-mode", "cors"),
            ],
            &[
                ("sec-fetch-site", "cross-site"),
                ("sec-fetch-dest", "document"),
                ("sec-fetch-mode", "navigate"),
            ],
        ] {
            assert!(not_cross_site(&headers(embedded)).is_err(), "{embedded:?}");
        }
        assert!(not_cross_site(&headers(&[
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-dest", "document"),
            ("sec-fetch-mode", "navigate"),
            ("sec-fetch-user", "?1"),
        ]))
        .is_ok());
    }

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("address")
    }

    #[test]
    fn loopback_needs_no_token() {
        for a in ["127.0.0.1:8077", "127.3.2.1:1", "[::1]:8077"] {
            assert!(check_listen(addr(a), None).is_ok(), "{a}");
        }
    }

    #[test]
    fn any_other_address_needs_a_non_empty_token() {
        for a in [
            "0.0.0.0:8077",
            "[::]:8077",
            "192.0.2.10:80",
            "[2001:db8::1]:80",
        ] {
            let err = check_listen(addr(a), None).expect_err(a);
            assert!(err.to_string().contains("PLUMBLINE_TOKEN"), "{err}");
            assert!(check_listen(addr(a), Some("")).is_err(), "{a}");
            assert!(check_listen(addr(a), Some("s3cret-token")).is_ok(), "{a}");
        }
    }
}
