//! What leaves the trash for good is recorded before it goes: the user's "Delete forever" and
//! "Empty trash", and what the trash deletes by itself (a script's 30 days over, the oldest
//! pushed out of a full trash). A worker stopped right after the purge's `set` leaves the record
//! pending, and the next worker records it as INTERRUPTED; the record names the script, never
//! holds its source.

mod common;

use common::*;
use futures::executor::block_on;
use lumo_userscripts::control;
use lumo_userscripts::env::memory::{yield_now, MemoryEnv};
use lumo_userscripts::env::Area;
use lumo_userscripts::guard::audit::{self, Entry, INTERRUPTED};
use lumo_userscripts::provider::Provider;
use lumo_userscripts::scripts::trash::{MAX_TRASH, TRASH_INDEX_KEY};
use serde_json::{json, Value};

const SECRET: &str = "MARKER-trash-5ecret";
const DAY: f64 = 24.0 * 3600.0 * 1000.0;

fn op(p: &Provider<MemoryEnv>, v: Value) -> Value {
    block_on(control::handle(p, &v)).value
}

fn saved(p: &Provider<MemoryEnv>, name: &str) -> String {
    let c = op(
        p,
        json!({"op": "scripts.save", "source": script(name, &format!("// {SECRET}"))}),
    );
    assert_eq!(c["ok"], json!(true), "{c}");
    c["result"]["script"]["uuid"].as_str().unwrap().to_owned()
}

fn deleted(p: &Provider<MemoryEnv>, uuid: &str) {
    let r = op(p, json!({"op": "scripts.delete", "uuid": uuid}));
    assert_eq!(r["ok"], json!(true), "{r}");
}

/// Runs the page's `msg` and stops the worker (drops the call) right after the `set` that
/// writes the trash index: the scripts are gone for good, nothing after that `set` ran.
fn stopped_after_the_purge(p: &Provider<MemoryEnv>, msg: &Value) {
    let before = p.env.storage_log.borrow().len();
    let purged = || {
        p.env.storage_log.borrow()[before..]
            .iter()
            .any(|(area, keys)| *area == Area::Local && keys.iter().any(|k| k == TRASH_INDEX_KEY))
    };
    p.env.get_yields.set(1);
    block_on(async {
        let mut running = Box::pin(control::handle(p, msg));
        for _ in 0..10_000 {
            if purged() {
                return;
            }
            assert!(
                futures::poll!(running.as_mut()).is_pending(),
                "it finished before it purged"
            );
            yield_now().await;
        }
        panic!("never purged");
    });
    p.env.get_yields.set(0);
    assert!(purged());
}

/// The next worker, over the same storage, after its start-up recovery.
fn next_worker(p: &Provider<MemoryEnv>) -> Provider<MemoryEnv> {
    let q = Provider::new(MemoryEnv::new());
    *q.env.areas.borrow_mut() = p.env.areas.borrow().clone();
    q.env.now.set(p.env.now.get());
    block_on(q.recover_interrupted_write());
    q
}

fn log(p: &Provider<MemoryEnv>) -> Vec<Entry> {
    block_on(audit::read_all(&p.env)).unwrap()
}

fn purges(p: &Provider<MemoryEnv>) -> Vec<Entry> {
    log(p)
        .into_iter()
        .filter(|e| e.tool == "purge_trash")
        .collect()
}

/// The audit's keys never hold a script's source.
fn no_source_in_the_log(p: &Provider<MemoryEnv>) {
    for (k, v) in p.env.dump(Area::Local) {
        if k.starts_with("audit") {
            assert!(!v.to_string().contains(SECRET), "{k}: {v}");
        }
    }
}

fn gone_for_good(p: &Provider<MemoryEnv>, uuid: &str) {
    assert!(
        !p.env
            .dump(Area::Local)
            .keys()
            .any(|k| k == &format!("trash/{uuid}")),
        "{uuid} still in the trash"
    );
}

/// "Delete forever", the worker stopped after the purge's `set` and before its audit entry:
/// before, the script was gone for good with no record at all.
#[test]
fn delete_forever_stopped_after_its_purge_is_recorded_as_interrupted() {
    let p = provider();
    let uuid = saved(&p, "Doomed");
    deleted(&p, &uuid);
    stopped_after_the_purge(&p, &json!({"op": "trash.purge", "uuids": [uuid]}));
    let q = next_worker(&p);
    gone_for_good(&q, &uuid);
    let got = purges(&q);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        (
            got[0].caller.as_str(),
            got[0].result.as_str(),
            got[0].target.as_deref()
        ),
        ("user", INTERRUPTED, Some(uuid.as_str()))
    );
    // Settled once: the slot is cleared.
    assert_eq!(q.env.dump(Area::Local)[audit::PENDING_KEY], json!({}));
    block_on(q.recover_interrupted_write());
    assert_eq!(purges(&q).len(), 1);
}

