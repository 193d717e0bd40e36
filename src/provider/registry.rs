//! Keeping `chrome.userScripts` in step with storage: one script after a write, the scripts of an
//! import together, everything when the registrations may have drifted.
//!
//! ```text
//!  Unknown (worker start) ──session flag says synced──► Synced
//!     └──────────── otherwise ──────────────────────► Stale ──reconcile ok──► Synced
//!  Synced ──a registration failed / API seen coming back / extension installed /
//!          a script unregistered while Chrome refuses another (a world went back)──► Stale
//!  Stale ──reconcile starts──► Reconciling ──done, nothing marked it stale meanwhile──► Synced
//!                                   └──── API lost part-way, or marked stale meanwhile ──► Stale
//! ```
//! A registration Chrome *refuses* (not a toggle that is off) is recorded per script in
//! `chrome.storage.local` (`registryErrors`), so the refusal survives restarts and is shown by
//! `list_scripts`, `get_script` and `status` until a registration of that script succeeds.
//! Reconciling reads every record and source, so it runs only when needed, not at every
//! worker start: the flag lives in `chrome.storage.session`, which Chrome clears exactly when it
//! may drop registrations (extension update or reload).

use super::{keys, Provider};
use crate::env::{Area, Env};
use crate::probe::Capability;
use crate::scripts::registry::Registration;
use crate::scripts::sync::{self, SyncError};
use serde_json::{Map, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegistryState {
    Unknown,
    Synced,
    Stale,
    Reconciling,
}

/// How one script's registration went after a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncOutcome {
    /// Registered: it runs on matching pages.
    Registered,
    /// Not registered because it must not run (disabled, or no rule).
    NotRegistered,
    /// `chrome.userScripts` is unavailable; the reconcile will register it later.
    Unavailable,
    /// Not registered now for another reason (a storage read failed; Chrome still holds what
    /// it held): the reconcile after this interaction registers it.
    Deferred(String),
    /// Chrome refused it, with Chrome's message.
    Refused(String),
}

/// The stored refusals as read (missing or not an object: none).
pub(crate) fn decode_errors(v: Option<&Value>) -> Map<String, Value> {
    match v {
        Some(Value::Object(o)) => o.clone(),
        _ => Map::new(),
    }
}

impl<E: Env> Provider<E> {
    pub fn registry_state(&self) -> RegistryState {
        self.registry.get()
    }

    /// Whether the provider can do its job now. Seeing `chrome.userScripts` come back after it
    /// was unavailable marks the registry stale: Chrome may have dropped registrations meanwhile.
    pub fn capability(&self) -> Capability {
        let available = self.env.user_scripts_available();
        if available && self.last_available.get() == Some(false) {
            self.registry.set(RegistryState::Stale);
        }
        self.last_available.set(Some(available));
        if available {
            Capability::ready()
        } else {
            Capability::user_scripts_off()
        }
    }

    /// Whether Chrome may hold registrations older than storage while "Allow User Scripts" is
    /// off: every `chrome.userScripts` call throws then, and no event says when it is back on,
    /// so the first pages loaded after would run what Chrome held (a script the user turned
    /// off, an older version). The shell checks the switch every second meanwhile
    /// (`chrome::toggle_watch`) and reconciles as soon as it is on.
    pub fn awaiting_toggle(&self) -> bool {
        self.registry.get() == RegistryState::Stale && !self.env.user_scripts_available()
    }

    async fn save_synced(&self, synced: bool) {
        self.flag_owed.set(false);
        let mut m = Map::new();
        m.insert(keys::REGISTRY_SYNCED.to_owned(), Value::Bool(synced));
        self.flag_stored.set(None);
        match self.env.set(Area::Session, m).await {
            Ok(()) => self.flag_stored.set(Some(synced)),
            Err(e) => self.note(format!("could not record the registry state: {e}")),
        }
    }

    /// Brings one script's registration in line. An unavailable API marks the registry stale
    /// for the next reconcile; a refusal is recorded durably for that script. `held`: what
    /// Chrome holds for it, if the caller read it beside the write (`sync::read_held`).
    pub async fn sync_registration(
        &self,
        uuid: &str,
        desired: Option<Registration>,
        held: Option<sync::Held>,
    ) -> SyncOutcome {
        let key = match desired {
            Some(_) => self.prelude_key().await,
            None => None,
        };
        // Registered without its prelude (no key: storage failing): it runs without GM
        // functions or reports, so the next reconcile registers it again.
        let whole = desired.is_none() || key.is_some();
        match sync::sync_one_keyed(&self.env, uuid, desired, key.as_ref(), held).await {
            Ok(registered) => {
                self.set_registration_errors(&[], &[uuid.to_owned()]).await;
                // Registered without its prelude; or unregistered while Chrome refuses others:
                // its world configuration went back to Chrome's 100, so a script refused for
                // want of one can have it now. The reconcile after this interaction registers
                // them (before, one stayed refused until it was itself written again).
                if !whole || (!registered && !self.registration_errors().await.is_empty()) {
                    self.mark_registry_stale().await;
                }
                if registered {
                    SyncOutcome::Registered
                } else {
                    SyncOutcome::NotRegistered
                }
            }
            Err(SyncError::Unavailable(m)) => {
                self.mark_registry_stale().await;
                if self.env.user_scripts_available() {
                    SyncOutcome::Deferred(m)
                } else {
                    SyncOutcome::Unavailable
                }
            }
            Err(SyncError::Refused(m)) => {
                self.set_registration_errors(&[(uuid.to_owned(), m.clone())], &[])
                    .await;
                SyncOutcome::Refused(m)
            }
        }
    }

