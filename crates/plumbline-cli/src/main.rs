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
mod guard;
mod render;
mod report;
mod serve;
mod store;
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
        Command::Login(args) => commands::login(&args, true),
        Command::Logout(args) => commands::login(&args, false),
        Command::Log(args) => commands::log(&args),
        Command::Diff(args) => commands::diff(&args),
        Command::Show(args) => commands::show(&args),
        Command::Demo(args) => demo::run(args.format, args.taxonomy.taxonomy.unwrap_or_default()),
        Command::DemoServer => demo::serve(),
        Command::Completions(args) => completions(args.shell),
        Command::Man(args) => man(&args),
        Command::Pin(args) => gate::pin(&args),
        Command::Check(args) => gate::check(&args),
        Command::Guard(args) => guard::run(&args),
        Command::Watch(args) => watch::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Store(command) => store::run(&command),
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
/// The manual: the program's page (its options, commands, and the
/// sections below), or one command's.
fn man(args: &cli::ManArgs) -> anyhow::Result<exit::Outcome> {
    let program = <Cli as clap::CommandFactory>::command();
    let mut out = std::io::stdout().lock();
    match &args.command {
        None => {
            clap_mangen::Man::new(program.clone()).render(&mut out)?;
            out.write_all(MAN_EXIT_STATUS.as_bytes())?;
            let commands: Vec<String> = program
                .get_subcommands()
                .filter(|c| !c.is_hide_set())
                .map(|c| format!("plumbline-{}(1)", c.get_name()))
                .collect();
            out.write_all(MAN_SECTIONS.as_bytes())?;
            writeln!(
                out,
                ".SH \"SEE ALSO\"\n{}; each is printed by \\fBplumbline man COMMAND\\fR.",
                commands.join(", ")
            )?;
        }
        Some(name) => {
            let Some(command) = program
                .get_subcommands()
                .find(|c| c.get_name() == name && !c.is_hide_set())
            else {
                anyhow::bail!("there is no command {name:?}: `plumbline --help` lists them");
            };
            let page = command.clone().bin_name(format!("plumbline {name}"));
            clap_mangen::Man::new(page)
                .title(format!("plumbline-{name}"))
                .render(&mut out)?;
            out.write_all(MAN_EXIT_STATUS.as_bytes())?;
            writeln!(out, ".SH \"SEE ALSO\"\nplumbline(1)")?;
        }
    }
    out.flush()?;
    Ok(exit::Outcome::Clean)
}

/// The exit status every command shares.
const MAN_EXIT_STATUS: &str = r#".SH "EXIT STATUS"
.TP
\fB0\fR
Everything was read, and nothing reached \fB\-\-fail\-on\fR.
.TP
\fB1\fR
Something reached \fB\-\-fail\-on\fR (drift at or above it).
.TP
\fB2\fR
Something could not be read, reached or graded (a server, a file, a tool
that is unreadable or listed twice, an unpinned server for \fBcheck\fR), or
the command line was wrong. It wins over 1: an incomplete result never
looks like a complete one.
"#;

/// The program page's sections beyond what clap describes and
/// [`MAN_EXIT_STATUS`].
const MAN_SECTIONS: &str = r#".SH FILES
.TP
\fBplumbline.toml\fR
The servers, limits, watcher and alert channels (docs/configuration.md).
Its folder is the project.
.TP
\fBplumbline.lock\fR
The reviewed tools, written by \fBpin\fR and read by \fBcheck\fR.
.TP
\fB~/.local/share/plumbline/projects/FOLDER\-HASH/plumbline.db\fR
The project's store (under \fB$XDG_DATA_HOME\fR when set).
.SH ENVIRONMENT
.TP
\fBPLUMBLINE_CONFIG\fR
The registry, instead of ./plumbline.toml.
.TP
\fBPLUMBLINE_STORE\fR
One store shared on purpose, instead of the project's: a file path or sqlite:PATH.
.TP
\fBPLUMBLINE_TOKEN\fR
The dashboard's access token (\fBserve\fR).
.TP
\fBXDG_DATA_HOME\fR, \fBHOME\fR
Where stores are kept.
.TP
\fB${NAME}\fR in plumbline.toml
Read from the environment when a server is observed or an alert sent;
never stored, redacted from every error.
.SH EXAMPLES
.TP
\fBplumbline discover \-\-write plumbline.toml\fR
Import the servers your MCP clients use.
.TP
\fBplumbline observe\fR
Observe every server and show what changed since last time.
.TP
\fBplumbline pin\fR; \fBplumbline check\fR
Pin the reviewed tools; fail CI on drift at or above HIGH.
.TP
\fBplumbline check \-\-output sarif=plumbline.sarif \-\-output markdown=plumbline.md\fR
Every report from one run.
.TP
\fBplumbline watch\fR
Watch continuously and alert.
.TP
\fBplumbline serve\fR
Review changes in the dashboard at http://127.0.0.1:8077/.
"#;
