//! Scripts in `chrome.storage.local`: one key per record (`script/<uuid>`), one per source
//! (`source/<uuid>`), and a small index of uuids (`scripts/index`). Changing a script writes its
//! two keys in one atomic `set`, so the cost does not grow with the number of scripts, and a
//! failure (quota, bad input) leaves the previous version whole. Creation and deletion also
//! rewrite the index. Every operation here assumes the caller holds the provider's write lock.

use super::history::{self, Revision};
use super::metadata::{self, Diagnostic, Metadata, Severity};
use super::names;
use super::quota;
use super::record::{ScriptRecord, BY_PROVIDER, BY_USER};
use crate::env::{Area, Clock, Http, Ids, Storage};
use crate::gm::asset_store::{self, Prepared};
use crate::gm::assets::AssetError;
use crate::guard::digest::sha256_hex;
use serde_json::{json, Map, Value};
use std::fmt;

pub const INDEX_KEY: &str = "scripts/index";
pub const MAX_SCRIPTS: usize = 2000;

/// Who makes a change (a caller's extension id, or [`super::record::BY_USER`]) and through
/// which tool or page; recorded on the new version and so in its history.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Actor<'a> {
    pub by: &'a str,
    pub via: Option<&'a str>,
}

impl<'a> From<&'a str> for Actor<'a> {
    fn from(by: &'a str) -> Self {
        Actor { by, via: None }
    }
}

impl Actor<'_> {
    pub(super) fn via(&self) -> Option<String> {
        self.via.map(str::to_owned)
    }
}

pub fn record_key(uuid: &str) -> String {
    format!("script/{uuid}")
}

pub fn source_key(uuid: &str) -> String {
    format!("source/{uuid}")
}

#[derive(Debug, Clone, PartialEq)]
pub enum ScriptError {
    NotFound(String),
    /// The script exists but this revision is not kept (dropped by the history bounds, or never
    /// existed).
    RevisionNotFound {
        uuid: String,
        revision: u64,
        current: u64,
    },
    StaleRevision {
        expected: u64,
        current: u64,
    },
    /// A change meant for the live script found it in the trash (deleted since it was read).
    Trashed(String),
    /// Another script (this one) already has a name that reads the same.
    DuplicateIdentity {
        namespace: Option<String>,
        name: String,
        uuid: String,
    },
    InvalidMetadata(Vec<Diagnostic>),
    TooLarge {
        size: usize,
        max: usize,
    },
    TooMany,
    /// The trash is full (`max` scripts): this delete would remove the oldest trashed script
    /// for good, which only the user's own delete may do.
    TrashFull {
        max: usize,
    },
    PatchFailed(String),
    /// Edit `edit` (1-based) would make the source `size` bytes (`None`: more than a `usize`
    /// holds) by replacing `occurrences` matches; refused before it was built.
    PatchTooLarge {
        edit: usize,
        occurrences: usize,
        size: Option<usize>,
        max: usize,
    },
    Storage(String),
    /// The source would take `stored` bytes as Chrome stores it, past
    /// [`quota::MAX_STORED_SOURCE_BYTES`].
    StoredTooLarge {
        stored: usize,
    },
    /// An agent's write would take storage past [`quota::AGENT_LIMIT_BYTES`] (`limit`): `needed`
    /// bytes in use after it.
    StorageKept {
        needed: usize,
        limit: usize,
    },
    /// A `@require`/`@resource` file could not be fetched, checked or stored.
    Asset(AssetError),
}

impl From<AssetError> for ScriptError {
    fn from(e: AssetError) -> Self {
        ScriptError::Asset(e)
    }
}

impl fmt::Display for ScriptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScriptError::NotFound(u) => write!(f, "no script with uuid {u}"),
            ScriptError::RevisionNotFound { uuid, revision, current } if revision > current => write!(
                f,
                "script {uuid} has no revision {revision}: it is at revision {current}, its newest"
            ),
            ScriptError::RevisionNotFound { uuid, revision, current } => write!(
                f,
                "script {uuid} has no stored revision {revision} (it is at revision {current}; older revisions are dropped past the history bounds): list_revisions shows the ones kept"
            ),
            ScriptError::StaleRevision { expected, current } if expected > current => write!(
                f,
                "revision {expected} is not one this script has had: it is at revision {current}; read it again with get_script and pass the revision it gives"
            ),
            ScriptError::StaleRevision { expected, current } => write!(
                f,
                "the script changed since revision {expected}, the one this write was based on (the revision you passed, or, if you passed none, the one the user reviewed); it is now at revision {current}; read it again with get_script and redo your change"
            ),
            ScriptError::Trashed(u) => write!(
                f,
                "script {u} was deleted since (it is in the trash); nothing was changed"
            ),
            ScriptError::DuplicateIdentity { namespace, name, uuid } => write!(
                f,
                "a script with @namespace {} and @name {name:?} (uuid {uuid}) already exists, and this one's would read the same to the user (names are compared ignoring invisible characters, odd spaces and look-alike letters); update that one (pass its uuid and revision) or choose a clearly different @name/@namespace",
                namespace.as_deref().map_or("(none)".to_owned(), |n| format!("{n:?}"))
            ),
            ScriptError::InvalidMetadata(d) => {
                let errors: Vec<String> = d
                    .iter()
                    .filter(|d| d.severity == Severity::Error)
                    .map(|d| format!("line {}: {}", d.line, d.message))
                    .collect();
                write!(f, "invalid metadata block: {}", errors.join("; "))
            }
            ScriptError::TooLarge { size, max } => write!(f, "the source is {size} bytes, over the {max}-byte limit"),
            ScriptError::StoredTooLarge { stored } => write!(f, "the source would take {stored} bytes as Chrome stores it, over the {}-byte limit: Chrome's storage writes each `<` and each control character as a six-byte escape, and each newline, tab, quote or backslash as two; nothing changed", quota::MAX_STORED_SOURCE_BYTES),
            ScriptError::TooMany => write!(f, "{MAX_SCRIPTS} scripts are stored, the most this provider keeps; delete some first"),
            ScriptError::TrashFull { max } => write!(f, "not deleted: the trash already holds {max} scripts, and another would remove the oldest for good, which only the user does; ask the user to restore or empty some in the trash on the options page"),
            ScriptError::PatchFailed(why) => write!(f, "patch not applied, nothing changed: {why}"),
            ScriptError::PatchTooLarge { edit, occurrences, size, max } => write!(
                f,
                "patch not applied, nothing changed: edit {edit} replaces {occurrences} occurrence(s) and would make the source {} bytes, over the {max}-byte limit",
                size.map_or_else(|| format!("more than {}", usize::MAX), |s| s.to_string())
            ),
            ScriptError::Storage(e) if is_quota(e) => write!(
                f,
                "the extension's storage is full (chrome.storage.local holds at most {} MiB), nothing changed: empty the trash or delete scripts no longer needed (options page) ({e})",
                quota::QUOTA_BYTES >> 20
            ),
            ScriptError::Storage(e) => write!(f, "storage failed, nothing changed: {e}"),
            ScriptError::StorageKept { needed, limit } => write!(
                f,
                "the extension's storage is nearly full: this write would bring it to {needed} bytes, past the {limit} an agent's write may fill of its {} MiB (the rest is kept for the user's own changes — turning scripts off, deleting them, Undo — and the audit log); nothing changed. Ask the user to empty the trash or delete scripts no longer needed (options page), or write less",
                quota::QUOTA_BYTES >> 20
            ),
            ScriptError::Asset(e) => write!(f, "{e}"),
        }
    }
}

/// Whether a storage error is Chrome's quota refusal (`QUOTA_BYTES quota exceeded`, or
/// `Resource::kQuotaBytes quota exceeded` in Chromium 156).
fn is_quota(e: &str) -> bool {
    e.contains("QUOTA_BYTES") || e.contains("kQuotaBytes")
}

