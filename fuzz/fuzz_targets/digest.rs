//! The argument digest: any value digests without a panic, and re-parsing the canonical text gives
//! the same digest (the canonical form is a fixed point).
#![no_main]
use libfuzzer_sys::fuzz_target;
use lumo_userscripts::guard::digest::{canonical_json, digest_hex};

fuzz_target!(|data: &[u8]| {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    let text = canonical_json(&v);
    let d = digest_hex(&v);
    if let Ok(again) = serde_json::from_str::<serde_json::Value>(&text) {
        if again == v {
            assert_eq!(digest_hex(&again), d);
        }
    }
});
