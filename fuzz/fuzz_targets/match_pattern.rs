//! Match patterns, globs and the rule model: any pattern against any URL, never a panic, and
//! every RegExp source the guard would carry parses as an ECMAScript regex; a pattern read as an
//! `@exclude` of a script decided on any URL.
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
    let _ = rules::server_form(url);
    // The pattern as an exclude glob of a script, decided on the URL as the guard would.
    let source = format!(
        "// ==UserScript==\n// @name F\n// @match *://*/*\n// @exclude {pattern}\n// ==/UserScript==\n"
    );
    if let Some(r) = lumo_userscripts::scripts::metadata::parse(&source)
        .metadata
        .as_ref()
        .and_then(rules::compile)
    {
        let _ = rules::verdict(&r, url);
    }
});
