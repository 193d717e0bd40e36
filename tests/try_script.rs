//! `try_script` through the whole tool-call walk, as a hostile agent would drive it: read-only,
//! review denial, an endless loop, a vanished tab, the toggle off, and the audit never holding
//! the tried source or what it logged.

mod common;

use common::*;
use futures::executor::block_on;
use futures::future::join;
use lumo_userscripts::env::memory::MemoryEnv;
use lumo_userscripts::env::{Area, Tab};
use lumo_userscripts::guard::review::Decision;
use lumo_userscripts::provider::Provider;
use lumo_userscripts::scripts::wrap;
use lumo_userscripts::session::Step;
use serde_json::{json, Value};

const SECRET: &str = "MARKER-5ecret-71";

fn with_tab(p: &Provider<MemoryEnv>) {
    p.env.tabs.borrow_mut().push(Tab {
        id: 7,
        url: "https://example.com/page".into(),
        title: "Example page".into(),
        last_accessed: 1.0,
        incognito: false,
    });
}

/// Whether a `set` in `area` has stored `key` so far (`storage_log`).
fn stored(p: &Provider<MemoryEnv>, area: Area, key: &str) -> bool {
    p.env
        .storage_log
        .borrow()
        .iter()
        .any(|(a, k)| *a == area && k.iter().any(|k| k == key))
}

/// The first review the user is asked for, once it is waiting (the call runs beside this).
async fn asked(p: &Provider<MemoryEnv>) -> lumo_userscripts::guard::review::ReviewRequest {
    for _ in 0..10_000 {
        if let Some(r) = p.pending_reviews().into_iter().next() {
            return r;
        }
        futures::pending!();
    }
    panic!("no review");
}

fn approve(p: &Provider<MemoryEnv>, id: &str) {
    let yes = Decision::Approve {
        allow_session: false,
    };
    assert!(p.decide(id, yes));
}

fn nonce_of(code: &str) -> String {
    let i = code.rfind("lumo-try-").unwrap() + "lumo-try-".len();
    code[i..].split(".js").next().unwrap().to_owned()
}

/// An empty tried script aimed at tab `id`.
fn in_tab(id: i64) -> Value {
    json!({"source": script("t", ""), "tabId": id})
}

fn args() -> Value {
    json!({"source": script("t", &format!("console.log('{SECRET}'); return 1;")), "url": "https://example.com/page"})
}

#[test]
fn read_only_refuses_and_runs_nothing() {
    let p = provider();
    with_tab(&p);
    set_switch(&p, "writes", false);
    let s = ready(&p);
    let r = call(&p, &s, "try_script", args());
    assert_eq!(error_code(&r), Some("WRITE_DISABLED"), "{r}");
    assert_eq!(r["structuredContent"]["status"], 403);
    assert!(p.env.executed.borrow().is_empty());
}

#[test]
fn a_denied_review_shows_the_tab_and_the_source_and_runs_nothing() {
    let p = provider();
    with_tab(&p);
    set_switch(&p, "review", true);
    let s = ready(&p);
    let msg = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "try_script", "arguments": args()}});
    let look = async {
        let r = asked(&p).await;
        assert!(p.decide(&r.id, Decision::Deny));
        r
    };
    let (out, review) = block_on(join(async { reply(p.handle_mcp(&s, &msg).await) }, look));
    assert_eq!(
        out["result"]["structuredContent"]["error_code"],
        "USER_REJECTED"
    );
    let effects = review.effects.join("\n");
    assert!(effects.contains("https://example.com/page"), "{effects}");
    assert!(effects.contains("Example page"), "{effects}");
    assert!(review.diff.as_deref().unwrap_or("").contains(SECRET));
    assert!(p.env.executed.borrow().is_empty(), "a denied try ran");
}

#[test]
fn an_endless_loop_times_out_and_the_provider_still_answers() {
    let p = provider();
    with_tab(&p);
    p.env.timers_fire.set(true); // the page never answers; the provider's timer fires
    let s = ready(&p);
    let r = call(&p, &s, "try_script", args());
    assert_eq!(error_code(&r), Some("TIMEOUT"), "{r}");
    assert!(r["structuredContent"]["message"]
        .as_str()
        .unwrap()
        .contains("may be hanging"));
    assert_eq!(call(&p, &s, "status", json!({}))["isError"], false);
    // The code ran in the page: its entry is an effect, which 1,200 cheap refusals (no
    // rate-limit slot) do not push out of the log.
    refuse_cheaply(&p, &s, 1200);
    let log = block_on(lumo_userscripts::guard::audit::read_all(&p.env)).unwrap();
    assert!(
        log.iter()
            .any(|e| e.tool == "try_script" && e.result == "TIMEOUT"),
        "the try that ran was evicted by refusals"
    );
}

#[test]
fn a_thrown_error_is_a_successful_call_with_its_line_and_nothing_reaches_the_audit() {
    let p = provider();
    with_tab(&p);
    let s = ready(&p);
    let src = script("t", &format!("console.log('{SECRET}');\nnull.x;"));
    let pl = u64::from(wrap::prelude_lines());
    // The env answers with the report the wrapper would send; the nonce is the next uuid.
    let nonce = "00000000-0000-4000-8000-000000000001";
    *p.env.execute_answer.borrow_mut() = Some(Ok(json!([{ "frameId": 0, "result": {
        "lumo": nonce, "url": "https://example.com/page", "title": "Example page", "threw": true,
        "error": {"name": "TypeError", "message": "Cannot read properties of null (reading 'x')", "line": pl + 7, "column": 6},
        "logs": [{"level": "log", "text": SECRET, "line": pl + 6}], "ms": 3 }}])));
    let r = call(&p, &s, "try_script", json!({"source": src, "tabId": 7}));
    assert_eq!(r["isError"], false, "{r}");
    let code = p.env.executed.borrow()[0].3.clone();
    assert_eq!(nonce_of(&code), nonce);
    assert_eq!(p.env.executed.borrow()[0].2, "lumo-try");
    let f = &r["structuredContent"]["frames"][0];
    assert_eq!(f["error"]["line"], 7);
    assert_eq!(f["console"][0]["line"], 6);
    assert_eq!(f["rulesMatch"], true);
    // The audit holds a digest, never the source nor what it logged.
    let local = serde_json::to_string(&p.env.dump(Area::Local)).unwrap();
    assert!(local.contains("try_script"), "not audited");
    assert!(!local.contains(SECRET), "the secret reached storage");
}

