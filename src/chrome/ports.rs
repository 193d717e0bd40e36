//! `lumo:mcp` ports: accepts or refuses a new port, attaches its listeners synchronously, feeds
//! messages to the core session and posts what the core answers. The `Port` objects live here,
//! keyed by the core's session id; everything decided lives in the core.

use super::api::{self, Port};
use super::{json, provider, string_of};
use crate::mcp::server::Outcome;
use crate::session::{self, Authorized, Buffered, Step};
use js_sys::Function;
use serde_json::Value;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::spawn_local;

struct OpenPort {
    port: Port,
    // Kept alive as long as the port is open; dropped after it closes (never inside its own call).
    _on_message: Closure<dyn FnMut(JsValue)>,
    _on_disconnect: Closure<dyn FnMut(JsValue)>,
}

thread_local! {
    static PORTS: RefCell<HashMap<u64, OpenPort>> = RefCell::new(HashMap::new());
}

/// `chrome.runtime.onConnectExternal` listener.
pub fn on_connect_external(port: Port) {
    let name = port.name().as_string().unwrap_or_default();
    let sender_id = string_of(&port.sender(), api::Props::id);
    let caller = match session::accept(&name, sender_id.as_deref()) {
        Ok(c) => c,
        Err(reject) => {
            api::console_warn(&format!(
                "lumo-userscripts: refused a port: {}",
                reject.reason()
            ));
            let _ = port.disconnect();
            return;
        }
    };
    let p = provider();
    if !p.admits_port(&caller) {
        // Neither read nor answered: its caller already holds as many ports waiting for, or
        // refused, authorization as any host needs.
        let _ = port.disconnect();
        return;
    }
    let session = p.open_session(caller.clone());
    let id = session.id;

    let on_message = Closure::<dyn FnMut(JsValue)>::new(move |msg: JsValue| {
        inbound(id, json::text_bounded(&msg, session::MAX_MESSAGE_BYTES))
    });
    let on_disconnect = Closure::<dyn FnMut(JsValue)>::new(move |_| forget(id));
    port.on_message()
        .add_listener(on_message.as_ref().unchecked_ref::<Function>());
    port.on_disconnect()
        .add_listener(on_disconnect.as_ref().unchecked_ref::<Function>());
    PORTS.with(|ports| {
        ports.borrow_mut().insert(
            id,
            OpenPort {
                port,
                _on_message: on_message,
                _on_disconnect: on_disconnect,
            },
        )
    });
    super::refresh_badge();

    // Authorization reads storage; messages that arrive meanwhile are buffered by the session.
    spawn_local(async move {
        let policy = provider().policy().await;
        match provider().authorize(&session, policy.access(Some(&caller))) {
            Authorized::Flush(items) => {
                for item in items {
                    match item {
                        Buffered::Message(v) => dispatch(id, v),
                        Buffered::Reply(r) => post(id, &r),
                    }
                }
                provider().note_session(&session).await;
            }
            Authorized::Refuse {
                replies,
                reason,
                close_after_ms,
            } => {
                for r in &replies {
                    post(id, r);
                }
                close_after(id, close_after_ms, reason);
            }
        }
    });
}

fn inbound(id: u64, text: json::Bounded) {
    let Some(session) = provider().session(id) else {
        return;
    };
    let step = match &text {
        json::Bounded::Whole(t) => session.inbound(Some(t)),
        json::Bounded::Over { head, len } => session.inbound_over(head, *len),
        json::Bounded::NoJson => session.inbound(None),
    };
    match step {
        Step::Buffered | Step::Drop => {}
        Step::Dispatch(v) => dispatch(id, v),
        Step::Reply(r) => post(id, &r),
        Step::Close(reason) => close(id, &reason),
        Step::ReplyAndCloseSoon(r, reason) => {
            post(id, &r);
            close_after(id, session::REFUSED_LINGER_MS, reason);
        }
    }
}

/// Each message is its own task, so a slow call (a write waiting for review) never holds up a
/// ping or a read on the same port. The task is first polled at once (`spawn_now`): a call that
/// waits for no browser call (a ping, `tools/list`, `status`) is answered within the message's
/// own event.
fn dispatch(id: u64, msg: Value) {
    super::spawn_now(async move {
        let p = provider();
        let Some(session) = p.session(id) else { return };
        match p.handle_mcp(&session, &msg).await {
            Outcome::Reply(r) => post(id, &r),
            Outcome::Silent => {}
            Outcome::ReplyAndCloseCaller(r) => {
                post(id, &r);
                for other in p.sessions_of(&session.caller) {
                    close(other, "the caller is no longer authorized");
                }
            }
            Outcome::CloseCaller => {
                for other in p.sessions_of(&session.caller) {
                    close(other, "the caller is no longer authorized");
                }
            }
        }
        p.after_mcp_message(&session).await;
        super::toggle_watch::start_if_needed();
    });
}

/// Posts to an open port; a port that closed meanwhile is skipped silently. The `Port` is
/// cloned out of the table before the call: no borrow is held across `postMessage`, so a
/// listener it may run (a disconnect that removes the port) cannot hit a borrowed table.
pub fn post(id: u64, msg: &Value) {
    let Some(port) = PORTS.with(|ports| {
        ports
            .borrow()
            .get(&id)
            .map(|open| open.port.clone().unchecked_into::<Port>())
    }) else {
        return;
    };
    // Chrome throws when the other side is already gone; that is not our error.
    let _ = port.post_message(&json::to_js(msg));
}

/// Closes a port from our side.
pub fn close(id: u64, reason: &str) {
    if let Some(open) = take(id) {
        api::console_warn(&format!("lumo-userscripts: closing port {id}: {reason}"));
        let _ = open.port.disconnect();
        drop_later(open);
    }
}

fn close_after(id: u64, ms: f64, reason: String) {
    spawn_local(async move {
        super::env::timeout(ms).await;
        close(id, &reason);
    });
}

/// The other side closed the port (or Chrome did).
fn forget(id: u64) {
    if let Some(open) = take(id) {
        drop_later(open);
    }
}

fn take(id: u64) -> Option<OpenPort> {
    provider().close_session(id);
    let open = PORTS.with(|ports| ports.borrow_mut().remove(&id));
    super::refresh_badge();
    open
}

/// A closure must not be dropped while it runs (we may be inside its onDisconnect call).
fn drop_later(open: OpenPort) {
    let holder = Rc::new(RefCell::new(Some(open)));
    spawn_local(async move {
        holder.borrow_mut().take();
    });
}
