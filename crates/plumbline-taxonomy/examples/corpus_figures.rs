//! Prints the two figures the imperative phrase list is measured by
//! (spec 3.1): published attacks graded HIGH or above, and benign release
//! drift graded CRITICAL.
//!
//! ```text
//! cargo run --release -p plumbline-taxonomy --example corpus_figures -- \
//!     [--imperatives FILE] [--attacks FILE] [--benign FILE] [--list]
//! ```

use std::path::PathBuf;

use plumbline_taxonomy::corpus::{grade, parse_pairs};
use plumbline_taxonomy::{Classifier, PhraseList, Severity};

fn main() -> Result<(), String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/corpus");
    let mut attacks = root.join("attack-pairs.jsonl");
    let mut benign = root.join("real-pairs.jsonl");
    let mut classifier = Classifier::default();
    let mut list = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--imperatives" => {
                let path = value()?;
                let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
                classifier =
                    Classifier::new(PhraseList::parse(&text).map_err(|e| format!("{path}: {e}"))?);
            }
            "--attacks" => attacks = value()?.into(),
            "--benign" => benign = value()?.into(),
            "--list" => list = true,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let read = |p: &PathBuf| -> Result<_, String> {
        let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
        parse_pairs(&text).map_err(|e| format!("{}: {e}", p.display()))
    };
    let attack_grades = grade(&classifier, &read(&attacks)?, Severity::High);
    let benign_grades = grade(&classifier, &read(&benign)?, Severity::Critical);
    println!("phrases: {}", classifier.phrases().len());
    let pct = |n: usize, d: usize| 100.0 * n as f64 / d.max(1) as f64;
    let a = attack_grades.count_at_least(Severity::High);
    println!(
        "attacks graded >= HIGH: {a} / {} ({:.1}%)   [{}]",
        attack_grades.total,
        pct(a, attack_grades.total),
        attacks.display()
    );
    let b = benign_grades.count_at_least(Severity::Critical);
    println!(
        "benign drift graded CRITICAL: {b} / {} ({:.2}%)   [{}]",
        benign_grades.total,
        pct(b, benign_grades.total),
        benign.display()
    );
    for (name, g) in [("attacks", &attack_grades), ("benign", &benign_grades)] {
        let row: Vec<String> = g
            .by_severity
            .iter()
            .map(|(s, n)| format!("{s} {n}"))
            .collect();
        println!("{name} by severity: {}", row.join(", "));
    }
    if list {
        println!("benign pairs graded CRITICAL:");
        for id in &benign_grades.at_or_above {
            println!("  {id}");
        }
    }
    Ok(())
}
