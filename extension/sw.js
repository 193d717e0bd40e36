// Service worker loader. Instantiates the Rust module synchronously from embedded bytes; its start
// function registers every chrome.runtime listener before this first turn ends, so a message that
// woke the worker is never lost. The only other thing here is recovery from a trap.
import { initSync } from './wasm/lumo_userscripts.js';
import { WASM_BASE64 } from './wasm/bytes.js';

// The core must never panic, but if the module ever traps its state is unreliable for every
// caller. Recover by reloading the extension: Chrome starts a fresh worker and instance, scripts
// are re-registered on install, hosts reconnect with a fresh initialize. At most 3 reloads in
// 10 minutes, so a trap at start-up cannot loop forever.
let recovering = false;
async function recover(error) {
  if (!(error instanceof WebAssembly.RuntimeError) || recovering) return;
  recovering = true;
  console.error('lumo-userscripts: the wasm module trapped; reloading the extension to recover.', error);
  const { trapReloads = [] } = await chrome.storage.local.get('trapReloads');
  const recent = (Array.isArray(trapReloads) ? trapReloads : []).filter((t) => Date.now() - t < 600_000);
  if (recent.length >= 3) {
    console.error('lumo-userscripts: trapped 3 times in 10 minutes; not reloading again.');
    return;
  }
  await chrome.storage.local.set({ trapReloads: [...recent, Date.now()] });
  chrome.runtime.reload();
}
self.addEventListener('unhandledrejection', (e) => recover(e.reason));
self.addEventListener('error', (e) => recover(e.error));
// Chrome's event dispatch swallows what a listener throws, so each listener the module adds is
// wrapped. `addListener` is an own property of each event object, so each event is guarded; a
// port's events are guarded before the module sees the port.
function guarded(listener) {
  return function (...args) {
    try {
      return listener.apply(this, args);
    } catch (e) {
      recover(e);
      throw e;
    }
  };
}
function guard(event, wrap = guarded) {
  const add = event.addListener.bind(event);
  event.addListener = (listener, ...rest) => add(wrap(listener), ...rest);
}
const { runtime } = chrome;
for (const event of [runtime.onMessage, runtime.onMessageExternal, runtime.onInstalled, runtime.onUserScriptMessage]) if (event) guard(event);
guard(runtime.onConnectExternal, (listener) => guarded((port) => {
  guard(port.onMessage);
  guard(port.onDisconnect);
  return listener(port);
}));

const bytes = Uint8Array.fromBase64
  ? Uint8Array.fromBase64(WASM_BASE64)
  : Uint8Array.from(atob(WASM_BASE64), (c) => c.charCodeAt(0));
initSync({ module: bytes });
