//! JSON read and written without serde, for the probe module (`probe/`). It is compiled in the
//! worker's first turn and its first call is compiled lazily on the way to the reply of a cold
//! probe, so every function it reaches is on the cold start's path; serde_json's generic parser,
//! `Value` tree and writer were most of that module (ARCHITECTURE.md, Decisions: the probe
//! module's first call). Here:
//! - [`parse`] builds a [`Json`] tree that borrows the text: bounded in depth, never panicking,
//!   accepting exactly the texts serde_json accepts (one value, no trailing text, no control
//!   character in a string, no number past f64's range, its depth) and, as `text::parse_json`
//!   does for serde, reading a lone UTF-16 surrogate escape as U+FFFD. A number keeps its text.
//! - [`JsonView`] is what a decoder asks of a value. Both [`Json`] and serde_json's `Value` give
//!   it, so the stored policy has one decoder, whichever module reads it.
//! - [`write_str`] and [`write_json`] write JSON text as serde_json writes it.
#![warn(clippy::must_use_candidate)] // pure decisions: a result dropped is a bug

use std::borrow::Cow;

/// Deeper nesting is refused where serde_json refuses it (its 128th nested array or object): the
/// parser recurses once per level.
pub const MAX_DEPTH: usize = 127;

/// The error of a text nested deeper than [`MAX_DEPTH`] (the probe's refusal says so).
pub const TOO_DEEP: &str = "nested too deeply";

/// A parsed JSON value, borrowing its text.
#[derive(Debug, Clone, PartialEq)]
pub enum Json<'a> {
    Null,
    Bool(bool),
    /// The number as written: valid JSON number syntax.
    Number(&'a str),
    String(Cow<'a, str>),
    Array(Vec<Json<'a>>),
    /// Members in the order written; a key written twice is looked up as its last (`JsonView::get`),
    /// as serde_json's map keeps the last.
    Object(Vec<(Cow<'a, str>, Json<'a>)>),
}

/// Why a text is not one JSON value, and where (a byte offset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub what: &'static str,
    pub at: usize,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at byte {}", self.what, self.at)
    }
}

/// Exactly one JSON value, with only whitespace around it.
pub fn parse(text: &str) -> Result<Json<'_>, ParseError> {
    let mut p = Parser { text, at: 0 };
    let v = p.value(0)?;
    p.skip_ws();
    if p.at < text.len() {
        return Err(p.error("trailing characters"));
    }
    Ok(v)
}

