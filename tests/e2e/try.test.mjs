// try_script in real Chromium through the official SDK client: the agent's loop on a local page
// (a TypeError on a known line, then the patched script's value), read-only, review (the target
// tab shown; a denial runs nothing), an endless loop, the audit never holding the tried source or
// its console output, a worker stopped mid-try, and an agent's parallel tries of one page.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, before, describe, test } from "node:test";
import { setUp } from "./lib/agent.mjs";
import { HOST_ID, PROVIDER_ID } from "./lib/harness.mjs";
import { sleep, until } from "./lib/util.mjs";

const T = { timeout: 120_000 };
const SECRET = "MARKER-try-5ecret-93";

function script(lines, body) {
  return ["// ==UserScript==", "// @name Try e2e", "// @namespace lumo-e2e-try", ...lines.map((l) => `// ${l}`), "// ==/UserScript==", ...body, ""].join("\n");
}

async function anyPathServer() {
  const server = createServer((req, res) => {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    if (req.url === "/frames") res.end("<!doctype html><title>Framed</title><iframe src=/inner></iframe>");
    // A news page hiding a bank's frame (another site on the same test server).
    else if (req.url === "/news") res.end(`<!doctype html><title>News</title><iframe hidden src="http://bank.test:${req.headers.host.split(":")[1]}/widget"></iframe>`);
    else res.end("<!doctype html><title>Try page</title><p id=p>hello</p>");
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const close = () => new Promise((r) => { server.close(r); server.closeAllConnections(); });
  return { port: server.address().port, close };
}

/** The shared set-up (lib/agent.mjs: a browser with the host approved, "Allow User Scripts" on,
 *  an MCP session, a tab) with this file's page server, the tab on a try.test page. `call` is
 *  the shared tools' (on `env.session`, the session opened here). */
async function start() {
  const env = await setUp({ server: anyPathServer });
  try {
    const url = `http://try.test:${env.server.port}/page`;
    await env.tab.goto(url, { waitUntil: "load" });
    return { ...env, env, url, call: env.tools.call };
  } catch (e) {
    await env.close();
    throw e;
  }
}

describe("try_script: run once in a tab, read what happened", () => {
  let env, h, server, session, tab, url, call;
  const marked = () => tab.evaluate(() => document.documentElement.getAttribute("data-tried"));

  before(async () => {
    ({ env, h, server, session, tab, url, call } = await start());
  });
  after(async () => { await env?.close(); });

  test("the loop: a TypeError on line 8 comes back with that line and the console lines before it; patched, the value comes back", T, async () => {
    const broken = script(["@match http://try.test/*"], [
      "console.log('start', {n: 1});", // line 6
      "const el = document.querySelector('#missing');", // line 7
      "console.warn('el is', el); el.textContent = 'x';", // line 8
    ]);
    const r = await call("try_script", { source: broken, url });
    assert.equal(r.isError, false, r.content?.[0]?.text);
    const f = r.structuredContent.frames[0];
    assert.equal(f.ok, false);
    assert.equal(f.error.name, "TypeError");
    assert.equal(f.error.line, 8, JSON.stringify(f.error));
    assert.equal(f.error.column, 43, JSON.stringify(f.error)); // V8 points at the assignment's '='
    assert.deepEqual(f.console.map((c) => [c.level, c.text, c.line]), [["log", 'start {"n":1}', 6], ["warn", "el is null", 8]]);
    assert.equal(f.url, url);
    assert.equal(f.title, "Try page");
    assert.equal(f.rulesMatch, true);
    assert.equal(await marked(), null);

    const fixed = script(["@match http://other.test/*"], [
      "const el = document.querySelector('#p');",
      "await new Promise((r) => setTimeout(r, 50));",
      "document.documentElement.setAttribute('data-tried', '1');",
      "console.log('at', new Date(0), new Map([['k', 1]]), new Set([2]), /a+/g);",
      "return { text: el.textContent, self: (() => { const o = {}; o.o = o; return o; })(), fn: () => 1,",
      "  when: new Date(0), m: new Map([['k', { n: 1 }]]), s: new Set([1, 2]), re: /a+/g, u: new URL('http://x.test/p'),",
      "  me: (() => { class M { toJSON() { return this; } } const o = new M(); o.a = 1; return o; })(), key: { toJSON: (k) => 'key=' + k } };",
    ]);
    const ok = await call("try_script", { source: fixed, url: `http://try.test:${server.port}/*` });
    assert.equal(ok.isError, false, ok.content?.[0]?.text);
    const g = ok.structuredContent.frames[0];
    assert.equal(g.ok, true, JSON.stringify(g));
    // What JSON shows as {} (found by an exploratory pass: a Date, a Map read as an empty
    // object) is shown as the script's run reports show it.
    assert.deepEqual(g.value, { text: "hello", self: { o: "[Circular]" }, fn: "[function fn]",
      when: "1970-01-01T00:00:00.000Z", m: { "[Map]": [["k", { n: 1 }]] }, s: { "[Set]": [1, 2] }, re: "/a+/g", u: "http://x.test/p",
      me: { a: 1 }, key: "key=key" });
    assert.equal(g.valueTruncated, false, "a toJSON returning its own object is read once, as JSON does");
    assert.deepEqual(g.console.map((c) => c.text), ['at "1970-01-01T00:00:00.000Z" {"[Map]":[["k",1]]} {"[Set]":[2]} "/a+/g"']);
    assert.equal(g.rulesMatch, false, "its rules name other.test");
    assert.match(ok.content[0].text, /do NOT match/);
    assert.equal(await marked(), "1", "the try was seen running in the page");
    // Its await on line 7 is at the top level: fine in the try's async function, a syntax
    // error where the installed script runs. The try says so, at that line (the try passed,
    // and every page load of the installed script would have failed).
    assert.equal(g.installedSyntaxError?.line, 7, JSON.stringify(g));
    assert.match(g.installedSyntaxError.message, /await/);
    assert.match(ok.content[0].text, /installed, this source would not run: SyntaxError .* at line 7/);
    assert.equal(f.installedSyntaxError, undefined, "no await, no check");
    const inner = await call("try_script", { source: script(["@match *://*/*"], ["return (async () => { await 1; return 3; })();"]), url });
    assert.equal(inner.structuredContent.frames[0].value, 3, JSON.stringify(inner.structuredContent));
    assert.equal(inner.structuredContent.frames[0].installedSyntaxError, undefined, "an await inside a function is fine installed");
    // Nothing was stored or registered.
    assert.equal((await call("status")).structuredContent.scriptCount, 0);
  });

  test("a tab named by its id: the try runs in that tab; an id no tab has is NOT_FOUND, with Chrome's word", T, async () => {
    const page = await h.context.newPage();
    await page.goto(`chrome-extension://${PROVIDER_ID}/manifest.json`);
    const tabId = await page.evaluate(async (u) => (await chrome.tabs.query({})).find((t) => t.url === u)?.id, url);
    await page.close();
    assert.equal(typeof tabId, "number");
    const src = script(["@match *://*/*"], ["document.documentElement.setAttribute('data-tried', 'by-id');", "return location.href;"]);
    const r = await call("try_script", { source: src, tabId });
    assert.equal(r.isError, false, r.content?.[0]?.text);
    assert.equal(r.structuredContent.frames[0].value, url);
    assert.equal(r.structuredContent.frames[0].title, "Try page");
    assert.equal(await marked(), "by-id", "the try was seen running in that tab");
    const none = await call("try_script", { source: src, tabId: 987654321 });
    assert.equal(none.structuredContent.error_code, "NOT_FOUND", JSON.stringify(none.structuredContent));
    assert.match(none.structuredContent.message, /no open tab has id 987654321 \(tabs\.get: No tab with id: 987654321/);
  });

  test("two tries at once in one tab each get their own console output, all of it", T, async () => {
    const src = (who) => script(["@match http://try.test/*"], [
      `console.log('${who}1');`,
      "await new Promise((r) => setTimeout(r, 300));",
      `console.log('${who}2');`,
      `return '${who}';`,
    ]);
    const [a, b] = await Promise.all([call("try_script", { source: src("A"), url }), call("try_script", { source: src("B"), url })]);
    for (const [r, who] of [[a, "A"], [b, "B"]]) {
      assert.equal(r.isError, false, r.content?.[0]?.text);
      const f = r.structuredContent.frames[0];
      assert.deepEqual(f.console.map((c) => c.text), [`${who}1`, `${who}2`], `${who}'s console: ${JSON.stringify(f.console)}`);
      assert.equal(f.value, who);
    }
  });

  test("a huge log and a huge value are bounded; an endless loop times out and the provider still answers", T, async () => {
    const flood = script(["@match *://*/*"], ["for (let i = 0; i < 100000; i++) console.log('x'.repeat(1000));", "return 'y'.repeat(10 * 1024 * 1024);"]);
    const r = await call("try_script", { source: flood, url });
    assert.equal(r.isError, false, JSON.stringify(r).slice(0, 2000));
    const f = r.structuredContent.frames[0];
    assert.ok(f.console.length <= 200 && f.consoleDropped > 0, `${f.console.length} kept, ${f.consoleDropped} dropped`);
    assert.equal(f.valueTruncated, true);
    assert.ok(JSON.stringify(r).length < 512 * 1024, `result is ${JSON.stringify(r).length} bytes`);

    const loop = script(["@match *://*/*"], ["while (true) {}"]);
    const t0 = Date.now();
    const hung = await call("try_script", { source: loop, url, timeoutMs: 500 });
    assert.equal(hung.isError, true);
    assert.equal(hung.structuredContent.error_code, "TIMEOUT");
    assert.match(hung.structuredContent.message, /may be hanging/);
    assert.ok(Date.now() - t0 < 10_000);
    assert.equal((await call("status")).isError, false, "the provider answers after a hung try");
    await tab.close(); // the hung page
    tab = await h.context.newPage();
    await tab.goto(url, { waitUntil: "load" });
  });

  test("a page whose title is 5 million characters cannot make a try's report unreadable", T, async () => {
    // The page owns its title; the report carries it, so it is cut in the page, before Chrome
    // hands the answer to the worker (which refuses an answer over 4 MiB, unread).
    const old = await tab.title();
    await tab.evaluate(() => { document.title = "t".repeat(5_000_000); });
    try {
      const r = await call("try_script", { source: script(["@match *://*/*"], ["return 42;"]), url });
      assert.equal(r.isError, false, JSON.stringify(r).slice(0, 2000));
      const f = r.structuredContent.frames[0];
      assert.equal(f.value, 42);
      assert.ok(f.title.length <= 301 && f.title.startsWith("ttt"), `${f.title.length} characters`);
    } finally {
      await tab.evaluate((t) => { document.title = t; }, old);
    }
  });

  test("refusals: read-only (403), a chrome:// tab, a URL no tab shows", T, async () => {
    const src = script(["@match *://*/*"], ["document.documentElement.setAttribute('data-tried', 'ro');"]);
    await h.internal("policy.setSwitch", { name: "writes", value: false });
    try {
      const ro = await call("try_script", { source: src, url });
      assert.equal(ro.isError, true);
      assert.equal(ro.structuredContent.error_code, "WRITE_DISABLED");
      assert.equal(ro.structuredContent.status, 403);
    } finally {
      await h.internal("policy.setSwitch", { name: "writes", value: true });
    }
    session = await h.lumo("connect", PROVIDER_ID); // the switch closed the port
    assert.notEqual(await marked(), "ro");
    const none = await call("try_script", { source: src, url: "http://nowhere.test/x" });
    assert.equal(none.structuredContent.error_code, "NOT_FOUND");
    assert.match(none.structuredContent.message, /nowhere\.test/);
    const settings = await h.context.newPage();
    await settings.goto("chrome://version/");
    const cr = await call("try_script", { source: src, url: "chrome://version/" });
    await settings.close();
    assert.equal(cr.isError, true);
    assert.ok(["CANNOT_RUN", "NOT_FOUND"].includes(cr.structuredContent.error_code), JSON.stringify(cr.structuredContent));
  });

  test("review shows the target tab and the source; a denial runs nothing; the audit holds no source or console text", T, async () => {
    await h.internal("policy.setSwitch", { name: "review", value: true });
    try {
      const src = script(["@match *://*/*"], [`console.log('${SECRET}');`, "document.documentElement.setAttribute('data-tried', 'denied');"]);
      const pending = h.lumo("callTool", session, "try_script", { source: src, url });
      let review;
      for (const deadline = Date.now() + 5000; !review && Date.now() < deadline; await sleep(50)) {
        review = (await h.internal("state.get")).reviews.find((r) => r.tool === "try_script");
      }
      assert.ok(review, "a review waits");
      const effects = review.effects.join("\n");
      assert.ok(effects.includes(url), effects);
      assert.ok(effects.includes("Try page"), effects);
      assert.ok(review.diff.includes(SECRET), "the source is shown");
      // What the user reads in the popup: the tab's address and title, and the source; denied there.
      const popup = await h.context.newPage();
      await popup.goto(`chrome-extension://${PROVIDER_ID}/popup.html`);
      const item = popup.locator("#reviews > li.review").filter({ hasText: "Run \"Try e2e\" once now" });
      await item.waitFor({ timeout: 8000 });
      const shown = await item.innerText();
      assert.ok(shown.includes(url) && shown.includes("Try page"), `the popup names the tab: ${shown}`);
      assert.ok(shown.includes(`console.log('${SECRET}');`), `the popup shows the source: ${shown}`);
      await sleep(900); // a new review's buttons take clicks after 800 ms
      await item.getByRole("button", { name: "Deny", exact: true }).click();
      await popup.close();
      const denied = await pending;
      assert.equal(denied.structuredContent.error_code, "USER_REJECTED");
      assert.notEqual(await marked(), "denied", "a denied try ran");
      // Approved: it runs, and its console output comes back.
      const again = h.lumo("callTool", session, "try_script", { source: src, url });
      let second;
      for (const deadline = Date.now() + 5000; !second && Date.now() < deadline; await sleep(50)) {
        second = (await h.internal("state.get")).reviews.find((r) => r.tool === "try_script");
      }
      await h.internal("reviews.decide", { review: second.id, approve: true });
      const ran = await again;
      assert.equal(ran.structuredContent.frames[0].console[0].text, SECRET);
      assert.equal(await marked(), "denied");
    } finally {
      await h.internal("policy.setSwitch", { name: "review", value: false });
    }
    const audit = await h.internal("audit.list");
    const tries = audit.entries.filter((e) => e.tool === "try_script");
    assert.ok(tries.some((e) => e.result === "USER_REJECTED") && tries.some((e) => e.result === "ok"), JSON.stringify(tries));
    assert.ok(!JSON.stringify(audit).includes(SECRET), "the secret reached the audit");
    const local = await (await h.providerPage()).evaluate(() => chrome.storage.local.get(null));
    assert.ok(!JSON.stringify(local).includes(SECRET), "the secret reached storage");
  });

  // A tester's: the review said "including frames of other sites it embeds" while the page hid
  // a bank's frame, and the approved try read the bank's page.
  test("an allFrames try's review names the other sites whose frames it would run in", T, async () => {
    const news = await h.context.newPage();
    await news.goto(`http://news.test:${server.port}/news`, { waitUntil: "load" });
    await h.internal("policy.setSwitch", { name: "review", value: true });
    try {
      const src = script(["@match http://news.test/*"], ["return location.host;"]);
      const pending = h.lumo("callTool", session, "try_script", { source: src, url: `http://news.test:${server.port}/news`, allFrames: true });
      let review;
      for (const deadline = Date.now() + 5000; !review && Date.now() < deadline; await sleep(50)) {
        review = (await h.internal("state.get")).reviews.find((r) => r.tool === "try_script");
      }
      assert.ok(review, "a review waits");
      assert.match(review.effects[0], /including those of other sites it embeds now: bank\.test$/, review.effects[0]);
      await h.internal("reviews.decide", { review: review.id, approve: false });
      assert.equal((await pending).structuredContent.error_code, "USER_REJECTED");
    } finally {
      await h.internal("policy.setSwitch", { name: "review", value: false });
      await news.close();
    }
  });

  test("allFrames runs in every frame; a promise that never settles and a syntax error are said as such", T, async () => {
    const framed = await h.context.newPage();
    await framed.goto(`http://try.test:${server.port}/frames`, { waitUntil: "load" });
    try {
      const where = script(["@match *://*/*"], ["return location.pathname;"]);
      const r = await call("try_script", { source: where, url: `http://try.test:${server.port}/frames`, allFrames: true });
      assert.equal(r.isError, false, r.content?.[0]?.text);
      assert.deepEqual(r.structuredContent.frames.map((f) => f.value).sort(), ["/frames", "/inner"]);
    } finally {
      await framed.close();
    }
    const never = await call("try_script", { source: script(["@match *://*/*"], ["console.log('waiting');", "await new Promise(() => {});"]), url, timeoutMs: 300 });
    assert.equal(never.isError, false, never.content?.[0]?.text);
    const f = never.structuredContent.frames[0];
    assert.equal(f.timedOut, true);
    assert.equal(f.ok, false);
    assert.equal(f.console[0].text, "waiting");
    // A syntax error is the script's error, at its own line and column.
    const bad = await call("try_script", { source: script(["@match *://*/*"], ["console.log('never');", "return (;"]), url });
    assert.equal(bad.isError, false, bad.content?.[0]?.text);
    const b = bad.structuredContent.frames[0];
    assert.equal(b.ok, false, JSON.stringify(b));
    assert.notEqual(b.finished, false, JSON.stringify(b));
    assert.equal(b.error.name, "SyntaxError", JSON.stringify(b));
    assert.equal(b.error.line, 7, JSON.stringify(b.error));
    assert.equal(b.error.column, 9, JSON.stringify(b.error));
    assert.deepEqual(b.console, []);
    assert.match(bad.content[0].text, /SyntaxError/);
  });

  test("tried code cannot call the provider: the try world has no messaging", T, async () => {
    const reach = script(["@match *://*/*"], [
      "const out = { sendMessage: typeof chrome !== 'undefined' && typeof chrome.runtime?.sendMessage };",
      "try { out.answer = await chrome.runtime.sendMessage({ channel: 'lumo:internal', op: 'policy.setSwitch', name: 'review', value: true }); } catch (e) { out.error = String(e && e.message || e); }",
      "return out;",
    ]);
    const r = await call("try_script", { source: reach, url });
    assert.equal(r.isError, false, r.content?.[0]?.text);
    const v = r.structuredContent.frames[0].value;
    assert.ok(v && v.answer === undefined, `the tried code got an answer from the provider: ${JSON.stringify(v)}`);
    assert.equal((await h.internal("state.get")).policy.reviewWrites, false, "the tried code turned review on");
  });

  // A try world outlives the try: raw code tried first could hook a built-in there and read
  // the GM values a stored script is tried with (its user's API key). A stored script is tried
  // in a world only its own revisions run in.
  test("raw code tried before cannot read the values a stored script is tried with", T, async () => {
    const stored = script(["@match http://try.test/*", "@grant GM_getValue", "@grant GM_setValue"], [
      "if (!GM_getValue('apiKey')) GM_setValue('apiKey', 'sk-live-5ECRET');",
      "console.log('has key', GM_getValue('apiKey') === 'sk-live-5ECRET');",
    ]);
    const w = await call("write_script", { source: stored });
    assert.equal(w.isError, false, w.content?.[0]?.text);
    const uuid = w.structuredContent.script.uuid;
    try {
      // The installed script runs on the page and stores its value.
      let has;
      for (const deadline = Date.now() + 8000; !has && Date.now() < deadline; await sleep(200)) {
        await tab.reload({ waitUntil: "load" });
        const r = await call("try_script", { uuid, url });
        has = r.structuredContent?.frames?.[0]?.console?.some((c) => c.text === "has key true");
      }
      assert.ok(has, "the stored script's try was given its value");
      const hook = await call("try_script", { source: script(["@match *://*/*"], [
        "const keep = (f) => function (...a) { try { (globalThis.__cap ??= []).push(JSON.stringify(a)); } catch (e) {} return f.apply(this, a); };",
        "Object.fromEntries = keep(Object.fromEntries); JSON.parse = keep(JSON.parse); Object.assign = keep(Object.assign);",
        "return 'hooked';",
      ]), url });
      assert.equal(hook.structuredContent.frames[0].value, "hooked", JSON.stringify(hook.structuredContent));
      const again = await call("try_script", { uuid, url });
      assert.ok(again.structuredContent.frames[0].console.some((c) => c.text === "has key true"), JSON.stringify(again.structuredContent));
      const read = await call("try_script", { source: script(["@match *://*/*"], ["return globalThis.__cap ?? null;"]), url });
      const captured = read.structuredContent.frames[0].value;
      assert.ok(!String(captured).includes("5ECRET"), `raw code read the stored script's value: ${captured}`);
    } finally {
      await call("delete_script", { uuid });
    }
  });

  test("a worker stopped mid-try gives a clear error, and the next try works", T, async () => {
    const slow = script(["@match *://*/*"], ["document.documentElement.setAttribute('data-slow', '1');", "await new Promise((r) => setTimeout(r, 3000));", "return 'late';"]);
    const pending = h.lumo("callTool", session, "try_script", { source: slow, url, timeoutMs: 8000 });
    // Stopped while the code runs in the page (seen there), with 3 s of its wait left.
    await tab.waitForFunction(() => document.documentElement.hasAttribute("data-slow"), null, { timeout: 2500 });
    await h.stopProviderWorker();
    const r = await pending;
    assert.ok(r?.error || r?.isError, `an interrupted try must not look like a result: ${JSON.stringify(r)}`);
    const again = await call("try_script", { source: script(["@match *://*/*"], ["return 2;"]), url });
    assert.equal(again.isError, false, again.content?.[0]?.text);
    assert.equal(again.structuredContent.frames[0].value, 2);
    // The stopped try's code ran in the page, and its record was stored before it ran: the
    // next worker records it as interrupted (no try runs code without its entry).
    const { entries } = await h.internal("audit.list");
    const stopped = entries.filter((e) => e.tool === "try_script" && e.result === "INTERRUPTED");
    assert.equal(stopped.length, 1, JSON.stringify(entries.slice(0, 4)));
    assert.equal(stopped[0].caller, HOST_ID);
    assert.equal(entries.filter((e) => e.tool === "try_script" && e.result === "ok" && e.at > stopped[0].at).length, 1, "the try after it");
  });
});

// Chrome gives a page at most 10 user-script worlds; a try's world past them is the default
// one, shared by everything else past them. An agent can fill them itself (each stored script it
// tries adds a world), then run raw code there that hooks built-ins, then try a stored script
// whose values that code would read. Its own browser: the tries here count toward the rate limit.
// Each its own browser: the rate limit (30 writes a minute, a try among them) holds the suite
// above to what it has.
describe("try_script: what the installed script would do", () => {
  let env, h, tab, url, call;
  before(async () => {
    ({ env, h, tab, url, call } = await start());
  });
  after(async () => { await env?.close(); });

  // What a try reports about eval, new Function and a <script> put in the page must be what the
  // installed script gets (its own world's env::WORLD_CSP): a try under the extension's policy
  // said EvalError, and the page never saw its <script>, where the installed script works.
  test("a try runs under the installed script's policy: eval, new Function and a <script> put in the page run, tried raw or stored", T, async () => {
    const body = [
      "const out = {};",
      "try { out.evaluated = eval('6 * 7'); } catch (e) { out.evaluated = e.name; }",
      "try { out.compiled = new Function('a', 'return a + 1')(1); } catch (e) { out.compiled = e.name; }",
      "const s = document.createElement('script');",
      "s.textContent = \"document.documentElement.setAttribute('data-try-injected', String(window.pageVar))\";",
      "document.documentElement.appendChild(s); s.remove();",
      "out.injected = document.documentElement.getAttribute('data-try-injected');",
      "document.documentElement.removeAttribute('data-try-injected');",
      "return out;",
    ];
    const want = { evaluated: 42, compiled: 2, injected: "page" };
    await tab.evaluate(() => { window.pageVar = "page"; });
    const raw = await call("try_script", { source: script(["@match http://try.test/*"], body), url });
    assert.equal(raw.isError, false, raw.content?.[0]?.text);
    assert.deepEqual(raw.structuredContent.frames[0].value, want, JSON.stringify(raw.structuredContent.frames[0]));
    // A stored script is tried in a world of its own (lumo-try-<uuid>), without a configuration
    // of its own either: it takes the default world's.
    const w = await call("write_script", { source: script(["@match http://elsewhere.test/*"], body) });
    assert.equal(w.isError, false, w.content?.[0]?.text);
    const uuid = w.structuredContent.script.uuid;
    try {
      const stored = await call("try_script", { uuid, url });
      assert.equal(stored.isError, false, stored.content?.[0]?.text);
      assert.deepEqual(stored.structuredContent.frames[0].value, want, JSON.stringify(stored.structuredContent.frames[0]));
    } finally {
      await h.internal("scripts.delete", { uuid });
    }
  });

  // Real scripts do their work in callbacks: a try that reported only the top-level code said
  // "ok" while the script's timer or listener threw on every page. With watchMs the try goes on
  // listening, and says which line threw; an earlier try's timer still throwing in that world
  // is not this script's error.
  test("watchMs: errors thrown by the script's timers, listeners and promises after it returned come back with their lines", T, async () => {
    await tab.reload({ waitUntil: "load" });
    const old = await call("try_script", { source: script(["@match http://try.test/*"], [
      "setInterval(() => { throw new Error('an earlier try'); }, 50);",
    ]), url });
    assert.equal(old.isError, false, old.content?.[0]?.text);
    const src = script(["@match http://try.test/*"], [
      "setTimeout(() => { console.log('tick'); null.y; }, 50);", // line 6
      "document.body.addEventListener('click', () => { undefinedFn(); });", // line 7
      "setTimeout(() => document.body.click(), 100);", // line 8
      "setTimeout(() => { Promise.reject(new RangeError('late rejection')); }, 150);", // line 9
      "return 'started';",
    ]);
    const watched = await call("try_script", { source: src, url, watchMs: 1000 });
    assert.equal(watched.isError, false, watched.content?.[0]?.text);
    const f = watched.structuredContent.frames[0];
    assert.equal(f.ok, true, JSON.stringify(f));
    assert.equal(f.value, "started");
    assert.equal(f.watchedMs, 1000);
    assert.deepEqual(f.lateErrors.map((e) => [e.rejection, e.name, e.line]), [
      [false, "TypeError", 6], [false, "ReferenceError", 7], [true, "RangeError", 9],
    ], JSON.stringify(f.lateErrors));
    assert.equal(f.lateErrors[2].message, "late rejection");
    assert.deepEqual(f.console.map((c) => [c.text, c.line]), [["tick", 6]]);
    assert.match(watched.content[0].text, /later, uncaught "TypeError": .* at line 6/);
    // Without watchMs the try answers when the top-level code is done, and says nothing of later.
    const plain = await call("try_script", { source: src, url });
    const p = plain.structuredContent.frames[0];
    assert.equal(p.value, "started");
    assert.equal(p.lateErrors, undefined, JSON.stringify(p));
    assert.deepEqual(p.console, []);
    await tab.reload({ waitUntil: "load" });
  });

  // A tester's: with watchMs the try said "no uncaught error" where the installed script failed:
  // a rejection whose reason is no Error (Promise.reject(42), a thrown object) was dropped, and
  // the listeners began only once the top-level code was done, so a timer that threw while it
  // awaited was missed.
  test("watchMs: a rejection with any reason, and an error thrown while the code awaits, come back", T, async () => {
    await tab.reload({ waitUntil: "load" });
    const watched = await call("try_script", { source: script(["@match http://try.test/*"], [
      "Promise.reject(42);", // line 6
      "setTimeout(() => { throw new Error('while awaiting'); }, 20);", // line 7
      "await new Promise((r) => setTimeout(r, 150));", // line 8
      "(async () => { throw { code: 7 }; })();", // line 9
      "const handled = Promise.reject(new Error('handled later')); await new Promise((r) => setTimeout(r, 30)); await handled.catch(() => {});", // line 10
      "Promise.reject({ message: 'no name' });", // line 11
      "return 'done';",
    ]), url, watchMs: 300 });
    assert.equal(watched.isError, false, watched.content?.[0]?.text);
    const f = watched.structuredContent.frames[0];
    assert.equal(f.value, "done", JSON.stringify(f));
    // A rejection is named as script_runs names an installed script's; one handled later (a
    // reviewer's) is not an error.
    assert.deepEqual(f.lateErrors.map((e) => [e.rejection, e.name, e.message, e.line]), [
      [true, "rejection", "42", null], [false, "Error", "while awaiting", 7], [true, "rejection", '{"code":7}', null], [true, "rejection", "no name", null],
    ], JSON.stringify(f.lateErrors));
    assert.doesNotMatch(watched.content[0].text, /no uncaught error/);
    // A thrown object at the top level is named for what it is, and console.log(undefined) says so.
    const obj = await call("try_script", { source: script(["@match http://try.test/*"], [
      "console.log(undefined, new TypeError('shown'));", "throw { code: 5 };",
    ]), url });
    const g = obj.structuredContent.frames[0];
    // (No stack, so no line: the error is said without one.)
    assert.deepEqual([g.error?.name, g.error?.message, g.error?.line], ["thrown value", '{"code":5}', null], JSON.stringify(g));
    assert.deepEqual(g.console.map((c) => c.text), ['undefined {"name":"TypeError","message":"shown"}']);
    await tab.reload({ waitUntil: "load" });
  });

  // W: a script that navigates during watchMs (a "next page" clicker) lost its whole report:
  // "no report came back". The watch now ends when the page is left, and the report says so.
  test("watchMs: a page the script navigates away from ends the watch early, and the report comes back", T, async () => {
    await tab.goto(url, { waitUntil: "load" });
    const r = await call("try_script", { source: script(["@match http://try.test/*"], [
      "setTimeout(() => { throw new Error('before leaving'); }, 50);", // line 6
      "setTimeout(() => { location.href = '/next'; }, 300);", // line 7
      "console.log('clicking next');",
      "return 'started';",
    ]), url, watchMs: 5000 });
    assert.equal(r.isError, false, r.content?.[0]?.text);
    const f = r.structuredContent.frames[0];
    assert.equal(f.value, "started", JSON.stringify(f));
    assert.equal(f.leftPage, true, JSON.stringify(f));
    assert.ok(f.watchedMs >= 250 && f.watchedMs < 5000, JSON.stringify(f));
    assert.deepEqual(f.lateErrors.map((e) => [e.message, e.line]), [["before leaving", 6]]);
    assert.deepEqual(f.console.map((c) => c.text), ["clicking next"]);
    assert.match(r.content[0].text, /the page was left \d+ ms into the watch/);
    await tab.waitForURL(/\/next$/);
    await tab.goto(url, { waitUntil: "load" });
    // A pagehide the page (or the script) dispatches itself is not the page being left (R8).
    const faked = await call("try_script", { source: script(["@match http://try.test/*"], [
      "setTimeout(() => window.dispatchEvent(new Event('pagehide')), 50);",
      "setTimeout(() => { throw new Error('after the fake'); }, 150);", // line 7
    ]), url, watchMs: 400 });
    const g = faked.structuredContent.frames[0];
    assert.equal(g.leftPage, undefined, JSON.stringify(g));
    assert.equal(g.watchedMs, 400, JSON.stringify(g));
    assert.deepEqual(g.lateErrors.map((e) => [e.message, e.line]), [["after the fake", 7]]);
    await tab.reload({ waitUntil: "load" });
  });

  // The tried code shares the kit's world: a script that takes over the world's timers or
  // listeners (a "timer hooker", a wrapper) must not leave the try waiting for a timer that
  // never fires, which lost its whole report to the provider's TIMEOUT. The kit's timers and
  // listeners are the ones the world had before the script ran.
  test("watchMs and timeoutMs hold when the script replaces setTimeout and the window's listener functions", T, async () => {
    await tab.reload({ waitUntil: "load" });
    const hooked = [
      "const st = setTimeout;",
      "window.setTimeout = () => 0; window.clearTimeout = () => {};",
      "EventTarget.prototype.addEventListener = function () {}; EventTarget.prototype.removeEventListener = function () {};",
      "window.addEventListener = () => {}; window.removeEventListener = () => {};",
    ];
    const started = Date.now();
    const watched = await call("try_script", { source: script(["@match http://try.test/*"], [
      ...hooked,
      "st(() => { null.z; }, 50);", // line 10
      "return 'hooked';",
    ]), url, watchMs: 500, timeoutMs: 1000 });
    assert.equal(watched.isError, false, watched.content?.[0]?.text);
    const f = watched.structuredContent.frames[0];
    assert.equal(f.value, "hooked", JSON.stringify(f));
    assert.equal(f.watchedMs, 500);
    assert.deepEqual(f.lateErrors.map((e) => [e.name, e.line]), [["TypeError", 10]], JSON.stringify(f));
    // The timeout too: a returned promise that never settles is cut at timeoutMs. (On a fresh
    // page: the world, and what the try before did to it, lasts as long as the document.)
    await tab.reload({ waitUntil: "load" });
    const stuck = await call("try_script", { source: script(["@match http://try.test/*"], [
      ...hooked, "await new Promise(() => {});",
    ]), url, watchMs: 500, timeoutMs: 500 });
    assert.equal(stuck.isError, false, stuck.content?.[0]?.text);
    const g = stuck.structuredContent.frames[0];
    assert.equal(g.timedOut, true, JSON.stringify(g));
    // A try whose top-level code timed out does not watch.
    assert.equal(g.watchedMs, undefined, JSON.stringify(g));
    assert.ok(Date.now() - started < 8000, `took ${Date.now() - started} ms`);
    await tab.reload({ waitUntil: "load" });
  });
});

describe("try_script past Chrome's 10 worlds on a page", () => {
  let env, h, server, tab, call;
  const named = (name, lines, body) => script(lines, body).replace("// @name Try e2e", `// @name ${name}`);
  const save = async (source) => {
    const r = await h.internal("scripts.save", { source });
    assert.equal(r?.ok, true, JSON.stringify(r));
    return r.result.script.uuid;
  };

  before(async () => {
    ({ env, h, server, tab, call } = await start());
  });
  after(async () => { await env?.close(); });

  test("raw code tried in the shared world cannot read the values a stored script would be tried with there", { timeout: 180_000 }, async () => {
    const url = `http://worlds.test:${server.port}/page`;
    // The stored script runs on the page (its own world, the first of the 10) and stores its key.
    const secret = await save(named("Worlds secret", ["@match http://worlds.test/*", "@grant GM_getValue", "@grant GM_setValue"], [
      "if (!GM_getValue('apiKey')) GM_setValue('apiKey', 'sk-live-W0RLDS');",
      "console.log('has key', GM_getValue('apiKey') === 'sk-live-W0RLDS');",
    ]));
    const pp = await h.providerPage();
    let stored = false;
    for (const deadline = Date.now() + 10_000; !stored && Date.now() < deadline; await sleep(200)) {
      await tab.goto(url, { waitUntil: "load" });
      await sleep(300);
      stored = JSON.stringify(await pp.evaluate((k) => chrome.storage.local.get(k), `values/${secret}`)).includes("W0RLDS");
    }
    assert.ok(stored, "the installed script stored its value");
    // Nine stored scripts for another site: each one tried here adds a world, up to 10.
    const fillers = [];
    for (let i = 0; i < 9; i++) fillers.push(await save(named(`Worlds filler ${i}`, ["@match http://elsewhere.test/*"], [`return ${i};`])));
    await tab.goto(url, { waitUntil: "load" });
    await sleep(300);
    for (const uuid of fillers) {
      const r = await call("try_script", { uuid, url });
      assert.equal(r.isError, false, r.content?.[0]?.text);
    }
    // The 11th world: raw code, in the shared world, hooks what a try's GM functions call.
    const hook = await call("try_script", { source: script(["@match *://*/*"], [
      "const keep = (f) => function (...a) { try { (globalThis.__cap ??= []).push(JSON.stringify(a)); } catch (e) {} return f.apply(this, a); };",
      "Object.fromEntries = keep(Object.fromEntries); JSON.parse = keep(JSON.parse); Object.assign = keep(Object.assign);",
      "return 'hooked';",
    ]), url });
    assert.equal(hook.structuredContent?.frames?.[0]?.value, "hooked", JSON.stringify(hook));
    // That shared world (the hook above is there: Object.fromEntries is not native) has the
    // policy of each script's own world too (the default world's configuration,
    // env::WORLD_CSP): eval runs there, as in the scripts' own worlds.
    const evaluated = await call("try_script", { source: script(["@match *://*/*"], [
      "const hooked = !String(Object.fromEntries).includes('[native code]');",
      "try { return [eval('6 * 7'), hooked]; } catch (e) { return [e.name, hooked]; }",
    ]), url });
    assert.deepEqual(evaluated.structuredContent?.frames?.[0]?.value, [42, true], JSON.stringify(evaluated));
    // The stored script tried now lands in that world too: it must run nothing there.
    const tried = await call("try_script", { uuid: secret, url });
    const said = JSON.stringify(tried);
    assert.equal(tried.isError, true, said);
    assert.match(tried.content[0].text, /shared with other code/, said);
    assert.ok(!said.includes("has key"), `the stored script ran: ${said}`);
    const read = await call("try_script", { source: script(["@match *://*/*"], ["return globalThis.__cap ?? null;"]), url });
    const captured = JSON.stringify(read.structuredContent?.frames?.[0]?.value ?? null);
    assert.ok(!captured.includes("W0RLDS"), `raw code read the stored script's value: ${captured}`);
    // After a reload the worlds are fresh: the stored script's try runs, with its value.
    await tab.reload({ waitUntil: "load" });
    const fresh = await call("try_script", { uuid: secret, url });
    assert.equal(fresh.isError, false, fresh.content?.[0]?.text);
    assert.ok(fresh.structuredContent.frames[0].console.some((c) => c.text === "has key true"), JSON.stringify(fresh.structuredContent));
  });
});

describe("try_script: an agent's parallel tries", () => {
  let env, h, url, call;
  before(async () => {
    ({ env, h, url, call } = await start());
  });
  after(async () => { await env?.close(); });

  test("stored scripts tried at once by the page's address run one at a time, and a waiting try holds no record and no world", T, async () => {
    const uuids = [];
    for (let i = 0; i < 5; i++) {
      const src = script([`@name Waits ${i}`, "@match http://elsewhere.test/*"], ["await new Promise((r) => setTimeout(r, 400));", `return 'S${i}';`]).replace("// @name Try e2e\n", "");
      const saved = await h.internal("scripts.save", { source: src });
      assert.ok(saved.result?.script?.uuid, JSON.stringify(saved));
      uuids.push(saved.result.script.uuid);
    }
    const page = await h.context.newPage();
    await page.goto(`chrome-extension://${PROVIDER_ID}/manifest.json`);
    // Watched from a page of the provider while the tries run: the tries' records in progress
    // and the try worlds Chrome holds.
    await page.evaluate(() => {
      const seen = (globalThis.seen = { records: 0, worlds: 0, on: true });
      (async () => {
        while (seen.on) {
          const [got, worlds] = await Promise.all([chrome.storage.local.get("audit/pendingTries"), chrome.userScripts.getWorldConfigurations()]);
          seen.records = Math.max(seen.records, Object.keys(got["audit/pendingTries"] ?? {}).length);
          seen.worlds = Math.max(seen.worlds, worlds.filter((w) => w.worldId?.startsWith("lumo-try")).length);
          await new Promise((r) => setTimeout(r, 20));
        }
      })();
    });
    const tries = await Promise.all(uuids.map((uuid) => call("try_script", { uuid, url })));
    const seen = await page.evaluate(() => { globalThis.seen.on = false; return globalThis.seen; });
    await page.close();
    tries.forEach((r, i) => {
      assert.equal(r.isError, false, r.content?.[0]?.text);
      assert.equal(r.structuredContent.frames[0].value, `S${i}`);
    });
    // One at a time: each try's record is finished, and its world given back, before the next
    // one's are asked for (Chrome applies the calls in order).
    assert.equal(seen.records, 1, "records in progress at once");
    assert.equal(seen.worlds, 1, "try worlds configured at once");
    for (const uuid of uuids) await h.internal("scripts.delete", { uuid });
  });

  // MCP: a receiver should stop a cancelled request. One waiting for the try before it in its
  // tab has not begun: it must never run, later, in the user's page, with no one reading it.
  test("a try its caller cancels while it waits for the one before it in that tab never runs", T, async () => {
    const tab = await h.context.newPage();
    await tab.goto(url, { waitUntil: "load" });
    const p = await h.lumo("rawOpen", PROVIDER_ID, "lumo:mcp");
    const send = (m) => h.lumo("rawSend", p, m);
    const replies = () => h.lumo("rawMessages", p);
    const tryMsg = (id, body) => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "try_script", arguments: { source: script([], body), url } } });
    try {
      await send({ jsonrpc: "2.0", id: "init", method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "0" } } });
      await until(replies, (m) => m.some((x) => x.id === "init"), 5000);
      await send({ jsonrpc: "2.0", method: "notifications/initialized" });
      await send(tryMsg("a", ["await new Promise((r) => setTimeout(r, 2000));", "return 'a';"]));
      await sleep(300);
      await send(tryMsg("b", ["document.documentElement.setAttribute('data-cancelled-try', 'ran');", "return 'b';"]));
      await sleep(300);
      await send({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: "b", reason: "gave up" } });
      const a = await until(replies, (m) => m.some((x) => x.id === "a"), 10_000);
      assert.equal(a.find((x) => x.id === "a")?.result?.isError, false, JSON.stringify(a));
      await sleep(1500);
      assert.equal(await tab.evaluate(() => document.documentElement.getAttribute("data-cancelled-try")), null, "the cancelled try ran in the page");
      assert.ok(!(await replies()).some((x) => x.id === "b"), "a cancelled request gets no reply");
      const entries = (await h.internal("audit.list")).entries.filter((e) => e.tool === "try_script");
      assert.equal(entries[0]?.result, "CANCELLED", JSON.stringify(entries.slice(0, 2)));
    } finally {
      await h.lumo("rawClose", p).catch(() => {});
      await tab.close();
    }
  });
});
