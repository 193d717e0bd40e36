// Hardening battery: every case sends the provider something bad, from the place a hostile or
// broken caller would send it from (a probe, a port, a tool call, a stored record), and checks
//   (a) the caller gets a clear error: a probe `ok:false` with a non-empty `error`, a JSON-RPC
//       error with the right code and a message, or a tool result `isError: true` with an
//       `error_code`;
//   (b) nothing changed: the provider's whole chrome.storage.local (and .session, but for the
//       rate window) is the same before and after, except what the case may touch (the audit
//       entry of a refused write, `lastSeen`, a pending entry for a valid sender);
//   (c) the provider still answers a normal probe and a normal tool call afterwards.
// A second block corrupts stored records by hand and restarts the worker from storage.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { BROKEN_ID, HOST_ID, PROVIDER_ID, launch, startStaticServer } from "./lib/harness.mjs";
import { MCP_PORT, PROBE_CHANNEL, PROBE_VERSION } from "./lib/contract.mjs";
import { until, sleep, show } from "./lib/util.mjs";

const T = { timeout: 60_000 };
const INVALID_REQUEST = -32600;
const METHOD_NOT_FOUND = -32601;
const INVALID_PARAMS = -32602;
const UNAUTHORIZED = -32001;
/** A well-formed uuid no script has. */
const NO_SUCH_UUID = "00000000-0000-4000-8000-000000000000";



const userscript = (name, { match = ["https://example.com/*"], body = `console.log(${JSON.stringify(name)});` } = {}) => [
  "// ==UserScript==",
  `// @name        ${name}`,
  "// @namespace   lumo-battery",
  ...match.map((m) => `// @match       ${m}`),
  "// ==/UserScript==",
  body,
  "",
].join("\n");
const header = (lines, body = "") => ["// ==UserScript==", ...lines, "// ==/UserScript==", body].join("\n");

const probeMsg = (extra = {}, client = {}) => ({
  channel: PROBE_CHANNEL, version: PROBE_VERSION, id: "battery",
  client: { id: HOST_ID, name: "Lumo Test Host", version: "0.1.0", ...client }, ...extra,
});
const without = (obj, key) => { const { [key]: _, ...rest } = obj; return rest; };

const initialize = (id) => ({
  jsonrpc: "2.0", id, method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "battery", version: "0" } },
});

// ------------------------------------------------------------------ canonical snapshots

