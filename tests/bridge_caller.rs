//! The local bridge as one more caller: `call_tool` requests go through the same tool walk as a
//! `lumo:mcp` port (endpoint switch, read-only mode, rate limit, audit), under its own identity.

mod common;

use common::*;
use futures::executor::block_on;
use lumo_userscripts::control;
use lumo_userscripts::env::memory::MemoryEnv;
use lumo_userscripts::provider::{BridgeAnswer, Provider};
use serde_json::{json, Value};

const SRC: &str = "// ==UserScript==\n// @name Bridge test\n// @match https://a.example/*\n// ==/UserScript==\nconsole.log(1);\n";

fn ok(a: BridgeAnswer) -> Value {
    match a {
        BridgeAnswer::Reply(Ok(v)) => v,
        other => panic!("expected a result, got {other:?}"),
    }
}

fn write(p: &Provider<MemoryEnv>, session: u64, src: &str) -> BridgeAnswer {
    block_on(p.bridge_call(
        session,
        1,
        &json!({"name": "write_script", "arguments": {"source": src}}),
    ))
}

fn audit(p: &Provider<MemoryEnv>) -> Vec<Value> {
    let r = block_on(control::handle(p, &json!({"op": "audit.list"})));
    r.value["entries"].as_array().unwrap().clone()
}

#[test]
fn a_bridge_write_runs_and_is_audited_under_the_bridge_identity() {
    // No allowlist entry: the user's click on the connect page is the consent.
    let p = Provider::new(MemoryEnv::new());
    p.bridge_dialing_fresh("127.0.0.1", 17817);
    let s = p.bridge_opened(false, "0.1.0");
    let r = ok(write(&p, s, SRC));
    assert_eq!(r["isError"], json!(false), "{r}");
    let e = audit(&p);
    assert_eq!(e[0]["caller"], json!("bridge:17817"));
    assert_eq!(e[0]["result"], json!("ok"));
    let listed = ok(block_on(p.bridge_call(
        s,
        2,
        &json!({"name": "list_scripts"}),
    )));
    assert_eq!(
        listed["structuredContent"]["scripts"][0]["name"],
        json!("Bridge test"),
        "{listed}"
    );
    // The popup lists it as a connected caller.
    let sessions = p.sessions_summary();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0]["label"], json!("Local bridge (port 17817)"));
    assert_eq!(sessions[0]["kind"], json!("bridge"));
}

#[test]
fn read_only_on_either_side_refuses_writes_with_403() {
    let p = Provider::new(MemoryEnv::new());
    // The bridge said readonly in its ack.
    let s = p.bridge_opened(true, "0.1.0");
    let r = ok(write(&p, s, SRC));
    assert_eq!(
        r["structuredContent"]["error_code"],
        json!("WRITE_DISABLED"),
        "{r}"
    );
    assert_eq!(r["structuredContent"]["status"], json!(403), "{r}");
    // A try runs code in the user's page: refused too, and nothing runs.
    p.env.tabs.borrow_mut().push(lumo_userscripts::env::Tab {
        id: 7,
        url: "https://a.example/page".into(),
        title: "A page".into(),
        last_accessed: 1.0,
        incognito: false,
    });
    // (Chrome's answer, were it asked: a refusal, so a try that ran would not hang the test.)
    *p.env.execute_answer.borrow_mut() = Some(Err("Cannot access this page".into()));
    let tried = ok(block_on(p.bridge_call(
        s,
        3,
        &json!({"name": "try_script", "arguments": {"source": SRC, "tabId": 7}}),
    )));
    assert_eq!(
        tried["structuredContent"]["error_code"],
        json!("WRITE_DISABLED"),
        "{tried}"
    );
    assert!(p.env.executed.borrow().is_empty());
    p.bridge_closed(None, false);
    // The extension's own read-only mode.
    let s = p.bridge_opened(false, "0.1.0");
    set_switch(&p, "writes", false);
    let r = ok(write(&p, s, SRC));
    assert_eq!(
        r["structuredContent"]["error_code"],
        json!("WRITE_DISABLED"),
        "{r}"
    );
    // Both refusals are audited under the bridge.
    assert!(audit(&p)
        .iter()
        .all(|e| e["caller"] == json!("bridge:17817") || e["caller"] == json!("bridge:0")));
    assert_eq!(audit(&p).len(), 3);
}

#[test]
fn the_endpoint_switch_closes_the_bridge_and_refuses_its_calls() {
    let p = Provider::new(MemoryEnv::new());
    let s = p.bridge_opened(false, "0.1.0");
    let r = set_switch(&p, "endpoint", false);
    assert!(
        r.effects
            .iter()
            .any(|e| matches!(e, control::Effect::CloseBridge { code: 4002, .. })),
        "{:?}",
        r.effects
    );
    match write(&p, s, SRC) {
        BridgeAnswer::ReplyAndClose(v) => {
            assert_eq!(v["structuredContent"]["error_code"], json!("UNAUTHORIZED"))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_bridge_has_its_own_rate_window() {
    let p = provider();
    let s = p.bridge_opened(false, "0.1.0");
    for i in 0..30 {
        let src = SRC.replace("Bridge test", &format!("Bridge {i}"));
        assert_eq!(ok(write(&p, s, &src))["isError"], json!(false), "{i}");
    }
    let r = ok(write(&p, s, &SRC.replace("Bridge test", "Bridge 31")));
    assert_eq!(
        r["structuredContent"]["error_code"],
        json!("RATE_LIMITED"),
        "{r}"
    );
    // An extension caller still has its own 30.
    let port = open(&p);
    initialize(&p, &port, "2025-06-18");
    let r = reply(send(
        &p,
        &port,
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "write_script", "arguments": {"source": SRC.replace("Bridge test", "Ext")}}}),
    ));
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
}

