//! What a script's GM functions may ask of the worker: one closed enum parsed from the fields of
//! a channel message of kind `"gm"` (`{lumo, v, kind: "gm", op, …}`). Hostile input: every field
//! is bounded here whatever the prelude promised, anything unknown is an error, and nothing in
//! a request names the script — the channel's token does.

use serde_json::{Map, Value};

use super::values::{Op, MAX_KEYS_PER_OP, MAX_KEY_BYTES};
use crate::text::ellipsize;

/// Longest URL a request may carry, in bytes.
pub const MAX_URL_BYTES: usize = 8 * 1024;
/// Most request headers.
pub const MAX_HEADERS: usize = 64;
/// Longest header name or value, in bytes.
pub const MAX_HEADER_BYTES: usize = 8 * 1024;
/// Longest `user` or `password`, in bytes (their Basic header stays under a header's bound).
pub const MAX_CREDENTIAL_BYTES: usize = 2 * 1024;
/// Largest request body, in bytes: UTF-8 text, or the bytes of a binary one (which come
/// base64-encoded, 4/3 as long, so the message stays under the channel's 600 KiB cap).
pub const MAX_BODY_BYTES: usize = 256 * 1024;
/// Longest content type a binary body may state (a FormData boundary fits).
pub const MAX_CONTENT_TYPE_BYTES: usize = 256;
/// Longest timeout a script may ask for; 0 means this default.
pub const MAX_TIMEOUT_MS: u64 = 120_000;
/// Most requests of one script in flight at once.
pub const MAX_XHR_IN_FLIGHT: usize = 16;

/// One GM request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GmRequest {
    /// The script's values now (a page that started before the last change asks once).
    ValuesGet,
    /// Wait for the next change made elsewhere (another tab or frame), for value-change
    /// listeners; answered with the changes or, after a while, with none. `since` is the
    /// cursor of the page's last answer (`gm::change_log`: a change number): changes made
    /// since are answered at once; none, or one the worker did not give, is answered "read
    /// them whole".
    ValuesWait {
        since: Option<u64>,
    },
    /// Set or delete values.
    Values(Op),
    /// `GM_xmlhttpRequest`.
    Xhr(XhrRequest),
    /// Abort the script's request `id`.
    XhrAbort {
        id: u32,
    },
    /// Wait for the next progress report of request `id` after the report numbered `seen`.
    XhrProgress {
        id: u32,
        seen: u64,
    },
    /// The page's whole list of menu commands now, and a wait for a click on one
    /// (`gm::menu`); an empty list removes them.
    Menu(Vec<super::menu::Command>),
    /// `GM_openInTab`; closing and waiting name a tab this script opened.
    TabOpen(super::tabs::OpenTab),
    TabClose {
        tab: i64,
    },
    TabWait {
        tab: i64,
    },
    /// `GM_notification`; its click and close come through `NoticeWait`.
    Notify(super::tabs::Notice),
    NoticeWait {
        id: String,
    },
    NoticeClose {
        id: String,
    },
    /// `GM_getTab`: this script's object for the sender's tab (`gm::tab_objects`).
    TabObjectGet,
    /// `GM_saveTab`: the JSON text to keep for the sender's tab (checked by the provider, so
    /// the script is told why a save is refused).
    TabObjectSave(String),
    /// `GM_getTabs`: this script's objects of every open tab.
    TabObjectAll,
    /// `GM_setClipboard` that Chrome refused in the page, for the popup to write when a click
    /// on one of the script's menu commands there allows it (`gm::clipboard`).
    Clipboard(super::clipboard::Write),
    /// A request whose fields this provider does not take (a `responseType: 'stream'`, a body
    /// over [`MAX_BODY_BYTES`], an op it does not know): answered with why, so the script's
    /// `onerror` says it rather than "no answer from the provider" (the channel, which parses
    /// the message, sends it here once the token is proven: [`parse_or_refused`]).
    Refused(GmError),
}

