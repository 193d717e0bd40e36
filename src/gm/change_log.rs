//! What changed in each script's values during this worker's life, so a page whose value
//! listener asks again after an answer (`values.wait` with that answer's cursor) hears every
//! change made in between, and is told to read the values whole (`Since::Resync`) when that is
//! no longer known: the worker restarted, the log dropped those changes to stay small, or the
//! values were replaced by other means (a backup restored).
//!
//! Each change of a script's values has a number, and a cursor is the number of the last one a
//! page heard. A script's numbers start at the worker's start time in milliseconds and grow by
//! one a change, so a later worker's numbers are greater than an earlier one's (a script may
//! make at most 10 changes a second, `channel::rate`, so an old worker cannot have counted past
//! the new one's start) and a page can order its own changes against others' across a restart.
//! A cursor this log did not give (before what it keeps, past the script's last change, not a
//! number) is a resync, never a guess.

use std::collections::VecDeque;

use serde_json::{json, Value};

use super::values::Change;
use crate::vec_map::VecMap;

/// A page as Chrome names its sender: tab, frame and document. Two pages are the same when both
/// name their document and it is the same one (a tab's next document, or one back from the
/// back/forward cache, is another page), or else by tab and frame; a page without a tab is
/// never taken for another.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Page {
    pub tab: Option<i64>,
    pub frame: Option<i64>,
    pub document: Option<String>,
}

impl Page {
    pub fn is(&self, other: &Page) -> bool {
        match (&self.document, &other.document) {
            (Some(a), Some(b)) => a == b,
            _ => self.tab.is_some() && self.tab == other.tab && self.frame == other.frame,
        }
    }
}

/// Most changes kept per script; an older one is dropped first.
pub const MAX_ENTRIES: usize = 32;
/// Most bytes of keys and values kept per script.
pub const MAX_SCRIPT_BYTES: usize = 64 * 1024;
/// Most bytes kept for all scripts: past it, the oldest change of any script goes first.
pub const MAX_TOTAL_BYTES: usize = 1024 * 1024;

/// What a page that last heard `cursor` has to hear now.
#[derive(Debug, Clone, PartialEq)]
pub enum Since {
    /// The changes other pages made since (`[key, old, new, number]` each, oldest first; none:
    /// wait), and the cursor after them.
    Changes(Vec<Value>, u64),
    /// What changed is not known: read the values whole. The cursor is the script's now.
    Resync(u64),
}

struct Entry {
    seq: u64,
    /// Order across scripts, for the total bound.
    stamp: u64,
    from: Page,
    changes: Vec<Value>,
    bytes: usize,
}

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

impl ChangeLog {
    /// A log whose numbers start at `epoch` (the worker's start, in ms).
    pub fn new(epoch: u64) -> Self {
        ChangeLog {
            epoch,
            stamp: 0,
            scripts: VecMap::new(),
            bytes: 0,
        }
    }

    fn script(&mut self, uuid: &str) -> Option<&mut Script> {
        let epoch = self.epoch;
        self.scripts.get_or_insert_with(uuid.to_owned(), || Script {
            seq: epoch,
            floor: epoch,
            entries: VecDeque::new(),
            bytes: 0,
        })
    }

    /// The cursor of the script's values as they are now.
    pub fn cursor(&self, uuid: &str) -> u64 {
        self.scripts.get(uuid).map_or(self.epoch, |s| s.seq)
    }

