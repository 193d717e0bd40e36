//! `GM_getTab` / `GM_saveTab` / `GM_getTabs`: one JSON object per (script, tab), living as long
//! as the tab. Pure: what is kept, its bounds, and its stored form; the provider
//! (`provider::gm_tab_objects`) keeps it in memory, mirrors each script's objects into
//! `chrome.storage.session` ([`key`]) and drops a tab's when it closes.
//!
//! The tab is Chrome's (`sender.tab.id`), never the page's word, and the script is the one the
//! channel's token proves: a script reads and writes only its own objects. A page in an
//! incognito window has its objects marked so: `GM_getTabs` from a normal page never lists
//! them, nor one from an incognito page a normal tab's (tab ids are unique across both).

use serde_json::Value;

use crate::vec_map::VecMap;

/// Largest object one tab may hold, as JSON text in bytes.
pub const MAX_OBJECT_BYTES: usize = 64 * 1024;
/// Largest total of one script's objects across its tabs, in bytes (also `GM_getTabs`'s answer).
pub const MAX_SCRIPT_BYTES: usize = 1024 * 1024;
/// Most tabs one script may hold an object in.
pub const MAX_TABS_PER_SCRIPT: usize = 1_000;
/// Largest total of all scripts' objects, in bytes: they live in `chrome.storage.session`,
/// whose 10 MiB other state shares (incognito runs, opened tabs, the rate window).
pub const MAX_ALL_BYTES: usize = 4 * 1024 * 1024;
/// `chrome.storage.session` key of one script's objects: `[[tab, incognito, "JSON text"]…]`.
pub const KEY_PREFIX: &str = "gmTab/";

pub fn key(uuid: &str) -> String {
    format!("{KEY_PREFIX}{uuid}")
}

/// One tab's object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub tab: i64,
    pub incognito: bool,
    /// JSON text, checked when saved.
    pub json: String,
}

/// Every script's tab objects.
#[derive(Debug, Default)]
pub struct TabObjects {
    scripts: VecMap<String, Vec<Entry>>,
    total: usize,
}

/// What [`TabObjects::save`] did: the script's entries changed (to be stored), and what the
/// tab held before (to put back if storing fails).
#[derive(Debug, PartialEq, Eq)]
pub struct Saved {
    pub before: Option<Entry>,
}

/// The JSON text a script asked to save, checked: valid JSON, within [`MAX_OBJECT_BYTES`].
/// `{}` (what `GM_getTab` gives a tab with none) and `null` mean "no object".
pub fn check(json: &str) -> Result<Option<String>, String> {
    if json.len() > MAX_OBJECT_BYTES {
        return Err(format!(
            "GM_saveTab: the tab object is {} bytes as JSON, over the {} KiB one tab may hold; \
             the tab keeps its earlier object",
            json.len(),
            MAX_OBJECT_BYTES / 1024
        ));
    }
    let v: Value = crate::text::parse_json(json).map_err(|e| {
        format!("GM_saveTab: the tab object is not JSON ({e}); the tab keeps its earlier object")
    })?;
    match &v {
        Value::Null => Ok(None),
        Value::Object(o) if o.is_empty() => Ok(None),
        // Kept as the page wrote it (`JSON.stringify`'s key order), now known to be JSON.
        _ => Ok(Some(json.trim().to_owned())),
    }
}

impl TabObjects {
    pub fn is_empty(&self) -> bool {
        self.scripts.is_empty()
    }

    /// The object of `uuid` in `tab`, as JSON text (`{}` when it has none).
    pub fn get(&self, uuid: &str, tab: i64) -> &str {
        self.scripts
            .get(uuid)
            .and_then(|es| es.iter().find(|e| e.tab == tab))
            .map_or("{}", |e| e.json.as_str())
    }

    /// `GM_getTabs`: `{"tab id": object…}` as JSON text, the script's objects in tabs of the
    /// same kind (incognito or not) as the asking one. Bounded by [`MAX_SCRIPT_BYTES`] plus
    /// the ids.
    pub fn all(&self, uuid: &str, incognito: bool) -> String {
        let mut out = String::from("{");
        for e in self
            .scripts
            .get(uuid)
            .into_iter()
            .flatten()
            .filter(|e| e.incognito == incognito)
        {
            if out.len() > 1 {
                out.push(',');
            }
            out.push('"');
            out.push_str(&e.tab.to_string());
            out.push_str("\":");
            out.push_str(&e.json);
        }
        out.push('}');
        out
    }

    fn script_bytes(&self, uuid: &str) -> usize {
        self.scripts
            .get(uuid)
            .map_or(0, |es| es.iter().map(|e| e.json.len()).sum())
    }

