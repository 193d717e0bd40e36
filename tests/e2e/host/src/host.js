// Host side of the Lumo extension protocol (L0 probe + L1 MCP session), exposed on
// window.lumo so the e2e tests can drive it with page.evaluate(). Every function
// returns plain serialisable data; failures come back as {error: {code, message}}.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { CfWorkerJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/cfworker";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { PortTransport } from "./port-transport.js";

export const PROBE_CHANNEL = "lumo:probe";
export const MCP_PORT = "lumo:mcp";
export const PROBE_VERSION = 1;
export const PROBE_TIMEOUT_MS = 1500;

// The user-visible texts of the contract's state machine.
export const TEXT = {
  notInstalled: "Extension not installed, or no agent endpoint.",
  incomplete: "Probe response is incomplete.",
  disabled: "Agent access is turned off in the provider.",
  pending: "Waiting for your approval in the provider.",
  notAllowed: "The caller is not on the allowlist.",
};

const HOST_VERSION = chrome.runtime.getManifest().version;
const CLIENT_INFO = { name: "Lumo Test Host", version: HOST_VERSION };

export const isExtensionId = (id) => typeof id === "string" && /^[a-p]{32}$/.test(id);

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

function toError(e) {
  return {
    error: {
      code: typeof e?.code === "number" ? e.code : null,
      message: String(e?.message ?? e),
      ...(e?.data !== undefined ? { data: e.data } : {}),
    },
  };
}

// ---------------------------------------------------------------- L0 probe

let probeSeq = 0;

class ProbeTimeout extends Error {}

