//! The record of what was done: refusals cannot push a real write out of the audit log, and a
//! write interrupted between storage and its result still leaves an entry.

mod common;

use common::*;
use futures::executor::block_on;
use lumo_userscripts::env::memory::{yield_now, MemoryEnv};
use lumo_userscripts::env::Area;
use lumo_userscripts::guard::audit::{self, Entry, Journaled, INTERRUPTED, PENDING_KEY};
use lumo_userscripts::provider::Provider;
use lumo_userscripts::scripts::store;
use serde_json::json;

#[test]
fn twelve_hundred_refused_calls_do_not_wipe_a_real_write() {
    let p = provider();
    let s = ready(&p);
    let made = call(
        &p,
        &s,
        "write_script",
        json!({"source": script("Real", "")}),
    );
    let uuid = written_uuid(&made);
    refuse_cheaply(&p, &s, 1200);
    let log = block_on(audit::read_all(&p.env)).unwrap();
    assert!(
        log.iter()
            .any(|e| e.result == "ok" && e.target.as_deref() == Some(uuid.as_str())),
        "the write's entry was evicted by refusals"
    );
    assert!(
        log.iter()
            .filter(|e| e.result == "INVALID_ARGUMENTS")
            .count()
            >= 900
    );
}

/// A worker that stopped right after storing a script (the script's set carried the pending
/// entry, nothing after it ran), and the next worker over the same storage: that one, and the
/// uuid of the script whose write has no result yet.
fn stopped_mid_write() -> (Provider<MemoryEnv>, String) {
    let p = provider();
    let pending = pending_entry(1.0, "write_script", None);
    let snap = block_on(store::load_snapshot(&p.env)).unwrap();
    let c = block_on(store::create(
        &Journaled::new(&p.env, Some(pending)),
        &snap,
        HOST,
        &script("Stopped", ""),
        true,
        1 << 20,
    ))
    .unwrap();
    assert_eq!(
        p.env.dump(Area::Local)[PENDING_KEY]["target"],
        json!(c.record.uuid)
    );
    (next_worker(&p), c.record.uuid)
}

/// The host's write-ahead entry of a `tool` call at `at`, not yet finished.
fn pending_entry(at: f64, tool: &str, target: Option<String>) -> Entry {
    Entry {
        at,
        tool: tool.into(),
        caller: HOST.into(),
        result: String::new(),
        target,
        digest: "0".repeat(64),
        unchanged: false,
        from_trash: false,
        revision: None,
        purged: None,
        name: None,
        count: None,
    }
}

#[test]
fn a_write_stopped_before_its_result_is_finalized_as_interrupted() {
    // The next worker's first write settles the leftover first.
    let (q, stopped_uuid) = stopped_mid_write();
    let s = ready_on(&q);
    call(
        &q,
        &s,
        "write_script",
        json!({"source": script("Next", "")}),
    );
    let log = block_on(audit::read_all(&q.env)).unwrap();
    let stopped: Vec<_> = log
        .iter()
        .filter(|e| e.target.as_deref() == Some(stopped_uuid.as_str()))
        .collect();
    assert_eq!(stopped.len(), 1, "{log:?}");
    assert_eq!(stopped[0].result, INTERRUPTED);
    assert!(log.iter().any(|e| e.result == "ok"));
    assert_eq!(q.env.dump(Area::Local)[PENDING_KEY], json!({}));
    // At start-up the recovery finds nothing left to do.
    block_on(q.recover_interrupted_write());
    assert_eq!(block_on(audit::read_all(&q.env)).unwrap().len(), 2);
}

/// The next worker's popup lists the leftover at once, as INTERRUPTED, while the start-up
/// recovery still waits for the write lock (the first message's reconcile holds it): R9 saw
/// it appear 1.5 s after the first list.
#[test]
fn the_first_audit_list_shows_a_write_the_last_worker_left_unfinished() {
    let (q, stopped_uuid) = stopped_mid_write();
    let listed = block_on(async {
        let _held = q.write_lock().await;
        lumo_userscripts::control::handle(&q, &json!({"op": "audit.list"}))
            .await
            .value
    });
    let entries = listed["entries"].as_array().unwrap();
    assert!(
        entries
            .iter()
            .any(|e| e["result"] == INTERRUPTED && e["target"] == json!(stopped_uuid)),
        "{listed}"
    );
    assert_eq!(q.env.dump(Area::Local)[PENDING_KEY], json!({}));
    // The recovery, and the next write, find nothing left to do.
    block_on(q.recover_interrupted_write());
    let s = ready_on(&q);
    call(
        &q,
        &s,
        "write_script",
        json!({"source": script("Next", "")}),
    );
    let log = block_on(audit::read_all(&q.env)).unwrap();
    assert_eq!(
        log.iter().filter(|e| e.result == INTERRUPTED).count(),
        1,
        "{log:?}"
    );
}

