//! The provider: the one object the shell drives. It owns no state of its own beyond locks —
//! policy, scripts and audit live in storage and are re-read for every decision — so a recycled
//! service worker loses nothing but in-flight work.

use crate::env::{Area, Env};
use crate::guard::audit::{self, Entry};
use crate::guard::rate_limit::{Admission, RateWindow};
use crate::guard::review::{self, Decision, ReviewRequest, Stub};
use crate::ids::ExtensionId;
use crate::policy::Policy;
use crate::probe::{self, Capability};
use crate::scripts::registry::Registration;
use crate::scripts::sync;
use crate::session::{Phase, Session};
use crate::tools::result::{ErrorCode, ToolError};
use futures::channel::oneshot;
use futures::future::{select, Either};
use futures::lock::{Mutex, MutexGuard};
use serde_json::{json, Map, Value};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

/// Storage keys owned by the provider (the script store and audit log own theirs).
pub mod keys {
    /// `chrome.storage.local`
    pub const POLICY: &str = "policy";
    /// `chrome.storage.session`: survives service-worker recycling, so a stopped worker does not
    /// reset anyone's window.
    pub const RATE_WINDOW: &str = "rateWindow";
}

pub struct Provider<E> {
    pub env: E,
    /// The event loop interleaves tasks at every `await`; each read-modify-write of shared
    /// stored state holds its lock so that no update is lost.
    policy_lock: Mutex<()>,
    write_lock: Mutex<()>,
    rate_lock: Mutex<()>,
    audit_lock: Mutex<()>,
    /// Chrome's registrations may differ from storage (the worker just started, or the API was
    /// unavailable during a write): reconcile at the next chance.
    registry_stale: Cell<bool>,
    /// Problems worth showing the user (e.g. a failed audit write), newest last, bounded.
    pub log: RefCell<Vec<String>>,
    /// Open `lumo:mcp` ports by id. The shell keeps the `Port` objects under the same ids.
    sessions: RefCell<BTreeMap<u64, Rc<Session>>>,
    next_session: Cell<u64>,
    /// Writes waiting for the user's review, by review id.
    reviews: RefCell<BTreeMap<String, Waiting>>,
    /// Sessions whose writes the user allowed without further review ("allow for this session").
    waived: RefCell<BTreeSet<u64>>,
    /// Whether `chrome.userScripts` worked at the last look: coming back marks the registry stale.
    last_available: Cell<bool>,
    /// Called when something a page shows changed (reviews, sessions): the shell refreshes the
    /// badge.
    on_change: RefCell<Option<Box<dyn Fn()>>>,
}

struct Waiting {
    request: ReviewRequest,
    /// The JSON-RPC id of the `tools/call`, so `notifications/cancelled` can find it.
    rpc_id: Value,
    decide: Option<oneshot::Sender<Decision>>,
}

const MAX_LOG: usize = 50;

impl<E: Env> Provider<E> {
    pub fn new(env: E) -> Self {
        Provider {
            env,
            policy_lock: Mutex::new(()),
            write_lock: Mutex::new(()),
            rate_lock: Mutex::new(()),
            audit_lock: Mutex::new(()),
            registry_stale: Cell::new(true),
            log: RefCell::new(Vec::new()),
            sessions: RefCell::new(BTreeMap::new()),
            next_session: Cell::new(1),
            reviews: RefCell::new(BTreeMap::new()),
            waived: RefCell::new(BTreeSet::new()),
            last_available: Cell::new(false),
            on_change: RefCell::new(None),
        }
    }

    pub fn set_on_change(&self, f: Box<dyn Fn()>) {
        *self.on_change.borrow_mut() = Some(f);
    }

    fn changed(&self) {
        if let Some(f) = &*self.on_change.borrow() {
            f();
        }
    }

    /// Registers a new accepted port.
    pub fn open_session(&self, caller: ExtensionId) -> Rc<Session> {
        let id = self.next_session.get();
        self.next_session.set(id + 1);
        let s = Rc::new(Session::new(id, caller, self.env.now_ms()));
        self.sessions.borrow_mut().insert(id, Rc::clone(&s));
        s
    }

    /// Forgets a port (closed by either side): its pending reviews are cancelled and its
    /// "allow for this session" ends. Returns whether it was open.
    pub fn close_session(&self, id: u64) -> bool {
        self.cancel_reviews(id, None);
        self.waived.borrow_mut().remove(&id);
        let removed = self.sessions.borrow_mut().remove(&id);
        match removed {
            Some(s) => {
                s.close();
                self.changed();
                true
            }
            None => false,
        }
    }

