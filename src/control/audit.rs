//! The audit log as the pages show it.

use super::err;
use crate::env::Env;
use crate::guard::audit;
use crate::provider::Provider;
use serde_json::{json, Value};

/// `audit.list`: both rings, merged newest first, and the positions of the entries Undo can
/// revert (`by_hand::can_undo`, the rule Undo itself applies): the popup draws a button for
/// those and decides nothing. Beside the entries, not in them, so an export is the log alone.
pub(super) async fn list<E: Env>(p: &Provider<E>) -> Value {
    match audit::read_all(&p.env).await {
        Ok(entries) => {
            let undoable: Vec<usize> = entries
                .iter()
                .enumerate()
                .filter(|(_, e)| crate::by_hand::can_undo(e).is_ok())
                .map(|(i, _)| i)
                .collect();
            json!({ "ok": true, "entries": entries, "undoable": undoable })
        }
        Err(e) => err(e.to_string()),
    }
}
