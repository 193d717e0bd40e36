//! Stored state that is stale or corrupt: whatever the policy, index, records, audit and rate
//! window keys hold, the provider reads around it without a panic.
#![no_main]
use futures::executor::block_on;
use libfuzzer_sys::fuzz_target;
use lumo_userscripts::env::memory::MemoryEnv;
use lumo_userscripts::env::Area;
use lumo_userscripts::guard::audit;
use lumo_userscripts::policy::Policy;
use lumo_userscripts::provider::Provider;
use lumo_userscripts::scripts::store;

fuzz_target!(|data: &[u8]| {
    let Ok(serde_json::Value::Object(items)) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    let _ = Policy::from_stored(items.get("policy"));
    let env = MemoryEnv::new();
    env.areas.borrow_mut().insert(Area::Local, items.clone());
    env.areas.borrow_mut().insert(Area::Session, items);
    let _ = block_on(store::load_all(&env));
    let _ = block_on(audit::read_all(&env));
    let p = Provider::new(env);
    let host = lumo_userscripts::ids::ExtensionId::parse("mobcibglkcoacmddjpdoknlbbicjchlk").unwrap();
    let _ = block_on(p.writes_left(host.as_str()));
    let _ = block_on(p.admit_write(host.as_str()));
    let _ = block_on(audit::append(&p.env, &audit::Entry {
        at: 0.0, tool: "t".into(), caller: "c".into(), result: "ok".into(), target: None, digest: String::new(),
    }, &audit::Tail::default()));
    block_on(p.resume_interrupted_reviews());
    block_on(p.recover_interrupted_write());
});
