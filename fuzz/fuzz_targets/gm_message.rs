//! GM requests from a script's world: any text never panics; whatever parses stays within its
//! bounds; applying parsed value changes never panics and never leaves the store over a bound;
//! the xhr decision never lets a request through to a host no rule names.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lumo_userscripts::gm::message::{self, GmRequest, MAX_HEADERS, MAX_URL_BYTES};
use lumo_userscripts::gm::{connect, values, xhr};
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
                let host = platform().parse_url(&url).map(|u| u.host).unwrap_or_default();
                assert!(!rules.is_empty(), "sent with no @connect rule: {url}");
                assert!(connect::allows(&rules, &host, Some("page.test")));
            }
        }
        _ => {}
    }
});
