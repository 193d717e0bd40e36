//! L0: any message from any sender gets an answer, never a panic, and never authorizes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lumo_userscripts::policy::Policy;
use lumo_userscripts::probe::{answer, Capability};

fuzz_target!(|data: &[u8]| {
    let (sender, rest) = data.split_at(data.len().min(32));
    let sender = std::str::from_utf8(sender).ok();
    let Ok(msg) = serde_json::from_slice::<serde_json::Value>(rest) else { return };
    let mut policy = Policy::default();
    let (resp, _) = answer(&msg, sender, &mut policy, &Capability::ready(), 0.0);
    assert!(resp.get("ok").is_some());
    assert_ne!(resp["status"]["authorized"], serde_json::json!(true));
});
