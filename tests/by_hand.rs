//! The user's own hands (the pages' internal operations): editing, undo, restore and the trash,
//! through the same store, locking and history as the agent's writes.

mod common;

use common::*;
use futures::executor::block_on;
use lumo_userscripts::control;
use lumo_userscripts::env::memory::MemoryEnv;
use lumo_userscripts::env::Area;
use lumo_userscripts::guard::audit;
use lumo_userscripts::provider::Provider;
use serde_json::{json, Value};

fn op(p: &Provider<MemoryEnv>, v: Value) -> Value {
    block_on(control::handle(p, &v)).value
}

/// The popup's Undo of the audited write `e` to `uuid`.
fn undo(p: &Provider<MemoryEnv>, uuid: &str, e: &audit::Entry) -> Value {
    op(
        p,
        json!({"op": "scripts.undo", "uuid": uuid, "caller": e.caller, "at": e.at, "via": "popup"}),
    )
}

/// The audit log's newest entry.
fn newest_entry(p: &Provider<MemoryEnv>) -> audit::Entry {
    block_on(audit::read_all(&p.env)).unwrap()[0].clone()
}

#[test]
fn the_user_creates_and_edits_unlimited_and_read_only_mode_does_not_stop_them() {
    let p = provider();
    set_switch(&p, "writes", false);
    let c = op(
        &p,
        json!({"op": "scripts.save", "source": script("Mine", "1")}),
    );
    assert_eq!(c["ok"], json!(true), "{c}");
    let uuid = c["result"]["script"]["uuid"].as_str().unwrap().to_owned();
    assert_eq!(c["result"]["script"]["createdBy"], json!("user"));
    // 40 saves at once: no rate limit for the user's own hands.
    for rev in 1..=40u64 {
        let r = op(
            &p,
            json!({"op": "scripts.save", "uuid": uuid, "revision": rev, "source": script("Mine", &format!("{}", rev + 1))}),
        );
        assert_eq!(r["ok"], json!(true), "save {rev}: {r}");
    }
    // A stale editor is refused, with the revision to reload.
    let stale = op(
        &p,
        json!({"op": "scripts.save", "uuid": uuid, "revision": 3, "source": script("Mine", "x")}),
    );
    assert_eq!(stale["code"], json!("CONFLICT"));
    assert_eq!(stale["details"]["currentRevision"], json!(41));
    // In the page's words: no tool for the user to call.
    assert_eq!(
        stale["error"],
        json!("it changed since you opened it (it is now at revision 41): copy your text, open it again and redo your change")
    );
    // A second script whose name reads the same, and a save of one deleted meanwhile.
    let twin = op(
        &p,
        json!({"op": "scripts.save", "source": script("M\u{0456}ne", "1")}),
    );
    assert_eq!(twin["code"], json!("CONFLICT"), "{twin}");
    let said = twin["error"].as_str().unwrap();
    assert!(
        said.starts_with("another script already has this @name"),
        "{said}"
    );
    assert!(!said.contains("uuid"), "{said}");
    let d = op(&p, json!({"op": "scripts.delete", "uuid": uuid}));
    assert_eq!(d["ok"], json!(true), "{d}");
    let gone = op(
        &p,
        json!({"op": "scripts.save", "uuid": uuid, "revision": 41, "source": script("Mine", "y")}),
    );
    assert_eq!(
        gone["error"],
        json!("it was deleted meanwhile: it is in the Trash, where Restore brings it back"),
        "{gone}"
    );
    // Bad metadata is refused with its line.
    let bad = op(
        &p,
        json!({"op": "scripts.save", "uuid": uuid, "revision": 41, "source": "// ==UserScript==\n// @match nope\n// ==/UserScript==\n"}),
    );
    assert_eq!(bad["code"], json!("INVALID_METADATA"));
    assert!(bad["details"]["diagnostics"][0]["line"].as_u64().is_some());
    let l = op(&p, json!({"op": "scripts.revisions", "uuid": uuid}));
    assert_eq!(l["revisions"][0]["by"], json!("user"));
    assert_eq!(l["revisions"][0]["via"], json!("options page"));
    // Audited like the agent's writes.
    let log = block_on(audit::read_all(&p.env)).unwrap();
    assert!(
        log.iter()
            .filter(|e| e.caller == "user" && e.result == "ok")
            .count()
            >= 41
    );
}

/// The editor's text was made from a revision; the page's own switch (or an agent's
/// enable/disable) makes a revision that leaves the source as it was: no conflict. A change of
/// the source since is one.
#[test]
fn an_edit_saves_over_a_switch_flipped_since_but_not_over_a_changed_source() {
    let p = provider();
    let c = op(
        &p,
        json!({"op": "scripts.save", "source": script("Mine", "1")}),
    );
    let uuid = c["result"]["script"]["uuid"].as_str().unwrap().to_owned();
    let off = op(
        &p,
        json!({"op": "scripts.setEnabled", "uuid": uuid, "enabled": false}),
    );
    assert_eq!(off["ok"], json!(true), "{off}");
    let saved = op(
        &p,
        json!({"op": "scripts.save", "uuid": uuid, "revision": 1, "source": script("Mine", "2")}),
    );
    assert_eq!(saved["ok"], json!(true), "{saved}");
    assert_eq!(saved["result"]["script"]["revision"], json!(3));
    // The switch the user flipped stays as they left it.
    assert_eq!(saved["result"]["script"]["enabled"], json!(false));
    // Now the source changed since revision 2: refused, nothing lost.
    let stale = op(
        &p,
        json!({"op": "scripts.save", "uuid": uuid, "revision": 2, "source": script("Mine", "x")}),
    );
    assert_eq!(stale["code"], json!("CONFLICT"), "{stale}");
    let got = op(&p, json!({"op": "scripts.get", "uuid": uuid}));
    assert_eq!(got["script"]["source"], json!(script("Mine", "2")));
    // A stale History says what to do there: it has no text to copy.
    let restore = op(
        &p,
        json!({"op": "scripts.restore", "uuid": uuid, "revision": 1, "currentRevision": 2, "live": true}),
    );
    assert_eq!(restore["code"], json!("CONFLICT"), "{restore}");
    assert_eq!(
        restore["error"],
        json!("it changed since you opened it (it is now at revision 3): open its History again and choose the version to restore once more")
    );
}

