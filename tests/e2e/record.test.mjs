// The user stays in charge and the record stays whole, tried as a hostile agent would over raw
// lumo:mcp ports: revocation closes a caller's ports at once and ends "approve all from this
// session"; refused calls cannot wipe the audit record of a real write; a request too deep or
// too large to parse is still answered with its id; a cancelled request gets no reply; names
// that look the same are one identity.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { HOST_ID, PROVIDER_ID, launch } from "./lib/harness.mjs";
import { MCP_PORT } from "./lib/contract.mjs";
import { until, sleep, show } from "./lib/util.mjs";

const T = { timeout: 120_000 };
const source = (name, body = "") =>
  `// ==UserScript==\n// @name ${name}\n// @namespace lumo-record\n// @match https://example.com/*\n// ==/UserScript==\n${body}\n`;
const initialize = (id) => ({
  jsonrpc: "2.0", id, method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "record", version: "0" } },
});
const initialized = { jsonrpc: "2.0", method: "notifications/initialized" };
const callMsg = (id, name, args) => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name, arguments: args } });

describe("record", () => {
  let h;
  const panics = [];
  const setSwitch = (name, value) => h.internal("policy.setSwitch", { name, value });
  const reviews = async () => (await h.internal("state.get")).reviews;
  const waitingReview = () => until(reviews, (r) => r.length > 0, 5000);

  /** The host on the allowlist (a failed test may have left it removed). */
  async function approved() {
    const { policy } = await h.internal("state.get");
    if (!policy.allowlist.some((e) => e.id === HOST_ID)) await h.internal("policy.add", { id: HOST_ID, name: "Lumo Test Host" });
  }

  /** A raw port, initialized. */
  async function rawReady() {
    await approved();
    const p = await h.lumo("rawOpen", PROVIDER_ID, MCP_PORT);
    assert.equal(typeof p, "number", show(p));
    await h.lumo("rawSend", p, initialize("init"));
    const got = await until(() => h.lumo("rawMessages", p), (m) => m.some((x) => x.id === "init"), 5000);
    assert.ok(got.some((x) => x.id === "init" && x.result), show(got));
    await h.lumo("rawSend", p, initialized);
    return p;
  }
  const replyTo = (p, id, ms = 5000) =>
    until(() => h.lumo("rawMessages", p), (m) => m.some((x) => x.id === id), ms).then((m) => m.find((x) => x.id === id));
  async function send(p, msg) {
    const r = await h.lumo("rawSend", p, msg);
    assert.deepEqual(r, { sent: true }, show(r));
  }

  before(async () => {
    h = await launch();
    h.watchPanics(panics);
    await h.internal("policy.add", { id: HOST_ID, name: "Lumo Test Host" });
  });
  after(async () => { await h?.close(); });

  test("revocation: approve-all for a session, remove the caller -> its port closes at once; re-added, a new session is reviewed again", T, async () => {
    await setSwitch("review", true);
    try {
      const p = await rawReady();
      const other = await rawReady();
      await send(p, callMsg("w1", "write_script", { source: source("Revoked 1") }));
      const [review] = await waitingReview();
      await h.internal("reviews.decide", { review: review.id, approve: true, allowSession: true });
      assert.equal((await replyTo(p, "w1")).result?.isError, false);
      // The allowance works: the next write of this session is not reviewed.
      await send(p, callMsg("w2", "write_script", { source: source("Revoked 2") }));
      assert.equal((await replyTo(p, "w2")).result?.isError, false, "allowed for this session");

      const t0 = Date.now();
      await h.internal("policy.remove", { id: HOST_ID });
      const closed = await until(() => Promise.all([h.lumo("rawClosed", p), h.lumo("rawClosed", other)]), (c) => c.every(Boolean), 2000);
      assert.deepEqual(closed, [true, true], "every port of the removed caller is closed right away");
      assert.ok(Date.now() - t0 < 2000);
      assert.deepEqual((await h.internal("state.get")).sessions, [], "the popup no longer lists it");
      // Nothing the old port sends can reach the provider any more.
      const late = await h.lumo("rawSend", p, callMsg("w3", "write_script", { source: source("Revoked 3") }));
      assert.ok(late.error, `the old port is dead: ${show(late)}`);

      await h.internal("policy.add", { id: HOST_ID, name: "Lumo Test Host" });
      const fresh = await rawReady();
      await send(fresh, callMsg("w4", "write_script", { source: source("Revoked 4") }));
      const [again] = await waitingReview();
      assert.equal(again.tool, "write_script", "the new session's write waits for review");
      await h.internal("reviews.decide", { review: again.id, approve: false });
      assert.equal((await replyTo(fresh, "w4")).result?.structuredContent?.error_code, "USER_REJECTED");
      const audit = (await h.internal("audit.list")).entries;
      assert.equal(audit.filter((e) => e.result === "ok").length, 2, "only the two allowed writes ran");

      // Review off then on again ends every allowance, on a port that stays open.
      await send(fresh, callMsg("w5", "write_script", { source: source("Revoked 5") }));
      const [r5] = await waitingReview();
      await h.internal("reviews.decide", { review: r5.id, approve: true, allowSession: true });
      assert.equal((await replyTo(fresh, "w5")).result?.isError, false);
      await setSwitch("review", false);
      await setSwitch("review", true);
      await send(fresh, callMsg("w6", "write_script", { source: source("Revoked 6") }));
      const [r6] = await waitingReview();
      assert.equal(r6.tool, "write_script", "reviewed again after review was switched back on");
      await h.internal("reviews.decide", { review: r6.id, approve: false });
      await replyTo(fresh, "w6");
      await h.lumo("rawClose", fresh);
    } finally {
      await setSwitch("review", false);
    }
  });

  test("a real write's audit entry survives 1,200 refused calls", T, async () => {
    const p = await rawReady();
    await send(p, callMsg("real", "write_script", { source: source("Audited write") }));
    const made = await replyTo(p, "real");
    assert.equal(made.result?.isError, false, show(made));
    const uuid = made.result.structuredContent.script.uuid;
    // 1,200 cheap refusals (invalid arguments: no rate-limit slot), in waves of 30: a session
    // has at most 32 requests being handled, and more are answered -32000, not audited.
    const page = await h.hostPage();
    for (let w = 0; w < 40; w++) {
      await page.evaluate(([p, w]) => {
        for (let i = w * 30; i < w * 30 + 30; i++) {
          window.lumo.rawSend(p, { jsonrpc: "2.0", id: `x${i}`, method: "tools/call", params: { name: "delete_script", arguments: { uuid: `nope-${i}` } } });
        }
      }, [p, w]);
      // Every answer of the wave, not its last id: each call is a task of its own, and the
      // last sent may be answered first.
      await until(() => h.lumo("rawMessages", p), (m) => {
        const ids = new Set(m.map((x) => x.id));
        return Array.from({ length: 30 }, (_, i) => `x${w * 30 + i}`).every((id) => ids.has(id));
      }, 90_000);
    }
    assert.ok(!(await h.lumo("rawMessages", p)).some((x) => x.error?.code === -32000), "no wave was over the session's bound");
    const entries = (await h.internal("audit.list")).entries;
    assert.ok(entries.filter((e) => e.result === "INVALID_ARGUMENTS").length >= 990, "the refusals are audited too (a ring keeps its newest 990–1000)");
    const mine = entries.filter((e) => e.target === uuid && e.result === "ok");
    assert.equal(mine.length, 1, `the write's entry is still there: ${show(entries.slice(-3))}`);
    await h.lumo("rawClose", p);
  });

  test("an audit log stored in chunks of 100 (the earlier layout) is listed whole after a restart; the next write starts a chunk of its own", T, async () => {
    const page = await h.providerPage();
    const storage = (keys) => page.evaluate((keys) => chrome.storage.local.get(keys), keys);
    const t0 = Date.now() - 1e6;
    await page.evaluate(async ([t0, caller]) => {
      const all = await chrome.storage.local.get(null);
      await chrome.storage.local.remove(Object.keys(all).filter((k) => /^audit\/(head|\d+)$/.test(k)));
      const entry = (i) => ({ at: t0 + i, tool: "write_script", caller, result: "ok", digest: i.toString(16).padStart(64, "0") });
      await chrome.storage.local.set({
        "audit/head": { first: 0, last: 1 },
        "audit/0": Array.from({ length: 100 }, (_, i) => entry(i)),
        "audit/1": Array.from({ length: 37 }, (_, i) => entry(100 + i)),
      });
    }, [t0, HOST_ID]);
    await h.stopProviderWorker();
    const p = await rawReady();
    await send(p, callMsg("after-upgrade", "write_script", { source: source("Written after the upgrade") }));
    const made = await replyTo(p, "after-upgrade");
    assert.equal(made.result?.isError, false, show(made));
    const uuid = made.result.structuredContent.script.uuid;
    const ok = (await h.internal("audit.list")).entries.filter((e) => e.result === "ok");
    assert.equal(ok[0]?.target, uuid, `the write is the newest entry: ${show(ok[0])}`);
    assert.deepEqual(ok.slice(1).map((e) => e.at), Array.from({ length: 137 }, (_, i) => t0 + 136 - i), "every planted entry listed, newest first");
    const stored = await storage(["audit/head", "audit/0", "audit/1", "audit/2"]);
    assert.deepEqual(stored["audit/head"], { first: 0, last: 2 });
    assert.equal(stored["audit/0"].length, 100);
    assert.equal(stored["audit/1"].length, 37, "the old newest chunk is not rewritten");
    assert.deepEqual(stored["audit/2"].map((e) => e.target), [uuid]);
    await h.lumo("rawClose", p);
  });

  test("too deep or over 1 MiB: answered at once with the request's id", T, async () => {
    const p = await rawReady();
    let deep = 1;
    for (let i = 0; i < 126; i++) deep = [deep];
    const t0 = Date.now();
    await send(p, callMsg("deep-1", "validate_script", { source: "x", extra: deep }));
    const a = await replyTo(p, "deep-1", 3000);
    assert.ok(a, `no reply carrying id "deep-1": ${show(await h.lumo("rawMessages", p))}`);
    assert.equal(a.error?.code, -32600, show(a));
    assert.match(a.error.message, /nested/);
    // Over the message limit, with the id after the big part.
    await send(p, { jsonrpc: "2.0", method: "tools/call", params: { name: "validate_script", arguments: { source: "y".repeat(1_100_000) } }, id: 77 });
    const b = await replyTo(p, 77, 3000);
    assert.ok(b, "no reply carrying id 77");
    assert.equal(b.error?.code, -32600, show(b));
    assert.match(b.error.message, /over the/);
    assert.ok(Date.now() - t0 < 6000, "promptly");
    // The port is still usable.
    await send(p, { jsonrpc: "2.0", id: "after", method: "ping" });
    assert.deepEqual((await replyTo(p, "after")).result, {});
    await h.lumo("rawClose", p);
  });

  test("a request cancelled with notifications/cancelled gets no reply", T, async () => {
    await setSwitch("review", true);
    try {
      const p = await rawReady();
      await send(p, callMsg("c1", "write_script", { source: source("Cancelled write") }));
      await waitingReview();
      await send(p, { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: "c1", reason: "stop" } });
      // The review is withdrawn…
      assert.deepEqual(await until(reviews, (r) => r.length === 0, 3000), []);
      // …and nothing answers c1, while a later request is answered.
      await send(p, { jsonrpc: "2.0", id: "c2", method: "ping" });
      await replyTo(p, "c2");
      await sleep(500);
      const msgs = await h.lumo("rawMessages", p);
      assert.deepEqual(msgs.filter((m) => m.id === "c1"), [], `a cancelled request was answered: ${show(msgs)}`);
      await h.lumo("rawClose", p);
    } finally {
      await setSwitch("review", false);
    }
  });

  test("ten look-alike \"Bank helper\" scripts: one is stored, the others are CONFLICT naming it; a 150 KB @name is refused; the pages render", T, async () => {
    const p = await rawReady();
    const looks = [
      "Bank helper", "Bank\u200B helper", "Bank\u00A0helper", "Bank \u061Chelper", "B\u0430nk helper",
      "Bank h\u0435lper", "Bank he\u04CFper", "\uFEFFBank  helper\u2060", "Ba\u0578k helper", "\uFF22ank helper",
    ];
    const results = [];
    for (const [i, name] of looks.entries()) {
      await send(p, callMsg(`n${i}`, "write_script", { source: source(name) }));
      results.push((await replyTo(p, `n${i}`)).result);
    }
    assert.equal(results[0].isError, false, show(results[0]));
    const uuid = results[0].structuredContent.script.uuid;
    results.slice(1).forEach((r, i) => {
      assert.equal(r.structuredContent?.error_code, "CONFLICT", `look-alike #${i + 1}: ${show(r)}`);
      assert.equal(r.structuredContent.details?.existingUuid, uuid);
      assert.match(r.content[0].text, /"Bank helper"/);
    });
    await send(p, callMsg("long", "write_script", { source: source("N".repeat(150_000)) }));
    const long = (await replyTo(p, "long")).result;
    assert.equal(long.structuredContent?.error_code, "INVALID_METADATA", show(long));
    assert.match(long.content[0].text, /150000 characters long; the most is 200/);
    const listed = (await h.internal("scripts.list")).scripts.filter((x) => /Bank|helper/.test(x.name));
    assert.deepEqual(listed.map((x) => x.name), ["Bank helper"]);
    // The pages show it once, at a sane width.
    const page = await h.context.newPage();
    await page.setViewportSize({ width: 380, height: 600 });
    await page.goto(`chrome-extension://${PROVIDER_ID}/popup.html`);
    await page.waitForFunction(() => document.getElementById("audit")?.childElementCount > 0);
    const options = await h.context.newPage();
    await options.goto(`chrome-extension://${PROVIDER_ID}/options.html`);
    await options.getByText("Bank helper", { exact: true }).first().waitFor({ timeout: 5000 });
    assert.equal(await options.getByText(/Bank.helper/).count(), 1, "one Bank helper in the options page");
    for (const pg of [page, options]) {
      const width = await pg.evaluate(() => document.documentElement.scrollWidth);
      assert.ok(width < 2000, `page width ${width}`);
      await pg.close();
    }
    await h.lumo("rawClose", p);
  });

  test("the provider logged no panic", () => { assert.deepEqual(panics, []); });
});
