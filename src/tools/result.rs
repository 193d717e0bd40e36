//! Tool results. A business failure is a *successful* MCP call with `isError: true`, a readable
//! reason and a stable `error_code`, so the model can read why instead of losing the turn.

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

    pub fn to_result(&self) -> Value {
        let mut structured = json!({
            "error_code": self.code.as_str(),
            "status": self.code.status(),
            "message": self.message,
        });
        if let (Some(d), Some(obj)) = (&self.details, structured.as_object_mut()) {
            obj.insert("details".into(), d.clone());
        }
        json!({
            "content": [{ "type": "text", "text": format!("{} ({}): {}", self.code.as_str(), self.code.status(), self.message) }],
            "structuredContent": structured,
            "isError": true,
        })
    }
}

/// A successful result: a text rendering for the model plus the structured value that matches
/// the tool's `outputSchema`.
pub fn success(text: String, structured: Value) -> Value {
    json!({
        "content": [{ "type": "text", "text": text }],
        "structuredContent": structured,
        "isError": false,
    })
}
