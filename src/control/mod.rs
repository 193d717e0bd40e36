//! Internal messages from this extension's own pages (options, popup): the pages render what the
//! service worker returns and change state only through these operations, so the service worker
//! stays the single owner of state. The shell admits only messages whose sender is this
//! extension; this module decides what each operation does.
//!
//! A message is parsed once into [`Op`]; each op is one function (in the file of its family)
//! that returns its reply *and* its effects on open sessions, so nothing re-reads a reply to
//! decide what happened. The bridge's ops (`bridge_ops`), the user's history/trash/editing ops
//! (`by_hand`) and the import/backup ops (`import_ops`) are typed families of their own, each an
//! enum read by its "op" name (`args::by_name`), reached through [`Op::Bridge`], [`Op::ByHand`],
//! [`Op::Import`].

pub mod args;
mod audit;
pub(crate) mod marked;
mod policy;
pub mod reply;
mod reviews;
mod scripts;
mod sessions;

use crate::bridge_ops::BridgeOp;
use crate::by_hand::HandOp;
use crate::env::Env;
use crate::ids::ExtensionId;
use crate::import_ops::ImportOp;
use crate::policy::Switch;
use crate::provider::Provider;
use crate::runs_ops::RunsOp;
use args::{by_name, loose};
use serde::Deserialize;
use serde_json::{json, Value};

pub use reply::{Effect, Reply};

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

/// Every operation a page may ask for, by its wire name. Arguments are read loosely (a missing
/// or mistyped field is `None`) so that each op's function refuses it with its own message,
/// naming the field and what it must be.
#[derive(Debug, Deserialize)]
pub enum Op {
    #[serde(rename = "state.get")]
    StateGet,
    #[serde(rename = "reviews.decide")]
    ReviewsDecide {
        #[serde(default, deserialize_with = "loose")]
        review: Option<String>,
        #[serde(default, deserialize_with = "loose")]
        approve: Option<bool>,
        #[serde(default, rename = "allowSession", deserialize_with = "loose")]
        allow_session: Option<bool>,
    },
    #[serde(rename = "reviews.diff")]
    ReviewsDiff {
        #[serde(default, deserialize_with = "loose")]
        review: Option<String>,
    },
    #[serde(rename = "reviews.file")]
    ReviewsFile {
        #[serde(default, deserialize_with = "loose")]
        review: Option<String>,
        #[serde(default, deserialize_with = "loose")]
        index: Option<usize>,
    },
    #[serde(rename = "scripts.list")]
    ScriptsList,
    #[serde(rename = "scripts.get")]
    ScriptsGet {
        #[serde(default, deserialize_with = "loose")]
        uuid: Option<String>,
    },
    /// `revision`: when given, the write is refused (CONFLICT) if the script moved since.
    #[serde(rename = "scripts.setEnabled")]
    ScriptsSetEnabled {
        #[serde(default, deserialize_with = "loose")]
        uuid: Option<String>,
        #[serde(default, deserialize_with = "loose")]
        enabled: Option<bool>,
        #[serde(default, deserialize_with = "loose")]
        revision: Option<u64>,
    },
    #[serde(rename = "scripts.delete")]
    ScriptsDelete {
        #[serde(default, deserialize_with = "loose")]
        uuid: Option<String>,
        #[serde(default, deserialize_with = "loose")]
        revision: Option<u64>,
    },
    #[serde(rename = "scripts.lint")]
    ScriptsLint {
        #[serde(default, deserialize_with = "loose")]
        source: Option<String>,
    },
    #[serde(rename = "audit.list")]
    AuditList,
    #[serde(rename = "sessions.disconnect")]
    SessionsDisconnect {
        #[serde(default, deserialize_with = "loose")]
        id: Option<String>,
    },
    #[serde(rename = "policy.setSwitch")]
    PolicySetSwitch {
        #[serde(default, deserialize_with = "loose")]
        name: Option<Switch>,
        #[serde(default, deserialize_with = "loose")]
        value: Option<bool>,
    },
    #[serde(rename = "policy.approve", alias = "policy.add")]
    PolicyApprove {
        #[serde(default, deserialize_with = "loose")]
        id: Option<String>,
        #[serde(default, deserialize_with = "loose")]
        name: Option<String>,
    },
    #[serde(rename = "policy.deny")]
    PolicyDeny {
        #[serde(default, deserialize_with = "loose")]
        id: Option<String>,
    },
    #[serde(rename = "policy.remove")]
    PolicyRemove {
        #[serde(default, deserialize_with = "loose")]
        id: Option<String>,
    },
    /// The menu commands scripts registered in a tab's pages (`GM_registerMenuCommand`).
    #[serde(rename = "menu.list")]
    MenuList {
        #[serde(default, deserialize_with = "loose")]
        tab: Option<i64>,
    },
    /// The popup's "Scripts on this tab" (`tab_scripts`).
    #[serde(rename = "tab.scripts")]
    TabScripts {
        #[serde(default, deserialize_with = "loose")]
        tab: Option<i64>,
    },
    /// The user clicked one: `entry` and `id` as `menu.list` gave them.
    #[serde(rename = "menu.click")]
    MenuClick {
        #[serde(default, deserialize_with = "loose")]
        entry: Option<u64>,
        #[serde(default, deserialize_with = "loose")]
        id: Option<String>,
    },
    /// After a click: what the clicked command's script asks the popup to copy, if anything
    /// (`provider::gm_clipboard`): `{ok, ticket, text, html}`, or `{ok}` alone.
    #[serde(rename = "menu.clipboard")]
    MenuClipboard {
        #[serde(default, deserialize_with = "loose")]
        entry: Option<u64>,
    },
    /// The popup wrote `ticket` to the clipboard, or could not (`error`).
    #[serde(rename = "menu.clipboardDone")]
    MenuClipboardDone {
        #[serde(default, deserialize_with = "loose")]
        ticket: Option<u64>,
        #[serde(default, deserialize_with = "loose")]
        error: Option<String>,
    },
    /// `bridge.*`: the local bridge's family (`bridge_ops`).
    #[serde(skip)]
    Bridge(BridgeOp),
    /// `runs.*`: what scripts did on page loads (`runs_ops`, read-only).
    #[serde(skip)]
    Runs(RunsOp),
    /// History, restore, undo, trash and editing (`by_hand`).
    #[serde(skip)]
    ByHand(HandOp),
    /// `scripts.import`, `backup.*` (`import_ops`).
    #[serde(skip)]
    Import(ImportOp),
    /// A name no family knows (ellipsized in the refusal).
    #[serde(skip)]
    Unknown(String),
}

