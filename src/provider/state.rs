//! What the provider last read or wrote of the policy and the scripts, so a decision does not
//! wait on storage. The caches are exact, not approximate: every write goes through the provider
//! and updates them, and `storage_changed` (fed by `chrome.storage.onChanged`) drops an entry as
//! soon as storage holds anything else — a page or devtools writing storage directly, or another
//! copy of the worker.
//!
//! Reads that miss the cache load from storage without a lock, so a load can finish after a
//! write it did not see. Every change to a cache bumps its generation, and a load fills the cache
//! only if the generation is still the one it started with.

use super::{keys, Provider};
use crate::env::{Area, Env, EnvError};
use crate::policy::Policy;
use crate::scripts::store::{self, Change, ScriptError, Snapshot};
use crate::session::Session;
use serde_json::{Map, Value};
use std::rc::Rc;

/// The stored policy could not be read or saved (the change is not made).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyStoreError {
    Read(EnvError),
    Save(EnvError),
}

impl std::fmt::Display for PolicyStoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PolicyStoreError::Read(e) => write!(f, "could not read the policy: {e}"),
            PolicyStoreError::Save(e) => write!(f, "could not save the policy: {e}"),
        }
    }
}

/// A value the provider last read or wrote, exact in the same sense as the caches above: a
/// change bumps the generation, and a load fills it only if no change came in meanwhile.
pub(crate) struct Cached<T> {
    value: std::cell::RefCell<Option<T>>,
    generation: std::cell::Cell<u64>,
}

impl<T> Default for Cached<T> {
    fn default() -> Self {
        Cached {
            value: std::cell::RefCell::new(None),
            generation: std::cell::Cell::new(0),
        }
    }
}

impl<T: Clone + PartialEq> Cached<T> {
    pub(crate) fn get(&self) -> Option<T> {
        self.value.borrow().clone()
    }

    /// What a load must hand back to [`Cached::fill`].
    pub(crate) fn generation(&self) -> u64 {
        self.generation.get()
    }

    /// Fills the cache with what a load started at `generation` read, unless it changed since.
    pub(crate) fn fill(&self, generation: u64, v: T) {
        if self.generation.get() == generation {
            *self.value.borrow_mut() = Some(v);
        }
    }

    /// Our own write (`Some`), or a reason to read storage again (`None`).
    pub(crate) fn set(&self, v: Option<T>) {
        self.generation.set(self.generation.get().wrapping_add(1));
        *self.value.borrow_mut() = v;
    }

    /// The value under `key`: cached, else read and decoded (and cached unless a change came in
    /// meanwhile). Unreadable storage gives `decode(None)`, uncached.
    pub(crate) async fn read<S: crate::env::Storage>(
        &self,
        storage: &S,
        area: Area,
        key: &str,
        decode: fn(Option<&Value>) -> T,
    ) -> T {
        if let Some(v) = self.get() {
            return v;
        }
        let generation = self.generation();
        match storage.get(area, &[key]).await {
            Ok(m) => {
                let v = decode(m.get(key));
                self.fill(generation, v.clone());
                v
            }
            Err(_) => decode(None),
        }
    }

    /// Storage now holds `stored` (as a reload would decode it): keep the cache if that is what
    /// it says, else drop it.
    pub(crate) fn storage_holds(&self, stored: &T) {
        if self.value.borrow().as_ref() != Some(stored) {
            self.set(None);
        }
    }
}

/// See [`Provider::hold_echoes`].
pub(crate) struct HeldEchoes<'a, E: Env>(&'a Provider<E>);

impl<E: Env> Drop for HeldEchoes<'_, E> {
    fn drop(&mut self) {
        self.0.judge_held_echoes();
    }
}

impl<E: Env> Provider<E> {
    /// The policy for a decision. A storage failure yields the safe default for decisions that
    /// only read (nobody authorized), never a panic.
    pub async fn policy(&self) -> Policy {
        if let Some(p) = self.policy_cache.borrow().clone() {
            return p;
        }
        let generation = self.policy_gen.get();
        match self.env.get(Area::Local, &[keys::POLICY]).await {
            Ok(m) => {
                let p = Policy::from_stored(m.get(keys::POLICY)).0;
                if self.policy_gen.get() == generation {
                    *self.policy_cache.borrow_mut() = Some(p.clone());
                }
                p
            }
            Err(_) => Policy {
                endpoint_enabled: false,
                ..Policy::default()
            },
        }
    }

    async fn save_policy(&self, p: &Policy) -> Result<(), PolicyStoreError> {
        let mut m = Map::new();
        m.insert(keys::POLICY.to_owned(), p.to_stored());
        // If the write fails, storage may hold either version: read it again next time.
        self.set_policy_cache(None);
        self.env
            .set(Area::Local, m)
            .await
            .map_err(PolicyStoreError::Save)?;
        self.set_policy_cache(Some(p.clone()));
        Ok(())
    }

    fn set_policy_cache(&self, p: Option<Policy>) {
        self.policy_gen.set(self.policy_gen.get().wrapping_add(1));
        *self.policy_cache.borrow_mut() = p;
    }

