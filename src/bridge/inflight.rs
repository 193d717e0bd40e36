//! Requests this end sent and awaits an answer for, keyed by id. Seed 001's lifecycle: a
//! response resolves its entry; a timeout fails that one request; a disconnect fails every
//! in-flight request at once. Whether a timed-out request may be sent again is decided here, once,
//! from what it is ([`retryable`]): only idempotent reads, never a write.

use super::types;
use crate::tools::catalog;
use crate::vec_map::VecMap;
use serde_json::Value;

/// At most this many requests wait at once; more is refused rather than queued without bound.
pub const MAX_IN_FLIGHT: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub kind: String,
    pub deadline: u64,
    pub retryable: bool,
}

/// Why a request failed without a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// No response by its deadline. `retryable` says whether sending it again is safe.
    Timeout { retryable: bool },
    /// The socket closed first.
    Disconnected,
}

#[derive(Debug, Default)]
pub struct InFlight {
    next_id: u64,
    // Sorted by id: the earliest deadline and the failure order on disconnect are deterministic.
    pending: VecMap<u64, Pending>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddError {
    Full,
}

impl InFlight {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.pending.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Registers a request; returns its id (incrementing, from 1).
    pub fn add(
        &mut self,
        kind: &str,
        payload: &Value,
        now: u64,
        timeout_ms: u64,
    ) -> Result<u64, AddError> {
        if self.pending.len() >= MAX_IN_FLIGHT {
            return Err(AddError::Full);
        }
        // Ids never repeat within a connection; wrapping would need 2^53 requests.
        self.next_id = self.next_id.saturating_add(1).min(super::frame::MAX_ID);
        let id = self.next_id;
        self.pending.insert(
            id,
            Pending {
                kind: kind.to_string(),
                deadline: now.saturating_add(timeout_ms),
                retryable: retryable(kind, payload),
            },
        );
        Ok(id)
    }

    /// The entry a response answers, if it is still waiting (a late answer after a timeout
    /// finds nothing and is ignored).
    pub fn resolve(&mut self, id: u64) -> Option<Pending> {
        self.pending.remove(&id)
    }

    /// The earliest deadline, for the shell's timer.
    pub fn next_deadline(&self) -> Option<u64> {
        self.pending.values().map(|p| p.deadline).min()
    }

    /// Removes and returns every request whose deadline has passed.
    pub fn expire(&mut self, now: u64) -> Vec<(u64, Pending, Failure)> {
        let due: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(id, _)| *id)
            .collect();
        due.into_iter()
            .filter_map(|id| {
                self.pending.remove(&id).map(|p| {
                    let f = Failure::Timeout {
                        retryable: p.retryable,
                    };
                    (id, p, f)
                })
            })
            .collect()
    }

    /// Fails everything: the socket is gone.
    pub fn disconnect(&mut self) -> Vec<(u64, Pending, Failure)> {
        std::mem::take(&mut self.pending)
            .into_iter()
            .map(|(id, p)| (id, p, Failure::Disconnected))
            .collect()
    }
}

/// Whether a request may be sent again after a timeout: only a `call_tool` of a tool the
/// catalogue declares a read (reads change nothing, so a duplicate is harmless). Writes, the
/// handshake and anything unknown are never retried: a write that timed out may have happened.
pub fn retryable(kind: &str, payload: &Value) -> bool {
    kind == types::CALL_TOOL
        && payload
            .get("name")
            .and_then(Value::as_str)
            .and_then(catalog::find)
            .is_some_and(|t| !t.is_write())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str) -> Value {
        json!({"name": name, "arguments": {}})
    }

    #[test]
    fn only_catalogue_reads_are_retryable() {
        for read in ["status", "list_scripts", "get_script", "match_url"] {
            assert!(retryable(types::CALL_TOOL, &call(read)), "{read}");
        }
        for write in [
            "write_script",
            "patch_script",
            "set_script_enabled",
            "delete_script",
        ] {
            assert!(!retryable(types::CALL_TOOL, &call(write)), "{write}");
        }
        assert!(!retryable(types::CALL_TOOL, &call("no_such_tool")));
        assert!(!retryable(types::CALL_TOOL, &json!({})));
        assert!(!retryable(types::HELLO, &call("status")));
    }

    #[test]
    fn ids_increment_and_responses_resolve_once() {
        let mut t = InFlight::new();
        let a = t.add("call_tool", &call("status"), 0, 100).unwrap();
        let b = t.add("call_tool", &call("status"), 0, 100).unwrap();
        assert_eq!((a, b), (1, 2));
        assert!(t.resolve(a).is_some());
        assert!(t.resolve(a).is_none(), "a duplicate response finds nothing");
        assert!(t.resolve(99).is_none());
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn a_timeout_fails_only_the_late_request() {
        let mut t = InFlight::new();
        let early = t.add("call_tool", &call("list_scripts"), 0, 100).unwrap();
        let late = t.add("call_tool", &call("write_script"), 50, 1000).unwrap();
        assert_eq!(t.next_deadline(), Some(100));
        assert!(t.expire(99).is_empty());
        let failed = t.expire(100);
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].0, early);
        assert_eq!(failed[0].2, Failure::Timeout { retryable: true });
        assert_eq!(t.next_deadline(), Some(1050));
        let failed = t.expire(2000);
        assert_eq!(failed[0].0, late);
        assert_eq!(failed[0].2, Failure::Timeout { retryable: false });
    }

    #[test]
    fn a_disconnect_fails_everything_at_once() {
        let mut t = InFlight::new();
        for _ in 0..5 {
            t.add("call_tool", &call("status"), 0, 1_000_000).unwrap();
        }
        let failed = t.disconnect();
        assert_eq!(failed.len(), 5);
        assert!(failed.iter().all(|f| f.2 == Failure::Disconnected));
        assert!(t.is_empty());
        assert_eq!(t.next_deadline(), None);
    }

    #[test]
    fn the_table_is_bounded_and_deadlines_saturate() {
        let mut t = InFlight::new();
        for _ in 0..MAX_IN_FLIGHT {
            t.add("call_tool", &Value::Null, u64::MAX, u64::MAX)
                .unwrap();
        }
        assert_eq!(t.add("call_tool", &Value::Null, 0, 1), Err(AddError::Full));
        assert_eq!(t.next_deadline(), Some(u64::MAX));
    }
}
