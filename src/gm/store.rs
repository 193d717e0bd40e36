//! Scripts' values in `chrome.storage.local`: `values/<uuid>` (key → JSON text) and
//! `values/budget` (uuid → bytes, for the total bound). One [`ValueStore`] per worker serializes
//! the read-modify-write of every change, so two messages cannot lose each other's update; a
//! change and its budget are one `storage.set`. Values stay while the script is in the trash
//! (a restore brings them back) and go when it leaves it for good ([`purged_items`]). A change
//! that grows them stops at the agents' share of the storage (`quota::AGENT_LIMIT_BYTES`), as
//! Chrome counts it: a script may be an agent's, and the rest is the user's reserve.
//! Each change is numbered in the store's [`ChangeLog`] under the same lock, and a read for a
//! page ([`ValueStore::read`]) takes the lock too, so the cursor a page is given names exactly
//! the changes its values hold.

use std::cell::RefCell;

use futures::lock::Mutex;
use serde_json::{json, Map, Value};

use super::change_log::{ChangeLog, Page, Since};
use super::values::{self, Change, Op, Values};
use crate::env::{Area, Storage};
use crate::scripts::quota;

#[derive(Default)]
pub struct ValueStore {
    lock: Mutex<()>,
    log: RefCell<ChangeLog>,
}

/// Why values could not be read or saved; the script is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    Refused(values::ValueError),
    Storage(String),
    /// The change would take `chrome.storage.local` to `needed` bytes, past
    /// [`quota::AGENT_LIMIT_BYTES`]: the rest is the user's reserve and the audit's.
    StorageKept {
        needed: usize,
    },
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Refused(e) => write!(f, "{e}"),
            StoreError::Storage(e) => write!(f, "GM values could not be saved: {e}"),
            StoreError::StorageKept { needed } => write!(
                f,
                "GM_setValue refused: the extension's storage is nearly full (this change would \
                 bring it to {needed} bytes, past the {} its scripts' values may fill; the rest \
                 is kept for the user's own changes); nothing was changed",
                quota::AGENT_LIMIT_BYTES
            ),
        }
    }
}

/// A script's values as stored (empty when none or unreadable).
pub async fn load<S: Storage>(s: &S, uuid: &str) -> Result<Values, StoreError> {
    let key = values::storage_key(uuid);
    let got = s
        .get(Area::Local, &[key.as_str()])
        .await
        .map_err(|e| StoreError::Storage(e.0))?;
    Ok(Values::decode(got.get(&key)))
}

impl ValueStore {
    /// A store whose change numbers start at `epoch` (the worker's start, in ms:
    /// `change_log`).
    pub fn new(epoch: u64) -> Self {
        ValueStore {
            lock: Mutex::new(()),
            log: RefCell::new(ChangeLog::new(epoch)),
        }
    }

    /// The script's values for a page, with the cursor of the last change they hold.
    pub async fn read<S: Storage>(&self, s: &S, uuid: &str) -> Result<(Values, u64), StoreError> {
        let _guard = self.lock.lock().await;
        let v = load(s, uuid).await?;
        Ok((v, self.log.borrow().cursor(uuid)))
    }

    /// The cursor of the script's values as stored now.
    pub fn cursor(&self, uuid: &str) -> u64 {
        self.log.borrow().cursor(uuid)
    }

    /// What `page`, which last heard `cursor`, has to hear of the script's changes.
    pub fn since(&self, uuid: &str, cursor: Option<u64>, page: &Page) -> Since {
        self.log.borrow().since(uuid, cursor, page)
    }

    /// The script's values were replaced by other means (a backup restored, under
    /// [`ValueStore::hold`]): its pages read them whole. Returns the cursor after.
    pub fn replaced(&self, uuid: &str) -> u64 {
        self.log.borrow_mut().reset(uuid)
    }

