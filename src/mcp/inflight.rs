//! Requests being handled, per session, so that `notifications/cancelled` can mark one: MCP says
//! the receiver of a cancellation must not send a response for the cancelled request. Work
//! already done stays done (a cancelled write that ran is audited like any other); only the
//! reply is dropped. An entry lives exactly as long as its handler runs, so the table is bounded
//! by the tasks in flight.

use crate::vec_map::VecMap;
use serde_json::Value;
use std::cell::RefCell;

#[derive(Debug, Default)]
struct Entry {
    /// Handlers running under this id (a caller may reuse an id; each is counted).
    running: usize,
    cancelled: bool,
}

#[derive(Debug, Default)]
pub struct InFlight {
    /// Keyed by session and the id's JSON text: ids match exactly (`1` is not `"1"`).
    map: RefCell<VecMap<(u64, String), Entry>>,
}

fn key(session: u64, id: &Value) -> (u64, String) {
    (session, id.to_string())
}

impl InFlight {
    /// A request with this id starts being handled.
    pub fn begin(&self, session: u64, id: &Value) {
        let mut map = self.map.borrow_mut();
        if let Some(e) = map.get_or_insert_with(key(session, id), Entry::default) {
            e.running = e.running.saturating_add(1);
        }
    }

    /// `notifications/cancelled` for `id`. Returns whether such a request is running (a
    /// cancellation for an unknown or finished request is ignored, as MCP says).
    pub fn cancel(&self, session: u64, id: &Value) -> bool {
        match self.map.borrow_mut().get_mut(&key(session, id)) {
            Some(e) => {
                e.cancelled = true;
                true
            }
            None => false,
        }
    }

    /// [`InFlight::begin`], and [`InFlight::end`] when the guard drops (also when the call's
    /// future is dropped unfinished).
    pub fn running(&self, session: u64, id: &Value) -> Running<'_> {
        self.begin(session, id);
        Running {
            flights: self,
            session,
            id: id.clone(),
        }
    }

    /// Whether the running request `id` was cancelled: work that has not begun (a call waiting
    /// for its turn) does not begin.
    pub fn is_cancelled(&self, session: u64, id: &Value) -> bool {
        self.map
            .borrow()
            .get(&key(session, id))
            .is_some_and(|e| e.cancelled)
    }

    /// The handler finished. Returns whether its request was cancelled meanwhile (then no reply
    /// may be sent).
    pub fn end(&self, session: u64, id: &Value) -> bool {
        let mut map = self.map.borrow_mut();
        let k = key(session, id);
        let Some(e) = map.get_mut(&k) else {
            return false;
        };
        let cancelled = e.cancelled;
        e.running = e.running.saturating_sub(1);
        if e.running == 0 {
            map.remove(&k);
        }
        cancelled
    }

    /// The session closed: nothing of it can be answered any more.
    pub fn forget_session(&self, session: u64) {
        self.map.borrow_mut().retain(|(s, _), _| *s != session);
    }

    pub fn len(&self) -> usize {
        self.map.borrow().len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.borrow().is_empty()
    }
}

/// A request in flight until dropped ([`InFlight::running`]).
pub struct Running<'a> {
    flights: &'a InFlight,
    session: u64,
    id: Value,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.flights.end(self.session, &self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cancelled_requests_are_marked_until_they_end() {
        let f = InFlight::default();
        f.begin(1, &json!(7));
        assert!(!f.cancel(1, &json!("7")), "ids match exactly");
        assert!(!f.cancel(2, &json!(7)), "and per session");
        assert!(f.cancel(1, &json!(7)));
        assert!(f.end(1, &json!(7)));
        assert!(f.is_empty());
        // Unknown or finished: ignored.
        assert!(!f.cancel(1, &json!(7)));
        f.begin(1, &json!(8));
        assert!(!f.end(1, &json!(8)));
        // A reused id: both handlers see the cancellation, the entry goes with the last.
        f.begin(1, &json!("a"));
        f.begin(1, &json!("a"));
        f.cancel(1, &json!("a"));
        assert!(f.end(1, &json!("a")));
        assert_eq!(f.len(), 1);
        assert!(f.end(1, &json!("a")));
        f.begin(3, &json!(1));
        f.forget_session(3);
        assert!(f.is_empty());
    }
}
