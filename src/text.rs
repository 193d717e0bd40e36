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

/// A time the provider recorded (ms since the epoch, its clock) as the agent reads it in a
/// result's text: UTC, to the second (`2026-12-05T07:43:09Z`). Outside years 1970–9999 (a stored
/// value nobody checked) it stays the number it is.
#[must_use]
pub fn utc(ms: f64) -> String {
    const MAX_MS: f64 = 253_402_300_800_000.0; // 10000-01-01T00:00:00Z
    if !(0.0..MAX_MS).contains(&ms) {
        return format!("{ms} ms since the epoch");
    }
    // In range: a whole number of seconds below 2^38 fits an i64.
    #[allow(clippy::cast_possible_truncation)]
    let secs = (ms / 1000.0).floor() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days: the proleptic Gregorian date of a day count.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_reads_as_a_calendar_time() {
        assert_eq!(utc(0.0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(1_796_456_389_188.0), "2026-12-05T07:39:49Z");
        // A leap day, the day after, a century that is not a leap year and one that is.
        assert_eq!(utc(951_782_400_000.0), "2000-02-29T00:00:00Z");
        assert_eq!(utc(951_868_799_999.0), "2000-02-29T23:59:59Z");
        assert_eq!(utc(4_107_542_400_000.0), "2100-03-01T00:00:00Z");
        assert_eq!(utc(253_402_300_799_999.0), "9999-12-31T23:59:59Z");
        for odd in [-1.0, f64::NAN, f64::INFINITY, 253_402_300_800_000.0, 1e300] {
            assert!(utc(odd).ends_with("ms since the epoch"), "{odd}");
        }
    }

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
