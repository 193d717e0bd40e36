//! Per-script rate limit of the userscript channel, and one bound for all of it, so a script
//! in a loop (or many frames of one page) cannot make the worker spend its time on reports.
//! Fixed windows: cheap, and exactness does not matter here (a dropped report is counted).

use std::collections::BTreeMap;

/// Messages accepted per script per window.
pub const PER_SCRIPT: u32 = 30;
/// GM requests accepted per script per window (a page's value changes are batched per task,
/// so this is clicks and requests, not loop iterations).
pub const GM_PER_SCRIPT: u32 = 600;
/// Messages looked at (parsed) per window from all scripts together, counted before parsing.
pub const ALL: u32 = 1200;
pub const WINDOW_MS: f64 = 60_000.0;
/// Scripts tracked at once; past it, windows that are over are forgotten first, then all.
const MAX_TRACKED: usize = 2048;

#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Window {
    start: f64,
    count: u32,
}

impl Window {
    /// Counts one message; false when the window is full.
    fn admit(&mut self, now: f64, limit: u32) -> bool {
        if !(now >= self.start && now - self.start < WINDOW_MS) {
            *self = Window {
                start: now,
                count: 0,
            };
        }
        if self.count >= limit {
            return false;
        }
        self.count = self.count.saturating_add(1);
        true
    }
}

#[derive(Debug, Default)]
pub struct RateLimit {
    all: Window,
    scripts: BTreeMap<String, Window>,
    gm: BTreeMap<String, Window>,
    /// Messages refused per script since its last accepted one (reported with the next run).
    dropped: BTreeMap<String, u64>,
}

impl RateLimit {
    /// Before parsing: false when the whole channel is over its bound.
    pub fn admit_any(&mut self, now: f64) -> bool {
        self.all.admit(now, ALL)
    }

    /// After the token proved the script: false when that script is over its bound.
    pub fn admit_script(&mut self, uuid: &str, now: f64) -> bool {
        if !self.scripts.contains_key(uuid) && self.scripts.len() >= MAX_TRACKED {
            self.scripts
                .retain(|_, w| now >= w.start && now - w.start < WINDOW_MS);
            if self.scripts.len() >= MAX_TRACKED {
                self.scripts.clear();
            }
        }
        let ok = self
            .scripts
            .entry(uuid.to_owned())
            .or_default()
            .admit(now, PER_SCRIPT);
        if !ok {
            if self.dropped.len() >= MAX_TRACKED && !self.dropped.contains_key(uuid) {
                self.dropped.clear();
            }
            let n = self.dropped.entry(uuid.to_owned()).or_default();
            *n = n.saturating_add(1);
        }
        ok
    }

    /// How many of this script's messages were refused and not yet taken.
    pub fn pending_dropped(&self, uuid: &str) -> u64 {
        self.dropped.get(uuid).copied().unwrap_or(0)
    }

    /// After the token proved the script: false when its GM requests are over their bound.
    pub fn admit_gm(&mut self, uuid: &str, now: f64) -> bool {
        if !self.gm.contains_key(uuid) && self.gm.len() >= MAX_TRACKED {
            self.gm
                .retain(|_, w| now >= w.start && now - w.start < WINDOW_MS);
            if self.gm.len() >= MAX_TRACKED {
                self.gm.clear();
            }
        }
        self.gm
            .entry(uuid.to_owned())
            .or_default()
            .admit(now, GM_PER_SCRIPT)
    }

    /// How many of this script's messages were refused since the last call (and resets it).
    pub fn take_dropped(&mut self, uuid: &str) -> u64 {
        self.dropped.remove(uuid).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_script_has_its_own_window() {
        let mut r = RateLimit::default();
        let t = 1000.0;
        for _ in 0..PER_SCRIPT {
            assert!(r.admit_script("a", t));
        }
        assert!(!r.admit_script("a", t + 1.0));
        assert!(!r.admit_script("a", t + 2.0));
        // Another script is not starved by the first.
        assert!(r.admit_script("b", t + 3.0));
        assert_eq!(r.pending_dropped("a"), 2);
        assert_eq!(r.take_dropped("a"), 2);
        assert_eq!(r.take_dropped("a"), 0);
        // The window ends.
        assert!(r.admit_script("a", t + WINDOW_MS));
        // A clock that goes back starts a new window instead of blocking for ever.
        assert!(r.admit_script("a", 0.0));
    }

    #[test]
    fn the_whole_channel_is_bounded_before_parsing() {
        let mut r = RateLimit::default();
        let admitted = (0..ALL * 3).filter(|_| r.admit_any(5.0)).count();
        assert_eq!(admitted, usize::try_from(ALL).unwrap());
        assert!(r.admit_any(5.0 + WINDOW_MS));
        assert!(!r.admit_any(f64::NAN) || r.admit_any(f64::NAN));
    }

    #[test]
    fn tracking_is_bounded() {
        let mut r = RateLimit::default();
        for i in 0..(MAX_TRACKED * 2) {
            assert!(r.admit_script(&format!("s{i}"), 1.0));
        }
        assert!(r.scripts.len() <= MAX_TRACKED);
    }
}
