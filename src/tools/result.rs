//! Tool results. A business failure is a *successful* MCP call with `isError: true`, a readable
//! reason and a stable `error_code`, so the model can read why instead of losing the turn.

use crate::gm::assets::AssetError;
use crate::guard::review::QueueFull;
use crate::provider::AdmitError;
use crate::scripts::metadata::Diagnostic;
use crate::scripts::store::ScriptError;
use crate::value::object;
use serde_json::{json, Value};

/// Stable codes an agent can branch on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    InvalidArguments,
    NotFound,
    Conflict,
    InvalidMetadata,
    PayloadTooLarge,
    WriteDisabled,
    RateLimited,
    UserRejected,
    ReviewExpired,
    /// The caller cancelled the request, or its session closed, before it began: nothing ran.
    Cancelled,
    /// The user turned review on while an unreviewed write waited its turn: call again.
    ReviewRequired,
    Unauthorized,
    StorageError,
    /// Chrome cannot or will not run code in that tab (chrome:// page, Web Store, no access).
    CannotRun,
    /// Scripts cannot run now ("Allow User Scripts" is off).
    Unavailable,
    /// A try did not finish in time (the page may hang).
    Timeout,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidArguments => "INVALID_ARGUMENTS",
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::Conflict => "CONFLICT",
            ErrorCode::InvalidMetadata => "INVALID_METADATA",
            ErrorCode::PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            ErrorCode::WriteDisabled => "WRITE_DISABLED",
            ErrorCode::RateLimited => "RATE_LIMITED",
            ErrorCode::UserRejected => "USER_REJECTED",
            ErrorCode::ReviewExpired => "REVIEW_EXPIRED",
            ErrorCode::Cancelled => "CANCELLED",
            ErrorCode::ReviewRequired => "REVIEW_REQUIRED",
            ErrorCode::Unauthorized => "UNAUTHORIZED",
            ErrorCode::StorageError => "STORAGE_ERROR",
            ErrorCode::CannotRun => "CANNOT_RUN",
            ErrorCode::Unavailable => "UNAVAILABLE",
            ErrorCode::Timeout => "TIMEOUT",
        }
    }

    /// The HTTP-like status the sibling protocols use for refusals (403 for a denied write).
    pub fn status(self) -> u16 {
        match self {
            ErrorCode::WriteDisabled | ErrorCode::UserRejected | ErrorCode::Unauthorized => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::Conflict => 409,
            ErrorCode::PayloadTooLarge => 413,
            ErrorCode::RateLimited => 429,
            ErrorCode::ReviewExpired => 408,
            // nginx's "client closed request": the caller ended it, not the server.
            ErrorCode::Cancelled => 499,
            ErrorCode::ReviewRequired => 428,
            ErrorCode::InvalidArguments | ErrorCode::InvalidMetadata => 400,
            ErrorCode::StorageError => 500,
            ErrorCode::CannotRun => 422,
            ErrorCode::Unavailable => 503,
            ErrorCode::Timeout => 504,
        }
    }
}

/// A failed tool call, with optional structured details (e.g. diagnostics, retry delay).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    pub code: ErrorCode,
    pub message: String,
    pub details: Option<Value>,
}

impl ToolError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ToolError {
            code,
            message: message.into(),
            details: None,
        }
    }

    #[must_use]
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// One field of the details, if it has it.
    pub fn detail(&self, key: &str) -> Option<&Value> {
        self.details.as_ref().and_then(|d| d.get(key))
    }

    /// A write refused because the script moved past the revision it was based on.
    pub fn is_stale_revision(&self) -> bool {
        self.code == ErrorCode::Conflict && self.detail("currentRevision").is_some()
    }

    pub fn to_result(&self) -> Value {
        let mut structured = json!({
            "error_code": self.code.as_str(),
            "status": self.code.status(),
            "message": self.message,
        });
        if let (Some(d), Some(obj)) = (&self.details, structured.as_object_mut()) {
            obj.insert("details".into(), d.clone());
        }
        let text = format!(
            "{} ({}): {}",
            self.code.as_str(),
            self.code.status(),
            self.message
        );
        result(text, structured, true)
    }
}