    /// Stores `json` (checked by [`check`]; `None` removes the object) for `uuid` in `tab`,
    /// or refuses with the sentence the script reads. Nothing changes on a refusal.
    pub fn save(
        &mut self,
        uuid: &str,
        tab: i64,
        incognito: bool,
        json: Option<String>,
    ) -> Result<Saved, String> {
        let old_len = self
            .scripts
            .get(uuid)
            .and_then(|es| es.iter().find(|e| e.tab == tab))
            .map_or(0, |e| e.json.len());
        if let Some(j) = &json {
            let script = self.script_bytes(uuid) - old_len + j.len();
            if script > MAX_SCRIPT_BYTES {
                return Err(format!(
                    "GM_saveTab: this script's tab objects would take {script} bytes across its \
                     tabs, over the {} KiB it may keep; save smaller objects or clear those of \
                     other tabs (GM_saveTab({{}})); the tab keeps its earlier object",
                    MAX_SCRIPT_BYTES / 1024
                ));
            }
            let all = self.total - old_len + j.len();
            if all > MAX_ALL_BYTES {
                return Err(format!(
                    "GM_saveTab: all scripts' tab objects would take {all} bytes, over the {} \
                     MiB the provider keeps; the tab keeps its earlier object",
                    MAX_ALL_BYTES / (1024 * 1024)
                ));
            }
            let count = self.scripts.get(uuid).map_or(0, Vec::len);
            if old_len == 0
                && self
                    .scripts
                    .get(uuid)
                    .is_none_or(|es| es.iter().all(|e| e.tab != tab))
                && count >= MAX_TABS_PER_SCRIPT
            {
                return Err(format!(
                    "GM_saveTab: this script already keeps an object in {count} tabs, the most it \
                     may; the tab keeps its earlier object"
                ));
            }
        }
        let before = self.take(uuid, tab);
        if let Some(json) = json {
            self.total += json.len();
            let entry = Entry {
                tab,
                incognito,
                json,
            };
            match self.scripts.get_mut(uuid) {
                Some(es) => es.push(entry),
                None => {
                    self.scripts.insert(uuid.to_owned(), vec![entry]);
                }
            }
        }
        Ok(Saved { before })
    }

    /// Puts back what a [`TabObjects::save`] replaced (its storing failed).
    pub fn undo(&mut self, uuid: &str, tab: i64, before: Option<Entry>) {
        self.take(uuid, tab);
        if let Some(e) = before {
            let _ = self.save(uuid, e.tab, e.incognito, Some(e.json));
        }
    }

    fn take(&mut self, uuid: &str, tab: i64) -> Option<Entry> {
        let es = self.scripts.get_mut(uuid)?;
        let i = es.iter().position(|e| e.tab == tab)?;
        let e = es.swap_remove(i);
        if es.is_empty() {
            self.scripts.remove(uuid);
        }
        self.total -= e.json.len();
        Some(e)
    }

    /// The tab closed: the scripts that held an object in it (their stored form changes).
    pub fn remove_tab(&mut self, tab: i64) -> Vec<String> {
        let holders: Vec<String> = self
            .scripts
            .iter()
            .filter(|(_, es)| es.iter().any(|e| e.tab == tab))
            .map(|(u, _)| u.clone())
            .collect();
        for u in &holders {
            self.take(u, tab);
        }
        holders
    }

    /// The script was deleted: whether it held any object.
    pub fn remove_script(&mut self, uuid: &str) -> bool {
        match self.scripts.remove(uuid) {
            Some(es) => {
                self.total -= es.iter().map(|e| e.json.len()).sum::<usize>();
                true
            }
            None => false,
        }
    }

    /// The stored form of `uuid`'s objects (`None`: it has none; the key is removed).
    pub fn stored(&self, uuid: &str) -> Option<Value> {
        let es = self.scripts.get(uuid)?;
        Some(Value::Array(
            es.iter()
                .map(|e| serde_json::json!([e.tab, e.incognito, e.json]))
                .collect(),
        ))
    }

