//! Keeping `chrome.userScripts` in step with storage: one script after a write, everything when
//! the registrations may have drifted.
//!
//! ```text
//!  Unknown (worker start) ──session flag says synced──► Synced
//!     └──────────── otherwise ──────────────────────► Stale ──reconcile ok──► Synced
//!  Synced ──a registration failed / API seen coming back / extension installed──► Stale
//! ```
//! Reconciling reads every record and source, so it runs only when needed, not at every
//! worker start: the flag lives in `chrome.storage.session`, which Chrome clears exactly when it
//! may drop registrations (extension update or reload).

use super::{keys, Provider};
use crate::env::{Area, Env};
use crate::probe::Capability;
use crate::scripts::registry::Registration;
use crate::scripts::sync;
use serde_json::{Map, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegistryState {
    Unknown,
    Synced,
    Stale,
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

    async fn save_synced(&self, synced: bool) {
        let mut m = Map::new();
        m.insert(keys::REGISTRY_SYNCED.to_owned(), Value::Bool(synced));
        if let Err(e) = self.env.set(Area::Session, m).await {
            self.note(format!("could not record the registry state: {e}"));
        }
    }

    /// Brings one script's registration in line; `true` when it is registered to run now. A
    /// failure marks the registry stale for the next reconcile.
    pub async fn sync_registration(&self, uuid: &str, desired: Option<Registration>) -> bool {
        match sync::sync_one(&self.env, uuid, desired).await {
            Ok(registered) => registered,
            Err(_) => {
                self.mark_registry_stale().await;
                false
            }
        }
    }

    /// Reconciles Chrome's registrations with storage when they may differ and the API works.
    /// Cheap when nothing is stale; the shell calls it at start and after each interaction.
    pub async fn ensure_registry(&self) {
        if self.registry.get() == RegistryState::Unknown {
            let synced = self
                .env
                .get(Area::Session, &[keys::REGISTRY_SYNCED])
                .await
                .ok()
                .and_then(|m| m.get(keys::REGISTRY_SYNCED).and_then(Value::as_bool))
                .unwrap_or(false);
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
        match sync::reconcile(&self.env, &snapshot).await {
            Ok(report) => {
                // A failure during the reconcile (below the lock) would have set Stale again.
                self.registry.set(RegistryState::Synced);
                self.save_synced(true).await;
                for s in report.skipped {
                    self.note(format!("script not registered: {s}"));
                }
            }
            Err(e) => self.note(format!("could not reconcile registrations: {e}")),
        }
    }

    /// A write is about to change storage ahead of the registry. Until its registration is done
    /// the session flag must not say "synced": a worker stopped in between would skip the
    /// reconcile and leave a stale registration running.
    pub(crate) async fn registry_write_begins(&self) {
        if self.registry.get() == RegistryState::Synced {
            self.save_synced(false).await;
        }
    }

    /// The write's registration is done (if it failed, the state is already Stale).
    pub(crate) async fn registry_write_ends(&self) {
        if self.registry.get() == RegistryState::Synced {
            self.save_synced(true).await;
        }
    }

    /// Forces the next `ensure_registry` to reconcile (a registration failed, or the extension
    /// was installed or updated).
    pub async fn mark_registry_stale(&self) {
        self.registry.set(RegistryState::Stale);
        self.save_synced(false).await;
    }
}
