//! JSON-RPC 2.0 envelopes: classify what arrives, build what leaves. Error codes are the standard
//! ones plus −32001 for authorization, as in the sibling protocols, and −32000 for a session
//! with too many requests being handled.

use serde_json::{json, Map, Value};

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
pub const UNAUTHORIZED: i64 = -32001;
/// A server error (JSON-RPC's −32000…−32099): the session has too many requests being handled;
/// nothing was done, and the request may be sent again once some are answered.
pub const BUSY: i64 = -32000;

/// One inbound message, classified. `Invalid` carries the error response to send (an invalid
/// message without a usable id is answered with `id: null`, as the spec says).
#[derive(Debug, Clone, PartialEq)]
pub enum Inbound {
    Request {
        id: Value,
        method: String,
        params: Map<String, Value>,
    },
    Notification {
        method: String,
        params: Map<String, Value>,
    },
    /// Dropped without a reply: a response (to a server→client request, of which this server
    /// sends none, or an error response with a null or absent id), or a malformed notification
    /// (notifications are never answered).
    Ignored,
    Invalid(Value),
}

pub fn classify(v: &Value) -> Inbound {
    let obj = match v {
        Value::Object(o) => o,
        Value::Array(_) => {
            return Inbound::Invalid(error(
                &Value::Null,
                INVALID_REQUEST,
                "batches are not supported: send one JSON-RPC message at a time",
            ))
        }
        _ => {
            return Inbound::Invalid(error(
                &Value::Null,
                INVALID_REQUEST,
                "a JSON-RPC message must be an object",
            ))
        }
    };
    // A response (no method, a result or an error) is never answered, whatever its id: a
    // client's error response to a message it could not read has `id: null` (JSON-RPC) or none
    // (MCP 2025-11-25), and answering that with −32600 `id: null` invites the same answer back.
    if !obj.contains_key("method") && (obj.contains_key("result") || obj.contains_key("error")) {
        return Inbound::Ignored;
    }
    // An id we can echo: a string or a number. Anything else cannot be answered by id.
    let id = match obj.get("id") {
        None => None,
        Some(v @ (Value::String(_) | Value::Number(_))) => Some(v.clone()),
        Some(_) => {
            return Inbound::Invalid(error(
                &Value::Null,
                INVALID_REQUEST,
                "\"id\" must be a string or a number",
            ))
        }
    };
    let reply_id = id.clone().unwrap_or(Value::Null);
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Inbound::Invalid(error(
            &reply_id,
            INVALID_REQUEST,
            "\"jsonrpc\" must be \"2.0\"",
        ));
    }
    let method = match obj.get("method") {
        Some(Value::String(m)) => m.clone(),
        Some(_) => {
            return Inbound::Invalid(error(
                &reply_id,
                INVALID_REQUEST,
                "\"method\" must be a string",
            ))
        }
        None => return Inbound::Invalid(error(&reply_id, INVALID_REQUEST, "missing \"method\"")),
    };
    let params = match obj.get("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(p)) => p.clone(),
        Some(_) => {
            return match id {
                Some(id) => {
                    Inbound::Invalid(error(&id, INVALID_PARAMS, "\"params\" must be an object"))
                }
                None => Inbound::Ignored,
            }
        }
    };
    match id {
        Some(id) => Inbound::Request { id, method, params },
        None => Inbound::Notification { method, params },
    }
}

/// Serde's nesting limit: a message nested this deep or deeper cannot be parsed into a `Value`.
pub const MAX_DEPTH: usize = 128;

/// Whether serde_json gave up for the nesting, not for a syntax error met first (which then is
/// what is wrong, however deep the rest goes).
pub fn is_too_deep(e: &serde_json::Error) -> bool {
    e.to_string().starts_with("recursion limit exceeded")
}

/// Parses one message as JSON text (`None`: it had no JSON form), or builds the error reply. A
/// message too large or too deep to parse whole still names the request it answers whenever its
/// top-level `"id"` can be read ([`recover_id`]): a reply with `id: null` matches no request,
/// and the caller would wait for its timeout.
pub fn parse_message(text: Option<&str>, max_bytes: usize) -> Result<Value, Value> {
    let Some(t) = text else {
        return Err(error(
            &Value::Null,
            PARSE_ERROR,
            "parse error: the message has no JSON form",
        ));
    };
    if t.len() > max_bytes {
        return Err(too_large(t, t.len(), max_bytes));
    }
    crate::text::parse_json(t).map_err(|e| {
        let id = recover_id(t).unwrap_or(Value::Null);
        if is_too_deep(&e) {
            error(
                &id,
                INVALID_REQUEST,
                &format!("the message is nested {MAX_DEPTH} or more levels deep"),
            )
        } else {
            error(&id, PARSE_ERROR, &format!("parse error: {e}"))
        }
    })
}

