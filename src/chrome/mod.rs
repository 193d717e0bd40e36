//! The shell: binds Chrome's APIs and wires them to the core. It decides nothing — every decision
//! is a call into the core — and it is the only code that touches JS.
//!
//! [`start`] runs once the loader (`extension/sw.js`) has compiled the module, after the worker's
//! first turn. In that first turn the loader gave each event in its `early` list a listener of
//! its own, which holds what arrives until `start` has added the module's listeners; then it hands
//! the held events over in arrival order, so no cold-start message is lost. Hence every event
//! `start` listens to must be in that list (a new one is added there too), and `start` adds its
//! listeners before it returns.

mod api;
mod bridge;
mod browser;
mod channel;
mod env;
mod execute;
mod header_rules;
mod json;
mod ports;
mod redirects;
mod tab_events;
mod toggle_watch;
pub(crate) mod web;

use crate::control::{Effect, CONTROL_CHANNEL};
use crate::provider::Provider;
use env::ChromeEnv;
use js_sys::{Function, Reflect};
use serde_json::{json, Value};
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::spawn_local;

thread_local! {
    static PROVIDER: Rc<Provider<ChromeEnv>> = Rc::new(Provider::new(ChromeEnv));
}

fn provider() -> Rc<Provider<ChromeEnv>> {
    PROVIDER.with(Rc::clone)
}

/// A property read through one of `api::Props`'s getters, if it is a string.
fn string_of(obj: &JsValue, get: fn(&api::Props) -> Result<JsValue, JsValue>) -> Option<String> {
    get(obj.unchecked_ref()).ok().and_then(|v| v.as_string())
}

fn runtime_id() -> Option<String> {
    api::RUNTIME_ID.with(|v| v.as_string())
}

fn add<F: ?Sized + wasm_bindgen::closure::WasmClosure>(event: &api::Event, f: Closure<F>) {
    event.add_listener(f.as_ref().unchecked_ref());
    // Listeners live as long as the worker.
    f.forget();
}

