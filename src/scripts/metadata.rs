//! The `// ==UserScript==` metadata block: parsing, validation and diagnostics.
//!
//! Key handling follows Violentmonkey/Tampermonkey where it matters to script authors: a key
//! runs from `@` to the first whitespace, the rest of the line (trimmed) is the value,
//! single-value keys keep their first occurrence, `-`/`_` spellings are equivalent
//! (`@exclude-match` = `@exclude_match` = `@excludeMatch`), `@key:locale` variants are
//! localizations. What `chrome.userScripts` cannot honour is reported rather than silently
//! ignored, so the caller can tell the author.
//!
//! Work is linear in the source size; per-key and total diagnostic caps keep the output bounded
//! on hostile input.

use serde::{Deserialize, Serialize};

use super::match_pattern;
use super::rule_syntax;
use crate::gm::api::{self, Grant, Support};
use crate::gm::connect;

/// Most lines accepted for any one key; the first line beyond it is an error.
pub const MAX_LINES_PER_KEY: usize = 256;

/// Most diagnostics reported individually; the rest are summed up in one final diagnostic.
pub const MAX_DIAGNOSTICS: usize = 256;

/// When the script runs. Serialized exactly as `chrome.userScripts`' `RunAt` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunAt {
    DocumentStart,
    DocumentEnd,
    #[default]
    DocumentIdle,
}

/// The validated contents of a metadata block.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    /// `@name`, trimmed and non-empty.
    pub name: String,
    pub namespace: Option<String>,
    pub version: Option<String>,
    pub description: Option<String>,
    /// `@match` patterns, each accepted by [`match_pattern::parse`].
    #[serde(default)]
    pub matches: Vec<String>,
    /// `@exclude-match` patterns, each accepted by [`match_pattern::parse`].
    #[serde(default)]
    pub exclude_matches: Vec<String>,
    /// `@include` values as written: globs, `/regular expressions/`, globs with `.tld`
    /// (see [`super::rules`] for how each reaches Chrome).
    #[serde(default)]
    pub include_globs: Vec<String>,
    /// `@exclude` values as written, like `include_globs`.
    #[serde(default)]
    pub exclude_globs: Vec<String>,
    #[serde(default)]
    pub run_at: RunAt,
    /// `@noframes`: run in the top frame only.
    #[serde(default)]
    pub no_frames: bool,
    /// `@grant` values as written, in order.
    #[serde(default)]
    pub grants: Vec<String>,
    /// `@connect` values as written, in order (each accepted by [`crate::gm::connect::parse`]).
    #[serde(default)]
    pub connects: Vec<String>,
    /// `@require` URLs, in order.
    #[serde(default)]
    pub requires: Vec<String>,
    /// `@resource` (name, URL) pairs, in order.
    #[serde(default)]
    pub resources: Vec<(String, String)>,
    /// Every other key, in order: (key without '@', value). Includes localized keys such as
    /// `name:fr`.
    #[serde(default)]
    pub other: Vec<(String, String)>,
}

impl Metadata {
    /// True when the script has at least one `@match` or `@include`, i.e. can run somewhere.
    pub fn runs_anywhere(&self) -> bool {
        !self.matches.is_empty() || !self.include_globs.is_empty()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// One problem found in the source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Diagnostic {
    /// 1-based line in the source.
    pub line: usize,
    pub severity: Severity,
    pub message: String,
}

/// Result of [`parse`]: the metadata when there was no error, and every diagnostic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Parsed {
    /// `None` when any diagnostic is an [`Severity::Error`].
    pub metadata: Option<Metadata>,
    pub diagnostics: Vec<Diagnostic>,
}

impl Parsed {
    pub fn has_errors(&self) -> bool {
        self.diagnostics
            .iter()
            .any(|d| d.severity == Severity::Error)
    }
}

/// Parses the metadata block of a userscript source. Never panics; linear in `source`.
pub fn parse(source: &str) -> Parsed {
    let text = source.strip_prefix('\u{feff}').unwrap_or(source);
    let mut diags = Diagnostics::default();
    // `split('\n')` + trimming '\r' handles LF and CRLF alike; line numbers are 1-based.
    let lines: Vec<&str> = text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();

    let Some(start) = lines.iter().position(|l| marker(l) == Some(Marker::Start)) else {
        diags.error(1, "no // ==UserScript== header".to_owned());
        return diags.finish(None);
    };
    let header_line = start + 1;
    let block = lines.get(start + 1..).unwrap_or_default();
    let Some(len) = block.iter().position(|l| marker(l) == Some(Marker::End)) else {
        diags.error(
            header_line,
            format!(
                "the // ==UserScript== header on line {header_line} has no closing \
                 // ==/UserScript== line"
            ),
        );
        return diags.finish(None);
    };

    let mut builder = Builder::new(header_line);
    for (offset, raw) in block.iter().take(len).enumerate() {
        builder.line(header_line + 1 + offset, raw, &mut diags);
    }
    let metadata = builder.finish(&mut diags);
    if let Some(m) = &metadata {
        let body = lines.get(start + 1 + len + 1..).unwrap_or_default();
        if let Some(offset) = body.iter().position(|l| mentions_unsafe_window(l)) {
            let line = header_line + len + 2 + offset;
            let line_text: &str = body.get(offset).map_or("", |l| l);
            unsafe_window_used(
                m,
                line,
                line_text.contains("typeof unsafeWindow"),
                &mut diags,
            );
        }
    }
    diags.finish(metadata)
}

/// Where the header [`parse`] reads is in `source`: from its `// ==UserScript==` line to the end
/// of its `// ==/UserScript==` line (not a marker's text elsewhere: a banner comment naming
/// "==UserScript==", or a description quoting the closing marker), without a leading BOM.
pub fn block_span(source: &str) -> Option<std::ops::Range<usize>> {
    let bom = if source.starts_with('\u{feff}') {
        '\u{feff}'.len_utf8()
    } else {
        0
    };
    let mut at = bom;
    let mut start = None;
    for line in source.get(bom..)?.split('\n') {
        let l = line.strip_suffix('\r').unwrap_or(line);
        match (start, marker(l)) {
            (None, Some(Marker::Start)) => start = Some(at),
            (Some(s), Some(Marker::End)) => return Some(s..at + l.len()),
            _ => {}
        }
        at += line.len() + 1;
    }
    None
}

/// Whether a line of the script's code names `unsafeWindow` (as an identifier, not inside a
/// longer name; a line that is only a `//` comment does not count).
fn mentions_unsafe_window(line: &str) -> bool {
    const NAME: &str = "unsafeWindow";
    if line.trim_start().starts_with("//") {
        return false;
    }
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$';
    line.match_indices(NAME).any(|(i, _)| {
        let before = line.get(..i).and_then(|b| b.chars().next_back());
        let after = line.get(i + NAME.len()..).and_then(|a| a.chars().next());
        !before.is_some_and(ident) && !after.is_some_and(ident)
    })
}

/// A script that uses `unsafeWindow` without granting it by name is told at that line what it
/// gets: nothing with `@grant none` (or no `@grant`), where Violentmonkey and Tampermonkey give
/// it anyway, and otherwise this world's window, not the page's — a script reaching for the
/// page's `jQuery` or hooking its `fetch` through it does nothing here, without an error.
/// Granted by name, its `@grant` line says so already.
fn unsafe_window_used(m: &Metadata, line: usize, typeof_test: bool, diags: &mut Diagnostics) {
    if m.grants.iter().any(|g| g == "unsafeWindow") {
        return;
    }
    // Given by any grant but `none` (`api::provided`), whatever else the lines say.
    let none = !api::provided(&m.grants).contains(&"unsafeWindow");
    let message = if none {
        format!(
            "unsafeWindow is not defined in this script: with @grant none (or no @grant) a \
             script gets no GM functions and no unsafeWindow here (Violentmonkey and \
             Tampermonkey give it anyway), so {}. Add \"// @grant unsafeWindow\", and read what \
             it is here",
            if typeof_test {
                "a typeof unsafeWindow test finds it undefined (any other use throws a \
                 ReferenceError)"
            } else {
                "this line throws a ReferenceError"
            }
        )
    } else {
        format!(
            "unsafeWindow (given without a @grant line for it): {}",
            api::UNSAFE_WINDOW_NOTE
                .strip_prefix("@grant unsafeWindow: ")
                .unwrap_or(api::UNSAFE_WINDOW_NOTE)
        )
    };
    diags.warning(line, message);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    Start,
    End,
}

/// Recognizes `// ==UserScript==` and `// ==/UserScript==`, with any surrounding whitespace
/// and any spaces or tabs after `//` (Violentmonkey and Tampermonkey accept both).
fn marker(line: &str) -> Option<Marker> {
    let rest = line
        .trim()
        .strip_prefix("//")?
        .trim_start_matches([' ', '\t']);
    match rest {
        "==UserScript==" => Some(Marker::Start),
        "==/UserScript==" => Some(Marker::End),
        _ => None,
    }
}

/// Collects diagnostics, reporting at most [`MAX_DIAGNOSTICS`] one by one and summing up the
/// rest, while remembering whether any error occurred at all.
#[derive(Default)]
struct Diagnostics {
    list: Vec<Diagnostic>,
    has_error: bool,
    suppressed: usize,
    suppressed_errors: usize,
    first_suppressed_line: usize,
}

impl Diagnostics {
    fn push(&mut self, line: usize, severity: Severity, message: String) {
        if severity == Severity::Error {
            self.has_error = true;
        }
        if self.list.len() < MAX_DIAGNOSTICS {
            self.list.push(Diagnostic {
                line,
                severity,
                message,
            });
            return;
        }
        if self.suppressed == 0 {
            self.first_suppressed_line = line;
        }
        self.suppressed += 1;
        if severity == Severity::Error {
            self.suppressed_errors += 1;
        }
    }

    fn error(&mut self, line: usize, message: String) {
        self.push(line, Severity::Error, message);
    }

    fn warning(&mut self, line: usize, message: String) {
        self.push(line, Severity::Warning, message);
    }

    fn finish(mut self, metadata: Option<Metadata>) -> Parsed {
        // Errors first, then warnings, each in line order (some are found only once the whole
        // header is read); the count of the rest stays last.
        self.list
            .sort_by_key(|d| (!matches!(d.severity, Severity::Error), d.line));
        if self.suppressed > 0 {
            // An error among the hidden ones must stay visible as an error.
            let severity = if self.suppressed_errors > 0 {
                Severity::Error
            } else {
                Severity::Warning
            };
            self.list.push(Diagnostic {
                line: self.first_suppressed_line,
                severity,
                message: format!(
                    "{} more problems not listed ({} of them errors), from line {} on",
                    self.suppressed, self.suppressed_errors, self.first_suppressed_line
                ),
            });
        }
        Parsed {
            metadata: if self.has_error { None } else { metadata },
            diagnostics: self.list,
        }
    }
}

/// A single-value key's first occurrence: its value and line.
type First = Option<(String, usize)>;

