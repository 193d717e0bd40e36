//! The process's role and how it changes: owner (holds the extension link) or forwarder (sends
//! its tool calls to the owner), decided by `election::elect` and re-decided when the owner goes.

use crate::args::Args;
use crate::call_error::CallError;
use crate::election::{elect, Bind, Decision, Dial};
use crate::ext::{self, ExtConfig, VERSION};
use crate::hub::Hub;
use crate::link::{self, now_ms, Cmd};
use crate::{control, secrets};
use futures_util::future::BoxFuture;
use futures_util::FutureExt as _;
use lumo_userscripts::bridge::{types, CloseReason, Connection};
use serde_json::{json, Map, Value};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

pub enum Backend {
    Electing,
    Owner(Arc<Hub>),
    Forwarder { tx: mpsc::Sender<Cmd>, link: String },
    Failed(String),
}

pub struct App {
    pub args: Args,
    pub state_dir: PathBuf,
    /// The extension token; a forwarder adopts its owner's so a takeover keeps the same link.
    ext_token: Mutex<String>,
    backend: Mutex<Backend>,
    /// Whether the extension lets callers write (`None`: not told), from its link (owner) or
    /// from the owner (forwarder); the tool list follows it (`mcp`).
    pub writes: watch::Sender<Option<bool>>,
    /// A forwarder's owner was started with `--readonly` (its ack said so).
    owner_readonly: AtomicBool,
    /// The extension token was made at this start (no `--token`, no `LUMO_BRIDGE_TOKEN`, none
    /// adopted from an owner): no extension can hold an authorization for it yet (`Hub::fresh`).
    token_fresh: AtomicBool,
}

enum Snapshot {
    Electing,
    Owner(Arc<Hub>),
    Forwarder(mpsc::Sender<Cmd>, String),
    Failed(String),
}

impl App {
    pub fn new(args: Args, state_dir: PathBuf, ext_token: String, fresh: bool) -> Arc<Self> {
        Arc::new(App {
            args,
            state_dir,
            ext_token: Mutex::new(ext_token),
            backend: Mutex::new(Backend::Electing),
            writes: watch::channel(None).0,
            owner_readonly: AtomicBool::new(false),
            token_fresh: AtomicBool::new(fresh),
        })
    }

    fn snapshot(&self) -> Snapshot {
        match self.backend.lock().as_deref() {
            Ok(Backend::Owner(h)) => Snapshot::Owner(h.clone()),
            Ok(Backend::Forwarder { tx, link }) => Snapshot::Forwarder(tx.clone(), link.clone()),
            Ok(Backend::Failed(m)) => Snapshot::Failed(m.clone()),
            Ok(Backend::Electing) | Err(_) => Snapshot::Electing,
        }
    }

    fn set(&self, b: Backend) {
        if let Ok(mut g) = self.backend.lock() {
            *g = b;
        }
    }

    /// A tool call from this process's MCP client, wherever the extension link lives.
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<Value, CallError> {
        match self.snapshot() {
            Snapshot::Owner(h) => h.call_tool(name, arguments).await,
            Snapshot::Forwarder(tx, _) => {
                let payload = json!({ "name": name, "arguments": arguments });
                link::request(
                    &tx,
                    types::CALL_TOOL,
                    payload,
                    // The owner's own wait (and its one retry of a read) comes first.
                    self.args.call_timeout * 2 + Duration::from_secs(5),
                )
                    .await
                    .map_err(|e| e.context("via the bridge that owns the extension link: "))
            }
            Snapshot::Electing => Err(CallError::not_connected("the bridge that held the extension link exited; this one is taking over. Retry in a few seconds.")),
            Snapshot::Failed(m) => Err(CallError::not_connected(m)),
        }
    }

    pub async fn status(&self) -> Value {
        let mut v = match self.snapshot() {
            Snapshot::Owner(h) => {
                let mut v = h.status();
                v["role"] = json!("owner");
                v
            }
            Snapshot::Forwarder(tx, link) => {
                match link::request(
                    &tx,
                    types::BRIDGE_STATUS,
                    json!({}),
                    Duration::from_secs(10),
                )
                .await
                {
                    Ok(mut v) => {
                        v["role"] = json!("forwarder");
                        v
                    }
                    Err(e) => json!({ "connected": false, "role": "forwarder", "connectLink": link,
                                      "message": format!("the owning bridge did not answer: {e}") }),
                }
            }
            Snapshot::Electing => json!({ "connected": false, "role": "electing",
                                          "message": "taking over from a bridge that exited; ask again in a few seconds" }),
            Snapshot::Failed(m) => json!({ "connected": false, "role": "failed", "message": m }),
        };
        v["readonly"] = json!(self.readonly());
        v["writesEnabled"] = json!(*self.writes.borrow());
        v
    }

