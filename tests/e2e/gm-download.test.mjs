// GM_download / GM.download in real Chromium: the script's file is fetched through the worker
// (GM_xmlhttpRequest's own request, under the script's @connect rules) and saved by the page, so
// what is checked is the file Chrome wrote into its downloads folder — its name and bytes — and
// what the test server was asked. Chrome is told to save downloads without asking into a
// folder of the test's own (CDP `Browser.setDownloadBehavior`, from each tab's own session, which
// is then told of the downloads that tab begins), two levels below a temporary directory, so a
// name that tried to climb out would show above it.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, beforeEach, describe, test } from "node:test";
import { setUp } from "./lib/agent.mjs";
import { show, sleep, until } from "./lib/util.mjs";

const T = { timeout: 120_000 };

/** 300,000 bytes of every value (not UTF-8), the same on every run. */
const FILE = Buffer.alloc(300_000);
for (let i = 0, x = 7; i < FILE.length; i++) { x = (x * 1103515245 + 12345) >>> 0; FILE[i] = x >>> 24; }

/** 2.1 MB: twenty of them at once are more than the 10 MiB a script's answers may hold at once. */
const BIG = Buffer.concat(Array.from({ length: 7 }, () => FILE));

function userscript(lines, body) {
  return ["// ==UserScript==", ...lines.map((l) => `// ${l}`), "// ==/UserScript==", body, ""].join("\n");
}

