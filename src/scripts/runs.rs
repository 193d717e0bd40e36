//! What registered scripts did on real page loads: a bounded ring of run reports per script in
//! `chrome.storage.local` (`runs/<uuid>`), so it survives worker and browser restarts. Kept
//! while the script is in the trash, removed with it when it is purged (`trash::purged_keys`).
//!
//! Each run gets a cursor (`id`): a number that only grows, across all scripts, so an agent can
//! ask for the runs after the last one it saw (`script_runs {since}`). It is the worker's clock in
//! ms, bumped past the last one given (`runs/cursor`), so it also survives restarts.

use crate::channel::message::RunReport;
use serde_json::{json, Map, Value};

/// Runs kept per script (oldest dropped first).
pub const MAX_RUNS: usize = 50;
/// A script's ring as stored JSON, in bytes (oldest dropped first past it).
pub const MAX_RING_BYTES: usize = 64 * 1024;
/// The storage key of the last cursor given.
pub const CURSOR_KEY: &str = "runs/cursor";

pub fn runs_key(uuid: &str) -> String {
    format!("runs/{uuid}")
}

/// Where and when a run happened, from Chrome's sender and the worker's clock (never from the
/// message).
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    pub uuid: String,
    pub revision: u64,
    pub url: String,
    pub frame_id: Option<i64>,
    pub tab_id: Option<i64>,
    pub at: f64,
}

/// One run as stored and as `script_runs` returns it.
pub fn run_json(id: u64, seen: &Seen, r: &RunReport) -> Value {
    json!({
        "id": id,
        "uuid": seen.uuid,
        "revision": seen.revision,
        "url": crate::text::ellipsize(&seen.url, 2048),
        "frameId": seen.frame_id,
        "tabId": seen.tab_id,
        "at": seen.at,
        "runAt": r.run_at.as_str(),
        "durationMs": (r.duration_ms * 10.0).round() / 10.0,
        "ok": r.error.is_none(),
        "error": r.error.as_ref().map(|e| json!({
            "name": e.name, "message": e.message, "line": e.line, "column": e.column
        })),
        "console": r.console.iter().map(|l| json!({
            "level": l.level, "text": l.text, "line": l.line
        })).collect::<Vec<_>>(),
        "consoleDropped": r.console_dropped,
    })
}

/// A stored ring, read leniently: anything that is not a run object is skipped.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ring {
    pub runs: Vec<Value>,
    /// Reports refused by the rate limit (they were never stored).
    pub dropped: u64,
}

impl Ring {
    pub fn decode(v: Option<&Value>) -> Ring {
        let Some(o) = v.and_then(Value::as_object) else {
            return Ring::default();
        };
        Ring {
            runs: o
                .get("runs")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter(|r| r.get("id").and_then(Value::as_u64).is_some())
                        .take(MAX_RUNS)
                        .cloned()
                        .collect()
                })
                .unwrap_or_default(),
            dropped: o.get("dropped").and_then(Value::as_u64).unwrap_or(0),
        }
    }

    pub fn encode(&self) -> Value {
        json!({ "v": 1, "runs": self.runs, "dropped": self.dropped })
    }

    /// Adds a run, then drops the oldest until the ring is within both bounds. A run bigger than
    /// the byte bound alone is kept without its console lines.
    pub fn push(&mut self, mut run: Value, dropped: u64) {
        self.dropped = self.dropped.saturating_add(dropped);
        if json_len(&run) > MAX_RING_BYTES / 2 {
            if let Some(o) = run.as_object_mut() {
                let n = o
                    .get("console")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                let before = o.get("consoleDropped").and_then(Value::as_u64).unwrap_or(0);
                o.insert("console".into(), json!([]));
                o.insert(
                    "consoleDropped".into(),
                    json!(before.saturating_add(u64::try_from(n).unwrap_or(u64::MAX))),
                );
            }
        }
        self.runs.push(run);
        while self.runs.len() > MAX_RUNS
            || (self.runs.len() > 1 && json_len(&self.encode()) > MAX_RING_BYTES)
        {
            self.runs.remove(0);
        }
    }
}

fn json_len(v: &Value) -> usize {
    serde_json::to_string(v).map_or(usize::MAX, |s| s.len())
}

/// The next cursor: the clock in whole ms, or one past the last one given if the clock is behind.
pub fn next_cursor(last: u64, now_ms: f64) -> u64 {
    let now = if now_ms.is_finite() && now_ms > 0.0 {
        // Clamped, so the cast is exact.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let n = now_ms.min(9.0e15) as u64;
        n
    } else {
        0
    };
    now.max(last.saturating_add(1))
}

/// The runs of several rings after `since`, errors only if asked, newest first, at most `max`;
/// and whether more matched.
pub fn select(
    rings: &[Ring],
    since: Option<u64>,
    errors_only: bool,
    max: usize,
) -> (Vec<Value>, bool) {
    let mut all: Vec<&Value> = rings
        .iter()
        .flat_map(|r| r.runs.iter())
        .filter(|r| since.is_none_or(|s| id_of(r) > s))
        .filter(|r| !errors_only || r.get("ok") == Some(&Value::Bool(false)))
        .collect();
    all.sort_by_key(|r| std::cmp::Reverse(id_of(r)));
    let more = all.len() > max;
    (all.into_iter().take(max).cloned().collect(), more)
}

