//! The control room's view of the provider (`state.get`) and the one-click disconnect.

use super::{extension_id, Effect, Reply};
use crate::env::Env;
use crate::provider::Provider;
use serde_json::{json, Value};

/// `state.get`: the policy, whether scripts can run, who is connected, what waits for the user.
pub(super) async fn state<E: Env>(p: &Provider<E>) -> Value {
    let mut policy = p.policy().await;
    // A caller chooses its own name: its invisible and direction characters reach the pages
    // as ⟨U+XXXX⟩ markers, so a name cannot hide, reorder or mimic the id shown beside it.
    let names = (policy.allowlist.iter_mut().map(|c| &mut c.name))
        .chain(policy.pending.iter_mut().map(|c| &mut c.name))
        .chain(policy.denied.iter_mut().map(|c| &mut c.name));
    for name in names {
        *name = crate::guard::diff::visible(name);
    }
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

/// `sessions.disconnect`: closes every port of one caller.
pub(super) fn disconnect<E: Env>(p: &Provider<E>, id: Option<String>) -> Reply {
    let id = match extension_id(id.as_deref()) {
        Ok(id) => id,
        Err(e) => return e.into(),
    };
    let sessions = p.sessions_of(&id);
    Reply {
        value: json!({ "ok": true, "closed": sessions.len() }),
        effects: vec![Effect::Close {
            sessions,
            reason: "disconnected by the user".into(),
        }],
    }
}