/// A try's world is configured with the installed script's policy before its code runs (else
/// its eval and inline `<script>` are blocked where the script's own world allows them), and
/// given back after, since Chrome holds only 100 configurations. With none left, the try runs
/// anyway and says it ran under a stricter policy.
#[test]
fn a_try_runs_in_a_world_with_the_scripts_policy_and_gives_it_back() {
    let p = provider();
    with_tab(&p);
    let s = ready(&p);
    *p.env.execute_answer.borrow_mut() = Some(Ok(json!([])));
    p.env.registry_calls.borrow_mut().clear();
    let r = call(&p, &s, "try_script", in_tab(7));
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(
        *p.env.registry_calls.borrow(),
        ["configureWorld", "execute", "resetWorldConfiguration"]
    );
    assert!(p.env.worlds.borrow().is_empty());
    assert!(r["structuredContent"].get("note").is_none(), "{r}");

    for i in 0..100 {
        p.env.worlds.borrow_mut().insert(format!("other-{i}"), true);
    }
    p.env.registry_calls.borrow_mut().clear();
    let r = call(&p, &s, "try_script", in_tab(7));
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(*p.env.registry_calls.borrow(), ["execute"]);
    let note = r["structuredContent"]["note"].as_str().unwrap_or_default();
    assert!(
        note.contains("stricter policy") && note.contains("100"),
        "{r}"
    );
    assert!(r["content"][0]["text"].as_str().unwrap().ends_with(note));
    assert_eq!(p.env.worlds.borrow().len(), 100);
}

#[test]
fn refusals_say_why() {
    let p = provider();
    let s = ready(&p);
    // No such tab.
    let r = call(
        &p,
        &s,
        "try_script",
        json!({"source": script("t", ""), "url": "https://nowhere.test/"}),
    );
    assert_eq!(error_code(&r), Some("NOT_FOUND"));
    assert!(r["structuredContent"]["message"]
        .as_str()
        .unwrap()
        .contains("https://nowhere.test/"));
    // A chrome:// tab.
    p.env.tabs.borrow_mut().push(Tab {
        id: 2,
        url: "chrome://settings/".into(),
        title: "S".into(),
        last_accessed: 0.0,
        incognito: false,
    });
    let r = call(&p, &s, "try_script", in_tab(2));
    assert_eq!(error_code(&r), Some("CANNOT_RUN"));
    // A tab of a private window: never named by address, refused by id; nothing runs there.
    p.env.tabs.borrow_mut().push(Tab {
        id: 3,
        url: "https://private.test/secret?q=1".into(),
        title: "Private".into(),
        last_accessed: 9.0,
        incognito: true,
    });
    let r = call(
        &p,
        &s,
        "try_script",
        json!({"source": script("t", ""), "url": "https://private.test/*"}),
    );
    assert_eq!(error_code(&r), Some("NOT_FOUND"), "{r}");
    let r = call(&p, &s, "try_script", in_tab(3));
    assert_eq!(error_code(&r), Some("CANNOT_RUN"), "{r}");
    let said = r["structuredContent"]["message"].as_str().unwrap();
    assert!(
        said.contains("incognito") && !said.contains("secret"),
        "{said}"
    );
    assert_eq!(p.env.executed.borrow().len(), 0, "nothing ran");
    // The toggle off: the probe's reason.
    with_tab(&p);
    p.env.user_scripts.set(false);
    let r = call(&p, &s, "try_script", in_tab(7));
    assert_eq!(error_code(&r), Some("UNAVAILABLE"));
    assert!(r["structuredContent"]["message"]
        .as_str()
        .unwrap()
        .contains("Allow User Scripts"));
    p.env.user_scripts.set(true);
    // The tab closed between the lookup and the run.
    *p.env.execute_answer.borrow_mut() = Some(Err("No tab with id: 7.".into()));
    let r = call(&p, &s, "try_script", in_tab(7));
    assert_eq!(error_code(&r), Some("NOT_FOUND"), "{r}");
    // The page made the answer too large to read: the code ran, and the agent is told so (a
    // "refused to run" would have it run the code again).
    let too_large = format!(
        "{}: over 4194304 bytes",
        lumo_userscripts::env::ANSWER_TOO_LARGE
    );
    *p.env.execute_answer.borrow_mut() = Some(Err(too_large));
    let r = call(&p, &s, "try_script", in_tab(7));
    assert_eq!(error_code(&r), Some("PAYLOAD_TOO_LARGE"), "{r}");
    let said = r["structuredContent"]["message"].as_str().unwrap();
    assert!(said.starts_with("the script ran in tab 7"), "{said}");
    // A stored script at a revision other than its current one: refused, without saying the
    // history lost it (list_revisions and get_script give it).
    *p.env.execute_answer.borrow_mut() = None;
    let w = call(
        &p,
        &s,
        "write_script",
        json!({"source": script("stored", "")}),
    );
    let uuid = written_uuid(&w);
    let r = call(
        &p,
        &s,
        "try_script",
        json!({"uuid": uuid, "revision": 5, "tabId": 7}),
    );
    assert_eq!(error_code(&r), Some("NOT_FOUND"));
    assert!(r["structuredContent"]["message"]
        .as_str()
        .unwrap()
        .contains("only a script's current revision can be tried, and this one's is 1"));
    // Nothing was stored by any try: one script, the one written.
    assert_eq!(
        call(&p, &s, "status", json!({}))["structuredContent"]["scriptCount"],
        1
    );
}

/// The tabs are listed while the rate-limit slot is recorded, but the decisions keep the walk's
/// order: rate limit, then "Allow User Scripts", then the tab (a try naming no open tab still
/// spends its slot, and a caller out of slots is told so whatever the tab or the toggle).
#[test]
fn the_rate_limit_and_the_toggle_are_decided_before_the_tab() {
    use lumo_userscripts::guard::rate_limit::MAX_WRITES;
    let p = provider();
    let s = ready(&p);
    let nowhere = || in_tab(99);
    p.env.user_scripts.set(false);
    assert_eq!(
        error_code(&call(&p, &s, "try_script", nowhere())),
        Some("UNAVAILABLE")
    );
    p.env.user_scripts.set(true);
    for i in 1..MAX_WRITES {
        let r = call(&p, &s, "try_script", nowhere());
        assert_eq!(error_code(&r), Some("NOT_FOUND"), "try {i}: {r}");
    }
    let r = call(&p, &s, "try_script", nowhere());
    assert_eq!(error_code(&r), Some("RATE_LIMITED"), "{r}");
    p.env.user_scripts.set(false);
    let r = call(&p, &s, "try_script", nowhere());
    assert_eq!(error_code(&r), Some("RATE_LIMITED"), "{r}");
    p.env.user_scripts.set(true);
    with_tab(&p);
    let r = call(&p, &s, "try_script", in_tab(7));
    assert_eq!(error_code(&r), Some("RATE_LIMITED"), "{r}");
    assert!(p.env.executed.borrow().is_empty(), "a rate-limited try ran");
}

