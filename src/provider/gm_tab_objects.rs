//! The provider's side of `GM_getTab` / `GM_saveTab` / `GM_getTabs` (what is kept and its
//! bounds: `gm::tab_objects`). The objects are held in memory and each script's are mirrored
//! into `chrome.storage.session` (`gmTab/<uuid>`), written before a save is answered: a worker
//! that stopped reads them back (lazily, before its first tab-object request),
//! dropping those of tabs no longer open and of scripts no longer installed. Session storage is
//! never on disk and is emptied when the browser quits, as a tab's object ends with its tab.
//! While any object is held the shell listens to `tabs.onRemoved` (`Provider::tab_bound`).

use serde_json::{json, Map, Value};

use super::gm::grants_any;
use super::Provider;
use crate::env::{Area, Env};
use crate::gm::message::GmRequest;
use crate::gm::tab_objects::{self, TabObjects};

#[derive(Default)]
pub(crate) struct TabState {
    pub(super) objects: TabObjects,
    /// What an earlier worker stored has been read.
    loaded: bool,
    /// Tabs closed while it was being read: not kept, whatever the read saw.
    closed_while_loading: Vec<i64>,
    /// Scripts whose stored form lags memory (a tab closed: written by
    /// [`Provider::store_tab_objects`]).
    dirty: Vec<String>,
}

/// Most closes remembered while the stored objects are read.
const MAX_CLOSED_WHILE_LOADING: usize = 256;

fn error(message: impl Into<String>) -> Value {
    json!({ "error": message.into() })
}

const NO_TAB: &str = "this page is not in a browser tab, so it has no tab object";

impl<E: Env> Provider<E> {
    /// Reads once what an earlier worker stored.
    async fn tab_objects_ready(&self) {
        if self.gm_tab_objects.borrow().loaded {
            return;
        }
        let _loading = self.tab_objects_load.lock().await;
        if self.gm_tab_objects.borrow().loaded {
            return;
        }
        let keys: Vec<String> = self
            .env
            .keys(Area::Session)
            .await
            .unwrap_or_default()
            .into_iter()
            .filter(|k| k.starts_with(tab_objects::KEY_PREFIX))
            .collect();
        let mut stored = Map::new();
        if !keys.is_empty() {
            let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
            stored = self.env.get(Area::Session, &refs).await.unwrap_or_default();
        }
        // Which tabs are open, and which scripts installed; unknown (a failed read) keeps all.
        let open: Option<Vec<i64>> = if stored.is_empty() {
            None
        } else {
            self.env
                .tabs()
                .await
                .ok()
                .map(|ts| ts.iter().map(|t| t.id).collect())
        };
        let installed: Option<Vec<String>> = if stored.is_empty() {
            None
        } else {
            self.scripts()
                .await
                .ok()
                .map(|s| s.records.iter().map(|r| r.uuid.clone()).collect())
        };
        let mut gone_keys = Vec::new();
        {
            let mut st = self.gm_tab_objects.borrow_mut();
            let closed = std::mem::take(&mut st.closed_while_loading);
            for (k, v) in &stored {
                let Some(uuid) = k.strip_prefix(tab_objects::KEY_PREFIX) else {
                    continue;
                };
                if installed
                    .as_ref()
                    .is_some_and(|i| !i.iter().any(|u| u == uuid))
                {
                    gone_keys.push(k.clone());
                    continue;
                }
                let keep = |tab: i64| {
                    !closed.contains(&tab) && open.as_ref().is_none_or(|o| o.contains(&tab))
                };
                if st.objects.load(uuid, v, &keep) {
                    st.dirty.push(uuid.to_owned());
                }
            }
            st.loaded = true;
        }
        if !gone_keys.is_empty() {
            let refs: Vec<&str> = gone_keys.iter().map(String::as_str).collect();
            let _ = self.env.remove(Area::Session, &refs).await;
        }
        self.store_tab_objects().await;
        self.tabs_changed();
    }

    /// Writes the stored form of the scripts whose objects changed without being stored.
    pub async fn store_tab_objects(&self) {
        loop {
            let (uuid, value) = {
                let mut st = self.gm_tab_objects.borrow_mut();
                let Some(uuid) = st.dirty.pop() else {
                    return;
                };
                let value = st.objects.stored(&uuid);
                (uuid, value)
            };
            let key = tab_objects::key(&uuid);
            let _ = match value {
                Some(v) => {
                    let mut m = Map::new();
                    m.insert(key, v);
                    self.env.set(Area::Session, m).await
                }
                None => self.env.remove(Area::Session, &[&key]).await,
            };
        }
    }

