//! The one conversion between JS values and `serde_json::Value`.

use serde_json::Value;
use wasm_bindgen::JsValue;

/// `JSON.stringify` then parse. `None` when the value has no JSON form (undefined, a function,
/// a BigInt, a lone surrogate that serde refuses): callers answer that with a parse error.
pub fn text_of(v: &JsValue) -> Option<String> {
    js_sys::JSON::stringify(v).ok().and_then(|s| s.as_string())
}

pub fn from_js(v: &JsValue) -> Option<Value> {
    text_of(v).and_then(|s| serde_json::from_str(&s).ok())
}

pub fn to_js(v: &Value) -> JsValue {
    let text = serde_json::to_string(v).unwrap_or_else(|_| "null".to_owned());
    js_sys::JSON::parse(&text).unwrap_or(JsValue::NULL)
}
