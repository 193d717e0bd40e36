//! Restoring: an earlier revision of a live script becomes its new current version (the
//! version it replaces goes to the history, so a restore is itself undoable), and a script in
//! the trash comes back (the version that was deleted, or an earlier one of its history).
//!
//! A restore is a write like any other: locked on the current revision (a stale one is a
//! CONFLICT and changes nothing), checked for a look-alike name, and stored in one atomic
//! `set` with the history.

use super::history::{self, Revision};
use super::record::ScriptRecord;
use super::store::{
    check_identity, check_revision, index_value, load_with_source, record_key, source_key,
    storage_err, validate, Actor, Change, ScriptError, Snapshot, INDEX_KEY, MAX_SCRIPTS,
};
use super::trash::{self, Trashed, TRASH_INDEX_KEY};
use crate::env::{Area, Clock, Storage};

/// Where the script to restore is now.
#[derive(Debug, Clone, PartialEq)]
pub enum Current {
    Live(ScriptRecord, String),
    Trashed(Trashed),
}

impl Current {
    pub fn record(&self) -> &ScriptRecord {
        match self {
            Current::Live(r, _) => r,
            Current::Trashed(t) => &t.record,
        }
    }

    pub fn source(&self) -> &str {
        match self {
            Current::Live(_, s) => s,
            Current::Trashed(t) => &t.source,
        }
    }
}

/// What a restore would do: the script as it is now, and the version it would bring back.
/// `revision: None` means the current (for a trashed script, the deleted) version.
pub async fn plan<E: Storage + Clock>(
    env: &E,
    uuid: &str,
    revision: Option<u64>,
) -> Result<(Current, Revision), ScriptError> {
    let current = match load_with_source(env, uuid).await {
        Ok((r, s)) => Current::Live(r, s),
        Err(ScriptError::NotFound(_)) if trash::contains(env, uuid).await? => {
            Current::Trashed(trash::load(env, uuid).await?)
        }
        Err(e) => return Err(e),
    };
    let now = current.record().revision;
    let target = match revision {
        None => Revision {
            record: current.record().clone(),
            source: current.source().to_owned(),
        },
        Some(r) if r == now => Revision {
            record: current.record().clone(),
            source: current.source().to_owned(),
        },
        Some(r) => history::load(env, uuid)
            .await
            .map_err(storage_err)?
            .find(r)
            .cloned()
            .ok_or_else(|| ScriptError::RevisionNotFound {
                uuid: uuid.to_owned(),
                revision: r,
                current: now,
            })?,
    };
    Ok((current, target))
}

/// What a restore keeps of the script as it is now.
#[derive(Debug, Clone, Copy, Default)]
pub struct Keep {
    /// Only a live script is restored (a delete does not change the revision, so the revision
    /// alone cannot tell).
    pub live_only: bool,
    /// Its on/off state: only the revision's code comes back.
    pub enabled: bool,
}

/// Restores `revision` (see [`plan`]) as the next revision, if the script is still at
/// `expected` (when given), keeping what `keep` says.
#[allow(clippy::too_many_arguments)] // each is one plain input of the write
pub async fn restore<E: Storage + Clock + crate::env::Http>(
    env: &E,
    snap: &Snapshot,
    actor: Actor<'_>,
    uuid: &str,
    revision: Option<u64>,
    expected: Option<u64>,
    keep: Keep,
    max_bytes: usize,
) -> Result<Change, ScriptError> {
    let live_only = keep.live_only;
    let (current, target) = plan(env, uuid, revision).await?;
    check_revision(current.record(), expected)?;
    let live = matches!(current, Current::Live(..));
    if live_only && !live {
        return Err(ScriptError::Trashed(uuid.to_owned()));
    }
    if live && target.record.revision == current.record().revision {
        // Nothing to do: restoring the current version is not a new revision.
        return Ok(Change {
            record: current.record().clone(),
            source: current.source().to_owned(),
            created: false,
            unchanged: true,
            from_trash: false,
            diagnostics: Vec::new(),
            stale_history: Vec::new(),
        });
    }
    // The stored metadata of the old version is re-derived from its source, so a version
    // stored by an older parser comes back as today's validator reads it.
    let (meta, diagnostics) = validate(&target.source, max_bytes)?;
    check_identity(snap, &meta, Some(uuid))?;
    // The files that revision stored come back with it; only a URL it never stored (a
    // revision from before files were stored) is fetched.
    let prepared = crate::gm::asset_store::prepare(env, &meta, &target.record.assets).await?;
    let was = current.record();
    let record = ScriptRecord {
        metadata: meta,
        enabled: if keep.enabled {
            current.record().enabled
        } else {
            target.record.enabled
        },
        revision: was.revision.saturating_add(1),
        updated_at: env.now_ms(),
        updated_by: actor.by.to_owned(),
        updated_via: actor.via.map(str::to_owned),
        sha256: target.record.sha256.clone(),
        size: target.source.len(),
        assets: prepared.assets,
        ..was.clone()
    };
    let prev = Revision {
        record: was.clone(),
        source: current.source().to_owned(),
    };
    let history::Pushed { mut items, stale } = history::items_for(env, prev, &record.assets)
        .await
        .map_err(storage_err)?;
    items.insert(
        record_key(uuid),
        serde_json::to_value(&record).map_err(storage_err)?,
    );
    items.insert(source_key(uuid), target.source.clone().into());
    if !live {
        if snap.index.len() >= MAX_SCRIPTS {
            return Err(ScriptError::TooMany);
        }
        let mut index = snap.index.clone();
        index.retain(|u| u != uuid);
        index.push(uuid.to_owned());
        items.insert(INDEX_KEY.to_owned(), index_value(&index));
        items.insert(
            TRASH_INDEX_KEY.to_owned(),
            trash::index_without(env, uuid).await?,
        );
    }
    if !prepared.items.is_empty() {
        items.extend(prepared.items);
        crate::gm::asset_store::check_quota(env, &items).await?;
    }
    super::store::check_agent_room(env, &record.updated_by, &items).await?;
    env.set(Area::Local, items).await.map_err(storage_err)?;
    if !live {
        // Out of the trash index already; a failure here only leaves dead bytes.
        let key = trash::trash_key(uuid);
        let _ = env.remove(Area::Local, &[&key]).await;
    }
    Ok(Change {
        record,
        source: target.source,
        // The script it was, back: not a new one (`from_trash` says where it came from).
        created: false,
        unchanged: false,
        from_trash: !live,
        diagnostics,
        stale_history: stale,
    })
}
