//! The provider's side of the GM functions: a request the channel accepted (its script proven by
//! its token, never by what it says) is checked against that script's own `@grant`s and
//! answered. Values are the script's own (`values/<uuid>` of the proven uuid): no request can
//! name another script. Nothing here calls tools, the policy, the probe or a session.

use serde_json::{json, Value};

use super::Provider;
use crate::env::Env;
use crate::gm::api::{self, Grant};
use crate::gm::message::GmRequest;
use crate::scripts::record::ScriptRecord;

/// How long a `values.wait` is held before it is answered with no change (the page asks again).
pub const WAIT_MS: f64 = 25_000.0;
/// Most pages waiting per script; the oldest is answered first when more come.
pub const MAX_WAITERS: usize = 64;

/// One waiting page (Chrome's tab, frame and document), and where its answer goes.
pub(crate) type Waiter = (
    crate::gm::change_log::Page,
    // Shared: one change wakes up to `MAX_WAITERS` pages, each copies it only when its answer
    // is sent (up to 512 KiB each; 64 copies at once would be 32 MiB of wasm memory for good).
    futures::channel::oneshot::Sender<std::rc::Rc<Value>>,
);

/// The page a GM request came from, as the values' change log tells pages apart.
fn page_of(from: &crate::provider::Sender) -> crate::gm::change_log::Page {
    crate::gm::change_log::Page {
        tab: from.tab_id,
        frame: from.frame_id,
        document: from.document_id.clone(),
    }
}
pub(crate) type Waiters = crate::vec_map::VecMap<String, Vec<Waiter>>;

/// The first request a `GM_xmlhttpRequest` makes, to `url` (decided by `xhr::decide`).
fn http_request(
    x: &crate::gm::message::XhrRequest,
    url: String,
    from: &crate::provider::Sender,
) -> crate::env::HttpRequest {
    let mut headers = x.headers.clone();
    // A Blob's, FormData's or URLSearchParams' type, as fetch would have sent it, unless
    // the script chose its own.
    if let Some(t) = &x.content_type {
        if !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        {
            headers.push(("Content-Type".to_owned(), t.clone()));
        }
    }
    // The worker's `fetch` uses the regular profile's cookies: a page in an incognito
    // window must not send the user's signed-in identity (the site could read it back
    // into that page) nor leave the answer's cookies in the regular profile.
    let anonymous = x.anonymous || from.incognito;
    let (headers, browser_headers) = crate::gm::xhr::split_headers(headers, anonymous, &x.method);
    crate::env::HttpRequest {
        method: x.method.clone(),
        url,
        headers,
        body: x.data.clone(),
        timeout_ms: x.timeout_ms,
        anonymous,
        browser_headers,
    }
}

/// Ends a `GM_xmlhttpRequest`'s flight when dropped: when its answer is made, or when its
/// future is given up; the bytes its answer holds are given back then.
struct EndFlight<'a> {
    flights: &'a std::cell::RefCell<crate::gm::xhr_flight::Flights>,
    key: &'a crate::gm::xhr_flight::FlightKey,
}

impl Drop for EndFlight<'_> {
    fn drop(&mut self) {
        // Never borrowed across an await; `try_` so a drop can never panic.
        if let Ok(mut f) = self.flights.try_borrow_mut() {
            f.finish(self.key);
        }
    }
}

/// A request's name in `gm::xhr_flight`: the proven script, Chrome's sender, the page's number.
fn flight_key(
    uuid: &str,
    from: &crate::provider::Sender,
    id: u32,
) -> crate::gm::xhr_flight::FlightKey {
    crate::gm::xhr_flight::FlightKey {
        uuid: uuid.to_owned(),
        tab: from.tab_id,
        frame: from.frame_id,
        document: from.document_id.clone(),
        id,
    }
}

fn error(message: impl Into<String>) -> Value {
    json!({ "error": message.into() })
}

/// Whether a request acts beyond the page (refused once the script is turned off). Reads,
/// waits, aborts, closing what it opened and removing its menu commands only wind things down.
fn acts(req: &GmRequest) -> bool {
    match req {
        GmRequest::Values(_)
        | GmRequest::Xhr(_)
        | GmRequest::TabOpen(_)
        | GmRequest::Notify(_)
        | GmRequest::TabObjectSave(_)
        | GmRequest::Clipboard(_) => true,
        GmRequest::Menu(commands) => !commands.is_empty(),
        // Listed, not `_`: a new request must be placed on one side or the other.
        GmRequest::ValuesGet
        | GmRequest::ValuesWait { .. }
        | GmRequest::XhrAbort { .. }
        | GmRequest::XhrProgress { .. }
        | GmRequest::TabClose { .. }
        | GmRequest::TabWait { .. }
        | GmRequest::NoticeWait { .. }
        | GmRequest::NoticeClose { .. }
        | GmRequest::TabObjectGet
        | GmRequest::TabObjectAll
        | GmRequest::Refused(_) => false,
    }
}

/// Whether the script grants any of these classic names (either spelling).
pub(super) fn grants_any(record: &ScriptRecord, names: &[&str]) -> bool {
    record
        .metadata
        .grants
        .iter()
        .any(|g| matches!(api::classify(g), Grant::Known(a) if names.contains(&a.name)))
}

const VALUE_GRANTS: &[&str] = &[
    "GM_getValue",
    "GM_setValue",
    "GM_deleteValue",
    "GM_listValues",
    "GM_getValues",
    "GM_setValues",
    "GM_deleteValues",
    "GM_addValueChangeListener",
    "GM_removeValueChangeListener",
];

/// The grants whose functions make requests through the worker (`GM_download` fetches its file
/// with `GM_xmlhttpRequest`'s request: `gm::download_js`).
const REQUEST_GRANTS: &[&str] = &["GM_xmlhttpRequest", "GM_download"];

/// Whether the script may make this request: any with `GM_xmlhttpRequest`; with `GM_download`
/// alone, only what a download asks — a GET without a body — so a reviewer who saw
/// `GM_download` was not shown a script that posts data (its `@connect` hosts bound both).
fn may_request(record: &ScriptRecord, x: &crate::gm::message::XhrRequest) -> bool {
    grants_any(record, &["GM_xmlhttpRequest"])
        || (grants_any(record, &["GM_download"])
            && x.method.eq_ignore_ascii_case("GET")
            && x.data.is_none())
}

/// The grants that let a script store values: a reviewer who saw only `GM_getValue` (or a
/// listener) was told the script reads its values, not that it fills the shared budget.
const SET_GRANTS: &[&str] = &["GM_setValue", "GM_setValues"];
/// And delete them (the page sends `GM_setValue(k, undefined)` as a delete).
const DELETE_GRANTS: &[&str] = &[
    "GM_setValue",
    "GM_setValues",
    "GM_deleteValue",
    "GM_deleteValues",
];

/// Why `op` is refused to a script that does not grant it.
fn not_granted(op: &crate::gm::values::Op) -> &'static str {
    match op {
        crate::gm::values::Op::Set(_) => {
            "GM values: this script does not @grant GM_setValue or GM_setValues, so it may not \
             store values"
        }
        crate::gm::values::Op::Delete(_) => {
            "GM values: this script does not @grant GM_setValue, GM_deleteValue or \
             GM_deleteValues, so it may not delete values"
        }
    }
}

/// Whether `record` grants what `op` does to its values.
fn grants_op(record: &ScriptRecord, op: &crate::gm::values::Op) -> bool {
    match op {
        crate::gm::values::Op::Set(_) => grants_any(record, SET_GRANTS),
        crate::gm::values::Op::Delete(_) => grants_any(record, DELETE_GRANTS),
    }
}

