//! Runs of token bytes: where in a text a rule's match can be.
//!
//! A secret is a run of letters, digits and a few marks (`_-+/=.~`): most
//! rules' regexes ask for one of at least sixteen such bytes ([`RUN`]),
//! a bounded distance after the keyword their match starts with (a key's
//! name, an operator, then the key). Prose and code hold few runs that
//! long. So, for such a rule, a keyword is looked for only just before a
//! long run ([`near`]), and the rule is not tried at a keyword in the
//! middle of a paragraph, where it cannot match.
//!
//! What a regex holds is read from its syntax ([`reach`]), soundly: the
//! figures are lower bounds on every match's runs (and an upper bound on
//! where the first long one starts), never a guess from samples.

use std::ops::Range;

use regex_syntax::hir::{Class, Hir, HirKind};

/// The run a rule's matches must hold to be looked for only near one.
pub const RUN: usize = 16;

/// A byte of a run: an ASCII letter or digit, or one of `_-+/=.~` (the
/// alphabets of hex, base64, base64url, HTTP's token68 and most token
/// formats; gcloud's `1//…` refresh tokens alike).
/// The user's token stores are read as runs of these too ([`super::local`]).
#[inline(always)]
pub fn token(b: u8) -> bool {
    TOKEN[usize::from(b)]
}

static TOKEN: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric()
            || matches!(c, b'_' | b'-' | b'+' | b'/' | b'=' | b'.' | b'~');
        b += 1;
    }
    t
};

/// What every match of a pattern holds, as bounds: lengths, its leading
/// and trailing runs of token bytes, its longest run, and where (at the
/// latest) a run of a given length (`run` in what builds it) starts in
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shape {
    /// Every match is token bytes only.
    full: bool,
    /// The shortest match, and the longest (`None`: no bound).
    min: usize,
    max: Option<usize>,
    /// Every match starts with at least `lead` token bytes, ends with at
    /// least `trail`, and holds a run of at least `inner`.
    lead: usize,
    trail: usize,
    inner: usize,
    /// Every match holds a run of at least `run` token bytes that starts
    /// at most this far into it.
    first: Option<usize>,
}

impl Shape {
    const EMPTY: Shape = Shape {
        full: true,
        min: 0,
        max: Some(0),
        lead: 0,
        trail: 0,
        inner: 0,
        first: None,
    };

    /// One byte of a class: token bytes only, or not.
    fn byte(full: bool, width: usize) -> Shape {
        let run = usize::from(full);
        Shape {
            full,
            min: 1,
            max: Some(width),
            lead: run,
            trail: run,
            inner: run,
            first: None,
        }
    }

    fn literal(bytes: &[u8], least: usize) -> Shape {
        let lead = bytes.iter().take_while(|&&b| token(b)).count();
        let trail = bytes.iter().rev().take_while(|&&b| token(b)).count();
        let (mut inner, mut first, mut run) = (0, None, 0);
        for (i, &b) in bytes.iter().enumerate() {
            run = if token(b) { run + 1 } else { 0 };
            inner = inner.max(run);
            if run == least && first.is_none() {
                first = Some(i + 1 - least);
            }
        }
        Shape {
            full: lead == bytes.len(),
            min: bytes.len(),
            max: Some(bytes.len()),
            lead,
            trail,
            inner,
            first,
        }
    }

    /// `self` then `next`.
    fn then(self, next: Shape, run: usize) -> Shape {
        let (a, b) = (self, next);
        let lead = if a.full { a.min + b.lead } else { a.lead };
        let trail = if b.full { b.min + a.trail } else { b.trail };
        let joined = a.trail + b.lead;
        // A run across the seam starts where `a`'s trailing run does: at
        // most `a.max - a.trail` in.
        let across = (joined >= run)
            .then(|| a.max.map(|m| m.saturating_sub(a.trail)))
            .flatten();
        let after = b.first.and_then(|o| a.max.map(|m| m + o));
        let at_start = (lead >= run).then_some(0);
        Shape {
            full: a.full && b.full,
            min: a.min + b.min,
            max: a.max.zip(b.max).map(|(x, y)| x + y),
            lead,
            trail,
            inner: a.inner.max(b.inner).max(joined).max(lead).max(trail),
            first: [at_start, a.first, across, after]
                .into_iter()
                .flatten()
                .min(),
        }
    }

