// Run reports in real Chromium through the official SDK client: a script written with
// write_script reports its runs on real page loads (seen by Chrome: the page was loaded and the
// script ran), a throw on a real load shows its line, errors after the first pass and syntax
// errors show too (and only the script's own), an @include glob script reports like the others,
// forged reports (another script's uuid or token, a page's own script) are ignored, a flood is
// bounded while the provider keeps answering and another script's report still lands.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, before, describe, test } from "node:test";
import { setUp } from "./lib/agent.mjs";
import { PROVIDER_ID } from "./lib/harness.mjs";
import { sleep, until } from "./lib/util.mjs";

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
    } else if (req.url.startsWith("/late")) {
      // The page's own errors, later than any script's first pass: never a script's.
      res.end(`<!doctype html><title>Late page</title><p id=p>hello</p><script>
        setTimeout(() => { throw new Error("page-own-error"); }, 30);
        Promise.reject(new Error("page-own-rejection"));
        document.addEventListener("click", () => { throw new Error("page-own-click"); });
        // Events the page makes up reach every world's listeners: none is a script's error.
        setTimeout(() => {
          dispatchEvent(new ErrorEvent("error", { message: "page-forged-error", filename: "lumo-userscript.js", lineno: 8, error: new Error("page-forged-error") }));
          dispatchEvent(new Event("error"));
          dispatchEvent(new PromiseRejectionEvent("unhandledrejection", { promise: Promise.resolve(), reason: new Error("page-forged-rejection") }));
          document.title = "forged";
        }, 30);
      </script>`);
    } else if (req.url.includes("xframed")) {
      // A page with a frame from another site.
      const port = (req.headers.host ?? "").split(":")[1];
      res.end(`<!doctype html><title>X framed</title><p>top</p><iframe src="http://spa-frame.test:${port}/child"></iframe>`);
    } else if (req.url.startsWith("/forty")) {
      // 39 frames, then (once they have reported) a 40th, the one whose run fails.
      const frames = Array.from({ length: 39 }, (_, i) => `<iframe src="/frame${i}"></iframe>`).join("");
      res.end(`<!doctype html><title>Forty</title>${frames}<script>
        addEventListener("load", () => setTimeout(() => { const f = document.createElement("iframe"); f.src = "/frame39"; document.body.append(f); }, 1500));
      </script>`);
    } else if (req.url.startsWith("/framed")) {
      res.end("<!doctype html><title>Framed</title><p>top</p><iframe src=\"/inner\"></iframe>");
    } else res.end("<!doctype html><title>Runs page</title><p id=p>hello</p>");
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const close = () => new Promise((r) => { server.close(r); server.closeAllConnections(); });
  return { port: server.address().port, close };
}

