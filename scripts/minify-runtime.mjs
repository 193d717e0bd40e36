#!/usr/bin/env node
// Writes src/scripts/runtime.min.js, the registered form of src/scripts/runtime.js (read that
// file's header), with the project's esbuild. `--check`: fails instead when it is not current
// (scripts/test.sh runs that).
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { transformSync } from "esbuild";

const dir = join(dirname(fileURLToPath(import.meta.url)), "../src/scripts");
const { code } = transformSync(readFileSync(join(dir, "runtime.js"), "utf8"), { minify: true, charset: "utf8" });
const out = code.trimEnd();
// The call's arguments are put in by scripts/prelude.rs, at the end, unchanged by the minifier.
if (!out.startsWith("const __lumoWorld=(") || !out.endsWith("})(__ARGS__);") || out.includes("\n")) {
  console.error(`minify-runtime: unexpected shape: ${out.slice(0, 40)}…${out.slice(-40)}`);
  process.exit(1);
}
const file = join(dir, "runtime.min.js");
if (process.argv.includes("--check")) {
  if (readFileSync(file, "utf8") !== out) {
    console.error("src/scripts/runtime.min.js is not src/scripts/runtime.js minified: run node scripts/minify-runtime.mjs");
    process.exit(1);
  }
} else {
  writeFileSync(file, out);
}
