//! What registered scripts did on real page loads: a bounded ring of run reports per script in
//! `chrome.storage.local` (`runs/<uuid>`), so it survives worker and browser restarts. Kept
//! while the script is in the trash, removed with it when it is purged (`trash::purged_keys`).
//!
//! A run on a page in an incognito window is never written there: its ring is in
//! `chrome.storage.session` under the same keys (memory only, gone when the browser quits), and
//! its page's address is not kept at all ([`INCOGNITO_URL`] stands for it). Readers merge both.
//!
//! Each run gets a cursor (`id`): a number that only grows, across all scripts, so an agent can
//! ask for the runs after the last one it saw (`script_runs {since}`). It is the worker's clock in
//! ms, bumped past the last one given (`runs/cursor`), so it also survives restarts.

use crate::channel::message::{LateError, RunError, RunReport};
use serde_json::{json, Map, Value};

/// Runs kept per script (oldest dropped first).
pub const MAX_RUNS: usize = 50;
/// A script's ring as stored JSON, in bytes (oldest dropped first past it).
pub const MAX_RING_BYTES: usize = 64 * 1024;
/// The storage key of the last cursor given.
pub const CURSOR_KEY: &str = "runs/cursor";
/// The key under which a late rejection keeps the page's number for it (`LateError::n`).
const LATE_N: &str = "n";
/// Late errors kept per run (later ones are counted in `lateErrorsDropped`).
pub const MAX_LATE_PER_RUN: usize = 10;
/// All scripts' rings together, as stored JSON, in bytes: past it the oldest runs of the
/// biggest rings go first ([`Budget`]).
pub const MAX_TOTAL_BYTES: usize = 1024 * 1024;
/// The storage key of the byte count of every ring (`{uuid: bytes}`).
pub const BUDGET_KEY: &str = "runs/budget";

/// What a run on a page in an incognito window says where its URL would be.
pub const INCOGNITO_URL: &str = "(incognito page)";

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
    /// Chrome's `documentId` of the page: late errors of the same document join this run.
    pub document_id: Option<String>,
    pub at: f64,
    /// The page is in an incognito window (`sender.tab.incognito`): its URL is not kept.
    pub incognito: bool,
}

/// An error as stored: `inRequire` only when it was thrown in the `@require` code.
fn error_json(e: &RunError) -> Value {
    let mut o = json!({ "name": e.name, "message": e.message, "line": e.line, "column": e.column });
    if let (true, Some(m)) = (e.in_require, o.as_object_mut()) {
        m.insert("inRequire".into(), true.into());
    }
    o
}

