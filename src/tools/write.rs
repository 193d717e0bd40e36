//! Executing a write (write/patch/enable/delete/restore) under the write lock: storage first, with the
//! pending audit entry, then the registration with the audit entry finalized beside it.

use super::args::WriteArgs;
use super::catalog::MAX_SOURCE_BYTES;
use super::result::{diagnostics_text, success, ErrorCode, ToolError};
use super::Executed;
use crate::env::Env;
use crate::gm::asset_store::Reviewed;
use crate::guard::audit::{Entry, Journaled};
use crate::provider::{Provider, SyncOutcome};
use crate::scripts::record::ScriptRecord;
use crate::scripts::store::{self, Actor, Change, ScriptError, Snapshot as ScriptSnapshot};
use crate::scripts::{history, restore, sync, trash};
use futures::channel::oneshot;
use serde_json::{json, Value};
use std::rc::Rc;

/// Executes a write for `actor` (a caller id, or `user` for the extension's own pages). With a
/// `journal` entry the write is audited write-ahead: pending in the `set` that stores the
/// script, finalized with the result before the write lock is released. With a `slot`, no
/// change goes out before the caller's rate slot is recorded, and none if it is not (its
/// `Err` is the write's storage error). With `still`, the write begins only if that says it
/// may once the lock is held (an agent's write: the user may have flipped a switch while it
/// waited), and is refused with its error otherwise; it is asked again before the first change
/// (the write's `@require` fetches may have taken 30 s). With `reviewed`, the files its review
/// fetched and showed are the only ones it takes: it asks the network for nothing.
pub(crate) async fn run_write<'a, E: Env>(
    p: &'a Provider<E>,
    actor: Actor<'_>,
    args: WriteArgs,
    journal: Option<Entry>,
    slot: Option<oneshot::Receiver<Result<(), String>>>,
    still: Option<&'a Still<'a>>,
    reviewed: Option<Rc<Reviewed>>,
) -> Executed {
    let _guard = p.write_lock().await;
    let named = args.target().map(str::to_owned);
    // The pending entry names its script even when the first set writes no record (a delete).
    let journal = journal.map(|j| Entry {
        target: j.target.or_else(|| named.clone()),
        ..j
    });
    if let Some(still) = still {
        if let Err(e) = still().await {
            let done = Executed {
                result: Err(e),
                target: named,
            };
            // Appended, not finalized: nothing of this write is in the pending slot, which may
            // still hold the entry of a write an earlier worker stored (settled only below).
            if let Some(j) = &journal {
                p.audit(&super::finished(j, &done, p.env.now_ms())).await;
            }
            return done;
        }
    }
    // The second answer of `still`, kept whole: the change it refused fails as a storage error.
    let refusal: std::cell::RefCell<Option<ToolError>> = std::cell::RefCell::new(None);
    let again = still.map(|still| -> crate::guard::audit::Check<'_> {
        let refusal = &refusal;
        Box::pin(async move {
            still().await.map_err(|e| {
                let why = e.message.clone();
                *refusal.borrow_mut() = Some(e);
                why
            })
        })
    });
    let mut began = false;
    let mut finalized = false;
    let done = match (
        &journal,
        p.settle_interrupted_write().await,
        p.scripts().await,
    ) {
        (Some(_), Err(e), _) => Executed {
            result: Err(ToolError::new(
                ErrorCode::StorageError,
                crate::guard::audit::unsettled_message(&e),
            )),
            target: named.clone(),
        },
        (_, _, Err(e)) => Executed {
            result: Err(ToolError::from(e)),
            target: named.clone(),
        },
        (_, _, Ok(snap)) => {
            // The registry's session flag is cleared beside the write's first read, and its
            // first change to storage waits for it (`Journaled::after`).
            let (cleared, gate) = futures::channel::oneshot::channel();
            let begins = async {
                p.registry_write_begins().await;
                let _ = cleared.send(());
            };
            began = true;
            let env = Journaled::new(&p.env, journal.clone())
                .after(gate)
                .after_slot(slot)
                .before_first_change(again)
                .serving(reviewed);
            let held = p.hold_echoes();
            let ((), (done, audited)) = futures::join!(
                begins,
                write_locked(p, &env, actor, args, snap, journal.as_ref())
            );
            drop(held);
            finalized = audited;
            done
        }
    };
    let done = Executed {
        target: done.target.or(named),
        result: match refusal.borrow_mut().take() {
            Some(e) if done.result.is_err() => Err(e),
            _ => done.result,
        },
    };
    // After the registration, still under the write lock: "synced" is owed (stored after the
    // reply), and the audit entry of a write that did not store, which waited for nothing.
    if began {
        p.registry_write_ends();
    }
    if let (Some(j), false) = (&journal, finalized) {
        let entry = super::finished(j, &done, p.env.now_ms());
        // A write that never began had the slot settled by no one (or failed to settle it): the
        // earlier worker's entry there must stay for the next settle, so only appended.
        if began {
            p.audit_final(&entry).await;
        } else {
            p.audit(&entry).await;
        }
    }
    done
}

