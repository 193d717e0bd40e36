//! The local bridge as one more caller: the link's state as the popup and connect page see it,
//! the user's authorization of one bridge token, and `call_tool` requests run through the same
//! tool walk as a `lumo:mcp` port, under the caller `Caller::Bridge`.
//!
//! The shell owns the WebSocket and the core `bridge::Connection`; it reports here what happened
//! (dialling, open, closed) and asks here what to answer.

use super::Provider;
use crate::bridge::WireError;
use crate::caller::{bridge_key, bridge_label, Caller};
use crate::env::{Area, Env};
use crate::tools::{self, CallCtx, CallOutcome};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// Storage key of the authorization: `chrome.storage.session` by default (gone when the browser
/// restarts), `chrome.storage.local` only when the user ticked "remember".
pub const AUTH_KEY: &str = "bridgeAuth";

/// What the user authorized on the connect page: this token, at this address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BridgeAuth {
    pub host: String,
    pub port: u16,
    pub token: String,
    #[serde(default)]
    pub allow_remote: bool,
    #[serde(default)]
    pub remember: bool,
    /// What the bridge said of itself on the first link after the user's click, stamped then
    /// (`Provider::bridge_consented`). Consent to a read-only bridge holds for every later link
    /// of this authorization: a read-write bridge that takes over the port and token (a
    /// forwarder, a restart) stays read-only until the user clicks Connect again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readonly: Option<bool>,
}

/// The link as the pages show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BridgeView {
    /// "off", "connecting", "connected" or "retrying".
    pub state: &'static str,
    pub host: String,
    pub port: u16,
    /// What the pages call it (`caller::bridge_label`: "Local bridge (port N)", or where it is).
    pub label: String,
    pub readonly: bool,
    /// The authorization's stamp, as dialled: read-only consented, read-write, or not yet
    /// known (the first link after the click).
    #[serde(skip)]
    pub consented_readonly: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opened_at: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_version: Option<String>,
    /// Why the last link ended or was refused (a refusing ack's reason included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Default for BridgeView {
    fn default() -> Self {
        BridgeView {
            state: "off",
            host: String::new(),
            port: 0,
            label: String::new(),
            readonly: false,
            consented_readonly: None,
            session: None,
            opened_at: None,
            server_version: None,
            error: None,
        }
    }
}

/// How to answer one `call_tool`.
#[derive(Debug, PartialEq)]
pub enum BridgeAnswer {
    Reply(Result<Value, WireError>),
    /// Answer, then close the link: the endpoint was switched off.
    ReplyAndClose(Value),
}

impl<E: Env> Provider<E> {
    pub fn bridge_view(&self) -> BridgeView {
        self.bridge.borrow().clone()
    }

    pub fn bridge_dialing(&self, auth: &BridgeAuth) {
        {
            let mut b = self.bridge.borrow_mut();
            let error = b.error.take();
            *b = BridgeView {
                state: "connecting",
                host: auth.host.clone(),
                port: auth.port,
                label: bridge_label(&auth.host, auth.port),
                consented_readonly: auth.readonly,
                error,
                ..BridgeView::default()
            };
        }
        self.changed();
    }

