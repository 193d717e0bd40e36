#!/usr/bin/env node
// Where the wasm's bytes go, without installing twiggy: reads the code section and the name
// section of a module that keeps its names (target/bindgen/lumo_userscripts_bg.wasm, unoptimised,
// or the `-Oz -g` copy `make bench` and `make profile` write under bench/out/; the shipped
// _opt.wasm has none) and prints the largest functions, or sizes grouped by a regex.
//   node scripts/wasm-size.mjs [file] top [N]
//   node scripts/wasm-size.mjs [file] group [regex with one capture group]
import { readWasm } from "../bench/lib/wasm.mjs";

const [file = "target/bindgen/lumo_userscripts_bg.wasm", mode = "top", arg] = process.argv.slice(2);
const { sections, functions } = readWasm(file);
const rows = functions.map((f) => [f.end - f.start, f.name]).sort((a, c) => c[0] - a[0]);
console.log("sections:", sections.map(([l, n]) => `${l} ${n}`).join(", "));
if (mode === "group") {
  const re = new RegExp(arg ?? "^<?([a-z_0-9]+(?:\\[[0-9a-f]+\\])?::[a-z_0-9]+)");
  const g = new Map();
  for (const [s, n] of rows) { const m = n.match(re); const k = m ? m[1] ?? m[0] : "(other)"; g.set(k, (g.get(k) ?? 0) + s); }
  for (const [k, v] of [...g].sort((a, c) => c[1] - a[1]).slice(0, 60)) console.log(String(v).padStart(8), k);
} else {
  for (const [s, n] of rows.slice(0, Number(arg ?? 40))) console.log(String(s).padStart(8), n.slice(0, 180));
}
console.log(`${rows.length} functions, ${rows.reduce((a, c) => a + c[0], 0)} bytes of code`);
