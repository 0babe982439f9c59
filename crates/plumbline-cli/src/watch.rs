//! `plumbline watch`: the watcher (`plumbline-watch`) with its log, and
//! `--once` with a summary like `observe`'s.

use anyhow::Result;
use plumbline_watch::Options;

use crate::cli::{LogFormat, WatchArgs};
use crate::commands::{runtime, store_path};
use crate::exit::Outcome;

pub fn run(args: &WatchArgs) -> Result<Outcome> {
    install_log(args.log_format);
    let options = Options {
        config: args.config.path.clone(),
        store: store_path(args.store.path.as_deref(), &args.config.path)?,
        taxonomy: args.taxonomy.taxonomy,
        listen: match args.listen.as_deref() {
            None => None,
            Some("none") => Some(String::new()),
            Some(addr) => Some(
                addr.parse::<std::net::SocketAddr>()
                    .map_err(|e| {
                        anyhow::anyhow!(
                            "--listen {addr:?}: {e} (an address such as 127.0.0.1:9465, or none)"
                        )
                    })?
                    .to_string(),
            ),
        },
    };
    if !args.once {
        let runtime = runtime()?;
        let ran = runtime.block_on(plumbline_watch::daemon(&options));
        // A batch still being graded when a signal came is not waited for
        // past this: its transaction commits whole or not at all.
        runtime.shutdown_timeout(std::time::Duration::from_secs(2));
        ran?;
        return Ok(Outcome::Clean);
    }
    let reports = runtime()?.block_on(plumbline_watch::once(&options))?;
    let taxonomy = crate::config::Config::load(&options.config)
        .map(|c| c.taxonomy(options.taxonomy))
        .unwrap_or_default();
    crate::commands::print_reports(&reports, taxonomy, args.format)?;
    Ok(Outcome::Clean)
}

/// Logs to standard error, as text (without ANSI colours unless a
/// terminal) or JSON lines.
fn install_log(format: LogFormat) {
    use std::io::IsTerminal as _;
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_max_level(tracing::Level::INFO);
    let _ = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}