    /// A tab-object request of `record`'s script, if it grants that function.
    pub(super) async fn gm_tab_object(
        &self,
        record: &crate::scripts::record::ScriptRecord,
        from: &super::Sender,
        req: GmRequest,
    ) -> Value {
        let uuid = record.uuid.as_str();
        match req {
            GmRequest::TabObjectGet if grants_any(record, &["GM_getTab"]) => {
                self.gm_get_tab(uuid, from).await
            }
            GmRequest::TabObjectSave(json) if grants_any(record, &["GM_saveTab"]) => {
                self.gm_save_tab(uuid, from, &json).await
            }
            GmRequest::TabObjectAll if grants_any(record, &["GM_getTabs"]) => {
                self.gm_get_tabs(uuid, from).await
            }
            GmRequest::TabObjectGet => error("GM_getTab: this script does not @grant GM_getTab"),
            GmRequest::TabObjectSave(_) => {
                error("GM_saveTab: this script does not @grant GM_saveTab")
            }
            _ => error("GM_getTabs: this script does not @grant GM_getTabs"),
        }
    }

    async fn gm_get_tab(&self, uuid: &str, from: &super::Sender) -> Value {
        let Some(tab) = from.tab_id else {
            return error(format!("GM_getTab: {NO_TAB}"));
        };
        self.tab_objects_ready().await;
        json!({ "tab": self.gm_tab_objects.borrow().objects.get(uuid, tab) })
    }

    async fn gm_get_tabs(&self, uuid: &str, from: &super::Sender) -> Value {
        self.tab_objects_ready().await;
        json!({ "tabs": self.gm_tab_objects.borrow().objects.all(uuid, from.incognito) })
    }

    /// Checks and keeps `json` for the sender's tab, then stores the script's objects; a
    /// refusal or a failed write leaves the tab's earlier object.
    async fn gm_save_tab(&self, uuid: &str, from: &super::Sender, json: &str) -> Value {
        let Some(tab) = from.tab_id else {
            return error(format!("GM_saveTab: {NO_TAB}"));
        };
        let checked = match tab_objects::check(json) {
            Ok(c) => c,
            Err(e) => return error(e),
        };
        self.tab_objects_ready().await;
        let (saved, value) = {
            let mut st = self.gm_tab_objects.borrow_mut();
            match st.objects.save(uuid, tab, from.incognito, checked) {
                Ok(s) => (s, st.objects.stored(uuid)),
                Err(e) => return error(e),
            }
        };
        self.tabs_changed();
        let key = tab_objects::key(uuid);
        let stored = match value {
            Some(v) => {
                let mut m = Map::new();
                m.insert(key, v);
                self.env.set(Area::Session, m).await
            }
            None => self.env.remove(Area::Session, &[&key]).await,
        };
        match stored {
            Ok(()) => json!({ "ok": true }),
            Err(e) => {
                self.gm_tab_objects
                    .borrow_mut()
                    .objects
                    .undo(uuid, tab, saved.before);
                self.tabs_changed();
                error(format!(
                    "GM_saveTab: the tab object could not be stored ({e}); the tab keeps its \
                     earlier object"
                ))
            }
        }
    }

    /// The tab closed: its objects go (stored by [`Provider::store_tab_objects`], which the
    /// shell runs after each close).
    pub(super) fn tab_objects_closed(&self, tab: i64) {
        let mut st = self.gm_tab_objects.borrow_mut();
        if !st.loaded && st.closed_while_loading.len() < MAX_CLOSED_WHILE_LOADING {
            st.closed_while_loading.push(tab);
        }
        for u in st.objects.remove_tab(tab) {
            if !st.dirty.contains(&u) {
                st.dirty.push(u);
            }
        }
    }

    /// The script was deleted: its objects go, from memory and session storage.
    pub(crate) async fn forget_tab_objects(&self, uuid: &str) {
        self.gm_tab_objects.borrow_mut().objects.remove_script(uuid);
        self.tabs_changed();
        let _ = self
            .env
            .remove(Area::Session, &[&tab_objects::key(uuid)])
            .await;
    }

