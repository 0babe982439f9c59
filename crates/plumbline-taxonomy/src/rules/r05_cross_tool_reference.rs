//! R05 — HIGH — Cross-server / cross-tool reference (spec 4.5, C12, C14).
#![doc = include_str!("r05_cross_tool_reference.md")]

use std::collections::HashSet;

use super::r02_imperative_instruction::original_span;
use super::{Context, Found, Scan};
use crate::evidence::{Detail, Evidence};
use crate::patterns::{r03_hits, PatternKind, SERVER_TOOL};
use crate::severity::RuleId;
use crate::text::lower;

pub const DOC: &str = include_str!("r05_cross_tool_reference.md");

/// `mcp://` and the fixed phrases of spec 4.5, matched per C8.
pub const FIXED_PHRASES: [&str; 6] = [
    "mcp://",
    "another tool",
    "other server",
    "instead use",
    "delegate to",
    "call the",
];

/// Left segments that make a `server/tool` match a web or placeholder
/// name instead (spec 4.5, compared case-insensitively per C14).
pub const EXCLUDED_LEFT: [&str; 9] = [
    "com",
    "net",
    "org",
    "io",
    "dev",
    "ai",
    "example",
    "localhost",
    "www",
];

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Element {
    Phrase(usize),
    Token(String),
}

/// The R05 element set of one field (C12), with the text each element was
/// found as.
fn elements(s: &str, scan: &Scan) -> Vec<(Element, String)> {
    let mut out = Vec::new();
    for (i, at) in scan.hits.fixed.iter().enumerate() {
        if let Some(at) = *at {
            let text = original_span(s, &scan.lowered, at, FIXED_PHRASES[i].chars().count());
            out.push((Element::Phrase(i), text));
        }
    }
    let mut spans = None;
    if !s.contains('/') {
        return out;
    }
    for whole in SERVER_TOOL.find_iter(s) {
        // Group 1, the left segment, is everything before the slash:
        // neither segment can hold one.
        let left = s[whole.clone()].split('/').next().unwrap_or_default();
        if EXCLUDED_LEFT.contains(&lower(left).as_str()) {
            continue;
        }
        // Matches inside an R03 URL or path match of the same string are
        // part of that URL or path, not a reference (C14: by position).
        let spans = spans.get_or_insert_with(|| {
            let mut hits = Vec::new();
            r03_hits(s, &mut hits);
            hits.retain(|h| {
                matches!(
                    h.kind,
                    PatternKind::Url | PatternKind::UnixPath | PatternKind::WindowsPath
                )
            });
            hits
        });
        let r = whole.clone();
        if spans
            .iter()
            .any(|h| h.span.start <= r.start && r.end <= h.span.end)
        {
            continue;
        }
        out.push((
            Element::Token(s[whole.clone()].to_owned()),
            s[whole.clone()].to_owned(),
        ));
    }
    out
}

/// taxonomy-v2 (`docs/taxonomy-v2.md` 4.5): a name of another tool
/// (2.7) newly present in a human-readable field; names compare exactly.
fn check_v2(ctx: &Context<'_>) -> Found {
    let mut found = Vec::new();
    for f in ctx.changed_fields() {
        let new = f.new_refs(ctx);
        if new.is_empty() {
            continue;
        }
        let old: HashSet<&str> = f.old_refs(ctx).iter().map(|r| r.name.as_str()).collect();
        let mut seen = HashSet::new();
        for r in new {
            if old.contains(r.name.as_str()) || !seen.insert(r.name.as_str()) {
                continue;
            }
            found.push(Evidence {
                rule: RuleId::R05,
                pointer: f.pointer(),
                detail: Detail::ToolReference {
                    tool: r.name.clone(),
                    by: r.by,
                },
            });
        }
    }
    found
}

pub(crate) fn check(ctx: &Context<'_>) -> Found {
    if ctx.is_v2() {
        return check_v2(ctx);
    }
    let mut found = Vec::new();
    for f in ctx.changed_fields() {
        let new = elements(f.new, f.new_scan(ctx.phrases));
        if new.is_empty() {
            continue;
        }
        let old: HashSet<Element> = elements(f.old, f.old_scan(ctx.phrases))
            .into_iter()
            .map(|(e, _)| e)
            .collect();
        let mut seen = HashSet::new();
        for (element, text) in new {
            if old.contains(&element) || !seen.insert(element.clone()) {
                continue;
            }
            let detail = match element {
                Element::Phrase(i) => Detail::Phrase {
                    phrase: FIXED_PHRASES[i].to_owned(),
                    text,
                },
                Element::Token(_) => Detail::ServerToolReference { text },
            };
            found.push(Evidence {
                rule: RuleId::R05,
                pointer: f.pointer(),
                detail,
            });
        }
    }
    found
}
