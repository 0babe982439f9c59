//! What goes wrong in the authorization flow. Messages name the server,
//! the URL (without its query) and what the other side said, sanitised;
//! never a token, a code or a client secret.

/// Why a server could not be authorized.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// A request of the flow failed (connection, timeout, size).
    #[error("{0}")]
    Http(String),
    /// A metadata document is missing, unreadable or refused.
    #[error("discovery: {0}")]
    Discovery(String),
    /// Registering the client failed, or no way to register is offered.
    #[error("client registration: {0}")]
    Registration(String),
    /// The authorization server answered the authorization request with
    /// an error, or its answer failed a check.
    #[error("authorization: {0}")]
    Authorization(String),
    /// The token endpoint refused.
    #[error("token request: {0}")]
    Token(String),
    /// A person must log in (`plumbline login SERVER`): there is no token
    /// that works, and no browser can be opened here.
    #[error("a person must log in: {0}")]
    LoginRequired(String),
    /// The server kept refusing new tokens.
    #[error("the server refused {0} authorizations in a row")]
    TooManyAttempts(u32),
    /// The configuration cannot work.
    #[error("configuration: {0}")]
    Configuration(String),
}

pub use plumbline_base::sanitize::excerpt;