/// [`parse`], a refusal kept as [`GmRequest::Refused`] for the script to be told.
pub fn parse_or_refused(o: &Map<String, Value>) -> GmRequest {
    parse(o).unwrap_or_else(GmRequest::Refused)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseType {
    Text,
    Json,
    ArrayBuffer,
    Blob,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XhrRequest {
    /// The script's own number for it (for abort and progress).
    pub id: u32,
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub data: Option<Body>,
    /// The content type the page's `Blob`, `FormData` or `URLSearchParams` carried; used when
    /// the script set no `Content-Type` header.
    pub content_type: Option<String>,
    pub response_type: ResponseType,
    /// Milliseconds, 1..=[`MAX_TIMEOUT_MS`].
    pub timeout_ms: u64,
    /// `anonymous: true`: no cookies.
    pub anonymous: bool,
}

/// A request body: text as the script gave it, or bytes (sent byte for byte).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    Text(String),
    Bytes(Vec<u8>),
}

/// Why a request was refused; the script is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GmError(pub String);

impl std::fmt::Display for GmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn bad(what: &str) -> GmError {
    GmError(format!("GM request: {what}"))
}

fn string<'a>(o: &'a Map<String, Value>, k: &'static str, max: usize) -> Result<&'a str, GmError> {
    let s = o
        .get(k)
        .and_then(Value::as_str)
        .ok_or_else(|| bad(&format!("{k} must be a string")))?;
    if s.len() > max {
        return Err(bad(&format!("{k} is {} bytes, over {max}", s.len())));
    }
    Ok(s)
}

fn key(v: &Value) -> Result<String, GmError> {
    let k = v.as_str().ok_or_else(|| bad("a key must be a string"))?;
    if k.len() > MAX_KEY_BYTES {
        return Err(bad(&format!(
            "a key of {} bytes is over {MAX_KEY_BYTES}",
            k.len()
        )));
    }
    Ok(k.to_owned())
}

fn list<'a>(
    o: &'a Map<String, Value>,
    k: &'static str,
    max: usize,
) -> Result<&'a [Value], GmError> {
    let a = o
        .get(k)
        .and_then(Value::as_array)
        .ok_or_else(|| bad(&format!("{k} must be a list")))?;
    if a.len() > max {
        return Err(bad(&format!("{} items in {k}, over {max}", a.len())));
    }
    Ok(a)
}

/// Parses the fields of a `"gm"` message.
pub fn parse(o: &Map<String, Value>) -> Result<GmRequest, GmError> {
    let op = string(o, "op", 32)?;
    match op {
        "values.get" => Ok(GmRequest::ValuesGet),
        "values.wait" => Ok(GmRequest::ValuesWait {
            since: o.get("since").and_then(Value::as_u64),
        }),
        "values.set" => {
            let mut pairs = Vec::new();
            for item in list(o, "items", MAX_KEYS_PER_OP)? {
                let [k, v] = item.as_array().map(Vec::as_slice).unwrap_or_default() else {
                    return Err(bad("each item must be [key, JSON text]"));
                };
                // Its size is the store's to refuse, with the reason (the channel bounds the
                // message as a whole).
                let v = v.as_str().ok_or_else(|| bad("a value must be JSON text"))?;
                pairs.push((key(k)?, v.to_owned()));
            }
            Ok(GmRequest::Values(Op::Set(pairs)))
        }
        "values.delete" => {
            let keys = list(o, "keys", MAX_KEYS_PER_OP)?
                .iter()
                .map(key)
                .collect::<Result<Vec<_>, _>>()?;
            Ok(GmRequest::Values(Op::Delete(keys)))
        }
        "xhr" => xhr(o).map(GmRequest::Xhr),
        "xhr.abort" => Ok(GmRequest::XhrAbort { id: id(o)? }),
        "xhr.progress" => Ok(GmRequest::XhrProgress {
            id: id(o)?,
            seen: o
                .get("seen")
                .and_then(Value::as_u64)
                .ok_or_else(|| bad("seen must be a whole number"))?,
        }),
        "menu" => super::menu_message::commands(o)
            .map(GmRequest::Menu)
            .map_err(GmError),
        "tab.open" => super::tabs::open_tab(o)
            .map(GmRequest::TabOpen)
            .map_err(GmError),
        "tab.close" => Ok(GmRequest::TabClose {
            tab: super::tabs::tab_id(o).map_err(GmError)?,
        }),
        "tab.wait" => Ok(GmRequest::TabWait {
            tab: super::tabs::tab_id(o).map_err(GmError)?,
        }),
        "notify" => super::tabs::notice(o)
            .map(GmRequest::Notify)
            .map_err(GmError),
        "notify.wait" => Ok(GmRequest::NoticeWait {
            id: super::tabs::notice_id(o).map_err(GmError)?,
        }),
        "notify.close" => Ok(GmRequest::NoticeClose {
            id: super::tabs::notice_id(o).map_err(GmError)?,
        }),
        "clipboard" => super::clipboard::parse(o)
            .map(GmRequest::Clipboard)
            .map_err(GmError),
        "tabobj.get" => Ok(GmRequest::TabObjectGet),
        "tabobj.all" => Ok(GmRequest::TabObjectAll),
        "tabobj.save" => Ok(GmRequest::TabObjectSave(
            o.get("tab")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("tab must be JSON text"))?
                .to_owned(),
        )),
        other => Err(bad(&format!("unknown op {:?}", ellipsize(other, 32)))),
    }
}

