//! `chrome.webRequest.onBeforeRedirect` for the worker's own fetches (`GM_xmlhttpRequest`,
//! `@require`/`@resource` files). They are made with `redirect: "manual"`, which resolves to an
//! opaque redirect without its `Location` and requests nothing where it leads; where that is,
//! Chrome tells this event, for that request, before or after the fetch resolves (about half
//! each, measured in Chromium 156). Listened to only while such a fetch is in flight, so no
//! other request of the browser starts the worker. Passes on what Chrome reported; the core
//! judges it (`gm::xhr::follow`, `gm::assets::follow`). The permission costs every request of
//! the browser a little, listener or not (ARCHITECTURE, Decisions: redirects of
//! `GM_xmlhttpRequest`).
//!
//! The event names a request by Chrome's `requestId`, which `fetch` does not expose. Each
//! watched fetch therefore carries a marker header, [`MARKER`], whose value names its watch;
//! `onBeforeSendHeaders` sees it and ties the `requestId` to the watch, and a session rule
//! (`header_rules::ensure_marker_rule`) removes it before the request leaves the browser (checked
//! in Chromium 156: the listener sees the header, the server does not). So fetches of the same
//! method and URL can be in flight at once, each told its own redirect. Without the rule no
//! marker is sent, and such fetches take turns, as they must when their header rules differ
//! (`Watch::acquire`).

use futures::channel::oneshot;
use js_sys::{Array, Function, Object, Reflect};
use std::cell::{Cell, RefCell};
use wasm_bindgen::prelude::*;

/// The header that names a watched fetch to `onBeforeSendHeaders` (removed by a rule before the
/// request is sent).
pub const MARKER: &str = "x-lumo-fetch";

/// One fetch waiting to hear where its redirect leads.
struct Slot {
    id: u64,
    method: String,
    url: String,
    /// What fetches of the same method and URL it may be in flight with: those whose header rule
    /// is this same one (`None`: none, it goes alone).
    share: Option<String>,
    /// Chrome's id of its request, once `onBeforeSendHeaders` saw the marker.
    request: Option<String>,
    seen: Option<(u16, String)>,
    wake: Option<oneshot::Sender<()>>,
}

/// A fetch waiting for its turn: one that came earlier for the same method and URL keeps later
/// ones from going past it (or a stream of fetches that may share could hold it off for good).
struct Waiter {
    ticket: u64,
    method: String,
    url: String,
}

thread_local! {
    static SLOTS: RefCell<Vec<Slot>> = const { RefCell::new(Vec::new()) };
    static NEXT: Cell<u64> = const { Cell::new(0) };
    static LISTENING: Cell<bool> = const { Cell::new(false) };
    // Whether `onBeforeSendHeaders` is listened to: without it no marker names a request, and
    // fetches of one method and URL take turns.
    static SENDING: Cell<bool> = const { Cell::new(false) };
    // Fetches waiting for an earlier one of the same method and URL to be done with its slot.
    static QUEUED: RefCell<Vec<oneshot::Sender<()>>> = const { RefCell::new(Vec::new()) };
    static WAITING: RefCell<Vec<Waiter>> = const { RefCell::new(Vec::new()) };
    // This worker's part of every marker value: a script's own header of that name (the rule
    // removes it from the wire too) cannot name another fetch's watch.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    static NONCE: String = format!("{:x}", (js_sys::Math::random() * 9_007_199_254_740_991.0) as u64);
    // Made once and never dropped: `removeListener` must be given the function `addListener` was.
    static ON_REDIRECT: Closure<dyn FnMut(JsValue)> = Closure::new(on_redirect);
    static ON_SEND_HEADERS: Closure<dyn FnMut(JsValue)> = Closure::new(on_send_headers);
}

fn get(o: &JsValue, k: &str) -> JsValue {
    Reflect::get(o, &JsValue::from_str(k)).unwrap_or(JsValue::UNDEFINED)
}

fn event(name: &str) -> Option<JsValue> {
    let e = super::api::CHROME.with(|c| get(&get(c, "webRequest"), name));
    e.is_object().then_some(e)
}

/// A URL as the request line carries it: without its fragment.
fn unfragmented(url: &str) -> &str {
    url.split('#').next().unwrap_or(url)
}

/// Whether Chrome's event for a request of `method` to `url` would be taken as `w`'s.
fn names(w: &Slot, method: &str, url: &str) -> bool {
    same_key(&w.method, &w.url, method, url)
}

fn same_key(m1: &str, u1: &str, m2: &str, u2: &str) -> bool {
    m1.eq_ignore_ascii_case(m2) && unfragmented(u1) == unfragmented(u2)
}

