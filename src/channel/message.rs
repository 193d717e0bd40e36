//! What a userscript may say on the channel: one typed enum, parsed from JSON and bounded. This is
//! hostile input (any userscript can send anything once its world has messaging), so every field
//! is re-bounded here whatever the page-side prelude promised, and anything not recognised is an
//! error, never a best effort.
//!
//! Wire shape: `{"lumo": "<token>", "v": 1, "kind": "<kind>", …fields of the kind}`. A new kind
//! (the GM API) is one more [`Message`] variant and one more arm in [`parse`].

use crate::text::ellipsize;
use serde_json::{Map, Value};
use std::fmt;

/// The channel's wire version: a message of another version is refused naming both.
pub const VERSION: u64 = 1;
/// A message's JSON text, in bytes, before anything is parsed: room for a GM value batch at
/// the per-script bound (256 KiB of JSON text, which JSON escapes at most twice over), the
/// run report's fields being bounded on their own.
pub const MAX_MESSAGE_BYTES: usize = 600 * 1024;
/// Console calls kept per run; later ones are counted.
pub const MAX_RUN_LOGS: usize = 50;
/// One console line or error message, in characters.
pub const MAX_RUN_TEXT_CHARS: usize = 500;
/// All console text of one run, in characters.
pub const MAX_RUN_LOG_CHARS: usize = 8 * 1024;
/// A position in a script (line or column) above this is not a position.
const MAX_POSITION: u64 = 10_000_000;

/// Why a message was not accepted. Only counted and logged by the worker: the sender is not
/// told (it may be hostile, and a run report needs no answer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChannelError {
    TooLarge(usize),
    NotJson,
    NotAnObject,
    NoToken,
    WrongVersion(Option<u64>),
    UnknownKind(String),
    BadField(&'static str),
}

impl fmt::Display for ChannelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChannelError::TooLarge(n) => {
                write!(f, "message of {n} bytes, over {MAX_MESSAGE_BYTES}")
            }
            ChannelError::NotJson => f.write_str("message is not JSON"),
            ChannelError::NotAnObject => f.write_str("message is not an object"),
            ChannelError::NoToken => f.write_str("message has no token"),
            ChannelError::WrongVersion(Some(v)) => {
                write!(f, "channel version {v}, this provider speaks {VERSION}")
            }
            ChannelError::WrongVersion(None) => {
                write!(f, "no channel version, this provider speaks {VERSION}")
            }
            ChannelError::UnknownKind(k) => write!(f, "unknown message kind {k:?}"),
            ChannelError::BadField(name) => write!(f, "bad field {name}"),
        }
    }
}

/// A message with the token it carries (not yet verified: see `token::ChannelKey::verify`).
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    pub token: String,
    pub message: Message,
}

/// Everything a script may send. Extend here (and in [`parse`]) for new kinds.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// One run of a registered script on a page load.
    Run(RunReport),
    /// A GM function's request (`crate::gm::message`); answered to the script.
    Gm(crate::gm::message::GmRequest),
    /// An error thrown after the run's first pass (a callback, an event handler, a timer) or a
    /// promise rejection nobody handled, in the script's own world; attached to the run of the
    /// same document (Chrome's `documentId`, never the message).
    Late(LateError),
    /// A rejection reported late (its `LateError::n`) that the script handled after all
    /// (`rejectionhandled`): taken back from its run, as the browser's console takes it back.
    Handled(u64),
}

/// One error of a script after its first pass.
#[derive(Debug, Clone, PartialEq)]
pub struct LateError {
    pub error: RunError,
    /// An unhandled promise rejection (else an uncaught error).
    pub rejection: bool,
    /// The page's number for a rejection, which a later [`Message::Handled`] names.
    pub n: Option<u64>,
}

/// When the script ran, as registered (`@run-at`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunAt {
    DocumentStart,
    DocumentEnd,
    DocumentIdle,
}

impl RunAt {
    pub fn as_str(self) -> &'static str {
        match self {
            RunAt::DocumentStart => "document-start",
            RunAt::DocumentEnd => "document-end",
            RunAt::DocumentIdle => "document-idle",
        }
    }
}

