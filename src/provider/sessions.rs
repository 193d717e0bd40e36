//! Open `lumo:mcp` ports, by id: the connected indicator and who gets notifications.

use super::Provider;
use crate::env::Env;
use crate::ids::ExtensionId;
use crate::policy::{Access, Policy};
use crate::session::{Phase, Session};
use serde_json::{json, Value};
use std::rc::Rc;

/// Ports one caller may hold that are not open ([`Provider::admits_port`]). A host opens one
/// per connection, and a reconnect after the worker was recycled one more.
pub const MAX_UNOPENED_PORTS: usize = 8;
/// Ports of one caller off the allowlist refused per [`REFUSED_WINDOW_MS`] before its next
/// ones are closed unread: a refused port closes 100 ms after its answer, so the bound above
/// alone let such a caller open and fill about 80 a second.
pub const MAX_REFUSED_PORTS: u32 = 8;
pub const REFUSED_WINDOW_MS: f64 = 10_000.0;
/// Callers whose refusals are remembered at once (past it, the oldest windows go).
const MAX_REFUSED_CALLERS: usize = 256;

impl<E: Env> Provider<E> {
    /// Whether a new port of `caller` may open a session: not while it holds
    /// [`MAX_UNOPENED_PORTS`] ports that are not open (being authorized, or refused and
    /// lingering). Any extension may connect (`externally_connectable` ids `*`), and each such
    /// port is read, buffered and answered; without this bound one extension left off the
    /// allowlist opening hundreds of them slowed every approved caller past its probe's 1500 ms.
    pub fn admits_port(&self, caller: &ExtensionId) -> bool {
        let now = self.env.now_ms();
        let refused = self
            .refused_ports
            .borrow()
            .get(caller)
            .filter(|(start, _)| now >= *start && now - start < REFUSED_WINDOW_MS)
            .map_or(0, |(_, n)| *n);
        refused < MAX_REFUSED_PORTS
            && self
                .sessions
                .borrow()
                .values()
                .filter(|s| &s.caller == caller && s.phase().is_none())
                .count()
                < MAX_UNOPENED_PORTS
    }

    /// Authorizes a session with `access` (`Session::authorize`), counting a refusal of a
    /// caller off the allowlist toward its window ([`Provider::admits_port`]). An allowlisted
    /// caller refused because the user turned agent access off keeps getting the reason on
    /// every port, however often it reconnects: its host tells the user what to fix.
    pub fn authorize(&self, session: &Session, access: Access) -> crate::session::Authorized {
        let out = session.authorize(access);
        if access == Access::NotAllowlisted {
            let now = self.env.now_ms();
            let mut map = self.refused_ports.borrow_mut();
            map.retain(|_, (start, _)| now >= *start && now - *start < REFUSED_WINDOW_MS);
            if map.len() >= MAX_REFUSED_CALLERS && !map.contains_key(&session.caller) {
                map.clear();
            }
            if let Some(w) = map.get_or_insert_with(session.caller.clone(), || (now, 0)) {
                w.1 = w.1.saturating_add(1);
            }
        }
        out
    }

    /// Registers a new accepted port.
    pub fn open_session(&self, caller: ExtensionId) -> Rc<Session> {
        let id = self.next_session.get();
        self.next_session.set(id + 1);
        let s = Rc::new(Session::new(id, caller, self.env.now_ms()));
        self.sessions.borrow_mut().insert(id, Rc::clone(&s));
        s
    }

    /// A session was authorized, or answered a message: its caller's `lastSeen`
    /// (`Policy::note_session`), refreshed when the session says it is due (`Session::seen_due`:
    /// at most once a minute per session, so a session open for hours keeps its caller seen
    /// without each call reading the policy). Not storing it changes nothing for the session.
    pub async fn note_session(&self, session: &Session) {
        let now = self.env.now_ms();
        if !session.seen_due(now) {
            return;
        }
        let _ = self
            .update_policy(|p| ((), p.note_session(&session.caller, now)))
            .await;
    }

    /// Forgets a port (closed by either side): its pending reviews are cancelled and its
    /// "allow for this session" ends. Returns whether it was open.
    pub fn close_session(&self, id: u64) -> bool {
        self.cancel_reviews(id, None);
        self.waived.borrow_mut().remove(&id);
        self.inflight.forget_session(id);
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

    /// Revocation: closes at once, in the core, every session whose caller `policy` no longer
    /// grants (removed, denied, endpoint off) — its waiting reviews are cancelled and its "allow
    /// for this session" ends with it — and returns their ids for the shell to disconnect.
    /// Only authorized (open) sessions are closed: a refused port is left to finish answering,
    /// and one still authorizing gets its refusal, with the reason, from its own check (any
    /// call it makes is checked again anyway).
    pub fn revoke(&self, policy: &Policy) -> Vec<u64> {
        let ids: Vec<u64> = self
            .sessions
            .borrow()
            .values()
            .filter(|s| s.phase().is_some() && policy.access(Some(&s.caller)) != Access::Granted)
            .map(|s| s.id)
            .collect();
        for id in &ids {
            self.close_session(*id);
        }
        ids
    }

    /// Ends every "allow for this session" (the review switch was turned on).
    pub fn drop_allowances(&self) {
        self.waived.borrow_mut().clear();
    }

    /// Records the user's "allow for this session", only while that session is open: a session
    /// revoked while the decision travelled must not leave an allowance behind.
    pub(crate) fn allow_session(&self, session: u64) {
        if self.session_open(session) {
            self.waived.borrow_mut().insert(session);
        }
    }

    /// Whether `id` is a session still open: a port's, or the local bridge's.
    pub(crate) fn session_open(&self, id: u64) -> bool {
        self.sessions.borrow().contains_key(&id) || self.bridge_session() == Some(id)
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

    /// The toolbar badge (`badge::badge`) as things stand. Asked after every message, so it
    /// counts in place: no policy, review or session row is copied.
    pub async fn badge(&self) -> crate::badge::Badge {
        let cached = self.policy_cache.borrow().as_ref().map(|p| p.pending.len());
        let approvals = match cached {
            Some(n) => n,
            None => self.policy().await.pending.len(),
        };
        let open = self
            .sessions
            .borrow()
            .values()
            .filter(|s| !s.is_refused())
            .count()
            + usize::from(self.bridge.borrow().session.is_some());
        crate::badge::badge(approvals, self.reviews.borrow().len(), open)
    }

    /// The connected indicator: one row per open port.
    pub fn sessions_summary(&self) -> Vec<Value> {
        let bridge = self.bridge_summary();
        self.sessions
            .borrow()
            .values()
            .filter(|s| !s.is_refused())
            .map(|s| {
                json!({
                    "id": s.id,
                    "caller": s.caller,
                    "openedAt": s.opened_at,
                    "state": match s.phase() { Some(Phase::Ready { .. }) => "ready", Some(Phase::Uninitialized) => "connecting", None => "authorizing" },
                    "protocolVersion": match s.phase() { Some(Phase::Ready { version }) => Some(version), _ => None },
                })
            })
            .chain(bridge)
            .collect()
    }
}
