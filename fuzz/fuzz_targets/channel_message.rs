//! A message on the userscript channel (any userscript can send anything): any text never
//! panics, what is accepted is bounded, and no token but the key's own proves a sender.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lumo_userscripts::channel::message::{
    self, Message, MAX_MESSAGE_BYTES, MAX_RUN_LOGS, MAX_RUN_LOG_CHARS, MAX_RUN_TEXT_CHARS,
};
use lumo_userscripts::channel::{decide, decide_hinted, rate::RateLimit, ChannelKey, Verdict};

const A: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";
const B: &str = "7c9e6679-7425-40de-944b-e07fc1f90ae7";

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data).into_owned();
    if let Ok(e) = message::parse(&text) {
        assert!(text.len() <= MAX_MESSAGE_BYTES);
        // A GM request is bounded by its own parser (fuzz target `gm_message`).
        if let Message::Late(l) = &e.message {
            assert!(l.error.message.chars().count() <= MAX_RUN_TEXT_CHARS + 1);
            assert!(l.error.column.is_none() || l.error.line.is_some());
        }
        if let Message::Run(r) = e.message {
            assert!(r.console.len() <= MAX_RUN_LOGS);
            let chars: usize = r.console.iter().map(|l| l.text.chars().count()).sum();
            assert!(chars <= MAX_RUN_LOG_CHARS);
            assert!(r.console.iter().all(|l| l.text.chars().count() <= MAX_RUN_TEXT_CHARS + 1));
            assert!(r.duration_ms.is_finite() && r.duration_ms >= 0.0);
            if let Some(err) = &r.error {
                assert!(err.column.is_none() || err.line.is_some());
            }
        }
    }
    let key = ChannelKey::from_uuids(A, B).unwrap();
    let mut limits = RateLimit::default();
    if let Verdict::Accept { from, .. } = decide(&mut limits, Some(&key), || Some(text.clone()), 1.0) {
        // Only a token this key made is accepted: the fuzzer cannot find a mac.
        assert!(text.contains(&key.token(&from.uuid, from.revision)));
    }
    // With the token read first (any prefix of the input as the hint): the same, and the
    // accepted message carries that very token.
    let hint: String = text.chars().take(120).collect();
    if let Verdict::Accept { from, .. } =
        decide_hinted(&mut limits, Some(&key), Some(&hint), || Some(text.clone()), 1.0)
    {
        assert_eq!(hint, key.token(&from.uuid, from.revision));
    }
});
