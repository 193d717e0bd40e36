//! Internal messages from this extension's own pages (options, popup): the pages render what the
//! service worker returns and change state only through these operations, so the service worker
//! stays the single owner of state. The shell admits only messages whose sender is this
//! extension; this module decides what each operation does.

use crate::env::Env;
use crate::guard::audit;
use crate::guard::review::Decision;
use crate::ids::ExtensionId;
use crate::mcp::jsonrpc;
use crate::policy::Switch;
use crate::provider::Provider;
use crate::scripts::record::{is_uuid, BY_USER};
use crate::scripts::store;
use crate::tools::{run_write, WriteArgs};
use serde_json::{json, Value};

pub const CONTROL_CHANNEL: &str = "lumo:internal";

/// Whether an internal message comes from one of this extension's own pages: the sender is this
/// extension *and* its document is one of ours. A content script of this extension would carry
/// the id but a web page's URL; a userscript never reaches `onMessage` (its world has no
/// messaging to it). `own_id` is `chrome.runtime.id`.
#[must_use]
pub fn is_own_page(own_id: &str, sender_id: Option<&str>, sender_url: Option<&str>) -> bool {
    let Some(rest) = sender_url.and_then(|u| u.strip_prefix("chrome-extension://")) else {
        return false;
    };
    !own_id.is_empty()
        && sender_id == Some(own_id)
        && rest
            .strip_prefix(own_id)
            .is_some_and(|r| r.starts_with('/'))
}

/// What the shell must do besides answering the page.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Post `message` to these sessions.
    Notify { sessions: Vec<u64>, message: Value },
    /// Close these sessions' ports.
    Close { sessions: Vec<u64>, reason: String },
    /// Dial the local bridge the user just authorized (see `bridge_ops`).
    DialBridge,
    /// Close the local bridge link with this WebSocket close code.
    CloseBridge { code: u16, reason: String },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub value: Value,
    pub effects: Vec<Effect>,
}

impl From<Value> for Reply {
    fn from(value: Value) -> Self {
        Reply {
            value,
            effects: Vec::new(),
        }
    }
}

fn uuid_arg(msg: &Value) -> Result<String, Value> {
    match msg.get("uuid").and_then(Value::as_str) {
        Some(u) if is_uuid(u) => Ok(u.to_owned()),
        Some(u) => Err(err(format!(
            "\"{}\" is not a script uuid",
            crate::text::ellipsize(u, 40)
        ))),
        None => Err(err("missing \"uuid\"")),
    }
}

pub async fn handle<E: Env>(p: &Provider<E>, msg: &Value) -> Reply {
    if let Some(op) = msg
        .get("op")
        .and_then(Value::as_str)
        .filter(|op| op.starts_with("bridge."))
    {
        return crate::bridge_ops::handle(p, op, msg).await;
    }
    if let Some(op) = msg
        .get("op")
        .and_then(Value::as_str)
        .filter(|op| op.starts_with("runs."))
    {
        return crate::runs_ops::handle(p, op, msg).await;
    }
    let before = p.policy().await;
    let mut reply: Reply = handle_op(p, msg).await.into();
    // The set of tools a caller may see changed: tell every open session.
    if let Some(after) = reply
        .value
        .get("policy")
        .and_then(|v| v.get("writesEnabled"))
        .and_then(Value::as_bool)
    {
        if after != before.writes_enabled {
            reply.effects.push(Effect::Notify {
                sessions: p.ready_sessions(),
                message: jsonrpc::notification("notifications/tools/list_changed"),
            });
        }
    }
    // Revocation takes effect at once: every port of a caller the policy no longer grants is
    // closed now (not at its next call), and turning review on ends every "allow for this
    // session".
    let op = msg.get("op").and_then(Value::as_str).unwrap_or("");
    if op.starts_with("policy.") && reply.value.get("ok") == Some(&json!(true)) {
        let after = p.policy().await;
        if after.review_writes && !before.review_writes {
            p.drop_allowances();
        }
        if !after.endpoint_enabled && p.bridge_view().session.is_some() {
            reply.effects.push(Effect::CloseBridge {
                code: crate::bridge::dialer::USER_DISCONNECT,
                reason: "agent access switched off by the user".into(),
            });
        }
        let revoked = p.revoke(&after);
        if !revoked.is_empty() {
            reply.effects.push(Effect::Close {
                sessions: revoked,
                reason: "access withdrawn by the user".into(),
            });
        }
    }
    if msg.get("op").and_then(Value::as_str) == Some("sessions.disconnect")
        && reply.value.get("ok") == Some(&json!(true))
    {
        if let Ok(id) = id_arg(msg) {
            reply.effects.push(Effect::Close {
                sessions: p.sessions_of(&id),
                reason: "disconnected by the user".into(),
            });
        }
    }
    reply
}

fn err(msg: impl Into<String>) -> Value {
    json!({ "ok": false, "error": msg.into() })
}

