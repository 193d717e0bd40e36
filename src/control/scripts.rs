//! The user's own reads and writes of scripts from the options page. Writes go through the same
//! write path as the agent's (lock, journal, registration), attributed to the user.

use super::err;
use crate::env::Env;
use crate::provider::Provider;
use crate::scripts::record::{is_uuid, BY_USER};
use crate::scripts::store;
use crate::tools::{run_write, WriteArgs};
use serde_json::{json, Value};

fn uuid_arg(uuid: Option<String>) -> Result<String, Value> {
    match uuid {
        Some(u) if is_uuid(&u) => Ok(u),
        Some(u) => Err(err(format!(
            "\"{}\" is not a script uuid",
            crate::text::ellipsize(&u, 40)
        ))),
        None => Err(err("missing \"uuid\"")),
    }
}

/// `scripts.list`: every script's summary, newest first, and the records that could not be read.
pub(super) async fn list<E: Env>(p: &Provider<E>) -> Value {
    match p.scripts().await {
        Ok(snap) => {
            let mut scripts: Vec<Value> = snap.records.iter().map(|r| r.summary()).collect();
            scripts.reverse();
            let problems: Vec<Value> = snap
                .problems
                .iter()
                .map(|pr| json!({ "uuid": pr.uuid, "message": pr.message }))
                .collect();
            json!({ "ok": true, "scripts": scripts, "problems": problems })
        }
        Err(e) => err(e.to_string()),
    }
}

/// `scripts.get`: one script with its source and diagnostics.
pub(super) async fn get<E: Env>(p: &Provider<E>, uuid: Option<String>) -> Value {
    let uuid = match uuid_arg(uuid) {
        Ok(u) => u,
        Err(e) => return e,
    };
    match store::load_with_source(&p.env, &uuid).await {
        Ok((record, source)) => {
            let diagnostics = store::validate(&source, usize::MAX)
                .map(|(_, d)| d)
                .unwrap_or_default();
            // `shown`: the source as JavaScript splits it, hidden characters marked; the page
            // shows that, `source` is for copying.
            let shown = crate::guard::diff::shown_text(&source);
            json!({ "ok": true, "script": record.full(&source, json!(diagnostics)), "shown": shown })
        }
        Err(e) => err(e.to_string()),
    }
}

/// `scripts.setEnabled`.
pub(super) async fn set_enabled<E: Env>(
    p: &Provider<E>,
    uuid: Option<String>,
    enabled: Option<bool>,
) -> Value {
    let uuid = match uuid_arg(uuid) {
        Ok(u) => u,
        Err(e) => return e,
    };
    let Some(enabled) = enabled else {
        return err("\"enabled\" must be true or false");
    };
    write(
        p,
        WriteArgs::SetEnabled {
            uuid,
            enabled,
            revision: None,
        },
    )
    .await
}

/// `scripts.delete`: into the trash.
pub(super) async fn delete<E: Env>(p: &Provider<E>, uuid: Option<String>) -> Value {
    match uuid_arg(uuid) {
        Ok(uuid) => {
            write(
                p,
                WriteArgs::Delete {
                    uuid,
                    revision: None,
                },
            )
            .await
        }
        Err(e) => e,
    }
}

/// `scripts.lint`: the editor's diagnostics for a source it has not saved.
pub(super) fn lint(source: Option<String>) -> Value {
    match source {
        Some(src) => crate::by_hand::lint(&src),
        None => err("\"source\" must be the script's text"),
    }
}

async fn write<E: Env>(p: &Provider<E>, args: WriteArgs) -> Value {
    let actor = store::Actor {
        by: BY_USER,
        via: Some("options page"),
    };
    match run_write(p, actor, args, None).await.result {
        Ok(result) => {
            json!({ "ok": true, "result": result.get("structuredContent").cloned().unwrap_or(Value::Null) })
        }
        Err(e) => err(e.message),
    }
}
