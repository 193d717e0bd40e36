//! Checks the source manifest against the crate before anything is built, so a release can never
//! ship a manifest that disagrees with the code: the versions must match, and the extension must
//! stay unreachable from web pages.

use std::{env, fs, path::Path, process};

fn fail(msg: &str) -> ! {
    eprintln!("error: manifest.json: {msg}");
    process::exit(1);
}

fn main() {
    println!("cargo:rerun-if-changed=manifest.json");
    let dir = env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let path = Path::new(&dir).join("manifest.json");
    let text = fs::read_to_string(&path)
        .unwrap_or_else(|e| fail(&format!("cannot read {}: {e}", path.display())));
    let manifest: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| fail(&format!("not valid JSON: {e}")));

    let crate_version = env::var("CARGO_PKG_VERSION").unwrap_or_default();
    match manifest.get("version").and_then(|v| v.as_str()) {
        Some(v) if v == crate_version => {}
        Some(v) => fail(&format!(
            "version {v} differs from Cargo.toml's {crate_version}; change both together"
        )),
        None => fail("no \"version\""),
    }
    if manifest.get("manifest_version").and_then(|v| v.as_u64()) != Some(3) {
        fail("manifest_version must be 3");
    }
    if manifest
        .get("key")
        .and_then(|v| v.as_str())
        .is_none_or(str::is_empty)
    {
        fail("no \"key\": the extension id would change on every install and hosts could not find it");
    }
    // Web pages must never reach the provider: extensions only, no URL patterns.
    let ec = manifest.get("externally_connectable");
    if ec.and_then(|e| e.get("matches")).is_some() {
        fail(
            "externally_connectable must not have \"matches\": web pages would be able to connect",
        );
    }
    if ec.and_then(|e| e.get("ids")).is_none() {
        fail("externally_connectable.ids is missing: no host could connect");
    }
}