fn id_arg(msg: &Value) -> Result<ExtensionId, Value> {
    match msg.get("id") {
        Some(Value::String(s)) => ExtensionId::parse(s.trim()).ok_or_else(|| {
            err(format!(
                "\"{}\" is not an extension id: it must be 32 letters from a to p",
                crate::text::ellipsize(s, 40)
            ))
        }),
        _ => Err(err("missing \"id\"")),
    }
}

#[allow(clippy::too_many_lines)] // one function per op is scheduled (issue 12, "Structure")
async fn handle_op<E: Env>(p: &Provider<E>, msg: &Value) -> Value {
    let Some(op) = msg.get("op").and_then(Value::as_str) else {
        return err("missing \"op\"");
    };
    let now = p.env.now_ms();
    match op {
        "state.get" => {
            let policy = p.policy().await;
            let cap = p.capability();
            json!({
                "ok": true,
                "policy": policy,
                "capability": { "ready": cap.ready, "reason": cap.reason },
                "sessions": p.sessions_summary(),
                // The local bridge link: its state and why it last ended (shown by the popup).
                "bridge": p.bridge_view(),
                "reviews": p.pending_reviews(),
                "problems": *p.log.borrow(),
            })
        }
        "reviews.decide" => {
            let Some(review) = msg.get("review").and_then(Value::as_str) else {
                return err("missing \"review\" (the review id)");
            };
            let Some(approve) = msg.get("approve").and_then(Value::as_bool) else {
                return err("\"approve\" must be true or false");
            };
            let allow_session = msg
                .get("allowSession")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let decision = if approve {
                Decision::Approve { allow_session }
            } else {
                Decision::Deny
            };
            if p.decide(review, decision) {
                json!({ "ok": true })
            } else {
                err("that review is no longer waiting (it expired, was cancelled or was already decided)")
            }
        }
        "reviews.diff" => {
            let Some(review) = msg.get("review").and_then(Value::as_str) else {
                return err("missing \"review\" (the review id)");
            };
            match p.review_diff(review) {
                Some(diff) => json!({ "ok": true, "review": review, "diff": diff }),
                None => err("that review is no longer waiting, or changes no source"),
            }
        }
        "scripts.list" => match p.scripts().await {
            Ok(snap) => {
                let (records, problems) = (&snap.records, &snap.problems);
                let mut scripts: Vec<Value> = records.iter().map(|r| r.summary()).collect();
                scripts.reverse();
                let problems: Vec<Value> = problems
                    .iter()
                    .map(|pr| json!({ "uuid": pr.uuid, "message": pr.message }))
                    .collect();
                json!({ "ok": true, "scripts": scripts, "problems": problems })
            }
            Err(e) => err(e.to_string()),
        },
        "scripts.get" => {
            let uuid = match uuid_arg(msg) {
                Ok(u) => u,
                Err(e) => return e,
            };
            match store::load_with_source(&p.env, &uuid).await {
                Ok((record, source)) => {
                    let diagnostics = store::validate(&source, usize::MAX)
                        .map(|(_, d)| d)
                        .unwrap_or_default();
                    // `shown`: the source as JavaScript splits it, hidden characters marked; the
                    // page shows that, `source` is for copying.
                    let shown = crate::guard::diff::shown_text(&source);
                    json!({ "ok": true, "script": record.full(&source, json!(diagnostics)), "shown": shown })
                }
                Err(e) => err(e.to_string()),
            }
        }
        "scripts.setEnabled" | "scripts.delete" => {
            let uuid = match uuid_arg(msg) {
                Ok(u) => u,
                Err(e) => return e,
            };
            let args = if op == "scripts.delete" {
                WriteArgs::Delete {
                    uuid,
                    revision: None,
                }
            } else {
                let Some(enabled) = msg.get("enabled").and_then(Value::as_bool) else {
                    return err("\"enabled\" must be true or false");
                };
                WriteArgs::SetEnabled {
                    uuid,
                    enabled,
                    revision: None,
                }
            };
            let actor = store::Actor {
                by: BY_USER,
                via: Some("options page"),
            };
            match run_write(p, actor, args, None).await.result {
                Ok(result) => {
                    json!({ "ok": true, "result": result.get("structuredContent").cloned().unwrap_or(Value::Null) })
                }
                Err(e) => err(e.message),
            }
        }
        "audit.list" => match audit::read_all(&p.env).await {
            Ok(entries) => json!({ "ok": true, "entries": entries }),
            Err(e) => err(e),
        },
        "sessions.disconnect" => match id_arg(msg) {
            Ok(id) => json!({ "ok": true, "closed": p.sessions_of(&id).len() }),
            Err(e) => e,
        },
        "policy.setSwitch" => {
            let which: Switch = match msg.get("name").cloned().map(serde_json::from_value) {
                Some(Ok(s)) => s,
                _ => return err("\"name\" must be one of endpoint, writes, review"),
            };
            let Some(value) = msg.get("value").and_then(Value::as_bool) else {
                return err("\"value\" must be true or false");
            };
            policy_result(
                p.update_policy(|pol| {
                    let changed = match which {
                        Switch::Endpoint => pol.endpoint_enabled != value,
                        Switch::Writes => pol.writes_enabled != value,
                        Switch::Review => pol.review_writes != value,
                    };
                    pol.set_switch(which, value);
                    (Ok(()), changed)
                })
                .await,
            )
        }
        "policy.approve" | "policy.add" => {
            let id = match id_arg(msg) {
                Ok(id) => id,
                Err(e) => return e,
            };
            let name = msg.get("name").and_then(Value::as_str).map(str::to_owned);
            policy_result(
                p.update_policy(|pol| match pol.approve(&id, name.as_deref(), now) {
                    Ok(()) => (Ok(()), true),
                    Err(e) => (Err(e.to_string()), false),
                })
                .await,
            )
        }
        "policy.deny" => {
            let id = match id_arg(msg) {
                Ok(id) => id,
                Err(e) => return e,
            };
            policy_result(
                p.update_policy(|pol| {
                    pol.deny(&id, now);
                    (Ok(()), true)
                })
                .await,
            )
        }
        "policy.remove" => {
            let id = match id_arg(msg) {
                Ok(id) => id,
                Err(e) => return e,
            };
            policy_result(
                p.update_policy(|pol| {
                    let changed = pol.remove(&id);
                    (Ok(()), changed)
                })
                .await,
            )
        }
        "scripts.lint" => match msg.get("source").and_then(Value::as_str) {
            Some(src) => crate::by_hand::lint(src),
            None => err("\"source\" must be the script's text"),
        },
        other => match crate::by_hand::handle(p, other, msg).await {
            Some(v) => v,
            None => err(format!(
                "unknown operation \"{}\"",
                crate::text::ellipsize(other, 40)
            )),
        },
    }
}

