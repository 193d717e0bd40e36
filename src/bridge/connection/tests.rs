use super::*;

const TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn server(now: u64) -> Connection {
    let mut extra = Map::new();
    extra.insert("readonly".into(), json!(false));
    Connection::accept("hello", TOKEN, "0.1.0", extra, now, HELLO_TIMEOUT_MS)
}

fn hello_frame(payload: Value) -> String {
    frame::encode(&Frame::Request {
        id: 0,
        kind: "hello".into(),
        payload,
    })
}

fn drain(c: &mut Connection) -> Vec<Value> {
    std::iter::from_fn(|| c.poll_transmit())
        .map(|t| serde_json::from_str(&t).unwrap())
        .collect()
}

fn events(c: &mut Connection) -> Vec<Event> {
    std::iter::from_fn(|| c.poll_event()).collect()
}

/// Carries every queued frame from one end to the other.
fn pump(from: &mut Connection, to: &mut Connection) {
    while let Some(t) = from.poll_transmit() {
        to.handle_text(&t);
    }
}

fn open_pair() -> (Connection, Connection) {
    let mut s = server(0);
    let mut hello = Map::new();
    hello.insert("token".into(), json!(TOKEN));
    hello.insert("extVersion".into(), json!("0.1.0"));
    let mut c = Connection::dial("hello", hello, "0.1.0", 0, HELLO_TIMEOUT_MS);
    pump(&mut c, &mut s);
    pump(&mut s, &mut c);
    assert!(s.is_open() && c.is_open());
    (s, c)
}

#[test]
fn a_good_hello_opens_both_ends() {
    let (mut s, mut c) = open_pair();
    let Some(Event::Hello(info)) = s.poll_event() else {
        panic!("no hello event");
    };
    assert!(
        info.payload.get("token").is_none(),
        "the token is not passed on"
    );
    assert_eq!(info.payload["extVersion"], "0.1.0");
    let Some(Event::Ready(ack)) = c.poll_event() else {
        panic!("no ready event");
    };
    assert_eq!(ack.server_version, "0.1.0");
    assert_eq!(ack.result["readonly"], false);
    assert_eq!(s.poll_timeout(), None, "no deadline once open");
}

#[test]
fn protocol_mismatch_names_both_numbers_and_closes() {
    let mut s = server(0);
    s.handle_text(&hello_frame(json!({"protocol": 2, "token": TOKEN})));
    let out = drain(&mut s);
    assert_eq!(out[0]["result"]["ok"], false);
    let reason = out[0]["result"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("protocol 1") && reason.contains("protocol 2"),
        "{reason}"
    );
    assert!(s.is_closed());
    assert_eq!(s.close_reason().map(CloseReason::code), Some(4000));
    assert!(events(&mut s).is_empty(), "no hello event on a mismatch");

    // A legacy hello without a protocol gets an explicit, parseable refusal.
    let mut s = server(0);
    s.handle_text(&hello_frame(json!({"token": TOKEN})));
    let out = drain(&mut s);
    assert_eq!(out[0]["result"]["protocol"], PROTOCOL_VERSION);
    assert!(out[0]["result"]["reason"]
        .as_str()
        .unwrap()
        .contains("sent no protocol"));
}

#[test]
fn the_dialling_end_refuses_a_different_protocol_too() {
    let mut c = Connection::dial("hello", Map::new(), "0.1.0", 0, 1000);
    let _ = drain(&mut c);
    c.handle_text(&frame::encode(&Frame::Response {
        id: 0,
        outcome: Ok(json!({"ok": true, "protocol": 3, "serverVersion": "9"})),
    }));
    assert!(!c.is_open());
    let msg = c.close_reason().unwrap().to_string();
    assert!(
        msg.contains("protocol 1") && msg.contains("protocol 3"),
        "{msg}"
    );
    assert!(msg.contains("update this end"), "{msg}");
    // An old bridge whose ack lacks `protocol`.
    let mut c = Connection::dial("hello", Map::new(), "0.1.0", 0, 1000);
    c.handle_text(&frame::encode(&Frame::Response {
        id: 0,
        outcome: Ok(json!({"ok": true, "assignedPort": 0})),
    }));
    assert!(matches!(
        c.close_reason(),
        Some(CloseReason::ProtocolMismatch { theirs: None, .. })
    ));
}

