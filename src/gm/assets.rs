//! `@require` and `@resource`: what a script's metadata asks to load, which of it must be fetched
//! when the script is written, and whether a fetched answer may be stored. Pure: the fetching is
//! `asset_store`'s (through the shell's `Http`), the deciding is here.
//!
//! A script's loaded files are part of its record ([`Asset`]: URL, sha256, size, type), so a
//! revision in the history names exactly the bytes it ran with; the bytes themselves are stored
//! once per content (`asset/<sha256>`, base64), shared by every revision and script that names
//! them. A URL the script's current record already holds is reused, never fetched again.

use crate::text::ellipsize;
use crate::web::WebPlatform;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256, Sha384, Sha512};
use std::fmt;

/// One file at most this big (raw bytes).
pub const MAX_ASSET_BYTES: usize = 1024 * 1024;
/// At most this many `@require` + `@resource` lines per script.
pub const MAX_ASSETS: usize = 16;
/// All of one script's files together, raw bytes.
pub const MAX_SCRIPT_ASSET_BYTES: usize = 2 * 1024 * 1024;
/// How long one fetch may take.
pub const FETCH_TIMEOUT_MS: u64 = 20_000;
/// How long all the fetches of one write may take together (they run under the write lock).
pub const WRITE_FETCH_BUDGET_MS: u64 = 30_000;
/// How long all the fetches of one import may take together, whatever the number of scripts:
/// as long as one write's, since they too run under the write lock (and every agent write
/// waits behind it).
pub const IMPORT_FETCH_BUDGET_MS: u64 = WRITE_FETCH_BUDGET_MS;

/// A file a stored script loads: what its record keeps (the bytes are under [`blob_key`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Asset {
    /// As written in the metadata (a hash fragment included).
    pub url: String,
    /// The `@resource` name; `None` for a `@require`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// sha256 (hex) of the bytes.
    pub sha256: String,
    pub size: usize,
    /// The response's `Content-Type` (without parameters), for `GM_getResourceURL`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mime: String,
    /// Where the bytes came from when a redirect moved the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_url: Option<String>,
    /// The `Content-Type`'s `charset` when it names one other than UTF-8 (`gm::charset`):
    /// the text is read in it, as a `<script src>` would read it (`gm::resources`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub charset: Option<String>,
}

impl Asset {
    pub fn is_require(&self) -> bool {
        self.name.is_none()
    }
}

/// The storage key of the bytes with this sha256.
pub fn blob_key(sha256: &str) -> String {
    format!("asset/{sha256}")
}

/// A file the metadata asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    pub url: String,
    pub name: Option<String>,
    /// The URL to fetch: the browser's serialization, without the fragment.
    pub fetch_url: String,
    pub pins: Vec<Pin>,
}

impl Wanted {
    pub(crate) fn label(&self) -> String {
        match &self.name {
            None => format!("@require {}", ellipsize(&self.url, 300)),
            Some(n) => format!(
                "@resource {} {}",
                ellipsize(n, 60),
                ellipsize(&self.url, 300)
            ),
        }
    }
}

/// A hash the URL's fragment names (`#sha256=<hex>`, `#sha384-<base64>` SRI style, several
/// separated by `,` `;` or spaces): the bytes must have it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    pub alg: Alg,
    pub digest: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alg {
    Sha256,
    Sha384,
    Sha512,
}

impl Alg {
    fn name(self) -> &'static str {
        match self {
            Alg::Sha256 => "sha256",
            Alg::Sha384 => "sha384",
            Alg::Sha512 => "sha512",
        }
    }

    fn digest(self, bytes: &[u8]) -> Vec<u8> {
        match self {
            Alg::Sha256 => Sha256::digest(bytes).to_vec(),
            Alg::Sha384 => Sha384::digest(bytes).to_vec(),
            Alg::Sha512 => Sha512::digest(bytes).to_vec(),
        }
    }

    fn len(self) -> usize {
        match self {
            Alg::Sha256 => 32,
            Alg::Sha384 => 48,
            Alg::Sha512 => 64,
        }
    }
}

