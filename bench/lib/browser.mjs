// Headless Chromium for the bench, driven over a raw CDP pipe (no Playwright): Playwright
// auto-attaches to every service worker and holds it at start until Node answers, which would
// add a Node round trip to every cold start we time. Same Chromium flags as the e2e harness
// (tests/e2e/lib/harness.mjs) plus the defaults Playwright passes.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CHROMIUM } from "../../tests/e2e/lib/harness.mjs";

const FLAGS = [
  // tests/e2e/lib/harness.mjs
  "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
  // Playwright's defaults that matter for timing
  "--headless", "--disable-field-trial-config", "--disable-background-timer-throttling",
  "--disable-backgrounding-occluded-windows", "--disable-renderer-backgrounding",
  "--disable-ipc-flooding-protection", "--disable-hang-monitor", "--disable-breakpad",
  "--disable-default-apps", "--disable-dev-shm-usage", "--no-default-browser-check",
  "--password-store=basic", "--use-mock-keychain", "--mute-audio",
];

/** One CDP connection over --remote-debugging-pipe (fd 3 in, fd 4 out, NUL-separated JSON). */
class Cdp {
  constructor(input, output) {
    this.input = input;
    this.seq = 0;
    this.pending = new Map();
    this.listeners = new Set();
    let buf = "";
    output.setEncoding("utf8");
    output.on("data", (chunk) => {
      buf += chunk;
      for (let i; (i = buf.indexOf("\0")) >= 0; buf = buf.slice(i + 1)) this.dispatch(JSON.parse(buf.slice(0, i)));
    });
  }

  send(method, params = {}, sessionId) {
    const id = ++this.seq;
    this.input.write(JSON.stringify({ id, method, params, sessionId }) + "\0");
    return new Promise((resolve, reject) => this.pending.set(id, { resolve, reject, method }));
  }

