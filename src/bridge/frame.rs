//! Frames (seed 001's envelope), one JSON object per WebSocket text message:
//!
//! | frame    | shape                                        |
//! |----------|----------------------------------------------|
//! | request  | `{k:"req", id, type, payload}`               |
//! | response | `{k:"res", id, ok, result?, error?}`         |
//! | notify   | `{k:"ntf", type, payload}`                   |
//! | ping     | `{k:"png"}` / pong `{k:"pog"}`               |
//!
//! Parsing checks the size before anything else and never panics; unknown extra fields are
//! ignored (a newer peer may add some), missing or mistyped required ones are refused.

use serde_json::{json, Map, Value};
use std::fmt;

/// Largest frame accepted, in bytes. A tool call carries at most a 256 KiB source, which JSON
/// escaping can grow up to six-fold; results are smaller.
pub const MAX_FRAME_BYTES: usize = 4 * 1024 * 1024;
/// Message types are short identifiers.
pub const MAX_TYPE_BYTES: usize = 64;
/// Ids are JSON numbers; above 2^53 JavaScript would round them, so they are refused.
pub const MAX_ID: u64 = (1 << 53) - 1;
/// Error codes and messages are bounded so a hostile peer cannot make us log megabytes.
pub const MAX_ERROR_CODE: usize = 64;
pub const MAX_ERROR_MESSAGE: usize = 2048;

#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    Request {
        id: u64,
        kind: String,
        payload: Value,
    },
    Response {
        id: u64,
        outcome: Result<Value, WireError>,
    },
    Notify {
        kind: String,
        payload: Value,
    },
    Ping,
    Pong,
}

/// The `error` of a failed response: a stable code and a readable message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError {
    pub code: String,
    pub message: String,
}

impl WireError {
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        WireError {
            code: clip(code, MAX_ERROR_CODE),
            message: clip(&message.into(), MAX_ERROR_MESSAGE),
        }
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    TooLarge { len: usize },
    NotJson(String),
    NotObject,
    UnknownKind(String),
    Missing(&'static str),
    BadField(&'static str),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooLarge { len } => write!(
                f,
                "frame of {len} bytes is larger than the limit of {MAX_FRAME_BYTES}"
            ),
            Self::NotJson(e) => write!(f, "frame is not JSON: {e}"),
            Self::NotObject => write!(f, "frame is not a JSON object"),
            Self::UnknownKind(k) => write!(f, "unknown frame kind {k:?}"),
            Self::Missing(field) => write!(f, "frame lacks the field {field:?}"),
            Self::BadField(field) => write!(f, "frame field {field:?} has the wrong type or value"),
        }
    }
}

impl std::error::Error for FrameError {}

/// Parses one frame. Bounded: the size is checked before the JSON parser runs, and serde_json
/// refuses nesting deeper than 128 levels.
pub fn parse(text: &str) -> Result<Frame, FrameError> {
    if text.len() > MAX_FRAME_BYTES {
        return Err(FrameError::TooLarge { len: text.len() });
    }
    let value: Value = serde_json::from_str(text).map_err(|e| {
        // Position only: the message must not echo hostile input back at length.
        FrameError::NotJson(format!("line {} column {}", e.line(), e.column()))
    })?;
    let Value::Object(mut obj) = value else {
        return Err(FrameError::NotObject);
    };
    let k = match obj.get("k") {
        Some(Value::String(k)) => k.clone(),
        Some(_) => return Err(FrameError::BadField("k")),
        None => return Err(FrameError::Missing("k")),
    };
    match k.as_str() {
        "req" => Ok(Frame::Request {
            id: id(&obj)?,
            kind: kind(&obj)?,
            payload: obj
                .remove("payload")
                .ok_or(FrameError::Missing("payload"))?,
        }),
        "res" => {
            let id = id(&obj)?;
            let outcome = match obj.get("ok") {
                Some(Value::Bool(true)) => Ok(obj.remove("result").unwrap_or(Value::Null)),
                Some(Value::Bool(false)) => Err(error(obj.get("error"))?),
                Some(_) => return Err(FrameError::BadField("ok")),
                None => return Err(FrameError::Missing("ok")),
            };
            Ok(Frame::Response { id, outcome })
        }
        "ntf" => Ok(Frame::Notify {
            kind: kind(&obj)?,
            payload: obj
                .remove("payload")
                .ok_or(FrameError::Missing("payload"))?,
        }),
        "png" => Ok(Frame::Ping),
        "pog" => Ok(Frame::Pong),
        _ => Err(FrameError::UnknownKind(clip(&k, MAX_TYPE_BYTES))),
    }
}

fn id(obj: &Map<String, Value>) -> Result<u64, FrameError> {
    match obj.get("id") {
        Some(v) => v
            .as_u64()
            .filter(|n| *n <= MAX_ID)
            .ok_or(FrameError::BadField("id")),
        None => Err(FrameError::Missing("id")),
    }
}

