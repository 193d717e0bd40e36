//! Per-script rate limit of the userscript channel, and one bound for all of it, so a script
//! in a loop (or many frames of one page) cannot make the worker spend its time on reports.
//! Fixed windows: cheap, and exactness does not matter here (a dropped report is counted).
//!
//! **Fair share.** Before anything is parsed, a message is charged to the script its token
//! proves (the shell reads the token alone, see `channel::decide_hinted`): one script may use
//! [`PER_SCRIPT_ANY`] of the channel's [`ALL`] a window, and messages without a valid token
//! share [`UNPROVEN`], so neither a looping script nor garbage can spend the whole channel and
//! silence every other script for a minute.

use crate::vec_map::VecMap;

/// Run reports accepted per script per window.
pub const PER_SCRIPT: u32 = 30;
/// Run reports with an error accepted per script per window, apart from [`PER_SCRIPT`]: a page
/// with 40 frames spent the window in one load, and the one frame that failed was dropped
/// (R17), while an error is what an agent reads the runs for.
pub const FAILED_PER_SCRIPT: u32 = 30;
/// GM requests accepted per script per window (a page's value changes are batched per task,
/// so this is clicks and requests, not loop iterations).
pub const GM_PER_SCRIPT: u32 = 600;
/// A listener's waits (`values.wait`) accepted per script per window: apart from its other GM
/// requests, so every page listening to another's changes does not spend what they may send.
/// A wait costs no storage, and a page asks at most once a second while changes stream.
pub const WAIT_PER_SCRIPT: u32 = 1200;
/// Late errors (`Message::Late`) accepted per script per window.
pub const LATE_PER_SCRIPT: u32 = 60;
/// Messages of one proven script looked at per window, before parsing: exactly what its
/// per-kind bounds allow together, so a script within them (a download's `onprogress` polls
/// while it sets values, say) is never cut short by its share — only a script past them is.
pub const PER_SCRIPT_ANY: u32 =
    PER_SCRIPT + FAILED_PER_SCRIPT + GM_PER_SCRIPT + WAIT_PER_SCRIPT + LATE_PER_SCRIPT;
/// Messages looked at (parsed) per window from all scripts together, counted before parsing:
/// four scripts' whole shares, so one or two flooding scripts still leave room for the rest.
pub const ALL: u32 = 4 * PER_SCRIPT_ANY;
/// Messages without a valid token looked at per window, all together.
pub const UNPROVEN: u32 = 240;
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

/// Counts one message of `uuid` in its window of `map`, which holds at most [`MAX_TRACKED`]
/// windows (past it, windows that are over are forgotten first, then all).
fn admit_in(map: &mut VecMap<String, Window>, uuid: &str, now: f64, limit: u32) -> bool {
    if !map.contains_key(uuid) && map.len() >= MAX_TRACKED {
        map.retain(|_, w| now >= w.start && now - w.start < WINDOW_MS);
        if map.len() >= MAX_TRACKED {
            map.clear();
        }
    }
    map.get_or_insert_with(uuid.to_owned(), Window::default)
        .is_some_and(|w| w.admit(now, limit))
}

#[derive(Debug, Default)]
pub struct RateLimit {
    all: Window,
    unproven: Window,
    any: VecMap<String, Window>,
    late: VecMap<String, Window>,
    scripts: VecMap<String, Window>,
    failed: VecMap<String, Window>,
    gm: VecMap<String, Window>,
    waits: VecMap<String, Window>,
    /// Messages refused per script since its last accepted one (reported with the next run).
    dropped: VecMap<String, u64>,
    /// Accepted messages not yet answered, by their bytes (`super::backlog`).
    pub backlog: super::backlog::Backlog,
}

impl RateLimit {
    /// Before parsing: false when the whole channel is over its bound.
    pub fn admit_any(&mut self, now: f64) -> bool {
        self.all.admit(now, ALL)
    }

    /// Before parsing, a message whose token proved `uuid`: false when that script has used its
    /// share of the channel (counted as dropped), else the channel's own bound.
    pub fn admit_proven(&mut self, uuid: &str, now: f64) -> bool {
        if !admit_in(&mut self.any, uuid, now, PER_SCRIPT_ANY) {
            self.count_dropped(uuid);
            return false;
        }
        self.admit_any(now)
    }

    /// Before parsing, a message with no valid token: its shared share, then the channel's.
    pub fn admit_unproven(&mut self, now: f64) -> bool {
        self.unproven.admit(now, UNPROVEN) && self.admit_any(now)
    }

    /// After parsing: false when that script's late errors are over their bound (counted).
    pub fn admit_late(&mut self, uuid: &str, now: f64) -> bool {
        let ok = admit_in(&mut self.late, uuid, now, LATE_PER_SCRIPT);
        if !ok {
            self.count_dropped(uuid);
        }
        ok
    }

    pub fn count_dropped(&mut self, uuid: &str) {
        if self.dropped.len() >= MAX_TRACKED && !self.dropped.contains_key(uuid) {
            self.dropped.clear();
        }
        if let Some(n) = self
            .dropped
            .get_or_insert_with(uuid.to_owned(), u64::default)
        {
            *n = n.saturating_add(1);
        }
    }

    /// After the token proved the script: false when that script's run reports (`failed`:
    /// those with an error, which have a window of their own) are over their bound (counted).
    pub fn admit_run(&mut self, uuid: &str, failed: bool, now: f64) -> bool {
        let ok = if failed {
            admit_in(&mut self.failed, uuid, now, FAILED_PER_SCRIPT)
        } else {
            admit_in(&mut self.scripts, uuid, now, PER_SCRIPT)
        };
        if !ok {
            self.count_dropped(uuid);
        }
        ok
    }

