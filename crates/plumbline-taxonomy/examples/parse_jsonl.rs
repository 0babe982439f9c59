//! The baseline `classify --jsonl` is measured against: read JSON Lines
//! from standard input and only parse each line into a `serde_json::Value`.
//!
//! ```sh
//! valgrind --tool=callgrind target/release/examples/parse_jsonl < testdata/corpus/real-pairs.jsonl
//! valgrind --tool=callgrind target/release/plumbline classify --jsonl - < testdata/corpus/real-pairs.jsonl > /dev/null
//! ```

use std::io::BufRead;

fn main() {
    let stdin = std::io::stdin().lock();
    let mut values = 0usize;
    for line in stdin.lines() {
        let line = line.expect("standard input is UTF-8 text");
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(&line).expect("a JSON value per line");
        std::hint::black_box(&v);
        values += 1;
    }
    eprintln!("{values} values");
}
