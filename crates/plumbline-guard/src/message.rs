//! Reading a JSON-RPC message the way the peer it is relayed to will read
//! it, so that what the guard judges is what the other side acts on.
//!
//! The guard relays a message's bytes unchanged, so it must read from
//! them exactly what the peer's parser reads, or refuse the message. Two
//! things stand between a strict parser and that:
//!
//! - **Parsers accept more than JSON.** Python's `json` takes `NaN` and
//!   `Infinity`, every parser takes `1e400` (as infinity or a big number)
//!   and a lone surrogate escape (`"\ud800"`), and nesting far deeper than
//!   `serde_json`'s limit of 128. A strict parser that gives up on those
//!   cannot tell which tool a call names, so the grammar here is that
//!   superset, read without recursion (no depth limit but the message's
//!   size, which the transport bounds). Anything else (comments, trailing
//!   commas, a second value after the first) is refused: a peer that
//!   accepted it would be reading something the guard did not.
//! - **Peers resolve keys differently.** With a key twice, most parsers
//!   keep the last value and some the first; Go's `encoding/json` matches
//!   a struct field case-insensitively (`"Name"`, `"ſ"` for `s`, `"K"` for
//!   the Kelvin sign), and a C library may stop at U+0000. A message in
//!   which one of the keys the guard reads (`method`, `id`, `params`,
//!   `params.name`, …) could be read two ways is refused.
//!
//! Only the members the guard reads are decoded; everything else (a
//! call's arguments above all) is checked against the grammar and left as
//! bytes.

use serde_json::Value;

/// Why a message is not relayed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A JSON-RPC batch: neither transport relays them, since a batch could
    /// carry a call past the check.
    Batch,
    /// Not a message the guard can read; `id` when the request's id could
    /// still be read (the refusal then answers it).
    Unreadable { why: String, id: Option<Id> },
}

impl Refusal {
    fn unreadable(why: impl Into<String>) -> Refusal {
        Refusal::Unreadable {
            why: why.into(),
            id: None,
        }
    }

    /// The JSON-RPC error code that answers it.
    pub fn code(&self) -> i64 {
        match self {
            Refusal::Batch => INVALID_REQUEST,
            Refusal::Unreadable { id: None, .. } => PARSE_ERROR,
            Refusal::Unreadable { id: Some(_), .. } => INVALID_REQUEST,
        }
    }

    /// What the refusal says.
    pub fn why(&self) -> String {
        match self {
            Refusal::Batch => "plumbline guard does not relay JSON-RPC batches".to_owned(),
            Refusal::Unreadable { why, .. } => why.clone(),
        }
    }

    /// The id its answer carries (`null` when none could be read).
    pub fn id_json(&self) -> String {
        match self {
            Refusal::Unreadable { id: Some(id), .. } => id.json().to_owned(),
            _ => "null".to_owned(),
        }
    }
}

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const INVALID_PARAMS: i64 = -32602;

/// A request's id, compared as the peers compare it: a string by its
/// decoded text, a number by its value (`1`, `1.0` and `1e0` are one id to
/// JavaScript and to Python's dictionaries), never a string with a number.
#[derive(Debug, Clone)]
pub struct Id {
    key: IdKey,
    /// The id as JSON, to answer with.
    json: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum IdKey {
    Str(String),
    /// The bits of the number as an `f64` (`-0` as `0`).
    Num(u64),
    /// A response's `null` id (the answer to a message its sender could
    /// not read): never the answer to a request.
    Null,
}

impl PartialEq for Id {
    fn eq(&self, other: &Id) -> bool {
        self.key == other.key
    }
}

impl Eq for Id {}

impl std::hash::Hash for Id {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.key.hash(state);
    }
}

impl std::fmt::Display for Id {
    /// The id as JSON.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.json)
    }
}

impl Id {
    /// The id as JSON, as it was sent for a string, as written for a number.
    pub fn json(&self) -> &str {
        &self.json
    }

    /// The id as a JSON value (for replies built with `serde_json`).
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.json).unwrap_or(Value::Null)
    }

    pub fn is_null(&self) -> bool {
        self.key == IdKey::Null
    }

    /// The string id `s` (the guard's own requests).
    pub fn string(s: &str) -> Id {
        Id {
            key: IdKey::Str(s.to_owned()),
            json: Value::String(s.to_owned()).to_string(),
        }
    }

    /// Whether this is the string id `s`.
    pub fn is_str(&self, s: &str) -> bool {
        matches!(&self.key, IdKey::Str(k) if k == s)
    }

    /// Reads an id from its JSON (a member's raw bytes).
    pub fn read(raw: &[u8]) -> Result<Id, String> {
        match raw.first() {
            Some(b'"') => {
                let d = decode_string(raw);
                if d.lone_surrogate {
                    return Err("an id with a lone surrogate".to_owned());
                }
                Ok(Id {
                    json: Value::String(d.text.clone()).to_string(),
                    key: IdKey::Str(d.text),
                })
            }
            Some(b'n') if raw == b"null" => Ok(Id {
                key: IdKey::Null,
                json: "null".to_owned(),
            }),
            Some(b'-' | b'0'..=b'9') => {
                let text = std::str::from_utf8(raw).map_err(|e| e.to_string())?;
                match text.parse::<f64>() {
                    Ok(n) if n.is_finite() => Ok(Id {
                        key: IdKey::Num(if n == 0.0 { 0 } else { n.to_bits() }),
                        json: text.to_owned(),
                    }),
                    _ => Err(format!("the id {text} is not a finite number")),
                }
            }
            _ => Err("an id that is neither a string nor a number".to_owned()),
        }
    }
}

