//! The popup's "Scripts on this tab" (`tab.scripts {tab}`): the scripts whose rules reach the
//! address the tab shows now, as `match_url` decides it, each with what its last run in that tab
//! reported if that run was in the page the tab shows (its document still active: not a page
//! the tab has since left). Read-only: turning one on or off is `scripts.setEnabled`.

use crate::env::{DocumentState, Env, Tabs};
use crate::guard::diff::visible;
use crate::provider::Provider;
use crate::scripts::{registry, runs};
use serde_json::{json, Value};

fn err(msg: impl Into<String>) -> Value {
    json!({ "ok": false, "error": msg.into() })
}

/// The newest run in `ring` reported from tab `tab` (any frame): the only one that can be of
/// the page the tab shows now, since a page's runs come after those of the pages before it.
pub fn newest_in_tab(ring: &runs::Ring, tab: i64) -> Option<&Value> {
    ring.runs
        .iter()
        .filter(|r| r.get("tabId").and_then(Value::as_i64) == Some(tab))
        .max_by_key(|r| runs::seq_of(r))
}

/// What the popup shows of a run: its outcome, its error, and how many errors came later.
fn seen_json(run: &Value) -> Value {
    let mut run = run.clone();
    crate::runs_ops::shown(&mut run);
    let late = run
        .get("lateErrors")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    json!({
        "at": run.get("at").cloned().unwrap_or(Value::Null),
        "ok": run.get("ok").cloned().unwrap_or(Value::Null),
        "revision": run.get("revision").cloned().unwrap_or(Value::Null),
        "error": run.get("error").cloned().unwrap_or(Value::Null),
        "lateErrors": late,
    })
}

pub async fn list<E: Env>(p: &Provider<E>, tab: i64) -> Value {
    let url = match Tabs::tab(&p.env, tab).await {
        Ok(t) => t.url,
        Err(e) => return err(format!("that tab is not open: {e}")),
    };
    // The rules' regular expressions are costed on addresses up to this length (`match_url`
    // refuses longer ones the same way).
    let max = crate::scripts::rule_syntax::COST_ADDRESS_CHARS;
    let normalized = crate::scripts::rules::normalize_url(&url);
    if normalized
        .as_ref()
        .is_some_and(|h| u64::try_from(h.chars().count()).unwrap_or(u64::MAX) > max)
    {
        return json!({ "ok": true, "url": url, "scripts": [], "note": format!("This page's address is over {max} characters: its scripts are not listed here.") });
    }
    let snap = match p.scripts().await {
        Ok(s) => s,
        Err(e) => return err(e.to_string()),
    };
    let refused = p.registration_errors().await;
    let toggle_on = p.capability().ready;
    let mut rows: Vec<(Value, String)> = Vec::new();
    for r in &snap.records {
        // An empty URL is a tab the extension may not read (no script runs there): none match.
        let (v, _) = registry::decide(&r.metadata, &url);
        if !v.runs() {
            continue;
        }
        let refusal = refused.get(&r.uuid).and_then(Value::as_str);
        let mut reason = v.explain();
        if !r.enabled {
            reason.push_str(", but the script is off");
        } else if let Some(m) = refusal {
            reason.push_str(&format!(", but Chrome refused to register it: {m}"));
        } else if !toggle_on {
            reason.push_str(", but \"Allow User Scripts\" is off for Lumo Userscripts");
        }
        rows.push((
            json!({
                // The script's own text, its invisible and direction characters marked, as
                // every page shows it (a name could otherwise turn the row around).
                "uuid": r.uuid,
                "name": visible(&r.metadata.name),
                "enabled": r.enabled,
                "runs": r.enabled && refusal.is_none() && toggle_on,
                "reason": visible(&reason),
            }),
            r.uuid.clone(),
        ));
    }
    let uuids: Vec<String> = rows.iter().map(|(_, u)| u.clone()).collect();
    let rings = match p.run_rings(&uuids).await {
        Ok(r) => r,
        Err(e) => return err(e.to_string()),
    };
    let mut scripts = Vec::with_capacity(rows.len());
    for ((mut row, _), ring) in rows.into_iter().zip(&rings) {
        let mut seen = Value::Null;
        if let Some(run) = newest_in_tab(ring, tab) {
            let doc = run.get("documentId").and_then(Value::as_str);
            // A run whose page the tab has left (or Chrome names no document) is not this
            // page's: the script has not been seen running here.
            if let Some(doc) = doc {
                if matches!(p.env.document(doc).await, Ok(DocumentState::Active)) {
                    seen = seen_json(run);
                }
            }
        }
        if let Some(o) = row.as_object_mut() {
            o.insert("seen".into(), seen);
        }
        scripts.push(row);
    }
    json!({ "ok": true, "url": url, "scripts": scripts })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_run_of_the_tab_is_taken_whatever_the_order_stored() {
        let ring = runs::Ring {
            runs: vec![
                json!({"id": 5, "tabId": 7, "documentId": "b"}),
                json!({"id": 9, "tabId": 8, "documentId": "c"}),
                json!({"id": 3, "tabId": 7, "documentId": "a"}),
            ],
            dropped: 0,
        };
        assert_eq!(newest_in_tab(&ring, 7).unwrap()["documentId"], "b");
        assert_eq!(newest_in_tab(&ring, 8).unwrap()["documentId"], "c");
        assert!(newest_in_tab(&ring, 1).is_none());
    }

    #[test]
    fn a_runs_texts_are_shown_marked_and_late_errors_counted() {
        let run = json!({"id": 1, "at": 5.0, "ok": false, "revision": 2,
            "error": {"name": "Error", "message": "a\u{202E}b", "line": 3},
            "lateErrors": [{"name": "E", "message": "x"}, {"name": "E", "message": "y"}]});
        let s = seen_json(&run);
        assert_eq!(s["error"]["message"], "a\u{27E8}U+202E\u{27E9}b");
        assert_eq!(s["lateErrors"], 2);
        assert_eq!(s["ok"], false);
    }
}
