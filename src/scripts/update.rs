//! Script updates, the pure part: which URL a script's updates are checked at and downloaded
//! from (`@updateURL`, `@downloadURL`), Violentmonkey's version order, and whether a fetched
//! text is an update of the installed script. The fetching is `by_hand::update`'s (through the
//! env's `Http`), the deciding is here. Everything fetched is untrusted (a hostile update
//! server): read, never unwrapped, in time linear in its length.

use super::metadata::{self, Metadata, Severity};
use crate::text::ellipsize;
use crate::web::WebPlatform;
use std::cmp::Ordering;
use std::fmt;

/// How long a check may take, the download of the full script included (as a write's
/// `@require` fetches: `gm::assets::WRITE_FETCH_BUDGET_MS`).
pub const CHECK_BUDGET_MS: u64 = 30_000;

/// Characters of a version, a name or a URL quoted in a message.
const QUOTED_CHARS: usize = 80;

/// Where a script's updates come from, as Violentmonkey reads them: it is checked at
/// `@updateURL`, else `@downloadURL` (a `.meta.js` may hold only the header), and the full
/// script is downloaded from `@downloadURL`, else `@updateURL` — but never from a `.meta.js`,
/// which by convention (Tampermonkey's, GreasyFork's) holds the header alone: stored, it would
/// be a script without its code. Violentmonkey downloads from `@downloadURL` or the URL the
/// script was installed from, and without either only says a new version exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateUrls {
    pub check: String,
    /// `None`: nowhere to download the full script from (the only URL is a `.meta.js`).
    pub download: Option<String>,
}

/// Whether `url`'s path ends in `.meta.js` (any case), the header-only file's convention.
fn is_meta_js(web: &dyn WebPlatform, url: &str) -> bool {
    web.parse_url(url).is_ok_and(|u| {
        let path = u.path_query.split('?').next().unwrap_or("");
        path.len() >= 8
            && path
                .get(path.len() - 8..)
                .is_some_and(|end| end.eq_ignore_ascii_case(".meta.js"))
    })
}

/// The script's update URLs, if it names any that is a URL at all (GreasyFork writes
/// `@updateURL none` to turn updates off: no URL, no updates) and its `@downloadURL` is not
/// `none` (Tampermonkey's documented switch: "no update check will be done", which users add
/// to keep their own edits). Whether this provider may fetch
/// from there is the fetch's to say (`gm::assets::check_scheme`, as for `@require`), so the user
/// is told why a URL is refused rather than finding no button.
pub fn urls(web: &dyn WebPlatform, meta: &Metadata) -> Option<UpdateUrls> {
    let key = |want: &str| {
        meta.other
            .iter()
            .find(|(k, v)| k.eq_ignore_ascii_case(want) && web.parse_url(v).is_ok())
            .map(|(_, v)| v.clone())
    };
    let off = meta.other.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("downloadURL") && v.trim().eq_ignore_ascii_case("none")
    });
    if off {
        return None;
    }
    let (update, download) = (key("updateURL"), key("downloadURL"));
    let check = update.clone().or_else(|| download.clone())?;
    let download = download.or(update).filter(|u| !is_meta_js(web, u));
    Some(UpdateUrls { check, download })
}

