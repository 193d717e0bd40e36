// A timed copy's record of one tools/call (lib/timed-start.js + lib/timed-try.js): the worker's
// browser calls from the message in to the reply out, for bench/try.mjs and write-timeline.mjs.

/**
 * The calls made during the tools/call `rpcId`, each as {api, gap, start, dur} (+ `entries` and
 * `bytes` of an execute): `gap` is the time before it with no browser call pending (the worker's
 * own), `start` from the message in. `own` sums those gaps and the `tail` before the reply.
 * `null` when the marks do not hold the call.
 */
export function timeline(marks, rpcId) {
  const got = marks.ports.find((p) => p.dir === "in" && p.id === rpcId && p.method === "tools/call");
  const out = marks.ports.find((p) => p.dir === "out" && p.id === rpcId);
  if (!got || !out) return null;
  // A userScripts method wrapped by both timed files is recorded twice: once is enough.
  const seen = new Set();
  const calls = marks.calls
    .filter((c) => c.start >= got.t && c.start <= out.t)
    .filter((c) => { const k = `${c.api}@${c.start}`; return !seen.has(k) && seen.add(k); })
    .sort((a, b) => a.start - b.start);
  let at = got.t; // the end of the latest call so far
  let gaps = 0;
  const steps = calls.map((c) => {
    const end = c.end ?? out.t;
    const gap = Math.max(0, c.start - at);
    gaps += gap;
    at = Math.max(at, end);
    return { api: c.api, gap, start: c.start - got.t, dur: end - c.start, entries: c.entries, bytes: c.bytes };
  });
  const tail = Math.max(0, out.t - at);
  return { span: out.t - got.t, steps, tail, own: gaps + tail };
}
