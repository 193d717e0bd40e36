//! The MCP dispatcher against raw JSON: every error code, id echo, version negotiation, the
//! session state machine and policy re-checks.

mod common;

use common::*;
use futures::executor::block_on;
use lumo_userscripts::env::memory::MemoryEnv;
use lumo_userscripts::env::Area;
use lumo_userscripts::mcp::server::{Outcome, SUPPORTED_VERSIONS};
use lumo_userscripts::provider::Provider;
use lumo_userscripts::session::{Phase, Step};
use serde_json::{json, Value};

fn code(v: &Value) -> i64 {
    v["error"]["code"].as_i64().unwrap_or(0)
}

#[test]
fn version_negotiation_matrix() {
    let p = provider();
    for v in SUPPORTED_VERSIONS {
        let s = open(&p);
        let r = initialize(&p, &s, v);
        assert_eq!(r["result"]["protocolVersion"], json!(v));
        assert_eq!(s.phase(), Some(Phase::Ready { version: v }));
    }
    for unknown in ["2023-01-01", "2099-12-31", ""] {
        let s = open(&p);
        let r = initialize(&p, &s, unknown);
        assert_eq!(r["result"]["protocolVersion"], json!(SUPPORTED_VERSIONS[0]));
    }
}

#[test]
fn initialize_result_shape() {
    let p = provider();
    let s = open(&p);
    let r = initialize(&p, &s, "2025-11-25");
    let res = &r["result"];
    assert_eq!(res["capabilities"], json!({"tools": {"listChanged": true}}));
    assert_eq!(res["serverInfo"]["name"], "lumo-userscripts");
    assert_eq!(res["serverInfo"]["title"], "Lumo Userscripts");
    assert!(res["instructions"].as_str().unwrap().contains("untrusted"));
    assert_eq!(r["id"], json!(0));
}

#[test]
fn instructions_follow_the_policy_at_initialize_time() {
    let p = provider();
    set_switch(&p, "writes", false);
    let r = initialize(&p, &open(&p), "2025-06-18");
    assert!(r["result"]["instructions"]
        .as_str()
        .unwrap()
        .contains("Read-only mode"));
    set_switch(&p, "writes", true);
    set_switch(&p, "review", true);
    let r = initialize(&p, &open(&p), "2025-06-18");
    let text = r["result"]["instructions"].as_str().unwrap();
    assert!(!text.contains("Read-only") && text.contains("review"));
    // The loop the agent is taught ends by reading what the script did on real page loads.
    let loop_at = |name: &str| text.find(name).unwrap_or(usize::MAX);
    assert!(loop_at("try_script") < loop_at("write_script once it works"));
    assert!(loop_at("write_script once it works") < loop_at("read script_runs"));
}

#[test]
fn requests_before_initialize_are_refused_but_ping_works() {
    let p = provider();
    let s = open(&p);
    let r = reply(send(
        &p,
        &s,
        json!({"jsonrpc": "2.0", "id": "x", "method": "tools/list"}),
    ));
    assert_eq!(code(&r), -32600);
    assert!(r["error"]["message"]
        .as_str()
        .unwrap()
        .contains("initialize"));
    let r = reply(send(
        &p,
        &s,
        json!({"jsonrpc": "2.0", "id": 5, "method": "ping"}),
    ));
    assert_eq!(r, json!({"jsonrpc": "2.0", "id": 5, "result": {}}));
    initialize(&p, &s, "2025-06-18");
    // A second initialize on the same port is refused: one server per port, never replayed.
    let r = reply(send(
        &p,
        &s,
        json!({"jsonrpc": "2.0", "id": 6, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}),
    ));
    assert_eq!(code(&r), -32600);
}

