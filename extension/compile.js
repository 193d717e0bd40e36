// The loader's first steps, in a module of their own: sw.js imports this before the wasm-bindgen
// glue, so they run before the glue is evaluated.
import probeBase64 from './wasm/probe.js';

// The probe module (probe/: the core's probe decision alone, ~54 KB, no imports), so a probe that
// wakes the worker is answered without waiting for the provider's module. Embedded and compiled
// in this turn, not fetched: a fetch in flight here delays the dispatch of the message that woke
// the worker by ~5 ms (measured in Chromium 156). null if it cannot be made: then the provider
// answers every probe.
export const probeModule = (() => {
  try {
    const bytes = Uint8Array.fromBase64?.(probeBase64) ?? Uint8Array.from(atob(probeBase64), (c) => c.charCodeAt(0));
    return new WebAssembly.Module(bytes);
  } catch (e) {
    console.error('lumo-userscripts: the probe module did not compile; the provider answers probes.', e);
    return null;
  }
})();
// The one input of the probe module's decision that sits in storage, read now (sw.js adds the
// others: the probe, its sender, the toggle check, the time).
export const policyRead = chrome.storage.local.get('policy');
policyRead.catch(() => {}); // awaited only by a probe that comes before the provider has started

// The provider's module (~1 MB). Its fetch and streaming compile delay that dispatch too (by
// ~7 ms: both cores of a small machine are busy), so they start once the message that woke the
// worker has been answered or held (`compileProvider`, sw.js), or 5 ms after the first turn if
// no event came (sw.js arms that timer as its last step: armed here, its 5 ms ran out during the
// rest of the turn, so it fired as the turn ended, often before the waking message came in).
let begin;
const begun = new Promise((resolve) => { begin = resolve; });
export const compileProvider = () => begin();
export const wasm = begun.then(() => WebAssembly.compileStreaming(fetch(new URL('./wasm/lumo_userscripts_bg.wasm', import.meta.url))));
