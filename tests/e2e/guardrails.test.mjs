// Guardrails through the real host path (official MCP SDK client in the test host): the rate
// limit's exact count in a burst, and the review outcomes a unit test cannot show end to end —
// the target changing while the user looks, expiry, and "allow for this session".
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { HOST_ID, PROVIDER_ID, launch } from "./lib/harness.mjs";
import { until as untilFor, sleep, show } from "./lib/util.mjs";

const T = { timeout: 120_000 };
const source = (name, body = "") =>
  `// ==UserScript==\n// @name ${name}\n// @namespace guardrails\n// @match https://example.com/*\n// ==/UserScript==\n${body}\n`;

const until = (get, pred, timeout = 10_000) => untilFor(get, pred, timeout);

describe("guardrails", () => {
  let h, s;
  const call = (name, args = {}) => h.lumo("callTool", s, name, args);
  const audit = async () => (await h.internal("audit.list")).entries;
  const setSwitch = (name, value) => h.internal("policy.setSwitch", { name, value });
  /** Starts a write in the host page without waiting for it; `settle()` waits (bounded). */
  async function startWrite(name, args) {
    const page = await h.hostPage();
    await page.evaluate(([s, name, args]) => { window.__pending = window.lumo.callTool(s, name, args); }, [s, name, args]);
    return (ms = 10_000) => page.evaluate((ms) => Promise.race([window.__pending, new Promise((r) => setTimeout(() => r("still waiting"), ms))]), ms);
  }
  const waitingReview = () => until(async () => (await h.internal("state.get")).reviews, (r) => r.length > 0);

  before(async () => {
    h = await launch();
    await h.internal("policy.approve", { id: HOST_ID });
    await h.setUserScriptsAccess(PROVIDER_ID, true);
    s = await h.lumo("connect", PROVIDER_ID);
  });
  after(async () => { await h?.close(); });

  test("the badge shows the open sessions, and ! while a review waits", T, async () => {
    const page = await h.providerPage();
    const badge = () => page.evaluate(() => chrome.action.getBadgeText({}));
    assert.equal(await until(badge, (b) => b === "1"), "1", "one connected session");
    await setSwitch("review", true);
    try {
      const settle = await startWrite("write_script", { source: source("Badge review") });
      const [review] = await waitingReview();
      assert.equal(await until(badge, (b) => b === "!"), "!", "a review waits");
      await h.internal("reviews.decide", { review: review.id, approve: false });
      assert.equal((await settle()).structuredContent.error_code, "USER_REJECTED");
      assert.equal(await until(badge, (b) => b === "1"), "1", "back to the session count");
    } finally {
      await setSwitch("review", false);
    }
    // The refused write spent a rate-limit slot; the burst below needs all 30.
    await page.evaluate(() => chrome.storage.session.remove("rateWindow"));
  });

  test("31 writes in a burst: exactly 30 run, the 31st is RATE_LIMITED with the seconds to wait", T, async () => {
    const page = await h.hostPage();
    // All 31 sent at once from the host page, as a misbehaving agent would.
    const results = await page.evaluate(async (s) => {
      const src = (i) => `// ==UserScript==\n// @name Burst ${i}\n// @namespace guardrails\n// @match https://example.com/*\n// ==/UserScript==\n`;
      return Promise.all(Array.from({ length: 31 }, (_, i) => window.lumo.callTool(s, "write_script", { source: src(i) })));
    }, s);
    const ok = results.filter((r) => r.isError === false);
    const limited = results.filter((r) => r.structuredContent?.error_code === "RATE_LIMITED");
    assert.equal(ok.length, 30, show(results.filter((r) => r.isError !== false).map((r) => r.content?.[0]?.text ?? r)));
    assert.equal(limited.length, 1);
    assert.ok(limited[0].structuredContent.details.retryAfterSeconds >= 1, show(limited[0].structuredContent));
    const listed = await call("list_scripts", { limit: 100 });
    assert.equal(listed.structuredContent.total, 30, "exactly 30 scripts were stored");
    const entries = await audit();
    assert.equal(entries.filter((e) => e.result === "ok" && e.tool === "write_script").length, 30);
    assert.equal(entries.filter((e) => e.result === "RATE_LIMITED").length, 1);
    const status = await call("status");
    assert.equal(status.structuredContent.writesLeftInWindow, 0);
    // Reads are not limited.
    assert.equal((await call("get_script", { uuid: ok[0].structuredContent.script.uuid })).isError, false);
    // Let the window pass for the next tests: clear it as the user would by waiting.
    const provider = await h.providerPage();
    await provider.evaluate(() => chrome.storage.session.remove("rateWindow"));
  });

  // An agent that fills chrome.storage.local to the byte leaves the user unable to turn a script
  // off, delete it or undo (each of those writes too). Its writes stop short of the reserve,
  // measured by Chrome's own getBytesInUse; the user's own changes may use it.
  test("storage: an agent's write past the agents' share is refused, and the user can still turn a script off and delete it", T, async () => {
    const provider = await h.providerPage();
    const mine = await call("write_script", { source: source("Reserve mine") });
    assert.equal(mine.isError, false, show(mine));
    const uuid = mine.structuredContent.script.uuid;
    const written = [];
    try {
      // Something else (as other scripts, their history and files would) fills it to 400 KB
      // below the agents' 8 MiB: one more 250 KB write fits, the next does not.
      const inUse = () => provider.evaluate(() => chrome.storage.local.getBytesInUse(null));
      const room = 8 * 2 ** 20 - 400_000 - await inUse() - "e2e/filler".length - 2;
      await provider.evaluate((n) => chrome.storage.local.set({ "e2e/filler": "f".repeat(n) }), room);
      const fits = await call("write_script", { source: source("Reserve fits", `// ${"x".repeat(250_000)}`) });
      assert.equal(fits.isError, false, show(fits.structuredContent));
      written.push(fits.structuredContent.script.uuid);
      const before = await inUse();
      // 30,000 `<`: 180 KB as Chrome counts them (`\u003C`), past the 150 KB left.
      const big = await call("write_script", { source: source("Reserve big", `// ${"<".repeat(30_000)}`) });
      assert.equal(big.structuredContent?.error_code, "PAYLOAD_TOO_LARGE", show(big.structuredContent));
      assert.match(big.content[0].text, /storage is nearly full/);
      const after = await inUse();
      assert.ok(after - before < 16 * 1024, `nothing of it was stored: ${before} → ${after} bytes in use`);
      const off = await h.internal("scripts.setEnabled", { uuid, enabled: false });
      assert.equal(off.ok, true, show(off));
    } finally {
      await provider.evaluate(() => chrome.storage.local.remove("e2e/filler"));
      for (const u of [uuid, ...written]) await h.internal("scripts.delete", { uuid: u });
      // The 250 KB one leaves no weight in the trash for the next tests.
      if (written.length) await h.internal("trash.purge", { uuids: written });
    }
  });

  test("review: the script changes while the user looks → approval gives CONFLICT, nothing overwritten", T, async () => {
    const created = await call("write_script", { source: source("Reviewed target") });
    const { uuid } = created.structuredContent.script;
    await setSwitch("review", true);
    try {
      const settle = await startWrite("set_script_enabled", { uuid, enabled: false });
      const [review] = await waitingReview();
      assert.equal(review.target, uuid);
      assert.equal(review.baseRevision, 1);
      // Meanwhile the user edits the script from the options page (the same internal operation).
      const page = await h.providerPage();
      const toggled = await page.evaluate((uuid) => chrome.runtime.sendMessage({ channel: "lumo:internal", op: "scripts.setEnabled", uuid, enabled: false }), uuid);
      assert.equal(toggled.ok, true, show(toggled));
      await h.internal("reviews.decide", { review: review.id, approve: true });
      const r = await settle();
      assert.equal(r.isError, true, show(r));
      assert.equal(r.structuredContent.error_code, "CONFLICT", show(r.structuredContent));
      const got = await call("get_script", { uuid });
      assert.equal(got.structuredContent.script.revision, 2, "only the user's change happened");
      assert.equal(got.structuredContent.script.updatedBy, "user");
    } finally {
      await setSwitch("review", false);
    }
  });

  test("review: \"approve all from this session\" stops asking on that connection only", T, async () => {
    await setSwitch("review", true);
    try {
      const settle = await startWrite("write_script", { source: source("Session A") });
      const [review] = await waitingReview();
      await h.internal("reviews.decide", { review: review.id, approve: true, allowSession: true });
      assert.equal((await settle()).isError, false);
      // The same connection writes again without a review.
      const again = await call("write_script", { source: source("Session B") });
      assert.equal(again.isError, false, show(again));
      // Read-only as an emergency stop ends the allowance (a tester's: it survived): with
      // writes back on, the same connection is asked again.
      await setSwitch("writes", false);
      await setSwitch("writes", true);
      const afterStop = await startWrite("write_script", { source: source("Session D") });
      const waiting = await until(async () => (await h.internal("state.get")).reviews, (r) => r.length > 0, 3000).catch(() => []);
      assert.equal(waiting[0]?.summary, 'Create the script "Session D"', show(await afterStop(100)));
      await h.internal("reviews.decide", { review: waiting[0].id, approve: false });
      assert.equal((await afterStop()).structuredContent.error_code, "USER_REJECTED");
      // A new connection is asked again.
      const other = await h.lumo("connect", PROVIDER_ID);
      const page = await h.hostPage();
      await page.evaluate(([o, src]) => { window.__other = window.lumo.callTool(o, "write_script", { source: src }); }, [other, source("Session C")]);
      const [second] = await waitingReview();
      assert.equal(second.summary, 'Create the script "Session C"');
      await h.internal("reviews.decide", { review: second.id, approve: false });
      const denied = await page.evaluate(() => window.__other);
      assert.equal(denied.structuredContent.error_code, "USER_REJECTED");
      assert.equal(denied.structuredContent.status, 403);
      await h.lumo("close", other);
    } finally {
      await setSwitch("review", false);
    }
  });

  test("review: no decision within the bound → REVIEW_EXPIRED, nothing written, audited", T, async () => {
    await setSwitch("review", true);
    try {
      const before = (await call("list_scripts", { limit: 100 })).structuredContent.total;
      // A fresh connection: the main one was allowed without review by the previous test.
      s = await h.lumo("connect", PROVIDER_ID);
      const settle = await startWrite("write_script", { source: source("Never decided") });
      const [review] = await waitingReview();
      assert.ok(review, `a review waits (the call gave ${show(await settle(100))})`);
      const wait = review.expiresAt - review.createdAt;
      assert.ok(wait > 0 && wait < 60_000, `expires before the SDK's 60 s request timeout (${wait} ms)`);
      const r = await settle(wait + 10_000);
      assert.equal(r.structuredContent?.error_code, "REVIEW_EXPIRED", show(r));
      assert.equal((await h.internal("state.get")).reviews.length, 0, "the expired review is gone from the popup");
      assert.equal((await call("list_scripts", { limit: 100 })).structuredContent.total, before);
      assert.ok((await audit()).some((e) => e.result === "REVIEW_EXPIRED"));
    } finally {
      await setSwitch("review", false);
    }
  });
});
