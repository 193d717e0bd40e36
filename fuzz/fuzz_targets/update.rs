//! Script updates read what a hostile update server sends: any text reads to a header or an
//! error and is judged without a panic, and two versions compare the same both ways round
//! (reflexive, antisymmetric), so "newer" never depends on which one is asked about first.
//! Not transitive across pre-release parts that mix numbers and text (`26` < `2l` < `6` < `26`),
//! as Violentmonkey's `compareVersion` is not: an update compares two versions only.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lumo_userscripts::scripts::update::{self, compare_versions, Verdict};
use lumo_userscripts::web::platform;
use std::cmp::Ordering;

const URL: &str = "https://updates.test/s.meta.js";

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = update::has_code(&text);
    // Three versions out of the input, split at NULs.
    let mut parts = text.splitn(3, '\0');
    let a = parts.next().unwrap_or("");
    let b = parts.next().unwrap_or("");
    let c = parts.next().unwrap_or("");
    for v in [a, b, c] {
        assert_eq!(compare_versions(v, v), Ordering::Equal, "{v:?}");
    }
    for (x, y) in [(a, b), (b, c), (a, c)] {
        assert_eq!(compare_versions(x, y), compare_versions(y, x).reverse(), "{x:?} {y:?}");
    }
    if let Ok(m) = update::read_header(URL, &text) {
        let _ = update::urls(platform(), &m);
        match update::judge(URL, &m, &m) {
            Ok(v) => assert_eq!(v, Verdict::Same),
            Err(_) => assert!(m.version.is_none()),
        }
    }
});
