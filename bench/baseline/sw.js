// Baseline provider: the same L0/L1 surface as Lumo Userscripts and nothing else — no policy, no
// storage, no wasm — so the bench can tell the provider's own cost from Chrome's messaging cost.
const PROBE_REPLY = {
  ok: true,
  service: { namespace: "baseline", name: "Bench Baseline", version: "0.0.1" },
  status: { enabled: true, authorized: true, ready: true, pendingApproval: false },
};

chrome.runtime.onMessageExternal.addListener((message, _sender, sendResponse) => {
  if (message?.channel === "lumo:probe") sendResponse(PROBE_REPLY);
  return false;
});

// Every JSON-RPC request (initialize, ping, …) gets an empty result; notifications get nothing.
// `tools/call` gets the result the bench gave with `bench/reply` (the provider's own `status`
// result, captured): Chrome's cost of carrying a reply of that size, with no logic behind it.
let toolResult = {};
chrome.runtime.onConnectExternal.addListener((port) => {
  if (port.name !== "lumo:mcp") return port.disconnect();
  port.onMessage.addListener((m) => {
    if (m?.id === undefined || typeof m.method !== "string") return;
    if (m.method === "bench/reply") toolResult = m.params?.result ?? {};
    port.postMessage({ jsonrpc: "2.0", id: m.id, result: m.method === "tools/call" ? toolResult : {} });
  });
});
