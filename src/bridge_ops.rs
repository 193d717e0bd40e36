//! The pages' operations on the local bridge link (`bridge.*` internal messages): what the
//! connect page shows (`bridge.status`), the user's click (`bridge.connect`) and the popup's
//! Disconnect (`bridge.disconnect`). The shell carries out the effects (dial, close with 4002).

use crate::bridge::dialer::{self, USER_DISCONNECT};
use crate::bridge::trust::{check_token, token_eq};
use crate::control::args::{loose, Arg};
use crate::control::reply::{Effect, Reply};
use crate::env::Env;
use crate::provider::{BridgeAuth, Provider};
use crate::tools::catalog;
use serde::Deserialize;
use serde_json::{json, Value};

fn err(msg: impl Into<String>) -> Reply {
    json!({ "ok": false, "error": msg.into() }).into()
}

/// The `bridge.*` ops by wire name; fields are read loosely (`control::args`) so that each
/// op's function refuses a bad one with its own message.
#[derive(Debug, Deserialize)]
pub enum BridgeOp {
    /// `token`: the page's token, compared, never echoed; `host`/`port`: the address to judge.
    #[serde(rename = "bridge.status")]
    Status {
        #[serde(default, deserialize_with = "loose")]
        token: Option<String>,
        #[serde(default, deserialize_with = "loose")]
        host: Option<String>,
        #[serde(default, deserialize_with = "loose")]
        port: Option<u64>,
    },
    #[serde(rename = "bridge.connect")]
    Connect {
        #[serde(default)]
        host: Arg<String>,
        #[serde(default, deserialize_with = "loose")]
        port: Option<u64>,
        #[serde(default, rename = "allowRemote", deserialize_with = "loose")]
        allow_remote: Option<bool>,
        #[serde(default, deserialize_with = "loose")]
        remember: Option<bool>,
        #[serde(default, deserialize_with = "loose")]
        token: Option<String>,
    },
    #[serde(rename = "bridge.disconnect")]
    Disconnect,
}

/// Runs one `bridge.*` op: its reply and what the shell must do to the link.
pub async fn run<E: Env>(p: &Provider<E>, op: BridgeOp) -> Reply {
    match op {
        BridgeOp::Status { token, host, port } => status(p, token, host, port).await.into(),
        BridgeOp::Connect {
            host,
            port,
            allow_remote,
            remember,
            token,
        } => {
            connect(
                p,
                host,
                port,
                allow_remote == Some(true),
                remember == Some(true),
                token,
            )
            .await
        }
        BridgeOp::Disconnect => disconnect(p).await,
    }
}

/// Why no bridge connects while agent access is off.
pub const BRIDGE_ACCESS_OFF: &str = "agent access is switched off in Lumo Userscripts' options: turn it on, then open the connect link again";

/// `bridge.disconnect`: forgets the authorization and closes the link with 4002.
async fn disconnect<E: Env>(p: &Provider<E>) -> Reply {
    p.forget_bridge().await;
    let was = p.bridge_view().session.is_some();
    Reply {
        value: json!({ "ok": true, "closed": was }),
        effects: vec![Effect::CloseBridge {
            code: USER_DISCONNECT,
            reason: "disconnected by the user".into(),
        }],
    }
}

/// The link's state, the tools the bridge will expose (its catalogue is ours, linked in), and
/// whether the token on the page is the one the user already authorized (never the token).
async fn status<E: Env>(
    p: &Provider<E>,
    token: Option<String>,
    host: Option<String>,
    port: Option<u64>,
) -> Value {
    let auth = p.bridge_auth().await;
    let authorized = match (token, &auth) {
        (Some(t), Some(a)) => token_eq(&t, &a.token),
        _ => false,
    };
    let tools: Vec<Value> = catalog::TOOLS
        .iter()
        .map(|t| json!({ "name": t.name, "title": t.title, "write": t.is_write() }))
        .collect();
    // What the page should say about the address it was given, decided here, not in the page.
    let host = host.as_deref().unwrap_or("127.0.0.1");
    let loopback = dialer::dial_url(host, port.unwrap_or(0), false);
    json!({
        "ok": true,
        "bridge": p.bridge_view(),
        "address": { "ok": loopback.is_ok(), "loopback": dialer::is_loopback(host), "error": loopback.err().map(|e| e.to_string()) },
        "authorized": authorized,
        "remembered": authorized && auth.is_some_and(|a| a.remember),
        "tools": tools,
    })
}

