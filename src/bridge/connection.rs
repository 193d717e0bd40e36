//! One bridge socket as a state machine, for either end. It takes inbound text frames and the
//! time (milliseconds, from the shell) and produces frames to send ([`Connection::poll_transmit`]),
//! events ([`Connection::poll_event`]) and, once it is over, a [`CloseReason`] whose code the
//! shell puts on the WebSocket close frame.
//!
//! ```text
//!  accept: AwaitHello ──hello{nonce}──► AwaitProof ──hello_proof ok──► Open ──close──► Closed
//!            │  ├─ wrong protocol, no nonce ─► ack{ok:false, reason} ─► Closed
//!            │  │                 └─ wrong proof ─► ack{ok:false, reason} ─► Closed
//!            │  ├─ any other frame first ────────────────────────────► Closed
//!            └──── no hello and proof by the deadline (10 s) ────────► Closed
//!  dial:   AwaitAck ──challenge with the bridge's proof──► AwaitConfirm ──ack ok──► Open
//!            └─ refused / other protocol / a wrong proof (an impostor) / deadline ─► Closed
//! ```
//!
//! Neither end sends the token (`trust::proof`): the dialling end sends a nonce in its hello;
//! the accepting end answers with its own nonce and its proof of the token; the dialling end
//! checks it (an impostor learns nothing and gets nothing) and sends its proof in
//! `hello_proof`; only then does the accepting end send its ack with what it tells an
//! authenticated peer (read-only mode; on the control port, the extension token).
//!
//! The same machine serves the extension socket (`hello`) and the control port between bridge
//! processes (`fwd_hello`): only the hello's type name differs.

use super::frame::{self, Frame, FrameError, WireError};
use super::inflight::{AddError, Failure, InFlight};
use super::trust::{self, ProofRole};
use super::{types, HELLO_TIMEOUT_MS, PROTOCOL_VERSION};
use serde_json::{json, Map, Value};
use std::collections::VecDeque;
use std::fmt;

/// What a handshake is proven with: the token both ends hold, this end's nonce (fresh for this
/// socket, `trust::nonce_ok`) and the port dialled (the one listened on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Auth {
    pub token: String,
    pub nonce: String,
    pub port: u16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// The listening end (the bridge; the owner on the control port).
    Accept,
    /// The dialling end (the extension; a forwarder). `hello` is sent as the first frame, with
    /// `protocol` and the nonce added.
    Dial { hello: Map<String, Value> },
}

/// What the accepting end learnt from an accepted hello (its nonce removed).
#[derive(Debug, Clone, PartialEq)]
pub struct HelloInfo {
    pub payload: Map<String, Value>,
}