    /// One of `branches`.
    fn either(branches: impl Iterator<Item = Shape>) -> Shape {
        let mut out: Option<Shape> = None;
        for s in branches {
            out = Some(match out {
                None => s,
                Some(o) => Shape {
                    full: o.full && s.full,
                    min: o.min.min(s.min),
                    max: o.max.zip(s.max).map(|(x, y)| x.max(y)),
                    lead: o.lead.min(s.lead),
                    trail: o.trail.min(s.trail),
                    inner: o.inner.min(s.inner),
                    first: o.first.zip(s.first).map(|(x, y)| x.max(y)),
                },
            });
        }
        // No branch: matches nothing; say nothing of it.
        out.unwrap_or(Shape {
            full: false,
            ..Shape::EMPTY
        })
    }

    /// `sub` repeated at least `min` times, at most `max`.
    fn repeated(sub: Shape, min: u32, max: Option<u32>, run: usize) -> Shape {
        let optional = |extra: Option<u32>| Shape {
            full: sub.full,
            max: extra.and_then(|n| sub.max.map(|m| m * n as usize)),
            ..Shape::EMPTY
        };
        if min == 0 {
            return optional(max);
        }
        let mut out = sub;
        for _ in 1..min {
            out = out.then(sub, run);
        }
        if max != Some(min) {
            out = out.then(optional(max.map(|m| m - min)), run);
        }
        out
    }

    fn of(hir: &Hir, run: usize) -> Shape {
        match hir.kind() {
            HirKind::Empty | HirKind::Look(_) => Shape::EMPTY,
            HirKind::Literal(l) => Shape::literal(&l.0, run),
            HirKind::Class(Class::Bytes(c)) => Shape::byte(
                c.ranges().iter().all(|r| (r.start()..=r.end()).all(token)),
                1,
            ),
            HirKind::Class(Class::Unicode(c)) => Shape::byte(
                c.ranges()
                    .iter()
                    .all(|r| (r.start()..=r.end()).all(|ch| ch.is_ascii() && token(ch as u8))),
                4,
            ),
            HirKind::Repetition(r) => Shape::repeated(Shape::of(&r.sub, run), r.min, r.max, run),
            HirKind::Capture(c) => Shape::of(&c.sub, run),
            HirKind::Concat(parts) => parts
                .iter()
                .fold(Shape::EMPTY, |s, p| s.then(Shape::of(p, run), run)),
            HirKind::Alternation(alts) => Shape::either(alts.iter().map(|a| Shape::of(a, run))),
        }
    }
}

/// How far into any match of `hir` a run of at least [`RUN`] token bytes
/// has started, at the latest; `None` when a match need not hold one (or
/// it could start anywhere).
pub fn reach(hir: &Hir) -> Option<usize> {
    Shape::of(hir, RUN).first
}

/// For a rule whose matches hold a run of [`RUN`] a bounded way in
/// ([`reach`], kept as [`Gate::first`]): the longest run (at least
/// [`RUN`]) that every match holds a bounded way in, and how far in it
/// starts at the latest. A rule is tried at a place only where the text
/// has a run that long that far on ([`Gate::opens`]): `jira_update_issue`,
/// a tool's name in a description, is a run of 17 after the keyword
/// `jira`, but Atlassian's token rule asks for 24.
pub fn gate(hir: &Hir) -> Option<Gate> {
    let shape = Shape::of(hir, RUN);
    let first = shape.first?;
    let mut gate = Gate {
        first,
        run: RUN,
        reach: first,
    };
    // The longest such run, by halving between what holds and what
    // every match holds somewhere (only a length whose bound is read is
    // taken, so the search need not be exact to be sound).
    let (mut lo, mut hi) = (RUN, shape.inner.max(RUN));
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        match Shape::of(hir, mid).first {
            Some(reach) => {
                gate = Gate {
                    run: mid,
                    reach,
                    ..gate
                };
                lo = mid;
            }
            None => hi = mid - 1,
        }
    }
    Some(gate)
}

