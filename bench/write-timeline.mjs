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
import { approveHostAndAllowScripts, providerPage, seedCopies, template } from "./lib/provider.mjs";
import { ms } from "./lib/stats.mjs";
import { userscript } from "./lib/userscript.mjs";

// At most 28 (30 writes a minute per caller; the window is emptied once, before them and an
// untimed write that reads it back: emptied between writes, each would read it first).
const N = Math.min(28, Number(process.env.WT_N ?? 16));
const STORED = Math.max(10, Number(process.env.WT_STORED ?? 10));
const GAP_MS = Number(process.env.WT_GAP_MS ?? 0);
const INPAGE = readFileSync(new URL("./lib/inpage.js", import.meta.url), "utf8");
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };

/** The worker's browser calls during the tools/call `rpcId` (message in → reply out). */
function timeline(marks, rpcId) {
  const got = marks.ports.find((p) => p.dir === "in" && p.id === rpcId && p.method === "tools/call");
  const out = marks.ports.find((p) => p.dir === "out" && p.id === rpcId);
  if (!got || !out) return null;
  // A userScripts method wrapped by both timed files is recorded twice: once is enough.
  const seen = new Set();
  const calls = marks.calls
    .filter((c) => c.start >= got.t && c.start <= out.t)
    .filter((c) => { const k = `${c.api}@${c.start}`; return !seen.has(k) && seen.add(k); })
    .sort((a, b) => a.start - b.start);
  let at = got.t; // the end of the latest call so far: a gap is time with no browser call pending
  let gaps = 0;
  const steps = calls.map((c) => {
    const end = c.end ?? out.t;
    const gap = Math.max(0, c.start - at);
    gaps += gap;
    at = Math.max(at, end);
    return { api: c.api, gap, start: c.start - got.t, dur: end - c.start };
  });
  const tail = Math.max(0, out.t - at);
  return { span: out.t - got.t, steps, tail, own: gaps + tail };
}

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
  const tool = (name, args) => host.eval((c) => bench.call(c), { id: P, method: "tools/call", params: { name, arguments: args } });
  let script = (await tool("write_script", { source: userscript(0) })).result.structuredContent.script;
  for (let i = 1; i < 10; i++) await tool("write_script", { source: userscript(i) });
  if (STORED > 10) {
    const index = await page.eval(() => chrome.storage.local.get("scripts/index").then((r) => r["scripts/index"].uuids));
    await seedCopies(page, await template(page, script.uuid), index, STORED);
    await browser.stopWorker(P);
    await host.eval((id) => bench.probe(id), P);
    await browser.waitRunning(P);
    await host.eval((id) => { bench.timeoutMs = 600_000; return bench.open(id); }, P);
    await tool("list_scripts", {}); // the restarted worker reads every record once, here
    await host.eval(() => { bench.timeoutMs = 10_000; });
  }
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
