//! The worker's socket to the local bridge: a browser `WebSocket` carrying the frames of a core
//! `bridge::Connection` (dial side). The core decides everything — the hello, its ack, pings,
//! deadlines, where to dial (`bridge::dialer::dial_url`), whether and when to reconnect
//! (`dialer::after_close`), and what each `call_tool` answers (`Provider::bridge_call`); this
//! file moves text between them and keeps the one link.
//!
//! Chrome keeps a worker alive while its WebSocket exchanges messages, so a ping goes out every
//! `PING_INTERVAL_MS`. A recycled worker dials again at start if the user authorized a token
//! (`Provider::bridge_auth`).

use super::{api, provider};
use crate::bridge::dialer::{self, Retry, PING_INTERVAL_MS};
use crate::bridge::{types, Auth, CloseReason, Connection, Event, WireError, HELLO_TIMEOUT_MS};
use crate::provider::{BridgeAnswer, BridgeAuth};
use gloo_timers::future::TimeoutFuture;
use serde_json::{json, Map, Value};
use std::cell::{Cell, RefCell};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::spawn_local;
use web_sys::{CloseEvent, MessageEvent, WebSocket};

struct Link {
    /// Which dial this is: callbacks and timers of an older link find a different number.
    gen: u64,
    ws: WebSocket,
    conn: Connection,
    session: Option<u64>,
    /// The authorization dialled, for stamping it on the first link (`bridge_consented`).
    token: String,
    _on_open: Closure<dyn FnMut(web_sys::Event)>,
    _on_message: Closure<dyn FnMut(MessageEvent)>,
    _on_close: Closure<dyn FnMut(CloseEvent)>,
}

thread_local! {
    static LINK: RefCell<Option<Link>> = const { RefCell::new(None) };
    static GEN: Cell<u64> = const { Cell::new(0) };
    /// Closes in a row without a completed hello (the backoff step).
    static ATTEMPT: Cell<u32> = const { Cell::new(0) };
}

fn now() -> u64 {
    let ms = js_sys::Date::now();
    if ms.is_finite() && ms > 0.0 {
        // Milliseconds since 1970 fit a u64 for the next 500 million years.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let v = ms as u64;
        v
    } else {
        0
    }
}

/// At worker start: dial if the user authorized a bridge token.
pub fn resume() {
    spawn_local(async {
        if LINK.with(|l| l.borrow().is_some()) {
            return;
        }
        if let Some(auth) = provider().bridge_auth().await {
            dial(&auth);
        }
    });
}

/// After the user's click on the connect page: replace any link with a fresh dial.
pub fn dial_authorized() {
    close(1000, "replaced by a new connection from the connect page");
    ATTEMPT.with(|a| a.set(0));
    resume();
}

/// Closes the link from this end with `code` (4002: the user's Disconnect).
pub fn close(code: u16, reason: &str) {
    let gen = LINK.with(|l| {
        l.borrow_mut().as_mut().map(|link| {
            link.conn.close(code, reason);
            link.gen
        })
    });
    match gen {
        Some(g) => pump(g),
        // Not connected (e.g. waiting to retry): the retry timer finds no authorization.
        None => provider().bridge_closed(None, false),
    }
}

/// Tells the bridge whether writes are on (its tool list follows), if the link is open.
pub fn tools(writes: bool) {
    let gen = LINK.with(|l| {
        l.borrow_mut().as_mut().map(|link| {
            link.conn
                .notify(types::TOOLS, crate::bridge::tools_payload(writes));
            link.gen
        })
    });
    if let Some(g) = gen {
        pump(g);
    }
}

