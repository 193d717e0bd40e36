//! Every MCP version rmcp negotiates is spoken: the initialize handshake for 2024-11-05 through
//! 2025-11-25, and 2026-07-28's per-request `_meta` without a handshake.
mod common;
use common::*;
use serde_json::json;
use std::time::Duration;

#[test]
fn handshake_versions_are_echoed() {
    for v in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
        let p = Ports::new();
        let mut b = Bridge::start(&p.args());
        let r = b.rpc(
            "initialize",
            json!({"protocolVersion": v, "capabilities": {}, "clientInfo": {"name": "it", "version": "0"}}),
            Duration::from_secs(10),
        );
        assert_eq!(r["result"]["protocolVersion"], v, "{r}");
    }
}

#[test]
fn version_2026_07_28_lists_tools_without_a_handshake() {
    let p = Ports::new();
    let mut b = Bridge::start(&p.args());
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "it", "version": "0"},
    });
    let r = b.rpc(
        "tools/list",
        json!({"_meta": meta}),
        Duration::from_secs(10),
    );
    let names: Vec<&str> = r["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"bridge_status") && names.contains(&"write_script"),
        "{names:?}"
    );
    let r = b.rpc(
        "tools/call",
        json!({"name": "bridge_status", "arguments": {}, "_meta": meta}),
        Duration::from_secs(10),
    );
    assert_eq!(r["result"]["structuredContent"]["connected"], false, "{r}");
}