/// An uncaught error of the run, at a position in the script's own source.
#[derive(Debug, Clone, PartialEq)]
pub struct RunError {
    pub name: String,
    pub message: String,
    pub line: Option<u64>,
    pub column: Option<u64>,
    /// Thrown in the code before the script's own lines (its `@require` files), with no frame
    /// in the source: the page says so (`req`), so the agent is told where to look.
    pub in_require: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RunLog {
    pub level: &'static str,
    pub text: String,
    pub line: Option<u64>,
}

/// What the script's prelude says about one run. The page URL, the time and the script are not
/// in it: the worker takes them from Chrome's sender, its own clock and the token.
#[derive(Debug, Clone, PartialEq)]
pub struct RunReport {
    pub run_at: RunAt,
    pub duration_ms: f64,
    pub error: Option<RunError>,
    pub console: Vec<RunLog>,
    pub console_dropped: u64,
}

fn text(v: Option<&Value>, max: usize) -> String {
    v.and_then(Value::as_str)
        .map(|s| ellipsize(s, max))
        .unwrap_or_default()
}

fn position(v: Option<&Value>) -> Option<u64> {
    v.and_then(Value::as_u64)
        .filter(|n| (1..=MAX_POSITION).contains(n))
}

/// Parses one message, bounding its size before anything else.
pub fn parse(raw: &str) -> Result<Envelope, ChannelError> {
    if raw.len() > MAX_MESSAGE_BYTES {
        return Err(ChannelError::TooLarge(raw.len()));
    }
    let v = crate::text::parse_json(raw).map_err(|_| ChannelError::NotJson)?;
    let Value::Object(o) = v else {
        return Err(ChannelError::NotAnObject);
    };
    let token = o
        .get("lumo")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty() && t.len() <= super::token::MAX_TOKEN_CHARS)
        .ok_or(ChannelError::NoToken)?
        .to_owned();
    match o.get("v").and_then(Value::as_u64) {
        Some(VERSION) => {}
        other => return Err(ChannelError::WrongVersion(other)),
    }
    let message = match o.get("kind").and_then(Value::as_str) {
        Some("run") => Message::Run(run_report(&o)?),
        Some("late") => Message::Late(LateError {
            error: run_error(o.get("error"))?.ok_or(ChannelError::BadField("error"))?,
            rejection: o.get("rejection") == Some(&Value::Bool(true)),
            n: o.get("n").and_then(Value::as_u64),
        }),
        Some("handled") => Message::Handled(
            o.get("n")
                .and_then(Value::as_u64)
                .ok_or(ChannelError::BadField("n"))?,
        ),
        // A request the worker does not take still reaches it, to be answered with why
        // (`GmRequest::Refused`): the script is told, once its token is proven.
        Some("gm") => Message::Gm(crate::gm::message::parse_or_refused(&o)),
        Some(k) => return Err(ChannelError::UnknownKind(ellipsize(k, 40))),
        None => return Err(ChannelError::BadField("kind")),
    };
    Ok(Envelope { token, message })
}

fn run_error(v: Option<&Value>) -> Result<Option<RunError>, ChannelError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(e)) => {
            let line = position(e.get("line"));
            Ok(Some(RunError {
                name: text(e.get("name"), 100),
                message: text(e.get("message"), MAX_RUN_TEXT_CHARS),
                line,
                // A column means nothing without its line.
                column: line.and(position(e.get("column"))),
                in_require: line.is_none() && e.get("req") == Some(&Value::Bool(true)),
            }))
        }
        Some(_) => Err(ChannelError::BadField("error")),
    }
}

