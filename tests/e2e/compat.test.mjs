// Real-world userscripts: headers and GM calls in the shapes popular public scripts use, written
// through write_script as an agent would (and imported by the user's own hands), then run on a
// matching page in Chromium. Each fixture is our own small script reproducing one real script's
// header lines and the GM calls it makes; the comment above it names the public script the
// pattern comes from (their code is not copied here). Pages are served locally under the real
// sites' names (--host-resolver-rules maps every name to 127.0.0.1).
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, before, beforeEach, describe, test } from "node:test";
import { registrations as chromeRegistrations, setUp } from "./lib/agent.mjs";
import { show, sleep } from "./lib/util.mjs";

const T = { timeout: 120_000 };

/** A userscript from header lines (each already starting with `// @`, or a bare `//`) and a body. */
const userscript = (header, body, eol = "\n") =>
  ["// ==UserScript==", ...header, "// ==/UserScript==", body, ""].join(eol);

/**
 * Every path: a page whose own first script (MAIN world, in <head>) fires `compat-page-script` on
 * the document, so a document-start script that listens for it shows it ran first; an iframe on
 * `/frame`; `/api…` answers JSON.
 */
async function pageServer() {
  const hits = [];
  const server = createServer((req, res) => {
    hits.push(`${req.headers.host}${req.url}`);
    if (req.url.startsWith("/api")) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ host: req.headers.host.split(":")[0], path: req.url }));
      return;
    }
    if (req.url.startsWith("/feed")) {
      res.writeHead(200, { "content-type": "application/rss+xml" });
      res.end("<?xml version=\"1.0\"?><rss><channel><title>Feed title</title></channel></rss>");
      return;
    }
    // A GBK page ("中文" is D6 D0 CE C4 in GBK), as NGA and hi-pda serve theirs: with its charset
    // in Content-Type, or (`/gbk-bare`) without, for a script's `overrideMimeType` to name it.
    if (req.url.startsWith("/gbk")) {
      res.writeHead(200, { "content-type": req.url.startsWith("/gbk-bare") ? "text/html" : "text/html; charset=GBK" });
      res.end(Buffer.concat([Buffer.from("<html><body><p>"), Buffer.from([0xd6, 0xd0, 0xce, 0xc4]), Buffer.from("</p></body></html>")]));
      return;
    }
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    if (req.url.startsWith("/embed")) {
      res.end("<!doctype html><title>embed</title><meta property=\"og:image\" content=\"/poster.jpg\"><a href=\"/video.mp4\">video</a>");
      return;
    }
    if (req.url.startsWith("/frame")) {
      res.end("<!doctype html><title>frame</title><p>frame</p>");
      return;
    }
    res.end("<!doctype html><html><head><title>compat</title>"
      + "<script>document.dispatchEvent(new CustomEvent('compat-page-script')); window.pageVar = 'page';</script>"
      + "</head><body><p id=p>text</p><iframe src=\"/frame\"></iframe></body></html>");
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const close = () => new Promise((r) => { server.close(r); server.closeAllConnections(); });
  return { port: server.address().port, hits, close, url: `http://127.0.0.1:${server.address().port}` };
}

