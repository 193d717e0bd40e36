// The provider's .wasm read by function: a copy that keeps its names (`namedWasm`), and its
// sections and function bodies with their names (`readWasm`). Used by `make profile` (V8's samples
// name our functions; its split by part is `partOf`), `make bench` (where the bytes are) and
// scripts/wasm-size.mjs.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "../../tests/e2e/lib/harness.mjs";

/**
 * Writes to `out` the module scripts/build.sh ships, optimised the same way (`wasm-opt -Oz` of
 * wasm-bindgen's output) but keeping the name section (`-g`): its code and data sections are
 * those of dist/ byte for byte. ~20 s.
 */
export function namedWasm(out) {
  execFileSync(join(REPO_ROOT, "node_modules/.bin/wasm-opt"), [
    "-Oz", "-g", "--strip-dwarf", "--strip-producers",
    "--enable-bulk-memory", "--enable-nontrapping-float-to-int", "--enable-sign-ext",
    "--enable-mutable-globals", "--enable-reference-types", "--enable-multivalue",
    join(REPO_ROOT, "target/bindgen/lumo_userscripts_bg.wasm"), "-o", out,
  ]);
  return out;
}

/**
 * A module's sections ([label, bytes, offset]), and its functions ({ name, start, end } over `bytes`: the
 * body's bytes, named from the name section when it has one).
 */
export function readWasm(file) {
  const b = readFileSync(file);
  let i = 8;
  const leb = () => { let r = 0, s = 0, x; do { x = b[i++]; r += (x & 0x7f) * 2 ** s; s += 7; } while (x & 0x80); return r; };
  const sections = [], bodies = [], names = new Map();
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
      for (let n = leb(); n > 0; n--) { const l = leb(); bodies.push([i, i + l]); i += l; }
    } else if (id === 0) {
      const nl = leb(); const name = String(b.subarray(i, i + nl)); label = `custom "${name}"`; i += nl;
      while (name === "name" && i < end) {
        const sub = b[i++], sl = leb(), se = i + sl;
        if (sub === 1) for (let n = leb(); n > 0; n--) { const idx = leb(), l = leb(); names.set(idx, String(b.subarray(i, i + l))); i += l; }
        i = se;
      }
    }
    sections.push([label, len, end - len]);
    i = end;
  }
  const functions = bodies.map(([start, end], k) => ({ name: names.get(k + imported) ?? `func ${k + imported}`, start, end }));
  return { bytes: b, sections, functions };
}

/** Our module (`lumo: tools`) or the crate a function's code is from; generic instances count where their code is. */
export function partOf(name) {
  if (/^func \d+$/.test(name)) return "(unnamed)";
  let path = name;
  for (let p; (p = path.replace(/^(<|&|\(|\[|mut |dyn |const )/, "")) !== path;) path = p;
  const m = path.match(/^([A-Za-z_][A-Za-z0-9_]*)(?:\[[0-9a-f]+\])?::([a-z_0-9]+)?/);
  const crate = m?.[1]; // none: an impl on a primitive or a slice (`<str>::…`, `<f64 as …>`)
  if (crate === "lumo_userscripts") return `lumo: ${m[2] ?? "(the crate root)"}`;
  if (/^(serde|serde_core|serde_json|zmij|itoa|ryu)$/.test(crate)) return "serde, serde_json";
  if (!crate || /^(core|alloc|std|compiler_builtins|__rustc)$/.test(crate)) return "core, alloc (generic instances, fmt, sort)";
  if (/^(wasm_bindgen|js_sys|web_sys|wasm_bindgen_futures|gloo_timers)$/.test(crate)) return "wasm-bindgen, js-sys, web-sys";
  return crate;
}

/** A section's bytes (`code`, `data`…), for comparing two builds. */
export function section({ bytes, sections }, label) {
  const s = sections.find(([l]) => l === label);
  return s ? bytes.subarray(s[2], s[2] + s[1]) : null;
}

/**
 * Where a named module's bytes are: code by part (`partOf`), each with its raw size and the gzip
 * size of its function bodies alone (they do not add up to the whole's gzip exactly), then data.
 * `same` says whether its code and data are byte for byte those of `shipped` (a module without names).
 */
export function sizeByPart(file, gzip, shipped) {
  const named = readWasm(file);
  const parts = new Map();
  for (const f of named.functions) {
    const k = partOf(f.name);
    (parts.get(k) ?? parts.set(k, []).get(k)).push(named.bytes.subarray(f.start, f.end));
  }
  const rows = [...parts].map(([part, bodies]) => ({ part, raw: bodies.reduce((n, b) => n + b.length, 0), gzip: gzip(Buffer.concat(bodies)) }));
  rows.sort((a, b) => b.raw - a.raw);
  const other = shipped ? readWasm(shipped) : null;
  const same = other !== null && ["code", "data"].every((l) => section(named, l)?.equals(section(other, l)));
  return { code: section(named, "code").length, data: section(named, "data")?.length ?? 0, dataGzip: gzip(section(named, "data") ?? Buffer.alloc(0)), rows, same };
}
