//! Bytes read 64 at a time as a bit mask: what the guard's readers of long
//! texts (the JSON lexer, the secret check's runs of token bytes) use
//! where a search for one or two bytes (memchr) would stop too often.

/// Bit `i` set where `keep(bytes[i])`, for up to 64 bytes (bits past the
/// end are clear).
///
/// Written so that the compiler makes it a few vector instructions for
/// any `keep` built of comparisons: one 0/1 byte per byte, then eight of
/// them at a time to eight bits by one multiplication (no table: a gather
/// would not vectorise).
#[inline(always)]
pub(crate) fn mask(bytes: &[u8], keep: impl Fn(u8) -> bool) -> u64 {
    let mut flags = [0u8; 64];
    match <&[u8; 64]>::try_from(bytes) {
        // The common case, a whole word: a loop of known length.
        Ok(whole) => {
            for (f, &b) in flags.iter_mut().zip(whole) {
                *f = u8::from(keep(b));
            }
        }
        Err(_) => {
            for (f, &b) in flags.iter_mut().zip(bytes) {
                *f = u8::from(keep(b));
            }
        }
    }
    let mut m = 0u64;
    for (i, chunk) in flags.chunks_exact(8).enumerate() {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(chunk);
        // Eight 0/1 bytes to eight bits, the first byte the lowest.
        let bits = (u64::from_le_bytes(eight).wrapping_mul(0x0102_0408_1020_4080) >> 56) as u8;
        m |= u64::from(bits) << (8 * i);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bit_for_each_byte_kept() {
        let mut draw = crate::testing::draws(7);
        for _ in 0..2_000 {
            let len = draw(65);
            let bytes: Vec<u8> = (0..len).map(|_| draw(256) as u8).collect();
            let keep = |b: u8| b < 0x20 || b == b'"' || b.is_ascii_digit();
            let want = bytes
                .iter()
                .enumerate()
                .filter(|(_, &b)| keep(b))
                .fold(0u64, |m, (i, _)| m | 1 << i);
            assert_eq!(mask(&bytes, keep), want, "{bytes:?}");
        }
        assert_eq!(mask(&[b'a'; 64], |b| b == b'a'), u64::MAX);
        assert_eq!(mask(&[], |_| true), 0);
    }
}
