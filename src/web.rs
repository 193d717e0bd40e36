//! The browser's own URL parser, RegExp engine and Unicode lowercasing, asked as pure functions.
//!
//! What `match_url` says must be decided by the engines that decide in the page: Chrome
//! normalizes a page URL with its URL parser (what `new URL()` runs) and the guard tests it with
//! V8's `RegExp`. Linking equivalent crates into the wasm doubled its size, so the core asks
//! through [`WebPlatform`]: the shell (`chrome::web`) answers with `URL` and `RegExp` and decides
//! nothing; natively (tests, fuzz targets, the bridge) [`native::Native`] answers with the
//! `url` (WHATWG) and `regress` (ECMAScript) crates, which are not linked into the wasm.
//!
//! Natively [`platform`] is a compile-time choice; in the wasm the shell installs its engines
//! with [`install`] first thing at start, so the core never imports the shell.

use std::fmt;

/// A URL as the browser's parser serializes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedUrl {
    /// The whole serialization (`URL.href`).
    pub href: String,
    /// Lowercase, without the `:` (`URL.protocol` minus `:`).
    pub scheme: String,
    /// Canonical host, IPv6 in brackets; empty when there is none (`URL.hostname`).
    pub host: String,
    /// `None` when absent or the scheme's default (`URL.port`).
    pub port: Option<u16>,
    /// Path then `?query` when the URL has a query, even an empty one; never the fragment.
    pub path_query: String,
}

/// Why the browser refused a URL or a regular expression (its own message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebError(pub String);

impl fmt::Display for WebError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Pure computations the browser already has. Every method answers `Err` where the browser
/// throws; none may panic.
pub trait WebPlatform {
    /// `new URL(input)`.
    fn parse_url(&self, input: &str) -> Result<ParsedUrl, WebError>;
    /// `new RegExp(source, flags)` without using it.
    fn regex_compile_check(&self, source: &str, flags: &str) -> Result<(), WebError>;
    /// `new RegExp(source, flags).test(input)`.
    fn regex_test(&self, source: &str, flags: &str, input: &str) -> Result<bool, WebError>;
    /// `input.toLowerCase()`: Unicode's default lowercase mapping, as `str::to_lowercase`
    /// gives it, whose tables would cost the wasm ~8 KB gzip.
    fn lowercase(&self, input: &str) -> String;
    /// `new TextDecoder(label).decode(bytes)`: the text of `bytes` in the encoding `label` names
    /// (a `Content-Type`'s `charset`), as a `<script src>` would read it; `None` for a label no
    /// decoder knows.
    fn decode(&self, bytes: &[u8], label: &str) -> Option<String>;
}

/// `input` lowercased for a case-insensitive search: ASCII here, anything else by
/// [`WebPlatform::lowercase`].
pub fn lowercase(input: &str) -> String {
    if input.is_ascii() {
        input.to_ascii_lowercase()
    } else {
        platform().lowercase(input)
    }
}

/// `path + ("?" + query when there is one)` from a `URL`'s parts: `search` is empty both for no
/// query and for an empty one, so the serialization tells the two apart.
pub fn path_query(href: &str, pathname: &str, search: &str) -> String {
    let before_fragment = href.split('#').next().unwrap_or_default();
    let mut out = pathname.to_owned();
    if !search.is_empty() {
        out.push_str(search);
    } else if before_fragment.ends_with('?') {
        out.push('?');
    }
    out
}

#[cfg(target_arch = "wasm32")]
thread_local! {
    static INSTALLED: std::cell::Cell<Option<&'static dyn WebPlatform>> =
        const { std::cell::Cell::new(None) };
}

/// The shell's engines, installed first thing at start (the core never names the shell).
#[cfg(target_arch = "wasm32")]
pub fn install(platform: &'static dyn WebPlatform) {
    INSTALLED.with(|p| p.set(Some(platform)));
}

/// The platform of this build: in the wasm, the browser's engines the shell installed; before
/// that, one that refuses everything (so nothing matches, nothing panics).
#[cfg(target_arch = "wasm32")]
pub fn platform() -> &'static dyn WebPlatform {
    INSTALLED
        .with(std::cell::Cell::get)
        .unwrap_or(&NotInstalled)
}

/// Answers `Err` to everything: the shell has not installed the browser's engines.
#[cfg(target_arch = "wasm32")]
struct NotInstalled;

#[cfg(target_arch = "wasm32")]
impl WebPlatform for NotInstalled {
    fn parse_url(&self, _: &str) -> Result<ParsedUrl, WebError> {
        Err(not_installed())
    }
    fn regex_compile_check(&self, _: &str, _: &str) -> Result<(), WebError> {
        Err(not_installed())
    }
    fn regex_test(&self, _: &str, _: &str, _: &str) -> Result<bool, WebError> {
        Err(not_installed())
    }
    fn lowercase(&self, input: &str) -> String {
        input.to_ascii_lowercase()
    }
    fn decode(&self, _: &[u8], _: &str) -> Option<String> {
        None
    }
}

