//! The audit log: one entry per write attempt, whatever its result. An entry holds the time, the
//! tool, the caller, the result, the target uuid and a sha256 digest of the canonical JSON of the
//! arguments — never an argument value, so script source never enters the log.
//!
//! **Two budgets.** Entries go to one of two rings ([`Ring`]): *effects* — writes that changed
//! something (`ok`) or may have ([`INTERRUPTED`]), and tries that ran code without a readable
//! result (`TIMEOUT`, `PAYLOAD_TOO_LARGE`) — and *refusals* — everything else. A refusal
//! costs the caller nothing (no rate-limit slot), so with one shared ring ~1,000 cheap refused
//! calls would push the record of a real write out of the log. Now refusals only evict older
//! refusals; an effect is evicted only by newer effects, which the rate limit paces (30 a
//! minute per caller). The pages read both rings merged, newest first.
//!
//! **Write-ahead.** A write's entry is first stored as *pending* ([`PENDING_KEY`]) in the very
//! `storage.set` that stores the script ([`Journaled`]), and finalized with the result later
//! (one `set` that appends the entry and clears the pending one). A worker stopped in between
//! leaves the pending entry, and the next worker finalizes it as [`INTERRUPTED`]: no write can
//! land without its record. Writes are serialized by the provider's write lock, and each is
//! finalized before the lock is released, so one pending slot is enough. A `set` that also
//! deletes scripts for good (the trash's own purge, or a delete that sweeps it) carries their
//! entries in the same slot, then a list ([`Journaled::also`], [`finalize_all`]). A try stores nothing
//! for an entry to ride with, so its entry is stored on its own before its code runs
//! ([`begin_try`], one slot per try in [`PENDING_TRIES_KEY`]: tries are not serialized).
//!
//! Each ring is stored in `chrome.storage.local` as chunks of [`CHUNK`] entries plus a head, so
//! appending rewrites one small chunk, not the whole log. The oldest chunk is dropped past
//! [`MAX_CHUNKS`]: a ring keeps its newest 990–1000 entries.
//!
//! **Why chunks of 10.** Every audited call (each write, try and refusal) rewrites the newest
//! chunk, and `chrome.storage.local.set` costs about in proportion to its size (measured from an
//! extension page, medians: 2 entries 0.6–1.3 ms, 25 entries 1.5–1.8 ms, 100 entries 3.5–4.7
//! ms), on top of the JSON conversions and the change's echo. With chunks of 100, a
//! `write_script` with a nearly full newest chunk took 16.4–22.9 ms against 11.3–14.5 ms with it
//! nearly empty. Chunks of 10 keep that cost flat; reading the whole log is a `get` of 100 keys
//! instead of 10, for the same bytes. A log stored with chunks of 100 is read as it is: its newest
//! chunk counts as full, so the next entry starts a new one, and its old chunks leave the ring as
//! it moves on (until then a ring may hold up to 1,900 entries). A damaged head, or a missing
//! one before an append, is found again from the chunks stored, so an append never overwrites a
//! chunk that still holds entries.

use crate::env::{
    Area, Clock, EnvError, FetchError, Http, HttpRequest, HttpResponse, Ids, Storage,
};
use crate::gm::asset_store::Reviewed;
use futures::channel::oneshot;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub const CHUNK: usize = 10;
pub const MAX_CHUNKS: u64 = 100;
#[allow(clippy::cast_possible_truncation)] // 100 fits any usize
pub const MAX_ENTRIES: usize = CHUNK * MAX_CHUNKS as usize;
pub const HEAD_KEY: &str = "audit/head";
/// The write in progress, stored with the script it writes (see the module docs).
pub const PENDING_KEY: &str = "audit/pending";
/// The result of a write whose worker stopped after it was stored and before its result was
/// recorded (or sent): the script is stored; the caller never got an answer.
pub const INTERRUPTED: &str = "INTERRUPTED";
const PENDING: &str = "PENDING";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub at: f64,
    pub tool: String,
    pub caller: String,
    /// `"ok"` or an error code (`WRITE_DISABLED`, `RATE_LIMITED`, `CONFLICT`, …).
    pub result: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// sha256 (hex) of the canonical JSON of the arguments.
    pub digest: String,
    /// The write succeeded and changed nothing (a switch already in that state, a restore of
    /// the current version): it made no revision, so there is nothing to undo.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unchanged: bool,
    /// The write brought a script back from the trash: undoing it sends the script back there
    /// (nothing else records that the version before was in the trash).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_trash: bool,
    /// The revision a successful write left the script at (a delete: the revision it sent to
    /// the trash). Undo reverts exactly that one; entries written before it was recorded
    /// have none, and Undo then finds it by caller and time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
    /// A script that left the trash for good: its name (the record is gone, so the log keeps
    /// it; never its source) and why it went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purged: Option<Purged>,
    /// The script's `@name` as a successful write left it (a delete: as it went to the trash),
    /// cut and marked as [`Purged::name`] is: the log says what was written under which name,
    /// even after a later write renamed the script. Entries written before it was kept, and
    /// refusals, have none (the pages then show the script's name now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// How many scripts an import (or a restore from a backup) wrote: one entry stands for them
    /// all (a log of 1,000 entries would otherwise lose its history to one large import).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
}

/// What an entry of a script deleted for good keeps of it (see [`Entry::purged`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Purged {
    /// The script's `@name`, cut to [`MAX_PURGED_NAME`] characters, invisible characters marked.
    pub name: String,
    /// `"expired"` (30 days in the trash) or `"trashFull"` (the oldest, pushed out past the
    /// trash's count bound by the user's delete), by the provider itself; `"deletedForever"`,
    /// the user's "Delete forever" or "Empty trash".
    pub why: String,
}

/// The longest name an entry keeps, in characters: an entry stays small.
pub const MAX_PURGED_NAME: usize = 200;

impl Entry {
    /// The entry of a script the provider itself deleted for good (`why`: its 30 days in the
    /// trash were over, or a full trash pushed it out), naming it by uuid and name. Its digest
    /// is of those, as a call's is of its arguments.
    pub fn left_trash(at: f64, uuid: &str, name: &str, why: &str) -> Entry {
        Entry {
            at,
            tool: PURGE_TOOL.to_owned(),
            caller: crate::scripts::record::BY_PROVIDER.to_owned(),
            result: "ok".to_owned(),
            target: Some(uuid.to_owned()),
            digest: crate::guard::digest::digest_hex(
                &serde_json::json!({ "uuid": uuid, "why": why }),
            ),
            unchanged: false,
            from_trash: false,
            revision: None,
            purged: Some(Purged::new(name, why)),
            name: None,
            count: None,
        }
    }
}

/// The tool name of every entry of scripts deleted for good: the user's "Delete forever" and
/// "Empty trash", and the trash's own purges ([`Entry::left_trash`]).
pub const PURGE_TOOL: &str = "purge_trash";