    /// Whether write tools are refused here: this process's `--readonly`, or (forwarding) the
    /// owner's.
    pub fn readonly(&self) -> bool {
        self.args.readonly || self.owner_readonly.load(Ordering::Relaxed)
    }

    /// Whether this process's MCP clients see the write tools: not read-only, nor while the
    /// extension says writes are off.
    pub fn shows_writes(&self) -> bool {
        !self.readonly() && *self.writes.borrow() != Some(false)
    }

    /// Takes the owner's read-only mode (false once this process owns the link), and wakes the
    /// tool-list watchers (`mcp::watch_writes`) if it changed.
    fn set_owner_readonly(&self, ro: bool) {
        if self.owner_readonly.swap(ro, Ordering::Relaxed) != ro {
            self.writes.send_modify(|_| {});
        }
    }

    fn connect_link(&self, token: &str) -> String {
        let id = self
            .args
            .extension_id
            .as_ref()
            .map_or(crate::args::OWN_EXTENSION_ID, |i| i.as_str());
        Hub::new(self.args.port, token.to_string(), id).connect_link
    }
}

/// One election, to a role. Boxed: a forwarder whose owner leaves runs it again from a task.
pub fn run_election(app: Arc<App>) -> BoxFuture<'static, Result<(), String>> {
    async move {
        let pid = std::process::id();
        let cp = app.args.control_port;
        let mut attempt = 0u32;
        loop {
            let (bind, listener) = match TcpListener::bind(("127.0.0.1", cp)).await {
                Ok(l) => (Bind::Bound, Some(l)),
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => (Bind::InUse, None),
                Err(e) => (Bind::Failed(e.to_string()), None),
            };
            let (dial, dialed) = if bind == Bind::InUse {
                let (d, x) = dial_owner(&app).await;
                (Some(d), x)
            } else {
                (None, None)
            };
            match (
                elect(&bind, dial.as_ref(), attempt, pid, cp),
                listener,
                dialed,
            ) {
                (Decision::Own, Some(l), _) => return become_owner(&app, l).await,
                (Decision::Forward, _, Some((tx, ack, handle))) => {
                    become_forwarder(app.clone(), tx, ack, handle);
                    return Ok(());
                }
                (Decision::GiveUp(m), _, _) => return Err(m),
                (Decision::RetryAfter(d), _, _) => tokio::time::sleep(d).await,
                // Own without a listener / Forward without a link cannot happen; try again.
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
            attempt = attempt.saturating_add(1);
        }
    }
    .boxed()
}

type Dialed = (
    mpsc::Sender<Cmd>,
    Map<String, Value>,
    JoinHandle<CloseReason>,
);

async fn dial_owner(app: &App) -> (Dial, Option<Dialed>) {
    let Some(token) = secrets::read_control_token(&app.state_dir, app.args.control_port) else {
        return (Dial::NoToken(app.state_dir.display().to_string()), None);
    };
    let url = format!("ws://127.0.0.1:{}/", app.args.control_port);
    let connect = tokio_tungstenite::connect_async_with_config(url, Some(link::ws_config()), false);
    let Ok(Ok((ws, _))) = tokio::time::timeout(Duration::from_secs(3), connect).await else {
        return (Dial::Unreachable, None);
    };
    let mut hello = Map::new();
    hello.insert("pid".into(), json!(std::process::id()));
    hello.insert("version".into(), json!(VERSION));
    // The control token is never sent: the owner proves it holds it first.
    let auth = secrets::auth(token, app.args.control_port);
    let conn = Connection::dial(types::FWD_HELLO, hello, auth, VERSION, now_ms(), 5_000);
    let (tx, rx) = mpsc::channel(64);
    let (open_tx, mut open_rx) = oneshot::channel();
    let writes = app.writes.clone();
    let mut handle = tokio::spawn(link::run(
        ws,
        conn,
        tx.clone(),
        rx,
        move |ack| {
            let _ = open_tx.send(ack);
        },
        None,
        Some(Box::new(move |kind: String, payload: Value| {
            if kind == types::TOOLS {
                crate::hub::heard_writes(&writes, &payload);
            }
        })),
    ));
    let reason = tokio::select! {
        ack = &mut open_rx => match ack {
            Ok(ack) => return (Dial::Accepted, Some((tx, ack, handle))),
            // The link ended without opening; both branches are ready then, and either may be
            // picked: why it ended is the task's answer.
            Err(_) => (&mut handle).await,
        },
        reason = &mut handle => reason,
    };
    match reason {
        Ok(
            r @ (CloseReason::BadToken
            | CloseReason::Impostor
            | CloseReason::RefusedUnproven
            | CloseReason::Rejected(_)
            | CloseReason::ProtocolMismatch { .. }),
        ) => (Dial::Refused(r.to_string()), None),
        _ => (Dial::Unreachable, None),
    }
}

