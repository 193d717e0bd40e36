//! The popup's "Scripts on this tab" (`tab.scripts {tab}`): the scripts whose rules reach the
//! address the tab shows now, as `match_url` decides it, each with what its last run in that tab
//! reported if that run was in the page the tab shows (its document still active: not a page
//! the tab has since left); then the scripts that ran in that page though its address does not
//! reach them now — in a frame, or before a single-page site changed the address without
//! loading (found by where runs were reported, `scripts::in_tabs`) —; and a note where a row
//! may mislead (a script listed as running with no report: the page changed its address since
//! it loaded, or more than 10 scripts run there). Read-only: turning one on or off is
//! `scripts.setEnabled`.

use crate::env::{Area, DocumentState, Env, Tabs};
use crate::guard::diff::visible;
use crate::provider::Provider;
use crate::scripts::in_tabs::{InTabs, IN_TABS_KEY};
use crate::scripts::{registry, runs};
use serde_json::{json, Value};

fn err(msg: impl Into<String>) -> Value {
    json!({ "ok": false, "error": msg.into() })
}

/// Documents whose state is asked per script at most (each a `webNavigation.getFrame`).
const MAX_DOCUMENTS: usize = 5;
/// Scripts listed at most that ran in the page but are not reached from its address now.
const MAX_UNLISTED: usize = 20;

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
    let mut docs = Docs::default();
    let mut scripts = Vec::with_capacity(rows.len());
    // The address the page the tab shows was loaded at, when a run there says it was another.
    let mut loaded_at: Option<String> = None;
    for ((mut row, _), ring) in rows.into_iter().zip(&rings) {
        let run = page_run(p, ring, tab, &mut docs).await;
        note_load(run, &url, &mut loaded_at);
        if let Some(o) = row.as_object_mut() {
            o.insert("seen".into(), run.map_or(Value::Null, seen_json));
        }
        scripts.push(row);
    }
    let listed: Vec<String> = scripts
        .iter()
        .filter_map(|s| s["uuid"].as_str().map(str::to_owned))
        .collect();
    for row in ran_unlisted(p, &snap, tab, &listed, &mut docs, &url, &mut loaded_at).await {
        scripts.push(row);
    }
    // A script listed as running here with no report from this page: say why it may have none.
    let running = scripts.iter().filter(|s| s["runs"] == json!(true)).count();
    for s in &mut scripts {
        if s["runs"] != json!(true) || !s["seen"].is_null() {
            continue;
        }
        let note = match &loaded_at {
            Some(at) => format!("this page changed its address after it loaded (at {}), and scripts run when a page loads: this one runs here at the next load", crate::text::ellipsize(at, 200)),
            None if running > 10 => "more than 10 scripts run on this page: those past the tenth share one world without a channel to Lumo, so they run but send no report".to_owned(),
            None => continue,
        };
        if let Some(o) = s.as_object_mut() {
            o.insert("note".into(), visible(&note).into());
        }
    }
    json!({ "ok": true, "url": url, "scripts": scripts })
}

/// Documents asked about (`webNavigation.getFrame`), shared by the rows of one listing.
#[derive(Default)]
struct Docs(Vec<(String, bool)>);

/// The run of `ring` in the page tab `tab` shows: the top frame's newest in a document still
/// shown, else a frame's; a run whose page the tab has left (or Chrome names no document) is not
/// this page's. At most [`MAX_DOCUMENTS`] documents asked about per script.
async fn page_run<'a, E: Env>(
    p: &Provider<E>,
    ring: &'a runs::Ring,
    tab: i64,
    docs: &mut Docs,
) -> Option<&'a Value> {
    let mut asked = 0;
    let mut frame_run = None;
    for run in in_tab(ring, tab) {
        let Some(doc) = run.get("documentId").and_then(Value::as_str) else {
            continue;
        };
        let active = match docs.0.iter().find(|(d, _)| d == doc) {
            Some((_, a)) => *a,
            None if asked >= MAX_DOCUMENTS => break,
            None => {
                asked += 1;
                let a = matches!(p.env.document(doc).await, Ok(DocumentState::Active));
                docs.0.push((doc.to_owned(), a));
                a
            }
        };
        if active && top(run) {
            return Some(run);
        }
        if active && frame_run.is_none() {
            frame_run = Some(run);
        }
    }
    frame_run
}