    /// [`Self::sync_registration`] for several scripts written together (an import): Chrome is
    /// read once and the registrations changed in a few calls (`sync::sync_many_keyed`), the
    /// refusals recorded in one `set`.
    pub async fn sync_registrations(&self, items: Vec<(String, Option<Registration>)>) {
        let key = if items.iter().any(|(_, d)| d.is_some()) {
            self.prelude_key().await
        } else {
            None
        };
        let (mut refused, mut ok, mut stale, mut withdrawn) =
            (Vec::new(), Vec::new(), false, false);
        for (uuid, r) in sync::sync_many_keyed(&self.env, items, key.as_ref()).await {
            match r {
                Ok(registered) => {
                    withdrawn |= !registered;
                    ok.push(uuid);
                }
                Err(SyncError::Unavailable(_)) => stale = true,
                Err(SyncError::Refused(m)) => refused.push((uuid, m)),
            }
        }
        self.set_registration_errors(&refused, &ok).await;
        // As for one script: a script withdrawn while others stay refused gave a world back.
        if stale || (withdrawn && !self.registration_errors().await.is_empty()) {
            self.mark_registry_stale().await;
        }
    }

    /// Chrome's refusals by script uuid, as recorded (empty when none or unreadable).
    pub async fn registration_errors(&self) -> Map<String, Value> {
        self.registry_errors_cache
            .read(&self.env, Area::Local, keys::REGISTRY_ERRORS, decode_errors)
            .await
    }

    /// Records refusals and clears the entries of scripts now fine (or deleted).
    pub(crate) async fn set_registration_errors(&self, add: &[(String, String)], clear: &[String]) {
        let mut errors = self.registration_errors().await;
        let before = errors.clone();
        for u in clear {
            errors.remove(u);
        }
        for (u, m) in add {
            errors.insert(u.clone(), Value::String(crate::text::ellipsize(m, 500)));
        }
        if errors == before {
            return;
        }
        let mut m = Map::new();
        m.insert(
            keys::REGISTRY_ERRORS.to_owned(),
            Value::Object(errors.clone()),
        );
        self.registry_errors_cache.set(None);
        match self.env.set(Area::Local, m).await {
            Ok(()) => self.registry_errors_cache.set(Some(errors)),
            Err(e) => self.note(format!("could not record a registration error: {e}")),
        }
    }

    /// Reconciles Chrome's registrations with storage when they may differ and the API works.
    /// Cheap when nothing is stale; the shell calls it at start and after each interaction.
    pub async fn ensure_registry(&self) {
        self.settle_registry_flag().await;
        if self.registry.get() == RegistryState::Unknown {
            let synced = self
                .env
                .get(Area::Session, &[keys::REGISTRY_SYNCED])
                .await
                .ok()
                .and_then(|m| m.get(keys::REGISTRY_SYNCED).and_then(Value::as_bool))
                .unwrap_or(false);
            if self.flag_stored.get().is_none() {
                self.flag_stored.set(Some(synced));
            }
            // Only move on from Unknown: a write may have marked it stale meanwhile.
            if self.registry.get() == RegistryState::Unknown {
                self.registry.set(if synced {
                    RegistryState::Synced
                } else {
                    RegistryState::Stale
                });
            }
        }
        if self.registry.get() != RegistryState::Stale || !self.env.user_scripts_available() {
            return;
        }
        let _guard = self.write_lock.lock().await;
        if self.registry.get() != RegistryState::Stale {
            return;
        }
        let snapshot = match self.scripts().await {
            Ok(s) => s,
            Err(e) => return self.note(format!("could not reconcile registrations: {e}")),
        };
        self.registry.set(RegistryState::Reconciling);
        // The worlds of tries running now are theirs until they end (`try_script::hold_world`).
        let trying = |id: &str| self.try_worlds.borrow().contains_key(id);
        match sync::reconcile_sparing(&self.env, &snapshot, trying).await {
            Ok(report) => {
                let mut clear = report.ok.clone();
                // Scripts no longer stored or enabled cannot stay "refused".
                let errors = self.registration_errors().await;
                clear.extend(
                    errors
                        .keys()
                        .filter(|u| !snapshot.records.iter().any(|r| r.enabled && &r.uuid == *u))
                        .cloned(),
                );
                self.set_registration_errors(&report.refused, &clear).await;
                for s in report.skipped {
                    self.note(format!("script not registered: {s}"));
                }
                // Anything that marked the registry stale meanwhile (a failed write, the API
                // seen coming back) wins, and so does an API lost part-way.
                if self.registry.get() == RegistryState::Reconciling && !report.interrupted {
                    self.registry.set(RegistryState::Synced);
                    // A value change stored meanwhile waits for this lock to register: owed.
                    if self.values_unregistered.get() == 0 {
                        self.save_synced(true).await;
                    } else {
                        self.flag_owed.set(true);
                    }
                } else {
                    self.registry.set(RegistryState::Stale);
                }
            }
            Err(e) => {
                self.registry.set(RegistryState::Stale);
                self.note(format!("could not reconcile registrations: {e}"));
            }
        }
    }

