//! Chrome match patterns (`@match`, `@exclude-match`), parsed and matched the way Chrome's
//! `URLPattern` does for user scripts (extensions/common/url_pattern.cc with the user-script
//! scheme set from extensions/common/user_script.cc), so that what we accept is exactly what
//! `chrome.userScripts.register` accepts and what we say matches is what Chrome injects into.
//!
//! Grammar: `<all_urls>` | `<scheme>://<host>[:<port>]<path>` | `file://[<ignored>]<path>`
//! - scheme: `http`, `https`, `file`, `ftp`, or `*` (= http or https); lowercase only, as in
//!   Chrome. `uuid-in-package:<path>` is also accepted because Chrome still lists it (it replaced
//!   the `urn:` scheme that older docs mention; `urn:` itself is now rejected).
//! - host: `*`, `*.<host>` (the host and all its subdomains, never IP addresses) or a host;
//!   matched case-insensitively. Not present for `file`.
//! - port: optional; absent means any port. A numeric port needs a scheme with a default port
//!   (so `*://host:8080/*` is rejected, like Chrome does).
//! - path: required, starts with `/`; `*` matches any run of characters. It is matched against
//!   the URL's path plus query (never the fragment), case-sensitively, both read through
//!   [`chrome_unescape`] first: Chromium 156 matches `/café*` with `/caf%C3%A9` and `/a%41*` with
//!   `/aA` (measured; `matching.test.mjs`), so a rule read without that decoding says "does not
//!   run" where Chrome runs the script.

use std::fmt;
use std::str::FromStr;

use super::glob::glob_matches;
use crate::web::ParsedUrl;

/// A validated Chrome match pattern. Keeps the string it was parsed from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchPattern {
    source: String,
    kind: Kind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    AllUrls,
    Url {
        scheme: SchemeSel,
        /// Ignored for `file` (Chrome ignores the host of file patterns).
        host: HostPattern,
        /// `None` = any port. Kept as the written digits: Chrome compares port strings, so a
        /// zero-padded port such as `080` parses but never matches.
        port: Option<String>,
        /// The path with `\` and `?` escaped so that only `*` is a wildcard (Chrome's
        /// `path_escaped_`), ready for [`glob_matches`].
        path_escaped: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scheme {
    Http,
    Https,
    File,
    Ftp,
    UuidInPackage,
}

impl Scheme {
    /// The schemes Chrome lets user scripts run on (without command-line flags).
    fn from_name(name: &str) -> Option<Scheme> {
        match name {
            "http" => Some(Scheme::Http),
            "https" => Some(Scheme::Https),
            "file" => Some(Scheme::File),
            "ftp" => Some(Scheme::Ftp),
            "uuid-in-package" => Some(Scheme::UuidInPackage),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
            Scheme::File => "file",
            Scheme::Ftp => "ftp",
            Scheme::UuidInPackage => "uuid-in-package",
        }
    }

    /// Standard schemes use `://` and have a host; the others are `scheme:path`.
    fn is_standard(self) -> bool {
        !matches!(self, Scheme::UuidInPackage)
    }

    fn has_default_port(self) -> bool {
        matches!(self, Scheme::Http | Scheme::Https | Scheme::Ftp)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SchemeSel {
    HttpOrHttps,
    Exact(Scheme),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct HostPattern {
    /// Canonical (lowercase, punycode) host; empty with `subdomains` means any host.
    name: String,
    subdomains: bool,
}

/// Why a string is not a valid match pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatternError {
    /// Neither `://` nor `:` after a scheme, e.g. `example.com/*`.
    MissingSchemeSeparator,
    /// Not a scheme Chrome knows for match patterns, e.g. `foo://*`.
    InvalidScheme(String),
    /// A real scheme user scripts cannot run on, e.g. `chrome://*`, `about:*`, `ws://*/*`.
    UnsupportedScheme(String),
    /// `HTTP://...`: Chrome compares pattern schemes case-sensitively.
    UppercaseScheme(String),
    /// `http:/bar` (a standard scheme needs `://`) or `uuid-in-package://x` (needs `:`).
    WrongSchemeSeparator {
        scheme: String,
        expected: &'static str,
    },
    /// Nothing (or only `*.`) where the host should be, e.g. `https:///foo`.
    EmptyHost,
    /// `*` somewhere other than a leading `*.` or the whole host, e.g. `https://*foo/bar`,
    /// `https://foo.*.bar/baz`.
    InvalidHostWildcard,
    /// The host is not followed by a `/path`, e.g. `https://www.google.com`.
    MissingPath,
    /// A port that is neither `*` nor a number in 0..=65535.
    InvalidPort(String),
    /// A numeric port with the `*` scheme (Chrome rejects it: `*` has no default port).
    PortNeedsExplicitScheme(String),
    /// A host with characters no URL host can contain.
    InvalidHost(String),
}

impl fmt::Display for PatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PatternError::MissingSchemeSeparator => write!(
                f,
                "missing scheme separator: expected \"<scheme>://<host>/<path>\" \
                 (e.g. \"https://example.com/*\") or \"<all_urls>\""
            ),
            PatternError::InvalidScheme(s) => write!(
                f,
                "invalid scheme \"{s}\": use http, https, * (http or https), file or ftp"
            ),
            PatternError::UnsupportedScheme(s) => write!(
                f,
                "unsupported scheme \"{s}\": user scripts only run on http, https, file and ftp pages"
            ),
            PatternError::UppercaseScheme(s) => write!(
                f,
                "scheme \"{s}\" must be written in lowercase (\"{}\")",
                s.to_ascii_lowercase()
            ),
            PatternError::WrongSchemeSeparator { scheme, expected } => write!(
                f,
                "missing scheme separator: \"{scheme}\" must be followed by \"{expected}\""
            ),
            PatternError::EmptyHost => write!(
                f,
                "empty host: expected a host name, \"*\" or \"*.example.com\" after \"://\""
            ),
            PatternError::InvalidHostWildcard => write!(
                f,
                "invalid host wildcard: '*' must be the whole host or come first, followed by '.' \
                 (e.g. \"*.example.com\")"
            ),
            PatternError::MissingPath => write!(
                f,
                "missing path: the host must be followed by a path starting with '/' (e.g. \"/*\")"
            ),
            PatternError::InvalidPort(p) => write!(
                f,
                "invalid port \"{p}\": use a number from 0 to 65535 or '*'"
            ),
            PatternError::PortNeedsExplicitScheme(p) => write!(
                f,
                "port \"{p}\" needs an explicit scheme (http, https or ftp), not '*'; \
                 or use ':*' for any port"
            ),
            PatternError::InvalidHost(h) => write!(f, "invalid host \"{h}\""),
        }
    }
}