/// Why an update was refused; nothing was stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpdateError {
    /// The script names no `@updateURL` or `@downloadURL`.
    NoUrl,
    /// A URL this provider does not fetch from (scheme, a redirect's target).
    Refused { url: String, why: String },
    /// The network, a timeout, the check's time budget.
    Fetch { url: String, why: String },
    /// The server answered with an error status.
    Status { url: String, status: u16 },
    /// More than a script may hold.
    TooLarge { url: String, max: usize },
    /// Not UTF-8.
    NotText { url: String },
    /// No `==UserScript==` header that parses: its first error.
    Header { url: String, why: String },
    /// A header without `@version`.
    NoVersion { url: String },
    /// Another script's header.
    NotThisScript {
        name: String,
        namespace: Option<String>,
        installed_name: String,
        installed_namespace: Option<String>,
    },
    /// Newer, but the only URL is a `.meta.js`: nowhere to download the script itself from.
    NoDownload { url: String, offered: String },
    /// Not newer than the installed version (equal or older).
    NotNewer {
        installed: Option<String>,
        offered: String,
    },
    /// The full script is not one this provider stores (its metadata's error).
    Invalid { why: String },
    /// At Update: the server now sends other bytes than the user reviewed.
    Changed,
    /// The new `@require`/`@resource` files cannot all be shown in the review (past its bound, as
    /// marked): not offered, since Update stores only what was shown.
    FilesNotShown {
        lines: usize,
        max_lines: usize,
        max_mib: usize,
    },
}

fn shown(s: &str) -> String {
    crate::guard::diff::visible(&ellipsize(s, QUOTED_CHARS))
}

fn shown_url(s: &str) -> String {
    crate::guard::diff::visible(&ellipsize(s, 200))
}

fn identity(name: &str, namespace: Option<&str>) -> String {
    match namespace {
        Some(ns) => format!("\"{}\" (@namespace \"{}\")", shown(name), shown(ns)),
        None => format!("\"{}\" (no @namespace)", shown(name)),
    }
}

impl fmt::Display for UpdateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tail = "the script was not changed";
        match self {
            UpdateError::NoUrl => write!(
                f,
                "this script names no @updateURL or @downloadURL, so there is nowhere to check for an update"
            ),
            UpdateError::Refused { url, why } => {
                write!(f, "{}: {why}; {tail}", shown_url(url))
            }
            UpdateError::Fetch { url, why } => write!(
                f,
                "{} could not be fetched ({}); {tail}",
                shown_url(url),
                shown(why)
            ),
            UpdateError::Status { url, status } => write!(
                f,
                "the server answered HTTP {status} for {}; {tail}",
                shown_url(url)
            ),
            UpdateError::TooLarge { url, max } => write!(
                f,
                "{} sent more than {max} bytes, over the limit for a script; {tail}",
                shown_url(url)
            ),
            UpdateError::NotText { url } => write!(
                f,
                "{} did not send UTF-8 text; {tail}",
                shown_url(url)
            ),
            UpdateError::Header { url, why } => write!(
                f,
                "what {} sent has no readable // ==UserScript== header ({}); {tail}",
                shown_url(url),
                shown(why)
            ),
            UpdateError::NoVersion { url } => write!(
                f,
                "the header {} sent has no @version, so it cannot be told newer; {tail}",
                shown_url(url)
            ),
            UpdateError::NotThisScript {
                name,
                namespace,
                installed_name,
                installed_namespace,
            } => write!(
                f,
                "not an update of this script: the server sent {}, and this script is {}; {tail}",
                identity(name, namespace.as_deref()),
                identity(installed_name, installed_namespace.as_deref())
            ),
            UpdateError::NoDownload { url, offered } => write!(
                f,
                "version {} is available, but {} holds the header alone (a .meta.js) and this \
                 script names no other @downloadURL to download the new version from; {tail}",
                shown(offered),
                shown_url(url)
            ),
            UpdateError::NotNewer { installed, offered } => write!(
                f,
                "the server's version {} is not newer than the installed {}; {tail}",
                shown(offered),
                installed.as_deref().map_or_else(|| "one (it has no @version)".to_owned(), shown)
            ),
            UpdateError::Invalid { why } => write!(
                f,
                "the new version is not a script this provider stores ({}); {tail}",
                crate::guard::diff::visible(&ellipsize(why, 300))
            ),
            UpdateError::FilesNotShown { lines, max_lines, max_mib } => write!(
                f,
                "the new version's @require/@resource files cannot all be shown here ({lines} lines; at most {max_lines} lines or {max_mib} MiB as shown, line breaks and invisible characters marked), so it is not offered: Update stores only what this page can show"
            ),
            UpdateError::Changed => write!(
                f,
                "the server now sends something other than the version you reviewed; {tail}. Check for the update again to review what it sends now"
            ),
        }
    }
}

