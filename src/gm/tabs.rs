//! `GM_openInTab` and `GM_notification`: the requests' fields (bounded, parsed from a `"gm"`
//! message, see `gm::message`) and the exact `chrome.tabs.create` / `chrome.notifications.create`
//! arguments the worker makes of them. Pure; the provider (`provider::gm_tabs`) performs them
//! and keeps which tabs and notifications each script opened.

use serde_json::{json, Map, Value};

/// Longest address a script may open, in bytes.
pub const MAX_URL_BYTES: usize = 8 * 1024;

/// Most tabs one script's pages may have open (opened by it) at once; more are refused.
pub const MAX_OPEN_TABS: usize = 20;
/// Most notifications of one script shown at once; more are refused.
pub const MAX_NOTIFICATIONS: usize = 5;
/// A notification's title and text are cut at these many characters.
pub const MAX_TITLE_CHARS: usize = 120;
pub const MAX_TEXT_CHARS: usize = 1000;
/// Longest `data:image/…` URL a notification may show, in bytes (other images are not shown:
/// Chrome takes only data, blob or extension URLs).
pub const MAX_IMAGE_BYTES: usize = 64 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenTab {
    pub url: String,
    pub active: bool,
    /// Right after the opening tab (and with it as opener), as Violentmonkey does.
    pub insert: bool,
    /// With the opening tab as its opener (Chrome returns to it when this one closes).
    pub set_parent: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub title: String,
    pub text: String,
    pub image: Option<String>,
    pub silent: bool,
    /// Tampermonkey's `tag`: a notification of the same script with the same tag is replaced
    /// by this one (at most [`MAX_TAG_CHARS`]; none when empty).
    pub tag: Option<String>,
}

/// Longest notification tag, in characters; a longer one is cut.
pub const MAX_TAG_CHARS: usize = 128;

/// Refusals are the message the script reads (`gm::message` wraps them).
fn bad(what: &str) -> String {
    format!("GM request: {what}")
}

fn flag(o: &Map<String, Value>, k: &str, default: bool) -> bool {
    o.get(k).and_then(Value::as_bool).unwrap_or(default)
}

fn text(o: &Map<String, Value>, k: &str, max_chars: usize) -> String {
    let s = o.get(k).and_then(Value::as_str).unwrap_or_default();
    // Cut before counting the whole of a huge string (the channel bounds the message anyway).
    crate::text::ellipsize(s, max_chars)
}

/// Whether a script may open `url` in a tab: http(s) only — never `javascript:`, `data:`,
/// `file:`, `chrome:` or an extension page, which would run code or reach what a web page
/// cannot.
pub fn allowed_url(url: &str) -> bool {
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    (lower.starts_with("http://") || lower.starts_with("https://"))
        && !url.chars().any(|c| c.is_control() || c == ' ')
        && url.len() <= MAX_URL_BYTES
}

/// The refusal the script reads when `url` may not be opened (checked by the provider, so the
/// script is answered with it rather than the request being dropped as malformed).
pub fn refuse_url(url: &str) -> Option<String> {
    (!allowed_url(url)).then(|| {
        format!(
            "GM_openInTab: only http and https addresses can be opened, not {:?}",
            crate::text::ellipsize(url, 80)
        )
    })
}

pub fn open_tab(o: &Map<String, Value>) -> Result<OpenTab, String> {
    let url = o
        .get("url")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("url must be a string"))?;
    if url.len() > MAX_URL_BYTES {
        return Err(bad(&format!("url is over {MAX_URL_BYTES} bytes")));
    }
    Ok(OpenTab {
        url: url.to_owned(),
        active: flag(o, "active", true),
        insert: flag(o, "insert", true),
        set_parent: flag(o, "setParent", false),
    })
}

/// The tab a script asked from, as Chrome reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opener {
    pub tab: i64,
    pub index: Option<i64>,
    pub window: Option<i64>,
}

/// `chrome.tabs.create` properties. The new tab opens in the opener's window (as in
/// Violentmonkey): by default Chrome picks the last focused one, where an `openerTabId` from
/// another window is an error and an `index` is a place in the wrong strip.
pub fn create_props(t: &OpenTab, opener: Option<Opener>) -> Value {
    let mut p = Map::new();
    p.insert("url".into(), json!(t.url));
    p.insert("active".into(), json!(t.active));
    if let Some(Opener {
        tab: id,
        index,
        window,
    }) = opener
    {
        if let Some(w) = window {
            p.insert("windowId".into(), json!(w));
        }
        if t.insert {
            if let Some(i) = index.and_then(|i| i.checked_add(1)) {
                p.insert("index".into(), json!(i));
            }
        }
        if t.insert || t.set_parent {
            p.insert("openerTabId".into(), json!(id));
        }
    }
    Value::Object(p)
}

