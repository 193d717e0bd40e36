//! Whether a script's `GM_xmlhttpRequest` may be sent, decided before anything leaves the
//! browser: an absolute `http(s)` URL whose host the script's `@connect` rules allow, given the
//! page it runs in as Chrome reports it (the sender's URL, never the message). The request is
//! then made by the service worker (`fetch`, following redirects); a response whose final URL
//! left the allowed hosts is withheld from the script (see [`final_allowed`]).

use super::connect::{self, Rule};
use super::message::XhrRequest;
use crate::text::ellipsize;
use crate::web::WebPlatform;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gm::message::{ResponseType, MAX_TIMEOUT_MS};
    use crate::web::platform;

    fn req(url: &str) -> XhrRequest {
        XhrRequest {
            id: 1,
            method: "GET".into(),
            url: url.into(),
            headers: vec![],
            data: None,
            binary: false,
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