#[test]
fn every_error_code() {
    let p = provider();
    let s = ready(&p);
    // -32700: not JSON.
    match s.inbound(Some("{not json")) {
        Step::Reply(r) => {
            assert_eq!(code(&r), -32700);
            assert_eq!(r["id"], Value::Null);
        }
        other => panic!("{other:?}"),
    }
    // -32600: invalid request.
    assert_eq!(
        code(&reply(send(
            &p,
            &s,
            json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}])
        ))),
        -32600
    );
    assert_eq!(
        code(&reply(send(
            &p,
            &s,
            json!({"jsonrpc": "2.0", "id": true, "method": "ping"})
        ))),
        -32600
    );
    // -32601: unknown method, id echoed.
    let r = reply(send(
        &p,
        &s,
        json!({"jsonrpc": "2.0", "id": "q-1", "method": "resources/list"}),
    ));
    assert_eq!((code(&r), r["id"].clone()), (-32601, json!("q-1")));
    // -32602: invalid params, unknown tool.
    assert_eq!(
        code(&reply(send(
            &p,
            &s,
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}})
        ))),
        -32602
    );
    assert_eq!(
        code(&reply(send(
            &p,
            &s,
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "nope"}})
        ))),
        -32602
    );
    assert_eq!(
        code(&reply(send(
            &p,
            &s,
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "status", "arguments": [1]}})
        ))),
        -32602
    );
    // initialize on a ready port is refused as a request (−32600) whatever its params.
    let r = reply(send(
        &p,
        &s,
        json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {}}),
    ));
    assert_eq!((code(&r), r["id"].clone()), (-32600, json!(2)));
    // On a fresh port, initialize with bad params is −32602 and leaves the port uninitialized.
    let fresh = open(&p);
    for params in [
        json!({}),
        json!({"protocolVersion": 2025}),
        json!({"protocolVersion": "2025-06-18", "capabilities": []}),
        json!({"protocolVersion": "2025-06-18", "clientInfo": "x"}),
    ] {
        let r = reply(send(
            &p,
            &fresh,
            json!({"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": params}),
        ));
        assert_eq!((code(&r), r["id"].clone()), (-32602, json!(3)), "{params}");
        assert_eq!(fresh.phase(), Some(Phase::Uninitialized));
    }
    // Notifications never get a reply, known or not.
    for m in [
        "notifications/initialized",
        "notifications/cancelled",
        "whatever",
    ] {
        assert_eq!(
            send(&p, &s, json!({"jsonrpc": "2.0", "method": m})),
            Outcome::Silent
        );
    }
}

#[test]
fn ids_of_every_json_type() {
    let p = provider();
    let s = ready(&p);
    for id in [
        json!(0),
        json!(-1),
        json!(2.5),
        json!("abc"),
        json!(""),
        json!(9007199254740991u64),
    ] {
        let r = reply(send(
            &p,
            &s,
            json!({"jsonrpc": "2.0", "id": id, "method": "ping"}),
        ));
        assert_eq!(r["id"], id);
    }
    for bad in [json!(null), json!([1]), json!({"a": 1}), json!(false)] {
        let r = reply(send(
            &p,
            &s,
            json!({"jsonrpc": "2.0", "id": bad, "method": "ping"}),
        ));
        assert_eq!((code(&r), r["id"].clone()), (-32600, Value::Null));
    }
}

#[test]
fn tools_list_follows_the_write_switch() {
    let p = provider();
    let s = ready(&p);
    let list = |p: &_, s: &_| {
        reply(send(
            p,
            s,
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        ))["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let all = list(&p, &s);
    assert!(all.contains(&"write_script".to_owned()));
    let reply = set_switch(&p, "writes", false);
    // Open sessions are told the list changed.
    assert!(reply.effects.iter().any(
        |e| matches!(e, lumo_userscripts::control::Effect::Notify { sessions, message }
        if sessions.contains(&s.id) && message["method"] == "notifications/tools/list_changed")
    ));
    let ro = list(&p, &s);
    assert!(!ro.contains(&"write_script".to_owned()) && ro.contains(&"list_scripts".to_owned()));
    // Flipping a switch that does not change the tool set sends nothing.
    assert!(set_switch(&p, "review", true).effects.is_empty());
}

/// Writes the policy to storage directly, as devtools or another copy of the worker would.
fn behind_the_back(
    p: &lumo_userscripts::provider::Provider<lumo_userscripts::env::memory::MemoryEnv>,
    policy: lumo_userscripts::policy::Policy,
) {
    use lumo_userscripts::env::{Area, Storage};
    let mut m = serde_json::Map::new();
    m.insert("policy".into(), policy.to_stored());
    block_on(p.env.set(Area::Local, m.clone())).unwrap();
    p.storage_changed(Area::Local, &m);
}

#[test]
fn policy_is_rechecked_on_every_call() {
    let p = provider();
    let s = ready(&p);
    assert_eq!(call(&p, &s, "status", json!({}))["isError"], json!(false));
    // Changed behind the provider's back (not through its pages, which would close the port at
    // once: tests/revocation.rs): the next call still sees it.
    let mut policy = block_on(p.policy());
    policy.endpoint_enabled = false;
    behind_the_back(&p, policy);
    let out = send(
        &p,
        &s,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "status"}}),
    );
    let Outcome::ReplyAndCloseCaller(r) = out else {
        panic!("{out:?}")
    };
    assert_eq!(r["result"]["isError"], json!(true));
    assert_eq!(
        r["result"]["structuredContent"]["error_code"],
        "UNAUTHORIZED"
    );
    assert!(r["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("turned off"));

    let mut policy = block_on(p.policy());
    policy.endpoint_enabled = true;
    policy.allowlist.clear();
    behind_the_back(&p, policy);
    let out = send(
        &p,
        &s,
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}),
    );
    let Outcome::ReplyAndCloseCaller(r) = out else {
        panic!("{out:?}")
    };
    assert_eq!(code(&r), -32001);
}

