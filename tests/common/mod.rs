//! Shared set-up for the native integration tests: a provider over the in-memory environment,
//! with the test host approved, and a helper that drives one session like a port would.
#![allow(dead_code)]

use futures::executor::block_on;
use lumo_userscripts::control;
use lumo_userscripts::env::memory::MemoryEnv;
use lumo_userscripts::ids::ExtensionId;
use lumo_userscripts::mcp::server::Outcome;
use lumo_userscripts::provider::Provider;
use lumo_userscripts::session::{Authorized, Session, Step};
use serde_json::{json, Value};
use std::rc::Rc;

pub const HOST: &str = "mobcibglkcoacmddjpdoknlbbicjchlk";

pub fn host() -> ExtensionId {
    ExtensionId::parse(HOST).unwrap()
}

pub fn provider() -> Provider<MemoryEnv> {
    let p = Provider::new(MemoryEnv::new());
    let r = block_on(control::handle(
        &p,
        &json!({"op": "policy.add", "id": HOST, "name": "Host"}),
    ));
    assert_eq!(r.value["ok"], json!(true));
    p
}

pub fn set_switch(p: &Provider<MemoryEnv>, name: &str, value: bool) -> control::Reply {
    block_on(control::handle(
        p,
        &json!({"op": "policy.setSwitch", "name": name, "value": value}),
    ))
}

/// Opens and authorizes a session for HOST; returns it ready for `initialize`.
pub fn open(p: &Provider<MemoryEnv>) -> Rc<Session> {
    let s = p.open_session(host());
    let policy = block_on(p.policy());
    assert_eq!(
        s.authorize(policy.access(Some(&host()))),
        Authorized::Flush(vec![])
    );
    s
}

/// Sends one message as the shell would (text in, outcome out).
pub fn send(p: &Provider<MemoryEnv>, s: &Session, msg: Value) -> Outcome {
    match s.inbound(Some(&msg.to_string())) {
        Step::Dispatch(v) => block_on(p.handle_mcp(s, &v)),
        Step::Reply(r) => Outcome::Reply(r),
        other => panic!("unexpected step {other:?}"),
    }
}

pub fn reply(o: Outcome) -> Value {
    match o {
        Outcome::Reply(v) | Outcome::ReplyAndCloseCaller(v) => v,
        Outcome::Silent | Outcome::CloseCaller => panic!("expected a reply"),
    }
}

pub fn initialize(p: &Provider<MemoryEnv>, s: &Session, version: &str) -> Value {
    let r = reply(send(
        p,
        s,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}),
    ));
    assert!(matches!(
        send(
            p,
            s,
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
        ),
        Outcome::Silent
    ));
    r
}

/// An initialized session.
pub fn ready(p: &Provider<MemoryEnv>) -> Rc<Session> {
    let s = open(p);
    initialize(p, &s, "2025-06-18");
    s
}

/// Calls a tool; returns the `tools/call` result.
pub fn call(p: &Provider<MemoryEnv>, s: &Session, name: &str, args: Value) -> Value {
    let r = reply(send(
        p,
        s,
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": name, "arguments": args}}),
    ));
    assert!(r.get("result").is_some(), "{r}");
    r["result"].clone()
}

/// `n` calls refused at argument parsing: audited refusals that spend no rate-limit slot, as a
/// caller would send to push other entries out of the log.
pub fn refuse_cheaply(p: &Provider<MemoryEnv>, s: &Session, n: usize) {
    for i in 0..n {
        let r = call(p, s, "delete_script", json!({"uuid": format!("nope-{i}")}));
        assert_eq!(error_code(&r), Some("INVALID_ARGUMENTS"));
    }
}

/// The uuid of the script a successful write's result names.
pub fn written_uuid(result: &Value) -> String {
    result["structuredContent"]["script"]["uuid"]
        .as_str()
        .unwrap_or_else(|| panic!("no script uuid in {result}"))
        .to_owned()
}

pub fn error_code(result: &Value) -> Option<&str> {
    result["structuredContent"]["error_code"].as_str()
}

pub fn script(name: &str, body: &str) -> String {
    format!("// ==UserScript==\n// @name {name}\n// @namespace tests\n// @match https://example.com/*\n// ==/UserScript==\n{body}\n")
}

/// Creates script `name` with `body` through `write_script`; its uuid.
pub fn created(p: &Provider<MemoryEnv>, s: &Session, name: &str, body: &str) -> String {
    written_uuid(&call(
        p,
        s,
        "write_script",
        json!({"source": script(name, body)}),
    ))
}

/// Stores `items` as they are, bypassing every check: a damaged key, or what a worker stopped
/// between two storage calls left behind.
pub fn put(p: &Provider<MemoryEnv>, items: impl IntoIterator<Item = (String, Value)>) {
    let m: serde_json::Map<String, Value> = items.into_iter().collect();
    block_on(lumo_userscripts::env::Storage::set(
        &p.env,
        lumo_userscripts::env::Area::Local,
        m,
    ))
    .unwrap();
}

/// A fresh worker over the same storage (nothing of the old one's memory).
pub fn restarted(p: &Provider<MemoryEnv>) -> Provider<MemoryEnv> {
    let q = Provider::new(MemoryEnv::new());
    *q.env.areas.borrow_mut() = p.env.areas.borrow().clone();
    q
}

/// The user's three ways of withdrawing what let an agent's write begin, each as the page's
/// op and the error code the write (or try) that waited must then get.
pub fn switches_withdrawn() -> [(Value, &'static str); 3] {
    [
        (
            json!({"op": "policy.remove", "id": host().as_str()}),
            "UNAUTHORIZED",
        ),
        (
            json!({"op": "policy.setSwitch", "name": "writes", "value": false}),
            "WRITE_DISABLED",
        ),
        (
            json!({"op": "policy.setSwitch", "name": "review", "value": true}),
            "REVIEW_REQUIRED",
        ),
    ]
}

/// A provider on `p`'s storage: the next worker, after `p`'s stopped.
pub fn next_worker(p: &Provider<MemoryEnv>) -> Provider<MemoryEnv> {
    let q = Provider::new(MemoryEnv::new());
    *q.env.areas.borrow_mut() = p.env.areas.borrow().clone();
    q.env.uuid_counter.set(p.env.uuid_counter.get());
    q
}