/// A tab named by id is asked of Chrome alone (`tabs.get`; listing every tab costs more the more
/// are open), one named by URL is found among all of them; a missing id says so either way.
#[test]
fn a_tab_named_by_id_is_asked_for_alone_and_one_named_by_url_among_all() {
    let p = provider();
    with_tab(&p);
    let s = ready(&p);
    *p.env.execute_answer.borrow_mut() = Some(Err("No tab with id: 7.".into()));
    let by_id = call(&p, &s, "try_script", in_tab(7));
    assert_eq!(p.env.executed.borrow().len(), 1, "{by_id}");
    assert_eq!(*p.env.tab_calls.borrow(), ["get 7"]);
    p.env.tab_calls.borrow_mut().clear();
    let refused_as = |tab: i64, code: &str, says: &str| {
        let r = call(&p, &s, "try_script", in_tab(tab));
        assert_eq!(error_code(&r), Some(code), "{r}");
        let message = r["structuredContent"]["message"].as_str().unwrap_or("");
        assert!(message.contains(says), "{r}");
    };
    refused_as(99, "NOT_FOUND", "no open tab has id 99");
    assert_eq!(*p.env.tab_calls.borrow(), ["get 99"]);
    // Another refusal of Chrome's is not a missing tab.
    *p.env.tab_error.borrow_mut() =
        Some("Tabs cannot be edited right now (user may be dragging a tab).".into());
    refused_as(7, "CANNOT_RUN", "dragging a tab");
    assert_eq!(p.env.executed.borrow().len(), 1, "nothing more ran");
    *p.env.tab_error.borrow_mut() = None;
    p.env.tab_calls.borrow_mut().clear();
    call(&p, &s, "try_script", args());
    assert_eq!(*p.env.tab_calls.borrow(), ["query"]);
    assert_eq!(p.env.executed.borrow().len(), 2, "the URL named tab 7");
}

/// The user approves a try for the page the review names; a tab that went elsewhere while the
/// review waited (a redirect to a bank, say) runs nothing, and neither does one that closed.
#[test]
fn an_approved_try_runs_only_in_the_page_the_user_reviewed() {
    for (moved_to, code) in [
        (Some("https://example.com/page"), None),
        (Some("https://bank.example/account"), Some("CONFLICT")),
        (None, Some("NOT_FOUND")),
    ] {
        let p = provider();
        with_tab(&p);
        set_switch(&p, "review", true);
        *p.env.execute_answer.borrow_mut() = Some(Ok(json!([])));
        let s = ready(&p);
        let msg = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "try_script", "arguments": in_tab(7)}});
        let user = async {
            let r = asked(&p).await;
            let mut tabs = p.env.tabs.borrow_mut();
            match moved_to {
                Some(url) => tabs[0].url = url.into(),
                None => tabs.clear(),
            }
            drop(tabs);
            approve(&p, &r.id);
        };
        let (out, ()) = block_on(join(async { reply(p.handle_mcp(&s, &msg).await) }, user));
        let r = &out["result"];
        assert_eq!(error_code(r), code, "{moved_to:?}: {r}");
        assert_eq!(p.env.executed.borrow().len(), usize::from(code.is_none()));
        if code == Some("CONFLICT") {
            let m = r["structuredContent"]["message"].as_str().unwrap();
            assert!(m.contains("bank.example"), "{m}");
        }
    }
}

/// Tries share the try world, whose `console` each one hooks while it runs: two at once in a
/// tab would mix their output. The second waits for the first; another tab's does not.
#[test]
fn tries_in_one_tab_run_one_at_a_time_and_another_tabs_does_not_wait() {
    let p = provider();
    with_tab(&p);
    p.env.tabs.borrow_mut().push(Tab {
        id: 8,
        url: "https://example.org/".into(),
        title: "Other".into(),
        last_accessed: 2.0,
        incognito: false,
    });
    let s = ready(&p);
    // The pages never answer and no timer fires: a try that reached Chrome stays there.
    let msg = |id: u64, tab: i64| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "try_script", "arguments": in_tab(tab)}});
    let (m1, m2, m3) = (msg(1, 7), msg(2, 7), msg(3, 8));
    let tries = futures::future::join3(
        p.handle_mcp(&s, &m1),
        p.handle_mcp(&s, &m2),
        p.handle_mcp(&s, &m3),
    );
    let look = async {
        for _ in 0..1000 {
            lumo_userscripts::env::memory::yield_now().await;
        }
    };
    futures::pin_mut!(tries, look);
    assert!(matches!(
        block_on(futures::future::select(tries, look)),
        futures::future::Either::Right(_)
    ));
    let mut tabs: Vec<i64> = p.env.executed.borrow().iter().map(|e| e.0).collect();
    tabs.sort_unstable();
    assert_eq!(
        tabs,
        [7, 8],
        "one try in tab 7 at a time; tab 8's ran beside it"
    );
}

/// Tries one after another in a tab, each started before the one before it ended: the world's
/// configuration is given back beside the last one's record, so a try beginning meanwhile must
/// find it held, never reset under it. Every execute runs in a configured world, and the last
/// try gives the configuration back.
#[test]
fn back_to_back_tries_in_one_tab_each_run_in_a_configured_world() {
    let p = provider();
    with_tab(&p);
    let s = ready(&p);
    *p.env.execute_answer.borrow_mut() = Some(Ok(json!([])));
    p.env.registry_calls.borrow_mut().clear();
    let msg = |id: u64| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "try_script", "arguments": in_tab(7)}});
    let (m1, m2, m3) = (msg(1), msg(2), msg(3));
    let (a, b, c) = block_on(futures::future::join3(
        p.handle_mcp(&s, &m1),
        p.handle_mcp(&s, &m2),
        p.handle_mcp(&s, &m3),
    ));
    for r in [a, b, c] {
        let r = reply(r);
        assert_eq!(r["result"]["isError"], false, "{r}");
    }
    let calls = p.env.registry_calls.borrow().clone();
    assert_eq!(
        calls.iter().filter(|c| **c == "execute").count(),
        3,
        "{calls:?}"
    );
    let mut configured = false;
    for c in &calls {
        match *c {
            "configureWorld" => configured = true,
            "resetWorldConfiguration" => configured = false,
            "execute" => assert!(
                configured,
                "an execute in a world reset under it: {calls:?}"
            ),
            _ => {}
        }
    }
    assert!(!configured, "the last try gives it back: {calls:?}");
    assert!(p.env.worlds.borrow().is_empty());
}

