//! The code the worker puts around a registered script (generated here, in Rust; one prelude that
//! every feature on the userscript channel adds to). Today: the run report, late errors, syntax
//! errors and the GM functions. The registration holds two entries of the script's world:
//!
//! ```text
//! js[0]  const __lumoWorld = (…token, listeners, R = {gm, run, snap}…)(…, () => { [guard] }, values);
//!        //# sourceURL=lumo-prelude-<uuid>.js
//! js[1]  [guard (rules.rs)]((__lumoR) => { let {GM_x, …, GM} = (GM code)(__lumoR.gm, __lumoR.snap);
//!        return __lumoR.run(function () { //# sourceURL=lumo-run-<uuid>.js\n
//!        <the script's source, unchanged, from line 2 column 1 (more if the guard spans lines)>
//!        \n}); })(__lumoWorld.take(<uuid>) or the no-channel stand-in);\n//# sourceURL=…
//! ```
//!
//! The source runs inside `function () { … }` called at once, so its top-level code runs
//! synchronously as before; a top-level `var`/`function` becomes local to that function (as in
//! Violentmonkey), and a top-level `return` is allowed. A leading `"use strict"` stays the first
//! statement of that function body, so it stays a directive.
//!
//! **The token lives in a closure the source cannot see**: it is an argument of an inner arrow
//! function whose scope does not enclose the source, and nothing returned from that arrow hands it
//! out. The script sees its runtime (`__lumoR`): `run` and `gm` can only speak as this same script
//! (its own token), and `snap` is its own values: the worker never attributes by what a message
//! says. The channel's `sendMessage` is taken from `chrome.runtime` before the source runs.
//!
//! **A world shared with other scripts** (Chrome gives a document at most 10 user-script worlds;
//! the scripts past them share its default world, without messaging): nothing here is a global
//! but `__lumoWorld`, a `const` every runtime entry declares. The first runtime entry in the
//! shared world runs before any source there, finds no `sendMessage` and never sends; every
//! later one collides with that `const` and fails whole before any of it runs, so its token is
//! never in reach of a script that hooked `sendMessage`. Its code entry then finds no runtime of
//! its uuid (the holder hands each out once, by uuid) and runs the source with a stand-in: no
//! channel, no values, every GM function that needs the worker says so
//! (`gm::inject::NO_CHANNEL`). A runtime without `sendMessage` gives no values either: another
//! script in the world could read them through a built-in it hooked.
//!
//! The run report: duration of the synchronous run, an uncaught error (rethrown after the report,
//! so the page's console still shows it) with its line and column in the script's own source
//! (the `//# sourceURL` name and a fixed line offset, as `wrap.rs` does for `try_script`), and the
//! console calls made during the run (bounded in the page, again in `channel::message`; the
//! original console is still called). Later, errors the world's `error` / `unhandledrejection`
//! listeners hear (only this world's code: measured in Chromium 156) are sent as `late`, at most
//! [`MAX_LATE_SENT`] a page, the first-pass error not twice, and the worker joins them to the run
//! of the same `documentId`. A source that does not parse fails js[1] alone: the listener hears
//! its `SyntaxError` (before `run` started) and reports it as the run's error, if the guard,
//! asked again, admits the page. Console calls after the run are not reported.

use super::registry::{Registration, ScriptCode};
use super::wrap::js_line_count;
use crate::channel::message::{MAX_RUN_LOGS, MAX_RUN_LOG_CHARS, MAX_RUN_TEXT_CHARS, VERSION};
use crate::channel::ChannelKey;

/// What the worker adds to one script's registered code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prelude {
    /// `<uuid>.<revision>.<mac>` (see `channel::token`).
    pub token: String,
    /// The frames' name in stack traces: `lumo-run-<uuid>.js`.
    pub uuid: String,
    /// As registered: `document_start`, `document_end` or `document_idle`.
    pub run_at: String,
    /// Whether the script reports its runs. Every script does (see ARCHITECTURE.md, "Run
    /// reports and @grant none"); kept as a field so a feature that does not want them can say so.
    pub report_runs: bool,
    /// The GM functions the script is given (`gm::inject::scoped`), one line: a function of
    /// the channel and the values snapshot; `""` when none.
    pub gm: String,
    /// The names that function defines, bound in the code entry.
    pub gm_names: Vec<&'static str>,
    /// The script's values snapshot as `[[key, JSON text], …]` (`Values::encode_pairs`; `null`
    /// when it is granted no value function); given to its GM functions only where it has a
    /// channel.
    pub values: String,
    /// The `@require` code (`gm::resources::requires_block`), put between the prelude's line
    /// and the source, inside the same function; the run report's line offset counts it.
    pub requires: String,
}

