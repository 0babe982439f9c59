//! One pass over the real drift corpus, for instruction counts under
//! `valgrind --tool=callgrind`, which are repeatable where wall-clock time
//! on a shared machine is not:
//!
//! ```text
//! valgrind --tool=callgrind --toggle-collect='corpus_work::serde_pass' \
//!     target/release/examples/corpus_work serde
//! valgrind --tool=callgrind --toggle-collect='corpus_work::classify_pass' \
//!     target/release/examples/corpus_work classify
//! ```
//!
//! `serde` parses every pair into `serde_json::Value`; `classify` parses
//! with our reader and classifies. The bytes are prepared before either.

use std::hint::black_box;

use plumbline_taxonomy::json::parse_tool;
use plumbline_taxonomy::Classifier;

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/corpus/real-pairs.jsonl"
    );
    let text = std::fs::read_to_string(path).expect("testdata/corpus/real-pairs.jsonl");
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = text
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).expect("corpus line");
            (
                serde_json::to_vec(&v["old"]).expect("old"),
                serde_json::to_vec(&v["new"]).expect("new"),
            )
        })
        .collect();
    let classifier = Classifier::default();
    let start = std::time::Instant::now();
    match mode.as_str() {
        "serde" => serde_pass(&pairs),
        "classify" => classify_pass(&classifier, &pairs),
        _ => {
            eprintln!("usage: corpus_work serde|classify");
            std::process::exit(2);
        }
    }
    eprintln!("{mode}: {} pairs in {:?}", pairs.len(), start.elapsed());
}

/// Counted with `--toggle-collect=corpus_work::serde_pass`.
#[inline(never)]
fn serde_pass(pairs: &[(Vec<u8>, Vec<u8>)]) {
    for (old, new) in pairs {
        let o: serde_json::Value = serde_json::from_slice(old).expect("json");
        let n: serde_json::Value = serde_json::from_slice(new).expect("json");
        black_box((o, n));
    }
}

/// Counted with `--toggle-collect=corpus_work::classify_pass`.
#[inline(never)]
fn classify_pass(classifier: &Classifier, pairs: &[(Vec<u8>, Vec<u8>)]) {
    for (old, new) in pairs {
        let o = parse_tool(old).expect("tool");
        let n = parse_tool(new).expect("tool");
        black_box(classifier.classify(&o, &n));
    }
}