/// Why a script's files cannot be stored; the write is refused and nothing is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AssetError {
    TooMany { count: usize },
    BadUrl { what: String, why: String },
    BadHash { what: String, why: String },
    Fetch { what: String, why: String },
    Status { what: String, status: u16 },
    TooLarge { what: String },
    ScriptTotal { size: usize },
    Mismatch { what: String, alg: &'static str },
    Quota { needed: usize, limit: usize },
    Storage(String),
}

impl AssetError {
    /// The message without "the script was not stored" (for `validate_script`).
    pub fn reason(&self) -> String {
        let s = self.to_string();
        s.strip_suffix("; the script was not stored")
            .map_or(s.clone(), str::to_owned)
    }
}

impl fmt::Display for AssetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tail = "the script was not stored";
        match self {
            AssetError::TooMany { count } => write!(
                f,
                "the script names {count} @require/@resource files, more than the {MAX_ASSETS} this provider loads; {tail}"
            ),
            AssetError::BadUrl { what, why } => write!(f, "{what}: {why}; {tail}"),
            AssetError::BadHash { what, why } => write!(f, "{what}: {why}; {tail}"),
            AssetError::Fetch { what, why } => {
                write!(f, "{what} could not be fetched ({why}); {tail}")
            }
            AssetError::Status { what, status } => {
                write!(f, "{what} could not be fetched (HTTP {status}); {tail}")
            }
            AssetError::TooLarge { what } => write!(
                f,
                "{what} is over the {MAX_ASSET_BYTES}-byte limit for one file; {tail}"
            ),
            AssetError::ScriptTotal { size } => write!(
                f,
                "the script's @require/@resource files are {size} bytes together, over the {MAX_SCRIPT_ASSET_BYTES}-byte limit; {tail}"
            ),
            AssetError::Mismatch { what, alg } => write!(
                f,
                "{what}: the fetched bytes do not have the {alg} the URL names (changed or tampered with); {tail}"
            ),
            AssetError::Quota { needed, limit } => write!(
                f,
                // 4 MiB: `scripts::history::MAX_TOTAL_BYTES` (which imports this module).
                "storing the script's files would use {needed} bytes of storage, over the {limit} this provider may use (the earlier versions kept for History and Undo may hold up to 4 MiB of it, the trash the deleted scripts'); {tail}"
            ),
            AssetError::Storage(e) => write!(f, "storage failed while storing the script's files ({e}); {tail}"),
        }
    }
}

/// The files `requires` and `resources` name, checked: count, scheme, hash fragment. Only
/// `https:` is fetched, and `http:` only from this computer (`localhost`, 127.0.0.0/8, `[::1]`):
/// code fetched in the clear from elsewhere could be anyone's.
pub fn wanted(
    web: &dyn WebPlatform,
    requires: &[String],
    resources: &[(String, String)],
) -> Result<Vec<Wanted>, AssetError> {
    let count = requires.len().saturating_add(resources.len());
    if count > MAX_ASSETS {
        return Err(AssetError::TooMany { count });
    }
    let items = requires
        .iter()
        .map(|u| (None, u))
        .chain(resources.iter().map(|(n, u)| (Some(n.clone()), u)));
    let mut out: Vec<Wanted> = Vec::with_capacity(count);
    for (name, url) in items {
        let mut w = Wanted {
            url: url.clone(),
            name,
            fetch_url: String::new(),
            pins: Vec::new(),
        };
        let (base, fragment) = match url.split_once('#') {
            Some((b, f)) => (b, Some(f)),
            None => (url.as_str(), None),
        };
        let parsed = web.parse_url(base).map_err(|e| AssetError::BadUrl {
            what: w.label(),
            why: format!("not an absolute URL ({e})"),
        })?;
        check_scheme(&parsed.scheme, &parsed.host).map_err(|why| AssetError::BadUrl {
            what: w.label(),
            why,
        })?;
        w.fetch_url = parsed.href;
        if let Some(f) = fragment {
            w.pins = pins(f).map_err(|why| AssetError::BadHash {
                what: w.label(),
                why,
            })?;
        }
        if let Some(n) = &w.name {
            if out.iter().any(|o| o.name.as_ref() == Some(n)) {
                return Err(AssetError::BadUrl {
                    what: w.label(),
                    why: format!("a second @resource named {:?}", ellipsize(n, 60)),
                });
            }
        }
        out.push(w);
    }
    Ok(out)
}

