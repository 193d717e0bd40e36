//! MCP over stdio, with every line checked by the core's JSON-RPC rules before rmcp sees it, so
//! a client gets the answers the extension's port gives (`mcp::jsonrpc`): an unparsable line is
//! −32700 (rmcp answered nothing), a message without `"jsonrpc": "2.0"` is −32600 with its id,
//! a `tools/call` without a name or with non-object arguments and a `tools/list` cursor this
//! server never issued are −32602 (rmcp: −32601, or the whole list), and a second `initialize`
//! is −32600. What passes goes to rmcp unchanged; rmcp's lines and these answers are written to
//! stdout whole, one at a time.

use lumo_userscripts::mcp::jsonrpc::{self, Inbound};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::sync::mpsc;

/// What to do with one line from the client.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// Hand it to rmcp as it came.
    Pass,
    /// Answer it with this error, and hand rmcp nothing.
    Reply(Value),
}

/// The one piece of state the checks need: whether an `initialize` went through.
#[derive(Default)]
pub struct Guard {
    initialized: bool,
}

impl Guard {
    /// `line`: one line as read, `None` if it was not UTF-8.
    pub fn check(&mut self, line: Option<&str>) -> Verdict {
        let v = match jsonrpc::parse_message(line, usize::MAX) {
            Ok(v) => v,
            Err(reply) => return Verdict::Reply(reply),
        };
        let (id, method, params) = match jsonrpc::classify(&v) {
            Inbound::Invalid(reply) => return Verdict::Reply(reply),
            Inbound::Request { id, method, params } => (id, method, params),
            // Notifications and responses are rmcp's (it drops what it cannot use).
            Inbound::Notification { .. } | Inbound::Ignored => return Verdict::Pass,
        };
        let refuse = |code, message: &str| Verdict::Reply(jsonrpc::error(&id, code, message));
        match method.as_str() {
            "initialize" if self.initialized => refuse(
                jsonrpc::INVALID_REQUEST,
                "already initialized: this connection has a session; start the bridge again for another",
            ),
            "initialize" => {
                self.initialized = true;
                Verdict::Pass
            }
            "tools/call" if !params.get("name").is_some_and(Value::is_string) => refuse(
                jsonrpc::INVALID_PARAMS,
                "tools/call needs params.name (a string)",
            ),
            "tools/call" if params.get("arguments").is_some_and(|a| !(a.is_object() || a.is_null())) => {
                refuse(jsonrpc::INVALID_PARAMS, "params.arguments must be an object")
            }
            "tools/list" if params.get("cursor").is_some_and(|c| !c.is_null()) => refuse(
                jsonrpc::INVALID_PARAMS,
                "invalid cursor: tools/list returns every tool in one page and issues no cursor",
            ),
            _ => Verdict::Pass,
        }
    }
}

/// The stdio transport for rmcp: the client's stdin through the [`Guard`], rmcp's output and the
/// guard's answers to stdout. Ends (rmcp sees end of input) when stdin does.
pub fn transport() -> (
    tokio::io::ReadHalf<tokio::io::DuplexStream>,
    tokio::io::WriteHalf<tokio::io::DuplexStream>,
) {
    let (rmcp_side, ours) = tokio::io::duplex(1 << 16);
    let (mut from_rmcp, mut to_rmcp) = tokio::io::split(ours);
    let (answers, mut answered) = mpsc::unbounded_channel::<Value>();
    tokio::spawn(async move {
        let mut stdin = BufReader::new(tokio::io::stdin());
        let mut guard = Guard::default();
        let mut line = Vec::new();
        loop {
            line.clear();
            match stdin.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let text = std::str::from_utf8(&line).ok();
            if text.is_some_and(|t| t.trim().is_empty()) {
                continue;
            }
            match guard.check(text.map(str::trim_end)) {
                Verdict::Pass => {
                    if to_rmcp.write_all(&line).await.is_err() {
                        break;
                    }
                    if !line.ends_with(b"\n") && to_rmcp.write_all(b"\n").await.is_err() {
                        break;
                    }
                }
                Verdict::Reply(v) => {
                    let _ = answers.send(v);
                }
            }
        }
        let _ = to_rmcp.shutdown().await;
    });
    tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        let mut from_rmcp = BufReader::new(&mut from_rmcp);
        // rmcp's line so far: `read_until` cancelled by an answer keeps what it read here, and
        // the next call goes on with it, so a line is never split by an answer.
        let mut pending = Vec::new();
        loop {
            let line = tokio::select! {
                read = from_rmcp.read_until(b'\n', &mut pending) => match read {
                    Ok(0) | Err(_) => break,
                    Ok(_) => std::mem::take(&mut pending),
                },
                Some(v) = answered.recv() => {
                    let mut l = v.to_string().into_bytes();
                    l.push(b'\n');
                    l
                }
            };
            if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });
    tokio::io::split(rmcp_side)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer(g: &mut Guard, line: &str) -> Value {
        match g.check(Some(line)) {
            Verdict::Reply(v) => v,
            Verdict::Pass => Value::Null,
        }
    }

    #[test]
    fn the_port_paths_answers() {
        let mut g = Guard::default();
        let e = answer(&mut g, "{not json");
        assert_eq!(
            (e["id"].clone(), e["error"]["code"].clone()),
            (Value::Null, json!(-32700))
        );
        assert_eq!(
            g.check(None),
            Verdict::Reply(jsonrpc::parse_message(None, 1).unwrap_err())
        );
        let e = answer(&mut g, r#"{"id":4,"method":"ping"}"#);
        assert_eq!(
            (e["id"].clone(), e["error"]["code"].clone()),
            (json!(4), json!(-32600))
        );
        let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#;
        assert_eq!(g.check(Some(init)), Verdict::Pass);
        let e = answer(&mut g, &init.replace("\"id\":1", "\"id\":6"));
        assert_eq!(
            (e["id"].clone(), e["error"]["code"].clone()),
            (json!(6), json!(-32600))
        );
        for params in [
            json!({}),
            json!({"name": 3}),
            json!({"name": "status", "arguments": "x"}),
        ] {
            let m = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params});
            assert_eq!(
                answer(&mut g, &m.to_string())["error"]["code"],
                -32602,
                "{m}"
            );
        }
        let m =
            json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"cursor": "x"}});
        assert_eq!(answer(&mut g, &m.to_string())["error"]["code"], -32602);
        assert_eq!(answer(&mut g, "[]")["error"]["code"], -32600);
        // What is well formed passes, as do notifications and responses.
        for ok in [
            json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}),
            json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "status"}}),
            json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {"cursor": null}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {}}),
        ] {
            assert_eq!(g.check(Some(&ok.to_string())), Verdict::Pass, "{ok}");
        }
    }
}
