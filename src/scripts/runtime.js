// The runtime entry of every registered script (js[0]), formatted to be read. Its minified form,
// `runtime.min.js` (esbuild --minify, `node scripts/minify-runtime.mjs`; `make test` checks it is
// current), is what scripts/prelude.rs registers: Chrome keeps every registration's code and
// rewrites all of it on each `userScripts.update`, whose time grows with the code registered
// (Chromium 156: 300 scripts of 6 KB each, 105 ms an update; of 11 KB, 170 to 185 ms), so every
// byte here is paid once per script stored on every write.
//
// It cannot be a file of the package shared by every registration ({file}): Chrome injects a
// file at most once per document, whatever world a second script asks for it in (measured in
// Chromium 156), so the second script on a page would have no runtime.
//
// `__ARGS__` is where prelude.rs puts the call's arguments: the token T, runAt RA, the lines
// before the source in its entry PL, the source's lines SL, the @require code's lines RQ (the
// last of those before the source), the uuid N, the channel version V,
// the console bounds MAXL/MAXT/MAXC (lines, characters a line, in all), MAXLATE late errors a
// page, the guard G (asked only to report a SyntaxError) and the values SNAP ([[key, JSON
// text], …] or null). The world's one global is `__lumoWorld`: scripts/prelude.rs says why.
//
// The script's source runs in this world after this entry and may replace built-ins or add to
// `Object.prototype` before it calls a GM function: a message holding the token is therefore an
// object literal with no prototype (no inherited setter sees `lumo` assigned, no inherited
// `toJSON` sees the message when Chrome serializes it), and `sendMessage` was bound above,
// before any script ran.
const __lumoWorld = ((T, RA, PL, SL, RQ, N, V, MAXL, MAXT, MAXC, MAXLATE, G, SNAP) => {
  let send = null;
  try {
    const r = globalThis.chrome && globalThis.chrome.runtime;
    if (r && typeof r.sendMessage === "function") send = r.sendMessage.bind(r);
  } catch (e) {
  }
  const C = globalThis.console, now = () => performance.now();
  const re = new RegExp("lumo-run-" + N + "\\.js:(\\d+):(\\d+)", "g");
  // A position in the @require code (the RQ lines just before the source; not the guard's or
  // the GM code's, before them) and none in the source: BEFORE. A reviewer's: a GM promise's
  // own rejection, with only GM frames, was blamed on a library the script did not have.
  const BEFORE = [0, 0];
  const pos = (stack) => {
    const s = String(stack || "");
    re.lastIndex = 0;
    let m, before = false;
    while (m = re.exec(s)) {
      const l = +m[1] - PL;
      if (l >= 1 && l <= SL) return [l, +m[2]];
      if (l < 1 && l > -RQ) before = true;
    }
    return before ? BEFORE : null;
  };
  const cut = (s, n) => s.length > n ? s.slice(0, n) + "\u2026" : s;
  // JSON shows a Map, a Set and a RegExp as {}: shown as try_script shows them instead, at most
  // 100 entries each; an array's and an object's first 100 entries likewise (R17: all were,
  // here); 500 entries cut in one line in all. A Map, or a long array or object, holding itself
  // is expanded until then: each expansion is a new object, which JSON's own cycle check does
  // not see, so the budget is what stops it (R18: without it, an object of 20,000 keys holding
  // itself took 6 s on the page's thread). An Error (JSON's {}) as "name: message", as the
  // console prints it; a number as itself (JSON's null for NaN). Taken before the script runs.
  const M = Map, ST = Set, RX = RegExp, ER = Error, isArray = Array.isArray, keys = Object.keys, bare = Object.create;
  const said = (e) => String(e.name) + ": " + String(e.message);
  const show = (a) => {
    if (typeof a === "string") return a;
    if (typeof a === "number") return String(a);
    let budget = 500;
    const tagged = (k, v) => {
      if (v instanceof RX) return String(v);
      if (v instanceof ER) return said(v);
      if (isArray(v)) {
        if (v.length <= 100) return v;
        if ((budget -= 100) < 0) return "[\u2026]";
        const first = [];
        for (let i = 0; i < 100; i++) first[i] = v[i];
        return first;
      }
      if (!(v instanceof M || v instanceof ST)) {
        if (v === null || typeof v !== "object") return v;
        const ks = keys(v);
        if (ks.length <= 100) return v;
        if ((budget -= 100) < 0) return "[\u2026]";
        // No prototype: a "__proto__" key is an entry like any other.
        const first = bare(null);
        for (let i = 0; i < 100; i++) first[ks[i]] = v[ks[i]];
        return first;
      }
      if (budget <= 0) return "[\u2026]";
      const out = [];
      for (const e of v) {
        if (out.length >= 100 || --budget < 0) break;
        out.push(e);
      }
      return { [v instanceof M ? "[Map]" : "[Set]"]: out };
    };
    try {
      if (a instanceof ER) return said(a);
      const j = JSON.stringify(a, tagged);
      if (typeof j === "string") return j;
    } catch (e) {
    }
    try {
      return String(a);
    } catch (e) {
      return "[unprintable]";
    }
  };
  const report = (r) => {
    try {
      if (send) {
        const p = send({ __proto__: null, lumo: T, v: V, kind: "run", runAt: RA, ms: r.ms, error: r.error, console: r.logs, consoleDropped: r.dropped });
        if (p && typeof p.catch === "function") p.catch(() => {
        });
      }
    } catch (e) {
    }
  };
  let started = false, ran = false, pending = null, lateSent = 0;
  const queue = [];
  const out = (m) => {
    try {
      if (send) {
        const q = send(m);
        if (q && typeof q.catch === "function") q.catch(() => {
        });
      }
    } catch (x) {
    }
  };
  const FILE = "lumo-run-" + N + ".js";
  const at = (f, l, c) => {
    if (f === FILE) {
      const x = l - PL;
      if (x >= 1 && x <= SL) return [x, c];
      if (x < 1 && x > -RQ) return BEFORE;
    }
    return null;
  };
  // An error's position as reported: its line and column in the source, or `req` when it is in
  // the code before the source.
  const placed = (p) => p === BEFORE ? { line: null, column: null, req: true } : { line: p ? p[0] : null, column: p ? p[1] : null };
  // What is reported of a thrown value or rejection reason: its line from `p`, else its stack;
  // `other` names a value that is not an error (a string, `{code: 5}`), shown as its text.
  const describe = (e, other, p) => {
    let name = "Error", message = "", stack = "";
    try {
      if (e && typeof e === "object" && (e instanceof ER || typeof e.message === "string")) {
        // `{message: "x"}` has no name of its own: named as any other thrown value.
        name = e instanceof ER || typeof e.name === "string" ? String(e.name) : other;
        message = String(e.message);
        stack = String(e.stack);
      } else {
        name = other;
        message = show(e);
      }
    } catch (x) {
      message = "[unreadable]";
    }
    // Where the event says it was thrown, if that is in the source; else the stack's first
    // frame in the source (a GM callback's exception, thrown again from the code before the
    // source, has the user's frames there); else "before the source" if either says so.
    const q = p && p !== BEFORE ? p : pos(stack) || p;
    return { name: cut(name, 100), message: cut(message, MAXT), ...placed(q) };
  };
  // Each late error reported is numbered (`n`), so a rejection the script handles later can be
  // taken back by its number (`rejectionhandled`), as the console takes it back. One taken back
  // gives its place in MAXLATE back (R8: twenty handled later used them all, and the run read ok
  // while a real error could no longer be sent), up to RETRACT times a page.
  let lateN = 0, retracted = 0;
  const RETRACT = MAXLATE * 5;
  const late = (e, p, rej) => {
    if (lateSent >= MAXLATE) return 0;
    lateSent++;
    const n = ++lateN;
    const m = { __proto__: null, lumo: T, v: V, kind: "late", rejection: rej, n, error: describe(e, rej ? "rejection" : "thrown value", p) };
    if (ran) out(m);
    else queue.push(m);
    return n;
  };
  const held = new WeakMap();
  try {
    // Only what the browser reports (`isTrusted`, which a page cannot set): an event the page
    // dispatches reaches this world's listeners too, and would be taken for the script's error.
    globalThis.addEventListener("error", (ev) => {
      try {
        if (!ev.isTrusted) return;
        const e = ev.error;
        if (!started) {
          if (ev.filename === FILE && e && e.name === "SyntaxError" && G()) {
            started = true;
            const p = at(ev.filename, ev.lineno, ev.colno);
            report({ ms: 0, error: { name: "SyntaxError", message: cut(String(e.message), MAXT), ...placed(p) }, logs: [], dropped: 0 });
          }
          return;
        }
        if (pending && pending.e === e) {
          pending = null;
          return;
        }
        late(e === void 0 ? ev.message : e, at(ev.filename, ev.lineno, ev.colno), false);
      } catch (x) {
      }
    });
    globalThis.addEventListener("unhandledrejection", (ev) => {
      try {
        if (!started || !ev.isTrusted) return;
        const n = late(ev.reason, null, true);
        if (n) held.set(ev.promise, n);
      } catch (x) {
      }
    });
    globalThis.addEventListener("rejectionhandled", (ev) => {
      try {
        const n = ev.isTrusted ? held.get(ev.promise) : 0;
        if (!n) return;
        held.delete(ev.promise);
        if (retracted < RETRACT) {
          retracted++;
          lateSent--;
        }
        const i = queue.findIndex((m) => m.n === n);
        if (i >= 0) queue.splice(i, 1);
        else out({ __proto__: null, lumo: T, v: V, kind: "handled", n });
      } catch (x) {
      }
    });
  } catch (x) {
  }
  const R = { gm(op, f) {
    if (!send) return Promise.resolve({ nochannel: true });
    try {
      return Promise.resolve(send({ __proto__: null, ...f, lumo: T, v: V, kind: "gm", op })).catch((e) => ({ error: String(e && e.message || e) }));
    } catch (e) {
      return Promise.resolve({ error: String(e && e.message || e) });
    }
  }, run(body) {
    started = true;
    const logs = [];
    let dropped = 0, chars = 0, live = true;
    const levels = ["log", "info", "warn", "error", "debug"];
    const saved = {}, proxies = {};
    for (const l of levels) {
      const orig = C && C[l];
      saved[l] = orig;
      proxies[l] = function(...args) {
        if (live) {
          if (logs.length >= MAXL || chars >= MAXC) dropped++;
          else {
            let t;
            try {
              t = cut(args.map(show).join(" "), Math.min(MAXT, MAXC - chars));
            } catch (e) {
              t = "[unprintable]";
            }
            chars += t.length;
            const p = pos(new Error().stack);
            logs.push({ level: l, text: t, line: p ? p[0] : null });
          }
        }
        if (typeof orig === "function") return orig.apply(this, args);
      };
      try {
        C[l] = proxies[l];
      } catch (e) {
      }
    }
    const t0 = now();
    let error = null;
    try {
      return body.call(globalThis);
    } catch (e) {
      error = describe(e, "thrown value", null);
      pending = { e };
      throw e;
    } finally {
      live = false;
      for (const l of levels) {
        try {
          if (C[l] === proxies[l]) C[l] = saved[l];
        } catch (e) {
        }
      }
      report({ ms: now() - t0, error, logs, dropped });
      ran = true;
      for (const m of queue.splice(0)) out(m);
    }
  }, snap: send && SNAP ? Object.fromEntries(SNAP) : null };
  let once = R;
  return Object.freeze({ take(u) {
    if (u !== N || once === null) return null;
    const r = once;
    once = null;
    return r;
  } });
})(__ARGS__);
