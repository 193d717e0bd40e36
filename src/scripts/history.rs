//! Revision history: every change to a script keeps the version it replaced (record and source)
//! in the same atomic `storage.set` as the change itself, so a version is never lost between the
//! write and its history.
//!
//! Layout: each kept revision under a key of its own, `history/<uuid>/<revision>`, and a small
//! index, `history/<uuid>`, listing them oldest first with their sizes. A write adds one
//! revision and rewrites the index; it never reads or moves the others (before, one key held
//! them all, and a write at the 20-revision cap read and rewrote every source). A revision the
//! bounds drop is removed after the `set` that dropped it from the index; one left behind by an
//! interruption is unreachable, and [`orphans`] finds it for the next sweep. An index of the old
//! layout (`"v": 1`, the revisions inline) is still read, and is split into keys at its next write.
//!
//! Bounded three ways, the oldest revision dropped first: [`MAX_REVISIONS`] per script,
//! [`MAX_SCRIPT_BYTES`] per script, and [`MAX_TOTAL_BYTES`] across all scripts. A revision
//! weighs its source and the `@require`/`@resource` files it pins that the version replacing
//! it does not keep, as stored ([`pinned_bytes`]): the sweep keeps every file a revision
//! names, so before, a few library version changes filled the storage quota for good, and
//! every later write with a file was refused. The total is tracked in `history/budget`, one
//! number per script, so the bound costs one small key per write; past it the script with the
//! most history loses its oldest revision. Two revisions are passed over while another can go:
//! the newest that stood as the script for [`SETTLED_MS`] (each index line records when its
//! revision became the script), so a burst of writes cannot push the version the user ran
//! before it out of the history; and the newest made by another caller than the one now
//! writing, of a source not that caller's (each line records who made it, and whose source a
//! copy holds), so a run of one caller's writes cannot push out the version another left,
//! however recent (`Index::handed_over`). The total bound passes over them
//! while another revision of any script can go (`Index::candidate`), since which history is
//! the biggest is decided by writes to other scripts.
//!
//! Decoding is lenient: a revision that does not decode, is missing, or whose source does not
//! hash to its recorded sha256, is reported and skipped; the script itself is never touched by it.
//! An index that does not decode whole is rebuilt from the revision keys stored ([`adopt`]), so
//! neither the next write (which rewrites the index) nor the sweep loses the revisions it names.

use super::record::ScriptRecord;
use crate::env::{Area, Storage};
use crate::guard::digest::sha256_hex;
use crate::vec_map::{VecMap, VecSet};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

pub const MAX_REVISIONS: usize = 20;
/// How long a version must have been the script for the bounds to keep it past a burst of
/// later ones ([`Index::settled`]).
pub const SETTLED_MS: f64 = 60.0 * 60.0 * 1000.0;
pub const MAX_SCRIPT_BYTES: usize = 1024 * 1024;
pub const MAX_TOTAL_BYTES: usize = 4 * 1024 * 1024;
pub const BUDGET_KEY: &str = "history/budget";

/// The key of a script's history index.
pub fn history_key(uuid: &str) -> String {
    format!("history/{uuid}")
}

/// The key of one kept revision.
pub fn revision_key(uuid: &str, revision: u64) -> String {
    format!("history/{uuid}/{revision}")
}

/// One earlier version of a script: its record as it was (revision, metadata, enabled, who,
/// when, through which tool) and its source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Revision {
    pub record: ScriptRecord,
    pub source: String,
}

impl Revision {
    /// The listing form: no source.
    pub fn summary(&self, current: bool) -> Value {
        let r = &self.record;
        json!({
            "revision": r.revision,
            "current": current,
            "name": r.metadata.name,
            "version": r.metadata.version,
            "enabled": r.enabled,
            "by": r.updated_by,
            "at": r.updated_at,
            "via": r.updated_via,
            "size": r.size,
            "sha256": r.sha256,
        })
    }
}

/// A script's stored history, oldest first, and what could not be read of it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    pub revisions: Vec<Revision>,
    pub problems: Vec<String>,
}

impl History {
    pub fn find(&self, revision: u64) -> Option<&Revision> {
        self.revisions
            .iter()
            .find(|r| r.record.revision == revision)
    }
}

/// One line of the index: a kept revision, its source's size, and when it became the script
/// (its `updatedAt`; lines written before it was recorded have none).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Entry {
    revision: u64,
    bytes: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    since: Option<f64>,
    /// Who made it (its `updatedBy`; lines written before it was recorded have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    by: Option<String>,
    /// The start of its source's sha256 (16 hex digits), to tell a version from a copy of an
    /// older one (an Undo, a restore, a switch turned: the same source again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sha: Option<String>,
    /// For a copy of an older kept version's source: who made that source (set when it is
    /// pushed, while the older one is still kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    from: Option<String>,
}

/// A kept revision as a write sees it: its line, and its value when this write must store it
/// (new, or still inline in an index of the old layout).
#[derive(Debug, Clone, PartialEq)]
struct Kept {
    entry: Entry,
    unsaved: Option<Revision>,
}

/// A script's history index as decoded for a write, and what could not be read of it.
#[derive(Debug, Clone, Default, PartialEq)]
struct Index {
    kept: Vec<Kept>,
    problems: Vec<String>,
    /// The index itself (not a revision) could not be read whole: it may not list revisions
    /// that are stored ([`adopt`] finds them).
    damaged: bool,
}

impl Index {
    fn bytes(&self) -> usize {
        self.kept
            .iter()
            .fold(0usize, |n, k| n.saturating_add(k.entry.bytes))
    }

    fn value(&self) -> Value {
        let lines: Vec<&Entry> = self.kept.iter().map(|k| &k.entry).collect();
        json!({ "v": 2, "revisions": lines })
    }