/// Whether a write may still begin, asked each time it is called (boxed: one `run_write` state
/// machine for every caller).
pub(crate) type Still<'a> = dyn Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), ToolError>> + 'a>>
    + 'a;

/// What the storage step of a write did.
enum Stored {
    Changed(Result<Change, ScriptError>),
    Deleted(Result<ScriptRecord, ScriptError>),
}

/// The write under the lock: its storage step, then its registration. Also `true` when it
/// finalized the `journal` entry itself (the write was stored).
async fn write_locked<E: Env>(
    p: &Provider<E>,
    env: &Journaled<'_, E>,
    actor: Actor<'_>,
    args: WriteArgs,
    snap: Rc<ScriptSnapshot>,
    journal: Option<&Entry>,
) -> (Executed, bool) {
    let named = args.target().map(str::to_owned);
    // A delete or a disable registers nothing, so it needs no world configurations.
    let may_register = !matches!(
        args,
        WriteArgs::Delete { .. } | WriteArgs::SetEnabled { enabled: false, .. }
    );
    // What Chrome holds for a script the write names is read beside the storage calls, not
    // after them (a new script's id is not known before its `set`).
    // So are the recorded refusals (read once per worker), which the registration updates:
    // read after its `update`, they would wait as the audit entry would (below).
    let held = async {
        let held = async {
            match &named {
                Some(u) => Some(sync::read_held(&p.env, u, may_register).await),
                None => None,
            }
        };
        futures::join!(held, p.registration_errors()).0
    };
    // A delete into a full trash purges its oldest, and rewrites the GM values budget: no value
    // change between its read of that budget and its write (held for the storage step only).
    let values = match args {
        WriteArgs::Delete { .. } => Some(p.gm_values.hold().await),
        _ => None,
    };
    let (stored, held) = futures::join!(store_step(env, actor, args, &snap), held);
    drop(values);
    // Let go of the snapshot before the cache is brought up to date, so the cache changes it
    // in place instead of copying every record (`Rc::make_mut`).
    drop(snap);
    // A storage step that stored nothing has not waited for the rate slot: the registration
    // must not change either unless it was recorded.
    let stored = match (stored, env.cleared().await) {
        (Stored::Changed(Ok(_)) | Stored::Deleted(Ok(_)), Err(e)) => {
            Stored::Changed(Err(ScriptError::Storage(e.0)))
        }
        (stored, _) => stored,
    };
    // Once storage holds the write its audit entry is known ("ok", naming the script: the
    // registration's outcome is in the result, not the entry), so it is finalized beside the
    // registration, with the revisions the history dropped removed: storage calls issued after
    // an `update` wait until Chrome has saved every registration (~140 ms at 1,000 stored;
    // ARCHITECTURE.md, Decisions).
    let finalize = |record: &ScriptRecord, unchanged: bool, from_trash: bool| {
        let entry = journal.map(|j| Entry {
            at: p.env.now_ms(),
            result: "ok".to_owned(),
            target: Some(record.uuid.clone()),
            unchanged,
            from_trash,
            revision: Some(record.revision),
            name: Some(crate::guard::audit::kept_name(&record.metadata.name)),
            ..j.clone()
        });
        // With the entries of what its `set` deleted for good besides (`Journaled::also`).
        let added = env.added();
        async move {
            if let Some(e) = entry {
                if added.is_empty() {
                    p.audit_final(&e).await;
                } else {
                    let mut all = vec![e];
                    all.extend(added);
                    p.audit_final_all(&all).await;
                }
            }
        }
    };
    match stored {
        Stored::Changed(Ok(mut c)) => {
            let stale = std::mem::take(&mut c.stale_history);
            p.scripts_written(&c);
            let (registered, (), ()) = futures::join!(
                p.sync_registration(
                    &c.record.uuid,
                    sync::desired_for(&c.record, &c.source),
                    held,
                ),
                finalize(&c.record, c.unchanged, c.from_trash),
                history::remove_stale(&p.env, &stale),
            );
            let done = Executed {
                target: Some(c.record.uuid.clone()),
                result: Ok(write_result(&c, registered)),
            };
            (done, journal.is_some())
        }
        Stored::Deleted(Ok(record)) => {
            let uuid = record.uuid.clone();
            p.scripts_deleted(&uuid);
            futures::join!(
                p.sync_registration(&uuid, None, held),
                finalize(&record, false, false),
                // Its tab objects end with it (a restore starts without them).
                p.forget_tab_objects(&uuid)
            );
            let done = Executed {
                result: Ok(success(
                    deleted_text(&record),
                    json!({ "uuid": uuid, "name": record.metadata.name, "deleted": true }),
                )),
                target: Some(uuid),
            };
            (done, journal.is_some())
        }
        Stored::Changed(Err(e)) | Stored::Deleted(Err(e)) => {
            let done = Executed {
                result: Err(failure(p, e).await),
                target: named,
            };
            (done, false)
        }
    }
}

