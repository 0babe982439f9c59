//! `plumbline serve`: the dashboard (`plumbline-dashboard`) over the store,
//! until SIGTERM or Ctrl-C.

use anyhow::{Context as _, Result};
use plumbline_dashboard::{check_listen, router, AppState, Options};

use crate::cli::ServeArgs;
use crate::commands::runtime;
use crate::exit::Outcome;

pub fn run(args: &ServeArgs) -> Result<Outcome> {
    let token = match args.token.as_deref().map(str::trim) {
        None => None,
        Some(t) if t.chars().count() < MIN_TOKEN_CHARS => anyhow::bail!(
            "--token (or PLUMBLINE_TOKEN) must be at least {MIN_TOKEN_CHARS} characters \
             (not counting surrounding spaces): anyone who guesses it can review and accept changes"
        ),
        Some(t) => Some(t.to_owned()),
    };
    // Refuse before touching the store or the network.
    check_listen(args.listen, token.as_deref())?;
    let mut store = crate::commands::open_existing_store(
        args.store.path.as_deref(),
        &crate::config::Config::default_registry(),
    )?;
    let reviewer = args
        .reviewer
        .clone()
        .or_else(|| std::env::var("USER").ok())
        .filter(|r| !r.trim().is_empty())
        .unwrap_or_else(|| "reviewer".to_owned());
    let taxonomy = crate::config::Config::taxonomy_for(args.taxonomy.taxonomy)?;
    // Grade, once, what an older Plumbline recorded without summaries (or
    // under another taxonomy), so that no page has to.
    let grader = plumbline_history::Grader::new(taxonomy);
    let written = plumbline_history::read::backfill(store.store_mut(), &grader)
        .context("grading what the history had not graded yet")?;
    if written > 0 {
        eprintln!("plumbline serve: graded {written} earlier change(s) under {taxonomy}");
    }
    let state = AppState::new(
        store,
        Options {
            token,
            reviewer,
            taxonomy,
        },
    )
    .context("setting up the dashboard")?;
    runtime()?.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("listening on {}", args.listen))?;
        let addr = listener.local_addr()?;
        eprintln!("plumbline serve: the dashboard is at http://{addr}/");
        axum::serve(listener, router(state))
            .with_graceful_shutdown(stopped())
            .await
            .context("serving the dashboard")
    })?;
    Ok(Outcome::Clean)
}

/// The shortest token `serve` accepts.
const MIN_TOKEN_CHARS: usize = 16;

/// Resolves on SIGTERM or Ctrl-C.
async fn stopped() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
