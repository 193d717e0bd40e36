//! The extension's WebSocket, attacked as seed 002's threat table says: web pages, other
//! extensions, DNS rebinding, local processes without or with a wrong token, silent sockets.
mod common;
use common::*;
use serde_json::json;
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::protocol::{frame::coding::CloseCode, CloseFrame};

fn started(extra: &[&str]) -> (Ports, Bridge) {
    let p = Ports::new();
    let mut args = p.args();
    args.extend(extra.iter().map(|s| s.to_string()));
    let mut b = Bridge::start(&args);
    b.wait_stderr("owner", Duration::from_secs(20));
    (p, b)
}

#[tokio::test]
async fn a_web_page_or_another_extension_is_refused_by_origin() {
    let (p, _b) = started(&[]);
    let _ = ext_connect(p.ext).await; // up, and our own origin passes
    for origin in [
        "https://evil.example",
        "http://127.0.0.1:8000",
        "null",
        "chrome-extension://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    ] {
        assert_eq!(
            ws_connect(p.ext, &[("Origin", origin)]).await.err(),
            Some(403),
            "{origin}"
        );
    }
    // A local process that sends no Origin at all is refused too.
    assert_eq!(ws_connect(p.ext, &[]).await.err(), Some(403));
}

#[tokio::test]
async fn any_extension_mode_still_refuses_pages() {
    let (p, _b) = started(&["--any-extension"]);
    let _ = ext_connect(p.ext).await;
    assert!(ws_connect(
        p.ext,
        &[(
            "Origin",
            "chrome-extension://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        )]
    )
    .await
    .is_ok());
    assert_eq!(
        ws_connect(p.ext, &[("Origin", "https://evil.example")])
            .await
            .err(),
        Some(403)
    );
}

#[tokio::test]
async fn a_rebinding_host_is_refused() {
    let (p, _b) = started(&[]);
    let _ = ext_connect(p.ext).await;
    let host = format!("evil.example:{}", p.ext);
    assert_eq!(
        ws_connect(p.ext, &[("Origin", OWN_ORIGIN), ("Host", &host)])
            .await
            .err(),
        Some(403)
    );
    let ok = format!("localhost:{}", p.ext);
    assert!(ws_connect(p.ext, &[("Origin", OWN_ORIGIN), ("Host", &ok)])
        .await
        .is_ok());
}

#[tokio::test]
async fn a_wrong_or_missing_token_is_refused_with_a_reason() {
    let (p, _b) = started(&[]);
    for token in [
        "",
        "test-token-0123456789abcdef0123456789abcdeX",
        &TOKEN[..TOKEN.len() - 1],
    ] {
        let mut ws = ext_connect(p.ext).await;
        let h = handshake(&mut ws, "hello", ext_hello(), token, TOKEN, p.ext).await;
        // The bridge proved itself first (checked in `handshake`), and told a peer not yet
        // proven nothing it tells the extension.
        assert!(
            h.challenge["result"].get("readonly").is_none(),
            "{}",
            h.challenge
        );
        assert!(!h.challenge.to_string().contains(TOKEN));
        let ack = h.ack.expect("a refusing ack");
        assert_eq!(ack["result"]["ok"], false);
        assert!(
            ack["result"]["reason"].as_str().unwrap().contains("token"),
            "{ack}"
        );
        assert_eq!(recv(&mut ws, Duration::from_secs(5)).await, Err(4001));
    }
}

#[tokio::test]
async fn a_protocol_mismatch_names_both_numbers() {
    let (p, _b) = started(&[]);
    let mut ws = ext_connect(p.ext).await;
    send(
        &mut ws,
        json!({"k": "req", "id": 0, "type": "hello", "payload": {"protocol": 7, "nonce": CLIENT_NONCE}}),
    )
    .await;
    let ack = recv(&mut ws, Duration::from_secs(5)).await.expect("ack");
    let reason = ack["result"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("protocol 2") && reason.contains("protocol 7"),
        "{reason}"
    );
    assert_eq!(recv(&mut ws, Duration::from_secs(5)).await, Err(4000));
}

#[tokio::test]
async fn a_socket_without_hello_is_dropped_at_the_deadline() {
    let (p, _b) = started(&["--hello-timeout-ms", "700"]);
    let mut ws = ext_connect(p.ext).await;
    let t = Instant::now();
    assert_eq!(recv(&mut ws, Duration::from_secs(5)).await, Err(4008));
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(500) && took < Duration::from_secs(3),
        "{took:?}"
    );
}

#[tokio::test]
async fn a_call_tool_before_hello_closes_the_socket() {
    let (p, _b) = started(&[]);
    let mut ws = ext_connect(p.ext).await;
    send(
        &mut ws,
        json!({"k": "req", "id": 1, "type": "call_tool", "payload": {"name": "status"}}),
    )
    .await;
    assert_eq!(recv(&mut ws, Duration::from_secs(5)).await, Err(4000));
}

#[tokio::test]
async fn tool_calls_reach_the_extension_and_answers_come_back() {
    let (p, mut b) = started(&[]);
    b.initialize();
    // Not connected: a clear error with the connect link, and bridge_status says so.
    let r = b.call("list_scripts", json!({}), Duration::from_secs(10));
    assert_eq!(r["isError"], true);
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("not connected") && text.contains("connect.html?port="),
        "{text}"
    );
    let s = b.call("bridge_status", json!({}), Duration::from_secs(10));
    assert_eq!(s["structuredContent"]["connected"], false);
    assert!(s["structuredContent"]["connectLink"]
        .as_str()
        .unwrap()
        .contains(TOKEN));

    let mut ws = ext_open(p.ext).await;
    // The socket is handed back (kept open) so that bridge_status still sees it connected.
    let ext = tokio::spawn(async move {
        let seen = serve_calls(&mut ws, 1).await;
        (seen, ws)
    });
    let r = tokio::task::spawn_blocking(move || {
        let r = b.call("get_script", json!({"uuid": "x"}), Duration::from_secs(10));
        let s = b.call("bridge_status", json!({}), Duration::from_secs(10));
        (r, s, b)
    })
    .await
    .unwrap();
    let (seen, _ws) = ext.await.unwrap();
    assert_eq!(
        seen,
        vec![json!({"name": "get_script", "arguments": {"uuid": "x"}})]
    );
    assert_eq!(r.0["structuredContent"]["ran"], "get_script");
    assert_eq!(r.1["structuredContent"]["connected"], true);
    assert!(
        r.1["structuredContent"].get("connectLink").is_none(),
        "no link once connected"
    );
}