/// A type: 1..=64 bytes of `a-z 0-9 _`.
fn kind(obj: &Map<String, Value>) -> Result<String, FrameError> {
    match obj.get("type") {
        Some(Value::String(t)) if is_type(t) => Ok(t.clone()),
        Some(_) => Err(FrameError::BadField("type")),
        None => Err(FrameError::Missing("type")),
    }
}

pub fn is_type(t: &str) -> bool {
    !t.is_empty()
        && t.len() <= MAX_TYPE_BYTES
        && t.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

fn error(v: Option<&Value>) -> Result<WireError, FrameError> {
    let obj = match v {
        Some(Value::Object(o)) => o,
        Some(_) => return Err(FrameError::BadField("error")),
        None => return Err(FrameError::Missing("error")),
    };
    let code = obj.get("code").and_then(Value::as_str).unwrap_or("ERROR");
    let message = obj.get("message").and_then(Value::as_str).unwrap_or("");
    Ok(WireError::new(code, message))
}

/// The text of a frame (see [`encode_within`]).
pub fn encode(frame: Frame) -> String {
    encode_within(frame, usize::MAX).unwrap_or_default()
}

/// The text of a frame of at most `max` bytes, or `Err` with its length: a longer one is
/// counted, not kept (a `try_script` answer of 8 MB is not copied once more to be refused),
/// and its values are moved into the frame, not copied (`json!` copies each value it is given).
pub fn encode_within(frame: Frame, max: usize) -> Result<String, usize> {
    use crate::value::object;
    let v = match frame {
        Frame::Request { id, kind, payload } => object(vec![
            ("k", "req".into()),
            ("id", id.into()),
            ("type", kind.into()),
            ("payload", payload),
        ]),
        Frame::Response {
            id,
            outcome: Ok(result),
        } => object(vec![
            ("k", "res".into()),
            ("id", id.into()),
            ("ok", true.into()),
            ("result", result),
        ]),
        Frame::Response {
            id,
            outcome: Err(e),
        } => json!({ "k": "res", "id": id, "ok": false,
                     "error": { "code": e.code, "message": e.message } }),
        Frame::Notify { kind, payload } => object(vec![
            ("k", "ntf".into()),
            ("type", kind.into()),
            ("payload", payload),
        ]),
        Frame::Ping => json!({ "k": "png" }),
        Frame::Pong => json!({ "k": "pog" }),
    };
    let mut out = Bounded {
        kept: Vec::new(),
        max,
        len: 0,
    };
    // Writing to memory fails only past `max`, which `len` tells; a `Value` always serializes.
    let _ = serde_json::to_writer(&mut out, &v);
    if out.len > max {
        return Err(out.len);
    }
    Ok(String::from_utf8(out.kept).unwrap_or_default())
}

/// Keeps what is written up to `max` bytes, and counts all of it.
struct Bounded {
    kept: Vec<u8>,
    max: usize,
    len: usize,
}

impl std::io::Write for Bounded {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.len = self.len.saturating_add(bytes.len());
        if self.len <= self.max {
            self.kept.extend_from_slice(bytes);
        } else if !self.kept.is_empty() {
            self.kept = Vec::new();
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// At most `max` bytes of `s`, cut on a char boundary.
pub(crate) fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    s.get(..end).unwrap_or("").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(f: Frame) {
        assert_eq!(parse(&encode(f.clone())), Ok(f));
    }

    /// A frame over the bound is measured, not kept: its exact length comes back, and one at
    /// the bound is the same text `encode` gives.
    #[test]
    fn a_frame_past_the_bound_is_counted_not_kept() {
        let big = |n: usize| Frame::Response {
            id: 3,
            outcome: Ok(json!({ "text": "x".repeat(n) })),
        };
        let whole = encode(big(1000));
        assert_eq!(encode_within(big(1000), whole.len()), Ok(whole.clone()));
        assert_eq!(encode_within(big(1000), whole.len() - 1), Err(whole.len()));
        let mut w = Bounded {
            kept: Vec::new(),
            max: 10,
            len: 0,
        };
        use std::io::Write;
        w.write_all(b"12345678").unwrap();
        w.write_all(b"9abc").unwrap();
        assert_eq!(
            (w.kept.len(), w.len),
            (0, 12),
            "what was kept goes once past the bound"
        );
    }

    #[test]
    fn every_frame_round_trips() {
        round_trip(Frame::Request {
            id: 7,
            kind: "call_tool".into(),
            payload: json!({"name": "status", "arguments": {}}),
        });
        round_trip(Frame::Response {
            id: 7,
            outcome: Ok(json!({"content": []})),
        });
        round_trip(Frame::Response {
            id: 8,
            outcome: Err(WireError::new("TIMEOUT", "too slow")),
        });
        round_trip(Frame::Notify {
            kind: "tabs_changed".into(),
            payload: json!({"tabs": []}),
        });
        round_trip(Frame::Ping);
        round_trip(Frame::Pong);
    }

    #[test]
    fn the_seed_shapes_parse() {
        assert_eq!(
            parse(r#"{"k":"req","id":1,"type":"hello","payload":{"protocol":1}}"#),
            Ok(Frame::Request {
                id: 1,
                kind: "hello".into(),
                payload: json!({"protocol": 1})
            })
        );
        // `result` is optional on success; extra fields are ignored.
        assert_eq!(
            parse(r#"{"k":"res","id":1,"ok":true,"extra":3}"#),
            Ok(Frame::Response {
                id: 1,
                outcome: Ok(Value::Null)
            })
        );
        assert_eq!(parse(r#"{"k":"png"}"#), Ok(Frame::Ping));
    }

    #[test]
    fn malformed_frames_are_refused_with_the_reason() {
        let cases: &[(&str, FrameError)] = &[
            ("[]", FrameError::NotObject),
            ("1", FrameError::NotObject),
            ("{}", FrameError::Missing("k")),
            (r#"{"k":1}"#, FrameError::BadField("k")),
            (r#"{"k":"zzz"}"#, FrameError::UnknownKind("zzz".into())),
            (
                r#"{"k":"req","type":"a","payload":1}"#,
                FrameError::Missing("id"),
            ),
            (
                r#"{"k":"req","id":-1,"type":"a","payload":1}"#,
                FrameError::BadField("id"),
            ),
            (
                r#"{"k":"req","id":1.5,"type":"a","payload":1}"#,
                FrameError::BadField("id"),
            ),
            (
                r#"{"k":"req","id":9007199254740992,"type":"a","payload":1}"#,
                FrameError::BadField("id"),
            ),
            (
                r#"{"k":"req","id":"1","type":"a","payload":1}"#,
                FrameError::BadField("id"),
            ),
            (
                r#"{"k":"req","id":1,"payload":1}"#,
                FrameError::Missing("type"),
            ),
            (
                r#"{"k":"req","id":1,"type":"Hello","payload":1}"#,
                FrameError::BadField("type"),
            ),
            (
                r#"{"k":"req","id":1,"type":""}"#,
                FrameError::BadField("type"),
            ),
            (
                r#"{"k":"req","id":1,"type":"a"}"#,
                FrameError::Missing("payload"),
            ),
            (r#"{"k":"res","id":1}"#, FrameError::Missing("ok")),
            (
                r#"{"k":"res","id":1,"ok":"yes"}"#,
                FrameError::BadField("ok"),
            ),
            (
                r#"{"k":"res","id":1,"ok":false}"#,
                FrameError::Missing("error"),
            ),
            (
                r#"{"k":"res","id":1,"ok":false,"error":"x"}"#,
                FrameError::BadField("error"),
            ),
            (r#"{"k":"ntf","payload":1}"#, FrameError::Missing("type")),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text).as_ref(), Err(want), "{text}");
        }
        assert!(matches!(parse("{"), Err(FrameError::NotJson(_))));
        assert!(matches!(parse(""), Err(FrameError::NotJson(_))));
    }

    #[test]
    fn size_is_checked_before_parsing() {
        let big = format!(
            r#"{{"k":"ntf","type":"a","payload":"{}"}}"#,
            "x".repeat(MAX_FRAME_BYTES)
        );
        assert_eq!(parse(&big), Err(FrameError::TooLarge { len: big.len() }));
        let fits = format!(
            r#"{{"k":"ntf","type":"a","payload":"{}"}}"#,
            "x".repeat(MAX_FRAME_BYTES - 40)
        );
        assert!(parse(&fits).is_ok());
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let deep = format!(
            r#"{{"k":"ntf","type":"a","payload":{}{}}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert!(matches!(parse(&deep), Err(FrameError::NotJson(_))));
    }

    #[test]
    fn hostile_error_fields_are_bounded() {
        let text = format!(
            r#"{{"k":"res","id":1,"ok":false,"error":{{"code":"{}","message":"{}"}}}}"#,
            "C".repeat(10_000),
            "é".repeat(10_000)
        );
        let Ok(Frame::Response {
            outcome: Err(e), ..
        }) = parse(&text)
        else {
            panic!("expected an error response");
        };
        assert_eq!(e.code.len(), MAX_ERROR_CODE);
        assert!(e.message.len() <= MAX_ERROR_MESSAGE);
        // Unknown kinds are quoted shortened.
        let k = "z".repeat(10_000);
        assert_eq!(
            parse(&format!(r#"{{"k":"{k}"}}"#)),
            Err(FrameError::UnknownKind("z".repeat(MAX_TYPE_BYTES)))
        );
    }
}