#[test]
fn a_closed_link_answers_nothing_and_bad_requests_get_wire_errors() {
    let p = Provider::new(MemoryEnv::new());
    let s = p.bridge_opened(false, "0.1.0");
    for bad in [
        json!({}),
        json!({"name": 5}),
        json!({"name": "status", "arguments": [1]}),
    ] {
        assert!(
            matches!(
                block_on(p.bridge_call(s, 4, &bad)),
                BridgeAnswer::Reply(Err(_))
            ),
            "{bad}"
        );
    }
    assert!(
        matches!(block_on(p.bridge_call(s, 5, &json!({"name": "nope"}))), BridgeAnswer::Reply(Err(e)) if e.code == "UNKNOWN_TOOL")
    );
    p.bridge_closed(Some("connection lost".into()), true);
    assert!(matches!(write(&p, s, SRC), BridgeAnswer::Reply(Err(e)) if e.code == "NOT_CONNECTED"));
    assert!(audit(&p).is_empty(), "nothing ran");
    assert_eq!(p.bridge_view().state, "retrying");
    assert_eq!(p.bridge_view().error.as_deref(), Some("connection lost"));
}

#[test]
fn a_bridge_request_its_bridge_cancels_is_withdrawn_from_review_and_never_applied() {
    let p = Provider::new(MemoryEnv::new());
    set_switch(&p, "review", true);
    p.bridge_dialing_fresh("127.0.0.1", 17817);
    let s = p.bridge_opened(false, "0.1.0");
    let call = json!({"name": "write_script", "arguments": {"source": SRC}});
    // The write waits for review; cancels naming another request, or sent on a link that is not
    // this one, leave it waiting; the cancel naming it withdraws it.
    let (answer, left) = block_on(async {
        futures::join!(p.bridge_call(s, 41, &call), async {
            p.bridge_cancel(s, &json!({"id": 40}));
            p.bridge_cancel(s.wrapping_add(1), &json!({"id": 41}));
            p.bridge_cancel(s, &json!({"id": "41"}));
            let left = p.pending_reviews().len();
            p.bridge_cancel(s, &json!({"id": 41}));
            left
        })
    });
    assert_eq!(left, 1, "only its own cancel withdraws a review");
    let r = ok(answer);
    assert_eq!(
        r["structuredContent"]["error_code"],
        json!("CANCELLED"),
        "{r}"
    );
    assert!(p.pending_reviews().is_empty());
    let e = audit(&p);
    assert_eq!(e[0]["result"], json!("CANCELLED"));
    let listed = ok(block_on(p.bridge_call(
        s,
        42,
        &json!({"name": "list_scripts"}),
    )));
    assert_eq!(
        listed["structuredContent"]["scripts"],
        json!([]),
        "{listed}"
    );
}

/// The user connected a read-only bridge; a read-write one then took over its port and token (a
/// forwarder after the owner exited, a restart without --readonly). The extension dials it
/// again without a click, so the consent given to a read-only bridge must hold: writes are
/// refused and hidden until the user clicks Connect again.
#[test]
fn a_read_only_consent_holds_when_a_read_write_bridge_takes_over_the_link() {
    const TOKEN: &str = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEF";
    let p = Provider::new(MemoryEnv::new());
    let click = || {
        let r = block_on(control::handle(
            &p,
            &json!({"op": "bridge.connect", "port": 17817, "token": TOKEN}),
        ));
        assert_eq!(r.value["ok"], json!(true), "{}", r.value);
    };
    // What the shell does on a dial and on the bridge's ack.
    let link = |ack_readonly: bool| {
        let auth = block_on(p.bridge_auth()).expect("authorized");
        p.bridge_dialing(&auth);
        let s = p.bridge_opened(ack_readonly, "0.1.0");
        block_on(p.bridge_consented(&auth.token, ack_readonly));
        s
    };
    click();
    let s = link(true);
    assert!(p.bridge_view().readonly);
    p.bridge_closed(Some("connection lost".into()), true);
    // The read-write bridge that took over: still read-only, and told to list no write tool.
    let s2 = link(false);
    assert_ne!(s, s2);
    assert!(
        p.bridge_view().readonly,
        "the consent was to a read-only bridge"
    );
    assert!(!p.bridge_lists_writes(true));
    let r = ok(write(&p, s2, SRC));
    assert_eq!(
        r["structuredContent"]["error_code"],
        json!("WRITE_DISABLED"),
        "{r}"
    );
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Connect"),
        "{r}"
    );
    // The user's new click on the link is consent to what the bridge is now.
    p.bridge_closed(None, false);
    click();
    let s3 = link(false);
    assert!(!p.bridge_view().readonly);
    assert!(p.bridge_lists_writes(true));
    let r = ok(write(&p, s3, SRC));
    assert_eq!(r["isError"], json!(false), "{r}");
    // Consent to a read-write bridge: a read-only one that takes over is read-only by its own word.
    p.bridge_closed(Some("connection lost".into()), true);
    link(true);
    assert!(p.bridge_view().readonly);
}
