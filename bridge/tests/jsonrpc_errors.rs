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

/// Found in a second pass: with the guard between stdin and rmcp, the process exited before
/// rmcp's last answers (the calls in flight when stdin ended) reached stdout.
#[test]
fn the_answers_to_the_last_requests_reach_stdout_when_stdin_ends() {
    for _ in 0..5 {
        let p = Ports::new();
        let mut b = Bridge::start(&p.args());
        b.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "it", "version": "0"}}}));
        b.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        b.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}));
        b.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}));
        b.send_raw("{not json");
        b.close_stdin();
        let ids: Vec<Value> = b
            .rest_of_stdout(WITHIN)
            .iter()
            .map(|m| m["id"].clone())
            .collect();
        for id in [json!(1), json!(2), json!(3), Value::Null] {
            assert!(ids.contains(&id), "{id} unanswered: {ids:?}");
        }
    }
}

/// Found in a second pass: an `initialize` rmcp refused (bad params) locked the session, and
/// the client's corrected retry was told "already initialized".
#[test]
fn an_initialize_refused_may_be_sent_again() {
    let p = Ports::new();
    let mut b = Bridge::start(&p.args());
    let r = b.rpc("initialize", json!({"capabilities": {}}), WITHIN);
    assert!(r.get("error").is_some(), "{r}");
    let r = b.initialize();
    assert!(r["result"]["protocolVersion"].is_string(), "{r}");
}

/// rmcp drops a stdio line over 16 MiB unanswered (the client waits for its timeout); and the
/// guard must not hold more than that of a line. Answered by the id its head names.
#[test]
fn a_line_over_the_cap_is_answered_by_its_id() {
    let p = Ports::new();
    let mut b = Bridge::start(&p.args());
    b.initialize();
    let pad = "x".repeat(17 << 20);
    b.send_raw(&format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"status","arguments":{{"pad":"{pad}"}}}}}}"#
    ));
    let r = b.next_answer(WITHIN);
    assert_eq!(code_and_id(&r), (json!(-32600), json!(7)), "{r}");
    assert_eq!(b.rpc("ping", json!({}), WITHIN)["result"], json!({}));
}

/// The guard answers bad lines itself; a client that sends them without reading its answers
/// must stop being read (the answers wait in a bounded queue), as rmcp's own output would stop
/// it, rather than make the bridge hold every answer. Once it reads, none is lost.
#[test]
fn a_client_that_does_not_read_stops_being_read_and_loses_no_answer() {
    use std::io::{BufRead as _, BufReader, BufWriter, Write as _};
    /// Killed on every way out, so no bridge outlives a failed assertion.
    struct Killed(std::process::Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    use std::process::{Command, Stdio};
    const LINES: usize = 20_000;
    let p = Ports::new();
    let mut child = Killed(
        Command::new(env!("CARGO_BIN_EXE_lumo-bridge"))
            .args(p.args())
            .env_remove("LUMO_BRIDGE_TOKEN")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start lumo-bridge"),
    );
    let stdin = child.0.stdin.take().expect("stdin");
    let (written, all_written) = std::sync::mpsc::channel();
    // 500-byte lines, 10 MB in all: far beyond what the pipes and the queue can hold (~0.2 MB).
    let pad = "x".repeat(490);
    std::thread::spawn(move || {
        let mut w = BufWriter::new(stdin);
        for i in 0..LINES {
            if writeln!(w, "{{not json {i:06} {pad}").is_err() {
                return;
            }
        }
        let _ = w.flush();
        let _ = written.send(());
    });
    assert!(
        all_written.recv_timeout(Duration::from_secs(3)).is_err(),
        "10 MB of bad lines were all taken while no answer was read"
    );
    // Read on a thread of its own, so a wedged bridge fails the test instead of hanging it.
    let out = BufReader::new(child.0.stdout.take().expect("stdout"));
    let (tx, answers) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in out.lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    for n in 0..LINES {
        let Ok(line) = answers.recv_timeout(WITHIN) else {
            panic!("no answer after {n} of {LINES}");
        };
        let v: Value = serde_json::from_str(&line).expect("JSON on stdout");
        assert_eq!(code_and_id(&v), (json!(-32700), Value::Null), "{v}");
    }
    assert!(
        all_written.recv_timeout(WITHIN).is_ok(),
        "the writes never finished"
    );
}