/// What a message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Request,
    Notification,
    Response,
}

/// A byte range of the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

/// One readable JSON-RPC message.
#[derive(Debug)]
pub struct Message<'a> {
    pub bytes: &'a [u8],
    pub kind: Kind,
    /// A request's or a response's id.
    pub id: Option<Id>,
    /// A request's or a notification's method.
    pub method: Option<String>,
    /// The top-level members (key decoded, value's span).
    members: Vec<(String, Span)>,
    /// The members of `params`, when it is an object.
    params: Option<Vec<(String, Span)>>,
}

/// Keys of the message object the guard reads.
const TOP_KEYS: &[&str] = &["jsonrpc", "id", "method", "params", "result", "error"];
/// Keys of `params` the guard reads (of one method or another).
const PARAM_KEYS: &[&str] = &[
    "name",
    "arguments",
    "cursor",
    "_meta",
    "requestId",
    "notifications",
    "capabilities",
    "protocolVersion",
    "uri",
];

impl<'a> Message<'a> {
    /// Reads `bytes` as one JSON-RPC message, or says why it cannot be
    /// relayed.
    pub fn read(bytes: &'a [u8]) -> Result<Message<'a>, Refusal> {
        if std::str::from_utf8(bytes).is_err() {
            return Err(Refusal::unreadable("not UTF-8"));
        }
        let mut lx = Lexer { s: bytes, i: 0 };
        lx.ws();
        match lx.peek() {
            Some(b'{') => {}
            Some(b'[') => {
                // Still checked, so that a broken batch reads as broken.
                lx.value().map_err(Refusal::unreadable)?;
                lx.ws();
                if lx.i != bytes.len() {
                    return Err(Refusal::unreadable(lx.err("text after the message")));
                }
                return Err(Refusal::Batch);
            }
            _ => return Err(Refusal::unreadable("not a JSON-RPC message (an object)")),
        }
        let mut params = None;
        let members = lx
            .members(|key, lx| {
                if key == "params" && lx.peek() == Some(b'{') {
                    params = Some(lx.members(|_, lx| lx.value())?);
                    Ok(())
                } else {
                    lx.value()
                }
            })
            .map_err(Refusal::unreadable)?;
        lx.ws();
        if lx.i != bytes.len() {
            return Err(Refusal::unreadable(lx.err("text after the message")));
        }
        let mut msg = Message {
            bytes,
            kind: Kind::Notification,
            id: None,
            method: None,
            members,
            params,
        };
        let id = match msg.member("id") {
            Some(raw) => Some(Id::read(raw).map_err(Refusal::unreadable)?),
            None => None,
        };
        let refuse = |why: String| Refusal::Unreadable {
            why,
            id: id.clone().filter(|i| !i.is_null()),
        };
        ambiguous(&msg.members, TOP_KEYS).map_err(&refuse)?;
        if let Some(p) = &msg.params {
            ambiguous(p, PARAM_KEYS).map_err(|why| refuse(format!("params: {why}")))?;
        }
        let method = match msg.member("method") {
            Some(raw) if raw.first() == Some(&b'"') => {
                let d = decode_string(raw);
                if d.lone_surrogate {
                    return Err(refuse("a method with a lone surrogate".to_owned()));
                }
                Some(d.text)
            }
            Some(_) => return Err(refuse("a method that is not a string".to_owned())),
            None => None,
        };
        let answer = msg.member("result").is_some() || msg.member("error").is_some();
        msg.kind = match (&method, &id, answer) {
            (Some(_), Some(i), false) if !i.is_null() => Kind::Request,
            (Some(_), None, false) => Kind::Notification,
            (Some(_), Some(_), false) => return Err(refuse("a request with a null id".to_owned())),
            (Some(_), _, true) => return Err(refuse("both a method and a result".to_owned())),
            (None, Some(_), true)
                if msg.member("result").is_some() != msg.member("error").is_some() =>
            {
                Kind::Response
            }
            (None, _, _) => {
                return Err(refuse(
                    "neither a request, a notification nor a response".to_owned(),
                ))
            }
        };
        if let Some(p) = msg.member("params") {
            if !matches!(p.first(), Some(b'{' | b'[')) {
                return Err(refuse(
                    "params that are neither an object nor an array".to_owned(),
                ));
            }
        }
        msg.id = id;
        msg.method = method;
        Ok(msg)
    }

    /// A top-level member's raw JSON.
    pub fn member(&self, key: &str) -> Option<&'a [u8]> {
        let bytes = self.bytes;
        self.members
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, s)| &bytes[s.start..s.end])
    }

    /// A member of `params`'s raw JSON (`params` an object).
    pub fn param(&self, key: &str) -> Option<&'a [u8]> {
        let bytes = self.bytes;
        self.params
            .as_ref()?
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, s)| &bytes[s.start..s.end])
    }

    /// A member of `params` as a value, strictly parsed (for the small
    /// members the guard reads: `_meta`, `cursor`, `requestId`, …); an
    /// error when it is there but not plain JSON.
    pub fn param_value(&self, key: &str) -> Result<Option<Value>, String> {
        match self.param(key) {
            None => Ok(None),
            Some(raw) => serde_json::from_slice(raw)
                .map(Some)
                .map_err(|e| format!("params.{key} cannot be read: {e}")),
        }
    }

    /// A member of `params` that must be a string without lone
    /// surrogates: `Ok(None)` when absent, an error when it is another
    /// value.
    pub fn param_str(&self, key: &str) -> Result<Option<String>, String> {
        match self.param(key) {
            None => Ok(None),
            Some(raw) if raw.first() == Some(&b'"') => {
                let d = decode_string(raw);
                if d.lone_surrogate {
                    Err(format!("params.{key} holds a lone surrogate"))
                } else {
                    Ok(Some(d.text))
                }
            }
            Some(_) => Err(format!("params.{key} is not a string")),
        }
    }

    /// Whether `params` has `key` with a value other than `null`.
    pub fn has_param(&self, key: &str) -> bool {
        self.param(key).is_some_and(|raw| raw != b"null")
    }

    /// The id as JSON for an answer (`null` without one).
    pub fn id_json(&self) -> &str {
        self.id.as_ref().map_or("null", Id::json)
    }
}

