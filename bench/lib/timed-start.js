// Loaded first in the "timed" copies of the providers (bench/lib/extensions.mjs), never in the
// measured builds. Records performance.now() marks that bench/run.mjs reads over CDP: script
// start, wasm compile and instantiate (which runs the start function that registers the
// listeners), every storage, tabs and userScripts call, port traffic, and when each external
// message came in and was answered (bench/try.mjs's profile reads the calls and port traffic).
const marks = (globalThis.__benchMarks = { scriptStart: performance.now(), calls: [], messages: [] });
const now = () => performance.now();

const { Module, Instance } = WebAssembly;
function TimedModule(...a) {
  marks.compileStart = now();
  const m = new Module(...a);
  marks.compileEnd = now();
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

// Every asynchronous browser call the worker makes through these APIs: {api, start, end}; a call
// that throws synchronously gets `threw`. `userScripts.execute` also records the byte length of
// the code it was given (`bytes`) and the number of `js` entries (`entries`).
const TIMED = Symbol("benchTimed");
function timeCalls(obj, names, prefix) {
  if (!obj || obj[TIMED]) return;
  for (const name of names) {
    const f = obj[name];
    if (typeof f !== "function") continue;
    obj[name] = (...a) => {
      const call = { api: `${prefix}.${name}`, start: now() };
      if (name === "execute" && Array.isArray(a[0]?.js)) {
        call.entries = a[0].js.length;
        call.bytes = a[0].js.reduce((n, j) => n + (j.code?.length ?? 0), 0);
      }
      marks.calls.push(call);
      let p;
      try {
        p = f.apply(obj, a);
      } catch (e) {
        call.end = now();
        call.threw = true;
        throw e;
      }
      const done = () => { call.end = now(); };
      p?.then?.(done, done);
      return p;
    };
  }
  obj[TIMED] = true;
}
const USER_SCRIPTS = ["getScripts", "register", "update", "unregister", "execute", "configureWorld", "getWorldConfigurations"];
timeCalls(chrome.storage?.local, ["get", "set", "remove"], "storage.local");
timeCalls(chrome.storage?.session, ["get", "set", "remove"], "storage.session");
timeCalls(chrome.tabs, ["query", "get", "create", "remove"], "tabs");
// chrome.userScripts is present only while "Allow User Scripts" is on, which a bench may turn on
// after the worker started: it is wrapped here if present, else when the next message comes in.
const timeUserScripts = () => timeCalls(chrome.userScripts, USER_SCRIPTS, "userScripts");
timeUserScripts();

// Port traffic (the MCP host's lumo:mcp port): when each message came in and each reply went out,
// with its JSON-RPC id when it has one: {dir: "in" | "out", t, id, method}.
marks.ports = [];
const rpc = (m) => (m && typeof m === "object" ? { id: m.id, method: m.method } : {});
const connect = chrome.runtime.onConnectExternal;
const addConnect = connect.addListener.bind(connect);
connect.addListener = (listener) => addConnect((port) => {
  const addMessage = port.onMessage.addListener.bind(port.onMessage);
  port.onMessage.addListener = (l) => addMessage((msg, ...rest) => {
    timeUserScripts();
    marks.ports.push({ dir: "in", t: now(), ...rpc(msg) });
    return l(msg, ...rest);
  });
  const post = port.postMessage.bind(port);
  port.postMessage = (msg) => {
    marks.ports.push({ dir: "out", t: now(), ...rpc(msg) });
    return post(msg);
  };
  return listener(port);
});

const ev = chrome.runtime.onMessageExternal;
const addListener = ev.addListener.bind(ev);
ev.addListener = (listener) => addListener((msg, sender, sendResponse) => {
  timeUserScripts();
  const m = { received: now() };
  marks.messages.push(m);
  marks.received ??= m.received;
  return listener(msg, sender, (...a) => {
    m.replied ??= now();
    marks.replied ??= m.replied;
    return sendResponse(...a);
  });
});