    pub fn session(&self, id: u64) -> Option<Rc<Session>> {
        self.sessions.borrow().get(&id).cloned()
    }

    /// Ids of the open ports of `caller`.
    pub fn sessions_of(&self, caller: &ExtensionId) -> Vec<u64> {
        self.sessions
            .borrow()
            .values()
            .filter(|s| &s.caller == caller)
            .map(|s| s.id)
            .collect()
    }

    /// Ids of the sessions that completed initialize (the ones that get notifications).
    pub fn ready_sessions(&self) -> Vec<u64> {
        self.sessions
            .borrow()
            .values()
            .filter(|s| matches!(s.phase(), Some(Phase::Ready { .. })))
            .map(|s| s.id)
            .collect()
    }

    /// The connected indicator: one row per open port.
    pub fn sessions_summary(&self) -> Vec<Value> {
        self.sessions
            .borrow()
            .values()
            .map(|s| {
                json!({
                    "id": s.id,
                    "caller": s.caller,
                    "openedAt": s.opened_at,
                    "state": match s.phase() { Some(Phase::Ready { .. }) => "ready", Some(Phase::Uninitialized) => "connecting", None => "authorizing" },
                    "protocolVersion": match s.phase() { Some(Phase::Ready { version }) => Some(version), _ => None },
                })
            })
            .collect()
    }

    pub fn note(&self, msg: String) {
        let mut log = self.log.borrow_mut();
        if log.len() >= MAX_LOG {
            log.remove(0);
        }
        log.push(msg);
    }

