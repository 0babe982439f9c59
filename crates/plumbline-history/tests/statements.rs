//! What recording costs in statements, on PostgreSQL and SQLite (issue 36,
//! fault 5). One test in this binary: the counts are the process's
//! (`Store::statements`), so nothing else may run beside it.
//!
//! - A listing that repeats the server's previous one costs at most five
//!   statements (BEGIN, the server's row locked, the row inserted, COMMIT).
//! - A graded change costs as many statements with 200 other servers in
//!   the history as with 10: the other servers' tool names are one read.
//! - A server's first listing, of tools the store holds already (a
//!   fleet's first round: its endpoints mostly serve what another did),
//!   costs at most 14 statements on PostgreSQL (its content looked up in
//!   one, not one or two per tool and document).

use plumbline_history::{Grader, History, Observed};
use plumbline_store::testing::{Backend, TestStore};
use plumbline_store::{NewObservation, Outcome, RawTool};
use plumbline_taxonomy::Taxonomy;

fn listing(server: &str, at: i64, description: &str) -> Observed {
    let tool = |name: &str, text: &str| {
        let raw = format!(
            r#"{{"name":"{name}","description":"{text}","inputSchema":{{"type":"object","properties":{{"q":{{"type":"string"}}}}}}}}"#
        );
        RawTool {
            name: Some(name.to_owned()),
            raw: raw.into_bytes(),
            normalized: None,
        }
    };
    Observed {
        identity: format!(r#"{{"transport":"stdio","command":"{server}"}}"#),
        lease: None,
        observation: NewObservation {
            server: server.to_owned(),
            started_at_ms: at,
            finished_at_ms: at + 10,
            outcome: Outcome::Ok,
            protocol_version: Some("2025-11-25".into()),
            server_info: Some(br#"{"name":"s","version":"1"}"#.to_vec()),
            capabilities: Some(br#"{"tools":{}}"#.to_vec()),
            instructions: None,
            authorization: None,
            tools: vec![
                tool(&format!("{server}_search"), description),
                tool(&format!("{server}_fetch"), "Fetches a page."),
            ],
            problems: Vec::new(),
        },
    }
}

/// Statements sent while `f` runs on `history`.
fn counted<T>(history: &mut History, f: impl FnOnce(&mut History) -> T) -> (T, u64) {
    let before = history.statements();
    let out = f(history);
    (out, history.statements() - before)
}

/// `server`'s listing of the tools `of` lists.
fn mirror(of: &str, server: &str, at: i64) -> Observed {
    let mut o = listing(of, at, "Searches the shop.");
    o.observation.server = server.to_owned();
    o.identity = format!(r#"{{"transport":"stdio","command":"{server}"}}"#);
    o
}

/// (statements per repeated listing, per graded change with 10 others,
/// per graded change with 200 others, per first listing of stored tools).
fn measure(backend: Backend) -> (f64, u64, u64, u64) {
    let fx = TestStore::new(backend);
    let mut history = History::open(fx.location().clone()).expect("opens");
    let grader = Grader::new(Taxonomy::V3);
    let mut at = 1_000;
    let mut tick = || {
        at += 1_000;
        at
    };
    for i in 0..10 {
        let o = listing(&format!("other{i:03}"), tick(), "Searches the docs.");
        history.record(&grader, vec![o]).expect("recorded");
    }
    history
        .record(&grader, vec![listing("shop", tick(), "Searches the shop.")])
        .expect("recorded");
    // Repeats: the first after a graded listing is already one.
    let rounds = 20;
    let (_, repeats) = counted(&mut history, |history| {
        for _ in 0..rounds {
            let r = history
                .record(&grader, vec![listing("shop", tick(), "Searches the shop.")])
                .expect("recorded");
            assert!(r[0].repeated, "recorded as a repeat");
        }
    });
    let change = |history: &mut History, at: i64, text: &str| {
        let (r, n) = counted(history, |history| {
            history
                .record(&grader, vec![listing("shop", at, text)])
                .expect("recorded")
        });
        assert!(r[0].drift.as_ref().unwrap().changes().next().is_some());
        n
    };
    // Every statement a change uses prepared once (a first prepare is a
    // round trip of its own), then measured.
    change(&mut history, tick(), "Searches the shop's shelves.");
    let with_ten = change(&mut history, tick(), "Searches the shop's catalogue.");
    for i in 10..200 {
        let o = listing(&format!("other{i:03}"), tick(), "Searches the docs.");
        history.record(&grader, vec![o]).expect("recorded");
    }
    let with_two_hundred = change(&mut history, tick(), "Searches the shop's whole catalogue.");
    // A new server listing what another does: the first prepares its
    // statements, the second is measured.
    let first = |history: &mut History, server: &str, at: i64| {
        let (r, n) = counted(history, |history| {
            history
                .record(&grader, vec![mirror("shop", server, at)])
                .expect("recorded")
        });
        assert!(r[0].previous.is_none() && !r[0].repeated, "a first listing");
        n
    };
    first(&mut history, "mirror1", tick());
    let first_listing = first(&mut history, "mirror2", tick());
    (
        repeats as f64 / f64::from(rounds),
        with_ten,
        with_two_hundred,
        first_listing,
    )
}

#[test]
fn a_repeat_costs_at_most_five_statements_and_a_change_does_not_grow_with_the_fleet() {
    for backend in [Backend::Postgres, Backend::Sqlite] {
        let (repeat, ten, two_hundred, first) = measure(backend);
        println!(
            "{backend:?}: {repeat:.1} statements per repeated listing; a graded change {ten} with 10 other servers, {two_hundred} with 200; a first listing of stored tools {first}"
        );
        if backend == Backend::Postgres {
            assert!(
                first <= 14,
                "{backend:?}: {first} statements for a first listing"
            );
        }
        assert!(repeat <= 5.0, "{backend:?}: {repeat} statements per repeat");
        assert_eq!(
            ten, two_hundred,
            "{backend:?}: a change's cost grew with the fleet"
        );
    }
}
