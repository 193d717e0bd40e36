// The GM API as real scripts see it in Chrome: scripts are written through the MCP tools (official
// SDK client in the test host), pages are served locally under any host name, and what a script
// could call is read from what it wrote into the page (it has no other way out).
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, before, beforeEach, describe, test } from "node:test";
import { HOST_ID, PROVIDER_ID, launch } from "./lib/harness.mjs";
import { sleep } from "./lib/util.mjs";

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
  const hits = [];
  const server = createServer((req, res) => {
    hits.push(`${req.headers.host}${req.url}`);
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end("<!doctype html><title>page</title><script>window.pageVar = 'page';</script><p id=p>text</p>");
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const close = () => new Promise((r) => { server.close(r); server.closeAllConnections(); });
  return { port: server.address().port, hits, close };
}

describe("gm: the GM functions a script is given", () => {
  let h, server, session, tab;
  const call = async (name, args = {}) => {
    const res = await h.lumo("callTool", session, name, args);
    assert.ok(!res?.error, `${name}: MCP call failed: ${JSON.stringify(res?.error)}`);
    return res;
  };
  const ok = async (name, args) => {
    const res = await call(name, args);
    assert.equal(res.isError, false, `${name} failed: ${res.content?.[0]?.text}`);
    return res.structuredContent;
  };
  const write = async (name, lines, body) =>
    (await ok("write_script", { source: script(name, lines, body) })).script;
  const url = (host, path = "/") => `http://${host}:${server.port}${path}`;
  /** Loads `u` and returns the `data-gm-*` attributes the scripts left on <html>. */
  const load = async (u) => {
    await tab.goto(u, { waitUntil: "load" });
    await sleep(400);
    return tab.evaluate(() => Object.fromEntries([...document.documentElement.attributes]
      .filter((a) => a.name.startsWith("data-gm-")).map((a) => [a.name.slice(8), a.value])));
  };

  before(async () => {
    h = await launch();
    server = await pageServer();
    await h.internal("policy.approve", { id: HOST_ID });
    assert.deepEqual(await h.setUserScriptsAccess(PROVIDER_ID, true), { isEnabled: true, isActive: true });
    for (const deadline = Date.now() + 3000; ;) {
      const r = await h.lumo("probe", PROVIDER_ID, { openSession: false });
      if (r.response?.status?.ready || Date.now() > deadline) break;
      await sleep(100);
    }
    session = await h.lumo("connect", PROVIDER_ID);
    assert.equal(typeof session, "number", `MCP session: ${JSON.stringify(session)}`);
    tab = await h.context.newPage();
  });
  beforeEach(async () => {
    if (!session) return;
    for (const s of (await ok("list_scripts", { limit: 100 })).scripts) await ok("delete_script", { uuid: s.uuid });
  });
  after(async () => {
    await h?.close();
    await server?.close();
  });

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
    const probe = (tag) => "const seen = ['GM_addStyle', 'GM_info', 'GM', 'unsafeWindow', 'GM_addElement', 'GM_log', 'GM_getValue']"
      + ".filter((n) => typeof globalThis[n] !== 'undefined');\n"
      + `document.documentElement.setAttribute('data-gm-${tag}', seen.join(',') || 'nothing');`;
    await write("none", ["@match http://iso.test/*", "@grant none"], probe("none"));
    await write("nogrant", ["@match http://iso.test/*"], probe("nogrant"));
    await write("styler", ["@match http://iso.test/*", "@grant GM_addStyle", "@grant GM_info"], probe("styler"));
    assert.deepEqual(await load(url("iso.test")), { none: "nothing", nogrant: "nothing", styler: "GM_addStyle,GM_info,GM" });
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

  test("GM_addElement and GM_log run in the page's DOM and console", T, async () => {
    await write("el", ["@match http://el.test/*", "@grant GM_addElement", "@grant GM_log"],
      "const e = GM_addElement(document.body, 'span', { id: 'added', textContent: 'hi', 'data-x': '1' });\n"
      + "GM_log('logged', 42);\n"
      + "document.documentElement.setAttribute('data-gm-el', e.id);");
    const logs = [];
    const onLog = (m) => logs.push(m.text());
    tab.on("console", onLog);
    try {
      assert.deepEqual(await load(url("el.test")), { el: "added" });
      assert.deepEqual(await tab.evaluate(() => { const s = document.getElementById("added"); return [s.parentNode === document.body, s.textContent, s.dataset.x]; }),
        [true, "hi", "1"]);
      assert.ok(logs.some((t) => t.includes("[GM el]") && t.includes("logged") && t.includes("42")), JSON.stringify(logs));
    } finally {
      tab.off("console", onLog);
    }
  });

  test("the options page, list_scripts and validate_script show grants and @connect hosts", T, async () => {
    const s = await write("asks", ["@match http://asks.test/*", "@grant GM_addStyle", "@connect api.example.com", "@connect *"], "");
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
      assert.match(text, /@connect \* \(any site\)/);
    } finally {
      await page.close();
    }
  });
});