describe("compat: real-world userscripts", () => {
  let env, h, server, tab;
  const ok = (name, args) => env.tools.ok(name, args);
  const url = (host, path = "/") => `http://${host}:${server.port}${path}`;
  /** Loads `u`; returns what each script reported on <html> (`data-compat-<tag>`, JSON) once `want` reported. */
  const load = async (u, want = []) => {
    await tab.goto(u, { waitUntil: "load" });
    await tab.waitForFunction((w) => w.every((t) => document.documentElement.hasAttribute(`data-compat-${t}`)), want, { timeout: 5000 })
      .catch(() => {});
    await sleep(300);
    return tab.evaluate(() => Object.fromEntries([...document.documentElement.attributes]
      .filter((a) => a.name.startsWith("data-compat-")).map((a) => [a.name.slice(12), JSON.parse(a.value)])));
  };
  /** The last run report of `uuid` (what threw, if anything). */
  const lastRun = async (uuid) => (await ok("script_runs", { uuid })).runs?.[0];

  before(async () => {
    env = await setUp({ server: pageServer });
    ({ h, server, tab } = env);
  });
  beforeEach(async () => {
    if (!env) return;
    for (const s of (await ok("list_scripts", { limit: 100 })).scripts) {
      const r = await h.internal("scripts.delete", { uuid: s.uuid });
      assert.equal(r.ok, true, show(r));
    }
  });
  after(async () => { await env?.close(); });

  /** The fixtures, keyed by tag; `P` is the server's port (a @match with a port names it). */
  const fixturesFor = (P) => {
    return {
      // ppixiv/ppixiv (ppixiv.user.js): document-start, GM.* promise forms only, @connect self,
      // a bare `//` line and @comment inside the block.
      ppixiv: userscript([
        "// @name        ppixiv-like",
        "// @author      someone",
        "// @namespace   ppixiv",
        "// @description Better viewing",
        "// @homepage    https://github.com/example/example",
        "// @match       *://*.pixiv.test/*",
        "// @run-at      document-start",
        "// @icon        https://example.org/icon.png",
        "// @grant       GM.xmlHttpRequest",
        "// @grant       GM.setValue",
        "// @grant       GM.getValue",
        "// @connect     pixiv.test",
        "// @connect     self",
        "//",
        "// @comment     Note: a comment line in the block.",
        "// @version     275",
      ], [
        "let heardPage = false;",
        "document.addEventListener('compat-page-script', () => { heardPage = true; });",
        "(async () => {",
        "  const p = GM.getValue('settings', 'default');",
        "  const first = await p;",
        "  await GM.setValue('settings', { zoom: 2 });",
        "  const second = await GM.getValue('settings');",
        "  const r = await GM.xmlHttpRequest({ method: 'GET', url: '/api/ajax/user', responseType: 'json' });",
        "  const report = () => document.documentElement.setAttribute('data-compat-ppixiv', JSON.stringify({",
        "    promise: p instanceof Promise, first, second, status: r.status, body: r.response, heardPage }));",
        "  document.readyState === 'loading' ? document.addEventListener('DOMContentLoaded', report) : report();",
        "})().catch((e) => addEventListener('load', () => document.documentElement.setAttribute('data-compat-ppixiv', JSON.stringify({ error: String(e) }))));",
      ].join("\n")),
      // elpocko/HNhance: mixed GM.xmlHttpRequest and GM_getValue/GM_setValue, document-start, and
      // `unsafeWindow.GM_getValue = GM_getValue` with no @grant unsafeWindow.
      hn: userscript([
        "// @name         HN-like",
        "// @namespace    elpocko",
        "// @version      1",
        "// @match        *://news.ycombinator.test/*",
        "// @run-at       document-start",
        "// @grant        GM.xmlHttpRequest",
        "// @grant        GM_getValue",
        "// @grant        GM_setValue",
      ], [
        "(() => {",
        "  unsafeWindow.GM_getValue = GM_getValue;",
        "  unsafeWindow.GM_setValue = GM_setValue;",
        "  GM_setValue('seen', (GM_getValue('seen', 0)) + 1);",
        "  const report = () => document.documentElement.setAttribute('data-compat-hn', JSON.stringify({ seen: GM_getValue('seen'), info: typeof GM_info }));",
        "  document.readyState === 'loading' ? document.addEventListener('DOMContentLoaded', report) : report();",
        "})();",
      ].join("\n")),
      // VoileLabs/cotrans (userscript header): localized @name:zh-CN/@description:zh-CN,
      // @include with http*://, @match without a wildcard path, @license, @contributionURL; the
      // script reads GM_info.script.version without granting GM_info.
      cotrans: userscript([
        "// @name              Cotrans-like Translator",
        "// @name:zh-CN        图片翻译器",
        "// @namespace         https://cotrans.test/userscript/#regular",
        "// @version           0.8.0",
        "// @description       Translate texts in images",
        "// @description:zh-CN 一键翻译图片内文字",
        "// @author            someone",
        "// @license           GPL-3.0",
        "// @contributionURL   https://ko-fi.com/example",
        "// @include http*://www.pixiv-cotrans.test/*",
        "// @match http://www.pixiv-cotrans.test/",
        "// @grant GM_xmlhttpRequest",
        "// @connect cotrans.test",
      ], [
        "document.documentElement.setAttribute('data-compat-cotrans', JSON.stringify({",
        "  name: typeof GM_info === 'object' ? GM_info.script.name : 'no GM_info',",
        "  version: typeof GM_info === 'object' ? GM_info.script.version : 'no GM_info' }));",
      ].join("\n")),
      // ywzhaiqi/userscript (GM_xhr_outer.user.js): @include globs whose host part ends in `*`
      // (a port follows), @connect *, @note.
      glob: userscript([
        "// @name        GM_xhr outer-like",
        "// @namespace   ywzhaiqi@example",
        "// @version     0.4",
        "// @include      *://y.guten.test/*",
        "// @include      *://localhost-glob.test*",
        "// @grant        GM_xmlhttpRequest",
        "// @run-at       document-start",
        "// @connect      *",
        "// @note         Greasemonkey 下无效",
      ], [
        "const ran = () => document.documentElement.setAttribute('data-compat-glob', JSON.stringify({ xhr: typeof GM_xmlhttpRequest }));",
        "document.documentElement ? ran() : addEventListener('DOMContentLoaded', ran);",
      ].join("\n")),
      // zhifengle/gm_scripts (src/header/dev.js): a regular-expression @include (ours allows a
      // port, as the test pages have one), GM_registerMenuCommand and the value functions.
      regex: userscript([
        "// @name        bangumi-like",
        "// @namespace   https://github.com/example",
        "// @description test user script",
        "// @include     /^https?:\\/\\/(bangumi|bgm|chii)\\.(tv|in)(:\\d+)?\\/subject\\/.*$/",
        "// @version     0.0.1",
        "// @grant       GM_addStyle",
        "// @grant       GM_registerMenuCommand",
        "// @grant       GM_setValue",
        "// @grant       GM_getValue",
        "// @grant       GM_listValues",
        "// @grant       GM_deleteValue",
        "// @grant       GM_addValueChangeListener",
        "// @grant       GM_removeValueChangeListener",
      ], [
        "const style = GM_addStyle('#p { color: rgb(1, 2, 3) }');",
        "GM_setValue('a', 1); GM_setValue('b', { x: [1, 2] }); GM_deleteValue('a');",
        "const heard = [];",
        "const lid = GM_addValueChangeListener('c', (name, oldV, newV, remote) => heard.push([name, oldV, newV, remote]));",
        "GM_setValue('c', 'set');",
        "const mid = GM_registerMenuCommand('设置', () => {}, 's');",
        "setTimeout(() => document.documentElement.setAttribute('data-compat-regex', JSON.stringify({",
        "  style: style instanceof HTMLStyleElement && style.isConnected, values: GM_listValues().sort(), b: GM_getValue('b'),",
        "  lid: typeof lid, heard, mid })), 100);",
      ].join("\n")),
      // Windows-written scripts on Greasy Fork: CRLF line ends, a BOM, tabs after `//` and
      // between key and value, a pre-release @version.
      crlf: "\uFEFF" + userscript([
        "//\t@name\t\tCRLF tabbed",
        "//\t@namespace\thttps://greasyfork.test/users/1",
        "//\t@version\t2.0.1-beta.3",
        "//\t@match\t\t*://crlf.test/*",
        "//\t@grant\t\tGM_info",
      ], "document.documentElement.setAttribute('data-compat-crlf', JSON.stringify({ version: GM_info.script.version, name: GM_info.script.name }));", "\r\n"),
      // A Tampermonkey "new script" header (the editor's template) with the grants and keys
      // scripts carry for other managers: names this provider does not give, @antifeature,
      // @noframes, @unwrap, @sandbox, @inject-into, @downloadURL/@updateURL, and the
      // `window.onurlchange === null` feature test Tampermonkey's docs give.
      tm: userscript([
        "// @name         TM template-like",
        "// @namespace    http://tampermonkey.net/",
        "// @version      2024-01-01",
        "// @description  try to take over the world!",
        "// @author       You",
        `// @match        http://tm.test:${P}/*`,
        "// @icon         https://www.google.com/s2/favicons?sz=64&domain=tm.test",
        "// @grant        GM_cookie",
        "// @grant        GM_download",
        "// @grant        GM.registerMenuCommand",
        "// @grant        window.onurlchange",
        "// @grant        GM_addStyle",
        "// @antifeature  ads",
        "// @noframes",
        "// @unwrap",
        "// @sandbox      JavaScript",
        "// @inject-into  content",
        "// @downloadURL  https://update.greasyfork.test/scripts/1/x.user.js",
        "// @updateURL    https://update.greasyfork.test/scripts/1/x.meta.js",
        "// @supportURL   https://greasyfork.test/scripts/1/feedback",
      ], [
        "(function() {",
        "    'use strict';",
        "    document.documentElement.setAttribute('data-compat-tm', JSON.stringify({",
        "      frame: window !== window.top, cookie: typeof GM_cookie, download: typeof GM_download,",
        "      urlchange: window.onurlchange === null, menu: typeof GM.registerMenuCommand }));",
        "})();",
      ].join("\n")),
      // saint-embeds-fixer (a vite-plugin-monkey userscript): GM_xmlhttpRequest with
      // `responseType: 'document'`, reading `response.response.querySelector(…)`; then a feed's
      // `responseXML`, the field Tampermonkey and Violentmonkey give for an XML answer.
      embed: userscript([
        "// @name        embeds fixer-like",
        "// @namespace   example",
        "// @version     1.0.0",
        "// @match       *://forum.saint.test/*",
        "// @grant       GM_xmlhttpRequest",
        "// @connect     self",
      ], [
        "const report = (v) => document.documentElement.setAttribute('data-compat-embed', JSON.stringify(v));",
        "GM_xmlhttpRequest({",
        "  url: '/embed/1',",
        "  responseType: 'document',",
        "  onload: (response) => {",
        "    const og = response.response.querySelector('meta[property=\"og:image\"]');",
        "    const link = response.response.querySelector('a')?.getAttribute('href');",
        "    GM_xmlhttpRequest({ url: '/feed.xml', onload: (feed) => {",
        "      const seen = { og: og ? og.getAttribute('content') : null, link, doc: response.response instanceof Document,",
        "        same: response.responseXML === response.response, title: feed.responseXML?.querySelector('title')?.textContent ?? null,",
        "        text: feed.responseText.length > 0, htmlXML: response.responseText === undefined ? 'no text' : 'text' };",
        // Tampermonkey's `stream` type, which this provider does not give: the script is told why.
        "      GM_xmlhttpRequest({ url: '/feed.xml', responseType: 'stream',",
        "        onload: () => report({ ...seen, stream: 'loaded' }), onerror: (e) => report({ ...seen, stream: e.error }) });",
        "    } });",
        "  },",
        "  onerror: (e) => report({ error: e.error }),",
        "});",
      ].join("\n")),
      // IITC-CE plugins (IITC-CE/ingress-intel-total-conversion, e.g. comm-filter-tab.user.js):
      // @grant none, GM_info read only behind typeof, and the whole plugin put into the page as
      // an inline <script> built from a wrapper function's text, to reach the page's
      // JavaScript (here: the page's own `pageVar`).
      iitc: userscript([
        "// @author         someone",
        "// @name           COMM Filter Tab-like",
        "// @category       COMM",
        "// @version        0.4.12",
        "// @description    Adds a tab",
        "// @id             comm-filter-tab@example",
        "// @namespace      https://github.com/IITC-CE/ingress-intel-total-conversion",
        "// @updateURL      https://example.org/comm-filter-tab.meta.js",
        "// @downloadURL    https://example.org/comm-filter-tab.user.js",
        "// @match          *://intel.ingress.test/*",
        "// @grant          none",
      ], [
        "function wrapper(plugin_info) {",
        "  document.documentElement.setAttribute('data-compat-iitc', JSON.stringify({ page: window.pageVar, info: plugin_info }));",
        "}",
        "var script = document.createElement('script');",
        "var info = {};",
        "if (typeof GM_info !== 'undefined' && GM_info && GM_info.script) info.script = { version: GM_info.script.version };",
        "script.appendChild(document.createTextNode('(' + wrapper + ')(' + JSON.stringify(info) + ');'));",
        "(document.body || document.head || document.documentElement).appendChild(script);",
      ].join("\n")),
      // Tampermonkey's documented GM_addElement('script', …) example, and what @require'd
      // template libraries do (underscore/lodash `_.template` compile with `new Function`), and
      // a plain eval.
      inject: userscript([
        "// @name         addElement-like",
        "// @namespace    http://tampermonkey.net/",
        "// @version      0.1",
        "// @match        *://inject.test/*",
        "// @grant        GM_addElement",
      ], [
        "GM_addElement('script', { textContent: \"document.documentElement.setAttribute('data-compat-injected', JSON.stringify(window.pageVar))\" });",
        "let compiled, evaluated;",
        "try { compiled = new Function('o', 'return \"<b>\" + o.name + \"</b>\"')({ name: 'x' }); } catch (e) { compiled = e.name; }",
        "try { evaluated = eval('6 * 7'); } catch (e) { evaluated = e.name; }",
        "document.documentElement.setAttribute('data-compat-inject', JSON.stringify({ compiled, evaluated }));",
      ].join("\n")),
    };
  };
  /** Where each fixture is loaded: a page its rules match, as the real script's site would be. */
  const pages = () => ({
    ppixiv: url("www.pixiv.test", "/artworks/1"),
    hn: url("news.ycombinator.test", "/item?id=1"),
    cotrans: url("www.pixiv-cotrans.test", "/"),
    glob: url("localhost-glob.test", "/x"),
    regex: url("bgm.tv", "/subject/123"),
    crlf: url("crlf.test", "/"),
    tm: url("tm.test", "/"),
    embed: url("forum.saint.test", "/threads/1"),
    iitc: url("intel.ingress.test", "/"),
    inject: url("inject.test", "/"),
  });

  // Each case can fail: ppixiv if a document-start script ran after the page's first script, if
  // GM.getValue were not a Promise or @connect self did not reach the page's own host; hn and
  // cotrans without GM_info and unsafeWindow for a script that did not grant them (api::
  // WITHOUT_GRANT); glob if an @include glob's trailing `*` did not cover the port; regex if the
  // value functions, the listener or GM_addStyle's element differed; crlf if a BOM, CRLF or tabs
  // broke the header; tm if @noframes ran in the iframe or an unknown grant refused the write;
  // embed without `responseType: 'document'` parsed in the page (the worker refused it) or
  // without `responseXML`, or if a request the worker does not take (`stream`) were dropped
  // unanswered ("no answer from the provider") instead of refused with why; iitc and inject
  // under a world CSP that blocks inline scripts and eval (Chrome's default for a world, the
  // extension's own `script-src 'self'`: env::WORLD_CSP).
  test("headers and GM calls of popular scripts: written through write_script, they run as in Violentmonkey", T, async () => {
    const fixtures = fixturesFor(server.port);
    const written = {};
    for (const [tag, source] of Object.entries(fixtures)) {
      const r = await ok("write_script", { source });
      assert.equal(r.registered, true, `${tag}: ${show(r)}`);
      written[tag] = r;
    }
    // Names other managers give and this provider does not: accepted, each warned at its line
    // (GM_download and window.onurlchange, given since, are not). So are the page world it asks
    // for and its GM_download with no @connect, which every request would be refused.
    assert.deepEqual(written.tm.diagnostics.map((d) => [d.line, d.severity, d.message.replace(/ is not implemented.*| is not possible here.*|: every .*/, "")]).sort((a, b) => a[0] - b[0]), [
      [9, "warning", "@grant GM_cookie"],
      [10, "warning", "no @connect"],
      [16, "warning", "@unwrap"],
      [17, "warning", "@sandbox JavaScript"],
    ]);
    // HNhance's implicit unsafeWindow runs (below), and write_script says at its first use what it
    // is here: this world's window, not the page's.
    const uwLine = fixtures.hn.split("\n").findIndex((l) => l.includes("unsafeWindow.GM_getValue")) + 1;
    assert.ok(written.hn.diagnostics.some((d) => d.line === uwLine && /^unsafeWindow \(given without a @grant line for it\).*NOT the page's JavaScript/.test(d.message)),
      show(written.hn.diagnostics));
    const seen = {};
    for (const [tag, u] of Object.entries(pages())) {
      const got = await load(u, [tag]);
      const run = await lastRun(written[tag].script.uuid);
      assert.ok(tag in got, `${tag} did not report on ${u}; its last run: ${show(run)}`);
      assert.equal(run?.error ?? null, null, `${tag}: ${show(run)}`);
      seen[tag] = got[tag];
      if (tag === "tm") {
        // @noframes: the top document only.
        const frame = tab.frames().find((f) => f.url().endsWith("/frame"));
        assert.ok(frame, "the page's iframe");
        assert.equal(await frame.evaluate(() => document.documentElement.hasAttribute("data-compat-tm")), false, "@noframes ran in the iframe");
      }
    }
    assert.deepEqual(seen, {
      ppixiv: { promise: true, first: "default", second: { zoom: 2 }, status: 200, body: { host: "www.pixiv.test", path: "/api/ajax/user" }, heardPage: true },
      hn: { seen: 1, info: "object" },
      cotrans: { name: "Cotrans-like Translator", version: "0.8.0" },
      glob: { xhr: "function" },
      regex: { style: true, values: ["b", "c"], b: { x: [1, 2] }, lid: "number", heard: [["c", null, "set", false]], mid: "设置" },
      crlf: { version: "2.0.1-beta.3", name: "CRLF tabbed" },
      // window.onurlchange is given: the script's own feature test sees so.
      tm: { frame: false, cookie: "undefined", download: "function", urlchange: true, menu: "function" },
      embed: { og: "/poster.jpg", link: "/video.mp4", doc: true, same: true, title: "Feed title", text: true, htmlXML: "text",
        stream: 'GM request: responseType "stream" is not text, json, arraybuffer or blob' },
      // Both ran in the page's own JavaScript (they read its `pageVar`): the worlds' CSP lets a
      // script put a <script> in the page, and eval and new Function run.
      iitc: { page: "page", info: {} },
      inject: { compiled: "<b>x</b>", evaluated: 42 },
    });
    assert.deepEqual(await load(pages().inject, ["injected"]).then((g) => g.injected), "page", "GM_addElement('script') ran in the page");
    // A regular-expression @include stops the script where it does not match.
    assert.deepEqual(await load(url("bgm.tv", "/other/1")), {});
    // The stored source is the one written, BOM and CRLF included.
    assert.equal((await env.tools.get(written.crlf.script.uuid)).source, fixtures.crlf);
  });

  // Results real scripts read, as Violentmonkey and Tampermonkey give them. Fails if a GBK
  // page's text comes as UTF-8 mojibake (the Content-Type's charset, or the script's
  // `overrideMimeType`, ignored); if GM_addElement('div', …) without a parent lands in <head>,
  // where it is never shown; if Tampermonkey's documented tab counter (GM_getTab/GM_saveTab)
  // does not count, or is still called not provided.
  test("what real scripts read: a GBK page's text, GM_addElement's parent, Tampermonkey's tab counter", T, async () => {

    const fixtures = {
      // fuchaohan/nga-finance-identity (nga-finance-identity.user.js): GM_xmlhttpRequest of an
      // NGA page with `overrideMimeType: "text/html; charset=gbk"`, reading `res.responseText`;
      // NGA itself sends `charset=GBK`, which XMLHttpRequest reads as well.
      nga: userscript([
        "// @name         NGA-like",
        "// @namespace    http://tampermonkey.net/",
        "// @version      2.5",
        "// @match        *://bbs.nga.test/*",
        "// @grant        GM_xmlhttpRequest",
        "// @connect      *",
        "// @run-at       document-end",
      ], [
        "(function () {",
        "  const get = (path, extra) => new Promise((resolve) => GM_xmlhttpRequest(Object.assign({ method: 'GET', url: path,",
        "    onload: (res) => resolve((/<p>(.*)<\\/p>/.exec(res.responseText) || [])[1] || res.responseText.slice(0, 40)),",
        "    onerror: (e) => resolve('error ' + e.error) }, extra)));",
        "  Promise.all([get('/gbk'), get('/gbk-bare', { overrideMimeType: 'text/html; charset=gbk' }),",
        "    get('/gbk', { responseType: 'document' }).then(() => 'ok'),",
        "    new Promise((r) => GM_xmlhttpRequest({ url: '/gbk', responseType: 'document', onload: (x) => r(x.response.querySelector('p').textContent) }))])",
        "    .then(([header, override, _, doc]) => document.documentElement.setAttribute('data-compat-nga', JSON.stringify({ header, override, doc })));",
        "})();",
      ].join("\n")),
      // FxPlus+ (fxp.co.il): GM_addStyle for its rules and GM_addElement('div', { id }) without a
      // parent; Tampermonkey's documented GM_addElement('script', { textContent }) form.
      fxp: userscript([
        "// @name         FxPlus-like",
        "// @namespace    fxplus",
        "// @version      1",
        "// @match        *://www.fxp.test/*",
        "// @grant        GM_addStyle",
        "// @grant        GM_addElement",
        "// @grant        GM.addStyle",
        "// @grant        GM.addElement",
      ], [
        "const out = {};",
        "(async () => {",
        "try {",
        "  const st = GM_addStyle('#creditAddon { padding: 7px }');",
        "  const div = GM_addElement('div', { id: 'creditAddon', textContent: 'credit' });",
        "  const sc = GM_addElement('script', { textContent: '1' });",
        "  const sp = GM_addElement(div, 'span', { class: 'in' });",
        "  Object.assign(out, { style: st.parentNode && st.parentNode.nodeName, div: div.parentNode && div.parentNode.nodeName,",
        "    script: sc.parentNode && sc.parentNode.nodeName, span: sp.parentNode === div, shown: div.getBoundingClientRect().height > 0,",
        "    padding: getComputedStyle(div).paddingTop });",
        // GM.* forms, written for either manager: Violentmonkey's return the element at once,
        // Tampermonkey's a promise of it (awaited, or .then).
        "  const vm = GM.addElement(div, 'i', { id: 'vm' });",
        "  vm.textContent = 'at once';",
        "  const vmStyle = GM.addStyle('#vm { color: rgb(4, 5, 6) }');",
        "  out.vm = [vm.parentNode === div, vmStyle.nodeName, getComputedStyle(vm).color];",
        "  const awaited = await GM.addElement(div, 'b', { id: 'tm' });",
        "  out.tm = [awaited.id, awaited.parentNode === div, 'then' in awaited];",
        "  out.then = await GM.addStyle('#tm { color: red }').then((s) => s.nodeName);",
        "  out.more = [await GM.addStyle('#x {}').catch(() => 'no').then((s) => s.nodeName),",
        "    await GM.addElement(div, 's', {}).finally(() => {}).then((e) => e.nodeName)];",
        "} catch (e) { out.threw = String(e); }",
        "document.documentElement.setAttribute('data-compat-fxp', JSON.stringify(out));",
        "})();",
      ].join("\n")),
      // Tampermonkey's documented GM_getTab/GM_saveTab example (a per-tab counter), in a script
      // that tests for them first as cross-manager scripts do (gm-tabs.test.mjs tests them whole).
      // @noframes: the page has an iframe, and the frame's run shares the tab's object, so without
      // it the top page read 1 or 2 by which frame counted first (CI saw 2).
      tabs: userscript([
        "// @name         Tab counter",
        "// @namespace    tm-docs",
        "// @match        *://tabs.test/*",
        "// @noframes",
        "// @grant        GM_getTab",
        "// @grant        GM_saveTab",
        "// @grant        GM_addStyle",
      ], [
        "const out = { getTab: typeof GM_getTab, saveTab: typeof GM_saveTab };",
        "try { GM_getTab((tab) => { tab.n = (tab.n || 0) + 1; GM_saveTab(tab); out.n = tab.n;",
        "  document.documentElement.setAttribute('data-compat-tabs', JSON.stringify(out)); }); }",
        "catch (e) { out.call = e.name + ': ' + e.message; document.documentElement.setAttribute('data-compat-tabs', JSON.stringify(out)); }",
      ].join("\n")),
    };
    const written = {};
    for (const [tag, source] of Object.entries(fixtures)) {
      const r = await ok("write_script", { source });
      assert.equal(r.registered, true, `${tag}: ${show(r)}`);
      written[tag] = r;
    }
    assert.deepEqual(written.tabs.diagnostics.filter((d) => /@grant/.test(d.message)), [], "GM_getTab/GM_saveTab are given: no warning");
    const seen = {};
    const logs = [];
    const onLog = (m) => logs.push(m.text());
    tab.on("console", onLog);
    try {
      for (const [tag, u] of [["nga", url("bbs.nga.test", "/read.php?tid=1")], ["fxp", url("www.fxp.test", "/signature")], ["tabs", url("tabs.test")]]) {
        const got = await load(u, [tag]);
        const run = await lastRun(written[tag].script.uuid);
        assert.ok(tag in got, `${tag} did not report on ${u}; its last run: ${show(run)}`);
        seen[tag] = got[tag];
      }
    } finally {
      tab.off("console", onLog);
    }
    assert.deepEqual(seen, {
      nga: { header: "中文", override: "中文", doc: "中文" },
      fxp: { style: "HEAD", div: "BODY", script: "HEAD", span: true, shown: true, padding: "7px",
        vm: [true, "STYLE", "rgb(4, 5, 6)"], tm: ["tm", true, false], then: "STYLE", more: ["STYLE", "S"] },
      tabs: { getTab: "function", saveTab: "function", n: 1 },
    });
    assert.ok(!logs.some((t) => t.includes("not provided")), show(logs));
  });

  // The user's own way in: the options page's import of the same files, all at once. Fails if
  // the import refused a header write_script accepts, or a script imported ran otherwise.
  test("the same scripts imported by the user from the options page run the same", T, async () => {
    const fixtures = fixturesFor(server.port);
    const files = Object.entries(fixtures).map(([tag, source]) => ({ name: `${tag}.user.js`, source }));
    const r = await h.internal("scripts.import", { files, confirmed: true });
    assert.equal(r?.ok, true, show(r).slice(0, 600));
    assert.equal((await ok("list_scripts", { limit: 100 })).scripts.length, files.length);
    for (const tag of ["hn", "cotrans", "crlf", "embed"]) {
      const got = await load(pages()[tag], [tag]);
      assert.ok(tag in got, `${tag} did not report after the import: ${show(got)}`);
    }
  });

  // A deliberate limit, said where the author looks: Violentmonkey's `@top-level-await` opt-in
  // is warned at its line, and the installed script's SyntaxError is in its runs. Fails if the
  // warning goes, or if top-level await started to work (then README's limit must go).
  test("top-level await: warned at write, a SyntaxError in the script's runs", T, async () => {
    const source = userscript([
      "// @name         TLA-like",
      "// @namespace    example",
      "// @match        *://tla.test/*",
      "// @grant        GM.getValue",
      "// @top-level-await",
    ], "const v = await GM.getValue('k', 1);\ndocument.documentElement.setAttribute('data-compat-tla', JSON.stringify(v));");
    const r = await ok("write_script", { source });
    assert.deepEqual(r.diagnostics.map((d) => [d.line, d.severity, /top-level-await is not supported.*try_script.*async/.test(d.message)]),
      [[6, "warning", true]], show(r.diagnostics));
    assert.deepEqual(await load(url("tla.test", "/")), {});
    let run;
    for (const deadline = Date.now() + 5000; !run && Date.now() < deadline; await sleep(100)) run = await lastRun(r.script.uuid);
    assert.equal(run?.error?.name, "SyntaxError", show(run));
  });

  // Fails if what get_script/list_scripts show differs from what Chrome was given (say rules.rs
  // widened an include, dropped @noframes or changed @run-at), or if match_url disagreed with
  // Chrome about a URL without a port, as the real sites have.
  test("what the agent is shown is what Chrome was given", T, async () => {
    const fixtures = fixturesFor(server.port);
    const uuids = {};
    for (const [tag, source] of Object.entries(fixtures)) uuids[tag] = (await ok("write_script", { source })).script.uuid;
    const regs = Object.fromEntries((await chromeRegistrations(h)).map((r) => [r.id, r]));
    const runAt = { document_start: "document_start", document_end: "document_end", document_idle: "document_idle" };
    for (const [tag, uuid] of Object.entries(uuids)) {
      const shown = await env.tools.get(uuid);
      const reg = regs[uuid];
      assert.ok(reg, `${tag} registered`);
      const noframes = /@noframes/.test(fixtures[tag]);
      assert.equal(reg.allFrames, !noframes, `${tag}: allFrames`);
      assert.equal(reg.runAt, runAt[shown.runAt], `${tag}: runAt ${shown.runAt} vs ${reg.runAt}`);
      if (!shown.includeGlobs.length) {
        assert.deepEqual([...reg.matches].sort(), [...shown.matches].sort(), `${tag}: matches`);
        assert.deepEqual(reg.includeGlobs ?? [], [], `${tag}: includeGlobs`);
      }
    }
    // The real sites have no port: match_url, for the agent, on the addresses the scripts were made for.
    const runs = async (u) => (await ok("match_url", { url: u })).scripts.filter((s) => s.runs).map((s) => s.uuid);
    assert.deepEqual(await runs("https://www.pixiv-cotrans.test/en/"), [uuids.cotrans], "@include http*:// covers https");
    assert.deepEqual(await runs("http://www.pixiv-cotrans.test/en/"), [uuids.cotrans]);
    assert.deepEqual(await runs("https://bgm.tv/subject/1"), [uuids.regex]);
    assert.deepEqual(await runs("https://chii.in/subject/1"), [uuids.regex]);
    assert.deepEqual(await runs("https://bgm.tv/user/1"), []);
    assert.deepEqual(await runs("http://localhost-glob.test:8080/"), [uuids.glob]);
    assert.deepEqual(await runs("https://y.guten.test/a"), [uuids.glob]);
  });
});
