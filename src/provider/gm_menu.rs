//! The provider's side of `GM_registerMenuCommand` (model: `gm::menu`). A page's script sends
//! its whole list of commands with a wait; the wait is held until the user clicks one of them
//! in the popup (answered `{click: id}`), the page states a new list (`{superseded: true}`),
//! the tab closes (`{gone: true}`), or [`MENU_WAIT_MS`] pass (`{}`; the page asks again with
//! its list, which also restores it after a worker restart).
//!
//! What the popup offers is what Chrome says is shown: before it lists or clicks an entry, the
//! provider asks where the entry's document is (`Env::document`). A page navigated away, an
//! iframe removed, or a page in the back/forward cache is not offered, and a click on it is
//! refused; a gone one's entry is dropped. A page restored from the cache keeps its document
//! and states its list again (`pageshow`), so its commands come back.
//!
//! Who is who: the script is the uuid its token proved; the tab, frame and document are what
//! Chrome said about the sender. A click from the popup names an entry handle and a command id
//! the worker handed out, so it reaches exactly that script in that page — never another.
//! A click is not audited: the audit log records what callers (agents) did through the
//! provider; a menu click is the user's own action, running code of a script they installed,
//! in their own page, and it changes nothing the provider owns.

use crate::vec_map::VecMap;

use futures::channel::oneshot;
use serde_json::{json, Value};

use super::Provider;
use crate::env::{DocumentState, Env};
use crate::gm::menu::{Command, Entry, Place, SetOutcome};

/// The grants that give a script menu commands.
pub const MENU_GRANTS: &[&str] = &["GM_registerMenuCommand", "GM_unregisterMenuCommand"];
/// How long a page's wait for a click is held.
pub const MENU_WAIT_MS: f64 = 25_000.0;

/// Each page's held wait, by entry handle.
pub(crate) type MenuWaiters = VecMap<u64, oneshot::Sender<Value>>;

impl<E: Env> Provider<E> {
    /// One page's list of commands for script `uuid`, and its wait for a click.
    pub(crate) async fn gm_menu(
        &self,
        uuid: &str,
        from: &super::Sender,
        commands: Vec<Command>,
    ) -> Value {
        let (Some(tab), Some(frame)) = (from.tab_id, from.frame_id) else {
            return json!({ "error": "GM_registerMenuCommand: only a script in a tab's page can have menu commands" });
        };
        let place = Place {
            tab,
            frame,
            document: from.document_id.clone(),
        };
        let url = from.url.clone().unwrap_or_default();
        let outcome = self.gm_menus.borrow_mut().set(uuid, place, &url, commands);
        self.tabs_changed();
        let handle = match outcome {
            SetOutcome::Removed { handle, click } => {
                if let Some(old) = handle.and_then(|h| self.menu_waiters.borrow_mut().remove(&h)) {
                    let _ = old.send(json!({ "superseded": true }));
                }
                return json!({ "click": click });
            }
            SetOutcome::Kept {
                handle: Some(h),
                click,
            } => {
                if let Some(old) = self.menu_waiters.borrow_mut().remove(&h) {
                    let _ = old.send(json!({ "superseded": true }));
                }
                if let Some(id) = click {
                    return json!({ "click": id });
                }
                h
            }
            SetOutcome::Kept { handle: None, .. } => return json!({}),
        };
        let (tx, rx) = oneshot::channel();
        {
            let mut w = self.menu_waiters.borrow_mut();
            // Waits whose page stopped listening (timed out) need no answer.
            w.retain(|_, s| !s.is_canceled());
            w.insert(handle, tx);
        }
        let timer = self.env.sleep(MENU_WAIT_MS);
        futures::pin_mut!(timer);
        match futures::future::select(rx, timer).await {
            futures::future::Either::Left((Ok(v), _)) => v,
            futures::future::Either::Left((Err(_), _)) => json!({}),
            futures::future::Either::Right(_) => {
                // A live page asks again at once; a gone one (navigated away, its iframe
                // removed) never does, so its entry is checked now, not when the popup next
                // lists: until then it would keep the tab listener on.
                let entry = self.gm_menus.borrow().entry(handle).cloned();
                if let Some(e) = entry.filter(|e| e.place.document == from.document_id) {
                    self.menu_page_shown(&e).await;
                }
                json!({})
            }
        }
    }

