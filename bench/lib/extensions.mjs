// The unpacked extensions a bench run loads: the provider (dist/), the baseline provider
// (bench/baseline + keys/baseline.pub.b64), the e2e test host, and "timed" copies of the two
// providers used only for the cold-start breakdown. Everything generated goes to bench/out/ext/.
import { cpSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { DIST_DIR, REPO_ROOT, buildExtensions, extensionIdFromKey } from "../../tests/e2e/lib/harness.mjs";

const BENCH_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const OUT_DIR = join(BENCH_DIR, "out");
const EXT_DIR = join(OUT_DIR, "ext");

const baselineKey = readFileSync(join(REPO_ROOT, "keys/baseline.pub.b64"), "utf8").trim();
export const BASELINE_ID = extensionIdFromKey(baselineKey);

const readManifest = (dir) => JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8"));
const writeManifest = (dir, m) => writeFileSync(join(dir, "manifest.json"), JSON.stringify(m, null, 2));

// Cross-origin isolation gives performance.now() 5 µs resolution instead of 100 µs.
const ISOLATED = { cross_origin_embedder_policy: { value: "require-corp" }, cross_origin_opener_policy: { value: "same-origin" } };

function copy(src, name) {
  const out = join(EXT_DIR, name);
  rmSync(out, { recursive: true, force: true });
  cpSync(src, out, { recursive: true });
  return out;
}

/**
 * A copy whose worker entry first imports timed-start.js (marks: script start, wasm compile,
 * instantiate, storage reads, reply) and any `extras` of bench/lib (e.g. timed-try.js), then the
 * real worker script, then marks the end of its top level ("listeners ready" unless the loader
 * marks it later: timed-start.js).
 * Module evaluation order guarantees timed-start.js runs before any of the real code.
 */
export function timedCopy(src, name, extras = []) {
  const out = copy(src, name);
  const m = readManifest(out);
  const entry = m.background.service_worker;
  cpSync(join(BENCH_DIR, "lib/timed-start.js"), join(out, "bench-timed-start.js"));
  for (const x of extras) cpSync(join(BENCH_DIR, "lib", x), join(out, `bench-${x}`));
  const imports = ["timed-start.js", ...extras].map((x) => `import "./bench-${x}";\n`).join("");
  writeFileSync(join(out, "bench-sw.js"),
    `${imports}import "./${entry}";\nglobalThis.__benchMarks.scriptEnd = performance.now();\n`);
  writeManifest(out, { ...m, background: { ...m.background, service_worker: "bench-sw.js", type: "module" } });
  return out;
}

/** Paths of {provider, baseline, host, providerTimed, baselineTimed}. */
export async function prepareExtensions() {
  const baseline = copy(join(BENCH_DIR, "baseline"), "baseline");
  writeManifest(baseline, { ...readManifest(baseline), key: baselineKey });
  // The e2e test host (same key, so same id), made cross-origin isolated for the clock.
  const host = copy((await buildExtensions()).host, "host");
  writeManifest(host, { ...readManifest(host), ...ISOLATED });
  return {
    provider: DIST_DIR,
    baseline,
    host,
    providerTimed: timedCopy(DIST_DIR, "provider-timed"),
    baselineTimed: timedCopy(baseline, "baseline-timed"),
  };
}
