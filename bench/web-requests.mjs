#!/usr/bin/env node
// What the provider costs the rest of the browser (`make bench` runs it; not a test). While an
// extension holds `webRequest` (needed to judge GM_xmlhttpRequest's redirects: ARCHITECTURE,
// Decisions), Chrome routes every request of the browser through its extension system, with or
// without a listener. Measured as a page's sequential same-origin fetches, in a browser with the
// provider next to one with the baseline provider only (no such permission), fresh browsers in
// turns (ABBA…); per-round medians and the ratio of their medians are printed, "reported" (no
// goal: this is the price of a decision, watched so that it does not grow).
//   BENCH_WEB_ROUNDS=<rounds> (default 6)   BENCH_WEB_N=<fetches per browser> (default 400)
import { createServer } from "node:http";
import { launch } from "./lib/browser.mjs";
import { prepareExtensions } from "./lib/extensions.mjs";

const ROUNDS = Math.max(1, Number(process.env.BENCH_WEB_ROUNDS ?? 6));
const N = Math.max(10, Number(process.env.BENCH_WEB_N ?? 400));
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };

const server = createServer((_req, res) => {
  res.writeHead(200, { "content-type": "text/html", "cache-control": "no-store" });
  res.end("<!doctype html><title>web</title>");
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const ext = await prepareExtensions();
const builds = { provider: ext.provider, baseline: ext.baseline };
const out = { provider: [], baseline: [] };
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const name of round % 2 ? ["baseline", "provider"] : ["provider", "baseline"]) {
      const browser = await launch([builds[name]]);
      try {
        const page = await browser.page(`http://127.0.0.1:${server.address().port}/`);
        out[name].push(await page.eval(async (n) => {
          const t = [];
          for (let i = 0; i < n + 20; i++) {
            const t0 = performance.now();
            await (await fetch(`/x?${i}`, { cache: "no-store" })).text();
            if (i >= 20) t.push(performance.now() - t0); // the first 20 warm up
          }
          return t.sort((a, b) => a - b)[Math.floor(t.length / 2)];
        }, N));
      } finally {
        await browser.close();
      }
    }
  }
} finally {
  server.close();
}
const fmt = (xs) => xs.map((x) => x.toFixed(2)).join(" ");
const slower = out.provider.filter((p, i) => p > out.baseline[i]).length;
console.log(`\nThe browser's own requests (a page's same-origin fetch, median of ${N} per browser; ms per round):`);
console.log(`  with the provider (webRequest held): ${fmt(out.provider)}`);
console.log(`  with the baseline only:              ${fmt(out.baseline)}`);
console.log(`  ratio of medians ${(median(out.provider) / median(out.baseline)).toFixed(3)}× (slower in ${slower} of ${ROUNDS} rounds); reported, no goal`);
