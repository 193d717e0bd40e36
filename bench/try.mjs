#!/usr/bin/env node
// try_script's round trip next to a bare chrome.userScripts.execute of the same code (`make bench`
// runs it after bench/run.mjs; not a test). The agent's path: the test host's MCP SDK client →
// lumo:mcp port → the worker (arguments, rate limit, tab lookup, wrap, execute, report parsing,
// audit) → the result. Two yardsticks, executed once each in the same tab by
// chrome.userScripts.execute called from one of the provider's own extension pages (no provider
// logic, no port), interleaved with the tries:
//   - the *raw* source, as one `js` entry in the default world: the goal's denominator;
//   - the *wrapped* code: the very injection the provider gave Chrome (captured from the worker
//     once, during the warm-up), with a fresh nonce per sample — the provider's floor: what Chrome
//     costs to run what a try must run. try − wrapped is the provider's own cost.
// An MCP ping over the same session measures the transport (SDK client → port → worker → back),
// which every tool call pays. Medians and ratios are printed; the goal line is try ÷ raw, with the
// provider's floor (wrapped execute + ping) beside it.
//   BENCH_TRY_N=<samples> (default and at most 24: the rate limit)
//   BENCH_TRY_STORED=1  try a stored script granted GM values (written first, tried by uuid: its
//     record, source and values are read for each try) instead of the raw source; the
//     yardsticks stay the raw source's
//   BENCH_TRY_PROFILE=1  measure a timed copy of dist/ (bench/lib/timed-start.js, timed-try.js) and print, per
//     try, the worker's browser calls in order with their durations and the gaps between them
//     (time in wasm/JS with no browser call pending), then the medians per step.
import { createServer } from "node:http";
import { DIST_DIR, HOST_ID, PROVIDER_ID, launch } from "../tests/e2e/lib/harness.mjs";
import { timedCopy } from "./lib/extensions.mjs";
import { ms } from "./lib/stats.mjs";
import { timeline } from "./lib/timeline.mjs";

// try_script is a write: 30 per minute per caller, so one browser gives at most ~25 samples
// (one fewer when the stored script is written first).
const STORED = Boolean(process.env.BENCH_TRY_STORED);
const N = Math.min(Number(process.env.BENCH_TRY_N ?? 24), STORED ? 23 : 24);
const PROFILE = Boolean(process.env.BENCH_TRY_PROFILE);
const SOURCE = [
  "// ==UserScript==", "// @name Bench try", "// @namespace lumo-bench", "// @match http://bench.test/*", "// ==/UserScript==",
  "const n = document.querySelectorAll('p').length;", "console.log('paragraphs', n);", "n;", "",
].join("\n");

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const p90 = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length * 0.9)]; };

