//! The `charset` an answer's `Content-Type` names (a leaf: `xhr` and `assets` both read it).

/// The `charset` of the answer's `Content-Type` when it names one other than UTF-8 (`GBK`,
/// `Shift_JIS`, `windows-1251`): such a text answer goes to the page as its bytes with that
/// label, and the page decodes it (`TextDecoder`, as `XMLHttpRequest` would; the core carries
/// no encoding tables). A label that is not a plain token (at most 40 characters of letters,
/// digits, `-`, `_`, `.`, `:`) is not one any decoder knows: read as UTF-8.
pub fn other_charset(headers: &[(String, String)]) -> Option<String> {
    let ct = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        .map(|(_, v)| v.as_str())?;
    let label = ct.split(';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| v.trim().trim_matches(|c| c == '"' || c == '\''))
    })?;
    let plain = !label.is_empty()
        && label.len() <= 40
        && label
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'));
    let utf8 = ["utf-8", "utf8", "unicode-1-1-utf-8"]
        .iter()
        .any(|u| label.eq_ignore_ascii_case(u));
    (plain && !utf8).then(|| label.to_owned())
}
