#!/usr/bin/env node
// Measures the options page with 1,000 stored scripts (not a test; issue "options page burns a
// core"): time until the Scripts table has every row, then the CPU time of the whole browser
// (every Chromium process: the page, the service worker, the browser) over 10 s idle and over
// 10 s while an agent writes one script a second. `LUMO_DIST=dir node bench/options-page.mjs`
// measures another build (e.g. main's) the same way. Run it on an otherwise idle machine.
import { execSync } from "node:child_process";
import { createHash, randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { HOST_ID, PROVIDER_ID, launch } from "../tests/e2e/lib/harness.mjs";

const N = Number(process.env.SCRIPTS ?? 1000);
const WINDOW_MS = 10_000;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const TICK = Number(execSync("getconf CLK_TCK").toString().trim());

const userscript = (i) => `// ==UserScript==\n// @name Options bench ${String(i).padStart(4, "0")}\n// @namespace bench\n// @match https://example.com/${i}/*\n// ==/UserScript==\nconsole.log(${i});\n`;

/** CPU seconds used so far by the browser whose profile is `dir` and all its descendants. */
function cpuSeconds(dir) {
  const root = execSync(`pgrep -f -o -- "--user-data-dir=${dir}"`).toString().trim();
  const all = execSync("ps -e -o pid=,ppid=").toString().trim().split("\n").map((l) => l.trim().split(/\s+/).map(Number));
  const tree = new Set([Number(root)]);
  for (let grew = true; grew;) {
    grew = false;
    for (const [pid, ppid] of all) if (tree.has(ppid) && !tree.has(pid)) { tree.add(pid); grew = true; }
  }
  let ticks = 0;
  for (const pid of tree) {
    try {
      const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
      ticks += Number(f[11]) + Number(f[12]); // utime, stime
    } catch { /* exited */ }
  }
  return ticks / TICK;
}

async function cpuOver(dir, ms, during = async () => {}) {
  const c0 = cpuSeconds(dir);
  const t0 = Date.now();
  await Promise.all([sleep(ms), during()]);
  const wall = (Date.now() - t0) / 1000;
  return Math.round(((cpuSeconds(dir) - c0) / wall) * 1000) / 10; // % of one core
}

const h = await launch();
try {
  await h.internal("policy.approve", { id: HOST_ID });
  await h.setUserScriptsAccess(PROVIDER_ID, true);
  const s = await h.lumo("connect", PROVIDER_ID);
  const first = (await h.lumo("callTool", s, "write_script", { source: userscript(0) })).structuredContent.script;
  const page = await h.providerPage();
  await page.goto(`chrome-extension://${PROVIDER_ID}/manifest.json`); // no options page open while seeding
  const [record, registration] = await page.evaluate(async (uuid) => [
    (await chrome.storage.local.get(`script/${uuid}`))[`script/${uuid}`],
    (await chrome.userScripts.getScripts({ ids: [uuid] }))[0],
  ], first.uuid);
  // Stored an hour ago: idle means relative times that change once a minute at most. FRESH=1
  // stores them just now, so every "N s ago" changes every second for the first minute.
  const HOUR_AGO = Date.now() - (process.env.FRESH ? 0 : 3_600_000);
  const items = {};
  const regs = [];
  const uuids = [first.uuid];
  for (let i = 1; i < N; i++) {
    const uuid = randomUUID();
    const source = userscript(i);
    items[`script/${uuid}`] = { ...record, uuid, metadata: { ...record.metadata, name: `Options bench ${String(i).padStart(4, "0")}` },
      sha256: createHash("sha256").update(source).digest("hex"), size: Buffer.byteLength(source), createdAt: HOUR_AGO + i, updatedAt: HOUR_AGO + i };
    items[`source/${uuid}`] = source;
    regs.push({ ...registration, id: uuid, js: [{ code: source }] });
    uuids.push(uuid);
  }
  items["scripts/index"] = { uuids };
  await page.evaluate(async ([items, regs]) => {
    await chrome.storage.local.set(items);
    await chrome.userScripts.register(regs);
  }, [items, regs]);
  await page.close();
  await sleep(3000);
  const closed = await cpuOver(h.userDataDir, WINDOW_MS); // the browser alone, no options page
  let next = N;
  const agentWrites = async () => {
    for (let i = 0; i < WINDOW_MS / 1000; i++) {
      const r = await h.lumo("callTool", s, "write_script", { source: userscript(next++) });
      if (r.isError !== false) throw new Error(`write failed: ${JSON.stringify(r)}`);
      await sleep(1000);
    }
  };
  const writingAlone = await cpuOver(h.userDataDir, WINDOW_MS, agentWrites); // the same writes, no page


  const options = await h.context.newPage();
  const t0 = Date.now();
  await options.goto(`chrome-extension://${PROVIDER_ID}/options.html`);
  await options.waitForFunction(() => document.querySelectorAll("#scripts [role=row][data-uuid], #scripts tbody tr").length > 0, null, { timeout: 60_000 });
  const firstRows = Date.now() - t0;
  await options.waitForFunction((n) => document.querySelectorAll("#scripts [role=row][data-uuid], #scripts tbody tr").length === n, next, { timeout: 60_000, polling: 50 });
  const allRows = Date.now() - t0;
  await sleep(3000);
  const idle = await cpuOver(h.userDataDir, WINDOW_MS);
  const writing = await cpuOver(h.userDataDir, WINDOW_MS, agentWrites);
  const rows = await options.evaluate(() => document.querySelectorAll("#scripts [role=row][data-uuid], #scripts tbody tr").length);
  console.log(JSON.stringify({ dist: process.env.LUMO_DIST ?? "dist", fresh: Boolean(process.env.FRESH), scripts: N, browserAloneCpuPercentOfOneCore: closed, writingWithoutPageCpuPercentOfOneCore: writingAlone, firstRowsMs: firstRows, allRowsMs: allRows,
    idleCpuPercentOfOneCore: idle, writingCpuPercentOfOneCore: writing, rowsAfter: rows }));
} finally {
  await h.close();
}