    /// How many of this script's messages were refused and not yet taken.
    pub fn pending_dropped(&self, uuid: &str) -> u64 {
        self.dropped.get(uuid).copied().unwrap_or(0)
    }

    /// After the token proved the script: false when its GM requests are over their bound.
    pub fn admit_gm(&mut self, uuid: &str, now: f64) -> bool {
        admit_in(&mut self.gm, uuid, now, GM_PER_SCRIPT)
    }

    /// After the token proved the script: false when its listeners' waits are over their bound.
    pub fn admit_wait(&mut self, uuid: &str, now: f64) -> bool {
        admit_in(&mut self.waits, uuid, now, WAIT_PER_SCRIPT)
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
            assert!(r.admit_run("a", false, t));
        }
        assert!(!r.admit_run("a", false, t + 1.0));
        assert!(!r.admit_run("a", false, t + 2.0));
        // Its failed runs have a window of their own (R17: a page of 40 frames spent the
        // first, and its one error was dropped).
        for _ in 0..FAILED_PER_SCRIPT {
            assert!(r.admit_run("a", true, t + 2.0));
        }
        assert!(!r.admit_run("a", true, t + 2.0));
        // Another script is not starved by the first.
        assert!(r.admit_run("b", false, t + 3.0));
        assert_eq!(r.pending_dropped("a"), 3);
        assert_eq!(r.take_dropped("a"), 3);
        assert_eq!(r.take_dropped("a"), 0);
        // The window ends.
        assert!(r.admit_run("a", false, t + WINDOW_MS));
        // A clock that goes back starts a new window instead of blocking for ever.
        assert!(r.admit_run("a", false, 0.0));
    }

    #[test]
    fn the_whole_channel_is_bounded_before_parsing() {
        let mut r = RateLimit::default();
        let admitted = (0..ALL * 3).filter(|_| r.admit_any(5.0)).count();
        assert_eq!(admitted, usize::try_from(ALL).unwrap());
        assert!(r.admit_any(5.0 + WINDOW_MS));
        assert!(!r.admit_any(f64::NAN) || r.admit_any(f64::NAN));
    }

    /// A script that keeps within every per-kind bound (its GM requests — a download's progress
    /// polls among them —, its run reports and its late errors) is never stopped by its share
    /// of the channel; with the share at 240 it lost GM calls at 240 a minute, not 600.
    #[test]
    fn a_script_within_its_kind_bounds_is_never_cut_by_its_share() {
        let mut r = RateLimit::default();
        let mut ok = 0u32;
        for _ in 0..GM_PER_SCRIPT {
            ok += u32::from(r.admit_proven("a", 5.0) && r.admit_gm("a", 5.0));
        }
        for _ in 0..PER_SCRIPT {
            ok += u32::from(r.admit_proven("a", 5.0) && r.admit_run("a", false, 5.0));
        }
        for _ in 0..FAILED_PER_SCRIPT {
            ok += u32::from(r.admit_proven("a", 5.0) && r.admit_run("a", true, 5.0));
        }
        for _ in 0..LATE_PER_SCRIPT {
            ok += u32::from(r.admit_proven("a", 5.0) && r.admit_late("a", 5.0));
        }
        for _ in 0..WAIT_PER_SCRIPT {
            ok += u32::from(r.admit_proven("a", 5.0) && r.admit_wait("a", 5.0));
        }
        assert_eq!(
            ok,
            GM_PER_SCRIPT + PER_SCRIPT + FAILED_PER_SCRIPT + LATE_PER_SCRIPT + WAIT_PER_SCRIPT
        );
        assert_eq!(r.pending_dropped("a"), 0);
        // One more of anything is over its share.
        assert!(!r.admit_proven("a", 5.0));
    }

    #[test]
    fn one_script_gets_a_share_of_the_channel_and_garbage_another() {
        const _: () = assert!(PER_SCRIPT_ANY * 4 <= ALL && UNPROVEN * 4 <= ALL);
        let mut r = RateLimit::default();
        let admitted = (0..ALL).filter(|_| r.admit_proven("a", 5.0)).count();
        assert_eq!(admitted, usize::try_from(PER_SCRIPT_ANY).unwrap());
        assert_eq!(r.pending_dropped("a"), u64::from(ALL - PER_SCRIPT_ANY));
        let garbage = (0..ALL).filter(|_| r.admit_unproven(5.0)).count();
        assert_eq!(garbage, usize::try_from(UNPROVEN).unwrap());
        // Another script still gets in while both flood…
        assert!(r.admit_proven("b", 5.0));
        // …until the channel as a whole is over its bound (many scripts at once).
        let mut n = 0u32;
        while r.admit_proven(&format!("s{n}"), 5.0) {
            n += 1;
        }
        assert_eq!(n, ALL - PER_SCRIPT_ANY - UNPROVEN - 1);
        // Late errors have their own window per script.
        let late = (0..200).filter(|_| r.admit_late("c", 5.0)).count();
        assert_eq!(late, usize::try_from(LATE_PER_SCRIPT).unwrap());
    }

    #[test]
    fn tracking_is_bounded() {
        let mut r = RateLimit::default();
        for i in 0..(MAX_TRACKED * 2) {
            assert!(r.admit_run(&format!("s{i}"), false, 1.0));
        }
        assert!(r.scripts.len() <= MAX_TRACKED);
    }
}
