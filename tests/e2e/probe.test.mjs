// L0 probe: every row of the contract's state machine, seen from the test host,
// plus cold starts of the provider's worker and an ordinary web page.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ABSENT_ID, BROKEN_ID, DIST_DIR, HOST_ID, PROVIDER_ID, launch, startStaticServer } from "./lib/harness.mjs";
import { PROBE_CHANNEL, PROBE_TIMEOUT_MS, PROBE_VERSION, TEXT } from "./lib/contract.mjs";
import { until } from "./lib/util.mjs";

const T = { timeout: 60_000 };

const rawProbe = (id, extra = {}) => ({
  channel: PROBE_CHANNEL, version: PROBE_VERSION, id, client: { id: HOST_ID, name: "Lumo Test Host", version: "0.1.0" }, ...extra,
});

/** The probe reached the provider and it answered ok:true with the given status flags. */
function assertStatus(r, flags) {
  assert.equal(r.response?.ok, true, `expected ok:true, got ${JSON.stringify(r.response)}`);
  assert.equal(r.response.id, r.requestId, "response id echoes the probe id");
  assert.equal(r.response.service?.namespace, "userscripts");
  assert.equal(typeof r.response.service?.name, "string");
  assert.equal(typeof r.response.service?.version, "string");
  for (const [k, v] of Object.entries(flags)) assert.equal(r.response.status?.[k], v, `status.${k} in ${JSON.stringify(r.response.status)}`);
}

const hostIn = (list) => list.some((e) => e.id === HOST_ID);

