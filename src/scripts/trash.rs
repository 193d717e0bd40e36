//! The trash: a deleted script's record and source move to `trash/<uuid>` (its history stays:
//! `history/<uuid>` and the revisions it lists), listed in `trash/index`, oldest first. Kept
//! [`KEEP_MS`] (30 days) and at most [`MAX_TRASH`] scripts; past either the oldest go for good,
//! with their history, at the next delete or purge. Only the user purges (from the options
//! page); no tool does.
//!
//! Atomicity: a delete is one `set` (index without the script, its trash entry, the trash
//! index) followed by removing the live keys; an interruption in between leaves a record that
//! no read takes for live (`store::load_with_source` sees its uuid in the trash index) and that
//! leaves with the trash entry when it is purged, never a script both live and lost. Restoring
//! is the mirror image (see `restore`).

use super::history::{self, Revision};
use super::record::ScriptRecord;
use super::store::{
    self, check_revision, index_value, load_with_source, storage_err, Actor, ScriptError, Snapshot,
    INDEX_KEY,
};
use crate::env::{Area, Clock, Storage};
use crate::gm::store as gm_store;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

pub use super::store::TRASH_INDEX_KEY;
pub const MAX_TRASH: usize = 100;
pub const KEEP_MS: f64 = 30.0 * 24.0 * 3600.0 * 1000.0;

pub fn trash_key(uuid: &str) -> String {
    format!("trash/{uuid}")
}

/// A script in the trash: the version that was deleted, and who deleted it when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Trashed {
    pub record: ScriptRecord,
    pub source: String,
    pub deleted_at: f64,
    pub deleted_by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted_via: Option<String>,
}

impl Trashed {
    /// The listing form: the script's summary plus when and by whom it was deleted.
    pub fn summary(&self) -> Value {
        let mut v = self.record.summary();
        if let Some(o) = v.as_object_mut() {
            o.insert("deleted".into(), true.into());
            o.insert("deletedAt".into(), self.deleted_at.into());
            o.insert("deletedBy".into(), self.deleted_by.clone().into());
            o.insert("purgeAt".into(), (self.deleted_at + KEEP_MS).into());
        }
        v
    }

    pub fn revision(&self) -> Revision {
        Revision {
            record: self.record.clone(),
            source: self.source.clone(),
        }
    }
}

/// One line of `trash/index`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Slot {
    uuid: String,
    deleted_at: f64,
    /// The script's name when it was deleted, so the popup's log can say what an entry deleted
    /// without reading every trashed source ([`names`]); absent in slots an older version wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
}

/// The slots `trash/index` holds, and the uuids of items that name a script but do not decode
/// (their deletion time is then read from the script's own `trash/<uuid>`: dropped, the script
/// would leave the trash's list and, at the next rewrite of the index, be lost for good).
fn decode_index(v: Option<&Value>) -> (Vec<Slot>, Vec<String>) {
    let mut seen = crate::vec_map::VecSet::new();
    let mut slots = Vec::new();
    let mut damaged = Vec::new();
    let items = v.and_then(|v| v.get("items")).and_then(Value::as_array);
    for x in items.into_iter().flatten() {
        let uuid = x.get("uuid").and_then(Value::as_str).unwrap_or("");
        if !super::record::is_uuid(uuid) || !seen.insert(uuid.to_owned()) {
            continue;
        }
        match <Slot as serde::Deserialize>::deserialize(x) {
            Ok(s) => slots.push(s),
            Err(_) => damaged.push(uuid.to_owned()),
        }
    }
    (slots, damaged)
}

fn index_json(slots: &[Slot]) -> Value {
    json!({ "items": slots })
}

/// Whether a stored `trash/index` names every script it holds: a list whose every item has a
/// uuid. Missing (removed by hand, or never written: nothing was ever deleted), not a list, or
/// an item without a uuid, it may have lost scripts that are still in the trash.
fn names_every_item(v: Option<&Value>) -> bool {
    v.and_then(|v| v.get("items"))
        .and_then(Value::as_array)
        .is_some_and(|a| {
            a.iter().all(|x| {
                x.get("uuid")
                    .and_then(Value::as_str)
                    .is_some_and(super::record::is_uuid)
            })
        })
}