pub fn notice(o: &Map<String, Value>) -> Result<Notice, String> {
    let tag = Some(text(o, "tag", MAX_TAG_CHARS)).filter(|t| !t.is_empty());
    let text = text(o, "text", MAX_TEXT_CHARS);
    if text.is_empty() {
        return Err("GM_notification: the text must not be empty".into());
    }
    let image = o
        .get("image")
        .and_then(Value::as_str)
        .filter(|i| i.starts_with("data:image/") && i.len() <= MAX_IMAGE_BYTES)
        .map(str::to_owned);
    Ok(Notice {
        title: self::text(o, "title", MAX_TITLE_CHARS),
        text,
        image,
        silent: flag(o, "silent", false),
        tag,
    })
}

/// `chrome.notifications.create` options; `script` is the script's name (shown as the
/// notification's context, so the user sees which script speaks), `icon` the extension's icon.
pub fn notification_options(n: &Notice, script: &str, icon: &str) -> Value {
    json!({
        "type": "basic",
        "iconUrl": n.image.as_deref().unwrap_or(icon),
        // Untitled, it is the script's own name, as Tampermonkey and Violentmonkey title it.
        "title": if n.title.is_empty() { crate::text::ellipsize(script, MAX_TITLE_CHARS) } else { n.title.clone() },
        "message": n.text,
        "contextMessage": crate::text::ellipsize(script, 80),
        "silent": n.silent,
    })
}

/// A notification or tab id field.
pub fn tab_id(o: &Map<String, Value>) -> Result<i64, String> {
    o.get("tab")
        .and_then(Value::as_i64)
        .ok_or_else(|| bad("tab must be a whole number"))
}

pub fn notice_id(o: &Map<String, Value>) -> Result<String, String> {
    o.get("id")
        .and_then(Value::as_str)
        .filter(|s| s.len() <= 64)
        .map(str::to_owned)
        .ok_or_else(|| bad("id must be a notification id"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn only_web_addresses_open() {
        for ok in ["https://a.test/x", "HTTP://a.test/"] {
            assert!(refuse_url(ok).is_none(), "{ok}");
        }
        for bad in [
            "javascript:alert(1)",
            "JavaScript:alert(1)",
            "chrome://settings",
            "chrome-extension://abc/options.html",
            "file:///etc/passwd",
            "data:text/html,<script>1</script>",
            "about:blank",
            "https://a.test/\nx",
            "",
        ] {
            let e = refuse_url(&open_tab(&o(json!({"url": bad}))).unwrap().url).unwrap();
            assert!(e.contains("only http and https"), "{bad}: {e}");
        }
        let long = format!("https://a.test/{}", "x".repeat(MAX_URL_BYTES));
        assert!(open_tab(&o(json!({"url": long}))).is_err());
        assert!(open_tab(&o(json!({}))).is_err());
    }

    #[test]
    fn tab_options_follow_violentmonkey() {
        let t = open_tab(&o(json!({"url": "https://a.test/"}))).unwrap();
        assert_eq!((t.active, t.insert, t.set_parent), (true, true, false));
        let opener = Some(Opener {
            tab: 7,
            index: Some(2),
            window: Some(4),
        });
        assert_eq!(
            create_props(&t, opener),
            json!({"url": "https://a.test/", "active": true, "index": 3, "openerTabId": 7, "windowId": 4})
        );
        let t = open_tab(&o(
            json!({"url": "https://a.test/", "active": false, "insert": false, "setParent": true}),
        ))
        .unwrap();
        assert_eq!(
            create_props(&t, opener),
            json!({"url": "https://a.test/", "active": false, "openerTabId": 7, "windowId": 4})
        );
        assert_eq!(
            create_props(&t, None),
            json!({"url": "https://a.test/", "active": false})
        );
    }

    #[test]
    fn a_notice_is_bounded_and_shows_its_script() {
        let n = notice(&o(
            json!({"text": "t".repeat(5000), "title": "", "image": "https://x/y.png"}),
        ))
        .unwrap();
        assert!(n.text.chars().count() <= MAX_TEXT_CHARS + 1);
        assert_eq!((n.title.as_str(), n.image.as_deref()), ("", None));
        let v = notification_options(&n, "My script", "icon.png");
        assert_eq!(
            (
                v["iconUrl"].as_str(),
                v["contextMessage"].as_str(),
                v["title"].as_str()
            ),
            (Some("icon.png"), Some("My script"), Some("My script"))
        );
        assert!(notice(&o(json!({"text": ""}))).is_err());
        let n = notice(&o(
            json!({"text": "x", "image": "data:image/png;base64,AAAA"}),
        ))
        .unwrap();
        assert_eq!(n.image.as_deref(), Some("data:image/png;base64,AAAA"));
    }
}