/// The same leftover, but the next worker's first write is refused before it begins: it waited
/// for the write lock (held here, as the first message's reconcile holds it) while the user
/// switched writes off. Its entry is appended; the earlier worker's pending one stays in its
/// slot, and the start-up recovery records it as INTERRUPTED.
#[test]
fn a_refused_write_in_a_new_worker_leaves_the_earlier_workers_pending_entry() {
    let (q, stopped_uuid) = stopped_mid_write();
    let s = ready_on(&q);
    let msg = json!({"jsonrpc": "2.0", "id": 21, "method": "tools/call", "params": {"name": "write_script", "arguments": {"source": script("Queued", "")}}});
    let out = block_on(async {
        let held = q.write_lock().await;
        let mut queued = Box::pin(q.handle_mcp(&s, &msg));
        for _ in 0..50 {
            assert!(futures::poll!(queued.as_mut()).is_pending());
            yield_now().await;
        }
        lumo_userscripts::control::handle(
            &q,
            &json!({"op": "policy.setSwitch", "name": "writes", "value": false}),
        )
        .await;
        drop(held);
        queued.await
    });
    let r = reply(out)["result"].clone();
    assert_eq!(error_code(&r), Some("WRITE_DISABLED"), "{r}");
    assert_eq!(
        q.env.dump(Area::Local)[PENDING_KEY]["target"],
        json!(stopped_uuid),
        "the earlier worker's entry was wiped"
    );
    block_on(q.recover_interrupted_write());
    let log = block_on(audit::read_all(&q.env)).unwrap();
    assert!(
        log.iter()
            .any(|e| e.result == INTERRUPTED && e.target.as_deref() == Some(stopped_uuid.as_str())),
        "{log:?}"
    );
    assert!(log.iter().any(|e| e.result == "WRITE_DISABLED"), "{log:?}");
    assert_eq!(q.env.dump(Area::Local)[PENDING_KEY], json!({}));
}

/// `ready` for a provider that shares storage with another (the policy is already there).
fn ready_on(p: &Provider<MemoryEnv>) -> std::rc::Rc<lumo_userscripts::session::Session> {
    let s = open(p);
    initialize(p, &s, "2025-06-18");
    s
}