/// Whether two fetches would meet each other's header rule: a rule names its method as
/// `declarativeNetRequest` does ([`rule_method`]: WebDAV's `PROPFIND` and `MKCOL` are both
/// "other"), and the URL.
fn meets(m1: &str, u1: &str, m2: &str, u2: &str) -> bool {
    rule_method(m1) == rule_method(m2) && unfragmented(u1) == unfragmented(u2)
}

/// `declarativeNetRequest`'s name for a request method: its own few, else "other" (WebDAV's
/// `PROPFIND`…), which a rule given any other name would refuse whole.
pub fn rule_method(m: &str) -> String {
    let m = m.to_ascii_lowercase();
    match m.as_str() {
        "connect" | "delete" | "get" | "head" | "options" | "patch" | "post" | "put" => m,
        _ => "other".to_owned(),
    }
}

/// Adds (or removes) `f` on `webRequest.<name>` for the worker's own requests.
fn listen_one(name: &str, f: &Function, wanted: bool, extra: Option<&str>) -> bool {
    let Some(e) = event(name) else { return false };
    if wanted {
        let filter = Object::new();
        let urls = Array::of2(&"http://*/*".into(), &"https://*/*".into());
        let _ = Reflect::set(&filter, &"urls".into(), &urls);
        let _ = Reflect::set(
            &filter,
            &"types".into(),
            &Array::of1(&"xmlhttprequest".into()),
        );
        let _ = Reflect::set(&filter, &"tabId".into(), &JsValue::from_f64(-1.0));
        let Ok(add) = get(&e, "addListener").dyn_into::<Function>() else {
            return false;
        };
        match extra {
            Some(x) => add.call3(&e, f, &filter, &Array::of1(&x.into())).is_ok(),
            None => add.call2(&e, f, &filter).is_ok(),
        }
    } else {
        get(&e, "removeListener")
            .dyn_into::<Function>()
            .is_ok_and(|remove| remove.call1(&e, f).is_ok())
    }
}

fn listen(wanted: bool) {
    // The marker's listener is a help, not a need: without it fetches of one method and URL
    // take turns, and a redirect is matched by method and URL.
    if SENDING.with(Cell::get) != wanted {
        let send: Function = ON_SEND_HEADERS.with(|c| c.as_ref().clone().unchecked_into());
        if listen_one("onBeforeSendHeaders", &send, wanted, Some("requestHeaders")) {
            SENDING.with(|l| l.set(wanted));
        }
    }
    if LISTENING.with(Cell::get) != wanted {
        let redirect: Function = ON_REDIRECT.with(|c| c.as_ref().clone().unchecked_into());
        if listen_one("onBeforeRedirect", &redirect, wanted, None) {
            LISTENING.with(|l| l.set(wanted));
        }
    }
}

/// Whether `details` is of this worker's own request (no tab; its origin), as Chrome reports it.
fn own(details: &JsValue) -> bool {
    let own = super::runtime_id().map(|id| format!("chrome-extension://{id}"));
    own.is_some()
        && get(details, "tabId").as_f64() == Some(-1.0)
        && get(details, "initiator").as_string() == own
}

/// The marker value of watch `id`.
fn marker_value(id: u64) -> String {
    NONCE.with(|n| format!("{n}.{id}"))
}

fn on_send_headers(details: JsValue) {
    if !own(&details) {
        return;
    }
    let Some(request) = get(&details, "requestId").as_string() else {
        return;
    };
    let headers = get(&details, "requestHeaders");
    let Ok(headers) = headers.dyn_into::<Array>() else {
        return;
    };
    let value = headers.iter().find_map(|h| {
        let name = get(&h, "name").as_string()?;
        name.eq_ignore_ascii_case(MARKER)
            .then(|| get(&h, "value").as_string())
            .flatten()
    });
    let Some(value) = value else { return };
    SLOTS.with(|s| {
        if let Some(slot) = s
            .borrow_mut()
            .iter_mut()
            .find(|w| w.request.is_none() && marker_value(w.id) == value)
        {
            slot.request = Some(request);
        }
    });
}

