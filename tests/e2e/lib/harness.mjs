// E2E harness: builds the test host + broken fixture into tests/e2e/out/, launches
// headless Chromium with the provider (dist/), the host and the broken fixture loaded
// as unpacked extensions, and offers small helpers for the tests.
import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { dirname, extname, join, normalize, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { chromium } from "playwright-core";
import { providerWasmMemory } from "./wasm-memory.mjs";

const here = dirname(fileURLToPath(import.meta.url));
export const E2E_DIR = resolve(here, "..");
export const REPO_ROOT = resolve(E2E_DIR, "../..");
export const OUT_DIR = join(E2E_DIR, "out");
export const DIST_DIR = resolve(REPO_ROOT, process.env.LUMO_DIST ?? "dist");
export const PAGES_DIR = join(E2E_DIR, "fixtures/pages");
const KEYS_DIR = join(REPO_ROOT, "keys");

/** Chrome's extension id for a base64 DER public key: sha256, first 16 bytes, hex digits 0-f -> a-p. */
export function extensionIdFromKey(b64) {
  const hex = createHash("sha256").update(Buffer.from(b64.trim(), "base64")).digest("hex").slice(0, 32);
  return [...hex].map((c) => String.fromCharCode(97 + parseInt(c, 16))).join("");
}

const readKey = (name) => readFileSync(join(KEYS_DIR, `${name}.pub.b64`), "utf8").trim();
export const PROVIDER_ID = extensionIdFromKey(readKey("provider"));
export const HOST_ID = extensionIdFromKey(readKey("host"));
export const BROKEN_ID = extensionIdFromKey(readKey("broken"));
/** A well-formed id that no loaded extension has. */
export const ABSENT_ID = "a".repeat(32);

export const CHROMIUM = process.env.LUMO_CHROMIUM ?? ["/usr/lib/chromium/chromium", "/usr/bin/chromium"].find(existsSync);

// ---------------------------------------------------------------- build

/** Copies an extension (without its src/) to outDir with `key` (base64 DER) in its manifest. */
function copyWithKey(srcDir, outDir, key) {
  rmSync(outDir, { recursive: true, force: true });
  cpSync(srcDir, outDir, { recursive: true, filter: (p) => !p.startsWith(join(srcDir, "src")) });
  const manifestPath = join(outDir, "manifest.json");
  const manifest = JSON.parse(readFileSync(manifestPath, "utf8"));
  writeFileSync(manifestPath, JSON.stringify({ ...manifest, key }, null, 2));
}

/** A loadable test host in outDir: the manifest with `key`, host.html, and the bundled host.js. */
async function buildHost(outDir, key) {
  copyWithKey(join(E2E_DIR, "host"), outDir, key);
  await build({
    entryPoints: [join(E2E_DIR, "host/src/host.js")],
    outfile: join(outDir, "host.js"),
    bundle: true,
    format: "iife",
    platform: "browser",
    target: "chrome120",
    sourcemap: "inline",
    logLevel: "warning",
    absWorkingDir: REPO_ROOT,
  });
}

// Each test process builds into its own folder, so test files running at the same time (or two
// developers' runs) never delete an extension another browser is loading.
const RUN_OUT = join(OUT_DIR, `run-${process.pid}`);

let built;
/** Builds out/run-<pid>/host (esbuild bundle of host/src) and .../broken. Once per process. */
export function buildExtensions() {
  built ??= (async () => {
    cleanups.add(RUN_OUT);
    const hostOut = join(RUN_OUT, "host");
    await buildHost(hostOut, readKey("host"));
    copyWithKey(join(E2E_DIR, "fixtures/broken"), join(RUN_OUT, "broken"), readKey("broken"));
    return { host: hostOut, broken: join(RUN_OUT, "broken") };
  })();
  return built;
}

/**
 * Builds another copy of the test host (same window.lumo API, its own id) into out/<name>, with
 * `keyB64` (base64 DER public key) as its manifest key. Pass the returned dir to
 * launch({extraExtensions}). Resolves to {dir, id}.
 */
export async function buildHostVariant(name, keyB64) {
  cleanups.add(RUN_OUT);
  const dir = join(RUN_OUT, name);
  await buildHost(dir, keyB64);
  return { dir, id: extensionIdFromKey(keyB64) };
}

// ---------------------------------------------------------------- cleanup

const cleanups = new Set();
process.on("exit", () => {
  for (const dir of cleanups) rmSync(dir, { recursive: true, force: true });
});

// ---------------------------------------------------------------- launch

/**
 * Launches Chromium with a fresh profile and the provider, host and broken fixture.
 * Returns the harness object used by the tests; call close() when done.
 */
export async function launch({ dist = DIST_DIR, extraExtensions = [], userDataDir, bfcache = false } = {}) {
  if (!CHROMIUM) throw new Error("Chromium not found (set LUMO_CHROMIUM)");
  if (!existsSync(join(dist, "manifest.json"))) throw new Error(`No provider build at ${dist} (run make build, or set LUMO_DIST)`);
  const { key } = JSON.parse(readFileSync(join(dist, "manifest.json"), "utf8"));
  if (!key || extensionIdFromKey(key) !== PROVIDER_ID) throw new Error(`${dist}/manifest.json: key does not give id ${PROVIDER_ID}`);
  const { host, broken } = await buildExtensions();
  const exts = [dist, host, broken, ...extraExtensions].join(",");
  // `userDataDir` reopens a profile a harness closed with `keepProfile` (a browser restart).
  userDataDir ??= mkdtempSync(join(tmpdir(), "lumo-e2e-"));
  cleanups.add(userDataDir);
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    // Playwright turns the back/forward cache off; `bfcache` keeps it on, as in a user's browser.
    ignoreDefaultArgs: ["--disable-extensions", ...(bfcache ? ["--disable-back-forward-cache"] : [])],
    args: [
      `--disable-extensions-except=${exts}`, `--load-extension=${exts}`,
      "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
      // Every host name resolves to the local test server, so pages can live on any host.
      "--host-resolver-rules=MAP * 127.0.0.1",
    ],
  });
  const h = new Harness(context, userDataDir);
  try {
    await h.waitForWorkerStatus(PROVIDER_ID, "running", 10_000);
  } catch (e) {
    await h.close();
    throw e;
  }
  return h;
}