    /// [`Self::bridge_dialing`] a fresh authorization of `host:port` (tests).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn bridge_dialing_fresh(&self, host: &str, port: u16) {
        self.bridge_dialing(&BridgeAuth {
            host: host.to_owned(),
            port,
            token: String::new(),
            allow_remote: false,
            remember: false,
            readonly: None,
        });
    }

    /// The hello was acknowledged: the bridge is a connected caller, with a session id of its
    /// own (reviews, "allow for this session"). Read-only when the bridge says so (its ack's
    /// `readonly`) or when the user connected this authorization to a read-only bridge.
    pub fn bridge_opened(&self, readonly: bool, server_version: &str) -> u64 {
        let readonly = readonly || self.bridge.borrow().consented_readonly == Some(true);
        let id = self.next_session.get();
        self.next_session.set(id.saturating_add(1));
        {
            let mut b = self.bridge.borrow_mut();
            b.state = "connected";
            b.readonly = readonly;
            b.session = Some(id);
            b.opened_at = Some(self.env.now_ms());
            b.server_version = Some(crate::text::ellipsize(server_version, 64));
            b.error = None;
        }
        self.changed();
        id
    }

    /// The link ended (`retrying`: the shell dials again later). Its waiting reviews are
    /// cancelled and its allowance ends, as for a closed port.
    pub fn bridge_closed(&self, error: Option<String>, retrying: bool) {
        let session = {
            let mut b = self.bridge.borrow_mut();
            let s = b.session.take();
            b.state = if retrying { "retrying" } else { "off" };
            b.opened_at = None;
            if error.is_some() {
                b.error = error;
            }
            s
        };
        if let Some(id) = session {
            self.cancel_reviews(id, None);
            self.waived.borrow_mut().remove(&id);
        }
        self.changed();
    }

    /// A new click on the connect page: the last link's reason is history now (a retry keeps it,
    /// to say why it is retrying).
    pub(crate) fn bridge_clear_error(&self) {
        self.bridge.borrow_mut().error = None;
    }

    pub(crate) fn bridge_session(&self) -> Option<u64> {
        self.bridge.borrow().session
    }

    /// The popup's row for the bridge while it is connected.
    pub(crate) fn bridge_summary(&self) -> Option<Value> {
        let b = self.bridge.borrow();
        let session = b.session?;
        Some(json!({
            "id": session,
            "kind": "bridge",
            "caller": bridge_key(b.port),
            "label": bridge_label(&b.host, b.port),
            "openedAt": b.opened_at,
            "state": "ready",
            "readonly": b.readonly,
        }))
    }

    /// The bridge no longer wants the answer to its request `payload.id` on link `session`
    /// ([`crate::bridge::types::CANCEL`]): that call's waiting review is withdrawn, as a port's
    /// `notifications/cancelled` withdraws one.
    pub fn bridge_cancel(&self, session: u64, payload: &Value) {
        if self.bridge.borrow().session != Some(session) {
            return;
        }
        if let Some(id) = crate::bridge::cancelled_id(payload) {
            let rpc_id = bridge_rpc_id(id);
            self.inflight.cancel(session, &rpc_id);
            self.cancel_reviews(session, Some(&rpc_id));
        }
    }

    /// One `call_tool {name, arguments}`, request `request` from the bridge on link `session`.
    pub async fn bridge_call(&self, session: u64, request: u64, payload: &Value) -> BridgeAnswer {
        let caller = {
            let b = self.bridge.borrow();
            if b.session != Some(session) {
                return BridgeAnswer::Reply(Err(WireError::new(
                    "NOT_CONNECTED",
                    "this bridge link is closed",
                )));
            }
            Caller::Bridge {
                host: b.host.clone(),
                port: b.port,
                readonly: b.readonly,
            }
        };
        let Some(name) = payload.get("name").and_then(Value::as_str) else {
            return BridgeAnswer::Reply(Err(WireError::new(
                "INVALID_PARAMS",
                "call_tool needs \"name\" (a string)",
            )));
        };
        let args = match payload.get("arguments") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(v @ Value::Object(_)) => v.clone(),
            Some(_) => {
                return BridgeAnswer::Reply(Err(WireError::new(
                    "INVALID_PARAMS",
                    "\"arguments\" must be an object",
                )))
            }
        };
        // Reviews find their request by this id, for the bridge's cancel of it.
        let rpc_id = bridge_rpc_id(request);
        let ctx = CallCtx {
            caller: &caller,
            session,
            rpc_id: &rpc_id,
        };
        // In flight while it runs, so the bridge's cancel stops it where it waits its turn.
        let _running = self.inflight.running(session, &rpc_id);
        match tools::call(self, &ctx, name, args).await {
            CallOutcome::Result(r) => BridgeAnswer::Reply(Ok(r)),
            CallOutcome::AccessLost(r) => BridgeAnswer::ReplyAndClose(r),
            CallOutcome::UnknownTool => BridgeAnswer::Reply(Err(WireError::new(
                "UNKNOWN_TOOL",
                format!("unknown tool: {}", crate::text::ellipsize(name, 60)),
            ))),
        }
    }

    /// The authorization the user gave, if any (session storage first, then a remembered one).
    pub async fn bridge_auth(&self) -> Option<BridgeAuth> {
        for area in [Area::Session, Area::Local] {
            let found = self
                .env
                .get(area, &[AUTH_KEY])
                .await
                .ok()
                .and_then(|m| m.get(AUTH_KEY).cloned())
                .and_then(|v| <BridgeAuth as serde::Deserialize>::deserialize(&v).ok());
            if found.is_some() {
                return found;
            }
        }
        None
    }

    /// Records the user's click on the connect page. The token is persisted across browser
    /// restarts only with `remember`; a previous authorization (another token) is replaced.
    pub async fn authorize_bridge(&self, auth: &BridgeAuth) -> Result<(), String> {
        self.forget_bridge().await;
        let area = if auth.remember {
            Area::Local
        } else {
            Area::Session
        };
        let mut m = Map::new();
        m.insert(
            AUTH_KEY.to_owned(),
            serde_json::to_value(auth).map_err(|e| e.to_string())?,
        );
        self.env.set(area, m).await.map_err(|e| e.to_string())
    }

    /// Stamps the user's authorization with what the bridge said of itself on its first link
    /// ([`BridgeAuth::readonly`]); an authorization already stamped, or replaced meanwhile by
    /// another click (another token), is left as it is.
    pub async fn bridge_consented(&self, token: &str, readonly: bool) {
        for area in [Area::Session, Area::Local] {
            let Ok(m) = self.env.get(area, &[AUTH_KEY]).await else {
                continue;
            };
            let Some(mut auth) = m
                .get(AUTH_KEY)
                .and_then(|v| <BridgeAuth as serde::Deserialize>::deserialize(v).ok())
            else {
                continue;
            };
            if auth.token != token || auth.readonly.is_some() {
                return;
            }
            auth.readonly = Some(readonly);
            self.bridge.borrow_mut().consented_readonly = Some(readonly);
            let mut m = Map::new();
            if let Ok(v) = serde_json::to_value(&auth) {
                m.insert(AUTH_KEY.to_owned(), v);
                let _ = self.env.set(area, m).await;
            }
            return;
        }
    }

    /// Whether the bridge's MCP clients may see the write tools: writes on, and the link not
    /// read-only.
    pub fn bridge_lists_writes(&self, writes_enabled: bool) -> bool {
        writes_enabled && !self.bridge.borrow().readonly
    }

    pub async fn forget_bridge(&self) {
        for area in [Area::Session, Area::Local] {
            let _ = self.env.remove(area, &[AUTH_KEY]).await;
        }
    }
}