/// A call too large for the link (a library pasted into `write_script`) is refused as
/// PAYLOAD_TOO_LARGE without reaching the extension, and the link carries the next call: sent,
/// the extension would have closed the link on it, failing every call of every client.
#[tokio::test]
async fn a_call_too_large_for_the_link_is_refused_and_the_link_stays_up() {
    let (p, b) = started(&[]);
    let mut ws = ext_open(p.ext).await;
    let ext = tokio::spawn(async move {
        let seen = serve_calls(&mut ws, 1).await;
        (seen, ws)
    });
    let (big, next) = tokio::task::spawn_blocking(move || {
        let mut b = b;
        b.initialize();
        let source = "x".repeat(lumo_userscripts::bridge::frame::MAX_FRAME_BYTES);
        let big = b.call(
            "write_script",
            json!({ "source": source }),
            Duration::from_secs(20),
        );
        let next = b.call("get_script", json!({"uuid": "x"}), Duration::from_secs(10));
        (big, next)
    })
    .await
    .unwrap();
    assert_eq!(
        big["structuredContent"]["error_code"], "PAYLOAD_TOO_LARGE",
        "{big}"
    );
    assert_eq!(next["structuredContent"]["ran"], "get_script", "{next}");
    let (seen, _ws) = ext.await.unwrap();
    assert_eq!(
        seen,
        vec![json!({"name": "get_script", "arguments": {"uuid": "x"}})]
    );
}

