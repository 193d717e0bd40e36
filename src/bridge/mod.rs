//! The bridge wire: how the extension and the native bridge (`bridge/`) talk over a loopback
//! WebSocket. One implementation for both ends (the extension dials, the bridge accepts), sans-IO
//! in the manner of quinn-proto: [`Connection`] takes text frames and the time, and hands back
//! frames to send, events and a close reason. tokio (bridge) and the browser `WebSocket`
//! (extension) are shells around it.
//!
//! - [`frame`]: the envelope from the sibling protocol (`../shared/seeds/001_…`): request,
//!   response, notify, ping/pong; parsing bounded in size that never panics.
//! - [`connection`]: `hello`/`hello_ack` with [`PROTOCOL_VERSION`] (a mismatch is refused with a
//!   message naming both numbers), the hello deadline, and the in-flight table ([`inflight`]).
//! - [`trust`]: the proofs of the token each end gives (HMAC, compared in constant time) and
//!   the Host/Origin rules of each listener.

pub mod connection;
pub mod dialer;
pub mod frame;
pub mod inflight;
pub mod trust;

pub use connection::{Auth, CloseReason, Connection, Event, HelloAck, HelloInfo, Role};
pub use frame::{Frame, FrameError, WireError};

/// The wire version, carried in `hello` and echoed in `hello_ack`. Bump it on any change that an
/// older peer would misread; peers refuse a different number, never best-effort. 2: neither end
/// sends the token; each proves it holds it (`hello_proof`, `trust::proof`).
pub const PROTOCOL_VERSION: u64 = 2;

/// A socket that has not completed `hello` by then is dropped (seed 001: 10 s).
pub const HELLO_TIMEOUT_MS: u64 = 10_000;

/// Request types on the wire.
pub mod types {
    /// ext → bridge, the first request on a socket: `{protocol, nonce, extVersion, label}`.
    pub const HELLO: &str = "hello";
    /// The dialling end's second request, once the answer to its hello proved the accepting
    /// end holds the token: `{proof}`; its answer is the ack.
    pub const HELLO_PROOF: &str = "hello_proof";
    /// bridge → ext: run one tool of the catalogue. `{name, arguments}` → an MCP tool result.
    pub const CALL_TOOL: &str = "call_tool";
    /// forwarder → owner on the control port, the first request there. `{pid, version, nonce}`.
    pub const FWD_HELLO: &str = "fwd_hello";
    /// forwarder → owner: the owner's `bridge_status` answer.
    pub const BRIDGE_STATUS: &str = "bridge_status";
    /// A notify, ext → bridge when the link opens and whenever the user flips the write switch,
    /// and owner → forwarder likewise: `{writes}` ([`super::tools_payload`]). The bridge lists
    /// the write tools only while writes are on (or not told: an older extension).
    pub const TOOLS: &str = "tools";
    /// A notify, from the end that sent a request to the one answering it (bridge → ext, and
    /// forwarder → owner): `{id}`, that request's id. Its caller is gone (the MCP client sent
    /// `notifications/cancelled`, or closed): the answering end stops it where it can — a
    /// write waiting for the user's review is withdrawn, never applied — and an answer that
    /// still comes is dropped.
    pub const CANCEL: &str = "cancel";
}

/// The request id a [`types::CANCEL`] notify names, if it names one.
pub fn cancelled_id(payload: &serde_json::Value) -> Option<u64> {
    payload
        .get("id")
        .and_then(serde_json::Value::as_u64)
        .filter(|id| *id <= frame::MAX_ID)
}

/// The payload of a [`types::TOOLS`] notify.
pub fn tools_payload(writes: bool) -> serde_json::Value {
    serde_json::json!({ "writes": writes })
}

/// Reads a [`types::TOOLS`] payload: whether writes are on, `None` if it does not say.
pub fn writes_of(payload: &serde_json::Value) -> Option<bool> {
    payload.get("writes").and_then(serde_json::Value::as_bool)
}
