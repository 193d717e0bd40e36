//! The user's own reads and writes of scripts from the options page. Writes go through the same
//! write path as the agent's (lock, journal, registration), attributed to the user and audited
//! (`by_hand::write`).

use super::err;
use super::marked::marked;
use crate::env::Env;
use crate::provider::Provider;
use crate::scripts::record::is_uuid;
use crate::scripts::store;
use crate::tools::WriteArgs;
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

/// `scripts.list`: every script's summary, newest first (with Chrome's refusal of its
/// registration, if any: such a script does not run, and the URL its updates are checked at,
/// if it names one), and the records that could not be read.
pub(super) async fn list<E: Env>(p: &Provider<E>) -> Value {
    match p.scripts().await {
        Ok(snap) => {
            let refused = p.registration_errors().await;
            let mut scripts: Vec<Value> = snap
                .records
                .iter()
                .map(|r| {
                    let mut s = r.summary();
                    marked(&mut s);
                    if let (Some(o), Some(m)) = (s.as_object_mut(), refused.get(&r.uuid)) {
                        o.insert("registrationError".into(), m.clone());
                    }
                    // Where its updates are checked: the row offers "Check for update".
                    if let (Some(o), Some(u)) = (
                        s.as_object_mut(),
                        crate::scripts::update::urls(crate::web::platform(), &r.metadata),
                    ) {
                        let shown =
                            crate::guard::diff::visible(&crate::text::ellipsize(&u.check, 300));
                        o.insert("updateUrl".into(), shown.into());
                    }
                    s
                })
                .collect();
            scripts.reverse();
            let problems: Vec<Value> = snap
                .problems
                .iter()
                .map(|pr| json!({ "uuid": pr.uuid, "message": pr.message }))
                .collect();
            crate::value::object(vec![
                ("ok", true.into()),
                ("scripts", Value::Array(scripts)),
                ("problems", Value::Array(problems)),
            ])
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
            crate::value::object(vec![
                ("ok", true.into()),
                ("script", record.full(&source, json!(diagnostics))),
                ("shown", shown.into()),
            ])
        }
        Err(e) => err(e.to_string()),
    }
}

/// `scripts.setEnabled`: audited as the user's like every change by hand (`by_hand`).
pub(super) async fn set_enabled<E: Env>(
    p: &Provider<E>,
    msg: &Value,
    uuid: Option<String>,
    enabled: Option<bool>,
    revision: Option<u64>,
) -> Value {
    let uuid = match uuid_arg(uuid) {
        Ok(u) => u,
        Err(e) => return e,
    };
    let Some(enabled) = enabled else {
        return err("\"enabled\" must be true or false");
    };
    let args = WriteArgs::SetEnabled {
        uuid,
        enabled,
        revision,
    };
    crate::by_hand::write(p, msg, "set_script_enabled", args).await
}

/// `scripts.delete`: into the trash, audited as the user's.
pub(super) async fn delete<E: Env>(
    p: &Provider<E>,
    msg: &Value,
    uuid: Option<String>,
    revision: Option<u64>,
) -> Value {
    match uuid_arg(uuid) {
        Ok(uuid) => {
            let args = WriteArgs::Delete { uuid, revision };
            crate::by_hand::write(p, msg, "delete_script", args).await
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