/// What went wrong keeps a code of its own: a write with no answer in time is TIMEOUT (it may
/// have happened), the extension's own refusal keeps its code (an answer too large for the
/// link: RESULT_TOO_LARGE, it was carried out). Before, both were NOT_CONNECTED, which tells an
/// agent nothing happened.
#[tokio::test]
async fn a_timeout_and_the_extensions_own_error_keep_their_codes() {
    let (p, b) = started(&["--call-timeout-ms", "600"]);
    let mut ws = ext_open(p.ext).await;
    let ext = tokio::spawn(async move {
        let mut seen = 0;
        while seen < 2 {
            let Ok(f) = recv(&mut ws, Duration::from_secs(20)).await else {
                break;
            };
            if f["k"] == "req" && f["type"] == "call_tool" {
                seen += 1;
                // The first is never answered; the second is refused.
                if f["payload"]["name"] == "try_script" {
                    send(
                        &mut ws,
                        json!({"k": "res", "id": f["id"], "ok": false,
                               "error": {"code": "RESULT_TOO_LARGE", "message": "carried out, answer too large"}}),
                    )
                    .await;
                }
            } else if f["k"] == "png" {
                send(&mut ws, json!({"k": "pog"})).await;
            }
        }
        ws
    });
    let (slow, big) = tokio::task::spawn_blocking(move || {
        let mut b = b;
        b.initialize();
        let slow = b.call(
            "write_script",
            json!({"source": "x"}),
            Duration::from_secs(10),
        );
        let big = b.call("try_script", json!({"uuid": "x"}), Duration::from_secs(10));
        (slow, big)
    })
    .await
    .unwrap();
    let _ws = ext.await.unwrap();
    assert_eq!(slow["isError"], true, "{slow}");
    assert_eq!(slow["structuredContent"]["error_code"], "TIMEOUT", "{slow}");
    assert_eq!(slow["structuredContent"]["status"], 504, "{slow}");
    assert!(
        slow["structuredContent"]["message"]
            .as_str()
            .unwrap()
            .contains("may still have happened"),
        "{slow}"
    );
    assert_eq!(
        big["structuredContent"]["error_code"], "RESULT_TOO_LARGE",
        "{big}"
    );
    assert_eq!(big["structuredContent"]["status"], 413, "{big}");
}

#[tokio::test]
async fn readonly_hides_and_refuses_writes_without_asking_the_extension() {
    let (p, b) = started(&["--readonly"]);
    let mut ws = ext_open(p.ext).await;
    let (list, r, ro, _b) = tokio::task::spawn_blocking(move || {
        let mut b = b;
        b.initialize();
        let list = b.rpc("tools/list", json!({}), Duration::from_secs(10));
        let r = b.call(
            "write_script",
            json!({"source": "x"}),
            Duration::from_secs(10),
        );
        let s = b.call("bridge_status", json!({}), Duration::from_secs(10));
        (list, r, s, b)
    })
    .await
    .unwrap();
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"list_scripts") && names.contains(&"bridge_status"));
    for w in [
        "write_script",
        "patch_script",
        "set_script_enabled",
        "delete_script",
    ] {
        assert!(!names.contains(&w), "{w} listed in read-only mode");
    }
    assert_eq!(r["isError"], true);
    assert_eq!(r["structuredContent"]["status"], 403);
    assert_eq!(r["structuredContent"]["error_code"], "WRITE_DISABLED");
    assert_eq!(ro["structuredContent"]["readonly"], true);
    // Nothing reached the extension.
    send(&mut ws, json!({"k": "png"})).await;
    assert_eq!(
        recv(&mut ws, Duration::from_secs(5)).await.unwrap(),
        json!({"k": "pog"})
    );
}