impl Purged {
    /// The name is untrusted text (an agent may have written the script): cut, then with every
    /// invisible or direction character as a visible `⟨U+XXXX⟩`, as the pages show names.
    pub fn new(name: &str, why: &str) -> Purged {
        Purged {
            name: bounded_visible(name, MAX_PURGED_NAME),
            why: why.to_owned(),
        }
    }
}

/// The longest name a write's entry keeps ([`Entry::name`]), in characters (and in stored
/// bytes, [`MAX_NAME_STORED_BYTES`]): the log's two rings of 1,000 entries stay within their
/// share of the storage (`scripts::quota::AUDIT_ALLOWANCE_BYTES`).
pub const MAX_ENTRY_NAME: usize = 80;

/// A script's name as a write's entry keeps it, and as the popup is given the name now to set
/// beside it: untrusted text (an agent may have written it), cut to [`MAX_ENTRY_NAME`]
/// characters and [`MAX_NAME_STORED_BYTES`] (`…` for the rest), every invisible or direction
/// character made a visible `⟨U+XXXX⟩`, as the pages show names.
pub fn kept_name(name: &str) -> String {
    bounded_visible(name, MAX_ENTRY_NAME)
}

/// The most bytes a name in an entry takes as Chrome stores it (R12: 80 `<` are 480 bytes, 80
/// invisible characters, each marked `⟨U+XXXX⟩`, more; a full log passed its 1 MiB).
pub const MAX_NAME_STORED_BYTES: usize = 240;

/// `name` cut to `max_chars` characters and [`MAX_NAME_STORED_BYTES`] stored bytes (`…` for
/// the rest), every invisible or direction character made a visible `⟨U+XXXX⟩`.
fn bounded_visible(name: &str, max_chars: usize) -> String {
    let room = MAX_NAME_STORED_BYTES - '…'.len_utf8();
    let (mut out, mut bytes) = (String::new(), 0usize);
    let mut buf = [0u8; 4];
    for (i, c) in name.chars().enumerate() {
        let piece = crate::guard::diff::visible(c.encode_utf8(&mut buf));
        let n = crate::scripts::quota::string_json_len(&piece) - 2;
        if i == max_chars || bytes + n > room {
            out.push('…');
            return out;
        }
        out.push_str(&piece);
        bytes += n;
    }
    out
}

/// Which budget an entry is kept in (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ring {
    Effects,
    Refusals,
}

impl Ring {
    pub fn of(entry: &Entry) -> Ring {
        // A try that timed out, or whose report was too large to read, ran its code in the
        // page: an effect, which cheap refusals must not push out of the log.
        let ran = entry.tool == "try_script"
            && matches!(entry.result.as_str(), "TIMEOUT" | "PAYLOAD_TOO_LARGE");
        if entry.result == "ok" || entry.result == INTERRUPTED || ran {
            Ring::Effects
        } else {
            Ring::Refusals
        }
    }

    fn prefix(self) -> &'static str {
        match self {
            // The effects ring keeps the log's original keys.
            Ring::Effects => "audit",
            Ring::Refusals => "audit/refused",
        }
    }

    fn head_key(self) -> String {
        format!("{}/head", self.prefix())
    }

    fn chunk_key(self, n: u64) -> String {
        format!("{}/{n}", self.prefix())
    }
}

/// Chunks `first..=last` exist.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
struct Head {
    first: u64,
    last: u64,
}

fn decode_chunk(v: Option<&Value>) -> Vec<Entry> {
    // A damaged entry is skipped rather than costing the rest of the chunk.
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|e| serde::Deserialize::deserialize(e).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Why the audit log could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditError {
    /// The storage call failed (its message).
    Storage(EnvError),
    /// An entry or a ring head could not be turned into JSON.
    Encode(String),
}

/// Why a write is refused while an earlier audit entry waits to be saved (`Provider::
/// settle_interrupted_write`), and what frees a full storage then (R13: the message gave the
/// user nothing to act on).
pub fn unsettled_message(e: &AuditError) -> String {
    format!("the record of an earlier write (interrupted, or not saved for want of storage) could not be saved, so no write runs until it is: {e}. If the storage is full and scripts are in the trash, make room: \"Delete forever\" or \"Empty trash\" on the options page runs even now")
}

impl std::fmt::Display for AuditError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AuditError::Storage(e) => write!(f, "{e}"),
            AuditError::Encode(e) => f.write_str(e),
        }
    }
}

/// A ring's head. A damaged one is found again from the chunks stored, so the next append
/// neither starts over at chunk 0 nor overwrites a chunk that still holds entries; a missing one
/// too before an append (`Missing::Recover`: a ring's first append ever, or a head removed by hand
/// beside its chunks), while a read takes the ring for chunk 0 alone (`Missing::Unused`: an unused
/// ring has no head, and the pages read the log often). Rare, so one read of everything is fine.
async fn head<S: Storage>(s: &S, ring: Ring, missing: Missing) -> Result<Head, AuditError> {
    let key = ring.head_key();
    let got = s
        .get(Area::Local, &[&key])
        .await
        .map_err(AuditError::Storage)?;
    match got.get(&key) {
        None if missing == Missing::Unused => Ok(Head::default()),
        v => match v.and_then(valid_head) {
            Some(h) => Ok(h),
            None => Ok(head_from_chunks(
                &s.get_all(Area::Local).await.map_err(AuditError::Storage)?,
                ring,
            )),
        },
    }
}

/// What [`head`] makes of a ring without one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Missing {
    /// An unused ring: chunk 0 alone.
    Unused,
    /// Found again from the chunks stored.
    Recover,
}

fn valid_head(v: &Value) -> Option<Head> {
    <Head as serde::Deserialize>::deserialize(v)
        .ok()
        // A head that cannot be right (or would overflow) is not trusted, never a panic.
        .filter(|h| h.first <= h.last && h.last - h.first < MAX_CHUNKS && h.last < u64::MAX / 2)
}

fn decode_head(v: Option<&Value>) -> Head {
    v.and_then(valid_head).unwrap_or_default()
}

/// The head of the chunks of `ring` that `all` holds: the newest [`MAX_CHUNKS`] of them.
fn head_from_chunks(all: &Map<String, Value>, ring: Ring) -> Head {
    let prefix = format!("{}/", ring.prefix());
    let numbers: Vec<u64> = all
        .keys()
        .filter_map(|k| k.strip_prefix(&prefix)?.parse::<u64>().ok())
        .filter(|n| *n < u64::MAX / 2)
        .collect();
    match (numbers.iter().min(), numbers.iter().max()) {
        (Some(&low), Some(&last)) => Head {
            first: low.max(last.saturating_sub(MAX_CHUNKS - 1)),
            last,
        },
        _ => Head::default(),
    }
}

/// A ring's head and its newest chunk.
type RingTail = (Head, Vec<Entry>);

