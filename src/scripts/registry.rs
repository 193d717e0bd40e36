//! `chrome.userScripts` registrations: what one stored script should look like to Chrome, which
//! scripts run on a URL, and the diff between what should be registered and what is. Pure: the
//! provider applies the plan through the `UserScripts` trait. The mapping from metadata to
//! Chrome's fields (and the runtime guard) lives in [`super::rules`].

use super::metadata::Metadata;
use super::rules;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use super::rules::Verdict;

/// Chrome's `RegisteredUserScript`. Every list is always sent, empty or not: a registration is
/// replaced whole (unregister + register), never patched with `update`, which keeps fields it
/// is not given and ignores an empty `includeGlobs`/`excludeGlobs` (checked in Chromium 156).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Registration {
    pub id: String,
    #[serde(default)]
    pub matches: Vec<String>,
    #[serde(default)]
    pub exclude_matches: Vec<String>,
    #[serde(default)]
    pub include_globs: Vec<String>,
    #[serde(default)]
    pub exclude_globs: Vec<String>,
    #[serde(default)]
    pub all_frames: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_at: Option<String>,
    #[serde(default)]
    pub js: Vec<ScriptCode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world: Option<String>,
    /// The script's own USER_SCRIPT world, so scripts cannot read each other's globals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world_id: Option<String>,
    /// Anything else Chrome reports (a field a newer Chrome adds). Never set by us, so a
    /// registration carrying one differs from the desired one and is replaced.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
    /// Where the worker's prelude goes (`scripts::prelude::apply`); never sent to Chrome.
    #[serde(skip)]
    pub prelude_slot: Option<PreludeSlot>,
    /// Whether the script's world needs messaging (set by the prelude); never sent to Chrome.
    #[serde(skip)]
    pub messaging: bool,
}

/// What `prelude::apply` needs to know about a desired registration: the revision its token is
/// for, and where the source starts in the code (after the guard).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreludeSlot {
    pub revision: u64,
    pub source_at: usize,
    /// The GM functions its grants name (`gm::inject`), put inside the prelude.
    pub gm: crate::gm::inject::GmParts,
    /// Its `@grant`s (for the `@resource` getters, `gm::resources`).
    pub grants: Vec<String>,
    /// Its stored `@require`/`@resource` files (`sync::desired_for` sets them from the record).
    pub assets: Vec<crate::gm::assets::Asset>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptCode {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

/// Most user-script worlds Chrome gives one document (Chromium 156, measured): every script
/// injected past them runs in the shared default world (ARCHITECTURE.md, "One world per
/// script").
pub const WORLDS_PER_DOCUMENT: usize = 10;

/// The world id for a script: its uuid (Chrome reserves ids starting with '_' and caps the
/// length at 256; a uuid is 36 characters of hex and '-').
pub fn world_id(uuid: &str) -> String {
    uuid.to_owned()
}

/// The registration for a script, or `None` when it has no rule that lets it run anywhere. Its
/// code is the guard and the source; `revision` is kept for the prelude (`prelude::apply`).
pub fn desired(uuid: &str, revision: u64, meta: &Metadata, source: &str) -> Option<Registration> {
    let r = rules::compile(meta)?;
    let prefix = match &r.guard {
        // A leading "use strict" must stay the first statement to stay a directive.
        Some(g) if starts_strict(source) => format!("\"use strict\";{}", g.js(&meta.name)),
        Some(g) => g.js(&meta.name),
        None => String::new(),
    };
    let source_at = prefix.len();
    let code = prefix + source;
    Some(Registration {
        id: uuid.to_owned(),
        matches: r.matches,
        exclude_matches: r.exclude_matches,
        include_globs: r.include_globs,
        exclude_globs: r.exclude_globs,
        all_frames: !meta.no_frames,
        run_at: Some(run_at_str(meta)),
        js: vec![ScriptCode {
            code: Some(code),
            file: None,
        }],
        world: Some("USER_SCRIPT".to_owned()),
        world_id: Some(world_id(uuid)),
        extra: Map::new(),
        prelude_slot: Some(PreludeSlot {
            revision,
            source_at,
            gm: crate::gm::inject::parts(uuid, meta, source),
            grants: meta.grants.clone(),
            assets: Vec::new(),
        }),
        messaging: false,
    })
}

/// Whether the source's first statement (after comments and whitespace, where the metadata
/// block lives) is a "use strict" directive.
fn starts_strict(source: &str) -> bool {
    let mut rest = source.trim_start_matches('\u{feff}');
    loop {
        rest = rest.trim_start();
        if let Some(r) = rest.strip_prefix("//") {
            rest = r.split_once('\n').map_or("", |(_, after)| after);
        } else if let Some(r) = rest.strip_prefix("/*") {
            match r.split_once("*/") {
                Some((_, after)) => rest = after,
                None => return false,
            }
        } else {
            break;
        }
    }
    ["\"use strict\"", "'use strict'"]
        .iter()
        .any(|d| rest.starts_with(d))
}

fn run_at_str(meta: &Metadata) -> String {
    serde_json::to_value(meta.run_at)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "document_idle".to_owned())
}