fn run_report(o: &Map<String, Value>) -> Result<RunReport, ChannelError> {
    let run_at = match o.get("runAt").and_then(Value::as_str) {
        Some("document_start") => RunAt::DocumentStart,
        Some("document_end") => RunAt::DocumentEnd,
        Some("document_idle") => RunAt::DocumentIdle,
        _ => return Err(ChannelError::BadField("runAt")),
    };
    let duration_ms = o
        .get("ms")
        .and_then(Value::as_f64)
        .filter(|m| m.is_finite() && *m >= 0.0)
        .map(|m| m.min(86_400_000.0))
        .ok_or(ChannelError::BadField("ms"))?;
    let error = run_error(o.get("error"))?;
    let mut console = Vec::new();
    let mut dropped = o.get("consoleDropped").and_then(Value::as_u64).unwrap_or(0);
    let mut chars = 0usize;
    let items = match o.get("console") {
        None => &[][..],
        Some(Value::Array(a)) => a.as_slice(),
        Some(_) => return Err(ChannelError::BadField("console")),
    };
    for item in items {
        let Some(e) = item.as_object() else {
            dropped = dropped.saturating_add(1);
            continue;
        };
        let line_text = text(e.get("text"), MAX_RUN_TEXT_CHARS);
        let n = line_text.chars().count();
        if console.len() >= MAX_RUN_LOGS || chars.saturating_add(n) > MAX_RUN_LOG_CHARS {
            dropped = dropped.saturating_add(1);
            continue;
        }
        chars = chars.saturating_add(n);
        let level = match e.get("level").and_then(Value::as_str) {
            Some("info") => "info",
            Some("warn") => "warn",
            Some("error") => "error",
            Some("debug") => "debug",
            _ => "log",
        };
        console.push(RunLog {
            level,
            text: line_text,
            line: position(e.get("line")),
        });
    }
    Ok(RunReport {
        run_at,
        duration_ms,
        error,
        console,
        console_dropped: dropped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(extra: Value) -> String {
        let mut o =
            json!({"lumo": "tok", "v": 1, "kind": "run", "runAt": "document_end", "ms": 1.5});
        if let (Some(o), Value::Object(e)) = (o.as_object_mut(), extra) {
            o.extend(e);
        }
        o.to_string()
    }

    #[test]
    fn a_run_report_parses_with_its_fields() {
        let e = parse(&run(json!({
            "error": {"name": "TypeError", "message": "x is null", "line": 12, "column": 5},
            "console": [{"level": "warn", "text": "hi", "line": 3}, {"level": "nope", "text": 7}],
            "consoleDropped": 2
        })))
        .unwrap();
        assert_eq!(e.token, "tok");
        let Message::Run(r) = e.message else {
            panic!("not a run")
        };
        assert_eq!(r.run_at, RunAt::DocumentEnd);
        assert_eq!(r.duration_ms, 1.5);
        let err = r.error.unwrap();
        assert_eq!((err.line, err.column), (Some(12), Some(5)));
        assert_eq!(r.console[0].level, "warn");
        assert_eq!(r.console[1].level, "log");
        assert_eq!(r.console[1].text, "");
        assert_eq!(r.console[1].line, None);
        assert_eq!(r.console_dropped, 2);
        assert!(!err.in_require);
    }

    /// An error with no frame in the source but one before it (the `@require` code) is said to
    /// be there; a position in the source wins over the page's flag.
    #[test]
    fn an_error_in_the_require_code_is_marked_so() {
        let error = |e: Value| match parse(&run(json!({ "error": e }))).unwrap().message {
            Message::Run(r) => r.error.unwrap(),
            _ => panic!("not a run"),
        };
        let e = error(json!({"name": "SyntaxError", "message": "x", "line": null, "req": true}));
        assert!(e.in_require && e.line.is_none());
        assert!(!error(json!({"name": "E", "message": "x", "line": 3, "req": true})).in_require);
        assert!(!error(json!({"name": "E", "message": "x", "req": "yes"})).in_require);
    }

    /// A GM request the worker does not take reaches it with why, for the script to be told
    /// (its `onerror` said "no answer from the provider" when it was dropped here).
    #[test]
    fn a_gm_request_the_worker_does_not_take_carries_why() {
        use crate::gm::message::GmRequest;
        let gm = |f: Value| {
            let mut o = json!({"lumo": "t", "v": 1, "kind": "gm"});
            if let (Some(o), Value::Object(f)) = (o.as_object_mut(), f) {
                o.extend(f);
            }
            parse(&o.to_string()).unwrap().message
        };
        let Message::Gm(GmRequest::Refused(why)) =
            gm(json!({"op": "xhr", "id": 1, "url": "u", "responseType": "stream"}))
        else {
            panic!("not refused")
        };
        assert!(why.0.contains("responseType \"stream\""), "{why}");
        let Message::Gm(GmRequest::Refused(why)) = gm(json!({"op": "x".repeat(5000)})) else {
            panic!("not refused")
        };
        assert!(why.0.len() < 200, "bounded: {why}");
        assert!(matches!(
            gm(json!({"op": "xhr", "id": 1, "url": "u"})),
            Message::Gm(GmRequest::Xhr(_))
        ));
        // The envelope itself is still checked first.
        assert!(
            parse(&json!({"lumo": "t", "v": 2, "kind": "gm", "op": "xhr"}).to_string()).is_err()
        );
    }

    #[test]
    fn a_late_error_parses_bounded_and_needs_its_error() {
        let raw = json!({"lumo": "t", "v": 1, "kind": "late", "rejection": true,
            "error": {"name": "TypeError", "message": "m".repeat(5000), "line": 4, "column": 9}});
        let Message::Late(l) = parse(&raw.to_string()).unwrap().message else {
            panic!("not a late error")
        };
        assert!(l.rejection);
        assert_eq!((l.error.line, l.error.column), (Some(4), Some(9)));
        assert!(l.error.message.chars().count() <= MAX_RUN_TEXT_CHARS + 1);
        for bad in [json!(null), json!(3), json!("x")] {
            let raw = json!({"lumo": "t", "v": 1, "kind": "late", "error": bad});
            assert_eq!(
                parse(&raw.to_string()),
                Err(ChannelError::BadField("error"))
            );
        }
        let raw = json!({"lumo": "t", "v": 1, "kind": "late", "rejection": "yes", "error": {}});
        let Message::Late(l) = parse(&raw.to_string()).unwrap().message else {
            panic!("not a late error")
        };
        assert!(!l.rejection);
        assert_eq!(l.error.line, None);
        assert_eq!(l.n, None);
        let raw = json!({"lumo": "t", "v": 1, "kind": "handled", "n": 3});
        assert_eq!(
            parse(&raw.to_string()).unwrap().message,
            Message::Handled(3)
        );
        for bad in [json!(null), json!(-1), json!("3"), json!(1.5)] {
            let raw = json!({"lumo": "t", "v": 1, "kind": "handled", "n": bad});
            assert_eq!(parse(&raw.to_string()), Err(ChannelError::BadField("n")));
        }
    }

    #[test]
    fn refusals_name_what_is_wrong() {
        assert_eq!(
            parse(&"x".repeat(MAX_MESSAGE_BYTES + 1)),
            Err(ChannelError::TooLarge(MAX_MESSAGE_BYTES + 1))
        );
        assert_eq!(parse("{"), Err(ChannelError::NotJson));
        assert_eq!(parse("[1]"), Err(ChannelError::NotAnObject));
        assert_eq!(parse(r#"{"v":1,"kind":"run"}"#), Err(ChannelError::NoToken));
        let v2 = parse(r#"{"lumo":"t","v":2,"kind":"run"}"#).unwrap_err();
        assert_eq!(v2, ChannelError::WrongVersion(Some(2)));
        assert!(v2.to_string().contains('2') && v2.to_string().contains('1'));
        assert_eq!(
            parse(r#"{"lumo":"t","v":1,"kind":"policy.setSwitch"}"#),
            Err(ChannelError::UnknownKind("policy.setSwitch".into()))
        );
        assert_eq!(
            parse(&run(json!({"runAt": "later"}))),
            Err(ChannelError::BadField("runAt"))
        );
        assert_eq!(
            parse(&run(json!({"ms": -1}))),
            Err(ChannelError::BadField("ms"))
        );
        assert_eq!(
            parse(&run(json!({"console": "x"}))),
            Err(ChannelError::BadField("console"))
        );
        assert_eq!(
            parse(&run(json!({"error": 5}))),
            Err(ChannelError::BadField("error"))
        );
        // The internal channel's messages are not this channel's.
        assert!(parse(r#"{"channel":"lumo:internal","op":"state.get"}"#).is_err());
    }

    #[test]
    fn a_run_is_bounded_whatever_the_page_sends() {
        let console: Vec<Value> = (0..400)
            .map(|i| json!({"level": "log", "text": "y".repeat(300), "line": i}))
            .collect();
        // Fits the byte bound only because the lines are short; the count and char bounds cut it.
        let raw = run(
            json!({"console": console[..70].to_vec(), "error": {"message": "m".repeat(5000), "line": 0, "column": 4}}),
        );
        let Message::Run(r) = parse(&raw).unwrap().message else {
            panic!("not a run")
        };
        assert!(r.console.len() <= MAX_RUN_LOGS);
        let chars: usize = r.console.iter().map(|l| l.text.chars().count()).sum();
        assert!(chars <= MAX_RUN_LOG_CHARS);
        assert_eq!(
            r.console_dropped,
            70 - u64::try_from(r.console.len()).unwrap()
        );
        let e = r.error.unwrap();
        assert!(e.message.chars().count() <= MAX_RUN_TEXT_CHARS + 1);
        // Line 0 is no line, so the column goes too.
        assert_eq!((e.line, e.column), (None, None));
    }
}
