//! Open `lumo:mcp` ports, by id: the connected indicator and who gets notifications.

use super::Provider;
use crate::env::Env;
use crate::ids::ExtensionId;
use crate::session::{Phase, Session};
use serde_json::{json, Value};
use std::rc::Rc;

impl<E: Env> Provider<E> {
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
            .collect()
    }
}