struct Parser<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Parser<'a> {
    fn error(&self, what: &'static str) -> ParseError {
        ParseError { what, at: self.at }
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json<'a>, ParseError> {
        self.skip_ws();
        match self.peek() {
            None => Err(self.error("EOF while parsing a value")),
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => Ok(Json::String(self.string()?)),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => {
                for (word, v) in [
                    ("null", Json::Null),
                    ("true", Json::Bool(true)),
                    ("false", Json::Bool(false)),
                ] {
                    if self
                        .text
                        .get(self.at..)
                        .is_some_and(|r| r.starts_with(word))
                    {
                        self.at += word.len();
                        return Ok(v);
                    }
                }
                Err(self.error("expected a value"))
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Json<'a>, ParseError> {
        if depth > MAX_DEPTH {
            return Err(self.error(TOO_DEEP));
        }
        self.at += 1; // `{`
        let mut members = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(Json::Object(members));
        }
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(self.error("expected a key"));
            }
            let key = self.string()?;
            self.skip_ws();
            if self.peek() != Some(b':') {
                return Err(self.error("expected `:`"));
            }
            self.at += 1;
            members.push((key, self.value(depth)?));
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(Json::Object(members));
                }
                _ => return Err(self.error("expected `,` or `}`")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Json<'a>, ParseError> {
        if depth > MAX_DEPTH {
            return Err(self.error(TOO_DEEP));
        }
        self.at += 1; // `[`
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(Json::Array(items));
        }
        loop {
            items.push(self.value(depth)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(Json::Array(items));
                }
                _ => return Err(self.error("expected `,` or `]`")),
            }
        }
    }

    fn number(&mut self) -> Result<Json<'a>, ParseError> {
        let start = self.at;
        let digits = |p: &mut Self| {
            let from = p.at;
            while matches!(p.peek(), Some(b'0'..=b'9')) {
                p.at += 1;
            }
            p.at > from
        };
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        match self.peek() {
            Some(b'0') => self.at += 1,
            Some(b'1'..=b'9') => {
                digits(self);
            }
            _ => return Err(self.error("invalid number")),
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            if !digits(self) {
                return Err(self.error("invalid number"));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if !digits(self) {
                return Err(self.error("invalid number"));
            }
        }
        // A leading zero is a number of its own: `01` is `0` then trailing text, as in serde_json.
        let n = self
            .text
            .get(start..self.at)
            .ok_or_else(|| self.error("invalid number"))?;
        // serde_json refuses a number past f64's range (`1e400`): so does this reader.
        if !is_short_integer(n) && parse_f64(n).is_none() {
            return Err(self.error("number out of range"));
        }
        Ok(Json::Number(n))
    }

    /// A string literal at `"`; borrowed when it holds no escape.
    fn string(&mut self) -> Result<Cow<'a, str>, ParseError> {
        self.at += 1; // `"`
        let start = self.at;
        let mut owned: Option<String> = None;
        let mut copied = start;
        loop {
            match self.peek() {
                None => return Err(self.error("EOF while parsing a string")),
                Some(b'"') => {
                    let tail = self.text.get(copied..self.at).unwrap_or("");
                    self.at += 1;
                    return Ok(match owned {
                        None => Cow::Borrowed(tail),
                        Some(mut s) => {
                            s.push_str(tail);
                            Cow::Owned(s)
                        }
                    });
                }
                Some(b'\\') => {
                    let s = owned.get_or_insert_with(String::new);
                    s.push_str(self.text.get(copied..self.at).unwrap_or(""));
                    self.at += 1;
                    let c = self.escape()?;
                    s.push(c);
                    copied = self.at;
                }
                Some(0..=0x1f) => return Err(self.error("control character in a string")),
                // UTF-8 continuation and lead bytes are copied as they are: the text is a `str`.
                Some(_) => self.at += 1,
            }
        }
    }

    /// The character of an escape after its `\`.
    fn escape(&mut self) -> Result<char, ParseError> {
        let Some(b) = self.peek() else {
            return Err(self.error("EOF while parsing a string"));
        };
        self.at += 1;
        Ok(match b {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let unit = self.hex4()?;
                match unit {
                    0xD800..=0xDBFF => {
                        // A high surrogate: a pair only if a low one follows at once; else a lone
                        // one, read as U+FFFD (what `text::parse_json` does before serde reads).
                        let rest = self.text.as_bytes().get(self.at..self.at + 2);
                        if rest == Some(b"\\u".as_slice()) {
                            let back = self.at;
                            self.at += 2;
                            let low = self.hex4()?;
                            if (0xDC00..=0xDFFF).contains(&low) {
                                let c = 0x10000
                                    + ((u32::from(unit) - 0xD800) << 10)
                                    + (u32::from(low) - 0xDC00);
                                return Ok(char::from_u32(c).unwrap_or('\u{FFFD}'));
                            }
                            self.at = back;
                        }
                        '\u{FFFD}'
                    }
                    0xDC00..=0xDFFF => '\u{FFFD}',
                    u => char::from_u32(u32::from(u)).unwrap_or('\u{FFFD}'),
                }
            }
            _ => {
                self.at -= 1;
                return Err(self.error("invalid escape"));
            }
        })
    }

    fn hex4(&mut self) -> Result<u16, ParseError> {
        let digits = self
            .text
            .get(self.at..self.at + 4)
            .filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| self.error("invalid \\u escape"))?;
        let unit = u16::from_str_radix(digits, 16).map_err(|_| self.error("invalid \\u escape"))?;
        self.at += 4;
        Ok(unit)
    }
}

/// What a decoder reads of a JSON value: given alike by [`Json`] and serde_json's `Value`, so one
/// decoder serves both (the answers agree: `tests` below hold them equal on the same texts).
pub trait JsonView {
    /// The member `key` of an object (its last, if written twice); `None` for anything else.
    fn get(&self, key: &str) -> Option<&Self>;
    fn is_object(&self) -> bool;
    fn is_null(&self) -> bool;
    fn as_bool(&self) -> Option<bool>;
    fn as_str(&self) -> Option<&str>;
    fn is_number(&self) -> bool;
    /// A finite number (every JSON number serde_json accepts).
    fn as_f64(&self) -> Option<f64>;
    /// A number written as a non-negative integer that fits in a `u64`.
    fn as_u64(&self) -> Option<u64>;
    fn as_array(&self) -> Option<&[Self]>
    where
        Self: Sized;
    /// The value as compact JSON text (a number as written, for `Json`; as serde_json writes
    /// it back, for `Value`).
    fn to_json(&self) -> String;
}

