//! Untrusted text of a script's metadata as the pages show it: its invisible and direction
//! characters marked, each `@connect` line and match rule with what it reaches where the line
//! alone may mislead. A leaf: `scripts.list` and the import's confirmation both use it.

use serde_json::Value;

/// The page shows a script's rules, requests and version as they are, so an invisible or
/// direction character in them is marked (`⟨U+200B⟩`), as the review and the source view mark
/// it: `@include *://bank.example/*` with a zero-width space after it runs nowhere, and must
/// not read as if it ran there (such an `@exclude` is refused when parsed; one stored before is
/// shown with the same note). (The name and namespace are cleaned when they are parsed.)
pub(crate) fn marked(summary: &mut Value) {
    use crate::guard::diff::visible;
    let mark = |v: &mut Value| {
        if let Value::String(s) = v {
            *s = visible(s);
        }
    };
    let Some(o) = summary.as_object_mut() else {
        return;
    };
    for key in ["version", "description"] {
        if let Some(v) = o.get_mut(key) {
            mark(v);
        }
    }
    // A `@connect` line with what it reaches where the line alone may mislead (`2130706433`
    // is this computer).
    if let Some(Value::Array(items)) = o.get_mut("connects") {
        for v in items.iter_mut() {
            if let Value::String(c) = v {
                let shown = visible(c);
                *v = Value::String(
                    match crate::gm::connect::parse(crate::web::platform(), c)
                        .ok()
                        .and_then(|r| crate::gm::connect::note(&r, c))
                    {
                        Some(n) => format!("{shown} ({n})"),
                        None => shown,
                    },
                );
            }
        }
    }
    // A rule with what it really names where the rule alone misleads: `@exclude-match` of a
    // look-alike host is another site, a path with `é` or a capital in a glob's host matches
    // no page, and a file pattern's host is ignored.
    use crate::guard::effects::{rule_note, RuleKind};
    for (key, kind) in [
        ("matches", RuleKind::Pattern),
        ("excludeMatches", RuleKind::Pattern),
        ("includeGlobs", RuleKind::Glob),
        ("excludeGlobs", RuleKind::Glob),
    ] {
        if let Some(Value::Array(items)) = o.get_mut(key) {
            for v in items.iter_mut() {
                if let Value::String(r) = v {
                    let shown = visible(r);
                    *v = Value::String(match rule_note(kind, r) {
                        Some(n) => format!("{shown} ({n})"),
                        None => shown,
                    });
                }
            }
        }
    }
    for key in ["grants", "requires"] {
        if let Some(Value::Array(items)) = o.get_mut(key) {
            items.iter_mut().for_each(mark);
        }
    }
    if let Some(Value::Array(assets)) = o.get_mut("assets") {
        for a in assets.iter_mut().filter_map(Value::as_object_mut) {
            for key in ["url", "finalUrl", "name"] {
                if let Some(v) = a.get_mut(key) {
                    mark(v);
                }
            }
        }
    }
}