/// Each ring's head and newest chunk as the provider last read or wrote them, so an append is
/// one `set` instead of two reads and a `set`. Exact like the provider's other caches: every
/// append goes through it (under the audit lock), and [`Tail::storage_changed`] forgets a ring
/// when storage holds anything else there.
#[derive(Debug, Default)]
pub struct Tail {
    effects: std::cell::RefCell<Option<RingTail>>,
    refusals: std::cell::RefCell<Option<RingTail>>,
}

impl Tail {
    fn cell(&self, ring: Ring) -> &std::cell::RefCell<Option<RingTail>> {
        match ring {
            Ring::Effects => &self.effects,
            Ring::Refusals => &self.refusals,
        }
    }

    fn take(&self, ring: Ring) -> Option<RingTail> {
        self.cell(ring).borrow_mut().take()
    }

    fn put(&self, ring: Ring, tail: RingTail) {
        *self.cell(ring).borrow_mut() = Some(tail);
    }

    /// `chrome.storage.onChanged` for a local key: keeps a ring whose head and newest chunk are
    /// still what storage holds (compared as decoded: the echo of our own append), else forgets it.
    pub fn storage_changed(&self, key: &str, new: &Value) {
        for ring in [Ring::Effects, Ring::Refusals] {
            let mut slot = self.cell(ring).borrow_mut();
            let same = match slot.as_ref() {
                None => true,
                Some((h, _)) if key == ring.head_key() => decode_head(Some(new)) == *h,
                Some((h, chunk)) if key == ring.chunk_key(h.last) => {
                    decode_chunk(Some(new)) == *chunk
                }
                Some(_) => true,
            };
            if !same {
                *slot = None;
            }
        }
    }
}

/// Appends one entry to its ring. The caller serializes appends (the provider's audit lock).
pub async fn append<S: Storage>(s: &S, entry: &Entry, tail: &Tail) -> Result<(), AuditError> {
    append_with(s, entry, Map::new(), tail).await
}

/// Appends one entry and writes `extra` in the same atomic `set`.
async fn append_with<S: Storage>(
    s: &S,
    entry: &Entry,
    items: Map<String, Value>,
    tail: &Tail,
) -> Result<(), AuditError> {
    append_all_with(s, std::slice::from_ref(entry), items, tail).await
}

fn encode<T: Serialize + ?Sized>(v: &T) -> Result<Value, AuditError> {
    serde_json::to_value(v).map_err(|e| AuditError::Encode(e.to_string()))
}

/// Appends entries, in order, and writes `items` in the same atomic `set` (a write whose
/// pending slot held several: a delete that pushed scripts out of the trash, the trash's sweep).
async fn append_all_with<S: Storage>(
    s: &S,
    entries: &[Entry],
    mut items: Map<String, Value>,
    tail: &Tail,
) -> Result<(), AuditError> {
    let mut effects: Option<RingTail> = None;
    let mut refusals: Option<RingTail> = None;
    let mut drops: Vec<String> = Vec::new();
    for entry in entries {
        let ring = Ring::of(entry);
        let slot = match ring {
            Ring::Effects => &mut effects,
            Ring::Refusals => &mut refusals,
        };
        if slot.is_none() {
            // Taken out: if this append fails half-way, the ring is read again next time.
            *slot = Some(match tail.take(ring) {
                Some(t) => t,
                None => {
                    let h = head(s, ring, Missing::Recover).await?;
                    let key = ring.chunk_key(h.last);
                    let got = s
                        .get(Area::Local, &[&key])
                        .await
                        .map_err(AuditError::Storage)?;
                    (h, decode_chunk(got.get(&key)))
                }
            });
        }
        let Some((h, chunk)) = slot.as_mut() else {
            continue;
        };
        if chunk.len() >= CHUNK {
            h.last += 1;
            chunk.clear();
            if h.last - h.first >= MAX_CHUNKS {
                let k = ring.chunk_key(h.first);
                // A chunk this append filled and already drops (more entries than the ring).
                items.remove(&k);
                drops.push(k);
                h.first += 1;
            }
        }
        chunk.push(entry.clone());
        items.insert(ring.chunk_key(h.last), encode(&*chunk)?);
        items.insert(ring.head_key(), encode(&*h)?);
    }
    s.set(Area::Local, items)
        .await
        .map_err(AuditError::Storage)?;
    for (ring, t) in [(Ring::Effects, effects), (Ring::Refusals, refusals)] {
        if let Some(t) = t {
            tail.put(ring, t);
        }
    }
    if !drops.is_empty() {
        let refs: Vec<&str> = drops.iter().map(String::as_str).collect();
        let _ = s.remove(Area::Local, &refs).await;
    }
    Ok(())
}

async fn read_ring<S: Storage>(s: &S, ring: Ring) -> Result<Vec<Entry>, AuditError> {
    let h = head(s, ring, Missing::Unused).await?;
    let keys: Vec<String> = (h.first..=h.last).map(|n| ring.chunk_key(n)).collect();
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let got = s
        .get(Area::Local, &refs)
        .await
        .map_err(AuditError::Storage)?;
    Ok(keys.iter().flat_map(|k| decode_chunk(got.get(k))).collect())
}

/// The whole log, both rings, newest first.
pub async fn read_all<S: Storage>(s: &S) -> Result<Vec<Entry>, AuditError> {
    let mut out = read_ring(s, Ring::Effects).await?;
    out.extend(read_ring(s, Ring::Refusals).await?);
    // Stable: entries of one ring keep their order on equal times.
    out.reverse();
    crate::sort::sort_by(&mut out, |a, b| b.at.total_cmp(&a.at));
    Ok(out)
}

/// The write `caller` made on `target` that was recorded as "ok" (or INTERRUPTED: it landed) at
/// `at`, if the log still holds it: what the popup's Undo names. Both are in the effects ring
/// only.
pub async fn find_effect<S: Storage>(
    s: &S,
    caller: &str,
    at: f64,
    target: &str,
) -> Result<Option<Entry>, AuditError> {
    Ok(read_ring(s, Ring::Effects).await?.into_iter().find(|e| {
        e.at.total_cmp(&at).is_eq()
            && e.caller == caller
            && (e.result == "ok" || e.result == INTERRUPTED)
            && e.target.as_deref() == Some(target)
    }))
}

/// "No write in progress": a value, not a removal, so it can ride in the finalizing `set`.
fn cleared() -> Value {
    Value::Object(Map::new())
}

/// Finalizes the write in progress: appends its entry (with its result) and clears the pending
/// slot in one atomic `set`.
pub async fn finalize<S: Storage>(s: &S, entry: &Entry, tail: &Tail) -> Result<(), AuditError> {
    finalize_all(s, std::slice::from_ref(entry), tail).await
}

/// [`finalize`] of a write whose pending slot held several entries (see [`Journaled::also`]):
/// all appended, in order, and the slot cleared, in one atomic `set`.
pub async fn finalize_all<S: Storage>(
    s: &S,
    entries: &[Entry],
    tail: &Tail,
) -> Result<(), AuditError> {
    let mut items = Map::new();
    items.insert(PENDING_KEY.to_owned(), cleared());
    append_all_with(s, entries, items, tail).await
}

