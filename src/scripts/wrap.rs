//! The code `try_script` hands to `chrome.userScripts.execute`: the script's whole source (metadata
//! block included, so line numbers are the script's own) inside an async function, with a console
//! proxy and try/catch, returning one bounded report. Chrome does not reliably report an error
//! thrown by executed code, and a page's console is out of our reach, so the wrapper collects both
//! itself.
//!
//! Positions: the prelude is [`prelude_lines`] lines long and the source starts on the next line at
//! column 1, so line `L` of the executed code is line `L - prelude_lines` of the source and columns
//! are unchanged. Stack frames are found by the `//# sourceURL` name, unique per try (the nonce).
//!
//! Bounds are applied twice: in the page, before anything crosses back (a script that logs 10 MB
//! must not ship 10 MB through Chrome), and again by [`parse_report`], because the tried code runs
//! in the same world as the wrapper and can forge or inflate the report.

use crate::text::ellipsize;
use serde_json::{json, Map, Value};

/// At most this many console calls are kept per frame; later ones are counted.
pub const MAX_LOGS: usize = 200;
/// A console line or error message is cut at this many characters.
pub const MAX_TEXT_CHARS: usize = 2000;
/// All console text of one frame, in characters.
pub const MAX_LOG_CHARS: usize = 64 * 1024;
/// The completion value's JSON, in bytes.
pub const MAX_VALUE_BYTES: usize = 16 * 1024;
/// At most this many errors after the top-level code finished are kept per frame (`watchMs`),
/// as many as an installed script's run keeps.
pub const MAX_LATER: usize = super::runs::MAX_LATE_PER_RUN;
/// The part of an error stack shipped back (for line extraction only).
const MAX_STACK_CHARS: usize = 4096;

/// The console proxy and `finish` (the run, its timeout, the bounded report), made by an entry of
/// their own before the wrapped source ([`entries`]) and picked up by its prelude. Kept out of the
/// function that holds the source because a console call takes a stack (for its line), and V8
/// parses every function on that stack again to find positions: inside, each try paid for
/// parsing the whole kit again (~0.5 ms in Chromium 156; ARCHITECTURE.md, Decisions). The console
/// is replaced only when `finish` starts, so a source that does not parse leaves it alone.
/// Its timers and the world's listener functions are taken when the kit is made, before the
/// source runs: a script that replaces `setTimeout` or `addEventListener` (a timer hooker, a
/// wrapper) left the timeout or the watch waiting for a timer that never fired, and the whole
/// report was lost to the provider's limit (`try.test.mjs`).
/// Every `__X__` is replaced ([`kit`]); none can occur in the nonce or the numbers.
const KIT: &str = r#"globalThis["__lumoTryKit___NONCE__"] = (() => { const N = "__NONCE__", TIMEOUT = __TIMEOUT__, WATCH = __WATCH__, MAXE = __MAXE__, MAXL = __MAXL__, MAXT = __MAXT__, MAXLC = __MAXLC__, MAXV = __MAXV__, MAXS = __MAXS__; const C = globalThis.console, S = JSON.stringify, now = () => performance.now(), ST = setTimeout.bind(globalThis), CT = clearTimeout.bind(globalThis), AEL = addEventListener.bind(globalThis), REL = removeEventListener.bind(globalThis); let t0 = 0; const re = new RegExp("lumo-try-" + N + "\\.js:(\\d+):(\\d+)", "g"); const logs = []; let dropped = 0, chars = 0; const pos = (stack) => { const s = String(stack || ""); re.lastIndex = 0; let m, req = null; while ((m = re.exec(s))) { if (+m[1] > PL) return [+m[1], +m[2]]; if (!req && +m[1] > RQ) req = [+m[1], +m[2]]; } return req; }; const PL = __PL__, RQ = __RQ__; const cut = (s, n) => (s.length > n ? s.slice(0, n) + "…" : s); let lossy = false; const lose = (x) => { lossy = true; return x; }; const safe = (v) => { const seen = new WeakSet(); let budget = 500; const walk = (x, d, k, j) => { if (--budget < 0) return lose("[…]"); if (x === null || typeof x === "boolean") return x; if (typeof x === "number") return Number.isFinite(x) ? x : String(x); if (typeof x === "string") return x.length > MAXT ? lose(cut(x, MAXT)) : x; if (typeof x === "undefined") return null; if (typeof x === "bigint") return x + "n"; if (typeof x === "symbol" || typeof x === "function") return "[" + typeof x + " " + cut(String(x.description || x.name || ""), 100) + "]"; try { if (!j && typeof x.toJSON === "function") return walk(x.toJSON(k), d + 1, k, true); if (typeof Node !== "undefined" && x instanceof Node) return "[" + (x.nodeName || "node") + "]"; if (x instanceof Error) return { name: String(x.name), message: cut(String(x.message), MAXT) }; if (x instanceof RegExp) return String(x); } catch (e) {} if (seen.has(x)) return "[Circular]"; if (d > 6) return lose("[…]"); seen.add(x); try { if (x instanceof Map || x instanceof Set) { const a = []; for (const e of x) { if (a.length >= 100) { lossy = true; break; } a.push(x instanceof Map ? [walk(e[0], d + 1, "0"), walk(e[1], d + 1, "1")] : walk(e, d + 1, String(a.length))); } return { [x instanceof Map ? "[Map]" : "[Set]"]: a }; } if (Array.isArray(x)) { if (x.length > 100) lossy = true; return x.slice(0, 100).map((y, i) => walk(y, d + 1, String(i))); } const o = {}; const ks = Object.keys(x); if (ks.length > 100) lossy = true; for (const n of ks.slice(0, 100)) o[n] = walk(x[n], d + 1, n); return o; } catch (e) { return "[unreadable]"; } finally { seen.delete(x); } }; return walk(v, 0, ""); }; const text = (args) => args.map((a) => (typeof a === "string" ? a : a === undefined ? "undefined" : (() => { try { return S(safe(a)); } catch (e) { return String(a); } })())).join(" "); const log = (level) => function (...args) { if (logs.length >= MAXL || chars >= MAXLC) { dropped++; return; } let t; try { t = cut(text(args), MAXT); } catch (e) { t = "[unprintable]"; } chars += t.length; const p = pos(new Error().stack); logs.push({ level, text: t, line: p ? p[0] : null }); }; const levels = ["log", "info", "warn", "error", "debug", "trace"]; const saved = {}; const install = () => { for (const l of levels) { saved[l] = C[l]; try { C[l] = log(l); } catch (e) {} } }; const restore = () => { for (const l of levels) { try { C[l] = saved[l]; } catch (e) {} } }; const finish = async (run) => { t0 = now(); install(); const w = WATCH > 0 ? listen() : null; const r = { lumo: N, url: cut(String(location.href), 4096), title: cut(String(document.title), 300), logs, value: null, threw: false }; const i = globalThis["__lumoTrySyntax_" + N + "_i"]; if (i) r.installSyntax = i; let timer; try { const out = await Promise.race([run(), new Promise((res) => { timer = ST(() => res(r), TIMEOUT); })]); if (out === r) { r.timedOut = true; } else if (out !== undefined) { try { lossy = false; const j = S(safe(out)); r.value = j.length > MAXV ? j.slice(0, MAXV) : j; r.valueTruncated = j.length > MAXV || lossy; } catch (e) { r.value = S("[unserializable]"); } } } catch (e) { r.threw = true; let name = "Error", message = "", stack = ""; try { if (e instanceof Error || (e && typeof e === "object" && typeof e.message === "string")) { name = e instanceof Error || typeof e.name === "string" ? String(e.name) : "thrown value"; message = String(e.message); stack = String(e.stack); } else { name = "thrown value"; message = text([e]); } } catch (x) { message = "[unreadable]"; } const p = pos(stack); r.error = { name: cut(name, 200), message: cut(message, MAXT), line: p ? p[0] : null, column: p ? p[1] : null, stack: cut(stack, MAXS) }; } finally { CT(timer); } r.ms = now() - t0; if (w) { let ms = r.timedOut ? 0 : WATCH; if (!r.timedOut) { const w0 = now(); let hide = null; try { if (await new Promise((res) => { hide = (ev) => { if (ev.isTrusted) res(true); }; ST(() => res(false), WATCH); AEL("pagehide", hide); })) { r.leftPage = true; ms = Math.max(1, Math.round(now() - w0)); } } catch (e) {} if (hide) REL("pagehide", hide); } w.stop(r, ms); } restore(); r.logsDropped = dropped; return r; }; const FILE = "lumo-try-" + N + ".js"; const thrown = (e, at, o = "thrown value") => { let name = "Error", message = "", stack = ""; try { if (e instanceof Error || (e && typeof e === "object" && typeof e.message === "string")) { name = e instanceof Error || typeof e.name === "string" ? String(e.name) : o; message = String(e.message); stack = String(e.stack); } else { name = o; message = text([e]); } } catch (x) { message = "[unreadable]"; } const s0 = pos(stack), p = (s0 && s0[0] > PL ? s0 : null) || at || s0; return { name: cut(name, 200), message: cut(message, MAXT), line: p ? p[0] : null, column: p ? p[1] : null }; }; const listen = () => { const later = []; let lost = 0; const add = (x) => { if (later.length >= MAXE) lost++; else later.push(x); }; const onError = (ev) => { try { if (!ev.isTrusted) return; const own = ev.filename === FILE; if (!own && !pos(ev.error && ev.error.stack)) return; add({ rejection: false, ...thrown(ev.error === undefined || ev.error === null ? ev.message : ev.error, own && ev.lineno > PL ? [ev.lineno, ev.colno] : null) }); } catch (x) {} }; const held = new Map(); const onRejection = (ev) => { try { if (!ev.isTrusted) return; const x = ev.reason, st = x && typeof x === "object" ? x.stack : undefined; if (typeof st === "string" && !pos(st)) return; const item = { rejection: true, ...thrown(x, null, "rejection") }; add(item); held.set(ev.promise, item); } catch (x) {} }; const onHandled = (ev) => { try { const item = held.get(ev.promise); const i = later.indexOf(item); if (i >= 0) later.splice(i, 1); held.delete(ev.promise); } catch (x) {} }; AEL("error", onError); AEL("unhandledrejection", onRejection); AEL("rejectionhandled", onHandled); return { stop(r, ms) { REL("error", onError); REL("unhandledrejection", onRejection); REL("rejectionhandled", onHandled); if (ms === 0 && !later.length && !lost) return; r.later = later; r.laterDropped = lost; r.watchedMs = ms; } }; }; return { finish }; })();"#;