/// The user turns writes off in the extension: its `tools` notify makes the bridge tell the
/// client the list changed, and the write tools are gone from it (as from a port caller's);
/// turned on, they are back, also when a newer connection (the worker dialling again) says so.
#[tokio::test]
async fn the_tool_list_follows_the_extensions_write_switch() {
    let (p, b) = started(&[]);
    let mut ws = ext_open(p.ext).await;
    let (b, names) = tokio::task::spawn_blocking(move || {
        let mut b = b;
        b.initialize();
        let names = b.tool_names();
        (b, names)
    })
    .await
    .unwrap();
    assert!(
        names.iter().any(|n| n == "write_script"),
        "not told yet: {names:?}"
    );
    tools_notify(&mut ws, false).await;
    let (b, names, status) = tokio::task::spawn_blocking(move || {
        let mut b = b;
        b.take_notification("notifications/tools/list_changed", Duration::from_secs(10));
        let names = b.tool_names();
        let status = b.call("bridge_status", json!({}), Duration::from_secs(10));
        (b, names, status)
    })
    .await
    .unwrap();
    assert!(names.iter().any(|n| n == "list_scripts"), "{names:?}");
    for w in [
        "write_script",
        "patch_script",
        "set_script_enabled",
        "delete_script",
        "try_script",
    ] {
        assert!(!names.iter().any(|n| n == w), "{w} listed with writes off");
    }
    assert_eq!(
        status["structuredContent"]["writesEnabled"], false,
        "{status}"
    );
    // A newer connection replaces this one; the old one's word is ignored from then on.
    let mut newer = ext_open(p.ext).await;
    assert!(
        recv(&mut ws, Duration::from_secs(5)).await.is_err(),
        "the old link is closed"
    );
    tools_notify(&mut newer, true).await;
    let (_b, names) = tokio::task::spawn_blocking(move || {
        let mut b = b;
        b.take_notification("notifications/tools/list_changed", Duration::from_secs(10));
        let names = b.tool_names();
        (b, names)
    })
    .await
    .unwrap();
    assert!(names.iter().any(|n| n == "write_script"), "{names:?}");
}

#[tokio::test]
async fn one_connection_at_a_time_and_only_a_valid_token_replaces_it() {
    let (p, _b) = started(&[]);
    let mut first = ext_open(p.ext).await;
    // An intruder with a wrong token does not disturb the first.
    let mut bad = ext_connect(p.ext).await;
    let h = handshake(
        &mut bad,
        "hello",
        ext_hello(),
        "nope-nope-nope-nope-nope-nope-nope-nope",
        TOKEN,
        p.ext,
    )
    .await;
    assert_eq!(h.ack.expect("refused")["result"]["ok"], false);
    send(&mut first, json!({"k": "png"})).await;
    assert_eq!(
        recv(&mut first, Duration::from_secs(5)).await.unwrap(),
        json!({"k": "pog"})
    );
    // A second one with the token replaces it: the first is closed with 4003.
    let _second = ext_open(p.ext).await;
    assert_eq!(recv(&mut first, Duration::from_secs(5)).await, Err(4003));
}