impl<E: Env> Provider<E> {
    /// Answers one GM request of the script `uuid` (proven by the channel).
    /// `page` is the sender's URL as Chrome reports it (for `@connect self`).
    pub(crate) async fn gm_request(
        &self,
        uuid: &str,
        from: &crate::provider::Sender,
        req: GmRequest,
    ) -> Value {
        let record = match self.scripts().await {
            Ok(s) => s.records.iter().find(|r| r.uuid == uuid).cloned(),
            Err(e) => return error(format!("GM: the provider could not read its scripts: {e}")),
        };
        let Some(record) = record else {
            return error("GM: this script is no longer installed");
        };
        // Chrome cannot stop a script already running in an open page; what it may still do
        // through the worker stops when the user turns it off.
        if !record.enabled && acts(&req) {
            return error(
                "GM: this script is turned off; a page it already runs in keeps its code until \
                 reloaded, but it may no longer send requests, open tabs, show notifications, \
                 add menu commands, change its values or save tab objects",
            );
        }
        match req {
            GmRequest::ValuesGet if grants_any(&record, VALUE_GRANTS) => {
                match self.gm_values.read(&self.env, uuid).await {
                    Ok((v, cursor)) => crate::value::object(vec![
                        ("values", v.encode()),
                        ("cursor", cursor.into()),
                    ]),
                    Err(e) => error(e.to_string()),
                }
            }
            GmRequest::Values(op) if grants_op(&record, &op) => {
                self.gm_change_values(&record, from, &op).await
            }
            GmRequest::ValuesWait { since }
                if grants_any(&record, &["GM_addValueChangeListener"]) =>
            {
                self.gm_wait(uuid, from, since).await
            }
            GmRequest::ValuesWait { .. } => {
                error("GM values: this script does not @grant GM_addValueChangeListener")
            }
            GmRequest::ValuesGet => error(
                "GM values: this script does not @grant GM_getValue/GM_setValue (or another \
                 value function)",
            ),
            GmRequest::Values(op) => error(not_granted(&op)),
            GmRequest::Xhr(x) if may_request(&record, &x) => self.gm_xhr(&record, from, &x).await,
            GmRequest::Xhr(_) if grants_any(&record, &["GM_download"]) => error(
                "GM_download: a script granted GM_download (and not GM_xmlhttpRequest) may only \
                 make GET requests without a body",
            ),
            GmRequest::Xhr(_) => {
                error("GM_xmlhttpRequest: this script does not @grant GM_xmlhttpRequest")
            }
            GmRequest::XhrAbort { id } if grants_any(&record, REQUEST_GRANTS) => {
                let aborted = self
                    .gm_flights
                    .borrow_mut()
                    .abort(&flight_key(uuid, from, id));
                json!({ "ok": true, "aborted": aborted })
            }
            GmRequest::XhrProgress { id, seen } if grants_any(&record, REQUEST_GRANTS) => {
                self.gm_xhr_progress(&flight_key(uuid, from, id), seen)
                    .await
            }
            GmRequest::XhrAbort { .. } | GmRequest::XhrProgress { .. } => {
                error("GM_xmlhttpRequest: this script does not @grant GM_xmlhttpRequest")
            }
            GmRequest::Menu(commands) if grants_any(&record, super::gm_menu::MENU_GRANTS) => {
                self.gm_menu(uuid, from, commands).await
            }
            GmRequest::TabOpen(t) if grants_any(&record, &["GM_openInTab"]) => {
                self.gm_open_tab(uuid, from, &t).await
            }
            GmRequest::TabClose { tab } if grants_any(&record, &["GM_openInTab"]) => {
                self.gm_close_tab(uuid, tab).await
            }
            GmRequest::TabWait { tab } if grants_any(&record, &["GM_openInTab"]) => {
                self.gm_tab_wait(uuid, tab).await
            }
            GmRequest::TabOpen(_) | GmRequest::TabClose { .. } | GmRequest::TabWait { .. } => {
                error("GM_openInTab: this script does not @grant GM_openInTab")
            }
            GmRequest::Notify(n) if grants_any(&record, &["GM_notification"]) => {
                self.gm_notify(uuid, &record.metadata.name, &n, from).await
            }
            GmRequest::NoticeWait { id } if grants_any(&record, &["GM_notification"]) => {
                self.gm_notice_wait(uuid, &id).await
            }
            GmRequest::NoticeClose { id } if grants_any(&record, &["GM_notification"]) => {
                self.gm_notice_close(uuid, &id).await
            }
            GmRequest::Notify(_) | GmRequest::NoticeWait { .. } | GmRequest::NoticeClose { .. } => {
                error("GM_notification: this script does not @grant GM_notification")
            }
            GmRequest::TabObjectGet | GmRequest::TabObjectSave(_) | GmRequest::TabObjectAll => {
                self.gm_tab_object(&record, from, req).await
            }
            GmRequest::Menu(_) => {
                error("GM_registerMenuCommand: this script does not @grant GM_registerMenuCommand")
            }
            GmRequest::Clipboard(w) => self.gm_clipboard(&record, from, w).await,
            GmRequest::Refused(why) => error(why.to_string()),
        }
    }

    /// Stores a change of the proven script's values, wakes its other pages' listeners and
    /// registers the script again with them (the registry flag cleared meanwhile).
    async fn gm_change_values(
        &self,
        record: &ScriptRecord,
        from: &crate::provider::Sender,
        op: &crate::gm::values::Op,
    ) -> Value {
        let change = self.value_change_begins().await;
        match self
            .gm_values
            .apply_from(&self.env, &record.uuid, page_of(from), op)
            .await
        {
            Ok((changes, _)) => {
                // The change's number (read in the same turn as it was stored), so the page
                // can order it against other pages' changes it hears.
                let n = (!changes.is_empty()).then(|| self.gm_values.cursor(&record.uuid));
                if !changes.is_empty() {
                    self.wake_waiters(&record.uuid, from, &changes);
                    self.refresh_values_snapshot(record).await;
                }
                change.settled();
                json!({ "ok": true, "changed": changes.len(), "n": n })
            }
            // Storage's `set` is whole or nothing: nothing to register. The page is told what
            // its keys hold, so its copy reads the stored values again (R13: a refused value
            // read back for seconds, as if kept).
            Err(e) => {
                change.settled();
                let keys: Vec<&str> = match op {
                    crate::gm::values::Op::Set(items) => {
                        items.iter().map(|(k, _)| k.as_str()).collect()
                    }
                    crate::gm::values::Op::Delete(keys) => {
                        keys.iter().map(String::as_str).collect()
                    }
                };
                match crate::gm::store::load(&self.env, &record.uuid).await {
                    Ok(stored) => {
                        let kept: Vec<Value> =
                            keys.iter().map(|k| json!([k, stored.get(k)])).collect();
                        json!({ "error": e.to_string(), "kept": kept })
                    }
                    Err(_) => error(e.to_string()),
                }
            }
        }
    }

    /// Answers a page's `values.wait` at once with what other pages changed since its cursor,
    /// or with "read them whole" when that is not known; else holds it until another page of
    /// the same script changes a value, or [`WAIT_MS`] pass.
    async fn gm_wait(
        &self,
        uuid: &str,
        from: &crate::provider::Sender,
        since: Option<u64>,
    ) -> Value {
        use crate::gm::change_log::Since;
        let page = page_of(from);
        // Checked and the wait registered in one turn: no change can fall between the two.
        match self.gm_values.since(uuid, since, &page) {
            Since::Resync(cursor) => return json!({ "resync": true, "cursor": cursor }),
            Since::Changes(changes, cursor) if !changes.is_empty() => {
                return json!({ "changes": changes, "cursor": cursor })
            }
            Since::Changes(..) => {}
        }
        let (tx, rx) = futures::channel::oneshot::channel();
        {
            let mut w = self.gm_waiters.borrow_mut();
            if let Some(list) = w.get_or_insert_with(uuid.to_owned(), Vec::new) {
                if list.len() >= MAX_WAITERS && !list.is_empty() {
                    // Its cursor stays where it was: it asks again and hears what it missed.
                    let (_, old) = list.remove(0);
                    let _ = old.send(std::rc::Rc::new(json!({ "changes": [] })));
                }
                list.push((page, tx));
            }
        }
        let timer = self.env.sleep(WAIT_MS);
        futures::pin_mut!(timer);
        match futures::future::select(rx, timer).await {
            futures::future::Either::Left((Ok(v), _)) => {
                std::rc::Rc::try_unwrap(v).unwrap_or_else(|shared| (*shared).clone())
            }
            // Nothing woke it, so whatever changed meanwhile was its own page's.
            _ => json!({ "changes": [], "cursor": self.gm_values.cursor(uuid) }),
        }
    }

    /// Answers every page of `uuid` waiting for changes but the one that made them (each
    /// waiter had heard everything before these: it would not be waiting otherwise).
    fn wake_waiters(
        &self,
        uuid: &str,
        from: &crate::provider::Sender,
        changes: &[crate::gm::values::Change],
    ) {
        let list = self
            .gm_waiters
            .borrow_mut()
            .remove(uuid)
            .unwrap_or_default();
        let n = self.gm_values.cursor(uuid);
        let body = std::rc::Rc::new(json!({
            "changes": changes.iter().map(|c| json!([c.key, c.old, c.new, n])).collect::<Vec<_>>(),
            "cursor": n,
        }));
        let from = page_of(from);
        let mut keep = Vec::new();
        for (page, tx) in list {
            if page.is(&from) {
                keep.push((page, tx));
            } else {
                let _ = tx.send(std::rc::Rc::clone(&body));
            }
        }
        if !keep.is_empty() {
            if let Some(list) = self
                .gm_waiters
                .borrow_mut()
                .get_or_insert_with(uuid.to_owned(), Vec::new)
            {
                list.extend(keep);
            }
        }
    }

    /// The values of `uuids` were replaced by other means (a backup restored): their pages'
    /// listeners are told to read them whole.
    pub(crate) fn values_replaced(&self, uuids: &[&str]) {
        for uuid in uuids {
            let cursor = self.gm_values.replaced(uuid);
            let list = self
                .gm_waiters
                .borrow_mut()
                .remove(*uuid)
                .unwrap_or_default();
            let body = std::rc::Rc::new(json!({ "resync": true, "cursor": cursor }));
            for (_, tx) in list {
                let _ = tx.send(std::rc::Rc::clone(&body));
            }
        }
    }

