//! `chrome.tabs.create/remove` and `chrome.notifications.create/clear` for `GM_openInTab` and
//! `GM_notification`, and the notification events. The core makes every argument
//! (`gm::tabs`); this file passes them on and the answers back, and decides nothing.

use super::env::{settle, ChromeEnv};
use super::{json as js_json, provider};
use crate::env::{Browser, EnvError};
use js_sys::{Function, Promise, Reflect};
use serde_json::Value;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::spawn_local;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = ["chrome", "tabs"], js_name = create, catch)]
    fn tabs_create(props: &JsValue) -> Result<Promise, JsValue>;
    #[wasm_bindgen(js_namespace = ["chrome", "tabs"], js_name = remove, catch)]
    fn tabs_remove(id: f64) -> Result<Promise, JsValue>;
}

/// `chrome.notifications.<name>`, looked up on use: missing without the permission.
fn notifications(name: &str) -> Result<(JsValue, Function), EnvError> {
    let api = super::api::CHROME
        .with(|c| Reflect::get(c, &JsValue::from_str("notifications")))
        .ok()
        .filter(JsValue::is_object)
        .ok_or_else(|| EnvError("chrome.notifications is not available".into()))?;
    let f = Reflect::get(&api, &JsValue::from_str(name))
        .ok()
        .and_then(|f| f.dyn_into::<Function>().ok())
        .ok_or_else(|| EnvError(format!("chrome.notifications.{name} is not available")))?;
    Ok((api, f))
}

fn call_promise(f: &Function, this: &JsValue, args: &[JsValue]) -> Result<Promise, JsValue> {
    let arr = js_sys::Array::new();
    for a in args {
        arr.push(a);
    }
    f.apply(this, &arr)?.dyn_into::<Promise>()
}

impl Browser for ChromeEnv {
    async fn create_tab(&self, props: &Value) -> Result<i64, EnvError> {
        let tab = settle("tabs.create", tabs_create(&js_json::to_js(props))).await?;
        js_json::from_js(&tab)
            .and_then(|t| t.get("id").and_then(Value::as_i64))
            .ok_or_else(|| EnvError("tabs.create returned no tab id".into()))
    }

    async fn remove_tab(&self, id: i64) -> Result<(), EnvError> {
        #[allow(clippy::cast_precision_loss)]
        settle("tabs.remove", tabs_remove(id as f64))
            .await
            .map(|_| ())
    }

    async fn create_notification(&self, id: &str, options: &Value) -> Result<(), EnvError> {
        let (api, f) = notifications("create")?;
        let p = call_promise(&f, &api, &[JsValue::from_str(id), js_json::to_js(options)]);
        settle("notifications.create", p).await.map(|_| ())
    }

    async fn clear_notification(&self, id: &str) -> Result<(), EnvError> {
        let (api, f) = notifications("clear")?;
        let p = call_promise(&f, &api, &[JsValue::from_str(id)]);
        settle("notifications.clear", p).await.map(|_| ())
    }
}

/// `notifications.onClicked` / `onClosed`, if this Chrome has them (the permission is in the
/// manifest). Both are in the loader's `early` list, so a click that wakes the worker is seen.
pub fn listen() {
    let event = |name: &str| -> Option<super::api::Event> {
        let n = super::api::CHROME
            .with(|c| Reflect::get(c, &JsValue::from_str("notifications")))
            .ok()
            .filter(JsValue::is_object)?;
        let e = Reflect::get(&n, &JsValue::from_str(name)).ok()?;
        e.is_object().then(|| e.unchecked_into())
    };
    if let Some(e) = event("onClicked") {
        super::add(
            &e,
            Closure::<dyn FnMut(JsValue)>::new(|id: JsValue| {
                if let Some(id) = id.as_string() {
                    spawn_local(async move { provider().notification_event(&id, true).await });
                }
            }),
        );
    }
    if let Some(e) = event("onClosed") {
        super::add(
            &e,
            Closure::<dyn FnMut(JsValue)>::new(|id: JsValue| {
                if let Some(id) = id.as_string() {
                    spawn_local(async move { provider().notification_event(&id, false).await });
                }
            }),
        );
    }
}
