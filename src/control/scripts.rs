//! The user's own reads and writes of scripts from the options page. Writes go through the same
//! write path as the agent's (lock, journal, registration), attributed to the user and audited
//! (`by_hand::write`).

use super::err;
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

/// The page shows a script's rules, requests and version as they are, so an invisible or
/// direction character in them is marked (`⟨U+200B⟩`), as the review and the source view mark
/// it: `@include *://bank.example/*` with a zero-width space after it runs nowhere, and must
/// not read as if it ran there (such an `@exclude` is refused when parsed; one stored before is
/// shown with the same note). (The name and namespace are cleaned when they are parsed.)
fn marked(summary: &mut Value) {
    use crate::guard::diff::visible;
    let mark = |v: &mut Value| {
        if let Value::String(s) = v {
            *s = visible(s);
        }
    };
    let Some(o) = summary.as_object_mut() else {
        return;
    };
    for key in ["version", "description"] {
        if let Some(v) = o.get_mut(key) {
            mark(v);
        }
    }
    // A `@connect` line with what it reaches where the line alone may mislead (`2130706433`
    // is this computer).
    if let Some(Value::Array(items)) = o.get_mut("connects") {
        for v in items.iter_mut() {
            if let Value::String(c) = v {
                let shown = visible(c);
                *v = Value::String(
                    match crate::gm::connect::parse(crate::web::platform(), c)
                        .ok()
                        .and_then(|r| crate::gm::connect::note(&r, c))
                    {
                        Some(n) => format!("{shown} ({n})"),
                        None => shown,
                    },
                );
            }
        }
    }
    // A rule with what it really names where the rule alone misleads: `@exclude-match` of a
    // look-alike host is another site, a path with `é` or a capital in a glob's host matches
    // no page, and a file pattern's host is ignored.
    use crate::guard::effects::{rule_note, RuleKind};
    for (key, kind) in [
        ("matches", RuleKind::Pattern),
        ("excludeMatches", RuleKind::Pattern),
        ("includeGlobs", RuleKind::Glob),
        ("excludeGlobs", RuleKind::Glob),
    ] {
        if let Some(Value::Array(items)) = o.get_mut(key) {
            for v in items.iter_mut() {
                if let Value::String(r) = v {
                    let shown = visible(r);
                    *v = Value::String(match rule_note(kind, r) {
                        Some(n) => format!("{shown} ({n})"),
                        None => shown,
                    });
                }
            }
        }
    }
    for key in ["grants", "requires"] {
        if let Some(Value::Array(items)) = o.get_mut(key) {
            items.iter_mut().for_each(mark);
        }
    }
    if let Some(Value::Array(assets)) = o.get_mut("assets") {
        for a in assets.iter_mut().filter_map(Value::as_object_mut) {
            for key in ["url", "finalUrl", "name"] {
                if let Some(v) = a.get_mut(key) {
                    mark(v);
                }
            }
        }
    }
}

/// `scripts.list`: every script's summary, newest first (with Chrome's refusal of its
/// registration, if any: such a script does not run), and the records that could not be read.
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
