//! A strict RFC 8259 JSON reader with the input rules of taxonomy-v1
//! (clarifications C1–C3).
//!
//! We do not use `serde_json::Value` for classification because its
//! semantics differ from the Go reference in ways that change results:
//! it keeps integers and floats apart (`1` ≠ `1.0`, C2), rejects escaped
//! lone surrogates instead of decoding them to U+FFFD (C1), and has a fixed
//! recursion limit of 128 where C1 classifies up to 1,000 levels.
//!
//! The reader never panics and never recurses deeper than
//! [`MAX_DEPTH`], so hostile input cannot overflow the stack.

use std::fmt;

/// A JSON string: text of up to 24 bytes (every key and type name of a
/// tool, most enum values) is held inline, so reading a tool allocates
/// for its long texts only, not for each of its many short strings.
pub type Text = compact_str::CompactString;

/// Deepest nesting that is classified; the root object is level 1 (C1).
pub const MAX_DEPTH: usize = 1000;

/// A parsed JSON value with the comparison semantics of taxonomy-v1.
///
/// Objects are unordered maps (spec 1.1): an [`Object`] iterates in key
/// order, which keeps every output deterministic. Numbers are IEEE-754
/// doubles, so `1`, `1.0` and `1e0` are the same value (C2). The derived
/// equality is the "same JSON value" of the spec: NaN cannot occur.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Number(f64),
    String(Text),
    Array(Vec<Value>),
    Object(Object),
}

/// A JSON object: members sorted by key, keys unique.
///
/// A sorted vector rather than a `BTreeMap`: tool objects are small, and
/// building, comparing and dropping one flat allocation is much cheaper
/// than a tree of nodes. Lookups are binary searches.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Object {
    members: Vec<(Text, Value)>,
}

impl Object {
    pub fn new() -> Object {
        Object::default()
    }

    /// Builds an object from members in document order; of duplicate keys
    /// the last one wins (C1).
    pub fn from_members(mut members: Vec<(Text, Value)>) -> Object {
        // A stable sort keeps duplicates in document order, so the last of
        // each run of equal keys is the one that was written last.
        members.sort_by(|a, b| key_order(&a.0, &b.0));
        // In place: `dedup_by` keeps the first of a run, so each later
        // duplicate first trades places with the kept one.
        members.dedup_by(|later, kept| {
            if later.0 == kept.0 {
                std::mem::swap(later, kept);
                true
            } else {
                false
            }
        });
        Object { members }
    }

    fn position(&self, key: &str) -> Result<usize, usize> {
        self.members.binary_search_by(|(k, _)| key_order(k, key))
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.position(key).ok().map(|i| &self.members[i].1)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_ok()
    }

    /// Sets `key`, returning the value it replaced.
    pub fn insert(&mut self, key: impl Into<Text>, value: Value) -> Option<Value> {
        let key = key.into();
        match self.position(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.members[i].1, value)),
            Err(i) => {
                self.members.insert(i, (key, value));
                None
            }
        }
    }

    pub fn remove(&mut self, key: &str) -> Option<Value> {
        self.position(key).ok().map(|i| self.members.remove(i).1)
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Members in key order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &Value)> {
        self.members.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Keys in order.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &str> {
        self.members.iter().map(|(k, _)| k.as_str())
    }
}

/// Keys in UTF-8 byte order (`str`'s order), deciding on the first bytes
/// without a call where they differ, as keys of one object mostly do.
fn key_order(a: &str, b: &str) -> std::cmp::Ordering {
    match (a.as_bytes().first(), b.as_bytes().first()) {
        (Some(x), Some(y)) if x != y => x.cmp(y),
        _ => a.cmp(b),
    }
}

impl<'a> IntoIterator for &'a Object {
    type Item = (&'a str, &'a Value);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (Text, Value)>,
        fn(&'a (Text, Value)) -> (&'a str, &'a Value),
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.members.iter().map(|(k, v)| (k.as_str(), v))
    }
}

