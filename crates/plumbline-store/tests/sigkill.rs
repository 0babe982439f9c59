//! A writer killed with SIGKILL in the middle of recording observations
//! loses no committed observation, leaves a file that passes
//! `PRAGMA integrity_check`, and the next run carries on.
//!
//! The test binary runs itself again as the writer process: the parent
//! ([`sigkill_mid_write_loses_no_committed_observation`]) starts
//! `current_exe() --ignored --exact writer_half_of_the_sigkill_test
//! --nocapture --test-threads=1` with [`WRITER_ENV`] naming the database
//! file (the writer half is ignored in an ordinary run, so it is never
//! counted as a test that passed without doing anything). The
//! writer records observations of a realistic 50-tool server in a loop and
//! prints `committed <id> ...` after each `record_observation` returns. The
//! parent reads those lines, sends SIGKILL after enough of them, reaps the
//! writer, and checks the file. Five rounds kill the writer after different
//! numbers of commits and at different moments of the next observation
//! (see [`ROUNDS`]), each continuing from the previous round's file, so the
//! kill lands at different points of the write path: before the
//! transaction, inside it, at its commit, between commit and report.
//!
//! Nothing here measures time: the deadlines only turn a hung writer into
//! a clear failure instead of a hung test.

#![cfg(unix)]

mod support;

use plumbline_store::prelude::*;
use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use plumbline_store::{digest, Digest, ObservationId, SqliteStore};
use support::{failed_observation, fifty_tools, ok_observation};

/// Set to the database path, this makes [`writer_half_of_the_sigkill_test`]
/// act as the writer process; unset, it does nothing.
const WRITER_ENV: &str = "PLUMBLINE_SIGKILL_WRITER";
/// The round number (0, 1, ...), so each round writes new tool versions.
const ROUND_ENV: &str = "PLUMBLINE_SIGKILL_ROUND";
/// The writer half's test name, as `--exact` selects it.
const WRITER_TEST: &str = "writer_half_of_the_sigkill_test";

const SERVER: &str = "docs";
const IDENTITY: &str = r#"{"transport":"stdio","command":"uvx","args":["example-docs-server"]}"#;
const START_MS: i64 = 1_767_225_600_000;
/// The writer stops by itself after this many observations, should the
/// parent never kill it.
const WRITER_MAX_OBSERVATIONS: i64 = 100_000;

/// One entry per round: the commits the parent waits for before the
/// SIGKILL, and how far into the next observation to send it, as a fraction
/// of the round's average time per commit (0 = as soon as the line is read,
/// early in the next observation; larger fractions further into it, up to
/// its commit). Different counts put the kill at different points of the
/// WAL's life (every round fills the WAL past SQLite's 1,000-page
/// auto-checkpoint).
const ROUNDS: [(usize, f64); 5] = [(150, 0.0), (260, 0.3), (190, 0.6), (320, 0.8), (170, 0.95)];
/// Bounds every wait on the writer; a hang fails instead of blocking.
const WRITER_DEADLINE: Duration = Duration::from_secs(60);

/// **The writer half of [`sigkill_mid_write_loses_no_committed_observation`],
/// not a test on its own**: ignored in an ordinary run (it would test
/// nothing), and failing when run alone without [`WRITER_ENV`].
///
/// With it, it opens the store at that path and records observations of a
/// 50-tool server until it is killed: each successful observation lists the
/// first 47 to 50 tools with one tool's description revised (a new tool
/// version and a new tool set every time); every seventh is a failure.
/// After each `record_observation` returns it prints
/// `committed <id> outcome=<ok|failed> tools=<count> varied=<raw digest|->`
/// and flushes stdout.
#[test]
#[ignore = "the writer half of sigkill_mid_write_loses_no_committed_observation, which runs it"]
fn writer_half_of_the_sigkill_test() {
    let Some(path) = std::env::var_os(WRITER_ENV) else {
        panic!("{WRITER_TEST} is run by sigkill_mid_write_loses_no_committed_observation, with {WRITER_ENV} set");
    };
    let round: i64 = std::env::var(ROUND_ENV)
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0);
    let mut store = SqliteStore::open(&path).expect("writer: store opens");
    store
        .put_server(SERVER, IDENTITY)
        .expect("writer: server registered");
    let base = fifty_tools();
    assert_eq!(base.len(), 50, "writer: tools-50.jsonl has 50 tools");

    let mut out = std::io::stdout().lock();
    // libtest may have printed "test <name> ... " without a newline.
    writeln!(out).expect("writer: stdout");
    for i in 0..WRITER_MAX_OBSERVATIONS {
        let at = START_MS + (round * WRITER_MAX_OBSERVATIONS + i) * 60_000;
        let (observation, varied) = if i % 7 == 3 {
            let error = format!("connection refused (attempt {i})");
            (failed_observation(SERVER, at, &error), None)
        } else {
            let count = 50 - (i % 4) as usize;
            let mut tools = base[..count].to_vec();
            let position = (i as usize * 7) % count;
            tools[position].raw = revise_description(&tools[position].raw, round, i);
            let varied = digest(&tools[position].raw);
            (ok_observation(SERVER, at, tools), Some(varied))
        };
        let id = store
            .record_observation(&observation)
            .expect("writer: observation recorded");
        writeln!(
            out,
            "committed {id} outcome={} tools={} varied={}",
            observation.outcome.as_str(),
            observation.tools.len(),
            varied.map_or_else(|| "-".to_owned(), |d| d.to_hex()),
        )
        .and_then(|()| out.flush())
        .expect("writer: stdout (the parent has gone?)");
    }
}

