//! The user's answer to a write waiting for review, and its whole diff.

use super::err;
use crate::env::Env;
use crate::guard::review::Decision;
use crate::provider::Provider;
use serde_json::{json, Value};

/// `reviews.decide`: approve (maybe for the rest of the session) or deny one review.
pub(super) fn decide<E: Env>(
    p: &Provider<E>,
    review: Option<String>,
    approve: Option<bool>,
    allow_session: Option<bool>,
) -> Value {
    let Some(review) = review else {
        return err("missing \"review\" (the review id)");
    };
    let Some(approve) = approve else {
        return err("\"approve\" must be true or false");
    };
    let decision = if approve {
        Decision::Approve {
            allow_session: allow_session.unwrap_or(false),
        }
    } else {
        Decision::Deny
    };
    if p.decide(&review, decision) {
        json!({ "ok": true })
    } else {
        err("that review is no longer waiting (it expired, was cancelled or was already decided)")
    }
}

/// `reviews.diff`: the whole diff of a review whose preview was partial.
pub(super) fn diff<E: Env>(p: &Provider<E>, review: Option<String>) -> Value {
    let Some(review) = review else {
        return err("missing \"review\" (the review id)");
    };
    match p.review_diff(&review) {
        Some(diff) => json!({ "ok": true, "review": review, "diff": diff }),
        None => err("that review is no longer waiting, or changes no source"),
    }
}