    fn set_scripts_cache(&self, s: Option<Rc<Snapshot>>) {
        self.scripts_gen.set(self.scripts_gen.get().wrapping_add(1));
        *self.scripts_cache.borrow_mut() = s;
    }

    /// Applies `f` to the policy under the policy lock and saves it when `f` says it changed.
    pub async fn update_policy<T>(
        &self,
        f: impl FnOnce(&mut Policy) -> (T, bool),
    ) -> Result<(T, Policy), PolicyStoreError> {
        let _guard = self.policy_lock.lock().await;
        let cached = self.policy_cache.borrow().clone();
        let mut p = match cached {
            Some(p) => p,
            // Filled here too, not only by `policy()`: a probe that changes nothing (every probe
            // of an approved caller) would otherwise read storage every time.
            None => {
                let generation = self.policy_gen.get();
                match self.env.get(Area::Local, &[keys::POLICY]).await {
                    Ok(m) => {
                        let p = Policy::from_stored(m.get(keys::POLICY)).0;
                        if self.policy_gen.get() == generation {
                            *self.policy_cache.borrow_mut() = Some(p.clone());
                        }
                        p
                    }
                    Err(e) => return Err(PolicyStoreError::Read(e)),
                }
            }
        };
        let (out, changed) = f(&mut p);
        if changed {
            self.save_policy(&p).await?;
        }
        Ok((out, p))
    }

    /// Reads the policy into the cache under the policy lock. The shell calls it in the worker's
    /// first turn, so the storage read is already under way when the message that woke the
    /// worker is dispatched, and that message's handler (waiting on the lock) finds it cached.
    pub async fn warm_policy(&self) {
        let _ = self.update_policy(|_| ((), false)).await;
    }

    /// The script index and records (no sources), shared: reading it copies nothing.
    pub async fn scripts(&self) -> Result<Rc<Snapshot>, ScriptError> {
        if let Some(s) = self.scripts_cache.borrow().clone() {
            return Ok(s);
        }
        let _loading = self.scripts_load.lock().await;
        if let Some(s) = self.scripts_cache.borrow().clone() {
            return Ok(s);
        }
        let generation = self.scripts_gen.get();
        let s = Rc::new(store::load_snapshot(&self.env).await?);
        if self.scripts_gen.get() == generation {
            *self.scripts_cache.borrow_mut() = Some(Rc::clone(&s));
        }
        Ok(s)
    }

    /// After each MCP message: the caller's `lastSeen` if due (`note_session`), the
    /// registrations brought in line if they may have drifted, and the snapshot read if nothing
    /// has read it since the worker started. A session's first `list_scripts` or write usually
    /// comes seconds after it opens; this way it does not wait for every record (at 1,000
    /// stored, ~50 ms of Chrome's `get` and ~30 ms of decoding).
    pub async fn after_mcp_message(&self, session: &Session) {
        self.note_session(session).await;
        self.ensure_registry().await;
        let _ = self.scripts().await;
    }

    /// Brings the cached snapshot in line with a write that succeeded (copy on write: readers
    /// holding the old one keep it).
    pub(crate) fn scripts_written(&self, change: &Change) {
        self.scripts_gen.set(self.scripts_gen.get().wrapping_add(1));
        if let Some(s) = self.scripts_cache.borrow_mut().as_mut() {
            Rc::make_mut(s).apply(change);
        }
    }

    pub(crate) fn scripts_deleted(&self, uuid: &str) {
        self.scripts_gen.set(self.scripts_gen.get().wrapping_add(1));
        if let Some(s) = self.scripts_cache.borrow_mut().as_mut() {
            Rc::make_mut(s).remove(uuid);
        }
    }

    /// A failed write changed nothing by design, but a storage error leaves storage as the only
    /// truth: the cache is dropped rather than trusted.
    pub(crate) fn script_failure(&self, e: ScriptError) -> ScriptError {
        if matches!(e, ScriptError::Storage(_)) {
            self.set_scripts_cache(None);
        }
        e
    }

    fn judge_snapshot_change(&self, key: &str, new: &Value) {
        let same = self
            .scripts_cache
            .borrow()
            .as_ref()
            .is_some_and(|s| s.holds(key, new));
        if !same {
            self.set_scripts_cache(None);
        }
    }

