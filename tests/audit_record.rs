//! The record of what was done: refusals cannot push a real write out of the audit log, and a
//! write interrupted between storage and its result still leaves an entry.

mod common;

use common::*;
use futures::executor::block_on;
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
    let uuid = made["structuredContent"]["script"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    for i in 0..1200 {
        // Cheap: refused at argument parsing, no rate-limit slot spent.
        let r = call(
            &p,
            &s,
            "delete_script",
            json!({"uuid": format!("nope-{i}")}),
        );
        assert_eq!(error_code(&r), Some("INVALID_ARGUMENTS"));
    }
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

#[test]
fn a_write_stopped_before_its_result_is_finalized_as_interrupted() {
    let p = provider();
    let s = ready(&p);
    // A worker that stopped right after storing a script: the script's set carried the
    // pending entry, nothing after it ran.
    let pending = Entry {
        at: 1.0,
        tool: "write_script".into(),
        caller: HOST.into(),
        result: String::new(),
        target: None,
        digest: "0".repeat(64),
        unchanged: false,
        from_trash: false,
    };
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
    // The next worker, over the same storage: its first write settles the leftover first.
    let q = Provider::new(lumo_userscripts::env::memory::MemoryEnv::new());
    *q.env.areas.borrow_mut() = p.env.areas.borrow().clone();
    q.env.uuid_counter.set(p.env.uuid_counter.get());
    drop(s);
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
        .filter(|e| e.target.as_deref() == Some(c.record.uuid.as_str()))
        .collect();
    assert_eq!(stopped.len(), 1, "{log:?}");
    assert_eq!(stopped[0].result, INTERRUPTED);
    assert!(log.iter().any(|e| e.result == "ok"));
    assert_eq!(q.env.dump(Area::Local)[PENDING_KEY], json!({}));
    // At start-up the recovery finds nothing left to do.
    block_on(q.recover_interrupted_write());
    assert_eq!(block_on(audit::read_all(&q.env)).unwrap().len(), 2);
}

/// The same leftover, but the next worker's first write is refused before it begins: it waited
/// for the write lock (held here, as the first message's reconcile holds it) while the user
/// switched writes off. Its entry is appended; the earlier worker's pending one stays in its
/// slot, and the start-up recovery records it as INTERRUPTED.
#[test]
fn a_refused_write_in_a_new_worker_leaves_the_earlier_workers_pending_entry() {
    let p = provider();
    let pending = Entry {
        at: 1.0,
        tool: "write_script".into(),
        caller: HOST.into(),
        result: String::new(),
        target: None,
        digest: "0".repeat(64),
        unchanged: false,
        from_trash: false,
    };
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
    let q = Provider::new(lumo_userscripts::env::memory::MemoryEnv::new());
    *q.env.areas.borrow_mut() = p.env.areas.borrow().clone();
    q.env.uuid_counter.set(p.env.uuid_counter.get());
    let s = ready_on(&q);
    let msg = json!({"jsonrpc": "2.0", "id": 21, "method": "tools/call", "params": {"name": "write_script", "arguments": {"source": script("Queued", "")}}});
    let out = block_on(async {
        let held = q.write_lock().await;
        let mut queued = Box::pin(q.handle_mcp(&s, &msg));
        for _ in 0..50 {
            assert!(futures::poll!(queued.as_mut()).is_pending());
            yield_once().await;
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
        json!(c.record.uuid),
        "the earlier worker's entry was wiped"
    );
    block_on(q.recover_interrupted_write());
    let log = block_on(audit::read_all(&q.env)).unwrap();
    assert!(
        log.iter().any(|e| e.result == INTERRUPTED
            && e.target.as_deref() == Some(c.record.uuid.as_str())),
        "{log:?}"
    );
    assert!(log.iter().any(|e| e.result == "WRITE_DISABLED"), "{log:?}");
    assert_eq!(q.env.dump(Area::Local)[PENDING_KEY], json!({}));
}

/// Lets the executor run other work once (a pending poll that wakes itself).
async fn yield_once() {
    let mut done = false;
    futures::future::poll_fn(|cx| {
        if done {
            std::task::Poll::Ready(())
        } else {
            done = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
    .await;
}

/// `ready` for a provider that shares storage with another (the policy is already there).
fn ready_on(
    p: &Provider<lumo_userscripts::env::memory::MemoryEnv>,
) -> std::rc::Rc<lumo_userscripts::session::Session> {
    let s = open(p);
    initialize(p, &s, "2025-06-18");
    s
}
