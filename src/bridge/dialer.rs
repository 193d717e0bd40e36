//! The extension's side of the link, as pure decisions: where the worker may dial (loopback
//! unless the user turned on the advanced switch), and what to do after a socket closes
//! (reconnect with backoff, retry slowly, or stop and forget the authorization).

use super::CloseReason;

/// Close code of the user's Disconnect (seed 002).
pub const USER_DISCONNECT: u16 = 4002;
/// Close code of a link the bridge replaced with a newer connection that passed the token
/// check (this extension in another browser or profile).
pub const REPLACED: u16 = 4003;
/// Keep-alive: a ping this often (Chrome keeps a worker alive while its WebSocket exchanges
/// messages, and stops an idle worker after 30 s).
pub const PING_INTERVAL_MS: u64 = 20_000;
/// Backoff after a lost connection: 1 s, 2 s, 4 s … capped here.
pub const MAX_BACKOFF_MS: u64 = 30_000;
/// After the bridge refused our hello for a reason that may pass (not the token).
pub const SLOW_RETRY_MS: u64 = 60_000;

/// Host names that are this machine. A page may link to the connect page with any `host`.
#[must_use]
pub fn is_loopback(host: &str) -> bool {
    ["127.0.0.1", "localhost", "[::1]", "::1"]
        .iter()
        .any(|l| host.eq_ignore_ascii_case(l))
}

/// Why the worker will not dial an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DialError {
    /// Not 1–65535.
    NotAPort(u64),
    /// Not a plain host name or address (a path, credentials or a query could ride along).
    NotAHost(String),
    /// Not this computer, and the user did not turn on "Allow other hosts".
    NotLoopback(String),
}

impl std::fmt::Display for DialError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DialError::NotAPort(port) => write!(f, "{port} is not a port (1–65535)"),
            DialError::NotAHost(host) => write!(
                f,
                "\"{}\" is not a host name or address",
                crate::text::ellipsize(host, 60)
            ),
            DialError::NotLoopback(host) => write!(
                f,
                "{host} is not this computer (loopback): refused. A bridge runs on 127.0.0.1; only turn on \"Allow other hosts\" if you run one elsewhere on purpose"
            ),
        }
    }
}

impl std::error::Error for DialError {}

/// The WebSocket URL for a bridge at `host:port`. Refuses a non-loopback host unless
/// `allow_remote` (the connect page's advanced switch), and any host that is not a plain name
/// or address (no path, credentials or query can ride along). The token is never in it.
pub fn dial_url(host: &str, port: u64, allow_remote: bool) -> Result<String, DialError> {
    let port = u16::try_from(port)
        .ok()
        .filter(|p| *p != 0)
        .ok_or(DialError::NotAPort(port))?;
    let host = if host == "::1" { "[::1]" } else { host };
    let plain = !host.is_empty()
        && host.len() <= 253
        && (host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
            || host == "[::1]");
    if !plain {
        return Err(DialError::NotAHost(host.to_owned()));
    }
    if !is_loopback(host) && !allow_remote {
        return Err(DialError::NotLoopback(host.to_owned()));
    }
    Ok(format!("ws://{host}:{port}"))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Dial again after this many milliseconds.
    After(u64),
    /// Stop. `forget`: drop the stored authorization (the user disconnected, or the token is
    /// wrong and can never become right: the bridge restarted with a new one).
    Stop { forget: bool },
}

