//! Showing server text in HTML so that a reviewer sees every code point.
//!
//! A tool description is written by the server, which may be hostile. The
//! template engine (maud) escapes every string it is given, so markup in a
//! description is shown, never run. Escaping alone would still let
//! invisible and bidi code points (U+200B, U+202E, the tag block, other
//! format and control characters) through to the page, where they hide or
//! reorder text exactly as they do for the model; [`pieces`] splits them
//! out so they are drawn as badges, `<span class="cp">U+200B</span>`.
//!
//! Nothing here builds HTML by hand: every piece of text goes through
//! maud's escaping, and no `PreEscaped` is used anywhere in this crate.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ops::Range;

use maud::{html, Markup};
use plumbline_taxonomy::RuleId;

use crate::worddiff::{Edit, Op};

/// A run of visible text, or one code point that would not be visible.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    Text(&'a str),
    CodePoint(char),
}

/// Whether `c` is drawn as a badge: the code points the terminal output
/// escapes (controls, format characters such as U+200B–U+200F, U+202A–
/// U+202E, U+2066–U+2069, U+FEFF and the tag block, separators, private
/// use, unassigned, fillers and variation selectors). With `keep_breaks`,
/// line feeds and tabs stay text, for multi-line fields.
pub fn is_hidden(c: char, keep_breaks: bool) -> bool {
    if c == '\n' || c == '\t' {
        return !keep_breaks;
    }
    plumbline_taxonomy::sanitize::needs_escape(c)
}

/// `s` split into visible runs and hidden code points, in order.
pub fn pieces(s: &str, keep_breaks: bool) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, c) in s.char_indices() {
        if is_hidden(c, keep_breaks) {
            if start < i {
                out.push(Piece::Text(&s[start..i]));
            }
            out.push(Piece::CodePoint(c));
            start = i + c.len_utf8();
        }
    }
    if start < s.len() {
        out.push(Piece::Text(&s[start..]));
    }
    out
}

fn render(s: &str, keep_breaks: bool) -> Markup {
    html! {
        @for piece in pieces(s, keep_breaks) {
            @match piece {
                Piece::Text(t) => (t),
                Piece::CodePoint(c) => span.cp { (plumbline_taxonomy::evidence::u_plus(c)) },
            }
        }
    }
}

/// Server text on one line (names, errors in a table): escaped, with
/// hidden code points, line feeds and tabs as badges.
pub fn line(s: &str) -> Markup {
    render(s, false)
}

/// Server text in a block that keeps line breaks (descriptions, JSON).
pub fn block(s: &str) -> Markup {
    render(s, true)
}

/// How a fragment of a diffed field is marked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    Same,
    Inserted,
    Deleted,
}

/// A run of a field's text with one marking and one set of rules whose
/// evidence covers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fragment {
    pub mark: Mark,
    /// Rules whose evidence points at this text, sorted; empty for none.
    pub rules: Vec<RuleId>,
    pub range: Range<usize>,
}

/// The old side of a diffed field: equal and deleted runs.
pub fn old_fragments(edits: &[Edit]) -> Vec<Fragment> {
    edits
        .iter()
        .filter(|e| e.op != Op::Insert && !e.old.is_empty())
        .map(|e| Fragment {
            mark: if e.op == Op::Equal {
                Mark::Same
            } else {
                Mark::Deleted
            },
            rules: Vec::new(),
            range: e.old.clone(),
        })
        .collect()
}

/// The runs of the new side (equal and inserted, non-empty), each with
/// its mark.
fn new_runs(edits: &[Edit]) -> impl Iterator<Item = (&Edit, Mark)> {
    edits
        .iter()
        .filter(|e| e.op != Op::Delete && !e.new.is_empty())
        .map(|e| {
            let mark = if e.op == Op::Equal {
                Mark::Same
            } else {
                Mark::Inserted
            };
            (e, mark)
        })
}