/// The header of a fetched text (a `.meta.js`, or a whole script): its metadata, or the first
/// error that made it unreadable.
pub fn read_header(url: &str, text: &str) -> Result<Metadata, UpdateError> {
    let parsed = metadata::parse(text);
    match parsed.metadata {
        Some(m) => Ok(m),
        None => {
            let why = parsed
                .diagnostics
                .iter()
                .find(|d| d.severity == Severity::Error)
                .map_or_else(
                    || "no metadata".to_owned(),
                    |d| format!("line {}: {}", d.line, d.message),
                );
            Err(UpdateError::Header {
                url: url.to_owned(),
                why,
            })
        }
    }
}

/// Whether `text` holds code besides its metadata block (Violentmonkey's test of a "smart"
/// server's `.meta.js`, which sends the header alone): anything but whitespace outside it.
pub fn has_code(text: &str) -> bool {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut inside = false;
    for line in text.split('\n') {
        let t = line.trim();
        let marker = t
            .strip_prefix("//")
            .map(|r| r.trim_start_matches([' ', '\t']));
        match marker {
            Some("==UserScript==") if !inside => inside = true,
            Some("==/UserScript==") if inside => inside = false,
            _ if inside || t.is_empty() => {}
            _ => return true,
        }
    }
    false
}

/// What a check found: the server's version against the installed one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Newer,
    Same,
    Older,
}

/// Whether `offered` (a fetched header) is an update of `installed`: the same `@name` and
/// `@namespace`, with a `@version`, compared in Violentmonkey's order.
pub fn judge(url: &str, installed: &Metadata, offered: &Metadata) -> Result<Verdict, UpdateError> {
    if offered.name != installed.name || offered.namespace != installed.namespace {
        return Err(UpdateError::NotThisScript {
            name: offered.name.clone(),
            namespace: offered.namespace.clone(),
            installed_name: installed.name.clone(),
            installed_namespace: installed.namespace.clone(),
        });
    }
    let Some(v) = offered.version.as_deref() else {
        return Err(UpdateError::NoVersion {
            url: url.to_owned(),
        });
    };
    Ok(
        match compare_versions(v, installed.version.as_deref().unwrap_or("")) {
            Ordering::Greater => Verdict::Newer,
            Ordering::Equal => Verdict::Same,
            Ordering::Less => Verdict::Older,
        },
    )
}

/// Violentmonkey's `compareVersion` (`src/common/util.js`): `main[-pre]`, where `pre` starts at
/// the first `-` followed by a character of `[-.0-9a-zA-Z]` and runs as long as they do. The
/// mains are compared part by part (split at `.`, the longer one's missing parts are 0, each
/// part read as `parseInt` reads it: its leading ASCII digits, else 0); a version without a
/// `pre` is greater than the same main with one; two `pre`s are compared as semver compares
/// pre-releases (numeric parts as numbers, others as text, then the longer is greater).
///
/// Numbers are compared exactly, however long (Violentmonkey's are doubles, so past 2^53 two
/// versions may tie there that differ here). Linear in the lengths; never panics. As in
/// Violentmonkey, two `pre` parts of which one is a number and the other text compare as text,
/// so the order is not transitive across such parts (`1-26` < `1-2l` < `1-6` < `1-26`): an update
/// compares two versions only, both ways round alike (`fuzz/fuzz_targets/update.rs`).
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    let (main_a, pre_a) = split_pre(a);
    let (main_b, pre_b) = split_pre(b);
    compare_mains(main_a, main_b).then_with(|| match (pre_a, pre_b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Greater,
        (Some(_), None) => Ordering::Less,
        (Some(x), Some(y)) => compare_pres(x, y),
    })
}