/// Refuses members where a key the guard reads could be read two ways by
/// some peer: the key twice, or another key that a peer would take for it
/// (Go's case-insensitive field match, a C string cut at U+0000).
fn ambiguous(members: &[(String, Span)], keys: &[&str]) -> Result<(), String> {
    for key in keys {
        let mut exact = 0;
        for (k, _) in members {
            if k == key {
                exact += 1;
                continue;
            }
            let cut = k.split('\0').next().unwrap_or_default();
            if folds_to(k, key) || folds_to(cut, key) {
                return Err(format!("the key {k:?} may be read as {key:?}"));
            }
        }
        if exact > 1 {
            return Err(format!("the key {key:?} is there {exact} times"));
        }
    }
    Ok(())
}

/// Whether `k` equals the ASCII key `key` under Unicode simple case
/// folding, as Go's `encoding/json` compares field names (`bytes.EqualFold`:
/// besides ASCII case, U+017F folds to `s` and U+212A to `k`).
fn folds_to(k: &str, key: &str) -> bool {
    let mut a = k.chars().map(|c| match c {
        '\u{17f}' => 's',
        '\u{212a}' => 'k',
        c => c.to_ascii_lowercase(),
    });
    let mut b = key.chars();
    loop {
        match (a.next(), b.next()) {
            (None, None) => return true,
            (Some(x), Some(y)) if x == y => {}
            _ => return false,
        }
    }
}

/// A string's decoded text; a lone surrogate escape becomes U+FFFD and is
/// flagged.
pub struct Decoded {
    pub text: String,
    pub lone_surrogate: bool,
}

/// The escape at `inner[*i]` (a backslash), moving `*i` past it: its
/// character, and whether it was a lone surrogate (read as U+FFFD). `None`
/// when the text ends inside it.
fn escape(inner: &[u8], i: &mut usize) -> Option<(char, bool)> {
    let hex = |s: &[u8]| -> Option<u16> {
        let s = std::str::from_utf8(s.get(..4)?).ok()?;
        u16::from_str_radix(s, 16).ok()
    };
    let e = *inner.get(*i + 1)?;
    *i += 2;
    Some(match e {
        b'"' => ('"', false),
        b'\\' => ('\\', false),
        b'/' => ('/', false),
        b'b' => ('\u{8}', false),
        b'f' => ('\u{c}', false),
        b'n' => ('\n', false),
        b'r' => ('\r', false),
        b't' => ('\t', false),
        b'u' => {
            let u = hex(&inner[*i..])?;
            *i += 4;
            if (0xd800..0xdc00).contains(&u) {
                let low = (inner.get(*i..*i + 2) == Some(b"\\u"))
                    .then(|| hex(&inner[*i + 2..]))
                    .flatten()
                    .filter(|l| (0xdc00..0xe000).contains(l));
                match low {
                    Some(l) => {
                        *i += 6;
                        let c = 0x10000 + ((u32::from(u) - 0xd800) << 10) + (u32::from(l) - 0xdc00);
                        (char::from_u32(c).unwrap_or('\u{fffd}'), false)
                    }
                    None => ('\u{fffd}', true),
                }
            } else if (0xdc00..0xe000).contains(&u) {
                ('\u{fffd}', true)
            } else {
                (char::from_u32(u32::from(u)).unwrap_or('\u{fffd}'), false)
            }
        }
        _ => ('\u{fffd}', false),
    })
}

/// Decodes the JSON string `raw` (quotes included; already checked by the
/// lexer).
pub fn decode_string(raw: &[u8]) -> Decoded {
    let inner = &raw[1..raw.len().saturating_sub(1).max(1)];
    // Bytes first, checked as UTF-8 once at the end: a text of many
    // escapes is many short runs, each checked on its own before.
    let mut bytes = Vec::with_capacity(inner.len());
    let mut lone = false;
    let mut i = 0;
    while i < inner.len() {
        // Copy the run up to the next escape.
        let end = memchr::memchr(b'\\', &inner[i..]).map_or(inner.len(), |p| i + p);
        bytes.extend_from_slice(&inner[i..end]);
        i = end;
        if i == inner.len() {
            break;
        }
        let Some((c, lone_here)) = escape(inner, &mut i) else {
            break;
        };
        lone |= lone_here;
        let mut utf8 = [0u8; 4];
        bytes.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
    }
    // A message is UTF-8 (checked when read): lossy only for a caller
    // that gives other bytes.
    let text = String::from_utf8(bytes)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    Decoded {
        text,
        lone_surrogate: lone,
    }
}