impl<K: Into<Text>> FromIterator<(K, Value)> for Object {
    fn from_iter<I: IntoIterator<Item = (K, Value)>>(iter: I) -> Object {
        Object::from_members(iter.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }
}

impl Value {
    /// The JSON type's name, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(_) => "a number",
            Value::String(_) => "a string",
            Value::Array(_) => "an array",
            Value::Object(_) => "an object",
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_object(&self) -> Option<&Object> {
        match self {
            Value::Object(m) => Some(m),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The member `key` of an object; `None` for a missing key or a non-object.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.as_object().and_then(|m| m.get(key))
    }

    /// Compact JSON text with keys in sorted order. Used for evidence; the
    /// bytes are deterministic for equal values.
    pub fn to_json(&self) -> String {
        let mut out = String::new();
        write_json(self, &mut out);
        out
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json())
    }
}

fn write_json(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(*n, out),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(k, out);
                out.push(':');
                write_json(item, out);
            }
            out.push('}');
        }
    }
}

fn write_number(n: f64, out: &mut String) {
    use std::fmt::Write;
    // Shortest round-trip digits; plain notation in the range JavaScript
    // prints plainly, exponent notation outside it. `-0` prints as `0`.
    let n = if n == 0.0 { 0.0 } else { n };
    if n == 0.0 || (1e-6..1e21).contains(&n.abs()) {
        let _ = write!(out, "{n}");
    } else {
        let _ = write!(out, "{n:e}");
    }
}

/// Writes `s` as a JSON string literal, escaping what JSON requires.
pub fn write_string(s: &str, out: &mut String) {
    use std::fmt::Write;
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

impl serde::Serialize for Value {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self {
            Value::Null => s.serialize_unit(),
            Value::Bool(b) => s.serialize_bool(*b),
            // Integral doubles serialise as integers, as they were most
            // likely written.
            Value::Number(n) if n.fract() == 0.0 && n.abs() < 9.007_199_254_740_992e15 => {
                s.serialize_i64(*n as i64)
            }
            Value::Number(n) => s.serialize_f64(*n),
            Value::String(t) => s.serialize_str(t),
            Value::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Value::Object(map) => {
                let mut m = s.serialize_map(Some(map.len()))?;
                for (k, v) in map {
                    m.serialize_entry(k, v)?;
                }
                m.end()
            }
        }
    }
}

/// What is wrong with a JSON input, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line of the offending byte.
    pub line: usize,
    /// 1-based column, counted in characters.
    pub column: usize,
    /// 0-based byte offset.
    pub offset: usize,
    pub kind: ParseErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseErrorKind {
    ByteOrderMark,
    InvalidUtf8,
    Empty,
    UnexpectedEnd,
    UnexpectedCharacter(char),
    ControlCharacterInString,
    InvalidEscape,
    InvalidNumber,
    NumberOutOfRange,
    TooDeep,
    TrailingCharacters,
    /// The document is valid JSON but not an object (C1: a tool is an object).
    NotAnObject(&'static str),
}

impl fmt::Display for ParseErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseErrorKind::ByteOrderMark => f.write_str(
                "a byte-order mark (U+FEFF) starts the input; JSON text must not begin with one",
            ),
            ParseErrorKind::InvalidUtf8 => f.write_str("invalid UTF-8"),
            ParseErrorKind::Empty => f.write_str("no JSON value (the input is empty)"),
            ParseErrorKind::UnexpectedEnd => f.write_str("unexpected end of input"),
            ParseErrorKind::UnexpectedCharacter(c) => {
                write!(
                    f,
                    "unexpected character {}",
                    crate::sanitize::escape_char_for_message(*c)
                )
            }
            ParseErrorKind::ControlCharacterInString => {
                f.write_str("unescaped control character in a string")
            }
            ParseErrorKind::InvalidEscape => f.write_str("invalid escape sequence in a string"),
            ParseErrorKind::InvalidNumber => f.write_str("invalid number"),
            ParseErrorKind::NumberOutOfRange => {
                f.write_str("number out of the range of a double (IEEE-754 binary64)")
            }
            ParseErrorKind::TooDeep => {
                write!(f, "nesting deeper than {MAX_DEPTH} levels")
            }
            ParseErrorKind::TrailingCharacters => {
                f.write_str("unexpected data after the JSON value")
            }
            ParseErrorKind::NotAnObject(found) => {
                write!(f, "expected a JSON object (an MCP tool), found {found}")
            }
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.column, self.kind
        )
    }
}

impl std::error::Error for ParseError {}

/// Parses one JSON document.
pub fn parse(input: &[u8]) -> Result<Value, ParseError> {
    parse_with_depth(input, MAX_DEPTH)
}