/// `https:` anywhere, `http:` only on this computer.
pub fn check_scheme(scheme: &str, host: &str) -> Result<(), String> {
    match scheme {
        "https" => Ok(()),
        "http" if super::connect::is_loopback(host) => Ok(()),
        "http" => Err(format!(
            "only https URLs are loaded (http only from this computer), not http://{}",
            ellipsize(host, 100)
        )),
        other => Err(format!(
            "only https URLs are loaded, not {}:",
            ellipsize(other, 20)
        )),
    }
}

/// The hashes a URL fragment names, as Tampermonkey and Violentmonkey write them: `sha256=<hex>`,
/// `sha-256=…`, `sha256-<base64>` (SRI), `sha256:…`, in any letter case, several separated by
/// `,` `;` `#` or spaces. A fragment that names no hash (`#top`) pins nothing; one that names
/// only algorithms this provider cannot check (`md5=`, `sha1=`, `sha3-256=`) is refused rather
/// than skipped, since its author asked for the check; beside one it can check
/// (`#md5=…,sha256=…`, as Tampermonkey's documentation writes it) such a hash is left out and
/// the others are checked.
pub fn pins(fragment: &str) -> Result<Vec<Pin>, String> {
    const CHECKED: [(&str, Option<Alg>); 15] = [
        ("sha-256", Some(Alg::Sha256)),
        ("sha256", Some(Alg::Sha256)),
        ("sha-384", Some(Alg::Sha384)),
        ("sha384", Some(Alg::Sha384)),
        ("sha-512", Some(Alg::Sha512)),
        ("sha512", Some(Alg::Sha512)),
        ("md5", None),
        ("sha-1", None),
        ("sha1", None),
        ("sha-224", None),
        ("sha224", None),
        ("sha3-224", None),
        ("sha3-256", None),
        ("sha3-384", None),
        ("sha3-512", None),
    ];
    let mut out = Vec::new();
    let mut unchecked = None;
    for part in fragment
        .split([',', ';', ' ', '#'])
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        // A name, then `=`, `-` (SRI) or `:`, then the hash (whose base64 may hold `=` or `-`).
        let named = CHECKED.iter().find(|(n, _)| {
            part.get(..n.len())
                .is_some_and(|p| p.eq_ignore_ascii_case(n))
                && matches!(part.get(n.len()..n.len() + 1), Some("=" | "-" | ":"))
        });
        let Some((name, alg)) = named else { continue };
        let Some(alg) = alg else {
            unchecked.get_or_insert(*name);
            continue;
        };
        let value = part.get(name.len() + 1..).unwrap_or("");
        let digest = decode_digest(value, alg.len())
            .ok_or_else(|| format!("the {} in the URL is not a valid hash", alg.name()))?;
        out.push(Pin { alg: *alg, digest });
    }
    match (unchecked, out.is_empty()) {
        (Some(alg), true) => Err(format!(
            "the URL names a {alg} hash; only sha256, sha384 and sha512 (#sha256=<hex> or #sha256-<base64>) are checked"
        )),
        _ => Ok(out),
    }
}

fn decode_digest(v: &str, len: usize) -> Option<Vec<u8>> {
    if v.len() == len.checked_mul(2)? && v.bytes().all(|b| b.is_ascii_hexdigit()) {
        let bytes: Option<Vec<u8>> = (0..len)
            .map(|i| u8::from_str_radix(v.get(i * 2..i * 2 + 2)?, 16).ok())
            .collect();
        return bytes;
    }
    // Padding as written or left out (SRI's grammar makes it optional), either alphabet.
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    let loose =
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
    let d = GeneralPurpose::new(&base64::alphabet::STANDARD, loose)
        .decode(v)
        .or_else(|_| GeneralPurpose::new(&base64::alphabet::URL_SAFE, loose).decode(v))
        .ok()?;
    (d.len() == len).then_some(d)
}

/// What a write does about each wanted file: reuse what the current record stores for the same
/// URL (and name), or fetch it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Reuse(Asset),
    /// Reused once the stored bytes pass the URL's sha384/sha512 pins, which the record cannot
    /// answer (its digest is sha256); else fetched.
    Check(Asset, Wanted),
    Fetch(Wanted),
}