fn on_redirect(details: JsValue) {
    if !own(&details) {
        return;
    }
    let text = |k: &str| get(&details, k).as_string();
    let (Some(url), Some(method), Some(to)) = (text("url"), text("method"), text("redirectUrl"))
    else {
        return;
    };
    let request = text("requestId");
    let status = get(&details, "statusCode")
        .as_f64()
        .unwrap_or(0.0)
        .clamp(0.0, 999.0);
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let status = status as u16;
    let wake = SLOTS.with(|s| {
        let mut slots = s.borrow_mut();
        // The fetch whose marker named this request; else, when the marker was not seen, the one
        // fetch of that method and URL still waiting (two such would be a guess: none is told,
        // and each reports that Chrome did not say where it leads).
        let by_id = slots
            .iter()
            .position(|w| w.request.is_some() && w.request == request);
        let index = match by_id {
            Some(i) => Some(i),
            None => {
                let mut unnamed = slots.iter().enumerate().filter(|(_, w)| {
                    w.request.is_none() && w.seen.is_none() && names(w, &method, &url)
                });
                match (unnamed.next(), unnamed.next()) {
                    (Some((i, _)), None) => Some(i),
                    _ => None,
                }
            }
        };
        let slot = slots.get_mut(index?)?;
        if slot.seen.is_some() || !names(slot, &method, &url) {
            return None;
        }
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
    /// A watch for a fetch about to be sent, once it may go: no other fetch of the same method
    /// and URL is watched, or every one is of the same header rule `share` (then each is told
    /// its own redirect by its marker; the rules are alike, so which one Chrome applies to which
    /// request does not matter). `share` is `None` for a fetch that must go alone (its rule
    /// appends, or no marker can be sent: the caller asks `header_rules::ensure_marker_rule`,
    /// and this asks that `onBeforeSendHeaders` is listened to): else two at once could each be
    /// given the other's headers or be told the other's redirect, a server's answer to one
    /// script's request handed to another. An earlier fetch still waiting keeps this one
    /// waiting too. The wait lasts while the earlier fetch is pending (bounded by its timeout,
    /// and by the waiting one's: `fetch_progress` races it), and not while it reads its body.
    /// `None` when `chrome.webRequest` cannot be listened to.
    pub async fn acquire(method: &str, url: &str, share: Option<String>) -> Option<Watch> {
        // Sharing needs the marker's listener, in place before any fetch that shares is sent.
        listen(true);
        let share = share.filter(|_| SENDING.with(Cell::get));
        let ticket = NEXT.with(|n| {
            let t = n.get().wrapping_add(1);
            n.set(t);
            t
        });
        let waiting = Waiting(ticket);
        loop {
            let busy = SLOTS.with(|s| {
                s.borrow().iter().any(|w| {
                    meets(&w.method, &w.url, method, url) && (share.is_none() || w.share != share)
                })
            }) || WAITING.with(|q| {
                q.borrow()
                    .iter()
                    .any(|w| w.ticket < ticket && meets(&w.method, &w.url, method, url))
            });
            if !busy {
                drop(waiting);
                return Watch::new(method, url, share);
            }
            WAITING.with(|q| {
                let mut q = q.borrow_mut();
                if !q.iter().any(|w| w.ticket == ticket) {
                    q.push(Waiter {
                        ticket,
                        method: method.to_owned(),
                        url: url.to_owned(),
                    });
                }
            });
            let (tx, rx) = oneshot::channel();
            QUEUED.with(|q| q.borrow_mut().push(tx));
            // Woken by any watch dropped, or any waiter gone; asks again.
            let _ = rx.await;
        }
    }

    fn new(method: &str, url: &str, share: Option<String>) -> Option<Watch> {
        listen(true);
        if !LISTENING.with(Cell::get) {
            // No watch: nothing will stop the marker's listener if it was added.
            if SLOTS.with(|s| s.borrow().is_empty()) {
                listen(false);
            }
            return None;
        }
        // The listeners may have gone and come back while this waited (the last watch dropped).
        let share = share.filter(|_| SENDING.with(Cell::get));
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
                share,
                request: None,
                seen: None,
                wake: None,
            });
        });
        Some(Watch(id))
    }

    /// The marker header this fetch carries (`MARKER`, and its value), when it may share its
    /// method and URL with others in flight: only then was the rule that removes it in place.
    pub fn marker(&self) -> Option<(&'static str, String)> {
        let shares = SLOTS.with(|s| {
            s.borrow()
                .iter()
                .any(|w| w.id == self.0 && w.share.is_some())
        });
        shares.then(|| (MARKER, marker_value(self.0)))
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
        wake_waiters();
    }
}

fn wake_waiters() {
    for tx in QUEUED.with(|q| std::mem::take(&mut *q.borrow_mut())) {
        let _ = tx.send(());
    }
}

/// A fetch's place in the line; given up (its timeout, the script's `abort()`), it no longer
/// holds the later ones back.
struct Waiting(u64);

impl Drop for Waiting {
    fn drop(&mut self) {
        let was = WAITING.with(|q| {
            let mut q = q.borrow_mut();
            let before = q.len();
            q.retain(|w| w.ticket != self.0);
            q.len() != before
        });
        if was {
            wake_waiters();
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
