// Service worker loader. Compiles the Rust module off the worker's first turn, from the packaged
// .wasm (streaming: no 1.4 MB base64 module to parse and decode). A message that wakes the worker
// must not be lost meanwhile, so this first turn gives every event the module listens to from its
// start one listener of its own (`early`), which queues what arrives until the module's start
// function has added its listeners, then hands the queue over in arrival order. Not the tab
// events: the module adds those only while it needs them, so a navigation does not start the
// worker. A probe that arrives first is answered by the probe module (compile.js, `answerEarly`)
// with the core's decision. It decides nothing: every event reaches the module as Chrome gave
// it, and a probe the probe module answered reaches it too when the provider must record it. The
// only other thing here is recovery from a trap, in every listener the module adds.
// First (modules are evaluated in import order): the probe module and the policy read.
import { compileProvider, policyRead, probeModule, wasm } from './compile.js';
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
// The tests read the wasm memory's size through this listener's module scope (`init`):
// tests/e2e/lib/wasm-memory.mjs.
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
function hold(listeners, args, self) {
  compileProvider();
  if (queue) queue.push([listeners, args, self]);
  else deliver(listeners, args, self);
}

// The probe module's exports, until the provider's module has started (then dropped), or null.
let quick = null;
try {
  quick = probeModule && new WebAssembly.Instance(probeModule, {}).exports;
} catch (e) {
  console.error('lumo-userscripts: the probe module did not start; the provider answers probes.', e);
}

// A probe from before the provider's module started: the probe module gives the core's answer
// from the probe, its sender, the stored policy, the toggle check (Chrome's synchronous refusal of
// a wrong argument, as `chrome/env.rs` makes it) and the time. What it cannot answer is held for
// the provider; a probe that changes the policy (a pending approval, `lastSeen`) is handed to the
// provider too, with no one to answer, so it is recorded.
async function answerEarly(listeners, args, self) {
  const [msg, sender, sendResponse] = args;
  let out;
  try {
    const text = JSON.stringify(msg) ?? null;
    // Bigger than any probe (the core refuses it unread): not worth copying into the module.
    if (text !== null && text.length > 65536) return hold(listeners, args, self);
    const stored = await policyRead;
    if (!quick) return hold(listeners, args, self);
    out = JSON.parse(run(quick, JSON.stringify({
      text, sender: typeof sender?.id === 'string' ? sender.id : null, policy: stored.policy, // absent: none stored
      toggle: toggleCheck(), now: Date.now(),
    })));
  } catch (e) {
    console.error('lumo-userscripts: the probe module failed; the provider answers.', e);
    quick = null;
    return hold(listeners, args, self);
  }
  if (!out || !('reply' in out)) return hold(listeners, args, self);
  sendResponse(out.reply);
  compileProvider();
  if (out.record === true) hold(listeners, [msg, sender, () => {}], self);
}
function run(x, input) {
  const bytes = new TextEncoder().encode(input);
  const at = x.input(bytes.length); // may grow the memory: its buffer is read after
  new Uint8Array(x.memory.buffer, at, bytes.length).set(bytes);
  const n = x.answer(bytes.length);
  return new TextDecoder().decode(new Uint8Array(x.memory.buffer, x.output(), n));
}
function toggleCheck() {
  if (!chrome.userScripts) return 'missing';
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    chrome.userScripts.getScripts(0)?.catch?.(() => {});
    return {};
  } catch (e) {
    return { refused: String(e?.message ?? e) };
  } finally {
    Error.stackTraceLimit = limit;
  }
}
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
      if (quick && event === chrome.runtime.onMessageExternal && typeof args[2] === 'function') {
        answerEarly(listeners, args, this);
        return true;
      }
      hold(listeners, args, this);
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
// The tab events are not held (the module adds their listeners only while it needs them), but a
// trap in one must reach `recover` all the same. The module removes what it added: the same
// wrapper goes. Done once the provider's module has compiled, before it is instantiated (its
// code runs only from then on): the first touch of `chrome.tabs` builds that API's bindings,
// ~0.6 ms that a cold probe's first turn need not wait for.
function guardTabEvents() {
  for (const event of [chrome.tabs?.onUpdated, chrome.tabs?.onRemoved]) {
    if (!event) continue;
    const add = event.addListener.bind(event);
    const remove = event.removeListener.bind(event);
    const wrapped = new Map();
    event.addListener = (listener) => {
      if (!wrapped.has(listener)) wrapped.set(listener, guarded(listener));
      add(wrapped.get(listener));
    };
    event.removeListener = (listener) => remove(wrapped.get(listener) ?? listener);
  }
}

// What `GM_info.platform` says (read by the module when it builds a registration:
// `ChromeEnv::platform`): the system from `runtime.getPlatformInfo`, the browser from this
// worker's `userAgentData` (the brand that is neither a GREASE one nor the generic "Chromium",
// as Violentmonkey picks it), so a tab's devtools emulation does not change it. Learned while
// the module compiles; the module starts after it (or after it failed: the fields are then "").
const platform = Promise.all([
  chrome.runtime.getPlatformInfo(),
  navigator.userAgentData?.getHighEntropyValues(['fullVersionList']).catch(() => null),
]).then(([{ os, arch }, ua]) => {
  const brands = (ua?.fullVersionList ?? []).filter((b) => !/[^a-z ]/i.test(b.brand));
  const b = brands.find((x) => x.brand !== 'Chromium') ?? brands[0];
  const v = /\sChrom(?:e|ium)\/([\d.]+)/.exec(navigator.userAgent)?.[1] ?? '';
  globalThis.lumoPlatform = { arch, os, browserName: b?.brand ?? 'chrome', browserVersion: b?.version ?? v };
}, () => {});
// Never held up by it for long: past 1 s the module starts, and the fields are "" until the
// answer comes (registrations made meanwhile say so).
const platformOrLate = Promise.race([platform, new Promise((r) => setTimeout(r, 1000))]);

init({ module_or_path: Promise.all([wasm, platformOrLate]).then(([module]) => (guardTabEvents(), module)) }).then(() => {
  const waiting = queue;
  queue = null;
  quick = null;
  for (const [listeners, args, self] of waiting) deliver(listeners, args, self);
}, (e) => {
  // Nothing will answer: what is held is dropped, so its senders hear that at once, and no probe
  // is answered for a provider that is not there.
  queue = null;
  quick = null;
  console.error('lumo-userscripts: the wasm module did not load.', e);
  recover(e);
});

// A wake that brings no event still compiles the provider's module: 5 ms after this first turn.
setTimeout(compileProvider, 5);