class Harness {
  constructor(context, userDataDir) {
    this.context = context;
    this.userDataDir = userDataDir;
    this._host = null;
    this._provider = null;
    this._sw = null;
  }

  /** Collects into `into` every panic message the provider logs from now on (a panic must never
   *  happen: the hook in src/chrome logs it before the module traps). */
  watchPanics(into) {
    this.context.on("console", (msg) => { if (/panicked/.test(msg.text())) into.push(msg.text()); });
    return into;
  }

  /** A tab on the test host's host.html with window.lumo ready. */
  async hostPage() {
    if (this._host && !this._host.isClosed()) return this._host;
    const page = await this.context.newPage();
    await page.goto(`chrome-extension://${HOST_ID}/host.html`);
    await page.waitForFunction(() => typeof window.lumo === "object");
    this._host = page;
    return page;
  }

  /** Runs window.lumo[fn](...args) in the host page. */
  async lumo(fn, ...args) {
    const page = await this.hostPage();
    return page.evaluate(([fn, args]) => window.lumo[fn](...args), [fn, args]);
  }

  /** A tab on the provider's options.html, the place from which internal ops are sent. */
  async providerPage() {
    if (this._provider && !this._provider.isClosed()) return this._provider;
    const page = await this.context.newPage();
    await page.goto(`chrome-extension://${PROVIDER_ID}/options.html`);
    this._provider = page;
    return page;
  }

  /** The provider's internal API: {channel: "lumo:internal", op, ...args}. Throws on {ok: false}. */
  async internal(op, args = {}) {
    const page = await this.providerPage();
    const res = await page.evaluate((msg) => chrome.runtime.sendMessage(msg), { channel: "lumo:internal", op, ...args });
    if (!res || res.ok !== true) throw new Error(`internal ${op} failed: ${JSON.stringify(res)}`);
    return res;
  }