    /// The settled revision: the newest kept one that stood as the script for [`SETTLED_MS`]
    /// or more before the next one replaced it. A burst of writes (an agent's 20 in a minute)
    /// cannot push it out of the history: the version the user had before the burst stays.
    fn settled(&self) -> Option<usize> {
        let since = |i: usize| self.kept.get(i).and_then(|k| k.entry.since);
        (0..self.kept.len().saturating_sub(1))
            .rev()
            .find(|&i| match (since(i), since(i + 1)) {
                (Some(a), Some(b)) => b - a >= SETTLED_MS,
                _ => false,
            })
    }

    /// The handed-over revision: the newest kept version made by someone other than the caller
    /// of the newest (the one whose run of writes is pushing the oldest out), whose source is
    /// not that caller's either. A run of writes by one caller (an agent's 20 in a minute,
    /// within its rate limit) cannot push the version the user, or another caller, left before
    /// it out of the history, however recent; [`Index::settled`] alone kept only a version that
    /// had stood for an hour. A copy of the caller's own source (the user's Undo or switch in
    /// the middle of the run: the agent's source again, by the user) would stand for the
    /// agent's version, so it is passed over (a reviewer's case).
    fn handed_over(&self) -> Option<usize> {
        let run = self.kept.last()?.entry.by.as_deref()?;
        (0..self.kept.len().saturating_sub(1)).rev().find(|&i| {
            self.kept.get(i).is_some_and(|k| {
                k.entry.by.as_deref().is_some_and(|b| b != run)
                    && k.entry.from.as_deref() != Some(run)
            })
        })
    }

    /// Which revision the bounds drop next: the oldest, passing over the settled and the
    /// handed-over ones while any other but the newest is left (past that, the bound wins: they
    /// go, the oldest first).
    fn next_to_drop(&self) -> usize {
        let (settled, handed) = (self.settled(), self.handed_over());
        (0..self.kept.len().saturating_sub(1))
            .find(|&i| Some(i) != settled && Some(i) != handed)
            .unwrap_or(0)
    }

    /// Drops the revision the bounds drop next ([`Index::next_to_drop`]); returns its key when
    /// it is stored under one (to remove).
    fn drop_oldest(&mut self, uuid: &str) -> Option<String> {
        if self.kept.is_empty() {
            return None;
        }
        self.drop_at(uuid, self.next_to_drop())
    }

    fn drop_at(&mut self, uuid: &str, i: usize) -> Option<String> {
        if i >= self.kept.len() {
            return None;
        }
        let gone = self.kept.remove(i);
        gone.unsaved
            .is_none()
            .then(|| revision_key(uuid, gone.entry.revision))
    }

    /// What the total bound may take of this history at `tier`: 0, its oldest revision that is
    /// neither the settled one, the handed-over one nor the newest; 1, the newest (the way back
    /// from its last change), unless this change adds it — one per script in that pass, since
    /// the next newest may be the settled one, which only its successor shows; 2, the settled
    /// one, then the handed-over one; 3, whatever is left but what this change adds (the bound
    /// wins). The total bound empties a tier across every script before it touches the next,
    /// so writes to other scripts (which decide which history is the biggest) cannot push any
    /// script's settled or handed-over version out while another revision anywhere can go.
    fn candidate(&self, tier: u8) -> Option<usize> {
        let newest = self.kept.len().checked_sub(1)?;
        let saved = |i: usize| self.kept.get(i).is_some_and(|k| k.unsaved.is_none());
        let (settled, handed) = (self.settled(), self.handed_over());
        match tier {
            0 => (0..newest).find(|&i| Some(i) != settled && Some(i) != handed),
            1 => saved(newest).then_some(newest),
            2 => settled.or(handed),
            _ => (0..=newest).find(|&i| i < newest || saved(i)),
        }
    }
}

/// Checks one revision read back against the script and revision it is filed under.
fn check(uuid: &str, revision: Option<u64>, r: Revision) -> Result<Revision, String> {
    if r.record.uuid != uuid {
        return Err("names another script".into());
    }
    if revision.is_some_and(|n| n != r.record.revision) {
        return Err(format!("holds revision {}", r.record.revision));
    }
    if sha256_hex(r.source.as_bytes()) != r.record.sha256 {
        return Err("its source does not match its sha256".into());
    }
    Ok(r)
}

/// Lenient decoding of the index `history/<uuid>` (see the module docs). Never fails.
fn decode_index(uuid: &str, v: Option<&Value>) -> Index {
    let mut ix = Index::default();
    let Some(v) = v else {
        return ix;
    };
    let Some(items) = v.get("revisions").and_then(Value::as_array) else {
        ix.problems
            .push("the history index is damaged (no list of revisions)".into());
        ix.damaged = true;
        return ix;
    };
    let layout_2 = v.get("v").and_then(Value::as_u64) == Some(2);
    for (i, item) in items.iter().enumerate() {
        let kept = if layout_2 {
            <Entry as Deserialize>::deserialize(item)
                .map(|entry| Kept {
                    entry,
                    unsaved: None,
                })
                .map_err(|e| {
                    ix.damaged = true;
                    format!("history entry {i} is damaged ({e})")
                })
        } else {
            // The old layout: every revision inline.
            <Revision as Deserialize>::deserialize(item)
                .map_err(|e| e.to_string())
                .and_then(|r| check(uuid, None, r))
                .map(|r| Kept {
                    entry: Entry {
                        revision: r.record.revision,
                        bytes: r.source.len(),
                        since: Some(r.record.updated_at),
                        by: Some(r.record.updated_by.clone()),
                        sha: r.record.sha256.get(..16).map(str::to_owned),
                        from: None,
                    },
                    unsaved: Some(r),
                })
                .map_err(|why| format!("revision entry {i} is damaged ({why})"))
        };
        match kept {
            Ok(k) if ix.kept.iter().any(|x| x.entry.revision == k.entry.revision) => {
                ix.problems.push(format!(
                    "revision {} is listed twice; skipped",
                    k.entry.revision
                ))
            }
            Ok(k) => ix.kept.push(k),
            Err(why) => ix.problems.push(format!("{why}; skipped")),
        }
    }
    ix
}

