//! The `==UserScript==` parser: any text parses to metadata or diagnostics, never a panic, and
//! metadata is present exactly when there is no error. The files it names are judged as a write
//! judges them, each URL also as a redirect's target: never a panic, and a hop is followed only
//! to where a metadata URL may point, never from elsewhere onto this computer.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lumo_userscripts::gm::assets;
use lumo_userscripts::gm::connect::is_loopback;
use lumo_userscripts::scripts::metadata::{parse, Severity};
use lumo_userscripts::web::platform;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let parsed = parse(&text);
    let has_error = parsed.diagnostics.iter().any(|d| d.severity == Severity::Error);
    assert_eq!(parsed.metadata.is_some(), !has_error);
    let Some(meta) = parsed.metadata else { return };
    let Ok(wanted) = assets::wanted(platform(), &meta.requires, &meta.resources) else { return };
    let hops = data.len() % (assets::MAX_REDIRECTS + 2);
    for w in &wanted {
        for (from, to) in [("https://cdn.test/a.js", &w.url), (w.fetch_url.as_str(), &w.url)] {
            if let Ok(next) = assets::follow(platform(), w, from, to, hops) {
                let u = platform().parse_url(&next).expect("a followed URL parses");
                assert!(assets::check_scheme(&u.scheme, &u.host).is_ok(), "{next}");
                let from_here = platform().parse_url(from).is_ok_and(|f| is_loopback(&f.host));
                assert!(from_here || !is_loopback(&u.host), "{from} -> {next}");
            }
        }
    }
});