/// Every match holds a run of [`RUN`] token bytes that starts at most
/// `first` into it (where its keywords are looked for, [`near`]), and one
/// of at least `run` that starts at most `reach` into it (where it is
/// tried, [`Gate::opens`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gate {
    pub first: usize,
    pub run: usize,
    pub reach: usize,
}

impl Gate {
    /// Whether a match can start at `at`, given the text's runs `long`
    /// (in order; all of at least [`Gate::run`] among them): whether one
    /// of at least `run` starts at most `reach` after `at` and goes on at
    /// least `run` past it (the match's run is part of such a run).
    pub fn opens(&self, long: &[Range<usize>], at: usize) -> bool {
        let from = long.partition_point(|r| r.end < at + self.run);
        long[from..]
            .iter()
            .take_while(|r| r.start <= at + self.reach)
            .any(|r| r.len() >= self.run)
    }
}

/// The runs of token bytes in `text` at least `least` long (each whole),
/// in order; appended to `out`.
///
/// The text is read 64 bytes at a time as a mask of its token bytes
/// ([`mask`], which the compiler makes a few vector instructions).
pub fn runs(text: &[u8], least: usize, out: &mut Vec<Range<usize>>) {
    let least = least.max(1);
    let mut add = |run: Range<usize>| out.push(run);
    // The length of the run that goes on into the word from the one
    // before. Each word asks a few questions whose answer is nearly
    // always no (a branch predicted right costs nothing): whether it is
    // all token bytes, whether the run it starts with (with the one going
    // on) is long, whether one inside it is.
    let mut carry = 0;
    let mut word = 0;
    while word < text.len() {
        let width = (text.len() - word).min(64);
        // Bits past the text's end (of a last, short word) are not set.
        let m = mask(&text[word..word + width]);
        if m == u64::MAX {
            carry += 64;
            word += 64;
            continue;
        }
        // Where the run the word starts with (perhaps empty) ends.
        let lead = m.trailing_ones() as usize;
        if carry + lead >= least {
            add(word - carry..word + lead);
        }
        // The run the word ends with goes on into the next (unless the
        // text ends here, where the runs inside see it).
        let tail = if width == 64 {
            m.leading_ones() as usize
        } else {
            0
        };
        carry = tail;
        // The runs in between: bit i of `long` is set where the `least`
        // bits from i on are.
        let inner = m & (u64::MAX << lead) & (u64::MAX >> tail);
        // (The steps depend on `least` alone: the loop's branch is
        // predicted.)
        let mut long = if least > 64 { 0 } else { inner };
        let mut covered = 1;
        while covered < least.min(65) {
            let shift = covered.min(least - covered);
            long &= long >> shift;
            covered += shift;
        }
        if long != 0 {
            let mut at = lead;
            while at < 64 {
                let zeros = ((!inner) >> at).trailing_ones() as usize;
                at += zeros;
                if at >= 64 {
                    break;
                }
                let ones = (inner >> at).trailing_ones() as usize;
                if ones >= least {
                    add(word + at..word + at + ones);
                }
                at += ones;
            }
        }
        word += width;
    }
    if carry >= least {
        add(text.len() - carry..text.len());
    }
}

