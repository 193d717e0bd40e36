//! `--http`: Streamable HTTP at /mcp behind Host, Origin and bearer checks. Raw HTTP/1.1 over TCP
//! so the tests can send any Host header a rebinding browser would.
mod common;
use common::*;
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::Duration;

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"it","version":"0"}}}"#;

fn post(port: u16, headers: &[(&str, &str)]) -> (u16, String) {
    post_body(port, headers, INIT)
}

fn post_body(port: u16, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let mut req = format!("POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n", body.len());
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).expect("write");
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    // Read until the headers and the first event are in (SSE streams may stay open).
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&out);
        if text.contains("\r\n\r\n")
            && (text.contains("serverInfo") || !text.starts_with("HTTP/1.1 200"))
        {
            break;
        }
    }
    let text = String::from_utf8_lossy(&out).to_string();
    let status = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, text)
}

fn start_http() -> (Bridge, u16) {
    let [ext, control, http] = free_ports();
    let p = Ports::of(ext, control);
    let mut args = p.args();
    args.extend(["--http".to_string(), http.to_string()]);
    let mut b = Bridge::start(&args);
    b.wait_stderr("MCP over HTTP", Duration::from_secs(20));
    for _ in 0..50 {
        if TcpStream::connect(("127.0.0.1", http)).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    (b, http)
}

#[test]
fn http_needs_the_bearer_token_and_refuses_pages_and_rebinding() {
    let (_b, port) = start_http();
    let host = format!("127.0.0.1:{port}");
    let bearer = format!("Bearer {TOKEN}");

    let (status, text) = post(port, &[("Host", &host)]);
    assert_eq!(status, 401, "{text}");
    assert!(
        text.to_ascii_lowercase()
            .contains("www-authenticate: bearer"),
        "{text}"
    );
    assert_eq!(
        post(port, &[("Host", &host), ("Authorization", "Bearer wrong")]).0,
        401
    );

    let (status, text) = post(
        port,
        &[
            ("Host", &host),
            ("Authorization", &bearer),
            ("Origin", "https://evil.example"),
        ],
    );
    assert_eq!(status, 403, "{text}");

    // A page on another local port is a different origin: refused.
    let other = format!("http://127.0.0.1:{}", port.wrapping_add(1));
    assert_eq!(
        post(
            port,
            &[
                ("Host", &host),
                ("Authorization", &bearer),
                ("Origin", &other)
            ]
        )
        .0,
        403
    );
    // The endpoint's own origin is accepted (it serves no pages, so only it can be that origin).
    let own = format!("http://{host}");
    assert_eq!(
        post(
            port,
            &[
                ("Host", &host),
                ("Authorization", &bearer),
                ("Origin", &own)
            ]
        )
        .0,
        200
    );

    let evil = format!("evil.example:{port}");
    let (status, text) = post(port, &[("Host", &evil), ("Authorization", &bearer)]);
    assert_eq!(status, 403, "{text}");

    let (status, text) = post(port, &[("Host", &host), ("Authorization", &bearer)]);
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("lumo-userscripts-bridge"), "{text}");
    let local = format!("localhost:{port}");
    assert_eq!(
        post(port, &[("Host", &local), ("Authorization", &bearer)]).0,
        200
    );
}

#[test]
fn a_non_loopback_bind_warns_on_stderr() {
    let [ext, control, http] = free_ports();
    let p = Ports::of(ext, control);
    let mut args = p.args();
    args.extend([
        "--http".to_string(),
        http.to_string(),
        "--host".into(),
        // A documentation address: the warning comes before the bind (which then fails here).
        "192.0.2.1".into(),
    ]);
    let mut b = Bridge::start(&args);
    let warning = b.wait_stderr("WARNING", Duration::from_secs(20));
    assert!(warning.contains("not loopback"), "{warning}");
}

/// Found by a tester: rmcp answered an unparsable body with a 415 in plain text, and a
/// `tools/call` without a name with −32601. The body is now checked by the stdio rules first.
#[test]
fn a_bad_body_gets_a_json_rpc_error() {
    let (_b, port) = start_http();
    let host = format!("127.0.0.1:{port}");
    let bearer = format!("Bearer {TOKEN}");
    let headers = [("Host", host.as_str()), ("Authorization", bearer.as_str())];
    let body = |text: &str| -> serde_json::Value {
        let json = text.split("\r\n\r\n").nth(1).unwrap_or_default();
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {text}"))
    };
    let (status, text) = post_body(port, &headers, "{not json");
    assert_eq!(status, 400, "{text}");
    assert_eq!(body(&text)["error"]["code"], -32700, "{text}");
    let (status, text) = post_body(port, &headers, r#"{"id":3,"method":"ping"}"#);
    assert_eq!(status, 400, "{text}");
    assert_eq!(body(&text)["id"], 3, "{text}");
    // A params error is answered for a session rmcp holds; without one, or for one that
    // ended, rmcp's own answer stands (400, 404: the client knows to initialize again).
    let call = r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{}}"#;
    let (status, text) = post_body(port, &headers, call);
    assert_eq!(status, 400, "{text}");
    let (status, text) = post(port, &headers);
    assert_eq!(status, 200, "{text}");
    let session = text
        .lines()
        .find_map(|l| l.strip_prefix("mcp-session-id: "))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| panic!("no session id: {text}"));
    let with = [headers[0], headers[1], ("Mcp-Session-Id", session.as_str())];
    let (status, text) = post_body(port, &with, call);
    assert_eq!(status, 200, "{text}");
    assert_eq!(body(&text)["error"]["code"], -32602, "{text}");
    let gone = [
        headers[0],
        headers[1],
        ("Mcp-Session-Id", "no-such-session"),
    ];
    let (status, text) = post_body(port, &gone, call);
    assert_eq!(status, 404, "{text}");
    // Unchecked before the bearer: a stranger still gets 401, not a parse error.
    let (status, _) = post_body(port, &headers[..1], "{not json");
    assert_eq!(status, 401);
    // And a good body still reaches rmcp whole.
    let (status, text) = post(port, &headers);
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("serverInfo"), "{text}");
    // A protocol version this server does not speak: refused naming both sides.
    let old = [
        headers[0],
        headers[1],
        ("MCP-Protocol-Version", "1999-01-01"),
    ];
    let (status, text) = post(port, &old);
    assert_eq!(status, 400, "{text}");
    let message = body(&text)["error"]["message"].clone();
    let m = message.as_str().unwrap_or_default();
    assert!(
        m.contains("\"1999-01-01\"") && m.contains("2025-06-18"),
        "{text}"
    );
}