/// The members of the JSON object `raw` (its keys decoded, each value's
/// span in `raw`), read in the lenient grammar.
pub fn members_of(raw: &[u8]) -> Result<Vec<(String, std::ops::Range<usize>)>, String> {
    let mut lx = Lexer { s: raw, i: 0 };
    lx.ws();
    let members = lx.members(|_, lx| lx.value())?;
    Ok(members
        .into_iter()
        .map(|(k, span)| (k, span.start..span.end))
        .collect())
}

/// Decodes the JSON string `literal` (quotes included, read already) a
/// window at a time: `each` gets consecutive pieces of the text, each at
/// most about `window` bytes and, where the text allows, ending after a
/// sentence (`.`, `!`, `?`, a line end), so that a reader of sentences
/// sees each whole; it stops when `each` breaks. At most one window of the
/// text is held at once, whatever its length. A lone surrogate is read as
/// U+FFFD, as [`decode_string`] reads it.
pub fn decode_windows(
    literal: &[u8],
    window: usize,
    each: &mut dyn FnMut(&str) -> std::ops::ControlFlow<()>,
) -> std::ops::ControlFlow<()> {
    use std::ops::ControlFlow;
    let window = window.max(64);
    let inner = &literal[1.min(literal.len())..literal.len().saturating_sub(1).max(1)];
    let mut buf = String::with_capacity(window.min(inner.len()) + 8);
    // Hands over the sentences of `buf` once it holds a window, keeping
    // the sentence it ends in.
    let mut flush = |buf: &mut String, last: bool| -> ControlFlow<()> {
        if buf.is_empty() || (!last && buf.len() < window) {
            return ControlFlow::Continue(());
        }
        let cut = if last {
            buf.len()
        } else {
            buf.as_bytes()
                .iter()
                .rposition(|b| matches!(b, b'.' | b'!' | b'?' | b'\n'))
                .map(|p| p + 1)
                .filter(|&p| p >= window / 4)
                .unwrap_or(buf.len())
        };
        let flow = each(&buf[..cut]);
        buf.drain(..cut);
        flow
    };
    let mut i = 0;
    while i < inner.len() {
        if inner[i] != b'\\' {
            // A run without escapes, up to the room the window has left
            // (at a character's start: the text is UTF-8, checked).
            let run_end = memchr::memchr(b'\\', &inner[i..]).map_or(inner.len(), |p| i + p);
            let mut end = run_end.min(i + (window - buf.len().min(window)).max(4));
            while end < run_end && (inner[end] & 0xC0) == 0x80 {
                end += 1;
            }
            buf.push_str(std::str::from_utf8(&inner[i..end]).unwrap_or("\u{fffd}"));
            i = end;
        } else {
            let Some((c, _)) = escape(inner, &mut i) else {
                break;
            };
            buf.push(c);
        }
        if flush(&mut buf, false).is_break() {
            return ControlFlow::Break(());
        }
    }
    flush(&mut buf, true)
}

/// Calls `each` with every string of the JSON value `raw` (object keys
/// too), decoded (a lone surrogate as U+FFFD), where it is as a JSON
/// pointer (`/files/0/content`; for a key, the object holding it, so the
/// place never spells the key), and whether it is a key; stops when
/// `each` breaks. Read without recursion, in the lenient grammar, like a
/// message. A string without escapes is given in place, not copied.
pub fn visit_strings(
    raw: &[u8],
    each: &mut dyn FnMut(&str, &str, bool) -> std::ops::ControlFlow<()>,
) -> Result<std::ops::ControlFlow<()>, String> {
    visit_literals(raw, &mut |path, span, key| {
        let literal = &raw[span];
        let inner = &literal[1..literal.len() - 1];
        // Without an escape the string is its bytes (UTF-8, checked with
        // the message): read in place, not copied.
        let plain = memchr::memchr(b'\\', inner)
            .is_none()
            .then(|| std::str::from_utf8(inner).ok())
            .flatten();
        let text: std::borrow::Cow<'_, str> = match plain {
            Some(plain) => plain.into(),
            None => decode_string(literal).text.into(),
        };
        each(path, &text, key)
    })
}

/// What [`visit_literals`] calls: a string's place, its literal's span,
/// whether it is a key.
pub type LiteralVisitor<'a> =
    dyn FnMut(&str, std::ops::Range<usize>, bool) -> std::ops::ControlFlow<()> + 'a;