/// A try waits for the one before it in its tab, which may run for its whole timeout. The user
/// removing the caller, turning writes off, or turning review on meanwhile stops the waiting
/// try before it runs: it must not reach the page.
#[test]
fn a_try_waiting_for_its_tab_is_stopped_by_a_switch_flipped_meanwhile() {
    for (op, code) in switches_withdrawn() {
        let p = provider();
        with_tab(&p);
        let s = ready(&p);
        // The first try takes a while in the page, then its frame answers.
        p.env.execute_yields.set(200);
        *p.env.execute_answer.borrow_mut() = Some(Ok(json!([])));
        let msg = |id: u64| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "try_script", "arguments": in_tab(7)}});
        let (m1, m2) = (msg(1), msg(2));
        let meddle = async {
            // Both tries are in: the first in the page, the second waiting for the tab.
            for _ in 0..50 {
                lumo_userscripts::env::memory::yield_now().await;
            }
            assert_eq!(p.env.executed.borrow().len(), 1);
            let done = lumo_userscripts::control::handle(&p, &op).await;
            assert_eq!(done.value["ok"], json!(true), "{op}");
        };
        let (first, second, ()) = block_on(futures::future::join3(
            p.handle_mcp(&s, &m1),
            p.handle_mcp(&s, &m2),
            meddle,
        ));
        let (first, second) = (reply(first), reply(second));
        assert_eq!(first["result"]["isError"], json!(false), "{first}");
        assert_eq!(second["result"]["isError"], json!(true), "{op}: {second}");
        assert_eq!(error_code(&second["result"]), Some(code), "{second}");
        assert_eq!(
            p.env.executed.borrow().len(),
            1,
            "{op}: the second never ran"
        );
    }
}

/// A world outlives a try: raw code tried before could hook a built-in there and read the GM
/// values a stored script is tried with. A stored script is tried in a world only its own
/// revisions run in; raw sources share another.
#[test]
fn a_stored_script_is_tried_in_a_world_of_its_own() {
    let p = provider();
    with_tab(&p);
    let s = ready(&p);
    let w = call(
        &p,
        &s,
        "write_script",
        json!({"source": script("stored", "")}),
    );
    let uuid = written_uuid(&w);
    // Chrome's answer does not matter here: where each try was sent does.
    *p.env.execute_answer.borrow_mut() = Some(Ok(json!([])));
    for args in [
        in_tab(7),
        json!({"uuid": uuid, "tabId": 7}),
        json!({"uuid": uuid, "revision": 1, "tabId": 7}),
        in_tab(7),
    ] {
        let r = call(&p, &s, "try_script", args.clone());
        assert!(error_code(&r).is_none(), "{args}: {r}");
    }
    let worlds: Vec<String> = p
        .env
        .executed
        .borrow()
        .iter()
        .map(|e| e.2.clone())
        .collect();
    let own = format!("lumo-try-{uuid}");
    assert_eq!(worlds, ["lumo-try", &own, &own, "lumo-try"]);
}

/// A caller out of slots is refused before the script is loaded: a stored script brings its
/// `@require` files (up to 2 MiB), which refused calls — free, and as many as the caller likes
/// — must not make the worker read and hold.
#[test]
fn a_rate_limited_try_reads_nothing_of_the_script() {
    use lumo_userscripts::env::HttpResponse;
    let p = provider();
    with_tab(&p);
    p.env.http_answers.borrow_mut().insert(
        "https://cdn.test/lib.js".into(),
        Ok(HttpResponse {
            status: 200,
            status_text: "OK".into(),
            final_url: String::new(),
            headers: vec![("content-type".into(), "text/javascript".into())],
            body: "x".repeat(1 << 20).into_bytes(),
            location: None,
        }),
    );
    let s = ready(&p);
    let src = "// ==UserScript==\n// @name Big\n// @namespace t\n// @match https://example.com/*\n// @require https://cdn.test/lib.js\n// ==/UserScript==\n";
    let w = call(&p, &s, "write_script", json!({"source": src}));
    let uuid = written_uuid(&w);
    loop {
        let r = call(
            &p,
            &s,
            "set_script_enabled",
            json!({"uuid": uuid, "enabled": true}),
        );
        if error_code(&r) == Some("RATE_LIMITED") {
            break;
        }
    }
    p.env.get_log.borrow_mut().clear();
    let r = call(&p, &s, "try_script", json!({"uuid": uuid, "tabId": 7}));
    assert_eq!(error_code(&r), Some("RATE_LIMITED"), "{r}");
    let read: Vec<String> = p.env.get_log.borrow().iter().flatten().cloned().collect();
    assert!(
        !read
            .iter()
            .any(|k| k.starts_with("asset/") || k.starts_with("source/")),
        "a refused try read {read:?}"
    );
}

/// Past the 10 script worlds Chrome gives a page, a try lands in the shared default world; its
/// wrapper then runs nothing and says so (`wrap::found_shared_world`). Every frame so: the try
/// could not run (CANNOT_RUN, with the reason and what to do); some frames: those say it.
#[test]
fn a_try_that_found_its_world_shared_ran_nothing_and_says_so() {
    let p = provider();
    with_tab(&p);
    let s = ready(&p);
    let nonce = "00000000-0000-4000-8000-000000000001";
    *p.env.execute_answer.borrow_mut() = Some(Ok(json!([
        { "frameId": 0, "result": { "lumo": nonce, "sharedWorld": true } },
    ])));
    let r = call(&p, &s, "try_script", in_tab(7));
    assert_eq!(error_code(&r), Some("CANNOT_RUN"), "{r}");
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("nothing was run in tab 7")
            && text.contains("10 script worlds")
            && text.contains("Reload the tab"),
        "{text}"
    );
    let nonce = "00000000-0000-4000-8000-000000000002";
    *p.env.execute_answer.borrow_mut() = Some(Ok(json!([
        { "frameId": 0, "result": { "lumo": nonce, "url": "https://example.com/page", "title": "t", "value": "1", "threw": false, "logs": [] } },
        { "frameId": 3, "result": { "lumo": nonce, "sharedWorld": true } },
    ])));
    let r = call(&p, &s, "try_script", in_tab(7));
    assert!(error_code(&r).is_none(), "{r}");
    let frames = r["structuredContent"]["frames"].as_array().unwrap();
    assert_eq!(frames[0]["ok"], true, "{r}");
    assert_eq!(
        (frames[1]["frameId"].clone(), frames[1]["finished"].clone()),
        (json!(3), json!(false))
    );
    assert!(
        frames[1]["reason"]
            .as_str()
            .unwrap()
            .contains("shared with other code"),
        "{r}"
    );
    // A marker with another try's nonce is not this try's answer.
    *p.env.execute_answer.borrow_mut() = Some(Ok(json!([
        { "frameId": 0, "result": { "lumo": "someone-else", "sharedWorld": true } },
    ])));
    let r = call(&p, &s, "try_script", in_tab(7));
    assert!(error_code(&r).is_none(), "{r}");
}

