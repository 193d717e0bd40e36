//! Glob matching with Chrome's exact semantics, for `@include`/`@exclude`
//! (`chrome.userScripts` `includeGlobs`/`excludeGlobs`) and for match-pattern paths.
//!
//! Chrome matches globs with `base::MatchPattern` (base/strings/pattern.cc) against the full
//! URL spec. Its rules, reproduced here so our predictions agree with what Chrome injects:
//! - `*` matches any run of characters (including none);
//! - `?` matches **zero or one** character (not exactly one), and `n` consecutive `?` match up
//!   to `n` characters;
//! - `\` escapes the next character (so `\*` is a literal star);
//! - everything else matches itself, case-sensitively, per Unicode scalar value.
//!
//! Chrome commits to the leftmost occurrence of each literal run that follows a wildcard (it
//! does not backtrack into earlier wildcards). For `*`-only globs that is the same as full glob
//! matching; with `?` a few exotic globs match less than a backtracking matcher would, and we
//! reproduce that on purpose. The loop is iterative: O(len(glob) * len(text)) at worst, never
//! exponential, no recursion.

/// Does `text` match `glob` under Chrome's `base::MatchPattern` rules (see module docs)?
pub fn glob_matches(glob: &str, text: &str) -> bool {
    // Indexing chars (not bytes) keeps `?` = one Unicode character, as in Chrome, and lets every
    // access go through `get` without char-boundary concerns.
    let pattern: Vec<char> = glob.chars().collect();
    let string: Vec<char> = text.chars().collect();
    let mut p = 0usize;
    let mut s = 0usize;
    loop {
        let max_distance = eat_wildcards(&pattern, &mut p);
        if !search_for_chars(&pattern, &mut p, &string, &mut s, max_distance) {
            return false;
        }
        if p >= pattern.len() {
            return true;
        }
    }
}

/// Skips a run of `*`/`?`. Returns how far the following literal run may start from the current
/// text position: `None` (unbounded) if the run holds a `*`, else the number of `?`.
fn eat_wildcards(pattern: &[char], p: &mut usize) -> Option<usize> {
    let mut question_marks = 0usize;
    let mut star = false;
    while let Some(&c) = pattern.get(*p) {
        match c {
            '?' => question_marks = question_marks.saturating_add(1),
            '*' => star = true,
            _ => break,
        }
        *p += 1;
    }
    if star {
        None
    } else {
        Some(question_marks)
    }
}

/// Finds the literal run starting at `p` (up to the next unescaped wildcard or the end) in
/// `string` at an offset of at most `max_distance` characters from `s`. On success `p` and `s`
/// sit just past the run. At the end of the pattern the run must also end the text.
fn search_for_chars(
    pattern: &[char],
    p: &mut usize,
    string: &[char],
    s: &mut usize,
    mut max_distance: Option<usize>,
) -> bool {
    let pattern_start = *p;
    let mut string_start = *s;
    // Like Chrome, `escape` survives a restart; it can only be set there by a trailing `\`.
    let mut escape = false;
    loop {
        match pattern.get(*p) {
            None => {
                if *s >= string.len() {
                    return true;
                }
            }
            Some(&pc) => {
                if !escape && (pc == '*' || pc == '?') {
                    return true;
                }
                if !escape && pc == '\\' {
                    escape = true;
                    *p += 1;
                    continue;
                }
                escape = false;
                match string.get(*s) {
                    None => return false,
                    Some(&sc) if sc == pc => {
                        *p += 1;
                        *s += 1;
                        continue;
                    }
                    Some(_) => {}
                }
            }
        }
        // Mismatch: retry the run one character further along, if the wildcard allows it. We
        // only get here with `*s < string.len()`, so `string_start` stays within the text and
        // the loop ends after at most `string.len()` restarts.
        match max_distance.as_mut() {
            Some(0) => return false,
            Some(d) => *d -= 1,
            None => {}
        }
        *p = pattern_start;
        string_start += 1;
        *s = string_start;
    }
}

#[cfg(test)]
mod tests {
    use super::glob_matches;