    /// A write is about to change storage ahead of the registry. Until its registration is done
    /// the session flag must not say "synced": a worker stopped in between would skip the
    /// reconcile and leave a stale registration running. Whatever this worker thinks of the
    /// registry (it may not have read the flag yet, or found it stale only in memory), the
    /// flag is cleared unless it is known to say "not synced" already (a "synced" still owed
    /// from the write before, for one).
    pub(crate) async fn registry_write_begins(&self) {
        if self.flag_stored.get() != Some(false) {
            let owed = self.flag_owed.get();
            self.save_synced(false).await;
            // Still owed once this write's registration is done, if it was before.
            self.flag_owed.set(owed);
        }
    }

    /// The write's registration is done (if it failed, the state is already Stale). "Synced" is
    /// owed, not stored here: the write's reply does not wait for it. Until it is stored a
    /// worker stopped meanwhile reconciles at its start, which costs time, never correctness.
    pub(crate) fn registry_write_ends(&self) {
        if self.registry.get() == RegistryState::Synced {
            self.flag_owed.set(true);
        }
    }

    /// Stores the "synced" a write owes. The shell calls it (through `ensure_registry`) after
    /// each interaction's reply; under the write lock, so it lands before the next write clears
    /// the flag again.
    async fn settle_registry_flag(&self) {
        if !self.flag_owed.get() {
            return;
        }
        let _guard = self.write_lock.lock().await;
        // A value change not registered yet owes it again when it is (`ValueChange`).
        if self.flag_owed.replace(false)
            && self.registry.get() == RegistryState::Synced
            && self.values_unregistered.get() == 0
        {
            self.save_synced(true).await;
        }
    }

    /// A GM value change is about to be stored ahead of its registration (the values are in
    /// the registered code). As for a write, "synced" must not stay stored meanwhile: a worker
    /// stopped before the registration would trust Chrome's older snapshot, and every page
    /// would start with the old values until the script's next change. The flag is cleared
    /// before the values are stored; the returned [`ValueChange`] ends it.
    pub(crate) async fn value_change_begins(&self) -> ValueChange<'_, E> {
        self.values_unregistered
            .set(self.values_unregistered.get().saturating_add(1));
        let change = ValueChange {
            p: self,
            settled: false,
        };
        self.registry_write_begins().await;
        change
    }

    /// Forces the next `ensure_registry` to reconcile (a registration failed, or the extension
    /// was installed or updated).
    pub async fn mark_registry_stale(&self) {
        self.registry.set(RegistryState::Stale);
        self.save_synced(false).await;
    }
}

/// A GM value change between its storing and its registration (`value_change_begins`).
/// [`ValueChange::settled`] once Chrome holds what storage holds for it (registered, left to a
/// registration still waiting that reads the values after it, or nothing stored); dropped
/// without that, the registry is marked stale, so the next reconcile registers the values.
pub(crate) struct ValueChange<'a, E: Env> {
    p: &'a Provider<E>,
    settled: bool,
}

impl<E: Env> ValueChange<'_, E> {
    pub(crate) fn settled(mut self) {
        self.settled = true;
    }
}