/// A successful result: a text rendering for the model plus the structured value that matches
/// the tool's `outputSchema`.
pub fn success(text: String, structured: Value) -> Value {
    result(text, structured, false)
}

/// A `tools/call` result: the text for the model, the structured value, and whether it is an error.
fn result(text: String, structured: Value, is_error: bool) -> Value {
    object(vec![
        (
            "content",
            Value::Array(vec![object(vec![
                ("type", "text".into()),
                ("text", text.into()),
            ])]),
        ),
        ("structuredContent", structured),
        ("isError", is_error.into()),
    ])
}

/// The wire form of a store error: its code, its message and what the agent needs to retry.
impl From<ScriptError> for ToolError {
    fn from(e: ScriptError) -> Self {
        let code = match &e {
            ScriptError::NotFound(_) | ScriptError::RevisionNotFound { .. } => ErrorCode::NotFound,
            ScriptError::StaleRevision { .. }
            | ScriptError::Trashed(_)
            | ScriptError::DuplicateIdentity { .. }
            | ScriptError::TrashFull { .. } => ErrorCode::Conflict,
            ScriptError::InvalidMetadata(_) => ErrorCode::InvalidMetadata,
            ScriptError::TooLarge { .. }
            | ScriptError::StoredTooLarge { .. }
            | ScriptError::PatchTooLarge { .. }
            | ScriptError::StorageKept { .. }
            | ScriptError::TooMany => ErrorCode::PayloadTooLarge,
            ScriptError::PatchFailed(_) => ErrorCode::InvalidArguments,
            ScriptError::Storage(_) => ErrorCode::StorageError,
            ScriptError::Asset(
                AssetError::TooMany { .. }
                | AssetError::TooLarge { .. }
                | AssetError::ScriptTotal { .. }
                | AssetError::Quota { .. },
            ) => ErrorCode::PayloadTooLarge,
            ScriptError::Asset(AssetError::Storage(_)) => ErrorCode::StorageError,
            // A URL that cannot be fetched or does not hold what it says: the metadata's fault.
            ScriptError::Asset(_) => ErrorCode::InvalidMetadata,
        };
        let details = match &e {
            ScriptError::InvalidMetadata(d) => Some(json!({ "diagnostics": d })),
            ScriptError::StaleRevision { current, .. }
            | ScriptError::RevisionNotFound { current, .. } => {
                Some(json!({ "currentRevision": current }))
            }
            ScriptError::DuplicateIdentity { uuid, .. } => Some(json!({ "existingUuid": uuid })),
            _ => None,
        };
        let err = ToolError::new(code, e.to_string());
        match details {
            Some(d) => err.with_details(d),
            None => err,
        }
    }
}

/// Diagnostics as lines of the text result.
pub(crate) fn diagnostics_text(d: &[Diagnostic]) -> String {
    d.iter()
        .map(|d| {
            format!(
                "\n  line {} {}: {}",
                d.line,
                serde_json::to_value(d.severity)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                d.message
            )
        })
        .collect()
}

/// A full review queue is a rate limit: wait for the reviews already queued.
impl From<QueueFull> for ToolError {
    fn from(e: QueueFull) -> Self {
        ToolError::new(ErrorCode::RateLimited, e.to_string())
    }
}

/// The rate-limit step's refusal, with the delay the agent should wait.
impl From<AdmitError> for ToolError {
    fn from(e: AdmitError) -> Self {
        match e {
            AdmitError::Storage(_) => ToolError::new(ErrorCode::StorageError, e.to_string()),
            AdmitError::Limited { retry_after_secs } => {
                ToolError::new(ErrorCode::RateLimited, e.to_string())
                    .with_details(json!({ "retryAfterSeconds": retry_after_secs }))
            }
        }
    }
}