/** JSON with sorted keys, so two reads of the same storage compare equal. */
function canonical(v) {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v && typeof v === "object") return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(",")}}`;
  return JSON.stringify(v);
}

/** The provider's whole storage, read from one of its own pages. */
async function snapshot(h) {
  const page = await h.providerPage();
  return page.evaluate(async () => ({ local: await chrome.storage.local.get(null), session: await chrome.storage.session.get(null) }));
}

/**
 * The differences between two snapshots that the case was not allowed to make.
 * allow.audit: audit/* may change (a refused write-tool call is audited).
 * allow.pendingOf: these ids may be added to policy.pending (a probe from a valid sender).
 * `lastSeen` of allowlisted/pending callers may always move; the rate window may always move.
 */
function forbiddenChanges(before, after, allow = {}) {
  const norm = (local) => {
    const out = {};
    for (const [k, v] of Object.entries(local)) {
      if (allow.audit && k.startsWith("audit/")) continue;
      if (k === "policy" && v && typeof v === "object" && !Array.isArray(v)) {
        const strip = (list) => (Array.isArray(list) ? list.map((e) => (e && typeof e === "object" ? without(e, "lastSeen") : e)) : list);
        const pending = Array.isArray(v.pending) ? v.pending.filter((e) => !(allow.pendingOf ?? []).includes(e?.id)) : v.pending;
        out[k] = { ...v, allowlist: strip(v.allowlist), pending: strip(pending) };
        continue;
      }
      out[k] = v;
    }
    return out;
  };
  const diffs = [];
  const cmp = (area, a, b) => {
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
      if (canonical(a[k]) !== canonical(b[k])) diffs.push(`${area}[${JSON.stringify(k)}]: ${show(a[k])} -> ${show(b[k])}`);
    }
  };
  cmp("local", norm(before.local), norm(after.local));
  cmp("session", without(before.session, "rateWindow"), without(after.session, "rateWindow"));
  return diffs;
}

// ------------------------------------------------------------------ assertions

/** A probe answer: either Chrome refused to send it (an error at the caller) or ok:false with an error. Never a hang. */
function assertProbeRefused(r, re) {
  assert.ok(!r.timeout, `the caller waited 3 s for an answer: ${show(r)}`);
  if (r.threw !== undefined) {
    assert.ok(r.threw.length > 0, "Chrome's error has a message");
    return;
  }
  assert.equal(r.answer?.ok, false, `expected ok:false, got ${show(r.answer)}`);
  assert.equal(typeof r.answer.error, "string", show(r.answer));
  assert.ok(r.answer.error.length > 0, "the error is not empty");
  if (re) assert.match(r.answer.error, re);
}

function assertRpcError(reply, id, code, re) {
  assert.ok(reply, "a reply arrived");
  assert.equal(reply.jsonrpc, "2.0", show(reply));
  assert.ok(reply.error, `expected a JSON-RPC error, got ${show(reply)}`);
  assert.ok(!("result" in reply), `an error reply has no result: ${show(reply)}`);
  assert.strictEqual(reply.id, id, `id: ${show(reply)}`);
  assert.equal(reply.error.code, code, `error code: ${show(reply)}`);
  assert.equal(typeof reply.error.message, "string");
  assert.ok(reply.error.message.length > 0, "the error message is not empty");
  if (re) assert.match(reply.error.message, re);
}

function assertToolError(r, code, re) {
  assert.ok(!r.error, `expected an isError result; the SDK call failed: ${show(r.error)}`);
  assert.equal(r.isError, true, `isError: ${show(r)}`);
  const codes = Array.isArray(code) ? code : [code];
  assert.ok(codes.includes(r.structuredContent?.error_code), `error_code ${show(r.structuredContent?.error_code)} is one of ${codes}: ${show(r.structuredContent)}`);
  assert.equal(typeof r.structuredContent.message, "string");
  assert.ok(r.structuredContent.message.length > 0);
  if (re) assert.match(r.structuredContent.message, re);
  assert.ok(r.content?.[0]?.text?.includes(r.structuredContent.error_code), `the text names the code: ${show(r.content)}`);
}

// ==================================================================================== battery

describe("battery: bad input is answered with a clear error and changes nothing", () => {
  let h, page, s, rp;
  const scripts = {}; // name -> {uuid, revision, source}
  const panics = [];

  /** Sends a raw L0 message from the host page; {answer} | {threw} | {timeout}. */
  const sendProbe = (message, timeout = 3000) => page.evaluate(async ([id, message, timeout]) => {
    try {
      const r = await Promise.race([chrome.runtime.sendMessage(id, message), new Promise((res) => setTimeout(() => res({ __timeout: true }), timeout))]);
      return r?.__timeout ? { timeout: true } : { answer: r ?? null };
    } catch (e) {
      return { threw: String(e?.message ?? e) };
    }
  }, [PROVIDER_ID, message, timeout]);

  /** A probe whose `path` holds `depth` nested arrays, built in the page (too deep for Playwright to carry). */
  const sendDeep = (depth, { whole = false } = {}) => page.evaluate(async ([id, depth, whole, base]) => {
    let d = [];
    for (let i = 0; i < depth; i++) d = [d];
    const message = whole ? d : { ...base, nested: d };
    try {
      const r = await Promise.race([chrome.runtime.sendMessage(id, message), new Promise((res) => setTimeout(() => res({ __timeout: true }), 3000))]);
      return r?.__timeout ? { timeout: true } : { answer: r ?? null };
    } catch (e) {
      return { threw: String(e?.message ?? e) };
    }
  }, [PROVIDER_ID, depth, whole, probeMsg()]);

  const raw = {
    open: async (name = MCP_PORT) => {
      const p = await h.lumo("rawOpen", PROVIDER_ID, name);
      assert.equal(typeof p, "number", `rawOpen: ${show(p)}`);
      return p;
    },
    send: (p, msg) => h.lumo("rawSend", p, msg),
    messages: (p) => h.lumo("rawMessages", p),
    info: (p) => h.lumo("rawInfo", p),
    /** Sends msg and returns the new messages once one with `id` arrived (or after the timeout). */
    exchange: async (p, msg, id = msg?.id, timeout = 3000) => {
      const n = (await raw.messages(p)).length;
      const sent = await raw.send(p, msg);
      assert.deepEqual(sent, { sent: true }, `rawSend: ${show(sent)}`);
      return until(async () => (await raw.messages(p)).slice(n), (l) => l.some((m) => m.id === id), timeout);
    },
    /** Exactly one reply, with `id`. */
    rpc: async (p, msg, id = msg?.id) => {
      const fresh = await raw.exchange(p, msg, id);
      const reply = fresh.find((m) => m.id === id);
      assert.ok(reply, `no reply with id ${show(id)}; got ${show(fresh)}`);
      assert.equal(fresh.length, 1, `exactly one message in answer: ${show(fresh)}`);
      return reply;
    },
    /** A fresh port that completed initialize. */
    ready: async () => {
      const p = await raw.open();
      const init = await raw.rpc(p, initialize("init"));
      assert.ok(init.result, `initialize: ${show(init)}`);
      assert.deepEqual(await raw.send(p, { jsonrpc: "2.0", method: "notifications/initialized" }), { sent: true });
      return p;
    },
  };

  const call = (name, args) => h.lumo("callTool", s, name, args);

  async function healthy(what) {
    const r = await h.lumo("probe", PROVIDER_ID, { openSession: false });
    assert.equal(r.state, "connected", `${what}: a normal probe afterwards: ${r.text} ${show(r.response)}`);
    const st = await call("status", {});
    assert.equal(st.isError, false, `${what}: a normal tool call afterwards: ${show(st)}`);
    assert.deepEqual(panics, [], `${what}: the provider panicked`);
  }

  before(async () => {
    h = await launch();
    h.watchPanics(panics);
    await h.internal("policy.add", { id: HOST_ID, name: "Lumo Test Host" });
    assert.deepEqual(await h.setUserScriptsAccess(PROVIDER_ID, true), { isEnabled: true, isActive: true });
    page = await h.hostPage();
    const ready = await until(() => h.lumo("probe", PROVIDER_ID, { openSession: false }), (r) => r.state === "connected", 3000);
    assert.equal(ready.state, "connected", `setup: ${ready.text}`);
    s = await h.lumo("connect", PROVIDER_ID);
    assert.equal(typeof s, "number", `setup connect: ${show(s)}`);
    // Battery Bomb: a body of 64 Ki `a`, for the replace-all case below.
    for (const [name, body] of [["Battery A"], ["Battery B"], ["Battery Bomb", `// ${"a".repeat(64 * 1024)}`]]) {
      const source = userscript(name, body === undefined ? {} : { body });
      const w = await call("write_script", { source });
      assert.equal(w.isError, false, `setup write: ${show(w)}`);
      scripts[name] = { uuid: w.structuredContent.script.uuid, revision: w.structuredContent.script.revision, source };
    }
    rp = await raw.ready();
  });
  after(async () => { await h?.close(); });

  const A = () => scripts["Battery A"];

  /**
   * Each case: {name, allow?, run(ctx)}. run asserts (a); the harness of the table asserts (b), (c).
   */
  const cases = [];
  const add = (name, run, allow = {}) => cases.push({ name, run, allow });

  // ---------------------------------------------------------------- L0 probes
  const badProbes = {
    "channel is a number": probeMsg({ channel: 1 }),
    "version is the string \"1\"": probeMsg({ version: "1" }),
    "version is 1.5": probeMsg({ version: 1.5 }),
    "id is an object": probeMsg({ id: { a: 1 } }),
    "id is null": probeMsg({ id: null }),
    "client is a string": probeMsg({ client: "Lumo" }),
    "client.id is a number": probeMsg({}, { id: 5 }),
    "client.id is not an extension id": probeMsg({}, { id: "ABCDEFGHIJKLMNOPABCDEFGHIJKLMNOP" }),
    "client.name is 5": probeMsg({}, { name: 5 }),
    "client.version is a number": probeMsg({}, { version: 1 }),
    "missing version": without(probeMsg(), "version"),
    "missing id": without(probeMsg(), "id"),
    "missing client": without(probeMsg(), "client"),
    "missing client.id": { ...probeMsg(), client: without(probeMsg().client, "id") },
    "non-object 42": 42,
    "non-object []": [],
    "non-object null": null,
    "non-object \"x\"": "x",
    "non-object true": true,
  };
  for (const [what, message] of Object.entries(badProbes)) {
    add(`probe: ${what} -> ok:false`, async () => assertProbeRefused(await sendProbe(message)));
  }

  add("probe: extra fields are accepted (ok:true, authorized)", async () => {
    const r = await sendProbe(probeMsg({ extra: { nested: [1, 2, 3] }, more: "yes" }, { extraClientField: true }));
    assert.equal(r.answer?.ok, true, show(r));
    assert.equal(r.answer.id, "battery");
    assert.equal(r.answer.status?.authorized, true, show(r.answer));
  });

  add("probe: a 100 KB client.name is refused as too large", async () => {
    const r = await sendProbe(probeMsg({}, { name: "n".repeat(100 * 1024) }));
    assertProbeRefused(r, /bytes|large|limit/i);
  });

  add("probe: a 10,000-deep array as the whole message is an error at once, not a hang", async () => {
    assertProbeRefused(await sendDeep(10_000, { whole: true }));
  });

  add("probe: a 10,000-deep array inside a probe is an error at once, not a hang", async () => {
    assertProbeRefused(await sendDeep(10_000));
  });

  add("probe: a small probe nested 200 deep is refused with an error that names the real problem", async () => {
    const r = await sendDeep(200);
    assertProbeRefused(r);
    if (r.answer) {
      assert.doesNotMatch(r.answer.error, /not a JSON object/i, `the probe IS a JSON object; the error should say it is too deeply nested: ${show(r.answer)}`);
      assert.match(r.answer.error, /nested 128 or more levels deep/, show(r.answer));
    }
  });

  // ---------------------------------------------------------------- senders
  add("sender: a page on http://127.0.0.1 cannot reach the provider at all", async () => {
    const server = await startStaticServer();
    const web = await h.context.newPage();
    try {
      await web.goto(`${server.url}/web.html`);
      const got = await web.evaluate(async ([id, message]) => {
        const rt = globalThis.chrome?.runtime;
        const out = { hasRuntime: !!rt, hasSendMessage: typeof rt?.sendMessage === "function", hasConnect: typeof rt?.connect === "function", answers: [] };
        if (out.hasSendMessage) {
          try {
            const a = await Promise.race([rt.sendMessage(id, message), new Promise((r) => setTimeout(() => r("no answer"), 1500))]);
            out.answers.push({ sendMessage: a });
          } catch (e) { out.answers.push({ sendMessageError: e.message }); }
        }
        if (out.hasConnect) {
          try {
            const port = rt.connect(id, { name: "lumo:mcp" });
            out.answers.push(await new Promise((r) => {
              port.onMessage.addListener((m) => r({ portMessage: m }));
              port.onDisconnect.addListener(() => r({ disconnected: true }));
              port.postMessage({ jsonrpc: "2.0", id: 1, method: "ping" });
              setTimeout(() => r({ portSilent: true }), 1500);
            }));
          } catch (e) { out.answers.push({ connectError: e.message }); }
        }
        return out;
      }, [PROVIDER_ID, probeMsg()]);
      assert.equal(got.hasSendMessage, false, `chrome.runtime.sendMessage exists on a web page: ${show(got)}`);
      assert.equal(got.hasConnect, false, `chrome.runtime.connect exists on a web page: ${show(got)}`);
    } finally {
      await web.close();
      await server.close();
    }
  });

  add("sender: the host claiming another extension's client.id grants that id nothing", async () => {
    const r = await sendProbe(probeMsg({}, { id: BROKEN_ID, name: "Claimed Broken" }));
    assert.equal(r.answer?.ok, true, show(r));
    // The answer is about the real sender (the approved host), never about the claimed id.
    assert.equal(r.answer.status.authorized, true, show(r.answer));
    const { policy } = await h.internal("state.get");
    assert.ok(!policy.allowlist.some((c) => c.id === BROKEN_ID), `claimed id not allowlisted: ${show(policy.allowlist)}`);
    assert.ok(!policy.pending.some((c) => c.id === BROKEN_ID), `claimed id not recorded as pending: ${show(policy.pending)}`);
    assert.ok(!policy.allowlist.some((c) => c.name === "Claimed Broken"), "the claimed name did not rename anyone");
  });

  add("sender: the broken fixture claiming the host's client.id is not authorized; its port gets -32001", async () => {
    const broken = h.context.serviceWorkers().find((w) => w.url().startsWith(`chrome-extension://${BROKEN_ID}/`))
      ?? await h.context.waitForEvent("serviceworker", { predicate: (w) => w.url().startsWith(`chrome-extension://${BROKEN_ID}/`), timeout: 5000 });
    const source = userscript("Battery from broken");
    const got = await broken.evaluate(async ([id, probe, init, source]) => {
      const answer = await chrome.runtime.sendMessage(id, probe).catch((e) => ({ threw: e.message }));
      const port = await new Promise((resolve) => {
        const messages = [];
        const p = chrome.runtime.connect(id, { name: "lumo:mcp" });
        p.onMessage.addListener((m) => messages.push(m));
        p.onDisconnect.addListener(() => resolve({ closed: true, messages }));
        p.postMessage(init);
        p.postMessage({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "write_script", arguments: { source } } });
        setTimeout(() => resolve({ closed: false, messages }), 8000);
      });
      return { answer, port };
    }, [PROVIDER_ID, probeMsg({ id: "spoof" }, { id: HOST_ID, name: "Lumo Test Host" }), initialize(1), source]);
    assert.equal(got.answer?.ok, true, show(got));
    assert.equal(got.answer.status.authorized, false, `authorization follows sender.id, not client.id: ${show(got.answer)}`);
    assert.equal(got.port.closed, true, `the provider closed the unauthorized port: ${show(got.port)}`);
    // Both requests get -32001: buffered ones when authorization ends, a later one while the
    // refused port lingers (100 ms after its first answer; both were sent in one turn).
    assert.equal(got.port.messages.length, 2, show(got.port.messages));
    got.port.messages.forEach((m, i) => assertRpcError(m, i + 1, UNAUTHORIZED));
    const { policy } = await h.internal("state.get");
    const pending = policy.pending.filter((c) => c.id === BROKEN_ID);
    assert.equal(pending.length, 1, `the real sender is what is recorded as pending: ${show(policy.pending)}`);
  }, { pendingOf: [BROKEN_ID] });

  // ---------------------------------------------------------------- port names
  for (const [what, name] of [["LUMO:MCP", "LUMO:MCP"], ["\"lumo:mcp \" (trailing space)", "lumo:mcp "], ["lumo:probe", "lumo:probe"], ["a 10 KB name", "lumo:mcp".padEnd(10 * 1024, "x")]]) {
    add(`port: name ${what} is disconnected at once with no reply`, async () => {
      const t0 = Date.now();
      const p = await raw.open(name);
      await raw.send(p, initialize("wrong-name")); // may fail: the port may be gone already
      const info = await until(() => raw.info(p), (i) => i.closed, 2000);
      assert.equal(info.closed, true, `disconnected: ${show(info)}`);
      assert.ok(Date.now() - t0 < 1500, `disconnected after ${Date.now() - t0} ms`);
      await sleep(200);
      assert.deepEqual(await raw.messages(p), [], "no reply");
      const { sessions } = await h.internal("state.get");
      assert.ok(sessions.every((x) => x.state === "ready"), `no half-open session left: ${show(sessions)}`);
    });
  }

  // ---------------------------------------------------------------- raw MCP, approved host
  add("mcp: requests before initialize get -32600 (tools/list, tools/call write_script)", async () => {
    const p = await raw.open();
    try {
      assertRpcError(await raw.rpc(p, { jsonrpc: "2.0", id: "pre-list", method: "tools/list" }), "pre-list", INVALID_REQUEST, /initialize/);
      assertRpcError(await raw.rpc(p, {
        jsonrpc: "2.0", id: "pre-call", method: "tools/call",
        params: { name: "write_script", arguments: { source: userscript("Battery before initialize") } },
      }), "pre-call", INVALID_REQUEST, /initialize/);
      assert.equal((await raw.info(p)).closed, false, "the port stays open");
    } finally {
      await h.lumo("rawClose", p);
    }
  });

  add("mcp: messages after the host closed the port go nowhere and break nothing", async () => {
    const p = await raw.ready();
    await h.lumo("rawClose", p);
    const sent = await raw.send(p, { jsonrpc: "2.0", id: "after-close", method: "tools/call", params: { name: "delete_script", arguments: { uuid: A().uuid } } });
    // Chrome refuses to post on a port the host disconnected: the message never leaves.
    assert.match(String(sent.error?.message), /disconnected port/i, show(sent));
    await sleep(300);
    assert.ok(!(await raw.messages(p)).some((m) => m.id === "after-close"), "no answer on a closed port");
    // The delete did not run (the table below also checks every script is whole).
    const got = await call("get_script", { uuid: A().uuid });
    assert.equal(got.isError, false, show(got));
  });

  add("mcp: duplicate ids are each answered", async () => {
    const n = (await raw.messages(rp)).length;
    for (let i = 0; i < 2; i++) assert.deepEqual(await raw.send(rp, { jsonrpc: "2.0", id: "dup", method: "ping" }), { sent: true });
    for (let i = 0; i < 2; i++) assert.deepEqual(await raw.send(rp, { jsonrpc: "2.0", id: 77, method: "tools/call", params: { name: "status", arguments: {} } }), { sent: true });
    const fresh = await until(async () => (await raw.messages(rp)).slice(n), (l) => l.length >= 4, 3000);
    assert.equal(fresh.filter((m) => m.id === "dup" && m.result).length, 2, show(fresh));
    assert.equal(fresh.filter((m) => m.id === 77 && m.result?.isError === false).length, 2, show(fresh));
    await sleep(200);
    assert.equal((await raw.messages(rp)).length, n + 4, "no extra message");
  });

  add("mcp: string and number ids are echoed exactly", async () => {
    for (const id of ["s", "", "0", 0, -1, 2.5, 2 ** 53 - 1]) {
      const r = await raw.rpc(rp, { jsonrpc: "2.0", id, method: "ping" }, id);
      assert.strictEqual(r.id, id);
      assert.deepEqual(r.result, {});
    }
  });

  for (const [what, id] of [["null", null], ["an object", { a: 1 }], ["an array", [1]], ["true", true], ["false", false]]) {
    add(`mcp: id ${what} -> -32600 with id null`, async () => {
      const reply = await raw.rpc(rp, { jsonrpc: "2.0", id, method: "tools/call", params: { name: "delete_script", arguments: { uuid: A().uuid } } }, null);
      assertRpcError(reply, null, INVALID_REQUEST, /id/);
    });
  }

  add("mcp: a payload over 1 MiB -> -32600 naming the size; the port stays usable", async () => {
    const big = { jsonrpc: "2.0", id: "big", method: "tools/call", params: { name: "write_script", arguments: { source: userscript("Battery big", { body: `// ${"x".repeat(1100 * 1024)}` }) } } };
    const fresh = await raw.exchange(rp, big, null, 5000);
    const reply = fresh.find((m) => m.id === null || m.id === "big");
    assert.ok(reply, `an answer to the oversized message: ${show(fresh)}`);
    assertRpcError(reply, reply.id, INVALID_REQUEST, /bytes|limit|large/i);
    assert.ok(/\d/.test(reply.error.message), `the message names the size: ${reply.error.message}`);
    const ping = await raw.rpc(rp, { jsonrpc: "2.0", id: "after-big", method: "ping" });
    assert.deepEqual(ping.result, {});
    assert.equal((await raw.info(rp)).closed, false);
  });

  add("mcp: a batch -> -32600 once, no element run", async () => {
    const reply = await raw.rpc(rp, [
      { jsonrpc: "2.0", id: "b1", method: "tools/call", params: { name: "delete_script", arguments: { uuid: A().uuid } } },
      { jsonrpc: "2.0", id: "b2", method: "ping" },
    ], null);
    assertRpcError(reply, null, INVALID_REQUEST, /batch/i);
    await sleep(200);
    assert.ok(!(await raw.messages(rp)).some((m) => m.id === "b1" || m.id === "b2"), "no batch element answered");
  });

  add("mcp: a lone surrogate inside a tool argument gets an answer the host can match to its request", async () => {
    const fresh = await raw.exchange(rp, {
      jsonrpc: "2.0", id: "surrogate", method: "tools/call",
      params: { name: "validate_script", arguments: { source: header(["// @name lone \uD800 surrogate", "// @match https://example.com/*"]) } },
    }, "surrogate", 3000);
    const reply = fresh.find((m) => m.id === "surrogate");
    assert.ok(reply, `no reply with id "surrogate" (the host's request stays pending until its own timeout); got ${show(fresh)}`);
    // The surrogate reads as U+FFFD, so the source is validated like any other.
    assert.equal(reply.result?.isError, false, `validated: ${show(reply)}`);
    assert.equal(reply.result.structuredContent.valid, true, show(reply.result.structuredContent));
  });

  add("mcp: a lone surrogate through the official SDK client is answered, not left to time out", async () => {
    const r = await page.evaluate(async ([s, source]) => Promise.race([
      window.lumo.callTool(s, "get_script", { uuid: source }),
      new Promise((res) => setTimeout(() => res({ timeout: true }), 5000)),
    ]), [s, "\uDC00"]);
    assert.ok(!r.timeout, "callTool with a lone surrogate in an argument had no answer after 5 s");
    // "\uDC00" reads as "\uFFFD": a bad uuid, said as such.
    assertToolError(r, "INVALID_ARGUMENTS", /uuid/);
  });

  add("mcp: unknown method -> -32601", async () => {
    assertRpcError(await raw.rpc(rp, { jsonrpc: "2.0", id: "um", method: "scripts/deleteAll" }), "um", METHOD_NOT_FOUND, /scripts\/deleteAll/);
  });

  add("mcp: params not an object -> -32602", async () => {
    assertRpcError(await raw.rpc(rp, { jsonrpc: "2.0", id: "p1", method: "ping", params: "x" }), "p1", INVALID_PARAMS, /params/);
    assertRpcError(await raw.rpc(rp, { jsonrpc: "2.0", id: "p2", method: "tools/call", params: ["delete_script", { uuid: A().uuid }] }), "p2", INVALID_PARAMS, /params/);
    assertRpcError(await raw.rpc(rp, { jsonrpc: "2.0", id: "p3", method: "tools/call", params: 7 }), "p3", INVALID_PARAMS, /params/);
  });

  add("mcp: tools/call of an unknown tool -> -32602 naming it", async () => {
    assertRpcError(await raw.rpc(rp, { jsonrpc: "2.0", id: "ut", method: "tools/call", params: { name: "eval_js", arguments: {} } }), "ut", INVALID_PARAMS, /eval_js/);
  });

  add("mcp: envelope errors (jsonrpc missing, method a number) -> -32600", async () => {
    assertRpcError(await raw.rpc(rp, { id: "e1", method: "ping" }), "e1", INVALID_REQUEST, /jsonrpc/);
    assertRpcError(await raw.rpc(rp, { jsonrpc: "2.0", id: "e2", method: 5 }), "e2", INVALID_REQUEST, /method/);
  });

  // ---------------------------------------------------------------- tool arguments
  const toolCase = (what, name, args, code, re, allow) => add(`tool: ${name} ${what} -> ${Array.isArray(code) ? code.join("|") : code}`, async () => {
    assertToolError(await call(name, typeof args === "function" ? args() : args), code, re);
  }, allow);
  const W = { audit: true }; // write tools are audited whatever the result

  toolCase("source is a number", "write_script", { source: 42 }, "INVALID_ARGUMENTS", /source|string/, W);
  toolCase("missing source", "write_script", {}, "INVALID_ARGUMENTS", /source/, W);
  toolCase("enabled is a string", "set_script_enabled", () => ({ uuid: A().uuid, enabled: "yes" }), "INVALID_ARGUMENTS", /bool/i, W);
  toolCase("uuid is a number", "get_script", { uuid: 5 }, "INVALID_ARGUMENTS");
  toolCase("edits is an object", "patch_script", () => ({ uuid: A().uuid, revision: A().revision, edits: { search: "a", replace: "b" } }), "INVALID_ARGUMENTS", null, W);
  toolCase("limit: 0", "list_scripts", { limit: 0 }, "INVALID_ARGUMENTS", /limit/);
  toolCase("limit: 1e9", "list_scripts", { limit: 1e9 }, "INVALID_ARGUMENTS", /limit 1000000000 is over the page size of 100: ask for at most 100, and page on with nextCursor/);
  toolCase("limit: -1", "list_scripts", { limit: -1 }, "INVALID_ARGUMENTS");
  toolCase("revision: -1", "set_script_enabled", () => ({ uuid: A().uuid, enabled: false, revision: -1 }), "INVALID_ARGUMENTS", /-1|revision/, W);
  toolCase("revision: 1.5", "set_script_enabled", () => ({ uuid: A().uuid, enabled: false, revision: 1.5 }), "INVALID_ARGUMENTS", /1\.5|revision/, W);
  toolCase("revision: 0", "delete_script", () => ({ uuid: A().uuid, revision: 0 }), "INVALID_ARGUMENTS", /revision/, W);
  toolCase("revision: 2^64", "delete_script", () => ({ uuid: A().uuid, revision: 2 ** 64 }), "INVALID_ARGUMENTS", /expected u64/, W);
  toolCase("unknown property", "write_script", () => ({ source: userscript("Battery unknown prop"), bogus: 1 }), "INVALID_ARGUMENTS", /bogus/, W);
  toolCase("unknown property on a read tool", "status", { verbose: true }, "INVALID_ARGUMENTS", /verbose/);
  toolCase("unknown property inside an edit", "patch_script", () => ({ uuid: A().uuid, revision: A().revision, edits: [{ search: "console", replace: "window", regex: true }] }), "INVALID_ARGUMENTS", /regex/, W);
  toolCase("source over 256 KiB", "write_script", () => ({ source: userscript("Battery huge", { body: `// ${"x".repeat(300 * 1024)}` }) }), "PAYLOAD_TOO_LARGE", /bytes|limit/, W);
  toolCase("source over 256 KiB", "validate_script", () => ({ source: userscript("Battery huge", { body: `// ${"x".repeat(300 * 1024)}` }) }), "PAYLOAD_TOO_LARGE", /bytes|limit/);
  toolCase("replacing with a source over 256 KiB", "write_script", () => ({ uuid: A().uuid, revision: A().revision, source: userscript("Battery A", { body: `// ${"y".repeat(300 * 1024)}` }) }), "PAYLOAD_TOO_LARGE", /bytes|limit/, W);
  toolCase("51 edits", "patch_script", () => ({ uuid: A().uuid, revision: A().revision, edits: Array.from({ length: 51 }, (_, i) => ({ search: `nope-${i}`, replace: "x" })) }), "PAYLOAD_TOO_LARGE", /51|50/, W);
  add("tool: patch_script replace-all that would build 16 GiB -> PAYLOAD_TOO_LARGE at once; the provider stays up", async () => {
    // Each of the 64 Ki `a` replaced by just under 256 KiB: refused from the count, never built
    // (building it exhausted the wasm memory and trapped the module for every caller).
    const bomb = scripts["Battery Bomb"];
    const t0 = Date.now();
    const r = await call("patch_script", { uuid: bomb.uuid, revision: bomb.revision, edits: [{ search: "a", replace: "b".repeat(256 * 1024 - 1), all: true }] });
    assertToolError(r, "PAYLOAD_TOO_LARGE", /edit 1 .*limit/);
    assert.ok(Date.now() - t0 < 3000, `answered after ${Date.now() - t0} ms`);
    const st = await call("status", {});
    assert.equal(st.isError, false, `the same session still answers: ${show(st)}`);
  }, W);
  toolCase("an empty search", "patch_script", () => ({ uuid: A().uuid, revision: A().revision, edits: [{ search: "", replace: "x" }] }), "INVALID_ARGUMENTS", /search/, W);
  toolCase("a search that does not occur", "patch_script", () => ({ uuid: A().uuid, revision: A().revision, edits: [{ search: "no such text anywhere", replace: "x" }] }), "INVALID_ARGUMENTS", /not found/, W);
  toolCase("a stale revision", "write_script", () => ({ uuid: A().uuid, revision: A().revision + 5, source: userscript("Battery A", { body: "stale();" }) }), "CONFLICT", /revision/, W);
  toolCase("a duplicate @name/@namespace", "write_script", () => ({ source: userscript("Battery A", { body: "dupe();" }) }), "CONFLICT", /already exists/, W);
  toolCase("uuid without revision", "write_script", () => ({ uuid: A().uuid, source: userscript("Battery A", { body: "norev();" }) }), "INVALID_ARGUMENTS", /revision/, W);
  toolCase("an unknown (well-formed) uuid", "delete_script", { uuid: NO_SUCH_UUID }, "NOT_FOUND", new RegExp(NO_SUCH_UUID), W);
  toolCase("a cursor that is not one", "list_scripts", { cursor: "abc" }, "INVALID_ARGUMENTS", /cursor/);
  toolCase("a 201-character query", "list_scripts", { query: "q".repeat(201) }, "PAYLOAD_TOO_LARGE", /query/);
  toolCase("a relative URL", "match_url", { url: "/just/a/path" }, "INVALID_ARGUMENTS", /url|URL/);
  toolCase("a 5 KB URL", "match_url", { url: `https://example.com/${"p".repeat(5000)}` }, "PAYLOAD_TOO_LARGE", /URL|url/);

  const badUuids = ["not-a-uuid", "", " ", "../policy", "script/../policy", "00000000-0000-4000-8000-00000000000", "00000000-0000-4000-8000-0000000000000",
    "00000000-0000-4000-8000-00000000000G", "00000000-0000-4000-8000-00000000000A", " 00000000-0000-4000-8000-000000000000", "00000000_0000_4000_8000_000000000000", "x".repeat(10_000)];
  for (const tool of ["get_script", "set_script_enabled", "delete_script", "patch_script"]) {
    add(`tool: ${tool} with ${badUuids.length} bad uuid strings -> INVALID_ARGUMENTS each`, async () => {
      for (const uuid of badUuids) {
        const args = { get_script: { uuid }, set_script_enabled: { uuid, enabled: false }, delete_script: { uuid }, patch_script: { uuid, revision: 1, edits: [{ search: "a", replace: "b" }] } }[tool];
        const r = await call(tool, args);
        assertToolError(r, "INVALID_ARGUMENTS", /uuid/);
        assert.ok(r.structuredContent.message.length < 400, `the message does not echo a huge uuid: ${r.structuredContent.message.length} chars`);
      }
    }, tool === "get_script" ? {} : W);
  }

  // ---------------------------------------------------------------- pathological metadata
  const prompt = async (fn, ms = 3000) => {
    const t0 = Date.now();
    const r = await fn();
    assert.ok(Date.now() - t0 < ms, `answered after ${Date.now() - t0} ms`);
    return r;
  };
  add("metadata: a catastrophic @include /(a+)+$/ is refused at its line, promptly (match_url would evaluate it)", async () => {
    const r = await prompt(() => call("validate_script", { source: header(["// @name Battery regex", "// @include /(a+)+$/", "// @match https://example.com/*"]) }));
    assert.equal(r.isError, false, show(r));
    assert.equal(r.structuredContent.valid, false);
    const err = r.structuredContent.diagnostics.find((d) => d.line === 3);
    assert.ok(err && err.severity === "error" && /exponential/i.test(err.message), `an error on line 3: ${show(r.structuredContent.diagnostics)}`);
  });

  add("metadata: 3000 @match lines -> INVALID_METADATA naming the line past the cap of 256", async () => {
    const lines = ["// @name Battery many matches", ...Array.from({ length: 3000 }, (_, i) => `// @match https://h${i}.example.com/*`)];
    const r = await prompt(() => call("write_script", { source: header(lines) }));
    assertToolError(r, "INVALID_METADATA", /256/);
    const errors = r.structuredContent.details?.diagnostics?.filter((d) => d.severity === "error") ?? [];
    // line 1 header, line 2 @name, @match lines from line 3: the 257th is on line 259.
    assert.ok(errors.some((d) => d.line === 259), `an error on line 259: ${show(errors)}`);
    assert.match(r.structuredContent.message, /line 259/);
  }, W);

  add("metadata: a @match with a 5 KB host is answered promptly and clearly", async () => {
    const r = await prompt(() => call("validate_script", { source: header(["// @name Battery big host", `// @match https://${"a".repeat(5 * 1024)}.com/*`]) }));
    assert.equal(r.isError, false, show(r));
    assert.equal(typeof r.structuredContent.valid, "boolean");
    if (!r.structuredContent.valid) assert.ok(r.structuredContent.diagnostics.some((d) => d.severity === "error" && d.line === 3), show(r.structuredContent.diagnostics));
  });

  add("metadata: a 200 KB source with the header at the end is parsed promptly", async () => {
    const source = `${"// filler line\n".repeat(200 * 1024 / 15)}${header(["// @name Battery late header", "// @match https://example.com/*"], "late();")}`;
    assert.ok(source.length > 200 * 1024 && source.length < 256 * 1024);
    const r = await prompt(() => call("validate_script", { source }));
    assert.equal(r.isError, false, show(r));
    assert.equal(r.structuredContent.valid, true, show(r.structuredContent.diagnostics));
    assert.equal(r.structuredContent.metadata.name, "Battery late header");
  });

  add("metadata: NUL and an RTL override in @name are removed with a warning; Hebrew and emoji stay", async () => {
    const name = "Bat\u0000tery \u202Edrow\u202C \u05E9\u05DC\u05D5\u05DD 🎉👩‍👩‍👧";
    const r = await prompt(() => call("validate_script", { source: header([`// @name ${name}`, "// @match https://example.com/*"]) }));
    assert.equal(r.isError, false, show(r));
    assert.equal(r.structuredContent.valid, true, show(r.structuredContent.diagnostics));
    // The name is what the user reads in the review popup: nothing may reorder or hide text.
    assert.equal(r.structuredContent.metadata.name, "Battery drow \u05E9\u05DC\u05D5\u05DD 🎉👩‍👩‍👧");
    assert.ok(r.structuredContent.diagnostics.some((d) => d.severity === "warning" && d.line === 2 && /text-direction/.test(d.message)), show(r.structuredContent.diagnostics));
  });

  add("metadata: no header -> INVALID_METADATA", async () => {
    assertToolError(await call("write_script", { source: "console.log('no header');" }), "INVALID_METADATA", /header/);
  }, W);

  add("metadata: a header that never closes -> INVALID_METADATA naming its line", async () => {
    assertToolError(await call("write_script", { source: "\n\n// ==UserScript==\n// @name Battery open\n" }), "INVALID_METADATA", /line 3/);
  }, W);

  add("metadata: an invalid @match pattern -> INVALID_METADATA naming its line", async () => {
    assertToolError(await call("write_script", { source: header(["// @name Battery bad match", "// @match not a pattern"]) }), "INVALID_METADATA", /line 3/);
  }, W);

  // ---------------------------------------------------------------- run the table
  test(`the battery has at least 40 cases (${cases.length})`, () => assert.ok(cases.length >= 40));

  for (const c of cases) {
    test(c.name, T, async () => {
      const auditBefore = (await h.internal("audit.list")).entries.length;
      const before = await snapshot(h);
      await c.run();
      await sleep(50); // a write the case should not have caused would land by now
      const after = await snapshot(h);
      const diffs = forbiddenChanges(before, after, c.allow);
      assert.deepEqual(diffs, [], "storage changed where the case may not change it");
      if (c.allow.audit) {
        // What the case may change is exactly the audit log, and only by appending refusals.
        const entries = (await h.internal("audit.list")).entries;
        const fresh = entries.slice(0, entries.length - auditBefore); // newest first
        assert.ok(fresh.every((e) => e.result !== "ok" && e.caller === HOST_ID), `a refused call was audited as ok: ${show(fresh)}`);
      }
      // The stored scripts are exactly the two set up (both whole).
      const list = await h.internal("scripts.list");
      assert.deepEqual(list.problems, []);
      assert.deepEqual(list.scripts.map((x) => x.uuid).sort(), Object.values(scripts).map((x) => x.uuid).sort());
      for (const { uuid, revision, source } of Object.values(scripts)) {
        const got = await call("get_script", { uuid });
        assert.equal(got.structuredContent?.script?.source, source, `${uuid}: source unchanged`);
        assert.equal(got.structuredContent.script.revision, revision, `${uuid}: revision unchanged`);
      }
      await healthy(c.name);
    });
  }

  test("the provider logged no panic", () => assert.deepEqual(panics, []));
});

