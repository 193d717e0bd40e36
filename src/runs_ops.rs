//! The pages' `runs.*` operations (the options page's last run per script and its Runs view).
//! Read-only: the pages show what the userscript channel stored; nothing here writes.
//!
//! - `runs.last {uuids}` → `{ok, last: {uuid: {id, at, url, ok, revision} | null}}`
//! - `runs.list {uuid, since?}` → `{ok, runs (newest first, ≤ 100), cursor, more, dropped}`

use crate::control::args::loose;
use crate::control::reply::Reply;
use crate::env::Env;
use crate::provider::Provider;
use crate::scripts::record::is_uuid;
use crate::scripts::runs;
use serde::Deserialize;
use serde_json::{json, Map, Value};

/// uuids asked for in one `runs.last` (the page asks for the rows it has).
const MAX_UUIDS: usize = 5000;

fn err(msg: impl Into<String>) -> Value {
    json!({ "ok": false, "error": msg.into() })
}

/// The `runs.*` ops by wire name; fields are read loosely (`control::args`) so that each op's
/// function refuses a bad one with its own message.
#[derive(Debug, Deserialize)]
pub enum RunsOp {
    /// `uuids`: the rows the page shows.
    #[serde(rename = "runs.last")]
    Last {
        #[serde(default, deserialize_with = "loose")]
        uuids: Option<Vec<Value>>,
    },
    /// `uuid`: one script; `since`: the cursor of the page's newest run.
    #[serde(rename = "runs.list")]
    List {
        #[serde(default, deserialize_with = "loose")]
        uuid: Option<String>,
        #[serde(default, deserialize_with = "loose")]
        since: Option<u64>,
    },
}

pub async fn run<E: Env>(p: &Provider<E>, op: RunsOp) -> Reply {
    match op {
        RunsOp::Last { uuids } => last(p, uuids).await.into(),
        RunsOp::List { uuid, since } => list(p, uuid, since).await.into(),
    }
}

async fn last<E: Env>(p: &Provider<E>, uuids: Option<Vec<Value>>) -> Value {
    let Some(items) = uuids else {
        return err("missing \"uuids\"");
    };
    if items.len() > MAX_UUIDS {
        return err(format!("at most {MAX_UUIDS} uuids at once"));
    }
    let uuids: Vec<String> = items
        .iter()
        .filter_map(Value::as_str)
        .filter(|u| is_uuid(u))
        .map(str::to_owned)
        .collect();
    match p.run_rings(&uuids).await {
        Ok(rings) => {
            let last: Map<String, Value> = uuids
                .iter()
                .zip(&rings)
                .map(|(u, r)| (u.clone(), runs::last_run_summary(r).unwrap_or(Value::Null)))
                .collect();
            json!({ "ok": true, "last": last })
        }
        Err(e) => err(e.to_string()),
    }
}

async fn list<E: Env>(p: &Provider<E>, uuid: Option<String>, since: Option<u64>) -> Value {
    let Some(uuid) = uuid.as_deref().filter(|u| is_uuid(u)) else {
        return err("missing or invalid \"uuid\"");
    };
    match p.run_rings(&[uuid.to_owned()]).await {
        Ok(rings) => {
            let (mut selected, more) = runs::select(&rings, since, false, 100);
            selected.iter_mut().for_each(shown);
            let cursor = selected
                .iter()
                .map(runs::seq_of)
                .max()
                .or(since)
                .unwrap_or(0);
            let dropped = rings
                .first()
                .map_or(0, |r| r.dropped)
                .saturating_add(p.runs_dropped_pending(uuid));
            json!({ "ok": true, "runs": selected, "cursor": cursor, "more": more, "dropped": dropped })
        }
        Err(e) => err(e.to_string()),
    }
}

/// A run as the Runs view shows it: the texts the script wrote (console lines, error names and
/// messages, its late errors') with every invisible, control or direction character marked
/// `⟨U+XXXX⟩`, as a review shows a source (`guard::diff::visible`). A script could otherwise
/// turn the rest of a line around (U+202E) or start what reads as another console line or
/// error with a line break inside one.
pub(crate) fn shown(run: &mut Value) {
    fn mark(o: &mut Value, keys: &[&str]) {
        for k in keys {
            if let Some(t) = o.get_mut(*k) {
                if let Some(s) = t.as_str() {
                    *t = Value::from(crate::guard::diff::visible(s));
                }
            }
        }
    }
    if let Some(e) = run.get_mut("error").filter(|e| e.is_object()) {
        mark(e, &["name", "message"]);
    }
    for list in ["console", "lateErrors"] {
        if let Some(items) = run.get_mut(list).and_then(Value::as_array_mut) {
            for item in items {
                mark(item, &["text", "name", "message"]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_runs_view_gets_a_scripts_texts_with_direction_and_line_breaks_marked() {
        let mut run = json!({"id": 1, "url": "https://a.example/",
            "error": {"name": "Type\u{202E}Error", "message": "m\nerror (line 9): fake", "line": 2},
            "console": [{"level": "log", "text": "ok\u{202E}txt.exe", "line": 3}],
            "lateErrors": [{"name": "E", "message": "x\u{200B}y", "rejection": false}]});
        shown(&mut run);
        assert_eq!(run["error"]["name"], "Type\u{27E8}U+202E\u{27E9}Error");
        assert_eq!(
            run["error"]["message"],
            "m\u{27E8}U+000A\u{27E9}error (line 9): fake"
        );
        assert_eq!(run["console"][0]["text"], "ok\u{27E8}U+202E\u{27E9}txt.exe");
        assert_eq!(run["lateErrors"][0]["message"], "x\u{27E8}U+200B\u{27E9}y");
        // What is not the script's text is as it was.
        assert_eq!(run["console"][0]["line"], 3);
        assert_eq!(run["url"], "https://a.example/");
    }
}