fn in_pre_class(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '.'
}

/// `/^(.*?)-([-.0-9a-z]+)/i`: the main and the pre-release part, if any. `.` matches no line
/// terminator, so none may come before the `-`.
fn split_pre(v: &str) -> (&str, Option<&str>) {
    for (i, c) in v.char_indices() {
        if matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}') {
            break;
        }
        if c != '-' {
            continue;
        }
        let rest = v.get(i + 1..).unwrap_or("");
        let len = rest
            .char_indices()
            .find(|(_, c)| !in_pre_class(*c))
            .map_or(rest.len(), |(j, _)| j);
        if len > 0 {
            return (v.get(..i).unwrap_or(""), rest.get(..len));
        }
    }
    (v, None)
}

/// JavaScript's white space and line terminators, which `parseInt` skips first.
fn js_space(c: char) -> bool {
    c.is_whitespace() || c == '\u{feff}'
}

/// The digits `parseInt(part, 10)` reads, without leading zeros (`""` for 0, and for NaN, which
/// Violentmonkey takes as 0). A sign: `-` before digits cannot reach here (it starts the
/// pre-release part), and `-0` is 0.
fn leading_number(part: &str) -> &str {
    let s = part.trim_start_matches(js_space);
    let s = s
        .strip_prefix('+')
        .or_else(|| s.strip_prefix('-'))
        .unwrap_or(s);
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    s.get(..end).unwrap_or("").trim_start_matches('0')
}

/// Two runs of ASCII digits without leading zeros, as numbers.
fn compare_digits(a: &str, b: &str) -> Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

fn compare_mains(a: &str, b: &str) -> Ordering {
    let mut pa = a.split('.');
    let mut pb = b.split('.');
    loop {
        match (pa.next(), pb.next()) {
            (None, None) => return Ordering::Equal,
            (x, y) => {
                let o = compare_digits(
                    leading_number(x.unwrap_or("")),
                    leading_number(y.unwrap_or("")),
                );
                if o != Ordering::Equal {
                    return o;
                }
            }
        }
    }
}

