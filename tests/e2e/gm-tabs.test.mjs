// GM_getTab / GM_saveTab / GM_getTabs (and GM.getTab / GM.saveTab / GM.getTabs) in real
// Chromium: one object per script and tab, kept by the worker while the tab is open. Scripts
// are written through the MCP tools, pages are local under any host name, and what a script
// read is left on the page's root element as a data attribute.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, before, describe, test } from "node:test";
import { setUp } from "./lib/agent.mjs";
import { show, sleep } from "./lib/util.mjs";

const T = { timeout: 120_000 };

function script(name, lines, body) {
  return ["// ==UserScript==", `// @name Tabs ${name}`, "// @namespace lumo-e2e-gm-tabs",
    ...lines.map((l) => `// ${l}`), "// ==/UserScript==", body, ""].join("\n");
}

// `mark(k, v)` leaves `data-k` = JSON of v on the root element.
const MARK = "const mark = (k, v) => document.documentElement.setAttribute('data-' + k, JSON.stringify(v));";

const COUNTER = [
  MARK,
  // Tampermonkey's documented use: a counter per tab.
  "GM_getTab((t) => { t.n = (t.n || 0) + 1; GM_saveTab(t); mark('n', t.n); });",
  "document.addEventListener('lumo-tabs', () => GM_getTabs((all) => mark('tabs', all)));",
  "document.addEventListener('lumo-promise', () => GM.getTab().then((t) => mark('promise', t), (e) => mark('promise', 'rejected: ' + e.message)));",
  "document.addEventListener('lumo-big', () => {",
  "  GM_saveTab({ n: 99, big: 'x'.repeat(70000) });",
  "  GM.saveTab({ n: 98, big: 'y'.repeat(70000) }).then(() => mark('big', 'saved'), (e) => mark('big', e.message))",
  "    .then(() => GM.getTab()).then((t) => mark('after', t.n));",
  "});",
].join("\n");

const OTHER = [
  MARK,
  "GM_getTab((t) => mark('other-tab', t));",
  "document.addEventListener('lumo-tabs', () => GM_getTabs((all) => mark('other-tabs', all)));",
].join("\n");

