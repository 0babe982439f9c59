//! Observing many stdio servers at once: wall time against the slowest
//! single server and against observing them one by one, in the same run.
//!
//! `cargo build --release -p plumbline-mcp --example concurrency`, then
//! `target/release/examples/concurrency [SERVERS] [ROUNDS]` (defaults 20
//! and 3). Each server is a fresh `node …/server-everything/dist/index.js
//! stdio` from tests/servers (installed by scripts/test), listed with
//! [`plumbline_mcp::list_tools`] and the default [`Limits`].
//!
//! Each round, in this order: (1) sequential, every server one after
//! another, timing each; (2) concurrent, all at once on a multi-thread
//! runtime, timing the whole. A round reports the sequential total, the
//! concurrent total, the slowest single server (the largest sequential
//! time), concurrent / slowest single (1.0 would be perfect overlap) and
//! sequential / concurrent (the speed-up); then the median of each over
//! the rounds. Every listing must succeed with the same tool count.

use std::path::PathBuf;
use std::process::exit;
use std::sync::Arc;
use std::time::{Duration, Instant};

use plumbline_mcp::{list_tools, Limits, ServerSpec, StdioSpec};
use tokio::task::JoinSet;

const USAGE: &str = "usage: concurrency [SERVERS (default 20)] [ROUNDS (default 3)]";

fn everything() -> String {
    let servers = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/servers");
    let entry = servers.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !entry.exists() {
        eprintln!(
            "error: {} is missing: run scripts/test (or npm ci --prefix tests/servers) first",
            entry.display()
        );
        exit(2);
    }
    entry.to_string_lossy().into_owned()
}

fn count_arg(arg: Option<String>, default: usize, what: &str) -> usize {
    let Some(text) = arg else {
        return default;
    };
    match text.parse::<usize>() {
        Ok(n) if n > 0 => n,
        _ => {
            eprintln!("error: {what} must be a positive integer, not {text:?}\n{USAGE}");
            exit(2);
        }
    }
}

/// One listing's outcome: its tool count, or the error as text.
type Outcome = Result<usize, String>;

struct Round {
    sequential_each: Vec<Duration>,
    sequential_total: Duration,
    concurrent_total: Duration,
}

impl Round {
    fn slowest_single(&self) -> Duration {
        self.sequential_each
            .iter()
            .copied()
            .max()
            .unwrap_or_default()
    }

    fn concurrent_over_slowest(&self) -> f64 {
        self.concurrent_total.as_secs_f64() / self.slowest_single().as_secs_f64()
    }

    fn sequential_over_concurrent(&self) -> f64 {
        self.sequential_total.as_secs_f64() / self.concurrent_total.as_secs_f64()
    }
}

async fn list_one(spec: &ServerSpec, limits: &Limits) -> Outcome {
    list_tools(spec, limits)
        .await
        .map(|listing| listing.tools.len())
        .map_err(|e| e.to_string())
}

async fn sequential(
    specs: &[ServerSpec],
    limits: &Limits,
    outcomes: &mut Vec<Outcome>,
) -> (Vec<Duration>, Duration) {
    let mut each = Vec::with_capacity(specs.len());
    let start = Instant::now();
    for spec in specs {
        let one = Instant::now();
        outcomes.push(list_one(spec, limits).await);
        each.push(one.elapsed());
    }
    (each, start.elapsed())
}

async fn concurrent(
    specs: &[ServerSpec],
    limits: &Arc<Limits>,
    outcomes: &mut Vec<Outcome>,
) -> Duration {
    let start = Instant::now();
    let mut set = JoinSet::new();
    for spec in specs {
        let spec = spec.clone();
        let limits = Arc::clone(limits);
        set.spawn(async move { list_one(&spec, &limits).await });
    }
    while let Some(joined) = set.join_next().await {
        outcomes.push(joined.unwrap_or_else(|e| Err(format!("task failed: {e}"))));
    }
    start.elapsed()
}

