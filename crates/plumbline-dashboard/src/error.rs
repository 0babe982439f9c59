//! What can go wrong answering a request, and how each is answered: as an
//! HTML page for the pages, as `{"error": …}` for the JSON API.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use plumbline_history::StoreError;

/// Why a request failed, with a message for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    NotFound(String),
    BadRequest(String),
    Forbidden(String),
    Internal(String),
    /// A change that cannot be accepted (a name listed more than once);
    /// answered 400 like any bad request.
    NotAcceptable(String),
    /// A request the framework refused before a handler ran (a body that
    /// is not JSON, the wrong content type, a bad query), with its status.
    Rejected(StatusCode, String),
}

impl Failure {
    pub fn status(&self) -> StatusCode {
        match self {
            Failure::NotFound(_) => StatusCode::NOT_FOUND,
            Failure::BadRequest(_) => StatusCode::BAD_REQUEST,
            Failure::Forbidden(_) => StatusCode::FORBIDDEN,
            Failure::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Failure::Rejected(status, _) => *status,
            Failure::NotAcceptable(_) => StatusCode::BAD_REQUEST,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Failure::NotFound(m)
            | Failure::BadRequest(m)
            | Failure::Forbidden(m)
            | Failure::Internal(m)
            | Failure::Rejected(_, m)
            | Failure::NotAcceptable(m) => m,
        }
    }
}

use plumbline_base::error_chain as chain;

impl From<plumbline_history::HistoryError> for Failure {
    fn from(e: plumbline_history::HistoryError) -> Failure {
        use plumbline_history::HistoryError as H;
        match e {
            H::NotFound(m) => Failure::NotFound(m),
            H::Invalid(m) => Failure::BadRequest(m),
            H::NotAcceptable(m) => Failure::NotAcceptable(m),
            H::Inconsistent(m) => Failure::Internal(m),
            H::Store(e) => e.into(),
            e @ H::Derived { .. } => Failure::Internal(chain(&e)),
        }
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Failure {
        match e {
            StoreError::UnknownServer { server, .. } => {
                Failure::NotFound(format!("there is no server {server:?} in the store"))
            }
            StoreError::InvalidReview { .. } => Failure::BadRequest(chain(&e)),
            other => Failure::Internal(chain(&other)),
        }
    }
}

/// A failure answered as an HTML page.
#[derive(Debug)]
pub struct PageError(pub Failure);

impl<T: Into<Failure>> From<T> for PageError {
    fn from(f: T) -> PageError {
        PageError(f.into())
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let status = self.0.status();
        let body = crate::pages::error_page(status, self.0.message());
        (status, body).into_response()
    }
}

/// A failure answered as JSON.
#[derive(Debug)]
pub struct ApiError(pub Failure);

impl<T: Into<Failure>> From<T> for ApiError {
    fn from(f: T) -> ApiError {
        ApiError(f.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.0.status();
        let body = serde_json::json!({ "error": self.0.message() }).to_string();
        (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
    }
}
