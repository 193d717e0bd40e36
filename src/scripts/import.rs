//! Importing many scripts at once (several `.user.js` files, or a backup): all of them are
//! stored in one `set`, or none. Everything is checked first — each source's metadata, the
//! scripts it would replace, the script count, and the bytes `chrome.storage.local` would hold
//! afterwards against its quota — so a refusal says why before anything is written, and a
//! worker stopped mid-import leaves either the state before or the state after.

use super::history::{self, Revision};
use super::metadata::{Diagnostic, Metadata};
use super::names;
use super::record::ScriptRecord;
use super::store::{self, check_identity, Actor, Change, Snapshot, MAX_SCRIPTS};
use crate::env::{Area, Clock, Ids, Storage};
use crate::gm::asset_store::Fetches;
use crate::gm::assets::IMPORT_FETCH_BUDGET_MS;
use crate::gm::values::{self as gm_values, Values};
use crate::guard::digest::sha256_hex;
use crate::tools::catalog::MAX_SOURCE_BYTES;
use serde_json::{json, Map, Value};
use std::fmt;

pub use super::quota::{bytes_after, HEADROOM_BYTES, QUOTA_BYTES};

/// The most characters of a label (a file's name, a backup entry's `name`) shown.
pub const MAX_LABEL_CHARS: usize = 80;

/// How a label from the file is shown, in the confirmation and in every message: at most
/// [`MAX_LABEL_CHARS`] characters, its invisible and direction characters marked (`⟨U+202E⟩`),
/// as the pages show all untrusted text. A backup's entry names are the backup's own text: a
/// right-to-left override there could make one script read as another.
pub fn label(raw: &str) -> String {
    crate::guard::diff::visible(&crate::text::ellipsize(raw, MAX_LABEL_CHARS))
}

/// One script to import: a file's or a backup entry's.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// What the user calls it in messages: the file name, or the backup entry's name.
    pub label: String,
    pub source: String,
    /// `None`: a new script is enabled, a replaced one keeps its state.
    pub enabled: Option<bool>,
    /// Its GM values (a backup exported with them): they replace the script's values whole.
    /// `None`: a new script has none, a replaced one keeps its own.
    pub values: Option<Values>,
}

/// A script already stored with the same `@namespace` + `@name` as an item.
#[derive(Debug, Clone, PartialEq)]
pub struct Duplicate {
    pub label: String,
    pub uuid: String,
    pub name: String,
    pub namespace: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ImportError {
    Empty,
    Invalid {
        label: String,
        error: store::ScriptError,
    },
    /// Two items of one import read as the same script.
    SameTwice {
        first: String,
        second: String,
    },
    /// Items that would replace stored scripts the user has not answered for.
    Duplicates(Vec<Duplicate>),
    TooMany {
        stored: usize,
        adding: usize,
    },
    /// The `@require`/`@resource` files fetched so far already take more than `limit`.
    FilesTooLarge {
        limit: usize,
    },
    /// `needed` bytes would be in use after the import, over `limit`.
    Quota {
        needed: usize,
        limit: usize,
        in_use: usize,
    },
    /// The restored values and those of the scripts left as they are would hold `bytes`, over
    /// the total `GM_setValue` keeps.
    ValuesTotal {
        bytes: usize,
    },
    Storage(String),
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImportError::Empty => write!(f, "nothing to import"),
            ImportError::Invalid { label, error } => {
                write!(f, "{label}: {error}; nothing was imported")
            }
            ImportError::SameTwice { first, second } => write!(
                f,
                "{first} and {second} have the same @namespace and @name, or ones that read the same (look-alike letters, invisible characters and odd spaces are compared as what they look like): one script is stored once, so leave one of them out; nothing was imported"
            ),
            ImportError::Duplicates(d) => write!(
                f,
                "{} would replace existing scripts ({}); answer whether to replace each",
                d.len(),
                d.iter().map(|d| d.label.as_str()).collect::<Vec<_>>().join(", ")
            ),
            ImportError::TooMany { stored, adding } => write!(
                f,
                "{stored} scripts are stored and this adds {adding}, over the {MAX_SCRIPTS} this provider keeps; nothing was imported"
            ),
            ImportError::FilesTooLarge { limit } => write!(
                f,
                "not enough storage: the @require and @resource files of these scripts take more than the {limit} bytes the extension's storage may hold; import fewer scripts; nothing was imported"
            ),
            ImportError::Quota { needed, limit, in_use } => write!(
                f,
                "not enough storage: after this import the extension's storage would hold {needed} bytes, over the {limit} it may use ({in_use} in use now); import fewer scripts or empty the trash; nothing was imported"
            ),
            ImportError::ValuesTotal { bytes } => write!(
                f,
                "with these values, the values of all scripts would take {bytes} bytes, over the {} they may hold together; nothing was imported",
                gm_values::MAX_TOTAL_BYTES
            ),
            ImportError::Storage(e) => write!(f, "storage failed: {e}; nothing was imported"),
        }
    }
}

