//! Where scripts ran lately, by tab (`runs/inTabs`, in `chrome.storage.session`: tab ids mean
//! nothing after the browser quits). The popup's "Scripts on this tab" lists the scripts whose
//! rules reach the address the tab shows; this finds the ones that ran in the page it shows
//! though their rules do not reach that address — the page changed it with
//! `history.pushState` (a single-page site: Chrome injects nothing then), or they ran in a
//! frame only. Written with each run report, in the `set` of its ring when that is in
//! `storage.session` too.

use serde_json::{json, Value};

/// The storage key.
pub const IN_TABS_KEY: &str = "runs/inTabs";
/// Entries kept, newest last (about 100 bytes each).
pub const MAX_ENTRIES: usize = 256;

/// One run's place: the tab, the script, Chrome's `documentId` of the page, the frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub tab: i64,
    pub uuid: String,
    pub document: String,
    pub frame: i64,
}

/// The stored list, read leniently (an entry of another shape is skipped).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InTabs(pub Vec<Place>);

impl InTabs {
    pub fn decode(v: Option<&Value>) -> InTabs {
        let Some(list) = v.and_then(Value::as_array) else {
            return InTabs::default();
        };
        let place = |e: &Value| {
            let a = e.as_array()?;
            Some(Place {
                tab: a.first()?.as_i64()?,
                uuid: a.get(1)?.as_str()?.to_owned(),
                document: a.get(2)?.as_str()?.to_owned(),
                frame: a.get(3)?.as_i64()?,
            })
        };
        let mut out: Vec<Place> = list.iter().filter_map(place).collect();
        let extra = out.len().saturating_sub(MAX_ENTRIES);
        out.drain(..extra);
        InTabs(out)
    }

    pub fn encode(&self) -> Value {
        Value::Array(
            self.0
                .iter()
                .map(|p| json!([p.tab, p.uuid, p.document, p.frame]))
                .collect(),
        )
    }

    /// Records a run's place as the newest (once: an earlier same place moves to the end), the
    /// oldest dropped past [`MAX_ENTRIES`].
    pub fn push(&mut self, place: Place) {
        self.0.retain(|p| *p != place);
        self.0.push(place);
        let extra = self.0.len().saturating_sub(MAX_ENTRIES);
        self.0.drain(..extra);
    }

    /// The places in tab `tab`, newest first.
    pub fn of_tab(&self, tab: i64) -> impl Iterator<Item = &Place> {
        self.0.iter().rev().filter(move |p| p.tab == tab)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(tab: i64, uuid: &str, frame: i64) -> Place {
        Place {
            tab,
            uuid: uuid.into(),
            document: format!("doc{tab}"),
            frame,
        }
    }

    #[test]
    fn newest_first_once_each_and_bounded() {
        let mut ix = InTabs::default();
        ix.push(place(1, "a", 0));
        ix.push(place(1, "b", 3));
        ix.push(place(2, "c", 0));
        ix.push(place(1, "a", 0));
        let of1: Vec<&str> = ix.of_tab(1).map(|p| p.uuid.as_str()).collect();
        assert_eq!(of1, ["a", "b"]);
        let back = InTabs::decode(Some(&ix.encode()));
        assert_eq!(back, ix);
        for i in 0..(MAX_ENTRIES + 10) {
            ix.push(place(9, &format!("u{i}"), 0));
        }
        assert_eq!(ix.0.len(), MAX_ENTRIES);
        assert_eq!(
            ix.of_tab(9).next().map(|p| p.uuid.as_str()),
            Some(&*format!("u{}", MAX_ENTRIES + 9))
        );
        // Lenient: junk skipped, an oversized list cut to its newest.
        let junk = json!([[1, "a", "d", 0], "x", [1, 2, 3, 4], null]);
        assert_eq!(InTabs::decode(Some(&junk)).0.len(), 1);
    }
}