describe("script_runs: what installed scripts did on real page loads", () => {
  let env, h, server, session, base, call;
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

  // The shared set-up (lib/agent.mjs): the test host approved, "Allow User Scripts" on, the
  // provider seen ready, an MCP session; this file's own page server.
  before(async () => {
    env = await setUp({ server: anyPathServer });
    ({ h, server, session } = env);
    ({ call } = env.tools);
    base = `http://runs.test:${server.port}`;
  });
  after(async () => { await env?.close(); });

  test("write_script → the page is visited → script_runs shows the run, with Chrome's URL and the script's console", T, async () => {
    const uuid = await write(script("Runs ok", ["@match http://runs.test/*"], [
      "console.log('hello from', location.pathname);", // line 6
      "document.documentElement.setAttribute('data-ran-ok', '1');",
      "console.log('at', new Date(0), new Map([['k', 1]]), new Set([2]), /a+/g);", // line 8
      "const self = new Map(); self.set('self', self); console.log(self);", // line 9: bounded
      "console.log({ a: Array.from({ length: 150 }, () => 0) });", // line 10: 100 entries, as a try
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
    // A Map, a Set and a RegExp as try_script shows them, not as JSON's {}.
    assert.deepEqual(run.console.slice(0, 2), [{ level: "log", text: "hello from /ok", line: 6 },
      { level: "log", text: 'at "1970-01-01T00:00:00.000Z" {"[Map]":[["k",1]]} {"[Set]":[2]} "/a+/g"', line: 8 }]);
    // A Map holding itself is expanded to a bound, not until the stack overflows.
    assert.equal(run.console.length, 4, JSON.stringify(run.console));
    assert.ok(run.console[2].text.startsWith('{"[Map]":[["self",{"[Map]":[["self",'), run.console[2].text.slice(0, 80));
    // An array's first 100 entries, as try_script shows them (R17: all 150 were).
    assert.equal(run.console[3].text, `{"a":[${Array(100).fill(0).join(",")}]}`);
    assert.equal(typeof run.durationMs, "number");
    assert.ok(Math.abs(run.at - Date.now()) < 60_000, JSON.stringify(run));
    assert.equal(typeof out.cursor, "number");
    // Since that cursor: nothing new until the page is loaded again.
    const none = await call("script_runs", { uuid, since: out.cursor });
    assert.deepEqual(none.structuredContent.runs, []);
    // "No runs" is not "it did not run": past a page's 10th, a script runs and reports nothing.
    assert.match(none.content[0].text, /^No runs since that cursor\..*those past the 10th run in Chrome's shared world and report nothing/s);
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
    // The text says the same, for a client that gives the model the text alone.
    const text = (await call("script_runs", { uuid, errorsOnly: true })).content[0].text;
    assert.match(text, /\n- "Runs throws" \([0-9a-f-]{36}\) revision 1, \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ in tab \d+ frame 0, "http:\/\/runs\.test:\d+\/throw", document-end, [\d.]+ ms: error\n/, text);
    assert.ok(text.includes('\n    console.warn (line 8): "about to fail"'), text);
    assert.match(text, /\n    threw "TypeError": "[^"]+" at line 10, column 16/, text);
  });

  test("options page: each script's last run (when, where, ok or error) and a Runs view with the error and console lines, updated in place", T, async () => {
    const uuid = await write(script("Runs in the page", ["@match http://ui.test/*"], [
      "console.info('ui says hi');", // line 6
      "document.documentElement.setAttribute('data-ran-ui', '1');",
      "if (location.pathname === '/bad') undefinedFunction();", // line 8
    ]));
    const options = await h.context.newPage();
    await options.goto(`chrome-extension://${PROVIDER_ID}/options.html`);
    const cell = options.locator(`[data-last-run="${uuid}"]`);
    await cell.waitFor({ timeout: 8000 });
    await options.waitForFunction((u) => document.querySelector(`[data-last-run="${u}"]`)?.textContent.includes("no run seen yet"), uuid, { timeout: 5000 });
    const good = await h.context.newPage();
    await good.goto(`http://ui.test:${server.port}/good`, { waitUntil: "load" });
    await options.waitForFunction((u) => document.querySelector(`[data-last-run="${u}"]`)?.textContent.includes("ran ok"), uuid, { timeout: 8000 });
    assert.ok((await cell.innerText()).includes(`http://ui.test:${server.port}/good`), await cell.innerText());
    // The Runs view, then a failing load arrives while it is open: prepended, the first item kept.
    await options.getByRole("button", { name: "Runs of Runs in the page", exact: true }).click();
    const list = options.getByRole("list", { name: "Runs of Runs in the page" });
    await list.locator("li").first().waitFor({ timeout: 5000 });
    const firstItem = await list.locator("li").first().elementHandle();
    await good.goto(`http://ui.test:${server.port}/bad`, { waitUntil: "load" });
    await options.waitForFunction(() => document.querySelectorAll("ol.runs > li").length === 2, null, { timeout: 8000 });
    const top = await list.locator("li").first().innerText();
    assert.ok(top.includes("ReferenceError") && top.includes("line 8"), top);
    assert.ok(top.includes("info (line 6): ui says hi"), top);
    assert.ok(await firstItem.evaluate((e) => e.isConnected), "the run already shown was rebuilt");
    await options.waitForFunction((u) => document.querySelector(`[data-last-run="${u}"]`)?.textContent.includes("threw"), uuid, { timeout: 8000 });
    await good.close();
    await options.close();
  });

  test("Chromium's sender for a userscript message: the page's URL, frame and tab, and no world id (why reports carry a token)", T, async () => {
    await worker().evaluate(() => {
      globalThis.__lumoSenders = [];
      chrome.runtime.onUserScriptMessage.addListener((msg, sender) => { globalThis.__lumoSenders.push({ keys: Object.keys(sender).sort(), url: sender.url, frameId: sender.frameId, tabId: sender.tab?.id, worldId: sender.userScriptWorldId ?? null }); });
    });
    await write(script("Runs sender", ["@match http://sender.test/*"], ["document.documentElement.setAttribute('data-ran-sender', '1');"]));
    const page = await h.context.newPage();
    await page.goto(`http://sender.test:${server.port}/s`, { waitUntil: "load" });
    await page.waitForFunction(() => document.documentElement.hasAttribute("data-ran-sender"), null, { timeout: 5000 });
    let seen = [];
    for (const deadline = Date.now() + 5000; !seen.length && Date.now() < deadline; await sleep(100)) seen = await worker().evaluate(() => globalThis.__lumoSenders);
    await page.close();
    assert.equal(seen.length, 1, JSON.stringify(seen));
    const s = seen[0];
    assert.equal(s.url, `http://sender.test:${server.port}/s`);
    assert.equal(s.frameId, 0);
    assert.equal(typeof s.tabId, "number");
    assert.equal(s.worldId, null, "Chromium now names the world: attribution could use it");
    assert.ok(!s.keys.includes("userScriptWorldId"), JSON.stringify(s.keys));
    console.log(`# sender keys in this Chromium: ${s.keys.join(", ")}`);
  });

  test("a userscript forging reports for another script (its uuid, a made-up token) is ignored; its own reports stay its own", T, async () => {
    const victim = await write(script("Runs victim", ["@match http://victim.test/*"], ["document.documentElement.setAttribute('data-ran-victim', '1');"]));
    const forger = await write(script("Runs forger", ["@match http://forger.test/*"], [
      "const out = { lumoRunType: typeof __lumoR, token: null };",
      `const victim = ${JSON.stringify(victim)};`,
      "const fake = { v: 1, kind: 'run', runAt: 'document_idle', ms: 1, error: { name: 'Forged', message: 'forged', line: 1, column: 1 } };",
      "(async () => { for (const lumo of [victim + '.1.' + '0'.repeat(32), victim + '.1.' + 'f'.repeat(32), victim, 'x']) out.answers = [...(out.answers ?? []), await chrome.runtime.sendMessage({ ...fake, lumo }).then((a) => a ?? null, (e) => 'error: ' + e.message)]; document.documentElement.dataset.forgerAnswers = JSON.stringify(out.answers); })();",
      "chrome.runtime.sendMessage({ channel: 'lumo:internal', op: 'policy.setSwitch', name: 'review', value: true }).catch(() => {});",
      // Its own runtime's run() is reachable by name, but only reports as this same script; the
      // world's runtime holder hands out no other (its own was taken, the victim's is not here).
      "try { __lumoR.run(function () { throw new Error('self-made'); }); } catch (e) {}",
      "try { out.token = JSON.stringify(Object.keys(__lumoR)); } catch (e) { out.token = String(e); }",
      "try { out.taken = [__lumoWorld.take(victim), Object.isFrozen(__lumoWorld)]; } catch (e) { out.taken = String(e); }",
      "document.documentElement.dataset.forger = JSON.stringify(out);",
    ]));
    const page = await h.context.newPage();
    await page.goto(`http://forger.test:${server.port}/f`, { waitUntil: "load" });
    await page.waitForFunction(() => document.documentElement.dataset.forger, null, { timeout: 5000 });
    const out = JSON.parse(await page.evaluate(() => document.documentElement.dataset.forger));
    // Every forged message is answered at once, with nothing (a pending promise would hang the script).
    await page.waitForFunction(() => document.documentElement.dataset.forgerAnswers, null, { timeout: 5000 });
    assert.deepEqual(JSON.parse(await page.evaluate(() => document.documentElement.dataset.forgerAnswers)), [null, null, null, null]);
    // run() and gm() both add this script's own token, which neither hands out.
    assert.equal(out.token, '["gm","run","snap"]', "the prelude hands out nothing but run(), gm() and the script's own values");
    assert.deepEqual(out.taken, [null, true]);
    const own = await runsOf(forger, {}, 2);
    await page.close();
    await sleep(300);
    assert.equal((await call("script_runs", { uuid: victim })).structuredContent.runs.length, 0, "a forged report reached the victim");
    assert.deepEqual(own.runs.map((r) => [r.uuid, r.ok]).sort(), [[forger, false], [forger, true]].sort());
    assert.equal((await h.internal("state.get")).policy.reviewWrites, false);
  });

  test("a page's own script cannot send reports: nothing is recorded from a page no script matches", T, async () => {
    const before = (await call("script_runs", {})).structuredContent;
    const page = await h.context.newPage();
    await page.goto(`http://page.test:${server.port}/pagesend`, { waitUntil: "load" });
    await page.waitForFunction(() => document.title === "sent", null, { timeout: 5000 });
    const out = await page.evaluate(() => window.__out);
    await sleep(500);
    await page.close();
    assert.notEqual(out.runtime, "object", `a web page got chrome.runtime: ${JSON.stringify(out)}`);
    const after = (await call("script_runs", { since: before.cursor })).structuredContent;
    assert.deepEqual(after.runs, []);
  });

  test("errors after the first pass (a click handler, a timer, a rejected promise) join the run with their lines; the page's and another script's errors do not", T, async () => {
    const uuid = await write(script("Runs late", ["@match http://late.test/*"], [
      "document.documentElement.setAttribute('data-ran-late', '1');", // line 6
      "document.addEventListener('click', () => { const el = null; el.textContent = 'x'; });", // line 7
      "Promise.reject(new RangeError('nobody handles me'));", // line 8
      "setTimeout(() => { throw new Error('timer fails'); }, 10);", // line 9
      "document.body.addEventListener('x', () => { throw new Error('during the first pass'); }); document.body.dispatchEvent(new Event('x'));", // line 10
    ]));
    const other = await write(script("Runs late other", ["@match http://late.test/*"], [
      "document.documentElement.setAttribute('data-ran-late-other', '1');",
      "setTimeout(() => { throw new Error('the other script fails'); }, 20);", // line 7
    ]));
    const page = await h.context.newPage();
    await page.goto(`http://late.test:${server.port}/late`, { waitUntil: "load" });
    await page.waitForFunction(() => document.documentElement.hasAttribute("data-ran-late"), null, { timeout: 5000 });
    await page.waitForFunction(() => document.documentElement.hasAttribute("data-ran-late-other"), null, { timeout: 5000 });
    await page.waitForFunction(() => document.title === "forged", null, { timeout: 5000 });
    const late = async (extra, want) => {
      for (const deadline = Date.now() + 8000; ;) {
        const out = (await call("script_runs", { uuid, ...extra })).structuredContent;
        if ((out.runs[0]?.lateErrors?.length ?? 0) >= want || Date.now() > deadline) return out;
        await sleep(150);
      }
    };
    const first = await late({}, 3);
    assert.equal(first.runs.length, 1, JSON.stringify(first));
    let run = first.runs[0];
    assert.equal(run.ok, false, "a script failing after its first pass still shows as ok");
    assert.equal(run.error, null, JSON.stringify(run));
    const seen = (r) => r.lateErrors.map((e) => [e.name, e.message, e.line, e.rejection]).sort();
    // A handler that throws during the first pass (dispatched by the script) is reported too: it
    // waits in the page for the run report it joins.
    assert.deepEqual(seen(run), [["Error", "during the first pass", 10, false], ["Error", "timer fails", 9, false], ["RangeError", "nobody handles me", 8, true]], JSON.stringify(run.lateErrors));
    // The click comes later still: the same run, shown again after the cursor it was read at.
    await page.click("#p");
    const next = await late({ since: first.cursor }, 4);
    await page.close();
    assert.equal(next.runs.length, 1, JSON.stringify(next));
    run = next.runs[0];
    assert.equal(run.id, first.runs[0].id);
    const click = run.lateErrors.find((e) => e.name === "TypeError");
    assert.ok(click, JSON.stringify(run.lateErrors));
    assert.equal(click.line, 7);
    assert.ok(click.column > 40, JSON.stringify(click));
    assert.ok(next.cursor > first.cursor);
    // Exactly the script's four: nothing the page dispatched (a forged one reads "thrown value").
    assert.equal(run.lateErrors.length, 4, JSON.stringify(run.lateErrors));
    const all = JSON.stringify(run);
    assert.ok(!/page-own|page-forged|the other script/.test(all), all);
    // The other script's error is its own.
    const mine = (await runsOf(other)).runs;
    for (const deadline = Date.now() + 5000; !(mine[0]?.lateErrors?.length) && Date.now() < deadline; await sleep(150)) mine.splice(0, 1, ...(await runsOf(other)).runs);
    assert.deepEqual(mine[0].lateErrors.map((e) => [e.message, e.line]), [["the other script fails", 7]]);
  });

  // W: a rejection the script handled a moment later stayed a late error, and the run read
  // failed; the browser's console takes such a rejection back (rejectionhandled).
  test("a rejection handled later is taken back from the run; one never handled stays", T, async () => {
    const uuid = await write(script("Runs handled later", ["@match http://late2.test/*"], [
      "const later = Promise.reject(new Error('handled later'));", // line 6
      "setTimeout(() => later.catch(() => {}), 300);",
      "setTimeout(() => Promise.reject(new TypeError('never handled')), 500);",
      "setTimeout(() => document.documentElement.setAttribute('data-late2', '1'), 700);",
    ]));
    const page = await h.context.newPage();
    try {
      await page.goto(`http://late2.test:${server.port}/late`, { waitUntil: "load" });
      await page.waitForFunction(() => document.documentElement.hasAttribute("data-late2"), null, { timeout: 5000 });
      let run;
      for (const deadline = Date.now() + 8000; Date.now() < deadline; await sleep(150)) {
        run = (await call("script_runs", { uuid })).structuredContent.runs[0];
        if (run?.lateErrors?.length === 1 && run.lateErrors[0].message === "never handled") break;
      }
      assert.deepEqual(run.lateErrors.map((e) => [e.name, e.message, e.rejection]), [["TypeError", "never handled", true]], JSON.stringify(run));
      assert.equal(run.ok, false);
      assert.equal(run.lateErrors[0].n, undefined, "the page's number is not shown");
    } finally {
      await page.close();
    }
    // R8: 25 rejections handled later used up the page's 20 late errors, and a real error after
    // them was never sent (the run read ok). One taken back gives its place back.
    const many = await write(script("Runs handled many", ["@match http://late3.test/*"], [
      "for (let i = 0; i < 25; i++) setTimeout(() => { const q = Promise.reject(new Error('handled ' + i)); setTimeout(() => q.catch(() => {}), 5); }, i * 25);",
      "setTimeout(() => { throw new Error('real after many'); }, 900);", // line 7
      "setTimeout(() => document.documentElement.setAttribute('data-late3', '1'), 1000);",
    ]));
    const third = await h.context.newPage();
    try {
      await third.goto(`http://late3.test:${server.port}/late`, { waitUntil: "load" });
      await third.waitForFunction(() => document.documentElement.hasAttribute("data-late3"), null, { timeout: 5000 });
      let run;
      for (const deadline = Date.now() + 8000; Date.now() < deadline; await sleep(150)) {
        run = (await call("script_runs", { uuid: many })).structuredContent.runs[0];
        if (run?.lateErrors?.length === 1 && run.lateErrors[0].message === "real after many") break;
      }
      assert.deepEqual(run.lateErrors?.map((e) => [e.message, e.line]), [["real after many", 7]], JSON.stringify(run));
      assert.equal(run.ok, false);
    } finally {
      await third.close();
    }
  });

  // A tester's: an exception in GM_xmlhttpRequest's onload (the commonest async userscript bug)
  // or in a value listener went only to the page's console, and script_runs said the run was ok;
  // console.error("caught:", e) read "caught: {}"; a thrown object read name "undefined".
  test("a GM callback's exception is its run's late error at its line; the console shows an Error and NaN; a thrown object is named", T, async () => {
    const uuid = await write(script("Runs gm callbacks", ["@match http://gmcb.test/*", "@grant GM_xmlhttpRequest", "@grant GM_addValueChangeListener", "@grant GM_setValue", "@connect self"], [
      "document.documentElement.setAttribute('data-ran-gmcb', '1');", // line 10
      "GM_xmlhttpRequest({ url: '/data', onload() { JSON.parse('{bad'); }, onloadend() { document.documentElement.setAttribute('data-loadend', '1'); } });", // line 11
      "GM_addValueChangeListener('k', () => { throw new TypeError('listener fails'); });", // line 12
      "GM_setValue('k', Math.random());", // line 13
      "console.error('caught:', new Error('boom'), NaN, [new RangeError('inner')]);", // line 14
      "setTimeout(() => { throw { code: 5 }; }, 10);", // line 15
    ]));
    const page = await h.context.newPage();
    await page.goto(`http://gmcb.test:${server.port}/gmcb`, { waitUntil: "load" });
    // The request's other callbacks still run after onload threw.
    await page.waitForFunction(() => document.documentElement.hasAttribute("data-loadend"), null, { timeout: 5000 });
    let run;
    for (const deadline = Date.now() + 8000; Date.now() < deadline; await sleep(150)) {
      run = (await runsOf(uuid)).runs[0];
      if ((run?.lateErrors?.length ?? 0) >= 3) break;
    }
    await page.close();
    const seen = run.lateErrors.map((e) => [e.name, e.message, e.line]).sort();
    assert.deepEqual(seen.map((e) => [e[0], e[2]]), [["SyntaxError", 11], ["TypeError", 12], ["thrown value", 15]], JSON.stringify(run.lateErrors));
    assert.equal(seen[1][1], "listener fails");
    assert.equal(seen[2][1], '{"code":5}');
    assert.deepEqual(run.console.map((l) => [l.level, l.text, l.line]), [["error", 'caught: Error: boom NaN ["RangeError: inner"]', 14]]);
  });

  // The popup lists what reaches the tab the user is on, from what Chrome reported there: a
  // script that ran in another tab is not said to have run on this one.
  test("popup: Scripts on this tab lists the scripts whose rules reach it, with what they did there, and turns one off", T, async () => {
    const lines = ["@match http://tabs.test/*"];
    const ran = await write(script("Tab ran", lines, ["document.documentElement.setAttribute('data-ran-tab', '1');"]));
    const threw = await write(script("Tab threw \u202Ertl", lines, ["null.boom;"]));
    const late = await write(script("Tab late", ["@match http://tabs.test/*", "@match http://other-tabs.test/*"], ["document.documentElement.setAttribute('data-ran-late', '1');"]));
    const elsewhere = await write(script("Tab elsewhere", ["@match http://nowhere.test/*"], ["0;"]));
    await h.internal("scripts.setEnabled", { uuid: late, enabled: false });
    const a = await h.context.newPage();
    await a.goto(`http://tabs.test:${server.port}/a`, { waitUntil: "load" });
    await a.waitForFunction(() => document.documentElement.hasAttribute("data-ran-tab"), null, { timeout: 5000 });
    // Turned on after this page loaded, it runs in another tab: not on this one.
    await h.internal("scripts.setEnabled", { uuid: late, enabled: true });
    const b = await h.context.newPage();
    await b.goto(`http://other-tabs.test:${server.port}/b`, { waitUntil: "load" });
    await b.waitForFunction(() => document.documentElement.hasAttribute("data-ran-late"), null, { timeout: 5000 });
    await runsOf(late);
    await runsOf(threw);
    await a.bringToFront();
    const popup = await h.context.newPage();
    try {
      await popup.goto(`chrome-extension://${PROVIDER_ID}/popup.html`);
      const row = (uuid) => popup.locator(`#tab-scripts > li[data-script="${uuid}"]`);
      await row(ran).waitFor({ timeout: 8000 });
      const text = async (uuid) => (await row(uuid).innerText()).replace(/\s+/g, " ").trim();
      for (const deadline = Date.now() + 5000; !/Threw here/.test(await text(threw)) && Date.now() < deadline;) await sleep(100);
      assert.match(await text(ran), /^Tab ran Ran here$/);
      // The name's direction character does not reach the row to turn it around.
      assert.match(await text(threw), /^Tab threw (⟨U\+202E⟩)?rtl Threw here: TypeError: .* \(line 6\)$/);
      assert.ok(!(await text(threw)).includes("\u202E"));
      assert.match(await text(late), /Not seen running on this page/);
      assert.equal(await row(elsewhere).count(), 0, "a script whose rules do not reach the tab is not listed");
      assert.equal(await popup.locator("#tab-scripts > li").count(), 3);
      // Off from the popup: the next load of the tab runs it no more, and the row says so.
      await row(ran).getByRole("checkbox").uncheck();
      assert.equal(await until(() => text(ran), (t) => t === "Tab ran Off", 5000), "Tab ran Off");
      await a.reload({ waitUntil: "load" });
      await sleep(500);
      assert.equal(await a.evaluate(() => document.documentElement.hasAttribute("data-ran-tab")), false, "turned off in the popup, it still ran");
      assert.equal((await call("get_script", { uuid: ran })).structuredContent.script.enabled, false);
    } finally {
      await popup.close();
      await a.close();
      await b.close();
      for (const u of [ran, threw, late, elsewhere]) await h.internal("scripts.delete", { uuid: u });
    }
  });

  // R10: the popup listed only the scripts whose rules reach the address the tab shows now. A
  // single-page site changing it with history.pushState (Chrome injects nothing then) hid the
  // script that ran and listed one that did not as "may have loaded before the script was on";
  // a script that ran in a frame only was not listed at all.
  test("popup: Scripts on this tab lists a script that ran before the page changed its address, and one that ran in a frame, each saying so", T, async () => {
    const ranA = await write(script("Spa a", ["@match http://spa.test/a*"], ["0;"]));
    const notB = await write(script("Spa b", ["@match http://spa.test/b*"], ["0;"]));
    const inFrame = await write(script("Spa frame", ["@match http://spa-frame.test/*"], ["0;"]));
    const page = await h.context.newPage();
    const loaded = `http://spa.test:${server.port}/a-xframed`;
    await page.goto(loaded, { waitUntil: "load" });
    await runsOf(ranA);
    await runsOf(inFrame);
    await page.evaluate(() => history.pushState({}, "", "/b"));
    await page.bringToFront();
    const popup = await h.context.newPage();
    try {
      await popup.goto(`chrome-extension://${PROVIDER_ID}/popup.html`);
      const row = (uuid) => popup.locator(`#tab-scripts > li[data-script="${uuid}"]`);
      const text = async (uuid) => (await row(uuid).innerText()).replace(/\s+/g, " ").trim();
      await row(ranA).waitFor({ timeout: 8000 });
      assert.equal(await text(ranA), `Spa a Ran here: it ran when this page loaded, at ${loaded}; the page has changed its address since without loading (as single-page sites do), to one its rules do not reach: it does not run at the next load of this address`);
      await row(inFrame).waitFor({ timeout: 3000 });
      assert.equal(await text(inFrame), `Spa frame Ran here: it ran in a frame of this page, at http://spa-frame.test:${server.port}/child`);
      assert.equal(await text(notB), `Spa b Not seen running on this page: this page changed its address after it loaded (at ${loaded}), and scripts run when a page loads: this one runs here at the next load`);
    } finally {
      await popup.close();
      await page.close();
      for (const u of [ranA, notB, inFrame]) await h.internal("scripts.delete", { uuid: u });
    }
    // A script whose rules were edited after it ran, on a page that kept its address: the row
    // does not say the address changed (R11).
    const edited = await write(script("Spa c", ["@match http://spa.test/c*"], ["0;"]));
    const c = await h.context.newPage();
    const again = await h.context.newPage();
    try {
      await c.goto(`http://spa.test:${server.port}/c`, { waitUntil: "load" });
      await runsOf(edited);
      const saved = await h.internal("scripts.save", { uuid: edited, revision: 1, source: script("Spa c", ["@match http://spa.test/d*"], ["0;"]) });
      assert.equal(saved.ok, true, JSON.stringify(saved));
      await c.bringToFront();
      await again.goto(`chrome-extension://${PROVIDER_ID}/popup.html`);
      const row = again.locator(`#tab-scripts > li[data-script="${edited}"]`);
      await row.waitFor({ timeout: 8000 });
      assert.equal((await row.innerText()).replace(/\s+/g, " ").trim(), "Spa c Ran here: it ran when this page loaded; its rules do not reach this page's address now (they changed since, or the page changed its address): it does not run at the next load");
    } finally {
      await again.close();
      await c.close();
      await h.internal("scripts.delete", { uuid: edited });
    }
  });

  test("a script that does not parse reports a SyntaxError at its own line", T, async () => {
    const uuid = await write(script("Runs syntax", ["@match http://syntax.test/*", "@run-at document-end"], [
      "document.title = 'never';", // line 7
      "const broken = ;", // line 8
    ]));
    const page = await h.context.newPage();
    await page.goto(`http://syntax.test:${server.port}/s`, { waitUntil: "load" });
    const out = await runsOf(uuid);
    assert.notEqual(await page.title(), "never");
    await page.close();
    assert.equal(out.runs.length, 1, JSON.stringify(out));
    const run = out.runs[0];
    assert.equal(run.ok, false);
    assert.equal(run.error.name, "SyntaxError", JSON.stringify(run.error));
    assert.equal(run.error.line, 8, JSON.stringify(run.error));
    assert.equal(run.error.column, 16, JSON.stringify(run.error));
  });

  test("a script with a plain @include glob reports its runs and gets its GM functions on a page with an iframe (Chromium 156 crashed such a renderer)", T, async () => {
    const uuid = await write(script("Runs glob", ["@include http://glob.test:*/f*", "@grant GM_addStyle"], [
      "GM_addStyle('p { color: rgb(1, 2, 3); }');",
      "document.documentElement.setAttribute('data-ran-glob', typeof GM_addStyle);",
    ]));
    const page = await h.context.newPage();
    let crashed = false;
    page.on("crash", () => { crashed = true; });
    await page.goto(`http://glob.test:${server.port}/framed`, { waitUntil: "load" });
    await page.waitForFunction(() => document.documentElement.getAttribute("data-ran-glob") === "function", null, { timeout: 5000 });
    await runsOf(uuid);
    await sleep(500);
    const out = (await call("script_runs", { uuid })).structuredContent;
    const color = await page.evaluate(() => getComputedStyle(document.querySelector("p")).color);
    await page.close();
    assert.equal(crashed, false);
    assert.equal(color, "rgb(1, 2, 3)");
    // The iframe (/inner) is outside the glob: Chrome injects there too (its pattern covers the
    // host), the guard stops it, and nothing is reported from it.
    assert.deepEqual(out.runs.map((r) => new URL(r.url).pathname), ["/framed"], JSON.stringify(out.runs));
    assert.ok(out.runs.every((r) => r.ok), JSON.stringify(out.runs));
    // Not on another page of that host outside the glob (Chrome injects it, the guard stops it).
    const before = (await call("script_runs", { uuid })).structuredContent.cursor;
    const off = await h.context.newPage();
    await off.goto(`http://glob.test:${server.port}/x`, { waitUntil: "load" });
    await sleep(500);
    assert.equal(await off.evaluate(() => document.documentElement.hasAttribute("data-ran-glob")), false);
    await off.close();
    assert.deepEqual((await call("script_runs", { uuid, since: before })).structuredContent.runs, []);
  });

  // A script's console text and error messages are its own to write: a U+202E turned the rest
  // of the Runs view's line around, and a line break inside one console line read as another
  // line (a made-up error). The worker marks them as a review marks a source.
  test("the Runs view gets a script's direction characters and line breaks marked", T, async () => {
    const uuid = await write(script("Runs marked", ["@match http://runs.test/marked*"], [
      "console.log('fine\\u202Eexe.txt\\nerror (line 1): made up');",
      "throw new TypeError('bad\\u200Bthing');",
    ]));
    const page = await visit("/marked");
    await runsOf(uuid);
    await page.close();
    const { runs } = await h.internal("runs.list", { uuid });
    assert.equal(runs[0].console[0].text, "fine\u27e8U+202E\u27e9exe.txt\u27e8U+000A\u27e9error (line 1): made up");
    assert.equal(runs[0].error.message, "bad\u27e8U+200B\u27e9thing");
  });

  // Chrome delivers a message of up to 64 MiB; the channel reads at most 600 KiB. One over the
  // bound is dropped before its text is copied into the wasm, whose memory never shrinks: three
  // unproven 32 MiB messages (from a user-script world with messaging, as any script's is) once
  // grew it from 1.3 to 34.9 MB for the worker's life.
  test("a page of 40 frames spends a script's run reports in one load: the failing frame's run is still listed, and the text says what was refused", T, async () => {
    const uuid = await write(script("Runs forty", ["@match http://forty.test/*"], [
      "if (location.pathname === '/frame39') throw new Error('frame39-failed');",
    ]));
    const page = await h.context.newPage();
    await page.goto(`http://forty.test:${server.port}/forty`, { waitUntil: "load" });
    try {
      const failed = await runsOf(uuid, { errorsOnly: true }, 1, 10_000);
      assert.equal(failed.runs.length, 1, `the one failing run is listed: ${JSON.stringify(failed)}`);
      assert.equal(failed.runs[0].error.message, "frame39-failed");
      assert.match(failed.runs[0].url, /\/frame39$/);
      const all = await call("script_runs", { uuid });
      const { droppedByRateLimit, runs } = all.structuredContent;
      assert.equal(runs.length, 31, "30 runs a minute, and the failed one");
      assert.equal(droppedByRateLimit, 10);
      assert.match(all.content[0].text, /10 message\(s\) of these scripts' pages were refused for a bound \(a script's pages may send 30 run reports a minute, 30 more of runs that failed and 60 later errors, within their share of the channel\): runs or errors they held are not listed\./);
    } finally {
      await page.close();
    }
  });

  test("a message over the channel's bound is dropped without growing the worker's memory", T, async () => {
    const page = await visit("/big");
    const before = await h.workerWasmMemory();
    const provider = await h.providerPage();
    const sent = await provider.evaluate(async (url) => {
      await chrome.userScripts.configureWorld({ worldId: "big-messages", messaging: true });
      try {
        const [tab] = await chrome.tabs.query({ url });
        const [r] = await chrome.userScripts.execute({ target: { tabId: tab.id }, worldId: "big-messages", js: [{ code:
          "Promise.all([0, 1, 2].map(() => chrome.runtime.sendMessage({ lumo: 'not-a-token', v: 1, kind: 'run', pad: 'x'.repeat(32 << 20) }).then(() => 'answered', String)))" }] });
        return r.result;
      } finally {
        await chrome.userScripts.resetWorldConfiguration("big-messages");
      }
    }, `${base}/big`);
    await page.close();
    assert.deepEqual(sent, ["answered", "answered", "answered"]);
    const grown = (await h.workerWasmMemory()) - before;
    assert.ok(grown < 4 << 20, `the wasm grew by ${grown} bytes`);
    const pong = await h.lumo("ping", session);
    assert.ok(!pong?.error, JSON.stringify(pong));
  });

  // Last: the flood spends the channel's window for a minute.
  test("a looping script's flood of reports is bounded, counted, and the provider keeps answering", T, async () => {
    const uuid = await write(script("Runs flood", ["@match http://flood.test/*"], [
      "for (let i = 0; i < 3000; i++) { try { __lumoR.run(function () { console.log('spam', i); }); } catch (e) {} }",
      "for (let i = 0; i < 3000; i++) chrome.runtime.sendMessage({ lumo: 'garbage', v: 1, kind: 'run', pad: 'x'.repeat(1000) }).catch(() => {});",
      "document.documentElement.setAttribute('data-ran-flood', '1');",
    ]));
    const page = await h.context.newPage();
    await page.goto(`http://flood.test:${server.port}/x`, { waitUntil: "load" });
    await page.waitForFunction(() => document.documentElement.hasAttribute("data-ran-flood"), null, { timeout: 15000 });
    // Another script's report still lands while the first floods (each script has its share).
    const quiet = await write(script("Runs quiet", ["@match http://quiet.test/*"], ["document.documentElement.setAttribute('data-ran-quiet', '1');"]));
    const calm = await h.context.newPage();
    await calm.goto(`http://quiet.test:${server.port}/q`, { waitUntil: "load" });
    await calm.waitForFunction(() => document.documentElement.hasAttribute("data-ran-quiet"), null, { timeout: 5000 });
    const landed = await runsOf(quiet, {}, 1, 8000);
    await calm.close();
    assert.equal(landed.runs.length, 1, "a flooding script silenced another script's report");
    const t0 = Date.now();
    const pong = await h.lumo("ping", session);
    const pingMs = Date.now() - t0;
    assert.ok(!pong?.error, JSON.stringify(pong));
    assert.ok(pingMs < 3000, `ping took ${pingMs} ms during the flood`);
    // The flood's reports are still being handled: waited for until some were refused by the
    // rate window (or 10 s), then read once more with the page closed.
    for (const deadline = Date.now() + 10_000; !((await runsOf(uuid)).droppedByRateLimit > 0) && Date.now() < deadline;) await sleep(150);
    await page.close();
    const out = (await call("script_runs", { uuid })).structuredContent;
    assert.ok(out.runs.length >= 1 && out.runs.length <= 30, `runs kept: ${out.runs.length}`);
    assert.ok(out.droppedByRateLimit > 0, JSON.stringify({ n: out.runs.length, d: out.droppedByRateLimit }));
    assert.ok(out.runs.every((r) => r.uuid === uuid && r.console.length <= 1));
    // The stored ring stays within its byte bound.
    const ring = await stored(`runs/${uuid}`);
    assert.ok(JSON.stringify(ring).length <= 64 * 1024);
  });
});

// Chrome runs a spanning extension's worker in the regular profile, and chrome.storage.local is
// on disk: a run report of a page in an incognito window, stored there with the page's address
// (and the script's console and errors, which may hold it), outlived the incognito session.
describe("script_runs: a page in an incognito window leaves nothing on disk", () => {
  let env, h, server, session;
  // The shared set-up, with the provider allowed in incognito windows first.
  before(async () => {
    env = await setUp({ server: anyPathServer, incognito: true });
    ({ h, server, session } = env);
  });
  after(async () => { await env?.close(); });

  test("the run is kept in memory only, without the page's address; script_runs says so", T, async () => {
    const saved = await h.internal("scripts.save", { source: script("Runs incognito", ["@match http://incog-runs.test/*"], [
      "console.log('at', location.href);",
      "setTimeout(() => { throw new Error('later at ' + location.href); }, 50);",
    ]) });
    const uuid = saved.result?.script?.uuid;
    assert.ok(uuid, JSON.stringify(saved));
    const opener = await h.providerPage();
    const win = await opener.evaluate((u) => chrome.windows.create({ incognito: true, url: u }).then((w) => w.id), `http://incog-runs.test:${server.port}/secret-path?q=private`);
    let run;
    try {
      for (const deadline = Date.now() + 10_000; ;) {
        const out = await h.lumo("callTool", session, "script_runs", { uuid });
        run = out.structuredContent?.runs?.[0];
        if (run?.lateErrors?.length || Date.now() > deadline) break;
        await sleep(150);
      }
    } finally {
      await opener.evaluate((id) => chrome.windows.remove(id), win).catch(() => {});
    }
    assert.ok(run, "no run recorded");
    assert.equal(run.url, "(incognito page)");
    assert.equal(run.incognito, true);
    assert.match(run.lateErrors?.[0]?.message ?? "", /^later at /, JSON.stringify(run));
    const disk = JSON.stringify(await opener.evaluate(() => chrome.storage.local.get(null)));
    // (The script's own @match names the host; the path and query are the page's alone.)
    assert.ok(!disk.includes("secret-path") && !disk.includes("q=private"), "the incognito page's address is in chrome.storage.local");
    assert.ok(!disk.includes(`"runs/${uuid}"`), "the incognito run is in chrome.storage.local");
    const memory = await opener.evaluate((k) => chrome.storage.session.get(k), `runs/${uuid}`);
    assert.equal(memory[`runs/${uuid}`]?.runs?.length, 1);
    // The options page's row says where, as the run does.
    const last = await h.internal("runs.last", { uuids: [uuid] });
    assert.equal(last.last[uuid].url, "(incognito page)");
  });

  // tabs.query lists the private windows' tabs to an extension allowed there: a try by
  // address chose one and handed the agent its URL, title and content.
  test("try_script never runs in an incognito window's tab, by address or by id", T, async () => {
    const opener = await h.providerPage();
    const page = `http://incog-try.test:${server.port}/secret-try?q=private`;
    const win = await opener.evaluate((u) => chrome.windows.create({ incognito: true, url: u }).then((w) => w.id), page);
    try {
      let id;
      for (const deadline = Date.now() + 5000; !id && Date.now() < deadline; await sleep(100)) {
        id = await opener.evaluate(() => chrome.tabs.query({}).then((ts) => ts.find((t) => t.incognito && /incog-try/.test(t.url ?? ""))?.id));
      }
      assert.ok(id, "the incognito tab is listed to the extension");
      const source = script("Try incognito", ["@match http://incog-try.test/*"], ["document.title"]);
      const byUrl = await h.lumo("callTool", session, "try_script", { source, url: "http://incog-try.test/*" });
      assert.equal(byUrl.structuredContent?.error_code, "NOT_FOUND", JSON.stringify(byUrl));
      const byId = await h.lumo("callTool", session, "try_script", { source, tabId: id });
      assert.equal(byId.structuredContent?.error_code, "CANNOT_RUN", JSON.stringify(byId));
      assert.match(byId.content[0].text, /incognito window/);
      for (const r of [byUrl, byId]) assert.ok(!JSON.stringify(r).includes("secret-try"), JSON.stringify(r));
    } finally {
      await opener.evaluate((w) => chrome.windows.remove(w), win).catch(() => {});
    }
  });
});