/// Parses one JSON document nested at most `max_depth` levels deep (the
/// root container is level 1). A JSON Lines record that holds tools one
/// level down uses `MAX_DEPTH + 1`, so each tool gets the full limit.
pub fn parse_with_depth(input: &[u8], max_depth: usize) -> Result<Value, ParseError> {
    if input.starts_with(&[0xEF, 0xBB, 0xBF]) {
        return Err(error_at(input, 0, ParseErrorKind::ByteOrderMark));
    }
    let text = match std::str::from_utf8(input) {
        Ok(t) => t,
        Err(e) => {
            return Err(error_at(
                input,
                e.valid_up_to(),
                ParseErrorKind::InvalidUtf8,
            ))
        }
    };
    let mut p = Parser {
        bytes: text.as_bytes(),
        text,
        pos: 0,
        max_depth,
        scratch: SCRATCH.take(),
    };
    p.skip_ws();
    if p.pos == p.bytes.len() {
        return Err(error_at(input, p.pos, ParseErrorKind::Empty));
    }
    let value = p.value(0);
    let mut scratch = std::mem::take(&mut p.scratch);
    // After an error, what the open containers had read.
    scratch.members.clear();
    scratch.items.clear();
    if scratch.members.capacity() <= SCRATCH_KEPT && scratch.items.capacity() <= SCRATCH_KEPT {
        SCRATCH.set(scratch);
    }
    let value = value.map_err(|(pos, kind)| error_at(input, pos, kind))?;
    p.skip_ws();
    if p.pos != p.bytes.len() {
        return Err(error_at(input, p.pos, ParseErrorKind::TrailingCharacters));
    }
    Ok(value)
}

/// Parses one JSON document that must be an object: an MCP tool (C1).
pub fn parse_tool(input: &[u8]) -> Result<Value, ParseError> {
    let value = parse(input)?;
    if let Value::Object(_) = value {
        Ok(value)
    } else {
        // Point at the first byte of the value.
        let start = input
            .iter()
            .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
            .unwrap_or(0);
        Err(error_at(
            input,
            start,
            ParseErrorKind::NotAnObject(value.kind()),
        ))
    }
}

/// The name of a tool element: its top-level `"name"` string. For a tool
/// the strict reader refuses (a number beyond a double, nesting past
/// [`MAX_DEPTH`], …) the name is still found by scanning the top-level
/// object without building it, so that the tool can be reported by name
/// as unreadable instead of vanishing (issue 23). Of duplicate `name` keys
/// the last counts (C1). `None` when the element is not an object or has
/// no string name at its top level.
pub fn tool_name(input: &[u8]) -> Option<String> {
    match parse_tool(input) {
        Ok(v) => v.get("name").and_then(Value::as_str).map(str::to_owned),
        Err(_) => scan_tool_name(input),
    }
}

/// The top-level `"name"` string of an object, found in one pass with a
/// depth counter (no recursion, no value built); strings are decoded by
/// the strict reader.
fn scan_tool_name(input: &[u8]) -> Option<String> {
    let start = input
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))?;
    if input[start] != b'{' {
        return None;
    }
    let decode = |s: &[u8]| match parse(s) {
        Ok(Value::String(s)) => Some(s.into_string()),
        _ => None,
    };
    let mut depth = 0usize;
    // At depth 1: whether the next string is a key, and whether the value
    // about to start belongs to a `name` key.
    let mut expect_key = false;
    let mut key_is_name = false;
    let mut value_is_name = false;
    let mut found = None;
    let mut i = start;
    while i < input.len() {
        match input[i] {
            b'"' => {
                let open = i;
                i += 1;
                while i < input.len() && input[i] != b'"' {
                    i += if input[i] == b'\\' { 2 } else { 1 };
                }
                if i >= input.len() {
                    break;
                }
                if depth == 1 {
                    let text = &input[open..=i];
                    if expect_key {
                        key_is_name = decode(text).is_some_and(|k| k == "name");
                        expect_key = false;
                    } else if value_is_name {
                        found = decode(text);
                        value_is_name = false;
                    }
                }
            }
            b'{' | b'[' => {
                depth += 1;
                expect_key = depth == 1;
                value_is_name = false;
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    break;
                }
            }
            b',' if depth == 1 => {
                expect_key = true;
                value_is_name = false;
            }
            b':' if depth == 1 => {
                value_is_name = std::mem::take(&mut key_is_name);
            }
            b' ' | b'\t' | b'\n' | b'\r' => {}
            // A number, `true`, `false` or `null`: not a string name.
            _ => value_is_name = false,
        }
        i += 1;
    }
    found
}

