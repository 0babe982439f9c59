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

/// Makes this process non-dumpable before anything else runs, so that the
/// servers and hooks it starts, running as the same user, cannot read its
/// environment (every configured secret, `PLUMBLINE_TOKEN`) or memory
/// through `/proc/<pid>/environ`, `/proc/<pid>/mem` or ptrace: the kernel
/// allows those only to a dumpable process's owner. Children get their own
/// flag back at `exec`. A process with `CAP_SYS_PTRACE` (root) can still
/// read them; SECURITY.md says so.
fn not_dumpable() {
    #[cfg(target_os = "linux")]
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        let _ = writeln!(
            std::io::stderr(),
            "warning: could not make plumbline non-dumpable ({e}): servers running as this user can read its environment"
        );
    }
}

fn main() -> ExitCode {
    not_dumpable();
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
