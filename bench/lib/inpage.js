// Evaluated once in the test host's page (bench/run.mjs). Every sample is timed here with
// performance.now() around the chrome.runtime call itself, so no CDP round trip lands in a
// sample. Replies are checked after the clock is read.
window.bench = (() => {
  const api = { timeoutMs: 10_000 }; // per reply
  const now = () => performance.now();
  let seq = 0;

  const withTimeout = (promise, what) => {
    let timer;
    const timeout = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`${what}: no reply in ${api.timeoutMs} ms`)), api.timeoutMs); });
    return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
  };

  /** One L0 probe; {ms, sent, received} with sent/received on the shared epoch clock. */
  async function probe(id) {
    const msg = { channel: "lumo:probe", version: 1, id: `bench-${++seq}`, client: { id: chrome.runtime.id, name: "Lumo Bench", version: "0" } };
    const t0 = now();
    const reply = await withTimeout(chrome.runtime.sendMessage(id, msg), `probe of ${id}`);
    const t1 = now();
    if (reply?.ok !== true || reply.status?.authorized !== true) throw new Error(`probe of ${id}: ${JSON.stringify(reply)}`);
    return { ms: t1 - t0, sent: performance.timeOrigin + t0, received: performance.timeOrigin + t1 };
  }

  /** n rounds of one probe per provider, interleaved (ABAB…): {id: [ms…]}. */
  async function probes(ids, n) {
    const out = Object.fromEntries(ids.map((id) => [id, []]));
    for (let i = 0; i < n; i++) for (const id of ids) out[id].push((await probe(id)).ms);
    return out;
  }

  // ------------------------------------------------------------ MCP over a raw lumo:mcp port

  const ports = new Map(); // provider id -> {port, pending: Map<rpc id, {resolve, reject}>}

  /** Opens a lumo:mcp port and runs initialize + notifications/initialized (untimed). */
  async function open(id) {
    ports.get(id)?.port.disconnect();
    const port = chrome.runtime.connect(id, { name: "lumo:mcp" });
    const p = { port, pending: new Map() };
    port.onMessage.addListener((m) => {
      const waiter = p.pending.get(m?.id);
      p.pending.delete(m?.id);
      waiter?.resolve(m);
    });
    port.onDisconnect.addListener(() => {
      const why = new Error(`port to ${id} closed: ${chrome.runtime.lastError?.message ?? "by the provider"}`);
      p.pending.forEach((w) => w.reject(why));
      if (ports.get(id) === p) ports.delete(id);
    });
    ports.set(id, p);
    const init = await request(id, "initialize", { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "Lumo Bench", version: "0" } });
    if (init.error) throw new Error(`initialize of ${id}: ${JSON.stringify(init.error)}`);
    port.postMessage({ jsonrpc: "2.0", method: "notifications/initialized" });
  }

  function request(id, method, params) {
    const p = ports.get(id);
    if (!p) return Promise.reject(new Error(`no open port to ${id}`));
    const rid = ++seq;
    const reply = new Promise((resolve, reject) => p.pending.set(rid, { resolve, reject }));
    p.port.postMessage({ jsonrpc: "2.0", id: rid, method, params });
    return withTimeout(reply, `${method} to ${id}`);
  }

  /** Throws unless the JSON-RPC reply is a success (and, for tools/call, not isError). */
  function check(reply, what) {
    if (reply.error || reply.result?.isError) throw new Error(`${what}: ${JSON.stringify(reply.error ?? reply.result.content)}`);
    return reply.result;
  }

  /** One timed request: {ms, result}. */
  async function call(c) {
    const t0 = now();
    const reply = await request(c.id, c.method, c.params);
    const ms = now() - t0;
    return { ms, result: check(reply, `${c.method} ${c.params?.name ?? ""} to ${c.id}`) };
  }

  /** n rounds of `calls` ([{id, method, params}]) in turn: ms per call, in the order given. */
  async function rounds(calls, n) {
    const out = calls.map(() => []);
    for (let i = 0; i < n; i++) for (const [k, c] of calls.entries()) out[k].push((await call(c)).ms);
    return out;
  }

  /**
   * n rounds of (write_script update of one script, ping). sources(i) gives the i-th source;
   * each write passes the revision the previous one returned. {write: [ms…], ping: [ms…], revision}.
   */
  async function writes(id, uuid, revision, sources) {
    const out = { write: [], ping: [] };
    for (const source of sources) {
      const w = await call({ id, method: "tools/call", params: { name: "write_script", arguments: { uuid, revision, source } } });
      out.write.push(w.ms);
      revision = w.result.structuredContent.script.revision;
      out.ping.push((await call({ id, method: "ping" })).ms);
    }
    return { ...out, revision };
  }

  return Object.assign(api, { probe, probes, open, request, call, rounds, writes });
})();