/// An accepted `hello_ack`, as the dialling end saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct HelloAck {
    pub server_version: String,
    pub result: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Accept side: the peer's hello was accepted; requests may flow.
    Hello(HelloInfo),
    /// Dial side: the ack arrived and the versions agree.
    Ready(HelloAck),
    /// The peer asks something; answer with [`Connection::respond`].
    Request {
        id: u64,
        kind: String,
        payload: Value,
    },
    Notify {
        kind: String,
        payload: Value,
    },
    /// An answer to one of our requests.
    Response {
        id: u64,
        kind: String,
        outcome: Result<Value, WireError>,
    },
    /// One of our requests will get no answer.
    Failed {
        id: u64,
        kind: String,
        failure: Failure,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloseReason {
    /// Different wire versions. `theirs` is `None` when the peer sent none (an older release).
    ProtocolMismatch {
        ours: u64,
        theirs: Option<u64>,
        /// Which end said it: true when the peer refused us.
        by_peer: bool,
    },
    /// The hello's proof of the token was missing or wrong.
    BadToken,
    /// The end we dialled could not prove it holds the token: not the bridge that printed the
    /// connect link (something else listens on its port). It was sent nothing.
    Impostor,
    /// The peer refused our hello before proving it holds the token: not shown to be a Lumo
    /// bridge, so none of its words are kept (they would reach the agent and the user).
    RefusedUnproven,
    /// The peer, having proven it holds the token, refused our proof (its words, on one line).
    Rejected(String),
    /// No hello (or ack) before the deadline.
    HelloTimeout,
    /// A frame that does not parse, or a frame out of order.
    Malformed(String),
    /// Closed by this end (e.g. the user's Disconnect, or a newer connection replaced it).
    Local { code: u16, reason: String },
    /// The other end closed the socket with this code (4002: the user's Disconnect).
    Remote { code: u16, reason: String },
    /// The transport went away.
    Disconnected,
}

impl CloseReason {
    /// The WebSocket close code. 4002 is the sibling protocol's "disconnected by the user".
    pub fn code(&self) -> u16 {
        match self {
            Self::ProtocolMismatch { .. } | Self::Malformed(_) => 4000,
            Self::BadToken | Self::Impostor | Self::RefusedUnproven | Self::Rejected(_) => 4001,
            Self::HelloTimeout => 4008,
            Self::Local { code, .. } | Self::Remote { code, .. } => *code,
            Self::Disconnected => 1006,
        }
    }
}

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ProtocolMismatch {
                ours,
                theirs: Some(theirs),
                ..
            } => write!(
                f,
                "protocol mismatch: this end speaks bridge protocol {ours}, the other end speaks protocol {theirs}; update {}",
                if ours < theirs { "this end" } else { "the other end" }
            ),
            Self::ProtocolMismatch { ours, theirs: None, .. } => write!(
                f,
                "protocol mismatch: this end speaks bridge protocol {ours}, the other end sent no protocol version (it predates protocol 1); update it"
            ),
            Self::BadToken => write!(f, "wrong or missing token: open the connect link the bridge printed"),
            Self::Impostor => f.write_str("the program on this port could not prove it holds the token: it is not the bridge that printed the connect link (nothing was sent to it)"),
            Self::RefusedUnproven => f.write_str("the program on this port refused the hello without proving it is a Lumo bridge (it may be another program listening there)"),
            Self::Rejected(reason) => write!(f, "refused by the other end: {reason}"),
            Self::HelloTimeout => write!(
                f,
                "no hello within the deadline ({} s)",
                HELLO_TIMEOUT_MS / 1000
            ),
            Self::Malformed(why) => write!(f, "protocol error: {why}"),
            Self::Local { reason, .. } => f.write_str(reason),
            Self::Remote { code: 4002, .. } => {
                f.write_str("the user disconnected the extension (close code 4002)")
            }
            Self::Remote { code, reason } if reason.is_empty() => {
                write!(f, "closed by the other end (code {code})")
            }
            Self::Remote { code, reason } => {
                write!(f, "closed by the other end (code {code}: {reason})")
            }
            Self::Disconnected => f.write_str("connection lost"),
        }
    }
}

/// A peer's words as they go into a message printed to a terminal or read by an agent: one
/// line, with no control (newline, ESC…), bidirectional or invisible character, each replaced by
/// U+FFFD, so they cannot forge a line (a connect link) or drive the terminal.
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| {
            if crate::scripts::names::is_invisible(c) || matches!(c, '\u{2028}' | '\u{2029}') {
                '\u{FFFD}'
            } else {
                c
            }
        })
        .collect()
}

/// Largest frame taken before the link is open. The handshake's frames (hello, challenge,
/// proof, acks, a refusal with its bounded reason) are under 3 KiB; the largest, a refusal,
/// carries a reason of at most [`frame::MAX_ERROR_MESSAGE`] bytes.
pub const MAX_HANDSHAKE_FRAME_BYTES: usize = 16 * 1024;