/// The user's answers for the duplicates: replace these uuids, keep (skip the item for) those.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answers {
    pub replace: Vec<String>,
    pub keep: Vec<String>,
}

/// What an import did.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    pub changes: Vec<Change>,
    /// The label of each change's item, in the same order.
    pub labels: Vec<String>,
    /// How many values each change restored (`None`: its values were left as they are).
    pub values: Vec<Option<usize>>,
    /// Labels of the items skipped because the user kept the existing script.
    pub kept: Vec<String>,
}

enum Step {
    Create,
    Replace(String),
    Keep,
}

/// An item checked: its metadata, its lint, and what the import does with it.
type Checked = (Item, Metadata, Vec<Diagnostic>, Step);

/// An import checked and its files fetched: everything it writes, not yet written.
pub struct Ready {
    built: Built,
}

/// Checks `items` and fetches their `@require`/`@resource` files (one budget for the whole
/// import, each URL once): everything [`commit`] writes. Writes nothing; reads no GM values, so
/// it runs without the GM values lock (a script's `GM_setValue` is not held up by the import's
/// fetches).
pub async fn prepare<E: Storage + Clock + Ids + crate::env::Http>(
    env: &E,
    snap: &Snapshot,
    actor: Actor<'_>,
    items: Vec<Item>,
    answers: &Answers,
) -> Result<Ready, ImportError> {
    let checked = check(snap, items, answers)?;
    Ok(Ready {
        built: build(env, snap, actor, checked).await?,
    })
}

/// Stores a prepared import in one `set`, or refuses with nothing written. The caller holds the
/// GM values lock (when the import restores values): the budget of every script's values is
/// read here and written in the same `set`, so no value change may land between.
pub async fn commit<E: Storage>(env: &E, ready: Ready) -> Result<Imported, ImportError> {
    let Built {
        mut set,
        stale,
        imported,
        restored,
    } = ready.built;
    if imported.changes.is_empty() {
        return Ok(imported);
    }
    // The quota, bounded before the write: Chrome would refuse the whole `set` anyway, but
    // with a message that tells the user nothing.
    let all = env
        .get_all(Area::Local)
        .await
        .map_err(|e| ImportError::Storage(e.to_string()))?;
    put_values(&mut set, &all, restored)?;
    let (in_use, needed) = bytes_after(&all, &set);
    let limit = QUOTA_BYTES.saturating_sub(HEADROOM_BYTES);
    if needed > limit {
        return Err(ImportError::Quota {
            needed,
            limit,
            in_use,
        });
    }
    env.set(Area::Local, set)
        .await
        .map_err(|e| ImportError::Storage(e.to_string()))?;
    history::remove_stale(env, &stale).await;
    Ok(imported)
}

/// Puts restored values (uuid → values) in the import's `set` with the budget they make, after
/// the total bound `GM_setValue` keeps: the values of the scripts left as they are count, the
/// values being replaced do not.
fn put_values(
    set: &mut Map<String, Value>,
    all: &Map<String, Value>,
    restored: Vec<(String, Values)>,
) -> Result<(), ImportError> {
    if restored.is_empty() {
        return Ok(());
    }
    let mut budget = gm_values::decode_budget(all.get(gm_values::BUDGET_KEY));
    for (uuid, v) in &restored {
        budget.insert(uuid.clone(), v.bytes());
    }
    let bytes = budget.values().fold(0usize, |n, b| n.saturating_add(*b));
    if bytes > gm_values::MAX_TOTAL_BYTES {
        return Err(ImportError::ValuesTotal { bytes });
    }
    for (uuid, v) in restored {
        set.insert(gm_values::storage_key(&uuid), v.encode());
    }
    set.insert(gm_values::BUDGET_KEY.to_owned(), json!(budget));
    Ok(())
}

