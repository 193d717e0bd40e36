//! The GM functions a *tried* script gets (`try_script`): the same code a registered script
//! gets for its `@grant`s (`inject::parts`), but with no channel to the worker. A try runs in
//! a try world (`try_script::try_world`), configured without messaging, so nothing a tried script does can
//! reach the provider, and a try never changes what is stored:
//!
//! - values: a stored script tried by uuid starts with a copy of its stored values; a raw
//!   source starts with none. `GM_setValue` and friends change that copy for the rest of the
//!   try (so a script that sets then reads a value sees it) and are **not saved**: a try is not
//!   a run of the installed script, and it must never write into one's values.
//! - `@resource` files (`GM_getResourceText`/`GM_getResourceURL`): a stored script's stored
//!   copies, as its registration has them; a raw source's give `null` (nothing is fetched).
//! - the tab object (`GM_getTab`/`GM_saveTab`): kept in the try only, starting at `{}`;
//!   `GM_getTabs` lists none. The stored script's tab objects are never read nor written.
//! - everything else that needs the worker (`GM_xmlhttpRequest`, `GM_download`, value-change
//!   listeners from other tabs, menu commands, tabs, notifications…) answers with an error that
//!   says it is not available in a try (`GM_download`'s `onerror` gets it as `details`).

use crate::gm::inject;
use crate::gm::values::Values;
use crate::scripts::metadata::Metadata;

/// What the try's stand-in channel answers: value writes "succeed" (they stay in the world's
/// copy), everything else is refused with a message the script (and the agent reading the
/// try's console) sees.
/// The tab object (`GM_saveTab`) is kept by the stand-in for the rest of the try, like the
/// values: `GM_getTab` starts at `{}` and reads what the try saved, `GM_getTabs` lists no tab
/// (the stored script's objects are never read nor written by a try).
/// A menu command is said once in the try's console (however many it adds or removes) and its
/// page stops asking (`gone`): told only `error`, it asked again every 5 s for as long as the
/// page lived (a tester saw the registration succeed without a word).
const TRY_SEND: &str =
    "(()=>{let T='{}',W=0;const E=o=>'GM ('+o+'): not available when a script is tried with try_script (nothing a try \
     does reaches the provider; install the script to use it)';\
     return(o,f)=>Promise.resolve(o==='values.set'||o==='values.delete'?{ok:true,changed:0}:\
     o==='tabobj.get'?{tab:T}:o==='tabobj.save'?(T=String(f.tab),{ok:true}):o==='tabobj.all'?{tabs:'{}'}:\
     o==='menu'?(W++||console.warn(E('GM_registerMenuCommand')),{gone:true}):{error:E(o)})})()";

/// The GM line for a tried script: its functions bound with `let` (never globals: the try world
/// outlives a try, and Chrome may put it in the world it shares between the scripts past the
/// tenth on a page); `""` when its grants give it nothing. `uuid` is the stored script's (or
/// `""` for a raw source); `values` its stored values (or none); `resources` its resource
/// getters (`gm::resources::getters_js`, one line).
pub fn try_prelude(
    uuid: &str,
    meta: &Metadata,
    source: &str,
    values: &Values,
    platform: &str,
    resources: &str,
) -> String {
    let parts = inject::parts(uuid, meta, source);
    let scoped = inject::scoped(&parts, resources, platform);
    if scoped.is_empty() {
        return String::new();
    }
    one_line(&format!(
        "let {{{}}} = {scoped}({TRY_SEND}, Object.fromEntries({}), null); ",
        parts.names.join(", "),
        values.encode_pairs()
    ))
}

/// The code must stay on one line (the source's line numbers depend on it). JSON never puts a
/// raw line break in a string, but it does leave U+2028/U+2029, which JavaScript counts as line
/// ends in positions: outside strings the generated code has none, so escaping them is exact.
pub fn one_line(code: &str) -> String {
    code.replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gm::values::Op;
    use crate::scripts::metadata;

    fn meta(grants: &str) -> (Metadata, String) {
        let s = format!("// ==UserScript==\n// @name T\n{grants}// ==/UserScript==\nx();\n");
        (metadata::parse(&s).metadata.unwrap(), s)
    }

    #[test]
    fn granted_functions_only_and_one_line_whatever_the_values_hold() {
        let (m, s) = meta("// @grant none\n");
        assert_eq!(try_prelude("", &m, &s, &Values::default(), "", ""), "");
        let (m, s) = meta("// @grant GM_getValue\n// @grant GM_setValue\n// @grant GM_addStyle\n");
        let mut v = Values::default();
        v.apply(
            &Op::Set(vec![("k".into(), "\"a\u{2028}b\u{2029}\"".into())]),
            0,
        )
        .unwrap();
        let js = try_prelude("", &m, &s, &v, "", "");
        assert!(js.contains("d('GM_addStyle'") && js.contains(r#"["getValue","setValue"]"#));
        assert!(
            js.starts_with("let {GM_info, GM_addStyle, unsafeWindow, GM_getValue, GM_setValue, GM} = ((S0,V,NC)=>{"),
            "{js}"
        );
        assert!(!js.contains("globalThis"));
        assert!(!js.contains('\u{2028}') && !js.contains('\u{2029}') && !js.contains('\n'));
        assert!(js.contains("a\\u2028b"), "{js}");
        // Nothing in it can reach the provider: the channel is the stand-in.
        assert!(js.contains("not available when a script is tried"));
        assert!(!js.contains("__lumoRun") && !js.contains("sendMessage"));
    }

    /// A tried script granted `GM_download` has it, over the stand-in channel: its request
    /// gets the try's refusal, which its `onerror` is given (`gm-download.test.mjs`).
    #[test]
    fn download_is_given_over_the_stand_in() {
        let (m, s) = meta("// @grant GM.download\n");
        let js = try_prelude("", &m, &s, &Values::default(), "", "");
        assert!(
            js.starts_with("let {GM_info, unsafeWindow, GM_download, GM} = "),
            "{js}"
        );
        assert!(js.contains("d('GM_download',DL)") && js.contains("const X=(o,W)=>"));
        assert!(js.contains("not available when a script is tried"));
        assert!(!js.contains("sendMessage") && !js.contains('\n'));
    }
}
