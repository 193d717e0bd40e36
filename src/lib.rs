//! Lumo Userscripts: a provider in the Lumo extension protocol.
//!
//! The crate has two halves (see `ARCHITECTURE.md`):
//! - the **core** (every module but `chrome`): plain Rust that decides. It never touches JS; inputs
//!   (sender id, time, stored state) come in explicitly and decisions come out, so it is tested
//!   natively and fuzzed.
//! - the **shell** ([`chrome`], wasm32 only): binds the browser APIs and carries messages in and
//!   effects out. It decides nothing.
//!
//! No function in the core may panic on any input: a wasm panic traps the module and kills the
//! provider for every caller.

pub mod badge;
pub mod bridge;
pub mod control;
pub mod env;
pub mod guard;
pub mod ids;
pub mod mcp;
pub mod policy;
pub mod probe;
pub mod provider;
pub mod scripts;
pub mod session;
pub mod text;
pub mod tools;

#[cfg(target_arch = "wasm32")]
pub mod chrome;