/// One item read: its metadata and lint, and the stored script it would replace (the same
/// `@namespace` + `@name`), if any. `seen`: the identities of the items before it.
fn read_item(
    snap: &Snapshot,
    item: Item,
    seen: &mut Vec<((String, String), String)>,
) -> Result<(Item, Metadata, Vec<Diagnostic>, Option<Duplicate>), ImportError> {
    let (meta, diagnostics) = match store::validate(&item.source, MAX_SOURCE_BYTES) {
        Ok(x) => x,
        Err(error) => {
            return Err(ImportError::Invalid {
                label: item.label,
                error,
            })
        }
    };
    let identity = names::identity(meta.namespace.as_deref(), &meta.name);
    if let Some((_, first)) = seen.iter().find(|(i, _)| *i == identity) {
        return Err(ImportError::SameTwice {
            first: first.clone(),
            second: item.label,
        });
    }
    seen.push((identity, item.label.clone()));
    let duplicate = match check_identity(snap, &meta, None) {
        Ok(()) => None,
        Err(store::ScriptError::DuplicateIdentity {
            uuid,
            name,
            namespace,
        }) => Some(Duplicate {
            label: item.label.clone(),
            uuid,
            name,
            namespace,
        }),
        Err(error) => {
            return Err(ImportError::Invalid {
                label: item.label,
                error,
            })
        }
    };
    Ok((item, meta, diagnostics, duplicate))
}

/// `adding` new scripts fit beside the stored ones.
fn check_count(snap: &Snapshot, adding: usize) -> Result<(), ImportError> {
    if snap.index.len().saturating_add(adding) > MAX_SCRIPTS {
        return Err(ImportError::TooMany {
            stored: snap.index.len(),
            adding,
        });
    }
    Ok(())
}

/// Every item checked before anything is read or written: metadata, the same script twice,
/// duplicates of stored scripts (answered or not), the script count.
fn check(
    snap: &Snapshot,
    items: Vec<Item>,
    answers: &Answers,
) -> Result<Vec<Checked>, ImportError> {
    if items.is_empty() {
        return Err(ImportError::Empty);
    }
    let mut checked = Vec::with_capacity(items.len());
    let mut seen = Vec::new();
    let mut unanswered = Vec::new();
    for item in items {
        let (item, meta, diagnostics, duplicate) = read_item(snap, item, &mut seen)?;
        let step = match duplicate {
            None => Step::Create,
            Some(d) if answers.replace.contains(&d.uuid) => Step::Replace(d.uuid),
            Some(d) if answers.keep.contains(&d.uuid) => Step::Keep,
            Some(d) => {
                unanswered.push(d);
                Step::Keep
            }
        };
        checked.push((item, meta, diagnostics, step));
    }
    if !unanswered.is_empty() {
        return Err(ImportError::Duplicates(unanswered));
    }
    check_count(
        snap,
        checked
            .iter()
            .filter(|c| matches!(c.3, Step::Create))
            .count(),
    )?;
    Ok(checked)
}

/// One item as the user confirms it, before anything is fetched or written.
#[derive(Debug, Clone)]
pub struct Planned {
    pub label: String,
    pub metadata: Metadata,
    /// Whether it runs once stored (a replaced script keeps its state unless the item says).
    pub enabled: bool,
    /// The stored script it would replace, if the user says so (else it is kept, and the item
    /// skipped).
    pub replaces: Option<Duplicate>,
    /// Whether that stored script is switched on now: a restore may switch on one the user
    /// turned off, and must say so.
    pub replaces_enabled: Option<bool>,
    /// How many values it restores (`None`: its values are left as they are).
    pub values: Option<usize>,
    /// The files the import would fetch for it (those a replaced script holds are reused).
    pub fetch: Vec<crate::gm::assets::Wanted>,
    /// What its metadata warns of (a line read otherwise than another manager reads it, a
    /// request grant without `@connect`…), as the editor and `validate_script` say it.
    pub warnings: Vec<Diagnostic>,
}