/// The revision a key of `uuid`'s history names, as [`revision_key`] writes it (no other
/// spelling: `history/<uuid>/01` is not revision 1's).
fn revision_of_key(uuid: &str, key: &str) -> Option<u64> {
    let n = key
        .strip_prefix("history/")?
        .strip_prefix(uuid)?
        .strip_prefix('/')?;
    let r: u64 = n.parse().ok()?;
    (r.to_string() == n).then_some(r)
}

/// Rebuilds a damaged index from storage read whole (`all`): every revision stored under a
/// key of its own that the index lost (a damaged line, or no list at all) and that still reads
/// back as that revision of that script is listed again, oldest first. Without this a write
/// rewrote the index without them, and the next sweep took them for orphans.
fn adopt(uuid: &str, ix: &mut Index, all: &Map<String, Value>) {
    let mut found = 0usize;
    for (k, v) in all {
        let Some(n) = revision_of_key(uuid, k) else {
            continue;
        };
        if ix.kept.iter().any(|x| x.entry.revision == n) {
            continue;
        }
        let Ok(r) = <Revision as Deserialize>::deserialize(v)
            .map_err(|e| e.to_string())
            .and_then(|r| check(uuid, Some(n), r))
        else {
            continue;
        };
        ix.kept.push(Kept {
            entry: Entry {
                revision: n,
                bytes: r.source.len(),
                since: Some(r.record.updated_at),
                by: Some(r.record.updated_by.clone()),
                sha: r.record.sha256.get(..16).map(str::to_owned),
                from: None,
            },
            unsaved: None,
        });
        found = found.saturating_add(1);
    }
    crate::sort::sort_by(&mut ix.kept, |a, b| a.entry.revision.cmp(&b.entry.revision));
    ix.damaged = false;
    if found == 0 {
        // The damage is reported already; nothing more was found.
        return;
    }
    ix.problems.push(format!(
        "the history index is damaged: {found} revision(s) it no longer lists were found stored, and are kept (the next change lists them again)"
    ));
}

/// [`decode_index`], and [`adopt`] when the index is damaged, with storage read whole once
/// (kept in `all` for the next damaged index): only on that rare path.
async fn decode_repaired<S: Storage>(
    s: &S,
    uuid: &str,
    v: Option<&Value>,
    all: &mut Option<Map<String, Value>>,
) -> Result<Index, crate::env::EnvError> {
    let mut ix = decode_index(uuid, v);
    if ix.damaged {
        if all.is_none() {
            *all = Some(s.get_all(Area::Local).await?);
        }
        if let Some(all) = all {
            adopt(uuid, &mut ix, all);
        }
    }
    Ok(ix)
}

/// A script's whole history: its index, then every revision it lists in one read.
pub async fn load<S: Storage>(s: &S, uuid: &str) -> Result<History, crate::env::EnvError> {
    let key = history_key(uuid);
    let got = s.get(Area::Local, &[&key]).await?;
    let ix = decode_repaired(s, uuid, got.get(&key), &mut None).await?;
    let mut h = History {
        revisions: Vec::new(),
        problems: ix.problems,
    };
    let keys: Vec<String> = ix
        .kept
        .iter()
        .filter(|k| k.unsaved.is_none())
        .map(|k| revision_key(uuid, k.entry.revision))
        .collect();
    let stored = if keys.is_empty() {
        Map::new()
    } else {
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        s.get(Area::Local, &refs).await?
    };
    for k in ix.kept {
        let n = k.entry.revision;
        let r = match k.unsaved {
            Some(r) => Ok(r),
            None => match stored.get(&revision_key(uuid, n)) {
                None => Err("is missing".to_owned()),
                Some(v) => <Revision as Deserialize>::deserialize(v)
                    .map_err(|e| format!("is damaged ({e})"))
                    .and_then(|r| {
                        check(uuid, Some(n), r).map_err(|why| format!("is damaged ({why})"))
                    }),
            },
        };
        match r {
            Ok(r) => h.revisions.push(r),
            Err(why) => h.problems.push(format!("revision {n} {why}; skipped")),
        }
    }
    Ok(h)
}

/// The bytes of the files `prev` names that `now` (the version replacing it) does not, as
/// stored (base64: four for three): what keeping `prev` in the history keeps in storage
/// besides its source.
pub fn pinned_bytes(prev: &ScriptRecord, now: &[crate::gm::assets::Asset]) -> usize {
    let mut seen = VecSet::default();
    prev.assets
        .iter()
        .filter(|a| !now.iter().any(|n| n.sha256 == a.sha256))
        .filter(|a| seen.insert(a.sha256.clone()))
        .map(|a| a.size.div_ceil(3).saturating_mul(4))
        .fold(0usize, usize::saturating_add)
}

/// Appends `prev` (weighing its source and `pinned` bytes of files) and drops the oldest past
/// the per-script bounds; returns the keys of the stored revisions it dropped.
fn push(ix: &mut Index, uuid: &str, prev: Revision, pinned: usize) -> Vec<String> {
    let mut stale = Vec::new();
    // The same revision again (defensive: revisions only grow) replaces the one kept; its key
    // is written again, so it is not stale.
    ix.kept.retain(|k| k.entry.revision != prev.record.revision);
    let sha = prev.record.sha256.get(..16).map(str::to_owned);
    // A copy of an older kept version: who made that source first (`Index::handed_over`).
    let from = ix
        .kept
        .iter()
        .rev()
        .find(|k| sha.is_some() && k.entry.sha == sha)
        .and_then(|k| k.entry.from.clone().or_else(|| k.entry.by.clone()));
    ix.kept.push(Kept {
        entry: Entry {
            revision: prev.record.revision,
            bytes: prev.source.len().saturating_add(pinned),
            since: Some(prev.record.updated_at),
            by: Some(prev.record.updated_by.clone()),
            sha,
            from,
        },
        unsaved: Some(prev),
    });
    while ix.kept.len() > MAX_REVISIONS || (ix.kept.len() > 1 && ix.bytes() > MAX_SCRIPT_BYTES) {
        stale.extend(ix.drop_oldest(uuid));
    }
    stale
}