impl JsonView for Json<'_> {
    fn get(&self, key: &str) -> Option<&Self> {
        match self {
            Json::Object(members) => members.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
    fn is_object(&self) -> bool {
        matches!(self, Json::Object(_))
    }
    fn is_null(&self) -> bool {
        matches!(self, Json::Null)
    }
    fn as_bool(&self) -> Option<bool> {
        match self {
            Json::Bool(b) => Some(*b),
            _ => None,
        }
    }
    fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }
    fn is_number(&self) -> bool {
        matches!(self, Json::Number(_))
    }
    fn as_f64(&self) -> Option<f64> {
        match self {
            Json::Number(n) if is_short_integer(n) => n.parse::<u64>().ok().map(|i| i as f64),
            Json::Number(n) => parse_f64(n),
            _ => None,
        }
    }
    fn as_u64(&self) -> Option<u64> {
        match self {
            Json::Number(n) if n.bytes().all(|b| b.is_ascii_digit()) => n.parse().ok(),
            _ => None,
        }
    }
    fn as_array(&self) -> Option<&[Self]> {
        match self {
            Json::Array(items) => Some(items),
            _ => None,
        }
    }
    fn to_json(&self) -> String {
        let mut out = String::new();
        write_json(&mut out, self);
        out
    }
}

impl JsonView for serde_json::Value {
    fn get(&self, key: &str) -> Option<&Self> {
        self.as_object().and_then(|m| m.get(key))
    }
    fn is_object(&self) -> bool {
        self.is_object()
    }
    fn is_null(&self) -> bool {
        self.is_null()
    }
    fn as_bool(&self) -> Option<bool> {
        self.as_bool()
    }
    fn as_str(&self) -> Option<&str> {
        self.as_str()
    }
    fn is_number(&self) -> bool {
        self.is_number()
    }
    fn as_f64(&self) -> Option<f64> {
        self.as_f64()
    }
    fn as_u64(&self) -> Option<u64> {
        self.as_u64()
    }
    fn as_array(&self) -> Option<&[Self]> {
        self.as_array().map(Vec::as_slice)
    }
    fn to_json(&self) -> String {
        self.to_string()
    }
}

/// The numbers a probe's path reads are times in ms (`Date.now()`): integers of 13 digits, exact
/// in an f64, read without the general parser (and its tables) that a cold probe would otherwise
/// compile on its way.
fn is_short_integer(n: &str) -> bool {
    n.len() <= 15 && n.bytes().all(|b| b.is_ascii_digit())
}

/// Any other number: a function of its own, so that a cold probe, which reads only integers, does
/// not compile the general parser (wasm functions are compiled when first called).
#[inline(never)]
fn parse_f64(n: &str) -> Option<f64> {
    n.parse::<f64>().ok().filter(|x| x.is_finite())
}

/// `s` as a JSON string literal, escaped as serde_json escapes: `"`, `\`, and control characters
/// (the common ones by letter, the rest as `\u00XX`); everything else as it is.
pub fn write_str(out: &mut String, s: &str) {
    out.push('"');
    let mut copied = 0;
    for (i, b) in s.bytes().enumerate() {
        let esc = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(s.get(copied..i).unwrap_or(""));
        if esc.is_empty() {
            out.push_str("\\u00");
            out.push_str(&crate::guard::digest::hex_lower(&[b]));
        } else {
            out.push_str(esc);
        }
        copied = i + 1;
    }
    out.push_str(s.get(copied..).unwrap_or(""));
    out.push('"');
}