/// The error code of an answer too large for the link (see [`Connection::respond`]).
pub const RESULT_TOO_LARGE: &str = "RESULT_TOO_LARGE";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestError {
    NotOpen,
    TooMany,
    /// The request's frame would be over the peer's limit, which would close the link (and
    /// fail every other request on it): refused here instead, nothing sent.
    TooLarge {
        len: usize,
    },
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotOpen => f.write_str("the connection is not open"),
            Self::TooMany => write!(
                f,
                "too many requests in flight (at most {})",
                super::inflight::MAX_IN_FLIGHT
            ),
            Self::TooLarge { len } => write!(
                f,
                "the request is {len} bytes, over the link's limit of {} bytes; nothing was sent",
                frame::MAX_FRAME_BYTES
            ),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    AwaitHello {
        deadline: u64,
    },
    /// Accept side: the challenge is sent; the peer's proof is next.
    AwaitProof {
        deadline: u64,
    },
    /// Dial side: the hello is sent; the challenge (with the accepting end's proof) is next.
    AwaitAck {
        id: u64,
        deadline: u64,
    },
    /// Dial side: our proof is sent; the ack is next.
    AwaitConfirm {
        deadline: u64,
    },
    Open,
    Closed,
}

#[derive(Debug)]
pub struct Connection {
    role: Role,
    auth: Auth,
    /// The peer's nonce, once its hello or challenge gave it.
    peer_nonce: String,
    /// Accept side: the hello, held until the peer has proven it holds the token.
    pending_hello: Option<Map<String, Value>>,
    hello_type: &'static str,
    version: String,
    ack_extra: Map<String, Value>,
    state: State,
    inflight: InFlight,
    transmit: VecDeque<String>,
    events: VecDeque<Event>,
    close: Option<CloseReason>,
}

/// The hello's own id on the dialling side; in-flight ids start at 1 in their own space, but the
/// hello is answered before any of them exist.
const HELLO_ID: u64 = 0;

impl Connection {
    /// The listening end. `version` is this program's version (for messages), `ack_extra` fields
    /// added to an accepting ack (e.g. read-only mode), `hello_timeout_ms` normally
    /// [`HELLO_TIMEOUT_MS`].
    pub fn accept(
        hello_type: &'static str,
        auth: Auth,
        version: &str,
        ack_extra: Map<String, Value>,
        now: u64,
        hello_timeout_ms: u64,
    ) -> Self {
        Connection {
            role: Role::Accept,
            auth,
            peer_nonce: String::new(),
            pending_hello: None,
            hello_type,
            version: version.to_string(),
            ack_extra,
            state: State::AwaitHello {
                deadline: now.saturating_add(hello_timeout_ms),
            },
            inflight: InFlight::new(),
            transmit: VecDeque::new(),
            events: VecDeque::new(),
            close: None,
        }
    }

    /// The dialling end: queues the hello (with `protocol` and the nonce set) as the first frame.
    pub fn dial(
        hello_type: &'static str,
        mut hello: Map<String, Value>,
        auth: Auth,
        version: &str,
        now: u64,
        hello_timeout_ms: u64,
    ) -> Self {
        hello.insert("protocol".into(), json!(PROTOCOL_VERSION));
        hello.insert("nonce".into(), json!(auth.nonce));
        let first = frame::encode(Frame::Request {
            id: HELLO_ID,
            kind: hello_type.to_string(),
            payload: Value::Object(hello.clone()),
        });
        Connection {
            role: Role::Dial { hello },
            auth,
            peer_nonce: String::new(),
            pending_hello: None,
            hello_type,
            version: version.to_string(),
            ack_extra: Map::new(),
            state: State::AwaitAck {
                id: HELLO_ID,
                deadline: now.saturating_add(hello_timeout_ms),
            },
            inflight: InFlight::new(),
            transmit: VecDeque::from([first]),
            events: VecDeque::new(),
            close: None,
        }
    }

    pub fn is_open(&self) -> bool {
        self.state == State::Open
    }

    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    /// Why it closed, once it has.
    pub fn close_reason(&self) -> Option<&CloseReason> {
        self.close.as_ref()
    }

