// The GM API as real scripts see it in Chrome: scripts are written through the MCP tools (official
// SDK client in the test host), pages are served locally under any host name, and what a script
// could call is read from what it wrote into the page (it has no other way out).
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, before, beforeEach, describe, test } from "node:test";
import { setUp } from "./lib/agent.mjs";
import { PROVIDER_ID } from "./lib/harness.mjs";
import { sleep, until } from "./lib/util.mjs";

const T = { timeout: 120_000 };

/** A userscript whose body runs after its metadata block. */
function script(name, lines, body) {
  return [
    "// ==UserScript==",
    `// @name GM ${name}`,
    "// @namespace lumo-e2e-gm",
    ...lines.map((l) => `// ${l}`),
    "// ==/UserScript==",
    body,
    "",
  ].join("\n");
}

/** Every path: a page whose own JavaScript sets a global, with a paragraph to style. */
async function pageServer() {
  const hits = [], bodies = [];
  const held = { open: 0, peak: 0 };
  const meets = new Map();
  const server = createServer((req, res) => {
    hits.push(`${req.headers.host}${req.url}`);
    // Answered after 1.5 s; how many are open at once (`held.peak`) is what the server saw of
    // the provider's requests in flight.
    if (req.url.startsWith("/held")) {
      held.open++;
      held.peak = Math.max(held.peak, held.open);
      let open = true;
      const end = () => { if (open) { open = false; held.open--; } };
      res.on("close", end);
      setTimeout(() => { end(); res.writeHead(200, { "content-type": "text/plain" }); res.end(req.url); }, 1500);
      return;
    }
    // Echoes what it received: the content type and the body's bytes in hex.
    if (req.url.startsWith("/echo")) {
      const parts = [];
      req.on("data", (c) => parts.push(c));
      req.on("end", () => {
        const body = Buffer.concat(parts);
        bodies.push({ path: req.url, type: req.headers["content-type"] ?? null, hex: body.toString("hex") });
        res.writeHead(200, { "content-type": "text/plain" });
        res.end(body.toString("hex"));
      });
      return;
    }
    // 3 chunks of 10000 bytes, 700 ms apart, with their Content-Length.
    if (req.url.startsWith("/chunks")) {
      res.writeHead(200, { "content-type": "application/octet-stream", "content-length": "30000" });
      let n = 0;
      const next = () => { res.write(Buffer.alloc(10000, 65)); if (++n < 3) setTimeout(next, 700); else res.end(); };
      next();
      return;
    }
    // `n` bytes of "a" in chunks of 256 KiB, 25 ms apart (so many such answers arrive at once),
    // with their Content-Length unless `unsized`; a client that goes away before the end is
    // recorded ("closed /big…").
    if (req.url.startsWith("/big")) {
      const q = new URL(req.url, "http://x").searchParams;
      const n = Number(q.get("n"));
      res.on("close", () => { if (!res.writableEnded) hits.push(`closed ${req.url}`); });
      res.writeHead(200, { "content-type": "application/octet-stream", ...(q.has("unsized") ? {} : { "content-length": String(n) }) });
      let sent = 0;
      const next = () => {
        if (res.destroyed) return;
        const k = Math.min(256 * 1024, n - sent);
        sent += k;
        if (sent >= n) res.end(Buffer.alloc(k, 97)); else { res.write(Buffer.alloc(k, 97)); setTimeout(next, 25); }
      };
      next();
      return;
    }
    // Answers after 4 s unless the client goes away first (an aborted fetch closes it).
    if (req.url.startsWith("/slow")) {
      res.on("close", () => { if (!res.writableEnded) hits.push(`closed ${req.url} ${Date.now()}`); });
      setTimeout(() => {
        if (res.destroyed) return;
        hits.push(`answered ${req.url} ${Date.now()}`);
        res.writeHead(200, { "content-type": "text/plain" });
        res.end("slow");
      }, 4000);
      return;
    }
    // A login: a cookie set by a redirect's answer, then what the next hop sent of it.
    if (req.url.startsWith("/login")) {
      res.writeHead(302, { "set-cookie": "sid=from-redirect; Path=/", location: "/whoami" });
      res.end();
      return;
    }
    // Requests that meet: each is held until `n` requests of key `k` are open at once, then all
    // are answered, the last to come first and the others 300 ms after it; one left alone for
    // 1.5 s is answered alone. The answer says which, with what the request carried: its body,
    // its User-Agent if a script set one, its Origin, and any header the provider's own
    // marker could have left. With `to`, the answer is a 303 to `${to}-${body}` instead.
    if (req.url.startsWith("/meet")) {
      const q = new URL(req.url, "http://x").searchParams;
      const parts = [];
      req.on("data", (c) => parts.push(c));
      req.on("end", () => {
        const body = Buffer.concat(parts).toString();
        const ua = req.headers["user-agent"] ?? "";
        const answer = (together) => {
          hits.push(`meet ${q.get("k")} ${body} ${together ? "together" : "alone"}`);
          if (q.has("to")) { res.writeHead(303, { location: `${q.get("to")}-${body}` }); res.end(); return; }
          res.writeHead(200, { "content-type": "application/json" });
          res.end(JSON.stringify({ together, body, ua: /^Script\//.test(ua) ? ua : "browser's", origin: req.headers.origin ?? null,
            marker: Object.keys(req.headers).filter((h) => h.startsWith("x-lumo")) }));
        };
        const open = meets.get(q.get("k")) ?? [];
        meets.set(q.get("k"), open);
        open.push(answer);
        if (open.length === Number(q.get("n"))) {
          const all = open.splice(0);
          all.pop()(true);
          setTimeout(() => all.forEach((a) => a(true)), 300);
        } else {
          setTimeout(() => { const i = open.indexOf(answer); if (i >= 0) { open.splice(i, 1); answer(false); } }, 1500);
        }
      });
      return;
    }
    if (req.url.startsWith("/whoami")) {
      hits.push(`whoami ${req.url} ${req.headers.cookie ?? "no cookie"}`);
      res.writeHead(200, { "content-type": "text/plain" });
      res.end(req.headers.cookie ?? "no cookie");
      return;
    }
    // A redirect to `to` with `status` (the method is in `hits` too, for what the hop kept).
    if (req.url.startsWith("/redirect")) {
      const q = new URL(req.url, "http://x").searchParams;
      hits.push(`${req.method} ${req.headers.host}${req.url}`);
      res.writeHead(Number(q.get("status")), { location: q.get("to") });
      res.end();
      return;
    }
    // The credentials a request carried.
    if (req.url.startsWith("/auth")) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ host: req.headers.host.split(":")[0], authorization: req.headers.authorization ?? null }));
      return;
    }
    // What a request carried of the headers scripts set that fetch does not send.
    if (req.url.startsWith("/sent")) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ referer: req.headers.referer ?? null, cookie: req.headers.cookie ?? null,
        ua: /^Script\//.test(req.headers["user-agent"] ?? "") ? req.headers["user-agent"] : "browser's", x: req.headers["x-ok"] ?? null,
        origin: req.headers.origin ?? null }));
      return;
    }
    if (req.url.startsWith("/api")) {
      res.writeHead(200, { "content-type": "application/json", "x-test": "yes", "access-control-allow-origin": "*" });
      res.end(JSON.stringify({ method: req.method, host: req.headers.host.split(":")[0], path: req.url, h: req.headers["x-script"] ?? null }));
      return;
    }
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end("<!doctype html><title>page</title><script>window.pageVar = 'page';</script><p id=p>text</p>");
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const close = () => new Promise((r) => { server.close(r); server.closeAllConnections(); });
  return { port: server.address().port, hits, bodies, held, close };
}

