#!/usr/bin/env node
// Page-load cost of a GM script that carries its values (`make bench` runs it after
// bench/try.mjs; not a test): the same document-start script, once with 200 KB of values
// (GM_getValue answers synchronously because the values ride in the registered code), once
// with @grant none. Loads are interleaved; medians and their ratio are printed, "reported"
// (there is no goal: the issue asks to measure what carrying values costs).
//   BENCH_GM_N=<loads per script> (default 15)
import { createServer } from "node:http";
import { HOST_ID, PROVIDER_ID, launch } from "../tests/e2e/lib/harness.mjs";

const N = Math.max(1, Number(process.env.BENCH_GM_N ?? 15));
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const script = (name, lines, body) => ["// ==UserScript==", `// @name Bench GM ${name}`, "// @namespace lumo-bench",
  ...lines.map((l) => `// ${l}`), "// ==/UserScript==", body, ""].join("\n");
// The script stamps when it started, after navigation (performance.now() of the document).
const stamp = "document.documentElement.setAttribute('data-t', String(performance.now()));";

const server = createServer((req, res) => { res.writeHead(200, { "content-type": "text/html" }); res.end("<!doctype html><title>Bench</title><p>a</p>"); });
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const url = (host) => `http://${host}:${server.address().port}/`;
const h = await launch();
try {
  await h.internal("policy.approve", { id: HOST_ID });
  await h.setUserScriptsAccess(PROVIDER_ID, true);
  const session = await h.lumo("connect", PROVIDER_ID);
  const write = async (src) => {
    const r = await h.lumo("callTool", session, "write_script", { source: src });
    if (r?.error || r.isError) throw new Error(`write_script: ${JSON.stringify(r)}`);
    return r.structuredContent.script.uuid;
  };
  const heavy = await write(script("heavy", ["@match http://heavy.test/*", "@grant GM_setValue", "@grant GM_getValue", "@run-at document-start"],
    "if (!GM_getValue('k0')) for (let i = 0; i < 20; i++) GM_setValue('k' + i, 'x'.repeat(10000));\n" + stamp));
  await write(script("light", ["@match http://light.test/*", "@grant none", "@run-at document-start"], stamp));
  const tab = await h.context.newPage();
  const page = await h.providerPage();
  const code = async () => page.evaluate(async (id) => (await chrome.userScripts.getScripts({ ids: [id] }))[0]?.js?.[0]?.code ?? "", heavy);
  // The first load stores the values; the registration then carries them.
  await tab.goto(url("heavy.test"), { waitUntil: "load" });
  for (const deadline = Date.now() + 10_000; !(await code()).includes('"k19"');) {
    if (Date.now() > deadline) throw new Error("the values never reached the registered code");
    await sleep(100);
  }
  const once = async (host) => {
    const t0 = Date.now();
    await tab.goto(url(host), { waitUntil: "load" });
    const wall = Date.now() - t0;
    for (let i = 0; i < 50; i++) {
      const t = await tab.evaluate(() => document.documentElement.getAttribute("data-t"));
      if (t) return [Number(t), wall];
      await sleep(20);
    }
    throw new Error(`the script did not run on ${host}`);
  };
  for (let i = 0; i < 2; i++) { await once("heavy.test"); await once("light.test"); } // warm-up
  const hs = [], ls = [], hw = [], lw = [];
  for (let i = 0; i < N; i++) {
    const [a, b] = await once("heavy.test"); hs.push(a); hw.push(b);
    const [c, d] = await once("light.test"); ls.push(c); lw.push(d);
  }
  const size = (await code()).length;
  console.log(`GM values page-load cost: registered code ${size} chars (200 KB of values), n=${N} loads each, interleaved`);
  console.log(`  script start after navigation: median ${median(hs).toFixed(1)} ms with values vs ${median(ls).toFixed(1)} ms @grant none`);
  console.log(`  page load (goto → load): median ${median(hw)} ms with values vs ${median(lw)} ms @grant none`);
  console.log(`ratio (script start, values / @grant none, medians): ${(median(hs) / median(ls)).toFixed(2)}× — reported (no goal)`);
} finally {
  await h.close();
  server.close();
  server.closeAllConnections();
}
