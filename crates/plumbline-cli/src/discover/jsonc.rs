//! JSON with comments.

/// Blanks `//` and `/* */` comments and trailing commas outside strings, byte
/// for byte, so that a syntax error still reports the line and column of the
/// original file.
pub(super) fn strip_jsonc(text: &str) -> String {
    let mut bytes = text.as_bytes().to_vec();
    let blank = |b: &mut u8| {
        if *b != b'\n' && *b != b'\r' {
            *b = b' ';
        }
    };
    // Comments.
    let mut i = 0;
    let mut in_string = false;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match b {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
        } else if b == b'"' {
            in_string = true;
        } else if b == b'/' && bytes.get(i + 1) == Some(&b'/') {
            while i < bytes.len() && bytes[i] != b'\n' {
                blank(&mut bytes[i]);
                i += 1;
            }
            continue;
        } else if b == b'/' && bytes.get(i + 1) == Some(&b'*') {
            let end = bytes[i + 2..]
                .windows(2)
                .position(|w| w == b"*/")
                .map_or(bytes.len(), |p| i + 2 + p + 2);
            for b in &mut bytes[i..end] {
                blank(b);
            }
            i = end;
            continue;
        }
        i += 1;
    }
    // Trailing commas.
    let mut in_string = false;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match b {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
        } else if b == b'"' {
            in_string = true;
        } else if b == b',' {
            let next = bytes[i + 1..].iter().find(|c| !c.is_ascii_whitespace());
            if matches!(next, Some(b'}' | b']')) {
                bytes[i] = b' ';
            }
        }
        i += 1;
    }
    // Only ASCII bytes were replaced, and only whole comments (which may
    // hold multi-byte characters, all blanked), so this stays UTF-8.
    String::from_utf8(bytes).unwrap_or_else(|_| text.to_owned())
}
