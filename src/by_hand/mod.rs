//! The user's own hands: the operations the extension's pages (options, popup) send for
//! history, restore, undo, the trash and editing. They go through the same store, validation,
//! locking and history as the agent's writes (`tools::run_write`), attributed to
//! [`BY_USER`]; they are not rate-limited or reviewed, and they are audited like the agent's
//! writes (caller `user`).

//!
//! One file per kind of operation: `history` (the revisions, a restore, undo), `trash` (its
//! list, "Delete forever" and "Empty trash"), `edit` (the editor's save and lint) and `update`
//! (checking a script's update URL, and storing the update the user reviewed); this file
//! holds the wire enum, the dispatch and the one write path they share.

mod edit;
mod history;
pub(crate) mod trash;
mod update;

pub use edit::lint;
pub use history::can_undo;
pub use update::UPDATE_TOOL;

use crate::control::args::{loose, Arg};
use crate::env::Env;
use crate::guard::audit::Entry;
use crate::guard::digest::digest_hex;
use crate::provider::Provider;
use crate::scripts::record::{is_uuid, BY_USER};
use crate::scripts::store::Actor;
use crate::tools::result::ToolError;
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
        /// The page showed the script live (its History of a live script): a restore must not
        /// bring it out of the trash it went to since. Absent: the trash's own Restore.
        #[serde(default)]
        live: Arg<bool>,
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
    /// Whether the script's update URL offers a newer version, and what it would change.
    #[serde(rename = "scripts.checkUpdate")]
    CheckUpdate {
        #[serde(default, deserialize_with = "loose")]
        uuid: Option<String>,
        /// False: a newer version's new files are not fetched ("Check all").
        #[serde(default, deserialize_with = "loose")]
        files: Option<bool>,
    },
    /// Store the version a check showed (`sha256`) over the `revision` it was checked against.
    #[serde(rename = "scripts.update")]
    Update {
        #[serde(default, deserialize_with = "loose")]
        uuid: Option<String>,
        #[serde(default, deserialize_with = "loose")]
        revision: Option<u64>,
        #[serde(default, deserialize_with = "loose")]
        sha256: Option<String>,
        /// The `id` of each new `@require`/`@resource` file the check showed, in its order.
        #[serde(default, deserialize_with = "loose")]
        files: Option<Vec<String>>,
    },
    #[serde(rename = "trash.list")]
    TrashList,
    /// `uuids`: delete those forever. `listed`: "Empty trash" of the scripts the page showed
    /// (one deleted after it read the list stays). Neither: everything in the trash.
    #[serde(rename = "trash.purge")]
    TrashPurge {
        #[serde(default)]
        uuids: Arg<Vec<Value>>,
        #[serde(default)]
        listed: Arg<Vec<Value>>,
    },
}

/// Runs one of this family's ops. `msg` is the whole message, for the audit digest and the
/// page it came from (`via`).
pub async fn run<E: Env>(p: &Provider<E>, op: HandOp, msg: &Value) -> Value {
    match op {
        HandOp::Revisions { uuid } => history::revisions(p, uuid).await,
        HandOp::Revision { uuid, revision } => history::revision(p, uuid, revision).await,
        HandOp::Restore {
            uuid,
            revision,
            current_revision,
            live,
        } => history::restore(p, msg, uuid, revision, current_revision, live).await,
        HandOp::Undo { uuid, caller, at } => history::undo(p, msg, uuid, caller, at).await,
        HandOp::Save {
            source,
            uuid,
            revision,
            enabled,
        } => edit::save(p, msg, source, uuid, revision, enabled).await,
        HandOp::CheckUpdate { uuid, files } => update::check(p, uuid, files).await,
        HandOp::Update {
            uuid,
            revision,
            sha256,
            files,
        } => update::apply(p, msg, uuid, revision, sha256, files).await,
        HandOp::TrashList => trash::list(p).await,
        HandOp::TrashPurge { uuids, listed } => trash::purge(p, msg, uuids, listed).await,
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
    write_via(p, msg, tool, args, page_of(msg), None).await
}

/// [`write`], recorded as having come `via` this (the page, or "update"); with `reviewed`, it
/// takes the files the user was shown instead of fetching (an update).
async fn write_via<E: Env>(
    p: &Provider<E>,
    msg: &Value,
    tool: &str,
    args: WriteArgs,
    via: &'static str,
    reviewed: Option<std::rc::Rc<crate::gm::asset_store::Reviewed>>,
) -> Value {
    let entry = Entry {
        at: p.env.now_ms(),
        tool: tool.to_owned(),
        caller: BY_USER.to_owned(),
        result: String::new(),
        target: args.target().map(str::to_owned),
        digest: digest_hex(msg),
        unchanged: false,
        from_trash: false,
        revision: None,
        purged: None,
        name: None,
        count: None,
    };
    let actor = Actor {
        by: BY_USER,
        via: Some(via),
    };
    match run_write(p, actor, args, Some(entry), None, None, reviewed)
        .await
        .result
    {
        Ok(mut r) => crate::value::object(vec![
            ("ok", true.into()),
            (
                "result",
                r.get_mut("structuredContent")
                    .map(Value::take)
                    .unwrap_or(Value::Null),
            ),
        ]),
        Err(e) => {
            let op = msg.get("op").and_then(Value::as_str).unwrap_or_default();
            json!({ "ok": false, "error": in_page_words(&e, tool, op), "code": e.code.as_str(), "details": e.details })
        }
    }
}

/// A refusal of the user's own write in the page's words: the tools' messages tell an agent
/// which tool to call and what to pass ("read it again with get_script", "pass its uuid"),
/// which the person at the page has no use for.
/// A stale revision is worded for the surface the user acted from (`tool`, the page's `op`):
/// only the editor holds text to copy.
fn in_page_words(e: &ToolError, tool: &str, op: &str) -> String {
    if let Some(now) = e
        .detail("currentRevision")
        .filter(|_| e.is_stale_revision())
    {
        let how = match (tool, op) {
            ("write_script", _) => "copy your text, open it again and redo your change",
            ("restore_script", "scripts.undo") => "look at the log again and Undo once more",
            ("restore_script", _) => {
                "open its History again and choose the version to restore once more"
            }
            (UPDATE_TOOL, _) => "check for its update again",
            _ => "try again",
        };
        return format!("it changed since you opened it (it is now at revision {now}): {how}");
    }
    if e.detail("existingUuid").is_some() {
        return "another script already has this @name and @namespace, or ones that read the same (look-alike letters and invisible characters count as the same): rename one of the two".to_owned();
    }
    if e.detail("inTrash").is_some() {
        return "it was deleted meanwhile: it is in the Trash, where Restore brings it back"
            .to_owned();
    }
    e.message.clone()
}
