//! The code a registered script runs with for its `@require` and `@resource` files, from the
//! bytes stored when it was written (`gm::asset_store::load`): the `@require` code, put before
//! the source inside the same function (as Violentmonkey concatenates them, so a library's
//! top-level `var`s are the script's), and `GM_getResourceText` / `GM_getResourceURL` /
//! `GM.getResourceText` / `GM.getResourceUrl` for a script that grants them, over this script's
//! own resources only (a name it did not declare gives `null`).

use super::api;
use super::assets::Asset;
use serde_json::{json, Value};

/// A stored file with its bytes (`None`: missing from storage).
pub type Loaded = (Asset, Option<Vec<u8>>);

/// The `@require` code in order, each followed by `\n;\n` (a library ending in a line comment
/// or without a semicolon cannot swallow the next). A file missing from storage becomes a
/// `console.error` naming it: the script runs without it, visibly.
pub fn requires_block(loaded: &[Loaded]) -> String {
    let mut out = String::new();
    for (a, bytes) in loaded.iter().filter(|(a, _)| a.is_require()) {
        match bytes {
            Some(b) => out.push_str(&text_of(a, b)),
            None => out.push_str(&format!(
                "console.error({});",
                Value::String(format!(
                    "Lumo Userscripts: the stored copy of @require {} is missing, or lacks the hash its URL names; the script runs without it (change its @require line, as with ?v=2, to fetch it again)",
                    a.url
                ))
            )),
        }
        out.push_str("\n;\n");
    }
    out
}

/// A `@require` file's code as a `<script src>` answered with its `Content-Type` would read it:
/// a byte order mark first decides (the Encoding Standard's decode: a UTF-8 file saved with one
/// and served as `iso-8859-1` read `ï»¿` and threw), then the charset the answer named
/// (`Asset::charset`, through the browser's `TextDecoder`: the core carries no encoding
/// tables), else UTF-8, invalid sequences replaced, as before a label no decoder knows. The
/// review shows this text: it is what runs.
pub(crate) fn text_of<'a>(a: &Asset, b: &'a [u8]) -> std::borrow::Cow<'a, str> {
    if let [0xEF, 0xBB, 0xBF, rest @ ..] = b {
        return String::from_utf8_lossy(rest);
    }
    read_as(a, b)
        .and_then(|label| crate::web::platform().decode(b, label))
        .map_or_else(|| String::from_utf8_lossy(b), std::borrow::Cow::Owned)
}

/// The encoding [`text_of`] reads `b` in, when not UTF-8: a UTF-16 byte order mark's, else the
/// answer's charset.
pub(crate) fn read_as<'a>(a: &'a Asset, b: &[u8]) -> Option<&'a str> {
    match b {
        [0xEF, 0xBB, 0xBF, ..] => None,
        [0xFF, 0xFE, ..] => Some("utf-16le"),
        [0xFE, 0xFF, ..] => Some("utf-16be"),
        _ => a.charset.as_deref(),
    }
}

