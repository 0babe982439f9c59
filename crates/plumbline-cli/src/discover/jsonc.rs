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
    // Comments first, so that a comma before a commented-out line is seen
    // next to what follows it.
    outside_strings(&mut bytes, |bytes, i| match (bytes[i], bytes.get(i + 1)) {
        (b'/', Some(b'/')) => {
            let end = bytes[i..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(bytes.len(), |p| i + p);
            bytes[i..end].iter_mut().for_each(blank);
            end
        }
        (b'/', Some(b'*')) => {
            let end = bytes[i + 2..]
                .windows(2)
                .position(|w| w == b"*/")
                .map_or(bytes.len(), |p| i + 2 + p + 2);
            bytes[i..end].iter_mut().for_each(blank);
            end
        }
        _ => i + 1,
    });
    // Trailing commas.
    outside_strings(&mut bytes, |bytes, i| {
        if bytes[i] == b',' {
            let next = bytes[i + 1..].iter().find(|c| !c.is_ascii_whitespace());
            if matches!(next, Some(b'}' | b']')) {
                bytes[i] = b' ';
            }
        }
        i + 1
    });
    // Only ASCII bytes were replaced, and only whole comments (which may
    // hold multi-byte characters, all blanked), so this stays UTF-8.
    String::from_utf8(bytes).unwrap_or_else(|_| text.to_owned())
}

/// Calls `at` at each byte outside JSON string literals; it returns where
/// to go on from (past what it handled).
fn outside_strings(bytes: &mut [u8], mut at: impl FnMut(&mut [u8], usize) -> usize) {
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
            i += 1;
        } else if b == b'"' {
            in_string = true;
            i += 1;
        } else {
            i = at(bytes, i);
        }
    }
}
