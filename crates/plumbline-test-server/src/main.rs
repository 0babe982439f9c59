//! `plumbline-test-server`: MCP servers for Plumbline's own tests.
//!
//! Two families live behind one binary:
//!
//! - **well-behaved** ([`well_behaved`]): built on `rmcp`, an MCP implementation
//!   independent of ours, speaking both protocol eras over stdio or Streamable
//!   HTTP. Its tools come from a phases file and are served byte-for-byte as
//!   written, and its tool list changes on demand.
//! - **hostile** ([`hostile`]): raw JSON-RPC written by hand, for the failures
//!   `rmcp` cannot produce (malformed JSON, endless cursors, 100 MB replies).
//!
//! Everything this binary logs goes to stderr: in stdio mode stdout is the
//! protocol. HTTP mode binds 127.0.0.1 only.

mod hostile;
mod liar;
mod net;
mod oauth;
mod phases;
mod splice;
mod well_behaved;

use std::{net::SocketAddr, num::NonZeroUsize, path::PathBuf, process::ExitCode};

use anyhow::Context as _;
use clap::{Parser, ValueEnum};

/// MCP test servers for Plumbline: well-behaved (rmcp) or hostile (scripted).
#[derive(Debug, Parser)]
#[command(name = "plumbline-test-server", version)]
struct Cli {
    /// Speak newline-delimited JSON-RPC on stdin/stdout.
    #[arg(long, conflicts_with = "http", required_unless_present = "http")]
    stdio: bool,

    /// Serve Streamable HTTP on 127.0.0.1:PORT at /mcp (PORT 0 picks a free
    /// port; the first stdout line is `listening on http://127.0.0.1:PORT/mcp`).
    #[arg(long, value_name = "127.0.0.1:PORT")]
    http: Option<String>,

    /// A JSON array of phases, each an array of raw tool objects served exactly
    /// as written. Without it, one phase of three built-in tools.
    #[arg(long, value_name = "FILE.json", conflicts_with = "hostile")]
    phases: Option<PathBuf>,

    /// Advance to the next phase after every N `tools/list` calls.
    #[arg(long, value_name = "N", conflicts_with = "hostile")]
    advance_after: Option<NonZeroUsize>,

    /// Split `tools/list` into pages of N tools linked by `nextCursor`.
    #[arg(long, value_name = "N", conflicts_with = "hostile")]
    page_size: Option<NonZeroUsize>,

    /// Offer only the protocol versions that use the `initialize` handshake
    /// (up to 2025-11-25): rmcp then answers a 2026-07-28 `server/discover`
    /// with -32022 (unsupported protocol version) listing those versions.
    /// (The hostile modes answer it with -32601, like a pre-2026 server.)
    #[arg(long, conflicts_with = "hostile")]
    legacy_only: bool,

    /// HTTP only: serve without sessions and answer `application/json`
    /// (2025 peers then get no `list_changed`, having no stream to receive it).
    #[arg(long, requires = "http", conflicts_with = "hostile")]
    stateless: bool,

    /// Session era only: before announcing a phase change to a peer, send it
    /// a `ping` and announce only once it answers (within 5 s), as a server
    /// that checks its peers are alive would. Over HTTP the ping travels on
    /// the GET stream.
    #[arg(long, conflicts_with = "hostile")]
    ping_before_list_changed: bool,

    /// Wait this long before reading or answering anything, as a server
    /// that is slow to start (an interpreter importing its modules, `npx`
    /// downloading) does. Over HTTP the port is not bound until then.
    #[arg(long, value_name = "MS")]
    start_delay_ms: Option<u64>,

    /// HTTP only: require an OAuth access token at /mcp, issued by an
    /// authorization server on the same port whose access tokens expire
    /// after SECS and whose refresh tokens rotate (src/oauth.rs).
    #[arg(
        long,
        value_name = "SECS",
        requires = "http",
        conflicts_with = "hostile"
    )]
    oauth_token_lifetime: Option<u64>,
    /// Misbehave in one scripted way instead of serving rmcp.
    #[arg(long, value_name = "KIND")]
    hostile: Option<hostile::Kind>,

    /// Hostile HTTP only: the content type of POST answers.
    #[arg(
        long,
        value_name = "TYPE",
        default_value = "json",
        requires = "hostile"
    )]
    reply_as: ReplyAs,
}

/// How the hostile HTTP mode frames its answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ReplyAs {
    /// `Content-Type: application/json`, the message is the body.
    Json,
    /// `Content-Type: text/event-stream`, the message is one `message` event.
    Sse,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let outcome = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")
        .and_then(|runtime| {
            let outcome = runtime.block_on(run(cli));
            // A blocking stdin read cannot be cancelled; do not wait for it.
            runtime.shutdown_background();
            outcome
        });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("plumbline-test-server: error: {error:#}");
            ExitCode::from(2)
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let mut terminated = net::Terminated::install()?;
    if let Some(ms) = cli.start_delay_ms {
        tracing::info!(ms, "delaying the start");
        tokio::select! {
            () = tokio::time::sleep(std::time::Duration::from_millis(ms)) => {}
            () = terminated.wait() => return Ok(()),
        }
    }
    let http = cli
        .http
        .as_deref()
        .map(net::parse_loopback_addr)
        .transpose()?;
    let transport = match http {
        Some(addr) => Transport::Http(addr),
        None => Transport::Stdio,
    };
    if let Some(kind) = cli.hostile {
        return hostile::run(kind, transport, cli.reply_as, terminated).await;
    }
    let phases = match &cli.phases {
        Some(path) => phases::Phases::load(path)?,
        None => phases::Phases::builtin(),
    };
    let options = well_behaved::Options {
        phases,
        advance_after: cli.advance_after,
        page_size: cli.page_size,
        legacy_only: cli.legacy_only,
        stateless: cli.stateless,
        ping_before_list_changed: cli.ping_before_list_changed,
        oauth_token_lifetime: cli.oauth_token_lifetime.map(std::time::Duration::from_secs),
    };
    well_behaved::run(options, transport, terminated).await
}

/// Where a server speaks.
#[derive(Debug, Clone, Copy)]
enum Transport {
    Stdio,
    /// Always a 127.0.0.1 address (see [`net::parse_loopback_addr`]).
    Http(SocketAddr),
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory as _;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn a_transport_is_required() {
        assert!(Cli::try_parse_from(["plumbline-test-server"]).is_err());
        assert!(Cli::try_parse_from(["plumbline-test-server", "--stdio"]).is_ok());
        assert!(
            Cli::try_parse_from(["plumbline-test-server", "--stdio", "--http", "127.0.0.1:0"])
                .is_err()
        );
    }
}
