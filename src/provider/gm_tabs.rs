//! The provider's side of `GM_openInTab` and `GM_notification` (fields and Chrome's arguments:
//! `gm::tabs`). The worker remembers which script opened which tab and which notification, so a
//! script can close, or hear about, only its own: a `tab.close` naming a tab it did not open is
//! refused, whatever the tab. A page learns that its tab closed, or that its notification was
//! clicked or closed, through a held wait (as with menu commands), answered by the tab and
//! notification events the shell forwards. What was opened is kept in `chrome.storage.session`
//! too ([`OPENED_KEY`]), so a worker that restarted still knows whose tab or notification it is;
//! a tab that closed while no worker listened is dropped when the next one reads the list.

use crate::vec_map::VecMap;

use futures::channel::oneshot;
use serde_json::{json, Value};

use super::Provider;
use crate::env::{Area, Env};
use crate::gm::tabs::{self, Notice, OpenTab, MAX_NOTIFICATIONS, MAX_OPEN_TABS};

/// How long a page's wait for its tab or notification is held before it asks again.
pub const EVENT_WAIT_MS: f64 = 25_000.0;
/// The extension's icon, shown by a notification that brings no image of its own.
pub const ICON: &str = "icon-128.png";
/// `chrome.storage.session`: `{tabs: [[id, uuid]…], notices: [[id, uuid, tag?]…], next}`.
pub const OPENED_KEY: &str = "gmOpened";
/// Most entries read back from [`OPENED_KEY`] (the bounds per script keep it far smaller).
const MAX_REMEMBERED: usize = 1_000;

/// What one opened tab or notification is waiting to tell its page.
#[derive(Default)]
struct Watch {
    uuid: String,
    /// A notification's tag (`gm::tabs::Notice::tag`), stored with it, so a tag replaces a
    /// notification shown before the worker restarted too.
    tag: Option<String>,
    /// Events not yet delivered ("click", "close").
    events: Vec<&'static str>,
    waiter: Option<oneshot::Sender<Value>>,
    /// The document a notification came from (Chrome's `documentId`; not stored: a worker
    /// that restarted leaves an earlier one to the page or the user).
    document: Option<String>,
}

#[derive(Default)]
pub(crate) struct Opened {
    tabs: VecMap<i64, Watch>,
    notices: VecMap<String, Watch>,
    next_notice: u64,
    /// What an earlier worker stored has been read.
    loaded: bool,
    /// Tabs closed while that was being read (each checked with a `tabs.get` first): Chrome
    /// tells a close once, so one seen open before it closed must not be recorded after.
    closed_while_loading: Vec<i64>,
    /// The scripts of the tabs being opened (Chrome has not given their ids yet): each counts
    /// against its script's limit from the moment it is asked for.
    opening: Vec<String>,
}

/// Most closes remembered while the stored tabs are read (a read takes a few round trips).
const MAX_CLOSED_WHILE_LOADING: usize = 256;

/// `[[id, uuid, tag?]…]` as stored; anything else is skipped (a tag longer than a script may
/// give, `tabs::MAX_TAG_CHARS`, too).
fn entries(v: Option<&Value>) -> impl Iterator<Item = (&Value, String, Option<String>)> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .take(MAX_REMEMBERED)
        .filter_map(|p| match p.as_array()?.as_slice() {
            [id, Value::String(uuid)] => Some((id, uuid.clone(), None)),
            [id, Value::String(uuid), Value::String(tag)]
                if tag.chars().count() <= tabs::MAX_TAG_CHARS =>
            {
                Some((id, uuid.clone(), Some(tag.clone())))
            }
            _ => None,
        })
}

impl Opened {
    /// Some tab a script opened is still open.
    pub(super) fn has_tabs(&self) -> bool {
        !self.tabs.is_empty()
    }
}

fn error(message: impl Into<String>) -> Value {
    json!({ "error": message.into() })
}

fn deliver(w: &mut Watch, event: &'static str) {
    match w.waiter.take() {
        Some(tx) if !tx.is_canceled() => {
            let _ = tx.send(json!({ "event": event }));
        }
        _ => w.events.push(event),
    }
}

