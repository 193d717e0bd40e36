//! The rate-limit and audit steps of a write, and the write lock.

use super::{keys, Provider};
use crate::env::{Area, Env};
use crate::guard::audit::{self, Entry};
use crate::guard::rate_limit::{Admission, RateWindow, MAX_WRITES, WINDOW_MS};
use futures::lock::MutexGuard;
use serde_json::{Map, Value};

/// The refusal text, from the limiter's own constants so it cannot drift from what it enforces.
fn rate_limited_message(retry_secs: f64) -> String {
    format!(
        "rate limit: at most {MAX_WRITES} writes per {} seconds; retry in {retry_secs} s",
        WINDOW_MS / 1000.0
    )
}

/// Why a write was not admitted by the rate-limit step.
#[derive(Debug, Clone, PartialEq)]
pub enum AdmitError {
    /// The slot could not be recorded, so the write does not run (fail closed).
    Storage(String),
    /// The caller's window is full; retry after this many whole seconds.
    Limited { retry_after_secs: f64 },
}

impl std::fmt::Display for AdmitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AdmitError::Storage(e) => {
                write!(f, "could not record the write in the rate window: {e}")
            }
            AdmitError::Limited { retry_after_secs } => {
                f.write_str(&rate_limited_message(*retry_after_secs))
            }
        }
    }
}

/// The stored rate window as the limiter reads it (missing or damaged: empty).
pub(crate) fn decode_window(v: Option<&Value>) -> RateWindow {
    v.and_then(|v| serde::Deserialize::deserialize(v).ok())
        .unwrap_or_default()
}