fn error_at(input: &[u8], offset: usize, kind: ParseErrorKind) -> ParseError {
    let offset = offset.min(input.len());
    let before = &input[..offset];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    // Count characters, not bytes: skip UTF-8 continuation bytes.
    let column = before[line_start..]
        .iter()
        .filter(|&&b| (b & 0xC0) != 0x80)
        .count()
        + 1;
    ParseError {
        line,
        column,
        offset,
        kind,
    }
}

type PResult<T> = Result<T, (usize, ParseErrorKind)>;

/// The offset of the first `"`, `\\` or byte below 0x20 in `bytes` (at
/// most 16 long), if any: eight bytes at a time, with the bit tricks
/// that find a zero byte in a word (the lowest flagged byte is always a
/// true one; a borrow can only flag bytes above it).
fn first_stop(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut at = 0;
    for chunk in bytes.chunks(8) {
        let mut word = [b'a'; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        let x = u64::from_le_bytes(word);
        let quote = x ^ (ONES * u64::from(b'"'));
        let backslash = x ^ (ONES * u64::from(b'\\'));
        let flagged = ((quote.wrapping_sub(ONES) & !quote)
            | (backslash.wrapping_sub(ONES) & !backslash)
            | (x.wrapping_sub(ONES * 0x20) & !x))
            & HIGH;
        if flagged != 0 {
            return Some(at + flagged.trailing_zeros() as usize / 8);
        }
        at += chunk.len();
    }
    None
}

/// The offset of the first byte below 0x20 in `bytes`, if any.
fn first_control(bytes: &[u8]) -> Option<usize> {
    if bytes.iter().fold(false, |any, &b| any | (b < 0x20)) {
        bytes.iter().position(|&b| b < 0x20)
    } else {
        None
    }
}

struct Parser<'a> {
    bytes: &'a [u8],
    text: &'a str,
    pos: usize,
    max_depth: usize,
    /// The members (items) read so far of every object (array) still
    /// open, innermost last: a container takes its own off the top when
    /// it closes, into one allocation of its exact size, where growing a
    /// vector of its own would reallocate it on the way.
    scratch: Scratch,
}

#[derive(Default)]
struct Scratch {
    members: Vec<(Text, Value)>,
    items: Vec<Value>,
}

thread_local! {
    /// One [`Scratch`] per thread, kept between documents so that reading
    /// many (a JSON Lines file) does not grow a new one each time.
    static SCRATCH: std::cell::Cell<Scratch> = std::cell::Cell::new(Scratch::default());
}