fn dial(auth: &BridgeAuth) {
    let p = provider();
    let url = match dialer::dial_url(&auth.host, u64::from(auth.port), auth.allow_remote) {
        Ok(u) => u,
        Err(e) => return p.bridge_closed(Some(e.to_string()), false),
    };
    p.bridge_dialing(auth);
    let gen = GEN.with(|g| {
        g.set(g.get().wrapping_add(1));
        g.get()
    });
    let ws = match WebSocket::new(&url) {
        Ok(ws) => ws,
        Err(_) => return closed(gen, &CloseReason::Disconnected),
    };
    let mut hello = Map::new();
    hello.insert("extVersion".into(), json!(env!("CARGO_PKG_VERSION")));
    hello.insert("label".into(), json!("Lumo Userscripts"));
    // The token is never sent: the bridge proves it holds it first (`trust::proof`). Two
    // random UUIDs: 244 random bits for this socket's nonce.
    let proven = Auth {
        token: auth.token.clone(),
        nonce: format!("{}-{}", api::random_uuid(), api::random_uuid()),
        port: auth.port,
    };
    let conn = Connection::dial(
        types::HELLO,
        hello,
        proven,
        env!("CARGO_PKG_VERSION"),
        now(),
        HELLO_TIMEOUT_MS,
    );
    let on_open = Closure::<dyn FnMut(web_sys::Event)>::new(move |_| pump(gen));
    let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |e: MessageEvent| {
        let data = e.data();
        with_conn(gen, |c| match data.dyn_ref::<js_sys::JsString>() {
            // Chrome delivers a WebSocket message of any size, and until the bridge has proven
            // the token it comes from whatever listens on the port: a text over the core's
            // bound is refused by its length, never copied into the wasm (whose memory does not
            // shrink). Its UTF-8 form is never shorter than its UTF-16 length.
            Some(s) if usize::try_from(s.length()).unwrap_or(usize::MAX) > c.max_frame_len() => {
                c.handle_too_large(usize::try_from(s.length()).unwrap_or(usize::MAX));
            }
            Some(_) => c.handle_text(&data.as_string().unwrap_or_default()),
            // Text frames only; a binary frame is malformed for the wire.
            None => c.handle_text("\u{0}"),
        });
        pump(gen);
    });
    let on_close = Closure::<dyn FnMut(CloseEvent)>::new(move |e: CloseEvent| {
        // The bridge's close code decides what comes next (`dialer::after_close`); 1005 and
        // 1006 say no close frame came (a lost transport).
        let (code, reason) = (e.code(), e.reason());
        with_conn(gen, |c| match code {
            1005 | 1006 => c.handle_disconnect(),
            _ => c.handle_close(code, &reason),
        });
        pump(gen);
    });
    ws.set_onopen(Some(on_open.as_ref().unchecked_ref()));
    ws.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    ws.set_onclose(Some(on_close.as_ref().unchecked_ref()));
    LINK.with(|l| {
        *l.borrow_mut() = Some(Link {
            gen,
            ws,
            conn,
            session: None,
            token: auth.token.clone(),
            _on_open: on_open,
            _on_message: on_message,
            _on_close: on_close,
        })
    });
    spawn_local(ticks(gen));
}

fn with_conn(gen: u64, f: impl FnOnce(&mut Connection)) {
    LINK.with(|l| {
        if let Some(link) = l.borrow_mut().as_mut().filter(|k| k.gen == gen) {
            f(&mut link.conn);
        }
    });
}

/// The hello deadline, request timeouts and the keep-alive ping, on the core's schedule.
async fn ticks(gen: u64) {
    let mut next_ping = now().saturating_add(PING_INTERVAL_MS);
    loop {
        let Some(deadline) = LINK.with(|l| {
            l.borrow()
                .as_ref()
                .filter(|k| k.gen == gen)
                .map(|k| k.conn.poll_timeout().unwrap_or(u64::MAX).min(next_ping))
        }) else {
            return;
        };
        let wait = deadline.saturating_sub(now()).clamp(10, PING_INTERVAL_MS);
        TimeoutFuture::new(u32::try_from(wait).unwrap_or(1000)).await;
        let t = now();
        with_conn(gen, |c| {
            c.handle_timeout(t);
            if t >= next_ping && c.is_open() {
                c.ping();
            }
        });
        if t >= next_ping {
            next_ping = t.saturating_add(PING_INTERVAL_MS);
        }
        pump(gen);
    }
}

/// Sends what the core queued and acts on its events; once the connection is closed, closes the
/// socket and asks the core whether to dial again.
fn pump(gen: u64) {
    let mut events = Vec::new();
    let mut finished = None;
    LINK.with(|l| {
        let mut l = l.borrow_mut();
        let Some(link) = l.as_mut().filter(|k| k.gen == gen) else {
            return;
        };
        // Frames wait in the core until the socket is open (the hello is the first).
        if link.ws.ready_state() == WebSocket::OPEN {
            while let Some(text) = link.conn.poll_transmit() {
                let _ = link.ws.send_with_str(&text);
            }
        }
        while let Some(e) = link.conn.poll_event() {
            events.push(e);
        }
        if link.conn.is_closed() {
            finished = l.take();
        }
    });
    for e in events {
        on_event(gen, e);
    }
    if let Some(link) = finished {
        let reason = link
            .conn
            .close_reason()
            .cloned()
            .unwrap_or(CloseReason::Disconnected);
        // Only codes 1000 and 3000–4999 may be sent; the reason is at most 123 bytes.
        let code = reason.code();
        if code == 1000 || (3000..5000).contains(&code) {
            let text = crate::text::ellipsize(&reason.to_string(), 100);
            let _ = link.ws.close_with_code_and_reason(code, &text);
        } else {
            let _ = link.ws.close();
        }
        link.ws.set_onopen(None);
        link.ws.set_onmessage(None);
        link.ws.set_onclose(None);
        drop_later(link);
        closed(gen, &reason);
    }
}