    pub fn poll_transmit(&mut self) -> Option<String> {
        self.transmit.pop_front()
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When [`Connection::handle_timeout`] should next be called.
    pub fn poll_timeout(&self) -> Option<u64> {
        match self.state {
            State::AwaitHello { deadline }
            | State::AwaitProof { deadline }
            | State::AwaitAck { deadline, .. }
            | State::AwaitConfirm { deadline } => Some(deadline),
            State::Open => self.inflight.next_deadline(),
            State::Closed => None,
        }
    }

    /// The hello deadline and request timeouts, decided from the time the shell passes in.
    pub fn handle_timeout(&mut self, now: u64) {
        match self.state {
            State::AwaitHello { deadline }
            | State::AwaitProof { deadline }
            | State::AwaitAck { deadline, .. }
            | State::AwaitConfirm { deadline }
                if now >= deadline =>
            {
                self.finish(CloseReason::HelloTimeout);
            }
            State::Open => {
                for (id, p, failure) in self.inflight.expire(now) {
                    self.events.push_back(Event::Failed {
                        id,
                        kind: p.kind,
                        failure,
                    });
                }
            }
            _ => {}
        }
    }

    /// One inbound text frame.
    pub fn handle_text(&mut self, text: &str) {
        if self.state == State::Closed {
            return;
        }
        // Before the peer has proven the token, a frame is only a handshake message: refused
        // unparsed when larger, so an unproven socket cannot make us parse and hold megabytes.
        if text.len() > self.max_frame_len() {
            return self.handle_too_large(text.len());
        }
        match frame::parse(text) {
            Ok(f) => self.handle_frame(f),
            Err(e) => self.malformed(&e),
        }
    }

    /// The longest text frame taken now: [`MAX_HANDSHAKE_FRAME_BYTES`] until the link is open,
    /// then [`frame::MAX_FRAME_BYTES`]. A shell that sees a frame's length before its text (the
    /// browser's `WebSocket`, whose messages have no size limit) refuses a longer one with
    /// [`Connection::handle_too_large`] instead of copying it.
    pub fn max_frame_len(&self) -> usize {
        if self.state == State::Open {
            frame::MAX_FRAME_BYTES
        } else {
            MAX_HANDSHAKE_FRAME_BYTES
        }
    }

    /// A frame of at least `len` bytes, over [`Connection::max_frame_len`], that the shell did
    /// not copy: the link closes as [`Connection::handle_text`] would close it.
    pub fn handle_too_large(&mut self, len: usize) {
        match self.state {
            State::Closed => {}
            State::Open => self.malformed(&FrameError::TooLarge { len }),
            _ => {
                let why = format!(
                    "a {len}-byte frame during the handshake (at most {MAX_HANDSHAKE_FRAME_BYTES})"
                );
                self.finish(CloseReason::Malformed(why));
            }
        }
    }

    /// The transport closed: every in-flight request fails at once.
    pub fn handle_disconnect(&mut self) {
        self.finish(CloseReason::Disconnected);
    }

    /// The other end sent a close frame: like a disconnect, but the reason says who and why.
    /// Its words are kept only from a peer that proved it holds the token (the link was open).
    /// Nor its code before then: 4003 ("a newer link replaced you") stops the extension dialling
    /// until its next start, which whatever squats the port must not be able to say; before the
    /// proof a close is a lost connection, retried with backoff.
    pub fn handle_close(&mut self, code: u16, reason: &str) {
        if self.state != State::Open {
            return self.finish(CloseReason::Disconnected);
        }
        // A close reason is at most 123 bytes on the wire; bound what a peer can make us keep.
        let reason = one_line(&crate::text::ellipsize(reason, 123));
        self.finish(CloseReason::Remote { code, reason });
    }

    /// Closes from this end (the shell then closes the socket with `code`).
    pub fn close(&mut self, code: u16, reason: &str) {
        self.finish(CloseReason::Local {
            code,
            reason: reason.to_string(),
        });
    }

    /// Sends a request; its answer or failure comes back as an event with this id.
    pub fn request(
        &mut self,
        kind: &str,
        payload: Value,
        now: u64,
        timeout_ms: u64,
    ) -> Result<u64, RequestError> {
        if self.state != State::Open {
            return Err(RequestError::NotOpen);
        }
        let id = self
            .inflight
            .add(kind, &payload, now, timeout_ms)
            .map_err(|AddError::Full| RequestError::TooMany)?;
        let request = Frame::Request {
            id,
            kind: kind.to_string(),
            payload,
        };
        match frame::encode_within(request, frame::MAX_FRAME_BYTES) {
            Ok(text) => {
                self.transmit.push_back(text);
                Ok(id)
            }
            Err(len) => {
                let _ = self.inflight.resolve(id);
                Err(RequestError::TooLarge { len })
            }
        }
    }

    /// Answers a request the peer made. An answer over the frame limit would make the peer
    /// close the link, failing every other request on it: that request gets
    /// [`RESULT_TOO_LARGE`] instead, saying the request was carried out.
    pub fn respond(&mut self, id: u64, outcome: Result<Value, WireError>) {
        if self.state != State::Open {
            return;
        }
        let text = match frame::encode_within(Frame::Response { id, outcome }, frame::MAX_FRAME_BYTES) {
            Ok(text) => text,
            Err(len) => frame::encode(Frame::Response {
                id,
                outcome: Err(WireError::new(
                    RESULT_TOO_LARGE,
                    format!(
                        "the request was carried out, but its answer is {len} bytes, over the {} bytes the link carries, so it was not sent (for try_script: less console output, or no allFrames)",
                        frame::MAX_FRAME_BYTES
                    ),
                )),
            }),
        };
        self.transmit.push_back(text);
    }

    pub fn notify(&mut self, kind: &str, payload: Value) {
        if self.state == State::Open && frame::is_type(kind) {
            self.transmit.push_back(frame::encode(Frame::Notify {
                kind: kind.to_string(),
                payload,
            }));
        }
    }

    pub fn ping(&mut self) {
        if self.state == State::Open {
            self.transmit.push_back(frame::encode(Frame::Ping));
        }
    }

    fn handle_frame(&mut self, f: Frame) {
        match (self.state, f) {
            (State::AwaitHello { .. }, Frame::Request { id, kind, payload })
                if kind == self.hello_type =>
            {
                self.on_hello(id, payload);
            }
            (State::AwaitHello { .. }, _) => {
                let why = format!("expected {} first", self.hello_type);
                self.finish(CloseReason::Malformed(why));
            }
            (State::AwaitProof { .. }, Frame::Request { id, kind, payload })
                if kind == types::HELLO_PROOF =>
            {
                self.on_proof(id, &payload);
            }
            (State::AwaitProof { .. }, _) => {
                let why = format!("expected {} after {}", types::HELLO_PROOF, self.hello_type);
                self.finish(CloseReason::Malformed(why));
            }
            (State::AwaitAck { id: want, .. }, Frame::Response { id, outcome }) if id == want => {
                self.on_challenge(outcome);
            }
            (State::AwaitConfirm { .. }, Frame::Response { id, outcome }) if id == HELLO_ID => {
                self.on_ack(outcome);
            }
            (State::AwaitAck { .. } | State::AwaitConfirm { .. }, _) => {
                let why = format!("expected the answer to {} first", self.hello_type);
                self.finish(CloseReason::Malformed(why));
            }
            (State::Open, Frame::Request { id, kind, .. }) if kind == self.hello_type => {
                let e = WireError::new("ALREADY_OPEN", format!("{kind} was already accepted"));
                self.respond(id, Err(e));
            }
            (State::Open, Frame::Request { id, kind, payload }) => {
                self.events.push_back(Event::Request { id, kind, payload });
            }
            (State::Open, Frame::Response { id, outcome }) => {
                // A late answer to a request that already timed out finds nothing: ignored.
                if let Some(p) = self.inflight.resolve(id) {
                    self.events.push_back(Event::Response {
                        id,
                        kind: p.kind,
                        outcome,
                    });
                }
            }
            (State::Open, Frame::Notify { kind, payload }) => {
                self.events.push_back(Event::Notify { kind, payload });
            }
            (State::Open, Frame::Ping) => {
                self.transmit.push_back(frame::encode(Frame::Pong));
            }
            (State::Open, Frame::Pong) | (State::Closed, _) => {}
        }
    }

    fn on_hello(&mut self, id: u64, payload: Value) {
        if self.role != Role::Accept {
            return;
        }
        let Value::Object(mut hello) = payload else {
            return self.refuse(
                id,
                CloseReason::Malformed("the hello payload is not an object".into()),
            );
        };
        let theirs = hello.get("protocol").and_then(Value::as_u64);
        if theirs != Some(PROTOCOL_VERSION) {
            let reason = CloseReason::ProtocolMismatch {
                ours: PROTOCOL_VERSION,
                theirs,
                by_peer: false,
            };
            return self.refuse(id, reason);
        }
        let nonce = match hello.remove("nonce") {
            Some(Value::String(n)) if trust::nonce_ok(&n) => n,
            _ => {
                let why = "the hello carries no valid nonce".to_owned();
                return self.refuse(id, CloseReason::Malformed(why));
            }
        };
        // A token sent in the clear (an older peer) is never kept.
        hello.remove("token");
        let proof = self.proof(ProofRole::Accept, &nonce, &self.auth.nonce);
        let challenge = json!({
            "ok": true,
            "protocol": PROTOCOL_VERSION,
            "serverVersion": self.version,
            "nonce": self.auth.nonce,
            "proof": proof,
        });
        self.transmit.push_back(frame::encode(Frame::Response {
            id,
            outcome: Ok(challenge),
        }));
        let deadline = match self.state {
            State::AwaitHello { deadline } => deadline,
            _ => 0,
        };
        self.state = State::AwaitProof { deadline };
        self.peer_nonce = nonce;
        self.pending_hello = Some(hello);
    }

    /// `role`'s proof of this socket's token for these nonces (`trust::proof`).
    fn proof(&self, role: ProofRole, dial_nonce: &str, accept_nonce: &str) -> String {
        let a = &self.auth;
        trust::proof(
            &a.token,
            role,
            self.hello_type,
            a.port,
            dial_nonce,
            accept_nonce,
        )
    }

    /// Whether `presented` is `role`'s proof for these nonces (`trust::proof_ok`).
    fn proven(
        &self,
        presented: &str,
        role: ProofRole,
        dial_nonce: &str,
        accept_nonce: &str,
    ) -> bool {
        let a = &self.auth;
        trust::proof_ok(
            presented,
            &a.token,
            role,
            self.hello_type,
            a.port,
            dial_nonce,
            accept_nonce,
        )
    }

    /// Accept side: the peer's proof that it holds the token; only then the ack and `Hello`.
    fn on_proof(&mut self, id: u64, payload: &Value) {
        let presented = payload.get("proof").and_then(Value::as_str).unwrap_or("");
        if !self.proven(
            presented,
            ProofRole::Dial,
            &self.peer_nonce,
            &self.auth.nonce,
        ) {
            return self.refuse(id, CloseReason::BadToken);
        }
        let mut ack = self.ack_extra.clone();
        ack.insert("ok".into(), json!(true));
        ack.insert("protocol".into(), json!(PROTOCOL_VERSION));
        ack.insert("serverVersion".into(), json!(self.version));
        self.transmit.push_back(frame::encode(Frame::Response {
            id,
            outcome: Ok(Value::Object(ack)),
        }));
        self.state = State::Open;
        let hello = self.pending_hello.take().unwrap_or_default();
        self.events
            .push_back(Event::Hello(HelloInfo { payload: hello }));
    }

    /// Sends the refusing ack (`ok: false` with the reason, as seed 001 shapes it), then closes.
    fn refuse(&mut self, id: u64, reason: CloseReason) {
        let ack = json!({
            "ok": false,
            "protocol": PROTOCOL_VERSION,
            "serverVersion": self.version,
            "reason": reason.to_string(),
        });
        self.transmit.push_back(frame::encode(Frame::Response {
            id,
            outcome: Ok(ack),
        }));
        self.finish(reason);
    }

    /// Dial side: the accepting end's answer to the hello. A refusal or another protocol ends
    /// here as an ack would; an accepting answer must carry the peer's nonce and its proof of
    /// the token, and only then is ours sent.
    fn on_challenge(&mut self, outcome: Result<Value, WireError>) {
        let (result, _) = match self.accepted(outcome) {
            Ok(r) => r,
            // Whatever listens may word a refusal as it likes (a fake connect link, say): an
            // end that has not proven the token is not quoted.
            Err(CloseReason::Rejected(_)) => return self.finish(CloseReason::RefusedUnproven),
            Err(reason) => return self.finish(reason),
        };
        let Some(nonce) = result
            .get("nonce")
            .and_then(Value::as_str)
            .filter(|n| trust::nonce_ok(n))
        else {
            let why = "the answer to the hello carries no valid nonce".to_owned();
            return self.finish(CloseReason::Malformed(why));
        };
        let presented = result.get("proof").and_then(Value::as_str).unwrap_or("");
        if !self.proven(presented, ProofRole::Accept, &self.auth.nonce, nonce) {
            return self.finish(CloseReason::Impostor);
        }
        let proof = self.proof(ProofRole::Dial, &self.auth.nonce, nonce);
        self.peer_nonce = nonce.to_owned();
        self.transmit.push_back(frame::encode(Frame::Request {
            id: HELLO_ID,
            kind: types::HELLO_PROOF.to_owned(),
            payload: json!({ "proof": proof }),
        }));
        let deadline = match self.state {
            State::AwaitAck { deadline, .. } => deadline,
            _ => 0,
        };
        self.state = State::AwaitConfirm { deadline };
    }

    /// An answer to the hello or the proof that accepts (`ok: true`, our protocol), with the
    /// peer's version; else why the link ends.
    fn accepted(
        &self,
        outcome: Result<Value, WireError>,
    ) -> Result<(Map<String, Value>, String), CloseReason> {
        let result = match outcome {
            Ok(Value::Object(r)) => r,
            Ok(_) => return Err(CloseReason::Malformed("the ack is not an object".into())),
            Err(e) => return Err(CloseReason::Rejected(one_line(&e.to_string()))),
        };
        let theirs = result.get("protocol").and_then(Value::as_u64);
        let server_version = result
            .get("serverVersion")
            .and_then(Value::as_str)
            .map(|s| frame::clip(s, 64))
            .unwrap_or_default();
        // The version rule first: an older peer's refusal may not be worded for us.
        if theirs != Some(PROTOCOL_VERSION) {
            return Err(CloseReason::ProtocolMismatch {
                ours: PROTOCOL_VERSION,
                theirs,
                by_peer: true,
            });
        }
        if result.get("ok") != Some(&Value::Bool(true)) {
            let reason = result
                .get("reason")
                .and_then(Value::as_str)
                .unwrap_or("no reason given");
            return Err(CloseReason::Rejected(one_line(&frame::clip(
                reason,
                frame::MAX_ERROR_MESSAGE,
            ))));
        }
        Ok((result, server_version))
    }

    fn on_ack(&mut self, outcome: Result<Value, WireError>) {
        let (result, server_version) = match self.accepted(outcome) {
            Ok(r) => r,
            Err(reason) => return self.finish(reason),
        };
        self.state = State::Open;
        self.events.push_back(Event::Ready(HelloAck {
            server_version,
            result,
        }));
    }

    fn malformed(&mut self, e: &FrameError) {
        self.finish(CloseReason::Malformed(e.to_string()));
    }

    /// Enters Closed once; every in-flight request fails at once.
    fn finish(&mut self, reason: CloseReason) {
        if self.state == State::Closed {
            return;
        }
        self.state = State::Closed;
        for (id, p, _) in self.inflight.disconnect() {
            self.events.push_back(Event::Failed {
                id,
                kind: p.kind,
                failure: Failure::Disconnected,
            });
        }
        self.close = Some(reason);
    }
}

#[cfg(test)]
mod tests;
