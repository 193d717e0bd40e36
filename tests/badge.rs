//! The toolbar badge the shell paints after every message: what the popup lists, counted.

mod common;

use common::*;
use futures::executor::block_on;
use lumo_userscripts::ids::ExtensionId;
use lumo_userscripts::policy::Access;
use serde_json::json;

const STRANGER: &str = "abcdefghijklmnopabcdefghijklmnop";

#[test]
fn the_badge_counts_the_open_sessions_the_popup_lists_and_flags_a_waiting_approval() {
    let p = provider();
    let text = || block_on(p.badge()).text;
    assert_eq!(text(), "");

    let a = open(&p);
    let _b = open(&p);
    assert_eq!(text(), "2");
    assert_eq!(p.sessions_summary().len(), 2);

    // A refused port is not connected: the popup does not list it, the badge does not count it.
    let refused = p.open_session(ExtensionId::parse(STRANGER).unwrap());
    let _ = refused.authorize(Access::NotAllowlisted);
    assert!(refused.is_refused());
    assert_eq!(p.sessions_summary().len(), 2);
    assert_eq!(text(), "2");

    // The bridge's link is a connected caller too.
    p.bridge_dialing_fresh("127.0.0.1", 17817);
    let _link = p.bridge_opened(false, "0.1.0");
    assert_eq!(p.sessions_summary().len(), 3);
    assert_eq!(text(), "3");

    p.close_session(a.id);
    assert_eq!(text(), "2");

    // An unknown caller's probe asks the user: that outranks the count.
    let probe = json!({"channel": "lumo:probe", "version": 1, "id": "p-1", "client": {"id": STRANGER, "name": "Stranger"}});
    let asked = block_on(p.probe(Some(&probe.to_string()), Some(STRANGER))).to_json();
    let asked: serde_json::Value = serde_json::from_str(&asked).unwrap();
    assert_eq!(asked["status"]["pendingApproval"], json!(true), "{asked}");
    assert_eq!(block_on(p.badge()).text, "!");
}