impl<E: Env> Provider<E> {
    /// Reads once what an earlier worker opened. A tab that is gone is dropped (its close event
    /// reached no listener); a notification's close event starts the worker, so one that is
    /// known is still shown.
    async fn opened_ready(&self) {
        if self.gm_opened.borrow().loaded {
            return;
        }
        let stored = self
            .env
            .get(Area::Session, &[OPENED_KEY])
            .await
            .ok()
            .and_then(|mut m| m.remove(OPENED_KEY));
        let stored = stored.as_ref();
        let mut tabs = Vec::new();
        for (id, uuid, _) in entries(stored.and_then(|v| v.get("tabs"))) {
            if let Some(id) = id.as_i64() {
                if self.env.tab(id).await.is_ok() {
                    tabs.push((id, uuid));
                }
            }
        }
        let notices: Vec<(String, String, Option<String>)> =
            entries(stored.and_then(|v| v.get("notices")))
                .filter_map(|(id, uuid, tag)| Some((id.as_str()?.to_owned(), uuid, tag)))
                .collect();
        let any_tab = !tabs.is_empty();
        {
            let mut o = self.gm_opened.borrow_mut();
            if o.loaded {
                return; // another call read it meanwhile
            }
            o.loaded = true;
            let closed = std::mem::take(&mut o.closed_while_loading);
            for (id, uuid) in tabs {
                if o.tabs.get(&id).is_none() && !closed.contains(&id) {
                    o.tabs.insert(
                        id,
                        Watch {
                            uuid,
                            ..Watch::default()
                        },
                    );
                }
            }
            for (id, uuid, tag) in notices {
                if o.notices.get(&id).is_none() {
                    o.notices.insert(
                        id,
                        Watch {
                            uuid,
                            tag,
                            ..Watch::default()
                        },
                    );
                }
            }
            let next = stored
                .and_then(|v| v.get("next"))
                .and_then(Value::as_u64)
                .unwrap_or(0);
            o.next_notice = o.next_notice.max(next);
        }
        if any_tab {
            // The shell listens to tab events again, to hear these close.
            self.tabs_changed();
        }
    }

    /// Stores what is open now, for the next worker.
    async fn save_opened(&self) {
        let value = {
            let o = self.gm_opened.borrow();
            json!({
                "tabs": o.tabs.iter().map(|(id, w)| json!([id, w.uuid])).collect::<Vec<_>>(),
                "notices": o.notices.iter().map(|(id, w)| match &w.tag {
                    Some(tag) => json!([id, w.uuid, tag]),
                    None => json!([id, w.uuid]),
                }).collect::<Vec<_>>(),
                "next": o.next_notice,
            })
        };
        let mut m = serde_json::Map::new();
        m.insert(OPENED_KEY.to_owned(), value);
        if let Err(e) = self.env.set(Area::Session, m).await {
            self.note(format!(
                "could not record the tabs and notifications scripts opened: {e}"
            ));
        }
    }

    pub(crate) async fn gm_open_tab(&self, uuid: &str, from: &super::Sender, t: &OpenTab) -> Value {
        if let Some(e) = tabs::refuse_url(&t.url) {
            return json!({ "error": e, "refused": true });
        }
        self.opened_ready().await;
        {
            // Counted and reserved in one step: opens asked for together must not all see the
            // count from before any of them.
            let mut o = self.gm_opened.borrow_mut();
            let open = o.tabs.values().filter(|w| w.uuid == uuid).count()
                + o.opening.iter().filter(|u| *u == uuid).count();
            if open >= MAX_OPEN_TABS {
                return error(format!(
                    "GM_openInTab refused: this script already has {open} tabs open, the most it may"
                ));
            }
            o.opening.push(uuid.to_owned());
        }
        let opener = from.tab_id.map(|tab| tabs::Opener {
            tab,
            index: from.tab_index,
            window: from.window_id,
        });
        let created = self.env.create_tab(&tabs::create_props(t, opener)).await;
        {
            let mut o = self.gm_opened.borrow_mut();
            if let Some(i) = o.opening.iter().position(|u| u == uuid) {
                o.opening.swap_remove(i);
            }
        }
        match created {
            Ok(id) => {
                self.gm_opened.borrow_mut().tabs.insert(
                    id,
                    Watch {
                        uuid: uuid.to_owned(),
                        ..Watch::default()
                    },
                );
                self.tabs_changed();
                self.save_opened().await;
                json!({ "tab": id })
            }
            Err(e) => error(format!("GM_openInTab failed: {e}")),
        }
    }

