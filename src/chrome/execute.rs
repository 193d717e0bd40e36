//! `chrome.tabs.query`/`get`, `chrome.webNavigation.getFrame` (is a menu command's page still
//! there) and `chrome.userScripts.execute` for `try_script`: carries the call out and the answer
//! back as JSON; every decision (which tab, what the answer means) is the core's.

use super::api::UserScriptsApi;
use super::env::{settle, user_scripts_api, ChromeEnv};
use super::json as js_json;
use crate::env::{DocumentState, EnvError, Tab, Tabs};
use js_sys::Promise;
use serde_json::{json, Value};
use wasm_bindgen::prelude::*;

/// Chrome's answer is bounded by the wrapper in the page, but the tried code shares its world and
/// could inflate it: anything larger is refused before it is parsed.
const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = ["chrome", "tabs"], js_name = query, catch)]
    fn tabs_query(q: &JsValue) -> Result<Promise, JsValue>;

    #[wasm_bindgen(js_namespace = ["chrome", "tabs"], js_name = get, catch)]
    fn tabs_get(id: f64) -> Result<Promise, JsValue>;

    #[wasm_bindgen(js_namespace = ["chrome", "webNavigation"], js_name = getFrame, catch)]
    fn web_navigation_get_frame(details: &JsValue) -> Result<Promise, JsValue>;

    #[wasm_bindgen(js_namespace = ["chrome", "webNavigation"], js_name = getAllFrames, catch)]
    fn web_navigation_get_all_frames(details: &JsValue) -> Result<Promise, JsValue>;

    #[wasm_bindgen(method, catch)]
    fn execute(this: &UserScriptsApi, injection: &JsValue) -> Result<Promise, JsValue>;
}

/// A tab as Chrome describes it (`url` and `title` empty when the extension may not read them).
fn tab_of(t: &Value) -> Option<Tab> {
    Some(Tab {
        id: t.get("id")?.as_i64()?,
        url: t
            .get("url")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        title: t
            .get("title")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        last_accessed: t.get("lastAccessed").and_then(Value::as_f64).unwrap_or(0.0),
        incognito: t.get("incognito").and_then(Value::as_bool).unwrap_or(false),
    })
}

impl Tabs for ChromeEnv {
    async fn tabs(&self) -> Result<Vec<Tab>, EnvError> {
        let got = settle("tabs.query", tabs_query(&js_json::to_js(&json!({})))).await?;
        let Some(Value::Array(items)) = js_json::from_js(&got) else {
            return Err(EnvError("tabs.query returned no list".into()));
        };
        Ok(items.iter().filter_map(tab_of).collect())
    }

    async fn tab(&self, id: i64) -> Result<Tab, EnvError> {
        // Tab ids are small positive integers: exact as an f64.
        #[allow(clippy::cast_precision_loss)]
        let got = settle("tabs.get", tabs_get(id as f64)).await?;
        js_json::from_js(&got)
            .as_ref()
            .and_then(tab_of)
            .ok_or_else(|| EnvError("tabs.get returned no tab".into()))
    }

    async fn frame_urls(&self, tab_id: i64) -> Result<Vec<String>, EnvError> {
        let got = settle(
            "webNavigation.getAllFrames",
            web_navigation_get_all_frames(&js_json::to_js(&json!({ "tabId": tab_id }))),
        )
        .await?;
        // `null` for a tab Chrome knows nothing of: not "no frames", which the review would
        // read as "embeds no other site".
        let items = js_json::from_js(&got);
        items
            .as_ref()
            .and_then(Value::as_array)
            .map(|frames| {
                frames
                    .iter()
                    .filter_map(|f| f.get("url").and_then(Value::as_str))
                    .map(str::to_owned)
                    .collect()
            })
            .ok_or_else(|| EnvError("webNavigation.getAllFrames gave no frame list".into()))
    }

    async fn document(&self, id: &str) -> Result<DocumentState, EnvError> {
        let got = settle(
            "webNavigation.getFrame",
            web_navigation_get_frame(&js_json::to_js(&json!({ "documentId": id }))),
        )
        .await?;
        // `null` for no such document; otherwise its `documentLifecycle`.
        let Some(frame) = js_json::from_js(&got).filter(Value::is_object) else {
            return Ok(DocumentState::Gone);
        };
        Ok(
            match frame.get("documentLifecycle").and_then(Value::as_str) {
                Some("active") => DocumentState::Active,
                Some("pending_deletion") => DocumentState::Gone,
                // "prerender", "cached", or a state this build does not know: alive, not shown.
                _ => DocumentState::Inactive,
            },
        )
    }

    async fn execute(
        &self,
        tab_id: i64,
        all_frames: bool,
        world: &str,
        codes: &[String],
    ) -> Result<Value, EnvError> {
        let api = user_scripts_api()?;
        let js: Vec<Value> = codes.iter().map(|c| json!({ "code": c })).collect();
        let injection = js_json::to_js(&json!({
            "target": { "tabId": tab_id, "allFrames": all_frames },
            "world": "USER_SCRIPT",
            "worldId": world,
            "injectImmediately": true,
            "js": js,
        }));
        let got = settle("userScripts.execute", api.execute(&injection)).await?;
        if got.is_undefined() {
            return Ok(Value::Null);
        }
        // Measured before it is copied into the wasm, whose memory never shrinks.
        let text = js_json::text_within(&got, MAX_ANSWER_BYTES).ok_or_else(|| {
            EnvError(format!(
                "{}: over {MAX_ANSWER_BYTES} bytes",
                crate::env::ANSWER_TOO_LARGE
            ))
        })?;
        crate::text::parse_json(&text).map_err(|e| EnvError(e.to_string()))
    }
}
