//! `chrome.webRequest.onBeforeRedirect` for the worker's own fetches (`GM_xmlhttpRequest`,
//! `@require`/`@resource` files). They are made with `redirect: "manual"`, which resolves to an
//! opaque redirect without its `Location` and requests nothing where it leads; where that is,
//! Chrome tells this event, for that request, before or after the fetch resolves (about half
//! each, measured in Chromium 156). Listened to only while such a fetch is in flight, so no
//! other request of the browser starts the worker. Passes on what Chrome reported; the core
//! judges it (`gm::xhr::follow`, `gm::assets::follow`). The permission costs every request of
//! the browser a little, listener or not (ARCHITECTURE, Decisions: redirects of
//! `GM_xmlhttpRequest`).

use futures::channel::oneshot;
use js_sys::{Array, Function, Object, Reflect};
use std::cell::{Cell, RefCell};
use wasm_bindgen::prelude::*;

/// One fetch waiting to hear where its redirect leads.
struct Slot {
    id: u64,
    method: String,
    url: String,
    seen: Option<(u16, String)>,
    wake: Option<oneshot::Sender<()>>,
}

thread_local! {
    static SLOTS: RefCell<Vec<Slot>> = const { RefCell::new(Vec::new()) };
    static NEXT: Cell<u64> = const { Cell::new(0) };
    static LISTENING: Cell<bool> = const { Cell::new(false) };
    // Fetches waiting for an earlier one of the same method and URL to be done with its slot.
    static QUEUED: RefCell<Vec<oneshot::Sender<()>>> = const { RefCell::new(Vec::new()) };
    // Made once and never dropped: `removeListener` must be given the function `addListener` was.
    static ON_REDIRECT: Closure<dyn FnMut(JsValue)> = Closure::new(on_redirect);
}

fn get(o: &JsValue, k: &str) -> JsValue {
    Reflect::get(o, &JsValue::from_str(k)).unwrap_or(JsValue::UNDEFINED)
}

fn event() -> Option<JsValue> {
    let e = super::api::CHROME.with(|c| get(&get(c, "webRequest"), "onBeforeRedirect"));
    e.is_object().then_some(e)
}

/// A URL as the request line carries it: without its fragment.
fn unfragmented(url: &str) -> &str {
    url.split('#').next().unwrap_or(url)
}

/// Whether Chrome's event for a request of `method` to `url` would be taken as `w`'s.
fn names(w: &Slot, method: &str, url: &str) -> bool {
    w.method.eq_ignore_ascii_case(method) && unfragmented(&w.url) == unfragmented(url)
}

fn listen(wanted: bool) {
    if LISTENING.with(Cell::get) == wanted {
        return;
    }
    let Some(e) = event() else { return };
    let f: Function = ON_REDIRECT.with(|c| c.as_ref().clone().unchecked_into());
    let done = if wanted {
        let filter = Object::new();
        let urls = Array::of2(&"http://*/*".into(), &"https://*/*".into());
        let _ = Reflect::set(&filter, &"urls".into(), &urls);
        let _ = Reflect::set(
            &filter,
            &"types".into(),
            &Array::of1(&"xmlhttprequest".into()),
        );
        let _ = Reflect::set(&filter, &"tabId".into(), &JsValue::from_f64(-1.0));
        get(&e, "addListener")
            .dyn_into::<Function>()
            .is_ok_and(|add| add.call2(&e, &f, &filter).is_ok())
    } else {
        get(&e, "removeListener")
            .dyn_into::<Function>()
            .is_ok_and(|remove| remove.call1(&e, &f).is_ok())
    };
    if done {
        LISTENING.with(|l| l.set(wanted));
    }
}