/// [`visit_strings`], giving each string as the span of its literal in
/// `raw` (quotes included), undecoded: for a reader that decodes a long
/// string a window at a time ([`decode_windows`]) or rewrites it in place.
pub fn visit_literals(
    raw: &[u8],
    each: &mut LiteralVisitor<'_>,
) -> Result<std::ops::ControlFlow<()>, String> {
    use std::ops::ControlFlow;
    enum Frame {
        Object,
        Array(usize),
    }
    fn pointer(path: &[String]) -> String {
        let mut out = String::new();
        for p in path {
            out.push('/');
            out.push_str(&p.replace('~', "~0").replace('/', "~1"));
        }
        out
    }
    let mut lx = Lexer { s: raw, i: 0 };
    let mut frames: Vec<Frame> = Vec::new();
    let mut path: Vec<String> = Vec::new();
    // Reads a key at the lexer and the ':' after it, gives it to `each`,
    // and puts it on the path (a new level, or the last one replaced).
    fn key(
        lx: &mut Lexer<'_>,
        path: &mut Vec<String>,
        push: bool,
        each: &mut LiteralVisitor<'_>,
    ) -> Result<ControlFlow<()>, String> {
        lx.ws();
        let start = lx.i;
        lx.string()?;
        let span = start..lx.i;
        let k = decode_string(&lx.s[span.clone()]).text;
        lx.expect(b':')?;
        if push {
            path.push(k);
        } else if let Some(last) = path.last_mut() {
            *last = k;
        }
        let at = pointer(&path[..path.len() - 1]);
        Ok(each(&at, span, true))
    }
    'value: loop {
        lx.ws();
        match lx.peek() {
            Some(b'{') => {
                lx.i += 1;
                lx.ws();
                if lx.peek() == Some(b'}') {
                    lx.i += 1;
                } else {
                    frames.push(Frame::Object);
                    if key(&mut lx, &mut path, true, each)?.is_break() {
                        return Ok(ControlFlow::Break(()));
                    }
                    continue 'value;
                }
            }
            Some(b'[') => {
                lx.i += 1;
                lx.ws();
                if lx.peek() == Some(b']') {
                    lx.i += 1;
                } else {
                    frames.push(Frame::Array(0));
                    path.push("0".to_owned());
                    continue 'value;
                }
            }
            Some(b'"') => {
                let start = lx.i;
                lx.string()?;
                if each(&pointer(&path), start..lx.i, false).is_break() {
                    return Ok(ControlFlow::Break(()));
                }
            }
            Some(b'-' | b'0'..=b'9') => lx.number()?,
            Some(_) => lx.literal()?,
            None => return Err(lx.err("the text ends where a value was expected")),
        }
        loop {
            let Some(top) = frames.last_mut() else {
                lx.ws();
                if lx.i != lx.s.len() {
                    return Err(lx.err("text after the value"));
                }
                return Ok(ControlFlow::Continue(()));
            };
            lx.ws();
            match (top, lx.peek()) {
                (Frame::Object, Some(b',')) => {
                    lx.i += 1;
                    if key(&mut lx, &mut path, false, each)?.is_break() {
                        return Ok(ControlFlow::Break(()));
                    }
                    continue 'value;
                }
                (Frame::Array(n), Some(b',')) => {
                    lx.i += 1;
                    *n += 1;
                    if let Some(last) = path.last_mut() {
                        *last = n.to_string();
                    }
                    continue 'value;
                }
                (Frame::Object, Some(b'}')) | (Frame::Array(_), Some(b']')) => {
                    lx.i += 1;
                    frames.pop();
                    path.pop();
                }
                _ => return Err(lx.err("expected ',' or the end of a container")),
            }
        }
    }
}

/// The lenient grammar: JSON, plus `NaN`, `Infinity`, `-Infinity`, numbers
/// of any size and lone surrogate escapes, at any depth.
struct Lexer<'a> {
    s: &'a [u8],
    i: usize,
}

impl Lexer<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn err(&self, what: &str) -> String {
        format!("not JSON: {what} at byte {}", self.i)
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    fn expect(&mut self, b: u8) -> Result<(), String> {
        self.ws();
        if self.peek() == Some(b) {
            self.i += 1;
            Ok(())
        } else {
            Err(self.err(&format!("expected {:?}", b as char)))
        }
    }