impl<E: Env> Drop for ValueChange<'_, E> {
    fn drop(&mut self) {
        let left = self.p.values_unregistered.get().saturating_sub(1);
        self.p.values_unregistered.set(left);
        if !self.settled {
            self.p.registry.set(RegistryState::Stale);
        } else if left == 0 {
            self.p.registry_write_ends();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::memory::MemoryEnv;
    use crate::env::Storage;
    use crate::scripts::store;
    use futures::executor::block_on;

    fn with_script(enabled: bool) -> (Provider<MemoryEnv>, String) {
        let p = Provider::new(MemoryEnv::new());
        let src =
            "// ==UserScript==\n// @name A\n// @match https://example.com/*\n// ==/UserScript==\n";
        let snap = block_on(store::load_snapshot(&p.env)).unwrap();
        let c = block_on(store::create(&p.env, &snap, "user", src, enabled, 1 << 20)).unwrap();
        (p, c.record.uuid)
    }

    fn flag(p: &Provider<MemoryEnv>) -> Option<Value> {
        block_on(p.env.get(Area::Session, &[keys::REGISTRY_SYNCED]))
            .unwrap()
            .get(keys::REGISTRY_SYNCED)
            .cloned()
    }

    /// A write that begins must leave "not synced" stored, whatever this worker thinks of the
    /// registry: a fresh worker that has not read the flag yet (the previous worker's "synced"
    /// is there), or one that found the registry stale only in memory (the API seen coming
    /// back). Else a worker stopped before the write's registration skips the reconcile, and
    /// Chrome runs the old version for good.
    #[test]
    fn a_write_beginning_never_leaves_synced_stored() {
        // A fresh worker: the previous one stored "synced".
        let (p, _) = with_script(true);
        let mut m = Map::new();
        m.insert(keys::REGISTRY_SYNCED.to_owned(), Value::Bool(true));
        block_on(p.env.set(Area::Session, m)).unwrap();
        assert_eq!(p.registry_state(), RegistryState::Unknown);
        block_on(p.registry_write_begins());
        assert_eq!(flag(&p), Some(Value::Bool(false)), "unknown");
        // Synced, then the API seen coming back: stale in memory only.
        let (p, _) = with_script(true);
        block_on(p.ensure_registry());
        assert_eq!(p.registry_state(), RegistryState::Synced);
        assert_eq!(flag(&p), Some(Value::Bool(true)));
        p.env.user_scripts.set(false);
        p.capability();
        p.env.user_scripts.set(true);
        p.capability();
        assert_eq!(p.registry_state(), RegistryState::Stale);
        block_on(p.registry_write_begins());
        assert_eq!(flag(&p), Some(Value::Bool(false)), "stale");
        // Known "not synced" already: no second write of it.
        let writes = p.env.storage_log.borrow().len();
        block_on(p.registry_write_begins());
        assert_eq!(p.env.storage_log.borrow().len(), writes);
    }

    #[test]
    fn a_reconcile_that_loses_the_api_part_way_stays_stale() {
        let (p, _) = with_script(true);
        p.env.lose_api_on_register.set(true);
        block_on(p.ensure_registry());
        assert_eq!(p.registry_state(), RegistryState::Stale);
        let flag = block_on(p.env.get(Area::Session, &[keys::REGISTRY_SYNCED])).unwrap();
        assert_ne!(flag.get(keys::REGISTRY_SYNCED), Some(&Value::Bool(true)));
        // When the API is back, the next reconcile registers it and only then says Synced.
        p.env.lose_api_on_register.set(false);
        p.env.user_scripts.set(true);
        block_on(p.ensure_registry());
        assert_eq!(p.registry_state(), RegistryState::Synced);
        assert_eq!(p.env.registrations.borrow().len(), 1);
    }

    #[test]
    fn a_refusal_is_recorded_durably_and_cleared_by_success() {
        let (p, uuid) = with_script(true);
        // The channel key exists (a key made now would mark the registry stale by itself).
        block_on(crate::channel::key_store::ensure(&p.env)).unwrap();
        p.env.refuse_register.replace(Some("Invalid host.".into()));
        let (record, source) = block_on(store::load_with_source(&p.env, &uuid)).unwrap();
        let desired = sync::desired_for(&record, &source);
        let out = block_on(p.sync_registration(&uuid, desired.clone(), None));
        assert_eq!(out, SyncOutcome::Refused("Invalid host.".into()));
        // Not blamed on the toggle: the registry is not stale, the refusal is stored.
        assert_ne!(p.registry_state(), RegistryState::Stale);
        let stored = p.env.dump(Area::Local);
        assert_eq!(stored[keys::REGISTRY_ERRORS][&uuid], "Invalid host.");
        // A fresh provider (worker restart) still sees it.
        assert_eq!(
            block_on(p.registration_errors()).get(&uuid),
            Some(&Value::String("Invalid host.".into()))
        );
        // A reconcile that Chrome also refuses keeps it; one that succeeds clears it.
        block_on(p.mark_registry_stale());
        block_on(p.ensure_registry());
        assert!(block_on(p.registration_errors()).contains_key(&uuid));
        p.env.refuse_register.replace(None);
        assert_eq!(
            block_on(p.sync_registration(&uuid, desired, None)),
            SyncOutcome::Registered
        );
        assert!(block_on(p.registration_errors()).is_empty());
    }
}
