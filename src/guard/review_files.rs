//! The `@require`/`@resource` files a write adds, as its review shows them. They are fetched for
//! the review and the approved write stores exactly those bytes (`gm::asset_store::Reviewed`),
//! so the code the user read is the code Chrome runs: a `@require`'s text is decoded as its
//! registration decodes it (`gm::resources::text_of`: a byte order mark, else the answer's
//! charset), then marked as the diff is.

use super::diff::{shown_text, visible, Preview, PREVIEW_BYTES, PREVIEW_LINES};
use crate::gm::assets::Asset;
use crate::gm::resources::{read_as, text_of};
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
    /// What the browser is given of it, as one digest: its bytes, and the URL, name, type and
    /// charset they are read with. An update's page sends these back, and **Update** stores the
    /// files only if each is still the same (a reviewer's server sent the same bytes under
    /// another charset at Update, and other code ran than the dialog showed).
    pub id: String,
    pub size: usize,
    /// The first part of its text, one marked line per line; `None` when it is not text (a
    /// `@resource` such as an image).
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub shown_lines: usize,
    #[serde(default)]
    pub total_lines: usize,
    /// Whether `text` is less than all of it (the rest is one `reviews.file` away).
    #[serde(default)]
    pub partial: bool,
    /// How the browser reads it, or why it is not shown.
    #[serde(default)]
    pub note: Option<String>,
    /// The file, for its whole text on request. Never serialized.
    #[serde(skip)]
    pub asset: Option<Asset>,
}

/// The files of one review, their previews within one budget of [`PREVIEW_LINES`] lines and
/// [`PREVIEW_BYTES`] bytes in all: a review is sent to the popup every second while it waits, so
/// sixteen files do not make it sixteen times larger. What does not fit is one request away.
/// `grants` are the script's: with `GM_getResourceText` every `@resource` is shown as text.
pub fn shown_all(files: &[(Asset, std::rc::Rc<Vec<u8>>)], grants: &[String]) -> Vec<ReviewedFile> {
    shown_all_within(files, grants, PREVIEW_LINES, PREVIEW_BYTES)
}

/// Whether a script with `grants` can read its `@resource` files' bytes: as text
/// (`GM_getResourceText`), or through the `data:` URL `GM_getResourceURL` gives (`atob`, `fetch`),
/// in any spelling (R8: a resource read through its URL was "not text" and ran through `eval`).
pub fn reads_resources(grants: &[String]) -> bool {
    grants.iter().any(|g| {
        matches!(crate::gm::api::classify(g), crate::gm::api::Grant::Known(a)
            if a.name == "GM_getResourceText" || a.name == "GM_getResourceURL")
    })
}

/// The files a script held before a write that are to be shown as if new: all of them but its
/// `@resource` files when the write gives it a grant that reads them (`reads_resources`) and it
/// had none, since a resource a review showed only by its size may now be read and run (R8).
pub fn shown_before(before: &[Asset], old_grants: &[String], new_grants: &[String]) -> Vec<Asset> {
    let newly = reads_resources(new_grants) && !reads_resources(old_grants);
    before
        .iter()
        .filter(|a| !newly || a.is_require())
        .cloned()
        .collect()
}

/// Lines and bytes an update's review shows of its new files in all: it is sent once, and
/// cannot ask for the rest later (a check holds nothing), so an update whose files do not fit
/// is not offered (`by_hand::update`); far past a real library (2 MiB of files at most, a
/// minified one a few lines), but bounded, since a marked byte may take 12 (a hostile server's
/// file of control characters).
pub const UPDATE_PREVIEW_LINES: usize = 200_000;
pub const UPDATE_PREVIEW_BYTES: usize = 8 * 1024 * 1024;

/// [`shown_all`] within a budget of `lines` lines and `bytes` bytes in all. A file listed twice
/// (the same URL on two lines) is shown once.
pub fn shown_all_within(
    files: &[(Asset, std::rc::Rc<Vec<u8>>)],
    grants: &[String],
    lines: usize,
    bytes: usize,
) -> Vec<ReviewedFile> {
    let (mut lines, mut bytes) = (lines, bytes);
    let reads_text = reads_resources(grants);
    let mut seen: Vec<&Asset> = Vec::new();
    files
        .iter()
        .filter(|(a, _)| {
            let first = !seen.contains(&a);
            seen.push(a);
            first
        })
        .map(|(a, b)| {
            let f = shown_within(a, b, reads_text, lines, bytes);
            lines = lines.saturating_sub(f.shown_lines);
            bytes = bytes.saturating_sub(f.text.as_ref().map_or(0, String::len));
            f
        })
        .collect()
}

