//! Newline-delimited messages with a size bound.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// Reads one line (without its `\n` or `\r\n`) into `buf`, refusing lines
/// longer than `max` bytes without buffering them. `Ok(false)` at end of
/// input. An over-long line is an error: the stream is then out of step
/// and must not be read further.
pub(crate) async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Result<bool, usize>> {
    buf.clear();
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            // End of input: a final line without a newline still counts.
            return Ok(Ok(!buf.is_empty()));
        }
        let (chunk, done) = match memchr(available) {
            Some(i) => (&available[..i], Some(i + 1)),
            None => (available, None),
        };
        if buf.len() + chunk.len() > max {
            return Ok(Err(max));
        }
        buf.extend_from_slice(chunk);
        let used = done.unwrap_or(chunk.len());
        reader.consume(used);
        if done.is_some() {
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            return Ok(Ok(true));
        }
    }
}

fn memchr(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_split_and_bounded() {
        let input: &[u8] = b"{\"a\":1}\r\nsecond\nlast";
        let mut r = tokio::io::BufReader::with_capacity(4, input);
        let mut buf = Vec::new();
        assert_eq!(read_line(&mut r, &mut buf, 100).await.unwrap(), Ok(true));
        assert_eq!(buf, b"{\"a\":1}");
        assert_eq!(read_line(&mut r, &mut buf, 100).await.unwrap(), Ok(true));
        assert_eq!(buf, b"second");
        assert_eq!(read_line(&mut r, &mut buf, 100).await.unwrap(), Ok(true));
        assert_eq!(buf, b"last");
        assert_eq!(read_line(&mut r, &mut buf, 100).await.unwrap(), Ok(false));

        let long = vec![b'x'; 1000];
        let mut r = tokio::io::BufReader::with_capacity(64, &long[..]);
        assert_eq!(read_line(&mut r, &mut buf, 100).await.unwrap(), Err(100));
        assert!(buf.len() <= 100);
    }
}