/// Each wanted file's step. A stored file is reused only where its record holds every pin the
/// URL names: the URL is the same, but the file may have been stored by a version that did
/// not read those pins (`sha-256=` was not read before), and its bytes must have them.
pub fn plan(wanted: Vec<Wanted>, current: &[Asset]) -> Vec<Step> {
    wanted
        .into_iter()
        .map(
            |w| match current.iter().find(|a| a.url == w.url && a.name == w.name) {
                Some(a) => {
                    let sha256 = w
                        .pins
                        .iter()
                        .filter(|p| p.alg == Alg::Sha256)
                        .all(|p| crate::guard::digest::hex_lower(&p.digest) == a.sha256);
                    if !sha256 {
                        Step::Fetch(w)
                    } else if w.pins.iter().any(|p| p.alg != Alg::Sha256) {
                        Step::Check(a.clone(), w)
                    } else {
                        Step::Reuse(a.clone())
                    }
                }
                None => Step::Fetch(w),
            },
        )
        .collect()
}

/// Whether stored bytes have every hash `w`'s URL names.
pub fn pins_hold(w: &Wanted, bytes: &[u8]) -> bool {
    w.pins.iter().all(|p| p.alg.digest(bytes) == p.digest)
}

/// Whether `bytes` have every hash the stored URL `url` (as written, fragment included) names;
/// a fragment that names only hashes this provider cannot check holds nothing.
pub fn url_pins_hold(url: &str, bytes: &[u8]) -> bool {
    match url.split_once('#') {
        None => true,
        Some((_, fragment)) => {
            pins(fragment).is_ok_and(|ps| ps.iter().all(|p| p.alg.digest(bytes) == p.digest))
        }
    }
}

/// What the fetch answered (the env's `HttpResponse`, as far as this module reads it). One
/// answer serves every script of a write that names its URL, so the bytes are shared and their
/// sha256 is taken once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub final_url: String,
    pub headers: Vec<(String, String)>,
    pub body: std::rc::Rc<Vec<u8>>,
    /// sha256 (hex) of `body`.
    pub sha256: String,
}

/// A fetched file checked for `w`: status, size, where it ended up, the URL's hashes. The bytes
/// to store are the answer's.
pub fn verify(web: &dyn WebPlatform, w: &Wanted, resp: &Answer) -> Result<Asset, AssetError> {
    if !(200..300).contains(&resp.status) {
        return Err(AssetError::Status {
            what: w.label(),
            status: resp.status,
        });
    }
    if resp.body.len() > MAX_ASSET_BYTES {
        return Err(AssetError::TooLarge { what: w.label() });
    }
    // A redirect may move the request, never to a place this provider would not fetch from.
    let final_url = if resp.final_url.is_empty() || resp.final_url == w.fetch_url {
        None
    } else {
        let f = web
            .parse_url(&resp.final_url)
            .map_err(|e| AssetError::BadUrl {
                what: w.label(),
                why: format!("redirected to an unreadable URL ({e})"),
            })?;
        check_scheme(&f.scheme, &f.host).map_err(|why| AssetError::BadUrl {
            what: w.label(),
            why: format!("redirected to {}: {why}", ellipsize(&f.href, 200)),
        })?;
        Some(f.href)
    };
    for p in &w.pins {
        if p.alg.digest(&resp.body) != p.digest {
            return Err(AssetError::Mismatch {
                what: w.label(),
                alg: p.alg.name(),
            });
        }
    }
    let mime = resp
        .headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        .map(|(_, v)| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .filter(|m| {
            m.len() <= 100
                && m.contains('/')
                && m.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"/+-.".contains(&b))
        })
        .unwrap_or_default();
    Ok(Asset {
        url: w.url.clone(),
        name: w.name.clone(),
        sha256: resp.sha256.clone(),
        size: resp.body.len(),
        mime,
        final_url,
        charset: super::charset::other_charset(&resp.headers),
    })
}

/// Redirects followed for one file at most, as `fetch` would.
pub const MAX_REDIRECTS: usize = 20;

