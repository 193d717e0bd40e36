// @require and @resource in real Chrome: fetched from a local server when the script is written
// (through the MCP tools, official SDK client in the test host), then run from the stored bytes
// even when that server refuses; refusals (a failed fetch, a hash mismatch, a huge answer, a
// redirect to a cleartext host) store nothing. What a script could do is read from what it wrote
// into the page.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { createServer } from "node:http";
import { after, before, beforeEach, describe, test } from "node:test";
import { setUp } from "./lib/agent.mjs";
import { PROVIDER_ID } from "./lib/harness.mjs";
import { sleep } from "./lib/util.mjs";

const T = { timeout: 120_000 };
const HUGE_CHUNKS = 1024; // × 64 KiB

function script(name, lines, body) {
  return ["// ==UserScript==", `// @name REQ ${name}`, "// @namespace lumo-e2e-require",
    ...lines.map((l) => `// ${l}`), "// ==/UserScript==", body, ""].join("\n");
}

const LIB = "var LIB_NAME = 'tiny-lib'; function libShout(s) { return String(s).toUpperCase() + '!'; }";
const TEXT = "héllo resource ✓";
const SJIS = Buffer.from([0x93, 0xfa, 0x96, 0x7b]); // 日本
const JP = Buffer.from("var s = '\x1b$B';/*\x1b(B';\ndocument.documentElement.setAttribute('data-r-jp', 'ran');\n//*/\n", "latin1");
const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 1, 2, 255]);

/** The library server (on 127.0.0.1, http allowed for loopback) and the pages (any host name). */
async function server() {
  const hits = [];
  let refuse = false;
  let swapBody = "var REV = 'reviewed';";
  const srv = createServer((req, res) => {
    // A request on another host name is recorded with it: a redirect's hop must never reach it.
    hits.push(req.headers.host?.startsWith("127.0.0.1:") ? req.url : `${req.headers.host}${req.url}`);
    const path = req.url.split("?")[0];
    if (refuse && path !== "/page") { res.writeHead(503); res.end("gone"); return; }
    // ASCII bytes that iso-2022-jp reads otherwise than UTF-8: its escape turns `/*` into a kanji
    // inside the string, so the line after it is code, not a comment.
    if (path === "/jp.js") {
      res.writeHead(200, { "content-type": "text/javascript; charset=iso-2022-jp" });
      res.end(JP);
      return;
    }
    // 130,000 lines: spread as arguments, the popup's "Show the whole file" overflowed the stack.
    if (path === "/many-lines.js") { res.writeHead(200, { "content-type": "text/javascript" }); res.end("x;\n".repeat(130_000) + "var LAST = 1;\n"); return; }
    if (path === "/swap.js") { res.writeHead(200, { "content-type": "text/javascript" }); res.end(swapBody); return; }
    if (path === "/lib.js") { res.writeHead(200, { "content-type": "text/javascript" }); res.end(LIB); return; }
    if (path === "/text.txt") { res.writeHead(200, { "content-type": "text/plain; charset=utf-8" }); res.end(TEXT); return; }
    if (path === "/img.png") { res.writeHead(200, { "content-type": "image/png" }); res.end(PNG); return; }
    // Text in other charsets than UTF-8, as their Content-Type says: windows-1252's `é` and `€`
    // (0xE9, 0x80) and Shift_JIS's 日本.
    if (path === "/latin.js") {
      res.writeHead(200, { "content-type": "text/javascript; charset=iso-8859-1" });
      res.end(Buffer.concat([Buffer.from("var LATIN = 'caf"), Buffer.from([0xe9, 0x20, 0x80]), Buffer.from("';")]));
      return;
    }
    // UTF-8 with a byte order mark, served as Latin-1: the mark wins, as in a <script src>.
    if (path === "/bom.js" || path === "/bom.txt") {
      res.writeHead(200, { "content-type": "text/javascript; charset=iso-8859-1" });
      res.end(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(path === "/bom.js" ? "var BOM = 'é';" : "é")]));
      return;
    }
    if (path === "/sjis.txt") { res.writeHead(200, { "content-type": "text/plain; charset=Shift_JIS" }); res.end(SJIS); return; }
    if (path === "/missing.js") { res.writeHead(404); res.end("no"); return; }
    // A library that does not parse, and one whose function throws when a timer calls it.
    if (path === "/broken.js") { res.writeHead(200, { "content-type": "text/javascript" }); res.end("var ok = 1;\nlet q = ;\n"); return; }
    if (path === "/thrower.js") { res.writeHead(200, { "content-type": "text/javascript" }); res.end("function libBoom() {\n  throw new Error('lib boom');\n}\n"); return; }
    // 900 KiB of a library whose bytes differ by its `?v=`.
    if (path === "/big.js") {
      const v = new URL(req.url, "http://x").searchParams.get("v");
      res.writeHead(200, { "content-type": "text/javascript" });
      res.end(`var BIG = ${JSON.stringify(v)}; /*${"x".repeat(900 * 1024)}*/`);
      return;
    }
    if (path === "/redirect.js") {
      // To another host, in cleartext: the name resolves here too, but is not this computer's.
      res.writeHead(302, { location: `http://evil.test:${srv.address().port}/lib.js` }); res.end(); return;
    }
    if (path === "/hop.js") {
      // Relative, on the same host: Chrome resolves it, the worker judges it, then asks for it.
      res.writeHead(302, { location: "/lib.js?hop" }); res.end(); return;
    }
    if (path === "/huge.js") {
      // 64 MiB in chunks, no content-length: only a reader that stops can refuse it early. Far
      // more than loopback and Chrome's network buffers hold (8 MiB fitted in them under load,
      // so the server had written every chunk before the reader's cancel reached it).
      res.writeHead(200, { "content-type": "text/javascript" });
      const chunk = Buffer.alloc(64 * 1024, 0x61);
      let sent = 0;
      const pump = () => {
        while (sent < HUGE_CHUNKS) {
          sent++;
          if (!res.write(chunk)) { res.once("drain", pump); return; }
        }
        res.end();
      };
      res.on("close", () => { hits.push(`/huge.js closed after ${sent} chunks`); });
      pump();
      return;
    }
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end("<!doctype html><title>page</title><p id=p>text</p>");
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  return {
    port: srv.address().port, hits,
    refuse(v) { refuse = v; },
    swap(body) { swapBody = body; },
    close: () => new Promise((r) => { srv.close(r); srv.closeAllConnections(); }),
  };
}