/// Does a script with this metadata run on `url`, exactly as Chrome plus the guard decide?
pub fn verdict(meta: &Metadata, url: &str) -> Verdict {
    decide(meta, url).0
}

/// [`verdict`], and whether Chrome injects the script into a page at `url` (`rules::decide`).
pub fn decide(meta: &Metadata, url: &str) -> (Verdict, bool) {
    match rules::compile(meta) {
        Some(r) => rules::decide(&r, url),
        None => (Verdict::NoMatch, false),
    }
}

/// What to change so Chrome runs exactly the desired scripts. A changed registration is in
/// `replace`: unregistered, then registered again whole.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    pub register: Vec<Registration>,
    pub replace: Vec<Registration>,
    pub unregister: Vec<String>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.register.is_empty() && self.replace.is_empty() && self.unregister.is_empty()
    }
}

/// Compares Chrome's whole registration (as `getScripts` returns it) with the desired one, by
/// effect: Chrome fills in defaults (world, runAt), leaves out empty lists and returns pattern
/// lists sorted, so lists compare as sets. Any field we do not set makes them differ.
pub fn same_effect(a: &Registration, b: &Registration) -> bool {
    let world = |r: &Registration| r.world.clone().unwrap_or_else(|| "USER_SCRIPT".to_owned());
    let run_at = |r: &Registration| {
        r.run_at
            .clone()
            .unwrap_or_else(|| "document_idle".to_owned())
    };
    fn set(v: &[String]) -> crate::vec_map::VecSet<&String> {
        v.iter().collect()
    }
    a.id == b.id
        && set(&a.matches) == set(&b.matches)
        && set(&a.exclude_matches) == set(&b.exclude_matches)
        && set(&a.include_globs) == set(&b.include_globs)
        && set(&a.exclude_globs) == set(&b.exclude_globs)
        && a.all_frames == b.all_frames
        && run_at(a) == run_at(b)
        && world(a) == world(b)
        && a.world_id == b.world_id
        && a.js == b.js
        && a.extra == b.extra
}