/// Polls `f` once now, so the browser call it starts with is made before this function returns
/// (`spawn_local` would first poll it in a later microtask), then leaves the rest to the executor.
pub(crate) fn spawn_now(f: impl std::future::Future<Output = ()> + 'static) {
    let mut f = Box::pin(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    if f.as_mut().poll(&mut cx).is_pending() {
        spawn_local(f);
    }
}

/// Start-up work that no message needs waits this long, so the message that woke the worker is
/// answered first.
const START_WORK_DELAY_MS: u32 = 250;

/// Registers every listener before it returns: see the module docs.
#[wasm_bindgen(start)]
pub fn start() {
    // Before anything can match a URL: the core asks the browser's own engines.
    crate::web::install(&web::Browser);
    std::panic::set_hook(Box::new(|info| {
        api::console_error(&format!("lumo-userscripts panicked: {info}"));
    }));
    // Every first message (probe, port, page) needs the policy: its storage read is issued
    // first, so it runs while the rest of `start` adds listeners, and the message that woke the
    // worker waits on the policy lock instead of starting a read of its own.
    spawn_now(async { provider().warm_policy().await });
    // Before any fetch: header rules a worker stopped mid-fetch left (`header_rules`).
    spawn_now(header_rules::clear_stale());

    api::ON_MESSAGE_EXTERNAL.with(|e| {
        add(
            e,
            Closure::<dyn FnMut(JsValue, JsValue, Function) -> JsValue>::new(on_message_external),
        )
    });
    api::ON_CONNECT_EXTERNAL.with(|e| {
        add(
            e,
            Closure::<dyn FnMut(api::Port)>::new(ports::on_connect_external),
        )
    });
    api::ON_MESSAGE.with(|e| {
        add(
            e,
            Closure::<dyn FnMut(JsValue, JsValue, Function) -> JsValue>::new(on_message_internal),
        )
    });
    // Run reports from registered scripts (the userscript channel; hostile input).
    channel::listen();
    // Tab events are listened to only while something is bound to a tab (none in a fresh worker).
    provider().set_on_tabs(Box::new(tab_events::follow));
    // GM_notification's clicks and closes.
    browser::listen();
    // Keeps the provider's caches exact when storage changes by any other hand.
    api::ON_STORAGE_CHANGED.with(|e| {
        add(
            e,
            Closure::<dyn FnMut(JsValue, JsValue)>::new(on_storage_changed),
        )
    });
    // Chrome wipes registered user scripts when the extension is updated: re-register them.
    api::ON_INSTALLED.with(|e| {
        add(
            e,
            Closure::<dyn FnMut(JsValue)>::new(|_| {
                spawn_local(async {
                    let p = provider();
                    p.mark_registry_stale().await;
                    toggle_watch::ensure_registry().await;
                })
            }),
        )
    });

    provider().set_on_change(Box::new(refresh_badge));
    // Later, off the path of the message that woke the worker: settle reviews
    // the previous worker left behind, then reconcile registrations.
    gloo_timers::callback::Timeout::new(START_WORK_DELAY_MS, || {
        // What a worker stopped while listening to tab events or redirects left behind (such an
        // event meanwhile only starts this worker, which is already running, and reaches no
        // listener).
        tab_events::clear_stale();
        redirects::clear_stale();
        spawn_local(async {
            let p = provider();
            p.recover_interrupted_write().await;
            p.recover_interrupted_tries().await;
            p.resume_interrupted_reviews().await;
            toggle_watch::ensure_registry().await;
            // A recycled worker dials the bridge again if the user authorized its token.
            bridge::resume();
        })
    })
    .forget();
}

fn on_storage_changed(changes: JsValue, area: JsValue) {
    let Some(area) = area
        .as_string()
        .as_deref()
        .and_then(crate::env::Area::parse)
    else {
        return;
    };
    if !changes.is_object() {
        return;
    }
    // Only the values a cache holds are converted (`provider::watched`): the echo of a write
    // also carries the script's source and history, old and new.
    let mut values = serde_json::Map::new();
    for key in js_sys::Object::keys(changes.unchecked_ref::<js_sys::Object>()).iter() {
        let Some(key) = key.as_string() else {
            continue;
        };
        if crate::provider::watched(area, &key).is_none() {
            continue;
        }
        let change = Reflect::get(&changes, &JsValue::from_str(&key)).unwrap_or(JsValue::UNDEFINED);
        // A removed key has no new value: null, what the caches compare against.
        let new = match change.unchecked_ref::<api::Props>().new_value() {
            Ok(v) if !v.is_undefined() => json::from_js(&v).unwrap_or(Value::Null),
            _ => Value::Null,
        };
        values.insert(key, new);
    }
    if !values.is_empty() {
        provider().storage_changed(area, &values);
    }
}

/// L0. May answer asynchronously (`return true` keeps `sendResponse` alive across a storage read).
fn on_message_external(msg: JsValue, sender: JsValue, send_response: Function) -> JsValue {
    let sender_id = string_of(&sender, api::Props::id);
    // A probe longer than its bound is not copied into the wasm (any extension may send one).
    let text = json::text_bounded(&msg, crate::probe::MAX_PROBE_BYTES);
    #[cfg(feature = "test-trap")]
    if matches!(&text, json::Bounded::Whole(t) if t.contains("__lumo_test_trap_sync__")) {
        panic!("test trap (sync)");
    }
    // Polled at once: with the policy cached, the answer waits for no browser call and goes out
    // within this event.
    spawn_now(async move {
        #[cfg(feature = "test-trap")]
        if matches!(&text, json::Bounded::Whole(t) if t.contains("__lumo_test_trap_async__")) {
            // After a suspension: a trap in a task the executor runs, not in the listener.
            env::timeout(0.0).await;
            panic!("test trap (async)");
        }
        let p = provider();
        let reply = match text {
            json::Bounded::Whole(t) => p.probe(Some(&t), sender_id.as_deref()).await,
            json::Bounded::Over { len, .. } => p.probe_over(len),
            json::Bounded::NoJson => p.probe(None, sender_id.as_deref()).await,
        };
        // The caller may have gone away; nothing to do about it.
        let _ = send_response.call1(&JsValue::NULL, &json::text_to_js(&reply.to_json()));
        badge_now().await;
        toggle_watch::ensure_registry().await;
    });
    JsValue::TRUE
}

/// Control messages from this extension's own pages. Anything else is ignored (returning false
/// tells Chrome no answer is coming).
fn on_message_internal(msg: JsValue, sender: JsValue, send_response: Function) -> JsValue {
    let Some(own_id) = runtime_id() else {
        return JsValue::FALSE;
    };
    let from_own_page = crate::control::is_own_page(
        &own_id,
        string_of(&sender, api::Props::id).as_deref(),
        string_of(&sender, api::Props::url).as_deref(),
    );
    if !from_own_page || string_of(&msg, api::Props::channel).as_deref() != Some(CONTROL_CHANNEL) {
        return JsValue::FALSE;
    }
    let Some(value) = json::from_js(&msg) else {
        return JsValue::FALSE;
    };
    spawn_local(async move {
        let p = provider();
        let reply = crate::control::handle(&p, &value).await;
        for effect in &reply.effects {
            match effect {
                Effect::Notify { sessions, message } => {
                    sessions.iter().for_each(|id| ports::post(*id, message))
                }
                Effect::Close { sessions, reason } => {
                    sessions.iter().for_each(|id| ports::close(*id, reason))
                }
                Effect::DialBridge => bridge::dial_authorized(),
                Effect::CloseBridge { code, reason } => bridge::close(*code, reason),
                Effect::BridgeTools { writes } => bridge::tools(*writes),
            }
        }
        let _ = send_response.call1(&JsValue::NULL, &json::to_js(&reply.value));
        refresh_badge();
        toggle_watch::ensure_registry().await;
    });
    JsValue::TRUE
}

thread_local! {
    static BADGE: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// The action badge: the number of open sessions, or `!` while an approval or a review waits.
/// Chrome is called only when the badge changes.
pub fn refresh_badge() {
    spawn_local(badge_now());
}

/// `refresh_badge` within a task already running (no task of its own to schedule).
async fn badge_now() {
    let crate::badge::Badge { text, color } = provider().badge().await;
    if BADGE.with(|b| b.borrow().as_deref() == Some(text.as_str())) {
        return;
    }
    BADGE.with(|b| *b.borrow_mut() = Some(text.clone()));
    let _ = api::set_badge_background_color(&json::to_js(&json!({ "color": color })));
    let _ = api::set_badge_text(&json::to_js(&json!({ "text": text })));
}