struct Builder {
    header_line: usize,
    /// Unknown keys asked of [`misspelt_key`] so far, at most [`MAX_SPELLING_CHECKS`].
    spelling_checks: usize,
    /// Lines seen per key (normalized), for [`MAX_LINES_PER_KEY`].
    /// (Sorted, not a `VecMap`, whose inserts shift: a block of 27,000 keys was quadratic.)
    counts: std::collections::BTreeMap<String, usize>,
    name: First,
    /// Line of the first `@name`, even if it was empty (so "missing @name" is not doubled).
    name_line: Option<usize>,
    namespace: First,
    version: First,
    description: First,
    run_at: Option<(RunAt, usize)>,
    run_at_line: Option<usize>,
    matches: Vec<String>,
    exclude_matches: Vec<String>,
    include_globs: Vec<String>,
    exclude_globs: Vec<String>,
    no_frames: bool,
    grants: Vec<String>,
    /// Line of the first grant of a request function (`GM_xmlhttpRequest`, `GM_download`).
    request_grant_line: Option<usize>,
    connects: Vec<String>,
    requires: Vec<String>,
    resources: Vec<(String, String)>,
    other: Vec<(String, String)>,
}

impl Builder {
    fn new(header_line: usize) -> Builder {
        Builder {
            header_line,
            spelling_checks: 0,
            counts: std::collections::BTreeMap::new(),
            name: None,
            name_line: None,
            namespace: None,
            version: None,
            description: None,
            run_at: None,
            run_at_line: None,
            matches: Vec::new(),
            exclude_matches: Vec::new(),
            include_globs: Vec::new(),
            exclude_globs: Vec::new(),
            no_frames: false,
            grants: Vec::new(),
            request_grant_line: None,
            connects: Vec::new(),
            requires: Vec::new(),
            resources: Vec::new(),
            other: Vec::new(),
        }
    }

    fn line(&mut self, line_no: usize, raw: &str, diags: &mut Diagnostics) {
        let trimmed = raw.trim();
        if trimmed.is_empty() {
            return;
        }
        let Some(comment) = trimmed.strip_prefix("//") else {
            diags.error(
                line_no,
                format!(
                    "only // comment lines may appear inside the metadata block, found \"{}\"",
                    snippet(trimmed)
                ),
            );
            return;
        };
        // Plain comments (no '@') are allowed and ignored.
        let Some(key_value) = comment.trim_start().strip_prefix('@') else {
            return;
        };
        let (key, value) = match key_value.split_once(char::is_whitespace) {
            Some((k, v)) => (k, v.trim()),
            None => (key_value, ""),
        };
        if key.is_empty() {
            diags.warning(line_no, "'@' without a key name; line ignored".to_owned());
            return;
        }
        let normalized = if key.contains(':') {
            key.to_owned()
        } else {
            normalize_key(key)
        };

        let count = {
            let n = self.counts.entry(normalized.clone()).or_insert(0);
            *n = n.saturating_add(1);
            *n
        };
        if count > MAX_LINES_PER_KEY {
            if count == MAX_LINES_PER_KEY + 1 {
                diags.error(
                    line_no,
                    format!(
                        "more than {MAX_LINES_PER_KEY} @{key} lines; this one and any further \
                         ones are ignored"
                    ),
                );
            }
            return;
        }

        match normalized.as_str() {
            "name" => {
                if let Some(first) = self.name_line {
                    duplicate(diags, line_no, key, first);
                    return;
                }
                self.name_line = Some(line_no);
                let value = displayable(value, diags, line_no, key);
                if value.is_empty() {
                    diags.error(line_no, "@name is empty".to_owned());
                } else {
                    self.name = Some((value, line_no));
                }
            }
            "namespace" => {
                let value = displayable(value, diags, line_no, key);
                set_single(&mut self.namespace, diags, line_no, key, &value)
            }
            "version" => set_single(&mut self.version, diags, line_no, key, value),
            "description" => set_single(&mut self.description, diags, line_no, key, value),
            "runAt" => self.run_at(diags, line_no, key, value),
            "match" => push_pattern(&mut self.matches, diags, line_no, key, value),
            "excludeMatch" => push_pattern(&mut self.exclude_matches, diags, line_no, key, value),
            "include" => push_glob(&mut self.include_globs, diags, line_no, key, value),
            "exclude" => push_glob(&mut self.exclude_globs, diags, line_no, key, value),
            "noframes" => self.no_frames = true,
            "grant" => self.grant(diags, line_no, value),
            "connect" => self.connect(diags, line_no, value),
            "require" => self.require(diags, line_no, value),
            "resource" => self.resource(diags, line_no, value),
            other => self.kept_as_is(diags, line_no, other, key, value),
        }
    }

    /// A key this provider does not act on: kept in `other`, warned when a script means by it
    /// what it will not get.
    fn kept_as_is(
        &mut self,
        diags: &mut Diagnostics,
        line_no: usize,
        normalized: &str,
        key: &str,
        value: &str,
    ) {
        match normalized {
            // Violentmonkey's opt-in: the script uses `await` outside any function.
            "topLevelAwait" => diags.warning(line_no, TOP_LEVEL_AWAIT.to_owned()),
            // Tampermonkey's `@unwrap`: the script put into the page itself, without a wrapper.
            "unwrap" => diags.warning(line_no, page_world(key, value)),
            // Violentmonkey's `@inject-into page`/`auto` and Tampermonkey's `@sandbox raw`/
            // `JavaScript` ask for the page's MAIN world, which this provider never gives.
            "injectInto" | "sandbox"
                if matches!(
                    value.to_ascii_lowercase().as_str(),
                    "page" | "auto" | "raw" | "javascript"
                ) =>
            {
                diags.warning(line_no, page_world(key, value));
            }
            _ if self.spelling_checks < MAX_SPELLING_CHECKS && spelling_asked(key) => {
                self.spelling_checks += 1;
                if let Some(meant) = misspelt_key(key) {
                    diags.warning(
                        line_no,
                        format!(
                            "@{} is not a key any userscript manager reads, so this line is ignored: did you mean @{meant}?",
                            crate::text::ellipsize(key, 40)
                        ),
                    );
                }
            }
            _ => {}
        }
        self.other.push((key.to_owned(), value.to_owned()));
    }

    fn run_at(&mut self, diags: &mut Diagnostics, line_no: usize, key: &str, value: &str) {
        if let Some(first) = self.run_at_line {
            duplicate(diags, line_no, key, first);
            return;
        }
        self.run_at_line = Some(line_no);
        let run_at = match value {
            "document-start" => RunAt::DocumentStart,
            "document-end" => RunAt::DocumentEnd,
            "document-idle" => RunAt::DocumentIdle,
            "document-ready" => {
                diags.warning(
                    line_no,
                    "@run-at document-ready is read as document-end (when the document is \
                     parsed, as DOMContentLoaded)"
                        .to_owned(),
                );
                RunAt::DocumentEnd
            }
            // Such a script is an action the user picks (Tampermonkey's context menu): run on
            // every page load instead, it would act unasked. Refused, with the way out.
            "context-menu" => {
                diags.error(
                    line_no,
                    "@run-at context-menu is not available here (this provider has no context \
                     menu), and the script would otherwise run on every page its rules match \
                     without being asked: to run it on each page load, use document-idle"
                        .to_owned(),
                );
                return;
            }
            "document-body" => {
                diags.warning(
                    line_no,
                    "@run-at document-body is not supported by chrome.userScripts; \
                     the script runs at document-end instead"
                        .to_owned(),
                );
                RunAt::DocumentEnd
            }
            _ => {
                diags.error(
                    line_no,
                    format!(
                        "unknown @run-at value \"{}\": use document-start, document-end or \
                         document-idle",
                        snippet(value)
                    ),
                );
                return;
            }
        };
        self.run_at = Some((run_at, line_no));
    }

    fn grant(&mut self, diags: &mut Diagnostics, line_no: usize, value: &str) {
        if value.is_empty() {
            diags.warning(line_no, "@grant without a value; ignored".to_owned());
            return;
        }
        let grant = api::classify(value);
        if matches!(grant, Grant::Known(a) if matches!(a.name, "GM_xmlhttpRequest" | "GM_download"))
        {
            self.request_grant_line.get_or_insert(line_no);
        }
        match grant {
            Grant::None => {}
            Grant::Known(a) if a.name == "unsafeWindow" => {
                diags.warning(line_no, api::UNSAFE_WINDOW_NOTE.to_owned());
            }
            Grant::Known(a) if a.support == Support::Provided => {}
            Grant::Known(_) => diags.warning(
                line_no,
                format!(
                    "@grant {} is not implemented by this provider; the script runs without it",
                    snippet(value)
                ),
            ),
            Grant::Unknown => diags.warning(
                line_no,
                match api::meant(value) {
                    Some(meant) => format!(
                        "@grant {}: no such API (did you mean {meant}?); the script runs \
                         without it",
                        snippet(value)
                    ),
                    None => format!(
                        "@grant {}: no such API (a typo?); the script runs without it",
                        snippet(value)
                    ),
                },
            ),
        }
        self.grants.push(value.to_owned());
    }

    fn connect(&mut self, diags: &mut Diagnostics, line_no: usize, value: &str) {
        match connect::parse(crate::web::platform(), value) {
            Ok(rule) => {
                if let Some(risk) = connect::risk(&rule, value) {
                    diags.warning(line_no, risk);
                }
                self.connects.push(value.to_owned());
            }
            Err(e) => diags.warning(line_no, format!("{e}; ignored")),
        }
    }

    fn require(&mut self, diags: &mut Diagnostics, line_no: usize, value: &str) {
        if value.is_empty() {
            diags.warning(line_no, "@require without a URL; ignored".to_owned());
            return;
        }
        // Fetched when the script is written (`gm::assets`); a URL that could never be is an
        // error now rather than a refused write later.
        if let Err(e) = crate::gm::assets::wanted(crate::web::platform(), &[value.to_owned()], &[])
        {
            diags.error(line_no, e.reason());
        }
        self.requires.push(value.to_owned());
    }

    fn resource(&mut self, diags: &mut Diagnostics, line_no: usize, value: &str) {
        let Some((name, url)) = value
            .split_once(char::is_whitespace)
            .map(|(n, u)| (n, u.trim()))
            .filter(|(n, u)| !n.is_empty() && !u.is_empty())
        else {
            diags.warning(
                line_no,
                "@resource needs a name and a URL (@resource name https://…); ignored".to_owned(),
            );
            return;
        };
        if let Err(e) = crate::gm::assets::wanted(
            crate::web::platform(),
            &[],
            &[(name.to_owned(), url.to_owned())],
        ) {
            diags.error(line_no, e.reason());
        }
        self.resources.push((name.to_owned(), url.to_owned()));
    }

    fn finish(self, diags: &mut Diagnostics) -> Option<Metadata> {
        if self.name_line.is_none() {
            diags.error(self.header_line, "missing @name".to_owned());
        }
        if self.matches.is_empty() && self.include_globs.is_empty() {
            diags.warning(
                self.header_line,
                "no @match or @include: the script will not run on any page".to_owned(),
            );
        }
        // Tampermonkey asks the user on a request to a host not declared, and Violentmonkey
        // does not check: here every request without @connect is refused when it is made.
        if let (Some(line), true) = (self.request_grant_line, self.connects.is_empty()) {
            diags.warning(
                line,
                "no @connect: every GM_xmlhttpRequest/GM_download of this script will be refused \
                 (the page's own site too); add a @connect line for each host it requests \
                 (@connect self for the page's own)"
                    .to_owned(),
            );
        }
        let (name, _) = self.name?;
        Some(Metadata {
            name,
            namespace: self.namespace.map(|(v, _)| v),
            version: self.version.map(|(v, _)| v),
            description: self.description.map(|(v, _)| v),
            matches: self.matches,
            exclude_matches: self.exclude_matches,
            include_globs: self.include_globs,
            exclude_globs: self.exclude_globs,
            run_at: self.run_at.map(|(r, _)| r).unwrap_or_default(),
            no_frames: self.no_frames,
            grants: self.grants,
            connects: self.connects,
            requires: self.requires,
            resources: self.resources,
            other: self.other,
        })
    }
}

