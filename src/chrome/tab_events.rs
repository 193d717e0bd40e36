//! `chrome.tabs.onRemoved`: a tab that closes loses the menu commands its pages registered
//! (`gm::menu`) and the scripts' tab objects (`GM_saveTab`), and a tab a script opened tells
//! that script. Listened to only while the core
//! holds something bound to a tab (`Provider::tab_bound`, told through `set_on_tabs`), so a tab
//! closing elsewhere does not start the worker. No `onUpdated`: every navigation in the browser
//! is one, and whether a menu's page is still shown is asked of Chrome when the popup needs it
//! (`Env::document`). This file passes the tab id on and decides nothing.

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
    // Made once and never dropped: `follow(false)` can run inside it.
    static ON_REMOVED: Closure<dyn FnMut(JsValue)> = Closure::new(|tab: JsValue| {
        if let Some(id) = tab_id(&tab) {
            // The test build's trap in a tab listener (tests/e2e/trap.test.mjs): closing a tab
            // whose page, at a URL carrying the magic text, registered a menu command.
            #[cfg(feature = "test-trap")]
            if provider().menu_urls_of(id).iter().any(|u| u.contains("__lumo_test_trap_tab__")) {
                panic!("test trap (tab event)");
            }
            provider().tab_removed(id);
            // The scripts' tab objects it held, removed from session storage too.
            wasm_bindgen_futures::spawn_local(async { provider().store_tab_objects().await });
        }
    });
    static NOTHING: Closure<dyn FnMut()> = Closure::new(|| {});
    static LISTENING: Cell<bool> = const { Cell::new(false) };
}

/// Listens while `wanted` (the core's `tab_bound`), not otherwise. Chrome starts a stopped
/// worker for every event it has a listener for; a listener added after the worker's first turn
/// counts too, until it is removed (measured in Chromium 156).
pub fn follow(wanted: bool) {
    if LISTENING.with(Cell::get) == wanted {
        return;
    }
    LISTENING.with(|l| l.set(wanted));
    if let Some(e) = event("onRemoved") {
        let f = ON_REMOVED.with(|c| c.as_ref().clone());
        if wanted {
            e.add_listener(f.unchecked_ref());
        } else {
            e.remove_listener(f.unchecked_ref());
        }
    }
}

/// A worker that stopped while it listened left Chrome's registration behind: adding and removing
/// the listener drops it. Run off the path of the first message, so by then the core may have
/// asked for it: a registration it made is kept. Versions before this one also listened to
/// `onUpdated`; a registration of theirs is dropped the same way.
pub fn clear_stale() {
    if !LISTENING.with(Cell::get) {
        follow(true);
        follow(false);
    }
    if let Some(e) = event("onUpdated") {
        let f = NOTHING.with(|c| c.as_ref().clone());
        e.add_listener(f.unchecked_ref());
        e.remove_listener(f.unchecked_ref());
    }
}