/// "Empty trash" records each script it deletes for good by name, so the log says what a click
/// took (the scripts being gone, nothing else can); before, one entry with no target. With
/// nothing left to delete, the click is still recorded, once, without a target.
#[test]
fn empty_trash_records_each_script_it_takes_by_name() {
    let p = provider();
    let names = ["First", "Second", "Third"];
    let uuids: Vec<String> = names.iter().map(|n| saved(&p, n)).collect();
    for u in &uuids {
        deleted(&p, u);
    }
    let kept = saved(&p, "Still live");
    let r = op(&p, json!({"op": "trash.purge", "listed": uuids}));
    assert_eq!(r["purged"], json!(3), "{r}");
    let mut got: Vec<(String, String, String, String)> = purges(&p)
        .into_iter()
        .map(|e| {
            let g = e.purged.expect("named");
            (e.target.unwrap_or_default(), g.name, g.why, e.result)
        })
        .collect();
    got.sort();
    let mut want: Vec<(String, String, String, String)> = uuids
        .iter()
        .zip(names)
        .map(|(u, n)| {
            (
                u.clone(),
                n.to_owned(),
                "deletedForever".to_owned(),
                "ok".to_owned(),
            )
        })
        .collect();
    want.sort();
    assert_eq!(got, want);
    assert!(purges(&p).iter().all(|e| e.caller == "user"));
    assert!(!purges(&p)
        .iter()
        .any(|e| e.target.as_deref() == Some(kept.as_str())));
    no_source_in_the_log(&p);

    let r = op(&p, json!({"op": "trash.purge", "listed": []}));
    assert_eq!(r["purged"], json!(0), "{r}");
    let last = log(&p).into_iter().next().unwrap();
    assert_eq!(
        (last.tool.as_str(), last.target, last.purged),
        ("purge_trash", None, None)
    );
    assert_eq!(purges(&p).len(), 4);
}

/// "Empty trash" stopped after its purge: every script it took is recorded, by name, as
/// INTERRUPTED by the next worker.
#[test]
fn empty_trash_stopped_after_its_purge_names_every_script_it_took() {
    let p = provider();
    let uuids: Vec<String> = ["One", "Two"].iter().map(|n| saved(&p, n)).collect();
    for u in &uuids {
        deleted(&p, u);
    }
    stopped_after_the_purge(&p, &json!({"op": "trash.purge", "listed": uuids}));
    let q = next_worker(&p);
    let mut got: Vec<(String, String)> = purges(&q)
        .into_iter()
        .map(|e| (e.purged.expect("named").name, e.result))
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            ("One".to_owned(), INTERRUPTED.to_owned()),
            ("Two".to_owned(), INTERRUPTED.to_owned())
        ]
    );
}

/// "Delete forever" whose record cannot be stored first deletes nothing.
#[test]
fn delete_forever_whose_record_cannot_be_stored_deletes_nothing() {
    let p = provider();
    let uuid = saved(&p, "Kept");
    deleted(&p, &uuid);
    *p.env.fail_local_writes.borrow_mut() = Some("QUOTA_BYTES quota exceeded".into());
    let r = op(&p, json!({"op": "trash.purge", "uuids": [uuid]}));
    assert_eq!(r["ok"], json!(false), "{r}");
    *p.env.fail_local_writes.borrow_mut() = None;
    assert!(p
        .env
        .dump(Area::Local)
        .contains_key(&format!("trash/{uuid}")));
}

/// A script's 30 days in the trash are over: the trash deletes it for good, recorded by the
/// provider itself (`lumo`), naming the script and why, without its source.
#[test]
fn an_expired_script_leaves_the_trash_with_a_record_naming_it() {
    let p = provider();
    let old = saved(&p, "Old helper");
    let kept = saved(&p, "Recent");
    deleted(&p, &old);
    p.env.advance(20.0 * DAY);
    deleted(&p, &kept);
    p.env.advance(10.5 * DAY);
    let l = op(&p, json!({"op": "trash.list"}));
    assert_eq!(l["scripts"].as_array().unwrap().len(), 1, "{l}");
    gone_for_good(&p, &old);
    let got = purges(&p);
    assert_eq!(got.len(), 1, "{got:?}");
    let e = &got[0];
    assert_eq!(
        (e.caller.as_str(), e.result.as_str(), e.target.as_deref()),
        ("lumo", "ok", Some(old.as_str()))
    );
    let purged = e.purged.as_ref().expect("names the script");
    assert_eq!(
        (purged.name.as_str(), purged.why.as_str()),
        ("Old helper", "expired")
    );
    // Recorded once: listing again deletes and records nothing more.
    op(&p, json!({"op": "trash.list"}));
    assert_eq!(purges(&p).len(), 1);
    no_source_in_the_log(&p);
    // Not something Undo offers.
    let a = op(&p, json!({"op": "audit.list"}));
    let at = a["entries"]
        .as_array()
        .unwrap()
        .iter()
        .position(|x| x["tool"] == "purge_trash")
        .unwrap();
    assert!(
        !a["undoable"].as_array().unwrap().contains(&json!(at)),
        "{a}"
    );
}

