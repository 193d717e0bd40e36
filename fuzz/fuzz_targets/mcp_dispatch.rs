//! L1: a sequence of arbitrary messages on one authorized port: every request gets at most one
//! reply with its id echoed, and nothing panics.
#![no_main]
use futures::executor::block_on;
use libfuzzer_sys::fuzz_target;
use lumo_userscripts::control;
use lumo_userscripts::env::memory::MemoryEnv;
use lumo_userscripts::ids::ExtensionId;
use lumo_userscripts::provider::Provider;
use lumo_userscripts::session::Step;

const HOST: &str = "mobcibglkcoacmddjpdoknlbbicjchlk";

fuzz_target!(|data: &[u8]| {
    let p = Provider::new(MemoryEnv::new());
    block_on(control::handle(&p, &serde_json::json!({"op": "policy.add", "id": HOST})));
    let host = ExtensionId::parse(HOST).unwrap();
    let s = p.open_session(host.clone());
    let policy = block_on(p.policy());
    s.authorize(policy.access(Some(&host)));
    // Messages are separated by NUL bytes; each is fed as text, as the shell does.
    for chunk in data.split(|b| *b == 0).take(32) {
        let text = String::from_utf8_lossy(chunk);
        if let Step::Dispatch(v) = s.inbound(Some(&text)) {
            let _ = block_on(p.handle_mcp(&s, &v));
        }
    }
});
