//! The `status` tool: what an agent should know before planning writes.

use super::result::{success, ToolError};
use crate::env::Env;
use crate::guard::rate_limit::{MAX_WRITES, WINDOW_MS};
use crate::policy::Policy;
use crate::probe::SERVICE_VERSION;
use crate::provider::Provider;
use serde_json::json;

pub(super) async fn run<E: Env>(
    p: &Provider<E>,
    caller: &str,
    policy: &Policy,
) -> Result<serde_json::Value, ToolError> {
    let cap = p.capability();
    let count = p.scripts().await.map_err(ToolError::from)?.index.len();
    let left = p.writes_left(caller).await;
    let refused = p.registration_errors().await;
    let refused_text = if refused.is_empty() {
        String::new()
    } else {
        format!(
            " Chrome refused to register {} script(s), which do not run: {}.",
            refused.len(),
            refused.keys().cloned().collect::<Vec<_>>().join(", ")
        )
    };
    let text = format!(
        "Lumo Userscripts {SERVICE_VERSION}: {} scripts stored. Writes {}{}. Scripts {}. {left} of {MAX_WRITES} writes left in the current 60-second window.{refused_text}",
        count,
        if policy.writes_enabled { "allowed" } else { "turned off (read-only mode)" },
        if policy.writes_enabled && policy.review_writes { ", each after the user's review" } else { "" },
        if cap.ready { "run on matching pages" } else { "are stored but cannot run until the user turns on \"Allow User Scripts\"" },
    );
    Ok(success(
        text,
        json!({
            "version": SERVICE_VERSION,
            "writesEnabled": policy.writes_enabled,
            "reviewWrites": policy.review_writes,
            "scriptsCanRun": cap.ready,
            "reason": cap.reason,
            "scriptCount": count,
            "writesLeftInWindow": left,
            "registrationErrors": refused,
            "rateLimit": { "maxWrites": MAX_WRITES, "windowSeconds": WINDOW_MS / 1000.0 },
        }),
    ))
}