    /// Reads an object at `i`, calling `each` with every key (decoded) and
    /// the lexer at its value, which `each` must consume; returns the
    /// members' keys and value spans.
    fn members(
        &mut self,
        mut each: impl FnMut(&str, &mut Self) -> Result<(), String>,
    ) -> Result<Vec<(String, Span)>, String> {
        self.expect(b'{')?;
        let mut out = Vec::new();
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(out);
        }
        loop {
            self.ws();
            let start = self.i;
            self.string()?;
            let key = decode_string(&self.s[start..self.i]).text;
            self.expect(b':')?;
            self.ws();
            let at = self.i;
            each(&key, self)?;
            out.push((
                key,
                Span {
                    start: at,
                    end: self.i,
                },
            ));
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(out);
                }
                _ => return Err(self.err("expected ',' or '}'")),
            }
        }
    }

    /// Consumes one value, however deep, without recursion.
    fn value(&mut self) -> Result<(), String> {
        let mut stack: Vec<u8> = Vec::new();
        'value: loop {
            self.ws();
            match self.peek() {
                Some(b'{') => {
                    self.i += 1;
                    self.ws();
                    if self.peek() == Some(b'}') {
                        self.i += 1;
                    } else {
                        self.string()?;
                        self.expect(b':')?;
                        stack.push(b'{');
                        continue 'value;
                    }
                }
                Some(b'[') => {
                    self.i += 1;
                    self.ws();
                    if self.peek() == Some(b']') {
                        self.i += 1;
                    } else {
                        stack.push(b'[');
                        continue 'value;
                    }
                }
                Some(b'"') => self.string()?,
                Some(b'-' | b'0'..=b'9') => self.number()?,
                Some(_) => self.literal()?,
                None => return Err(self.err("the text ends where a value was expected")),
            }
            // After a value: close what it ends, or go on to the next one.
            loop {
                let Some(&open) = stack.last() else {
                    return Ok(());
                };
                self.ws();
                match (open, self.peek()) {
                    (b'{', Some(b',')) => {
                        self.i += 1;
                        self.ws();
                        self.string()?;
                        self.expect(b':')?;
                        continue 'value;
                    }
                    (b'[', Some(b',')) => {
                        self.i += 1;
                        continue 'value;
                    }
                    (b'{', Some(b'}')) | (b'[', Some(b']')) => {
                        self.i += 1;
                        stack.pop();
                    }
                    _ => return Err(self.err("expected ',' or the end of a container")),
                }
            }
        }
    }

    fn string(&mut self) -> Result<(), String> {
        if self.peek() != Some(b'"') {
            return Err(self.err("expected a string"));
        }
        self.i += 1;
        loop {
            // The next 64 bytes as a mask of the bytes that stop a string's
            // run of plain text: its end, an escape, a control character.
            // A text of many escapes (a tool's JSON quoted, \n at each line
            // end) is read a word at a time, each escape a few instructions,
            // where a search restarted after each cost a call.
            let at = self.i;
            let word = &self.s[at..self.s.len().min(at + 64)];
            if word.is_empty() {
                return Err(self.err("a string does not end"));
            }
            let mut stops = crate::mask::mask(word, |b| (b == b'"') | (b == b'\\') | (b < 0x20));
            self.i = at + word.len();
            while stops != 0 {
                let p = at + stops.trailing_zeros() as usize;
                let next = match self.s[p] {
                    b'"' => {
                        self.i = p + 1;
                        return Ok(());
                    }
                    b'\\' => match self.s.get(p + 1) {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => p + 2,
                        Some(b'u')
                            if self
                                .s
                                .get(p + 2..p + 6)
                                .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) =>
                        {
                            p + 6
                        }
                        _ => {
                            self.i = p;
                            return Err(self.err("an invalid escape"));
                        }
                    },
                    _ => {
                        self.i = p;
                        return Err(self.err("a control character in a string"));
                    }
                };
                // The escape's own bytes are not stops; one that runs past
                // the word starts the next word after it.
                if next - at >= 64 {
                    self.i = next;
                    break;
                }
                stops &= u64::MAX << (next - at);
            }
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.i += 1;
        }
        self.i - start
    }

    fn number(&mut self) -> Result<(), String> {
        if self.peek() == Some(b'-') {
            self.i += 1;
            if self.s[self.i..].starts_with(b"Infinity") {
                self.i += 8;
                return Ok(());
            }
        }
        match self.peek() {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.err("a number without digits")),
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if self.digits() == 0 {
                return Err(self.err("a number without digits after '.'"));
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            if self.digits() == 0 {
                return Err(self.err("a number without an exponent"));
            }
        }
        if self
            .peek()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'.')
        {
            return Err(self.err("a malformed number"));
        }
        Ok(())
    }

    fn literal(&mut self) -> Result<(), String> {
        for word in [&b"true"[..], b"false", b"null", b"NaN", b"Infinity"] {
            if self.s[self.i..].starts_with(word) {
                self.i += word.len();
                if self.peek().is_some_and(|b| b.is_ascii_alphanumeric()) {
                    return Err(self.err("an unknown word"));
                }
                return Ok(());
            }
        }
        Err(self.err("an unexpected character"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(s: &str) -> Result<Message<'_>, Refusal> {
        Message::read(s.as_bytes())
    }

    #[test]
    fn calls_the_strict_parsers_refuse_are_read_as_the_lenient_ones_read_them() {
        let deep = format!("{}1{}", "[".repeat(5000), "]".repeat(5000));
        for args in [
            "{\"a\":1e400}",
            "{\"a\":NaN}",
            "{\"a\":Infinity,\"b\":-Infinity}",
            "{\"a\":\"\\ud800\"}",
            deep.as_str(),
        ] {
            let text = format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{{\"name\":\"add\",\"arguments\":{args}}}}}"
            );
            let m = read(&text).unwrap_or_else(|e| panic!("{args:.40}: {e:?}"));
            assert_eq!(m.kind, Kind::Request);
            assert_eq!(m.method.as_deref(), Some("tools/call"));
            assert_eq!(m.param_str("name").unwrap().as_deref(), Some("add"));
            assert_eq!(m.id.as_ref().unwrap().json(), "7");
            assert_eq!(m.param("arguments").unwrap(), args.as_bytes());
        }
    }

    #[test]
    fn keys_a_peer_could_read_two_ways_are_refused() {
        for text in [
            r#"{"id":1,"method":"tools/call","params":{"name":"echo","name":"add"}}"#,
            r#"{"id":1,"method":"tools/call","params":{"name":"echo","Name":"add"}}"#,
            r#"{"id":1,"method":"tools/call","params":{"name":"echo","NAME":"add"}}"#,
            r#"{"id":1,"method":"tools/call","params":{"name":"echo","name\u0000":"add"}}"#,
            r#"{"id":1,"method":"tools/call","paramſ":{"name":"add"},"params":{"name":"echo"}}"#,
            r#"{"id":1,"method":"tools/list","Method":"tools/call"}"#,
            r#"{"id":1,"method":"tools/list","method":"tools/call"}"#,
            r#"{"id":1,"id":2,"method":"ping"}"#,
            r#"{"id":1,"method":"tools/call","params":{"n\u0061me":"echo","name":"add"}}"#,
        ] {
            match read(text) {
                Err(Refusal::Unreadable { id, .. }) => {
                    if !text.contains("\"id\":1,\"id\":2") {
                        assert_eq!(
                            id.map(|i| i.json().to_owned()).as_deref(),
                            Some("1"),
                            "{text}"
                        )
                    }
                }
                other => panic!("{text}: {other:?}"),
            }
        }
        // Keys the guard does not read may be anything.
        let m = read(r#"{"id":1,"method":"x","params":{"Foo":1,"foo":2},"extra":1,"extra":2}"#)
            .unwrap();
        assert_eq!(m.kind, Kind::Request);
    }

    #[test]
    fn what_no_peer_should_accept_is_refused() {
        for text in [
            "",
            "[",
            "{",
            r#"{"id":1,"method":"ping",}"#,
            r#"{"id":1,"method":"ping"} {"id":2}"#,
            r#"{"id":1,"method":"ping"/*c*/}"#,
            r#"{"id":01,"method":"ping"}"#,
            r#"{"id":1,"method":"ping","params":{"a":nan}}"#,
            "{\"id\":1,\"method\":\"pi\nng\"}",
            r#"{"id":1,"method":"ping","params":{"a":"\x"}}"#,
            r#"{'id':1}"#,
            "\u{feff}{\"id\":1,\"method\":\"ping\"}",
            r#""just a string""#,
            r#"{"id":1e400,"method":"ping"}"#,
            r#"{"id":NaN,"method":"ping"}"#,
            r#"{"id":"\ud800","method":"ping"}"#,
            r#"{"id":true,"method":"ping"}"#,
            r#"{"id":1,"method":7}"#,
            r#"{"id":1,"method":"ping","result":{}}"#,
            r#"{"id":1}"#,
            r#"{"id":1,"result":{},"error":{}}"#,
            r#"{"id":null,"method":"ping"}"#,
            r#"{"id":1,"method":"ping","params":3}"#,
        ] {
            assert!(
                matches!(read(text), Err(Refusal::Unreadable { .. })),
                "{text:?}: {:?}",
                read(text)
            );
        }
        assert!(Message::read(b"{\"id\":1,\"method\":\"\xff\"}").is_err());
        assert_eq!(
            read(r#"[{"id":1,"method":"tools/call","params":{"name":"add"}}]"#).unwrap_err(),
            Refusal::Batch
        );
    }

    #[test]
    fn every_string_is_visited_with_its_place() {
        let mut seen = Vec::new();
        let raw = br#"{"a":"x","b/c":[1,"y",{"d":"z~"}],"e":{},"f":[],"g":NaN}"#;
        let flow = visit_strings(raw, &mut |path, text, key| {
            seen.push(format!("{path}{}={text}", if key { "(key)" } else { "" }));
            std::ops::ControlFlow::Continue(())
        })
        .unwrap();
        assert!(flow.is_continue());
        assert_eq!(
            seen,
            [
                "(key)=a",
                "/a=x",
                "(key)=b/c",
                "/b~1c/1=y",
                "/b~1c/2(key)=d",
                "/b~1c/2/d=z~",
                "(key)=e",
                "(key)=f",
                "(key)=g"
            ]
        );
        let deep = format!("{}\"s\"{}", "[".repeat(10_000), "]".repeat(10_000));
        let mut n = 0;
        let flow = visit_strings(deep.as_bytes(), &mut |_, _, _| {
            n += 1;
            std::ops::ControlFlow::Break(())
        })
        .unwrap();
        assert!(flow.is_break());
        assert_eq!(n, 1);
        assert!(
            visit_strings(b"{\"a\":}", &mut |_, _, _| std::ops::ControlFlow::Continue(
                ()
            ))
            .is_err()
        );
    }

    #[test]
    fn ids_compare_as_the_peers_compare_them() {
        let id = |s: &str| Id::read(s.as_bytes()).unwrap();
        assert_eq!(id("1"), id("1.0"));
        assert_eq!(id("1"), id("1e0"));
        assert_eq!(id("0"), id("-0"));
        assert_ne!(id("1"), id("\"1\""));
        assert_eq!(id("\"a\""), id("\"\\u0061\""));
        assert!(id("null").is_null());
        assert_eq!(id("1.0").json(), "1.0");
        assert_eq!(id("\"\\u0061\"").json(), "\"a\"");
    }

    #[test]
    fn kinds_and_members() {
        let m = read(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert_eq!(m.kind, Kind::Notification);
        let m = read(r#"{"jsonrpc":"2.0","id":"x","result":{"tools":[]}}"#).unwrap();
        assert_eq!(m.kind, Kind::Response);
        assert!(m.id.unwrap().is_str("x"));
        let m =
            read(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"?"}}"#).unwrap();
        assert!(m.id.unwrap().is_null());
        let m = read(
            r#"{"id":1,"method":"tools/list","params":{"cursor":null,"_meta":{"a":[1,{"b":2}]}}}"#,
        )
        .unwrap();
        assert!(!m.has_param("cursor"));
        assert_eq!(
            m.param_value("_meta").unwrap(),
            Some(serde_json::json!({"a": [1, {"b": 2}]}))
        );
        let m = read(r#"{"id":1,"method":"tools/call","params":{"name":7}}"#).unwrap();
        assert!(m.param_str("name").is_err());
        let m = read(r#"{"id":1,"method":"tools/call","params":{"name":"a\ud800"}}"#).unwrap();
        assert!(m.param_str("name").is_err());
        let m = read(r#"{"id":1,"method":"tools/call","params":{"name":"\ud83d\ude00 \u00e9"}}"#)
            .unwrap();
        assert_eq!(m.param_str("name").unwrap().unwrap(), "\u{1f600} \u{e9}");
        let m = read(r#"{"id":1,"method":"x","params":[1,2]}"#).unwrap();
        assert!(m.param("name").is_none());
    }

    /// A string decoded a window at a time is the string decoded whole,
    /// in pieces no larger than a window (bar one character), cut after
    /// sentences where there are any; escapes and multi-byte characters
    /// across a window's edge are whole on one side.
    #[test]
    fn windows_of_a_string_join_to_the_whole_and_stay_bounded() {
        let text = "Héllo wörld. Ünïcode 😀 and \"quotes\" and\nlines\t!".repeat(500);
        let literal = serde_json::to_string(&text).unwrap();
        let with_pairs = literal.replace('😀', r"\ud83d\ude00");
        for literal in [literal, with_pairs, format!("\"{}\"", "a".repeat(5000))] {
            let whole = decode_string(literal.as_bytes()).text;
            for window in [64, 100, 1000, 1 << 20] {
                let mut pieces = Vec::new();
                let _ = decode_windows(literal.as_bytes(), window, &mut |t| {
                    pieces.push(t.to_owned());
                    std::ops::ControlFlow::Continue(())
                });
                assert_eq!(pieces.concat(), whole, "window {window}");
                assert!(
                    pieces.iter().all(|p| p.len() <= window.max(64) + 4),
                    "window {window}: {:?}",
                    pieces.iter().map(String::len).max()
                );
                if window == 100 && whole.contains('.') {
                    assert!(
                        pieces[..pieces.len() - 1]
                            .iter()
                            .all(|p| p.ends_with(['.', '!', '\n', '?'])),
                        "{pieces:?}"
                    );
                }
            }
        }
        // A lone surrogate reads as U+FFFD, as decode_string reads it.
        let mut got = String::new();
        let _ = decode_windows(br#""a\ud800b""#, 64, &mut |t| {
            got.push_str(t);
            std::ops::ControlFlow::Continue(())
        });
        assert_eq!(got, "a\u{fffd}b");
    }

    /// A string read a word at a time ends where, and fails where and
    /// why, reading it a byte at a time does: texts drawn from pieces
    /// that stop a run (quotes, escapes valid or not, control bytes)
    /// around and across the 64-byte words, at every offset.
    #[test]
    fn strings_read_a_word_at_a_time_as_a_byte_at_a_time() {
        // Where the string that starts at `s[0]` ends, or what stops it
        // where.
        fn bytewise(s: &[u8]) -> Result<usize, (&'static str, usize)> {
            let mut i = 1;
            loop {
                match s.get(i) {
                    None => return Err(("a string does not end", s.len())),
                    Some(b'"') => return Ok(i + 1),
                    Some(b'\\') => match s.get(i + 1) {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i += 2,
                        Some(b'u')
                            if s.get(i + 2..i + 6)
                                .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) =>
                        {
                            i += 6
                        }
                        _ => return Err(("an invalid escape", i)),
                    },
                    Some(&b) if b < 0x20 => return Err(("a control character in a string", i)),
                    Some(_) => i += 1,
                }
            }
        }
        let pieces: [&[u8]; 14] = [
            b"a",
            b"plain text ",
            b"\\n",
            b"\\\"",
            b"\\\\",
            b"\\u00e9",
            b"\\ud83d\\ude00",
            b"\\x",
            b"\\u12",
            b"\\uZZZZ",
            b"\n",
            b"\x1f",
            "\u{e9}".as_bytes(),
            b"\"",
        ];
        let mut draw = crate::testing::draws(11);
        for n in 0..20_000 {
            let mut s = vec![b' '; draw(3)];
            s.push(b'"');
            // Long plain stretches now and then, so that stops fall on
            // every offset of a word and escapes cross words' ends.
            let len = 2 + draw(300);
            while s.len() < len {
                let piece = pieces[draw(if n % 2 == 0 { 10 } else { pieces.len() })];
                if draw(4) == 0 {
                    s.extend(std::iter::repeat_n(b'x', draw(70)));
                }
                s.extend_from_slice(piece);
            }
            if draw(3) > 0 {
                s.push(b'"');
            }
            let start = s.iter().position(|&b| b == b'"').unwrap();
            let mut lx = Lexer { s: &s, i: start };
            let got = lx.string();
            let (want, at) = match bytewise(&s[start..]) {
                Ok(end) => (Ok(()), start + end),
                Err((what, at)) => (
                    Err(Lexer {
                        s: &s,
                        i: start + at,
                    }
                    .err(what)),
                    start + at,
                ),
            };
            assert_eq!((got, lx.i), (want, at), "{:?}", String::from_utf8_lossy(&s));
        }
    }
}