async function pageServer() {
  const server = createServer((req, res) => {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end("<!doctype html><title>tabs page</title><p>text</p>");
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const close = () => new Promise((r) => { server.close(r); server.closeAllConnections(); });
  return { port: server.address().port, close };
}

describe("gm-tabs: per-tab objects", () => {
  let env, h, server, ok;
  const write = async (name, lines, body) => (await ok("write_script", { source: script(name, lines, body) })).script;
  const url = (path) => `http://tabs.test:${server.port}${path}`;

  /** The JSON a script left in `data-<name>` of `page`, waited for (`undefined` after `ms`). */
  const mark = async (page, name, ms = 5000) => {
    const end = Date.now() + ms;
    for (;;) {
      const v = await page.evaluate((n) => document.documentElement.getAttribute(`data-${n}`), name);
      if (v !== null) return JSON.parse(v);
      if (Date.now() > end) return undefined;
      await sleep(50);
    }
  };
  /** Clears `data-<name>`, sends the page event `lumo-<event>`, and waits for the new mark. */
  const ask = async (page, event, name) => {
    await page.evaluate(([e, n]) => {
      document.documentElement.removeAttribute(`data-${n}`);
      document.dispatchEvent(new Event(`lumo-${e}`));
    }, [event, name]);
    return mark(page, name);
  };
  /** `GM_getTabs`'s objects, without the tab ids (which the test cannot know), sorted by n. */
  const objects = (all) => Object.values(all ?? {}).sort((a, b) => a.n - b.n);

  // The shared set-up (lib/agent.mjs): the test host approved, "Allow User Scripts" on, the
  // provider seen ready, an MCP session; this file's own page server.
  before(async () => {
    env = await setUp({ server: pageServer });
    ({ h, server } = env);
    ({ ok } = env.tools);
  });
  after(async () => { await env?.close(); });

  // Fails if the functions are missing or not provided, if an object does not outlive a reload
  // of its tab or is shared between tabs, if GM_getTabs misses a tab or keeps a closed one, if
  // a worker restart loses the objects (or stops hearing tab closes), if another script reads
  // them, or if an object over 64 KiB is stored or replaces the old one.
  test("a per-tab counter: kept across reloads, apart per tab, listed by GM_getTabs, kept by a restarted worker, gone with its tab, its script's own", T, async () => {
    await write("Counter", ["@match http://tabs.test/*", "@grant GM_getTab", "@grant GM_saveTab", "@grant GM_getTabs",
      "@grant GM.getTab", "@grant GM.saveTab"], COUNTER);
    await write("Other", ["@match http://tabs.test/*", "@grant GM_getTab", "@grant GM_getTabs", "@run-at document-idle"], OTHER);
    const logs = [];
    const first = await h.context.newPage();
    first.on("console", (m) => logs.push(m.text()));
    await first.goto(url("/one"), { waitUntil: "load" });
    assert.equal(await mark(first, "n"), 1);
    await first.reload({ waitUntil: "load" });
    assert.equal(await mark(first, "n"), 2, "the same tab, reloaded, reads what it saved");

    const second = await h.context.newPage();
    second.on("console", (m) => logs.push(m.text()));
    await second.goto(url("/two"), { waitUntil: "load" });
    assert.equal(await mark(second, "n"), 1, "a second tab starts with its own object");
    const both = await ask(second, "tabs", "tabs");
    assert.equal(Object.keys(both).length, 2, show(both));
    assert.ok(Object.keys(both).every((k) => /^\d+$/.test(k)), show(both));
    assert.deepEqual(objects(both), [{ n: 1 }, { n: 2 }]);

    // Another script in the same tabs sees none of them.
    assert.deepEqual(await mark(second, "other-tab"), {});
    assert.deepEqual(await ask(second, "tabs", "other-tabs"), {});

    // A stopped worker: the next one reads them back (storage.session), and hears tab closes.
    await h.stopProviderWorker();
    assert.deepEqual(await ask(second, "tabs", "tabs"), both, "kept across a worker restart");

    await first.close();
    let left;
    for (const end = Date.now() + 5000; Date.now() < end; await sleep(100)) {
      left = await ask(second, "tabs", "tabs");
      if (Object.keys(left).length === 1) break;
    }
    assert.deepEqual(objects(left), [{ n: 1 }], `the closed tab's object is gone: ${show(left)}`);

    // The promise form.
    assert.deepEqual(await ask(second, "promise", "promise"), { n: 1 });

    // Over 64 KiB: refused (GM_saveTab in the console, GM.saveTab rejects), the old one stays.
    const big = await ask(second, "big", "big");
    assert.match(big, /^GM_saveTab: the tab object is \d+ bytes as JSON, over the 64 KiB one tab may hold; the tab keeps its earlier object$/, show(big));
    assert.equal(await mark(second, "after"), 1);
    assert.ok(logs.some((t) => /GM_saveTab: the tab object is \d+ bytes as JSON, over the 64 KiB/.test(t)), show(logs));
    assert.ok(!logs.some((t) => t.includes("not provided")), show(logs));
    await second.reload({ waitUntil: "load" });
    assert.equal(await mark(second, "n"), 2);
    await second.close();
  });

  // Fails if a tried script has no tab functions, if its save does not last for the try, or if
  // a try reads or writes the stored script's objects.
  test("try_script: the tab object lives in the try only, and the stored script's stays", T, async () => {
    await write("Kept", ["@match http://tabs.test/kept*", "@grant GM_getTab", "@grant GM_saveTab", "@grant GM_getTabs"], [
      MARK,
      "GM_getTab((t) => { t.kept = 'page'; GM_saveTab(t); mark('kept', 1); });",
      "document.addEventListener('lumo-tabs', () => GM_getTabs((all) => mark('kept-tabs', all)));",
    ].join("\n"));
    const page = await h.context.newPage();
    await page.goto(url("/kept"), { waitUntil: "load" });
    assert.equal(await mark(page, "kept"), 1);
    const r = await ok("try_script", {
      source: script("Tried", ["@match http://tabs.test/kept*", "@grant GM.getTab", "@grant GM.saveTab", "@grant GM.getTabs"],
        "const before = await GM.getTab(); await GM.saveTab({ tried: 1 });\n"
        + "return { before, after: await GM.getTab(), all: await GM.getTabs() };"),
      url: url("/kept"),
    });
    assert.equal(r.frames[0].ok, true, show(r.frames[0]));
    assert.deepEqual(r.frames[0].value, { before: {}, after: { tried: 1 }, all: {} });
    assert.deepEqual(objects(await ask(page, "tabs", "kept-tabs")), [{ kept: "page" }], "the stored script's object is untouched");
    await page.close();
  });
});
