//! [`ChromeEnv`]: the core's `Env` traits over `chrome.storage` and `chrome.userScripts`.
//! Values cross the boundary as JSON text (`JSON.stringify`/`JSON.parse`): one well-defined
//! conversion, the same one Chrome's messaging applies anyway.

use super::api::{self, StorageArea};
use super::json;
use crate::env::{
    Area, Capabilities, Clock, EnvError, FetchError, Ids, Registration, Storage, Timer,
    UserScripts, WorldConfig,
};
use js_sys::{Array, Reflect};
use serde_json::{Map, Value};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

pub struct ChromeEnv;

thread_local! {
    /// One shared no-op rejection handler (a closure per call would leak).
    static IGNORE: Closure<dyn FnMut(JsValue)> = Closure::new(|_: JsValue| {});
}

fn with_area<T>(area: Area, f: impl FnOnce(&StorageArea) -> T) -> T {
    match area {
        Area::Local => api::STORAGE_LOCAL.with(f),
        Area::Session => api::STORAGE_SESSION.with(f),
    }
}

pub(super) fn js_error(context: &str, e: JsValue) -> EnvError {
    let msg = e
        .unchecked_ref::<api::Props>()
        .message()
        .ok()
        .and_then(|m| m.as_string())
        .or_else(|| e.as_string())
        .unwrap_or_else(|| "unknown error".to_owned());
    EnvError(format!("{context}: {msg}"))
}

fn key_array(keys: &[&str]) -> JsValue {
    keys.iter()
        .map(|k| JsValue::from_str(k))
        .collect::<Array>()
        .into()
}

/// `storage.get` of some keys (an array) or of everything (`null`).
async fn storage_get(area: Area, keys: &JsValue) -> Result<Map<String, Value>, EnvError> {
    let promise = with_area(area, |a| a.get(keys)).map_err(|e| js_error("storage.get", e))?;
    let got = JsFuture::from(promise)
        .await
        .map_err(|e| js_error("storage.get", e))?;
    match json::from_js(&got) {
        Some(Value::Object(m)) => Ok(m),
        _ => Err(EnvError(
            "storage.get returned a value that is not an object".into(),
        )),
    }
}

impl Storage for ChromeEnv {
    async fn get(&self, area: Area, keys: &[&str]) -> Result<Map<String, Value>, EnvError> {
        storage_get(area, &key_array(keys)).await
    }

    async fn set(&self, area: Area, items: Map<String, Value>) -> Result<(), EnvError> {
        let js = json::to_js(&Value::Object(items));
        let promise = with_area(area, |a| a.set(&js)).map_err(|e| js_error("storage.set", e))?;
        JsFuture::from(promise)
            .await
            .map_err(|e| js_error("storage.set", e))?;
        Ok(())
    }

    async fn get_all(&self, area: Area) -> Result<Map<String, Value>, EnvError> {
        storage_get(area, &JsValue::NULL).await
    }

    async fn bytes_in_use(&self, area: Area, keys: Option<&[&str]>) -> Result<usize, EnvError> {
        let keys = keys.map_or(JsValue::NULL, key_array);
        let promise = with_area(area, |a| a.get_bytes_in_use(&keys))
            .map_err(|e| js_error("storage.getBytesInUse", e))?;
        let got = JsFuture::from(promise)
            .await
            .map_err(|e| js_error("storage.getBytesInUse", e))?;
        got.as_f64()
            .filter(|n| n.is_finite() && *n >= 0.0)
            // A count of bytes, finite and not negative (checked above), far below 2^53.
            .map(|n| {
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                let n = n as usize;
                n
            })
            .ok_or_else(|| {
                EnvError("storage.getBytesInUse returned a value that is not a count".into())
            })
    }

