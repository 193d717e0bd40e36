//! What changed in each script's values during this worker's life, so a page whose value
//! listener asks again after an answer (`values.wait` with that answer's cursor) hears every
//! change made in between, and is told to read the values whole (`Since::Resync`) when that is
//! no longer known: the worker restarted, the log dropped those changes to stay small, or the
//! values were replaced by other means (a backup restored).
//!
//! A cursor is `"<epoch>.<n>"`: the worker's epoch (its start time) and the number of the
//! script's last change. The page holds it and sends it back; anything it sends that this log
//! did not give (another epoch, a number past the script's last, not a cursor at all) is a
//! resync, never a guess.

use std::collections::VecDeque;

use serde_json::{json, Value};

use super::values::Change;
use crate::vec_map::VecMap;

/// A page as Chrome names its sender: tab and frame. A page without a tab is never taken for
/// another page.
pub type Page = (Option<i64>, Option<i64>);

/// Most changes kept per script; an older one is dropped first.
pub const MAX_ENTRIES: usize = 32;
/// Most bytes of keys and values kept per script.
pub const MAX_SCRIPT_BYTES: usize = 64 * 1024;
/// Most bytes kept for all scripts: past it, the oldest change of any script goes first.
pub const MAX_TOTAL_BYTES: usize = 1024 * 1024;
/// Longest cursor read (two numbers and a dot).
pub const MAX_CURSOR_CHARS: usize = 48;

/// What a page that last heard `cursor` has to hear now.
#[derive(Debug, Clone, PartialEq)]
pub enum Since {
    /// The changes other pages made since (`[key, old, new]` each, oldest first; none: wait),
    /// and the cursor after them.
    Changes(Vec<Value>, String),
    /// What changed is not known: read the values whole. The cursor is the script's now.
    Resync(String),
}

struct Entry {
    seq: u64,
    /// Order across scripts, for the total bound.
    stamp: u64,
    from: Page,
    changes: Vec<Value>,
    bytes: usize,
}

#[derive(Default)]
struct Script {
    /// The number of the script's last change.
    seq: u64,
    /// Changes up to this number are no longer kept.
    floor: u64,
    entries: VecDeque<Entry>,
    bytes: usize,
}

pub struct ChangeLog {
    epoch: u64,
    stamp: u64,
    scripts: VecMap<String, Script>,
    bytes: usize,
}

impl Default for ChangeLog {
    fn default() -> Self {
        Self::new(0)
    }
}

/// Whether a change `from` was made by the page `page` itself (which knows it already).
fn same_page(from: Page, page: Page) -> bool {
    from.0.is_some() && from == page
}

impl ChangeLog {
    pub fn new(epoch: u64) -> Self {
        ChangeLog {
            epoch,
            stamp: 0,
            scripts: VecMap::new(),
            bytes: 0,
        }
    }

    fn cursor_at(&self, seq: u64) -> String {
        format!("{}.{seq}", self.epoch)
    }

    /// The cursor of the script's values as they are now.
    pub fn cursor(&self, uuid: &str) -> String {
        self.cursor_at(self.scripts.get(uuid).map_or(0, |s| s.seq))
    }

    /// Records the changes the page `from` made (stored already); returns the cursor after.
    pub fn record(&mut self, uuid: &str, from: Page, changes: &[Change]) -> String {
        let items: Vec<Value> = changes
            .iter()
            .map(|c| json!([c.key, c.old, c.new]))
            .collect();
        let bytes = changes
            .iter()
            .map(|c| {
                16 + c.key.len()
                    + c.old.as_ref().map_or(0, String::len)
                    + c.new.as_ref().map_or(0, String::len)
            })
            .sum::<usize>();
        self.stamp += 1;
        let stamp = self.stamp;
        let Some(s) = self
            .scripts
            .get_or_insert_with(uuid.to_owned(), Script::default)
        else {
            return self.cursor(uuid);
        };
        s.seq += 1;
        let seq = s.seq;
        if bytes > MAX_SCRIPT_BYTES {
            // Too big to keep: whoever has not heard it reads the values whole.
            self.bytes -= s.bytes;
            s.entries.clear();
            s.bytes = 0;
            s.floor = seq;
        } else {
            s.entries.push_back(Entry {
                seq,
                stamp,
                from,
                changes: items,
                bytes,
            });
            s.bytes += bytes;
            self.bytes += bytes;
            while s.entries.len() > MAX_ENTRIES || s.bytes > MAX_SCRIPT_BYTES {
                let Some(old) = s.entries.pop_front() else {
                    break;
                };
                s.bytes -= old.bytes;
                self.bytes -= old.bytes;
                s.floor = old.seq;
            }
        }
        self.trim_total();
        self.cursor_at(seq)
    }

    /// Drops the oldest change of any script until all fit [`MAX_TOTAL_BYTES`].
    fn trim_total(&mut self) {
        while self.bytes > MAX_TOTAL_BYTES {
            let oldest = self
                .scripts
                .values_mut()
                .filter(|s| !s.entries.is_empty())
                .min_by_key(|s| s.entries.front().map_or(u64::MAX, |e| e.stamp));
            let Some(s) = oldest else { break };
            let Some(old) = s.entries.pop_front() else {
                break;
            };
            s.bytes -= old.bytes;
            s.floor = old.seq;
            self.bytes -= old.bytes;
        }
    }

