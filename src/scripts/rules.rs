//! Where a script runs, as rules Chrome can enforce plus a runtime guard for those it cannot.
//!
//! `chrome.userScripts` injects where some `matches` pattern OR some `includeGlobs` glob hits,
//! minus `excludeMatches` and `excludeGlobs` (checked in Chromium 156; content scripts AND the
//! two instead). That is also what Tampermonkey and Violentmonkey mean by `@match` + `@include`.
//! Two kinds of rule have no Chrome form:
//! - a regular expression `@include /…/` or `@exclude /…/`;
//! - `.tld` in a host (`*://*.google.tld/*`: any public suffix).
//!
//! For those the registration is *broadened* (a regex include registers `*://*/*`; a `.tld`
//! host becomes `*`) and a **guard** is prepended to the code: it tests `location.href` against
//! JavaScript RegExp sources generated here (every include rule when any was broadened, plus the
//! excludes Chrome cannot express) and throws before the script body runs when the URL is
//! outside the rules. So a script never runs more widely than its rules say, and [`verdict`]
//! evaluates the very same regexes with the browser's own `RegExp` ([`crate::web`]; `regress`
//! natively) to say where it runs.

use super::glob::glob_matches;
use super::glob_regex::{committed, push_lit, push_wild};
use super::match_pattern::{self, regex_escape, MatchPattern};
use super::metadata::Metadata;
use super::rule_syntax::tld_positions;
pub use super::rule_syntax::{
    as_regex, check_regex, check_regex_syntax, glob_has_tld, pattern_has_tld, RegexError,
    MAX_REGEX_CHARS, MAX_UNBOUNDED_REPEATS,
};
use serde_json::Value;

/// What `.tld` expands to: one label (the PSL's default rule makes every single label a public
/// suffix) or one of a few common two-label suffixes. Narrower than the full Public Suffix List,
/// never wider, so a `.tld` include may miss an exotic suffix but never runs on a non-suffix.
pub const TLD_REGEX: &str = "\\.(?:(?:co|com|net|org|gov|ac|edu|ne|or)\\.(?:uk|au|jp|nz|br|cn|mx|in|kr|tr|tw|hk|za|ar|sg|il|id|th|my)|[a-z0-9-]+)";

/// What `.tld` expands to in an exclude: any run of labels. Wider than the Public Suffix List,
/// so an exclusion never misses a suffix (it may also exclude a non-suffix: the safe side).
pub const TLD_REGEX_EXCLUDE: &str = "(?:\\.[a-z0-9-]+)+";

/// The `matches` entry for a script with only `@include` rules. Chrome requires a non-empty
/// `matches` and ORs it with `includeGlobs`, so `*://*/*` here would run the script everywhere;
/// this pattern is accepted by Chrome and matches no URL (a canonical path never holds a space).
pub const INCLUDE_ONLY_PLACEHOLDER: &str = "*://include-only.invalid/ never matches";

/// One rule of the guard: the metadata line it comes from and its RegExp source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardRule {
    pub rule: String,
    pub regex: String,
}

/// The check prepended to a script whose rules Chrome cannot express.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Guard {
    /// `Some`: the URL must match one of these (every include rule, because Chrome's side was
    /// broadened). `None`: Chrome's include decision stands.
    pub include: Option<Vec<GuardRule>>,
    pub exclude: Vec<GuardRule>,
}

/// A script's rules as Chrome will hold them, plus the guard.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rules {
    pub matches: Vec<String>,
    pub exclude_matches: Vec<String>,
    pub include_globs: Vec<String>,
    pub exclude_globs: Vec<String>,
    pub guard: Option<Guard>,
}

/// The Chrome pattern for a `.tld` pattern: same scheme, port and path, any host.
fn broaden_tld_pattern(pattern: &str) -> Option<String> {
    let (scheme, rest) = pattern.split_once("://")?;
    let (authority, path) = rest.split_at(rest.find('/')?);
    let port = authority
        .rsplit_once(':')
        .map(|(_, p)| format!(":{p}"))
        .unwrap_or_default();
    Some(format!("{scheme}://*{port}{path}"))
}

/// A match pattern that matches every URL the `@include` glob can match: `scheme://host/*` when
/// the glob names an http(s) scheme — or a wildcard one (`*`, `http*`), read as `*`, which is
/// http and https to Chrome: as [`include_glob_regex`] reads it, it does not reach past the
/// scheme — and a literal host (or `*.` and a literal), `file:///*` for a file glob, else
/// `*://*/*`. A script is injected only where this hits, so a tighter one keeps it off the
/// other pages, where its guard would stop it after it took one of the page's 10 worlds.
/// Include globs are never registered as Chrome's `includeGlobs`: in Chromium 156 a script
/// injected only through a glob (its `matches` missing the page) that messages the extension
/// crashes the renderer of a page with any iframe (measured with a bare registration, no
/// prelude; the same script is fine when a `matches` pattern also hits the page). So the glob
/// goes to the guard like a regex include, and the script reports its runs and gets its GM
/// functions like any other. `.tld` hosts fall back to `*://*/*`.
pub fn glob_superset(glob: &str) -> String {
    const ANY: &str = "*://*/*";
    let Some((scheme, rest)) = glob.split_once("://") else {
        return ANY.to_owned();
    };
    if scheme == "file" {
        return "file:///*".to_owned();
    }
    let wild = |c: char| c == '*' || c == '?';
    let scheme = match scheme {
        "http" | "https" => scheme,
        s if s.contains(wild) && s.chars().all(|c| c.is_ascii_alphanumeric() || wild(c)) => "*",
        _ => return ANY.to_owned(),
    };
    if glob_has_tld(glob) {
        return ANY.to_owned();
    }
    let host_end = rest.find(['/', ':']).unwrap_or(rest.len());
    let host = rest.get(..host_end).unwrap_or("");
    let (wild, literal) = match host.strip_prefix("*.") {
        Some(l) => ("*.", l),
        None => ("", host),
    };
    let plain = |c: char| c.is_ascii_alphanumeric() || c == '.' || c == '-';
    if literal.is_empty() || !literal.chars().all(plain) || literal.starts_with('.') {
        return ANY.to_owned();
    }
    format!("{scheme}://{wild}{}/*", literal.to_ascii_lowercase())
}

