//! Who may talk to the bridge: pure decisions, used by the native bridge's listeners (and
//! testable without a socket). Seed 002's threat table is the specification:
//!
//! - another local process needs the token: 256 random bits, compared in constant time
//!   ([`token_eq`]), never in a frame or the WebSocket URL (the connect link itself stays in
//!   Chrome's history, in the user's profile: README, "Token leakage");
//! - a web page opening the WebSocket is refused by `Origin`: only `chrome-extension://<id>`
//!   ([`ws_origin_allowed`]), optionally pinned to one id;
//! - DNS rebinding is refused by `Host`: loopback names or the configured host ([`host_allowed`]);
//! - the control port between bridge processes refuses any `Origin` ([`control_origin_allowed`]):
//!   browsers always send one, native processes do not;
//! - the HTTP transport refuses a browser `Origin` unless the user allowed it
//!   ([`http_origin_allowed`]).

use crate::ids::{is_extension_id, ExtensionId};
use hmac::{Hmac, Mac};
use subtle::ConstantTimeEq;

/// Tokens from `--token` or the environment: long enough to be unguessable, and made of
/// characters that need no escaping in the connect link's query string.
pub const MIN_TOKEN_CHARS: usize = 32;
pub const MAX_TOKEN_CHARS: usize = 256;

/// Compares a presented token with ours in time independent of where they differ. The length is
/// not secret (generated tokens are always 64 hex characters).
pub fn token_eq(presented: &str, expected: &str) -> bool {
    bool::from(presented.as_bytes().ct_eq(expected.as_bytes()))
}

/// Each end proves it holds the token without sending it: the dialling end could otherwise
/// hand it to whatever listens on the port (another local process, while the bridge is not
/// running), and then serve that process's calls. A proof is HMAC-SHA256 keyed by the token
/// over the role, the hello's type, the port dialled and both ends' nonces, so it is good for
/// this one handshake only, cannot be reflected to the other role, and cannot be relayed to a
/// bridge on another port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProofRole {
    /// The listening end (the bridge; the owner on the control port).
    Accept,
    /// The dialling end (the extension; a forwarder).
    Dial,
}

/// Nonces are 16–128 characters of `A-Z a-z 0-9 -`: fresh per handshake (the shells use 244
/// random bits or more), bounded so a peer cannot make the proof hash megabytes.
pub const MIN_NONCE_CHARS: usize = 16;
pub const MAX_NONCE_CHARS: usize = 128;

#[must_use]
pub fn nonce_ok(nonce: &str) -> bool {
    (MIN_NONCE_CHARS..=MAX_NONCE_CHARS).contains(&nonce.len())
        && nonce
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// The proof `role` sends for the handshake of `hello_type` on `port`, as 64 hex characters.
#[must_use]
pub fn proof(
    token: &str,
    role: ProofRole,
    hello_type: &str,
    port: u16,
    dial_nonce: &str,
    accept_nonce: &str,
) -> String {
    let label = match role {
        ProofRole::Accept => "lumo-bridge accept",
        ProofRole::Dial => "lumo-bridge dial",
    };
    // A key of any length is accepted by HMAC; the error arm cannot happen.
    let Ok(mut mac) = Hmac::<sha2::Sha256>::new_from_slice(token.as_bytes()) else {
        return String::new();
    };
    for part in [
        label,
        hello_type,
        &port.to_string(),
        dial_nonce,
        accept_nonce,
    ] {
        mac.update(part.as_bytes());
        mac.update(b"\n");
    }
    crate::guard::digest::hex_lower(&mac.finalize().into_bytes())
}

/// Whether `presented` is the proof `role` should have sent, compared in constant time.
#[must_use]
pub fn proof_ok(
    presented: &str,
    token: &str,
    role: ProofRole,
    hello_type: &str,
    port: u16,
    dial_nonce: &str,
    accept_nonce: &str,
) -> bool {
    let want = proof(token, role, hello_type, port, dial_nonce, accept_nonce);
    !want.is_empty() && token_eq(presented, &want)
}

/// What is wrong with a user-chosen token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenError {
    /// Its length in bytes, outside `MIN_TOKEN_CHARS..=MAX_TOKEN_CHARS`.
    Length(usize),
    /// The first character outside A-Z a-z 0-9 - _.
    Character(char),
}