impl std::error::Error for PatternError {}

/// Schemes that exist but are never valid for user scripts; named so the error says
/// "unsupported" rather than "invalid" (the distinction Chrome's docs make).
const UNSUPPORTED_SCHEMES: &[&str] = &[
    "about",
    "blob",
    "chrome",
    "chrome-extension",
    "chrome-search",
    "chrome-untrusted",
    "data",
    "devtools",
    "edge",
    "extension",
    "filesystem",
    "javascript",
    "moz-extension",
    "urn",
    "view-source",
    "ws",
    "wss",
];

const ALL_URLS: &str = "<all_urls>";

/// Parses a match pattern with Chrome's rules (see the module docs).
pub fn parse(s: &str) -> Result<MatchPattern, PatternError> {
    let kind = parse_kind(s)?;
    Ok(MatchPattern {
        source: s.to_owned(),
        kind,
    })
}

fn parse_kind(s: &str) -> Result<Kind, PatternError> {
    if s == ALL_URLS {
        return Ok(Kind::AllUrls);
    }
    // Chrome looks for "://" anywhere first, then falls back to the first ':'.
    let (scheme_str, has_standard_separator, rest) = match s.split_once("://") {
        Some((scheme, rest)) => (scheme, true, rest),
        None => match s.split_once(':') {
            Some((scheme, rest)) => (scheme, false, rest),
            None => return Err(PatternError::MissingSchemeSeparator),
        },
    };
    let scheme = parse_scheme(scheme_str)?;
    let standard = match scheme {
        SchemeSel::HttpOrHttps => true,
        SchemeSel::Exact(sc) => sc.is_standard(),
    };
    if standard != has_standard_separator {
        return Err(PatternError::WrongSchemeSeparator {
            scheme: scheme_str.to_owned(),
            expected: if standard { "://" } else { ":" },
        });
    }
    if rest.is_empty() {
        return Err(PatternError::EmptyHost);
    }

    let any_host = HostPattern {
        name: String::new(),
        subdomains: false,
    };
    if !standard {
        return Ok(Kind::Url {
            scheme,
            host: any_host,
            port: None,
            path_escaped: escape_path(&chrome_unescape(rest)),
        });
    }
    if scheme == SchemeSel::Exact(Scheme::File) {
        // Chrome ignores a file pattern's host; without any '/', the rest is the path
        // (`file://foo*` means `file:///foo*`).
        let path = match rest.find('/') {
            Some(i) => rest.get(i..).unwrap_or_default().to_owned(),
            None => format!("/{rest}"),
        };
        return Ok(Kind::Url {
            scheme,
            host: any_host,
            port: None,
            path_escaped: escape_path(&chrome_unescape(&path)),
        });
    }

    let host_end = match rest.find('/') {
        Some(0) => return Err(PatternError::EmptyHost),
        Some(i) => i,
        None => return Err(PatternError::MissingPath),
    };
    let host_and_port = rest.get(..host_end).unwrap_or_default();
    let path = rest.get(host_end..).unwrap_or_default();

    let (host_piece, port_str) = split_host_port(host_and_port)?;
    let port = match port_str {
        None | Some("*") => None,
        Some(p) => Some(parse_port(scheme, p)?),
    };
    if host_piece.is_empty() {
        return Err(PatternError::EmptyHost);
    }
    let (name, subdomains) = if host_piece == "*" {
        ("", true)
    } else if let Some(base) = host_piece.strip_prefix("*.") {
        if base.is_empty() {
            return Err(PatternError::EmptyHost);
        }
        (base, true)
    } else {
        (host_piece, false)
    };
    // Chrome rejects any other '*' to spare authors thinking the host takes globs.
    if name.contains('*') {
        return Err(PatternError::InvalidHostWildcard);
    }
    let name = if name.is_empty() {
        String::new()
    } else {
        canonicalize_host(name).ok_or_else(|| PatternError::InvalidHost(name.to_owned()))?
    };
    Ok(Kind::Url {
        scheme,
        host: HostPattern { name, subdomains },
        port,
        path_escaped: escape_path(&chrome_unescape(path)),
    })
}

fn parse_scheme(s: &str) -> Result<SchemeSel, PatternError> {
    if s == "*" {
        return Ok(SchemeSel::HttpOrHttps);
    }
    if let Some(sc) = Scheme::from_name(s) {
        return Ok(SchemeSel::Exact(sc));
    }
    let lower = s.to_ascii_lowercase();
    if lower != s && Scheme::from_name(&lower).is_some() {
        return Err(PatternError::UppercaseScheme(s.to_owned()));
    }
    if UNSUPPORTED_SCHEMES.contains(&lower.as_str()) {
        return Err(PatternError::UnsupportedScheme(s.to_owned()));
    }
    Err(PatternError::InvalidScheme(s.to_owned()))
}

/// Splits `host[:port]`, with IPv6 hosts in brackets (`[::1]:8080`).
fn split_host_port(host_and_port: &str) -> Result<(&str, Option<&str>), PatternError> {
    if !host_and_port.starts_with('[') {
        return Ok(match host_and_port.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (host_and_port, None),
        });
    }
    let close = host_and_port
        .find(']')
        .ok_or_else(|| PatternError::InvalidHost(host_and_port.to_owned()))?;
    if close == 1 {
        return Err(PatternError::EmptyHost);
    }
    let host = host_and_port.get(..=close).unwrap_or_default();
    let after = host_and_port.get(close + 1..).unwrap_or_default();
    if after.is_empty() {
        return Ok((host, None));
    }
    match after.strip_prefix(':') {
        Some(port) => Ok((host, Some(port))),
        None => Err(PatternError::InvalidHost(host_and_port.to_owned())),
    }
}

fn parse_port(scheme: SchemeSel, p: &str) -> Result<String, PatternError> {
    let has_default_port = match scheme {
        SchemeSel::HttpOrHttps => false,
        SchemeSel::Exact(sc) => sc.has_default_port(),
    };
    if !has_default_port {
        return Err(PatternError::PortNeedsExplicitScheme(p.to_owned()));
    }
    let valid = !p.is_empty()
        && p.bytes().all(|b| b.is_ascii_digit())
        && p.parse::<u32>().is_ok_and(|n| n <= 65535);
    if valid {
        Ok(p.to_owned())
    } else {
        Err(PatternError::InvalidPort(p.to_owned()))
    }
}