/// A glob as an anchored RegExp source with Chrome's glob meaning (`*` any run, `?` at most one
/// character, `\` escapes), `.tld` expanded when present. Used for the excludes the guard holds:
/// reading one wider excludes more, the safe side.
pub fn glob_regex(glob: &str, tld: &str) -> String {
    glob_regex_in(glob, tld, None)
}

/// An `@include` glob's RegExp source, read as Tampermonkey reads one that names a scheme
/// (`scheme://host/…`): a wildcard in the scheme does not cross `:`, and one in the host (up
/// to the first `/` after `://`) does not cross `/`. Read as a plain glob, `*://bank.test/*` also
/// hits `https://evil.test/?u=http://bank.test/` and `https://evil.test/#://bank.test/` — any
/// page can put that text in its own address — so a site's script with its GM functions and
/// values would run on whatever page asks for it. A glob whose text before `://` is not a
/// scheme (`*/go?to=https://*`) is read plainly.
pub fn include_glob_regex(glob: &str) -> String {
    let sections = glob.find("://").and_then(|scheme_end| {
        let scheme = glob.get(..scheme_end)?;
        let schemey = |c: char| c.is_ascii_alphanumeric() || "+-.*?".contains(c);
        if !scheme.chars().all(schemey) {
            return None;
        }
        let host_start = scheme_end + 3;
        let host_end = glob
            .get(host_start..)
            .and_then(|rest| rest.find('/'))
            .map(|i| host_start + i);
        Some(Sections {
            scheme_end,
            host: host_end.map(|end| host_start..end),
        })
    });
    glob_regex_in(glob, TLD_REGEX, sections.as_ref())
}

/// Where a scheme-naming include glob's scheme ends and its host lies (byte offsets).
struct Sections {
    scheme_end: usize,
    host: Option<std::ops::Range<usize>>,
}

fn glob_regex_in(glob: &str, tld: &str, sections: Option<&Sections>) -> String {
    let tlds = tld_positions(glob);
    // What a wildcard at `at` may not cross.
    let fence = |at: usize| match sections {
        Some(s) if at < s.scheme_end => Some(':'),
        Some(s) if s.host.as_ref().is_some_and(|h| h.contains(&at)) => Some('/'),
        _ => None,
    };
    // Committed as Chrome commits (`glob_regex`): linear in the address, however many wildcards.
    let mut pieces = Vec::new();
    let mut chars = glob.char_indices();
    while let Some((at, c)) = chars.next() {
        if tlds.contains(&at) {
            push_lit(&mut pieces, tld, false);
            // Skip "tld" (ASCII, so three chars).
            chars.nth(2);
            continue;
        }
        let class = || fence(at).map_or_else(|| "[\\s\\S]".to_owned(), |f| format!("[^{f}]"));
        match c {
            '*' => push_wild(&mut pieces, true, &class()),
            '?' => push_wild(&mut pieces, false, &class()),
            '\\' => {
                if let Some((_, n)) = chars.next() {
                    push_lit(&mut pieces, &regex_escape(&n.to_string()), true);
                }
            }
            c => push_lit(&mut pieces, &regex_escape(&c.to_string()), true),
        }
    }
    format!("^{}$", committed(&pieces, &mut 0))
}

/// Derives the Chrome registration fields and the guard from validated metadata. `None` when
/// the script has no include rule at all (it runs nowhere and is not registered).
pub fn compile(meta: &Metadata) -> Option<Rules> {
    let mut r = Rules::default();
    let mut inc: Vec<GuardRule> = Vec::new();
    let mut exc: Vec<GuardRule> = Vec::new();
    let mut broadened = false;
    let push_unique = |list: &mut Vec<String>, v: String| {
        if !list.contains(&v) {
            list.push(v);
        }
    };
    for m in &meta.matches {
        let Ok(p) = match_pattern::parse(m) else {
            continue;
        };
        let tld = pattern_has_tld(m);
        inc.push(GuardRule {
            rule: format!("@match {m}"),
            regex: p.js_regex(tld.then_some(TLD_REGEX)),
        });
        match (tld, broaden_tld_pattern(m)) {
            (true, Some(b)) => {
                broadened = true;
                push_unique(&mut r.matches, b);
            }
            (true, None) => {}
            (false, _) => push_unique(&mut r.matches, m.clone()),
        }
    }
    for g in &meta.include_globs {
        if let Some(src) = as_regex(g) {
            if check_regex_syntax(src).is_err() {
                continue;
            }
            broadened = true;
            push_unique(&mut r.matches, "*://*/*".to_owned());
            inc.push(GuardRule {
                rule: format!("@include {g}"),
                regex: src.to_owned(),
            });
        } else {
            // Never an `includeGlobs` entry (see `glob_superset`): a match pattern that covers
            // the glob, and the glob itself in the guard.
            broadened = true;
            push_unique(&mut r.matches, glob_superset(g));
            inc.push(GuardRule {
                rule: format!("@include {g}"),
                regex: include_glob_regex(g),
            });
        }
    }
    for m in &meta.exclude_matches {
        let Ok(p) = match_pattern::parse(m) else {
            continue;
        };
        if pattern_has_tld(m) {
            exc.push(GuardRule {
                rule: format!("@exclude-match {m}"),
                regex: p.js_regex(Some(TLD_REGEX_EXCLUDE)),
            });
        } else {
            push_unique(&mut r.exclude_matches, m.clone());
            // A reviewer's `//admin` ran past one naming a path: in the guard too (`server_form`).
            if percent_escape(m) {
                let (rule, regex) = (format!("@exclude-match {m}"), p.js_regex(None));
                exc.push(GuardRule { rule, regex });
            }
        }
    }
    for g in &meta.exclude_globs {
        if let Some(src) = as_regex(g) {
            if check_regex_syntax(src).is_ok() {
                exc.push(GuardRule {
                    rule: format!("@exclude {g}"),
                    regex: src.to_owned(),
                });
            }
        } else if glob_has_tld(g) {
            exc.push(GuardRule {
                rule: format!("@exclude {g}"),
                regex: glob_regex(g, TLD_REGEX_EXCLUDE),
            });
        } else {
            push_unique(&mut r.exclude_globs, g.clone());
            if credentials_escape(g) || percent_escape(g) {
                exc.push(GuardRule {
                    rule: format!("@exclude {g}"),
                    regex: glob_regex(g, TLD_REGEX_EXCLUDE),
                });
            }
        }
    }
    if r.matches.is_empty() && r.include_globs.is_empty() {
        return None;
    }
    if r.matches.is_empty() {
        r.matches.push(INCLUDE_ONLY_PLACEHOLDER.to_owned());
    }
    if broadened || !exc.is_empty() {
        r.guard = Some(Guard {
            include: broadened.then_some(inc),
            exclude: exc,
        });
    }
    Some(r)
}