/// One run as stored and as `script_runs` returns it.
pub fn run_json(id: u64, seen: &Seen, r: &RunReport) -> Value {
    let url = if seen.incognito {
        INCOGNITO_URL.to_owned()
    } else {
        crate::text::ellipsize(&seen.url, 2048)
    };
    let mut run = json!({
        "id": id,
        "uuid": seen.uuid,
        "revision": seen.revision,
        "url": url,
        "frameId": seen.frame_id,
        "tabId": seen.tab_id,
        "documentId": seen.document_id.as_deref().map(|d| crate::text::ellipsize(d, 64)),
        "at": seen.at,
        "runAt": r.run_at.as_str(),
        "durationMs": (r.duration_ms * 10.0).round() / 10.0,
        "ok": r.error.is_none(),
        "error": r.error.as_ref().map(error_json),
        "console": r.console.iter().map(|l| json!({
            "level": l.level, "text": l.text, "line": l.line
        })).collect::<Vec<_>>(),
        "consoleDropped": r.console_dropped,
    });
    if let (true, Some(o)) = (seen.incognito, run.as_object_mut()) {
        o.insert("incognito".into(), Value::Bool(true));
    }
    run
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

    /// Adds a late error to the newest run of that document, bounded per run, marks the run as
    /// failed and gives it `changed` (a new cursor, so `since` shows it again). False when no
    /// run of that document is kept (never reported, rate-limited, or dropped since).
    pub fn attach_late(&mut self, document_id: &str, late: &LateError, changed: u64) -> bool {
        let Some(run) = self
            .runs
            .iter_mut()
            .rev()
            .find(|r| r.get("documentId").and_then(Value::as_str) == Some(document_id))
        else {
            return false;
        };
        let Some(o) = run.as_object_mut() else {
            return false;
        };
        let mut item = error_json(&late.error);
        if let Some(o) = item.as_object_mut() {
            o.insert("rejection".into(), late.rejection.into());
            // Kept for a retraction (`retract_late`); never shown (`select` drops it).
            if let (true, Some(n)) = (late.rejection, late.n) {
                o.insert(LATE_N.into(), n.into());
            }
        }
        let list = o
            .entry("lateErrors")
            .or_insert_with(|| Value::Array(Vec::new()));
        match list.as_array_mut() {
            Some(a) if a.len() < MAX_LATE_PER_RUN => a.push(item),
            _ => {
                let n = o
                    .get("lateErrorsDropped")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                o.insert("lateErrorsDropped".into(), json!(n.saturating_add(1)));
            }
        }
        o.insert("ok".into(), json!(false));
        o.insert("changed".into(), json!(changed));
        self.trim();
        true
    }

    /// Takes back the rejection `n` of that document's newest run that holds it, which the script
    /// handled after all; the run is `ok` again when nothing else failed in it, and gets
    /// `changed`. False when no kept run holds it (dropped, never kept, or already taken back).
    pub fn retract_late(&mut self, document_id: &str, n: u64, changed: u64) -> bool {
        let holds = |r: &Value| {
            r.get("lateErrors")
                .and_then(Value::as_array)
                .is_some_and(|a| {
                    a.iter()
                        .any(|e| e.get(LATE_N).and_then(Value::as_u64) == Some(n))
                })
        };
        let Some(run) =
            self.runs.iter_mut().rev().find(|r| {
                r.get("documentId").and_then(Value::as_str) == Some(document_id) && holds(r)
            })
        else {
            return false;
        };
        let Some(o) = run.as_object_mut() else {
            return false;
        };
        let left = match o.get_mut("lateErrors").and_then(Value::as_array_mut) {
            Some(a) => {
                a.retain(|e| e.get(LATE_N).and_then(Value::as_u64) != Some(n));
                a.len()
            }
            None => 0,
        };
        if left == 0 {
            o.remove("lateErrors");
        }
        let failed = o.get("error").is_some_and(|e| !e.is_null())
            || left > 0
            || o.get("lateErrorsDropped")
                .and_then(Value::as_u64)
                .unwrap_or(0)
                > 0;
        o.insert("ok".into(), json!(!failed));
        o.insert("changed".into(), json!(changed));
        true
    }

    /// One script's ring as the readers see it: its runs kept on disk and those of incognito
    /// pages kept in memory, in cursor order; the refusals of both.
    #[must_use]
    pub fn merged(mut self, other: Ring) -> Ring {
        if other.runs.is_empty() && other.dropped == 0 {
            return self;
        }
        self.runs.extend(other.runs);
        crate::sort::sort_by(&mut self.runs, |a, b| id_of(a).cmp(&id_of(b)));
        self.dropped = self.dropped.saturating_add(other.dropped);
        self
    }

    /// Drops the oldest run while there are too many or the ring is over its byte bound.
    fn trim(&mut self) {
        while self.runs.len() > MAX_RUNS
            || (self.runs.len() > 1 && json_len(&self.encode()) > MAX_RING_BYTES)
        {
            self.runs.remove(0);
        }
    }

    /// The ring's size as stored.
    pub fn bytes(&self) -> usize {
        json_len(&self.encode())
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
        self.trim();
    }
}

/// As `chrome.storage` counts it (R12: a console line of `<` is six times its characters).
fn json_len(v: &Value) -> usize {
    super::quota::chrome_json_len(v)
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
/// and whether more matched. Past `max`, a call without `since` gets the newest; one with
/// `since` gets the oldest after it, so a caller that follows the cursor (the newest returned)
/// pages forward and skips none.
pub fn select(
    rings: &[Ring],
    since: Option<u64>,
    errors_only: bool,
    max: usize,
) -> (Vec<Value>, bool) {
    let mut all: Vec<&Value> = rings
        .iter()
        .flat_map(|r| r.runs.iter())
        .filter(|r| since.is_none_or(|s| seq_of(r) > s))
        .filter(|r| !errors_only || r.get("ok") == Some(&Value::Bool(false)))
        .collect();
    crate::sort::sort_by(&mut all, |a, b| seq_of(b).cmp(&seq_of(a)));
    let more = all.len() > max;
    let skip = match since {
        Some(_) => all.len().saturating_sub(max),
        None => 0,
    };
    (
        all.into_iter()
            .skip(skip)
            .take(max)
            .map(|r| {
                let mut r = r.clone();
                if let Some(a) = r.get_mut("lateErrors").and_then(Value::as_array_mut) {
                    for e in a.iter_mut().filter_map(Value::as_object_mut) {
                        e.remove(LATE_N);
                    }
                }
                r
            })
            .collect(),
        more,
    )
}

fn id_of(r: &Value) -> u64 {
    r.get("id").and_then(Value::as_u64).unwrap_or(0)
}

/// The cursor of a run's last change: its id, or the cursor a late error gave it.
pub fn seq_of(r: &Value) -> u64 {
    id_of(r).max(r.get("changed").and_then(Value::as_u64).unwrap_or(0))
}

/// The size of every script's ring (`runs/budget`), so a new run can be weighed against
/// [`MAX_TOTAL_BYTES`] without reading every ring. Read leniently; a ring found missing or
/// smaller when loaded corrects its entry.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Budget {
    pub bytes: crate::vec_map::VecMap<String, usize>,
}

