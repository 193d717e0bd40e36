//! Raw bindings to the `chrome.*` APIs the provider uses. Every call that Chrome may refuse is
//! bound with `catch`, so a throwing API becomes an `Err`, never a trap.

use js_sys::{Function, Object, Promise};
use wasm_bindgen::prelude::*;

#[wasm_bindgen]
extern "C" {
    /// `chrome.runtime.onMessage*` / `onConnect*` event objects.
    pub type Event;
    #[wasm_bindgen(method, js_name = addListener)]
    pub fn add_listener(this: &Event, f: &Function);
    #[wasm_bindgen(method, js_name = removeListener)]
    pub fn remove_listener(this: &Event, f: &Function);

    #[wasm_bindgen(thread_local_v2, js_namespace = ["chrome", "runtime"], js_name = onMessageExternal)]
    pub static ON_MESSAGE_EXTERNAL: Event;
    #[wasm_bindgen(thread_local_v2, js_namespace = ["chrome", "runtime"], js_name = onConnectExternal)]
    pub static ON_CONNECT_EXTERNAL: Event;
    #[wasm_bindgen(thread_local_v2, js_namespace = ["chrome", "runtime"], js_name = onMessage)]
    pub static ON_MESSAGE: Event;
    #[wasm_bindgen(thread_local_v2, js_namespace = ["chrome", "runtime"], js_name = onInstalled)]
    pub static ON_INSTALLED: Event;
    #[wasm_bindgen(thread_local_v2, js_namespace = ["chrome", "storage"], js_name = onChanged)]
    pub static ON_STORAGE_CHANGED: Event;
    #[wasm_bindgen(thread_local_v2, js_namespace = ["chrome", "runtime"], js_name = id)]
    pub static RUNTIME_ID: JsValue;

    /// `chrome.runtime.Port`.
    pub type Port;
    #[wasm_bindgen(method, getter)]
    pub fn name(this: &Port) -> JsValue;
    #[wasm_bindgen(method, getter)]
    pub fn sender(this: &Port) -> JsValue;
    #[wasm_bindgen(method, getter, js_name = onMessage)]
    pub fn on_message(this: &Port) -> Event;
    #[wasm_bindgen(method, getter, js_name = onDisconnect)]
    pub fn on_disconnect(this: &Port) -> Event;
    #[wasm_bindgen(method, catch, js_name = postMessage)]
    pub fn post_message(this: &Port, msg: &JsValue) -> Result<(), JsValue>;
    #[wasm_bindgen(method, catch)]
    pub fn disconnect(this: &Port) -> Result<(), JsValue>;

    /// `chrome.storage.StorageArea`.
    pub type StorageArea;
    #[wasm_bindgen(method, catch)]
    pub fn get(this: &StorageArea, keys: &JsValue) -> Result<Promise, JsValue>;
    #[wasm_bindgen(method, catch)]
    pub fn set(this: &StorageArea, items: &JsValue) -> Result<Promise, JsValue>;
    #[wasm_bindgen(method, catch)]
    pub fn remove(this: &StorageArea, keys: &JsValue) -> Result<Promise, JsValue>;
    #[wasm_bindgen(method, catch, js_name = getKeys)]
    pub fn get_keys(this: &StorageArea) -> Result<Promise, JsValue>;
    #[wasm_bindgen(method, catch, js_name = getBytesInUse)]
    pub fn get_bytes_in_use(this: &StorageArea, keys: &JsValue) -> Result<Promise, JsValue>;

    #[wasm_bindgen(thread_local_v2, js_namespace = ["chrome", "storage"], js_name = local)]
    pub static STORAGE_LOCAL: StorageArea;
    #[wasm_bindgen(thread_local_v2, js_namespace = ["chrome", "storage"], js_name = session)]
    pub static STORAGE_SESSION: StorageArea;

    #[wasm_bindgen(thread_local_v2, js_name = chrome)]
    pub static CHROME: Object;

    // Properties read on every message, as getters: a `Reflect::get` key would be a string
    // decoded from the wasm's memory on each call. `catch`: the value is whatever JS handed over.
    /// Any JS value whose properties are read so: a `MessageSender`, a message, an error, `chrome`.
    pub type Props;
    #[wasm_bindgen(method, getter, catch)]
    pub fn id(this: &Props) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(method, getter, catch)]
    pub fn url(this: &Props) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(method, getter, catch)]
    pub fn channel(this: &Props) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(method, getter, catch, js_name = documentId)]
    pub fn document_id(this: &Props) -> Result<JsValue, JsValue>;
    /// An error's `message`.
    #[wasm_bindgen(method, getter, catch)]
    pub fn message(this: &Props) -> Result<JsValue, JsValue>;
    /// A `storage.onChanged` change's new value (absent: the key was removed).
    #[wasm_bindgen(method, getter, catch, js_name = newValue)]
    pub fn new_value(this: &Props) -> Result<JsValue, JsValue>;
    /// `chrome.userScripts` (see `UserScriptsApi`).
    #[wasm_bindgen(method, getter, catch, js_name = userScripts)]
    pub fn user_scripts(this: &Props) -> Result<JsValue, JsValue>;

    /// The global `Error`, for V8's `Error.stackTraceLimit`.
    #[wasm_bindgen(js_name = Error)]
    pub type ErrorClass;
    #[wasm_bindgen(static_method_of = ErrorClass, js_class = "Error", getter = stackTraceLimit)]
    pub fn stack_trace_limit() -> JsValue;
    #[wasm_bindgen(static_method_of = ErrorClass, js_class = "Error", setter = stackTraceLimit)]
    pub fn set_stack_trace_limit(limit: &JsValue);

    #[wasm_bindgen(js_namespace = console, js_name = error)]
    pub fn console_error(s: &str);
    #[wasm_bindgen(js_namespace = console, js_name = warn)]
    pub fn console_warn(s: &str);
}

