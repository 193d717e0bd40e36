//! What an internal op returns: its reply to the page and what the shell must do to open
//! sessions. Its own module so that op families outside `control` (`bridge_ops`) can return it
//! without importing the dispatcher that calls them.

use serde_json::Value;

/// What the shell must do besides answering the page.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Post `message` to these sessions.
    Notify { sessions: Vec<u64>, message: Value },
    /// Close these sessions' ports.
    Close { sessions: Vec<u64>, reason: String },
    /// Dial the local bridge the user just authorized (see `bridge_ops`).
    DialBridge,
    /// Close the local bridge link with this WebSocket close code.
    CloseBridge { code: u16, reason: String },
    /// Tell the local bridge whether writes are on (its tool list follows).
    BridgeTools { writes: bool },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub value: Value,
    pub effects: Vec<Effect>,
}

impl From<Value> for Reply {
    fn from(value: Value) -> Self {
        Reply {
            value,
            effects: Vec::new(),
        }
    }
}