#[cfg(target_arch = "wasm32")]
fn not_installed() -> WebError {
    WebError("the browser's URL parser and RegExp are not installed yet".into())
}

/// The platform of this build: the browser's engines in the wasm, the crates natively.
#[cfg(not(target_arch = "wasm32"))]
pub fn platform() -> &'static dyn WebPlatform {
    &native::Native
}

#[cfg(not(target_arch = "wasm32"))]
pub mod native {
    //! The WHATWG URL rules (`url`) and ECMAScript regular expressions (`regress`), for builds
    //! that have no browser. Not linked into the wasm.
    use super::*;

    pub struct Native;

    impl WebPlatform for Native {
        fn parse_url(&self, input: &str) -> Result<ParsedUrl, WebError> {
            let u = url::Url::parse(input).map_err(|e| WebError(format!("Invalid URL: {e}")))?;
            let href = u.to_string();
            let mut path_query = u.path().to_owned();
            if let Some(q) = u.query() {
                path_query.push('?');
                path_query.push_str(q);
            }
            Ok(ParsedUrl {
                scheme: u.scheme().to_owned(),
                host: u.host_str().unwrap_or_default().to_owned(),
                port: u.port(),
                path_query,
                href,
            })
        }

        fn regex_compile_check(&self, source: &str, flags: &str) -> Result<(), WebError> {
            regress::Regex::with_flags(source, flags)
                .map(|_| ())
                .map_err(|e| WebError(e.to_string()))
        }

        fn regex_test(&self, source: &str, flags: &str, input: &str) -> Result<bool, WebError> {
            regress::Regex::with_flags(source, flags)
                .map(|re| re.find(input).is_some())
                .map_err(|e| WebError(e.to_string()))
        }

        fn lowercase(&self, input: &str) -> String {
            input.to_lowercase()
        }

        /// UTF-8 and the Latin-1 family alone (`windows-1252`, under every label the Encoding
        /// Standard gives it): enough for the tests; no native caller decodes anything else.
        fn decode(&self, bytes: &[u8], label: &str) -> Option<String> {
            const UTF8: [&str; 3] = ["utf-8", "utf8", "unicode-1-1-utf-8"];
            const LATIN1: [&str; 17] = [
                "ansi_x3.4-1968",
                "ascii",
                "cp1252",
                "cp819",
                "csisolatin1",
                "ibm819",
                "iso-8859-1",
                "iso-ir-100",
                "iso8859-1",
                "iso88591",
                "iso_8859-1",
                "iso_8859-1:1987",
                "l1",
                "latin1",
                "us-ascii",
                "windows-1252",
                "x-cp1252",
            ];
            // windows-1252's 0x80 to 0x9F; the five it leaves undefined are the C1 controls.
            const HIGH: [u16; 32] = [
                0x20AC, 0x81, 0x201A, 0x192, 0x201E, 0x2026, 0x2020, 0x2021, 0x2C6, 0x2030, 0x160,
                0x2039, 0x152, 0x8D, 0x17D, 0x8F, 0x90, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022,
                0x2013, 0x2014, 0x2DC, 0x2122, 0x161, 0x203A, 0x153, 0x9D, 0x17E, 0x178,
            ];
            let label = label.trim().to_ascii_lowercase();
            if UTF8.contains(&label.as_str()) {
                return Some(String::from_utf8_lossy(bytes).into_owned());
            }
            LATIN1.contains(&label.as_str()).then(|| {
                bytes
                    .iter()
                    .map(|&b| {
                        HIGH.get(usize::from(b).wrapping_sub(0x80))
                            .and_then(|&c| char::from_u32(u32::from(c)))
                            .unwrap_or(char::from(b))
                    })
                    .collect()
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_query_keeps_an_empty_query_and_drops_the_fragment() {
        assert_eq!(path_query("http://a/x?#f", "/x", ""), "/x?");
        assert_eq!(path_query("http://a/x#f?", "/x", ""), "/x");
        assert_eq!(path_query("http://a/x?q=1#f", "/x", "?q=1"), "/x?q=1");
    }

    #[test]
    fn native_answers_like_the_browser() {
        let w = platform();
        let u = w.parse_url("HTTPS://Example.COM:443/a/../b?#x").unwrap();
        assert_eq!(u.href, "https://example.com/b?#x");
        assert_eq!(
            (u.scheme.as_str(), u.host.as_str(), u.port),
            ("https", "example.com", None)
        );
        assert_eq!(u.path_query, "/b?");
        assert!(w.parse_url("http://256.256.256.256/").is_err());
        assert!(w.regex_compile_check("(", "").is_err());
        assert_eq!(w.regex_test("^a", "", "abc"), Ok(true));
        assert_eq!(w.regex_test("^a", "", "bac"), Ok(false));
        assert_eq!(lowercase("ÉCOLE Straße ΣΑΣ"), "école straße σας");
    }
}
