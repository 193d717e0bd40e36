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
    within(v, max_bytes).ok().flatten()
}

/// The text of `v` if it has one and it fits `max_bytes` (`Ok(None)`: no JSON form), else
/// `Err` with its length in UTF-16 units; a text over the bound is never copied.
fn within(v: &JsValue, max_bytes: usize) -> Result<Option<String>, usize> {
    let Ok(text) = js_sys::JSON::stringify(v) else {
        return Ok(None);
    };
    if !text.is_string() {
        return Ok(None);
    }
    let len = usize::try_from(text.length()).unwrap_or(usize::MAX);
    if len > max_bytes {
        return Err(len);
    }
    Ok(text.as_string())
}

/// A message's JSON text as [`text_bounded`] read it.
pub enum Bounded {
    Whole(String),
    /// Longer than the bound (`len`, in UTF-16 units: its UTF-8 form is no shorter): not copied
    /// into the wasm. `head` is `{"id":…}` with the message's top-level id, read from the
    /// object itself (in the text it may come after the long part), for the reply to name.
    Over {
        head: String,
        len: usize,
    },
    /// No JSON form (undefined, a function, a BigInt).
    NoJson,
}

/// How much of an id is copied (a longer one is cut, and then reads as no id).
const HEAD_UNITS: u32 = 16 * 1024;

/// `{"id":…}` with `v`'s own top-level `id` (`{}` when it has none, or is not a plain object).
fn id_part(v: &JsValue) -> String {
    let holder = js_sys::Object::new();
    if v.is_object() && !js_sys::Array::is_array(v) {
        if let Ok(id) = js_sys::Reflect::get(v, &JsValue::from_str("id")) {
            let _ = js_sys::Reflect::set(&holder, &JsValue::from_str("id"), &id);
        }
    }
    match js_sys::JSON::stringify(&holder) {
        Ok(t) if t.is_string() => t
            .slice(0, HEAD_UNITS.min(t.length()))
            .as_string()
            .unwrap_or_default(),
        _ => String::new(),
    }
}

/// [`text_of`], without copying a text longer than `max_bytes` could hold into the wasm (a
/// message Chrome delivers may be up to 64 MiB, and the wasm's memory never shrinks).
pub fn text_bounded(v: &JsValue, max_bytes: usize) -> Bounded {
    match within(v, max_bytes) {
        Ok(Some(text)) => Bounded::Whole(text),
        Ok(None) => Bounded::NoJson,
        Err(len) => Bounded::Over {
            head: id_part(v),
            len,
        },
    }
}

/// The value itself, parsed as every JS-side text is: lone surrogates become U+FFFD
/// (`text::parse_json`), so storage and internal messages holding one are still read.
pub fn from_js(v: &JsValue) -> Option<Value> {
    text_of(v).and_then(|s| crate::text::parse_json(&s).ok())
}

pub fn to_js(v: &Value) -> JsValue {
    text_to_js(&serde_json::to_string(v).unwrap_or_else(|_| "null".to_owned()))
}

/// Longest top-level string of an answer sent through JSON text ([`owned_to_js`]).
const LIFT_OVER: usize = 64 * 1024;

/// [`to_js`] for a value the caller gives up (a GM request's answer): an object's long string
/// fields (a `GM_xmlhttpRequest` body of up to 5 MiB, ~6.7 MiB as base64) are not written into
/// JSON text — which would be a second copy in the wasm's memory, up to six times the string's
/// length with escapes — but decoded straight from the wasm's memory into JavaScript strings;
/// the rest goes as JSON text.
pub fn owned_to_js(v: Value) -> JsValue {
    let Value::Object(mut map) = v else {
        return to_js(&v);
    };
    let long: Vec<String> = map
        .iter()
        .filter(|(_, v)| v.as_str().is_some_and(|s| s.len() > LIFT_OVER))
        .map(|(k, _)| k.clone())
        .collect();
    let lifted: Vec<(String, Value)> = long
        .into_iter()
        .filter_map(|k| map.remove(&k).map(|v| (k, v)))
        .collect();
    let obj = to_js(&Value::Object(map));
    for (k, v) in lifted {
        if let Value::String(s) = v {
            let _ = js_sys::Reflect::set(&obj, &JsValue::from_str(&k), &JsValue::from_str(&s));
        }
    }
    obj
}

/// JSON text the core wrote (`JSON.parse`).
pub fn text_to_js(text: &str) -> JsValue {
    js_sys::JSON::parse(text).unwrap_or(JsValue::NULL)
}
