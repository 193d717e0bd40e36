//! The loopback WebSocket the extension dials. The upgrade is refused (403) unless `Host` is a
//! loopback name and `Origin` is `chrome-extension://<id>` (pinned to our id unless
//! `--any-extension`); the first frame must be a `hello` with the token within the deadline.
// tungstenite's upgrade callback must return its (large) ErrorResponse type.
#![allow(clippy::result_large_err)]

use crate::hub::Hub;
use crate::link::{self, now_ms};
use lumo_userscripts::bridge::{trust, types, Connection};
use lumo_userscripts::ids::ExtensionId;
use serde_json::{json, Map};
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, Semaphore};
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

pub struct ExtConfig {
    pub pinned: Option<ExtensionId>,
    pub readonly: bool,
    pub hello_timeout_ms: u64,
}

/// The upgrade check shared by both listeners: `Host`, then the listener's `Origin` rule.
pub fn check_upgrade(
    req: &Request,
    origin_ok: impl FnOnce(Option<&str>) -> bool,
) -> Result<(), ErrorResponse> {
    let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok());
    if !trust::host_allowed(header("host"), None) {
        return Err(refusal("Host not allowed"));
    }
    if !origin_ok(header("origin")) {
        return Err(refusal("Origin not allowed"));
    }
    Ok(())
}

fn refusal(why: &str) -> ErrorResponse {
    let mut r = ErrorResponse::new(Some(why.to_string()));
    *r.status_mut() = tokio_tungstenite::tungstenite::http::StatusCode::FORBIDDEN;
    r
}

/// Sockets that have not completed hello yet, at most: a local process opening thousands of
/// silent sockets gets the excess closed at once instead of holding memory for 10 s each.
pub const MAX_UNAUTHENTICATED: usize = 16;

pub async fn serve(listener: TcpListener, hub: Arc<Hub>, cfg: Arc<ExtConfig>) {
    let pending = Arc::new(Semaphore::new(MAX_UNAUTHENTICATED));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let Ok(permit) = pending.clone().try_acquire_owned() else {
            drop(stream);
            continue;
        };
        let (hub, cfg) = (hub.clone(), cfg.clone());
        tokio::spawn(async move {
            let pinned = cfg.pinned.clone();
            let check = move |req: &Request, resp: Response| {
                check_upgrade(req, |o| trust::ws_origin_allowed(o, pinned.as_ref())).map(|()| resp)
            };
            let Ok(ws) = tokio_tungstenite::accept_hdr_async_with_config(
                stream,
                check,
                Some(link::ws_config()),
            )
            .await
            else {
                return;
            };
            let mut extra = Map::new();
            extra.insert("readonly".into(), json!(cfg.readonly));
            let conn = Connection::accept(
                types::HELLO,
                &hub.ext_token,
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
            let reason = link::run(ws, conn, tx, rx, on_open, None).await;
            let id = attached.lock().ok().and_then(|a| *a);
            if let Some(id) = id {
                hub.detach(id);
                eprintln!("lumo-bridge: the extension disconnected ({reason})");
            } else {
                eprintln!("lumo-bridge: refused a connection: {reason}");
            }
        });
    }
}
