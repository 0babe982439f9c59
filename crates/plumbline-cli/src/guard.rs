//! `plumbline guard`: the runtime guard over stdio (plumbline-guard does
//! the work; this picks the server, the baseline and the policy).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use plumbline_guard::{Baseline, LockBaseline, Mode, NewTools, OnError, Policy};
use plumbline_lock::LockedServer;
use plumbline_mcp::{ServerSpec, StdioSpec};
use plumbline_taxonomy::sanitize::for_terminal;
use plumbline_taxonomy::{Classifier, Taxonomy};

use crate::cli::{GuardArgs, GuardMode, NewToolsArg, OnErrorArg};
use crate::config::Config;
use crate::exit::Outcome;

/// The store's accepted baseline of one server, read again at every poll.
struct StoreBaseline {
    store: Option<PathBuf>,
    registry: PathBuf,
    server: String,
}

impl Baseline for StoreBaseline {
    fn load(&mut self) -> Result<Option<LockedServer>> {
        let store = crate::commands::open_existing_store(self.store.as_deref(), &self.registry)?;
        let mut lock = crate::gate::lock_from_store(
            &store,
            std::slice::from_ref(&self.server),
            Taxonomy::default(),
        )?;
        Ok(lock.servers.remove(&self.server))
    }

    fn how_to_review(&self, tool: &str) -> String {
        format!(
            "review and accept the change of {}/{tool} on the dashboard (`plumbline serve`)",
            self.server
        )
    }
}

pub fn run(args: &GuardArgs) -> Result<Outcome> {
    let (server, spec) = server_and_spec(args)?;
    let lock = args.lock.clone().or_else(|| {
        let default = PathBuf::from("plumbline.lock");
        default.exists().then_some(default)
    });
    let (baseline, lock_taxonomy): (Box<dyn Baseline>, Option<Taxonomy>) = match lock {
        Some(path) => {
            // A lock that cannot be read at start is a mistake to say now,
            // not a policy decision.
            let taxonomy = plumbline_lock::LockFile::load(&path)?.taxonomy();
            (
                Box::new(LockBaseline::new(path, server.clone())),
                Some(taxonomy),
            )
        }
        None => (
            Box::new(StoreBaseline {
                store: args.store.path.clone(),
                registry: args.config.path.clone(),
                server: server.clone(),
            }),
            None,
        ),
    };
    let configured = if args.config.path.exists() {
        Config::taxonomy_in(&args.config.path)?
    } else {
        None
    };
    let taxonomy = args
        .taxonomy
        .taxonomy
        .or(lock_taxonomy)
        .or(configured)
        .unwrap_or_default();
    if !args.max_age.is_finite() || args.max_age < 0.0 {
        bail!("--max-age: a number of seconds, 0 or more");
    }
    let policy = Policy {
        block_on: args.block_on,
        new_tools: match args.new_tools {
            NewToolsArg::Allow => NewTools::Allow,
            NewToolsArg::Review => NewTools::Review,
            NewToolsArg::Block => NewTools::Block,
        },
        mode: match args.mode {
            GuardMode::Enforce => Mode::Enforce,
            GuardMode::Warn => Mode::Warn,
        },
        on_error: match args.on_error {
            OnErrorArg::Block => OnError::Block,
            OnErrorArg::Pass => OnError::Pass,
        },
        max_age: Duration::from_secs_f64(args.max_age),
    };
    let limits = if args.config.path.exists() {
        Config::load(&args.config.path)?.limits.limits()?
    } else {
        Default::default()
    };
    let options = plumbline_guard::stdio::Options {
        server: server.clone(),
        spec,
        policy,
        classifier: Classifier::for_taxonomy(taxonomy),
        limits,
        poll: Duration::from_secs(1),
    };
    let runtime = crate::commands::runtime()?;
    let result = runtime.block_on(plumbline_guard::stdio::run(
        options,
        baseline,
        tokio::io::stdin(),
        tokio::io::stdout(),
    ));
    // stdin may still be read by a blocking thread: do not wait for it.
    runtime.shutdown_background();
    match result {
        Ok(c) => {
            eprintln!(
                "plumbline guard: {}: session ended; {} judged, {} withheld, {} refused",
                for_terminal(&server, false),
                crate::gate::plural(c.listings as usize, "listing"),
                crate::gate::plural(c.withheld as usize, "tool"),
                crate::gate::plural(c.refused_calls as usize, "call"),
            );
            Ok(Outcome::Clean)
        }
        Err(e) => {
            eprintln!(
                "plumbline guard: {}: {}",
                for_terminal(&server, false),
                for_terminal(&format!("{e:#}"), false)
            );
            Ok(Outcome::InputError)
        }
    }
}

/// The server to start: COMMAND with the environment the client gave us,
/// or the configured stdio server named by --server.
fn server_and_spec(args: &GuardArgs) -> Result<(String, StdioSpec)> {
    if let Some((command, rest)) = args.command.split_first() {
        let server = match &args.server {
            Some(s) => s.clone(),
            None => Path::new(command)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| command.clone()),
        };
        // The client started us with the environment it means the server
        // to have: all of it goes on.
        let inherit_env = std::env::vars_os()
            .filter_map(|(k, _)| k.into_string().ok())
            .collect();
        return Ok((
            server,
            StdioSpec {
                command: command.clone(),
                args: rest.to_vec(),
                env: Vec::new(),
                inherit_env,
                cwd: None,
            },
        ));
    }
    let Some(server) = &args.server else {
        bail!("name a server (--server NAME) or give its command after --");
    };
    let config = Config::load(&args.config.path)?;
    let Some(c) = config.servers.get(server) else {
        bail!("{:?} is not in {}", server, args.config.path.display());
    };
    match c.spec().with_context(|| format!("server {server:?}"))? {
        ServerSpec::Stdio(spec) => Ok((server.clone(), spec)),
        _ => bail!(
            "{server:?} is a remote server: this guard relays stdio (the HTTP form, --listen, is not built yet)"
        ),
    }
}