    /// Sends a request the script's `@connect` rules allow (never one they do not), and each
    /// redirect only where they allow too: the browser does not follow one, this loop judges it
    /// first (`xhr::follow`), within the request's one timeout.
    /// An abort from the same page (`xhr.abort` with its number) cancels the fetch: its future
    /// is dropped, which the shell turns into `AbortController.abort()`.
    async fn gm_xhr(
        &self,
        record: &ScriptRecord,
        from: &crate::provider::Sender,
        x: &crate::gm::message::XhrRequest,
    ) -> Value {
        use crate::gm::xhr;
        let page = from.url.as_deref();
        let web = crate::web::platform();
        let rules = crate::gm::connect::rules(web, &record.metadata.connects);
        // `connect`: the script's `@connect` rules said no (`GM_download`'s `not_whitelisted`).
        let url = match xhr::decide(web, x, &rules, page) {
            Ok(u) => u,
            Err(e) => {
                return json!({ "error": e.to_string(), "refused": true, "connect": e.by_connect() })
            }
        };
        let mut req = http_request(x, url, from);
        let key = flight_key(&record.uuid, from, x.id);
        // Its `timeout` counts from now, its wait for a place included, as XMLHttpRequest's.
        let started = self.env.now_ms();
        // The flight, and the bytes of its answer counted in it, end when this returns (the
        // answer made: the shell hands it to the page in the same turn) or is dropped.
        let (mut aborted, _flight) = match self.xhr_start(&key, x.timeout_ms).await {
            Ok(flight) => flight,
            Err(answer) => return answer,
        };
        // Asked before the shell keeps each chunk of the body: counted in the answers' budget,
        // or refused (the shell stops reading) and remembered, for the script to be told.
        let over = std::cell::Cell::new(None);
        // A wait for room holds nothing (`Flights::hold`); the ask before the body (0 bytes)
        // is no progress for the page.
        let report = |loaded: u64, total: Option<u64>| {
            use crate::gm::xhr_flight::Hold;
            let mut flights = self.gm_flights.borrow_mut();
            match flights.hold(&key, loaded, total) {
                Hold::Keep => {
                    if loaded > 0 {
                        flights.progress(&key, loaded, total);
                    }
                    crate::env::Hold::Keep
                }
                Hold::Wait(room) => crate::env::Hold::Wait(room),
                Hold::Stop(e) => {
                    over.set(Some(e));
                    crate::env::Hold::Stop
                }
            }
        };
        // Its status and headers, before the body: the page's `readyState` 2.
        let head = |r: &_| self.gm_flights.borrow_mut().head(&key, r);
        let mut hops = 0;
        let answer = loop {
            req.timeout_ms = x
                .timeout_ms
                .saturating_sub(crate::env::elapsed_ms(self.env.now_ms(), started));
            if req.timeout_ms == 0 {
                break Err(crate::env::FetchError::Timeout);
            }
            let r = self.xhr_hop(&req, &report, &head, &mut aborted).await;
            let Some(r) = r else {
                return json!({ "aborted": true });
            };
            match r {
                Ok(crate::env::HttpResponse {
                    status,
                    location: Some(to),
                    ..
                }) => match xhr::follow(web, &req, status, &to, &rules, page, hops) {
                    Ok(next) => {
                        req = next;
                        hops += 1;
                    }
                    Err(e) => {
                        return json!({
                            "error": e.to_string(),
                            "refused": true,
                            "connect": e.by_connect(),
                        });
                    }
                },
                other => break other,
            }
        };
        if let (Err(_), Some(e)) = (&answer, over.get()) {
            return json!({ "error": e.to_string(), "tooLarge": true });
        }
        match answer {
            // Each hop was judged before it was requested; this stays as the last word.
            Ok(r) if !xhr::final_allowed(web, &r.final_url, &rules, page) => json!({
                "error": format!(
                    "GM_xmlhttpRequest: the response was withheld: it was redirected to {}, \
                     which is not in this script's @connect list",
                    crate::text::ellipsize(&r.final_url, 200)
                ),
                "refused": true,
                "connect": true,
            }),
            Ok(r) => xhr::response_json(r, x.response_type),
            Err(crate::env::FetchError::Timeout) => json!({
                "error": format!("GM_xmlhttpRequest: no answer within {} ms", x.timeout_ms),
                "timeout": true,
            }),
            Err(e) => error(format!("GM_xmlhttpRequest failed: {e}")),
        }
    }

    /// One hop of a request: its fetch raced with the page's abort (`None`: the fetch future
    /// is dropped, which aborts it) and with its timeout, since the shell's own cannot end a
    /// wait for room in the answers' budget (no read is pending then).
    async fn xhr_hop(
        &self,
        req: &crate::env::HttpRequest,
        report: &dyn Fn(u64, Option<u64>) -> crate::env::Hold,
        head: &dyn Fn(&crate::env::HttpResponse),
        aborted: &mut futures::channel::oneshot::Receiver<()>,
    ) -> Option<Result<crate::env::HttpResponse, crate::env::FetchError>> {
        use futures::future::{select, Either};
        let fetch = self
            .env
            .fetch_progress(req, crate::gm::xhr::MAX_RESPONSE_BYTES, report, head);
        // At most `MAX_TIMEOUT_MS` (120 s): exact as an f64.
        #[allow(clippy::cast_precision_loss)]
        let timer = self.env.sleep(req.timeout_ms as f64);
        futures::pin_mut!(fetch, timer);
        match select(fetch, select(aborted, timer)).await {
            Either::Left((r, _)) => Some(r),
            Either::Right((Either::Right(_), _)) => Some(Err(crate::env::FetchError::Timeout)),
            // Aborted (or, impossibly, its sender gone).
            Either::Right((Either::Left(_), _)) => None,
        }
    }

    /// Records the request in the flights and, if it must wait for a place, waits: the abort
    /// receiver and the flight's guard once it may be sent; aborted, refused or out of time
    /// first, it never is: the page's answer then.
    async fn xhr_start<'a>(
        &'a self,
        key: &'a crate::gm::xhr_flight::FlightKey,
        timeout_ms: u64,
    ) -> Result<(futures::channel::oneshot::Receiver<()>, EndFlight<'a>), Value> {
        let crate::gm::xhr_flight::Started { mut aborted, go } =
            match self.gm_flights.borrow_mut().start(key.clone()) {
                Ok(s) => s,
                Err(e) => return Err(json!({ "error": e.to_string(), "refused": true })),
            };
        let flight = EndFlight {
            flights: &self.gm_flights,
            key,
        };
        if let Some(go) = go {
            if let Some(answer) = self.xhr_turn(go, &mut aborted, timeout_ms).await {
                return Err(answer);
            }
        }
        Ok((aborted, flight))
    }

    /// A waiting request may be sent once it has a place (`None`); aborted or out of time
    /// first, never: the page's answer then.
    async fn xhr_turn(
        &self,
        go: futures::channel::oneshot::Receiver<()>,
        aborted: &mut futures::channel::oneshot::Receiver<()>,
        timeout_ms: u64,
    ) -> Option<Value> {
        use futures::future::{select, Either};
        // At most `MAX_TIMEOUT_MS` (120 s): exact as an f64.
        let timer = self.env.sleep(timeout_ms as f64);
        futures::pin_mut!(timer);
        match select(go, select(aborted, timer)).await {
            Either::Left((Ok(()), _)) => None,
            // Aborted while waiting (its `go` dropped with it): nothing was sent.
            Either::Left((Err(_), _)) | Either::Right((Either::Left(_), _)) => {
                Some(json!({ "aborted": true }))
            }
            Either::Right((Either::Right(_), _)) => Some(json!({
                "error": format!(
                    "GM_xmlhttpRequest: no answer within {timeout_ms} ms (it waited for its turn \
                     behind other requests in flight, and was not sent)"
                ),
                "timeout": true,
            })),
        }
    }

    /// Holds a page's progress watch until the request's next report, its end, or
    /// [`WAIT_MS`] (answered `{}`: the page asks again).
    async fn gm_xhr_progress(&self, key: &crate::gm::xhr_flight::FlightKey, seen: u64) -> Value {
        use crate::gm::xhr_flight::{Progress, Watch};
        // Bound first: the borrow must end before the wait.
        let watch = self.gm_flights.borrow_mut().watch(key, seen);
        let p = match watch {
            Watch::Now(p) => p,
            Watch::Later(rx) => {
                let timer = self.env.sleep(WAIT_MS);
                futures::pin_mut!(timer);
                match futures::future::select(rx, timer).await {
                    futures::future::Either::Left((Ok(p), _)) => p,
                    _ => return json!({}),
                }
            }
        };
        match p {
            Progress::At { loaded, total, seq } => {
                let mut r = json!({ "loaded": loaded, "total": total, "seq": seq });
                if let (Some(h), Some(o)) = (
                    self.gm_flights.borrow().head_since(key, seen),
                    r.as_object_mut(),
                ) {
                    o.insert("head".to_owned(), h);
                }
                r
            }
            Progress::NotInFlight => json!({ "none": true }),
        }
    }

    /// Registers the script again with its new values, so the next page load starts with them
    /// (the registered code carries the snapshot `GM_getValue` answers from).
    /// Under the write lock: a script write between reading the record and registering would
    /// otherwise be overwritten by this older registration.
    ///
    /// One waits per script: a change that finds its script's refresh still waiting for the
    /// lock leaves it to that one, which reads the values when it runs (so these too). Each
    /// refresh is a `userScripts.update`, whose time grows with all the code registered (330 ms
    /// at 1,000 scripts), so a page setting a value ten times a second would otherwise queue
    /// them faster than Chrome takes them, and every agent's write behind them.
    async fn refresh_values_snapshot(&self, record: &ScriptRecord) {
        if !self
            .values_refresh_waiting
            .borrow_mut()
            .insert(record.uuid.clone())
        {
            return;
        }
        // Out of the set once the lock is held, or if this refresh is dropped while it waits.
        let waiting = Waiting(&self.values_refresh_waiting, &record.uuid);
        let _guard = self.write_lock().await;
        drop(waiting);
        let Ok((current, source)) =
            crate::scripts::store::load_with_source(&self.env, &record.uuid).await
        else {
            // Chrome keeps the older snapshot: the reconcile registers the stored values.
            return self.mark_registry_stale().await;
        };
        let desired = crate::scripts::sync::desired_for(&current, &source);
        self.sync_registration(&current.uuid, desired, None).await;
    }
}