/// What the shell does once authorization completes: every buffered message is dispatched and
/// every buffered reply posted (granted), or the −32001 replies posted (refused). Returns what
/// the caller receives, in order.
fn authorize_like_the_shell(
    p: &lumo_userscripts::provider::Provider<lumo_userscripts::env::memory::MemoryEnv>,
    s: &lumo_userscripts::session::Session,
) -> Vec<Value> {
    use lumo_userscripts::session::{Authorized, Buffered};
    let policy = block_on(p.policy());
    match s.authorize(policy.access(Some(&s.caller))) {
        Authorized::Flush(items) => items
            .into_iter()
            .filter_map(|item| match item {
                Buffered::Message(m) => match block_on(p.handle_mcp(s, &m)) {
                    Outcome::Reply(r) | Outcome::ReplyAndCloseCaller(r) => Some(r),
                    Outcome::Silent | Outcome::CloseCaller => None,
                },
                Buffered::Reply(r) => Some(r),
            })
            .collect(),
        Authorized::Refuse { replies, .. } => replies,
    }
}

/// Sends after authorization, as the shell would: dispatched messages run, replies are posted.
fn send_after(
    p: &lumo_userscripts::provider::Provider<lumo_userscripts::env::memory::MemoryEnv>,
    s: &lumo_userscripts::session::Session,
    msg: Value,
) -> Option<Value> {
    match s.inbound(Some(&msg.to_string())) {
        Step::Dispatch(m) => match block_on(p.handle_mcp(s, &m)) {
            Outcome::Reply(r) | Outcome::ReplyAndCloseCaller(r) => Some(r),
            Outcome::Silent | Outcome::CloseCaller => None,
        },
        Step::Reply(r) | Step::ReplyAndCloseSoon(r, _) => Some(r),
        Step::Buffered | Step::Drop | Step::Close(_) => None,
    }
}

