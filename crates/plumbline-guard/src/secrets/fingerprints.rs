//! Pieces of the user's own secrets, kept as fingerprints: a keyed rolling
//! hash of every window of [`WINDOW`] bytes of each secret piece, and of
//! each whole piece shorter than that but at least [`MIN_PIECE`] long, so
//! that a text holding any such run of a secret (a quoted fragment, one
//! line of a key) is found, while the secret itself is not kept. The key
//! (the hash's base) is drawn per process, and the set lives in memory
//! only.
//!
//! A text is read in one pass per window length (two: [`WINDOW`] and
//! [`MIN_PIECE`], the start of a short piece), each position costing a
//! multiply-add and one bit of a filter; only a position whose bit is set
//! is looked up. The arithmetic is modulo 2^64 with a random odd base:
//! the inputs known to collide under every such base (Thue–Morse strings)
//! are thousands of bytes long, and a window is 24; a collision could at
//! worst refuse a benign call, never let a secret through.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// The run of a secret a text must hold to match.
pub const WINDOW: usize = 24;
/// The shortest secret piece kept (a password of fewer bytes is not
/// told from ordinary words).
pub const MIN_PIECE: usize = 10;

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

/// A short piece, found by its first [`MIN_PIECE`] bytes and checked
/// whole.
struct Short {
    len: usize,
    hash: u64,
    source: u16,
}

/// Fingerprints of secret pieces, each tagged with the source it came
/// from.
pub struct Fingerprints {
    base: u64,
    /// `base^(WINDOW - 1)` and `base^(MIN_PIECE - 1)`.
    top_window: u64,
    top_short: u64,
    windows: Map<u16>,
    shorts: Map<Vec<Short>>,
    /// One bit per hash (its top bits), windows and short starts alike.
    filter: Vec<u64>,
}

impl Default for Fingerprints {
    fn default() -> Self {
        Fingerprints::new()
    }
}

impl Fingerprints {
    pub fn new() -> Fingerprints {
        use std::hash::BuildHasher;
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(0x9e37_79b9_7f4a_7c15);
        let base = h.finish() | 1 | (1 << 40);
        let power = |n: usize| (0..n).fold(1u64, |p, _| p.wrapping_mul(base));
        Fingerprints {
            base,
            top_window: power(WINDOW - 1),
            top_short: power(MIN_PIECE - 1),
            windows: Map::default(),
            shorts: Map::default(),
            filter: vec![0; FILTER_BITS / 64],
        }
    }

    /// How many fingerprints are kept.
    pub fn len(&self) -> usize {
        self.windows.len() + self.shorts.values().map(Vec::len).sum::<usize>()
    }

    pub fn is_empty(&self) -> bool {
        self.windows.is_empty() && self.shorts.is_empty()
    }

    fn hash(&self, bytes: &[u8]) -> u64 {
        bytes.iter().fold(0u64, |h, &b| {
            h.wrapping_mul(self.base).wrapping_add(u64::from(b) + 1)
        })
    }

    fn bit(h: u64) -> (usize, u64) {
        let i = (h >> (64 - FILTER_BITS.trailing_zeros())) as usize;
        (i / 64, 1 << (i % 64))
    }

    fn mark(&mut self, h: u64) {
        let (word, bit) = Self::bit(h);
        self.filter[word] |= bit;
    }

    fn marked(&self, h: u64) -> bool {
        let (word, bit) = Self::bit(h);
        self.filter[word] & bit != 0
    }

    /// Keeps the fingerprints of one secret piece (a value, a line of a
    /// key file) of `source`; a piece shorter than [`MIN_PIECE`] is not
    /// kept.
    pub fn add(&mut self, piece: &[u8], source: u16) {
        let piece = piece.trim_ascii();
        if piece.len() < MIN_PIECE {
            return;
        }
        if piece.len() < WINDOW {
            let start = self.hash(&piece[..MIN_PIECE]);
            let whole = self.hash(piece);
            self.mark(start);
            self.shorts.entry(start).or_default().push(Short {
                len: piece.len(),
                hash: whole,
                source,
            });
            return;
        }
        let mut hashes = Vec::with_capacity(piece.len() + 1 - WINDOW);
        self.roll(piece, WINDOW, self.top_window, &mut |_, h| {
            hashes.push(h);
            false
        });
        for h in hashes {
            self.mark(h);
            self.windows.entry(h).or_insert(source);
        }
    }

