#!/usr/bin/env node
// The browser calls of a write_script, one write at a time (not a test; `make bench` times
// writes, `make profile` says where the worker's CPU goes): a timed copy of dist/
// (lib/timed-start.js + lib/timed-try.js) records every storage and userScripts call the
// worker makes and when each port message came in and went out. Per write it prints the
// worker's span (message in → reply out) and each call as +gap (no browser call pending: the
// worker's own time) @start duration; then the medians over the writes with the most common
// sequence of calls. An update of the bench's 5 KiB fixture (lib/userscript.mjs), 10 stored,
// or WT_STORED copies seeded as `make bench` seeds them; WT_N writes (default 16, at most 28),
// back to back as the bench's batches are, or WT_GAP_MS apart.
//   node bench/write-timeline.mjs        LUMO_DIST=<dir> measures another build
import { DIST_DIR, HOST_ID, PROVIDER_ID as P } from "../tests/e2e/lib/harness.mjs";
import { readFileSync } from "node:fs";
import { launch } from "./lib/browser.mjs";
import { prepareExtensions, timedCopy } from "./lib/extensions.mjs";
import { approveHostAndAllowScripts, providerPage, storeScripts } from "./lib/provider.mjs";
import { ms } from "./lib/stats.mjs";
import { timeline } from "./lib/timeline.mjs";
import { userscript } from "./lib/userscript.mjs";

// At most 28 (30 writes a minute per caller; the window is emptied once, before them and an
// untimed write that reads it back: emptied between writes, each would read it first).
const N = Math.min(28, Number(process.env.WT_N ?? 16));
const STORED = Math.max(10, Number(process.env.WT_STORED ?? 10));
const GAP_MS = Number(process.env.WT_GAP_MS ?? 0);
const INPAGE = readFileSync(new URL("./lib/inpage.js", import.meta.url), "utf8");
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };

const ext = await prepareExtensions();
const browser = await launch([timedCopy(DIST_DIR, "provider-timed-write", ["timed-try.js"]), ext.host]);
try {
  const host = await browser.page(`chrome-extension://${HOST_ID}/host.html`);
  await browser.watchWorkers(host.sessionId);
  await host.eval(`() => {${INPAGE}}`);
  await browser.waitRunning(P);
  await approveHostAndAllowScripts(browser);
  const page = await providerPage(browser); // empties the rate window
  await host.eval((id) => bench.open(id), P);
  let script = await storeScripts(browser, host, page, STORED);
  const marks = () => browser.withWorker(P, (_, evaluate) => evaluate(() => {
    const m = globalThis.__benchMarks;
    return { calls: m.calls.splice(0), ports: m.ports.splice(0) };
  }));
  await page.eval(() => chrome.storage.session.remove("rateWindow"));
  const lines = [];
  for (let i = -1; i < N; i++) {
    await marks();
    const { ms: took, result } = await host.eval((c) => bench.call(c), { id: P, method: "tools/call", params: { name: "write_script", arguments: { uuid: script.uuid, revision: script.revision, source: userscript(0, i + 2) } } });
    script = result.structuredContent.script;
    const m = await marks();
    const rpcId = m.ports.filter((p) => p.dir === "in" && p.method === "tools/call").at(-1)?.id;
    if (i >= 0) lines.push({ host: took, ...timeline(m, rpcId) });
    if (GAP_MS) await new Promise((r) => setTimeout(r, GAP_MS));
  }
  console.log(`write_script timeline (timed copy; ms), an update of a 5 KiB script at ${STORED} stored. Per write: the host's round trip, the worker's span, each browser call as +gap @start duration:`);
  lines.forEach((l, i) => {
    if (!l.steps) return console.log(`#${i + 1}: no timeline`);
    console.log(`#${i + 1} host ${ms(l.host)} span ${ms(l.span)}: ${l.steps.map((s) => `+${ms(s.gap)} ${s.api} @${ms(s.start)} ${ms(s.dur)}`).join(" | ")} | +${ms(l.tail)} reply`);
  });
  const ok = lines.filter((l) => l.steps);
  const shape = (l) => l.steps.map((s) => s.api).join(",");
  const groups = new Map();
  for (const l of ok) groups.set(shape(l), [...(groups.get(shape(l)) ?? []), l]);
  const same = [...groups.values()].sort((a, b) => b.length - a.length)[0];
  if (same) {
    console.log(`\nMedians over the ${same.length} of ${ok.length} writes with the most common call sequence:`);
    console.log(`  host round trip ${ms(median(same.map((l) => l.host)))}; worker span ${ms(median(same.map((l) => l.span)))}; the worker's own time (no browser call pending) ${ms(median(same.map((l) => l.own)))}`);
    same[0].steps.forEach((s, k) => console.log(`  +${ms(median(same.map((l) => l.steps[k].gap)))} @${ms(median(same.map((l) => l.steps[k].start)))}  ${s.api.padEnd(36)} ${ms(median(same.map((l) => l.steps[k].dur)))}`));
    console.log(`  +${ms(median(same.map((l) => l.tail)))}  reply`);
  }
} finally {
  await browser.close();
}