/// Refuses an agent's `set` of `items` that would take `chrome.storage.local` past
/// [`quota::AGENT_LIMIT_BYTES`] and is not one that frees bytes; the user's and the provider's
/// own writes (`by`) are not bounded so: the reserve is theirs. Chrome counts the bytes — the
/// area's, and of the keys `items` replaces —, both asked at once.
pub(crate) async fn check_agent_room<S: Storage>(
    s: &S,
    by: &str,
    items: &Map<String, Value>,
) -> Result<(), ScriptError> {
    if by == BY_USER || by == BY_PROVIDER {
        return Ok(());
    }
    let keys: Vec<&str> = items.keys().map(String::as_str).collect();
    let (all, replaced) = futures::join!(
        s.bytes_in_use(Area::Local, None),
        s.bytes_in_use(Area::Local, Some(&keys))
    );
    let added = items
        .iter()
        .map(|(k, v)| quota::item_bytes(k, v))
        .fold(0, usize::saturating_add);
    let (all, replaced) = (all.map_err(storage_err)?, replaced.map_err(storage_err)?);
    quota::within_agent_limit(all, replaced, added).map_err(|needed| ScriptError::StorageKept {
        needed,
        limit: quota::AGENT_LIMIT_BYTES,
    })
}

/// Parses and lints a source exactly as a write would: at most `max_bytes` of text, and
/// [`quota::MAX_STORED_SOURCE_BYTES`] as Chrome stores it.
pub fn validate(
    source: &str,
    max_bytes: usize,
) -> Result<(Metadata, Vec<Diagnostic>), ScriptError> {
    if source.len() > max_bytes {
        return Err(ScriptError::TooLarge {
            size: source.len(),
            max: max_bytes,
        });
    }
    // `usize::MAX`: the diagnostics of a source already stored, which no bound refuses.
    let stored = quota::string_json_len(source);
    if max_bytes != usize::MAX && stored > quota::MAX_STORED_SOURCE_BYTES {
        return Err(ScriptError::StoredTooLarge { stored });
    }
    let parsed = metadata::parse(source);
    let diagnostics = parsed.diagnostics;
    match parsed.metadata {
        // `@match` with `@include` means the union, in Chrome as in other managers: no warning.
        Some(m) => Ok((m, diagnostics)),
        None => Err(ScriptError::InvalidMetadata(diagnostics)),
    }
}

pub(super) fn storage_err(e: impl fmt::Display) -> ScriptError {
    ScriptError::Storage(e.to_string())
}

pub async fn load_index<S: Storage>(s: &S) -> Result<Vec<String>, ScriptError> {
    let got = s
        .get(Area::Local, &[INDEX_KEY])
        .await
        .map_err(storage_err)?;
    Ok(decode_index(got.get(INDEX_KEY)))
}

/// Whether a stored index is whole: `{uuids: [uuid, …]}`, each uuid once, nothing else in the
/// list. A repeated uuid would list (and register) one script twice.
pub(crate) fn index_is_whole(v: &Value) -> bool {
    let mut seen = crate::vec_map::VecSet::new();
    v.get("uuids").and_then(Value::as_array).is_some_and(|a| {
        a.iter().all(|u| {
            u.as_str()
                .is_some_and(|u| super::record::is_uuid(u) && seen.insert(u))
        })
    })
}

/// A damaged index must not make scripts disappear (nor be written back without them): the
/// uuids are recovered from the records themselves, oldest first.
async fn rebuild_index<S: Storage>(s: &S, damaged: &Value) -> Result<Vec<String>, ScriptError> {
    // What the damaged index still names, in its order…
    // (each once, at its first place: `Vec::dedup` would drop only adjacent repeats).
    let mut seen = crate::vec_map::VecSet::new();
    let mut index: Vec<String> = damaged
        .get("uuids")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .filter(|u| super::record::is_uuid(u) && seen.insert(*u))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    // …then every stored record it lost, oldest first — but not one the trash lists: that is
    // what a delete stopped before its remove left behind, and adopting it would run a
    // deleted script again.
    let all = s.get_all(Area::Local).await.map_err(storage_err)?;
    let mut found: Vec<(f64, String)> = all
        .iter()
        .filter_map(|(k, v)| {
            let uuid = k.strip_prefix("script/")?;
            (super::record::is_uuid(uuid)
                && !index.iter().any(|u| u == uuid)
                && !listed_in_trash(&all, uuid))
            .then(|| {
                (
                    v.get("createdAt").and_then(Value::as_f64).unwrap_or(0.0),
                    uuid.to_owned(),
                )
            })
        })
        .collect();
    crate::sort::sort_by(&mut found, |a, b| {
        a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1))
    });
    index.extend(found.into_iter().map(|(_, u)| u));
    Ok(index)
}