impl Guard {
    /// The JavaScript prepended to the script (on the same line as its first line, so line
    /// numbers in errors stay the script's own). It only tests; every decision was made here.
    /// Throwing stops the rest of the code: nothing in the script body can undo it.
    pub fn js(&self, name: &str) -> String {
        let list = |rules: &[GuardRule]| {
            Value::Array(
                rules
                    .iter()
                    .map(|r| Value::String(r.regex.clone()))
                    .collect(),
            )
            .to_string()
        };
        let include = self
            .include
            .as_deref()
            .map_or_else(|| "null".to_owned(), list);
        let message = Value::String(format!(
            "Lumo Userscripts: \"{name}\" does not run on this URL (outside its @include/@exclude rules)"
        ));
        // An exclude is tested on the address as a server reads it too (`server_form`: no dot
        // ending the host, one `/` for many in the path, escapes of unreserved characters
        // decoded): `site.test.//%61dmin` is `site.test/admin` to a server.
        format!(
            "(()=>{{const u=location.href,m=/^([a-z][a-z0-9+.-]*:\\/\\/[^\\/?#]*)([^?#]*)([\\s\\S]*)$/i.exec(u),\
             d=(m?m[1].replace(/\\.(?=(:\\d*)?$)/,'')+m[2].replace(/\\/{{2,}}/g,'/')+m[3]:u)\
             .replace(/%[0-9a-f]{{2}}/gi,m=>{{const c=String.fromCharCode(parseInt(m.slice(1),16));return/[\\w.~-]/.test(c)?c:m}}),\
             t=s=>new RegExp(s).test(u),i={include},e={};if(!(i===null||i.some(t))||e.some(s=>t(s)||new RegExp(s).test(d)))throw new Error({message})}})();",
            list(&self.exclude)
        )
    }
}

/// Why a script does or does not run on a URL: Chrome's decision, then the guard's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Runs {
        because: String,
    },
    NoMatch,
    Excluded {
        by: String,
    },
    /// A page where Chrome runs no extension script, whatever the rules (the Web Store).
    Protected,
}

impl Verdict {
    pub fn runs(&self) -> bool {
        matches!(self, Verdict::Runs { .. })
    }

    pub fn explain(&self) -> String {
        match self {
            Verdict::Runs { because } => format!("matched by {because}"),
            Verdict::NoMatch => "no @match or @include rule matches this URL".to_owned(),
            Verdict::Excluded { by } => format!("excluded by {by}"),
            Verdict::Protected => {
                "this is a page of the Chrome Web Store's domains (chrome.google.com, \
                 chromewebstore.google.com), where Chrome runs no extension scripts"
                    .to_owned()
            }
        }
    }
}

/// The URL as the browser holds it (its URL parser's serialization: host case, IDN → punycode,
/// `..` segments, spaces, default ports), or `None` when the browser would not load it.
pub fn normalize_url(url: &str) -> Option<String> {
    crate::web::platform().parse_url(url).ok().map(|u| u.href)
}

/// Whether an address with `user:password@` escapes this `@exclude` glob in Chrome, which tests
/// `excludeGlobs` on the URL as navigated, credentials and all: a script that sent the page to
/// `http://x@bank.test/` ran there past `*://bank.test/*` (a tester saw it read the bank's
/// cookie), though the page's own address has none. Such a glob is also in the guard, which
/// tests `location.href`: exactly the glob, with no credentials to step over. (A glob given to
/// Chrome again with `*@` before its host also excluded `https://evil.test/?@bank.test/`: any
/// page could keep a script off itself.) Not one without a `://`, or whose host starts with
/// `*`, which spans the credentials already.
fn credentials_escape(glob: &str) -> bool {
    glob.split_once("://")
        .is_some_and(|(_, rest)| !rest.is_empty() && !rest.starts_with('*'))
}

/// Whether an address can escape this `@exclude` glob in Chrome by %-escaping a character the
/// glob names: Chrome tests `excludeGlobs` on the address as written, so a page at `/%61dmin`,
/// which servers serve as `/admin` (RFC 3986 makes the two the same address), ran past
/// `*://site.test/admin*`, and a script of its own could send the page there. Such a glob (or
/// match pattern) is also in the guard, which tests the address as a server reads it too
/// (`server_form`). Not one whose only letters are its scheme and host: the browser writes a
/// host without escapes (a host ending in a dot is held by `credentials_escape`'s guard).
fn percent_escape(glob: &str) -> bool {
    let tail = match glob.split_once("://") {
        Some((_, rest)) => {
            let authority = rest.split('/').next().unwrap_or_default();
            if authority.contains(['*', '?']) {
                rest
            } else {
                rest.get(authority.len()..).unwrap_or_default()
            }
        }
        None => glob,
    };
    tail.bytes().any(is_unreserved)
}

