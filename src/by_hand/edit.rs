//! The editor by hand: saving a new or edited script (`scripts.save`) and checking a source
//! as it is typed (`scripts.lint`).

use super::{err, revision_of, uuid_of, write};
use crate::control::args::Arg;
use crate::env::Env;
use crate::provider::Provider;
use crate::scripts::store::{self, ScriptError};
use crate::tools::catalog::MAX_SOURCE_BYTES;
use crate::tools::WriteArgs;
use serde_json::{json, Value};

/// Create (no uuid) or edit (uuid + the revision the editor loaded) a script by hand.
pub(super) async fn save<E: Env>(
    p: &Provider<E>,
    msg: &Value,
    source: Option<String>,
    uuid: Arg<String>,
    revision: Option<u64>,
    enabled: Option<bool>,
) -> Value {
    let Some(source) = source else {
        return err("\"source\" must be the script's text");
    };
    if source.len() > MAX_SOURCE_BYTES {
        return err(format!(
            "the source is {} bytes, over the {MAX_SOURCE_BYTES}-byte limit",
            source.len()
        ));
    }
    let args = match uuid {
        Arg::Absent => WriteArgs::Create {
            source,
            enabled: enabled.unwrap_or(true),
        },
        uuid => {
            let uuid = match uuid {
                Arg::Is(u) => Some(u),
                _ => None,
            };
            let (uuid, revision) = match (uuid_of(uuid), revision_of(revision, "revision")) {
                (Ok(u), Ok(r)) => (u, r),
                (Err(e), _) | (_, Err(e)) => return e,
            };
            let revision = rebase(p, &uuid, revision).await;
            WriteArgs::Replace {
                uuid,
                revision,
                source,
                enabled,
            }
        }
    };
    write(p, msg, "write_script", args).await
}

/// The revision an edit made from `revision` goes over: the current one when no revision since
/// changed the source (only the on/off switch flipped, by the page's own switch or an agent),
/// else `revision` itself, which the write refuses as stale. The write checks it again under
/// its lock, so a change landing after this read is still refused.
async fn rebase<E: Env>(p: &Provider<E>, uuid: &str, revision: u64) -> u64 {
    let current = match p.scripts().await {
        Ok(snap) => match snap.records.iter().find(|r| r.uuid == uuid) {
            Some(r) if r.revision > revision => (r.revision, r.sha256.clone()),
            _ => return revision,
        },
        Err(_) => return revision,
    };
    match crate::scripts::history::load(&p.env, uuid).await {
        Ok(h)
            if h.find(revision)
                .is_some_and(|r| r.record.sha256 == current.1) =>
        {
            current.0
        }
        _ => revision,
    }
}

/// Validation for the editor: diagnostics with their lines, without saving.
pub fn lint(source: &str) -> Value {
    match store::validate(source, MAX_SOURCE_BYTES) {
        Ok((_, d)) => json!({ "ok": true, "valid": true, "diagnostics": d }),
        Err(ScriptError::InvalidMetadata(d)) => {
            json!({ "ok": true, "valid": false, "diagnostics": d })
        }
        Err(e) => {
            json!({ "ok": true, "valid": false, "diagnostics": [{ "line": 1, "severity": "error", "message": e.to_string() }] })
        }
    }
}
