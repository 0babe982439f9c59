//! RFC 6901 JSON Pointers (clarification C4).

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_tilde_and_slash() {
        let mut p = String::new();
        for t in ["a/description", "~x", "plain", ""] {
            push_token(&mut p, t);
        }
        assert_eq!(p, "/a~1description/~0x/plain/");
    }
}
