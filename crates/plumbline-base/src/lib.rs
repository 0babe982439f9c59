//! What every Plumbline crate needs and none of them owns. Pure functions
//! over text: no I/O, no dependencies.
//!
//! - [`redact`]: keeping credentials out of what Plumbline writes (URLs
//!   with user information or keys in their query, secret-looking command
//!   arguments, values expanded from `${VAR}`).
//! - [`error_chain`]: an error with its causes, redacted.

pub mod redact;

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
