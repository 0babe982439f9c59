//! Loopback-only listening and process signals shared by both server families.

use std::{
    io::Write as _,
    net::{Ipv4Addr, SocketAddr},
};

use anyhow::{bail, Context as _};
use tokio::{
    net::TcpListener,
    signal::unix::{signal, Signal, SignalKind},
};

/// Parses `127.0.0.1:PORT`, refusing every other host: a test server must
/// never be reachable from outside the machine.
pub fn parse_loopback_addr(text: &str) -> anyhow::Result<SocketAddr> {
    let addr: SocketAddr = text
        .parse()
        .with_context(|| format!("--http {text:?}: expected 127.0.0.1:PORT"))?;
    if addr.ip() != Ipv4Addr::LOCALHOST {
        bail!(
            "--http {text:?}: refusing to bind {}; only 127.0.0.1 is allowed",
            addr.ip()
        );
    }
    Ok(addr)
}

/// Binds `addr` and announces the MCP endpoint as the first stdout line, which
/// is how a test learns the port when it asked for port 0.
pub async fn bind_and_announce(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    let local = listener.local_addr().context("reading the bound address")?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on http://{local}/mcp").context("writing to stdout")?;
    stdout.flush().context("flushing stdout")?;
    tracing::info!(%local, "listening");
    Ok(listener)
}

/// SIGTERM and SIGINT, caught from the moment [`Terminated::install`] runs
/// (before anything is announced, so a test that signals right after the
/// listening line never kills the process with the default action).
pub struct Terminated {
    term: Signal,
    int: Signal,
}

impl Terminated {
    pub fn install() -> anyhow::Result<Self> {
        Ok(Self {
            term: signal(SignalKind::terminate()).context("installing the SIGTERM handler")?,
            int: signal(SignalKind::interrupt()).context("installing the SIGINT handler")?,
        })
    }

    /// Resolves on the next SIGTERM or SIGINT.
    pub async fn wait(&mut self) {
        tokio::select! {
            _ = self.term.recv() => tracing::info!("SIGTERM: shutting down"),
            _ = self.int.recv() => tracing::info!("SIGINT: shutting down"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ipv4_loopback_is_accepted() {
        assert!(parse_loopback_addr("127.0.0.1:0").is_ok());
        assert!(parse_loopback_addr("127.0.0.1:8080").is_ok());
        for refused in [
            "0.0.0.0:0",
            "[::]:0",
            "[::1]:0",
            "192.168.1.2:80",
            "localhost:80",
        ] {
            assert!(parse_loopback_addr(refused).is_err(), "{refused}");
        }
    }
}
