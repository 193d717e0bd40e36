// Security properties, checked from the outside: an unauthorized sender executes no tool by any
// path (probe-less connect, replayed messages, spoofed client.id/name, the internal channel);
// web pages and the scripts the agent writes cannot reach the provider; script source never
// reaches any storage key but its own; pending approvals stay one per caller however often it
// probes.
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { DIST_DIR, HOST_ID, PROVIDER_ID, buildHostVariant, launch, startStaticServer } from "./lib/harness.mjs";
import { MCP_PORT, PROBE_CHANNEL, PROBE_VERSION } from "./lib/contract.mjs";
import { until, sleep, show } from "./lib/util.mjs";

const T = { timeout: 60_000 };
const UNAUTHORIZED = -32001;

const userscript = (name, { match = ["https://example.com/*"], body = `console.log(${JSON.stringify(name)});` } = {}) => [
  "// ==UserScript==",
  `// @name        ${name}`,
  "// @namespace   lumo-security",
  ...match.map((m) => `// @match       ${m}`),
  "// ==/UserScript==",
  body,
  "",
].join("\n");
const probeMsg = (id, client) => ({ channel: PROBE_CHANNEL, version: PROBE_VERSION, id, client: { version: "0.1.0", ...client } });
const initialize = (id) => ({
  jsonrpc: "2.0", id, method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "security", version: "0" } },
});
const initialized = { jsonrpc: "2.0", method: "notifications/initialized" };
const newKey = () => generateKeyPairSync("rsa", { modulusLength: 2048 }).publicKey.export({ type: "spki", format: "der" }).toString("base64");