impl Op {
    /// Parses a page's message; the error is the reply to send (a missing "op").
    pub fn parse(msg: &Value) -> Result<Op, Value> {
        let Some(name) = msg.get("op").and_then(Value::as_str) else {
            return Err(err("missing \"op\""));
        };
        // Which family knows the name, asked with the name alone (every field is loose and
        // optional, so it parses exactly when the name is the family's): the message itself,
        // which may be megabytes of scripts, is then read once, by that family.
        let probe = Value::Object(serde_json::Map::new());
        let op = if by_name::<Op>(name, &probe).is_ok() {
            by_name(name, msg).ok()
        } else if by_name::<BridgeOp>(name, &probe).is_ok() {
            by_name(name, msg).ok().map(Op::Bridge)
        } else if by_name::<RunsOp>(name, &probe).is_ok() {
            by_name(name, msg).ok().map(Op::Runs)
        } else if by_name::<HandOp>(name, &probe).is_ok() {
            by_name(name, msg).ok().map(Op::ByHand)
        } else if by_name::<ImportOp>(name, &probe).is_ok() {
            by_name(name, msg).ok().map(Op::Import)
        } else {
            None
        };
        Ok(op.unwrap_or_else(|| Op::Unknown(name.to_owned())))
    }
}

/// Answers one internal message: its reply and what the shell must do to open sessions.
pub async fn handle<E: Env>(p: &Provider<E>, msg: &Value) -> Reply {
    match Op::parse(msg) {
        Ok(op) => run(p, op, msg).await,
        Err(e) => e.into(),
    }
}