/// What an import of `items` would do, checked as the import checks them (metadata, the same
/// script twice, the script count, the `@require`/`@resource` URLs), without fetching or
/// writing anything: what the user is asked to confirm.
pub fn preview(snap: &Snapshot, items: Vec<Item>) -> Result<Vec<Planned>, ImportError> {
    if items.is_empty() {
        return Err(ImportError::Empty);
    }
    let mut out = Vec::with_capacity(items.len());
    let mut seen = Vec::new();
    for item in items {
        let (item, meta, diagnostics, duplicate) = read_item(snap, item, &mut seen)?;
        let current = duplicate
            .as_ref()
            .and_then(|d| snap.records.iter().find(|r| r.uuid == d.uuid));
        let wanted =
            crate::gm::assets::wanted(crate::web::platform(), &meta.requires, &meta.resources)
                .map_err(|e| ImportError::Invalid {
                    label: item.label.clone(),
                    error: store::ScriptError::Asset(e),
                })?;
        let fetch = crate::gm::assets::plan(wanted, current.map_or(&[], |r| &r.assets))
            .into_iter()
            .filter_map(|s| match s {
                crate::gm::assets::Step::Fetch(w) => Some(w),
                // Reused where its stored bytes have the URL's hashes (the confirmed import
                // checks; the preview fetches nothing either way).
                crate::gm::assets::Step::Reuse(_) | crate::gm::assets::Step::Check(..) => None,
            })
            .collect();
        out.push(Planned {
            label: item.label,
            enabled: item
                .enabled
                .unwrap_or_else(|| current.is_none_or(|r| r.enabled)),
            values: item.values.as_ref().map(|v| v.keys().count()),
            metadata: meta,
            replaces: duplicate,
            replaces_enabled: current.map(|r| r.enabled),
            fetch,
            warnings: diagnostics,
        });
    }
    check_count(snap, out.iter().filter(|p| p.replaces.is_none()).count())?;
    Ok(out)
}

/// What an import writes, not yet written.
struct Built {
    /// The records, sources, index and history: one `set`.
    set: Map<String, Value>,
    /// The revisions the history's bounds dropped, removed after that `set` (for all the
    /// changes: theirs are left empty).
    stale: Vec<String>,
    imported: Imported,
    /// The values to restore, by uuid.
    restored: Vec<(String, Values)>,
}

/// The records and sources of `changes`, in the import's `set`.
fn put_changes(set: &mut Map<String, Value>, changes: &[Change]) -> Result<(), ImportError> {
    for c in changes {
        let record =
            serde_json::to_value(&c.record).map_err(|e| ImportError::Storage(e.to_string()))?;
        set.insert(store::record_key(&c.record.uuid), record);
        set.insert(store::source_key(&c.record.uuid), c.source.clone().into());
    }
    Ok(())
}

/// The `@require`/`@resource` files of an import: fetched within one budget for all its items,
/// each URL once, and counted as they come: files over what storage may hold stop the import at
/// once, not after every item's fetches (a backup of 2,000 scripts naming 16 files each would
/// otherwise hold gigabytes in memory).
struct Files {
    fetches: Fetches,
    /// The bytes to store (`asset/<sha256>` → base64).
    blobs: Map<String, Value>,
    bytes: usize,
}

impl Files {
    /// One item's files: fetched now (a URL an earlier item fetched, not again), or (a replaced
    /// script) reused by URL; its record's list.
    async fn add<E: Storage + Clock + crate::env::Http>(
        &mut self,
        env: &E,
        meta: &Metadata,
        current: &[crate::gm::assets::Asset],
        label: &str,
    ) -> Result<Vec<crate::gm::assets::Asset>, ImportError> {
        let prepared = crate::gm::asset_store::prepare_in(env, meta, current, &mut self.fetches)
            .await
            .map_err(|e| ImportError::Invalid {
                label: label.to_owned(),
                error: store::ScriptError::Asset(e),
            })?;
        for (k, v) in prepared.items {
            if !self.blobs.contains_key(&k) {
                self.bytes = self.bytes.saturating_add(super::quota::item_bytes(&k, &v));
            }
            self.blobs.insert(k, v);
        }
        let limit = QUOTA_BYTES.saturating_sub(HEADROOM_BYTES);
        if self.bytes > limit {
            return Err(ImportError::FilesTooLarge { limit });
        }
        Ok(prepared.assets)
    }
}

/// Everything the import writes, from the checked items; writes nothing.
/// Where [`replace`] puts what it adds to the import.
struct Adds<'a, 'b> {
    now: f64,
    actor: Actor<'b>,
    files: &'a mut Files,
    /// Each replaced version, with the bytes of its files its replacement does not keep.
    prevs: &'a mut Vec<(Revision, usize)>,
}

