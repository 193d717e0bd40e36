// The options page with 1,000 stored scripts: idle, it asks the worker for nothing but the small
// state and touches no row; while an agent writes, only the rows of the scripts that changed are
// built, the others stay the very same DOM nodes. (Timings are measured by
// bench/options-page.mjs, not asserted here.)
import assert from "node:assert/strict";
import { createHash, randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { HOST_ID, PROVIDER_ID, launch } from "./lib/harness.mjs";
import { until as untilFor, sleep, show } from "./lib/util.mjs";

const T = { timeout: 180_000 };
const N = 1000;
const ROWS = "#scripts [role=row][data-uuid], #scripts tbody tr";
const until = (get, pred, timeout = 20_000) => untilFor(get, pred, timeout);
const userscript = (i) => `// ==UserScript==\n// @name Scale ${String(i).padStart(4, "0")}\n// @namespace scale\n// @match https://example.com/${i}/*\n// ==/UserScript==\nconsole.log(${i});\n`;

describe("options page at 1,000 scripts", () => {
  let h, s, options, uuids;
  const call = async (name, args) => {
    const r = await h.lumo("callTool", s, name, args);
    assert.equal(r.isError, false, `${name}: ${show(r)}`);
    return r.structuredContent;
  };
  const rowCount = () => options.evaluate((sel) => document.querySelectorAll(sel).length, ROWS);

  before(async () => {
    h = await launch();
    await h.internal("policy.approve", { id: HOST_ID });
    await h.setUserScriptsAccess(PROVIDER_ID, true);
    s = await h.lumo("connect", PROVIDER_ID);
    const first = (await call("write_script", { source: userscript(0) })).script;
    // The other 999 are copies of the first one's stored record and registration (storage layout
    // of ARCHITECTURE.md), as the bench seeds them (bench/lib/provider.mjs): 999 writes would
    // take the rate limit 33 minutes.
    const page = await h.providerPage();
    await page.goto(`chrome-extension://${PROVIDER_ID}/manifest.json`);
    const [record, registration] = await page.evaluate(async (uuid) => [
      (await chrome.storage.local.get(`script/${uuid}`))[`script/${uuid}`],
      (await chrome.userScripts.getScripts({ ids: [uuid] }))[0],
    ], first.uuid);
    const hourAgo = Date.now() - 3_600_000;
    const items = {};
    const regs = [];
    uuids = [first.uuid];
    for (let i = 1; i < N; i++) {
      const uuid = randomUUID();
      const source = userscript(i);
      items[`script/${uuid}`] = { ...record, uuid, metadata: { ...record.metadata, name: `Scale ${String(i).padStart(4, "0")}` },
        sha256: createHash("sha256").update(source).digest("hex"), size: Buffer.byteLength(source), createdAt: hourAgo + i, updatedAt: hourAgo + i };
      items[`source/${uuid}`] = source;
      regs.push({ ...registration, id: uuid, js: [{ code: source }] });
      uuids.push(uuid);
    }
    items["scripts/index"] = { uuids };
    await page.evaluate(async ([items, regs]) => {
      await chrome.storage.local.set(items);
      await chrome.userScripts.register(regs);
    }, [items, regs]);
    options = await h.context.newPage();
    await options.goto(`chrome-extension://${PROVIDER_ID}/options.html`);
    assert.equal(await until(rowCount, (n) => n === N, 60_000), N, "every script has a row");
  });
  after(async () => { await h?.close(); });

  /** Tags every row node, and counts from now on what the page asks the worker and which rows it adds or removes. */
  const watch = () => options.evaluate((sel) => {
    for (const r of document.querySelectorAll(sel)) r.__seen = true;
    window.__ops = [];
    window.__added = 0;
    window.__removed = 0;
    if (window.__watching) return;
    window.__watching = true;
    const send = chrome.runtime.sendMessage.bind(chrome.runtime);
    chrome.runtime.sendMessage = (msg, ...rest) => { window.__ops.push(msg?.op); return send(msg, ...rest); };
    const rows = document.querySelector(sel).parentElement;
    new MutationObserver((list) => {
      for (const m of list) { window.__added += m.addedNodes.length; window.__removed += m.removedNodes.length; }
    }).observe(rows, { childList: true });
  }, ROWS);
  const seenRows = () => options.evaluate((sel) => [...document.querySelectorAll(sel)].filter((r) => r.__seen).length, ROWS);

  test("idle: no script list is fetched and no row is touched", T, async () => {
    await watch();
    await sleep(7000); // two of the state polls
    const { ops, added, removed } = await options.evaluate(() => ({ ops: window.__ops, added: window.__added, removed: window.__removed }));
    assert.ok(!ops.includes("scripts.list"), `the page fetched the script list while idle: ${show(ops)}`);
    assert.ok(ops.every((op) => op === "state.get"), `only the small state is polled: ${show(ops)}`);
    assert.deepEqual([added, removed], [0, 0], "no row added or removed");
    assert.equal(await seenRows(), N, "every row is the same node as before");
  });

  test("while an agent writes, only the rows of the scripts that changed are built", T, async () => {
    await watch();
    const changed = uuids[500];
    await call("set_script_enabled", { uuid: changed, enabled: false });
    for (let i = 0; i < 3; i++) await call("write_script", { source: userscript(N + i) });
    assert.equal(await until(rowCount, (n) => n === N + 3), N + 3, "the three new scripts have rows");
    const toggle = options.getByRole("switch", { name: "Enabled: Scale 0500", exact: true });
    assert.equal(await until(() => toggle.isChecked(), (c) => c === false), false, "the changed script shows disabled");
    const kept = await seenRows();
    assert.equal(kept, N - 1, `all rows but the changed one are the same nodes (${kept} of ${N - 1})`);
    const { added, removed } = await options.evaluate(() => ({ added: window.__added, removed: window.__removed }));
    assert.deepEqual({ added, removed }, { added: 4, removed: 1 }, "three new rows and one rebuilt, nothing else added, removed or moved");
    const first = await options.locator(ROWS).first().textContent();
    assert.ok(first.includes(`Scale ${N + 2}`), `the newest script is on top: ${first.slice(0, 80)}`);
  });
});