/// The wrapper before the source: takes the kit ([`KIT`]) its entry left under the nonce, once
/// it has seen that it runs in the world it was sent to ([`CLAIM`]). `__NONCE__` and `__WORLD__`
/// are replaced, and neither can occur in a nonce or a world name.
///
/// Chrome gives a document at most 10 user-script worlds; a try's world past them is the
/// default one, shared with every other script and try past them. There, code that ran before
/// (raw code the agent tried, an installed script) may have hooked the built-ins the source and
/// its GM functions call, and would read the stored values a try of a stored script is given.
/// So nothing runs unless this world's claim is this try's world and no installed script ran
/// here (`__lumoWorld`, declared by a registered script's runtime entry before any source). The
/// test uses `typeof` and `!==` on bindings no code can redefine once declared (a `const`): no
/// built-in another script could have hooked. A try that finds its world taken reports
/// `sharedWorld` and runs nothing, so the first owner of a shared world is the only one that
/// ever runs there.
const PRELUDE: &str = r#"globalThis["__lumoTryRun___NONCE__"] = (async () => { //# sourceURL=lumo-try-__NONCE__.js
if (typeof __lumoWorld !== "undefined" || typeof __lumoTryWorld === "undefined" || __lumoTryWorld !== "__WORLD__") return { lumo: "__NONCE__", sharedWorld: true }; const __lumo = globalThis["__lumoTryKit___NONCE__"]; delete globalThis["__lumoTryKit___NONCE__"];
return __lumo.finish(async () => { return (async () => {
"#;

/// The world's claim: its first try declares which world it was sent to, as a `const` no later
/// code can change or remove. In a world of its own that is always the same name (a later
/// try's claim fails, silenced by [`entries`]' first entry); in the shared default world, the
/// first try there owns it, and every other try there finds it taken ([`PRELUDE`]).
const CLAIM: &str = "const __lumoTryWorld = \"__WORLD__\";\n//# sourceURL=lumo-try-claim.js\n";

/// What a frame's result says when its try found the world shared ([`PRELUDE`]) and ran
/// nothing.
pub fn found_shared_world(v: &Value, nonce: &str) -> bool {
    v.get("lumo").and_then(Value::as_str) == Some(nonce)
        && v.get("sharedWorld") == Some(&Value::Bool(true))
}

/// After the source: closes the function and names the code for stack frames.
const EPILOGUE: &str = "\n})(); });\n})()\n//# sourceURL=lumo-try-__NONCE__.js\n";

/// How many lines the prelude takes: the source's line 1 is executed line `prelude_lines() + 1`.
pub fn prelude_lines() -> u32 {
    u32::try_from(PRELUDE.matches('\n').count()).unwrap_or(u32::MAX)
}

/// Executed lines before the source's line 1: the prelude's and those of the `@require` code
/// put between it and the source (`gm::resources::requires_block`, which ends with a line end).
pub fn lines_before(requires: &str) -> u64 {
    u64::from(prelude_lines()).saturating_add(js_line_count(requires).saturating_sub(1))
}

/// The kit ([`KIT`]) of one try: `requires` is the `@require` code put before the source, whose
/// lines the positions count out.
fn kit(nonce: &str, timeout_ms: u32, watch_ms: u32, requires: &str) -> String {
    KIT.replace("__NONCE__", nonce)
        .replace("__TIMEOUT__", &timeout_ms.to_string())
        .replace("__WATCH__", &watch_ms.to_string())
        .replace("__MAXE__", &MAX_LATER.to_string())
        .replace("__MAXL__", &MAX_LOGS.to_string())
        .replace("__MAXT__", &MAX_TEXT_CHARS.to_string())
        .replace("__MAXLC__", &MAX_LOG_CHARS.to_string())
        .replace("__MAXV__", &MAX_VALUE_BYTES.to_string())
        .replace("__MAXS__", &MAX_STACK_CHARS.to_string())
        .replace("__PL__", &lines_before(requires).to_string())
        .replace("__RQ__", &prelude_lines().to_string())
}

/// The code to execute after the kit (it runs only after [`entries`]' first): `source` wrapped,
/// its frames named `lumo-try-<nonce>.js`. `nonce` must be
/// alphanumeric or `-` (a uuid): it goes into a JS string and a regex unescaped.
pub fn wrap(source: &str, nonce: &str) -> Option<String> {
    wrap_with_gm(source, nonce, "lumo-try", "", "")
}

/// A nonce or world name that may go into JS strings and a regex unescaped.
fn plain(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

/// [`wrap`], with `gm` (one line: the try's GM functions bound with `let`, `gm::try_gm`) on the
/// prelude's last line, in the function around the one the source runs in (so the source's own
/// `let GM_info` still compiles), and no source line moves.
/// `requires` (the stored `@require` code, empty or ending with a line end) goes between the
/// prelude and the source, in the same function (as a registered script has it); the source's
/// lines then start after [`lines_before`]`(requires)`.
pub fn wrap_with_gm(
    source: &str,
    nonce: &str,
    world: &str,
    gm: &str,
    requires: &str,
) -> Option<String> {
    if gm.contains(['\n', '\r', '\u{2028}', '\u{2029}']) {
        return None;
    }
    if !requires.is_empty() && !requires.ends_with('\n') {
        return None;
    }
    if !plain(nonce) || !plain(world) {
        return None;
    }
    let prelude = PRELUDE
        .replace("__WORLD__", world)
        .replace("__NONCE__", nonce);
    let mut code = String::with_capacity(
        prelude.len() + gm.len() + requires.len() + source.len() + EPILOGUE.len() + 40,
    );
    // The prelude's last line opens the outer function and then the source's: the GM line goes
    // between them.
    let (outer, inner) = prelude.rsplit_once("return (async () => {")?;
    code.push_str(outer);
    code.push_str(gm);
    code.push_str("return (async () => {");
    code.push_str(inner);
    code.push_str(requires);
    code.push_str(source);
    code.push_str(&EPILOGUE.replace("__NONCE__", nonce));
    Some(code)
}

/// The entries `userScripts.execute` runs, in order, in the try's world (`world`, the name it
/// is sent to): a listener for the `SyntaxError` of a source that does not parse (Chromium 156
/// fires `error` in the world with the entry's sourceURL, line and column; measured) and the
/// kit ([`KIT`]), the world's claim ([`CLAIM`]; its own script, whose redeclaration on a later
/// try fails alone and is kept off the console), the wrapped source ([`wrap`]), and a last
/// entry whose value Chrome returns: the wrapper's report (a promise Chrome awaits) or, when the
/// source did not parse, the listener's report of the same shape, with the executed line. `gm`
/// is the try's GM line ([`wrap_with_gm`]).
pub fn entries(
    source: &str,
    nonce: &str,
    world: &str,
    timeout_ms: u32,
    watch_ms: u32,
    gm: &str,
    requires: &str,
) -> Option<Vec<String>> {
    let wrapped = wrap_with_gm(source, nonce, world, gm, requires)?;
    let quiet = r#"if (!globalThis.__lumoTryQuiet) { globalThis.__lumoTryQuiet = true; addEventListener("error", (ev) => { if (ev.filename === "lumo-try-claim.js") ev.preventDefault(); }); }"#;
    let catcher = format!(
        r#"(() => {{ const k = "__lumoTrySyntax_{nonce}"; globalThis[k] = null; globalThis[k + "_i"] = null; const l = (ev) => {{ try {{ const e = ev.error; if (!e || e.name !== "SyntaxError") return; if (ev.filename === "lumo-try-{nonce}.js") globalThis[k] = {{ lumo: "{nonce}", url: String(location.href).slice(0, 4096), title: String(document.title).slice(0, 300), logs: [], logsDropped: 0, value: null, threw: true, ms: 0, error: {{ name: "SyntaxError", message: String(e.message).slice(0, {MAX_TEXT_CHARS}), line: ev.lineno, column: ev.colno }} }}; else if (ev.filename === "lumo-try-check-{nonce}.js") {{ ev.preventDefault(); globalThis[k + "_i"] = {{ message: String(e.message).slice(0, {MAX_TEXT_CHARS}), line: ev.lineno, column: ev.colno }}; }} }} catch (x) {{}} }}; globalThis[k + "_l"] = l; addEventListener("error", l); }})();"#
    );
    let collect = format!(
        r#"(() => {{ const k = "__lumoTrySyntax_{nonce}", r = "__lumoTryRun_{nonce}"; try {{ removeEventListener("error", globalThis[k + "_l"]); }} catch (x) {{}} const out = globalThis[r] || globalThis[k]; delete globalThis[r]; delete globalThis[k]; delete globalThis["__lumoTryKit_{nonce}"]; delete globalThis[k + "_l"]; delete globalThis[k + "_i"]; return out; }})();"#
    );
    let mut codes = vec![
        format!(
            "{catcher}\n{quiet}\n{}",
            kit(nonce, timeout_ms, watch_ms, requires)
        ),
        CLAIM.replace("__WORLD__", world),
    ];
    codes.extend(install_check(source, nonce));
    codes.push(wrapped);
    codes.push(collect);
    Some(codes)
}

/// A try runs the source inside an async function; an installed script's runs inside a plain
/// one (`scripts::prelude`), where a top-level `await` is a `SyntaxError`: the try passed and
/// every page load of the installed script failed. So a source that holds `await` is also
/// parsed as the installed script's body is, in a function that is never called (its own
/// entry, `lumo-try-check-<nonce>.js`, before the source's): the catcher keeps its
/// `SyntaxError` (off the page's console) and the kit's `finish`, which starts after it, puts
/// it in the report as `installSyntax` (`FrameReport::installed_syntax`). Line 1 of the check
/// is its own (`(function () {` and the name), so the source's line is the reported one less
/// one.
fn install_check(source: &str, nonce: &str) -> Option<String> {
    source.contains("await").then(|| {
        // Named on its first line: a `SyntaxError` stops V8's scan before the end.
        format!("(function () {{ //# sourceURL=lumo-try-check-{nonce}.js\n{source}\n}});\n")
    })
}

/// Line `executed` of the wrapped code as a line of the source (1-based); None when it lies in
/// the wrapper itself.
/// `before`: [`lines_before`] of the try's `@require` code.
pub fn source_line(executed: u64, before: u64, source_lines: u64) -> Option<u64> {
    let line = executed.checked_sub(before)?;
    (line >= 1 && line <= source_lines).then_some(line)
}

/// Lines of `source` as JavaScript counts them (LF, CR, CRLF, U+2028, U+2029 end a line).
pub fn js_line_count(source: &str) -> u64 {
    let mut n: u64 = 1;
    let mut prev_cr = false;
    for c in source.chars() {
        match c {
            '\n' if prev_cr => {}
            '\n' | '\r' | '\u{2028}' | '\u{2029}' => n = n.saturating_add(1),
            _ => {}
        }
        prev_cr = c == '\r';
    }
    n
}

/// One console call, as reported.
#[derive(Debug, Clone, PartialEq)]
pub struct LogLine {
    pub level: String,
    pub text: String,
    pub line: Option<u64>,
}

/// What the script threw.
#[derive(Debug, Clone, PartialEq)]
pub struct Thrown {
    pub name: String,
    pub message: String,
    pub line: Option<u64>,
    pub column: Option<u64>,
    /// Thrown in the stored `@require` code put before the source, with no frame in the source
    /// (as `script_runs` says of an installed script's).
    pub in_require: bool,
}

impl Thrown {
    /// As the tool gives it (with `rejection` for a later error); `inRequire` only when set.
    pub fn json(&self, rejection: Option<bool>) -> Value {
        let mut o = json!({ "name": self.name, "message": self.message, "line": self.line, "column": self.column });
        if let Some(m) = o.as_object_mut() {
            if let Some(r) = rejection {
                m.insert("rejection".into(), r.into());
            }
            if self.in_require {
                m.insert("inRequire".into(), true.into());
            }
        }
        o
    }

    /// Where it was thrown, for the text the agent reads.
    pub fn place(&self) -> String {
        if self.in_require {
            return "in its @require code, before the script's own lines".to_owned();
        }
        format!(
            "at line {}, column {}",
            self.line.map_or("?".to_owned(), |n| n.to_string()),
            self.column.map_or("?".to_owned(), |n| n.to_string())
        )
    }
}

/// An uncaught error or unhandled rejection of the tried code after its top-level code finished,
/// while the try watched (`watchMs`): from a timer, an event listener, an observer, a promise.
#[derive(Debug, Clone, PartialEq)]
pub struct Later {
    /// A promise rejected with no handler (else thrown).
    pub rejection: bool,
    pub thrown: Thrown,
}

/// What the try saw after the top-level code finished, when it watched.
#[derive(Debug, Clone, PartialEq)]
pub struct Watched {
    pub ms: u64,
    pub errors: Vec<Later>,
    pub dropped: u64,
    /// The page was left during the watch (`pagehide`: the script navigated, or the user did),
    /// which ended it after `ms`: its report comes back, where waiting on lost it.
    pub left_page: bool,
}

/// One frame's report, bounded and with positions in the source's own lines.
#[derive(Debug, Clone, PartialEq)]
pub struct FrameReport {
    pub url: String,
    pub title: String,
    /// The completion value as JSON text (possibly cut), or None for undefined.
    pub value: Option<Value>,
    pub value_truncated: bool,
    pub error: Option<Thrown>,
    pub logs: Vec<LogLine>,
    pub logs_dropped: u64,
    pub timed_out: bool,
    pub ms: f64,
    /// Present when the try watched after the top-level code finished (`watchMs`).
    pub watched: Option<Watched>,
    /// The `SyntaxError` the source is where an installed script runs it (a plain function:
    /// a top-level `await`), when it parsed here in the try's async one ([`entries`]).
    pub installed_syntax: Option<Thrown>,
}

fn text_of(v: Option<&Value>, max: usize) -> String {
    v.and_then(Value::as_str)
        .map(|s| ellipsize(s, max))
        .unwrap_or_default()
}

fn uint(v: Option<&Value>) -> Option<u64> {
    v.and_then(Value::as_u64)
}

/// The install check's `SyntaxError` ([`install_check`]), its line the source's: the check's
/// line 1 is its own (`(function () {` and its name).
fn installed_syntax(e: &Map<String, Value>, source_lines: u64) -> Thrown {
    let line = uint(e.get("line"))
        .and_then(|l| l.checked_sub(1))
        .filter(|l| (1..=source_lines).contains(l));
    Thrown {
        name: "SyntaxError".into(),
        message: text_of(e.get("message"), MAX_TEXT_CHARS),
        line,
        column: line.and(uint(e.get("column"))),
        in_require: false,
    }
}

/// Whether an executed line is in the `@require` code: after the wrapper's own lines, up to the
/// source's first (the kit gives such a line only when no frame is in the source).
fn in_require_code(line: Option<u64>, before: u64) -> bool {
    line.is_some_and(|l| l > u64::from(prelude_lines()) && l <= before)
}

/// Reads the report the wrapper returned, distrusting it: every field is bounded again and
/// positions are mapped to the source (a position inside the wrapper is dropped). None when the
/// value is not a report of this try (wrong nonce, not an object): the frame did not finish.
pub fn parse_report(v: &Value, nonce: &str, before: u64, source_lines: u64) -> Option<FrameReport> {
    let o = v.as_object()?;
    if o.get("lumo").and_then(Value::as_str) != Some(nonce) {
        return None;
    }
    let map = |l: Option<u64>| l.and_then(|l| source_line(l, before, source_lines));
    let mut logs = Vec::new();
    let mut dropped = uint(o.get("logsDropped")).unwrap_or(0);
    let mut chars = 0usize;
    for item in o
        .get("logs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(e) = item.as_object() else { continue };
        let text = text_of(e.get("text"), MAX_TEXT_CHARS);
        chars = chars.saturating_add(text.chars().count());
        if logs.len() >= MAX_LOGS || chars > MAX_LOG_CHARS {
            dropped = dropped.saturating_add(1);
            continue;
        }
        let level = match e.get("level").and_then(Value::as_str) {
            Some(l @ ("log" | "info" | "warn" | "error" | "debug" | "trace")) => l.to_owned(),
            _ => "log".to_owned(),
        };
        logs.push(LogLine {
            level,
            text,
            line: map(uint(e.get("line"))),
        });
    }
    let thrown = |e: &Map<String, Value>| Thrown {
        name: text_of(e.get("name"), 200),
        message: text_of(e.get("message"), MAX_TEXT_CHARS),
        line: map(uint(e.get("line"))),
        // A column only with a line of the source.
        column: map(uint(e.get("line"))).and(uint(e.get("column"))),
        in_require: in_require_code(uint(e.get("line")), before),
    };
    let error = o.get("error").and_then(Value::as_object).map(thrown);
    let watched = uint(o.get("watchedMs")).map(|ms| watched_of(o, ms, &thrown));
    // The page says whether it cut the value (a long string, a deep or wide object); a value
    // cut at the byte bound is no longer JSON and is returned as its text.
    let cut_in_page = o.get("valueTruncated") == Some(&json!(true));
    let (value, value_truncated) = match o.get("value").and_then(Value::as_str) {
        Some(j) if j.len() <= MAX_VALUE_BYTES => match crate::text::parse_json(j) {
            Ok(v) => (Some(v), cut_in_page),
            Err(_) => (Some(Value::String(ellipsize(j, MAX_VALUE_BYTES))), true),
        },
        Some(j) => (Some(Value::String(ellipsize(j, MAX_VALUE_BYTES))), true),
        None => (None, false),
    };
    let installed_syntax = o
        .get("installSyntax")
        .and_then(Value::as_object)
        .map(|e| installed_syntax(e, source_lines));
    Some(FrameReport {
        url: text_of(o.get("url"), 4096),
        title: text_of(o.get("title"), 300),
        value,
        value_truncated,
        error: if o.get("threw") == Some(&json!(true)) || error.is_some() {
            error.or(Some(Thrown {
                name: "Error".into(),
                message: String::new(),
                line: None,
                column: None,
                in_require: false,
            }))
        } else {
            None
        },
        logs,
        logs_dropped: dropped,
        timed_out: o.get("timedOut") == Some(&json!(true)),
        ms: o
            .get("ms")
            .and_then(Value::as_f64)
            .filter(|m| m.is_finite() && *m >= 0.0)
            .unwrap_or(0.0),
        watched,
        installed_syntax,
    })
}

/// What the try saw after the top-level code finished (`watchedMs` given: `ms`).
fn watched_of(
    o: &Map<String, Value>,
    ms: u64,
    thrown: &dyn Fn(&Map<String, Value>) -> Thrown,
) -> Watched {
    let all = o.get("later").and_then(Value::as_array);
    let items = all.map(Vec::as_slice).unwrap_or_default();
    let errors: Vec<Later> = items
        .iter()
        .filter_map(Value::as_object)
        .take(MAX_LATER)
        .map(|e| Later {
            rejection: e.get("rejection") == Some(&Value::Bool(true)),
            thrown: thrown(e),
        })
        .collect();
    let over = u64::try_from(items.len().saturating_sub(errors.len())).unwrap_or(u64::MAX);
    Watched {
        ms,
        left_page: o.get("leftPage") == Some(&Value::Bool(true)),
        dropped: uint(o.get("laterDropped"))
            .unwrap_or(0)
            .saturating_add(over),
        errors,
    }
}

impl FrameReport {
    /// The JSON the tool returns for this frame.
    pub fn to_json(&self) -> Value {
        let mut o = Map::new();
        o.insert("url".into(), json!(self.url));
        o.insert("title".into(), json!(self.title));
        o.insert("ok".into(), json!(self.error.is_none() && !self.timed_out));
        o.insert("value".into(), self.value.clone().unwrap_or(Value::Null));
        o.insert("valueTruncated".into(), json!(self.value_truncated));
        if let Some(e) = &self.error {
            o.insert("error".into(), e.json(None));
        }
        o.insert(
            "console".into(),
            Value::Array(
                self.logs
                    .iter()
                    .map(|l| json!({ "level": l.level, "text": l.text, "line": l.line }))
                    .collect(),
            ),
        );
        o.insert("consoleDropped".into(), json!(self.logs_dropped));
        o.insert("timedOut".into(), json!(self.timed_out));
        o.insert("durationMs".into(), json!((self.ms * 10.0).round() / 10.0));
        if let Some(w) = &self.watched {
            let errors = w.errors.iter().map(|l| {
                let e = &l.thrown;
                e.json(Some(l.rejection))
            });
            o.insert("watchedMs".into(), json!(w.ms));
            if w.left_page {
                o.insert("leftPage".into(), json!(true));
            }
            o.insert("lateErrors".into(), Value::Array(errors.collect()));
            o.insert("lateErrorsDropped".into(), json!(w.dropped));
        }
        if let Some(e) = &self.installed_syntax {
            o.insert(
                "installedSyntaxError".into(),
                json!({ "message": e.message, "line": e.line, "column": e.column }),
            );
        }
        Value::Object(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "// ==UserScript==\n// @name t\n// @match *://*/*\n// ==/UserScript==\nconsole.log('a');\nnull.x;\n";

    /// What the try saw after the top-level code finished is read as distrustfully as the rest:
    /// bounded in number, positions mapped to the source (a wrapper line dropped), without `watchedMs` the try did not watch.
    #[test]
    fn later_errors_are_bounded_and_mapped() {
        let before = lines_before("");
        let lines = js_line_count(SRC);
        let item = |rejection: bool, line: u64| json!({ "rejection": rejection, "name": "TypeError", "message": "x".repeat(5000), "line": line, "column": 3 });
        let mut later: Vec<Value> = vec![item(true, before + 6), item(false, 2)];
        later.extend((0..40).map(|_| item(false, before + 5)));
        let r = parse_report(
            &json!({ "lumo": "n", "watchedMs": 500, "later": later, "laterDropped": 7 }),
            "n",
            before,
            lines,
        )
        .unwrap();
        let w = r.watched.unwrap();
        assert_eq!(
            (w.ms, w.errors.len(), w.dropped),
            (500, MAX_LATER, 7 + 42 - MAX_LATER as u64)
        );
        assert!(w.errors[0].rejection);
        assert_eq!(
            (w.errors[0].thrown.line, w.errors[0].thrown.column),
            (Some(6), Some(3))
        );
        assert!(!w.errors[1].rejection);
        assert_eq!(
            (w.errors[1].thrown.line, w.errors[1].thrown.column),
            (None, None)
        );
        assert!(w.errors[0].thrown.message.chars().count() <= MAX_TEXT_CHARS + 1);
        let none = parse_report(
            &json!({ "lumo": "n", "later": [item(false, 1)] }),
            "n",
            before,
            lines,
        )
        .unwrap();
        assert_eq!(none.watched, None);
        assert!(!w.left_page);
        let left = parse_report(
            &json!({ "lumo": "n", "watchedMs": 317, "leftPage": true, "later": [] }),
            "n",
            before,
            lines,
        )
        .unwrap();
        let json = left.to_json();
        assert_eq!(
            (json["watchedMs"].clone(), json["leftPage"].clone()),
            (json!(317), json!(true))
        );
        // Only `true` says so.
        let not = parse_report(
            &json!({ "lumo": "n", "watchedMs": 5, "leftPage": "yes" }),
            "n",
            before,
            lines,
        )
        .unwrap();
        assert!(!not.watched.unwrap().left_page);
    }

    /// The kit's timers and listener functions are the world's before the source runs: each
    /// name is read once, where it is taken, and never called bare after (a script that
    /// replaced one left the timeout or the watch waiting forever; `try.test.mjs`).
    #[test]
    fn the_kit_takes_its_timers_and_listeners_before_the_source_runs() {
        let k = kit("abc-1", 3000, 500, "");
        for name in [
            "setTimeout",
            "clearTimeout",
            "addEventListener",
            "removeEventListener",
        ] {
            let taken = format!("= {name}.bind(globalThis)");
            assert_eq!(k.matches(name).count(), 1, "{name}: {k}");
            assert!(k.contains(&taken), "{name}");
            assert!(k.find(&taken) < k.find("const finish"), "{name}");
        }
    }

    #[test]
    fn the_source_starts_on_its_own_line_after_the_prelude() {
        let code = wrap(SRC, "abc-1").unwrap();
        let pl = usize::try_from(prelude_lines()).unwrap();
        let lines: Vec<&str> = code.split('\n').collect();
        // Executed line pl+1 is source line 1, column unchanged.
        assert_eq!(lines[pl], "// ==UserScript==");
        assert_eq!(lines[pl + 5], "null.x;");
        assert_eq!(
            source_line(
                u64::try_from(pl).unwrap() + 6,
                lines_before(""),
                js_line_count(SRC)
            ),
            Some(6)
        );
        assert!(code.ends_with("//# sourceURL=lumo-try-abc-1.js\n"));
        for ph in [
            "__NONCE__",
            "__TIMEOUT__",
            "__MAXL__",
            "__MAXT__",
            "__MAXLC__",
            "__MAXV__",
            "__MAXS__",
            "__PL__",
        ] {
            assert!(!code.contains(ph), "{ph} is left");
            assert!(
                !kit("abc-1", 3000, 0, "").contains(ph),
                "{ph} is left in the kit"
            );
        }
    }

    #[test]
    fn positions_inside_the_wrapper_map_to_nothing() {
        let pl = u64::from(prelude_lines());
        assert_eq!(source_line(1, pl, 10), None);
        assert_eq!(source_line(pl, pl, 10), None);
        assert_eq!(source_line(pl + 1, pl, 10), Some(1));
        assert_eq!(source_line(pl + 11, pl, 10), None); // the epilogue
        assert_eq!(source_line(0, pl, 10), None);
    }

    #[test]
    fn lines_are_counted_as_javascript_counts_them() {
        assert_eq!(js_line_count("a"), 1);
        assert_eq!(js_line_count("a\r\nb\rc\u{2028}d\u{2029}e\n"), 6);
    }

    /// A source with `await` is also parsed as an installed script's body, in an entry of its
    /// own before the source's that defines a function and calls nothing; its `SyntaxError`
    /// comes back as `installedSyntaxError`, on the source's own line. One without `await`
    /// costs no entry.
    #[test]
    fn a_source_with_await_is_checked_as_the_installed_script_parses() {
        assert_eq!(
            entries(SRC, "n1", "lumo-try", 1000, 0, "", "")
                .unwrap()
                .len(),
            4
        );
        let src = "// ==UserScript==\n// @name a\n// ==/UserScript==\nawait 1;\n";
        let e = entries(src, "n1", "lumo-try", 1000, 0, "", "").unwrap();
        assert_eq!(e.len(), 5);
        assert_eq!(
            e[2],
            format!("(function () {{ //# sourceURL=lumo-try-check-n1.js\n{src}\n}});\n")
        );
        assert!(e[3].contains("await 1;") && e[3].starts_with("globalThis[\"__lumoTryRun_n1\"]"));
        assert!(e[0].contains("ev.filename === \"lumo-try-check-n1.js\""));
        assert!(e[0].contains("r.installSyntax = i"));
        let r = json!({"lumo": "n1", "url": "u", "title": "t", "logs": [], "value": null, "threw": false, "ms": 1,
            "installSyntax": {"message": "await is only valid in async functions", "line": 5, "column": 1}});
        let f = parse_report(&r, "n1", lines_before(""), js_line_count(src)).unwrap();
        let i = f.installed_syntax.clone().unwrap();
        assert_eq!((i.line, i.column), (Some(4), Some(1)));
        assert_eq!(
            f.to_json()["installedSyntaxError"]["message"],
            "await is only valid in async functions"
        );
        // A forged line outside the source is dropped, with its column.
        let r = json!({"lumo": "n1", "installSyntax": {"message": "x", "line": 99, "column": 3}});
        let i = parse_report(&r, "n1", 0, js_line_count(src))
            .unwrap()
            .installed_syntax
            .unwrap();
        assert_eq!((i.line, i.column), (None, None));
    }

    #[test]
    fn the_entries_catch_a_syntax_error_and_return_one_report() {
        let e = entries(SRC, "abc-1", "lumo-try", 3000, 0, "", "").unwrap();
        assert_eq!(e.len(), 4);
        // The world's claim is a script of its own, before the source.
        assert_eq!(
            e[1],
            "const __lumoTryWorld = \"lumo-try\";\n//# sourceURL=lumo-try-claim.js\n"
        );
        assert!(e[0].contains("ev.filename === \"lumo-try-claim.js\") ev.preventDefault()"));
        let e: Vec<String> = [e[0].clone(), e[2].clone(), e[3].clone()].into();
        assert_eq!(e[1], wrap(SRC, "abc-1").unwrap());
        // The frame name is on the first line too: a SyntaxError stops V8's scan before the end.
        assert!(e[1].starts_with(
            "globalThis[\"__lumoTryRun_abc-1\"] = (async () => { //# sourceURL=lumo-try-abc-1.js\n"
        ));
        assert!(e[0].contains("ev.filename === \"lumo-try-abc-1.js\""));
        // The console proxy and `finish` are made by the first entry, outside the function that
        // holds the source (a console call's stack would make V8 parse them again), and every
        // placeholder of the kit is filled.
        assert!(
            e[0].contains("const finish = async (run)") && e[0].contains("const log = (level)")
        );
        assert!(!e[1].contains("const finish") && !e[1].contains("const log"));
        assert!(e[0].contains("globalThis[\"__lumoTryKit_abc-1\"] = "));
        assert!(e[1].contains("globalThis[\"__lumoTryKit_abc-1\"]"));
        assert!(e[2].contains("delete globalThis[\"__lumoTryKit_abc-1\"]"));
        assert!(
            !e[0].contains("__NONCE__")
                && !e[0].contains("__PL__")
                && !e[0].contains("__TIMEOUT__")
        );
        assert!(e[0].contains("TIMEOUT = 3000,"));
        assert!(e[2].contains("globalThis[r] || globalThis[k]"));
        // The catcher's report reads as a report of this try, its line mapped to the source.
        let pl = u64::from(prelude_lines());
        let r = json!({"lumo": "abc-1", "url": "u", "title": "t", "logs": [], "logsDropped": 0,
            "value": null, "threw": true, "ms": 0,
            "error": {"name": "SyntaxError", "message": "Unexpected token ';'", "line": pl + 6, "column": 11}});
        let f = parse_report(&r, "abc-1", lines_before(""), js_line_count(SRC)).unwrap();
        let err = f.error.unwrap();
        assert_eq!(
            (err.name.as_str(), err.line, err.column),
            ("SyntaxError", Some(6), Some(11))
        );
        assert!(entries(SRC, "a\"b", "lumo-try", 1, 0, "", "").is_none());
    }

    /// The source, its `@require` code and its GM line (a stored script's values) run only
    /// after the check that the world is the try's own: a `typeof`/`!==` test of `const`
    /// bindings, before anything of the try is evaluated.
    #[test]
    fn nothing_of_the_try_runs_before_the_world_check() {
        let e = entries(SRC, "n1", "lumo-try-u1", 1000, 0, "{GM_VALUES;}", "REQ;\n").unwrap();
        let w = &e[2];
        let check = w
            .find("if (typeof __lumoWorld !== \"undefined\" || typeof __lumoTryWorld === \"undefined\" || __lumoTryWorld !== \"lumo-try-u1\") return { lumo: \"n1\", sharedWorld: true };")
            .expect("the check");
        for later in ["__lumo.finish", "{GM_VALUES;}", "REQ;", "console.log"] {
            assert!(
                w.find(later).is_some_and(|i| i > check),
                "{later} before the check"
            );
        }
        assert_eq!(
            e[1],
            "const __lumoTryWorld = \"lumo-try-u1\";\n//# sourceURL=lumo-try-claim.js\n"
        );
        assert!(found_shared_world(
            &json!({"lumo": "n1", "sharedWorld": true}),
            "n1"
        ));
        assert!(!found_shared_world(
            &json!({"lumo": "n2", "sharedWorld": true}),
            "n1"
        ));
        assert!(!found_shared_world(
            &json!({"lumo": "n1", "sharedWorld": "yes"}),
            "n1"
        ));
        assert!(entries(SRC, "n1", "lumo\"try", 1000, 0, "", "").is_none());
    }

    #[test]
    fn a_nonce_that_could_break_out_is_refused() {
        assert!(wrap(SRC, "a\"b").is_none());
        assert!(wrap(SRC, "").is_none());
        assert!(wrap(SRC, "a.b").is_none());
    }

    #[test]
    fn a_report_is_mapped_and_bounded() {
        let pl = u64::from(prelude_lines());
        let logs: Vec<Value> = (0..500)
            .map(|i| json!({"level": "warn", "text": "x".repeat(5000), "line": pl + 5 + i % 2}))
            .collect();
        let r = json!({
            "lumo": "n1", "url": "http://a/", "title": "T", "threw": true,
            "error": {"name": "TypeError", "message": "boom", "line": pl + 6, "column": 6},
            "logs": logs, "logsDropped": 3, "ms": 1.25, "value": null
        });
        let f = parse_report(&r, "n1", lines_before(""), 7).unwrap();
        assert_eq!(f.error.as_ref().unwrap().line, Some(6));
        assert_eq!(f.error.as_ref().unwrap().column, Some(6));
        assert!(f.logs.len() <= MAX_LOGS);
        let chars: usize = f.logs.iter().map(|l| l.text.chars().count()).sum();
        assert!(chars <= MAX_LOG_CHARS, "{chars}");
        assert!(f
            .logs
            .iter()
            .all(|l| l.text.chars().count() <= MAX_TEXT_CHARS + 1));
        assert_eq!(f.logs[0].line, Some(5));
        assert_eq!(f.logs[1].line, Some(6));
        assert!(f.logs_dropped >= 500 - u64::try_from(f.logs.len()).unwrap() + 3);
        // Another try's report, or something else entirely, is not this try's report.
        assert!(parse_report(&r, "n2", lines_before(""), 7).is_none());
        assert!(parse_report(&json!([1]), "n1", lines_before(""), 7).is_none());
    }

    #[test]
    fn a_forged_position_in_the_wrapper_or_beyond_the_source_is_dropped() {
        let r = json!({"lumo": "n", "threw": true, "error": {"name": "E", "message": "m", "line": 2, "column": 9},
                       "logs": [{"level": "evil", "text": 5, "line": 999999}]});
        let f = parse_report(&r, "n", lines_before(""), 3).unwrap();
        assert_eq!(f.error.as_ref().unwrap().line, None);
        assert_eq!(f.error.as_ref().unwrap().column, None);
        assert_eq!(f.logs[0].level, "log");
        assert_eq!(f.logs[0].line, None);
    }

    #[test]
    fn values_are_bounded_and_json() {
        let ok = parse_report(
            &json!({"lumo": "n", "value": "{\"a\":[1,2]}"}),
            "n",
            lines_before(""),
            1,
        )
        .unwrap();
        assert_eq!(ok.value, Some(json!({"a": [1, 2]})));
        assert!(!ok.value_truncated);
        let big = "\"".to_owned() + &"y".repeat(MAX_VALUE_BYTES * 4) + "\"";
        let cut = parse_report(
            &json!({"lumo": "n", "value": big}),
            "n",
            lines_before(""),
            1,
        )
        .unwrap();
        assert!(cut.value_truncated);
        assert!(cut.value.unwrap().as_str().unwrap().len() <= MAX_VALUE_BYTES + 4);
        let lossy = parse_report(
            &json!({"lumo": "n", "value": "\"yy…\"", "valueTruncated": true}),
            "n",
            lines_before(""),
            1,
        )
        .unwrap();
        assert_eq!(lossy.value, Some(json!("yy…")));
        assert!(lossy.value_truncated);
        let none = parse_report(&json!({"lumo": "n"}), "n", lines_before(""), 1).unwrap();
        assert_eq!(none.value, None);
        assert_eq!(none.to_json()["ok"], true);
    }

    #[test]
    fn require_code_goes_before_the_source_and_positions_still_map_to_the_source() {
        let src = "// ==UserScript==\n// @name r\n// ==/UserScript==\nthrow new Error(LIB);\n";
        let req = "var LIB = 'lib';\r\nfunction f() {}\n;\n";
        let pl = u64::from(prelude_lines());
        assert_eq!(lines_before(req), pl + 3);
        let code = wrap_with_gm(src, "n1", "lumo-try", "", req).unwrap();
        // The source's line 4 is executed line pl + 3 + 4; the page side's PL says so too.
        let lines: Vec<&str> = code.split('\n').collect();
        assert_eq!(
            lines[usize::try_from(pl + 3 + 4 - 1).unwrap()],
            "throw new Error(LIB);"
        );
        // The page side's PL is in the kit (the first entry).
        let kit = &entries(src, "n1", "lumo-try", 1000, 0, "", req).unwrap()[0];
        assert!(kit.contains(&format!("const PL = {}, RQ = {pl};", pl + 3)));
        let r = json!({"lumo": "n1", "threw": true,
            "error": {"name": "Error", "message": "lib", "line": pl + 3 + 4, "column": 7},
            "logs": [{"level": "log", "text": "in lib", "line": pl + 1}]});
        let f = parse_report(&r, "n1", lines_before(req), js_line_count(src)).unwrap();
        assert_eq!(f.error.unwrap().line, Some(4));
        // A line inside the @require code is none of the source's.
        assert_eq!(f.logs[0].line, None);
        // An error the kit found only there is said to be in the @require code.
        let r = json!({"lumo": "n1", "threw": true,
            "error": {"name": "SyntaxError", "message": "x", "line": pl + 2, "column": 7}});
        let e = parse_report(&r, "n1", lines_before(req), js_line_count(src))
            .unwrap()
            .error
            .unwrap();
        assert!(e.in_require && e.line.is_none(), "{e:?}");
        assert_eq!(e.json(None)["inRequire"], true);
        assert!(e.place().starts_with("in its @require code"));
        // One in the wrapper's own lines is not.
        let r = json!({"lumo": "n1", "threw": true,
            "error": {"name": "E", "message": "x", "line": pl, "column": 7}});
        let e = parse_report(&r, "n1", lines_before(req), js_line_count(src))
            .unwrap()
            .error
            .unwrap();
        assert!(!e.in_require);
        // Code not ending with a line end would glue onto the source's first line.
        assert!(wrap_with_gm(src, "n1", "lumo-try", "", "var x = 1;").is_none());
    }

    #[test]
    fn the_gm_line_moves_no_source_line() {
        let src = "// ==UserScript==\n// @name t\n// ==/UserScript==\nnull.x;";
        let plain = wrap(src, "n1").unwrap();
        let gm = wrap_with_gm(src, "n1", "lumo-try", "{GM_LINE;}", "").unwrap();
        assert_eq!(js_line_count(&plain), js_line_count(&gm));
        let at = |c: &str| c.split('\n').position(|l| l == "null.x;");
        assert_eq!(at(&plain), at(&gm));
        assert!(gm.contains("async () => { {GM_LINE;}return (async () => {\n// ==UserScript=="));
        for bad in ["a\nb", "a\rb", "a\u{2028}b"] {
            assert!(wrap_with_gm(src, "n1", "lumo-try", bad, "").is_none());
        }
    }
}
