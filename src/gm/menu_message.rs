//! The fields of a `"menu"` GM request (`gm::message`): `commands`, the page's whole list as
//! `[id, caption, accessKey | null]` items, bounded here whatever the prelude promised.

use serde_json::{Map, Value};

use super::menu::{Command, MAX_CAPTION_CHARS, MAX_COMMANDS, MAX_ID_BYTES};

/// A caption longer than this many bytes is refused (shorter ones are cut for display).
pub const MAX_CAPTION_BYTES: usize = 2048;

/// The refusal, as the message the script reads (`gm::message` wraps it).
fn bad(what: &str) -> String {
    format!("GM_registerMenuCommand: {what}")
}

pub fn commands(o: &Map<String, Value>) -> Result<Vec<Command>, String> {
    let list = o
        .get("commands")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("commands must be a list"))?;
    if list.len() > MAX_COMMANDS {
        return Err(bad(&format!(
            "{} commands, over the {MAX_COMMANDS} one script may have in a page",
            list.len()
        )));
    }
    let mut out: Vec<Command> = Vec::with_capacity(list.len());
    for item in list {
        let [Value::String(id), Value::String(caption), key] =
            item.as_array().map(Vec::as_slice).unwrap_or_default()
        else {
            return Err(bad("each command must be [id, caption, accessKey]"));
        };
        if id.len() > MAX_ID_BYTES {
            return Err(bad(&format!("an id over {MAX_ID_BYTES} bytes")));
        }
        if caption.len() > MAX_CAPTION_BYTES {
            return Err(bad(&format!("a caption over {MAX_CAPTION_BYTES} bytes")));
        }
        // A later command with the same id replaces the earlier one (as in Violentmonkey).
        out.retain(|c| c.id != *id);
        out.push(Command {
            id: id.clone(),
            caption: crate::text::ellipsize(caption, MAX_CAPTION_CHARS),
            access_key: key
                .as_str()
                .filter(|k| !k.is_empty() && k.chars().count() == 1)
                .map(str::to_owned),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::message::{parse, GmError, GmRequest};
    use super::*;
    use serde_json::json;

    fn p(v: Value) -> Result<GmRequest, GmError> {
        parse(v.as_object().unwrap())
    }

    #[test]
    fn a_list_parses_bounded_and_deduplicated() {
        let long = "c".repeat(500);
        let GmRequest::Menu(cs) = p(json!({"op": "menu", "commands": [
            ["a", "First", "f"], ["b", long, null], ["a", "Again", "too long"]
        ]}))
        .unwrap() else {
            panic!()
        };
        assert_eq!(cs.len(), 2);
        assert_eq!(
            (cs[0].id.as_str(), cs[0].access_key.as_deref()),
            ("b", None)
        );
        assert!(cs[0].caption.chars().count() <= MAX_CAPTION_CHARS + 1);
        assert_eq!(
            (cs[1].caption.as_str(), cs[1].access_key.as_deref()),
            ("Again", None)
        );
        assert_eq!(
            p(json!({"op": "menu", "commands": []})),
            Ok(GmRequest::Menu(vec![]))
        );
        let many: Vec<Value> = (0..=MAX_COMMANDS)
            .map(|i| json!([i.to_string(), "c", null]))
            .collect();
        for bad in [
            json!({"op": "menu"}),
            json!({"op": "menu", "commands": "x"}),
            json!({"op": "menu", "commands": [["a", "c"]]}),
            json!({"op": "menu", "commands": [[1, "c", null]]}),
            json!({"op": "menu", "commands": [["a", 2, null]]}),
            json!({"op": "menu", "commands": [["i".repeat(MAX_ID_BYTES + 1), "c", null]]}),
            json!({"op": "menu", "commands": [["a", "c".repeat(MAX_CAPTION_BYTES + 1), null]]}),
            json!({"op": "menu", "commands": many}),
        ] {
            assert!(p(bad.clone()).is_err(), "{bad}");
        }
    }
}