/// Every entry dated from `since` on: pending in the write-ahead slot, or in the log. A review's
/// stub left by a stopped worker whose write recorded itself (the same caller and arguments,
/// dated from the decision on) is not audited again as interrupted. Read once for all the
/// stubs, before any is audited: read again per stub, it found the entry just written for an
/// earlier stub of the same write.
pub async fn recorded_since<S: Storage>(s: &S, since: f64) -> Vec<Entry> {
    let mut found: Vec<Entry> = match s.get(Area::Local, &[PENDING_KEY]).await {
        Ok(got) => got.get(PENDING_KEY).map_or_else(Vec::new, |v| {
            let all: Vec<&Value> = v.as_array().map_or_else(|| vec![v], |a| a.iter().collect());
            all.into_iter()
                .filter_map(|e| <Entry as serde::Deserialize>::deserialize(e).ok())
                .filter(|e| e.at >= since)
                .collect()
        }),
        Err(_) => Vec::new(),
    };
    if let Ok(log) = read_all(s).await {
        found.extend(log.into_iter().filter(|e| e.at >= since));
    }
    found
}

/// At worker start (or before the first write of a worker): a pending entry left by a worker
/// that stopped mid-write is finalized as [`INTERRUPTED`] (a slot holding several, a list, has
/// each finalized so, in one `set`). Returns them (none if there was none).
pub async fn finalize_interrupted<S: Storage>(
    s: &S,
    tail: &Tail,
) -> Result<Vec<Entry>, AuditError> {
    let got = s
        .get(Area::Local, &[PENDING_KEY])
        .await
        .map_err(AuditError::Storage)?;
    let Some(v) = got.get(PENDING_KEY) else {
        return Ok(Vec::new());
    };
    let stored: Vec<&Value> = match v.as_array() {
        // Bounded: more than a ring holds would only evict itself.
        Some(a) => a.iter().take(MAX_ENTRIES).collect(),
        None => vec![v],
    };
    let mut left: Vec<Entry> = stored
        .into_iter()
        .filter_map(|e| <Entry as serde::Deserialize>::deserialize(e).ok())
        .collect();
    if left.is_empty() {
        // Cleared, or damaged beyond reading: nothing to record.
        if v != &cleared() {
            let mut items = Map::new();
            items.insert(PENDING_KEY.to_owned(), cleared());
            s.set(Area::Local, items)
                .await
                .map_err(AuditError::Storage)?;
        }
        return Ok(left);
    }
    for e in &mut left {
        e.result = INTERRUPTED.to_owned();
    }
    finalize_all(s, &left, tail).await?;
    Ok(left)
}

/// Tries in progress (`try_script`), by a key of this worker's, each stored before its code runs.
/// Tries are not serialized (one at a time per tab, any number of tabs), so each has its own slot
/// in one object; the provider holds the same object and rewrites it under the audit lock.
pub const PENDING_TRIES_KEY: &str = "audit/pendingTries";

/// The tries in progress: what [`PENDING_TRIES_KEY`] holds.
pub type PendingTries = crate::vec_map::VecMap<u64, Entry>;

fn encode_tries(tries: &PendingTries) -> Result<Value, AuditError> {
    let map: Map<String, Value> = tries
        .iter()
        .map(|(k, e)| Ok((k.to_string(), serde_json::to_value(e)?)))
        .collect::<Result<_, serde_json::Error>>()
        .map_err(|e| AuditError::Encode(e.to_string()))?;
    Ok(Value::Object(map))
}

/// Records a try as in progress before its code runs: a worker stopped while it runs (the
/// browser quit, the extension reloaded) leaves the entry, and the next worker records it as
/// [`INTERRUPTED`], so no try runs code in a page without its record. On `Err` nothing is
/// recorded and the try must not run.
pub async fn begin_try<S: Storage>(
    s: &S,
    tries: &mut PendingTries,
    key: u64,
    entry: &Entry,
) -> Result<(), AuditError> {
    let mut pending = entry.clone();
    pending.result = PENDING.to_owned();
    tries.insert(key, pending);
    let stored = match encode_tries(tries) {
        Ok(v) => {
            let mut items = Map::new();
            items.insert(PENDING_TRIES_KEY.to_owned(), v);
            s.set(Area::Local, items).await.map_err(AuditError::Storage)
        }
        Err(e) => Err(e),
    };
    if stored.is_err() {
        tries.remove(&key);
    }
    stored
}

/// Takes back a try stored as in progress that has not run (it found its tab busy and waits
/// for its turn there): its slot is cleared, nothing is appended. Cleared here even if the
/// `set` fails, so the next `set` of the slots leaves it out too.
pub async fn withdraw_try<S: Storage>(
    s: &S,
    tries: &mut PendingTries,
    key: u64,
) -> Result<(), AuditError> {
    if tries.remove(&key).is_none() {
        return Ok(());
    }
    let v = encode_tries(tries)?;
    let mut items = Map::new();
    items.insert(PENDING_TRIES_KEY.to_owned(), v);
    s.set(Area::Local, items).await.map_err(AuditError::Storage)
}

/// Appends a try's entry and clears its slot in one atomic `set`. A failure leaves the slot
/// (in storage and here), so the next worker records the try as [`INTERRUPTED`].
pub async fn finish_try<S: Storage>(
    s: &S,
    tries: &mut PendingTries,
    key: u64,
    entry: &Entry,
    tail: &Tail,
) -> Result<(), AuditError> {
    let Some(was) = tries.remove(&key) else {
        return append(s, entry, tail).await;
    };
    let done = match encode_tries(tries) {
        Ok(v) => {
            let mut items = Map::new();
            items.insert(PENDING_TRIES_KEY.to_owned(), v);
            append_with(s, entry, items, tail).await
        }
        Err(e) => Err(e),
    };
    if done.is_err() {
        tries.insert(key, was);
    }
    done
}

/// At worker start (or before this worker's first try): each try a previous worker left in
/// progress is recorded as [`INTERRUPTED`], one at a time, its slot cleared in the same `set`
/// that records it (so a stop half-way records none twice). A slot that cannot be read is
/// dropped. Returns how many were recorded.
pub async fn finalize_interrupted_tries<S: Storage>(
    s: &S,
    tail: &Tail,
) -> Result<usize, AuditError> {
    let got = s
        .get(Area::Local, &[PENDING_TRIES_KEY])
        .await
        .map_err(AuditError::Storage)?;
    let Some(stored) = got.get(PENDING_TRIES_KEY) else {
        return Ok(0);
    };
    let mut left: Vec<Entry> = stored
        .as_object()
        .map(|m| {
            m.values()
                .filter_map(|e| Entry::deserialize(e).ok())
                .collect()
        })
        .unwrap_or_default();
    if left.is_empty() {
        if stored != &cleared() {
            let mut items = Map::new();
            items.insert(PENDING_TRIES_KEY.to_owned(), cleared());
            s.set(Area::Local, items)
                .await
                .map_err(AuditError::Storage)?;
        }
        return Ok(0);
    }
    let n = left.len();
    // Oldest first, so the log keeps their order.
    crate::sort::sort_by(&mut left, |a, b| b.at.total_cmp(&a.at));
    while let Some(mut e) = left.pop() {
        e.result = INTERRUPTED.to_owned();
        let rest: PendingTries = left
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, e)| (i as u64, e))
            .collect();
        let mut items = Map::new();
        items.insert(PENDING_TRIES_KEY.to_owned(), encode_tries(&rest)?);
        append_with(s, &e, items, tail).await?;
    }
    Ok(n)
}

