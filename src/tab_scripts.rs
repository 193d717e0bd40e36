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

/// Documents whose state is asked per script at most (each a `webNavigation.getFrame`).
const MAX_DOCUMENTS: usize = 5;

/// The runs in `ring` reported from tab `tab`, newest first: the candidates for the page the tab
/// shows now. Not only the newest: a page back from the back/forward cache reports no new run,
/// and a subframe's later run (or one of a frame since gone) must not hide the top frame's (a
/// reviewer's); `list` takes the top frame's newest in a document still shown.
pub fn in_tab(ring: &runs::Ring, tab: i64) -> Vec<&Value> {
    let mut runs: Vec<&Value> = ring
        .runs
        .iter()
        .filter(|r| r.get("tabId").and_then(Value::as_i64) == Some(tab))
        .collect();
    runs.sort_by_key(|r| std::cmp::Reverse(runs::seq_of(r)));
    runs
}

/// Whether a run is of the top frame.
fn top(run: &Value) -> bool {
    run.get("frameId").and_then(Value::as_i64) == Some(0)
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
        // The top frame's newest run in a document still shown, else a frame's; a run whose
        // page the tab has left (or Chrome names no document) is not this page's.
        let mut shown: Vec<(&str, bool)> = Vec::new();
        let (mut top_run, mut frame_run) = (None, None);
        for run in in_tab(ring, tab) {
            let Some(doc) = run.get("documentId").and_then(Value::as_str) else {
                continue;
            };
            let active = match shown.iter().find(|(d, _)| *d == doc) {
                Some((_, a)) => *a,
                None if shown.len() >= MAX_DOCUMENTS => break,
                None => {
                    let a = matches!(p.env.document(doc).await, Ok(DocumentState::Active));
                    shown.push((doc, a));
                    a
                }
            };
            if active && top(run) {
                top_run = Some(run);
                break;
            }
            if active && frame_run.is_none() {
                frame_run = Some(run);
            }
        }
        let seen = top_run.or(frame_run).map_or(Value::Null, seen_json);
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
    fn a_tabs_runs_come_newest_first_whatever_the_order_stored() {
        let ring = runs::Ring {
            runs: vec![
                json!({"id": 5, "tabId": 7, "documentId": "b"}),
                json!({"id": 9, "tabId": 8, "documentId": "c"}),
                json!({"id": 3, "tabId": 7, "documentId": "a"}),
            ],
            dropped: 0,
        };
        let docs = |t| -> Vec<Value> {
            in_tab(&ring, t)
                .iter()
                .map(|r| r["documentId"].clone())
                .collect()
        };
        assert_eq!(docs(7), [json!("b"), json!("a")]);
        assert_eq!(docs(8), [json!("c")]);
        assert!(docs(1).is_empty());
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