/// The lock symbols Chromium never unescapes in a URL (they could pose as a secure page).
const LOCKS: [char; 4] = ['\u{1F50F}', '\u{1F510}', '\u{1F512}', '\u{1F513}'];

/// Does Chrome's matching read `%XX` (or a UTF-8 run of them) as this character? The ASCII set
/// is measured in Chromium 156 one character at a time (page loads; the table is
/// `a_path_is_matched_as_chrome_decodes_it` below): letters, digits,
/// `-`, `_`, `~`, `"`, `<`, `>` are decoded, every other ASCII character stays escaped (so `%2A`
/// never becomes a wildcard, nor `%2F` a slash). A non-ASCII character is decoded unless it
/// draws nothing, spaces, or reorders text (what the review marks, measured for each kind:
/// U+200B, U+00A0, U+00AD, U+FEFF, U+3000, U+200E, U+3164, U+034F, U+061C, U+FE0F, U+E0041,
/// U+2800) or is a lock symbol; the review's own `⟨` is decoded.
pub(crate) fn chrome_decodes(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '~' | '"' | '<' | '>');
    }
    c == crate::guard::diff::MARK_OPEN
        || !(crate::guard::diff::needs_marker(c) || LOCKS.contains(&c))
}

/// The value of one hex digit.
fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// A pattern's path, or a URL's path and query, as Chrome compares them: each `%XX` (a UTF-8 run
/// of them for a non-ASCII character) that [`chrome_decodes`] is replaced by its character; any
/// other escape, an invalid one or a lone `%` stays as written. One pass: `%2541` stays `%2541`.
pub(crate) fn chrome_unescape(s: &str) -> String {
    let bytes = s.as_bytes();
    let escaped = |i: usize| -> Option<u8> {
        if bytes.get(i) != Some(&b'%') {
            return None;
        }
        Some(hex(*bytes.get(i + 1)?)? * 16 + hex(*bytes.get(i + 2)?)?)
    };
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < bytes.len() {
        if let Some(first) = escaped(i) {
            let len = match first {
                0x00..=0x7F => 1,
                0xC2..=0xDF => 2,
                0xE0..=0xEF => 3,
                0xF0..=0xF4 => 4,
                _ => 0,
            };
            let run: Option<Vec<u8>> = (0..len).map(|k| escaped(i + 3 * k)).collect();
            let decoded = run
                .as_deref()
                .and_then(|b| std::str::from_utf8(b).ok())
                .and_then(|t| t.chars().next())
                .filter(|&c| chrome_decodes(c));
            if let Some(c) = decoded {
                out.push(c);
                i += 3 * len;
                continue;
            }
            // Not decoded: the escape as written (its hex case too).
            out.push_str(s.get(i..i + 3).unwrap_or_default());
            i += 3;
            continue;
        }
        let Some(c) = s.get(i..).and_then(|t| t.chars().next()) else {
            break;
        };
        out.push(c);
        i += c.len_utf8();
    }
    out
}

/// Chrome's `path_escaped_`: only `*` stays a wildcard for [`glob_matches`].
fn escape_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if c == '\\' || c == '?' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

impl MatchPattern {
    /// The pattern exactly as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// The host as the browser reads it (lowercase, punycode), without `*.`; `None` for any
    /// host, `file` and `<all_urls>`.
    pub fn host(&self) -> Option<&str> {
        match &self.kind {
            Kind::Url { scheme, host, .. }
                if *scheme != SchemeSel::Exact(Scheme::File) && !host.name.is_empty() =>
            {
                Some(&host.name)
            }
            _ => None,
        }
    }

    /// True for `<all_urls>`.
    pub fn is_all_urls(&self) -> bool {
        self.kind == Kind::AllUrls
    }

    /// The pattern as a JavaScript `RegExp` source, tested against `location.href` (the
    /// serialized URL, fragment included) by the runtime guard. With `tld`, a host ending in
    /// `.tld` has that suffix replaced by this RegExp piece (see [`super::rules::TLD_REGEX`]).
    pub fn js_regex(&self, tld: Option<&str>) -> String {
        let (scheme, host, port, path_escaped) = match &self.kind {
            Kind::AllUrls => return "^(?:https?|file):".to_owned(),
            Kind::Url {
                scheme,
                host,
                port,
                path_escaped,
            } => (scheme, host, port, path_escaped),
        };
        let mut re = String::from("^");
        match scheme {
            SchemeSel::HttpOrHttps => re.push_str("https?"),
            SchemeSel::Exact(sc) => re.push_str(&regex_escape(sc.name())),
        }
        let is_file = *scheme == SchemeSel::Exact(Scheme::File);
        let standard = match scheme {
            SchemeSel::HttpOrHttps => true,
            SchemeSel::Exact(sc) => sc.is_standard(),
        };
        if !standard {
            re.push(':');
        } else if is_file {
            re.push_str("://[^/?#]*");
        } else {
            // Optional user info, which Chrome's matching ignores.
            re.push_str("://(?:[^/?#@]*@)?");
            let (name, tld) = match (host.name.strip_suffix(".tld"), tld) {
                (Some(base), Some(t)) => (base, Some(t)),
                _ => (host.name.as_str(), None),
            };
            if host.subdomains && name.is_empty() {
                // Any host, IPv6 literals (with their colons) included.
                re.push_str("(?:\\[[^\\]/?#]*\\]|[^/?#:]*)");
            } else {
                if host.subdomains {
                    re.push_str("(?:[^/?#:@]*\\.)?");
                }
                re.push_str(&regex_escape(name));
                if let Some(t) = tld {
                    re.push_str(t);
                }
                // Chrome ignores one trailing dot.
                re.push_str("\\.?");
            }
            match port {
                // location.href omits a default port.
                Some(p) if default_port_of(*scheme) == Some(p.as_str()) => {}
                Some(p) => {
                    re.push(':');
                    re.push_str(p);
                }
                None => re.push_str("(?::\\d+)?"),
            }
        }
        // The path glob covers path + query; the fragment is never part of the match.
        let path = path_escaped;
        let (body, also_bare) = match path.strip_suffix("/*") {
            Some(p) => (p, true),
            None => (path.as_str(), false),
        };
        re.push_str(&glob_body_regex(body));
        if also_bare {
            re.push_str("(?:/[^#]*)?");
        }
        re.push_str("(?:#[\\s\\S]*)?$");
        re
    }

