//! Executing a write (write/patch/enable/delete/restore) under the write lock: storage first, with the
//! pending audit entry, then the registration, then the audit entry finalized.

use super::args::WriteArgs;
use super::catalog::MAX_SOURCE_BYTES;
use super::result::{diagnostics_text, success, ErrorCode, ToolError};
use super::Executed;
use crate::env::Env;
use crate::guard::audit::{Entry, Journaled};
use crate::provider::{Provider, SyncOutcome};
use crate::scripts::store::{self, Actor, Change, Snapshot as ScriptSnapshot};
use crate::scripts::{restore, trash};
use serde_json::{json, Value};

/// Executes a write for `actor` (a caller id, or `user` for the extension's own pages). With a
/// `journal` entry the write is audited write-ahead: pending in the `set` that stores the
/// script, finalized with the result before the write lock is released.
pub(crate) async fn run_write<E: Env>(
    p: &Provider<E>,
    actor: Actor<'_>,
    args: WriteArgs,
    journal: Option<Entry>,
) -> Executed {
    let _guard = p.write_lock().await;
    let named = args.target().map(str::to_owned);
    // The pending entry names its script even when the first set writes no record (a delete).
    let journal = journal.map(|j| Entry {
        target: j.target.or_else(|| named.clone()),
        ..j
    });
    let mut began = false;
    let done = match (&journal, p.settle_interrupted_write().await, p.scripts().await) {
        (Some(_), Err(e), _) => Executed {
            result: Err(ToolError::new(
                ErrorCode::StorageError,
                format!("the record of an earlier interrupted write could not be saved, so no write runs until it is: {e}"),
            )),
            target: named.clone(),
        },
        (_, _, Err(e)) => Executed {
            result: Err(ToolError::from(e)),
            target: named.clone(),
        },
        (_, _, Ok(snap)) => {
            p.registry_write_begins().await;
            began = true;
            let env = Journaled::new(&p.env, journal.clone());
            let held = p.hold_echoes();
            let done = write_locked(p, &env, actor, args, &snap).await;
            drop(held);
            done
        }
    };
    let done = Executed {
        target: done.target.or(named),
        ..done
    };
    // Both after the registration, still under the write lock, and independent of each other
    // (session flag, audit log): one round trip of waiting instead of two.
    let ends = async {
        if began {
            p.registry_write_ends().await;
        }
    };
    let audited = async {
        if let Some(j) = &journal {
            p.audit_final(&super::finished(j, &done, p.env.now_ms()))
                .await;
        }
    };
    futures::join!(ends, audited);
    done
}

async fn write_locked<E: Env>(
    p: &Provider<E>,
    env: &Journaled<'_, E>,
    actor: Actor<'_>,
    args: WriteArgs,
    snap: &ScriptSnapshot,
) -> Executed {
    let max = MAX_SOURCE_BYTES;
    let changed = match args {
        WriteArgs::Create { source, enabled } => {
            store::create(env, snap, actor, &source, enabled, max).await
        }
        WriteArgs::Replace {
            uuid,
            revision,
            source,
            enabled,
        } => store::replace(env, snap, actor, &uuid, revision, &source, enabled, max).await,
        WriteArgs::Patch {
            uuid,
            revision,
            edits,
        } => store::patch(env, snap, actor, &uuid, revision, &edits, max).await,
        WriteArgs::SetEnabled {
            uuid,
            enabled,
            revision,
        } => store::set_enabled(env, actor, &uuid, enabled, revision).await,
        WriteArgs::Restore {
            uuid,
            revision,
            current_revision,
        } => {
            return run_restore(
                p,
                env,
                actor,
                snap,
                uuid,
                Some(revision),
                Some(current_revision),
            )
            .await
        }
        WriteArgs::Delete { uuid, revision } => {
            return match trash::delete(env, snap, actor, &uuid, revision).await {
                Ok(record) => {
                    p.scripts_deleted(&uuid);
                    p.sync_registration(&uuid, None).await;
                    Executed {
                        result: Ok(success(
                            format!("Deleted {} ({uuid}).", record.metadata.name),
                            json!({ "uuid": uuid, "name": record.metadata.name, "deleted": true }),
                        )),
                        target: Some(uuid),
                    }
                }
                Err(e) => Executed {
                    result: Err(p.script_failure(e).into()),
                    target: Some(uuid),
                },
            };
        }
    };
    match changed {
        Ok(c) => {
            p.scripts_written(&c);
            let registered = p
                .sync_registration(
                    &c.record.uuid,
                    crate::scripts::sync::desired_for(&c.record, &c.source),
                )
                .await;
            Executed {
                target: Some(c.record.uuid.clone()),
                result: Ok(write_result(&c, registered)),
            }
        }
        Err(e) => Executed {
            result: Err(p.script_failure(e).into()),
            target: None,
        },
    }
}

/// Brings back a revision of a live or trashed script, under the write lock.
async fn run_restore<E: Env>(
    p: &Provider<E>,
    env: &Journaled<'_, E>,
    actor: Actor<'_>,
    snap: &ScriptSnapshot,
    uuid: String,
    revision: Option<u64>,
    expected: Option<u64>,
) -> Executed {
    let done = restore::restore(
        env,
        snap,
        actor,
        &uuid,
        revision,
        expected,
        MAX_SOURCE_BYTES,
    )
    .await;
    match done {
        Ok(c) => {
            p.scripts_written(&c);
            let registered = p
                .sync_registration(
                    &c.record.uuid,
                    crate::scripts::sync::desired_for(&c.record, &c.source),
                )
                .await;
            Executed {
                target: Some(uuid),
                result: Ok(write_result(&c, registered)),
            }
        }
        Err(e) => Executed {
            result: Err(p.script_failure(e).into()),
            target: Some(uuid),
        },
    }
}

fn write_result(c: &Change, outcome: SyncOutcome) -> Value {
    let r = &c.record;
    let verb = if c.created { "Created" } else { "Saved" };
    let registered = outcome == SyncOutcome::Registered;
    let state = match (r.enabled, &outcome) {
        (false, _) => "disabled: it does not run".to_owned(),
        (true, SyncOutcome::Registered) => "enabled and registered: it runs on matching pages from their next load".to_owned(),
        (true, SyncOutcome::Refused(m)) => format!("enabled, but Chrome refused to register it, so it does not run: {m}"),
        (true, SyncOutcome::Unavailable) => "enabled, but not running yet: Chrome's \"Allow User Scripts\" toggle is off for Lumo Userscripts".to_owned(),
        (true, SyncOutcome::NotRegistered) => "enabled, but it has no @match or @include, so it runs nowhere".to_owned(),
    };
    let registration_error = match &outcome {
        SyncOutcome::Refused(m) => Value::String(m.clone()),
        _ => Value::Null,
    };
    let text = format!(
        "{verb} {} (uuid {}, revision {}); {state}.{}",
        r.metadata.name,
        r.uuid,
        r.revision,
        diagnostics_text(&c.diagnostics)
    );
    json!({
        "script": r.summary(),
        "created": c.created,
        "registered": registered,
        "registrationError": registration_error,
        "diagnostics": c.diagnostics,
    })
    .as_object()
    .map(|o| success(text, Value::Object(o.clone())))
    .unwrap_or(Value::Null)
}
