//! The audit log as the pages show it.

use super::err;
use crate::env::Env;
use crate::guard::audit;
use crate::provider::Provider;
use serde_json::{json, Value};

/// `audit.list`: both rings, merged newest first.
pub(super) async fn list<E: Env>(p: &Provider<E>) -> Value {
    match audit::read_all(&p.env).await {
        Ok(entries) => json!({ "ok": true, "entries": entries }),
        Err(e) => err(e),
    }
}
