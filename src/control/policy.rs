//! Changes to the user's policy, and their effects on open sessions: the tool list changes
//! when writes are switched, a caller the new policy no longer grants loses its ports at once
//! (not at its next call), and switching agent access off ends the bridge link.

use super::{err, extension_id, Effect, Reply};
use crate::env::Env;
use crate::ids::ExtensionId;
use crate::mcp::jsonrpc;
use crate::policy::{Policy, PolicyError, Switch};
use crate::provider::Provider;
use serde_json::json;

/// `policy.setSwitch`.
pub(super) async fn set_switch<E: Env>(
    p: &Provider<E>,
    which: Option<Switch>,
    value: Option<bool>,
) -> Reply {
    let Some(which) = which else {
        return err("\"name\" must be one of endpoint, writes, review").into();
    };
    let Some(value) = value else {
        return err("\"value\" must be true or false").into();
    };
    change(p, |pol| {
        let changed = match which {
            Switch::Endpoint => pol.endpoint_enabled != value,
            Switch::Writes => pol.writes_enabled != value,
            Switch::Review => pol.review_writes != value,
        };
        pol.set_switch(which, value);
        (Ok(()), changed)
    })
    .await
}

/// `policy.approve` (also `policy.add`): a caller onto the allowlist.
pub(super) async fn approve<E: Env>(
    p: &Provider<E>,
    id: Option<String>,
    name: Option<String>,
) -> Reply {
    with_id(p, id, |pol, id, now| {
        match pol.approve(id, name.as_deref(), now) {
            Ok(()) => (Ok(()), true),
            Err(e) => (Err(e), false),
        }
    })
    .await
}

/// `policy.deny`.
pub(super) async fn deny<E: Env>(p: &Provider<E>, id: Option<String>) -> Reply {
    with_id(p, id, |pol, id, now| {
        pol.deny(id, now);
        (Ok(()), true)
    })
    .await
}

/// `policy.remove`.
pub(super) async fn remove<E: Env>(p: &Provider<E>, id: Option<String>) -> Reply {
    with_id(p, id, |pol, id, _| {
        let changed = pol.remove(id);
        (Ok(()), changed)
    })
    .await
}

/// What a change did: refused by the policy's own rules, or made; and whether it changed anything.
type Outcome = (Result<(), PolicyError>, bool);

async fn with_id<E: Env>(
    p: &Provider<E>,
    id: Option<String>,
    f: impl FnOnce(&mut Policy, &ExtensionId, f64) -> Outcome,
) -> Reply {
    let id = match extension_id(id.as_deref()) {
        Ok(id) => id,
        Err(e) => return e.into(),
    };
    let now = p.env.now_ms();
    change(p, |pol| f(pol, &id, now)).await
}

/// Applies one change to the policy and derives its effects from the policy before and after.
async fn change<E: Env>(p: &Provider<E>, f: impl FnOnce(&mut Policy) -> Outcome) -> Reply {
    let before = p.policy().await;
    let after = match p.update_policy(f).await {
        Ok((Ok(()), policy)) => policy,
        Ok((Err(e), _)) => return err(e.to_string()).into(),
        Err(e) => return err(e.to_string()).into(),
    };
    let mut effects = Vec::new();
    // The set of tools a caller may see changed: tell every open session.
    if after.writes_enabled != before.writes_enabled {
        effects.push(Effect::Notify {
            sessions: p.ready_sessions(),
            message: jsonrpc::notification("notifications/tools/list_changed"),
        });
        if p.bridge_view().session.is_some() {
            effects.push(Effect::BridgeTools {
                writes: p.bridge_lists_writes(after.writes_enabled),
            });
        }
    }
    // A write waiting for review can no longer apply once writes are off: its agent is told
    // now, and the popup stops offering an Approve that could not be carried out.
    if before.writes_enabled && !after.writes_enabled {
        p.withdraw_reviews(crate::guard::review::Decision::WritesOff);
    }
    // Revocation takes effect at once, and turning review on ends every "allow for this
    // session"; so does turning writes off (read-only as an emergency stop: when writes come
    // back, each write is reviewed again, not waved through by an approval given before).
    let current = p.policy().await;
    if (current.review_writes && !before.review_writes)
        || (before.writes_enabled && !current.writes_enabled)
    {
        p.drop_allowances();
    }
    // The bridge goes as on the user's Disconnect, whatever its link's state: one waiting to
    // dial again would otherwise come back, listed as connected with access off.
    if !current.endpoint_enabled && p.bridge_view().state != "off" {
        p.forget_bridge().await;
        effects.push(Effect::CloseBridge {
            code: crate::bridge::dialer::USER_DISCONNECT,
            reason: "agent access switched off by the user".into(),
        });
    }
    let revoked = p.revoke(&current);
    if !revoked.is_empty() {
        effects.push(Effect::Close {
            sessions: revoked,
            reason: "access withdrawn by the user".into(),
        });
    }
    Reply {
        value: json!({ "ok": true, "policy": after }),
        effects,
    }
}
