//! The tool-call walk through the core with an in-memory environment: every check in its order,
//! the rate limit at its exact boundary, review outcomes, audit entries and the marker test.

mod common;

use common::*;
use futures::executor::block_on;
use futures::future::join;
use lumo_userscripts::env::memory::MemoryEnv;
use lumo_userscripts::env::Area;
use lumo_userscripts::guard::audit;
use lumo_userscripts::guard::review::Decision;
use lumo_userscripts::provider::Provider;
use lumo_userscripts::session::Session;
use serde_json::{json, Value};
use std::future::Future;

/// Lowercase hex sha256, computed here (not with the provider's helper) to check its digests.
fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
use std::pin::Pin;
use std::task::{Context, Poll};

/// Yields once to the executor, so a `join`ed side can make progress.
struct YieldNow(bool);
impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

/// The review the provider is waiting on, as the user sees it in the popup (yields until one is).
async fn next_review(p: &Provider<MemoryEnv>) -> String {
    loop {
        if let Some(r) = p.pending_reviews().first() {
            return r.id.clone();
        }
        YieldNow(false).await;
    }
}

/// Runs one `tools/call` while `user` acts on the review surface; returns the call's result.
fn call_while<F: Future<Output = ()>>(
    p: &Provider<MemoryEnv>,
    s: &Session,
    msg: Value,
    user: F,
) -> Value {
    let (out, ()) = block_on(join(async { p.handle_mcp(s, &msg).await }, user));
    reply(out)["result"].clone()
}

/// Runs a call that must fail before any review opens. A review that opens anyway is denied
/// (so the test fails with a message instead of hanging on a decision that never comes).
fn call_expecting_no_review(
    p: &Provider<MemoryEnv>,
    s: &Session,
    name: &str,
    args: Value,
) -> Value {
    let opened = std::cell::Cell::new(false);
    let watcher = async {
        for _ in 0..1000 {
            if let Some(r) = p.pending_reviews().first() {
                opened.set(true);
                p.decide(&r.id.clone(), Decision::Deny);
                return;
            }
            YieldNow(false).await;
        }
    };
    let r = call_while(
        p,
        s,
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": name, "arguments": args}}),
        watcher,
    );
    assert!(
        !opened.get(),
        "{name}: a review was opened for a doomed write: {r}"
    );
    r
}

fn audit_log(p: &Provider<MemoryEnv>) -> Vec<audit::Entry> {
    block_on(audit::read_all(&p.env)).unwrap()
}

fn create(p: &Provider<MemoryEnv>, s: &Session, name: &str) -> Value {
    let r = call(p, s, "write_script", json!({"source": script(name, "")}));
    assert_eq!(r["isError"], json!(false), "{r}");
    r["structuredContent"]["script"].clone()
}

/// Runs a write while a second task plays the user on the review surface.
fn with_review(
    p: &Provider<MemoryEnv>,
    s: &Session,
    name: &str,
    args: Value,
    decide: Option<Decision>,
) -> Value {
    let user = async {
        if let Some(d) = decide {
            let id = next_review(p).await;
            assert!(p.decide(&id, d));
        }
    };
    call_while(
        p,
        s,
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": name, "arguments": args}}),
        user,
    )
}

