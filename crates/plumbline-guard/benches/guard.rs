//! Judging a real listing against its baseline: mcp-atlassian 0.23.1 (98
//! tools) against a lock pinned from itself (nothing changed: the common
//! case at every listing) and from 0.18.1 (65 tools: 33 new, the rest
//! partly reworded; a real release's drift). The target is 5 ms
//! for 100 tools. Ratios to parsing the same listing (serde_json into
//! Values) in the same run are the figures to report.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use plumbline_guard::judge::judge;
use plumbline_guard::Policy;
use plumbline_lock::plan::RawTool;
use plumbline_lock::{pin_tools, LockedServer};
use plumbline_taxonomy::{Classifier, Taxonomy};

fn listing(version: &str) -> Vec<RawTool> {
    let path = format!(
        "{}/../../testdata/listings/mcp-atlassian/{version}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).expect("testdata listing");
    let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    v["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| {
            let raw = serde_json::to_vec(t).expect("bytes");
            (t["name"].as_str().map(str::to_owned), raw)
        })
        .collect()
}

fn baseline(tools: &[RawTool]) -> LockedServer {
    LockedServer {
        identity: "{}".into(),
        tools: pin_tools(tools).tools,
        ..Default::default()
    }
}

fn bench(c: &mut Criterion) {
    let now = listing("0.23.1");
    let same = baseline(&now);
    let older = baseline(&listing("0.18.1"));
    let policy = Policy::default();
    let mut g = c.benchmark_group("judge_98_real_tools");
    g.bench_function("parse_only", |b| {
        b.iter(|| {
            for (_, raw) in &now {
                black_box(serde_json::from_slice::<serde_json::Value>(raw).unwrap());
            }
        })
    });
    for taxonomy in [Taxonomy::V1, Taxonomy::V2] {
        let classifier = Classifier::for_taxonomy(taxonomy);
        g.bench_function(format!("unchanged_{taxonomy:?}"), |b| {
            b.iter(|| black_box(judge(&classifier, Some(&same), &now, &policy).unwrap()))
        });
        g.bench_function(format!("release_drift_{taxonomy:?}"), |b| {
            b.iter(|| black_box(judge(&classifier, Some(&older), &now, &policy).unwrap()))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