function canonical(v) {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v && typeof v === "object") return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(",")}}`;
  return JSON.stringify(v);
}

function assertRpcError(reply, id, code, re) {
  assert.ok(reply?.error, `expected a JSON-RPC error, got ${show(reply)}`);
  assert.strictEqual(reply.id, id, show(reply));
  assert.equal(reply.error.code, code, show(reply));
  if (re) assert.match(reply.error.message, re);
}

describe("security", () => {
  let h, pp;
  const variants = []; // [{id, dir, page, name}]
  const panics = [];
  const lumoIn = (page) => (fn, ...args) => page.evaluate(([fn, args]) => window.lumo[fn](...args), [fn, args]);
  const host = (...a) => h.lumo(...a);

  /** Storage, minus what may move without anyone acting: lastSeen and the rate window. */
  async function state() {
    const all = await pp.evaluate(async () => ({ local: await chrome.storage.local.get(null), session: await chrome.storage.session.get(null) }));
    const p = all.local.policy;
    if (p) {
      for (const list of [p.allowlist, p.pending]) for (const e of list ?? []) delete e.lastSeen;
    }
    delete all.session.rateWindow;
    return all;
  }
  const assertSame = (a, b, what) => assert.equal(canonical(b), canonical(a), `${what}: storage changed`);

  /**
   * Opens a raw lumo:mcp port from `page` and sends `msgs` in the same turn (or with `gapMs`
   * between them); resolves to {closed, messages} once the port closed or after `waitMs`.
   */
  const rawSession = (page, msgs, { gapMs = 0, waitMs = 3000, name = MCP_PORT } = {}) => page.evaluate(async ([id, name, msgs, gapMs, waitMs]) => {
    const messages = [];
    let closed = false;
    const port = chrome.runtime.connect(id, { name });
    port.onMessage.addListener((m) => messages.push(m));
    const done = new Promise((r) => port.onDisconnect.addListener(() => { closed = true; void chrome.runtime.lastError; r(); }));
    const sendErrors = [];
    for (const m of msgs) {
      if (gapMs) await new Promise((r) => setTimeout(r, gapMs));
      try { port.postMessage(m); } catch (e) { sendErrors.push(e.message); }
    }
    await Promise.race([done, new Promise((r) => setTimeout(r, waitMs))]);
    if (!closed) port.disconnect();
    return { closed, messages, sendErrors };
  }, [PROVIDER_ID, name, msgs, gapMs, waitMs]);

  const sendMessage = (page, msg) => page.evaluate(async ([id, msg]) => {
    try {
      return { answer: await Promise.race([chrome.runtime.sendMessage(id, msg), new Promise((r) => setTimeout(() => r("no answer in 3 s"), 3000))]) };
    } catch (e) {
      return { threw: e.message };
    }
  }, [PROVIDER_ID, msg]);

  let victim; // a script of the host that attacks try to change: {uuid, revision, source}

  before(async () => {
    for (let i = 1; i <= 4; i++) variants.push({ ...(await buildHostVariant(`security-variant-${i}`, newKey())), name: `Variant ${i}` });
    h = await launch({ extraExtensions: variants.map((v) => v.dir) });
    h.watchPanics(panics);
    for (const v of variants) {
      v.page = await h.context.newPage();
      await v.page.goto(`chrome-extension://${v.id}/host.html`);
      await v.page.waitForFunction(() => typeof window.lumo === "object");
      v.lumo = lumoIn(v.page);
    }
    pp = await h.providerPage();
    await h.internal("policy.add", { id: HOST_ID, name: "Lumo Test Host" });
    const s = await host("connect", PROVIDER_ID);
    const source = userscript("Security victim");
    const w = await host("callTool", s, "write_script", { source });
    assert.equal(w.isError, false, show(w));
    victim = { uuid: w.structuredContent.script.uuid, revision: w.structuredContent.script.revision, source };
    await host("close", s);
  });
  after(async () => { await h?.close(); });

  const attackCalls = () => [
    { jsonrpc: "2.0", id: "w", method: "tools/call", params: { name: "write_script", arguments: { source: userscript("Security injected") } } },
    { jsonrpc: "2.0", id: "d", method: "tools/call", params: { name: "delete_script", arguments: { uuid: victim.uuid } } },
    { jsonrpc: "2.0", id: "e", method: "tools/call", params: { name: "set_script_enabled", arguments: { uuid: victim.uuid, enabled: false } } },
    { jsonrpc: "2.0", id: "g", method: "tools/call", params: { name: "get_script", arguments: { uuid: victim.uuid } } },
  ];

  // ------------------------------------------------------------------ unauthorized sender
  test("an unknown extension, never probed: every path to a tool is refused and nothing changes", T, async () => {
    const v = variants[0];
    const before = await state();
    const problems = [];

    // 1. Connect without probing; initialize + tools/call in the same turn (buffered during authorization).
    const a = await rawSession(v.page, [initialize(1), initialized, ...attackCalls()]);
    if (!a.closed) problems.push(`buffered: the port stayed open: ${show(a)}`);
    // Every request gets -32001, in order: the buffered ones when authorization ends, any later
    // one while the refused port lingers (100 ms after its first answer; these were all sent in
    // one turn). A prefix would mean requests went unanswered.
    const ids = a.messages.map((m) => m.id);
    if (!a.messages.every((m) => m.error?.code === UNAUTHORIZED)) problems.push(`buffered: a reply that is not -32001: ${show(a.messages)}`);
    if (canonical(ids) !== canonical([1, "w", "d", "e", "g"])) problems.push(`buffered: expected -32001 for each request in order, got ids ${show(ids)}`);

    // 2. tools/call straight away, no initialize.
    const b = await rawSession(v.page, attackCalls());
    if (!b.closed || !b.messages.length || !b.messages.every((m) => m.error?.code === UNAUTHORIZED)) problems.push(`no initialize: ${show(b)}`);

    // 3. After authorization was refused (the port waits for its first request): tools/call late, then more.
    const c = await rawSession(v.page, attackCalls(), { gapMs: 300 });
    if (!c.closed) problems.push(`late: the port stayed open: ${show(c)}`);
    if (c.messages.length !== 1 || c.messages[0].error?.code !== UNAUTHORIZED || c.messages[0].id !== "w") problems.push(`late: expected one -32001 for the first request then the close: ${show(c.messages)}`);

    // 4. The official SDK client.
    const d = await v.lumo("connect", PROVIDER_ID);
    if (typeof d === "number" || d.error?.code !== UNAUTHORIZED) problems.push(`SDK connect: ${show(d)}`);
    else await v.lumo("close", d.handle);

    // 5. The internal channel, from outside: ignored or refused, never run.
    for (const op of [
      { op: "policy.add", id: v.id, name: "me" }, { op: "policy.approve", id: v.id }, { op: "policy.setSwitch", name: "writes", value: true },
      { op: "scripts.delete", uuid: victim.uuid }, { op: "scripts.setEnabled", uuid: victim.uuid, enabled: false }, { op: "state.get" }, { op: "audit.list" },
    ]) {
      const r = await sendMessage(v.page, { channel: "lumo:internal", ...op });
      if (r.answer?.ok !== false && r.threw === undefined) problems.push(`internal ${op.op} from outside: ${show(r)}`);
      if (r.answer && (r.answer.policy || r.answer.entries || r.answer.scripts || r.answer.result)) problems.push(`internal ${op.op} leaked data: ${show(r.answer)}`);
    }

    // 6. JSON-RPC over the probe channel, and an internal-looking port.
    const e = await sendMessage(v.page, attackCalls()[0]);
    if (e.answer?.ok !== false) problems.push(`tools/call as a runtime message: ${show(e)}`);
    const f = await rawSession(v.page, [initialize(1), ...attackCalls()], { name: "lumo:internal", waitMs: 1000 });
    if (!f.closed || f.messages.length) problems.push(`port lumo:internal: ${show(f)}`);

    assertSame(before, await state(), "after the attacks");
    assert.deepEqual(problems, []);
    const g = await host("connect", PROVIDER_ID);
    const got = await host("callTool", g, "get_script", { uuid: victim.uuid });
    assert.equal(got.structuredContent?.script?.source, victim.source, "the victim is untouched");
    await host("close", g);
  });

  test("a probed but unapproved (then denied) extension still runs nothing", T, async () => {
    const v = variants[0];
    const p = await v.lumo("probe", PROVIDER_ID, { openSession: false, message: probeMsg("v1", { id: v.id, name: v.name }) });
    assert.equal(p.response?.status?.authorized, false, show(p));
    assert.equal(p.response.status.pendingApproval, true);
    for (const deny of [false, true]) {
      if (deny) await h.internal("policy.deny", { id: v.id });
      const before = await state();
      const r = await rawSession(v.page, [initialize(1), initialized, ...attackCalls()]);
      assert.equal(r.closed, true, show(r));
      assert.ok(r.messages.length > 0 && r.messages.every((m) => m.error?.code === UNAUTHORIZED), `${deny ? "denied" : "pending"}: ${show(r.messages)}`);
      assertSame(before, await state(), deny ? "denied" : "pending");
    }
    await h.internal("policy.remove", { id: v.id });
  });

  test("replayed messages: an authorized session's messages, replayed after the host was removed, get -32001 and change nothing", T, async () => {
    const page = await h.hostPage();
    const g = await host("connect", PROVIDER_ID);
    const cur = (await host("callTool", g, "get_script", { uuid: victim.uuid })).structuredContent.script;
    await host("close", g);
    const recorded = [
      initialize("init"),
      initialized,
      { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "set_script_enabled", arguments: { uuid: victim.uuid, enabled: !cur.enabled, revision: cur.revision } } },
      { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "write_script", arguments: { source: userscript("Security replayed") } } },
      { jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "list_scripts", arguments: {} } },
    ];
    // The original, authorized session: its messages work.
    const original = await rawSession(page, recorded, { waitMs: 1500 });
    const byId = Object.fromEntries(original.messages.map((m) => [m.id, m]));
    assert.ok(byId.init?.result, `initialize: ${show(original.messages)}`);
    assert.equal(byId[1]?.result?.isError, false, `set_script_enabled ran: ${show(byId[1])}`);
    assert.equal(byId[2]?.result?.isError, false, `write_script ran: ${show(byId[2])}`);
    const created = byId[2].result.structuredContent.script.uuid;

    // Keep an authorized port open across the removal, to replay on it too.
    const live = await host("rawOpen", PROVIDER_ID, MCP_PORT);
    await host("rawSend", live, initialize("live-init"));
    await until(() => host("rawMessages", live), (l) => l.some((m) => m.id === "live-init"));
    await host("rawSend", live, initialized);

    await h.internal("policy.remove", { id: HOST_ID });
    try {
      const before = await state();
      // Replay on a new port, all in one turn.
      const replay = await rawSession(page, recorded);
      assert.equal(replay.closed, true, `the replay's port is closed: ${show(replay)}`);
      const ids = replay.messages.map((m) => m.id);
      // Every request is answered (all were sent in one turn, within the refused port's linger).
      assert.deepEqual(ids, ["init", 1, 2, 3], `-32001 for each request, in order: ${show(replay.messages)}`);
      for (const m of replay.messages) assertRpcError(m, m.id, UNAUTHORIZED, /allowlist/i);
      // Replay slowly (after the authorization check finished).
      const slow = await rawSession(page, recorded, { gapMs: 200 });
      assert.equal(slow.closed, true);
      assert.equal(slow.messages.length, 1, show(slow.messages));
      assertRpcError(slow.messages[0], "init", UNAUTHORIZED);
      // The port opened while still authorized was closed by the removal itself: nothing
      // replayed on it reaches the provider.
      const n = (await host("rawMessages", live)).length;
      const liveInfo = await until(() => host("rawInfo", live), (i) => i.closed, 2000);
      assert.equal(liveInfo.closed, true, "the old port is closed by the removal");
      for (const m of recorded.slice(2)) {
        const sent = await host("rawSend", live, { ...m, id: `live-${m.id}` });
        assert.ok(sent.error, `a closed port cannot carry a replay: ${show(sent)}`);
      }
      await sleep(300);
      assert.deepEqual((await host("rawMessages", live)).slice(n), [], "no reply on the old port");
      assertSame(before, await state(), "after the replays");
    } finally {
      await h.internal("policy.add", { id: HOST_ID, name: "Lumo Test Host" });
    }
    const g2 = await host("connect", PROVIDER_ID);
    const now = (await host("callTool", g2, "get_script", { uuid: victim.uuid })).structuredContent.script;
    assert.equal(now.revision, cur.revision + 1, "only the original call changed the victim");
    const list = (await host("callTool", g2, "list_scripts", { query: "Security replayed" })).structuredContent;
    assert.equal(list.total, 1, "the replayed write_script created nothing");
    await host("callTool", g2, "delete_script", { uuid: created });
    victim.revision = now.revision;
    await host("close", g2);
  });

  test("spoofed client.id / client.name: the claim never authorizes (another extension claiming the host; the host claiming an approved extension)", T, async () => {
    const [imp, approved] = [variants[1], variants[2]];
    {
      const g = await host("connect", PROVIDER_ID);
      victim.revision = (await host("callTool", g, "get_script", { uuid: victim.uuid })).structuredContent.script.revision;
      await host("close", g);
    }
    // a. An unapproved extension claims to be the approved host, id and name.
    const before = await state();
    const p = await imp.lumo("probe", PROVIDER_ID, { openSession: false, message: probeMsg("spoof-a", { id: HOST_ID, name: "Lumo Test Host" }) });
    assert.equal(p.response?.ok, true, show(p));
    assert.equal(p.response.status.authorized, false, `claiming the host's id: ${show(p.response)}`);
    let { policy } = await h.internal("state.get");
    assert.ok(policy.pending.some((x) => x.id === imp.id), "the real sender id is what is pending");
    assert.ok(!policy.allowlist.some((x) => x.id === imp.id));
    const hostEntry = (pol) => pol.allowlist.filter((x) => x.id === HOST_ID).map(({ lastSeen, ...x }) => x);
    assert.deepEqual(hostEntry(policy), hostEntry(before.local.policy), "the host's entry is unchanged");
    const r = await rawSession(imp.page, [initialize(1), initialized, ...attackCalls()]);
    assert.ok(r.closed && r.messages.every((m) => m.error?.code === UNAUTHORIZED), `impostor's port: ${show(r)}`);
    const c = await imp.lumo("connect", PROVIDER_ID);
    assert.equal(c.error?.code, UNAUTHORIZED, show(c));

    // b. The host, removed, claims the id and name of an approved extension.
    await h.internal("policy.add", { id: approved.id, name: approved.name });
    await h.internal("policy.remove", { id: HOST_ID });
    try {
      const q = await host("probe", PROVIDER_ID, { openSession: false, message: probeMsg("spoof-b", { id: approved.id, name: approved.name }) });
      assert.equal(q.response?.status?.authorized, false, `claiming an approved id: ${show(q.response)}`);
      ({ policy } = await h.internal("state.get"));
      assert.ok(policy.pending.some((x) => x.id === HOST_ID), "the host itself is what is pending");
      const s = await rawSession(await h.hostPage(), [initialize(1), initialized, ...attackCalls()]);
      assert.ok(s.closed && s.messages.every((m) => m.error?.code === UNAUTHORIZED), `host's port: ${show(s)}`);
      // c. Same display name as an approved caller, own id: still nothing.
      const n = await variants[3].lumo("probe", PROVIDER_ID, { openSession: false, message: probeMsg("spoof-c", { id: variants[3].id, name: approved.name }) });
      assert.equal(n.response?.status?.authorized, false, show(n.response));
    } finally {
      await h.internal("policy.add", { id: HOST_ID, name: "Lumo Test Host" });
      await h.internal("policy.remove", { id: approved.id });
    }
    const g = await host("connect", PROVIDER_ID);
    const got = await host("callTool", g, "get_script", { uuid: victim.uuid });
    assert.equal(got.structuredContent.script.revision, victim.revision, "nothing changed the victim");
    await host("close", g);
  });

  // What the user agrees to at install is Chrome's own list of warnings for the manifest: a
  // permission added for a feature must not add to it unnoticed (webRequest, webNavigation,
  // declarativeNetRequestWithHostAccess and storage are covered by the all-sites warning, or
  // carry none).
  test("installing asks for exactly two things: all websites' data, and notifications", T, async () => {
    const warnings = await pp.evaluate(() => chrome.management.getPermissionWarningsByManifest(JSON.stringify(chrome.runtime.getManifest())));
    assert.deepEqual(warnings, ["Read and change all your data on all websites", "Display notifications"]);
    // The check can fail: a permission with a warning of its own shows up in it.
    const more = await pp.evaluate(() => chrome.management.getPermissionWarningsByManifest(JSON.stringify({
      ...chrome.runtime.getManifest(), permissions: [...chrome.runtime.getManifest().permissions, "history"] })));
    assert.equal(more.length, 3, show(more));
  });

  // ------------------------------------------------------------------ web pages and user scripts
  test("a web page cannot reach the provider: no chrome.runtime on http://127.0.0.1, and externally_connectable has no matches", T, async () => {
    const manifest = JSON.parse(readFileSync(join(DIST_DIR, "manifest.json"), "utf8"));
    assert.ok(manifest.externally_connectable, "externally_connectable is declared");
    assert.equal(manifest.externally_connectable.matches, undefined, `no web origin may connect: ${show(manifest.externally_connectable)}`);
    const loaded = await pp.evaluate(() => chrome.runtime.getManifest().externally_connectable);
    assert.equal(loaded.matches, undefined, `the loaded manifest: ${show(loaded)}`);

    const server = await startStaticServer();
    const web = await h.context.newPage();
    try {
      await web.goto(`${server.url}/web.html`);
      const seen = await web.evaluate(() => ({ chrome: typeof globalThis.chrome, runtime: typeof globalThis.chrome?.runtime, sendMessage: typeof globalThis.chrome?.runtime?.sendMessage, connect: typeof globalThis.chrome?.runtime?.connect }));
      assert.equal(seen.sendMessage, "undefined", show(seen));
      assert.equal(seen.connect, "undefined", show(seen));
    } finally {
      await web.close();
      await server.close();
    }
  });

  // Its world has messaging (for run reports), so its messages reach the userscript channel: they
  // must get no content back and change nothing (the channel only stores well-formed, signed runs).
  test("a userscript the agent writes cannot call the provider (its messages reach only the run-report channel, which answers nothing)", T, async () => {
    assert.deepEqual(await h.setUserScriptsAccess(PROVIDER_ID, true), { isEnabled: true, isActive: true });
    await until(() => host("probe", PROVIDER_ID, { openSession: false }), (r) => r.state === "connected", 3000);
    const body = `(async () => {
  const out = { runtime: typeof chrome !== "undefined" && typeof chrome.runtime, sendMessage: typeof chrome !== "undefined" && typeof chrome.runtime?.sendMessage };
  try {
    out.answer = await chrome.runtime.sendMessage({ channel: "lumo:internal", op: "policy.setSwitch", name: "review", value: true });
  } catch (e) { out.error = String(e && e.message || e); }
  try {
    out.external = await chrome.runtime.sendMessage(${JSON.stringify(PROVIDER_ID)}, { channel: "lumo:internal", op: "state.get" });
  } catch (e) { out.externalError = String(e && e.message || e); }
  document.documentElement.dataset.lumoReach = JSON.stringify(out);
})();`;
    const g = await host("connect", PROVIDER_ID);
    const w = await host("callTool", g, "write_script", { source: userscript("Security reach", { match: ["http://127.0.0.1/*"], body }) });
    assert.equal(w.isError, false, show(w));
    assert.equal(w.structuredContent.registered, true, show(w.structuredContent));
    const before = await state();
    const server = await startStaticServer();
    const web = await h.context.newPage();
    try {
      await web.goto(`${server.url}/web.html`);
      await web.waitForFunction(() => document.documentElement.dataset.lumoReach, null, { timeout: 5000 });
      const out = JSON.parse(await web.evaluate(() => document.documentElement.dataset.lumoReach));
      assert.ok(out.answer == null && out.external == null, `the script got an answer from the provider: ${show(out)}`);
      assert.ok(out.error === undefined && out.externalError === undefined, `the script's call hung or failed oddly: ${show(out)}`);
      // The one thing its run may add is its own run report (the channel's only effect):
      // waited for, then 300 ms more for anything else it might have caused.
      const own = `runs/${w.structuredContent.script.uuid}`;
      await until(state, (s) => own in s.local, 5000);
      await sleep(300);
      const now = await state();
      const added = Object.keys(now.local).filter((k) => !(k in before.local));
      assert.deepEqual(added.sort(), [own, "runs/budget", "runs/cursor"].sort(), `keys added by the script's run: ${show(added)}`);
      assert.ok(now.local[own].runs.every((r) => r.uuid === w.structuredContent.script.uuid && r.url.endsWith("/web.html")), show(now.local[own]));
      for (const k of added) delete now.local[k];
      // And where it ran, for the popup (`runs/inTabs` in the session area): its own places only.
      const placesBefore = (before.session["runs/inTabs"] ?? []).map((p) => JSON.stringify(p));
      const newPlaces = (now.session["runs/inTabs"] ?? []).filter((p) => !placesBefore.includes(JSON.stringify(p)));
      assert.ok(newPlaces.length >= 1 && newPlaces.every((p) => p[1] === w.structuredContent.script.uuid), show(newPlaces));
      delete before.session["runs/inTabs"];
      delete now.session["runs/inTabs"];
      assertSame(before, now, "after the script ran");
      assert.equal((await h.internal("state.get")).policy.reviewWrites, false);
    } finally {
      await web.close();
      await server.close();
      await host("callTool", g, "delete_script", { uuid: w.structuredContent.script.uuid });
      await host("close", g);
    }
  });

  // ------------------------------------------------------------------ the audit never holds source
  test("script source never enters the audit or any other storage key (marker through write, patch, refusals and a waiting review)", T, async () => {
    const marker = `lumo-marker-${Math.random().toString(36).slice(2)}${Date.now().toString(36)}`;
    const g = await host("connect", PROVIDER_ID);
    const call = (name, args) => host("callTool", g, name, args);
    const auditBefore = (await h.internal("audit.list")).entries.length;
    const w = await call("write_script", { source: userscript("Security marked", { body: `const secret = ${JSON.stringify(marker)};` }) });
    assert.equal(w.isError, false, show(w));
    const { uuid } = w.structuredContent.script;
    const p = await call("patch_script", { uuid, revision: 1, edits: [{ search: `"${marker}"`, replace: `"${marker}-patched-${marker}"` }] });
    assert.equal(p.isError, false, show(p));
    const refusals = [
      await call("write_script", { source: userscript("Security marked", { body: `/* ${marker} */` }) }), // CONFLICT (same name)
      await call("write_script", { uuid, revision: 1, source: userscript("Security marked", { body: `/* ${marker} */` }) }), // CONFLICT (stale)
      await call("write_script", { source: `// ${marker}`, extra: marker }), // INVALID_ARGUMENTS
      await call("patch_script", { uuid, revision: 2, edits: [{ search: `no ${marker}`, replace: marker }] }), // not found
      await call("validate_script", { source: userscript(`Security ${marker}`) }), // a read: never stored
    ];
    assert.ok(refusals.slice(0, 4).every((r) => r.isError === true), show(refusals.map((r) => r.structuredContent?.error_code)));
    // A write waiting for review: its stub is in chrome.storage.local while we look (it must
    // outlive an extension reload, to be audited as interrupted).
    await h.internal("policy.setSwitch", { name: "review", value: true });
    const page = await h.hostPage();
    await page.evaluate(([g, uuid, source]) => { window.__reviewed = window.lumo.callTool(g, "write_script", { uuid, revision: 2, source }); },
      [g, uuid, userscript("Security marked", { body: `const next = ${JSON.stringify(marker)};` })]);
    try {
      const waiting = await until(() => h.internal("state.get"), (st) => st.reviews.length === 1);
      assert.equal(waiting.reviews.length, 1, "a review waits");
      const all = await pp.evaluate(async () => ({ local: await chrome.storage.local.get(null), session: await chrome.storage.session.get(null) }));
      assert.ok(all.local[`source/${uuid}`].includes(marker), "the marker is in the script's own source");
      assert.ok(Array.isArray(all.local.reviews) && all.local.reviews.length === 1, `the review's stub is stored: ${show(all.local.reviews)}`);
      const hits = [];
      for (const [area, items] of Object.entries(all)) {
        for (const [k, v] of Object.entries(items)) {
          // The script's own source and, since it was patched, its earlier versions.
          if (area === "local" && (k === `source/${uuid}` || k.startsWith(`history/${uuid}/`))) continue;
          if (JSON.stringify(v).includes(marker)) hits.push(`${area}[${k}]`);
          if (k.includes(marker)) hits.push(`${area} key ${k}`);
        }
      }
      assert.deepEqual(hits, [], "the marker appears outside the script's source");
      const entries = (await h.internal("audit.list")).entries;
      assert.ok(entries.length >= auditBefore + 6, `each write attempt is audited: ${entries.length - auditBefore} new entries`);
      assert.ok(!JSON.stringify(entries).includes(marker), "audit.list holds no marker");
    } finally {
      const st = await h.internal("state.get");
      for (const r of st.reviews) await h.internal("reviews.decide", { review: r.id, approve: false });
      await page.evaluate(() => window.__reviewed);
      await h.internal("policy.setSwitch", { name: "review", value: false });
      await call("delete_script", { uuid });
      await host("close", g);
    }
    // After the review was decided and the script deleted, the source lives only in the trash
    // (and the history that goes with it), which the user can undo from…
    const keysWithMarker = async () => pp.evaluate(async (m) => {
      const out = [];
      for (const [area, items] of [["local", await chrome.storage.local.get(null)], ["session", await chrome.storage.session.get(null)]]) {
        for (const [k, v] of Object.entries(items)) if (JSON.stringify(v).includes(m) || k.includes(m)) out.push(`${area}[${k}]`);
      }
      return out.sort();
    }, marker);
    assert.deepEqual(await keysWithMarker(), [`local[history/${uuid}/1]`, `local[trash/${uuid}]`], "deleted: only the trash and its history (revision 1, before the patch) hold the source");
    // …and once the user empties the trash, it is nowhere.
    await h.internal("trash.purge", { uuids: [uuid] });
    assert.deepEqual(await keysWithMarker(), [], "the marker is gone once the trash is emptied");
  });

  // ------------------------------------------------------------------ pending approvals
  test("pending approvals stay one per caller: 4 extensions probing 15 times each (names changing, worker restarted) are recorded once each", T, async () => {
    for (const v of variants) await h.internal("policy.remove", { id: v.id });
    const probers = variants.map((v) => ({ ...v, lumo: v.lumo }));
    for (let round = 0; round < 15; round++) {
      await Promise.all(probers.map((v) => v.lumo("probe", PROVIDER_ID, {
        openSession: false, message: probeMsg(`flood-${round}`, { id: v.id, name: `${v.name} (round ${round})` }),
      })));
      if (round % 5 === 4) await h.stopProviderWorker();
    }
    const { policy } = await h.internal("state.get");
    for (const v of probers) {
      const entries = policy.pending.filter((x) => x.id === v.id);
      assert.equal(entries.length, 1, `${v.id} pending once: ${show(policy.pending)}`);
    }
    const ids = policy.pending.map((x) => x.id);
    assert.equal(new Set(ids).size, ids.length, `no duplicates: ${show(ids)}`);
    assert.ok(policy.pending.length <= 32, "bounded");
    assert.ok(!policy.allowlist.some((x) => probers.some((v) => v.id === x.id)), "probing never approves");
    assert.ok(policy.pending.every((x) => x.name.length <= 64), "names are bounded");
  });

  test("the provider logged no panic", () => assert.deepEqual(panics, []));
});