describe("probe: caller not yet authorized (fresh profile)", () => {
  let h;
  before(async () => { h = await launch(); });
  after(async () => { await h?.close(); });
  const probe = (id, opts) => h.lumo("probe", id, opts);

  test("not installed: probing an id no extension has", T, async () => {
    const r = await probe(ABSENT_ID);
    assert.equal(r.state, "error");
    assert.equal(r.text, TEXT.notInstalled);
  });

  test("pending approval: the first probe from a fresh profile", T, async () => {
    const before = await h.internal("state.get");
    assert.ok(!hostIn(before.policy.pending) && !hostIn(before.policy.allowlist), "host unknown before its first probe");
    const r = await probe(PROVIDER_ID);
    assertStatus(r, { enabled: true, authorized: false, pendingApproval: true });
    assert.equal(r.state, "error");
    assert.equal(r.text, TEXT.pending);
    const { policy } = await h.internal("state.get");
    const entry = policy.pending.find((e) => e.id === HOST_ID);
    assert.ok(entry, `host recorded as pending: ${JSON.stringify(policy.pending)}`);
    assert.equal(entry.name, "Lumo Test Host");
  });

  test("ok:false: probe version 2 names both versions", T, async () => {
    const r = await probe(PROVIDER_ID, { message: rawProbe("v2", { version: 2 }) });
    assert.equal(r.response?.ok, false, JSON.stringify(r.response));
    assert.equal(r.state, "error");
    assert.equal(r.text, r.response.error);
    // Each number named for what it is: the request's version and the provider's.
    assert.match(r.text, /request is version 2\b/, `message names the request's version 2: ${r.text}`);
    assert.match(r.text, /speaks version 1\b/, `message names the provider's version 1: ${r.text}`);
  });

  const malformed = {
    "missing channel": (() => { const { channel, ...m } = rawProbe("no-channel"); return m; })(),
    "wrong channel": rawProbe("wrong-channel", { channel: "lumo:probes" }),
    "non-object (string)": "lumo:probe",
    "non-object (number)": 42,
    "non-object (array)": [PROBE_CHANNEL, PROBE_VERSION],
  };
  for (const [name, message] of Object.entries(malformed)) {
    test(`ok:false: malformed probe, ${name}`, T, async () => {
      const r = await probe(PROVIDER_ID, { message });
      assert.equal(r.response?.ok, false, `expected ok:false, got ${JSON.stringify(r.response)} (${r.text})`);
      assert.equal(typeof r.response.error, "string");
      assert.ok(r.response.error.length > 0, "error message is not empty");
      assert.equal(r.state, "error");
      assert.equal(r.text, r.response.error);
    });
  }

  test("missing service/status: broken provider answers {ok:true}", T, async () => {
    const r = await probe(BROKEN_ID);
    assert.equal(r.response?.ok, true);
    assert.equal(r.state, "error");
    assert.equal(r.text, TEXT.incomplete);
  });

  test("timeout: broken provider never answers; host gives up at 1500 ms", T, async () => {
    const r = await probe(BROKEN_ID, { message: rawProbe("hang") });
    assert.equal(r.state, "error");
    assert.equal(r.text, TEXT.timeout);
    assert.ok(r.elapsedMs >= PROBE_TIMEOUT_MS - 10 && r.elapsedMs < PROBE_TIMEOUT_MS + 500, `gave up after ${r.elapsedMs} ms`);
  });

  test("denied: after policy.deny the caller is not on the allowlist", T, async () => {
    await h.internal("policy.deny", { id: HOST_ID });
    const { policy } = await h.internal("state.get");
    assert.ok(hostIn(policy.denied), `host in denied: ${JSON.stringify(policy.denied)}`);
    assert.ok(!hostIn(policy.pending), "host no longer pending");
    const r = await probe(PROVIDER_ID);
    assertStatus(r, { enabled: true, authorized: false, pendingApproval: false });
    assert.equal(r.state, "error");
    assert.equal(r.text, TEXT.notAllowed);
    const again = await h.internal("state.get");
    assert.ok(!hostIn(again.policy.pending), "a probe after deny does not re-queue the caller");
  });

  test("an ordinary http://127.0.0.1 page cannot reach the provider", T, async () => {
    const server = await startStaticServer();
    const page = await h.context.newPage();
    try {
      await page.goto(`${server.url}/web.html`);
      const result = await page.evaluate(async ([id, message]) => {
        const rt = globalThis.chrome?.runtime;
        if (!rt?.sendMessage && !rt?.connect) return { answered: false, why: "chrome.runtime is not available" };
        const out = { answered: false, why: [] };
        try {
          const answer = await Promise.race([rt.sendMessage(id, message), new Promise((r) => setTimeout(() => r(undefined), 1500))]);
          if (answer !== undefined) Object.assign(out, { answered: true, answer });
          else out.why.push("sendMessage: no answer");
        } catch (e) { out.why.push(`sendMessage: ${e.message}`); }
        try {
          const port = rt.connect(id, { name: "lumo:mcp" });
          const got = await new Promise((r) => {
            port.onMessage.addListener((m) => r({ message: m }));
            port.onDisconnect.addListener(() => r(null));
            port.postMessage({ jsonrpc: "2.0", id: 1, method: "ping" });
            setTimeout(() => r(null), 1500);
          });
          if (got) Object.assign(out, { answered: true, portAnswer: got.message });
          else out.why.push("connect: no answer");
        } catch (e) { out.why.push(`connect: ${e.message}`); }
        return out;
      }, [PROVIDER_ID, rawProbe("from-web")]);
      assert.equal(result.answered, false, `web page got an answer: ${JSON.stringify(result)}`);
    } finally {
      await page.close();
      await server.close();
    }
  });
});