#[test]
fn a_created_script_is_registered_and_readable() {
    let p = provider();
    let s = ready(&p);
    let created = call(
        &p,
        &s,
        "write_script",
        json!({"source": script("A", "document.title = 'x';")}),
    );
    assert_eq!(created["structuredContent"]["registered"], json!(true));
    let uuid = created["structuredContent"]["script"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(p.env.registrations.borrow().contains_key(&uuid));
    let got = call(&p, &s, "get_script", json!({"uuid": uuid}));
    assert_eq!(got["structuredContent"]["script"]["createdBy"], json!(HOST));
    assert!(got["structuredContent"]["script"]["source"]
        .as_str()
        .unwrap()
        .contains("document.title"));
    let m = call(&p, &s, "match_url", json!({"url": "https://example.com/a"}));
    assert_eq!(m["structuredContent"]["scripts"][0]["runs"], json!(true));
    let none = call(&p, &s, "match_url", json!({"url": "https://other.org/"}));
    assert_eq!(none["structuredContent"]["scripts"], json!([]));
}

#[test]
fn bad_arguments_are_readable_errors() {
    let p = provider();
    let s = ready(&p);
    let cases = [
        ("get_script", json!({"uuid": "nope"}), "INVALID_ARGUMENTS"),
        (
            "get_script",
            json!({"uuid": "00000000-0000-4000-8000-000000000099"}),
            "NOT_FOUND",
        ),
        ("list_scripts", json!({"limit": 1000}), "INVALID_ARGUMENTS"),
        ("list_scripts", json!({"bogus": 1}), "INVALID_ARGUMENTS"),
        (
            "list_scripts",
            json!({"enabled": "yes"}),
            "INVALID_ARGUMENTS",
        ),
        (
            "write_script",
            json!({"source": "x".repeat(300 * 1024)}),
            "PAYLOAD_TOO_LARGE",
        ),
        (
            "write_script",
            json!({"source": "no header"}),
            "INVALID_METADATA",
        ),
        (
            "write_script",
            json!({"source": script("A", ""), "uuid": "00000000-0000-4000-8000-000000000001"}),
            "INVALID_ARGUMENTS",
        ),
        (
            "patch_script",
            json!({"uuid": "00000000-0000-4000-8000-000000000001", "revision": 1, "edits": []}),
            "INVALID_ARGUMENTS",
        ),
        (
            "match_url",
            json!({"url": "not a url"}),
            "INVALID_ARGUMENTS",
        ),
    ];
    for (tool, args, code) in cases {
        let r = call(&p, &s, tool, args.clone());
        assert_eq!(r["isError"], json!(true), "{tool} {args}");
        assert_eq!(error_code(&r), Some(code), "{tool} {args}: {r}");
        assert!(!r["content"][0]["text"].as_str().unwrap().is_empty());
    }
}

#[test]
fn read_only_mode_refuses_every_write_and_audits_it() {
    let p = provider();
    let s = ready(&p);
    let a = create(&p, &s, "A");
    set_switch(&p, "writes", false);
    for (tool, args) in [
        ("write_script", json!({"source": script("B", "")})),
        (
            "set_script_enabled",
            json!({"uuid": a["uuid"], "enabled": false}),
        ),
        ("delete_script", json!({"uuid": a["uuid"]})),
    ] {
        let r = call(&p, &s, tool, args);
        assert_eq!(error_code(&r), Some("WRITE_DISABLED"));
        assert_eq!(r["structuredContent"]["status"], json!(403));
    }
    let log = audit_log(&p);
    assert_eq!(
        log.iter().filter(|e| e.result == "WRITE_DISABLED").count(),
        3
    );
    assert_eq!(log[0].target.as_deref(), a["uuid"].as_str());
    // Reads still work.
    assert_eq!(
        call(&p, &s, "list_scripts", json!({}))["structuredContent"]["total"],
        json!(1)
    );
}

#[test]
fn rate_limit_boundary_is_exact_and_refusals_do_not_count() {
    let p = provider();
    let s = ready(&p);
    let a = create(&p, &s, "A"); // write 1 at t
    for i in 1..30 {
        let r = call(
            &p,
            &s,
            "set_script_enabled",
            json!({"uuid": a["uuid"], "enabled": i % 2 == 0}),
        );
        assert_eq!(r["isError"], json!(false), "write {}", i + 1);
    }
    p.env.advance(59_999.0);
    let r = call(
        &p,
        &s,
        "set_script_enabled",
        json!({"uuid": a["uuid"], "enabled": true}),
    );
    assert_eq!(error_code(&r), Some("RATE_LIMITED"));
    assert_eq!(
        r["structuredContent"]["details"]["retryAfterSeconds"],
        json!(1.0)
    );
    // The text states the limit the limiter enforces (its constants), and when to retry.
    use lumo_userscripts::guard::rate_limit::{MAX_WRITES, WINDOW_MS};
    let text = r["structuredContent"]["message"].as_str().unwrap();
    assert!(
        text.contains(&format!(
            "at most {MAX_WRITES} writes per {} seconds; retry in 1 s",
            WINDOW_MS / 1000.0
        )),
        "{text}"
    );
    // Invalid arguments are refused before the rate limit and cost nothing either way.
    assert_eq!(
        error_code(&call(&p, &s, "delete_script", json!({"uuid": 1}))),
        Some("INVALID_ARGUMENTS")
    );
    p.env.advance(1.0);
    let r = call(
        &p,
        &s,
        "set_script_enabled",
        json!({"uuid": a["uuid"], "enabled": false}),
    );
    assert_eq!(r["isError"], json!(false), "{r}");
    // Reads are never limited.
    for _ in 0..50 {
        assert_eq!(call(&p, &s, "status", json!({}))["isError"], json!(false));
    }
    let log = audit_log(&p);
    assert_eq!(log.iter().filter(|e| e.result == "RATE_LIMITED").count(), 1);
    assert_eq!(log.iter().filter(|e| e.result == "ok").count(), 31);
}

#[test]
fn review_approve_deny_expire_and_changed_meanwhile() {
    let p = provider();
    let s = ready(&p);
    let a = create(&p, &s, "A");
    set_switch(&p, "review", true);

    let r = with_review(
        &p,
        &s,
        "set_script_enabled",
        json!({"uuid": a["uuid"], "enabled": false}),
        Some(Decision::Deny),
    );
    assert_eq!(error_code(&r), Some("USER_REJECTED"));
    assert_eq!(r["structuredContent"]["status"], json!(403));

    let r = with_review(
        &p,
        &s,
        "set_script_enabled",
        json!({"uuid": a["uuid"], "enabled": false}),
        Some(Decision::Approve {
            allow_session: false,
        }),
    );
    assert_eq!(r["isError"], json!(false), "{r}");
    assert_eq!(r["structuredContent"]["script"]["enabled"], json!(false));

    p.env.timers_fire.set(true);
    let r = with_review(&p, &s, "delete_script", json!({"uuid": a["uuid"]}), None);
    assert_eq!(error_code(&r), Some("REVIEW_EXPIRED"));
    p.env.timers_fire.set(false);
    assert!(p.pending_reviews().is_empty());

    // The target changes while the user looks at the review: approval gives CONFLICT.
    let uuid = a["uuid"].as_str().unwrap().to_owned();
    let msg = json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {"name": "delete_script", "arguments": {"uuid": uuid}}});
    let user = async {
        let rid = next_review(&p).await;
        lumo_userscripts::scripts::store::set_enabled(&p.env, "user", &uuid, true, None)
            .await
            .unwrap();
        assert!(p.decide(
            &rid,
            Decision::Approve {
                allow_session: false
            }
        ));
    };
    let r = call_while(&p, &s, msg, user);
    assert_eq!(error_code(&r), Some("CONFLICT"), "{r}");
    assert!(block_on(lumo_userscripts::scripts::store::load(&p.env, &uuid)).is_ok());

    let results: Vec<String> = audit_log(&p).iter().map(|e| e.result.clone()).collect();
    for code in ["USER_REJECTED", "REVIEW_EXPIRED", "CONFLICT"] {
        assert!(results.contains(&code.to_owned()), "{results:?}");
    }
}