/// The tool's bytes with "Revision <round>.<i>. " put at the start of its
/// top-level description (the first `"description":"` of every tool in
/// tools-50.jsonl is the top-level one).
fn revise_description(raw: &[u8], round: i64, i: i64) -> Vec<u8> {
    const KEY: &[u8] = br#""description":""#;
    let at = raw
        .windows(KEY.len())
        .position(|w| w == KEY)
        .expect("every tool in tools-50.jsonl has a description")
        + KEY.len();
    let mut revised = raw[..at].to_vec();
    revised.extend_from_slice(format!("Revision {round}.{i}. ").as_bytes());
    revised.extend_from_slice(&raw[at..]);
    revised
}

/// What the writer said it committed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Committed {
    ok: bool,
    tools: u32,
    /// The raw digest of the revised tool; `None` for a failure.
    varied: Option<Digest>,
}

/// Parses `committed <id> outcome=<..> tools=<n> varied=<hex|->`; `None`
/// for any other line (libtest's own output).
fn parse_committed(line: &str) -> Option<(ObservationId, Committed)> {
    let rest = line.strip_prefix("committed ")?;
    let parsed = (|| {
        let mut fields = rest.split(' ');
        let id = fields.next()?.parse().ok()?;
        let mut field = |key: &str| fields.next()?.strip_prefix(key);
        let ok = match field("outcome=")? {
            "ok" => true,
            "failed" => false,
            _ => return None,
        };
        let tools = field("tools=")?.parse().ok()?;
        let varied = match field("varied=")? {
            "-" => None,
            hex => Some(hex.parse().ok()?),
        };
        fields
            .next()
            .is_none()
            .then_some((id, Committed { ok, tools, varied }))
    })();
    Some(parsed.unwrap_or_else(|| panic!("malformed line from the writer: {line:?}")))
}

/// The writer process. Dropping it kills and reaps the process, so no test
/// failure leaves a writer behind.
struct Writer {
    child: Child,
    lines: Receiver<String>,
    stdout_reader: Option<JoinHandle<()>>,
    stderr_reader: Option<JoinHandle<String>>,
}

