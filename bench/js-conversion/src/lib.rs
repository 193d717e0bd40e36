use serde::Serialize;
use serde_json::Value;
use std::cell::RefCell;
use wasm_bindgen::prelude::*;

thread_local! { static HELD: RefCell<Value> = RefCell::new(Value::Null); }

fn size(v: &Value) -> usize {
    match v {
        Value::Array(a) => a.len(),
        Value::Object(o) => o.len(),
        _ => 0,
    }
}

/// The project's way (chrome/json.rs): JSON.stringify, then serde_json parses the text.
#[wasm_bindgen]
pub fn json_from(v: &JsValue) -> usize {
    let text = js_sys::JSON::stringify(v)
        .ok()
        .and_then(|s| s.as_string())
        .unwrap_or_default();
    let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let n = size(&v);
    HELD.with(|h| *h.borrow_mut() = v);
    n
}

/// serde-wasm-bindgen's way: walk the JS value directly.
#[wasm_bindgen]
pub fn swb_from(v: JsValue) -> usize {
    let v: Value = serde_wasm_bindgen::from_value(v).unwrap_or(Value::Null);
    let n = size(&v);
    HELD.with(|h| *h.borrow_mut() = v);
    n
}

#[wasm_bindgen]
pub fn json_to() -> JsValue {
    HELD.with(|h| {
        let text = serde_json::to_string(&*h.borrow()).unwrap_or_else(|_| "null".into());
        js_sys::JSON::parse(&text).unwrap_or(JsValue::NULL)
    })
}

#[wasm_bindgen]
pub fn swb_to() -> JsValue {
    HELD.with(|h| {
        h.borrow()
            .serialize(&serde_wasm_bindgen::Serializer::json_compatible())
            .unwrap_or(JsValue::NULL)
    })
}
