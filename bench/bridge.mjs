#!/usr/bin/env node
// The bridge round trip beside the port round trip (`make bench` runs it after bench/gm-values.mjs;
// not a test). Reported, no goal.
//
// One headless Chromium with the provider (dist/) and the e2e test host; one real `lumo-bridge`
// (target/bridge/lumo-bridge, built here if missing) launched by the official MCP TypeScript SDK's
// stdio client, as Claude Code would; the extension connected to it the user's way (the connect
// link from bridge_status, a click on Connect). Then, interleaved round by round:
//   port:   the host page's lumo:mcp port (bench/lib/inpage.js, timed in the page): ping,
//           tools/call status, tools/call list_scripts;
//   bridge: the SDK client in Node (timed in Node): tools/call status and list_scripts, which the
//           bridge forwards over its WebSocket to the extension's tool walk;
//   floor:  what the bridge answers without the extension: tools/call bridge_status and MCP ping
//           (rmcp answers ping itself; it never reaches the browser).
// Prints medians, p95, bridge/port ratios and the bridge hop (bridge − port), and writes
// bench/out/bridge-<timestamp>.json and bench/out/bridge-latest.json.
//   BENCH_NO_BUILD=1      use target/bridge/lumo-bridge as it is (built only when missing)
//   LUMO_BRIDGE_BIN=path  measure another bridge binary
//   BENCH_QUICK=1         smoke run with tiny sample counts; bridge-latest.json left alone
//   BENCH_BRIDGE_N=<rounds> (default 300)
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { HOST_ID, PROVIDER_ID, REPO_ROOT } from "../tests/e2e/lib/harness.mjs";
import { freePorts } from "../tests/lib/ports.mjs";
import { launch } from "./lib/browser.mjs";
import { OUT_DIR, prepareExtensions } from "./lib/extensions.mjs";
import { approveHostAndAllowScripts } from "./lib/provider.mjs";
import { ms, summary, table, times } from "./lib/stats.mjs";

const P = PROVIDER_ID;
const QUICK = Boolean(process.env.BENCH_QUICK);
const N = QUICK ? 20 : Math.max(1, Number(process.env.BENCH_BRIDGE_N ?? 300));
const WARMUP = QUICK ? 5 : 30;
const SCRIPTS = 10; // stored before measuring, so list_scripts carries a real page (~10 items)
const INPAGE = readFileSync(new URL("./lib/inpage.js", import.meta.url), "utf8");
const log = (...a) => console.error("bench/bridge:", ...a);
const sleep = (t) => new Promise((r) => setTimeout(r, t));

/** The bridge binary: LUMO_BRIDGE_BIN, else the bridge profile's build (cargo is a no-op when fresh). */
function bridgeBinary() {
  if (process.env.LUMO_BRIDGE_BIN) return process.env.LUMO_BRIDGE_BIN;
  const bin = join(REPO_ROOT, "target/bridge/lumo-bridge");
  if (!process.env.BENCH_NO_BUILD || !existsSync(bin)) {
    log("building the bridge (cargo build --profile bridge -p lumo-bridge)");
    execFileSync("cargo", ["build", "--quiet", "--profile", "bridge", "-p", "lumo-bridge"], { cwd: REPO_ROOT, stdio: "inherit" });
  }
  return bin;
}

