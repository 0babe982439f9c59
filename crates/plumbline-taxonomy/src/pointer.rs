//! RFC 6901 JSON Pointers (clarification C4).

use crate::json::Value;

/// Appends one reference token to `pointer`, escaping `~` as `~0` and `/`
/// as `~1`.
pub fn push_token(pointer: &mut String, token: &str) {
    pointer.push('/');
    if !token.contains(['~', '/']) {
        pointer.push_str(token);
        return;
    }
    for c in token.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            c => pointer.push(c),
        }
    }
}

/// Joins unescaped tokens into a pointer: `["a/b", "c"]` → `/a~1b/c`.
pub fn from_tokens<S: AsRef<str>>(tokens: &[S]) -> String {
    let mut p = String::new();
    for t in tokens {
        push_token(&mut p, t.as_ref());
    }
    p
}

/// The value at `tokens` (already unescaped) below `root`: object members
/// by key, array elements by a decimal index without leading zeros.
pub fn resolve<'v, S: AsRef<str>>(root: &'v Value, tokens: &[S]) -> Option<&'v Value> {
    let mut v = root;
    for t in tokens {
        let t = t.as_ref();
        v = match v {
            Value::Object(m) => m.get(t)?,
            Value::Array(a) => a.get(array_index(t)?)?,
            _ => return None,
        };
    }
    Some(v)
}

/// An RFC 6901 array index: `0`, or digits without a leading zero.
pub fn array_index(token: &str) -> Option<usize> {
    let valid = !token.is_empty()
        && token.bytes().all(|b| b.is_ascii_digit())
        && (token == "0" || !token.starts_with('0'));
    if valid {
        token.parse().ok()
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;

    #[test]
    fn escapes_tilde_and_slash() {
        assert_eq!(
            from_tokens(&["a/description", "~x", ""]),
            "/a~1description/~0x/"
        );
        assert_eq!(from_tokens::<&str>(&[]), "");
    }

    #[test]
    fn resolves_objects_and_arrays() {
        let v = parse(br#"{"a":{"b/c":[10,{"d":true}]}}"#).unwrap();
        assert_eq!(
            resolve(&v, &["a", "b/c", "1", "d"]),
            Some(&Value::Bool(true))
        );
        assert_eq!(resolve(&v, &["a", "b/c", "01"]), None);
        assert_eq!(resolve(&v, &["a", "x"]), None);
    }
}