    /// Held while a script is read, checked and written.
    pub async fn write_lock(&self) -> MutexGuard<'_, ()> {
        self.write_lock.lock().await
    }

    /// The rate-limit step: admits one write of `caller` now, or says when to retry.
    pub async fn admit_write(&self, caller: &ExtensionId) -> Result<(), ToolError> {
        let _guard = self.rate_lock.lock().await;
        let mut window = self.rate_window().await;
        let now = self.env.now_ms();
        match window.admit(caller.as_str(), now) {
            Admission::Admitted => {
                window.prune(now);
                let mut m = Map::new();
                m.insert(
                    keys::RATE_WINDOW.to_owned(),
                    serde_json::to_value(&window).unwrap_or(Value::Null),
                );
                // Fail closed: a write whose slot cannot be recorded does not run.
                self.env.set(Area::Session, m).await.map_err(|e| {
                    ToolError::new(
                        ErrorCode::StorageError,
                        format!("could not record the write in the rate window: {e}"),
                    )
                })
            }
            Admission::Limited { retry_after_ms } => {
                let secs = (retry_after_ms / 1000.0).ceil().max(1.0);
                Err(ToolError::new(
                    ErrorCode::RateLimited,
                    format!("rate limit: at most 30 writes per 60 seconds; retry in {secs} s"),
                )
                .with_details(json!({ "retryAfterSeconds": secs })))
            }
        }
    }

    async fn rate_window(&self) -> RateWindow {
        self.env
            .get(Area::Session, &[keys::RATE_WINDOW])
            .await
            .ok()
            .and_then(|m| m.get(keys::RATE_WINDOW).cloned())
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default()
    }

    pub async fn writes_left(&self, caller: &ExtensionId) -> usize {
        self.rate_window()
            .await
            .remaining(caller.as_str(), self.env.now_ms())
    }

    /// Appends to the audit log. A failure cannot undo the write it records, so it is kept in
    /// the provider's log for the user to see.
    pub async fn audit(&self, entry: &Entry) {
        let _guard = self.audit_lock.lock().await;
        if let Err(e) = audit::append(&self.env, entry).await {
            self.note(format!(
                "audit entry not saved ({} {}): {e}",
                entry.tool, entry.result
            ));
        }
    }

    /// Brings one script's registration in line; `true` when it is registered to run now. A
    /// failure marks the registry stale for the next reconcile.
    pub async fn sync_registration(&self, uuid: &str, desired: Option<Registration>) -> bool {
        match sync::sync_one(&self.env, uuid, desired).await {
            Ok(registered) => registered,
            Err(_) => {
                self.registry_stale.set(true);
                false
            }
        }
    }

    /// Reconciles Chrome's registrations with storage when they may differ and the API works.
    /// Cheap when nothing is stale; the shell calls it at start and after each interaction.
    pub async fn ensure_registry(&self) {
        if !self.registry_stale.get() || !self.env.user_scripts_available() {
            return;
        }
        let _guard = self.write_lock.lock().await;
        if !self.registry_stale.get() {
            return;
        }
        match sync::reconcile(&self.env).await {
            Ok(report) => {
                self.registry_stale.set(false);
                for s in report.skipped {
                    self.note(format!("script not registered: {s}"));
                }
            }
            Err(e) => self.note(format!("could not reconcile registrations: {e}")),
        }
    }

    /// Forces the next `ensure_registry` to reconcile (e.g. after an extension update).
    pub fn mark_registry_stale(&self) {
        self.registry_stale.set(true);
    }

    pub fn capability(&self) -> Capability {
        let available = self.env.user_scripts_available();
        if available && !self.last_available.get() {
            // Back on (or first seen): Chrome may have dropped registrations meanwhile.
            self.registry_stale.set(true);
        }
        self.last_available.set(available);
        if available {
            Capability::ready()
        } else {
            Capability::user_scripts_off()
        }
    }

    /// Reads the policy as stored now. A storage failure yields the safe default for decisions
    /// that only read (nobody authorized), never a panic.
    pub async fn policy(&self) -> Policy {
        match self.env.get(Area::Local, &[keys::POLICY]).await {
            Ok(m) => Policy::from_stored(m.get(keys::POLICY)).0,
            Err(_) => Policy {
                endpoint_enabled: false,
                ..Policy::default()
            },
        }
    }

    async fn save_policy(&self, p: &Policy) -> Result<(), String> {
        let mut m = Map::new();
        m.insert(keys::POLICY.to_owned(), p.to_stored());
        self.env
            .set(Area::Local, m)
            .await
            .map_err(|e| format!("could not save the policy: {e}"))
    }

    /// Applies `f` to the stored policy under the policy lock and saves it when `f` says it changed.
    pub async fn update_policy<T>(
        &self,
        f: impl FnOnce(&mut Policy) -> (T, bool),
    ) -> Result<(T, Policy), String> {
        let _guard = self.policy_lock.lock().await;
        let mut p = match self.env.get(Area::Local, &[keys::POLICY]).await {
            Ok(m) => Policy::from_stored(m.get(keys::POLICY)).0,
            Err(e) => return Err(format!("could not read the policy: {e}")),
        };
        let (out, changed) = f(&mut p);
        if changed {
            self.save_policy(&p).await?;
        }
        Ok((out, p))
    }

    pub fn pending_reviews(&self) -> Vec<ReviewRequest> {
        self.reviews
            .borrow()
            .values()
            .map(|w| w.request.clone())
            .collect()
    }

    pub fn is_waived(&self, session: u64) -> bool {
        self.waived.borrow().contains(&session)
    }

    /// Waits for the user's decision on one write, bounded by [`review::REVIEW_TIMEOUT_MS`].
    pub async fn await_review(
        &self,
        request: ReviewRequest,
        rpc_id: Value,
    ) -> Result<Decision, ToolError> {
        if self.reviews.borrow().len() >= review::MAX_PENDING_REVIEWS {
            return Err(ToolError::new(
                ErrorCode::RateLimited,
                format!(
                    "{} writes are already waiting for the user's review; wait for those first",
                    review::MAX_PENDING_REVIEWS
                ),
            ));
        }
        let (tx, rx) = oneshot::channel();
        let id = request.id.clone();
        let session = request.session;
        self.reviews.borrow_mut().insert(
            id.clone(),
            Waiting {
                request,
                rpc_id,
                decide: Some(tx),
            },
        );
        self.save_review_stubs().await;
        self.changed();
        let decision = match select(rx, Box::pin(self.env.sleep(review::REVIEW_TIMEOUT_MS))).await {
            Either::Left((Ok(d), _)) => d,
            Either::Left((Err(_), _)) => Decision::Cancelled,
            Either::Right(_) => Decision::Expired,
        };
        self.reviews.borrow_mut().remove(&id);
        if let Decision::Approve {
            allow_session: true,
        } = decision
        {
            self.waived.borrow_mut().insert(session);
        }
        self.save_review_stubs().await;
        self.changed();
        Ok(decision)
    }

    /// The user's decision from the review surface. False when no such review waits (it
    /// expired, or was already decided).
    pub fn decide(&self, id: &str, decision: Decision) -> bool {
        let sender = self
            .reviews
            .borrow_mut()
            .get_mut(id)
            .and_then(|w| w.decide.take());
        match sender {
            Some(tx) => tx.send(decision).is_ok(),
            None => false,
        }
    }

    /// Cancels the reviews of a session: all of them (port closed) or the one for a cancelled
    /// JSON-RPC request.
    pub fn cancel_reviews(&self, session: u64, rpc_id: Option<&Value>) {
        let senders: Vec<oneshot::Sender<Decision>> = self
            .reviews
            .borrow_mut()
            .values_mut()
            .filter(|w| w.request.session == session && rpc_id.is_none_or(|id| &w.rpc_id == id))
            .filter_map(|w| w.decide.take())
            .collect();
        for tx in senders {
            let _ = tx.send(Decision::Cancelled);
        }
    }

    async fn save_review_stubs(&self) {
        let stubs: Vec<Stub> = self
            .reviews
            .borrow()
            .values()
            .map(|w| w.request.stub())
            .collect();
        let mut m = Map::new();
        m.insert(
            review::STUBS_KEY.to_owned(),
            serde_json::to_value(stubs).unwrap_or(Value::Null),
        );
        if let Err(e) = self.env.set(Area::Session, m).await {
            self.note(format!("could not save pending reviews: {e}"));
        }
    }

    /// At worker start: reviews that were waiting when the previous worker stopped cannot be
    /// answered any more (their port died with it). Each is audited as REVIEW_INTERRUPTED.
    pub async fn resume_interrupted_reviews(&self) {
        let stored = match self.env.get(Area::Session, &[review::STUBS_KEY]).await {
            Ok(m) => m.get(review::STUBS_KEY).cloned().unwrap_or(Value::Null),
            Err(_) => return,
        };
        let stubs: Vec<Stub> = stored
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| serde_json::from_value(v.clone()).ok())
                    .collect()
            })
            .unwrap_or_default();
        let orphans: Vec<Stub> = stubs
            .into_iter()
            .filter(|s| !self.reviews.borrow().contains_key(&s.id))
            .collect();
        if orphans.is_empty() {
            return;
        }
        for s in &orphans {
            self.audit(&Entry {
                at: self.env.now_ms(),
                tool: s.tool.clone(),
                caller: s.caller.clone(),
                result: "REVIEW_INTERRUPTED".to_owned(),
                target: s.target.clone(),
                digest: s.digest.clone(),
            })
            .await;
        }
        self.save_review_stubs().await;
    }

    /// L0: answers one `lumo:probe` message from `sender` (Chrome's `sender.id`, unvalidated).
    pub async fn probe(&self, msg: &Value, sender: Option<&str>) -> Value {
        let cap = self.capability();
        let now = self.env.now_ms();
        match self
            .update_policy(|p| probe::answer(msg, sender, p, &cap, now))
            .await
        {
            Ok((response, _)) => response,
            // Storage is unreadable: still answer, from the defaults, without recording anything.
            Err(_) => {
                let mut p = Policy {
                    endpoint_enabled: false,
                    ..Policy::default()
                };
                probe::answer(msg, sender, &mut p, &cap, now).0
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::memory::MemoryEnv;
    use futures::executor::block_on;
    use serde_json::json;

    const HOST: &str = "mobcibglkcoacmddjpdoknlbbicjchlk";

    fn probe_msg() -> Value {
        json!({"channel": "lumo:probe", "version": 1, "id": 1, "client": {"id": HOST, "name": "Lumo"}})
    }

    #[test]
    fn probe_persists_pending_approval() {
        let p = Provider::new(MemoryEnv::new());
        let r = block_on(p.probe(&probe_msg(), Some(HOST)));
        assert_eq!(r["status"]["pendingApproval"], json!(true));
        let stored = block_on(p.policy());
        assert_eq!(stored.pending.len(), 1);
        assert_eq!(stored.pending[0].name, "Lumo");
    }

    #[test]
    fn probe_reports_capability() {
        let p = Provider::new(MemoryEnv::new());
        p.env.user_scripts.set(false);
        let r = block_on(p.probe(&probe_msg(), Some(HOST)));
        assert_eq!(r["status"]["ready"], json!(false));
    }

    #[test]
    fn unreadable_storage_still_answers_without_authorizing() {
        let p = Provider::new(MemoryEnv::new());
        *p.env.fail_writes.borrow_mut() = Some("QUOTA_BYTES quota exceeded".into());
        let r = block_on(p.probe(&probe_msg(), Some(HOST)));
        assert_eq!(r["ok"], json!(true));
        assert_eq!(r["status"]["authorized"], json!(false));
    }
}
