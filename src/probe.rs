//! L0: the `lumo:probe` message. [`answer`] is a pure function of (request, sender id, policy,
//! capability, time): it returns the response and mutates the policy only to record a pending
//! approval or refresh `lastSeen`. `ok: false` is reserved for protocol failures; every policy
//! outcome is `ok: true` with the status flags saying what the host must tell the user.
#![warn(clippy::must_use_candidate)] // pure decisions: a result dropped is a bug

use crate::ids::{is_extension_id, ExtensionId};
use crate::json_view::{self, Json, JsonView};
use crate::policy::{Access, Policy};

pub const PROBE_CHANNEL: &str = "lumo:probe";
pub const PROBE_VERSION: u64 = 1;
pub const NAMESPACE: &str = "userscripts";
pub const SERVICE_NAME: &str = "Lumo Userscripts";
pub const SERVICE_VERSION: &str = env!("CARGO_PKG_VERSION");
/// A probe is a small metadata message; anything bigger is not one. The shell copies no more
/// than the beginning of a longer one into the wasm (`Provider::probe_over`).
pub const MAX_PROBE_BYTES: usize = 16 * 1024;

/// Whether the provider can do its job (is `chrome.userScripts` usable) — never permission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capability {
    pub ready: bool,
    pub reason: Option<String>,
}

impl Capability {
    #[must_use]
    pub fn ready() -> Self {
        Capability {
            ready: true,
            reason: None,
        }
    }

    #[must_use]
    pub fn user_scripts_off() -> Self {
        Capability {
            ready: false,
            reason: Some(USER_SCRIPTS_OFF.to_owned()),
        }
    }
}

pub const USER_SCRIPTS_OFF: &str =
    "Scripts cannot run: turn on \"Allow User Scripts\" for Lumo Userscripts \
(chrome://extensions → Lumo Userscripts → Details → Allow User Scripts).";

/// A protocol failure: the only reason a probe answers `ok: false`.
#[derive(Debug, Clone, PartialEq)]
pub enum ProbeError {
    NotAnObject,
    MissingChannel,
    WrongChannel(String),
    MissingVersion,
    VersionMismatch(String),
    Malformed(&'static str),
    TooLarge(usize),
    /// Not JSON text. Unreachable from the shell and the loader, which hand over what
    /// `JSON.stringify` wrote; no parser's detail, so both modules say the same.
    NotJson,
    /// JSON, but nested deeper than either parser reads (as a port message is refused).
    TooDeep,
}

impl std::fmt::Display for ProbeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProbeError::NotAnObject => f.write_str("malformed probe: the message is not a JSON object"),
            ProbeError::MissingChannel => write!(f, "malformed probe: missing \"channel\" (expected \"{PROBE_CHANNEL}\")"),
            ProbeError::WrongChannel(c) => write!(f, "unknown channel {c}; this provider answers \"{PROBE_CHANNEL}\""),
            ProbeError::MissingVersion => write!(f, "malformed probe: missing \"version\" (this provider speaks probe version {PROBE_VERSION})"),
            ProbeError::VersionMismatch(v) => write!(
                f,
                "probe version mismatch: the request is version {v}, this provider speaks version {PROBE_VERSION}"
            ),
            ProbeError::Malformed(why) => write!(f, "malformed probe: {why}"),
            ProbeError::NotJson => f.write_str("malformed probe: not valid JSON"),
            ProbeError::TooDeep => write!(
                f,
                "malformed probe: nested {} or more levels deep",
                crate::mcp::jsonrpc::MAX_DEPTH
            ),
            ProbeError::TooLarge(n) => write!(f, "malformed probe: {n} bytes is over the {MAX_PROBE_BYTES}-byte limit"),
        }
    }
}

/// The parts of a probe request the provider reads. `client.name` is display-only.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeRequest {
    /// The request's `id` (a string or a number) as JSON text, echoed in the reply as it came.
    pub id_json: String,
    pub client_name: String,
}