/// A missing or damaged index reads as the ids it still names; never a panic.
fn decode_index(v: Option<&Value>) -> Vec<String> {
    v.and_then(|v| v.get("uuids"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn index_value(uuids: &[String]) -> Value {
    json!({ "uuids": uuids })
}

/// A record that does not decode is reported, not fatal: the others stay usable.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub uuid: String,
    pub message: String,
}

/// The index and every readable record (no sources): what listing, matching and the identity
/// check need. The provider caches it; [`Snapshot::apply`] keeps a cached copy exact after a
/// write.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Every uuid the index names, readable or not (a write must not drop an unreadable one).
    pub index: Vec<String>,
    pub records: Vec<ScriptRecord>,
    pub problems: Vec<Problem>,
    /// Each record's [`names::identity`], in `records`' order: worked out at the first identity
    /// check (a confusable skeleton per record, ~1.5 µs each natively) and kept by `apply` and
    /// `remove`, so a write or an import item does not work out all of them again. `records` is
    /// changed only through those two, which keep this in step.
    identities: std::cell::OnceCell<Vec<Identity>>,
    /// `records`' positions, the most recently updated first (ties in `records`' order): worked
    /// out at the first listing and dropped by `apply` and `remove`, so a `list_scripts` page
    /// does not sort every record again on each call (issue 17: a page at 1,000 stored).
    by_recency: std::cell::OnceCell<Vec<usize>>,
}

type Identity = (String, String);

/// Equal when they hold the same scripts (the identities are worked out of the records).
impl PartialEq for Snapshot {
    fn eq(&self, other: &Self) -> bool {
        self.index == other.index
            && self.records == other.records
            && self.problems == other.problems
    }
}

fn identity_of(r: &ScriptRecord) -> Identity {
    names::identity(r.metadata.namespace.as_deref(), &r.metadata.name)
}

/// `by_recency`'s order: the later `updatedAt` first, then by uuid.
pub fn recency_cmp(a: &ScriptRecord, b: &ScriptRecord) -> std::cmp::Ordering {
    b.updated_at
        .total_cmp(&a.updated_at)
        .then_with(|| a.uuid.cmp(&b.uuid))
}

/// Whether `r` comes after the record that was at (`updated_at`, `uuid`) in `by_recency`'s
/// order, whether or not that record is still there.
pub fn recency_after(r: &ScriptRecord, updated_at: f64, uuid: &str) -> bool {
    match updated_at.total_cmp(&r.updated_at) {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Less => false,
        std::cmp::Ordering::Equal => r.uuid.as_str() > uuid,
    }
}

impl Snapshot {
    /// After a successful create or update.
    pub fn apply(&mut self, change: &Change) {
        self.by_recency.take();
        let r = &change.record;
        if !self.index.contains(&r.uuid) {
            self.index.push(r.uuid.clone());
        }
        let known = self.identities.get_mut();
        match self.records.iter().position(|x| x.uuid == r.uuid) {
            Some(i) => {
                if let Some(slot) = known.and_then(|ids| ids.get_mut(i)) {
                    *slot = identity_of(r);
                }
                if let Some(slot) = self.records.get_mut(i) {
                    *slot = r.clone();
                }
            }
            None => {
                if let Some(ids) = known {
                    ids.push(identity_of(r));
                }
                self.records.push(r.clone());
            }
        }
        self.problems.retain(|p| p.uuid != r.uuid);
    }

    /// After a successful delete.
    pub fn remove(&mut self, uuid: &str) {
        self.by_recency.take();
        self.index.retain(|u| u != uuid);
        if let Some(i) = self.records.iter().position(|r| r.uuid == uuid) {
            self.records.remove(i);
            if let Some(ids) = self.identities.get_mut() {
                if i < ids.len() {
                    ids.remove(i);
                }
            }
        }
        self.problems.retain(|p| p.uuid != uuid);
    }

    /// Every record, the most recently updated first (`updatedAt`; ties by uuid): a total order
    /// of what each record holds, so `list_scripts`' cursor (the last record it gave) places
    /// the next page whatever was written or deleted meanwhile (`recency_after`).
    pub fn by_recency(&self) -> impl Iterator<Item = &ScriptRecord> {
        let order = self.by_recency.get_or_init(|| {
            crate::sort::positions(self.records.len(), |a, b| {
                match (self.records.get(a), self.records.get(b)) {
                    (Some(x), Some(y)) => recency_cmp(x, y),
                    _ => std::cmp::Ordering::Equal,
                }
            })
        });
        order.iter().filter_map(|&i| self.records.get(i))
    }

    /// Every record with its identity.
    fn with_identities(&self) -> impl Iterator<Item = (&ScriptRecord, &Identity)> {
        let ids = self
            .identities
            .get_or_init(|| self.records.iter().map(identity_of).collect());
        self.records.iter().zip(ids)
    }

    /// Whether storage holding `value` under `key` agrees with this snapshot (`Null`: removed).
    pub fn holds(&self, key: &str, value: &Value) -> bool {
        if key == INDEX_KEY {
            return decode_index(Some(value)) == self.index;
        }
        let Some(uuid) = key.strip_prefix("script/") else {
            return true;
        };
        match self.records.iter().find(|r| r.uuid == uuid) {
            // Decoded as `load_records` decodes it, not compared as JSON: storage gives back
            // `createdAt: 1.7e12` (an f64 here) as an integer, and that must not look like news.
            Some(r) => {
                <ScriptRecord as serde::Deserialize>::deserialize(value).is_ok_and(|d| &d == r)
            }
            None => value.is_null() && !self.index.iter().any(|u| u == uuid),
        }
    }
}

/// Keys whose change can make a cached [`Snapshot`] wrong.
pub fn is_snapshot_key(key: &str) -> bool {
    key == INDEX_KEY || key.starts_with("script/")
}

pub async fn load_snapshot<S: Storage>(s: &S) -> Result<Snapshot, ScriptError> {
    let got = s
        .get(Area::Local, &[INDEX_KEY])
        .await
        .map_err(storage_err)?;
    let (index, repaired) = match got.get(INDEX_KEY) {
        Some(v) if index_is_whole(v) => (decode_index(Some(v)), None),
        Some(v) => (rebuild_index(s, v).await?, Some("damaged")),
        // No index: a store where no script was ever written — or one that lost the key while
        // records stayed. Read as empty, those scripts would leave every listing and Chrome,
        // the next write would store an index without them, and the purge after it would sweep
        // them as ownerless. The keys alone tell the two apart, so a store with no record (a
        // new profile, at every worker start) copies no value in.
        None => {
            let keys = s.keys(Area::Local).await.map_err(storage_err)?;
            if keys.iter().any(|k| k.starts_with("script/")) {
                let index = rebuild_index(s, &Value::Null).await?;
                let missing = (!index.is_empty()).then_some("missing");
                (index, missing)
            } else {
                (Vec::new(), None)
            }
        }
    };
    let (records, mut problems) = load_records(s, &index).await?;
    if let Some(how) = repaired {
        problems.insert(0, Problem {
            uuid: INDEX_KEY.to_owned(),
            message: format!("the script index was {how}; rebuilt it from the {} stored records (saved with the next change)", index.len()),
        });
    }
    Ok(Snapshot {
        index,
        records,
        problems,
        identities: std::cell::OnceCell::new(),
        by_recency: std::cell::OnceCell::new(),
    })
}

/// Every record in index order, plus the ones that could not be read.
pub async fn load_all<S: Storage>(s: &S) -> Result<(Vec<ScriptRecord>, Vec<Problem>), ScriptError> {
    let snap = load_snapshot(s).await?;
    Ok((snap.records, snap.problems))
}

async fn load_records<S: Storage>(
    s: &S,
    index: &[String],
) -> Result<(Vec<ScriptRecord>, Vec<Problem>), ScriptError> {
    let keys: Vec<String> = index.iter().map(|u| record_key(u)).collect();
    let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let got = if key_refs.is_empty() {
        Map::new()
    } else {
        s.get(Area::Local, &key_refs).await.map_err(storage_err)?
    };
    let mut records = Vec::with_capacity(index.len());
    let mut problems = Vec::new();
    for (uuid, key) in index.iter().zip(&keys) {
        match got
            .get(key)
            .map(<ScriptRecord as serde::Deserialize>::deserialize)
        {
            Some(Ok(r)) if &r.uuid == uuid => records.push(r),
            Some(Ok(_)) => problems.push(Problem {
                uuid: uuid.clone(),
                message: "record names another uuid".into(),
            }),
            Some(Err(e)) => problems.push(Problem {
                uuid: uuid.clone(),
                message: format!("record is damaged: {e}"),
            }),
            None => problems.push(Problem {
                uuid: uuid.clone(),
                message: "record is missing".into(),
            }),
        }
    }
    Ok((records, problems))
}

pub async fn load<S: Storage>(s: &S, uuid: &str) -> Result<ScriptRecord, ScriptError> {
    let key = record_key(uuid);
    let got = s.get(Area::Local, &[&key]).await.map_err(storage_err)?;
    match got
        .get(&key)
        .map(<ScriptRecord as serde::Deserialize>::deserialize)
    {
        Some(Ok(r)) if r.uuid == uuid => Ok(r),
        Some(_) => Err(ScriptError::Storage(format!(
            "the stored record of {uuid} is damaged"
        ))),
        None => Err(ScriptError::NotFound(uuid.to_owned())),
    }
}

/// The live script `uuid`: its record and source (`NotFound` for one in the trash).
pub async fn load_with_source<S: Storage>(
    s: &S,
    uuid: &str,
) -> Result<(ScriptRecord, String), ScriptError> {
    let (rk, sk) = (record_key(uuid), source_key(uuid));
    let got = s
        .get(Area::Local, &[&rk, &sk, TRASH_INDEX_KEY])
        .await
        .map_err(storage_err)?;
    decode_with_source(&got, uuid)
}

/// `trash/index`, which `trash` owns; named here so a read of a live script can see it (`store`
/// must not import `trash`, which imports it).
pub const TRASH_INDEX_KEY: &str = "trash/index";

/// Whether `trash/index` in `got` lists `uuid`. A delete stores that listing, and the index
/// without the script, in one `set`, and removes the record and source after: a record whose
/// uuid is listed there is what a delete stopped in between (or a failed remove) left behind.
/// That script is in the trash, not live: no read shows it and no write changes it as live.
fn listed_in_trash(got: &Map<String, Value>, uuid: &str) -> bool {
    got.get(TRASH_INDEX_KEY)
        .and_then(|v| v.get("items"))
        .and_then(Value::as_array)
        .is_some_and(|a| {
            a.iter()
                .any(|s| s.get("uuid").and_then(Value::as_str) == Some(uuid))
        })
}

/// The record and source of `uuid` from a `get` that asked for them and for `trash/index`.
fn decode_with_source(
    got: &Map<String, Value>,
    uuid: &str,
) -> Result<(ScriptRecord, String), ScriptError> {
    let (rk, sk) = (record_key(uuid), source_key(uuid));
    let record = match got
        .get(&rk)
        .map(<ScriptRecord as serde::Deserialize>::deserialize)
    {
        Some(_) if listed_in_trash(got, uuid) => {
            return Err(ScriptError::NotFound(uuid.to_owned()))
        }
        Some(Ok(r)) if r.uuid == uuid => r,
        Some(_) => {
            return Err(ScriptError::Storage(format!(
                "the stored record of {uuid} is damaged"
            )))
        }
        None => return Err(ScriptError::NotFound(uuid.to_owned())),
    };
    match got.get(&sk).and_then(Value::as_str) {
        Some(src) => Ok((record, src.to_owned())),
        None => Err(ScriptError::Storage(format!(
            "the stored source of {uuid} is missing"
        ))),
    }
}

/// The result of a write: what is stored now.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub record: ScriptRecord,
    pub source: String,
    pub created: bool,
    /// Nothing was stored: the script already was as asked (no new revision).
    pub unchanged: bool,
    /// A restore brought the script back from the trash (the audit entry keeps it, for Undo).
    pub from_trash: bool,
    pub diagnostics: Vec<Diagnostic>,
    /// The revisions the history's bounds dropped from its index: the writer removes them
    /// ([`history::remove_stale`]) once the change is registered, beside the audit's `set`.
    pub stale_history: Vec<String>,
}

