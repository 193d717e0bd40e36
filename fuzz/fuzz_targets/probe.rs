//! L0: any message from any sender gets an answer, never a panic, and never authorizes. The probe
//! module's wire (`answer_early_json`, the loader's input) takes any text to a reply or a deferral.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lumo_userscripts::policy::Policy;
use lumo_userscripts::probe::{answer, answer_early_json, parse_text, Capability, Reply};

fuzz_target!(|data: &[u8]| {
    let out: serde_json::Value = serde_json::from_str(&answer_early_json(&String::from_utf8_lossy(data))).unwrap();
    assert!(out.get("reply").is_some() != out.get("defer").is_some(), "{out}");

    let (sender, rest) = data.split_at(data.len().min(32));
    let sender = std::str::from_utf8(sender).ok();
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let reply = match parse_text(Some(text)) {
        Ok(req) => answer(&req, sender, &mut Policy::default(), &Capability::ready(), 0.0).0,
        Err(e) => Reply::Refused(e),
    };
    // The hand-written reply is JSON the host can read, whatever the probe held.
    let resp: serde_json::Value = serde_json::from_str(&reply.to_json()).unwrap();
    assert!(resp.get("ok").is_some());
    assert_ne!(resp["status"]["authorized"], serde_json::json!(true));
});