/// A try's record is stored before its code runs: a worker stopped while the page runs it (the
/// browser quit, the extension reloaded) leaves it, and the next worker records the try as
/// INTERRUPTED — the code may have run, and no result was ever recorded or sent.
#[test]
fn a_try_whose_worker_stopped_while_it_ran_is_recorded_as_interrupted() {
    use lumo_userscripts::guard::audit::{self, INTERRUPTED, PENDING_TRIES_KEY};
    let p = provider();
    with_tab(&p);
    let s = ready(&p);
    // The page never answers, and the timeout never fires: the try is running when the worker
    // stops (the future is dropped).
    let msg = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "try_script", "arguments": args()}});
    block_on(async {
        let mut running = Box::pin(p.handle_mcp(&s, &msg));
        for _ in 0..10_000 {
            if !p.env.executed.borrow().is_empty() {
                break;
            }
            assert!(futures::poll!(running.as_mut()).is_pending());
            lumo_userscripts::env::memory::yield_now().await;
        }
    });
    assert_eq!(p.env.executed.borrow().len(), 1, "the try never ran");
    let slot = p.env.dump(Area::Local)[PENDING_TRIES_KEY].clone();
    let begun: Vec<_> = slot.as_object().unwrap().values().collect();
    assert_eq!(begun.len(), 1, "{slot}");
    assert_eq!(begun[0]["tool"], "try_script");
    assert!(
        !slot.to_string().contains(SECRET),
        "the source reached the record"
    );
    // The next worker, over the same storage.
    let q = Provider::new(MemoryEnv::new());
    *q.env.areas.borrow_mut() = p.env.areas.borrow().clone();
    block_on(q.recover_interrupted_tries());
    let log = block_on(audit::read_all(&q.env)).unwrap();
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(log[0].tool, "try_script");
    assert_eq!(log[0].result, INTERRUPTED);
    assert_eq!(log[0].caller, HOST);
    assert_eq!(q.env.dump(Area::Local)[PENDING_TRIES_KEY], json!({}));
    // Recorded once: another start, or the first try of this worker, adds nothing.
    block_on(q.recover_interrupted_tries());
    assert_eq!(block_on(audit::read_all(&q.env)).unwrap().len(), 1);
}

/// Nothing runs in a page without its record: a try whose record cannot be stored (the
/// storage is full) runs nothing and says why. A try that finished leaves no slot behind.
#[test]
fn a_try_that_cannot_be_recorded_runs_nothing() {
    use lumo_userscripts::guard::audit::PENDING_TRIES_KEY;
    let p = provider();
    with_tab(&p);
    p.env.timers_fire.set(true); // each try's page never answers: it times out, having run
    let s = ready(&p);
    let r = call(&p, &s, "try_script", in_tab(7));
    assert_eq!(error_code(&r), Some("TIMEOUT"), "{r}");
    assert_eq!(p.env.dump(Area::Local)[PENDING_TRIES_KEY], json!({}));
    *p.env.fail_local_writes.borrow_mut() = Some("QUOTA_BYTES quota exceeded".into());
    let r = call(&p, &s, "try_script", in_tab(7));
    assert_eq!(error_code(&r), Some("STORAGE_ERROR"), "{r}");
    let msg = r["structuredContent"]["message"].as_str().unwrap();
    assert!(
        msg.contains("nothing ran") && msg.contains("quota"),
        "{msg}"
    );
    assert_eq!(p.env.executed.borrow().len(), 1, "it ran unrecorded");
}

/// Tries in `tabs` (each its own tab 100+i on example.com) at once, whose pages never answer:
/// `look` runs once they all reached Chrome, and the tries are left hanging.
fn while_tries_run(
    p: &Provider<MemoryEnv>,
    s: &lumo_userscripts::session::Session,
    args: &[Value],
    look: impl std::future::Future<Output = ()>,
) {
    let msgs: Vec<Value> = args
        .iter()
        .enumerate()
        .map(|(i, a)| json!({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call", "params": {"name": "try_script", "arguments": a}}))
        .collect();
    let tries = futures::future::join_all(msgs.iter().map(|m| p.handle_mcp(s, m)));
    let look = async {
        for _ in 0..2000 {
            lumo_userscripts::env::memory::yield_now().await;
        }
        look.await;
    };
    futures::pin_mut!(tries, look);
    assert!(matches!(
        block_on(futures::future::select(tries, look)),
        futures::future::Either::Right(_)
    ));
}

fn with_tabs(p: &Provider<MemoryEnv>, n: i64) {
    for i in 0..n {
        p.env.tabs.borrow_mut().push(Tab {
            id: 100 + i,
            url: format!("https://example.com/{i}"),
            title: format!("Tab {i}"),
            last_accessed: 10.0 + i as f64,
            incognito: false,
        });
    }
}

/// A reconcile gives back every world configuration no enabled script uses, one a worker stop
/// left among them; but not the world of a try running now: reset under it, the next try there
/// (which finds it held by the first) would run under the extension's policy, and say nothing.
#[test]
fn a_reconcile_leaves_a_running_trys_world_configured() {
    let p = provider();
    with_tabs(&p, 1);
    let s = ready(&p);
    // Left by a stop: no try runs there.
    p.env
        .worlds
        .borrow_mut()
        .insert("lumo-try-left".into(), false);
    while_tries_run(&p, &s, &[in_tab(100)], async {
        assert!(p.env.worlds.borrow().contains_key("lumo-try"));
        let configured = p.env.default_configured.get();
        p.ensure_registry().await;
        assert!(
            p.env.default_configured.get() > configured,
            "no reconcile ran"
        );
        let held: Vec<String> = p.env.worlds.borrow().keys().cloned().collect();
        assert_eq!(held, ["lumo-try"], "the running try's world, and only it");
    });
}

/// Chrome holds 100 world configurations for everything: the scripts' worlds, the default one
/// and the tries'. Tries of stored scripts in many tabs at once (each in a world of its own)
/// hold at most `MAX_TRY_WORLDS` of them; the others run under the extension's policy and say
/// so, so an agent's tries cannot take the configuration a user's script needs.
#[test]
fn tries_in_many_tabs_hold_few_world_configurations() {
    use lumo_userscripts::tools::MAX_TRY_WORLDS;
    let p = provider();
    let n = MAX_TRY_WORLDS + 3;
    with_tabs(&p, i64::try_from(n).unwrap());
    let s = ready(&p);
    let tries: Vec<Value> = (0..n)
        .map(|i| {
            let uuid = created(&p, &s, &format!("S{i}"), "");
            json!({"uuid": uuid, "tabId": 100 + i})
        })
        .collect();
    p.env.worlds.borrow_mut().clear();
    while_tries_run(&p, &s, &tries, async {
        assert_eq!(p.env.executed.borrow().len(), n, "every try ran");
        let held = p.env.worlds.borrow().len();
        assert_eq!(held, MAX_TRY_WORLDS, "{:?}", p.env.worlds.borrow());
    });
}

/// The rate slot is stored beside the try's record in progress and its world's configuration,
/// not before them (one storage round trip less before the code runs): with Chrome slow to store
/// the slot, the record is stored first — and the code still runs only once the slot is.
#[test]
fn the_rate_slot_is_stored_beside_the_trys_record_and_before_its_code_runs() {
    use lumo_userscripts::guard::audit::PENDING_TRIES_KEY;
    let p = provider();
    with_tab(&p);
    let s = ready(&p);
    p.env.session_set_yields.set(6);
    p.env.storage_log.borrow_mut().clear();
    let msg = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "try_script", "arguments": in_tab(7)}});
    let slot_stored = || stored(&p, Area::Session, "rateWindow");
    let ran_before_the_slot = block_on(async {
        let mut call = Box::pin(p.handle_mcp(&s, &msg));
        for _ in 0..10_000 {
            if !p.env.executed.borrow().is_empty() {
                return !slot_stored();
            }
            if futures::poll!(call.as_mut()).is_ready() {
                break;
            }
            lumo_userscripts::env::memory::yield_now().await;
        }
        false
    });
    assert!(
        !ran_before_the_slot,
        "the code ran before its slot was stored"
    );
    assert_eq!(p.env.executed.borrow().len(), 1, "the try never ran");
    let log = p.env.storage_log.borrow();
    let at = |area: Area, key: &str| {
        log.iter()
            .position(|(a, k)| *a == area && k.iter().any(|k| k == key))
    };
    let record = at(Area::Local, PENDING_TRIES_KEY).expect("the record in progress");
    let slot = at(Area::Session, "rateWindow").expect("the slot");
    assert!(record < slot, "the record waited for the slot: {log:?}");
}

