//! Write rate limit: a sliding window of [`MAX_WRITES`] calls per [`WINDOW_MS`] per caller.
//!
//! Time is injected (ms since the epoch, as JS `Date.now()` gives) and the state is plain data, so
//! the shell can keep it in `chrome.storage.session` between calls.
//!
//! Decisions made here:
//! - A stamp `s` is in the window at `now` iff `now - WINDOW_MS < s`: a stamp exactly
//!   `WINDOW_MS` old has left.
//! - Refused attempts are not recorded: a refused write does no work, so it must not extend the
//!   lock-out.
//! - Clock going backwards: stamps later than `now` are clamped to `now`, i.e. counted as the
//!   most recent writes. Clamping only ever moves a stamp to a later moment of real time, so each
//!   write stays counted for at least `WINDOW_MS` of real time (no 31 writes within 60 real
//!   seconds), while a large backward jump locks a caller out for at most `WINDOW_MS` instead of
//!   for the size of the jump.
//! - Non-finite `now` (NaN, ±inf): the write is refused, nothing is recorded, `retry_after_ms` is
//!   `WINDOW_MS`; `prune` leaves the state untouched. Failing closed is safe; the clock is broken.
//! - Bounds: at most [`MAX_WRITES`] stamps per caller, at most [`MAX_CALLERS`] callers, and caller
//!   keys of at most 71 bytes (ids longer than [`MAX_CALLER_KEY`] are stored as `sha256:<hex>`,
//!   which no direct id can equal because it is longer than the limit). When a new caller arrives
//!   with the table full of callers still in their window, the caller whose newest write is oldest
//!   is forgotten (ties: the smallest key). That only ever lets the least recently active caller
//!   write again early; refusing new callers instead would let anyone lock everyone else out.
#![warn(clippy::must_use_candidate)] // pure decisions: a result dropped is a bug

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::digest::sha256_hex;

pub const WINDOW_MS: f64 = 60_000.0;
pub const MAX_WRITES: usize = 30;
/// Callers tracked at once; beyond it the least recently active is forgotten.
pub const MAX_CALLERS: usize = 1024;
/// Caller ids up to this many bytes are stored as given; longer ones are hashed.
pub const MAX_CALLER_KEY: usize = 64;

/// Timestamps (ms) of the admitted writes of each caller still inside the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RateWindow {
    #[serde(default)]
    callers: BTreeMap<String, Vec<f64>>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Admission {
    Admitted,
    /// Refused; the earliest time a retry can succeed is `retry_after_ms` from now (finite, in
    /// `0.0..=WINDOW_MS`).
    Limited {
        retry_after_ms: f64,
    },
}

impl RateWindow {
    /// Decide for one write attempt by `caller` at `now_ms`; records it when admitted. Refused
    /// attempts are NOT recorded (a refused write does no work, so it must not extend the
    /// lock-out).
    pub fn admit(&mut self, caller: &str, now_ms: f64) -> Admission {
        if !now_ms.is_finite() {
            return Admission::Limited {
                retry_after_ms: WINDOW_MS,
            };
        }
        let key = caller_key(caller);
        if let Some(stamps) = self.callers.get_mut(key.as_ref()) {
            normalise(stamps, now_ms);
            if stamps.len() >= MAX_WRITES {
                // Sorted and truncated to MAX_WRITES: the first stamp is the next to leave.
                let oldest = stamps.first().copied().unwrap_or(now_ms);
                let retry = (oldest + WINDOW_MS - now_ms).clamp(0.0, WINDOW_MS);
                return Admission::Limited {
                    retry_after_ms: retry,
                };
            }
            // Every stamp is <= now after normalise, so pushing keeps the vector sorted.
            stamps.push(now_ms);
            return Admission::Admitted;
        }
        if self.callers.len() >= MAX_CALLERS {
            self.prune(now_ms);
        }
        self.evict_to(MAX_CALLERS - 1);
        self.callers.insert(key.into_owned(), vec![now_ms]);
        Admission::Admitted
    }

    /// How many writes `caller` may still make in the window at `now_ms` (read-only).
    #[must_use]
    pub fn remaining(&self, caller: &str, now_ms: f64) -> usize {
        let key = caller_key(caller);
        let used = self.callers.get(key.as_ref()).map_or(0, |stamps| {
            stamps
                .iter()
                .filter(|s| **s > now_ms - WINDOW_MS || s.is_nan())
                .count()
        });
        MAX_WRITES.saturating_sub(used)
    }

    /// Drop timestamps that can no longer matter (older than now - WINDOW_MS) and callers with
    /// none; keeps storage small. Also restores the bounds on state loaded from storage.
    pub fn prune(&mut self, now_ms: f64) {
        if !now_ms.is_finite() {
            return;
        }
        self.callers.retain(|_, stamps| {
            normalise(stamps, now_ms);
            !stamps.is_empty()
        });
        self.evict_to(MAX_CALLERS);
    }

