//! The trash by hand: its list (`trash.list`), and "Delete forever" / "Empty trash"
//! (`trash.purge`), which only the user can do: no tool reaches them.

use super::err;
use crate::control::args::Arg;
use crate::env::Env;
use crate::guard::audit::Entry;
use crate::guard::digest::digest_hex;
use crate::provider::Provider;
use crate::scripts::record::{is_uuid, BY_USER};
use crate::scripts::store::{self, ScriptError};
use crate::scripts::trash;
use serde_json::{json, Value};

/// `trash.list`: the trashed scripts, and the records that could not be read.
pub(super) async fn list<E: Env>(p: &Provider<E>) -> Value {
    match expired_purged(p).await {
        Ok((items, problems)) => json!({
            "ok": true,
            "scripts": items.iter().map(trash::Trashed::summary).collect::<Vec<_>>(),
            "problems": problems.iter().map(|pr| json!({ "uuid": pr.uuid, "message": pr.message })).collect::<Vec<_>>(),
        }),
        Err(e) => err(e.to_string()),
    }
}

/// `trash.purge`: the user's action only, no tool reaches this.
pub(super) async fn purge<E: Env>(p: &Provider<E>, msg: &Value, uuids: Arg<Vec<Value>>) -> Value {
    let only: Option<Vec<String>> = match uuids {
        Arg::Absent => None,
        Arg::Is(a) => {
            let u: Vec<String> = a
                .iter()
                .filter_map(Value::as_str)
                .filter(|u| is_uuid(u))
                .map(str::to_owned)
                .collect();
            if u.len() != a.len() {
                return err("\"uuids\" must be script uuids");
            }
            Some(u)
        }
        Arg::Wrong => return err("\"uuids\" must be a list of script uuids"),
    };
    let _lock = p.write_lock().await;
    let done = trash::purge(&p.env, only.as_deref()).await;
    // Audited like every change by hand: one entry for "Empty trash", one named script for
    // "Delete forever".
    let target = match only.as_deref() {
        Some([one]) => Some(one.clone()),
        _ => None,
    };
    p.audit(&Entry {
        at: p.env.now_ms(),
        tool: "purge_trash".to_owned(),
        caller: BY_USER.to_owned(),
        result: if done.is_ok() { "ok" } else { "STORAGE_ERROR" }.to_owned(),
        target,
        digest: digest_hex(msg),
    })
    .await;
    match done {
        Ok(n) => json!({ "ok": true, "purged": n }),
        Err(e) => err(e.to_string()),
    }
}

/// The trash, after what expired is deleted for good (under the write lock: it writes).
async fn expired_purged<E: Env>(
    p: &Provider<E>,
) -> Result<(Vec<trash::Trashed>, Vec<store::Problem>), ScriptError> {
    {
        let _lock = p.write_lock().await;
        trash::purge_expired(&p.env).await?;
    }
    trash::list(&p.env).await
}
