//! The shell around the core's `bridge::Connection`: moves its frames over a WebSocket, feeds
//! it the time, and turns its events into replies for whoever asked. Used for the extension
//! socket (accepting), the control connections at the owner (accepting) and a forwarder's
//! connection to the owner (dialling). It decides nothing the core does not.

use crate::call_error::CallError;
use futures_util::future::BoxFuture;
use futures_util::{Sink, SinkExt as _, StreamExt as _};
use lumo_userscripts::bridge::frame::MAX_FRAME_BYTES;
use lumo_userscripts::bridge::inflight::Failure;
use lumo_userscripts::bridge::{cancelled_id, types, CloseReason, Connection, Event, WireError};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

/// Milliseconds since the process started: the core's clock.
pub fn now_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    let ms = START.get_or_init(Instant::now).elapsed().as_millis();
    u64::try_from(ms).unwrap_or(u64::MAX)
}

/// The WebSocket layer refuses what the core would refuse anyway, before buffering it.
pub fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(MAX_FRAME_BYTES + 1024))
        .max_frame_size(Some(MAX_FRAME_BYTES + 1024))
}

pub enum Cmd {
    Request {
        kind: String,
        payload: Value,
        timeout: Duration,
        reply: oneshot::Sender<Result<Value, CallError>>,
        /// Names the request for [`Cmd::Withdraw`] before the loop gives it its frame id.
        ticket: u64,
    },
    /// The caller of request `ticket` is gone (its future dropped: the MCP client cancelled or
    /// left): the peer is told, [`types::CANCEL`], and a late answer dropped.
    Withdraw {
        ticket: u64,
    },
    Respond {
        id: u64,
        outcome: Result<Value, WireError>,
    },
    Close {
        code: u16,
        reason: String,
    },
    /// A notify to the peer (sent once the connection is open; dropped before).
    Notify {
        kind: String,
        payload: Value,
    },
}

/// Answers the peer's requests (the owner's control port).
pub type OnRequest =
    Arc<dyn Fn(String, Value) -> BoxFuture<'static, Result<Value, WireError>> + Send + Sync>;

/// Takes the peer's notifies (`types::TOOLS`).
pub type OnNotify = Box<dyn Fn(String, Value) + Send>;

struct Waiting {
    reply: oneshot::Sender<Result<Value, CallError>>,
    ticket: u64,
    kind: String,
    payload: Value,
    timeout: Duration,
    retried: bool,
}

/// Bytes queued for the socket, at most, before the peer counts as not reading: beyond them the
/// link is closed. Its own requests time out meanwhile: the loop never waits on a send.
const MAX_QUEUED_BYTES: usize = 4 * MAX_FRAME_BYTES;

/// Frames on their way to the socket, written by their own task ([`write`]), so a peer that
/// stops reading stalls that task alone and the loop still keeps every deadline.
struct Outbox {
    tx: mpsc::UnboundedSender<Message>,
    queued: Arc<AtomicUsize>,
}

#[derive(Debug, PartialEq, Eq)]
enum Stuck {
    /// The writer is gone (the socket failed).
    Gone,
    /// Over [`MAX_QUEUED_BYTES`] wait: the peer is not reading.
    Full,
}

impl Outbox {
    fn push(&self, m: Message) -> Result<(), Stuck> {
        let len = m.len();
        let before = self.queued.fetch_add(len, Ordering::Relaxed);
        if before > 0 && before.saturating_add(len) > MAX_QUEUED_BYTES {
            self.queued.fetch_sub(len, Ordering::Relaxed);
            return Err(Stuck::Full);
        }
        self.tx.send(m).map_err(|_| Stuck::Gone)
    }
}

/// Sends what the loop queues, in order, until the queue closes or a send fails.
async fn write<K>(mut sink: K, mut rx: mpsc::UnboundedReceiver<Message>, queued: Arc<AtomicUsize>)
where
    K: Sink<Message> + Unpin,
{
    while let Some(m) = rx.recv().await {
        let len = m.len();
        let sent = sink.send(m).await.is_ok();
        queued.fetch_sub(len, Ordering::Relaxed);
        if !sent {
            return;
        }
    }
}

