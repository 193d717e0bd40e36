//! Why a request over a link got no result, as the agent is told it: a code to branch on and a
//! message to read. Before, every failure was `NOT_CONNECTED`, so an agent that branches on the
//! code took a write that timed out (and may have happened) for one that never left.

use lumo_userscripts::bridge::connection::{RequestError, RESULT_TOO_LARGE};
use lumo_userscripts::bridge::WireError;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallError {
    pub code: String,
    /// The HTTP-like status of the sibling protocols, beside the code.
    pub status: u16,
    pub message: String,
}

impl CallError {
    pub fn new(code: &str, status: u16, message: impl Into<String>) -> Self {
        CallError {
            code: code.to_owned(),
            status,
            message: message.into(),
        }
    }

    /// No link, or it closed: the extension cannot be asked now.
    pub fn not_connected(message: impl Into<String>) -> Self {
        Self::new("NOT_CONNECTED", 503, message)
    }

    /// Sent, and no answer in time: it may have happened.
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new("TIMEOUT", 504, message)
    }

    /// The other end's own error, its code kept (the owning bridge passes the extension's on).
    pub fn from_wire(e: &WireError) -> Self {
        let status = match e.code.as_str() {
            "NOT_CONNECTED" => 503,
            "TIMEOUT" => 504,
            "BUSY" => 429,
            "PAYLOAD_TOO_LARGE" => 413,
            c if c == RESULT_TOO_LARGE => 413,
            _ => 502,
        };
        Self::new(&e.code, status, e.message.clone())
    }

    /// This end would not send it.
    pub fn not_sent(e: RequestError) -> Self {
        match e {
            RequestError::NotOpen => Self::not_connected(e.to_string()),
            RequestError::TooMany => Self::new("BUSY", 429, e.to_string()),
            RequestError::TooLarge { .. } => Self::new("PAYLOAD_TOO_LARGE", 413, e.to_string()),
        }
    }

    pub fn to_wire(&self) -> WireError {
        WireError::new(&self.code, self.message.clone())
    }

    /// The same error, its message prefixed with where it happened.
    #[must_use]
    pub fn context(mut self, prefix: &str) -> Self {
        self.message = format!("{prefix}{}", self.message);
        self
    }
}

/// A wait in seconds for a message: whole when it is ("30"), else to a tenth ("0.6").
pub fn seconds(d: std::time::Duration) -> String {
    if d.subsec_millis() == 0 {
        d.as_secs().to_string()
    } else {
        format!("{:.1}", d.as_secs_f64())
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failure_keeps_a_code_of_its_own() {
        assert_eq!(CallError::timeout("x").code, "TIMEOUT");
        assert_eq!(CallError::not_sent(RequestError::TooMany).status, 429);
        assert_eq!(
            CallError::not_sent(RequestError::TooLarge { len: 9 }).code,
            "PAYLOAD_TOO_LARGE"
        );
        let w = WireError::new(RESULT_TOO_LARGE, "carried out");
        let e = CallError::from_wire(&w);
        assert_eq!((e.code.as_str(), e.status), (RESULT_TOO_LARGE, 413));
        // Through a second link (forwarder → owner) the code survives.
        assert_eq!(CallError::from_wire(&e.to_wire()), e);
        assert_eq!(
            CallError::from_wire(&WireError::new("ODD", "m")).status,
            502
        );
        assert_eq!(seconds(std::time::Duration::from_millis(600)), "0.6");
        assert_eq!(seconds(std::time::Duration::from_secs(30)), "30");
    }
}
