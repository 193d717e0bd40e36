//! The audit log's argument digest: sha256 of the arguments' JSON text with sorted keys.
//!
//! The audit log records a digest of a tool call's arguments, never the values, so two calls with
//! the same arguments must hash the same whatever key order or whitespace the caller used, and any
//! change of value must change the hash.
//!
//! Decided: the canonical text is `serde_json`'s own compact output. Without the
//! `preserve_order` feature (a test below fails if anything turns it on) a `Value`'s object is a
//! `BTreeMap`, so keys come out sorted (by UTF-8 bytes), with no whitespace, strings escaped as
//! `JSON.stringify` escapes them, and each number in one fixed form. That is deterministic, which
//! is all the digest needs: nothing outside the provider recomputes it, so RFC 8785 (JCS) — and
//! the ~400 lines of ECMAScript number formatting it took — buys nothing here. The text differs
//! from JCS only for floats (`1.0`, `1e21` where JCS writes `1`, `1e+21`) and for keys that mix
//! U+E000..U+FFFF with astral characters; arguments of today's tools hold neither, so digests of
//! the same call before and after this change are equal (see `known_vector`).
//!
//! Depth: `serde_json` serializes recursively. Arguments reach this module parsed by
//! `serde_json`, whose parser refuses nesting deeper than 128, so the recursion is bounded.
#![warn(clippy::must_use_candidate)] // pure decisions: a result dropped is a bug

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The canonical JSON text of `value` (see the module notes).
#[must_use]
pub fn canonical_json(value: &Value) -> String {
    value.to_string()
}

/// Lowercase hex SHA-256 of [`canonical_json`]`(value)`, hashed while it is written so the text
/// is never held in memory.
#[must_use]
pub fn digest_hex(value: &Value) -> String {
    let mut sink = HashSink(Sha256::new());
    // Writing a `Value` cannot fail and the sink never does.
    let _ = serde_json::to_writer(&mut sink, value);
    hex_lower(&sink.0.finalize())
}

/// Lowercase hex SHA-256 of raw bytes; shared with the rate limiter for bounded keys.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex_lower(&Sha256::digest(bytes))
}

/// Lowercase hex, two digits a byte. By nibble, not `write!("{b:02x}")`: the formatter's padding
/// path cost a write ~30 µs of its digests' hex (`PROFILE_SELF=1 make profile`).
pub(crate) fn hex_lower(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        for nibble in [b >> 4, b & 0xf] {
            // A nibble is below 16, so `from_digit` always has a digit for it.
            s.push(char::from_digit(u32::from(nibble), 16).unwrap_or('0'));
        }
    }
    s
}

struct HashSink(Sha256);

impl std::io::Write for HashSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(s: &str) -> Value {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn known_vector() {
        let v = json!({"b": [true, null, "x"], "a": 1});
        assert_eq!(canonical_json(&v), r#"{"a":1,"b":[true,null,"x"]}"#);
        // printf %s '{"a":1,"b":[true,null,"x"]}' | sha256sum — the same as before serde_json
        // wrote the text, so audit digests of such arguments did not change.
        assert_eq!(
            digest_hex(&v),
            "eca8cfb31ab74533e1eb2f4c74d2d55dfe3c79ac704787e54be8647ea7777eb1"
        );
        assert_eq!(digest_hex(&v), sha256_hex(canonical_json(&v).as_bytes()));
    }

    #[test]
    fn keys_come_out_sorted_so_preserve_order_is_off() {
        // If any dependency turned on serde_json's `preserve_order`, the order of the input
        // would survive and equal arguments would hash differently.
        let v = parse(r#"{"b": 1, "a": {"d": 2, "c": 3}}"#);
        assert_eq!(canonical_json(&v), r#"{"a":{"c":3,"d":2},"b":1}"#);
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
            json!({"a": 9007199254740993u64, "b": [true, null, "x"], "c": {"d": 1.5}}),
        ];
        let d = digest_hex(&base);
        for v in &variants {
            assert_ne!(digest_hex(v), d, "{v}");
        }
        // Large integers stay exact: two that JS would round to one double differ.
        assert_ne!(
            digest_hex(&json!(9007199254740993u64)),
            digest_hex(&json!(9007199254740992u64))
        );
    }

    #[test]
    fn strings_escaped_like_json_stringify() {
        let v = json!("q\" b\\ \u{8}\u{c}\n\r\t \u{0}\u{1f}\u{7f} / \u{2028} é 😀");
        assert_eq!(
            canonical_json(&v),
            "\"q\\\" b\\\\ \\b\\f\\n\\r\\t \\u0000\\u001f\u{7f} / \u{2028} é 😀\""
        );
        assert_eq!(canonical_json(&json!({"a\"\n": 0})), "{\"a\\\"\\n\":0}");
    }

    #[test]
    fn the_deepest_parsable_value_digests() {
        // serde_json's parser stops at 128 levels; the deepest value it gives back is fine.
        let deep = format!("{}{}", "[".repeat(127), "]".repeat(127));
        let v = parse(&deep);
        assert_eq!(digest_hex(&v), sha256_hex(deep.as_bytes()));
        assert!(
            serde_json::from_str::<Value>(&format!("{}{}", "[".repeat(200), "]".repeat(200)))
                .is_err()
        );
    }
}