const server = createServer((req, res) => { res.writeHead(200, { "content-type": "text/html" }); res.end("<!doctype html><title>Bench</title><p>a</p><p>b</p>"); });
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const url = `http://bench.test:${server.address().port}/`;
const h = await launch({ dist: PROFILE ? timedCopy(DIST_DIR, "provider-timed-try", ["timed-try.js"]) : DIST_DIR });
try {
  await h.internal("policy.approve", { id: HOST_ID });
  await h.setUserScriptsAccess(PROVIDER_ID, true);
  const tab = await h.context.newPage();
  await tab.goto(url, { waitUntil: "load" });
  const session = await h.lumo("connect", PROVIDER_ID);
  // A provider page that stays quiet: options.html (h.providerPage) re-renders on every storage
  // change, asking the worker for the script list, which would land in the try's samples.
  if (h._provider && !h._provider.isClosed()) await h._provider.close();
  const page = await h.context.newPage();
  await page.goto(`chrome-extension://${PROVIDER_ID}/manifest.json`);
  const tabId = await page.evaluate(async (u) => (await chrome.tabs.query({})).find((t) => t.url === u)?.id, url);
  const host = await h.hostPage();
  const worker = () => h.context.serviceWorkers().find((w) => w.url().startsWith(`chrome-extension://${PROVIDER_ID}/`));
  let what = { source: SOURCE };
  if (STORED) {
    const gm = SOURCE.replace("// ==/UserScript==", "// @grant GM_getValue\n// ==/UserScript==").replace("n;", "GM_getValue('n', n);");
    const w = await host.evaluate(([s, src]) => window.lumo.callTool(s, "write_script", { source: src }), [session, gm]);
    const uuid = w.structuredContent?.script?.uuid;
    if (w.isError || !uuid) throw new Error(`the stored script was not written: ${JSON.stringify(w)}`);
    what = { uuid };
  }
  const viaTool = async () => host.evaluate(async ([s, what, id]) => {
    const t0 = performance.now();
    const r = await window.lumo.callTool(s, "try_script", { ...what, tabId: id });
    if (r.isError || r.structuredContent?.frames?.[0]?.ok !== true) throw new Error(JSON.stringify(r));
    return performance.now() - t0;
  }, [session, what, tabId]);
  const bare = async () => page.evaluate(async ([src, id]) => {
    const t0 = performance.now();
    const r = await chrome.userScripts.execute({ target: { tabId: id }, js: [{ code: src }], world: "USER_SCRIPT", injectImmediately: true });
    if (!r?.[0] || r[0].error) throw new Error(JSON.stringify(r));
    return performance.now() - t0;
  }, [SOURCE, tabId]);

  // The injection the provider gives Chrome, taken from the worker once (the method is put back
  // at once, so the samples run the worker untouched).
  await worker().evaluate(() => {
    const us = chrome.userScripts;
    const original = us.execute;
    us.execute = function (injection) {
      globalThis.__benchTryInjection = JSON.parse(JSON.stringify(injection));
      us.execute = original;
      return original.call(this, injection);
    };
    // And what a try stores: its rate slot (session, once), and in local its record as in
    // progress before it runs and its audit entry after (twice).
    for (const [area, key, n] of [[chrome.storage.session, "__benchTryRate", 1], [chrome.storage.local, "__benchTryAudit", 2]]) {
      const set = area.set;
      globalThis[key] = [];
      area.set = function (items) {
        globalThis[key].push(JSON.parse(JSON.stringify(items)));
        if (globalThis[key].length >= n) area.set = set;
        return set.call(this, items);
      };
    }
  });
  await viaTool();
  const injection = await worker().evaluate(() => globalThis.__benchTryInjection);
  const stored = await worker().evaluate(() => ({ rate: globalThis.__benchTryRate[0], begun: globalThis.__benchTryAudit[0], audit: globalThis.__benchTryAudit[1] }));
  // The first writes after the capture began must be the try's own: its rate slot, its record
  // in progress, its audit entry.
  if (!stored.rate?.rateWindow || !stored.begun?.["audit/pendingTries"] || !Object.keys(stored.audit ?? {}).some((k) => /^audit\/(refused\/)?\d+$/.test(k))) {
    throw new Error(`a try's storage writes were not captured: ${JSON.stringify([stored.rate, stored.begun, stored.audit].map((x) => Object.keys(x ?? {})))}`);
  }
  if (!injection) throw new Error("the provider's injection was not captured (chrome.userScripts.execute not called?)");
  const nonce = JSON.stringify(injection).match(/lumo-try-([0-9a-f-]{36})\.js/)?.[1];
  if (!nonce) throw new Error("no nonce in the captured injection");
  const wrapped = async () => page.evaluate(async ([inj, nonce, id]) => {
    const fresh = crypto.randomUUID(); // as the provider makes one per try (no compile cache hit)
    const js = inj.js.map((j) => ({ ...j, code: j.code.replaceAll(nonce, fresh) }));
    const t0 = performance.now();
    const r = await chrome.userScripts.execute({ ...inj, target: { ...inj.target, tabId: id }, js });
    if (r?.[0]?.result?.lumo !== fresh) throw new Error(JSON.stringify(r));
    return performance.now() - t0;
  }, [injection, nonce, tabId]);

  // The Chrome calls a try cannot do without, from a provider page: its rate slot beside its record
  // in progress and its world's configuration (the installed script's policy, env::WORLD_CSP),
  // the wrapped execute, the configuration given back beside its audit entry (the same items under
  // other keys, so the provider's own state is left alone). Plus the transport, this is the
  // try's floor.
  const rekey = (items) => Object.fromEntries(Object.entries(items).map(([k, v]) => [`bench-floor/${k}`, v]));
  const [rateItems, begunItems, auditItems] = [rekey(stored.rate), rekey(stored.begun), rekey(stored.audit)];
  const calls = async () => page.evaluate(async ([inj, nonce, id, rate, begun, audit]) => {
    const fresh = crypto.randomUUID();
    const js = inj.js.map((j) => ({ ...j, code: j.code.replaceAll(nonce, fresh) }));
    const world = { worldId: inj.worldId, messaging: false, csp: "script-src * blob: data: 'unsafe-inline' 'unsafe-eval'" };
    const t0 = performance.now();
    await Promise.all([chrome.storage.session.set(rate), chrome.storage.local.set(begun), chrome.userScripts.configureWorld(world)]);
    const r = await chrome.userScripts.execute({ ...inj, target: { ...inj.target, tabId: id }, js });
    await Promise.all([chrome.userScripts.resetWorldConfiguration(inj.worldId), chrome.storage.local.set(audit)]);
    if (r?.[0]?.result?.lumo !== fresh) throw new Error(JSON.stringify(r));
    return performance.now() - t0;
  }, [injection, nonce, tabId, rateItems, begunItems, auditItems]);

  // The MCP transport alone: a ping over the same session (SDK client → port → worker → back).
  const ping = async () => host.evaluate(async (s) => {
    const t0 = performance.now();
    await window.lumo.ping(s);
    return performance.now() - t0;
  }, session);

  for (let i = 0; i < 2; i++) { await viaTool(); await bare(); await wrapped(); await calls(); await ping(); } // warm-up
  const takeMarks = () => worker().evaluate(() => {
    const m = globalThis.__benchMarks;
    return { calls: m.calls.splice(0), ports: m.ports.splice(0) };
  });
  if (PROFILE) await takeMarks();
  const tool = [], base = [], floor = [], needed = [], pings = [], lines = [];
  for (let i = 0; i < N; i++) {
    tool.push(await viaTool());
    if (PROFILE) {
      const marks = await takeMarks();
      const rpcId = marks.ports.filter((p) => p.dir === "in" && p.method === "tools/call").at(-1)?.id;
      lines.push({ host: tool.at(-1), ...timeline(marks, rpcId) });
    }
    base.push(await bare());
    floor.push(await wrapped());
    needed.push(await calls());
    pings.push(await ping());
  }
  const codeBytes = injection.js.reduce((n, j) => n + j.code.length, 0);
  console.log(`try_script round trip: median ${ms(median(tool))} ms, p90 ${ms(p90(tool))} ms (n=${N})`);
  console.log(`bare userScripts.execute of the raw source: median ${ms(median(base))} ms, p90 ${ms(p90(base))} ms (n=${N})`);
  console.log(`bare userScripts.execute of the provider's injection (${injection.js.length} js entries, ${codeBytes} characters, world ${injection.worldId ?? "default"}): median ${ms(median(floor))} ms, p90 ${ms(p90(floor))} ms (n=${N})`);
  console.log(`MCP ping over the same session (the transport): median ${ms(median(pings))} ms, p90 ${ms(p90(pings))} ms (n=${N})`);
  const own = median(tool) - median(floor) - median(pings);
  console.log(`split of the median try: wrapped execute ${ms(median(floor))} (of which Chrome's cost of the wrapper, wrapped − raw: ${ms(median(floor) - median(base))}) + transport ${ms(median(pings))} + the provider's own logic and storage ${ms(own)} ms`);
  console.log(`try_script / (wrapped execute + ping): ${(median(tool) / (median(floor) + median(pings))).toFixed(2)}×`);
  console.log(`the Chrome calls a try must make (rate slot set beside the record in progress set and the world configured, wrapped execute, the configuration reset beside the audit set; from a provider page): median ${ms(median(needed))} ms, p90 ${ms(p90(needed))} ms (n=${N})`);
  const tryFloor = median(needed) + median(pings);
  const r = median(tool) / median(base);
  console.log(`ratio (try_script / bare execute, medians): ${r.toFixed(2)}× — goal ≤ 1.20×: ${r <= 1.2 ? "PASS" : "MISS"} (floor: the Chrome calls a try must make + ping ${ms(tryFloor)} ms = ${(tryFloor / median(base)).toFixed(2)}× the raw execute; try_script ${(median(tool) / tryFloor).toFixed(2)}× of that floor)`);
  if (PROFILE) printProfile(lines);
} finally {
  await h.close();
  server.close();
  server.closeAllConnections();
}