/// `@namespace` + `@name` identify a script to the user, so no two may look the same: they are
/// compared by confusable skeleton ([`names::identity`]), not byte for byte.
pub(crate) fn check_identity(
    snap: &Snapshot,
    meta: &Metadata,
    except: Option<&str>,
) -> Result<(), ScriptError> {
    let wanted = names::identity(meta.namespace.as_deref(), &meta.name);
    let clash = snap
        .with_identities()
        .find(|(r, id)| Some(r.uuid.as_str()) != except && **id == wanted)
        .map(|(r, _)| r);
    match clash {
        Some(r) => Err(ScriptError::DuplicateIdentity {
            namespace: r.metadata.namespace.clone(),
            name: r.metadata.name.clone(),
            uuid: r.uuid.clone(),
        }),
        None => Ok(()),
    }
}

/// The revision a save replaces, and what was already read of its history (`history::keys_for`).
struct Replaced<'a> {
    prev: Revision,
    read: Option<&'a Map<String, Value>>,
}

/// Stores a new version in one `set`: its record, its source (when it changed), the index (when
/// it changed), the `@require`/`@resource` bytes not stored yet (then within the quota bound)
/// and, for an update, the version it replaces appended to the history. Returns the history's
/// stale keys ([`Change::stale_history`]).
async fn save<S: Storage>(
    s: &S,
    record: &ScriptRecord,
    source: Option<&str>,
    index: Option<&[String]>,
    prev: Option<Replaced<'_>>,
    blobs: Map<String, Value>,
) -> Result<Vec<String>, ScriptError> {
    let history::Pushed { mut items, stale } = match prev {
        Some(Replaced {
            prev,
            read: Some(got),
        }) => history::items_for_read(s, prev, &record.assets, got)
            .await
            .map_err(storage_err)?,
        Some(Replaced { prev, read: None }) => history::items_for(s, prev, &record.assets)
            .await
            .map_err(storage_err)?,
        None => history::Pushed::default(),
    };
    let check_quota = !blobs.is_empty();
    items.extend(blobs);
    items.insert(
        record_key(&record.uuid),
        serde_json::to_value(record).map_err(storage_err)?,
    );
    if let Some(src) = source {
        items.insert(source_key(&record.uuid), src.into());
    }
    if let Some(ix) = index {
        items.insert(INDEX_KEY.to_owned(), index_value(ix));
    }
    if check_quota {
        asset_store::check_quota(s, &items).await?;
    }
    check_agent_room(s, &record.updated_by, &items).await?;
    s.set(Area::Local, items).await.map_err(storage_err)?;
    Ok(stale)
}

pub async fn create<E: Storage + Clock + Ids + Http>(
    env: &E,
    snap: &Snapshot,
    actor: impl Into<Actor<'_>>,
    source: &str,
    enabled: bool,
    max_bytes: usize,
) -> Result<Change, ScriptError> {
    let actor = actor.into();
    let (meta, diagnostics) = validate(source, max_bytes)?;
    let mut index = snap.index.clone();
    if index.len() >= MAX_SCRIPTS {
        return Err(ScriptError::TooMany);
    }
    check_identity(snap, &meta, None)?;
    let Prepared { assets, items } = asset_store::prepare(env, &meta, &[]).await?;
    let uuid = env.new_uuid();
    let now = env.now_ms();
    let record = ScriptRecord {
        uuid: uuid.clone(),
        metadata: meta,
        enabled,
        revision: 1,
        created_at: now,
        updated_at: now,
        created_by: actor.by.to_owned(),
        updated_by: actor.by.to_owned(),
        updated_via: actor.via(),
        sha256: sha256_hex(source.as_bytes()),
        size: source.len(),
        assets,
    };
    index.push(uuid);
    let stale_history = save(env, &record, Some(source), Some(&index), None, items).await?;
    Ok(Change {
        record,
        source: source.to_owned(),
        created: true,
        unchanged: false,
        from_trash: false,
        diagnostics,
        stale_history,
    })
}

pub fn check_revision(current: &ScriptRecord, expected: Option<u64>) -> Result<(), ScriptError> {
    match expected {
        Some(e) if e != current.revision => Err(ScriptError::StaleRevision {
            expected: e,
            current: current.revision,
        }),
        _ => Ok(()),
    }
}

/// Replaces the whole source of an existing script.
#[allow(clippy::too_many_arguments)] // each is one plain input of the write; a struct would only rename them
pub async fn replace<E: Storage + Clock + Http>(
    env: &E,
    snap: &Snapshot,
    actor: impl Into<Actor<'_>>,
    uuid: &str,
    expected: u64,
    source: &str,
    enabled: Option<bool>,
    max_bytes: usize,
) -> Result<Change, ScriptError> {
    let actor = actor.into();
    // The script and its history in one read: a write makes as few round trips as it can. The
    // read goes out first and the source is parsed while Chrome reads (a refused source wasted
    // a read, nothing else).
    let [budget_key, history_key] = history::keys_for(uuid);
    let (rk, sk) = (record_key(uuid), source_key(uuid));
    let keys = [&*rk, &*sk, &*budget_key, &*history_key, TRASH_INDEX_KEY];
    let (got, validated) = futures::join!(env.get(Area::Local, &keys), async {
        validate(source, max_bytes)
    });
    let (meta, diagnostics) = validated?;
    let got = got.map_err(storage_err)?;
    let (current, old_source) = decode_with_source(&got, uuid)?;
    check_revision(&current, Some(expected))?;
    // The same source, on or off as it is: nothing is stored, as for `set_enabled`. A write
    // retried after its answer was lost made a revision a copy of the one before, and the
    // history keeps 20: retries pushed the user's real versions out.
    if old_source == source && enabled.is_none_or(|e| e == current.enabled) {
        return Ok(Change {
            record: current,
            source: old_source,
            created: false,
            unchanged: true,
            from_trash: false,
            diagnostics,
            stale_history: Vec::new(),
        });
    }
    check_identity(snap, &meta, Some(uuid))?;
    // Only URLs the current version does not hold are fetched; the rest keep their bytes.
    let Prepared { assets, items } = asset_store::prepare(env, &meta, &current.assets).await?;
    let record = ScriptRecord {
        metadata: meta,
        enabled: enabled.unwrap_or(current.enabled),
        revision: current.revision.saturating_add(1),
        updated_at: env.now_ms(),
        updated_by: actor.by.to_owned(),
        updated_via: actor.via(),
        sha256: sha256_hex(source.as_bytes()),
        size: source.len(),
        assets,
        ..current.clone()
    };
    let prev = Revision {
        record: current,
        source: old_source,
    };
    let replaced = Replaced {
        prev,
        read: Some(&got),
    };
    let stale_history = save(env, &record, Some(source), None, Some(replaced), items).await?;
    Ok(Change {
        record,
        source: source.to_owned(),
        created: false,
        unchanged: false,
        from_trash: false,
        diagnostics,
        stale_history,
    })
}

