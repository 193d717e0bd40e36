//! Names a person reads (`@name`, `@namespace`): what is shown, how long it may be, and when two
//! names are the same to the eye.
//!
//! A name is the identity of a script in the options page and the review popup, so it must not
//! be forgeable. Shown names lose what renders as nothing or only steers direction
//! ([`is_invisible`]) and have every kind of space shown as one plain space ([`display`]).
//! Uniqueness compares confusable *skeletons* ([`skeleton`], after Unicode TR39: default
//! ignorables removed, each character replaced by its prototype from `confusables.txt`), so
//! "Bank helper" written with a Cyrillic "а", a fullwidth "Ｂ", a zero-width space, an NBSP or
//! U+061C is the same name as the plain one.
//!
//! Only the 2,269 prototypes that are ASCII are kept (`confusables.rs`, generated): the
//! `unicode-security` crate has the whole table but cost +107 KiB gzip of wasm (232 → 339 KiB,
//! over the 250 KiB budget), nearly all of it tables this use does not need. What the subset
//! leaves out: look-alikes between two non-ASCII scripts (Cyrillic vs Greek), and NFD (a
//! precomposed "é" and "e" + U+0301 stay different names).

/// The most characters `@name` or `@namespace` may have: long enough for any real name, short
/// enough that the popup stays readable.
pub const MAX_NAME_CHARS: usize = 200;

/// Characters that draw nothing or only reorder text: controls, Unicode's
/// Default_Ignorable_Code_Point set (zero-width spaces and joiners, the Arabic letter mark U+061C,
/// direction marks, embeddings, overrides and isolates, variation selectors, Hangul fillers, tags),
/// and the Braille blank, which renders as empty space.
pub fn is_invisible(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00AD}'
                | '\u{034F}'
                | '\u{061C}'
                | '\u{115F}'..='\u{1160}'
                | '\u{17B4}'..='\u{17B5}'
                | '\u{180B}'..='\u{180F}'
                | '\u{200B}'..='\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{2800}'
                | '\u{3164}'
                | '\u{FE00}'..='\u{FE0F}'
                | '\u{FEFF}'
                | '\u{FFA0}'
                | '\u{FFF0}'..='\u{FFF8}'
                | '\u{1BCA0}'..='\u{1BCA3}'
                | '\u{1D173}'..='\u{1D17A}'
                | '\u{E0000}'..='\u{E0FFF}'
        )
}

/// The name as it is shown: invisible characters removed, every run of spaces of any kind
/// (NBSP, en/em spaces, ideographic space…) one plain space, trimmed. Returns the text and
/// whether anything changed.
pub fn display(value: &str) -> (String, bool) {
    let mut out = String::with_capacity(value.len());
    let mut space = false;
    let mut chars = value.chars().peekable();
    while let Some(c) = chars.next() {
        // Before the invisibles, which hold every control character: a tab is a space.
        if c.is_whitespace() {
            space = !out.is_empty();
            continue;
        }
        if is_invisible(c) {
            // Zero-width (non-)joiners shape emoji sequences and Indic or Arabic text: kept
            // between two visible non-ASCII characters, where they do that job, and nowhere
            // else. Identity ignores them either way (see [`skeleton`]).
            let joins = matches!(c, '\u{200C}' | '\u{200D}')
                && !space
                && out.chars().next_back().is_some_and(|p| !p.is_ascii())
                && chars
                    .peek()
                    .is_some_and(|n| !n.is_ascii() && !is_invisible(*n) && !n.is_whitespace());
            if joins {
                out.push(c);
            }
            continue;
        }
        if space {
            out.push(' ');
            space = false;
        }
        out.push(c);
    }
    let changed = out != value;
    (out, changed)
}

/// The confusables decoded once per worker from their stored differences: each key with the
/// end of its prototype in `PROTOS`, sorted by key.
fn confusables() -> &'static [(u32, u16)] {
    use super::confusables::{KEY_STEPS, PROTO_LENS};
    static TABLE: std::sync::OnceLock<Vec<(u32, u16)>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let (mut key, mut end) = (0u32, 0u16);
        KEY_STEPS
            .iter()
            .zip(PROTO_LENS)
            .map(|(step, len)| {
                key = key.saturating_add(u32::from(*step));
                end = end.saturating_add(u16::from(len));
                (key, end)
            })
            .collect()
    })
}

/// The ASCII look-alike of `c` from Unicode's confusables (see [`super::confusables`]).
fn prototype(c: char) -> Option<&'static str> {
    let table = confusables();
    let i = table.binary_search_by_key(&u32::from(c), |e| e.0).ok()?;
    let start = match i.checked_sub(1) {
        Some(prev) => usize::from(table.get(prev)?.1),
        None => 0,
    };
    super::confusables::PROTOS.get(start..usize::from(table.get(i)?.1))
}

/// What a name looks like, for comparing two names: equal skeletons read the same. The TR39
/// skeleton restricted to ASCII prototypes: invisible characters removed, spaces folded, every
/// character that Unicode lists as confusable with ASCII replaced by that ASCII.
pub fn skeleton(value: &str) -> String {
    let (shown, _) = display(value);
    let mut out = String::with_capacity(shown.len());
    for c in shown.chars().filter(|c| !is_invisible(*c)) {
        match prototype(c) {
            Some(p) => out.push_str(p),
            None => out.push(c),
        }
    }
    out
}