/// A bridge request's id where a port's JSON-RPC id goes (reviews name their request by it): an
/// object, so it never equals a port client's own id.
fn bridge_rpc_id(request: u64) -> Value {
    json!({ "bridge": request })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::memory::MemoryEnv;
    use futures::executor::block_on;
    use serde_json::json;

    /// The bridge's cancel marks its request in flight, so a call that has not begun (one
    /// waiting for its turn in a tab, or for its @require files) never begins; a cancel on
    /// another link or naming another request marks nothing.
    #[test]
    fn the_bridge_cancel_marks_its_own_request_in_flight() {
        let p = Provider::new(MemoryEnv::new());
        block_on(crate::control::handle(
            &p,
            &json!({"op": "policy.setSwitch", "name": "review", "value": true}),
        ));
        p.bridge_dialing_fresh("127.0.0.1", 17817);
        let s = p.bridge_opened(false, "0.1.0");
        let src = "// ==UserScript==\n// @name C\n// @match https://c.test/*\n// ==/UserScript==\n";
        let call = json!({"name": "write_script", "arguments": {"source": src}});
        let id = bridge_rpc_id(7);
        let (_, marked) = block_on(async {
            futures::join!(p.bridge_call(s, 7, &call), async {
                p.bridge_cancel(s.wrapping_add(1), &json!({"id": 7}));
                p.bridge_cancel(s, &json!({"id": 8}));
                let before = p.inflight.is_cancelled(s, &id);
                p.bridge_cancel(s, &json!({"id": 7}));
                (before, p.inflight.is_cancelled(s, &id))
            })
        });
        assert_eq!(marked, (false, true));
        assert!(p.inflight.is_empty(), "the entry ends with the call");
    }
}
