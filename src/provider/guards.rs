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

impl<E: Env> Provider<E> {
    /// Held while a script is read, checked and written.
    pub async fn write_lock(&self) -> MutexGuard<'_, ()> {
        self.write_lock.lock().await
    }

    /// The rate-limit step: admits one write of `caller` now, or says when to retry. The window
    /// is read from storage once, then kept as written (`rate_cache`): an admission is one `set`.
    pub async fn admit_write(&self, caller: &str) -> Result<(), AdmitError> {
        let _guard = self.rate_lock.lock().await;
        let cached = self.rate_cache.borrow().clone();
        let mut window = match cached {
            Some(w) => w,
            None => self.rate_window().await,
        };
        let now = self.env.now_ms();
        match window.admit(caller, now) {
            Admission::Admitted => {
                window.prune(now);
                let mut m = Map::new();
                m.insert(
                    keys::RATE_WINDOW.to_owned(),
                    serde_json::to_value(&window).unwrap_or(Value::Null),
                );
                // Fail closed: a write whose slot cannot be recorded does not run.
                let saved = self.env.set(Area::Session, m).await;
                // After a failed `set` storage may hold either window: read it again next time.
                *self.rate_cache.borrow_mut() = saved.is_ok().then_some(window);
                saved.map_err(|e| AdmitError::Storage(e.to_string()))
            }
            Admission::Limited { retry_after_ms } => {
                let secs = (retry_after_ms / 1000.0).ceil().max(1.0);
                Err(AdmitError::Limited {
                    retry_after_secs: secs,
                })
            }
        }
    }

    /// Storage says the window is now `new`: the cache stays only if it holds the same (our own
    /// `set`); anything else (a reset, a late event of an earlier `set`) drops it.
    pub(crate) fn rate_window_changed(&self, new: &Value) {
        let new = serde_json::from_value::<RateWindow>(new.clone()).ok();
        let mut cache = self.rate_cache.borrow_mut();
        if cache.is_some() && *cache != new {
            *cache = None;
        }
    }

    pub(crate) async fn rate_window(&self) -> RateWindow {
        self.env
            .get(Area::Session, &[keys::RATE_WINDOW])
            .await
            .ok()
            .and_then(|m| m.get(keys::RATE_WINDOW).cloned())
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default()
    }

    pub async fn writes_left(&self, caller: &str) -> usize {
        self.rate_window()
            .await
            .remaining(caller, self.env.now_ms())
    }

    /// Finalizes a write the previous worker left pending as INTERRUPTED: once per worker,
    /// before its first journaled write (the caller holds the write lock) or at start-up.
    pub async fn settle_interrupted_write(&self) -> Result<(), audit::AuditError> {
        if self.journal_settled.get() {
            return Ok(());
        }
        let mut appends = self.audit_lock.lock().await;
        *appends = appends.wrapping_add(1);
        audit::finalize_interrupted(&self.env).await?;
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

    /// Finalizes a journaled write with its result. On failure the pending entry stays, and
    /// the next write settles it (as INTERRUPTED) before it runs.
    pub async fn audit_final(&self, entry: &Entry) {
        let mut appends = self.audit_lock.lock().await;
        *appends = appends.wrapping_add(1);
        if let Err(e) = audit::finalize(&self.env, entry).await {
            self.journal_settled.set(false);
            self.note(format!(
                "audit entry not saved ({} {}): {e}",
                entry.tool, entry.result
            ));
        }
    }

    /// Appends to the audit log. A failure cannot undo the write it records, so it is kept in
    /// the provider's log for the user to see.
    pub async fn audit(&self, entry: &Entry) {
        self.audit_after(entry, None).await;
    }

    /// Reads the tail of the ring a successful attempt's entry goes to, while that attempt still
    /// runs (`try_script`'s execute), so its [`Self::audit_after`] is one `set`. `None` while an
    /// append is in progress or when the read fails (the append then reads for itself).
    pub async fn audit_read_ahead(&self) -> Option<(u64, audit::Tail)> {
        let begun = *self.audit_lock.try_lock()?;
        let tail = audit::read_tail(&self.env, audit::Ring::Effects)
            .await
            .ok()?;
        Some((begun, tail))
    }

    /// [`Self::audit`], with a tail read ahead: used only if no append began since it was read
    /// (every append counts itself under the audit lock), else read again.
    pub async fn audit_after(&self, entry: &Entry, ahead: Option<(u64, audit::Tail)>) {
        let mut appends = self.audit_lock.lock().await;
        let ahead = ahead
            .filter(|(begun, _)| *begun == *appends)
            .map(|(_, t)| t);
        *appends = appends.wrapping_add(1);
        if let Err(e) = audit::append_after(&self.env, entry, ahead).await {
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
    use crate::env::memory::MemoryEnv;
    use crate::env::{Clock, Storage};
    use futures::executor::block_on;

    fn entry(at: f64) -> Entry {
        Entry {
            at,
            tool: "try_script".into(),
            caller: "c".into(),
            result: "ok".into(),
            target: None,
            digest: String::new(),
        }
    }

    fn stored_stamps(p: &Provider<MemoryEnv>, caller: &str) -> usize {
        let w = block_on(p.rate_window());
        MAX_WRITES - w.remaining(caller, p.env.now_ms())
    }

    #[test]
    fn the_rate_window_is_kept_as_written_and_dropped_when_storage_holds_another() {
        let p = Provider::new(MemoryEnv::new());
        let session = |p: &Provider<MemoryEnv>| p.env.dump(Area::Session);
        block_on(p.admit_write("a")).unwrap();
        // Our own `set` comes back as a change event: the cache stays.
        p.storage_changed(Area::Session, &session(&p));
        assert!(p.rate_cache.borrow().is_some());
        // So the next admission does not read storage: it writes the cached window plus one.
        block_on(p.admit_write("a")).unwrap();
        assert_eq!(stored_stamps(&p, "a"), 2);
        for _ in 2..MAX_WRITES {
            block_on(p.admit_write("a")).unwrap();
        }
        assert!(matches!(
            block_on(p.admit_write("a")),
            Err(AdmitError::Limited { .. })
        ));
        // Another hand resets the window (the pages, a test): the cache goes with it.
        block_on(p.env.remove(Area::Session, &[keys::RATE_WINDOW])).unwrap();
        let mut gone = Map::new();
        gone.insert(keys::RATE_WINDOW.to_owned(), Value::Null);
        p.storage_changed(Area::Session, &gone);
        assert!(p.rate_cache.borrow().is_none());
        block_on(p.admit_write("a")).unwrap();
        assert_eq!(stored_stamps(&p, "a"), 1);
        // A failed `set` leaves storage unknown: read it again next time.
        *p.env.fail_writes.borrow_mut() = Some("quota".into());
        assert!(matches!(
            block_on(p.admit_write("a")),
            Err(AdmitError::Storage(_))
        ));
        assert!(p.rate_cache.borrow().is_none());
    }

    #[test]
    fn an_audit_read_ahead_is_used_only_if_nothing_was_appended_since() {
        let p = Provider::new(MemoryEnv::new());
        block_on(p.audit(&entry(1.0)));
        let stale = block_on(p.audit_read_ahead());
        assert!(stale.is_some());
        // Another attempt's entry lands while the try runs: the tail read ahead is stale, and
        // appending to it would drop that entry.
        block_on(p.audit(&entry(2.0)));
        block_on(p.audit_after(&entry(3.0), stale));
        let fresh = block_on(p.audit_read_ahead());
        block_on(p.audit_after(&entry(4.0), fresh));
        let at: Vec<f64> = block_on(audit::read_all(&p.env))
            .unwrap()
            .iter()
            .map(|e| e.at)
            .collect();
        assert_eq!(at, [4.0, 3.0, 2.0, 1.0]);
        // While an append holds the log, nothing is read ahead.
        let _held = block_on(p.audit_lock.lock());
        assert!(block_on(p.audit_read_ahead()).is_none());
    }

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
