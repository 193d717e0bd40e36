//! One `lumo:mcp` port, as an explicit state machine:
//!
//! ```text
//!  accept ──► Authorizing ──granted──► Open(Uninitialized) ──initialize──► Open(Ready)
//!              │  (buffer)  └─refused─► Refused (−32001 to each request) ──linger/grace──► Closed
//!              └─overflow─────────────► Closed
//!  any state ──port disconnected / closed by us──► Closed
//! ```
//!
//! Messages that arrive while the authorization check (an async storage read) runs are buffered
//! here, in order and bounded, then flushed to the MCP server or refused. The shell keeps the
//! `Port` object; this type keeps everything that is decided.
#![warn(clippy::must_use_candidate)] // pure decisions: a result dropped is a bug

use crate::ids::ExtensionId;
use crate::mcp::jsonrpc::{self, Inbound};
use crate::policy::{Access, LAST_SEEN_GRANULARITY_MS};
use serde_json::Value;
use std::cell::{Cell, RefCell};

pub const MCP_PORT_NAME: &str = "lumo:mcp";
/// Bounds on what a caller can make us hold before it is authorized.
pub const MAX_BUFFERED_MESSAGES: usize = 64;
pub const MAX_BUFFERED_BYTES: usize = 2 * 1024 * 1024;
/// One message's serialized size. Large enough for the biggest script the tools accept, with
/// room for JSON escaping; anything bigger is refused unparsed.
pub const MAX_MESSAGE_BYTES: usize = 1024 * 1024;

/// Why a port is refused at connect time, before any message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reject {
    WrongName,
    NoValidSender,
}

impl Reject {
    #[must_use]
    pub fn reason(&self) -> &'static str {
        match self {
            Reject::WrongName => "port name is not lumo:mcp",
            Reject::NoValidSender => "sender has no valid extension id",
        }
    }
}

/// Checks a new port: the fixed name, and a sender id that passes the one validator.
pub fn accept(port_name: &str, sender_id: Option<&str>) -> Result<ExtensionId, Reject> {
    if port_name != MCP_PORT_NAME {
        return Err(Reject::WrongName);
    }
    sender_id
        .and_then(ExtensionId::parse)
        .ok_or(Reject::NoValidSender)
}

/// The negotiated MCP phase of an open port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Uninitialized,
    Ready { version: &'static str },
}

/// One message held while authorization runs, kept in arrival order. A message that could not
/// be parsed is held as the error reply it gets, so the order of answers is kept either way.
#[derive(Debug, Clone, PartialEq)]
pub enum Buffered {
    /// Parsed: hand it to the MCP server (whatever its shape: a batch is the server's to refuse).
    Message(Value),
    /// Unparsable or oversized: post this reply as it is.
    Reply(Value),
}

#[derive(Debug)]
enum State {
    Authorizing {
        buffer: Vec<Buffered>,
        bytes: usize,
    },
    Open(Phase),
    /// Authorization was refused. Every request is answered with the reason (−32001) — a bare
    /// close would leave the host with "connection closed" and nothing to tell the user — and
    /// the shell closes the port shortly after the first answer, or after a grace period if no
    /// request comes.
    Refused {
        reason: String,
        answered: bool,
    },
    Closed,
}

/// A refused port that has answered a request closes this long after, so requests the caller
/// sent in the same burst are answered too.
pub const REFUSED_LINGER_MS: f64 = 100.0;
/// A refused port that has had no request to answer waits at most this long for one.
pub const REFUSED_GRACE_MS: f64 = 5_000.0;

/// What the shell must do with one inbound message.
#[derive(Debug, PartialEq)]
pub enum Step {
    /// Held until authorization completes.
    Buffered,
    /// Hand it to the MCP server now.
    Dispatch(Value),
    /// Answer this directly (parse error, oversized message) and go on.
    Reply(Value),
    /// The bound was exceeded: close the port; the reason is logged.
    Close(String),
    /// Send this, then close the port after [`REFUSED_LINGER_MS`].
    ReplyAndCloseSoon(Value, String),
    /// The port is closed: drop it.
    Drop,
}