    /// Records the changes the page `from` made (stored already); returns their number.
    pub fn record(&mut self, uuid: &str, from: Page, changes: &[Change]) -> u64 {
        self.stamp += 1;
        let stamp = self.stamp;
        let Some(s) = self.script(uuid) else {
            return 0;
        };
        s.seq += 1;
        let seq = s.seq;
        let items: Vec<Value> = changes
            .iter()
            .map(|c| json!([c.key, c.old, c.new, seq]))
            .collect();
        let bytes = changes
            .iter()
            .map(|c| {
                32 + c.key.len()
                    + c.old.as_ref().map_or(0, String::len)
                    + c.new.as_ref().map_or(0, String::len)
            })
            .sum::<usize>();
        let mut freed = 0;
        if bytes > MAX_SCRIPT_BYTES {
            // Too big to keep: whoever has not heard it reads the values whole.
            freed += s.bytes;
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
            while s.entries.len() > MAX_ENTRIES || s.bytes > MAX_SCRIPT_BYTES {
                let Some(old) = s.entries.pop_front() else {
                    break;
                };
                s.bytes -= old.bytes;
                freed += old.bytes;
                s.floor = old.seq;
            }
            self.bytes += bytes;
        }
        self.bytes -= freed;
        self.trim_total();
        seq
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
    pub fn reset(&mut self, uuid: &str) -> u64 {
        let mut freed = 0;
        let seq = match self.script(uuid) {
            Some(s) => {
                s.seq += 1;
                s.floor = s.seq;
                freed = s.bytes;
                s.entries.clear();
                s.bytes = 0;
                s.seq
            }
            None => 0,
        };
        self.bytes -= freed;
        seq
    }

    /// What `page`, which last heard `cursor` (none: it has heard nothing yet), has to hear.
    pub fn since(&self, uuid: &str, cursor: Option<u64>, page: &Page) -> Since {
        let (seq, floor) = self
            .scripts
            .get(uuid)
            .map_or((self.epoch, self.epoch), |s| (s.seq, s.floor));
        let Some(heard) = cursor.filter(|&n| n <= seq && n >= floor) else {
            return Since::Resync(seq);
        };
        let changes = self
            .scripts
            .get(uuid)
            .into_iter()
            .flat_map(|s| s.entries.iter())
            .filter(|e| e.seq > heard && !e.from.is(page))
            .flat_map(|e| e.changes.iter().cloned())
            .collect();
        Since::Changes(changes, seq)
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

    fn page(tab: i64, document: Option<&str>) -> Page {
        Page {
            tab: Some(tab),
            frame: Some(0),
            document: document.map(str::to_owned),
        }
    }

    #[test]
    fn a_page_hears_what_others_changed_since_its_cursor_and_not_its_own() {
        let (a, b) = (page(1, None), page(2, None));
        let mut log = ChangeLog::new(700);
        let start = log.cursor("s");
        assert_eq!(start, 700);
        assert_eq!(log.since("s", Some(start), &a), Since::Changes(vec![], 700));
        log.record("s", b.clone(), &[change("k", None, Some("1"))]);
        let mine = log.record("s", a.clone(), &[change("k", Some("1"), Some("2"))]);
        log.record("s", b.clone(), &[change("j", None, Some("3"))]);
        assert_eq!(mine, 702);
        assert_eq!(
            log.since("s", Some(start), &a),
            Since::Changes(
                vec![json!(["k", null, "1", 701]), json!(["j", null, "3", 703])],
                703
            )
        );
        assert_eq!(
            log.since("s", Some(701), &b),
            Since::Changes(vec![json!(["k", "1", "2", 702])], 703)
        );
        // Another script's changes are its own.
        assert_eq!(log.since("t", Some(700), &a), Since::Changes(vec![], 700));
    }

    #[test]
    fn a_documents_changes_are_its_own_and_not_its_tabs_next_documents() {
        let first = page(1, Some("doc-1"));
        let next = page(1, Some("doc-2"));
        let mut log = ChangeLog::new(10);
        log.record("s", first.clone(), &[change("k", None, Some("1"))]);
        assert_eq!(log.since("s", Some(10), &first), Since::Changes(vec![], 11));
        assert_eq!(
            log.since("s", Some(10), &next),
            Since::Changes(vec![json!(["k", null, "1", 11])], 11)
        );
        // Without a document, by tab and frame; without a tab, never the same page.
        assert!(page(1, None).is(&page(1, None)));
        assert!(!Page::default().is(&Page::default()));
    }

    #[test]
    fn a_cursor_this_log_did_not_give_or_no_longer_covers_is_a_resync() {
        let a = page(1, None);
        let mut log = ChangeLog::new(700);
        log.record("s", page(2, None), &[change("k", None, Some("1"))]);
        // None, an earlier worker's, one past the last change.
        for bad in [None, Some(699), Some(702), Some(0), Some(u64::MAX)] {
            assert_eq!(log.since("s", bad, &a), Since::Resync(701), "{bad:?}");
        }
        // The oldest changes past the count bound are gone: a cursor before them resyncs.
        for i in 0..MAX_ENTRIES {
            log.record(
                "s",
                page(2, None),
                &[change(&format!("k{i}"), None, Some("1"))],
            );
        }
        assert_eq!(log.since("s", Some(700), &a), Since::Resync(733));
        assert!(
            matches!(log.since("s", Some(701), &a), Since::Changes(c, _) if c.len() == MAX_ENTRIES)
        );
        // A change too big to keep, and values replaced by a restore.
        let big = "x".repeat(MAX_SCRIPT_BYTES);
        log.record("s", page(2, None), &[change("big", None, Some(&big))]);
        assert_eq!(log.since("s", Some(733), &a), Since::Resync(734));
        assert_eq!(log.since("s", Some(734), &a), Since::Changes(vec![], 734));
        assert_eq!(log.reset("s"), 735);
        assert_eq!(log.since("s", Some(734), &a), Since::Resync(735));
        assert_eq!(log.bytes, 0, "nothing kept, nothing counted");
    }

    #[test]
    fn the_total_bound_drops_the_oldest_change_of_any_script() {
        let mut log = ChangeLog::new(1);
        let v = "x".repeat(MAX_SCRIPT_BYTES / 2);
        let n = MAX_TOTAL_BYTES / (MAX_SCRIPT_BYTES / 2) + 1;
        for i in 0..n {
            log.record(
                &format!("s{i}"),
                page(2, None),
                &[change("k", None, Some(&v))],
            );
        }
        assert!(log.bytes <= MAX_TOTAL_BYTES);
        // The first script's change went; the last one's is kept.
        assert_eq!(log.since("s0", Some(1), &page(1, None)), Since::Resync(2));
        let last = format!("s{}", n - 1);
        assert!(
            matches!(log.since(&last, Some(1), &page(1, None)), Since::Changes(c, _) if c.len() == 1)
        );
    }
}