/// A tester filled storage until a write's record no longer fit: the write was stored and
/// answered `ok`, and once room came back the log said `INTERRUPTED`, with no revision (so no
/// Undo). It is recorded with its own result and revision.
#[test]
fn a_write_whose_record_did_not_fit_is_recorded_with_its_result_once_it_does() {
    let p = provider();
    let s = ready(&p);
    let made = call(
        &p,
        &s,
        "write_script",
        json!({"source": script("Full", "")}),
    );
    let uuid = written_uuid(&made);
    // The log's chunk the next entry goes to cannot be written; everything else can.
    let chunks: Vec<String> = p
        .env
        .dump(Area::Local)
        .keys()
        .filter(|k| {
            k.strip_prefix("audit/")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .cloned()
        .collect();
    assert!(!chunks.is_empty(), "no chunk of the log found");
    *p.env.fail_local_sets_holding.borrow_mut() = chunks;
    let off = call(
        &p,
        &s,
        "set_script_enabled",
        json!({"uuid": uuid, "enabled": false}),
    );
    assert_eq!(
        off["isError"],
        json!(false),
        "the write itself went through: {off}"
    );
    let revision = off["structuredContent"]["script"]["revision"].clone();
    p.env.fail_local_sets_holding.borrow_mut().clear();
    // The next write settles the slot first.
    let on = call(
        &p,
        &s,
        "set_script_enabled",
        json!({"uuid": uuid, "enabled": true}),
    );
    assert_eq!(on["isError"], json!(false), "{on}");
    let log = block_on(audit::read_all(&p.env)).unwrap();
    let offs: Vec<&Entry> = log
        .iter()
        .filter(|e| e.tool == "set_script_enabled" && e.target.as_deref() == Some(uuid.as_str()))
        .collect();
    assert_eq!(offs.len(), 2, "{log:?}");
    assert!(log.iter().all(|e| e.result != INTERRUPTED), "{log:?}");
    assert!(
        offs.iter().any(|e| e.result == "ok"
            && e.revision.map(serde_json::Value::from) == Some(revision.clone())),
        "the disabling write, revision {revision}, is recorded ok: {log:?}"
    );
}

/// Each successful write keeps the name it left the script with, so the log still says what was
/// written under which name after a later write renamed it (an agent's "Bank helper" renamed
/// "Dark mode" is not shown as "Dark mode" throughout); a refusal keeps none.
#[test]
fn each_write_keeps_the_name_it_left() {
    let p = provider();
    let s = ready(&p);
    let uuid = created(&p, &s, "Bank helper", "");
    let renamed = call(
        &p,
        &s,
        "write_script",
        json!({"uuid": uuid, "revision": 1, "source": script("Dark mode", "")}),
    );
    assert_eq!(renamed["isError"], json!(false), "{renamed}");
    let refused = call(
        &p,
        &s,
        "write_script",
        json!({"uuid": uuid, "revision": 1, "source": script("Stale", "")}),
    );
    assert_eq!(refused["isError"], json!(true), "{refused}");
    call(&p, &s, "delete_script", json!({"uuid": uuid}));
    let log = block_on(audit::read_all(&p.env)).unwrap();
    let mut names: Vec<(&str, &str, Option<&str>)> = log
        .iter()
        .map(|e| (e.tool.as_str(), e.result.as_str(), e.name.as_deref()))
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            ("delete_script", "ok", Some("Dark mode")),
            ("write_script", "CONFLICT", None),
            ("write_script", "ok", Some("Bank helper")),
            ("write_script", "ok", Some("Dark mode")),
        ]
    );
    // A long name is kept to 80 characters, so the log stays within its share of the storage.
    let long = "n".repeat(150);
    p.env.advance(1000.0);
    created(&p, &s, &long, "");
    let kept = block_on(audit::read_all(&p.env)).unwrap()[0].name.clone();
    assert_eq!(kept, Some(format!("{}…", "n".repeat(80))));
}

/// R15: an agent's delete cut off after its `set` (the script in the trash, its entry pending)
/// was listed INTERRUPTED with no Undo: its revision was read from a `script/` key, which a
/// delete's `set` does not hold. It is read from the trash copy, and Undo brings it back.
#[test]
fn a_delete_stopped_before_its_result_is_recorded_can_be_undone() {
    let p = provider();
    let s = ready(&p);
    let r = call(
        &p,
        &s,
        "write_script",
        json!({"source": script("Gone", "")}),
    );
    let uuid = written_uuid(&r);
    p.env.advance(1000.0);
    let pending = pending_entry(p.env.now.get(), "delete_script", Some(uuid.clone()));
    let snap = block_on(store::load_snapshot(&p.env)).unwrap();
    let actor = store::Actor {
        by: HOST,
        via: Some("delete_script"),
    };
    block_on(lumo_userscripts::scripts::trash::delete(
        &Journaled::new(&p.env, Some(pending.clone())),
        &snap,
        actor,
        &uuid,
        None,
    ))
    .unwrap();
    let q = next_worker(&p);
    block_on(q.recover_interrupted_write());
    let listed = block_on(lumo_userscripts::control::handle(
        &q,
        &json!({"op": "audit.list"}),
    ))
    .value;
    let entries = listed["entries"].as_array().unwrap();
    let i = entries
        .iter()
        .position(|e| e["tool"] == "delete_script" && e["result"] == INTERRUPTED)
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(
        listed["undoable"].as_array().unwrap().contains(&json!(i)),
        "{listed}"
    );
    let undo = json!({"op": "scripts.undo", "uuid": uuid, "caller": HOST, "at": pending.at});
    let r = block_on(lumo_userscripts::control::handle(&q, &undo)).value;
    assert_eq!(r["ok"], json!(true), "{r}");
    let live = block_on(store::load_snapshot(&q.env)).unwrap();
    assert!(live.records.iter().any(|r| r.uuid == uuid), "restored");
}