#[tokio::test]
async fn a_disconnect_fails_the_in_flight_call_at_once() {
    let (p, b) = started(&[]);
    let mut ws = ext_open(p.ext).await;
    let call = tokio::task::spawn_blocking(move || {
        let mut b = b;
        b.initialize();
        let t = Instant::now();
        let r = b.call(
            "write_script",
            json!({"source": "x"}),
            Duration::from_secs(30),
        );
        (r, t.elapsed())
    });
    let f = recv(&mut ws, Duration::from_secs(10)).await.unwrap();
    assert_eq!(f["type"], "call_tool");
    drop(ws); // the browser went away mid-call
    let (r, took) = call.await.unwrap();
    assert_eq!(r["isError"], true, "{r}");
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("closed before the answer"),
        "{r}"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[tokio::test]
async fn the_users_disconnect_4002_fails_the_in_flight_call_with_that_reason() {
    let (p, b) = started(&[]);
    let mut ws = ext_open(p.ext).await;
    let call = tokio::task::spawn_blocking(move || {
        let mut b = b;
        b.initialize();
        let t = Instant::now();
        let r = b.call(
            "write_script",
            json!({"source": "x"}),
            Duration::from_secs(30),
        );
        let s = b.call("bridge_status", json!({}), Duration::from_secs(10));
        (r, s, t.elapsed(), b)
    });
    let f = recv(&mut ws, Duration::from_secs(10)).await.unwrap();
    assert_eq!(f["type"], "call_tool");
    ws.close(Some(CloseFrame {
        code: CloseCode::from(4002),
        reason: "disconnected by the user".into(),
    }))
    .await
    .unwrap();
    let (r, s, took, mut b) = call.await.unwrap();
    assert_eq!(r["isError"], true, "{r}");
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("the user disconnected the extension (close code 4002)"),
        "{text}"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_eq!(s["structuredContent"]["connected"], false, "{s}");
    assert!(b
        .wait_stderr("close code 4002", Duration::from_secs(5))
        .contains("the extension disconnected"));
}

/// The token of the connect link a bridge started with `args` (and `token_env`) prints.
fn printed_token(args: &[String], token_env: Option<&str>) -> (Bridge, String) {
    let mut b = Bridge::start_env(args, token_env);
    let line = b.wait_stderr("connect.html?port=", Duration::from_secs(20));
    let token = line.split("token=").nth(1).unwrap().trim().to_string();
    (b, token)
}

#[tokio::test]
async fn the_token_is_random_per_start_unless_the_flag_or_the_environment_sets_it() {
    let without_flag = |p: &Ports| {
        let mut a = p.args();
        let i = a.iter().position(|x| x == "--token").unwrap();
        a.drain(i..i + 2);
        a
    };
    // Both bridges run at once: their four ports are taken together.
    let [a, b, c, d] = free_ports();
    let (p1, p2) = (Ports::of(a, b), Ports::of(c, d));
    let (_b1, t1) = printed_token(&without_flag(&p1), None);
    let (_b2, t2) = printed_token(&without_flag(&p2), None);
    assert_ne!(t1, t2, "a fresh token per start");
    // 256 bits: at least 43 characters of base64url (or 64 of hex).
    assert!(t1.len() >= 43, "{t1}");
    // LUMO_BRIDGE_TOKEN sets it, and a hello carrying it opens the link.
    let p3 = Ports::new();
    let (b3, t3) = printed_token(&without_flag(&p3), Some(TOKEN));
    assert_eq!(t3, TOKEN);
    let noted = |b: &Bridge| {
        b.stderr_seen
            .iter()
            .any(|l| l.contains("set LUMO_BRIDGE_TOKEN instead"))
    };
    assert!(!noted(&b3), "{:?}", b3.stderr_seen);
    let _ws = ext_open(p3.ext).await;
    // --token wins over the environment.
    let p4 = Ports::new();
    let other = "another-token-0123456789abcdef-0123456789";
    let (b4, t4) = printed_token(&p4.args(), Some(other));
    assert_eq!(t4, TOKEN);
    // A flag's value is in the process list for every local user to read: the bridge says so.
    assert!(noted(&b4), "{:?}", b4.stderr_seen);
}

#[tokio::test]
async fn the_token_never_appears_on_stdout() {
    let (_p, mut b) = started(&[]);
    let init = b.initialize();
    assert!(!init.to_string().contains(TOKEN));
    // It is on stderr (the connect link) only.
    assert!(b
        .wait_stderr("connect.html", Duration::from_secs(5))
        .contains(TOKEN));
}

#[tokio::test]
async fn silent_sockets_cannot_crowd_out_the_extension() {
    // The listener is bound before "owner" is printed, so no probe connection is needed.
    let (p, _b) = started(&[]);
    let mut silent = Vec::new();
    for _ in 0..16 {
        silent.push(
            ws_connect(p.ext, &[("Origin", OWN_ORIGIN)])
                .await
                .expect("upgrade"),
        );
    }
    // More are closed at once instead of waiting 10 s each…
    let extra = tokio::net::TcpStream::connect(("127.0.0.1", p.ext))
        .await
        .unwrap();
    let mut buf = [0u8; 1];
    let n = tokio::time::timeout(Duration::from_secs(5), async {
        extra.readable().await.ok();
        extra.try_read(&mut buf).unwrap_or(0)
    })
    .await
    .expect("closed promptly");
    assert_eq!(n, 0);
    // …and once the silent ones go, the extension gets in.
    drop(silent);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _ws = ext_open(p.ext).await;
}

/// Sockets that never even send their upgrade request hold a pre-hello permit only until the
/// handshake's deadline: sixteen of them, left open, no longer keep the extension out.
#[tokio::test]
async fn sockets_that_never_upgrade_are_closed_at_the_deadline() {
    let (p, _b) = started(&["--hello-timeout-ms", "700"]);
    let mut mute = Vec::new();
    for _ in 0..16 {
        mute.push(
            tokio::net::TcpStream::connect(("127.0.0.1", p.ext))
                .await
                .unwrap(),
        );
    }
    let t = Instant::now();
    for s in &mute {
        let mut buf = [0u8; 1];
        let n = tokio::time::timeout(Duration::from_secs(5), async {
            s.readable().await.ok();
            s.try_read(&mut buf).unwrap_or(0)
        })
        .await
        .expect("closed at the deadline");
        assert_eq!(n, 0);
    }
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(500) && took < Duration::from_secs(3),
        "{took:?}"
    );
    // Still open on this side, and the extension gets in.
    let _ws = ext_open(p.ext).await;
    drop(mute);
}