/// One line (no line break: it goes on the prelude's line) defining the resource functions the
/// grants name, with `d` and `G` in scope (`gm::inject::scoped`, whose `extra` it is); `""` when
/// none is granted.
pub fn getters_js(grants: &[String], loaded: &[Loaded]) -> String {
    let given = api::provided(grants);
    let text = given.contains(&"GM_getResourceText");
    let url = given.contains(&"GM_getResourceURL");
    if !text && !url {
        return String::new();
    }
    // A Map, not an object literal: a resource named "__proto__" is just a name.
    let entries: Vec<Value> = loaded
        .iter()
        .filter_map(|(a, b)| {
            let name = a.name.as_ref()?;
            let mime = if a.mime.is_empty() {
                "application/octet-stream"
            } else {
                a.mime.as_str()
            };
            Some(json!([
                name,
                [mime, b.as_deref().map(super::assets::encode), a.charset]
            ]))
        })
        .collect();
    let mut out = format!(
        "{{const R=new Map({}),B=n=>{{const r=R.get(String(n));return r&&r[1]!=null?r:null}};",
        Value::Array(entries)
    );
    if text {
        out.push_str(
            // As `requires_block` reads a `@require`: a byte order mark, else the answer's
            // charset (one no decoder knows: UTF-8).
            "const T=n=>{const r=B(n);if(!r)return null;\
             const b=Uint8Array.from(atob(r[1]),c=>c.charCodeAt(0));\
             let l=b[0]===239&&b[1]===187&&b[2]===191?'utf-8':b[0]===255&&b[1]===254?'utf-16le':\
             b[0]===254&&b[1]===255?'utf-16be':r[2]||'utf-8',t;\
             try{t=new TextDecoder(l)}catch(e){t=new TextDecoder()}return t.decode(b)};\
             d('GM_getResourceText',T);G.getResourceText=n=>Promise.resolve(T(n));",
        );
    }
    if url {
        out.push_str(
            "const U=n=>{const r=B(n);\
             return r?'data:'+r[0]+(r[2]?';charset='+r[2]:'')+';base64,'+r[1]:null};\
             d('GM_getResourceURL',U);G.getResourceUrl=n=>Promise.resolve(U(n));G.getResourceURL=U;",
        );
    }
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asset(name: Option<&str>, url: &str) -> Asset {
        Asset {
            url: url.into(),
            name: name.map(str::to_owned),
            sha256: String::new(),
            size: 0,
            mime: String::new(),
            final_url: None,
            charset: None,
        }
    }

    #[test]
    fn requires_come_in_order_separated_and_a_missing_one_says_so() {
        let loaded = vec![
            (
                asset(None, "https://a/1.js"),
                Some(b"var a = 1 // no newline".to_vec()),
            ),
            (
                asset(Some("css"), "https://a/x.css"),
                Some(b"body{}".to_vec()),
            ),
            (asset(None, "https://a/2.js"), None),
        ];
        let b = requires_block(&loaded);
        assert!(b.starts_with("var a = 1 // no newline\n;\n"));
        assert!(!b.contains("body{}"));
        assert!(b.contains("@require https://a/2.js is missing"));
        assert!(b.ends_with("\n;\n"));
    }

    /// A file served as `charset=iso-8859-1` is read as the browser reads it (`é` is one byte,
    /// 0xE9, and 0x80 is `€` in windows-1252, which that label names), not as UTF-8, which
    /// made them one U+FFFD. A label no decoder knows is read as UTF-8.
    #[test]
    fn a_require_is_read_in_the_charset_its_answer_named() {
        let latin = |charset: &str| Asset {
            charset: Some(charset.to_owned()),
            ..asset(None, "https://a/l.js")
        };
        let bytes = b"var s = '\xE9\x80';".to_vec();
        let b = requires_block(&[(latin("ISO-8859-1"), Some(bytes.clone()))]);
        assert!(b.starts_with("var s = '\u{e9}\u{20ac}';"), "{b}");
        let b = requires_block(&[(latin("x-no-such-charset"), Some(bytes.clone()))]);
        assert!(b.starts_with("var s = '\u{fffd}';"), "{b}");
        let b = requires_block(&[(asset(None, "https://a/l.js"), Some(bytes))]);
        assert!(b.starts_with("var s = '\u{fffd}';"), "{b}");
        // A byte order mark wins over the label, as in a `<script src>`: a UTF-8 file with one,
        // served as Latin-1, is read as UTF-8 (read as labelled it began `ï»¿` and threw).
        let bom = [&[0xEF, 0xBB, 0xBF][..], "var s = 'é';".as_bytes()].concat();
        let b = requires_block(&[(latin("iso-8859-1"), Some(bom))]);
        assert!(b.starts_with("var s = 'é';"), "{b}");
        // A resource carries its label to the page, which decodes it there (`TextDecoder`).
        let js = getters_js(
            &["GM_getResourceText".into()],
            &[(
                Asset {
                    name: Some("t".into()),
                    ..latin("gbk")
                },
                Some(b"x".to_vec()),
            )],
        );
        assert!(
            js.contains(r#"["t",["application/octet-stream","eA==","gbk"]]"#),
            "{js}"
        );
    }

    #[test]
    fn getters_only_for_granted_names_and_on_one_line() {
        let loaded = vec![(
            asset(Some("__proto__\n</script>"), "https://a/x.css"),
            Some(b"body{}".to_vec()),
        )];
        assert_eq!(getters_js(&["none".into()], &loaded), "");
        assert_eq!(getters_js(&["GM_addStyle".into()], &loaded), "");
        let js = getters_js(&["GM.getResourceUrl".into()], &loaded);
        assert!(js.contains("getResourceUrl") && !js.contains("GM_getResourceText"));
        assert!(!js.contains('\n') && js.contains("Ym9keXt9"));
        let js = getters_js(&["GM_getResourceText".into()], &loaded);
        assert!(js.contains("d('GM_getResourceText',T)") && !js.contains("GM_getResourceURL"));
    }
}
