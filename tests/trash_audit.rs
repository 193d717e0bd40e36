//! What leaves the trash for good is recorded before it goes: the user's "Delete forever" and
//! "Empty trash". A worker stopped right after the purge's `set` leaves the record pending, and
//! the next worker records it as INTERRUPTED.

mod common;

use common::*;
use futures::executor::block_on;
use lumo_userscripts::control;
use lumo_userscripts::env::memory::{yield_now, MemoryEnv};
use lumo_userscripts::env::Area;
use lumo_userscripts::guard::audit::{self, Entry, INTERRUPTED};
use lumo_userscripts::provider::Provider;
use lumo_userscripts::scripts::trash::TRASH_INDEX_KEY;
use serde_json::{json, Value};

const SECRET: &str = "MARKER-trash-5ecret";

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
