//! Canonical JSON (RFC 8785 / JCS style) and its SHA-256, for the audit log.
//!
//! The audit log records a digest of a tool call's arguments, never the values, so two calls with
//! the same arguments must hash the same whatever key order or whitespace the caller used, and any
//! change of value must change the hash.
//!
//! Edge cases, decided here once so the digest stays stable:
//! - Integers that serde_json holds as `u64`/`i64` are written exactly, in full. JCS (and JS) would
//!   first round them to the nearest `f64` above 2^53; we do not, so two different large integers
//!   never share a digest. Within ±2^53 the output is identical to JCS.
//! - Floats are written as ECMAScript `Number::toString` does (shortest round-trip digits, `1e+21`,
//!   `0.000001`, `-0` → `0`). A non-finite float cannot be inside a `serde_json::Value`; if one ever
//!   were, it is written `null`, as `JSON.stringify` does.
//! - Strings are escaped as `JSON.stringify` escapes them. Rust strings hold no lone surrogates, so
//!   that JCS case cannot arise.
//! - The walk is iterative: a `Value` built in code can be nested deeper than serde_json's parse
//!   limit, and recursion here would overflow the (small, wasm) stack. Memory is linear in the size
//!   of the value, which is already in memory.

use serde_json::{Number, Value};
use sha2::{Digest, Sha256};

/// Canonical JSON text of `value` (RFC 8785 style, see the module notes for edge cases).
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

/// Lowercase hex SHA-256 of [`canonical_json`]`(value)`.
pub fn digest_hex(value: &Value) -> String {
    // Hash while walking so the canonical text is never held twice in memory.
    let mut hasher = HashSink(Sha256::new());
    write_canonical(value, &mut hasher);
    hex_lower(&hasher.0.finalize())
}

/// Lowercase hex SHA-256 of raw bytes; shared with the rate limiter for bounded keys.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex_lower(&Sha256::digest(bytes))
}

fn hex_lower(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(HEX[usize::from(b >> 4)]));
        s.push(char::from(HEX[usize::from(b & 0x0f)]));
    }
    s
}

/// Where canonical text goes: a `String`, or straight into a hasher.
trait Sink {
    fn put(&mut self, s: &str);
}

impl Sink for String {
    fn put(&mut self, s: &str) {
        self.push_str(s);
    }
}

struct HashSink(Sha256);

impl Sink for HashSink {
    fn put(&mut self, s: &str) {
        self.0.update(s.as_bytes());
    }
}

