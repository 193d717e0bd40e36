// Loaded first in the "timed" copies of the providers (bench/lib/extensions.mjs), never in the
// measured builds. Records performance.now() marks that bench/run.mjs reads over CDP: script
// start, the probe module's compile (synchronous, in the first turn), the provider's module's
// fetch, compile and instantiate (which runs the start function that registers the listeners),
// every storage and userScripts call, and when each external message came in and was answered.
const marks = (globalThis.__benchMarks = { scriptStart: performance.now(), calls: [], messages: [] });
const now = () => performance.now();

const { Module, Instance } = WebAssembly;
function TimedModule(...a) { // the probe module's
  marks.probeCompileStart = now();
  const m = new Module(...a);
  marks.probeCompileEnd = now();
  return m;
}
function TimedInstance(...a) {
  marks.instantiateStart = now();
  const i = new Instance(...a);
  marks.instantiateEnd = now();
  return i;
}
TimedModule.prototype = Module.prototype;
TimedInstance.prototype = Instance.prototype;
WebAssembly.Module = TimedModule;
WebAssembly.Instance = TimedInstance;
// The provider's module: fetch + streaming compile, then instantiate.
const { compileStreaming, instantiate } = WebAssembly;
WebAssembly.compileStreaming = (source) => {
  marks.compileStart = now();
  return compileStreaming(Promise.resolve(source).then((r) => ((marks.fetched = now()), r)))
    .then((m) => ((marks.compileEnd = now()), m));
};
WebAssembly.instantiate = (...a) => {
  marks.instantiateStart = now();
  return instantiate(...a).then((r) => ((marks.instantiateEnd = now()), r));
};

// Every asynchronous browser call the worker makes through these APIs: {api, start, end};
// `describe(call, name, args)` may add to a call's record. Shared with timed-try.js (globalThis.__benchTimeCalls).
function timeCalls(obj, names, prefix, describe) {
  for (const name of names) {
    const f = obj?.[name];
    if (typeof f !== "function") continue;
    obj[name] = (...a) => {
      const call = { api: `${prefix}.${name}`, start: now() };
      describe?.(call, name, a);
      marks.calls.push(call);
      let p;
      try {
        p = f.apply(obj, a);
      } catch (e) { // refused in the worker's own process: no round trip (e.g. the toggle check)
        call.end = now();
        call.threw = true;
        throw e;
      }
      const done = () => { call.end = now(); };
      p?.then?.(done, done);
      return p;
    };
  }
}
globalThis.__benchTimeCalls = timeCalls; // not on marks: run.mjs reads marks by value
timeCalls(chrome.storage?.local, ["get", "set"], "storage.local");
timeCalls(chrome.storage?.session, ["get", "set"], "storage.session");
timeCalls(chrome.userScripts, ["getScripts", "register", "update"], "userScripts"); // present only while "Allow User Scripts" is on

const ev = chrome.runtime.onMessageExternal;
const addListener = ev.addListener.bind(ev);
// A loader that holds events until its module has started (the provider's sw.js) puts its own
// `addListener` on the event; the module's call to it marks "listeners ready".
let loaderAdd;
Object.defineProperty(ev, "addListener", {
  configurable: true,
  get: () => loaderAdd ?? timedAdd,
  set: (f) => { loaderAdd = (...a) => { marks.listenersReady ??= now(); return f(...a); }; },
});
const timedAdd = (listener) => addListener((msg, sender, sendResponse) => {
  const m = { received: now() };
  marks.messages.push(m);
  marks.received ??= m.received;
  return listener(msg, sender, (...a) => {
    m.replied ??= now();
    marks.replied ??= m.replied;
    return sendResponse(...a);
  });
});
