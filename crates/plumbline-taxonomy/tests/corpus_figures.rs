//! The two figures the phrase list is held to (spec 3.1), over the corpora
//! copied into `testdata/corpus/`.

use plumbline_taxonomy::corpus::{grade, parse_pairs};
use plumbline_taxonomy::{Classifier, Severity};

fn corpus(name: &str) -> String {
    let path = format!(
        "{}/../../testdata/corpus/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn benign_release_drift_graded_critical_stays_at_most_one_percent() {
    let pairs = parse_pairs(&corpus("real-pairs.jsonl")).unwrap();
    assert_eq!(pairs.len(), 1111);
    let g = grade(&Classifier::default(), &pairs, Severity::Critical);
    let critical = g.count_at_least(Severity::Critical);
    assert!(
        critical * 100 <= pairs.len(),
        "{critical} of {} benign pairs graded CRITICAL (> 1%): {:?}",
        pairs.len(),
        g.at_or_above
    );
}

#[test]
fn published_attacks_graded_high_or_above_do_not_regress() {
    // 81 of 109 with imperatives-v1.txt as of 0.1.0 (71 with the v1
    // minimum alone). Raise this floor when the list catches more.
    let pairs = parse_pairs(&corpus("attack-pairs.jsonl")).unwrap();
    assert_eq!(pairs.len(), 109);
    let g = grade(&Classifier::default(), &pairs, Severity::High);
    assert!(
        g.count_at_least(Severity::High) >= 81,
        "{:?}",
        g.by_severity
    );
}

#[test]
fn the_v1_minimum_alone_gives_the_recorded_baseline() {
    // The figures before any addition, recorded in CHANGELOG.md.
    let minimum: String = plumbline_taxonomy::phrases::IMPERATIVES_V1
        .split("# Added within v1")
        .next()
        .unwrap_or_default()
        .to_owned();
    let classifier = Classifier::new(plumbline_taxonomy::PhraseList::parse(&minimum).unwrap());
    assert_eq!(classifier.phrases().len(), 23);
    let attacks = grade(
        &classifier,
        &parse_pairs(&corpus("attack-pairs.jsonl")).unwrap(),
        Severity::High,
    );
    let benign = grade(
        &classifier,
        &parse_pairs(&corpus("real-pairs.jsonl")).unwrap(),
        Severity::Critical,
    );
    assert_eq!(attacks.count_at_least(Severity::High), 71);
    assert_eq!(benign.count_at_least(Severity::Critical), 2);
}

/// taxonomy-v2's targets (docs/taxonomy-v2.md 9), held on the labelled
/// corpora of `testdata/corpus/evaluation/`: at least 95% of the attacks of
/// each half graded HIGH or above, every attack v1 grades HIGH or above
/// still so, and at most 10% of the benign release changes graded HIGH or
/// above and 0.5% CRITICAL.
#[test]
fn taxonomy_v2_meets_its_targets_on_both_halves() {
    use plumbline_taxonomy::corpus::{evaluate, parse_labelled, Label, LabelledPair};
    use plumbline_taxonomy::Taxonomy;

    let read = |name: &str| -> Vec<LabelledPair> {
        corpus(&format!("evaluation/{name}.jsonl"))
            .lines()
            .map(|l| parse_labelled(l).expect("labelled pair"))
            .collect()
    };
    let (a, b, real) = (read("attacks-a"), read("attacks-b"), read("real"));
    assert_eq!((a.len(), b.len(), real.len()), (40, 69, 1111));
    let v1 = Classifier::for_taxonomy(Taxonomy::V1);
    let v2 = Classifier::for_taxonomy(Taxonomy::V2);
    let all = || a.iter().chain(&b).chain(&real).map(|p| (p, "corpus"));
    let e = evaluate(&v2, all());
    for group in ["attacks-a", "attacks-b"] {
        let g = e
            .groups
            .iter()
            .find(|g| g.group == group && g.label == Some(Label::Attack))
            .expect(group);
        assert!(
            g.at_least_high * 100 >= g.pairs * 95,
            "{group}: {} of {} at HIGH or above",
            g.at_least_high,
            g.pairs
        );
    }
    assert!(
        e.benign.at_least_high * 10 <= e.benign.pairs,
        "benign at HIGH or above: {} of {}",
        e.benign.at_least_high,
        e.benign.pairs
    );
    assert!(
        e.benign.critical * 200 <= e.benign.pairs,
        "benign CRITICAL: {} of {}",
        e.benign.critical,
        e.benign.pairs
    );
    for p in a.iter().chain(&b) {
        let before = v1.classify_in(&p.old, &p.new, &p.inventory).severity;
        let after = v2.classify_in(&p.old, &p.new, &p.inventory).severity;
        assert!(
            before < Severity::High || after >= Severity::High,
            "{}: {before} under v1, {after} under v2",
            p.id
        );
    }
}

/// taxonomy-v3's targets (docs/taxonomy-v3.md 9): at least 98% of the
/// attacks of each half graded HIGH or above, at most 5% of the benign
/// release changes graded HIGH or above and 0.2% CRITICAL, and none of our
/// own benign examples CRITICAL.
#[test]
fn taxonomy_v3_meets_its_targets() {
    use plumbline_taxonomy::corpus::{evaluate, parse_labelled, Label, LabelledPair};
    use plumbline_taxonomy::Taxonomy;

    let read = |name: &str| -> Vec<LabelledPair> {
        corpus(name)
            .lines()
            .map(|l| parse_labelled(l).expect("labelled pair"))
            .collect()
    };
    let a = read("evaluation/attacks-a.jsonl");
    let b = read("evaluation/attacks-b.jsonl");
    let real = read("evaluation/real.jsonl");
    let own: Vec<LabelledPair> = read("own/design.jsonl")
        .into_iter()
        .chain(read("own/heldout.jsonl"))
        .collect();
    let v3 = Classifier::for_taxonomy(Taxonomy::V3);
    let all = a.iter().chain(&b).chain(&real).chain(&own);
    let e = evaluate(&v3, all.map(|p| (p, "corpus")));
    assert!(e.unreadable.is_empty(), "{:?}", e.unreadable);
    for group in ["attacks-a", "attacks-b"] {
        let g = e
            .groups
            .iter()
            .find(|g| g.group == group && g.label == Some(Label::Attack))
            .expect(group);
        assert!(
            g.at_least_high * 100 >= g.pairs * 98,
            "{group}: {} of {} at HIGH or above",
            g.at_least_high,
            g.pairs
        );
    }
    let real_benign = e.groups.iter().find(|g| g.group == "real").expect("real");
    assert!(
        real_benign.at_least_high * 20 <= real_benign.pairs,
        "benign at HIGH or above: {} of {}",
        real_benign.at_least_high,
        real_benign.pairs
    );
    assert!(
        real_benign.critical * 500 <= real_benign.pairs,
        "benign CRITICAL: {} of {}",
        real_benign.critical,
        real_benign.pairs
    );
    let own_benign_critical: usize = e
        .families
        .iter()
        .filter(|g| g.label == Some(Label::Benign))
        .map(|g| g.critical)
        .sum();
    assert_eq!(own_benign_critical, 0, "{:?}", e.families);
}

/// taxonomy-v3 draft 4 (docs/taxonomy-v3.md 4.16): none of the tools real
/// releases added, graded beside the other tools of their release, is a
/// duplicate of one of them (draft 3 called 19 of 338 so: tools of one
/// server written from one template, told apart by their names).
#[test]
fn no_tool_a_real_release_added_duplicates_its_siblings() {
    use plumbline_taxonomy::corpus::{inventory_for, parse_labelled};
    use plumbline_taxonomy::{RuleId, Taxonomy};

    let v3 = Classifier::for_taxonomy(Taxonomy::V3);
    let added: Vec<_> = corpus("evaluation/real-added.jsonl")
        .lines()
        .map(|l| parse_labelled(l).expect("labelled pair"))
        .collect();
    assert_eq!(added.len(), 338);
    let duplicates: Vec<&str> = added
        .iter()
        .filter(|p| {
            assert!(p.added, "{}", p.id);
            let inventory = inventory_for(p.inventory_value.as_ref(), Taxonomy::V3).unwrap();
            assert!(!inventory.tools().is_empty(), "{}", p.id);
            v3.classify_added(&p.new, &inventory)
                .rules
                .contains(&RuleId::R16)
        })
        .map(|p| p.id.as_str())
        .collect();
    assert!(duplicates.is_empty(), "{duplicates:?}");
}