    /// Does this pattern match `url` (as Chrome would for a user script)? Malformed URLs and
    /// URLs on schemes user scripts cannot run on never match.
    pub fn matches(&self, url: &str) -> bool {
        crate::web::platform()
            .parse_url(url)
            .is_ok_and(|u| self.matches_parsed(&u))
    }

    /// [`Self::matches`] on a URL the browser already parsed (parse once, test many patterns).
    pub fn matches_parsed(&self, url: &ParsedUrl) -> bool {
        let Some(test) = TestUrl::from_parsed(url, true) else {
            return false;
        };
        if Scheme::from_name(&test.scheme).is_none() {
            return false;
        }
        let (scheme, host, port, path_escaped) = match &self.kind {
            Kind::AllUrls => return true,
            Kind::Url {
                scheme,
                host,
                port,
                path_escaped,
            } => (scheme, host, port, path_escaped),
        };
        let scheme_ok = match scheme {
            SchemeSel::HttpOrHttps => test.scheme == "http" || test.scheme == "https",
            SchemeSel::Exact(sc) => sc.name() == test.scheme,
        };
        if !scheme_ok || test.path.is_empty() {
            return false;
        }
        if *scheme != SchemeSel::Exact(Scheme::File) && !host_matches(host, &test.host) {
            return false;
        }
        if let Some(p) = port {
            if *p != test.effective_port() {
                return false;
            }
        }
        path_matches(path_escaped, &chrome_unescape(&test.path))
    }
}

impl fmt::Display for MatchPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl FromStr for MatchPattern {
    type Err = PatternError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse(s)
    }
}

fn default_port_of(scheme: SchemeSel) -> Option<&'static str> {
    match scheme {
        SchemeSel::Exact(Scheme::Http) => Some("80"),
        SchemeSel::Exact(Scheme::Https) => Some("443"),
        SchemeSel::Exact(Scheme::Ftp) => Some("21"),
        _ => None,
    }
}

/// Escapes every character a JavaScript RegExp gives a meaning to.
pub(crate) fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\^$.|?*+()[]{}/".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// An escaped path glob (only `*` is a wildcard, `\\` escapes), decoded as Chrome decodes it, as a
/// RegExp piece over the raw `location.href` that never crosses into the fragment.
fn glob_body_regex(escaped: &str) -> String {
    use super::glob_regex::{committed, push_lit, push_wild};
    // Committed as Chrome commits (`glob_regex`): `*a*a*a*a*Z` is linear in the address.
    let mut pieces = Vec::new();
    let mut chars = escaped.chars();
    while let Some(c) = chars.next() {
        match c {
            '*' => push_wild(&mut pieces, true, "[^#]"),
            '\\' => {
                if let Some(n) = chars.next() {
                    push_lit(&mut pieces, &char_regex(n), true);
                }
            }
            c => push_lit(&mut pieces, &char_regex(c), true),
        }
    }
    // No capturing group comes before the path's (the scheme and host use `(?:…)`).
    committed(&pieces, &mut 0)
}

/// One literal character of a decoded path as a RegExp piece: the character itself or, where
/// Chrome decodes it ([`chrome_decodes`]), any `%XX` spelling of it, so the guard reads the
/// address as Chrome's matching does (`/a%41` is `/aA`).
fn char_regex(c: char) -> String {
    let literal = regex_escape(&c.to_string());
    if !chrome_decodes(c) {
        return literal;
    }
    let digit = |n: u8| match char::from_digit(u32::from(n), 16) {
        Some(d) if d.is_ascii_alphabetic() => format!("[{d}{}]", d.to_ascii_uppercase()),
        Some(d) => d.to_string(),
        None => String::new(),
    };
    let mut buf = [0u8; 4];
    let spelled: String = c
        .encode_utf8(&mut buf)
        .bytes()
        .map(|b| format!("%{}{}", digit(b >> 4), digit(b & 0x0F)))
        .collect();
    format!("(?:{literal}|{spelled})")
}

fn host_matches(pattern: &HostPattern, test_host: &str) -> bool {
    // Chrome ignores one trailing dot on either side ("example.com." is "example.com").
    let test = test_host.strip_suffix('.').unwrap_or(test_host);
    let want = pattern.name.strip_suffix('.').unwrap_or(&pattern.name);
    if test == want {
        return true;
    }
    if !pattern.subdomains {
        return false;
    }
    if want.is_empty() {
        return true;
    }
    // `*.1.2.3` must not match the address 0.1.2.3.
    if is_ip_address(test) {
        return false;
    }
    if test.len() <= want.len() + 1 || !test.ends_with(want) {
        return false;
    }
    test.len()
        .checked_sub(want.len() + 1)
        .and_then(|i| test.as_bytes().get(i))
        == Some(&b'.')
}

fn is_ip_address(host: &str) -> bool {
    if host.starts_with('[') {
        return true;
    }
    let mut parts = 0;
    for part in host.split('.') {
        parts += 1;
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
    }
    parts == 4
}

fn path_matches(path_escaped: &str, test_path: &str) -> bool {
    // Chrome: a pattern path "<p>/*" also matches the URL path "<p>" itself.
    if path_escaped.len() == test_path.len() + 2
        && path_escaped.starts_with(test_path)
        && path_escaped.ends_with("/*")
    {
        return true;
    }
    glob_matches(path_escaped, test_path)
}

/// The parts of a URL that matching needs, normalized the way Chrome's GURL would present
/// them: lowercase scheme, canonical host, path + query without fragment.
struct TestUrl {
    scheme: String,
    host: String,
    port: Option<u16>,
    path: String,
}

impl TestUrl {
    /// The parts of a URL the browser's parser ([`crate::web`]) gave, which is what the browser
    /// does to a URL before Chrome matches it: host case, IDN → punycode, `..` segments, ports.
    fn from_parsed(u: &ParsedUrl, allow_inner: bool) -> Option<TestUrl> {
        // Chrome matches a filesystem: URL by the URL inside it (once; no nesting).
        if u.scheme == "filesystem" {
            let inner = u.href.strip_prefix("filesystem:")?;
            return if allow_inner {
                let inner = crate::web::platform().parse_url(inner).ok()?;
                TestUrl::from_parsed(&inner, false)
            } else {
                None
            };
        }
        Some(TestUrl {
            scheme: u.scheme.clone(),
            host: u.host.clone(),
            port: u.port,
            path: u.path_query.clone(),
        })
    }

