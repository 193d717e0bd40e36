// Script updates by hand, in the real options page: a script whose @updateURL points at a local
// server (127.0.0.1, http allowed as "this computer") is checked when the user clicks; the newer
// version is shown (versions, what it may now use and reach, the diff) before anything is
// stored; Update stores it as the user's write, and a page then runs the new version; the
// history holds the old one and restoring it brings it back; the audit shows the user's update.
// A hostile server (another @namespace, a lower version, an oversized body, a redirect to a
// host not allowed, a swap after the review) is refused with its message, and the old version
// keeps running.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, before, describe, test } from "node:test";
import { PROVIDER_ID } from "./lib/harness.mjs";
import { seen, setUp } from "./lib/agent.mjs";
import { sleep } from "./lib/util.mjs";

const T = { timeout: 120_000 };
const NAME = "Upd helper";

/** The page and the update server in one (127.0.0.1): what /helper.user.js answers is what
 *  `serve` was last given, and /other.user.js what `serveOther` was (each `[status, body,
 *  headers, delayMs]`). */
async function updateServer() {
  const hits = [];
  const answers = { "/helper.user.js": () => [404, "none"], "/other.user.js": () => [404, "none"], "/lib.js": () => [404, "none"] };
  // /slow/<n>.user.js: what `serveSlow` was given for that path, after 600 ms; how many were
  // waiting at once at most is `slowMost()`.
  let slow = () => [404, "none"];
  let waiting = 0;
  let most = 0;
  const srv = createServer((req, res) => {
    hits.push(`${req.headers.host}${req.url}`);
    const path = req.url.split("?")[0];
    if (path.startsWith("/slow/")) {
      most = Math.max(most, ++waiting);
      setTimeout(() => {
        waiting--;
        const [status, body] = slow(path);
        res.writeHead(status, { "content-type": "text/javascript" });
        res.end(body);
      }, 600);
      return;
    }
    if (answers[path]) {
      const [status, body, headers = {}, delayMs = 0] = answers[path](srv.address().port);
      setTimeout(() => {
        res.writeHead(status, { "content-type": "text/javascript", ...headers });
        res.end(body);
      }, delayMs);
      return;
    }
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end("<!doctype html><title>page</title><p>page</p>");
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${srv.address().port}`;
  return {
    url, hits,
    serve(fn) { answers["/helper.user.js"] = fn; },
    serveOther(fn) { answers["/other.user.js"] = fn; },
    serveLib(fn) { answers["/lib.js"] = fn; },
    serveSlow(fn) { slow = fn; most = 0; },
    slowMost: () => most,
    close: () => new Promise((r) => { srv.close(r); srv.closeAllConnections(); }),
  };
}

describe("script updates: Check for update, review, Update", () => {
  let env, h, srv, tab, options, uuid;
  const helper = ({ version, namespace = "lumo-e2e-upd", extra = [] }) => [
    "// ==UserScript==", `// @name ${NAME}`, `// @namespace ${namespace}`, `// @version ${version}`,
    "// @match http://127.0.0.1/*", `// @updateURL ${srv.url}/helper.user.js`, ...extra.map((l) => `// ${l}`),
    "// ==/UserScript==",
    "(() => {", '  const mark = document.createElement("lumo-mark");',
    `  mark.dataset.tag = "upd"; mark.dataset.v = ${JSON.stringify(version)};`,
    "  document.documentElement.append(mark);", "})();", "",
  ].join("\n");
  const onPage = (expected) => seen(tab, `${srv.url}/page`, expected);
  const status = () => options.locator("#status").textContent();
  const listed = async () => (await h.internal("scripts.list")).scripts.find((s) => s.uuid === uuid);
  const checkFor = async () => {
    await options.reload();
    await options.getByRole("button", { name: `Check for update of ${NAME}` }).click();
  };

  before(async () => {
    env = await setUp({ server: updateServer });
    ({ h, tab } = env);
    srv = env.server;
    options = await h.context.newPage();
    await options.goto(`chrome-extension://${PROVIDER_ID}/options.html`);
    const r = await h.internal("scripts.save", { source: helper({ version: "1.0" }) });
    uuid = r.result.script.uuid;
    assert.deepEqual(await onPage(["upd:1.0"]), ["upd:1.0"]);
  });
  after(async () => { await env?.close(); });

  test("the user checks, reviews the diff and the new @connect/@grant, updates; a page runs v2; the history restores v1; the audit shows the user's update", T, async () => {
    const v2 = helper({ version: "2.0", extra: ["@grant GM_xmlhttpRequest", "@connect api.example.org"] });
    srv.serve(() => [200, v2]);
    await checkFor();
    const dialog = options.locator("#update-review");
    await dialog.waitFor({ state: "visible", timeout: 10_000 });
    assert.equal(await options.locator("#update-review-title").textContent(), `Update ${NAME}?`);
    assert.match(await options.locator("#update-review-versions").textContent(), /^Version 1\.0 → 2\.0\. Nothing has been stored yet/);
    const effects = await options.locator("#update-review-effects").textContent();
    assert.match(effects, /Asks for @grant GM_xmlhttpRequest/);
    assert.match(effects, /api\.example\.org/);
    const diff = await options.locator("#update-review-diff pre").textContent();
    assert.match(diff, /-\/\/ @version 1\.0/);
    assert.match(diff, /\+\/\/ @grant GM_xmlhttpRequest/);
    assert.match(diff, /\+\/\/ @connect api\.example\.org/);
    // Shown, not stored: still v1.
    assert.equal((await listed()).version, "1.0");
    await options.locator("#update-review-ok").click();
    await options.getByText(/^Updated Upd helper to version 2\.0/).waitFor({ timeout: 10_000 });
    assert.equal(await dialog.isVisible(), false);
    assert.deepEqual(await onPage(["upd:2.0"]), ["upd:2.0"], "the page runs v2");

    const s = await listed();
    assert.deepEqual([s.version, s.revision, s.updatedBy, s.updatedVia, s.enabled], ["2.0", 2, "user", "update", true]);
    const audit = await h.internal("audit.list");
    const i = audit.entries.findIndex((e) => e.tool === "update_script" && e.target === uuid);
    assert.ok(i >= 0, JSON.stringify(audit.entries.slice(0, 3)));
    assert.deepEqual([audit.entries[i].caller, audit.entries[i].result, audit.entries[i].revision], ["user", "ok", 2]);
    assert.ok(audit.undoable.includes(i), "the popup offers Undo of the update");
    const popup = await h.context.newPage();
    await popup.goto(`chrome-extension://${PROVIDER_ID}/popup.html`);
    assert.match(await popup.locator("#audit > li").nth(i).textContent(), /update_script/);
    assert.equal(await popup.locator("#audit > li").nth(i).getByRole("button", { name: /^Undo/ }).count(), 1);
    await popup.close();

    // The history holds v1; restoring it brings v1 back.
    await options.getByRole("button", { name: `History of ${NAME}` }).click();
    // The history is asked of the worker when the button is clicked: wait for it to be shown.
    await options.locator("#history").getByText(/via update/).first().waitFor({ timeout: 10_000 });
    await options.getByRole("button", { name: "Restore revision 1" }).click();
    await options.getByText(/^Restored revision 1/).waitFor({ timeout: 5000 });
    assert.deepEqual(await onPage(["upd:1.0"]), ["upd:1.0"], "v1 runs again");
  });

  test("a hostile server is refused with its message and v1 keeps running: another @namespace, a lower version, an oversized body, a redirect to a host not allowed, a swap after the review", T, async () => {
    const before = await listed();
    const cases = [
      ["another @namespace", () => [200, helper({ version: "9.0", namespace: "evil" })], /not an update of this script: the server sent "Upd helper" \(@namespace "evil"\)/],
      ["a lower version", () => [200, helper({ version: "0.5" })], /No update: the server offers version 0\.5, older than the installed /],
      ["an oversized body", () => [200, `${helper({ version: "3.0" })}//${"x".repeat(300 * 1024)}\n`], /sent more than 262144 bytes, over the limit for a script/],
      ["a redirect to a host not allowed", (port) => [302, "", { location: `http://evil.test:${port}/helper.user.js` }], /redirected to http:\/\/evil\.test:\d+\/helper\.user\.js: only https URLs are loaded .*the redirect was not followed/],
    ];
    for (const [what, answer, says] of cases) {
      srv.serve(answer);
      await checkFor();
      await options.waitForFunction((re) => new RegExp(re).test(document.getElementById("status").textContent), says.source, { timeout: 10_000 })
        .catch(async () => assert.fail(`${what}: status says ${await status()}`));
      assert.equal(await options.locator("#update-review").isVisible(), false, `${what}: nothing to review`);
      const now = await listed();
      assert.deepEqual([now.version, now.revision], [before.version, before.revision], `${what}: the script changed`);
    }
    assert.deepEqual(srv.hits.filter((u) => u.startsWith("evil.test")), [], "the refused redirect was not followed");

    // "Check all for updates" says the same of each script it checks.
    srv.serve(() => [200, helper({ version: "0.5" })]);
    await options.locator("#check-all").click();
    await options.locator("#update-results li", { hasText: NAME }).waitFor({ timeout: 10_000 });
    assert.match(await options.locator("#update-results li", { hasText: NAME }).textContent(), /No update: the server offers version 0\.5/);

    // The server swaps what it sends between the review and the click on Update.
    srv.serve(() => [200, helper({ version: "4.0" })]);
    await checkFor();
    await options.locator("#update-review").waitFor({ state: "visible", timeout: 10_000 });
    srv.serve(() => [200, helper({ version: "4.0", extra: ["@grant GM_setValue"] })]);
    await options.locator("#update-review-ok").click();
    await options.getByText(/^Not updated: the server now sends something other than the version you reviewed/).waitFor({ timeout: 10_000 });
    const now = await listed();
    assert.deepEqual([now.version, now.revision], [before.version, before.revision]);
    assert.deepEqual(await onPage(["upd:1.0"]), ["upd:1.0"], "v1 still runs");
  });

  // Before, a second check that answered while a review was open filled the open dialog with
  // its own update: the user reading one script's review clicked Update on another's.
  test("a check that answers while another review is open waits for it: the open review never changes under the user", T, async () => {
    const OTHER = "Upd other";
    const other = [
      "// ==UserScript==", `// @name ${OTHER}`, "// @namespace lumo-e2e-upd", "// @version 1.0",
      "// @match https://other.invalid/*", `// @updateURL ${srv.url}/other.user.js`, "// ==/UserScript==", "1;", "",
    ].join("\n");
    const saved = await h.internal("scripts.save", { source: other });
    assert.equal(saved.ok, true, JSON.stringify(saved));
    const otherUuid = saved.result.script.uuid;
    srv.serveOther(() => [200, other.replace("@version 1.0", "@version 2.0").replace("1;", "2;")]);
    // The helper's server answers late: its review is asked for while the other one is open.
    srv.serve(() => [200, helper({ version: "5.0" }), {}, 1500]);
    await options.reload();
    await options.getByRole("button", { name: `Check for update of ${NAME}` }).click();
    await options.getByRole("button", { name: `Check for update of ${OTHER}` }).click();
    const title = options.locator("#update-review-title");
    await options.locator("#update-review").waitFor({ state: "visible", timeout: 10_000 });
    assert.equal(await title.textContent(), `Update ${OTHER}?`);
    await options.getByText(`${NAME}: version 5.0 is available.`).waitFor({ timeout: 10_000 });
    await options.waitForTimeout(300);
    assert.equal(await title.textContent(), `Update ${OTHER}?`, "the open review is still the other script's");
    assert.match(await options.locator("#update-review-versions").textContent(), /^Version 1\.0 → 2\.0\./);
    await options.locator("#update-review-ok").click();
    await options.getByText(new RegExp(`^Updated ${OTHER} to version 2\\.0`)).waitFor({ timeout: 10_000 });
    const updated = (await h.internal("scripts.list")).scripts.find((s) => s.uuid === otherUuid);
    assert.equal(updated.version, "2.0");
    // Then the helper's review, in its turn; cancelled, nothing changes.
    await options.waitForFunction((want) => document.getElementById("update-review").open
      && document.getElementById("update-review-title").textContent === want, `Update ${NAME}?`, { timeout: 10_000 });
    const before = await listed();
    await options.locator("#update-review-cancel").click();
    await options.getByText(`Not updated: ${NAME} is unchanged.`).waitFor({ timeout: 5000 });
    const now = await listed();
    assert.deepEqual([now.version, now.revision], [before.version, before.revision]);
  });

  // The store's conflict was shown in its words for agents ("read it again with get_script").
  test("a script edited while its review is open is not updated, and the user is told to check again", T, async () => {
    const before = await listed();
    srv.serve(() => [200, helper({ version: "7.0" })]);
    await checkFor();
    await options.locator("#update-review").waitFor({ state: "visible", timeout: 10_000 });
    const got = await h.internal("scripts.get", { uuid });
    const edited = got.script.source.replace(/@version \S+/, "@version 6.5");
    const saved = await h.internal("scripts.save", { uuid, revision: before.revision, source: edited });
    assert.equal(saved.ok, true, JSON.stringify(saved));
    await options.locator("#update-review-ok").click();
    await options.getByText(`Not updated: ${NAME} changed since the check (it is now at revision ${before.revision + 1}); check for the update again`, { exact: false }).waitFor({ timeout: 10_000 });
    const now = await listed();
    assert.deepEqual([now.version, now.revision], ["6.5", before.revision + 1], "the edit stands");
  });

  // Before, Check all checked one script at a time: a few dozen slow servers took minutes.
  test("Check all checks a few scripts at a time and lists each in the scripts' order", T, async () => {
    const many = Array.from({ length: 7 }, (_, i) => [
      "// ==UserScript==", `// @name Upd many ${i}`, "// @namespace lumo-e2e-upd-many", "// @version 1.0",
      "// @match https://many.invalid/*", `// @updateURL ${srv.url}/slow/${i}.user.js`, "// ==/UserScript==", `${i};`, "",
    ].join("\n"));
    const uuids = [];
    for (const source of many) {
      const saved = await h.internal("scripts.save", { source });
      assert.equal(saved.ok, true, JSON.stringify(saved));
      uuids.push(saved.result.script.uuid);
    }
    // Script 3 has a newer version, with a new library; the others are current.
    srv.serveSlow((path) => {
      const n = Number(/\/slow\/(\d+)/.exec(path)[1]);
      return [200, n === 3 ? many[n].replace("@version 1.0", `@version 1.1\n// @require ${srv.url}/lib.js`) : many[n]];
    });
    srv.serveLib(() => [200, "var MANY = 3;"]);
    const libHits = () => srv.hits.filter((u) => u.endsWith("/lib.js")).length;
    const libBefore = libHits();
    await options.reload();
    await options.locator("#check-all").click();
    await options.getByText(/^Checked \d+ script\(s\): /).waitFor({ timeout: 20_000 });
    const most = srv.slowMost();
    assert.ok(most >= 2 && most <= 4, `checks at once: ${most}`);
    const shown = await options.locator("#update-results li").evaluateAll((lis) => lis.map((li) => [li.dataset.uuid, li.hidden, li.textContent]));
    const order = (await h.internal("scripts.list")).scripts.filter((s) => typeof s.updateUrl === "string").map((s) => s.uuid);
    assert.deepEqual(shown.map(([u]) => u), order, "the scripts' order");
    for (const [u, hidden, text] of shown) {
      assert.equal(hidden, false, text);
      const i = uuids.indexOf(u);
      if (i === 3) assert.match(text, /^Upd many 3: version 1\.0 → 1\.1 is available\./, text);
      else if (i >= 0) assert.match(text, /^Upd many \d: Up to date: the server.s version is 1\.0, as installed \(1\.0\)\./, text);
    }
    // Check all fetched no library: it is fetched when the review is opened, and shown.
    assert.equal(libHits(), libBefore, "Check all fetched the update's new file");
    // Updated from the list: its row no longer offers the version now installed.
    await options.getByRole("button", { name: "Review the update of Upd many 3" }).click();
    await options.locator("#update-review").waitFor({ state: "visible" });
    assert.equal(await options.locator("#update-review-files pre").innerText(), "var MANY = 3;");
    await sleep(900);
    await options.locator("#update-review-ok").click();
    await options.getByText(/^Updated Upd many 3 to version 1\.1/).waitFor({ timeout: 10_000 });
    const row = await options.locator(`#update-results li[data-uuid="${uuids[3]}"]`).textContent();
    assert.equal(row, "Upd many 3: updated to version 1.1.");
    for (const u of uuids) await h.internal("scripts.delete", { uuid: u });
  });

  // Before, a double click checked twice and queued a second review of the same version, shown
  // again once the first was stored; its Update could only be refused.
  test("a double click on Check for update shows one review", T, async () => {
    srv.serve(() => [200, helper({ version: "8.0" })]);
    await options.reload();
    await options.getByRole("button", { name: `Check for update of ${NAME}` }).dblclick();
    await options.locator("#update-review").waitFor({ state: "visible", timeout: 10_000 });
    await options.locator("#update-review-ok").click();
    await options.getByText(/^Updated Upd helper to version 8\.0/).waitFor({ timeout: 10_000 });
    await options.waitForTimeout(1500);
    assert.equal(await options.locator("#update-review").isVisible(), false, "no second review");
    assert.equal((await listed()).version, "8.0");
  });

  // Before, Update fetched a new @require after the review, which named its host only: the
  // server could send any code then.
  test("an update's new @require is shown with its code; swapped after the check, Update stores nothing; checked again, the page runs the code shown", T, async () => {
    const v9 = helper({ version: "9.0", extra: [`@require ${srv.url}/lib.js`] }).replace('mark.dataset.v = "9.0"', 'mark.dataset.v = "9.0-" + LIB');
    srv.serve(() => [200, v9]);
    srv.serveLib(() => [200, "var LIB = 'shown';"]);
    await checkFor();
    await options.locator("#update-review").waitFor({ state: "visible", timeout: 10_000 });
    const file = options.locator("#update-review-files div.file");
    assert.equal(await file.locator("pre").innerText(), "var LIB = 'shown';");
    assert.ok((await file.innerText()).includes(`@require ${srv.url}/lib.js`), await file.innerText());
    srv.serveLib(() => [200, "var LIB = 'swapped';"]);
    await options.locator("#update-review-ok").click();
    await options.getByText(/^Not updated: the server now sends something other than the version you reviewed/).waitFor({ timeout: 10_000 });
    assert.equal((await listed()).version, "8.0");
    // Checked again, the dialog shows what the server sends now, and that is what runs.
    await checkFor();
    await options.locator("#update-review").waitFor({ state: "visible", timeout: 10_000 });
    assert.equal(await options.locator("#update-review-files pre").innerText(), "var LIB = 'swapped';");
    await options.locator("#update-review-ok").click();
    await options.getByText(/^Updated Upd helper to version 9\.0/).waitFor({ timeout: 10_000 });
    assert.deepEqual(await onPage(["upd:9.0-swapped"]), ["upd:9.0-swapped"]);
  });
});
