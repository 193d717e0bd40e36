//! The pages' `runs.*` operations (the options page's last run per script and its Runs view).
//! Read-only: the pages show what the userscript channel stored; nothing here writes.
//!
//! - `runs.last {uuids}` → `{ok, last: {uuid: {id, at, url, ok, revision} | null}}`
//! - `runs.list {uuid, since?}` → `{ok, runs (newest first, ≤ 100), cursor, more, dropped}`

use crate::control::reply::Reply;
use crate::env::Env;
use crate::provider::Provider;
use crate::scripts::record::is_uuid;
use crate::scripts::runs;
use serde_json::{json, Map, Value};

/// uuids asked for in one `runs.last` (the page asks for the rows it has).
const MAX_UUIDS: usize = 5000;

fn err(msg: impl Into<String>) -> Value {
    json!({ "ok": false, "error": msg.into() })
}

pub async fn handle<E: Env>(p: &Provider<E>, op: &str, msg: &Value) -> Reply {
    match op {
        "runs.last" => last(p, msg).await.into(),
        "runs.list" => list(p, msg).await.into(),
        other => err(format!("unknown operation {other:?}")).into(),
    }
}

async fn last<E: Env>(p: &Provider<E>, msg: &Value) -> Value {
    let Some(items) = msg.get("uuids").and_then(Value::as_array) else {
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

async fn list<E: Env>(p: &Provider<E>, msg: &Value) -> Value {
    let Some(uuid) = msg
        .get("uuid")
        .and_then(Value::as_str)
        .filter(|u| is_uuid(u))
    else {
        return err("missing or invalid \"uuid\"");
    };
    let since = msg.get("since").and_then(Value::as_u64);
    match p.run_rings(&[uuid.to_owned()]).await {
        Ok(rings) => {
            let (selected, more) = runs::select(&rings, since, false, 100);
            let cursor = selected
                .iter()
                .filter_map(|r| r.get("id").and_then(Value::as_u64))
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
