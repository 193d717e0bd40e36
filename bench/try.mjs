#!/usr/bin/env node
// try_script's round trip next to a bare chrome.userScripts.execute of the same code (`make bench`
// runs it after bench/run.mjs; not a test). The agent's path: the test host's MCP SDK client →
// lumo:mcp port → the worker (arguments, tab lookup, wrap, execute, report parsing) → the result.
// The yardstick: the same userscript source executed once in the same tab by
// chrome.userScripts.execute called from one of the provider's own extension pages (no provider
// logic, no wrapper, no port). Samples are interleaved; medians and the ratio are printed.
//   BENCH_TRY_N=<samples> (default and at most 24: the rate limit)
import { createServer } from "node:http";
import { HOST_ID, PROVIDER_ID, launch } from "../tests/e2e/lib/harness.mjs";

// try_script is a write: 30 per minute per caller, so one browser gives at most ~25 samples.
const N = Math.min(Number(process.env.BENCH_TRY_N ?? 24), 24);
const SOURCE = [
  "// ==UserScript==", "// @name Bench try", "// @namespace lumo-bench", "// @match http://bench.test/*", "// ==/UserScript==",
  "const n = document.querySelectorAll('p').length;", "console.log('paragraphs', n);", "n;", "",
].join("\n");

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const p90 = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length * 0.9)]; };

const server = createServer((req, res) => { res.writeHead(200, { "content-type": "text/html" }); res.end("<!doctype html><title>Bench</title><p>a</p><p>b</p>"); });
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const url = `http://bench.test:${server.address().port}/`;
const h = await launch();
try {
  await h.internal("policy.approve", { id: HOST_ID });
  await h.setUserScriptsAccess(PROVIDER_ID, true);
  const tab = await h.context.newPage();
  await tab.goto(url, { waitUntil: "load" });
  const session = await h.lumo("connect", PROVIDER_ID);
  const page = await h.providerPage();
  const tabId = await page.evaluate(async (u) => (await chrome.tabs.query({})).find((t) => t.url === u)?.id, url);
  const host = await h.hostPage();
  const viaTool = async () => host.evaluate(async ([s, src, id]) => {
    const t0 = performance.now();
    const r = await window.lumo.callTool(s, "try_script", { source: src, tabId: id });
    if (r.isError || r.structuredContent?.frames?.[0]?.ok !== true) throw new Error(JSON.stringify(r));
    return performance.now() - t0;
  }, [session, SOURCE, tabId]);
  const bare = async () => page.evaluate(async ([src, id]) => {
    const t0 = performance.now();
    const r = await chrome.userScripts.execute({ target: { tabId: id }, js: [{ code: src }], world: "USER_SCRIPT", injectImmediately: true });
    if (!r?.[0] || r[0].error) throw new Error(JSON.stringify(r));
    return performance.now() - t0;
  }, [SOURCE, tabId]);
  for (let i = 0; i < 3; i++) { await viaTool(); await bare(); } // warm-up
  const tool = [], base = [];
  for (let i = 0; i < N; i++) { tool.push(await viaTool()); base.push(await bare()); }
  const ratio = median(tool) / median(base);
  console.log(`try_script round trip: median ${median(tool).toFixed(2)} ms, p90 ${p90(tool).toFixed(2)} ms (n=${N})`);
  console.log(`bare userScripts.execute: median ${median(base).toFixed(2)} ms, p90 ${p90(base).toFixed(2)} ms (n=${N})`);
  console.log(`ratio (try_script / bare execute, medians): ${ratio.toFixed(2)}× — goal ≤ 1.20×: ${ratio <= 1.2 ? "PASS" : "MISS"} (floor: the bare execute, ${median(base).toFixed(2)} ms)`);
} finally {
  await h.close();
  server.close();
  server.closeAllConnections();
}
