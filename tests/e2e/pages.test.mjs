// The provider's own pages, driven like a user: options.html (switches, callers, scripts) and
// popup.html (connected callers, write reviews, audit log), opened as tabs. Actions go through
// roles and accessible names only; state is read back through the internal API (state.get,
// audit.list) and through the test host's MCP session, which is what the user's clicks must change.
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { ABSENT_ID, HOST_ID, OUT_DIR, PROVIDER_ID, buildHostVariant, launch } from "./lib/harness.mjs";
import { PROBE_CHANNEL, PROBE_VERSION, TEXT } from "./lib/contract.mjs";
import { until as untilFor, sleep, show } from "./lib/util.mjs";

const T = { timeout: 90_000 };
const OPTIONS = `chrome-extension://${PROVIDER_ID}/options.html`;
const POPUP = `chrome-extension://${PROVIDER_ID}/popup.html`;
/** How long a page may take to show a change (the options page polls every 3 s, the popup every 1 s, both re-render on storage changes). */
const UI_MS = 6000;
/** How long the provider may take to see the "Allow User Scripts" toggle. */
const TOGGLE_MS = 2000;
const SHOTS = join(OUT_DIR, "screenshots");

const WRITE_TOOLS = ["delete_script", "patch_script", "restore_script", "set_script_enabled", "try_script", "write_script"];
const READ_TOOLS = ["get_script", "list_revisions", "list_scripts", "match_url", "script_runs", "status", "validate_script"];
const HOST_NAME = "Lumo Test Host";


/** Calls get() until pred(value) holds or the timeout passes; returns the last value either way. */
const until = (get, pred, timeout = UI_MS) => untilFor(get, pred, timeout);

/** Waits until the locator is visible; fails with `what` instead of a bare timeout. */
async function seen(locator, what, timeout = UI_MS) {
  try {
    await locator.first().waitFor({ state: "visible", timeout });
  } catch {
    assert.fail(`not shown within ${timeout} ms: ${what}`);
  }
}

/** Waits until the locator matches nothing visible. */
async function gone(locator, what, timeout = UI_MS) {
  const n = await until(async () => {
    const all = await locator.all();
    let visible = 0;
    for (const l of all) if (await l.isVisible()) visible++;
    return visible;
  }, (v) => v === 0, timeout);
  assert.equal(n, 0, `still shown after ${timeout} ms: ${what}`);
}

/** The text of the page's alert region once it contains `part`. */
async function alertText(page, part) {
  const alert = page.getByRole("alert");
  const text = await until(async () => ((await alert.count()) ? alert.textContent() : ""), (t) => t.includes(part));
  assert.ok(text.includes(part), `alert region says ${show(text)}, expected it to contain ${show(part)}`);
  return text;
}

const rawProbe = (id, name, clientId = HOST_ID) => ({
  channel: PROBE_CHANNEL, version: PROBE_VERSION, id, client: { id: clientId, name, version: "0.1.0" },
});

const userscript = ({ name, match = ["https://example.com/*"], extra = [], body = [`console.log(${JSON.stringify(name)});`] }) => [
  "// ==UserScript==",
  `// @name        ${name}`,
  "// @namespace   lumo-e2e",
  ...match.map((m) => `// @match       ${m}`),
  ...extra,
  "// ==/UserScript==",
  ...body,
  "",
].join("\n");

async function openOptions(h) {
  const page = await h.context.newPage();
  await page.goto(OPTIONS);
  // First render done: every list region has its table or its empty text.
  await page.waitForFunction(() => ["pending", "allowlist", "denied", "scripts"].every((id) => document.getElementById(id)?.childElementCount > 0));
  return page;
}

async function openPopup(h) {
  const page = await h.context.newPage();
  await page.setViewportSize({ width: 380, height: 600 });
  await page.goto(POPUP);
  await page.waitForFunction(() => document.getElementById("sessions")?.childElementCount > 0 && document.getElementById("audit")?.childElementCount > 0);
  return page;
}

const region = (page, name) => page.getByRole("region", { name, exact: true });

/** Probes until status.ready is true (the "Allow User Scripts" toggle reaches the worker asynchronously). */
async function probeUntilReady(lumo) {
  return until(() => lumo("probe", PROVIDER_ID, { openSession: false }), (r) => r.response?.status?.ready === true, TOGGLE_MS);
}

/** Tool helpers over one host session (`lumo` calls window.lumo in that host's page). */
function tools(lumo, session) {
  const call = async (name, args = {}) => {
    const res = await lumo("callTool", session(), name, args);
    assert.ok(!res?.error, `${name}: MCP call failed: ${show(res?.error)}`);
    return res;
  };
  const ok = async (name, args) => {
    const res = await call(name, args);
    assert.equal(res.isError, false, `${name} failed: ${res.content?.[0]?.text}`);
    return res.structuredContent;
  };
  const fails = async (name, args, code) => {
    const res = await call(name, args);
    assert.equal(res.isError, true, `${name} should fail with ${code}, got ${show(res.structuredContent)}`);
    assert.equal(res.structuredContent?.error_code, code, `${name}: ${res.content?.[0]?.text}`);
    return res;
  };
  return { call, ok, fails };
}

async function screenshot(page, name) {
  mkdirSync(SHOTS, { recursive: true });
  for (const colorScheme of ["light", "dark"]) {
    await page.emulateMedia({ colorScheme });
    await sleep(100);
    await page.screenshot({ path: join(SHOTS, `${name}-${colorScheme}.png`), fullPage: true });
  }
  await page.emulateMedia({ colorScheme: null });
}

// ====================================================================== callers

