//! Helpers for the bridge's integration tests: they start the real binary, speak MCP to it over
//! stdio (newline-delimited JSON-RPC) and play the extension over a real WebSocket.
#![allow(dead_code)]

use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{json, Value};
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub const TOKEN: &str = "test-token-0123456789abcdef0123456789abcdef";
pub const OWN_ORIGIN: &str = "chrome-extension://imliakfdgonldkmaddnhnniclbhiobpo";

/// `N` distinct free loopback ports. Every listener is held until all are bound: a port closed
/// before the next bind can be handed out again (it was: "--port and --control-port must differ").
pub fn free_ports<const N: usize>() -> [u16; N] {
    let held: Vec<std::net::TcpListener> = (0..N)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("a free port"))
        .collect();
    std::array::from_fn(|i| held[i].local_addr().expect("a bound port").port())
}

pub struct Ports {
    pub ext: u16,
    pub control: u16,
    pub state: PathBuf,
}

/// The state directory goes with the test: every test makes one in the system's temp dir.
impl Drop for Ports {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.state);
    }
}

impl Default for Ports {
    fn default() -> Self {
        Self::new()
    }
}

impl Ports {
    pub fn new() -> Self {
        let [ext, control] = free_ports();
        Self::of(ext, control)
    }

    /// With ports the caller took, e.g. beside an `--http` port from the same `free_ports`.
    pub fn of(ext: u16, control: u16) -> Self {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let state =
            std::env::temp_dir().join(format!("lumo-bridge-it-{}-{n}-{ext}", std::process::id()));
        Ports {
            ext,
            control,
            state,
        }
    }

    /// The control token file the owner on `control` writes.
    pub fn token_file(&self) -> PathBuf {
        self.state.join(format!("control-token-{}", self.control))
    }

    pub fn args(&self) -> Vec<String> {
        vec![
            "--port".into(),
            self.ext.to_string(),
            "--control-port".into(),
            self.control.to_string(),
            "--state-dir".into(),
            self.state.display().to_string(),
            "--token".into(),
            TOKEN.into(),
        ]
    }
}

/// A running bridge: stdin/stdout carry MCP, stderr lines are collected.
pub struct Bridge {
    pub child: Child,
    stdin: Option<ChildStdin>,
    stdout: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
    pub stderr_seen: Vec<String>,
    /// Messages from the server that answer no request (notifications), in order.
    pub notifications: Vec<Value>,
    next_id: u64,
}

impl Bridge {
    pub fn start(args: &[String]) -> Self {
        Self::start_env(args, None)
    }