describe("require: @require/@resource fetched at write, run from storage", () => {
  let env, h, srv, tab, call, ok;
  const lib = (p) => `http://127.0.0.1:${srv.port}${p}`;
  const load = async (host) => {
    await tab.goto(`http://${host}:${srv.port}/page`, { waitUntil: "load" });
    await sleep(400);
    return tab.evaluate(() => Object.fromEntries([...document.documentElement.attributes]
      .filter((a) => a.name.startsWith("data-r-")).map((a) => [a.name.slice(7), a.value])));
  };
  /** Every `asset/…` key in the provider's storage. */
  const assetKeys = async () => {
    const page = await h.context.newPage();
    try {
      await page.goto(`chrome-extension://${PROVIDER_ID}/options.html`);
      return await page.evaluate(async () => Object.keys(await chrome.storage.local.get(null)).filter((k) => k.startsWith("asset/")).sort());
    } finally {
      await page.close();
    }
  };

  // The shared set-up (lib/agent.mjs): the test host approved, "Allow User Scripts" on, the
  // provider seen ready, an MCP session, a tab; this file's own library and page server.
  before(async () => {
    env = await setUp({ server });
    ({ h, server: srv, tab } = env);
    ({ call, ok } = env.tools);
  });
  beforeEach(async () => {
    if (!env) return;
    srv.refuse(false);
    for (const s of (await ok("list_scripts", { limit: 100 })).scripts) await h.internal("scripts.delete", { uuid: s.uuid });
  });
  after(async () => { await env?.close(); });

  test("written with @require from a local server; the server then refuses, the worker restarts, and a page still runs the script with the library", T, async () => {
    const hash = createHash("sha256").update(LIB).digest("hex");
    const { script: s } = await ok("write_script", { source: script("uses lib", [
      "@match http://lib.test/*", `@require ${lib("/lib.js")}#sha256=${hash}`,
    ], "document.documentElement.setAttribute('data-r-lib', libShout(LIB_NAME));") });
    assert.deepEqual(s.assets.map((a) => [a.url, a.sha256, a.size]), [[`${lib("/lib.js")}#sha256=${hash}`, hash, LIB.length]]);
    assert.equal(srv.hits.filter((u) => u === "/lib.js").length, 1);
    srv.refuse(true);
    await h.stopProviderWorker();
    assert.deepEqual(await load("lib.test"), { lib: "TINY-LIB!" });
    // The library was never asked for again: the page ran on the stored bytes.
    assert.equal(srv.hits.filter((u) => u === "/lib.js").length, 1);
    // The library's globals are the script's own (its world), not the page's.
    assert.equal(await tab.evaluate(() => typeof window.libShout), "undefined");
    // validate_script no longer says it is not loaded.
    const v = await ok("validate_script", { source: script("v", ["@match http://lib.test/*", `@require ${lib("/lib.js")}`], "1;") });
    assert.ok(!JSON.stringify(v).includes("not loaded"), JSON.stringify(v));
  });

  test("a script with a @require reports its own error at its own line (the library's lines are not counted)", T, async () => {
    const { script: s } = await ok("write_script", { source: script("throws", ["@match http://throw.test/*", `@require ${lib("/lib.js")}`],
      // Lines 1–6 are the metadata block: the body starts at line 7.
      "document.documentElement.setAttribute('data-r-before', libShout('x'));\nconsole.log('line 8');\nnull.boom;") });
    assert.deepEqual(await load("throw.test"), { before: "X!" });
    let run;
    for (const deadline = Date.now() + 5000; !run && Date.now() < deadline; await sleep(100)) {
      run = (await ok("script_runs", { uuid: s.uuid, errorsOnly: true })).runs[0];
    }
    assert.ok(run, "no run reported");
    assert.equal(run.error.name, "TypeError", JSON.stringify(run));
    assert.equal(run.error.line, 9, JSON.stringify(run.error));
    assert.equal(run.error.column, 6, JSON.stringify(run.error));
    assert.deepEqual(run.console.map((c) => [c.text, c.line]), [["line 8", 8]]);
  });

  // A tester's: an error in a @require read "at line ?, column ?", naming neither the file nor
  // that it was not the script's own code.
  test("an error in a @require's code is said to be there, not at a line of the script", T, async () => {
    const broken = (await ok("write_script", { source: script("req broken", ["@match http://reqerr.test/*", `@require ${lib("/broken.js")}`], "document.title = 'never';") })).script;
    const thrower = (await ok("write_script", { source: script("req thrower", ["@match http://reqerr.test/*", `@require ${lib("/thrower.js")}`], "setTimeout(libBoom, 10);") })).script;
    await tab.goto(`http://reqerr.test:${srv.port}/page`, { waitUntil: "load" });
    const first = async (uuid, late) => {
      for (const deadline = Date.now() + 5000; Date.now() < deadline; await sleep(100)) {
        const out = await call("script_runs", { uuid });
        const r = out.structuredContent.runs[0];
        if (r && (!late || r.lateErrors?.length)) return { r, text: out.content[0].text };
      }
      assert.fail("no run reported");
    };
    const b = await first(broken.uuid, false);
    assert.deepEqual([b.r.error?.name, b.r.error?.line, b.r.error?.inRequire], ["SyntaxError", null, true], JSON.stringify(b.r));
    assert.match(b.text, /"SyntaxError": .* in its @require code, before the script's own lines/);
    const t = await first(thrower.uuid, true);
    assert.deepEqual([t.r.lateErrors[0].message, t.r.lateErrors[0].line, t.r.lateErrors[0].inRequire], ["lib boom", null, true], JSON.stringify(t.r));
    // A try by uuid says the same.
    const tb = await call("try_script", { uuid: broken.uuid, url: `http://reqerr.test:${srv.port}/*` });
    const fb = tb.structuredContent.frames[0];
    assert.deepEqual([fb.error?.name, fb.error?.line, fb.error?.inRequire], ["SyntaxError", null, true], JSON.stringify(fb));
    assert.match(tb.content[0].text, /threw "SyntaxError": .* in its @require code/);
    const tt = await call("try_script", { uuid: thrower.uuid, url: `http://reqerr.test:${srv.port}/*`, watchMs: 300 });
    const ft = tt.structuredContent.frames[0];
    assert.deepEqual([ft.lateErrors?.[0]?.message, ft.lateErrors?.[0]?.inRequire], ["lib boom", true], JSON.stringify(ft));
    for (const s of [broken, thrower]) await h.internal("scripts.delete", { uuid: s.uuid });
  });

  test("try_script of a stored script runs it with its stored @require (offline), errors at the script's own lines", T, async () => {
    const { script: s } = await ok("write_script", { source: script("tried", ["@match http://trylib.test/*", `@require ${lib("/lib.js?try")}`],
      // Lines 1–6 are the metadata block: the body starts at line 7.
      "console.log(libShout(LIB_NAME));\nnull.boom;") });
    srv.refuse(true);
    await tab.goto(`http://trylib.test:${srv.port}/page`, { waitUntil: "load" });
    const r = await call("try_script", { uuid: s.uuid, url: `http://trylib.test:${srv.port}/*` });
    assert.equal(r.isError, false, r.content?.[0]?.text);
    const f = r.structuredContent.frames[0];
    assert.deepEqual(f.console.map((c) => [c.text, c.line]), [["TINY-LIB!", 7]], JSON.stringify(f));
    assert.equal(f.error.name, "TypeError", JSON.stringify(f.error));
    assert.equal(f.error.line, 8, JSON.stringify(f.error));
    assert.equal(f.error.column, 6, JSON.stringify(f.error));
    // Stored bytes, not a fetch: the library was asked for once, at the write.
    assert.equal(srv.hits.filter((u) => u === "/lib.js?try").length, 1);
  });

  // A tester's: tried by uuid, a script with @resource threw "GM_getResourceText is not a
  // function", though installed it ran.
  test("try_script of a stored script gives it its stored @resource files; a raw source's give null", T, async () => {
    const lines = ["@match http://tryres.test/*", `@resource txt ${lib("/text.txt")}`, "@grant GM_getResourceText", "@grant GM_getResourceURL"];
    const body = "return [GM_getResourceText('txt'), GM_getResourceURL('txt'), GM_getResourceText('nope')];";
    const { script: s } = await ok("write_script", { source: script("tried res", lines, body) });
    srv.refuse(true);
    await tab.goto(`http://tryres.test:${srv.port}/page`, { waitUntil: "load" });
    const r = await call("try_script", { uuid: s.uuid, url: `http://tryres.test:${srv.port}/*` });
    assert.equal(r.isError, false, r.content?.[0]?.text);
    const f = r.structuredContent.frames[0];
    assert.deepEqual(f.value, [TEXT, `data:text/plain;base64,${Buffer.from(TEXT).toString("base64")}`, null], JSON.stringify(f));
    // Raw, nothing is fetched for a try: the functions are there, and answer null.
    const raw = await call("try_script", { source: script("tried res raw", lines, body), url: `http://tryres.test:${srv.port}/*` });
    assert.deepEqual(raw.structuredContent.frames[0].value, [null, null, null], JSON.stringify(raw.structuredContent.frames[0]));
  });

  test("a redirect is followed only once judged: on this computer it is, to a cleartext host elsewhere nothing is asked", T, async () => {
    const { script: s } = await ok("write_script", { source: script("hop", ["@match http://hop.test/*", `@require ${lib("/hop.js")}`], "1;") });
    assert.deepEqual(s.assets.map((a) => [a.url, a.finalUrl, a.size]), [[lib("/hop.js"), lib("/lib.js?hop"), LIB.length]]);
    assert.equal(srv.hits.filter((u) => u === "/lib.js?hop").length, 1);
    const res = await call("write_script", { source: script("evil hop", ["@match http://hop.test/*", `@require ${lib("/redirect.js")}`], "1;") });
    assert.equal(res.isError, true, JSON.stringify(res.structuredContent));
    await sleep(200);
    // Before, the browser had followed it: the hop reached the server, and only its answer was refused.
    assert.deepEqual(srv.hits.filter((u) => u.startsWith("evil.test")), []);
    assert.match(res.content[0].text, /redirected to http:\/\/evil\.test:\d+\/lib\.js: only https URLs are loaded .*the redirect was not followed; the script was not stored/);
  });

  test("a failed fetch, a hash mismatch, a huge answer and a redirect to a cleartext host each refuse the write and store nothing", T, async () => {
    const before = await assetKeys();
    const cases = [
      [lib("/missing.js"), "HTTP 404"],
      [`${lib("/lib.js")}#sha256=${"0".repeat(64)}`, "do not have the sha256"],
      // Tampermonkey's other spellings are held too (before, `sha-256=` was silently ignored
      // and the file stored and run).
      [`${lib("/lib.js")}#sha-256=${"0".repeat(64)}`, "do not have the sha256"],
      [`${lib("/lib.js")}#x#SHA512-${Buffer.alloc(64).toString("base64")}`, "do not have the sha512"],
      // Said as the file's limit: the worker's reader stops past it and says so by its error's
      // kind (before, this was "could not be fetched (fetch: the response is over …)").
      [lib("/huge.js"), "is over the 1048576-byte limit for one file"],
      [lib("/redirect.js"), "redirected to http://evil.test"],
      [`http://127.0.0.1:1/nothing.js`, "could not be fetched"],
    ];
    for (const [url, says] of cases) {
      const res = await call("write_script", { source: script(`bad ${says}`, ["@match http://bad.test/*", `@require ${url}`], "1;") });
      assert.equal(res.isError, true, `${url}: ${JSON.stringify(res.structuredContent)}`);
      const text = res.content[0].text;
      assert.ok(text.includes(url.split("#")[0]) && text.includes(says) && text.includes("not stored"), text);
    }
    assert.deepEqual((await ok("list_scripts", {})).scripts, []);
    assert.deepEqual(await assetKeys(), before);
    // The huge answer was cut off, not read whole (the server sees the close a moment after).
    let closed;
    for (const deadline = Date.now() + 3000; !(closed = srv.hits.find((u) => u.startsWith("/huge.js closed"))) && Date.now() < deadline;) await sleep(50);
    assert.ok(closed && Number(closed.match(/after (\d+)/)[1]) < HUGE_CHUNKS, `huge: ${closed}`);
    assert.equal((await call("status", {})).isError, false);
  });

  test("GM_getResourceText gives the bytes, GM_getResourceURL a data: URL of the right type; another script's resource name gives null", T, async () => {
    await ok("write_script", { source: script("owner", [
      "@match http://res.test/*", `@resource txt ${lib("/text.txt")}`, `@resource img ${lib("/img.png")}`,
      "@grant GM_getResourceText", "@grant GM_getResourceURL", "@grant GM.getResourceUrl",
    ], "const el = document.documentElement;\n"
      + "el.setAttribute('data-r-text', GM_getResourceText('txt'));\n"
      + "el.setAttribute('data-r-url', GM_getResourceURL('img'));\n"
      + "GM.getResourceUrl('txt').then((u) => el.setAttribute('data-r-promise', u));") });
    // Violentmonkey's spelling: `GM.getResourceURL` (its `GM.<name>` for `GM_<name>`).
    await ok("write_script", { source: script("vm spelling", [
      "@match http://res.test/*", `@resource txt ${lib("/text.txt")}`, "@grant GM.getResourceURL",
    ], "document.documentElement.setAttribute('data-r-vm', String(GM.getResourceURL('txt')));") });
    await ok("write_script", { source: script("thief", [
      "@match http://res.test/*", "@grant GM_getResourceText",
    ], "document.documentElement.setAttribute('data-r-thief', String(GM_getResourceText('txt')));") });
    const seen = await load("res.test");
    assert.equal(seen.text, TEXT);
    assert.equal(seen.url, `data:image/png;base64,${PNG.toString("base64")}`);
    assert.equal(seen.promise, `data:text/plain;base64,${Buffer.from(TEXT).toString("base64")}`);
    assert.equal(seen.thief, "null");
    assert.equal(seen.vm, `data:text/plain;base64,${Buffer.from(TEXT).toString("base64")}`);
  });

  test("a @require and a @resource served in another charset than UTF-8 are read in it, as a <script src> would read them", T, async () => {
    await ok("write_script", { source: script("charsets", [
      "@match http://charset.test/*", `@require ${lib("/latin.js")}`, `@resource sj ${lib("/sjis.txt")}`,
      `@require ${lib("/bom.js")}`, `@resource bom ${lib("/bom.txt")}`,
      "@grant GM_getResourceText", "@grant GM_getResourceURL",
    ], "const el = document.documentElement;\n"
      + "el.setAttribute('data-r-latin', LATIN);\n"
      + "el.setAttribute('data-r-bom', BOM + GM_getResourceText('bom'));\n"
      + "el.setAttribute('data-r-sj', GM_getResourceText('sj'));\n"
      + "el.setAttribute('data-r-sjurl', GM_getResourceURL('sj'));") });
    const seen = await load("charset.test");
    // Read as UTF-8 (before), each was U+FFFD.
    assert.equal(seen.latin, "café €");
    assert.equal(seen.bom, "éé");
    assert.equal(seen.sj, "日本");
    assert.equal(seen.sjurl, `data:text/plain;charset=Shift_JIS;base64,${SJIS.toString("base64")}`);
  });

  // A tester swapped the file between the review and the approval, and the swapped code ran.
  test("review shows a new file's code as fetched for it; the approved write stores and runs those bytes, whatever the server sends after", T, async () => {
    const reviewed = "var REV = 'reviewed';";
    srv.swap(reviewed);
    const hash = createHash("sha256").update(reviewed).digest("hex");
    const hitsBefore = srv.hits.filter((u) => u === "/swap.js").length;
    await h.internal("policy.setSwitch", { name: "review", value: true });
    const popup = await h.context.newPage();
    try {
      await popup.setViewportSize({ width: 380, height: 600 });
      await popup.goto(`chrome-extension://${PROVIDER_ID}/popup.html`);
      const pending = call("write_script", { source: script("reviewed", ["@match http://rev.test/*", `@require ${lib("/swap.js")}`],
        "document.documentElement.setAttribute('data-r-rev', REV);") });
      const item = popup.locator("#reviews > li.review").filter({ has: popup.getByText('Create the script "REQ reviewed"', { exact: true }) });
      await item.waitFor({ timeout: 10_000 });
      const code = item.locator("pre.file");
      assert.equal(await code.innerText(), reviewed);
      assert.equal(await code.getAttribute("aria-label"), `Code of @require ${lib("/swap.js")}`);
      const effects = await item.locator("ul.effects").innerText();
      assert.ok(effects.includes(`This script loads code from ${lib("/swap.js")} (@require; listed below)`), effects);
      assert.ok(!effects.includes("not shown"), effects);
      // Fetched once, for the review; the server now answers other code.
      assert.equal(srv.hits.filter((u) => u === "/swap.js").length, hitsBefore + 1);
      srv.swap("var REV = 'swapped';");
      const approve = item.getByRole("button", { name: "Approve", exact: true });
      await popup.waitForFunction((id) => !document.querySelector(`button.primary[data-review="${id}"]`)?.disabled,
        await approve.getAttribute("data-review"), { timeout: 5000 });
      await approve.click();
      const res = await pending;
      assert.equal(res.isError, false, res.content?.[0]?.text);
      assert.deepEqual(res.structuredContent.script.assets.map((a) => a.sha256), [hash]);
      assert.equal(srv.hits.filter((u) => u === "/swap.js").length, hitsBefore + 1, "the approved write asked the server again");
      assert.deepEqual(await load("rev.test"), { rev: "reviewed" });
    } finally {
      await popup.close();
      await h.internal("policy.setSwitch", { name: "review", value: false });
    }
  });

  test("the popup shows the whole of a long file on request: 130,000 lines", T, async () => {
    await h.internal("policy.setSwitch", { name: "review", value: true });
    const popup = await h.context.newPage();
    try {
      await popup.setViewportSize({ width: 380, height: 600 });
      await popup.goto(`chrome-extension://${PROVIDER_ID}/popup.html`);
      const pending = call("write_script", { source: script("many lines", ["@match http://many.test/*", `@require ${lib("/many-lines.js")}`], "1;") });
      const item = popup.locator("#reviews > li.review").filter({ has: popup.getByText('Create the script "REQ many lines"', { exact: true }) });
      await item.waitFor({ timeout: 10_000 });
      assert.match(await item.locator("div.file").innerText(), /Not all of this file is shown: 400 of 130001 lines/);
      await item.getByRole("button", { name: "Show the whole file" }).click();
      await item.getByText(/^Showing the whole file: 130001 lines/).waitFor({ timeout: 20_000 });
      const shown = await item.locator("pre.file").evaluate((pre) => [pre.childElementCount, pre.lastElementChild.textContent]);
      assert.deepEqual(shown, [130_001, "var LAST = 1;"]);
      const review = (await h.internal("state.get")).reviews.find((r) => r.summary === 'Create the script "REQ many lines"');
      await h.internal("reviews.decide", { review: review.id, approve: false });
      const res = await pending;
      assert.equal(res.structuredContent?.error_code, "USER_REJECTED", JSON.stringify(res));
    } finally {
      await popup.close();
      // A review a failure above left waiting must not be the next test's.
      for (const r of (await h.internal("state.get")).reviews ?? []) await h.internal("reviews.decide", { review: r.id, approve: false }).catch(() => {});
      await h.internal("policy.setSwitch", { name: "review", value: false });
    }
  });

  // A reviewer's file served as iso-2022-jp: the review showed its code commented out, as UTF-8
  // reads it, and the browser ran it.
  test("review shows a @require's code as the browser reads it, in the charset its server names", T, async () => {
    await h.internal("policy.setSwitch", { name: "review", value: true });
    try {
      const pending = call("write_script", { source: script("jp", ["@match http://jp.test/*", `@require ${lib("/jp.js")}`], "1;") });
      let review;
      for (const deadline = Date.now() + 8000; !review && Date.now() < deadline; await sleep(100)) {
        review = (await h.internal("state.get")).reviews?.find((r) => r.summary === 'Create the script "REQ jp"');
      }
      assert.ok(review, "no review appeared");
      const read = new TextDecoder("iso-2022-jp").decode(JP);
      assert.ok(read.includes("\ndocument.documentElement.setAttribute('data-r-jp', 'ran');"), read);
      assert.equal(review.files[0].text, read.replace(/\n$/, ""));
      assert.match(review.files[0].note, /Read in iso-2022-jp/);
      await h.internal("reviews.decide", { review: review.id, approve: true });
      const res = await pending;
      assert.equal(res.isError, false, res.content?.[0]?.text);
      assert.deepEqual(await load("jp.test"), { jp: "ran" }, "what ran is what was shown");
    } finally {
      await h.internal("policy.setSwitch", { name: "review", value: false });
    }
  });

  // GreasyFork's versioned library URLs: each edit names a new 900 KiB file. The history kept
  // every old file (its bounds counted sources only), and the 8th edit was refused for the
  // storage quota, then every write with a file, for good.
  test("a library whose version changes at each edit does not fill the storage: the history lets old files go", { timeout: 300_000 }, async () => {
    const src = (v) => script("big", ["@match http://big.test/*", `@require ${lib("/big.js")}?v=${v}`],
      "document.documentElement.setAttribute('data-r-big', BIG);");
    let { script: s } = (await h.internal("scripts.save", { source: src(0) })).result;
    for (let v = 1; v <= 12; v++) {
      ({ script: s } = (await h.internal("scripts.save", { source: src(v), uuid: s.uuid, revision: s.revision })).result);
    }
    assert.deepEqual(await load("big.test"), { big: "12" });
    // The version before is still in the history, with its file.
    const revs = (await h.internal("scripts.revisions", { uuid: s.uuid })).revisions.map((r) => r.revision);
    assert.ok(revs.includes(s.revision - 1), JSON.stringify(revs));
    // Another script with a small library is stored (by the user: the storage these edits hold
    // is past what an agent's writes may fill, which keeps the user's reserve).
    const small = await h.internal("scripts.save", { source: script("small", ["@match http://small.test/*", `@require ${lib("/lib.js")}`], "1;") });
    assert.equal(small.ok, true);
    // Gone for good, so the tests after it have the storage they had.
    for (const uuid of [s.uuid, small.result.script.uuid]) await h.internal("scripts.delete", { uuid });
    await h.internal("trash.purge", { uuids: [s.uuid, small.result.script.uuid] });
  });

  test("the options page shows each stored file's URL and sha256", T, async () => {
    const hash = createHash("sha256").update(LIB).digest("hex");
    await ok("write_script", { source: script("shown", ["@match http://shown.test/*", `@require ${lib("/lib.js")}`], "1;") });
    const page = await h.providerPage();
    await page.reload();
    await page.waitForFunction((h) => document.body.innerText.includes(h), hash, { timeout: 10_000 });
    const text = await page.evaluate(() => document.body.innerText);
    assert.ok(text.includes(`@require ${lib("/lib.js")} — sha256 ${hash}`), text.slice(0, 2000));
  });
});
