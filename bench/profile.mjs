#!/usr/bin/env node
// Where the worker's CPU goes per call (`make profile`; not a test). The bench's timed copies say
// how long a call takes and which browser calls it waits for; this says what the worker thread
// does meanwhile. A copy of dist/ whose .wasm keeps its function names (the same `wasm-opt -Oz`
// code, plus `-g`) is sampled by V8's profiler over CDP, attached only around the measured calls,
// for each scenario: the probe and MCP `ping` (each beside the baseline provider's, which does no
// work of its own), `tools/call status`, and `write_script`, all with 10 scripts stored
// (PROFILE_STORED=<n>: with n, the copies seeded as `make bench` seeds them); on request, `try`
// (try_script of a small script on a local page) and `first` (the first list_scripts after the
// worker restarts, which reads every record).
//
// Per call it prints the worker's busy time (all but idle), then that time split by what ran
// (self time): our wasm by module, and everything JS or native under a wasm-bindgen import named
// by that import (`getScripts`, `set`, `parse` = JSON.parse of a reply with its text decoding…),
// then the heaviest of our functions with what they call. Read the split, not the totals:
// while V8 profiles, every call into Chrome's native code goes through a slower, recording path
// (a `TextDecoder.decode` of 15 KB takes ~2 µs unprofiled and shows as tens), so native shares
// are inflated and wasm shares are the ones to compare. Times to quote come from `make bench`
// and `make bench-ab`.
//   node bench/profile.mjs [probe|ping|status|list|write|try|first ...]   PROFILE_N=<calls> PROFILE_US=<interval> PROFILE_STORED=<n>
//   PROFILE_ROWS=<n> (longer tables) PROFILE_SELF=1 (also the wasm functions by self time)
import { cpSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import { DIST_DIR, HOST_ID, PROVIDER_ID as P } from "../tests/e2e/lib/harness.mjs";
import { launch } from "./lib/browser.mjs";
import { BASELINE_ID as B, OUT_DIR, prepareExtensions } from "./lib/extensions.mjs";
import { approveHostAndAllowScripts, providerPage, storeScripts } from "./lib/provider.mjs";
import { table } from "./lib/stats.mjs";
import { userscript } from "./lib/userscript.mjs";
import { namedWasm, partOf } from "./lib/wasm.mjs";

const SCENARIOS = process.argv.slice(2).length ? process.argv.slice(2) : ["probe", "ping", "status", "write"];
const N = Number(process.env.PROFILE_N ?? 2000); // calls per scenario (writes: N / 20)
const INTERVAL_US = Number(process.env.PROFILE_US ?? 25);
const STORED = Math.max(10, Number(process.env.PROFILE_STORED ?? 10)); // scripts stored
const INPAGE = readFileSync(new URL("./lib/inpage.js", import.meta.url), "utf8");
const log = (...a) => console.error("profile:", ...a);

/** dist/ with a .wasm that keeps its names: what `scripts/build.sh` ships, optimised the same way plus `-g`. */
function namedDist() {
  const out = join(OUT_DIR, "ext", "provider-named");
  rmSync(out, { recursive: true, force: true });
  cpSync(DIST_DIR, out, { recursive: true });
  namedWasm(join(out, "wasm/lumo_userscripts_bg.wasm"));
  return out;
}

/** A Rust symbol without its hashes; an async fn's body (its closure) reads "… (async)". */
const rustPath = (name) => name.replace(/::h[0-9a-f]{16}\b.*$/, "").replace(/\[[0-9a-f]{16}\]/g, "").replace(/::\{\{closure\}\}/g, " (async)");
/**
 * What a sampled frame is, for the split: [category, label]. Chrome's native code often has no
 * frame of its own (its time is the calling JS function's self time), so everything JS or native
 * under a wasm-bindgen import is named by that import: what Chrome and the glue spent on that
 * call, argument conversion included (`parse` is `JSON.parse` of a reply with its text decoding,
 * `call` a JS function the core calls, such as a probe's `sendResponse`).
 */
function kind(frame, under) {
  const { functionName: f, url } = frame;
  if (f === "(idle)") return ["idle", "idle"];
  if (f === "(program)") return ["v8", "(program): V8 outside any frame"];
  if (f === "(garbage collector)") return ["v8", "garbage collector"];
  if (/^(js-to-wasm|wasm-to-js)/.test(f)) return ["v8", "V8's JS <-> wasm wrappers"];
  if (url.endsWith(".wasm")) return ["wasm", `wasm: ${partOf(f).replace(/^lumo: /, "")}`]; // as make bench's size split
  if (under) return ["chrome", `JS/Chrome under import \`${under}\``];
  if (url.endsWith("/sw.js") || url.endsWith("/compile.js")) return ["js", "JS: the loader (sw.js)"];
  if (!url) return ["chrome", "native, outside any import"];
  return ["js", "JS: wasm-bindgen glue (entering wasm)"];
}

/** Aggregates a CPU profile over `n` calls. */
function summarise(profile, n) {
  const byId = new Map(profile.nodes.map((x) => [x.id, x]));
  const parent = new Map();
  for (const x of profile.nodes) for (const c of x.children ?? []) parent.set(c, x.id);
  // The wasm-bindgen import a native frame ran under: `__wbg_getScripts_6a8c…` -> getScripts.
  const importOf = (id) => {
    for (let x = id; x !== undefined; x = parent.get(x)) {
      const m = byId.get(x).callFrame.functionName.match(/^__wbg_(\w+?)_[0-9a-f]{8,}$/);
      if (m) return m[1];
    }
    return undefined;
  };
  const split = new Map();
  const inclusive = new Map();
  const selfWasm = new Map();
  let busy = 0;
  profile.samples.forEach((id, i) => {
    const dt = profile.timeDeltas[i + 1] ?? 0;
    const [cat, label] = kind(byId.get(id).callFrame, importOf(id));
    if (cat === "idle") return;
    busy += dt;
    split.set(label, (split.get(label) ?? 0) + dt);
    if (cat === "wasm") {
      // A generic instance (memcpy, fmt, a drop) is named with the first of our functions above it.
      let caller;
      for (let x = parent.get(id); x !== undefined && !caller; x = parent.get(x)) {
        const f = byId.get(x).callFrame;
        if (f.url.endsWith(".wasm") && f.functionName.includes("lumo_userscripts::")) caller = rustPath(f.functionName);
      }
      const self = rustPath(byId.get(id).callFrame.functionName);
      const key = (caller && !self.includes("lumo_userscripts::") ? `${self} ← ${caller}` : self).replace(/lumo_userscripts::/g, "");
      selfWasm.set(key, (selfWasm.get(key) ?? 0) + dt);
    }
    const seen = new Set();
    for (let x = id; x !== undefined; x = parent.get(x)) {
      const f = byId.get(x).callFrame;
      if (!f.url.endsWith(".wasm") || !f.functionName.includes("lumo_userscripts::")) continue;
      const key = rustPath(f.functionName).replace(/lumo_userscripts::/g, "");
      if (seen.has(key)) continue;
      seen.add(key);
      inclusive.set(key, (inclusive.get(key) ?? 0) + dt);
    }
  });
  const perCall = (us) => us / n;
  return {
    busyPerCall: perCall(busy),
    split: [...split.entries()].sort((a, b) => b[1] - a[1]).map(([k, v]) => [k, perCall(v), v / busy]),
    inclusive: [...inclusive.entries()].sort((a, b) => b[1] - a[1]).map(([k, v]) => [k, perCall(v)]),
    selfWasm: [...selfWasm.entries()].sort((a, b) => b[1] - a[1]).map(([k, v]) => [k, perCall(v)]),
  };
}

async function profiled(browser, id, calls, run) {
  const { targetId } = browser.workerTarget(id);
  const { sessionId } = await browser.cdp.send("Target.attachToTarget", { targetId, flatten: true });
  const send = (m, p) => browser.cdp.send(m, p, sessionId);
  try {
    await send("Profiler.enable");
    await send("Profiler.setSamplingInterval", { interval: INTERVAL_US });
    await send("Profiler.start");
    await run();
    const { profile } = await send("Profiler.stop");
    return summarise(profile, calls);
  } finally {
    await browser.cdp.send("Target.detachFromTarget", { sessionId }).catch(() => {});
  }
}

const us = (x) => (x >= 100 ? x.toFixed(0) : x.toFixed(1));
function print(name, r, base) {
  console.log(`\n${name}: the worker busy ${us(r.busyPerCall)} µs per call${base ? ` (the baseline's: ${us(base.busyPerCall)} µs)` : ""}, profiled (native shares inflated: see the header)`);
  console.log(table(["what ran (self time)", "µs per call", "share"], r.split.filter(([, v]) => v >= 0.5).slice(0, Number(process.env.PROFILE_ROWS ?? 16)).map(([k, v, s]) => [k, us(v), `${(100 * s).toFixed(1)} %`])));
  console.log(table(["our function (with what it calls)", "µs per call"], r.inclusive.slice(0, Number(process.env.PROFILE_ROWS ?? 14)).map(([k, v]) => [k.slice(0, 110), us(v)])));
  if (process.env.PROFILE_SELF) console.log(table(["wasm function (self time; ← the first of ours above it)", "µs per call"], r.selfWasm.slice(0, Number(process.env.PROFILE_ROWS ?? 14)).map(([k, v]) => [k.slice(0, 150), us(v)])));
}

const ext = await prepareExtensions();
const named = namedDist();
const browser = await launch([named, ext.host, ext.baseline]);
try {
  const host = await browser.page(`chrome-extension://${HOST_ID}/host.html`);
  await browser.watchWorkers(host.sessionId);
  await host.eval(`() => {${INPAGE}}`);
  await browser.waitRunning(P);
  await browser.waitRunning(B);
  await approveHostAndAllowScripts(browser);
  const page = await providerPage(browser); // resets the rate window between write batches
  await host.eval(async (ids) => { for (const id of ids) await bench.open(id); }, [P, B]);

  // The stored scripts every scenario runs with: 10 written through write_script, the rest
  // copies of the first (as `make bench` seeds them), read by a restarted worker.
  const tool = (name, args) => host.eval((c) => bench.call(c), { id: P, method: "tools/call", params: { name, arguments: args } });
  const first = await storeScripts(browser, host, page, STORED);

  const probes = (id, n) => host.eval((id, n) => bench.probes([id], n), id, n);
  const rounds = (c, n) => host.eval((c, n) => bench.rounds(c, n), c, n);
  const status = (id) => [{ id, method: "tools/call", params: { name: "status", arguments: {} } }];
  const calls = {
    probe: (id, n) => probes(id, n),
    ping: (id, n) => rounds([{ id, method: "ping" }], n),
    status: (id, n) => rounds(status(id), n),
    // A page of list_scripts (the default 50) and the ping `make bench` times it with.
    list: (id, n) => rounds([{ id, method: "tools/call", params: { name: "list_scripts", arguments: {} } }, { id, method: "ping" }], n),
  };
  for (const scenario of SCENARIOS) {
    if (calls[scenario]) {
      log(scenario);
      const n = N;
      await calls[scenario](P, 200);
      const r = await profiled(browser, P, n, () => calls[scenario](P, n));
      let base;
      if (scenario !== "status" && scenario !== "list") {
        await calls[scenario](B, 200);
        base = await profiled(browser, B, n, () => calls[scenario](B, n));
      }
      print(scenario, r, base);
    } else if (scenario === "write") {
      log(`write_script at ${STORED} stored`);
      let revision = first.revision;
      let edit = 0;
      const writes = async (n) => {
        for (let done = 0; done < n; done += 25) {
          await page.eval(() => chrome.storage.session.remove("rateWindow")); // the 30-per-minute window
          const sources = Array.from({ length: Math.min(25, n - done) }, () => userscript(0, ++edit));
          revision = (await host.eval((id, uuid, rev, s) => bench.writes(id, uuid, rev, s), P, first.uuid, revision, sources)).revision;
        }
      };
      await writes(25);
      const n = Math.max(25, Math.round(N / 20));
      // bench.writes pings after each write: the ping's share is in the profile too (see `ping`).
      print(`write_script (update of a 5 KiB script, ${STORED} stored; a ping after each)`, await profiled(browser, P, n, () => writes(n)));
    } else if (scenario === "first") {
      // The first list_scripts after the worker restarts: it reads every stored record once.
      log(`the first list_scripts after a restart, ${STORED} stored`);
      await browser.stopWorker(P);
      await host.eval((id) => bench.probe(id), P);
      await browser.waitRunning(P);
      await host.eval((id) => { bench.timeoutMs = 600_000; return bench.open(id); }, P);
      print(`the first list_scripts after a restart (${STORED} stored)`, await profiled(browser, P, 1, () => tool("list_scripts", {})));
      await host.eval(() => { bench.timeoutMs = 10_000; });
    } else if (scenario === "try") {
      // try_script of a small script on a local page, by tab id (bench/try.mjs's source); a
      // try is a write for the rate limit, so the window is reset between batches.
      log(`try_script at ${STORED} stored`);
      const server = createServer((req, res) => { res.writeHead(200, { "content-type": "text/html" }); res.end("<!doctype html><title>Bench</title><p>a</p><p>b</p>"); });
      await new Promise((r) => server.listen(0, "127.0.0.1", r));
      try {
        const url = `http://127.0.0.1:${server.address().port}/`;
        await browser.page(url);
        const tabId = await page.eval(async (u) => (await chrome.tabs.query({})).find((t) => t.url === u)?.id, url);
        const source = ["// ==UserScript==", "// @name Bench try", "// @namespace lumo-bench", "// @match http://127.0.0.1/*", "// ==/UserScript==",
          "const n = document.querySelectorAll('p').length;", "console.log('paragraphs', n);", "n;", ""].join("\n");
        const tries = async (n) => {
          for (let done = 0; done < n; done += 25) {
            await page.eval(() => chrome.storage.session.remove("rateWindow"));
            await rounds([{ id: P, method: "tools/call", params: { name: "try_script", arguments: { source, tabId } } }], Math.min(25, n - done));
          }
        };
        await tries(25);
        const n = Math.max(25, Math.round(N / 20));
        print(`try_script (a ${source.length}-character script on a tab, by id)`, await profiled(browser, P, n, () => tries(n)));
      } finally {
        server.close();
        server.closeAllConnections();
      }
    } else {
      throw new Error(`unknown scenario ${scenario} (probe, ping, status, list, write, try, first)`);
    }
  }
} finally {
  await browser.close();
}
