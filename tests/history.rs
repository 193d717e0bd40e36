//! Revision history, restore and trash through the tools, in the core with an in-memory
//! environment: what is kept, who is named, locking, dropped revisions, the trash round trip,
//! read-only mode and damaged history records.

mod common;

use common::*;
use futures::executor::block_on;
use lumo_userscripts::env::memory::MemoryEnv;
use lumo_userscripts::env::{Area, Storage};
use lumo_userscripts::guard::audit;
use lumo_userscripts::provider::Provider;
use serde_json::{json, Map, Value};

fn uuid_of(r: &Value) -> String {
    r["structuredContent"]["script"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The code registered to run for `uuid`, as Chrome would get it.
fn registered_code(p: &Provider<MemoryEnv>, uuid: &str) -> Option<String> {
    p.env
        .registrations
        .borrow()
        .get(uuid)
        .map(|r| serde_json::to_string(&r.js).unwrap())
}

/// Writes v1, v2, v3 of one script; returns its uuid.
fn three_versions(p: &Provider<MemoryEnv>, s: &lumo_userscripts::session::Session) -> String {
    let c = call(
        p,
        s,
        "write_script",
        json!({"source": script("H", "v1();")}),
    );
    let uuid = uuid_of(&c);
    for (rev, body) in [(1, "v2();"), (2, "v3();")] {
        p.env.advance(1000.0);
        let r = call(
            p,
            s,
            "write_script",
            json!({"uuid": uuid, "revision": rev, "source": script("H", body)}),
        );
        assert_eq!(r["isError"], json!(false), "{r}");
    }
    uuid
}

#[test]
fn every_write_keeps_the_previous_version_and_restore_brings_one_back() {
    let p = provider();
    let s = ready(&p);
    let uuid = three_versions(&p, &s);
    let l = call(&p, &s, "list_revisions", json!({"uuid": uuid}));
    let revs = l["structuredContent"]["revisions"].as_array().unwrap();
    assert_eq!(
        revs.iter()
            .map(|r| r["revision"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        vec![3, 2, 1]
    );
    assert!(revs.iter().all(|r| r["by"] == json!(HOST)));
    assert_eq!(revs[2]["via"], json!("write_script"));
    assert_eq!(revs[0]["current"], json!(true));

    let old = call(&p, &s, "get_script", json!({"uuid": uuid, "revision": 1}));
    assert_eq!(
        old["structuredContent"]["script"]["source"],
        json!(script("H", "v1();"))
    );
    assert_eq!(
        old["structuredContent"]["script"]["currentRevision"],
        json!(3)
    );

    let r = call(
        &p,
        &s,
        "restore_script",
        json!({"uuid": uuid, "revision": 1, "current_revision": 3}),
    );
    assert_eq!(r["isError"], json!(false), "{r}");
    assert_eq!(r["structuredContent"]["script"]["revision"], json!(4));
    assert_eq!(
        r["structuredContent"]["script"]["updatedVia"],
        json!("restore_script")
    );
    let now = call(&p, &s, "get_script", json!({"uuid": uuid}));
    assert_eq!(
        now["structuredContent"]["script"]["source"],
        json!(script("H", "v1();"))
    );
    // Chrome gets v1 to run, and v3 is now in the history: the restore can be undone.
    assert!(registered_code(&p, &uuid).unwrap().contains("v1();"));
    let v3 = call(&p, &s, "get_script", json!({"uuid": uuid, "revision": 3}));
    assert_eq!(
        v3["structuredContent"]["script"]["source"],
        json!(script("H", "v3();"))
    );
    // Audited like every write, with its target.
    let log = block_on(audit::read_all(&p.env)).unwrap();
    assert!(log.iter().any(|e| e.tool == "restore_script"
        && e.result == "ok"
        && e.target.as_deref() == Some(&uuid)));
}

#[test]
fn a_restore_racing_another_write_is_a_conflict_and_changes_nothing() {
    let p = provider();
    let s = ready(&p);
    let uuid = three_versions(&p, &s);
    // The agent read revision 2; someone wrote revision 3 meanwhile.
    let r = call(
        &p,
        &s,
        "restore_script",
        json!({"uuid": uuid, "revision": 1, "current_revision": 2}),
    );
    assert_eq!(error_code(&r), Some("CONFLICT"));
    assert_eq!(
        r["structuredContent"]["details"]["currentRevision"],
        json!(3)
    );
    let now = call(&p, &s, "get_script", json!({"uuid": uuid}));
    assert_eq!(now["structuredContent"]["script"]["revision"], json!(3));
    assert_eq!(
        now["structuredContent"]["script"]["source"],
        json!(script("H", "v3();"))
    );
    let l = call(&p, &s, "list_revisions", json!({"uuid": uuid}));
    assert_eq!(
        l["structuredContent"]["revisions"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
}

#[test]
fn a_dropped_revision_is_not_found() {
    let p = provider();
    let s = ready(&p);
    let c = call(&p, &s, "write_script", json!({"source": script("D", "0")}));
    let uuid = uuid_of(&c);
    for rev in 1..=25u64 {
        let r = call(
            &p,
            &s,
            "patch_script",
            json!({"uuid": uuid, "revision": rev, "edits": [{"search": format!("\n{}\n", rev - 1), "replace": format!("\n{rev}\n")}]}),
        );
        assert_eq!(r["isError"], json!(false), "{r}");
        if rev % 20 == 0 {
            p.env.advance(61_000.0); // the rate limit
        }
    }
    let l = call(&p, &s, "list_revisions", json!({"uuid": uuid}));
    let revs = l["structuredContent"]["revisions"].as_array().unwrap();
    assert_eq!(revs.len(), 21, "the current one and the 20 before it");
    assert_eq!(revs[20]["revision"], json!(6));
    for (tool, args) in [
        ("get_script", json!({"uuid": uuid, "revision": 5})),
        (
            "restore_script",
            json!({"uuid": uuid, "revision": 5, "current_revision": 26}),
        ),
    ] {
        let r = call(&p, &s, tool, args);
        assert_eq!(error_code(&r), Some("NOT_FOUND"), "{tool}: {r}");
        assert!(
            r["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("dropped past the history bounds"),
            "{r}"
        );
    }
    // A revision past the current one was never there: not said to be dropped.
    for (tool, args) in [
        ("get_script", json!({"uuid": uuid, "revision": 99})),
        (
            "restore_script",
            json!({"uuid": uuid, "revision": 99, "current_revision": 26}),
        ),
    ] {
        let r = call(&p, &s, tool, args);
        assert_eq!(error_code(&r), Some("NOT_FOUND"), "{tool}: {r}");
        let text = r["content"][0]["text"].as_str().unwrap();
        assert!(
            text.contains("has no revision 99: it is at revision 26, its newest"),
            "{tool}: {text}"
        );
    }
    // Nor did a write naming a revision never had race another one.
    let r = call(
        &p,
        &s,
        "write_script",
        json!({"uuid": uuid, "revision": 99, "source": script("D", "x")}),
    );
    assert_eq!(error_code(&r), Some("CONFLICT"), "{r}");
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("revision 99 is not one this script has had"),
        "{text}"
    );
    let ok = call(
        &p,
        &s,
        "restore_script",
        json!({"uuid": uuid, "revision": 6, "current_revision": 26}),
    );
    assert_eq!(ok["isError"], json!(false), "{ok}");
}

#[test]
fn delete_moves_to_the_trash_and_restore_brings_it_back_registered() {
    let p = provider();
    let s = ready(&p);
    let uuid = three_versions(&p, &s);
    let d = call(
        &p,
        &s,
        "delete_script",
        json!({"uuid": uuid, "revision": 3}),
    );
    assert_eq!(d["isError"], json!(false), "{d}");
    assert!(
        registered_code(&p, &uuid).is_none(),
        "a deleted script stops running"
    );
    let live = call(&p, &s, "list_scripts", json!({}));
    assert_eq!(live["structuredContent"]["total"], json!(0));
    let trash = call(&p, &s, "list_scripts", json!({"deleted": true}));
    let items = trash["structuredContent"]["scripts"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["uuid"], json!(uuid));
    assert_eq!(items[0]["deletedBy"], json!(HOST));
    let got = call(&p, &s, "get_script", json!({"uuid": uuid}));
    assert_eq!(got["structuredContent"]["script"]["deleted"], json!(true));
    // Writes to it (a delete retried, an enable) say where it is, not that it never was.
    for (tool, args) in [
        ("delete_script", json!({"uuid": uuid, "revision": 3})),
        (
            "set_script_enabled",
            json!({"uuid": uuid, "enabled": false}),
        ),
    ] {
        let r = call(&p, &s, tool, args);
        assert_eq!(error_code(&r), Some("NOT_FOUND"), "{r}");
        let m = r["structuredContent"]["message"]
            .as_str()
            .unwrap_or_default();
        assert!(
            m.contains("is in the trash") && m.contains("restore_script"),
            "{tool}: {m}"
        );
    }
    // Its history survives the trip.
    let l = call(&p, &s, "list_revisions", json!({"uuid": uuid}));
    assert_eq!(l["structuredContent"]["deleted"], json!(true));
    assert_eq!(
        l["structuredContent"]["revisions"]
            .as_array()
            .unwrap()
            .len(),
        3
    );

    let r = call(
        &p,
        &s,
        "restore_script",
        json!({"uuid": uuid, "revision": 3, "current_revision": 3}),
    );
    assert_eq!(r["isError"], json!(false), "{r}");
    // The same script back, not a new one (an agent reading "Created" may think it made a copy).
    assert_eq!(r["structuredContent"]["created"], json!(false));
    let text = r["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.starts_with("Restored from the trash "), "{text}");
    assert!(registered_code(&p, &uuid).unwrap().contains("v3();"));
    let live = call(&p, &s, "list_scripts", json!({}));
    assert_eq!(live["structuredContent"]["total"], json!(1));
    let trash = call(&p, &s, "list_scripts", json!({"deleted": true}));
    assert_eq!(trash["structuredContent"]["total"], json!(0));
    let keys: Vec<String> = p.env.dump(Area::Local).keys().cloned().collect();
    assert!(!keys.contains(&format!("trash/{uuid}")), "{keys:?}");
}

#[test]
fn a_script_from_the_trash_can_come_back_as_an_earlier_revision() {
    let p = provider();
    let s = ready(&p);
    let uuid = three_versions(&p, &s);
    call(&p, &s, "delete_script", json!({"uuid": uuid}));
    let r = call(
        &p,
        &s,
        "restore_script",
        json!({"uuid": uuid, "revision": 2, "current_revision": 3}),
    );
    assert_eq!(r["isError"], json!(false), "{r}");
    assert!(registered_code(&p, &uuid).unwrap().contains("v2();"));
}

#[test]
fn restoring_a_name_now_taken_is_a_conflict() {
    let p = provider();
    let s = ready(&p);
    let uuid = three_versions(&p, &s);
    call(&p, &s, "delete_script", json!({"uuid": uuid}));
    let other = call(
        &p,
        &s,
        "write_script",
        json!({"source": script("H", "other();")}),
    );
    assert_eq!(other["isError"], json!(false));
    let r = call(
        &p,
        &s,
        "restore_script",
        json!({"uuid": uuid, "revision": 3, "current_revision": 3}),
    );
    assert_eq!(error_code(&r), Some("CONFLICT"), "{r}");
    let trash = call(&p, &s, "list_scripts", json!({"deleted": true}));
    assert_eq!(
        trash["structuredContent"]["total"],
        json!(1),
        "still in the trash"
    );
}

#[test]
fn read_only_mode_refuses_restore_and_hides_it() {
    let p = provider();
    let s = ready(&p);
    let uuid = three_versions(&p, &s);
    set_switch(&p, "writes", false);
    let r = call(
        &p,
        &s,
        "restore_script",
        json!({"uuid": uuid, "revision": 1, "current_revision": 3}),
    );
    assert_eq!(error_code(&r), Some("WRITE_DISABLED"));
    let list = reply(send(
        &p,
        &s,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
    ));
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"list_revisions"));
    assert!(!names.contains(&"restore_script"));
}

/// Destructive: it replaces the live version (MCP: not an additive update), as `write_script`
/// does; that the replaced version stays in the history holds for both.
#[test]
fn restore_is_declared_a_destructive_write() {
    let p = provider();
    let s = ready(&p);
    let list = reply(send(
        &p,
        &s,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
    ));
    let tools = list["result"]["tools"].as_array().unwrap();
    let find = |n: &str| {
        tools
            .iter()
            .find(|t| t["name"] == json!(n))
            .unwrap()
            .clone()
    };
    let restore = find("restore_script");
    assert_eq!(restore["annotations"]["readOnlyHint"], json!(false));
    assert_eq!(restore["annotations"]["destructiveHint"], json!(true));
    assert_eq!(
        restore["inputSchema"]["required"],
        json!(["uuid", "revision", "current_revision"])
    );
    assert_eq!(
        find("list_revisions")["annotations"]["readOnlyHint"],
        json!(true)
    );
    // No tool empties the trash.
    assert!(tools
        .iter()
        .all(|t| !t["name"].as_str().unwrap().contains("purge")));
}

/// The revisions `list_revisions` lists for `uuid`, newest first.
fn listed(p: &Provider<MemoryEnv>, s: &lumo_userscripts::session::Session, uuid: &str) -> Vec<u64> {
    let l = call(p, s, "list_revisions", json!({"uuid": uuid}));
    l["structuredContent"]["revisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["revision"].as_u64().unwrap())
        .collect()
}

/// 20 revisions a script: an agent that writes 25 in a minute (within the rate limit) pushed
/// out every version from before, so the one the user ran for hours could not be brought back.
/// The newest version that stood an hour or more is kept past such a burst; once a later one
/// has stood as long, it is the one kept.
#[test]
fn a_burst_of_writes_cannot_push_the_version_that_stood_out_of_the_history() {
    let p = provider();
    let s = ready(&p);
    let c = call(
        &p,
        &s,
        "write_script",
        json!({"source": script("B", "good();")}),
    );
    let uuid = uuid_of(&c);
    let burst = |from: u64| {
        for rev in from..from + 25 {
            p.env.advance(2_000.0);
            let r = call(
                &p,
                &s,
                "write_script",
                json!({"uuid": uuid, "revision": rev, "source": script("B", &format!("bad{rev}();"))}),
            );
            assert_eq!(r["isError"], json!(false), "{r}");
        }
    };
    p.env.advance(3.0 * 3_600_000.0); // it runs for three hours
    burst(1);
    let kept = listed(&p, &s, &uuid);
    assert_eq!(kept.len(), 21, "the bound still holds: {kept:?}");
    assert_eq!(kept[0], 26);
    assert_eq!(kept[20], 1, "the version that stood is kept: {kept:?}");
    assert_eq!(kept[1..20], (7..=25).rev().collect::<Vec<u64>>()[..]);
    let r = call(
        &p,
        &s,
        "restore_script",
        json!({"uuid": uuid, "revision": 1, "current_revision": 26}),
    );
    assert_eq!(r["isError"], json!(false), "{r}");
    let g = call(&p, &s, "get_script", json!({"uuid": uuid}));
    assert_eq!(
        g["structuredContent"]["script"]["source"],
        json!(script("B", "good();"))
    );
    // Revision 27 (the restored good version) stands two hours; the next burst keeps it and
    // lets revision 1 go.
    p.env.advance(2.0 * 3_600_000.0);
    burst(27);
    let kept = listed(&p, &s, &uuid);
    assert_eq!(kept.len(), 21, "{kept:?}");
    assert!(kept.contains(&27), "{kept:?}");
    assert!(!kept.contains(&1), "{kept:?}");
}

#[test]
fn a_write_past_the_cap_removes_the_revision_it_dropped_and_no_other() {
    let p = provider();
    let s = ready(&p);
    let uuid = three_versions(&p, &s);
    for rev in 3..=24 {
        p.env.advance(10_000.0);
        let r = call(
            &p,
            &s,
            "write_script",
            json!({"uuid": uuid, "revision": rev, "source": script("H", &format!("v{}();", rev + 1))}),
        );
        assert_eq!(r["isError"], json!(false), "{r}");
    }
    // Revision 25 is live; the history keeps the 20 before it, each under its own key.
    let prefix = format!("history/{uuid}/");
    let mut kept: Vec<u64> = p
        .env
        .dump(Area::Local)
        .keys()
        .filter_map(|k| k.strip_prefix(&prefix)?.parse().ok())
        .collect();
    kept.sort();
    assert_eq!(kept, (5..=24).collect::<Vec<u64>>());
    let l = call(&p, &s, "list_revisions", json!({"uuid": uuid}));
    assert_eq!(l["structuredContent"]["problems"], json!([]), "{l}");
    assert_eq!(
        l["structuredContent"]["revisions"]
            .as_array()
            .unwrap()
            .len(),
        21
    );
}

#[test]
fn a_damaged_history_record_is_reported_and_skipped_and_the_script_is_intact() {
    let p = provider();
    let s = ready(&p);
    let uuid = three_versions(&p, &s);
    // The index, and revision 1 under its own key.
    let key = format!("history/{uuid}");
    let stored = p.env.dump(Area::Local);
    let mut ix = stored[&key].clone();
    ix["revisions"].as_array_mut().unwrap().push(json!(42));
    let mut first = stored[&format!("{key}/1")].clone();
    first["source"] = json!("tampered");
    let mut items = Map::new();
    items.insert(key.clone(), ix);
    items.insert(format!("{key}/1"), first);
    block_on(p.env.set(Area::Local, items)).unwrap();

    let l = call(&p, &s, "list_revisions", json!({"uuid": uuid}));
    assert_eq!(l["isError"], json!(false), "{l}");
    let revs = l["structuredContent"]["revisions"].as_array().unwrap();
    assert_eq!(
        revs.iter()
            .map(|r| r["revision"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        vec![3, 2]
    );
    assert_eq!(
        l["structuredContent"]["problems"].as_array().unwrap().len(),
        2
    );
    let now = call(&p, &s, "get_script", json!({"uuid": uuid}));
    assert_eq!(
        now["structuredContent"]["script"]["source"],
        json!(script("H", "v3();"))
    );
    let r1 = call(
        &p,
        &s,
        "restore_script",
        json!({"uuid": uuid, "revision": 1, "current_revision": 3}),
    );
    assert_eq!(error_code(&r1), Some("NOT_FOUND"));
    // A whole index of garbage: the script still reads and writes, and the revisions still
    // stored under their own keys are found again (the tampered one is not).
    let mut items = Map::new();
    items.insert(key.clone(), json!("garbage"));
    block_on(p.env.set(Area::Local, items)).unwrap();
    let l = call(&p, &s, "list_revisions", json!({"uuid": uuid}));
    assert_eq!(
        l["structuredContent"]["problems"].as_array().unwrap().len(),
        2,
        "{l}"
    );
    let revs = l["structuredContent"]["revisions"].as_array().unwrap();
    assert_eq!(
        revs.iter()
            .map(|r| r["revision"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        vec![3, 2]
    );
    let w = call(
        &p,
        &s,
        "write_script",
        json!({"uuid": uuid, "revision": 3, "source": script("H", "v4();")}),
    );
    assert_eq!(w["isError"], json!(false), "{w}");
    let r = call(
        &p,
        &s,
        "restore_script",
        json!({"uuid": uuid, "revision": 3, "current_revision": 4}),
    );
    assert_eq!(r["isError"], json!(false), "{r}");
    // Revision 2 outlived the damaged index and the writes after it.
    let r = call(
        &p,
        &s,
        "restore_script",
        json!({"uuid": uuid, "revision": 2, "current_revision": 5}),
    );
    assert_eq!(r["isError"], json!(false), "{r}");
    let now = call(&p, &s, "get_script", json!({"uuid": uuid}));
    assert_eq!(
        now["structuredContent"]["script"]["source"],
        json!(script("H", "v2();"))
    );
}

#[test]
fn a_failed_write_keeps_history_and_script_as_they_were() {
    let p = provider();
    let s = ready(&p);
    let uuid = three_versions(&p, &s);
    let before = p.env.dump(Area::Local);
    *p.env.fail_writes.borrow_mut() = Some("QUOTA_BYTES quota exceeded".into());
    let r = call(
        &p,
        &s,
        "restore_script",
        json!({"uuid": uuid, "revision": 1, "current_revision": 3}),
    );
    assert_eq!(error_code(&r), Some("STORAGE_ERROR"));
    *p.env.fail_writes.borrow_mut() = None;
    let after = p.env.dump(Area::Local);
    let scripts = |m: &Map<String, Value>| -> Vec<(String, Value)> {
        m.iter()
            .filter(|(k, _)| {
                ["script/", "source/", "history/"]
                    .iter()
                    .any(|p| k.starts_with(p))
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    assert_eq!(scripts(&before), scripts(&after));
    assert!(before.contains_key(&format!("history/{uuid}/2")));
}

/// Yields once to the executor, so a `join`ed side can make progress.
struct YieldNow(bool);
impl std::future::Future for YieldNow {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            std::task::Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    }
}

#[test]
fn a_restore_under_review_shows_the_diff_and_a_denial_changes_nothing() {
    use lumo_userscripts::guard::review::Decision;
    let p = provider();
    let s = ready(&p);
    let uuid = three_versions(&p, &s);
    set_switch(&p, "review", true);
    let msg = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "restore_script", "arguments": {"uuid": uuid, "revision": 1, "current_revision": 3}}});
    let seen = std::cell::RefCell::new(None);
    let user = async {
        loop {
            if let Some(r) = p.pending_reviews().first() {
                *seen.borrow_mut() = Some(r.clone());
                p.decide(&r.id, Decision::Deny);
                return;
            }
            YieldNow(false).await;
        }
    };
    let (out, ()) = block_on(futures::future::join(
        async { p.handle_mcp(&s, &msg).await },
        user,
    ));
    let r = reply(out)["result"].clone();
    assert_eq!(error_code(&r), Some("USER_REJECTED"));
    let review = seen.borrow().clone().unwrap();
    assert!(review.summary.starts_with("Restore"), "{}", review.summary);
    let diff = review.diff.unwrap();
    assert!(diff.contains("v1();") && diff.contains("v3();"), "{diff}");
    assert_eq!(review.base_revision, Some(3));
    let now = call(&p, &s, "get_script", json!({"uuid": uuid}));
    assert_eq!(now["structuredContent"]["script"]["revision"], json!(3));
}
