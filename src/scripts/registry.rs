//! `chrome.userScripts` registrations: what one stored script should look like to Chrome, which
//! scripts run on a URL under Chrome's own rules, and the diff between what should be registered
//! and what is. Pure: the provider applies the plan through the `UserScripts` trait.

use super::glob::glob_matches;
use super::match_pattern;
use super::metadata::Metadata;
use serde::{Deserialize, Serialize};

/// Chrome's `RegisteredUserScript`, as far as this provider uses it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Registration {
    pub id: String,
    #[serde(default)]
    pub matches: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude_matches: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include_globs: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude_globs: Vec<String>,
    #[serde(default)]
    pub all_frames: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_at: Option<String>,
    #[serde(default)]
    pub js: Vec<ScriptCode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptCode {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

/// Scripts with only `@include` rules still need a `matches` list for Chrome: every http(s)
/// page, narrowed by the include globs.
const INCLUDE_ONLY_MATCHES: [&str; 1] = ["*://*/*"];

/// The registration for a script, or `None` when it has no rule that lets it run anywhere.
pub fn desired(uuid: &str, meta: &Metadata, source: &str) -> Option<Registration> {
    let matches: Vec<String> = if !meta.matches.is_empty() {
        meta.matches.clone()
    } else if !meta.include_globs.is_empty() {
        INCLUDE_ONLY_MATCHES
            .iter()
            .map(|s| (*s).to_owned())
            .collect()
    } else {
        return None;
    };
    Some(Registration {
        id: uuid.to_owned(),
        matches,
        exclude_matches: meta.exclude_matches.clone(),
        include_globs: meta.include_globs.clone(),
        exclude_globs: meta.exclude_globs.clone(),
        all_frames: !meta.no_frames,
        run_at: Some(run_at_str(meta)),
        js: vec![ScriptCode {
            code: Some(source.to_owned()),
            file: None,
        }],
        world: Some("USER_SCRIPT".to_owned()),
    })
}

fn run_at_str(meta: &Metadata) -> String {
    serde_json::to_value(meta.run_at)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "document_idle".to_owned())
}

/// Why a registration does or does not run on a URL, under Chrome's rules: some `matches`
/// pattern AND (no include globs OR some include glob) AND no exclude match AND no exclude glob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Runs { because: String },
    NoMatch,
    NotIncluded,
    Excluded { by: String },
}

impl Verdict {
    pub fn runs(&self) -> bool {
        matches!(self, Verdict::Runs { .. })
    }

    pub fn explain(&self) -> String {
        match self {
            Verdict::Runs { because } => format!("matched by {because}"),
            Verdict::NoMatch => "no @match or @include rule matches this URL".to_owned(),
            Verdict::NotIncluded => {
                "a @match pattern covers this URL but no @include glob matches it".to_owned()
            }
            Verdict::Excluded { by } => format!("excluded by {by}"),
        }
    }
}

pub fn verdict(reg: &Registration, url: &str) -> Verdict {
    let pattern_hits = |list: &[String]| -> Option<String> {
        list.iter()
            .find(|p| match_pattern::parse(p).is_ok_and(|mp| mp.matches(url)))
            .cloned()
    };
    let Some(hit) = pattern_hits(&reg.matches) else {
        return Verdict::NoMatch;
    };
    let because = if reg.include_globs.is_empty() {
        format!("@match {hit}")
    } else {
        match reg.include_globs.iter().find(|g| glob_matches(g, url)) {
            Some(g) => format!("@include {g}"),
            None => return Verdict::NotIncluded,
        }
    };
    if let Some(p) = pattern_hits(&reg.exclude_matches) {
        return Verdict::Excluded {
            by: format!("@exclude-match {p}"),
        };
    }
    if let Some(g) = reg.exclude_globs.iter().find(|g| glob_matches(g, url)) {
        return Verdict::Excluded {
            by: format!("@exclude {g}"),
        };
    }
    Verdict::Runs { because }
}

/// What to change so Chrome runs exactly the desired scripts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    pub register: Vec<Registration>,
    pub update: Vec<Registration>,
    pub unregister: Vec<String>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.register.is_empty() && self.update.is_empty() && self.unregister.is_empty()
    }
}

