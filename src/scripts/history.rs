//! Revision history: every change to a script keeps the version it replaced (record and source)
//! under `history/<uuid>`, in the same atomic `storage.set` as the change itself, so a version
//! is never lost between the write and its history.
//!
//! Bounded three ways, the oldest revision dropped first: [`MAX_REVISIONS`] per script,
//! [`MAX_SCRIPT_BYTES`] of sources per script, and [`MAX_TOTAL_BYTES`] across all scripts
//! (tracked in `history/budget`, one number per script, so the bound costs one small key per
//! write; past it the script with the most history loses its oldest revision).
//!
//! Decoding is lenient: a revision that does not decode, or whose source does not hash to its
//! recorded sha256, is reported and skipped; the script itself is never touched by it.

use super::record::ScriptRecord;
use crate::env::{Area, Storage};
use crate::guard::digest::sha256_hex;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

pub const MAX_REVISIONS: usize = 20;
pub const MAX_SCRIPT_BYTES: usize = 1024 * 1024;
pub const MAX_TOTAL_BYTES: usize = 4 * 1024 * 1024;
pub const BUDGET_KEY: &str = "history/budget";

pub fn history_key(uuid: &str) -> String {
    format!("history/{uuid}")
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
    fn bytes(&self) -> usize {
        self.source.len()
    }

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

    fn bytes(&self) -> usize {
        self.revisions
            .iter()
            .fold(0usize, |n, r| n.saturating_add(r.bytes()))
    }

    fn value(&self) -> Value {
        json!({ "v": 1, "revisions": self.revisions })
    }
}

/// Lenient decoding of `history/<uuid>` (see the module docs). Never fails.
pub fn decode(uuid: &str, v: Option<&Value>) -> History {
    let mut h = History::default();
    let Some(v) = v else {
        return h;
    };
    let Some(items) = v.get("revisions").and_then(Value::as_array) else {
        h.problems
            .push("the history record is damaged (no list of revisions); it was skipped".into());
        return h;
    };
    for (i, item) in items.iter().enumerate() {
        match <Revision as serde::Deserialize>::deserialize(item) {
            Ok(r) if r.record.uuid != uuid => h
                .problems
                .push(format!("revision entry {i} names another script; skipped")),
            Ok(r) if sha256_hex(r.source.as_bytes()) != r.record.sha256 => {
                h.problems.push(format!(
                    "revision {} is damaged (its source does not match its sha256); skipped",
                    r.record.revision
                ))
            }
            Ok(r) => h.revisions.push(r),
            Err(e) => h
                .problems
                .push(format!("revision entry {i} is damaged ({e}); skipped")),
        }
    }
    h
}

pub async fn load<S: Storage>(s: &S, uuid: &str) -> Result<History, crate::env::EnvError> {
    let key = history_key(uuid);
    let got = s.get(Area::Local, &[&key]).await?;
    Ok(decode(uuid, got.get(&key)))
}