/// What authorization decided for the buffered messages.
#[derive(Debug, PartialEq)]
pub enum Authorized {
    /// Dispatch or post these, in order.
    Flush(Vec<Buffered>),
    /// Send these −32001 errors, then close the port after `close_after_ms`:
    /// [`REFUSED_LINGER_MS`] if there were any, else [`REFUSED_GRACE_MS`] (a request arriving
    /// meanwhile is answered too).
    Refuse {
        replies: Vec<Value>,
        reason: String,
        close_after_ms: f64,
    },
}

#[derive(Debug)]
pub struct Session {
    pub id: u64,
    pub caller: ExtensionId,
    pub opened_at: f64,
    state: RefCell<State>,
    /// When this session last had its caller's `lastSeen` refreshed (`seen_due`).
    seen_at: Cell<Option<f64>>,
    /// Held by `initialize` while it reads the policy: a request sent right after it on the
    /// same port (each message is its own task) waits for it instead of being refused as one
    /// sent before it.
    pub init_gate: futures::lock::Mutex<()>,
    /// Its requests being handled ([`Session::start_request`]).
    running: Cell<usize>,
}

/// Most requests one session may have being handled at once. Each is a task of the worker's one
/// thread, and tasks run in arrival order: a tester's 1,000 `get_script` calls sent at once kept
/// every other caller's ping (and the host's probe, past its 1.5 s) and the user's options page
/// waiting 7 s behind them. Past the bound a request is answered at once with
/// [`crate::mcp::jsonrpc::BUSY`], nothing done.
pub const MAX_REQUESTS_RUNNING: usize = 32;

/// A request counted as running on its session until dropped (also when its handler's future
/// is dropped unfinished).
pub struct RequestSlot<'a>(&'a Session);

impl Drop for RequestSlot<'_> {
    fn drop(&mut self) {
        self.0.running.set(self.0.running.get().saturating_sub(1));
    }
}

impl Session {
    #[must_use]
    pub fn new(id: u64, caller: ExtensionId, now: f64) -> Self {
        Session {
            id,
            caller,
            opened_at: now,
            state: RefCell::new(State::Authorizing {
                buffer: Vec::new(),
                bytes: 0,
            }),
            seen_at: Cell::new(None),
            init_gate: futures::lock::Mutex::new(()),
            running: Cell::new(0),
        }
    }

