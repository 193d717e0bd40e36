// The local bridge end to end: the official MCP TypeScript SDK's stdio client launches the real
// lumo-bridge binary (as Claude Code would), the user clicks Connect on the extension's connect
// page in real Chromium, and the agent's tool calls run through the extension's one tool walk.
// The seed-002 threats on the extension's side are tested as an attacker would try them.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { launch, startStaticServer, PROVIDER_ID, REPO_ROOT } from "./lib/harness.mjs";
import { freePorts } from "../lib/ports.mjs";
import { startWsProbe } from "./lib/ws-probe.mjs";

const BIN = process.env.LUMO_BRIDGE_BIN ?? path.join(REPO_ROOT, "target/bridge/lumo-bridge");
const TOKEN = "e2e-bridge-token-0123456789abcdef0123456789";
let h, web;
const panics = [];
const children = new Set();

before(async () => {
  if (!fs.existsSync(BIN)) throw new Error(`no bridge binary at ${BIN} (run scripts/build.sh)`);
  h = await launch();
  h.watchPanics(panics);
  web = await startStaticServer();
  await h.setUserScriptsAccess(PROVIDER_ID, true);
});

after(async () => {
  for (const c of children) await c.close().catch(() => {});
  await web?.close();
  await h?.close();
  for (const dir of stateDirs) fs.rmSync(dir, { recursive: true, force: true });
  assert.deepEqual(panics, []);
});

/** A bridge's state directory, removed when the file's tests end. */
const stateDirs = new Set();
function stateDir() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lumo-bridge-e2e-"));
  stateDirs.add(dir);
  return dir;
}