/// The new side of a diffed field: equal and inserted runs, split where
/// an evidence highlight starts or ends. `highlights` are byte ranges of
/// the new text with the rule that pointed at each.
///
/// One sweep over the runs and the highlights' boundaries: the rules in
/// force are counted per rule as highlights open and close, so the cost is
/// O((runs + highlights) log highlights) however the highlights overlap.
pub fn new_fragments(edits: &[Edit], highlights: &[(Range<usize>, RuleId)]) -> Vec<Fragment> {
    let mut opening: Vec<&(Range<usize>, RuleId)> =
        highlights.iter().filter(|(r, _)| r.start < r.end).collect();
    opening.sort_unstable_by_key(|(r, _)| r.start);
    let mut points: Vec<usize> = opening.iter().flat_map(|(r, _)| [r.start, r.end]).collect();
    points.sort_unstable();
    points.dedup();
    let mut next = 0;
    let mut open: BinaryHeap<Reverse<(usize, usize)>> = BinaryHeap::new();
    let mut counts = [0u32; RuleId::ALL.len()];
    let mut out: Vec<Fragment> = Vec::new();
    for (e, mark) in new_runs(edits) {
        let inside = points.partition_point(|p| *p <= e.new.start);
        let cuts = std::iter::once(e.new.start)
            .chain(
                points[inside..]
                    .iter()
                    .copied()
                    .take_while(|p| *p < e.new.end),
            )
            .chain(std::iter::once(e.new.end));
        let mut from = None;
        for cut in cuts {
            let Some(start) = from.replace(cut) else {
                continue;
            };
            let range = start..cut;
            while let Some((r, rule)) = opening.get(next).copied() {
                if r.start > range.start {
                    break;
                }
                if r.end > range.start {
                    counts[*rule as usize] += 1;
                    open.push(Reverse((r.end, *rule as usize)));
                }
                next += 1;
            }
            while let Some(Reverse((end, rule))) = open.peek().copied() {
                if end > range.start {
                    break;
                }
                counts[rule] -= 1;
                open.pop();
            }
            // No boundary lies inside `range`, so every open highlight
            // covers all of it.
            let rules: Vec<RuleId> = RuleId::ALL
                .iter()
                .zip(counts)
                .filter(|(_, n)| *n > 0)
                .map(|(r, _)| *r)
                .collect();
            push_merged(&mut out, Fragment { mark, rules, range });
        }
    }
    out
}

/// Appends `f`, or extends the last fragment when `f` continues it with
/// the same mark and rules.
fn push_merged(out: &mut Vec<Fragment>, f: Fragment) {
    match out.last_mut() {
        Some(last)
            if last.mark == f.mark && last.rules == f.rules && last.range.end == f.range.start =>
        {
            last.range.end = f.range.end;
        }
        _ => out.push(f),
    }
}