#[wasm_bindgen]
extern "C" {
    /// `chrome.userScripts`. Looked up on every use: it is missing or throws while the user's
    /// "Allow User Scripts" toggle is off, and that can change while the worker runs.
    pub type UserScriptsApi;
    #[wasm_bindgen(method, catch, js_name = getScripts)]
    pub fn get_scripts(this: &UserScriptsApi, filter: &JsValue) -> Result<Promise, JsValue>;
    #[wasm_bindgen(method, catch)]
    pub fn register(this: &UserScriptsApi, scripts: &JsValue) -> Result<Promise, JsValue>;
    #[wasm_bindgen(method, catch)]
    pub fn update(this: &UserScriptsApi, scripts: &JsValue) -> Result<Promise, JsValue>;
    #[wasm_bindgen(method, catch)]
    pub fn unregister(this: &UserScriptsApi, filter: &JsValue) -> Result<Promise, JsValue>;
    #[wasm_bindgen(method, catch, js_name = configureWorld)]
    pub fn configure_world(this: &UserScriptsApi, props: &JsValue) -> Result<Promise, JsValue>;
    #[wasm_bindgen(method, catch, js_name = resetWorldConfiguration)]
    pub fn reset_world_configuration(
        this: &UserScriptsApi,
        world_id: &str,
    ) -> Result<Promise, JsValue>;
    #[wasm_bindgen(method, catch, js_name = getWorldConfigurations)]
    pub fn get_world_configurations(this: &UserScriptsApi) -> Result<Promise, JsValue>;

    #[wasm_bindgen(js_namespace = crypto, js_name = randomUUID)]
    pub fn random_uuid() -> String;

    #[wasm_bindgen(js_namespace = ["chrome", "runtime"], js_name = getPlatformInfo, catch)]
    pub fn get_platform_info() -> Result<Promise, JsValue>;

    /// `chrome.action`, for the badge.
    #[wasm_bindgen(js_namespace = ["chrome", "action"], js_name = setBadgeText, catch)]
    pub fn set_badge_text(details: &JsValue) -> Result<Promise, JsValue>;
    #[wasm_bindgen(js_namespace = ["chrome", "action"], js_name = setBadgeBackgroundColor, catch)]
    pub fn set_badge_background_color(details: &JsValue) -> Result<Promise, JsValue>;
}