fn id_of(r: &Value) -> u64 {
    r.get("id").and_then(Value::as_u64).unwrap_or(0)
}

/// The last run of a ring, summarised for the options page's row.
pub fn last_run_summary(ring: &Ring) -> Option<Value> {
    let r = ring.runs.iter().max_by_key(|r| id_of(r))?;
    let mut o = Map::new();
    for k in ["id", "at", "url", "ok", "revision"] {
        o.insert(k.into(), r.get(k).cloned().unwrap_or(Value::Null));
    }
    Some(Value::Object(o))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::message::{RunAt, RunError, RunLog};

    fn report(lines: usize, width: usize) -> RunReport {
        RunReport {
            run_at: RunAt::DocumentIdle,
            duration_ms: 1.234,
            error: Some(RunError {
                name: "TypeError".into(),
                message: "boom".into(),
                line: Some(7),
                column: Some(3),
            }),
            console: (0..lines)
                .map(|_| RunLog {
                    level: "log",
                    text: "z".repeat(width),
                    line: Some(2),
                })
                .collect(),
            console_dropped: 0,
        }
    }

    fn seen(at: f64) -> Seen {
        Seen {
            uuid: "u".into(),
            revision: 2,
            url: "http://a.test/".into(),
            frame_id: Some(0),
            tab_id: Some(5),
            at,
        }
    }

    #[test]
    fn the_ring_keeps_the_last_runs_within_its_bounds() {
        let mut ring = Ring::default();
        for i in 0..120u64 {
            ring.push(run_json(i + 1, &seen(1.0), &report(1, 10)), 0);
        }
        assert_eq!(ring.runs.len(), MAX_RUNS);
        assert_eq!(id_of(&ring.runs[0]), 71);
        assert_eq!(id_of(ring.runs.last().unwrap()), 120);
        // Big runs: the byte bound cuts before the count does.
        let mut ring = Ring::default();
        for i in 0..40u64 {
            ring.push(run_json(i + 1, &seen(1.0), &report(50, 160)), 1);
        }
        assert!(json_len(&ring.encode()) <= MAX_RING_BYTES);
        assert!(ring.runs.len() < 40 && !ring.runs.is_empty());
        assert_eq!(id_of(ring.runs.last().unwrap()), 40);
        assert_eq!(ring.dropped, 40);
        // One run over half the bound keeps its error, not its console.
        let mut ring = Ring::default();
        ring.push(run_json(1, &seen(1.0), &report(50, MAX_RING_BYTES / 40)), 0);
        assert_eq!(ring.runs[0]["console"], json!([]));
        assert_eq!(ring.runs[0]["consoleDropped"], 50);
        assert_eq!(ring.runs[0]["error"]["line"], 7);
        // Round trip, and damaged storage reads as what it still holds.
        assert_eq!(Ring::decode(Some(&ring.encode())), ring);
        assert_eq!(
            Ring::decode(Some(&json!({"runs": [1, {"id": 3}], "dropped": "x"})))
                .runs
                .len(),
            1
        );
        assert_eq!(Ring::decode(Some(&json!("x"))), Ring::default());
    }

    #[test]
    fn cursors_only_grow() {
        assert_eq!(next_cursor(0, 1000.7), 1000);
        assert_eq!(next_cursor(1000, 1000.0), 1001);
        assert_eq!(next_cursor(5000, 10.0), 5001);
        assert_eq!(next_cursor(7, f64::NAN), 8);
        assert_eq!(next_cursor(u64::MAX, 1.0), u64::MAX);
    }

    #[test]
    fn selection_follows_since_and_errors_only() {
        let mut a = Ring::default();
        let mut b = Ring::default();
        let mut ok = report(0, 0);
        ok.error = None;
        a.push(run_json(1, &seen(1.0), &ok), 0);
        b.push(run_json(2, &seen(2.0), &report(0, 0)), 0);
        a.push(run_json(3, &seen(3.0), &ok), 0);
        let (runs, more) = select(&[a.clone(), b.clone()], None, false, 10);
        assert_eq!(runs.iter().map(id_of).collect::<Vec<_>>(), vec![3, 2, 1]);
        assert!(!more);
        let (runs, _) = select(&[a.clone(), b.clone()], Some(1), false, 10);
        assert_eq!(runs.iter().map(id_of).collect::<Vec<_>>(), vec![3, 2]);
        let (runs, _) = select(&[a.clone(), b.clone()], None, true, 10);
        assert_eq!(runs.iter().map(id_of).collect::<Vec<_>>(), vec![2]);
        let (runs, more) = select(&[a.clone(), b], None, false, 2);
        assert_eq!(runs.len(), 2);
        assert!(more);
        assert_eq!(last_run_summary(&a).unwrap()["id"], 3);
        assert_eq!(last_run_summary(&Ring::default()), None);
    }
}