describe("options page: callers, switches, keyboard", () => {
  let h, page, session;
  before(async () => {
    h = await launch();
  });
  after(async () => { await h?.close(); });
  const lumo = (...a) => h.lumo(...a);
  const state = async () => (await h.internal("state.get")).policy;

  test("a pending caller is listed with its name; Approve authorizes it and it connects", T, async () => {
    const first = await lumo("probe", PROVIDER_ID, { openSession: false });
    assert.equal(first.text, TEXT.pending, `first probe: ${first.text}`);
    page = await openOptions(h);
    const pending = region(page, "Pending approvals");
    const row = pending.getByRole("row").filter({ hasText: HOST_ID });
    await seen(row, `pending row for ${HOST_ID}`);
    await seen(row.getByText(HOST_NAME, { exact: true }), `the caller's name "${HOST_NAME}" in its pending row`);

    await pending.getByRole("button", { name: `Approve ${HOST_NAME}`, exact: true }).click();
    await alertText(page, `Approved ${HOST_ID}.`);
    await seen(pending.getByText("Nobody is waiting."), "empty pending list after approval");
    const allowedRow = region(page, "Allowed callers").getByRole("row").filter({ hasText: HOST_ID });
    await seen(allowedRow.getByText(HOST_NAME, { exact: true }), "the host in the allowed callers with its name");

    const policy = await state();
    assert.deepEqual(policy.pending, [], "nobody pending");
    const entry = policy.allowlist.find((c) => c.id === HOST_ID);
    assert.ok(entry, `host on the allowlist: ${show(policy.allowlist)}`);
    assert.equal(entry.name, HOST_NAME);

    const next = await lumo("probe", PROVIDER_ID, { openSession: false });
    assert.equal(next.response?.status?.authorized, true, `next probe authorized: ${show(next.response)}`);
    assert.equal(next.response.status.pendingApproval, false);

    assert.deepEqual(await h.setUserScriptsAccess(PROVIDER_ID, true), { isEnabled: true, isActive: true });
    const ready = await probeUntilReady(lumo);
    assert.equal(ready.state, "connected", `L0 passes once user scripts are allowed: ${ready.text}`);
    const full = await lumo("probe", PROVIDER_ID);
    assert.equal(full.state, "connected", `MCP session: ${full.text} (${full.closeReason ?? "-"})`);
    assert.ok(full.tools.length > 0);
    assert.equal(full.text, `Connected: ${full.tools.length} tools`);
    session = full.session;
  });

  test("Allow writes off: the connected host gets list_changed and loses the write tools; on again brings them back", T, async () => {
    assert.ok(page, "needs the options page of the first test");
    await page.bringToFront(); // background tabs throttle animation frames, which slows clicks down
    assert.ok(session, "needs the session of the previous test");
    const sw = page.getByRole("switch", { name: "Allow writes" });
    assert.equal(await sw.isChecked(), true, "writes are on by default");
    const i0 = await lumo("info", session);
    assert.equal(i0.connected, true, `host connected: ${show(i0)}`);

    await sw.click();
    assert.equal(await sw.isChecked(), false, "switch shows off");
    await alertText(page, "Allow writes: off.");
    assert.equal((await until(state, (p) => p.writesEnabled === false)).writesEnabled, false, "stored: writes off");
    const i1 = await until(() => lumo("info", session), (i) => i.listChangedCount > i0.listChangedCount);
    assert.equal(i1.listChangedCount, i0.listChangedCount + 1, "one tools/list_changed notification");
    let listed = await lumo("listTools", session);
    assert.ok(!listed.error, show(listed.error));
    let names = listed.tools.map((t) => t.name).sort();
    assert.deepEqual(names, READ_TOOLS, "read-only mode: only the read tools are listed");

    await sw.click();
    assert.equal(await sw.isChecked(), true, "switch shows on");
    await alertText(page, "Allow writes: on.");
    assert.equal((await until(state, (p) => p.writesEnabled === true)).writesEnabled, true, "stored: writes on");
    const i2 = await until(() => lumo("info", session), (i) => i.listChangedCount > i1.listChangedCount);
    assert.equal(i2.listChangedCount, i1.listChangedCount + 1, "a second tools/list_changed notification");
    listed = await lumo("listTools", session);
    names = listed.tools.map((t) => t.name);
    for (const w of WRITE_TOOLS) assert.ok(names.includes(w), `${w} listed again: ${names}`);
  });

  test("keyboard: Tab reaches the Allow writes switch and Space toggles it", T, async () => {
    const kb = await openOptions(h);
    try {
      const sw = kb.getByRole("switch", { name: "Allow writes" });
      const before = await sw.isChecked();
      const focused = () => sw.evaluate((el) => el === document.activeElement);
      let presses = 0;
      while (!(await focused()) && presses < 40) {
        await kb.keyboard.press("Tab");
        presses++;
      }
      assert.ok(await focused(), `the Allow writes switch is reachable with Tab (gave up after ${presses} presses)`);
      const outline = await sw.evaluate((el) => ({ visible: el.matches(":focus-visible"), style: getComputedStyle(el).outlineStyle }));
      assert.ok(outline.visible && outline.style !== "none", `keyboard focus is visible on the switch: ${show(outline)}`);

      await kb.keyboard.press("Space");
      assert.equal(await sw.isChecked(), !before, "Space flips the switch");
      assert.equal((await until(state, (p) => p.writesEnabled === !before)).writesEnabled, !before, "stored state follows");
      await alertText(kb, `Allow writes: ${before ? "off" : "on"}.`);
      assert.ok(await focused(), "focus stays on the switch after the change");

      await kb.keyboard.press("Space");
      assert.equal(await sw.isChecked(), before, "Space flips it back");
      assert.equal((await until(state, (p) => p.writesEnabled === before)).writesEnabled, before, "stored state restored");
    } finally {
      await kb.close();
    }
  });

  test("Add caller: an invalid id shows a clear error and stores nothing; a valid id is listed", T, async () => {
    assert.ok(page, "needs the options page of the first test");
    await page.bringToFront(); // background tabs throttle animation frames, which slows clicks down
    const idField = page.getByLabel("Extension id", { exact: true });
    const nameField = page.getByLabel("Name (optional)", { exact: true });
    const add = page.getByRole("button", { name: "Add caller", exact: true });
    const before = await state();
    for (const bad of ["not-an-id", "A".repeat(32)]) {
      await idField.fill(bad);
      await add.click();
      const text = await alertText(page, `"${bad}"`);
      assert.match(text, /is not an extension id/, `error names the problem: ${text}`);
      assert.match(text, /32 letters from a to p/, `error says what an id looks like: ${text}`);
      assert.equal(await page.getByRole("alert").getAttribute("data-kind"), "error", "shown as an error");
      const after = await state();
      assert.deepEqual(after.allowlist, before.allowlist, `${bad}: allowlist unchanged`);
      assert.deepEqual(after.pending, before.pending, `${bad}: pending unchanged`);
      assert.deepEqual(after.denied, before.denied, `${bad}: denied unchanged`);
    }

    await idField.fill(ABSENT_ID);
    await nameField.fill("Manual Agent");
    await add.click();
    await alertText(page, `Added ${ABSENT_ID}.`);
    const row = region(page, "Allowed callers").getByRole("row").filter({ hasText: ABSENT_ID });
    await seen(row.getByText("Manual Agent", { exact: true }), "the added caller with its name in Allowed callers");
    await seen(row.getByRole("button", { name: "Remove Manual Agent", exact: true }), "its Remove button");
    assert.equal(await idField.inputValue(), "", "id field cleared after adding");
    assert.equal(await nameField.inputValue(), "", "name field cleared after adding");
    const policy = await state();
    const entry = policy.allowlist.find((c) => c.id === ABSENT_ID);
    assert.ok(entry, `stored: ${show(policy.allowlist)}`);
    assert.equal(entry.name, "Manual Agent");
  });

  test("Deny: the caller stops being asked about, is listed under Denied callers, and Forget removes it", T, async () => {
    assert.ok(page, "needs the options page of the first test");
    await page.bringToFront(); // background tabs throttle animation frames, which slows clicks down
    // The host is allowed: remove it (as a user would), so that its next probe asks again.
    await region(page, "Allowed callers").getByRole("button", { name: `Remove ${HOST_NAME}`, exact: true }).click();
    await alertText(page, `Removed ${HOST_ID}.`);
    assert.ok(!(await state()).allowlist.some((c) => c.id === HOST_ID), "host removed from the allowlist");
    const asks = await lumo("probe", PROVIDER_ID, { openSession: false });
    assert.equal(asks.text, TEXT.pending, `after removal the host asks again: ${asks.text}`);

    const pending = region(page, "Pending approvals");
    await pending.getByRole("button", { name: `Deny ${HOST_NAME}`, exact: true }).click();
    await alertText(page, `Denied ${HOST_ID}.`);
    await seen(pending.getByText("Nobody is waiting."), "empty pending list after deny");
    const denied = region(page, "Denied callers");
    const row = denied.getByRole("row").filter({ hasText: HOST_ID });
    await seen(row.getByText(HOST_NAME, { exact: true }), "the host under Denied callers with its name");

    const r = await lumo("probe", PROVIDER_ID, { openSession: false });
    assert.equal(r.response?.status?.authorized, false, show(r.response));
    assert.equal(r.response.status.pendingApproval, false, "a denied caller is not pending");
    assert.equal(r.text, TEXT.notAllowed);
    let policy = await state();
    assert.deepEqual(policy.pending, [], "the probe after deny does not re-queue the caller");
    assert.ok(policy.denied.some((c) => c.id === HOST_ID), `stored as denied: ${show(policy.denied)}`);
    await sleep(500);
    await seen(pending.getByText("Nobody is waiting."), "pending list still empty after the denied caller probed");

    await row.getByRole("button", { name: `Forget ${HOST_NAME}`, exact: true }).click();
    await alertText(page, `Forgot ${HOST_ID}.`);
    await seen(denied.getByText("Nobody is denied."), "empty denied list after Forget");
    policy = await state();
    assert.ok(!policy.denied.some((c) => c.id === HOST_ID), `forgotten: ${show(policy.denied)}`);
    const again = await lumo("probe", PROVIDER_ID, { openSession: false });
    assert.equal(again.text, TEXT.pending, "after Forget the caller may ask again");
  });
});