/// The bytes of a base64 body (standard alphabet, padded), at most [`MAX_BODY_BYTES`].
fn bytes(b64: &str) -> Result<Vec<u8>, GmError> {
    use base64::Engine as _;
    let out = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|_| bad("a binary body must be base64"))?;
    if out.len() > MAX_BODY_BYTES {
        return Err(bad(&format!(
            "the body is {} bytes, over {MAX_BODY_BYTES}",
            out.len()
        )));
    }
    Ok(out)
}

fn id(o: &Map<String, Value>) -> Result<u32, GmError> {
    o.get("id")
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| bad("id must be a whole number"))
}

/// `user` / `password` (Tampermonkey's and Violentmonkey's): HTTP Basic, sent with the request
/// itself, as `fetch` takes no credentials in a URL and answers no challenge with them. None
/// when neither is given, or when the script set its own `Authorization` (it wins).
fn basic_authorization(
    o: &Map<String, Value>,
    headers: &[(String, String)],
) -> Result<Option<String>, GmError> {
    let field = |k: &'static str| match o.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(_) => string(o, k, MAX_CREDENTIAL_BYTES).map(Some),
    };
    let (user, password) = (field("user")?, field("password")?);
    if (user.is_none() && password.is_none())
        || headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("authorization"))
    {
        return Ok(None);
    }
    let user = user.unwrap_or_default();
    // RFC 7617: the server splits at the first colon.
    if user.contains(':') {
        return Err(bad(
            "user must not contain \":\" (HTTP Basic splits user and password there)",
        ));
    }
    use base64::Engine as _;
    let pair = format!("{user}:{}", password.unwrap_or_default());
    Ok(Some(format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )))
}

/// Methods `fetch` refuses to send.
const FORBIDDEN_METHODS: &[&str] = &["CONNECT", "TRACE", "TRACK"];

/// Any method name HTTP allows (a token, RFC 9110), as `XMLHttpRequest.open` takes it in
/// Violentmonkey and Tampermonkey: WebDAV's `PROPFIND`, `MKCOL`, `MOVE`… too. Upper-cased, as
/// `fetch` does for the standard ones (a lower-case `patch` would otherwise go as it is).
fn method(o: &Map<String, Value>) -> Result<String, GmError> {
    let m = match o.get("method") {
        None | Some(Value::Null) => return Ok("GET".to_owned()),
        Some(_) => string(o, "method", 16)?.to_ascii_uppercase(),
    };
    let token = !m.is_empty()
        && m.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !token {
        return Err(bad(&format!(
            "method {:?} is not an HTTP method name",
            ellipsize(&m, 16)
        )));
    }
    if FORBIDDEN_METHODS.contains(&m.as_str()) {
        return Err(bad(&format!("method {m} cannot be sent from a browser")));
    }
    Ok(m)
}

