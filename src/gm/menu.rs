//! `GM_registerMenuCommand`: the commands scripts registered in open pages, as the worker keeps
//! them for the popup. Pure: the provider feeds it what the channel proved (the script, by its
//! token) and what Chrome said about the sender (tab, frame, document), and asks it what the
//! popup shows and where a click goes.
//!
//! One [`Entry`] per script per document: a page's script states its *whole* list every time it
//! changes (and again each time its held wait ends), so the list here is always the page's own,
//! a worker restart loses nothing for long (the page's next wait restores it), and no message can
//! touch another script's or another page's list: the key is the proven uuid plus Chrome's
//! sender, never a field of the message. A newer document in the same frame replaces the entry;
//! a tab's entries go when it closes. Whether an entry's document is still the one shown (not
//! navigated away, removed, or in the back/forward cache) is Chrome's answer, asked by the
//! provider each time the popup lists or clicks: tab events cannot tell (a "loading" tab may be
//! an iframe navigating, and a page restored from the cache keeps its document id).

/// Most commands one script may have in one page.
pub const MAX_COMMANDS: usize = 32;
/// Longest caption, in characters (longer ones are cut with "…").
pub const MAX_CAPTION_CHARS: usize = 120;
/// Longest command id, in bytes (the id is the caption unless the script gives one).
pub const MAX_ID_BYTES: usize = 512;
/// Most entries kept in all (pages × scripts); past it, the oldest of the script holding the
/// most goes first.
pub const MAX_ENTRIES: usize = 500;
/// Most entries one script keeps (its pages and frames); past it, its own oldest goes. A
/// script in a page that makes frames by the hundred cannot push out another's commands.
pub const MAX_ENTRIES_PER_SCRIPT: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// The script's own id for it (what `GM_registerMenuCommand` returned).
    pub id: String,
    pub caption: String,
    pub access_key: Option<String>,
}

/// Where a script's page is, as Chrome reported the sender.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub tab: i64,
    pub frame: i64,
    pub document: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Unique in this worker: what the popup names when it clicks.
    pub handle: u64,
    pub uuid: String,
    pub place: Place,
    pub url: String,
    pub commands: Vec<Command>,
    /// A click that came while no wait of the page was held, delivered with its next wait.
    pub pending_click: Option<String>,
}

#[derive(Debug, Default)]
pub struct Menus {
    entries: Vec<Entry>,
    next_handle: u64,
}

#[derive(Debug, PartialEq, Eq)]
pub enum SetOutcome {
    /// Kept (or removed, for an empty list); a click waiting for it, if any.
    Kept {
        handle: Option<u64>,
        click: Option<String>,
    },
    /// An empty list: the page's entry (if it had one) is gone; a click waiting for it, if any.
    Removed {
        handle: Option<u64>,
        click: Option<String>,
    },
}

/// Why a click was not delivered.
#[derive(Debug, PartialEq, Eq)]
pub enum ClickError {
    NoSuchCommand,
}