/// A slot that cannot be stored stops the try before its code runs (fail closed), and the
/// record begun beside it is finished, not left in progress.
#[test]
fn a_try_whose_rate_slot_cannot_be_stored_runs_nothing() {
    use lumo_userscripts::guard::audit::{self, PENDING_TRIES_KEY};
    let p = provider();
    with_tab(&p);
    p.env.timers_fire.set(true); // a try that ran anyway times out rather than hang the test
    let s = ready(&p);
    *p.env.fail_session_writes.borrow_mut() = Some("session storage is full".into());
    let r = call(&p, &s, "try_script", in_tab(7));
    assert_eq!(error_code(&r), Some("STORAGE_ERROR"), "{r}");
    let msg = r["structuredContent"]["message"].as_str().unwrap();
    assert!(
        msg.contains("nothing ran") && msg.contains("session storage is full"),
        "{msg}"
    );
    assert!(
        p.env.executed.borrow().is_empty(),
        "it ran without its slot"
    );
    assert_eq!(p.env.dump(Area::Local)[PENDING_TRIES_KEY], json!({}));
    let log = block_on(audit::read_all(&p.env)).unwrap();
    assert_eq!(log.last().map(|e| e.tool.as_str()), Some("try_script"));
}

/// Unreviewed, a try's record in progress and its world's configuration go out while its tab is
/// still being looked up (one Chrome round trip less on its path, issue 17), and the toggle is
/// checked meanwhile, with the code made; a try then refused
/// for its tab is finished in its record as a refusal is audited, once, and its world is given
/// back.
#[test]
fn the_trys_record_and_world_go_out_beside_its_tabs_lookup() {
    use lumo_userscripts::guard::audit::{self, PENDING_TRIES_KEY};
    let p = provider();
    with_tab(&p);
    let s = ready(&p);
    *p.env.execute_answer.borrow_mut() = Some(Ok(json!([])));
    p.env.tab_get_yields.set(50);
    p.env.storage_log.borrow_mut().clear();
    p.env.registry_calls.borrow_mut().clear();
    let msg = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "try_script", "arguments": in_tab(7)}});
    let checks = p.env.toggle_checks.get();
    // The lookup is answered after 50 turns: what went out before it was answered went out
    // beside it. So was the toggle checked (synchronous, in the worker's own time).
    let observe = async {
        for _ in 0..10_000 {
            let configured = p.env.registry_calls.borrow().contains(&"configureWorld");
            if stored(&p, Area::Local, PENDING_TRIES_KEY) && configured {
                let checked = p.env.toggle_checks.get() > checks;
                return p.env.tab_calls.borrow().is_empty() && checked;
            }
            lumo_userscripts::env::memory::yield_now().await;
        }
        false
    };
    let Step::Dispatch(msg) = s.inbound(Some(&msg.to_string())) else {
        panic!("not dispatched")
    };
    let (r, begun_before_the_tab) = block_on(join(p.handle_mcp(&s, &msg), observe));
    assert_eq!(reply(r)["result"]["isError"], false);
    assert!(
        begun_before_the_tab,
        "the record, the world or the toggle's check waited for the tab's lookup"
    );
    assert_eq!(p.env.executed.borrow().len(), 1, "the try never ran");

    // Refused for its tab after all that: one audit entry with the refusal's code, nothing left
    // in progress, the world given back.
    p.env.tab_get_yields.set(0);
    let before = block_on(audit::read_all(&p.env)).unwrap().len();
    let r = call(&p, &s, "try_script", in_tab(99));
    assert_eq!(error_code(&r), Some("NOT_FOUND"), "{r}");
    let log = block_on(audit::read_all(&p.env)).unwrap();
    assert_eq!(log.len(), before + 1, "{log:?}");
    let refusals = log.iter().filter(|e| e.result == "NOT_FOUND").count();
    assert_eq!(refusals, 1, "{log:?}");
    assert_eq!(p.env.dump(Area::Local)[PENDING_TRIES_KEY], json!({}));
    assert!(p.env.worlds.borrow().is_empty(), "the world was kept");
    assert_eq!(p.env.executed.borrow().len(), 1, "the refused try ran");
}