/// Pending output, kept on an explicit stack instead of the call stack.
enum Item<'a> {
    Value(&'a Value),
    /// An object member name: written quoted, followed by `:`.
    Key(&'a str),
    Raw(&'static str),
}

fn write_canonical(root: &Value, out: &mut impl Sink) {
    let mut stack = vec![Item::Value(root)];
    while let Some(item) = stack.pop() {
        match item {
            Item::Raw(s) => out.put(s),
            Item::Key(k) => {
                write_string(k, out);
                out.put(":");
            }
            Item::Value(v) => match v {
                Value::Null => out.put("null"),
                Value::Bool(true) => out.put("true"),
                Value::Bool(false) => out.put("false"),
                Value::Number(n) => write_number(n, out),
                Value::String(s) => write_string(s, out),
                Value::Array(items) => {
                    out.put("[");
                    stack.push(Item::Raw("]"));
                    // Pushed in reverse so they pop in order.
                    for (i, v) in items.iter().enumerate().rev() {
                        stack.push(Item::Value(v));
                        if i > 0 {
                            stack.push(Item::Raw(","));
                        }
                    }
                }
                Value::Object(map) => {
                    out.put("{");
                    stack.push(Item::Raw("}"));
                    let mut members: Vec<(&String, &Value)> = map.iter().collect();
                    // JCS orders by UTF-16 code units, which differs from serde_json's (UTF-8 /
                    // code point) order once keys mix U+E000..U+FFFF with astral characters.
                    members.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
                    for (i, (k, v)) in members.into_iter().enumerate().rev() {
                        stack.push(Item::Value(v));
                        stack.push(Item::Key(k));
                        if i > 0 {
                            stack.push(Item::Raw(","));
                        }
                    }
                }
            },
        }
    }
}

/// Escapes as `JSON.stringify`: `"`, `\`, and controls below U+0020 only; all else literal.
fn write_string(s: &str, out: &mut impl Sink) {
    out.put("\"");
    let mut start = 0;
    // Every byte that needs escaping is ASCII, so each split point is a char boundary.
    for (i, b) in s.bytes().enumerate() {
        let esc: Option<&str> = match b {
            b'"' => Some("\\\""),
            b'\\' => Some("\\\\"),
            0x08 => Some("\\b"),
            0x09 => Some("\\t"),
            0x0a => Some("\\n"),
            0x0c => Some("\\f"),
            0x0d => Some("\\r"),
            _ => None,
        };
        if esc.is_none() && b >= 0x20 {
            continue;
        }
        if let Some(lit) = s.get(start..i) {
            out.put(lit);
        }
        match esc {
            Some(e) => out.put(e),
            None => out.put(&format!("\\u{b:04x}")),
        }
        start = i + 1;
    }
    if let Some(lit) = s.get(start..) {
        out.put(lit);
    }
    out.put("\"");
}

fn write_number(n: &Number, out: &mut impl Sink) {
    if n.is_u64() || n.is_i64() {
        // Exact, see module notes.
        out.put(&n.to_string());
    } else {
        match n.as_f64() {
            Some(x) => out.put(&js_number(x)),
            None => out.put("null"),
        }
    }
}

/// ECMAScript `Number::toString(x)` (ECMA-262 §6.1.6.1.20) for an `f64`.
fn js_number(x: f64) -> String {
    if !x.is_finite() {
        return "null".to_string();
    }
    if x == 0.0 {
        // Also -0.
        return "0".to_string();
    }
    // Rust's `{:e}` gives the shortest round-trip digits, e.g. "1.2345e-7"; only the layout
    // differs from JS.
    let sci = format!("{:e}", x.abs());
    let Some((mantissa, exp)) = sci.split_once('e') else {
        return format!("{x}");
    };
    let Ok(exp) = exp.parse::<i32>() else {
        return format!("{x}");
    };
    let mut digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if let Some(even) = tie_to_even(x.abs(), &digits, exp) {
        digits = even;
    }
    let k = i32::try_from(digits.len()).unwrap_or(i32::MAX);
    // JS's n: the decimal point sits after n digits.
    let n = exp + 1;
    let mut s = String::new();
    if x < 0.0 {
        s.push('-');
    }
    if k <= n && n <= 21 {
        s.push_str(&digits);
        for _ in 0..(n - k) {
            s.push('0');
        }
    } else if 0 < n && n <= 21 {
        let (int, frac) = digits.split_at_checked(n as usize).unwrap_or((&digits, ""));
        s.push_str(int);
        s.push('.');
        s.push_str(frac);
    } else if -6 < n && n <= 0 {
        s.push_str("0.");
        for _ in 0..(-n) {
            s.push('0');
        }
        s.push_str(&digits);
    } else {
        let (first, rest) = digits.split_at_checked(1).unwrap_or((&digits, ""));
        s.push_str(first);
        if !rest.is_empty() {
            s.push('.');
            s.push_str(rest);
        }
        s.push('e');
        s.push(if n - 1 < 0 { '-' } else { '+' });
        s.push_str(&(n - 1).unsigned_abs().to_string());
    }
    s
}

/// ECMA-262 picks, among equally short digit strings that round-trip, the one closest to `x`,
/// and the even one on a tie. Rust's shortest formatting breaks that tie the other way (e.g.
/// 0x43143ff3c1cb0959 = 1424953923781206.25 prints as `...206.3`, JS gives `...206.2`). So when
/// `x` sits exactly halfway between `digits` and a neighbour that also round-trips, return the
/// neighbour if it is the even one. `x` is positive and finite; `exp` is the decimal exponent of
/// the first digit.
fn tie_to_even(x: f64, digits: &str, exp: i32) -> Option<String> {
    let d: u64 = digits.parse().ok()?;
    if d % 2 == 0 {
        return None;
    }
    let k = u32::try_from(digits.len()).ok()?;
    let k_i = i32::try_from(k).ok()?;
    // `digits` stands for d * 10^(exp - k + 1); the half-way points are (10d ± 5) * 10^(exp - k).
    let half_exp = exp.checked_sub(k_i)?;
    let lowest = 10u64.checked_pow(k - 1)?;
    let ten_d = d.checked_mul(10)?;
    let candidates = [
        (ten_d.checked_sub(5)?, d.checked_sub(1)?),
        (ten_d.checked_add(5)?, d.checked_add(1)?),
    ];
    for (half, other) in candidates {
        let same_len = other >= lowest && other < lowest.saturating_mul(10);
        if !same_len || !exactly_equals(x, half, half_exp) {
            continue;
        }
        let text = format!("{other}e{}", half_exp.checked_add(1)?);
        if text.parse::<f64>().ok() == Some(x) {
            return Some(other.to_string());
        }
    }
    None
}

/// Whether the positive finite `x` equals `n * 10^p` exactly. Both sides are factored as
/// odd * 2^e (with 10^p = 5^p * 2^p), so the check needs no big integers: the odd parts are
/// below 2^64 or the answer is no.
fn exactly_equals(x: f64, n: u64, p: i32) -> bool {
    let bits = x.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let frac = bits & ((1u64 << 52) - 1);
    let (m, q) = if biased == 0 {
        (frac, -1074)
    } else {
        (frac | (1u64 << 52), biased - 1075)
    };
    if m == 0 || n == 0 {
        return false;
    }
    let (a, b) = (m.trailing_zeros(), n.trailing_zeros());
    let (m_odd, n_odd) = (m >> a, n >> b);
    // Powers of two must agree: a + q == b + p.
    if i64::from(a) + i64::from(q) != i64::from(b) + i64::from(p) {
        return false;
    }
    // Odd parts: m_odd == n_odd * 5^p (p >= 0), or m_odd * 5^-p == n_odd (p < 0).
    let (mut small, big, times) = if p >= 0 {
        (n_odd, m_odd, p.unsigned_abs())
    } else {
        (m_odd, n_odd, p.unsigned_abs())
    };
    for _ in 0..times {
        match small.checked_mul(5) {
            Some(v) if v <= big => small = v,
            _ => return false,
        }
    }
    small == big
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(s: &str) -> Value {
        serde_json::from_str(s).unwrap()
    }

    fn float(bits: u64) -> Value {
        Value::Number(Number::from_f64(f64::from_bits(bits)).unwrap())
    }

    #[test]
    fn known_vector() {
        let v = json!({"b": [true, null, "x"], "a": 1});
        assert_eq!(canonical_json(&v), r#"{"a":1,"b":[true,null,"x"]}"#);
        // printf %s '{"a":1,"b":[true,null,"x"]}' | sha256sum
        assert_eq!(
            digest_hex(&v),
            "eca8cfb31ab74533e1eb2f4c74d2d55dfe3c79ac704787e54be8647ea7777eb1"
        );
        assert_eq!(digest_hex(&v), sha256_hex(canonical_json(&v).as_bytes()));
    }

    #[test]
    fn key_order_and_whitespace_do_not_matter() {
        let a = parse(r#"{"x":{"q":1,"p":[1,2,{"z":null,"y":"s"}]},"a":false}"#);
        let b = parse(
            "{ \"a\" : false ,\n \"x\" : { \"p\" : [ 1 , 2 , { \"y\" : \"s\", \"z\" : null } ],\t\"q\" : 1 } }",
        );
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_eq!(digest_hex(&a), digest_hex(&b));
        assert_eq!(
            canonical_json(&a),
            r#"{"a":false,"x":{"p":[1,2,{"y":"s","z":null}],"q":1}}"#
        );
    }

    #[test]
    fn any_value_change_changes_digest() {
        let base = json!({"a": 1, "b": [true, null, "x"], "c": {"d": 1.5}});
        let variants = [
            json!({"a": 2, "b": [true, null, "x"], "c": {"d": 1.5}}),
            json!({"a": "1", "b": [true, null, "x"], "c": {"d": 1.5}}),
            json!({"a": 1, "b": [false, null, "x"], "c": {"d": 1.5}}),
            json!({"a": 1, "b": [true, null, "y"], "c": {"d": 1.5}}),
            json!({"a": 1, "b": [null, true, "x"], "c": {"d": 1.5}}),
            json!({"a": 1, "b": [true, null, "x", 0], "c": {"d": 1.5}}),
            json!({"a": 1, "b": [true, null, "x"], "c": {"d": 1.25}}),
            json!({"a": 1, "b": [true, null, "x"], "c": {"e": 1.5}}),
            json!({"a": 1, "b": [true, null, "x"], "c": [1.5]}),
            json!({"a": 1, "b": [true, null, "x"]}),
            json!({"a": 1, "b": [[true], null, "x"], "c": {"d": 1.5}}),
        ];
        let d = digest_hex(&base);
        for v in &variants {
            assert_ne!(digest_hex(v), d, "{v}");
        }
    }

    #[test]
    fn nested_and_empty_containers() {
        let v = json!({"o": {}, "a": [], "n": [[[]], {"k": [{}]}]});
        assert_eq!(
            canonical_json(&v),
            r#"{"a":[],"n":[[[]],{"k":[{}]}],"o":{}}"#
        );
        assert_eq!(canonical_json(&json!([])), "[]");
        assert_eq!(canonical_json(&json!({})), "{}");
        assert_eq!(canonical_json(&Value::Null), "null");
    }

    #[test]
    fn keys_sorted_by_utf16_code_units() {
        // U+10000 is D800 DC00 in UTF-16, so it sorts before U+FF61 although its code point
        // (and UTF-8 bytes) are larger.
        let v = json!({"\u{ff61}": 1, "\u{10000}": 2});
        assert_eq!(canonical_json(&v), "{\"\u{10000}\":2,\"\u{ff61}\":1}");
        // RFC 8785 §3.2.3 sorting example.
        let v = json!({
            "\u{20ac}": "Euro Sign",
            "\r": "Carriage Return",
            "\u{fb33}": "Hebrew Letter Dalet With Dagesh",
            "1": "One",
            "\u{1f600}": "Emoji: Grinning Face",
            "\u{80}": "Control",
            "\u{f6}": "Latin Small Letter O With Diaeresis"
        });
        let expected = "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u{80}\":\"Control\",\
            \"\u{f6}\":\"Latin Small Letter O With Diaeresis\",\"\u{20ac}\":\"Euro Sign\",\
            \"\u{1f600}\":\"Emoji: Grinning Face\",\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}";
        assert_eq!(canonical_json(&v), expected);
    }

    #[test]
    fn strings_escaped_like_json_stringify() {
        let v = json!("q\" b\\ \u{8}\u{c}\n\r\t \u{0}\u{1f}\u{7f} / \u{2028} é 😀");
        assert_eq!(
            canonical_json(&v),
            "\"q\\\" b\\\\ \\b\\f\\n\\r\\t \\u0000\\u001f\u{7f} / \u{2028} é 😀\""
        );
        assert_eq!(canonical_json(&json!("\u{1b}")), "\"\\u001b\"");
        assert_eq!(canonical_json(&json!("")), "\"\"");
        // Escapes in keys too.
        assert_eq!(canonical_json(&json!({"a\"\n": 0})), "{\"a\\\"\\n\":0}");
    }

    #[test]
    fn integers_written_exactly() {
        assert_eq!(canonical_json(&json!(0)), "0");
        assert_eq!(canonical_json(&json!(-17)), "-17");
        assert_eq!(canonical_json(&json!(u64::MAX)), "18446744073709551615");
        assert_eq!(canonical_json(&json!(i64::MIN)), "-9223372036854775808");
        // Distinct even where JS would round both to the same double.
        assert_ne!(
            digest_hex(&json!(9007199254740993u64)),
            digest_hex(&json!(9007199254740992u64))
        );
    }

    #[test]
    fn floats_written_like_ecmascript() {
        let cases = [
            (1.0, "1"),
            (-1.0, "-1"),
            (0.1, "0.1"),
            (-0.0, "0"),
            (1.5, "1.5"),
            (100.0, "100"),
            (1e20, "100000000000000000000"),
            (1e21, "1e+21"),
            (1.5e21, "1.5e+21"),
            (123.456, "123.456"),
            (1e-6, "0.000001"),
            (1e-7, "1e-7"),
            (1.25e-7, "1.25e-7"),
            (0.000123, "0.000123"),
        ];
        for (x, s) in cases {
            assert_eq!(canonical_json(&json!(x)), s, "{x}");
        }
        // Same number, same text: 1.0 parsed as a float and 1 as an integer agree.
        assert_eq!(canonical_json(&parse("1.0")), canonical_json(&parse("1")));
        assert_eq!(js_number(f64::NAN), "null");
        assert_eq!(js_number(f64::INFINITY), "null");
    }

    #[test]
    fn rfc8785_appendix_b_numbers() {
        let table: [(u64, &str); 24] = [
            (0x0000000000000000, "0"),
            (0x8000000000000000, "0"),
            (0x0000000000000001, "5e-324"),
            (0x8000000000000001, "-5e-324"),
            (0x7fefffffffffffff, "1.7976931348623157e+308"),
            (0xffefffffffffffff, "-1.7976931348623157e+308"),
            (0x4340000000000000, "9007199254740992"),
            (0xc340000000000000, "-9007199254740992"),
            (0x4430000000000000, "295147905179352830000"),
            (0x44b52d02c7e14af5, "9.999999999999997e+22"),
            (0x44b52d02c7e14af6, "1e+23"),
            (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
            (0x444b1ae4d6e2ef4e, "999999999999999700000"),
            (0x444b1ae4d6e2ef4f, "999999999999999900000"),
            (0x444b1ae4d6e2ef50, "1e+21"),
            (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
            (0x3eb0c6f7a0b5ed8d, "0.000001"),
            (0x41b3de4355555553, "333333333.3333332"),
            (0x41b3de4355555554, "333333333.33333325"),
            (0x41b3de4355555555, "333333333.3333333"),
            (0x41b3de4355555556, "333333333.3333334"),
            (0x41b3de4355555557, "333333333.33333343"),
            (0xbecbf647612f3696, "-0.0000033333333333333333"),
            (0x43143ff3c1cb0959, "1424953923781206.2"),
        ];
        for (bits, s) in table {
            assert_eq!(canonical_json(&float(bits)), s, "{bits:016x}");
        }
    }

    #[test]
    fn very_deep_value_does_not_overflow() {
        const DEPTH: usize = 200_000;
        let mut v = json!("leaf");
        for i in 0..DEPTH {
            // Not `json!`: it would serialise `v` recursively.
            v = if i % 2 == 0 {
                Value::Array(vec![v])
            } else {
                let mut m = serde_json::Map::new();
                m.insert("k".to_string(), v);
                Value::Object(m)
            };
        }
        let s = canonical_json(&v);
        assert_eq!(
            s.len(),
            "\"leaf\"".len() + DEPTH / 2 * 2 + DEPTH / 2 * "{\"k\":}".len()
        );
        assert_eq!(digest_hex(&v), sha256_hex(s.as_bytes()));
        // serde_json's Drop is recursive; take the value apart iteratively.
        let mut cur = v;
        loop {
            cur = match cur {
                Value::Array(mut a) => match a.pop() {
                    Some(inner) => inner,
                    None => break,
                },
                Value::Object(mut m) => match m.remove("k") {
                    Some(inner) => inner,
                    None => break,
                },
                _ => break,
            };
        }
    }
}