fn on_event(gen: u64, e: Event) {
    match e {
        Event::Ready(ack) => {
            let readonly = ack.result.get("readonly") == Some(&Value::Bool(true));
            let session = provider().bridge_opened(readonly, &ack.server_version);
            ATTEMPT.with(|a| a.set(0));
            let token = LINK.with(|l| {
                l.borrow_mut()
                    .as_mut()
                    .filter(|k| k.gen == gen)
                    .map(|link| {
                        link.session = Some(session);
                        link.token.clone()
                    })
            });
            // The bridge lists the write tools only while writes are on. Read twice: the first
            // may wait for storage while the user flips the switch, whose own notify must not be
            // overtaken by the older value; the second is the cache as it is now.
            spawn_local(async move {
                if let Some(token) = token {
                    provider().bridge_consented(&token, readonly).await;
                }
                let _ = provider().policy().await;
                let policy = provider().policy().await;
                // An authorization from before agent access went off (stored, dialled at the
                // worker's start): the link goes as on the user's Disconnect.
                if !policy.endpoint_enabled {
                    close(
                        crate::bridge::dialer::USER_DISCONNECT,
                        crate::bridge_ops::BRIDGE_ACCESS_OFF,
                    );
                    return;
                }
                let writes = provider().bridge_lists_writes(policy.writes_enabled);
                with_conn(gen, |c| {
                    c.notify(types::TOOLS, crate::bridge::tools_payload(writes))
                });
                pump(gen);
            });
        }
        Event::Request { id, kind, payload } if kind == types::CALL_TOOL => {
            let session = link_session(gen);
            let Some(session) = session else { return };
            // Each call is its own task: a write waiting for review holds up nothing else.
            spawn_local(async move {
                let answer = provider().bridge_call(session, id, &payload).await;
                match answer {
                    BridgeAnswer::Reply(outcome) => with_conn(gen, |c| c.respond(id, outcome)),
                    BridgeAnswer::ReplyAndClose(r) => with_conn(gen, |c| {
                        c.respond(id, Ok(r));
                        c.close(
                            dialer::USER_DISCONNECT,
                            "agent access switched off by the user",
                        );
                    }),
                }
                pump(gen);
                // As after every interaction: a write's "synced" flag is stored after its reply.
                super::toggle_watch::ensure_registry().await;
            });
        }
        Event::Request { id, kind, .. } => with_conn(gen, |c| {
            let e = WireError::new(
                "UNKNOWN_TYPE",
                format!(
                    "the extension does not answer {}",
                    crate::text::ellipsize(&kind, 40)
                ),
            );
            c.respond(id, Err(e));
        }),
        Event::Notify { kind, payload } if kind == types::CANCEL => {
            if let Some(session) = link_session(gen) {
                provider().bridge_cancel(session, &payload);
            }
        }
        // The extension sends no requests of its own after the hello.
        Event::Hello(_) | Event::Notify { .. } | Event::Response { .. } | Event::Failed { .. } => {}
    }
}

/// The core's session of link `gen`, while that link is the current one and open.
fn link_session(gen: u64) -> Option<u64> {
    LINK.with(|l| {
        l.borrow()
            .as_ref()
            .filter(|k| k.gen == gen)
            .and_then(|k| k.session)
    })
}

/// The link ended: tell the core, then reconnect or stop as it decides.
fn closed(gen: u64, reason: &CloseReason) {
    let attempt = ATTEMPT.with(|a| {
        let n = a.get();
        a.set(n.saturating_add(1));
        n
    });
    let retry = dialer::after_close(reason, attempt);
    let p = provider();
    p.bridge_closed(Some(reason.to_string()), matches!(retry, Retry::After(_)));
    api::console_warn(&format!("lumo-userscripts: bridge link closed: {reason}"));
    match retry {
        Retry::Stop { forget } => {
            if forget {
                spawn_local(async { provider().forget_bridge().await });
            }
        }
        Retry::After(ms) => spawn_local(async move {
            TimeoutFuture::new(u32::try_from(ms).unwrap_or(30_000)).await;
            // A newer dial (a click on the connect page) supersedes this retry.
            if GEN.with(Cell::get) == gen {
                resume();
            }
        }),
    }
}

/// A closure must not be dropped while it runs (we may be inside its own callback).
fn drop_later(link: Link) {
    let holder = RefCell::new(Some(link));
    spawn_local(async move {
        holder.borrow_mut().take();
    });
}
