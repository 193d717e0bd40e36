//! `chrome.tabs.onUpdated` / `onRemoved`: a tab that starts loading a page, or closes, loses the
//! menu commands its pages registered (`gm::menu`), and a tab a script opened tells that script.
//! Listened to only while the core holds something bound to a tab (`Provider::tab_bound`, told
//! through `set_on_tabs`), so a navigation elsewhere does not start the worker. This file passes
//! the tab id on and decides nothing.

use super::provider;
use js_sys::Reflect;
use std::cell::Cell;
use wasm_bindgen::prelude::*;

fn event(name: &str) -> Option<super::api::Event> {
    let e = super::api::CHROME.with(|c| {
        Reflect::get(c, &JsValue::from_str("tabs"))
            .and_then(|t| Reflect::get(&t, &JsValue::from_str(name)))
            .ok()
    })?;
    e.is_object().then(|| e.unchecked_into())
}

fn tab_id(v: &JsValue) -> Option<i64> {
    let n = v.as_f64()?;
    if n.fract() != 0.0 || n.abs() >= 9.0e15 {
        return None;
    }
    #[allow(clippy::cast_possible_truncation)]
    Some(n as i64)
}

thread_local! {
    // Made once and never dropped: `follow(false)` can run inside one of them.
    static ON_UPDATED: Closure<dyn FnMut(JsValue, JsValue)> =
        Closure::new(|tab: JsValue, change: JsValue| {
            // The test build's trap in a tab listener (tests/e2e/trap.test.mjs): a navigation
            // to a URL carrying the magic text.
            #[cfg(feature = "test-trap")]
            if Reflect::get(&change, &JsValue::from_str("url"))
                .ok()
                .and_then(|u| u.as_string())
                .is_some_and(|u| u.contains("__lumo_test_trap_tab__"))
            {
                panic!("test trap (tab event)");
            }
            let loading = Reflect::get(&change, &JsValue::from_str("status"))
                .ok()
                .and_then(|s| s.as_string())
                .is_some_and(|s| s == "loading");
            if let (true, Some(id)) = (loading, tab_id(&tab)) {
                provider().menu_tab_gone(id);
            }
        });
    static ON_REMOVED: Closure<dyn FnMut(JsValue)> = Closure::new(|tab: JsValue| {
        if let Some(id) = tab_id(&tab) {
            provider().tab_removed(id);
        }
    });
    static LISTENING: Cell<bool> = const { Cell::new(false) };
}

/// Listens to both events while `wanted` (the core's `tab_bound`), not otherwise. Chrome
/// starts a stopped worker for every event it has a listener for, and every navigation in the
/// browser is a `tabs.onUpdated`; a listener added after the worker's first turn counts too,
/// until it is removed (measured in Chromium 156).
pub fn follow(wanted: bool) {
    if LISTENING.with(Cell::get) == wanted {
        return;
    }
    LISTENING.with(|l| l.set(wanted));
    for (name, f) in [
        ("onUpdated", ON_UPDATED.with(|c| c.as_ref().clone())),
        ("onRemoved", ON_REMOVED.with(|c| c.as_ref().clone())),
    ] {
        if let Some(e) = event(name) {
            if wanted {
                e.add_listener(f.unchecked_ref());
            } else {
                e.remove_listener(f.unchecked_ref());
            }
        }
    }
}

/// A worker that stopped while it listened left Chrome's registration behind: adding and removing
/// the listeners drops it. Run off the path of the first message, so by then the core may have
/// asked for them: a registration it made is kept.
pub fn clear_stale() {
    if !LISTENING.with(Cell::get) {
        follow(true);
        follow(false);
    }
}