    pub(crate) async fn gm_close_tab(&self, uuid: &str, tab: i64) -> Value {
        self.opened_ready().await;
        if self
            .gm_opened
            .borrow()
            .tabs
            .get(&tab)
            .is_none_or(|w| w.uuid != uuid)
        {
            return error("GM_openInTab: close() works only on a tab this script opened and that is still open");
        }
        match self.env.remove_tab(tab).await {
            Ok(()) => json!({ "ok": true }),
            Err(e) => error(format!("the tab could not be closed: {e}")),
        }
    }

    /// Held until the tab closes (`{event: "close"}`) or [`EVENT_WAIT_MS`] pass (`{}`).
    pub(crate) async fn gm_tab_wait(&self, uuid: &str, tab: i64) -> Value {
        self.opened_ready().await;
        let rx = {
            let mut o = self.gm_opened.borrow_mut();
            let Some(w) = o.tabs.get_mut(&tab).filter(|w| w.uuid == uuid) else {
                // Closed already (forgotten when it closed), or never this script's.
                return json!({ "event": "close" });
            };
            if let Some(e) = w.events.pop() {
                return json!({ "event": e });
            }
            let (tx, rx) = oneshot::channel();
            if let Some(old) = w.waiter.replace(tx) {
                let _ = old.send(json!({ "superseded": true }));
            }
            rx
        };
        self.hold(rx).await
    }

    async fn hold(&self, rx: oneshot::Receiver<Value>) -> Value {
        let timer = self.env.sleep(EVENT_WAIT_MS);
        futures::pin_mut!(timer);
        match futures::future::select(rx, timer).await {
            futures::future::Either::Left((Ok(v), _)) => v,
            _ => json!({}),
        }
    }

    pub(crate) async fn gm_notify(
        &self,
        uuid: &str,
        name: &str,
        n: &Notice,
        from: &crate::provider::Sender,
    ) -> Value {
        self.opened_ready().await;
        self.close_left_notices(uuid).await;
        let (id, replaced) = {
            let mut o = self.gm_opened.borrow_mut();
            // The script's notifications with this tag are replaced: forgotten now (their pages
            // are told "close", and so is a later wait for them) and cleared once this one is
            // made, so they do not count against the bound.
            let replaced: Vec<String> = match &n.tag {
                Some(tag) => o
                    .notices
                    .iter()
                    .filter(|(_, w)| w.uuid == uuid && w.tag.as_ref() == Some(tag))
                    .map(|(id, _)| id.clone())
                    .collect(),
                None => Vec::new(),
            };
            for old in &replaced {
                if let Some(mut w) = o.notices.remove(old) {
                    deliver(&mut w, "close");
                }
            }
            let shown = o
                .notices
                .values()
                .filter(|w| w.uuid == uuid && !w.events.contains(&"close"))
                .count();
            if shown >= MAX_NOTIFICATIONS {
                return error(format!(
                    "GM_notification refused: this script already shows {shown} notifications, the most it may"
                ));
            }
            o.next_notice = o.next_notice.saturating_add(1);
            let id = format!("gm-{}-{}", self.env.now_ms().round(), o.next_notice);
            o.notices.insert(
                id.clone(),
                Watch {
                    uuid: uuid.to_owned(),
                    tag: n.tag.clone(),
                    document: from.document_id.clone(),
                    ..Watch::default()
                },
            );
            (id, replaced)
        };
        let options = tabs::notification_options(n, name, ICON);
        let made = self.env.create_notification(&id, &options).await;
        // Replaced while Chrome was making it (a newer one of its tag came meanwhile): the
        // newer one's clear may have reached Chrome before it was shown, so it is cleared now.
        let superseded = !self.gm_opened.borrow().notices.contains_key(&id);
        for old in replaced.iter().chain(superseded.then_some(&id)) {
            let _ = self.env.clear_notification(old).await;
        }
        match made {
            Ok(()) => {
                self.save_opened().await;
                json!({ "id": id })
            }
            Err(e) => {
                self.gm_opened.borrow_mut().notices.remove(&id);
                error(format!("GM_notification failed: {e}"))
            }
        }
    }