    async fn keys(&self, area: Area) -> Result<Vec<String>, EnvError> {
        let promise =
            with_area(area, |a| a.get_keys()).map_err(|e| js_error("storage.getKeys", e))?;
        let got = JsFuture::from(promise)
            .await
            .map_err(|e| js_error("storage.getKeys", e))?;
        if !Array::is_array(&got) {
            return Err(EnvError(
                "storage.getKeys returned a value that is not a list".into(),
            ));
        }
        Ok(got
            .unchecked_into::<Array>()
            .iter()
            .filter_map(|k| k.as_string())
            .collect())
    }

    async fn remove(&self, area: Area, keys: &[&str]) -> Result<(), EnvError> {
        let promise = with_area(area, |a| a.remove(&key_array(keys)))
            .map_err(|e| js_error("storage.remove", e))?;
        JsFuture::from(promise)
            .await
            .map_err(|e| js_error("storage.remove", e))?;
        Ok(())
    }
}

impl Clock for ChromeEnv {
    fn now_ms(&self) -> f64 {
        js_sys::Date::now()
    }
}

impl Capabilities for ChromeEnv {
    /// Chrome's documented check: `chrome.userScripts` may be missing, or present but throwing,
    /// while "Allow User Scripts" is off. The call asks for one id that never exists, so it costs
    /// the same with 1 or 1,000 scripts registered (an unfiltered `getScripts` returns them all,
    /// code included).
    fn user_scripts_available(&self) -> bool {
        let Ok(api) = user_scripts_api() else {
            return false;
        };
        // First without a browser round trip: an argument of the wrong type is refused by the
        // binding in this process, after its availability check (see `env::availability_from`).
        // The refusal is an Error whose stack V8 would capture through every wasm frame of the
        // walk: ~40 µs of each probe and status call (issue 17's profile); only its message is read.
        let limit = api::ErrorClass::stack_trace_limit();
        api::ErrorClass::set_stack_trace_limit(&JsValue::from_f64(0.0));
        let refused = api.get_scripts(&JsValue::from_f64(0.0));
        api::ErrorClass::set_stack_trace_limit(&limit);
        match refused {
            Err(e) => {
                if let Some(known) = crate::env::availability_from(&js_error("", e).0) {
                    return known;
                }
            }
            Ok(p) => {
                IGNORE.with(|f| {
                    let _ = p.catch(f);
                });
                return true;
            }
        }
        match api.get_scripts(&ids_filter(&["lumo-availability-check".to_owned()])) {
            Ok(p) => {
                // Swallow a late rejection so it does not surface as an unhandled error.
                IGNORE.with(|f| {
                    let _ = p.catch(f);
                });
                true
            }
            Err(_) => false,
        }
    }

    /// `globalThis.lumoPlatform`, set by `sw.js` before the module starts, as JSON text.
    fn platform(&self) -> String {
        Reflect::get(&js_sys::global(), &JsValue::from_str("lumoPlatform"))
            .ok()
            .and_then(|v| js_sys::JSON::stringify(&v).ok())
            .and_then(|s| s.as_string())
            .unwrap_or_default()
    }
}

impl Ids for ChromeEnv {
    fn new_uuid(&self) -> String {
        api::random_uuid()
    }
}

pub(super) fn user_scripts_api() -> Result<api::UserScriptsApi, EnvError> {
    let us = api::CHROME
        .with(|c| c.unchecked_ref::<api::Props>().user_scripts())
        .map_err(|e| js_error("chrome.userScripts", e))?;
    if us.is_undefined() || us.is_null() {
        return Err(EnvError(
            "chrome.userScripts is not available: \"Allow User Scripts\" is off".into(),
        ));
    }
    Ok(us.unchecked_into())
}

pub(super) async fn settle(
    what: &str,
    p: Result<js_sys::Promise, JsValue>,
) -> Result<JsValue, EnvError> {
    let p = p.map_err(|e| js_error(what, e))?;
    JsFuture::from(p).await.map_err(|e| js_error(what, e))
}

fn ids_filter(ids: &[String]) -> JsValue {
    json::to_js(&serde_json::json!({ "ids": ids }))
}