fn shown_within(
    a: &Asset,
    bytes: &[u8],
    reads_text: bool,
    max_lines: usize,
    max_bytes: usize,
) -> ReviewedFile {
    let label = match &a.name {
        None => "@require".to_owned(),
        Some(n) => format!("@resource {}", visible(n)),
    };
    let text = as_text(a, bytes, reads_text);
    let preview = text
        .as_deref()
        .map(|t| Preview::of_text(t, max_lines, max_bytes));
    // The label a decoder knows: another is read as UTF-8, as the registration reads it.
    let read_in = read_as(a, bytes).filter(|l| crate::web::platform().decode(&[], l).is_some());
    let note = match (&text, read_in) {
        (None, _) => Some(format!(
            "Not text, so not shown (the script has no @grant that reads it, GM_getResourceText or GM_getResourceURL; a later write that adds one shows it): the write stores these {} bytes as they are",
            a.size
        )),
        (Some(_), Some(l)) => Some(format!(
            "Read in {}, as the browser reads it, and shown as read",
            visible(l)
        )),
        (Some(_), None) => None,
    };
    ReviewedFile {
        label,
        url: visible(&a.url),
        final_url: a.final_url.as_deref().map(visible),
        sha256: a.sha256.clone(),
        id: identity(a),
        size: a.size,
        shown_lines: preview.as_ref().map_or(0, |p| p.shown_lines),
        total_lines: preview.as_ref().map_or(0, |p| p.total_lines),
        partial: preview.as_ref().is_some_and(Preview::is_partial),
        text: preview.map(|p| p.text),
        note,
        asset: Some(a.clone()),
    }
}

/// All of the file's text, marked, for a reviewer who asks to read the rest of it.
pub fn whole_text(a: &Asset, bytes: &[u8]) -> Option<String> {
    as_text(a, bytes, true).as_deref().map(shown_text)
}

/// [`ReviewedFile::id`]: the sha256 of the file's record (bytes' sha256, URL, name, type,
/// charset, where a redirect led), which is what its registration is made from.
pub fn identity(a: &Asset) -> String {
    crate::guard::digest::sha256_hex(&serde_json::to_vec(a).unwrap_or_default())
}

