//! The audit log as the pages show it.

use super::err;
use crate::env::Env;
use crate::guard::audit;
use crate::provider::Provider;
use crate::vec_map::VecSet;
use serde_json::{json, Value};

/// `audit.list`: both rings, merged newest first, the positions of the entries Undo can
/// revert (`by_hand::can_undo`, the rule Undo itself applies): the popup draws a button for
/// those and decides nothing; and the name of each target (a stored script's now, a trashed one's
/// when it was deleted), so the popup says which script a write changed, not only a uuid, and
/// when a write's own name (`Entry::name`, the name it left) is not the name now. Beside the
/// entries, not in them, so an export is the log alone.
pub(super) async fn list<E: Env>(p: &Provider<E>) -> Value {
    // A write the last worker left unfinished is listed at once, as INTERRUPTED, not once the
    // start-up recovery gets the write lock (R9: 1.5 s after the popup's first list).
    if let Err(e) = p.settle_interrupted_write().await {
        p.note(format!("could not record an interrupted write: {e}"));
    }
    match audit::read_all(&p.env).await {
        Ok(entries) => {
            let targets: VecSet<&str> =
                entries.iter().filter_map(|e| e.target.as_deref()).collect();
            // A stored script by its name now, one in the trash by the name it had when deleted;
            // what cannot be read is left unnamed: the names are a help, the log stands alone.
            let mut names = serde_json::Map::new();
            let mut live: VecSet<&str> = VecSet::new();
            // When each script in the trash was deleted.
            let mut deleted_at = crate::vec_map::VecMap::new();
            let mut read_both = true;
            match crate::scripts::trash::names(&p.env).await {
                Ok(trashed) => {
                    for (uuid, name, at) in trashed {
                        if targets.contains(uuid.as_str()) {
                            if let Some(name) = name {
                                names.insert(uuid.clone(), shown(&name));
                            }
                            deleted_at.insert(uuid, at);
                        }
                    }
                }
                Err(_) => read_both = false,
            }
            let snapshot = p.scripts().await;
            match &snapshot {
                Ok(snapshot) => {
                    for r in &snapshot.records {
                        if targets.contains(r.uuid.as_str()) {
                            names.insert(r.uuid.clone(), shown(&r.metadata.name));
                            live.insert(r.uuid.as_str());
                        }
                    }
                }
                Err(_) => read_both = false,
            }
            // A script neither stored nor in the trash was deleted for good: its writes have
            // nothing left to revert, so no Undo is offered for them; nor for a delete whose
            // script is out of the trash again (restored: that delete is undone already), or
            // in it by a later delete (restored, then deleted again: that later one is undone).
            // A delete's entry is stamped after the script went to the trash.
            let undoable: Vec<usize> = entries
                .iter()
                .enumerate()
                .filter(|(_, e)| crate::by_hand::can_undo(e).is_ok())
                .filter(|(_, e)| {
                    !read_both
                        || e.target.as_ref().is_some_and(|t| {
                            let deleted = deleted_at.get(t).copied();
                            let is_delete = e.tool == "delete_script";
                            (live.contains(t.as_str()) || deleted.is_some())
                                && !(is_delete && live.contains(t.as_str()))
                                && !(is_delete && deleted.is_some_and(|d| d > e.at))
                        })
                })
                .map(|(i, _)| i)
                .collect();
            json!({ "ok": true, "entries": entries, "undoable": undoable, "names": names })
        }
        Err(e) => err(e.to_string()),
    }
}

/// A script's name as the popup shows it: cut and marked as a write's entry keeps it
/// (`audit::kept_name`), so the two compare as like for like; invisible and direction
/// characters marked (a U+202E in an agent's name cannot reorder the line it is shown in).
fn shown(name: &str) -> Value {
    audit::kept_name(name).into()
}
