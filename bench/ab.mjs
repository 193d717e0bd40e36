#!/usr/bin/env node
// A/B of two builds of the provider (not a test): `make bench-ab REV=…` (scripts/bench-ab.sh
// builds REV's dist/, then runs `node bench/ab.mjs <dist A> <dist B>`).
//
// A change worth a few percent is within the spread of two `make bench` runs, so this measures
// both builds in the same minutes: fresh browsers in ABBA order, the same scenarios in each, and
// the ratio B/A per scenario with its range over the rounds and a sign test of them (a verdict
// only below p = 0.05). Writes bench/out/ab-<timestamp>.json.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { HOST_ID, PROVIDER_ID as P } from "../tests/e2e/lib/harness.mjs";
import { launch } from "./lib/browser.mjs";
import { OUT_DIR, prepareExtensions } from "./lib/extensions.mjs";
import { approveHostAndAllowScripts, providerPage } from "./lib/provider.mjs";
import { ms, table } from "./lib/stats.mjs";
import { userscript } from "./lib/userscript.mjs";

const [distA, distB] = process.argv.slice(2).map((d) => resolve(d));
if (!distA || !distB) throw new Error("usage: node bench/ab.mjs <dist A> <dist B>");
const ROUNDS = Number(process.env.AB_ROUNDS ?? 6); // 6 rounds one way: p = 0.03 (sign test)
const N = Number(process.env.AB_N ?? 300); // warm calls per scenario per round
const COLD = Number(process.env.AB_COLD ?? 10); // cold probes per round (worker stopped first)
const WRITES = 25; // per batch, two batches per round (the rate limit allows 30 a minute)
const INPAGE = readFileSync(new URL("./lib/inpage.js", import.meta.url), "utf8");
const log = (...a) => console.error("bench-ab:", ...a);

/**
 * Two-sided sign test over the rounds: how likely `faster` rounds against `slower` (or a split
 * more lopsided) are when neither build is faster. Identical builds gave one round-range on the
 * same side of 1.00× in 4 rounds by chance (1 in 8 per scenario), so a verdict needs this.
 */
function signTest(faster, slower) {
  const n = faster + slower;
  const k = Math.min(faster, slower);
  let tail = 0;
  let c = 1; // n choose i
  for (let i = 0; i <= k; i++) {
    tail += c;
    c = (c * (n - i)) / (i + 1);
  }
  return Math.min(1, (2 * tail) / 2 ** n);
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

/** One fresh browser with `dist`: the median of each scenario, in ms. */
async function measure(dist, host) {
  const browser = await launch([dist, host]);
  try {
    const hostPage = await browser.page(`chrome-extension://${HOST_ID}/host.html`);
    await browser.watchWorkers(hostPage.sessionId);
    await hostPage.eval(`() => {${INPAGE}}`);
    await browser.waitRunning(P);
    await approveHostAndAllowScripts(browser);
    const out = {};
    const cold = [];
    for (let i = 0; i < COLD; i++) {
      await browser.stopWorker(P);
      cold.push((await hostPage.eval((id) => bench.probe(id), P)).ms);
    }
    out.cold = median(cold);
    const page = await providerPage(browser);
    await hostPage.eval((ids, n) => bench.probes(ids, n), [P], 50);
    out.probe = median((await hostPage.eval((ids, n) => bench.probes(ids, n), [P], N))[P]);
    await hostPage.eval((id) => bench.open(id), P);
    const calls = [{ id: P, method: "ping" }, { id: P, method: "tools/call", params: { name: "status", arguments: {} } }];
    await hostPage.eval((c, n) => bench.rounds(c, n), calls, 50);
    const [ping, status] = await hostPage.eval((c, n) => bench.rounds(c, n), calls, N);
    out.ping = median(ping);
    out.status = median(status);
    const tool = (name, args) => hostPage.eval((c) => bench.call(c), { id: P, method: "tools/call", params: { name, arguments: args } });
    const first = (await tool("write_script", { source: userscript(0) })).result.structuredContent.script;
    for (let i = 1; i < 10; i++) await tool("write_script", { source: userscript(i) });
    let revision = first.revision;
    let edit = 0;
    const writes = [];
    for (let batch = 0; batch < 2; batch++) {
      await page.eval(() => chrome.storage.session.remove("rateWindow")); // the 30-per-minute window
      const sources = Array.from({ length: WRITES }, () => userscript(0, ++edit));
      const r = await hostPage.eval((id, uuid, rev, s) => bench.writes(id, uuid, rev, s), P, first.uuid, revision, sources);
      revision = r.revision;
      writes.push(...r.write.slice(3)); // the first writes of a batch warm the path
    }
    out.write = median(writes);
    return out;
  } finally {
    await browser.close();
  }
}

const ext = await prepareExtensions();
const rounds = [];
for (let r = 0; r < ROUNDS; r++) {
  const order = r % 2 === 0 ? ["a", "b"] : ["b", "a"];
  const got = {};
  for (const side of order) {
    log(`round ${r + 1}/${ROUNDS}: ${side.toUpperCase()}`);
    got[side] = await measure(side === "a" ? distA : distB, ext.host);
  }
  rounds.push(got);
}

const SCENARIOS = {
  cold: `cold start, first probe (median of ${COLD})`,
  probe: `warm probe (median of ${N})`,
  ping: `warm ping (median of ${N})`,
  status: `warm tools/call status (median of ${N})`,
  write: `write_script update, 5 KiB script, 10 stored (median of ${2 * (WRITES - 3)})`,
};
const rows = Object.entries(SCENARIOS).map(([k, name]) => {
  const a = median(rounds.map((x) => x.a[k]));
  const b = median(rounds.map((x) => x.b[k]));
  const per = rounds.map((x) => x.b[k] / x.a[k]);
  const lo = Math.min(...per);
  const hi = Math.max(...per);
  const p = signTest(per.filter((x) => x < 1).length, per.filter((x) => x > 1).length);
  const verdict = p >= 0.05 ? "no clear difference" : b < a ? "B faster" : "B slower";
  return [name, ms(a), ms(b), `${(b / a).toFixed(3)}×`, `${lo.toFixed(3)}–${hi.toFixed(3)}×`, p.toFixed(3), verdict];
});
console.log(`\nA: ${distA}\nB: ${distB}\n${ROUNDS} rounds, ABBA order, a fresh browser each; ms, medians of the rounds' medians.\n`);
console.log(table(["scenario", "A", "B", "B/A", "B/A per round", "p (sign test)", ""], rows));
mkdirSync(OUT_DIR, { recursive: true });
const file = join(OUT_DIR, `ab-${new Date().toISOString().replace(/[:.]/g, "-")}.json`);
writeFileSync(file, JSON.stringify({ distA, distB, rounds }, null, 2));
console.log(`\nwritten: ${file}`);