    /// Forget least recently active callers until at most `max` remain.
    fn evict_to(&mut self, max: usize) {
        while self.callers.len() > max {
            // NaN cannot be stored through JSON; total_cmp keeps the choice deterministic anyway.
            let victim = self
                .callers
                .iter()
                .map(|(k, s)| (k, s.last().copied().unwrap_or(f64::NEG_INFINITY)))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(k, _)| k.clone());
            match victim {
                Some(k) => {
                    self.callers.remove(&k);
                }
                None => break,
            }
        }
    }
}

fn caller_key(caller: &str) -> Cow<'_, str> {
    if caller.len() <= MAX_CALLER_KEY {
        Cow::Borrowed(caller)
    } else {
        Cow::Owned(format!("sha256:{}", sha256_hex(caller.as_bytes())))
    }
}

/// Clamp future (and NaN) stamps to `now`, drop the expired, sort, keep the newest MAX_WRITES.
/// Stored state may come from an older clock or from storage, so nothing about it is assumed.
fn normalise(stamps: &mut Vec<f64>, now_ms: f64) {
    let cutoff = now_ms - WINDOW_MS;
    for s in stamps.iter_mut() {
        // f64::min returns the non-NaN operand, so NaN becomes `now` (counted, fail closed).
        *s = s.min(now_ms);
    }
    stamps.retain(|s| *s > cutoff);
    crate::sort::sort_by(stamps, f64::total_cmp);
    let excess = stamps.len().saturating_sub(MAX_WRITES);
    stamps.drain(..excess);
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: f64 = 1_700_000_000_000.0;

    fn limited(a: Admission) -> f64 {
        match a {
            Admission::Limited { retry_after_ms } => retry_after_ms,
            Admission::Admitted => panic!("expected Limited"),
        }
    }

    fn fill(w: &mut RateWindow, caller: &str, now: f64) {
        for _ in 0..MAX_WRITES {
            assert_eq!(w.admit(caller, now), Admission::Admitted);
        }
    }

    #[test]
    fn thirty_per_window_and_exact_edge() {
        let mut w = RateWindow::default();
        fill(&mut w, "a", T);
        let retry = limited(w.admit("a", T + 59_999.999));
        assert!((retry - 0.001).abs() < 1e-3, "{retry}");
        assert!(retry > 0.0);
        // A stamp exactly WINDOW_MS old is out: all 30 leave together.
        assert_eq!(w.admit("a", T + 60_000.0), Admission::Admitted);
    }

    #[test]
    fn refused_attempts_do_not_extend_lockout() {
        let mut w = RateWindow::default();
        fill(&mut w, "a", T);
        for i in 0..1000 {
            let now = T + f64::from(i) * 59.0;
            let retry = limited(w.admit("a", now));
            assert_eq!(retry, T + WINDOW_MS - now);
        }
        assert_eq!(w.admit("a", T + WINDOW_MS), Admission::Admitted);
    }

    #[test]
    fn window_slides_one_stamp_at_a_time() {
        let mut w = RateWindow::default();
        for i in 0..30 {
            assert_eq!(w.admit("a", T + f64::from(i) * 1000.0), Admission::Admitted);
        }
        assert_eq!(limited(w.admit("a", T + 59_000.0)), 1000.0);
        // The first stamp leaves at T+60s, freeing exactly one slot.
        assert_eq!(w.admit("a", T + 60_000.0), Admission::Admitted);
        assert_eq!(limited(w.admit("a", T + 60_000.0)), 1000.0);
        assert_eq!(w.admit("a", T + 61_000.0), Admission::Admitted);
    }

    #[test]
    fn callers_are_isolated() {
        let mut w = RateWindow::default();
        fill(&mut w, "a", T);
        limited(w.admit("a", T + 1.0));
        fill(&mut w, "b", T + 1.0);
        limited(w.admit("b", T + 2.0));
        assert_eq!(w.admit("c", T + 2.0), Admission::Admitted);
    }

    #[test]
    fn clock_going_backwards() {
        let mut w = RateWindow::default();
        fill(&mut w, "a", T);
        // Stamps in the future count as recent: still limited, lock-out at most one window.
        let back = T - 3_600_000.0;
        assert_eq!(limited(w.admit("a", back)), WINDOW_MS);
        assert_eq!(limited(w.admit("a", back + 59_999.0)), 1.0);
        assert_eq!(w.admit("a", back + WINDOW_MS), Admission::Admitted);

        // Interleaved: 15 at T, 15 one second earlier; the 31st is refused on either clock.
        let mut w = RateWindow::default();
        for _ in 0..15 {
            assert_eq!(w.admit("b", T), Admission::Admitted);
            assert_eq!(w.admit("b", T - 1000.0), Admission::Admitted);
        }
        limited(w.admit("b", T - 1000.0));
        limited(w.admit("b", T));
        limited(w.admit("b", T - 500.0));
    }

    #[test]
    fn never_more_than_thirty_per_real_window_when_clock_steps_back() {
        // Real time advances; the clock reads real + offset, and the offset only ever drops
        // (backward corrections). Forward jumps are indistinguishable from time passing, so no
        // limiter can hold against them. Integer ms keep the arithmetic exact.
        let mut w = RateWindow::default();
        let mut admitted_real: Vec<f64> = Vec::new();
        let (mut real, mut offset) = (T, 0.0);
        let mut x: u32 = 12345;
        for _ in 0..50_000 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            real += f64::from((x >> 8) % 3000);
            if (x >> 4) % 50 == 0 {
                offset -= f64::from((x >> 12) % 200_000);
            }
            if w.admit("a", real + offset) == Admission::Admitted {
                let recent = admitted_real
                    .iter()
                    .filter(|r| **r > real - WINDOW_MS)
                    .count();
                assert!(
                    recent < MAX_WRITES,
                    "31st write within 60 s of real time at {real}"
                );
                admitted_real.push(real);
            }
        }
        assert!(admitted_real.len() > 1000);
    }

    #[test]
    fn non_finite_now_is_refused_and_not_recorded() {
        let mut w = RateWindow::default();
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(limited(w.admit("a", bad)), WINDOW_MS);
        }
        assert_eq!(w, RateWindow::default());
        fill(&mut w, "a", T);
        let before = w.clone();
        w.prune(f64::NAN);
        assert_eq!(w, before);
        limited(w.admit("a", T + 1.0));
    }

    #[test]
    fn prune_drops_old_stamps_and_empty_callers() {
        let mut w = RateWindow::default();
        w.admit("a", T);
        w.admit("a", T + 30_000.0);
        w.admit("b", T);
        w.prune(T + 60_000.0);
        assert_eq!(w.callers.len(), 1);
        assert_eq!(w.callers.get("a"), Some(&vec![T + 30_000.0]));
        w.prune(T + 90_000.0);
        assert_eq!(w, RateWindow::default());
    }

    #[test]
    fn per_caller_stamps_bounded() {
        let mut w = RateWindow::default();
        for i in 0..10_000 {
            w.admit("a", T + f64::from(i) * 100.0);
            assert!(w.callers.get("a").map_or(0, Vec::len) <= MAX_WRITES);
        }
    }

    #[test]
    fn caller_count_bounded_least_recent_forgotten() {
        let mut w = RateWindow::default();
        for i in 0..MAX_CALLERS {
            let now = T + i as f64;
            assert_eq!(w.admit(&format!("c{i}"), now), Admission::Admitted);
        }
        // c0 writes again, so c1 now has the oldest newest-stamp.
        w.admit("c0", T + 5000.0);
        assert_eq!(w.admit("new", T + 5001.0), Admission::Admitted);
        assert_eq!(w.callers.len(), MAX_CALLERS);
        assert!(w.callers.contains_key("c0"));
        assert!(!w.callers.contains_key("c1"));
        assert!(w.callers.contains_key("new"));
        // Expired callers are pruned first instead of evicting live ones.
        let later = T + 5001.0 + WINDOW_MS - 1.0;
        w.admit("c0", later - 1.0);
        w.admit("new", later - 1.0);
        assert_eq!(w.admit("newer", later), Admission::Admitted);
        assert_eq!(w.callers.len(), 3);
    }

    #[test]
    fn long_caller_ids_are_hashed_and_distinct() {
        let mut w = RateWindow::default();
        let long_a = "a".repeat(10_000);
        let long_b = format!("{}b", "a".repeat(9_999));
        fill(&mut w, &long_a, T);
        limited(w.admit(&long_a, T));
        assert_eq!(w.admit(&long_b, T), Admission::Admitted);
        assert!(w.callers.keys().all(|k| k.len() <= 71));
        // An id spelling the hashed key is its own caller (it is hashed too, being > 64 bytes).
        let spelled = format!("sha256:{}", sha256_hex(long_a.as_bytes()));
        assert_eq!(w.admit(&spelled, T), Admission::Admitted);
        let exact = "x".repeat(MAX_CALLER_KEY);
        w.admit(&exact, T);
        assert!(w.callers.contains_key(&exact));
    }

    #[test]
    fn serde_round_trip_and_hostile_stored_state() {
        let mut w = RateWindow::default();
        fill(&mut w, "a", T);
        w.admit("b", T);
        let json = serde_json::to_string(&w).unwrap();
        let back: RateWindow = serde_json::from_str(&json).unwrap();
        assert_eq!(back, w);
        let empty: RateWindow = serde_json::from_str("{}").unwrap();
        assert_eq!(empty, RateWindow::default());

        // Unsorted, oversized, far-future stamps as if tampered with: still bounded, no panic.
        let mut stamps: Vec<f64> = (0..100).map(|i| T - f64::from(i)).collect();
        stamps.push(T + 1e15);
        let mut w: RateWindow = serde_json::from_value(serde_json::json!({"callers": {
            "a": stamps,
            "b": [1e308, -1e308, 0.0],
        }}))
        .unwrap();
        assert_eq!(limited(w.admit("a", T)), WINDOW_MS - 28.0);
        assert!(w.callers.get("a").map_or(0, Vec::len) <= MAX_WRITES);
        assert_eq!(w.admit("b", T), Admission::Admitted);
        w.prune(T);
        assert!(w.callers.values().all(|s| s.len() <= MAX_WRITES));
    }
}