    /// Closes the script's notifications whose page is gone. A page closes its own as it is
    /// left (`pagehide`), but not one whose answer had not reached it yet: such a notification
    /// would stay, its `onclick` and `timeout` dead with the page, and count against the
    /// script's bound. Asked as the script shows another, for the few it has open.
    async fn close_left_notices(&self, uuid: &str) {
        let mine: Vec<(String, String)> = self
            .gm_opened
            .borrow()
            .notices
            .iter()
            .filter(|(_, w)| w.uuid == uuid && !w.events.contains(&"close"))
            .filter_map(|(id, w)| Some((id.clone(), w.document.clone()?)))
            .collect();
        let mut gone = Vec::new();
        for (id, document) in mine {
            if matches!(
                self.env.document(&document).await,
                Ok(crate::env::DocumentState::Gone)
            ) {
                gone.push(id);
            }
        }
        for id in &gone {
            if let Some(mut w) = self.gm_opened.borrow_mut().notices.remove(id) {
                deliver(&mut w, "close");
            }
            let _ = self.env.clear_notification(id).await;
        }
        if !gone.is_empty() {
            self.save_opened().await;
        }
    }

    /// Held until the notification is clicked (`{event: "click"}`), closed (`"close"`), or
    /// [`EVENT_WAIT_MS`] pass.
    pub(crate) async fn gm_notice_wait(&self, uuid: &str, id: &str) -> Value {
        self.opened_ready().await;
        // Ok: the wait; Err: an event already there, and whether it forgot the notification.
        let step = {
            let mut o = self.gm_opened.borrow_mut();
            let Some(w) = o.notices.get_mut(id).filter(|w| w.uuid == uuid) else {
                return json!({ "event": "close" });
            };
            if w.events.is_empty() {
                let (tx, rx) = oneshot::channel();
                if let Some(old) = w.waiter.replace(tx) {
                    let _ = old.send(json!({ "superseded": true }));
                }
                Ok(rx)
            } else {
                let e = w.events.remove(0);
                let closed = e == "close";
                if closed {
                    o.notices.remove(id);
                }
                Err((json!({ "event": e }), closed))
            }
        };
        match step {
            Ok(rx) => self.hold(rx).await,
            Err((event, closed)) => {
                if closed {
                    self.save_opened().await;
                }
                event
            }
        }
    }

    pub(crate) async fn gm_notice_close(&self, uuid: &str, id: &str) -> Value {
        self.opened_ready().await;
        if self
            .gm_opened
            .borrow()
            .notices
            .get(id)
            .is_none_or(|w| w.uuid != uuid)
        {
            return json!({ "ok": true });
        }
        let _ = self.env.clear_notification(id).await;
        json!({ "ok": true })
    }

    /// `tabs.onRemoved`: a tab a script opened tells its page; every tab loses its menus and
    /// its scripts' tab objects (the shell then runs `store_tab_objects`).
    pub fn tab_removed(&self, tab: i64) {
        self.menu_tab_closed(tab);
        self.tab_objects_closed(tab);

        let closed = {
            let mut o = self.gm_opened.borrow_mut();
            if !o.loaded && o.closed_while_loading.len() < MAX_CLOSED_WHILE_LOADING {
                o.closed_while_loading.push(tab);
            }
            o.tabs.remove(&tab)
        };
        if let Some(mut w) = closed {
            deliver(&mut w, "close");
        }
        self.tabs_changed();
    }