/// One search/replace edit of `patch`.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Edit {
    pub search: String,
    pub replace: String,
    #[serde(default)]
    pub all: bool,
}

/// Applies edits in order; any edit that does not apply exactly leaves the source untouched.
///
/// The work is bounded before it is done: for each edit the occurrences are counted (no
/// allocation) and the size of the result computed with checked arithmetic, and an edit whose
/// result would be over `max_bytes` is refused before anything is built. A replace-all of a
/// one-byte search by a long text would otherwise build gigabytes and trap the module.
pub fn apply_edits(source: &str, edits: &[Edit], max_bytes: usize) -> Result<String, ScriptError> {
    let mut out = source.to_owned();
    for (i, e) in edits.iter().enumerate() {
        let edit = i.saturating_add(1);
        if e.search.is_empty() {
            return Err(ScriptError::PatchFailed(format!(
                "edit {edit}: search text is empty"
            )));
        }
        let count = out.matches(e.search.as_str()).count();
        match (count, e.all) {
            (0, _) => {
                // A search across lines in "\n" for a script whose lines end in "\r\n" (the
                // `\r` is invisible in get_script's text): said, so the agent can write it so.
                let crlf = e.search.contains('\n')
                    && !e.search.contains("\r\n")
                    && out.contains("\r\n")
                    && out.contains(e.search.replace('\n', "\r\n").as_str());
                return Err(ScriptError::PatchFailed(format!(
                    "edit {edit}: search text {:?} not found{}",
                    crate::text::ellipsize(&e.search, 60),
                    if crlf {
                        " (this script's lines end in \"\\r\\n\": with \"\\r\\n\" for \"\\n\" in search, and in replace, it is found)"
                    } else {
                        ""
                    }
                )));
            }
            (1, _) | (_, true) => {}
            (n, false) => {
                return Err(ScriptError::PatchFailed(format!(
                    "edit {edit}: search text occurs {n} times; make it unique or set all: true"
                )))
            }
        }
        let size = count
            .checked_mul(e.search.len())
            .and_then(|removed| out.len().checked_sub(removed))
            .and_then(|kept| kept.checked_add(count.checked_mul(e.replace.len())?));
        match size {
            Some(size) if size <= max_bytes => {}
            _ => {
                return Err(ScriptError::PatchTooLarge {
                    edit,
                    occurrences: count,
                    size,
                    max: max_bytes,
                })
            }
        }
        out = out.replace(e.search.as_str(), &e.replace);
    }
    Ok(out)
}

pub async fn patch<E: Storage + Clock + Http>(
    env: &E,
    snap: &Snapshot,
    actor: impl Into<Actor<'_>>,
    uuid: &str,
    expected: u64,
    edits: &[Edit],
    max_bytes: usize,
) -> Result<Change, ScriptError> {
    let actor = actor.into();
    let (current, source) = load_with_source(env, uuid).await?;
    check_revision(&current, Some(expected))?;
    let text = apply_edits(&source, edits, max_bytes)?;
    replace(env, snap, actor, uuid, expected, &text, None, max_bytes).await
}

pub async fn set_enabled<E: Storage + Clock>(
    env: &E,
    actor: impl Into<Actor<'_>>,
    uuid: &str,
    enabled: bool,
    expected: Option<u64>,
) -> Result<Change, ScriptError> {
    let actor = actor.into();
    let (current, source) = load_with_source(env, uuid).await?;
    check_revision(&current, expected)?;
    if current.enabled == enabled {
        return Ok(Change {
            record: current,
            source,
            created: false,
            unchanged: true,
            from_trash: false,
            diagnostics: Vec::new(),
            stale_history: Vec::new(),
        });
    }
    let record = ScriptRecord {
        enabled,
        revision: current.revision.saturating_add(1),
        updated_at: env.now_ms(),
        updated_by: actor.by.to_owned(),
        updated_via: actor.via(),
        ..current.clone()
    };
    let kept = history_has_room(env, actor.by, &current, &source).await?;
    let replaced = kept.then(|| Replaced {
        prev: Revision {
            record: current,
            source: source.clone(),
        },
        read: None,
    });
    let stale_history = save(env, &record, None, None, replaced, Map::new()).await?;
    Ok(Change {
        record,
        source,
        created: false,
        unchanged: false,
        from_trash: false,
        diagnostics: Vec::new(),
        stale_history,
    })
}

