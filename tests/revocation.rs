//! Revocation: removing, denying or switching off a caller closes every port of it at once and
//! ends its "allow for this session"; turning review on ends every such allowance.

mod common;

use common::*;
use futures::executor::block_on;
use lumo_userscripts::control::{self, Effect};
use lumo_userscripts::env::memory::MemoryEnv;
use lumo_userscripts::guard::review::Decision;
use lumo_userscripts::mcp::server::Outcome;
use lumo_userscripts::provider::Provider;
use lumo_userscripts::session::Session;
use serde_json::{json, Value};

fn op(p: &Provider<MemoryEnv>, v: Value) -> control::Reply {
    let r = block_on(control::handle(p, &v));
    assert_eq!(r.value["ok"], json!(true), "{}", r.value);
    r
}

fn write(name: &str, id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "write_script", "arguments": {"source": script(name, "")}}})
}

/// A session whose writes the user allowed with "approve all from this session".
fn allowed_session(p: &Provider<MemoryEnv>) -> std::rc::Rc<Session> {
    set_switch(p, "review", true);
    let s = ready(p);
    let first = write("First", 1);
    let (out, ()) = block_on(async {
        futures::join!(p.handle_mcp(&s, &first), async {
            let id = p.pending_reviews()[0].id.clone();
            assert!(p.decide(
                &id,
                Decision::Approve {
                    allow_session: true
                }
            ));
        })
    });
    assert_eq!(error_code(&reply(out)["result"]), None);
    assert!(p.is_waived(s.id));
    s
}

fn closed(effects: &[Effect]) -> Vec<u64> {
    effects
        .iter()
        .flat_map(|e| match e {
            Effect::Close { sessions, .. } => sessions.clone(),
            _ => vec![],
        })
        .collect()
}

#[test]
fn removing_a_caller_closes_its_ports_and_ends_its_allowance() {
    let p = provider();
    let s = allowed_session(&p);
    let other = ready(&p);
    let r = op(&p, json!({"op": "policy.remove", "id": HOST}));
    let mut ids = closed(&r.effects);
    ids.sort_unstable();
    assert_eq!(
        ids,
        vec![s.id, other.id],
        "every port of the caller, at once"
    );
    assert!(p.session(s.id).is_none() && s.is_closed());
    assert!(!p.is_waived(s.id));
    assert!(
        p.sessions_summary().is_empty(),
        "the popup no longer lists it"
    );
    // Re-added: the old port is dead, and a new session is reviewed again.
    op(&p, json!({"op": "policy.add", "id": HOST, "name": "Host"}));
    assert_eq!(
        block_on(p.handle_mcp(&s, &write("Sneaky", 2))),
        Outcome::Silent
    );
    let fresh = ready(&p);
    let second = write("Second", 3);
    let (out, ()) = block_on(async {
        futures::join!(p.handle_mcp(&fresh, &second), async {
            let waiting = p.pending_reviews();
            assert_eq!(waiting.len(), 1, "the new session's write waits for review");
            p.decide(&waiting[0].id, Decision::Deny);
        })
    });
    assert_eq!(error_code(&reply(out)["result"]), Some("USER_REJECTED"));
    let listed = call(&p, &fresh, "list_scripts", json!({}));
    assert_eq!(
        listed["structuredContent"]["total"],
        json!(1),
        "only the approved write landed"
    );
}

#[test]
fn deny_and_endpoint_off_close_too() {
    let p = provider();
    let s = ready(&p);
    let r = op(&p, json!({"op": "policy.deny", "id": HOST}));
    assert_eq!(closed(&r.effects), vec![s.id]);
    op(&p, json!({"op": "policy.approve", "id": HOST}));
    let s = ready(&p);
    let r = set_switch(&p, "endpoint", false);
    assert_eq!(closed(&r.effects), vec![s.id]);
    assert!(p.sessions_summary().is_empty());
    // A switch that keeps the caller authorized closes nothing.
    set_switch(&p, "endpoint", true);
    let s = ready(&p);
    assert!(closed(&set_switch(&p, "writes", false).effects).is_empty());
    assert!(p.session(s.id).is_some());
}

#[test]
fn turning_review_on_ends_every_allowance() {
    let p = provider();
    let s = allowed_session(&p);
    set_switch(&p, "review", false);
    assert!(
        p.is_waived(s.id),
        "off alone keeps it (nothing is reviewed anyway)"
    );
    set_switch(&p, "review", true);
    assert!(
        !p.is_waived(s.id),
        "on again: this session's writes are reviewed again"
    );
    assert!(p.session(s.id).is_some(), "the port itself stays open");
}

