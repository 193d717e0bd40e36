#!/usr/bin/env node
// Where the wasm's bytes go, without installing twiggy: reads the code section and the name
// section of the unoptimised module (target/bindgen/lumo_userscripts_bg.wasm keeps its names;
// the shipped _opt.wasm has none) and prints the largest functions, or sizes grouped by a regex.
//   node scripts/wasm-size.mjs [file] top [N]
//   node scripts/wasm-size.mjs [file] group [regex with one capture group]
import { readFileSync } from "node:fs";

const [file = "target/bindgen/lumo_userscripts_bg.wasm", mode = "top", arg] = process.argv.slice(2);
const b = readFileSync(file);
let i = 8;
const leb = () => { let r = 0, s = 0, x; do { x = b[i++]; r += (x & 0x7f) * 2 ** s; s += 7; } while (x & 0x80); return r; };
const sections = [], sizes = [], names = new Map();
let imported = 0;
while (i < b.length) {
  const id = b[i++], len = leb(), end = i + len;
  let label = ["custom", "type", "import", "function", "table", "memory", "global", "export", "start", "element", "code", "data", "datacount"][id];
  if (id === 2) { // count imported functions: they come first in the function index space
    for (let n = leb(); n > 0; n--) {
      for (let k = 0; k < 2; k++) { const l = leb(); i += l; } // module and field names
      const kind = b[i++];
      if (kind === 0) { leb(); imported++; }
      else if (kind === 1) { i++; if (b[i++] & 1) { leb(); } leb(); }
      else if (kind === 2) { if (b[i++] & 1) { leb(); } leb(); }
      else if (kind === 3) i += 2;
      else { i++; leb(); } // a tag
    }
  } else if (id === 10) {
    for (let n = leb(); n > 0; n--) { const l = leb(); sizes.push(l); i += l; }
  } else if (id === 0) {
    const nl = leb(); label = `custom "${b.subarray(i, i + nl)}"`; const name = String(b.subarray(i, i + nl)); i += nl;
    while (name === "name" && i < end) {
      const sub = b[i++], sl = leb(), se = i + sl;
      if (sub === 1) for (let n = leb(); n > 0; n--) { const idx = leb(), l = leb(); names.set(idx, String(b.subarray(i, i + l))); i += l; }
      i = se;
    }
  }
  sections.push([label, len]);
  i = end;
}
const rows = sizes.map((s, k) => [s, names.get(k + imported) ?? `func ${k + imported}`]).sort((a, c) => c[0] - a[0]);
console.log("sections:", sections.map(([l, n]) => `${l} ${n}`).join(", "));
if (mode === "group") {
  const re = new RegExp(arg ?? "^<?([a-z_0-9]+(?:\\[[0-9a-f]+\\])?::[a-z_0-9]+)");
  const g = new Map();
  for (const [s, n] of rows) { const m = n.match(re); const k = m ? m[1] ?? m[0] : "(other)"; g.set(k, (g.get(k) ?? 0) + s); }
  for (const [k, v] of [...g].sort((a, c) => c[1] - a[1]).slice(0, 60)) console.log(String(v).padStart(8), k);
} else {
  for (const [s, n] of rows.slice(0, Number(arg ?? 40))) console.log(String(s).padStart(8), n.slice(0, 180));
}
console.log(`${sizes.length} functions, ${sizes.reduce((a, c) => a + c, 0)} bytes of code`);