    #[test]
    fn chrome_pattern_unittest_cases() {
        // base/strings/pattern_unittest.cc, argument order swapped (glob, text).
        assert!(glob_matches("*.com", "www.google.com"));
        assert!(glob_matches("*", "www.google.com"));
        assert!(!glob_matches("www*.g*.org", "www.google.com"));
        assert!(glob_matches("H?l?o", "Hello"));
        assert!(!glob_matches("http://*)", "www.google.com"));
        assert!(!glob_matches("*.COM", "www.msn.com"));
        assert!(glob_matches("He??o\\*1*", "Hello*1234"));
        assert!(!glob_matches("*.*", ""));
        assert!(glob_matches("*", ""));
        assert!(glob_matches("?", ""));
        assert!(glob_matches("", ""));
        assert!(!glob_matches("", "Hello"));
        assert!(glob_matches("Hello*", "Hello*"));
        assert!(glob_matches("*???", "abcd"));
        assert!(!glob_matches("???", "abcd"));
        assert!(glob_matches("a*b", "abcb"));
        assert!(!glob_matches("a?b", "abcb"));
        assert!(glob_matches("*\u{2660}", "heart: \u{2660}"));
        assert!(glob_matches("heart: ?.", "heart: \u{2660}."));
        assert!(glob_matches("*", "hearts: \u{2660}\u{2660}"));
        assert!(glob_matches("invalid: ?", "invalid: \u{fffe}"));
        assert!(glob_matches("He********************************o", "Hello"));
        assert!(glob_matches("?????????????????*", "123456789012345678"));
        assert!(glob_matches("a*a*a*a*a*a*a*a*a*a*a*b", "aaaaaaaaaaab"));
    }

    #[test]
    fn question_mark_is_zero_or_one_char() {
        assert!(glob_matches("ab?c", "abc"));
        assert!(glob_matches("ab?c", "abxc"));
        assert!(!glob_matches("ab?c", "abxyc"));
        assert!(glob_matches("ab??c", "abxyc"));
        assert!(glob_matches("a?", "a"));
        assert!(glob_matches("a?", "ab"));
        assert!(!glob_matches("a?", "abc"));
    }

    #[test]
    fn url_globs() {
        let g = "https://*.example.com/*";
        assert!(glob_matches(g, "https://www.example.com/"));
        assert!(glob_matches(g, "https://a.b.example.com/x?y#z"));
        assert!(!glob_matches(g, "https://example.com/"));
        assert!(!glob_matches(g, "http://www.example.com/"));
        assert!(glob_matches("*example*", "https://example.org/"));
        assert!(glob_matches("*://*/*", "file:///tmp/a.html"));
        assert!(glob_matches(
            "https://example.com/*bar",
            "https://example.com/foo/bar"
        ));
        assert!(glob_matches(
            "https://example.com/*bar",
            "https://example.com/barbar"
        ));
        assert!(!glob_matches(
            "https://example.com/*bar",
            "https://example.com/bar/"
        ));
    }

    #[test]
    fn escapes() {
        assert!(glob_matches("a\\*b", "a*b"));
        assert!(!glob_matches("a\\*b", "axb"));
        assert!(glob_matches("a\\?b", "a?b"));
        assert!(!glob_matches("a\\?b", "ab"));
        assert!(glob_matches("a\\\\b", "a\\b"));
        // A trailing backslash escapes nothing...
        assert!(glob_matches("ab\\", "ab"));
        // ...but, as in Chrome, its escape flag leaks into the retry after `*`, which then
        // wants a literal backslash. Reproduced, not fixed: we predict what Chrome does.
        assert!(!glob_matches("*\\", "xyz"));
        assert!(glob_matches("*\\", "x\\"));
    }

    #[test]
    fn leftmost_commit_like_chrome() {
        // A backtracking matcher would accept this (`*`="ab", `?`=""), Chrome does not.
        assert!(!glob_matches("*a?c", "abac"));
        assert!(glob_matches("*a*c", "abac"));
    }

    #[test]
    fn pathological_inputs_stay_fast() {
        let text = "a".repeat(20_000);
        let glob = format!("{}b", "*a".repeat(1_000));
        let start = std::time::Instant::now();
        assert!(!glob_matches(&glob, &text));
        assert!(glob_matches(&"*".repeat(50_000), &text));
        assert!(!glob_matches(&"?".repeat(10_000), &text));
        assert!(start.elapsed().as_secs() < 5);
    }

    #[test]
    fn no_panics_on_odd_inputs() {
        let samples = [
            "", "*", "?", "\\", "\\\\", "*?\\", "?*", "é*ü?", "\u{0}", "[a-z]",
        ];
        for g in samples {
            for t in samples {
                let _ = glob_matches(g, t);
            }
        }
    }
}