/// `exclude-match`, `exclude_match` → `excludeMatch` (Violentmonkey's key normalization). Only
/// ASCII letters are raised, as Violentmonkey's `\w` does: every key that means something is
/// ASCII, and Unicode's uppercase tables would cost the wasm ~9 KB gzip.
fn normalize_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut upper_next = false;
    for c in key.chars() {
        if c == '-' || c == '_' {
            upper_next = true;
        } else if upper_next {
            out.push(c.to_ascii_uppercase());
            upper_next = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// The keys this provider acts on, as a header spells them.
const ACTED_ON: [&str; 17] = [
    "name",
    "namespace",
    "version",
    "description",
    "match",
    "exclude-match",
    "include",
    "exclude",
    "run-at",
    "noframes",
    "grant",
    "connect",
    "require",
    "resource",
    "updateURL",
    "downloadURL",
    "top-level-await",
];

/// Keys other managers read and this one has no use for (display, other features): never
/// taken for a misspelling of one it acts on (`@source` is not `@resource`).
const READ_ELSEWHERE: [&str; 30] = [
    "author",
    "icon",
    "iconURL",
    "icon64",
    "icon64URL",
    "defaulticon",
    "homepage",
    "homepageURL",
    "website",
    "source",
    "supportURL",
    "license",
    "copyright",
    "contributionURL",
    "contributionAmount",
    "antifeature",
    "compatible",
    "incompatible",
    "inject-into",
    "sandbox",
    "unwrap",
    "webRequest",
    "tag",
    "run-in",
    "nocompat",
    "installURL",
    "history",
    "credits",
    "developer",
    "priority",
];

/// The key an unknown one most likely misspells (`@matches`, `@Match`, `@runat`, `@grnat`), if
/// any: the same letters bar case, `-` and `_`, or one edit away (two where either has six
/// letters or more). A misspelt `@match` is otherwise silently ignored and the script runs nowhere.
/// `@updateurl`/`@downloadurl` in any case are read as they are (`scripts::update::urls`).
/// Most unknown-key lines of one script asked whether they misspell a key this provider acts on:
/// each costs tens of microseconds, and a tester's block of 27,000 such lines took 1.5 s a read
/// in the worker; a script with this many unknown keys has no typo to point at.
const MAX_SPELLING_CHECKS: usize = 64;

fn fold_key(k: &str) -> Vec<u8> {
    k.bytes()
        .filter(|b| *b != b'-' && *b != b'_')
        .map(|b| b.to_ascii_lowercase())
        .collect()
}

/// Whether `key` may be a misspelling at all: not localized (`@name:fr`), not a key other
/// managers read. Cheap; only such keys count toward [`MAX_SPELLING_CHECKS`] (a reviewer: 64
/// localized lines used the checks up, and a later `@mtach` went unsaid).
fn spelling_asked(key: &str) -> bool {
    !(key.len() > 40
        || key.contains(':')
        || ["updateURL", "downloadURL"]
            .iter()
            .any(|k| key.eq_ignore_ascii_case(k))
        || READ_ELSEWHERE.iter().any(|k| fold_key(k) == fold_key(key)))
}

fn misspelt_key(key: &str) -> Option<&'static str> {
    if !spelling_asked(key) {
        return None;
    }
    let typed = fold_key(key);
    ACTED_ON
        .iter()
        .map(|k| (*k, fold_key(k)))
        // Past two edits apart in length, no key is near enough.
        .filter(|(_, f)| f.len().abs_diff(typed.len()) <= 2)
        .map(|(k, f)| (k, edit_distance(&typed, &f)))
        .filter(|(k, d)| *d <= if k.len().max(typed.len()) >= 6 { 2 } else { 1 })
        .min_by_key(|(_, d)| *d)
        .map(|(k, _)| k)
}

/// Optimal string alignment distance (an adjacent swap counts as one edit), on short keys.
fn edit_distance(a: &[u8], b: &[u8]) -> usize {
    let width = b.len() + 1;
    let mut d: Vec<usize> = Vec::with_capacity((a.len() + 1) * width);
    let at =
        |d: &[usize], i: usize, j: usize| d.get(i * width + j).copied().unwrap_or(usize::MAX - 1);
    for i in 0..=a.len() {
        for j in 0..=b.len() {
            let v = match (
                i.checked_sub(1).and_then(|k| a.get(k)),
                j.checked_sub(1).and_then(|k| b.get(k)),
            ) {
                (Some(&ai), Some(&bj)) => {
                    let mut v = (at(&d, i - 1, j) + 1)
                        .min(at(&d, i, j - 1) + 1)
                        .min(at(&d, i - 1, j - 1) + usize::from(ai != bj));
                    let swapped =
                        i > 1 && j > 1 && a.get(i - 2) == Some(&bj) && b.get(j - 2) == Some(&ai);
                    if swapped {
                        v = v.min(at(&d, i - 2, j - 2) + 1);
                    }
                    v
                }
                _ => i + j,
            };
            d.push(v);
        }
    }
    d.last().copied().unwrap_or(0)
}

/// What `@top-level-await` gets: an installed script's code runs inside a plain function
/// (`scripts::prelude`), where such an `await` is a SyntaxError, while `try_script` runs it in
/// an async function, where it works (`compat.test.mjs`).
const TOP_LEVEL_AWAIT: &str = "@top-level-await is not supported: an installed script runs \
     inside a plain function, so an await outside any function is a SyntaxError when the page \
     loads (try_script runs the code in an async function, where it works); wrap the code in \
     (async () => { … })()";

/// What a request for the page's own JavaScript world gets.
fn page_world(key: &str, value: &str) -> String {
    let line = if value.is_empty() {
        format!("@{}", crate::text::ellipsize(key, 20))
    } else {
        format!(
            "@{} {}",
            crate::text::ellipsize(key, 20),
            crate::text::ellipsize(value, 20)
        )
    };
    format!(
        "{line} is not possible here: every script runs in Chrome's isolated USER_SCRIPT world \
         (as @inject-into content), so the page's own JavaScript globals (window.someApp, a \
         hooked window.fetch) are not visible and what the script sets on window or \
         unsafeWindow is not seen by the page; the DOM is shared"
    )
}

fn duplicate(diags: &mut Diagnostics, line_no: usize, key: &str, first: usize) {
    diags.warning(
        line_no,
        format!("duplicate @{key} ignored: the one on line {first} is used"),
    );
}

/// `@name` and `@namespace` are shown to the user (options page, review popup) as the identity of
/// a script: what draws nothing or reorders text (which can make one name read as another) is
/// removed and spaces are folded, with a warning; an over-long one is an error (see
/// [`super::names`]).
fn displayable(value: &str, diags: &mut Diagnostics, line_no: usize, key: &str) -> String {
    let (shown, changed) = super::names::display(value);
    if let Some(why) = super::names::too_long(key, &shown) {
        diags.error(line_no, why);
    }
    if changed && shown != value.trim() {
        diags.warning(
            line_no,
            format!(
                "removed invisible, control or text-direction characters or odd spaces from @{key}"
            ),
        );
    }
    shown
}

fn set_single(slot: &mut First, diags: &mut Diagnostics, line_no: usize, key: &str, value: &str) {
    if let Some((_, first)) = slot {
        duplicate(diags, line_no, key, *first);
        return;
    }
    if value.is_empty() {
        diags.warning(line_no, format!("@{key} has no value; ignored"));
        return;
    }
    *slot = Some((value.to_owned(), line_no));
}

/// `scheme://host.*/path` (Violentmonkey's `www.google.*`) with the host's `.*` as `.tld`;
/// `None` for any other pattern. Read as a wildcard, `www.google.*` would also run on
/// `www.google.evil.com`, a site anyone can own.
fn star_suffix_as_tld(pattern: &str) -> Option<String> {
    let (scheme, rest) = pattern.split_once("://")?;
    let end = rest.find('/').unwrap_or(rest.len());
    let host = rest.get(..end)?.strip_suffix(".*")?;
    let named = host.strip_prefix("*.").unwrap_or(host);
    if named.is_empty() || named.contains(['*', ':']) {
        return None;
    }
    Some(format!("{scheme}://{host}.tld{}", rest.get(end..)?))
}

/// A `@match`/`@exclude-match` value as Tampermonkey and Violentmonkey accept it, rewritten to
/// Chrome's grammar where the meaning is clear (with a warning saying so), then validated as
/// Chrome validates it.
fn push_pattern(
    list: &mut Vec<String>,
    diags: &mut Diagnostics,
    line_no: usize,
    key: &str,
    value: &str,
) {
    let mut pattern = value.to_owned();
    if pattern == "*" {
        diags.warning(
            line_no,
            format!("@{key} * is read as *://*/* (every http and https page)"),
        );
        pattern = "*://*/*".to_owned();
    } else if let Some(rest) = pattern.strip_prefix("http*://") {
        diags.warning(
            line_no,
            format!("@{key} http*:// is read as *:// (http and https)"),
        );
        pattern = format!("*://{rest}");
    }
    if let Some(tld) = star_suffix_as_tld(&pattern) {
        diags.warning(
            line_no,
            format!(
                "@{key} \"{}\": a host ending in .* is read as .tld (\"{}\": any public \
                 suffix, such as .com or .co.uk, never another site's name such as .evil.com)",
                snippet(value),
                snippet(&tld)
            ),
        );
        pattern = tld;
    }
    if let Err(match_pattern::PatternError::MissingPath) = match_pattern::parse(&pattern) {
        // Read in the direction that never widens where the script runs: an include covers
        // the root page only, an exclude the whole site.
        let (path, meaning) = if key.to_ascii_lowercase().starts_with("exclude") {
            ("/*", "every page of the site")
        } else {
            ("/", "the site's root page only; add /* for every page")
        };
        diags.warning(
            line_no,
            format!(
                "@{key} \"{}\" has no path: read as \"{}{path}\" ({meaning})",
                snippet(value),
                snippet(&pattern)
            ),
        );
        pattern.push_str(path);
    }
    match match_pattern::parse(&pattern) {
        Ok(parsed) => {
            if let Some(why) = rule_syntax::pattern_unmatchable(&pattern) {
                if !unmatchable(diags, line_no, key, value, why) {
                    return;
                }
            } else if let (true, Some(host)) = (
                rule_syntax::host_of(&pattern).is_some_and(|written| !written.is_ascii()),
                parsed.host(),
            ) {
                // Shown with this name beside it (`guard::effects`): `bаnk.example` with a
                // Cyrillic `а` is not the site it looks like.
                diags.warning(
                    line_no,
                    format!(
                        "@{key} \"{}\": the browser reads this host as {}, the name of the site \
                         it names (not of any site it looks like)",
                        snippet(value),
                        snippet(host)
                    ),
                );
            }
            if let Some(host) = ignored_file_host(&pattern) {
                diags.warning(
                    line_no,
                    format!(
                        "@{key} \"{}\": Chrome ignores the host (\"{}\") of a file: pattern, so \
                         this is every local file whose path matches, on this computer",
                        snippet(value),
                        snippet(host)
                    ),
                );
            }
            if rule_syntax::pattern_has_tld(&pattern) {
                diags.warning(
                    line_no,
                    format!(
                        "@{key} \"{}\" uses .tld, which Chrome cannot express: the script is \
                         registered for any host and a check at its top enforces this rule",
                        snippet(value)
                    ),
                );
            }
            list.push(pattern);
        }
        Err(e) => diags.error(
            line_no,
            format!("invalid @{key} \"{}\": {e}", snippet(value)),
        ),
    }
}

fn push_glob(
    list: &mut Vec<String>,
    diags: &mut Diagnostics,
    line_no: usize,
    key: &str,
    value: &str,
) {
    if value.is_empty() {
        diags.warning(line_no, format!("@{key} without a value; ignored"));
        return;
    }
    if let Some(src) = rule_syntax::as_regex(value) {
        match rule_syntax::check_regex(src) {
            Ok(()) => {
                diags.warning(
                    line_no,
                    format!(
                        "regular-expression @{key}: Chrome cannot express it, so a check at the \
                         top of the script enforces it{}",
                        if key == "include" {
                            " (the script is registered for every http and https page and stops \
                             where the expression does not match)"
                        } else {
                            ""
                        }
                    ),
                );
                if let Some(why) = rule_syntax::regex_foreign_char(src) {
                    diags.warning(
                        line_no,
                        format!(
                            "@{key} \"{}\": {why}; where the expression needs it, it matches \
                             nothing; {}",
                            snippet(value),
                            why.advice()
                        ),
                    );
                }
            }
            Err(e) => {
                diags.error(line_no, format!("@{key} \"{}\": {e}", snippet(value)));
                return;
            }
        }
    } else if value.matches(['*', '?']).count() > MAX_GLOB_WILDCARDS {
        // Each run of them is a numbered group of the guard's RegExp (`glob_regex`), of which
        // V8 takes about 65,000: more would not compile, and no real glob has so many.
        diags.error(
            line_no,
            format!(
                "@{key} \"{}\" has more than {MAX_GLOB_WILDCARDS} wildcards (* or ?); write it with fewer",
                snippet(value)
            ),
        );
        return;
    } else if let Some(why) = rule_syntax::glob_unmatchable(value) {
        if !unmatchable(diags, line_no, key, value, why) {
            return;
        }
    } else if rule_syntax::glob_has_tld(value) {
        diags.warning(
            line_no,
            format!(
                "@{key} \"{}\" uses .tld, which Chrome cannot express: a check at the top of \
                 the script enforces it",
                snippet(value)
            ),
        );
    }
    if glob_has_wild_question(value) && rule_syntax::as_regex(value).is_none() {
        diags.warning(
            line_no,
            format!(
                "@{key} \"{}\": ? in a glob is a wildcard, any one character or none (as \
                 Chrome reads globs), not a query's \"?\": *?* is every address, and \
                 https://site.example/?* is every page of the site; write \\? for a literal ?",
                snippet(value)
            ),
        );
    }
    list.push(value.to_owned());
}

/// The most wildcards an `@include`/`@exclude` glob may hold.
pub const MAX_GLOB_WILDCARDS: usize = 256;

/// Whether a glob holds a `?` not escaped by `\` (a wildcard: R10, `@exclude *?*` read as
/// "pages with a query" kept the script off every page).
fn glob_has_wild_question(glob: &str) -> bool {
    let mut escaped = false;
    for c in glob.chars() {
        match (c, escaped) {
            ('?', false) => return true,
            ('\\', false) => escaped = true,
            _ => escaped = false,
        }
    }
    false
}

/// A rule that matches no page it names (`rule_syntax::Unmatchable`). An exclude is an error:
/// it would be shown as keeping the script off pages it never keeps it off. An include is a
/// warning: it only runs less. True when the rule is kept.
fn unmatchable(
    diags: &mut Diagnostics,
    line_no: usize,
    key: &str,
    value: &str,
    why: rule_syntax::Unmatchable,
) -> bool {
    let exclude = key.to_ascii_lowercase().starts_with("exclude");
    // `@exclude about:blank` or `ftp://*/*` is true as it stands: no script runs on such a
    // page. (One written without its scheme, `example.com/*`, excludes nothing it names:
    // refused as the others.)
    const NOT_WEB: [&str; 6] = [
        "about:",
        "data:",
        "blob:",
        "javascript:",
        "view-source:",
        "mailto:",
    ];
    let scheme_of_its_own = |start: &str| {
        NOT_WEB.iter().any(|n| start.eq_ignore_ascii_case(n))
            || value.split_once("://").is_some_and(|(scheme, _)| {
                scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                    && scheme
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
            })
    };
    if exclude && matches!(&why, rule_syntax::Unmatchable::Scheme(s) if scheme_of_its_own(s)) {
        return true;
    }
    if exclude {
        diags.error(
            line_no,
            format!(
                "@{key} \"{}\" would exclude no page: {why}; {}",
                snippet(value),
                why.advice()
            ),
        );
        false
    } else {
        diags.warning(
            line_no,
            format!(
                "@{key} \"{}\" matches no page: {why}; {}",
                snippet(value),
                why.advice()
            ),
        );
        true
    }
}

/// The host of a `file://host/…` pattern, which Chrome ignores (`file://bank.example/*` is
/// `file:///*`).
fn ignored_file_host(pattern: &str) -> Option<&str> {
    let rest = pattern.strip_prefix("file://")?;
    let host = rest.split('/').next().filter(|h| !h.is_empty())?;
    // Without a '/', the whole rest is the path (`file://*` is `file:///*`).
    rest.contains('/').then_some(host)
}

/// At most 80 characters of `s`, for quoting user text in messages without echoing megabytes.
fn snippet(s: &str) -> String {
    const MAX: usize = 80;
    match s.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", s.get(..cut).unwrap_or_default()),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_include_glob_costs_nothing_and_is_not_warned_about() {
        // Glob scripts get the prelude like any other (`rules::glob_superset`).
        let warned = |extra: &str| {
            let src = format!("// ==UserScript==\n// @name g\n{extra}// ==/UserScript==\n");
            parse(&src)
                .diagnostics
                .iter()
                .any(|d| d.message.contains("runs through an @include glob"))
        };
        assert!(!warned(
            "// @include http://a.test/*\n// @grant GM_addStyle\n"
        ));
        assert!(!warned("// @include http://a.test/*\n// @grant none\n"));
        assert!(!warned(
            "// @match http://a.test/*\n// @grant GM_addStyle\n"
        ));
        assert!(!warned(
            "// @include /^https?:\\/\\/a\\.test\\//\n// @grant GM_addStyle\n"
        ));
    }
    use std::time::Instant;

    fn script(body: &[&str]) -> String {
        let mut s = String::from("// ==UserScript==\n");
        for l in body {
            s.push_str(l);
            s.push('\n');
        }
        s.push_str("// ==/UserScript==\nconsole.log('hi');\n");
        s
    }

    fn meta(p: &Parsed) -> &Metadata {
        match &p.metadata {
            Some(m) => m,
            None => panic!("expected metadata, got {:?}", p.diagnostics),
        }
    }

    fn errors(p: &Parsed) -> Vec<&Diagnostic> {
        p.diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .collect()
    }

    fn warnings(p: &Parsed) -> Vec<&Diagnostic> {
        p.diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Warning)
            .collect()
    }

    fn has(p: &Parsed, line: usize, severity: Severity, needle: &str) -> bool {
        p.diagnostics
            .iter()
            .any(|d| d.line == line && d.severity == severity && d.message.contains(needle))
    }

    /// An include of a page no user script runs on (Tampermonkey's `about:blank` frames) or
    /// written without its scheme runs nowhere: said. Such an exclude is true as it stands.
    #[test]
    fn an_include_of_no_user_script_page_is_warned_an_exclude_of_one_kept() {
        let p = parse(&script(&[
            "// @name T",
            "// @include about:blank",
            "// @include chrome://settings/*",
            "// @include example.com/*",
            "// @include http*://example.com/*",
            "// @include h?tps://example.com/*",
            "// @exclude about:blank",
            "// @exclude chrome://*",
            "// @exclude ftp://*/*",
            "// @exclude-match ftp://*/*",
            "// @match ftp://example.com/*",
        ]));
        for (line, start) in [
            (3, "about:"),
            (4, "chrome:"),
            (5, "example.com/"),
            (12, "ftp:"),
        ] {
            let says = format!(
                "matches no page: Chrome runs user scripts only on pages whose address starts \
                 with http://, https:// or file://, never \"{start}\""
            );
            assert!(
                has(&p, line, Severity::Warning, &says),
                "{:?}",
                p.diagnostics
            );
        }
        // (Line 7's `h?tps` is warned for its wildcard `?` only.)
        assert!(
            p.diagnostics
                .iter()
                .all(|d| d.line < 6 || d.line == 12 || d.message.contains("? in a glob")),
            "{:?}",
            p.diagnostics
        );
        assert_eq!(
            meta(&p).exclude_globs,
            ["about:blank", "chrome://*", "ftp://*/*"]
        );
        assert_eq!(meta(&p).exclude_matches, ["ftp://*/*"]);
        // An exclude written without its scheme excludes nothing it names: refused.
        let p = parse(&script(&[
            "// @name T",
            "// @match *://*/*",
            "// @exclude example.com/*",
        ]));
        assert!(p.metadata.is_none());
        assert!(
            has(
                &p,
                4,
                Severity::Error,
                "would exclude no page: Chrome runs user scripts only"
            ),
            "{:?}",
            p.diagnostics
        );
    }

    /// A rule that no address Chrome loads can hold reads as the pages it names and matches
    /// none: as an exclude it would be shown keeping the script off pages it runs on, so it is
    /// refused at its line; as an include it is kept with a warning (it only runs less).
    /// Measured in Chromium 156 (`matching.test.mjs`): `@exclude` globs are compared with the
    /// address as the browser holds it (ASCII, scheme and host lowercase), and a pattern's path
    /// after Chrome decodes some escapes (so `café` matches there, a space never).
    /// R10: `?` in a glob is a wildcard (Chrome's reading), which an author who meant a query's
    /// `?` does not expect: warned at its line, include or exclude; `\?` is a literal one.
    #[test]
    fn a_wildcard_question_mark_in_a_glob_is_warned() {
        let p = parse(&script(&[
            "// @name T",
            "// @include https://site.example/?*",
            "// @exclude *?*",
            "// @include https://site.example/a\\?b=*",
            "// @include /^https:\\/\\/x\\.example\\/a?$/",
        ]));
        assert!(p.metadata.is_some());
        for line in [3, 4] {
            assert!(
                has(&p, line, Severity::Warning, "? in a glob is a wildcard"),
                "{line}: {:?}",
                p.diagnostics
            );
        }
        assert!(
            !p.diagnostics
                .iter()
                .any(|d| d.line >= 5 && d.message.contains("? in a glob")),
            "{:?}",
            p.diagnostics
        );
    }

    /// R11: every run of wildcards is a numbered group of the guard's RegExp, whose count V8
    /// bounds: a glob of more than 256 wildcards is refused at its line.
    #[test]
    fn a_glob_of_too_many_wildcards_is_refused() {
        let many = format!("*{}Z", "a*".repeat(MAX_GLOB_WILDCARDS));
        for key in ["@include", "@exclude"] {
            let p = parse(&script(&[
                "// @name T",
                "// @match *://*/*",
                &format!("// {key} {many}"),
            ]));
            assert!(p.metadata.is_none(), "{key}");
            assert!(
                has(&p, 4, Severity::Error, "more than 256 wildcards"),
                "{:?}",
                p.diagnostics
            );
        }
        let fine = format!("*{}Z", "a*".repeat(MAX_GLOB_WILDCARDS - 1));
        let p = parse(&script(&["// @name T", &format!("// @include {fine}")]));
        assert!(p.metadata.is_some(), "{:?}", p.diagnostics);
    }

    /// R10: a port the browser loads no page from (ERR_UNSAFE_PORT) keeps the script off no page
    /// as an exclude (refused), and runs it nowhere as an include (warned).
    #[test]
    fn an_unsafe_port_is_refused_as_an_exclude_and_warned_as_an_include() {
        for (rule, shows) in [
            ("@exclude http://bank.example:0/*", "from port 0"),
            ("@exclude-match http://bank.example:0/*", "from port 0"),
            (
                "@exclude-match https://bank.example:6000/*",
                "from port 6000",
            ),
            ("@exclude http://[::1]:25/*", "from port 25"),
        ] {
            let p = parse(&script(&[
                "// @name T",
                "// @match *://*/*",
                &format!("// {rule}"),
            ]));
            assert!(p.metadata.is_none(), "{rule} is refused");
            assert!(
                has(&p, 4, Severity::Error, shows),
                "{rule}: {:?}",
                p.diagnostics
            );
        }
        let p = parse(&script(&[
            "// @name T",
            "// @match http://bank.example:0/*",
        ]));
        assert!(p.metadata.is_some());
        assert!(
            has(&p, 3, Severity::Warning, "from port 0"),
            "{:?}",
            p.diagnostics
        );
        // A port a page may have is left alone.
        let p = parse(&script(&[
            "// @name T",
            "// @match http://bank.example:8080/*",
        ]));
        assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
    }

    #[test]
    fn a_rule_that_matches_no_address_is_refused_as_an_exclude_and_warned_as_an_include() {
        for (rule, shows) in [
            ("@exclude *://bank.example/*\u{200b}", "U+200B"),
            ("@exclude *b\u{430}nk*", "\"\u{430}\" (U+0430)"),
            ("@exclude https://bank.example/caf\u{e9}*", "U+00E9"),
            ("@exclude *://BANK.example/*", "capital letters"),
            ("@exclude HTTPS://bank.example/*", "capital letters"),
            ("@exclude http://BANK.example:*", "capital letters"),
            ("@exclude-match https://bank.example/log in*", "U+0020"),
            ("@exclude-match https://bank.example/a\u{202e}*", "U+202E"),
            // A regular expression with flags is read as a glob, and no address starts with "/".
            ("@exclude /bank\\.example/i", "never \"/\""),
            ("@exclude /bank/g", "no flags"),
            // A tester's, each shown as an exclusion while Chrome ran the script there.
            ("@exclude http://bank.example:80/*", "the port 80"),
            ("@exclude https://bank.example:443/x*", "the port 443"),
            ("@exclude http://bank.example:080/*", "the port 080"),
            ("@exclude http://[::1]:80/*", "the port 80"),
            (
                "@exclude http://bank.example",
                "an address always goes on with its path",
            ),
            ("@exclude http://bank.example/a/../b*", "resolves away"),
            ("@exclude http://bank.example/./a*", "resolves away"),
            ("@exclude http://bank.example/a/..", "resolves away"),
            ("@exclude-match http://bank.example:080/*", "the port 080"),
            ("@exclude-match http://*.168.1.1/*", "no subdomains"),
        ] {
            let p = parse(&script(&[
                "// @name T",
                "// @match *://*/*",
                &format!("// {rule}"),
            ]));
            assert!(p.metadata.is_none(), "{rule} is refused");
            assert!(
                has(&p, 4, Severity::Error, "would exclude no page"),
                "{rule}: {:?}",
                p.diagnostics
            );
            assert!(
                has(&p, 4, Severity::Error, shows),
                "{rule}: {:?}",
                p.diagnostics
            );
        }
        // Includes: kept, with a warning that says where they run: nowhere.
        let p = parse(&script(&[
            "// @name T",
            "// @include *://BANK.example/*",
            "// @match https://bank.example/log in*",
            "// @include /^https:\\/\\/bank\\.example\\//i",
        ]));
        assert!(
            has(
                &p,
                5,
                Severity::Warning,
                "matches no page: an address starts with its scheme"
            ) && has(&p, 5, Severity::Warning, "no flags"),
            "{:?}",
            p.diagnostics
        );
        assert_eq!(
            meta(&p).include_globs,
            ["*://BANK.example/*", "/^https:\\/\\/bank\\.example\\//i"]
        );
        assert!(
            has(&p, 3, Severity::Warning, "matches no page"),
            "{:?}",
            p.diagnostics
        );
        assert!(
            has(&p, 4, Severity::Warning, "matches no page"),
            "{:?}",
            p.diagnostics
        );
    }

    /// What does match stays accepted without a refusal: an encoded path, a capital in a path, a
    /// query that names another address, a non-ASCII path in a pattern (Chrome decodes it).
    #[test]
    fn a_rule_that_matches_some_address_is_kept() {
        let p = parse(&script(&[
            "// @name T",
            "// @match *://*/*",
            "// @exclude https://bank.example/caf%C3%A9*",
            "// @exclude https://bank.example/Login*",
            "// @exclude *google.com/url?q=https://Example.com/*",
            "// @exclude https://*Login*",
            "// @exclude-match https://bank.example/\u{fc}berweisung*",
            // A port the address does show, a dot-led name, dots past a wildcard or in the
            // query, and a full address after `*.`.
            "// @exclude http://bank.example:8080/*",
            "// @exclude http://bank.example/..a/*",
            "// @exclude http://bank.example/*/../*",
            "// @exclude http://bank.example/x?r=/../*",
            "// @exclude http://bank.example*",
            "// @exclude file:///tmp/x*",
            "// @exclude file://localhost/tmp/x*",
            "// @exclude-match http://bank.example:8080/*",
            "// @exclude-match http://*.127.0.0.1/*",
            "// @exclude-match http://*.example10/*",
        ]));
        // Refused for none; warned only for a wildcard `?` (lines 6 and 12).
        assert!(p.metadata.is_some());
        let lines: Vec<usize> = p.diagnostics.iter().map(|d| d.line).collect();
        assert_eq!(lines, [6, 12], "{:?}", p.diagnostics);
        assert!(p
            .diagnostics
            .iter()
            .all(|d| d.message.contains("? in a glob")));
        // A file pattern's host and port are Chrome's to ignore, not a reason to refuse it.
        let p = parse(&script(&[
            "// @name T",
            "// @match *://*/*",
            "// @exclude-match file://x:080/*",
            "// @exclude-match file://*.1.1/*",
        ]));
        assert!(p.metadata.is_some(), "{:?}", p.diagnostics);
    }

    /// What a rule names that its text hides is said when it is parsed: a look-alike host is read
    /// as its punycode name, and a file pattern's host is ignored by Chrome.
    #[test]
    fn a_look_alike_host_and_a_file_host_are_named_as_chrome_reads_them() {
        let p = parse(&script(&[
            "// @name T",
            "// @match *://*/*",
            "// @exclude-match https://b\u{430}nk.example/*",
            "// @match file://bank.example/*",
        ]));
        let m = meta(&p);
        assert_eq!(m.exclude_matches, ["https://b\u{430}nk.example/*"]);
        assert!(
            has(&p, 4, Severity::Warning, "reads this host as xn--"),
            "{:?}",
            p.diagnostics
        );
        assert!(
            has(
                &p,
                5,
                Severity::Warning,
                "Chrome ignores the host (\"bank.example\")"
            ),
            "{:?}",
            p.diagnostics
        );
        let p = parse(&script(&[
            "// @name T",
            "// @match file:///home/*",
            "// @match file://*",
        ]));
        assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
    }

    #[test]
    fn every_key() {
        let src = script(&[
            "// @name        My Script",
            "// @namespace   https://example.com/ns",
            "// @version     1.2.3",
            "// @description Does things",
            "// @match       https://*.example.com/*",
            "// @match       *://example.org/*",
            "// @exclude-match https://example.com/private/*",
            "// @include     https://other.example/*",
            "// @include     *",
            "// @exclude     *logout*",
            "// @run-at      document-start",
            "// @noframes",
            "// @grant       none",
            "// @author      Someone",
            "// @icon        https://example.com/icon.png",
            "// @name:fr     Mon script",
            "// @license     MIT",
        ]);
        let p = parse(&src);
        assert!(errors(&p).is_empty(), "{:?}", p.diagnostics);
        assert!(warnings(&p).is_empty(), "{:?}", p.diagnostics);
        let m = meta(&p);
        assert_eq!(m.name, "My Script");
        assert_eq!(m.namespace.as_deref(), Some("https://example.com/ns"));
        assert_eq!(m.version.as_deref(), Some("1.2.3"));
        assert_eq!(m.description.as_deref(), Some("Does things"));
        assert_eq!(m.matches, ["https://*.example.com/*", "*://example.org/*"]);
        assert_eq!(m.exclude_matches, ["https://example.com/private/*"]);
        assert_eq!(m.include_globs, ["https://other.example/*", "*"]);
        assert_eq!(m.exclude_globs, ["*logout*"]);
        assert_eq!(m.run_at, RunAt::DocumentStart);
        assert!(m.no_frames);
        assert_eq!(m.grants, ["none"]);
        let other: Vec<(&str, &str)> = m
            .other
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            other,
            [
                ("author", "Someone"),
                ("icon", "https://example.com/icon.png"),
                ("name:fr", "Mon script"),
                ("license", "MIT"),
            ]
        );
        assert!(m.runs_anywhere());
    }

    #[test]
    fn defaults() {
        let p = parse(&script(&["// @name x", "// @match https://a.example/*"]));
        let m = meta(&p);
        assert_eq!(m.run_at, RunAt::DocumentIdle);
        assert!(!m.no_frames);
        assert!(m.namespace.is_none() && m.version.is_none() && m.description.is_none());
        assert!(m.grants.is_empty() && m.other.is_empty());
        assert!(p.diagnostics.is_empty());
    }

    #[test]
    fn run_at_values() {
        for (v, want) in [
            ("document-start", RunAt::DocumentStart),
            ("document-end", RunAt::DocumentEnd),
            ("document-idle", RunAt::DocumentIdle),
        ] {
            let p = parse(&script(&[
                "// @name x",
                "// @match *://*/*",
                &format!("// @run-at {v}"),
            ]));
            assert_eq!(meta(&p).run_at, want);
            assert!(p.diagnostics.is_empty());
        }
        let p = parse(&script(&[
            "// @name x",
            "// @match *://*/*",
            "// @run-at document-body",
        ]));
        assert_eq!(meta(&p).run_at, RunAt::DocumentEnd);
        assert!(has(&p, 4, Severity::Warning, "document-body"));
        let p = parse(&script(&[
            "// @name x",
            "// @match *://*/*",
            "// @run-at context-menu",
        ]));
        assert!(p.metadata.is_none());
        assert!(has(&p, 4, Severity::Error, "without being asked"));
        let p = parse(&script(&[
            "// @name x",
            "// @match *://*/*",
            "// @run-at document-ready",
        ]));
        assert_eq!(meta(&p).run_at, RunAt::DocumentEnd);
        assert!(has(
            &p,
            4,
            Severity::Warning,
            "document-ready is read as document-end"
        ));
        let p = parse(&script(&[
            "// @name x",
            "// @match *://*/*",
            "// @run-at whenever",
        ]));
        assert!(p.metadata.is_none());
        assert!(has(&p, 4, Severity::Error, "\"whenever\""));
        let p = parse(&script(&["// @name x", "// @match *://*/*", "// @run-at"]));
        assert!(has(&p, 4, Severity::Error, "unknown @run-at value \"\""));
    }

    #[test]
    fn key_spellings_are_equivalent() {
        let p = parse(&script(&[
            "// @name x",
            "// @match *://*/*",
            "// @exclude_match https://a.example/*",
            "// @excludeMatch https://b.example/*",
            "// @run_at document-end",
        ]));
        let m = meta(&p);
        assert_eq!(
            m.exclude_matches,
            ["https://a.example/*", "https://b.example/*"]
        );
        assert_eq!(m.run_at, RunAt::DocumentEnd);
    }

    /// Violentmonkey's opt-in for top-level await is warned at its line (the installed script
    /// would throw a SyntaxError), and kept as written.
    #[test]
    fn top_level_await_is_warned() {
        for key in ["@top-level-await", "@top_level_await"] {
            let p = parse(&script(&[
                "// @name T",
                "// @match *://*/*",
                &format!("// {key}"),
            ]));
            assert!(
                has(
                    &p,
                    4,
                    Severity::Warning,
                    "@top-level-await is not supported"
                ),
                "{key}: {:?}",
                p.diagnostics
            );
            assert_eq!(meta(&p).other.len(), 1);
        }
    }

    /// A script that uses `unsafeWindow` without naming it in a `@grant` hears what it gets,
    /// at the first line of code that uses it; not for a longer name or a comment.
    #[test]
    fn unsafe_window_used_without_its_grant_is_told_what_it_is() {
        let with = |grants: &[&str], code: &str| {
            let mut lines = vec!["// @name T", "// @match *://*/*"];
            lines.extend_from_slice(grants);
            let header = lines.len() + 2;
            (parse(&(script(&lines) + code)), header)
        };
        let code = "const x = 1;\nunsafeWindow.jQuery('p');\n";
        // Header lines, the code's "console.log('hi')", then "const x", then the use.
        for grants in [&[][..], &["// @grant none"][..]] {
            let (p, header) = with(grants, code);
            assert!(
                has(
                    &p,
                    header + 3,
                    Severity::Warning,
                    "unsafeWindow is not defined in this script"
                ),
                "{grants:?}: {:?}",
                p.diagnostics
            );
        }
        // `@grant none` beside another grant gives it, as the other grant alone does.
        for grants in [
            &["// @grant GM_xmlhttpRequest"][..],
            &["// @grant none", "// @grant GM_setValue"][..],
        ] {
            let (p, header) = with(grants, code);
            assert!(
                has(&p, header + 3, Severity::Warning, "unsafeWindow (given without a @grant line for it): here unsafeWindow is the window of the script's own isolated world"),
                "{grants:?}: {:?}",
                p.diagnostics
            );
        }
        // A feature test does not throw: said so.
        let (p, header) = with(&[], "const x = 1;\nconst w = typeof unsafeWindow !== 'undefined' ? unsafeWindow : window;\n");
        assert!(
            has(&p, header + 3, Severity::Warning, "so a typeof unsafeWindow test finds it undefined (any other use throws a ReferenceError)"),
            "{:?}",
            p.diagnostics
        );
        // Granted by name: its @grant line says it, once.
        let (p, _) = with(&["// @grant unsafeWindow"], code);
        assert_eq!(
            p.diagnostics
                .iter()
                .filter(|d| d.message.contains("unsafeWindow"))
                .count(),
            1,
            "{:?}",
            p.diagnostics
        );
        for quiet in [
            "// unsafeWindow.jQuery\n",
            "const myunsafeWindow = 1;\n",
            "window.unsafeWindow_2 = 1;\n",
            "$unsafeWindow();\n",
        ] {
            let (p, _) = with(&["// @grant GM_xmlhttpRequest"], quiet);
            assert!(
                p.diagnostics
                    .iter()
                    .all(|d| !d.message.contains("unsafeWindow")),
                "{quiet}: {:?}",
                p.diagnostics
            );
        }
    }

    #[test]
    fn a_request_grant_without_connect_is_warned_at_the_grant() {
        let src = |lines: &str| {
            parse(&format!(
                "// ==UserScript==\n// @name A\n// @match https://a.test/*\n{lines}// ==/UserScript==\n"
            ))
        };
        for grant in ["GM_xmlhttpRequest", "GM.xmlHttpRequest", "GM_download"] {
            let p = src(&format!("// @grant GM_setValue\n// @grant {grant}\n"));
            let w = warnings(&p);
            assert_eq!(w.len(), 1, "{grant}: {w:?}");
            assert_eq!(w[0].line, 5);
            assert!(w[0].message.starts_with("no @connect"), "{w:?}");
            let p = src(&format!("// @grant {grant}\n// @connect self\n"));
            assert!(warnings(&p).is_empty(), "{grant}");
        }
        assert!(warnings(&src("// @grant GM_setValue\n")).is_empty());
    }

    #[test]
    fn asking_for_the_page_world_is_warned_at_its_line() {
        for (line, warned) in [
            ("@inject-into page", true),
            ("@inject-into auto", true),
            ("@sandbox raw", true),
            ("@sandbox JavaScript", true),
            // Tampermonkey's: the script put into the page, without a wrapper.
            ("@unwrap", true),
            ("@inject-into content", false),
            ("@sandbox DOM", false),
        ] {
            let p = parse(&format!(
                "// ==UserScript==\n// @name A\n// @match https://a.test/*\n// {line}\n// ==/UserScript==\n"
            ));
            let w = warnings(&p);
            assert_eq!(w.len(), usize::from(warned), "{line}: {w:?}");
            if warned {
                assert_eq!(w[0].line, 4);
                assert!(w[0].message.contains("is not possible here"), "{w:?}");
                assert!(w[0].message.starts_with(line), "{w:?}");
            }
        }
    }

    #[test]
    fn a_misspelt_key_is_named_with_the_one_it_likely_means() {
        for (typed, meant) in [
            ("matches", "match"),
            ("Match", "match"),
            ("matchx", "match"),
            ("includes", "include"),
            ("exclude_matches", "exclude-match"),
            ("runat", "run-at"),
            ("run-at:", "run-at"),
            ("grnat", "grant"),
            ("requires", "require"),
            ("noframe", "noframes"),
            ("namespaces", "namespace"),
            ("conect", "connect"),
        ] {
            assert_eq!(
                misspelt_key(typed),
                Some(meant).filter(|_| !typed.contains(':')),
                "{typed}"
            );
        }
        // What other managers read, the URLs in any case, localized names, and keys far from
        // any: quiet.
        for quiet in [
            "source",
            "author",
            "icon",
            "license",
            "inject-into",
            "run-in",
            "homepageURL",
            "updateurl",
            "DOWNLOADURL",
            "name:ja",
            "description:fr",
            "note",
            "date",
            "x",
            "antifeature",
            "supportURL",
            "webRequest",
        ] {
            assert_eq!(misspelt_key(quiet), None, "{quiet}");
        }
        let p = parse(&script(&[
            "// @name k",
            "// @matches https://a.example/*",
            "// @author me",
        ]));
        assert!(has(
            &p,
            3,
            Severity::Warning,
            "@matches is not a key any userscript manager reads, so this line is ignored: did you mean @match?"
        ));
        assert!(
            !has(&p, 4, Severity::Warning, "did you mean"),
            "{:?}",
            p.diagnostics
        );
        assert_eq!(edit_distance(b"", b"abc"), 3);
        assert_eq!(edit_distance(b"ab", b"ba"), 1);
    }

    #[test]
    fn provided_grants_are_quiet_unknown_ones_named() {
        let p = parse(&script(&[
            "// @name g",
            "// @match https://a.example/*",
            "// @grant GM_addStyle",
            "// @grant GM.info",
            "// @grant GM_getvalue",
            "// @grant GM.xmlhttpRequest",
            "// @grant GM.getResourceURL",
            "// @grant GM_frobnicate",
        ]));
        assert!(
            !has(&p, 4, Severity::Warning, "@grant"),
            "{:?}",
            p.diagnostics
        );
        assert!(
            !has(&p, 5, Severity::Warning, "@grant"),
            "{:?}",
            p.diagnostics
        );
        // A known name in other letter case is named. The classic spellings on `GM.` are
        // given, as Violentmonkey gives them: no word.
        for (line, text) in [
            (
                6,
                "@grant GM_getvalue: no such API (did you mean GM_getValue?)",
            ),
            (9, "@grant GM_frobnicate: no such API (a typo?)"),
        ] {
            assert!(
                has(&p, line, Severity::Warning, text),
                "{:?}",
                p.diagnostics
            );
        }
        for line in [7, 8] {
            assert!(
                !has(&p, line, Severity::Warning, "@grant"),
                "{:?}",
                p.diagnostics
            );
        }
        assert_eq!(
            meta(&p).grants,
            [
                "GM_addStyle",
                "GM.info",
                "GM_getvalue",
                "GM.xmlhttpRequest",
                "GM.getResourceURL",
                "GM_frobnicate"
            ]
        );
    }

    /// `GM_download` is given now (`gm::api`): no "not implemented" for it in either spelling;
    /// the names other managers have and this provider does not give are still named.
    #[test]
    fn download_is_quiet_and_the_apis_not_given_still_warn() {
        let p = parse(&script(&[
            "// @name d",
            "// @match https://a.example/*",
            "// @grant GM_download",
            "// @grant GM.download",
            "// @grant GM_getTab",
            "// @grant GM_cookie",
        ]));
        // Line 6, GM_getTab, is given now too (`gm::tab_objects`).
        for line in [4, 5, 6] {
            assert!(
                !has(&p, line, Severity::Warning, "@grant"),
                "{line}: {:?}",
                p.diagnostics
            );
        }
        assert!(has(
            &p,
            7,
            Severity::Warning,
            "@grant GM_cookie is not implemented by this provider"
        ));
    }

    #[test]
    fn connect_lines_are_kept_checked_and_flagged() {
        let p = parse(&script(&[
            "// @name c",
            "// @match https://a.example/*",
            "// @connect api.example.com",
            "// @connect *",
            "// @connect self",
            "// @connect not a host",
            "// @connect com",
            "// @connect",
        ]));
        let m = meta(&p);
        assert_eq!(m.connects, ["api.example.com", "*", "self", "com"]);
        assert!(!has(&p, 4, Severity::Warning, "@connect"));
        assert!(has(&p, 5, Severity::Warning, "any site"));
        assert!(!has(&p, 6, Severity::Warning, "@connect"));
        assert!(has(&p, 7, Severity::Warning, "is not a host name"));
        assert!(has(&p, 8, Severity::Warning, "every site under .com"));
        assert!(has(&p, 9, Severity::Warning, "@connect without a value"));
        assert!(errors(&p).is_empty());
    }

    #[test]
    fn require_and_resource_are_modelled_and_not_silently_dropped() {
        let p = parse(&script(&[
            "// @name r",
            "// @match https://a.example/*",
            "// @require https://cdn.example/lib.js",
            "// @resource css https://cdn.example/a.css",
            "// @resource lonely",
        ]));
        let m = meta(&p);
        assert_eq!(m.requires, ["https://cdn.example/lib.js"]);
        assert_eq!(
            m.resources,
            [("css".to_owned(), "https://cdn.example/a.css".to_owned())]
        );
        assert!(m.other.is_empty());
        // Loaded when written: no "not loaded" warning any more.
        assert!(warnings(&p).iter().all(|d| d.line != 4 && d.line != 5));
        assert!(has(&p, 6, Severity::Warning, "needs a name and a URL"));
        // A URL that could never be fetched is an error at its line.
        let p = parse(&script(&[
            "// @name r",
            "// @match https://a.example/*",
            "// @require http://cdn.example/lib.js",
            "// @resource css https://cdn.example/a.css#md5=0123",
        ]));
        assert!(has(&p, 4, Severity::Error, "only https URLs are loaded"));
        assert!(has(&p, 5, Severity::Error, "md5"));
    }

    #[test]
    fn grants_warn_unless_none() {
        let p = parse(&script(&[
            "// @name x",
            "// @match *://*/*",
            "// @grant none",
            "// @grant GM_getValue",
            "// @grant GM.xmlHttpRequest",
            "// @grant unsafeWindow",
            "// @grant window.close",
            "// @grant",
        ]));
        let m = meta(&p);
        assert_eq!(
            m.grants,
            [
                "none",
                "GM_getValue",
                "GM.xmlHttpRequest",
                "unsafeWindow",
                "window.close"
            ]
        );
        assert!(!has(&p, 4, Severity::Warning, "@grant"));
        // Values are given: no warning.
        assert!(!has(&p, 5, Severity::Warning, "@grant"));
        assert!(!has(&p, 6, Severity::Warning, "@grant"));
        // unsafeWindow is given, with what it is and is not said plainly.
        assert!(has(&p, 7, Severity::Warning, "NOT the page's JavaScript"));
        assert!(has(&p, 7, Severity::Warning, "MAIN world"));
        assert!(has(
            &p,
            8,
            Severity::Warning,
            "@grant window.close is not implemented"
        ));
        assert!(has(&p, 9, Severity::Warning, "@grant without a value"));
    }

    #[test]
    fn regex_includes_are_kept_and_checked() {
        let p = parse(&script(&[
            "// @name x",
            "// @include /^https?:\\/\\/example\\.com\\//",
            "// @exclude /logout/",
            "// @include /",
            "// @match https://example.com/*",
        ]));
        let m = meta(&p);
        assert_eq!(m.include_globs, ["/^https?:\\/\\/example\\.com\\//", "/"]);
        assert_eq!(m.exclude_globs, ["/logout/"]);
        assert!(has(&p, 3, Severity::Warning, "regular-expression @include: Chrome cannot express it, so a check at the top of the script enforces it"));
        assert!(has(&p, 4, Severity::Warning, "regular-expression @exclude"));
        assert!(!has(&p, 3, Severity::Warning, "is in no address"));
        // The guard tests the expression against the address as the browser holds it, where
        // `é` is %C3%A9 and a space %20: said at its line, kept (a branch may still match).
        let p = parse(&script(&[
            "// @name x",
            "// @include /example\\.com\\/caf\u{e9}/",
            "// @exclude /log in/",
        ]));
        assert_eq!(meta(&p).include_globs.len(), 1);
        assert_eq!(meta(&p).exclude_globs.len(), 1);
        assert!(has(
            &p,
            3,
            Severity::Warning,
            "\"\u{e9}\" (U+00E9) is in no address Chrome loads"
        ));
        assert!(has(
            &p,
            3,
            Severity::Warning,
            "where the expression needs it, it matches nothing"
        ));
        assert!(has(
            &p,
            4,
            Severity::Warning,
            "the character U+0020 is in no address"
        ));
        // An expression JavaScript would refuse is an error at its line.
        let p = parse(&script(&[
            "// @name x",
            "// @match *://*/*",
            "// @exclude /a(b/",
        ]));
        assert!(p.metadata.is_none());
        assert!(has(&p, 4, Severity::Error, "invalid regular expression"));
    }

    #[test]
    fn manager_spellings_are_accepted_with_a_warning() {
        let p = parse(&script(&[
            "// @name x",
            "// @match http*://a.example/*",
            "// @match *",
            "// @match https://www.google.com",
            "// @exclude-match http*://a.example/private",
            "// @exclude-match https://bank.example",
        ]));
        let m = meta(&p);
        assert_eq!(
            m.matches,
            ["*://a.example/*", "*://*/*", "https://www.google.com/"]
        );
        // Without a path, an exclude covers the whole site (never a narrower exclusion).
        assert_eq!(
            m.exclude_matches,
            ["*://a.example/private", "https://bank.example/*"]
        );
        assert!(has(&p, 7, Severity::Warning, "every page of the site"));
        assert!(has(&p, 3, Severity::Warning, "http*:// is read as *://"));
        assert!(has(&p, 4, Severity::Warning, "@match * is read as *://*/*"));
        assert!(has(&p, 5, Severity::Warning, "has no path"));
    }

    /// Violentmonkey's `www.google.*`: read as `.tld` (public suffixes), so it runs on google's
    /// country sites and never on `www.google.evil.com`; before, the script was refused.
    #[test]
    fn a_host_ending_in_a_star_is_read_as_tld() {
        let p = parse(&script(&[
            "// @name x",
            "// @match *://www.google.*/search*",
            "// @match https://*.gw.*/*",
            "// @exclude-match https://ads.gw.*/*",
        ]));
        let m = meta(&p);
        assert_eq!(
            m.matches,
            ["*://www.google.tld/search*", "https://*.gw.tld/*"]
        );
        assert_eq!(m.exclude_matches, ["https://ads.gw.tld/*"]);
        assert!(has(&p, 3, Severity::Warning, "read as .tld"));
        let runs = |url: &str| crate::scripts::registry::verdict(m, url).runs();
        assert!(runs("https://www.google.com/search?q=1"));
        assert!(runs("https://www.google.co.uk/search?q=1"));
        assert!(!runs("https://www.google.evil.com/search?q=1"));
        assert!(runs("https://a.gw.de/x"));
        assert!(!runs("https://ads.gw.de/x"));
        // Other stars in a host are still refused, and nothing else is rewritten.
        for bad in ["*://www.*.com/*", "*://*.*/*", "*://www.goo*.*/*"] {
            let p = parse(&script(&["// @name x", &format!("// @match {bad}")]));
            assert!(p.metadata.is_none(), "{bad}");
        }
        assert_eq!(star_suffix_as_tld("*://*/*"), None);
        assert_eq!(star_suffix_as_tld("https://a.example/x.*"), None);
    }

    #[test]
    fn tld_include_warns() {
        let p = parse(&script(&["// @name x", "// @include *://www.google.tld/*"]));
        assert_eq!(meta(&p).include_globs, ["*://www.google.tld/*"]);
        assert!(has(&p, 3, Severity::Warning, ".tld"));
    }

    #[test]
    fn no_match_or_include_warns() {
        let p = parse(&script(&["// @name x"]));
        assert!(!meta(&p).runs_anywhere());
        assert!(has(&p, 1, Severity::Warning, "no @match or @include"));
    }

    #[test]
    fn no_header() {
        for src in [
            "",
            "console.log(1);",
            "// @name x\n// @match *://*/*\n",
            "// ==/UserScript==\n",
        ] {
            let p = parse(src);
            assert!(p.metadata.is_none());
            assert_eq!(p.diagnostics.len(), 1);
            assert!(has(&p, 1, Severity::Error, "no // ==UserScript== header"));
        }
    }

    #[test]
    fn missing_end_names_the_start_line() {
        let p = parse("// license\n\n// ==UserScript==\n// @name x\n// @match *://*/*\ncode();\n");
        assert!(p.metadata.is_none());
        assert_eq!(p.diagnostics.len(), 1);
        assert!(has(
            &p,
            3,
            Severity::Error,
            "header on line 3 has no closing // ==/UserScript=="
        ));
    }

    #[test]
    fn header_may_follow_other_lines_and_be_indented() {
        let src = "'use strict';\n/* hi */\n  //   ==UserScript==  \n\t// @name  x \n  //@match *://*/*\n   // ==/UserScript==\n";
        let p = parse(src);
        let m = meta(&p);
        assert_eq!(m.name, "x");
        assert_eq!(m.matches, ["*://*/*"]);
    }

    #[test]
    fn non_comment_line_in_block_is_an_error() {
        let p = parse(&script(&[
            "// @name x",
            "// @match *://*/*",
            "var a = 1;",
            "",
            "// plain comment",
            "//",
            "/* block */",
        ]));
        assert!(p.metadata.is_none());
        assert!(has(&p, 4, Severity::Error, "\"var a = 1;\""));
        assert!(has(&p, 8, Severity::Error, "\"/* block */\""));
        assert_eq!(errors(&p).len(), 2);
    }

    #[test]
    fn name_errors() {
        let p = parse(&script(&["// @match *://*/*"]));
        assert!(p.metadata.is_none());
        assert!(has(&p, 1, Severity::Error, "missing @name"));

        let p = parse("\n\n// ==UserScript==\n// @match *://*/*\n// ==/UserScript==\n");
        assert!(has(&p, 3, Severity::Error, "missing @name"));

        let p = parse(&script(&["// @name   ", "// @match *://*/*"]));
        assert!(p.metadata.is_none());
        assert!(has(&p, 2, Severity::Error, "@name is empty"));
        assert!(!p
            .diagnostics
            .iter()
            .any(|d| d.message.contains("missing @name")));

        // A localized name alone is not a name.
        let p = parse(&script(&["// @name:fr Nom", "// @match *://*/*"]));
        assert!(has(&p, 1, Severity::Error, "missing @name"));
    }

    #[test]
    fn duplicates_first_wins() {
        let p = parse(&script(&[
            "// @name first",
            "// @namespace ns1",
            "// @version 1",
            "// @description d1",
            "// @run-at document-start",
            "// @name second",
            "// @namespace ns2",
            "// @version 2",
            "// @description d2",
            "// @run-at document-end",
            "// @match *://*/*",
        ]));
        let m = meta(&p);
        assert_eq!(m.name, "first");
        assert_eq!(m.namespace.as_deref(), Some("ns1"));
        assert_eq!(m.version.as_deref(), Some("1"));
        assert_eq!(m.description.as_deref(), Some("d1"));
        assert_eq!(m.run_at, RunAt::DocumentStart);
        assert!(has(
            &p,
            7,
            Severity::Warning,
            "duplicate @name ignored: the one on line 2 is used"
        ));
        assert!(has(
            &p,
            8,
            Severity::Warning,
            "duplicate @namespace ignored: the one on line 3"
        ));
        assert!(has(
            &p,
            9,
            Severity::Warning,
            "duplicate @version ignored: the one on line 4"
        ));
        assert!(has(
            &p,
            10,
            Severity::Warning,
            "duplicate @description ignored: the one on line 5"
        ));
        assert!(has(
            &p,
            11,
            Severity::Warning,
            "duplicate @run-at ignored: the one on line 6"
        ));
        assert_eq!(warnings(&p).len(), 5);
    }

    #[test]
    fn names_lose_control_and_direction_characters() {
        let p = parse("// ==UserScript==\n// @name Safe\u{202E}txt.exe\u{0}\n// @namespace a\u{2066}b\n// ==/UserScript==\n");
        let m = p.metadata.expect("still valid");
        assert_eq!(m.name, "Safetxt.exe");
        assert_eq!(m.namespace.as_deref(), Some("ab"));
        assert_eq!(
            p.diagnostics
                .iter()
                .filter(|d| d.message.contains("text-direction"))
                .count(),
            2
        );
        let only = parse("// ==UserScript==\n// @name \u{202E}\n// ==/UserScript==\n");
        assert!(only.metadata.is_none());
    }

    #[test]
    fn empty_single_values_are_ignored() {
        let p = parse(&script(&[
            "// @name x",
            "// @version",
            "// @version 2",
            "// @match *://*/*",
        ]));
        assert_eq!(meta(&p).version.as_deref(), Some("2"));
        assert!(has(&p, 3, Severity::Warning, "@version has no value"));
    }

    #[test]
    fn invalid_patterns_are_errors_with_reasons() {
        let p = parse(&script(&[
            "// @name x",
            "// @match http://256.256.256.256/*",
            "// @match https://ok.example/*",
            "// @exclude-match foo://*",
            "// @match",
        ]));
        assert!(p.metadata.is_none());
        assert!(has(
            &p,
            3,
            Severity::Error,
            "invalid @match \"http://256.256.256.256/*\": invalid host \"256.256.256.256\""
        ));
        assert!(has(
            &p,
            5,
            Severity::Error,
            "invalid @exclude-match \"foo://*\": invalid scheme \"foo\""
        ));
        assert!(has(&p, 6, Severity::Error, "invalid @match \"\""));
        assert_eq!(errors(&p).len(), 3);
    }

    #[test]
    fn empty_key_warns() {
        let p = parse(&script(&[
            "// @name x",
            "// @match *://*/*",
            "// @",
            "// @ value",
        ]));
        assert!(p.metadata.is_some());
        assert!(has(&p, 4, Severity::Warning, "'@' without a key name"));
        assert!(has(&p, 5, Severity::Warning, "'@' without a key name"));
    }

    #[test]
    fn crlf_and_bom() {
        let lf = script(&["// @name x", "// @match *://*/*", "// @version 1", "oops"]);
        let crlf = lf.replace('\n', "\r\n");
        let bom = format!("\u{feff}{crlf}");
        let a = parse(&lf);
        let b = parse(&crlf);
        let c = parse(&bom);
        assert_eq!(a, b);
        assert_eq!(a, c);
        assert!(has(&c, 5, Severity::Error, "\"oops\""));

        let ok = format!(
            "\u{feff}{}",
            script(&["// @name x", "// @match *://*/*"]).replace('\n', "\r\n")
        );
        let p = parse(&ok);
        assert_eq!(meta(&p).name, "x");
        assert_eq!(meta(&p).matches, ["*://*/*"]);
    }

    #[test]
    fn unicode_values() {
        let p = parse(&script(&[
            "// @name 名前 🚀 Ünïcödé",
            "// @name:ja スクリプト",
            "// @description   café — naïve  ",
            "// @match https://bücher.example/*",
            "// @include https://例え.テスト/*",
        ]));
        let m = meta(&p);
        assert_eq!(m.name, "名前 🚀 Ünïcödé");
        assert_eq!(m.description.as_deref(), Some("café — naïve"));
        assert_eq!(m.other, [("name:ja".to_owned(), "スクリプト".to_owned())]);
        assert_eq!(m.matches, ["https://bücher.example/*"]);
        assert_eq!(m.include_globs, ["https://例え.テスト/*"]);
    }

    #[test]
    fn serde_shapes() {
        let p = parse(&script(&[
            "// @name x",
            "// @match *://*/*",
            "// @exclude-match https://a.example/*",
            "// @noframes",
        ]));
        let json = serde_json::to_value(&p).unwrap_or_default();
        let m = &json["metadata"];
        assert_eq!(m["name"], "x");
        assert_eq!(m["runAt"], "document_idle");
        assert_eq!(m["noFrames"], true);
        assert_eq!(m["excludeMatches"][0], "https://a.example/*");
        assert!(m.get("includeGlobs").is_some() && m.get("excludeGlobs").is_some());
        assert_eq!(
            serde_json::to_value(RunAt::DocumentStart).unwrap_or_default(),
            "document_start"
        );
        assert_eq!(
            serde_json::to_value(RunAt::DocumentEnd).unwrap_or_default(),
            "document_end"
        );

        let bad = parse(&script(&["// @version 1"]));
        let json = serde_json::to_value(&bad).unwrap_or_default();
        assert!(json["metadata"].is_null());
        assert_eq!(json["diagnostics"][0]["severity"], "error");
        assert_eq!(json["diagnostics"][0]["line"], 1);
        assert_eq!(json["diagnostics"][1]["severity"], "warning");

        // Metadata round-trips, and missing collections default.
        let original = meta(&p).clone();
        let text = serde_json::to_string(&original).unwrap_or_default();
        let back: Result<Metadata, _> = serde_json::from_str(&text);
        assert_eq!(back.ok(), Some(original));
        let minimal: Result<Metadata, _> = serde_json::from_str(r#"{"name":"n"}"#);
        let minimal = minimal.ok();
        assert_eq!(
            minimal.as_ref().map(|m| m.run_at),
            Some(RunAt::DocumentIdle)
        );
        assert_eq!(minimal.map(|m| m.matches.len()), Some(0));
    }

    #[test]
    fn cap_per_key() {
        let mut body = vec!["// @name x".to_owned()];
        for i in 0..10_000 {
            body.push(format!("// @match https://site{i}.example/*"));
        }
        let refs: Vec<&str> = body.iter().map(String::as_str).collect();
        let src = script(&refs);
        let start = Instant::now();
        let p = parse(&src);
        assert!(start.elapsed().as_secs() < 5);
        assert!(p.metadata.is_none());
        // Header is line 1, @name line 2, the first @match line 3, so the 257th is line 259.
        assert!(has(
            &p,
            3 + MAX_LINES_PER_KEY,
            Severity::Error,
            "more than 256 @match lines"
        ));
        assert_eq!(errors(&p).len(), 1);
    }

    #[test]
    fn exactly_at_cap_is_fine() {
        let mut body = vec!["// @name x".to_owned()];
        for i in 0..MAX_LINES_PER_KEY {
            body.push(format!("// @grant none{i}"));
        }
        body.push("// @match *://*/*".to_owned());
        let refs: Vec<&str> = body.iter().map(String::as_str).collect();
        let p = parse(&script(&refs));
        assert_eq!(meta(&p).grants.len(), MAX_LINES_PER_KEY);
    }

    /// Spelling suggestions stop after [`MAX_SPELLING_CHECKS`] unknown-key lines (a block of
    /// 27,000 made a read take 1.5 s in the worker); the lines are still kept.
    #[test]
    fn spelling_is_checked_for_a_bounded_number_of_lines() {
        let mut lines = vec![
            "// @name T".to_owned(),
            "// @match https://a.test/*".to_owned(),
        ];
        lines.extend((0..100).map(|i| format!("// @grnat v{i}")));
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let p = parse(&script(&refs));
        let told = p
            .diagnostics
            .iter()
            .filter(|d| d.message.contains("did you mean @grant?"))
            .count();
        assert_eq!(told, MAX_SPELLING_CHECKS);
        assert_eq!(meta(&p).other.len(), 100);
        // Localized names and keys other managers read do not use the checks up.
        let mut lines = vec![
            "// @name T".to_owned(),
            "// @match https://a.test/*".to_owned(),
        ];
        lines.extend((0..100).map(|i| format!("// @name:l{i} T")));
        lines.extend((0..100).map(|i| format!("// @author a{i}")));
        lines.push("// @mtach https://b.test/*".to_owned());
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let p = parse(&script(&refs));
        assert!(
            p.diagnostics
                .iter()
                .any(|d| d.message.contains("did you mean @match?")),
            "{:?}",
            p.diagnostics
        );
    }

    #[test]
    fn cap_counts_key_spellings_together() {
        let mut body = vec!["// @name x".to_owned(), "// @match *://*/*".to_owned()];
        for i in 0..MAX_LINES_PER_KEY {
            let key = if i % 2 == 0 {
                "exclude-match"
            } else {
                "excludeMatch"
            };
            body.push(format!("// @{key} https://e{i}.example/*"));
        }
        body.push("// @exclude_match https://last.example/*".to_owned());
        let refs: Vec<&str> = body.iter().map(String::as_str).collect();
        let p = parse(&script(&refs));
        assert!(p.metadata.is_none());
        assert!(has(
            &p,
            4 + MAX_LINES_PER_KEY,
            Severity::Error,
            "more than 256 @exclude_match lines"
        ));
    }

    #[test]
    fn huge_source_is_linear() {
        let mut src = script(&["// @name big", "// @match *://*/*"]);
        for i in 0..100_000 {
            src.push_str(&format!("let v{i} = {i}; // @name not metadata\n"));
        }
        let start = Instant::now();
        let p = parse(&src);
        assert_eq!(meta(&p).name, "big");
        assert!(p.diagnostics.is_empty());

        // 100k lines inside the block: every one is an error, but the report stays bounded.
        let mut inside = String::from("// ==UserScript==\n// @name x\n// @match *://*/*\n");
        for i in 0..100_000 {
            inside.push_str(&format!("code{i}();\n"));
        }
        inside.push_str("// ==/UserScript==\n");
        let p = parse(&inside);
        assert!(p.metadata.is_none());
        assert_eq!(p.diagnostics.len(), MAX_DIAGNOSTICS + 1);
        let last = p.diagnostics.last();
        assert_eq!(last.map(|d| d.severity), Some(Severity::Error));
        assert!(last.is_some_and(|d| d.message.contains("more problems not listed")));

        // A single enormous line.
        let long = script(&[
            "// @name x",
            &format!("// @description {}", "é".repeat(1_000_000)),
            "// @match *://*/*",
        ]);
        let p = parse(&long);
        assert_eq!(
            meta(&p).description.as_ref().map(|d| d.chars().count()),
            Some(1_000_000)
        );
        assert!(start.elapsed().as_secs() < 10);
    }

    #[test]
    fn long_values_are_snipped_in_messages() {
        let p = parse(&script(&[
            "// @name x",
            &format!("// @match {}", "z".repeat(10_000)),
        ]));
        assert!(p.diagnostics.iter().all(|d| d.message.len() < 600));
    }

    #[test]
    fn no_panics_on_prefixes_and_mutations() {
        let base = format!(
            "\u{feff}// ==UserScript==\r\n// @name 名前 🚀\r\n// @match https://*.bücher.de:8080/*\r\n\
             // @include /re/\r\n// @exclude *.tld*\r\n// @run-at document-body\r\n// @grant GM.x\r\n\
             //@noframes\r\n// @name:fr x\r\n// @\r\nbad\r\n// ==/UserScript==\r\n{}",
            "code();"
        );
        for (i, _) in base.char_indices() {
            let _ = parse(base.get(..i).unwrap_or_default());
            let _ = parse(base.get(i..).unwrap_or_default());
        }
        // Deterministic pseudo-random mutations (xorshift), inserting and deleting characters
        // that are meaningful to the parser.
        let alphabet: Vec<char> = "/@=: *\r\n\t\u{feff}é🚀-_<>[]?\\%".chars().collect();
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..3_000 {
            let mut chars: Vec<char> = base.chars().collect();
            for _ in 0..(next() % 8 + 1) {
                let len = chars.len().max(1);
                let at = usize::try_from(next() % len as u64).unwrap_or(0);
                if next() % 2 == 0 && at < chars.len() {
                    chars.remove(at);
                } else {
                    let pick = usize::try_from(next() % alphabet.len() as u64).unwrap_or(0);
                    chars.insert(
                        at.min(chars.len()),
                        alphabet.get(pick).copied().unwrap_or('@'),
                    );
                }
            }
            let s: String = chars.into_iter().collect();
            let p = parse(&s);
            // Invariant: metadata present exactly when there is no error.
            assert_eq!(p.metadata.is_some(), !p.has_errors());
        }
    }
}