// ====================================================================== XSS

describe("options page and popup: a caller's display name is text, never markup", () => {
  const XSS = `<img src=x onerror="window.__xss=1">`;
  let h;
  before(async () => { h = await launch(); });
  after(async () => { await h?.close(); });

  test("a name with markup shows literally in Pending approvals, Allowed callers and the popup", T, async () => {
    const r = await h.lumo("probe", PROVIDER_ID, { message: rawProbe("xss-1", XSS) });
    assert.equal(r.response?.status?.pendingApproval, true, `probe with a markup name is pending: ${show(r.response)}`);
    const page = await openOptions(h);
    const pending = region(page, "Pending approvals");
    await seen(pending.getByText(XSS, { exact: true }), "the literal markup text in the pending list");
    assert.equal(await pending.locator("img").count(), 0, "no img element in the pending list");
    assert.equal(await page.locator("img").count(), 0, "no img element anywhere on the page");
    await sleep(300); // an injected <img src=x> would have fired onerror by now
    assert.equal(await page.evaluate(() => window.__xss), undefined, "onerror never ran");
    await screenshot(page, "options-pending");

    await pending.getByRole("button", { name: `Approve ${XSS}`, exact: true }).click();
    const allowed = region(page, "Allowed callers");
    await seen(allowed.getByText(XSS, { exact: true }), "the literal markup text in Allowed callers");
    assert.equal(await page.locator("img").count(), 0, "still no img element");

    assert.deepEqual(await h.setUserScriptsAccess(PROVIDER_ID, true), { isEnabled: true, isActive: true });
    const ready = await probeUntilReady((...a) => h.lumo(...a));
    assert.equal(ready.state, "connected", ready.text);
    const session = await h.lumo("connect", PROVIDER_ID);
    assert.equal(typeof session, "number", show(session));
    const popup = await openPopup(h);
    const connected = region(popup, "Connected");
    await seen(connected.getByText(`${XSS} (${HOST_ID})`), "the literal markup text in the popup's Connected list");
    await seen(connected.getByRole("button", { name: `Disconnect ${XSS}`, exact: true }), "Disconnect button named with the literal text");
    assert.equal(await popup.locator("img").count(), 0, "no img element in the popup");
    await sleep(300);
    assert.equal(await popup.evaluate(() => window.__xss), undefined, "onerror never ran in the popup");
    assert.equal(await page.evaluate(() => window.__xss), undefined, "onerror never ran in the options page");
  });
});