impl Writer {
    fn spawn(path: &Path, round: usize) -> Writer {
        let exe = std::env::current_exe().expect("path of this test binary");
        let mut child = Command::new(exe)
            .args([
                "--ignored",
                "--exact",
                WRITER_TEST,
                "--nocapture",
                "--test-threads=1",
            ])
            .env(WRITER_ENV, path)
            .env(ROUND_ENV, round.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("writer process starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut stderr = child.stderr.take().expect("piped stderr");
        let (tx, lines) = mpsc::channel();
        let stdout_reader = std::thread::spawn(move || {
            let mut stdout = BufReader::new(stdout);
            let mut line = String::new();
            loop {
                line.clear();
                match stdout.read_line(&mut line) {
                    // A line cut short by the kill was never fully reported.
                    Ok(0) | Err(_) => return,
                    Ok(_) if !line.ends_with('\n') => return,
                    Ok(_) => {
                        if tx.send(line.trim_end().to_owned()).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        let stderr_reader = std::thread::spawn(move || {
            let mut text = Vec::new();
            let _ = stderr.read_to_end(&mut text);
            let tail = text.len().saturating_sub(4096);
            String::from_utf8_lossy(&text[tail..]).into_owned()
        });
        Writer {
            child,
            lines,
            stdout_reader: Some(stdout_reader),
            stderr_reader: Some(stderr_reader),
        }
    }

    /// The next complete stdout line; `Err(Disconnected)` once stdout is
    /// closed.
    fn next_line(&self, deadline: Instant) -> Result<String, RecvTimeoutError> {
        self.lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
    }

    fn sigkill(&self) {
        let pid = Pid::from_raw(i32::try_from(self.child.id()).expect("pid fits in i32"));
        kill(pid, Signal::SIGKILL).expect("SIGKILL sent to the writer");
    }

    /// Kills the writer if it still runs, reaps it, and returns its exit
    /// status with the end of its stderr.
    fn stop(&mut self) -> (ExitStatus, String) {
        let _ = self.child.kill();
        let status = self.child.wait().expect("writer reaped");
        // The pipes close with the process (the writer starts no children).
        if let Some(reader) = self.stdout_reader.take() {
            let _ = reader.join();
        }
        let stderr = self
            .stderr_reader
            .take()
            .map(|r| r.join().unwrap_or_default())
            .unwrap_or_default();
        (status, stderr)
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs one writer until it has reported `kill_after` commits, kills it
/// with SIGKILL, and returns every commit it reported, including those
/// printed between the decision to kill and its death.
fn run_and_kill(
    path: &Path,
    round: usize,
    kill_after: usize,
    phase: f64,
) -> BTreeMap<ObservationId, Committed> {
    let mut writer = Writer::spawn(path, round);
    let deadline = Instant::now() + WRITER_DEADLINE;
    let mut first_commit_at = None;
    let mut committed = BTreeMap::new();
    let mut last = None;
    let mut record = |line: &str, committed: &mut BTreeMap<_, _>| {
        if let Some((id, c)) = parse_committed(line) {
            assert!(
                last < Some(id),
                "round {round}: ids not increasing: {id} after {last:?}"
            );
            last = Some(id);
            committed.insert(id, c);
        }
    };
    while committed.len() < kill_after {
        match writer.next_line(deadline) {
            Ok(line) => {
                record(&line, &mut committed);
                if committed.len() == 1 && first_commit_at.is_none() {
                    first_commit_at = Some(Instant::now());
                }
            }
            Err(why) => {
                let (status, stderr) = writer.stop();
                panic!(
                    "round {round}: the writer reported {} of {kill_after} commits, then {} \
                     ({status}); its stderr ends:\n{stderr}",
                    committed.len(),
                    match why {
                        RecvTimeoutError::Timeout => "went silent past the deadline",
                        RecvTimeoutError::Disconnected => "closed its stdout",
                    },
                );
            }
        }
    }
    // Not a measurement: only where in the next observation the kill lands.
    let per_commit = first_commit_at
        .map(|t| t.elapsed() / (kill_after.max(2) - 1) as u32)
        .unwrap_or_default();
    std::thread::sleep(per_commit.mul_f64(phase));
    writer.sigkill();
    let (status, stderr) = writer.stop();
    assert_eq!(
        status.signal(),
        Some(Signal::SIGKILL as i32),
        "round {round}: the writer should die of SIGKILL, got {status}; stderr:\n{stderr}"
    );
    // Lines already in the pipe when the kill landed were committed too.
    loop {
        match writer.next_line(deadline) {
            Ok(line) => record(&line, &mut committed),
            Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => panic!("round {round}: stdout never closed"),
        }
    }
    committed
}

/// Opens the store after a kill and checks it: the file is sound, every
/// observation reported as committed is there with its tools, and the
/// newest observations (including one committed but never reported) are
/// whole.
fn check_after_kill(
    path: &Path,
    round: usize,
    expected: &BTreeMap<ObservationId, Committed>,
) -> SqliteStore {
    let store = SqliteStore::open(path)
        .unwrap_or_else(|e| panic!("round {round}: the store does not open after SIGKILL: {e}"));
    store
        .integrity_check()
        .unwrap_or_else(|e| panic!("round {round}: integrity check after SIGKILL: {e}"));
    assert_eq!(
        store.schema_version().expect("schema version"),
        SqliteStore::SCHEMA_VERSION
    );

    let mut resolved = HashSet::new();
    let check_whole = |id: ObservationId, resolved: &mut HashSet<Digest>| {
        let observation = store
            .observation(id)
            .expect("observation readable")
            .unwrap_or_else(|| {
                panic!("round {round}: observation {id} was committed but is missing")
            });
        let summary = &observation.summary;
        assert_eq!(
            observation.tools.len(),
            summary.tool_count as usize,
            "round {round}: observation {id} is missing tools"
        );
        assert_eq!(
            summary.tool_set.is_some(),
            summary.outcome.is_ok(),
            "round {round}: observation {id}: a tool set exactly when ok"
        );
        for tool in &observation.tools {
            if resolved.insert(tool.raw_digest) {
                let raw = store.raw_tool(&tool.raw_digest).expect("raw readable");
                let raw = raw.unwrap_or_else(|| {
                    panic!("round {round}: observation {id}: raw bytes of a tool are missing")
                });
                assert_eq!(digest(&raw), tool.raw_digest, "round {round}: raw bytes");
            }
            let canonical = tool.canonical_digest.unwrap_or_else(|| {
                panic!("round {round}: observation {id}: a valid tool lost its canonical form")
            });
            if resolved.insert(canonical) {
                let bytes = store.tool_version(&canonical).expect("version readable");
                let bytes = bytes.unwrap_or_else(|| {
                    panic!("round {round}: observation {id}: a tool version is missing")
                });
                assert_eq!(digest(&bytes), canonical, "round {round}: canonical bytes");
            }
        }
        observation
    };

    for (&id, want) in expected {
        let observation = check_whole(id, &mut resolved);
        let summary = &observation.summary;
        assert_eq!(summary.server, SERVER);
        assert_eq!(
            summary.outcome.is_ok(),
            want.ok,
            "round {round}: observation {id}'s outcome"
        );
        assert_eq!(
            summary.tool_count, want.tools,
            "round {round}: observation {id}'s tool count"
        );
        if let Some(varied) = want.varied {
            assert!(
                observation.tools.iter().any(|t| t.raw_digest == varied),
                "round {round}: observation {id} lacks its revised tool"
            );
        }
    }
    // The transaction in flight at the kill either committed whole or not
    // at all: whatever is newest is complete.
    let newest = store.timeline(SERVER, 3).expect("timeline");
    assert!(!newest.is_empty(), "round {round}: empty timeline");
    for summary in newest {
        check_whole(summary.id, &mut resolved);
    }
    store
}

#[test]
fn sigkill_mid_write_loses_no_committed_observation() {
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("plumbline.db");
    let mut expected: BTreeMap<ObservationId, Committed> = BTreeMap::new();

    for (round, &(kill_after, phase)) in ROUNDS.iter().enumerate() {
        let reported = run_and_kill(&path, round, kill_after, phase);
        let (first, last) = (reported.keys().next(), reported.keys().next_back());
        let newest_before = expected.keys().next_back().copied();
        assert!(
            first.copied() > newest_before,
            "round {round}: ids reused after a kill"
        );
        let (first, last) = (
            *first.expect("at least one commit"),
            *last.expect("at least one commit"),
        );
        let wal = std::fs::metadata(dir.path().join("plumbline.db-wal")).map_or(0, |m| m.len());
        let reported_count = reported.len();
        expected.extend(reported);

        let mut store = check_after_kill(&path, round, &expected);
        let newest = store.timeline(SERVER, 1).expect("timeline")[0].id;
        println!(
            "round {round}: SIGKILL {phase:.2} of a commit after the {kill_after}th: \
             {reported_count} reported commits (ids {first} to {last}), {} committed \
             but unreported; WAL {wal} bytes at the kill; {:.1?} since start",
            newest.0 - last.0,
            started.elapsed(),
        );
        // A later run carries on: it records and reads back a new observation.
        let at = START_MS + 10_000_000_000 + round as i64 * 60_000;
        let id = store
            .record_observation(&ok_observation(SERVER, at, fifty_tools()))
            .unwrap_or_else(|e| panic!("round {round}: recording after SIGKILL: {e}"));
        assert!(Some(id) > expected.keys().next_back().copied());
        let back = store.observation(id).expect("read").expect("just recorded");
        assert_eq!(back.tools.len(), 50);
        expected.insert(
            id,
            Committed {
                ok: true,
                tools: 50,
                varied: None,
            },
        );
        store
            .integrity_check()
            .expect("integrity after carrying on");
    }
    println!(
        "{} observations checked after {} kills in {:.1?}",
        expected.len(),
        ROUNDS.len(),
        started.elapsed()
    );
}