function printProfile(lines) {
  console.log("\nProfile (timed copy; ms). Per try: host round trip, worker span (message in → reply out), then each browser call as +gap (no call pending: wasm/JS) then name and duration:");
  lines.forEach((l, i) => {
    if (!l.steps) return console.log(`#${i + 1}: no timeline`);
    const steps = l.steps.map((s) => `+${ms(s.gap)} ${s.api}${s.entries ? `[${s.entries} js, ${s.bytes} ch]` : ""} ${ms(s.dur)}`).join(" | ");
    console.log(`#${i + 1} host ${ms(l.host)} span ${ms(l.span)}: ${steps} | +${ms(l.tail)} reply`);
  });
  const ok = lines.filter((l) => l.steps);
  const shape = (l) => l.steps.map((s) => s.api).join(",");
  const groups = new Map();
  for (const l of ok) groups.set(shape(l), [...(groups.get(shape(l)) ?? []), l]);
  const same = [...groups.values()].sort((a, b) => b.length - a.length)[0];
  if (!same) return;
  console.log(`\nMedians over the ${same.length} of ${ok.length} tries with the most common call sequence:`);
  console.log(`  host round trip ${ms(median(same.map((l) => l.host)))}; worker span ${ms(median(same.map((l) => l.span)))}; outside the worker (host SDK + port, both ways) ${ms(median(same.map((l) => l.host - l.span)))}`);
  same[0].steps.forEach((s, k) => {
    console.log(`  +${ms(median(same.map((l) => l.steps[k].gap)))}  ${s.api.padEnd(24)} ${ms(median(same.map((l) => l.steps[k].dur)))}`);
  });
  console.log(`  +${ms(median(same.map((l) => l.tail)))}  reply`);
  console.log(`  time with no browser call pending (wasm/JS): ${ms(median(same.map((l) => l.own)))}`);
}
