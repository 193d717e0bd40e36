//! The trash by hand: its list (`trash.list`), and "Delete forever" / "Empty trash"
//! (`trash.purge`), which only the user can do: no tool reaches them.

use super::err;
use crate::control::args::Arg;
use crate::env::Env;
use crate::guard::audit::{self, Entry, Journaled};
use crate::guard::digest::digest_hex;
use crate::provider::Provider;
use crate::scripts::record::{is_uuid, BY_USER};
use crate::scripts::store::{self, ScriptError};
use crate::scripts::trash;
use serde_json::{json, Value};

/// `trash.list`: the trashed scripts, the records that could not be read, and, when the trash
/// is full, the script the user's next Delete pushes out for good (`nextOut`: the options page
/// says so beside "Confirm delete", R9: a Delete removed the oldest trashed script unsaid).
pub(super) async fn list<E: Env>(p: &Provider<E>) -> Value {
    match expired_purged(p).await {
        Ok((items, problems)) => {
            let next_out = match trash::next_out(&p.env).await {
                Ok(Some((uuid, name))) => json!({
                    "uuid": uuid,
                    "name": name.map(|n| crate::guard::diff::visible(&n)),
                    "max": trash::MAX_TRASH,
                }),
                _ => Value::Null,
            };
            json!({
                "ok": true,
                "scripts": items.iter().map(trash::Trashed::summary).collect::<Vec<_>>(),
                "problems": problems.iter().map(|pr| json!({ "uuid": pr.uuid, "message": pr.message })).collect::<Vec<_>>(),
                "nextOut": next_out,
            })
        }
        Err(e) => err(e.to_string()),
    }
}

/// A list of script uuids, or why not.
fn uuid_list(name: &str, arg: Arg<Vec<Value>>) -> Result<Option<Vec<String>>, Value> {
    match arg {
        Arg::Absent => Ok(None),
        Arg::Is(a) => {
            let u: Vec<String> = a
                .iter()
                .filter_map(Value::as_str)
                .filter(|u| is_uuid(u))
                .map(str::to_owned)
                .collect();
            if u.len() != a.len() {
                return Err(err(format!("\"{name}\" must be script uuids")));
            }
            Ok(Some(u))
        }
        Arg::Wrong => Err(err(format!("\"{name}\" must be a list of script uuids"))),
    }
}