    /// Holds every change of values off while the caller writes values itself (a backup
    /// restore), so neither loses the other's update of the budget.
    pub async fn hold(&self) -> futures::lock::MutexGuard<'_, ()> {
        self.lock.lock().await
    }

    /// Applies `op` to the values of `uuid` for no page in particular.
    pub async fn apply<S: Storage>(
        &self,
        s: &S,
        uuid: &str,
        op: &Op,
    ) -> Result<(Vec<Change>, Values), StoreError> {
        self.apply_from(s, uuid, Page::default(), op).await
    }

    /// Applies `op`, asked by `page`, to the values of `uuid`; returns the changes and the
    /// values after it. The changes are in the log once stored.
    pub async fn apply_from<S: Storage>(
        &self,
        s: &S,
        uuid: &str,
        page: Page,
        op: &Op,
    ) -> Result<(Vec<Change>, Values), StoreError> {
        let _guard = self.lock.lock().await;
        let key = values::storage_key(uuid);
        let got = s
            .get(Area::Local, &[key.as_str(), values::BUDGET_KEY])
            .await
            .map_err(|e| StoreError::Storage(e.0))?;
        let mut vals = Values::decode(got.get(&key));
        let mut budget = values::decode_budget(got.get(values::BUDGET_KEY));
        let changes = vals
            .apply(op, values::others_bytes(&budget, uuid))
            .map_err(StoreError::Refused)?;
        if changes.is_empty() {
            return Ok((changes, vals));
        }
        budget.insert(uuid.to_owned(), vals.bytes());
        let mut items = Map::new();
        items.insert(key, vals.encode());
        items.insert(values::BUDGET_KEY.to_owned(), json!(budget));
        let bytes = |m: &Map<String, Value>| {
            m.iter()
                .map(|(k, v)| quota::item_bytes(k, v))
                .fold(0, usize::saturating_add)
        };
        let (before, after) = (bytes(&got), bytes(&items));
        // Only a change that grows the values is measured (one call to Chrome).
        if after > before {
            let in_use = s
                .bytes_in_use(Area::Local, None)
                .await
                .map_err(|e| StoreError::Storage(e.0))?;
            quota::within_agent_limit(in_use, before, after)
                .map_err(|needed| StoreError::StorageKept { needed })?;
        }
        s.set(Area::Local, items)
            .await
            .map_err(|e| StoreError::Storage(e.0))?;
        self.log.borrow_mut().record(uuid, page, &changes);
        Ok((changes, vals))
    }
}

/// The keys to remove and the budget to set when `uuids` leave the trash for good.
pub async fn purged_items<S: Storage>(
    s: &S,
    uuids: &[String],
) -> Result<(Vec<String>, Value), String> {
    let got = s
        .get(Area::Local, &[values::BUDGET_KEY])
        .await
        .map_err(|e| e.0)?;
    let mut budget = values::decode_budget(got.get(values::BUDGET_KEY));
    for u in uuids {
        budget.remove(u);
    }
    Ok((
        uuids.iter().map(|u| values::storage_key(u)).collect(),
        json!(budget),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::memory::MemoryEnv;
    use futures::executor::block_on;

    #[test]
    fn changes_persist_with_their_budget_and_scripts_are_apart() {
        let env = MemoryEnv::default();
        let vs = ValueStore::default();
        block_on(async {
            let set = |k: &str, v: &str| Op::Set(vec![(k.to_owned(), v.to_owned())]);
            vs.apply(&env, "a", &set("k", "1")).await.unwrap();
            vs.apply(&env, "b", &set("k", "\"two\"")).await.unwrap();
            assert_eq!(load(&env, "a").await.unwrap().get("k"), Some("1"));
            assert_eq!(load(&env, "b").await.unwrap().get("k"), Some("\"two\""));
            let got = env.get(Area::Local, &[values::BUDGET_KEY]).await.unwrap();
            assert_eq!(got[values::BUDGET_KEY], json!({"a": 2, "b": 6}));
            // Another script's bytes count against the total.
            let big = format!("\"{}\"", "x".repeat(values::MAX_SCRIPT_BYTES - 10));
            let fill = env.get(Area::Local, &[values::BUDGET_KEY]).await.unwrap();
            let mut b = values::decode_budget(fill.get(values::BUDGET_KEY));
            b.insert("c".into(), values::MAX_TOTAL_BYTES);
            let mut items = Map::new();
            items.insert(values::BUDGET_KEY.into(), json!(b));
            env.set(Area::Local, items).await.unwrap();
            let e = vs.apply(&env, "a", &set("big", &big)).await.unwrap_err();
            assert!(
                matches!(e, StoreError::Refused(values::ValueError::AllFull { .. })),
                "{e:?}"
            );
            assert_eq!(load(&env, "a").await.unwrap().get("big"), None);
            // Purging b drops its values key and its budget entry.
            let (keys, budget) = purged_items(&env, &["b".into()]).await.unwrap();
            assert_eq!(keys, ["values/b"]);
            assert!(budget.get("b").is_none() && budget.get("a").is_some());
        });
    }
}
