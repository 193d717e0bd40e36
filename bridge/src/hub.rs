//! The owner's one extension connection: at most one at a time; a newer one that passed the
//! token check replaces the older (closed with 4003). Tool calls go to whichever is current.

use crate::call_error::CallError;
use crate::link::{self, Cmd};
use lumo_userscripts::bridge::types;
use serde_json::{json, Map, Value};
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// A tool call may wait for the user's review in the browser (up to 50 s) before it is answered.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(120);
/// Close code for a connection replaced by a newer one.
pub const REPLACED: u16 = lumo_userscripts::bridge::dialer::REPLACED;

struct Current {
    id: u64,
    tx: mpsc::Sender<Cmd>,
    hello: Map<String, Value>,
}

pub struct Hub {
    pub port: u16,
    /// How long a tool call waits for the extension (CALL_TIMEOUT; shorter in tests).
    pub call_timeout: Duration,
    pub ext_token: String,
    pub connect_link: String,
    /// Whether the user lets callers write, as the extension last said (`types::TOOLS`); `None`
    /// until one says. Kept across reconnects: the tool list does not flicker when the
    /// extension's worker dials again. The process's MCP sessions and forwarders follow it.
    pub writes: watch::Sender<Option<bool>>,
    state: Mutex<(Option<Current>, u64)>,
    /// The user disconnected the last link (close code 4002): the extension will not dial again
    /// by itself, so the agent is told to ask rather than to wait.
    user_disconnected: std::sync::atomic::AtomicBool,
    /// The token was made at this start and no extension has proven it yet: none can hold an
    /// authorization for it, so none dials by itself (an earlier bridge's fails the proof and
    /// is forgotten), and the agent is told to ask for the click rather than to wait.
    pub fresh: std::sync::atomic::AtomicBool,
}

