//! Classifier throughput on real drift, against parsing alone, and the
//! worst case of two 1 MiB descriptions.
//!
//! Report figures as ratios to a baseline measured in the same run:
//! `classify_corpus/classify` ÷ `classify_corpus/parse_only`, and
//! `classify_corpus/classify_preparsed_v2` ÷ `classify_preparsed` (the
//! cost of taxonomy-v2 against v1; target at most 1.2). The instruction
//! counts of the whole `classify --jsonl -` are `scripts/bench-classify`'s.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use plumbline_taxonomy::json::{parse_tool, Value};
use plumbline_taxonomy::Classifier;

/// The real drift pairs as (old bytes, new bytes).
fn corpus() -> Vec<(Vec<u8>, Vec<u8>)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/corpus/real-pairs.jsonl"
    );
    let text = std::fs::read_to_string(path).expect("testdata/corpus/real-pairs.jsonl");
    text.lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).expect("corpus line");
            let bytes = |k: &str| serde_json::to_vec(&v[k]).expect("serialise");
            (bytes("old"), bytes("new"))
        })
        .collect()
}

fn bench_corpus(c: &mut Criterion) {
    let pairs = corpus();
    let classifier = Classifier::default();
    let mut g = c.benchmark_group("classify_corpus");
    g.throughput(Throughput::Elements(pairs.len() as u64));
    g.bench_function("parse_only", |b| {
        b.iter(|| {
            for (old, new) in &pairs {
                let o: serde_json::Value = serde_json::from_slice(old).expect("json");
                let n: serde_json::Value = serde_json::from_slice(new).expect("json");
                black_box((o, n));
            }
        })
    });
    g.bench_function("parse_ours", |b| {
        b.iter(|| {
            for (old, new) in &pairs {
                black_box((
                    parse_tool(old).expect("tool"),
                    parse_tool(new).expect("tool"),
                ));
            }
        })
    });
    let parsed: Vec<(Value, Value)> = pairs
        .iter()
        .map(|(o, n)| (parse_tool(o).expect("tool"), parse_tool(n).expect("tool")))
        .collect();
    g.bench_function("classify_preparsed", |b| {
        b.iter(|| {
            for (o, n) in &parsed {
                black_box(classifier.classify(o, n));
            }
        })
    });
    let v2 = Classifier::for_taxonomy(plumbline_taxonomy::Taxonomy::V2);
    g.bench_function("classify_preparsed_v2", |b| {
        b.iter(|| {
            for (o, n) in &parsed {
                black_box(v2.classify(o, n));
            }
        })
    });
    g.bench_function("classify", |b| {
        b.iter(|| {
            for (old, new) in &pairs {
                let o = parse_tool(old).expect("tool");
                let n = parse_tool(new).expect("tool");
                black_box(classifier.classify(&o, &n));
            }
        })
    });
    g.finish();
}

/// The `classify --jsonl` path without its I/O: each corpus line parsed
/// (our reader, as the CLI does) and classified, against only parsing each
/// line with serde_json into a `Value` (target: at most 1.5x).
fn bench_jsonl(c: &mut Criterion) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/corpus/real-pairs.jsonl"
    );
    let text = std::fs::read_to_string(path).expect("testdata/corpus/real-pairs.jsonl");
    let lines: Vec<&str> = text.lines().collect();
    let mut g = c.benchmark_group("jsonl");
    g.throughput(Throughput::Elements(lines.len() as u64));
    g.bench_function("serde_value_per_line", |b| {
        b.iter(|| {
            for line in &lines {
                let v: serde_json::Value = serde_json::from_str(line).expect("json");
                black_box(v);
            }
        })
    });
    for taxonomy in plumbline_taxonomy::Taxonomy::ALL {
        let classifier = Classifier::for_taxonomy(taxonomy);
        g.bench_function(format!("classify_per_line_{}", taxonomy.short()), |b| {
            b.iter(|| {
                for line in &lines {
                    let record = plumbline_taxonomy::json::parse_with_depth(
                        line.as_bytes(),
                        plumbline_taxonomy::json::MAX_DEPTH + 1,
                    )
                    .expect("record");
                    let (Some(old), Some(new)) = (record.get("old"), record.get("new")) else {
                        panic!("a pair");
                    };
                    black_box(classifier.classify(old, new));
                }
            })
        });
    }
    g.finish();
}

/// Words as they occur in real tool descriptions.
fn vocabulary() -> Vec<String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/corpus/real-pairs.jsonl"
    );
    let text = std::fs::read_to_string(path).expect("corpus");
    let mut words: Vec<String> = Vec::new();
    for line in text.lines().take(300) {
        let v: serde_json::Value = serde_json::from_str(line).expect("line");
        if let Some(d) = v["new"]["description"].as_str() {
            words.extend(d.split_whitespace().map(str::to_owned));
        }
    }
    words
}

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// About 1 MiB of words drawn from `vocab`.
fn megabyte_text(vocab: &[String], rng: &mut Rng) -> Vec<String> {
    let mut out = Vec::new();
    let mut bytes = 0;
    while bytes < 1 << 20 {
        let w = vocab[rng.below(vocab.len())].clone();
        bytes += w.len() + 1;
        out.push(w);
    }
    out
}

fn tool(words: &[String]) -> Value {
    let json = serde_json::json!({"name": "big", "description": words.join(" ")});
    parse_tool(json.to_string().as_bytes()).expect("tool")
}

fn bench_worst_case(c: &mut Criterion) {
    let vocab = vocabulary();
    let mut rng = Rng(0x2545F4914F6CDD1D);
    let base = megabyte_text(&vocab, &mut rng);
    // Scattered edits: one word in a hundred replaced, spread evenly.
    let mut edited = base.clone();
    for i in (50..edited.len()).step_by(100) {
        edited[i] = format!("{}-edited", edited[i]);
    }
    let other = megabyte_text(&vocab, &mut rng);
    let classifier = Classifier::default();
    let (old, shared, different) = (tool(&base), tool(&edited), tool(&other));
    let mut g = c.benchmark_group("worst_case_1mib");
    g.sample_size(10);
    g.bench_function("scattered_edits", |b| {
        b.iter_batched(
            || (),
            |()| black_box(classifier.classify(&old, &shared)),
            BatchSize::SmallInput,
        )
    });
    g.bench_function("entirely_different", |b| {
        b.iter_batched(
            || (),
            |()| black_box(classifier.classify(&old, &different)),
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench_corpus, bench_jsonl, bench_worst_case);
criterion_main!(benches);