/// Storage that stores a pending audit entry in the first `set` of `chrome.storage.local` made
/// through it — the `set` that stores the script — so the record of a write is exactly as
/// durable as the write. The entry names the script that `set` writes when it had no target
/// yet (a create).
pub struct Journaled<'a, E> {
    inner: &'a E,
    pending: std::cell::RefCell<Option<Entry>>,
    /// More entries stored pending beside `pending` (scripts its `set` deletes for good); the
    /// slot then holds a list, `pending` first.
    also: std::cell::RefCell<Vec<Entry>>,
    gate: std::cell::RefCell<Option<oneshot::Receiver<()>>>,
    slot: std::cell::RefCell<Option<oneshot::Receiver<Result<(), String>>>>,
    /// Asked last, before the first change: may the write still go out?
    still: std::cell::RefCell<Option<Check<'a>>>,
    /// Why no change may go out (the rate slot was not recorded, or `still` said no): every
    /// change answers it.
    refused: std::cell::RefCell<Option<String>>,
    /// The files a review fetched and showed: the write's fetches are answered from these, and
    /// the network is not asked.
    serving: Option<std::rc::Rc<Reviewed>>,
}

/// A last check before a write's first change (`Journaled::before_first_change`).
pub type Check<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + 'a>>;

impl<'a, E> Journaled<'a, E> {
    /// `None` journals nothing (a write by the user from the extension's pages): one type for
    /// both keeps the store's write functions instantiated once in the wasm.
    pub fn new(inner: &'a E, entry: Option<Entry>) -> Self {
        Journaled {
            inner,
            pending: std::cell::RefCell::new(entry),
            also: std::cell::RefCell::new(Vec::new()),
            gate: std::cell::RefCell::new(None),
            slot: std::cell::RefCell::new(None),
            still: std::cell::RefCell::new(None),
            refused: std::cell::RefCell::new(None),
            serving: None,
        }
    }

    /// The write takes the files its review fetched and showed (`None`: it was not reviewed, and
    /// fetches what it needs).
    #[must_use]
    pub fn serving(self, reviewed: Option<std::rc::Rc<Reviewed>>) -> Self {
        Journaled {
            serving: reviewed,
            ..self
        }
    }

    /// The first `set` or `remove` waits until `gate` is told (or dropped): a step the caller
    /// runs beside the write's reads (the registry's "not synced" flag). The store's changes
    /// are made one after another, so the first one's wait covers the rest.
    #[must_use]
    pub fn after(self, gate: oneshot::Receiver<()>) -> Self {
        *self.gate.borrow_mut() = Some(gate);
        self
    }

    /// The first change also waits for the write's rate slot to be recorded, which the caller
    /// stores beside the write's reads; a slot that was not recorded (`Err`, or the sender
    /// dropped) refuses that change and every later one, with its reason: fail closed.
    #[must_use]
    pub fn after_slot(self, slot: Option<oneshot::Receiver<Result<(), String>>>) -> Self {
        *self.slot.borrow_mut() = slot;
        self
    }

    /// The first change is also preceded by `check` (after the gate and the slot): the write's
    /// reads and `@require` fetches may take 30 s, in which the user may have withdrawn what
    /// let it begin. Its `Err` refuses that change and every later one.
    #[must_use]
    pub fn before_first_change(self, check: Option<Check<'a>>) -> Self {
        *self.still.borrow_mut() = check;
        self
    }

    /// Adds entries to the pending slot of the first `set` (which must not have gone out yet):
    /// what that `set` does besides the write — the scripts a delete pushes out of the trash
    /// for good. Finalized with the write's own (`Provider::audit_final_all`, after
    /// [`Journaled::added`]). Without a pending entry (nothing journaled) they are dropped.
    pub fn also(&self, entries: Vec<Entry>) {
        if self.pending.borrow().is_some() {
            self.also.borrow_mut().extend(entries);
        }
    }

    /// The entries [`Journaled::also`] added, with the result their `set` gave them.
    pub fn added(&self) -> Vec<Entry> {
        self.also.borrow().clone()
    }

    /// Whether changes may go out: waits for what the first change waits for.
    pub async fn cleared(&self) -> Result<(), EnvError> {
        self.gate().await
    }

    async fn gate(&self) -> Result<(), EnvError> {
        let gate = self.gate.borrow_mut().take();
        if let Some(g) = gate {
            // Told or dropped, the step is over either way.
            let _ = g.await;
        }
        let slot = self.slot.borrow_mut().take();
        if let Some(s) = slot {
            let refused = match s.await {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e),
                Err(_) => Some("the write's rate slot was not recorded".to_owned()),
            };
            *self.refused.borrow_mut() = refused;
        }
        let still = self.still.borrow_mut().take();
        if let Some(check) = still {
            if self.refused.borrow().is_none() {
                if let Err(e) = check.await {
                    *self.refused.borrow_mut() = Some(e);
                }
            }
        }
        match self.refused.borrow().as_ref() {
            Some(e) => Err(EnvError(e.clone())),
            None => Ok(()),
        }
    }
}