impl Hub {
    pub fn new(port: u16, ext_token: String, extension_id: &str) -> Self {
        let connect_link =
            format!("chrome-extension://{extension_id}/connect.html?port={port}&token={ext_token}");
        Hub {
            port,
            call_timeout: CALL_TIMEOUT,
            ext_token,
            connect_link,
            writes: watch::channel(None).0,
            state: Mutex::new((None, 0)),
            user_disconnected: std::sync::atomic::AtomicBool::new(false),
            fresh: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// A `tools` notify from link `id`: taken only from the current connection (a replaced
    /// one's late word must not win), and only if it says something.
    pub fn tools_notified(&self, id: u64, payload: &Value) {
        let current = self
            .state
            .lock()
            .is_ok_and(|st| st.0.as_ref().is_some_and(|c| c.id == id));
        if current {
            heard_writes(&self.writes, payload);
        }
    }

    /// Makes this link the extension connection; returns its id for [`Hub::detach`].
    pub fn attach(&self, tx: mpsc::Sender<Cmd>, hello: Map<String, Value>) -> u64 {
        let Ok(mut st) = self.state.lock() else {
            return 0;
        };
        st.1 = st.1.saturating_add(1);
        let id = st.1;
        self.user_disconnected
            .store(false, std::sync::atomic::Ordering::Relaxed);
        self.fresh
            .store(false, std::sync::atomic::Ordering::Relaxed);
        if let Some(old) = st.0.replace(Current { id, tx, hello }) {
            let close = Cmd::Close {
                code: REPLACED,
                reason: "replaced by a newer connection".into(),
            };
            // A busy old link (its queue full) must still be told: dropped, it would stay open
            // with no calls and its browser would show it connected. It gets the close once it
            // has room; a link that is gone has dropped its receiver, and the send fails.
            if let Err(mpsc::error::TrySendError::Full(close)) = old.tx.try_send(close) {
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    rt.spawn(async move { old.tx.send(close).await });
                }
            }
        }
        id
    }

    /// Link `id` ended with close code `code`.
    pub fn detach(&self, id: u64, code: u16) {
        if let Ok(mut st) = self.state.lock() {
            if st.0.as_ref().is_some_and(|c| c.id == id) {
                st.0 = None;
                let by_user = code == lumo_userscripts::bridge::dialer::USER_DISCONNECT;
                self.user_disconnected
                    .store(by_user, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }

    fn not_connected(&self) -> String {
        let by_user = self
            .user_disconnected
            .load(std::sync::atomic::Ordering::Relaxed);
        let fresh = self.fresh.load(std::sync::atomic::Ordering::Relaxed);
        not_connected_message(&self.connect_link, by_user, fresh)
    }

    fn current(&self) -> Option<(mpsc::Sender<Cmd>, Map<String, Value>)> {
        let st = self.state.lock().ok()?;
        st.0.as_ref().map(|c| (c.tx.clone(), c.hello.clone()))
    }

    /// `bridge_status` as the owner sees it.
    pub fn status(&self) -> Value {
        match self.current() {
            Some((_, hello)) => json!({
                "connected": true,
                "extension": {
                    "extVersion": hello.get("extVersion").cloned().unwrap_or(Value::Null),
                    "label": hello.get("label").cloned().unwrap_or(Value::Null),
                },
                "port": self.port,
            }),
            None => json!({
                "connected": false,
                "connectLink": self.connect_link,
                "port": self.port,
                "message": self.not_connected(),
            }),
        }
    }

    /// Forwards one tool call to the extension; the answer is an MCP tool result (JSON).
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<Value, CallError> {
        let Some((tx, _)) = self.current() else {
            return Err(CallError::not_connected(self.not_connected()));
        };
        link::request(
            &tx,
            types::CALL_TOOL,
            json!({ "name": name, "arguments": arguments }),
            self.call_timeout,
        )
        .await
        .map_err(|e| {
            let answered = !matches!(e.code.as_str(), "NOT_CONNECTED" | "TIMEOUT");
            e.context(if answered {
                "the browser extension: "
            } else {
                "the browser extension did not answer: "
            })
        })
    }
}

/// Takes what a `tools` notify says of writes, if it says something; the process's MCP
/// sessions (and an owner's forwarders) are woken only by a change.
pub fn heard_writes(writes: &watch::Sender<Option<bool>>, payload: &Value) {
    if let Some(w) = lumo_userscripts::bridge::writes_of(payload) {
        writes.send_if_modified(|v| v.replace(w) != Some(w));
    }
}

/// What the agent is told while no extension is connected. The extension dials again by
/// itself while the user's authorization holds (a lost link, a restart, a handover between
/// bridges), which this process cannot see: it says so, and asks for the click only when the
/// user disconnected or the token is new to this start (`fresh`).
pub fn not_connected_message(link: &str, by_user: bool, fresh: bool) -> String {
    if by_user {
        format!(
            "The user disconnected the Lumo Userscripts extension from this bridge. If the user wants it back, they open this link in Chrome and click Connect: {link}"
        )
    } else if fresh {
        format!(
            "The Lumo Userscripts extension is not connected to this bridge, and will not connect by itself: this bridge made a new token when it started, so an authorization the user gave an earlier bridge does not hold for it (a token set with LUMO_BRIDGE_TOKEN keeps one across starts). Ask the user to open this link in Chrome (where the extension is installed) and click Connect: {link}"
        )
    } else {
        format!(
            "The Lumo Userscripts extension is not connected to this bridge. If the user connected a bridge on this port before, the extension reconnects by itself within a few seconds while Chrome runs: try again shortly. Otherwise ask the user to open this link in Chrome (where the extension is installed) and click Connect: {link}"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newer_connection_replaces_the_older_which_is_told_why() {
        let hub = Hub::new(1, "t".repeat(64), "imliakfdgonldkmaddnhnniclbhiobpo");
        assert_eq!(hub.status()["connected"], false);
        let (tx1, mut rx1) = mpsc::channel(4);
        let (tx2, _rx2) = mpsc::channel(4);
        let first = hub.attach(tx1, Map::new());
        assert_eq!(hub.status()["connected"], true);
        let second = hub.attach(tx2, Map::new());
        match rx1.try_recv() {
            Ok(Cmd::Close { code, .. }) => assert_eq!(code, REPLACED),
            _ => panic!("the replaced link was not closed"),
        }
        // The old link's late detach must not drop the new one.
        hub.detach(first, REPLACED);
        assert_eq!(hub.status()["connected"], true);
        hub.detach(second, 1006);
        assert_eq!(hub.status()["connected"], false);
        // A lost link: the extension dials again by itself, and the agent is told to wait.
        let lost = hub.status()["message"].as_str().unwrap().to_owned();
        assert!(lost.contains("reconnects by itself"), "{lost}");
        // The user's Disconnect: no redial comes, and the agent is told the user did it.
        let third = hub.attach(mpsc::channel(4).0, Map::new());
        hub.detach(third, lumo_userscripts::bridge::dialer::USER_DISCONNECT);
        let gone = hub.status()["message"].as_str().unwrap().to_owned();
        assert!(gone.starts_with("The user disconnected"), "{gone}");
        // A new link clears it.
        let fourth = hub.attach(mpsc::channel(4).0, Map::new());
        hub.detach(fourth, 1006);
        assert!(hub.status()["message"]
            .as_str()
            .unwrap()
            .contains("reconnects by itself"));
        assert!(hub.status()["connectLink"]
            .as_str()
            .is_some_and(|l| l.ends_with(&"t".repeat(64))));
    }

    /// Found by a tester: a bridge that made its token at start (the README's Claude Code
    /// set-up) told the agent the extension "reconnects by itself", which it never does for a
    /// token no extension holds. Until one proves it, the agent is told to ask for the click.
    #[test]
    fn a_fresh_token_asks_for_the_click_until_an_extension_proves_it() {
        let hub = Hub::new(1, "t".repeat(64), "imliakfdgonldkmaddnhnniclbhiobpo");
        hub.fresh.store(true, std::sync::atomic::Ordering::Relaxed);
        let first = hub.status()["message"].as_str().unwrap().to_owned();
        assert!(first.contains("will not connect by itself"), "{first}");
        assert!(
            first.contains("click Connect: chrome-extension://"),
            "{first}"
        );
        assert!(!first.contains("reconnects by itself"), "{first}");
        let id = hub.attach(mpsc::channel(4).0, Map::new());
        hub.detach(id, 1006);
        let lost = hub.status()["message"].as_str().unwrap().to_owned();
        assert!(lost.contains("reconnects by itself"), "{lost}");
    }

    #[tokio::test]
    async fn a_replaced_link_whose_queue_is_full_is_still_closed() {
        let hub = Hub::new(1, "t".repeat(64), "imliakfdgonldkmaddnhnniclbhiobpo");
        let (tx1, mut rx1) = mpsc::channel(1);
        let (tx2, _rx2) = mpsc::channel(1);
        hub.attach(tx1.clone(), Map::new());
        // The old link is busy: its one slot holds a call it has not taken yet.
        tx1.try_send(Cmd::Respond {
            id: 7,
            outcome: Ok(Value::Null),
        })
        .map_err(|_| ())
        .expect("the slot is free");
        hub.attach(tx2, Map::new());
        let first = rx1.recv().await;
        assert!(matches!(first, Some(Cmd::Respond { id: 7, .. })));
        let next = tokio::time::timeout(Duration::from_secs(5), rx1.recv()).await;
        match next {
            Ok(Some(Cmd::Close { code, .. })) => assert_eq!(code, REPLACED),
            _ => panic!("the busy replaced link was never told to close"),
        }
    }
}
