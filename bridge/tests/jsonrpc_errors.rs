//! Over stdio a client gets the JSON-RPC answers the extension's port gives (`mcp::jsonrpc`),
//! found missing by a tester: rmcp answered an unparsable line with nothing, a message without
//! `"jsonrpc"` with an error that had no id, a `tools/call` without a name with −32601, a made-up
//! `tools/list` cursor with the whole list, and a second `initialize` with a new session.
mod common;
use common::*;
use serde_json::{json, Value};
use std::time::Duration;

const WITHIN: Duration = Duration::from_secs(10);

fn code_and_id(v: &Value) -> (Value, Value) {
    (v["error"]["code"].clone(), v["id"].clone())
}

#[test]
fn bad_messages_get_the_standard_errors_and_the_session_goes_on() {
    let p = Ports::new();
    let mut b = Bridge::start(&p.args());
    b.send_raw("{not json");
    assert_eq!(
        code_and_id(&b.next_answer(WITHIN)),
        (json!(-32700), Value::Null)
    );
    b.initialize();
    b.send_raw("{not json");
    assert_eq!(
        code_and_id(&b.next_answer(WITHIN)),
        (json!(-32700), Value::Null)
    );
    b.send_raw(r#"{"id":"no-version","method":"ping"}"#);
    assert_eq!(
        code_and_id(&b.next_answer(WITHIN)),
        (json!(-32600), json!("no-version"))
    );
    for params in [json!({}), json!({"name": "status", "arguments": "str"})] {
        let r = b.rpc("tools/call", params.clone(), WITHIN);
        assert_eq!(r["error"]["code"], -32602, "{params}: {r}");
    }
    let r = b.rpc("tools/list", json!({"cursor": "never-issued"}), WITHIN);
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let r = b.rpc(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "it", "version": "0"}}),
        WITHIN,
    );
    assert_eq!(r["error"]["code"], -32600, "{r}");
    assert!(r["error"]["message"]
        .as_str()
        .is_some_and(|m| m.starts_with("already initialized")));
    // The session is the first one, and still serves.
    assert_eq!(b.rpc("ping", json!({}), WITHIN)["result"], json!({}));
    assert!(b.tool_names().iter().any(|n| n == "bridge_status"));
}