#[test]
fn unauthorized_port_gets_32001_for_each_request_and_runs_nothing() {
    let p = provider();
    let stranger = lumo_userscripts::ids::ExtensionId::parse(&"b".repeat(32)).unwrap();
    let s = p.open_session(stranger.clone());
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}});
    let write = |id: i64, name: &str| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "write_script", "arguments": {"source": script(name, "")}}});
    s.inbound(Some(&init.to_string()));
    s.inbound(Some(&write(2, "X").to_string()));
    // Everything the shell would do with the buffer: nothing runs, each request gets −32001.
    let replies = authorize_like_the_shell(&p, &s);
    assert_eq!(replies.len(), 2);
    assert!(replies.iter().all(|r| code(r) == -32001), "{replies:?}");
    assert_eq!(
        replies.iter().map(|r| r["id"].clone()).collect::<Vec<_>>(),
        vec![json!(1), json!(2)]
    );
    // What it sends while the refused port lingers does not run either.
    let late = send_after(&p, &s, write(3, "Y")).unwrap();
    assert_eq!((code(&late), late["id"].clone()), (-32001, json!(3)));
    assert!(
        block_on(lumo_userscripts::scripts::store::load_index(&p.env))
            .unwrap()
            .is_empty()
    );
    assert!(block_on(lumo_userscripts::guard::audit::read_all(&p.env))
        .unwrap()
        .is_empty());
    // The same messages from the approved host do run: the test can tell the two apart.
    let s = p.open_session(host());
    s.inbound(Some(&init.to_string()));
    s.inbound(Some(
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
    ));
    s.inbound(Some(&write(2, "X").to_string()));
    let replies = authorize_like_the_shell(&p, &s);
    assert_eq!(replies.len(), 2, "{replies:?}");
    assert_eq!(replies[1]["result"]["isError"], json!(false), "{replies:?}");
    assert_eq!(
        block_on(lumo_userscripts::scripts::store::load_index(&p.env))
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn a_batch_sent_before_authorization_is_answered_not_echoed() {
    let p = provider();
    let s = p.open_session(host());
    let batch = json!([{"jsonrpc": "2.0", "id": "b1", "method": "ping"}]);
    s.inbound(Some(&batch.to_string()));
    s.inbound(Some("{not json"));
    let replies = authorize_like_the_shell(&p, &s);
    assert_eq!(replies.len(), 2, "{replies:?}");
    assert_ne!(
        replies[0], batch[0],
        "the batch was posted back to its sender"
    );
    assert_eq!(code(&replies[0]), -32600, "{replies:?}");
    assert!(replies[0]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("batch"));
    assert_eq!(code(&replies[1]), -32700);
}

/// A response is never answered, whatever its id: a client's error response to a message it
/// could not read carries `id: null` (JSON-RPC) or none (MCP 2025-11-25), and answering it with
/// −32600 `id: null` invites the same reply back, forever, from a peer that does as we did.
#[test]
fn responses_are_never_answered_whatever_their_id() {
    let p = provider();
    let s = ready(&p);
    for response in [
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}}),
        json!({"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}}),
        json!({"jsonrpc": "2.0", "id": null, "result": {}}),
        json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32601, "message": "x"}}),
        json!({"jsonrpc": "2.0", "id": "r", "result": {}}),
    ] {
        assert_eq!(
            send(&p, &s, response.clone()),
            Outcome::Silent,
            "{response}"
        );
    }
    // Before authorization too: nothing is held for them to be answered on a grant.
    let waiting = p.open_session(host());
    waiting.inbound(Some(
        &json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "x"}})
            .to_string(),
    ));
    assert_eq!(authorize_like_the_shell(&p, &waiting), Vec::<Value>::new());
    // A message that is neither a request nor a response is still refused, with id null.
    let r = reply(send(&p, &s, json!({"jsonrpc": "2.0", "id": null})));
    assert_eq!((code(&r), r["id"].clone()), (-32600, Value::Null));
}

/// tools/list is one page: no `nextCursor`, so a cursor is one this server never issued, and
/// MCP's pagination says an invalid cursor is −32602. An absent or null cursor is the first page.
#[test]
fn tools_list_is_one_page_and_refuses_a_cursor_it_never_issued() {
    let p = provider();
    let s = ready(&p);
    for params in [json!(null), json!({}), json!({"cursor": null})] {
        let r = reply(send(
            &p,
            &s,
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params}),
        ));
        assert!(
            r["result"]["tools"]
                .as_array()
                .is_some_and(|t| !t.is_empty()),
            "{r}"
        );
        assert!(r["result"].get("nextCursor").is_none(), "{r}");
    }
    for cursor in [json!("eyJwYWdlIjogMn0="), json!(""), json!(2)] {
        let r = reply(send(
            &p,
            &s,
            json!({"jsonrpc": "2.0", "id": "c", "method": "tools/list", "params": {"cursor": cursor}}),
        ));
        assert_eq!(
            (code(&r), r["id"].clone()),
            (-32602, json!("c")),
            "{cursor}: {r}"
        );
        assert!(r["error"]["message"].as_str().unwrap().contains("cursor"));
    }
}