#[test]
fn wrong_or_missing_token_is_refused() {
    for payload in [
        json!({"protocol": 1}),
        json!({"protocol": 1, "token": ""}),
        json!({"protocol": 1, "token": 42}),
        json!({"protocol": 1, "token": TOKEN.to_uppercase()}),
        json!({"protocol": 1, "token": &TOKEN[1..]}),
    ] {
        let mut s = server(0);
        s.handle_text(&hello_frame(payload.clone()));
        let out = drain(&mut s);
        assert_eq!(out[0]["result"]["ok"], false, "{payload}");
        assert_eq!(s.close_reason(), Some(&CloseReason::BadToken));
        assert_eq!(CloseReason::BadToken.code(), 4001);
        assert!(!s.is_open());
        // Nothing after the refusal is processed.
        s.handle_text(r#"{"k":"png"}"#);
        assert!(drain(&mut s).is_empty());
    }
}

#[test]
fn the_dialling_end_surfaces_a_refusal_reason() {
    let mut s = server(0);
    let mut hello = Map::new();
    hello.insert("token".into(), json!("nope"));
    let mut c = Connection::dial("hello", hello, "0.1.0", 0, 1000);
    pump(&mut c, &mut s);
    pump(&mut s, &mut c);
    match c.close_reason() {
        Some(CloseReason::Rejected(r)) => assert!(r.contains("token"), "{r}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn anything_before_hello_closes() {
    for first in [
        r#"{"k":"png"}"#,
        r#"{"k":"ntf","type":"tabs_changed","payload":{}}"#,
        r#"{"k":"req","id":1,"type":"call_tool","payload":{}}"#,
        r#"{"k":"res","id":1,"ok":true}"#,
        "not json",
    ] {
        let mut s = server(0);
        s.handle_text(first);
        assert!(s.is_closed(), "{first}");
        assert!(
            matches!(s.close_reason(), Some(CloseReason::Malformed(_))),
            "{first}"
        );
        assert!(events(&mut s).is_empty());
    }
    // A hello with a non-object payload is refused too.
    let mut s = server(0);
    s.handle_text(&hello_frame(json!("hi")));
    assert!(s.is_closed());
}

#[test]
fn the_hello_deadline_is_decided_from_the_time_given() {
    let mut s = server(1_000);
    assert_eq!(s.poll_timeout(), Some(11_000));
    s.handle_timeout(10_999);
    assert!(!s.is_closed());
    s.handle_timeout(11_000);
    assert_eq!(s.close_reason(), Some(&CloseReason::HelloTimeout));
    assert_eq!(CloseReason::HelloTimeout.code(), 4008);
    // A hello after the deadline is too late.
    s.handle_text(&hello_frame(json!({"protocol": 1, "token": TOKEN})));
    assert!(!s.is_open());
    // Same on the dialling side, waiting for the ack.
    let mut c = Connection::dial("hello", Map::new(), "0.1.0", 0, 50);
    c.handle_timeout(50);
    assert_eq!(c.close_reason(), Some(&CloseReason::HelloTimeout));
}

#[test]
fn requests_correlate_by_id_in_both_directions() {
    let (mut s, mut c) = open_pair();
    let _ = (events(&mut s), events(&mut c));
    let id = s
        .request(
            "call_tool",
            json!({"name": "status", "arguments": {}}),
            0,
            1000,
        )
        .unwrap();
    pump(&mut s, &mut c);
    let Some(Event::Request {
        id: rid,
        kind,
        payload,
    }) = c.poll_event()
    else {
        panic!("no request");
    };
    assert_eq!((rid, kind.as_str()), (id, "call_tool"));
    assert_eq!(payload["name"], "status");
    c.respond(rid, Ok(json!({"content": []})));
    pump(&mut c, &mut s);
    assert_eq!(
        s.poll_event(),
        Some(Event::Response {
            id,
            kind: "call_tool".into(),
            outcome: Ok(json!({"content": []}))
        })
    );
    // A duplicate answer is ignored.
    c.respond(rid, Ok(json!(1)));
    pump(&mut c, &mut s);
    assert_eq!(s.poll_event(), None);
    // Notifications and liveness.
    c.notify("tabs_changed", json!({"tabs": []}));
    c.ping();
    pump(&mut c, &mut s);
    assert!(matches!(s.poll_event(), Some(Event::Notify { .. })));
    pump(&mut s, &mut c); // the pong
    assert!(c.is_open() && s.is_open());
    // A second hello on an open socket is answered with an error and changes nothing.
    s.handle_text(&hello_frame(json!({"protocol": 1, "token": TOKEN})));
    let out = drain(&mut s);
    assert_eq!(out[0]["error"]["code"], "ALREADY_OPEN");
    assert!(s.is_open());
}

#[test]
fn disconnect_fails_every_in_flight_request_at_once() {
    let (mut s, _c) = open_pair();
    let _ = events(&mut s);
    let ids: Vec<u64> = (0..3)
        .map(|_| {
            s.request("call_tool", json!({"name": "write_script"}), 0, 60_000)
                .unwrap()
        })
        .collect();
    s.handle_disconnect();
    let failed: Vec<_> = events(&mut s)
        .into_iter()
        .map(|e| match e {
            Event::Failed { id, failure, .. } => (id, failure),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        failed,
        ids.iter()
            .map(|id| (*id, Failure::Disconnected))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        s.request("call_tool", json!({}), 0, 1),
        Err(RequestError::NotOpen)
    );
}

#[test]
fn a_timeout_fails_one_and_marks_only_reads_retryable() {
    let (mut s, _c) = open_pair();
    let _ = events(&mut s);
    let read = s
        .request("call_tool", json!({"name": "list_scripts"}), 0, 100)
        .unwrap();
    let write = s
        .request("call_tool", json!({"name": "delete_script"}), 0, 200)
        .unwrap();
    let later = s
        .request("call_tool", json!({"name": "status"}), 0, 10_000)
        .unwrap();
    assert_eq!(s.poll_timeout(), Some(100));
    s.handle_timeout(200);
    let ev = events(&mut s);
    assert_eq!(
        ev,
        vec![
            Event::Failed {
                id: read,
                kind: "call_tool".into(),
                failure: Failure::Timeout { retryable: true }
            },
            Event::Failed {
                id: write,
                kind: "call_tool".into(),
                failure: Failure::Timeout { retryable: false }
            },
        ]
    );
    assert!(s.is_open(), "a timeout does not close the socket");
    assert_eq!(s.poll_timeout(), Some(10_000));
    let _ = later;
}

#[test]
fn a_local_close_carries_its_code() {
    let (mut s, _c) = open_pair();
    s.close(4002, "disconnected by the user");
    assert_eq!(s.close_reason().map(CloseReason::code), Some(4002));
    s.handle_disconnect();
    assert_eq!(
        s.close_reason().map(CloseReason::code),
        Some(4002),
        "first reason kept"
    );
}

#[test]
fn the_peers_close_frame_fails_in_flight_and_says_who_closed() {
    let (mut s, _c) = open_pair();
    let _ = events(&mut s);
    let id = s
        .request("call_tool", json!({"name": "write_script"}), 0, 60_000)
        .unwrap();
    s.handle_close(4002, "disconnected by the user");
    assert_eq!(
        events(&mut s),
        vec![Event::Failed {
            id,
            kind: "call_tool".into(),
            failure: Failure::Disconnected
        }]
    );
    let r = s.close_reason().cloned().unwrap();
    assert_eq!(r.code(), 4002);
    assert_eq!(
        r.to_string(),
        "the user disconnected the extension (close code 4002)"
    );
    // Any other code is named with the peer's reason, bounded.
    let (mut t, _c) = open_pair();
    t.handle_close(1001, &"x".repeat(10_000));
    let r = t.close_reason().unwrap().to_string();
    assert!(
        r.starts_with("closed by the other end (code 1001: xxx"),
        "{r}"
    );
    assert!(r.len() < 200, "{}", r.len());
    // The first reason stays.
    t.handle_disconnect();
    assert_eq!(t.close_reason().map(CloseReason::code), Some(1001));
}

#[test]
fn a_malformed_frame_after_open_closes_and_fails_in_flight() {
    let (mut s, _c) = open_pair();
    let _ = events(&mut s);
    let id = s.request("call_tool", json!({}), 0, 1000).unwrap();
    s.handle_text("{\"k\":");
    assert!(s.is_closed());
    assert_eq!(
        events(&mut s),
        vec![Event::Failed {
            id,
            kind: "call_tool".into(),
            failure: Failure::Disconnected
        }]
    );
}

/// A call over the peer's frame limit (an agent pasting a large library into `write_script`)
/// is refused before it is sent: sent, the peer would close the link, failing every other
/// call on it. The link stays open and takes the next call.
#[test]
fn a_request_over_the_frame_limit_is_refused_and_the_link_stays_open() {
    let (mut s, _c) = open_pair();
    let _ = events(&mut s);
    let big = "x".repeat(frame::MAX_FRAME_BYTES);
    let r = s.request(
        "call_tool",
        json!({"name": "write_script", "arguments": {"source": big}}),
        0,
        1000,
    );
    assert!(
        matches!(r, Err(RequestError::TooLarge { len }) if len > frame::MAX_FRAME_BYTES),
        "{r:?}"
    );
    assert!(s.poll_transmit().is_none(), "nothing is sent");
    assert!(r.unwrap_err().to_string().contains("nothing was sent"));
    let id = s
        .request("call_tool", json!({"name": "status"}), 0, 1000)
        .unwrap();
    let sent = s.poll_transmit().expect("the next call goes out");
    assert!(sent.contains("\"status\""), "{sent}");
    assert_eq!(
        s.poll_timeout(),
        Some(1000),
        "only the second call is in flight (id {id})"
    );
}