/// What a delete says: where the script went, and the numbers `restore_script` needs.
fn deleted_text(record: &crate::scripts::record::ScriptRecord) -> String {
    format!(
        "Deleted {} ({}): it no longer runs, and it is in the trash for {} days (at most {} scripts are kept there). restore_script with revision and current_revision {} brings it back.",
        crate::text::quoted(&record.metadata.name),
        record.uuid,
        crate::scripts::trash::KEEP_MS / 86_400_000.0,
        crate::scripts::trash::MAX_TRASH,
        record.revision
    )
}

/// The storage half of a write: the script read, checked and stored (with the pending audit
/// entry in its `set`).
async fn store_step<E: Env>(
    env: &Journaled<'_, E>,
    actor: Actor<'_>,
    args: WriteArgs,
    snap: &ScriptSnapshot,
) -> Stored {
    let max = MAX_SOURCE_BYTES;
    Stored::Changed(match args {
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
            live_only,
            keep_enabled,
        } => {
            restore::restore(
                env,
                snap,
                actor,
                &uuid,
                Some(revision),
                Some(current_revision),
                restore::Keep {
                    live_only,
                    enabled: keep_enabled,
                },
                max,
            )
            .await
        }
        WriteArgs::Delete { uuid, revision } => {
            // The scripts its `set` deletes for good (expired, or pushed out of a full trash)
            // go pending in that `set` beside the delete's own entry.
            let note = |gone: &[trash::Going]| {
                env.also(crate::by_hand::trash::left_entries(
                    crate::env::Clock::now_ms(env),
                    gone,
                ));
            };
            return Stored::Deleted(
                trash::delete_noting(env, snap, actor, &uuid, revision, &note).await,
            );
        }
    })
}

/// A write's failure as the agent reads it. A script in the trash is not live, but "no script
/// with uuid" sent an agent (whose delete was retried, or that still held the uuid) looking for
/// one that never was: it is told where the script is.
pub(super) async fn failure<E: Env>(p: &Provider<E>, e: ScriptError) -> ToolError {
    if let ScriptError::NotFound(u) = &e {
        if trash::contains(&p.env, u).await.unwrap_or(false) {
            return ToolError::new(
                ErrorCode::NotFound,
                format!("script {u} is in the trash (deleted): restore_script brings it back, and get_script shows it"),
            )
            .with_details(serde_json::json!({ "inTrash": true }));
        }
    }
    p.script_failure(e).into()
}

