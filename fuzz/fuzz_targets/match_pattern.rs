//! Match patterns and globs: any pattern against any URL, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lumo_userscripts::scripts::{glob, match_pattern};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (pattern, url) = text.split_once('\n').unwrap_or((&text, "https://example.com/"));
    if let Ok(p) = match_pattern::parse(pattern) {
        let _ = p.matches(url);
    }
    let _ = glob::glob_matches(pattern, url);
});
