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

/// Feeds bytes in, takes whole events out. An event larger than `max`
/// bytes is an error, so a hostile stream cannot grow memory unbounded.
pub struct Parser {
    pending: Vec<u8>,
    event: String,
    data: Vec<u8>,
    has_data: bool,
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
    /// A field line of an event not yet ended by its blank line was read.
    in_event: bool,
}

impl Parser {
    pub fn new(max: usize) -> Self {
        Parser {
            pending: Vec::new(),
            event: String::new(),
            data: Vec::new(),
            has_data: false,
            max,
            id_buffer: None,
            last_event_id: None,
            retry: None,
            in_event: false,
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
        self.event.clear();
        self.data.clear();
        self.has_data = false;
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
        self.pending.extend_from_slice(chunk);
        let mut events = Vec::new();
        let mut start = 0;
        while let Some(i) = self.pending[start..].iter().position(|&b| b == b'\n') {
            let mut line = &self.pending[start..start + i];
            start += i + 1;
            if line.last() == Some(&b'\r') {
                line = &line[..line.len() - 1];
            }
            if line.is_empty() {
                // Dispatch: the last event ID is set whether or not the
                // event carries data (a priming event carries none).
                self.last_event_id.clone_from(&self.id_buffer);
                if self.has_data {
                    events.push(Event {
                        event: if self.event.is_empty() {
                            "message".to_owned()
                        } else {
                            std::mem::take(&mut self.event)
                        },
                        data: std::mem::take(&mut self.data),
                    });
                }
                self.event.clear();
                self.has_data = false;
                self.in_event = false;
                continue;
            }
            let (field, value) = match line.iter().position(|&b| b == b':') {
                Some(0) => continue, // a comment
                Some(c) => {
                    let v = &line[c + 1..];
                    (&line[..c], v.strip_prefix(b" ").unwrap_or(v))
                }
                None => (line, &b""[..]),
            };
            self.in_event = true;
            match field {
                b"event" => self.event = String::from_utf8_lossy(value).into_owned(),
                // An ID with U+0000 is ignored (the SSE specification). One
                // that no header can carry (a control character) clears the
                // buffer: resuming from an older ID would replay stale events.
                b"id" if !value.contains(&0) => {
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
                    }
                }
                b"data" => {
                    if self.has_data {
                        self.data.push(b'\n');
                    }
                    self.data.extend_from_slice(value);
                    self.has_data = true;
                    if self.data.len() > self.max {
                        return Err(self.max);
                    }
                }
                _ => {}
            }
        }
        self.pending.drain(..start);
        if self.pending.len() > self.max {
            return Err(self.max);
        }
        Ok(events)
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