/// Reads a parsed probe: serde_json's `Value` in the provider, `json_view::Json` in the probe
/// module (which links no serde_json), with the same answers.
pub fn parse<J: JsonView>(msg: &J) -> Result<ProbeRequest, ProbeError> {
    if !msg.is_object() {
        return Err(ProbeError::NotAnObject);
    }
    match msg.get("channel") {
        None => return Err(ProbeError::MissingChannel),
        Some(c) if c.as_str() == Some(PROBE_CHANNEL) => {}
        Some(other) => return Err(ProbeError::WrongChannel(short(other))),
    }
    match msg.get("version") {
        None => return Err(ProbeError::MissingVersion),
        Some(v) if v.as_u64() == Some(PROBE_VERSION) => {}
        Some(other) => return Err(ProbeError::VersionMismatch(short(other))),
    }
    let id_json = match msg.get("id") {
        Some(v) if v.as_str().is_some() || v.is_number() => v.to_json(),
        Some(_) => return Err(ProbeError::Malformed("\"id\" must be a string or a number")),
        None => return Err(ProbeError::Malformed("missing \"id\"")),
    };
    let client = match msg.get("client") {
        Some(c) if c.is_object() => c,
        Some(_) => return Err(ProbeError::Malformed("\"client\" must be an object")),
        None => return Err(ProbeError::Malformed("missing \"client\"")),
    };
    // client.id is informational (authorization uses sender.id), but it is still an input path,
    // so it goes through the one validator.
    match client.get("id").map(|v| v.as_str()) {
        Some(Some(s)) if is_extension_id(s) => {}
        Some(Some(_)) => {
            return Err(ProbeError::Malformed(
                "\"client.id\" is not an extension id",
            ))
        }
        Some(None) => return Err(ProbeError::Malformed("\"client.id\" must be a string")),
        None => return Err(ProbeError::Malformed("missing \"client.id\"")),
    }
    let client_name = match client.get("name").map(|v| v.as_str()) {
        Some(Some(s)) => s.to_owned(),
        None => String::new(),
        Some(None) => return Err(ProbeError::Malformed("\"client.name\" must be a string")),
    };
    if client.get("version").is_some_and(|v| v.as_str().is_none()) {
        return Err(ProbeError::Malformed("\"client.version\" must be a string"));
    }
    Ok(ProbeRequest {
        id_json,
        client_name,
    })
}

/// Renders a wrong value for an error message without echoing a huge string back.
fn short<J: JsonView>(v: &J) -> String {
    crate::text::ellipsize(&v.to_json(), 40)
}

/// The probe as the shell receives it: JSON text (`None`: the value has no JSON form), bounded,
/// parsed with serde_json (a lone surrogate escape reads as U+FFFD, as everywhere text comes
/// from JS) and read. The provider's reader.
pub fn parse_text(text: Option<&str>) -> Result<ProbeRequest, ProbeError> {
    read_text(text, |t| match crate::text::parse_json(t) {
        Ok(v) => parse(&v),
        Err(e) if crate::mcp::jsonrpc::is_too_deep(&e) => Err(ProbeError::TooDeep),
        Err(_) => Err(ProbeError::NotJson),
    })
}

/// [`parse_text`] with `json_view`, which reads exactly the texts serde_json reads, the same
/// way (`fuzz/fuzz_targets/json_view.rs`). The probe module's reader.
pub fn parse_text_lite(text: Option<&str>) -> Result<ProbeRequest, ProbeError> {
    read_text(text, |t| match json_view::parse(t) {
        Ok(v) => parse(&v),
        Err(e) if e.what == json_view::TOO_DEEP => Err(ProbeError::TooDeep),
        Err(_) => Err(ProbeError::NotJson),
    })
}

