//! The accept sequence both WebSocket listeners share (the extension's and the control port):
//! at most `MAX_UNAUTHENTICATED` sockets before hello, the `Host`/`Origin` check on the upgrade
//! (403 otherwise), then the handshake with the link's limits, within a deadline. Each accepted socket is handed to
//! `handle` in its own task with the pre-hello permit, which it drops once hello is accepted.
// tungstenite's upgrade callback must return its (large) ErrorResponse type.
#![allow(clippy::result_large_err)]

use crate::link;
use lumo_userscripts::bridge::trust;
use std::future::Future;
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::WebSocketStream;

/// Sockets that have not completed hello yet, at most: a local process opening thousands of
/// silent sockets gets the excess closed at once instead of holding memory for 10 s each.
pub const MAX_UNAUTHENTICATED: usize = 16;

pub type Ws = WebSocketStream<TcpStream>;

/// Accepts forever on `listener`. `origin_ok` is the listener's `Origin` rule (the `Host` rule
/// is the same for both: loopback names only). A socket whose upgrade is not done within
/// `handshake_ms` is closed: one that never sends its request would otherwise hold its
/// pre-hello permit for as long as it stays open, and sixteen of them would keep the extension
/// out.
pub async fn serve<O, H, F>(listener: TcpListener, origin_ok: O, handshake_ms: u64, handle: H)
where
    O: Fn(Option<&str>) -> bool + Clone + Send + Unpin + 'static,
    H: Fn(Ws, OwnedSemaphorePermit) -> F + Clone + Send + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    let pending = Arc::new(Semaphore::new(MAX_UNAUTHENTICATED));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of file descriptors (EMFILE) fails every accept at once until one closes:
            // retrying without a pause would spin a core.
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            continue;
        };
        let Ok(permit) = pending.clone().try_acquire_owned() else {
            drop(stream);
            continue;
        };
        let (origin_ok, handle) = (origin_ok.clone(), handle.clone());
        // The handshake runs in the socket's own task: a slow client cannot stall the loop.
        tokio::spawn(async move {
            let check =
                move |req: &Request, resp: Response| check_upgrade(req, origin_ok).map(|()| resp);
            let upgrade = tokio_tungstenite::accept_hdr_async_with_config(
                stream,
                check,
                Some(link::ws_config()),
            );
            let deadline = std::time::Duration::from_millis(handshake_ms);
            if let Ok(Ok(ws)) = tokio::time::timeout(deadline, upgrade).await {
                handle(ws, permit).await;
            }
        });
    }
}

/// The upgrade check: `Host` must be a loopback name, then the listener's `Origin` rule.
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
