//! The provider's side of the GM functions: a request the channel accepted (its script proven by
//! its token, never by what it says) is checked against that script's own `@grant`s and
//! answered. Values are the script's own (`values/<uuid>` of the proven uuid): no request can
//! name another script. Nothing here calls tools, the policy, the probe or a session.

use serde_json::{json, Value};

use super::Provider;
use crate::env::Env;
use crate::gm::api::{self, Grant};
use crate::gm::message::GmRequest;
use crate::gm::store::{self, StoreError};
use crate::scripts::record::ScriptRecord;

fn error(message: impl Into<String>) -> Value {
    json!({ "error": message.into() })
}

/// Whether the script grants any of these classic names (either spelling).
fn grants_any(record: &ScriptRecord, names: &[&str]) -> bool {
    record
        .metadata
        .grants
        .iter()
        .any(|g| matches!(api::classify(g), Grant::Known(a) if names.contains(&a.name)))
}

const VALUE_GRANTS: &[&str] = &[
    "GM_getValue",
    "GM_setValue",
    "GM_deleteValue",
    "GM_listValues",
    "GM_getValues",
    "GM_setValues",
    "GM_deleteValues",
    "GM_addValueChangeListener",
    "GM_removeValueChangeListener",
];

impl<E: Env> Provider<E> {
    /// Answers one GM request of the script `uuid` (proven by the channel).
    pub(crate) async fn gm_request(&self, uuid: &str, req: GmRequest) -> Value {
        let record = match self.scripts().await {
            Ok(s) => s.records.iter().find(|r| r.uuid == uuid).cloned(),
            Err(e) => return error(format!("GM: the provider could not read its scripts: {e}")),
        };
        let Some(record) = record else {
            return error("GM: this script is no longer installed");
        };
        match req {
            GmRequest::ValuesGet if grants_any(&record, VALUE_GRANTS) => {
                match store::load(&self.env, uuid).await {
                    Ok(v) => json!({ "values": v.encode() }),
                    Err(e) => error(e.to_string()),
                }
            }
            GmRequest::Values(op) if grants_any(&record, VALUE_GRANTS) => {
                match self.gm_values.apply(&self.env, uuid, &op).await {
                    Ok((changes, _)) => {
                        if !changes.is_empty() {
                            self.refresh_values_snapshot(&record).await;
                        }
                        json!({ "ok": true, "changed": changes.len() })
                    }
                    Err(e @ (StoreError::Refused(_) | StoreError::Storage(_))) => {
                        error(e.to_string())
                    }
                }
            }
            GmRequest::ValuesGet | GmRequest::Values(_) => error(
                "GM values: this script does not @grant GM_getValue/GM_setValue (or another \
                 value function)",
            ),
            GmRequest::Xhr(_) | GmRequest::XhrAbort { .. } => {
                error("GM_xmlhttpRequest is not available in this provider yet")
            }
        }
    }

    /// Registers the script again with its new values, so the next page load starts with them
    /// (the registered code carries the snapshot `GM_getValue` answers from).
    async fn refresh_values_snapshot(&self, record: &ScriptRecord) {
        let Ok((current, source)) =
            crate::scripts::store::load_with_source(&self.env, &record.uuid).await
        else {
            return;
        };
        let desired = crate::scripts::sync::desired_for(&current, &source);
        self.sync_registration(&current.uuid, desired).await;
    }
}
