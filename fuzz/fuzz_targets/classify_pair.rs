//! Arbitrary bytes, split into two documents, through parse and classify.
//! Neither may panic, overflow the stack, or hang, whatever the input.
#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use plumbline_taxonomy::json::parse_tool;
use plumbline_taxonomy::Classifier;

static CLASSIFIER: LazyLock<Classifier> = LazyLock::new(Classifier::default);

fuzz_target!(|data: &[u8]| {
    // The first two bytes choose where the old document ends, so the
    // fuzzer controls both sides independently.
    let (split, rest) = match data {
        [a, b, rest @ ..] => (usize::from(u16::from_le_bytes([*a, *b])), rest),
        _ => return,
    };
    let (old, new) = rest.split_at(split.min(rest.len()));
    let (Ok(old), Ok(new)) = (parse_tool(old), parse_tool(new)) else {
        return;
    };
    let c = CLASSIFIER.classify(&old, &new);
    // Laws that must hold for every classified pair.
    assert!(c.rules.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(c.severity, c.rules.iter().map(|r| r.severity()).max().unwrap_or_default());
    let same = CLASSIFIER.classify(&new, &new);
    assert!(same.rules.is_empty());
});
