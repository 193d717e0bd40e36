//! `chrome.tabs.onUpdated` / `onRemoved`: a tab that starts loading a page, or closes, loses the
//! menu commands its pages registered (`gm::menu`). Held by the loader from the worker's first
//! turn like every event `start` listens to; this file passes the tab id on and decides nothing.

use super::provider;
use js_sys::Reflect;
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

pub fn listen() {
    if let Some(e) = event("onUpdated") {
        super::add(
            &e,
            Closure::<dyn FnMut(JsValue, JsValue)>::new(|tab: JsValue, change: JsValue| {
                let loading = Reflect::get(&change, &JsValue::from_str("status"))
                    .ok()
                    .and_then(|s| s.as_string())
                    .is_some_and(|s| s == "loading");
                if let (true, Some(id)) = (loading, tab_id(&tab)) {
                    provider().menu_tab_gone(id);
                }
            }),
        );
    }
    if let Some(e) = event("onRemoved") {
        super::add(
            &e,
            Closure::<dyn FnMut(JsValue)>::new(|tab: JsValue| {
                if let Some(id) = tab_id(&tab) {
                    provider().tab_removed(id);
                }
            }),
        );
    }
}
