//! Walking a tool's strings, and which of them are human-readable
//! (spec 2.1, clarification C6).

use crate::json::Value;
use crate::pointer;

/// One step of a path: an object key or an array index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seg<'a> {
    Key(&'a str),
    Index(usize),
}

impl Seg<'_> {
    fn is_key(&self, name: &str) -> bool {
        matches!(self, Seg::Key(k) if *k == name)
    }
}

/// The RFC 6901 pointer of `path`.
pub fn pointer_of(path: &[Seg<'_>]) -> String {
    let mut p = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => pointer::push_token(&mut p, k),
            Seg::Index(i) => {
                p.push('/');
                p.push_str(&i.to_string());
            }
        }
    }
    p
}

/// Whether a string at `path` is human-readable (C6): `/title`,
/// `/description`, any path whose last reference token is `description`
/// (so `/inputSchema/description` and property descriptions), or anything
/// at or below `/annotations`. Tokens compare after unescaping (C4), so a
/// key spelled `a/description` is not `description`, and an array element
/// of a description (`/description/0`) ends in `0`, not `description`.
pub fn is_human_readable(path: &[Seg<'_>]) -> bool {
    match path {
        [] => false,
        [first, ..] if first.is_key("annotations") => true,
        [only] if only.is_key("title") => true,
        [.., last] => last.is_key("description"),
    }
}

/// Calls `f` with the path and text of every string value under `root`,
/// in document order (object keys sorted). Object keys are not values and
/// are not visited (C13).
pub fn for_each_string<'a>(root: &'a Value, f: &mut impl FnMut(&[Seg<'a>], &'a str)) {
    let mut path = Vec::new();
    walk(root, &mut path, f);
}

fn walk<'a>(v: &'a Value, path: &mut Vec<Seg<'a>>, f: &mut impl FnMut(&[Seg<'a>], &'a str)) {
    match v {
        Value::String(s) => f(path, s),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                path.push(Seg::Index(i));
                walk(item, path, f);
                path.pop();
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                path.push(Seg::Key(k));
                walk(item, path, f);
                path.pop();
            }
        }
        _ => {}
    }
}

/// How many strings `v` holds, at any depth (itself included).
pub fn count_strings(v: &Value) -> usize {
    match v {
        Value::String(_) => 1,
        Value::Array(items) => items.iter().map(count_strings).sum(),
        Value::Object(map) => map.into_iter().map(|(_, item)| count_strings(item)).sum(),
        _ => 0,
    }
}

/// Like [`for_each_string`], for the subtree `root` found at `prefix`:
/// paths passed to `f` start with `prefix`.
pub fn for_each_string_at<'a>(
    root: &'a Value,
    mut prefix: Vec<Seg<'a>>,
    f: &mut impl FnMut(&[Seg<'a>], &'a str),
) {
    walk(root, &mut prefix, f);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;

    /// The human-readable string fields of `tool`, with their pointers.
    fn human_readable_fields(tool: &Value) -> Vec<(String, &str)> {
        let mut out = Vec::new();
        for_each_string(tool, &mut |path, text| {
            if is_human_readable(path) {
                out.push((pointer_of(path), text));
            }
        });
        out
    }

    #[test]
    fn human_readable_paths_follow_c6() {
        let tool = parse(
            br#"{
              "title": "T", "description": "D", "name": "n",
              "inputSchema": {"description": "I", "title": "not",
                "properties": {"a": {"description": "A", "title": "not"},
                               "a/description": "not", "description": "P"}},
              "outputSchema": {"description": "O"},
              "annotations": {"title": "AT", "nested": ["AN"], "readOnlyHint": true},
              "_meta": {"description": "M", "title": "not"},
              "descriptions": "not",
              "x": {"description": ["not"]}
            }"#,
        )
        .unwrap();
        let got: Vec<String> = human_readable_fields(&tool)
            .into_iter()
            .map(|(p, t)| format!("{p}={t}"))
            .collect();
        assert_eq!(
            got,
            [
                "/_meta/description=M",
                "/annotations/nested/0=AN",
                "/annotations/title=AT",
                "/description=D",
                "/inputSchema/description=I",
                "/inputSchema/properties/a/description=A",
                "/inputSchema/properties/description=P",
                "/outputSchema/description=O",
                "/title=T",
            ]
        );
    }

    #[test]
    fn human_readable_paths() {
        use Seg::{Index, Key};
        assert!(is_human_readable(&[Key("title")]));
        assert!(is_human_readable(&[Key("annotations")]));
        assert!(is_human_readable(&[Key("x"), Key("description")]));
        assert!(!is_human_readable(&[Key("x"), Key("title")]));
        assert!(!is_human_readable(&[Key("x"), Key("a/description")]));
        assert!(!is_human_readable(&[Key("description"), Index(0)]));
        assert!(!is_human_readable(&[]));
    }
}
