//! Match patterns, globs and the rule model: any pattern against any URL, never a panic, and
//! every RegExp source the guard would carry parses as an ECMAScript regex.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lumo_userscripts::scripts::{glob, match_pattern, rules};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (pattern, url) = text.split_once('\n').unwrap_or((&text, "https://example.com/"));
    if let Ok(p) = match_pattern::parse(pattern) {
        let _ = p.matches(url);
        let re = p.js_regex(Some(rules::TLD_REGEX));
        assert!(regress::Regex::new(&re).is_ok(), "{re}");
    }
    let _ = glob::glob_matches(pattern, url);
    assert!(regress::Regex::new(&rules::glob_regex(pattern, rules::TLD_REGEX_EXCLUDE)).is_ok());
    let _ = rules::check_regex(pattern);
    let _ = rules::normalize_url(url);
});
