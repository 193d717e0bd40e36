//! Test helpers shared by the GM request tests (`gm`, `gm_menu`, `gm_tabs`): a stored,
//! registered script, a GM message as a page sends it, the answer it got, and a bounded wait.

use super::{Provider, Received};
use crate::env::memory::MemoryEnv;
use crate::scripts::{store, sync};
use futures::executor::block_on;
use serde_json::Value;

/// Stores and registers a script matching `https://example.com/*` with these metadata lines;
/// its uuid.
pub(super) fn script(p: &Provider<MemoryEnv>, name: &str, grants: &str) -> String {
    let src = format!(
        "// ==UserScript==\n// @name {name}\n// @match https://example.com/*\n{grants}// ==/UserScript==\n"
    );
    let snap = block_on(store::load_snapshot(&p.env)).unwrap();
    let c = block_on(store::create(&p.env, &snap, "user", &src, true, 1 << 20)).unwrap();
    block_on(p.sync_registration(
        &c.record.uuid,
        sync::desired_for(&c.record, &c.source),
        None,
    ));
    c.record.uuid
}

/// A GM request's wire text: `fields` plus the token, version and kind a page adds.
pub(super) fn gm_raw(token: &str, fields: Value) -> String {
    let mut m = fields.as_object().cloned().unwrap();
    m.insert("lumo".into(), token.into());
    m.insert("v".into(), 1.into());
    m.insert("kind".into(), "gm".into());
    Value::Object(m).to_string()
}

/// Runs `f` to its end, failing the test when it is still waiting after 10,000 steps: a wait
/// nothing will answer (test timers do not fire) would otherwise hang the test, not fail it.
pub(super) fn finish<F: std::future::Future>(f: F) -> F::Output {
    use futures::future::{select, Either};
    let bound = async {
        for _ in 0..10_000 {
            crate::env::memory::yield_now().await;
        }
    };
    match block_on(select(Box::pin(f), Box::pin(bound))) {
        Either::Left((out, _)) => out,
        Either::Right(_) => panic!("still waiting after 10,000 steps: nothing will answer it"),
    }
}

/// The answer a message got; anything else fails the test.
pub(super) fn answered(r: Received) -> Value {
    match r {
        Received::Answered(v) => v,
        other => panic!("{other:?}"),
    }
}

/// What the shell is told of tab events (`set_on_tabs`), in order: a recorder installed on `p`.
pub(super) fn tab_events_told(
    p: &Provider<MemoryEnv>,
) -> std::rc::Rc<std::cell::RefCell<Vec<bool>>> {
    let told = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let t = std::rc::Rc::clone(&told);
    p.set_on_tabs(Box::new(move |bound| t.borrow_mut().push(bound)));
    told
}
