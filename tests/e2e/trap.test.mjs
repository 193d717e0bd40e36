// Recovery from a wasm trap. The core must never panic; if the module traps anyway, the loader
// reloads the extension so every caller gets a working provider back, with nothing stored lost.
// Runs against a test-only build (cargo feature `test-trap`, built by scripts/test.sh into
// target/dist-trap) in which a probe carrying a magic id panics, in the listener itself (sync) or
// in the task that answers it (async), and closing a tab whose page at a magic URL registered a
// menu command panics in the tab listener.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { HOST_ID, PROVIDER_ID, REPO_ROOT, launch } from "./lib/harness.mjs";

const TRAP_DIST = join(REPO_ROOT, "target/dist-trap");
const T = { timeout: 90_000 };
const script = `// ==UserScript==\n// @name Survivor\n// @namespace trap\n// @match http://127.0.0.1/*\n// ==/UserScript==\ndocument.title = "survived";\n`;

const probeMsg = (id) => ({ channel: "lumo:probe", version: 1, id, client: { id: HOST_ID, name: "Lumo Test Host", version: "1" } });

describe("trap recovery (test-only build)", { skip: !existsSync(TRAP_DIST) && "target/dist-trap not built (scripts/test.sh builds it)" }, () => {
  let h;
  before(async () => {
    h = await launch({ dist: TRAP_DIST });
    // A user who loaded the extension unpacked has developer mode on; without it Chromium
    // disables an unpacked extension that reloads itself ("unsupported developer extension").
    const ext = await h.context.newPage();
    await ext.goto("chrome://extensions/");
    await ext.evaluate(() => chrome.developerPrivate.updateProfileConfiguration({ inDeveloperMode: true }));
    await ext.close();
    await h.internal("policy.approve", { id: HOST_ID });
    await h.setUserScriptsAccess(PROVIDER_ID, true);
    const s = await h.lumo("connect", PROVIDER_ID);
    const r = await h.lumo("callTool", s, "write_script", { source: script });
    assert.equal(r.isError, false, JSON.stringify(r));
    await h.lumo("close", s);
  });
  after(async () => { await h?.close(); });

  for (const kind of ["sync", "async"]) {
    test(`a ${kind} trap reloads the extension and the provider works again, state intact`, T, async () => {
      const before = await h.workerVersionId();
      const trapped = await h.lumo("probe", PROVIDER_ID, { message: probeMsg(`__lumo_test_trap_${kind}__`), openSession: false });
      assert.equal(trapped.state, "error", "the trapping probe gets no answer");
      // A new worker version appears: the extension reloaded itself.
      const deadline = Date.now() + 20_000;
      while ((await h.workerVersionId()) === before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      assert.notEqual(await h.workerVersionId(), before, "the extension reloaded after the trap");
      await h.waitForWorkerStatus(PROVIDER_ID, "running", 10_000);
      // Working again, with the policy and the script still there and registered.
      const ok = await h.lumo("probe", PROVIDER_ID);
      assert.equal(ok.response?.status?.authorized, true, JSON.stringify(ok));
      assert.match(ok.text, /^Connected: \d+ tools$/);
      const s = await h.lumo("connect", PROVIDER_ID);
      const list = await h.lumo("callTool", s, "list_scripts", {});
      assert.deepEqual(list.structuredContent.scripts.map((x) => x.name), ["Survivor"]);
      await h.lumo("close", s);
      const page = await h.context.newPage();
      await page.goto(`chrome-extension://${PROVIDER_ID}/options.html`);
      const registered = await page.evaluate(async () => (await chrome.userScripts.getScripts()).length);
      const reloads = await page.evaluate(async () => (await chrome.storage.local.get("trapReloads")).trapReloads?.length ?? 0);
      await page.close();
      assert.equal(registered, 1, "the script is registered again after the reload");
      assert.ok(reloads >= 1, "the reload is counted (the loop guard)");
    });
  }

  // The tab listener is added by the module only while a page has menu commands (or a script's
  // tab is open), after the loader's first turn; Chrome's event dispatch would swallow a trap in
  // it, leaving a dead module answering nothing.
  test("a trap in a tab event listener reloads the extension too", T, async () => {
    const server = createServer((req, res) => {
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
      res.end("<!doctype html><title>trap page</title>");
    });
    await new Promise((r) => server.listen(0, "127.0.0.1", r));
    const page = `http://menu.test:${server.address().port}/?__lumo_test_trap_tab__`;
    try {
      const s = await h.lumo("connect", PROVIDER_ID);
      const menu = `// ==UserScript==\n// @name Menu\n// @namespace trap\n// @match http://menu.test/*\n// @grant GM_registerMenuCommand\n// ==/UserScript==\n`
        + "GM_registerMenuCommand('Mark', () => {});\n";
      const w = await h.lumo("callTool", s, "write_script", { source: menu });
      assert.equal(w.isError, false, JSON.stringify(w));
      await h.lumo("close", s);
      const tab = await h.context.newPage();
      await tab.goto(page, { waitUntil: "load" });
      const ids = await h.context.newPage();
      await ids.goto(`chrome-extension://${PROVIDER_ID}/manifest.json`);
      const tabId = await ids.evaluate(async (u) => (await chrome.tabs.query({})).find((t) => t.url === u)?.id, page);
      await ids.close();
      for (const end = Date.now() + 5000; ;) {
        if ((await h.internal("menu.list", { tab: tabId })).items?.length === 1) break;
        assert.ok(Date.now() < end, "the page's command was listed: the tab listener is on");
        await new Promise((r) => setTimeout(r, 100));
      }
      const before = await h.workerVersionId();
      await tab.close();
      const deadline = Date.now() + 20_000;
      while ((await h.workerVersionId()) === before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      assert.notEqual(await h.workerVersionId(), before, "the extension reloaded after the trap in the tab listener");
      await h.waitForWorkerStatus(PROVIDER_ID, "running", 10_000);
      const ok = await h.lumo("probe", PROVIDER_ID);
      assert.equal(ok.response?.status?.authorized, true, JSON.stringify(ok));
    } finally {
      await new Promise((r) => { server.close(r); server.closeAllConnections(); });
    }
  });
});