/// Appends `prev` and drops the oldest past the per-script bounds.
pub fn push(mut h: History, prev: Revision) -> History {
    h.revisions
        .retain(|r| r.record.revision != prev.record.revision);
    h.revisions.push(prev);
    while h.revisions.len() > MAX_REVISIONS
        || (h.revisions.len() > 1 && h.bytes() > MAX_SCRIPT_BYTES)
    {
        h.revisions.remove(0);
    }
    h
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

/// The items to add to the `set` that replaces `prev` (same uuid) with a new version: the
/// history with `prev` appended, trimmed, and the budget (with any other script's history that
/// the total bound trimmed). Reads storage; writes nothing.
pub async fn items_for<S: Storage>(
    s: &S,
    prev: Revision,
) -> Result<Map<String, Value>, crate::env::EnvError> {
    items_for_many(s, vec![prev]).await
}

/// [`items_for`] for several scripts replaced in one `set` (an import): one budget for all, so
/// no script's share is lost to another's.
pub async fn items_for_many<S: Storage>(
    s: &S,
    prevs: Vec<Revision>,
) -> Result<Map<String, Value>, crate::env::EnvError> {
    // The budget and the histories the new revisions go into, in one read.
    let mut keys = vec![BUDGET_KEY.to_owned()];
    for p in &prevs {
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
    got: &Map<String, Value>,
) -> Result<Map<String, Value>, crate::env::EnvError> {
    items_from(s, vec![prev], got).await
}

/// `got` holds the budget and every history of `prevs` as storage has them (a key missing:
/// not stored).
async fn items_from<S: Storage>(
    s: &S,
    prevs: Vec<Revision>,
    got: &Map<String, Value>,
) -> Result<Map<String, Value>, crate::env::EnvError> {
    let mut budget = decode_budget(got.get(BUDGET_KEY));
    let mut histories: Map<String, Value> = Map::new();
    let mut loaded: crate::vec_map::VecMap<String, History> = Default::default();
    for prev in prevs {
        let uuid = prev.record.uuid.clone();
        let h = match loaded.remove(&uuid) {
            Some(h) => h,
            None => decode(&uuid, got.get(&history_key(&uuid))),
        };
        let own = push(h, prev);
        budget.insert(uuid.clone(), json!(own.bytes()));
        loaded.insert(uuid, own);
    }
    // The total bound: the script with the most history gives up its oldest revision. Each
    // step removes a revision, so this ends within the number of revisions stored.
    let mut steps = 0usize;
    while budget_total(&budget) > MAX_TOTAL_BYTES && steps < 10_000 {
        steps = steps.saturating_add(1);
        let Some(biggest) = budget
            .iter()
            .max_by_key(|(_, v)| v.as_u64().unwrap_or(0))
            .map(|(k, _)| k.clone())
        else {
            break;
        };
        if !loaded.contains_key(&biggest) {
            let h = load(s, &biggest).await?;
            loaded.insert(biggest.clone(), h);
        }
        let Some(h) = loaded.get_mut(&biggest) else {
            break;
        };
        if h.revisions.is_empty() {
            budget.remove(&biggest);
        } else {
            h.revisions.remove(0);
            budget.insert(biggest.clone(), json!(h.bytes()));
        }
    }
    for (u, h) in loaded {
        histories.insert(history_key(&u), h.value());
    }
    histories.insert(BUDGET_KEY.to_owned(), Value::Object(budget));
    Ok(histories)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripts::metadata;

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

    #[test]
    fn at_most_twenty_revisions_oldest_dropped_first() {
        let mut h = History::default();
        for n in 1..=25 {
            h = push(h, rev(U, n, &format!("v{n}")));
        }
        assert_eq!(h.revisions.len(), MAX_REVISIONS);
        assert_eq!(h.revisions[0].record.revision, 6);
        assert_eq!(h.revisions[19].record.revision, 25);
    }

    #[test]
    fn the_byte_cap_drops_the_oldest_but_keeps_the_newest() {
        let big = "x".repeat(300 * 1024);
        let mut h = History::default();
        for n in 1..=5 {
            h = push(h, rev(U, n, &big));
        }
        // 3 × 300 KiB fit in 1 MiB, 4 do not.
        assert_eq!(
            h.revisions
                .iter()
                .map(|r| r.record.revision)
                .collect::<Vec<_>>(),
            vec![3, 4, 5]
        );
        let huge = "y".repeat(MAX_SCRIPT_BYTES + 1);
        let h = push(h, rev(U, 6, &huge));
        assert_eq!(
            h.revisions.len(),
            1,
            "a lone revision is kept even past the cap"
        );
    }

    #[test]
    fn damaged_entries_are_reported_and_skipped() {
        let good = rev(U, 1, "one");
        let mut tampered = serde_json::to_value(rev(U, 2, "two")).unwrap();
        tampered["source"] = json!("tampered");
        let other = rev("00000000-0000-4000-8000-000000000002", 3, "x");
        let v = json!({ "v": 1, "revisions": [good, tampered, 17, other] });
        let h = decode(U, Some(&v));
        assert_eq!(h.revisions.len(), 1);
        assert_eq!(h.revisions[0].record.revision, 1);
        assert_eq!(h.problems.len(), 3, "{:?}", h.problems);
        assert!(h.problems[0].contains("revision 2"));
        let h = decode(U, Some(&json!("garbage")));
        assert!(h.revisions.is_empty());
        assert_eq!(h.problems.len(), 1);
        assert_eq!(decode(U, None), History::default());
    }

    #[test]
    fn the_total_bound_trims_the_biggest_history_first() {
        use crate::env::memory::MemoryEnv;
        use futures::executor::block_on;
        let env = MemoryEnv::new();
        let other = "00000000-0000-4000-8000-000000000009";
        // Another script already holds almost the whole budget.
        let mut h = History::default();
        let chunk = "z".repeat(200 * 1024);
        for n in 1..=4 {
            h = push(h, rev(other, n, &chunk));
        }
        let mut items = Map::new();
        items.insert(history_key(other), h.value());
        items.insert(BUDGET_KEY.into(), json!({ other: MAX_TOTAL_BYTES - 1000 }));
        block_on(env.set(Area::Local, items)).unwrap();
        let out = block_on(items_for(&env, rev(U, 1, &"a".repeat(5000)))).unwrap();
        let budget = out[BUDGET_KEY].as_object().unwrap();
        assert!(budget_total(budget) <= MAX_TOTAL_BYTES);
        let trimmed = decode(other, out.get(&history_key(other)));
        assert_eq!(
            trimmed.revisions[0].record.revision, 2,
            "its oldest went first"
        );
        assert_eq!(decode(U, out.get(&history_key(U))).revisions.len(), 1);
    }
}
