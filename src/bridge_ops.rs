//! The pages' operations on the local bridge link (`bridge.*` internal messages): what the
//! connect page shows (`bridge.status`), the user's click (`bridge.connect`) and the popup's
//! Disconnect (`bridge.disconnect`). The shell carries out the effects (dial, close with 4002).

use crate::bridge::dialer::{self, USER_DISCONNECT};
use crate::bridge::trust::{check_token, token_eq};
use crate::control::reply::{Effect, Reply};
use crate::env::Env;
use crate::provider::{BridgeAuth, Provider};
use crate::tools::catalog;
use serde_json::{json, Value};

fn err(msg: impl Into<String>) -> Reply {
    json!({ "ok": false, "error": msg.into() }).into()
}

pub async fn handle<E: Env>(p: &Provider<E>, op: &str, msg: &Value) -> Reply {
    match op {
        "bridge.status" => status(p, msg).await.into(),
        "bridge.connect" => connect(p, msg).await,
        "bridge.disconnect" => {
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
        other => err(format!(
            "unknown operation \"{}\"",
            crate::text::ellipsize(other, 40)
        )),
    }
}

/// The link's state, the tools the bridge will expose (its catalogue is ours, linked in), and
/// whether the token on the page is the one the user already authorized (never the token).
async fn status<E: Env>(p: &Provider<E>, msg: &Value) -> Value {
    let auth = p.bridge_auth().await;
    let authorized = match (msg.get("token").and_then(Value::as_str), &auth) {
        (Some(t), Some(a)) => token_eq(t, &a.token),
        _ => false,
    };
    let tools: Vec<Value> = catalog::TOOLS
        .iter()
        .map(|t| json!({ "name": t.name, "title": t.title, "write": t.is_write() }))
        .collect();
    // What the page should say about the address it was given, decided here, not in the page.
    let host = msg
        .get("host")
        .and_then(Value::as_str)
        .unwrap_or("127.0.0.1");
    let port = msg.get("port").and_then(Value::as_u64).unwrap_or(0);
    let loopback = dialer::dial_url(host, port, false);
    json!({
        "ok": true,
        "bridge": p.bridge_view(),
        "address": { "ok": loopback.is_ok(), "loopback": dialer::is_loopback(host), "error": loopback.err() },
        "authorized": authorized,
        "remembered": authorized && auth.is_some_and(|a| a.remember),
        "tools": tools,
    })
}

async fn connect<E: Env>(p: &Provider<E>, msg: &Value) -> Reply {
    let host = match msg.get("host") {
        None | Some(Value::Null) => "127.0.0.1",
        Some(Value::String(h)) => h.as_str(),
        Some(_) => return err("\"host\" must be a string"),
    };
    let Some(port) = msg.get("port").and_then(Value::as_u64) else {
        return err("\"port\" must be a number (1–65535)");
    };
    let allow_remote = msg.get("allowRemote").and_then(Value::as_bool) == Some(true);
    let remember = msg.get("remember").and_then(Value::as_bool) == Some(true);
    let Some(token) = msg.get("token").and_then(Value::as_str) else {
        return err("the link has no token: open the connect link the bridge printed");
    };
    if let Err(e) = check_token(token) {
        return err(e);
    }
    let url = match dialer::dial_url(host, port, allow_remote) {
        Ok(u) => u,
        Err(e) => return err(e),
    };
    let auth = BridgeAuth {
        host: host.to_owned(),
        port: u16::try_from(port).unwrap_or_default(),
        token: token.to_owned(),
        allow_remote,
        remember,
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
}
