//! `notifications/cancelled`: MCP says the receiver must not answer a cancelled request.

mod common;

use common::*;
use futures::executor::block_on;
use lumo_userscripts::mcp::server::Outcome;
use serde_json::json;

#[test]
fn a_cancelled_request_gets_no_reply_but_is_still_audited() {
    let p = provider();
    set_switch(&p, "review", true);
    let s = ready(&p);
    let call = json!({"jsonrpc": "2.0", "id": 31, "method": "tools/call", "params": {
        "name": "write_script", "arguments": {"source": script("Cancelled", "")}}});
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 31, "reason": "user pressed stop"}});
    // The write waits for review; the cancellation arrives while it waits.
    let (out, silent) = block_on(async {
        futures::join!(p.handle_mcp(&s, &call), async {
            p.handle_mcp(&s, &cancel).await
        })
    });
    assert_eq!(silent, Outcome::Silent);
    assert_eq!(
        out,
        Outcome::Silent,
        "a cancelled request must not be answered"
    );
    let log = block_on(lumo_userscripts::guard::audit::read_all(&p.env)).unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].tool, "write_script");
    // Not a review that expired: the caller cancelled it (found by an exploratory pass).
    assert_eq!(log[0].result, "CANCELLED");
    // Nothing is left behind: the same id can be used again and is answered.
    let r = reply(send(
        &p,
        &s,
        json!({"jsonrpc": "2.0", "id": 31, "method": "ping"}),
    ));
    assert_eq!(r["id"], json!(31));
}

#[test]
fn cancelling_another_id_or_a_finished_request_changes_nothing() {
    let p = provider();
    set_switch(&p, "review", true);
    let s = ready(&p);
    // A cancellation for a request that already finished is ignored…
    send(
        &p,
        &s,
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}),
    );
    let r = reply(send(
        &p,
        &s,
        json!({"jsonrpc": "2.0", "id": 5, "method": "ping"}),
    ));
    assert_eq!(r["id"], json!(5));
    // …and one for "31" (a string) does not cancel 31 (a number), nor one on another session.
    let other = ready(&p);
    let call = json!({"jsonrpc": "2.0", "id": 31, "method": "tools/call", "params": {
        "name": "write_script", "arguments": {"source": script("Kept", "")}}});
    let (out, _, _) = block_on(async {
        futures::join!(
            p.handle_mcp(&s, &call),
            async {
                p.handle_mcp(
                    &s,
                    &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "31"}}),
                )
                .await;
                p.handle_mcp(
                    &other,
                    &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 31}}),
                )
                .await;
                let review = p.pending_reviews()[0].id.clone();
                p.decide(&review, lumo_userscripts::guard::review::Decision::Deny);
            },
            async {}
        )
    });
    let r = reply(out);
    assert_eq!(r["id"], json!(31));
    assert_eq!(error_code(&r["result"]), Some("USER_REJECTED"));
}