/// Compares by effect, not by representation: Chrome fills in defaults (world, runAt) and
/// returns pattern lists sorted, so lists compare as sets.
fn same_effect(a: &Registration, b: &Registration) -> bool {
    let world = |r: &Registration| r.world.clone().unwrap_or_else(|| "USER_SCRIPT".to_owned());
    let run_at = |r: &Registration| {
        r.run_at
            .clone()
            .unwrap_or_else(|| "document_idle".to_owned())
    };
    fn set(v: &[String]) -> std::collections::BTreeSet<&String> {
        v.iter().collect()
    }
    set(&a.matches) == set(&b.matches)
        && set(&a.exclude_matches) == set(&b.exclude_matches)
        && set(&a.include_globs) == set(&b.include_globs)
        && set(&a.exclude_globs) == set(&b.exclude_globs)
        && a.all_frames == b.all_frames
        && run_at(a) == run_at(b)
        && world(a) == world(b)
        && a.js == b.js
}

pub fn plan(desired: Vec<Registration>, actual: &[Registration]) -> Plan {
    let mut p = Plan::default();
    for d in desired.iter() {
        match actual.iter().find(|a| a.id == d.id) {
            None => p.register.push(d.clone()),
            Some(a) if !same_effect(a, d) => p.update.push(d.clone()),
            Some(_) => {}
        }
    }
    for a in actual {
        if !desired.iter().any(|d| d.id == a.id) {
            p.unregister.push(a.id.clone());
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
    fn maps_metadata_to_chrome_fields() {
        let src = header("// @match https://example.com/*\n// @exclude-match https://example.com/private/*\n// @run-at document-start\n// @noframes\n");
        let r = desired("u1", &meta(&src), &src).unwrap();
        assert_eq!(r.matches, vec!["https://example.com/*"]);
        assert_eq!(r.exclude_matches, vec!["https://example.com/private/*"]);
        assert_eq!(r.run_at.as_deref(), Some("document_start"));
        assert!(!r.all_frames);
        assert_eq!(r.world.as_deref(), Some("USER_SCRIPT"));
        assert_eq!(r.js[0].code.as_deref(), Some(src.as_str()));
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["runAt"], "document_start");
        assert_eq!(json["excludeMatches"][0], "https://example.com/private/*");
        assert!(json.get("includeGlobs").is_none());
    }

    #[test]
    fn include_only_and_nowhere() {
        let src = header("// @include https://*.example.org/*\n");
        let r = desired("u", &meta(&src), &src).unwrap();
        assert_eq!(r.matches, vec!["*://*/*"]);
        assert!(verdict(&r, "https://a.example.org/x").runs());
        assert_eq!(verdict(&r, "https://example.com/"), Verdict::NotIncluded);
        let src = header("");
        assert!(desired("u", &meta(&src), &src).is_none());
    }

    #[test]
    fn verdicts_follow_chrome_rules() {
        let src = header("// @match https://example.com/*\n// @exclude https://example.com/admin*\n// @exclude-match https://example.com/private/*\n");
        let r = desired("u", &meta(&src), &src).unwrap();
        assert!(verdict(&r, "https://example.com/page").runs());
        assert_eq!(verdict(&r, "https://other.com/"), Verdict::NoMatch);
        assert!(matches!(
            verdict(&r, "https://example.com/private/a"),
            Verdict::Excluded { .. }
        ));
        assert!(matches!(
            verdict(&r, "https://example.com/admin/x"),
            Verdict::Excluded { .. }
        ));
    }

    #[test]
    fn plan_diffs_by_id_and_effect() {
        let src = header("// @match https://a.com/*\n");
        let m = meta(&src);
        let a = desired("a", &m, &src).unwrap();
        let b = desired("b", &m, &src).unwrap();
        let mut b_old = b.clone();
        b_old.js[0].code = Some("old".into());
        let mut stray = a.clone();
        stray.id = "gone".into();
        // Chrome returns defaults filled in and lists sorted; that is not a difference.
        let mut a = a;
        a.matches = vec!["https://c.com/*".into(), "https://a.com/*".into()];
        let mut a_chrome = a.clone();
        a_chrome.world = None;
        a_chrome.matches.sort();
        assert_ne!(a.matches, a_chrome.matches);
        let p = plan(vec![a.clone(), b.clone()], &[a_chrome, b_old, stray]);
        assert!(p.register.is_empty());
        assert_eq!(p.update, vec![b.clone()]);
        assert_eq!(p.unregister, vec!["gone".to_owned()]);
        let p = plan(vec![a.clone()], &[]);
        assert_eq!(p.register, vec![a]);
        assert!(plan(vec![], &[]).is_empty());
    }
}