fn policy_result(r: Result<(Result<(), String>, crate::policy::Policy), String>) -> Value {
    match r {
        Ok((Ok(()), policy)) => json!({ "ok": true, "policy": policy }),
        Ok((Err(e), _)) | Err(e) => err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::memory::MemoryEnv;
    use futures::executor::block_on;

    fn call(p: &Provider<MemoryEnv>, v: Value) -> Value {
        block_on(handle(p, &v)).value
    }

    #[test]
    fn approve_deny_remove_and_switches() {
        let p = Provider::new(MemoryEnv::new());
        let id = "mobcibglkcoacmddjpdoknlbbicjchlk";
        let r = call(&p, json!({"op": "policy.add", "id": id, "name": "Host"}));
        assert_eq!(r["ok"], json!(true), "{r}");
        assert_eq!(r["policy"]["allowlist"][0]["name"], json!("Host"));
        let r = call(&p, json!({"op": "policy.deny", "id": id}));
        assert_eq!(r["policy"]["allowlist"], json!([]));
        assert_eq!(r["policy"]["denied"][0]["id"], json!(id));
        let r = call(&p, json!({"op": "policy.remove", "id": id}));
        assert_eq!(r["policy"]["denied"], json!([]));
        let r = call(
            &p,
            json!({"op": "policy.setSwitch", "name": "writes", "value": false}),
        );
        assert_eq!(r["policy"]["writesEnabled"], json!(false));
        let r = call(&p, json!({"op": "state.get"}));
        assert_eq!(r["policy"]["writesEnabled"], json!(false));
        assert_eq!(r["capability"]["ready"], json!(true));
    }

    #[test]
    fn only_this_extensions_pages_are_own_pages() {
        let own = "imliakfdgonldkmaddnhnniclbhiobpo";
        let page = format!("chrome-extension://{own}/options.html");
        assert!(is_own_page(own, Some(own), Some(&page)));
        let other = "mobcibglkcoacmddjpdoknlbbicjchlk";
        // Another extension, or our id with a web page's URL (a content script), or a URL that
        // only starts with our id, or no URL at all.
        assert!(!is_own_page(own, Some(other), Some(&page)));
        assert!(!is_own_page(own, Some(own), Some("https://example.com/")));
        assert!(!is_own_page(
            own,
            Some(own),
            Some(&format!("chrome-extension://{own}x/options.html"))
        ));
        assert!(!is_own_page(
            own,
            Some(own),
            Some(&format!("chrome-extension://{other}/options.html"))
        ));
        assert!(!is_own_page(own, Some(own), None));
        assert!(!is_own_page(own, None, Some(&page)));
        assert!(!is_own_page("", Some(""), Some("chrome-extension:///x")));
    }

    #[test]
    fn bad_input_changes_nothing() {
        let p = Provider::new(MemoryEnv::new());
        for v in [
            json!({"op": "policy.add", "id": "not-an-id"}),
            json!({"op": "policy.add", "id": "A".repeat(32)}),
            json!({"op": "policy.add"}),
            json!({"op": "policy.setSwitch", "name": "everything", "value": true}),
            json!({"op": "policy.setSwitch", "name": "writes", "value": "no"}),
            json!({"op": "nope"}),
            json!({}),
            json!(null),
        ] {
            let r = call(&p, v.clone());
            assert_eq!(r["ok"], json!(false), "{v}");
            assert!(r["error"].as_str().is_some_and(|e| !e.is_empty()));
        }
        assert!(p.env.dump(crate::env::Area::Local).is_empty());
    }
}
