//! Pieces of the user's own secrets, kept as fingerprints, so that a text
//! holding any run of [`WINDOW`] bytes of a secret piece (a quoted
//! fragment, one line of a key), or a whole piece shorter than that but
//! at least [`MIN_PIECE`] long, is found, while the secret itself is not
//! kept. The keys are drawn per process, and the set lives in memory only.
//!
//! A text is read in one pass, one position in every [`STRIDE`]: there,
//! its next 8 bytes (one load) are hashed with one multiplication to a bit
//! of a filter; only where the bit is set (a few per cent of positions) is
//! the [`PROBE`] bytes from there hashed whole and looked up. What is kept
//! is a keyed hash of every run of [`PROBE`] bytes of each long piece, and
//! of each short piece whole, found by its first [`STRIDE`] 8-byte runs;
//! the filter holds the first 8 bytes of every run kept and those of each
//! short piece. A run of [`WINDOW`] bytes of a piece holds, at one of its
//! first [`STRIDE`] positions, a position read, and from there [`PROBE`]
//! bytes of the piece (`PROBE + STRIDE - 1 == WINDOW`); a short piece
//! holds a position read at one of its first [`STRIDE`] bytes, each
//! marked. So nothing held is passed over, at a third of the reads. A run
//! of [`PROBE`] to [`WINDOW`] bytes is found when it starts at a position
//! read; a hash collision could at worst refuse a benign call, never let
//! a secret through.
//!
//! Most pieces are tokens (a key's lines, access keys, passwords of
//! letters and digits): made of [`runs::token`] bytes alone. A text holds
//! such a piece's run only inside a run of token bytes as long, and prose
//! holds few of those. So the grams of all-token runs and pieces have
//! their own filter, read only inside the text's runs of at least
//! [`PROBE`] (or the shortest all-token piece) token bytes; the others
//! have another, read everywhere, and not at all when there are none.
//! Both read the same positions (every [`STRIDE`]-th of the text): what is
//! found, and which match is found first, are the same as with one filter
//! read everywhere.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::runs;

/// The run of a secret a text must hold to match.
pub const WINDOW: usize = 24;
/// A text is read at one position in this many.
pub const STRIDE: usize = 3;
/// The run hashed at a position read.
pub const PROBE: usize = WINDOW + 1 - STRIDE;
/// The shortest secret piece kept (a password of fewer bytes is not
/// told from ordinary words).
pub const MIN_PIECE: usize = 10;
const _: () = assert!(MIN_PIECE >= GRAM + STRIDE - 1 && PROBE >= 16 && PROBE <= WINDOW);

/// The bytes a position's filter bit is drawn from.
const GRAM: usize = 8;

/// The filter's size, in bits (a power of two): 32 KiB, which stays in
/// a core's first-level cache; a typical home's few thousand fingerprints
/// set a few per cent of it.
const FILTER_BITS: usize = 1 << 18;

/// The keys are hashes already: used as they are.
#[derive(Default)]
struct Identity(u64);

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type Map<V> = HashMap<u64, V, BuildHasherDefault<Identity>>;

/// A short piece, found by the [`GRAM`] bytes at `offset` (one of its
/// first [`STRIDE`]) and checked whole.
#[derive(Clone)]
struct Short {
    offset: usize,
    len: usize,
    hash: u64,
    source: u16,
}

/// Fingerprints of secret pieces, each tagged with the source it came
/// from.
#[derive(Clone)]
pub struct Fingerprints {
    /// Keys of the gram, probe and whole-piece hashes.
    keys: [u64; 4],
    /// The hash of every run of [`PROBE`] bytes of the long pieces.
    windows: Map<u16>,
    /// By the hash of their [`GRAM`] bytes at each of their first
    /// [`STRIDE`] offsets.
    shorts: Map<Vec<Short>>,
    /// One bit per gram hash (its top bits): the first gram of every
    /// probe kept, and the first [`STRIDE`] of every short piece; of
    /// those all of token bytes, read inside the text's long runs alone.
    tokens: Vec<u64>,
    /// The same of the others, read everywhere (empty while there are
    /// none).
    others: Vec<u64>,
    /// The shortest run of token bytes an all-token match is part of
    /// (`usize::MAX` while there is none).
    least_run: usize,
}

