//! The headers `fetch` may not set that the core gives to the browser
//! (`env::HttpRequest::browser_headers`: a script's `Referer`, `Cookie`, `User-Agent`,
//! `Origin`, and the worker's own `Origin` removed from a request with a body): a
//! `declarativeNetRequest` session rule that sets them on the worker's own request of that
//! method and exact URL, added before the fetch is sent and removed when its answer's headers
//! come (or the fetch is dropped). It decides nothing: the core chose the headers and the
//! request. A rule Chrome does not take (its 1,000 regex rules in use; a long URL is not the
//! reason: Chromium 156 took the rule of a 100 KB URL, and a script's URL is at most 8 KiB)
//! is reported, and the request is not sent without its headers (`FetchError::HeadersNotSet`).
//!
//! Only while the fetch holds its `redirects::Watch`: no other fetch of the same method and URL
//! is sent then unless its rule is the same (and appends nothing), so whichever of the alike
//! rules Chrome applies, each request carries its own headers. The rule names the extension as
//! the initiator and no tab (`tabIds: [-1]`), so no page's request is touched. Session rules
//! outlive a worker stopped mid-fetch: `clear_stale` removes them when a worker starts, but the
//! one rule that removes the watches' marker header (`ensure_marker_rule`), which is the same
//! in every worker.

use super::api;
use super::json as js_json;
use super::redirects::Watch;
use crate::env::HeaderOp;
use js_sys::{Function, Promise, Reflect};
use serde_json::{json, Value};
use std::cell::Cell;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

thread_local! {
    static NEXT: Cell<u32> = const { Cell::new(0) };
    // Whether the marker rule is in place: unknown until asked, then Chrome's answer.
    static MARKER_RULE: Cell<Option<bool>> = const { Cell::new(None) };
}

/// The id of the marker rule: past the 1 to 1,000,000 of the requests' own rules.
const MARKER_RULE_ID: u32 = 1_000_001;

/// Whether the session rule that removes `redirects::MARKER` from the worker's own requests is in
/// place (added once a worker; the same rule a previous worker left is replaced). Without it no
/// marker is sent: the server would see it.
pub async fn ensure_marker_rule() -> bool {
    if let Some(done) = MARKER_RULE.with(Cell::get) {
        return done;
    }
    let me = super::runtime_id().unwrap_or_default();
    let rule = json!({
        "id": MARKER_RULE_ID,
        "priority": 1,
        "action": { "type": "modifyHeaders", "requestHeaders": [
            { "header": super::redirects::MARKER, "operation": "remove" },
        ] },
        "condition": {
            "resourceTypes": ["xmlhttprequest"],
            "tabIds": [-1],
            "initiatorDomains": [me],
        },
    });
    let done = !me.is_empty()
        && update(&json!({ "removeRuleIds": [MARKER_RULE_ID], "addRules": [rule] })).await;
    MARKER_RULE.with(|m| m.set(Some(done)));
    done
}

fn get(o: &JsValue, k: &str) -> JsValue {
    Reflect::get(o, &JsValue::from_str(k)).unwrap_or(JsValue::UNDEFINED)
}

/// `chrome.declarativeNetRequest` and its `updateSessionRules`, when there.
fn update_fn() -> Option<(JsValue, Function)> {
    let dnr = api::CHROME.with(|c| get(c, "declarativeNetRequest"));
    let f = get(&dnr, "updateSessionRules")
        .dyn_into::<Function>()
        .ok()?;
    Some((dnr, f))
}

async fn update(arg: &Value) -> bool {
    let Some((dnr, f)) = update_fn() else {
        return false;
    };
    let Ok(p) = f.call1(&dnr, &js_json::to_js(arg)) else {
        return false;
    };
    match p.dyn_into::<Promise>() {
        Ok(p) => JsFuture::from(p).await.is_ok(),
        Err(_) => false,
    }
}

/// Removes every session rule but the marker rule: this extension makes none but these, and a
/// worker that stopped mid-fetch left its rule. (The marker rule is kept: this worker may have
/// added it already, while this listed the rules.)
pub async fn clear_stale() {
    let dnr = api::CHROME.with(|c| get(c, "declarativeNetRequest"));
    let Ok(f) = get(&dnr, "getSessionRules").dyn_into::<Function>() else {
        return;
    };
    let Ok(Ok(p)) = f.call0(&dnr).map(|p| p.dyn_into::<Promise>()) else {
        return;
    };
    let Ok(rules) = JsFuture::from(p).await else {
        return;
    };
    let ids: Vec<Value> = js_json::from_js(&rules)
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|r| r.get("id").cloned())
        .filter(|id| id.as_u64() != Some(u64::from(MARKER_RULE_ID)))
        .collect();
    if !ids.is_empty() {
        update(&json!({ "removeRuleIds": ids })).await;
    }
}