  /** Turns "Allow User Scripts" on/off for an extension via chrome://extensions. */
  async setUserScriptsAccess(extensionId, value) {
    const page = await this.context.newPage();
    try {
      await page.goto("chrome://extensions/");
      return await page.evaluate(async ([extensionId, value]) => {
        await chrome.developerPrivate.updateExtensionConfiguration({ extensionId, userScriptsAccess: value });
        const info = await chrome.developerPrivate.getExtensionInfo(extensionId);
        return info.userScriptsAccess;
      }, [extensionId, value]);
    } finally {
      await page.close();
    }
  }

  /** Allows the provider in incognito windows (chrome://extensions) and waits until the
   *  worker Chrome restarts for the new setting answers; then approves the test host. */
  async allowIncognitoAndApproveHost() {
    const page = await this.context.newPage();
    try {
      await page.goto("chrome://extensions/");
      // Developer mode first: without it Chrome disables an unpacked extension it reloads.
      await page.evaluate(() => chrome.developerPrivate.updateProfileConfiguration({ inDeveloperMode: true }));
      await page.evaluate((id) => chrome.developerPrivate.updateExtensionConfiguration({ extensionId: id, incognitoAccess: true }), PROVIDER_ID);
    } finally {
      await page.close();
    }
    // Chrome reloads the extension for the new setting: ask until the new worker answers.
    for (const deadline = Date.now() + 10_000; ;) {
      try {
        await this.internal("policy.approve", { id: HOST_ID });
        return;
      } catch (e) {
        if (Date.now() > deadline) throw e;
        this._provider = null;
        await new Promise((r) => setTimeout(r, 300));
      }
    }
  }

  // Service-worker state comes from the CDP ServiceWorker domain: Playwright's
  // context.serviceWorkers() keeps listing a worker for a while after it stopped.
  async _swDomain() {
    if (this._sw) return this._sw;
    const page = this.context.pages()[0] ?? (await this.context.newPage());
    const cdp = await this.context.newCDPSession(page);
    const versions = new Map(); // versionId -> {scriptURL, runningStatus, status}
    const waiters = new Set();
    cdp.on("ServiceWorker.workerVersionUpdated", ({ versions: list }) => {
      for (const v of list) versions.set(v.versionId, v);
      for (const w of waiters) w();
    });
    await cdp.send("ServiceWorker.enable");
    this._sw = { cdp, versions, waiters };
    return this._sw;
  }

  /** Versions of an extension's worker, newest first. */
  _versionsOf(extensionId) {
    const prefix = `chrome-extension://${extensionId}/`;
    return [...this._sw.versions.values()]
      .filter((v) => v.scriptURL.startsWith(prefix) && v.status !== "redundant")
      .sort((a, b) => Number(b.versionId) - Number(a.versionId));
  }

  /** "running" | "starting" | "stopping" | "stopped" for the extension's worker. */
  async workerStatus(extensionId = PROVIDER_ID) {
    await this._swDomain();
    return this._versionsOf(extensionId)[0]?.runningStatus ?? "stopped";
  }

  /** The id of the extension's newest worker version (changes when the extension reloads), or null. */
  async workerVersionId(extensionId = PROVIDER_ID) {
    await this._swDomain();
    return this._versionsOf(extensionId)[0]?.versionId ?? null;
  }

  /**
   * Waits until the extension's worker has runningStatus `wanted`; "running" also
   * requires the version to be activated (stopping a worker that is still installing
   * leaves Chrome unable to restart it, which would look like a provider bug).
   */
  async waitForWorkerStatus(extensionId, wanted, timeout = 5000) {
    const sw = await this._swDomain();
    const current = () => this._versionsOf(extensionId)[0];
    const ok = () => {
      const v = current();
      if (wanted === "stopped") return !v || v.runningStatus === "stopped";
      return v?.runningStatus === wanted && (wanted !== "running" || v.status === "activated");
    };
    if (ok()) return;
    await new Promise((resolve, reject) => {
      const done = () => { if (ok()) { clearTimeout(timer); sw.waiters.delete(done); resolve(); } };
      const timer = setTimeout(() => {
        sw.waiters.delete(done);
        const v = current();
        reject(new Error(`worker of ${extensionId} not ${wanted} within ${timeout} ms (is ${v ? `${v.runningStatus}/${v.status}` : "absent"})`));
      }, timeout);
      sw.waiters.add(done);
    });
  }