    /// Until the returned guard is dropped, a change of a script key is kept, to be judged then
    /// (the caller holds the write lock and is about to write). The drop judges, so no path out
    /// of the write — an early return, a dropped future — leaves changes held and unjudged.
    pub(crate) fn hold_echoes(&self) -> HeldEchoes<'_, E> {
        self.held_echoes.borrow_mut().get_or_insert_with(Vec::new);
        HeldEchoes(self)
    }

    /// Judges the changes that came in since [`Provider::hold_echoes`] against the cache as the
    /// write left it: our own echo keeps it, anything else drops it.
    fn judge_held_echoes(&self) {
        let held = self.held_echoes.borrow_mut().take().unwrap_or_default();
        for (key, new) in held {
            self.judge_snapshot_change(&key, &new);
        }
    }

    /// `chrome.storage.onChanged`: drops a cache entry whenever storage now holds something
    /// other than what the cache says (our own writes match and keep it). Only the keys
    /// [`watched`] names are read.
    pub fn storage_changed(&self, area: Area, changes: &Map<String, Value>) {
        for (key, new) in changes {
            match watched(area, key) {
                None => {}
                Some(Watched::RateWindow) => self
                    .rate_cache
                    .storage_holds(&super::guards::decode_window(Some(new))),
                Some(Watched::AuditRing) => self.audit_tail.storage_changed(key, new),
                Some(Watched::RegistryErrors) => self
                    .registry_errors_cache
                    .storage_holds(&super::registry::decode_errors(Some(new))),
                Some(Watched::ChannelKey) => self.forget_channel_key(),
                Some(Watched::Policy) => {
                    // Compared as a reload would read it: Chrome hands the value back as JSON,
                    // so a timestamp the cache holds as 1.7e12 (f64) comes back as an integer.
                    let same = self
                        .policy_cache
                        .borrow()
                        .as_ref()
                        .is_some_and(|p| &Policy::from_stored(Some(new)).0 == p);
                    if !same {
                        self.set_policy_cache(None);
                    }
                }
                Some(Watched::Snapshot) => {
                    // While a write of ours is between its `set` and its `scripts_written`,
                    // Chrome may deliver the echo first (seen at 1,000 scripts): judged after
                    // the write.
                    if let Some(held) = self.held_echoes.borrow_mut().as_mut() {
                        held.push((key.clone(), new.clone()));
                        continue;
                    }
                    self.judge_snapshot_change(key, new);
                }
            }
        }
    }
}

/// What a cache of the provider holds of a storage key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watched {
    RateWindow,
    AuditRing,
    RegistryErrors,
    ChannelKey,
    Policy,
    Snapshot,
}

/// Which cache a change of `key` in `area` concerns, if any. The shell converts only these
/// values from `storage.onChanged` (a write's echo also carries the script's source and history,
/// old and new, which no cache holds).
#[must_use]
pub fn watched(area: Area, key: &str) -> Option<Watched> {
    match area {
        Area::Session => (key == keys::RATE_WINDOW).then_some(Watched::RateWindow),
        Area::Local if key.starts_with("audit/") => Some(Watched::AuditRing),
        Area::Local if key == keys::REGISTRY_ERRORS => Some(Watched::RegistryErrors),
        Area::Local if key == crate::channel::token::KEY_STORAGE => Some(Watched::ChannelKey),
        Area::Local if key == keys::POLICY => Some(Watched::Policy),
        Area::Local if store::is_snapshot_key(key) => Some(Watched::Snapshot),
        Area::Local => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keys_a_cache_holds_are_watched_and_a_scripts_source_and_history_are_not() {
        let cases = [
            (Area::Session, keys::RATE_WINDOW, Some(Watched::RateWindow)),
            (Area::Session, keys::REGISTRY_SYNCED, None),
            (Area::Local, keys::RATE_WINDOW, None),
            (Area::Local, "audit/head", Some(Watched::AuditRing)),
            (Area::Local, "audit/3", Some(Watched::AuditRing)),
            (
                Area::Local,
                keys::REGISTRY_ERRORS,
                Some(Watched::RegistryErrors),
            ),
            (
                Area::Local,
                crate::channel::token::KEY_STORAGE,
                Some(Watched::ChannelKey),
            ),
            (Area::Local, keys::POLICY, Some(Watched::Policy)),
            (Area::Local, store::INDEX_KEY, Some(Watched::Snapshot)),
            (Area::Local, "script/0b0c", Some(Watched::Snapshot)),
            (Area::Local, "source/0b0c", None),
            (Area::Local, "history/0b0c", None),
            (Area::Local, "values/0b0c", None),
            (Area::Local, "runs/0b0c", None),
        ];
        for (area, key, want) in cases {
            assert_eq!(watched(area, key), want, "{area:?} {key}");
        }
    }

    /// Callers who ask for the snapshot while it is being read wait for that read: the session
    /// warm-up (`after_mcp_message`) and a first `list_scripts` read every record once.
    #[test]
    fn the_snapshot_is_read_once_for_callers_who_come_while_it_is_read() {
        use crate::env::memory::MemoryEnv;
        use futures::executor::block_on;
        let p = super::super::Provider::new(MemoryEnv::new());
        let mut index = Map::new();
        index.insert(
            store::INDEX_KEY.to_owned(),
            serde_json::json!({"uuids": []}),
        );
        block_on(crate::env::Storage::set(&p.env, Area::Local, index)).unwrap();
        p.env.get_yields.set(3);
        let (a, b, c) = block_on(async { futures::join!(p.scripts(), p.scripts(), p.scripts()) });
        assert!(Rc::ptr_eq(&a.unwrap(), &b.unwrap()));
        assert!(c.is_ok());
        let index_reads = p
            .env
            .get_log
            .borrow()
            .iter()
            .filter(|keys| keys.iter().any(|k| k == store::INDEX_KEY))
            .count();
        assert_eq!(index_reads, 1, "{:?}", p.env.get_log.borrow());
    }
}