impl Prelude {
    /// Whether this script's world needs `configureWorld({messaging: true})`.
    pub fn needs_messaging(&self) -> bool {
        self.report_runs || !self.gm.is_empty()
    }
}

/// The runtime entry's code, `runtime.min.js`: `runtime.js` minified (read its header: every
/// byte is registered once per script). It ends in `(__ARGS__);`, the call [`ARGS`] replaces.
const RUNTIME: &str = include_str!("runtime.min.js");

/// The runtime's call: this script's constants, then the guard (put in whole, below).
const ARGS: &str = "(__T__, __RA__, __PL__, __SL__, __RQ__, __N__, __V__, __MAXL__, __MAXT__, __MAXC__, __MAXLATE__, () => { try { ";

/// After the guard, in the runtime entry: the guard's verdict is only asked for when a syntax
/// error needs reporting (a page outside the rules reports nothing). The values snapshot (or
/// `null`) follows it, then `);`.
const PRELUDE_END: &str = " return true; } catch (e) { return false; } }, ";

/// The runtime entry's name in stack traces (errors in it are not the script's lines).
const PRELUDE_FILE: &str = "\n//# sourceURL=lumo-prelude-__N__.js\n";

/// The code entry: the guard (its prefix), then the source inside `run`, inside an arrow that
/// takes this script's runtime and binds its GM functions (`__GM__`, one line). The frame name
/// is on this first line too: a source that does not parse stops V8's scan before the last
/// line, and its SyntaxError would carry an anonymous file name (measured in Chromium 156).
const RUN_START: &str =
    "((__lumoR) => { __GM__return __lumoR.run(function () { //# sourceURL=lumo-run-__N__.js";
/// After the source: the arrow is called with this script's runtime, taken from the world's
/// `__lumoWorld` by uuid, or, when there is none (the runtime entry did not run: Chrome put the
/// script in its shared world after another's, whose `const __lumoWorld` it collided with), a
/// stand-in that runs the source with no channel and reports nothing.
const EPILOGUE: &str = "\n}); })((() => { try { const w = typeof __lumoWorld === \"object\" && __lumoWorld !== null ? __lumoWorld.take(__N__) : null; if (w) return w; } catch (e) {} return { run: (b) => b.call(globalThis), gm: () => Promise.resolve({ nochannel: true }), snap: null }; })());\n//# sourceURL=lumo-run-__F__.js\n";

/// Late errors one page load sends at most (the worker keeps fewer and counts the rest).
pub const MAX_LATE_SENT: usize = 20;