/// The popup offers Undo for a write while its script is stored or in the trash; deleted for
/// good, the script has nothing left to revert.
#[test]
fn no_undo_is_offered_for_a_script_deleted_for_good() {
    let p = provider();
    let c = op(
        &p,
        json!({"op": "scripts.save", "source": script("Gone", "1")}),
    );
    let uuid = c["result"]["script"]["uuid"].as_str().unwrap().to_owned();
    op(
        &p,
        json!({"op": "scripts.save", "uuid": uuid, "revision": 1, "source": script("Gone", "2")}),
    );
    let offered = |p: &Provider<MemoryEnv>| -> usize {
        let a = op(p, json!({"op": "audit.list"}));
        a["undoable"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| {
                let e = &a["entries"][i.as_u64().unwrap() as usize];
                e["target"] == json!(uuid) && e["tool"] == json!("write_script")
            })
            .count()
    };
    assert_eq!(offered(&p), 2, "the create and the edit");
    op(&p, json!({"op": "scripts.delete", "uuid": uuid}));
    assert_eq!(
        offered(&p),
        2,
        "in the trash: Undo says to restore it first"
    );
    let purged = op(&p, json!({"op": "trash.purge", "uuids": [uuid]}));
    assert_eq!(purged["ok"], json!(true), "{purged}");
    assert_eq!(offered(&p), 0);
}

#[test]
fn undo_of_an_agent_write_and_undo_after_a_later_change() {
    let p = provider();
    let s = ready(&p);
    let c = call(&p, &s, "write_script", json!({"source": script("U", "v1")}));
    let uuid = written_uuid(&c);
    p.env.advance(1000.0);
    call(
        &p,
        &s,
        "write_script",
        json!({"uuid": uuid, "revision": 1, "source": script("U", "v2")}),
    );
    let log = block_on(audit::read_all(&p.env)).unwrap();
    let w2 = log[0].clone();
    assert_eq!(w2.tool, "write_script");
    let u = undo(&p, &uuid, &w2);
    assert_eq!(u["ok"], json!(true), "{u}");
    let g = call(&p, &s, "get_script", json!({"uuid": uuid}));
    assert_eq!(
        g["structuredContent"]["script"]["source"],
        json!(script("U", "v1"))
    );
    assert_eq!(
        g["structuredContent"]["script"]["updatedVia"],
        json!("popup")
    );

    // The agent writes again; undoing the earlier write now would overwrite that: refused, with the diff.
    p.env.advance(1000.0);
    call(
        &p,
        &s,
        "write_script",
        json!({"uuid": uuid, "revision": 3, "source": script("U", "v4")}),
    );
    let again = undo(&p, &uuid, &w2);
    assert_eq!(again["code"], json!("CONFLICT"), "{again}");
    assert!(again["diff"].as_str().unwrap().contains("v4"), "{again}");
    let g = call(&p, &s, "get_script", json!({"uuid": uuid}));
    assert_eq!(
        g["structuredContent"]["script"]["source"],
        json!(script("U", "v4")),
        "nothing overwritten"
    );
}

/// A switch already in the state asked for makes no revision: its audit entry says so, and an
/// Undo of it is refused instead of reverting the same caller's earlier write. An Undo must
/// name a write the log holds.
#[test]
fn undo_of_a_write_that_changed_nothing_reverts_nothing() {
    let p = provider();
    let s = ready(&p);
    let c = call(&p, &s, "write_script", json!({"source": script("N", "v1")}));
    let uuid = written_uuid(&c);
    p.env.advance(1000.0);
    call(
        &p,
        &s,
        "write_script",
        json!({"uuid": uuid, "revision": 1, "source": script("N", "v2")}),
    );
    p.env.advance(1000.0);
    let same = call(
        &p,
        &s,
        "set_script_enabled",
        json!({"uuid": uuid, "enabled": true}),
    );
    assert_eq!(same["isError"], json!(false), "{same}");
    assert_eq!(same["structuredContent"]["script"]["revision"], json!(2));
    let text = same["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("Nothing to change in \"N\""), "{text}");
    let log = block_on(audit::read_all(&p.env)).unwrap();
    let (noop, w2) = (log[0].clone(), log[1].clone());
    assert_eq!(
        (noop.tool.as_str(), noop.result.as_str(), noop.unchanged),
        ("set_script_enabled", "ok", true)
    );
    assert!(!w2.unchanged, "a write that made a revision is not marked");
    let u = undo(&p, &uuid, &noop);
    assert_eq!(u["ok"], json!(false), "{u}");
    assert!(
        u["error"].as_str().unwrap().contains("changed nothing"),
        "{u}"
    );
    // A time no audited write has is refused too.
    let u = op(
        &p,
        json!({"op": "scripts.undo", "uuid": uuid, "caller": w2.caller, "at": w2.at + 1.0}),
    );
    assert!(
        u["error"]
            .as_str()
            .unwrap()
            .contains("not in the audit log"),
        "{u}"
    );
    let g = call(&p, &s, "get_script", json!({"uuid": uuid}));
    assert_eq!(g["structuredContent"]["script"]["revision"], json!(2));
    assert_eq!(
        g["structuredContent"]["script"]["source"],
        json!(script("N", "v2"))
    );
    // The disable that does change something is undone (enabled again, as a new revision).
    p.env.advance(1000.0);
    call(
        &p,
        &s,
        "set_script_enabled",
        json!({"uuid": uuid, "enabled": false}),
    );
    let off = newest_entry(&p);
    assert!(!off.unchanged);
    let u = undo(&p, &uuid, &off);
    assert_eq!(u["ok"], json!(true), "{u}");
    let g = call(&p, &s, "get_script", json!({"uuid": uuid}));
    assert_eq!(g["structuredContent"]["script"]["enabled"], json!(true));
    assert_eq!(
        g["structuredContent"]["script"]["source"],
        json!(script("N", "v2"))
    );
}

/// Undo reverts the revision the write's audit entry records, not "the caller's newest write at
/// or before that time": with the clock set back (an NTP step, the user fixing the date), a later
/// write carries an earlier time, and Undo of the earlier write would have reverted it instead.
#[test]
fn undo_reverts_the_write_it_names_after_the_clock_went_back() {
    let p = provider();
    let s = ready(&p);
    let c = call(&p, &s, "write_script", json!({"source": script("K", "v1")}));
    let uuid = written_uuid(&c);
    p.env.advance(60_000.0);
    call(
        &p,
        &s,
        "write_script",
        json!({"uuid": uuid, "revision": 1, "source": script("K", "v2")}),
    );
    let w2 = newest_entry(&p);
    assert_eq!(
        w2.revision,
        Some(2),
        "the entry records the revision it made"
    );
    // The clock goes back a minute; the agent writes v3, stamped before w2.
    p.env.advance(-60_000.0);
    call(
        &p,
        &s,
        "write_script",
        json!({"uuid": uuid, "revision": 2, "source": script("K", "v3")}),
    );
    let u = undo(&p, &uuid, &w2);
    assert_eq!(u["code"], json!("CONFLICT"), "{u}");
    assert!(u["diff"].as_str().unwrap().contains("v3"), "{u}");
    let g = call(&p, &s, "get_script", json!({"uuid": uuid}));
    assert_eq!(
        g["structuredContent"]["script"]["source"],
        json!(script("K", "v3")),
        "the write the user did not pick is not reverted"
    );
}