/// Keeps in `loaded_at` the address the top frame's page was loaded at, when `run` (in the page
/// the tab shows) says it is not the address the tab shows now (`history.pushState`).
fn note_load(run: Option<&Value>, url: &str, loaded_at: &mut Option<String>) {
    let Some(run) = run.filter(|r| top(r)) else {
        return;
    };
    match run.get("url").and_then(Value::as_str) {
        Some(at) if at != url && at != runs::INCOGNITO_URL && loaded_at.is_none() => {
            *loaded_at = Some(at.to_owned());
        }
        _ => {}
    }
}

/// Scripts not reached from the address the tab shows that ran in the page it shows: its
/// frames' scripts, and the ones that ran before the page changed its address without loading
/// (a single-page site's `history.pushState`: Chrome injects nothing then). Found by where runs
/// were reported (`in_tabs`), at most [`MAX_UNLISTED`], each with its run and why it is listed.
async fn ran_unlisted<E: Env>(
    p: &Provider<E>,
    snap: &crate::scripts::store::Snapshot,
    tab: i64,
    listed: &[String],
    docs: &mut Docs,
    url: &str,
    loaded_at: &mut Option<String>,
) -> Vec<Value> {
    let index = match p.env.get(Area::Session, &[IN_TABS_KEY]).await {
        Ok(got) => InTabs::decode(got.get(IN_TABS_KEY)),
        Err(_) => return Vec::new(),
    };
    // Candidates: a stored script's place in a document still shown, newest first (places of
    // pages the tab has left, or of scripts deleted since, do not take the places of these).
    let mut uuids: Vec<String> = Vec::new();
    let mut asked = 0;
    for place in index.of_tab(tab) {
        if uuids.len() >= MAX_UNLISTED {
            break;
        }
        if listed.contains(&place.uuid)
            || uuids.contains(&place.uuid)
            || !snap.records.iter().any(|r| r.uuid == place.uuid)
        {
            continue;
        }
        let active = match docs.0.iter().find(|(d, _)| *d == place.document) {
            Some((_, a)) => *a,
            None if asked >= MAX_UNLISTED => continue,
            None => {
                asked += 1;
                let a = matches!(
                    p.env.document(&place.document).await,
                    Ok(DocumentState::Active)
                );
                docs.0.push((place.document.clone(), a));
                a
            }
        };
        if active {
            uuids.push(place.uuid.clone());
        }
    }
    let Ok(rings) = p.run_rings(&uuids).await else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (uuid, ring) in uuids.iter().zip(&rings) {
        let Some(r) = snap.records.iter().find(|r| &r.uuid == uuid) else {
            continue;
        };
        let Some(run) = page_run(p, ring, tab, docs).await else {
            continue;
        };
        note_load(Some(run), url, loaded_at);
        let raw = run.get("url").and_then(Value::as_str).unwrap_or_default();
        let at = crate::text::ellipsize(raw, 200);
        let note = if !top(run) {
            format!("it ran in a frame of this page, at {at}")
        } else if raw != url && raw != runs::INCOGNITO_URL {
            format!("it ran when this page loaded, at {at}; the page has changed its address since without loading (as single-page sites do), to one its rules do not reach: it does not run at the next load of this address")
        } else {
            "it ran when this page loaded; its rules do not reach this page's address now (they changed since, or the page changed its address): it does not run at the next load".to_owned()
        };
        out.push(json!({
            "uuid": r.uuid,
            "name": visible(&r.metadata.name),
            "enabled": r.enabled,
            "runs": true,
            "reason": "",
            "seen": seen_json(run),
            "note": visible(&note),
        }));
    }
    out
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