fn on_redirect(details: JsValue) {
    // Only this worker's own requests (no tab; its origin), as Chrome reports them.
    let own = super::runtime_id().map(|id| format!("chrome-extension://{id}"));
    let text = |k: &str| get(&details, k).as_string();
    if get(&details, "tabId").as_f64() != Some(-1.0) || text("initiator") != own || own.is_none() {
        return;
    }
    let (Some(url), Some(method), Some(to)) = (text("url"), text("method"), text("redirectUrl"))
    else {
        return;
    };
    let status = get(&details, "statusCode")
        .as_f64()
        .unwrap_or(0.0)
        .clamp(0.0, 999.0);
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let status = status as u16;
    let wake = SLOTS.with(|s| {
        let mut slots = s.borrow_mut();
        let slot = slots
            .iter_mut()
            .find(|w| w.seen.is_none() && names(w, &method, &url))?;
        slot.seen = Some((status, to));
        slot.wake.take()
    });
    if let Some(tx) = wake {
        let _ = tx.send(());
    }
}

/// Where the redirect of one manual fetch leads. Made before the fetch is sent (the event may
/// come first); dropping it forgets the fetch, and the last one stops the listening.
pub struct Watch(u64);

impl Watch {
    /// A watch for a fetch about to be sent, once no other fetch of the same method and URL is
    /// watched: the event names a request by those alone (`fetch` does not expose the request
    /// id), so two at once could each be told the other's redirect: a server's answer to one
    /// script's request handed to another. The wait lasts while the earlier fetch is pending
    /// (bounded by its timeout, and by the waiting one's: `fetch_progress` races it), and not
    /// while it reads its body. `None` when `chrome.webRequest` cannot be listened to.
    pub async fn acquire(method: &str, url: &str) -> Option<Watch> {
        loop {
            let busy = SLOTS.with(|s| s.borrow().iter().any(|w| names(w, method, url)));
            if !busy {
                return Watch::new(method, url);
            }
            let (tx, rx) = oneshot::channel();
            QUEUED.with(|q| q.borrow_mut().push(tx));
            // Woken by any watch dropped; asks again.
            let _ = rx.await;
        }
    }

    fn new(method: &str, url: &str) -> Option<Watch> {
        listen(true);
        if !LISTENING.with(Cell::get) {
            return None;
        }
        let id = NEXT.with(|n| {
            let id = n.get().wrapping_add(1);
            n.set(id);
            id
        });
        SLOTS.with(|s| {
            s.borrow_mut().push(Slot {
                id,
                method: method.to_owned(),
                url: url.to_owned(),
                seen: None,
                wake: None,
            });
        });
        Some(Watch(id))
    }

    fn seen(&self) -> Option<(u16, String)> {
        SLOTS.with(|s| s.borrow().iter().find(|w| w.id == self.0)?.seen.clone())
    }

    /// The redirect's status and target, once Chrome has told; `None` after `wait_ms` without.
    pub async fn target(&self, wait_ms: f64) -> Option<(u16, String)> {
        if let Some(seen) = self.seen() {
            return Some(seen);
        }
        let (tx, rx) = oneshot::channel();
        SLOTS.with(|s| {
            if let Some(w) = s.borrow_mut().iter_mut().find(|w| w.id == self.0) {
                w.wake = Some(tx);
            }
        });
        // A timer cleared when dropped, as `env::timeout` (not used here: `env` uses this).
        let timer = gloo_timers::future::TimeoutFuture::new(crate::env::timer_ms(wait_ms));
        futures::pin_mut!(timer);
        let _ = futures::future::select(rx, timer).await;
        self.seen()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let empty = SLOTS.with(|s| {
            let mut slots = s.borrow_mut();
            slots.retain(|w| w.id != self.0);
            slots.is_empty()
        });
        if empty {
            listen(false);
        }
        for tx in QUEUED.with(|q| std::mem::take(&mut *q.borrow_mut())) {
            let _ = tx.send(());
        }
    }
}

/// A worker that stopped while it listened left Chrome's registration behind: adding and removing
/// the listener drops it (as `tab_events::clear_stale`).
pub fn clear_stale() {
    if !LISTENING.with(Cell::get) {
        listen(true);
        listen(false);
    }
}
