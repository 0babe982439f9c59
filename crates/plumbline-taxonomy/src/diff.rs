//! The structural diff of spec 2.2, as clarification C5 defines it.

use crate::fields::{pointer_of, Seg};
use crate::json::Value;

/// What happened at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ChangeKind {
    Added,
    Removed,
    Modified,
}

/// One entry of the change list: a path and the values on either side.
#[derive(Debug, Clone, PartialEq)]
pub struct Change<'a> {
    pub kind: ChangeKind,
    /// The path from the root: object keys (unescaped) and array indices.
    pub path: Vec<Seg<'a>>,
    /// The value before; `None` for `Added`.
    pub old: Option<&'a Value>,
    /// The value after; `None` for `Removed`.
    pub new: Option<&'a Value>,
}

impl Change<'_> {
    /// The path as an RFC 6901 pointer.
    pub fn pointer(&self) -> String {
        pointer_of(&self.path)
    }
}

/// Computes the change list from `old` to `new`.
///
/// Objects are compared by key, arrays by index, recursively; a key or
/// index present on one side only is one `Added` or `Removed` change for
/// its whole subtree; a pair of values that are not both objects or both
/// arrays is one `Modified` change when they differ (a type change is
/// `Modified`). Changes come out in a deterministic order: depth first,
/// object keys sorted, array indices ascending.
pub fn diff<'a>(old: &'a Value, new: &'a Value) -> Vec<Change<'a>> {
    // Tool schemas are rarely deeper than eight levels: room up front
    // spares the path's first regrowths. The changes start empty (equal
    // tools have none, and a first push makes room for four).
    let mut changes = Vec::new();
    let mut path = Vec::with_capacity(8);
    walk(old, new, &mut path, &mut changes);
    changes
}

fn walk<'a>(old: &'a Value, new: &'a Value, path: &mut Vec<Seg<'a>>, out: &mut Vec<Change<'a>>) {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            // Both maps iterate in sorted key order: merge them.
            let mut oi = o.iter().peekable();
            let mut ni = n.iter().peekable();
            loop {
                match (oi.peek(), ni.peek()) {
                    (None, None) => break,
                    (Some((ok, ov)), Some((nk, nv))) if ok == nk => {
                        path.push(Seg::Key(ok));
                        walk(ov, nv, path, out);
                        path.pop();
                        oi.next();
                        ni.next();
                    }
                    (Some((ok, ov)), Some((nk, _))) if ok < nk => {
                        out.push(one(ChangeKind::Removed, path, Seg::Key(ok), Some(ov), None));
                        oi.next();
                    }
                    (Some((ok, ov)), None) => {
                        out.push(one(ChangeKind::Removed, path, Seg::Key(ok), Some(ov), None));
                        oi.next();
                    }
                    (_, Some((nk, nv))) => {
                        out.push(one(ChangeKind::Added, path, Seg::Key(nk), None, Some(nv)));
                        ni.next();
                    }
                }
            }
        }
        (Value::Array(o), Value::Array(n)) => {
            let shared = o.len().min(n.len());
            for i in 0..shared {
                path.push(Seg::Index(i));
                walk(&o[i], &n[i], path, out);
                path.pop();
            }
            for (i, v) in o.iter().enumerate().skip(shared) {
                out.push(one(ChangeKind::Removed, path, Seg::Index(i), Some(v), None));
            }
            for (i, v) in n.iter().enumerate().skip(shared) {
                out.push(one(ChangeKind::Added, path, Seg::Index(i), None, Some(v)));
            }
        }
        _ => {
            if old != new {
                out.push(Change {
                    kind: ChangeKind::Modified,
                    path: path.clone(),
                    old: Some(old),
                    new: Some(new),
                });
            }
        }
    }
}

fn one<'a>(
    kind: ChangeKind,
    path: &[Seg<'a>],
    last: Seg<'a>,
    old: Option<&'a Value>,
    new: Option<&'a Value>,
) -> Change<'a> {
    let mut p = Vec::with_capacity(path.len() + 1);
    p.extend_from_slice(path);
    p.push(last);
    Change {
        kind,
        path: p,
        old,
        new,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;

    fn d(a: &str, b: &str) -> Vec<(ChangeKind, String)> {
        let (a, b) = (parse(a.as_bytes()).unwrap(), parse(b.as_bytes()).unwrap());
        diff(&a, &b).iter().map(|c| (c.kind, c.pointer())).collect()
    }

    #[test]
    fn equal_documents_have_no_changes() {
        assert!(d(r#"{"a":[1,{"b":2}]}"#, r#"{"a":[1.0,{"b":2e0}]}"#).is_empty());
    }

    #[test]
    fn added_removed_and_modified() {
        use ChangeKind::*;
        assert_eq!(
            d(
                r#"{"a":1,"b":{"c":[1,2,3]},"t":"x","gone":{}}"#,
                r#"{"a":2,"b":{"c":[1,5]},"t":[],"new":{"deep":1}}"#
            ),
            vec![
                (Modified, "/a".to_string()),
                (Modified, "/b/c/1".to_string()),
                (Removed, "/b/c/2".to_string()),
                (Removed, "/gone".to_string()),
                (Added, "/new".to_string()),
                (Modified, "/t".to_string()),
            ]
        );
    }

    #[test]
    fn array_growth_is_added_per_index() {
        use ChangeKind::*;
        assert_eq!(
            d(r#"{"r":["a"]}"#, r#"{"r":["a","b","c"]}"#),
            vec![(Added, "/r/1".to_string()), (Added, "/r/2".to_string())]
        );
    }

    #[test]
    fn keys_are_escaped_in_pointers() {
        use ChangeKind::*;
        assert_eq!(
            d(r#"{"a/description":"x"}"#, r#"{"a/description":"y"}"#),
            vec![(Modified, "/a~1description".to_string())]
        );
    }
}