// ====================================================================== clicks on moving rows

// Any extension can list itself under Pending approvals. Approving the first caller moves the
// next one up into the clicked spot; the second click of a double-click must not approve it.
// Its chosen name must not reorder or hide what is shown beside it either.
describe("options page: a double click approves one caller; a caller's name cannot reorder its id", () => {
  // Same length as the test host's name, so both rows lay out alike, as an attacker would pick.
  const LOOKALIKE = "Lumo Evil Host";
  const SNEAKY = "Helper \u202Eredlof\u202C\u200B";
  let h, other, otherPage;
  const probeOther = (name, id) => otherPage.evaluate((args) => window.lumo.probe(...args),
    [PROVIDER_ID, { openSession: false, message: rawProbe(id, name, other.id) }]);
  before(async () => {
    const key = generateKeyPairSync("rsa", { modulusLength: 2048 }).publicKey.export({ type: "spki", format: "der" }).toString("base64");
    other = await buildHostVariant("pages-double-click", key);
    h = await launch({ extraExtensions: [other.dir] });
    otherPage = await h.context.newPage();
    await otherPage.goto(`chrome-extension://${other.id}/host.html`);
    await otherPage.waitForFunction(() => typeof window.lumo === "object");
  });
  after(async () => { await h?.close(); });

  test("the row that moves under the pointer takes no click at once", T, async () => {
    assert.equal((await h.lumo("probe", PROVIDER_ID, { openSession: false })).text, TEXT.pending);
    assert.equal((await probeOther(LOOKALIKE, "evil-1")).text, TEXT.pending);
    const page = await openOptions(h);
    const pending = region(page, "Pending approvals");
    await seen(pending.getByRole("row").filter({ hasText: other.id }), "the second caller pending");
    const order = await pending.getByRole("row").allTextContents();
    assert.ok(order[1].includes(HOST_ID) && order[2].includes(other.id), `the test host is first: ${show(order)}`);

    // Approve the first; the second moves up into its place. A click on it at once (the second
    // click of a double-click, where the page's layout puts it under the pointer) does nothing.
    await pending.getByRole("button", { name: `Approve ${HOST_NAME}`, exact: true }).click();
    await until(() => pending.getByRole("row").filter({ hasText: HOST_ID }).count(), (n) => n === 0);
    const moved = pending.getByRole("button", { name: `Approve ${LOOKALIKE}`, exact: true });
    assert.equal(await moved.isDisabled(), true, "the moved row's Approve is not armed yet");
    await moved.click({ force: true });
    await sleep(300);
    let policy = (await h.internal("state.get")).policy;
    assert.deepEqual(policy.allowlist.map((c) => c.id), [HOST_ID], `only the clicked caller is approved: ${show(policy.allowlist)}`);
    assert.deepEqual(policy.pending.map((c) => c.id), [other.id]);

    // Once armed, the moved row's Approve works.
    await pending.getByRole("button", { name: `Approve ${LOOKALIKE}`, exact: true }).click();
    policy = await until(async () => (await h.internal("state.get")).policy, (p) => p.allowlist.length === 2);
    assert.deepEqual(policy.allowlist.map((c) => c.id).sort(), [HOST_ID, other.id].sort());
  });

  test("a caller's name shows its invisible and direction characters as markers", T, async () => {
    // Forgotten, it asks again under another name.
    await h.internal("policy.remove", { id: other.id });
    assert.equal((await probeOther(SNEAKY, "sneaky-1")).text, TEXT.pending);
    const page = await openOptions(h);
    const pending = region(page, "Pending approvals");
    await seen(pending.getByRole("row").filter({ hasText: other.id }), "the caller pending again");
    const text = await pending.innerText();
    assert.ok(text.includes("Helper \u27e8U+202E\u27e9redlof\u27e8U+202C\u27e9\u27e8U+200B\u27e9"), show(text));
    assert.ok(!/[\u202E\u202C\u200B]/.test(text), `no raw direction or zero-width character: ${show(text)}`);
    assert.equal(await pending.locator("mark.invisible").count(), 3);
    // state.get gives the pages the name with its markers, whatever list it is in.
    await pending.getByRole("button", { name: /^Approve Helper/ }).click();
    const policy = await until(async () => (await h.internal("state.get")).policy, (p) => p.allowlist.length === 2);
    assert.equal(policy.allowlist.find((c) => c.id === other.id).name, "Helper \u27e8U+202E\u27e9redlof\u27e8U+202C\u27e9\u27e8U+200B\u27e9");
  });

  test("the status line appearing above the callers moves every row: their buttons take no click at once", T, async () => {
    const page = await openOptions(h);
    const allowed = region(page, "Allowed callers");
    const remove = allowed.getByRole("button", { name: /^Remove/ });
    await until(() => remove.count(), (n) => n === 2);
    await until(async () => remove.first().isDisabled(), (d) => d === false, 3000);
    const before = await allowed.boundingBox();
    // A switch writes the status line above the tables (it was empty, so it had no height).
    await page.getByRole("switch", { name: "Review each write" }).click();
    await until(async () => (await allowed.boundingBox()).y, (y) => y !== before.y, 3000);
    assert.notEqual((await allowed.boundingBox()).y, before.y, "the rows moved");
    assert.deepEqual(await Promise.all([0, 1].map((i) => remove.nth(i).isDisabled())), [true, true], "not armed right after moving");
    await remove.first().click({ force: true });
    await sleep(300);
    assert.equal((await h.internal("state.get")).policy.allowlist.length, 2, "the click did nothing");
    await until(async () => remove.first().isDisabled(), (d) => d === false, 3000);
    assert.equal(await remove.first().isDisabled(), false, "armed again after a moment");
    await h.internal("policy.setSwitch", { name: "review", value: false });
  });
});