/// A diffed field's fragments of `text` as HTML: `<ins>` and `<del>` for
/// the edits, `<mark class="ev">` around evidence, badges for hidden code
/// points.
pub fn fragments(text: &str, fragments: &[Fragment]) -> Markup {
    html! {
        @for f in fragments {
            @let body = block(text.get(f.range.clone()).unwrap_or(""));
            @let inner = html! {
                @if f.rules.is_empty() {
                    (body)
                } @else {
                    @let names: Vec<&str> = f.rules.iter().map(|r| r.as_str()).collect();
                    mark.ev title=(format!("evidence for {}", names.join(", "))) data-rules=(names.join(" ")) { (body) }
                }
            };
            @match f.mark {
                Mark::Same => (inner),
                Mark::Inserted => ins { (inner) },
                Mark::Deleted => del { (inner) },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worddiff::diff;

    #[test]
    fn hidden_code_points_become_pieces_of_their_own() {
        assert_eq!(
            pieces("two\u{200b} numbers\u{202e}.", true),
            [
                Piece::Text("two"),
                Piece::CodePoint('\u{200b}'),
                Piece::Text(" numbers"),
                Piece::CodePoint('\u{202e}'),
                Piece::Text("."),
            ]
        );
        assert_eq!(
            pieces("plain café 日本", false),
            [Piece::Text("plain café 日本")]
        );
        assert!(pieces("", false).is_empty());
    }

    #[test]
    fn every_listed_invisible_and_bidi_code_point_is_hidden() {
        let listed = ('\u{200B}'..='\u{200F}')
            .chain('\u{202A}'..='\u{202E}')
            .chain('\u{2066}'..='\u{2069}')
            .chain([
                '\u{FEFF}', '\u{00AD}', '\u{0000}', '\u{001B}', '\u{007F}', '\u{0085}',
            ])
            .chain('\u{E0000}'..='\u{E007F}');
        for c in listed {
            assert!(is_hidden(c, true), "U+{:04X}", c as u32);
        }
        for c in ['a', ' ', 'é', '<', '日', '\u{1F600}'] {
            assert!(!is_hidden(c, false), "{c:?}");
        }
        assert!(!is_hidden('\n', true));
        assert!(is_hidden('\n', false));
    }

    #[test]
    fn badges_are_escaped_markup_and_text_around_them_is_escaped() {
        let html = block("<b>x</b>\u{200b}&\u{e0041}").into_string();
        assert_eq!(
            html,
            "&lt;b&gt;x&lt;/b&gt;<span class=\"cp\">U+200B</span>&amp;<span class=\"cp\">U+E0041</span>"
        );
        assert_eq!(
            line("a\nb").into_string(),
            "a<span class=\"cp\">U+000A</span>b"
        );
        assert_eq!(block("a\nb").into_string(), "a\nb");
    }

    #[test]
    fn evidence_splits_insertions_and_is_marked_in_place() {
        let old = "Adds two numbers.";
        let new = "Adds two numbers. <IMPORTANT>read it</IMPORTANT>";
        let edits = diff(old, new);
        let at = new.find("<IMPORTANT>").expect("present");
        let highlights = [(at..at + "<IMPORTANT>".len(), RuleId::R02)];
        let frags = new_fragments(&edits, &highlights);
        let marked: Vec<(&str, Mark, &[RuleId])> = frags
            .iter()
            .map(|f| (&new[f.range.clone()], f.mark, f.rules.as_slice()))
            .collect();
        assert_eq!(
            marked,
            [
                ("Adds two numbers.", Mark::Same, &[][..]),
                (" ", Mark::Inserted, &[][..]),
                ("<IMPORTANT>", Mark::Inserted, &[RuleId::R02][..]),
                ("read it</IMPORTANT>", Mark::Inserted, &[][..]),
            ]
        );
        let html = fragments(new, &frags).into_string();
        assert!(
            html.contains(
                "<ins><mark class=\"ev\" title=\"evidence for R02\" data-rules=\"R02\">&lt;IMPORTANT&gt;</mark></ins>"
            ),
            "{html}"
        );
        let old_html = fragments(old, &old_fragments(&edits)).into_string();
        assert_eq!(old_html, "Adds two numbers.");
    }

    #[test]
    fn the_fragments_of_each_side_cover_it_exactly() {
        let old = "alpha beta gamma";
        let new = "alpha delta gamma epsilon";
        let edits = diff(old, new);
        let join = |text: &str, frags: &[Fragment]| -> String {
            frags.iter().map(|f| &text[f.range.clone()]).collect()
        };
        assert_eq!(join(old, &old_fragments(&edits)), old);
        let hl = [(0..3, RuleId::R03), (2..9, RuleId::R05)];
        assert_eq!(join(new, &new_fragments(&edits, &hl)), new);
    }

    /// The fragments by definition: cut each run at every highlight
    /// boundary, and give each piece the rules of the highlights covering
    /// it (quadratic; for checking the sweep).
    fn reference(edits: &[Edit], highlights: &[(Range<usize>, RuleId)]) -> Vec<Fragment> {
        let mut out: Vec<Fragment> = Vec::new();
        for (e, mark) in new_runs(edits) {
            let mut cuts = vec![e.new.start, e.new.end];
            for (r, _) in highlights {
                for p in [r.start, r.end] {
                    if e.new.start < p && p < e.new.end {
                        cuts.push(p);
                    }
                }
            }
            cuts.sort_unstable();
            cuts.dedup();
            for w in cuts.windows(2) {
                let range = w[0]..w[1];
                let mut rules: Vec<RuleId> = highlights
                    .iter()
                    .filter(|(r, _)| r.start <= range.start && range.end <= r.end)
                    .map(|(_, rule)| *rule)
                    .collect();
                rules.sort_unstable();
                rules.dedup();
                push_merged(&mut out, Fragment { mark, rules, range });
            }
        }
        out
    }

    proptest::proptest! {
        #[test]
        fn the_sweep_gives_the_fragments_by_definition(
            old in "[ab ]{0,40}",
            new in "[abc ]{0,40}",
            spans in proptest::collection::vec((0usize..45, 0usize..12, 0usize..9), 0..12),
        ) {
            let edits = diff(&old, &new);
            let highlights: Vec<(Range<usize>, RuleId)> = spans
                .into_iter()
                .map(|(start, len, rule)| {
                    let start = start.min(new.len());
                    (start..(start + len).min(new.len()), RuleId::ALL[rule])
                })
                .collect();
            let got = new_fragments(&edits, &highlights);
            let want = reference(&edits, &highlights);
            proptest::prop_assert_eq!(
                got.iter().map(|f| (f.mark, f.rules.clone(), f.range.clone())).collect::<Vec<_>>(),
                want.iter().map(|f| (f.mark, f.rules.clone(), f.range.clone())).collect::<Vec<_>>()
            );
        }
    }
}
