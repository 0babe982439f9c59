//! What every Plumbline crate needs and none of them owns: the MCP client,
//! the store and the classifier all read tool JSON and show server text.
//! Pure functions over bytes and text; the one I/O is [`file::read_file`],
//! the bounded reader of files Plumbline is pointed at.
//!
//! - [`json`]: the strict JSON reader with taxonomy-v1's input rules
//!   (C1–C3), and [`pointer`]: RFC 6901 pointers (C4).
//! - [`canonical`]: RFC 8785 canonical JSON of a tool, and [`digest`]: the
//!   SHA-256 that names it (the store's content address and the lock
//!   file's pin are the same hash).
//! - [`sanitize`]: making server text safe for a terminal.
//! - [`redact`]: keeping credentials out of what Plumbline writes (URLs
//!   with user information or keys in their query, secret-looking command
//!   arguments, values expanded from `${VAR}`).
//! - [`error_chain`]: an error with its causes, redacted.

pub mod canonical;
pub mod digest;
pub mod file;
pub mod json;
pub mod pointer;
pub mod redact;
pub mod sanitize;

/// An error and its causes, `: `-joined ("error sending request" alone
/// hides "connection refused"), with every URL in it redacted: a
/// configured URL may carry a key.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    redact::redact_url_within(&message).into_owned()
}