impl<E: Storage> Storage for Journaled<'_, E> {
    async fn get(&self, area: Area, keys: &[&str]) -> Result<Map<String, Value>, EnvError> {
        self.inner.get(area, keys).await
    }

    async fn bytes_in_use(&self, area: Area, keys: Option<&[&str]>) -> Result<usize, EnvError> {
        self.inner.bytes_in_use(area, keys).await
    }

    async fn set(&self, area: Area, mut items: Map<String, Value>) -> Result<(), EnvError> {
        self.gate().await?;
        let pending = if area == Area::Local {
            self.pending.borrow_mut().take()
        } else {
            None
        };
        if let Some(mut e) = pending {
            if e.target.is_none() {
                e.target = items
                    .keys()
                    .find_map(|k| k.strip_prefix("script/"))
                    .map(str::to_owned);
            }
            // The revision this `set` stores for the script: a write cut off before its entry is
            // finalized landed all the same (this `set` holds both), and its INTERRUPTED entry
            // then says which version it made, for Undo. Not a restore's: whether it brought
            // the script back from the trash (undone by a delete) is known only at its end.
            // A delete's `set` holds the trash copy instead (R15: an interrupted delete had no
            // Undo though it landed).
            if e.revision.is_none() && e.tool != "restore_script" {
                e.revision = e.target.as_deref().and_then(|t| {
                    items
                        .get(&format!("script/{t}"))
                        .or_else(|| {
                            (e.tool == "delete_script")
                                .then(|| items.get(&format!("trash/{t}")))
                                .flatten()
                                .and_then(|x| x.get("record"))
                        })
                        .and_then(|r| r.get("revision"))
                        .and_then(Value::as_u64)
                });
            }
            e.result = PENDING.to_owned();
            let also = self.also.borrow();
            let v = if also.is_empty() {
                serde_json::to_value(&e)
            } else {
                let all: Vec<Entry> = std::iter::once(e)
                    .chain(also.iter().map(|a| Entry {
                        result: PENDING.to_owned(),
                        ..a.clone()
                    }))
                    .collect();
                serde_json::to_value(&all)
            }
            .map_err(|x| EnvError(x.to_string()))?;
            items.insert(PENDING_KEY.to_owned(), v);
        }
        self.inner.set(area, items).await
    }

    async fn remove(&self, area: Area, keys: &[&str]) -> Result<(), EnvError> {
        self.gate().await?;
        self.inner.remove(area, keys).await
    }

    async fn get_all(&self, area: Area) -> Result<Map<String, Value>, EnvError> {
        self.inner.get_all(area).await
    }

    async fn keys(&self, area: Area) -> Result<Vec<String>, EnvError> {
        self.inner.keys(area).await
    }
}

/// A write fetches its `@require`/`@resource` files through the same env (`gm::asset_store`).
impl<E: Http> Http for Journaled<'_, E> {
    async fn fetch(&self, req: &HttpRequest, max_body: usize) -> Result<HttpResponse, FetchError> {
        match &self.serving {
            Some(reviewed) => reviewed.serve(req),
            None => self.inner.fetch(req, max_body).await,
        }
    }
    async fn fetch_progress(
        &self,
        req: &HttpRequest,
        max_body: usize,
        progress: &dyn Fn(u64, Option<u64>) -> crate::env::Hold,
        head: &dyn Fn(&HttpResponse),
    ) -> Result<HttpResponse, FetchError> {
        if let Some(reviewed) = &self.serving {
            return reviewed.serve(req);
        }
        self.inner
            .fetch_progress(req, max_body, progress, head)
            .await
    }
}

impl<E: Clock> Clock for Journaled<'_, E> {
    fn now_ms(&self) -> f64 {
        self.inner.now_ms()
    }
}

