//! `plumbline store copy` and `plumbline store check`: a whole history
//! moved between backends, and verified.

use std::io::IsTerminal;
use std::path::Path;

use anyhow::{bail, Context as _, Result};
use plumbline_history::{History, Location};

use crate::cli::{StoreCheckArgs, StoreCommand, StoreCopyArgs, StorePathArgs};
use crate::commands::{open_existing_store, store_exists};
use crate::exit::Outcome;

pub fn run(command: &StoreCommand) -> Result<Outcome> {
    match command {
        StoreCommand::Copy(args) => copy(args),
        StoreCommand::Check(args) => check(args),
        StoreCommand::Path(args) => path(args),
    }
}

/// `store path`: where the project's history is, and what chose it.
fn path(args: &StorePathArgs) -> Result<Outcome> {
    let at = crate::commands::store_path(args.store.path.as_deref(), &args.config.path)?;
    let from = if args.store.path.is_some() {
        "--store"
    } else if std::env::var_os("PLUMBLINE_STORE").is_some() {
        "$PLUMBLINE_STORE"
    } else {
        "the project's default (the folder of plumbline.toml)"
    };
    let (backend, exists) = match at.sqlite_path() {
        Some(file) => ("sqlite", Some(file.exists())),
        // Asking would mean connecting; the location is what was asked.
        None => ("postgresql", None),
    };
    if args.format == crate::cli::Format::Json {
        crate::render::write_json(
            &mut std::io::stdout().lock(),
            &serde_json::json!({"location": at.display(), "backend": backend, "from": from, "exists": exists}),
            false,
        )?;
    } else {
        println!("{}", at.display());
        let state = match exists {
            Some(true) => "",
            Some(false) => "; it does not exist yet (the first observe or watch creates it)",
            None => "; the URL is shown without its user information or query",
        };
        eprintln!("({backend}, from {from}{state})");
    }
    Ok(Outcome::Clean)
}

/// A location given on the command line (a path that is not Unicode is a
/// path).
fn location(given: &Path) -> Result<Location> {
    Ok(match given.to_str() {
        Some(text) => Location::parse(text)?,
        None => Location::Sqlite(given.to_path_buf()),
    })
}

fn copy(args: &StoreCopyArgs) -> Result<Outcome> {
    let (from_at, to_at) = (location(&args.from)?, location(&args.to)?);
    if from_at == to_at {
        bail!("--from and --to name the same store, {}", from_at.display());
    }
    if !store_exists(&from_at) {
        bail!("there is no store at {}", from_at.display());
    }
    let from = History::open(&from_at)
        .with_context(|| format!("opening the store {}", from_at.display()))?;
    let mut to =
        History::open(&to_at).with_context(|| format!("opening the store {}", to_at.display()))?;
    // Refused before anything is written: rows of another history would
    // be mixed with these (ids and names that collide).
    let foreign = to.not_part_of(&from)?;
    if !foreign.is_empty() {
        for difference in &foreign {
            eprintln!(
                "{}",
                plumbline_taxonomy::sanitize::for_terminal(difference, false)
            );
        }
        eprintln!(
            "error: {} holds another history than {}; nothing was copied (copy into an empty store)",
            to_at.display(),
            from_at.display()
        );
        return Ok(Outcome::InputError);
    }
    let terminal = std::io::stderr().is_terminal();
    let copied = from
        .copy_to(&mut to, |table, rows| {
            if terminal {
                eprint!("\r\x1b[2Kcopying {table}: {rows} rows");
            }
        })
        .with_context(|| format!("copying {} to {}", from_at.display(), to_at.display()))?;
    if terminal {
        eprint!("\r\x1b[2K");
    }
    eprintln!("verifying: every table's rows and digest on both stores");
    let (ours, theirs) = (from.sums()?, to.sums()?);
    let mut differ = Vec::new();
    for ((a, b), c) in ours.iter().zip(&theirs).zip(&copied) {
        println!(
            "{:<24} {:>9} rows  {:>9} written  {}",
            a.table,
            a.rows,
            c.written,
            if a == b { "same" } else { "DIFFERENT" }
        );
        if a != b {
            differ.push(format!(
                "{}: {} rows here, {} there",
                a.table, a.rows, b.rows
            ));
        }
    }
    if !differ.is_empty() {
        eprintln!(
            "error: {} holds another history than {} ({}); copy into an empty store",
            to_at.display(),
            from_at.display(),
            differ.join("; ")
        );
        return Ok(Outcome::InputError);
    }
    println!(
        "copied {} to {}: both hold the same rows",
        from_at.display(),
        to_at.display()
    );
    Ok(Outcome::Clean)
}

fn check(args: &StoreCheckArgs) -> Result<Outcome> {
    let store = open_existing_store(args.store.path.as_deref(), &args.config.path)?;
    let findings = store.check()?;
    let sums = store.sums()?;
    let rows: u64 = sums.iter().map(|s| s.rows).sum();
    if findings.is_empty() {
        println!(
            "{}: sound ({rows} rows in {} tables)",
            store.path().display(),
            sums.len()
        );
        return Ok(Outcome::Clean);
    }
    for finding in &findings {
        println!(
            "{}",
            plumbline_taxonomy::sanitize::for_terminal(finding, false)
        );
    }
    eprintln!(
        "error: {} is not sound: {} findings",
        store.path().display(),
        findings.len()
    );
    Ok(Outcome::InputError)
}