    /// Reads one script's stored objects back (a fresh worker), keeping those whose tab
    /// `keep` says is still open, within every bound; anything malformed is skipped. Whether
    /// something was dropped (its stored form is then written again).
    pub fn load(&mut self, uuid: &str, stored: &Value, keep: &dyn Fn(i64) -> bool) -> bool {
        let items = stored.as_array().map(Vec::as_slice).unwrap_or_default();
        let mut dropped = false;
        for item in items.iter().take(MAX_TABS_PER_SCRIPT) {
            let parsed = match item.as_array().map(Vec::as_slice) {
                Some([tab, Value::Bool(incognito), Value::String(json)]) => {
                    tab.as_i64().map(|t| (t, *incognito, json))
                }
                _ => None,
            };
            let Some((tab, incognito, json)) = parsed else {
                dropped = true;
                continue;
            };
            let ok = keep(tab)
                && self.get(uuid, tab) == "{}"
                && matches!(check(json), Ok(Some(_)))
                && self.save(uuid, tab, incognito, Some(json.clone())).is_ok();
            dropped |= !ok;
        }
        dropped |= items.len() > MAX_TABS_PER_SCRIPT;
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(bytes: usize) -> String {
        format!("{{\"s\":\"{}\"}}", "x".repeat(bytes.saturating_sub(8)))
    }

    #[test]
    fn a_script_reads_its_own_object_of_its_own_tab_and_none_other() {
        let mut t = TabObjects::default();
        assert_eq!(t.get("a", 1), "{}");
        t.save("a", 1, false, check(r#"{"n":1}"#).unwrap()).unwrap();
        t.save("a", 2, false, check(r#"{"n":2}"#).unwrap()).unwrap();
        t.save("b", 1, false, check(r#"{"b":true}"#).unwrap())
            .unwrap();
        assert_eq!(t.get("a", 1), r#"{"n":1}"#);
        assert_eq!(t.get("b", 1), r#"{"b":true}"#);
        assert_eq!(t.get("b", 2), "{}", "b never saved in tab 2");
        assert_eq!(t.all("a", false), r#"{"1":{"n":1},"2":{"n":2}}"#);
        assert_eq!(t.all("b", false), r#"{"1":{"b":true}}"#);
        assert_eq!(t.all("c", false), "{}");
        // `{}` clears it.
        t.save("a", 2, false, check("{}").unwrap()).unwrap();
        assert_eq!(t.all("a", false), r#"{"1":{"n":1}}"#);
    }

    #[test]
    fn bounds_are_checked_before_anything_changes() {
        assert!(check(&obj(MAX_OBJECT_BYTES)).is_ok());
        let e = check(&obj(MAX_OBJECT_BYTES + 1)).unwrap_err();
        assert!(e.contains("over the 64 KiB"), "{e}");
        assert!(check("{not json").unwrap_err().contains("not JSON"));
        assert!(
            check(&"[".repeat(10_000)).is_err(),
            "too deep: refused, no panic"
        );
        let mut t = TabObjects::default();
        let big = obj(MAX_OBJECT_BYTES);
        let fit = MAX_SCRIPT_BYTES / MAX_OBJECT_BYTES;
        for tab in 0..fit {
            t.save("a", tab as i64, false, Some(big.clone())).unwrap();
        }
        t.save("a", 0, false, Some(obj(10))).unwrap();
        t.save("a", 0, false, Some(big.clone())).unwrap();
        let e = t.save("a", 999, false, Some(big.clone())).unwrap_err();
        assert!(e.contains("over the 1024 KiB"), "{e}");
        assert_eq!(t.get("a", 999), "{}");
        // Another script still has its own room, up to the total of all.
        for s in 1..(MAX_ALL_BYTES / MAX_SCRIPT_BYTES) {
            for tab in 0..fit {
                t.save(&format!("s{s}"), tab as i64, false, Some(big.clone()))
                    .unwrap();
            }
        }
        let e = t.save("z", 1, false, Some(big.clone())).unwrap_err();
        assert!(e.contains("all scripts"), "{e}");
        let mut t = TabObjects::default();
        for tab in 0..MAX_TABS_PER_SCRIPT {
            t.save("a", tab as i64, false, Some("1".into())).unwrap();
        }
        assert!(t
            .save("a", -1, false, Some("1".into()))
            .unwrap_err()
            .contains("the most it may"));
        t.save("a", 3, false, Some("2".into())).unwrap();
    }

    #[test]
    fn a_closed_tab_and_a_deleted_script_lose_their_objects() {
        let mut t = TabObjects::default();
        t.save("a", 1, false, Some("1".into())).unwrap();
        t.save("a", 2, false, Some("2".into())).unwrap();
        t.save("b", 1, false, Some("3".into())).unwrap();
        assert_eq!(t.remove_tab(1), ["a", "b"]);
        assert_eq!(t.all("a", false), r#"{"2":2}"#);
        assert_eq!(t.stored("b"), None);
        assert!(t.remove_script("a"));
        assert!(t.is_empty());
        assert_eq!(t.total, 0);
    }

    #[test]
    fn incognito_tabs_are_listed_only_to_incognito_pages() {
        let mut t = TabObjects::default();
        t.save("a", 1, false, Some("1".into())).unwrap();
        t.save("a", 2, true, Some("2".into())).unwrap();
        assert_eq!(t.all("a", false), r#"{"1":1}"#);
        assert_eq!(t.all("a", true), r#"{"2":2}"#);
    }

    #[test]
    fn the_stored_form_reads_back_without_closed_tabs_or_damage() {
        let mut t = TabObjects::default();
        t.save("a", 1, true, Some(r#"{"n":1}"#.into())).unwrap();
        t.save("a", 2, false, Some("2".into())).unwrap();
        let mut stored = t.stored("a").unwrap();
        stored.as_array_mut().unwrap().extend([
            serde_json::json!("junk"),
            serde_json::json!([3, false, "{x"]),
        ]);
        let mut u = TabObjects::default();
        assert!(u.load("a", &stored, &|tab| tab != 2));
        assert_eq!(u.all("a", true), r#"{"1":{"n":1}}"#);
        assert_eq!(u.all("a", false), "{}");
        let mut w = TabObjects::default();
        assert!(!w.load("a", &t.stored("a").unwrap(), &|_| true));
        assert!(!w.load("x", &serde_json::json!(null), &|_| true));
    }
}