impl Default for Fingerprints {
    fn default() -> Self {
        Fingerprints::new()
    }
}

/// The odd constant of Fibonacci hashing (2^64 / φ).
const PHI: u64 = 0x9e37_79b9_7f4a_7c15;

/// Eight bytes at `at` (which must have them), as one number.
#[inline(always)]
fn load(text: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&text[at..at + 8]);
    u64::from_le_bytes(word)
}

#[inline(always)]
fn mix(x: u64, key: u64) -> u64 {
    let x = (x ^ key).wrapping_mul(PHI);
    x ^ (x >> 29)
}

impl Fingerprints {
    pub fn new() -> Fingerprints {
        use std::hash::BuildHasher;
        let state = std::collections::hash_map::RandomState::new();
        let key = |n: u64| {
            let mut h = state.build_hasher();
            h.write_u64(n);
            h.finish()
        };
        Fingerprints {
            keys: [key(1), key(2), key(3), key(4)],
            windows: Map::default(),
            shorts: Map::default(),
            tokens: vec![0; FILTER_BITS / 64],
            others: Vec::new(),
            least_run: usize::MAX,
        }
    }

    /// How many fingerprints are kept (a short piece counts once).
    pub fn len(&self) -> usize {
        self.windows.len()
            + self
                .shorts
                .values()
                .flatten()
                .filter(|s| s.offset == 0)
                .count()
    }

    pub fn is_empty(&self) -> bool {
        self.windows.is_empty() && self.shorts.is_empty()
    }

    /// The hash of the [`GRAM`] bytes at `at`: the filter's bit is its top
    /// bits, and short pieces are found by it.
    #[inline(always)]
    fn gram(&self, text: &[u8], at: usize) -> u64 {
        (load(text, at) ^ self.keys[0]).wrapping_mul(PHI)
    }

    /// The hash of the [`PROBE`] bytes at `at` (three loads, the last
    /// overlapping the second).
    #[inline(always)]
    fn window(&self, text: &[u8], at: usize) -> u64 {
        let a = mix(load(text, at), self.keys[1]);
        let b = mix(load(text, at + 8) ^ a.rotate_left(23), self.keys[2]);
        mix(load(text, at + PROBE - 8) ^ b.rotate_left(17), self.keys[3])
    }