    /// A request starts being handled: its slot, or `None` when [`MAX_REQUESTS_RUNNING`] are.
    pub fn start_request(&self) -> Option<RequestSlot<'_>> {
        let n = self.running.get();
        (n < MAX_REQUESTS_RUNNING).then(|| {
            self.running.set(n.saturating_add(1));
            RequestSlot(self)
        })
    }

    /// Whether the caller's `lastSeen` is due for a refresh at `now`: the first time it is asked
    /// (at authorization), then at most once per [`LAST_SEEN_GRANULARITY_MS`] (a clock that
    /// went back counts as due). Saying yes records `now`, so a session calling many tools a
    /// minute asks the policy once, and one open for hours still shows as seen.
    #[must_use]
    pub fn seen_due(&self, now: f64) -> bool {
        let due = self
            .seen_at
            .get()
            .is_none_or(|t| now - t >= LAST_SEEN_GRANULARITY_MS || now < t);
        if due {
            self.seen_at.set(Some(now));
        }
        due
    }

    /// One message arrived as JSON text (`None`: it had no JSON form).
    pub fn inbound(&self, text: Option<&str>) -> Step {
        let size = text.map_or(0, str::len);
        self.inbound_parsed(size, jsonrpc::parse_message(text, MAX_MESSAGE_BYTES))
    }

    /// One message arrived too long for the shell to copy into the wasm (its memory never
    /// shrinks): `len`, its length, is over [`MAX_MESSAGE_BYTES`]; `head` is a short JSON text
    /// the request's id is read from (the shell's `{"id":…}`). Answered as
    /// [`Session::inbound`] answers a long message.
    pub fn inbound_over(&self, head: &str, len: usize) -> Step {
        let reply = jsonrpc::too_large(head, len, MAX_MESSAGE_BYTES);
        self.inbound_parsed(len.max(MAX_MESSAGE_BYTES.saturating_add(1)), Err(reply))
    }

    fn inbound_parsed(&self, size: usize, parsed: Result<Value, Value>) -> Step {
        let mut state = self.state.borrow_mut();
        match &mut *state {
            State::Closed => Step::Drop,
            State::Refused { reason, answered } => match parsed.as_ref().map(jsonrpc::classify) {
                Ok(Inbound::Request { id, .. }) => {
                    let reply = jsonrpc::error(&id, jsonrpc::UNAUTHORIZED, reason);
                    if std::mem::replace(answered, true) {
                        Step::Reply(reply)
                    } else {
                        Step::ReplyAndCloseSoon(reply, reason.clone())
                    }
                }
                _ => Step::Drop,
            },
            State::Open(_) => match parsed {
                Ok(v) => Step::Dispatch(v),
                Err(reply) => Step::Reply(reply),
            },
            State::Authorizing { buffer, bytes } => {
                let item = match parsed {
                    Ok(v) => Buffered::Message(v),
                    Err(reply) => Buffered::Reply(reply),
                };
                let total = bytes.saturating_add(size);
                if buffer.len() >= MAX_BUFFERED_MESSAGES || total > MAX_BUFFERED_BYTES {
                    *state = State::Closed;
                    return Step::Close(format!(
                        "more than {MAX_BUFFERED_MESSAGES} messages or {MAX_BUFFERED_BYTES} bytes sent before authorization completed"
                    ));
                }
                *bytes = total;
                buffer.push(item);
                Step::Buffered
            }
        }
    }

    /// Authorization finished. Only the first call acts; the port may have closed meanwhile.
    pub fn authorize(&self, access: Access) -> Authorized {
        let mut state = self.state.borrow_mut();
        let buffer = match std::mem::replace(&mut *state, State::Closed) {
            State::Authorizing { buffer, .. } => buffer,
            other => {
                *state = other;
                return Authorized::Flush(Vec::new());
            }
        };
        if access == Access::Granted {
            *state = State::Open(Phase::Uninitialized);
            return Authorized::Flush(buffer);
        }
        let reason = access.reason().to_owned();
        let mut replies = Vec::new();
        for item in &buffer {
            let Buffered::Message(msg) = item else {
                continue;
            };
            if let Inbound::Request { id, .. } = jsonrpc::classify(msg) {
                replies.push(jsonrpc::error(&id, jsonrpc::UNAUTHORIZED, &reason));
            }
        }
        *state = State::Refused {
            reason: reason.clone(),
            answered: !replies.is_empty(),
        };
        let close_after_ms = if replies.is_empty() {
            REFUSED_GRACE_MS
        } else {
            REFUSED_LINGER_MS
        };
        Authorized::Refuse {
            replies,
            reason,
            close_after_ms,
        }
    }

    pub fn phase(&self) -> Option<Phase> {
        match &*self.state.borrow() {
            State::Open(p) => Some(*p),
            _ => None,
        }
    }

    /// Moves an open session to Ready. Returns false when it is not open or already initialized.
    pub fn mark_initialized(&self, version: &'static str) -> bool {
        let mut state = self.state.borrow_mut();
        match &*state {
            State::Open(Phase::Uninitialized) => {
                *state = State::Open(Phase::Ready { version });
                true
            }
            _ => false,
        }
    }

    pub fn close(&self) {
        *self.state.borrow_mut() = State::Closed;
    }

    /// Refused ports linger briefly to answer; they are not connections.
    pub fn is_refused(&self) -> bool {
        matches!(&*self.state.borrow(), State::Refused { .. })
    }

    pub fn is_closed(&self) -> bool {
        matches!(&*self.state.borrow(), State::Closed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const HOST: &str = "mobcibglkcoacmddjpdoknlbbicjchlk";

    fn session() -> Session {
        Session::new(1, ExtensionId::parse(HOST).unwrap(), 0.0)
    }

    fn text(v: Value) -> String {
        v.to_string()
    }

    #[test]
    fn a_session_is_due_to_be_seen_at_first_then_once_a_minute() {
        let s = session();
        assert!(s.seen_due(1_000.0));
        assert!(!s.seen_due(1_000.0));
        assert!(!s.seen_due(1_000.0 + LAST_SEEN_GRANULARITY_MS - 1.0));
        assert!(s.seen_due(1_000.0 + LAST_SEEN_GRANULARITY_MS));
        // A clock set back does not silence it for the gap.
        assert!(s.seen_due(10.0));
        assert!(!s.seen_due(20.0));
        // Each session counts for itself.
        assert!(session().seen_due(20.0));
    }

    #[test]
    fn accept_checks_name_and_sender() {
        assert_eq!(
            accept("lumo:mcp", Some(HOST)).map(|id| id.as_str().to_owned()),
            Ok(HOST.to_owned())
        );
        assert_eq!(accept("lumo:mcp2", Some(HOST)), Err(Reject::WrongName));
        assert_eq!(accept("", Some(HOST)), Err(Reject::WrongName));
        assert_eq!(accept("lumo:mcp", None), Err(Reject::NoValidSender));
        assert_eq!(
            accept("lumo:mcp", Some("https://example.com")),
            Err(Reject::NoValidSender)
        );
    }

    #[test]
    fn buffers_in_order_then_flushes() {
        let s = session();
        let a = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize"});
        let b = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert_eq!(s.inbound(Some(&text(a.clone()))), Step::Buffered);
        assert_eq!(s.inbound(Some("{nope")), Step::Buffered);
        assert_eq!(s.inbound(Some(&text(b.clone()))), Step::Buffered);
        let Authorized::Flush(items) = s.authorize(Access::Granted) else {
            panic!()
        };
        assert_eq!(items.len(), 3);
        assert_eq!(items[0], Buffered::Message(a));
        assert!(matches!(&items[1], Buffered::Reply(r) if r["error"]["code"] == json!(-32700)));
        assert_eq!(items[2], Buffered::Message(b));
        assert_eq!(s.phase(), Some(Phase::Uninitialized));
        // After authorization, messages go straight through.
        assert!(matches!(s.inbound(Some("{\"x\":1}")), Step::Dispatch(_)));
        assert!(s.mark_initialized("2025-06-18"));
        assert!(!s.mark_initialized("2025-06-18"));
    }

    /// A message the shell did not copy whole (only its head) is answered as a long one is:
    /// −32600 naming the limit, with the id read from the head; before authorization it counts
    /// its whole length against the buffer's bound.
    #[test]
    fn a_message_read_only_by_its_head_is_refused_by_size() {
        let s = session();
        assert_eq!(s.authorize(Access::Granted), Authorized::Flush(vec![]));
        let head = r#"{"jsonrpc":"2.0","id":7,"method":"ping","params":{"pad":"xxxx"#;
        let Step::Reply(r) = s.inbound_over(head, 33_554_500) else {
            panic!()
        };
        assert_eq!(r["id"], json!(7));
        assert_eq!(r["error"]["code"], json!(-32600));
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("33554500 bytes is over the 1048576-byte limit"),
            "{r}"
        );
        let waiting = session();
        assert!(matches!(
            waiting.inbound_over(head, MAX_BUFFERED_BYTES + 1),
            Step::Close(_)
        ));
    }

    #[test]
    fn a_batch_sent_before_authorization_is_a_message_not_a_reply() {
        // A one-element batch looked exactly like a buffered error reply and was posted back to
        // its sender. It is a message: the server answers it (−32600, batches unsupported).
        let s = session();
        let batch = json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]);
        let error_lookalike =
            json!([{"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "x"}}]);
        assert_eq!(s.inbound(Some(&text(batch.clone()))), Step::Buffered);
        assert_eq!(
            s.inbound(Some(&text(error_lookalike.clone()))),
            Step::Buffered
        );
        let Authorized::Flush(items) = s.authorize(Access::Granted) else {
            panic!()
        };
        assert_eq!(
            items,
            vec![Buffered::Message(batch), Buffered::Message(error_lookalike)]
        );
    }

    #[test]
    fn refusal_answers_each_request_with_32001() {
        let s = session();
        s.inbound(Some(&text(
            json!({"jsonrpc": "2.0", "id": "a", "method": "initialize"}),
        )));
        s.inbound(Some(&text(
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        )));
        s.inbound(Some(&text(
            json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call"}),
        )));
        let Authorized::Refuse {
            replies,
            reason,
            close_after_ms,
        } = s.authorize(Access::NotAllowlisted)
        else {
            panic!()
        };
        assert!(reason.contains("allowlist"));
        // Answered: the port lingers only long enough for the rest of the burst.
        assert_eq!(close_after_ms, REFUSED_LINGER_MS);
        assert_eq!(replies.len(), 2);
        assert_eq!(replies[0]["id"], json!("a"));
        assert_eq!(replies[1]["id"], json!(7));
        assert!(replies.iter().all(|r| r["error"]["code"] == json!(-32001)));
        // Requests still in flight are answered too; the shell closes the port shortly.
        match s.inbound(Some(&text(
            json!({"jsonrpc": "2.0", "id": 8, "method": "ping"}),
        ))) {
            Step::Reply(r) => assert_eq!(
                (r["id"].clone(), r["error"]["code"].clone()),
                (json!(8), json!(-32001))
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(s.inbound(Some("{}")), Step::Drop);
        assert!(s.phase().is_none());
    }

    #[test]
    fn refusal_before_any_request_answers_the_first_one() {
        let s = session();
        s.inbound(Some(&text(
            json!({"jsonrpc": "2.0", "method": "notifications/x"}),
        )));
        // Nothing answered yet: the port waits for a request to answer, up to the grace.
        assert!(
            matches!(s.authorize(Access::EndpointOff), Authorized::Refuse { replies, close_after_ms, .. } if replies.is_empty() && close_after_ms == REFUSED_GRACE_MS)
        );
        assert_eq!(
            s.inbound(Some(&text(
                json!({"jsonrpc": "2.0", "method": "notifications/y"})
            ))),
            Step::Drop
        );
        match s.inbound(Some(&text(
            json!({"jsonrpc": "2.0", "id": 4, "method": "initialize"}),
        ))) {
            Step::ReplyAndCloseSoon(r, reason) => {
                assert_eq!(r["id"], json!(4));
                assert_eq!(r["error"]["code"], json!(-32001));
                assert!(reason.contains("turned off"));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            s.inbound(Some(&text(
                json!({"jsonrpc": "2.0", "id": 5, "method": "x"})
            ))),
            Step::Reply(_)
        ));
    }

    #[test]
    fn buffer_is_bounded() {
        let s = session();
        for _ in 0..MAX_BUFFERED_MESSAGES {
            assert_eq!(s.inbound(Some("{}")), Step::Buffered);
        }
        assert!(matches!(s.inbound(Some("{}")), Step::Close(_)));
        assert!(s.is_closed());

        let s = session();
        let big = format!("\"{}\"", "x".repeat(MAX_MESSAGE_BYTES - 2));
        assert_eq!(s.inbound(Some(&big)), Step::Buffered);
        assert_eq!(s.inbound(Some(&big)), Step::Buffered);
        assert!(matches!(s.inbound(Some(&big)), Step::Close(_)));
    }

    #[test]
    fn oversized_message_is_refused_unparsed() {
        let s = session();
        s.authorize(Access::Granted);
        let huge = "x".repeat(MAX_MESSAGE_BYTES + 1);
        assert!(
            matches!(s.inbound(Some(&huge)), Step::Reply(r) if r["error"]["code"] == json!(-32600))
        );
    }

    #[test]
    fn authorize_after_close_does_nothing() {
        let s = session();
        s.close();
        assert_eq!(s.authorize(Access::Granted), Authorized::Flush(Vec::new()));
        assert!(s.is_closed());
    }
}