/// A try waiting for another in its tab begins nothing while it waits: a worker stopped then
/// records as INTERRUPTED ("may have run") only the try that was running, never the one that
/// had not; the waiting one stores no record in progress and holds no world meanwhile.
#[test]
fn a_try_waiting_for_its_tab_begins_nothing_until_its_turn() {
    use lumo_userscripts::guard::audit::{self, INTERRUPTED, PENDING_TRIES_KEY};
    let p = provider();
    with_tab(&p);
    let s = ready(&p);
    // The first try's page never answers, and no timer fires: it runs when the worker stops.
    // The second tries a stored script, in a world of its own.
    let uuid = created(&p, &s, "Stored", "");
    p.env.worlds.borrow_mut().clear();
    let msg = |id: u64, a: Value| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "try_script", "arguments": a}});
    let (m1, m2) = (msg(1, in_tab(7)), msg(2, json!({"uuid": uuid, "tabId": 7})));
    block_on(async {
        let mut first = Box::pin(p.handle_mcp(&s, &m1));
        for _ in 0..10_000 {
            if !p.env.executed.borrow().is_empty() {
                break;
            }
            assert!(futures::poll!(first.as_mut()).is_pending());
            lumo_userscripts::env::memory::yield_now().await;
        }
        assert_eq!(p.env.executed.borrow().len(), 1, "the first try never ran");
        let mut second = Box::pin(p.handle_mcp(&s, &m2));
        for _ in 0..2_000 {
            assert!(futures::poll!(first.as_mut()).is_pending());
            assert!(futures::poll!(second.as_mut()).is_pending());
            lumo_userscripts::env::memory::yield_now().await;
        }
        assert_eq!(p.env.executed.borrow().len(), 1, "the second did not wait");
        let begun = p.env.dump(Area::Local)[PENDING_TRIES_KEY].clone();
        assert_eq!(
            begun.as_object().map(serde_json::Map::len),
            Some(1),
            "the waiting try stored its record in progress: {begun}"
        );
        let held: Vec<String> = p.env.worlds.borrow().keys().cloned().collect();
        assert_eq!(held, ["lumo-try"], "the waiting try configured its world");
    });
    // The next worker, over the same storage: the running try alone is interrupted.
    let q = Provider::new(MemoryEnv::new());
    *q.env.areas.borrow_mut() = p.env.areas.borrow().clone();
    block_on(q.recover_interrupted_tries());
    let log = block_on(audit::read_all(&q.env)).unwrap();
    let interrupted = log.iter().filter(|e| e.result == INTERRUPTED).count();
    assert_eq!(interrupted, 1, "{log:?}");
}

/// A stored script granted GM values whose values say `at`.
fn gm_script(p: &Provider<MemoryEnv>, s: &lumo_userscripts::session::Session, at: &str) -> String {
    let src = "// ==UserScript==\n// @name GM\n// @namespace tests\n// @match https://example.com/*\n// @grant GM_getValue\n// ==/UserScript==\nGM_getValue('k');\n";
    let uuid = written_uuid(&call(p, s, "write_script", json!({"source": src})));
    put(
        p,
        [(format!("values/{uuid}"), json!({"k": format!("\"{at}\"")}))],
    );
    uuid
}

/// Unreviewed, a stored script's GM values are read with its files, beside its tab's lookup,
/// not after it (one storage round trip less before its code runs, issue 17), and the try
/// runs with them.
#[test]
fn a_stored_scripts_values_are_read_beside_its_tabs_lookup() {
    let p = provider();
    with_tab(&p);
    let s = ready(&p);
    let uuid = gm_script(&p, &s, "stored-value");
    *p.env.execute_answer.borrow_mut() = Some(Ok(json!([])));
    p.env.tab_get_yields.set(50);
    p.env.get_log.borrow_mut().clear();
    p.env.tab_calls.borrow_mut().clear();
    let key = format!("values/{uuid}");
    let observe = async {
        for _ in 0..10_000 {
            if p.env.get_log.borrow().iter().any(|k| k.contains(&key)) {
                return p.env.tab_calls.borrow().is_empty();
            }
            lumo_userscripts::env::memory::yield_now().await;
        }
        false
    };
    let msg = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "try_script", "arguments": {"uuid": uuid, "tabId": 7}}});
    let (r, read_before_the_tab) = block_on(join(p.handle_mcp(&s, &msg), observe));
    assert_eq!(reply(r)["result"]["isError"], false);
    assert!(
        read_before_the_tab,
        "the values waited for the tab's lookup"
    );
    let executed = p.env.executed.borrow();
    assert_eq!(executed.len(), 1, "the try never ran");
    assert!(
        executed[0].3.contains("stored-value"),
        "run without its values"
    );
}

/// Reviewed, a stored script is tried with its GM values as they are once the user approved
/// it, not as they were when the agent asked (the review may take minutes, and the script's
/// pages change its values meanwhile).
#[test]
fn a_reviewed_try_runs_with_the_values_of_when_it_was_approved() {
    let p = provider();
    with_tab(&p);
    let s = ready(&p);
    let uuid = gm_script(&p, &s, "when-asked");
    set_switch(&p, "review", true);
    *p.env.execute_answer.borrow_mut() = Some(Ok(json!([])));
    let msg = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "try_script", "arguments": {"uuid": uuid, "tabId": 7}}});
    let user = async {
        let r = asked(&p).await;
        let mut items = serde_json::Map::new();
        items.insert(format!("values/{uuid}"), json!({"k": "\"when-approved\""}));
        let set = lumo_userscripts::env::Storage::set(&p.env, Area::Local, items);
        assert!(set.await.is_ok());
        approve(&p, &r.id);
    };
    let (out, ()) = block_on(join(async { reply(p.handle_mcp(&s, &msg).await) }, user));
    assert_eq!(out["result"]["isError"], false, "{out}");
    let executed = p.env.executed.borrow();
    assert_eq!(executed.len(), 1, "the try never ran");
    assert!(
        executed[0].3.contains("when-approved"),
        "run with stale values"
    );
    assert!(!executed[0].3.contains("when-asked"));
}

