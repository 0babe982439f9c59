//! SHA-256 digests: the content addresses of the store.
//!
//! A [`Digest`] names canonical tool versions, raw tool bytes, documents
//! (serverInfo, capabilities, instructions) and tool sets. It is shown and
//! parsed as 64 lowercase hex digits, the form people paste into
//! `plumbline show`.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest as _, Sha256};

/// A SHA-256 digest.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest([u8; 32]);

/// The SHA-256 of `bytes`: of a canonical form, this is a tool version's
/// identity.
pub fn digest(bytes: &[u8]) -> Digest {
    Digest(Sha256::digest(bytes).into())
}

impl Digest {
    /// Wraps 32 bytes that already are a SHA-256 digest.
    pub const fn from_bytes(bytes: [u8; 32]) -> Digest {
        Digest(bytes)
    }

    /// The 32 bytes.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// 64 lowercase hex digits.
    pub fn to_hex(&self) -> String {
        self.to_string()
    }

    /// Reads a digest from stored bytes, which must be exactly 32 long.
    pub fn from_slice(bytes: &[u8]) -> Option<Digest> {
        <[u8; 32]>::try_from(bytes).ok().map(Digest)
    }
}

impl From<Digest> for [u8; 32] {
    fn from(d: Digest) -> [u8; 32] {
        d.0
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest({self})")
    }
}

/// Why a text is not a digest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a SHA-256 digest (64 hex digits)")]
pub struct DigestParseError {
    /// The rejected text, cut to 80 characters.
    pub text: String,
}

impl FromStr for Digest {
    type Err = DigestParseError;

    fn from_str(s: &str) -> Result<Digest, DigestParseError> {
        let err = || DigestParseError {
            text: s.chars().take(80).collect(),
        };
        let hex = s.as_bytes();
        if hex.len() != 64 {
            return Err(err());
        }
        let mut out = [0u8; 32];
        for (i, pair) in hex.chunks_exact(2).enumerate() {
            let hi = hex_value(pair[0]).ok_or_else(err)?;
            let lo = hex_value(pair[1]).ok_or_else(err)?;
            out[i] = hi << 4 | lo;
        }
        Ok(Digest(out))
    }
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_of_empty_input_is_the_known_sha256() {
        assert_eq!(
            digest(b"").to_string(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn hex_round_trips_and_accepts_uppercase() {
        let d = digest(b"{}");
        assert_eq!(d.to_hex().parse::<Digest>(), Ok(d));
        assert_eq!(d.to_hex().to_uppercase().parse::<Digest>(), Ok(d));
    }

    #[test]
    fn wrong_length_or_non_hex_text_is_rejected() {
        assert!("abc".parse::<Digest>().is_err());
        assert!("zz".repeat(32).parse::<Digest>().is_err());
        // A multi-byte character must not be split into "hex digits".
        assert!("é".repeat(32).parse::<Digest>().is_err());
    }
}
