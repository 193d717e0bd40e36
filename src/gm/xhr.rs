//! Whether a script's `GM_xmlhttpRequest` may be sent, decided before anything leaves the
//! browser: an absolute `http(s)` URL whose host the script's `@connect` rules allow, given the
//! page it runs in as Chrome reports it (the sender's URL, never the message). The request is
//! then made by the service worker (`fetch`), which does not let the browser follow a redirect:
//! each hop is judged like the first ([`follow`]) before it is requested, so no redirect carries
//! the user's cookies, or reaches the user's network, where `@connect` does not allow.

use super::connect::{self, Rule};
use super::message::{ResponseType, XhrRequest};
use crate::env::{BrowserHeader, HeaderOp, HttpRequest};
use crate::text::ellipsize;
use crate::web::WebPlatform;
use serde_json::{json, Value};

/// Why a request is not sent; the script gets this text in its `onerror`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    BadUrl(String),
    Scheme(String),
    NotConnected {
        host: String,
    },
    /// A redirect to where the first request could not go: not requested. `connect`: because
    /// the script's `@connect` rules do not name where it leads.
    Redirected {
        to: String,
        why: String,
        connect: bool,
    },
    TooManyRedirects,
}

impl Refused {
    /// Whether the script's `@connect` rules refused it (the first URL's host, or a redirect's):
    /// what `GM_download` reports as Tampermonkey's `not_whitelisted`.
    pub fn by_connect(&self) -> bool {
        matches!(
            self,
            Refused::NotConnected { .. } | Refused::Redirected { connect: true, .. }
        )
    }
}

