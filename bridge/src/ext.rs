//! The loopback WebSocket the extension dials. The upgrade is refused (403) unless `Host` is a
//! loopback name and `Origin` is `chrome-extension://<id>` (pinned to our id unless
//! `--any-extension`); the first frame must be a `hello`, and the extension must prove it holds
//! the token (`hello_proof`) within the deadline.
use crate::accept;
use crate::hub::Hub;
use crate::link::{self, now_ms};
use lumo_userscripts::bridge::{trust, types, Connection};
use lumo_userscripts::ids::ExtensionId;
use serde_json::{json, Map};
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

pub struct ExtConfig {
    pub pinned: Option<ExtensionId>,
    pub readonly: bool,
    pub hello_timeout_ms: u64,
}

pub async fn serve(listener: TcpListener, hub: Arc<Hub>, cfg: Arc<ExtConfig>) {
    let pinned = cfg.pinned.clone();
    let origin_ok = move |o: Option<&str>| trust::ws_origin_allowed(o, pinned.as_ref());
    accept::serve(
        listener,
        origin_ok,
        cfg.hello_timeout_ms,
        move |ws, permit| {
            let (hub, cfg) = (hub.clone(), cfg.clone());
            async move {
                let mut extra = Map::new();
                extra.insert("readonly".into(), json!(cfg.readonly));
                let auth = crate::secrets::auth(hub.ext_token.clone(), hub.port);
                let conn = Connection::accept(
                    types::HELLO,
                    auth,
                    VERSION,
                    extra,
                    now_ms(),
                    cfg.hello_timeout_ms,
                );
                let (tx, rx) = mpsc::channel(64);
                let attached = Arc::new(Mutex::new(None));
                let (hub2, tx2, attached2) = (hub.clone(), tx.clone(), attached.clone());
                let on_open = move |hello| {
                    drop(permit); // authenticated: no longer counts against the pre-hello limit
                    let id = hub2.attach(tx2, hello);
                    if let Ok(mut a) = attached2.lock() {
                        *a = Some(id);
                    }
                    eprintln!("lumo-bridge: the extension connected");
                };
                let (hub3, attached3) = (hub.clone(), attached.clone());
                let on_notify: link::OnNotify = Box::new(move |kind, payload| {
                    let id = attached3.lock().ok().and_then(|a| *a);
                    if let (types::TOOLS, Some(id)) = (kind.as_str(), id) {
                        hub3.tools_notified(id, &payload);
                    }
                });
                let reason = link::run(ws, conn, tx, rx, on_open, None, Some(on_notify)).await;
                let id = attached.lock().ok().and_then(|a| *a);
                if let Some(id) = id {
                    hub.detach(id, reason.code());
                    eprintln!("lumo-bridge: the extension disconnected ({reason})");
                } else if hub.fresh.load(std::sync::atomic::Ordering::Relaxed) {
                    // Most likely the extension, with an earlier bridge's authorization: it
                    // checked this bridge's proof of a token it never got, and gave up.
                    eprintln!("lumo-bridge: refused a connection: {reason} (this bridge's token is new: an extension authorized for an earlier bridge cannot connect until the user opens the connect link and clicks Connect)");
                } else {
                    eprintln!("lumo-bridge: refused a connection: {reason}");
                }
            }
        },
    )
    .await;
}