#[test]
fn allow_for_this_session_skips_later_reviews_on_that_port_only() {
    let p = provider();
    let s = ready(&p);
    set_switch(&p, "review", true);
    let r = with_review(
        &p,
        &s,
        "write_script",
        json!({"source": script("A", "")}),
        Some(Decision::Approve {
            allow_session: true,
        }),
    );
    assert_eq!(r["isError"], json!(false));
    // No review now: a call that would wait forever completes.
    let r = call(&p, &s, "write_script", json!({"source": script("B", "")}));
    assert_eq!(r["isError"], json!(false));
    let other = ready(&p);
    let r = with_review(
        &p,
        &other,
        "write_script",
        json!({"source": script("C", "")}),
        Some(Decision::Deny),
    );
    assert_eq!(error_code(&r), Some("USER_REJECTED"));
}

/// "Approve all from this session" on one waiting write approves that session's other waiting
/// writes too (R15: they kept waiting), and no other session's.
#[test]
fn approve_all_takes_the_sessions_waiting_writes_and_no_others() {
    let p = provider();
    let s = ready(&p);
    let other = ready(&p);
    set_switch(&p, "review", true);
    let msg = |id: u64, name: &str| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "write_script", "arguments": {"source": script(name, "")}}});
    let (a, b, c) = (msg(1, "A"), msg(2, "B"), msg(3, "C"));
    let user = async {
        while p.pending_reviews().len() < 3 {
            YieldNow(false).await;
        }
        let first = p.pending_reviews()[0].id.clone();
        let answer = lumo_userscripts::control::handle(
            &p,
            &json!({"op": "reviews.decide", "review": first, "approve": true, "allowSession": true}),
        )
        .await;
        assert_eq!(answer.value["applied"], json!(true), "{}", answer.value);
        let second = answer.value["alsoApproved"][0].as_str().unwrap_or_default();
        assert_eq!(
            answer.value["alsoApproved"].as_array().map(Vec::len),
            Some(1)
        );
        assert!(
            second.ends_with('2'),
            "the session's own other write: {}",
            answer.value
        );
        // The other session's write still waits for its own answer.
        let left = p.pending_reviews();
        assert_eq!(left.len(), 1, "{left:?}");
        assert!(p.decide(&left[0].id, Decision::Deny));
    };
    let calls = futures::future::join3(p.handle_mcp(&s, &a), p.handle_mcp(&s, &b), async {
        // The other session's write is asked about after the first two.
        while p.pending_reviews().len() < 2 {
            YieldNow(false).await;
        }
        p.handle_mcp(&other, &c).await
    });
    let ((ra, rb, rc), ()) = block_on(join(calls, user));
    assert_eq!(reply(ra)["result"]["isError"], json!(false));
    assert_eq!(reply(rb)["result"]["isError"], json!(false));
    assert_eq!(error_code(&reply(rc)["result"]), Some("USER_REJECTED"));
}

#[test]
fn doomed_writes_fail_before_asking_the_user() {
    let p = provider();
    let s = ready(&p);
    let a = create(&p, &s, "A");
    set_switch(&p, "review", true);
    let r = call_expecting_no_review(
        &p,
        &s,
        "write_script",
        json!({"source": script("A", "x"), "uuid": a["uuid"], "revision": 7}),
    );
    assert_eq!(error_code(&r), Some("CONFLICT"));
    let r = call_expecting_no_review(
        &p,
        &s,
        "patch_script",
        json!({"uuid": a["uuid"], "revision": 1, "edits": [{"search": "absent", "replace": "x"}]}),
    );
    assert_eq!(error_code(&r), Some("INVALID_ARGUMENTS"));
    assert!(p.pending_reviews().is_empty());
}