    /// The popup's list for one tab: each script's commands there, with the script's name.
    pub async fn menu_list(&self, tab: i64) -> Value {
        let names: VecMap<String, String> = match self.scripts().await {
            Ok(s) => s
                .records
                .iter()
                .filter(|r| r.enabled)
                .map(|r| (r.uuid.clone(), r.metadata.name.clone()))
                .collect(),
            Err(_) => VecMap::new(),
        };
        // A script deleted or turned off since its page registered: its commands are not
        // offered (its page may still hold a wait, but nothing of it runs from here).
        let listed: Vec<Entry> = self
            .gm_menus
            .borrow()
            .for_tab(tab)
            .into_iter()
            .filter(|e| names.get(&e.uuid).is_some())
            .cloned()
            .collect();
        let mut shown = Vec::with_capacity(listed.len());
        for e in listed {
            if self.menu_page_shown(&e).await {
                shown.push(e);
            }
        }
        let items: Vec<Value> = shown
            .iter()
            .filter_map(|e| {
                let name = names.get(&e.uuid)?;
                Some(json!({
                    "entry": e.handle,
                    "uuid": e.uuid,
                    "name": name,
                    "frameId": e.place.frame,
                    "url": e.url,
                    "commands": e.commands.iter().map(|c| json!({
                        // A caption is the script's text: invisible and direction
                        // characters marked, so it cannot read as another command.
                        "id": c.id, "caption": crate::guard::diff::visible(&c.caption),
                        "accessKey": c.access_key,
                    })).collect::<Vec<_>>(),
                }))
            })
            .collect();
        json!({ "ok": true, "tab": tab, "items": items })
    }

    /// The user clicked command `id` of `entry` in the popup: the page's held wait is answered
    /// with it (or, between two waits, the click is kept for the next).
    pub async fn menu_click(&self, entry: u64, id: &str) -> Result<bool, String> {
        let gone = || "that menu command is gone (its page navigated, closed or changed its menu)";
        let found = self.gm_menus.borrow().entry(entry).cloned();
        if let Some(e) = found {
            let on = self
                .scripts()
                .await
                .is_ok_and(|s| s.records.iter().any(|r| r.uuid == e.uuid && r.enabled));
            if !on {
                return Err(
                    "that script is turned off or deleted: its menu commands no longer run".into(),
                );
            }
            if !self.menu_page_shown(&e).await {
                return Err(gone().to_owned());
            }
        }
        let clicked = match self.gm_menus.borrow_mut().click(entry, id, true) {
            Ok(e) => (e.uuid.clone(), e.place.document.clone()),
            Err(_) => return Err(gone().to_owned()),
        };
        // The command may copy: its page's write, which Chrome refuses, goes to the popup.
        self.note_click(entry, &clicked.0, clicked.1.as_deref());
        let waiter = self.menu_waiters.borrow_mut().remove(&entry);
        let delivered = waiter.is_some_and(|w| w.send(json!({ "click": id })).is_ok());
        if !delivered {
            let _ = self.gm_menus.borrow_mut().click(entry, id, false);
        }
        Ok(delivered)
    }

    /// Whether the entry's page is the one shown in its frame now (Chrome's answer). A gone
    /// one's entry is dropped and its held wait answered `{}`: were Chrome wrong, a live page
    /// would ask again at once and be listed again.
    async fn menu_page_shown(&self, e: &Entry) -> bool {
        // Chrome names every frame's document; an entry without one cannot be checked.
        let Some(doc) = e.place.document.as_deref() else {
            return false;
        };
        match self.env.document(doc).await {
            Ok(DocumentState::Active) => true,
            Ok(DocumentState::Inactive) | Err(_) => false,
            Ok(DocumentState::Gone) => {
                let dropped = self
                    .gm_menus
                    .borrow_mut()
                    .drop_gone(e.handle, Some(doc))
                    .is_some();
                if dropped {
                    if let Some(w) = self.menu_waiters.borrow_mut().remove(&e.handle) {
                        let _ = w.send(json!({}));
                    }
                    self.tabs_changed();
                }
                false
            }
        }
    }

