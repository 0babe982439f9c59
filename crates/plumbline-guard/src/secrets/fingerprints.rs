//! Pieces of the user's own secrets, kept as fingerprints: a keyed rolling
//! hash of every window of [`WINDOW`] bytes of each secret (and of each
//! whole piece shorter than that but at least [`MIN_PIECE`]), so that a
//! text holding any such run of a secret (a quoted fragment, one line of
//! a key) is found, while the secret itself is not kept. The key is drawn
//! per process and the set lives in memory only.
//!
//! The hash is a polynomial over the Mersenne prime 2^61 − 1 with a
//! random base: unlike one modulo 2^64, no fixed input collides for every
//! base, and a 61-bit collision is what a false match would need.

use std::collections::{HashMap, HashSet};

/// The run of a secret a text must hold to match.
pub const WINDOW: usize = 24;
/// The shortest secret piece kept (a password of fewer bytes is not
/// told from ordinary words).
pub const MIN_PIECE: usize = 10;

const P: u64 = (1 << 61) - 1;

fn mul(a: u64, b: u64) -> u64 {
    let r = u128::from(a) * u128::from(b);
    let lo = (r as u64) & P;
    let hi = (r >> 61) as u64;
    let s = lo + hi;
    if s >= P {
        s - P
    } else {
        s
    }
}

fn add(a: u64, b: u64) -> u64 {
    let s = a + b;
    if s >= P {
        s - P
    } else {
        s
    }
}

fn sub(a: u64, b: u64) -> u64 {
    if a >= b {
        a - b
    } else {
        a + P - b
    }
}

/// Fingerprints of secret pieces.
pub struct Fingerprints {
    base: u64,
    /// `base^(len - 1)` per window length in use.
    tops: HashMap<usize, u64>,
    /// Hashes of the windows (or short pieces), by length.
    sets: HashMap<usize, HashSet<u64>>,
}

impl Default for Fingerprints {
    fn default() -> Self {
        Fingerprints::new()
    }
}

impl Fingerprints {
    pub fn new() -> Fingerprints {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(0x9e37_79b9_7f4a_7c15);
        // A base in [2^32, P): large, and never 0 or 1.
        let base = (h.finish() % (P - (1 << 32))) + (1 << 32);
        Fingerprints {
            base,
            tops: HashMap::new(),
            sets: HashMap::new(),
        }
    }

    /// How many fingerprints are kept.
    pub fn len(&self) -> usize {
        self.sets.values().map(HashSet::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }

    fn hash(&self, bytes: &[u8]) -> u64 {
        bytes
            .iter()
            .fold(0, |h, &b| add(mul(h, self.base), u64::from(b) + 1))
    }

    /// Keeps the fingerprints of one secret piece (a value, a line of a
    /// key file); a piece shorter than [`MIN_PIECE`] is not kept.
    pub fn add(&mut self, piece: &[u8]) {
        let piece = piece.trim_ascii();
        if piece.len() < MIN_PIECE {
            return;
        }
        let len = piece.len().min(WINDOW);
        let top = self.power(len - 1);
        self.tops.insert(len, top);
        let mut hashes = Vec::with_capacity(piece.len() + 1 - len);
        self.roll(piece, len, top, &mut |h| {
            hashes.push(h);
            false
        });
        self.sets.entry(len).or_default().extend(hashes);
    }

    fn power(&self, n: usize) -> u64 {
        (0..n).fold(1, |p, _| mul(p, self.base))
    }

    /// Calls `each` with the hash of every window of `len` bytes of
    /// `text`, in order, until it returns true; whether it did.
    fn roll(&self, text: &[u8], len: usize, top: u64, each: &mut dyn FnMut(u64) -> bool) -> bool {
        if text.len() < len {
            return false;
        }
        let mut h = self.hash(&text[..len]);
        if each(h) {
            return true;
        }
        for i in len..text.len() {
            let out = u64::from(text[i - len]) + 1;
            h = add(
                mul(sub(h, mul(out, top)), self.base),
                u64::from(text[i]) + 1,
            );
            if each(h) {
                return true;
            }
        }
        false
    }

    /// Whether `text` holds a run of a kept secret.
    pub fn found_in(&self, text: &[u8]) -> bool {
        self.sets.iter().any(|(len, set)| {
            let top = self.tops[len];
            self.roll(text, *len, top, &mut |h| set.contains(&h))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_window_of_a_secret_is_found_and_little_else() {
        let mut f = Fingerprints::new();
        let key = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj";
        f.add(key.as_bytes());
        f.add(b"hunter2-correct-horse");
        f.add(b"short");
        assert!(f.found_in(format!("note: {key}").as_bytes()));
        assert!(f.found_in(&key.as_bytes()[10..10 + WINDOW]));
        assert!(!f.found_in(&key.as_bytes()[10..10 + WINDOW - 1]));
        assert!(f.found_in(b"the password is hunter2-correct-horse, ok"));
        assert!(!f.found_in(b"hunter2-correct-hors"));
        assert!(!f.found_in(b"short and sweet"));
        assert!(!f.found_in("SELECT * FROM orders WHERE id = 42".as_bytes()));
        // Another process's fingerprints are of another key.
        let g = Fingerprints::new();
        assert_ne!(f.hash(b"abc"), g.hash(b"abc"));
    }

    #[test]
    fn the_field_arithmetic_is_modular() {
        assert_eq!(mul(P - 1, P - 1), 1);
        assert_eq!(add(P - 1, 1), 0);
        assert_eq!(sub(0, 1), P - 1);
    }
}
