//! The `==UserScript==` parser: any text parses to metadata or diagnostics, never a panic, and
//! metadata is present exactly when there is no error.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lumo_userscripts::scripts::metadata::{parse, Severity};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let parsed = parse(&text);
    let has_error = parsed.diagnostics.iter().any(|d| d.severity == Severity::Error);
    assert_eq!(parsed.metadata.is_some(), !has_error);
});