/// The trashed scripts a list that does not name every item may have lost: every stored
/// `trash/<uuid>` not among `slots` and `damaged`, and not live in `scripts/index` (a restore
/// stopped before its remove leaves the entry of a script that is live again: adopted, it would
/// hide that script) — or, with no whole `scripts/index`, not beside a `script/<uuid>` record; each is then read as a damaged item is, from its entry. Without them, the
/// Trash view hid them, the next delete stored a list without them, and the purge after it
/// swept them as ownerless, within their 30 days. The keys alone are read, not their values.
async fn unlisted_entries<S: Storage>(
    s: &S,
    slots: &[Slot],
    damaged: &[String],
) -> Result<Vec<String>, ScriptError> {
    let keys = s.keys(Area::Local).await.map_err(storage_err)?;
    let mut found: Vec<String> = keys
        .iter()
        .filter_map(|k| k.strip_prefix("trash/"))
        .filter(|u| super::record::is_uuid(u))
        .filter(|u| !slots.iter().any(|s| s.uuid == *u) && !damaged.iter().any(|d| d == u))
        .map(str::to_owned)
        .collect();
    if found.is_empty() {
        return Ok(found);
    }
    let live = s
        .get(Area::Local, &[INDEX_KEY])
        .await
        .map_err(storage_err)?;
    match live.get(INDEX_KEY).filter(|v| store::index_is_whole(v)) {
        Some(v) => {
            let listed = v.get("uuids").and_then(Value::as_array);
            found.retain(|u| {
                !listed.is_some_and(|l| l.iter().any(|x| x.as_str() == Some(u.as_str())))
            });
        }
        // No script list to ask either (both lists lost): the store's rebuild takes every
        // stored record for live, since the trash lists none of them, so an entry beside its
        // record is left to it. Adopted here too, that script was listed live and in the
        // trash, and the trash's purge (its old `deletedAt` expired, or "Delete forever")
        // removed the live script's record, source, history and values.
        None => found.retain(|u| !keys.contains(&store::record_key(u))),
    }
    Ok(found)
}

async fn load_index<S: Storage>(s: &S) -> Result<Vec<Slot>, ScriptError> {
    let got = s
        .get(Area::Local, &[TRASH_INDEX_KEY])
        .await
        .map_err(storage_err)?;
    let stored = got.get(TRASH_INDEX_KEY);
    let (mut slots, mut damaged) = decode_index(stored);
    if !names_every_item(stored) {
        damaged.extend(unlisted_entries(s, &slots, &damaged).await?);
    }
    if damaged.is_empty() {
        return Ok(slots);
    }
    let keys: Vec<String> = damaged.iter().map(|u| trash_key(u)).collect();
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let entries = s.get(Area::Local, &refs).await.map_err(storage_err)?;
    for uuid in damaged {
        // A script whose entry is gone or damaged too is not listed (`list` cannot show it).
        let entry = entries.get(&trash_key(&uuid));
        if let Some(at) = entry
            .and_then(|t| t.get("deletedAt"))
            .and_then(Value::as_f64)
            .filter(|t| t.is_finite())
        {
            let name = entry
                .and_then(|t| t.pointer("/record/metadata/name"))
                .and_then(Value::as_str)
                .map(str::to_owned);
            slots.push(Slot {
                uuid,
                deleted_at: at,
                name,
            });
        }
    }
    // Oldest first, as the index keeps them (the count bound drops from the front).
    slots.sort_by(|a, b| a.deleted_at.total_cmp(&b.deleted_at));
    Ok(slots)
}

/// Whether a trashed script's 30 days are over at `now`.
fn expired(s: &Slot, now: f64) -> bool {
    now - s.deleted_at >= KEEP_MS
}

/// Why a script left the trash for good without the user's click.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Left {
    /// Its [`KEEP_MS`] were over.
    Expired,
    /// It was the oldest past [`MAX_TRASH`] (the user's delete made room).
    TrashFull,
    /// The user's "Delete forever" or "Empty trash".
    ByUser,
}

impl Left {
    /// As the audit log records it (`audit::Purged::why`).
    pub fn as_str(self) -> &'static str {
        match self {
            Left::Expired => "expired",
            Left::TrashFull => "trashFull",
            Left::ByUser => "deletedForever",
        }
    }
}

/// A script about to leave the trash for good, as its audit entry names it (never its source).
#[derive(Debug, Clone, PartialEq)]
pub struct Going {
    pub uuid: String,
    /// Its `@name` ("" when its trashed copy cannot be read).
    pub name: String,
    pub why: Left,
}

/// The most scripts one purge of the expired takes (each an audit entry in one `set`); the
/// rest wait for the next one, hidden from the Trash view meanwhile.
pub const MAX_SWEEP: usize = MAX_TRASH;

/// Splits the trash into what stays and what goes for good (expired, or the oldest past the
/// count bound), at most [`MAX_SWEEP`].
fn split_expired(mut slots: Vec<Slot>, now: f64) -> (Vec<Slot>, Vec<(String, Left)>) {
    let mut gone: Vec<(String, Left)> = Vec::new();
    slots.retain(|s| {
        let keep = gone.len() >= MAX_SWEEP || !expired(s, now);
        if !keep {
            gone.push((s.uuid.clone(), Left::Expired));
        }
        keep
    });
    while slots.len() > MAX_TRASH && gone.len() < MAX_SWEEP {
        let s = slots.remove(0);
        gone.push((s.uuid, Left::TrashFull));
    }
    (slots, gone)
}