/// The same for a delete: the trash holds the revision a delete sent there only until the
/// script is brought back, so after a restore and a second delete (stamped earlier by a clock
/// set back), Undo of the first delete must not undo the second.
#[test]
fn undo_of_a_delete_does_not_undo_a_later_one_stamped_earlier() {
    let p = provider();
    let s = ready(&p);
    let c = call(&p, &s, "write_script", json!({"source": script("D", "v1")}));
    let uuid = written_uuid(&c);
    p.env.advance(60_000.0);
    call(&p, &s, "delete_script", json!({"uuid": uuid}));
    let first = newest_entry(&p);
    assert_eq!(first.revision, Some(1));
    p.env.advance(1000.0);
    let back = undo(&p, &uuid, &first);
    assert_eq!(back["ok"], json!(true), "{back}");
    p.env.advance(-30_000.0);
    call(&p, &s, "delete_script", json!({"uuid": uuid}));
    let again = undo(&p, &uuid, &first);
    assert_eq!(again["code"], json!("CONFLICT"), "{again}");
    let g = call(&p, &s, "get_script", json!({"uuid": uuid}));
    assert_eq!(
        g["structuredContent"]["script"]["deleted"],
        json!(true),
        "still in the trash: {g}"
    );
}

/// Undo is offered by the popup only for the five script writes; the worker refuses the rest
/// itself (a page of this extension, or a popup of another version, may ask). A try of a
/// stored script is audited "ok" with that script as its target, and made no revision: Undo of
/// it would have reverted the caller's last real write to that script.
#[test]
fn undo_of_a_try_is_refused_and_reverts_nothing() {
    let p = provider();
    p.env.tabs.borrow_mut().push(lumo_userscripts::env::Tab {
        id: 7,
        url: "https://example.com/page".into(),
        title: "Example page".into(),
        last_accessed: 1.0,
        incognito: false,
    });
    *p.env.execute_answer.borrow_mut() = Some(Ok(json!([])));
    let s = ready(&p);
    let c = call(&p, &s, "write_script", json!({"source": script("T", "v1")}));
    let uuid = written_uuid(&c);
    p.env.advance(1000.0);
    call(
        &p,
        &s,
        "write_script",
        json!({"uuid": uuid, "revision": 1, "source": script("T", "v2")}),
    );
    p.env.advance(1000.0);
    let t = call(&p, &s, "try_script", json!({"uuid": uuid, "tabId": 7}));
    assert_eq!(t["isError"], json!(false), "{t}");
    let tried = newest_entry(&p);
    assert_eq!(
        (
            tried.tool.as_str(),
            tried.result.as_str(),
            tried.target.as_deref()
        ),
        ("try_script", "ok", Some(uuid.as_str()))
    );
    let u = undo(&p, &uuid, &tried);
    assert_eq!(u["ok"], json!(false), "{u}");
    assert!(
        u["error"]
            .as_str()
            .unwrap()
            .contains("try_script cannot be undone"),
        "{u}"
    );
    let g = call(&p, &s, "get_script", json!({"uuid": uuid}));
    assert_eq!(g["structuredContent"]["script"]["revision"], json!(2));
    // The popup is told which entries Undo can revert, by the same rule: the two writes, not
    // the try, nor the refused write below.
    p.env.advance(1000.0);
    call(
        &p,
        &s,
        "write_script",
        json!({"uuid": uuid, "revision": 1, "source": script("T", "stale")}),
    );
    let listed = op(&p, json!({"op": "audit.list"}));
    let entries = listed["entries"].as_array().unwrap();
    let shown: Vec<(&str, &str)> = listed["undoable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| &entries[i.as_u64().unwrap() as usize])
        .map(|e| (e["tool"].as_str().unwrap(), e["result"].as_str().unwrap()))
        .collect();
    assert_eq!(
        shown,
        [("write_script", "ok"), ("write_script", "ok")],
        "{listed}"
    );
    assert_eq!(entries.len(), 4, "{listed}");
    assert!(
        entries.iter().all(|e| e.get("undoable").is_none()),
        "the log itself is unchanged"
    );
    // The popup says which script each entry changed, by its name now (beside the log), and
    // each successful write by the name it left (in its entry); the try and the refusal by none.
    assert_eq!(listed["names"], json!({ uuid.as_str(): "T" }), "{listed}");
    let kept: Vec<&Value> = entries.iter().map(|e| &e["name"]).collect();
    assert_eq!(
        kept,
        [&Value::Null, &Value::Null, &json!("T"), &json!("T")],
        "{listed}"
    );
}

#[test]
fn undo_of_a_delete_brings_the_script_back_and_undo_of_a_create_trashes_it() {
    let p = provider();
    let s = ready(&p);
    let c = call(&p, &s, "write_script", json!({"source": script("Z", "1")}));
    let uuid = written_uuid(&c);
    p.env.advance(1000.0);
    call(&p, &s, "delete_script", json!({"uuid": uuid}));
    // In the trash: named as it was when deleted, from the trash's index.
    assert_eq!(
        op(&p, json!({"op": "audit.list"}))["names"],
        json!({ uuid.as_str(): "Z" })
    );
    let del = newest_entry(&p);
    let u = undo(&p, &uuid, &del);
    assert_eq!(u["ok"], json!(true), "{u}");
    assert!(p.env.registrations.borrow().contains_key(&uuid));

    let c = call(
        &p,
        &s,
        "write_script",
        json!({"source": script("New", "1")}),
    );
    let fresh = written_uuid(&c);
    let made = newest_entry(&p);
    let u = undo(&p, &fresh, &made);
    assert_eq!(u["ok"], json!(true), "{u}");
    let t = op(&p, json!({"op": "trash.list"}));
    assert_eq!(t["scripts"][0]["uuid"], json!(fresh));
}

/// R9: the user saved v1 and edited it to v2; an agent deleted it; the user restored it from
/// the trash. The delete is undone already: its Undo is not offered, and one asked for anyway
/// changes nothing (read as a write, it reverted the user's edit to v1 under the delete's name).
#[test]
fn undo_of_a_delete_whose_script_was_restored_changes_nothing() {
    let p = provider();
    let s = ready(&p);
    let c = op(
        &p,
        json!({"op": "scripts.save", "source": script("Mine", "v1")}),
    );
    let uuid = c["result"]["script"]["uuid"].as_str().unwrap().to_owned();
    op(
        &p,
        json!({"op": "scripts.save", "uuid": uuid, "revision": 1, "source": script("Mine", "v2")}),
    );
    p.env.advance(1000.0);
    call(&p, &s, "delete_script", json!({"uuid": uuid}));
    let del = newest_entry(&p);
    assert_eq!(del.tool, "delete_script");
    p.env.advance(1000.0);
    let back = op(
        &p,
        json!({"op": "scripts.restore", "uuid": uuid, "revision": 2, "currentRevision": 2}),
    );
    assert_eq!(back["ok"], json!(true), "{back}");
    let listed = op(&p, json!({"op": "audit.list"}));
    let entries = listed["entries"].as_array().unwrap();
    let offered: Vec<&str> = listed["undoable"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| entries[i.as_u64().unwrap() as usize]["tool"].as_str())
        .collect();
    assert!(!offered.contains(&"delete_script"), "{listed}");
    let u = undo(&p, &uuid, &del);
    assert_eq!(u["code"], json!("CONFLICT"), "{u}");
    let got = op(&p, json!({"op": "scripts.get", "uuid": uuid}));
    assert!(
        got["script"]["source"].as_str().unwrap().contains("v2"),
        "{got}"
    );
    // R11: the agent deletes it again. The first delete is still undone already: not offered,
    // and asked for anyway it says so (it said "restore it first", then, restored, "undone
    // already"); the second is the one offered, and it brings the script back.
    p.env.advance(1000.0);
    call(&p, &s, "delete_script", json!({"uuid": uuid}));
    let again = newest_entry(&p);
    let listed = op(&p, json!({"op": "audit.list"}));
    let entries = listed["entries"].as_array().unwrap();
    let offered: Vec<f64> = listed["undoable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| &entries[i.as_u64().unwrap() as usize])
        .filter(|e| e["tool"] == "delete_script")
        .filter_map(|e| e["at"].as_f64())
        .collect();
    assert_eq!(offered, vec![again.at], "{listed}");
    let u = undo(&p, &uuid, &del);
    assert_eq!(u["code"], json!("CONFLICT"), "{u}");
    assert!(
        u["error"].as_str().unwrap().contains("deleted again later"),
        "{u}"
    );
    let u = undo(&p, &uuid, &again);
    assert_eq!(u["ok"], json!(true), "{u}");
    let got = op(&p, json!({"op": "scripts.get", "uuid": uuid}));
    assert!(
        got["script"]["source"].as_str().unwrap().contains("v2"),
        "{got}"
    );
}

#[test]
fn only_the_user_purges_the_trash_and_purging_removes_history_too() {
    let p = provider();
    let s = ready(&p);
    let mut uuids = Vec::new();
    for n in ["P1", "P2"] {
        let c = call(&p, &s, "write_script", json!({"source": script(n, "1")}));
        let u = written_uuid(&c);
        call(
            &p,
            &s,
            "write_script",
            json!({"uuid": u, "revision": 1, "source": script(n, "2")}),
        );
        call(&p, &s, "delete_script", json!({"uuid": u}));
        uuids.push(u);
    }
    // GM values outlive the trash (a restore brings them back) and leave with the script.
    let vs = lumo_userscripts::gm::store::ValueStore::default();
    for u in &uuids {
        let set = lumo_userscripts::gm::values::Op::Set(vec![("k".into(), "1".into())]);
        block_on(vs.apply(&p.env, u, &set)).unwrap();
    }
    let r = op(&p, json!({"op": "trash.purge", "uuids": [uuids[0]]}));
    assert_eq!(r["purged"], json!(1), "{r}");
    let dump = p.env.dump(Area::Local);
    assert!(dump.contains_key(&format!("values/{}", uuids[1])));
    assert!(
        dump["values/budget"].get(&uuids[0]).is_none(),
        "{}",
        dump["values/budget"]
    );
    let keys: Vec<String> = p.env.dump(Area::Local).keys().cloned().collect();
    assert!(!keys.iter().any(|k| k.contains(&uuids[0])), "{keys:?}");
    assert!(keys.contains(&format!("trash/{}", uuids[1])));
    let r = op(&p, json!({"op": "trash.purge"}));
    assert_eq!(r["purged"], json!(1));
    let keys: Vec<String> = p.env.dump(Area::Local).keys().cloned().collect();
    assert!(!keys.iter().any(|k| k.contains(&uuids[1])), "{keys:?}");
    let budget = &p.env.dump(Area::Local)["history/budget"];
    assert_eq!(budget, &json!({}));
    assert_eq!(&p.env.dump(Area::Local)["values/budget"], &json!({}));
    // Bad input changes nothing.
    assert_eq!(
        op(&p, json!({"op": "trash.purge", "uuids": ["nope"]}))["ok"],
        json!(false)
    );
}

#[test]
fn the_editor_lint_names_lines() {
    let p = provider();
    let r = op(
        &p,
        json!({"op": "scripts.lint", "source": "// ==UserScript==\n// @name A\n// @match bad pattern\n// ==/UserScript==\n"}),
    );
    assert_eq!(r["valid"], json!(false));
    assert_eq!(r["diagnostics"][0]["line"], json!(3));
}

/// The options page's switch, Delete and Delete forever are audited as the user's, and the
/// switch and Delete leave a revision like any other change (they used to skip the audit).
#[test]
fn the_options_switch_delete_and_purge_are_audited_and_kept_in_history() {
    let p = provider();
    let c = op(
        &p,
        json!({"op": "scripts.save", "source": script("Sw", "1")}),
    );
    let uuid = c["result"]["script"]["uuid"].as_str().unwrap().to_owned();
    let r = op(
        &p,
        json!({"op": "scripts.setEnabled", "uuid": uuid, "enabled": false}),
    );
    assert_eq!(r["ok"], json!(true), "{r}");
    // A stale revision is refused like the agent's.
    let stale = op(
        &p,
        json!({"op": "scripts.setEnabled", "uuid": uuid, "enabled": true, "revision": 1}),
    );
    assert_eq!(stale["code"], json!("CONFLICT"), "{stale}");
    let r = op(&p, json!({"op": "scripts.delete", "uuid": uuid}));
    assert_eq!(r["ok"], json!(true), "{r}");
    let h = op(&p, json!({"op": "scripts.revisions", "uuid": uuid}));
    let revs: Vec<(u64, bool)> = h["revisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["revision"].as_u64().unwrap(),
                r["enabled"].as_bool().unwrap(),
            )
        })
        .collect();
    assert!(revs.contains(&(2, false)), "{h}");
    assert_eq!(h["deleted"], json!(true));
    let r = op(&p, json!({"op": "trash.purge", "uuids": [uuid]}));
    assert_eq!(r["purged"], json!(1), "{r}");
    let log = block_on(audit::read_all(&p.env)).unwrap();
    let mine: Vec<(&str, &str, Option<&str>)> = log
        .iter()
        .filter(|e| e.caller == "user")
        .map(|e| (e.tool.as_str(), e.result.as_str(), e.target.as_deref()))
        .collect();
    for want in [
        ("set_script_enabled", "ok"),
        ("set_script_enabled", "CONFLICT"),
        ("delete_script", "ok"),
        ("purge_trash", "ok"),
    ] {
        assert!(
            mine.iter()
                .any(|(t, r, u)| (*t, *r) == want && *u == Some(uuid.as_str())),
            "{want:?} missing from {mine:?}"
        );
    }
}