/// The fetch's `Watch`, and the rule for its headers while it is in place. The watch is let go
/// only once the rule is removed (`release`, or when this is dropped: the fetch given up), so
/// no later fetch of the same method and URL is sent while the rule could meet it.
pub struct HeaderRule {
    id: Option<u32>,
    watch: Option<Watch>,
}

impl HeaderRule {
    /// The rule for `req`, once Chrome has it. None is made when there is nothing to set, when
    /// the fetch has no watch (nothing keeps another fetch of that URL away), or when Chrome
    /// refuses it (`is_set` says which).
    pub async fn add(req: &crate::env::HttpRequest, watch: Option<Watch>) -> HeaderRule {
        if req.browser_headers.is_empty() || watch.is_none() {
            return HeaderRule { id: None, watch };
        }
        let id = NEXT.with(|n| {
            // Rule ids are 1 to 1,000,000, wrapping far past any number in flight. A worker's
            // first is drawn at random: counted from 1 again, it could take the id of a rule
            // the previous worker left, which `clear_stale` (listing the rules while this one
            // is added) would then remove from under this request.
            let last = match n.get() {
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                0 => (js_sys::Math::random() * 1_000_000.0) as u32,
                last => last,
            };
            let id = last % 1_000_000 + 1;
            n.set(id);
            id
        });
        let url = req.url.split('#').next().unwrap_or(&req.url);
        // The exact URL, every character but letters and digits escaped (RE2 reads `\` before
        // punctuation as the character itself).
        let mut re = String::with_capacity(url.len().saturating_mul(2).saturating_add(2));
        re.push('^');
        for c in url.chars() {
            if !c.is_ascii_alphanumeric() {
                re.push('\\');
            }
            re.push(c);
        }
        re.push('$');
        let headers: Vec<Value> = req
            .browser_headers
            .iter()
            .map(|h| match h.op {
                HeaderOp::Remove => json!({ "header": h.name, "operation": "remove" }),
                HeaderOp::Set | HeaderOp::Append => json!({
                    "header": h.name,
                    "operation": if h.op == HeaderOp::Append { "append" } else { "set" },
                    "value": h.value,
                }),
            })
            .collect();
        let me = super::runtime_id().unwrap_or_default();
        let rule = json!({
            "id": id,
            "priority": 1,
            "action": { "type": "modifyHeaders", "requestHeaders": headers },
            "condition": {
                "regexFilter": re,
                // Chrome's default is not (since 118): `/Path` would meet a fetch of `/path`,
                // which `redirects::Watch` does not keep apart.
                "isUrlFilterCaseSensitive": true,
                "requestMethods": [super::redirects::rule_method(&req.method)],
                "resourceTypes": ["xmlhttprequest"],
                "tabIds": [-1],
                "initiatorDomains": [me],
            },
        });
        // Made before the call is awaited: a fetch given up meanwhile (the script's `abort()`)
        // drops it, which removes the rule Chrome may still add.
        let mut held = HeaderRule {
            id: Some(id),
            watch,
        };
        if !update(&json!({ "removeRuleIds": [id], "addRules": [rule] })).await {
            held.id = None;
        }
        held
    }

    /// Whether Chrome holds the rule.
    pub fn is_set(&self) -> bool {
        self.id.is_some()
    }

    /// The fetch's watch, while this holds it.
    pub fn watch(&self) -> Option<&Watch> {
        self.watch.as_ref()
    }

    /// Removes the rule (the request was sent: its answer's headers came) and hands back the
    /// watch.
    pub async fn release(mut self) -> Option<Watch> {
        if let Some(id) = self.id {
            update(&json!({ "removeRuleIds": [id] })).await;
            // Only now: given up during the removal, the drop removes it again before the
            // watch goes.
            self.id = None;
        }
        self.watch.take()
    }
}

impl Drop for HeaderRule {
    fn drop(&mut self) {
        let watch = self.watch.take();
        if let Some(id) = self.id.take() {
            wasm_bindgen_futures::spawn_local(async move {
                update(&json!({ "removeRuleIds": [id] })).await;
                drop(watch);
            });
        }
    }
}
