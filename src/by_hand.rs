//! The user's own hands: the operations the extension's pages (options, popup) send for
//! history, restore, undo, the trash and editing. They go through the same store, validation,
//! locking and history as the agent's writes (`tools::run_write`), attributed to
//! [`BY_USER`]; they are not rate-limited or reviewed, and they are audited like the agent's
//! writes (caller `user`).

use crate::control::args::{loose, Arg};
use crate::env::Env;
use crate::guard::audit::Entry;
use crate::guard::diff::line_diff;
use crate::guard::digest::digest_hex;
use crate::provider::Provider;
use crate::scripts::history::{self, Revision};
use crate::scripts::record::{is_uuid, BY_USER};
use crate::scripts::restore::{self, Current};
use crate::scripts::store::{self, Actor, ScriptError};
use crate::scripts::trash;
use crate::tools::catalog::MAX_SOURCE_BYTES;
use crate::tools::{run_write, WriteArgs};
use serde::Deserialize;
use serde_json::{json, Value};

fn err(msg: impl Into<String>) -> Value {
    json!({ "ok": false, "error": msg.into() })
}

fn uuid_of(uuid: Option<String>) -> Result<String, Value> {
    match uuid {
        Some(u) if is_uuid(&u) => Ok(u),
        _ => Err(err("\"uuid\" must be a script uuid")),
    }
}

fn revision_of(revision: Option<u64>, key: &str) -> Result<u64, Value> {
    match revision {
        Some(r) if r >= 1 => Ok(r),
        _ => Err(err(format!("\"{key}\" must be a revision (1 or more)"))),
    }
}

/// The history, trash and editing ops by wire name; fields are read loosely
/// (`control::args`) so that each op's function refuses a bad one with its own message.
#[derive(Debug, Deserialize)]
#[serde(tag = "op")]
pub enum HandOp {
    #[serde(rename = "scripts.revisions")]
    Revisions {
        #[serde(default, deserialize_with = "loose")]
        uuid: Option<String>,
    },
    #[serde(rename = "scripts.revision")]
    Revision {
        #[serde(default, deserialize_with = "loose")]
        uuid: Option<String>,
        #[serde(default, deserialize_with = "loose")]
        revision: Option<u64>,
    },
    #[serde(rename = "scripts.restore")]
    Restore {
        #[serde(default, deserialize_with = "loose")]
        uuid: Option<String>,
        #[serde(default, deserialize_with = "loose")]
        revision: Option<u64>,
        #[serde(default, rename = "currentRevision", deserialize_with = "loose")]
        current_revision: Option<u64>,
    },
    /// The audited write to undo, named by its script, its caller and its time.
    #[serde(rename = "scripts.undo")]
    Undo {
        #[serde(default, deserialize_with = "loose")]
        uuid: Option<String>,
        #[serde(default, deserialize_with = "loose")]
        caller: Option<String>,
        #[serde(default, deserialize_with = "loose")]
        at: Option<f64>,
    },
    /// No `uuid`: create; a `uuid`: edit the `revision` the editor loaded.
    #[serde(rename = "scripts.save")]
    Save {
        #[serde(default, deserialize_with = "loose")]
        source: Option<String>,
        #[serde(default)]
        uuid: Arg<String>,
        #[serde(default, deserialize_with = "loose")]
        revision: Option<u64>,
        #[serde(default, deserialize_with = "loose")]
        enabled: Option<bool>,
    },
    #[serde(rename = "trash.list")]
    TrashList,
    /// No `uuids`: empty the trash; a list: delete those forever.
    #[serde(rename = "trash.purge")]
    TrashPurge {
        #[serde(default)]
        uuids: Arg<Vec<Value>>,
    },
}