// ====================================================================== scripts, audit, review, popup

describe("options scripts, popup audit, review and disconnect", () => {
  const SECOND_NAME = "Second Host";
  const SECRET = `lumo-secret-${Math.random().toString(36).slice(2)}`;
  let h, second, secondPage, session, session2, t, t2;
  const lumo = (...a) => h.lumo(...a);
  const lumo2 = (fn, ...args) => secondPage.evaluate(([fn, args]) => window.lumo[fn](...args), [fn, args]);
  const auditList = async () => (await h.internal("audit.list")).entries;
  const getScript = (uuid) => t.call("get_script", { uuid });

  before(async () => {
    // A second copy of the test host with its own id: a second caller for the audit's Caller filter.
    const key = generateKeyPairSync("rsa", { modulusLength: 2048 }).publicKey.export({ type: "spki", format: "der" }).toString("base64");
    second = await buildHostVariant("pages-second-host", key);
    h = await launch({ extraExtensions: [second.dir] });
    secondPage = await h.context.newPage();
    await secondPage.goto(`chrome-extension://${second.id}/host.html`);
    await secondPage.waitForFunction(() => typeof window.lumo === "object");
    // Set-up, not under test: both hosts ask, and are approved through the internal API.
    assert.equal((await lumo("probe", PROVIDER_ID, { openSession: false })).text, TEXT.pending);
    const p2 = await lumo2("probe", PROVIDER_ID, { openSession: false, message: rawProbe("second-1", SECOND_NAME, second.id) });
    assert.equal(p2.text, TEXT.pending, show(p2));
    await h.internal("policy.approve", { id: HOST_ID });
    await h.internal("policy.approve", { id: second.id });
    assert.deepEqual(await h.setUserScriptsAccess(PROVIDER_ID, true), { isEnabled: true, isActive: true });
    const ready = await probeUntilReady(lumo);
    assert.equal(ready.state, "connected", `setup: ${ready.text}`);
    session = await lumo("connect", PROVIDER_ID);
    assert.equal(typeof session, "number", show(session));
    session2 = await lumo2("connect", PROVIDER_ID);
    assert.equal(typeof session2, "number", show(session2));
    t = tools(lumo, () => session);
    t2 = tools(lumo2, () => session2);
  });
  after(async () => { await h?.close(); });

  test("Scripts: name, match rules, provenance, read-only source, Enabled switch and confirmed Delete", T, async () => {
    const name = "E2E Options Script";
    const source = userscript({
      name,
      match: ["http://127.0.0.1/*", "https://example.com/path/*"],
      extra: ["// @exclude-match http://127.0.0.1/skip/*", "// @version     1.2"],
      body: ["// <b>not bold</b> & \"quoted\"  two  spaces", `console.log(${JSON.stringify(SECRET)});`],
    });
    const w = await t.ok("write_script", { source });
    const uuid = w.script.uuid;

    const page = await openOptions(h);
    const row = region(page, "Scripts").getByRole("row").filter({ hasText: uuid });
    await seen(row, `a row for ${uuid} in Scripts`);
    await seen(row.getByText(name, { exact: true }), "the script's name");
    const rules = await row.getByRole("listitem").allTextContents();
    assert.deepEqual(rules, ["@match http://127.0.0.1/*", "@match https://example.com/path/*", "@exclude-match http://127.0.0.1/skip/*"], "match rules");
    const rowText = await row.textContent();
    assert.ok(rowText.includes(`created by ${HOST_NAME} (${HOST_ID})`), `provenance names the host by name and id: ${show(rowText)}`);

    await row.getByText("Source (read-only)", { exact: true }).click();
    const pre = row.getByLabel(`Source of ${name}`, { exact: true });
    const shown = await until(() => pre.textContent(), (s) => s === source);
    assert.equal(shown, source, "the exact source");

    const enabled = row.getByRole("switch", { name: `Enabled: ${name}`, exact: true });
    assert.equal(await enabled.isChecked(), true);
    await enabled.click();
    await alertText(page, `Disabled ${name}.`);
    const off = await until(() => getScript(uuid), (r) => r.structuredContent?.script?.enabled === false);
    assert.equal(off.structuredContent?.script?.enabled, false, `get_script after the switch: ${show(off.structuredContent)}`);
    assert.equal(await row.getByRole("switch", { name: `Enabled: ${name}`, exact: true }).isChecked(), false, "switch shows off");
    assert.equal(await pre.textContent(), source, "the source stays open and exact after the re-render");

    await row.getByRole("button", { name: `Delete ${name}`, exact: true }).click();
    const confirm = row.getByRole("button", { name: `Confirm delete of ${name}`, exact: true });
    await seen(confirm, "the delete confirmation");
    // It appears where Delete was: a click on it at once (a double-click on Delete) does nothing.
    assert.equal(await confirm.isDisabled(), true, "the confirmation is not armed yet");
    await confirm.click({ force: true });
    await sleep(300);
    const still = await getScript(uuid);
    assert.ok(still.isError === false && still.structuredContent?.script?.deleted !== true, `not deleted before confirming: ${show(still.structuredContent)}`);
    await confirm.click();
    await alertText(page, `Deleted ${name}.`);
    await gone(region(page, "Scripts").getByRole("row").filter({ hasText: uuid }), "the deleted script's row");
    // Deleting moves the script to the trash: get_script still finds it, marked deleted.
    const after = await getScript(uuid);
    assert.equal(after.isError, false, "get_script finds a trashed script");
    assert.equal(after.structuredContent?.script?.deleted, true, "marked deleted");
    await page.close();
  });

  test("Scripts: each row's columns line up under the headings, whichever buttons a row has", T, async () => {
    // Rows with different buttons: one with "Check for update" (its @updateURL), one without, and
    // one asking to confirm its delete (two buttons, one named after a long name).
    const long = `E2E Columns ${"long name ".repeat(6).trim()}`;
    const sources = [
      userscript({ name: "E2E Columns updater", extra: ["// @version 1.0", "// @updateURL https://example.com/u.user.js"] }),
      userscript({ name: "E2E Columns plain" }),
      userscript({ name: long }),
    ];
    const uuids = [];
    for (const source of sources) uuids.push((await t.ok("write_script", { source })).script.uuid);
    const page = await openOptions(h);
    await page.setViewportSize({ width: 1100, height: 900 });
    const scripts = region(page, "Scripts");
    for (const uuid of uuids) await seen(scripts.getByRole("row").filter({ hasText: uuid }), `a row for ${uuid}`);
    await scripts.getByRole("button", { name: `Delete ${long}`, exact: true }).click();
    await seen(scripts.getByRole("button", { name: `Confirm delete of ${long}`, exact: true }), "the delete confirmation");
    // The left edge of each column, per row: the heading row's and every script row's.
    const edges = await page.evaluate(() => [...document.querySelectorAll("#scripts [role=row]")].map((r) => ({
      uuid: r.dataset.uuid ?? "headings",
      x: [...r.children].map((c) => Math.round(c.getBoundingClientRect().left)),
    })));
    const head = edges.find((e) => e.uuid === "headings");
    assert.equal(head?.x.length, 5, `five headings: ${show(edges)}`);
    for (const uuid of uuids) {
      const row = edges.find((e) => e.uuid === uuid);
      assert.deepEqual(row?.x, head.x, `row ${uuid}'s columns start where the headings do: ${show(edges)}`);
    }
    await scripts.getByRole("button", { name: "Cancel", exact: true }).click();
    for (const uuid of uuids) await t.ok("delete_script", { uuid });
    await page.close();
  });

  let writes; // {a, b}: the audit test's two successful writes
  test("Audit: newest first, Result and Caller filters, Export JSON without script source", T, async () => {
    const a = await t.ok("write_script", { source: userscript({ name: "E2E Audit A", body: [`// ${SECRET}`] }) });
    await sleep(20);
    const b = await t2.ok("write_script", { source: userscript({ name: "E2E Audit B", body: [`// ${SECRET}`] }) });
    await sleep(20);
    await t.fails("write_script", { source: `// no metadata block\nconsole.log(${JSON.stringify(SECRET)});\n` }, "INVALID_METADATA");
    writes = { a: a.script.uuid, b: b.script.uuid };

    const entries = await auditList();
    assert.equal(entries[0]?.result, "INVALID_METADATA", `audit has the failure on top: ${show(entries.slice(0, 3))}`);
    const popup = await openPopup(h);
    const audit = region(popup, "Audit log");
    const items = audit.getByRole("listitem");
    const texts = await until(() => items.allTextContents(), (x) => x.length === entries.length && x[0].includes("INVALID_METADATA"));
    assert.equal(texts.length, entries.length, `one list item per entry: ${show(texts)}`);
    // Newest first: the three writes just made, in reverse order.
    assert.match(texts[0], /^INVALID_METADATA write_script/, texts[0]);
    assert.ok(texts[0].includes(`${HOST_NAME} (${HOST_ID})`), texts[0]);
    assert.match(texts[1], /^ok write_script/, texts[1]);
    // Each write names its script (the worker's names beside the log), then its uuid's start.
    assert.ok(texts[1].includes(`“E2E Audit B” · ${writes.b.slice(0, 8)}`) && texts[1].includes(`${SECOND_NAME} (${second.id})`), texts[1]);
    assert.match(texts[2], /^ok write_script/, texts[2]);
    assert.ok(texts[2].includes(`“E2E Audit A” · ${writes.a.slice(0, 8)}`) && texts[2].includes(`${HOST_NAME} (${HOST_ID})`), texts[2]);
    entries.forEach((e, i) => assert.ok(texts[i].startsWith(`${e.result} ${e.tool}`), `item ${i} is entry ${i}: ${texts[i]} vs ${show(e)}`));
    for (let i = 1; i < entries.length; i++) assert.ok(entries[i - 1].at >= entries[i].at, "audit.list is newest first");

    const result = audit.getByLabel("Result", { exact: true });
    const caller = audit.getByLabel("Caller", { exact: true });
    const failures = entries.filter((e) => e.result !== "ok");
    await result.selectOption({ label: "Failed or refused" });
    let shown = await items.allTextContents();
    assert.equal(shown.length, failures.length, `Failed or refused shows only the failures: ${show(shown)}`);
    assert.equal(shown.length, 1);
    assert.match(shown[0], /^INVALID_METADATA write_script/);
    await result.selectOption({ label: "Succeeded" });
    shown = await items.allTextContents();
    assert.equal(shown.length, entries.length - failures.length, `Succeeded: ${show(shown)}`);
    assert.ok(shown.every((s) => s.startsWith("ok ")), show(shown));
    await result.selectOption({ label: "All" });

    const optionLabels = (await caller.locator("option").allTextContents()).sort();
    // Earlier tests' changes by hand (the options page's switch and Delete) are in the log as "you".
    const byHand = entries.some((e) => e.caller === "user") ? ["you"] : [];
    assert.deepEqual(optionLabels, ["All", `${HOST_NAME} (${HOST_ID})`, `${SECOND_NAME} (${second.id})`, ...byHand].sort(), "one Caller option per caller in the log");
    await caller.selectOption({ label: `${SECOND_NAME} (${second.id})` });
    shown = await items.allTextContents();
    assert.equal(shown.length, entries.filter((e) => e.caller === second.id).length, `Caller = second host: ${show(shown)}`);
    assert.ok(shown.every((s) => s.includes(second.id)), show(shown));
    assert.ok(shown.some((s) => s.includes(writes.b.slice(0, 8))), show(shown));
    await caller.selectOption({ label: `${HOST_NAME} (${HOST_ID})` });
    shown = await items.allTextContents();
    assert.equal(shown.length, entries.filter((e) => e.caller === HOST_ID).length, `Caller = host: ${show(shown)}`);
    assert.ok(shown.every((s) => s.includes(HOST_ID) && !s.includes(second.id)), show(shown));
    await result.selectOption({ label: "Failed or refused" });
    shown = await items.allTextContents();
    assert.equal(shown.length, 1, `Caller = host and failed: ${show(shown)}`);
    await caller.selectOption({ label: `${SECOND_NAME} (${second.id})` });
    shown = await items.allTextContents();
    assert.deepEqual(shown, ["No entry matches the filters."], "second host has no failure");
    await caller.selectOption({ label: "All" });
    await result.selectOption({ label: "All" });

    const [download] = await Promise.all([
      popup.waitForEvent("download", { timeout: UI_MS }),
      audit.getByRole("button", { name: "Export JSON", exact: true }).click(),
    ]);
    assert.match(download.suggestedFilename(), /^lumo-userscripts-audit-.*\.json$/, download.suggestedFilename());
    const text = readFileSync(await download.path(), "utf8");
    let exported;
    assert.doesNotThrow(() => { exported = JSON.parse(text); }, "the export is valid JSON");
    assert.ok(Array.isArray(exported), "an array");
    assert.deepEqual(exported, await auditList(), "the export is the whole log");
    for (const e of exported) {
      assert.equal(typeof e.at, "number", show(e));
      assert.equal(typeof e.tool, "string", show(e));
      assert.equal(typeof e.caller, "string", show(e));
      assert.equal(typeof e.result, "string", show(e));
      assert.match(e.digest, /^[0-9a-f]{64}$/, show(e));
      assert.ok(!("source" in e) && !("arguments" in e) && !("args" in e), `no arguments in an entry: ${show(e)}`);
    }
    assert.ok(!text.includes(SECRET), "no script source in the export");
    assert.ok(!text.includes("==UserScript=="), "no script header in the export");
    // What an agent deleted is named too (by the trash's index: it is no longer a stored
    // script), or the user could not tell which script went.
    await t2.ok("delete_script", { uuid: writes.b });
    const deleted = items.filter({ hasText: "delete_script" }).filter({ hasText: writes.b.slice(0, 8) });
    await deleted.first().waitFor({ timeout: UI_MS });
    assert.match(await deleted.first().textContent(), new RegExp(`“E2E Audit B” · ${writes.b.slice(0, 8)}`));
    await popup.close();
  });

  // An audit log is a record: a write is listed under the name it gave the script, even after a
  // later write renamed it ("Bank helper" renamed "Dark mode" is not "Dark mode" throughout); the
  // name now is shown beside it, so the user can still tell which script that is.
  test("Audit: a write keeps the name it left; a later rename is shown beside it", T, async () => {
    // (Its source keeps the secret: the screenshots below open it.)
    await t.ok("write_script", { uuid: writes.a, revision: 1, source: userscript({ name: "E2E Audit A, renamed", body: [`// ${SECRET}`] }) });
    const popup = await openPopup(h);
    const items = region(popup, "Audit log").getByRole("listitem");
    const ofA = items.filter({ hasText: /^ok write_script/ }).filter({ hasText: writes.a.slice(0, 8) });
    const texts = await until(() => ofA.allTextContents(), (x) => x.length === 2);
    assert.ok(texts[0].includes(`“E2E Audit A, renamed” · ${writes.a.slice(0, 8)}`) && !texts[0].includes("now “"), texts[0]);
    assert.ok(texts[1].includes(`“E2E Audit A” · now “E2E Audit A, renamed” · ${writes.a.slice(0, 8)}`), texts[1]);
    await popup.close();
  });

  test("Review each write: the popup shows summary and diff; Approve lets the write through, Deny returns USER_REJECTED", T, async () => {
    const options = await openOptions(h);
    const reviewSwitch = options.getByRole("switch", { name: "Review each write" });
    await reviewSwitch.click();
    assert.equal(await reviewSwitch.isChecked(), true);
    assert.equal((await until(async () => (await h.internal("state.get")).policy, (p) => p.reviewWrites)).reviewWrites, true, "stored: review on");
    const popup = await openPopup(h);
    const host = await h.hostPage();
    const start = (src) => host.evaluate(([s, src]) => { window.__write = window.lumo.callTool(s, "write_script", { source: src }); }, [session, src]);
    const settled = () => host.evaluate(() => Promise.race([window.__write, new Promise((r) => setTimeout(() => r("still waiting"), 5000))]));
    const reviews = region(popup, "Writes waiting for your review");
    try {
      const name = "E2E Reviewed";
      const source = userscript({ name, body: ["console.log('approved');"] });
      await start(source);
      const item = reviews.getByRole("listitem");
      await seen(item.getByText(`Create the script "${name}"`, { exact: true }), "the review's summary in the popup");
      await seen(item.getByText(HOST_ID), "who asks");
      const diff = await item.getByLabel("Changes", { exact: true }).innerText();
      const lines = diff.split("\n").filter(Boolean);
      const want = source.split("\n").filter(Boolean).map((l) => `+${l}`);
      assert.match(lines[0], /^@@ -1,0 \+1,\d+ @@$/, show(lines));
      assert.deepEqual(lines.slice(1), want, "the diff adds every line of the new source");
      await item.getByRole("button", { name: "Approve", exact: true }).click();
      const ok = await settled();
      assert.notEqual(ok, "still waiting", "the call resolves after Approve");
      assert.equal(ok.isError, false, `approved write succeeds: ${show(ok)}`);
      assert.equal(ok.structuredContent?.created, true);
      // A decided review keeps its place while the pointer is on the list (nothing moves under
      // a click), marked as decided, and goes once the pointer leaves.
      await seen(item.getByText("Approved.", { exact: true }), "the decided review, marked as decided");
      await popup.mouse.move(1, 1);
      await gone(reviews, "the review section once nothing waits and the pointer left");

      const rejected = "E2E Rejected";
      await start(userscript({ name: rejected }));
      await seen(reviews.getByText(`Create the script "${rejected}"`, { exact: true }), "the second review");
      await reviews.getByRole("button", { name: "Deny", exact: true }).click();
      const no = await settled();
      assert.notEqual(no, "still waiting", "the call resolves after Deny");
      assert.equal(no.isError, true, `denied write fails: ${show(no)}`);
      assert.equal(no.structuredContent?.error_code, "USER_REJECTED", show(no.structuredContent));
      const listed = await t.ok("list_scripts", {});
      assert.ok(!listed.scripts.some((s) => s.name === rejected), "the denied script was not stored");
      assert.ok(listed.scripts.some((s) => s.name === name), "the approved one was");
    } finally {
      await reviewSwitch.click();
      await until(async () => (await h.internal("state.get")).policy, (p) => !p.reviewWrites);
      await options.close();
      await popup.close();
    }
  });

  test("Popup Connected list: Disconnect closes that caller's port only", T, async () => {
    assert.ok(!(await lumo("listTools", session)).error, "host session live");
    assert.ok(!(await lumo2("listTools", session2)).error, "second host session live");
    const popup = await openPopup(h);
    const connected = region(popup, "Connected");
    await seen(connected.getByText(`${HOST_NAME} (${HOST_ID})`), "the host in Connected");
    await seen(connected.getByText(`${SECOND_NAME} (${second.id})`), "the second host in Connected");
    // The count and age on a line of their own, with no separator left over from the name's line.
    const lines = await connected.locator("li small").evaluateAll((s) => s.map((x) => [x.textContent, getComputedStyle(x).display]));
    assert.equal(lines.length, 2, show(lines));
    for (const [text, display] of lines) assert.ok(/^1\u00a0connection · since /.test(text) && display === "block", show(lines));
    await connected.getByRole("button", { name: `Disconnect ${HOST_NAME}`, exact: true }).click();
    // Its next call may open a new connection: the user is told what keeps it out.
    await alertText(popup, `Disconnected ${HOST_NAME} (${HOST_ID}). It can connect again while it is allowed: remove it in Settings to keep it out.`);
    const i = await until(() => lumo("info", session), (x) => x.connected === false);
    assert.equal(i.connected, false, `host's port closed: ${show(i)}`);
    assert.ok(i.lastCloseReason, `with a reason: ${show(i)}`);
    await gone(connected.getByText(`${HOST_NAME} (${HOST_ID})`), "the disconnected host in Connected");
    assert.equal((await lumo2("info", session2)).connected, true, "the second host stays connected");
    await seen(connected.getByText(`${SECOND_NAME} (${second.id})`), "the second host still in Connected");
    await popup.close();
  });

  test("screenshots: options and popup, light and dark", T, async () => {
    // A state worth looking at: a connected host, scripts, audit entries and a write under review.
    assert.ok(!(await lumo("listTools", session)).error, "host reconnects");
    const options = await openOptions(h);
    const row = region(options, "Scripts").getByRole("row").filter({ hasText: "E2E Audit A" });
    await row.getByText("Source (read-only)", { exact: true }).click();
    await seen(row.getByText(SECRET), "source open");
    await screenshot(options, "options");

    await options.getByRole("switch", { name: "Review each write" }).click();
    await until(async () => (await h.internal("state.get")).policy, (p) => p.reviewWrites);
    const host = await h.hostPage();
    await host.evaluate(([s, src]) => { window.__write = window.lumo.callTool(s, "write_script", { source: src }); },
      [session, userscript({ name: "E2E Screenshot with a rather long name to see how the popup wraps it", match: ["https://example.com/a/very/long/path/that/goes/on/and/on/*"] })]);
    const popup = await openPopup(h);
    const reviews = region(popup, "Writes waiting for your review");
    await seen(reviews.getByRole("button", { name: "Deny", exact: true }), "a review for the screenshot");
    await screenshot(popup, "popup");
    await reviews.getByRole("button", { name: "Deny", exact: true }).click();
    await host.evaluate(() => window.__write);
    await options.getByRole("switch", { name: "Review each write" }).click();
    await screenshot(popup, "popup-idle");
    await options.close();
    await popup.close();
  });
});