fn decode_budget(v: Option<&Value>) -> Map<String, Value> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter(|(k, v)| super::record::is_uuid(k) && v.as_u64().is_some())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

fn budget_total(b: &Map<String, Value>) -> usize {
    b.values()
        .filter_map(Value::as_u64)
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
        .fold(0usize, usize::saturating_add)
}

/// What a change does to the history: the items its `set` carries (the new revisions, the
/// indexes and the budget), and the keys of revisions the bounds dropped, to remove once that
/// `set` is stored ([`remove_stale`]).
#[derive(Debug, Default)]
pub struct Pushed {
    pub items: Map<String, Value>,
    pub stale: Vec<String>,
}

/// Removes what a stored change dropped from the history. A failure only leaves unreachable
/// bytes, which the next sweep finds ([`orphans`]).
pub async fn remove_stale<S: Storage>(s: &S, stale: &[String]) {
    if stale.is_empty() {
        return;
    }
    let refs: Vec<&str> = stale.iter().map(String::as_str).collect();
    let _ = s.remove(Area::Local, &refs).await;
}

/// What replacing `prev` (same uuid) with a new version, whose files are `now`, does to the
/// history: `prev` appended, the bounds applied (possibly to another script's history). Reads
/// storage; writes nothing.
pub async fn items_for<S: Storage>(
    s: &S,
    prev: Revision,
    now: &[crate::gm::assets::Asset],
) -> Result<Pushed, crate::env::EnvError> {
    let pinned = pinned_bytes(&prev.record, now);
    items_for_many(s, vec![(prev, pinned)]).await
}