describe("probe: approved caller (fresh profile)", () => {
  let h;
  before(async () => {
    h = await launch();
    const first = await h.lumo("probe", PROVIDER_ID);
    assert.equal(first.text, TEXT.pending, "setup: first probe is pending");
    await h.internal("policy.approve", { id: HOST_ID });
  });
  after(async () => { await h?.close(); });
  const probe = (id, opts) => h.lumo("probe", id, opts);

  test("ready:false: user scripts not allowed, the provider's reason is shown", T, async () => {
    const { policy, capability } = await h.internal("state.get");
    assert.ok(hostIn(policy.allowlist), `host approved: ${JSON.stringify(policy.allowlist)}`);
    assert.equal(capability.ready, false, "fresh profile: Allow User Scripts is off");
    const r = await probe(PROVIDER_ID);
    assertStatus(r, { enabled: true, authorized: true, ready: false, pendingApproval: false });
    assert.equal(typeof r.response.status.reason, "string");
    assert.match(r.response.status.reason, /Allow User Scripts/);
    assert.equal(r.state, "error");
    assert.equal(r.text, r.response.status.reason);
  });

  test("enabled:false: endpoint switched off", T, async () => {
    await h.internal("policy.setSwitch", { name: "endpoint", value: false });
    try {
      const r = await probe(PROVIDER_ID);
      assertStatus(r, { enabled: false });
      assert.equal(r.state, "error");
      assert.equal(r.text, TEXT.disabled);
    } finally {
      await h.internal("policy.setSwitch", { name: "endpoint", value: true });
    }
  });

  test("all pass: approved + user scripts allowed -> connected with a tool count", T, async () => {
    assert.deepEqual(await h.setUserScriptsAccess(PROVIDER_ID, true), { isEnabled: true, isActive: true });
    // The toggle reaches the provider's worker asynchronously; allow it up to 5 s.
    let r;
    for (const deadline = Date.now() + 5000; ;) {
      r = await probe(PROVIDER_ID, { openSession: false });
      if (r.response?.status?.ready === true || Date.now() > deadline) break;
      await new Promise((res) => setTimeout(res, 100));
    }
    assertStatus(r, { enabled: true, authorized: true, ready: true, pendingApproval: false });
    assert.equal(r.state, "connected", `L0 passes: ${r.text}`);

    const full = await probe(PROVIDER_ID);
    assert.equal(full.l0, "pass");
    assert.equal(full.state, "connected", `MCP session failed: ${full.text} (port closed: ${full.closeReason ?? "-"})`);
    assert.ok(full.tools.length > 0, "the provider lists tools");
    assert.equal(full.text, `Connected: ${full.tools.length} tools`);
    await h.lumo("close", full.session);
  });

  test("cold start: 20 probes, each right after the worker was stopped, all answered within 1500 ms", T, async () => {
    for (let i = 1; i <= 20; i++) {
      await h.stopProviderWorker();
      assert.equal(await h.workerStatus(), "stopped", `#${i}: worker stopped before the probe`);
      const r = await probe(PROVIDER_ID, { openSession: false });
      assert.ok(r.response, `#${i}: no answer: ${r.text} ${r.detail ?? ""}`);
      assertStatus(r, { enabled: true, authorized: true, ready: true, pendingApproval: false });
      assert.equal(r.state, "connected", `#${i}: ${r.text}`);
      assert.ok(r.elapsedMs < PROBE_TIMEOUT_MS, `#${i}: answered after ${r.elapsedMs} ms`);
      assert.equal(await h.workerStatus(), "running", `#${i}: the probe restarted the worker`);
    }
  });

  // The loader compiles the module after the worker's first turn; what wakes the worker, and what
  // follows while the module loads, must wait for it: a probe's answer, a port opened in the same
  // turn and the messages posted on it at once, answered in order.
  test("cold start: a probe, a port and its first messages sent in one turn are all answered, in order", T, async () => {
    const page = await h.hostPage();
    for (let i = 1; i <= 5; i++) {
      await h.stopProviderWorker();
      assert.equal(await h.workerStatus(), "stopped", `#${i}: worker stopped first`);
      const r = await page.evaluate(async ([id, probe]) => {
        const probed = chrome.runtime.sendMessage(id, probe);
        const port = chrome.runtime.connect(id, { name: "lumo:mcp" });
        const messages = [];
        port.onMessage.addListener((m) => messages.push(m));
        const init = { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "cold", version: "0" } };
        port.postMessage({ jsonrpc: "2.0", id: "a", method: "ping" });
        port.postMessage({ jsonrpc: "2.0", id: "b", method: "initialize", params: init });
        port.postMessage({ jsonrpc: "2.0", method: "notifications/initialized" });
        port.postMessage({ jsonrpc: "2.0", id: "c", method: "tools/list" });
        const answer = await probed;
        const end = Date.now() + 5000;
        while (messages.length < 3 && Date.now() < end) await new Promise((t) => setTimeout(t, 20));
        port.disconnect();
        return { answer, messages };
      }, [PROVIDER_ID, rawProbe(`cold-${i}`)]);
      assert.equal(r.answer?.ok, true, `#${i}: probe answered: ${JSON.stringify(r.answer)}`);
      assert.equal(r.answer.id, `cold-${i}`);
      assert.deepEqual(r.messages.map((m) => m.id), ["a", "b", "c"], `#${i}: every request answered, in order: ${JSON.stringify(r.messages).slice(0, 400)}`);
      assert.deepEqual(r.messages[0].result, {}, "ping");
      assert.equal(typeof r.messages[1].result?.protocolVersion, "string", `initialize: ${JSON.stringify(r.messages[1])}`);
      assert.ok(r.messages[2].result?.tools?.length > 0, `tools/list after initialized: ${JSON.stringify(r.messages[2]).slice(0, 300)}`);
    }
  });

  // The rule above holds only for events the loader holds (its `early` list in extension/sw.js,
  // which puts its own `addListener` on each): a listener the module adds in start() to any other
  // event would miss the event that woke the worker. And a fresh worker listens to no tab event,
  // so navigations do not start it.
  test("a fresh worker listens only to events its loader holds, and to no tab event", T, async () => {
    await h.stopProviderWorker();
    const r = await probe(PROVIDER_ID, { openSession: false });
    assert.equal(r.response?.ok, true, `the probe started the worker: ${r.text}`);
    const events = await until(async () => {
      const worker = h.context.serviceWorkers().findLast((w) => w.url().startsWith(`chrome-extension://${PROVIDER_ID}/`));
      return worker?.evaluate(() => {
        const out = [];
        for (const ns of Object.keys(chrome)) {
          let api;
          try { api = chrome[ns]; } catch { continue; }
          if (!api || typeof api !== "object") continue;
          for (const name of Object.keys(api)) {
            const e = name.startsWith("on") ? api[name] : null;
            if (typeof e?.hasListeners !== "function") continue;
            const held = !Function.prototype.toString.call(e.addListener).includes("[native code]");
            out.push({ event: `${ns}.${name}`, listened: e.hasListeners(), held });
          }
        }
        return out;
      }).catch(() => null);
    }, (x) => Array.isArray(x), 5000);
    const listened = events.filter((e) => e.listened);
    const notHeld = listened.filter((e) => !e.held).map((e) => e.event);
    assert.deepEqual(notHeld, [], `listened to without the loader holding the event: ${notHeld.join(", ")}`);
    for (const e of ["runtime.onMessageExternal", "runtime.onConnectExternal", "runtime.onMessage", "storage.onChanged"]) {
      assert.ok(listened.some((x) => x.event === e), `${e} is listened to: ${listened.map((x) => x.event).join(", ")}`);
    }
    for (const e of ["tabs.onUpdated", "tabs.onRemoved"]) {
      assert.ok(events.some((x) => x.event === e && !x.listened), `${e} is not listened to in a fresh worker`);
    }
  });
});