  dispatch(m) {
    const p = m.id !== undefined && this.pending.get(m.id);
    if (!p) return this.listeners.forEach((f) => f(m));
    this.pending.delete(m.id);
    if (m.error) p.reject(new Error(`${p.method}: ${m.error.message}`));
    else p.resolve(m.result);
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Launches Chromium with the given unpacked extensions and a fresh profile. */
export async function launch(extensions) {
  if (!CHROMIUM) throw new Error("Chromium not found (set LUMO_CHROMIUM)");
  const userDataDir = mkdtempSync(join(tmpdir(), "lumo-bench-"));
  const exts = extensions.join(",");
  const proc = spawn(CHROMIUM, [
    ...FLAGS, `--disable-extensions-except=${exts}`, `--load-extension=${exts}`,
    `--user-data-dir=${userDataDir}`, "--remote-debugging-pipe", "about:blank",
  ], { stdio: ["ignore", "ignore", process.env.BENCH_DEBUG ? "inherit" : "ignore", "pipe", "pipe"] });
  const b = new Browser(new Cdp(proc.stdio[3], proc.stdio[4]), proc, userDataDir);
  await b.cdp.send("Target.setDiscoverTargets", { discover: true });
  return b;
}

export class Browser {
  constructor(cdp, proc, userDataDir) {
    this.cdp = cdp;
    this.proc = proc;
    this.userDataDir = userDataDir;
    this.targets = new Map(); // targetId -> targetInfo
    this.versions = new Map(); // service worker versionId -> {scriptURL, runningStatus, status}
    this.changed = new Set(); // wake-ups for waiters
    cdp.listeners.add(({ method, params }) => {
      if (method === "Target.targetCreated" || method === "Target.targetInfoChanged") this.targets.set(params.targetInfo.targetId, params.targetInfo);
      else if (method === "Target.targetDestroyed") this.targets.delete(params.targetId);
      else if (method === "ServiceWorker.workerVersionUpdated") for (const v of params.versions) this.versions.set(v.versionId, v);
      else return;
      this.changed.forEach((f) => f());
    });
  }

  /** Resolves when pred() holds (checked on every CDP target/worker event and every 50 ms). */
  async until(pred, timeout, what) {
    const end = Date.now() + timeout;
    while (!(await pred())) {
      if (Date.now() > end) throw new Error(`timed out after ${timeout} ms waiting for ${what}`);
      await new Promise((r) => {
        const done = () => { this.changed.delete(done); clearTimeout(t); r(); };
        const t = setTimeout(done, 50);
        this.changed.add(done);
      });
    }
  }

  /** Opens a tab on `url`, waits for its load and returns {sessionId, eval(fn, ...args), close()}. */
  async page(url) {
    const { targetId } = await this.cdp.send("Target.createTarget", { url });
    const { sessionId } = await this.cdp.send("Target.attachToTarget", { targetId, flatten: true });
    const page = {
      sessionId,
      eval: (fn, ...args) => this.evaluate(sessionId, fn, args),
      close: () => this.cdp.send("Target.closeTarget", { targetId }),
    };
    // By path: a page may rewrite its query once read (the connect page takes its token off).
    // (Node's URL has no origin for chrome-extension:, so the query is cut off by hand.)
    const path = url.split(/[?#]/)[0];
    await this.until(() => page.eval((want) => location.href.split(/[?#]/)[0] === want && document.readyState === "complete", path).catch(() => false), 10_000, `load of ${url}`);
    return page;
  }

  /** Runs fn(...args) (a function or its source) in a session and returns its awaited value. */
  async evaluate(sessionId, fn, args = []) {
    const expression = `(${fn})(...${JSON.stringify(args)})`;
    const r = await this.cdp.send("Runtime.evaluate", { expression, awaitPromise: true, returnByValue: true }, sessionId);
    if (r.exceptionDetails) throw new Error(r.exceptionDetails.exception?.description ?? r.exceptionDetails.text);
    return r.result.value;
  }

  /** Worker state comes from the ServiceWorker domain of a page session (as in the e2e harness). */
  async watchWorkers(sessionId) {
    await this.cdp.send("ServiceWorker.enable", {}, sessionId);
    this.swSession = sessionId;
  }

  version(extensionId) {
    const prefix = `chrome-extension://${extensionId}/`;
    return [...this.versions.values()]
      .filter((v) => v.scriptURL.startsWith(prefix) && v.status !== "redundant")
      .sort((a, b) => Number(b.versionId) - Number(a.versionId))[0];
  }

  /** Waits until the worker runs and is activated (stopping an installing worker breaks it). */
  waitRunning(extensionId, timeout = 10_000) {
    return this.until(() => {
      const v = this.version(extensionId);
      return v?.runningStatus === "running" && v.status === "activated";
    }, timeout, `worker of ${extensionId} running`);
  }

  /** Stops the extension's service worker (CDP ServiceWorker.stopWorker) and waits until it is. */
  async stopWorker(extensionId, timeout = 15_000) { // a loaded machine has taken more than 5 s
    const v = this.version(extensionId);
    if (v && v.runningStatus !== "stopped") await this.cdp.send("ServiceWorker.stopWorker", { versionId: v.versionId }, this.swSession);
    // An event that was on its way when the worker stopped (once: the set-up's closed tab, when
    // the provider listened to tabs.onRemoved from its start) starts it again at once; stop that
    // one too.
    await this.until(() => {
      const w = this.version(extensionId);
      if (w?.runningStatus === "running") this.cdp.send("ServiceWorker.stopWorker", { versionId: w.versionId }, this.swSession).catch(() => {});
      return (w?.runningStatus ?? "stopped") === "stopped";
    }, timeout, `worker of ${extensionId} stopped`);
    // The worker's target goes away a moment after the stop is reported.
    await this.until(() => !this.workerTarget(extensionId), timeout, `worker target of ${extensionId} gone`);
  }

  workerTarget(extensionId) {
    return [...this.targets.values()].find((t) => t.type === "service_worker" && t.url.startsWith(`chrome-extension://${extensionId}/`));
  }

  /**
   * Runs fn(cdpSend) against the extension's running service worker through a CDP session on its
   * target, attached only for the call (not during timed samples).
   */
  async withWorker(extensionId, fn) {
    await this.until(() => this.workerTarget(extensionId), 5000, `worker target of ${extensionId}`);
    const { targetId } = this.workerTarget(extensionId);
    const { sessionId } = await this.cdp.send("Target.attachToTarget", { targetId, flatten: true });
    try {
      return await fn((method, params) => this.cdp.send(method, params, sessionId), (f, ...a) => this.evaluate(sessionId, f, a));
    } finally {
      await this.cdp.send("Target.detachFromTarget", { sessionId }).catch(() => {});
    }
  }

  async close() {
    await this.cdp.send("Browser.close").catch(() => {});
    await Promise.race([new Promise((r) => this.proc.once("exit", r)), sleep(5000)]);
    if (this.proc.exitCode === null) this.proc.kill("SIGKILL");
    rmSync(this.userDataDir, { recursive: true, force: true });
  }
}