fn write_result(c: &Change, outcome: SyncOutcome) -> Value {
    let r = &c.record;
    let verb = match (c.created, c.unchanged, c.from_trash) {
        (true, ..) => "Created",
        (false, true, _) => "Nothing to change in",
        (false, false, true) => "Restored from the trash",
        (false, false, false) => "Saved",
    };
    let registered = outcome == SyncOutcome::Registered;
    let state = match (r.enabled, &outcome) {
        (false, _) => "disabled: it does not run".to_owned(),
        (true, SyncOutcome::Registered) => "enabled and registered: it runs on matching pages from their next load".to_owned(),
        // Chrome's message ends in a full stop, as the sentence it goes into does.
        (true, SyncOutcome::Refused(m)) => format!("enabled, but Chrome refused to register it, so it does not run: {}", m.trim_end_matches('.')),
        (true, SyncOutcome::Unavailable) => "enabled, but not running yet: Chrome's \"Allow User Scripts\" toggle is off for Lumo Userscripts".to_owned(),
        (true, SyncOutcome::Deferred(m)) => format!("enabled, but not registered yet ({m}); the provider registers it after this reply, and until then Chrome keeps what it held before"),
        (true, SyncOutcome::NotRegistered) => "enabled, but it has no @match or @include, so it runs nowhere".to_owned(),
    };
    let registration_error = match &outcome {
        SyncOutcome::Refused(m) => Value::String(m.clone()),
        _ => Value::Null,
    };
    let text = format!(
        "{verb} {} (uuid {}, revision {}); {state}.{}",
        crate::text::quoted(&r.metadata.name),
        r.uuid,
        r.revision,
        diagnostics_text(&c.diagnostics)
    );
    success(
        text,
        crate::value::object(vec![
            ("script", r.summary()),
            ("created", c.created.into()),
            ("registered", registered.into()),
            ("registrationError", registration_error),
            ("diagnostics", json!(c.diagnostics)),
        ]),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::memory::MemoryEnv;
    use crate::env::Area;
    use crate::provider::{keys, RegistryState};
    use futures::executor::block_on;

    fn source(v: u32) -> String {
        format!("// ==UserScript==\n// @name A\n// @match https://a.com/*\n// ==/UserScript==\n// {v}\n")
    }

    /// A write that read Chrome's registration of its script beside its storage calls knows
    /// the API was there: it registers without asking for the toggle again (a synchronous
    /// refusal of 0.1–0.4 ms in a worker that was idle, on every write: issue 17). A toggle
    /// turned off while the write was stored still ends as not registered, "Allow User
    /// Scripts" off, with the registry stale for the reconcile (`sync.rs` tests the
    /// registration with nothing to change).
    #[test]
    fn a_write_asks_chrome_for_the_toggle_only_when_nothing_else_would_tell() {
        let p = Provider::new(MemoryEnv::new());
        let create = WriteArgs::Create {
            source: source(1),
            enabled: true,
        };
        let made = block_on(run_write(&p, "user".into(), create, None, None, None, None));
        let uuid = made.target.clone().unwrap();
        let replace = |revision: u64, v: u32| WriteArgs::Replace {
            uuid: uuid.clone(),
            revision,
            source: source(v),
            enabled: None,
        };
        let before = p.env.toggle_checks.get();
        let done = block_on(run_write(
            &p,
            "user".into(),
            replace(1, 2),
            None,
            None,
            None,
            None,
        ));
        assert!(done.result.is_ok(), "{:?}", done.result);
        assert_eq!(p.env.toggle_checks.get(), before, "checked again");
        let code = |p: &Provider<MemoryEnv>| p.env.registrations.borrow()[&uuid].js.clone();
        assert!(format!("{:?}", code(&p)).contains("// 2"), "not registered");

        // Turned off while the write is stored.
        p.env.lose_api_on_local_set.set(true);
        let done = block_on(run_write(
            &p,
            "user".into(),
            replace(2, 3),
            None,
            None,
            None,
            None,
        ));
        let text = done.result.map(|r| r.to_string()).unwrap_or_default();
        assert!(text.contains("toggle is off"), "{text}");
        assert!(text.contains("\"registered\":false"), "{text}");
        assert_eq!(p.registry_state(), RegistryState::Stale);
        assert!(
            format!("{:?}", code(&p)).contains("// 2"),
            "changed while off"
        );
    }

    /// A write brings the cached snapshot up to date in place: copying it would copy every
    /// record (1,000 of them at the most) for each write.
    #[test]
    fn a_write_updates_the_cached_snapshot_without_copying_it() {
        let p = Provider::new(MemoryEnv::new());
        let create = WriteArgs::Create {
            source: source(1),
            enabled: true,
        };
        let uuid = block_on(run_write(&p, "user".into(), create, None, None, None, None))
            .target
            .unwrap();
        let cached = Rc::as_ptr(&block_on(p.scripts()).unwrap());
        let replace = WriteArgs::Replace {
            uuid: uuid.clone(),
            revision: 1,
            source: source(2),
            enabled: None,
        };
        assert!(block_on(run_write(
            &p,
            "user".into(),
            replace,
            None,
            None,
            None,
            None
        ))
        .result
        .is_ok());
        let after = block_on(p.scripts()).unwrap();
        assert_eq!(after.records[0].revision, 2, "the cache holds the write");
        assert!(
            std::ptr::eq(cached, Rc::as_ptr(&after)),
            "the cache was copied"
        );
    }

    /// The flag is cleared beside the write's first read, not before it: still, no change to
    /// storage goes out before it is, however slow Chrome is to store it. A worker stopped
    /// between the record's `set` and its registration must find "not synced".
    #[test]
    fn storage_changes_only_after_the_registry_flag_says_not_synced() {
        let p = Provider::new(MemoryEnv::new());
        block_on(p.ensure_registry());
        assert_eq!(p.registry_state(), RegistryState::Synced);
        let create = WriteArgs::Create {
            source: source(1),
            enabled: true,
        };
        let made = block_on(run_write(&p, "user".into(), create, None, None, None, None));
        let uuid = made.target.clone().unwrap();
        block_on(p.ensure_registry());
        p.env.session_set_yields.set(4);
        for (i, args) in [
            WriteArgs::Replace {
                uuid: uuid.clone(),
                revision: 1,
                source: source(2),
                enabled: None,
            },
            WriteArgs::Delete {
                uuid: uuid.clone(),
                revision: None,
            },
        ]
        .into_iter()
        .enumerate()
        {
            p.env.storage_log.borrow_mut().clear();
            let done = block_on(run_write(&p, "user".into(), args, None, None, None, None));
            assert!(done.result.is_ok(), "{i}: {:?}", done.result);
            let log = p.env.storage_log.borrow();
            let flag = |from: usize| {
                log.iter().skip(from).position(|(a, k)| {
                    *a == Area::Session && k.iter().any(|k| k == keys::REGISTRY_SYNCED)
                })
            };
            let cleared = flag(0).expect("the flag is written");
            let first_local = log.iter().position(|(a, _)| *a == Area::Local).unwrap();
            assert!(cleared < first_local, "{i}: {log:?}");
            drop(log);
            // …and says "synced" again once the shell settles it, after the reply.
            block_on(p.ensure_registry());
            assert_eq!(
                p.env.dump(Area::Session)[keys::REGISTRY_SYNCED],
                json!(true)
            );
        }
        assert!(p.env.registrations.borrow().is_empty(), "deleted");
    }

    /// A write's reply does not wait for "synced" to be stored: the flag stays "not synced"
    /// until the shell settles it after the reply, so writes in a row clear it once, and a
    /// registration that lost the API leaves it "not synced" for the next reconcile.
    #[test]
    fn synced_is_stored_after_the_reply_and_only_while_the_registry_is() {
        let p = Provider::new(MemoryEnv::new());
        block_on(p.ensure_registry());
        let flag =
            |p: &Provider<MemoryEnv>| p.env.dump(Area::Session)[keys::REGISTRY_SYNCED].clone();
        let flag_writes = |p: &Provider<MemoryEnv>| {
            p.env
                .storage_log
                .borrow()
                .iter()
                .filter(|(a, k)| {
                    *a == Area::Session && k.iter().any(|k| k == keys::REGISTRY_SYNCED)
                })
                .count()
        };
        let named = |v: u32| source(v).replace("@name A", &format!("@name A{v}"));
        let write = |p: &Provider<MemoryEnv>, v: u32| {
            let args = WriteArgs::Create {
                source: named(v),
                enabled: true,
            };
            let done = block_on(run_write(p, "user".into(), args, None, None, None, None));
            assert!(done.result.is_ok(), "{:?}", done.result);
        };
        p.env.storage_log.borrow_mut().clear();
        write(&p, 1);
        assert_eq!(flag(&p), json!(false), "stored after the reply, not before");
        write(&p, 2);
        assert_eq!(
            flag_writes(&p),
            1,
            "the second write finds it cleared already"
        );
        assert_eq!(p.registry_state(), RegistryState::Synced);
        block_on(p.ensure_registry());
        assert_eq!(flag(&p), json!(true));
        assert_eq!(flag_writes(&p), 2);
        block_on(p.ensure_registry());
        assert_eq!(flag_writes(&p), 2, "settled once");

        // The API lost during a registration: the registry is stale, and the settle after the
        // reply must not say "synced" (the reconcile does, once it has registered it).
        p.env.lose_api_on_register.set(true);
        let args = WriteArgs::Create {
            source: named(3),
            enabled: true,
        };
        block_on(run_write(&p, "user".into(), args, None, None, None, None));
        assert_eq!(p.registry_state(), RegistryState::Stale);
        block_on(p.ensure_registry());
        assert_eq!(flag(&p), json!(false));

        // Marked stale between the write and the settle (the API seen coming back after it was
        // off: Chrome may have dropped registrations meanwhile): no "synced" either.
        p.env.lose_api_on_register.set(false);
        p.env.user_scripts.set(true);
        block_on(p.ensure_registry());
        assert_eq!(flag(&p), json!(true), "reconciled");
        write(&p, 4);
        p.env.user_scripts.set(false);
        p.capability();
        p.env.user_scripts.set(true);
        p.capability();
        p.env.user_scripts.set(false);
        block_on(p.ensure_registry());
        assert_eq!(p.registry_state(), RegistryState::Stale);
        assert_eq!(flag(&p), json!(false));
    }

    /// Only a write that may register the script reads the worlds' configurations (all of them:
    /// one per script with its own world); a disable or a delete unregisters and reads none.
    #[test]
    fn only_a_write_that_may_register_reads_the_world_configurations() {
        let p = Provider::new(MemoryEnv::new());
        let made = block_on(run_write(
            &p,
            "user".into(),
            WriteArgs::Create {
                source: source(1),
                enabled: true,
            },
            None,
            None,
            None,
            None,
        ));
        let uuid = made.target.clone().unwrap();
        let reads = |args: WriteArgs| {
            let before = p.env.world_reads.get();
            let done = block_on(run_write(&p, "user".into(), args, None, None, None, None));
            assert!(done.result.is_ok(), "{:?}", done.result);
            p.env.world_reads.get() - before
        };
        let replace = WriteArgs::Replace {
            uuid: uuid.clone(),
            revision: 1,
            source: source(2),
            enabled: None,
        };
        assert_eq!(reads(replace), 1);
        let disable = WriteArgs::SetEnabled {
            uuid: uuid.clone(),
            enabled: false,
            revision: None,
        };
        assert_eq!(reads(disable), 0);
        assert!(p.env.registrations.borrow().is_empty(), "disabled");
        let enable = WriteArgs::SetEnabled {
            uuid: uuid.clone(),
            enabled: true,
            revision: None,
        };
        assert_eq!(reads(enable), 1);
        assert_eq!(p.env.registrations.borrow().len(), 1, "enabled");
        assert_eq!(
            reads(WriteArgs::Delete {
                uuid,
                revision: None
            }),
            0
        );
        assert!(p.env.registrations.borrow().is_empty(), "deleted");
    }
}