/// Past this many entries a scratch vector is not kept for the next
/// document: one huge document does not pin its memory for the thread's
/// life.
const SCRATCH_KEPT: usize = 4096;

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    fn unexpected(&self) -> (usize, ParseErrorKind) {
        match self.text.get(self.pos..).and_then(|s| s.chars().next()) {
            Some(c) => (self.pos, ParseErrorKind::UnexpectedCharacter(c)),
            None => (self.pos, ParseErrorKind::UnexpectedEnd),
        }
    }

    /// `depth` is the number of containers already open around this value.
    fn value(&mut self, depth: usize) -> PResult<Value> {
        match self.bytes.get(self.pos) {
            None => Err((self.pos, ParseErrorKind::UnexpectedEnd)),
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => Ok(Value::String(self.string()?)),
            Some(b't') => self.literal("true", Value::Bool(true)),
            Some(b'f') => self.literal("false", Value::Bool(false)),
            Some(b'n') => self.literal("null", Value::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.unexpected()),
        }
    }

    fn literal(&mut self, word: &str, value: Value) -> PResult<Value> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else {
            // Point at the first byte that differs.
            let mut at = self.pos;
            for &b in word.as_bytes() {
                if self.bytes.get(at) != Some(&b) {
                    break;
                }
                at += 1;
            }
            self.pos = at;
            Err(self.unexpected())
        }
    }

    fn object(&mut self, depth: usize) -> PResult<Value> {
        if depth > self.max_depth {
            return Err((self.pos, ParseErrorKind::TooDeep));
        }
        self.pos += 1; // '{'
        let base = self.scratch.members.len();
        self.skip_ws();
        if self.bytes.get(self.pos) == Some(&b'}') {
            self.pos += 1;
            return Ok(Value::Object(Object::new()));
        }
        loop {
            self.skip_ws();
            if self.bytes.get(self.pos) != Some(&b'"') {
                return Err(self.unexpected());
            }
            let key = self.string()?;
            self.skip_ws();
            if self.bytes.get(self.pos) != Some(&b':') {
                return Err(self.unexpected());
            }
            self.pos += 1;
            self.skip_ws();
            let value = self.value(depth)?;
            self.scratch.members.push((key, value));
            self.skip_ws();
            match self.bytes.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    let members = self.scratch.members.split_off(base);
                    // Duplicate keys: the last one wins (C1), as in Go.
                    return Ok(Value::Object(Object::from_members(members)));
                }
                _ => return Err(self.unexpected()),
            }
        }
    }

    fn array(&mut self, depth: usize) -> PResult<Value> {
        if depth > self.max_depth {
            return Err((self.pos, ParseErrorKind::TooDeep));
        }
        self.pos += 1; // '['
        let base = self.scratch.items.len();
        self.skip_ws();
        if self.bytes.get(self.pos) == Some(&b']') {
            self.pos += 1;
            return Ok(Value::Array(Vec::new()));
        }
        loop {
            self.skip_ws();
            let item = self.value(depth)?;
            self.scratch.items.push(item);
            self.skip_ws();
            match self.bytes.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Value::Array(self.scratch.items.split_off(base)));
                }
                _ => return Err(self.unexpected()),
            }
        }
    }

    fn number(&mut self) -> PResult<Value> {
        let start = self.pos;
        let b = self.bytes;
        let mut i = self.pos;
        if b.get(i) == Some(&b'-') {
            i += 1;
        }
        match b.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                while let Some(b'0'..=b'9') = b.get(i) {
                    i += 1;
                }
            }
            _ => return Err((i, ParseErrorKind::InvalidNumber)),
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            if !matches!(b.get(i), Some(b'0'..=b'9')) {
                return Err((i, ParseErrorKind::InvalidNumber));
            }
            while let Some(b'0'..=b'9') = b.get(i) {
                i += 1;
            }
        }
        if let Some(b'e' | b'E') = b.get(i) {
            i += 1;
            if let Some(b'+' | b'-') = b.get(i) {
                i += 1;
            }
            if !matches!(b.get(i), Some(b'0'..=b'9')) {
                return Err((i, ParseErrorKind::InvalidNumber));
            }
            while let Some(b'0'..=b'9') = b.get(i) {
                i += 1;
            }
        }
        self.pos = i;
        // The slice is ASCII digits and signs, so it is valid UTF-8 and a
        // valid Rust float literal; parse rounds correctly, as Go does.
        let n: f64 = self.text[start..i]
            .parse()
            .map_err(|_| (start, ParseErrorKind::InvalidNumber))?;
        if n.is_finite() {
            Ok(Value::Number(n))
        } else {
            Err((start, ParseErrorKind::NumberOutOfRange))
        }
    }

    /// Reads a string literal starting at the opening quote.
    fn string(&mut self) -> PResult<Text> {
        self.pos += 1; // opening quote
        let start = self.pos;
        // Most strings are keys and short words: a byte loop over the first
        // bytes finds their end (a quote), a backslash or a control
        // character sooner than a vectorised search is set up. Past them,
        // find the closing quote or first backslash with a vectorised
        // search, then check the run for control characters (a
        // branch-free fold the compiler vectorises too). A control
        // character or backslash at the run's end is the loop's below.
        let head = self.bytes.len().min(start + 16);
        let run = match first_stop(&self.bytes[start..head]) {
            Some(n) => start + n,
            None => {
                let run = memchr::memchr2(b'"', b'\\', &self.bytes[head..])
                    .map_or(self.bytes.len(), |n| head + n);
                if let Some(bad) = first_control(&self.bytes[head..run]) {
                    return Err((head + bad, ParseErrorKind::ControlCharacterInString));
                }
                run
            }
        };
        let mut i = run;
        if self.bytes.get(i) == Some(&b'"') {
            self.pos = i + 1;
            return Ok(Text::from(&self.text[start..i]));
        }
        // The decoded text is never longer than the literal (every escape
        // is at least as long as what it stands for), so room for the
        // literal up to its closing quote is room enough: no regrowth.
        let mut out = String::with_capacity(closing_quote(self.bytes, i) - start);
        out.push_str(&self.text[start..i]);
        loop {
            let Some(&c) = self.bytes.get(i) else {
                return Err((i, ParseErrorKind::UnexpectedEnd));
            };
            match c {
                b'"' => {
                    self.pos = i + 1;
                    return Ok(Text::from(out));
                }
                b'\\' => {
                    let esc = i;
                    let Some(&e) = self.bytes.get(i + 1) else {
                        return Err((i + 1, ParseErrorKind::UnexpectedEnd));
                    };
                    i += 2;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let first = self.hex4(i).ok_or((esc, ParseErrorKind::InvalidEscape))?;
                            i += 4;
                            if (0xD800..0xE000).contains(&first) {
                                // A surrogate: only a high surrogate followed by an
                                // escaped low surrogate forms a pair. Anything else
                                // decodes to U+FFFD and the next escape is read on
                                // its own, as Go's encoding/json does (C1).
                                let low = if first < 0xDC00
                                    && self.bytes.get(i) == Some(&b'\\')
                                    && self.bytes.get(i + 1) == Some(&b'u')
                                {
                                    self.hex4(i + 2).filter(|l| (0xDC00..0xE000).contains(l))
                                } else {
                                    None
                                };
                                match low {
                                    Some(low) => {
                                        i += 6;
                                        let cp =
                                            0x10000 + ((first - 0xD800) << 10) + (low - 0xDC00);
                                        out.push(char::from_u32(cp).unwrap_or('\u{FFFD}'));
                                    }
                                    None => out.push('\u{FFFD}'),
                                }
                            } else {
                                out.push(char::from_u32(first).unwrap_or('\u{FFFD}'));
                            }
                        }
                        _ => return Err((esc, ParseErrorKind::InvalidEscape)),
                    }
                }
                0x00..=0x1F => return Err((i, ParseErrorKind::ControlCharacterInString)),
                _ => {
                    // Copy the run up to the next quote, backslash or control.
                    let run_start = i;
                    i = memchr::memchr2(b'"', b'\\', &self.bytes[i..])
                        .map_or(self.bytes.len(), |n| i + n);
                    if let Some(bad) = first_control(&self.bytes[run_start..i]) {
                        return Err((run_start + bad, ParseErrorKind::ControlCharacterInString));
                    }
                    // Runs end at ASCII bytes, so they are char boundaries.
                    out.push_str(&self.text[run_start..i]);
                }
            }
        }
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let digits = self.bytes.get(at..at + 4)?;
        let mut v = 0u32;
        for &d in digits {
            v = v * 16 + (d as char).to_digit(16)?;
        }
        Some(v)
    }
}