fn registrations_js(regs: &[Registration]) -> Result<JsValue, EnvError> {
    let v = serde_json::to_value(regs).map_err(|e| EnvError(e.to_string()))?;
    Ok(json::to_js(&v))
}

impl UserScripts for ChromeEnv {
    async fn registered(&self, ids: Option<&[String]>) -> Result<Vec<Registration>, EnvError> {
        let api = user_scripts_api()?;
        let filter = ids.map_or(JsValue::UNDEFINED, ids_filter);
        let got = settle("userScripts.getScripts", api.get_scripts(&filter)).await?;
        let v = json::from_js(&got).unwrap_or(Value::Array(Vec::new()));
        // Entries Chrome returns that do not decode are skipped, never fatal.
        Ok(v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|r| serde::Deserialize::deserialize(r).ok())
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn register(&self, regs: &[Registration]) -> Result<(), EnvError> {
        let api = user_scripts_api()?;
        settle(
            "userScripts.register",
            api.register(&registrations_js(regs)?),
        )
        .await
        .map(|_| ())
    }

    async fn update(&self, regs: &[Registration]) -> Result<(), EnvError> {
        let api = user_scripts_api()?;
        settle("userScripts.update", api.update(&registrations_js(regs)?))
            .await
            .map(|_| ())
    }

    async fn unregister(&self, ids: &[String]) -> Result<(), EnvError> {
        let api = user_scripts_api()?;
        settle("userScripts.unregister", api.unregister(&ids_filter(ids)))
            .await
            .map(|_| ())
    }

    async fn configure_world(&self) -> Result<(), EnvError> {
        let api = user_scripts_api()?;
        // No messaging from scripts back to the extension: they are the user's code, not ours.
        let props = json::to_js(&serde_json::json!({
            "messaging": false,
            "csp": crate::env::WORLD_CSP,
        }));
        settle("userScripts.configureWorld", api.configure_world(&props))
            .await
            .map(|_| ())
    }

    async fn world_configurations(&self) -> Result<Vec<WorldConfig>, EnvError> {
        let api = user_scripts_api()?;
        let got = settle(
            "userScripts.getWorldConfigurations",
            api.get_world_configurations(),
        )
        .await?;
        let v = json::from_js(&got).unwrap_or(Value::Array(Vec::new()));
        // The default world's configuration has no worldId.
        Ok(v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|w| {
                        let world_id = match w.get("worldId") {
                            None | Some(Value::Null) => None,
                            Some(id) => Some(id.as_str()?.to_owned()),
                        };
                        Some(WorldConfig {
                            world_id,
                            messaging: w.get("messaging").and_then(Value::as_bool),
                            csp: w.get("csp").and_then(Value::as_str).map(str::to_owned),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn configure_script_world(
        &self,
        world_id: &str,
        messaging: bool,
    ) -> Result<(), EnvError> {
        let api = user_scripts_api()?;
        let props = json::to_js(&serde_json::json!({
            "worldId": world_id,
            "messaging": messaging,
            "csp": crate::env::WORLD_CSP,
        }));
        settle("userScripts.configureWorld", api.configure_world(&props))
            .await
            .map(|_| ())
    }
    async fn reset_script_world(&self, world_id: &str) -> Result<(), EnvError> {
        let api = user_scripts_api()?;
        settle(
            "userScripts.resetWorldConfiguration",
            api.reset_world_configuration(world_id),
        )
        .await
        .map(|_| ())
    }
}

/// A timer that is cleared when dropped (`gloo-timers`): a wait that loses a race (a review the
/// user decided) leaves no timer and no keep-alive behind.
pub fn timeout(ms: f64) -> gloo_timers::future::TimeoutFuture {
    gloo_timers::future::TimeoutFuture::new(crate::env::timer_ms(ms))
}

impl Timer for ChromeEnv {
    async fn sleep(&self, ms: f64) {
        for (step, keepalive) in crate::env::sleep_steps(ms) {
            timeout(step).await;
            if keepalive {
                if let Ok(p) = api::get_platform_info() {
                    let _ = JsFuture::from(p).await;
                }
            }
        }
    }
}

/// Longest wait, after a manual fetch resolved as a redirect, for Chrome to tell where it leads
/// (`redirects`): the event has always come within milliseconds when it comes at all.
const REDIRECT_WAIT_MS: u64 = 5_000;

/// `fetch` for `GM_xmlhttpRequest` and `@require` files: the core already decided the request
/// may be sent, and judges any redirect before it is followed.
impl crate::env::Http for ChromeEnv {
    async fn fetch(
        &self,
        req: &crate::env::HttpRequest,
        max_body: usize,
    ) -> Result<crate::env::HttpResponse, FetchError> {
        self.fetch_progress(req, max_body, &|_, _| crate::env::Hold::Keep, &|_| ())
            .await
    }

    async fn fetch_progress(
        &self,
        req: &crate::env::HttpRequest,
        max_body: usize,
        progress: &dyn Fn(u64, Option<u64>) -> crate::env::Hold,
        head: &dyn Fn(&crate::env::HttpResponse),
    ) -> Result<crate::env::HttpResponse, FetchError> {
        let global = js_sys::global();
        let fetch: js_sys::Function = Reflect::get(&global, &"fetch".into())
            .ok()
            .and_then(|f| f.dyn_into().ok())
            .ok_or_else(|| FetchError::Other("fetch is not available".into()))?;
        let init = fetch_init(req);
        let set = |k: &str, v: &JsValue| {
            let _ = Reflect::set(&init, &k.into(), v);
        };
        // One controller cancels the request when this future is dropped (the script's
        // `abort()`, see `provider::gm`); `AbortSignal.timeout(ms)` when it takes too long.
        // Either cancels the request itself, not only the wait.
        let abort = AbortOnDrop::new(&global);
        let timeout = Reflect::get(&global, &"AbortSignal".into())
            .ok()
            .and_then(|a| {
                let t: js_sys::Function =
                    Reflect::get(&a, &"timeout".into()).ok()?.dyn_into().ok()?;
                #[allow(clippy::cast_precision_loss)]
                let ms = req.timeout_ms as f64;
                t.call1(&a, &ms.into()).ok()
            });
        let signals: Vec<JsValue> = [abort.signal(), timeout].into_iter().flatten().collect();
        let signal = match signals.as_slice() {
            [one] => Some(one.clone()),
            [_, _] => Reflect::get(&global, &"AbortSignal".into())
                .ok()
                .and_then(|a| {
                    let any: js_sys::Function =
                        Reflect::get(&a, &"any".into()).ok()?.dyn_into().ok()?;
                    let list: Array = signals.iter().collect();
                    any.call1(&a, &list).ok()
                }),
            _ => None,
        };
        if let Some(s) = signal {
            set("signal", &s);
        }
        let fail = fetch_error;
        // Before the fetch: Chrome may tell where a redirect leads before the fetch resolves.
        // The wait for an earlier fetch of the same method and URL counts toward this one's
        // own timeout: it is bounded by the earlier one's, which may be far longer.
        let watch = {
            let share = match share(req) {
                Some(s) if super::header_rules::ensure_marker_rule().await => Some(s),
                _ => None,
            };
            let acquire = super::redirects::Watch::acquire(&req.method, &req.url, share);
            #[allow(clippy::cast_precision_loss)]
            let timer = self::timeout(req.timeout_ms as f64);
            futures::pin_mut!(acquire);
            match futures::future::select(acquire, timer).await {
                futures::future::Either::Left((watch, _)) => watch,
                futures::future::Either::Right(_) => return Err(FetchError::Timeout),
            }
        };
        // The headers fetch may not set, set by the browser on this request alone; the watch is
        // let go once that rule is removed (`header_rules`).
        let rule = super::header_rules::HeaderRule::add(req, watch).await;
        if !req.browser_headers.is_empty() && !rule.is_set() {
            return Err(FetchError::HeadersNotSet {
                names: req
                    .browser_headers
                    .iter()
                    .map(|h| match h.op {
                        crate::env::HeaderOp::Remove => {
                            format!("{} (to remove the worker's)", h.name)
                        }
                        _ => h.name.clone(),
                    })
                    .collect(),
            });
        }
        add_marker(&init, &rule);
        let promise: js_sys::Promise = fetch
            .call2(&global, &req.url.as_str().into(), &init)
            .map_err(fail)?
            .dyn_into()
            .map_err(fail)?;
        let resp = JsFuture::from(promise).await.map_err(fail)?;
        let watch = rule.release().await;
        let num = |k: &str| Reflect::get(&resp, &k.into()).ok().and_then(|v| v.as_f64());
        let text = |o: &JsValue, k: &str| {
            Reflect::get(o, &k.into())
                .ok()
                .and_then(|v| v.as_string())
                .unwrap_or_default()
        };
        if text(&resp, "type") == "opaqueredirect" {
            return redirect_answer(req, watch).await;
        }
        // Not a redirect: a fetch of the same method and URL may go while this body arrives.
        drop(watch);
        let status = num("status").unwrap_or(0.0).clamp(0.0, 999.0);
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let status = status as u16;
        let mut answer = crate::env::HttpResponse {
            status,
            status_text: text(&resp, "statusText"),
            final_url: text(&resp, "url"),
            headers: response_headers(&resp),
            body: Vec::new(),
            location: None,
        };
        head(&answer);
        answer.body = read_body(&resp, max_body, progress).await?;
        Ok(answer)
    }
}

/// The watch's marker header (`redirects::MARKER`), when it has one, added to `init`'s headers.
fn add_marker(init: &js_sys::Object, rule: &super::header_rules::HeaderRule) {
    let Some((name, value)) = rule.watch().and_then(super::redirects::Watch::marker) else {
        return;
    };
    if let Ok(headers) = Reflect::get(init, &"headers".into()) {
        let headers: Array = headers.unchecked_into();
        headers.push(&Array::of2(&name.into(), &value.into()));
    }
}

/// What fetches of the same method and URL a request may be in flight with: those whose header
/// rule is this same one (`redirects::Watch::acquire`). A rule that appends goes alone: two alike
/// rules would append twice.
fn share(req: &crate::env::HttpRequest) -> Option<String> {
    use crate::env::HeaderOp;
    let mut key = String::new();
    for h in &req.browser_headers {
        let op = match h.op {
            HeaderOp::Set => 's',
            HeaderOp::Remove => 'r',
            HeaderOp::Append => return None,
        };
        // Lengths first: no name or value can run into the next.
        key.push_str(&format!(
            "{op}{}:{}:{}{}",
            h.name.len(),
            h.value.len(),
            h.name,
            h.value
        ));
    }
    Some(key)
}

/// `fetch`'s options for a request, but its signal.
fn fetch_init(req: &crate::env::HttpRequest) -> js_sys::Object {
    let init = js_sys::Object::new();
    let set = |k: &str, v: &JsValue| {
        let _ = Reflect::set(&init, &k.into(), v);
    };
    set("method", &req.method.as_str().into());
    set(
        "credentials",
        &(if req.anonymous { "omit" } else { "include" }).into(),
    );
    // No redirect is followed by the browser: the core judges each hop before it is asked.
    set("redirect", &"manual".into());
    set("cache", &"no-store".into());
    let headers = Array::new();
    for (k, v) in &req.headers {
        headers.push(&Array::of2(&k.as_str().into(), &v.as_str().into()));
    }
    set("headers", &headers);
    if req.method != "GET" && req.method != "HEAD" {
        match &req.body {
            Some(crate::gm::message::Body::Text(t)) => set("body", &t.as_str().into()),
            Some(crate::gm::message::Body::Bytes(b)) => {
                set("body", &js_sys::Uint8Array::from(b.as_slice()).into());
            }
            None => {}
        }
    }
    init
}

/// A fetch's rejection: a `TimeoutError` (the request's `AbortSignal.timeout`) is a timeout,
/// anything else is said in the browser's words.
fn fetch_error(e: JsValue) -> FetchError {
    let name = Reflect::get(&e, &"name".into())
        .ok()
        .and_then(|n| n.as_string());
    if name.as_deref() == Some("TimeoutError") {
        FetchError::Timeout
    } else {
        FetchError::Other(js_error("fetch", e).0)
    }
}

/// A manual fetch that resolved as a redirect: where it leads, as Chrome told the watch.
async fn redirect_answer(
    req: &crate::env::HttpRequest,
    watch: Option<super::redirects::Watch>,
) -> Result<crate::env::HttpResponse, FetchError> {
    let not_told = || {
        FetchError::Other(
            "the server redirected the request, and Chrome did not tell where to; \
             the redirect was not followed"
                .into(),
        )
    };
    #[allow(clippy::cast_precision_loss)]
    let wait = req.timeout_ms.min(REDIRECT_WAIT_MS) as f64;
    let (status, to) = match watch {
        Some(w) => w.target(wait).await.ok_or_else(not_told)?,
        None => return Err(not_told()),
    };
    Ok(crate::env::HttpResponse {
        status,
        status_text: String::new(),
        final_url: req.url.clone(),
        headers: Vec::new(),
        body: Vec::new(),
        location: Some(to),
    })
}

/// An `AbortController` whose `abort()` is called when this is dropped: a fetch future given
/// up before it finished cancels its request (after it finished, aborting does nothing).
struct AbortOnDrop(Option<JsValue>);

impl AbortOnDrop {
    fn new(global: &JsValue) -> Self {
        let ctrl = Reflect::get(global, &"AbortController".into())
            .ok()
            .and_then(|c| c.dyn_into::<js_sys::Function>().ok())
            .and_then(|c| Reflect::construct(&c, &Array::new()).ok());
        AbortOnDrop(ctrl)
    }

    fn signal(&self) -> Option<JsValue> {
        self.0
            .as_ref()
            .and_then(|c| Reflect::get(c, &"signal".into()).ok())
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(c) = &self.0 {
            let _ = Reflect::get(c, &"abort".into())
                .ok()
                .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
                .map(|f| f.call0(c));
        }
    }
}

/// `cancel()` of a stream or reader; its promise is awaited off this path (a rejection is
/// nobody's business).
fn cancel_stream(o: &JsValue) {
    let p = Reflect::get(o, &"cancel".into())
        .ok()
        .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
        .and_then(|f| f.call0(o).ok())
        .and_then(|p| p.dyn_into::<js_sys::Promise>().ok());
    if let Some(p) = p {
        wasm_bindgen_futures::spawn_local(async move {
            let _ = JsFuture::from(p).await;
        });
    }
}

/// A `Response`'s body, read chunk by chunk and given up (the stream cancelled) as soon as it
/// passes `max` bytes, so a huge or endless answer never sits in the worker's memory whole.
/// Each chunk is asked of `progress` (bytes so far with it, the `Content-Length` if any) before
/// it is kept; a refusal (the core's budget of answers' bytes) gives the body up too.
/// The chunks wait in JavaScript's memory (which the garbage collector gives back) and are
/// copied into the wasm's (which never shrinks) once, when the body is whole: the wasm never
/// holds a body still arriving, nor the spare capacity of a growing buffer.
async fn read_body(
    resp: &JsValue,
    max: usize,
    progress: &dyn Fn(u64, Option<u64>) -> crate::env::Hold,
) -> Result<Vec<u8>, FetchError> {
    read_body_js(resp, max, progress)
        .await
        .map_err(|e| match e {
            Body::TooLarge => FetchError::TooLarge { max },
            Body::Stopped => FetchError::Other(
                "the answer was stopped: too many bytes of answers at once".into(),
            ),
            Body::Js(e) => fetch_error(e),
        })
}

/// Why [`read_body`] kept no body.
enum Body {
    TooLarge,
    /// `progress` said no.
    Stopped,
    Js(JsValue),
}

impl From<JsValue> for Body {
    fn from(e: JsValue) -> Self {
        Body::Js(e)
    }
}

async fn read_body_js(
    resp: &JsValue,
    max: usize,
    progress: &dyn Fn(u64, Option<u64>) -> crate::env::Hold,
) -> Result<Vec<u8>, Body> {
    let too_big = || Body::TooLarge;
    let declared = Reflect::get(resp, &"headers".into())
        .ok()
        .and_then(|h| {
            let get: js_sys::Function = Reflect::get(&h, &"get".into()).ok()?.dyn_into().ok()?;
            get.call1(&h, &"content-length".into()).ok()?.as_string()
        })
        .and_then(|n| n.trim().parse::<u64>().ok());
    let body = Reflect::get(resp, &"body".into()).unwrap_or(JsValue::NULL);
    let cancel = || {
        cancel_stream(&body);
    };
    if declared.is_some_and(|n| n > u64::try_from(max).unwrap_or(u64::MAX)) {
        cancel();
        return Err(too_big());
    }
    if body.is_null() || body.is_undefined() {
        return Ok(Vec::new());
    }
    // A length known up front is asked for whole before anything is read: the core counts it
    // at once, or has the read wait (nothing held meanwhile) until its budget has room.
    if declared.is_some() && !crate::env::hold_bytes(progress, 0, declared).await {
        cancel();
        return Err(Body::Stopped);
    }
    let reader = Reflect::get(&body, &"getReader".into())?
        .dyn_into::<js_sys::Function>()?
        .call0(&body)?;
    let read: js_sys::Function = Reflect::get(&reader, &"read".into())?.dyn_into()?;
    let chunks = Array::new();
    let mut len: usize = 0;
    loop {
        let p: js_sys::Promise = read.call0(&reader)?.dyn_into()?;
        let chunk = JsFuture::from(p).await?;
        if Reflect::get(&chunk, &"done".into())?.as_bool() == Some(true) {
            break;
        }
        let bytes: js_sys::Uint8Array = Reflect::get(&chunk, &"value".into())?.dyn_into()?;
        let with = len.saturating_add(usize::try_from(bytes.length()).unwrap_or(usize::MAX));
        if with > max {
            cancel_stream(&reader);
            return Err(too_big());
        }
        if !crate::env::hold_bytes(progress, u64::try_from(with).unwrap_or(u64::MAX), declared)
            .await
        {
            cancel_stream(&reader);
            return Err(Body::Stopped);
        }
        chunks.push(&bytes);
        len = with;
    }
    // One allocation of the exact size, each chunk copied into its place.
    let mut out = vec![0u8; len];
    let mut at: usize = 0;
    for c in chunks.iter() {
        let c: js_sys::Uint8Array = c.dyn_into()?;
        let end = at.saturating_add(usize::try_from(c.length()).unwrap_or(usize::MAX));
        // `copy_to` panics unless the lengths are equal: checked, never assumed.
        let Some(dst) = out
            .get_mut(at..end)
            .filter(|d| u32::try_from(d.len()) == Ok(c.length()))
        else {
            return Err(too_big());
        };
        c.copy_to(dst);
        at = end;
    }
    Ok(out)
}

/// A `Response`'s headers as (name, value) pairs.
fn response_headers(resp: &JsValue) -> Vec<(String, String)> {
    let mut headers = Vec::new();
    if let Ok(h) = Reflect::get(resp, &"headers".into()) {
        let entries = Reflect::get(&h, &"entries".into())
            .ok()
            .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
            .and_then(|f| f.call0(&h).ok());
        if let Some(it) = entries {
            for pair in Array::from(&it).iter() {
                let pair = Array::from(&pair);
                headers.push((
                    pair.get(0).as_string().unwrap_or_default(),
                    pair.get(1).as_string().unwrap_or_default(),
                ));
            }
        }
    }
    headers
}