/// A script's place in [`Provider::values_refresh_waiting`], given up when dropped.
struct Waiting<'a>(
    &'a std::cell::RefCell<crate::vec_map::VecSet<String>>,
    &'a str,
);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.borrow_mut().remove(self.1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::key_store;
    use crate::env::memory::MemoryEnv;
    use crate::env::Area;
    use crate::provider::gm_test_support::{answered, gm_raw, script};
    use crate::provider::keys;
    use crate::provider::{Received, RegistryState, Sender};
    use futures::executor::block_on;

    fn gm(p: &Provider<MemoryEnv>, token: &str, fields: Value) -> Value {
        gm_from(p, token, fields, None)
    }

    fn gm_from(p: &Provider<MemoryEnv>, token: &str, fields: Value, page: Option<&str>) -> Value {
        let raw = gm_raw(token, fields);
        let sender = Sender {
            url: page.map(str::to_owned),
            ..Sender::default()
        };
        answered(block_on(p.user_script_message(|| Some(raw), sender)))
    }

    /// The channel key cannot be read while a script is registered (storage failing): no new
    /// key is made (it would cut every other script's channel), the script is registered
    /// without its prelude for now, and the registry stays stale until a reconcile registers
    /// it whole.
    #[test]
    fn a_failed_key_read_keeps_the_key_and_leaves_the_registry_stale() {
        let p = Provider::new(MemoryEnv::new());
        let b = script(&p, "B", "// @grant GM_getValue\n");
        let key = block_on(key_store::load(&p.env)).unwrap();
        block_on(p.ensure_registry());
        p.forget_channel_key();
        p.env
            .fail_gets
            .borrow_mut()
            .push(crate::channel::token::KEY_STORAGE.to_owned());
        // Through the write path, which keeps the provider's cache of the scripts.
        let src = "// ==UserScript==\n// @name C\n// @match https://example.com/*\n// @grant GM_getValue\n// ==/UserScript==\n";
        let saved = block_on(crate::control::handle(
            &p,
            &json!({"op": "scripts.save", "source": src}),
        ));
        let c = saved.value["result"]["script"]["uuid"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(p.env.registrations.borrow().contains_key(&c), "it runs");
        assert_eq!(p.registry_state(), RegistryState::Stale);
        p.env.fail_gets.borrow_mut().clear();
        assert_eq!(block_on(key_store::load(&p.env)), Some(key.clone()));
        // B's channel still works.
        let r = gm(&p, &key.token(&b, 1), json!({"op": "values.get"}));
        assert_eq!(r["values"], json!({}), "{r}");
        // The reconcile registers C whole: its token is in its code.
        block_on(p.ensure_registry());
        assert_eq!(p.registry_state(), RegistryState::Synced);
        let code = p.env.registrations.borrow()[&c].js[0].code.clone().unwrap();
        assert!(code.contains(&key.token(&c, 1)), "C has its prelude");
    }

    /// A lost (damaged) key is made again when a script is registered: every other script's
    /// token is then wrong, so the registry is marked stale and the reconcile registers them
    /// with the new key; their channel works again.
    #[test]
    fn a_key_made_again_re_registers_every_script() {
        let p = Provider::new(MemoryEnv::new());
        let b = script(&p, "B", "// @grant GM_getValue\n");
        block_on(p.ensure_registry());
        let mut m = serde_json::Map::new();
        m.insert(
            crate::channel::token::KEY_STORAGE.to_owned(),
            json!("damaged"),
        );
        block_on(crate::env::Storage::set(&p.env, crate::env::Area::Local, m)).unwrap();
        p.forget_channel_key();
        let src = "// ==UserScript==\n// @name C\n// @match https://example.com/*\n// @grant GM_getValue\n// ==/UserScript==\n";
        block_on(crate::control::handle(
            &p,
            &json!({"op": "scripts.save", "source": src}),
        ));
        assert_eq!(p.registry_state(), RegistryState::Stale);
        block_on(p.ensure_registry());
        let key = block_on(key_store::load(&p.env)).unwrap();
        let r = gm(&p, &key.token(&b, 1), json!({"op": "values.get"}));
        assert_eq!(r["values"], json!({}), "{r}");
        let code = p.env.registrations.borrow()[&b].js[0].code.clone().unwrap();
        assert!(
            code.contains(&key.token(&b, 1)),
            "B registered with the new key"
        );
    }

    /// A write whose registration cannot read the script's values (storage failing) does not
    /// register it without them (it would read its defaults and write them back over its
    /// values): Chrome keeps what it held, the answer says so, and the reconcile after the
    /// interaction registers the new version with its values.
    #[test]
    fn a_registration_that_cannot_read_the_values_waits_for_the_reconcile() {
        let p = Provider::new(MemoryEnv::new());
        let src = |v: &str| {
            format!("// ==UserScript==\n// @name V\n// @match https://example.com/*\n// @grant GM_getValue\n// @grant GM_setValue\n// ==/UserScript==\n{v}\n")
        };
        let save = |m: Value| block_on(crate::control::handle(&p, &m)).value;
        let r = save(json!({"op": "scripts.save", "source": src("one();")}));
        let v = r["result"]["script"]["uuid"].as_str().unwrap().to_owned();
        block_on(p.ensure_registry());
        let key = block_on(key_store::load(&p.env)).unwrap();
        let r = gm(
            &p,
            &key.token(&v, 1),
            json!({"op": "values.set", "items": [["count", "41"]]}),
        );
        assert_eq!(r["ok"], json!(true), "{r}");
        let code = || {
            p.env.registrations.borrow()[&v]
                .js
                .iter()
                .filter_map(|j| j.code.clone())
                .collect::<String>()
        };
        p.env.fail_gets.borrow_mut().push("values/".to_owned());
        let r =
            save(json!({"op": "scripts.save", "uuid": v, "revision": 1, "source": src("two();")}));
        assert_eq!(r["ok"], json!(true), "stored: {r}");
        assert_eq!(r["result"]["registered"], json!(false), "{r}");
        assert!(code().contains("one();"), "Chrome keeps what it held");
        assert_eq!(p.registry_state(), RegistryState::Stale);
        p.env.fail_gets.borrow_mut().clear();
        block_on(p.ensure_registry());
        assert!(code().contains("two();"));
        assert!(code().contains(r#"[["count","41"]]"#), "with its values");
    }

    #[test]
    fn value_changes_waiting_for_the_lock_register_once_with_the_latest() {
        let p = Provider::new(MemoryEnv::new());
        let a = script(&p, "A", "// @grant GM_setValue\n// @grant GM_getValue\n");
        let key = block_on(key_store::load(&p.env)).unwrap();
        let ta = key.token(&a, 1);
        let set = |v: &str| {
            let raw = gm_raw(&ta, json!({"op": "values.set", "items": [["k", v]]}));
            Box::pin(p.user_script_message(move || Some(raw), Sender::default()))
        };
        let updates = || {
            p.env
                .registry_calls
                .borrow()
                .iter()
                .filter(|c| **c == "update" || **c == "register")
                .count()
        };
        let before = updates();
        block_on(async {
            // A write holds the lock meanwhile.
            let lock = p.write_lock().await;
            let mut first = set("1");
            assert!(
                futures::poll!(first.as_mut()).is_pending(),
                "waits for the lock"
            );
            // Stored and answered at once: their values are left to the refresh that waits.
            for v in ["2", "3"] {
                let mut later = set(v);
                match futures::poll!(later.as_mut()) {
                    std::task::Poll::Ready(r) => assert_eq!(answered(r)["ok"], true),
                    std::task::Poll::Pending => panic!("{v} queued a registration of its own"),
                }
            }
            assert_eq!(updates(), before);
            drop(lock);
            assert_eq!(answered(first.await)["ok"], true);
        });
        assert_eq!(updates(), before + 1, "{:?}", p.env.registry_calls.borrow());
        let code = p.env.registrations.borrow()[&a].js[0].code.clone().unwrap();
        assert!(code.contains(r#"[["k","3"]]"#), "the latest value");
        // The next change, with none waiting, registers again.
        assert_eq!(
            gm(&p, &ta, json!({"op": "values.set", "items": [["k", "4"]]}))["ok"],
            true
        );
        assert_eq!(updates(), before + 2);
    }

    /// A value is stored before the registration that carries it, which waits for the write
    /// lock. A worker stopped in between must find "not synced" stored, so that the next one
    /// reconciles and registers the stored value; else Chrome's older snapshot would be
    /// trusted and every page would start with the old value.
    #[test]
    fn a_value_stored_but_not_registered_leaves_the_registry_flag_cleared() {
        let p = Provider::new(MemoryEnv::new());
        let a = script(&p, "A", "// @grant GM_setValue\n// @grant GM_getValue\n");
        block_on(p.ensure_registry());
        let flag =
            |p: &Provider<MemoryEnv>| p.env.dump(Area::Session)[keys::REGISTRY_SYNCED].clone();
        assert_eq!(flag(&p), json!(true));
        let key = block_on(key_store::load(&p.env)).unwrap();
        let raw = gm_raw(
            &key.token(&a, 1),
            json!({"op": "values.set", "items": [["k", "7031"]]}),
        );
        const STORED: &str = r#"[["k","7031"]]"#;
        let code =
            |p: &Provider<MemoryEnv>| p.env.registrations.borrow()[&a].js[0].code.clone().unwrap();
        block_on(async {
            let lock = p.write_lock().await;
            let mut change = Box::pin(p.user_script_message(move || Some(raw), Sender::default()));
            assert!(futures::poll!(change.as_mut()).is_pending());
            assert!(!code(&p).contains(STORED), "not registered yet");
            assert_eq!(flag(&p), json!(false));
            // The worker stops here; the next one starts over the same storage and Chrome.
            let q = Provider::new(MemoryEnv::new());
            *q.env.areas.borrow_mut() = p.env.areas.borrow().clone();
            *q.env.registrations.borrow_mut() = p.env.registrations.borrow().clone();
            q.ensure_registry().await;
            assert!(code(&q).contains(STORED), "{}", code(&q));
            // A "synced" owed by a write is not stored while the change waits.
            p.flag_owed.set(true);
            p.registry.set(RegistryState::Synced);
            drop(lock);
            p.ensure_registry().await;
            assert_eq!(flag(&p), json!(false));
            assert_eq!(answered(change.await)["ok"], true);
        });
        assert!(code(&p).contains(STORED));
        // Registered: "synced" is owed, and stored after the interaction.
        block_on(p.ensure_registry());
        assert_eq!(flag(&p), json!(true));
    }

    /// The registration after a value change cannot read the script (storage failing): Chrome
    /// keeps the older snapshot, so the registry is stale and the reconcile registers the value.
    #[test]
    fn a_value_whose_registration_cannot_read_the_script_waits_for_the_reconcile() {
        let p = Provider::new(MemoryEnv::new());
        let a = script(&p, "A", "// @grant GM_setValue\n// @grant GM_getValue\n");
        block_on(p.ensure_registry());
        let key = block_on(key_store::load(&p.env)).unwrap();
        p.env.fail_gets.borrow_mut().push("script/".to_owned());
        let r = gm(
            &p,
            &key.token(&a, 1),
            json!({"op": "values.set", "items": [["k", "7032"]]}),
        );
        assert_eq!(r["ok"], true, "stored: {r}");
        assert_eq!(p.registry_state(), RegistryState::Stale);
        p.env.fail_gets.borrow_mut().clear();
        block_on(p.ensure_registry());
        let code = p.env.registrations.borrow()[&a].js[0].code.clone().unwrap();
        assert!(code.contains(r#"[["k","7032"]]"#));
    }

    /// Fills `chrome.storage.local` so `room` bytes are left below the agents' share
    /// (negative: that far past it).
    fn fill_to_share(p: &Provider<MemoryEnv>, room: isize) {
        use crate::env::Storage;
        let in_use = block_on(p.env.bytes_in_use(Area::Local, None)).unwrap()
            - block_on(p.env.bytes_in_use(Area::Local, Some(&["filler"]))).unwrap();
        let limit = crate::scripts::quota::AGENT_LIMIT_BYTES;
        let bytes = limit.checked_add_signed(-room).unwrap() - in_use - "filler".len() - 2;
        let mut m = serde_json::Map::new();
        m.insert("filler".into(), "f".repeat(bytes).into());
        block_on(p.env.set(Area::Local, m)).unwrap();
    }

    /// A script (an agent's, say) that hoards values stops below the agents' share, so the
    /// user's reserve stays free; a change that frees bytes is still taken.
    #[test]
    fn a_value_change_that_grows_past_the_agents_share_is_refused() {
        use crate::env::Storage;
        let p = Provider::new(MemoryEnv::new());
        let a = script(&p, "A", "// @grant GM_setValue\n// @grant GM_deleteValue\n");
        let t = block_on(key_store::load(&p.env)).unwrap().token(&a, 1);
        let r = gm(&p, &t, json!({"op": "values.set", "items": [["k", "1"]]}));
        assert_eq!(r["ok"], true, "{r}");
        fill_to_share(&p, 500);
        let before = block_on(p.env.bytes_in_use(Area::Local, None)).unwrap();
        let big = format!("\"{}\"", "x".repeat(1000));
        let r = gm(
            &p,
            &t,
            json!({"op": "values.set", "items": [["k", "2"], ["big", big]]}),
        );
        let e = r["error"].as_str().unwrap_or_default();
        assert!(e.contains("storage is nearly full"), "{r}");
        // The page is told what its keys hold, so its copy goes back to them.
        assert_eq!(r["kept"], json!([["k", "1"], ["big", null]]));
        assert_eq!(
            block_on(p.env.bytes_in_use(Area::Local, None)).unwrap(),
            before
        );
        let kept = block_on(crate::gm::store::load(&p.env, &a)).unwrap();
        assert_eq!(kept.encode(), json!({"k": "1"}));
        // What fits in the room left is taken; so, past the share, is a change that frees.
        let r = gm(&p, &t, json!({"op": "values.set", "items": [["k2", "2"]]}));
        assert_eq!(r["ok"], true, "{r}");
        fill_to_share(&p, -100);
        let r = gm(&p, &t, json!({"op": "values.delete", "keys": ["k"]}));
        assert_eq!(r["ok"], true, "{r}");
        let r = gm(&p, &t, json!({"op": "values.set", "items": [["k3", "3"]]}));
        let e = r["error"].as_str().unwrap_or_default();
        assert!(e.contains("storage is nearly full"), "{r}");
    }

    /// R12: Chrome counts a `<` as `\u003C`, six bytes. Weighed as `serde_json` writes it, a
    /// value of `<` passed the share five times over, and a change from `a`s to as many `<`s
    /// (no longer, so never measured) filled the storage past its quota.
    #[test]
    fn a_value_change_is_weighed_as_chrome_counts_it() {
        use crate::env::Storage;
        let p = Provider::new(MemoryEnv::new());
        let mut tokens = Vec::new();
        for n in ["A", "B"] {
            let a = script(&p, n, "// @grant GM_setValue\n");
            tokens.push(block_on(key_store::load(&p.env)).unwrap().token(&a, 1));
        }
        fill_to_share(&p, 600_000);
        let value = |c: &str| format!("\"{}\"", c.repeat(250_000));
        for t in &tokens {
            let r = gm(
                &p,
                t,
                json!({"op": "values.set", "items": [["k", value("a")]]}),
            );
            assert_eq!(r["ok"], true, "{r}");
        }
        let limit = crate::scripts::quota::AGENT_LIMIT_BYTES;
        let in_use = || block_on(p.env.bytes_in_use(Area::Local, None)).unwrap();
        for t in &tokens {
            let r = gm(
                &p,
                t,
                json!({"op": "values.set", "items": [["k", value("<")]]}),
            );
            let e = r["error"].as_str().unwrap_or_default();
            assert!(e.contains("storage is nearly full"), "{r}");
        }
        assert!(in_use() <= limit, "{} past the share", in_use() - limit);
    }

    #[test]
    fn values_are_the_proven_scripts_own_and_reach_its_next_registration() {
        let p = Provider::new(MemoryEnv::new());
        let a = script(&p, "A", "// @grant GM_setValue\n// @grant GM_getValue\n");
        let b = script(&p, "B", "// @grant GM_getValue\n");
        let none = script(&p, "N", "// @grant none\n");
        let key = block_on(key_store::load(&p.env)).unwrap();
        let (ta, tb, tn) = (key.token(&a, 1), key.token(&b, 1), key.token(&none, 1));

        let r = gm(&p, &ta, json!({"op": "values.set", "items": [["k", "41"]]}));
        assert_eq!(r["ok"], true, "{r}");
        assert_eq!(
            gm(&p, &ta, json!({"op": "values.get"}))["values"],
            json!({"k": "41"})
        );
        // B, asking with its own token, sees its own (empty) values, whatever else it says.
        let r = gm(&p, &tb, json!({"op": "values.get", "uuid": a, "script": a}));
        assert_eq!(r["values"], json!({}));
        // A script without a value grant is refused, even though its world has the channel;
        // one that only reads (B) may not store or delete either: its review said "reads".
        for (t, op) in [
            (&tn, json!({"op": "values.set", "items": [["k", "1"]]})),
            (&tb, json!({"op": "values.set", "items": [["k", "1"]]})),
            (&tb, json!({"op": "values.delete", "keys": ["k"]})),
        ] {
            let r = gm(&p, t, op);
            assert!(
                r["error"].as_str().unwrap().contains("does not @grant"),
                "{r}"
            );
        }
        assert_eq!(
            block_on(crate::gm::store::load(&p.env, &b)).unwrap(),
            Default::default()
        );
        let r = gm(&p, &tn, json!({"op": "values.set", "items": [["k", "1"]]}));
        assert!(
            r["error"].as_str().unwrap().contains("does not @grant"),
            "{r}"
        );
        assert_eq!(
            block_on(crate::gm::store::load(&p.env, &none)).unwrap(),
            Default::default()
        );
        // A's next page load starts with the value: its registration carries it.
        let code = p.env.registrations.borrow()[&a].js[0].code.clone().unwrap();
        assert!(code.contains(r#"[["k","41"]]"#), "snapshot missing");
        // Over the script's bound: refused with the reason, nothing stored.
        let big = format!("\"{}\"", "x".repeat(crate::gm::values::MAX_SCRIPT_BYTES));
        let r = gm(
            &p,
            &ta,
            json!({"op": "values.set", "items": [["big", big]]}),
        );
        assert!(
            r["error"].as_str().unwrap().contains("over its limit"),
            "{r}"
        );
        assert_eq!(
            gm(&p, &ta, json!({"op": "values.get"}))["values"],
            json!({"k": "41"})
        );
    }

    /// A page keeps running a script turned off after it loaded (Chrome cannot unload it), but
    /// the worker no longer acts for it: no request, tab, notification, menu command or value
    /// change; reading its values and winding down still work. Turned on again, it may again.
    #[test]
    fn a_script_turned_off_no_longer_acts_through_the_worker() {
        let p = Provider::new(MemoryEnv::new());
        let grants = "// @grant GM_xmlhttpRequest\n// @connect api.test\n// @grant GM_setValue\n\
                      // @grant GM_getValue\n// @grant GM_openInTab\n// @grant GM_notification\n\
                      // @grant GM_registerMenuCommand\n";
        let a = script(&p, "A", grants);
        let key = block_on(key_store::load(&p.env)).unwrap();
        // The token of the revision the open page loaded with.
        let ta = key.token(&a, 1);
        assert_eq!(
            gm(&p, &ta, json!({"op": "values.set", "items": [["k", "1"]]}))["ok"],
            true
        );
        let switch = |on: bool| {
            let r = block_on(crate::control::handle(
                &p,
                &json!({"op": "scripts.setEnabled", "uuid": a, "enabled": on}),
            ))
            .value;
            assert_eq!(r["ok"], true, "{r}");
        };
        switch(false);
        let page = Some("https://example.com/page");
        let acting = [
            json!({"op": "values.set", "items": [["k", "2"]]}),
            json!({"op": "xhr", "id": 1, "url": "https://api.test/x"}),
            json!({"op": "tab.open", "url": "https://example.com/new"}),
            json!({"op": "notify", "text": "hi"}),
            json!({"op": "menu", "commands": [["c", "Do it", ""]]}),
        ];
        for req in &acting {
            let r = gm_from(&p, &ta, req.clone(), page);
            assert!(
                r["error"]
                    .as_str()
                    .is_some_and(|e| e.contains("turned off")),
                "{req}: {r}"
            );
        }
        assert!(p.env.fetched.borrow().is_empty(), "nothing was requested");
        assert!(
            p.env.browser_calls.borrow().is_empty(),
            "no tab or notification was created: {:?}",
            p.env.browser_calls.borrow()
        );
        assert_eq!(
            gm(&p, &ta, json!({"op": "values.get"}))["values"],
            json!({"k": "1"}),
            "its values are unchanged, and still readable"
        );
        switch(true);
        let r = gm_from(&p, &ta, acting[1].clone(), page);
        assert_eq!(r["status"], 200, "{r}");
        assert_eq!(gm(&p, &ta, acting[0].clone())["ok"], true);
    }

    /// The worker's fetch runs in the regular profile: a request from a page in an incognito
    /// window is sent without cookies, as `anonymous: true` is, so it carries neither the user's
    /// regular identity to the site nor the answer's cookies back into the regular profile.
    #[test]
    fn a_request_from_an_incognito_window_carries_no_cookies() {
        let p = Provider::new(MemoryEnv::new());
        let a = script(
            &p,
            "X",
            "// @grant GM_xmlhttpRequest\n// @connect api.test\n",
        );
        let key = block_on(key_store::load(&p.env)).unwrap();
        let ta = key.token(&a, 1);
        let ask = |incognito: bool, anonymous: bool| {
            let raw = gm_raw(
                &ta,
                json!({"op": "xhr", "id": 1, "url": "https://api.test/me", "anonymous": anonymous}),
            );
            let sender = Sender {
                url: Some("https://example.com/".into()),
                tab_id: Some(4),
                frame_id: Some(0),
                incognito,
                ..Sender::default()
            };
            let r = answered(block_on(p.user_script_message(|| Some(raw), sender)));
            assert_eq!(r["status"], 200, "{r}");
            p.env.fetched.borrow().last().map(|f| f.anonymous)
        };
        assert_eq!(
            ask(false, false),
            Some(false),
            "a regular window: the site's cookies"
        );
        assert_eq!(ask(true, false), Some(true), "an incognito window: none");
        assert_eq!(ask(false, true), Some(true));
    }

    #[test]
    fn xhr_goes_only_to_connect_hosts_and_self_and_nothing_else_is_sent() {
        let p = Provider::new(MemoryEnv::new());
        let a = script(
            &p,
            "X",
            "// @grant GM_xmlhttpRequest\n// @connect api.test\n// @connect self\n",
        );
        let n = script(&p, "N", "// @grant GM_getValue\n// @connect api.test\n");
        let key = block_on(key_store::load(&p.env)).unwrap();
        let ta = key.token(&a, 1);
        let page = Some("https://example.com/page");
        let req = |url: &str| json!({"op": "xhr", "id": 1, "url": url, "headers": [["X-A", "1"]]});
        let r = gm_from(&p, &ta, req("https://v1.api.test/data"), page);
        assert_eq!(r["status"], 200, "{r}");
        assert_eq!(r["text"], "https://v1.api.test/data");
        assert_eq!(r["responseHeaders"], "x-test: yes\r\n");
        let r = gm_from(&p, &ta, req("https://example.com/own"), page);
        assert_eq!(r["status"], 200, "self: {r}");
        for refused in [
            "https://evil.test/",
            "http://localhost/",
            "file:///etc/passwd",
        ] {
            let r = gm_from(&p, &ta, req(refused), page);
            assert!(r["error"].is_string(), "{refused}: {r}");
        }
        // Without the grant, even a declared host is refused.
        let r = gm_from(&p, &key.token(&n, 1), req("https://api.test/"), page);
        assert!(r["error"]
            .as_str()
            .unwrap()
            .contains("does not @grant GM_xmlhttpRequest"));
        // Exactly the two allowed requests left the browser.
        assert_eq!(
            p.env.fetched_urls(),
            ["https://v1.api.test/data", "https://example.com/own"]
        );
        assert_eq!(
            p.env.fetched.borrow()[0].headers,
            [("X-A".to_owned(), "1".to_owned())]
        );
    }

    /// `GM_download` fetches its file with `GM_xmlhttpRequest`'s request (`gm::download_js`): a
    /// script granted it alone (either spelling) may make that request — a GET without a body,
    /// to its `@connect` hosts — and abort it, nothing more; a refusal by `@connect` is marked
    /// `connect` (the page's `not_whitelisted`), other failures are not.
    #[test]
    fn download_alone_may_get_from_its_connect_hosts_and_nothing_else() {
        let p = Provider::new(MemoryEnv::new());
        let page = Some("https://example.com/page");
        // Stored before the first request (the provider reads the scripts once).
        let scripts: Vec<(&str, String)> = ["GM_download", "GM.download"]
            .into_iter()
            .enumerate()
            .map(|(i, g)| {
                let grants = format!("// @grant {g}\n// @connect api.test\n");
                (g, script(&p, &format!("D{i}"), &grants))
            })
            .collect();
        let n = script(&p, "N", "// @grant GM_getValue\n// @connect api.test\n");
        let key = block_on(key_store::load(&p.env)).unwrap();
        for (grant, a) in &scripts {
            p.env.fetched.borrow_mut().clear();
            let t = key.token(a, 1);
            let r = gm_from(
                &p,
                &t,
                json!({"op": "xhr", "id": 1, "url": "https://api.test/file.bin", "responseType": "blob"}),
                page,
            );
            assert_eq!(r["status"], 200, "{grant}: {r}");
            assert!(r["base64"].is_string(), "{r}");
            let r = gm_from(
                &p,
                &t,
                json!({"op": "xhr", "id": 2, "url": "https://evil.test/x", "responseType": "blob"}),
                page,
            );
            assert_eq!(r["connect"], true, "{r}");
            assert!(r["error"].as_str().unwrap().contains("@connect"), "{r}");
            // Not the @connect list: a scheme it cannot request.
            let r = gm_from(
                &p,
                &t,
                json!({"op": "xhr", "id": 3, "url": "file:///etc/passwd"}),
                page,
            );
            assert_eq!(r["connect"], false, "{r}");
            for post in [
                json!({"op": "xhr", "id": 4, "method": "POST", "url": "https://api.test/up", "data": "x"}),
                json!({"op": "xhr", "id": 5, "method": "PUT", "url": "https://api.test/up"}),
                json!({"op": "xhr", "id": 6, "url": "https://api.test/up", "data": "x"}),
            ] {
                let r = gm_from(&p, &t, post.clone(), page);
                assert!(
                    r["error"]
                        .as_str()
                        .unwrap()
                        .contains("may only make GET requests"),
                    "{post}: {r}"
                );
            }
            let r = gm_from(&p, &t, json!({"op": "xhr.abort", "id": 9}), page);
            assert_eq!(r["ok"], true, "{r}");
            assert_eq!(
                p.env.fetched_urls(),
                ["https://api.test/file.bin"],
                "{grant}"
            );
        }
        // Neither grant: nothing.
        let r = gm_from(
            &p,
            &key.token(&n, 1),
            json!({"op": "xhr", "id": 1, "url": "https://api.test/file.bin"}),
            page,
        );
        assert!(
            r["error"]
                .as_str()
                .unwrap()
                .contains("does not @grant GM_xmlhttpRequest"),
            "{r}"
        );
        let r = gm_from(
            &p,
            &key.token(&n, 1),
            json!({"op": "xhr.abort", "id": 1}),
            page,
        );
        assert!(r["error"].is_string(), "{r}");
    }

    #[test]
    fn a_redirect_is_followed_only_where_connect_allows_and_nothing_else_is_requested() {
        let p = Provider::new(MemoryEnv::new());
        let a = script(
            &p,
            "R",
            "// @grant GM_xmlhttpRequest\n// @connect api.test\n",
        );
        let t = block_on(key_store::load(&p.env)).unwrap().token(&a, 1);
        let redirect = |status: u16, to: &str| {
            Ok(crate::env::HttpResponse {
                status,
                status_text: String::new(),
                final_url: String::new(),
                headers: Vec::new(),
                body: Vec::new(),
                location: Some(to.into()),
            })
        };
        {
            let mut answers = p.env.http_answers.borrow_mut();
            answers.insert(
                "https://api.test/in".into(),
                redirect(302, "https://v2.api.test/there"),
            );
            answers.insert(
                "https://api.test/out".into(),
                redirect(307, "https://bank.test/transfer"),
            );
            answers.insert(
                "https://api.test/loop".into(),
                redirect(302, "https://api.test/loop"),
            );
        }
        let page = Some("https://example.com/page");
        let post =
            |url: &str| json!({"op": "xhr", "id": 1, "method": "POST", "url": url, "data": "x"});
        let sent = || -> Vec<(String, String)> {
            p.env
                .fetched
                .borrow_mut()
                .drain(..)
                .map(|r| (r.method, r.url))
                .collect()
        };
        // Allowed: followed, a POST's 302 as a GET, to the response of where it led.
        let r = gm_from(&p, &t, post("https://api.test/in"), page);
        assert_eq!(
            (r["status"].as_u64(), r["finalUrl"].as_str()),
            (Some(200), Some("https://v2.api.test/there")),
            "{r}"
        );
        let hops = sent();
        assert_eq!(
            hops,
            [
                ("POST".into(), "https://api.test/in".into()),
                ("GET".into(), "https://v2.api.test/there".into())
            ]
        );
        // Off the list: refused, and bank.test was never asked.
        let r = gm_from(&p, &t, post("https://api.test/out"), page);
        let e = r["error"].as_str().unwrap();
        assert!(
            e.contains("redirected the request to https://bank.test/transfer")
                && e.contains("not followed"),
            "{r}"
        );
        assert_eq!(r["refused"], true);
        assert_eq!(sent(), [("POST".into(), "https://api.test/out".into())]);
        // A loop ends at the bound, having made the first request and twenty redirects.
        let r = gm_from(&p, &t, post("https://api.test/loop"), page);
        assert!(
            r["error"]
                .as_str()
                .unwrap()
                .contains("more than 20 redirects"),
            "{r}"
        );
        assert_eq!(sent().len(), 21);
        // The flight ended each time: the same number can be used again.
        assert_eq!(
            gm_from(&p, &t, post("https://api.test/in"), page)["status"],
            200
        );
    }

    #[test]
    fn a_binary_body_goes_out_as_its_bytes_with_its_type_unless_the_script_set_one() {
        use crate::gm::message::Body;
        let p = Provider::new(MemoryEnv::new());
        let a = script(
            &p,
            "B",
            "// @grant GM_xmlhttpRequest\n// @connect api.test\n",
        );
        let t = block_on(key_store::load(&p.env)).unwrap().token(&a, 1);
        let send = |headers: Value| {
            gm(
                &p,
                &t,
                json!({"op": "xhr", "id": 1, "method": "POST", "url": "https://api.test/",
                "binary": true, "data": "AAH/", "dataType": "image/x-t", "headers": headers}),
            )
        };
        assert_eq!(send(json!([]))["status"], 200);
        assert_eq!(send(json!([["content-TYPE", "own"]]))["status"], 200);
        let f = p.env.fetched.borrow();
        assert_eq!(f[0].body, Some(Body::Bytes(vec![0, 1, 255])));
        assert_eq!(
            f[0].headers,
            [("Content-Type".to_owned(), "image/x-t".to_owned())]
        );
        assert_eq!(
            f[1].headers,
            [("content-TYPE".to_owned(), "own".to_owned())]
        );
    }

    /// Answers of unknown length are counted as their bytes arrive: a script's large answers
    /// arriving at once are stopped past its budget, the script told why in `onerror`, and the
    /// others arrive whole; many small answers at once all arrive; every byte is given back at
    /// the end. Answers that say their length take turns for the budget instead: all arrive
    /// whole, never more than the budget held at once.
    #[test]
    fn answers_arriving_at_once_are_stopped_past_the_scripts_byte_budget() {
        use crate::gm::xhr_flight::ANSWER_BYTES_PER_SCRIPT;
        let p = Provider::new(MemoryEnv::new());
        let a = script(
            &p,
            "A",
            "// @grant GM_xmlhttpRequest\n// @connect api.test\n",
        );
        let t = block_on(key_store::load(&p.env)).unwrap().token(&a, 1);
        let body = |n: usize| {
            Ok(crate::env::HttpResponse {
                status: 200,
                status_text: "OK".into(),
                final_url: "https://api.test/".into(),
                headers: Vec::new(),
                body: vec![b'a'; n],
                location: None,
            })
        };
        let big = crate::gm::xhr::MAX_RESPONSE_BYTES;
        for i in 0..4 {
            p.env
                .http_answers
                .borrow_mut()
                .insert(format!("https://api.test/big{i}"), body(big));
        }
        for i in 0..16 {
            p.env
                .http_answers
                .borrow_mut()
                .insert(format!("https://api.test/small{i}"), body(600 * 1024));
        }
        p.env.fetch_chunk.set(256 * 1024);
        let page = || Sender {
            url: Some("https://example.com/".into()),
            tab_id: Some(1),
            frame_id: Some(0),
            document_id: Some("DOC".into()),
            ..Sender::default()
        };
        let send = |what: &str, n: usize, ty: &str| {
            let p = &p;
            let t = &t;
            futures::future::join_all((0..n).map(move |i| {
                let raw = gm_raw(
                    t,
                    json!({"op": "xhr", "id": i + 1, "url": format!("https://api.test/{what}{i}"),
                           "responseType": if i % 2 == 0 { ty } else { "text" }}),
                );
                async move { answered(p.user_script_message(|| Some(raw), page()).await) }
            }))
        };
        p.env.fetch_unsized.set(true);
        let got = block_on(send("big", 4, "arraybuffer"));
        let whole = |v: &Value| {
            v["text"].as_str().map(str::len) == Some(big)
                || v["base64"].as_str().map(str::len) == Some(big.div_ceil(3) * 4)
        };
        let stopped: Vec<&Value> = got.iter().filter(|v| v["tooLarge"] == true).collect();
        assert_eq!(
            got.iter().filter(|v| whole(v)).count() + stopped.len(),
            4,
            "{:?}",
            got.iter().map(|v| v.get("error")).collect::<Vec<_>>()
        );
        // Two fit in 10 MiB; the others were stopped while arriving, with the reason.
        assert_eq!(stopped.len(), 2);
        for v in stopped {
            let e = v["error"].as_str().unwrap();
            assert!(
                e.starts_with("GM_xmlhttpRequest: the answer was stopped after ")
                    && e.contains(&format!(
                        "may hold at most {} MiB",
                        ANSWER_BYTES_PER_SCRIPT >> 20
                    )),
                "{e}"
            );
        }
        assert_eq!(p.gm_flights.borrow().held(&a), (0, 0));
        assert!(p.gm_flights.borrow().is_empty());
        // The same with their lengths known: each is counted whole before it is read, two fit,
        // the others wait for room; all arrive whole.
        p.env.fetch_unsized.set(false);
        p.gm_flights.borrow_mut().peak = 0;
        let got = block_on(send("big", 4, "arraybuffer"));
        assert!(
            got.iter().all(whole),
            "{:?}",
            got.iter().map(|v| v.get("error")).collect::<Vec<_>>()
        );
        let peak = p.gm_flights.borrow().peak;
        assert_eq!(peak, 2 * big as u64, "held at most two at once");
        assert_eq!(p.gm_flights.borrow().held(&a), (0, 0));
        // 16 answers of 600 KiB at once (9.4 MiB): all arrive.
        let got = block_on(send("small", 16, "blob"));
        for v in &got {
            assert!(
                v["text"].as_str().map(str::len) == Some(600 * 1024)
                    || v["base64"].as_str().map(str::len) == Some(600 * 1024 / 3 * 4),
                "{:?}",
                v.get("error")
            );
        }
        assert_eq!(p.gm_flights.borrow().held(&a), (0, 0));
    }

    #[test]
    fn abort_cancels_the_fetch_of_that_scripts_request_in_that_page_only() {
        let p = Provider::new(MemoryEnv::new());
        let grants = "// @grant GM_xmlhttpRequest\n// @connect api.test\n";
        let (a, b) = (script(&p, "A", grants), script(&p, "B", grants));
        let key = block_on(key_store::load(&p.env)).unwrap();
        let slow = "https://api.test/slow";
        p.env.http_hold.borrow_mut().insert(slow.into());
        let msg = |token: &str, fields: Value| {
            let mut m = fields.as_object().cloned().unwrap();
            m.insert("lumo".into(), token.into());
            m.insert("v".into(), 1.into());
            m.insert("kind".into(), "gm".into());
            Value::Object(m).to_string()
        };
        let page = |frame: i64| Sender {
            url: Some("https://example.com/".into()),
            frame_id: Some(frame),
            tab_id: Some(1),
            document_id: Some("DOC".into()),
            ..Sender::default()
        };
        let (ta, tb) = (key.token(&a, 1), key.token(&b, 1));
        let xhr = json!({"op": "xhr", "id": 1, "url": slow});
        let abort = json!({"op": "xhr.abort", "id": 1});
        let answered = |r: &Received| match r {
            Received::Answered(v) => v.clone(),
            other => panic!("{other:?}"),
        };
        block_on(async {
            let a_req = p.user_script_message(|| Some(msg(&ta, xhr.clone())), page(0));
            let b_req = p.user_script_message(|| Some(msg(&tb, xhr.clone())), page(0));
            futures::pin_mut!(a_req, b_req);
            assert!(futures::poll!(a_req.as_mut()).is_pending());
            assert!(futures::poll!(b_req.as_mut()).is_pending());
            // The same number from another script, or from another frame of A: nothing.
            let r = p
                .user_script_message(
                    || Some(msg(&tb, json!({"op": "xhr.abort", "id": 2}))),
                    page(0),
                )
                .await;
            assert_eq!(answered(&r)["aborted"], false);
            let r = p
                .user_script_message(|| Some(msg(&ta, abort.clone())), page(3))
                .await;
            assert_eq!(answered(&r)["aborted"], false);
            assert!(futures::poll!(a_req.as_mut()).is_pending());
            assert_eq!(p.env.fetch_dropped.get(), 0);
            // Progress: A's page sees its request's report (not B's), then holds a watch.
            let prog = |seen: u64| json!({"op": "xhr.progress", "id": 1, "seen": seen});
            let r = p
                .user_script_message(|| Some(msg(&ta, prog(0))), page(0))
                .await;
            assert_eq!(answered(&r), json!({"loaded": 3, "total": 10, "seq": 1}));
            let r = p
                .user_script_message(|| Some(msg(&ta, prog(0))), page(3))
                .await;
            assert_eq!(answered(&r), json!({"none": true}));
            let watch = p.user_script_message(|| Some(msg(&ta, prog(1))), page(0));
            futures::pin_mut!(watch);
            assert!(futures::poll!(watch.as_mut()).is_pending());
            // A's own abort from its page: its fetch is given up, B's goes on.
            let r = p
                .user_script_message(|| Some(msg(&ta, abort.clone())), page(0))
                .await;
            assert_eq!(answered(&r)["aborted"], true);
            let done = a_req.await;
            assert_eq!(answered(&done), json!({"aborted": true}));
            assert_eq!(p.env.fetch_dropped.get(), 1);
            assert_eq!(answered(&watch.await), json!({"none": true}));
            assert!(futures::poll!(b_req.as_mut()).is_pending());
            assert_eq!(p.gm_flights.borrow().len(), 1);
            // A number still in flight cannot be reused.
            let r = p
                .user_script_message(|| Some(msg(&tb, xhr.clone())), page(0))
                .await;
            assert!(answered(&r)["error"]
                .as_str()
                .unwrap()
                .contains("already in flight"));
        });
    }

    /// Past its script's places a request waits, unsent, and goes when one frees (a browser
    /// queues a page's requests past its connections; refusing the 17th broke scripts that fire
    /// a batch). A waiting request can be aborted, and its wait counts in its `timeout`: out of
    /// time, it is answered as timed out and was never sent.
    #[test]
    fn a_request_past_its_places_waits_unsent_then_goes() {
        use crate::gm::xhr_flight::MAX_XHR_IN_FLIGHT;
        let p = Provider::new(MemoryEnv::new());
        let grants = "// @grant GM_xmlhttpRequest\n// @connect api.test\n";
        let a = script(&p, "A", grants);
        let key = block_on(key_store::load(&p.env)).unwrap();
        let t = key.token(&a, 1);
        let page = || Sender {
            url: Some("https://example.com/".into()),
            frame_id: Some(0),
            tab_id: Some(1),
            document_id: Some("DOC".into()),
            ..Sender::default()
        };
        let xhr = |id: usize, url: &str, timeout: u64| {
            let m = gm_raw(
                &t,
                json!({"op": "xhr", "id": id, "url": url, "timeout": timeout}),
            );
            p.user_script_message(move || Some(m), page())
        };
        for i in 0..MAX_XHR_IN_FLIGHT {
            p.env
                .http_hold
                .borrow_mut()
                .insert(format!("https://api.test/slow{i}"));
        }
        let abort = |id: usize| {
            let m = gm_raw(&t, json!({"op": "xhr.abort", "id": id}));
            p.user_script_message(move || Some(m), page())
        };
        block_on(async {
            let mut held: Vec<_> = (0..MAX_XHR_IN_FLIGHT)
                .map(|i| Box::pin(xhr(i + 1, &format!("https://api.test/slow{i}"), 0)))
                .collect();
            for r in &mut held {
                assert!(futures::poll!(r.as_mut()).is_pending());
            }
            let next = xhr(100, "https://api.test/next", 0);
            let gone = xhr(101, "https://api.test/gone", 0);
            futures::pin_mut!(next, gone);
            assert!(futures::poll!(next.as_mut()).is_pending());
            assert!(futures::poll!(gone.as_mut()).is_pending());
            let sent = |url: &str| p.env.fetched_urls().iter().any(|u| u == url);
            assert!(!sent("https://api.test/next"), "sent past its places");
            // Aborted while waiting: told so, never sent.
            assert_eq!(answered(abort(101).await)["aborted"], true);
            assert_eq!(answered(gone.await), json!({"aborted": true}));
            // A place frees: the waiting request is sent and answered.
            assert_eq!(answered(abort(1).await)["aborted"], true);
            let got = answered(next.await);
            assert_eq!(got["text"], "https://api.test/next", "{got}");
            assert!(!sent("https://api.test/gone"));
            // Its places full again; out of time while waiting: timed out, never sent.
            let fill = xhr(102, "https://api.test/slow0", 0);
            futures::pin_mut!(fill);
            assert!(futures::poll!(fill.as_mut()).is_pending());
            p.env.timers_fire.set(true);
            let timed = answered(xhr(103, "https://api.test/timed", 500).await);
            assert_eq!(timed["timeout"], true, "{timed}");
            assert!(timed["error"]
                .as_str()
                .unwrap()
                .contains("waited for its turn"));
            assert!(!sent("https://api.test/timed"));
            assert!(futures::poll!(held[1].as_mut()).is_pending());
        });
    }

    #[test]
    fn a_change_wakes_the_scripts_other_pages_not_the_one_that_made_it() {
        let p = Provider::new(MemoryEnv::new());
        let a = script(
            &p,
            "W",
            "// @grant GM_setValue\n// @grant GM_addValueChangeListener\n",
        );
        let key = block_on(key_store::load(&p.env)).unwrap();
        let t = key.token(&a, 1);
        let msg = |fields: Value| {
            let mut m = fields.as_object().cloned().unwrap();
            m.insert("lumo".into(), t.clone().into());
            m.insert("v".into(), 1.into());
            m.insert("kind".into(), "gm".into());
            Value::Object(m).to_string()
        };
        let tab = |id: i64| Sender {
            url: Some("https://example.com/".into()),
            frame_id: Some(0),
            tab_id: Some(id),
            ..Sender::default()
        };
        // A first wait (no cursor) is told to read the values whole, with the cursor to wait
        // with after.
        let first =
            block_on(p.user_script_message(|| Some(msg(json!({"op": "values.wait"}))), tab(1)));
        let Received::Answered(first) = first else {
            panic!("{first:?}")
        };
        assert_eq!(first["resync"], true, "{first}");
        let cursor = first["cursor"].clone();
        let (wait_raw, set_raw) = (
            msg(json!({"op": "values.wait", "since": cursor})),
            msg(json!({"op": "values.set", "items": [["k", "1"]]})),
        );
        let (other, own, set) = block_on(async {
            futures::join!(
                p.user_script_message(|| Some(wait_raw.clone()), tab(1)),
                async {
                    // The writer's own tab waits too: it is not woken by its own change.
                    let own = p.user_script_message(|| Some(wait_raw.clone()), tab(2));
                    futures::pin_mut!(own);
                    let polled = futures::poll!(own.as_mut());
                    assert!(polled.is_pending());
                    polled
                },
                p.user_script_message(|| Some(set_raw.clone()), tab(2)),
            )
        });
        let Received::Answered(v) = other else {
            panic!("{other:?}")
        };
        // Numbered: the page orders it against its own changes.
        let n = v["cursor"].as_u64().unwrap();
        assert!(n > cursor.as_u64().unwrap());
        assert_eq!(v["changes"], json!([["k", null, "1", n]]));
        assert!(
            matches!(set, Received::Answered(ref r) if r["n"] == n),
            "{set:?}"
        );
        assert!(own.is_pending());
        assert!(
            matches!(set, Received::Answered(ref r) if r["ok"] == true),
            "{set:?}"
        );
        assert_eq!(p.gm_waiters.borrow().get(&a).map(Vec::len), Some(1));
    }

    #[test]
    fn a_change_made_before_a_page_asks_again_is_answered_at_once() {
        let p = Provider::new(MemoryEnv::new());
        let a = script(
            &p,
            "W",
            "// @grant GM_setValue\n// @grant GM_addValueChangeListener\n",
        );
        let t = block_on(key_store::load(&p.env)).unwrap().token(&a, 1);
        let ask = |fields: Value, tab: i64| {
            let mut m = fields.as_object().cloned().unwrap();
            m.insert("lumo".into(), t.clone().into());
            m.insert("v".into(), 1.into());
            m.insert("kind".into(), "gm".into());
            let raw = Value::Object(m).to_string();
            let from = Sender {
                url: Some("https://example.com/".into()),
                frame_id: Some(0),
                tab_id: Some(tab),
                ..Sender::default()
            };
            match block_on(p.user_script_message(|| Some(raw.clone()), from)) {
                Received::Answered(v) => v,
                other => panic!("{other:?}"),
            }
        };
        // Tab 1 reads its values and the cursor they are at.
        let read = ask(json!({"op": "values.get"}), 1);
        let at = read["cursor"].as_u64().expect("a number");
        // Tab 2, then tab 1 itself, change values while tab 1 holds no wait.
        let n1 = ask(json!({"op": "values.set", "items": [["k", "1"]]}), 2)["n"].clone();
        let mine = ask(json!({"op": "values.set", "items": [["mine", "2"]]}), 1)["n"].clone();
        let n3 = ask(json!({"op": "values.delete", "keys": ["k"]}), 2)["n"].clone();
        assert_eq!(
            (n1, mine, n3.clone()),
            (json!(at + 1), json!(at + 2), json!(at + 3))
        );
        let missed = ask(json!({"op": "values.wait", "since": at}), 1);
        assert_eq!(
            missed["changes"],
            json!([["k", null, "1", at + 1], ["k", "1", null, at + 3]]),
            "tab 1 hears tab 2's changes, not its own: {missed}"
        );
        let now = missed["cursor"].clone();
        assert_eq!(now, n3);
        assert_eq!(ask(json!({"op": "values.get"}), 3)["cursor"], now);
        // A cursor it was never given, or from another worker, is a resync.
        for bad in [
            json!(at - 1),
            json!(at + 99),
            json!("12345"),
            json!(-1),
            json!(null),
        ] {
            let r = ask(json!({"op": "values.wait", "since": bad}), 1);
            assert_eq!(r["resync"], true, "{bad}: {r}");
            assert_eq!(r["cursor"], now);
        }
        // Values replaced by a restore: the next wait reads them whole.
        p.values_replaced(&[a.as_str()]);
        let r = ask(json!({"op": "values.wait", "since": now}), 1);
        assert_eq!(r["resync"], true, "{r}");
        assert_ne!(r["cursor"], now);
    }
}