/// Where the string literal that goes on at `from` (a position inside it)
/// ends: the first `"` from there that an even number of backslashes
/// precedes, or the end of the input.
fn closing_quote(bytes: &[u8], from: usize) -> usize {
    let mut at = from;
    while let Some(n) = memchr::memchr(b'"', &bytes[at..]) {
        let quote = at + n;
        let backslashes = bytes[from..quote]
            .iter()
            .rev()
            .take_while(|&&b| b == b'\\')
            .count();
        if backslashes % 2 == 0 {
            return quote;
        }
        at = quote + 1;
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_literal_ends_at_the_first_quote_no_backslash_escapes() {
        let end = |s: &str| super::closing_quote(s.as_bytes(), 0);
        assert_eq!(end(r#"ab"cd"#), 2);
        assert_eq!(end(r#"a\"b""#), 4);
        assert_eq!(end(r#"a\\"b"#), 3);
        assert_eq!(end(r#"\\\"x"y"#), 5);
        assert_eq!(end(r#"no quote"#), 8);
    }

    #[test]
    fn first_stop_finds_the_first_quote_backslash_or_control_byte() {
        let naive = |b: &[u8]| b.iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20);
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let alphabet = [
            b'a', b'"', b'\\', 0, 0x1F, 0x20, 0x21, 0x5B, 0x5D, 0x7F, 0x80, 0xA2, 0xDC, 0xFF,
        ];
        for _ in 0..20_000 {
            let mut bytes = Vec::new();
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            for i in 0..(seed % 17) {
                let pick = (seed >> (4 + i * 3)) as usize % alphabet.len();
                // Mostly plain bytes, so the stop is anywhere in the run.
                bytes.push(if (seed >> i) & 3 == 0 {
                    alphabet[pick]
                } else {
                    b'x'
                });
            }
            assert_eq!(super::first_stop(&bytes), naive(&bytes), "{bytes:?}");
        }
        for b in 0..=255u8 {
            for at in 0..16 {
                let mut bytes = [b'x'; 16];
                bytes[at] = b;
                assert_eq!(super::first_stop(&bytes), naive(&bytes), "{b} at {at}");
            }
        }
    }

    #[test]
    fn a_tool_the_strict_reader_refuses_is_still_named() {
        assert_eq!(
            tool_name(br#"{"name":"add","x":1}"#).as_deref(),
            Some("add")
        );
        // Beyond a double, and nested past the limit: still named.
        let huge = br#"{"_meta":{"v":1e400},"name":"add"}"#;
        assert!(parse_tool(huge).is_err());
        assert_eq!(tool_name(huge).as_deref(), Some("add"));
        let deep = format!(
            r#"{{"name":"deep","inputSchema":{}1{}}}"#,
            "[".repeat(MAX_DEPTH + 5),
            "]".repeat(MAX_DEPTH + 5)
        );
        assert!(parse_tool(deep.as_bytes()).is_err());
        assert_eq!(tool_name(deep.as_bytes()).as_deref(), Some("deep"));
        // Only the top level counts; escapes are decoded; the last key wins.
        assert_eq!(
            tool_name(br#"{"a":{"name":"inner"},"n\u0061me":"outer\"s","v":1e999}"#).as_deref(),
            Some("outer\"s")
        );
        assert_eq!(
            tool_name(br#"{"name":"first","name":"last","v":1e999}"#).as_deref(),
            Some("last")
        );
        assert_eq!(tool_name(br#"{"name":7,"v":1e999}"#), None);
        assert_eq!(tool_name(br#"{"title":"name","v":1e999}"#), None);
        assert_eq!(tool_name(br#"["name","x"]"#), None);
        assert_eq!(tool_name(b""), None);
        assert_eq!(tool_name(br#"{"name":"unterminated"#), None);
    }

    use super::*;

    fn p(s: &str) -> Result<Value, ParseError> {
        parse(s.as_bytes())
    }

    #[test]
    fn a_failed_document_leaves_nothing_for_the_next() {
        // The scratch vectors outlive one document: what an unclosed
        // container had read must not reappear in the next one.
        assert!(p(r#"{"a":[1,2,{"b":"c","d""#).is_err());
        assert!(p(r#"[1,[2,3"#).is_err());
        assert_eq!(p("[4]").unwrap(), Value::Array(vec![Value::Number(4.0)]));
        let o = p(r#"{"e":[{"f":1},{"g":[]}],"a":{}}"#).unwrap();
        assert_eq!(o.to_json(), r#"{"a":{},"e":[{"f":1},{"g":[]}]}"#);
        // Short strings are held inline and long ones on the heap; both
        // read back the same.
        let long = "x".repeat(100);
        let doc = format!(r#"{{"{long}":"{long}","k":"v"}}"#);
        let v = p(&doc).unwrap();
        assert_eq!(v.get(&long).and_then(Value::as_str), Some(long.as_str()));
        assert_eq!(v.get("k").and_then(Value::as_str), Some("v"));
    }

    #[test]
    fn numbers_compare_as_doubles() {
        assert_eq!(p("1").unwrap(), p("1.0").unwrap());
        assert_eq!(p("1").unwrap(), p("1e0").unwrap());
        assert_eq!(p("-0").unwrap(), p("0").unwrap());
        assert_eq!(
            p("9007199254740993").unwrap(),
            p("9007199254740992").unwrap()
        );
        assert_ne!(p("1").unwrap(), p("1.5").unwrap());
    }

    #[test]
    fn out_of_range_number_is_an_error() {
        assert_eq!(
            p("1e400").unwrap_err().kind,
            ParseErrorKind::NumberOutOfRange
        );
        assert_eq!(p("1e-400").unwrap(), Value::Number(0.0));
    }

    #[test]
    fn duplicate_keys_last_one_wins() {
        let v = p(r#"{"a":1,"a":2}"#).unwrap();
        assert_eq!(v.get("a"), Some(&Value::Number(2.0)));
        let v = p(r#"{"b":1,"a":1,"c":0,"b":2,"a":3}"#).unwrap();
        assert_eq!(v.to_json(), r#"{"a":3,"b":2,"c":0}"#);
    }

    #[test]
    fn lone_surrogates_become_replacement_characters() {
        assert_eq!(p(r#""\ud800""#).unwrap(), Value::String("\u{FFFD}".into()));
        assert_eq!(
            p(r#""\udc00x""#).unwrap(),
            Value::String("\u{FFFD}x".into())
        );
        assert_eq!(
            p(r#""\ud800\u0041""#).unwrap(),
            Value::String("\u{FFFD}A".into())
        );
        assert_eq!(
            p(r#""\ud800\ud83d\ude00""#).unwrap(),
            Value::String("\u{FFFD}\u{1F600}".into())
        );
        assert_eq!(
            p(r#""\ud83d\ude00""#).unwrap(),
            Value::String("\u{1F600}".into())
        );
    }

    #[test]
    fn escapes_decode() {
        assert_eq!(
            p(r#""a\"\\\/\b\f\n\r\t\u00e9""#).unwrap(),
            Value::String("a\"\\/\u{8}\u{c}\n\r\té".into())
        );
    }

    #[test]
    fn depth_limit_is_an_error_not_a_crash() {
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(p(&ok).is_ok());
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert_eq!(p(&deep).unwrap_err().kind, ParseErrorKind::TooDeep);
        let very_deep = "[".repeat(1_000_000);
        assert_eq!(p(&very_deep).unwrap_err().kind, ParseErrorKind::TooDeep);
    }

    #[test]
    fn errors_name_line_and_column() {
        let e = p("{\n  \"a\": tru\n}").unwrap_err();
        assert_eq!((e.line, e.column), (2, 11));
        let e = p("{\"é\": x}").unwrap_err();
        assert_eq!((e.line, e.column), (1, 7));
        assert_eq!(e.kind, ParseErrorKind::UnexpectedCharacter('x'));
    }

    #[test]
    fn rejects_what_rfc_8259_rejects() {
        for bad in [
            "",
            " ",
            "{",
            "[1,]",
            "{\"a\":1,}",
            "01",
            "1.",
            ".5",
            "+1",
            "1e",
            "\"\t\"",
            "'a'",
            "{a:1}",
            "[1 2]",
            "nul",
            "\"\\x\"",
            "\"\\u12\"",
            "1 2",
            "NaN",
            "Infinity",
        ] {
            assert!(p(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn raw_control_characters_are_rejected_before_and_after_escapes() {
        for (text, at) in [
            ("\"ab\u{1}\"", 3),
            ("\"a\\nb\u{1f}c\"", 5),
            ("\"\\\"\n\"", 3),
        ] {
            let e = p(text).unwrap_err();
            assert_eq!(
                (e.kind, e.offset),
                (ParseErrorKind::ControlCharacterInString, at),
                "{text:?}"
            );
        }
        assert_eq!(p("\"a\\nb\"").unwrap(), Value::String("a\nb".into()));
    }

    #[test]
    fn bom_and_invalid_utf8_are_errors() {
        assert_eq!(
            parse(b"\xEF\xBB\xBF{}").unwrap_err().kind,
            ParseErrorKind::ByteOrderMark
        );
        let e = parse(b"{\"a\":\"\xff\"}").unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::InvalidUtf8);
        assert_eq!(e.offset, 6);
    }

    #[test]
    fn tools_must_be_objects() {
        assert_eq!(
            parse_tool(b" [1]").unwrap_err().kind,
            ParseErrorKind::NotAnObject("an array")
        );
        assert!(parse_tool(b"{}").is_ok());
    }

    #[test]
    fn to_json_is_sorted_and_round_trips() {
        let v = p(r#"{"b":[1,2.5,"x\n"],"a":{"z":null,"y":true}}"#).unwrap();
        assert_eq!(
            v.to_json(),
            r#"{"a":{"y":true,"z":null},"b":[1,2.5,"x\n"]}"#
        );
        assert_eq!(p(&v.to_json()).unwrap(), v);
    }
}