/// Runs one of this family's ops. `msg` is the whole message, for the audit digest and the
/// page it came from (`via`).
pub async fn run<E: Env>(p: &Provider<E>, op: HandOp, msg: &Value) -> Value {
    match op {
        HandOp::Revisions { uuid } => revisions(p, uuid).await,
        HandOp::Revision { uuid, revision } => self::revision(p, uuid, revision).await,
        HandOp::Restore {
            uuid,
            revision,
            current_revision,
        } => restore(p, msg, uuid, revision, current_revision).await,
        HandOp::Undo { uuid, caller, at } => undo(p, msg, uuid, caller, at).await,
        HandOp::Save {
            source,
            uuid,
            revision,
            enabled,
        } => save(p, msg, source, uuid, revision, enabled).await,
        HandOp::TrashList => trash_list(p).await,
        HandOp::TrashPurge { uuids } => trash_purge(p, msg, uuids).await,
    }
}

/// The page a user action came from, for provenance.
fn page_of(msg: &Value) -> &'static str {
    match msg.get("via").and_then(Value::as_str) {
        Some("popup") => "popup",
        _ => "options page",
    }
}

/// Runs a user's write: audited (caller `user`), never rate-limited or reviewed.
pub(crate) async fn write<E: Env>(
    p: &Provider<E>,
    msg: &Value,
    tool: &str,
    args: WriteArgs,
) -> Value {
    let entry = Entry {
        at: p.env.now_ms(),
        tool: tool.to_owned(),
        caller: BY_USER.to_owned(),
        result: String::new(),
        target: args.target().map(str::to_owned),
        digest: digest_hex(msg),
    };
    let actor = Actor {
        by: BY_USER,
        via: Some(page_of(msg)),
    };
    match run_write(p, actor, args, Some(entry)).await.result {
        Ok(r) => {
            json!({ "ok": true, "result": r.get("structuredContent").cloned().unwrap_or(Value::Null) })
        }
        Err(e) => {
            json!({ "ok": false, "error": e.message, "code": e.code.as_str(), "details": e.details })
        }
    }
}

/// `scripts.restore`: brings back one revision, if the script is still at `currentRevision`.
async fn restore<E: Env>(
    p: &Provider<E>,
    msg: &Value,
    uuid: Option<String>,
    revision: Option<u64>,
    current: Option<u64>,
) -> Value {
    let (uuid, revision, current) = match (
        uuid_of(uuid),
        revision_of(revision, "revision"),
        revision_of(current, "currentRevision"),
    ) {
        (Ok(u), Ok(r), Ok(c)) => (u, r, c),
        (Err(e), ..) | (_, Err(e), _) | (.., Err(e)) => return e,
    };
    let args = WriteArgs::Restore {
        uuid,
        revision,
        current_revision: current,
    };
    write(p, msg, "restore_script", args).await
}

/// `trash.list`: the trashed scripts, and the records that could not be read.
async fn trash_list<E: Env>(p: &Provider<E>) -> Value {
    match list_trash(p).await {
        Ok((items, problems)) => json!({
            "ok": true,
            "scripts": items.iter().map(trash::Trashed::summary).collect::<Vec<_>>(),
            "problems": problems.iter().map(|pr| json!({ "uuid": pr.uuid, "message": pr.message })).collect::<Vec<_>>(),
        }),
        Err(e) => err(e.to_string()),
    }
}