/// JSON text of a string: a JavaScript string literal that cannot end early.
fn js_str(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

impl Prelude {
    /// The registered code, as two entries of the same world: the runtime (this prelude, the
    /// values snapshot, the late-error listeners, and the guard asked lazily), then `prefix` (the
    /// guard, with its "use strict" if any), the GM functions, `__lumoR.run(function () {` and
    /// `source` from the start of a line. Two entries because a source that does not parse
    /// fails alone: the runtime already listens and reports the `SyntaxError` at its line
    /// (measured in Chromium 156: a later entry's SyntaxError fires `error` in that world, with
    /// its sourceURL, line and column). None when the uuid could break the regex or the frame
    /// name (it is always a uuid), or when the GM code spans lines.
    pub fn wrap(&self, prefix: &str, source: &str) -> Option<(String, String)> {
        if !crate::scripts::record::is_uuid(&self.uuid) {
            return None;
        }
        if self.gm.contains(['\n', '\r', '\u{2028}', '\u{2029}']) {
            return None;
        }
        // Lines before the source: the prefix's own line ends plus the one `run(` is on, and
        // the `@require` code's lines.
        let pl = js_line_count(prefix)
            .saturating_add(js_line_count(&self.requires))
            .saturating_sub(1);
        // The guard alone, to ask it again in the runtime (its "use strict" stays a directive
        // of the code entry only).
        let guard = prefix.strip_prefix("\"use strict\";").unwrap_or(prefix);
        let runtime_fn = RUNTIME.strip_suffix("(__ARGS__);")?;
        let args = ARGS
            .replace("__T__", &js_str(&self.token))
            .replace("__RA__", &js_str(&self.run_at))
            .replace("__PL__", &pl.to_string())
            .replace("__SL__", &js_line_count(source).to_string())
            // The `@require` code's lines, the last of those before the source.
            .replace(
                "__RQ__",
                &js_line_count(&self.requires).saturating_sub(1).to_string(),
            )
            .replace("__N__", &js_str(&self.uuid))
            .replace("__V__", &VERSION.to_string())
            .replace("__MAXLATE__", &MAX_LATE_SENT.to_string())
            .replace("__MAXL__", &MAX_RUN_LOGS.to_string())
            .replace("__MAXT__", &MAX_RUN_TEXT_CHARS.to_string())
            .replace("__MAXC__", &MAX_RUN_LOG_CHARS.to_string());
        // Put in whole, never through a placeholder: the guard holds user regexes and the
        // snapshot the script's values.
        let mut runtime = String::with_capacity(
            runtime_fn.len()
                + args.len()
                + guard.len()
                + self.values.len()
                + PRELUDE_FILE.len()
                + 80,
        );
        runtime.push_str(runtime_fn);
        runtime.push_str(&args);
        runtime.push('\n');
        runtime.push_str(guard);
        runtime.push('\n');
        runtime.push_str(PRELUDE_END);
        runtime.push_str(&self.values);
        runtime.push_str(");");
        runtime.push_str(&PRELUDE_FILE.replace("__N__", &self.uuid));
        let bind = if self.gm.is_empty() {
            String::new()
        } else {
            format!(
                "let {{{}}} = {}((o, f) => __lumoR.gm(o, f), __lumoR.snap, {}); ",
                self.gm_names.join(", "),
                self.gm,
                crate::gm::inject::no_channel_js()
            )
        };
        let (start_a, start_b) = RUN_START
            .replace("__N__", &self.uuid)
            .split_once("__GM__")
            .map(|(a, b)| (a.to_owned(), b.to_owned()))?;
        let epilogue = EPILOGUE
            .replace("__N__", &js_str(&self.uuid))
            .replace("__F__", &self.uuid);
        let mut code = String::with_capacity(
            prefix.len()
                + start_a.len()
                + bind.len()
                + start_b.len()
                + self.requires.len()
                + source.len()
                + epilogue.len()
                + 4,
        );
        code.push_str(prefix);
        code.push_str(&start_a);
        code.push_str(&bind);
        code.push_str(&start_b);
        code.push('\n');
        code.push_str(&self.requires);
        code.push_str(source);
        code.push_str(&epilogue);
        Some((runtime, code))
    }
}

/// Puts the prelude into a registration `registry::desired` made, if it asked for one and a key
/// exists. Without a key the script is registered as it is (it runs; it cannot report).
/// Every registration gets it, `@include` glob scripts too (they are never registered with
/// Chrome's `includeGlobs`: see `rules::glob_superset`).
pub fn apply(reg: &mut Registration, key: Option<&ChannelKey>, values: &crate::gm::values::Values) {
    apply_loaded(reg, key, values, &[], "");
}

/// [`apply`], with the script's stored `@require`/`@resource` files (`gm::resources`). A
/// script registered without the prelude still gets its `@require` code before its source.
pub fn apply_loaded(
    reg: &mut Registration,
    key: Option<&ChannelKey>,
    values: &crate::gm::values::Values,
    loaded: &[crate::gm::resources::Loaded],
    platform: &str,
) {
    let requires = crate::gm::resources::requires_block(loaded);
    let Some(slot) = reg.prelude_slot.take() else {
        return;
    };
    let Some(code) = reg.js.first().and_then(|c| c.code.clone()) else {
        return;
    };
    let Some((prefix, source)) = code.split_at_checked(slot.source_at) else {
        return;
    };
    let (Some(key), true) = (key, reg.include_globs.is_empty()) else {
        if !requires.is_empty() {
            if let Some(first) = reg.js.first_mut() {
                first.code = Some(format!("{prefix}\n{requires}{source}"));
            }
        }
        return;
    };
    let getters = crate::gm::resources::getters_js(&slot.grants, loaded);
    let p = Prelude {
        token: key.token(&reg.id, slot.revision),
        uuid: reg.id.clone(),
        run_at: reg
            .run_at
            .clone()
            .unwrap_or_else(|| "document_idle".to_owned()),
        report_runs: true,
        // One line whatever the metadata or resource names hold (U+2028 would move every
        // source line).
        gm: crate::gm::try_gm::one_line(&crate::gm::inject::scoped(&slot.gm, &getters, platform)),
        gm_names: slot.gm.names.clone(),
        values: if slot.gm.needs_values() {
            values.encode_pairs().to_string()
        } else {
            "null".to_owned()
        },
        requires,
    };
    if let Some((runtime, code)) = p.wrap(prefix, source) {
        reg.js = vec![
            ScriptCode {
                code: Some(runtime),
                file: None,
            },
            ScriptCode {
                code: Some(code),
                file: None,
            },
        ];
        reg.messaging = p.needs_messaging();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const U: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";

    fn prelude() -> Prelude {
        Prelude {
            token: "TOKEN-x".into(),
            uuid: U.into(),
            run_at: "document_end".into(),
            report_runs: true,
            gm: String::new(),
            gm_names: Vec::new(),
            values: "null".into(),
            requires: String::new(),
        }
    }

    #[test]
    fn the_source_starts_a_line_after_the_prefix_in_its_own_entry() {
        let src = "// ==UserScript==\n// @name t\n// ==/UserScript==\nnull.x;";
        let (runtime, code) = prelude().wrap("GUARD;", src).unwrap();
        let lines: Vec<&str> = code.split('\n').collect();
        assert_eq!(
            lines[0],
            "GUARD;((__lumoR) => { return __lumoR.run(function () { //# sourceURL=lumo-run-0f8fad5b-d9cb-469f-a165-70867728950e.js"
        );
        assert_eq!(lines[1], "// ==UserScript==");
        assert_eq!(lines[4], "null.x;");
        assert!(
            code.ends_with("\n//# sourceURL=lumo-run-0f8fad5b-d9cb-469f-a165-70867728950e.js\n")
        );
        // The runtime is taken by this script's uuid, else the no-channel stand-in runs it.
        assert!(code.contains("__lumoWorld.take(\"0f8fad5b-d9cb-469f-a165-70867728950e\")"));
        assert!(code.contains("nochannel: true"));
        assert!(runtime.starts_with("const __lumoWorld=(("));
        assert!(runtime.contains("}, null);\n//# sourceURL=lumo-prelude-"));
        assert!(runtime.contains("(\"TOKEN-x\", \"document_end\", 1, 4, "));
        assert!(runtime.contains(&format!(
            ", {MAX_LATE_SENT}, () => {{ try {{ \nGUARD;\n return true;"
        )));
        // The no-channel text is carried once, by the GM code only (none here).
        assert!(!runtime.contains("no channel") && !code.contains("no channel"));
        assert!(runtime
            .ends_with("\n//# sourceURL=lumo-prelude-0f8fad5b-d9cb-469f-a165-70867728950e.js\n"));
        for ph in [
            "__T__", "__RA__", "__PL__", "__SL__", "__RQ__", "__N__", "__V__", "__MAX",
        ] {
            assert!(!runtime.contains(ph) && !code.contains(ph), "{ph} is left");
        }
        // A prefix spanning lines moves the source down by as many.
        let (runtime, code) = prelude().wrap("A;\nB;", src).unwrap();
        assert!(runtime.contains("(\"TOKEN-x\", \"document_end\", 2, 4, "));
        assert_eq!(code.split('\n').nth(2), Some("// ==UserScript=="));
        // The guard is asked again in the runtime without its "use strict".
        let (runtime, code) = prelude().wrap("\"use strict\";G();", src).unwrap();
        assert!(code.starts_with("\"use strict\";G();((__lumoR) => { return __lumoR.run("));
        assert!(runtime.contains("try { \nG();\n return true;"));
    }

    #[test]
    fn require_code_goes_before_the_source_and_the_line_offset_counts_it() {
        let src = "// ==UserScript==\n// @name t\n// ==/UserScript==\nnull.x;";
        let mut p = prelude();
        p.requires = "var LIB = 1; // ends in a comment\n;\n".into();
        let (runtime, code) = p.wrap("", src).unwrap();
        let lines: Vec<&str> = code.split('\n').collect();
        assert!(lines[0].starts_with("((__lumoR) => { return __lumoR.run(function () {"));
        assert_eq!(lines[1], "var LIB = 1; // ends in a comment");
        assert_eq!(lines[2], ";");
        assert_eq!(lines[3], "// ==UserScript==");
        // Line 4 of the code is line 1 of the source: 3 lines come before it.
        assert!(
            runtime.contains("(\"TOKEN-x\", \"document_end\", 3, 4, "),
            "{runtime}"
        );
    }

    #[test]
    fn a_script_without_the_prelude_still_gets_its_require_code_first() {
        use crate::gm::assets::Asset;
        use crate::scripts::metadata;
        // Without a channel key (none could be made) a script is registered without the
        // prelude; its @require code must still run before it. An @include glob script gets
        // the prelude like any other (in the code entry, js[1]).
        let src = "// ==UserScript==\n// @name g\n// @match http://a.test/*\n// @include http://b.test:*/*\n// @require https://cdn.test/l.js\n// ==/UserScript==\nx;\n";
        let meta = metadata::parse(src).metadata.unwrap();
        let lib = || Asset {
            url: "https://cdn.test/l.js".into(),
            name: None,
            sha256: String::new(),
            size: 3,
            mime: String::new(),
            final_url: None,
            charset: None,
        };
        for keyed in [false, true] {
            let mut reg = crate::scripts::registry::desired(U, 1, &meta, src).unwrap();
            let key = ChannelKey::from_uuids(U, U).unwrap();
            apply_loaded(
                &mut reg,
                keyed.then_some(&key),
                &crate::gm::values::Values::default(),
                &[(lib(), Some(b"L=1".to_vec()))],
                "",
            );
            let code = reg.js.last().and_then(|c| c.code.clone()).unwrap();
            assert!(code.find("L=1\n;\n").unwrap() < code.find("// ==UserScript==").unwrap());
            assert_eq!(reg.messaging, keyed);
            assert_eq!(reg.js.len(), if keyed { 2 } else { 1 });
        }
    }

    #[test]
    fn the_token_is_only_in_the_runtime_entry_and_out_of_the_sources_scope() {
        let (runtime, code) = prelude().wrap("", "x").unwrap();
        assert!(!code.contains("TOKEN-x"));
        // The token is an argument of the inner arrow, which closes before `__lumoWorld` is made.
        assert_eq!(runtime.matches("TOKEN-x").count(), 1);
        assert!(runtime.contains("})(\"TOKEN-x\", "));
        assert!(!runtime.contains("globalThis.__lumo") && !runtime.contains("window."));
    }

    /// The runtime as written (`runtime.js`, whose minified form is registered), whitespace
    /// collapsed.
    fn readable_runtime() -> String {
        include_str!("runtime.js")
            .lines()
            .filter(|l| !l.starts_with("//"))
            .flat_map(str::split_whitespace)
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn the_runtime_takes_what_the_entry_gives_and_declares_one_global() {
        let file = readable_runtime();
        // One statement, the world's one global, a function of exactly the arguments `ARGS`
        // gives it (the guard last but one, the values last).
        let params =
            "const __lumoWorld = ((T, RA, PL, SL, RQ, N, V, MAXL, MAXT, MAXC, MAXLATE, G, SNAP) => {";
        assert!(file.starts_with(params), "{}", &file[..100]);
        assert!(file.ends_with("} }); })(__ARGS__);"));
        assert!(RUNTIME.ends_with("})(__ARGS__);") && !RUNTIME.contains('\n'));
        assert_eq!(
            ARGS.matches(", ").count() + 2,
            params.matches(',').count() + 1
        );
        for other in [
            "var ",
            "window.",
            "globalThis.__",
            "globalThis[",
            "function __",
        ] {
            assert!(!file.contains(other) && !RUNTIME.contains(other), "{other}");
        }
        // The late-error listeners are the runtime's, and the first-pass error is not sent twice.
        assert!(file.contains("addEventListener(\"error\""));
        assert!(file.contains("addEventListener(\"unhandledrejection\""));
        assert!(file.contains("pending = { e }; throw e;"));
        // Errors of handlers run during the first pass wait for the run report they join.
        assert!(file.contains("ran = true; for (const m of queue.splice(0)) out(m);"));
        // The holder hands this script's runtime out once, by its uuid.
        assert!(file.contains("if (u !== N || once === null) return null;"));
    }

    #[test]
    fn a_script_with_an_include_glob_gets_the_prelude_and_messaging() {
        use crate::scripts::metadata;
        let key = ChannelKey::from_uuids(U, U).unwrap();
        let src = "// ==UserScript==\n// @name g\n// @include http://b.test:*/*\n// ==/UserScript==\nx;\n";
        let meta = metadata::parse(src).metadata.unwrap();
        let mut reg = crate::scripts::registry::desired(U, 1, &meta, src).unwrap();
        assert!(reg.include_globs.is_empty());
        apply(&mut reg, Some(&key), &crate::gm::values::Values::default());
        assert!(reg.messaging);
        assert!(reg
            .js
            .iter()
            .any(|c| c.code.as_deref().unwrap_or("").contains(&key.token(U, 1))));
    }

    #[test]
    fn strings_cannot_break_out() {
        let mut p = prelude();
        p.token = "\"); alert(1); (\"".into();
        let (runtime, _) = p.wrap("", "x").unwrap();
        assert!(runtime.contains(r#""\"); alert(1); (\"""#));
        // A placeholder spelled in the guard (a user regex), the values or the GM code stays as
        // written.
        p.gm = "((S,V)=>{/*__T__ __GM__ __N__*/})".into();
        p.gm_names = vec!["GM"];
        p.values = r#"{"k":"\"__T__ __NC__\""}"#.into();
        let (runtime, code) = p.wrap("/__N__ __T__/;", "x").unwrap();
        assert!(runtime.contains("/__N__ __T__/;") && runtime.contains("__T__ __NC__"));
        assert!(code.contains(&format!(
            "let {{GM}} = ((S,V)=>{{/*__T__ __GM__ __N__*/}})((o, f) => __lumoR.gm(o, f), __lumoR.snap, {}); return __lumoR.run(",
            crate::gm::inject::no_channel_js()
        )));
        assert_eq!(code.matches("no channel").count(), 1);
        // GM code that would move the source's lines is refused.
        p.gm = "(()=>{\u{2028}})".into();
        assert!(p.wrap("", "x").is_none());
        p.uuid = "not-a-uuid\"".into();
        assert!(p.wrap("", "x").is_none());
    }
}

#[cfg(test)]
mod line_tests {
    use super::*;

    #[test]
    fn a_line_separator_in_metadata_or_values_moves_no_source_line() {
        use crate::scripts::metadata;
        const U: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";
        let key = ChannelKey::from_uuids(U, U).unwrap();
        let src = "// ==UserScript==\n// @name g\u{2028}h\n// @match http://a.test/*\n// @grant GM_getValue\n// @grant GM_info\n// ==/UserScript==\nx;\n";
        let meta = metadata::parse(src).metadata.unwrap();
        let mut reg = crate::scripts::registry::desired(U, 1, &meta, src).unwrap();
        let mut v = crate::gm::values::Values::default();
        v.apply(
            &crate::gm::values::Op::Set(vec![("k".into(), "\"a\u{2028}b\u{2029}c\"".into())]),
            0,
        )
        .unwrap();
        apply(&mut reg, Some(&key), &v);
        // The code entry's first line (GM_info holds the name) is one line.
        let code = reg.js[1].code.clone().unwrap();
        let head = code.split("\n// ==UserScript==").next().unwrap();
        assert!(!head.contains(['\u{2028}', '\u{2029}', '\n']), "{head}");
        assert!(head.contains("g\\u2028h"), "{head}");
        // The values are in the runtime entry, whose lines are no source's.
        assert!(reg.js[0].code.clone().unwrap().contains("a\u{2028}b"));
    }
}