pub fn plan(desired: Vec<Registration>, actual: &[Registration]) -> Plan {
    use crate::vec_map::{VecMap, VecSet};
    // Looked up by id: a reconcile at 1,000 scripts would otherwise compare a million pairs.
    let held: VecMap<&str, &Registration> = actual.iter().map(|a| (a.id.as_str(), a)).collect();
    let wanted: VecSet<&str> = desired.iter().map(|d| d.id.as_str()).collect();
    let mut p = Plan::default();
    for a in actual {
        if !wanted.contains(a.id.as_str()) {
            p.unregister.push(a.id.clone());
        }
    }
    for d in desired {
        match held.get(d.id.as_str()) {
            None => p.register.push(d),
            Some(a) if !same_effect(a, &d) => p.replace.push(d),
            Some(_) => {}
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripts::metadata;

    fn meta(src: &str) -> Metadata {
        metadata::parse(src).metadata.expect("valid metadata")
    }

    fn header(lines: &str) -> String {
        format!("// ==UserScript==\n// @name T\n{lines}// ==/UserScript==\nconsole.log(1);\n")
    }

    #[test]
    fn granted_functions_go_in_the_code_entry_and_the_values_in_the_runtime() {
        use crate::channel::ChannelKey;
        use crate::gm::values::{Op, Values};
        const U: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";
        let key = ChannelKey::from_uuids(U, "7c9e6679-7425-40de-944b-e07fc1f90ae7").unwrap();
        let none = header("// @match https://example.com/*\n// @grant none\n");
        let mut r = desired(U, 1, &meta(&none), &none).unwrap();
        crate::scripts::prelude::apply(&mut r, Some(&key), &Values::default());
        assert!(!r.js[0]
            .code
            .clone()
            .unwrap()
            .contains("defineProperty(globalThis"));

        let src = format!(
            "'use strict';\n{}",
            header("// @include /^https:\\/\\/a\\.example\\//\n// @grant GM_addStyle\n// @grant GM_getValue\n")
        );
        let mut v = Values::default();
        // A value that looks like a placeholder stays a value.
        v.apply(&Op::Set(vec![("k".into(), "\"__T__ __GM__\"".into())]), 0)
            .unwrap();
        let mut r = desired(U, 1, &meta(&src), &src).unwrap();
        crate::scripts::prelude::apply(&mut r, Some(&key), &v);
        // The runtime entry (token, values), then the code entry (guard, GM functions bound
        // in the scope around the source, run, source). The values stay in the runtime: a
        // script whose runtime entry did not run (Chrome's shared world) never sees them.
        let runtime = r.js[0].code.clone().unwrap();
        let code = r.js[1].code.clone().unwrap();
        assert!(
            runtime.contains(r#"}, [["k","\"__T__ __GM__\""]]);"#),
            "{runtime}"
        );
        assert!(!runtime.contains("d('GM_addStyle'"));
        let guard = code.find("new RegExp").unwrap();
        let bind = code
            .find("let {GM_info, GM_addStyle, unsafeWindow, GM_getValue, GM} = ((S0,V,NC)=>{")
            .unwrap();
        let run = code.find("return __lumoR.run(function").unwrap();
        assert!(code.starts_with("\"use strict\";") && guard < bind && bind < run);
        assert!(code.contains("d('GM_addStyle'") && !code.contains("__T__"));
        assert!(!code.contains("defineProperty(globalThis"));
        assert!(r.messaging);
        // The source still starts on line 2 of its entry.
        assert_eq!(code.split('\n').nth(1), Some("'use strict';"));
    }

    #[test]
    fn maps_metadata_to_chrome_fields() {
        let src = header("// @match https://example.com/*\n// @exclude-match https://example.com/private/*\n// @run-at document-start\n// @noframes\n");
        let r = desired("u1", 1, &meta(&src), &src).unwrap();
        assert_eq!(r.matches, vec!["https://example.com/*"]);
        assert_eq!(r.exclude_matches, vec!["https://example.com/private/*"]);
        assert_eq!(r.run_at.as_deref(), Some("document_start"));
        assert!(!r.all_frames);
        assert_eq!(r.world.as_deref(), Some("USER_SCRIPT"));
        assert_eq!(r.world_id.as_deref(), Some("u1"));
        // The source, after the guard that holds the exclude on other spellings of its path
        // (`rules::server_form`).
        let code = r.js[0].code.as_deref().unwrap_or_default();
        assert!(
            code.ends_with(src.as_str()) && code.contains("private"),
            "{code}"
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["runAt"], "document_start");
        assert_eq!(json["worldId"], "u1");
        assert_eq!(json["excludeMatches"][0], "https://example.com/private/*");
        // Every list is sent, empty or not.
        assert_eq!(json["includeGlobs"], serde_json::json!([]));
        assert_eq!(json["excludeGlobs"], serde_json::json!([]));
    }

    #[test]
    fn include_only_is_not_registered_for_every_page() {
        let src = header("// @include http://example.org:*/*\n");
        let m = meta(&src);
        let r = desired("u", 1, &m, &src).unwrap();
        // The glob's own host, never every page; the guard holds the glob itself.
        assert_eq!(r.matches, vec!["http://example.org/*"]);
        assert!(r.include_globs.is_empty());
        assert!(crate::scripts::match_pattern::parse(&r.matches[0]).is_ok());
        assert!(verdict(&m, "http://example.org:8080/x").runs());
        assert!(!verdict(&m, "http://example.com/").runs());
        assert!(!verdict(&m, "https://include-only.invalid/ never matches").runs());
        let src = header("");
        assert!(desired("u", 1, &meta(&src), &src).is_none());
    }

    #[test]
    fn a_guarded_strict_script_stays_strict() {
        let src = header("// @match https://a.example/*\n// @exclude /x/\n")
            .replace("console.log(1);", "'use strict';\nconsole.log(1);");
        let r = desired("u", 1, &meta(&src), &src).unwrap();
        let code = r.js[0].code.clone().unwrap_or_default();
        assert!(code.starts_with("\"use strict\";(()=>{"), "{code}");
        assert!(code.ends_with(&src));
        let plain = header("// @match https://a.example/*\n// @exclude /x/\n");
        let r = desired("u", 1, &meta(&plain), &plain).unwrap();
        assert!(r.js[0]
            .code
            .as_deref()
            .unwrap_or_default()
            .starts_with("(()=>{"));
        assert!(!starts_strict("/* unterminated"));
        assert!(starts_strict("\u{feff} /* a */ // b\n \"use strict\"; x"));
    }

    #[test]
    fn match_and_include_is_the_union() {
        let src = header("// @match https://a.example/*\n// @include https://b.example/*\n");
        let m = meta(&src);
        assert!(verdict(&m, "https://a.example/x").runs());
        assert!(verdict(&m, "https://b.example/x").runs());
        assert!(!verdict(&m, "https://c.example/x").runs());
    }

    #[test]
    fn verdicts_follow_chrome_rules() {
        let src = header("// @match https://example.com/*\n// @exclude https://example.com/admin*\n// @exclude-match https://example.com/private/*\n");
        let m = meta(&src);
        assert!(verdict(&m, "https://example.com/page").runs());
        assert_eq!(verdict(&m, "https://other.com/"), Verdict::NoMatch);
        assert!(matches!(
            verdict(&m, "https://example.com/private/a"),
            Verdict::Excluded { .. }
        ));
        assert!(matches!(
            verdict(&m, "https://example.com/admin/x"),
            Verdict::Excluded { .. }
        ));
        // The URL is read as the browser reads it.
        assert!(matches!(
            verdict(&m, "https://EXAMPLE.com/a/../private/b"),
            Verdict::Excluded { .. }
        ));
        assert!(verdict(&m, "https://example.com:443/page").runs());
    }

    #[test]
    fn plan_diffs_by_id_and_whole_registration() {
        let src = header("// @match https://a.com/*\n");
        let m = meta(&src);
        let a = desired("a", 1, &m, &src).unwrap();
        let b = desired("b", 1, &m, &src).unwrap();
        let mut b_old = b.clone();
        b_old.js[0].code = Some("old".into());
        let mut stray = a.clone();
        stray.id = "gone".into();
        // Chrome returns defaults filled in, empty lists left out and lists sorted: no difference.
        let mut a = a;
        a.matches = vec!["https://c.com/*".into(), "https://a.com/*".into()];
        let mut a_chrome: Registration = serde_json::from_value(serde_json::json!({
            "id": "a", "matches": ["https://a.com/*", "https://c.com/*"], "allFrames": true,
            "runAt": "document_idle", "worldId": "a", "js": [{"code": src.clone()}]
        }))
        .unwrap();
        let p = plan(
            vec![a.clone(), b.clone()],
            &[a_chrome.clone(), b_old, stray],
        );
        assert!(p.register.is_empty());
        assert_eq!(p.replace, vec![b.clone()]);
        assert_eq!(p.unregister, vec!["gone".to_owned()]);
        // A rule Chrome still holds but we no longer want is a difference.
        a_chrome.exclude_globs = vec!["*old*".into()];
        assert_eq!(plan(vec![a.clone()], &[a_chrome.clone()]).replace.len(), 1);
        a_chrome.exclude_globs.clear();
        // So is a field we never set.
        a_chrome
            .extra
            .insert("newField".into(), serde_json::json!(1));
        assert_eq!(plan(vec![a.clone()], &[a_chrome]).replace.len(), 1);
        let p = plan(vec![a.clone()], &[]);
        assert_eq!(p.register, vec![a]);
        assert!(plan(vec![], &[]).is_empty());
    }
}