/// The identity of a script for uniqueness: skeletons of `@namespace` and `@name`.
pub fn identity(namespace: Option<&str>, name: &str) -> (String, String) {
    (skeleton(namespace.unwrap_or("")), skeleton(name))
}

/// Why a name is too long, if it is.
pub fn too_long(key: &str, value: &str) -> Option<String> {
    let n = value.chars().count();
    (n > MAX_NAME_CHARS)
        .then(|| format!("@{key} is {n} characters long; the most is {MAX_NAME_CHARS}: shorten it"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ten ways to write "Bank helper" that look the same on screen.
    pub const LOOK_ALIKES: [&str; 10] = [
        "Bank helper",
        "Bank\u{200B} helper",          // zero-width space
        "Bank\u{00A0}helper",           // no-break space
        "Bank \u{061C}helper",          // Arabic letter mark
        "B\u{0430}nk helper",           // Cyrillic а
        "Bank h\u{0435}lper",           // Cyrillic е
        "Bank he\u{04CF}per",           // Cyrillic palochka for l
        "\u{FEFF}Bank  helper\u{2060}", // BOM, two spaces, word joiner
        "Ba\u{0578}k helper",           // Armenian vo for n
        "\u{FF22}ank helper",           // fullwidth B
    ];

    #[test]
    fn look_alikes_share_one_skeleton() {
        let want = skeleton("Bank helper");
        for (i, name) in LOOK_ALIKES.iter().enumerate() {
            assert_eq!(skeleton(name), want, "look-alike #{i} {name:?}");
        }
        // Names that read differently stay different.
        for other in ["Bank helpers", "Bankhelper", "Bank helper 2", "Tank helper"] {
            assert_ne!(skeleton(other), want, "{other}");
        }
        assert_eq!(
            identity(Some("ns\u{200D}"), "x"),
            identity(Some("ns"), "x\u{FE0F}")
        );
        assert_ne!(identity(Some("a"), "x"), identity(Some("b"), "x"));
    }

    #[test]
    fn display_drops_invisibles_and_folds_spaces() {
        assert_eq!(
            display("\u{200B} Bank\u{00A0}\u{2003}helper\u{202E}\u{061C} "),
            ("Bank helper".to_owned(), true)
        );
        assert_eq!(display("Plain name"), ("Plain name".to_owned(), false));
        // A tab (a control character, and a space) is a space, not removed: "YouTube\tEnhancer"
        // was shown as, and taken for the same script as, "YouTubeEnhancer".
        assert_eq!(
            display("YouTube\tEnhancer\r\n"),
            ("YouTube Enhancer".to_owned(), true)
        );
        assert_ne!(skeleton("YouTube\tEnhancer"), skeleton("YouTubeEnhancer"));
        assert_eq!(display("\u{200B}\u{2800}"), (String::new(), true));
        assert_eq!(display("日本語 ✓"), ("日本語 ✓".to_owned(), false));
        // Joiners stay where they join (an emoji family, Devanagari), go elsewhere.
        let family = "🎉👩\u{200D}👩\u{200D}👧";
        assert_eq!(display(family), (family.to_owned(), false));
        assert_eq!(display("क्\u{200D}ष"), ("क्\u{200D}ष".to_owned(), false));
        assert_eq!(display("Bank\u{200D}helper").0, "Bankhelper");
        assert_eq!(display("👩\u{200D} x").0, "👩 x");
        assert_eq!(skeleton(family), skeleton("🎉👩👩👧"));
    }

    #[test]
    fn long_names_are_refused_with_the_count() {
        assert_eq!(too_long("name", &"a".repeat(MAX_NAME_CHARS)), None);
        let msg = too_long("name", &"é".repeat(MAX_NAME_CHARS + 1)).unwrap();
        assert!(
            msg.contains("201 characters") && msg.contains("200"),
            "{msg}"
        );
    }

    #[test]
    fn the_generated_table_is_sorted_and_whole() {
        use crate::scripts::confusables::{KEY_STEPS, PROTOS};
        let table = confusables();
        assert_eq!(table.len(), KEY_STEPS.len());
        assert!(
            table.windows(2).all(|w| w[0].0 < w[1].0),
            "binary search needs sorted keys (no step is 0)"
        );
        assert!(
            table.windows(2).all(|w| w[0].1 < w[1].1),
            "no prototype is empty"
        );
        assert_eq!(table.last().map(|e| usize::from(e.1)), Some(PROTOS.len()));
        assert!(PROTOS.is_ascii());
        assert_eq!(prototype('\u{0430}'), Some("a"));
        assert_eq!(prototype('\u{FF22}'), Some("B"));
        assert_eq!(prototype('m'), Some("rn"));
        assert_eq!(prototype('a'), None);
        // The first and last keys (U+0022, U+1FBF9 in Unicode 18) decode to their prototypes.
        assert_eq!(prototype('"'), Some("''"));
        assert_eq!(prototype('\u{1FBF9}'), Some("9"));
        assert_eq!(prototype('\u{1FBFA}'), None);
    }
}