describe("gm: the GM functions a script is given", () => {
  let env, h, server, tab, call, ok;
  // The agent's 30 writes a minute are more than this file's tests make in one minute: a
  // refused write waits the seconds the refusal names, then goes again (the limit is the
  // guardrails tests' subject, not this file's).
  const write = async (name, lines, body) => {
    for (;;) {
      const res = await call("write_script", { source: script(name, lines, body) });
      const wait = res.isError && res.structuredContent?.error_code === "RATE_LIMITED"
        && /retry in (\d+) s/.exec(res.content?.[0]?.text ?? "");
      if (!wait) {
        assert.equal(res.isError, false, `write_script failed: ${res.content?.[0]?.text}`);
        return res.structuredContent.script;
      }
      await sleep((Number(wait[1]) + 1) * 1000);
    }
  };
  const url = (host, path = "/") => `http://${host}:${server.port}${path}`;
  const attributes = () => tab.evaluate(() => Object.fromEntries([...document.documentElement.attributes]
    .filter((a) => a.name.startsWith("data-gm-")).map((a) => [a.name.slice(8), a.value])));
  /** Loads `u` and returns the `data-gm-*` attributes the scripts left on <html> 400 ms after. */
  const load = async (u) => {
    await tab.goto(u, { waitUntil: "load" });
    await sleep(400);
    return attributes();
  };
  /**
   * Loads `u` once and returns the `data-gm-*` attributes as soon as the script has set
   * `data-gm-<key>` (within `timeout` ms). Not a reload per try: a second load would send the
   * script's requests and warnings again, which the callers count.
   */
  const loaded = async (u, key, timeout) => {
    await tab.goto(u, { waitUntil: "load" });
    await tab.waitForFunction((k) => document.documentElement.hasAttribute(k), `data-gm-${key}`, { timeout });
    return attributes();
  };

  /** What the provider's storage holds under `key`, read from its own page. */
  const stored = async (key) => {
    const page = await h.context.newPage();
    try {
      await page.goto(`chrome-extension://${PROVIDER_ID}/options.html`);
      return await page.evaluate(async (k) => (await chrome.storage.local.get(k))[k], key);
    } finally {
      await page.close();
    }
  };
  /** The code Chrome has registered for `uuid`. */
  const registeredCode = async (uuid) => {
    const page = await h.context.newPage();
    try {
      await page.goto(`chrome-extension://${PROVIDER_ID}/options.html`);
      return await page.evaluate(async (id) => (await chrome.userScripts.getScripts({ ids: [id] }))[0]?.js?.[0]?.code ?? "", uuid);
    } finally {
      await page.close();
    }
  };

  // The shared set-up (lib/agent.mjs): the test host approved, "Allow User Scripts" on, the
  // provider seen ready, an MCP session, a tab; this file's own page server.
  before(async () => {
    env = await setUp({ server: pageServer });
    ({ h, server, tab } = env);
    ({ call, ok } = env.tools);
  });
  beforeEach(async () => {
    if (!env) return;
    // Cleared by the user's own hands (not rate-limited), so the agent's 30 writes a minute are
    // the tests' own.
    for (const s of (await ok("list_scripts", { limit: 100 })).scripts) await h.internal("scripts.delete", { uuid: s.uuid });
  });
  after(async () => { await env?.close(); });

  test("GM_addStyle changes the computed style, also from document-start before <html> exists", T, async () => {
    await write("style", ["@match http://style.test/*", "@grant GM_addStyle"],
      "const s = GM_addStyle('#p { color: rgb(1, 2, 3) }');\n"
      + "document.documentElement.setAttribute('data-gm-style', s instanceof HTMLStyleElement ? 'element' : typeof s);");
    await write("early", ["@match http://early.test/*", "@grant GM.addStyle", "@run-at document-start"],
      // At document-start the root may not exist yet: the attribute is set when it does.
      "GM.addStyle('#p { background-color: rgb(4, 5, 6) }').then((s) => {\n"
      + "  const mark = () => document.documentElement.setAttribute('data-gm-early', String(s.isConnected));\n"
      + "  document.documentElement ? mark() : addEventListener('DOMContentLoaded', mark);\n"
      + "});");
    assert.deepEqual(await load(url("style.test")), { style: "element" });
    assert.equal(await tab.evaluate(() => getComputedStyle(document.getElementById("p")).color), "rgb(1, 2, 3)");
    // The same page without a matching script: the colour came from the script, not the page.
    await load(url("plain.test"));
    assert.notEqual(await tab.evaluate(() => getComputedStyle(document.getElementById("p")).color), "rgb(1, 2, 3)");
    assert.deepEqual(await load(url("early.test")), { early: "true" });
    assert.equal(await tab.evaluate(() => getComputedStyle(document.getElementById("p")).backgroundColor), "rgb(4, 5, 6)");
  });

  test("@grant none (and no @grant) gives no GM function; a granted one is seen by no other script and not by the page", T, async () => {
    // What the script can name, and what is a global of its world (none: Chrome may put a
    // script in a world shared with others, where a global would be theirs too).
    const probe = (tag) => "const seen = Object.entries({ GM_addStyle: typeof GM_addStyle, GM_info: typeof GM_info, GM: typeof GM,"
      + " unsafeWindow: typeof unsafeWindow, GM_addElement: typeof GM_addElement, GM_log: typeof GM_log, GM_getValue: typeof GM_getValue })"
      + ".filter(([, t]) => t !== 'undefined').map(([n]) => n);\n"
      + "const globals = ['GM_addStyle', 'GM_info', 'GM'].filter((n) => n in globalThis);\n"
      + `document.documentElement.setAttribute('data-gm-${tag}', (seen.join(',') || 'nothing') + '|' + globals.join(','));`;
    await write("none", ["@match http://iso.test/*", "@grant none"], probe("none"));
    await write("nogrant", ["@match http://iso.test/*"], probe("nogrant"));
    // GM_info and unsafeWindow come with any grant but none, named or not (as in every manager).
    await write("styler", ["@match http://iso.test/*", "@grant GM_addStyle"], probe("styler"));
    assert.deepEqual(await load(url("iso.test")), { none: "nothing|", nogrant: "nothing|", styler: "GM_addStyle,GM_info,GM,unsafeWindow|" });
    // The page's own JavaScript (MAIN world) sees none of it.
    assert.deepEqual(await tab.evaluate(() => ["GM_addStyle", "GM_info", "GM", "unsafeWindow"].map((n) => typeof window[n])),
      ["undefined", "undefined", "undefined", "undefined"]);
  });

  test("GM_info describes the script; a script's own definitions of GM names still compile and win", T, async () => {
    await write("info", ["@match http://info.test/*", "@version 1.2.3", "@grant GM_info", "@grant GM.info"],
      "document.documentElement.setAttribute('data-gm-info', JSON.stringify([GM_info.script.name, GM_info.script.version,"
      + " GM_info.scriptHandler, GM.info === GM_info, GM_info.script.grant, GM_info.scriptMetaStr.includes('@version 1.2.3')]));");
    // A common polyfill shape: the script declares the name itself, at top level, with let.
    await write("own", ["@match http://info.test/*", "@grant GM_addStyle"],
      "let GM_addStyle = () => 'mine';\ndocument.documentElement.setAttribute('data-gm-own', GM_addStyle());");
    const got = await load(url("info.test"));
    assert.deepEqual(JSON.parse(got.info), ["GM info", "1.2.3", "Lumo Userscripts", true, ["GM_info", "GM.info"], true]);
    assert.equal(got.own, "mine");
  });

  test("GM_info.platform comes from the worker (not the tab's emulation) and GM_info.userAgent is the world's own copy", T, async () => {
    await write("platform", ["@match http://platform.test/*", "@grant GM.info"],
      "const p = GM_info.platform;\n"
      + "document.documentElement.setAttribute('data-gm-platform', JSON.stringify([p && p.os, p && p.arch, p && p.browserName,"
      + " p && p.browserVersion, GM.info.platform === p, Object.isFrozen(p), GM_info.userAgent]));");
    // A hostile page replaces navigator.userAgent in its own world first: the script's world
    // has its own.
    const real = await tab.evaluate(() => navigator.userAgent);
    const hostile = await (async () => {
      const ours = (u) => u.hostname === "platform.test";
      await tab.route(ours, (r) => r.fulfill({ contentType: "text/html",
        body: "<!doctype html><script>Object.defineProperty(Navigator.prototype, 'userAgent', { get: () => 'evil' });</script><p>x</p>" }));
      try {
        const got = await load(url("platform.test"));
        assert.equal(await tab.evaluate(() => navigator.userAgent), "evil", "the page's own world was changed");
        return got;
      } finally {
        await tab.unroute(ours);
      }
    })();
    const [os, arch, name, version, same, frozen, ua] = JSON.parse(hostile.platform);
    assert.equal(ua, real, "userAgent is the browser's");
    assert.equal(os, { linux: "linux", darwin: "mac", win32: "win" }[process.platform]);
    assert.equal(arch, { x64: "x86-64", arm64: "arm64" }[process.arch]);
    assert.ok(name.length > 0, "a browserName");
    const major = /Chrom(?:e|ium)\/(\d+)/.exec(real)[1];
    assert.match(version, new RegExp(`^${major}\\.\\d+\\.\\d+\\.\\d+$`), "the full version, not the reduced UA's");
    assert.equal(same, true);
    assert.equal(frozen, true);
    // The tab's devtools emulate another system: GM_info.platform still says this one.
    const cdp = await tab.context().newCDPSession(tab);
    await cdp.send("Emulation.setUserAgentOverride", { userAgent: "Mozilla/5.0 (Windows NT 10.0; Win64; x64) Fake/1", platform: "Win32",
      userAgentMetadata: { brands: [{ brand: "Fake", version: "1" }], fullVersionList: [{ brand: "Fake", version: "1.0.0.0" }],
        platform: "Windows", platformVersion: "10.0.0", architecture: "arm", model: "", mobile: false } });
    try {
      const [eos, earch, ename, eversion, , , eua] = JSON.parse((await load(url("platform.test"))).platform);
      assert.deepEqual([eos, earch, ename, eversion], [os, arch, name, version]);
      assert.equal(eua, "Mozilla/5.0 (Windows NT 10.0; Win64; x64) Fake/1", "userAgent is what the tab says, as navigator.userAgent in a content script");
    } finally {
      await cdp.detach();
    }
  });

  test("window.onurlchange: the page's pushState, replaceState, hash changes and back reach a granted script, never the page", T, async () => {
    await write("urlchange", ["@match http://spa.test/*", "@grant window.onurlchange"],
      "const log = [];\n"
      + "const show = () => document.documentElement.setAttribute('data-gm-urls', JSON.stringify(log));\n"
      + "log.push('feature:' + (window.onurlchange === null));\n"
      + "window.onurlchange = (e) => { log.push('on:' + new URL(e.url).pathname + new URL(e.url).hash); show(); };\n"
      // A bare call, as scripts write it; `once` is kept.
      + "addEventListener('urlchange', (e) => { log.push('l:' + e.type + ':' + (e.url === location.href)); show(); });\n"
      + "window.addEventListener('urlchange', () => { log.push('once'); show(); }, { once: true });\n"
      // Other types still reach the window as before.
      + "addEventListener('lumo-ping', () => { log.push('ping'); show(); });\n"
      + "show();");
    await write("nourl", ["@match http://spa.test/*", "@grant GM_addStyle"],
      "document.documentElement.setAttribute('data-gm-nourl', String(window.onurlchange));");
    const first = await load(url("spa.test", "/start"));
    assert.deepEqual(JSON.parse(first.urls), ["feature:true"]);
    assert.equal(first.nourl, "undefined", "a script that does not grant it reads it absent");
    // The page's own JavaScript navigates as a single-page app does, and listens for (and fakes)
    // `urlchange` on its window.
    await tab.evaluate(async () => {
      window.heard = 0;
      window.addEventListener("urlchange", () => window.heard++);
      const tick = () => new Promise((r) => setTimeout(r, 50));
      history.pushState({}, "", "/a");
      await tick();
      history.pushState({}, "", "/a");
      await tick();
      location.hash = "#h";
      await tick();
      history.replaceState(null, "", "/b");
      await tick();
      window.dispatchEvent(new Event("urlchange"));
      window.dispatchEvent(new Event("lumo-ping"));
      history.back();
      await tick();
    });
    // The back traversal goes through the browser process: waited for; then 300 ms more, for
    // an extra event (the page's own, a second "once") to show.
    await tab.waitForFunction(() => JSON.parse(document.documentElement.getAttribute("data-gm-urls") ?? "[]").filter((l) => l.startsWith("on:")).length >= 5, null, { timeout: 5000 })
      .catch(() => {});
    await sleep(300);
    const log = JSON.parse(await tab.evaluate(() => document.documentElement.getAttribute("data-gm-urls")));
    const on = log.filter((l) => l.startsWith("on:"));
    assert.deepEqual(on, ["on:/a", "on:/a", "on:/a#h", "on:/b", "on:/a"], JSON.stringify(log));
    assert.equal(log.filter((l) => l === "l:urlchange:true").length, 5, JSON.stringify(log));
    assert.equal(log.filter((l) => l === "once").length, 1);
    assert.equal(log.filter((l) => l === "ping").length, 1);
    assert.equal(await tab.evaluate(() => window.heard), 1, "the page heard only its own event");
  });

  test("unsafeWindow is the page's DOM but not the page's JavaScript, as validate_script says", T, async () => {
    const v = await ok("validate_script", { source: script("uw", ["@match http://uw.test/*", "@grant unsafeWindow"], "") });
    assert.ok(v.diagnostics.some((d) => /NOT the page's JavaScript/.test(d.message) && /MAIN world/.test(d.message)),
      JSON.stringify(v.diagnostics));
    await write("uw", ["@match http://uw.test/*", "@grant unsafeWindow"],
      "document.documentElement.setAttribute('data-gm-uw', JSON.stringify([unsafeWindow.document === document,"
      + " typeof unsafeWindow.pageVar, !!unsafeWindow.document.getElementById('p')]));");
    const got = await load(url("uw.test"));
    assert.deepEqual(JSON.parse(got.uw), [true, "undefined", true]);
  });

  test("GM_addElement, GM_addStyle and GM_log run in the page's DOM and console", T, async () => {
    // addElement and addStyle share their code (put in once): both granted, both work.
    await write("el", ["@match http://el.test/*", "@grant GM_addElement", "@grant GM_addStyle", "@grant GM_log"],
      "const e = GM_addElement(document.body, 'span', { id: 'added', textContent: 'hi', 'data-x': '1' });\n"
      + "GM_addStyle('#added { color: rgb(1, 2, 3) }');\n"
      + "GM_log('logged', 42);\n"
      + "document.documentElement.setAttribute('data-gm-el', e.id);");
    const logs = [];
    const onLog = (m) => logs.push(m.text());
    tab.on("console", onLog);
    try {
      assert.deepEqual(await load(url("el.test")), { el: "added" });
      assert.deepEqual(await tab.evaluate(() => { const s = document.getElementById("added"); return [s.parentNode === document.body, s.textContent, s.dataset.x, getComputedStyle(s).color]; }),
        [true, "hi", "1", "rgb(1, 2, 3)"]);
      assert.ok(logs.some((t) => t.includes("[GM el]") && t.includes("logged") && t.includes("42")), JSON.stringify(logs));
    } finally {
      tab.off("console", onLog);
    }
  });

  test("the options page, list_scripts and validate_script show grants and @connect hosts", T, async () => {
    const s = await write("asks", ["@match http://asks.test/*", "@grant GM_addStyle", "@connect api.example.com", "@connect *",
      "@description Styles the page\u202E, and asks the API"], "");
    const listed = (await ok("list_scripts", { limit: 100 })).scripts.find((x) => x.uuid === s.uuid);
    assert.deepEqual(listed.grants, ["GM_addStyle"]);
    assert.deepEqual(listed.connects, ["api.example.com", "*"]);
    const v = await ok("validate_script", { source: script("asks2", ["@match http://asks.test/*", "@connect *", "@grant GM_nosuch"], "") });
    assert.ok(v.diagnostics.some((d) => /any site/.test(d.message)), JSON.stringify(v.diagnostics));
    assert.ok(v.diagnostics.some((d) => /GM_nosuch: no such API/.test(d.message)), JSON.stringify(v.diagnostics));
    // The options page shows them next to the script.
    const page = await h.context.newPage();
    try {
      await page.goto(`chrome-extension://${PROVIDER_ID}/options.html`);
      const text = await page.getByLabel("What GM asks asks for").innerText({ timeout: 10_000 });
      assert.match(text, /@grant GM_addStyle/);
      assert.match(text, /@connect api\.example\.com/);
      assert.match(text, /@connect \* \(any site on the internet\)/);
      // Its description, with the direction character marked as a review shows it.
      assert.equal(await page.getByLabel("Description of GM asks").innerText(), "Styles the page⟨U+202E⟩, and asks the API");
      // In the column whose heading says it holds them, not only where the script runs.
      assert.equal(await page.getByRole("columnheader", { name: "Runs on · asks for" }).count(), 1);
    } finally {
      await page.close();
    }
  });
  test("values: GM_getValue answers at document-start, values persist across reload and worker restart, a script reads only its own", T, async () => {
    const counter = await write("counter", ["@match http://values.test/*", "@grant GM_getValue", "@grant GM_setValue", "@run-at document-start"],
      "const n = GM_getValue('n', 0);\nGM_setValue('n', n + 1);\n"
      + "const mark = () => document.documentElement.setAttribute('data-gm-n', String(n));\n"
      + "document.documentElement ? mark() : addEventListener('DOMContentLoaded', mark);");
    // Another script on the same page, asking for every value it can see and for the counter's key.
    await write("other", ["@match http://values.test/*", "@grant GM_getValue", "@grant GM_listValues"],
      "document.documentElement.setAttribute('data-gm-other', JSON.stringify([GM_listValues(), GM_getValue('n', 'none')]));");
    const seenAfter = async (n) => {
      // Stored, and in the registered code the next page load starts with.
      assert.equal(await until(() => stored(`values/${counter.uuid}`), (v) => v?.n === String(n), 5000).then((v) => v?.n), String(n));
      assert.ok((await until(() => registeredCode(counter.uuid), (c) => c.includes(`[["n","${n}"]]`), 5000)).includes(`[["n","${n}"]]`));
    };
    assert.deepEqual(await load(url("values.test")), { n: "0", other: JSON.stringify([[], "none"]) });
    await seenAfter(1);
    assert.deepEqual(await load(url("values.test")), { n: "1", other: JSON.stringify([[], "none"]) });
    await seenAfter(2);
    await h.stopProviderWorker();
    // The worker is stopped: the page still starts with the value, and its change wakes the worker.
    assert.equal((await load(url("values.test"))).n, "2");
    await seenAfter(3);
    // The page's own JavaScript reaches neither the scripts' worlds nor the channel.
    assert.deepEqual(await tab.evaluate((id) => {
      let sent;
      try { chrome.runtime.sendMessage(id, { lumo: "x", v: 1, kind: "gm", op: "values.set", items: [["n", "999"]] }); sent = "sent"; } catch (e) { sent = "threw"; }
      return [typeof window.__lumoWorld, typeof window.GM_setValue, typeof globalThis.chrome?.runtime?.sendMessage === "function" ? sent : "no sendMessage"];
    }, PROVIDER_ID), ["undefined", "undefined", "no sendMessage"]);
    await sleep(300);
    assert.equal((await stored(`values/${counter.uuid}`)).n, "3");
    // Deleted with the script: the values stay in the trash with it, and leave when it is purged.
    await ok("delete_script", { uuid: counter.uuid });
    assert.equal((await stored(`values/${counter.uuid}`))?.n, "3");
    await h.internal("trash.purge", { uuids: [counter.uuid] });
    assert.equal(await stored(`values/${counter.uuid}`), undefined);
  });

  // The value shapes scripts rely on, as Violentmonkey's gm-values/gm-api give them: falsy
  // values are values (a default is for a missing key only), the plural forms take an array or
  // an object of defaults, and GM_setValue returns nothing while GM.setValue is a promise.
  // Fails if any of these reads otherwise.
  // Setting `undefined` (or a function, which JSON leaves out) deletes the key, in the page and
  // in storage, as GM_deleteValue does: fails if either is stored as something.
  test("values: falsy values, defaults, and GM_getValues/GM_setValues/GM_deleteValues in array and object forms", T, async () => {
    const s = await write("shapes", ["@match http://shapes.test/*", "@grant GM_setValue", "@grant GM_getValue", "@grant GM_getValues",
      "@grant GM_setValues", "@grant GM_deleteValues", "@grant GM_listValues", "@grant GM.setValue", "@grant GM.listValues"],
      "const ret = GM_setValue('n', 0);\n"
      + "GM_setValue('f', false); GM_setValue('z', null); GM_setValue('s', ''); GM_setValue('o', { a: [1, { b: true }] });\n"
      + "GM_setValues({ x: 1, y: 'two' });\n"
      + "const got = [GM_getValue('n', 5), GM_getValue('f', true), GM_getValue('z', 'd'), GM_getValue('s', 'd'), GM_getValue('o'),\n"
      + "  GM_getValue('missing') === undefined, GM_getValue('missing', 'd')];\n"
      + "const arr = GM_getValues(['x', 'y', 'nope']), obj = GM_getValues({ x: 0, nope: 'dflt' });\n"
      + "GM_deleteValues(['x', 'y']);\n"
      + "GM_setValue('u', 1); GM_setValue('fn', 2); GM_setValue('u', undefined); GM_setValue('fn', () => 1); got.push(GM_getValue('u', 'gone'));\n"
      + "const cyc = {}; cyc.self = cyc; try { GM_setValue('c', cyc); got.push('stored'); } catch (e) { got.push(e.name); }\n"
      + "const p = GM.setValue('p', 1);\n"
      + "p.then(async (pv) => document.documentElement.setAttribute('data-gm-shapes', JSON.stringify({ ret: ret === undefined, got, arr, obj,\n"
      + "  list: GM_listValues().sort(), promise: p instanceof Promise, pv: pv === undefined, glist: (await GM.listValues()).sort() })));");
    const got = await loaded(url("shapes.test"), "shapes", 5000);
    assert.deepEqual(JSON.parse(got.shapes), {
      ret: true, got: [0, false, null, "", { a: [1, { b: true }] }, true, "d", "gone", "TypeError"],
      arr: { x: 1, y: "two" }, obj: { x: 1, nope: "dflt" },
      list: ["f", "n", "o", "p", "s", "z"], promise: true, pv: true, glist: ["f", "n", "o", "p", "s", "z"],
    });
    const kept = await until(() => stored(`values/${s.uuid}`), (v) => v?.p !== undefined, 5000);
    assert.deepEqual(Object.keys(kept ?? {}).sort(), ["f", "n", "o", "p", "s", "z"], JSON.stringify(kept));
  });

  test("values: a key named __proto__ is a key like any other, also on the next page load", T, async () => {
    const s = await write("proto", ["@match http://proto.test/*", "@grant GM_getValue", "@grant GM_setValue", "@grant GM_listValues"],
      "document.documentElement.setAttribute('data-gm-proto', JSON.stringify([GM_getValue('__proto__', 'none'), GM_listValues()]));\n"
      + "GM_setValue('__proto__', 'kept');");
    assert.deepEqual(await load(url("proto.test")), { proto: JSON.stringify(["none", []]) });
    // Read in the provider's page: an own key named __proto__ does not survive the trip to
    // the test process.
    const storedProto = async () => {
      const page = await h.context.newPage();
      try {
        await page.goto(`chrome-extension://${PROVIDER_ID}/options.html`);
        return await page.evaluate(async (k) => { const o = (await chrome.storage.local.get(k))[k]; return o && Object.hasOwn(o, "__proto__") ? o["__proto__"] : JSON.stringify(o ?? null) + " " + Object.getOwnPropertyNames(o ?? {}).join(","); }, `values/${s.uuid}`);
      } finally {
        await page.close();
      }
    };
    assert.equal(await until(storedProto, (v) => v === JSON.stringify("kept"), 5000), JSON.stringify("kept"));
    await until(() => registeredCode(s.uuid), (c) => c.includes('"__proto__"'), 5000);
    // The next page load starts with it: the snapshot in the registered code kept the key.
    assert.deepEqual(await load(url("proto.test")), { proto: JSON.stringify(["kept", ["__proto__"]]) });
  });

  // The script's source runs in the world the runtime made, after it: it may hook built-ins
  // and Object.prototype before its GM calls. Before, the runtime built each message with
  // Object.assign (hooked, or an inherited `lumo` setter) and a plain object (an inherited
  // toJSON as Chrome serializes it): the script got its own token, valid for its values and
  // its @connect hosts after the script was fixed.
  test("a script that hooks built-ins before its GM calls never sees its token, and its calls and run report still work", T, async () => {
    const s = await write("hook", ["@match http://hook.test/*", "@grant GM_getValue", "@grant GM_setValue"],
      "const seen = [];\n"
      + "const grab = (v) => { if (typeof v === 'string' && v.length > 16) seen.push(v); };\n"
      + "Object.defineProperty(Object.prototype, 'lumo', { set(v) { grab(v); Object.defineProperty(this, 'lumo', { value: v, writable: true, enumerable: true, configurable: true }); }, configurable: true });\n"
      + "Object.defineProperty(Object.prototype, 'toJSON', { value: function () { try { const d = Object.getOwnPropertyDescriptor(this, 'lumo'); grab(d && d.value); } catch (e) {} return this; }, writable: true, configurable: true });\n"
      + "const assign = Object.assign; Object.assign = function (...a) { for (const o of a) { try { grab(o && Object.getOwnPropertyDescriptor(o, 'lumo')?.value); } catch (e) {} } return assign.apply(this, a); };\n"
      + "GM_setValue('k', 'v1');\n"
      // Chrome serializes a message when it is sent: the GM call's at once, the run report's as
      // the script's first pass ends.
      + "setTimeout(() => document.documentElement.setAttribute('data-gm-hook', String(seen.length)), 100);");
    assert.deepEqual(await loaded(url("hook.test"), "hook", 5000), { hook: "0" });
    assert.equal(await until(() => stored(`values/${s.uuid}`), (v) => v?.k === JSON.stringify("v1"), 5000).then((v) => v?.k), JSON.stringify("v1"));
    const runs = await until(async () => (await call("script_runs", { uuid: s.uuid })).structuredContent.runs, (r) => r.length >= 1, 5000);
    assert.ok(runs.length >= 1 && runs.every((r) => r.ok), JSON.stringify(runs));
  });

  test("values: GM.* promise forms, listeners, and a flood of GM_setValue is one bounded message while the provider stays responsive", T, async () => {
    await write("promise", ["@match http://promise.test/*", "@grant GM.setValue", "@grant GM.getValue", "@grant GM.deleteValue", "@grant GM_addValueChangeListener"],
      "const heard = [];\nGM_addValueChangeListener('p', (k, o, n, remote) => heard.push([k, o ?? null, n ?? null, remote]));\n"
      + "GM.setValue('p', { a: 1 }).then(() => GM.getValue('p')).then(async (v) => {\n"
      + "  await GM.deleteValue('p');\n"
      + "  document.documentElement.setAttribute('data-gm-promise', JSON.stringify([v, await GM.getValue('p', 'gone'), heard]));\n"
      + "});");
    const flood = await write("flood", ["@match http://flood.test/*", "@grant GM_setValue", "@grant GM_getValue"],
      "for (let i = 0; i < 100000; i++) GM_setValue('same', i);\n"
      + "let err = '';\ntry { for (let i = 0; i < 5000; i++) GM_setValue('k' + i, 'x'.repeat(100)); } catch (e) { err = e.message; }\n"
      + "document.documentElement.setAttribute('data-gm-flood', JSON.stringify([GM_getValue('same'), err]));");
    const p = await loaded(url("promise.test"), "promise", 10000);
    assert.deepEqual(JSON.parse(p.promise), [{ a: 1 }, "gone", [["p", null, { a: 1 }, false], ["p", { a: 1 }, null, false]]]);
    const started = Date.now();
    const f = await load(url("flood.test"));
    const [last, err] = JSON.parse(f.flood);
    assert.equal(last, 99999);
    assert.match(err, /over the limit of 1000; nothing was changed/);
    // The provider answers its host at once, and stored the last value of the loop with the
    // keys that fit, in one batch.
    const t0 = Date.now();
    await ok("list_scripts", { limit: 5 });
    assert.ok(Date.now() - t0 < 2000, `list_scripts took ${Date.now() - t0} ms after the flood`);
    const v = await until(() => stored(`values/${flood.uuid}`), (x) => x?.same === "99999", 5000);
    assert.equal(v?.same, "99999");
    assert.equal(Object.keys(v).length, 1000);
    console.log(`# flood page + store: ${Date.now() - started} ms`);
  });
  test("values a page starts with count toward the script's bounds at its first change", T, async () => {
    // The page counts the bytes and keys it holds only when it first changes one (not as it
    // starts): a page that begins with 1,000 keys and adds one must still be refused at once.
    const s = await write("tally", ["@match http://tally.test/*", "@grant GM_setValue", "@grant GM_getValue", "@grant GM_deleteValue"],
      "let out;\nif (!GM_getValue('k0')) { for (let i = 0; i < 1000; i++) GM_setValue('k' + i, '1'); out = 'filled'; }\n"
      + "else { try { GM_setValue('k0', '2'); GM_setValue('new', 1); out = 'accepted'; } catch (e) { out = e.message; }\n"
      + "  try { GM_deleteValue('k1'); GM_setValue('new', 1); out += ' | then ' + GM_getValue('new'); } catch (e) { out += ' | ' + e.message; } }\n"
      + "document.documentElement.setAttribute('data-gm-tally', out);");
    assert.deepEqual(await loaded(url("tally.test"), "tally", 10000), { tally: "filled" });
    await until(() => registeredCode(s.uuid), (c) => c.includes('"k999"'), 10000);
    const { tally } = await loaded(url("tally.test"), "tally", 10000);
    assert.match(tally, /^GM_setValue refused: this script would hold 1001 keys, over the limit of 1000; nothing was changed \| then 1$/);
  });

  // A script (an agent may have written it) hoards values to fill chrome.storage.local, so the
  // user could no longer turn a script off or undo. A change that grows the values stops below
  // the agents' share, as Chrome counts the bytes (a `<` is `\u003C` to it: 40,000 of them
  // are 240 KB, which a count of characters took for 40 KB); it is refused whole and the
  // script told why.
  test("values: a change that would take the storage past the agents' share is refused and says why; with room, it is taken", T, async () => {
    // Refused, the page's copy reads what is stored again (R13: the refused value was read
    // back for seconds, as if kept).
    const s = await write("hoard", ["@match http://hoard.test/*", "@grant GM.setValue", "@grant GM_getValue"],
      "GM.setValue('big', '<'.repeat(40000)).then(() => 'stored', (e) => e.message + ' | ' + GM_getValue('big', 'none'))\n"
      + "  .then((out) => document.documentElement.setAttribute('data-gm-hoard', out));");
    const page = await h.context.newPage();
    await page.goto(`chrome-extension://${PROVIDER_ID}/options.html`);
    try {
      // Filled to 100 KB below the share (10 MiB less the user's 1 MiB and the audit's 1 MiB).
      await page.evaluate(async () => {
        const inUse = await chrome.storage.local.getBytesInUse(null);
        const n = 8 * 2 ** 20 - 100_000 - inUse - "e2e/hoard-filler".length - 2;
        await chrome.storage.local.set({ "e2e/hoard-filler": "f".repeat(n) });
      });
      const { hoard } = await loaded(url("hoard.test"), "hoard", 10000);
      assert.match(hoard, /^GM_setValue refused: the extension's storage is nearly full \(this change would bring it to \d+ bytes, past the 8388608 .* \| none$/);
      assert.equal(await stored(`values/${s.uuid}`), undefined, "nothing of it was stored");
      await page.evaluate(() => chrome.storage.local.remove("e2e/hoard-filler"));
      assert.equal((await loaded(url("hoard.test"), "hoard", 10000)).hoard, "stored");
      assert.equal((await stored(`values/${s.uuid}`))?.big?.length, 40002);
    } finally {
      await page.evaluate(() => chrome.storage.local.remove("e2e/hoard-filler")).catch(() => {});
      await page.close();
      await call("delete_script", { uuid: s.uuid });
    }
  });

  // R15: a script past its 600 GM requests a minute got no answer: `GM.setValue` rejected with
  // "did not answer", and the page kept reading the refused value for as long as it ran. Now
  // it is told why, and the page reads the stored values again once the rate allows.
  test("values: a change past the script's request rate is refused and says why; the page's copy goes back to what is stored", { timeout: 150_000 }, async () => {
    const s = await write("rate", ["@match http://ratevals.test/*", "@grant GM.setValue", "@grant GM_getValue"],
      "(async () => { let n = -1, refused = null;\n"
      + "  for (let i = 0; i < 700; i++) { try { await GM.setValue('k', i); n = i; } catch (e) { refused = e.message; break; } }\n"
      + "  document.documentElement.setAttribute('data-gm-rate', JSON.stringify({ n, refused, copy: GM_getValue('k') }));\n"
      + "  const t0 = Date.now(); const back = () => GM_getValue('k') === n ? document.documentElement.setAttribute('data-gm-back', String(Date.now() - t0)) : setTimeout(back, 200); back();\n"
      + "})();");
    await tab.goto(url("ratevals.test"), { waitUntil: "load" });
    await tab.waitForFunction(() => document.documentElement.hasAttribute("data-gm-rate"), null, { timeout: 30000 });
    const rate = JSON.parse((await attributes()).rate);
    assert.ok(rate.n >= 500 && rate.n < 600, JSON.stringify(rate));
    assert.match(rate.refused ?? "", /^GM: refused for the rate: this script's pages, or all scripts together, sent more messages/);
    assert.equal(rate.copy, rate.n + 1, "the refused value is the page's copy at first");
    assert.equal(JSON.parse((await stored(`values/${s.uuid}`))?.k ?? "null"), rate.n, "the last accepted value is stored");
    // Read again from storage once the script's minute is over (asked every 10 s till then).
    await tab.waitForFunction(() => document.documentElement.hasAttribute("data-gm-back"), null, { timeout: 80000, polling: 500 });
    console.log(`# the page's copy went back after ${(await attributes()).back} ms`);
  });

  // Violentmonkey maps any `GM.<name>` to `GM_<name>`: scripts written for it grant and call
  // `GM.xmlhttpRequest`. Before, the grant gave only `GM.xmlHttpRequest`, and the call threw.
  test("@grant GM.xmlhttpRequest gives GM.xmlhttpRequest, as Violentmonkey does", T, async () => {
    await write("vm xhr", ["@match http://vmxhr.test/*", "@grant GM.xmlhttpRequest", "@connect api.test"],
      "GM.xmlhttpRequest({ url: `http://api.test:${location.port}/api/vm`, responseType: 'json',\n"
      + "  onload: (r) => document.documentElement.setAttribute('data-gm-vm', r.response.path) });");
    assert.deepEqual(await loaded(url("vmxhr.test"), "vm", 8000), { vm: "/api/vm" });
  });

  test("GM_xmlhttpRequest reaches a declared host with body and headers; an undeclared one is refused and never sent", T, async () => {
    await write("xhr", ["@match http://xhrpage.test/*", "@grant GM_xmlhttpRequest", "@grant GM.xmlHttpRequest", "@connect api.test"],
      "const port = location.port, out = {};\n"
      + "const done = () => { if (Object.keys(out).length === 6) document.documentElement.setAttribute('data-gm-xhr', JSON.stringify(out)); };\n"
      + "GM_xmlhttpRequest({ url: `http://api.test:${port}/api/one`, headers: { 'X-Script': 'hi' }, responseType: 'json',\n"
      + "  onload: (r) => { out.ok = [r.status, r.response, /x-test: yes/i.test(r.responseHeaders), r.finalUrl]; done(); } });\n"
      // A blob is typed as the answer's Content-Type says, as XMLHttpRequest's is.
      + "GM_xmlhttpRequest({ url: `http://api.test:${port}/api/blob`, responseType: 'blob',\n"
      + "  onload: async (r) => { out.blob = [r.response instanceof Blob, r.response.type, JSON.parse(await r.response.text()).path]; done(); } });\n"
      + "GM_xmlhttpRequest({ url: `http://undeclared.test:${port}/api/secret`,\n"
      + "  onload: () => { out.leak = 'loaded'; done(); }, onerror: (e) => { out.refused = e.error; done(); } });\n"
      + "GM.xmlHttpRequest({ method: 'POST', url: `http://sub.api.test:${port}/api/two`, data: 'x=1' })\n"
      + "  .then((r) => { out.promise = JSON.parse(r.responseText).method; done(); });\n"
      // WebDAV's methods are HTTP's too, with a header the browser sets (a session rule).
      + "GM_xmlhttpRequest({ method: 'propfind', url: `http://api.test:${port}/api/dav`, headers: { 'User-Agent': 'dav-client/1' },\n"
      + "  onload: (r) => { out.dav = JSON.parse(r.responseText).method; done(); }, onerror: (e) => { out.dav = e.error; done(); } });\n"
      + "GM_xmlhttpRequest({ url: `/api/self`, onload: () => { out.self = 'loaded'; done(); }, onerror: (e) => { out.self = e.error; done(); } });");
    server.hits.length = 0;
    const got = await loaded(url("xhrpage.test"), "xhr", 5000);
    const out = JSON.parse(got.xhr);
    const P = server.port;
    assert.deepEqual(out.ok, [200, { method: "GET", host: "api.test", path: "/api/one", h: "hi" }, true, `http://api.test:${P}/api/one`]);
    assert.equal(out.promise, "POST");
    assert.equal(out.dav, "PROPFIND");
    assert.deepEqual(out.blob, [true, "application/json", "/api/blob"]);
    assert.match(out.refused, /undeclared\.test is not in this script's @connect list.*not sent/);
    // The page's own host is not declared (no @connect self): refused too.
    assert.match(out.self, /xhrpage\.test is not in this script's @connect list/);
    assert.equal(out.leak, undefined);
    // The server saw the declared requests and never the refused ones.
    assert.ok(server.hits.includes(`api.test:${P}/api/one`), JSON.stringify(server.hits));
    assert.ok(!server.hits.some((h) => h.startsWith("undeclared.test") || h.includes("/api/self")), JSON.stringify(server.hits));
  });

  test("a script turned off while its page is open no longer reaches the network through GM_xmlhttpRequest; turned on, the next page load does", T, async () => {
    const s = await write("off", ["@match http://offpage.test/*", "@grant GM_xmlhttpRequest", "@connect api.test"],
      "let n = 0;\n"
      + "document.addEventListener('lumo-go', () => { const i = ++n;\n"
      + "  const mark = (v) => document.documentElement.setAttribute(`data-gm-off-${i}`, v);\n"
      + "  GM_xmlhttpRequest({ url: `http://api.test:${location.port}/api/off-${i}`, onload: (r) => mark(`loaded ${r.status}`), onerror: (e) => mark(e.error) });\n"
      + "});");
    server.hits.length = 0;
    await tab.goto(url("offpage.test"), { waitUntil: "load" });
    const go = async (i) => {
      await tab.evaluate(() => document.dispatchEvent(new Event("lumo-go")));
      return until(() => tab.evaluate((k) => document.documentElement.getAttribute(k), `data-gm-off-${i}`), (v) => v, 5000);
    };
    assert.equal(await go(1), "loaded 200");
    assert.equal((await h.internal("scripts.setEnabled", { uuid: s.uuid, enabled: false })).ok, true);
    // The page still runs the script Chrome injected, but nothing reaches the network for it:
    // turning it off takes its world's channel away (Chrome's "not available" on the page), and
    // the worker refuses it too where that did not happen ("turned off"; provider::gm tests).
    assert.match(await go(2), /is not available in this context|turned off/);
    // On again: it has its channel back, in the open page too (its world configured again with
    // its policy, env::WORLD_CSP, reaches the pages that use it: Chromium 156, measured), and on
    // the next page load.
    assert.equal((await h.internal("scripts.setEnabled", { uuid: s.uuid, enabled: true })).ok, true);
    assert.equal(await go(3), "loaded 200");
    await tab.reload({ waitUntil: "load" });
    assert.equal(await go(1), "loaded 200");
    const P = server.port;
    assert.deepEqual(server.hits.filter((x) => x.includes("/api/off-")), [`api.test:${P}/api/off-1`, `api.test:${P}/api/off-3`, `api.test:${P}/api/off-1`], JSON.stringify(server.hits));
  });

  // A redirect is a new request the script did not name: judged like the first before it is
  // made, so a declared host cannot send the user's cookies, or a POST, anywhere else.
  test("GM_xmlhttpRequest follows a redirect only where @connect allows; a host off the list is never asked", T, async () => {
    await write("redir", ["@match http://redirpage.test/*", "@grant GM_xmlhttpRequest", "@connect api.test"],
      "const port = location.port, out = {};\n"
      + "const done = () => { if (Object.keys(out).length === 4) document.documentElement.setAttribute('data-gm-redir', JSON.stringify(out)); };\n"
      + "const go = (k, o) => GM_xmlhttpRequest({ ...o, onload: (r) => { out[k] = [r.status, r.finalUrl, r.responseText]; done(); }, onerror: (e) => { out[k] = e.error; done(); } });\n"
      + "const r = (status, to) => `http://api.test:${port}/redirect?status=${status}&to=${encodeURIComponent(to)}`;\n"
      + "go('kept', { method: 'POST', data: 'x=1', url: r(307, r(302, `http://sub.api.test:${port}/api/final`)) });\n"
      + "go('off', { method: 'POST', data: 'amount=1000', url: r(307, `http://bank.test:${port}/api/transfer`) });\n"
      + "go('lan', { url: r(302, `http://127.0.0.1:${port}/api/router`) });\n"
      + "go('login', { method: 'POST', data: 'u=1', url: `http://api.test:${port}/login` });");
    server.hits.length = 0;
    const got = await loaded(url("redirpage.test"), "redir", 8000);
    const out = JSON.parse(got.redir);
    const P = server.port;
    // Within the list: followed hop by hop, a 307 keeping the POST, a 302 of a POST as a GET.
    assert.deepEqual(out.kept.slice(0, 2), [200, `http://sub.api.test:${P}/api/final`], JSON.stringify(out));
    assert.equal(JSON.parse(out.kept[2]).method, "GET");
    const redirects = server.hits.filter((h) => /^[A-Z]+ /.test(h));
    // kept: POST, then POST again (307); off: POST; lan: GET. They run at once.
    assert.deepEqual(redirects.map((h) => h.split(" ")[0]).sort(), ["GET", "POST", "POST", "POST"], JSON.stringify(server.hits));
    assert.ok(server.hits.includes(`sub.api.test:${P}/api/final`), JSON.stringify(server.hits));
    // A cookie the redirect's answer set is kept and sent on the next hop (a login works).
    assert.deepEqual(out.login, [200, `http://api.test:${P}/whoami`, "sid=from-redirect"]);
    // Off the list: refused with where it led, and that host never saw a request.
    assert.match(out.off, new RegExp(`redirected the request to http://bank\\.test:${P}/api/transfer, and bank\\.test is not in this script's @connect list; the redirect was not followed`));
    assert.match(out.lan, /redirected the request to http:\/\/127\.0\.0\.1:\d+\/api\/router, and a server elsewhere may not lead a request onto this computer/);
    assert.ok(!server.hits.some((h) => h.startsWith("bank.test") || h.startsWith("127.0.0.1") || h.includes("/api/transfer") || h.includes("/api/router")), JSON.stringify(server.hits));
  });

  // `@connect *` is the internet, not the user's router: a device on the local network is reached
  // only through a line that names it, and a public server cannot lead a request there (a POST
  // to the router's settings page, with the user's cookies), even to a device a line names.
  test("GM_xmlhttpRequest with @connect *: no local device is reached, directly or by a redirect", T, async () => {
    await write("star", ["@match http://starpage.test/*", "@grant GM_xmlhttpRequest", "@connect *", "@connect router.local"],
      "const port = location.port, out = {};\n"
      + "const done = () => { if (Object.keys(out).length === 4) document.documentElement.setAttribute('data-gm-star', JSON.stringify(out)); };\n"
      + "const go = (k, o) => GM_xmlhttpRequest({ ...o, onload: (r) => { out[k] = [r.status, r.finalUrl]; done(); }, onerror: (e) => { out[k] = e.error; done(); } });\n"
      + "const r = (status, to) => `http://api.test:${port}/redirect?status=${status}&to=${encodeURIComponent(to)}`;\n"
      + "go('site', { url: `http://api.test:${port}/api/site` });\n"
      + "go('printer', { url: `http://printer.lan:${port}/api/printer` });\n"
      + "go('led', { method: 'POST', data: 'dns=6.6.6.6', url: r(307, `http://router.local:${port}/api/apply`) });\n"
      + "go('named', { url: `http://router.local:${port}/api/named` });");
    server.hits.length = 0;
    const got = await loaded(url("starpage.test"), "star", 8000);
    const out = JSON.parse(got.star);
    const P = server.port;
    assert.deepEqual(out.site, [200, `http://api.test:${P}/api/site`], JSON.stringify(out));
    // The line that names the router reaches it: the server saw that request (so it would see the others).
    assert.deepEqual(out.named, [200, `http://router.local:${P}/api/named`], JSON.stringify(out));
    assert.ok(server.hits.includes(`router.local:${P}/api/named`), JSON.stringify(server.hits));
    assert.match(out.printer, /printer\.lan is not in this script's @connect list/);
    assert.match(out.led, /redirected the request to http:\/\/router\.local:\d+\/api\/apply, and a server on the internet may not lead a request into your local network; the redirect was not followed/);
    assert.ok(!server.hits.some((x) => x.startsWith("printer.lan") || x.includes("/api/apply") || x.includes("/api/printer")), JSON.stringify(server.hits));
  });

  // A stock Fedora/RHEL hosts file maps localhost.localdomain and localhost6.localdomain6 to this
  // computer; here --host-resolver-rules (every name to 127.0.0.1) stands in for that file.
  test("GM_xmlhttpRequest with @connect *: the hosts file's names for this computer are not reached, directly or by a redirect", T, async () => {
    await write("hostsfile", ["@match http://hostsfile.test/*", "@grant GM_xmlhttpRequest", "@connect *"],
      "const port = location.port, out = {};\n"
      + "const done = () => { if (Object.keys(out).length === 4) document.documentElement.setAttribute('data-gm-hosts', JSON.stringify(out)); };\n"
      + "const go = (k, o) => GM_xmlhttpRequest({ ...o, onload: (r) => { out[k] = [r.status, r.finalUrl]; done(); }, onerror: (e) => { out[k] = e.error; done(); } });\n"
      + "go('site', { url: `http://api.test:${port}/api/site` });\n"
      + "go('fedora', { url: `http://localhost.localdomain:${port}/api/fedora` });\n"
      + "go('six', { url: `http://localhost6.localdomain6:${port}/api/six` });\n"
      + "go('led', { method: 'POST', data: 'x', url: `http://api.test:${port}/redirect?status=307&to=${encodeURIComponent(`http://localhost.localdomain:${port}/api/led`)}` });");
    server.hits.length = 0;
    const got = await loaded(url("hostsfile.test"), "hosts", 8000);
    const out = JSON.parse(got.hosts);
    assert.deepEqual(out.site, [200, `http://api.test:${server.port}/api/site`], JSON.stringify(out));
    assert.match(out.fedora, /localhost\.localdomain is not in this script's @connect list/, JSON.stringify(out));
    assert.match(out.six, /localhost6\.localdomain6 is not in this script's @connect list/, JSON.stringify(out));
    assert.match(out.led, /redirected the request to http:\/\/localhost\.localdomain:\d+\/api\/led, and a server elsewhere may not lead a request onto this computer; the redirect was not followed/, JSON.stringify(out));
    assert.ok(!server.hits.some((x) => x.includes("/api/fedora") || x.includes("/api/six") || x.includes("/api/led")), JSON.stringify(server.hits));
  });

  // Names only a local resolver answers (`.home`, `.corp`…) and the IPv6 forms of a private IPv4
  // address (IPv4-compatible, NAT64, 6to4) are the local network, not "any site": here
  // --host-resolver-rules sends every name and address to the test server, so each would be asked
  // if `*` reached it or a redirect from the internet were followed there.
  test("GM_xmlhttpRequest with @connect *: private names and IPv6 forms of private addresses are not reached, directly or by a redirect", T, async () => {
    await write("privnames", ["@match http://privnames.test/*", "@grant GM_xmlhttpRequest", "@connect *"],
      "const port = location.port, out = {};\n"
      + "const done = () => { if (Object.keys(out).length === 7) document.documentElement.setAttribute('data-gm-priv', JSON.stringify(out)); };\n"
      + "const go = (k, o) => GM_xmlhttpRequest({ ...o, onload: (r) => { out[k] = [r.status, r.finalUrl]; done(); }, onerror: (e) => { out[k] = e.error; done(); } });\n"
      + "const r = (to) => `http://api.test:${port}/redirect?status=307&to=${encodeURIComponent(to)}`;\n"
      + "go('site', { url: `http://api.test:${port}/api/site` });\n"
      + "go('home', { url: `http://nas.home:${port}/api/home` });\n"
      + "go('corp', { url: `http://wiki.corp:${port}/api/corp` });\n"
      + "go('compat', { url: `http://[::192.168.1.1]:${port}/api/compat` });\n"
      + "go('nat64', { url: `http://[64:ff9b::192.168.1.1]:${port}/api/nat64` });\n"
      + "go('led', { method: 'POST', data: 'x', url: r(`http://router.home:${port}/api/led`) });\n"
      + "go('led6', { method: 'POST', data: 'x', url: r(`http://[2002:c0a8:101::1]:${port}/api/led6`) });");
    server.hits.length = 0;
    const got = await loaded(url("privnames.test"), "priv", 8000);
    const out = JSON.parse(got.priv);
    const P = server.port;
    assert.deepEqual(out.site, [200, `http://api.test:${P}/api/site`], JSON.stringify(out));
    for (const [k, host] of [["home", "nas\\.home"], ["corp", "wiki\\.corp"], ["compat", "\\[::c0a8:101\\]"], ["nat64", "\\[64:ff9b::c0a8:101\\]"]]) {
      assert.match(out[k], new RegExp(`${host} is not in this script's @connect list`), JSON.stringify(out));
    }
    assert.match(out.led, /redirected the request to http:\/\/router\.home:\d+\/api\/led, and a server on the internet may not lead a request into your local network; the redirect was not followed/, JSON.stringify(out));
    assert.match(out.led6, /redirected the request to http:\/\/\[2002:c0a8:101::1\]:\d+\/api\/led6, and a server on the internet may not lead a request into your local network; the redirect was not followed/, JSON.stringify(out));
    assert.ok(!server.hits.some((x) => /\/api\/(home|corp|compat|nat64|led)/.test(x)), JSON.stringify(server.hits));
  });

  // Chrome names a redirect by its request id, which fetch does not give: each request carries a
  // marker that ties the two (removed before it leaves the browser). Named by method and URL
  // alone, two requests of the same method and URL in flight at once could each be told the
  // other's target (a server's answer to one handed to the other).
  test("GM_xmlhttpRequest: two requests to the same URL in flight at once each follow their own redirect", T, async () => {
    await write("whose", ["@match http://whosepage.test/*", "@grant GM_xmlhttpRequest", "@connect api.test"],
      "const out = {}, u = `http://api.test:${location.port}/meet?k=whose&n=2&to=/api/for`;\n"
      + "const done = () => { if (Object.keys(out).length === 2) document.documentElement.setAttribute('data-gm-whose', JSON.stringify(out)); };\n"
      + "for (const k of ['first', 'second']) GM_xmlhttpRequest({ method: 'POST', url: u, data: k, onload: (r) => { out[k] = r.finalUrl; done(); }, onerror: (e) => { out[k] = e.error; done(); } });");
    await tab.goto(url("whosepage.test"), { waitUntil: "load" });
    const got = await tab.waitForFunction(() => document.documentElement.getAttribute("data-gm-whose"), null, { timeout: 8000 });
    const P = server.port;
    // The server had both at once, and answered the second first.
    assert.deepEqual(server.hits.filter((x) => x.startsWith("meet whose")).sort(), ["meet whose first together", "meet whose second together"]);
    assert.deepEqual(JSON.parse(await got.jsonValue()), { first: `http://api.test:${P}/api/for-first`, second: `http://api.test:${P}/api/for-second` });
  });

  // GraphQL and LLM APIs are called in parallel at one URL: requests of the same method, URL and
  // headers go at once (before, one after the other: each waited for the other's answer, and a
  // script's own timeout cut calls short). Requests whose headers the browser must set
  // differently still take turns: else one could carry the other's.
  test("GM_xmlhttpRequest: requests of the same method and URL go at once, unless the headers the browser sets differ", T, async () => {
    await write("parallel", ["@match http://parallelpage.test/*", "@grant GM_xmlhttpRequest", "@connect api.test"],
      "const out = {}, at = (k, n) => `http://api.test:${location.port}/meet?k=${k}&n=${n}`;\n"
      + "const done = () => { if (Object.keys(out).length === 9) document.documentElement.setAttribute('data-gm-parallel', JSON.stringify(out)); };\n"
      + "const go = (k, o) => GM_xmlhttpRequest(Object.assign({ responseType: 'json', onload: (r) => { out[k] = r.response; done(); },\n"
      + "  onerror: (e) => { out[k] = e.error; done(); } }, o));\n"
      + "for (const k of ['a', 'b', 'c']) go(k, { method: 'POST', url: at('gql', 3), data: k });\n"
      + "for (const k of ['d', 'e']) go(k, { method: 'POST', url: at('ua', 2), data: k, headers: { 'User-Agent': 'Script/' + k } });\n"
      // Two WebDAV methods: a rule names both as "other", so they too take turns.
      + "for (const [k, m] of [['f', 'PROPFIND'], ['g', 'MKCOL']]) go(k, { method: m, url: at('dav', 2), data: k, headers: { 'User-Agent': 'Script/' + k } });\n"
      // URLs that differ in letter case only are two URLs: at once, each rule its own request's.
      + "for (const [k, x] of [['h', 'A'], ['i', 'a']]) go(k, { method: 'POST', url: at('case', 2) + '&x=' + x, data: k, headers: { 'User-Agent': 'Script/' + k } });");
    await tab.goto(url("parallelpage.test"), { waitUntil: "load" });
    const got = await tab.waitForFunction(() => document.documentElement.getAttribute("data-gm-parallel"), null, { timeout: 15_000 });
    const out = JSON.parse(await got.jsonValue());
    for (const k of ["a", "b", "c"]) {
      // Each its own answer, all three open at the server at once; no Origin of the worker's, and
      // nothing of the marker reached the server.
      assert.deepEqual(out[k], { together: true, body: k, ua: "browser's", origin: null, marker: [] }, JSON.stringify(out));
    }
    for (const k of ["d", "e", "f", "g"]) {
      assert.deepEqual(out[k], { together: false, body: k, ua: `Script/${k}`, origin: null, marker: [] }, JSON.stringify(out));
    }
    for (const k of ["h", "i"]) {
      assert.deepEqual(out[k], { together: true, body: k, ua: `Script/${k}`, origin: null, marker: [] }, JSON.stringify(out));
    }
  });

  // Requests that take turns (their headers differ); the one waiting must not wait past its own
  // timeout for the other.
  test("GM_xmlhttpRequest: a request waiting its turn behind one to the same URL times out on its own timeout", T, async () => {
    await write("turn", ["@match http://turnpage.test/*", "@grant GM_xmlhttpRequest", "@connect api.test"],
      "const out = {}, u = `http://api.test:${location.port}/slow?turn`, t0 = Date.now();\n"
      + "const done = () => { if (Object.keys(out).length === 2) document.documentElement.setAttribute('data-gm-turn', JSON.stringify(out)); };\n"
      + "GM_xmlhttpRequest({ url: u, onload: (r) => { out.long = ['load', r.responseText, Date.now() - t0]; done(); } });\n"
      + "GM_xmlhttpRequest({ url: u, timeout: 800, headers: { 'User-Agent': 'Script/turn' }, onload: () => { out.short = ['load', Date.now() - t0]; done(); },\n"
      + "  ontimeout: () => { out.short = ['timeout', Date.now() - t0]; done(); } });");
    await tab.goto(url("turnpage.test"), { waitUntil: "load" });
    const got = await tab.waitForFunction(() => document.documentElement.getAttribute("data-gm-turn"), null, { timeout: 12000 });
    const out = JSON.parse(await got.jsonValue());
    // The first is answered after 4 s; the second gave up near its 800 ms, long before that,
    // and was never sent.
    assert.deepEqual(out.long.slice(0, 2), ["load", "slow"], JSON.stringify(out));
    assert.equal(out.short[0], "timeout", JSON.stringify(out));
    assert.ok(out.short[1] < 2500 && out.short[1] < out.long[2] - 1000, JSON.stringify(out));
    assert.equal(server.hits.filter((x) => x.endsWith("/slow?turn")).length, 1, JSON.stringify(server.hits));
  });

  test("GM_xmlhttpRequest sends binary data byte for byte: ArrayBuffer, typed array, DataView, Blob, FormData, URLSearchParams", T, async () => {
    await write("binary", ["@match http://binpage.test/*", "@grant GM_xmlhttpRequest", "@connect api.test"],
      "const all = new Uint8Array(256).map((_, i) => i), out = {};\n"
      + "const fd = new FormData(); fd.append('f', 'v');\n"
      + "const sends = { ab: all.buffer, view: all.subarray(250), dv: new DataView(all.buffer, 1, 2),\n"
      + "  blob: new Blob([all], { type: 'image/x-test' }), form: fd, params: new URLSearchParams({ a: '1 2', b: 'é' }), text: 'plain' };\n"
      + "for (const [k, data] of Object.entries(sends))\n"
      + "  GM_xmlhttpRequest({ method: 'POST', url: `http://api.test:${location.port}/echo?${k}`, data,\n"
      + "    onload: (r) => { out[k] = r.responseText; if (Object.keys(out).length === 7) document.documentElement.setAttribute('data-gm-bin', JSON.stringify(out)); },\n"
      + "    onerror: (e) => { out[k] = 'error ' + e.error; } });");
    server.bodies.length = 0;
    const got = await loaded(url("binpage.test"), "bin", 8000);
    const out = JSON.parse(got.bin);
    const seen = Object.fromEntries(server.bodies.map((b) => [b.path.split("?")[1], b]));
    const hex = (xs) => Buffer.from(xs).toString("hex");
    const all = [...Array(256).keys()];
    assert.equal(seen.ab.hex, hex(all));
    assert.equal(seen.view.hex, hex([250, 251, 252, 253, 254, 255]));
    assert.equal(seen.dv.hex, hex([1, 2]));
    assert.equal(seen.blob.hex, hex(all));
    assert.equal(seen.blob.type, "image/x-test");
    assert.equal(seen.ab.type, null);
    assert.match(seen.form.type, /^multipart\/form-data; boundary=/);
    const boundary = seen.form.type.split("boundary=")[1];
    assert.match(Buffer.from(seen.form.hex, "hex").toString(), new RegExp(`^--${boundary}\r\nContent-Disposition: form-data; name="f"\r\n\r\nv\r\n--${boundary}--`));
    assert.equal(Buffer.from(seen.params.hex, "hex").toString(), "a=1+2&b=%C3%A9");
    assert.equal(seen.params.type, "application/x-www-form-urlencoded;charset=UTF-8");
    assert.equal(Buffer.from(seen.text.hex, "hex").toString(), "plain");
    assert.equal(seen.text.type, "text/plain;charset=UTF-8");
    // The script read back what the server received.
    assert.equal(out.ab, hex(all));
  });

  test("GM_xmlhttpRequest onprogress reports loaded/total while the download runs", T, async () => {
    await write("progress", ["@match http://progpage.test/*", "@grant GM_xmlhttpRequest", "@connect api.test"],
      "const ev = [];\n"
      + "GM_xmlhttpRequest({ url: `http://api.test:${location.port}/chunks`, responseType: 'arraybuffer',\n"
      + "  onprogress: (e) => ev.push([e.loaded, e.total, e.lengthComputable, Date.now()]),\n"
      + "  onload: (r) => document.documentElement.setAttribute('data-gm-prog', JSON.stringify({ ev, size: r.response.byteLength, at: Date.now() })) });");
    await load(url("progpage.test"));
    const got = await until(() => tab.evaluate(() => document.documentElement.getAttribute("data-gm-prog")), (v) => v, 8000);
    const { ev, size, at } = JSON.parse(got);
    assert.equal(size, 30000);
    // Reports came while the body was still arriving (≥ 1.4 s in all), not all at the end.
    const early = ev.filter(([loaded, , , t]) => loaded < 30000 && t < at - 300);
    assert.ok(early.length >= 1, JSON.stringify(ev));
    for (const [loaded, total, computable] of ev) {
      assert.ok(loaded > 0 && loaded <= 30000);
      assert.equal(total, 30000);
      assert.equal(computable, true);
    }
    assert.deepEqual(ev.map((e) => e[0]), [...ev.map((e) => e[0])].sort((a, b) => a - b), "loaded only grows");
  });

  // XMLHttpRequest-style scripts wait for readyState 2 to read the status and headers (and
  // abort a download they do not want) and count 3s while it loads; before, only 4 came.
  test("GM_xmlhttpRequest onreadystatechange: 2 with the status and headers before the body has come, then 3 and 4", T, async () => {
    await write("readystate", ["@match http://rspage.test/*", "@grant GM_xmlhttpRequest", "@connect api.test"],
      "const t0 = Date.now(), out = {};\n"
      // With onreadystatechange alone, and with onprogress too.
      + "for (const tag of ['alone', 'progress']) { const ev = [];\n"
      + "GM_xmlhttpRequest(Object.assign({ url: `http://api.test:${location.port}/chunks?${tag}`, responseType: 'arraybuffer',\n"
      + "  onreadystatechange: (x) => ev.push([x.readyState, x.status, /content-length: 30000/i.test(x.responseHeaders || ''), x.loaded || 0, Date.now() - t0]),\n"
      + "  onload: (r) => { out[tag] = { ev, at: Date.now() - t0 }; if (out.alone && out.progress) document.documentElement.setAttribute('data-gm-rs', JSON.stringify(out)); } },\n"
      + "  tag === 'progress' ? { onprogress: () => {} } : {})); }");
    await load(url("rspage.test"));
    const got = await until(() => tab.evaluate(() => document.documentElement.getAttribute("data-gm-rs")), (v) => v, 8000);
    for (const [tag, { ev, at }] of Object.entries(JSON.parse(got))) {
      const states = ev.map((e) => e[0]);
      assert.deepEqual([...new Set(states)], [2, 3, 4], `${tag}: ${JSON.stringify(ev)}`);
      assert.deepEqual(states, [...states].sort(), "in order");
      const two = ev.find((e) => e[0] === 2);
      assert.equal(two[1], 200);
      assert.equal(two[2], true, "the headers are there at 2");
      // The body takes ≥ 1.4 s: 2 came before the last chunk was sent.
      assert.ok(two[4] < at - 1000, `${tag}: 2 at ${two[4]} ms, the end at ${at} ms`);
      assert.equal(ev.filter((e) => e[0] === 4).length, 1);
      // 3s while it loaded where the page follows the download for onprogress anyway; else
      // one 3, just before 4 (the page asked the worker once, for the head).
      if (tag === "progress") assert.ok(ev.some((e) => e[0] === 3 && e[3] > 0 && e[3] < 30000 && e[4] < at - 300), JSON.stringify(ev));
      else assert.equal(ev.filter((e) => e[0] === 3).length, 1, JSON.stringify(ev));
    }
  });

  // The callbacks as Violentmonkey gives them (its requests.js): `onloadstart` once the request
  // is sent, then `onreadystatechange`, `onload`, `onloadend`, each with the request's `context`,
  // and `onabort`/`onloadend` of an aborted one with it too (scripts keep per-request state
  // there). Fails if a callback is not called, comes out of order, or lacks the context.
  test("GM_xmlhttpRequest callbacks: onloadstart first, the order of the rest, context in every one, abort included", T, async () => {
    await write("order", ["@match http://orderpage.test/*", "@grant GM_xmlhttpRequest", "@connect api.test"],
      "const at = (p) => `http://api.test:${location.port}${p}`, seen = [], abort = [];\n"
      + "const on = (into) => Object.fromEntries(['onloadstart', 'onreadystatechange', 'onload', 'onloadend', 'onerror', 'onabort', 'ontimeout']\n"
      + "  .map((n) => [n, (r) => into.push([n.slice(2), r.readyState, r.context && r.context.k])]));\n"
      + "const fin = () => { if (seen.length >= 6 && abort.length >= 3) document.documentElement.setAttribute('data-gm-order', JSON.stringify({ seen, abort })); };\n"
      + "const a = on(seen), b = on(abort);\n"
      + "GM_xmlhttpRequest(Object.assign({ url: at('/api/order'), context: { k: 'one' } }, a, { onloadend: (r) => { a.onloadend(r); fin(); } }));\n"
      + "const r = GM_xmlhttpRequest(Object.assign({ url: at('/slow?order'), context: { k: 'two' } }, b, { onloadend: (x) => { b.onloadend(x); fin(); } }));\n"
      + "setTimeout(() => r.abort(), 300);");
    const got = await loaded(url("orderpage.test"), "order", 6000);
    assert.deepEqual(JSON.parse(got.order), {
      seen: [["loadstart", 1, "one"], ["readystatechange", 2, "one"], ["readystatechange", 3, "one"], ["readystatechange", 4, "one"],
        ["load", 4, "one"], ["loadend", 4, "one"]],
      abort: [["loadstart", 1, "two"], ["abort", 4, "two"], ["loadend", 4, "two"]],
    });
  });

  // `Referer`, `Cookie` and `User-Agent` are forbidden to the worker's `fetch`, which dropped
  // them without a word (a pixiv image downloader's `Referer` never went, and the site said
  // 403); the browser sets them now, on that request alone (a `declarativeNetRequest` rule),
  // as Violentmonkey and Tampermonkey send them. Fails if one is not sent as given, if a
  // script's Cookie replaced the site's own, if the rule outlived its request (the next one
  // without headers got them), or if a header still not sent (`DNT`) is not said in the
  // page's console.
  // A POST carried `Origin: chrome-extension://<our id>` (a tester's): every server a script
  // posts to learned the extension is installed, and Rails or Django refuse such a form post.
  test("GM_xmlhttpRequest sends a script's Referer, Cookie, User-Agent and Origin, on that request alone, and never the worker's Origin; a header it cannot send is said once", T, async () => {
    // The site's cookies are this one alone (an earlier test's login left its own).
    await tab.context().clearCookies();
    await tab.context().addCookies([{ name: "site", value: "s1", domain: "api.test", path: "/" }]);
    await write("forbidden", ["@match http://fhpage.test/*", "@grant GM_xmlhttpRequest", "@connect api.test"],
      "const at = `http://api.test:${location.port}/sent`, out = [];\n"
      + "const go = (o) => new Promise((ok) => GM_xmlhttpRequest(Object.assign({ url: at, responseType: 'json', onload: (r) => ok(r.response) }, o)));\n"
      + "const headers = { Referer: 'https://www.pixiv.test/', Cookie: 'a=1', 'User-Agent': 'Script/1.0', 'X-Ok': 'yes', DNT: '1' };\n"
      + "(async () => { out.push(await go({ headers, anonymous: true })); out.push(await go({ headers }));\n"
      + "  out.push(await go({ anonymous: true }));\n"
      + "  out.push(await go({ method: 'POST', data: 'x=1', headers: { 'Content-Type': 'application/x-www-form-urlencoded' } }));\n"
      + "  out.push(await go({ method: 'PUT', data: 'x=1', headers: { Origin: 'http://fhpage.test' } }));\n"
      + "  document.documentElement.setAttribute('data-gm-sent', JSON.stringify(out)); })();");
    const logs = [];
    const onLog = (m) => logs.push(m.text());
    tab.on("console", onLog);
    try {
      const got = await loaded(url("fhpage.test"), "sent", 8000);
      const sent = { referer: "https://www.pixiv.test/", ua: "Script/1.0", x: "yes", origin: null };
      const none = { referer: null, cookie: null, ua: "browser's", x: null, origin: null };
      assert.deepEqual(JSON.parse(got.sent), [
        { ...sent, cookie: "a=1" },
        { ...sent, cookie: "site=s1; a=1" },
        none,
        { ...none, cookie: "site=s1" },
        { ...none, cookie: "site=s1", origin: "http://fhpage.test" },
      ]);
    } finally {
      tab.off("console", onLog);
      await tab.context().clearCookies();
    }
    const said = logs.filter((t) => /^GM_xmlhttpRequest: the \S+ header cannot be set by this provider/.test(t));
    assert.deepEqual(said.map((t) => t.split(" ")[2]), ["DNT"], JSON.stringify(logs));
  });

  // Tampermonkey's and Violentmonkey's `user` and `password`: before, the worker dropped them,
  // and a script logging in to its router got 401. Sent as HTTP Basic (the password may hold a
  // colon and non-ASCII, in UTF-8); a script's own Authorization wins; a redirect to another
  // host does not take them along.
  test("GM_xmlhttpRequest user and password are sent as Basic, to that origin only", T, async () => {
    await write("basic", ["@match http://basicpage.test/*", "@grant GM_xmlhttpRequest", "@connect api.test", "@connect other.test"],
      "const out = {}, P = location.port;\n"
      + "const go = (k, o) => new Promise((ok) => GM_xmlhttpRequest(Object.assign({ responseType: 'json',\n"
      + "  onload: (r) => ok(out[k] = r.response), onerror: (e) => ok(out[k] = 'error ' + e.error) }, o)));\n"
      + "(async () => {\n"
      + "  await go('basic', { url: `http://api.test:${P}/auth`, user: 'ali', password: 'pä:ss' });\n"
      + "  await go('own', { url: `http://api.test:${P}/auth`, user: 'ali', password: 'pw', headers: { Authorization: 'Bearer t' } });\n"
      + "  await go('moved', { url: `http://api.test:${P}/redirect?status=302&to=${encodeURIComponent(`http://other.test:${P}/auth`)}`, user: 'ali', password: 'pw' });\n"
      + "  await go('colon', { url: `http://api.test:${P}/auth`, user: 'a:b', password: 'pw' });\n"
      + "  document.documentElement.setAttribute('data-gm-basic', JSON.stringify(out));\n"
      + "})();");
    const got = JSON.parse((await loaded(url("basicpage.test"), "basic", 8000)).basic);
    assert.deepEqual(got.basic, { host: "api.test", authorization: `Basic ${Buffer.from("ali:pä:ss").toString("base64")}` });
    assert.deepEqual(got.own, { host: "api.test", authorization: "Bearer t" });
    assert.deepEqual(got.moved, { host: "other.test", authorization: null });
    assert.match(got.colon, /^error GM request: user must not contain ":"/);
  });

  // The rule that sets those headers is Chrome's to take: here its 1,000 regex rules are in use
  // (by the provider's own page, as nothing else can). Before, the request then went without
  // the script's Referer and Cookie, and the script was not told; now it is not sent, and the
  // script hears why. Its requests without such a header are not affected, and once rules are
  // free again the headers go as before.
  test("GM_xmlhttpRequest whose Referer Chrome will not set is not sent without it, and the script is told", T, async () => {
    await write("unset", ["@match http://unset.test/*", "@grant GM_xmlhttpRequest", "@connect api.test"],
      "const go = (n, o) => GM_xmlhttpRequest(Object.assign({ url: `http://api.test:${location.port}/sent?${n}`, responseType: 'json',\n"
      + "  onload: (r) => document.documentElement.setAttribute('data-gm-' + n, JSON.stringify(['load', r.response])),\n"
      + "  onerror: (e) => document.documentElement.setAttribute('data-gm-' + n, JSON.stringify(['error', e.error])) }, o));\n"
      + "go('plain', {});\n"
      + "go('referer', { headers: { Referer: 'https://www.pixiv.test/', 'X-Ok': 'yes' } });");
    const page = await h.context.newPage();
    await page.goto(`chrome-extension://${PROVIDER_ID}/options.html`);
    const filled = await page.evaluate(async () => {
      const ids = [];
      for (let i = 0; i < 1000; i++) {
        const id = 2_000_001 + i;
        try {
          await chrome.declarativeNetRequest.updateSessionRules({ addRules: [{ id, priority: 1, action: { type: "block" },
            condition: { regexFilter: `^https://never\\.test/${i}$`, resourceTypes: ["xmlhttprequest"], tabIds: [-1] } }] });
        } catch { break; }
        ids.push(id);
      }
      return ids;
    });
    try {
      assert.ok(filled.length >= 900, `regex rules added: ${filled.length}`);
      server.hits.length = 0;
      const got = await loaded(url("unset.test"), "referer", 8000);
      await tab.waitForFunction(() => document.documentElement.hasAttribute("data-gm-plain"), null, { timeout: 8000 });
      const plain = JSON.parse(await tab.evaluate(() => document.documentElement.getAttribute("data-gm-plain")));
      assert.deepEqual(plain, ["load", { referer: null, cookie: null, ua: "browser's", x: null, origin: null }]);
      const [kind, said] = JSON.parse(got.referer);
      assert.equal(kind, "error", `sent without its Referer: ${got.referer}`);
      assert.match(said, /^GM_xmlhttpRequest failed: Chrome did not take the rule that would set its referer \(headers fetch may not set\), so the request was not sent$/);
      assert.deepEqual(server.hits.filter((x) => x.includes("/sent?referer")), [], "the server was not asked");
    } finally {
      await page.evaluate((ids) => chrome.declarativeNetRequest.updateSessionRules({ removeRuleIds: ids }), filled);
    }
    const again = await loaded(url("unset.test"), "referer", 8000);
    assert.deepEqual(JSON.parse(again.referer), ["load", { referer: "https://www.pixiv.test/", cookie: null, ua: "browser's", x: "yes", origin: null }]);
    await page.close();
  });

  test("GM_xmlhttpRequest abort() closes the worker's request; another script's request with the same number goes on", T, async () => {
    const lines = () => ["@match http://abortpage.test/*", "@grant GM_xmlhttpRequest", "@connect api.test"];
    // Both scripts' first request is number 1 in the same page: A's abort must not reach B's.
    await write("abort-a", lines("a"),
      "const r = GM_xmlhttpRequest({ url: `http://api.test:${location.port}/slow?a`,\n"
      + "  onload: () => document.documentElement.setAttribute('data-gm-a', 'loaded'),\n"
      + "  onabort: () => document.documentElement.setAttribute('data-gm-a', 'aborted ' + Date.now()) });\n"
      + "setTimeout(() => r.abort(), 800);");
    await write("abort-b", lines("b"),
      "GM_xmlhttpRequest({ url: `http://api.test:${location.port}/slow?b`,\n"
      + "  onload: (x) => document.documentElement.setAttribute('data-gm-b', x.responseText) });");
    server.hits.length = 0;
    await tab.goto(url("abortpage.test"), { waitUntil: "load" });
    const a = await until(() => tab.evaluate(() => document.documentElement.getAttribute("data-gm-a")), (v) => v, 5000);
    assert.match(a, /^aborted /);
    const abortedAt = Number(a.split(" ")[1]);
    // The server sees A's connection closed soon after the abort, before it would answer.
    const closed = await until(() => server.hits.find((x) => x.startsWith("closed /slow?a")), (v) => v, 3000);
    assert.ok(closed, JSON.stringify(server.hits));
    assert.ok(Number(closed.split(" ")[2]) - abortedAt < 1500, `${closed} vs abort at ${abortedAt}`);
    assert.ok(!server.hits.some((x) => x.startsWith("answered /slow?a")), JSON.stringify(server.hits));
    // B's request, number 1 too, was not touched.
    const b = await until(() => tab.evaluate(() => document.documentElement.getAttribute("data-gm-b")), (v) => v, 8000);
    assert.equal(b, "slow");
    assert.ok(server.hits.some((x) => x.startsWith("answered /slow?b")), JSON.stringify(server.hits));
  });

  // Scripts fire batches (check 50 links, fetch a gallery): past the 16 a script may have in
  // flight, a request waits its turn in the worker instead of failing. Spread over 8 hosts so
  // Chrome's 6 connections per host do not queue them first: what the server sees at once is
  // what the provider sent at once.
  test("GM_xmlhttpRequest: 40 at once all arrive, at most 16 sent at a time", T, async () => {
    await write("batch", ["@match http://batchpage.test/*", "@grant GM_xmlhttpRequest", "@connect api.test"],
      "const out = {}, N = 40;\n"
      + "const done = () => { if (Object.keys(out).length === N) document.documentElement.setAttribute('data-gm-batch', JSON.stringify(out)); };\n"
      + "for (let i = 0; i < N; i++) GM_xmlhttpRequest({ url: `http://h${i % 8}.api.test:${location.port}/held?i=${i}`,\n"
      + "  onload: (r) => { out[i] = r.responseText; done(); }, onerror: (e) => { out[i] = 'error: ' + e.error; done(); } });");
    server.held.peak = 0;
    await tab.goto(url("batchpage.test"), { waitUntil: "load" });
    const got = await tab.waitForFunction(() => document.documentElement.getAttribute("data-gm-batch"), null, { timeout: 30_000 });
    const out = JSON.parse(await got.jsonValue());
    assert.deepEqual(out, Object.fromEntries(Array.from({ length: 40 }, (_, i) => [i, `/held?i=${i}`])));
    assert.equal(server.held.peak, 16, `the server had ${server.held.peak} open at once`);
  });

  test("values: a change in one tab reaches the listeners of the same script in another tab (remote: true)", T, async () => {
    await write("sync", ["@match http://sync.test/*", "@grant GM_setValue", "@grant GM_getValue", "@grant GM_addValueChangeListener"],
      "GM_addValueChangeListener('shared', (k, o, n, remote) => document.documentElement.setAttribute('data-gm-heard', JSON.stringify([o ?? null, n, remote])));\n"
      + "document.documentElement.setAttribute('data-gm-start', String(GM_getValue('shared', 'none')));\n"
      + "if (location.pathname === '/writer') setTimeout(() => GM_setValue('shared', 'from-writer'), 1500);");
    const other = await h.context.newPage();
    try {
      await other.goto(url("sync.test", "/listener"), { waitUntil: "load" });
      await sleep(500);
      await load(url("sync.test", "/writer"));
      const heard = await until(() => other.evaluate(() => document.documentElement.getAttribute("data-gm-heard")), (v) => v, 8000);
      assert.deepEqual(JSON.parse(heard), [null, "from-writer", true]);
      // The writer's own listener heard its own change as local.
      const own = await until(() => tab.evaluate(() => document.documentElement.getAttribute("data-gm-heard")), (v) => v, 3000);
      assert.deepEqual(JSON.parse(own), [null, "from-writer", false]);
    } finally {
      await other.close();
    }
  });

  // A listener's wait is answered by one change; changes made before it asks again used to
  // reach no one. Its wait now carries the cursor of its last answer.
  test("values: a listener hears every change made while it was not waiting, also across a worker restart", T, async () => {
    await write("gap", ["@match http://gap.test/*", "@grant GM_setValue", "@grant GM_addValueChangeListener"],
      "if (location.pathname === '/listener') {\n"
      + "  const heard = [];\n"
      + "  GM_addValueChangeListener('n', (k, o, n, remote) => {\n"
      + "    heard.push([n, remote]);\n"
      + "    document.documentElement.setAttribute('data-gm-heard', JSON.stringify(heard));\n"
      + "    // Busy on the first change: the next ones are made before this page asks again.\n"
      + "    if (heard.length === 1) { const t = Date.now(); while (Date.now() - t < 600); }\n"
      + "  });\n"
      + "} else document.addEventListener('x-set', (e) => GM_setValue('n', e.detail));");
    const writer = await h.context.newPage();
    const set = (v) => writer.evaluate((d) => document.dispatchEvent(new CustomEvent("x-set", { detail: d })), v);
    const heard = () => tab.evaluate(() => JSON.parse(document.documentElement.getAttribute("data-gm-heard") ?? "[]"));
    try {
      await tab.goto(url("gap.test", "/listener"), { waitUntil: "load" });
      await writer.goto(url("gap.test", "/writer"), { waitUntil: "load" });
      await sleep(800);
      await set(1);
      await sleep(150);
      await set(2);
      await sleep(100);
      await set(3);
      const got = await until(heard, (v) => v.length >= 3, 6000);
      assert.deepEqual(got, [[1, true], [2, true], [3, true]]);
      // The worker stops: the listener's wait is lost with it. A change made before the page
      // asks a new worker is heard all the same.
      await h.stopProviderWorker();
      await set(4);
      const after = await until(heard, (v) => v.length >= 4, 8000);
      assert.deepEqual(after.slice(3), [[4, true]]);
    } finally {
      await writer.close();
    }
  });

  // A page heard another page's change to a key while its own change of that key was on its
  // way, and took it: the worker stored its own after, so its copy was wrong for good. And one
  // page's successive sets, each its own message, could be stored out of order.
  test("values: two listener pages writing one key at once each end with what is stored, and a page's last set is the one stored", T, async () => {
    const body = "const root = document.documentElement;\n"
      + "GM_addValueChangeListener('k', () => {});\n"
      + "document.addEventListener('x-storm', (e) => { let i = 0; const step = () => { GM_setValue('k', e.detail + (i++)); if (i < 15) setTimeout(step, 2); else root.setAttribute('data-gm-done', '1'); }; step(); });\n"
      + "document.addEventListener('x-get', () => root.setAttribute('data-gm-k', JSON.stringify(GM_getValue('k', null))));";
    const s = await write("race", ["@match http://race.test/*", "@grant GM_setValue", "@grant GM_getValue", "@grant GM_addValueChangeListener"], body);
    const other = await h.context.newPage();
    const storm = (page, prefix) => page.evaluate((d) => document.dispatchEvent(new CustomEvent("x-storm", { detail: d })), prefix);
    const copy = async (page) => { await page.evaluate(() => document.dispatchEvent(new Event("x-get"))); return JSON.parse(await page.evaluate(() => document.documentElement.getAttribute("data-gm-k"))); };
    try {
      await tab.goto(url("race.test", "/p"), { waitUntil: "load" });
      await other.goto(url("race.test", "/q"), { waitUntil: "load" });
      await sleep(600);
      for (const round of [0, 1, 2]) {
        await Promise.all([storm(tab, `P${round}-`), storm(other, `Q${round}-`)]);
        await sleep(2500);
        const kept = JSON.parse((await stored(`values/${s.uuid}`)).k);
        assert.match(kept, new RegExp(`^[PQ]${round}-14$`), "each page's last set is stored after its earlier ones");
        assert.deepEqual([await copy(tab), await copy(other)], [kept, kept], `round ${round}`);
      }
    } finally {
      await other.close();
    }
  });

  // A timer queued while the page unloads never fires: a change made in `pagehide` (or as the
  // tab is closed) must still be sent while the page can send it.
  test("values: a change made as the page is left, or as its tab is closed, is stored", T, async () => {
    await write("leave", ["@match http://leave.test/*", "@grant GM_setValue", "@grant GM_getValue"],
      "document.documentElement.setAttribute('data-gm-seen', JSON.stringify([GM_getValue('hide', null), GM_getValue('vis', null), GM_getValue('gone', null)]));\n"
      // Only the two pages the test leaves write: a /check page left for the next /check (while
      // the closed tab's value is still on its way) once wrote 'hide' over '/left'.
      + "addEventListener('pagehide', () => { const p = location.pathname; if (p === '/closed' || p === '/left') GM_setValue(p === '/closed' ? 'gone' : 'hide', p); });\n"
      + "document.addEventListener('visibilitychange', () => { if (document.visibilityState === 'hidden' && location.pathname === '/closed') GM_setValue('vis', 'hidden'); });");
    await load(url("leave.test", "/left"));
    await tab.goto(url("other.test", "/"), { waitUntil: "load" });
    const closing = await h.context.newPage();
    await closing.goto(url("leave.test", "/closed"), { waitUntil: "load" });
    await sleep(300);
    await closing.close({ runBeforeUnload: true });
    const seen = await until(async () => (await load(url("leave.test", "/check"))).seen, (v) => v && !JSON.parse(v).includes(null), 8000);
    assert.deepEqual(JSON.parse(seen), ["/left", "hidden", "/closed"]);
  });

  // A tester's: a counter set just before each navigation lost 4 of 32 (the next page's copy,
  // Chrome's registration, not yet updated). What README tells such a script: await the set.
  test("values: a value awaited with GM.setValue before navigating is on the next page", T, async () => {
    await write("chain", ["@match http://chain.test/*", "@grant GM_getValue", "@grant GM.setValue"],
      "(async () => { const n = GM_getValue('count', 0) + 1; await GM.setValue('count', n);\n"
      + "const i = Number(location.pathname.slice(2)) || 0; document.documentElement.setAttribute('data-gm-count', n + ' at ' + i);\n"
      + "if (i < 20) location.href = '/p' + (i + 1); })();");
    await tab.goto(url("chain.test", "/p0"), { waitUntil: "load" });
    await tab.waitForURL(/\/p20$/, { timeout: 30_000 });
    await tab.waitForFunction(() => document.documentElement.hasAttribute("data-gm-count"), null, { timeout: 5000 });
    assert.equal(await tab.evaluate(() => document.documentElement.getAttribute("data-gm-count")), "21 at 20");
  });

  // Without a listener, no request waits in the worker for this page; its copy is asked for
  // again as the script reads (at most every 5 s) and when the page is shown again.
  test("values: a page without a listener reads another tab's change, and its read-modify-write keeps it", T, async () => {
    await write("stale", ["@match http://stale.test/*", "@grant GM_setValue", "@grant GM_getValue"],
      "const put = () => document.documentElement.setAttribute('data-gm-list', JSON.stringify(GM_getValue('list', [])));\n"
      + "setInterval(put, 250);\n"
      + "document.addEventListener('x-add', () => { const l = GM_getValue('list', []); l.push(location.pathname); GM_setValue('list', l); put(); });");
    const other = await h.context.newPage();
    const add = (page) => page.evaluate(() => document.dispatchEvent(new Event("x-add")));
    const list = (page) => page.evaluate(() => document.documentElement.getAttribute("data-gm-list"));
    try {
      await load(url("stale.test", "/A"));
      await other.goto(url("stale.test", "/B"), { waitUntil: "load" });
      await sleep(400);
      await add(other);
      // Tab A, loaded before the change and never told of it, sees it.
      const seen = await until(() => list(tab), (v) => v === JSON.stringify(["/B"]), 9000);
      assert.equal(seen, JSON.stringify(["/B"]));
      await add(tab);
      assert.equal(await until(() => list(other), (v) => v === JSON.stringify(["/B", "/A"]), 9000), JSON.stringify(["/B", "/A"]));
      const s = await until(async () => (await load(url("stale.test", "/C"))).list, (v) => v === JSON.stringify(["/B", "/A"]), 5000);
      assert.equal(s, JSON.stringify(["/B", "/A"]));
    } finally {
      await other.close();
    }
  });

  // A page's copy may be behind another tab's change: setting (or deleting) what the copy
  // already holds must still reach storage, or the last write of this tab is lost.
  test("values: a set or delete equal to this page's stale copy still replaces another tab's later change", T, async () => {
    await write("toggle", ["@match http://toggle.test/*", "@grant GM_setValue", "@grant GM_getValue", "@grant GM_deleteValue"],
      "document.documentElement.setAttribute('data-gm-flag', JSON.stringify(GM_getValue('flag', 'none')));\n"
      + "document.addEventListener('x-set', (e) => GM_setValue('flag', e.detail));\n"
      + "document.addEventListener('x-del', () => GM_deleteValue('flag'));");
    const other = await h.context.newPage();
    const fire = (page, type, detail) => page.evaluate(([t, d]) => document.dispatchEvent(new CustomEvent(t, { detail: d })), [type, detail]);
    const storedNow = async () => (await load(url("toggle.test", "/check"))).flag;
    try {
      await other.goto(url("toggle.test", "/B"), { waitUntil: "load" });
      const A = await h.context.newPage();
      await A.goto(url("toggle.test", "/A"), { waitUntil: "load" });
      await sleep(300);
      await fire(A, "x-set", "off");
      await sleep(600);
      await fire(other, "x-set", "on");
      await until(storedNow, (v) => v === '"on"', 5000);
      // A's copy still says "off": its "off" is sent all the same.
      await sleep(1100);
      await fire(A, "x-set", "off");
      assert.equal(await until(storedNow, (v) => v === '"off"', 5000), '"off"');
      await fire(A, "x-del");
      assert.equal(await until(storedNow, (v) => v === '"none"', 5000), '"none"');
      await fire(other, "x-set", "on2");
      await until(storedNow, (v) => v === '"on2"', 5000);
      await sleep(1100);
      await fire(A, "x-del");
      assert.equal(await until(storedNow, (v) => v === '"none"', 5000), '"none"');
      await A.close();
    } finally {
      await other.close();
    }
  });
});

// Chrome runs a spanning extension's service worker in the regular profile: its fetch carries
// the regular profile's cookies and stores the answer's there, whatever window the script asked
// from. A script in an incognito window must not send the user's signed-in identity to the site
// (which could read it back into the incognito page), nor leave cookies in the regular profile.
describe("gm: GM_xmlhttpRequest from an incognito window", () => {
  let env, h, server;
  before(async () => {
    env = await setUp({ server: pageServer, incognito: true });
    ({ h, server } = env);
  });
  after(async () => { await env?.close(); });

  test("sends no cookie of the regular profile; from a regular window the site's cookies go", T, async () => {
    const source = script("incognito", ["@match http://incog.test/*", "@grant GM_xmlhttpRequest", "@connect api.test"],
      "GM_xmlhttpRequest({ url: `http://api.test:${location.port}/whoami?from=${location.pathname.slice(1)}` });");
    const saved = await h.internal("scripts.save", { source });
    assert.ok(saved.result?.script?.uuid, JSON.stringify(saved));
    const P = server.port;
    // The user is signed in to api.test in the regular profile.
    const regular = await h.context.newPage();
    await regular.goto(`http://api.test:${P}/login`, { waitUntil: "load" });
    assert.equal(await regular.evaluate(() => document.body.textContent), "sid=from-redirect");
    await regular.goto(`http://incog.test:${P}/regular`, { waitUntil: "load" });
    const fromRegular = await until(() => server.hits.find((x) => x.startsWith("whoami /whoami?from=regular")), (v) => v, 8000);
    assert.equal(fromRegular, "whoami /whoami?from=regular sid=from-redirect");
    // The same script in an incognito window.
    const opener = await h.providerPage();
    const win = await opener.evaluate((u) => chrome.windows.create({ incognito: true, url: u }).then((w) => w.id), `http://incog.test:${P}/private`);
    try {
      const fromPrivate = await until(() => server.hits.find((x) => x.startsWith("whoami /whoami?from=private")), (v) => v, 8000);
      assert.equal(fromPrivate, "whoami /whoami?from=private no cookie", JSON.stringify(server.hits));
    } finally {
      await opener.evaluate((id) => chrome.windows.remove(id), win).catch(() => {});
    }
  });
});

// Every accepted channel message waits in the worker's wasm memory until it is handled (a value
// batch waits for the values lock), and that memory never shrinks. The rate window admits 600 GM
// requests a minute per script: before the backlog bound, one script setting a 200 KiB value
// 600 times, each in a task of its own (~2 s), grew the worker's memory from 1.4 to 127.7 MB.
describe("gm: a burst of GM requests is bounded in the worker's memory", () => {
  let env, h, server, session;
  before(async () => {
    env = await setUp({ server: pageServer });
    ({ h, server, session } = env);
  });
  after(async () => { await env?.close(); });

  test("past 8 MiB waiting, the script's requests are refused with the reason; the provider keeps answering", T, async () => {
    // Requests with 200 KiB bodies to an answer that takes 4 s: each waits in the worker with
    // its body. (Value changes no longer make such a burst: a page sends one batch at a time.)
    const source = script("burst", ["@match http://burst.test/*", "@grant GM_xmlhttpRequest", "@connect self"], [
      "const said = [], big = 'x'.repeat(200 * 1024);",
      "console.error = (m) => said.push(String(m));",
      // 500: within the 600 GM requests a minute, so no refusal here is the rate window's.
      "for (let i = 0; i < 500; i++) GM_xmlhttpRequest({ method: 'POST', url: '/slow?' + i, data: big + i, onerror: (e) => said.push(String(e.error)) });",
      "setTimeout(() => { document.documentElement.dataset.said = JSON.stringify([...new Set(said)]); document.documentElement.dataset.count = String(said.length); }, 8000);",
    ].join("\n"));
    const saved = await h.internal("scripts.save", { source });
    assert.ok(saved.result?.script?.uuid, JSON.stringify(saved));
    const before = await h.workerWasmMemory();
    const page = await h.context.newPage();
    await page.goto(`http://burst.test:${server.port}/`, { waitUntil: "load" });
    await page.waitForFunction(() => document.documentElement.dataset.said, null, { timeout: 60_000 });
    const said = JSON.parse(await page.evaluate(() => document.documentElement.dataset.said));
    const refused = Number(await page.evaluate(() => document.documentElement.dataset.count));
    await page.close();
    const grown = (await h.workerWasmMemory()) - before;
    assert.ok(grown < 24 << 20, `the wasm grew by ${(grown / 1048576).toFixed(1)} MB`);
    assert.ok(refused > 0, "no change was refused");
    assert.deepEqual(said, ["GM: refused, this script already has 8 MiB of requests waiting in the provider; wait for their answers before sending more"]);
    const pong = await h.lumo("ping", session);
    assert.ok(!pong?.error, JSON.stringify(pong));
  });
});

// A GM_xmlhttpRequest answer is read in the worker, then copied to the page: 16 requests of a
// script may be in flight, each of up to 5 MiB. Before the answers' byte budget, one script's 16
// requests of a 5 MiB answer at once grew the worker's wasm memory from 1.4 to 53 MB for its life
// (and four scripts could hold 64 of them); now an answer of unknown length that would pass
// 10 MiB of its script's answers being received at once is stopped, and the script is told why,
// while answers that say their length wait for room before they are read, and all arrive.
describe("gm: GM_xmlhttpRequest answers are bounded in the worker's memory", () => {
  let env, h, server, session;
  before(async () => {
    env = await setUp({ server: pageServer });
    ({ h, server, session } = env);
  });
  after(async () => { await env?.close(); });

  test("16 answers of 5 MiB at once: of unknown length, past 10 MiB some are stopped with the reason; of known length, all arrive in turns; small ones in parallel all arrive", T, async () => {
    const MiB = 1024 * 1024;
    const source = script("hog", ["@match http://hog.test/*", "@grant GM_xmlhttpRequest", "@connect api.test"], [
      "const big = {}, sized = {}, small = {};",
      "const batch = (out, n, size, next, more = '') => {",
      "  for (let i = 0; i < n; i++) {",
      "    const type = i % 2 ? 'arraybuffer' : 'text';",
      "    GM_xmlhttpRequest({ url: `http://api.test:${location.port}/big?n=${size}&i=${i}&of=${n}${more}`, responseType: type,",
      "      onload: (r) => { out[i] = ['load', type === 'text' ? r.responseText.length : r.response.byteLength]; if (Object.keys(out).length === n) next(); },",
      "      onerror: (e) => { out[i] = ['error', e.error]; if (Object.keys(out).length === n) next(); },",
      "      onabort: () => { out[i] = ['abort']; if (Object.keys(out).length === n) next(); } });",
      "  }",
      "};",
      `batch(big, 16, ${5 * MiB}, () => batch(sized, 16, ${5 * MiB}, () => batch(small, 16, ${200 * 1024}, () => {`,
      "  document.documentElement.dataset.out = JSON.stringify({ big: Object.values(big), sized: Object.values(sized), small: Object.values(small) });",
      "})), '&unsized');",
    ].join("\n"));
    const saved = await h.internal("scripts.save", { source });
    assert.ok(saved.result?.script?.uuid, JSON.stringify(saved));
    const before = await h.workerWasmMemory();
    const page = await h.context.newPage();
    await page.goto(`http://hog.test:${server.port}/`, { waitUntil: "load" });
    await page.waitForFunction(() => document.documentElement.dataset.out, null, { timeout: 60_000 });
    const out = JSON.parse(await page.evaluate(() => document.documentElement.dataset.out));
    await page.close();
    const grown = (await h.workerWasmMemory()) - before;
    console.log(`# wasm grew by ${(grown / MiB).toFixed(1)} MB; big answers: ${JSON.stringify(out.big.map((r) => r[0] === "error" ? r[1].slice(0, 60) : r))}`);
    assert.ok(grown < 24 * MiB, `the wasm grew by ${(grown / MiB).toFixed(1)} MB`);
    const loaded = out.big.filter((r) => r[0] === "load");
    const stopped = out.big.filter((r) => r[0] === "error");
    assert.equal(loaded.length + stopped.length, 16, JSON.stringify(out.big));
    assert.ok(loaded.length >= 1, "no answer arrived whole");
    for (const r of loaded) assert.equal(r[1], 5 * MiB);
    assert.ok(stopped.length >= 1, "no answer was stopped");
    for (const [, e] of stopped) {
      assert.match(e, /^GM_xmlhttpRequest: the answer was stopped after \d+ bytes: this script's answers being received may hold at most 10 MiB in the provider at once/, e);
    }
    // A stopped answer's connection was closed, not read to its end — unless the server had
    // already sent all of it when the stop came (its last chunk). Only stopped ones are
    // closed. The script hears of a stop before the server sees the close: waited for.
    const stoppedAt = out.big.flatMap((r, i) => (r[0] === "error" ? [i] : []));
    const closedAt = () => server.hits.flatMap((x) => x.match(/^closed \/big\?n=\d+&i=(\d+)&of=\d+&unsized$/)?.slice(1).map(Number) ?? []);
    for (const deadline = Date.now() + 5000; closedAt().length < stopped.length && Date.now() < deadline;) await sleep(50);
    assert.ok(closedAt().length >= 1, "no stopped answer's connection was closed");
    for (const i of closedAt()) assert.ok(stoppedAt.includes(i), `answer ${i} was closed but not stopped: ${JSON.stringify(out.big)}`);
    // Of known length, the same 16 take turns for the budget: none stopped, none closed.
    assert.deepEqual(out.sized, Array.from({ length: 16 }, () => ["load", 5 * MiB]));
    assert.ok(!server.hits.some((x) => x.startsWith("closed /big") && !x.endsWith("&unsized")), JSON.stringify(server.hits));
    // Ordinary parallel requests (16 of 200 KiB, 3.2 MiB together) are not affected.
    assert.deepEqual(out.small, Array.from({ length: 16 }, () => ["load", 200 * 1024]));
    const pong = await h.lumo("ping", session);
    assert.ok(!pong?.error, JSON.stringify(pong));
  });
});

// A page in the back/forward cache keeps its listener's wait, which is never answered, and the
// tab's next page has the same tab and frame: its changes were taken for the restored page's own.
describe("gm: a value listener across the back/forward cache", () => {
  let env, h, server, tab, ok;
  before(async () => {
    env = await setUp({ server: pageServer, launch: { bfcache: true } });
    ({ h, server, tab } = env);
    ({ ok } = env.tools);
  });
  after(async () => { await env?.close(); });

  test("a listener page restored from the cache hears what the tab's next page changed, and later changes", T, async () => {
    const url = (host, path = "/") => `http://${host}:${server.port}${path}`;
    const { script: s } = await ok("write_script", { source: script("bf", ["@match http://bf.test/*", "@grant GM_setValue", "@grant GM_getValue", "@grant GM_addValueChangeListener"],
      "const root = document.documentElement, heard = [];\n"
      + "for (const key of ['k', 'n']) GM_addValueChangeListener(key, (k, o, n, remote) => { heard.push([k, n, remote]); root.setAttribute('data-gm-heard', JSON.stringify(heard)); });\n"
      + "document.addEventListener('x-set', (e) => GM_setValue(...JSON.parse(e.detail)));\n"
      + "addEventListener('pageshow', (e) => { if (e.persisted) root.setAttribute('data-gm-restored', '1'); });") });
    const set = (page, k, v) => page.evaluate((d) => document.dispatchEvent(new CustomEvent("x-set", { detail: d })), JSON.stringify([k, v]));
    const heard = () => tab.evaluate(() => JSON.parse(document.documentElement.getAttribute("data-gm-heard") ?? "[]"));
    await tab.goto(url("bf.test", "/a"), { waitUntil: "load" });
    await sleep(800);
    await set(tab, "k", "A1");
    await sleep(500);
    await tab.goto(url("bf.test", "/b"), { waitUntil: "load" });
    await sleep(800);
    await set(tab, "k", "fromB");
    await set(tab, "n", "nB");
    await sleep(800);
    await tab.goBack({ waitUntil: "commit" });
    await until(() => tab.evaluate(() => document.documentElement.getAttribute("data-gm-restored")), (v) => v === "1", 5000);
    const got = await until(heard, (v) => v.length >= 3, 6000);
    assert.deepEqual(got, [["k", "A1", false], ["k", "fromB", true], ["n", "nB", true]]);
    const o = await h.context.newPage();
    try {
      await o.goto(url("bf.test", "/other"), { waitUntil: "load" });
      await sleep(600);
      await set(o, "n", "fromOther");
      const later = await until(heard, (v) => v.length >= 4, 6000);
      assert.deepEqual(later[3], ["n", "fromOther", true]);
    } finally {
      await o.close();
    }
    await h.internal("scripts.delete", { uuid: s.uuid });
  });
});