    /// `token_env`: the value of `LUMO_BRIDGE_TOKEN` (unset otherwise).
    pub fn start_env(args: &[String], token_env: Option<&str>) -> Self {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_lumo-bridge"));
        cmd.args(args).env_remove("LUMO_BRIDGE_TOKEN");
        if let Some(t) = token_env {
            cmd.env("LUMO_BRIDGE_TOKEN", t);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start lumo-bridge");
        let stdin = child.stdin.take();
        let (otx, orx) = mpsc::channel();
        let out = child.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = otx.send(line);
            }
        });
        let (etx, erx) = mpsc::channel();
        let err = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = etx.send(line);
            }
        });
        Bridge {
            child,
            stdin,
            stdout: orx,
            stderr: erx,
            stderr_seen: Vec::new(),
            notifications: Vec::new(),
            next_id: 1,
        }
    }

    /// Waits for a stderr line containing `needle`.
    pub fn wait_stderr(&mut self, needle: &str, within: Duration) -> String {
        let deadline = std::time::Instant::now() + within;
        if let Some(l) = self.stderr_seen.iter().find(|l| l.contains(needle)) {
            return l.clone();
        }
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(l) => {
                    self.stderr_seen.push(l.clone());
                    if l.contains(needle) {
                        return l;
                    }
                }
                Err(_) => panic!(
                    "no stderr line with {needle:?}; saw {:#?}",
                    self.stderr_seen
                ),
            }
        }
    }

    pub fn send(&mut self, msg: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{msg}").expect("write to the bridge");
        stdin.flush().expect("flush");
    }

    /// Sends `text` as one line, as it is (it need not be JSON).
    pub fn send_raw(&mut self, text: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{text}").expect("write to the bridge");
        stdin.flush().expect("flush");
    }

    /// Every line still to come on stdout, until the process closes it (bounded by `within`).
    pub fn rest_of_stdout(&mut self, within: Duration) -> Vec<Value> {
        let deadline = std::time::Instant::now() + within;
        let mut out = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.stdout.recv_timeout(left) {
                Ok(line) => out.push(serde_json::from_str(&line).expect("JSON on stdout")),
                Err(mpsc::RecvTimeoutError::Disconnected) => return out,
                Err(mpsc::RecvTimeoutError::Timeout) => panic!("stdout still open: {out:?}"),
            }
        }
    }

    /// The next message on stdout that is not a notification.
    pub fn next_answer(&mut self, within: Duration) -> Value {
        let deadline = std::time::Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let line = self
                .stdout
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no answer within {within:?}"));
            let v: Value = serde_json::from_str(&line).expect("JSON on stdout");
            if v.get("method").is_none() {
                return v;
            }
            self.notifications.push(v);
        }
    }

    /// Sends a request and waits for the response with its id.
    pub fn rpc(&mut self, method: &str, params: Value, within: Duration) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let deadline = std::time::Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let line = self
                .stdout
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no answer to {method} within {within:?}"));
            let v: Value = serde_json::from_str(&line).expect("JSON on stdout");
            if v["id"] == json!(id) {
                return v;
            }
            if v.get("id").is_none() {
                self.notifications.push(v);
            }
        }
    }

    /// Waits for a notification named `method` the server sent since the last one taken;
    /// takes it and every one before it.
    pub fn take_notification(&mut self, method: &str, within: Duration) -> Value {
        let deadline = std::time::Instant::now() + within;
        loop {
            if let Some(i) = self
                .notifications
                .iter()
                .position(|n| n["method"] == method)
            {
                return self
                    .notifications
                    .drain(..=i)
                    .next_back()
                    .unwrap_or_default();
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let line = self.stdout.recv_timeout(left).unwrap_or_else(|_| {
                panic!("no {method} within {within:?}: {:?}", self.notifications)
            });
            let v: Value = serde_json::from_str(&line).expect("JSON on stdout");
            if v.get("id").is_none() {
                self.notifications.push(v);
            }
        }
    }

    /// The names tools/list answers.
    pub fn tool_names(&mut self) -> Vec<String> {
        let list = self.rpc("tools/list", json!({}), Duration::from_secs(10));
        list["result"]["tools"]
            .as_array()
            .expect("a tool list")
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect()
    }

    pub fn initialize(&mut self) -> Value {
        let r = self.rpc(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "it", "version": "0"}}),
            Duration::from_secs(10),
        );
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        r
    }

    pub fn call(&mut self, name: &str, args: Value, within: Duration) -> Value {
        let r = self.rpc(
            "tools/call",
            json!({"name": name, "arguments": args}),
            within,
        );
        r["result"].clone()
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Opens a WebSocket with the given headers; Err carries the HTTP status of a refused upgrade.
pub async fn ws_connect(port: u16, headers: &[(&str, &str)]) -> Result<Ws, u16> {
    let mut req = format!("ws://127.0.0.1:{port}/")
        .into_client_request()
        .expect("request");
    for (k, v) in headers {
        let name = tokio_tungstenite::tungstenite::http::HeaderName::from_bytes(k.as_bytes())
            .expect("name");
        req.headers_mut()
            .insert(name, HeaderValue::from_str(v).expect("value"));
    }
    match tokio_tungstenite::connect_async(req).await {
        Ok((ws, _)) => Ok(ws),
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => Err(resp.status().as_u16()),
        Err(e) => panic!("connect: {e}"),
    }
}

/// Connects as the extension (retrying while the bridge starts up).
pub async fn ext_connect(port: u16) -> Ws {
    for _ in 0..100 {
        if let Ok(s) = TcpStream::connect(("127.0.0.1", port)).await {
            drop(s);
            return ws_connect(port, &[("Origin", OWN_ORIGIN)])
                .await
                .expect("upgrade accepted");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the bridge never listened on {port}");
}

pub async fn send(ws: &mut Ws, v: Value) {
    ws.send(Message::Text(v.to_string().into()))
        .await
        .expect("send");
}

/// The next text frame as JSON, or Err(close code) when the socket closes.
pub async fn recv(ws: &mut Ws, within: Duration) -> Result<Value, u16> {
    let fut = async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Text(t))) => {
                    return Ok(serde_json::from_str(t.as_str()).expect("JSON frame"))
                }
                Some(Ok(Message::Close(f))) => return Err(f.map_or(1005, |f| u16::from(f.code))),
                Some(Ok(_)) => continue,
                Some(Err(_)) | None => return Err(1006),
            }
        }
    };
    tokio::time::timeout(within, fut)
        .await
        .unwrap_or_else(|_| panic!("nothing within {within:?}"))
}

