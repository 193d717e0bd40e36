//! What a page hands back from `try_script` (the tried code shares the wrapper's world and can
//! forge it): any JSON never panics, and what comes out is bounded and positioned in the source.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lumo_userscripts::scripts::wrap::{self, MAX_LOGS, MAX_LOG_CHARS, MAX_TEXT_CHARS};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(v) = lumo_userscripts::text::parse_json(&text) else { return };
    let lines = (data.len() % 50) as u64;
    // With and without @require code before the source.
    let before = wrap::prelude_lines() as u64 + (data.len() % 7) as u64;
    if let Some(r) = wrap::parse_report(&v, "n", before, lines) {
        assert!(r.logs.len() <= MAX_LOGS);
        let chars: usize = r.logs.iter().map(|l| l.text.chars().count()).sum();
        assert!(chars <= MAX_LOG_CHARS);
        for l in &r.logs {
            assert!(l.text.chars().count() <= MAX_TEXT_CHARS + 1);
            assert!(l.line.is_none_or(|n| n >= 1 && n <= lines));
        }
        if let Some(e) = &r.error {
            assert!(e.line.is_none_or(|n| n >= 1 && n <= lines));
        }
        // What the try saw after the code returned (`watchMs`): as bounded and as positioned.
        if let Some(w) = &r.watched {
            assert!(w.errors.len() <= wrap::MAX_LATER);
            for l in &w.errors {
                assert!(l.thrown.line.is_none_or(|n| n >= 1 && n <= lines));
                assert!(l.thrown.message.chars().count() <= MAX_TEXT_CHARS + 1);
            }
        }
        let _ = r.to_json();
    }
});
