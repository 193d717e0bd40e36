//! Small text helpers for messages that quote untrusted input.
#![warn(clippy::must_use_candidate)] // pure decisions: a result dropped is a bug

/// The first `max` characters of `s`, with `…` when cut: error messages quote bad input without
/// echoing a megabyte back.
#[must_use]
pub fn ellipsize(s: &str, max: usize) -> String {
    let mut chars = s.char_indices();
    match chars.nth(max) {
        None => s.to_owned(),
        Some((cut, _)) => format!("{}…", s.get(..cut).unwrap_or("")),
    }
}

/// At most `max` characters of `s`: its first and last halves around a `…` when cut, so neither
/// end of a rule (its host, where it ends) can be pushed out of view by what is between.
#[must_use]
pub fn ellipsize_middle(s: &str, max: usize) -> String {
    let count = s.chars().count();
    if count <= max {
        return s.to_owned();
    }
    let head = max / 2;
    let tail = max - head;
    let start: String = s.chars().take(head).collect();
    let end: String = s.chars().skip(count - tail).collect();
    format!("{start}…{end}")
}

/// A name someone else wrote (a script's `@name`), as a JSON string: in a tool result's text its
/// end is unmistakable, so a name such as `Helper (does not run): excluded by …` cannot pose as
/// the words that follow it in `match_url`'s line.
#[must_use]
pub fn quoted(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_on_char_boundaries() {
        assert_eq!(ellipsize("abc", 3), "abc");
        assert_eq!(ellipsize("abcd", 3), "abc…");
        assert_eq!(ellipsize("ééé", 2), "éé…");
        assert_eq!(ellipsize("", 0), "");
        assert_eq!(ellipsize_middle("abcdef", 6), "abcdef");
        assert_eq!(ellipsize_middle("abcdefg", 4), "ab…fg");
        assert_eq!(ellipsize_middle("ééééé", 3), "é…éé");
        assert_eq!(ellipsize_middle("abc", 0), "…");
    }
}

/// JSON text as `JSON.stringify` writes it may hold lone UTF-16 surrogates as `\uD800`-style
/// escapes (a JS string can hold them; a Rust string cannot), which serde refuses. Each lone one
/// becomes `\uFFFD`, as the WHATWG encoders do, so such a message gets an ordinary answer
/// instead of a parse error that carries no id. Pairs and everything else are left alone.
#[must_use]
pub fn repair_lone_surrogates(text: &str) -> std::borrow::Cow<'_, str> {
    let b = text.as_bytes();
    let hex_at = |i: usize| -> Option<u16> {
        let digits = b.get(i..i + 4)?;
        let s = std::str::from_utf8(digits).ok()?;
        u16::from_str_radix(s, 16).ok()
    };
    let escape_at = |i: usize| -> Option<u16> {
        if b.get(i) == Some(&b'\\') && b.get(i + 1) == Some(&b'u') {
            hex_at(i + 2)
        } else {
            None
        }
    };
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while i < b.len() {
        if b.get(i) != Some(&b'\\') {
            i += 1;
            continue;
        }
        let Some(unit) = escape_at(i) else {
            // Any other escape (including `\\`) is two bytes: skip both so `\\u` is not misread.
            i += 2;
            continue;
        };
        let lone = match unit {
            0xD800..=0xDBFF => match escape_at(i + 6) {
                Some(0xDC00..=0xDFFF) => {
                    i += 12;
                    continue;
                }
                _ => true,
            },
            0xDC00..=0xDFFF => true,
            _ => false,
        };
        if lone {
            let o = out.get_or_insert_with(|| String::with_capacity(text.len()));
            o.push_str(text.get(copied..i).unwrap_or(""));
            o.push_str("\\ufffd");
            copied = i + 6;
        }
        i += 6;
    }
    match out {
        None => std::borrow::Cow::Borrowed(text),
        Some(mut o) => {
            o.push_str(text.get(copied..).unwrap_or(""));
            std::borrow::Cow::Owned(o)
        }
    }
}

/// Parses JSON text from the JS side (see [`repair_lone_surrogates`]).
pub fn parse_json(text: &str) -> Result<serde_json::Value, serde_json::Error> {
    serde_json::from_str(&repair_lone_surrogates(text))
}

#[cfg(test)]
mod surrogate_tests {
    use super::*;

    #[test]
    fn lone_surrogates_become_replacement_characters() {
        assert_eq!(repair_lone_surrogates(r#""a\ud800b""#), r#""a\ufffdb""#);
        assert_eq!(repair_lone_surrogates(r#""\udc00""#), r#""\ufffd""#);
        assert_eq!(
            repair_lone_surrogates(r#""\ud800\ud800""#),
            r#""\ufffd\ufffd""#
        );
        // A valid pair, an escaped backslash before "u", and plain text are untouched.
        for ok in [
            r#""\ud83d\ude00""#,
            r#""\\ud800""#,
            r#""\u00e9 plain""#,
            "",
            r"\",
            r#""\u12"#,
        ] {
            assert_eq!(repair_lone_surrogates(ok), ok);
        }
        let v = parse_json(r#"{"s": "x\ud800"}"#).unwrap();
        assert_eq!(v["s"], "x\u{fffd}");
        assert_eq!(parse_json(r#""\ud83d\ude00""#).unwrap(), "😀");
    }
}
