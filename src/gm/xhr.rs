//! Whether a script's `GM_xmlhttpRequest` may be sent, decided before anything leaves the
//! browser: an absolute `http(s)` URL whose host the script's `@connect` rules allow, given the
//! page it runs in as Chrome reports it (the sender's URL, never the message). The request is
//! then made by the service worker (`fetch`, following redirects); a response whose final URL
//! left the allowed hosts is withheld from the script (see [`final_allowed`]).

use super::connect::{self, Rule};
use super::message::{ResponseType, XhrRequest};
use crate::text::ellipsize;
use crate::web::WebPlatform;
use serde_json::{json, Value};

/// Why a request is not sent; the script gets this text in its `onerror`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    BadUrl(String),
    Scheme(String),
    NotConnected { host: String },
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::BadUrl(u) => write!(f, "GM_xmlhttpRequest: {u:?} is not an absolute URL"),
            Refused::Scheme(s) => write!(
                f,
                "GM_xmlhttpRequest: only http and https URLs can be requested, not {s}:"
            ),
            Refused::NotConnected { host } => write!(
                f,
                "GM_xmlhttpRequest refused: {host} is not in this script's @connect list \
                 (add \"// @connect {host}\" to its metadata); the request was not sent"
            ),
        }
    }
}

/// The URL to fetch, or why not.
pub fn decide(
    web: &dyn WebPlatform,
    req: &XhrRequest,
    rules: &[Rule],
    page_url: Option<&str>,
) -> Result<String, Refused> {
    let url = web
        .parse_url(&req.url)
        .map_err(|_| Refused::BadUrl(ellipsize(&req.url, 200)))?;
    if url.scheme != "http" && url.scheme != "https" {
        return Err(Refused::Scheme(ellipsize(&url.scheme, 20)));
    }
    let page_host = page_url.and_then(|p| web.parse_url(p).ok()).map(|p| p.host);
    if !connect::allows(rules, &url.host, page_host.as_deref()) {
        return Err(Refused::NotConnected {
            host: ellipsize(&url.host, 200),
        });
    }
    Ok(url.href)
}

/// Whether the response's final URL (after redirects) is still one the script may read.
pub fn final_allowed(
    web: &dyn WebPlatform,
    final_url: &str,
    rules: &[Rule],
    page_url: Option<&str>,
) -> bool {
    let page_host = page_url.and_then(|p| web.parse_url(p).ok()).map(|p| p.host);
    web.parse_url(final_url).is_ok_and(|u| {
        (u.scheme == "http" || u.scheme == "https")
            && connect::allows(rules, &u.host, page_host.as_deref())
    })
}

/// Largest response body handed to a script.
pub const MAX_RESPONSE_BYTES: usize = 5 * 1024 * 1024;

/// The answer a script's `GM_xmlhttpRequest` gets: the fields scripts read; the body as text
/// (`text`, `json`: UTF-8, invalid sequences replaced) or base64 (`arraybuffer`, `blob`).
pub fn response_json(r: &crate::env::HttpResponse, ty: ResponseType) -> Value {
    let headers: String = r
        .headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let mut out = json!({
        "status": r.status,
        "statusText": r.status_text,
        "finalUrl": r.final_url,
        "responseHeaders": headers,
    });
    let body = match ty {
        ResponseType::Text | ResponseType::Json => (
            "text",
            Value::String(String::from_utf8_lossy(&r.body).into_owned()),
        ),
        ResponseType::ArrayBuffer | ResponseType::Blob => {
            ("base64", Value::String(base64(&r.body)))
        }
    };
    if let Some(o) = out.as_object_mut() {
        o.insert(body.0.to_owned(), body.1);
    }
    out
}

