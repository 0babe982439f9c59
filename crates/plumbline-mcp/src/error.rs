//! Why a listing failed. Messages name the stage and what the server did;
//! server-supplied text in them is already sanitised for a terminal.

use std::fmt;
use std::time::Duration;

/// A failed listing: what went wrong, plus the end of the server's stderr
/// when it is a local process that wrote any.
#[derive(Debug)]
pub struct ListError {
    pub kind: ListErrorKind,
    /// The last bytes the server wrote to stderr (sanitised), if any.
    pub stderr_tail: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ListErrorKind {
    #[error("could not start `{command}`: {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{stage} timed out after {}", seconds(*after))]
    Timeout {
        stage: &'static str,
        after: Duration,
    },
    #[error("a message from the server exceeded {limit} bytes")]
    MessageTooLarge { limit: usize },
    #[error("{method}: the server sent something that is not JSON-RPC ({error}): {excerpt}")]
    NotJsonRpc {
        method: &'static str,
        error: String,
        excerpt: String,
    },
    #[error("{method}: {message}")]
    Protocol {
        method: &'static str,
        message: String,
    },
    #[error(
        "{method}: the server redirected (HTTP {status}) to another origin, {location}; \
         not followed, since the configured headers would go with it: \
         configure that URL instead if you trust it"
    )]
    Redirect {
        method: &'static str,
        status: u16,
        location: String,
    },
    #[error("{method} failed: the server answered error {code}: {message}")]
    Server {
        method: &'static str,
        code: i64,
        message: String,
    },
    /// The server stopped talking: a process that exited (its status, and
    /// the end of its stderr with the error), or a stream that closed.
    #[error("{}", ended_message(stage, how))]
    Exited { stage: &'static str, how: Ended },
    #[error("tools/list repeated the cursor {cursor} (page {page}); stopping instead of looping")]
    CursorRepeated { cursor: String, page: usize },
    #[error("tools/list went past {limit} pages; stopping")]
    TooManyPages { limit: usize },
    #[error("the server listed more than {limit} tools; stopping")]
    TooManyTools { limit: usize },
    #[error("talking to the server: {0}")]
    Io(#[from] std::io::Error),
    /// The server asks for authorization (OAuth) and none could be had.
    #[error("{method}: the server needs authorization: {source}")]
    Auth {
        method: &'static str,
        #[source]
        source: plumbline_auth::AuthError,
    },
}

/// "the server exited (exit status: 1) before answering server/discover"
/// for a process that is gone; what closed, otherwise.
/// How a server stopped talking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// Its process exited, with this status (`exit status: 1`,
    /// `signal: 9 (SIGKILL)`).
    Process(String),
    /// It closed its output, but its process is still running.
    StillRunning,
    /// A stream of it closed (`the notification stream closed`).
    Closed(&'static str),
}

fn ended_message(stage: &str, how: &Ended) -> String {
    match how {
        Ended::Process(status) => format!("the server exited ({status}) before answering {stage}"),
        Ended::StillRunning => {
            format!("the server closed its output during {stage}, but its process is still running")
        }
        Ended::Closed(what) => format!("the server closed its output ({what}) during {stage}"),
    }
}

fn seconds(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

impl ListError {
    pub fn new(kind: ListErrorKind) -> Self {
        ListError {
            kind,
            stderr_tail: None,
        }
    }
}

impl From<ListErrorKind> for ListError {
    fn from(kind: ListErrorKind) -> Self {
        ListError::new(kind)
    }
}

impl fmt::Display for ListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kind)?;
        if let Some(tail) = &self.stderr_tail {
            write!(f, "\nserver stderr (last lines):\n{tail}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ListError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.kind)
    }
}

pub(crate) use plumbline_base::sanitize::excerpt;

/// A reqwest error as an I/O error whose message carries the whole chain,
/// redacted ([`plumbline_base::error_chain`]).
pub(crate) fn describe_reqwest(e: &reqwest::Error) -> std::io::Error {
    std::io::Error::other(plumbline_base::error_chain(e))
}
