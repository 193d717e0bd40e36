// Loaded after timed-start.js in the timed copies bench/try.mjs profiles (BENCH_TRY_PROFILE=1) and
// bench/write-timeline.mjs reads, never in bench/run.mjs's copies nor the measured builds: adds
// to timed-start.js's `calls` every tabs call and the userScripts calls a try or a write makes,
// and records the port traffic (`ports`).
const marks = globalThis.__benchMarks;
const now = () => performance.now();

// timed-start.js's recorder; `userScripts.execute` also records the number of `js` entries
// (`entries`) and their length in characters (`bytes`).
const timeCalls = (obj, names, prefix) => globalThis.__benchTimeCalls(obj, names, prefix, (call, name, a) => {
  if (name === "execute" && Array.isArray(a[0]?.js)) {
    call.entries = a[0].js.length;
    call.bytes = a[0].js.reduce((n, j) => n + (j.code?.length ?? 0), 0);
  }
});
timeCalls(chrome.tabs, ["query", "get"], "tabs");
timeCalls(chrome.storage?.local, ["remove"], "storage.local");
// The bench turns "Allow User Scripts" on after the worker started (chrome.userScripts is absent
// until then): its methods are wrapped when the first port message comes in.
let userScriptsTimed = false;
const timeUserScripts = () => {
  if (userScriptsTimed || !chrome.userScripts) return;
  userScriptsTimed = true;
  timeCalls(chrome.userScripts, ["getScripts", "register", "update", "unregister", "execute", "configureWorld", "getWorldConfigurations"], "userScripts");
};

// Port traffic (the MCP host's lumo:mcp port): {dir: "in" | "out", t, id, method} per message.
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