/// Redirects followed for one request at most, as `fetch` would.
pub const MAX_REDIRECTS: usize = 20;

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
            Refused::Redirected { to, why, .. } => write!(
                f,
                "GM_xmlhttpRequest: the server redirected the request to {to}, and {why}; \
                 the redirect was not followed"
            ),
            Refused::TooManyRedirects => write!(
                f,
                "GM_xmlhttpRequest: more than {MAX_REDIRECTS} redirects; the last was not followed"
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

/// The request a redirect leads to, if the script may make it: `location` judged as
/// [`decide`] judges the first URL, then fetch's rules for what a redirect carries on (a 303,
/// or a 301/302 of a POST, becomes a GET without body or body headers; `Authorization` does not
/// cross to another origin). `hops`: redirects followed so far.
pub fn follow(
    web: &dyn WebPlatform,
    prev: &HttpRequest,
    status: u16,
    location: &str,
    rules: &[Rule],
    page_url: Option<&str>,
    hops: usize,
) -> Result<HttpRequest, Refused> {
    if hops >= MAX_REDIRECTS {
        return Err(Refused::TooManyRedirects);
    }
    let shown = || ellipsize(location, 200);
    let to = web.parse_url(location).map_err(|_| Refused::Redirected {
        to: shown(),
        why: "that is not a URL it can request".into(),
        connect: false,
    })?;
    if to.scheme != "http" && to.scheme != "https" {
        return Err(Refused::Redirected {
            to: shown(),
            why: "only http and https URLs can be requested".into(),
            connect: false,
        });
    }
    // As for a `@require` (`assets::follow`): a server on the internet does not lead a request
    // onto this computer or into the local network, even to a host a rule names — the script
    // chose to send its body to that server, not to the device it points at.
    let from = web.parse_url(&prev.url).map(|f| f.host).unwrap_or_default();
    if let Some(way) = connect::inward(&from, &to.host) {
        let why = match way {
            connect::Inward::ThisComputer => {
                "a server elsewhere may not lead a request onto this computer"
            }
            connect::Inward::LocalNetwork => {
                "a server on the internet may not lead a request into your local network"
            }
        };
        return Err(Refused::Redirected {
            to: ellipsize(&to.href, 200),
            why: why.into(),
            connect: false,
        });
    }
    let page_host = page_url.and_then(|p| web.parse_url(p).ok()).map(|p| p.host);
    if !connect::allows(rules, &to.host, page_host.as_deref()) {
        return Err(Refused::Redirected {
            to: ellipsize(&to.href, 200),
            why: format!(
                "{} is not in this script's @connect list",
                ellipsize(&to.host, 200)
            ),
            connect: true,
        });
    }
    let mut next = prev.clone();
    let to_get = (status == 303 && prev.method != "GET" && prev.method != "HEAD")
        || (matches!(status, 301 | 302) && prev.method == "POST");
    if to_get {
        next.method = "GET".into();
        next.body = None;
        next.headers.retain(|(k, _)| {
            ![
                "content-type",
                "content-encoding",
                "content-language",
                "content-location",
            ]
            .iter()
            .any(|h| k.eq_ignore_ascii_case(h))
        });
        // A GET carries no Origin of the worker's: nothing to remove, no rule to pay for.
        next.browser_headers.retain(|h| h.op != HeaderOp::Remove);
    }
    let origin = |u: &crate::web::ParsedUrl| (u.scheme.clone(), u.host.clone(), u.port);
    let same_origin = web
        .parse_url(&prev.url)
        .is_ok_and(|p| origin(&p) == origin(&to));
    if !same_origin {
        next.headers
            .retain(|(k, _)| !k.eq_ignore_ascii_case("authorization"));
        // The script's own cookie was for the host it asked, as `Authorization` is.
        next.browser_headers
            .retain(|h| !h.name.eq_ignore_ascii_case("cookie"));
    }
    next.url = to.href;
    Ok(next)
}

/// The headers a script sets that `fetch` would drop without a word and that real scripts
/// need sent: `Referer` (an image host that answers 403 without its site's, as pixiv's does),
/// `Cookie`, `User-Agent`, and `Origin`. Violentmonkey and Tampermonkey have the browser set
/// them; so does this provider (`env::BrowserHeader`, a `declarativeNetRequest` rule for the
/// one request). The rest of fetch's forbidden list (`Host`, `Sec-*`…) is not sent, and the page
/// says so.
pub const BROWSER_SET: [&str; 4] = ["referer", "cookie", "user-agent", "origin"];

/// A request's headers split into those `fetch` sends and those the browser is to set
/// ([`BROWSER_SET`], the last of each name given). A script's `Cookie` is added to the site's
/// own cookies, unless the request is `anonymous` (then it is the only one), as
/// Violentmonkey adds it. A request of any `method` but GET and HEAD without the script's own
/// `Origin` is sent without the one the browser gives the worker's: `chrome-extension://<id>`
/// would tell every server the script posts to that this extension is installed, and make
/// frameworks that check `Origin` (Rails, Django) refuse a same-site form post
/// (Violentmonkey removes it too).
pub fn split_headers(
    headers: Vec<(String, String)>,
    anonymous: bool,
    method: &str,
) -> (Vec<(String, String)>, Vec<BrowserHeader>) {
    let mut sent = Vec::with_capacity(headers.len());
    let mut browser: Vec<BrowserHeader> = Vec::new();
    for (name, value) in headers {
        let lower = name.to_ascii_lowercase();
        if !BROWSER_SET.contains(&lower.as_str()) {
            sent.push((name, value));
            continue;
        }
        browser.retain(|h| !h.name.eq_ignore_ascii_case(&lower));
        browser.push(BrowserHeader {
            op: if lower == "cookie" && !anonymous {
                HeaderOp::Append
            } else {
                HeaderOp::Set
            },
            name: lower,
            value,
        });
    }
    let bodiless = method.eq_ignore_ascii_case("GET") || method.eq_ignore_ascii_case("HEAD");
    if !bodiless && !browser.iter().any(|h| h.name == "origin") {
        browser.push(BrowserHeader {
            name: "origin".to_owned(),
            value: String::new(),
            op: HeaderOp::Remove,
        });
    }
    (sent, browser)
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
/// The body is consumed: valid UTF-8 becomes the text without a copy, and the bytes are freed
/// once the base64 is made, so the wasm holds one answer's body once, plus its base64 at most.
pub fn response_json(r: crate::env::HttpResponse, ty: ResponseType) -> Value {
    let mut out = head_json(&r);
    let charset = match ty {
        ResponseType::Text | ResponseType::Json => super::charset::other_charset(&r.headers),
        ResponseType::ArrayBuffer | ResponseType::Blob => None,
    };
    if let (Some(c), Some(o)) = (charset, out.as_object_mut()) {
        o.insert("charset".to_owned(), Value::String(c));
        o.insert("base64".to_owned(), Value::String(base64(&r.body)));
        return out;
    }
    let body = match ty {
        ResponseType::Text | ResponseType::Json => (
            "text",
            Value::String(
                String::from_utf8(r.body)
                    .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
            ),
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

/// What the page's `readyState` 2 carries: the answer's status, final URL and headers (as
/// `responseHeaders` text), without its body.
pub fn head_json(r: &crate::env::HttpResponse) -> Value {
    let headers: String = r
        .headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    json!({
        "status": r.status,
        "statusText": r.status_text,
        "finalUrl": r.final_url,
        "responseHeaders": headers,
    })
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
            location: None,
        };
        let v = response_json(r.clone(), ResponseType::Text);
        assert_eq!(v["responseHeaders"], "a: 1\r\nb: 2\r\n");
        assert_eq!(v["text"], "hi\u{fffd}");
        assert_eq!(response_json(r, ResponseType::Blob)["base64"], "aGn/");
    }

    /// A GBK page (NGA, hi-pda: scripts read its `responseText`) comes as its bytes with its
    /// label, for the page to decode; UTF-8, no charset, or a label no decoder knows, as text.
    #[test]
    fn a_text_answer_in_another_charset_goes_as_bytes_with_its_label() {
        let with = |ct: &str| crate::env::HttpResponse {
            status: 200,
            status_text: "OK".into(),
            final_url: "http://a.test/x".into(),
            headers: vec![("Content-Type".into(), ct.into())],
            body: vec![0xd6, 0xd0, 0xce, 0xc4],
            location: None,
        };
        for (ct, charset) in [
            ("text/html; charset=GBK", "GBK"),
            ("text/html;charset=\"shift_jis\"", "shift_jis"),
            (
                "application/json; q=1; Charset = windows-1251",
                "windows-1251",
            ),
        ] {
            for ty in [ResponseType::Text, ResponseType::Json] {
                let v = response_json(with(ct), ty);
                assert_eq!(v["charset"], charset, "{ct}");
                assert_eq!(v["base64"], "1tDOxA==", "{ct}");
                assert!(v.get("text").is_none(), "{ct}");
            }
            let v = response_json(with(ct), ResponseType::ArrayBuffer);
            assert!(v.get("charset").is_none() && v["base64"] == "1tDOxA==");
        }
        for ct in [
            "text/html",
            "text/html; charset=UTF-8",
            "text/plain; charset=utf8",
            "text/html; charset=\"",
            "text/html; charset=a b",
            &format!("text/html; charset={}", "x".repeat(41)),
        ] {
            let v = response_json(with(ct), ResponseType::Text);
            assert!(
                v.get("charset").is_none() && v["text"].is_string(),
                "{ct}: {v}"
            );
        }
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
        assert!(e.by_connect());
        assert!(!Refused::Scheme("file".into()).by_connect());
        assert!(!Refused::BadUrl("x".into()).by_connect());
        assert!(!Refused::TooManyRedirects.by_connect());
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

    fn sent(method: &str, url: &str) -> HttpRequest {
        HttpRequest {
            method: method.into(),
            url: url.into(),
            headers: vec![
                ("Content-Type".into(), "text/plain".into()),
                ("authorization".into(), "Bearer t".into()),
                ("X-Script".into(), "1".into()),
            ],
            body: Some(crate::gm::message::Body::Text("b".into())),
            timeout_ms: 1000,
            anonymous: false,
            browser_headers: vec![
                BrowserHeader {
                    name: "Referer".into(),
                    value: "https://a.test/".into(),
                    op: HeaderOp::Set,
                },
                BrowserHeader {
                    name: "Cookie".into(),
                    value: "a=1".into(),
                    op: HeaderOp::Append,
                },
            ],
        }
    }

    #[test]
    fn a_redirect_is_judged_like_the_first_request_before_it_is_followed() {
        let w = platform();
        let r = rules(&["api.test", "self"]);
        let page = Some("http://page.test/");
        let get = sent("GET", "http://api.test/a");
        // Where @connect allows: the next request, same method and headers on the same origin.
        let n = follow(w, &get, 302, "http://api.test/b?c", &r, page, 0).unwrap();
        assert_eq!(
            (n.method.as_str(), n.url.as_str()),
            ("GET", "http://api.test/b?c")
        );
        assert_eq!(n.headers, get.headers);
        assert!(follow(w, &get, 301, "https://page.test/x", &r, page, 0).is_ok());
        // Anywhere else it is refused, naming where it led; nothing there is requested.
        for (to, why) in [
            (
                "http://bank.test/transfer",
                "bank.test is not in this script's @connect list",
            ),
            (
                "http://192.168.1.1/reset",
                "may not lead a request into your local network",
            ),
            ("http://api.test@evil.test/", "evil.test is not in"),
            ("file:///etc/passwd", "only http and https"),
            ("data:text/html,x", "only http and https"),
            ("not a url", "not a URL"),
        ] {
            let e = follow(w, &get, 302, to, &r, page, 0).unwrap_err();
            let text = e.to_string();
            assert!(matches!(e, Refused::Redirected { .. }), "{to}");
            // Only the `@connect` list's refusals are said to be its (GM_download's
            // `not_whitelisted`).
            assert_eq!(
                e.by_connect(),
                why.ends_with("@connect list") || why == "evil.test is not in",
                "{to}"
            );
            assert!(
                text.contains(why) && text.contains("not followed"),
                "{to}: {text}"
            );
        }
        // Self is the page's host: without a page, nothing.
        assert!(follow(w, &get, 302, "http://page.test/", &r, None, 0).is_err());
        // The hop bound.
        assert!(follow(
            w,
            &get,
            302,
            "http://api.test/b",
            &r,
            page,
            MAX_REDIRECTS - 1
        )
        .is_ok());
        assert_eq!(
            follow(w, &get, 302, "http://api.test/b", &r, page, MAX_REDIRECTS),
            Err(Refused::TooManyRedirects)
        );
    }

    /// `@connect *` is the internet: a request to the router is refused, and so is a public
    /// server's redirect there (a POST led to `apply.cgi` with the user's cookies), even where
    /// a rule names the device; a hop within the local network, or a request the script itself
    /// sends to a device it names, is the script's own.
    #[test]
    fn a_server_on_the_internet_cannot_lead_a_request_into_the_local_network() {
        let w = platform();
        let page = Some("https://site.example/");
        for target in [
            "http://192.168.1.1/",
            "http://10.0.0.8/",
            "http://router/",
            "http://nas.local/",
            "http://[fe80::1]/",
            "http://3232235777/", // 192.168.1.1, spelled as a number
            "http://nas.home/",
            "http://wiki.corp/",
            "http://[::192.168.1.1]/",
            "http://[64:ff9b::192.168.1.1]/",
        ] {
            assert!(
                decide(w, &req(target), &rules(&["*"]), page).is_err(),
                "* must not reach {target}"
            );
        }
        assert!(decide(w, &req("http://8.8.8.8/"), &rules(&["*"]), page).is_ok());
        let post = sent("POST", "https://api.public.example/submit");
        for r in [rules(&["*"]), rules(&["*", "192.168.1.1", "localhost"])] {
            for to in [
                "http://192.168.1.1/apply.cgi?dns=6.6.6.6",
                "http://router.home/apply.cgi",
                "http://[2002:c0a8:101::1]/apply.cgi",
                "http://127.0.0.1:9200/",
                "http://localhost/",
            ] {
                let e = follow(w, &post, 307, to, &r, page, 0).unwrap_err();
                assert!(
                    matches!(e, Refused::Redirected { .. })
                        && e.to_string().contains("may not lead"),
                    "{to}: {e}"
                );
            }
        }
        let named = rules(&["192.168.1.1", "192.168.1.2"]);
        assert!(decide(w, &req("http://192.168.1.1/"), &named, page).is_ok());
        let inside = sent("GET", "http://192.168.1.1/a");
        assert!(follow(w, &inside, 302, "http://192.168.1.2/b", &named, page, 0).is_ok());
    }

    #[test]
    fn a_redirect_carries_on_what_fetch_would() {
        let w = platform();
        let r = rules(&["*"]);
        let post = sent("POST", "http://api.test/a");
        let names = |n: &HttpRequest| {
            n.headers
                .iter()
                .map(|(k, _)| k.to_ascii_lowercase())
                .collect::<Vec<_>>()
        };
        // 307/308 keep the method and the body.
        for status in [307, 308] {
            let n = follow(w, &post, status, "http://api.test/b", &r, None, 0).unwrap();
            assert_eq!((n.method.as_str(), n.body.is_some()), ("POST", true));
            assert_eq!(names(&n), ["content-type", "authorization", "x-script"]);
        }
        // A POST's 301/302 and any 303 become a GET without the body and its headers.
        for (m, status) in [
            ("POST", 301),
            ("POST", 302),
            ("POST", 303),
            ("PUT", 303),
            ("DELETE", 303),
        ] {
            // With the worker's Origin to remove, as `split_headers` gives a POST: a GET has
            // none, so the redirect drops that (and keeps the script's own headers).
            let mut before = sent(m, "http://api.test/a");
            before.browser_headers.push(BrowserHeader {
                name: "origin".into(),
                value: String::new(),
                op: HeaderOp::Remove,
            });
            let n = follow(w, &before, status, "http://api.test/b", &r, None, 0).unwrap();
            assert_eq!(
                (n.method.as_str(), n.body.is_none()),
                ("GET", true),
                "{m} {status}"
            );
            assert_eq!(names(&n), ["authorization", "x-script"]);
            assert_eq!(
                n.browser_headers,
                sent(m, "").browser_headers,
                "{m} {status}"
            );
        }
        // Other methods keep theirs on a 301/302; a HEAD stays a HEAD on a 303.
        assert_eq!(
            follow(
                w,
                &sent("PUT", "http://api.test/a"),
                302,
                "http://api.test/b",
                &r,
                None,
                0
            )
            .unwrap()
            .method,
            "PUT"
        );
        assert_eq!(
            follow(
                w,
                &sent("HEAD", "http://api.test/a"),
                303,
                "http://api.test/b",
                &r,
                None,
                0
            )
            .unwrap()
            .method,
            "HEAD"
        );
        // Authorization stays on the origin: another host, scheme or port drops it.
        for to in [
            "http://other.test/b",
            "https://api.test/b",
            "http://api.test:8080/b",
        ] {
            let n = follow(w, &post, 307, to, &r, None, 0).unwrap();
            assert_eq!(names(&n), ["content-type", "x-script"], "{to}");
            // So does the script's own Cookie; its Referer goes on, as a browser's would.
            let b: Vec<&str> = n.browser_headers.iter().map(|h| h.name.as_str()).collect();
            assert_eq!(b, ["Referer"], "{to}");
        }
        let n = follow(w, &post, 307, "http://api.test/b", &r, None, 0).unwrap();
        assert_eq!(n.browser_headers, post.browser_headers);
    }

    /// A script's Referer, Cookie, User-Agent and Origin go to the browser (any case, the last of
    /// each name); its Cookie is added to the site's unless the request is anonymous.
    #[test]
    fn headers_fetch_drops_are_given_to_the_browser() {
        let h = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter().map(|(a, b)| ((*a).into(), (*b).into())).collect()
        };
        let given = h(&[
            ("X-A", "1"),
            ("referer", "https://old.test/"),
            ("Cookie", "a=1"),
            ("User-Agent", "Script/1.0"),
            ("REFERER", "https://www.pixiv.test/"),
            ("Origin", "https://o.test"),
        ]);
        let (sent, browser) = split_headers(given.clone(), false, "POST");
        assert_eq!(sent, h(&[("X-A", "1")]));
        let got: Vec<(&str, &str, HeaderOp)> = browser
            .iter()
            .map(|b| (b.name.as_str(), b.value.as_str(), b.op))
            .collect();
        assert_eq!(
            got,
            [
                ("cookie", "a=1", HeaderOp::Append),
                ("user-agent", "Script/1.0", HeaderOp::Set),
                ("referer", "https://www.pixiv.test/", HeaderOp::Set),
                ("origin", "https://o.test", HeaderOp::Set),
            ]
        );
        let (_, browser) = split_headers(given, true, "POST");
        assert!(browser.iter().all(|b| b.op == HeaderOp::Set));
        assert_eq!(split_headers(h(&[("X", "1")]), false, "GET").1, []);
        assert_eq!(split_headers(h(&[("X", "1")]), false, "head").1, []);
    }

    /// A tester's same-site form post carried `Origin: chrome-extension://<id>`: the browser's
    /// Origin is removed from every request with a body, unless the script gave its own.
    #[test]
    fn the_workers_origin_is_not_sent() {
        for method in ["POST", "put", "DELETE", "PROPFIND"] {
            let (_, browser) = split_headers(Vec::new(), false, method);
            assert_eq!(
                browser,
                [BrowserHeader {
                    name: "origin".into(),
                    value: String::new(),
                    op: HeaderOp::Remove
                }],
                "{method}"
            );
        }
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
