//! JSON-RPC 2.0 envelopes: classify what arrives, build what leaves. Error codes are the standard
//! ones plus −32001 for authorization, as in the sibling protocols.

use serde_json::{json, Map, Value};

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
pub const UNAUTHORIZED: i64 = -32001;

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
    /// Dropped without a reply: a response to a server→client request (this server sends
    /// none), or a malformed notification (notifications are never answered).
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
        None if id.is_some() && (obj.contains_key("result") || obj.contains_key("error")) => {
            return Inbound::Ignored
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

pub fn response(id: &Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
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
}
