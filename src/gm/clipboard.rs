//! `GM_setClipboard` from a menu command the user clicked in the popup. That click is the
//! popup's: the page's document has neither a user action nor the focus, so Chrome refuses the
//! page's own write (`clipboard_js`). The popup, which has both, writes it instead — only for
//! the script whose command was clicked, in the page it was clicked for, within a few seconds
//! of the click (Chrome's own user activation lasts five): a script cannot reach the clipboard
//! through the popup at any other time. This is the rule and the page's request; the provider's
//! side is `provider::gm_clipboard`, the popup's `popup-menu.js`.

use serde_json::{Map, Value};

/// The most text one write carries, in UTF-8 bytes.
pub const MAX_TEXT_BYTES: usize = 512 * 1024;
/// The most the page sends, as JSON text in UTF-16 units: the channel drops a message over
/// 600 KiB unanswered (`channel::message`), and escapes can make the text six times longer.
pub const MAX_JSON_CHARS: usize = 480_000;
/// How long after a click in the popup its script's page may ask the popup to write.
pub const CLICK_WINDOW_MS: f64 = 4_000.0;

/// What the page asks the popup to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    pub text: String,
    /// Written as HTML too (`type` `html`/`text/html`); any other type is written as text.
    pub html: bool,
}

/// The page's `clipboard` request: `{text, type}`, or why not (a leaf: `gm::message` wraps it).
pub fn parse(o: &Map<String, Value>) -> Result<Write, String> {
    let text = o
        .get("text")
        .and_then(Value::as_str)
        .ok_or_else(|| "GM_setClipboard: the text must be a string".to_owned())?;
    if text.len() > MAX_TEXT_BYTES {
        return Err(format!(
            "GM_setClipboard: the text is {} bytes, over the {MAX_TEXT_BYTES} a menu command may copy",
            text.len()
        ));
    }
    let html = o.get("type").and_then(Value::as_str) == Some("text/html");
    Ok(Write {
        text: text.to_owned(),
        html,
    })
}

/// The user's last click on a menu command in the popup.
#[derive(Debug, Clone, PartialEq)]
pub struct Click {
    /// The popup's entry handle (`gm::menu::Entry::handle`): the popup asks by it.
    pub entry: u64,
    pub uuid: String,
    /// Chrome's id of the document the command was clicked for.
    pub document: String,
    pub at: f64,
}

/// What the page is told when the popup may not write for it: Chrome's refusal, which stands.
pub const REFUSED: &str = "GM_setClipboard: Chrome refused to write the clipboard (it allows it \
     after a user action in the page, such as a click, and in the seconds after a click on one of \
     this script's menu commands in the popup)";

/// The entry of the click that lets script `uuid`'s page `document` have the popup write, at
/// `now`; `None` when no such click came within [`CLICK_WINDOW_MS`].
pub fn clicked_for(
    click: Option<&Click>,
    uuid: &str,
    document: Option<&str>,
    now: f64,
) -> Option<u64> {
    let c = click?;
    let fresh = now >= c.at && now - c.at <= CLICK_WINDOW_MS;
    (fresh && c.uuid == uuid && Some(c.document.as_str()) == document).then_some(c.entry)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn a_request_is_text_and_whether_it_is_html() {
        let w = parse(&obj(json!({"text": "<b>x</b>", "type": "text/html"}))).unwrap();
        assert_eq!(
            w,
            Write {
                text: "<b>x</b>".into(),
                html: true
            }
        );
        let w = parse(&obj(json!({"text": "a,b", "type": "text/csv"}))).unwrap();
        assert!(!w.html);
        assert!(parse(&obj(json!({"text": 5}))).is_err());
        let over = "x".repeat(MAX_TEXT_BYTES + 1);
        let e = parse(&obj(json!({"text": over}))).unwrap_err();
        assert!(e.contains("over the 524288"), "{e}");
        assert!(parse(&obj(json!({"text": "x".repeat(MAX_TEXT_BYTES)}))).is_ok());
    }

    #[test]
    fn only_the_clicked_scripts_page_within_the_window() {
        let c = Click {
            entry: 7,
            uuid: "u".into(),
            document: "D".into(),
            at: 1000.0,
        };
        assert_eq!(clicked_for(Some(&c), "u", Some("D"), 1000.0), Some(7));
        assert_eq!(
            clicked_for(Some(&c), "u", Some("D"), 1000.0 + CLICK_WINDOW_MS),
            Some(7)
        );
        assert_eq!(
            clicked_for(Some(&c), "u", Some("D"), 1001.0 + CLICK_WINDOW_MS),
            None
        );
        // Another script in that page, the script in another page, no document, no click.
        assert_eq!(clicked_for(Some(&c), "v", Some("D"), 1500.0), None);
        assert_eq!(clicked_for(Some(&c), "u", Some("E"), 1500.0), None);
        assert_eq!(clicked_for(Some(&c), "u", None, 1500.0), None);
        assert_eq!(clicked_for(None, "u", Some("D"), 1500.0), None);
        // A clock set back does not stretch the window.
        assert_eq!(clicked_for(Some(&c), "u", Some("D"), 999.0), None);
    }
}
