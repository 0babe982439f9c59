//! taxonomy-v2's cost against v1 on the real pairs, measured in one
//! process with the two interleaved (round after round, the minimum of
//! each), so that load on the machine weighs on both alike:
//!
//! ```sh
//! cargo run --release -p plumbline-taxonomy --example v2_cost
//! ```

use std::time::{Duration, Instant};

use plumbline_taxonomy::corpus::parse_pairs;
use plumbline_taxonomy::{Classifier, Taxonomy};

fn main() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/corpus/real-pairs.jsonl"
    );
    let text = std::fs::read_to_string(path).expect("testdata/corpus/real-pairs.jsonl");
    let pairs = parse_pairs(&text).expect("corpus");
    let v1 = Classifier::for_taxonomy(Taxonomy::V1);
    let v2 = Classifier::for_taxonomy(Taxonomy::V2);
    let run = |c: &Classifier| {
        let start = Instant::now();
        for p in &pairs {
            std::hint::black_box(c.classify(&p.old, &p.new));
        }
        start.elapsed()
    };
    let (mut best1, mut best2) = (Duration::MAX, Duration::MAX);
    for _ in 0..30 {
        best1 = best1.min(run(&v1));
        best2 = best2.min(run(&v2));
    }
    println!(
        "{} pairs: v1 {:.2} ms, v2 {:.2} ms (minimum of 30 interleaved rounds): v2/v1 = {:.3}",
        pairs.len(),
        best1.as_secs_f64() * 1e3,
        best2.as_secs_f64() * 1e3,
        best2.as_secs_f64() / best1.as_secs_f64()
    );
}