async function until(pred, what, timeout = 15_000) {
  const end = Date.now() + timeout;
  while (!(await pred())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** A small userscript of about 1 KiB; list_scripts returns its metadata, not its source. */
const userscript = (i) => [
  "// ==UserScript==", `// @name Bench bridge ${i}`, "// @namespace https://bench.lumo.invalid/",
  "// @version 1.0.0", "// @description A bench fixture for list_scripts through the bridge.",
  "// @match https://*.example.org/articles/*", "// @grant none", "// ==/UserScript==",
  ...Array.from({ length: 20 }, (_, k) => `document.querySelectorAll('[data-b-${i}-${k}]').forEach((e) => e.remove());`), "",
].join("\n");

// ---------------------------------------------------------------- set-up

const bin = bridgeBinary();
if (!existsSync(bin)) throw new Error(`no bridge binary at ${bin}`);
const state = mkdtempSync(join(tmpdir(), "lumo-bench-bridge-"));
const load = { before: loadavg() };
const ext = await prepareExtensions();
const browser = await launch([ext.provider, ext.host]);
const [extPort, controlPort] = await freePorts(2);
const transport = new StdioClientTransport({
  command: bin,
  args: ["--port", String(extPort), "--control-port", String(controlPort), "--state-dir", state,
    "--token", randomBytes(24).toString("hex")],
  stderr: "pipe",
});
let bridgeLog = "";
transport.stderr?.on("data", (d) => { bridgeLog += d; });
const client = new Client({ name: "lumo-bench", version: "0" });
const results = {
  meta: { date: new Date().toISOString(), node: process.version, cpus: cpus().length, cpuModel: cpus()[0]?.model, rounds: N, quick: QUICK, bridge: bin },
};
try {
  await client.connect(transport);
  // No listTools: the SDK would then validate every structuredContent against the tool's output
  // schema in Node, a client cost that the port side does not pay.
  const tool = async (name) => {
    const r = await client.callTool({ name, arguments: {} });
    if (r.isError) throw new Error(`${name} through the bridge: ${JSON.stringify(r.content)}`);
    return r;
  };
  const { connectLink } = (await tool("bridge_status")).structuredContent;
  if (!connectLink?.startsWith(`chrome-extension://${P}/connect.html?`)) throw new Error(`unexpected connect link ${connectLink}`);

  const host = await browser.page(`chrome-extension://${HOST_ID}/host.html`);
  await host.eval(`() => {${INPAGE}}`);
  if (!(await host.eval(() => crossOriginIsolated))) log("warning: the host page is not cross-origin isolated; the clock has 100 µs steps");
  await approveHostAndAllowScripts(browser);

  // The user's way: the connect link, the tools shown, a click on Connect. The page polls the
  // worker every 500 ms, so it is closed before any sample.
  const connect = await browser.page(connectLink);
  await until(() => connect.eval(() => document.querySelectorAll("#tools li").length > 0), "the connect page's tool list");
  await connect.eval(() => document.getElementById("connect").click());
  await until(() => connect.eval(() => document.getElementById("state").dataset.state === "connected"), "the connect page to say connected");
  await until(async () => (await tool("bridge_status")).structuredContent.connected === true, "the bridge to see the extension");
  await connect.close();

  await host.eval((id) => bench.open(id), P);
  for (let i = 0; i < SCRIPTS; i++) {
    await host.eval((c) => bench.call(c), { id: P, method: "tools/call", params: { name: "write_script", arguments: { source: userscript(i) } } });
  }
  const listed = (await tool("list_scripts")).structuredContent;
  const portListed = (await host.eval((c) => bench.call(c), { id: P, method: "tools/call", params: { name: "list_scripts", arguments: {} } })).result.structuredContent;
  // Both paths must reach the same tool walk: the same page of the scripts just written.
  if (listed?.scripts?.length !== SCRIPTS) throw new Error(`list_scripts through the bridge: ${JSON.stringify(listed)}`);
  if (JSON.stringify(listed) !== JSON.stringify(portListed)) throw new Error("list_scripts differs between the bridge and the port");
  results.meta.listed = listed.scripts.length;
  results.meta.listBytes = JSON.stringify(listed).length;

  // ------------------------------------------------------------ the interleaved rounds
  const portCalls = [
    { id: P, method: "ping" },
    { id: P, method: "tools/call", params: { name: "status", arguments: {} } },
    { id: P, method: "tools/call", params: { name: "list_scripts", arguments: {} } },
  ];
  const timed = async (f) => { const t0 = performance.now(); await f(); return performance.now() - t0; };
  const stdioCalls = {
    ping: () => client.ping(),
    bridge_status: () => tool("bridge_status"),
    status: () => tool("status"),
    list_scripts: () => tool("list_scripts"),
  };
  const s = { port: { ping: [], status: [], list_scripts: [] }, bridge: { ping: [], bridge_status: [], status: [], list_scripts: [] } };
  const round = async (i, keep) => {
    const port = async () => {
      const [ping, status, list] = await host.eval((c) => bench.rounds(c, 1), portCalls);
      if (keep) { s.port.ping.push(ping[0]); s.port.status.push(status[0]); s.port.list_scripts.push(list[0]); }
    };
    const bridge = async () => {
      for (const [name, f] of Object.entries(stdioCalls)) {
        const t = await timed(f);
        if (keep) s.bridge[name].push(t);
      }
    };
    // Alternate which side goes first, so neither always runs right after the other.
    if (i % 2) { await port(); await bridge(); } else { await bridge(); await port(); }
  };
  log(`warm-up (${WARMUP} rounds), then ${N} rounds`);
  for (let i = 0; i < WARMUP; i++) await round(i, false);
  for (let i = 0; i < N; i++) await round(i, true);
  const linkUp = (await tool("bridge_status")).structuredContent.connected;
  if (linkUp !== true) throw new Error("the link to the extension dropped during the run");
  results.samples = s;
} catch (e) {
  e.message += `\nthe bridge's stderr:\n${bridgeLog}`;
  throw e;
} finally {
  load.after = loadavg();
  await client.close().catch(() => {});
  await browser.close();
  rmSync(state, { recursive: true, force: true });
}

// ---------------------------------------------------------------- report

const S = results.samples;
const sum = (xs) => summary(xs);
// The hop per round: bridge minus port of the same round (interleaved, so paired).
const paired = (a, b) => a.map((x, i) => x - b[i]);
const rows = [];
const summaries = {};
const row = (label, xs, key) => { const v = sum(xs); summaries[key] = v; rows.push([label, ms(v.median), ms(v.p95), ms(v.min), String(v.n)]); };
row("port: ping (answered by the worker)", S.port.ping, "port.ping");
row("port: tools/call status", S.port.status, "port.status");
row("port: tools/call list_scripts", S.port.list_scripts, "port.list_scripts");
row("bridge: tools/call status (stdio → bridge → extension)", S.bridge.status, "bridge.status");
row("bridge: tools/call list_scripts", S.bridge.list_scripts, "bridge.list_scripts");
row("bridge only: tools/call bridge_status (no extension)", S.bridge.bridge_status, "bridge.bridge_status");
row("bridge only: MCP ping (rmcp answers it)", S.bridge.ping, "bridge.ping");

const derived = {};
const hop = (name) => {
  const b = summaries[`bridge.${name}`], p = summaries[`port.${name}`];
  const pairs = sum(paired(S.bridge[name], S.port[name]));
  // What the bridge adds beyond its own floor (stdio + SDK + rmcp): the WebSocket leg to the
  // extension and back, including the extension's work, next to the port's whole round trip.
  const wsLeg = sum(paired(S.bridge[name], S.bridge.bridge_status));
  derived[name] = { ratio: b.median / p.median, hopOfMedians: b.median - p.median, hopPaired: { median: pairs.median, p95: pairs.p95 }, webSocketLeg: { median: wsLeg.median, p95: wsLeg.p95 } };
  return [name, times(derived[name].ratio), ms(b.median - p.median), ms(pairs.median), ms(pairs.p95), ms(wsLeg.median), ms(p.median)];
};
results.summaries = summaries;
const hops = [hop("status"), hop("list_scripts")];
results.derived = derived;
results.load = load;

console.log(`\nBridge round trip beside the port round trip — reported, no goal (issue 17). ${N} interleaved rounds; ` +
  `list_scripts returns ${results.meta.listed} scripts (${(results.meta.listBytes / 1024).toFixed(1)} KiB of structuredContent).`);
console.log(table(["round trip (ms)", "median", "p95", "min", "n"], rows));
console.log("\n" + table(
  ["tool", "bridge/port", "hop (Δ medians)", "hop (paired median)", "hop p95 (paired)", "bridge − bridge_status", "port round trip"],
  hops));
console.log("hop = the bridge round trip minus the port round trip of the same round: the stdio pipe, the SDK client in Node,\n" +
  "rmcp, the bridge's WebSocket to the worker and back. \"bridge − bridge_status\": the WebSocket leg including the extension's\n" +
  "work, beside the port's whole round trip.");
const fmtLoad = (l) => l.map((x) => x.toFixed(2)).join(" / ");
console.log(`Machine load (1/5/15 min) before ${fmtLoad(load.before)}, after ${fmtLoad(load.after)} on ${results.meta.cpus} cores.`);

mkdirSync(OUT_DIR, { recursive: true });
const json = JSON.stringify(results, null, 1);
const file = join(OUT_DIR, `bridge-${results.meta.date.replace(/[:.]/g, "-")}${QUICK ? "-quick" : ""}.json`);
writeFileSync(file, json);
if (!QUICK) writeFileSync(join(OUT_DIR, "bridge-latest.json"), json);
console.log(`Wrote ${file}${QUICK ? " (a smoke run: bridge-latest.json left alone)" : " and bench/out/bridge-latest.json"}`);