/// Found by a tester: a start whose HTTP port is taken became the owner first (writing the
/// control token file, printing a connect link) and only then failed. It now fails first,
/// owning nothing.
#[test]
fn a_start_whose_http_port_is_taken_fails_before_it_owns_anything() {
    let taken = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let http = taken.local_addr().unwrap().port();
    let [ext, control] = free_ports();
    let p = Ports::of(ext, control);
    let mut args = p.args();
    args.extend(["--http".to_string(), http.to_string()]);
    let mut b = Bridge::start(&args);
    b.wait_stderr("cannot listen for HTTP", Duration::from_secs(20));
    let status = b.child.wait().unwrap();
    assert_eq!(status.code(), Some(1));
    assert!(
        !b.stderr_seen.iter().any(|l| l.contains("owner")),
        "{:?}",
        b.stderr_seen
    );
    assert!(!p.token_file().exists());
    // Its ports are free: a bridge started next owns them.
    let mut next = Bridge::start(&p.args());
    next.wait_stderr("owner", Duration::from_secs(20));
}

/// Raw request `method` with `headers` and no body; the status and the whole head.
fn raw(port: u16, method: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let mut req = format!("{method} /mcp HTTP/1.1\r\nContent-Length: 0\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).expect("write");
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).to_string();
    let status = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, text.to_ascii_lowercase())
}

/// Found in review: `--allow-origin` could not work for a browser page: its preflight (no
/// Authorization) got 401, and no answer named the origin or exposed Mcp-Session-Id.
#[test]
fn an_allowed_origin_gets_cors_and_others_stay_refused() {
    const PAGE: &str = "https://app.example";
    let [ext, control, http] = free_ports();
    let p = Ports::of(ext, control);
    let mut args = p.args();
    args.extend([
        "--http".to_string(),
        http.to_string(),
        "--allow-origin".into(),
        PAGE.into(),
    ]);
    let mut b = Bridge::start(&args);
    b.wait_stderr("MCP over HTTP", Duration::from_secs(20));
    let host = format!("127.0.0.1:{http}");
    let bearer = format!("Bearer {TOKEN}");
    let preflight = |origin: &str, host: &str| {
        raw(
            http,
            "OPTIONS",
            &[
                ("Host", host),
                ("Origin", origin),
                ("Access-Control-Request-Method", "POST"),
                (
                    "Access-Control-Request-Headers",
                    "authorization, content-type",
                ),
            ],
        )
    };
    let (status, head) = preflight(PAGE, &host);
    assert_eq!(status, 204, "{head}");
    assert!(
        head.contains(&format!("access-control-allow-origin: {PAGE}")),
        "{head}"
    );
    assert!(
        head.contains("access-control-allow-methods: get, post, delete"),
        "{head}"
    );
    assert!(head.contains("access-control-allow-headers: authorization, content-type, mcp-protocol-version, mcp-session-id, last-event-id"), "{head}");
    assert!(head.contains("access-control-max-age:"), "{head}");
    assert!(head.contains("vary: origin"), "{head}");
    // The real request: answered with the origin named and the session id exposed.
    let (status, text) = post(
        http,
        &[
            ("Host", &host),
            ("Authorization", &bearer),
            ("Origin", PAGE),
        ],
    );
    let head = text.to_ascii_lowercase();
    assert_eq!(status, 200, "{text}");
    assert!(
        head.contains(&format!("access-control-allow-origin: {PAGE}")),
        "{head}"
    );
    assert!(
        head.contains("access-control-expose-headers: mcp-session-id, mcp-protocol-version"),
        "{head}"
    );
    assert!(head.contains("mcp-session-id:"), "{head}");
    // Without the token it is still 401, which the page may read.
    let (status, text) = post(http, &[("Host", &host), ("Origin", PAGE)]);
    assert_eq!(status, 401, "{text}");
    assert!(text
        .to_ascii_lowercase()
        .contains("access-control-allow-origin"));
    // Another origin, or a rebinding Host: refused, and no CORS header.
    for (origin, host) in [
        ("https://evil.example", host.clone()),
        (PAGE, format!("evil.example:{http}")),
    ] {
        let (status, head) = preflight(origin, &host);
        assert_eq!(status, 403, "{origin} {host}: {head}");
        assert!(!head.contains("access-control-allow-origin"), "{head}");
    }
    let (status, text) = post(
        http,
        &[
            ("Host", &host),
            ("Authorization", &bearer),
            ("Origin", "https://evil.example"),
        ],
    );
    assert_eq!(status, 403, "{text}");
    assert!(!text
        .to_ascii_lowercase()
        .contains("access-control-allow-origin"));
}