/// The answer to a message of `len` bytes over `max_bytes`, with the id read from `head` (the
/// whole text, or only its beginning when the shell did not copy the rest into the wasm).
pub fn too_large(head: &str, len: usize, max_bytes: usize) -> Value {
    error(
        &recover_id(head).unwrap_or(Value::Null),
        INVALID_REQUEST,
        &format!("message of {len} bytes is over the {max_bytes}-byte limit"),
    )
}

/// The end (exclusive) of the JSON string starting at `b[start] == '"'`, or the text's end.
fn string_end(b: &[u8], start: usize) -> usize {
    let mut i = start.saturating_add(1);
    while let Some(&c) = b.get(i) {
        match c {
            b'\\' => i = i.saturating_add(2),
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

/// The top-level `"id"` of a JSON object in text that did not parse whole (too deep, too large,
/// or broken further on): one linear pass that tracks the nesting with a counter — never
/// recursion — and reads only a string or number id, as [`classify`] would accept. The last
/// top-level `"id"` wins, as it does when serde parses an object with a repeated key.
pub fn recover_id(text: &str) -> Option<Value> {
    let b = text.as_bytes();
    let mut depth = 0usize;
    // At depth 1: the next string is a key / the next value belongs to the key "id".
    let (mut expect_key, mut id_value_next) = (false, false);
    let mut found = None;
    let mut i = b
        .iter()
        .position(|c| !matches!(c, b' ' | b'\t' | b'\n' | b'\r'))?;
    if b.get(i) != Some(&b'{') {
        return None; // a batch or a scalar has no id to recover
    }
    while let Some(&c) = b.get(i) {
        match c {
            b'"' => {
                let end = string_end(b, i);
                let token = text.get(i..end).unwrap_or("");
                if depth == 1 && expect_key {
                    id_value_next = token == "\"id\"";
                    expect_key = false;
                } else if depth == 1 && id_value_next {
                    found = serde_json::from_str::<Value>(token).ok();
                    id_value_next = false;
                }
                i = end;
                continue;
            }
            b'{' | b'[' => {
                if depth == 1 && id_value_next {
                    found = None; // an object or array id is not a usable id
                    id_value_next = false;
                }
                depth = depth.saturating_add(1);
                expect_key = depth == 1;
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    break; // the top-level object has ended
                }
            }
            b',' if depth == 1 => expect_key = true,
            b':' | b' ' | b'\t' | b'\n' | b'\r' | b',' => {}
            _ if depth == 1 && id_value_next => {
                // A number or a literal: up to the next delimiter.
                let end = b
                    .get(i..)
                    .and_then(|rest| {
                        rest.iter()
                            .position(|c| matches!(c, b',' | b'}' | b' ' | b'\t' | b'\n' | b'\r'))
                    })
                    .map_or(b.len(), |n| i + n);
                found = text
                    .get(i..end)
                    .and_then(|t| serde_json::from_str::<Value>(t).ok())
                    .filter(Value::is_number);
                id_value_next = false;
                i = end;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    found.filter(|v| v.is_string() || v.is_number())
}

pub fn response(id: &Value, result: Value) -> Value {
    crate::value::object(vec![
        ("jsonrpc", "2.0".into()),
        ("id", id.clone()),
        ("result", result),
    ])
}

pub fn error(id: &Value, code: i64, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

pub fn notification(method: &str) -> Value {
    json!({ "jsonrpc": "2.0", "method": method })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_echoed_exactly() {
        for id in [
            json!(1),
            json!(-7),
            json!(1.5),
            json!("abc"),
            json!(""),
            json!(9007199254740991u64),
        ] {
            let m = json!({"jsonrpc": "2.0", "id": id, "method": "ping"});
            match classify(&m) {
                Inbound::Request { id: got, .. } => {
                    assert_eq!(got, id);
                    assert_eq!(response(&got, json!({}))["id"], id);
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn invalid_messages() {
        let code = |v: Value| match classify(&v) {
            Inbound::Invalid(e) => (e["error"]["code"].as_i64(), e["id"].clone()),
            other => panic!("{other:?}"),
        };
        assert_eq!(code(json!([])), (Some(INVALID_REQUEST), Value::Null));
        assert_eq!(code(json!("x")), (Some(INVALID_REQUEST), Value::Null));
        assert_eq!(
            code(json!({"jsonrpc": "2.0", "id": null, "method": "ping"})),
            (Some(INVALID_REQUEST), Value::Null)
        );
        assert_eq!(
            code(json!({"jsonrpc": "2.0", "id": {}, "method": "ping"})),
            (Some(INVALID_REQUEST), Value::Null)
        );
        assert_eq!(
            code(json!({"jsonrpc": "1.0", "id": 3, "method": "ping"})),
            (Some(INVALID_REQUEST), json!(3))
        );
        assert_eq!(
            code(json!({"jsonrpc": "2.0", "id": 3})),
            (Some(INVALID_REQUEST), json!(3))
        );
        assert_eq!(
            code(json!({"jsonrpc": "2.0", "id": 3, "method": 4})),
            (Some(INVALID_REQUEST), json!(3))
        );
        assert_eq!(
            code(json!({"jsonrpc": "2.0", "id": "a", "method": "x", "params": [1]})),
            (Some(INVALID_PARAMS), json!("a"))
        );
        // Malformed notification: nothing to send.
        assert_eq!(
            classify(&json!({"jsonrpc": "2.0", "method": "x", "params": 3})),
            Inbound::Ignored
        );
    }

    #[test]
    fn notifications_and_responses() {
        assert!(matches!(
            classify(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
            Inbound::Notification { .. }
        ));
        assert_eq!(
            classify(&json!({"jsonrpc": "2.0", "id": 1, "result": {}})),
            Inbound::Ignored
        );
    }

    fn deep(levels: usize) -> String {
        format!("{}1{}", "[".repeat(levels), "]".repeat(levels))
    }

    #[test]
    fn too_deep_or_too_large_still_answers_with_the_id() {
        let msg = format!(
            r#"{{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{{"name":"status","arguments":{{"x":{}}}}}}}"#,
            deep(130)
        );
        let e = parse_message(Some(&msg), 1 << 20).unwrap_err();
        assert_eq!(e["id"], json!(41));
        assert_eq!(e["error"]["code"], json!(INVALID_REQUEST));
        assert!(e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nested 128 or more levels"));
        // A syntax error met before the nesting is what is wrong.
        let broken = format!(r#"{{"jsonrpc":"2.0","id":42,"a":nope,"x":{}"#, deep(130));
        let e = parse_message(Some(&broken), 1 << 20).unwrap_err();
        assert_eq!(
            (e["id"].clone(), e["error"]["code"].clone()),
            (json!(42), json!(PARSE_ERROR))
        );
        // At exactly 128 levels serde_json refuses too: said as depth, not as a parse error.
        let e = parse_message(Some(&deep(128)), 1 << 20).unwrap_err();
        assert_eq!(e["error"]["code"], json!(INVALID_REQUEST), "{e}");
        assert!(parse_message(Some(&deep(127)), 1 << 20).is_ok());
        // The id after the deep part, as a string, with escapes and odd spacing.
        let msg = format!(
            "\n {{ \"params\" : {{\"a\":{}}} , \"id\" : \"r\\\"1\" , \"jsonrpc\":\"2.0\"}}",
            deep(200)
        );
        assert_eq!(
            parse_message(Some(&msg), 1 << 20).unwrap_err()["id"],
            json!("r\"1")
        );
        // Over the size limit: refused unparsed, with the id.
        let big = format!(
            r#"{{"jsonrpc":"2.0","id":"big","method":"x","params":{{"s":"{}"}}}}"#,
            "a".repeat(2000)
        );
        let e = parse_message(Some(&big), 1000).unwrap_err();
        assert_eq!(
            (e["id"].clone(), e["error"]["code"].clone()),
            (json!("big"), json!(INVALID_REQUEST))
        );
        // Broken JSON keeps −32700, with the id when it was readable.
        let e = parse_message(
            Some(r#"{"jsonrpc":"2.0","id":3,"method":"ping","params":{"#),
            1000,
        )
        .unwrap_err();
        assert_eq!(
            (e["id"].clone(), e["error"]["code"].clone()),
            (json!(3), json!(PARSE_ERROR))
        );
        // A normal message parses.
        assert!(parse_message(Some(r#"{"id":1}"#), 1000).is_ok());
    }

    #[test]
    fn recover_id_reads_only_the_top_level() {
        for (text, want) in [
            (r#"{"params":{"id":9},"id":2}"#, Some(json!(2))),
            (r#"{"params":{"id":9}}"#, None),
            (r#"{"a":"\"id\":5","b":[{"id":1}]}"#, None),
            (r#"{"id":{"x":1}}"#, None),
            (r#"{"id":[1]}"#, None),
            (r#"{"id":null}"#, None),
            (r#"{"id":true}"#, None),
            (r#"{"id":-1.5e3}"#, Some(json!(-1.5e3))),
            (r#"{"id":1,"id":"two"}"#, Some(json!("two"))),
            (r#"{"x":"id","id":7"#, Some(json!(7))),
            (r#"[{"id":1}]"#, None),
            (r#""id""#, None),
            ("", None),
            ("{", None),
            (r#"{"id":"unterminated"#, None),
            (r#"{"id""#, None),
            (r#"{"id":"#, None),
            (r#"{"a":1}{"id":2}"#, None),
        ] {
            assert_eq!(recover_id(text), want, "{text}");
        }
        // Linear and flat whatever the shape: a million brackets is one pass.
        let text = format!(r#"{{"a":{},"id":8}}"#, deep(1_000_000));
        assert_eq!(recover_id(&text), Some(json!(8)));
    }
}