// The probe module (probe/, loaded in the worker's first turn) answers a probe that wakes the
// worker while the provider's module still loads. Here the provider's module is held back 3 s
// (a patched copy of dist/), so an answer in less than that can only be the probe module's: it
// must be the provider's own answer, and what the probe changes must be recorded once the
// provider is up.
describe("probe: the probe module answers while the provider's module loads", () => {
  const HELD_MS = 3000;
  let h, dist;
  before(async () => {
    dist = mkdtempSync(join(tmpdir(), "lumo-held-"));
    cpSync(DIST_DIR, dist, { recursive: true });
    const file = join(dist, "compile.js");
    const src = readFileSync(file, "utf8");
    const held = src.replace("export const compileProvider = () => begin();", `export const compileProvider = () => setTimeout(begin, ${HELD_MS});`);
    assert.notEqual(held, src, "compile.js still has compileProvider to hold back");
    writeFileSync(file, held);
    h = await launch({ dist });
  });
  after(async () => { await h?.close(); if (dist) rmSync(dist, { recursive: true, force: true }); });

  /** A cold probe from the test host, answered before the provider's module could have loaded. */
  async function coldProbe() {
    await h.stopProviderWorker();
    assert.equal(await h.workerStatus(), "stopped", "worker stopped first");
    const r = await h.lumo("probe", PROVIDER_ID, { openSession: false });
    assert.equal(r.response?.ok, true, `answered: ${r.text} ${r.detail ?? ""}`);
    assert.ok(r.elapsedMs < HELD_MS - 500, `answered in ${r.elapsedMs} ms, before the provider's module could load`);
    return r;
  }
  /** The same probe answered by the provider (its module loaded: an internal message waited for it). */
  async function warmProbe() {
    await h.internal("state.get");
    return h.lumo("probe", PROVIDER_ID, { openSession: false });
  }
  const withoutId = (r) => ({ ...r.response, id: undefined });

  test("an unknown caller's cold probe asks the user, and the provider records the request", T, async () => {
    const cold = await coldProbe();
    assertStatus(cold, { enabled: true, authorized: false, pendingApproval: true });
    // Recorded by the provider once its module is up (the answer went out before).
    const pending = await until(async () => (await h.internal("state.get")).policy.pending, (p) => p.length > 0, 5000);
    const entry = pending.find((e) => e.id === HOST_ID);
    assert.ok(entry, `the provider recorded the pending approval: ${JSON.stringify(pending)}`);
    assert.equal(entry.name, "Lumo Test Host");
    assert.deepEqual(withoutId(cold), withoutId(await warmProbe()), "the probe module's answer is the provider's");
  });

  test("an approved caller's cold probe: the provider's answer, for the toggle off and on, and lastSeen recorded", T, async () => {
    // Approved afresh (not from its pending request, which carries when it was last seen).
    await h.internal("policy.remove", { id: HOST_ID });
    await h.internal("policy.approve", { id: HOST_ID, name: "Lumo Test Host" });
    const seen = async () => (await h.internal("state.get")).policy.allowlist.find((e) => e.id === HOST_ID)?.lastSeen;
    assert.equal(await seen(), null, "not seen since its approval");
    const off = await coldProbe();
    assertStatus(off, { enabled: true, authorized: true, ready: false, pendingApproval: false });
    assert.equal(typeof await until(seen, (t) => t !== null, 5000), "number", "the cold probe's lastSeen recorded by the provider");
    assert.deepEqual(withoutId(off), withoutId(await warmProbe()));
    assert.deepEqual(await h.setUserScriptsAccess(PROVIDER_ID, true), { isEnabled: true, isActive: true });
    const on = await coldProbe();
    assertStatus(on, { enabled: true, authorized: true, ready: true, pendingApproval: false });
    assert.deepEqual(withoutId(on), withoutId(await warmProbe()));
  });

  test("a malformed cold probe gets the provider's error", T, async () => {
    await h.stopProviderWorker();
    const r = await h.lumo("probe", PROVIDER_ID, { openSession: false, message: rawProbe("v2", { version: 2 }) });
    assert.equal(r.response?.ok, false, JSON.stringify(r.response));
    assert.ok(r.elapsedMs < HELD_MS - 500, `answered in ${r.elapsedMs} ms`);
    assert.match(r.response.error, /request is version 2\b.*speaks version 1\b/);
  });
});