impl Menus {
    /// No page has menu commands.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn find(&self, uuid: &str, place: &Place) -> Option<usize> {
        self.entries.iter().position(|e| {
            e.uuid == uuid && e.place.tab == place.tab && e.place.frame == place.frame
        })
    }

    /// The page at `place` says script `uuid` now has exactly `commands`.
    pub fn set(
        &mut self,
        uuid: &str,
        place: Place,
        url: &str,
        commands: Vec<Command>,
    ) -> SetOutcome {
        let at = self.find(uuid, &place);
        // Another document in the same frame (it navigated, or a page came back from the
        // back/forward cache): the list of the one that spoke last replaces the other's.
        if commands.is_empty() {
            let removed = at.map(|i| self.entries.remove(i));
            return SetOutcome::Removed {
                handle: removed.as_ref().map(|e| e.handle),
                click: removed.and_then(|e| e.pending_click),
            };
        }
        match at.and_then(|i| self.entries.get_mut(i)) {
            Some(e) => {
                if e.place.document != place.document {
                    e.pending_click = None;
                }
                e.place = place;
                e.url = url.to_owned();
                e.commands = commands;
                let click = e.pending_click.take();
                SetOutcome::Kept {
                    handle: Some(e.handle),
                    click,
                }
            }
            None => {
                self.make_room(uuid);
                self.next_handle = self.next_handle.saturating_add(1);
                let handle = self.next_handle;
                self.entries.push(Entry {
                    handle,
                    uuid: uuid.to_owned(),
                    place,
                    url: url.to_owned(),
                    commands,
                    pending_click: None,
                });
                SetOutcome::Kept {
                    handle: Some(handle),
                    click: None,
                }
            }
        }
    }

    /// Room for one more entry of `uuid`: its own oldest goes when it holds its share, else,
    /// with every slot taken, the oldest of the script holding the most (the first of them in
    /// the list, on a tie).
    fn make_room(&mut self, uuid: &str) {
        let count = |u: &str| self.entries.iter().filter(|e| e.uuid == u).count();
        let evict = if count(uuid) >= MAX_ENTRIES_PER_SCRIPT {
            Some(uuid.to_owned())
        } else if self.entries.len() >= MAX_ENTRIES {
            let mut counts: crate::vec_map::VecMap<&str, usize> = Default::default();
            for e in &self.entries {
                if let Some(n) = counts.get_or_insert_with(&e.uuid, || 0) {
                    *n = n.saturating_add(1);
                }
            }
            let mut most: Option<(&str, usize)> = None;
            for e in &self.entries {
                let n = counts.get(e.uuid.as_str()).copied().unwrap_or(0);
                if most.is_none_or(|(_, m)| n > m) {
                    most = Some((&e.uuid, n));
                }
            }
            most.map(|(u, _)| u.to_owned())
        } else {
            None
        };
        if let Some(u) = evict {
            if let Some(i) = self.entries.iter().position(|e| e.uuid == u) {
                self.entries.remove(i);
            }
        }
    }

    /// The entries of one tab, for the popup.
    pub fn for_tab(&self, tab: i64) -> Vec<&Entry> {
        self.entries.iter().filter(|e| e.place.tab == tab).collect()
    }

    /// The user clicked command `id` of entry `handle`: the entry and the id, so the provider
    /// answers that page's held wait (or, if none is held, the click is kept for the next).
    pub fn click(&mut self, handle: u64, id: &str, held: bool) -> Result<&Entry, ClickError> {
        let e = self
            .entries
            .iter_mut()
            .find(|e| e.handle == handle && e.commands.iter().any(|c| c.id == id))
            .ok_or(ClickError::NoSuchCommand)?;
        if !held {
            e.pending_click = Some(id.to_owned());
        }
        Ok(e)
    }

    /// The tab closed: its commands go.
    pub fn drop_tab(&mut self, tab: i64) -> Vec<Entry> {
        let (gone, keep): (Vec<Entry>, Vec<Entry>) =
            self.entries.drain(..).partition(|e| e.place.tab == tab);
        self.entries = keep;
        gone
    }

    /// Chrome said entry `handle`'s `document` no longer exists: the entry goes, unless a newer
    /// document took it over meanwhile (same handle, another document).
    pub fn drop_gone(&mut self, handle: u64, document: Option<&str>) -> Option<Entry> {
        let i = self
            .entries
            .iter()
            .position(|e| e.handle == handle && e.place.document.as_deref() == document)?;
        Some(self.entries.remove(i))
    }

    /// The script is no longer installed (or no longer grants menus): its commands go.
    pub fn drop_script(&mut self, uuid: &str) {
        self.entries.retain(|e| e.uuid != uuid);
    }

    pub fn entry(&self, handle: u64) -> Option<&Entry> {
        self.entries.iter().find(|e| e.handle == handle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(id: &str) -> Command {
        Command {
            id: id.into(),
            caption: id.to_uppercase(),
            access_key: None,
        }
    }

    fn at(tab: i64, frame: i64, doc: &str) -> Place {
        Place {
            tab,
            frame,
            document: Some(doc.into()),
        }
    }

    fn kept(o: SetOutcome) -> u64 {
        match o {
            SetOutcome::Kept {
                handle: Some(h), ..
            } => h,
            o => panic!("{o:?}"),
        }
    }

    #[test]
    fn a_page_states_its_whole_list_and_scripts_and_pages_stay_apart() {
        let mut m = Menus::default();
        let a = kept(m.set("A", at(1, 0, "d1"), "u", vec![cmd("x"), cmd("y")]));
        let b = kept(m.set("B", at(1, 0, "d1"), "u", vec![cmd("x")]));
        let a2 = kept(m.set("A", at(2, 0, "d2"), "u", vec![cmd("z")]));
        assert!(a != b && a != a2);
        // Restating keeps the handle and replaces the list.
        assert_eq!(kept(m.set("A", at(1, 0, "d1"), "u", vec![cmd("y")])), a);
        assert_eq!(m.entry(a).unwrap().commands, [cmd("y")]);
        assert_eq!(m.for_tab(1).len(), 2);
        assert_eq!(m.for_tab(2).len(), 1);
        // A's empty list removes only A's entry in that page.
        m.set("A", at(1, 0, "d1"), "u", vec![]);
        assert_eq!(
            m.for_tab(1)
                .iter()
                .map(|e| e.uuid.as_str())
                .collect::<Vec<_>>(),
            ["B"]
        );
        // A click names an entry and one of its commands; nothing else is found.
        assert!(m.click(b, "x", true).is_ok());
        assert_eq!(m.click(b, "y", true), Err(ClickError::NoSuchCommand));
        assert_eq!(m.click(a, "y", true), Err(ClickError::NoSuchCommand));
    }

    #[test]
    fn a_click_with_no_wait_held_is_kept_for_the_pages_next_wait_only() {
        let mut m = Menus::default();
        let h = kept(m.set("A", at(1, 0, "d1"), "u", vec![cmd("x")]));
        m.click(h, "x", false).unwrap();
        assert_eq!(
            m.set("A", at(1, 0, "d1"), "u", vec![cmd("x")]),
            SetOutcome::Kept {
                handle: Some(h),
                click: Some("x".into())
            }
        );
        // Delivered once.
        assert_eq!(
            m.set("A", at(1, 0, "d1"), "u", vec![cmd("x")]),
            SetOutcome::Kept {
                handle: Some(h),
                click: None
            }
        );
        // A new document in the frame does not inherit the old one's click.
        m.click(h, "x", false).unwrap();
        assert_eq!(
            m.set("A", at(1, 0, "d9"), "u", vec![cmd("x")]),
            SetOutcome::Kept {
                handle: Some(h),
                click: None
            }
        );
    }

    #[test]
    fn a_closed_tab_drops_its_commands_and_a_gone_document_only_its_own() {
        let mut m = Menus::default();
        kept(m.set("A", at(1, 0, "d1"), "u", vec![cmd("x")]));
        let sub = kept(m.set("A", at(1, 3, "d2"), "u", vec![cmd("x")]));
        kept(m.set("A", at(2, 0, "d3"), "u", vec![cmd("x")]));
        assert_eq!(m.drop_tab(1).len(), 2);
        assert!(m.for_tab(1).is_empty());
        assert_eq!(m.for_tab(2).len(), 1);
        // A page back from the back/forward cache keeps its document id: it may state its
        // list again.
        let top = kept(m.set("A", at(1, 0, "d1"), "u", vec![cmd("x")]));
        assert_eq!(m.for_tab(1).len(), 1);
        // A gone document drops its entry, not one a newer document in that frame holds.
        let newer = kept(m.set("A", at(1, 0, "d4"), "u", vec![cmd("y")]));
        assert_eq!(newer, top, "the frame's entry, taken over");
        assert!(m.drop_gone(top, Some("d1")).is_none());
        assert_eq!(m.entry(top).unwrap().commands, [cmd("y")]);
        assert!(m.drop_gone(sub, Some("d2")).is_none(), "already dropped");
        assert!(m.drop_gone(top, Some("d4")).is_some());
        assert!(m.for_tab(1).is_empty());
        kept(m.set("A", at(1, 0, "d5"), "u", vec![cmd("x")]));
        m.drop_script("A");
        assert!(m.for_tab(1).is_empty() && m.for_tab(2).is_empty());
    }

    /// A script whose page makes frames by the hundred fills only its own share: another
    /// script's command in another tab stays. Past the total, the script holding the most
    /// gives up its oldest.
    #[test]
    fn entries_are_bounded_per_script_and_in_all() {
        let mut m = Menus::default();
        kept(m.set("V", at(1, 0, "v"), "u", vec![cmd("mine")]));
        for f in 0..1000 {
            kept(m.set("A", at(2, f, &f.to_string()), "u", vec![cmd("x")]));
        }
        assert_eq!(m.for_tab(1).len(), 1, "the victim's command stays");
        assert_eq!(m.for_tab(2).len(), MAX_ENTRIES_PER_SCRIPT);
        assert!(
            m.for_tab(2).iter().all(|e| e.place.frame >= 1000 - 64),
            "its own newest are kept"
        );
        // Many scripts at their share fill the total: the biggest holder gives way.
        let mut m = Menus::default();
        kept(m.set("V", at(1, 0, "v"), "u", vec![cmd("mine")]));
        for s in 0..10 {
            for f in 0..MAX_ENTRIES_PER_SCRIPT as i64 {
                let d = format!("{s}-{f}");
                kept(m.set(&format!("S{s}"), at(2 + s, f, &d), "u", vec![cmd("x")]));
            }
        }
        assert_eq!(m.entries.len(), MAX_ENTRIES);
        assert_eq!(m.for_tab(1).len(), 1, "the victim's command stays");
    }
}
