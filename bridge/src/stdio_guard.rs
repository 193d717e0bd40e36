//! MCP over stdio, with every line checked by the core's JSON-RPC rules before rmcp sees it, so
//! a client gets the answers the extension's port gives (`mcp::jsonrpc`): an unparsable line is
//! −32700 (rmcp answered nothing), a message without `"jsonrpc": "2.0"` is −32600 with its id,
//! a `tools/call` without a name or with non-object arguments and a `tools/list` cursor this
//! server never issued are −32602 (rmcp: −32601, or the whole list), an `initialize` after one
//! rmcp accepted is −32600, and a line over rmcp's 16 MiB is −32600 by the id its head names
//! (rmcp dropped it unanswered). What passes goes to rmcp unchanged; rmcp's lines and these
//! answers are written to stdout whole, one at a time.

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

/// The one piece of state the checks need: whether an `initialize` succeeded (rmcp answered it
/// with a result: one it refused may be sent again), and which one rmcp is answering.
#[derive(Default)]
pub struct Guard {
    initialized: bool,
    pending_init: Option<Value>,
}

/// rmcp's own cap on a stdio line: a longer one it drops unanswered, so it is answered here.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

impl Guard {
    /// `line`: one line as read, `None` if it was not UTF-8.
    pub fn check(&mut self, line: Option<&str>) -> Verdict {
        let v = match jsonrpc::parse_message(line, MAX_LINE_BYTES) {
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
                self.pending_init = Some(id);
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

    /// A line rmcp wrote: the answer to a pending `initialize` says whether it succeeded. Read
    /// only until one has.
    pub fn heard(&mut self, line: &[u8]) {
        let Some(id) = self.pending_init.as_ref().filter(|_| !self.initialized) else {
            return;
        };
        let Ok(v) = serde_json::from_slice::<Value>(line) else {
            return;
        };
        if v.get("id") == Some(id) && v.get("method").is_none() {
            self.initialized = v.get("result").is_some();
            self.pending_init = None;
        }
    }
}

/// Reads one line into `buf`, keeping at most `max` bytes of it; its whole length (with its
/// newline), or `None` at the end of input.
async fn next_line<R: tokio::io::AsyncBufRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Option<usize>> {
    buf.clear();
    let mut total = 0usize;
    loop {
        let chunk = r.fill_buf().await?;
        if chunk.is_empty() {
            return Ok((total > 0).then_some(total));
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let room = max.saturating_sub(buf.len());
        buf.extend_from_slice(chunk.get(..take.min(room)).unwrap_or_default());
        total = total.saturating_add(take);
        r.consume(take);
        if done {
            return Ok(Some(total));
        }
    }
}

/// The stdio transport for rmcp: the client's stdin through the [`Guard`], rmcp's output and the
/// guard's answers to stdout; and the task writing stdout, to be awaited before the process
/// exits (rmcp answers what was in flight after stdin ends; those answers must reach stdout).
pub fn transport() -> (
    (
        tokio::io::ReadHalf<tokio::io::DuplexStream>,
        tokio::io::WriteHalf<tokio::io::DuplexStream>,
    ),
    tokio::task::JoinHandle<()>,
) {
    let (rmcp_side, ours) = tokio::io::duplex(1 << 16);
    let (mut from_rmcp, mut to_rmcp) = tokio::io::split(ours);
    // Bounded: a client that does not read its answers stops being read (as rmcp's own
    // output would stop it), instead of growing a queue.
    let (answers, mut answered) = mpsc::channel::<Value>(64);
    let guard = std::sync::Arc::new(std::sync::Mutex::new(Guard::default()));
    let heard = guard.clone();
    tokio::spawn(async move {
        let mut stdin = BufReader::new(tokio::io::stdin());
        let mut line = Vec::new();
        // Cut at the cap plus its newline: what passes, rmcp takes.
        while let Ok(Some(len)) = next_line(&mut stdin, &mut line, MAX_LINE_BYTES + 2).await {
            let verdict = if len > MAX_LINE_BYTES + 1 {
                // Over the cap: answered by the id its head names, never handed on.
                let head = String::from_utf8_lossy(&line);
                Verdict::Reply(jsonrpc::too_large(&head, len, MAX_LINE_BYTES))
            } else {
                let text = std::str::from_utf8(&line).ok();
                if text.is_some_and(|t| t.trim().is_empty()) {
                    continue;
                }
                match guard.lock() {
                    Ok(mut g) => g.check(text.map(str::trim_end)),
                    Err(_) => Verdict::Pass,
                }
            };
            match verdict {
                Verdict::Pass => {
                    if to_rmcp.write_all(&line).await.is_err() {
                        break;
                    }
                    if !line.ends_with(b"\n") && to_rmcp.write_all(b"\n").await.is_err() {
                        break;
                    }
                }
                Verdict::Reply(v) => {
                    if answers.send(v).await.is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to_rmcp.shutdown().await;
    });
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        let mut from_rmcp = BufReader::new(&mut from_rmcp);
        // rmcp's line so far: `read_until` cancelled by an answer keeps what it read here, and
        // the next call goes on with it, so a line is never split by an answer.
        let mut pending = Vec::new();
        loop {
            let line = tokio::select! {
                biased;
                Some(v) = answered.recv() => {
                    let mut l = v.to_string().into_bytes();
                    l.push(b'\n');
                    l
                }
                read = from_rmcp.read_until(b'\n', &mut pending) => match read {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if let Ok(mut g) = heard.lock() {
                            g.heard(&pending);
                        }
                        std::mem::take(&mut pending)
                    }
                },
            };
            if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
                return;
            }
        }
        // rmcp is done: the answers still queued go out too.
        while let Ok(v) = answered.try_recv() {
            let mut l = v.to_string().into_bytes();
            l.push(b'\n');
            if stdout.write_all(&l).await.is_err() {
                return;
            }
        }
        let _ = stdout.flush().await;
    });
    (tokio::io::split(rmcp_side), writer)
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
        // Refused by rmcp: it may be sent again.
        g.heard(br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"x"}}"#);
        assert_eq!(g.check(Some(init)), Verdict::Pass);
        // Another message's answer, or a notification, says nothing of it.
        g.heard(br#"{"jsonrpc":"2.0","id":2,"result":{}}"#);
        g.heard(br#"{"jsonrpc":"2.0","method":"notifications/x","params":{"id":1}}"#);
        assert_eq!(g.check(Some(init)), Verdict::Pass);
        g.heard(br#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18"}}"#);
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