/// RFC 3986's unreserved characters: an escape of one names the same address as the character.
fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// `href` as a server reads it, as the guard reads it for its excludes besides `href` itself
/// (the guard's JS does the same): a dot ending the host dropped (`site.test.` is `site.test`
/// to DNS), runs of `/` in the path made one (as nginx merges them), and escapes of unreserved
/// characters decoded (`/%61dmin` → `/admin`). A reviewer's: each of the first two ran a
/// script past an `@exclude` naming that path.
pub fn server_form(href: &str) -> String {
    let (head, rest) = match href.split_once("://") {
        Some((scheme, after)) => {
            let end = after.find(['/', '?', '#']).unwrap_or(after.len());
            let (authority, rest) = after.split_at(end);
            // A dot ending the host, before the port if any.
            let authority = match authority.rsplit_once(':') {
                Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => {
                    match host.strip_suffix('.') {
                        Some(h) => format!("{h}:{port}"),
                        None => authority.to_owned(),
                    }
                }
                _ => authority.strip_suffix('.').unwrap_or(authority).to_owned(),
            };
            (format!("{scheme}://{authority}"), rest)
        }
        None => (String::new(), href),
    };
    let split = rest.find(['?', '#']).unwrap_or(rest.len());
    let (path, tail) = rest.split_at(split);
    let mut merged = String::with_capacity(path.len());
    for c in path.chars() {
        if !(c == '/' && merged.ends_with('/')) {
            merged.push(c);
        }
    }
    decode_unreserved(&format!("{head}{merged}{tail}")).into_owned()
}

/// `href` with its escapes of unreserved characters decoded (`/%61dmin` → `/admin`).
pub fn decode_unreserved(href: &str) -> std::borrow::Cow<'_, str> {
    if !href.contains('%') {
        return href.into();
    }
    let bytes = href.as_bytes();
    let mut out = String::with_capacity(href.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let hex = |j: usize| bytes.get(j).and_then(|&h| char::from(h).to_digit(16));
        if let (b'%', Some(hi), Some(lo)) = (b, hex(i + 1), hex(i + 2)) {
            // Both digits are below 16, so the byte fits.
            let c = u8::try_from(hi * 16 + lo).unwrap_or(0);
            if is_unreserved(c) {
                out.push(char::from(c));
                i += 3;
                continue;
            }
        }
        // Copy up to the next `%`: both ends are char boundaries (`i` is the start, or a `%`,
        // or just past an ASCII escape; `%` is ASCII).
        let end = bytes
            .get(i + 1..)
            .and_then(|rest| rest.iter().position(|&c| c == b'%'))
            .map_or(href.len(), |n| i + 1 + n);
        out.push_str(href.get(i..end).unwrap_or_default());
        i = end;
    }
    out.into()
}

/// `href` without its `user:password@`: Chrome matches its own rules on the URL as navigated,
/// but the page's `location.href`, which the guard tests, has none.
fn without_userinfo(href: &str) -> std::borrow::Cow<'_, str> {
    let Some((scheme, rest)) = href.split_once("://") else {
        return href.into();
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    match authority.rsplit_once('@') {
        Some((userinfo, _)) => {
            let after = rest.get(userinfo.len() + 1..).unwrap_or_default();
            format!("{scheme}://{after}").into()
        }
        None => href.into(),
    }
}

/// The Chrome Web Store, where Chrome injects no extension script: every page of
/// `chromewebstore.google.com` and of `chrome.google.com`, and of their subdomains, as a tester
/// saw Chrome refuse them (`host` as the URL parser gives it, with a trailing dot or without).
pub fn is_web_store(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host);
    ["chromewebstore.google.com", "chrome.google.com"]
        .iter()
        .any(|store| {
            host == *store
                || host
                    .strip_suffix(store)
                    .is_some_and(|sub| sub.ends_with('.'))
        })
}

/// Schemes user scripts run on with this extension's host permissions.
fn injectable(url: &str) -> bool {
    ["http:", "https:", "file:"]
        .iter()
        .any(|s| url.starts_with(s))
}

fn regex_hit<'a>(rules: &'a [GuardRule], url: &str) -> Option<&'a GuardRule> {
    let web = crate::web::platform();
    rules
        .iter()
        .find(|r| web.regex_test(&r.regex, "", url).unwrap_or(false))
}

/// Does the registration these rules produce run on `url`? Decided as Chrome does (matches OR
/// include globs, minus excludes) on the normalized URL, then as the guard does.
pub fn verdict(rules: &Rules, url: &str) -> Verdict {
    decide(rules, url).0
}

/// [`verdict`], and whether Chrome injects the registration into a page at `url` whatever its
/// guard then decides: a script its guard stops there still took one of the page's user-script
/// worlds (`registry::WORLDS_PER_DOCUMENT`).
pub fn decide(rules: &Rules, url: &str) -> (Verdict, bool) {
    let Ok(parsed) = crate::web::platform().parse_url(url) else {
        return (Verdict::NoMatch, false);
    };
    if !injectable(&parsed.href) {
        return (Verdict::NoMatch, false);
    }
    let decided = decide_parsed(rules, &parsed);
    // Only a script whose rules reach the page is said to be kept off it there; the others
    // are not listed at all, as anywhere else.
    match (is_web_store(&parsed.host), decided) {
        (true, (v, _)) if v.runs() => (Verdict::Protected, false),
        (true, (v, _)) => (v, false),
        (false, d) => d,
    }
}

