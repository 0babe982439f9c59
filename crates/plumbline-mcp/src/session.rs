//! A connection kept open between listings, for a watcher: list, wait for
//! `notifications/tools/list_changed`, list again on the same connection.

use crate::error::ListError;
use crate::http::{HttpClient, HttpTransport};
use crate::legacy_sse::SseTransport;
use crate::limits::Limits;
use crate::listing::Listing;
use crate::protocol::{self, Handshake, Transport};
use crate::stdio::StdioTransport;
use crate::ServerSpec;

enum Connection {
    Stdio(StdioTransport),
    Http(HttpTransport),
    Sse(SseTransport),
}

/// Runs `$body` with `$t` bound to whichever transport `$conn` holds.
macro_rules! with_transport {
    ($conn:expr, $t:ident => $body:expr) => {
        match $conn {
            Connection::Stdio($t) => $body,
            Connection::Http($t) => $body,
            Connection::Sse($t) => $body,
        }
    };
}

/// An open connection to one server, past the handshake.
///
/// Nothing is cached: every [`Session::list`] walks `tools/list` afresh.
/// Dropping a session kills a stdio server's process group; [`Session::close`]
/// ends it politely first.
pub struct Session {
    connection: Connection,
    handshake: Handshake,
    limits: Limits,
}

impl Session {
    /// Connects and completes the handshake; a transport with a separate
    /// notification channel has it open when this returns, so a change
    /// announced from now on is heard.
    pub async fn open(server: &ServerSpec, limits: &Limits) -> Result<Session, ListError> {
        Session::start(server, limits, None).await
    }

    /// [`Session::open`] with a shared HTTP client: a watcher with many
    /// sessions open pays for one connection pool and TLS configuration,
    /// not one each.
    pub async fn open_with(
        server: &ServerSpec,
        limits: &Limits,
        http: &HttpClient,
    ) -> Result<Session, ListError> {
        Session::start(server, limits, Some(http)).await
    }

    async fn start(
        server: &ServerSpec,
        limits: &Limits,
        http: Option<&HttpClient>,
    ) -> Result<Session, ListError> {
        // Built only for a transport that needs it.
        let client = || match http {
            Some(h) => Ok(h.clone()),
            None => HttpClient::new(limits),
        };
        let mut connection = match server {
            ServerSpec::Stdio(spec) => Connection::Stdio(StdioTransport::spawn(spec, limits)?),
            ServerSpec::Http(spec) => {
                Connection::Http(HttpTransport::new(spec, limits, &client()?)?)
            }
            ServerSpec::Sse(spec) => {
                Connection::Sse(SseTransport::connect(spec, limits, client()?.client).await?)
            }
        };
        let handshake = with_transport!(&mut connection, t => protocol::connect(t, limits).await);
        match handshake {
            Ok(handshake) => Ok(Session {
                connection,
                handshake,
                limits: limits.clone(),
            }),
            Err(e) => Err(close(connection, e).await),
        }
    }

    /// Lists every tool now.
    pub async fn list(&mut self) -> Result<Listing, ListError> {
        let (hs, limits) = (&self.handshake, &self.limits);
        let mut listing =
            with_transport!(&mut self.connection, t => protocol::relist(t, hs, limits).await)?;
        // With what a server behind OAuth publishes about its
        // authorization now, as a one-off listing has it.
        if let Connection::Http(t) = &self.connection {
            t.add_published(limits, &mut listing).await;
        }
        Ok(listing)
    }

    /// Calls tool `name` with `arguments` and returns the result as sent,
    /// within the listing timeout. Plumbline observes and never calls a
    /// tool itself; this serves the MCP conformance suite's client
    /// scenarios, which check how a client takes up a call's answer stream
    /// that the server ended (`Last-Event-ID`, `retry`).
    pub async fn call_tool(
        &mut self,
        name: &str,
        arguments: serde_json::Value,
    ) -> Result<Box<serde_json::value::RawValue>, ListError> {
        let (hs, limits) = (&self.handshake, &self.limits);
        with_transport!(&mut self.connection, t => protocol::call_tool(t, hs, name, arguments, limits).await)
    }

    /// Whether waiting for a change makes sense: the server declared
    /// `tools.listChanged` and the connection can carry the notification
    /// between requests (a Streamable HTTP server may offer no stream).
    pub fn hears_list_changed(&self) -> bool {
        self.handshake.announces_list_changed()
            && with_transport!(&self.connection, t => t.hears_notifications())
    }

    /// Waits for the server to announce that its tool list changed; an
    /// error when the connection ends. Cancel-safe: drop it to stop
    /// waiting, and the session stays usable.
    pub async fn list_changed(&mut self) -> Result<(), ListError> {
        with_transport!(&mut self.connection, t => t.wait_list_changed().await)
    }

    /// Ends the session: a stdio server gets its stdin closed, then
    /// signals; an HTTP session is deleted. Returns the end of a stdio
    /// server's stderr.
    pub async fn close(self) -> Option<String> {
        shutdown(self.connection).await
    }

    /// Closes the session after `error`, which gains the server's stderr.
    pub async fn fail(self, error: ListError) -> ListError {
        close(self.connection, error).await
    }
}

async fn shutdown(connection: Connection) -> Option<String> {
    match connection {
        Connection::Stdio(t) => t.shutdown().await,
        Connection::Http(t) => {
            t.shutdown().await;
            None
        }
        // Dropping the stream ends a legacy session.
        Connection::Sse(_) => None,
    }
}

async fn close(connection: Connection, mut error: ListError) -> ListError {
    if let Some(tail) = shutdown(connection).await {
        error.stderr_tail = Some(tail);
    }
    error
}
