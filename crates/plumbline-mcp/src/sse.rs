//! A bounded Server-Sent Events parser (the subset MCP uses: `event`,
//! `data`, and for resuming a stream, `id` and `retry`; comments are
//! ignored).
//!
//! Why ours and not a crate's (issue 23 asked): the parsers published for
//! this (`eventsource-stream`, `sse-stream`, `eventsource-client`) grow an
//! event's buffer without a bound and own the byte stream, while a hostile
//! server must hit [`Parser`]'s `max` with a clear error, and resumption
//! needs the last event ID and `retry` kept exactly as the HTML standard's
//! algorithm keeps them across events. That is about a hundred lines, kept
//! here with tests, rather than a wrapper that would still need the bound.

use std::time::Duration;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub event: String,
    pub data: Vec<u8>,
}

/// One block of the stream: the fields read up to a blank line, whether
/// or not it dispatches an event (a block without `data` does not, but its
/// `id` and `retry` still count). A relay that must pass on only what it
/// read writes blocks back out ([`Block::write`]) instead of the bytes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Block {
    /// The last `event` field.
    pub event: Option<Vec<u8>>,
    /// The `data` fields, joined with LF; `None` without any.
    pub data: Option<Vec<u8>>,
    /// The last `id` field (one holding U+0000 is ignored, as the
    /// specification says), possibly empty.
    pub id: Option<Vec<u8>>,
    /// The last `retry` field of ASCII digits.
    pub retry: Option<u64>,
    /// The block held a comment (`:` lines, as keep-alives are).
    pub comment: bool,
}

impl Block {
    /// The event type a client dispatches it as.
    pub fn event_type(&self) -> &[u8] {
        match &self.event {
            Some(e) if !e.is_empty() => e,
            _ => b"message",
        }
    }

    /// The block as a client's parser will read it back: one field per
    /// line, LF-terminated, and the blank line that ends it.
    pub fn write(&self, out: &mut Vec<u8>) {
        if self.comment {
            out.extend_from_slice(b":\n");
        }
        if let Some(id) = &self.id {
            out.extend_from_slice(b"id: ");
            out.extend_from_slice(id);
            out.push(b'\n');
        }
        if let Some(ms) = self.retry {
            out.extend_from_slice(format!("retry: {ms}\n").as_bytes());
        }
        if let Some(e) = &self.event {
            out.extend_from_slice(b"event: ");
            out.extend_from_slice(e);
            out.push(b'\n');
        }
        if let Some(data) = &self.data {
            for line in data.split(|&b| b == b'\n') {
                out.extend_from_slice(b"data: ");
                out.extend_from_slice(line);
                out.push(b'\n');
            }
        }
        out.push(b'\n');
    }
}

/// Feeds bytes in, takes whole events out. An event larger than `max`
/// bytes is an error, so a hostile stream cannot grow memory unbounded.
/// Lines end as the HTML standard says: CRLF, LF or a lone CR; a byte
/// order mark at the start of a connection's stream is dropped.
pub struct Parser {
    pending: Vec<u8>,
    /// The block being read.
    block: Block,
    max: usize,
    /// The last event ID buffer: the latest `id` field read, kept across
    /// events; `None` after an empty or unusable `id`.
    id_buffer: Option<String>,
    /// The last event ID: the buffer as it stood when an event ended (the
    /// SSE specification sets it on dispatch, so an event cut off mid-way
    /// is asked for again). Kept across reconnections.
    last_event_id: Option<String>,
    /// The latest `retry` field: how long to wait before reconnecting.
    retry: Option<Duration>,
    /// A field line of a block not yet ended by its blank line was read.
    in_event: bool,
    /// The start of this connection's stream was looked at for a byte
    /// order mark.
    bom_checked: bool,
}

impl Parser {
    pub fn new(max: usize) -> Self {
        Parser {
            pending: Vec::new(),
            block: Block::default(),
            max,
            id_buffer: None,
            last_event_id: None,
            retry: None,
            in_event: false,
            bom_checked: false,
        }
    }

    /// The ID to send as `Last-Event-ID` when reconnecting, if the server
    /// gave one.
    pub fn last_event_id(&self) -> Option<&str> {
        self.last_event_id.as_deref()
    }

    /// A new connection continues the stream: a partial event or line of
    /// the old one is dropped; the last event ID and `retry` stay.
    pub fn reconnected(&mut self) {
        self.id_buffer = self.last_event_id.clone();
        self.pending.clear();
        self.block = Block::default();
        self.in_event = false;
        self.bom_checked = false;
    }

    /// Whether the bytes pushed so far end between events: no partial
    /// line, and no field of an unfinished event. An event of one's own
    /// inserted into the stream here cannot split or join the server's.
    pub fn between_events(&self) -> bool {
        self.pending.is_empty() && !self.in_event
    }