/// Runs one connection to its end and returns why it ended. `on_open` is called once, with the
/// hello payload (accepting) or the ack (dialling).
pub async fn run<S>(
    ws: WebSocketStream<S>,
    mut conn: Connection,
    cmd_tx: mpsc::Sender<Cmd>,
    mut cmd_rx: mpsc::Receiver<Cmd>,
    on_open: impl FnOnce(Map<String, Value>) + Send,
    on_request: Option<OnRequest>,
    on_notify: Option<OnNotify>,
) -> CloseReason
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sink, mut ws) = ws.split();
    let (out_tx, out_rx) = mpsc::unbounded_channel();
    let queued = Arc::new(AtomicUsize::new(0));
    let mut writer = tokio::spawn(write(sink, out_rx, queued.clone()));
    let out = Outbox { tx: out_tx, queued };
    let mut on_open = Some(on_open);
    let mut waiting: HashMap<u64, Waiting> = HashMap::new();
    // The peer's requests being answered, by id: a cancel from the peer aborts its task, and
    // so whatever that task waits on (a forwarded call, a review) is withdrawn in turn.
    let mut serving: HashMap<u64, tokio::task::AbortHandle> = HashMap::new();
    loop {
        // Handle events, then send; handling may queue more frames (answers, a retry) and a
        // failed send more events, so repeat until both are drained before waiting. Events
        // first: the hello's `on_open` attaches the link before its ack goes out, so a peer
        // that acts on the ack at once finds the link attached.
        let mut busy = true;
        while busy {
            busy = false;
            while let Some(ev) = conn.poll_event() {
                busy = true;
                match ev {
                    Event::Hello(info) => {
                        if let Some(f) = on_open.take() {
                            f(info.payload);
                        }
                    }
                    Event::Ready(ack) => {
                        if let Some(f) = on_open.take() {
                            f(ack.result);
                        }
                    }
                    Event::Request { id, kind, payload } => match &on_request {
                        Some(handler) => {
                            let fut = handler(kind, payload);
                            let tx = cmd_tx.clone();
                            let task = tokio::spawn(async move {
                                let outcome = fut.await;
                                let _ = tx.send(Cmd::Respond { id, outcome }).await;
                            });
                            serving.insert(id, task.abort_handle());
                        }
                        None => conn.respond(
                            id,
                            Err(WireError::new(
                                "UNKNOWN_TYPE",
                                format!("this end does not answer {kind} requests"),
                            )),
                        ),
                    },
                    Event::Notify { kind, payload } if kind == types::CANCEL => {
                        if let Some(task) =
                            cancelled_id(&payload).and_then(|id| serving.remove(&id))
                        {
                            task.abort();
                        }
                    }
                    Event::Notify { kind, payload } => {
                        if let Some(f) = &on_notify {
                            f(kind, payload);
                        }
                    }
                    Event::Response { id, outcome, .. } => {
                        if let Some(w) = waiting.remove(&id) {
                            let _ = w.reply.send(outcome.map_err(|e| CallError::from_wire(&e)));
                        }
                    }
                    Event::Failed { id, failure, .. } => {
                        let Some(w) = waiting.remove(&id) else {
                            continue;
                        };
                        match failure {
                            // Reads only (the core decides): one more try.
                            Failure::Timeout { retryable: true } if !w.retried => {
                                match conn.request(
                                    &w.kind,
                                    w.payload.clone(),
                                    now_ms(),
                                    ms(w.timeout),
                                ) {
                                    Ok(nid) => {
                                        waiting.insert(nid, Waiting { retried: true, ..w });
                                    }
                                    Err(e) => {
                                        let _ = w.reply.send(Err(CallError::not_sent(e)));
                                    }
                                }
                            }
                            Failure::Timeout { .. } => {
                                let _ = w.reply.send(Err(CallError::timeout(format!(
                                    "no answer within {} s; it may still have happened: check before repeating a write",
                                    crate::call_error::seconds(w.timeout)
                                ))));
                            }
                            Failure::Disconnected => {
                                let why = conn
                                    .close_reason()
                                    .map_or_else(String::new, |r| format!(": {r}"));
                                let _ = w.reply.send(Err(CallError::not_connected(format!(
                                    "the connection closed before the answer came{why}; a write may still have happened: check before repeating it"
                                ))));
                            }
                        }
                    }
                }
            }
            while let Some(text) = conn.poll_transmit() {
                busy = true;
                match out.push(Message::Text(text.into())) {
                    Ok(()) => {}
                    Err(Stuck::Gone) => conn.handle_disconnect(),
                    Err(Stuck::Full) => conn.close(1008, "the other end is not reading"),
                }
            }
        }
        if conn.is_closed() {
            break;
        }
        let deadline = conn.poll_timeout();
        let sleep = async {
            match deadline {
                Some(d) => {
                    tokio::time::sleep(Duration::from_millis(d.saturating_sub(now_ms()))).await
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            msg = ws.next() => match msg {
                Some(Ok(Message::Text(t))) => conn.handle_text(t.as_str()),
                Some(Ok(Message::Binary(_))) => conn.close(1003, "binary frames are not accepted"),
                Some(Ok(Message::Close(Some(f)))) => conn.handle_close(u16::from(f.code), f.reason.as_str()),
                Some(Ok(Message::Close(None))) | Some(Err(_)) | None => conn.handle_disconnect(),
                Some(Ok(_)) => {} // WebSocket ping/pong: tungstenite answers.
            },
            cmd = cmd_rx.recv() => match cmd {
                Some(Cmd::Request { kind, payload, timeout, reply, ticket }) => {
                    match conn.request(&kind, payload.clone(), now_ms(), ms(timeout)) {
                        Ok(id) => { waiting.insert(id, Waiting { reply, ticket, kind, payload, timeout, retried: false }); }
                        Err(e) => { let _ = reply.send(Err(CallError::not_sent(e))); }
                    }
                }
                Some(Cmd::Withdraw { ticket }) => {
                    if let Some(id) = waiting.iter().find(|(_, w)| w.ticket == ticket).map(|(id, _)| *id) {
                        waiting.remove(&id);
                        conn.notify(types::CANCEL, json!({ "id": id }));
                    }
                }
                Some(Cmd::Respond { id, outcome }) => {
                    serving.remove(&id);
                    conn.respond(id, outcome);
                }
                Some(Cmd::Close { code, reason }) => conn.close(code, &reason),
                Some(Cmd::Notify { kind, payload }) => conn.notify(&kind, payload),
                None => conn.close(1001, "going away"),
            },
            () = sleep => conn.handle_timeout(now_ms()),
            () = out.tx.closed() => conn.handle_disconnect(),
        }
    }
    // The peer is gone: nobody waits for the answers its requests would get.
    for (_, task) in serving.drain() {
        task.abort();
    }
    // Calls that reached the queue after the link closed were never sent: told so, an agent
    // may repeat a write at once. (Dropped, their callers heard "a write may still have
    // happened".) Closed first, so a call made during the close below fails the same way.
    cmd_rx.close();
    while let Ok(cmd) = cmd_rx.try_recv() {
        if let Cmd::Request { reply, .. } = cmd {
            let _ = reply.send(Err(CallError::not_connected(
                "the connection closed before this call went out; nothing was sent",
            )));
        }
    }
    // Flush a refusal (the ack with its reason) before closing, then close with the core's code.
    while let Some(text) = conn.poll_transmit() {
        let _ = out.push(Message::Text(text.into()));
    }
    let reason = conn
        .close_reason()
        .cloned()
        .unwrap_or(CloseReason::Disconnected);
    // The peer's own close (or a lost transport) needs no close frame from here.
    if !matches!(
        reason,
        CloseReason::Disconnected | CloseReason::Remote { .. }
    ) {
        let text = reason.to_string();
        // Close reasons are limited to 123 bytes by the WebSocket protocol.
        let short: String = text
            .char_indices()
            .take_while(|(i, c)| i + c.len_utf8() <= 123)
            .map(|(_, c)| c)
            .collect();
        let _ = out.push(Message::Close(Some(CloseFrame {
            code: CloseCode::from(reason.code()),
            reason: short.into(),
        })));
    }
    // The writer ends once the queue is written; bounded, as a peer that does not read would
    // hold it for ever.
    drop(out);
    let closing = Duration::from_secs(2);
    if tokio::time::timeout(closing, &mut writer).await.is_err() {
        writer.abort();
    } else if !matches!(
        reason,
        CloseReason::Disconnected | CloseReason::Remote { .. }
    ) {
        // Let the peer read the close before the TCP connection goes.
        let _ = tokio::time::timeout(closing, async {
            while let Some(Ok(_)) = ws.next().await {}
        })
        .await;
    }
    reason
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Sends a request over a link and waits for its answer: at most twice `timeout` (a read is
/// retried once) and a little more, whatever happens to the link's loop.
pub async fn request(
    tx: &mpsc::Sender<Cmd>,
    kind: &str,
    payload: Value,
    timeout: Duration,
) -> Result<Value, CallError> {
    let bound = timeout
        .saturating_mul(2)
        .saturating_add(Duration::from_secs(5));
    tokio::time::timeout(bound, request_unbounded(tx, kind, payload, timeout))
        .await
        .unwrap_or_else(|_| {
            Err(CallError::timeout(format!(
                "no answer within {} s; it may still have happened: check before repeating a write",
                crate::call_error::seconds(bound)
            )))
        })
}

async fn request_unbounded(
    tx: &mpsc::Sender<Cmd>,
    kind: &str,
    payload: Value,
    timeout: Duration,
) -> Result<Value, CallError> {
    static TICKETS: AtomicU64 = AtomicU64::new(0);
    let ticket = TICKETS.fetch_add(1, Ordering::Relaxed);
    let (reply, rx) = oneshot::channel();
    tx.send(Cmd::Request {
        kind: kind.to_string(),
        payload,
        timeout,
        reply,
        ticket,
    })
    .await
    .map_err(|_| CallError::not_connected("the connection is closed; nothing was sent"))?;
    let mut withdraw = Withdraw {
        tx: Some(tx.clone()),
        ticket,
    };
    let answer = rx.await.unwrap_or_else(|_| {
        Err(CallError::not_connected(
            "the connection closed before the answer came; a write may still have happened: check before repeating it",
        ))
    });
    withdraw.tx = None;
    answer
}

/// Dropped while its request is still out (the caller's future dropped: an MCP client's
/// `notifications/cancelled`, or a client gone), it withdraws the request.
struct Withdraw {
    tx: Option<mpsc::Sender<Cmd>>,
    ticket: u64,
}

impl Drop for Withdraw {
    fn drop(&mut self) {
        let Some(tx) = self.tx.take() else { return };
        let cmd = Cmd::Withdraw {
            ticket: self.ticket,
        };
        // A full queue is waited for on a task of its own: the drop cannot wait.
        if let Err(mpsc::error::TrySendError::Full(cmd)) = tx.try_send(cmd) {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    let _ = tx.send(cmd).await;
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lumo_userscripts::bridge::types;
    use std::sync::atomic::{AtomicBool, Ordering};

    const TOKEN: &str = "link-test-token-0123456789abcdef0123456789";

    /// The bridge's end of a link, before the extension's hello.
    fn accepting() -> Connection {
        let auth = lumo_userscripts::bridge::Auth {
            token: TOKEN.into(),
            nonce: "link-test-server-nonce".into(),
            port: 1,
        };
        Connection::accept(types::HELLO, auth, "0", Map::new(), now_ms(), 10_000)
    }

    /// The extension's side of the handshake over `ws`, by the core's own dialling connection,
    /// until the link is open.
    async fn dial_open<S>(ws: &mut WebSocketStream<S>)
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let auth = lumo_userscripts::bridge::Auth {
            token: TOKEN.into(),
            nonce: "link-test-client-nonce".into(),
            port: 1,
        };
        let mut dial = Connection::dial(types::HELLO, Map::new(), auth, "0", now_ms(), 10_000);
        while !dial.is_open() {
            while let Some(t) = dial.poll_transmit() {
                ws.send(Message::Text(t.into())).await.unwrap();
            }
            match ws.next().await {
                Some(Ok(Message::Text(t))) => dial.handle_text(t.as_str()),
                Some(Ok(_)) => continue,
                other => panic!("no ack: {other:?} ({:?})", dial.close_reason()),
            }
            assert!(!dial.is_closed(), "{:?}", dial.close_reason());
        }
    }

    #[test]
    fn a_queue_the_peer_does_not_drain_is_bounded() {
        let (tx, _rx) = mpsc::unbounded_channel();
        let out = Outbox {
            tx,
            queued: Arc::new(AtomicUsize::new(0)),
        };
        let frame = || Message::Text("x".repeat(MAX_FRAME_BYTES).into());
        for _ in 0..MAX_QUEUED_BYTES / MAX_FRAME_BYTES {
            assert_eq!(out.push(frame()), Ok(()));
        }
        assert_eq!(out.push(frame()), Err(Stuck::Full));
        assert_eq!(out.queued.load(Ordering::Relaxed), MAX_QUEUED_BYTES);
    }

    /// Found in review: the loop awaited each send, so a peer that stopped reading stopped
    /// every deadline of the link with it, and calls hung. Seed 001: a timeout fails that one
    /// request.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_peer_that_stops_reading_does_not_stop_the_timeouts() {
        // A small pipe: one large request fills it while the peer reads nothing.
        let (server_io, client_io) = tokio::io::duplex(16 * 1024);
        let (tx, rx) = mpsc::channel(4);
        let tx2 = tx.clone();
        let server = tokio::spawn(async move {
            let ws = tokio_tungstenite::accept_async(server_io).await.unwrap();
            let conn = accepting();
            run(ws, conn, tx2, rx, |_| {}, None, None).await
        });
        let (mut ws, _) = tokio_tungstenite::client_async("ws://127.0.0.1/", client_io)
            .await
            .unwrap();
        dial_open(&mut ws).await;
        // From here the peer reads nothing. Not a read, so not retried.
        let big = serde_json::json!({ "pad": "x".repeat(1024 * 1024) });
        let started = Instant::now();
        let answer = tokio::time::timeout(
            Duration::from_secs(4),
            request(&tx, "bridge_status", big, Duration::from_millis(300)),
        )
        .await;
        let err = answer
            .expect("the call hung: the link's loop waited on the send")
            .expect_err("no answer can come");
        assert_eq!(err.code, "TIMEOUT", "{err:?}");
        assert!(started.elapsed() < Duration::from_secs(3));
        // A later call times out on its own deadline too.
        let small = request(
            &tx,
            "bridge_status",
            Value::Null,
            Duration::from_millis(300),
        );
        let err = tokio::time::timeout(Duration::from_secs(4), small)
            .await
            .expect("the second call hung")
            .expect_err("no answer can come");
        assert_eq!(err.code, "TIMEOUT", "{err:?}");
        drop(tx);
        drop(ws);
        let _ = tokio::time::timeout(Duration::from_secs(10), server).await;
    }

    /// A call queued behind the link's close was never sent, and is told so (NOT_CONNECTED,
    /// "nothing was sent"), not that a write may still have happened: the agent may repeat
    /// it at once. A call made after the loop ended fails the same way.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_call_queued_behind_the_close_is_told_it_was_not_sent() {
        let (server_io, client_io) = tokio::io::duplex(64 * 1024);
        let (tx, rx) = mpsc::channel(4);
        let tx2 = tx.clone();
        let (reply, queued) = oneshot::channel();
        // The close, then a call, both queued before the loop looks at its queue.
        tx.send(Cmd::Close {
            code: 1000,
            reason: "user".into(),
        })
        .await
        .unwrap();
        tx.send(Cmd::Request {
            kind: "tools_call".into(),
            payload: Value::Null,
            timeout: Duration::from_secs(5),
            reply,
            ticket: 0,
        })
        .await
        .unwrap();
        let server = tokio::spawn(async move {
            let ws = tokio_tungstenite::accept_async(server_io).await.unwrap();
            run(ws, accepting(), tx2, rx, |_| {}, None, None).await
        });
        let (ws, _) = tokio_tungstenite::client_async("ws://127.0.0.1/", client_io)
            .await
            .unwrap();
        let err = tokio::time::timeout(Duration::from_secs(5), queued)
            .await
            .expect("no answer")
            .expect("the call was dropped unanswered")
            .expect_err("the link is closed");
        assert_eq!(err.code, "NOT_CONNECTED", "{err:?}");
        assert!(err.message.contains("nothing was sent"), "{err:?}");
        drop(ws);
        let _ = tokio::time::timeout(Duration::from_secs(10), server).await;
        let late = request(&tx, "tools_call", Value::Null, Duration::from_secs(1))
            .await
            .expect_err("the link is gone");
        assert!(late.message.contains("nothing was sent"), "{late:?}");
    }

    /// Found under load: the ack went out before `on_open` attached the link, so an extension
    /// that called at once (or an agent asking bridge_status) could find the bridge "not
    /// connected". `on_open` here is slow on purpose; the ack must still come after it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_ack_goes_out_only_after_the_link_is_attached() {
        let (server_io, client_io) = tokio::io::duplex(64 * 1024);
        let attached = Arc::new(AtomicBool::new(false));
        let flag = attached.clone();
        let server = tokio::spawn(async move {
            let ws = tokio_tungstenite::accept_async(server_io).await.unwrap();
            let conn = accepting();
            let (tx, rx) = mpsc::channel(4);
            let on_open = move |_| {
                std::thread::sleep(Duration::from_millis(300));
                flag.store(true, Ordering::SeqCst);
            };
            run(ws, conn, tx, rx, on_open, None, None).await
        });
        let (mut ws, _) = tokio_tungstenite::client_async("ws://127.0.0.1/", client_io)
            .await
            .unwrap();
        dial_open(&mut ws).await;
        assert!(
            attached.load(Ordering::SeqCst),
            "the ack arrived before the link was attached"
        );
        drop(ws);
        let _ = server.await;
    }
}