/** The files server: every request is recorded as `host path` (its port left out). */
async function filesServer() {
  const hits = [];
  const server = createServer((req, res) => {
    const host = String(req.headers.host).split(":")[0];
    hits.push(`${host} ${req.url}`);
    const path = new URL(req.url, "http://x").pathname;
    if (path === "/file.bin") {
      res.writeHead(200, { "content-type": "application/octet-stream", "content-length": String(FILE.length) });
      res.end(FILE);
    } else if (path === "/big.bin") {
      res.writeHead(200, { "content-type": "application/octet-stream", "content-length": String(BIG.length) });
      res.end(BIG);
    } else if (path === "/files/data%20set.csv") {
      res.writeHead(200, { "content-type": "text/csv" });
      res.end("a,b\n1,2\n");
    } else if (path === "/missing") {
      res.writeHead(404, { "content-type": "text/html" });
      res.end("<!doctype html><h1>Not found</h1>");
    } else if (path === "/redirect") {
      res.writeHead(302, { location: new URL(req.url, "http://x").searchParams.get("to") });
      res.end();
    } else if (path === "/secret") {
      res.writeHead(200, { "content-type": "text/plain" });
      res.end("secret");
    } else if (path === "/svg") {
      res.writeHead(200, { "content-type": "image/svg+xml" });
      res.end('<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>');
    } else if (path.startsWith("/csp/")) {
      // The page's own policy: `sandbox` (without allow-downloads, Chrome blocks a page's
      // downloads) or a strict one.
      const csp = { sandbox: "sandbox allow-scripts", "sandbox-dl": "sandbox allow-scripts allow-downloads", strict: "default-src 'none'" }[path.slice(5)];
      res.writeHead(200, { "content-type": "text/html; charset=utf-8", "content-security-policy": csp });
      res.end("<!doctype html><title>page</title><p>page</p>");
    } else {
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
      res.end("<!doctype html><title>page</title><p>page</p>");
    }
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const close = () => new Promise((r) => { server.close(r); server.closeAllConnections(); });
  return { port: server.address().port, hits, close };
}

describe("gm: GM_download saves a file the script's @connect hosts serve, and nothing else", () => {
  let env, h, server, ok, root, downloads, began = [];
  const url = (host, path = "/") => `http://${host}:${server.port}${path}`;

  /** Loads `u` in a new tab and returns what the script reported (`data-dl` on <html>); the
   *  downloads Chrome begins from that tab go to `began` (told to the tab's own CDP session).
   *  `begin`: how many downloads the tab must have begun before it is closed (the script's
   *  onload comes when the click is made, and a tab closed before Chrome began the download
   *  takes it with it: the first download of a run, under load, was lost so). */
  const run = async (u, { begin = 0, timeout = 8000 } = {}) => {
    const before = began.length;
    const tab = await h.context.newPage();
    const cdp = await h.context.newCDPSession(tab);
    cdp.on("Browser.downloadWillBegin", (e) => began.push(e));
    await cdp.send("Browser.setDownloadBehavior", { behavior: "allow", downloadPath: downloads, eventsEnabled: true });
    try {
      await tab.goto(u, { waitUntil: "load" });
      const got = await until(() => tab.evaluate(() => document.documentElement.getAttribute("data-dl")), (v) => v, timeout);
      assert.ok(got, `the script reported nothing on ${u}`);
      if (begin) await until(() => began.length - before, (n) => n >= begin, timeout);
      return JSON.parse(got);
    } finally {
      await tab.close();
    }
  };
  /** The finished files in the downloads folder (Chrome writes `*.crdownload` first). */
  const saved = () => readdirSync(downloads).filter((f) => !f.endsWith(".crdownload"));
  /** Waits until `name` is whole in the folder; its bytes. */
  const file = async (name, size) => {
    const p = join(downloads, name);
    await until(() => saved().includes(name) && statSync(p).size === size, (v) => v, 8000);
    assert.ok(saved().includes(name), `${name} not saved; the folder holds ${show(readdirSync(downloads))}`);
    return readFileSync(p);
  };

  before(async () => {
    // The shared set-up (lib/agent.mjs): the test host approved, "Allow User Scripts" on, the
    // provider seen ready, an MCP session; this file's own file server.
    env = await setUp({ server: filesServer });
    ({ h, server } = env);
    ({ ok } = env.tools);
    root = mkdtempSync(join(tmpdir(), "lumo-dl-"));
    downloads = join(root, "a", "downloads");
    mkdirSync(downloads, { recursive: true });
    await ok("write_script", { source: CASES });
  });
  beforeEach(() => {
    for (const f of readdirSync(downloads)) rmSync(join(downloads, f), { force: true });
    began = [];
    if (server) server.hits.length = 0;
  });
  after(async () => {
    await env?.close();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  // The one script of most tests: which call it makes comes from its page's query (the test
  // chooses it; a page's own JavaScript cannot reach the script's world).
  const CASES = userscript([
    "@name Download cases", "@namespace lumo-e2e-dl", "@match http://dlpage.test/*",
    "@grant GM_download", "@connect files.test",
  ], [
    "const q = new URLSearchParams(location.search), report = (v) => document.documentElement.setAttribute('data-dl', JSON.stringify(v));",
    "const at = (p) => p.startsWith('http') ? p : `http://files.test:${location.port}${p}`;",
    "const events = [];",
    "const details = { url: at(q.get('u')), onload: (r) => report({ events, load: r }),",
    "  onerror: (e) => report({ events, error: e }), onprogress: () => { if (!events.includes('progress')) events.push('progress'); } };",
    "if (q.has('name')) details.name = q.get('name');",
    "if (q.get('form') === 'two') GM_download(details.url, details.name);",
    "else if (q.get('form') === 'promise') GM.download(details.url).then((r) => report({ promise: r }), (e) => report({ rejected: e }));",
    // A `headers` getter that throws (a script's own options class, a Proxy): the documented
    // `{error, details}`, never the raw exception.
    "else if (q.get('form') === 'badheaders') {",
    "  Object.defineProperty(details, 'headers', { enumerable: true, get() { throw new TypeError('headers getter threw'); } });",
    "  const out = { events };",
    "  try { details.onerror = (e) => { out.error = e; }; GM_download(details); } catch (e) { out.threw = String(e); }",
    "  GM.download(details).then((r) => { out.promise = r; report(out); }, (e) => { out.rejected = e instanceof Error ? 'raw ' + e : e; report(out); });",
    "}",
    // A gallery: 20 files of 2.1 MB at once, past the 16 requests in flight and the 10 MiB of
    // answers arriving at once.
    "else if (q.get('form') === 'batch') {",
    "  const out = [];",
    "  for (let i = 0; i < 20; i++) GM_download({ url: details.url, name: `batch-${i}.bin`,",
    "    onload: () => { out.push('load'); if (out.length === 20) report({ batch: out }); },",
    "    onerror: (e) => { out.push(e.details || e.error); if (out.length === 20) report({ batch: out }); } });",
    "}",
    "else GM_download(details);",
    "if (q.get('form') === 'two') setTimeout(() => report({ two: true }), 1500);",
  ].join("\n"));

  const page = (query) => url("dlpage.test", `/?${new URLSearchParams(query)}`);

  test("validate_script no longer warns that GM_download is not provided; GM_cookie still is", T, async () => {
    const v = await ok("validate_script", {
      source: userscript(["@name V", "@match https://v.test/*", "@grant GM_download", "@grant GM.download", "@grant GM_cookie", "@connect v.test"], ""),
    });
    const warned = v.diagnostics.map((d) => `${d.line} ${d.message}`);
    assert.ok(!warned.some((w) => w.includes("GM_download") || w.includes("GM.download")), show(warned));
    assert.ok(warned.some((w) => /^6 @grant GM_cookie is not implemented/.test(w)), show(warned));
  });

  test("GM_download saves the server's bytes under the name given, and onload says so", T, async () => {
    const got = await run(page({ u: "/file.bin", name: "report.bin" }), { begin: 1 });
    assert.deepEqual(got.error, undefined, show(got));
    assert.equal(got.load.name, "report.bin", show(got));
    assert.equal(got.load.status, 200);
    assert.equal(got.load.finalUrl, url("files.test", "/file.bin"));
    const bytes = await file("report.bin", FILE.length);
    assert.ok(bytes.equals(FILE), "the saved file is the server's, byte for byte");
    assert.deepEqual(saved(), ["report.bin"]);
    assert.deepEqual(began.map((b) => b.suggestedFilename), ["report.bin"]);
    // Fetched once, by the worker, from the declared host.
    assert.deepEqual(server.hits.filter((x) => x.startsWith("files.test")), ["files.test /file.bin"]);
  });

  test("GM_download(url, name), and GM.download(url) named after the URL's last segment, resolving", T, async () => {
    let got = await run(page({ u: "/file.bin", name: "two.bin", form: "two" }), { begin: 1 });
    assert.equal(got.two, true, show(got));
    assert.ok((await file("two.bin", FILE.length)).equals(FILE));
    got = await run(page({ u: "/files/data%20set.csv", form: "promise" }), { begin: 1 });
    assert.equal(got.promise?.name, "data set.csv", show(got));
    assert.equal((await file("data set.csv", 8)).toString(), "a,b\n1,2\n");
  });

  test("a host not in @connect: onerror not_whitelisted, nothing asked of it, nothing saved", T, async () => {
    const got = await run(page({ u: url("evil.test", "/secret"), name: "stolen.txt" }));
    assert.equal(got.error?.error, "not_whitelisted", show(got));
    assert.match(got.error.details, /^GM_download refused: evil\.test is not in this script's @connect list.*not sent/);
    // A redirect from a declared host to one off the list: refused before it is followed.
    const via = await run(page({ u: `/redirect?to=${encodeURIComponent(url("evil.test", "/secret"))}`, name: "stolen.txt" }));
    assert.equal(via.error?.error, "not_whitelisted", show(via));
    assert.match(via.error.details, /^GM_download: the server redirected the request to http:\/\/evil\.test.*@connect list.*not followed/);
    // The promise form rejects with the same object.
    const p = await run(page({ u: url("evil.test", "/secret"), form: "promise" }));
    assert.equal(p.rejected?.error, "not_whitelisted", show(p));
    await sleep(1000);
    assert.ok(!server.hits.some((x) => x.startsWith("evil.test")), show(server.hits));
    assert.deepEqual(readdirSync(downloads), []);
    assert.deepEqual(began, []);
  });

  // Fails if a `headers` getter's exception escapes GM_download (thrown at the script) or makes
  // GM.download reject with the raw exception instead of Tampermonkey's `{error, details}`.
  test("a headers getter that throws: onerror and the rejection get {error, details}, nothing is asked", T, async () => {
    const got = await run(page({ u: "/file.bin", name: "h.bin", form: "badheaders" }));
    assert.equal(got.threw, undefined, show(got));
    assert.equal(got.error?.error, "not_succeeded", show(got));
    assert.match(got.error.details, /^GM_download: the request could not be made: TypeError: headers getter threw$/, show(got));
    assert.deepEqual(got.rejected, got.error, show(got));
    await sleep(500);
    assert.ok(!server.hits.some((x) => x.startsWith("files.test")), show(server.hits));
    assert.deepEqual(readdirSync(downloads), []);
  });

  test("a 404 is an error, not a saved error page", T, async () => {
    const got = await run(page({ u: "/missing", name: "missing.html" }));
    assert.equal(got.error?.error, "not_succeeded", show(got));
    assert.match(got.error.details, /^GM_download: http:\/\/files\.test:\d+\/missing answered 404 Not Found; nothing was saved$/);
    assert.ok(server.hits.includes("files.test /missing"), show(server.hits));
    await sleep(1000);
    assert.deepEqual(readdirSync(downloads), []);
    assert.deepEqual(began, []);
  });

  test("a name that climbs (../../evil.sh) is saved inside the downloads folder, as Chrome names it", T, async () => {
    const got = await run(page({ u: "/file.bin", name: "../../evil.sh" }), { begin: 1 });
    assert.equal(got.load?.name, "../../evil.sh", show(got));
    await until(() => saved().length, (n) => n === 1, 8000);
    const [name] = saved();
    assert.ok(name && !name.includes("/") && name.endsWith("evil.sh"), show(readdirSync(downloads)));
    assert.ok((await file(name, FILE.length)).equals(FILE));
    // Nothing landed above the folder (it is root/a/downloads).
    assert.deepEqual(readdirSync(join(downloads, "..")), ["downloads"]);
    assert.deepEqual(readdirSync(root), ["a"]);
  });

  // Chrome's download rules are the page's: a strict policy does not govern a download, a
  // `sandbox` without allow-downloads blocks it, and the page cannot see that it did (no event,
  // only a console line in the page), so onload still comes: a limit the README states.
  test("a page's policy: a strict one saves; a sandbox without allow-downloads saves nothing, and onload still comes", T, async () => {
    for (const [kind, kept] of [["strict", true], ["sandbox-dl", true], ["sandbox", false]]) {
      for (const f of readdirSync(downloads)) rmSync(join(downloads, f), { force: true });
      began = [];
      const got = await run(url("dlpage.test", `/csp/${kind}?${new URLSearchParams({ u: "/file.bin", name: `${kind}.bin` })}`), { begin: kept ? 1 : 0 });
      assert.equal(got.load?.name, `${kind}.bin`, `${kind}: ${show(got)}`);
      if (kept) assert.ok((await file(`${kind}.bin`, FILE.length)).equals(FILE), kind);
      else {
        await sleep(1500);
        assert.deepEqual([readdirSync(downloads), began], [[], []], kind);
      }
    }
  });

  // In an SVG (or XML) document `createElement('a')` makes an element of no namespace, which
  // has no click: the save failed there ("Illegal invocation"). The anchor is HTML's in any
  // document.
  test("an SVG document: the file is saved as in an HTML page", T, async () => {
    const got = await run(url("dlpage.test", `/svg?${new URLSearchParams({ u: "/file.bin", name: "svg.bin" })}`), { begin: 1 });
    assert.equal(got.load?.name, "svg.bin", show(got));
    assert.ok((await file("svg.bin", FILE.length)).equals(FILE));
  });

  // On the build before requests waited their turn, 4 of these were refused (16 in flight);
  // with them queued but the clicks not spaced, all 20 onloads came while Chrome dropped the
  // clicks past 10 in a second (6 files never saved). Now all 20 are saved, byte for byte.
  test("a gallery: 20 downloads of 2.1 MB at once are all saved, byte for byte", T, async () => {
    const got = await run(page({ u: "/big.bin", form: "batch" }), { begin: 20, timeout: 60_000 });
    assert.deepEqual(got.batch, Array.from({ length: 20 }, () => "load"), show(got));
    for (let i = 0; i < 20; i++) assert.ok((await file(`batch-${i}.bin`, BIG.length)).equals(BIG), `batch-${i}.bin`);
    assert.equal(server.hits.filter((x) => x === "files.test /big.bin").length, 20, show(server.hits));
  });

  test("GM_download alone gives no GM_xmlhttpRequest; in try_script it says it is not available", T, async () => {
    const only = await ok("write_script", {
      source: userscript(["@name Only download", "@namespace lumo-e2e-dl", "@match http://only.test/*", "@grant GM.download", "@connect files.test"],
        "document.documentElement.setAttribute('data-dl', JSON.stringify({ x: typeof GM_xmlhttpRequest, X: typeof GM.xmlHttpRequest, d: typeof GM_download, D: typeof GM.download }));"),
    });
    assert.deepEqual(await run(url("only.test")), { x: "undefined", X: "undefined", d: "function", D: "function" });
    const tab = await h.context.newPage();
    try {
      await tab.goto(url("trypage.test"), { waitUntil: "load" });
      const t = await ok("try_script", {
        source: userscript(["@name Tried", "@match http://trypage.test/*", "@grant GM_download"],
          "return await new Promise((done) => GM_download({ url: '/file.bin', name: 'tried.bin', onload: () => done('saved'), onerror: (e) => done(JSON.stringify(e)) }));"),
        url: url("trypage.test"),
      });
      const e = JSON.parse(t.frames[0].value);
      assert.equal(e.error, "not_succeeded", show(t.frames[0]));
      assert.match(e.details, /^GM_download: not available when a script is tried with try_script/);
    } finally {
      await tab.close();
    }
    await sleep(500);
    assert.deepEqual(readdirSync(downloads), []);
    assert.ok(!server.hits.some((x) => x.includes("/file.bin")), show(server.hits));
    await h.internal("scripts.delete", { uuid: only.script.uuid });
  });
});
