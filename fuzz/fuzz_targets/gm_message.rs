//! GM requests from a script's world: any text never panics; whatever parses stays within its
//! bounds; applying parsed value changes never panics and never leaves the store over a bound;
//! the xhr decision never lets a request, or a redirect of one, through to a host no rule names.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lumo_userscripts::env::HttpRequest;
use lumo_userscripts::gm::message::{self, GmRequest, MAX_HEADERS, MAX_URL_BYTES};
use lumo_userscripts::gm::{connect, menu, tabs, values, xhr};
use lumo_userscripts::web::platform;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (head, tail) = text.split_once('\n').unwrap_or((&text, ""));
    // The first line is a @connect value, the rest the message.
    let rules: Vec<connect::Rule> = connect::parse(platform(), head).into_iter().collect();
    let Ok(serde_json::Value::Object(o)) = serde_json::from_str::<serde_json::Value>(tail) else {
        return;
    };
    let mut store = values::Values::default();
    match message::parse(&o) {
        Ok(GmRequest::Values(op)) => {
            if store.apply(&op, values::MAX_TOTAL_BYTES / 2).is_ok() {
                assert!(store.bytes() <= values::MAX_SCRIPT_BYTES);
                assert!(store.keys().count() <= values::MAX_KEYS);
            }
        }
        Ok(GmRequest::Xhr(x)) => {
            assert!(x.url.len() <= MAX_URL_BYTES && x.headers.len() <= MAX_HEADERS);
            if let Ok(url) = xhr::decide(platform(), &x, &rules, Some("http://page.test/")) {
                let host = platform()
                    .parse_url(&url)
                    .map(|u| u.host)
                    .unwrap_or_default();
                assert!(!rules.is_empty(), "sent with no @connect rule: {url}");
                assert!(connect::allows(&rules, &host, Some("page.test")));
            }
            // The same URL as a redirect's target: followed only where a rule allows it too, as
            // fetch would carry the request on.
            let prev = HttpRequest {
                method: x.method.clone(),
                url: "http://page.test/a".into(),
                headers: x.headers.clone(),
                body: x.data.clone(),
                timeout_ms: 1,
                anonymous: false,
                browser_headers: Vec::new(),
            };
            let status = [301, 302, 303, 307, 308][data.len() % 5];
            if let Ok(next) = xhr::follow(
                platform(),
                &prev,
                status,
                &x.url,
                &rules,
                Some("http://page.test/"),
                0,
            ) {
                let u = platform()
                    .parse_url(&next.url)
                    .expect("a followed URL parses");
                assert!(u.scheme == "http" || u.scheme == "https");
                assert!(connect::allows(&rules, &u.host, Some("page.test")));
                if status == 303 {
                    assert!(next.method == "GET" || next.method == "HEAD");
                }
                if next.method != prev.method {
                    assert!(next.body.is_none());
                }
                if (u.scheme.as_str(), u.host.as_str(), u.port) != ("http", "page.test", None) {
                    assert!(!next
                        .headers
                        .iter()
                        .any(|(k, _)| k.eq_ignore_ascii_case("authorization")));
                }
            }
        }
        // Menu lists are bounded whatever was sent, and the model keeps them so.
        Ok(GmRequest::Menu(cs)) => {
            assert!(cs.len() <= menu::MAX_COMMANDS);
            for c in &cs {
                assert!(c.id.len() <= menu::MAX_ID_BYTES);
                assert!(c.caption.chars().count() <= menu::MAX_CAPTION_CHARS + 1);
                assert!(c.access_key.as_ref().is_none_or(|k| k.chars().count() == 1));
            }
            let mut m = menu::Menus::default();
            let place = menu::Place {
                tab: 1,
                frame: 0,
                document: Some("d".into()),
            };
            m.set("u", place, "https://page.test/", cs.clone());
            assert_eq!(m.for_tab(1).len(), usize::from(!cs.is_empty()));
        }
        // Only http(s) addresses pass the tab check, whatever the spelling.
        Ok(GmRequest::TabOpen(t)) => {
            if tabs::refuse_url(&t.url).is_none() {
                let l = t.url.to_ascii_lowercase();
                assert!(
                    l.starts_with("http://") || l.starts_with("https://"),
                    "{}",
                    t.url
                );
            }
        }
        Ok(GmRequest::Notify(n)) => {
            assert!(n.text.chars().count() <= tabs::MAX_TEXT_CHARS + 1);
            assert!(n.title.chars().count() <= tabs::MAX_TITLE_CHARS + 1);
            assert!(n
                .image
                .as_ref()
                .is_none_or(|i| i.len() <= tabs::MAX_IMAGE_BYTES));
        }
        _ => {}
    }
});
