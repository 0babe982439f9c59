//! The MCP authorization flow, client side (2025-11-25 and 2026-07-28):
//! when a remote server refuses a request (401, or 403
//! `insufficient_scope`), discover its protected resource metadata and
//! authorization server, register as a client, obtain a token, and retry.
//!
//! Discovery and registration are written here; the grants (authorization
//! code with PKCE S256, refresh, client credentials) go through the
//! `oauth2` crate. Every request of the flow uses a client that never
//! follows a redirect, reads at most [`http::MAX_BODY`] bytes and gives up
//! after a deadline. No token, code or secret is ever in an error.
//!
//! How a person takes part is [`UserAgent`]: `Browser` (`plumbline
//! login`: the system's browser and a loopback redirect), `FollowRedirect`
//! (tests: an authorization server that redirects at once, like the
//! conformance suite's) and `None` (a person must log in:
//! [`AuthError::LoginRequired`]).
//!
//! What a server publishes about its authorization is also part of what
//! it tells a client: [`Authorizer::published`] reads it for the history.

mod browser;
mod challenge;
mod error;
mod flow;
mod http;
mod jwt;
mod metadata;
pub mod tokens;

pub use challenge::challenges_of;
pub use error::AuthError;
pub use flow::{Authorizer, Grant, Settings, UserAgent};
pub use jwt::AssertionKey;