    /// The reconnection time the server asked for, if it did.
    pub fn retry(&self) -> Option<Duration> {
        self.retry
    }

    /// Adds `chunk` and returns the events it completed; `Err(max)` when an
    /// event or a line outgrows the bound.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<Event>, usize> {
        Ok(self
            .push_blocks(chunk)?
            .into_iter()
            .filter_map(|b| {
                let event = String::from_utf8_lossy(b.event_type()).into_owned();
                b.data.map(|data| Event { event, data })
            })
            .collect())
    }

    /// Adds `chunk` and returns the blocks it completed, dispatched or not.
    pub fn push_blocks(&mut self, chunk: &[u8]) -> Result<Vec<Block>, usize> {
        self.pending.extend_from_slice(chunk);
        if !self.bom_checked {
            const BOM: &[u8] = b"\xef\xbb\xbf";
            if self.pending.len() < BOM.len() && BOM.starts_with(&self.pending) {
                return Ok(Vec::new());
            }
            if self.pending.starts_with(BOM) {
                self.pending.drain(..BOM.len());
            }
            self.bom_checked = true;
        }
        let mut blocks = Vec::new();
        let mut start = 0;
        while let Some(i) = self.pending[start..]
            .iter()
            .position(|&b| b == b'\n' || b == b'\r')
        {
            let end = start + i;
            let next = if self.pending[end] == b'\r' {
                match self.pending.get(end + 1) {
                    // A CR last: an LF may follow in the next chunk.
                    None => break,
                    Some(b'\n') => end + 2,
                    Some(_) => end + 1,
                }
            } else {
                end + 1
            };
            let line = self.pending[start..end].to_vec();
            start = next;
            if let Some(block) = self.line(&line)? {
                blocks.push(block);
            }
        }
        self.pending.drain(..start);
        if self.pending.len() > self.max {
            return Err(self.max);
        }
        Ok(blocks)
    }

    /// Reads one line; a blank one ends the block.
    fn line(&mut self, line: &[u8]) -> Result<Option<Block>, usize> {
        if line.is_empty() {
            // Dispatch: the last event ID is set whether or not the
            // event carries data (a priming event carries none).
            self.last_event_id.clone_from(&self.id_buffer);
            let had = std::mem::replace(&mut self.in_event, false);
            let block = std::mem::take(&mut self.block);
            return Ok((had || block.comment).then_some(block));
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            // A comment is no field: the stream stays between events.
            Some(0) => {
                self.block.comment = true;
                return Ok(None);
            }
            Some(c) => {
                let v = &line[c + 1..];
                (&line[..c], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        self.in_event = true;
        match field {
            b"event" => self.block.event = Some(value.to_vec()),
            // An ID with U+0000 is ignored (the SSE specification). One
            // that no header can carry (a control character) clears the
            // buffer: resuming from an older ID would replay stale events.
            b"id" if !value.contains(&0) => {
                self.block.id = Some(value.to_vec());
                let carried = value
                    .iter()
                    .all(|&b| b == b'\t' || (b >= 0x20 && b != 0x7f));
                self.id_buffer = std::str::from_utf8(value)
                    .ok()
                    .filter(|id| carried && !id.is_empty())
                    .map(str::to_owned);
            }
            // Only ASCII digits: milliseconds.
            b"retry" if !value.is_empty() => {
                let ms = value.iter().try_fold(0u64, |ms, &b| {
                    b.is_ascii_digit()
                        .then(|| ms.checked_mul(10)?.checked_add(u64::from(b - b'0')))
                        .flatten()
                });
                if let Some(ms) = ms {
                    self.retry = Some(Duration::from_millis(ms));
                    self.block.retry = Some(ms);
                }
            }
            b"data" => {
                let first = self.block.data.is_none();
                let data = self.block.data.get_or_insert_with(Vec::new);
                if !first {
                    data.push(b'\n');
                }
                data.extend_from_slice(value);
                if data.len() > self.max {
                    return Err(self.max);
                }
            }
            _ => {}
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_knows_when_the_stream_is_between_events() {
        let mut p = Parser::new(1024);
        assert!(p.between_events());
        p.push(b"id: 7\n").unwrap();
        assert!(!p.between_events(), "a field of an unfinished event");
        p.push(b"data: {\"a\":1}\n\n").unwrap();
        assert!(p.between_events());
        p.push(b"data: {\"b").unwrap();
        assert!(!p.between_events(), "a partial line");
        p.push(b"\":2}\n\n: a comment\n").unwrap();
        assert!(p.between_events(), "a comment is not an event");
    }

    #[test]
    fn events_split_across_chunks() {
        let mut p = Parser::new(1024);
        assert!(p
            .push(b"event: endpoint\r\ndata: /messages?s")
            .unwrap()
            .is_empty());
        let ev = p
            .push(b"=1\r\n\r\n: keep-alive\n\ndata: {\"a\":\ndata: 1}\n\n")
            .unwrap();
        assert_eq!(
            ev,
            [
                Event {
                    event: "endpoint".into(),
                    data: b"/messages?s=1".to_vec()
                },
                Event {
                    event: "message".into(),
                    data: b"{\"a\":\n1}".to_vec()
                },
            ]
        );
    }

    #[test]
    fn lines_end_at_cr_lf_or_crlf_and_a_leading_bom_is_dropped() {
        // A lone CR ends a line, as it does for every browser's and SDK's
        // parser: reading it as part of a value would show a relay one
        // event where the client sees two.
        let mut p = Parser::new(1024);
        let ev = p
            .push(b"\xef\xbb\xbfdata: a\rdata: b\r\rdata: c\r")
            .unwrap();
        assert_eq!(
            ev,
            [Event {
                event: "message".into(),
                data: b"a\nb".to_vec()
            }]
        );
        // The CR last in a chunk waits: an LF may follow.
        assert!(!p.between_events());
        assert!(p.push(b"\n").unwrap().is_empty());
        let ev = p.push(b"\r\n").unwrap();
        assert_eq!(
            ev,
            [Event {
                event: "message".into(),
                data: b"c".to_vec()
            }]
        );
        // A BOM split across chunks; none later in the stream is dropped.
        let mut p = Parser::new(1024);
        assert!(p.push(b"\xef").unwrap().is_empty());
        assert_eq!(p.push(b"\xbb\xbfdata: x\n\n").unwrap().len(), 1);
        assert!(p.push(b"\xef\xbb\xbfdata: y\n\n").unwrap().is_empty());
    }

    #[test]
    fn blocks_are_written_back_as_they_are_read() {
        let mut p = Parser::new(1024);
        let blocks = p
            .push_blocks(b": keep-alive\n\nid: 7\nretry: 10\nevent: message\ndata: {\"a\":\ndata: 1}\nfoo: bar\n\nid: 8\n\n")
            .unwrap();
        assert_eq!(blocks.len(), 3);
        assert!(blocks[0].comment && blocks[0].data.is_none());
        assert_eq!(blocks[1].data.as_deref(), Some(&b"{\"a\":\n1}"[..]));
        assert_eq!(blocks[2].id.as_deref(), Some(&b"8"[..]));
        let mut out = Vec::new();
        for b in &blocks {
            b.write(&mut out);
        }
        assert_eq!(
            String::from_utf8(out.clone()).unwrap(),
            ":\n\nid: 7\nretry: 10\nevent: message\ndata: {\"a\":\ndata: 1}\n\nid: 8\n\n"
        );
        let mut again = Parser::new(1024);
        assert_eq!(again.push_blocks(&out).unwrap(), blocks);
    }

    #[test]
    fn oversized_events_are_refused() {
        let mut p = Parser::new(8);
        assert_eq!(p.push(b"data: 0123456789\n"), Err(8));
        let mut p = Parser::new(8);
        assert_eq!(p.push(b"no newline for a long time"), Err(8));
    }

    #[test]
    fn the_last_event_id_and_retry_are_kept_across_events() {
        let mut p = Parser::new(1024);
        assert_eq!(p.last_event_id(), None);
        assert_eq!(p.retry(), None);
        p.push(b"id: 0\nretry: 500\ndata: \n\n").unwrap();
        assert_eq!(p.last_event_id(), Some("0"));
        assert_eq!(p.retry(), Some(Duration::from_millis(500)));
        // An event without an id keeps the buffer; bad values are ignored.
        p.push(b"data: {}\n\nretry: 5s\nid: a\0b\ndata: x\n\n")
            .unwrap();
        assert_eq!(p.last_event_id(), Some("0"));
        assert_eq!(p.retry(), Some(Duration::from_millis(500)));
        p.push(b"id: event-7\nretry: 0\ndata: x\n\n").unwrap();
        assert_eq!(p.last_event_id(), Some("event-7"));
        assert_eq!(p.retry(), Some(Duration::ZERO));
        // An event cut off before its end does not count: reconnecting asks
        // for it again.
        p.push(b"id: event-8\ndata: {\"partial\":").unwrap();
        assert_eq!(p.last_event_id(), Some("event-7"));
        p.reconnected();
        p.push(b"data: y\n\n").unwrap();
        assert_eq!(p.last_event_id(), Some("event-7"));
        // An ID no header can carry clears it; an empty id resets it.
        p.push(b"id: a\x01b\ndata: x\n\n").unwrap();
        assert_eq!(p.last_event_id(), None);
        p.push(b"id: caf\xc3\xa9\ndata: x\n\n").unwrap();
        assert_eq!(p.last_event_id(), Some("café"));
        p.push(b"id\ndata: x\n\n").unwrap();
        assert_eq!(p.last_event_id(), None);
    }
}
