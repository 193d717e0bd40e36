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
//!
//! Lints beyond clippy's defaults (CI runs clippy with `-D warnings`, native and wasm32; the
//! reasons are in ARCHITECTURE.md, "Lints"). Tests may unwrap: only the shipped code is held to
//! these.
#![cfg_attr(
    not(test),
    warn(
        // No panic on any input: the panicking shortcuts are refused outright…
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing,
        // (which does not cover `str`: a byte index inside a character panics too)
        clippy::string_slice,
        // …and sizes stay exact on wasm32, where usize is 32 bits.
        clippy::cast_possible_truncation,
        clippy::cast_possible_wrap,
        clippy::cast_sign_loss,
    )
)]
// Pedantic, chosen: a builder step whose result is dropped is a bug; a function past 100
// lines does more than one thing (the exceptions are marked and scheduled to be split).
// `must_use_candidate` is enabled per module, on the modules of pure decisions.
#![warn(clippy::return_self_not_must_use, clippy::too_many_lines)]

pub mod badge;
pub mod bridge;
pub mod bridge_ops;
pub mod by_hand;
pub mod caller;
pub mod channel;
pub mod control;
pub mod env;
pub mod gm;
pub mod guard;
pub mod ids;
pub mod import_ops;
pub mod json_view;
pub mod mcp;
pub mod policy;
pub mod probe;
pub mod provider;
pub mod runs_ops;
pub mod scripts;
pub mod session;
pub mod sort;
pub mod tab_scripts;
pub mod text;
pub mod tools;
pub mod value;
pub mod vec_map;
pub mod web;

#[cfg(all(target_arch = "wasm32", feature = "shell"))]
pub mod chrome;
