//! The one conversion between JS values and `serde_json::Value`.

use serde_json::Value;
use wasm_bindgen::JsValue;

/// The JSON text of a JS value (`JSON.stringify`). `None` when it has no JSON form (undefined,
/// a function, a BigInt): callers answer that with a parse error.
pub fn text_of(v: &JsValue) -> Option<String> {
    js_sys::JSON::stringify(v).ok().and_then(|s| s.as_string())
}

/// [`text_of`], but `None` without copying the text into the wasm when it is longer than
/// `max_bytes` could hold: its UTF-8 form is never shorter than its UTF-16 length, so a text
/// over the bound in UTF-16 units is over it in bytes too. (A message Chrome delivers may be
/// up to 64 MiB; the core would refuse it after the copy, having grown the wasm's memory.)
pub fn text_within(v: &JsValue, max_bytes: usize) -> Option<String> {
    let text = js_sys::JSON::stringify(v).ok()?;
    if usize::try_from(text.length()).map_or(true, |n| n > max_bytes) {
        return None;
    }
    text.as_string()
}

/// The value itself, parsed as every JS-side text is: lone surrogates become U+FFFD
/// (`text::parse_json`), so storage and internal messages holding one are still read.
pub fn from_js(v: &JsValue) -> Option<Value> {
    text_of(v).and_then(|s| crate::text::parse_json(&s).ok())
}

pub fn to_js(v: &Value) -> JsValue {
    text_to_js(&serde_json::to_string(v).unwrap_or_else(|_| "null".to_owned()))
}

/// JSON text the core wrote (`JSON.parse`).
pub fn text_to_js(text: &str) -> JsValue {
    js_sys::JSON::parse(text).unwrap_or(JsValue::NULL)
}