impl<E: Ids> Ids for Journaled<'_, E> {
    fn new_uuid(&self) -> String {
        self.inner.new_uuid()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::memory::MemoryEnv;
    use futures::executor::block_on;

    /// R12: the log stays within its share of the storage however an agent names its
    /// scripts: the biggest entry either ring can hold, a thousand times each, as Chrome
    /// counts the bytes (the chunk keys and heads besides), is within the allowance.
    #[test]
    fn a_full_log_stays_within_its_allowance_whatever_the_names() {
        use crate::scripts::quota::{chrome_json_len, AUDIT_ALLOWANCE_BYTES};
        for name in ["<".repeat(300), "\u{202e}".repeat(300), "字".repeat(300)] {
            let kept = kept_name(&name);
            assert!(chrome_json_len(&Value::String(kept.clone())) <= MAX_NAME_STORED_BYTES + 2);
            assert!(kept.ends_with('…'), "{kept}");
            let effect = Entry {
                at: 1_700_000_000_000.123,
                tool: "set_script_enabled".into(),
                caller: "a".repeat(32),
                result: "INTERRUPTED".into(),
                target: Some("00000000-0000-4000-8000-000000000001".into()),
                digest: "f".repeat(64),
                unchanged: true,
                from_trash: true,
                revision: Some(u64::from(u32::MAX)),
                purged: None,
                name: Some(kept),
                count: Some(u64::from(u32::MAX)),
            };
            // A purge's entry names its script in `purged`, not `name`.
            let purge = Entry {
                purged: Some(Purged::new(&name, "deletedForever")),
                name: None,
                ..effect.clone()
            };
            let refusal = Entry {
                result: "REVIEW_INTERRUPTED".into(),
                purged: None,
                name: None,
                count: None,
                revision: None,
                ..effect.clone()
            };
            let size = |e: &Entry| chrome_json_len(&serde_json::to_value(e).unwrap()) + 1;
            let ring = |e: &Entry| MAX_ENTRIES * size(e) + MAX_CHUNKS as usize * 32;
            let effects = ring(&effect).max(ring(&purge));
            assert!(
                effects + ring(&refusal) <= AUDIT_ALLOWANCE_BYTES,
                "{effects} + {} bytes",
                ring(&refusal)
            );
        }
    }

    fn entry(i: usize) -> Entry {
        Entry {
            at: i as f64,
            tool: "write_script".into(),
            caller: "a".repeat(32),
            result: "ok".into(),
            target: None,
            digest: format!("{i:064x}"),
            unchanged: false,
            from_trash: false,
            revision: None,
            purged: None,
            name: None,
            count: None,
        }
    }

    /// Tries a stopped worker left in progress: each recorded once, oldest first, as
    /// INTERRUPTED; a slot that cannot be read is dropped; a finished try leaves the others.
    #[test]
    fn tries_left_in_progress_are_recorded_once_as_interrupted() {
        let env = MemoryEnv::new();
        let tail = Tail::default();
        let mut tries = PendingTries::default();
        let try_at = |i: usize| Entry {
            tool: "try_script".into(),
            ..entry(i)
        };
        for i in [3, 1, 2] {
            block_on(begin_try(&env, &mut tries, i as u64, &try_at(i))).unwrap();
        }
        block_on(finish_try(&env, &mut tries, 2, &try_at(2), &tail)).unwrap();
        let mut stored = env.dump(Area::Local)[PENDING_TRIES_KEY].clone();
        stored["9"] = serde_json::json!({"tool": 5});
        let mut items = Map::new();
        items.insert(PENDING_TRIES_KEY.into(), stored);
        block_on(env.set(Area::Local, items)).unwrap();
        let fresh = Tail::default();
        assert_eq!(
            block_on(finalize_interrupted_tries(&env, &fresh)).unwrap(),
            2
        );
        let log = block_on(read_all(&env)).unwrap();
        let got: Vec<(f64, &str)> = log.iter().map(|e| (e.at, e.result.as_str())).collect();
        assert_eq!(got, [(3.0, INTERRUPTED), (2.0, "ok"), (1.0, INTERRUPTED)]);
        assert_eq!(env.dump(Area::Local)[PENDING_TRIES_KEY], cleared());
        assert_eq!(
            block_on(finalize_interrupted_tries(&env, &fresh)).unwrap(),
            0
        );
        assert_eq!(block_on(read_all(&env)).unwrap().len(), 3);
        // Not an object at all: cleared, nothing recorded.
        let mut items = Map::new();
        items.insert(PENDING_TRIES_KEY.into(), serde_json::json!("x"));
        block_on(env.set(Area::Local, items)).unwrap();
        assert_eq!(
            block_on(finalize_interrupted_tries(&env, &fresh)).unwrap(),
            0
        );
        assert_eq!(env.dump(Area::Local)[PENDING_TRIES_KEY], cleared());
    }

    #[test]
    fn appends_newest_first_and_stays_bounded() {
        let env = MemoryEnv::new();
        for i in 0..(MAX_ENTRIES + 250) {
            block_on(append(&env, &entry(i), &Tail::default())).unwrap();
        }
        let all = block_on(read_all(&env)).unwrap();
        assert!(
            all.len() <= MAX_ENTRIES && all.len() > MAX_ENTRIES - CHUNK,
            "{}",
            all.len()
        );
        assert_eq!(all[0].at, (MAX_ENTRIES + 249) as f64);
        assert!(all.windows(2).all(|w| w[0].at > w[1].at));
        let chunks = env
            .dump(Area::Local)
            .keys()
            .filter(|k| k.starts_with("audit/") && *k != HEAD_KEY)
            .count();
        assert!(chunks as u64 <= MAX_CHUNKS);
    }

    #[test]
    fn damaged_log_is_read_around() {
        let env = MemoryEnv::new();
        block_on(append(&env, &entry(1), &Tail::default())).unwrap();
        block_on(append(&env, &entry(2), &Tail::default())).unwrap();
        env.areas
            .borrow_mut()
            .get_mut(&Area::Local)
            .unwrap()
            .get_mut("audit/0")
            .unwrap()
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!(7));
        assert_eq!(block_on(read_all(&env)).unwrap().len(), 2);
        env.areas
            .borrow_mut()
            .get_mut(&Area::Local)
            .unwrap()
            .insert(HEAD_KEY.into(), serde_json::json!("junk"));
        assert_eq!(block_on(read_all(&env)).unwrap().len(), 2);
        block_on(append(&env, &entry(3), &Tail::default())).unwrap();
        assert_eq!(block_on(read_all(&env)).unwrap()[0].at, 3.0);
    }

    fn refusal(i: usize) -> Entry {
        Entry {
            result: "INVALID_ARGUMENTS".into(),
            ..entry(i)
        }
    }

    #[test]
    fn a_damaged_or_missing_head_is_found_again_from_the_chunks_and_nothing_is_overwritten() {
        for junk in [
            Some(serde_json::json!({ "first": "x", "last": -1 })),
            Some(serde_json::json!({ "first": 0, "last": 1000 })),
            Some(serde_json::json!("junk")),
            None, // removed by hand: the chunks are still there
        ] {
            let env = MemoryEnv::new();
            for i in 0..25 {
                block_on(append(&env, &entry(i), &Tail::default())).unwrap();
                block_on(append(&env, &refusal(1000 + i), &Tail::default())).unwrap();
            }
            {
                let mut areas = env.areas.borrow_mut();
                let local = areas.get_mut(&Area::Local).unwrap();
                match &junk {
                    Some(j) => local.insert(HEAD_KEY.into(), j.clone()),
                    None => local.remove(HEAD_KEY),
                };
            }
            // A read without a head reads chunk 0 alone (an unused ring has no head); the append
            // below finds the head again either way.
            let shown = if junk.is_some() { 50 } else { 10 + 25 };
            let junk = junk.unwrap_or(Value::Null);
            assert_eq!(block_on(read_all(&env)).unwrap().len(), shown, "{junk}");
            block_on(append(&env, &entry(25), &Tail::default())).unwrap();
            let all = block_on(read_all(&env)).unwrap();
            let ok: Vec<f64> = all
                .iter()
                .filter(|e| e.result == "ok")
                .map(|e| e.at)
                .collect();
            assert!(
                ok.iter().rev().copied().eq((0..=25).map(|i| i as f64)),
                "{junk}: {ok:?}"
            );
            assert_eq!(all.iter().filter(|e| e.result != "ok").count(), 25);
            assert_eq!(
                env.dump(Area::Local)[HEAD_KEY],
                serde_json::json!({ "first": 0, "last": 2 })
            );
        }
    }

    /// A ring as the log stored it with chunks of 100: `chunks` chunks, the newest holding
    /// `newest` entries, the others 100 (entries numbered from 0, oldest first).
    fn plant_ring_of_hundreds(env: &MemoryEnv, chunks: u64, newest: usize) -> usize {
        let mut at = 0;
        let mut area = env.areas.borrow_mut();
        let local = area.entry(Area::Local).or_default();
        for n in 0..chunks {
            let len = if n + 1 == chunks { newest } else { 100 };
            let chunk: Vec<Entry> = (at..at + len).map(entry).collect();
            at += len;
            local.insert(format!("audit/{n}"), serde_json::to_value(chunk).unwrap());
        }
        local.insert(
            HEAD_KEY.into(),
            serde_json::json!({ "first": 0, "last": chunks - 1 }),
        );
        at
    }

    #[test]
    fn an_append_to_a_log_of_hundred_entry_chunks_rewrites_none_of_them() {
        let env = MemoryEnv::new();
        let planted = plant_ring_of_hundreds(&env, 4, 37);
        block_on(append(&env, &entry(planted), &Tail::default())).unwrap();
        // Only the new chunk and the head: the 37-entry chunk is left as it is.
        let (_, keys) = env.storage_log.borrow().last().cloned().unwrap();
        assert_eq!(keys, ["audit/4", HEAD_KEY]);
        let all = block_on(read_all(&env)).unwrap();
        assert_eq!(all.len(), planted + 1);
        assert!(all
            .iter()
            .rev()
            .map(|e| e.at)
            .eq((0..=planted).map(|i| i as f64)));
    }

    #[test]
    fn a_log_of_hundred_entry_chunks_leaves_the_ring_as_it_moves_on() {
        let env = MemoryEnv::new();
        // The old bound: 10 chunks of 100.
        let planted = plant_ring_of_hundreds(&env, 10, 100);
        let tail = Tail::default();
        for i in planted..planted + 2 * MAX_ENTRIES {
            block_on(append(&env, &entry(i), &tail)).unwrap();
            // At most the 10 old chunks and 90 new ones.
            if i % 50 == 0 {
                let n = block_on(read_all(&env)).unwrap().len();
                assert!(n <= 1_900, "{n}");
            }
            // Each append's `set` (a chunk and the head) writes a chunk of at most CHUNK.
            let keys = env.storage_log.borrow().last().cloned().unwrap().1;
            let keys = if keys.len() == 2 {
                keys
            } else {
                let log = env.storage_log.borrow();
                log[log.len() - 2].1.clone()
            };
            let chunk = env.dump(Area::Local)[&keys[0]]
                .as_array()
                .map_or(0, Vec::len);
            assert!(chunk <= CHUNK, "{keys:?} holds {chunk}");
        }
        let all = block_on(read_all(&env)).unwrap();
        assert!(
            all.len() <= MAX_ENTRIES && all.len() > MAX_ENTRIES - CHUNK,
            "{}",
            all.len()
        );
        assert_eq!(all[0].at, (planted + 2 * MAX_ENTRIES - 1) as f64);
    }

    #[test]
    fn refusals_never_evict_the_record_of_a_write() {
        let env = MemoryEnv::new();
        block_on(append(&env, &entry(0), &Tail::default())).unwrap();
        for i in 1..=1200 {
            block_on(append(&env, &refusal(i), &Tail::default())).unwrap();
        }
        let all = block_on(read_all(&env)).unwrap();
        assert!(
            all.iter().any(|e| e.result == "ok" && e.at == 0.0),
            "the write survived"
        );
        let refused = all.iter().filter(|e| e.result != "ok").count();
        assert!(
            refused <= MAX_ENTRIES && refused > MAX_ENTRIES - CHUNK,
            "{refused}"
        );
        // Merged newest first across both rings.
        assert_eq!(all[0].at, 1200.0);
        assert_eq!(all.last().unwrap().at, 0.0);
        assert!(all.windows(2).all(|w| w[0].at >= w[1].at));
        // Interrupted writes count as effects too.
        assert_eq!(
            Ring::of(&Entry {
                result: INTERRUPTED.into(),
                ..entry(1)
            }),
            Ring::Effects
        );
    }

    #[test]
    fn a_journaled_write_leaves_a_pending_entry_that_a_restart_finalizes() {
        use crate::env::Storage;
        let env = MemoryEnv::new();
        // The script's own set carries the pending entry, naming the script it writes.
        let j = Journaled::new(&env, Some(entry(5)));
        let mut items = Map::new();
        items.insert("script/u1".into(), serde_json::json!({"revision": 7}));
        items.insert("source/u1".into(), serde_json::json!("src"));
        block_on(j.set(Area::Local, items.clone())).unwrap();
        // A second set through the same journal adds nothing.
        block_on(j.set(Area::Local, Map::new())).unwrap();
        let stored = env.dump(Area::Local);
        assert_eq!(stored[PENDING_KEY]["result"], "PENDING");
        assert_eq!(stored[PENDING_KEY]["target"], "u1");
        // The worker stops here. The next one finalizes it once, with the revision the write
        // stored: the write landed, and Undo can name the version it made.
        let e = block_on(finalize_interrupted(&env, &Tail::default()))
            .unwrap()
            .remove(0);
        assert_eq!(
            (e.result.as_str(), e.target.as_deref(), e.revision),
            (INTERRUPTED, Some("u1"), Some(7))
        );
        assert_eq!(crate::by_hand::can_undo(&e), Ok(()));
        assert_eq!(
            block_on(find_effect(&env, &e.caller, e.at, "u1")).unwrap(),
            Some(e.clone())
        );
        assert_eq!(
            block_on(finalize_interrupted(&env, &Tail::default())).unwrap(),
            vec![]
        );
        let all = block_on(read_all(&env)).unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].result, INTERRUPTED);
        // A finished write clears the slot in the same set that records it.
        let j = Journaled::new(&env, Some(entry(6)));
        block_on(j.set(Area::Local, items.clone())).unwrap();
        block_on(finalize(&env, &entry(6), &Tail::default())).unwrap();
        assert_eq!(
            block_on(finalize_interrupted(&env, &Tail::default())).unwrap(),
            vec![]
        );
        assert_eq!(block_on(read_all(&env)).unwrap().len(), 2);
        // A damaged slot is cleared, never a panic.
        env.areas
            .borrow_mut()
            .get_mut(&Area::Local)
            .unwrap()
            .insert(PENDING_KEY.into(), serde_json::json!([1, 2]));
        assert_eq!(
            block_on(finalize_interrupted(&env, &Tail::default())).unwrap(),
            vec![]
        );
        assert_eq!(env.dump(Area::Local)[PENDING_KEY], serde_json::json!({}));
        // A restore's does not say: it may have brought the script back from the trash.
        let r = Journaled::new(
            &env,
            Some(Entry {
                tool: "restore_script".into(),
                ..entry(6)
            }),
        );
        block_on(r.set(Area::Local, items)).unwrap();
        let e = block_on(finalize_interrupted(&env, &Tail::default()))
            .unwrap()
            .remove(0);
        assert_eq!(e.revision, None);
        assert!(crate::by_hand::can_undo(&e).is_err());
    }

    /// A `set` that deletes scripts for good besides its write stores an entry for each in the
    /// same pending slot; a stop after it leaves all of them, recorded INTERRUPTED in order,
    /// and a finished one appends all of them in the one `set` that clears the slot, across a
    /// chunk's end.
    #[test]
    fn entries_added_to_a_journaled_write_are_pending_and_settled_with_it() {
        use crate::env::Storage;
        let env = MemoryEnv::new();
        for i in 0..8 {
            block_on(append(&env, &entry(i), &Tail::default())).unwrap();
        }
        let j = Journaled::new(&env, Some(entry(10)));
        j.also(vec![entry(11), entry(12), entry(13)]);
        block_on(j.set(Area::Local, Map::new())).unwrap();
        let stored = env.dump(Area::Local);
        assert_eq!(stored[PENDING_KEY].as_array().map(Vec::len), Some(4));
        let left = block_on(finalize_interrupted(&env, &Tail::default())).unwrap();
        let at: Vec<f64> = left.iter().map(|e| e.at).collect();
        assert_eq!(at, [10.0, 11.0, 12.0, 13.0]);
        let all = block_on(read_all(&env)).unwrap();
        assert_eq!(all.len(), 12);
        assert!(all[..4].iter().all(|e| e.result == INTERRUPTED));
        assert_eq!(env.dump(Area::Local)[PENDING_KEY], serde_json::json!({}));
        // Finished: every one appended, the slot cleared.
        let tail = Tail::default();
        let j = Journaled::new(&env, Some(entry(20)));
        j.also(vec![entry(21)]);
        block_on(j.set(Area::Local, Map::new())).unwrap();
        let mut done = vec![entry(20)];
        done.extend(j.added());
        block_on(finalize_all(&env, &done, &tail)).unwrap();
        assert!(block_on(finalize_interrupted(&env, &tail))
            .unwrap()
            .is_empty());
        let all = block_on(read_all(&env)).unwrap();
        assert_eq!(all.len(), 14);
        assert_eq!((all[0].at, all[1].at), (21.0, 20.0));
        // Nothing journaled: nothing added.
        let j = Journaled::new(&env, None);
        j.also(vec![entry(30)]);
        assert!(j.added().is_empty());
    }
}
