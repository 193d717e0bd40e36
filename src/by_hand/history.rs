//! A script's history by hand: its revisions (`scripts.revisions`, `scripts.revision`), bringing
//! one back (`scripts.restore`) and the popup's Undo of one audited write (`scripts.undo`).

use super::{err, revision_of, uuid_of, write};
use crate::control::args::Arg;
use crate::env::Env;
use crate::guard::audit;
use crate::guard::diff::line_diff;
use crate::provider::Provider;
use crate::scripts::history::{self, History, Revision};
use crate::scripts::record::ScriptRecord;
use crate::scripts::restore::{self, Current};
use crate::scripts::store::ScriptError;
use crate::scripts::trash::Trashed;
use crate::tools::WriteArgs;
use serde_json::{json, Value};

/// `scripts.revisions`: the current version and every kept one, newest first.
pub(super) async fn revisions<E: Env>(p: &Provider<E>, uuid: Option<String>) -> Value {
    let uuid = match uuid_of(uuid) {
        Ok(u) => u,
        Err(e) => return e,
    };
    let (current, _) = match restore::plan(&p.env, &uuid, None).await {
        Ok(x) => x,
        Err(e) => return err(e.to_string()),
    };
    let h = match history::load(&p.env, &uuid).await {
        Ok(h) => h,
        Err(e) => return err(e.to_string()),
    };
    let now = Revision {
        record: current.record().clone(),
        source: current.source().to_owned(),
    };
    let mut rows = vec![now.summary(true)];
    rows.extend(h.revisions.iter().rev().map(|r| r.summary(false)));
    json!({
        "ok": true,
        "uuid": uuid,
        "name": current.record().metadata.name,
        "currentRevision": current.record().revision,
        "deleted": matches!(current, Current::Trashed(_)),
        "revisions": rows,
        "problems": h.problems,
    })
}

