//! Stored state that is stale or corrupt: whatever the policy, index, records, audit, rate
//! window and history keys hold, the provider reads around it without a panic.
#![no_main]
use futures::executor::block_on;
use libfuzzer_sys::fuzz_target;
use lumo_userscripts::env::memory::MemoryEnv;
use lumo_userscripts::env::Area;
use lumo_userscripts::guard::audit;
use lumo_userscripts::policy::Policy;
use lumo_userscripts::provider::Provider;
use lumo_userscripts::scripts::{history, store};

fn env_with(local: &serde_json::Map<String, serde_json::Value>) -> MemoryEnv {
    let env = MemoryEnv::new();
    env.areas.borrow_mut().insert(Area::Local, local.clone());
    env
}

fuzz_target!(|data: &[u8]| {
    let Ok(serde_json::Value::Object(items)) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    let _ = Policy::from_stored(items.get("policy"));
    let env = MemoryEnv::new();
    let mut local = items.clone();
    // One script's history under short names, so the fuzzer reaches it: its index ("h"), two
    // revisions ("r1", "r2") and the budget ("hb").
    const U: &str = "00000000-0000-4000-8000-000000000001";
    for (short, key) in [("h", history::history_key(U)), ("r1", history::revision_key(U, 1)), ("r2", history::revision_key(U, 2)), ("hb", history::BUDGET_KEY.to_owned())] {
        if let Some(v) = items.get(short) {
            local.insert(key, v.clone());
        }
    }
    let _ = history::orphans(&local);
    let loaded = block_on(history::load(&env_with(&local), U));
    if let Ok(h) = loaded {
        for r in h.revisions {
            // Replaced by a version that keeps none of its files: all of them weigh.
            let _ = block_on(history::items_for(&env_with(&local), r, &[]));
        }
    }
    let _ = block_on(history::keys_of(&env_with(&local), &[U.to_owned()]));
    env.areas.borrow_mut().insert(Area::Local, items.clone());
    env.areas.borrow_mut().insert(Area::Session, items);
    let _ = block_on(store::load_all(&env));
    let _ = block_on(audit::read_all(&env));
    let p = Provider::new(env);
    let host = lumo_userscripts::ids::ExtensionId::parse("mobcibglkcoacmddjpdoknlbbicjchlk").unwrap();
    let _ = block_on(p.writes_left(host.as_str()));
    let _ = block_on(p.admit_write(host.as_str()));
    let _ = block_on(audit::append(&p.env, &audit::Entry {
        at: 0.0, tool: "t".into(), caller: "c".into(), result: "ok".into(), target: None, digest: String::new(), unchanged: false, from_trash: false, revision: None, purged: None, name: None, count: None,
    }, &audit::Tail::default()));
    block_on(p.resume_interrupted_reviews());
    block_on(p.recover_interrupted_write());
});