async fn become_owner(app: &Arc<App>, control_listener: TcpListener) -> Result<(), String> {
    // The previous owner may still be releasing the extension port: wait for it a little.
    let mut tries = 0;
    let ws_listener = loop {
        match TcpListener::bind(("127.0.0.1", app.args.port)).await {
            Ok(l) => break l,
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && tries < 50 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => {
                return Err(format!(
                "cannot listen for the extension on 127.0.0.1:{}: {e}; choose another with --port",
                app.args.port
            ))
            }
        }
    };
    let control_token = secrets::random_token();
    secrets::write_control_token(&app.state_dir, app.args.control_port, &control_token)?;
    let token = app.ext_token.lock().map(|t| t.clone()).unwrap_or_default();
    let id = app
        .args
        .extension_id
        .as_ref()
        .map_or(crate::args::OWN_EXTENSION_ID, |i| i.as_str());
    let mut hub = Hub::new(app.args.port, token, id);
    hub.fresh = AtomicBool::new(app.token_fresh.load(Ordering::Relaxed));
    hub.call_timeout = app.args.call_timeout;
    hub.writes = app.writes.clone();
    let hub = Arc::new(hub);
    let cfg = Arc::new(ExtConfig {
        pinned: app.args.extension_id.clone(),
        readonly: app.args.readonly,
        hello_timeout_ms: app.args.hello_timeout_ms,
    });
    tokio::spawn(ext::serve(ws_listener, hub.clone(), cfg));
    tokio::spawn(control::serve(
        control_listener,
        hub.clone(),
        control_token,
        app.args.control_port,
        app.args.hello_timeout_ms,
        app.args.readonly,
    ));
    app.set_owner_readonly(false);
    eprintln!(
        "lumo-bridge: owner; waiting for the extension on 127.0.0.1:{}. Connect link (keep it private):\n{}",
        app.args.port, hub.connect_link
    );
    app.set(Backend::Owner(hub));
    Ok(())
}

fn become_forwarder(
    app: Arc<App>,
    tx: mpsc::Sender<Cmd>,
    ack: Map<String, Value>,
    handle: JoinHandle<CloseReason>,
) {
    if let Some(t) = ack.get("extToken").and_then(Value::as_str) {
        if let Ok(mut g) = app.ext_token.lock() {
            *g = t.to_string();
        }
        // The owner's token, as fresh as the owner says it is (an older owner does not say:
        // then an extension may hold it, and dials again after a takeover).
        let fresh = ack.get("fresh").and_then(Value::as_bool) == Some(true);
        app.token_fresh.store(fresh, Ordering::Relaxed);
    }
    app.set_owner_readonly(ack.get("readonly").and_then(Value::as_bool) == Some(true));
    let token = app.ext_token.lock().map(|t| t.clone()).unwrap_or_default();
    let link = app.connect_link(&token);
    eprintln!(
        "lumo-bridge: forwarder; another bridge on control port {} holds the extension link",
        app.args.control_port
    );
    app.set(Backend::Forwarder { tx, link });
    tokio::spawn(async move {
        let reason = handle
            .await
            .map_or_else(|e| e.to_string(), |r| r.to_string());
        eprintln!("lumo-bridge: the owning bridge went away ({reason}); electing a new owner");
        app.set(Backend::Electing);
        // An election given up on (a program squatting the control port, say) is tried again
        // while callers are told why: it may leave, and this process would stay useless.
        let mut last = String::new();
        while let Err(m) = run_election(app.clone()).await {
            if m != last {
                eprintln!(
                    "lumo-bridge: {m}; trying again every {} s",
                    REELECT_AFTER.as_secs()
                );
                last.clone_from(&m);
            }
            app.set(Backend::Failed(m));
            tokio::time::sleep(REELECT_AFTER).await;
        }
    });
}

/// How long a forwarder whose election gave up waits before it runs one again.
const REELECT_AFTER: Duration = Duration::from_secs(3);