impl Budget {
    pub fn decode(v: Option<&Value>) -> Budget {
        let bytes = v
            .and_then(Value::as_object)
            .map(|o| {
                o.iter()
                    .filter_map(|(k, v)| Some((k.clone(), usize::try_from(v.as_u64()?).ok()?)))
                    .collect()
            })
            .unwrap_or_default();
        Budget { bytes }
    }

    pub fn encode(&self) -> Value {
        Value::Object(
            self.bytes
                .iter()
                .filter(|(_, b)| **b > 0)
                .map(|(k, b)| (k.clone(), json!(b)))
                .collect(),
        )
    }

    pub fn total(&self) -> usize {
        self.bytes
            .values()
            .fold(0usize, |a, b| a.saturating_add(*b))
    }

    /// The ring to shrink next: the biggest (ties: the first uuid).
    pub fn biggest(&self) -> Option<&str> {
        self.bytes
            .iter()
            .filter(|(_, b)| **b > 0)
            .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
            .map(|(k, _)| k.as_str())
    }

    pub fn set(&mut self, uuid: &str, ring: &Ring) {
        let n = if ring.runs.is_empty() {
            0
        } else {
            ring.bytes()
        };
        self.bytes.insert(uuid.to_owned(), n);
    }
}

/// Brings `loaded` rings within [`MAX_TOTAL_BYTES`]: the oldest run of the biggest ring goes
/// first, again and again. `load` is asked for a ring not loaded yet (None: stop, the caller
/// fetches it and calls again). At most `steps` runs are dropped per call, so one call is
/// bounded; the next stored run continues. Returns the uuid of a ring it needs loaded, if any.
pub fn enforce_budget(
    budget: &mut Budget,
    loaded: &mut crate::vec_map::VecMap<String, Ring>,
    max_total: usize,
    steps: usize,
) -> Option<String> {
    for _ in 0..steps {
        if budget.total() <= max_total {
            return None;
        }
        let big = budget.biggest()?.to_owned();
        let Some(ring) = loaded.get_mut(&big) else {
            return Some(big);
        };
        if !ring.runs.is_empty() {
            ring.runs.remove(0);
        }
        budget.set(&big, ring);
    }
    None
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
                in_require: false,
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
            document_id: Some("D1".into()),
            at,
            incognito: false,
        }
    }

    fn late(line: u64) -> LateError {
        LateError {
            error: RunError {
                name: "TypeError".into(),
                message: "late".into(),
                line: Some(line),
                column: Some(1),
                in_require: false,
            },
            rejection: false,
            n: None,
        }
    }

    #[test]
    fn a_late_error_joins_its_documents_run_bounded_and_shows_again_after_since() {
        let mut ok = report(0, 0);
        ok.error = None;
        let mut ring = Ring::default();
        ring.push(run_json(1, &seen(1.0), &ok), 0);
        let mut other = seen(2.0);
        other.document_id = Some("D2".into());
        ring.push(run_json(2, &other, &ok), 0);
        assert!(!ring.attach_late("D9", &late(3), 5));
        assert!(ring.attach_late("D1", &late(3), 5));
        let run = &ring.runs[0];
        assert_eq!(run["ok"], false);
        assert_eq!(run["lateErrors"][0]["line"], 3);
        assert_eq!(run["changed"], 5);
        assert_eq!(ring.runs[1]["ok"], true);
        // since 2 hides run 1 by its id, not by its change: it comes back, first.
        let (runs, _) = select(std::slice::from_ref(&ring), Some(2), false, 10);
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0]["id"], 1);
        let (runs, _) = select(std::slice::from_ref(&ring), Some(2), true, 10);
        assert_eq!(runs.len(), 1);
        for i in 0..30 {
            assert!(ring.attach_late("D1", &late(4), 6 + i));
        }
        let run = &ring.runs[0];
        assert_eq!(
            run["lateErrors"].as_array().unwrap().len(),
            MAX_LATE_PER_RUN
        );
        assert_eq!(run["lateErrorsDropped"], 31 - MAX_LATE_PER_RUN as u64);
    }

    #[test]
    fn the_total_budget_drops_the_oldest_runs_of_the_biggest_rings_first() {
        let mut loaded = crate::vec_map::VecMap::new();
        let mut budget = Budget::default();
        for (uuid, n) in [("big", 40u64), ("mid", 20), ("small", 3)] {
            let mut ring = Ring::default();
            for i in 0..n {
                ring.push(run_json(i + 1, &seen(1.0), &report(2, 100)), 0);
            }
            budget.set(uuid, &ring);
            loaded.insert(uuid.to_owned(), ring);
        }
        let small_before = loaded["small"].clone();
        let total = budget.total();
        let max = total - budget.bytes["big"] / 2;
        // Only "big" is loaded at first: the rest would be asked for if needed.
        let mut only_big: crate::vec_map::VecMap<String, Ring> = loaded
            .iter()
            .filter(|(k, _)| *k == "big")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(enforce_budget(&mut budget, &mut only_big, max, 1000), None);
        assert!(budget.total() <= max);
        assert!(only_big["big"].runs.len() < 40);
        // The oldest went: the newest is still the last one.
        assert_eq!(id_of(only_big["big"].runs.last().unwrap()), 40);
        assert_eq!(
            id_of(&only_big["big"].runs[0]),
            41 - only_big["big"].runs.len() as u64
        );
        // When the biggest is a ring not loaded, it is asked for; nothing else changes.
        let mut b2 = Budget::default();
        b2.bytes.insert("x".into(), 10_000);
        b2.bytes.insert("small".into(), budget.bytes["small"]);
        let mut l2 = crate::vec_map::VecMap::new();
        l2.insert("small".to_owned(), small_before.clone());
        assert_eq!(enforce_budget(&mut b2, &mut l2, 100, 10), Some("x".into()));
        assert_eq!(l2["small"], small_before);
        // A ring that turns out empty counts for nothing and the next biggest is trimmed.
        l2.insert("x".to_owned(), Ring::default());
        assert_eq!(enforce_budget(&mut b2, &mut l2, 100, 100), None);
        assert_eq!(b2.bytes["x"], 0);
        assert!(l2["small"].runs.is_empty());
        // Round trip, leniently.
        assert_eq!(Budget::decode(Some(&budget.encode())), budget);
        assert_eq!(Budget::decode(Some(&json!({"a": "x", "b": 3}))).total(), 3);
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

    /// More runs after the cursor than one answer holds: following the cursor (the newest run
    /// returned) pages forward through every one of them, none skipped.
    #[test]
    fn following_the_cursor_skips_no_run() {
        let mut rings = vec![Ring::default(), Ring::default()];
        for id in 1..=25u64 {
            #[allow(clippy::cast_possible_truncation)]
            let r = &mut rings[(id % 2) as usize];
            #[allow(clippy::cast_precision_loss)]
            r.push(run_json(id, &seen(id as f64), &report(0, 0)), 0);
        }
        // Without a cursor: the newest.
        let (runs, more) = select(&rings, None, false, 10);
        assert_eq!(
            runs.iter().map(id_of).collect::<Vec<_>>(),
            (16..=25).rev().collect::<Vec<_>>()
        );
        assert!(more);
        let mut since = 0;
        let mut seen_ids: Vec<u64> = Vec::new();
        loop {
            let (runs, more) = select(&rings, Some(since), false, 10);
            let ids: Vec<u64> = runs.iter().map(id_of).collect();
            assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first: {ids:?}");
            seen_ids.extend(ids.iter().rev());
            since = ids.iter().copied().max().unwrap_or(since);
            if !more {
                break;
            }
        }
        assert_eq!(seen_ids, (1..=25).collect::<Vec<_>>());
    }
}