fn xhr(o: &Map<String, Value>) -> Result<XhrRequest, GmError> {
    let method = method(o)?;
    let url = string(o, "url", MAX_URL_BYTES)?.to_owned();
    let mut headers = Vec::new();
    if o.get("headers").is_some_and(|h| !h.is_null()) {
        for h in list(o, "headers", MAX_HEADERS)? {
            let [Value::String(n), Value::String(v)] =
                h.as_array().map(Vec::as_slice).unwrap_or_default()
            else {
                return Err(bad("each header must be [name, value]"));
            };
            if n.len() > MAX_HEADER_BYTES || v.len() > MAX_HEADER_BYTES {
                return Err(bad(&format!("a header is over {MAX_HEADER_BYTES} bytes")));
            }
            headers.push((n.clone(), v.clone()));
        }
    }
    if let Some(basic) = basic_authorization(o, &headers)? {
        headers.push(("Authorization".to_owned(), basic));
    }
    let binary = o.get("binary").and_then(Value::as_bool).unwrap_or(false);
    let data = match o.get("data") {
        None | Some(Value::Null) => None,
        Some(_) if binary => Some(Body::Bytes(bytes(string(
            o,
            "data",
            MAX_BODY_BYTES.div_ceil(3).saturating_mul(4),
        )?)?)),
        Some(_) => Some(Body::Text(string(o, "data", MAX_BODY_BYTES)?.to_owned())),
    };
    let content_type = match o.get("dataType") {
        None | Some(Value::Null) => None,
        Some(_) => Some(string(o, "dataType", MAX_CONTENT_TYPE_BYTES)?.to_owned()),
    };
    let response_type = match o.get("responseType").and_then(Value::as_str) {
        None | Some("" | "text") => ResponseType::Text,
        Some("json") => ResponseType::Json,
        Some("arraybuffer") => ResponseType::ArrayBuffer,
        Some("blob") => ResponseType::Blob,
        Some(other) => {
            return Err(bad(&format!(
                "responseType {:?} is not text, json, arraybuffer or blob",
                ellipsize(other, 16)
            )))
        }
    };
    let timeout_ms = match o.get("timeout").and_then(Value::as_f64) {
        Some(t) if t.is_finite() && t >= 1.0 => {
            // Clamped to the bound: f64 → u64 of a value in range.
            let t = t.min(MAX_TIMEOUT_MS as f64);
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let ms = t as u64;
            ms.max(1)
        }
        _ => MAX_TIMEOUT_MS,
    };
    Ok(XhrRequest {
        id: id(o)?,
        method,
        url,
        headers,
        data,
        content_type,
        response_type,
        timeout_ms,
        anonymous: o.get("anonymous").and_then(Value::as_bool).unwrap_or(false),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(v: Value) -> Result<GmRequest, GmError> {
        parse(v.as_object().unwrap())
    }

    #[test]
    fn values_ops() {
        assert_eq!(p(json!({"op": "values.get"})), Ok(GmRequest::ValuesGet));
        assert_eq!(
            p(json!({"op": "values.set", "items": [["a", "1"], ["b", "{\"x\":2}"]]})),
            Ok(GmRequest::Values(Op::Set(vec![
                ("a".into(), "1".into()),
                ("b".into(), "{\"x\":2}".into())
            ])))
        );
        assert_eq!(
            p(json!({"op": "values.delete", "keys": ["a"]})),
            Ok(GmRequest::Values(Op::Delete(vec!["a".into()])))
        );
        for bad in [
            json!({"op": "values.set", "items": [["a"]]}),
            json!({"op": "values.set", "items": [[1, "1"]]}),
            json!({"op": "values.set", "items": [["a", 1]]}),
            json!({"op": "values.set", "items": "x"}),
            json!({"op": "values.delete", "keys": [null]}),
            json!({"op": "values.set", "items": [["k".repeat(MAX_KEY_BYTES + 1), "1"]]}),
            json!({"op": "values.nope"}),
            json!({"op": 3}),
            json!({}),
        ] {
            assert!(p(bad.clone()).is_err(), "{bad}");
        }
        let many: Vec<Value> = (0..=MAX_KEYS_PER_OP)
            .map(|i| json!([i.to_string(), "1"]))
            .collect();
        assert!(p(json!({"op": "values.set", "items": many}))
            .unwrap_err()
            .0
            .contains("over"));
    }

    #[test]
    fn xhr_fields_defaults_and_bounds() {
        let r = p(json!({"op": "xhr", "id": 7, "url": "https://a.example/x"})).unwrap();
        assert_eq!(
            r,
            GmRequest::Xhr(XhrRequest {
                id: 7,
                method: "GET".into(),
                url: "https://a.example/x".into(),
                headers: vec![],
                data: None,
                content_type: None,
                response_type: ResponseType::Text,
                timeout_ms: MAX_TIMEOUT_MS,
                anonymous: false,
            })
        );
        let r = p(
            json!({"op": "xhr", "id": 1, "method": "post", "url": "u", "headers": [["X-A", "1"]],
            "data": "body", "responseType": "json", "timeout": 2500.7}),
        )
        .unwrap();
        let GmRequest::Xhr(x) = r else { panic!() };
        assert_eq!(
            (x.method.as_str(), x.timeout_ms, x.response_type),
            ("POST", 2500, ResponseType::Json)
        );
        assert_eq!(x.headers, [("X-A".to_owned(), "1".to_owned())]);
        let GmRequest::Xhr(x) =
            p(json!({"op": "xhr", "id": 1, "url": "u", "timeout": 1e300})).unwrap()
        else {
            panic!()
        };
        assert_eq!(x.timeout_ms, MAX_TIMEOUT_MS);
        // WebDAV's methods go, as any HTTP token does.
        for (m, want) in [
            ("propfind", "PROPFIND"),
            ("MKCOL", "MKCOL"),
            ("patch", "PATCH"),
        ] {
            let GmRequest::Xhr(x) =
                p(json!({"op": "xhr", "id": 1, "url": "u", "method": m})).unwrap()
            else {
                panic!()
            };
            assert_eq!(x.method, want);
        }
        for bad in [
            json!({"op": "xhr", "url": "u"}),
            json!({"op": "xhr", "id": -1, "url": "u"}),
            json!({"op": "xhr", "id": 1}),
            json!({"op": "xhr", "id": 1, "url": "u", "method": "CONNECT"}),
            json!({"op": "xhr", "id": 1, "url": "u", "method": "trace"}),
            json!({"op": "xhr", "id": 1, "url": "u", "method": "GET X"}),
            json!({"op": "xhr", "id": 1, "url": "u", "method": ""}),
            json!({"op": "xhr", "id": 1, "url": "u", "method": "G\u{c9}T"}),
            json!({"op": "xhr", "id": 1, "url": "u", "responseType": "document"}),
            json!({"op": "xhr", "id": 1, "url": "u", "headers": [["a"]]}),
            json!({"op": "xhr", "id": 1, "url": "u".repeat(MAX_URL_BYTES + 1)}),
            json!({"op": "xhr.abort"}),
        ] {
            assert!(p(bad.clone()).is_err(), "{bad}");
        }
        let GmRequest::Xhr(x) =
            p(json!({"op": "xhr", "id": 1, "url": "u", "data": "a=1"})).unwrap()
        else {
            panic!()
        };
        assert_eq!(x.data, Some(Body::Text("a=1".into())));
        assert_eq!(
            p(json!({"op": "xhr", "id": 1, "url": "u", "data": "x".repeat(MAX_BODY_BYTES + 1)}))
                .unwrap_err()
                .0,
            format!(
                "GM request: data is {} bytes, over {MAX_BODY_BYTES}",
                MAX_BODY_BYTES + 1
            )
        );
        assert_eq!(
            p(json!({"op": "xhr", "id": 1, "url": "u", "dataType": 3}))
                .unwrap_err()
                .0,
            "GM request: dataType must be a string"
        );
        assert!(p(json!({"op": "xhr", "id": 1, "url": "u", "dataType": "t".repeat(300)})).is_err());
        assert_eq!(
            p(json!({"op": "xhr", "id": 1, "url": "u", "data": null, "dataType": null}))
                .map(|r| matches!(r, GmRequest::Xhr(x) if x.data.is_none())),
            Ok(true)
        );
    }

    #[test]
    fn user_and_password_are_sent_as_basic_unless_the_script_set_authorization() {
        let auth = |extra: Value| {
            let mut m = json!({"op": "xhr", "id": 1, "url": "u"});
            for (k, v) in extra.as_object().unwrap() {
                m[k] = v.clone();
            }
            p(m).map(|r| {
                let GmRequest::Xhr(x) = r else { panic!() };
                x.headers
                    .into_iter()
                    .filter(|(n, _)| n.eq_ignore_ascii_case("authorization"))
                    .map(|(_, v)| v)
                    .collect::<Vec<_>>()
            })
        };
        // "ali:pä:ss" in UTF-8, base64: the password may hold a colon, the user may not.
        assert_eq!(
            auth(json!({"user": "ali", "password": "pä:ss"})).unwrap(),
            ["Basic YWxpOnDDpDpzcw=="]
        );
        assert_eq!(auth(json!({"user": "ali"})).unwrap(), ["Basic YWxpOg=="]);
        assert_eq!(auth(json!({"password": "pw"})).unwrap(), ["Basic OnB3"]);
        assert_eq!(
            auth(json!({"user": null, "password": null})).unwrap(),
            Vec::<String>::new()
        );
        assert_eq!(
            auth(
                json!({"user": "ali", "password": "pw", "headers": [["authorization", "Bearer t"]]})
            )
            .unwrap(),
            ["Bearer t"]
        );
        assert_eq!(
            auth(json!({"user": "a:b", "password": "pw"}))
                .unwrap_err()
                .0,
            "GM request: user must not contain \":\" (HTTP Basic splits user and password there)"
        );
        assert!(auth(json!({"user": 7})).is_err());
        assert!(auth(json!({"password": "x".repeat(MAX_CREDENTIAL_BYTES + 1)})).is_err());
        // Within a header's bound at the largest.
        let most = auth(json!({"user": "u".repeat(MAX_CREDENTIAL_BYTES), "password": "p".repeat(MAX_CREDENTIAL_BYTES)}))
            .unwrap();
        assert!(most[0].len() <= MAX_HEADER_BYTES);
    }

    #[test]
    fn binary_bodies_are_base64_bytes_within_the_bound() {
        use base64::Engine as _;
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let all: Vec<u8> = (0..=255).collect();
        let GmRequest::Xhr(x) = p(json!({"op": "xhr", "id": 1, "url": "u", "binary": true,
            "data": b64(&all), "dataType": "application/octet-stream"}))
        .unwrap() else {
            panic!()
        };
        assert_eq!(x.data, Some(Body::Bytes(all)));
        assert_eq!(x.content_type.as_deref(), Some("application/octet-stream"));
        // Exactly the bound passes; one byte more does not (checked on the text before
        // decoding, then on the bytes).
        let max = vec![7u8; MAX_BODY_BYTES];
        assert!(
            p(json!({"op": "xhr", "id": 1, "url": "u", "binary": true, "data": b64(&max)})).is_ok()
        );
        let over = vec![7u8; MAX_BODY_BYTES + 1];
        assert!(
            p(json!({"op": "xhr", "id": 1, "url": "u", "binary": true, "data": b64(&over)}))
                .unwrap_err()
                .0
                .contains("over")
        );
        for bad in ["not base64!", "AAE", "=AAA"] {
            assert!(
                p(json!({"op": "xhr", "id": 1, "url": "u", "binary": true, "data": bad}))
                    .unwrap_err()
                    .0
                    .contains("base64"),
                "{bad}"
            );
        }
        // What the bound allows fits the channel's 600 KiB message with room for the rest.
        assert!(MAX_BODY_BYTES.div_ceil(3) * 4 + 2 * MAX_URL_BYTES < 600 * 1024);
    }

    #[test]
    fn abort_and_progress_need_their_numbers() {
        assert_eq!(
            p(json!({"op": "xhr.progress", "id": 3, "seen": 2})),
            Ok(GmRequest::XhrProgress { id: 3, seen: 2 })
        );
        for bad in [
            json!({"op": "xhr.progress", "id": 3}),
            json!({"op": "xhr.progress", "id": 3, "seen": -1}),
            json!({"op": "xhr.progress", "id": 3, "seen": 1.5}),
            json!({"op": "xhr.progress", "seen": 1}),
        ] {
            assert!(p(bad.clone()).is_err(), "{bad}");
        }
        assert_eq!(
            p(json!({"op": "xhr.abort", "id": 3})),
            Ok(GmRequest::XhrAbort { id: 3 })
        );
    }
}