fn compare_pres(a: &str, b: &str) -> Ordering {
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
    let mut pa = a.split('.');
    let mut pb = b.split('.');
    loop {
        match (pa.next(), pb.next()) {
            (Some(x), Some(y)) => {
                let o = if all_digits(x) && all_digits(y) {
                    compare_digits(x.trim_start_matches('0'), y.trim_start_matches('0'))
                } else {
                    // ASCII only (the class), so bytes compare as JavaScript's code units.
                    x.cmp(y)
                };
                if o != Ordering::Equal {
                    return o;
                }
            }
            // The one with more parts is greater (`len1 - len2`).
            (Some(_), None) => return Ordering::Greater,
            (None, Some(_)) => return Ordering::Less,
            (None, None) => return Ordering::Equal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Ordering::{Equal, Greater, Less};

    fn cmp(a: &str, b: &str) -> Ordering {
        compare_versions(a, b)
    }

    #[test]
    fn violentmonkeys_order() {
        for (a, b, want) in [
            ("1.0", "1.0", Equal),
            ("1.0", "1", Equal),
            ("1.0.0.0", "1", Equal),
            ("2", "1.9.9", Greater),
            ("1.10", "1.9", Greater),
            ("1.2.3", "1.2.3-beta", Greater),
            ("1.2.3-beta", "1.2.3", Less),
            ("1.2.3-beta.2", "1.2.3-beta.10", Less),
            ("1.2.3-beta", "1.2.3-alpha", Greater),
            ("1.2.3-beta.1", "1.2.3-beta", Greater),
            ("1.2.3-1", "1.2.3-beta", Less),
            ("1.0a", "1.0", Equal),
            ("1.0b", "1.0a", Equal),
            ("v2", "1", Less),
            ("", "0", Equal),
            ("", "0.0.1", Less),
            ("1.2-rc1+build", "1.2-rc1+other", Equal),
            ("007", "7", Equal),
            (" 3", "2", Greater),
            ("+3", "2", Greater),
            ("2024.01.05", "2023.12.31", Greater),
        ] {
            assert_eq!(cmp(a, b), want, "{a:?} vs {b:?}");
            assert_eq!(cmp(b, a), want.reverse(), "{b:?} vs {a:?}");
        }
    }

    #[test]
    fn hostile_versions_are_ordered_without_panicking() {
        // Numbers past every integer type, compared exactly.
        let huge = "9".repeat(10_000);
        let huger = format!("1{}", "0".repeat(10_000));
        assert_eq!(cmp(&huger, &huge), Greater);
        assert_eq!(cmp(&format!("1.{huge}"), &format!("1.{huge}")), Equal);
        assert_eq!(cmp(&format!("0000{huge}"), &huge), Equal);
        // 10,000 dots: empty parts are 0.
        let dots = ".".repeat(10_000);
        assert_eq!(cmp(&dots, "0"), Equal);
        assert_eq!(cmp(&format!("{dots}1"), "0"), Greater);
        assert_eq!(cmp(&format!("1{dots}"), "1"), Equal);
        assert_eq!(cmp(&format!("1-{dots}"), "1"), Less);
        // Unicode digits are not digits to parseInt: ٢ (Arabic-Indic two) is 0.
        assert_eq!(cmp("\u{0662}", "0"), Equal);
        assert_eq!(cmp("\u{0662}", "1"), Less);
        assert_eq!(
            cmp("1-\u{0662}", "1"),
            Equal,
            "a dash before no class char is no pre"
        );
        assert_eq!(cmp("１", "0"), Equal, "a full-width digit is 0");
        // Empty parts and empty versions.
        assert_eq!(cmp("", ""), Equal);
        assert_eq!(cmp("1..2", "1.0.2"), Equal);
        assert_eq!(cmp("-", "0"), Equal);
        assert_eq!(cmp("1-", "1"), Equal);
        assert_eq!(cmp("1--", "1"), Less, "\"-\" is a pre-release");
        // In a pre-release an empty part is text, and "" sorts before "0".
        assert_eq!(cmp("1-a..b", "1-a.0.b"), Less);
        // A line separator before the dash: no pre-release (`.` does not cross it).
        assert_eq!(cmp("1\u{2028}-beta", "1"), Equal);
        // Long pre-releases, with as many parts.
        let pre = format!("1-{}", "a.".repeat(5_000));
        assert_eq!(cmp(&pre, &pre), Equal);
        // Any text at all: an order, both ways.
        for (a, b) in [("\u{0}", "\u{ffff}"), ("🙂.🙂", "1"), ("1.2.3-🙂", "1.2.3")] {
            assert_eq!(cmp(a, b), cmp(b, a).reverse(), "{a:?} {b:?}");
        }
    }

    fn meta(extra: &str) -> Metadata {
        metadata::parse(&format!(
            "// ==UserScript==\n// @name Helper\n// @namespace ns\n{extra}// ==/UserScript==\n"
        ))
        .metadata
        .expect("valid")
    }

    #[test]
    fn the_check_url_and_the_download_url() {
        let web = crate::web::platform();
        assert_eq!(urls(web, &meta("")), None);
        let both = meta(
            "// @updateURL https://a.test/x.meta.js\n// @downloadURL https://a.test/x.user.js\n",
        );
        assert_eq!(
            urls(web, &both),
            Some(UpdateUrls {
                check: "https://a.test/x.meta.js".into(),
                download: Some("https://a.test/x.user.js".into())
            })
        );
        let only_update = meta("// @updateURL https://a.test/x.user.js\n");
        assert_eq!(
            urls(web, &only_update).and_then(|u| u.download),
            Some("https://a.test/x.user.js".into())
        );
        // A .meta.js holds the header alone: checked there, downloaded from nowhere.
        for only_meta in [
            "// @updateURL https://a.test/x.meta.js\n",
            "// @updateURL https://a.test/x.META.JS?v=2#top\n",
            "// @downloadURL https://a.test/x.meta.js\n",
        ] {
            let u = urls(web, &meta(only_meta)).expect("a check URL");
            assert!(u.check.contains("a.test/x."), "{only_meta}");
            assert_eq!(u.download, None, "{only_meta}");
        }
        assert_eq!(
            urls(
                web,
                &meta("// @updateURL https://a.test/x.meta.js.user.js\n")
            )
            .and_then(|u| u.download),
            Some("https://a.test/x.meta.js.user.js".into())
        );
        let only_download = meta("// @downloadURL https://a.test/d.user.js\n");
        assert_eq!(
            urls(web, &only_download).map(|u| u.check),
            Some("https://a.test/d.user.js".into())
        );
        // GreasyFork's "none": not a URL, no updates.
        assert_eq!(urls(web, &meta("// @updateURL none\n")), None);
        let none_then_download =
            meta("// @updateURL none\n// @downloadURL https://a.test/d.user.js\n");
        assert_eq!(
            urls(web, &none_then_download).map(|u| u.check),
            Some("https://a.test/d.user.js".into())
        );
        // Tampermonkey's "@downloadURL none": no update check, whatever @updateURL says.
        for off in ["none", "None", " none "] {
            let m = meta(&format!(
                "// @updateURL https://a.test/u.meta.js\n// @downloadURL {off}\n"
            ));
            assert_eq!(urls(web, &m), None, "{off}");
        }
    }

    #[test]
    fn an_update_is_the_same_script_with_a_greater_version() {
        let installed = meta("// @version 1.0\n");
        assert_eq!(
            judge("u", &installed, &meta("// @version 1.1\n")),
            Ok(Verdict::Newer)
        );
        assert_eq!(
            judge("u", &installed, &meta("// @version 1.0.0\n")),
            Ok(Verdict::Same)
        );
        assert_eq!(
            judge("u", &installed, &meta("// @version 0.9\n")),
            Ok(Verdict::Older)
        );
        assert_eq!(
            judge("u", &installed, &meta("")),
            Err(UpdateError::NoVersion { url: "u".into() })
        );
        let other = metadata::parse(
            "// ==UserScript==\n// @name Helper\n// @namespace evil\n// @version 9\n// ==/UserScript==\n",
        )
        .metadata
        .unwrap();
        let e = judge("u", &installed, &other).unwrap_err();
        assert!(matches!(e, UpdateError::NotThisScript { .. }));
        assert!(
            e.to_string().starts_with(
                "not an update of this script: the server sent \"Helper\" (@namespace \"evil\")"
            ),
            "{e}"
        );
        // An installed script without a version: any version above 0 is newer.
        assert_eq!(
            judge("u", &meta(""), &meta("// @version 0.1\n")),
            Ok(Verdict::Newer)
        );
    }

    #[test]
    fn headers_and_code() {
        assert!(matches!(
            read_header("u", "<html>nope</html>"),
            Err(UpdateError::Header { .. })
        ));
        let e = read_header("u", "// ==UserScript==\n// @version 2\n").unwrap_err();
        assert!(e.to_string().contains("no closing"), "{e}");
        let meta_js = "// ==UserScript==\n// @name A\n// @version 2\n// ==/UserScript==\n\n";
        assert!(!has_code(meta_js));
        assert!(has_code(&format!("{meta_js}alert(1)\n")));
        assert!(has_code(&format!("x\n{meta_js}")));
        assert!(!has_code(&format!("\u{feff}{meta_js}")));
        // Never panics on any text.
        for t in [
            "",
            "\u{2028}",
            "//",
            "// ==/UserScript==",
            &"\n".repeat(10_000),
        ] {
            let _ = read_header("u", t);
            let _ = has_code(t);
        }
    }
}