/// After 30 days a trashed script is gone: not listed, not restorable, and its bytes (copy and
/// history) leave storage when the trash is next listed, even if nothing else is deleted.
#[test]
fn the_trash_keeps_a_script_30_days_then_frees_its_bytes() {
    let p = provider();
    let c = op(
        &p,
        json!({"op": "scripts.save", "source": script("Old", "1")}),
    );
    let uuid = c["result"]["script"]["uuid"].as_str().unwrap().to_owned();
    op(
        &p,
        json!({"op": "scripts.save", "uuid": uuid, "revision": 1, "source": script("Old", "2")}),
    );
    op(&p, json!({"op": "scripts.delete", "uuid": uuid}));
    p.env.advance(29.9 * 24.0 * 3600.0 * 1000.0);
    let l = op(&p, json!({"op": "trash.list"}));
    assert_eq!(l["scripts"].as_array().unwrap().len(), 1, "{l}");
    p.env.advance(0.2 * 24.0 * 3600.0 * 1000.0);
    let l = op(&p, json!({"op": "trash.list"}));
    assert_eq!(l["scripts"], json!([]), "{l}");
    let keys: Vec<String> = p.env.dump(Area::Local).keys().cloned().collect();
    assert!(!keys.iter().any(|k| k.contains(&uuid)), "{keys:?}");
    let r = op(
        &p,
        json!({"op": "scripts.restore", "uuid": uuid, "revision": 3, "currentRevision": 3}),
    );
    assert_eq!(r["ok"], json!(false), "{r}");
}