/// What to do after the link closed for `reason`, `attempt` closes in a row without a
/// successful hello (0 for the first).
#[must_use]
pub fn after_close(reason: &CloseReason, attempt: u32) -> Retry {
    match reason {
        CloseReason::Local { code, .. } if *code == USER_DISCONNECT => Retry::Stop { forget: true },
        CloseReason::BadToken => Retry::Stop { forget: true },
        CloseReason::Rejected(why) if why.contains("token") => Retry::Stop { forget: true },
        // Dialling back at once would replace the newer link in turn, and the two would take
        // the bridge from each other every second, failing each other's calls. The newer one
        // keeps it; this one dials again at its next start, or on the user's click.
        CloseReason::Remote { code, .. } if *code == REPLACED => Retry::Stop { forget: false },
        // What listens on the port cannot prove the token: a bridge restarted with a new one,
        // or another program. Either way this authorization is no use there (it was sent
        // nothing); the user opens the connect link the bridge prints now.
        CloseReason::Impostor => Retry::Stop { forget: true },
        // Another program on the port, perhaps for a while: try again later, keeping the
        // authorization (it was sent nothing).
        CloseReason::ProtocolMismatch { .. }
        | CloseReason::RefusedUnproven
        | CloseReason::Rejected(_) => Retry::After(SLOW_RETRY_MS),
        CloseReason::Disconnected
        | CloseReason::Remote { .. }
        | CloseReason::HelloTimeout
        | CloseReason::Malformed(_)
        | CloseReason::Local { .. } => Retry::After(backoff(attempt)),
    }
}

#[must_use]
pub fn backoff(attempt: u32) -> u64 {
    1000u64
        .checked_shl(attempt.min(16))
        .unwrap_or(MAX_BACKOFF_MS)
        .min(MAX_BACKOFF_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_only_unless_allowed() {
        assert_eq!(
            dial_url("127.0.0.1", 17817, false).unwrap(),
            "ws://127.0.0.1:17817"
        );
        assert_eq!(dial_url("localhost", 1, false).unwrap(), "ws://localhost:1");
        assert_eq!(dial_url("::1", 9, false).unwrap(), "ws://[::1]:9");
        let e = dial_url("evil.example", 17817, false).unwrap_err();
        assert_eq!(e, DialError::NotLoopback("evil.example".into()));
        assert!(e.to_string().contains("loopback"), "{e}");
        assert!(dial_url("10.0.0.5", 17817, false).is_err());
        // 127.0.0.1.evil.example is a remote name.
        assert!(dial_url("127.0.0.1.evil.example", 17817, false).is_err());
        assert_eq!(
            dial_url("evil.example", 80, true).unwrap(),
            "ws://evil.example:80"
        );
        for bad in ["", "a/b", "a@b", "a:1", "a?b", "a b", "[::2]"] {
            assert!(dial_url(bad, 1, true).is_err(), "{bad}");
        }
        assert!(dial_url("127.0.0.1", 0, false).is_err());
        assert!(dial_url("127.0.0.1", 65536, false).is_err());
    }

    #[test]
    fn retries() {
        let user = CloseReason::Local {
            code: USER_DISCONNECT,
            reason: "x".into(),
        };
        assert_eq!(after_close(&user, 0), Retry::Stop { forget: true });
        assert_eq!(
            after_close(&CloseReason::BadToken, 0),
            Retry::Stop { forget: true }
        );
        let refused = CloseReason::Rejected("wrong or missing token: open the link".into());
        assert_eq!(after_close(&refused, 3), Retry::Stop { forget: true });
        assert_eq!(
            after_close(&CloseReason::Disconnected, 0),
            Retry::After(1000)
        );
        assert_eq!(
            after_close(&CloseReason::Disconnected, 3),
            Retry::After(8000)
        );
        assert_eq!(
            after_close(&CloseReason::Disconnected, 40),
            Retry::After(MAX_BACKOFF_MS)
        );
        let mismatch = CloseReason::ProtocolMismatch {
            ours: 1,
            theirs: Some(2),
            by_peer: true,
        };
        assert_eq!(after_close(&mismatch, 0), Retry::After(SLOW_RETRY_MS));
        assert_eq!(
            after_close(&CloseReason::Impostor, 0),
            Retry::Stop { forget: true }
        );
        let replaced = CloseReason::Remote {
            code: REPLACED,
            reason: "replaced by a newer connection".into(),
        };
        assert_eq!(after_close(&replaced, 0), Retry::Stop { forget: false });
        let going = CloseReason::Remote {
            code: 1001,
            reason: "going away".into(),
        };
        assert_eq!(after_close(&going, 0), Retry::After(1000));
    }
}
