//! The `plumbline` command. `main` owns the exit codes; everything else
//! returns values and errors.

mod classify;
mod cli;
mod commands;
mod demo;
mod discover;
mod evaluate;
mod exit;
mod gate;
mod lock;
mod render;
mod report;
mod serve;
mod tools_input;
mod watch;

use plumbline_config as config;
use plumbline_watch::observe;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Classify(args) => classify::run(&args),
        Command::Rules(args) => render::rules(&args).map(|()| exit::Outcome::Clean),
        Command::Explain(args) => render::explain(&args).map(|()| exit::Outcome::Clean),
        Command::Observe(args) => commands::observe(&args),
        Command::Log(args) => commands::log(&args),
        Command::Diff(args) => commands::diff(&args),
        Command::Show(args) => commands::show(&args),
        Command::Demo(args) => demo::run(args.format, args.taxonomy.taxonomy.unwrap_or_default()),
        Command::DemoServer => demo::serve(),
        Command::Completions(args) => completions(args.shell),
        Command::Man => man(),
        Command::Pin(args) => gate::pin(&args),
        Command::Check(args) => gate::check(&args),
        Command::Watch(args) => watch::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Discover(args) => commands::discover(&args),
        Command::Evaluate(args) => evaluate::run(&args),
    };
    match result {
        Ok(outcome) => ExitCode::from(exit::code(outcome)),
        Err(err) => {
            // A closed pipe (`plumbline … | head`) is not an error to report.
            if is_broken_pipe(&err) {
                return ExitCode::from(exit::code(exit::Outcome::Clean));
            }
            let _ = writeln!(std::io::stderr(), "error: {err:#}");
            ExitCode::from(exit::code(exit::Outcome::InputError))
        }
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// `plumbline completions SHELL`: generated from the same clap definitions
/// that parse the arguments, so it never falls behind them.
fn completions(shell: clap_complete::Shell) -> anyhow::Result<exit::Outcome> {
    let mut command = <Cli as clap::CommandFactory>::command();
    let mut out = std::io::stdout().lock();
    clap_complete::generate(shell, &mut command, "plumbline", &mut out);
    out.flush()?;
    Ok(exit::Outcome::Clean)
}

/// `plumbline man`: the manual page, from the clap definitions.
fn man() -> anyhow::Result<exit::Outcome> {
    let command = <Cli as clap::CommandFactory>::command();
    let mut out = std::io::stdout().lock();
    clap_mangen::Man::new(command).render(&mut out)?;
    out.flush()?;
    Ok(exit::Outcome::Clean)
}