fn read_text(
    text: Option<&str>,
    read: impl FnOnce(&str) -> Result<ProbeRequest, ProbeError>,
) -> Result<ProbeRequest, ProbeError> {
    let Some(t) = text else {
        return Err(ProbeError::NotAnObject);
    };
    if t.len() > MAX_PROBE_BYTES {
        return Err(ProbeError::TooLarge(t.len()));
    }
    read(t)
}

/// What the provider tells the host: the status flags, or a protocol failure.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `ok: false`: the message is not a probe this provider speaks.
    Refused(ProbeError),
    /// `ok: true`, whatever the policy says.
    Status {
        id_json: String,
        enabled: bool,
        authorized: bool,
        ready: bool,
        pending_approval: bool,
        /// Why not connected (or not ready), in words for the user; `None` when all pass.
        reason: Option<String>,
    },
}

impl Reply {
    /// The reply as JSON text, the one form it is sent in.
    #[must_use]
    pub fn to_json(&self) -> String {
        let mut out = String::with_capacity(256);
        match self {
            Reply::Refused(e) => {
                out.push_str("{\"ok\":false,\"error\":");
                json_view::write_str(&mut out, &e.to_string());
            }
            Reply::Status {
                id_json,
                enabled,
                authorized,
                ready,
                pending_approval,
                reason,
            } => {
                let flag = |b: &bool| if *b { "true" } else { "false" };
                out.push_str("{\"ok\":true,\"id\":");
                out.push_str(id_json);
                out.push_str(",\"service\":{\"namespace\":");
                json_view::write_str(&mut out, NAMESPACE);
                out.push_str(",\"name\":");
                json_view::write_str(&mut out, SERVICE_NAME);
                out.push_str(",\"version\":");
                json_view::write_str(&mut out, SERVICE_VERSION);
                out.push_str("},\"status\":{\"enabled\":");
                out.push_str(flag(enabled));
                out.push_str(",\"authorized\":");
                out.push_str(flag(authorized));
                out.push_str(",\"ready\":");
                out.push_str(flag(ready));
                out.push_str(",\"pendingApproval\":");
                out.push_str(flag(pending_approval));
                if let Some(r) = reason {
                    out.push_str(",\"reason\":");
                    json_view::write_str(&mut out, r);
                }
                out.push('}');
            }
        }
        out.push('}');
        out
    }
}

/// Answers one probe. `policy` is mutated only to record a pending approval or refresh
/// `lastSeen`; the returned flag says whether it changed (so the shell persists it).
pub fn answer(
    req: &ProbeRequest,
    sender: Option<&str>,
    policy: &mut Policy,
    cap: &Capability,
    now: f64,
) -> (Reply, bool) {
    let sender = sender.and_then(ExtensionId::parse);
    let changed = match &sender {
        Some(id) => policy.note_probe(id, &req.client_name, now),
        None => false,
    };
    let access = policy.access(sender.as_ref());
    let authorized = sender.as_ref().is_some_and(|id| policy.is_allowlisted(id));
    let pending = !authorized && sender.as_ref().is_some_and(|id| policy.is_pending(id));
    let reason = match access {
        Access::Granted => cap.reason.clone(),
        Access::NotAllowlisted if pending => {
            Some("Waiting for the user's approval in Lumo Userscripts (options page → pending approvals).".to_owned())
        }
        other => Some(other.reason().to_owned()),
    };
    let reply = Reply::Status {
        id_json: req.id_json.clone(),
        enabled: policy.endpoint_enabled,
        authorized,
        ready: cap.ready,
        pending_approval: pending,
        reason,
    };
    (reply, changed)
}

