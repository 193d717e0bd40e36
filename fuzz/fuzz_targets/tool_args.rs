//! Tool arguments: any JSON object as the arguments of any tool, on an initialized session with
//! a script stored, gives a result (success or isError), never a panic.
#![no_main]
use futures::executor::block_on;
use libfuzzer_sys::fuzz_target;
use lumo_userscripts::control;
use lumo_userscripts::env::memory::MemoryEnv;
use lumo_userscripts::ids::ExtensionId;
use lumo_userscripts::provider::Provider;
use lumo_userscripts::tools::catalog::TOOLS;
use serde_json::json;

const HOST: &str = "mobcibglkcoacmddjpdoknlbbicjchlk";

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else { return };
    let Ok(args) = serde_json::from_slice::<serde_json::Value>(rest) else { return };
    let tool = &TOOLS[usize::from(which) % TOOLS.len()];
    let p = Provider::new(MemoryEnv::new());
    block_on(control::handle(&p, &json!({"op": "policy.add", "id": HOST})));
    let host = ExtensionId::parse(HOST).unwrap();
    let s = p.open_session(host.clone());
    s.authorize(block_on(p.policy()).access(Some(&host)));
    s.mark_initialized("2025-06-18");
    let seed = "// ==UserScript==\n// @name Seed\n// @match https://example.com/*\n// ==/UserScript==\n";
    let create = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "write_script", "arguments": {"source": seed}}});
    let _ = block_on(p.handle_mcp(&s, &create));
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool.name, "arguments": args}});
    let _ = block_on(p.handle_mcp(&s, &call));
});