/// `trash.purge`: the user's action only, no tool reaches this. "Empty trash" names the scripts
/// the page listed: an agent's delete that lands while the user reads the list (or the confirm
/// dialog) is not purged with them.
pub(super) async fn purge<E: Env>(
    p: &Provider<E>,
    msg: &Value,
    uuids: Arg<Vec<Value>>,
    listed: Arg<Vec<Value>>,
) -> Value {
    let (named, listed) = match (uuid_list("uuids", uuids), uuid_list("listed", listed)) {
        (Ok(n), Ok(l)) => (n, l),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    if named.is_some() && listed.is_some() {
        return err("give \"uuids\" (Delete forever) or \"listed\" (Empty trash), not both");
    }
    let emptying = named.is_none();
    let only = named.or(listed);
    let _lock = p.write_lock().await;
    // A purge rewrites the GM values budget: no value change between its read and its write.
    let _values = p.gm_values.hold().await;
    // Audited like every change by hand, and write-ahead like them (`by_hand::write`): the
    // entries are pending in the purge's one `set`, so a worker stopped before its result is
    // recorded leaves them for the next worker to record as INTERRUPTED. One entry for each
    // script that goes, with its name (the log outlives the script: "Empty trash" clicked by
    // mistake must say what it took); one without a target when none was left to go.
    let target = match only.as_deref() {
        Some([one]) if !emptying => Some(one.clone()),
        _ => None,
    };
    let entry = Entry {
        at: p.env.now_ms(),
        tool: audit::PURGE_TOOL.to_owned(),
        caller: BY_USER.to_owned(),
        result: String::new(),
        target,
        digest: digest_hex(msg),
        unchanged: false,
        from_trash: false,
        revision: None,
        purged: None,
        name: None,
        count: None,
    };
    let failed = || Entry {
        at: p.env.now_ms(),
        result: "STORAGE_ERROR".to_owned(),
        ..entry.clone()
    };
    // An earlier entry that could not be saved for want of storage blocks every write but
    // this one: a purge only frees bytes, and refused, it would leave a full storage so for
    // good (R13). It then runs unjournaled, and its entries follow the earlier ones once it
    // freed room; a worker stopped between leaves it unaudited.
    let unsettled = p.settle_interrupted_write().await.err();
    let going = match trash::named(&p.env, only.as_deref()).await {
        Ok(g) => g,
        Err(e) => {
            p.audit(&failed()).await;
            return err(e.to_string());
        }
    };
    let mut entries: Vec<Entry> = going
        .iter()
        .map(|g| Entry {
            target: Some(g.uuid.clone()),
            purged: Some(audit::Purged::new(&g.name, g.why.as_str())),
            name: None,
            count: None,
            ..entry.clone()
        })
        .collect();
    if entries.is_empty() {
        entries.push(entry.clone());
    }
    let journal = if unsettled.is_none() {
        entries.first().cloned()
    } else {
        None
    };
    let env = Journaled::new(&p.env, journal);
    if unsettled.is_some() {
        p.note(format!(
            "purging unjournaled: {}",
            unsettled
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default()
        ));
    } else {
        env.also(entries.iter().skip(1).cloned().collect());
    }
    let done = p.runs_locked(trash::purge(&env, only.as_deref())).await;
    // Settled now, with the room the purge freed?
    let settled = unsettled.is_none()
        || (done.is_ok()
            && match p.settle_interrupted_write().await {
                Ok(()) => true,
                Err(e) => {
                    p.note(unsettled_text(&e));
                    false
                }
            });
    let failed = failed();
    // "Delete forever" of a script no longer in the trash (restored while the user read the
    // list or the confirm dialog) deleted nothing: not an "ok" purge (R15).
    let missing = !emptying && going.is_empty();
    recorded(p, done, entries, failed, settled, missing).await
}

/// A purge's answer, its entries saved: finalized from the slot they were pending in (or that
/// a purge run unjournaled cleared, once settled); else appended, since the slot may hold an
/// earlier worker's entry, which finalizing would clear.
async fn recorded<E: Env>(
    p: &Provider<E>,
    done: Result<usize, crate::scripts::store::ScriptError>,
    entries: Vec<Entry>,
    failed: Entry,
    settled: bool,
    missing: bool,
) -> Value {
    let at = p.env.now_ms();
    let result = if missing { "NOT_FOUND" } else { "ok" };
    let all: Vec<Entry> = entries
        .into_iter()
        .map(|e| Entry {
            at,
            result: result.to_owned(),
            ..e
        })
        .collect();
    match done {
        Ok(n) => {
            if settled {
                p.audit_final_all(&all).await;
            } else {
                for e in &all {
                    p.audit(e).await;
                }
            }
            if missing {
                return json!({
                    "ok": false,
                    "code": "NOT_FOUND",
                    "error": "that script is no longer in the trash (restored, or deleted for good, since the list was shown); nothing was deleted",
                });
            }
            json!({ "ok": true, "purged": n })
        }
        // A purge that failed deleted nothing (its one `set` did not happen, and carried the
        // pending entries): one entry says the user's action failed.
        Err(e) => {
            if settled {
                p.audit_final(&failed).await;
            } else {
                p.audit(&failed).await;
            }
            err(e.to_string())
        }
    }
}

fn unsettled_text(e: &audit::AuditError) -> String {
    audit::unsettled_message(e)
}

/// Deletes for good what is past its 30 days in the trash (or the oldest past its count bound),
/// audited: an entry for each script (caller `lumo`, the provider itself: no one asked), naming
/// it and saying why, pending in the purge's one `set` (`Journaled::also`) and finalized after
/// it, so a worker stopped between leaves them for the next worker, which records them as
/// INTERRUPTED. The caller holds the write lock and the GM values lock. Returns how many went.
pub(crate) async fn sweep<E: Env>(p: &Provider<E>) -> Result<usize, ScriptError> {
    let due = trash::due(&p.env).await?;
    if due.is_empty() {
        return Ok(0);
    }
    p.settle_interrupted_write()
        .await
        .map_err(|e| ScriptError::Storage(unsettled_text(&e)))?;
    let uuids: Vec<String> = due.iter().map(|g| g.uuid.clone()).collect();
    let mut entries = left_entries(p.env.now_ms(), &due).into_iter();
    let Some(first) = entries.next() else {
        return Ok(0);
    };
    let env = Journaled::new(&p.env, Some(first.clone()));
    env.also(entries.collect());
    let done = p.runs_locked(trash::purge(&env, Some(&uuids))).await;
    // A purge that failed stored nothing: its one `set` carries the entries.
    if done.is_ok() {
        let mut all = vec![first];
        all.extend(env.added());
        p.audit_final_all(&all).await;
    }
    done
}

/// The audit entries of scripts leaving the trash for good by themselves.
pub(crate) fn left_entries(at: f64, going: &[trash::Going]) -> Vec<Entry> {
    going
        .iter()
        .map(|g| Entry::left_trash(at, &g.uuid, &g.name, g.why.as_str()))
        .collect()
}

/// The trash, after what expired is deleted for good (under the write lock: it writes).
async fn expired_purged<E: Env>(
    p: &Provider<E>,
) -> Result<(Vec<trash::Trashed>, Vec<store::Problem>), ScriptError> {
    let swept = {
        let _lock = p.write_lock().await;
        let _values = p.gm_values.hold().await;
        sweep(p).await
    };
    // A sweep that failed (storage full, a write to settle first) stored nothing: the trash is
    // still listed, with why its expired scripts are still stored, rather than not at all.
    let (items, mut problems) = trash::list(&p.env).await?;
    if let Err(e) = swept {
        problems.push(store::Problem {
            uuid: String::new(),
            message: format!(
                "the scripts whose 30 days in the trash are over could not be deleted for good now ({e}); they are tried again the next time the trash is listed"
            ),
        });
    }
    Ok((items, problems))
}

#[cfg(test)]
mod tests {
    use crate::env::memory::MemoryEnv;
    use crate::env::{Area, Storage};
    use crate::gm::values::{self, Op};
    use crate::provider::Provider;
    use crate::scripts::{store, trash};
    use futures::executor::block_on;
    use serde_json::json;

    /// Both rewrite the GM values budget: without one lock, a value change that read the
    /// budget before the purge wrote it put the purged script's bytes back, counted for good.
    /// The change starts after each number of steps of the purge, so every interleaving runs.
    #[test]
    fn a_purge_and_a_value_change_at_once_leave_the_purged_script_out_of_the_budget() {
        for lead in 0..40 {
            let p = Provider::new(MemoryEnv::new());
            let make = |name: &str| {
                let src = format!("// ==UserScript==\n// @name {name}\n// @match https://a.example/*\n// ==/UserScript==\n");
                let snap = block_on(store::load_snapshot(&p.env)).unwrap();
                block_on(store::create(&p.env, &snap, "user", &src, true, 1 << 20))
                    .unwrap()
                    .record
                    .uuid
            };
            let (gone, stays) = (make("Gone"), make("Stays"));
            let set = |v: &str| Op::Set(vec![("k".to_owned(), v.to_owned())]);
            block_on(p.gm_values.apply(&p.env, &gone, &set("1"))).unwrap();
            block_on(p.gm_values.apply(&p.env, &stays, &set("1"))).unwrap();
            let snap = block_on(store::load_snapshot(&p.env)).unwrap();
            block_on(trash::delete(&p.env, &snap, "user".into(), &gone, None)).unwrap();
            // Every read yields once, so the two interleave as Chrome's storage lets them.
            p.env.get_yields.set(1);
            let purge = json!({"op": "trash.purge", "uuids": [gone.clone()]});
            let change = set("22");
            let later = async {
                for _ in 0..lead {
                    crate::env::memory::yield_now().await;
                }
                p.gm_values.apply(&p.env, &stays, &change).await
            };
            let (purged, changed) =
                block_on(async { futures::join!(crate::control::handle(&p, &purge), later) });
            assert_eq!(purged.value["ok"], json!(true), "{}", purged.value);
            changed.unwrap();
            p.env.get_yields.set(0);
            let got = block_on(p.env.get(Area::Local, &[values::BUDGET_KEY])).unwrap();
            let budget = &got[values::BUDGET_KEY];
            assert_eq!(budget.get(&gone), None, "after {lead} steps: {budget}");
            assert_eq!(budget[&stays], json!(3), "after {lead} steps: {budget}");
        }
    }
}
