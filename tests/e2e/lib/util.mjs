// Small helpers every e2e file uses.

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** JSON for assertion messages, cut so a failure stays readable. */
export const show = (v) => {
  const s = JSON.stringify(v);
  return s && s.length > 600 ? `${s.slice(0, 600)}…(${s.length} chars)` : s;
};

/** Polls `get` until `pred` holds or `timeout` ms pass; returns the last value either way, so the
 *  caller's assertion says what was seen. */
export async function until(get, pred, timeout = 3000) {
  const end = Date.now() + timeout;
  for (;;) {
    const v = await get();
    if (pred(v) || Date.now() > end) return v;
    await sleep(25);
  }
}