/// Where a redirect of `w`'s fetch leads, if this provider would fetch from there; judged before
/// anything is requested there. A hop is held to what a URL in the metadata is held to
/// ([`check_scheme`]), and may not move from another host onto this computer: loopback `http:`
/// is allowed for a URL the script names, which the user sees, not for one a server picks.
/// `from`: the URL that answered with the redirect; `hops`: redirects followed so far.
pub fn follow(
    web: &dyn WebPlatform,
    w: &Wanted,
    from: &str,
    location: &str,
    hops: usize,
) -> Result<String, AssetError> {
    redirect_target(web, from, location, hops).map_err(|why| AssetError::BadUrl {
        what: w.label(),
        why,
    })
}

/// [`follow`]'s judgement of one redirect, for any fetch held to the `@require` rules (a
/// script update's too): where it leads, or why it is not followed.
pub fn redirect_target(
    web: &dyn WebPlatform,
    from: &str,
    location: &str,
    hops: usize,
) -> Result<String, String> {
    let refused = |to: &str, why: String| {
        format!(
            "redirected to {}: {why}; the redirect was not followed",
            ellipsize(to, 200)
        )
    };
    if hops >= MAX_REDIRECTS {
        return Err(refused(
            location,
            format!("more than {MAX_REDIRECTS} redirects"),
        ));
    }
    let to = web
        .parse_url(location)
        .map_err(|_| refused(location, "not a URL".into()))?;
    check_scheme(&to.scheme, &to.host).map_err(|why| refused(&to.href, why))?;
    let from = web.parse_url(from).map(|f| f.host).unwrap_or_default();
    match super::connect::inward(&from, &to.host) {
        Some(super::connect::Inward::ThisComputer) => Err(refused(
            &to.href,
            "a server elsewhere may not lead a fetch onto this computer".into(),
        )),
        Some(super::connect::Inward::LocalNetwork) => Err(refused(
            &to.href,
            "a server on the internet may not lead a fetch into your local network".into(),
        )),
        None => Ok(to.href),
    }
}

/// The per-script total, checked once every file is known.
pub fn check_total(assets: &[Asset]) -> Result<(), AssetError> {
    let size = assets
        .iter()
        .map(|a| a.size)
        .fold(0usize, usize::saturating_add);
    if size > MAX_SCRIPT_ASSET_BYTES {
        return Err(AssetError::ScriptTotal { size });
    }
    Ok(())
}

