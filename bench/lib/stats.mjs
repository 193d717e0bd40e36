// Summaries and the printed tables.

/** {n, median, p95, min, max} of a list of milliseconds (nearest-rank percentiles). */
export function summary(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const at = (q) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
  return { n: s.length, median: at(0.5), p95: at(0.95), min: s[0], max: s[s.length - 1] };
}

/** The mean of a list, or null for an empty one. */
export const mean = (xs) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null);

export const ms = (x) => (x === null || x === undefined || Number.isNaN(x) ? "—" : x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
export const ratio = (a, b) => (a && b ? a / b : null);
export const times = (r) => (r === null ? "—" : `${r.toFixed(2)}×`);
export const kib = (bytes) => (bytes === null || bytes === undefined ? "—" : `${(bytes / 1024).toFixed(1)} KiB`);

/** Left-aligned first column, right-aligned others. rows: arrays of strings. */
export function table(header, rows) {
  const all = [header, ...rows];
  const w = header.map((_, i) => Math.max(...all.map((r) => String(r[i] ?? "").length)));
  const line = (r) => r.map((c, i) => (i === 0 ? String(c ?? "").padEnd(w[i]) : String(c ?? "").padStart(w[i]))).join("  ");
  return [line(header), w.map((n) => "-".repeat(n)).join("  "), ...rows.map(line)].join("\n");
}
