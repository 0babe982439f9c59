//! R03 — HIGH — New URL, domain, IP, or absolute path (spec 4.3, C7, C13).
#![doc = include_str!("r03_new_endpoint.md")]

use rustc_hash::FxHashSet;

use super::{Context, Found};
use crate::evidence::{Detail, Evidence};
use crate::fields::for_each_string;
use crate::fields::Seg;
use crate::patterns::{r03_hits, r03_hits_v2, PatternKind};
use crate::severity::RuleId;

pub const DOC: &str = include_str!("r03_new_endpoint.md");

/// taxonomy-v2: JSON Schema keywords whose values are schema metadata
/// (which meta-schema, which schema, a reference to one), not endpoints
/// the tool reaches or the model is sent to.
pub const SCHEMA_METADATA: [&str; 3] = ["$schema", "$id", "$ref"];

/// Whether v2 leaves the string at `path` out of R03.
pub(crate) fn is_schema_metadata(path: &[Seg<'_>]) -> bool {
    matches!(path.last(), Some(Seg::Key(k)) if SCHEMA_METADATA.contains(k))
}

pub(crate) fn check(ctx: &Context<'_>) -> Found {
    let v2 = ctx.is_v2();
    let skip_metadata = v2 || ctx.added;
    let v3 = ctx.taxonomy == crate::taxonomy::Taxonomy::V3;
    let scan = |s: &str, out: &mut Vec<crate::patterns::Hit>| {
        if v3 {
            crate::patterns::r03_hits_v3(s, out)
        } else if v2 {
            r03_hits_v2(s, out)
        } else {
            r03_hits(s, out)
        }
    };
    // Candidates: matches in string values that changed. A string equal
    // to the old value at its path only has matches the old tool has.
    let mut candidates: Vec<(usize, PatternKind, &str)> = Vec::new();
    let mut hits = Vec::new();
    for (index, s) in ctx.changed_strings.iter().enumerate() {
        if skip_metadata && is_schema_metadata(&s.path) {
            continue;
        }
        hits.clear();
        scan(s.new, &mut hits);
        for h in &hits {
            candidates.push((index, h.kind, &s.new[h.span.clone()]));
        }
    }
    if candidates.is_empty() {
        return Vec::new();
    }
    // Which candidate texts are in the old tool's pooled match set (C13)?
    // A match text of an old string is a substring of it, so only old
    // strings that contain a candidate need scanning.
    let wanted: FxHashSet<&str> = candidates.iter().map(|c| c.2).collect();
    let mut in_old: FxHashSet<&str> = FxHashSet::default();
    for_each_string(ctx.old, &mut |path, s| {
        if skip_metadata && is_schema_metadata(path) {
            return;
        }
        if wanted.iter().any(|t| !in_old.contains(t) && s.contains(t)) {
            hits.clear();
            scan(s, &mut hits);
            for h in &hits {
                let text = &s[h.span.clone()];
                if wanted.contains(text) {
                    in_old.insert(text);
                }
            }
        }
    });
    let mut found = Vec::new();
    let mut reported: FxHashSet<(usize, &str)> = FxHashSet::default();
    for (index, kind, text) in candidates {
        if !in_old.contains(text) && reported.insert((index, text)) {
            found.push(Evidence {
                rule: RuleId::R03,
                pointer: ctx.changed_strings[index].pointer(),
                detail: Detail::Pattern {
                    pattern: kind,
                    text: text.to_owned(),
                },
            });
        }
    }
    found
}
