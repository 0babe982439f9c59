//! Lists a stdio MCP server's tools and prints what was kept:
//! `cargo run -p plumbline-mcp --example list -- COMMAND [ARGS...]`, or
//! `-- http://127.0.0.1:PORT/mcp` for Streamable HTTP.

use std::io::Write;

use plumbline_mcp::{list_tools, HttpSpec, Limits, ServerSpec, StdioSpec};

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let Some(command) = args.next() else {
        eprintln!("usage: list COMMAND [ARGS...]");
        std::process::exit(2);
    };
    let spec = if command == "--sse" {
        ServerSpec::Sse(HttpSpec {
            url: args.next().unwrap_or_default(),
            headers: Vec::new(),
            auth: None,
        })
    } else if command.starts_with("http://") || command.starts_with("https://") {
        ServerSpec::Http(HttpSpec {
            url: command,
            headers: Vec::new(),
            auth: None,
        })
    } else {
        ServerSpec::Stdio(StdioSpec {
            command,
            args: args.collect(),
            ..StdioSpec::default()
        })
    };
    match list_tools(&spec, &Limits::default()).await {
        Ok(listing) => {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(
                out,
                "{:?} {} pages={} relisted={} tools={} problems={:?}",
                listing.era,
                listing.protocol_version,
                listing.pages,
                listing.relisted,
                listing.tools.len(),
                listing.problems
            );
            for t in &listing.tools {
                let _ = writeln!(out, "  {:?} ({} bytes)", t.name, t.raw.len());
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
