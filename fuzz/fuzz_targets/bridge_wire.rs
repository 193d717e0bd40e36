//! The bridge wire: any bytes, as frames to either end of a connection, with time moving on,
//! never panic; neither end opens unless the line it opened on carries the proof of the token
//! for its nonces (a seed in the corpus holds the accepting end's, so the open state is
//! explored too); the trust rules never panic either.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lumo_userscripts::bridge::trust::ProofRole;
use lumo_userscripts::bridge::{frame, trust, Auth, Connection, Event, HELLO_TIMEOUT_MS};
use serde_json::Map;

const TOKEN: &str = "fuzz-token-fuzz-token-fuzz-token-0123";
const PORT: u16 = 17817;
/// The accepting end's nonce, and the one the corpus's seed hello carries (and the dialling
/// end's).
const SERVER_NONCE: &str = "fuzz-server-nonce-0123";
const CLIENT_NONCE: &str = "fuzz-client-nonce-0123";

fn auth(nonce: &str) -> Auth {
    Auth {
        token: TOKEN.into(),
        nonce: nonce.into(),
        port: PORT,
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = frame::parse(&text);
    let _ = trust::host_allowed(Some(&text), Some("box.lan"));
    let _ = trust::ws_origin_allowed(Some(&text), None);
    let _ = trust::bearer_ok(Some(&text), TOKEN);

    let mut accept =
        Connection::accept("hello", auth(SERVER_NONCE), "0", Map::new(), 0, HELLO_TIMEOUT_MS);
    let mut dial = Connection::dial("hello", Map::new(), auth(CLIENT_NONCE), "0", 0, HELLO_TIMEOUT_MS);
    // The proofs each end opens on, for the nonces it knows (another client nonce cannot be
    // proven without the token).
    let dial_proof = trust::proof(TOKEN, ProofRole::Dial, "hello", PORT, CLIENT_NONCE, SERVER_NONCE);
    let accept_proof =
        trust::proof(TOKEN, ProofRole::Accept, "hello", PORT, CLIENT_NONCE, SERVER_NONCE);
    let mut now = 0u64;
    for line in text.split('\n') {
        // A line starting with '!' is the peer's close frame: its length is the code, the rest
        // the reason (any text, any length).
        if let Some(rest) = line.strip_prefix('!') {
            let code = u16::try_from(rest.len()).unwrap_or(u16::MAX);
            dial.handle_close(code, rest);
            assert!(dial.is_closed() && dial.poll_timeout().is_none());
            assert!(dial.close_reason().is_some_and(|r| r.to_string().len() < 1024));
            continue;
        }
        // A line starting with '@' advances the clock by its length in seconds.
        if let Some(rest) = line.strip_prefix('@') {
            now = now.saturating_add(rest.len() as u64 * 1000);
            accept.handle_timeout(now);
            dial.handle_timeout(now);
            continue;
        }
        let was_open = accept.is_open();
        let dial_was = dial.is_open() || dial.is_closed();
        accept.handle_text(line);
        dial.handle_text(line);
        if accept.is_open() && !was_open {
            assert!(line.contains(&dial_proof), "opened without the proof of the token");
        }
        if dial.is_open() && !dial_was {
            // The dialling end opens on the ack, after a challenge that carried the proof.
            assert!(text.contains(&accept_proof), "dialled end opened for an impostor");
        }
        if accept.is_open() {
            let _ = accept.request("call_tool", serde_json::json!({"name": "status"}), now, 100);
        }
        while accept.poll_transmit().is_some() {}
        while dial.poll_transmit().is_some() {}
        while let Some(e) = accept.poll_event() {
            if let Event::Ready(_) = e {
                panic!("the accepting end never sees an ack");
            }
        }
        while dial.poll_event().is_some() {}
    }
    accept.handle_disconnect();
    assert!(accept.poll_timeout().is_none());
});
