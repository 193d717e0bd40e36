import { createRequire } from 'node:module';
const require = createRequire(import.meta.url);
const m = require('./pkg/js_conversion.js');
// A storage read of 1,000 scripts as the store keeps them (record + source per script).
function store(n) {
  const out = {};
  for (let i = 0; i < n; i++) {
    const uuid = `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;
    out[`script/${uuid}`] = {
      uuid, revision: 3, enabled: i % 3 !== 0, createdBy: 'mobcibglkcoacmddjpdoknlbbicjchlk', updatedBy: 'user',
      createdAt: 1700000000000 + i, updatedAt: 1700000100000 + i,
      metadata: { name: `Script ${i} — demo`, namespace: 'https://example.com/', version: '1.2.3',
        description: 'Hides the cookie banner and tidies the page layout a little.',
        matches: ['https://*.example.com/*', `https://site${i}.test/*`], excludeMatches: [],
        includes: [], excludes: ['*://*/admin*'], runAt: 'document-idle', grants: ['none'], noframes: false },
    };
    out[`source/${uuid}`] = `// ==UserScript==\n// @name Script ${i}\n// @match https://*.example.com/*\n// ==/UserScript==\n` + 'document.querySelectorAll(".banner").forEach(e => e.remove());\n'.repeat(20);
  }
  return out;
}
const data = store(1000);
const bytes = JSON.stringify(data).length;
function time(label, f, reps = 30) {
  for (let i = 0; i < 5; i++) f();
  const t = [];
  for (let i = 0; i < reps; i++) { const s = performance.now(); f(); t.push(performance.now() - s); }
  t.sort((a, b) => a - b);
  console.log(`${label}: median ${t[reps >> 1].toFixed(2)} ms (min ${t[0].toFixed(2)})`);
}
console.log(`storage read of 1,000 scripts: ${(bytes / 1024 / 1024).toFixed(2)} MiB of JSON`);
time('JS -> Value, JSON text (current)', () => m.json_from(data));
time('JS -> Value, serde-wasm-bindgen ', () => m.swb_from(data));
m.json_from(data);
time('Value -> JS, JSON text (current)', () => m.json_to());
time('Value -> JS, serde-wasm-bindgen ', () => m.swb_to());
// The list the options page gets (summaries only).
const list = { ok: true, scripts: Object.entries(data).filter(([k]) => k.startsWith('script/')).map(([, v]) => v), problems: [] };
console.log(`scripts.list reply of 1,000 summaries: ${(JSON.stringify(list).length / 1024).toFixed(0)} KiB`);
m.json_from(list);
time('list Value -> JS, JSON text (current)', () => m.json_to());
time('list Value -> JS, serde-wasm-bindgen ', () => m.swb_to());