    /// The URLs of the pages with menu commands in `tab` (the test build's trap and the tests
    /// read them).
    #[cfg(any(test, feature = "test-trap"))]
    pub fn menu_urls_of(&self, tab: i64) -> Vec<String> {
        let menus = self.gm_menus.borrow();
        menus.for_tab(tab).iter().map(|e| e.url.clone()).collect()
    }

    /// The tab closed: its commands go.
    pub fn menu_tab_closed(&self, tab: i64) {
        let gone = self.gm_menus.borrow_mut().drop_tab(tab);
        {
            let mut w = self.menu_waiters.borrow_mut();
            for e in gone {
                if let Some(s) = w.remove(&e.handle) {
                    let _ = s.send(json!({ "gone": true }));
                }
            }
        }
        self.tabs_changed();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::key_store;
    use crate::env::memory::MemoryEnv;
    use crate::provider::gm_test_support::{answered, script, tab_events_told};
    use crate::provider::Sender;
    use futures::executor::block_on;
    use futures::future::{join, select, Either};

    fn raw(token: &str, commands: Value) -> String {
        json!({"lumo": token, "v": 1, "kind": "gm", "op": "menu", "commands": commands}).to_string()
    }

    fn page(tab: i64, doc: &str) -> Sender {
        Sender {
            url: Some("https://example.com/".into()),
            frame_id: Some(0),
            tab_id: Some(tab),
            document_id: Some(doc.into()),
            ..Sender::default()
        }
    }

    #[test]
    fn a_click_reaches_the_registering_page_only_and_another_script_cannot_touch_it() {
        let p = Provider::new(MemoryEnv::new());
        let a = script(&p, "A", "// @grant GM_registerMenuCommand\n");
        let b = script(&p, "B", "// @grant GM_registerMenuCommand\n");
        let n = script(&p, "N", "// @grant GM_getValue\n");
        let key = block_on(key_store::load(&p.env)).unwrap();
        let (ta, tb) = (key.token(&a, 1), key.token(&b, 1));
        // B states an empty list from the same page: A's entry stays.
        let wait_a = p.user_script_message(
            || {
                Some(raw(
                    &ta,
                    json!([["go", "Go!", "g"], ["rtl", "Safe\u{202e}txt.exe", null]]),
                ))
            },
            page(5, "d1"),
        );
        let other = async {
            let r = answered(
                p.user_script_message(|| Some(raw(&tb, json!([]))), page(5, "d1"))
                    .await,
            );
            assert_eq!(r, json!({"click": null}));
            let list = p.menu_list(5).await;
            assert_eq!(list["items"].as_array().unwrap().len(), 1, "{list}");
            assert_eq!(list["items"][0]["name"], "A");
            assert_eq!(list["items"][0]["commands"][0]["caption"], "Go!");
            // A direction override cannot reverse the popup's button: it is marked.
            let rtl = list["items"][0]["commands"][1]["caption"].as_str().unwrap();
            assert!(!rtl.contains('\u{202e}') && rtl.contains("U+202E"), "{rtl}");
            assert_eq!(p.menu_list(6).await["items"], json!([]));
            let entry = list["items"][0]["entry"].as_u64().unwrap();
            // A click naming a command the entry does not have is refused.
            assert!(p.menu_click(entry, "nope").await.is_err());
            assert_eq!(p.menu_click(entry, "go").await, Ok(true));
        };
        let (r, ()) = block_on(join(wait_a, other));
        assert_eq!(answered(r), json!({"click": "go"}));
        // A script without the grant is refused, and nothing is listed for it.
        let r = answered(block_on(p.user_script_message(
            || Some(raw(&key.token(&n, 1), json!([["x", "X", null]]))),
            page(5, "d1"),
        )));
        assert!(
            r["error"].as_str().unwrap().contains("does not @grant"),
            "{r}"
        );
    }

    /// A page can make its address megabytes long (`history.replaceState`) and register from
    /// 64 frames: each entry keeps the URL, so it is bounded when Chrome's sender comes in.
    #[test]
    fn a_page_with_a_huge_address_leaves_a_bounded_url_in_its_menu_entry() {
        let p = Provider::new(MemoryEnv::new());
        let a = script(&p, "A", "// @grant GM_registerMenuCommand\n");
        let ta = block_on(key_store::load(&p.env)).unwrap().token(&a, 1);
        let mut from = page(5, "d1");
        from.url = Some(format!("https://example.com/#{}", "x".repeat(2 << 20)));
        let wait = p.user_script_message(|| Some(raw(&ta, json!([["go", "Go!", "g"]]))), from);
        let other = async {
            let urls = p.menu_urls_of(5);
            assert_eq!(urls.len(), 1);
            assert!(urls[0].starts_with("https://example.com/#xxx"));
            assert!(
                urls[0].len() <= 4 * crate::provider::runs::MAX_SENDER_URL,
                "{} bytes kept",
                urls[0].len()
            );
            let entry = p.menu_list(5).await["items"][0]["entry"].as_u64().unwrap();
            assert_eq!(p.menu_click(entry, "go").await, Ok(true));
        };
        let (r, ()) = block_on(join(wait, other));
        assert_eq!(answered(r), json!({"click": "go"}));
    }

    /// A page keeps running a script the user turned off, and may still hold a wait: its
    /// commands leave the popup, and a click on one (a popup opened before) runs nothing.
    #[test]
    fn a_script_turned_off_offers_no_menu_command_and_a_click_runs_none() {
        let p = Provider::new(MemoryEnv::new());
        let a = script(&p, "A", "// @grant GM_registerMenuCommand\n");
        let ta = block_on(key_store::load(&p.env)).unwrap().token(&a, 1);
        let wait = p.user_script_message(
            || Some(raw(&ta, json!([["go", "Go!", null]]))),
            page(5, "d1"),
        );
        let user = async {
            let list = p.menu_list(5).await;
            let entry = list["items"][0]["entry"].as_u64().unwrap();
            let off = crate::control::handle(
                &p,
                &json!({"op": "scripts.setEnabled", "uuid": a, "enabled": false}),
            )
            .await
            .value;
            assert_eq!(off["ok"], true, "{off}");
            assert_eq!(p.menu_list(5).await["items"], json!([]));
            let r = p.menu_click(entry, "go").await;
            assert!(r.as_ref().is_err_and(|e| e.contains("turned off")), "{r:?}");
            // The wait ends as a wait does, with no click in it.
            p.menu_tab_closed(5);
        };
        let (r, ()) = block_on(join(wait, user));
        assert_eq!(answered(r), json!({"gone": true}));
    }

    #[test]
    fn tab_events_are_wanted_only_while_a_page_has_menu_commands() {
        let p = Provider::new(MemoryEnv::new());
        let told = tab_events_told(&p);
        assert!(
            !p.tab_bound(),
            "a fresh worker holds nothing bound to a tab"
        );
        let a = script(&p, "A", "// @grant GM_registerMenuCommand\n");
        let ta = block_on(key_store::load(&p.env)).unwrap().token(&a, 1);
        let wait =
            p.user_script_message(|| Some(raw(&ta, json!([["x", "X", null]]))), page(5, "d1"));
        let nav = async {
            assert!(p.tab_bound());
            assert_eq!(
                told.borrow().last(),
                Some(&true),
                "told once the page has commands"
            );
            p.menu_tab_closed(5);
        };
        let (r, ()) = block_on(join(wait, nav));
        assert_eq!(answered(r), json!({"gone": true}));
        assert!(!p.tab_bound());
        assert_eq!(
            told.borrow().last(),
            Some(&false),
            "told when the last commands went"
        );
    }

    /// Whether a page is shown is Chrome's answer at the time, not a guess from tab events: a
    /// page in the back/forward cache (or prerendering) is not offered and a click on it runs
    /// nothing; a gone page's entry goes; the cached page, restored, offers its commands again.
    #[test]
    fn only_a_page_chrome_says_is_shown_offers_its_commands() {
        let p = Provider::new(MemoryEnv::new());
        let a = script(&p, "A", "// @grant GM.registerMenuCommand\n");
        let ta = block_on(key_store::load(&p.env)).unwrap().token(&a, 1);
        let set_doc = |state: Option<DocumentState>| {
            let mut d = p.env.documents.borrow_mut();
            match state {
                Some(s) => d.insert("d1".into(), s),
                None => d.remove("d1"),
            };
        };
        let wait =
            p.user_script_message(|| Some(raw(&ta, json!([["x", "X", null]]))), page(5, "d1"));
        let user = async {
            let list = p.menu_list(5).await;
            assert_eq!(list["items"].as_array().unwrap().len(), 1, "{list}");
            let entry = list["items"][0]["entry"].as_u64().unwrap();
            set_doc(Some(DocumentState::Inactive));
            assert_eq!(p.menu_list(5).await["items"], json!([]));
            let r = p.menu_click(entry, "x").await;
            assert!(r.as_ref().is_err_and(|e| e.contains("gone")), "{r:?}");
            assert!(p.tab_bound(), "a page not shown keeps its entry");
            set_doc(Some(DocumentState::Gone));
            assert_eq!(p.menu_list(5).await["items"], json!([]));
            assert!(!p.tab_bound(), "a gone page's entry goes");
        };
        let (r, ()) = block_on(join(wait, user));
        // Not "gone": were Chrome wrong, a live page asks again at once.
        assert_eq!(answered(r), json!({}));
        set_doc(None);
        let again =
            p.user_script_message(|| Some(raw(&ta, json!([["x", "X", null]]))), page(5, "d1"));
        let user = async {
            let list = p.menu_list(5).await;
            assert_eq!(list["items"].as_array().unwrap().len(), 1, "{list}");
            let entry = list["items"][0]["entry"].as_u64().unwrap();
            assert_eq!(p.menu_click(entry, "x").await, Ok(true));
        };
        let (r, ()) = block_on(join(again, user));
        assert_eq!(answered(r), json!({"click": "x"}));
    }

    /// A page gone without a word (navigated away, its iframe removed) never asks again: when
    /// its wait ends, its entry goes and the tab listener with it. A live page's stays.
    #[test]
    fn a_wait_that_ends_unanswered_drops_a_gone_pages_entry_only() {
        let p = Provider::new(MemoryEnv::new());
        let told = tab_events_told(&p);
        let a = script(&p, "A", "// @grant GM_registerMenuCommand\n");
        let ta = block_on(key_store::load(&p.env)).unwrap().token(&a, 1);
        p.env.timers_fire.set(true);
        let ask = |doc: &str| {
            answered(block_on(p.user_script_message(
                || Some(raw(&ta, json!([["x", "X", null]]))),
                page(5, doc),
            )))
        };
        assert_eq!(ask("d1"), json!({}));
        assert!(p.tab_bound(), "a live page's entry stays");
        assert_eq!(
            block_on(p.menu_list(5))["items"].as_array().unwrap().len(),
            1
        );
        p.env
            .documents
            .borrow_mut()
            .insert("d1".into(), DocumentState::Gone);
        assert_eq!(ask("d1"), json!({}));
        assert!(!p.tab_bound(), "the gone page's entry went");
        assert_eq!(
            told.borrow().last(),
            Some(&false),
            "and the listener with it"
        );
    }

    #[test]
    fn a_new_list_supersedes_the_held_wait() {
        let p = Provider::new(MemoryEnv::new());
        let a = script(&p, "A", "// @grant GM_registerMenuCommand\n");
        let ta = block_on(key_store::load(&p.env)).unwrap().token(&a, 1);
        let first =
            p.user_script_message(|| Some(raw(&ta, json!([["x", "X", null]]))), page(5, "d1"));
        let second = async {
            let w =
                p.user_script_message(|| Some(raw(&ta, json!([["y", "Y", null]]))), page(5, "d1"));
            // Only poll it until the first is answered.
            futures::pin_mut!(w);
            match select(w, futures::future::ready(())).await {
                Either::Left(_) => panic!("the second wait was answered at once"),
                Either::Right(_) => {}
            }
        };
        let (r, ()) = block_on(join(first, second));
        assert_eq!(answered(r), json!({"superseded": true}));
        let l = block_on(p.menu_list(5));
        assert_eq!(l["items"][0]["commands"][0]["id"], "y");
    }
}