impl std::fmt::Display for TokenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenError::Length(n) => write!(
                f,
                "the token must be {MIN_TOKEN_CHARS} to {MAX_TOKEN_CHARS} characters long; this one has {n}"
            ),
            TokenError::Character(c) => {
                write!(f, "the token may hold only A-Z a-z 0-9 - _; it contains {c:?}")
            }
        }
    }
}

impl std::error::Error for TokenError {}

/// Checks a user-chosen token; the error says what is wrong.
pub fn check_token(token: &str) -> Result<(), TokenError> {
    let n = token.len();
    if !(MIN_TOKEN_CHARS..=MAX_TOKEN_CHARS).contains(&n) {
        return Err(TokenError::Length(n));
    }
    if let Some(c) = token
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        return Err(TokenError::Character(c));
    }
    Ok(())
}

/// The `Host` header of a request to one of our listeners: `127.0.0.1`, `localhost`, `[::1]` or
/// the configured bind host, each with an optional port. Anything else is a name a browser
/// resolved to us on an attacker's behalf (DNS rebinding) and is refused. Missing → refused.
pub fn host_allowed(host_header: Option<&str>, configured: Option<&str>) -> bool {
    let Some(host) = host_header else {
        return false;
    };
    let Some(name) = split_authority(host) else {
        return false;
    };
    let loopback = ["127.0.0.1", "localhost", "[::1]"];
    if loopback.iter().any(|l| name.eq_ignore_ascii_case(l)) {
        return true;
    }
    match configured {
        // A bare IPv6 bind address appears bracketed in a Host header.
        Some(c) if c.contains(':') && !c.starts_with('[') => {
            name.len() == c.len() + 2
                && name.starts_with('[')
                && name.ends_with(']')
                && name
                    .get(1..name.len() - 1)
                    .is_some_and(|inner| inner.eq_ignore_ascii_case(c))
        }
        Some(c) => !c.is_empty() && name.eq_ignore_ascii_case(c),
        None => false,
    }
}

/// Splits `host[:port]` / `[v6][:port]`, checking the port is 1..=65535 digits. Returns the host
/// part (with brackets for IPv6).
fn split_authority(authority: &str) -> Option<&str> {
    let (name, port) = if authority.starts_with('[') {
        let close = authority.find(']')?;
        let (name, rest) = authority.split_at(close + 1);
        match rest {
            "" => (name, None),
            _ => (name, Some(rest.strip_prefix(':')?)),
        }
    } else {
        match authority.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (authority, None),
        }
    };
    if name.is_empty() || name.bytes().any(|b| b.is_ascii_whitespace() || b == b'@') {
        return None;
    }
    if let Some(p) = port {
        let ok = !p.is_empty()
            && p.len() <= 5
            && p.bytes().all(|b| b.is_ascii_digit())
            && p.parse::<u32>().is_ok_and(|n| (1..=65535).contains(&n));
        if !ok {
            return None;
        }
    }
    Some(name)
}

/// The extension's WebSocket upgrade: `Origin` must be exactly `chrome-extension://<id>` with a
/// valid id, and that id when one is pinned. Web pages, other schemes and a missing Origin are
/// refused.
pub fn ws_origin_allowed(origin: Option<&str>, pinned: Option<&ExtensionId>) -> bool {
    let Some(id) = origin.and_then(|o| o.strip_prefix("chrome-extension://")) else {
        return false;
    };
    is_extension_id(id) && pinned.is_none_or(|p| p.as_str() == id)
}

/// The control port between bridge processes: no `Origin` at all.
pub fn control_origin_allowed(origin: Option<&str>) -> bool {
    origin.is_none()
}

/// The HTTP MCP endpoint: native clients send no `Origin`. A browser's request passes only when
/// its origin was allowed explicitly (exact match, ASCII case-insensitive) or is the endpoint's
/// own origin: `http://` + the `Host` header, which [`host_allowed`] has already limited to
/// loopback or the configured host, so it names this very server (port included), which serves
/// no pages. A rebinding page has the attacker's host in both and is refused by `Host` first.
pub fn http_origin_allowed(
    origin: Option<&str>,
    host_header: Option<&str>,
    allowed: &[String],
) -> bool {
    match origin {
        None => true,
        Some(o) => {
            allowed.iter().any(|a| a.eq_ignore_ascii_case(o))
                || host_header.is_some_and(|h| {
                    o.strip_prefix("http://")
                        .is_some_and(|rest| !h.is_empty() && rest.eq_ignore_ascii_case(h))
                })
        }
    }
}