/// `trash.purge`: the user's action only, no tool reaches this.
async fn trash_purge<E: Env>(p: &Provider<E>, msg: &Value, uuids: Arg<Vec<Value>>) -> Value {
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
async fn list_trash<E: Env>(
    p: &Provider<E>,
) -> Result<(Vec<trash::Trashed>, Vec<store::Problem>), ScriptError> {
    {
        let _lock = p.write_lock().await;
        trash::purge_expired(&p.env).await?;
    }
    trash::list(&p.env).await
}

/// `scripts.revisions`: the current version and every kept one, newest first.
async fn revisions<E: Env>(p: &Provider<E>, uuid: Option<String>) -> Value {
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
async fn revision<E: Env>(p: &Provider<E>, uuid: Option<String>, rev: Option<u64>) -> Value {
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

/// Undo of one audited write: brings back the revision before the one that write made. The
/// write is named by its script, its caller and its time (the audit entry): the revision it
/// made is the newest one by that caller at or before that time. When the script changed
/// since, nothing is overwritten: the answer says so and carries the diff.
async fn undo<E: Env>(
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
    let (current, _) = match restore::plan(&p.env, &uuid, None).await {
        Ok(x) => x,
        Err(e) => return err(e.to_string()),
    };
    // The write was the delete (the script is still in the trash it put it in): bring it back,
    // whoever made the script's last version.
    if let Current::Trashed(t) = &current {
        if t.deleted_by == caller && t.deleted_at <= at {
            let now = t.record.revision;
            let args = WriteArgs::Restore {
                uuid,
                revision: now,
                current_revision: now,
            };
            return write(p, msg, "restore_script", args).await;
        }
    }
    let h = match history::load(&p.env, &uuid).await {
        Ok(h) => h,
        Err(e) => return err(e.to_string()),
    };
    let mut all: Vec<&crate::scripts::record::ScriptRecord> =
        h.revisions.iter().map(|r| &r.record).collect();
    all.push(current.record());
    let Some(made) = all
        .iter()
        .filter(|r| r.updated_by == caller && r.updated_at <= at)
        .max_by_key(|r| r.revision)
        .map(|r| r.revision)
    else {
        return err("the version that write made is no longer in the history");
    };
    let now = current.record().revision;
    if matches!(current, Current::Trashed(_)) && made == now {
        // The write was the delete (or the last change before it): bring the script back.
        return write(
            p,
            msg,
            "restore_script",
            WriteArgs::Restore {
                uuid,
                revision: now,
                current_revision: now,
            },
        )
        .await;
    }
    if made != now {
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
    let Some(before) = made.checked_sub(1).filter(|b| *b >= 1) else {
        // That write created the script: undoing it deletes it (to the trash).
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
        return err(ScriptError::RevisionNotFound {
            uuid,
            revision: before,
            current: now,
        }
        .to_string());
    }
    write(
        p,
        msg,
        "restore_script",
        WriteArgs::Restore {
            uuid,
            revision: before,
            current_revision: now,
        },
    )
    .await
}

/// Create (no uuid) or edit (uuid + the revision the editor loaded) a script by hand.
async fn save<E: Env>(
    p: &Provider<E>,
    msg: &Value,
    source: Option<String>,
    uuid: Arg<String>,
    revision: Option<u64>,
    enabled: Option<bool>,
) -> Value {
    let Some(source) = source else {
        return err("\"source\" must be the script's text");
    };
    if source.len() > MAX_SOURCE_BYTES {
        return err(format!(
            "the source is {} bytes, over the {MAX_SOURCE_BYTES}-byte limit",
            source.len()
        ));
    }
    let args = match uuid {
        Arg::Absent => WriteArgs::Create {
            source,
            enabled: enabled.unwrap_or(true),
        },
        uuid => {
            let uuid = match uuid {
                Arg::Is(u) => Some(u),
                _ => None,
            };
            let (uuid, revision) = match (uuid_of(uuid), revision_of(revision, "revision")) {
                (Ok(u), Ok(r)) => (u, r),
                (Err(e), _) | (_, Err(e)) => return e,
            };
            WriteArgs::Replace {
                uuid,
                revision,
                source,
                enabled,
            }
        }
    };
    write(p, msg, "write_script", args).await
}

/// Validation for the editor: diagnostics with their lines, without saving.
pub fn lint(source: &str) -> Value {
    match store::validate(source, MAX_SOURCE_BYTES) {
        Ok((_, d)) => json!({ "ok": true, "valid": true, "diagnostics": d }),
        Err(ScriptError::InvalidMetadata(d)) => {
            json!({ "ok": true, "valid": false, "diagnostics": d })
        }
        Err(e) => {
            json!({ "ok": true, "valid": false, "diagnostics": [{ "line": 1, "severity": "error", "message": e.to_string() }] })
        }
    }
}