/// Whether a switch by `by` keeps a copy of the version it replaces in the history: always
/// but the user's when that copy would leave less than [`quota::DELETE_ROOM_BYTES`] free of
/// the quota, as Chrome counts it. Without it, Undo of the switch switches back
/// (`by_hand::history`); turning a script off must not cost the room to delete one.
async fn history_has_room<S: Storage>(
    s: &S,
    by: &str,
    current: &ScriptRecord,
    source: &str,
) -> Result<bool, ScriptError> {
    if by != BY_USER {
        return Ok(true);
    }
    let in_use = s
        .bytes_in_use(Area::Local, None)
        .await
        .map_err(storage_err)?;
    let copy = serde_json::to_value(current)
        .map(|r| quota::chrome_json_len(&r))
        .unwrap_or(usize::MAX)
        .saturating_add(quota::string_json_len(source));
    Ok(in_use.saturating_add(copy) <= quota::QUOTA_BYTES.saturating_sub(quota::DELETE_ROOM_BYTES))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::memory::MemoryEnv;
    use crate::scripts::record::BY_USER;
    use futures::executor::block_on;

    const MAX: usize = 256 * 1024;

    /// A new script named `name`, created and applied to `kept`; its uuid.
    fn made(env: &MemoryEnv, kept: &mut Snapshot, name: &str) -> String {
        let c = block_on(create(env, kept, HOST, &src(name, "1"), true, MAX)).unwrap();
        kept.apply(&c);
        c.record.uuid
    }

    fn snap(env: &MemoryEnv) -> Snapshot {
        block_on(load_snapshot(env)).unwrap()
    }

    /// `replace` as most tests call it: the whole new source, enabled state unchanged.
    async fn rewrite(
        env: &MemoryEnv,
        actor: &str,
        uuid: &str,
        expected: u64,
        source: &str,
    ) -> Result<Change, ScriptError> {
        let snap = load_snapshot(env).await?;
        replace(env, &snap, actor, uuid, expected, source, None, MAX).await
    }
    const HOST: &str = "mobcibglkcoacmddjpdoknlbbicjchlk";

    fn src(name: &str, body: &str) -> String {
        format!("// ==UserScript==\n// @name {name}\n// @namespace test\n// @match https://example.com/*\n// ==/UserScript==\n{body}\n")
    }

    #[test]
    fn create_read_update_delete() {
        let env = MemoryEnv::new();
        let c = block_on(create(&env, &snap(&env), HOST, &src("A", "1"), true, MAX)).unwrap();
        assert!(c.created);
        assert_eq!(c.record.revision, 1);
        assert_eq!(c.record.created_by, HOST);
        let uuid = c.record.uuid.clone();
        let (r, s) = block_on(load_with_source(&env, &uuid)).unwrap();
        assert_eq!(s, src("A", "1"));
        assert_eq!(r.sha256.len(), 64);

        env.advance(10.0);
        let u = block_on(rewrite(&env, BY_USER, &uuid, 1, &src("A", "2"))).unwrap();
        assert_eq!(u.record.revision, 2);
        assert_eq!(u.record.created_by, HOST);
        assert_eq!(u.record.updated_by, BY_USER);
        assert!(u.record.updated_at > u.record.created_at);

        let d = block_on(super::super::trash::delete(
            &env,
            &snap(&env),
            BY_USER.into(),
            &uuid,
            Some(2),
        ))
        .unwrap();
        assert_eq!(d.uuid, uuid);
        assert_eq!(
            block_on(load(&env, &uuid)),
            Err(ScriptError::NotFound(uuid.clone()))
        );
        assert!(block_on(load_index(&env)).unwrap().is_empty());
        // Nothing live is left; the script and its history wait in the trash.
        let keys: Vec<String> = env.dump(Area::Local).keys().cloned().collect();
        assert!(keys
            .iter()
            .all(|k| !k.starts_with("script/") && !k.starts_with("source/")));
        assert!(keys.contains(&format!("trash/{uuid}")), "{keys:?}");
        assert!(keys.contains(&format!("history/{uuid}")), "{keys:?}");
    }

    #[test]
    fn stale_revision_is_a_conflict_and_changes_nothing() {
        let env = MemoryEnv::new();
        let uuid = block_on(create(&env, &snap(&env), HOST, &src("A", "1"), true, MAX))
            .unwrap()
            .record
            .uuid;
        block_on(rewrite(&env, HOST, &uuid, 1, &src("A", "2"))).unwrap();
        let before = env.dump(Area::Local);
        let e = block_on(rewrite(&env, HOST, &uuid, 1, &src("A", "3"))).unwrap_err();
        assert_eq!(
            e,
            ScriptError::StaleRevision {
                expected: 1,
                current: 2
            }
        );
        assert!(e.to_string().contains("revision 2"));
        assert_eq!(
            block_on(super::super::trash::delete(
                &env,
                &snap(&env),
                BY_USER.into(),
                &uuid,
                Some(1)
            ))
            .unwrap_err(),
            ScriptError::StaleRevision {
                expected: 1,
                current: 2
            }
        );
        assert_eq!(env.dump(Area::Local), before);
    }

    #[test]
    fn namespace_and_name_are_unique() {
        let env = MemoryEnv::new();
        let a = block_on(create(&env, &snap(&env), HOST, &src("A", "1"), true, MAX))
            .unwrap()
            .record
            .uuid;
        assert!(matches!(
            block_on(create(&env, &snap(&env), HOST, &src("A", "x"), true, MAX)),
            Err(ScriptError::DuplicateIdentity { .. })
        ));
        let b = block_on(create(&env, &snap(&env), HOST, &src("B", "1"), true, MAX))
            .unwrap()
            .record
            .uuid;
        // Renaming B to A clashes; rewriting A as A does not.
        assert!(matches!(
            block_on(rewrite(&env, HOST, &b, 1, &src("A", "2"))),
            Err(ScriptError::DuplicateIdentity { .. })
        ));
        assert!(block_on(rewrite(&env, HOST, &a, 1, &src("A", "2"))).is_ok());
    }

    /// One snapshot kept across writes, as the provider's cache is: the identities it worked
    /// out at its first check follow every change and delete after it.
    #[test]
    fn a_kept_snapshot_checks_identities_as_its_scripts_are_now() {
        let env = MemoryEnv::new();
        let mut kept = snap(&env);
        let a = made(&env, &mut kept, "Bank helper");
        let b = made(&env, &mut kept, "Other");
        let meta = |name: &str| metadata::parse(&src(name, "")).metadata.unwrap();
        let clash = |kept: &Snapshot, name: &str| match check_identity(kept, &meta(name), None) {
            Err(ScriptError::DuplicateIdentity { uuid, .. }) => Some(uuid),
            _ => None,
        };
        // A look-alike (Cyrillic а) of A's name.
        assert_eq!(clash(&kept, "B\u{0430}nk helper"), Some(a.clone()));
        // A renamed: its old name is free, its new one taken.
        let renamed = block_on(replace(
            &env,
            &kept,
            HOST,
            &a,
            1,
            &src("Renamed", "2"),
            None,
            MAX,
        ))
        .unwrap();
        kept.apply(&renamed);
        assert_eq!(clash(&kept, "B\u{0430}nk helper"), None);
        assert_eq!(clash(&kept, "Renamed"), Some(a.clone()));
        // B deleted: its name is free; a new script's is taken.
        kept.remove(&b);
        assert_eq!(clash(&kept, "Other"), None);
        let c = made(&env, &mut kept, "Third");
        assert_eq!(clash(&kept, "Third"), Some(c));
        assert_eq!(clash(&kept, "Renamed"), Some(a));
    }

    /// One snapshot kept across writes: its order by recency, worked out at the first listing,
    /// follows every change, new script and delete after it; equal times keep stored order.
    #[test]
    fn a_kept_snapshot_lists_the_most_recently_updated_first_as_its_scripts_are_now() {
        let env = MemoryEnv::new();
        let mut kept = snap(&env);
        let names = |kept: &Snapshot| -> Vec<String> {
            kept.by_recency().map(|r| r.metadata.name.clone()).collect()
        };
        made(&env, &mut kept, "A");
        let b = made(&env, &mut kept, "B"); // at A's time: stored order
        assert_eq!(names(&kept), ["A", "B"]);
        env.advance(5.0);
        let c = made(&env, &mut kept, "C");
        assert_eq!(names(&kept), ["C", "A", "B"]);
        env.advance(5.0);
        let changed =
            block_on(replace(&env, &kept, HOST, &b, 1, &src("B", "2"), None, MAX)).unwrap();
        kept.apply(&changed);
        assert_eq!(names(&kept), ["B", "C", "A"]);
        // As a snapshot read afresh lists them (C is still stored: `remove` follows a delete).
        assert_eq!(names(&snap(&env)), ["B", "C", "A"]);
        kept.remove(&c);
        assert_eq!(names(&kept), ["B", "A"]);
    }

    /// A replace asks for the script and its history before it parses the new source (issue
    /// 17: the parse runs while Chrome reads): a source refused for its header has been read
    /// for, and nothing else happened.
    #[test]
    fn a_replaces_read_goes_out_before_its_source_is_parsed() {
        let env = MemoryEnv::new();
        let mut kept = snap(&env);
        let a = made(&env, &mut kept, "A");
        env.get_log.borrow_mut().clear();
        let broken = "// ==UserScript==\n// @namespace test\n// ==/UserScript==\n";
        let r = block_on(replace(&env, &kept, HOST, &a, 1, broken, None, MAX));
        assert!(matches!(r, Err(ScriptError::InvalidMetadata(_))), "{r:?}");
        let asked = env.get_log.borrow().clone();
        assert!(
            asked.iter().any(|keys| keys.contains(&record_key(&a))),
            "the source was parsed before the script was asked for: {asked:?}"
        );
        assert_eq!(snap(&env).records[0].revision, 1);
    }

    #[test]
    fn failed_storage_keeps_the_previous_version() {
        let env = MemoryEnv::new();
        let uuid = block_on(create(&env, &snap(&env), HOST, &src("A", "1"), true, MAX))
            .unwrap()
            .record
            .uuid;
        let before = env.dump(Area::Local);
        *env.fail_writes.borrow_mut() = Some("QUOTA_BYTES quota exceeded".into());
        assert!(matches!(
            block_on(rewrite(&env, HOST, &uuid, 1, &src("A", "2"))),
            Err(ScriptError::Storage(_))
        ));
        assert!(matches!(
            block_on(create(&env, &snap(&env), HOST, &src("B", "1"), true, MAX)),
            Err(ScriptError::Storage(_))
        ));
        assert_eq!(env.dump(Area::Local), before);
    }

    #[test]
    fn invalid_and_oversized_sources_are_refused() {
        let env = MemoryEnv::new();
        let e = block_on(create(&env, &snap(&env), HOST, "console.log(1)", true, MAX)).unwrap_err();
        assert!(matches!(e, ScriptError::InvalidMetadata(_)));
        assert!(e.to_string().contains("line 1"), "{e}");
        let big = src("A", &"x".repeat(MAX));
        assert!(matches!(
            block_on(create(&env, &snap(&env), HOST, &big, true, MAX)),
            Err(ScriptError::TooLarge { .. })
        ));
        assert!(env.dump(Area::Local).is_empty());
    }

    #[test]
    fn patches_apply_exactly_or_not_at_all() {
        let env = MemoryEnv::new();
        let uuid = block_on(create(
            &env,
            &snap(&env),
            HOST,
            &src("A", "let a = 1; let b = 1;"),
            true,
            MAX,
        ))
        .unwrap()
        .record
        .uuid;
        let edit = |s: &str, r: &str, all| Edit {
            search: s.into(),
            replace: r.into(),
            all,
        };
        let e = block_on(patch(
            &env,
            &snap(&env),
            HOST,
            &uuid,
            1,
            &[edit("= 1", "= 2", false)],
            MAX,
        ))
        .unwrap_err();
        assert!(e.to_string().contains("2 times"), "{e}");
        let e = block_on(patch(
            &env,
            &snap(&env),
            HOST,
            &uuid,
            1,
            &[edit("let a", "let z", false), edit("nope", "x", false)],
            MAX,
        ))
        .unwrap_err();
        assert!(matches!(e, ScriptError::PatchFailed(_)));
        assert_eq!(block_on(load(&env, &uuid)).unwrap().revision, 1);
        let c = block_on(patch(
            &env,
            &snap(&env),
            HOST,
            &uuid,
            1,
            &[edit("= 1", "= 2", true), edit("let a", "const a", false)],
            MAX,
        ))
        .unwrap();
        assert!(c.source.contains("const a = 2; let b = 2;"));
        assert_eq!(c.record.revision, 2);
        // A patch that grows past the limit is refused.
        let e = block_on(patch(
            &env,
            &snap(&env),
            HOST,
            &uuid,
            2,
            &[edit("const", &"x".repeat(MAX), false)],
            MAX,
        ))
        .unwrap_err();
        assert!(
            matches!(e, ScriptError::PatchTooLarge { edit: 1, .. }),
            "{e:?}"
        );
    }

    fn edit(search: &str, replace: &str, all: bool) -> Edit {
        Edit {
            search: search.into(),
            replace: replace.into(),
            all,
        }
    }

    #[test]
    fn a_replace_all_bomb_is_refused_before_it_is_built() {
        // 256 KiB of `a`, each replaced by 256 KiB: 64 GiB if built. Refused from the count.
        let source = "a".repeat(MAX);
        let bomb = edit("a", &"b".repeat(MAX), true);
        let started = std::time::Instant::now();
        let e = apply_edits(&source, &[bomb], MAX).unwrap_err();
        assert!(
            started.elapsed() < std::time::Duration::from_millis(500),
            "took {:?}",
            started.elapsed()
        );
        assert_eq!(
            e,
            ScriptError::PatchTooLarge {
                edit: 1,
                occurrences: MAX,
                size: MAX.checked_mul(MAX),
                max: MAX
            }
        );
        let msg = e.to_string();
        assert!(
            msg.contains("edit 1") && msg.contains("262144-byte limit"),
            "{msg}"
        );
        // Just over the limit: the size is reported exactly.
        let e = apply_edits("aa", &[edit("a", "bb", true)], 3).unwrap_err();
        assert!(
            matches!(e, ScriptError::PatchTooLarge { size: Some(4), .. }),
            "{e:?}"
        );
    }

    #[test]
    fn patch_size_is_checked_per_edit_at_the_exact_limit() {
        // Growing to exactly the limit is fine; one byte more is not.
        assert_eq!(
            apply_edits("ab", &[edit("b", "bcd", false)], 4).unwrap(),
            "abcd"
        );
        assert!(matches!(
            apply_edits("ab", &[edit("b", "bcde", false)], 4),
            Err(ScriptError::PatchTooLarge {
                edit: 1,
                size: Some(5),
                ..
            })
        ));
        // An intermediate result over the limit is refused even if a later edit shrinks it.
        assert!(matches!(
            apply_edits(
                "ab",
                &[edit("b", "bcdef", false), edit("cdef", "", false)],
                4
            ),
            Err(ScriptError::PatchTooLarge { edit: 1, .. })
        ));
        // Shrinking edits are never refused by the bound.
        assert_eq!(apply_edits("aaaa", &[edit("a", "", true)], 4).unwrap(), "");
    }

    /// A search across lines written with "\n" for a script whose lines end in "\r\n" (the
    /// `\r` invisible in the text an agent reads) is not found: the error says how it is.
    #[test]
    fn a_search_missing_only_the_scripts_crlf_says_so() {
        let src = "// a\r\n// b\r\nrun();\r\n";
        let e = apply_edits(src, &[edit("// b\nrun();", "x", false)], MAX).unwrap_err();
        assert!(e.to_string().contains("lines end in \"\\r\\n\""), "{e}");
        let fixed = apply_edits(src, &[edit("// b\r\nrun();", "x", false)], MAX).unwrap();
        assert_eq!(fixed, "// a\r\nx\r\n");
        // Not said where CRLF would not find it either, nor for a one-line search.
        for search in ["// c\nrun();", "nothing"] {
            let e = apply_edits(src, &[edit(search, "x", false)], MAX).unwrap_err();
            assert!(!e.to_string().contains("\\r\\n"), "{e}");
        }
    }

    #[test]
    fn patch_errors_name_the_edit_that_failed() {
        let e = apply_edits(
            "one two",
            &[edit("one", "1", false), edit("three", "3", false)],
            MAX,
        )
        .unwrap_err();
        assert!(e.to_string().contains("edit 2:"), "{e}");
        let e = apply_edits(
            "x x y",
            &[
                edit("y", "z", false),
                edit("q", "r", true),
                edit("x", "w", false),
            ],
            MAX,
        )
        .unwrap_err();
        assert!(e.to_string().contains("edit 2:"), "{e}");
        let e =
            apply_edits("x x", &[edit("nope", "", true), edit("x", "w", false)], MAX).unwrap_err();
        assert!(e.to_string().contains("edit 1:"), "{e}");
        // And through patch, which applies them one by one against storage.
        let env = MemoryEnv::new();
        let uuid = block_on(create(
            &env,
            &snap(&env),
            HOST,
            &src("A", "let a = 1;"),
            true,
            MAX,
        ))
        .unwrap()
        .record
        .uuid;
        let e = block_on(patch(
            &env,
            &snap(&env),
            HOST,
            &uuid,
            1,
            &[edit("let", "const", false), edit("b = 2", "", false)],
            MAX,
        ))
        .unwrap_err();
        assert!(e.to_string().contains("edit 2:"), "{e}");
        let e = block_on(patch(
            &env,
            &snap(&env),
            HOST,
            &uuid,
            1,
            &[
                edit("let", "const", false),
                edit("1", &"9".repeat(MAX), false),
            ],
            MAX,
        ))
        .unwrap_err();
        assert!(
            matches!(e, ScriptError::PatchTooLarge { edit: 2, .. }),
            "{e:?}"
        );
    }

    #[test]
    fn damaged_records_are_skipped_and_reported() {
        let env = MemoryEnv::new();
        let a = block_on(create(&env, &snap(&env), HOST, &src("A", "1"), true, MAX))
            .unwrap()
            .record
            .uuid;
        let b = block_on(create(&env, &snap(&env), HOST, &src("B", "1"), true, MAX))
            .unwrap()
            .record
            .uuid;
        env.areas
            .borrow_mut()
            .get_mut(&Area::Local)
            .unwrap()
            .insert(record_key(&a), json!({"garbage": true}));
        let (records, problems) = block_on(load_all(&env)).unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].uuid, b);
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].uuid, a);
    }

    #[test]
    fn a_damaged_index_is_rebuilt_from_the_records() {
        let env = MemoryEnv::new();
        let a = block_on(create(&env, &snap(&env), HOST, &src("A", "1"), true, MAX))
            .unwrap()
            .record
            .uuid;
        env.advance(5.0);
        let b = block_on(create(&env, &snap(&env), HOST, &src("B", "1"), true, MAX))
            .unwrap()
            .record
            .uuid;
        let ab = vec![a.clone(), b.clone()];
        for (garbage, expected) in [
            (json!("garbage"), ab.clone()),
            (json!({"uuids": 5}), ab.clone()),
            (json!({"uuids": [a.clone(), 7]}), ab.clone()),
            (json!(null), ab.clone()),
            // Repeats, adjacent or not, are kept once at their first place.
            (
                json!({"uuids": [a.clone(), b.clone(), a.clone()]}),
                ab.clone(),
            ),
            (
                json!({"uuids": [a.clone(), 7, b.clone(), a.clone(), b.clone()]}),
                ab.clone(),
            ),
            (
                json!({"uuids": [b.clone(), a.clone(), b.clone()]}),
                vec![b.clone(), a.clone()],
            ),
        ] {
            env.areas
                .borrow_mut()
                .get_mut(&Area::Local)
                .unwrap()
                .insert(INDEX_KEY.into(), garbage.clone());
            let s = snap(&env);
            assert_eq!(s.index, expected, "{garbage}");
            assert_eq!(s.records.len(), 2);
            assert_eq!(s.problems[0].uuid, INDEX_KEY);
            // The next write saves the rebuilt index, with nobody lost.
            let c = block_on(create(
                &env,
                &s,
                HOST,
                &src(&format!("C{}", garbage.to_string().len()), ""),
                true,
                MAX,
            ))
            .unwrap();
            assert_eq!(load_index_now(&env).len(), 3, "{garbage}");
            block_on(super::super::trash::delete(
                &env,
                &snap(&env),
                BY_USER.into(),
                &c.record.uuid,
                None,
            ))
            .unwrap();
        }
    }

    /// A missing index is damage like any other when records are stored: read as empty, the
    /// scripts vanished from every listing (and Chrome), the next write stored an index of the
    /// new script alone, and the purge after it swept the others' records, sources, histories
    /// and values as ownerless — gone for good.
    #[test]
    fn a_missing_index_is_rebuilt_and_nothing_is_swept() {
        let env = MemoryEnv::new();
        assert!(
            snap(&env).problems.is_empty(),
            "an empty store has no index and no damage"
        );
        let a = block_on(create(&env, &snap(&env), HOST, &src("A", "1"), true, MAX))
            .unwrap()
            .record
            .uuid;
        env.advance(5.0);
        let b = block_on(create(&env, &snap(&env), HOST, &src("B", "1"), true, MAX))
            .unwrap()
            .record
            .uuid;
        env.areas
            .borrow_mut()
            .get_mut(&Area::Local)
            .unwrap()
            .remove(INDEX_KEY);
        let s = snap(&env);
        assert_eq!(s.index, vec![a.clone(), b.clone()]);
        assert_eq!(s.records.len(), 2);
        assert_eq!(s.problems[0].uuid, INDEX_KEY, "{:?}", s.problems);
        let c = block_on(create(&env, &s, HOST, &src("C", ""), true, MAX)).unwrap();
        assert_eq!(
            load_index_now(&env),
            vec![a.clone(), b.clone(), c.record.uuid]
        );
        block_on(super::super::trash::purge(&env, None)).unwrap();
        for u in [&a, &b] {
            assert!(
                env.dump(Area::Local).contains_key(&record_key(u)),
                "{u} kept"
            );
            assert!(
                env.dump(Area::Local).contains_key(&source_key(u)),
                "{u} kept"
            );
        }
    }

    fn load_index_now(env: &MemoryEnv) -> Vec<String> {
        block_on(load_index(env)).unwrap()
    }

    #[test]
    fn enable_toggle_bumps_revision_only_on_change() {
        let env = MemoryEnv::new();
        let uuid = block_on(create(&env, &snap(&env), HOST, &src("A", "1"), true, MAX))
            .unwrap()
            .record
            .uuid;
        assert_eq!(
            block_on(set_enabled(&env, HOST, &uuid, true, None))
                .unwrap()
                .record
                .revision,
            1
        );
        let c = block_on(set_enabled(&env, HOST, &uuid, false, Some(1))).unwrap();
        assert_eq!((c.record.enabled, c.record.revision), (false, 2));
    }

    #[test]
    fn look_alike_names_are_one_identity() {
        let env = MemoryEnv::new();
        let first = block_on(create(
            &env,
            &snap(&env),
            HOST,
            &src("Bank helper", "1"),
            true,
            MAX,
        ))
        .unwrap()
        .record
        .uuid;
        for name in [
            "Bank\u{200B} helper",
            "Bank\u{00A0}helper",
            "Bank \u{061C}helper",
            "B\u{0430}nk helper",
            "Bank h\u{0435}lper",
            "Bank he\u{04CF}per",
            "\u{FEFF}Bank  helper\u{2060}",
            "Ba\u{0578}k helper",
            "\u{FF22}ank helper",
        ] {
            let e =
                block_on(create(&env, &snap(&env), HOST, &src(name, "x"), true, MAX)).unwrap_err();
            match &e {
                ScriptError::DuplicateIdentity {
                    uuid,
                    name: existing,
                    ..
                } => {
                    assert_eq!(
                        (uuid.as_str(), existing.as_str()),
                        (first.as_str(), "Bank helper"),
                        "{name:?}"
                    );
                }
                other => panic!("{name:?} was not refused: {other:?}"),
            }
            assert!(
                e.to_string().contains(&first) && e.to_string().contains("\"Bank helper\""),
                "{e}"
            );
        }
        assert_eq!(snap(&env).records.len(), 1);
        // Renaming another script to a look-alike clashes too.
        let b = block_on(create(
            &env,
            &snap(&env),
            HOST,
            &src("Other", "1"),
            true,
            MAX,
        ))
        .unwrap()
        .record
        .uuid;
        assert!(matches!(
            block_on(rewrite(&env, HOST, &b, 1, &src("B\u{0430}nk helper", "2"))),
            Err(ScriptError::DuplicateIdentity { .. })
        ));
    }

    #[test]
    fn names_are_shown_clean_and_capped() {
        let env = MemoryEnv::new();
        let c = block_on(create(
            &env,
            &snap(&env),
            HOST,
            &src("Bank\u{200B}\u{00A0}helper", "1"),
            true,
            MAX,
        ))
        .unwrap();
        assert_eq!(c.record.metadata.name, "Bank helper");
        assert!(c
            .diagnostics
            .iter()
            .any(|d| d.message.contains("invisible")));
        let long = "n".repeat(names::MAX_NAME_CHARS + 1);
        let e = block_on(create(&env, &snap(&env), HOST, &src(&long, "1"), true, MAX)).unwrap_err();
        assert!(matches!(e, ScriptError::InvalidMetadata(_)), "{e:?}");
        assert!(e.to_string().contains("201 characters"), "{e}");
        let ok = "n".repeat(names::MAX_NAME_CHARS);
        assert!(block_on(create(&env, &snap(&env), HOST, &src(&ok, "1"), true, MAX)).is_ok());
    }
}