/// One revision's source, and its diff against the current source.
pub(super) async fn revision<E: Env>(
    p: &Provider<E>,
    uuid: Option<String>,
    rev: Option<u64>,
) -> Value {
    let (uuid, rev) = match (uuid_of(uuid), revision_of(rev, "revision")) {
        (Ok(u), Ok(r)) => (u, r),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    match restore::plan(&p.env, &uuid, Some(rev)).await {
        Ok((current, target)) => json!({
            "ok": true,
            "revision": target.summary(target.record.revision == current.record().revision),
            "source": target.source,
            "currentRevision": current.record().revision,
            "diff": line_diff(current.source(), &target.source).join("\n"),
        }),
        Err(e) => err(e.to_string()),
    }
}

/// `scripts.restore`: brings back one revision, if the script is still at `currentRevision`
/// and, when the page saw it `live`, still live (a delete does not change the revision).
pub(super) async fn restore<E: Env>(
    p: &Provider<E>,
    msg: &Value,
    uuid: Option<String>,
    revision: Option<u64>,
    current: Option<u64>,
    live: Arg<bool>,
) -> Value {
    let (uuid, revision, current) = match (
        uuid_of(uuid),
        revision_of(revision, "revision"),
        revision_of(current, "currentRevision"),
    ) {
        (Ok(u), Ok(r), Ok(c)) => (u, r, c),
        (Err(e), ..) | (_, Err(e), _) | (.., Err(e)) => return e,
    };
    let live_only = match live {
        Arg::Absent => false,
        Arg::Is(l) => l,
        Arg::Wrong => return err("\"live\" must be true or false"),
    };
    let args = WriteArgs::Restore {
        uuid,
        revision,
        current_revision: current,
        live_only,
        keep_enabled: true,
    };
    write(p, msg, "restore_script", args).await
}

/// The tools whose audited writes Undo can revert: each made one revision of one script (or
/// sent it to the trash). A try, an import or a purge made none, and "the revision before" it
/// would be another write's.
pub const UNDOABLE: [&str; 6] = [
    "write_script",
    super::update::UPDATE_TOOL,
    "patch_script",
    "set_script_enabled",
    "delete_script",
    "restore_script",
];

/// Whether Undo can revert the write `e` records: a successful write of one of the
/// [`UNDOABLE`] tools that changed something. The one rule: `undo` refuses what it refuses, and
/// `audit.list` tells the popup which entries get a button.
pub fn can_undo(e: &audit::Entry) -> Result<(), String> {
    // A write cut off before its entry was finalized landed (its pending entry rode in the
    // `set` that stored it); the revision it made is recorded unless it was a restore.
    let landed = e.result == "ok" || (e.result == audit::INTERRUPTED && e.revision.is_some());
    if !landed || e.target.is_none() {
        return Err(
            "that write is not in the audit log as a successful write to a script".to_owned(),
        );
    }
    if !UNDOABLE.contains(&e.tool.as_str()) {
        return Err(format!(
            "{} cannot be undone: it made no version of the script to go back from",
            e.tool
        ));
    }
    if e.unchanged {
        return Err("that write changed nothing (the script already was as asked), so there is nothing to undo".to_owned());
    }
    Ok(())
}

/// The audit log's entry of a write by `caller` at `at` to `uuid` that changed something. A
/// write that changed nothing made no revision: "the newest one by that caller" would then be
/// an earlier write's, and undoing it would revert a change the user did not pick.
async fn undoable<E: Env>(
    p: &Provider<E>,
    caller: &str,
    at: f64,
    uuid: &str,
) -> Result<audit::Entry, Value> {
    match audit::find_effect(&p.env, caller, at, uuid).await {
        Err(e) => Err(err(format!("the audit log could not be read: {e}"))),
        Ok(None) => Err(err(
            "that write is not in the audit log as a successful write to this script",
        )),
        Ok(Some(e)) => can_undo(&e).map(|()| e).map_err(err),
    }
}

/// Whether the trash holds what the delete `entry` records sending there. A restore makes a new
/// revision, so it does only if nothing brought the script back since. (An entry from before
/// revisions were recorded: a delete by that caller at or before its time.)
fn is_this_delete(entry: &audit::Entry, t: &Trashed) -> bool {
    match entry.revision {
        Some(r) => entry.tool == "delete_script" && t.record.revision == r,
        None => t.deleted_by == entry.caller && t.deleted_at <= entry.at,
    }
}

/// The revision the write `entry` made: the one it records, or (an entry from before revisions
/// were recorded) the newest one by that caller at or before its time.
fn made_by(entry: &audit::Entry, h: &History, current: &ScriptRecord) -> Option<u64> {
    entry.revision.or_else(|| {
        h.revisions
            .iter()
            .map(|r| &r.record)
            .chain([current])
            .filter(|r| r.updated_by == entry.caller && r.updated_at <= entry.at)
            .max_by_key(|r| r.revision)
            .map(|r| r.revision)
    })
}

/// Undo of `entry`'s write to a script now in the trash (`t`): the delete that put it there is
/// undone by a restore; any other write is not undone (that would undo the delete).
async fn undo_in_trash<E: Env>(
    p: &Provider<E>,
    msg: &Value,
    uuid: String,
    entry: &audit::Entry,
    t: &Trashed,
) -> Value {
    // The write was the delete (the script is still in the trash it put it in): bring it back,
    // whoever made the script's last version.
    if is_this_delete(entry, t) {
        let now = t.record.revision;
        let args = WriteArgs::Restore {
            uuid,
            revision: now,
            current_revision: now,
            live_only: false,
            keep_enabled: false,
        };
        return write(p, msg, "restore_script", args).await;
    }
    // An earlier delete of it, undone since (restored) before this one (R11: "restore it
    // first", then, restored, "undone already").
    if entry.tool == "delete_script" {
        return json!({
            "ok": false,
            "code": "CONFLICT",
            "error": "the script was restored since that delete, and deleted again later: that delete is undone already; nothing was changed. Undo the later delete (or Restore it from the trash) to bring it back.",
        });
    }
    // Another write, and the script was deleted since (by someone, or by that caller
    // later): undoing that write must not undo the delete.
    json!({
        "ok": false,
        "code": "CONFLICT",
        "error": "the script was deleted since that write (it is in the trash); nothing was changed. Restore it from the trash first if you still want to undo that write.",
    })
}

/// Undo of one audited write: brings back the revision before the one that write made. The
/// write is named by its script, its caller and its time (the audit entry, which must be in the
/// log as a successful, undoable write that changed something): the revision it made is the one
/// its entry records (an entry from before revisions were recorded: the newest one by that
/// caller at or before that time, which a clock set back can get wrong). A write that created
/// the script, or brought it back from the trash, is undone by a delete. When the script changed
/// since, nothing is overwritten: the answer says so and carries the diff.
pub(super) async fn undo<E: Env>(
    p: &Provider<E>,
    msg: &Value,
    uuid: Option<String>,
    caller: Option<String>,
    at: Option<f64>,
) -> Value {
    let uuid = match uuid_of(uuid) {
        Ok(u) => u,
        Err(e) => return e,
    };
    let (Some(caller), Some(at)) = (caller, at) else {
        return err("\"caller\" and \"at\" must name the audited write");
    };
    let entry = match undoable(p, &caller, at, &uuid).await {
        Ok(e) => e,
        Err(e) => return e,
    };
    let (current, _) = match restore::plan(&p.env, &uuid, None).await {
        Ok(x) => x,
        Err(e) => return err(e.to_string()),
    };
    if let Current::Trashed(t) = &current {
        return undo_in_trash(p, msg, uuid, &entry, t).await;
    }
    // A delete whose script is out of the trash again (restored since, by anyone, or by this
    // Undo already) is undone. Read as a write, its "version before" is the one before the
    // version it deleted: an earlier change reverted under the delete's name (R9).
    if entry.tool == "delete_script" {
        return json!({
            "ok": false,
            "code": "CONFLICT",
            "error": "the script is out of the trash since that delete (it was restored): the delete is undone already; nothing was changed.",
        });
    }
    let h = match history::load(&p.env, &uuid).await {
        Ok(h) => h,
        Err(e) => return err(e.to_string()),
    };
    let Some(made) = made_by(&entry, &h, current.record()) else {
        return err("the version that write made is no longer in the history");
    };
    let now = current.record().revision;
    // The script as that write left it, though revisions came since: a later write undone gave
    // its version back as a new revision. Undoing it then loses nothing made since, so Undo can
    // walk back a run of writes, newest first.
    let as_left = |r: &ScriptRecord| {
        let c = current.record();
        r.sha256 == c.sha256 && r.enabled == c.enabled && r.assets == c.assets
    };
    if made != now && !h.find(made).is_some_and(|r| as_left(&r.record)) {
        let diff = match h.find(made) {
            Some(r) => line_diff(&r.source, current.source()).join("\n"),
            None => String::new(),
        };
        return json!({
            "ok": false,
            "code": "CONFLICT",
            "error": format!("the script changed since that write (it made revision {made}; the script is at revision {now}); nothing was overwritten. The changes since are below; restore a revision from the options page if you still want to."),
            "diff": diff,
        });
    }
    let Some(before) = made.checked_sub(1).filter(|b| *b >= 1 && !entry.from_trash) else {
        // That write created the script, or brought it back from the trash: undoing it deletes
        // it (to the trash; what it was there is the revision before, in its history).
        return write(
            p,
            msg,
            "delete_script",
            WriteArgs::Delete {
                uuid,
                revision: Some(now),
            },
        )
        .await;
    };
    if h.find(before).is_none() {
        // A switch that kept no copy of the version it replaced (the storage was nearly full:
        // `store::set_enabled`) is undone by switching back.
        if entry.tool == "set_script_enabled" && made == now {
            let enabled = !current.record().enabled;
            let args = WriteArgs::SetEnabled {
                uuid,
                enabled,
                revision: Some(now),
            };
            return write(p, msg, "set_script_enabled", args).await;
        }
        return err(ScriptError::RevisionNotFound {
            uuid,
            revision: before,
            current: now,
        }
        .to_string());
    }
    // The script was live when read: a delete landing before this restore takes the write
    // lock leaves the revision as it is, so only `live_only` stops the restore from bringing
    // it back.
    write(
        p,
        msg,
        "restore_script",
        WriteArgs::Restore {
            uuid,
            revision: before,
            current_revision: now,
            live_only: true,
            keep_enabled: false,
        },
    )
    .await
}