// ==================================================================================== corrupted storage

describe("battery: records hand-corrupted in storage, worker restarted from storage", () => {
  let h, s, pp;
  const made = {};
  const panics = [];
  const call = (name, args) => h.lumo("callTool", s, name, args);
  const ok = async (name, args) => {
    const r = await call(name, args);
    assert.equal(r.isError, false, `${name}: ${show(r)}`);
    return r.structuredContent;
  };
  const store = {
    get: (keys) => pp.evaluate((keys) => chrome.storage.local.get(keys), keys),
    set: (items) => pp.evaluate((items) => chrome.storage.local.set(items), items),
  };

  /** Writes `items`, stops the worker so the next message starts it from storage, and returns what was there before. */
  async function corrupt(items) {
    const before = await store.get(Object.keys(items));
    await store.set(items);
    await h.stopProviderWorker();
    return before;
  }

  async function answering(what) {
    const r = await h.lumo("probe", PROVIDER_ID, { openSession: false });
    assert.equal(r.response?.ok, true, `${what}: the probe is answered: ${show(r)}`);
    return r;
  }

  const listed = async () => {
    const r = await call("list_scripts", {});
    assert.equal(r.isError, false, show(r));
    return { uuids: r.structuredContent.scripts.map((x) => x.uuid), text: r.content[0].text };
  };

  before(async () => {
    h = await launch();
    h.watchPanics(panics);
    await h.internal("policy.add", { id: HOST_ID, name: "Lumo Test Host" });
    assert.deepEqual(await h.setUserScriptsAccess(PROVIDER_ID, true), { isEnabled: true, isActive: true });
    s = await h.lumo("connect", PROVIDER_ID);
    assert.equal(typeof s, "number", show(s));
    pp = await h.providerPage();
  });
  after(async () => { await h?.close(); });

  async function twoScripts(tag) {
    const out = [];
    for (const n of ["good", "other"]) {
      const source = userscript(`Corrupt ${tag} ${n}`);
      const w = await ok("write_script", { source });
      out.push({ uuid: w.script.uuid, source, revision: w.script.revision });
    }
    made[tag] = out;
    return out;
  }

  test("script/<uuid> garbage: reported and skipped; the other script is listed, readable and writable", T, async () => {
    const [bad, good] = await twoScripts("record");
    const saved = await corrupt({ [`script/${bad.uuid}`]: { garbage: true, uuid: 5 } });
    await answering("after a damaged record");
    const { uuids, text } = await listed();
    assert.ok(uuids.includes(good.uuid), `the good script is listed: ${text}`);
    assert.ok(!uuids.includes(bad.uuid), "the damaged one is skipped");
    assert.match(text, /could not be read/i, "list_scripts says a record could not be read");
    const internal = await h.internal("scripts.list");
    assert.ok(internal.problems.some((p) => p.uuid === bad.uuid && p.message.length > 0), `scripts.list reports it in problems: ${show(internal.problems)}`);
    assert.ok(internal.scripts.some((x) => x.uuid === good.uuid));
    const g = await ok("get_script", { uuid: good.uuid });
    assert.equal(g.script.source, good.source);
    const damaged = await call("get_script", { uuid: bad.uuid });
    assert.equal(damaged.isError, true, `get_script of the damaged record is a clear error: ${show(damaged)}`);
    assert.ok(damaged.structuredContent.message.length > 0);
    const t = await ok("set_script_enabled", { uuid: good.uuid, enabled: false, revision: good.revision });
    assert.equal(t.script.revision, good.revision + 1);
    // The damaged record was not silently deleted: the user can still see and fix it.
    assert.deepEqual((await store.get(`script/${bad.uuid}`))[`script/${bad.uuid}`], { garbage: true, uuid: 5 });
    await store.set(saved); // repair for the next tests
  });

  test("source/<uuid> garbage: get_script says so clearly; listing and the other script are unaffected", T, async () => {
    const [bad, good] = await twoScripts("source");
    const saved = await corrupt({ [`source/${bad.uuid}`]: { not: "a string" } });
    await answering("after a damaged source");
    const r = await call("get_script", { uuid: bad.uuid });
    assert.equal(r.isError, true, show(r));
    assert.match(r.structuredContent.message, /source/i);
    const { uuids } = await listed();
    assert.ok(uuids.includes(good.uuid) && uuids.includes(bad.uuid), "both records are still listed");
    assert.equal((await ok("get_script", { uuid: good.uuid })).script.source, good.source);
    await store.set(saved);
  });

  for (const [what, garbage] of [["a string", "garbage"], ["{uuids: 5}", { uuids: 5 }]]) {
    test(`scripts/index is ${what}: the scripts are not lost (listed, or the damage is reported; still registered)`, T, async () => {
      await twoScripts(`index ${what}`);
      const scripts = (await h.internal("scripts.list")).scripts;
      const all = scripts.map((x) => x.uuid);
      const enabled = scripts.filter((x) => x.enabled).map((x) => x.uuid);
      const registered = () => pp.evaluate(async () => (await chrome.userScripts.getScripts()).map((x) => x.id));
      const regBefore = await until(registered, (l) => enabled.every((u) => l.includes(u)), 3000);
      assert.deepEqual([...regBefore].sort(), [...enabled].sort(), "setup: every enabled script is registered");
      // Every check runs, so the report shows all consequences at once.
      const problems = [];
      const saved = await corrupt({ "scripts/index": garbage });
      try {
        await answering("after a damaged index");
        const { uuids, text } = await listed();
        const internal = await h.internal("scripts.list");
        const missing = all.filter((u) => !uuids.includes(u));
        if (!(missing.length === 0 || /could not be read|damaged|index/i.test(text) || internal.problems.length > 0)) {
          problems.push(`list_scripts shows ${uuids.length} of ${all.length} scripts and reports nothing (text ${show(text)}, scripts.list problems ${show(internal.problems)})`);
        }
        for (const u of all) {
          const g = await call("get_script", { uuid: u });
          if (g.isError !== false) problems.push(`${u} is no longer readable: ${show(g)}`);
        }
        const regAfter = await registered();
        const unregistered = enabled.filter((u) => !regAfter.includes(u));
        if (unregistered.length) problems.push(`${unregistered.length} of ${all.length} scripts were unregistered from chrome.userScripts (they stopped running)`);
        // The next write must not make the others unreachable for good.
        const w = await ok("write_script", { source: userscript(`Corrupt index ${what} new`) });
        const after = await listed();
        const lost = all.filter((u) => !after.uuids.includes(u));
        const reported = (await h.internal("scripts.list")).problems.map((p) => p.uuid);
        const silent = lost.filter((u) => !reported.includes(u));
        const index = (await store.get("scripts/index"))["scripts/index"];
        if (silent.length) problems.push(`after one more write_script, ${silent.length} earlier scripts are neither listed nor reported; the stored index is now ${show(index)}`);
        await ok("delete_script", { uuid: w.script.uuid });
      } finally {
        await store.set(saved);
        await h.stopProviderWorker(); // the next start reconciles registrations from the repaired index
      }
      assert.deepEqual(problems, [], "a damaged scripts/index");
    });
  }

  // A removed key is damage too: read as "no scripts", they left the options page and Chrome,
  // the next write stored an index of itself alone, and the next purge (Empty trash) swept the
  // others' records and sources as ownerless — lost for good.
  test("scripts/index removed: the scripts stay listed and registered; a write and an Empty trash after lose none", T, async () => {
    await twoScripts("index removed");
    const scripts = (await h.internal("scripts.list")).scripts;
    const all = scripts.map((x) => x.uuid);
    const enabled = scripts.filter((x) => x.enabled).map((x) => x.uuid);
    const registered = () => pp.evaluate(async () => (await chrome.userScripts.getScripts()).map((x) => x.id));
    await until(registered, (l) => enabled.every((u) => l.includes(u)), 3000);
    const { "scripts/index": saved } = await store.get("scripts/index");
    await pp.evaluate(() => chrome.storage.local.remove("scripts/index"));
    await h.stopProviderWorker();
    const problems = [];
    try {
      await answering("after the index was removed");
      const internal = await h.internal("scripts.list");
      const shown = internal.scripts.map((x) => x.uuid);
      if (all.some((u) => !shown.includes(u))) problems.push(`the options page lists ${shown.length} of ${all.length} scripts`);
      if (!internal.problems.some((p) => p.uuid === "scripts/index" && /missing/.test(p.message))) problems.push(`the missing index is not reported: ${show(internal.problems)}`);
      const regAfter = await registered();
      const unregistered = enabled.filter((u) => !regAfter.includes(u));
      if (unregistered.length) problems.push(`${unregistered.length} scripts were unregistered from chrome.userScripts`);
      const w = await ok("write_script", { source: userscript("Corrupt index removed new") });
      await ok("delete_script", { uuid: w.script.uuid });
      await h.internal("trash.purge", { listed: [w.script.uuid] });
      const keys = all.flatMap((u) => [`script/${u}`, `source/${u}`]);
      const kept = await store.get(keys);
      const lost = keys.filter((k) => !(k in kept));
      if (lost.length) problems.push(`after a write and Empty trash, these keys are gone for good: ${show(lost)}`);
      const index = (await store.get("scripts/index"))["scripts/index"];
      if (all.some((u) => !index?.uuids?.includes(u))) problems.push(`the stored index leaves scripts out: ${show(index)}`);
    } finally {
      await store.set({ "scripts/index": saved });
      await h.stopProviderWorker();
    }
    assert.deepEqual(problems, [], "a removed scripts/index");
  });

  // The same for the trash's list: removed (or not a list), the trashed scripts left the Trash
  // view, the next delete stored a list of itself alone, and the purge after it swept them as
  // ownerless within their 30 days.
  for (const [what, garbage] of [["removed", undefined], ["{items: \"x\"}", { items: "x" }]]) {
    test(`trash/index ${what}: the trashed scripts stay in the Trash view; a delete and a purge after lose none`, T, async () => {
      // By hand (the user's writes are not rate-limited; the suite's agent writes are).
      const save = async (name) => (await h.internal("scripts.save", { source: userscript(name) })).result.script;
      const [a, b] = [await save(`Corrupt trash index ${what} a`), await save(`Corrupt trash index ${what} b`)];
      for (const x of [a, b]) await h.internal("scripts.delete", { uuid: x.uuid });
      const trashed = async () => (await h.internal("trash.list")).scripts.map((x) => x.uuid);
      const before = await trashed();
      assert.ok([a.uuid, b.uuid].every((u) => before.includes(u)), `setup: both in the trash: ${show(before)}`);
      const { "trash/index": saved } = await store.get("trash/index");
      if (garbage === undefined) await pp.evaluate(() => chrome.storage.local.remove("trash/index"));
      else await store.set({ "trash/index": garbage });
      await h.stopProviderWorker();
      const problems = [];
      try {
        await answering(`after trash/index was ${what}`);
        const shown = await trashed();
        if (![a.uuid, b.uuid].every((u) => shown.includes(u))) problems.push(`the Trash view lists ${show(shown)}, not both trashed scripts`);
        const c = await save(`Corrupt trash index ${what} c`);
        await h.internal("scripts.delete", { uuid: c.uuid });
        await h.internal("trash.purge", { uuids: [c.uuid] });
        const keys = [a, b].map((x) => `trash/${x.uuid}`);
        const kept = await store.get(keys);
        const lost = keys.filter((k) => !(k in kept));
        if (lost.length) problems.push(`after a delete and a purge, these trashed scripts are gone for good: ${show(lost)}`);
        const after = await trashed();
        if (![a.uuid, b.uuid].every((u) => after.includes(u))) problems.push(`after a delete and a purge the Trash view lists ${show(after)}`);
        // Both can still be brought back.
        for (const x of (await h.internal("trash.list")).scripts.filter((x) => x.uuid === a.uuid || x.uuid === b.uuid)) {
          const r = await h.internal("scripts.restore", { uuid: x.uuid, revision: x.revision, currentRevision: x.revision }).catch((e) => ({ error: String(e) }));
          if (r.ok !== true) problems.push(`${x.uuid} cannot be restored: ${show(r)}`);
        }
      } finally {
        const now = (await store.get("trash/index"))["trash/index"];
        if (!Array.isArray(now?.items)) await store.set({ "trash/index": saved ?? { items: [] } });
        await h.stopProviderWorker();
      }
      assert.deepEqual(problems, [], `trash/index ${what}`);
    });
  }

  test("scripts/index naming non-strings and unknown uuids: the valid ones are listed, the rest reported", T, async () => {
    const all = (await h.internal("scripts.list")).scripts.map((x) => x.uuid);
    const saved = await corrupt({ "scripts/index": { uuids: [42, null, ...all, NO_SUCH_UUID] } });
    try {
      await answering("after a partly damaged index");
      const { uuids } = await listed();
      assert.deepEqual([...uuids].sort(), [...all].sort(), "every real script listed");
      const internal = await h.internal("scripts.list");
      assert.ok(internal.problems.some((p) => p.uuid === NO_SUCH_UUID), `the dangling uuid is reported: ${show(internal.problems)}`);
    } finally {
      await store.set(saved);
    }
  });

  test("policy with wrong-typed fields: the valid parts survive, the provider keeps answering", T, async () => {
    const { policy } = await store.get("policy");
    const saved = await corrupt({ policy: { ...policy, writesEnabled: "yes", reviewWrites: 1, allowlist: [...policy.allowlist, { id: 5 }, "junk"], pending: "x", denied: { a: 1 } } });
    try {
      const r = await answering("after a damaged policy");
      assert.equal(r.response.status.authorized, true, `the valid allowlist entry survives: ${show(r.response)}`);
      const st = await ok("status", {});
      assert.equal(st.writesEnabled, true, "a wrong-typed switch takes its default");
      assert.equal(st.reviewWrites, false);
      assert.ok((await listed()).uuids.length >= 2, "scripts intact");
    } finally {
      await store.set(saved);
    }
  });

  test("policy that is not an object: fails closed (nobody authorized) and keeps answering; scripts intact", T, async () => {
    const before = (await h.internal("scripts.list")).scripts.map((x) => x.uuid).sort();
    const saved = await corrupt({ policy: "garbage" });
    try {
      const r = await answering("after a policy that is a string");
      assert.equal(r.response.status.authorized, false, `fails closed: ${show(r.response)}`);
      const c = await call("status", {});
      // The worker restarted, so the host reconnects; its initialize is refused with the reason.
      assert.equal(c.error?.code, -32001, `no tool runs: ${show(c)}`);
      assert.deepEqual((await h.internal("scripts.list")).scripts.map((x) => x.uuid).sort(), before, "scripts intact");
    } finally {
      await store.set(saved);
      await h.internal("policy.add", { id: HOST_ID, name: "Lumo Test Host" });
    }
    const again = await h.lumo("probe", PROVIDER_ID, { openSession: false });
    assert.equal(again.response?.status?.authorized, true, "repaired");
  });

  test("a lone surrogate in stored policy: the change is read (writes turned off take effect at once)", T, async () => {
    // Stored by another hand while the worker runs. Checked against Chrome 156: storage keeps
    // valid UTF-8 only, so the lone surrogate is already U+FFFD in storage and in onChanged (the
    // build before from_js repaired surrogates passes this too); what this guards is that such
    // a change still reaches the provider's cache and the stored policy is read.
    const { policy } = await store.get("policy");
    try {
      await pp.evaluate((policy) => chrome.storage.local.set({
        policy: { ...policy, writesEnabled: false, allowlist: policy.allowlist.map((c) => ({ ...c, name: `Host ${String.fromCharCode(0xd800)}` })) },
      }), policy);
      const { policy: seen } = await until(() => h.internal("state.get"), (x) => x.policy.writesEnabled === false, 3000);
      assert.equal(seen.writesEnabled, false, `the provider saw the change: ${show(seen)}`);
      const r = await call("write_script", { source: userscript("Surrogate policy") });
      assert.equal(r.structuredContent?.error_code, "WRITE_DISABLED", `the stored switch is in force: ${show(r)}`);
      assert.ok(seen.allowlist.some((c) => c.name.includes("\uFFFD")), `read with U+FFFD: ${show(seen.allowlist)}`);
    } finally {
      await store.set({ policy });
    }
    const back = await until(() => h.internal("state.get"), (x) => x.policy.writesEnabled === true, 3000);
    assert.equal(back.policy.writesEnabled, true);
  });

  test("a lone surrogate in an internal message from the options page: answered, stored as U+FFFD", T, async () => {
    const other = "c".repeat(32);
    const res = await pp.evaluate((msg) => chrome.runtime.sendMessage({ ...msg, name: `Other ${String.fromCharCode(0xdc00)} caller` }),
      { channel: "lumo:internal", op: "policy.add", id: other });
    try {
      assert.equal(res?.ok, true, `answered: ${show(res)}`);
      const { policy } = await h.internal("state.get");
      const added = policy.allowlist.find((c) => c.id === other);
      assert.ok(added, show(policy.allowlist));
      assert.equal(added.name, "Other \uFFFD caller");
    } finally {
      await h.internal("policy.remove", { id: other });
    }
  });

  test("audit/head garbage: writes still work and are audited; earlier entries stay listed", T, async () => {
    const before = (await h.internal("audit.list")).entries;
    assert.ok(before.length > 0, "setup: the log has entries");
    const saved = await corrupt({ "audit/head": { first: "x", last: -1 } });
    try {
      await answering("after a damaged audit head");
      const w = await ok("write_script", { source: userscript("Corrupt audit head") });
      const after = (await h.internal("audit.list")).entries;
      assert.equal(after[0]?.target, w.script.uuid, `the write is the newest entry: ${show(after[0])}`);
      assert.equal(after[0].result, "ok");
      assert.ok(after.length >= before.length + 1, `earlier entries kept: ${before.length} before, ${after.length} after`);
      await ok("delete_script", { uuid: w.script.uuid });
    } finally {
      await store.set(saved);
    }
  });

  test("after all of it: every script made is whole, and the provider logged no panic", T, async () => {
    await answering("at the end");
    const list = await h.internal("scripts.list");
    assert.deepEqual(list.problems, [], "all repairs took");
    for (const group of Object.values(made)) {
      for (const { uuid, source } of group) {
        const g = await ok("get_script", { uuid });
        assert.equal(g.script.source, source);
      }
    }
    assert.deepEqual(panics, []);
  });
});
