// Where scripts really run, asked of Chrome itself: scripts are written through the MCP tools
// (official SDK client in the test host), pages on any host name are served locally
// (--host-resolver-rules maps every name to 127.0.0.1), and for each URL the page is loaded and
// the scripts SEEN running are compared with what match_url says — both directions.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, before, beforeEach, describe, test } from "node:test";
import { PROVIDER_ID } from "./lib/harness.mjs";
import { probeUntilReady, registrations as chromeRegistrations, setUp } from "./lib/agent.mjs";
import { show, sleep, until } from "./lib/util.mjs";

const T = { timeout: 120_000 };
/** After the load event (document_idle has passed): how long to wait for scripts to show. */
const SETTLE_MS = 400;

/** A userscript whose body marks <html data-ran-TAG>, after the guard (if any) let it through. */
function script(tag, lines, body = "") {
  return [
    "// ==UserScript==",
    `// @name Matching ${tag}`,
    "// @namespace lumo-e2e-matching",
    ...lines.map((l) => `// ${l}`),
    "// ==/UserScript==",
    body || `document.documentElement.setAttribute("data-ran-${tag}", "1");`,
    "",
  ].join("\n");
}

/** A server that answers every path with a small page. */
async function anyPathServer() {
  const server = createServer((req, res) => {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end("<!doctype html><title>page</title><p>page</p>");
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const close = () => new Promise((r) => { server.close(r); server.closeAllConnections(); });
  return { port: server.address().port, close };
}

describe("matching: what Chrome runs is what match_url says", () => {
  let env, h, server, tab;
  const call = (name, args = {}) => env.tools.call(name, args);
  const ok = (name, args) => env.tools.ok(name, args);
  const write = async (tag, lines, body) => (await ok("write_script", { source: script(tag, lines, body) })).script;
  /** The same by the user's hands (the options page's save): not rate-limited, unlike the agent's 30 writes a minute. */
  const save = async (tag, lines) => {
    const r = await h.internal("scripts.save", { source: script(tag, lines) });
    assert.equal(r?.ok, true, show(r));
    return r.result.script;
  };
  /** Loads `url` and returns the tags of the scripts that ran there. */
  const ranOn = async (url) => {
    await tab.goto(url, { waitUntil: "load" });
    await sleep(SETTLE_MS);
    return tab.evaluate(() => [...document.documentElement.attributes].filter((a) => a.name.startsWith("data-ran-")).map((a) => a.name.slice(9)).sort());
  };
  /** match_url's answer: the uuids it says run on `url`. */
  const saysRun = async (url) => (await ok("match_url", { url })).scripts.filter((s) => s.runs).map((s) => s.uuid);
  const registrations = () => chromeRegistrations(h);

  before(async () => {
    env = await setUp({ server: anyPathServer });
    ({ h, server, tab } = env);
  });
  // Each test starts with no scripts, so one failing test cannot leave scripts behind that make
  // the next one fail for the wrong reason. Deleted by the user's hand: this suite deletes more
  // than the trash's 100, and only the user's delete pushes the oldest out.
  beforeEach(async () => {
    if (!env) return;
    for (const s of (await ok("list_scripts", { limit: 100 })).scripts) {
      const r = await h.internal("scripts.delete", { uuid: s.uuid });
      assert.equal(r.ok, true, show(r));
    }
  });
  after(async () => { await env?.close(); });

  test("a table of URLs: every script runs exactly where match_url says, and only where its rules say", T, async () => {
    const P = server.port;
    const scripts = {
      inconly: ["@include http://inc.test:*/*"],
      union: ["@match http://m.test/*", "@include http://g.test:*/*"],
      excl: ["@match http://*.x.test/*", "@exclude-match http://no.x.test/*", "@exclude *nope*"],
      regex: ["@include /^http:\\/\\/re\\.test:\\d+\\/yes/", "@exclude /\\/yes\\/but-not/"],
      tld: ["@match http://*.shop.tld/*"],
      norm: ["@match http://norm.test/b*"],
      // A site's @include naming a scheme: not on a page that carries the site's address in
      // its own query or fragment (read as a plain glob, it ran there).
      bank: ["@include *://bank.test:*/*"],
      // Violentmonkey's host ending in .*: public suffixes only.
      gstar: ["@match http://www.gstar.*/*"],
      every: ["@match *", "@exclude-match http://*.x.test/*", "@exclude /re\\.test/", "@exclude http://*shop.*", "@exclude http://inc.test:*", "@exclude http://m.test:*", "@exclude http://g.test:*", "@exclude http://bank.test:*", "@exclude http://www.gstar.*"],
    };
    const uuids = {};
    // The last two by the user's hands: the file's agent writes stay within the 30 a minute.
    const byHand = new Set(["bank", "gstar"]);
    for (const [tag, lines] of Object.entries(scripts)) uuids[tag] = (await (byHand.has(tag) ? save : write)(tag, lines)).uuid;
    const tagOf = Object.fromEntries(Object.entries(uuids).map(([t, u]) => [u, t]));
    // [url, tags that must run there] — the expectation is the rules' meaning, not our model.
    const table = [
      [`http://inc.test:${P}/a`, ["inconly"]],
      [`http://other.test:${P}/`, ["every"]],
      [`http://m.test:${P}/`, ["union"]],
      [`http://g.test:${P}/x`, ["union"]],
      [`http://a.x.test:${P}/`, ["excl"]],
      [`http://no.x.test:${P}/`, []],
      [`http://a.x.test:${P}/nope`, []],
      [`http://re.test:${P}/yes/1`, ["regex"]],
      [`http://re.test:${P}/yes/but-not`, []],
      [`http://re.test:${P}/no`, []],
      [`http://www.shop.com:${P}/`, ["tld"]],
      [`http://shop.co.uk:${P}/`, ["tld"]],
      [`http://shop.evil.com:${P}/`, []],
      [`http://NORM.test:${P}/x/../b`, ["every", "norm"]],
      [`http://norm.test:${P}/a`, ["every"]],
      [`http://bank.test:${P}/account`, ["bank"]],
      [`http://evil.test:${P}/?next=http://bank.test:${P}/x`, ["every"]],
      [`http://evil.test:${P}/#://bank.test:${P}/`, ["every"]],
      [`http://www.gstar.com:${P}/a`, ["gstar"]],
      [`http://www.gstar.co.uk:${P}/`, ["gstar"]],
      [`http://www.gstar.evil.com:${P}/`, []],
    ];
    const mismatches = [];
    for (const [url, want] of table) {
      const seen = await ranOn(url);
      const said = (await saysRun(url)).map((u) => tagOf[u]).filter(Boolean).sort();
      if (JSON.stringify(seen) !== JSON.stringify([...want].sort())) mismatches.push(`${url}: ran ${JSON.stringify(seen)}, rules say ${JSON.stringify(want)}`);
      if (JSON.stringify(said) !== JSON.stringify(seen)) mismatches.push(`${url}: match_url says ${JSON.stringify(said)}, Chrome ran ${JSON.stringify(seen)}`);
    }
    assert.deepEqual(mismatches, []);
    // list_scripts {url} agrees too.
    const listed = (await ok("list_scripts", { url: `http://g.test:${P}/x` })).scripts.map((s) => tagOf[s.uuid]).filter(Boolean);
    assert.deepEqual(listed, ["union"]);
    // The include-only script is not registered for every page.
    const inc = (await registrations()).find((r) => r.id === uuids.inconly);
    assert.ok(!inc.matches.some((m) => m === "*://*/*" || m === "<all_urls>"), JSON.stringify(inc.matches));
    // Nor is one whose glob has a wildcard scheme: it is injected on its own site only, not on
    // every page for its guard to stop it there after it took one of the page's 10 worlds.
    assert.deepEqual((await registrations()).find((r) => r.id === uuids.bank).matches, ["*://bank.test/*"]);
    for (const uuid of Object.values(uuids)) await h.internal("scripts.delete", { uuid });
  });

  test("a rule that would exclude nothing is refused; a look-alike host is shown by the name Chrome matches; the options page says both", T, async () => {
    const P = server.port;
    // Chrome compares @exclude globs with the address as it holds it: a zero-width space, an é
    // or a capital in the host never match, so each of these would exclude nothing.
    // The agent's write is refused; so is the user's save (the suite's agent writes stay
    // under the rate limit).
    const res = await env.tools.fails("write_script", { source: script("zwx", ["@match http://zw.test/*", "@exclude http://zw.test/*\u200b"]) }, "INVALID_METADATA");
    assert.match(res.content[0].text, /would exclude no page/);
    // And, found by a tester: a port no address shows, a glob that ends at the host, a dot
    // segment, `*.` before an address.
    const unseen = [`http://zw.test:0${P}/*`, `http://zw.test:${P}`, `http://zw.test:${P}/a/../b*`];
    for (const rule of ["@exclude http://zw.test:*/caf\u00e9*", "@exclude http://ZW.test:*", "@exclude-match http://zw.test/log in*",
      ...unseen.map((g) => `@exclude ${g}`), "@exclude-match http://*.0.0.1/*"]) {
      const r = await (await h.providerPage()).evaluate((m) => chrome.runtime.sendMessage(m), { channel: "lumo:internal", op: "scripts.save", source: script("zwx", ["@match http://zw.test/*", rule]) });
      assert.equal(r?.code, "INVALID_METADATA", `${rule}: ${show(r)}`);
      assert.match(JSON.stringify(r), /would exclude no page/, rule);
    }
    // The same excludes, registered by hand in Chrome, exclude nothing there (what the refusal
    // is about): the script runs on every one of these pages.
    const { uuid } = await save("zw", ["@match http://zw.test/*", "@include http://zw.test/*\u200b", "@exclude-match http://b\u0430nk.test/*", "@match http://bank.test/*", "@match *://*/zw-any*", "@match http://3232235777/zw*"]);
    const regs = await registrations();
    const reg = regs.find((r) => r.id === uuid);
    // From an extension page that is not one of ours (the options page would reconcile).
    const ext = await h.context.newPage();
    await ext.goto(`chrome-extension://${PROVIDER_ID}/manifest.json`);
    await ext.evaluate(async ([id, js, matches, unseen]) => {
      await chrome.userScripts.register([{ id: `${id}-x`, matches, excludeGlobs: ["http://zw.test/*\u200b", "http://zw.test:*/caf\u00e9*", "http://ZW.test:*", ...unseen],
        excludeMatches: ["http://*.0.0.1/*"], js, world: "USER_SCRIPT", worldId: "lumo-e2e-x" }]);
    }, [uuid, [{ code: 'document.documentElement.setAttribute("data-ran-byhand", "1");' }], ["http://zw.test/*", "http://127.0.0.1/*"], unseen]);
    try {
      for (const path of ["/", "/caf%C3%A9", "/b"]) assert.ok((await ranOn(`http://zw.test:${P}${path}`)).includes("byhand"), `Chrome excluded ${path}`);
      assert.ok((await ranOn(`http://127.0.0.1:${P}/`)).includes("byhand"), "Chrome excluded 127.0.0.1 by *.0.0.1");
    } finally {
      await ext.evaluate((id) => chrome.userScripts.unregister({ ids: [`${id}-x`] }), uuid);
      await ext.close();
    }
    // bаnk.test (Cyrillic а) is xn--…, not bank.test: Chrome runs the script on bank.test.
    assert.ok(reg.excludeMatches.some((m) => m.includes("xn--")), JSON.stringify(reg));
    assert.ok((await ranOn(`http://bank.test:${P}/`)).includes("zw"), "Chrome runs it on bank.test");
    assert.deepEqual(await saysRun(`http://bank.test:${P}/`), [uuid], "match_url agrees");
    const page = await h.context.newPage();
    await page.goto(`chrome-extension://${PROVIDER_ID}/options.html`);
    const row = page.locator(`[data-uuid="${uuid}"]`);
    await row.waitFor({ timeout: 5000 });
    const rules = await row.getByRole("listitem").allTextContents();
    assert.ok(rules.some((r) => r.startsWith("@include http://zw.test/*\u27e8U+200B\u27e9 (no page at all:")), show(rules));
    assert.ok(rules.some((r) => r.startsWith("@exclude-match http://b\u0430nk.test/* (") && r.includes("reads it as xn--")), show(rules));
    // An address in another form is named as Chrome reads it; a wildcard host gets no note
    // (Chrome's URL escapes `*`: a reviewer saw every `*://*/*` get one).
    assert.ok(rules.includes("@match *://*/zw-any*"), show(rules));
    assert.ok(rules.some((r) => r.startsWith("@match http://3232235777/zw* (") && r.includes("reads it as 192.168.1.1: a device on your local network")), show(rules));
    assert.ok(!/\u200b/.test(await row.textContent()), "no raw zero-width space in the row");
    await page.close();
  });

  test("a path is matched as Chrome decodes it: match_url agrees with Chrome on escaped and non-ASCII paths", T, async () => {
    const P = server.port;
    const tags = {
      esc: ["@match http://dec.test/a%41*"],
      utf: ["@match http://dec.test/caf\u00e9*"],
      exc: ["@match http://dec.test/*", "@exclude-match http://dec.test/\u00fcber*"],
      keep: ["@match http://dec.test/s%2Fy*"],
      // A regular expression is tested against location.href, where é is %C3%A9: it runs nowhere.
      rx: ["@include /dec\\.test.*caf\u00e9/"],
    };
    const uuids = {};
    for (const [tag, lines] of Object.entries(tags)) uuids[tag] = (await save(tag, lines)).uuid;
    const said = await ok("validate_script", { source: script("rx", tags.rx) });
    assert.ok(said.diagnostics.some((d) => d.line === 4 && /"\u00e9" \(U\+00E9\) is in no address.*where the expression needs it, it matches nothing/.test(d.message)), show(said.diagnostics));
    const tagOf = Object.fromEntries(Object.entries(uuids).map(([t, u]) => [u, t]));
    const mismatches = [];
    for (const [path, want] of [["/aA", ["esc", "exc"]], ["/caf%C3%A9", ["exc", "utf"]], ["/caf%c3%a9", ["exc", "utf"]], ["/%C3%BCber", []], ["/s/y", ["exc"]], ["/s%2Fy", ["exc", "keep"]]]) {
      const url = `http://dec.test:${P}${path}`;
      const seen = await ranOn(url);
      const said = (await saysRun(url)).map((u) => tagOf[u]).filter(Boolean).sort();
      if (JSON.stringify(seen) !== JSON.stringify(want)) mismatches.push(`${path}: Chrome ran ${JSON.stringify(seen)}, expected ${JSON.stringify(want)}`);
      if (JSON.stringify(said) !== JSON.stringify(seen)) mismatches.push(`${path}: match_url says ${JSON.stringify(said)}, Chrome ran ${JSON.stringify(seen)}`);
    }
    assert.deepEqual(mismatches, []);
  });

  test("a regular expression with flags is not one: @include /…/i is warned and runs nowhere in Chrome, @exclude /…/i is refused", T, async () => {
    const P = server.port;
    // Tampermonkey-style flags: read as a glob here (as Violentmonkey reads it), and a glob that
    // starts with "/" matches no address. Without the flags the same expression runs.
    const flagged = ["@include /^http:\\/\\/flags\\.test:\\d+\\//i"];
    const said = await ok("validate_script", { source: script("fl", flagged) });
    assert.ok(said.diagnostics.some((d) => d.line === 4 && d.severity === "warning"
      && /matches no page: an address starts with its scheme.*no flags/.test(d.message)), show(said.diagnostics));
    const fl = (await save("fl", flagged)).uuid;
    const plain = (await save("fp", ["@include /^http:\\/\\/flags\\.test:\\d+\\//"])).uuid;
    const url = `http://flags.test:${P}/`;
    assert.deepEqual(await ranOn(url), ["fp"], "Chrome runs the expression without flags, and not the one with them");
    assert.deepEqual((await saysRun(url)).filter((u) => u === fl || u === plain), [plain], "match_url agrees");
    const res = await env.tools.fails("write_script", { source: script("fx", ["@match http://flags.test/*", "@exclude /^http:\\/\\/flags\\.test/i"]) }, "INVALID_METADATA");
    assert.match(res.content[0].text, /would exclude no page: an address starts with its scheme/);
  });

  test("validate_script: @match with @include is the union, with no AND warning", T, async () => {
    const v = await ok("validate_script", { source: script("v", ["@match http://a.test/*", "@include http://b.test/*"]) });
    assert.equal(v.valid, true);
    assert.ok(!v.diagnostics.some((d) => /AND/.test(d.message)), JSON.stringify(v.diagnostics));
  });

  test("a regex @exclude that asks for a capital in the host excludes nothing in Chrome, and says so where it is shown", T, async () => {
    const P = server.port;
    const rule = "@exclude /^https?:\\/\\/(www\\.)?Bank\\.test(:\\d+)?\\//";
    const said = await ok("validate_script", { source: script("capx", ["@match *://*/*", rule]) });
    assert.ok(said.diagnostics.some((d) => d.line === 5 && /capital "B".*lowercase.*matches nothing/.test(d.message)), show(said.diagnostics));
    const s = await write("capx", ["@match *://*/*", rule]);
    // Chrome: it runs on the bank, as match_url says.
    assert.deepEqual(await ranOn(`http://bank.test:${P}/`), ["capx"]);
    assert.deepEqual(await saysRun(`http://bank.test:${P}/`), [s.uuid]);
    // The options page's rule note says it too.
    const row = (await h.internal("scripts.list")).scripts.find((x) => x.uuid === s.uuid);
    assert.match(JSON.stringify(row), /capital \\"B\\"/);
  });

  test("an update that drops an @include and an @exclude-match really removes them, also after a worker restart", T, async () => {
    const P = server.port;
    const v1 = ["@match http://upd.test/*", "@include http://upd2.test:*/*", "@exclude-match http://upd.test/ex*", "@exclude *skip*"];
    const s = await write("upd", v1);
    assert.deepEqual(await ranOn(`http://upd2.test:${P}/`), ["upd"]);
    assert.deepEqual(await ranOn(`http://upd.test:${P}/ex`), []);
    assert.deepEqual(await ranOn(`http://upd.test:${P}/skip`), []);
    const v2 = await ok("write_script", { uuid: s.uuid, revision: s.revision, source: script("upd", ["@match http://upd.test/*"]) });
    assert.equal(v2.registered, true);
    const check = async (when) => {
      assert.deepEqual(await ranOn(`http://upd2.test:${P}/`), [], `${when}: dropped @include still runs`);
      assert.deepEqual(await ranOn(`http://upd.test:${P}/ex`), ["upd"], `${when}: dropped @exclude-match still excludes`);
      assert.deepEqual(await ranOn(`http://upd.test:${P}/skip`), ["upd"], `${when}: dropped @exclude still excludes`);
      const reg = (await registrations()).find((r) => r.id === s.uuid);
      assert.deepEqual([reg.includeGlobs ?? [], reg.excludeMatches ?? [], reg.excludeGlobs ?? []], [[], [], []], `${when}: ${JSON.stringify(reg)}`);
    };
    await check("after the update");
    await h.stopProviderWorker();
    await h.lumo("probe", PROVIDER_ID, { openSession: false });
    await check("after a worker restart");
    await ok("delete_script", { uuid: s.uuid });
  });

  test("a pattern Chrome refuses is refused at its line and nothing is registered", T, async () => {
    const before = (await registrations()).map((r) => r.id).sort();
    const res = await call("write_script", { source: script("badip", ["@match http://256.256.256.256/*"]) });
    assert.equal(res.isError, true, JSON.stringify(res.structuredContent));
    assert.equal(res.structuredContent.error_code, "INVALID_METADATA");
    const d = res.structuredContent.details.diagnostics.find((x) => x.severity === "error");
    assert.equal(d.line, 4);
    assert.match(d.message, /256\.256\.256\.256.*invalid host/);
    assert.deepEqual((await registrations()).map((r) => r.id).sort(), before);
    const v = await ok("validate_script", { source: script("badip", ["@match http://256.256.256.256/*"]) });
    assert.equal(v.valid, false);
  });

  // `new URL()` in Chrome accepts the host `xn--a.test` (and the page loads); the WHATWG `url`
  // crate the wasm once linked refuses it as an invalid IDN, so the write was refused and
  // match_url said "no match" on a page Chrome loads. The browser's parser decides now.
  test("the browser's URL parser decides: a host Chrome loads (xn--a.test) is accepted and runs where match_url says", T, async () => {
    const P = server.port;
    const s = await write("xna", ["@match http://xn--a.test/*"]);
    const url = `http://xn--a.test:${P}/page`;
    assert.deepEqual(await ranOn(url), ["xna"]);
    assert.deepEqual(await saysRun(url), [s.uuid]);
    assert.deepEqual(await ranOn(`http://other.test:${P}/page`), []);
    assert.deepEqual(await saysRun(`http://other.test:${P}/page`), []);
    await ok("delete_script", { uuid: s.uuid });
  });

  test("an @exclude glob naming a site holds on its addresses with credentials, where a script of its own sends the page", T, async () => {
    const P = server.port;
    // Runs everywhere but the bank; on another site it sends the page to the bank with a user
    // name in the address, as a hostile script would, to run there past its own exclude.
    const s = await write("nobank", ["@match *://*/*", "@exclude *://bank.test:*/*"],
      `document.documentElement.setAttribute("data-ran-nobank", "1");
       if (location.hostname === "evil.test") location.href = "http://x@bank.test:${P}/account";`);
    assert.deepEqual(await ranOn(`http://bank.test:${P}/account`), []);
    await tab.goto(`http://evil.test:${P}/`, { waitUntil: "load" });
    await tab.waitForURL(/bank\.test/, { timeout: 10_000 });
    await tab.waitForLoadState("load");
    await sleep(SETTLE_MS);
    assert.equal(await tab.evaluate(() => location.host), `bank.test:${P}`);
    assert.equal(await tab.evaluate(() => document.documentElement.getAttribute("data-ran-nobank")), null, "the script ran on the bank's page");
    assert.deepEqual(await saysRun(`http://x@bank.test:${P}/account`), []);
    assert.deepEqual(await saysRun(`http://other.test:${P}/`), [s.uuid]);
    // A page cannot keep the script off itself by naming the bank in its own address.
    for (const path of [`/?x=@bank.test:${P}/`, `/@bank.test:${P}/`]) {
      assert.deepEqual(await ranOn(`http://other.test:${P}${path}`), ["nobank"], path);
      assert.deepEqual(await saysRun(`http://other.test:${P}${path}`), [s.uuid], path);
    }
    await ok("delete_script", { uuid: s.uuid });
  });

  // Chrome tests `excludeGlobs` (and the guard a regex) on the address as written, while a
  // server reads `/%61dmin` as `/admin`: a script of its own sent the page there and ran on it,
  // past an @exclude the user was shown.
  test("an @exclude naming a path holds on the address with that path's letters %-escaped, a dot ending its host, or doubled slashes", T, async () => {
    const P = server.port;
    const s = await write("noadmin", ["@match *://*/*", "@exclude *://site.test:*/admin*", "@exclude /^http:\\/\\/site\\.test:\\d+\\/panel/", "@exclude-match *://site.test/vault*"],
      `document.documentElement.setAttribute("data-ran-noadmin", "1");
       if (location.hostname === "evil.test") location.href = "http://site.test:${P}/%61dmin/users";`);
    assert.deepEqual(await ranOn(`http://site.test:${P}/admin/users`), []);
    await tab.goto(`http://evil.test:${P}/`, { waitUntil: "load" });
    await tab.waitForURL(/site\.test/, { timeout: 10_000 });
    await tab.waitForLoadState("load");
    await sleep(SETTLE_MS);
    assert.equal(await tab.evaluate(() => location.pathname), "/%61dmin/users");
    assert.equal(await tab.evaluate(() => document.documentElement.getAttribute("data-ran-noadmin")), null, "the script ran on /%61dmin");
    for (const path of ["/%61dmin/users", "/%70anel", "/p%61nel/x", "/%41dmin"]) {
      const url = `http://site.test:${P}${path}`;
      // "/%41dmin" is "/Admin": another path, where the script runs, as on a page of its own.
      const runs = path === "/%41dmin" ? ["noadmin"] : [];
      assert.deepEqual(await ranOn(url), runs, path);
      assert.deepEqual(await saysRun(url), runs.length ? [s.uuid] : [], path);
    }
    // A reviewer's: a dot ending the host, and a doubled slash, are the same page to a server.
    for (const u of [`http://site.test.:${P}/admin/users`, `http://site.test:${P}//admin`, `http://site.test:${P}/x/..//%61dmin`, `http://site.test:${P}//vault`, `http://site.test.:${P}/vault`]) {
      assert.deepEqual(await ranOn(u), [], u);
      assert.deepEqual(await saysRun(u), [], u);
    }
    // An escape that is not of a letter (here "/") leaves another address: the script runs.
    assert.deepEqual(await ranOn(`http://site.test:${P}/x%2Fadmin`), ["noadmin"]);
    assert.deepEqual(await saysRun(`http://site.test:${P}/x%2Fadmin`), [s.uuid]);
    await ok("delete_script", { uuid: s.uuid });
  });

  // R10 (high): a glob of many wildcards, checked by the page's guard and match_url as a plain
  // RegExp, made V8 try every split of the address (`********Z`: 73 s on 59 characters): the
  // page never loaded and the worker stalled for every caller. Each literal run is now
  // committed to its leftmost place, as Chrome's own glob matching does: one pass.
  test("globs of many wildcards cost one pass: the page loads, match_url answers at once, and both agree with Chrome", T, async () => {
    const P = server.port;
    const inc = await save("redos-inc", ["@include *a*a*a*a*a*a*a*a*Z"]);
    const exc = await save("redos-exc", ["@match http://redos.test/*", "@exclude ********Z", "@exclude-match http://redos.test/*a*a*a*a*a*a*a*a*Z"]);
    for (const [tail, ran] of [["a".repeat(90), ["redos-exc"]], [`${"a".repeat(90)}Z`, ["redos-inc"]]]) {
      const url = `http://redos.test:${P}/${tail}`;
      const started = Date.now();
      assert.deepEqual(await ranOn(url), ran, url);
      const says = await saysRun(url);
      assert.ok(Date.now() - started < 15_000, `${Date.now() - started} ms`);
      assert.deepEqual(says, ran.map((t) => (t === "redos-inc" ? inc.uuid : exc.uuid)), url);
    }
  });

  test("two scripts run in separate worlds: one cannot read the other's globals", T, async () => {
    const P = server.port;
    const a = await write("wa", ["@match http://worlds.test/*", "@run-at document-start"], 'globalThis.lumoSecret = "from A"; document.documentElement.setAttribute("data-ran-wa", "1");');
    const b = await write("wb", ["@match http://worlds.test/*"], 'document.documentElement.setAttribute("data-ran-wb", "1"); document.documentElement.setAttribute("data-b-sees", String(typeof globalThis.lumoSecret));');
    assert.deepEqual(await ranOn(`http://worlds.test:${P}/`), ["wa", "wb"]);
    assert.equal(await tab.evaluate(() => document.documentElement.getAttribute("data-b-sees")), "undefined");
    const regs = await registrations();
    const worlds = regs.filter((r) => r.id === a.uuid || r.id === b.uuid).map((r) => r.worldId);
    assert.equal(new Set(worlds).size, 2, JSON.stringify(worlds));
    await ok("delete_script", { uuid: a.uuid });
    await ok("delete_script", { uuid: b.uuid });
  });

  // Chrome holds at most 100 world configurations, each until the extension is updated; every
  // script has a world of its own. Before, a configuration was never given back, so once 100
  // scripts had ever been written, every new one was refused ("You may only configure up to
  // 100 individual user script worlds") and did not run.
  test("a world's configuration is held only while its script is registered: the 101st script ever written still runs", T, async () => {
    const P = server.port;
    const worldCount = async () => {
      const page = await h.context.newPage();
      try {
        await page.goto(`chrome-extension://${PROVIDER_ID}/manifest.json`);
        return await page.evaluate(async () => (await chrome.userScripts.getWorldConfigurations()).filter((w) => w.worldId).length);
      } finally { await page.close(); }
    };
    /** Configures worlds `prefix-<n>` until Chrome holds 99 besides the default world's: all 100. */
    const fillWorlds = async (prefix) => {
      const page = await h.context.newPage();
      try {
        await page.goto(`chrome-extension://${PROVIDER_ID}/manifest.json`);
        await page.evaluate(async (prefix) => {
          const held = (await chrome.userScripts.getWorldConfigurations()).filter((w) => w.worldId).length;
          for (let i = held; i < 99; i++) await chrome.userScripts.configureWorld({ worldId: `${prefix}-${i}`, messaging: true });
        }, prefix);
      } finally { await page.close(); }
    };
    const before = await worldCount();
    for (let i = 0; i < 101 - before; i++) {
      const r = await h.internal("scripts.save", { source: script(`gone${i}`, ["@match http://gone.test/*"]) });
      assert.equal(r?.result?.registered, true, JSON.stringify(r).slice(0, 400));
      assert.equal((await h.internal("scripts.delete", { uuid: r.result.script.uuid }))?.ok, true);
    }
    assert.equal(await worldCount(), before);
    // The user's own hands (not rate-limited, unlike the agent's 30 writes a minute).
    const save = async (tag) => (await h.internal("scripts.save", { source: script(tag, ["@match http://w101.test/*"]) })).result.script;
    const s = await save("w101");
    assert.deepEqual(await ranOn(`http://w101.test:${P}/`), ["w101"]);
    // Its world has its channel: the run is reported.
    let runs = [];
    for (const deadline = Date.now() + 5000; !runs.length && Date.now() < deadline; await sleep(100)) runs = (await ok("script_runs", { uuid: s.uuid })).runs;
    assert.equal(runs.length, 1, JSON.stringify(runs));

    // Configurations an earlier version left behind go back at the next reconcile.
    await fillWorlds("left");
    assert.equal(await worldCount(), 99);
    // With 100 held (99 and the default world's, configured with env::WORLD_CSP), Chrome refuses
    // a new script's world: it is stored but does not run, and the user sees why on the options
    // page, in that script's row.
    const refusedSave = await h.internal("scripts.save", { source: script("w-refused", ["@match http://w101.test/*"]) });
    assert.equal(refusedSave?.result?.registered, false, JSON.stringify(refusedSave).slice(0, 400));
    const refused = refusedSave.result.script;
    const options = await h.context.newPage();
    try {
      await options.goto(`chrome-extension://${PROVIDER_ID}/options.html`);
      const note = options.getByLabel("Registration of Matching w-refused");
      assert.match(await note.innerText({ timeout: 10_000 }), /^Chrome refused to register it, so it does not run: .*100/);
      assert.equal(await options.getByLabel("Registration of Matching w101").count(), 0);
      // Until the provider has seen it off: Chrome's toggle reaches the worker a little later
      // (one probe right after it could still find it on, so the API never "came back").
      await h.setUserScriptsAccess(PROVIDER_ID, false);
      assert.equal((await probeUntilReady(h, false)).response?.status?.ready, false);
      await h.setUserScriptsAccess(PROVIDER_ID, true);
      for (const deadline = Date.now() + 5000; (await worldCount()) > before + 2 && Date.now() < deadline; await sleep(100)) {
        await h.lumo("probe", PROVIDER_ID, { openSession: false });
      }
      // The reconcile gave the left-over configurations back and registered it: the note goes.
      await note.waitFor({ state: "detached", timeout: 10_000 });
    } finally { await options.close(); }
    assert.deepEqual(await ranOn(`http://w101.test:${P}/`), ["w-refused", "w101"]);
    await h.internal("scripts.delete", { uuid: refused.uuid });
    assert.equal(await worldCount(), before + 1);
    const t = await save("w102");
    assert.deepEqual(await ranOn(`http://w101.test:${P}/`), ["w101", "w102"]);

    // All 100 held again: a script saved now is refused. The user turns another script off,
    // which gives its configuration back: the refused one is registered after that interaction,
    // with no write of its own (before, it stayed refused until it was itself written again).
    await fillWorlds("again");
    const later = await h.internal("scripts.save", { source: script("w-later", ["@match http://w101.test/*"]) });
    assert.equal(later?.result?.registered, false, JSON.stringify(later).slice(0, 400));
    assert.equal((await h.internal("scripts.setEnabled", { uuid: t.uuid, enabled: false })).ok, true);
    let ran = [];
    for (const deadline = Date.now() + 10_000; !ran.includes("w-later") && Date.now() < deadline; await sleep(200)) ran = await ranOn(`http://w101.test:${P}/`);
    assert.deepEqual(ran, ["w-later", "w101"]);
    const listed = (await h.internal("scripts.list")).scripts.find((x) => x.uuid === later.result.script.uuid);
    assert.equal(listed?.registrationError ?? null, null, JSON.stringify(listed));
    await h.internal("scripts.delete", { uuid: later.result.script.uuid });
    for (const u of [t.uuid, s.uuid]) await h.internal("scripts.delete", { uuid: u });
  });

  // An import registers its scripts together (one `register` for all: Chrome stalls every tab
  // after each call). One Chrome refuses keeps none of the others from running: here Chrome has
  // room for two more world configurations, so the third script is stored, shown refused, and
  // the two others run.
  test("an import's scripts are registered together: those Chrome takes run, and one it refuses is stored and shown refused", T, async () => {
    const P = server.port;
    const worlds = async (fn, arg) => {
      const page = await h.context.newPage();
      try {
        await page.goto(`chrome-extension://${PROVIDER_ID}/manifest.json`);
        return await page.evaluate(fn, arg);
      } finally { await page.close(); }
    };
    const tags = ["imp-a", "imp-b", "imp-c"];
    const files = tags.map((t) => ({ name: `${t}.user.js`, source: script(t, ["@match http://imp.test/*"]) }));
    // Every script imported at once runs.
    const all = await h.internal("scripts.import", { files, confirmed: true });
    assert.equal(all?.ok, true, JSON.stringify(all).slice(0, 400));
    assert.deepEqual(await ranOn(`http://imp.test:${P}/`), tags);
    // A backup of them restored over them, every one disabled there (withdrawn together, in one
    // `unregister`; Chrome refuses the whole call if it names an id it does not hold): none runs,
    // Chrome holds none.
    const { backup } = await h.internal("backup.export", { values: false });
    const off = structuredClone(backup);
    for (const e of off.scripts) e.enabled = false;
    const text = JSON.stringify(off);
    const raw = async (msg) => (await h.providerPage()).evaluate((m) => chrome.runtime.sendMessage(m), msg);
    const asked = await raw({ channel: "lumo:internal", op: "backup.restore", text, confirmed: true });
    assert.equal(asked?.code, "DUPLICATES", JSON.stringify(asked).slice(0, 400));
    const restored = await h.internal("backup.restore", { text, replace: asked.duplicates.map((d) => d.uuid), confirmed: true });
    assert.equal(restored?.ok, true, JSON.stringify(restored).slice(0, 400));
    assert.equal(restored.imported.length, 3);
    assert.deepEqual(await ranOn(`http://imp.test:${P}/`), []);
    assert.deepEqual(await registrations(), []);
    assert.deepEqual((await h.internal("scripts.list")).scripts.map((s) => s.enabled), [false, false, false]);
    for (const s of all.imported) await h.internal("scripts.delete", { uuid: s.uuid });
    assert.deepEqual(await ranOn(`http://imp.test:${P}/`), []);

    // Room for two more configurations only.
    const filled = await worlds(async () => {
      const held = (await chrome.userScripts.getWorldConfigurations()).filter((w) => w.worldId).length;
      const ids = [];
      // 97 and the default world's: the 100 Chrome holds, less two.
      for (let i = held; i < 97; i++) { ids.push(`left-imp-${i}`); await chrome.userScripts.configureWorld({ worldId: ids.at(-1), messaging: true }); }
      return ids;
    });
    let r;
    try {
      r = await h.internal("scripts.import", { files, confirmed: true });
      assert.equal(r?.ok, true, JSON.stringify(r).slice(0, 400));
      assert.equal(r.imported.length, 3);
      const ran = await ranOn(`http://imp.test:${P}/`);
      assert.equal(ran.length, 2, `ran: ${ran}`);
      const list = (await h.internal("scripts.list")).scripts;
      const refused = list.filter((s) => s.registrationError);
      assert.equal(refused.length, 1, JSON.stringify(list).slice(0, 600));
      assert.match(refused[0].registrationError, /100/);
      const missing = tags.filter((t) => !ran.includes(t));
      assert.deepEqual(missing, [refused[0].name.replace("Matching ", "")]);
      // And Chrome holds exactly the two that ran.
      const held = (await registrations()).map((g) => g.id).sort();
      assert.deepEqual(held, r.imported.map((s) => s.uuid).filter((u) => u !== refused[0].uuid).sort());
    } finally {
      // By the user's hands: the agent's deletes (beforeEach) count against its rate limit.
      for (const s of r?.imported ?? []) await h.internal("scripts.delete", { uuid: s.uuid });
      await worlds(async (ids) => { for (const id of ids) await chrome.userScripts.resetWorldConfiguration(id); }, filled);
    }
  });

  // Chrome gives a document at most 10 user-script worlds; every script past the tenth runs in
  // its shared default world, configured without messaging. Before, the second script there
  // collided with the first's runtime (`const __lumoRun`) and ran with the first's GM functions
  // and values. Each script here, when it finds itself without a channel, also plays the hostile
  // neighbour: it fakes chrome.runtime.sendMessage for every script after it in that world.
  test("more than 10 scripts on one page: those past the tenth run with their own GM functions, no channel, and nobody's values or token", { timeout: 240_000 }, async () => {
    const P = server.port;
    const N = 12;
    const crowd = (i) => script(`crowd${i}`, ["@match http://crowd.test/*", `@match http://seed${i}.test/*`,
      "@grant GM_getValue", "@grant GM_setValue", "@grant GM_info"], [
      "const root = document.documentElement;",
      "const here = typeof chrome === 'object' && !!chrome && typeof chrome.runtime?.sendMessage === 'function';",
      `if (location.hostname === 'seed${i}.test') { GM_setValue('secret', 'secret-${i}'); root.setAttribute('data-ran-crowd${i}', 'seeded'); }`,
      "else {",
      "  if (!here) {",
      "    const fake = (m) => { root.setAttribute('data-stolen', (root.getAttribute('data-stolen') || '') + JSON.stringify(m)); return Promise.resolve({}); };",
      "    try { if (globalThis.chrome && globalThis.chrome.runtime) chrome.runtime.sendMessage = fake; else globalThis.chrome = { runtime: { sendMessage: fake } }; } catch (e) {}",
      "    if (typeof chrome?.runtime?.sendMessage === 'function') root.setAttribute('data-faked', '1');",
      "  }",
      "  let v; try { v = GM_getValue('secret', 'none'); } catch (e) { v = 'threw: ' + e.message; }",
      `  root.setAttribute('data-ran-crowd${i}', JSON.stringify([here ? 'own' : 'shared', GM_info.script.name, v]));`,
      "}",
    ].join("\n"));
    const uuids = [];
    for (let i = 0; i < N; i++) {
      const r = await h.internal("scripts.save", { source: crowd(i) });
      assert.equal(r?.result?.registered, true, JSON.stringify(r).slice(0, 400));
      uuids.push(r.result.script.uuid);
    }
    try {
      // Each script alone on a page of its own sets its value, through its own channel.
      for (let i = 0; i < N; i++) assert.deepEqual(await ranOn(`http://seed${i}.test:${P}/`), [`crowd${i}`]);
      const stored = async () => {
        const page = await h.context.newPage();
        try {
          await page.goto(`chrome-extension://${PROVIDER_ID}/manifest.json`);
          return await page.evaluate(async (ids) => { const o = await chrome.storage.local.get(ids.map((u) => `values/${u}`)); return ids.map((u) => o[`values/${u}`]?.secret ?? null); }, uuids);
        } finally { await page.close(); }
      };
      const want = uuids.map((_, i) => JSON.stringify(`secret-${i}`));
      let got = [];
      for (const deadline = Date.now() + 10_000; Date.now() < deadline; await sleep(200)) if (JSON.stringify(got = await stored()) === JSON.stringify(want)) break;
      assert.deepEqual(got, want);
      // Each one's snapshot is in its registered code once the worker re-registered it.
      const codes = async () => {
        const all = await chromeRegistrations(h);
        return uuids.map((u) => all.find?.((x) => x.id === u)?.js?.[0]?.code ?? "");
      };
      // (The value as the snapshot holds it: its JSON text in a JSON string; the source has the
      // text in single quotes.)
      const has = (code, i) => code.includes(`["secret","\\"secret-${i}\\""]`);
      const snapshotted = await until(codes, (c) => c.every(has), 10_000);
      assert.ok(snapshotted.every(has), `every script was registered again with its value: ${snapshotted.map((c, i) => has(c, i))}`);
      // Each seed page's run report is in before the count is taken.
      const reportCounts = () => Promise.all(uuids.map(async (u) => (await ok("script_runs", { uuid: u })).runs.length));
      const reportsBefore = await until(reportCounts, (n) => n.every((x) => x >= 1), 5000);

      await tab.goto(`http://crowd.test:${P}/`, { waitUntil: "load" });
      await sleep(SETTLE_MS + 600);
      const seen = await tab.evaluate(() => Object.fromEntries([...document.documentElement.attributes].map((a) => [a.name, a.value])));
      const rows = uuids.map((_, i) => JSON.parse(seen[`data-ran-crowd${i}`] ?? "null"));
      assert.ok(rows.every(Boolean), `every script ran: ${JSON.stringify(seen)}`);
      // A script in its own world reads its own value; one past the tenth has no channel: its
      // value functions say so, and it reads no one's values. (Its own test of chrome.runtime
      // may be fooled by the fake a neighbour installed; the provider's runtime is not.)
      const noChannel = /^threw: GM: no channel to the provider on this page\. Chrome gives a page at most 10 user-script worlds/;
      const own = rows.map((r, i) => [r, i]).filter(([r, i]) => r[2] === `secret-${i}`);
      const shared = rows.map((r, i) => [r, i]).filter(([r]) => noChannel.test(r[2]));
      assert.equal(own.length, 10, JSON.stringify(rows));
      assert.equal(shared.length, N - 10, JSON.stringify(rows));
      assert.ok(shared.some(([r]) => r[0] === "shared"), JSON.stringify(rows));
      // Every script has its own GM_info.
      for (const [r, i] of [...own, ...shared]) assert.equal(r[1], `Matching crowd${i}`, JSON.stringify(rows));
      // The hostile neighbour really installed its fake, and caught nothing: no token, no report.
      assert.equal(seen["data-faked"], "1", JSON.stringify(seen));
      assert.equal(seen["data-stolen"], undefined, "a script in the shared world caught another's message");
      // Exactly the ten with a world of their own reported this run, each as itself: waited
      // for, then a second more for a report that should not come.
      const ownWorld = rows.map((r, i) => r[2] === `secret-${i}`);
      await until(reportCounts, (n) => n.every((x, i) => !ownWorld[i] || x > reportsBefore[i]), 5000);
      await sleep(1000);
      const reportsAfter = await reportCounts();
      const reported = uuids.map((_, i) => reportsAfter[i] - reportsBefore[i]);
      assert.deepEqual(reported, ownWorld.map((o) => (o ? 1 : 0)), JSON.stringify({ reported, rows }));
      // match_url says that not all twelve can have their channel here.
      const m = await ok("match_url", { url: `http://crowd.test:${P}/` });
      assert.equal(m.scripts.filter((s) => s.runs).length, N);
      assert.match(m.warning ?? "", /12 scripts run on this page; Chrome gives a page at most 10 user-script worlds/);
      assert.equal((await ok("match_url", { url: `http://seed1.test:${P}/` })).warning, undefined);
    } finally {
      for (const u of uuids) await h.internal("scripts.delete", { uuid: u });
    }
  });

  test("spellings other managers accept run where they mean (http*://, no path, @run-at document-ready); @run-at context-menu is refused, not run unasked", T, async () => {
    const P = server.port;
    // Tampermonkey runs it only when the user picks it from the context menu: here it would
    // run on every load of every page its rules match, so it is refused with the way out.
    const menu = await call("write_script", { source: script("menu", ["@match http://spell.test/*", "@run-at context-menu"]) });
    assert.equal(menu.isError, true, JSON.stringify(menu));
    assert.match(menu.content[0].text, /context-menu is not available[^]*use document-idle/);
    const scripts = {
      star: ["@match http*://spell.test/*", "@run-at document-ready"],
      root: ["@match http://root.test"],
    };
    const tagOf = {};
    for (const [tag, lines] of Object.entries(scripts)) {
      const w = await ok("write_script", { source: script(tag, lines) });
      assert.ok(w.diagnostics.some((d) => d.severity === "warning"), `${tag}: a warning says how it was read: ${JSON.stringify(w.diagnostics)}`);
      tagOf[w.script.uuid] = tag;
    }
    const table = [
      [`http://spell.test:${P}/a`, ["star"]],
      [`http://root.test:${P}/`, ["root"]],
      [`http://root.test:${P}/page`, []],
      [`http://other.test:${P}/`, []],
    ];
    const mismatches = [];
    for (const [url, want] of table) {
      const seen = await ranOn(url);
      const said = (await saysRun(url)).map((u) => tagOf[u]).filter(Boolean).sort();
      if (JSON.stringify(seen) !== JSON.stringify(want)) mismatches.push(`${url}: ran ${JSON.stringify(seen)}, rules say ${JSON.stringify(want)}`);
      if (JSON.stringify(said) !== JSON.stringify(seen)) mismatches.push(`${url}: match_url says ${JSON.stringify(said)}, Chrome ran ${JSON.stringify(seen)}`);
    }
    assert.deepEqual(mismatches, []);
  });

  test("reconcile compares Chrome's whole registration: a rule left behind in Chrome is removed, older code and rules are replaced", T, async () => {
    const P = server.port;
    const s = await write("left", ["@match http://left.test/*"]);
    // Two more that Chrome holds in an older form (code of an older version; a rule since
    // changed): a reconcile updates them together (one `update`), and each then runs as stored.
    // By the user's hands: the suite's agent writes come near its rate limit by now.
    const save = async (tag, lines) => (await h.internal("scripts.save", { source: script(tag, lines) })).result.script;
    const older = await save("older", ["@match http://recon.test/*"]);
    const moved = await save("moved", ["@match http://moved.test/*"]);
    // Simulate a registration left over from an older version: same id, an extra include glob.
    const page = await h.context.newPage();
    try {
      await page.goto(`chrome-extension://${PROVIDER_ID}/options.html`);
      await page.evaluate(async (id) => {
        const [reg] = await chrome.userScripts.getScripts({ ids: [id] });
        // With the plain source: the provider never registers include globs, and a glob-injected
        // script that messages the extension crashes a page with an iframe (Chromium 156).
        const source = (await chrome.storage.local.get(`source/${id}`))[`source/${id}`];
        await chrome.userScripts.unregister({ ids: [id] });
        await chrome.userScripts.register([{ ...reg, js: [{ code: source }], includeGlobs: ["http://leftover.test:*/*"] }]);
      }, s.uuid);
    } finally {
      await page.close();
    }
    const tamper = await h.context.newPage();
    try {
      await tamper.goto(`chrome-extension://${PROVIDER_ID}/options.html`);
      await tamper.evaluate(async ([older, moved]) => {
        await chrome.userScripts.update([{ id: older, js: [{ code: 'document.documentElement.setAttribute("data-ran-stale-code", "1");' }] }]);
        await chrome.userScripts.update([{ id: moved, matches: ["http://recon.test/*"] }]);
      }, [older.uuid, moved.uuid]);
    } finally {
      await tamper.close();
    }
    assert.deepEqual(await ranOn(`http://leftover.test:${P}/`), ["left"], "the simulated leftover rule is active");
    assert.deepEqual(await ranOn(`http://recon.test:${P}/`), ["moved", "stale-code"], "the simulated older forms are active");
    // The toggle going off and on makes the provider reconcile (Chrome may have dropped scripts).
    await h.setUserScriptsAccess(PROVIDER_ID, false);
    assert.equal((await probeUntilReady(h, false)).response?.status?.ready, false);
    // Off, Chrome runs nothing: the reads say so beside "enabled", the user's own choice.
    assert.deepEqual(await ranOn(`http://left.test:${P}/`), [], "Chrome runs nothing while the switch is off");
    for (const [name, args] of [["list_scripts", {}], ["get_script", { uuid: older.uuid }]]) {
      const r = await call(name, args);
      assert.equal(r.structuredContent?.scriptsCanRun, false, `${name}: ${show(r)}`);
      assert.match(r.content[0].text, /Nothing runs now, enabled or not\. Scripts cannot run: turn on "Allow User Scripts"/, name);
    }
    await h.setUserScriptsAccess(PROVIDER_ID, true);
    let seen;
    for (const deadline = Date.now() + 5000; ;) {
      await h.lumo("probe", PROVIDER_ID, { openSession: false });
      seen = await ranOn(`http://leftover.test:${P}/`);
      if (seen.length === 0 || Date.now() > deadline) break;
    }
    assert.deepEqual(seen, [], "the leftover rule is gone after the reconcile");
    assert.deepEqual(await ranOn(`http://left.test:${P}/`), ["left"]);
    assert.deepEqual(await ranOn(`http://recon.test:${P}/`), ["older"], "older code and rules replaced");
    assert.deepEqual(await ranOn(`http://moved.test:${P}/`), ["moved"]);
    for (const u of [older.uuid, moved.uuid]) await h.internal("scripts.delete", { uuid: u });
  });
});