#[test]
fn a_port_still_authorizing_is_left_to_its_own_refusal() {
    let p = provider();
    let stranger = lumo_userscripts::ids::ExtensionId::parse(&"b".repeat(32)).unwrap();
    let s = p.open_session(stranger.clone());
    // The user changes the policy while the stranger's authorization runs: its port is not cut
    // off without a word; its own check refuses it with the reason.
    assert!(closed(&set_switch(&p, "writes", false).effects).is_empty());
    assert!(p.session(s.id).is_some());
    let policy = block_on(p.policy());
    assert!(matches!(
        s.authorize(policy.access(Some(&stranger))),
        lumo_userscripts::session::Authorized::Refuse { .. }
    ));
}

/// A write that arrives after the caller lost access, before its ports are closed (the removal
/// and the call in the same turn), is refused and still on the record; a read is refused alone.
#[test]
fn a_write_refused_for_lost_access_is_audited() {
    let p = provider();
    let s = ready(&p);
    block_on(p.update_policy(|pol| (pol.remove(&host()), true))).unwrap();
    let out = block_on(p.handle_mcp(&s, &write("Late", 7)));
    assert_eq!(error_code(&reply(out)["result"]), Some("UNAUTHORIZED"));
    let read = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "list_scripts", "arguments": {}}});
    let out = block_on(p.handle_mcp(&s, &read));
    assert_eq!(error_code(&reply(out)["result"]), Some("UNAUTHORIZED"));
    let r = block_on(control::handle(&p, &json!({"op": "audit.list"})));
    let entries = r.value["entries"].as_array().cloned().unwrap_or_default();
    let refused: Vec<_> = entries
        .iter()
        .filter(|e| e["result"] == json!("UNAUTHORIZED"))
        .collect();
    assert_eq!(refused.len(), 1, "{entries:?}");
    assert_eq!(refused[0]["tool"], json!("write_script"));
    assert_eq!(refused[0]["caller"], json!(HOST));
}

/// Any extension may connect. One left off the allowlist holds at most
/// `MAX_UNOPENED_PORTS` ports that are waiting for or refused authorization; past them its
/// new ports are not opened at all, while an approved caller's open ports never count.
#[test]
fn an_unapproved_caller_holds_a_bounded_number_of_ports() {
    use lumo_userscripts::provider::MAX_UNOPENED_PORTS;
    let p = provider();
    let stranger =
        lumo_userscripts::ids::ExtensionId::parse("abcdefghijklmnopabcdefghijklmnop").unwrap();
    let policy = block_on(p.policy());
    // Ports still being authorized: at most so many at once.
    let waiting: Vec<_> = (0..MAX_UNOPENED_PORTS)
        .map(|_| {
            assert!(p.admits_port(&stranger));
            p.open_session(stranger.clone())
        })
        .collect();
    assert!(!p.admits_port(&stranger), "a ninth port is not opened");
    p.close_session(waiting[0].id);
    assert!(p.admits_port(&stranger), "a closed one makes room");
    // Refused, each closes 100 ms after its answer; but so many refusals in the window close
    // the next ports unread, until the window ends.
    for s in &waiting[1..] {
        let _ = p.authorize(s, policy.access(Some(&stranger)));
        p.close_session(s.id);
    }
    assert!(p.admits_port(&stranger), "seven refusals");
    let s = p.open_session(stranger.clone());
    let _ = p.authorize(&s, policy.access(Some(&stranger)));
    p.close_session(s.id);
    assert!(!p.admits_port(&stranger), "eight refusals in the window");
    p.env.advance(lumo_userscripts::provider::REFUSED_WINDOW_MS);
    assert!(p.admits_port(&stranger), "the window ended");
    // An allowlisted caller refused because agent access is off is told why on every port.
    set_switch(&p, "endpoint", false);
    let off = block_on(p.policy());
    for _ in 0..3 * MAX_UNOPENED_PORTS {
        assert!(p.admits_port(&host()));
        let s = p.open_session(host());
        let _ = p.authorize(&s, off.access(Some(&host())));
        p.close_session(s.id);
    }
    assert!(p.admits_port(&host()));
    set_switch(&p, "endpoint", true);
    // The approved host's open ports are its own, and never counted.
    for _ in 0..3 * MAX_UNOPENED_PORTS {
        let _ = open(&p);
    }
    assert!(p.admits_port(&host()));
}