/// The stub of a review a previous worker left waiting (a `delete_script` of HOST's).
fn leave_review_stub(p: &Provider<MemoryEnv>) {
    let mut m = serde_json::Map::new();
    m.insert("reviews".into(), json!([{"id": "r1", "caller": HOST, "tool": "delete_script", "target": null, "digest": "ab", "createdAt": 1.0}]));
    block_on(lumo_userscripts::env::Storage::set(&p.env, Area::Local, m)).unwrap();
}

#[test]
fn interrupted_reviews_are_audited_on_resume() {
    let p = provider();
    leave_review_stub(&p);
    block_on(p.resume_interrupted_reviews());
    let log = audit_log(&p);
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].result, "REVIEW_INTERRUPTED");
    assert_eq!(p.env.dump(Area::Local)["reviews"], json!([]));
}

/// A review that opens before the start-up settles the previous worker's stubs (a host that
/// reconnects at once) does not save over them: they are still audited as interrupted.
#[test]
fn interrupted_reviews_are_audited_even_when_a_review_opens_first() {
    let p = provider();
    leave_review_stub(&p);
    let s = ready(&p);
    set_switch(&p, "review", true);
    let r = with_review(
        &p,
        &s,
        "write_script",
        json!({"source": script("Early", "")}),
        Some(Decision::Deny),
    );
    assert_eq!(error_code(&r), Some("USER_REJECTED"), "{r}");
    block_on(p.resume_interrupted_reviews()); // the start-up's turn, later
    let results: Vec<String> = audit_log(&p)
        .into_iter()
        .map(|e| format!("{} {}", e.tool, e.result))
        .collect();
    assert!(
        results.contains(&"delete_script REVIEW_INTERRUPTED".to_owned()),
        "{results:?}"
    );
    assert_eq!(
        results.iter().filter(|r| r.contains("INTERRUPTED")).count(),
        1,
        "{results:?}"
    );
}

