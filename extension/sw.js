// Service worker loader. Compiles the Rust module off the worker's first turn, from the packaged
// .wasm (streaming: no 1.4 MB base64 module to parse and decode). A message that wakes the worker
// must not be lost meanwhile, so this first turn gives every event the module listens to from its
// start one listener of its own (`early`), which queues what arrives until the module's start
// function has added its listeners, then hands the queue over in arrival order. Not the tab
// events: the module adds those only while it needs them, so a navigation does not start the
// worker. It decides nothing: every event reaches the module as Chrome gave it. The only other
// thing here is recovery from a trap.
// First (modules are evaluated in import order), so the fetch and the compile run while the glue
// is evaluated and the rest of this turn adds the listeners.
import { wasm } from './compile.js';
import init from './wasm/lumo_userscripts.js';

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
// wrapped.
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

// Until the module has started, every event of `early` waits here: [listeners, args, this].
let queue = [];
// `early(event)`: one listener added now; the module's `addListener` calls on `event` land in
// `listeners`. Before the module has started, an event is queued, and a message event (one with a
// `sendResponse`) keeps its channel open (returns true), as the module's listener may answer
// later. A port is given early listeners too before the module sees it, so its first messages wait
// with the rest.
function early(event, onPort) {
  const listeners = [];
  const add = event.addListener.bind(event);
  add(function (...args) {
    if (onPort) early(args[0].onMessage), early(args[0].onDisconnect);
    if (queue) {
      queue.push([listeners, args, this]);
      return typeof args[2] === 'function' ? true : undefined;
    }
    return deliver(listeners, args, this);
  });
  event.addListener = (listener) => listeners.push(guarded(listener));
}
function deliver(listeners, args, self) {
  let keepOpen;
  for (const listener of listeners) if (listener.apply(self, args) === true) keepOpen = true;
  return keepOpen;
}

const { runtime } = chrome;
for (const event of [
  runtime.onMessage, runtime.onMessageExternal, runtime.onInstalled, runtime.onUserScriptMessage,
  chrome.storage.onChanged,
  chrome.notifications?.onClicked, chrome.notifications?.onClosed,
]) if (event) early(event);
early(runtime.onConnectExternal, true);

init({ module_or_path: wasm }).then(() => {
  const waiting = queue;
  queue = null;
  for (const [listeners, args, self] of waiting) deliver(listeners, args, self);
}, (e) => {
  // Nothing will answer: what is held is dropped, so its senders hear that at once.
  queue = null;
  console.error('lumo-userscripts: the wasm module did not load.', e);
  recover(e);
});
