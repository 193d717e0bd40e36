// Service worker loader. Instantiates the Rust module synchronously from embedded bytes; its start
// function registers every chrome.runtime listener before this first turn ends, so a message that
// woke the worker is never lost. Nothing else belongs here: the shell in src/chrome does the rest.
import { initSync } from './wasm/lumo_userscripts.js';
import { WASM_BASE64 } from './wasm/bytes.js';

const bytes = Uint8Array.fromBase64
  ? Uint8Array.fromBase64(WASM_BASE64)
  : Uint8Array.from(atob(WASM_BASE64), (c) => c.charCodeAt(0));
initSync({ module: bytes });