    /// Chrome compares the pattern's port with `NumberToString(EffectiveIntPort())`, which is
    /// "-1" for schemes without ports.
    fn effective_port(&self) -> String {
        let default = match self.scheme.as_str() {
            "http" | "ws" => Some(80),
            "https" | "wss" => Some(443),
            "ftp" => Some(21),
            _ => None,
        };
        match self.port.or(default) {
            Some(p) => p.to_string(),
            None => "-1".to_owned(),
        }
    }
}

/// Canonicalizes a pattern's host with the browser's URL parser ([`crate::web`]), as Chrome
/// canonicalizes it through GURL: lowercase, IDN → punycode, IPv4 forms (`0x7f.1`) to dotted
/// decimal, IPv6 compressed. `None` for hosts no URL can have, such as `256.256.256.256`
/// (Chrome refuses those patterns with "Invalid host").
pub(crate) fn canonicalize_host(host: &str) -> Option<String> {
    // The host goes into `http://{host}/`: anything that would end the host there (or that the
    // URL parser strips, such as tabs) would make it read another host than the one written.
    let ipv6 = host.starts_with('[') && host.ends_with(']');
    let forbidden = |c: char| {
        c.is_ascii_control()
            || c == ' '
            || "@/\\?#".contains(c)
            || (c == ':' && !ipv6)
            || ((c == '[' || c == ']') && !ipv6)
    };
    if host.is_empty() || host.chars().any(forbidden) {
        return None;
    }
    let u = crate::web::platform()
        .parse_url(&format!("http://{host}/"))
        .ok()?;
    (!u.host.is_empty() && u.port.is_none() && u.path_query == "/").then_some(u.host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> MatchPattern {
        match parse(s) {
            Ok(m) => m,
            Err(e) => panic!("{s:?} should parse: {e}"),
        }
    }

    /// Measured in Chromium 156 (`matching.test.mjs`, "a path is matched as Chrome decodes
    /// it"): a pattern's path and the address's path and query are compared after Chrome decodes
    /// letters, digits, `-_~"<>` and non-ASCII characters that show; every other escape stays.
    /// Before, `match_url` said "does not run" on `/aA` for `/a%41*` and on `/caf%C3%A9` for
    /// `/café*`, where Chrome ran the script. The guard's RegExp reads the raw `location.href`
    /// the same way.
    #[test]
    fn a_path_is_matched_as_chrome_decodes_it() {
        let table: &[(&str, &str, bool)] = &[
            ("/a%41*", "/aA", true),
            ("/a%41*", "/a%41", true),
            ("/caf\u{e9}*", "/caf%C3%A9", true),
            ("/caf\u{e9}*", "/caf%c3%a9", true),
            ("/caf%c3%a9x*", "/caf%C3%A9x", true),
            ("/\u{fc}ber*", "/%C3%BCber", true),
            ("/q?x=caf\u{e9}*", "/q?x=caf%C3%A9", true),
            ("/q?a=%41*", "/q?a=A", true),
            ("/x-y_z~*", "/x%2Dy%5Fz%7E", true),
            ("/x\"y<z>*", "/x%22y%3Cz%3E", true),
            ("/x\u{27e8}y*", "/x%E2%9F%A8y", true),
            ("/s%2Fy*", "/s%2Fy", true),
            ("/s%2Fy*", "/s/y", false),
            ("/st%2Ar*", "/stZZr", false),
            ("/st%2Ar*", "/st%2Ar", true),
            ("/p%25*", "/p%25", true),
            ("/qm%3Fx*", "/qm?x", false),
            ("/pl+us*", "/pl%2Bus", false),
            ("/x!y*", "/x%21y", false),
            ("/x.y*", "/x%2Ey", false),
            ("/b\u{ff}*", "/b%FF", false),
            ("/b\u{ff}*", "/b%C3%BF", true),
            ("/r\u{202e}*", "/r%E2%80%AE", false),
            ("/z\u{200b}y*", "/z%E2%80%8By", false),
            ("/n\u{a0}y*", "/n%C2%A0y", false),
            ("/b\u{2800}y*", "/b%E2%A0%80y", false),
            ("/l\u{1f512}y*", "/l%F0%9F%94%92y", false),
        ];
        for &(path, url_path, want) in table {
            let mp = p(&format!("http://e.test{path}"));
            let url = crate::scripts::rules::normalize_url(&format!("http://e.test{url_path}"))
                .unwrap_or_else(|| panic!("{url_path} is a URL"));
            assert_eq!(mp.matches(&url), want, "{path} on {url}");
            let guard = crate::web::platform()
                .regex_test(&mp.js_regex(None), "", &url)
                .unwrap();
            assert_eq!(guard, want, "the guard of {path} on {url}");
        }
        // One pass, and a lone or bad escape stays as written.
        assert_eq!(chrome_unescape("%2541%41%4g%"), "%2541A%4g%");
        assert_eq!(chrome_unescape("%C3%A9%C3"), "\u{e9}%C3");
    }

    fn assert_matches(pattern: &str, yes: &[&str], no: &[&str]) {
        let m = p(pattern);
        for u in yes {
            assert!(m.matches(u), "{pattern} should match {u}");
        }
        for u in no {
            assert!(!m.matches(u), "{pattern} should not match {u}");
        }
    }

    // --- Examples from developer.chrome.com "Match patterns" (current and MV3-2023 pages) ---

    #[test]
    fn doc_https_any_host() {
        assert_matches(
            "https://*/*",
            &[
                "https://www.google.com/",
                "https://example.org/foo/bar.html",
            ],
            &[
                "http://www.google.com/",
                "file:///foo",
                "ftp://example.org/",
            ],
        );
    }

    #[test]
    fn doc_http_any_host() {
        assert_matches(
            "http://*/*",
            &[
                "http://74.125.127.100/search",
                "http://example.com/",
                "http://www.google.com/",
                "http://example.org/foo/bar.html",
            ],
            &["https://example.com/", "ftp://example.com/"],
        );
    }

    #[test]
    fn doc_path_prefix() {
        assert_matches(
            "https://*/foo*",
            &[
                "https://example.com/foo/bar.html",
                "https://www.google.com/foo",
            ],
            &[
                "https://example.com/",
                "https://example.com/bar/foo",
                "http://example.com/foo",
            ],
        );
        assert_matches(
            "http://*/foo*",
            &[
                "http://example.com/foo/bar.html",
                "http://www.google.com/foo",
            ],
            &["http://www.google.com/fo"],
        );
    }

    #[test]
    fn doc_subdomains_and_path_glob() {
        assert_matches(
            "https://*.google.com/foo*bar",
            &[
                "https://www.google.com/foo/baz/bar",
                "https://docs.google.com/foobar",
                "https://google.com/foobar",
            ],
            &[
                "https://www.google.com/foo/baz/bar/",
                "https://google.com.evil.example/foobar",
                "https://notgoogle.com/foobar",
                "http://www.google.com/foobar",
            ],
        );
        assert_matches(
            "http://*.google.com/foo*bar",
            &[
                "http://www.google.com/foo/baz/bar",
                "http://docs.google.com/foobar",
            ],
            &["https://docs.google.com/foobar"],
        );
    }

    #[test]
    fn doc_exact_url() {
        assert_matches(
            "http://example.org/foo/bar.html",
            &["http://example.org/foo/bar.html"],
            &[
                "http://example.org/foo/bar.htm",
                "http://example.org/foo/bar.html?x",
                "https://example.org/foo/bar.html",
                "http://www.example.org/foo/bar.html",
            ],
        );
        // The fragment is never part of what is matched.
        assert!(p("http://example.org/foo/bar.html").matches("http://example.org/foo/bar.html#top"));
    }

    #[test]
    fn doc_file() {
        assert_matches(
            "file:///foo*",
            &[
                "file:///foo/bar.html",
                "file:///foo",
                "file://localhost/foo/x",
            ],
            &["file:///bar/foo", "http://example.com/foo"],
        );
    }

    #[test]
    fn doc_ip_address() {
        assert_matches(
            "http://127.0.0.1/*",
            &[
                "http://127.0.0.1/",
                "http://127.0.0.1/foo/bar.html",
                "http://127.0.0.1:8080/",
            ],
            &["https://127.0.0.1/", "http://127.0.0.2/"],
        );
        assert_matches(
            "http://127.0.0.1/",
            &["http://127.0.0.1/"],
            &["http://127.0.0.1/x"],
        );
    }

    #[test]
    fn doc_localhost_any_port() {
        assert_matches(
            "http://localhost/*",
            &[
                "http://localhost:3000",
                "http://localhost:8080",
                "http://localhost/x",
            ],
            &["https://localhost/", "http://localhost.example/"],
        );
        assert_matches(
            "http://localhost:*/*",
            &["http://localhost:8080/", "http://localhost:3000/a"],
            &[],
        );
        assert_matches(
            "http://*:*/*",
            &[
                "http://localhost/",
                "http://127.0.0.1:9/",
                "http://example.com:8443/x",
            ],
            &["https://localhost/"],
        );
    }

    #[test]
    fn doc_any_scheme_mail() {
        assert_matches(
            "*://mail.google.com/*",
            &[
                "http://mail.google.com/foo/baz/bar",
                "https://mail.google.com/foobar",
            ],
            &[
                "ftp://mail.google.com/",
                "file:///mail.google.com/",
                "ws://mail.google.com/",
                "https://google.com/",
            ],
        );
    }

    #[test]
    fn doc_all_urls() {
        assert_matches(
            "<all_urls>",
            &[
                "http://example.org/foo/bar.html",
                "https://example.org/",
                "file:///bar/baz.html",
                "ftp://example.org/",
            ],
            &[
                "chrome://settings/",
                "about:blank",
                "data:text/html,hi",
                "chrome-extension://abc/page.html",
                "javascript:alert(1)",
                "not a url",
            ],
        );
        assert!(p("<all_urls>").is_all_urls());
    }

    #[test]
    fn doc_https_root_only_for_content_scripts() {
        // The docs list `https://*/` as "any https URL" for host permissions, where paths are
        // ignored. For scripts the path counts, as in Chrome's URLPattern.
        assert_matches(
            "https://*/",
            &["https://example.com/", "https://example.com"],
            &["https://example.com/x"],
        );
    }

    #[test]
    fn doc_urn_and_uuid_in_package() {
        // The 2023 docs showed `urn:*`; Chrome has since replaced `urn` with `uuid-in-package`.
        assert_eq!(
            parse("urn:*"),
            Err(PatternError::UnsupportedScheme("urn".into()))
        );
        assert_matches(
            "uuid-in-package:*",
            &["uuid-in-package:54723bea-c94e-480e-80c8-a69846c3f582"],
            &[
                "urn:uuid:54723bea-c94e-480e-80c8-a69846c3f582",
                "uuid-in-package:",
            ],
        );
        assert!(matches!(
            parse("uuid-in-package://x"),
            Err(PatternError::WrongSchemeSeparator { expected: ":", .. })
        ));
    }

    #[test]
    fn doc_invalid_patterns() {
        assert_eq!(
            parse("https://www.google.com"),
            Err(PatternError::MissingPath)
        );
        assert_eq!(
            parse("http://www.google.com"),
            Err(PatternError::MissingPath)
        );
        assert_eq!(
            parse("https://*foo/bar"),
            Err(PatternError::InvalidHostWildcard)
        );
        assert_eq!(
            parse("http://*foo/bar"),
            Err(PatternError::InvalidHostWildcard)
        );
        assert_eq!(
            parse("https://foo.*.bar/baz"),
            Err(PatternError::InvalidHostWildcard)
        );
        assert_eq!(
            parse("http:/bar"),
            Err(PatternError::WrongSchemeSeparator {
                scheme: "http".into(),
                expected: "://"
            })
        );
        assert_eq!(
            parse("foo://*"),
            Err(PatternError::InvalidScheme("foo".into()))
        );
        assert_eq!(
            parse("chrome://*"),
            Err(PatternError::UnsupportedScheme("chrome".into()))
        );
        assert_eq!(
            parse("chrome-extension://*"),
            Err(PatternError::UnsupportedScheme("chrome-extension".into()))
        );
        assert_eq!(
            parse("about:*"),
            Err(PatternError::UnsupportedScheme("about".into()))
        );
        // Top-level-domain wildcards are not supported.
        assert_eq!(
            parse("http://google.*/*"),
            Err(PatternError::InvalidHostWildcard)
        );
    }

    // --- Further Chrome behaviour ---

    #[test]
    fn more_invalid_patterns() {
        assert_eq!(parse(""), Err(PatternError::MissingSchemeSeparator));
        assert_eq!(
            parse("example.com/*"),
            Err(PatternError::MissingSchemeSeparator)
        );
        assert_eq!(
            parse("<ALL_URLS>"),
            Err(PatternError::MissingSchemeSeparator)
        );
        assert_eq!(parse("http://"), Err(PatternError::EmptyHost));
        assert_eq!(parse("http:///foo"), Err(PatternError::EmptyHost));
        assert_eq!(parse("http://*./foo"), Err(PatternError::EmptyHost));
        assert_eq!(parse("http://:80/foo"), Err(PatternError::EmptyHost));
        assert_eq!(parse("http://[]/foo"), Err(PatternError::EmptyHost));
        assert_eq!(
            parse("http://[::1/foo"),
            Err(PatternError::InvalidHost("[::1".into()))
        );
        assert_eq!(
            parse("http://[::1]x/foo"),
            Err(PatternError::InvalidHost("[::1]x".into()))
        );
        assert_eq!(
            parse("http://a b/foo"),
            Err(PatternError::InvalidHost("a b".into()))
        );
        assert_eq!(
            parse("http://a%20b/foo"),
            Err(PatternError::InvalidHost("a%20b".into()))
        );
        assert_eq!(
            parse("http://*.*.example.com/"),
            Err(PatternError::InvalidHostWildcard)
        );
        assert_eq!(
            parse("http://example.com:/"),
            Err(PatternError::InvalidPort("".into()))
        );
        assert_eq!(
            parse("http://example.com:x/"),
            Err(PatternError::InvalidPort("x".into()))
        );
        assert_eq!(
            parse("http://example.com:65536/"),
            Err(PatternError::InvalidPort("65536".into()))
        );
        assert_eq!(
            parse("*://example.com:8080/*"),
            Err(PatternError::PortNeedsExplicitScheme("8080".into()))
        );
        assert_eq!(
            parse("HTTP://example.com/*"),
            Err(PatternError::UppercaseScheme("HTTP".into()))
        );
        assert_eq!(
            parse("ws://*/*"),
            Err(PatternError::UnsupportedScheme("ws".into()))
        );
        assert_eq!(
            parse("wss://*/*"),
            Err(PatternError::UnsupportedScheme("wss".into()))
        );
        assert_eq!(
            parse("data:*"),
            Err(PatternError::UnsupportedScheme("data".into()))
        );
        assert_eq!(parse("file://"), Err(PatternError::EmptyHost));
        assert_eq!(
            parse("*:foo"),
            Err(PatternError::WrongSchemeSeparator {
                scheme: "*".into(),
                expected: "://"
            })
        );
    }

    #[test]
    fn error_messages_are_clear() {
        let msg = |s: &str| parse(s).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(msg("https://www.google.com").contains("missing path"));
        assert!(msg("https://foo.*.bar/baz").contains("'*'"));
        assert!(msg("http:/bar").contains("\"://\""));
        assert!(msg("foo://*").contains("invalid scheme \"foo\""));
        assert!(msg("chrome://*").contains("unsupported scheme"));
        assert!(msg("http:///x").contains("empty host"));
        assert!(msg("HTTP://x/").contains("lowercase"));
        assert!(msg("*://x:1/").contains("explicit scheme"));
        assert!(msg("nothing").contains("missing scheme separator"));
    }

    #[test]
    fn ports() {
        assert_matches(
            "http://example.com:8080/*",
            &["http://example.com:8080/", "http://example.com:8080/a?b"],
            &["http://example.com/", "http://example.com:8081/"],
        );
        // Default ports: an explicit :80 is the same URL as no port.
        assert_matches(
            "http://example.com:80/*",
            &["http://example.com/", "http://example.com:80/x"],
            &["http://example.com:8080/"],
        );
        assert_matches("https://example.com:443/*", &["https://example.com/"], &[]);
        assert_matches("ftp://example.com:21/*", &["ftp://example.com/"], &[]);
        // Chrome compares the written digits, so a padded port parses but never matches.
        assert_matches("http://example.com:080/*", &[], &["http://example.com/"]);
        // Patterns without a port match every port.
        assert_matches("https://example.com/*", &["https://example.com:4443/"], &[]);
        // Malformed URL ports never match.
        assert!(!p("http://*/*").matches("http://example.com:99999/"));
        assert!(!p("http://*/*").matches("http://example.com:8x/"));
    }

    #[test]
    fn host_case_and_canonical_forms() {
        assert_matches(
            "https://Example.COM/*",
            &[
                "https://example.com/",
                "HTTPS://EXAMPLE.com/x",
                "https://example.com./",
            ],
            &[],
        );
        assert_matches("https://example.com./*", &["https://example.com/"], &[]);
        assert_matches(
            "https://*.example.com/*",
            &[
                "https://example.com/",
                "https://a.b.example.com/",
                "https://user:pw@x.example.com/",
            ],
            &["https://badexample.com/", "https://example.com.au/"],
        );
        // Path case matters.
        assert_matches(
            "https://example.com/Foo",
            &["https://example.com/Foo"],
            &["https://example.com/foo"],
        );
    }

    #[test]
    fn subdomain_wildcard_never_matches_ip_addresses() {
        assert_matches(
            "http://*.0.0.1/*",
            &["http://0.0.1/"],
            &["http://127.0.0.1/"],
        );
    }

    #[test]
    fn ipv6_hosts() {
        assert_matches(
            "http://[::1]/*",
            &["http://[::1]/", "http://[::1]:8080/x"],
            &["http://[::2]/"],
        );
        assert_matches(
            "http://[::1]:8080/*",
            &["http://[::1]:8080/"],
            &["http://[::1]/"],
        );
        assert_matches("http://[FE80::1]/*", &["http://[fe80::1]/"], &[]);
    }

    #[test]
    fn idn_hosts_are_punycoded() {
        assert_eq!(
            canonicalize_host("bücher.de").as_deref(),
            Some("xn--bcher-kva.de")
        );
        assert_eq!(
            canonicalize_host("BÜCHER.de").as_deref(),
            Some("xn--bcher-kva.de")
        );
        assert_eq!(
            canonicalize_host("münchen.de").as_deref(),
            Some("xn--mnchen-3ya.de")
        );
        assert_eq!(
            canonicalize_host("例え.テスト").as_deref(),
            Some("xn--r8jz45g.xn--zckzah")
        );
        assert_eq!(
            canonicalize_host("例え。テスト").as_deref(),
            Some("xn--r8jz45g.xn--zckzah")
        );
        // The host is read through `new URL("http://" + host + "/")`: nothing in it may end the
        // host early and make the URL parser read another one.
        for smuggled in [
            "evil.test@good.test",
            "good.test:80",
            "good.test/x",
            "good.test\\x",
            "good.test?x",
            "good.test#x",
            "go\tod.test",
            "go od.test",
            "[good.test",
        ] {
            assert_eq!(canonicalize_host(smuggled), None, "{smuggled:?}");
        }
        assert_eq!(canonicalize_host("[::1]").as_deref(), Some("[::1]"));
        assert_eq!(canonicalize_host("0x7f.1").as_deref(), Some("127.0.0.1"));
        assert_matches(
            "https://*.bücher.de/*",
            &[
                "https://www.xn--bcher-kva.de/",
                "https://xn--bcher-kva.de/",
                "https://bücher.de/",
            ],
            &["https://bucher.de/"],
        );
        // Hosts no URL can have are refused, as Chrome refuses them.
        for bad in [
            "256.256.256.256",
            "1.2.3.256",
            "0x100000000",
            "a b.com",
            "exa%mple.com",
        ] {
            assert_eq!(
                parse(&format!("https://{bad}/*")),
                Err(PatternError::InvalidHost(bad.to_owned())),
                "{bad}"
            );
        }
        // IPv4 shorthand is canonicalized as the browser does.
        assert_matches("http://127.1/*", &["http://127.0.0.1/x"], &[]);
        assert_matches("http://0x7f.0.0.1/*", &["http://127.0.0.1/x"], &[]);
    }

    #[test]
    fn path_rules() {
        // "<p>/*" also matches "<p>".
        assert_matches(
            "https://example.com/foo/*",
            &[
                "https://example.com/foo",
                "https://example.com/foo/",
                "https://example.com/foo/x",
            ],
            &["https://example.com/foobar"],
        );
        // Query is part of the matched path; '?' in a pattern is literal.
        assert_matches(
            "https://example.com/search?q=*",
            &[
                "https://example.com/search?q=rust",
                "https://example.com/search?q=",
            ],
            &[
                "https://example.com/searchXq=rust",
                "https://example.com/search",
            ],
        );
        assert_matches(
            "https://example.com/*",
            &["https://example.com?x=1", "https://example.com/#frag"],
            &[],
        );
        // Backslash in a pattern path is literal; the browser turns one in an http(s) URL
        // into '/' and keeps an encoded one as %5C, so no http(s) URL matches it.
        assert_matches(
            "https://example.com/a\\*",
            &[],
            &["https://example.com/a*", "https://example.com/a\\xyz"],
        );
        // Multiple stars.
        assert_matches(
            "https://example.com/*/edit/*",
            &["https://example.com/doc/1/edit/2"],
            &["https://example.com/doc/1/view/2"],
        );
    }

    #[test]
    fn file_patterns_ignore_host() {
        assert_matches("file://*", &["file:///", "file:///anything"], &[]);
        assert_matches(
            "file://foo*",
            &["file:///foo", "file:///foobar"],
            &["file:///bar"],
        );
        assert_matches(
            "file://server/share/*",
            &["file:///share/x", "file://other/share/y"],
            &[],
        );
    }

    #[test]
    fn filesystem_urls_use_the_inner_url() {
        assert_matches(
            "https://example.com/*",
            &["filesystem:https://example.com/temporary/a.txt"],
            &[
                "filesystem:filesystem:https://example.com/temporary/a.txt",
                "blob:https://example.com/uuid",
            ],
        );
    }

    #[test]
    fn keeps_source_and_roundtrips() {
        let m = p("*://*.example.com/*");
        assert_eq!(m.as_str(), "*://*.example.com/*");
        assert_eq!(m.to_string(), "*://*.example.com/*");
        let parsed: Result<MatchPattern, _> = "https://a/*".parse();
        assert!(parsed.is_ok());
    }

    #[test]
    fn no_panics_on_prefixes_and_garbage() {
        let seeds = [
            "https://*.bücher.de:8080/foo*bar?x=\\y",
            "http://[fe80::1]:80/*",
            "file://host/path*",
            "uuid-in-package:abc",
            "<all_urls>",
            "*://*:*/*",
        ];
        let urls = [
            "https://www.xn--bcher-kva.de:8080/foo/bar?x=\\y#f",
            "http://[fe80::1]/",
            "file:///path",
            "filesystem:http://a/b",
            "http://u@[::1]:8/",
        ];
        for seed in seeds.iter().chain(urls.iter()) {
            for (i, _) in seed.char_indices() {
                let prefix = seed.get(..i).unwrap_or_default();
                let suffix = seed.get(i..).unwrap_or_default();
                for candidate in [prefix, suffix] {
                    if let Ok(m) = parse(candidate) {
                        for u in urls.iter().chain(seeds.iter()) {
                            let _ = m.matches(u);
                            let _ = m.matches(candidate);
                        }
                    }
                    for s in seeds {
                        if let Ok(m) = parse(s) {
                            let _ = m.matches(candidate);
                        }
                    }
                }
            }
        }
        for junk in [
            "://",
            ":",
            "[",
            "]",
            "*:",
            "http://[",
            "http://[]:",
            "http://@/",
            "\u{0}:\u{0}",
        ] {
            let _ = parse(junk);
            let _ = p("<all_urls>").matches(junk);
            let _ = p("*://*/*").matches(junk);
        }
    }

    #[test]
    fn long_inputs_stay_fast() {
        let start = std::time::Instant::now();
        let long_path = format!("https://example.com/{}", "*a".repeat(5_000));
        let m = p(&long_path);
        let url = format!("https://example.com/{}", "a".repeat(50_000));
        let _ = m.matches(&url);
        let long_host = format!("https://{}.com/*", "a".repeat(100_000));
        assert!(parse(&long_host).is_ok());
        assert!(start.elapsed().as_secs() < 5);
    }
}