/// Every listing succeeded with one tool count: that count, or a report of
/// what went wrong.
fn same_tool_count(outcomes: &[Outcome]) -> Result<usize, String> {
    let mut counts = Vec::with_capacity(outcomes.len());
    for (i, outcome) in outcomes.iter().enumerate() {
        match outcome {
            Ok(n) => counts.push(*n),
            Err(e) => return Err(format!("listing {i} failed: {e}")),
        }
    }
    let Some(&first) = counts.first() else {
        return Err("no listings".to_owned());
    };
    if counts.iter().any(|&n| n != first) {
        return Err(format!("tool counts differ: {counts:?}"));
    }
    Ok(first)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

fn print_row(label: &str, seq: f64, conc: f64, slowest: f64, c_over_s: f64, s_over_c: f64) {
    println!(
        "{label:<8} {seq:>14.3} {conc:>15.3} {slowest:>16.3} {c_over_s:>19.2} {s_over_c:>19.2}"
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    let servers = count_arg(args.next(), 20, "SERVERS");
    let rounds = count_arg(args.next(), 3, "ROUNDS");
    if args.next().is_some() {
        eprintln!("{USAGE}");
        exit(2);
    }
    let entry = everything();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());

    // The default runtime flavour of #[tokio::main(flavor = "multi_thread")]:
    // one worker per core.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| {
            eprintln!("error: cannot start the tokio runtime: {e}");
            exit(2);
        });

    let spec = ServerSpec::Stdio(StdioSpec {
        command: "node".into(),
        args: vec![entry.clone(), "stdio".into()],
        ..StdioSpec::default()
    });
    let specs = vec![spec; servers];
    let limits = Arc::new(Limits::default());

    println!("plumbline-mcp concurrency: observing {servers} stdio servers, {rounds} rounds");
    println!(
        "machine: {cores} cores (std::thread::available_parallelism); \
         tokio multi-thread runtime, {cores} workers"
    );
    println!("server:  node {entry} stdio (@modelcontextprotocol/server-everything)");
    println!(
        "limits:  Limits::default() (shutdown_grace {:?}, discover_timeout {:?})",
        limits.shutdown_grace, limits.discover_timeout
    );
    println!(
        "each round: sequential (one after another) first, then concurrent (all at once, JoinSet)"
    );
    println!();
    println!(
        "{:<8} {:>14} {:>15} {:>16} {:>19} {:>19}",
        "round",
        "sequential s",
        "concurrent s",
        "slowest single s",
        "concurrent/slowest",
        "sequential/concurr."
    );

    let mut results = Vec::with_capacity(rounds);
    let mut tool_count = None;
    for round in 1..=rounds {
        let mut outcomes = Vec::with_capacity(2 * servers);
        let (sequential_each, sequential_total, concurrent_total) = runtime.block_on(async {
            let (each, seq) = sequential(&specs, &limits, &mut outcomes).await;
            let conc = concurrent(&specs, &limits, &mut outcomes).await;
            (each, seq, conc)
        });
        let count = match same_tool_count(&outcomes) {
            Ok(n) if tool_count.is_none_or(|t| t == n) => n,
            Ok(n) => {
                eprintln!(
                    "error: round {round}: {n} tools, earlier rounds {}",
                    tool_count.unwrap_or_default()
                );
                exit(1);
            }
            Err(e) => {
                eprintln!("error: round {round}: {e}");
                exit(1);
            }
        };
        tool_count = Some(count);
        let r = Round {
            sequential_each,
            sequential_total,
            concurrent_total,
        };
        print_row(
            &round.to_string(),
            r.sequential_total.as_secs_f64(),
            r.concurrent_total.as_secs_f64(),
            r.slowest_single().as_secs_f64(),
            r.concurrent_over_slowest(),
            r.sequential_over_concurrent(),
        );
        results.push(r);
    }

    let med = |f: &dyn Fn(&Round) -> f64| median(results.iter().map(f).collect());
    print_row(
        "median",
        med(&|r| r.sequential_total.as_secs_f64()),
        med(&|r| r.concurrent_total.as_secs_f64()),
        med(&|r| r.slowest_single().as_secs_f64()),
        med(&|r| r.concurrent_over_slowest()),
        med(&|r| r.sequential_over_concurrent()),
    );
    println!("(each median is over the rounds' own values, ratios included)");
    println!();
    let fastest = results
        .iter()
        .flat_map(|r| r.sequential_each.iter().copied())
        .min()
        .unwrap_or_default();
    println!(
        "single server, sequential: fastest {:.3} s, slowest {:.3} s over all rounds",
        fastest.as_secs_f64(),
        results
            .iter()
            .map(Round::slowest_single)
            .max()
            .unwrap_or_default()
            .as_secs_f64()
    );
    println!(
        "all {} listings succeeded with {} tools each",
        2 * servers * rounds,
        tool_count.unwrap_or_default()
    );
}