/// An agent's tries sent together (an MCP client's parallel tool calls), each naming the page
/// by its address: they run one at a time in their tab, and a try waiting there begins nothing
/// (no record in progress, no world held) until its turn, as one naming the tab by id does.
#[test]
fn tries_by_address_sent_together_begin_one_at_a_time() {
    use lumo_userscripts::guard::audit::PENDING_TRIES_KEY;
    use lumo_userscripts::tools::MAX_TRY_WORLDS;
    let p = provider();
    with_tab(&p);
    let s = ready(&p);
    let tries: Vec<Value> = (0..MAX_TRY_WORLDS + 2)
        .map(|i| {
            let uuid = created(&p, &s, &format!("S{i}"), "");
            json!({"uuid": uuid, "url": "https://example.com/page"})
        })
        .collect();
    p.env.worlds.borrow_mut().clear();
    // Chrome answers a query after a while: the others arrive before the first knows its tab.
    p.env.tab_query_yields.set(20);
    p.env.storage_log.borrow_mut().clear();
    while_tries_run(&p, &s, &tries, async {
        assert_eq!(p.env.executed.borrow().len(), 1, "one try at a time");
        let records = p
            .env
            .storage_log
            .borrow()
            .iter()
            .filter(|(_, k)| k.iter().any(|k| k == PENDING_TRIES_KEY))
            .count();
        assert_eq!(
            records, 1,
            "waiting tries began (and took back) records in progress"
        );
        let begun = p.env.dump(Area::Local)[PENDING_TRIES_KEY].clone();
        assert_eq!(
            begun.as_object().map(serde_json::Map::len),
            Some(1),
            "waiting tries stored their records in progress: {begun}"
        );
        let held = p.env.worlds.borrow().len();
        assert_eq!(
            held,
            1,
            "waiting tries hold worlds: {:?}",
            p.env.worlds.borrow()
        );
    });
}

/// A try by address that began beside its lookups, then found its tab taken by one admitted
/// after it (named by id, it was answered first): it takes back its record in progress and
/// its world while it waits, so a worker stopped meanwhile does not record it as one that may
/// have run, and its world is not held for nothing.
#[test]
fn a_try_that_began_and_found_its_tab_taken_takes_back_what_it_began() {
    use lumo_userscripts::guard::audit::{self, INTERRUPTED, PENDING_TRIES_KEY};
    let p = provider();
    with_tab(&p);
    let s = ready(&p);
    let uuid = created(&p, &s, "Stored", "");
    p.env.worlds.borrow_mut().clear();
    p.env.tab_query_yields.set(50);
    let msg = |id: u64, a: Value| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "try_script", "arguments": a}});
    let by_address = json!({"uuid": uuid, "url": "https://example.com/page"});
    let (m1, m2) = (msg(1, by_address), msg(2, in_tab(7)));
    let records = || {
        p.env
            .dump(Area::Local)
            .get(PENDING_TRIES_KEY)
            .and_then(Value::as_object)
            .map_or(0, serde_json::Map::len)
    };
    block_on(async {
        let mut first = Box::pin(p.handle_mcp(&s, &m1));
        for _ in 0..30 {
            if records() == 1 {
                break;
            }
            assert!(futures::poll!(first.as_mut()).is_pending());
        }
        assert_eq!(
            records(),
            1,
            "the try by address did not begin beside its lookup"
        );
        assert!(
            p.env.tab_calls.borrow().iter().all(|c| c != "query"),
            "its tab was found already"
        );
        let mut second = Box::pin(p.handle_mcp(&s, &m2));
        for _ in 0..2_000 {
            assert!(futures::poll!(first.as_mut()).is_pending());
            assert!(futures::poll!(second.as_mut()).is_pending());
            lumo_userscripts::env::memory::yield_now().await;
        }
        let executed = p.env.executed.borrow();
        assert_eq!(executed.len(), 1, "not one try at a time");
        assert_eq!(executed[0].2, "lumo-try", "the try by id did not run first");
        assert_eq!(records(), 1, "the waiting try kept its record in progress");
        let held: Vec<String> = p.env.worlds.borrow().keys().cloned().collect();
        assert_eq!(held, ["lumo-try"], "the waiting try kept its world");
    });
    let q = Provider::new(MemoryEnv::new());
    *q.env.areas.borrow_mut() = p.env.areas.borrow().clone();
    block_on(q.recover_interrupted_tries());
    let log = block_on(audit::read_all(&q.env)).unwrap();
    let interrupted: Vec<_> = log.iter().filter(|e| e.result == INTERRUPTED).collect();
    assert_eq!(interrupted.len(), 1, "{log:?}");
    assert_ne!(interrupted[0].target.as_deref(), Some(uuid.as_str()));
}

/// A raw source is tried without its `@require`/`@resource` files (nothing is fetched for a
/// try): the result says so, or an error about a library's missing function reads as the
/// script's own. A source without such files gets no such note.
#[test]
fn a_source_tried_without_its_required_files_says_so() {
    let p = provider();
    with_tab(&p);
    let s = ready(&p);
    let nonce = "00000000-0000-4000-8000-000000000001";
    let answer = json!([{ "frameId": 0, "result": {
        "lumo": nonce, "url": "https://example.com/page", "title": "Example page", "threw": false,
        "value": 1, "logs": [], "ms": 3 }}]);
    *p.env.execute_answer.borrow_mut() = Some(Ok(answer.clone()));
    let src = script("t", "return 1;").replace(
        "// @match",
        "// @require https://cdn.example/lib.js\n// @resource css https://cdn.example/a.css\n// @match",
    );
    let r = call(&p, &s, "try_script", json!({"source": src, "tabId": 7}));
    assert_eq!(r["isError"], false, "{r}");
    let note = r["structuredContent"]["filesNotLoaded"]
        .as_str()
        .unwrap_or("");
    assert!(
        note.contains("1 @require and 1 @resource"),
        "{}",
        r["structuredContent"]
    );
    assert!(r["content"][0]["text"].as_str().unwrap().contains(note));
    *p.env.execute_answer.borrow_mut() = Some(Ok(answer));
    let r = call(&p, &s, "try_script", in_tab(7));
    assert!(
        r["structuredContent"].get("filesNotLoaded").is_none(),
        "{r}"
    );
}

/// A stored script in the trash is said to be there, as the other tools say it, not "no script
/// with uuid" (which sent an agent looking for one that never was).
#[test]
fn a_trashed_script_tried_by_uuid_is_said_to_be_in_the_trash() {
    let p = provider();
    with_tab(&p);
    let s = ready(&p);
    let uuid = created(&p, &s, "gone", "return 1;");
    let r = call(
        &p,
        &s,
        "delete_script",
        json!({"uuid": uuid, "revision": 1}),
    );
    assert_eq!(r["isError"], false, "{r}");
    let r = call(&p, &s, "try_script", json!({"uuid": uuid, "tabId": 7}));
    assert_eq!(error_code(&r), Some("NOT_FOUND"), "{r}");
    assert_eq!(r["structuredContent"]["details"]["inTrash"], true, "{r}");
    assert!(r["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("is in the trash (deleted): restore_script brings it back"));
    let r = call(&p, &s, "try_script", json!({"source": "x", "tabId": -5}));
    assert_eq!(error_code(&r), Some("INVALID_ARGUMENTS"), "{r}");
}