/// The `Authorization` header must be `Bearer <token>` with our token (constant time).
pub fn bearer_ok(authorization: Option<&str>, token: &str) -> bool {
    authorization
        .and_then(|h| {
            let (scheme, rest) = h.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then_some(rest.trim())
        })
        .is_some_and(|presented| token_eq(presented, token))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The proof as written down in ARCHITECTURE (HMAC-SHA256 keyed by the token over the role's
    /// label, the hello's type, the port and both nonces, each line ended by a newline),
    /// checked against Python's `hmac.new(token, msg, hashlib.sha256).hexdigest()`.
    #[test]
    fn a_proof_is_the_documented_hmac_and_binds_every_part() {
        let t = "fuzz-token-fuzz-token-fuzz-token-0123";
        let (c, s) = ("fuzz-client-nonce-0123", "fuzz-server-nonce-0123");
        let dial = proof(t, ProofRole::Dial, "hello", 17817, c, s);
        assert_eq!(
            dial,
            "6fb573baa7fcef5596d0676fa68c7edc90ed001df27a9ad6c9fc8653b26993f4"
        );
        let accept = proof(t, ProofRole::Accept, "hello", 17817, c, s);
        assert_eq!(
            accept,
            "86a354edf99bd0a74d798bd38a2a87ff4ed241ed529e390713c98f505eefbd11"
        );
        assert!(proof_ok(&dial, t, ProofRole::Dial, "hello", 17817, c, s));
        for other in [
            proof(t, ProofRole::Dial, "fwd_hello", 17817, c, s),
            proof(t, ProofRole::Dial, "hello", 17818, c, s),
            proof(t, ProofRole::Dial, "hello", 17817, s, c),
            proof(&t[1..], ProofRole::Dial, "hello", 17817, c, s),
        ] {
            assert_ne!(other, dial);
        }
        assert!(nonce_ok(c) && !nonce_ok("short") && !nonce_ok(&"a".repeat(129)));
        assert!(!nonce_ok("sixteen chars ok?") && nonce_ok(&"a".repeat(128)));
    }

    const TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    const OWN: &str = "imliakfdgonldkmaddnhnniclbhiobpo";

    #[test]
    fn token_comparison() {
        assert!(token_eq(TOKEN, TOKEN));
        assert!(!token_eq("", TOKEN));
        assert!(!token_eq(&TOKEN[..63], TOKEN));
        assert!(!token_eq(&format!("{TOKEN}0"), TOKEN));
        let mut flipped = TOKEN.to_string();
        flipped.replace_range(63.., "0");
        assert!(!token_eq(&flipped, TOKEN));
        assert!(!token_eq(&TOKEN.to_uppercase(), TOKEN));
    }

    #[test]
    fn user_tokens_are_checked() {
        assert!(check_token(TOKEN).is_ok());
        assert!(check_token(&"a".repeat(32)).is_ok());
        assert_eq!(check_token(&"a".repeat(31)), Err(TokenError::Length(31)));
        assert!(check_token(&"a".repeat(31))
            .unwrap_err()
            .to_string()
            .contains("this one has 31"));
        assert!(check_token(&"a".repeat(257)).is_err());
        assert!(check_token(&format!("{}&x=1", "a".repeat(32)))
            .unwrap_err()
            .to_string()
            .contains("'&'"));
    }

    #[test]
    fn bearer() {
        assert!(bearer_ok(Some(&format!("Bearer {TOKEN}")), TOKEN));
        assert!(bearer_ok(Some(&format!("bearer {TOKEN}")), TOKEN));
        assert!(!bearer_ok(None, TOKEN));
        assert!(!bearer_ok(Some(TOKEN), TOKEN));
        assert!(!bearer_ok(Some(&format!("Basic {TOKEN}")), TOKEN));
        assert!(!bearer_ok(Some("Bearer wrong"), TOKEN));
        assert!(!bearer_ok(Some("Bearer "), TOKEN));
    }

    #[test]
    fn host_loopback_and_configured() {
        for ok in [
            "127.0.0.1",
            "127.0.0.1:8080",
            "localhost",
            "LOCALHOST:1",
            "[::1]",
            "[::1]:65535",
        ] {
            assert!(host_allowed(Some(ok), None), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:8080",
            "127.0.0.1.nip.io",
            "localhost.evil.example",
            "127.0.0.2",
            "0.0.0.0",
            "localhost:0",
            "localhost:65536",
            "localhost:",
            "localhost:80a",
            "[::1]x",
            "[::1",
            "",
            "user@localhost",
            "localhost :80",
        ] {
            assert!(!host_allowed(Some(bad), None), "{bad}");
        }
        assert!(!host_allowed(None, None));
        assert!(host_allowed(Some("box.lan:9000"), Some("box.lan")));
        assert!(host_allowed(Some("192.168.1.5"), Some("192.168.1.5")));
        assert!(!host_allowed(Some("other.lan"), Some("box.lan")));
        assert!(host_allowed(Some("[fe80::1]:80"), Some("fe80::1")));
        assert!(!host_allowed(Some("[fe80::2]"), Some("fe80::1")));
        assert!(!host_allowed(Some("anything"), Some("")));
    }

    #[test]
    fn websocket_origin_only_chrome_extensions() {
        let pinned = ExtensionId::parse(OWN);
        let own = format!("chrome-extension://{OWN}");
        let other = format!("chrome-extension://{}", "a".repeat(32));
        assert!(ws_origin_allowed(Some(&own), None));
        assert!(ws_origin_allowed(Some(&own), pinned.as_ref()));
        assert!(ws_origin_allowed(Some(&other), None));
        assert!(!ws_origin_allowed(Some(&other), pinned.as_ref()));
        for bad in [
            "https://evil.example",
            "http://127.0.0.1",
            "null",
            "chrome-extension://",
            "chrome-extension://short",
            "moz-extension://imliakfdgonldkmaddnhnniclbhiobpo",
            "chrome-extension://imliakfdgonldkmaddnhnniclbhiobpo/",
            "chrome-extension://imliakfdgonldkmaddnhnniclbhiobpo.evil.example",
            "CHROME-EXTENSION://imliakfdgonldkmaddnhnniclbhiobpo",
        ] {
            assert!(!ws_origin_allowed(Some(bad), None), "{bad}");
        }
        assert!(!ws_origin_allowed(None, None));
    }

    #[test]
    fn control_port_refuses_every_origin() {
        assert!(control_origin_allowed(None));
        assert!(!control_origin_allowed(Some("chrome-extension://x")));
        assert!(!control_origin_allowed(Some("")));
    }

    #[test]
    fn http_origin() {
        let host = Some("127.0.0.1:8931");
        assert!(http_origin_allowed(None, host, &[]));
        assert!(!http_origin_allowed(
            Some("https://evil.example"),
            host,
            &[]
        ));
        let allowed = vec!["http://localhost:6274".to_string()];
        assert!(http_origin_allowed(
            Some("http://localhost:6274"),
            host,
            &allowed
        ));
        assert!(!http_origin_allowed(
            Some("http://localhost:6275"),
            host,
            &allowed
        ));
        // The endpoint's own origin (same host and port as the request's Host).
        assert!(http_origin_allowed(
            Some("http://127.0.0.1:8931"),
            host,
            &[]
        ));
        assert!(!http_origin_allowed(
            Some("http://127.0.0.1:8932"),
            host,
            &[]
        ));
        assert!(!http_origin_allowed(
            Some("https://127.0.0.1:8931"),
            host,
            &[]
        ));
        assert!(!http_origin_allowed(
            Some("http://localhost:8931"),
            host,
            &[]
        ));
        assert!(!http_origin_allowed(Some("http://"), Some(""), &[]));
        assert!(!http_origin_allowed(
            Some("http://127.0.0.1:8931"),
            None,
            &[]
        ));
        assert!(!http_origin_allowed(Some("null"), host, &[]));
    }
}