/// What the probe module (`probe/`, loaded before the provider's module: ARCHITECTURE.md, "The
/// probe module") does with a probe that arrives while the provider's module is still compiling.
#[derive(Debug, Clone, PartialEq)]
pub enum Early {
    /// The answer the provider would give now. `record`: the probe changes the policy (a pending
    /// approval, `lastSeen`), so the provider must also be handed the probe to record it.
    Reply { reply: Reply, record: bool },
    /// Only the provider can answer: the loader holds the probe for it.
    Defer(&'static str),
}

/// The most [`answer_early_json`] reads; more is deferred to the provider unread.
pub const MAX_EARLY_INPUT_BYTES: usize = 4 * 1024 * 1024;

/// What the loader's toggle check saw: the check `chrome::env` makes, `getScripts(0)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Toggle<'a> {
    /// There is no `chrome.userScripts`: unavailable.
    Missing,
    /// Chrome refused the call synchronously, with this message.
    Refused(&'a str),
    /// Chrome did not refuse it: only a real call can tell.
    NotRefused,
}

/// [`Early`] for one probe, from what the loader gathered: the probe as JSON text (`None`: it has
/// none), the sender's id, the stored policy (`None`: none stored), the toggle check, and the
/// time. Gives what `Provider::probe` gives for the same inputs (`tests/probe_module.rs`).
#[must_use]
pub fn answer_early<J: JsonView>(
    text: Option<&str>,
    sender: Option<&str>,
    stored_policy: Option<&J>,
    toggle: Toggle<'_>,
    now: f64,
) -> Early {
    let req = match parse_text_lite(text) {
        Ok(r) => r,
        Err(e) => {
            return Early::Reply {
                reply: Reply::Refused(e),
                record: false,
            }
        }
    };
    let known = match toggle {
        Toggle::Missing => Some(false),
        Toggle::Refused(message) => crate::env::availability_from(message),
        Toggle::NotRefused => None,
    };
    let Some(available) = known else {
        return Early::Defer("the toggle check said nothing known: the provider asks Chrome");
    };
    let cap = if available {
        Capability::ready()
    } else {
        Capability::user_scripts_off()
    };
    let mut policy = Policy::from_stored(stored_policy).0;
    let (reply, record) = answer(&req, sender, &mut policy, &cap, now);
    Early::Reply { reply, record }
}

/// [`answer_early`] over the probe module's wire: `input` is the JSON text
/// `{"text", "sender", "policy", "toggle", "now"}` (`text` and `sender` null where there is none,
/// `policy` absent where none is stored; `toggle` is `"missing"`, `{"refused": message}`, or
/// anything else for not refused); the result is
/// `{"reply": …, "record": bool}` or `{"defer": reason}`.
#[must_use]
pub fn answer_early_json(input: &str) -> String {
    let defer = |why: &str| {
        let mut out = String::from("{\"defer\":");
        json_view::write_str(&mut out, why);
        out.push('}');
        out
    };
    // Bounded before it is parsed: a probe is small, and the policy's lists are bounded.
    if input.len() > MAX_EARLY_INPUT_BYTES {
        return defer("the loader's input is larger than any probe and policy");
    }
    let Ok(v) = json_view::parse(input) else {
        return defer("the loader's input is not JSON");
    };
    let text = v.get("text").and_then(JsonView::as_str);
    let sender = v.get("sender").and_then(JsonView::as_str);
    let policy = v.get("policy");
    let toggle = match v.get("toggle") {
        Some(Json::String(s)) if s == "missing" => Toggle::Missing,
        Some(t) => match t.get("refused").and_then(JsonView::as_str) {
            Some(message) => Toggle::Refused(message),
            None => Toggle::NotRefused,
        },
        None => Toggle::NotRefused,
    };
    let Some(now) = v.get("now").and_then(JsonView::as_f64) else {
        return defer("no time given");
    };
    match answer_early(text, sender, policy, toggle, now) {
        Early::Reply { reply, record } => {
            let mut out = String::from("{\"reply\":");
            out.push_str(&reply.to_json());
            out.push_str(if record {
                ",\"record\":true}"
            } else {
                ",\"record\":false}"
            });
            out
        }
        Early::Defer(why) => defer(why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Switch;
    use serde_json::{json, Value};

    const HOST: &str = "mobcibglkcoacmddjpdoknlbbicjchlk";

    fn probe() -> Value {
        json!({"channel": "lumo:probe", "version": 1, "id": "probe-42",
               "client": {"id": HOST, "name": "Lumo", "version": "1.0.19"}})
    }

    /// The host's state machine from the contract, applied to our answer: every row must be
    /// reachable and map to the right user-visible outcome.
    fn host_outcome(resp: &Value) -> String {
        if resp["ok"] != json!(true) {
            return resp["error"].as_str().unwrap_or("").to_owned();
        }
        let (Some(_), Some(st)) = (resp.get("service"), resp.get("status")) else {
            return "Probe response is incomplete.".into();
        };
        if st["enabled"] == json!(false) {
            return "Agent access is turned off in the provider.".into();
        }
        if st["authorized"] == json!(false) {
            return if st["pendingApproval"] == json!(true) {
                "Waiting for your approval in the provider.".into()
            } else {
                "The caller is not on the allowlist.".into()
            };
        }
        if st["ready"] == json!(false) {
            return st["reason"].as_str().unwrap_or("").to_owned();
        }
        "connected".into()
    }

    /// A probe as the shell gets it (its JSON text), answered; the reply as the host reads it.
    fn run(msg: &Value, sender: Option<&str>, p: &mut Policy, cap: &Capability) -> (Value, bool) {
        let (reply, changed) = match parse_text(Some(&msg.to_string())) {
            Ok(req) => answer(&req, sender, p, cap, 1000.0),
            Err(e) => (Reply::Refused(e), false),
        };
        (serde_json::from_str(&reply.to_json()).unwrap(), changed)
    }

    #[test]
    fn first_probe_records_pending() {
        let mut p = Policy::default();
        let (r, changed) = run(&probe(), Some(HOST), &mut p, &Capability::ready());
        assert!(changed);
        assert_eq!(r["ok"], json!(true));
        assert_eq!(r["id"], json!("probe-42"));
        assert_eq!(r["service"]["namespace"], json!("userscripts"));
        assert_eq!(
            host_outcome(&r),
            "Waiting for your approval in the provider."
        );
        // Repeated probes do not grow the list nor rewrite storage.
        let (_, changed) = run(&probe(), Some(HOST), &mut p, &Capability::ready());
        assert!(!changed);
        assert_eq!(p.pending.len(), 1);
    }

    #[test]
    fn every_host_row() {
        let id = ExtensionId::parse(HOST).unwrap();
        // enabled: false
        let mut p = Policy::default();
        p.set_switch(Switch::Endpoint, false);
        let (r, changed) = run(&probe(), Some(HOST), &mut p, &Capability::ready());
        assert_eq!(
            host_outcome(&r),
            "Agent access is turned off in the provider."
        );
        assert!(!changed && p.pending.is_empty());
        // denied
        let mut p = Policy::default();
        p.deny(&id, 0.0);
        let (r, _) = run(&probe(), Some(HOST), &mut p, &Capability::ready());
        assert_eq!(r["status"]["pendingApproval"], json!(false));
        assert_eq!(host_outcome(&r), "The caller is not on the allowlist.");
        // ready: false with the reason
        let mut p = Policy::default();
        p.approve(&id, None, 0.0).unwrap();
        let (r, _) = run(
            &probe(),
            Some(HOST),
            &mut p,
            &Capability::user_scripts_off(),
        );
        assert_eq!(r["status"]["authorized"], json!(true));
        assert!(host_outcome(&r).contains("Allow User Scripts"));
        // all pass
        let (r, _) = run(&probe(), Some(HOST), &mut p, &Capability::ready());
        assert_eq!(host_outcome(&r), "connected");
        assert!(r["status"].get("reason").is_none());
    }

    #[test]
    fn protocol_failures_are_ok_false() {
        let mut p = Policy::default();
        let cap = Capability::ready();
        let mut v2 = probe();
        v2["version"] = json!(2);
        let (r, changed) = run(&v2, Some(HOST), &mut p, &cap);
        assert_eq!(r["ok"], json!(false));
        let msg = r["error"].as_str().unwrap();
        // Both numbers, each named for what it is (any text holds a '1' and a '2' somewhere).
        assert!(
            msg.contains("the request is version 2") && msg.contains("speaks version 1"),
            "{msg}"
        );
        assert!(!changed && p.pending.is_empty());

        let cases = [
            json!(null),
            json!(42),
            json!([probe()]),
            json!("lumo:probe"),
            json!({"version": 1, "id": "x", "client": {"id": HOST}}),
            json!({"channel": "lumo:other", "version": 1, "id": "x", "client": {"id": HOST}}),
            json!({"channel": "lumo:probe", "id": "x", "client": {"id": HOST}}),
            json!({"channel": "lumo:probe", "version": "1", "id": "x", "client": {"id": HOST}}),
            json!({"channel": "lumo:probe", "version": 1.5, "id": "x", "client": {"id": HOST}}),
            json!({"channel": "lumo:probe", "version": 1, "client": {"id": HOST}}),
            json!({"channel": "lumo:probe", "version": 1, "id": {}, "client": {"id": HOST}}),
            json!({"channel": "lumo:probe", "version": 1, "id": "x"}),
            json!({"channel": "lumo:probe", "version": 1, "id": "x", "client": "Lumo"}),
            json!({"channel": "lumo:probe", "version": 1, "id": "x", "client": {"id": "NOPE"}}),
            json!({"channel": "lumo:probe", "version": 1, "id": "x", "client": {"id": HOST, "name": 5}}),
            json!({"channel": "lumo:probe", "version": 1, "id": "x", "client": {"id": HOST, "version": 1}}),
        ];
        for c in cases {
            let (r, changed) = run(&c, Some(HOST), &mut p, &cap);
            assert_eq!(r["ok"], json!(false), "{c}");
            assert!(r["error"].as_str().is_some_and(|m| !m.is_empty()));
            assert!(!changed);
        }
        assert!(p.pending.is_empty());
    }

    #[test]
    fn authorization_uses_sender_id_only() {
        let host = ExtensionId::parse(HOST).unwrap();
        let mut p = Policy::default();
        p.approve(&host, None, 0.0).unwrap();
        // Another extension claiming to be the host in client.id is not authorized.
        let other = "a".repeat(32);
        let (r, _) = run(&probe(), Some(&other), &mut p, &Capability::ready());
        assert_eq!(r["status"]["authorized"], json!(false));
        // A sender without a valid id (web page, native app) gets nothing and records nothing.
        let before = p.clone();
        for s in [
            None,
            Some(""),
            Some("https://evil.example"),
            Some("IMLIAKFDGONLDKMADDNHNNICLBHIOBPO"),
        ] {
            let (r, changed) = run(&probe(), s, &mut p, &Capability::ready());
            assert_eq!(r["status"]["authorized"], json!(false));
            assert_eq!(r["status"]["pendingApproval"], json!(false));
            assert!(!changed);
        }
        assert_eq!(p, before);
    }

    #[test]
    fn text_errors_say_what_is_wrong() {
        // Valid JSON nested too deep is said so by both modules, as the port says it (found by
        // an exploratory pass: "not valid JSON"); broken JSON is not valid JSON.
        let deep = format!("{{\"x\":{}{}}}", "[".repeat(200), "]".repeat(200));
        for e in [parse_text(Some(&deep)), parse_text_lite(Some(&deep))] {
            let e = e.unwrap_err();
            assert_eq!(
                e.to_string(),
                "malformed probe: nested 128 or more levels deep"
            );
        }
        // serde_json reads 127 levels, not 128 (nor does json_view): each module says so.
        for (n, said) in [
            (127usize, ProbeError::NotAnObject),
            (128, ProbeError::TooDeep),
        ] {
            let t = format!("{}{}", "[".repeat(n), "]".repeat(n));
            assert_eq!(parse_text(Some(&t)), Err(said.clone()), "{n}");
            assert_eq!(parse_text_lite(Some(&t)), Err(said), "{n}");
        }
        let broken = format!("{{\"x\":{}", "[".repeat(10));
        // A syntax error before deep nesting is what is wrong (found in review: "too deep").
        let broken_then_deep = format!("{{\"a\":nope,\"x\":{}", "[".repeat(130));
        for b in [broken, broken_then_deep] {
            for e in [parse_text(Some(&b)), parse_text_lite(Some(&b))] {
                assert_eq!(e, Err(ProbeError::NotJson));
            }
        }
        assert!(matches!(
            parse_text(Some(&"x".repeat(MAX_PROBE_BYTES + 1))),
            Err(ProbeError::TooLarge(_))
        ));
        assert_eq!(parse_text(None), Err(ProbeError::NotAnObject));
        // A lone surrogate in the name is not a reason to refuse the probe.
        let t = r#"{"channel":"lumo:probe","version":1,"id":1,"client":{"id":"mobcibglkcoacmddjpdoknlbbicjchlk","name":"a\ud800"}}"#;
        let req = parse_text(Some(t)).unwrap();
        assert_eq!(req.client_name, "a\u{FFFD}");
        let (r, _) = answer(
            &req,
            Some(HOST),
            &mut Policy::default(),
            &Capability::ready(),
            0.0,
        );
        assert!(matches!(r, Reply::Status { .. }), "{r:?}");
    }

    /// The reply is written by hand: it must be the JSON the host parses, whatever the id and
    /// reason hold, with the id echoed as it came.
    #[test]
    fn the_reply_is_json_with_the_id_as_sent() {
        for id in [
            r#""probe-42""#,
            r#""quote \" and \\ and \u0001""#,
            "7",
            "-1.5e3",
            "0",
        ] {
            let text = format!(
                r#"{{"channel":"lumo:probe","version":1,"id":{id},"client":{{"id":"{HOST}"}}}}"#
            );
            let req = parse_text(Some(&text)).unwrap();
            let lite = parse_text_lite(Some(&text)).unwrap();
            assert_eq!(
                serde_json::from_str::<Value>(&lite.id_json).unwrap(),
                serde_json::from_str::<Value>(&req.id_json).unwrap(),
                "the two readers echo the same id"
            );
            for cap in [Capability::ready(), Capability::user_scripts_off()] {
                let (r, _) = answer(&req, Some(HOST), &mut Policy::default(), &cap, 0.0);
                let back: Value = serde_json::from_str(&r.to_json()).unwrap();
                let sent: Value = serde_json::from_str(&text).unwrap();
                assert_eq!(back["id"], sent["id"], "{id}");
                assert_eq!(back["service"]["namespace"], json!(NAMESPACE));
                assert_eq!(back["status"]["ready"], json!(cap.ready));
            }
        }
        let refused = Reply::Refused(ProbeError::WrongChannel("\"x\u{1}\"".into())).to_json();
        let back: Value = serde_json::from_str(&refused).unwrap();
        assert_eq!(back["ok"], json!(false));
        assert!(back["error"].as_str().unwrap().contains("x\u{1}"));
    }

    #[test]
    fn extra_fields_are_ignored_and_names_untrusted() {
        let mut p = Policy::default();
        let mut m = probe();
        m["extra"] = json!({"deep": [1, 2, 3]});
        m["client"]["name"] = json!("<img src=x onerror=alert(1)>\u{0}");
        let (r, _) = run(&m, Some(HOST), &mut p, &Capability::ready());
        assert_eq!(r["ok"], json!(true));
        assert_eq!(p.pending[0].name, "<img src=x onerror=alert(1)>");
    }
}