/// [`items_for`] for several scripts replaced in one `set` (an import), each with its
/// [`pinned_bytes`]: one budget for all, so no script's share is lost to another's. None
/// replaced: nothing to store.
pub async fn items_for_many<S: Storage>(
    s: &S,
    prevs: Vec<(Revision, usize)>,
) -> Result<Pushed, crate::env::EnvError> {
    if prevs.is_empty() {
        return Ok(Pushed::default());
    }
    // The budget and the indexes the new revisions go into, in one read.
    let mut keys = vec![BUDGET_KEY.to_owned()];
    for (p, _) in &prevs {
        let k = history_key(&p.record.uuid);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let got = s.get(Area::Local, &refs).await?;
    items_from(s, prevs, &got).await
}

/// The keys [`items_for_read`] needs read for one script: read them with the script's own.
pub fn keys_for(uuid: &str) -> [String; 2] {
    [BUDGET_KEY.to_owned(), history_key(uuid)]
}

/// [`items_for`] from a `get` that already holds [`keys_for`] the script (one read less).
pub async fn items_for_read<S: Storage>(
    s: &S,
    prev: Revision,
    now: &[crate::gm::assets::Asset],
    got: &Map<String, Value>,
) -> Result<Pushed, crate::env::EnvError> {
    let pinned = pinned_bytes(&prev.record, now);
    items_from(s, vec![(prev, pinned)], got).await
}

/// `got` holds the budget and every index of `prevs` as storage has them (a key missing: not
/// stored).
async fn items_from<S: Storage>(
    s: &S,
    prevs: Vec<(Revision, usize)>,
    got: &Map<String, Value>,
) -> Result<Pushed, crate::env::EnvError> {
    let mut budget = decode_budget(got.get(BUDGET_KEY));
    let mut loaded: VecMap<String, Index> = Default::default();
    let mut stale = Vec::new();
    // Storage read whole, if a damaged index needs it.
    let mut all = None;
    for (prev, pinned) in prevs {
        let uuid = prev.record.uuid.clone();
        let mut ix = match loaded.remove(&uuid) {
            Some(ix) => ix,
            None => decode_repaired(s, &uuid, got.get(&history_key(&uuid)), &mut all).await?,
        };
        stale.extend(push(&mut ix, &uuid, prev, pinned));
        budget.insert(uuid.clone(), json!(ix.bytes()));
        loaded.insert(uuid, ix);
    }
    // The total bound: the script with the most history gives up a revision, tier by tier
    // (`Index::candidate`: older ones, then the newest, then the settled and handed-over ones,
    // then the rest). Each step removes a revision or passes a script over for the tier, so
    // this ends within the number of revisions stored times four. The revisions this change
    // adds are never dropped by it: each is the only way back from the change (a script bigger
    // than its share of the budget would otherwise lose the version it just replaced). Past
    // the bound by them, the next change trims the rest.
    let mut steps = 0usize;
    for tier in 0..4u8 {
        let mut passed = VecSet::default();
        while budget_total(&budget) > MAX_TOTAL_BYTES && steps < 30_000 {
            steps = steps.saturating_add(1);
            let Some(biggest) = budget
                .iter()
                .filter(|(k, _)| !passed.contains(k.as_str()))
                .max_by_key(|(_, v)| v.as_u64().unwrap_or(0))
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if !loaded.contains_key(&biggest) {
                let key = history_key(&biggest);
                let got = s.get(Area::Local, &[&key]).await?;
                let ix = decode_repaired(s, &biggest, got.get(&key), &mut all).await?;
                loaded.insert(biggest.clone(), ix);
            }
            let Some(ix) = loaded.get_mut(&biggest) else {
                break;
            };
            if ix.kept.is_empty() {
                budget.remove(&biggest);
            } else if let Some(i) = ix.candidate(tier) {
                stale.extend(ix.drop_at(&biggest, i));
                budget.insert(biggest.clone(), json!(ix.bytes()));
                if tier == 1 {
                    passed.insert(biggest);
                }
            } else {
                passed.insert(biggest);
            }
        }
    }
    let mut items = Map::new();
    for (uuid, ix) in loaded {
        items.insert(history_key(&uuid), ix.value());
        for k in ix.kept {
            if let Some(r) = k.unsaved {
                let v =
                    serde_json::to_value(&r).map_err(|e| crate::env::EnvError(e.to_string()))?;
                items.insert(revision_key(&uuid, k.entry.revision), v);
            }
        }
    }
    items.insert(BUDGET_KEY.to_owned(), Value::Object(budget));
    // A key written again by this `set` is not stale.
    stale.retain(|k| !items.contains_key(k));
    Ok(Pushed { items, stale })
}

/// The budget without `uuid`, for a `set` that removes its history for good.
pub async fn budget_without<S: Storage>(
    s: &S,
    uuids: &[String],
) -> Result<Value, crate::env::EnvError> {
    let got = s.get(Area::Local, &[BUDGET_KEY]).await?;
    let mut budget = decode_budget(got.get(BUDGET_KEY));
    for u in uuids {
        budget.remove(u);
    }
    Ok(Value::Object(budget))
}

/// Every key that holds the history of `uuids`: their indexes and the revisions they list (for
/// removing those scripts for good).
pub async fn keys_of<S: Storage>(
    s: &S,
    uuids: &[String],
) -> Result<Vec<String>, crate::env::EnvError> {
    let keys: Vec<String> = uuids.iter().map(|u| history_key(u)).collect();
    if keys.is_empty() {
        return Ok(keys);
    }
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let got = s.get(Area::Local, &refs).await?;
    let mut out = keys.clone();
    let mut all = None;
    for (u, k) in uuids.iter().zip(&keys) {
        let ix = decode_repaired(s, u, got.get(k), &mut all).await?;
        out.extend(
            ix.kept
                .iter()
                .filter(|k| k.unsaved.is_none())
                .map(|k| revision_key(u, k.entry.revision)),
        );
    }
    Ok(out)
}

/// The revision keys in `all` (storage as read whole) that no index lists: left behind by an
/// interrupted change, or by a script removed for good.
pub fn orphans(all: &Map<String, Value>) -> Vec<String> {
    let mut listed = VecSet::new();
    for (k, v) in all {
        let Some(uuid) = k.strip_prefix("history/") else {
            continue;
        };
        if super::record::is_uuid(uuid) {
            let mut ix = decode_index(uuid, Some(v));
            if ix.damaged {
                adopt(uuid, &mut ix, all);
            }
            for kept in ix.kept.iter().filter(|k| k.unsaved.is_none()) {
                listed.insert(revision_key(uuid, kept.entry.revision));
            }
        }
    }
    all.keys()
        .filter(|k| {
            k.strip_prefix("history/")
                .is_some_and(|rest| rest.contains('/'))
                && !listed.contains(k.as_str())
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::memory::MemoryEnv;
    use crate::scripts::metadata;
    use futures::executor::block_on;

    fn rev(uuid: &str, n: u64, source: &str) -> Revision {
        let meta = metadata::parse(
            "// ==UserScript==\n// @name A\n// @match https://a.test/*\n// ==/UserScript==\n",
        )
        .metadata
        .unwrap();
        Revision {
            record: ScriptRecord {
                uuid: uuid.to_owned(),
                metadata: meta,
                enabled: true,
                revision: n,
                created_at: 0.0,
                updated_at: n as f64,
                created_by: "user".into(),
                updated_by: "user".into(),
                updated_via: None,
                sha256: sha256_hex(source.as_bytes()),
                size: source.len(),
                assets: Vec::new(),
            },
            source: source.to_owned(),
        }
    }

    const U: &str = "00000000-0000-4000-8000-000000000001";

    /// What a change does: the history's items in one `set`, then the stale keys removed.
    fn keep(env: &MemoryEnv, prev: Revision) -> Pushed {
        let pushed = block_on(items_for(env, prev, &[])).unwrap();
        block_on(env.set(Area::Local, pushed.items.clone())).unwrap();
        block_on(remove_stale(env, &pushed.stale));
        pushed
    }

    fn kept(env: &MemoryEnv, uuid: &str) -> Vec<u64> {
        let h = block_on(load(env, uuid)).unwrap();
        assert!(h.problems.is_empty(), "{:?}", h.problems);
        h.revisions.iter().map(|r| r.record.revision).collect()
    }

    fn history_keys(env: &MemoryEnv) -> Vec<String> {
        env.dump(Area::Local)
            .keys()
            .filter(|k| k.starts_with("history/") && *k != BUDGET_KEY)
            .cloned()
            .collect()
    }

    #[test]
    fn at_most_twenty_revisions_oldest_dropped_first_and_their_keys_removed() {
        let env = MemoryEnv::new();
        for n in 1..=25 {
            keep(&env, rev(U, n, &format!("v{n}")));
        }
        assert_eq!(kept(&env, U), (6..=25).collect::<Vec<_>>());
        let mut want: Vec<String> = (6..=25).map(|n| revision_key(U, n)).collect();
        want.push(history_key(U));
        want.sort();
        let mut keys = history_keys(&env);
        keys.sort();
        assert_eq!(keys, want, "the dropped revisions' keys are gone");
    }

    #[test]
    fn a_change_stores_only_the_revision_it_adds_the_index_and_the_budget() {
        let env = MemoryEnv::new();
        for n in 1..=20 {
            keep(&env, rev(U, n, &"s".repeat(5000)));
        }
        // At the cap: the 21st change writes one revision, not the twenty.
        let pushed = keep(&env, rev(U, 21, &"t".repeat(5000)));
        let mut keys: Vec<String> = pushed.items.keys().cloned().collect();
        keys.sort();
        let mut want = vec![BUDGET_KEY.to_owned(), history_key(U), revision_key(U, 21)];
        want.sort();
        assert_eq!(keys, want);
        assert_eq!(pushed.stale, vec![revision_key(U, 1)]);
        let ix = &env.dump(Area::Local)[&history_key(U)];
        // Twenty lines of revision, size, time, author (an extension id at most: 32
        // characters) and sha prefix, not the 100 KB of sources.
        assert!(ix.to_string().len() < 2500, "the index is small: {ix}");
    }

    #[test]
    fn the_byte_cap_drops_the_oldest_but_keeps_the_newest() {
        let env = MemoryEnv::new();
        let big = "x".repeat(300 * 1024);
        for n in 1..=5 {
            keep(&env, rev(U, n, &big));
        }
        // 3 × 300 KiB fit in 1 MiB, 4 do not.
        assert_eq!(kept(&env, U), vec![3, 4, 5]);
        let huge = "y".repeat(MAX_SCRIPT_BYTES + 1);
        keep(&env, rev(U, 6, &huge));
        assert_eq!(
            kept(&env, U),
            vec![6],
            "a lone revision is kept even past the cap"
        );
        assert_eq!(history_keys(&env).len(), 2);
    }

    /// A revision weighs the files it pins that its replacement does not keep: a library
    /// whose version changed at each write (a 300 KiB file each) is bounded as its sources
    /// are; one every version shares costs its history nothing.
    #[test]
    fn the_byte_cap_counts_the_files_a_revision_alone_keeps() {
        let asset = |sha: &str| crate::gm::assets::Asset {
            url: format!("https://cdn.test/{sha}.js"),
            name: None,
            sha256: sha.to_owned(),
            size: 300 * 1024,
            mime: String::new(),
            final_url: None,
            charset: None,
        };
        let with = |n: u64, files: &[&str]| {
            let mut r = rev(U, n, &format!("v{n}"));
            r.record.assets = files.iter().map(|f| asset(f)).collect();
            r
        };
        let env = MemoryEnv::new();
        for n in 1..=6u64 {
            let now = [asset(&format!("lib{}", n + 1)), asset("shared")];
            let pushed = block_on(items_for(
                &env,
                with(n, &[&format!("lib{n}"), "shared"]),
                &now,
            ))
            .unwrap();
            block_on(env.set(Area::Local, pushed.items.clone())).unwrap();
            block_on(remove_stale(&env, &pushed.stale));
        }
        // 2 × 300 KiB of libraries (400 KiB each as stored) fit in 1 MiB, 3 do not; the shared
        // file is not counted.
        assert_eq!(kept(&env, U), vec![5, 6]);
        assert_eq!(
            pinned_bytes(&with(1, &["a", "a", "b"]).record, &[asset("b")]),
            400 * 1024,
            "a file named twice counts once, as stored"
        );
    }

    #[test]
    fn damaged_entries_are_reported_and_skipped() {
        let env = MemoryEnv::new();
        for n in 1..=4 {
            keep(&env, rev(U, n, &format!("v{n}")));
        }
        let mut tampered = serde_json::to_value(rev(U, 2, "two")).unwrap();
        tampered["source"] = json!("tampered");
        let mut items = Map::new();
        items.insert(revision_key(U, 2), tampered);
        // Revision 3's key holding another revision's copy.
        items.insert(
            revision_key(U, 3),
            serde_json::to_value(rev(U, 1, "v1")).unwrap(),
        );
        block_on(env.set(Area::Local, items)).unwrap();
        block_on(env.remove(Area::Local, &[&revision_key(U, 4)])).unwrap();
        let h = block_on(load(&env, U)).unwrap();
        assert_eq!(h.revisions.len(), 1);
        assert_eq!(h.revisions[0].record.revision, 1);
        assert_eq!(h.problems.len(), 3, "{:?}", h.problems);
        assert!(h.problems[0].contains("revision 2"), "{:?}", h.problems);
        assert!(h.problems[2].contains("missing"), "{:?}", h.problems);

        let ix = json!({"v": 2, "revisions": [{"revision": 1, "bytes": 2}, {"revision": 1, "bytes": 2}, 17]});
        let h = decode_index(U, Some(&ix));
        assert_eq!(h.kept.len(), 1);
        assert_eq!(h.problems.len(), 2, "{:?}", h.problems);
        let h = decode_index(U, Some(&json!("garbage")));
        assert!(h.kept.is_empty());
        assert_eq!(h.problems.len(), 1);
        assert_eq!(decode_index(U, None), Index::default());
    }

    /// The layout before revisions had keys of their own: every revision inline.
    fn old_layout(revisions: &[Value]) -> Value {
        json!({ "v": 1, "revisions": revisions })
    }

    #[test]
    fn an_old_history_is_read_and_split_into_keys_at_its_next_change() {
        let env = MemoryEnv::new();
        let good = serde_json::to_value(rev(U, 1, "one")).unwrap();
        let mut tampered = serde_json::to_value(rev(U, 2, "two")).unwrap();
        tampered["source"] = json!("tampered");
        let other =
            serde_json::to_value(rev("00000000-0000-4000-8000-000000000002", 3, "x")).unwrap();
        let three = serde_json::to_value(rev(U, 3, "three")).unwrap();
        let mut items = Map::new();
        items.insert(
            history_key(U),
            old_layout(&[good, tampered, json!(17), other, three.clone(), three]),
        );
        block_on(env.set(Area::Local, items)).unwrap();
        let h = block_on(load(&env, U)).unwrap();
        assert_eq!(
            h.revisions
                .iter()
                .map(|r| r.record.revision)
                .collect::<Vec<_>>(),
            vec![1, 3]
        );
        assert_eq!(h.problems.len(), 4, "{:?}", h.problems);
        assert!(h.problems[3].contains("listed twice"), "{:?}", h.problems);

        let pushed = keep(&env, rev(U, 4, "four"));
        assert!(pushed.stale.is_empty());
        assert_eq!(kept(&env, U), vec![1, 3, 4]);
        let stored = env.dump(Area::Local);
        assert_eq!(stored[&history_key(U)]["v"], json!(2));
        assert_eq!(stored[&revision_key(U, 1)]["source"], json!("one"));
        assert!(orphans(&stored).is_empty());
    }

    #[test]
    fn the_total_bound_trims_the_biggest_history_first() {
        let env = MemoryEnv::new();
        let other = "00000000-0000-4000-8000-000000000009";
        // Another script already holds almost the whole budget.
        let chunk = "z".repeat(200 * 1024);
        for n in 1..=4 {
            keep(&env, rev(other, n, &chunk));
        }
        let mut items = Map::new();
        items.insert(BUDGET_KEY.into(), json!({ other: MAX_TOTAL_BYTES - 1000 }));
        block_on(env.set(Area::Local, items)).unwrap();
        let pushed = keep(&env, rev(U, 1, &"a".repeat(5000)));
        let budget = pushed.items[BUDGET_KEY].as_object().unwrap();
        assert!(budget_total(budget) <= MAX_TOTAL_BYTES);
        assert_eq!(kept(&env, other), vec![2, 3, 4], "its oldest went first");
        assert_eq!(pushed.stale, vec![revision_key(other, 1)]);
        assert!(!env.dump(Area::Local).contains_key(&revision_key(other, 1)));
        assert_eq!(kept(&env, U), vec![1]);
    }

    #[test]
    fn the_total_bound_never_drops_the_version_a_change_just_replaced() {
        let env = MemoryEnv::new();
        // Seventeen scripts with 240 KiB of history each: the budget is nearly full, and each
        // holds less than the 250 KiB source the next change replaces.
        let chunk = "z".repeat(240 * 1024);
        for i in 2..=18 {
            keep(
                &env,
                rev(
                    &format!("00000000-0000-4000-8000-0000000000{i:02}"),
                    1,
                    &chunk,
                ),
            );
        }
        let pushed = keep(&env, rev(U, 1, &"a".repeat(250 * 1024)));
        assert_eq!(
            kept(&env, U),
            vec![1],
            "the only way back from the change is kept"
        );
        // The others gave up their revisions to make room, within the bound's intent.
        assert!(!pushed.stale.is_empty());
        let budget = pushed.items[BUDGET_KEY].as_object().unwrap();
        assert!(budget_total(budget) <= MAX_TOTAL_BYTES, "{budget:?}");
        // A second change of the same script: its older revision may go, the new one stays.
        keep(&env, rev(U, 2, &"b".repeat(250 * 1024)));
        assert!(kept(&env, U).contains(&2));
    }

    #[test]
    fn writes_to_other_scripts_cannot_push_a_settled_version_out_while_anything_else_can_go() {
        let env = MemoryEnv::new();
        // The user's version 1 stood for two hours; an agent then wrote 2 and 3, big, so this
        // history is the biggest of all.
        let mut r1 = rev(U, 1, "user's own");
        r1.record.updated_at = 0.0;
        keep(&env, r1);
        let mut r2 = rev(U, 2, &"a".repeat(250 * 1024));
        r2.record.updated_at = 2.0 * SETTLED_MS;
        keep(&env, r2);
        assert_eq!(kept(&env, U), vec![1, 2]);
        // Junk scripts, each written twice, fill the total bound.
        let chunk = "z".repeat(240 * 1024);
        for i in 2..=20 {
            keep(
                &env,
                rev(
                    &format!("00000000-0000-4000-8000-0000000000{i:02}"),
                    1,
                    &chunk,
                ),
            );
        }
        let budget = decode_budget(
            block_on(env.get(Area::Local, &[BUDGET_KEY]))
                .unwrap()
                .get(BUDGET_KEY),
        );
        assert!(budget_total(&budget) <= MAX_TOTAL_BYTES, "{budget:?}");
        // U gave up its agent-written revision 2 (the newest) before any settled version; the
        // user's version stays, to restore.
        assert_eq!(kept(&env, U), vec![1], "the settled version is kept");
        // Had the settled tier gone first (the biggest history losing its oldest), 1 was gone.
    }

    /// A tester's agent wrote a script 21 times within a minute of the user's edit (within its
    /// rate limit): the user's version, not an hour old, left the history, and neither Undo nor
    /// History could bring it back. The version another hand left before a run is kept.
    #[test]
    fn a_run_of_one_callers_writes_cannot_push_out_the_version_another_left() {
        let env = MemoryEnv::new();
        let by = |n: u64, who: &str| {
            let mut r = rev(U, n, &format!("v{n}"));
            r.record.updated_by = who.to_owned();
            r
        };
        keep(&env, by(1, "user"));
        for n in 2..=25 {
            keep(&env, by(n, "agent"));
        }
        let k = kept(&env, U);
        assert_eq!(k.len(), MAX_REVISIONS);
        assert_eq!(k[0], 1, "the user's version stays: {k:?}");
        assert_eq!(
            k[1..],
            (7..=25).collect::<Vec<_>>()[..],
            "the agent's oldest went"
        );
        // The user writes again, then the agent: the newer hand-over is kept, the old one may go.
        keep(&env, by(26, "user"));
        for n in 27..=50 {
            keep(&env, by(n, "agent"));
        }
        let k = kept(&env, U);
        assert!(k.contains(&26) && !k.contains(&1), "{k:?}");
        // Each line of the index records who made its version.
        let ix = &env.dump(Area::Local)[&history_key(U)];
        assert!(ix.to_string().contains(r#""by":"agent""#), "{ix}");

        // A reviewer's case: the user's Undo in the middle of the run makes a version by the
        // user whose source is the agent's (a copy of revision 2). It does not stand for the
        // user's own version, which stays.
        let u2 = "00000000-0000-4000-8000-000000000002";
        let by2 = |n: u64, who: &str, src: &str| {
            let mut r = rev(u2, n, src);
            r.record.updated_by = who.to_owned();
            r
        };
        keep(&env, by2(1, "user", "mine"));
        keep(&env, by2(2, "agent", "evil"));
        keep(&env, by2(3, "agent", "evil2"));
        keep(&env, by2(4, "user", "evil"));
        for n in 5..=30 {
            keep(&env, by2(n, "agent", &format!("a{n}")));
        }
        let k = kept(&env, u2);
        assert_eq!(k[0], 1, "the user's own version stays: {k:?}");
    }

    /// A reviewer's case: the total bound's second tier took a history's newest again and again,
    /// so once its newest went, the settled version (now the newest) went next while other
    /// scripts' newest revisions could still go. One newest per script per pass.
    #[test]
    fn the_total_bound_takes_one_newest_per_history_before_a_settled_version() {
        let env = MemoryEnv::new();
        let mut s1 = rev(U, 1, &"s".repeat(300 * 1024));
        s1.record.updated_at = 0.0;
        keep(&env, s1);
        let mut n2 = rev(U, 2, &"n".repeat(300 * 1024));
        n2.record.updated_at = 2.0 * SETTLED_MS;
        keep(&env, n2);
        let junk = |i: u32| format!("00000000-0000-4000-8000-0000000001{i:02}");
        for i in 0..14 {
            keep(&env, rev(&junk(i), 1, &"j".repeat(240 * 1024)));
        }
        assert_eq!(kept(&env, U), vec![1, 2]);
        // 500 KiB more: U's newest goes, then another history's newest, not U's settled one.
        keep(&env, rev(&junk(99), 1, &"k".repeat(500 * 1024)));
        assert_eq!(kept(&env, U), vec![1], "the settled version is kept");
        assert_eq!(
            kept(&env, &junk(99)),
            vec![1],
            "what this change adds is kept"
        );
    }

    /// A damaged index (no list, or a line that does not decode) still names its revisions: they
    /// are found under their own keys, listed again by the next write, and never swept.
    #[test]
    fn a_damaged_index_is_rebuilt_from_the_revisions_stored() {
        for damage in [
            json!("garbage"),
            json!({"v": 2, "revisions": [{"revision": 1, "bytes": 2}, {"revision": "2"}, 17]}),
        ] {
            let env = MemoryEnv::new();
            for n in 1..=3 {
                keep(&env, rev(U, n, &format!("v{n}")));
            }
            let mut items = Map::new();
            items.insert(history_key(U), damage.clone());
            // Not revisions of U's: another spelling, another script's copy.
            items.insert(
                format!("history/{U}/04"),
                serde_json::to_value(rev(U, 4, "v4")).unwrap(),
            );
            items.insert(
                revision_key(U, 5),
                serde_json::to_value(rev("00000000-0000-4000-8000-000000000002", 5, "x")).unwrap(),
            );
            block_on(env.set(Area::Local, items)).unwrap();
            let h = block_on(load(&env, U)).unwrap();
            let shown: Vec<u64> = h.revisions.iter().map(|r| r.record.revision).collect();
            assert_eq!(shown, [1, 2, 3], "{damage}");
            assert!(
                h.problems.iter().any(|p| p.contains("were found stored")),
                "{:?}",
                h.problems
            );
            let mut swept = orphans(&env.dump(Area::Local));
            swept.sort();
            assert_eq!(
                swept,
                [format!("history/{U}/04"), revision_key(U, 5)],
                "{damage}"
            );
            let mut purged = block_on(keys_of(&env, &[U.to_owned()])).unwrap();
            purged.sort();
            assert_eq!(
                purged,
                [
                    history_key(U),
                    revision_key(U, 1),
                    revision_key(U, 2),
                    revision_key(U, 3)
                ]
            );
            // The next write lists them again: the index is whole from then on.
            keep(&env, rev(U, 6, "v6"));
            assert_eq!(kept(&env, U), [1, 2, 3, 6], "{damage}");
        }
    }

    /// The total bound reads the biggest history's index to trim it: a damaged one is rebuilt
    /// and loses its oldest revision only, not rewritten empty.
    #[test]
    fn the_total_bound_does_not_empty_a_damaged_index() {
        let env = MemoryEnv::new();
        let other = "00000000-0000-4000-8000-000000000009";
        let chunk = "z".repeat(200 * 1024);
        for n in 1..=4 {
            keep(&env, rev(other, n, &chunk));
        }
        let mut items = Map::new();
        items.insert(BUDGET_KEY.into(), json!({ other: MAX_TOTAL_BYTES - 1000 }));
        items.insert(history_key(other), json!({"v": 2}));
        block_on(env.set(Area::Local, items)).unwrap();
        let pushed = keep(&env, rev(U, 1, &"a".repeat(5000)));
        assert_eq!(
            kept(&env, other),
            [2, 3, 4],
            "its oldest went, the rest stay"
        );
        assert_eq!(pushed.stale, [revision_key(other, 1)]);
        assert!(orphans(&env.dump(Area::Local)).is_empty());
    }

    #[test]
    fn orphans_are_the_revision_keys_no_index_lists() {
        let env = MemoryEnv::new();
        for n in 1..=3 {
            keep(&env, rev(U, n, &format!("v{n}")));
        }
        let gone = "00000000-0000-4000-8000-000000000003";
        let mut items = Map::new();
        // Left by an interrupted change, by a script removed for good, and odd names.
        items.insert(revision_key(U, 9), json!({}));
        items.insert(revision_key(gone, 1), json!({}));
        items.insert(format!("history/{U}/01"), json!({}));
        items.insert(format!("history/{U}/x"), json!({}));
        block_on(env.set(Area::Local, items)).unwrap();
        let mut found = orphans(&env.dump(Area::Local));
        found.sort();
        let mut want = vec![
            revision_key(U, 9),
            revision_key(gone, 1),
            format!("history/{U}/01"),
            format!("history/{U}/x"),
        ];
        want.sort();
        assert_eq!(found, want);
        let mut all = block_on(keys_of(&env, &[U.to_owned()])).unwrap();
        all.sort();
        let mut want: Vec<String> = (1..=3).map(|n| revision_key(U, n)).collect();
        want.push(history_key(U));
        want.sort();
        assert_eq!(all, want);
    }
}