fn decide_parsed(rules: &Rules, parsed: &crate::web::ParsedUrl) -> (Verdict, bool) {
    let url = parsed.href.as_str();
    let pattern_hit = |list: &[String]| {
        list.iter()
            .find(|p| {
                match_pattern::parse(p).is_ok_and(|mp: MatchPattern| mp.matches_parsed(parsed))
            })
            .cloned()
    };
    let chrome_hit = pattern_hit(&rules.matches)
        .map(|p| format!("@match {p}"))
        .or_else(|| {
            rules
                .include_globs
                .iter()
                .find(|g| glob_matches(g, url))
                .map(|g| format!("@include {g}"))
        });
    let Some(chrome_hit) = chrome_hit else {
        return (Verdict::NoMatch, false);
    };
    if let Some(p) = pattern_hit(&rules.exclude_matches) {
        let by = format!("@exclude-match {p}");
        return (Verdict::Excluded { by }, false);
    }
    if let Some(g) = rules.exclude_globs.iter().find(|g| glob_matches(g, url)) {
        let by = format!("@exclude {g}");
        return (Verdict::Excluded { by }, false);
    }
    let Some(guard) = &rules.guard else {
        let because = chrome_hit;
        return (Verdict::Runs { because }, true);
    };
    let url = without_userinfo(url);
    let because = match &guard.include {
        None => chrome_hit,
        Some(inc) => match regex_hit(inc, &url) {
            Some(r) => r.rule.clone(),
            None => return (Verdict::NoMatch, true),
        },
    };
    // The server's form is worked out only when an exclude is left to test (most scripts have
    // none in the guard).
    if let Some(r) = regex_hit(&guard.exclude, &url).or_else(|| {
        (!guard.exclude.is_empty())
            .then(|| server_form(&url))
            .and_then(|d| regex_hit(&guard.exclude, &d))
    }) {
        return (Verdict::Excluded { by: r.rule.clone() }, true);
    }
    (Verdict::Runs { because }, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripts::metadata;

    fn meta(lines: &str) -> Metadata {
        let src = format!("// ==UserScript==\n// @name T\n{lines}// ==/UserScript==\n");
        match metadata::parse(&src).metadata {
            Some(m) => m,
            None => panic!("invalid: {:?}", metadata::parse(&src).diagnostics),
        }
    }

    fn runs(lines: &str, url: &str) -> bool {
        compile(&meta(lines)).is_some_and(|r| verdict(&r, url).runs())
    }

    fn re_test(src: &str, url: &str) -> bool {
        crate::web::platform()
            .regex_test(src, "", url)
            .unwrap_or_else(|e| panic!("{src}: {e}"))
    }

    /// The guard's RegExp for a pattern agrees with the native matcher on normalized URLs.
    #[test]
    fn pattern_regexes_agree_with_the_matcher() {
        let patterns = [
            "<all_urls>",
            "*://*/*",
            "https://example.com/*",
            "https://*.example.com/*",
            "http://example.com/foo/*",
            "http://example.com:8080/*",
            "https://example.com:443/a?b*",
            "*://*.example.com/a*c",
            "file:///tmp/*",
            "http://127.0.0.1/*",
            "http://[::1]/*",
        ];
        let urls = [
            "https://example.com/",
            "https://example.com/x?y#z",
            "http://example.com/foo",
            "http://example.com/foo/bar",
            "http://example.com/foobar",
            "http://example.com:8080/x",
            "http://example.com/x",
            "https://a.b.example.com/abc",
            "https://badexample.com/",
            "https://example.com/a?b=1",
            "https://user:pw@example.com/",
            "https://example.com/a#b?x",
            "file:///tmp/a",
            "file:///etc/x",
            "http://127.0.0.1/",
            "http://[::1]:81/q",
            "https://example.com./",
        ];
        for p in patterns {
            let mp = match_pattern::parse(p).unwrap();
            let re = mp.js_regex(None);
            for u in urls {
                let n = normalize_url(u).unwrap();
                assert_eq!(
                    mp.matches(&n),
                    re_test(&re, &n),
                    "pattern {p} (regex {re}) on {n}"
                );
            }
        }
    }

    #[test]
    fn glob_regexes_agree_with_chrome_globs() {
        // `?` globs too: the regex commits to each run's leftmost place, as Chrome does.
        let globs = [
            "*",
            "http://a.com/*",
            "*://*.a.com/x?",
            "*foo*bar",
            "a\\*b*",
            "a?b",
            "*?*",
            "*???",
            "???",
            "H?l?o",
            "*a?b*c",
            "**?*b??",
            "*a*a*Z",
        ];
        let urls = [
            "http://a.com/",
            "https://w.a.com/xy",
            "http://x/foo/y/bar",
            "a*bc",
            "abcb",
            "abb",
            "Hello",
            "",
            "abcd",
            "xaxbyc",
            "aaaaZ",
            "aaaa",
            "bxbb",
        ];
        for g in globs {
            let re = glob_regex(g, TLD_REGEX);
            for u in urls {
                assert_eq!(glob_matches(g, u), re_test(&re, u), "{g} {re} {u}");
            }
        }
    }

    /// R11: a run holding `.tld` is not committed (inside a lookahead its labels would be locked
    /// to their first match): `*.google.tld*.uk/*` still excludes `www.google.co.uk`, where
    /// `.tld` is `.co`.
    #[test]
    fn a_tld_run_may_take_any_of_its_lengths() {
        let meta = crate::scripts::metadata::parse(
            "// ==UserScript==\n// @name T\n// @match *://*/*\n// @exclude *.google.tld*.uk/*\n// ==/UserScript==\n",
        )
        .metadata
        .unwrap();
        let rules = compile(&meta).unwrap();
        assert!(!verdict(&rules, "https://www.google.co.uk/").runs());
        assert!(verdict(&rules, "https://www.example.co.uk/").runs());
        for (glob, url) in [
            ("*.google.tld*.uk/*", "https://www.google.co.uk/"),
            ("*a.tld*b", "xa.c.d.eb"),
        ] {
            assert!(
                re_test(&glob_regex(glob, TLD_REGEX_EXCLUDE), url),
                "{glob} {url}"
            );
        }
    }

    /// R10 (high): written plainly, a glob of many wildcards made the backtracking matcher try
    /// every split of the address between them — `********Z` took 73 s in V8 on 59 characters,
    /// in every page its script reached and in `match_url` — and so did a match pattern's path.
    /// Committed, each is one pass: these finish at once where the plain form took minutes.
    #[test]
    fn many_wildcards_cost_one_pass() {
        let long = format!("http://long.test:1/{}", "a".repeat(4000));
        let many = format!("http://long.test:*/{}", "*a".repeat(1000));
        let started = std::time::Instant::now();
        for g in [
            "********Z",
            "*a*a*a*a*a*a*a*a*Z",
            "?*?*?*?*?*?*?*?*Z",
            many.as_str(),
        ] {
            let re = glob_regex(g, TLD_REGEX);
            assert_eq!(re_test(&re, &long), glob_matches(g, &long), "{g}");
            assert!(!re_test(&include_glob_regex(g), &format!("{long}!")), "{g}");
        }
        let p = match_pattern::parse("*://*/*a*a*a*a*a*a*a*a*Z").unwrap();
        assert!(!re_test(&p.js_regex(None), &long));
        let secs = started.elapsed().as_secs_f64();
        assert!(secs < 20.0, "{secs} s");
    }

    /// A site's `@include *://site/*` runs on that site only, not on a page that puts the
    /// site's address in its own query or fragment (Tampermonkey's reading).
    #[test]
    fn include_globs_naming_a_scheme_keep_to_their_scheme_and_host() {
        let bank = "// @include *://bank.test/*\n// @include http*://bank2.test/a*\n";
        for (url, expected) in [
            ("http://bank.test/", true),
            ("https://bank.test/x?y#z", true),
            ("https://bank2.test/ab", true),
            ("http://bank2.test/a", true),
            ("http://evil.test/?next=http://bank.test/x", false),
            ("https://evil.test/#://bank.test/", false),
            ("http://evil.test/?u=https://bank2.test/a", false),
            ("https://bank.test.evil.test/", false),
            ("https://evil.test/bank.test/", false),
            ("https://bank2.test/b?a", false),
        ] {
            assert_eq!(runs(bank, url), expected, "{url}");
        }
        // A wildcard in the host stays in the host.
        let sub = "// @include https://*.bank.test/*\n";
        assert!(runs(sub, "https://www.bank.test/"));
        assert!(runs(sub, "https://a.b.bank.test/x"));
        assert!(!runs(sub, "https://evil.test/.bank.test/"));
        assert!(!runs(sub, "https://evil.test/?x=https://www.bank.test/"));
        assert!(runs("// @include *://*/*\n", "https://any.test/x"));
        assert!(runs(
            "// @include https://bank.test:*/*\n",
            "https://bank.test:8443/"
        ));
        assert!(runs(
            "// @include *://*.google.tld/*\n",
            "https://www.google.co.uk/"
        ));
        assert!(!runs(
            "// @include *://*.google.tld/*\n",
            "https://evil.test/?https://www.google.com/"
        ));
        // Without a `/` after `://`, or with no scheme before it, the glob is read plainly.
        assert!(runs("// @include http://*\n", "http://a.test/x/y"));
        assert!(runs("// @include *\n", "https://a.test/"));
        let redirect = "// @include */go?to=https://*\n";
        assert!(runs(redirect, "https://a.test/go?to=https://b.test/"));
        // Excludes are read plainly: wider is the safe side.
        let ex = "// @match *://*/*\n// @exclude *://*.tld/*\n";
        assert!(!runs(ex, "https://evil.test/?https://a.com/"));
    }

    #[test]
    fn generated_sources_always_parse() {
        let weird = [
            "*",
            "\\",
            "a\\",
            "[",
            "(",
            "{1,2}",
            "^$",
            "?*?",
            "é🚀",
            "*.tld",
            ".tld:",
            "a.tld\\",
            "x/]/)/}/|/+",
            "\\*\\?",
        ];
        for g in weird {
            for t in [TLD_REGEX, TLD_REGEX_EXCLUDE] {
                let re = glob_regex(g, t);
                assert!(
                    crate::web::platform().regex_compile_check(&re, "").is_ok(),
                    "{g} → {re}"
                );
            }
            for inc in [
                g.to_owned(),
                format!("*{g}://{g}/{g}"),
                format!("{g}://{g}"),
            ] {
                let re = include_glob_regex(&inc);
                assert!(
                    crate::web::platform().regex_compile_check(&re, "").is_ok(),
                    "{inc} → {re}"
                );
            }
            for p in [
                format!("https://example.com/{g}"),
                format!("*://*.a.tld/{g}"),
                format!("file:///{g}"),
            ] {
                if let Ok(mp) = match_pattern::parse(&p) {
                    let re = mp.js_regex(Some(TLD_REGEX));
                    assert!(
                        crate::web::platform().regex_compile_check(&re, "").is_ok(),
                        "{p} → {re}"
                    );
                }
            }
        }
    }

    /// The cost of a regular expression is a write's question: a script stored before a
    /// stricter check keeps every rule at registration (a reviewer found a stored exclude
    /// dropped there: the script then ran on the pages the user kept it off).
    #[test]
    fn a_stored_rule_the_write_check_would_now_refuse_is_kept() {
        let slow = "/.*a.*Z/";
        assert!(check_regex(slow.trim_matches('/')).is_err());
        let mut m = meta("// @match https://*/*\n");
        m.exclude_globs.push(slow.to_owned());
        m.include_globs.push(slow.to_owned());
        let r = compile(&m).unwrap();
        let guard = r.guard.unwrap();
        assert!(
            guard
                .exclude
                .iter()
                .any(|g| g.rule == format!("@exclude {slow}")),
            "{guard:?}"
        );
        assert!(guard
            .include
            .unwrap_or_default()
            .iter()
            .any(|g| g.rule == format!("@include {slow}")));
    }

    #[test]
    fn costly_regexes_are_refused() {
        for bad in [
            "(a+)+$", "(a|aa)*b", "(?:x*y)+", "(a*){2,}", ".*.*.*x", "a+b+c+d",
        ] {
            assert!(check_regex(bad).is_err(), "{bad} should be refused");
        }
        for good in [
            "^https?:\\/\\/(www\\.)?example\\.com\\/.*",
            "^https:\\/\\/(youtube|google)\\.com\\/watch\\?v=[\\w-]{11}",
            "logout",
            "[(+*]+x(?:a|b)?",
            "a{2,5}b*",
        ] {
            assert_eq!(check_regex(good), Ok(()), "{good}");
        }
        assert!(check_regex("(").is_err());
        assert!(check_regex(&"a".repeat(MAX_REGEX_CHARS + 1)).is_err());
    }

    #[test]
    fn a_glob_superset_covers_the_glob() {
        for (g, p) in [
            ("http://example.org:*/*", "http://example.org/*"),
            ("https://*.Example.org/a*", "https://*.example.org/*"),
            ("https://a.test", "https://a.test/*"),
            ("http*://a.test/*", "*://a.test/*"),
            ("*://a.test/*", "*://a.test/*"),
            ("*://*.a.test:*/x*", "*://*.a.test/*"),
            ("ht?p://a.test/*", "*://a.test/*"),
            ("ftp://a.test/*", "*://*/*"),
            ("*/x://a.test/*", "*://*/*"),
            ("https://a.test*", "*://*/*"),
            ("https://a?.test/", "*://*/*"),
            ("https://u@a.test/", "*://*/*"),
            ("https://[::1]/", "*://*/*"),
            ("https://*./", "*://*/*"),
            ("https://*.google.tld/*", "*://*/*"),
            ("file:///home/*", "file:///*"),
            ("*", "*://*/*"),
            ("", "*://*/*"),
        ] {
            assert_eq!(glob_superset(g), p, "{g}");
            assert!(match_pattern::parse(p).is_ok(), "{p}");
        }
    }

    #[test]
    fn include_only_runs_only_where_included() {
        let m = meta("// @include http://example.org:*/*\n");
        let r = compile(&m).unwrap();
        // Never Chrome's includeGlobs (a Chromium 156 crash, see `glob_superset`): a pattern
        // that covers the glob, and the glob in the guard.
        assert_eq!(r.matches, ["http://example.org/*"]);
        assert!(r.include_globs.is_empty());
        assert!(r.guard.as_ref().is_some_and(|g| g.include.is_some()));
        assert!(verdict(&r, "http://example.org:8080/").runs());
        assert!(!verdict(&r, "http://example.org/").runs());
        assert!(!verdict(&r, "http://example.com/").runs());
        assert!(!verdict(&r, "https://example.org/").runs());
    }

    #[test]
    fn regex_rules_are_enforced_by_the_guard() {
        let lines = "// @include /^https:\\/\\/(www\\.)?example\\.com\\/app/\n// @exclude /logout/\n// @match https://other.example/*\n";
        let r = compile(&meta(lines)).unwrap();
        // Chrome's side is broadened; the guard holds every include rule.
        assert!(r.matches.contains(&"*://*/*".to_owned()));
        let g = r.guard.clone().unwrap();
        assert_eq!(g.include.as_ref().map(Vec::len), Some(2));
        assert_eq!(g.exclude.len(), 1);
        assert!(runs(lines, "https://www.example.com/app/x"));
        assert!(runs(lines, "https://other.example/y"));
        assert!(!runs(lines, "https://example.com/other"));
        assert!(!runs(lines, "https://evil.com/"));
        assert!(!runs(lines, "https://example.com/app/logout"));
        assert!(!runs(lines, "https://other.example/logout"));
        let v = verdict(&r, "https://other.example/logout");
        assert_eq!(v.explain(), "excluded by @exclude /logout/");
        // A regex exclude alone: Chrome decides includes, the guard only excludes.
        let r = compile(&meta(
            "// @match https://a.example/*\n// @exclude /secret/\n",
        ))
        .unwrap();
        assert_eq!(r.matches, ["https://a.example/*"]);
        assert!(r.guard.as_ref().is_some_and(|g| g.include.is_none()));
        assert!(!verdict(&r, "https://a.example/secret").runs());
        assert!(verdict(&r, "https://a.example/public").runs());
    }

    #[test]
    fn tld_rules_match_public_suffixes_only() {
        let lines = "// @match *://*.google.tld/search*\n";
        let r = compile(&meta(lines)).unwrap();
        assert_eq!(r.matches, ["*://*/search*"]);
        for yes in [
            "https://www.google.com/search?q=1",
            "https://google.de/search",
            "https://www.google.co.uk/search",
        ] {
            assert!(runs(lines, yes), "{yes}");
        }
        for no in [
            "https://google.evil.com/search",
            "https://www.google.com/maps",
            "https://notgoogle.com/search",
            "https://evil.com/search?google.com",
        ] {
            assert!(!runs(lines, no), "{no}");
        }
        let lines = "// @include *://www.amazon.tld/*\n// @exclude *://www.amazon.tld/gp/cart*\n";
        let r = compile(&meta(lines)).unwrap();
        assert!(r.include_globs.is_empty());
        assert_eq!(r.matches, ["*://*/*"]);
        assert!(runs(lines, "https://www.amazon.co.jp/dp/1"));
        assert!(!runs(lines, "https://www.amazon.co.jp/gp/cart/view"));
        assert!(!runs(lines, "https://www.amazon.evil.com/x"));
        // An exclude's .tld errs on the side of excluding: an exotic suffix is still excluded.
        let lines = "// @match *://*/*\n// @exclude-match *://*.bank.tld/*\n";
        assert!(!runs(lines, "https://www.bank.gov.xx/"));
        assert!(!runs(lines, "https://bank.com/"));
        assert!(runs(lines, "https://bank-other.com/"));
    }

    #[test]
    fn guard_js_only_tests_generated_sources() {
        let r = compile(&meta(
            "// @include /a\"b<\\/script>/\n// @exclude *://*.x.tld/*\n",
        ))
        .unwrap();
        let js = r.guard.unwrap().js("N\"ame");
        assert!(js.starts_with("(()=>{const u=location.href"));
        assert!(js.contains("throw new Error("));
        // Sources are JSON string literals: a quote in a rule cannot end the string.
        assert!(js.contains(r#""a\"b<\\/script>""#), "{js}");
        assert!(js.contains(r#"\"N\"ame\""#) || js.contains(r#"N\"ame"#));
        assert!(!js.contains('\n'));
    }

    #[test]
    fn normalization_is_the_browsers() {
        let n = |u: &str| normalize_url(u).unwrap_or_default();
        assert_eq!(
            n("HTTP://Example.COM:80/a/../b c"),
            "http://example.com/b%20c"
        );
        assert_eq!(n("https://bücher.de/"), "https://xn--bcher-kva.de/");
        assert_eq!(n("https://example.com:443"), "https://example.com/");
        assert!(normalize_url("not a url").is_none());
        let lines =
            "// @match https://example.com/b*\n// @exclude-match https://example.com/b%20c\n";
        assert!(!runs(lines, "HTTPS://EXAMPLE.com:443/x/../b c"));
        assert!(runs(lines, "HTTPS://EXAMPLE.com:443/x/../bd"));
    }

    /// Chrome loads `http://u:p@site/` as `http://site/`: the guard, which tests
    /// `location.href`, sees no `user:password@` (a tester's `match_url` saw it).
    #[test]
    fn the_guard_reads_the_url_without_its_userinfo() {
        assert_eq!(
            without_userinfo("http://u:p@a.test/x@y?z@w"),
            "http://a.test/x@y?z@w"
        );
        assert_eq!(without_userinfo("http://a.test/x@y"), "http://a.test/x@y");
        assert_eq!(without_userinfo("file:///x@y"), "file:///x@y");
        assert!(runs(
            "// @match http://*/*\n// @include /^http:\\/\\/a\\.test\\//\n",
            "http://u:p@a.test/"
        ));
        assert!(!runs(
            "// @match http://*/*\n// @exclude http://uiy.tld/*\n",
            "http://u:p@uiy.com/"
        ));
    }

    /// A plain `@exclude` glob naming a site keeps the script off an address of that site with
    /// credentials too: the guard tests it on `location.href`, which has none, since Chrome
    /// tests its globs on the address as navigated (a tester's script sent the page to
    /// `http://x@bank.test/account` and read the bank's cookie there).
    #[test]
    fn an_exclude_glob_holds_on_an_address_with_credentials() {
        let lines = "// @match *://*/*\n// @exclude *://bank.test/*\n";
        assert!(!runs(lines, "http://x@bank.test/account"));
        assert!(!runs(lines, "http://u:p@bank.test/"));
        assert!(!runs(lines, "http://bank.test/"));
        assert!(runs(lines, "http://evil.test/"));
        let meta = metadata::parse(&format!(
            "// ==UserScript==\n// @name x\n{lines}// ==/UserScript==\n"
        ))
        .metadata
        .unwrap();
        // Chrome is given the glob as written; the guard holds it too.
        let reg = crate::scripts::registry::desired("u", 1, &meta, "x").unwrap();
        assert_eq!(reg.exclude_globs, ["*://bank.test/*"]);
        let code = reg.js[0].code.as_deref().unwrap_or_default();
        assert!(code.contains(r"bank\\.test"), "{code}");
        // Text a page can put in its own address does not keep the script off it.
        for url in [
            "https://evil.test/@bank.test/",
            "https://evil.test/?x=@bank.test/",
        ] {
            assert!(runs(lines, url), "{url}");
        }
        assert!(credentials_escape("http://bank.test:*/*"));
        // A host that starts with `*` spans the credentials already; no scheme, no host.
        assert!(!credentials_escape("*://*.bank.test/*"));
        assert!(!credentials_escape("*bank.test*"));
    }

    /// A tester's: a script with `@exclude *://site.test/admin*` sent the page to `/%61dmin`,
    /// which the server serves as `/admin`, and ran there; Chrome compares the address as written.
    #[test]
    fn an_exclude_holds_on_an_address_that_escapes_what_it_names() {
        for (lines, url) in [
            (
                "// @match *://*/*\n// @exclude *://site.test/admin*\n",
                "https://site.test/%61dmin/x",
            ),
            (
                "// @match *://*/*\n// @exclude *://site.test/admin*\n",
                "https://site.test/a%64%6D%69%6e",
            ),
            (
                "// @match *://*/*\n// @exclude *admin*\n",
                "https://a.test/%61dmin",
            ),
            (
                "// @match *://*/*\n// @exclude *://*/admin*\n",
                "https://a.test/%61dmin",
            ),
            (
                "// @match *://*/*\n// @exclude /^https:\\/\\/site\\.test\\/admin/\n",
                "https://site.test/%61dmin",
            ),
        ] {
            assert!(runs(lines, "https://site.test/public"), "{lines}");
            assert!(!runs(lines, url), "{lines} {url}");
        }
        // Only unreserved characters: `%2F` is not `/` to a server, nor `%25` a `%`.
        let lines = "// @match *://*/*\n// @exclude *://site.test/a/b*\n";
        assert!(runs(lines, "https://site.test/a%2Fb"));
        assert_eq!(
            decode_unreserved("/%61%2F%2f%25%7E%5f%zz%4"),
            "/a%2F%2f%25~_%zz%4"
        );
        assert_eq!(decode_unreserved("/caf%C3%A9/%41"), "/caf%C3%A9/A");
        assert_eq!(decode_unreserved("/é%61"), "/éa");
        assert_eq!(decode_unreserved("é%61é%zzé%"), "éaé%zzé%");
        // A reviewer's: a dot ending the host, and doubled slashes, ran past the exclude too.
        assert_eq!(
            server_form("http://site.test.:8080//a//%61dmin?x=//y#//z"),
            "http://site.test:8080/a/admin?x=//y#//z"
        );
        assert_eq!(
            server_form("https://site.test./admin"),
            "https://site.test/admin"
        );
        assert_eq!(server_form("https://[::1]:80//x"), "https://[::1]:80/x");
        for (lines, url) in [
            (
                "// @match *://*/*\n// @exclude *://site.test/admin*\n",
                "https://site.test.//admin",
            ),
            (
                "// @match *://*/*\n// @exclude-match *://site.test/admin*\n",
                "https://site.test//admin",
            ),
            (
                "// @match *://*/*\n// @exclude *://site.test:*/admin*\n",
                "https://site.test.:8443/admin",
            ),
        ] {
            assert!(!runs(lines, url), "{lines} {url}");
        }
        // Escapes in a host are decoded by the browser: a glob that names only the scheme and
        // host needs no guard for them.
        assert!(!percent_escape("*://site.test/*"));
        assert!(!percent_escape("https://site.test/"));
        assert!(percent_escape("*://site.test/admin*"));
        assert!(percent_escape("*://*admin*"));
        assert!(percent_escape("*admin*"));
        // The guard holds such a glob, and tests the address decoded.
        let meta = metadata::parse(
            "// ==UserScript==\n// @name T\n// @match *://*/*\n// @exclude *://*/admin*\n// ==/UserScript==\n",
        )
        .metadata
        .unwrap();
        let reg = crate::scripts::registry::desired("u", 1, &meta, "x").unwrap();
        let code = reg.js[0].code.as_deref().unwrap_or_default();
        assert!(
            code.contains("admin") && code.contains("new RegExp(s).test(d)"),
            "{code}"
        );
    }
}