    /// The script's values were replaced by other means: who asks next reads them whole.
    /// Returns the cursor after.
    pub fn reset(&mut self, uuid: &str) -> String {
        if let Some(s) = self
            .scripts
            .get_or_insert_with(uuid.to_owned(), Script::default)
        {
            s.seq += 1;
            s.floor = s.seq;
            self.bytes -= s.bytes;
            s.entries.clear();
            s.bytes = 0;
        }
        self.cursor(uuid)
    }

    /// What `page`, which last heard `cursor` (none: it has heard nothing yet), has to hear.
    pub fn since(&self, uuid: &str, cursor: Option<&str>, page: Page) -> Since {
        let (seq, floor) = self.scripts.get(uuid).map_or((0, 0), |s| (s.seq, s.floor));
        let now = self.cursor_at(seq);
        let heard = cursor
            .and_then(|c| c.split_once('.'))
            .filter(|(e, _)| e.parse::<u64>().ok() == Some(self.epoch))
            .and_then(|(_, n)| n.parse::<u64>().ok());
        let Some(heard) = heard.filter(|&n| n <= seq && n >= floor) else {
            return Since::Resync(now);
        };
        let changes = self
            .scripts
            .get(uuid)
            .into_iter()
            .flat_map(|s| s.entries.iter())
            .filter(|e| e.seq > heard && !same_page(e.from, page))
            .flat_map(|e| e.changes.iter().cloned())
            .collect();
        Since::Changes(changes, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(k: &str, old: Option<&str>, new: Option<&str>) -> Change {
        Change {
            key: k.to_owned(),
            old: old.map(str::to_owned),
            new: new.map(str::to_owned),
        }
    }

    const A: Page = (Some(1), Some(0));
    const B: Page = (Some(2), Some(0));

    #[test]
    fn a_page_hears_what_others_changed_since_its_cursor_and_not_its_own() {
        let mut log = ChangeLog::new(7);
        let start = log.cursor("s");
        assert_eq!(start, "7.0");
        assert_eq!(
            log.since("s", Some(&start), A),
            Since::Changes(vec![], "7.0".into())
        );
        log.record("s", B, &[change("k", None, Some("1"))]);
        let mine = log.record("s", A, &[change("k", Some("1"), Some("2"))]);
        log.record("s", B, &[change("j", None, Some("3"))]);
        assert_eq!(mine, "7.2");
        assert_eq!(
            log.since("s", Some(&start), A),
            Since::Changes(
                vec![json!(["k", null, "1"]), json!(["j", null, "3"])],
                "7.3".into()
            )
        );
        assert_eq!(
            log.since("s", Some("7.1"), B),
            Since::Changes(vec![json!(["k", "1", "2"])], "7.3".into())
        );
        // Another script's changes are its own.
        assert_eq!(
            log.since("t", Some("7.0"), A),
            Since::Changes(vec![], "7.0".into())
        );
    }

    #[test]
    fn a_cursor_this_log_did_not_give_or_no_longer_covers_is_a_resync() {
        let mut log = ChangeLog::new(7);
        log.record("s", B, &[change("k", None, Some("1"))]);
        for bad in [
            None,
            Some("6.0"),
            Some("7.2"),
            Some("7"),
            Some("x.1"),
            Some("7.-1"),
        ] {
            assert_eq!(
                log.since("s", bad, A),
                Since::Resync("7.1".into()),
                "{bad:?}"
            );
        }
        // The oldest changes past the count bound are gone: a cursor before them resyncs.
        for i in 0..MAX_ENTRIES {
            log.record("s", B, &[change(&format!("k{i}"), None, Some("1"))]);
        }
        assert_eq!(log.since("s", Some("7.0"), A), Since::Resync("7.33".into()));
        assert!(
            matches!(log.since("s", Some("7.1"), A), Since::Changes(c, _) if c.len() == MAX_ENTRIES)
        );
        // A change too big to keep, and values replaced by a restore.
        let big = "x".repeat(MAX_SCRIPT_BYTES);
        log.record("s", B, &[change("big", None, Some(&big))]);
        assert_eq!(
            log.since("s", Some("7.33"), A),
            Since::Resync("7.34".into())
        );
        assert_eq!(
            log.since("s", Some("7.34"), A),
            Since::Changes(vec![], "7.34".into())
        );
        assert_eq!(log.reset("s"), "7.35");
        assert_eq!(
            log.since("s", Some("7.34"), A),
            Since::Resync("7.35".into())
        );
    }

    #[test]
    fn the_total_bound_drops_the_oldest_change_of_any_script() {
        let mut log = ChangeLog::new(1);
        let v = "x".repeat(MAX_SCRIPT_BYTES / 2);
        let n = MAX_TOTAL_BYTES / (MAX_SCRIPT_BYTES / 2) + 1;
        for i in 0..n {
            log.record(&format!("s{i}"), B, &[change("k", None, Some(&v))]);
        }
        assert!(log.bytes <= MAX_TOTAL_BYTES);
        // The first script's change went; the last one's is kept.
        assert_eq!(log.since("s0", Some("1.0"), A), Since::Resync("1.1".into()));
        let last = format!("s{}", n - 1);
        assert!(matches!(log.since(&last, Some("1.0"), A), Since::Changes(c, _) if c.len() == 1));
    }
}
