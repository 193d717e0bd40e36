//! The control port between bridges of one user (seed 001's shared daemon). The owner accepts
//! forwarders: no `Origin` at all (browsers always send one), a loopback `Host`, and a
//! `fwd_hello` carrying the token from the 0600 token file before anything else — the core's
//! connection refuses `call_tool` until then. Its ack hands the forwarder the extension token, so
//! a forwarder that takes over keeps the link the user already authorized.
use crate::accept;
use crate::ext::VERSION;
use crate::hub::Hub;
use crate::link::{self, now_ms, Cmd, OnRequest};
use futures_util::FutureExt as _;
use lumo_userscripts::bridge::{trust, types, Connection, WireError};
use lumo_userscripts::tools::catalog;
use lumo_userscripts::tools::result::{ErrorCode, ToolError};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

pub async fn serve(
    listener: TcpListener,
    hub: Arc<Hub>,
    control_token: String,
    port: u16,
    hello_timeout_ms: u64,
    readonly: bool,
) {
    accept::serve(
        listener,
        trust::control_origin_allowed,
        hello_timeout_ms,
        move |ws, permit| {
            let (hub, token) = (hub.clone(), control_token.clone());
            async move {
                let mut extra = Map::new();
                extra.insert("extToken".into(), json!(hub.ext_token));
                // A forwarder hides the write tools too, so its client sees what ours does.
                extra.insert("readonly".into(), json!(readonly));
                // Whether any extension has proven the token yet: a forwarder that takes over
                // tells its agent to ask for the click, or to wait for the redial, by it.
                let fresh = hub.fresh.load(std::sync::atomic::Ordering::Relaxed);
                extra.insert("fresh".into(), json!(fresh));
                let auth = crate::secrets::auth(token, port);
                let conn = Connection::accept(
                    types::FWD_HELLO,
                    auth,
                    VERSION,
                    extra,
                    now_ms(),
                    hello_timeout_ms,
                );
                let (tx, rx) = mpsc::channel(64);
                let h = hub.clone();
                let on_request: OnRequest = Arc::new(move |kind: String, payload: Value| {
                    let h = h.clone();
                    async move { answer(&h, readonly, &kind, payload).await }.boxed()
                });
                let (writes, tx2) = (hub.writes.subscribe(), tx.clone());
                let on_open = move |_| {
                    drop(permit);
                    tokio::spawn(pass_on_writes(writes, tx2));
                };
                let reason = link::run(ws, conn, tx, rx, on_open, Some(on_request), None).await;
                eprintln!("lumo-bridge: a forwarder left ({reason})");
            }
        },
    )
    .await;
}

/// Tells a forwarder what the extension said of writes, now and at each change, until its link
/// is gone (its command queue closed).
async fn pass_on_writes(mut writes: watch::Receiver<Option<bool>>, tx: mpsc::Sender<Cmd>) {
    writes.mark_changed();
    loop {
        tokio::select! {
            changed = writes.changed() => if changed.is_err() { return },
            () = tx.closed() => return,
        }
        let Some(w) = *writes.borrow_and_update() else {
            continue;
        };
        let cmd = Cmd::Notify {
            kind: types::TOOLS.into(),
            payload: lumo_userscripts::bridge::tools_payload(w),
        };
        if tx.send(cmd).await.is_err() {
            return;
        }
    }
}

async fn answer(hub: &Hub, readonly: bool, kind: &str, payload: Value) -> Result<Value, WireError> {
    match kind {
        types::CALL_TOOL => {
            let name = payload.get("name").and_then(Value::as_str).unwrap_or("");
            // --readonly refuses writes before the browser, whichever process's client asks
            // (a forwarder may be older, or not have hidden them).
            if readonly && catalog::find(name).is_some_and(|d| d.is_write()) {
                return Ok(ToolError::new(
                    ErrorCode::WriteDisabled,
                    "the bridge that owns the extension link was started with --readonly: write tools are refused",
                )
                .to_result());
            }
            let args = payload.get("arguments").cloned().unwrap_or(json!({}));
            // The code is passed on as it is (a timeout stays a timeout for the forwarder's
            // client).
            hub.call_tool(name, args).await.map_err(|e| e.to_wire())
        }
        types::BRIDGE_STATUS => Ok(hub.status()),
        other => Err(WireError::new(
            "UNKNOWN_TYPE",
            format!("the control port does not answer {other}"),
        )),
    }
}