/// The sweep of the expired, the worker stopped after its `set`: each script is recorded, by
/// name, as INTERRUPTED by the next worker.
#[test]
fn an_expiry_stopped_after_its_purge_is_recorded_as_interrupted() {
    let p = provider();
    let a = saved(&p, "First");
    let b = saved(&p, "Second");
    deleted(&p, &a);
    deleted(&p, &b);
    p.env.advance(31.0 * DAY);
    stopped_after_the_purge(&p, &json!({"op": "trash.list"}));
    let q = next_worker(&p);
    gone_for_good(&q, &a);
    gone_for_good(&q, &b);
    let mut got: Vec<(String, String, String, String)> = purges(&q)
        .into_iter()
        .map(|e| {
            let pu = e.purged.unwrap();
            (e.target.unwrap(), e.result, pu.name, pu.why)
        })
        .collect();
    got.sort();
    let mut want = vec![
        (a, INTERRUPTED.into(), "First".into(), "expired".into()),
        (b, INTERRUPTED.into(), "Second".into(), "expired".into()),
    ];
    want.sort();
    assert_eq!(got, want);
    no_source_in_the_log(&q);
}

/// A delete deletes for good, in its own `set`, what expired meanwhile: each is recorded beside
/// the delete, pending in that `set`, so a stop right after it loses none of them.
#[test]
fn what_a_delete_sweeps_out_of_the_trash_is_recorded_with_it() {
    let p = provider();
    let s = ready(&p);
    let old = saved(&p, "Expired one");
    deleted(&p, &old);
    p.env.advance(31.0 * DAY);
    let theirs = created(&p, &s, "Theirs", "1");
    // An agent's delete: it sweeps the expired one (the provider's doing, not the agent's).
    let r = call(&p, &s, "delete_script", json!({"uuid": theirs}));
    assert!(error_code(&r).is_none(), "{r}");
    gone_for_good(&p, &old);
    let got = purges(&p);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        (got[0].caller.as_str(), got[0].target.as_deref()),
        ("lumo", Some(old.as_str()))
    );
    assert_eq!(got[0].purged.as_ref().unwrap().why, "expired");
    assert!(log(&p)
        .iter()
        .any(|e| e.tool == "delete_script" && e.caller == HOST && e.result == "ok"));

    // The same, stopped right after the delete's `set`.
    let p = provider();
    let old = saved(&p, "Expired two");
    deleted(&p, &old);
    p.env.advance(31.0 * DAY);
    let mine = saved(&p, "Mine");
    stopped_after_the_purge(&p, &json!({"op": "scripts.delete", "uuid": mine}));
    let q = next_worker(&p);
    gone_for_good(&q, &old);
    let got: Vec<(String, String, String)> = log(&q)
        .into_iter()
        .filter(|e| e.result == INTERRUPTED)
        .map(|e| (e.tool, e.caller, e.target.unwrap()))
        .collect();
    assert!(
        got.contains(&("purge_trash".into(), "lumo".into(), old.clone())),
        "{got:?}"
    );
    assert!(
        got.contains(&("delete_script".into(), "user".into(), mine.clone())),
        "{got:?}"
    );
}

/// The user's delete into a full trash pushes the oldest out for good: recorded as "trash full".
#[test]
fn the_oldest_pushed_out_of_a_full_trash_is_recorded() {
    let p = provider();
    let mut made = Vec::new();
    for n in 0..=MAX_TRASH {
        made.push(saved(&p, &format!("Script {n}")));
    }
    for u in &made {
        deleted(&p, u);
        p.env.advance(1.0);
    }
    gone_for_good(&p, &made[0]);
    let got = purges(&p);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].target.as_deref(), Some(made[0].as_str()));
    let purged = got[0].purged.as_ref().unwrap();
    assert_eq!(
        (purged.name.as_str(), purged.why.as_str()),
        ("Script 0", "trashFull")
    );
    no_source_in_the_log(&p);
}
