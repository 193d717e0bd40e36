//! The GM functions a `@grant` can name, and what this provider does with each.
//!
//! A grant is one of: a function this provider gives the script ([`Support::Provided`]), a name
//! Violentmonkey or Tampermonkey know that this provider does not give yet
//! ([`Support::NotProvided`]: the script runs without it, and validation says so), or a name no
//! manager knows ([`Grant::Unknown`], almost always a typo). `@grant none`, or no `@grant` at
//! all (Violentmonkey's reading), gives the script no GM function and no channel to the
//! provider.

/// What the provider does with one known API name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// Defined in the script's world by the prelude.
    Provided,
    /// Known to other managers; this provider does not define it (yet).
    NotProvided,
}

/// One known API: its `GM_*` (or other) name, the `GM.*` promise form's name when there is
/// one, and whether it needs the channel to the service worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Api {
    pub name: &'static str,
    pub support: Support,
    /// Needs messages to the service worker (values, requests, menu commands…).
    pub needs_channel: bool,
}

const fn api(name: &'static str, support: Support, needs_channel: bool) -> Api {
    Api {
        name,
        support,
        needs_channel,
    }
}

use Support::{NotProvided, Provided};

/// Every name a `@grant` may carry, in the classic form; `GM.x` names map to `GM_x` (with
/// `GM.xmlHttpRequest` ↔ `GM_xmlhttpRequest`).
pub const APIS: &[Api] = &[
    api("GM_info", Provided, false),
    api("GM_addStyle", Provided, false),
    api("GM_addElement", Provided, false),
    api("GM_log", Provided, false),
    api("unsafeWindow", Provided, false),
    api("GM_getValue", Provided, true),
    api("GM_setValue", Provided, true),
    api("GM_deleteValue", Provided, true),
    api("GM_listValues", Provided, true),
    api("GM_getValues", Provided, true),
    api("GM_setValues", Provided, true),
    api("GM_deleteValues", Provided, true),
    api("GM_addValueChangeListener", Provided, true),
    api("GM_removeValueChangeListener", Provided, true),
    api("GM_xmlhttpRequest", Provided, true),
    // Made in the page on top of `GM_xmlhttpRequest`'s channel (`gm::download_js`): the worker
    // fetches the file under the same `@connect` rules, the page saves it.
    api("GM_download", Provided, true),
    api("GM_registerMenuCommand", Provided, true),
    api("GM_unregisterMenuCommand", Provided, true),
    api("GM_openInTab", Provided, true),
    api("GM_notification", Provided, true),
    // Written from the script's own world (`gm::clipboard_js`): no channel.
    api("GM_setClipboard", Provided, false),
    api("GM_getResourceText", Provided, false),
    api("GM_getResourceURL", Provided, false),
    // One object per (script, tab), kept by the worker (`gm::tab_objects`).
    api("GM_getTab", Provided, true),
    api("GM_saveTab", Provided, true),
    api("GM_getTabs", Provided, true),
    api("GM_cookie", NotProvided, true),
    api("GM_webRequest", NotProvided, true),
    api("GM_audio", NotProvided, true),
    api("window.close", NotProvided, true),
    api("window.focus", NotProvided, true),
    // A single-page app's URL changes, made in the script's world from the Navigation API
    // (`gm::inject::URLCHANGE_JS`): no channel.
    api("window.onurlchange", Provided, false),
];

/// How one `@grant` value reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// `@grant none`.
    None,
    Known(Api),
    Unknown,
}

/// Classifies one `@grant` value. `GM.getValue` is the promise form of `GM_getValue`.
pub fn classify(value: &str) -> Grant {
    if value == "none" {
        return Grant::None;
    }
    let classic = match value.strip_prefix("GM.") {
        // The promise forms' own spellings; the classic spellings on `GM` (Violentmonkey maps
        // any `GM.<name>` to `GM_<name>`) are given too (`gm::inject`, `gm::resources`).
        Some("xmlHttpRequest") => "GM_xmlhttpRequest".to_owned(),
        Some("getResourceUrl") => "GM_getResourceURL".to_owned(),
        Some(rest) => format!("GM_{rest}"),
        None => value.to_owned(),
    };
    APIS.iter()
        .find(|a| a.name == classic)
        .map_or(Grant::Unknown, |a| Grant::Known(*a))
}

/// The name a script meant by an unknown `@grant` that differs from a known one only in
/// letter case (`GM.xmlhttpRequest` for `GM.xmlHttpRequest`, `GM_getvalue`), if any.
pub fn meant(value: &str) -> Option<String> {
    let promise = |classic: &str| match classic {
        "GM_xmlhttpRequest" => Some("GM.xmlHttpRequest".to_owned()),
        "GM_getResourceURL" => Some("GM.getResourceUrl".to_owned()),
        c => c.strip_prefix("GM_").map(|r| format!("GM.{r}")),
    };
    let wanted_promise = value.starts_with("GM.") || value.starts_with("gm.");
    APIS.iter().find_map(|a| {
        let name = if wanted_promise {
            promise(a.name)?
        } else {
            a.name.to_owned()
        };
        (name != value && name.eq_ignore_ascii_case(value)).then_some(name)
    })
}

/// What a script with any `@grant` other than `none` is given without granting it: Violentmonkey,
/// Tampermonkey and Greasemonkey 4 give `GM_info` (`GM.info`) to every script, and Violentmonkey
/// and Tampermonkey `unsafeWindow`, so real scripts read `GM_info.script.version` or set
/// `unsafeWindow.x` with no `@grant` line for them (a `ReferenceError` on their first line here
/// before). Neither reaches anything the script's own world does not hold already (`unsafeWindow`
/// is that world's `window`: [`UNSAFE_WINDOW_NOTE`]).
pub const WITHOUT_GRANT: [&str; 2] = ["GM_info", "unsafeWindow"];

