//! `chrome.runtime.onUserScriptMessage`: messages from USER_SCRIPT worlds configured with
//! messaging (see `crate::channel` for the trust boundary). The loader holds this event
//! from the worker's first turn (`early` in `extension/sw.js`), so a report that wakes the worker
//! is not lost. This file carries the message's JSON text and
//! what Chrome says about its sender into the core and decides nothing. It answers what the core
//! answers (a GM request's result) and `null` otherwise, so a hostile script learns nothing
//! from the answer to anything but its own accepted GM requests.

use super::{api, json, provider, string_of};
use crate::provider::Sender;
use js_sys::{Function, Reflect};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::spawn_local;

fn int_prop(obj: &JsValue, key: &str) -> Option<i64> {
    let n = Reflect::get(obj, &JsValue::from_str(key)).ok()?.as_f64()?;
    // Chrome's ids are small integers; anything else is not an id.
    (n.fract() == 0.0 && n.abs() < 9.0e15).then(|| {
        #[allow(clippy::cast_possible_truncation)]
        let i = n as i64;
        i
    })
}

/// The message's token alone (its `lumo` string, if short enough to be one), read before the
/// rest is converted so the core can charge the message to its script; "" for anything else.
fn token_hint(msg: &JsValue) -> String {
    if !msg.is_object() {
        return String::new();
    }
    Reflect::get(msg, &JsValue::from_str("lumo"))
        .ok()
        .filter(|v| {
            v.dyn_ref::<js_sys::JsString>()
                .is_some_and(|s| s.length() <= 256)
        })
        .and_then(|v| v.as_string())
        .unwrap_or_default()
}

fn on_user_script_message(msg: JsValue, sender: JsValue, send_response: Function) -> JsValue {
    let tab = Reflect::get(&sender, &JsValue::from_str("tab")).unwrap_or(JsValue::UNDEFINED);
    let from = Sender {
        url: string_of(&sender, api::Props::url),
        frame_id: int_prop(&sender, "frameId"),
        tab_id: if tab.is_object() {
            int_prop(&tab, "id")
        } else {
            None
        },
        document_id: string_of(&sender, api::Props::document_id),
        tab_index: if tab.is_object() {
            int_prop(&tab, "index")
        } else {
            None
        },
        window_id: if tab.is_object() {
            int_prop(&tab, "windowId")
        } else {
            None
        },
        incognito: tab.is_object()
            && Reflect::get(&tab, &JsValue::from_str("incognito"))
                .ok()
                .and_then(|v| v.as_bool())
                .unwrap_or(false),
    };
    let hint = token_hint(&msg);
    spawn_local(async move {
        // JSON.stringify of what Chrome delivered, done only if the core admits the message, and
        // copied into the wasm only if it is within the channel's bound (one over it is dropped
        // as unreadable); the core bounds the text again before parsing it.
        let raw = move || json::text_within(&msg, crate::channel::message::MAX_MESSAGE_BYTES);
        let received = provider()
            .user_script_message_hinted(Some(hint), raw, from)
            .await;
        // A GM request gets its answer (a refusal the script can act on too); anything else an
        // empty one, so the sender's promise settles (a dropped GM request reads as "no answer"
        // to the script).
        // Its long strings (an answer's body) go to JavaScript without a JSON text copy.
        let answer = received.answer().map_or(JsValue::NULL, json::owned_to_js);
        let _ = send_response.call1(&JsValue::NULL, &answer);
        // A value change owes "synced" once registered (`provider::ValueChange`): stored now,
        // else the next worker would reconcile every script at its start.
        super::toggle_watch::ensure_registry().await;
    });
    // The answer comes after an await: keep the message channel open.
    JsValue::TRUE
}

/// Adds the listener, if this Chrome has the event (Chrome 135+ with the userScripts permission).
pub fn listen() {
    let event = super::api::CHROME.with(|c| {
        Reflect::get(c, &JsValue::from_str("runtime"))
            .and_then(|r| Reflect::get(&r, &JsValue::from_str("onUserScriptMessage")))
            .ok()
    });
    let Some(event) = event.filter(|e| {
        e.is_object()
            && Reflect::get(e, &JsValue::from_str("addListener")).is_ok_and(|f| f.is_function())
    }) else {
        super::api::console_warn(
            "lumo-userscripts: chrome.runtime.onUserScriptMessage is missing; scripts cannot report runs",
        );
        return;
    };
    super::add(
        event.unchecked_ref(),
        Closure::<dyn FnMut(JsValue, JsValue, Function) -> JsValue>::new(on_user_script_message),
    );
}