/// MCP 2025-03-26 says a receiver MUST take JSON-RPC batches; the revisions before and after
/// it have none. On a session at that revision a batch runs in order and gets one array of
/// answers (notifications and responses in it get none); elsewhere it is refused whole, and
/// nothing in it runs.
#[test]
fn batches_run_at_2025_03_26_and_are_refused_elsewhere() {
    let p = provider();
    let s = open(&p);
    initialize(&p, &s, "2025-03-26");
    let batch = json!([
        {"jsonrpc": "2.0", "id": "b1", "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "write_script", "arguments": {"source": script("Batched", "v1")}}},
        {"jsonrpc": "2.0", "id": "b3", "method": "no/such"},
        {"jsonrpc": "2.0", "id": "r", "result": {}},
        42,
        [{"jsonrpc": "2.0", "id": "nested", "method": "ping"}],
        {"jsonrpc": "2.0", "id": "again", "method": "initialize", "params": {"protocolVersion": "2025-03-26"}},
    ]);
    let r = reply(send(&p, &s, batch));
    let answers = r.as_array().expect("an array of answers");
    let ids: Vec<&Value> = answers.iter().map(|a| &a["id"]).collect();
    assert_eq!(
        ids,
        [
            &json!("b1"),
            &json!(2),
            &json!("b3"),
            &Value::Null,
            &Value::Null,
            &json!("again")
        ],
        "{r}"
    );
    assert_eq!(answers[0]["result"], json!({}));
    assert_eq!(answers[1]["result"]["isError"], json!(false), "{r}");
    assert_eq!(code(&answers[2]), -32601);
    assert_eq!(code(&answers[3]), -32600);
    assert!(answers[4]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("cannot hold a batch"));
    assert!(answers[5]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("already initialized"));
    // The write in it ran: the script is stored.
    let stored = || {
        call(&p, &s, "list_scripts", json!({}))["structuredContent"]["scripts"]
            .as_array()
            .map_or(0, Vec::len)
    };
    assert_eq!(stored(), 1);
    // Only notifications: no reply at all.
    assert!(matches!(
        send(
            &p,
            &s,
            json!([{"jsonrpc": "2.0", "method": "notifications/initialized"}])
        ),
        Outcome::Silent
    ));
    // Empty, or over the bound: one error, nothing run.
    let empty = reply(send(&p, &s, json!([])));
    assert_eq!((code(&empty), empty["id"].clone()), (-32600, Value::Null));
    let many: Vec<Value> = (0..=64)
        .map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "write_script", "arguments": {"source": script(&format!("Many {i}"), "v1")}}}))
        .collect();
    let over = reply(send(&p, &s, Value::Array(many)));
    assert_eq!(code(&over), -32600);
    assert!(
        over["error"]["message"]
            .as_str()
            .unwrap()
            .contains("over the 64"),
        "{over}"
    );
    assert_eq!(stored(), 1, "nothing of the refused batch ran");

    // Any other revision, or before initialize: refused whole.
    for version in SUPPORTED_VERSIONS.iter().filter(|v| **v != "2025-03-26") {
        let s = open(&p);
        initialize(&p, &s, version);
        let r = reply(send(
            &p,
            &s,
            json!([{"jsonrpc": "2.0", "id": "b1", "method": "ping"}]),
        ));
        assert_eq!(
            (code(&r), r["id"].clone()),
            (-32600, Value::Null),
            "{version}: {r}"
        );
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("2025-03-26"),
            "{r}"
        );
    }
    let fresh = open(&p);
    let r = reply(send(
        &p,
        &fresh,
        json!([{"jsonrpc": "2.0", "id": "b1", "method": "ping"}]),
    ));
    assert_eq!(code(&r), -32600, "{r}");
}

/// "Last seen" on the options page: a host that keeps one session open for hours, calling tools,
/// was shown as last seen when it connected. The shell refreshes it at authorization and after
/// each message (`after_mcp_message`), at most once a minute per session.
#[test]
fn a_session_open_for_hours_keeps_its_caller_seen() {
    let p = provider();
    let s = ready(&p);
    let seen = |p: &Provider<MemoryEnv>| block_on(p.policy()).allowlist[0].last_seen;
    let opened = p.env.now.get();
    block_on(p.note_session(&s));
    assert_eq!(seen(&p), Some(opened));
    for minute in 1..=90 {
        p.env.advance(60_000.0);
        let r = call(&p, &s, "status", json!({}));
        assert_eq!(r["isError"], json!(false), "{r}");
        block_on(p.after_mcp_message(&s));
        assert_eq!(seen(&p), Some(opened + f64::from(minute) * 60_000.0));
    }
    // Within the minute it stays.
    p.env.advance(30_000.0);
    call(&p, &s, "status", json!({}));
    block_on(p.after_mcp_message(&s));
    assert_eq!(seen(&p), Some(opened + 90.0 * 60_000.0));
}

