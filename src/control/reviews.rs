//! The user's answer to a write waiting for review, its whole diff and its files' whole text.

use super::err;
use crate::env::Env;
use crate::guard::review::Decision;
use crate::provider::{Decided, Provider};
use crate::tools::result::{ErrorCode, ToolError};
use futures::future::{select, Either};
use serde_json::{json, Value};

/// `reviews.decide`: approve (maybe for the rest of the session, with the session's other
/// waiting writes: `alsoApproved` lists their ids) or deny one review. An approval's answer
/// waits (up to [`APPLY_WAIT_MS`]) for the write it approved, and says whether it was applied:
/// it may not be, when the script changed or went meanwhile.
pub(super) async fn decide<E: Env>(
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
    let Some(Decided { outcome, also }) = p.decide_told(&review, decision) else {
        return err(
            "that review is no longer waiting (it expired, was cancelled or was already decided)",
        );
    };
    if !approve {
        return json!({ "ok": true });
    }
    let waited = select(outcome, Box::pin(p.env.sleep(APPLY_WAIT_MS))).await;
    let mut answer = match waited {
        Either::Left((Ok(Ok(())), _)) => json!({ "ok": true, "applied": true }),
        Either::Left((Ok(Err(e)), _)) => {
            json!({ "ok": true, "applied": false, "why": in_user_words(&e) })
        }
        Either::Left((Err(_), _)) => json!({
            "ok": true,
            "applied": false,
            "why": "it stopped before it finished (its connection closed); the audit log has what happened",
        }),
        Either::Right(_) => json!({ "ok": true, "applied": null }),
    };
    if let (false, Some(fields)) = (also.is_empty(), answer.as_object_mut()) {
        fields.insert("alsoApproved".into(), json!(also));
    }
    answer
}

/// How long an approval's answer waits for the write: a write waits its turn behind others and
/// for its `@require` files, a try for its page.
pub const APPLY_WAIT_MS: f64 = 20_000.0;

/// Why an approved write did not apply, for the person who approved it: the agent's message
/// names tools, the user's names what happened.
fn in_user_words(e: &ToolError) -> String {
    match e.code {
        ErrorCode::Conflict if e.is_stale_revision() => {
            "the script changed after this was asked for, so nothing changed; the agent was told to read it again".to_owned()
        }
        ErrorCode::WriteDisabled => "writes are turned off; nothing changed".to_owned(),
        ErrorCode::Unauthorized => "this caller no longer has access; nothing changed".to_owned(),
        _ => e.message.clone(),
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

/// `reviews.file`: all of the text of a file a waiting review fetched and shows the first part of.
pub(super) fn file<E: Env>(p: &Provider<E>, review: Option<String>, index: Option<usize>) -> Value {
    let Some(review) = review else {
        return err("missing \"review\" (the review id)");
    };
    let Some(index) = index else {
        return err("missing \"index\" (the file's place in the review's list)");
    };
    match p.review_file(&review, index) {
        Some(text) => json!({ "ok": true, "review": review, "index": index, "text": text }),
        None => err("that review is no longer waiting, or has no such file"),
    }
}