/// The extension will dial with the core's own `Connection` (compiled to wasm); here the same
/// code dials the real bridge natively, so the two ends are proven to agree on the wire.
#[tokio::test]
async fn the_cores_dialling_connection_opens_against_the_real_bridge() {
    use futures_util::{SinkExt as _, StreamExt as _};
    use lumo_userscripts::bridge::{Connection, Event};
    use tokio_tungstenite::tungstenite::Message;
    let (p, _b) = started(&["--readonly"]);
    let mut ws = ext_connect(p.ext).await;
    let mut hello = serde_json::Map::new();
    hello.insert("extVersion".into(), json!("0.1.0"));
    let auth = lumo_userscripts::bridge::Auth {
        token: TOKEN.into(),
        nonce: CLIENT_NONCE.into(),
        port: p.ext,
    };
    let mut conn = Connection::dial("hello", hello, auth, "0.1.0", 0, 10_000);
    // Hello, the bridge's challenge, our proof, its ack.
    for _ in 0..2 {
        while let Some(t) = conn.poll_transmit() {
            assert!(!t.contains(TOKEN), "the token is never sent: {t}");
            ws.send(Message::Text(t.into())).await.unwrap();
        }
        let Some(Ok(Message::Text(t))) = ws.next().await else {
            panic!("no answer: {:?}", conn.close_reason());
        };
        conn.handle_text(t.as_str());
    }
    match conn.poll_event() {
        Some(Event::Ready(ack)) => {
            assert_eq!(ack.result["readonly"], true);
            assert_eq!(ack.server_version, env!("CARGO_PKG_VERSION"));
        }
        other => panic!("{other:?}: {:?}", conn.close_reason()),
    }
    assert!(conn.is_open());
}

/// Seed 001: only idempotent reads are retried after a timeout, never a write.
#[tokio::test]
async fn a_timed_out_read_is_retried_once_and_a_write_never() {
    let (p, b) = started(&["--call-timeout-ms", "400"]);
    let mut ws = ext_open(p.ext).await;
    let client = tokio::task::spawn_blocking(move || {
        let mut b = b;
        b.initialize();
        let read = b.call("list_scripts", json!({}), Duration::from_secs(10));
        let write = b.call(
            "delete_script",
            json!({"uuid": "u"}),
            Duration::from_secs(10),
        );
        (read, write, b)
    });
    // The read: ignore the first request, answer the retry.
    let first = recv(&mut ws, Duration::from_secs(10)).await.unwrap();
    assert_eq!(first["payload"]["name"], "list_scripts");
    let retry = recv(&mut ws, Duration::from_secs(10)).await.unwrap();
    assert_eq!(retry["payload"]["name"], "list_scripts");
    assert_ne!(retry["id"], first["id"], "a retry is a new request");
    send(
        &mut ws,
        json!({"k": "res", "id": retry["id"], "ok": true, "result": {
        "content": [{"type": "text", "text": "ok"}], "isError": false}}),
    )
    .await;
    // The write: ignored; it must not be sent again.
    let w = recv(&mut ws, Duration::from_secs(10)).await.unwrap();
    assert_eq!(w["payload"]["name"], "delete_script");
    let (read, write, _b) = client.await.unwrap();
    assert_eq!(read["isError"], false, "{read}");
    assert_eq!(write["isError"], true, "{write}");
    assert!(
        write["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("may still have happened"),
        "{write}"
    );
    send(&mut ws, json!({"k": "png"})).await;
    assert_eq!(
        recv(&mut ws, Duration::from_secs(5)).await.unwrap(),
        json!({"k": "pog"}),
        "no second delete_script was sent"
    );
}