  /** Stops the extension's service worker via CDP ServiceWorker.stopWorker and waits until it is stopped. */
  async stopProviderWorker(extensionId = PROVIDER_ID, timeout = 5000) {
    const sw = await this._swDomain();
    for (const v of this._versionsOf(extensionId)) {
      if (v.runningStatus !== "stopped") await sw.cdp.send("ServiceWorker.stopWorker", { versionId: v.versionId });
    }
    await this.waitForWorkerStatus(extensionId, "stopped", timeout);
  }

  /**
   * The byte length of the provider's wasm memory (`providerWasmMemory`), read over CDP: the
   * worker's target, attached through a page's session (Playwright gives none for a service
   * worker). The session is a page's of its own, closed after (through a test's own tab the
   * worker's answer once seemed lost; that was while this used Runtime.queryObjects, whose
   * hang `wasm-memory.mjs` describes). A call that does not answer within 15 s fails saying
   * which.
   */
  async workerWasmMemory() {
    const extensionId = PROVIDER_ID;
    const page = await this.context.newPage();
    const cdp = await this.context.newCDPSession(page);
    try {
      const { targetInfos } = await cdp.send("Target.getTargets");
      const target = targetInfos.find((t) => t.type === "service_worker" && t.url.startsWith(`chrome-extension://${extensionId}/`));
      if (!target) throw new Error(`no running worker of ${extensionId}`);
      const { sessionId } = await cdp.send("Target.attachToTarget", { targetId: target.targetId, flatten: false });
      const waiting = new Map();
      cdp.on("Target.receivedMessageFromTarget", (e) => {
        if (e.sessionId !== sessionId) return;
        const m = JSON.parse(e.message);
        waiting.get(m.id)?.(m);
      });
      let next = 0;
      const send = (method, params = {}) => new Promise((resolve, reject) => {
        const id = ++next;
        const timer = setTimeout(() => reject(new Error(`workerWasmMemory: the worker did not answer ${method} within 15 s`)), 15_000);
        waiting.set(id, (m) => { clearTimeout(timer); m.error ? reject(new Error(`${method}: ${m.error.message}`)) : resolve(m.result); });
        cdp.send("Target.sendMessageToTarget", { sessionId, message: JSON.stringify({ id, method, params }) }).catch(reject);
      });
      try {
        return await providerWasmMemory(send);
      } finally {
        await cdp.send("Target.detachFromTarget", { sessionId }).catch(() => {});
      }
    } finally {
      await cdp.detach().catch(() => {});
      await page.close().catch(() => {});
    }
  }

  /** Quits the browser. `keepProfile`: the profile stays for `launch({ userDataDir })`. */
  async close({ keepProfile = false } = {}) {
    await this.context.close().catch(() => {});
    if (keepProfile) return;
    rmSync(this.userDataDir, { recursive: true, force: true });
    cleanups.delete(this.userDataDir);
  }
}

// ---------------------------------------------------------------- static server

const MIME = { ".html": "text/html; charset=utf-8", ".js": "text/javascript", ".json": "application/json", ".css": "text/css" };

/** Serves `root` on http://127.0.0.1:<random port>. Resolves to {url, close()}. */
export async function startStaticServer(root = PAGES_DIR) {
  const server = createServer((req, res) => {
    const path = normalize(join(root, decodeURIComponent(new URL(req.url, "http://x").pathname)));
    if (!path.startsWith(root + sep) || !existsSync(path)) {
      res.writeHead(404).end("not found");
      return;
    }
    res.writeHead(200, { "content-type": MIME[extname(path)] ?? "application/octet-stream" });
    res.end(readFileSync(path));
  });
  await new Promise((res) => server.listen(0, "127.0.0.1", res));
  const { port } = server.address();
  const close = () => new Promise((res) => {
    server.close(res);
    server.closeAllConnections(); // the browser keeps keep-alive sockets open
  });
  return { url: `http://127.0.0.1:${port}`, close };
}