/// Standard base64 with padding.
pub fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let sym = |i: u32| char::from(A.get((i & 63) as usize).copied().unwrap_or(b'='));
    let mut out = String::with_capacity(bytes.len().saturating_add(2) / 3 * 4);
    for chunk in bytes.chunks(3) {
        let b = |i: usize| u32::from(chunk.get(i).copied().unwrap_or(0));
        let n = (b(0) << 16) | (b(1) << 8) | b(2);
        out.push(sym(n >> 18));
        out.push(sym(n >> 12));
        out.push(if chunk.len() > 1 { sym(n >> 6) } else { '=' });
        out.push(if chunk.len() > 2 { sym(n) } else { '=' });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gm::message::MAX_TIMEOUT_MS;

    #[test]
    fn base64_and_response_fields() {
        for (raw, want) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(raw.as_bytes()), want);
        }
        assert_eq!(base64(&[0xff, 0xfe, 0x00]), "//4A");
        let r = crate::env::HttpResponse {
            status: 201,
            status_text: "Created".into(),
            final_url: "http://a.test/x".into(),
            headers: vec![("a".into(), "1".into()), ("b".into(), "2".into())],
            body: b"hi\xff".to_vec(),
        };
        let v = response_json(&r, ResponseType::Text);
        assert_eq!(v["responseHeaders"], "a: 1\r\nb: 2\r\n");
        assert_eq!(v["text"], "hi\u{fffd}");
        assert_eq!(response_json(&r, ResponseType::Blob)["base64"], "aGn/");
    }
    use crate::web::platform;

    fn req(url: &str) -> XhrRequest {
        XhrRequest {
            id: 1,
            method: "GET".into(),
            url: url.into(),
            headers: vec![],
            data: None,
            content_type: None,
            response_type: ResponseType::Text,
            timeout_ms: MAX_TIMEOUT_MS,
            anonymous: false,
        }
    }

    fn rules(v: &[&str]) -> Vec<Rule> {
        v.iter()
            .map(|r| connect::parse(platform(), r).unwrap())
            .collect()
    }

    #[test]
    fn declared_hosts_and_self_only() {
        let w = platform();
        let r = rules(&["api.test", "self"]);
        let page = Some("http://page.test:8080/a");
        assert_eq!(
            decide(w, &req("http://api.test:9/x?y"), &r, page),
            Ok("http://api.test:9/x?y".into())
        );
        assert!(decide(w, &req("https://v2.api.test/"), &r, page).is_ok());
        assert!(decide(w, &req("http://page.test:1234/"), &r, page).is_ok());
        let e = decide(w, &req("http://other.test/"), &r, page).unwrap_err();
        assert_eq!(
            e,
            Refused::NotConnected {
                host: "other.test".into()
            }
        );
        assert!(e.to_string().contains("@connect other.test"));
        // Without a known page, self allows nothing.
        assert!(decide(w, &req("http://page.test/"), &r, None).is_err());
        // No @connect at all: nothing.
        assert!(decide(w, &req("http://api.test/"), &[], page).is_err());
    }

    #[test]
    fn only_absolute_http_urls() {
        let w = platform();
        let r = rules(&["*"]);
        assert!(matches!(
            decide(w, &req("/relative"), &r, None),
            Err(Refused::BadUrl(_))
        ));
        for u in [
            "file:///etc/passwd",
            "chrome://settings",
            "data:text/plain,x",
            "javascript:1",
            "ftp://a.test/",
        ] {
            assert!(
                matches!(decide(w, &req(u), &r, None), Err(Refused::Scheme(_))),
                "{u}"
            );
        }
        // Userinfo and odd spellings are read as the URL parser reads them.
        assert!(decide(
            w,
            &req("http://api.test@evil.test/"),
            &rules(&["api.test"]),
            None
        )
        .is_err());
        assert!(decide(w, &req("http://API.TEST./"), &rules(&["api.test"]), None).is_err());
    }

    #[test]
    fn a_redirect_off_the_list_is_withheld() {
        let w = platform();
        let r = rules(&["api.test"]);
        assert!(final_allowed(w, "https://api.test/after", &r, None));
        assert!(!final_allowed(w, "https://elsewhere.test/", &r, None));
        assert!(!final_allowed(w, "not a url", &r, None));
    }
}