    /// Some script keeps an object in some tab.
    pub(super) fn has_tab_objects(&self) -> bool {
        !self.gm_tab_objects.borrow().objects.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::key_store;
    use crate::env::memory::MemoryEnv;
    use crate::env::Tab;
    use crate::gm::tab_objects::{MAX_OBJECT_BYTES, MAX_SCRIPT_BYTES};
    use crate::provider::gm_test_support::{answered, gm_raw, script, tab_events_told};
    use crate::provider::Sender;
    use futures::executor::block_on;

    const GRANTS: &str = "// @grant GM_getTab\n// @grant GM.saveTab\n// @grant GM_getTabs\n";

    fn ask(p: &Provider<MemoryEnv>, token: &str, tab: i64, incognito: bool, f: Value) -> Value {
        let raw = gm_raw(token, f);
        let from = Sender {
            url: Some("https://example.com/".into()),
            tab_id: Some(tab),
            frame_id: Some(0),
            incognito,
            ..Sender::default()
        };
        answered(block_on(p.user_script_message(|| Some(raw), from)))
    }

    fn get(p: &Provider<MemoryEnv>, token: &str, tab: i64) -> Value {
        let r = ask(p, token, tab, false, json!({"op": "tabobj.get"}));
        serde_json::from_str(r["tab"].as_str().unwrap()).unwrap()
    }

    fn all(p: &Provider<MemoryEnv>, token: &str, tab: i64, incognito: bool) -> Value {
        let r = ask(p, token, tab, incognito, json!({"op": "tabobj.all"}));
        serde_json::from_str(r["tabs"].as_str().unwrap()).unwrap()
    }

    fn save(p: &Provider<MemoryEnv>, token: &str, tab: i64, incognito: bool, v: &str) -> Value {
        ask(
            p,
            token,
            tab,
            incognito,
            json!({"op": "tabobj.save", "tab": v}),
        )
    }

    fn open_tab(p: &Provider<MemoryEnv>, id: i64) {
        p.env.tabs.borrow_mut().push(Tab {
            id,
            url: "https://example.com/".into(),
            title: String::new(),
            last_accessed: 0.0,
            incognito: false,
        });
    }

    #[test]
    fn each_script_has_its_own_object_per_tab_and_a_closed_tab_loses_it() {
        let p = Provider::new(MemoryEnv::new());
        let told = tab_events_told(&p);
        let a = script(&p, "A", GRANTS);
        let b = script(&p, "B", GRANTS);
        let key = block_on(key_store::load(&p.env)).unwrap();
        let (ta, tb) = (key.token(&a, 1), key.token(&b, 1));
        assert_eq!(get(&p, &ta, 1), json!({}));
        assert_eq!(save(&p, &ta, 1, false, r#"{"n":1}"#), json!({"ok": true}));
        assert_eq!(save(&p, &ta, 2, false, r#"{"n":2}"#), json!({"ok": true}));
        assert!(p.tab_bound(), "the shell listens to tab closes");
        assert_eq!(told.borrow().last(), Some(&true));
        assert_eq!(get(&p, &ta, 1), json!({"n": 1}));
        assert_eq!(
            all(&p, &ta, 1, false),
            json!({"1": {"n": 1}, "2": {"n": 2}})
        );
        // B reads none of A's objects, in any tab.
        assert_eq!(get(&p, &tb, 1), json!({}));
        assert_eq!(all(&p, &tb, 1, false), json!({}));
        // Mirrored in session storage, never in local.
        let session = p.env.dump(Area::Session);
        assert!(session.contains_key(&tab_objects::key(&a)), "{session:?}");
        assert!(!p
            .env
            .dump(Area::Local)
            .keys()
            .any(|k| k.starts_with(tab_objects::KEY_PREFIX)));
        p.tab_removed(1);
        block_on(p.store_tab_objects());
        assert_eq!(all(&p, &ta, 2, false), json!({"2": {"n": 2}}));
        assert_eq!(
            p.env.dump(Area::Session)[&tab_objects::key(&a)],
            json!([[2, false, r#"{"n":2}"#]])
        );
        p.tab_removed(2);
        block_on(p.store_tab_objects());
        assert!(!p.tab_bound());
        assert_eq!(told.borrow().last(), Some(&false));
        assert!(!p
            .env
            .dump(Area::Session)
            .contains_key(&tab_objects::key(&a)));
    }

    #[test]
    fn saves_over_the_bounds_are_refused_and_the_old_object_stays() {
        let p = Provider::new(MemoryEnv::new());
        let a = script(&p, "A", GRANTS);
        let ta = block_on(key_store::load(&p.env)).unwrap().token(&a, 1);
        save(&p, &ta, 1, false, r#"{"keep":true}"#);
        let big = format!("{{\"s\":\"{}\"}}", "x".repeat(MAX_OBJECT_BYTES));
        let r = save(&p, &ta, 1, false, &big);
        assert!(
            r["error"].as_str().unwrap().contains("over the 64 KiB"),
            "{r}"
        );
        assert!(save(&p, &ta, 1, false, "{oops")["error"]
            .as_str()
            .unwrap()
            .contains("not JSON"));
        assert_eq!(get(&p, &ta, 1), json!({"keep": true}));
        let near = format!("{{\"s\":\"{}\"}}", "x".repeat(MAX_OBJECT_BYTES - 10));
        let fit = MAX_SCRIPT_BYTES / near.len();
        for tab in 10..10 + fit as i64 {
            assert_eq!(save(&p, &ta, tab, false, &near), json!({"ok": true}));
        }
        let r = save(&p, &ta, 5_000, false, &near);
        assert!(r["error"].as_str().unwrap().contains("1024 KiB"), "{r}");
        assert_eq!(get(&p, &ta, 5_000), json!({}));
        // A frame without a tab (no `sender.tab`) has none.
        let raw = gm_raw(&ta, json!({"op": "tabobj.save", "tab": "{}"}));
        let r = answered(block_on(
            p.user_script_message(|| Some(raw), Sender::default()),
        ));
        assert!(
            r["error"]
                .as_str()
                .unwrap()
                .contains("not in a browser tab"),
            "{r}"
        );
    }

    #[test]
    fn a_script_not_granted_them_is_refused() {
        let p = Provider::new(MemoryEnv::new());
        let a = script(&p, "A", "// @grant GM_getTab\n");
        let ta = block_on(key_store::load(&p.env)).unwrap().token(&a, 1);
        assert!(save(&p, &ta, 1, false, "{}")["error"]
            .as_str()
            .unwrap()
            .contains("does not @grant GM_saveTab"));
        assert!(ask(&p, &ta, 1, false, json!({"op": "tabobj.all"}))["error"]
            .as_str()
            .unwrap()
            .contains("does not @grant GM_getTabs"));
    }

    #[test]
    fn incognito_tabs_and_normal_tabs_do_not_see_each_other() {
        let p = Provider::new(MemoryEnv::new());
        let a = script(&p, "A", GRANTS);
        let ta = block_on(key_store::load(&p.env)).unwrap().token(&a, 1);
        save(&p, &ta, 1, false, "1");
        save(&p, &ta, 2, true, "2");
        assert_eq!(all(&p, &ta, 1, false), json!({"1": 1}));
        assert_eq!(all(&p, &ta, 2, true), json!({"2": 2}));
        assert!(!p
            .env
            .dump(Area::Local)
            .keys()
            .any(|k| k.starts_with(tab_objects::KEY_PREFIX)));
    }

    /// A fresh worker reads the objects back from session storage, without the tabs that
    /// closed while none listened, and listens to tab closes again.
    #[test]
    fn a_restarted_worker_keeps_the_objects_of_open_tabs() {
        let p = Provider::new(MemoryEnv::new());
        let a = script(&p, "A", GRANTS);
        let ta = block_on(key_store::load(&p.env)).unwrap().token(&a, 1);
        save(&p, &ta, 1, false, r#"{"n":1}"#);
        save(&p, &ta, 2, false, r#"{"n":2}"#);
        let q = Provider::new(MemoryEnv::new());
        *q.env.areas.borrow_mut() = p.env.areas.borrow().clone();
        open_tab(&q, 1);
        let told = tab_events_told(&q);
        assert_eq!(get(&q, &ta, 1), json!({"n": 1}));
        assert_eq!(all(&q, &ta, 1, false), json!({"1": {"n": 1}}));
        assert_eq!(*told.borrow(), [true]);
        assert_eq!(
            q.env.dump(Area::Session)[&tab_objects::key(&a)],
            json!([[1, false, r#"{"n":1}"#]]),
            "the closed tab's object is dropped from storage too"
        );
    }

    #[test]
    fn a_deleted_script_loses_its_objects() {
        let p = Provider::new(MemoryEnv::new());
        let a = script(&p, "A", GRANTS);
        let b = script(&p, "B", GRANTS);
        let key = block_on(key_store::load(&p.env)).unwrap();
        let (ta, tb) = (key.token(&a, 1), key.token(&b, 1));
        save(&p, &ta, 1, false, "1");
        save(&p, &tb, 1, false, "2");
        let r = block_on(crate::control::handle(
            &p,
            &json!({"op": "scripts.delete", "uuid": a}),
        ));
        assert!(
            format!("{r:?}").contains("\"deleted\": Bool(true)"),
            "{r:?}"
        );
        let session = p.env.dump(Area::Session);
        assert!(!session.contains_key(&tab_objects::key(&a)), "{session:?}");
        assert!(session.contains_key(&tab_objects::key(&b)));
        assert_eq!(all(&p, &tb, 1, false), json!({"1": 2}));
        assert!(p.gm_tab_objects.borrow().objects.all(&a, false) == "{}");
    }
}