/// The places where a match that holds a run of `least` token bytes (a
/// rule's, [`RUN`]) starting at most `reach` into it can start, given the
/// text's `runs` ([`runs`], of `least` or less): from `reach` before each
/// run at least `least` long (the match's run is part of one) to the
/// run's end. In order, not overlapping; appended to `out`.
pub fn near(runs: &[Range<usize>], least: usize, reach: usize, out: &mut Vec<Range<usize>>) {
    for run in runs.iter().filter(|r| r.len() >= least) {
        let start = run.start.saturating_sub(reach);
        match out.last_mut() {
            Some(last) if last.end >= start => last.end = run.end,
            _ => out.push(start..run.end),
        }
    }
}

/// Which of up to 64 bytes are token bytes: bit `i` for `bytes[i]`.
#[inline(always)]
fn mask(bytes: &[u8]) -> u64 {
    crate::mask::mask(bytes, |b| {
        let letter = (b | 0x20).wrapping_sub(b'a') < 26;
        // `-`, `.`, `/` and the digits are 0x2d..=0x39.
        let digit_or_mark = b.wrapping_sub(b'-') < 13;
        let mark = (b == b'_') | (b == b'+') | (b == b'=') | (b == b'~');
        letter | digit_or_mark | mark
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hir(re: &str) -> Hir {
        regex_syntax::ParserBuilder::new()
            .unicode(false)
            .utf8(false)
            .build()
            .parse(re)
            .unwrap()
    }

    #[test]
    fn a_gate_is_the_longest_run_in_reach() {
        let gate = |re: &str| gate(&hir(re)).map(|g| (g.run, g.reach));
        // `=` is a token byte: the key's run starts at the operator.
        assert_eq!(gate(r"key =([a-z0-9]{32})"), Some((33, 4)));
        assert_eq!(gate(r"ghp_[0-9a-zA-Z]{36}"), Some((40, 0)));
        // The shorter of two branches' runs, the later of their starts.
        assert_eq!(gate(r"k (?:[a-z]{20}|xx [a-z]{16})"), Some((16, 5)));
        assert_eq!(gate(r"k (?:[a-z]{24}|xx [a-z]{30})"), Some((24, 5)));
        // Atlassian's token after a name and an operator: 24, not 16.
        assert_eq!(
            gate(r#"(?i)jira[ \t\w.-]{0,20}[\s'"]{0,3}(?:=|:)[\x60'"\s=]{0,5}([a-z0-9]{20}[a-f0-9]{4})"#)
                .map(|g| g.0),
            Some(24)
        );
        assert_eq!(gate(r"tok [a-z]{15}"), None);
    }

    /// [`Gate::opens`] against every run, one by one.
    #[test]
    fn a_gate_opens_where_a_run_long_enough_is_in_reach() {
        let mut draw = crate::testing::draws(5);
        for _ in 0..3_000 {
            let mut long = Vec::new();
            let mut at = draw(20);
            for _ in 0..draw(6) {
                let len = 16 + draw(30);
                long.push(at..at + len);
                at += len + 1 + draw(40);
            }
            let g = Gate {
                first: 0,
                run: 16 + draw(20),
                reach: draw(50),
            };
            for place in 0..at + 10 {
                let want = long.iter().any(|r| {
                    r.len() >= g.run && r.start <= place + g.reach && r.end >= place + g.run
                });
                assert_eq!(g.opens(&long, place), want, "{g:?} {long:?} {place}");
            }
        }
    }

    #[test]
    fn reach_is_read_from_the_syntax() {
        // The run starts at the operator (`=` is a token byte).
        assert_eq!(reach(&hir(r"(?i)key\s*=\s*([a-z0-9]{32})")), None);
        assert_eq!(reach(&hir(r"(?i)key =([a-z0-9]{32})")), Some(4));
        assert_eq!(reach(&hir(r"(?i)key[ \t]{0,3}=([a-z0-9]{32})")), Some(6));
        // Token bytes on both sides of the seam join into one run.
        assert_eq!(reach(&hir(r"ghp_[0-9a-zA-Z]{36}")), Some(0));
        assert_eq!(reach(&hir(r"ab [a-z]{8}[0-9]{8}")), Some(3));
        // Too short, or unbounded before it: nothing.
        assert_eq!(reach(&hir(r"tok [a-z]{15}")), None);
        assert_eq!(reach(&hir(r"tok .* [a-z]{20}")), None);
        // A branch without a run says nothing for all.
        assert_eq!(reach(&hir(r"k (?:[a-z]{20}|x y)")), None);
        assert_eq!(reach(&hir(r"k (?:[a-z]{20}|xx [a-z]{16})")), Some(5));
    }

    /// [`runs`] and [`near`] of a text.
    fn near_of(text: &[u8], least: usize, reach: usize) -> Vec<Range<usize>> {
        let (mut long, mut out) = (Vec::new(), Vec::new());
        runs(text, least, &mut long);
        near(&long, least, reach, &mut out);
        out
    }

    /// [`near_of`] a byte at a time.
    fn naive(text: &[u8], least: usize, reach: usize) -> Vec<Range<usize>> {
        let mut out: Vec<Range<usize>> = Vec::new();
        let mut start = None;
        for i in 0..=text.len() {
            let t = i < text.len() && token(text[i]);
            match (t, start) {
                (true, None) => start = Some(i),
                (false, Some(s)) => {
                    if i - s >= least {
                        let from = s.saturating_sub(reach);
                        match out.last_mut() {
                            Some(last) if last.end >= from => last.end = i,
                            _ => out.push(from..i),
                        }
                    }
                    start = None;
                }
                _ => {}
            }
        }
        out
    }

    #[test]
    fn the_mask_is_the_token_table() {
        for b in 0..=255u8 {
            let mut bytes = [b' '; 64];
            bytes[7] = b;
            assert_eq!(mask(&bytes) == 1 << 7, token(b), "{b}");
        }
    }

    #[test]
    fn near_is_a_byte_at_a_time_count() {
        let mut next = crate::testing::draws(0x9e37_79b9_7f4a_7c15u64);
        for round in 0..3000 {
            // Runs of every length around RUN and 64, at every place.
            let mut text = Vec::new();
            let len = next(400);
            while text.len() < len {
                let run = match next(4) {
                    0 => next(20),
                    1 => RUN - 2 + next(5),
                    2 => 60 + next(10),
                    _ => next(150),
                };
                text.extend((0..run).map(|_| b"aZ9_-+/=."[next(9)]));
                text.extend((0..1 + next(3)).map(|_| b" \n\"',:@"[next(7)]));
            }
            text.truncate(len);
            let reach = [0, 5, 55, 200][round % 4];
            let least = [RUN, 1, 10, 22, 63, 64, 65, 100][round % 8];
            // Runs of a lower floor, then the long ones among them.
            let floor = least.min([least, 1, 7][round % 3]);
            let (mut long, mut out) = (Vec::new(), Vec::new());
            runs(&text, floor, &mut long);
            near(&long, least, reach, &mut out);
            assert_eq!(
                out,
                naive(&text, least, reach),
                "{least} {reach} {:?}",
                String::from_utf8_lossy(&text)
            );
        }
    }

    #[test]
    fn near_finds_every_long_run() {
        let text = b"a short text, then ghp_abcdefghijklmnop1234 and more words here";
        let at = text.windows(4).position(|w| w == b"ghp_").unwrap();
        assert_eq!(near_of(text, RUN, 4), vec![at - 4..at + 24]);
        // Runs at every place and length, against a byte-at-a-time count.
        for len in [0, 1, 15, 16, 17, 31, 32, 33, 40] {
            for pad in 0..40 {
                let mut text = vec![b' '; pad];
                text.extend(std::iter::repeat_n(b'x', len));
                text.extend(b" tail");
                let out = near_of(&text, RUN, 0);
                let want: Vec<Range<usize>> =
                    (len >= RUN).then_some(pad..pad + len).into_iter().collect();
                assert_eq!(out, want, "{len} at {pad}");
            }
        }
    }
}