impl<E: Env> Provider<E> {
    /// Held while a script is read, checked and written.
    pub async fn write_lock(&self) -> MutexGuard<'_, ()> {
        self.write_lock.lock().await
    }

    /// The rate-limit step: admits one write of `caller` now, or says when to retry.
    pub async fn admit_write(&self, caller: &str) -> Result<(), AdmitError> {
        self.admit_write_deferred(caller).await?.await
    }

    /// [`Self::admit_write`] in two steps: the admission is decided now (a full window is
    /// refused here), and recording the slot is the future returned, for the caller to run
    /// beside the write's reads; the write's first change waits for it and a slot not recorded
    /// stops the write before that change (`Journaled::after_slot`: fail closed). The rate lock
    /// is held until the slot is recorded, so the next admission counts this one.
    pub async fn admit_write_deferred(
        &self,
        caller: &str,
    ) -> Result<impl std::future::Future<Output = Result<(), AdmitError>> + '_, AdmitError> {
        let guard = self.rate_lock.lock().await;
        let mut window = self.rate_window().await;
        let now = self.env.now_ms();
        match window.admit(caller, now) {
            Admission::Admitted => {
                window.prune(now);
                let mut m = Map::new();
                m.insert(
                    keys::RATE_WINDOW.to_owned(),
                    serde_json::to_value(&window).unwrap_or(Value::Null),
                );
                self.rate_cache.set(None);
                Ok(async move {
                    let _guard = guard;
                    self.env
                        .set(Area::Session, m)
                        .await
                        .map_err(|e| AdmitError::Storage(e.to_string()))?;
                    self.rate_cache.set(Some(window));
                    Ok(())
                })
            }
            Admission::Limited { retry_after_ms } => {
                let secs = (retry_after_ms / 1000.0).ceil().max(1.0);
                Err(AdmitError::Limited {
                    retry_after_secs: secs,
                })
            }
        }
    }

    pub(crate) async fn rate_window(&self) -> RateWindow {
        self.rate_cache
            .read(&self.env, Area::Session, keys::RATE_WINDOW, decode_window)
            .await
    }

    pub async fn writes_left(&self, caller: &str) -> usize {
        self.rate_window()
            .await
            .remaining(caller, self.env.now_ms())
    }

    /// Finalizes a write the previous worker left pending as INTERRUPTED: once per worker,
    /// before its first journaled write (the caller holds the write lock), at start-up, or
    /// before the audit log is first listed (no write lock: no write of this worker has an
    /// entry pending before this ran). A
    /// pending slot this worker could not finalize (storage full) is its own last write, which
    /// happened and was answered: it is recorded with its result (a tester saw it turned into an
    /// INTERRUPTED entry with no revision, and so no Undo).
    pub async fn settle_interrupted_write(&self) -> Result<(), audit::AuditError> {
        if self.journal_settled.get() {
            return Ok(());
        }
        let _guard = self.audit_lock.lock().await;
        // Asked again under the lock: `audit.list` settles without the write lock, and a write
        // that settled first may have its own entry pending by now.
        if self.journal_settled.get() {
            return Ok(());
        }
        let finals = self.unsaved_finals.take();
        let settled = if finals.is_empty() {
            audit::finalize_interrupted(&self.env, &self.audit_tail)
                .await
                .map(drop)
        } else {
            audit::finalize_all(&self.env, &finals, &self.audit_tail).await
        };
        if let Err(e) = settled {
            self.unsaved_finals.replace(finals);
            return Err(e);
        }
        self.journal_settled.set(true);
        Ok(())
    }

    /// At worker start, off the path of the waking message.
    pub async fn recover_interrupted_write(&self) {
        let _lock = self.write_lock().await;
        if let Err(e) = self.settle_interrupted_write().await {
            self.note(format!("could not record an interrupted write: {e}"));
        }
    }

    /// Records the tries a previous worker left in progress as INTERRUPTED: once per worker,
    /// before its first try (so its slots are not overwritten) or at start-up.
    pub async fn settle_interrupted_tries(&self) -> Result<(), audit::AuditError> {
        let _guard = self.audit_lock.lock().await;
        if self.tries_settled.get() {
            return Ok(());
        }
        audit::finalize_interrupted_tries(&self.env, &self.audit_tail).await?;
        self.tries_settled.set(true);
        Ok(())
    }

    /// At worker start, off the path of the waking message: the previous worker's tries.
    pub async fn recover_interrupted_tries(&self) {
        if let Err(e) = self.settle_interrupted_tries().await {
            self.note(format!("could not record an interrupted try: {e}"));
        }
    }

    /// Stores a try as in progress before its code runs (`audit::begin_try`); its key is
    /// passed back to [`Provider::finish_try`].
    pub async fn begin_try(&self, entry: &Entry) -> Result<u64, audit::AuditError> {
        self.settle_interrupted_tries().await?;
        let _guard = self.audit_lock.lock().await;
        let key = self.next_try.get();
        self.next_try.set(key.wrapping_add(1));
        // Taken out for the `set` (no borrow held across it); only the audit lock's holder
        // touches it.
        let mut tries = self.pending_tries.take();
        let begun = audit::begin_try(&self.env, &mut tries, key, entry).await;
        self.pending_tries.replace(tries);
        begun.map(|()| key)
    }

    /// Takes back a try [`Provider::begin_try`] stored that has not run (`audit::withdraw_try`).
    pub async fn withdraw_try(&self, key: u64) {
        let _guard = self.audit_lock.lock().await;
        let mut tries = self.pending_tries.take();
        let done = audit::withdraw_try(&self.env, &mut tries, key).await;
        self.pending_tries.replace(tries);
        if let Err(e) = done {
            self.note(format!(
                "a waiting try's record in progress not taken back: {e}; a stop before the next try's record leaves it to be recorded as interrupted"
            ));
        }
    }

    /// Records a try's result: `key` from [`Provider::begin_try`] clears its slot in the same
    /// `set`; `None` (refused before it was begun) only appends.
    pub async fn finish_try(&self, key: Option<u64>, entry: &Entry) {
        let Some(key) = key else {
            return self.audit(entry).await;
        };
        let _guard = self.audit_lock.lock().await;
        let mut tries = self.pending_tries.take();
        let done = audit::finish_try(&self.env, &mut tries, key, entry, &self.audit_tail).await;
        self.pending_tries.replace(tries);
        if let Err(e) = done {
            self.note(format!(
                "audit entry not saved ({} {}): {e}; the next start records it as interrupted",
                entry.tool, entry.result
            ));
        }
    }

    /// Finalizes a journaled write with its result. On failure the pending entry stays, and
    /// the next write settles it (as INTERRUPTED) before it runs.
    pub async fn audit_final(&self, entry: &Entry) {
        let _guard = self.audit_lock.lock().await;
        if let Err(e) = audit::finalize(&self.env, entry, &self.audit_tail).await {
            self.journal_settled.set(false);
            self.unsaved_finals.replace(vec![entry.clone()]);
            self.note(format!(
                "audit entry not saved ({} {}): {e}",
                entry.tool, entry.result
            ));
        }
    }

    /// [`Self::audit_final`] of a write whose pending slot held several entries
    /// (`Journaled::also`): the write's own first.
    pub async fn audit_final_all(&self, entries: &[Entry]) {
        let _guard = self.audit_lock.lock().await;
        if let Err(e) = audit::finalize_all(&self.env, entries, &self.audit_tail).await {
            self.journal_settled.set(false);
            self.unsaved_finals.replace(entries.to_vec());
            self.note(format!(
                "audit entries not saved ({} of them): {e}",
                entries.len()
            ));
        }
    }

    /// Appends to the audit log. A failure cannot undo the write it records, so it is kept in
    /// the provider's log for the user to see.
    pub async fn audit(&self, entry: &Entry) {
        let _guard = self.audit_lock.lock().await;
        if let Err(e) = audit::append(&self.env, entry, &self.audit_tail).await {
            self.note(format!(
                "audit entry not saved ({} {}): {e}",
                entry.tool, entry.result
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_limit_message_states_the_enforced_limit() {
        let m = rate_limited_message(7.0);
        let window = (WINDOW_MS / 1000.0).to_string();
        assert_eq!(
            m,
            format!("rate limit: at most {MAX_WRITES} writes per {window} seconds; retry in 7 s")
        );
        assert!(!m.contains(".0"), "{m}");
    }
}