/// The text the browser reads: a `@require`'s always (what runs, invalid sequences replaced as
/// it replaces them); a `@resource`'s when the script can read its bytes (`reads_text`:
/// `GM_getResourceText`, which reads it the same way, or `GM_getResourceURL`'s `data:` URL — a
/// reviewer's resource of one invalid byte and a line of code was "not text" and ran through
/// `eval`), when it decodes whole, or when its type is JavaScript (a `data:` URL of it can be
/// loaded as a script); else `None`: an image the script cannot read is not text.
fn as_text(a: &Asset, bytes: &[u8], reads_text: bool) -> Option<String> {
    let text = text_of(a, bytes);
    let replaced =
        text.contains('\u{FFFD}') && !bytes.windows(3).any(|w| w == "\u{FFFD}".as_bytes());
    let script_type = a.mime.contains("javascript") || a.mime.contains("ecmascript");
    (a.is_require() || reads_text || script_type || !replaced).then(|| text.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

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

    fn one(a: &Asset, bytes: &[u8]) -> ReviewedFile {
        shown_all(&[(a.clone(), Rc::new(bytes.to_vec()))], &[]).remove(0)
    }

    #[test]
    fn code_is_shown_marked_and_a_long_file_says_it_is_partial() {
        let src = "let a = 1;\rsteal(\u{202E}document.cookie);\n";
        let a = asset(None, None, src.as_bytes());
        let f = one(&a, src.as_bytes());
        assert_eq!(f.label, "@require");
        assert_eq!(
            f.text.as_deref(),
            Some("let a = 1;⟨U+000D⟩\nsteal(⟨U+202E⟩document.cookie);")
        );
        assert_eq!((f.shown_lines, f.total_lines, f.partial), (2, 2, false));
        assert_eq!(f.note, None);
        let long: String = (0..1000).map(|i| format!("x{i}();\n")).collect();
        let a = asset(None, None, long.as_bytes());
        let f = one(&a, long.as_bytes());
        assert!(f.partial && f.shown_lines < f.total_lines);
        assert!(!f.text.unwrap().contains("x999();"));
        assert!(whole_text(&a, long.as_bytes()).unwrap().contains("x999();"));
        let files = [(a.clone(), Rc::new(long.clone().into_bytes()))];
        let whole =
            shown_all_within(&files, &[], UPDATE_PREVIEW_LINES, UPDATE_PREVIEW_BYTES).remove(0);
        assert!(!whole.partial && whole.text.unwrap().contains("x999();"));
    }

    #[test]
    fn the_files_of_a_review_share_one_preview_budget() {
        let big: String = (0..300).map(|i| format!("y{i}();\n")).collect();
        let a = asset(None, None, big.as_bytes());
        let files: Vec<(Asset, Rc<Vec<u8>>)> = (0..16)
            .map(|i| {
                let a = Asset {
                    url: format!("https://cdn.test/{i}.js"),
                    ..a.clone()
                };
                (a, Rc::new(big.clone().into_bytes()))
            })
            .collect();
        let shown = shown_all(&files, &[]);
        let lines: usize = shown.iter().map(|f| f.shown_lines).sum();
        let bytes: usize = shown
            .iter()
            .map(|f| f.text.as_ref().map_or(0, String::len))
            .sum();
        assert!(
            lines <= PREVIEW_LINES && bytes <= PREVIEW_BYTES,
            "{lines} {bytes}"
        );
        assert!(!shown[0].partial && shown[1].partial && shown[15].partial);
        assert_eq!(
            shown[15].total_lines, 300,
            "a file past the budget still says its size"
        );
    }

    #[test]
    fn a_resource_that_is_not_text_is_not_shown_and_said_so() {
        let png = b"\x89PNG\r\n\x1a\n\xff\x00";
        let f = one(&asset(Some("logo\u{200B}"), None, png), png);
        assert_eq!(f.label, "@resource logo⟨U+200B⟩");
        assert_eq!(f.text, None);
        assert!(f.note.unwrap().contains("not shown"));
        // A @require's is what runs, replacements and all: shown.
        let f = one(&asset(None, None, png), png);
        assert!(f.text.unwrap().contains('\u{FFFD}'));
        // R7: a resource of one invalid byte and a line of code, which the script evals through
        // GM_getResourceText, was "not text": with that grant every resource is shown as read.
        let hidden = b"//\xff\nsteal();";
        let a = asset(Some("cfg"), None, hidden);
        let files = [(a.clone(), Rc::new(hidden.to_vec()))];
        assert_eq!(shown_all(&files, &[]).remove(0).text, None);
        for grant in ["GM_getResourceText", "GM.getResourceText"] {
            let f = shown_all(&files, &[grant.to_owned()]).remove(0);
            assert!(f.text.unwrap().ends_with("\nsteal();"), "{grant}");
        }
        // R8: so with a grant that reads it through its data: URL, in any spelling.
        for grant in [
            "GM_getResourceURL",
            "GM.getResourceUrl",
            "GM.getResourceURL",
        ] {
            let f = shown_all(&files, &[grant.to_owned()]).remove(0);
            assert!(f.text.unwrap().ends_with("\nsteal();"), "{grant}");
        }
        assert_eq!(
            shown_all(&files, &["GM_setValue".to_owned()])
                .remove(0)
                .text,
            None
        );
        // So is one whose type is JavaScript (its data: URL can be loaded as a script).
        let js = Asset {
            mime: "text/javascript".into(),
            ..a
        };
        assert!(one(&js, hidden).text.is_some());
    }

    /// A write that gives a script a grant reading its resources shows those it already held.
    #[test]
    fn a_grant_that_reads_resources_shows_the_stored_ones_again() {
        let req = asset(None, None, b"r");
        let res = asset(Some("cfg"), None, b"c");
        let before = [req.clone(), res.clone()];
        let none: [String; 0] = [];
        let text = ["GM_getResourceText".to_owned()];
        assert_eq!(shown_before(&before, &none, &none), before.to_vec());
        assert_eq!(shown_before(&before, &none, &text), vec![req.clone()]);
        assert_eq!(
            shown_before(&before, &text, &text),
            before.to_vec(),
            "shown when granted"
        );
    }

    /// A file's id changes with anything its registration is made from, not only its bytes.
    #[test]
    fn a_files_id_binds_its_charset_and_type() {
        let a = asset(None, None, b"x");
        let ids = [
            identity(&a),
            identity(&Asset {
                charset: Some("iso-2022-jp".into()),
                ..a.clone()
            }),
            identity(&Asset {
                mime: "text/plain".into(),
                ..a.clone()
            }),
            identity(&Asset {
                name: Some("r".into()),
                ..a.clone()
            }),
        ];
        for (i, x) in ids.iter().enumerate() {
            assert_eq!(
                ids.iter().filter(|y| *y == x).count(),
                1,
                "id {i} not unique"
            );
        }
        assert_eq!(identity(&a), identity(&a.clone()));
    }

    /// The review shows a @require as its registration reads it: a byte order mark decides,
    /// else the charset its answer named (a reviewer found a file served as iso-2022-jp whose
    /// code the review showed commented out, and which ran).
    #[test]
    fn code_is_shown_as_the_browser_reads_it() {
        // Latin-1 (the native platform decodes it): é.
        let latin1 = b"var s = '\xe9';";
        let f = one(&asset(None, Some("windows-1252"), latin1), latin1);
        assert_eq!(f.text.as_deref(), Some("var s = 'é';"));
        assert!(f.note.unwrap().contains("windows-1252"));
        // A UTF-8 byte order mark wins over the charset, and is not shown.
        let bom = "\u{FEFF}var s = 'é';".as_bytes();
        let f = one(&asset(None, Some("windows-1252"), bom), bom);
        assert_eq!(f.text.as_deref(), Some("var s = 'é';"));
        assert_eq!(f.note, None);
        // The same function the registration calls.
        let a = asset(None, Some("windows-1252"), latin1);
        assert_eq!(
            whole_text(&a, latin1).unwrap(),
            text_of(&a, latin1).into_owned()
        );
    }
}