/// `bridge.connect`: the user's click. Checks, stores the authorization, then dials.
async fn connect<E: Env>(
    p: &Provider<E>,
    host: Arg<String>,
    port: Option<u64>,
    allow_remote: bool,
    remember: bool,
    token: Option<String>,
) -> Reply {
    let host = match host {
        Arg::Absent => "127.0.0.1".to_owned(),
        Arg::Is(h) => h,
        Arg::Wrong => return err("\"host\" must be a string"),
    };
    let Some(port) = port else {
        return err("\"port\" must be a number (1–65535)");
    };
    let Some(token) = token else {
        return err("the link has no token: open the connect link the bridge printed");
    };
    if let Err(e) = check_token(&token) {
        return err(e.to_string());
    }
    // The bridge is an agent's way in: with agent access off it would connect, be listed as
    // connected, and have its first call refused.
    if !p.policy().await.endpoint_enabled {
        return err(BRIDGE_ACCESS_OFF);
    }
    let url = match dialer::dial_url(&host, port, allow_remote) {
        Ok(u) => u,
        Err(e) => return err(e.to_string()),
    };
    let auth = BridgeAuth {
        host,
        port: u16::try_from(port).unwrap_or_default(),
        token,
        allow_remote,
        remember,
        readonly: None,
    };
    if let Err(e) = p.authorize_bridge(&auth).await {
        return err(format!("could not store the authorization: {e}"));
    }
    p.bridge_clear_error();
    Reply {
        value: json!({ "ok": true, "url": url }),
        effects: vec![Effect::DialBridge],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::memory::MemoryEnv;
    use crate::env::Area;
    use futures::executor::block_on;

    const TOKEN: &str = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEF";

    /// Runs `op` with the fields of `msg`, parsed as the pages' message would be.
    async fn handle(p: &Provider<MemoryEnv>, op: &str, msg: &Value) -> Reply {
        let mut m = msg.clone();
        m["op"] = json!(op);
        run(
            p,
            crate::control::args::by_name(op, &m).expect("a bridge op"),
        )
        .await
    }

    async fn status(p: &Provider<MemoryEnv>, msg: &Value) -> Value {
        handle(p, "bridge.status", msg).await.value
    }

    #[test]
    fn connect_stores_the_token_in_session_storage_unless_remembered() {
        let p = Provider::new(MemoryEnv::new());
        p.bridge_closed(Some("refused by the other end: an old reason".into()), true);
        let r = block_on(handle(
            &p,
            "bridge.connect",
            &json!({"port": 17817, "token": TOKEN}),
        ));
        assert_eq!(
            p.bridge_view().error,
            None,
            "a new click clears the last link's reason"
        );
        assert_eq!(r.value["ok"], json!(true), "{}", r.value);
        assert_eq!(r.value["url"], json!("ws://127.0.0.1:17817"));
        assert_eq!(r.effects, vec![Effect::DialBridge]);
        assert!(p.env.dump(Area::Session).contains_key("bridgeAuth"));
        assert!(!p.env.dump(Area::Local).contains_key("bridgeAuth"));
        let s = block_on(status(&p, &json!({"token": TOKEN})));
        assert_eq!(s["authorized"], json!(true));
        assert_eq!(s["remembered"], json!(false));
        assert!(
            !s.to_string().contains(TOKEN),
            "status never echoes the token"
        );
        let other = block_on(status(&p, &json!({"token": format!("{TOKEN}x")})));
        assert_eq!(other["authorized"], json!(false));
        // Remember: local storage, and the session copy is gone.
        let r = block_on(handle(
            &p,
            "bridge.connect",
            &json!({"port": 17817, "token": TOKEN, "remember": true}),
        ));
        assert_eq!(r.value["ok"], json!(true));
        assert!(p.env.dump(Area::Local).contains_key("bridgeAuth"));
        assert!(!p.env.dump(Area::Session).contains_key("bridgeAuth"));
        // Disconnect forgets it everywhere and closes with 4002.
        let r = block_on(handle(&p, "bridge.disconnect", &json!({})));
        assert_eq!(
            r.effects,
            vec![Effect::CloseBridge {
                code: 4002,
                reason: "disconnected by the user".into()
            }]
        );
        assert!(block_on(p.bridge_auth()).is_none());
    }

    #[test]
    fn connect_refuses_remote_hosts_and_bad_tokens_and_stores_nothing() {
        let p = Provider::new(MemoryEnv::new());
        for m in [
            json!({"host": "evil.example", "port": 17817, "token": TOKEN}),
            json!({"host": "127.0.0.1/x", "port": 17817, "token": TOKEN, "allowRemote": true}),
            json!({"port": 17817}),
            json!({"port": 17817, "token": "short"}),
            json!({"port": 70000, "token": TOKEN}),
            json!({"port": "17817", "token": TOKEN}),
        ] {
            let r = block_on(handle(&p, "bridge.connect", &m));
            assert_eq!(r.value["ok"], json!(false), "{m}");
            assert!(r.effects.is_empty());
        }
        assert!(block_on(p.bridge_auth()).is_none());
        // The advanced switch admits a remote host.
        let r = block_on(handle(
            &p,
            "bridge.connect",
            &json!({"host": "evil.example", "port": 80, "token": TOKEN, "allowRemote": true}),
        ));
        assert_eq!(r.value["ok"], json!(true));
    }

    /// With agent access off no bridge connects; switching it off takes the bridge away in any
    /// state of its link, one waiting to dial again included (it used to come back, listed as
    /// connected, and have its first call refused).
    #[test]
    fn with_agent_access_off_no_bridge_connects_or_comes_back() {
        let p = Provider::new(MemoryEnv::new());
        let switch = |on: bool| {
            block_on(crate::control::handle(
                &p,
                &json!({"op": "policy.setSwitch", "name": "endpoint", "value": on}),
            ))
        };
        let connect = || {
            block_on(handle(
                &p,
                "bridge.connect",
                &json!({"port": 17817, "token": TOKEN}),
            ))
        };
        switch(false);
        let r = connect();
        assert_eq!(r.value["ok"], json!(false), "{:?}", r.value);
        assert!(r.value["error"]
            .as_str()
            .unwrap()
            .contains("agent access is switched off"));
        assert!(r.effects.is_empty());
        assert!(block_on(p.bridge_auth()).is_none());
        switch(true);
        assert_eq!(connect().value["ok"], json!(true));
        // The link dialled, then dropped: it waits to dial again.
        p.bridge_dialing_fresh("127.0.0.1", 17817);
        p.bridge_closed(Some("the bridge went away".into()), true);
        assert_eq!(p.bridge_view().state, "retrying");
        // The pages show the worker's name for it (the popup's line on why it is not
        // connected), which says where a bridge on another host is.
        assert_eq!(p.bridge_view().label, "Local bridge (port 17817)");
        let r = switch(false);
        assert!(
            r.effects
                .iter()
                .any(|e| matches!(e, Effect::CloseBridge { code: 4002, .. })),
            "{:?}",
            r.effects
        );
        assert!(
            block_on(p.bridge_auth()).is_none(),
            "the authorization is forgotten"
        );
    }
}