    /// Calls `each` with the start and hash of every window of `len` bytes
    /// of `text`, in order, until it returns true; whether it did.
    fn roll(
        &self,
        text: &[u8],
        len: usize,
        top: u64,
        each: &mut dyn FnMut(usize, u64) -> bool,
    ) -> bool {
        if text.len() < len {
            return false;
        }
        let mut h = self.hash(&text[..len]);
        if each(0, h) {
            return true;
        }
        for i in len..text.len() {
            let out = u64::from(text[i - len]) + 1;
            h = h
                .wrapping_sub(out.wrapping_mul(top))
                .wrapping_mul(self.base)
                .wrapping_add(u64::from(text[i]) + 1);
            if each(i + 1 - len, h) {
                return true;
            }
        }
        false
    }

    /// The source of a run of a kept secret that `text` holds, if any: one
    /// pass, both window lengths rolled together.
    pub fn found_in(&self, text: &[u8]) -> Option<u16> {
        let (windows, shorts) = (!self.windows.is_empty(), !self.shorts.is_empty());
        if (!windows || text.len() < WINDOW) && (!shorts || text.len() < MIN_PIECE) {
            return None;
        }
        let b = self.base;
        // What a byte leaving a window weighs once the window has moved on:
        // base^WINDOW and base^MIN_PIECE, one multiplication each per byte.
        let (out_w, out_s) = (
            self.top_window.wrapping_mul(b),
            self.top_short.wrapping_mul(b),
        );
        let (mut w, mut s) = (0u64, 0u64);
        for (i, &byte) in text.iter().enumerate() {
            let c = u64::from(byte) + 1;
            w = w.wrapping_mul(b).wrapping_add(c);
            s = s.wrapping_mul(b).wrapping_add(c);
            if i >= WINDOW {
                w = w.wrapping_sub((u64::from(text[i - WINDOW]) + 1).wrapping_mul(out_w));
            }
            if i >= MIN_PIECE {
                s = s.wrapping_sub((u64::from(text[i - MIN_PIECE]) + 1).wrapping_mul(out_s));
            }
            if windows && i + 1 >= WINDOW && self.marked(w) {
                if let Some(&source) = self.windows.get(&w) {
                    return Some(source);
                }
            }
            if shorts && i + 1 >= MIN_PIECE && self.marked(s) {
                let at = i + 1 - MIN_PIECE;
                if let Some(found) = self.shorts.get(&s).and_then(|candidates| {
                    candidates.iter().find(|c| {
                        text.get(at..at + c.len)
                            .is_some_and(|win| self.hash(win) == c.hash)
                    })
                }) {
                    return Some(found.source);
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_window_of_a_secret_is_found_with_its_source_and_little_else() {
        let mut f = Fingerprints::new();
        let key = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj";
        f.add(key.as_bytes(), 0);
        f.add(b"hunter2-correct-horse", 1);
        f.add(b"short", 2);
        assert_eq!(f.found_in(format!("note: {key}").as_bytes()), Some(0));
        assert_eq!(f.found_in(&key.as_bytes()[10..10 + WINDOW]), Some(0));
        assert_eq!(f.found_in(&key.as_bytes()[10..10 + WINDOW - 1]), None);
        assert_eq!(
            f.found_in(b"the password is hunter2-correct-horse, ok"),
            Some(1)
        );
        assert_eq!(f.found_in(b"hunter2-correct-hors"), None);
        assert_eq!(f.found_in(b"short and sweet"), None);
        assert_eq!(
            f.found_in("SELECT * FROM orders WHERE id = 42".as_bytes()),
            None
        );
        // Another process's fingerprints are of another key.
        let g = Fingerprints::new();
        assert_ne!(f.hash(b"abc"), g.hash(b"abc"));
        assert_eq!(f.len(), key.len() + 1 - WINDOW + 1);
    }
}
