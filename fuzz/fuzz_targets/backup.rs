//! A backup file is hostile input: any text parses to an error or to items within the bounds,
//! its confirmation (the first call) writes nothing, and restoring it into a provider with one
//! script either stores every item or changes no script (never half an import), without a
//! panic.
#![no_main]
use futures::executor::block_on;
use libfuzzer_sys::fuzz_target;
use lumo_userscripts::control;
use lumo_userscripts::env::memory::MemoryEnv;
use lumo_userscripts::env::Area;
use lumo_userscripts::provider::Provider;
use lumo_userscripts::scripts::{backup, store};
use serde_json::json;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(items) = backup::parse(&text) else { return };
    assert!(items.len() <= store::MAX_SCRIPTS);
    let p = Provider::new(MemoryEnv::new());
    let kept = "// ==UserScript==\n// @name Kept\n// @match https://a.test/*\n// ==/UserScript==\n";
    block_on(control::handle(&p, &json!({"op": "scripts.save", "source": kept})));
    let scripts = |p: &Provider<MemoryEnv>| -> Vec<(String, serde_json::Value)> {
        p.env.dump(Area::Local).into_iter().filter(|(k, _)| k.starts_with("script/") || k.starts_with("source/") || k.starts_with("values/")).collect()
    };
    let before = scripts(&p);
    let shown = block_on(control::handle(&p, &json!({"op": "backup.restore", "text": text}))).value;
    assert_eq!(before, scripts(&p), "the confirmation wrote something: {shown}");
    if shown["ok"] == json!(true) {
        assert_eq!(shown["preview"]["scripts"].as_array().map_or(0, Vec::len), items.len(), "{shown}");
    }
    let r = block_on(control::handle(&p, &json!({"op": "backup.restore", "text": text, "confirmed": true}))).value;
    let after = scripts(&p);
    if r["ok"] == json!(true) {
        let n = r["imported"].as_array().map_or(0, Vec::len) + r["kept"].as_array().map_or(0, Vec::len);
        assert_eq!(n, items.len(), "{r}");
    } else {
        assert_eq!(before, after, "a refused restore changed stored scripts: {r}");
    }
});
