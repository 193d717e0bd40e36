//! Building `serde_json` values by moving their parts in. `json!` serializes each expression it
//! is given (`to_value(&e)`), so a `Value` put into another through it is copied whole; a tool's
//! reply went through three such layers (its own object, [`crate::tools::result::success`],
//! [`crate::mcp::jsonrpc::response`]) and was copied three times before it was written out.
//! `json!` stays for objects of literals and scalars.

use serde_json::{Map, Value};

/// The object of `fields`, each value moved in (a repeated key keeps the last, as in `json!`).
/// A `Vec`, not an array: one instance in the wasm, not one per length.
pub fn object(fields: Vec<(&str, Value)>) -> Value {
    let mut m = Map::new();
    for (k, v) in fields {
        m.insert(k.to_owned(), v);
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn object_is_what_json_builds() {
        let inner = json!({ "b": [1, "x", null], "a": { "deep": true } });
        let next: Option<String> = None;
        assert_eq!(
            object(vec![
                ("z", inner.clone()),
                ("total", 3.into()),
                ("nextCursor", next.clone().into()),
                ("name", "n".into()),
            ]),
            json!({ "z": inner, "total": 3, "nextCursor": next, "name": "n" })
        );
        assert_eq!(object(vec![]), json!({}));
        assert_eq!(
            object(vec![("k", 1.into()), ("k", 2.into())]),
            json!({ "k": 2 })
        );
    }
}