    /// The hash of a whole (short) piece.
    fn hash(&self, bytes: &[u8]) -> u64 {
        let mut h = mix(bytes.len() as u64, self.keys[3]);
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            h = mix(u64::from_le_bytes(word) ^ h.rotate_left(31), self.keys[1]);
        }
        h
    }

    #[inline(always)]
    fn bit(g: u64) -> (usize, u64) {
        let i = (g >> (64 - FILTER_BITS.trailing_zeros())) as usize;
        (i / 64, 1 << (i % 64))
    }

    /// Marks a gram of a run (or short piece) `run`: in the filter of
    /// all-token runs, or the other.
    fn mark(&mut self, g: u64, run: &[u8]) {
        let (word, bit) = Self::bit(g);
        if run.iter().all(|&b| runs::token(b)) {
            self.tokens[word] |= bit;
            self.least_run = self.least_run.min(run.len());
        } else {
            if self.others.is_empty() {
                self.others = vec![0; FILTER_BITS / 64];
            }
            self.others[word] |= bit;
        }
    }

    #[inline(always)]
    fn marked(filter: &[u64], g: u64) -> bool {
        let (word, bit) = Self::bit(g);
        filter[word] & bit != 0
    }

    /// Keeps the fingerprints of one secret piece (a value, a line of a
    /// key file) of `source`; a piece shorter than [`MIN_PIECE`] is not
    /// kept. Whether it was.
    pub fn add(&mut self, piece: &[u8], source: u16) -> bool {
        let piece = piece.trim_ascii();
        if piece.len() < MIN_PIECE {
            return false;
        }
        if piece.len() < WINDOW {
            let whole = self.hash(piece);
            // MIN_PIECE >= GRAM + STRIDE - 1: each offset has its gram.
            for offset in 0..STRIDE {
                let g = self.gram(piece, offset);
                self.mark(g, piece);
                self.shorts.entry(g).or_default().push(Short {
                    offset,
                    len: piece.len(),
                    hash: whole,
                    source,
                });
            }
            return true;
        }
        for at in 0..=piece.len() - PROBE {
            let (g, w) = (self.gram(piece, at), self.window(piece, at));
            self.mark(g, &piece[at..at + PROBE]);
            self.windows.entry(w).or_insert(source);
        }
        true
    }

    /// The source of a run of a kept secret that `text` holds, if any.
    pub fn found_in(&self, text: &[u8]) -> Option<u16> {
        let mut long = Vec::new();
        if self.least_run != usize::MAX {
            runs::runs(text, self.least_run, &mut long);
        }
        self.found_in_runs(text, &long)
    }

    /// The shortest run of token bytes a text must hold for an all-token
    /// piece to be found in it ([`Fingerprints::found_in_runs`]).
    pub fn least_run(&self) -> usize {
        self.least_run
    }

    /// [`Fingerprints::found_in`], given the text's runs of token bytes
    /// ([`runs::runs`], at least those of [`Fingerprints::least_run`]).
    pub fn found_in_runs(&self, text: &[u8], long: &[std::ops::Range<usize>]) -> Option<u16> {
        if self.is_empty() || text.len() < MIN_PIECE {
            return None;
        }
        // The first match in the text's long runs, by the all-token
        // filter; then, before it, by the other, everywhere.
        let mut first = None;
        'runs: for run in long.iter().filter(|r| r.len() >= self.least_run) {
            let mut at = run.start.next_multiple_of(STRIDE);
            while at + GRAM <= run.end {
                if let Some(source) = self.probe(&self.tokens, text, at) {
                    first = Some((at, source));
                    break 'runs;
                }
                at += STRIDE;
            }
        }
        if !self.others.is_empty() {
            let end = first.map_or(text.len(), |(at, _)| at);
            let mut at = 0;
            while at < end && at + GRAM <= text.len() {
                if let Some(source) = self.probe(&self.others, text, at) {
                    return Some(source);
                }
                at += STRIDE;
            }
        }
        first.map(|(_, source)| source)
    }

    /// The source of a kept run or piece read at `at` (a position read),
    /// when `filter` has its gram.
    #[inline(always)]
    fn probe(&self, filter: &[u64], text: &[u8], at: usize) -> Option<u16> {
        let g = self.gram(text, at);
        if !Self::marked(filter, g) {
            return None;
        }
        if at + PROBE <= text.len() {
            if let Some(&source) = self.windows.get(&self.window(text, at)) {
                return Some(source);
            }
        }
        self.shorts
            .get(&g)
            .and_then(|candidates| {
                candidates.iter().find(|c| {
                    at.checked_sub(c.offset)
                        .and_then(|start| text.get(start..start + c.len))
                        .is_some_and(|piece| self.hash(piece) == c.hash)
                })
            })
            .map(|c| c.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Fingerprints {
        /// [`Fingerprints::found_in`] by one filter (both in one), read
        /// everywhere.
        fn found_everywhere(&self, text: &[u8]) -> Option<u16> {
            if self.is_empty() || text.len() < MIN_PIECE {
                return None;
            }
            let mut both = self.tokens.clone();
            for (b, o) in both.iter_mut().zip(&self.others) {
                *b |= o;
            }
            (0..)
                .step_by(STRIDE)
                .take_while(|at| at + GRAM <= text.len())
                .find_map(|at| self.probe(&both, text, at))
        }
    }

    #[test]
    fn reading_token_runs_alone_finds_what_reading_everywhere_does() {
        let mut next = crate::testing::draws(0x2545_f491_4f6c_dd1du64);
        // Token bytes mostly, and some that are not (a space, `@`, a
        // quote, a colon, a line end).
        let byte = |next: &mut dyn FnMut(usize) -> usize| {
            if next(6) == 0 {
                b" @\":\n"[next(5)]
            } else {
                b"aZ9_-+/=.kQ3"[next(12)]
            }
        };
        let (mut found, mut rounds) = (0, 0);
        for round in 0..400 {
            let mut f = Fingerprints::new();
            let mut secrets: Vec<Vec<u8>> = Vec::new();
            for source in 0..1 + next(4) {
                let len = MIN_PIECE + next(60);
                let piece: Vec<u8> = if round % 3 == 0 {
                    (0..len).map(|_| b"aZ9_-+/=.kQ3"[next(12)]).collect()
                } else {
                    (0..len).map(|_| byte(&mut next)).collect()
                };
                f.add(&piece, source as u16);
                secrets.push(piece.trim_ascii().to_vec());
            }
            for _ in 0..20 {
                let mut text: Vec<u8> = (0..next(40)).map(|_| byte(&mut next)).collect();
                for _ in 0..1 + next(3) {
                    let s = &secrets[next(secrets.len())];
                    if s.is_empty() {
                        continue;
                    }
                    let from = next(s.len());
                    let to = from + next(s.len() - from + 1);
                    text.extend_from_slice(&s[from..to]);
                    text.extend((0..next(30)).map(|_| byte(&mut next)));
                }
                let want = f.found_everywhere(&text);
                assert_eq!(
                    f.found_in(&text),
                    want,
                    "{:?}",
                    String::from_utf8_lossy(&text)
                );
                found += usize::from(want.is_some());
                rounds += 1;
            }
        }
        // Both ways find something often, and not always.
        assert!(found * 5 > rounds && found < rounds, "{found} of {rounds}");
    }

    #[test]
    fn any_window_of_a_secret_is_found_with_its_source_and_little_else() {
        let mut f = Fingerprints::new();
        let key = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj";
        f.add(key.as_bytes(), 0);
        f.add(b"hunter2-correct-horse", 1);
        f.add(b"short", 2);
        assert_eq!(f.found_in(format!("note: {key}").as_bytes()), Some(0));
        // Every run of WINDOW bytes, wherever it starts in the text (the
        // positions read are every STRIDE-th): found. A shorter run
        // than PROBE: never.
        for pad in 0..2 * STRIDE {
            let before = "x".repeat(pad);
            for at in 0..=key.len() - WINDOW {
                let run = &key[at..at + WINDOW];
                assert_eq!(f.found_in(format!("{before}{run}").as_bytes()), Some(0));
                assert_eq!(
                    f.found_in(format!("{before}{run} and on").as_bytes()),
                    Some(0)
                );
                let short = &key[at..at + PROBE - 1];
                assert_eq!(f.found_in(format!("{before}{short} ok").as_bytes()), None);
            }
            let said = format!("{before}the password is hunter2-correct-horse, ok");
            assert_eq!(f.found_in(said.as_bytes()), Some(1), "{said}");
            assert_eq!(
                f.found_in(format!("{before}hunter2-correct-hors").as_bytes()),
                None
            );
            assert_eq!(
                f.found_in(format!("{before}unter2-correct-horse").as_bytes()),
                None
            );
        }
        assert_eq!(f.found_in(b"short and sweet"), None);
        assert_eq!(
            f.found_in("SELECT * FROM orders WHERE id = 42".as_bytes()),
            None
        );
        // Another process's fingerprints are of another key.
        let g = Fingerprints::new();
        assert_ne!(f.hash(b"abc"), g.hash(b"abc"));
        assert_eq!(f.len(), key.len() + 1 - PROBE + 1);
    }
}