/// Each message of a port is a task of its own. A request sent right after `initialize` (the
/// SDK sends `notifications/initialized` and its first call at once) must not overtake an
/// `initialize` still reading the policy and be refused as sent before it.
#[test]
fn a_request_sent_right_after_initialize_waits_for_it() {
    let p = provider();
    let s = open(&p);
    // The policy just changed elsewhere (the options page): `initialize` reads it from storage,
    // which takes a while.
    let mut m = serde_json::Map::new();
    m.insert("policy".into(), json!({"changed": "elsewhere"}));
    p.storage_changed(Area::Local, &m);
    p.env.get_yields.set(5);
    let init = json!({"jsonrpc": "2.0", "id": "i", "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    let list = json!({"jsonrpc": "2.0", "id": "l", "method": "tools/list"});
    let (a, b) =
        block_on(async { futures::join!(p.handle_mcp(&s, &init), p.handle_mcp(&s, &list)) });
    p.env.get_yields.set(0);
    let (Outcome::Reply(a), Outcome::Reply(b)) = (a, b) else {
        panic!("both are answered")
    };
    assert!(a.get("result").is_some(), "{a}");
    assert!(b["result"]["tools"].is_array(), "{b}");
    // A request sent before initialize, with none under way, is still refused at once.
    let s2 = open(&p);
    let r = block_on(p.handle_mcp(&s2, &list));
    let Outcome::Reply(r) = r else { panic!() };
    assert_eq!(code(&r), -32600, "{r}");
}

/// One session's requests being handled are bounded (each is a task of the worker's one
/// thread, run in arrival order: a tester's 1,000 `get_script` calls sent at once kept every
/// other caller and the options page waiting 7 s). Past the bound a request is answered at once,
/// nothing done; a ping still is; once answers go out, the session takes requests again.
#[test]
fn a_session_has_at_most_its_bound_of_requests_being_handled() {
    use lumo_userscripts::session::MAX_REQUESTS_RUNNING;
    let p = provider();
    let s = ready(&p);
    let uuid = created(&p, &s, "Read", "1;");
    let get = |i: usize| {
        json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
            "params": {"name": "get_script", "arguments": {"uuid": uuid}}})
    };
    let msgs: Vec<Value> = (0..MAX_REQUESTS_RUNNING + 3)
        .map(get)
        .chain([json!({"jsonrpc": "2.0", "id": "ping", "method": "ping"})])
        .collect();
    // Each read waits for storage a while, so all are running at once.
    p.env.get_yields.set(3);
    let outs = block_on(futures::future::join_all(
        msgs.iter().map(|m| p.handle_mcp(&s, m)),
    ));
    p.env.get_yields.set(0);
    let replies: Vec<Value> = outs.into_iter().map(reply).collect();
    let busy: Vec<&Value> = replies.iter().filter(|r| code(r) == -32000).collect();
    assert_eq!(busy.len(), 3, "{replies:?}");
    assert!(busy.iter().all(|r| r["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("nothing was done"))));
    let read = replies
        .iter()
        .filter(|r| r["result"]["structuredContent"]["script"]["uuid"] == json!(uuid))
        .count();
    assert_eq!(read, MAX_REQUESTS_RUNNING, "{replies:?}");
    assert_eq!(replies.last().map(|r| r["id"].clone()), Some(json!("ping")));
    assert!(replies.last().is_some_and(|r| r.get("result").is_some()));
    // Answered: the session takes requests again.
    let r = reply(send(&p, &s, get(99)));
    assert_eq!(
        r["result"]["structuredContent"]["script"]["uuid"],
        json!(uuid),
        "{r}"
    );
}
