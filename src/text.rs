//! Small text helpers for messages that quote untrusted input.

/// The first `max` characters of `s`, with `…` when cut: error messages quote bad input without
/// echoing a megabyte back.
pub fn ellipsize(s: &str, max: usize) -> String {
    let mut chars = s.char_indices();
    match chars.nth(max) {
        None => s.to_owned(),
        Some((cut, _)) => format!("{}…", s.get(..cut).unwrap_or("")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_on_char_boundaries() {
        assert_eq!(ellipsize("abc", 3), "abc");
        assert_eq!(ellipsize("abcd", 3), "abc…");
        assert_eq!(ellipsize("ééé", 2), "éé…");
        assert_eq!(ellipsize("", 0), "");
    }
}