/// The record of `item` over the stored script `uuid`, and whether it is that script as it
/// was: the same text in the same state (a backup restored over what it was taken from) makes
/// no revision, or each restore would push real history out with copies; its values are still
/// restored. Otherwise the next revision, the current one pushed to the history.
async fn replace<E: Storage + Clock + Ids + crate::env::Http>(
    env: &E,
    uuid: &str,
    item: &Item,
    meta: Metadata,
    into: Adds<'_, '_>,
) -> Result<(ScriptRecord, bool), ImportError> {
    let (current, old) = store::load_with_source(env, uuid)
        .await
        .map_err(|e| ImportError::Storage(e.to_string()))?;
    let enabled = item.enabled.unwrap_or(current.enabled);
    let sha256 = sha256_hex(item.source.as_bytes());
    if current.sha256 == sha256 && enabled == current.enabled {
        return Ok((current, true));
    }
    let assets = into
        .files
        .add(env, &meta, &current.assets, &item.label)
        .await?;
    let record = ScriptRecord {
        metadata: meta,
        enabled,
        revision: current.revision.saturating_add(1),
        updated_at: into.now,
        updated_by: into.actor.by.to_owned(),
        updated_via: into.actor.via.map(str::to_owned),
        sha256,
        size: item.source.len(),
        assets,
        ..current.clone()
    };
    let pinned = crate::scripts::history::pinned_bytes(&current, &record.assets);
    into.prevs.push((
        Revision {
            record: current,
            source: old,
        },
        pinned,
    ));
    Ok((record, false))
}

async fn build<E: Storage + Clock + Ids + crate::env::Http>(
    env: &E,
    snap: &Snapshot,
    actor: Actor<'_>,
    checked: Vec<Checked>,
) -> Result<Built, ImportError> {
    let now = env.now_ms();
    let mut index = snap.index.clone();
    let mut prevs = Vec::new();
    let mut changes = Vec::new();
    let mut kept = Vec::new();
    let mut labels = Vec::new();
    let mut counts = Vec::new();
    let mut restored = Vec::new();
    let mut files = Files {
        fetches: Fetches::new(now, IMPORT_FETCH_BUDGET_MS, "import"),
        blobs: Map::new(),
        bytes: 0,
    };
    for (item, meta, diagnostics, step) in checked {
        // The record, and whether it is the stored one as it was (its stored source kept).
        let (record, unchanged) = match step {
            Step::Keep => {
                kept.push(item.label);
                continue;
            }
            Step::Create => {
                let assets = files.add(env, &meta, &[], &item.label).await?;
                let uuid = env.new_uuid();
                index.push(uuid.clone());
                let record = ScriptRecord {
                    uuid,
                    metadata: meta,
                    enabled: item.enabled.unwrap_or(true),
                    revision: 1,
                    created_at: now,
                    updated_at: now,
                    created_by: actor.by.to_owned(),
                    updated_by: actor.by.to_owned(),
                    updated_via: actor.via.map(str::to_owned),
                    sha256: sha256_hex(item.source.as_bytes()),
                    size: item.source.len(),
                    assets,
                };
                (record, false)
            }
            Step::Replace(uuid) => {
                let into = Adds {
                    now,
                    actor,
                    files: &mut files,
                    prevs: &mut prevs,
                };
                replace(env, &uuid, &item, meta, into).await?
            }
        };
        labels.push(item.label);
        counts.push(item.values.as_ref().map(|v| v.keys().count()));
        if let Some(v) = item.values {
            restored.push((record.uuid.clone(), v));
        }
        changes.push(Change {
            created: record.revision == 1 && !unchanged,
            unchanged,
            from_trash: false,
            record,
            // The same bytes as stored when unchanged.
            source: item.source,
            diagnostics,
            stale_history: Vec::new(),
        });
    }
    let history::Pushed {
        items: mut set,
        stale,
    } = history::items_for_many(env, prevs)
        .await
        .map_err(|e| ImportError::Storage(e.to_string()))?;
    put_changes(&mut set, &changes)?;
    if index.len() != snap.index.len() {
        set.insert(store::INDEX_KEY.to_owned(), json!({ "uuids": index }));
    }
    set.extend(files.blobs);
    Ok(Built {
        set,
        stale,
        imported: Imported {
            changes,
            labels,
            values: counts,
            kept,
        },
        restored,
    })
}
