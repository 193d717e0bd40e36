#!/usr/bin/env node
// Runs the e2e tests serially, from any working directory.
//   node tests/e2e/run.mjs                     all *.test.mjs files
//   node tests/e2e/run.mjs probe               only probe.test.mjs
//   node tests/e2e/run.mjs probe --test-name-pattern=timeout
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const dir = dirname(fileURLToPath(import.meta.url));
const flags = process.argv.slice(2).filter((a) => a.startsWith("-"));
const names = process.argv.slice(2).filter((a) => !a.startsWith("-"));
const all = readdirSync(dir).filter((f) => f.endsWith(".test.mjs")).sort();
const files = names.length ? names.map((n) => (n.endsWith(".test.mjs") ? n : `${n}.test.mjs`)) : all;
for (const f of files) if (!all.includes(f)) throw new Error(`No such test file: ${f} (have ${all.join(", ")})`);

const { status } = spawnSync(process.execPath, ["--test", "--test-concurrency=1", ...flags, ...files.map((f) => join(dir, f))], { stdio: "inherit" });
process.exit(status ?? 1);