/// A sweep of the expired that cannot be stored (storage full) does not hide the trash: the
/// scripts still in their 30 days are listed, with why the expired one is still stored.
#[test]
fn the_trash_is_listed_when_its_expired_cannot_be_deleted_now() {
    let p = provider();
    let save = |name: &str| {
        let c = op(
            &p,
            json!({"op": "scripts.save", "source": script(name, "1")}),
        );
        c["result"]["script"]["uuid"].as_str().unwrap().to_owned()
    };
    let (old, young) = (save("Old"), save("Young"));
    op(&p, json!({"op": "scripts.delete", "uuid": old}));
    p.env.advance(20.0 * 24.0 * 3600.0 * 1000.0);
    op(&p, json!({"op": "scripts.delete", "uuid": young}));
    p.env.advance(11.0 * 24.0 * 3600.0 * 1000.0);
    *p.env.fail_writes.borrow_mut() = Some("QUOTA_BYTES quota exceeded".into());
    let l = op(&p, json!({"op": "trash.list"}));
    assert_eq!(l["ok"], json!(true), "{l}");
    let listed: Vec<&str> = l["scripts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["uuid"].as_str())
        .collect();
    assert_eq!(listed, [young.as_str()], "{l}");
    let why = l["problems"][0]["message"].as_str().unwrap_or_default();
    assert!(
        why.contains("could not be deleted for good now") && why.contains("QUOTA_BYTES"),
        "{l}"
    );
    // Storage back: the next listing deletes it, and says nothing more.
    *p.env.fail_writes.borrow_mut() = None;
    let l = op(&p, json!({"op": "trash.list"}));
    assert_eq!(l["problems"], json!([]), "{l}");
    let keys: Vec<String> = p.env.dump(Area::Local).keys().cloned().collect();
    assert!(!keys.iter().any(|k| k.contains(&old)), "{keys:?}");
}

/// Undo of the user's own Delete of a script an agent wrote last: the delete made no revision by
/// the user, so it is found as the trash's record of who deleted it.
#[test]
fn undo_of_the_users_delete_of_an_agents_script_brings_it_back() {
    let p = provider();
    let s = ready(&p);
    let c = call(
        &p,
        &s,
        "write_script",
        json!({"source": script("Theirs", "1")}),
    );
    let uuid = written_uuid(&c);
    p.env.advance(1000.0);
    let d = op(&p, json!({"op": "scripts.delete", "uuid": uuid}));
    assert_eq!(d["ok"], json!(true), "{d}");
    let del = newest_entry(&p);
    assert_eq!(
        (del.tool.as_str(), del.caller.as_str()),
        ("delete_script", "user")
    );
    let u = undo(&p, &uuid, &del);
    assert_eq!(u["ok"], json!(true), "{u}");
    assert!(p.env.registrations.borrow().contains_key(&uuid));
    assert_eq!(op(&p, json!({"op": "trash.list"}))["scripts"], json!([]));
}

/// A delete is one `set` (the script leaves the index and enters the trash) and then a `remove`
/// of its record and source. A worker stopped in between, or a failed remove, leaves the
/// record: that script is in the trash, so no tool reads or changes it as live (a change would
/// have put it back in the index while the trash still listed it, for a later purge to take with
/// its history), the trash restores it, and Delete forever takes the leftover record too.
#[test]
fn a_delete_stopped_before_its_remove_leaves_the_script_in_the_trash_only() {
    let p = provider();
    let s = ready(&p);
    let mut ghosts = Vec::new();
    for name in ["G1", "G2"] {
        let c = call(&p, &s, "write_script", json!({"source": script(name, "1")}));
        let uuid = written_uuid(&c);
        let live = p.env.dump(Area::Local);
        let d = call(&p, &s, "delete_script", json!({"uuid": uuid}));
        assert_eq!(d["isError"], json!(false), "{d}");
        // What the remove took, back: the state the stopped delete leaves.
        let mut left = serde_json::Map::new();
        for k in [format!("script/{uuid}"), format!("source/{uuid}")] {
            left.insert(k.clone(), live[&k].clone());
        }
        block_on(lumo_userscripts::env::Storage::set(
            &p.env,
            Area::Local,
            left,
        ))
        .unwrap();
        ghosts.push(uuid);
    }
    let uuid = &ghosts[0];
    let stored = p.env.dump(Area::Local);
    let g = call(&p, &s, "get_script", json!({"uuid": uuid}));
    assert_eq!(
        g["structuredContent"]["script"]["deleted"],
        json!(true),
        "{g}"
    );
    for (tool, args) in [
        (
            "set_script_enabled",
            json!({"uuid": uuid, "enabled": false}),
        ),
        (
            "write_script",
            json!({"uuid": uuid, "revision": 1, "source": script("G1", "2")}),
        ),
        (
            "patch_script",
            json!({"uuid": uuid, "revision": 1, "edits": [{"search": "1", "replace": "2"}]}),
        ),
        ("delete_script", json!({"uuid": uuid})),
    ] {
        let r = call(&p, &s, tool, args);
        assert_eq!(error_code(&r), Some("NOT_FOUND"), "{tool}: {r}");
    }
    let after = p.env.dump(Area::Local);
    for k in ["scripts/index", "trash/index", &format!("script/{uuid}")] {
        assert_eq!(after.get(k), stored.get(k), "{k} unchanged");
    }
    // The trash lists both and brings the first back, live and registered.
    let t = op(&p, json!({"op": "trash.list"}));
    assert_eq!(t["scripts"].as_array().unwrap().len(), 2, "{t}");
    let r = call(
        &p,
        &s,
        "restore_script",
        json!({"uuid": uuid, "revision": 1, "current_revision": 1}),
    );
    assert_eq!(r["isError"], json!(false), "{r}");
    let g = call(&p, &s, "get_script", json!({"uuid": uuid}));
    assert_eq!(
        g["structuredContent"]["script"]["revision"],
        json!(2),
        "{g}"
    );
    assert!(p.env.registrations.borrow().contains_key(uuid.as_str()));
    // Delete forever takes the second one's leftover record and source with its trash entry.
    let other = &ghosts[1];
    let r = op(&p, json!({"op": "trash.purge", "uuids": [other]}));
    assert_eq!(r["ok"], json!(true), "{r}");
    let left = p.env.dump(Area::Local);
    for k in [
        format!("script/{other}"),
        format!("source/{other}"),
        format!("trash/{other}"),
    ] {
        assert!(!left.contains_key(&k), "{k} is gone");
    }
}

/// An agent edits a script; later the user (or the agent) deletes it. Undo of the edit must not
/// bring the script back from the trash: that would undo the delete, not the edit.
#[test]
fn undo_of_an_edit_after_a_delete_changes_nothing() {
    for deleter in ["user", "agent"] {
        let p = provider();
        let s = ready(&p);
        let uuid = created(&p, &s, "E", "mine");
        p.env.advance(1000.0);
        call(
            &p,
            &s,
            "write_script",
            json!({"uuid": uuid, "revision": 1, "source": script("E", "agent")}),
        );
        let edit = newest_entry(&p);
        p.env.advance(1000.0);
        let d = if deleter == "user" {
            op(&p, json!({"op": "scripts.delete", "uuid": uuid}))
        } else {
            call(&p, &s, "delete_script", json!({"uuid": uuid}))
        };
        assert!(
            d["ok"] == json!(true) || d["isError"] == json!(false),
            "{d}"
        );
        let u = undo(&p, &uuid, &edit);
        assert_eq!(u["code"], json!("CONFLICT"), "{deleter}: {u}");
        assert!(
            u["error"].as_str().unwrap().contains("deleted since"),
            "{u}"
        );
        let trash = op(&p, json!({"op": "trash.list"}));
        assert_eq!(
            trash["scripts"][0]["uuid"],
            json!(uuid),
            "{deleter}: still in the trash"
        );
        assert!(!p.env.registrations.borrow().contains_key(&uuid));
    }
}

/// Undo reads the script, then restores under the write lock. A delete that takes the lock in
/// between does not change the revision the Undo pinned: the restore must still see that the
/// script is no longer live, not bring it back.
#[test]
fn an_undo_racing_a_delete_does_not_bring_the_script_back() {
    use futures::FutureExt;
    let p = provider();
    let s = ready(&p);
    let uuid = created(&p, &s, "D", "1");
    p.env.advance(1000.0);
    call(
        &p,
        &s,
        "write_script",
        json!({"uuid": uuid, "revision": 1, "source": script("D", "2")}),
    );
    let w = newest_entry(&p);
    let msg = json!({"op": "scripts.undo", "uuid": uuid, "caller": w.caller, "at": w.at});
    // The Undo reads the script live, then waits for the write lock, which the delete takes.
    let lock = block_on(p.write_lock());
    let mut undo = Box::pin(control::handle(&p, &msg));
    let waker = futures::task::noop_waker();
    assert!(undo
        .poll_unpin(&mut std::task::Context::from_waker(&waker))
        .is_pending());
    drop(lock);
    assert_eq!(
        op(&p, json!({"op": "scripts.delete", "uuid": uuid}))["ok"],
        json!(true)
    );
    let u = block_on(undo).value;
    assert_eq!(u["ok"], json!(false), "{u}");
    assert!(
        u["error"].as_str().unwrap().contains("deleted since"),
        "{u}"
    );
    assert_eq!(
        op(&p, json!({"op": "trash.list"}))["scripts"][0]["uuid"],
        json!(uuid)
    );
    assert!(!p.env.registrations.borrow().contains_key(&uuid));
}

/// A script brought back from the trash (by the user's Restore, or an agent's `restore_script`)
/// goes back to the trash on Undo of that restore: it must not stay live and running with the
/// answer "Undone".
#[test]
fn undo_of_a_restore_from_the_trash_sends_the_script_back() {
    for restorer in ["user", "agent"] {
        let p = provider();
        let s = ready(&p);
        let uuid = created(&p, &s, "T", "1");
        call(
            &p,
            &s,
            "write_script",
            json!({"uuid": uuid, "revision": 1, "source": script("T", "2")}),
        );
        p.env.advance(1000.0);
        assert_eq!(
            op(&p, json!({"op": "scripts.delete", "uuid": uuid}))["ok"],
            json!(true)
        );
        p.env.advance(1000.0);
        let r = if restorer == "user" {
            op(
                &p,
                json!({"op": "scripts.restore", "uuid": uuid, "revision": 2, "currentRevision": 2}),
            )
        } else {
            call(
                &p,
                &s,
                "restore_script",
                json!({"uuid": uuid, "revision": 2, "current_revision": 2}),
            )
        };
        assert!(
            r["ok"] == json!(true) || r["isError"] == json!(false),
            "{r}"
        );
        assert!(p.env.registrations.borrow().contains_key(uuid.as_str()));
        let entry = newest_entry(&p);
        assert_eq!(
            (entry.tool.as_str(), entry.from_trash),
            ("restore_script", true),
            "{restorer}"
        );
        p.env.advance(1000.0);
        let u = undo(&p, &uuid, &entry);
        assert_eq!(u["ok"], json!(true), "{restorer}: {u}");
        let h = op(&p, json!({"op": "scripts.revisions", "uuid": uuid}));
        assert_eq!(
            h["deleted"],
            json!(true),
            "{restorer}: back in the trash: {h}"
        );
        assert!(
            !p.env.registrations.borrow().contains_key(&uuid),
            "{restorer}: and not running"
        );
        let undo = newest_entry(&p);
        assert_eq!(
            (undo.tool.as_str(), undo.from_trash),
            ("delete_script", false)
        );
    }
}

/// The History page of a live script offers "Restore this version". An agent deletes the script
/// while the user reads it: the click must not bring the script out of the trash (the delete
/// keeps the revision the page pinned, so only `live` tells). The trash's own Restore, and the
/// History page of a script shown in the trash, still bring it back.
#[test]
fn a_history_restore_of_a_live_script_does_not_undo_a_later_delete() {
    let p = provider();
    let s = ready(&p);
    let uuid = created(&p, &s, "H", "1");
    call(
        &p,
        &s,
        "write_script",
        json!({"uuid": uuid, "revision": 1, "source": script("H", "2")}),
    );
    let h = op(&p, json!({"op": "scripts.revisions", "uuid": uuid}));
    assert_eq!(h["deleted"], json!(false), "{h}");
    let shown = h["currentRevision"].clone();
    call(&p, &s, "delete_script", json!({"uuid": uuid}));
    let restore = |live: Value| {
        op(
            &p,
            json!({"op": "scripts.restore", "uuid": uuid, "revision": 1, "currentRevision": shown, "live": live}),
        )
    };
    let r = restore(json!("yes"));
    assert_eq!(r["ok"], json!(false), "{r}");
    assert!(r["error"].as_str().unwrap().contains("\"live\""), "{r}");
    let r = restore(json!(true));
    assert_eq!(r["ok"], json!(false), "{r}");
    assert!(r["error"].as_str().unwrap().contains("in the trash"), "{r}");
    let trash = op(&p, json!({"op": "trash.list"}));
    assert_eq!(
        trash["scripts"][0]["uuid"],
        json!(uuid),
        "still in the trash"
    );
    assert!(!p.env.registrations.borrow().contains_key(&uuid));
    // The History page now shows it in the trash, and its restore (live: false) brings it back.
    let h = op(&p, json!({"op": "scripts.revisions", "uuid": uuid}));
    assert_eq!(h["deleted"], json!(true), "{h}");
    let r = restore(json!(false));
    assert_eq!(r["ok"], json!(true), "{r}");
    let g = call(&p, &s, "get_script", json!({"uuid": uuid}));
    assert!(
        g["structuredContent"]["script"]["source"]
            .as_str()
            .unwrap()
            .ends_with("==/UserScript==\n1\n"),
        "revision 1's source: {g}"
    );
    assert!(p.env.registrations.borrow().contains_key(uuid.as_str()));
}

/// "Empty trash" names the scripts the page listed: one an agent deleted after the list was
/// read (while the user read the confirm dialog) stays in the trash, restorable.
#[test]
fn empty_trash_purges_what_the_page_listed_not_a_later_delete() {
    let p = provider();
    let s = ready(&p);
    let a = created(&p, &s, "A", "1");
    let b = created(&p, &s, "B", "1");
    assert_eq!(
        op(&p, json!({"op": "scripts.delete", "uuid": a}))["ok"],
        json!(true)
    );
    let listed: Vec<Value> = op(&p, json!({"op": "trash.list"}))["scripts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["uuid"].clone())
        .collect();
    assert_eq!(listed, [json!(a)]);
    call(&p, &s, "delete_script", json!({"uuid": b}));
    let r = op(&p, json!({"op": "trash.purge", "listed": listed}));
    assert_eq!(r["purged"], json!(1), "{r}");
    let trash = op(&p, json!({"op": "trash.list"}));
    assert_eq!(trash["scripts"][0]["uuid"], json!(b), "{trash}");
    let entry = newest_entry(&p);
    assert_eq!(
        (
            entry.tool.as_str(),
            entry.target.as_deref(),
            entry.purged.map(|g| (g.name, g.why))
        ),
        (
            "purge_trash",
            Some(a.as_str()),
            Some(("A".to_owned(), "deletedForever".to_owned()))
        ),
        "audited as Empty trash of A alone, by name"
    );
    assert_eq!(
        op(
            &p,
            json!({"op": "trash.purge", "listed": [b], "uuids": [b]})
        )["ok"],
        json!(false),
        "one or the other"
    );
}

/// R15: "Delete forever" of a script an agent restored while the confirm dialog was open said
/// "Deleted … forever." and audited an "ok" purge, while the script was live and running.
#[test]
fn delete_forever_of_a_script_restored_meanwhile_deletes_nothing_and_says_so() {
    let p = provider();
    let s = ready(&p);
    let a = created(&p, &s, "A", "1");
    call(&p, &s, "delete_script", json!({"uuid": a}));
    let r = call(
        &p,
        &s,
        "restore_script",
        json!({"uuid": a, "revision": 1, "current_revision": 1}),
    );
    assert_eq!(r["isError"], json!(false), "{r}");
    let r = op(&p, json!({"op": "trash.purge", "uuids": [a]}));
    assert_eq!(
        (&r["ok"], &r["code"]),
        (&json!(false), &json!("NOT_FOUND")),
        "{r}"
    );
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("no longer in the trash"),
        "{r}"
    );
    let entry = newest_entry(&p);
    assert_eq!(
        (
            entry.tool.as_str(),
            entry.result.as_str(),
            entry.target.as_deref()
        ),
        ("purge_trash", "NOT_FOUND", Some(a.as_str()))
    );
    let listed = op(&p, json!({"op": "scripts.list"}));
    assert!(listed.to_string().contains(&a), "still live: {listed}");
}

/// One item of `trash/index` that no longer decodes (its time damaged) still names its script:
/// the trash lists it from the script's own entry, and the next rewrite of the index (another
/// delete) keeps it, so it can still be restored, or deleted for good.
#[test]
fn a_damaged_trash_index_item_keeps_its_script_in_the_trash() {
    let p = provider();
    let s = ready(&p);
    let a = created(&p, &s, "A", "1");
    let b = created(&p, &s, "B", "1");
    assert_eq!(
        op(&p, json!({"op": "scripts.delete", "uuid": a}))["ok"],
        json!(true)
    );
    let mut ix = p.env.dump(Area::Local)["trash/index"].clone();
    ix["items"][0]["deletedAt"] = json!("x");
    put(&p, [("trash/index".to_owned(), ix)]);
    let t = op(&p, json!({"op": "trash.list"}));
    assert_eq!(t["scripts"][0]["uuid"], json!(a), "{t}");
    assert_eq!(
        op(&p, json!({"op": "scripts.delete", "uuid": b}))["ok"],
        json!(true)
    );
    assert_eq!(
        op(&p, json!({"op": "trash.list"}))["scripts"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let r = op(
        &p,
        json!({"op": "scripts.restore", "uuid": a, "revision": 1, "currentRevision": 1}),
    );
    assert_eq!(r["ok"], json!(true), "{r}");
    assert!(p.env.registrations.borrow().contains_key(&a));
}

/// Two faults: a delete stopped before its `remove` left the record behind, then the index was
/// damaged. Rebuilding the index from the records must not adopt that record: a fresh worker
/// would register, and run, the deleted script while the trash still lists it.
#[test]
fn a_rebuilt_index_does_not_adopt_a_deleted_scripts_leftover_record() {
    let p = provider();
    let s = ready(&p);
    let a = created(&p, &s, "A", "1");
    let keep = created(&p, &s, "K", "1");
    let live = p.env.dump(Area::Local);
    call(&p, &s, "delete_script", json!({"uuid": a}));
    put(
        &p,
        [format!("script/{a}"), format!("source/{a}")]
            .map(|k| (k.clone(), live[&k].clone()))
            .into_iter()
            .chain([("scripts/index".to_owned(), json!("garbage"))]),
    );
    let fresh = restarted(&p);
    block_on(fresh.ensure_registry());
    assert!(
        !fresh.env.registrations.borrow().contains_key(&a),
        "the deleted script runs again"
    );
    assert!(
        fresh.env.registrations.borrow().contains_key(&keep),
        "the live one was recovered"
    );
    let s2 = ready(&fresh);
    let listed = call(&fresh, &s2, "list_scripts", json!({}));
    let uuids: Vec<&str> = listed["structuredContent"]["scripts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["uuid"].as_str().unwrap())
        .collect();
    assert_eq!(uuids, [keep.as_str()]);
}

/// A purge is a `set` (the script leaves the trash's list and the budgets) then a `remove` of its
/// keys. Stopped in between, its trash entry, history and values were listed nowhere, so no
/// later purge reached them: "deleted forever" kept the source in storage for good. The next
/// purge now takes what no list names.
#[test]
fn a_purge_stopped_before_its_remove_leaves_nothing_for_good() {
    let p = provider();
    let s = ready(&p);
    let a = created(&p, &s, "A", "1");
    call(
        &p,
        &s,
        "write_script",
        json!({"uuid": a, "revision": 1, "source": script("A", "secret")}),
    );
    let live = created(&p, &s, "L", "1");
    assert_eq!(
        op(&p, json!({"op": "scripts.delete", "uuid": a}))["ok"],
        json!(true)
    );
    let before = p.env.dump(Area::Local);
    assert_eq!(
        op(&p, json!({"op": "trash.purge", "uuids": [a]}))["purged"],
        json!(1)
    );
    // The worker stopped before the remove: the keys are back, listed nowhere.
    put(
        &p,
        [
            format!("trash/{a}"),
            format!("history/{a}"),
            format!("history/{a}/1"),
        ]
        .map(|k| (k.clone(), before[&k].clone())),
    );
    let b = created(&p, &s, "B", "1");
    assert_eq!(
        op(&p, json!({"op": "scripts.delete", "uuid": b}))["ok"],
        json!(true)
    );
    assert_eq!(op(&p, json!({"op": "trash.purge"}))["purged"], json!(1));
    let keys: Vec<String> = p.env.dump(Area::Local).keys().cloned().collect();
    assert!(!keys.iter().any(|k| k.contains(&a)), "{keys:?}");
    // What the lists name is untouched: the live script and its history.
    assert!(keys.contains(&format!("script/{live}")) && keys.contains(&format!("source/{live}")));
    let g = call(&p, &s, "get_script", json!({"uuid": live}));
    assert_eq!(g["isError"], json!(false), "{g}");
}

/// The user turned a script off, then restores an older version of its code from the History
/// page: it stays off (that version was on, but restoring code must not turn back on a script
/// the user stopped). The agent's restore_script keeps it off too (R17: it turned it back on),
/// and its review says so; set_script_enabled is the agent's switch.
#[test]
fn a_history_restore_keeps_the_script_off_that_the_user_turned_off() {
    let p = provider();
    let s = ready(&p);
    let c = call(&p, &s, "write_script", json!({"source": script("H", "v1")}));
    let uuid = written_uuid(&c);
    call(
        &p,
        &s,
        "write_script",
        json!({"uuid": uuid, "revision": 1, "source": script("H", "v2")}),
    );
    let off = op(
        &p,
        json!({"op": "scripts.setEnabled", "uuid": uuid, "enabled": false}),
    );
    assert_eq!(off["ok"], json!(true), "{off}");
    let r = op(
        &p,
        json!({"op": "scripts.restore", "uuid": uuid, "revision": 1, "currentRevision": 3, "live": true}),
    );
    assert_eq!(r["ok"], json!(true), "{r}");
    let g = call(&p, &s, "get_script", json!({"uuid": uuid}));
    let got = &g["structuredContent"]["script"];
    assert_eq!(got["source"], json!(script("H", "v1")));
    assert_eq!(
        got["enabled"],
        json!(false),
        "the restore turned it back on"
    );
    assert!(
        p.env.registrations.borrow().get(&uuid).is_none(),
        "it is registered with Chrome"
    );
    // The agent's restore_script of revision 2 (which was on) brings its code back, not its
    // switch: the review says the script stays off, and it does.
    set_switch(&p, "review", true);
    let reviewed = std::cell::RefCell::new(Vec::new());
    let user = async {
        let r = loop {
            if let Some(r) = p.pending_reviews().into_iter().next() {
                break r;
            }
            lumo_userscripts::env::memory::yield_now().await;
        };
        reviewed.replace(r.effects.clone());
        assert!(p.decide(
            &r.id,
            lumo_userscripts::guard::review::Decision::Approve {
                allow_session: false
            }
        ));
    };
    let msg = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "restore_script", "arguments": {"uuid": uuid, "revision": 2, "current_revision": 4}}});
    let (out, ()) =
        futures::executor::block_on(futures::future::join(p.handle_mcp(&s, &msg), user));
    let a = reply(out)["result"].clone();
    assert_eq!(a["isError"], json!(false), "{a}");
    let g = call(&p, &s, "get_script", json!({"uuid": uuid}));
    let got = &g["structuredContent"]["script"];
    assert_eq!(got["source"], json!(script("H", "v2")));
    assert_eq!(
        got["enabled"],
        json!(false),
        "the agent's restore turned it back on"
    );
    assert!(p.env.registrations.borrow().get(&uuid).is_none());
    let effects = reviewed.borrow().join("\n");
    assert!(
        !effects.contains("Re-enables") && !effects.is_empty(),
        "the review said it would run: {effects}"
    );
}