#[test]
fn audit_digest_is_of_the_arguments_and_source_never_stored_elsewhere() {
    let p = provider();
    let s = ready(&p);
    let marker = "MARKER-7f3a9c2e-unique";
    let r = call(
        &p,
        &s,
        "write_script",
        json!({"source": script("Marked", &format!("console.log('{marker}');"))}),
    );
    let uuid = r["structuredContent"]["script"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    // Patch it too, so the marker appears in edit arguments as well.
    let r = call(
        &p,
        &s,
        "patch_script",
        json!({"uuid": uuid, "revision": 1, "edits": [{"search": marker, "replace": format!("{marker}-2")}]}),
    );
    assert_eq!(r["isError"], json!(false), "{r}");
    let log = audit_log(&p);
    assert_eq!(log.len(), 2);
    assert!(log
        .iter()
        .all(|e| e.target.as_deref() == Some(uuid.as_str())));
    // Each digest is the sha256 of the call's own arguments, as JSON text with sorted keys.
    let created_args = format!(
        "{{\"source\":{}}}",
        serde_json::to_string(&script("Marked", &format!("console.log('{marker}');"))).unwrap()
    );
    let patch_args = format!(
        "{{\"edits\":[{{\"replace\":\"{marker}-2\",\"search\":\"{marker}\"}}],\"revision\":1,\"uuid\":\"{uuid}\"}}"
    );
    // (The log reads newest first.)
    assert_eq!(log[1].digest, sha256_hex(&created_args));
    assert_eq!(log[0].digest, sha256_hex(&patch_args));
    // Key order does not matter; any value does.
    let refused = |args: &str| {
        let msg = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{{\"name\":\"delete_script\",\"arguments\":{args}}}}}"
        );
        let v: Value = serde_json::from_str(&msg).unwrap();
        reply(send(&p, &s, v));
        audit_log(&p)[0].digest.clone()
    };
    let a = refused(r#"{"uuid": "nope", "revision": 1}"#);
    let b = refused(r#"{"revision": 1, "uuid": "nope"}"#);
    let c = refused(r#"{"revision": 2, "uuid": "nope"}"#);
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_eq!(a, sha256_hex(r#"{"revision":1,"uuid":"nope"}"#));
    for area in [Area::Local, Area::Session] {
        for (k, v) in p.env.dump(area) {
            // The script's own source, and its earlier versions in its history.
            if k == format!("source/{uuid}") || k.starts_with(&format!("history/{uuid}/")) {
                continue;
            }
            assert!(
                !v.to_string().contains("MARKER-7f3a9c2e"),
                "marker found under {k}"
            );
        }
    }
}

/// A write that would change nothing (a retry whose first answer was lost, a patch replacing a
/// text with itself) stores nothing: no revision that copies the one before, pushing the user's
/// versions out of the 20 the history keeps.
#[test]
fn a_write_of_the_same_source_stores_no_revision() {
    let p = provider();
    let s = ready(&p);
    let a = create(&p, &s, "Same");
    let uuid = a["uuid"].clone();
    let src = script("Same", "");
    let again = call(
        &p,
        &s,
        "write_script",
        json!({"uuid": uuid, "revision": 1, "source": src}),
    );
    assert_eq!(again["isError"], json!(false), "{again}");
    assert_eq!(
        again["structuredContent"]["script"]["revision"],
        json!(1),
        "{again}"
    );
    let text = again["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.starts_with("Nothing to change in \"Same\""), "{text}");
    let patched = call(
        &p,
        &s,
        "patch_script",
        json!({"uuid": uuid, "revision": 1, "edits": [{"search": "@name Same", "replace": "@name Same"}]}),
    );
    assert_eq!(
        patched["structuredContent"]["script"]["revision"],
        json!(1),
        "{patched}"
    );
    let revs = call(&p, &s, "list_revisions", json!({"uuid": uuid}));
    assert_eq!(revs["isError"], json!(false), "{revs}");
    // Only the current one.
    assert_eq!(
        revs["structuredContent"]["revisions"]
            .as_array()
            .map(Vec::len),
        Some(1),
        "{revs}"
    );
    // The same source turning the script off is a change.
    let off = call(
        &p,
        &s,
        "write_script",
        json!({"uuid": uuid, "revision": 1, "source": src, "enabled": false}),
    );
    assert_eq!(
        off["structuredContent"]["script"]["revision"],
        json!(2),
        "{off}"
    );
    assert_eq!(
        off["structuredContent"]["script"]["enabled"],
        json!(false),
        "{off}"
    );
}

/// An agent deleting page by page, or a script written by someone else between two pages:
/// following nextCursor still lists every other script once. With an offset for a cursor,
/// deleting the first page made the next skip as many, and a script moved to the front showed
/// one twice.
#[test]
fn list_pages_skip_nothing_when_scripts_change_between_them() {
    let p = provider();
    let s = ready(&p);
    for i in 0..12 {
        create(&p, &s, &format!("Pg {i}"));
        // Some share a time: ties are ordered too.
        if i % 3 == 0 {
            p.env.advance(1.0);
        }
    }
    let page = |cursor: &Value| {
        let mut args = json!({"query": "Pg ", "limit": 5});
        if let Some(c) = cursor.as_str() {
            args["cursor"] = json!(c);
        }
        let r = call(&p, &s, "list_scripts", args);
        assert_eq!(r["isError"], json!(false), "{r}");
        r["structuredContent"].clone()
    };
    // Delete each page's scripts before asking for the next.
    let mut deleted = 0;
    let mut cursor = Value::Null;
    loop {
        let r = page(&cursor);
        for sc in r["scripts"].as_array().unwrap() {
            let d = call(&p, &s, "delete_script", json!({"uuid": sc["uuid"]}));
            assert_eq!(d["isError"], json!(false), "{d}");
            deleted += 1;
        }
        cursor = r["nextCursor"].clone();
        if cursor.is_null() {
            break;
        }
    }
    assert_eq!(deleted, 12);

    // Another writer between pages: a script not yet listed moves to the front (it is not
    // given again, nor is any other skipped or repeated). A new rate window first.
    p.env.advance(61_000.0);
    let mut names = Vec::new();
    for i in 0..12 {
        names.push(
            create(&p, &s, &format!("Pg {i}"))["uuid"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
        p.env.advance(1.0);
    }
    let first = page(&Value::Null);
    let mut seen: Vec<String> = Vec::new();
    let collect = |r: &Value, seen: &mut Vec<String>| {
        for sc in r["scripts"].as_array().unwrap() {
            seen.push(sc["uuid"].as_str().unwrap().to_owned());
        }
    };
    collect(&first, &mut seen);
    // The newest first: "Pg 11" … "Pg 7" were listed; "Pg 2" is changed now.
    let changed = names[2].clone();
    p.env.advance(1.0);
    let r = call(
        &p,
        &s,
        "set_script_enabled",
        json!({"uuid": changed, "enabled": false}),
    );
    assert_eq!(r["isError"], json!(false), "{r}");
    let mut cursor = first["nextCursor"].clone();
    while !cursor.is_null() {
        let r = page(&cursor);
        collect(&r, &mut seen);
        cursor = r["nextCursor"].clone();
    }
    let mut want: Vec<String> = names.iter().filter(|u| **u != changed).cloned().collect();
    want.sort();
    let mut got = seen.clone();
    got.sort();
    assert_eq!(got, want, "listed: {seen:?}");
}

/// A cursor this server never gave is refused, not read as the start.
#[test]
fn a_list_cursor_it_never_gave_is_refused() {
    let p = provider();
    let s = ready(&p);
    for bad in [
        "5",
        "",
        "x~y",
        "0000000000000000~not-a-uuid",
        "00000000000000~00000000-0000-4000-8000-000000000000",
    ] {
        let r = send(
            &p,
            &s,
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "list_scripts", "arguments": {"cursor": bad}}}),
        );
        let v = reply(r);
        let text = v.to_string();
        assert!(
            text.contains("cursor must be a nextCursor value"),
            "{bad}: {text}"
        );
    }
}

#[test]
fn list_pages_filters_and_counts() {
    let p = provider();
    let s = ready(&p);
    for i in 0..7 {
        create(&p, &s, &format!("S{i}"));
        p.env.advance(1.0);
    }
    let first = call(&p, &s, "list_scripts", json!({"limit": 3}));
    assert_eq!(first["structuredContent"]["total"], json!(7));
    assert_eq!(
        first["structuredContent"]["scripts"][0]["name"],
        json!("S6")
    );
    let next = first["structuredContent"]["nextCursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let second = call(&p, &s, "list_scripts", json!({"limit": 3, "cursor": next}));
    assert_eq!(
        second["structuredContent"]["scripts"][0]["name"],
        json!("S3")
    );
    let q = call(&p, &s, "list_scripts", json!({"query": "s5"}));
    assert_eq!(q["structuredContent"]["total"], json!(1));
    // Case-insensitive beyond ASCII, either way round.
    create(&p, &s, "École Straße");
    for query in ["ÉCOLE", "straße", "STRASSE"] {
        let q = call(&p, &s, "list_scripts", json!({ "query": query }));
        let want = if query == "STRASSE" { 0 } else { 1 };
        assert_eq!(q["structuredContent"]["total"], json!(want), "{query}");
    }
    let none = call(
        &p,
        &s,
        "list_scripts",
        json!({"url": "https://nowhere.test/"}),
    );
    assert_eq!(none["structuredContent"]["total"], json!(0));
}

#[test]
fn access_withdrawn_during_review_wins_over_the_approval() {
    let p = provider();
    let s = ready(&p);
    set_switch(&p, "review", true);
    let msg = json!({"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": {"name": "write_script", "arguments": {"source": script("Late", "")}}});
    // Approved, then writes turned off before the approved write resumes: the switch wins.
    // (Turned off first, the review ends at once: `turning_writes_off_ends_the_writes_waiting_for_review`.)
    let user = async {
        let rid = next_review(&p).await;
        assert!(p.decide(
            &rid,
            Decision::Approve {
                allow_session: false
            }
        ));
        let off = json!({"op": "policy.setSwitch", "name": "writes", "value": false});
        lumo_userscripts::control::handle(&p, &off).await;
    };
    let r = call_while(&p, &s, msg, user);
    assert_eq!(error_code(&r), Some("WRITE_DISABLED"), "{r}");
    assert_eq!(block_on(p.scripts()).unwrap().index.len(), 0);
}

#[test]
fn a_replace_all_bomb_is_refused_before_building_with_review_on_or_off() {
    let p = provider();
    let s = ready(&p);
    const MAX: usize = 256 * 1024;
    // A script whose body is one long line of `a`, as large as allowed.
    let header = script("Bomb", "");
    let source = format!("{header}{}", "a".repeat(MAX - header.len()));
    let r = call(&p, &s, "write_script", json!({ "source": source }));
    assert_eq!(r["isError"], json!(false), "{r}");
    let uuid = r["structuredContent"]["script"]["uuid"].clone();
    // Each `a` replaced by just under 256 KiB (the edits' own limit): ~64 GiB if built.
    let edits = json!([{"search": "a", "replace": "b".repeat(MAX - 1), "all": true}]);
    for review in [false, true] {
        set_switch(&p, "review", review);
        let started = std::time::Instant::now();
        // With review on, the preview runs the same code first; it must fail before asking.
        let r = call_expecting_no_review(
            &p,
            &s,
            "patch_script",
            json!({"uuid": uuid, "revision": 1, "edits": edits}),
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert_eq!(error_code(&r), Some("PAYLOAD_TOO_LARGE"), "{r}");
        let text = r["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("edit 1") && text.contains("limit"), "{text}");
        assert!(p.pending_reviews().is_empty());
    }
    // Nothing changed and the provider still answers.
    let got = call(&p, &s, "get_script", json!({"uuid": uuid}));
    assert_eq!(got["structuredContent"]["script"]["revision"], json!(1));
    assert_eq!(call(&p, &s, "status", json!({}))["isError"], json!(false));
}

/// A write's audit entry is finalized beside its registration, not after it: in Chrome a
/// storage call issued after `update` waits until every registration is saved (~140 ms at 1,000
/// stored). The entry is still "ok" when the registration is refused (the result says why).
#[test]
fn a_writes_audit_entry_goes_out_before_its_registration_is_done() {
    let p = provider();
    let s = ready(&p);
    let a = create(&p, &s, "A");
    p.env.update_yields.set(4);
    p.env.storage_log.borrow_mut().clear();
    p.env.updated_after.borrow_mut().clear();
    let r = call(
        &p,
        &s,
        "write_script",
        json!({"uuid": a["uuid"], "revision": 1, "source": script("A", "two();")}),
    );
    assert_eq!(r["isError"], json!(false), "{r}");
    assert_eq!(r["structuredContent"]["registered"], json!(true), "{r}");
    let log = p.env.storage_log.borrow().clone();
    let entry = log
        .iter()
        .rposition(|(area, k)| *area == Area::Local && k.iter().any(|k| k == "audit/pending"))
        .expect("the entry is finalized");
    let updated = p.env.updated_after.borrow().clone();
    assert_eq!(updated.len(), 1, "one update: {updated:?}");
    assert!(
        entry < updated[0],
        "finalized after the update: {log:?}, update at {updated:?}"
    );
    let last = audit_log(&p).into_iter().last().unwrap();
    assert_eq!(
        (last.result.as_str(), last.target.as_deref()),
        ("ok", a["uuid"].as_str())
    );

    *p.env.refuse_register.borrow_mut() = Some("Script with ID 'x' has an invalid match".into());
    let r = call(
        &p,
        &s,
        "write_script",
        json!({"uuid": a["uuid"], "revision": 2, "source": script("A", "three();")}),
    );
    assert_eq!(r["isError"], json!(false), "{r}");
    assert!(
        r["structuredContent"]["registrationError"]
            .as_str()
            .unwrap()
            .contains("invalid match"),
        "{r}"
    );
    let last = audit_log(&p).into_iter().last().unwrap();
    assert_eq!(
        (last.result.as_str(), last.target.as_deref()),
        ("ok", a["uuid"].as_str())
    );
    assert!(
        p.env.dump(Area::Local)["audit/pending"]
            .get("tool")
            .is_none(),
        "the pending slot is cleared"
    );
}

/// The rate slot is stored beside the write's reads, but no change goes out before it is
/// recorded, however slow `storage.session` is; a slot that cannot be recorded stops the write
/// with nothing stored or registered (fail closed), and the refusal is audited.
#[test]
fn a_write_changes_nothing_before_its_rate_slot_is_recorded() {
    use lumo_userscripts::provider::keys;
    let p = provider();
    let s = ready(&p);
    let a = create(&p, &s, "A");
    p.env.session_set_yields.set(6);
    p.env.storage_log.borrow_mut().clear();
    let r = call(
        &p,
        &s,
        "write_script",
        json!({"uuid": a["uuid"], "revision": 1, "source": script("A", "two();")}),
    );
    assert_eq!(r["isError"], json!(false), "{r}");
    let log = p.env.storage_log.borrow().clone();
    let slot = log
        .iter()
        .position(|(area, k)| *area == Area::Session && k.iter().any(|k| k == keys::RATE_WINDOW))
        .expect("the slot is stored");
    let first_local = log
        .iter()
        .position(|(area, _)| *area == Area::Local)
        .unwrap();
    assert!(slot < first_local, "{log:?}");

    *p.env.fail_session_writes.borrow_mut() = Some("session storage is broken".into());
    let registered = p.env.registrations.borrow().clone();
    p.env.storage_log.borrow_mut().clear();
    for (tool, args) in [
        (
            "write_script",
            json!({"uuid": a["uuid"], "revision": 2, "source": script("A", "three();")}),
        ),
        (
            "set_script_enabled",
            json!({"uuid": a["uuid"], "enabled": false}),
        ),
        ("write_script", json!({"source": script("B", "")})),
    ] {
        let r = call(&p, &s, tool, args);
        assert_eq!(error_code(&r), Some("STORAGE_ERROR"), "{tool}: {r}");
        let message = r["structuredContent"]["message"].as_str().unwrap();
        assert!(
            message.contains(
                "could not record the write in the rate window: session storage is broken"
            ),
            "{tool}: {message}"
        );
    }
    let stored: Vec<_> = p
        .env
        .storage_log
        .borrow()
        .iter()
        .filter(|(area, k)| *area == Area::Local && !k.iter().all(|k| k.starts_with("audit/")))
        .cloned()
        .collect();
    assert!(stored.is_empty(), "changed: {stored:?}");
    assert_eq!(
        *p.env.registrations.borrow(),
        registered,
        "the registration changed"
    );
    let got = call(&p, &s, "get_script", json!({"uuid": a["uuid"]}));
    assert_eq!(got["structuredContent"]["script"]["revision"], json!(2));
    assert_eq!(got["structuredContent"]["script"]["enabled"], json!(true));
    let log = audit_log(&p);
    assert_eq!(
        log.iter().filter(|e| e.result == "STORAGE_ERROR").count(),
        3,
        "{log:?}"
    );
}

/// Writes wait their turn behind the write lock, each for as long as its `@require` fetches
/// take (up to 30 s): a hostile agent could queue its whole rate limit. A switch the user flips
/// meanwhile stops every one that has not begun, with the switch's own error, and nothing is
/// stored; with nothing flipped the same queued write goes through.
#[test]
fn writes_waiting_their_turn_are_stopped_by_a_switch_flipped_meanwhile() {
    let flips: [(Option<Value>, Option<&str>); 4] = [
        (None, None),
        (
            Some(json!({"op": "policy.setSwitch", "name": "writes", "value": false})),
            Some("WRITE_DISABLED"),
        ),
        (
            Some(json!({"op": "policy.setSwitch", "name": "review", "value": true})),
            Some("REVIEW_REQUIRED"),
        ),
        (
            Some(json!({"op": "policy.remove", "id": HOST})),
            Some("UNAUTHORIZED"),
        ),
    ];
    for (flip, code) in flips {
        let p = provider();
        let s = ready(&p);
        let msg = json!({"jsonrpc": "2.0", "id": 21, "method": "tools/call", "params": {"name": "write_script", "arguments": {"source": script("Queued", "")}}});
        let out = block_on(async {
            let held = p.write_lock().await; // another write, still running
            let mut queued = Box::pin(p.handle_mcp(&s, &msg));
            for _ in 0..50 {
                assert!(
                    futures::poll!(queued.as_mut()).is_pending(),
                    "it waits its turn"
                );
                YieldNow(false).await;
            }
            if let Some(op) = &flip {
                lumo_userscripts::control::handle(&p, op).await;
            }
            drop(held);
            queued.await
        });
        let r = reply(out)["result"].clone();
        assert_eq!(error_code(&r), code, "{flip:?}: {r}");
        let stored = block_on(p.scripts()).unwrap().index.len();
        assert_eq!(stored, usize::from(code.is_none()), "{flip:?}");
        if let Some(code) = code {
            let last = audit_log(&p).into_iter().last().expect("audited");
            assert_eq!(
                (last.tool.as_str(), last.result.as_str()),
                ("write_script", code)
            );
        }
    }
}

/// A session closed (the user's Disconnect) after a write's first checks but before its review
/// opens is never shown to the user: nothing would be left to answer, and an approval would
/// write for a caller the user sent away.
#[test]
fn no_review_opens_for_a_session_closed_before_it() {
    let p = provider();
    let s = ready(&p);
    set_switch(&p, "review", true);
    // The rate slot is stored before the user is asked: the call waits there.
    p.env.session_set_yields.set(4);
    let opened = std::cell::Cell::new(false);
    let user = async {
        p.close_session(s.id);
        for _ in 0..1000 {
            if let Some(r) = p.pending_reviews().first() {
                opened.set(true);
                p.decide(
                    &r.id.clone(),
                    Decision::Approve {
                        allow_session: false,
                    },
                );
                return;
            }
            YieldNow(false).await;
        }
    };
    let msg = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "write_script", "arguments": {"source": script("Gone", "")}}});
    let r = call_while(&p, &s, msg, user);
    assert!(!opened.get(), "a review opened for a closed session: {r}");
    assert_eq!(error_code(&r), Some("CANCELLED"), "{r}");
    assert_eq!(block_on(p.scripts()).unwrap().index.len(), 0);
}

/// A delete says how to undo it, with the numbers restore_script needs, and those numbers work.
#[test]
fn a_delete_says_how_to_bring_the_script_back_and_that_works() {
    let p = provider();
    let s = ready(&p);
    let a = create(&p, &s, "Gone");
    let uuid = a["uuid"].as_str().unwrap().to_owned();
    let w = call(
        &p,
        &s,
        "write_script",
        json!({"uuid": uuid, "revision": 1, "source": script("Gone", "// 2")}),
    );
    assert_eq!(w["isError"], json!(false), "{w}");
    let d = call(&p, &s, "delete_script", json!({"uuid": uuid}));
    let text = d["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("in the trash for 30 days")
            && text.contains("restore_script with revision and current_revision 2 brings it back"),
        "{text}"
    );
    let r = call(
        &p,
        &s,
        "restore_script",
        json!({"uuid": uuid, "revision": 2, "current_revision": 2}),
    );
    assert_eq!(r["isError"], json!(false), "{r}");
    assert!(p.env.registrations.borrow().contains_key(uuid.as_str()));
}

/// Found in review: a caller removed (or agent access turned off) while its write waited for
/// review closed its session, which withdrew the review as "cancelled": the audit said
/// CANCELLED. The reason is the revocation; a host that closed its own port is CANCELLED.
#[test]
fn a_review_withdrawn_by_a_revocation_is_unauthorized_not_cancelled() {
    for (op, code) in [
        (json!({"op": "policy.remove", "id": HOST}), "UNAUTHORIZED"),
        (
            json!({"op": "policy.setSwitch", "name": "endpoint", "value": false}),
            "UNAUTHORIZED",
        ),
        (
            json!({"op": "sessions.disconnect", "id": HOST}),
            "CANCELLED",
        ),
    ] {
        let p = provider();
        let s = ready(&p);
        set_switch(&p, "review", true);
        let user = async {
            next_review(&p).await;
            let done = lumo_userscripts::control::handle(&p, &op).await;
            assert_eq!(done.value["ok"], json!(true), "{op}");
            // What the shell does with the op's effects: the caller's ports close.
            for e in &done.effects {
                if let lumo_userscripts::control::Effect::Close { sessions, .. } = e {
                    sessions.iter().for_each(|id| {
                        p.close_session(*id);
                    });
                }
            }
        };
        let msg = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "write_script", "arguments": {"source": script("Revoked", "")}}});
        let r = call_while(&p, &s, msg, user);
        assert_eq!(error_code(&r), Some(code), "{op}: {r}");
        let log = block_on(audit::read_all(&p.env)).unwrap();
        assert_eq!(log[0].result, code, "{op}");
        assert_eq!(block_on(p.scripts()).unwrap().index.len(), 0);
    }
}