async fn run<E: Env>(p: &Provider<E>, op: Op, msg: &Value) -> Reply {
    match op {
        Op::StateGet => sessions::state(p).await.into(),
        Op::ReviewsDecide {
            review,
            approve,
            allow_session,
        } => reviews::decide(p, review, approve, allow_session)
            .await
            .into(),
        Op::ReviewsDiff { review } => reviews::diff(p, review).into(),
        Op::ReviewsFile { review, index } => reviews::file(p, review, index).into(),
        Op::ScriptsList => scripts::list(p).await.into(),
        Op::ScriptsGet { uuid } => scripts::get(p, uuid).await.into(),
        Op::ScriptsSetEnabled {
            uuid,
            enabled,
            revision,
        } => scripts::set_enabled(p, msg, uuid, enabled, revision)
            .await
            .into(),
        Op::ScriptsDelete { uuid, revision } => {
            scripts::delete(p, msg, uuid, revision).await.into()
        }
        Op::ScriptsLint { source } => scripts::lint(source).into(),
        Op::AuditList => audit::list(p).await.into(),
        Op::SessionsDisconnect { id } => sessions::disconnect(p, id),
        Op::PolicySetSwitch { name, value } => policy::set_switch(p, name, value).await,
        Op::PolicyApprove { id, name } => policy::approve(p, id, name).await,
        Op::PolicyDeny { id } => policy::deny(p, id).await,
        Op::PolicyRemove { id } => policy::remove(p, id).await,
        Op::MenuList { tab } => match tab {
            Some(t) => p.menu_list(t).await.into(),
            None => err("missing \"tab\": the id of the tab whose menu commands to list").into(),
        },
        Op::TabScripts { tab } => match tab {
            Some(t) => crate::tab_scripts::list(p, t).await.into(),
            None => err("missing \"tab\": the id of the tab whose scripts to list").into(),
        },
        Op::MenuClick { entry, id } => match (entry, id) {
            (Some(e), Some(id)) => match p.menu_click(e, &id).await {
                Ok(delivered) => json!({ "ok": true, "delivered": delivered }).into(),
                Err(why) => err(why).into(),
            },
            _ => err("menu.click needs \"entry\" and \"id\" as menu.list gave them").into(),
        },
        Op::MenuClipboard { entry } => match entry {
            Some(e) => p.menu_clipboard(e).await.into(),
            None => err("menu.clipboard needs the \"entry\" menu.click named").into(),
        },
        Op::MenuClipboardDone { ticket, error } => match ticket {
            Some(t) => p.menu_clipboard_done(t, error.as_deref()).into(),
            None => err("menu.clipboardDone needs the \"ticket\" menu.clipboard gave").into(),
        },
        Op::Bridge(op) => crate::bridge_ops::run(p, op).await,
        Op::Runs(op) => crate::runs_ops::run(p, op).await,
        Op::ByHand(op) => crate::by_hand::run(p, op, msg).await.into(),
        Op::Import(op) => crate::import_ops::run(p, op).await.into(),
        Op::Unknown(name) => unknown(&name).into(),
    }
}

fn unknown(name: &str) -> Value {
    err(format!(
        "unknown operation \"{}\"",
        crate::text::ellipsize(name, 40)
    ))
}

/// The reply of a refused op.
fn err(msg: impl Into<String>) -> Value {
    json!({ "ok": false, "error": msg.into() })
}