pub fn encode(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

pub fn decode(text: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::web::platform;

    fn resp(status: u16, body: &[u8], final_url: &str) -> Answer {
        Answer {
            status,
            final_url: final_url.into(),
            headers: vec![("Content-Type".into(), "text/css; charset=utf-8".into())],
            body: std::rc::Rc::new(body.to_vec()),
            sha256: crate::guard::digest::sha256_hex(body),
        }
    }

    fn one(url: &str) -> Result<Wanted, AssetError> {
        wanted(platform(), &[url.to_owned()], &[]).map(|mut v| v.remove(0))
    }

    #[test]
    fn only_https_and_loopback_http_are_fetched() {
        assert!(one("https://cdn.example/lib.js").is_ok());
        assert!(one("http://127.0.0.1:8080/lib.js").is_ok());
        assert!(one("http://localhost/lib.js").is_ok());
        for bad in [
            "http://cdn.example/lib.js",
            "ftp://cdn.example/lib.js",
            "data:text/javascript,alert(1)",
            "javascript:alert(1)",
            "file:///etc/passwd",
            "lib.js",
        ] {
            let e = one(bad).unwrap_err();
            assert!(matches!(e, AssetError::BadUrl { .. }), "{bad}: {e}");
            assert!(e.to_string().contains("not stored"), "{e}");
        }
    }

    #[test]
    fn count_and_duplicate_resource_names_are_refused_before_anything_is_fetched() {
        let many: Vec<String> = (0..17)
            .map(|i| format!("https://a.example/{i}.js"))
            .collect();
        assert_eq!(
            wanted(platform(), &many, &[]),
            Err(AssetError::TooMany { count: 17 })
        );
        let r = [
            ("a".to_owned(), "https://x.example/1".to_owned()),
            ("a".to_owned(), "https://x.example/2".to_owned()),
        ];
        assert!(wanted(platform(), &[], &r).is_err());
    }

    #[test]
    fn hash_fragments_pin_the_bytes() {
        let body = b"window.lib = 1;";
        let hex = crate::guard::digest::sha256_hex(body);
        let sri = encode(&Sha384::digest(body));
        for url in [
            format!("https://a.example/l.js#sha256={hex}"),
            format!("https://a.example/l.js#sha384-{sri}"),
            format!("https://a.example/l.js#sha256={hex},sha384-{sri}"),
            "https://a.example/l.js#top".to_owned(),
        ] {
            let w = one(&url).unwrap();
            assert_eq!(w.fetch_url, "https://a.example/l.js");
            let a = verify(platform(), &w, &resp(200, body, &w.fetch_url)).unwrap();
            assert_eq!(a.sha256, hex);
            assert_eq!(a.size, body.len());
            assert_eq!(a.url, url);
        }
        let w = one(&format!("https://a.example/l.js#sha256={hex}")).unwrap();
        let e = verify(platform(), &w, &resp(200, b"window.lib = 2;", &w.fetch_url)).unwrap_err();
        assert_eq!(
            e,
            AssetError::Mismatch {
                what: "@require https://a.example/l.js#sha256=".to_owned() + &hex,
                alg: "sha256"
            }
        );
        assert!(matches!(
            one("https://a.example/l.js#md5=0123456789abcdef0123456789abcdef"),
            Err(AssetError::BadHash { .. })
        ));
        // Beside a hash it can check, one it cannot is left out, and the other checked.
        for sep in [",", ";"] {
            let url = format!(
                "https://a.example/l.js#md5=0123456789abcdef0123456789abcdef{sep}sha256={hex}"
            );
            let w = one(&url).unwrap();
            assert!(verify(platform(), &w, &resp(200, body, &w.fetch_url)).is_ok());
            let e = verify(platform(), &w, &resp(200, b"window.lib = 2;", &w.fetch_url));
            assert!(
                matches!(e, Err(AssetError::Mismatch { alg: "sha256", .. })),
                "{e:?}"
            );
        }
        assert!(matches!(
            one("https://a.example/l.js#sha256=nothex"),
            Err(AssetError::BadHash { .. })
        ));
        // Every way the managers write one is checked: with a hyphen in the name, another
        // separator, after another fragment part, SRI base64 with its padding.
        let b64 = encode(&Sha256::digest(body));
        assert!(b64.ends_with('='), "{b64}");
        let sri512 = encode(&Sha512::digest(body));
        for pin in [
            format!("sha-256={hex}"),
            format!("SHA-256={hex}"),
            format!("sha256:{hex}"),
            format!("x#sha256={hex}"),
            format!("sha256-{b64}"),
            // SRI's padding is optional; base64url's alphabet is read too.
            format!("sha256-{}", b64.trim_end_matches('=')),
            format!(
                "sha256={}",
                b64.trim_end_matches('=')
                    .replace('+', "-")
                    .replace('/', "_")
            ),
            format!("sha-512={sri512}"),
            format!("md5=0123456789abcdef0123456789abcdef,sha-256={hex}"),
        ] {
            let w = one(&format!("https://a.example/l.js#{pin}")).unwrap();
            assert_eq!(w.pins.len(), 1, "{pin}");
            assert!(
                verify(platform(), &w, &resp(200, body, &w.fetch_url)).is_ok(),
                "{pin}"
            );
            let e = verify(platform(), &w, &resp(200, b"window.lib = 2;", &w.fetch_url));
            assert!(
                matches!(e, Err(AssetError::Mismatch { .. })),
                "{pin}: {e:?}"
            );
        }
        // Only hashes it cannot check: refused, named.
        for (pin, named) in [
            ("sha-1=0000000000000000000000000000000000000000", "sha-1"),
            ("SHA1-AAAA", "sha1"),
            ("sha3-256=00", "sha3-256"),
        ] {
            let e = one(&format!("https://a.example/l.js#{pin}")).unwrap_err();
            assert!(
                e.to_string().contains(&format!("names a {named} hash")),
                "{pin}: {e}"
            );
        }
    }

    #[test]
    fn a_stored_file_is_reused_only_where_its_record_holds_the_urls_pins() {
        let body = b"window.lib = 1;";
        let hex = crate::guard::digest::sha256_hex(body);
        let stored = |url: &str, sha256: &str| Asset {
            url: url.to_owned(),
            name: None,
            sha256: sha256.to_owned(),
            size: body.len(),
            mime: String::new(),
            final_url: None,
            charset: None,
        };
        // Stored under a pin an earlier version did not read: the bytes are other.
        let url = format!("https://a.example/l.js#sha-256={hex}");
        let other = crate::guard::digest::sha256_hex(b"evil");
        let w = wanted(platform(), std::slice::from_ref(&url), &[]).unwrap();
        assert!(matches!(
            &plan(w.clone(), &[stored(&url, &other)])[0],
            Step::Fetch(_)
        ));
        assert!(matches!(&plan(w, &[stored(&url, &hex)])[0], Step::Reuse(_)));
        // A sha512 pin: the record cannot say; the stored bytes are checked.
        let url = format!(
            "https://a.example/l.js#sha-512={}",
            encode(&Sha512::digest(body))
        );
        let w = wanted(platform(), std::slice::from_ref(&url), &[]).unwrap();
        let Step::Check(_, w) = &plan(w, &[stored(&url, &hex)])[0] else {
            panic!("not checked");
        };
        assert!(pins_hold(w, body));
        assert!(!pins_hold(w, b"evil"));
        // Registration holds stored bytes to their URL's pins too.
        assert!(url_pins_hold(&url, body));
        assert!(!url_pins_hold(&url, b"evil"));
        assert!(url_pins_hold("https://a.example/l.js#top", b"evil"));
        assert!(url_pins_hold("https://a.example/l.js", b"evil"));
    }

    #[test]
    fn status_size_and_redirects_are_checked() {
        let w = one("https://a.example/l.js").unwrap();
        let e = verify(platform(), &w, &resp(404, b"", &w.fetch_url)).unwrap_err();
        assert!(e.to_string().contains("https://a.example/l.js"), "{e}");
        assert!(e.to_string().contains("HTTP 404"), "{e}");
        let big = vec![b'x'; MAX_ASSET_BYTES + 1];
        assert!(matches!(
            verify(platform(), &w, &resp(200, &big, &w.fetch_url)),
            Err(AssetError::TooLarge { .. })
        ));
        // Redirected to cleartext on another host: refused.
        let e = verify(platform(), &w, &resp(200, b"x", "http://evil.example/l.js")).unwrap_err();
        assert!(
            e.to_string()
                .contains("redirected to http://evil.example/l.js"),
            "{e}"
        );
        // Redirected to another https host: stored, and the record says where from.
        let a = verify(platform(), &w, &resp(200, b"x", "https://b.example/l.js")).unwrap();
        assert_eq!(a.final_url.as_deref(), Some("https://b.example/l.js"));
        assert_eq!(a.mime, "text/css");
    }

    #[test]
    fn a_redirect_is_judged_like_a_metadata_url_before_it_is_followed() {
        let w = one("https://cdn.example/l.js").unwrap();
        let web = platform();
        let from = "https://cdn.example/l.js";
        // Another https host: followed, as the browser serializes it.
        assert_eq!(
            follow(web, &w, from, "https://b.example/x/../l.js", 0).unwrap(),
            "https://b.example/l.js"
        );
        // Refused before anything is requested there, each naming where it led.
        for (to, why) in [
            ("http://intranet.example/l.js", "only https URLs are loaded"),
            ("http://192.168.1.1/admin", "only https URLs are loaded"),
            ("ftp://cdn.example/l.js", "only https URLs are loaded"),
            ("http://127.0.0.1:9222/json", "onto this computer"),
            ("https://localhost/l.js", "onto this computer"),
            ("https://192.168.1.1/admin", "into your local network"),
            ("https://10.0.0.1/", "into your local network"),
            ("https://172.31.255.1/", "into your local network"),
            ("https://100.64.0.1/", "into your local network"),
            (
                "https://169.254.169.254/latest/meta-data/",
                "into your local network",
            ),
            ("https://[fd00::1]/", "into your local network"),
            ("https://[fe80::1]/", "into your local network"),
            ("https://[::ffff:192.168.0.1]/", "into your local network"),
            ("https://router/", "into your local network"),
            ("https://nas.local./", "into your local network"),
            ("https://printer.home.arpa/", "into your local network"),
            ("https://git.corp/l.js", "into your local network"),
            ("https://nas.localdomain/l.js", "into your local network"),
            ("https://[::192.168.0.1]/", "into your local network"),
            ("https://[64:ff9b::10.0.0.1]/", "into your local network"),
            ("not a url", "not a URL"),
        ] {
            let e = follow(web, &w, from, to, 0).unwrap_err().to_string();
            assert!(
                e.contains("@require https://cdn.example/l.js")
                    && e.contains("redirected to")
                    && e.contains(why)
                    && e.contains("not followed")
                    && e.ends_with("the script was not stored"),
                "{to}: {e}"
            );
        }
        // From this computer, on this computer: as a metadata URL may be.
        let local = one("http://127.0.0.1:8080/l.js").unwrap();
        assert_eq!(
            follow(
                web,
                &local,
                "http://127.0.0.1:8080/l.js",
                "http://localhost:8081/m.js",
                0
            )
            .unwrap(),
            "http://localhost:8081/m.js"
        );
        // Public addresses that look near are public: followed.
        for to in [
            "https://172.32.0.1/",
            "https://100.128.0.1/",
            "https://[2001:db8::1]/",
            "https://locality.example/",
        ] {
            assert!(follow(web, &w, from, to, 0).is_ok(), "{to}");
        }
        // From the local network, within it: as a metadata URL naming it may be.
        let lan = one("https://nas.local/l.js").unwrap();
        assert!(follow(
            web,
            &lan,
            "https://nas.local/l.js",
            "https://10.0.0.2/m.js",
            0
        )
        .is_ok());
        // The bound: the 21st redirect is not followed.
        assert!(follow(web, &w, from, "https://b.example/", MAX_REDIRECTS - 1).is_ok());
        let e = follow(web, &w, from, "https://b.example/", MAX_REDIRECTS).unwrap_err();
        assert!(e.to_string().contains("more than 20 redirects"), "{e}");
    }

    #[test]
    fn an_unchanged_url_is_reused_a_new_one_fetched() {
        let stored = Asset {
            url: "https://a.example/l.js".into(),
            name: None,
            sha256: "00".into(),
            size: 1,
            mime: String::new(),
            final_url: None,
            charset: None,
        };
        let w = wanted(
            platform(),
            &[
                "https://a.example/l.js".into(),
                "https://a.example/m.js".into(),
            ],
            &[("l".into(), "https://a.example/l.js".into())],
        )
        .unwrap();
        let steps = plan(w, std::slice::from_ref(&stored));
        assert_eq!(steps[0], Step::Reuse(stored));
        assert!(matches!(&steps[1], Step::Fetch(w) if w.url.ends_with("m.js")));
        // The same URL as a resource is another file (a name), fetched on its own.
        assert!(matches!(&steps[2], Step::Fetch(w) if w.name.as_deref() == Some("l")));
    }

    #[test]
    fn hostile_fragments_and_urls_are_answered_never_a_panic() {
        for f in [
            "",
            "=",
            "-",
            "sha256",
            "sha256=",
            "sha256-",
            "sha384=é",
            "sha512-@@@@",
            "SHA256=00",
            "sha256=\u{0}",
            "md5",
            ",,,;;;   ",
            "sha256=é€𝄞",
            "x=y-z",
            "sha1-AAAA",
        ] {
            let _ = pins(f);
            let _ = wanted(platform(), &[format!("https://a.example/#{f}")], &[]);
        }
        for u in [
            "",
            "#",
            "https://",
            "https://[::1",
            "https://a.example/\u{2028}",
            "\u{feff}https://a/",
        ] {
            let _ = wanted(platform(), &[u.to_owned()], &[(u.to_owned(), u.to_owned())]);
        }
        // An upper-case algorithm name is the same algorithm.
        let hex = crate::guard::digest::sha256_hex(b"x");
        assert_eq!(pins(&format!("SHA256={hex}")).unwrap().len(), 1);
    }

    #[test]
    fn the_script_total_is_bounded() {
        let a = |size| Asset {
            url: String::new(),
            name: None,
            sha256: String::new(),
            size,
            mime: String::new(),
            final_url: None,
            charset: None,
        };
        assert!(check_total(&[a(MAX_ASSET_BYTES), a(MAX_ASSET_BYTES)]).is_ok());
        assert!(check_total(&[a(MAX_ASSET_BYTES), a(MAX_ASSET_BYTES), a(1)]).is_err());
        assert!(check_total(&[a(usize::MAX), a(usize::MAX)]).is_err());
    }
}