/** The SDK's stdio client, launching the real bridge binary. */
async function agent({ port, control, state, token = TOKEN, extra = [] } = {}) {
  if (port === undefined || control === undefined) {
    const [p, c] = await freePorts(2);
    port ??= p;
    control ??= c;
  }
  state ??= stateDir();
  const transport = new StdioClientTransport({
    command: BIN,
    // token null: none given, as the README's set-up (the bridge makes one at each start).
    args: ["--port", String(port), "--control-port", String(control), "--state-dir", state, ...(token === null ? [] : ["--token", token]), ...extra],
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr?.on("data", (d) => { stderr += d; });
  const client = new Client({ name: "bridge-e2e", version: "0" });
  const status = async () => (await client.callTool({ name: "bridge_status", arguments: {} })).structuredContent;
  children.add(client);
  let link;
  try {
    await client.connect(transport);
    link = (await status()).connectLink;
  } catch (e) {
    // A bridge that exits at start says why on stderr: put it in the failure.
    throw new Error(`${e.message}; the bridge's stderr: ${stderr.trim() || "(empty)"}`);
  }
  return { client, transport, port, control, state, link, status, stderr: () => stderr, pid: transport.pid };
}

const call = (a, name, args = {}) => a.client.callTool({ name, arguments: args }, undefined, { timeout: 120_000 });

async function until(fn, what, timeout = 10_000) {
  const end = Date.now() + timeout;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Opens the connect link in a tab; `click` connects. Resolves to the page. */
async function openConnect(link, { click = true, remember = false, browser = h } = {}) {
  const page = await browser.context.newPage();
  await page.goto(link);
  await page.locator("#tools li").first().waitFor();
  if (remember) await page.check("#remember");
  if (click) {
    await page.click("#connect");
    await page.waitForFunction(() => document.getElementById("state").dataset.state === "connected", null, { timeout: 10_000 });
  }
  return page;
}

async function disconnectAll() {
  await h.internal("bridge.disconnect");
  await until(async () => (await h.internal("bridge.status")).bridge.state === "off", "link off");
}

function scriptSource(name, marker) {
  return `// ==UserScript==
// @name ${name}
// @namespace e2e-bridge
// @match ${web.url}/userscripts/*
// @run-at document-end
// ==/UserScript==
const m = document.createElement('lumo-mark'); m.dataset.tag = ${JSON.stringify(marker)}; document.documentElement.append(m);
`;
}

test("connect page: shows the address and tools, connects only on the click; the agent's script runs on a page", async () => {
  const a = await agent();
  assert.match(a.link, new RegExp(`^chrome-extension://${PROVIDER_ID}/connect\\.html\\?port=${a.port}&token=`));
  const page = await openConnect(a.link, { click: false });
  assert.equal(await page.textContent("#host"), "127.0.0.1");
  assert.equal(await page.textContent("#port"), String(a.port));
  // Read once, then off the address bar: the page's URL keeps the port alone.
  assert.equal(page.url(), `chrome-extension://${PROVIDER_ID}/connect.html?port=${a.port}`);
  const tools = await page.locator("#tools li code").allTextContents();
  for (const t of ["status", "list_scripts", "write_script", "delete_script"]) assert.ok(tools.includes(t), t);
  // Opening the link is not consent: nothing connects without the click.
  await new Promise((r) => setTimeout(r, 1500));
  assert.equal((await a.status()).connected, false);
  await page.click("#connect");
  await page.waitForFunction(() => document.getElementById("state").dataset.state === "connected");
  await until(async () => (await a.status()).connected, "bridge sees the extension");

  const w = await call(a, "write_script", { source: scriptSource("Bridge e2e", "bridge-ran") });
  assert.equal(w.isError, false, JSON.stringify(w));
  const uuid = w.structuredContent.script.uuid;
  assert.ok(uuid);
  assert.equal(w.structuredContent.script.createdBy, `bridge:${a.port}`);
  // Seen running: a page loaded and the script marked it.
  const tab = await h.context.newPage();
  await tab.goto(`${web.url}/userscripts/page.html`);
  await tab.waitForSelector('lumo-mark[data-tag="bridge-ran"]', { state: "attached", timeout: 10_000 });
  await tab.close();
  // Attributed to the bridge caller, audited under it; the token is in no record.
  const { entries } = await h.internal("audit.list");
  assert.ok(!JSON.stringify(entries).includes(TOKEN), "no token in the audit");
  assert.ok(!JSON.stringify(await h.internal("bridge.status")).includes(TOKEN), "nor in the link's state");
  assert.equal(entries[0].caller, `bridge:${a.port}`);
  assert.equal(entries[0].target, uuid);
  // The popup lists it as a connected caller by its label.
  const popup = await h.context.newPage();
  await popup.goto(`chrome-extension://${PROVIDER_ID}/popup.html`);
  await popup.getByText(`Local bridge (port ${a.port})`).first().waitFor();
  await popup.close();
  await call(a, "delete_script", { uuid, revision: w.structuredContent.script.revision });
  await page.close();
  await disconnectAll();
  await a.client.close();
});

test("an attacker's connect link: a web page cannot open it, and a non-loopback host is refused even on click", async () => {
  const probe = await startWsProbe();
  try {
    const evil = `chrome-extension://${PROVIDER_ID}/connect.html?host=evil.example&port=${probe.port}&token=${TOKEN}`;
    // A web page linking to it: the page is not web-accessible, so the navigation is blocked.
    const page = await h.context.newPage();
    await page.goto(`${web.url}/web.html`);
    await page.evaluate((href) => {
      const a = document.createElement("a");
      a.href = href;
      a.textContent = "Connect your assistant";
      document.body.append(a);
      a.click();
    }, evil);
    await new Promise((r) => setTimeout(r, 1000));
    const opened = await page.evaluate(() => !!document.getElementById("connect")).catch(() => false);
    assert.equal(opened, false, "the connect page did not load inside the web page's tab");
    await page.close();
    // Opened directly (pasted): the page warns, and the click is refused by the worker.
    const c = await h.context.newPage();
    await c.goto(evil);
    await c.locator("#tools li").first().waitFor();
    assert.equal(await c.isVisible("#address-warning"), true);
    assert.match(await c.textContent("#address-warning"), /not this computer/);
    await c.click("#connect");
    await c.waitForFunction(() => /loopback/.test(document.getElementById("status").textContent));
    assert.equal((await h.internal("bridge.status")).bridge.state, "off");
    // A loopback address on the same page that is never clicked: nothing connects either.
    const idle = await h.context.newPage();
    await idle.goto(`chrome-extension://${PROVIDER_ID}/connect.html?port=${probe.port}&token=${TOKEN}`);
    await new Promise((r) => setTimeout(r, 1500));
    assert.deepEqual(probe.seen.upgrades, []);
    await c.close();
    await idle.close();
  } finally {
    await probe.close();
  }
});

test("the token never travels: the hello carries a nonce, and the extension proves the token only to a bridge that proved it first; Origin is the extension", async () => {
  const probe = await startWsProbe({ token: TOKEN, ack: { ok: true, protocol: 2, serverVersion: "probe", readonly: false } });
  try {
    await openConnect(`chrome-extension://${PROVIDER_ID}/connect.html?port=${probe.port}&token=${TOKEN}`);
    assert.equal(probe.seen.upgrades.length, 1);
    const up = probe.seen.upgrades[0];
    assert.equal(up.url, "/");
    assert.ok(!JSON.stringify(up).includes(TOKEN), "no token in the upgrade request");
    assert.equal(up.origin, `chrome-extension://${PROVIDER_ID}`);
    const hello = JSON.parse(probe.seen.frames[0]);
    assert.equal(hello.type, "hello");
    assert.equal(hello.payload.token, undefined);
    assert.match(hello.payload.nonce, /^[A-Za-z0-9-]{16,128}$/);
    assert.equal(hello.payload.protocol, 2);
    assert.equal(JSON.parse(probe.seen.frames[1]).type, "hello_proof");
    assert.deepEqual(probe.seen.proofs, [true], "the extension's proof, checked by the probe's own HMAC");
    assert.ok(probe.seen.frames.every((f) => !f.includes(TOKEN)), "the token is in no frame");
    // The popup's Disconnect closes with 4002.
    const popup = await h.context.newPage();
    await popup.goto(`chrome-extension://${PROVIDER_ID}/popup.html`);
    await popup.getByRole("button", { name: `Disconnect Local bridge (port ${probe.port})` }).click();
    await until(() => probe.seen.closes.length > 0, "close frame");
    assert.equal(probe.seen.closes[0].code, 4002);
    await popup.close();
    // The authorization is forgotten: no reconnect.
    await new Promise((r) => setTimeout(r, 2000));
    assert.equal(probe.seen.upgrades.length, 1);
  } finally {
    await probe.close();
  }
});

test("something else on the bridge's port (it does not hold the token) gets the hello alone: no token, no calls served, and the user is told", async () => {
  // What a local process that took the port while the bridge was not running would answer.
  const probe = await startWsProbe({ ack: { ok: true, protocol: 2, serverVersion: "squatter", nonce: "squatter-nonce-0123456789", proof: "0".repeat(64), readonly: false } });
  try {
    const page = await openConnect(`chrome-extension://${PROVIDER_ID}/connect.html?port=${probe.port}&token=${TOKEN}`, { click: false });
    await page.click("#connect");
    await page.waitForFunction(() => /could not prove it holds the token/.test(document.getElementById("status").textContent), null, { timeout: 10_000 });
    await until(() => probe.seen.closes.length > 0, "the extension closes");
    assert.equal(probe.seen.closes[0].code, 4001);
    assert.equal(probe.seen.frames.length, 1, JSON.stringify(probe.seen.frames));
    assert.ok(!probe.seen.frames[0].includes(TOKEN));
    assert.notEqual((await h.internal("bridge.status")).bridge.state, "connected");
    const popup = await h.context.newPage();
    await popup.goto(`chrome-extension://${PROVIDER_ID}/popup.html`);
    await popup.getByText(/could not prove it holds the token/).waitFor();
    await popup.close();
    await page.close();
  } finally {
    await disconnectAll();
    await probe.close();
  }
});

// Chrome's WebSocket takes a message of any length; the worker copied each into the wasm, whose
// memory never shrinks, before the core refused it by size (16 KiB until the other end proved
// the token): whatever listens on the port could grow the worker by hundreds of megabytes per
// message, and a message of over 2 GiB of UTF-8 fails the wasm's allocation.
test("something on the bridge's port that answers the hello with 32 MiB is refused by size without growing the worker's memory", async () => {
  const probe = await startWsProbe({ flood: 32 << 20 });
  try {
    await h.internal("bridge.status");
    const before = await h.workerWasmMemory();
    const page = await openConnect(`chrome-extension://${PROVIDER_ID}/connect.html?port=${probe.port}&token=${TOKEN}`, { click: false });
    await page.click("#connect");
    await until(() => probe.seen.closes.length > 0, "the extension closes", 30_000);
    assert.equal(probe.seen.closes[0].code, 4000, JSON.stringify(probe.seen.closes[0]));
    const grown = (await h.workerWasmMemory()) - before;
    assert.ok(grown < 4 << 20, `the wasm grew by ${grown} bytes`);
    assert.notEqual((await h.internal("bridge.status")).bridge.state, "connected");
    await page.close();
  } finally {
    await disconnectAll();
    await probe.close();
  }
});

test("a refusing hello_ack's reason is shown on the connect page and in the popup, only from an end that proved the token", async () => {
  // A bridge that proved it holds the token, then refused: its words.
  const probe = await startWsProbe({ token: TOKEN, ack: { ok: false, protocol: 2, serverVersion: "probe", reason: "the profile cap is reached" } });
  try {
    const page = await openConnect(`chrome-extension://${PROVIDER_ID}/connect.html?port=${probe.port}&token=${TOKEN}`, { click: false });
    await page.click("#connect");
    await page.waitForFunction(() => /profile cap/.test(document.getElementById("status").textContent));
    const popup = await h.context.newPage();
    await popup.goto(`chrome-extension://${PROVIDER_ID}/popup.html`);
    await popup.getByText(/profile cap is reached/).waitFor();
    await popup.close();
    await page.close();
    await disconnectAll();
  } finally {
    await probe.close();
  }
  // Whatever else listens there may word a refusal as it likes (a fake connect link for the
  // user to open): not quoted, and the user is told it did not prove to be a bridge.
  const squatter = await startWsProbe({ ack: { ok: false, protocol: 2, serverVersion: "probe", reason: "SYSTEM NOTICE: open chrome-extension://x/connect.html?token=ATTACKER" } });
  try {
    const page = await openConnect(`chrome-extension://${PROVIDER_ID}/connect.html?port=${squatter.port}&token=${TOKEN}`, { click: false });
    await page.click("#connect");
    await page.waitForFunction(() => /without proving it is a Lumo bridge/.test(document.getElementById("status").textContent));
    assert.ok(!/ATTACKER|SYSTEM NOTICE/.test(await page.locator("body").innerText()));
    const popup = await h.context.newPage();
    await popup.goto(`chrome-extension://${PROVIDER_ID}/popup.html`);
    await popup.getByText(/without proving it is a Lumo bridge/).first().waitFor();
    assert.ok(!/ATTACKER|SYSTEM NOTICE/.test(await popup.locator("body").innerText()));
    await popup.close();
    await page.close();
    await disconnectAll();
  } finally {
    await squatter.close();
  }
});

test("read-only on either side refuses writes with 403", async () => {
  const a = await agent();
  const page = await openConnect(a.link);
  await h.internal("policy.setSwitch", { name: "writes", value: false });
  const r = await call(a, "write_script", { source: scriptSource("RO", "ro") });
  assert.equal(r.isError, true);
  assert.equal(r.structuredContent.status, 403);
  assert.equal(r.structuredContent.error_code, "WRITE_DISABLED");
  await h.internal("policy.setSwitch", { name: "writes", value: true });
  await page.close();
  await disconnectAll();
  await a.client.close();
  // The bridge's own --readonly: the ack says so and the connect page shows it.
  const ro = await agent({ extra: ["--readonly"] });
  const p2 = await openConnect(ro.link);
  assert.match(await p2.textContent("#state"), /read-only/);
  const r2 = await call(ro, "write_script", { source: scriptSource("RO2", "ro2") });
  assert.equal(r2.structuredContent.status, 403);
  assert.equal((await h.internal("scripts.list")).scripts.filter((s) => s.name?.startsWith("RO")).length, 0);
  await p2.close();
  await disconnectAll();
  await ro.client.close();
});

test("the agent's tool list follows the user's write switch: told on connect and on each flip, no write tool listed while writes are off", async () => {
  await h.internal("policy.setSwitch", { name: "writes", value: false });
  const a = await agent();
  let changed = 0;
  a.client.setNotificationHandler(ToolListChangedNotificationSchema, () => { changed++; });
  const names = async () => (await a.client.listTools()).tools.map((t) => t.name);
  const writeTools = ["write_script", "patch_script", "set_script_enabled", "delete_script", "restore_script", "try_script"];
  // Before the extension connects the bridge cannot know: every tool (a call says why it fails).
  assert.ok((await names()).includes("write_script"));
  const page = await openConnect(a.link);
  await until(async () => changed >= 1, "tools/list_changed once the extension said writes are off");
  const off = await names();
  assert.ok(off.includes("list_scripts") && off.includes("bridge_status"), off.join());
  for (const w of writeTools) assert.ok(!off.includes(w), `${w} listed while writes are off`);
  assert.equal((await a.status()).writesEnabled, false);
  await h.internal("policy.setSwitch", { name: "writes", value: true });
  await until(async () => changed >= 2, "tools/list_changed when writes go on");
  const on = await names();
  for (const w of writeTools) assert.ok(on.includes(w), `${w} missing while writes are on`);
  await h.internal("policy.setSwitch", { name: "writes", value: false });
  await until(async () => changed >= 3, "tools/list_changed when writes go off");
  assert.ok(!(await names()).includes("write_script"));
  await h.internal("policy.setSwitch", { name: "writes", value: true });
  await page.close();
  await disconnectAll();
  await a.client.close();
});

test("review and rate limit apply to the bridge caller", async () => {
  const a = await agent();
  const page = await openConnect(a.link);
  await h.internal("policy.setSwitch", { name: "review", value: true });
  const pending = call(a, "write_script", { source: scriptSource("Reviewed", "rv") });
  const review = await until(async () => (await h.internal("state.get")).reviews[0], "a review");
  assert.equal(review.caller, `bridge:${a.port}`);
  assert.equal(review.callerName, `Local bridge (port ${a.port})`);
  await h.internal("reviews.decide", { review: review.id, approve: false });
  const r = await pending;
  assert.equal(r.structuredContent.error_code, "USER_REJECTED");
  assert.equal(r.structuredContent.status, 403);
  await h.internal("policy.setSwitch", { name: "review", value: false });
  // 30 writes a minute per caller, and the denied write above spent one (the rate limit comes
  // before the review): 29 more pass, the next is refused.
  const uuids = [];
  for (let i = 0; i < 29; i++) {
    const w = await call(a, "write_script", { source: scriptSource(`Burst ${i}`, `b${i}`) });
    assert.equal(w.isError, false, `${i}: ${JSON.stringify(w.structuredContent)}`);
    uuids.push(w.structuredContent.script.uuid);
  }
  const limited = await call(a, "write_script", { source: scriptSource("Burst 30", "b30") });
  assert.equal(limited.structuredContent.error_code, "RATE_LIMITED");
  for (const uuid of uuids) await h.internal("scripts.delete", { uuid });
  await page.close();
  await disconnectAll();
  await a.client.close();
});

test("disconnect from the popup: a call waiting for review fails at once", async () => {
  const a = await agent();
  const page = await openConnect(a.link);
  await h.internal("policy.setSwitch", { name: "review", value: true });
  const started = Date.now();
  const pending = call(a, "write_script", { source: scriptSource("Waiting", "wt") });
  await until(async () => (await h.internal("state.get")).reviews.length === 1, "a review");
  const popup = await h.context.newPage();
  await popup.goto(`chrome-extension://${PROVIDER_ID}/popup.html`);
  await popup.getByRole("button", { name: `Disconnect Local bridge (port ${a.port})` }).click();
  const r = await pending;
  assert.equal(r.isError, true);
  assert.ok(Date.now() - started < 10_000, "failed at once, not at the 50 s review deadline");
  // Chrome's close frame carried 4002 to the bridge, and the agent is told who closed.
  assert.match(r.content[0].text, /the user disconnected the extension \(close code 4002\)/);
  // The bridge prints it as it answers the call: the answer may arrive first.
  await until(async () => /the extension disconnected \(the user disconnected the extension \(close code 4002\)\)/.test(a.stderr()), "the bridge says who closed");
  assert.equal((await h.internal("state.get")).reviews.length, 0, "the review was withdrawn");
  const after = await a.status();
  assert.equal(after.connected, false);
  // No redial follows the user's Disconnect: the agent is told who disconnected, not to wait.
  assert.match(after.message, /^The user disconnected the Lumo Userscripts extension from this bridge/);
  await until(async () => (await h.internal("bridge.status")).bridge.state === "off", "link off");
  await h.internal("policy.setSwitch", { name: "review", value: false });
  await popup.close();
  await page.close();
  await a.client.close();
});

test("bridge killed mid-call: the agent gets a clear error and nothing is half written", async () => {
  const a = await agent();
  const page = await openConnect(a.link);
  await h.internal("policy.setSwitch", { name: "review", value: true });
  const before = (await h.internal("scripts.list")).scripts.length;
  const pending = call(a, "write_script", { source: scriptSource("Killed", "kl") }).then((r) => ({ r }), (e) => ({ e }));
  await until(async () => (await h.internal("state.get")).reviews.length === 1, "a review");
  process.kill(a.pid, "SIGKILL");
  const { e } = await pending;
  assert.ok(e, "the SDK call fails");
  assert.match(String(e.message), /closed|terminated|disconnect/i);
  await until(async () => (await h.internal("state.get")).reviews.length === 0, "review withdrawn");
  assert.equal((await h.internal("scripts.list")).scripts.length, before);
  const s = await until(async () => { const b = (await h.internal("bridge.status")).bridge; return b.state === "retrying" && b; }, "retrying");
  assert.match(s.error, /connection lost/);
  await h.internal("policy.setSwitch", { name: "review", value: false });
  await page.close();
  await disconnectAll();
});

test("a call its MCP client cancels is withdrawn, through the owner and through a forwarder: its review goes and nothing is written", async () => {
  const [port, control] = await freePorts(2);
  const state = stateDir();
  const owner = await agent({ port, control, state });
  const page = await openConnect(owner.link);
  const fwd = await agent({ port, control, state });
  assert.equal((await fwd.status()).role, "forwarder");
  await h.internal("policy.setSwitch", { name: "review", value: true });
  try {
    const before = (await h.internal("scripts.list")).scripts.length;
    for (const [who, a] of [["owner", owner], ["forwarder", fwd]]) {
      const abort = new AbortController();
      const args = { source: scriptSource(`Cancelled by ${who}`, "cx") };
      const pending = a.client.callTool({ name: "write_script", arguments: args }, undefined, { signal: abort.signal, timeout: 120_000 })
        .then((r) => ({ r }), (e) => ({ e }));
      await until(async () => (await h.internal("state.get")).reviews.length === 1, `${who}: a review`);
      // The SDK sends notifications/cancelled and gives up on the call.
      abort.abort("the agent changed its mind");
      assert.ok((await pending).e, `${who}: the SDK call ends`);
      // The review leaves the popup at once (not at its 50 s deadline), so no click can apply
      // a write its agent gave up on.
      await until(async () => (await h.internal("state.get")).reviews.length === 0, `${who}: the review withdrawn`, 5_000);
    }
    assert.equal((await h.internal("scripts.list")).scripts.length, before, "nothing was written");
    const { entries } = await h.internal("audit.list");
    assert.deepEqual(entries.slice(0, 2).map((e) => [e.tool, e.result]), [["write_script", "CANCELLED"], ["write_script", "CANCELLED"]]);
    // The link serves the next call.
    assert.equal((await call(fwd, "status")).isError, false);
  } finally {
    await h.internal("policy.setSwitch", { name: "review", value: false });
    await page.close();
    await disconnectAll();
    await fwd.client.close();
    await owner.client.close();
  }
});

test("worker stopped, or the bridge restarted with the same token: the extension reconnects without a click", async () => {
  const a = await agent();
  await openConnect(a.link);
  await h.stopProviderWorker();
  await until(async () => !(await a.status()).connected, "bridge sees the drop");
  // Any event wakes the worker (here a page's message); it dials again by itself.
  await h.internal("state.get");
  await until(async () => (await a.status()).connected, "reconnected after the worker restart", 15_000);
  // The bridge goes away and a new one starts on the same port with the same token.
  await a.client.close();
  const b = await agent({ port: a.port, control: a.control, state: a.state });
  await until(async () => (await b.status()).connected, "reconnected to the new bridge", 20_000);
  const r = await call(b, "status");
  assert.equal(r.isError, false);
  await disconnectAll();
  await b.client.close();
});

test("two browsers, one bridge: the newer link keeps it, the replaced one says why and does not take it back", async () => {
  const a = await agent();
  const b = await launch();
  try {
    await openConnect(a.link);
    await until(async () => (await a.status()).connected, "the first browser connected");
    await openConnect(a.link, { browser: b });
    await until(async () => /4003/.test((await h.internal("bridge.status")).bridge.error ?? ""), "the first told it was replaced");
    // Dialling back at once, each took the bridge from the other every second.
    await new Promise((r) => setTimeout(r, 4000));
    const connected = a.stderr().match(/the extension connected/g) ?? [];
    assert.equal(connected.length, 2, a.stderr());
    assert.equal((await h.internal("bridge.status")).bridge.state, "off");
    assert.equal((await b.internal("bridge.status")).bridge.state, "connected");
    assert.equal((await call(a, "status")).isError, false);
  } finally {
    await b.close();
    await disconnectAll();
    await a.client.close();
  }
});

test("two stdio clients share one extension (owner and forwarder); the owner's exit hands over", async () => {
  const [port, control] = await freePorts(2);
  const state = stateDir();
  const owner = await agent({ port, control, state });
  assert.equal((await owner.status()).role, "owner");
  const page = await openConnect(owner.link);
  const fwd = await agent({ port, control, state });
  const fs0 = await fwd.status();
  assert.equal(fs0.role, "forwarder", JSON.stringify(fs0));
  assert.equal(fs0.connected, true, JSON.stringify(fs0));
  // The forwarder's call goes through the owner to the one extension link.
  const w = await call(fwd, "write_script", { source: scriptSource("Forwarded", "fw") });
  assert.equal(w.isError, false, JSON.stringify(w.structuredContent));
  const uuid = w.structuredContent.script.uuid;
  assert.equal(w.structuredContent.script.createdBy, `bridge:${port}`);
  // The owner exits: the forwarder wins the election, and the extension's remembered
  // authorization (same token) reconnects to it without a click.
  await owner.client.close();
  await until(async () => { const s = await fwd.status(); return s.role === "owner" && s.connected; }, "handover", 30_000);
  const r = await call(fwd, "delete_script", { uuid });
  assert.equal(r.isError, false, JSON.stringify(r.structuredContent));
  await page.close();
  await disconnectAll();
  await fwd.client.close();
});

test("the user connected a read-only bridge: a read-write one that takes over its link without a click stays read-only until the user clicks Connect again", async () => {
  const [port, control] = await freePorts(2);
  const state = stateDir();
  const owner = await agent({ port, control, state, extra: ["--readonly"] });
  const page = await openConnect(owner.link);
  assert.equal((await h.internal("bridge.status")).bridge.readonly, true);
  // The connect page no longer lists the write tools as what the bridge will expose.
  const writeTool = page.locator("#tools li").filter({ has: page.locator("code", { hasText: /^write_script$/ }) });
  await writeTool.filter({ hasText: "not exposed: this link is read-only" }).waitFor({ timeout: 5000 });
  const fwd = await agent({ port, control, state });
  assert.equal((await fwd.status()).role, "forwarder");
  await owner.client.close();
  await until(async () => { const s = await fwd.status(); return s.role === "owner" && s.connected; }, "handover", 30_000);
  assert.equal((await h.internal("bridge.status")).bridge.readonly, true, "the link the user consented to stays read-only");
  // The agent is shown no write tool, and a write called anyway is refused by the extension.
  await until(async () => !(await fwd.client.listTools()).tools.some((t) => t.name === "write_script"), "write tools hidden");
  const before = (await h.internal("scripts.list")).scripts.length;
  const w = await call(fwd, "write_script", { source: scriptSource("Not consented", "nc") });
  assert.equal(w.isError, true);
  assert.equal(w.structuredContent.error_code, "WRITE_DISABLED", JSON.stringify(w.structuredContent));
  assert.equal((await h.internal("scripts.list")).scripts.length, before);
  // The user's new click on the bridge's link is consent to what it is now.
  const again = await openConnect(owner.link);
  await until(async () => (await h.internal("bridge.status")).bridge.readonly === false, "read-write after the click");
  await until(async () => (await fwd.client.listTools()).tools.some((t) => t.name === "write_script"), "write tools listed");
  const ok = await call(fwd, "write_script", { source: scriptSource("Consented", "cs") });
  assert.equal(ok.isError, false, JSON.stringify(ok.structuredContent));
  await h.internal("scripts.delete", { uuid: ok.structuredContent.script.uuid });
  await again.close();
  await page.close();
  await disconnectAll();
  await fwd.client.close();
});

test("review: \"Approve all from this bridge\" in the popup lets that bridge link write without asking, and only that link", async () => {
  const a = await agent();
  let page = await openConnect(a.link);
  await h.internal("policy.setSwitch", { name: "review", value: true });
  const uuids = [];
  try {
    const first = call(a, "write_script", { source: scriptSource("Approve all 1", "aa1") });
    await until(async () => (await h.internal("state.get")).reviews.length === 1, "a review");
    const popup = await h.context.newPage();
    await popup.goto(`chrome-extension://${PROVIDER_ID}/popup.html`);
    // Named for what it covers: the bridge's link, which every MCP client of that bridge shares.
    await popup.getByRole("button", { name: "Approve all from this bridge (every MCP client using it)" }).click();
    const w1 = await first;
    assert.equal(w1.isError, false, JSON.stringify(w1.structuredContent));
    uuids.push(w1.structuredContent.script.uuid);
    await popup.close();
    // The next write on the same link is not asked about.
    const w2 = await call(a, "write_script", { source: scriptSource("Approve all 2", "aa2") });
    assert.equal(w2.isError, false, JSON.stringify(w2.structuredContent));
    uuids.push(w2.structuredContent.script.uuid);
    assert.equal((await h.internal("state.get")).reviews.length, 0);
    // A new link (disconnect, connect again: a new session) is asked again.
    await page.close();
    await disconnectAll();
    page = await openConnect(a.link);
    const third = call(a, "write_script", { source: scriptSource("Approve all 3", "aa3") });
    const review = await until(async () => (await h.internal("state.get")).reviews[0], "a review on the new link");
    assert.equal(review.caller, `bridge:${a.port}`);
    await h.internal("reviews.decide", { review: review.id, approve: false });
    assert.equal((await third).structuredContent.error_code, "USER_REJECTED");
  } finally {
    await h.internal("policy.setSwitch", { name: "review", value: false });
    for (const uuid of uuids) await h.internal("scripts.delete", { uuid });
    await page.close();
    await disconnectAll();
    await a.client.close();
  }
});

test("Remember: the authorization is for that token only, and survives a browser restart only when ticked", async () => {
  const a = await agent();
  let b = await launch();
  const profile = b.userDataDir;
  const restart = async () => {
    await b.close({ keepProfile: true });
    await until(async () => !(await a.status()).connected, "the bridge sees the browser go");
    b = await launch({ userDataDir: profile });
  };
  const stillOff = async (who, ms = 3000) => {
    await new Promise((r) => setTimeout(r, ms));
    assert.equal((await who.status()).connected, false);
    assert.equal((await b.internal("bridge.status")).bridge.state, "off");
  };
  let other;
  try {
    // Not ticked: the authorization lives in session storage; a restart forgets it.
    await openConnect(a.link, { browser: b });
    await until(async () => (await a.status()).connected, "connected");
    await restart();
    await stillOff(a);
    let page = await openConnect(a.link, { browser: b, click: false });
    assert.equal(await page.isChecked("#remember"), false);
    assert.equal(await page.getAttribute("#state", "data-state"), "off");
    await page.close();
    // Ticked: the restarted browser dials this bridge again without a click.
    await openConnect(a.link, { browser: b, remember: true });
    await restart();
    await until(async () => (await a.status()).connected, "reconnected after the restart without a click", 20_000);
    page = await openConnect(a.link, { browser: b, click: false });
    assert.equal(await page.isChecked("#remember"), true, "the page shows the remembered token");
    await page.close();
    // For that token only: the same address with another token is not authorized by it…
    const otherToken = "e2e-bridge-other-token-0123456789abcdef0123";
    const stranger = await openConnect(a.link.replace(/token=[^&]+/, `token=${otherToken}`), { browser: b, click: false });
    assert.equal(await stranger.isChecked("#remember"), false);
    assert.equal(await stranger.getAttribute("#state", "data-state"), "off");
    await stranger.close();
    // …and a bridge that restarts on that port with a new token is not dialled into: the
    // new bridge cannot prove the remembered token, which is forgotten (and was never sent).
    await a.client.close();
    other = await agent({ port: a.port, control: a.control, state: a.state, token: otherToken });
    await new Promise((r) => setTimeout(r, 3000));
    assert.equal((await other.status()).connected, false);
    await until(async () => (await b.internal("bridge.status")).bridge.state === "off", "the link gives up");
    await b.close({ keepProfile: true });
    b = await launch({ userDataDir: profile });
    await stillOff(other);
  } finally {
    await other?.client.close();
    await a.client.close().catch(() => {});
    await b.close();
  }
});

// Found by a tester: with the README's set-up (no token: a new one at each start), the next
// client's bridge told the agent the extension "reconnects by itself within a few seconds",
// which it never does: the extension cannot prove a token it never got, and forgets its
// authorization. The agent is now told to ask for the click, which connects.
test("a bridge started without a token asks for the click, not for patience, when an earlier one's authorization cannot hold", async () => {
  const a = await agent({ token: null });
  let b;
  let page;
  try {
    page = await openConnect(a.link);
    await until(async () => (await a.status()).connected, "connected");
    await page.close();
    await a.client.close();
    b = await agent({ port: a.port, control: a.control, state: a.state, token: null });
    assert.notEqual(b.link, a.link, "a new token, a new link");
    await until(async () => (await h.internal("bridge.status")).bridge.state === "off", "the extension gives the old authorization up", 30_000);
    const told = await b.status();
    assert.equal(told.connected, false);
    assert.match(told.message, /will not connect by itself: this bridge made a new token when it started/);
    assert.ok(told.message.endsWith(`click Connect: ${b.link}`), told.message);
    const refused = await call(b, "list_scripts");
    assert.match(refused.content[0].text, /will not connect by itself/);
    page = await openConnect(b.link);
    await until(async () => (await b.status()).connected, "the click connects the new bridge");
    assert.equal((await call(b, "list_scripts")).isError, false);
  } finally {
    await page?.close();
    await disconnectAll().catch(() => {});
    await b?.client.close();
    await a.client.close().catch(() => {});
  }
});

test("a web page that knows the token still cannot open the bridge's WebSocket (Origin), and the user's link stays", async () => {
  const a = await agent();
  const page = await openConnect(a.link);
  const web1 = await h.context.newPage();
  try {
    await web1.goto(`${web.url}/web.html`);
    // The attacker's page tries the bridge's port with a hello, as the extension would.
    const outcome = await web1.evaluate(({ port, token }) => new Promise((resolve) => {
      const ws = new WebSocket(`ws://127.0.0.1:${port}/`);
      let opened = false;
      ws.onopen = () => {
        opened = true;
        ws.send(JSON.stringify({ k: "req", id: 0, type: "hello", payload: { protocol: 2, nonce: "page-nonce-0123456789abcdef", extVersion: "0", label: "page" } }));
      };
      ws.onmessage = (e) => resolve({ opened, message: String(e.data) });
      ws.onclose = (e) => resolve({ opened, code: e.code });
      setTimeout(() => resolve({ opened, timeout: true }), 5000);
    }), { port: a.port, token: TOKEN });
    assert.equal(outcome.opened, false, JSON.stringify(outcome));
    assert.equal(outcome.code, 1006, "the upgrade was refused (403), no socket");
    // The control: the same page can open a loopback WebSocket that does not check Origin, so
    // the refusal above is the bridge's, not Chrome's.
    const probe = await startWsProbe();
    try {
      const ok = await web1.evaluate((port) => new Promise((resolve) => {
        const ws = new WebSocket(`ws://127.0.0.1:${port}/`);
        ws.onopen = () => { ws.close(); resolve(true); };
        ws.onclose = () => resolve(false);
      }), probe.port);
      assert.equal(ok, true, "a page can reach a loopback WebSocket that does not check Origin");
    } finally {
      await probe.close();
    }
    // The extension's link is the one still attached, and still answers.
    assert.equal((await a.status()).connected, true);
    assert.equal((await call(a, "status")).isError, false);
    assert.doesNotMatch(a.stderr(), /the extension disconnected/);
  } finally {
    await web1.close();
    await page.close();
    await disconnectAll();
    await a.client.close();
  }
});

test("the worker pings an idle link within 30 s (Chrome keeps a worker alive while its WebSocket is active)", async () => {
  const probe = await startWsProbe({ token: TOKEN, ack: { ok: true, protocol: 2, serverVersion: "probe", readonly: false } });
  try {
    await openConnect(`chrome-extension://${PROVIDER_ID}/connect.html?port=${probe.port}&token=${TOKEN}`);
    const opened = Date.now();
    await until(() => probe.seen.frames.some((f) => JSON.parse(f).k === "png"), "a ping frame", 30_000);
    assert.ok(Date.now() - opened < 30_000);
    assert.equal((await h.internal("bridge.status")).bridge.state, "connected", "the pong kept it open");
  } finally {
    await disconnectAll();
    await probe.close();
  }
});

test("the advanced switch: a host that is not this computer is dialled only when the user ticks it", async () => {
  // Every host name resolves to 127.0.0.1 in this browser, so the probe stands in for a remote bridge.
  const probe = await startWsProbe({ token: TOKEN, ack: { ok: true, protocol: 2, serverVersion: "probe", readonly: false } });
  try {
    const link = `chrome-extension://${PROVIDER_ID}/connect.html?host=bridge.example&port=${probe.port}&token=${TOKEN}`;
    const page = await openConnect(link, { click: false });
    assert.equal(await page.textContent("#host"), "bridge.example");
    assert.equal(await page.isVisible("#address-warning"), true);
    await page.click("#connect");
    await page.waitForFunction(() => /loopback/.test(document.getElementById("status").textContent));
    assert.deepEqual(probe.seen.upgrades, [], "not dialled without the switch");
    await page.check("#allow-remote");
    await page.click("#connect");
    await page.waitForFunction(() => document.getElementById("state").dataset.state === "connected", null, { timeout: 10_000 });
    assert.equal(probe.seen.upgrades.length, 1);
    assert.equal(probe.seen.upgrades[0].host, `bridge.example:${probe.port}`);
    // The connected indicator and a review name where the agent is: "Local bridge" it is not.
    const popup = await h.context.newPage();
    await popup.goto(`chrome-extension://${PROVIDER_ID}/popup.html`);
    await popup.getByRole("button", { name: `Disconnect Bridge at bridge.example:${probe.port} (not this computer)` }).waitFor({ timeout: 10_000 });
    assert.ok(!/Local bridge/.test(await popup.locator("#sessions").innerText()));
    await popup.close();
    await page.close();
  } finally {
    await disconnectAll();
    await probe.close();
  }
});

test("a bridge that speaks another protocol version is refused, and the page names both numbers", async () => {
  const probe = await startWsProbe({ ack: { ok: true, protocol: 3, serverVersion: "probe-next", readonly: false } });
  try {
    const page = await openConnect(`chrome-extension://${PROVIDER_ID}/connect.html?port=${probe.port}&token=${TOKEN}`, { click: false });
    await page.click("#connect");
    await page.waitForFunction(() => /protocol 2.*protocol 3/.test(document.getElementById("status").textContent), null, { timeout: 10_000 });
    await until(() => probe.seen.closes.length > 0, "the extension closes");
    assert.equal(probe.seen.closes[0].code, 4000);
    assert.notEqual((await h.internal("bridge.status")).bridge.state, "connected");
    await page.close();
  } finally {
    await disconnectAll();
    await probe.close();
  }
});

test("the endpoint switch: turning the provider off closes the bridge link (4002), and the agent is told", async () => {
  const a = await agent();
  const page = await openConnect(a.link);
  try {
    await h.internal("policy.setSwitch", { name: "endpoint", value: false });
    await until(async () => !(await a.status()).connected, "the bridge sees the link close");
    assert.match(a.stderr(), /the user disconnected the extension \(close code 4002\)/);
    const r = await call(a, "list_scripts");
    assert.equal(r.isError, true);
    // 4002: no redial will come, and the agent is not told to wait for one.
    assert.match(r.content[0].text, /^NOT_CONNECTED \(503\): The user disconnected the Lumo Userscripts extension from this bridge/);
    // While it is off the connect page connects nothing, and says why.
    const again = await openConnect(a.link, { click: false });
    try {
      await again.click("#connect");
      await again.waitForFunction(() => /agent access is switched off/.test(document.getElementById("status").textContent), null, { timeout: 5000 });
      await new Promise((res) => setTimeout(res, 1000));
      assert.equal((await a.status()).connected, false);
      assert.equal((await h.internal("bridge.status")).bridge.state, "off");
    } finally {
      await again.close();
    }
    // The switch forgot the authorization: turning it back on does not reconnect by itself.
    await h.internal("policy.setSwitch", { name: "endpoint", value: true });
    await new Promise((res) => setTimeout(res, 2000));
    assert.equal((await a.status()).connected, false);
  } finally {
    await h.internal("policy.setSwitch", { name: "endpoint", value: true });
    await page.close();
    await disconnectAll();
    await a.client.close();
  }
});