/// An extension id argument, through the one validator.
fn extension_id(id: Option<&str>) -> Result<ExtensionId, Value> {
    let Some(s) = id else {
        return Err(err("missing \"id\""));
    };
    ExtensionId::parse(s.trim()).ok_or_else(|| {
        err(format!(
            "\"{}\" is not an extension id: it must be 32 letters from a to p",
            crate::text::ellipsize(s, 40)
        ))
    })
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

#[cfg(test)]
mod family_tests;

#[cfg(test)]
mod parse_tests {
    use super::*;
    use crate::env::memory::MemoryEnv;
    use futures::executor::block_on;

    fn call(p: &Provider<MemoryEnv>, v: Value) -> Value {
        block_on(handle(p, &v)).value
    }

    #[test]
    fn ops_parse_by_wire_name_with_extra_fields() {
        let ch = CONTROL_CHANNEL;
        assert!(matches!(
            Op::parse(&json!({"op": "state.get", "channel": ch})),
            Ok(Op::StateGet)
        ));
        assert!(matches!(
            Op::parse(&json!({"op": "policy.add", "id": 5})),
            Ok(Op::PolicyApprove { id: None, .. })
        ));
        assert!(matches!(
            Op::parse(&json!({"op": "bridge.status", "channel": ch})),
            Ok(Op::Bridge(BridgeOp::Status { .. }))
        ));
        assert!(matches!(
            Op::parse(&json!({"op": "runs.last", "uuids": []})),
            Ok(Op::Runs(RunsOp::Last { uuids: Some(u) })) if u.is_empty()
        ));
        assert!(matches!(
            Op::parse(&json!({"op": "runs.list", "uuid": 7, "since": 3})),
            Ok(Op::Runs(RunsOp::List {
                uuid: None,
                since: Some(3)
            }))
        ));
        assert!(matches!(
            Op::parse(&json!({"op": "trash.list"})),
            Ok(Op::ByHand(HandOp::TrashList))
        ));
    }

    /// The pages show these messages; they name the field and what it must be.
    #[test]
    fn refusals_name_the_field() {
        let p = Provider::new(MemoryEnv::new());
        for (msg, want) in [
            (json!({"op": 5}), "missing \"op\""),
            (json!({"op": "nope"}), "unknown operation \"nope\""),
            (
                json!({"op": "reviews.decide"}),
                "missing \"review\" (the review id)",
            ),
            (
                json!({"op": "reviews.decide", "review": "r", "approve": "yes"}),
                "\"approve\" must be true or false",
            ),
            (
                json!({"op": "reviews.diff", "review": 1}),
                "missing \"review\" (the review id)",
            ),
            (json!({"op": "scripts.get"}), "missing \"uuid\""),
            (
                json!({"op": "scripts.get", "uuid": "x"}),
                "\"x\" is not a script uuid",
            ),
            (
                json!({"op": "scripts.setEnabled", "uuid": "00000000-0000-4000-8000-000000000000"}),
                "\"enabled\" must be true or false",
            ),
            (
                json!({"op": "scripts.delete", "uuid": 3}),
                "missing \"uuid\"",
            ),
            (
                json!({"op": "scripts.lint"}),
                "\"source\" must be the script's text",
            ),
            (json!({"op": "sessions.disconnect"}), "missing \"id\""),
            (
                json!({"op": "policy.deny", "id": "nope"}),
                "\"nope\" is not an extension id: it must be 32 letters from a to p",
            ),
            (
                json!({"op": "policy.setSwitch", "name": "all", "value": true}),
                "\"name\" must be one of endpoint, writes, review",
            ),
            (
                json!({"op": "policy.setSwitch", "name": "writes"}),
                "\"value\" must be true or false",
            ),
        ] {
            let r = call(&p, msg.clone());
            assert_eq!(r["ok"], json!(false), "{msg}");
            assert_eq!(r["error"], json!(want), "{msg}");
        }
    }

    #[test]
    fn policy_ops_return_their_effects() {
        let p = Provider::new(MemoryEnv::new());
        let r = block_on(handle(
            &p,
            &json!({"op": "policy.setSwitch", "name": "writes", "value": false}),
        ));
        assert_eq!(r.value["ok"], json!(true));
        assert!(matches!(r.effects.as_slice(), [Effect::Notify { .. }]));
        // The same value again changes nothing: no notification.
        let r = block_on(handle(
            &p,
            &json!({"op": "policy.setSwitch", "name": "writes", "value": false}),
        ));
        assert!(r.effects.is_empty(), "{:?}", r.effects);
        // With the bridge linked it is told too: its clients' tool list follows.
        p.bridge_opened(false, "0");
        let r = block_on(handle(
            &p,
            &json!({"op": "policy.setSwitch", "name": "writes", "value": true}),
        ));
        assert!(
            matches!(
                r.effects.as_slice(),
                [Effect::Notify { .. }, Effect::BridgeTools { writes: true }]
            ),
            "{:?}",
            r.effects
        );
        let r = block_on(handle(
            &p,
            &json!({"op": "sessions.disconnect", "id": "mobcibglkcoacmddjpdoknlbbicjchlk"}),
        ));
        assert_eq!(r.value, json!({"ok": true, "closed": 0}));
        assert!(matches!(r.effects.as_slice(), [Effect::Close { .. }]));
    }
}

#[cfg(test)]
mod store_error_tests {
    use super::*;
    use crate::env::memory::MemoryEnv;
    use futures::executor::block_on;

    /// A policy change storage refuses is not made, and the page reads why.
    #[test]
    fn a_policy_that_cannot_be_saved_says_so() {
        let p = Provider::new(MemoryEnv::new());
        *p.env.fail_writes.borrow_mut() = Some("QUOTA_BYTES quota exceeded".into());
        let r = block_on(handle(
            &p,
            &json!({"op": "policy.setSwitch", "name": "writes", "value": false}),
        ));
        assert_eq!(
            r.value,
            json!({"ok": false, "error": "could not save the policy: QUOTA_BYTES quota exceeded"})
        );
        assert!(r.effects.is_empty());
        *p.env.fail_writes.borrow_mut() = None;
        assert!(block_on(p.policy()).writes_enabled);
    }
}
