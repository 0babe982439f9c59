//! R03 — HIGH — New URL, domain, IP, or absolute path (spec 4.3, C7, C13).
#![doc = include_str!("r03_new_endpoint.md")]

use std::collections::HashSet;

use super::{Context, Found};
use crate::evidence::{Detail, Evidence};
use crate::fields::{for_each_string, pointer_of};
use crate::json::Value;
use crate::patterns::{r03_hits, Hit};
use crate::severity::RuleId;

pub const DOC: &str = include_str!("r03_new_endpoint.md");

/// The pooled set of match texts over every string value of `tool` (C13).
fn match_texts(tool: &Value) -> HashSet<&str> {
    let mut texts = HashSet::new();
    let mut hits = Vec::new();
    for_each_string(tool, &mut |_, s| {
        hits.clear();
        r03_hits(s, &mut hits);
        texts.extend(hits.iter().map(|h: &Hit| &s[h.span.clone()]));
    });
    texts
}

pub(crate) fn check(ctx: &Context<'_>) -> Found {
    // A string that occurs verbatim anywhere in the old tool contributes
    // only matches the old tool already has; skip it without scanning.
    let mut old_strings: HashSet<&str> = HashSet::new();
    for_each_string(ctx.old, &mut |_, s| {
        old_strings.insert(s);
    });
    let mut old_texts: Option<HashSet<&str>> = None;
    let mut found = Vec::new();
    let mut reported: HashSet<(String, &str)> = HashSet::new();
    let mut hits = Vec::new();
    for_each_string(ctx.new, &mut |path, s| {
        if old_strings.contains(s) {
            return;
        }
        hits.clear();
        r03_hits(s, &mut hits);
        if hits.is_empty() {
            return;
        }
        let old_texts = old_texts.get_or_insert_with(|| match_texts(ctx.old));
        let mut pointer = None;
        for hit in &hits {
            let text = &s[hit.span.clone()];
            if old_texts.contains(text) {
                continue;
            }
            let pointer = pointer.get_or_insert_with(|| pointer_of(path));
            if reported.insert((pointer.clone(), text)) {
                found.push(Evidence {
                    rule: RuleId::R03,
                    pointer: pointer.clone(),
                    detail: Detail::Pattern {
                        pattern: hit.kind,
                        text: text.to_owned(),
                    },
                });
            }
        }
    });
    found
}