/// The names of the scripts leaving the trash, read from their trashed copies.
async fn going<S: Storage>(s: &S, gone: Vec<(String, Left)>) -> Result<Vec<Going>, ScriptError> {
    if gone.is_empty() {
        return Ok(Vec::new());
    }
    let keys: Vec<String> = gone.iter().map(|(u, _)| trash_key(u)).collect();
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let got = s.get(Area::Local, &refs).await.map_err(storage_err)?;
    Ok(gone
        .into_iter()
        .zip(&keys)
        .map(|((uuid, why), k)| Going {
            name: got
                .get(k)
                .and_then(|t| t.pointer("/record/metadata/name"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            uuid,
            why,
        })
        .collect())
}

/// The runs of incognito pages (`chrome.storage.session`, `scripts::runs`) of scripts gone for
/// good, with their share of that area's budget; best effort: they go when the browser quits
/// anyway.
async fn forget_private_runs<S: Storage>(s: &S, gone: &[String]) {
    if gone.is_empty() {
        return;
    }
    if let Ok(Some(budget)) = runs_budget_without(s, Area::Session, gone).await {
        let mut items = Map::new();
        items.insert(super::runs::BUDGET_KEY.to_owned(), budget);
        let _ = s.set(Area::Session, items).await;
    }
    let keys: Vec<String> = gone.iter().map(|u| super::runs::runs_key(u)).collect();
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let _ = s.remove(Area::Session, &refs).await;
}

/// `runs/budget` of `area` without the rings of `gone` (None when it names none of them):
/// left in, a purged script's entry counted bytes no ring holds against every other script's
/// run reports (R12). Read and written back with the run reports' lock held by the caller
/// (`Provider::runs_locked`), as a report's store reads and writes it.
async fn runs_budget_without<S: Storage>(
    s: &S,
    area: Area,
    gone: &[String],
) -> Result<Option<Value>, ScriptError> {
    let key = super::runs::BUDGET_KEY;
    let got = s.get(area, &[key]).await.map_err(storage_err)?;
    let mut budget = super::runs::Budget::decode(got.get(key));
    let mut changed = false;
    for u in gone {
        changed |= budget.bytes.remove(u.as_str()).is_some();
    }
    Ok(changed.then(|| budget.encode()))
}

/// Keys that hold a script for good once it leaves the trash (its history's: [`history::keys_of`]),
/// with the record and source a delete stopped before its remove left (see the module docs).
fn purged_keys(uuids: &[String]) -> Vec<String> {
    uuids
        .iter()
        .flat_map(|u| {
            [
                trash_key(u),
                super::runs::runs_key(u),
                store::record_key(u),
                store::source_key(u),
            ]
        })
        .collect()
}

/// The keys of scripts that neither `scripts/index` nor `trash/index` lists: what a purge
/// stopped between its `set` and its `remove` (or whose `remove` failed) left behind — the
/// trash entry, history, values and runs of a script the user deleted for good, listed
/// nowhere, so no later purge would reach them. Only when both lists are whole: a damaged or
/// missing one cannot tell a lost script from a gone one.
fn ownerless(all: &Map<String, Value>) -> Vec<String> {
    let Some(index) = all
        .get(store::INDEX_KEY)
        .filter(|v| store::index_is_whole(v))
    else {
        return Vec::new();
    };
    let trash = all.get(TRASH_INDEX_KEY);
    let (slots, damaged) = decode_index(trash);
    let trash_whole = trash.is_some_and(|t| {
        t.get("items")
            .and_then(Value::as_array)
            .is_some_and(|a| a.len() == slots.len())
    });
    if !damaged.is_empty() || !trash_whole {
        return Vec::new();
    }
    // A set: a purge at 1,000 scripts looks up every key (tens of thousands with histories).
    let mut listed_set = crate::vec_map::VecSet::new();
    for u in slots.iter().map(|s| s.uuid.as_str()).chain(
        index
            .get("uuids")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str),
    ) {
        listed_set.insert(u.to_owned());
    }
    let listed = |u: &str| listed_set.contains(u);
    all.keys()
        .filter(|k| {
            [
                "script/", "source/", "trash/", "history/", "values/", "runs/",
            ]
            .iter()
            .find_map(|p| k.strip_prefix(p))
            .map(|rest| rest.split('/').next().unwrap_or(""))
            .is_some_and(|u| super::record::is_uuid(u) && !listed(u))
        })
        .cloned()
        .collect()
}

/// Moves a script to the trash (see the module docs for the order of writes).
pub async fn delete<E: Storage + Clock>(
    env: &E,
    snap: &Snapshot,
    actor: Actor<'_>,
    uuid: &str,
    expected: Option<u64>,
) -> Result<ScriptRecord, ScriptError> {
    delete_noting(env, snap, actor, uuid, expected, &|_| ()).await
}

/// [`delete`], telling `note` before its `set` which scripts that `set` deletes for good
/// (expired, or pushed out of a full trash by the user's delete), so their audit entries go
/// pending in it (`audit::Journaled::also`).
pub async fn delete_noting<E: Storage + Clock>(
    env: &E,
    snap: &Snapshot,
    actor: Actor<'_>,
    uuid: &str,
    expected: Option<u64>,
    note: &dyn Fn(&[Going]),
) -> Result<ScriptRecord, ScriptError> {
    let (current, source) = load_with_source(env, uuid).await?;
    check_revision(&current, expected)?;
    let now = env.now_ms();
    let mut slots = load_index(env).await?;
    slots.retain(|s| s.uuid != uuid);
    slots.push(Slot {
        uuid: uuid.to_owned(),
        deleted_at: now,
        name: Some(current.metadata.name.clone()),
    });
    // Past the count bound the oldest goes for good. An agent's delete must not do that, or
    // 101 deletes of throwaway scripts would purge the user's: only the user purges.
    let unexpired = slots.iter().filter(|s| !expired(s, now)).count();
    if unexpired > MAX_TRASH && actor.by != super::record::BY_USER {
        return Err(ScriptError::TrashFull { max: MAX_TRASH });
    }
    let (slots, gone) = split_expired(slots, now);
    let gone = going(env, gone).await?;
    note(&gone);
    let gone: Vec<String> = gone.into_iter().map(|g| g.uuid).collect();
    let entry = Trashed {
        record: current.clone(),
        source,
        deleted_at: now,
        deleted_by: actor.by.to_owned(),
        deleted_via: actor.via.map(str::to_owned),
    };
    let mut index = snap.index.clone();
    index.retain(|u| u != uuid);
    let mut items = Map::new();
    items.insert(INDEX_KEY.to_owned(), index_value(&index));
    items.insert(
        trash_key(uuid),
        serde_json::to_value(&entry).map_err(storage_err)?,
    );
    items.insert(TRASH_INDEX_KEY.to_owned(), index_json(&slots));
    let mut dead = vec![store::record_key(uuid), store::source_key(uuid)];
    if !gone.is_empty() {
        items.insert(
            history::BUDGET_KEY.to_owned(),
            history::budget_without(env, &gone)
                .await
                .map_err(storage_err)?,
        );
        let (value_keys, budget) = gm_store::purged_items(env, &gone)
            .await
            .map_err(storage_err)?;
        items.insert(crate::gm::values::BUDGET_KEY.to_owned(), budget);
        dead.extend(value_keys);
    }
    // Read before the `set`, which leaves them as they are.
    let history_keys = history::keys_of(env, &gone).await.map_err(storage_err)?;
    env.set(Area::Local, items).await.map_err(storage_err)?;
    dead.extend(purged_keys(&gone));
    dead.extend(history_keys);
    let refs: Vec<&str> = dead.iter().map(String::as_str).collect();
    // The script is already in the trash and gone from every listing; a failure here only
    // leaves dead bytes.
    let _ = env.remove(Area::Local, &refs).await;
    forget_private_runs(env, &gone).await;
    if !gone.is_empty() {
        let _ = crate::gm::asset_store::sweep(env).await;
    }
    Ok(current)
}

/// A script in the trash.
pub async fn load<S: Storage>(s: &S, uuid: &str) -> Result<Trashed, ScriptError> {
    let key = trash_key(uuid);
    let got = s.get(Area::Local, &[&key]).await.map_err(storage_err)?;
    match got
        .get(&key)
        .map(<Trashed as serde::Deserialize>::deserialize)
    {
        Some(Ok(t)) if t.record.uuid == uuid => Ok(t),
        Some(_) => Err(ScriptError::Storage(format!(
            "the trashed copy of {uuid} is damaged"
        ))),
        None => Err(ScriptError::NotFound(uuid.to_owned())),
    }
}

/// Whether `uuid` is in the trash (listed and not expired).
pub async fn contains<E: Storage + Clock>(env: &E, uuid: &str) -> Result<bool, ScriptError> {
    let now = env.now_ms();
    Ok(load_index(env)
        .await?
        .iter()
        .any(|s| s.uuid == uuid && now - s.deleted_at < KEEP_MS))
}

/// Each script in the trash by uuid: the name it had when it was deleted (a slot an older
/// version wrote has none) and when, read from the index alone.
pub async fn names<S: Storage>(s: &S) -> Result<Vec<(String, Option<String>, f64)>, ScriptError> {
    Ok(load_index(s)
        .await?
        .into_iter()
        .map(|sl| (sl.uuid, sl.name, sl.deleted_at))
        .collect())
}

/// Everything in the trash that is not expired, most recently deleted first, and what could not
/// be read.
/// The script the user's next delete would push out of the trash for good (its uuid, and its
/// name when the index kept it), when the trash holds [`MAX_TRASH`] scripts whose 30 days are
/// not over: the oldest, as [`split_expired`] takes it.
pub async fn next_out<E: Storage + Clock>(
    env: &E,
) -> Result<Option<(String, Option<String>)>, ScriptError> {
    let now = env.now_ms();
    let slots: Vec<Slot> = load_index(env)
        .await?
        .into_iter()
        .filter(|s| !expired(s, now))
        .collect();
    Ok((slots.len() >= MAX_TRASH)
        .then(|| slots.into_iter().next().map(|s| (s.uuid, s.name)))
        .flatten())
}

pub async fn list<E: Storage + Clock>(
    env: &E,
) -> Result<(Vec<Trashed>, Vec<store::Problem>), ScriptError> {
    let now = env.now_ms();
    let slots: Vec<Slot> = load_index(env)
        .await?
        .into_iter()
        .filter(|s| now - s.deleted_at < KEEP_MS)
        .collect();
    let keys: Vec<String> = slots.iter().map(|s| trash_key(&s.uuid)).collect();
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let got = if refs.is_empty() {
        Map::new()
    } else {
        env.get(Area::Local, &refs).await.map_err(storage_err)?
    };
    let mut out = Vec::new();
    let mut problems = Vec::new();
    for (slot, key) in slots.iter().zip(&keys).rev() {
        match got
            .get(key)
            .map(<Trashed as serde::Deserialize>::deserialize)
        {
            Some(Ok(t)) if t.record.uuid == slot.uuid => out.push(t),
            _ => problems.push(store::Problem {
                uuid: slot.uuid.clone(),
                message: "the trashed copy is missing or damaged".into(),
            }),
        }
    }
    Ok((out, problems))
}

/// Deletes for good: the given scripts, or (`None`) everything in the trash. The user's
/// action only; no tool reaches it. Returns how many went.
pub async fn purge<S: Storage>(s: &S, uuids: Option<&[String]>) -> Result<usize, ScriptError> {
    let slots = load_index(s).await?;
    let (keep, gone): (Vec<Slot>, Vec<Slot>) = slots
        .into_iter()
        .partition(|sl| uuids.is_some_and(|u| !u.contains(&sl.uuid)));
    let gone: Vec<String> = gone.into_iter().map(|s| s.uuid).collect();
    // Nothing goes: no `set` (on a storage full to the byte it could be refused for a key it
    // adds, R14), but the sweeps below still free what is dead.
    if gone.is_empty() {
        sweep_dead(s).await;
        return Ok(0);
    }
    let mut items = Map::new();
    items.insert(TRASH_INDEX_KEY.to_owned(), index_json(&keep));
    items.insert(
        history::BUDGET_KEY.to_owned(),
        history::budget_without(s, &gone)
            .await
            .map_err(storage_err)?,
    );
    let (value_keys, budget) = gm_store::purged_items(s, &gone)
        .await
        .map_err(storage_err)?;
    items.insert(crate::gm::values::BUDGET_KEY.to_owned(), budget);
    if let Some(budget) = runs_budget_without(s, Area::Local, &gone).await? {
        items.insert(super::runs::BUDGET_KEY.to_owned(), budget);
    }
    let history_keys = history::keys_of(s, &gone).await.map_err(storage_err)?;
    s.set(Area::Local, items).await.map_err(storage_err)?;
    let mut dead = purged_keys(&gone);
    dead.extend(history_keys);
    dead.extend(value_keys);
    let refs: Vec<&str> = dead.iter().map(String::as_str).collect();
    if !refs.is_empty() {
        let _ = s.remove(Area::Local, &refs).await;
    }
    forget_private_runs(s, &gone).await;
    sweep_dead(s).await;
    Ok(gone.len())
}

/// What an earlier purge stopped before its `remove` left listed nowhere goes now; then the
/// @require/@resource bytes nothing names any more (a failure of either only leaves dead bytes
/// until the next purge).
async fn sweep_dead<S: Storage>(s: &S) {
    if let Ok(all) = s.get_all(Area::Local).await {
        let left = ownerless(&all);
        if !left.is_empty() {
            let refs: Vec<&str> = left.iter().map(String::as_str).collect();
            let _ = s.remove(Area::Local, &refs).await;
        }
    }
    let _ = crate::gm::asset_store::sweep(s).await;
}

/// What has been in the trash 30 days (or is past the count bound), which [`purge_expired`]
/// deletes for good, named for its audit entries.
pub async fn due<E: Storage + Clock>(env: &E) -> Result<Vec<Going>, ScriptError> {
    let (_, gone) = split_expired(load_index(env).await?, env.now_ms());
    going(env, gone).await
}

/// What [`purge`] of `uuids` would delete for good: those of them in the trash, with their
/// names, so the user's "Delete forever" and "Empty trash" are recorded by name before they go.
/// `None`: the whole trash, as [`purge`] takes it.
pub async fn named<S: Storage>(s: &S, uuids: Option<&[String]>) -> Result<Vec<Going>, ScriptError> {
    let gone: Vec<(String, Left)> = load_index(s)
        .await?
        .into_iter()
        .filter(|sl| uuids.is_none_or(|u| u.contains(&sl.uuid)))
        .map(|sl| (sl.uuid, Left::ByUser))
        .collect();
    going(s, gone).await
}

/// Deletes for good what has been in the trash 30 days (or is past the count bound): the trash
/// listing hides it at once, but its bytes stay until this runs (at the next delete, when the
/// options page lists the trash, and before an import counts the quota). Returns how many went.
/// The provider runs it audited (`by_hand::trash::sweep`): [`due`], then this in a journaled
/// env whose pending slot holds an entry for each.
pub async fn purge_expired<E: Storage + Clock>(env: &E) -> Result<usize, ScriptError> {
    let (_, gone) = split_expired(load_index(env).await?, env.now_ms());
    if gone.is_empty() {
        return Ok(0);
    }
    let gone: Vec<String> = gone.into_iter().map(|(u, _)| u).collect();
    purge(env, Some(&gone)).await
}

/// The `set` items that take `uuid` out of the trash index (for a restore).
pub(super) async fn index_without<S: Storage>(s: &S, uuid: &str) -> Result<Value, ScriptError> {
    let mut slots = load_index(s).await?;
    slots.retain(|sl| sl.uuid != uuid);
    Ok(index_json(&slots))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_purged_script_takes_its_run_reports_and_their_budget_with_it_and_a_trashed_one_keeps_them()
    {
        use crate::env::memory::MemoryEnv;
        use futures::executor::block_on;
        let env = MemoryEnv::new();
        let src =
            "// ==UserScript==\n// @name R\n// @match https://a.example/*\n// ==/UserScript==\n";
        let snap = block_on(super::super::store::load_snapshot(&env)).unwrap();
        let c = block_on(super::super::store::create(
            &env,
            &snap,
            "user",
            src,
            true,
            1 << 20,
        ))
        .unwrap();
        let uuid = c.record.uuid;
        let key = super::super::runs::runs_key(&uuid);
        let budget_key = super::super::runs::BUDGET_KEY;
        let mut m = Map::new();
        m.insert(
            key.clone(),
            serde_json::json!({"v": 1, "runs": [], "dropped": 0}),
        );
        m.insert(budget_key.into(), json!({&uuid: 40, "other": 7}));
        block_on(env.set(Area::Local, m.clone())).unwrap();
        block_on(env.set(Area::Session, m)).unwrap();
        let snap = block_on(super::super::store::load_snapshot(&env)).unwrap();
        let actor = Actor {
            by: "user",
            via: None,
        };
        block_on(delete(&env, &snap, actor, &uuid, None)).unwrap();
        assert!(
            env.dump(Area::Local).contains_key(&key),
            "the trash keeps the runs"
        );
        assert_eq!(
            block_on(purge(&env, Some(std::slice::from_ref(&uuid)))).unwrap(),
            1
        );
        assert!(
            !env.dump(Area::Local).contains_key(&key),
            "purged with the script"
        );
        // R12: its bytes left the runs' budget too, in both areas.
        for area in [Area::Local, Area::Session] {
            assert_eq!(env.dump(area)[budget_key], json!({"other": 7}), "{area:?}");
            assert!(!env.dump(area).contains_key(&key), "{area:?}");
        }
    }

    fn slot(n: u8, at: f64) -> Slot {
        Slot {
            uuid: format!("00000000-0000-4000-8000-0000000000{n:02x}"),
            deleted_at: at,
            name: None,
        }
    }

    #[test]
    fn expired_and_overflowing_entries_go_oldest_first() {
        let now = 100.0 * KEEP_MS;
        let mut slots = vec![slot(0, now - KEEP_MS), slot(1, now - KEEP_MS + 1.0)];
        for n in 2..=101 {
            slots.push(slot(n, now - 10.0 + f64::from(n) / 1000.0));
        }
        let (keep, gone) = split_expired(slots, now);
        assert_eq!(keep.len(), MAX_TRASH);
        // 0 expired (exactly 30 days), then 1 was the oldest past the count.
        assert_eq!(
            gone,
            vec![
                (slot(0, 0.0).uuid, Left::Expired),
                (slot(1, 0.0).uuid, Left::TrashFull)
            ]
        );
        assert_eq!(keep[0].uuid, slot(2, 0.0).uuid);
    }

    /// A hostile agent with writes on must not purge the user's trashed script by deleting
    /// throwaway scripts until the trash overflows; the user's own delete still may.
    #[test]
    fn only_the_users_delete_pushes_a_trashed_script_out_for_good() {
        use crate::env::memory::MemoryEnv;
        use futures::executor::block_on;
        const AGENT: &str = "mobcibglkcoacmddjpdoknlbbicjchlk";
        let env = MemoryEnv::new();
        let make = |name: String| {
            let src = format!("// ==UserScript==\n// @name {name}\n// @match https://a.example/*\n// ==/UserScript==\n");
            let snap = block_on(super::super::store::load_snapshot(&env)).unwrap();
            block_on(super::super::store::create(
                &env,
                &snap,
                AGENT,
                &src,
                true,
                1 << 20,
            ))
            .unwrap()
            .record
            .uuid
        };
        let del = |by: &str, uuid: &str| {
            let snap = block_on(super::super::store::load_snapshot(&env)).unwrap();
            block_on(delete(&env, &snap, Actor { by, via: None }, uuid, None))
        };
        let users = make("mine".into());
        del(AGENT, &users).unwrap();
        for n in 1..MAX_TRASH {
            assert_eq!(block_on(next_out(&env)).unwrap(), None, "{n} in the trash");
            let u = make(format!("throwaway {n}"));
            del(AGENT, &u).unwrap();
        }
        // Full: the user's next delete would push out the oldest, which the page is told.
        assert_eq!(
            block_on(next_out(&env)).unwrap(),
            Some((users.clone(), Some("mine".to_owned())))
        );
        // The trash is full: the 101st agent delete is refused, and changes nothing.
        let extra = make("one more".into());
        let before = env.dump(Area::Local);
        match del(AGENT, &extra) {
            Err(ScriptError::TrashFull { .. }) => {}
            other => panic!("not refused: {other:?}"),
        }
        assert_eq!(env.dump(Area::Local), before);
        assert_eq!(block_on(load(&env, &users)).unwrap().record.uuid, users);
        // The user's own delete makes room, as before.
        del(super::super::record::BY_USER, &extra).unwrap();
        assert!(matches!(
            block_on(load(&env, &users)),
            Err(ScriptError::NotFound(_))
        ));
    }

    /// Only what neither list names is ownerless, and nothing when a list is damaged or
    /// missing (a lost script cannot be told from a gone one then).
    #[test]
    fn ownerless_keys_are_those_no_whole_list_names() {
        let (live, trashed, gone) = (slot(1, 0.0).uuid, slot(2, 0.0).uuid, slot(3, 0.0).uuid);
        let mut all = Map::new();
        for u in [&live, &trashed, &gone] {
            for k in [
                format!("script/{u}"),
                format!("history/{u}"),
                format!("history/{u}/4"),
                format!("values/{u}"),
                format!("runs/{u}"),
            ] {
                all.insert(k, json!({}));
            }
        }
        all.insert(format!("trash/{gone}"), json!({}));
        all.insert("history/budget".into(), json!({}));
        all.insert("values/budget".into(), json!({}));
        all.insert(
            TRASH_INDEX_KEY.into(),
            json!({"items": [{"uuid": trashed, "deletedAt": 1.0}]}),
        );
        let mut found = ownerless(&all);
        assert!(found.is_empty(), "no scripts/index: nothing is ownerless");
        all.insert(store::INDEX_KEY.into(), json!({"uuids": [live]}));
        found = ownerless(&all);
        found.sort();
        let mut want: Vec<String> = ["script", "history", "values", "runs", "trash"]
            .iter()
            .map(|p| format!("{p}/{gone}"))
            .chain([format!("history/{gone}/4")])
            .collect();
        want.sort();
        assert_eq!(found, want);
        all.insert(
            TRASH_INDEX_KEY.into(),
            json!({"items": [{"uuid": trashed, "deletedAt": "x"}]}),
        );
        assert!(ownerless(&all).is_empty(), "a damaged trash list: nothing");
        all.insert(
            TRASH_INDEX_KEY.into(),
            json!({"items": [{"uuid": trashed, "deletedAt": 1.0}]}),
        );
        all.insert(store::INDEX_KEY.into(), json!({"uuids": [live, live]}));
        assert!(ownerless(&all).is_empty(), "a damaged script list: nothing");
    }

    /// `trash/index` removed or not a list: read as an empty trash, the trashed scripts left
    /// the Trash view, the next delete stored a list of itself alone, and the purge after it
    /// swept their entries (and histories) as ownerless, within their 30 days. They are found
    /// again from their `trash/<uuid>` entries, except one a restore stopped before its remove
    /// left behind (the script is live again: adopting it would hide it).
    #[test]
    fn a_missing_or_garbage_trash_index_is_found_again_from_the_entries() {
        use crate::env::memory::MemoryEnv;
        use futures::executor::block_on;
        let src = |n: &str| {
            format!("// ==UserScript==\n// @name {n}\n// @match https://a.example/*\n// ==/UserScript==\n")
        };
        let user = || Actor {
            by: "user",
            via: None,
        };
        for garbage in [
            None,
            Some(json!({"items": "x"})),
            Some(json!("x")),
            Some(json!({"items": [5]})),
        ] {
            let env = MemoryEnv::new();
            let mut made = Vec::new();
            for n in ["A", "B", "C", "Live"] {
                let snap = block_on(store::load_snapshot(&env)).unwrap();
                made.push(
                    block_on(store::create(&env, &snap, "user", &src(n), true, 1 << 20))
                        .unwrap()
                        .record
                        .uuid,
                );
                env.advance(5.0);
            }
            for u in &made[..2] {
                let snap = block_on(store::load_snapshot(&env)).unwrap();
                block_on(delete(&env, &snap, user(), u, None)).unwrap();
                env.advance(5.0);
            }
            // What a restore stopped before removing its trash entry leaves: a live script with one.
            let leftover = json!({"record": block_on(store::load(&env, &made[3])).unwrap(), "source": src("Live"), "deletedAt": 1.0, "deletedBy": "user"});
            let mut items = Map::new();
            items.insert(trash_key(&made[3]), leftover);
            match &garbage {
                Some(v) => {
                    items.insert(TRASH_INDEX_KEY.into(), v.clone());
                }
                None => {
                    block_on(env.remove(Area::Local, &[TRASH_INDEX_KEY])).unwrap();
                }
            }
            block_on(env.set(Area::Local, items)).unwrap();
            let listed = |env: &MemoryEnv| {
                let mut l: Vec<String> = block_on(list(env))
                    .unwrap()
                    .0
                    .into_iter()
                    .map(|t| t.record.uuid)
                    .collect();
                l.sort();
                l
            };
            let mut ab = made[..2].to_vec();
            ab.sort();
            assert_eq!(listed(&env), ab, "{garbage:?}: the Trash view lists both");
            let snap = block_on(store::load_snapshot(&env)).unwrap();
            assert_eq!(
                snap.records.len(),
                2,
                "{garbage:?}: the live scripts stay live"
            );
            block_on(delete(&env, &snap, user(), &made[2], None)).unwrap();
            block_on(purge(&env, Some(std::slice::from_ref(&made[2])))).unwrap();
            assert_eq!(
                listed(&env),
                ab,
                "{garbage:?}: a delete and a purge after lose neither"
            );
            for u in &made[..2] {
                assert!(
                    env.dump(Area::Local).contains_key(&trash_key(u)),
                    "{garbage:?}: {u} kept"
                );
            }
        }
    }

    /// Both lists lost, and a restore stopped before its remove left a live script's entry in
    /// the trash (its `deletedAt` long past): the store's rebuild takes the record for live, so
    /// the trash must not adopt the entry too. Adopted, the script showed live and in the trash,
    /// and the trash's purges — the expired sweep, "Delete forever", "Empty trash" — removed
    /// the live script's record, source, history and values.
    #[test]
    fn with_both_lists_lost_a_live_scripts_leftover_entry_is_not_adopted() {
        use crate::env::memory::MemoryEnv;
        use futures::executor::block_on;
        let env = MemoryEnv::new();
        let src =
            "// ==UserScript==\n// @name Live\n// @match https://a.example/*\n// ==/UserScript==\n";
        let snap = block_on(store::load_snapshot(&env)).unwrap();
        let live = block_on(store::create(&env, &snap, "user", src, true, 1 << 20))
            .unwrap()
            .record
            .uuid;
        let leftover = json!({"record": block_on(store::load(&env, &live)).unwrap(), "source": src, "deletedAt": 1.0, "deletedBy": "user"});
        let mut items = Map::new();
        items.insert(trash_key(&live), leftover);
        block_on(env.set(Area::Local, items)).unwrap();
        block_on(env.remove(Area::Local, &[INDEX_KEY, TRASH_INDEX_KEY])).unwrap();
        let snap = block_on(store::load_snapshot(&env)).unwrap();
        assert_eq!(snap.index, vec![live.clone()], "the store's rebuild: live");
        let listed = block_on(list(&env)).unwrap().0;
        assert!(listed.is_empty(), "listed in the trash too: {listed:?}");
        block_on(purge_expired(&env)).unwrap();
        block_on(purge(&env, None)).unwrap();
        for k in [store::record_key(&live), store::source_key(&live)] {
            assert!(env.dump(Area::Local).contains_key(&k), "{k} purged");
        }
    }

    #[test]
    fn a_damaged_trash_index_reads_as_what_it_still_names() {
        let v = json!({ "items": [ {"uuid": slot(1, 0.0).uuid, "deletedAt": 5.0}, {"uuid": "nope", "deletedAt": 1.0}, 7, {"uuid": slot(1, 0.0).uuid, "deletedAt": 6.0} ] });
        let (s, damaged) = decode_index(Some(&v));
        assert_eq!(s.len(), 1);
        assert!(damaged.is_empty());
        assert!(decode_index(Some(&json!("x"))).0.is_empty());
        // An item naming a script but not decoding is repaired from the script's entry.
        let bad = json!({ "items": [ {"uuid": slot(2, 0.0).uuid, "deletedAt": "x"} ] });
        assert_eq!(decode_index(Some(&bad)).1, [slot(2, 0.0).uuid]);
    }
}
