//! The bridge wire: any bytes, as frames to either end of a connection, with time moving on,
//! never panic; a socket never opens without the hello carrying the token; the trust rules never
//! panic either.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lumo_userscripts::bridge::{frame, trust, Connection, Event, HELLO_TIMEOUT_MS};
use serde_json::Map;

const TOKEN: &str = "fuzz-token-fuzz-token-fuzz-token-0123";

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = frame::parse(&text);
    let _ = trust::host_allowed(Some(&text), Some("box.lan"));
    let _ = trust::ws_origin_allowed(Some(&text), None);
    let _ = trust::bearer_ok(Some(&text), TOKEN);

    let mut accept = Connection::accept("hello", TOKEN, "0", Map::new(), 0, HELLO_TIMEOUT_MS);
    let mut dial = Connection::dial("hello", Map::new(), "0", 0, HELLO_TIMEOUT_MS);
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
        accept.handle_text(line);
        dial.handle_text(line);
        if accept.is_open() && !was_open {
            assert!(line.contains(TOKEN), "opened without the token");
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
