//! The `@require`/`@resource` files a write adds, as its review shows them. They are fetched for
//! the review and the approved write stores exactly those bytes (`gm::asset_store::Reviewed`),
//! so the code the user read is the code Chrome runs. Their text is marked as the diff's is.

use super::diff::{shown_lines, shown_text, visible, Preview};
use crate::gm::assets::Asset;
use serde::{Deserialize, Serialize};

/// One file, as the review surface shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewedFile {
    /// `@require`, or `@resource <name>` (the name marked).
    pub label: String,
    /// As written in the metadata (marked).
    pub url: String,
    /// Where the bytes came from when a redirect moved the request (marked).
    #[serde(default)]
    pub final_url: Option<String>,
    pub sha256: String,
    pub size: usize,
    /// The first part of its text, one marked line per line; `None` when it is not UTF-8 text.
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub shown_lines: usize,
    #[serde(default)]
    pub total_lines: usize,
    /// Whether `text` is less than all of it (the rest is one `reviews.file` away).
    #[serde(default)]
    pub partial: bool,
    /// How the browser reads it, where that is not the text shown.
    #[serde(default)]
    pub note: Option<String>,
}

/// `a`, fetched as `bytes`, as the review shows it.
pub fn shown(a: &Asset, bytes: &[u8]) -> ReviewedFile {
    let label = match &a.name {
        None => "@require".to_owned(),
        Some(n) => format!("@resource {}", visible(n)),
    };
    let text = as_text(bytes);
    let preview = text.map(|t| Preview::of(&shown_lines(t)));
    let kind = if a.is_require() { "code" } else { "file" };
    let note = match (text, &a.charset) {
        (None, None) => Some(format!(
            "Not UTF-8 text, so not shown: the write stores these {} bytes as they are",
            a.size
        )),
        (None, Some(cs)) => Some(format!(
            "Not shown: its server names the charset {}, which this review does not read; the write stores these {} bytes",
            visible(cs),
            a.size
        )),
        // All ASCII reads the same in any charset a server may name.
        (Some(t), Some(cs)) if !t.is_ascii() => Some(format!(
            "Shown as UTF-8, but its server names the charset {}, in which the browser reads this {kind}: its characters outside ASCII read otherwise there",
            visible(cs)
        )),
        _ => None,
    };
    ReviewedFile {
        label,
        url: visible(&a.url),
        final_url: a.final_url.as_deref().map(visible),
        sha256: a.sha256.clone(),
        size: a.size,
        shown_lines: preview.as_ref().map_or(0, |p| p.shown_lines),
        total_lines: preview.as_ref().map_or(0, |p| p.total_lines),
        partial: preview.as_ref().is_some_and(Preview::is_partial),
        text: preview.map(|p| p.text),
        note,
    }
}

/// [`shown`] with all of its text, for a surface that holds it whole (an update's review).
pub fn shown_whole(a: &Asset, bytes: &[u8]) -> ReviewedFile {
    let mut f = shown(a, bytes);
    if f.partial {
        if let Some(t) = as_text(bytes) {
            let lines = shown_lines(t);
            f.shown_lines = lines.len();
            f.total_lines = lines.len();
            f.text = Some(lines.join("\n"));
            f.partial = false;
        }
    }
    f
}

/// All of the file's text, marked, for a reviewer who asks to read the rest of it.
pub fn whole_text(bytes: &[u8]) -> Option<String> {
    as_text(bytes).map(shown_text)
}

/// The bytes as UTF-8 text, a byte order mark left out (the browser reads it as one); `None` for
/// anything else.
fn as_text(bytes: &[u8]) -> Option<&str> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    std::str::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asset(name: Option<&str>, charset: Option<&str>, bytes: &[u8]) -> Asset {
        Asset {
            url: "https://cdn.test/l.js".to_owned(),
            name: name.map(str::to_owned),
            sha256: crate::guard::digest::sha256_hex(bytes),
            size: bytes.len(),
            mime: String::new(),
            final_url: None,
            charset: charset.map(str::to_owned),
        }
    }

    #[test]
    fn code_is_shown_marked_and_a_long_file_says_it_is_partial() {
        let src = "let a = 1;\rsteal(\u{202E}document.cookie);\n";
        let f = shown(&asset(None, None, src.as_bytes()), src.as_bytes());
        assert_eq!(f.label, "@require");
        assert_eq!(
            f.text.as_deref(),
            Some("let a = 1;⟨U+000D⟩\nsteal(⟨U+202E⟩document.cookie);")
        );
        assert_eq!((f.shown_lines, f.total_lines, f.partial), (2, 2, false));
        assert_eq!(f.note, None);
        let long: String = (0..1000).map(|i| format!("x{i}();\n")).collect();
        let f = shown(&asset(None, None, long.as_bytes()), long.as_bytes());
        assert!(f.partial && f.shown_lines < f.total_lines);
        assert!(!f.text.unwrap().contains("x999();"));
        assert!(whole_text(long.as_bytes()).unwrap().contains("x999();"));
    }

    #[test]
    fn bytes_that_are_not_utf8_text_are_not_shown_and_said_so() {
        let png = b"\x89PNG\r\n\x1a\n\xff\x00";
        let f = shown(&asset(Some("logo\u{200B}"), None, png), png);
        assert_eq!(f.label, "@resource logo⟨U+200B⟩");
        assert_eq!(f.text, None);
        assert!(f.note.unwrap().contains("not shown"));
        assert_eq!(whole_text(png), None);
        let latin1 = b"var s = '\xe9';";
        let f = shown(&asset(None, Some("windows-1252"), latin1), latin1);
        assert_eq!(f.text, None);
        assert!(f.note.unwrap().contains("windows-1252"));
    }

    #[test]
    fn utf8_text_read_in_another_charset_is_said_to_read_otherwise() {
        let t = "var s = 'é';".as_bytes();
        let f = shown(&asset(None, Some("windows-1252"), t), t);
        assert!(f.text.is_some());
        assert!(f.note.unwrap().contains("read otherwise"));
        let ascii = b"var s = 1;";
        assert_eq!(
            shown(&asset(None, Some("windows-1252"), ascii), ascii).note,
            None
        );
        // A byte order mark is not shown as a character.
        let bom = b"\xEF\xBB\xBFgo();";
        assert_eq!(
            shown(&asset(None, None, bom), bom).text.as_deref(),
            Some("go();")
        );
    }
}