function withTimeout(promise, ms) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new ProbeTimeout(`Probe timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Maps a probe response to {state, text} per the contract's table (all rows but the first two). */
export function classify(response) {
  if (isObject(response) && response.ok === false) {
    const text = typeof response.error === "string" && response.error ? response.error : TEXT.incomplete;
    return { state: "error", text };
  }
  if (!isObject(response) || response.ok !== true || !isObject(response.service) || !isObject(response.status)) {
    return { state: "error", text: TEXT.incomplete };
  }
  const s = response.status;
  if (s.enabled !== true) return { state: "error", text: TEXT.disabled };
  if (s.authorized !== true) return { state: "error", text: s.pendingApproval === true ? TEXT.pending : TEXT.notAllowed };
  if (s.ready !== true) {
    const text = typeof s.reason === "string" && s.reason ? s.reason : "The provider is not ready.";
    return { state: "error", text };
  }
  return { state: "connected", text: "Connected" };
}

/**
 * L0 probe, then (if it passes and openSession) the L1 session.
 * Options: timeoutMs (1500), message (raw payload instead of the standard probe),
 * openSession (true): on "all pass" open an MCP session and report "Connected: N tools".
 * Result: {state, text, response?, requestId, detail?, elapsedMs (L0 round trip),
 *          l0?: "pass", session?, tools?, mcpError?, closeReason?}.
 */
async function probe(providerId, { timeoutMs = PROBE_TIMEOUT_MS, message, openSession = true } = {}) {
  const payload = message !== undefined ? message : {
    channel: PROBE_CHANNEL,
    version: PROBE_VERSION,
    id: `probe-${++probeSeq}`,
    client: { id: chrome.runtime.id, name: CLIENT_INFO.name, version: HOST_VERSION },
  };
  const requestId = isObject(payload) ? payload.id : undefined;
  const t0 = performance.now();
  const elapsed = () => Math.round(performance.now() - t0);
  if (!isExtensionId(providerId)) {
    return { state: "error", text: TEXT.notInstalled, detail: "invalid extension id", requestId, elapsedMs: 0 };
  }
  let response;
  try {
    response = await withTimeout(chrome.runtime.sendMessage(providerId, payload), timeoutMs);
  } catch (e) {
    if (e instanceof ProbeTimeout) return { state: "error", text: e.message, requestId, elapsedMs: elapsed() };
    return { state: "error", text: TEXT.notInstalled, detail: String(e?.message ?? e), requestId, elapsedMs: elapsed() };
  }
  const elapsedMs = elapsed();
  const verdict = classify(response);
  const result = { ...verdict, response: response === undefined ? null : response, requestId, elapsedMs };
  if (verdict.state !== "connected" || !openSession) return result;

  result.l0 = "pass";
  const h = await connect(providerId);
  if (typeof h !== "number") {
    return { ...result, state: "error", text: h.error.message, mcpError: h.error, session: h.handle, closeReason: info(h.handle).lastCloseReason };
  }
  const listed = await listTools(h);
  if (listed.error) return { ...result, state: "error", text: listed.error.message, mcpError: listed.error, session: h };
  return { ...result, text: `Connected: ${listed.tools.length} tools`, session: h, tools: listed.tools.map((t) => t.name) };
}

// ---------------------------------------------------------------- L1 logical session

const sessions = new Map();
let sessionSeq = 0;

function info(h) {
  const s = sessions.get(h);
  if (!s) return toError(new Error(`No session ${h}`));
  return {
    connected: s.connected,
    reconnects: s.reconnects,
    listChangedCount: s.listChangedCount,
    serverInfo: s.serverInfo ?? null,
    instructions: s.instructions ?? null,
    protocolVersion: s.protocolVersion ?? null,
    lastCloseReason: s.lastCloseReason,
    cachedToolCount: s.tools ? s.tools.length : null,
  };
}

/** Opens a fresh port + Client + initialize unless the session is already live. */
function ensureConnected(s) {
  if (s.connected) return Promise.resolve();
  if (!s.connecting) {
    s.connecting = (async () => {
      const transport = new PortTransport(s.providerId, s.portName);
      const client = new Client(CLIENT_INFO, { capabilities: {}, jsonSchemaValidator: new CfWorkerJsonSchemaValidator() });
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
        if (s.client !== client) return;
        s.listChangedCount++;
        s.tools = null; // stale: next listTools refetches
      });
      client.onclose = () => {
        if (s.client !== client) return;
        s.connected = false;
        s.client = null;
        s.lastCloseReason = transport.closeReason;
      };
      s.client = client;
      try {
        await client.connect(transport);
      } catch (e) {
        if (s.client === client) {
          s.client = null;
          s.connected = false;
          s.lastCloseReason = transport.closeReason ?? String(e?.message ?? e);
        }
        throw e;
      }
      if (s.everConnected) s.reconnects++;
      s.everConnected = true;
      s.connected = !transport.closed;
      s.serverInfo = client.getServerVersion();
      s.instructions = client.getInstructions();
      s.protocolVersion = transport.protocolVersion;
    })().finally(() => { s.connecting = null; });
  }
  return s.connecting;
}

async function withSession(h, fn) {
  const s = sessions.get(h);
  if (!s) return toError(new Error(`No session ${h}`));
  try {
    await ensureConnected(s);
    if (!s.client) throw new Error(s.lastCloseReason ?? "Session closed");
    return await fn(s.client, s);
  } catch (e) {
    return toError(e);
  }
}

/** Resolves to a numeric handle, or {error, handle} if the first initialize failed. */
async function connect(providerId, { portName = MCP_PORT } = {}) {
  if (!isExtensionId(providerId)) return toError(new Error(`Not an extension id: ${providerId}`));
  const h = ++sessionSeq;
  const s = {
    providerId, portName, client: null, connected: false, connecting: null, everConnected: false,
    reconnects: 0, listChangedCount: 0, lastCloseReason: null, tools: null,
  };
  sessions.set(h, s);
  try {
    await ensureConnected(s);
    return h;
  } catch (e) {
    return { ...toError(e), handle: h };
  }
}

const listTools = (h) => withSession(h, async (client, s) => {
  const tools = [];
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : undefined);
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  s.tools = tools;
  return { tools };
});

const callTool = (h, name, args = {}) => withSession(h, (client) => client.callTool({ name, arguments: args }));

const ping = (h) => withSession(h, (client) => client.ping());

async function close(h) {
  const s = sessions.get(h);
  if (!s) return toError(new Error(`No session ${h}`));
  sessions.delete(h);
  const client = s.client;
  s.client = null;
  s.connected = false;
  s.lastCloseReason = "Closed by host";
  try { await client?.close(); } catch { /* ignore */ }
  return { closed: true };
}

// ---------------------------------------------------------------- raw ports (bad-input tests)

const raws = new Map();
let rawSeq = 0;

function rawOpen(providerId, name) {
  let port;
  try {
    port = chrome.runtime.connect(providerId, { name });
  } catch (e) {
    return toError(e);
  }
  const h = ++rawSeq;
  const r = { port, messages: [], closed: false, closeReason: null };
  port.onMessage.addListener((m) => r.messages.push(m));
  port.onDisconnect.addListener(() => {
    r.closed = true;
    r.closeReason = chrome.runtime.lastError?.message ?? null;
  });
  raws.set(h, r);
  return h;
}

function rawSend(h, value) {
  const r = raws.get(h);
  if (!r) return toError(new Error(`No raw port ${h}`));
  try {
    r.port.postMessage(value);
    return { sent: true };
  } catch (e) {
    return toError(e);
  }
}

const rawMessages = (h) => raws.get(h)?.messages ?? [];
const rawClosed = (h) => raws.get(h)?.closed ?? true;
const rawInfo = (h) => {
  const r = raws.get(h);
  return r ? { closed: r.closed, closeReason: r.closeReason, messages: r.messages } : toError(new Error(`No raw port ${h}`));
};
function rawClose(h) {
  const r = raws.get(h);
  if (!r) return toError(new Error(`No raw port ${h}`));
  try { r.port.disconnect(); } catch { /* ignore */ }
  r.closed = true;
  return { closed: true };
}

window.lumo = {
  id: chrome.runtime.id,
  TEXT,
  isExtensionId,
  probe,
  connect, listTools, callTool, ping, close, info,
  rawOpen, rawSend, rawMessages, rawClosed, rawInfo, rawClose,
};
