//! MCP over a `lumo:mcp` port: JSON-RPC envelopes and the server's methods.

pub mod inflight;
pub mod jsonrpc;
pub mod server;