/// The nonce the tests' extension (or forwarder) says hello with.
pub const CLIENT_NONCE: &str = "test-client-nonce-0123456789";

/// What the dialling end saw of a handshake: the answer to its hello (the challenge, or a
/// refusal) and, when it sent its proof, the answer to that (the ack).
pub struct Handshake {
    pub challenge: Value,
    pub ack: Option<Value>,
}

/// Plays the dialling end of the handshake (`hello_type` with `payload`) on `port`, proving
/// `token` — the right one or not. It checks the accepting end's proof against the right
/// token (`TOKEN`, or `real` for the control port) and sends its own only if that holds.
pub async fn handshake(
    ws: &mut Ws,
    hello_type: &str,
    mut payload: serde_json::Map<String, Value>,
    token: &str,
    real: &str,
    port: u16,
) -> Handshake {
    use lumo_userscripts::bridge::trust::{self, ProofRole};
    payload.insert(
        "protocol".into(),
        json!(lumo_userscripts::bridge::PROTOCOL_VERSION),
    );
    payload.insert("nonce".into(), json!(CLIENT_NONCE));
    send(
        ws,
        json!({"k": "req", "id": 0, "type": hello_type, "payload": payload}),
    )
    .await;
    let challenge = recv(ws, Duration::from_secs(5))
        .await
        .expect("an answer to the hello");
    let r = &challenge["result"];
    if r["ok"] != true {
        return Handshake {
            challenge,
            ack: None,
        };
    }
    let theirs = r["nonce"].as_str().expect("the bridge's nonce").to_owned();
    let proof = r["proof"].as_str().unwrap_or("");
    assert!(
        trust::proof_ok(
            proof,
            real,
            ProofRole::Accept,
            hello_type,
            port,
            CLIENT_NONCE,
            &theirs
        ),
        "the bridge proves it holds the token: {challenge}"
    );
    let ours = trust::proof(
        token,
        ProofRole::Dial,
        hello_type,
        port,
        CLIENT_NONCE,
        &theirs,
    );
    send(
        ws,
        json!({"k": "req", "id": 0, "type": "hello_proof", "payload": {"proof": ours}}),
    )
    .await;
    let ack = recv(ws, Duration::from_secs(5))
        .await
        .expect("an answer to the proof");
    Handshake {
        challenge,
        ack: Some(ack),
    }
}

/// The extension's hello payload.
pub fn ext_hello() -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    m.insert("extVersion".into(), json!("0.1.0"));
    m.insert("label".into(), json!("test"));
    m
}

/// Connects, proves the right token, and returns the socket after the accepting ack.
pub async fn ext_open(port: u16) -> Ws {
    let mut ws = ext_connect(port).await;
    let h = handshake(&mut ws, "hello", ext_hello(), TOKEN, TOKEN, port).await;
    let ack = h.ack.expect("the challenge accepted the hello");
    assert_eq!(ack["result"]["ok"], true, "{ack}");
    ws
}

/// Plays the extension telling the bridge whether the user has writes on (`types::TOOLS`).
pub async fn tools_notify(ws: &mut Ws, writes: bool) {
    send(
        ws,
        json!({"k": "ntf", "type": lumo_userscripts::bridge::types::TOOLS,
               "payload": lumo_userscripts::bridge::tools_payload(writes)}),
    )
    .await;
}

/// Plays the extension: answers each call_tool with a result naming the tool, until closed.
pub async fn serve_calls(ws: &mut Ws, count: usize) -> Vec<Value> {
    let mut seen = Vec::new();
    while seen.len() < count {
        let Ok(f) = recv(ws, Duration::from_secs(20)).await else {
            break;
        };
        if f["k"] == "req" && f["type"] == "call_tool" {
            seen.push(f["payload"].clone());
            let name = f["payload"]["name"].as_str().unwrap_or("").to_string();
            send(
                ws,
                json!({"k": "res", "id": f["id"], "ok": true, "result": {
                "content": [{"type": "text", "text": format!("ran {name}")}],
                "structuredContent": {"ran": name}, "isError": false}}),
            )
            .await;
        } else if f["k"] == "png" {
            send(ws, json!({"k": "pog"})).await;
        }
    }
    seen
}