/// The classic names of the APIs this script is given, deduplicated, in [`APIS`] order: the
/// provided ones its grants name and, with any grant but `none`, [`WITHOUT_GRANT`].
/// Empty for `@grant none` alone or no grant at all.
pub fn provided(grants: &[String]) -> Vec<&'static str> {
    let any = grants.iter().any(|g| classify(g) != Grant::None);
    APIS.iter()
        .filter(|a| a.support == Provided)
        .filter(|a| {
            (any && WITHOUT_GRANT.contains(&a.name))
                || grants
                    .iter()
                    .any(|g| matches!(classify(g), Grant::Known(k) if k.name == a.name))
        })
        .map(|a| a.name)
        .collect()
}

/// Whether the script's world is given messaging to the service worker: only when a grant
/// it is given needs it (`@grant none` and style-only scripts get no channel).
pub fn needs_channel(grants: &[String]) -> bool {
    grants
        .iter()
        .any(|g| matches!(classify(g), Grant::Known(a) if a.support == Provided && a.needs_channel))
}

/// What `unsafeWindow` is here, in words for `validate_script`.
pub const UNSAFE_WINDOW_NOTE: &str = "@grant unsafeWindow: here unsafeWindow is the window of \
     the script's own isolated world. It shares the page's DOM (document, elements, events) but \
     NOT the page's JavaScript: the page's own globals and functions (window.jQuery, an app's \
     objects) are not visible through it, and properties the script sets on it are not seen by \
     the page. In a manager that runs scripts in the page's MAIN world, unsafeWindow is the \
     page's own window, with all of that. Risky either way: a script that reaches into the page \
     can be fed data by the page.";

#[cfg(test)]
mod tests {
    use super::*;

    fn grants(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn promise_forms_map_to_classic_names() {
        for (promise, classic) in [
            ("GM.info", "GM_info"),
            ("GM.addStyle", "GM_addStyle"),
            ("GM.xmlHttpRequest", "GM_xmlhttpRequest"),
            ("GM.getResourceUrl", "GM_getResourceURL"),
            ("GM.getValue", "GM_getValue"),
            ("GM.download", "GM_download"),
        ] {
            assert!(
                matches!(classify(promise), Grant::Known(a) if a.name == classic),
                "{promise}"
            );
        }
        assert_eq!(classify("none"), Grant::None);
        for typo in [
            "GM_getvalue",
            "GM.xmlhttprequest",
            "GM_",
            "GM.",
            "",
            "gm_info",
            "window",
        ] {
            assert_eq!(classify(typo), Grant::Unknown, "{typo}");
        }
    }

    #[test]
    fn provided_is_exactly_the_granted_provided_apis() {
        assert!(provided(&grants(&["none"])).is_empty());
        assert!(provided(&[]).is_empty());
        assert_eq!(
            provided(&grants(&[
                "GM.addStyle",
                "GM_info",
                "GM_getValue",
                "bogus",
                "GM_info"
            ])),
            ["GM_info", "GM_addStyle", "unsafeWindow", "GM_getValue"]
        );
        assert_eq!(
            provided(&grants(&["unsafeWindow"])),
            ["GM_info", "unsafeWindow"]
        );
    }

    /// As every manager gives them: a script granted anything (even only a name this provider
    /// does not give, or a typo) reads `GM_info`/`GM.info` and sets `unsafeWindow.x` without a
    /// grant for them; `@grant none` and no grant stay empty (README, "Differences").
    #[test]
    fn info_and_unsafe_window_come_with_any_grant_but_none() {
        for g in [
            &["GM.xmlHttpRequest"][..],
            &["GM_setValue", "GM_getValue"][..],
            &["GM_cookie"][..],
            &["window.onurlchange"][..],
            &["GM_bogus"][..],
            &["none", "GM_addStyle"][..],
        ] {
            let p = provided(&grants(g));
            assert!(
                p.contains(&"GM_info") && p.contains(&"unsafeWindow"),
                "{g:?}: {p:?}"
            );
        }
        assert!(provided(&grants(&["none"])).is_empty());
        assert!(provided(&grants(&["none", "none"])).is_empty());
        assert!(provided(&[]).is_empty());
    }

    /// Either spelling gives both forms, as for every other API; a script granted it has the
    /// channel (the file is fetched by the worker) and validation no longer calls it missing.
    #[test]
    fn download_is_given_in_either_spelling_and_needs_the_channel() {
        for g in ["GM_download", "GM.download"] {
            assert!(
                matches!(classify(g), Grant::Known(a) if a.name == "GM_download" && a.support == Provided),
                "{g}"
            );
            assert_eq!(
                provided(&grants(&[g])),
                ["GM_info", "unsafeWindow", "GM_download"],
                "{g}"
            );
            assert!(needs_channel(&grants(&[g])), "{g}");
        }
        // The others other managers have stay not provided.
        for g in ["GM_cookie", "GM.cookie", "GM_webRequest", "GM_audio"] {
            assert!(
                matches!(classify(g), Grant::Known(a) if a.support == NotProvided),
                "{g}"
            );
        }
    }

    #[test]
    fn values_need_the_channel() {
        assert!(needs_channel(&grants(&["GM.getValue"])));
    }

    #[test]
    fn style_and_info_need_no_channel() {
        assert!(!needs_channel(&grants(&[
            "GM_addStyle",
            "GM_info",
            "unsafeWindow",
            "none"
        ])));
        assert!(!needs_channel(&[]));
    }

    #[test]
    fn names_are_unique() {
        for (i, a) in APIS.iter().enumerate() {
            assert!(
                APIS.iter().skip(i + 1).all(|b| b.name != a.name),
                "{}",
                a.name
            );
        }
    }
}