/// `v` as compact JSON text (numbers as they were written).
pub fn write_json(out: &mut String, v: &Json<'_>) {
    match v {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Number(n) => out.push_str(n),
        Json::String(s) => write_str(out, s),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(out, item);
            }
            out.push(']');
        }
        Json::Object(members) => {
            out.push('{');
            for (i, (k, item)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_str(out, k);
                out.push(':');
                write_json(out, item);
            }
            out.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// Texts both parsers read, and the answers `JsonView` gives for them must agree.
    const AGREE: &[&str] = &[
        r#"{"a": 1, "b": [true, false, null], "c": {"d": "e"}}"#,
        r#"  {"k": "v", "k": "last"}  "#,
        r#""plain""#,
        r#""esc \" \\ \/ \b \f \n \r \t \u00e9 \ud83d\ude00""#,
        r#"[0, -0, 1.5, -2e3, 1E+2, 18446744073709551615, 18446744073709551616, 123456789012345678901234567890]"#,
        r#"{"": 0, "\u0063hannel": "key written with an escape"}"#,
        "[]",
        "{}",
        "0",
        "-1",
        "1.0",
    ];

    fn view_eq(a: &Json<'_>, b: &Value) {
        assert_eq!(a.is_object(), JsonView::is_object(b));
        assert_eq!(a.is_null(), JsonView::is_null(b));
        assert_eq!(a.as_bool(), JsonView::as_bool(b));
        assert_eq!(a.as_str(), JsonView::as_str(b));
        assert_eq!(a.is_number(), JsonView::is_number(b));
        assert_eq!(a.as_f64(), JsonView::as_f64(b), "{a:?} vs {b}");
        assert_eq!(a.as_u64(), JsonView::as_u64(b), "{a:?} vs {b}");
        match (a.as_array(), JsonView::as_array(b)) {
            (Some(x), Some(y)) => {
                assert_eq!(x.len(), y.len());
                x.iter().zip(y).for_each(|(x, y)| view_eq(x, y));
            }
            (x, y) => assert_eq!(x.is_some(), y.is_some()),
        }
        if let Value::Object(m) = b {
            for k in m.keys() {
                view_eq(a.get(k).unwrap(), JsonView::get(b, k).unwrap());
            }
            assert!(a.get("absent key").is_none());
        }
    }

    #[test]
    fn reads_what_serde_json_reads_the_same_way() {
        for text in AGREE {
            let ours = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            let theirs: Value = serde_json::from_str(text).unwrap();
            view_eq(&ours, &theirs);
        }
    }

    #[test]
    fn refuses_what_serde_json_refuses() {
        for text in [
            "",
            " ",
            "{",
            "[1,]",
            "{\"a\":1,}",
            "{\"a\" 1}",
            "{1: 2}",
            "01",
            "1.",
            ".5",
            "1e",
            "-",
            "+1",
            "tru",
            "nul",
            "\"open",
            "\"tab\there\"",
            "\"\\x\"",
            "\"\\u12\"",
            "[1] [2]",
            "{} x",
            "NaN",
            "Infinity",
            "'single'",
        ] {
            assert!(parse(text).is_err(), "{text:?} parsed");
            assert!(serde_json::from_str::<Value>(text).is_err(), "{text:?}");
        }
    }

    #[test]
    fn a_lone_surrogate_reads_as_the_replacement_character() {
        for (text, want) in [
            (r#""a\ud800b""#, "a\u{FFFD}b"),
            (r#""\udc00""#, "\u{FFFD}"),
            (r#""\ud800\u0041""#, "\u{FFFD}A"),
            (r#""\ud800\ud800\udc00""#, "\u{FFFD}\u{10000}"),
        ] {
            assert_eq!(parse(text).unwrap().as_str(), Some(want), "{text}");
            // What serde_json reads after the shell's repair.
            let repaired = crate::text::parse_json(text).unwrap();
            assert_eq!(repaired.as_str(), Some(want), "{text}");
        }
    }

    #[test]
    fn depth_is_bounded_without_recursing_past_it() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(parse(&deep(MAX_DEPTH)).is_ok());
        assert_eq!(
            parse(&deep(MAX_DEPTH + 1)).unwrap_err().what,
            "nested too deeply"
        );
        // Far deeper than any stack holds: refused at depth MAX_DEPTH + 1, not overflowed.
        assert!(parse(&"[{\"a\":".repeat(100_000)).is_err());
    }

    #[test]
    fn numbers_keep_their_text_and_read_as_serde_json_reads_them() {
        let v = parse("[1E2, 12, 1.25, -0.0]").unwrap();
        let items = v.as_array().unwrap();
        assert_eq!(items[0].as_f64(), Some(100.0));
        assert_eq!(items[0].as_u64(), None);
        assert_eq!(items[1].as_u64(), Some(12));
        assert_eq!(items[2].as_u64(), None);
        let mut out = String::new();
        write_json(&mut out, &v);
        assert_eq!(out, "[1E2,12,1.25,-0.0]");
        // Past f64's range: refused by both.
        for text in ["1e400", "-1e400", &"9".repeat(400)] {
            assert_eq!(parse(text).unwrap_err().what, "number out of range");
            assert!(serde_json::from_str::<Value>(text).is_err());
        }
    }

    #[test]
    fn writes_strings_as_serde_json_writes_them() {
        let all: String = (0u8..0x80)
            .map(char::from)
            .chain("é😀\u{2028}".chars())
            .collect();
        let mut out = String::new();
        write_str(&mut out, &all);
        assert_eq!(out, serde_json::to_string(&all).unwrap());
        let text = r#"{"a":[1,"x\n",null,true],"b":{}}"#;
        let mut out = String::new();
        write_json(&mut out, &parse(text).unwrap());
        assert_eq!(out, text);
        assert_eq!(
            serde_json::from_str::<Value>(&out).unwrap(),
            json!({"a": [1, "x\n", null, true], "b": {}})
        );
    }
}