    /// `notifications.onClicked` (the notification is then cleared, as Violentmonkey does) and
    /// `onClosed`. Only notifications a script made here are known; others are ignored.
    pub async fn notification_event(&self, id: &str, clicked: bool) {
        self.opened_ready().await;
        let forgotten = {
            let mut o = self.gm_opened.borrow_mut();
            let Some(w) = o.notices.get_mut(id) else {
                return;
            };
            deliver(w, if clicked { "click" } else { "close" });
            // A close, delivered or not, ends the notification: forgotten, so it no longer takes
            // one of the script's slots (a page that went away would never come for it). A wait
            // for a forgotten one is told "close", as this one would have been; only a click not
            // yet taken keeps it, for the next wait (and it no longer counts as shown).
            let forget = !clicked && !w.events.contains(&"click");
            if forget {
                o.notices.remove(id);
            }
            forget
        };
        if forgotten {
            self.save_opened().await;
        }
        if clicked {
            let _ = self.env.clear_notification(id).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::key_store;
    use crate::env::memory::MemoryEnv;
    use crate::provider::gm_test_support::{answered, gm_raw, script, tab_events_told};
    use crate::provider::{Received, Sender};
    use futures::executor::block_on;
    use futures::future::join;

    fn ask(p: &Provider<MemoryEnv>, token: &str, fields: Value) -> Value {
        let raw = gm_raw(token, fields);
        let from = Sender {
            url: Some("https://example.com/".into()),
            tab_id: Some(7),
            tab_index: Some(2),
            window_id: Some(3),
            frame_id: Some(0),
            ..Sender::default()
        };
        answered(block_on(p.user_script_message(|| Some(raw), from)))
    }

    /// A script that opens tabs in a loop sends every request before Chrome has answered
    /// the first: each counts against its 20 from the moment it is asked for.
    #[test]
    fn tabs_asked_for_together_stop_at_the_limit() {
        let p = Provider::new(MemoryEnv::new());
        p.env.tab_create_yields.set(3);
        let a = script(&p, "A", "// @grant GM_openInTab\n");
        let key = block_on(key_store::load(&p.env)).unwrap();
        let token = key.token(&a, 1);
        let from = Sender {
            url: Some("https://example.com/".into()),
            tab_id: Some(7),
            frame_id: Some(0),
            ..Sender::default()
        };
        let asks = (0..MAX_OPEN_TABS + 5).map(|i| {
            let raw = gm_raw(
                &token,
                json!({"op": "tab.open", "url": format!("https://x.test/{i}")}),
            );
            p.user_script_message(move || Some(raw), from.clone())
        });
        let answers: Vec<Value> = block_on(futures::future::join_all(asks))
            .into_iter()
            .map(answered)
            .collect();
        let opened = answers.iter().filter(|r| r["tab"].is_i64()).count();
        let created = p
            .env
            .browser_calls
            .borrow()
            .iter()
            .filter(|c| c.0 == "tabs.create")
            .count();
        assert_eq!(
            (opened, created),
            (MAX_OPEN_TABS, MAX_OPEN_TABS),
            "{answers:?}"
        );
        assert!(answers
            .iter()
            .filter(|r| !r["tab"].is_i64())
            .all(|r| r.to_string().contains("the most it may")));
    }

    #[test]
    fn a_script_opens_and_closes_only_its_own_tabs_and_hears_when_they_close() {
        let p = Provider::new(MemoryEnv::new());
        let told = tab_events_told(&p);
        let a = script(&p, "A", "// @grant GM_openInTab\n");
        let b = script(&p, "B", "// @grant GM.openInTab\n");
        let key = block_on(key_store::load(&p.env)).unwrap();
        let (ta, tb) = (key.token(&a, 1), key.token(&b, 1));
        let r = ask(
            &p,
            &ta,
            json!({"op": "tab.open", "url": "https://x.test/", "active": false}),
        );
        let tab = r["tab"].as_i64().unwrap();
        // The shell is told to hear tab events from now on.
        assert!(p.tab_bound());
        assert_eq!(*told.borrow(), [true]);
        assert_eq!(
            p.env.browser_calls.borrow()[0],
            (
                "tabs.create".into(),
                json!({"url": "https://x.test/", "active": false, "index": 3, "openerTabId": 7, "windowId": 3})
            )
        );
        let r = ask(
            &p,
            &ta,
            json!({"op": "tab.open", "url": "javascript:alert(1)"}),
        );
        assert!(r["error"].as_str().unwrap().contains("only http"), "{r}");
        // B cannot close A's tab, nor any tab it did not open.
        for t in [tab, 7] {
            let r = ask(&p, &tb, json!({"op": "tab.close", "tab": t}));
            assert!(r["error"].is_string(), "{r}");
        }
        assert_eq!(p.env.browser_calls.borrow().len(), 1, "nothing was closed");
        assert_eq!(
            ask(&p, &ta, json!({"op": "tab.close", "tab": tab}))["ok"],
            true
        );
        // The tab closes: A's wait hears it.
        let raw =
            json!({"lumo": ta, "v": 1, "kind": "gm", "op": "tab.wait", "tab": tab}).to_string();
        let wait = p.user_script_message(|| Some(raw), Sender::default());
        let (r, ()) = block_on(join(wait, async { p.tab_removed(tab) }));
        assert_eq!(r, Received::Answered(json!({"event": "close"})));
        // Nothing is bound to a tab any more: the shell may stop listening.
        assert!(!p.tab_bound());
        assert_eq!(told.borrow().last(), Some(&false));
    }

    /// A fresh worker checks each stored tab with `tabs.get`; one that closes after its check
    /// and before the list is kept is not recorded as open (Chrome tells the close only once):
    /// its page hears the close, and it counts no more against the script's bound.
    #[test]
    fn a_tab_closed_while_a_fresh_worker_reads_its_tabs_is_not_kept_open() {
        use crate::env::Tab;
        let p = Provider::new(MemoryEnv::new());
        let a = script(&p, "A", "// @grant GM_openInTab\n");
        let ta = block_on(key_store::load(&p.env)).unwrap().token(&a, 1);
        let open = || {
            ask(&p, &ta, json!({"op": "tab.open", "url": "https://x.test/"}))["tab"]
                .as_i64()
                .unwrap()
        };
        let (first, second) = (open(), open());
        let q = Provider::new(MemoryEnv::new());
        *q.env.areas.borrow_mut() = p.env.areas.borrow().clone();
        for id in [first, second] {
            q.env.tabs.borrow_mut().push(Tab {
                id,
                url: "https://x.test/".into(),
                title: String::new(),
                last_accessed: 0.0,
                incognito: false,
            });
        }
        q.env.tab_get_yields.set(2);
        // A wait no close reaches ends at its timer (no hang when the close is lost).
        q.env.timers_fire.set(true);
        let wait = {
            let raw = gm_raw(&ta, json!({"op": "tab.wait", "tab": first}));
            q.user_script_message(move || Some(raw), Sender::default())
        };
        let close = async {
            // Once `first` has been checked (open), it closes.
            while !q
                .env
                .tab_calls
                .borrow()
                .iter()
                .any(|c| c == &format!("get {first}"))
            {
                crate::env::memory::yield_now().await;
            }
            q.env.tabs.borrow_mut().retain(|t| t.id != first);
            q.tab_removed(first);
        };
        let (r, ()) = block_on(join(wait, close));
        assert_eq!(
            answered(r),
            json!({"event": "close"}),
            "its page hears it closed"
        );
        assert!(
            ask(&q, &ta, json!({"op": "tab.close", "tab": first}))["error"].is_string(),
            "not recorded as the script's open tab"
        );
        assert_eq!(
            ask(&q, &ta, json!({"op": "tab.close", "tab": second}))["ok"],
            true
        );
    }

    #[test]
    fn a_restarted_worker_still_knows_whose_tabs_and_notifications_they_are() {
        use crate::env::Tab;
        let p = Provider::new(MemoryEnv::new());
        let a = script(
            &p,
            "A",
            "// @grant GM_openInTab\n// @grant GM_notification\n",
        );
        let b = script(&p, "B", "// @grant GM_openInTab\n");
        let key = block_on(key_store::load(&p.env)).unwrap();
        let (ta, tb) = (key.token(&a, 1), key.token(&b, 1));
        let open = |p: &Provider<MemoryEnv>| {
            ask(p, &ta, json!({"op": "tab.open", "url": "https://x.test/"}))["tab"]
                .as_i64()
                .unwrap()
        };
        let (kept, gone) = (open(&p), open(&p));
        let notice = ask(&p, &ta, json!({"op": "notify", "text": "hi"}))["id"]
            .as_str()
            .unwrap()
            .to_owned();
        // A new worker over the same storage; `gone` closed while no worker listened.
        let q = Provider::new(MemoryEnv::new());
        *q.env.areas.borrow_mut() = p.env.areas.borrow().clone();
        q.env.tabs.borrow_mut().push(Tab {
            id: kept,
            url: "https://x.test/".into(),
            title: String::new(),
            last_accessed: 0.0,
            incognito: false,
        });
        q.env.timers_fire.set(true);
        let told = tab_events_told(&q);
        // A's wait is held (the tab is open), not answered "close".
        assert_eq!(
            ask(&q, &ta, json!({"op": "tab.wait", "tab": kept})),
            json!({})
        );
        assert!(q.tab_bound(), "the shell listens to tab events again");
        assert_eq!(*told.borrow(), [true]);
        // B still cannot close A's tab; A can, and not the one that went meanwhile.
        assert!(ask(&q, &tb, json!({"op": "tab.close", "tab": kept}))["error"].is_string());
        assert!(ask(&q, &ta, json!({"op": "tab.close", "tab": gone}))["error"].is_string());
        assert_eq!(
            ask(&q, &ta, json!({"op": "tab.close", "tab": kept}))["ok"],
            true
        );
        assert_eq!(
            q.env.browser_calls.borrow().as_slice(),
            [("tabs.remove".to_owned(), json!(kept))]
        );
        // A click on the notification shown before the restart reaches A's page.
        block_on(q.notification_event(&notice, true));
        assert_eq!(
            ask(&q, &ta, json!({"op": "notify.wait", "id": notice}))["event"],
            "click"
        );
        // Its close is stored too: a third worker no longer counts it against A's bound.
        block_on(q.notification_event(&notice, false));
        assert_eq!(
            ask(&q, &ta, json!({"op": "notify.wait", "id": notice}))["event"],
            "close"
        );
        let stored = q.env.areas.borrow()[&crate::env::Area::Session][OPENED_KEY].clone();
        assert_eq!(stored["notices"], json!([]), "{stored}");
    }

    #[test]
    fn notifications_are_bounded_per_script_and_their_click_reaches_their_script() {
        let p = Provider::new(MemoryEnv::new());
        let a = script(&p, "A", "// @grant GM_notification\n");
        let n = script(&p, "N", "// @grant GM_getValue\n");
        let key = block_on(key_store::load(&p.env)).unwrap();
        let ta = key.token(&a, 1);
        let r = ask(
            &p,
            &ta,
            json!({"op": "notify", "text": "hello", "title": "T"}),
        );
        let id = r["id"].as_str().unwrap().to_owned();
        let (what, arg) = p.env.browser_calls.borrow()[0].clone();
        assert_eq!(what, "notifications.create");
        assert_eq!(arg[1]["message"], "hello");
        assert_eq!(arg[1]["contextMessage"], "A");
        block_on(p.notification_event(&id, true));
        assert_eq!(
            ask(&p, &ta, json!({"op": "notify.wait", "id": id}))["event"],
            "click"
        );
        block_on(p.notification_event(&id, false));
        assert_eq!(
            ask(&p, &ta, json!({"op": "notify.wait", "id": id}))["event"],
            "close"
        );
        for _ in 0..MAX_NOTIFICATIONS {
            assert!(ask(&p, &ta, json!({"op": "notify", "text": "x"}))["id"].is_string());
        }
        assert!(ask(&p, &ta, json!({"op": "notify", "text": "x"}))["error"]
            .as_str()
            .unwrap()
            .contains("refused"));
        // Closed (or clicked, then closed) while no page waits — the page went away: each
        // gives its slot back, and a late wait is still told how it ended.
        let shown: Vec<String> = p.gm_opened.borrow().notices.keys().cloned().collect();
        for (i, id) in shown.iter().enumerate() {
            if i % 2 == 0 {
                block_on(p.notification_event(id, true));
            }
            block_on(p.notification_event(id, false));
        }
        for (i, id) in shown.iter().enumerate() {
            let first = ask(&p, &ta, json!({"op": "notify.wait", "id": id}));
            assert_eq!(first["event"], if i % 2 == 0 { "click" } else { "close" });
        }
        for _ in 0..MAX_NOTIFICATIONS {
            assert!(ask(&p, &ta, json!({"op": "notify", "text": "x"}))["id"].is_string());
        }
        assert!(ask(&p, &ta, json!({"op": "notify", "text": "x"}))["error"]
            .as_str()
            .unwrap()
            .contains("refused"));
        let r = ask(&p, &key.token(&n, 1), json!({"op": "notify", "text": "x"}));
        assert!(
            r["error"].as_str().unwrap().contains("does not @grant"),
            "{r}"
        );
    }

    /// A page left before its notification's answer reached it cannot close it: the next
    /// notification of the script closes it, so it neither stays nor holds the bound.
    #[test]
    fn a_notification_whose_page_is_gone_is_closed_when_the_script_shows_another() {
        let p = Provider::new(MemoryEnv::new());
        let a = script(&p, "A", "// @grant GM_notification\n");
        let t = block_on(key_store::load(&p.env)).unwrap().token(&a, 1);
        let from_doc = |doc: &str| Sender {
            url: Some("https://example.com/".into()),
            tab_id: Some(7),
            frame_id: Some(0),
            document_id: Some(doc.into()),
            ..Sender::default()
        };
        let notify = |doc: &str| {
            let raw = gm_raw(&t, json!({"op": "notify", "text": "loaded"}));
            answered(block_on(p.user_script_message(|| Some(raw), from_doc(doc))))
        };
        let mut ids = Vec::new();
        for i in 0..MAX_NOTIFICATIONS {
            let doc = format!("d{i}");
            ids.push(notify(&doc)["id"].as_str().unwrap().to_owned());
            // Reloaded at once: the document is gone, its notification still shown.
            p.env
                .documents
                .borrow_mut()
                .insert(doc, crate::env::DocumentState::Gone);
        }
        let r = notify("live");
        assert!(r["id"].is_string(), "not refused: {r}");
        assert_eq!(p.gm_opened.borrow().notices.len(), 1);
        for id in &ids {
            assert!(p
                .env
                .browser_calls
                .borrow()
                .iter()
                .any(|(w, c)| w == "notifications.clear" && c == &json!(id)));
        }
        // A page still open keeps its own.
        let r = notify("live");
        assert!(r["id"].is_string(), "{r}");
        assert_eq!(p.gm_opened.borrow().notices.len(), 2);
    }

    #[test]
    fn a_tag_replaces_the_scripts_own_notification_of_that_tag_only() {
        let p = Provider::new(MemoryEnv::new());
        let a = script(&p, "A", "// @grant GM_notification\n");
        let b = script(&p, "B", "// @grant GM_notification\n");
        let key = block_on(key_store::load(&p.env)).unwrap();
        let (ta, tb) = (key.token(&a, 1), key.token(&b, 1));
        let notify = |p: &Provider<MemoryEnv>, t: &str, tag: &str| {
            ask(p, t, json!({"op": "notify", "text": "x", "tag": tag}))["id"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        // The notifications `p` knows as shown are exactly `ids`.
        let shows = |p: &Provider<MemoryEnv>, ids: [&String; 3]| {
            let shown: Vec<String> = p.gm_opened.borrow().notices.keys().cloned().collect();
            assert_eq!(shown.len(), ids.len(), "{shown:?}");
            for id in ids {
                assert!(shown.contains(id), "{id} in {shown:?}");
            }
        };
        let first = notify(&p, &ta, "progress");
        let theirs = notify(&p, &tb, "progress");
        let untagged = notify(&p, &ta, "");
        // Far more than the bound, all with one tag: each replaces the one before.
        let mut last = first.clone();
        for _ in 0..3 * MAX_NOTIFICATIONS {
            let next = notify(&p, &ta, "progress");
            assert_ne!(next, last);
            assert!(p
                .env
                .browser_calls
                .borrow()
                .iter()
                .any(|(w, id)| w == "notifications.clear" && id == &json!(last)));
            last = next;
        }
        // The replaced one's page is told it closed; the others are still shown.
        assert_eq!(
            ask(&p, &ta, json!({"op": "notify.wait", "id": first}))["event"],
            "close"
        );
        shows(&p, [&theirs, &untagged, &last]);
        // A worker that restarted still replaces the tagged one shown before, and only it (a
        // progress script keeps one notification, not one per worker).
        let q = Provider::new(MemoryEnv::new());
        *q.env.areas.borrow_mut() = p.env.areas.borrow().clone();
        let after = notify(&q, &ta, "progress");
        let cleared: Vec<Value> = q
            .env
            .browser_calls
            .borrow()
            .iter()
            .filter(|(w, _)| w == "notifications.clear")
            .map(|(_, id)| id.clone())
            .collect();
        assert_eq!(cleared, [json!(last)]);
        assert_eq!(
            ask(&q, &ta, json!({"op": "notify.wait", "id": last}))["event"],
            "close"
        );
        shows(&q, [&theirs, &untagged, &after]);
    }

    /// A stored tag is read only as a script could have given it.
    #[test]
    fn stored_entries_keep_a_tag_within_its_bound() {
        let long = "t".repeat(tabs::MAX_TAG_CHARS + 1);
        let v = json!([
            ["a", "u"],
            ["b", "u", "tag"],
            ["c", "u", long],
            ["d", "u", 1],
            ["e"]
        ]);
        let got: Vec<_> = entries(Some(&v))
            .map(|(id, _, tag)| (id.clone(), tag))
            .collect();
        assert_eq!(
            got,
            [(json!("a"), None), (json!("b"), Some("tag".to_owned()))]
        );
    }
}
