//! What the reviewer reads of a source: its lines split exactly where JavaScript ends a line, every
//! character that does not show on screen made visible, and a bounded preview of the diff that
//! says plainly how much it leaves out.
//!
//! Why: the reviewer approves what they see, Chrome runs what JavaScript parses. JavaScript ends a
//! line at LF, CR, CRLF, U+2028 and U+2029, so `// note⏎CRpayload()` is a comment and a call; a
//! diff split on LF alone shows one harmless comment line. Zero-width, bidirectional and
//! space-like characters can likewise make code read as something else.

use std::fmt::Write as _;

/// How a line ended in the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// LF or CRLF: the usual endings, shown as a plain line break.
    Usual,
    /// A lone CR, U+2028 or U+2029: JavaScript ends the line there, most editors and diff tools
    /// do not. The reviewer sees a marker at the end of such a line.
    Unusual(char),
    /// The last line, with no terminator after it.
    None,
}

/// Splits `s` into lines exactly where JavaScript's `LineTerminator` ends one: LF, CR, CRLF,
/// U+2028, U+2029. A terminator at the very end does not start another (empty) line, as with
/// `str::lines`.
pub fn js_lines(s: &str) -> Vec<(&str, Ending)> {
    JsLines::new(s).collect()
}

/// [`js_lines`] one line at a time (a 1 MiB file of short lines is not held as a list).
pub struct JsLines<'a> {
    s: &'a str,
    start: usize,
    it: std::iter::Peekable<std::str::CharIndices<'a>>,
}

impl<'a> JsLines<'a> {
    pub fn new(s: &'a str) -> Self {
        JsLines {
            s,
            start: 0,
            it: s.char_indices().peekable(),
        }
    }
}

impl<'a> Iterator for JsLines<'a> {
    type Item = (&'a str, Ending);

    fn next(&mut self) -> Option<Self::Item> {
        while let Some((i, c)) = self.it.next() {
            let ending = match c {
                '\n' => Ending::Usual,
                '\r' => {
                    if let Some((_, '\n')) = self.it.peek() {
                        self.it.next();
                        Ending::Usual
                    } else {
                        Ending::Unusual('\r')
                    }
                }
                '\u{2028}' | '\u{2029}' => Ending::Unusual(c),
                _ => continue,
            };
            let line = self.s.get(self.start..i).unwrap_or("");
            self.start = self.it.peek().map_or(self.s.len(), |(j, _)| *j);
            return Some((line, ending));
        }
        if self.start < self.s.len() {
            let line = self.s.get(self.start..).unwrap_or("");
            self.start = self.s.len();
            return Some((line, Ending::None));
        }
        None
    }
}

/// The opening bracket of a marker. It is itself always escaped where it occurs in a source, so
/// every `⟨U+…⟩` the reviewer sees is a marker and none is text the agent wrote.
pub const MARK_OPEN: char = '\u{27E8}';
pub const MARK_CLOSE: char = '\u{27E9}';

/// True for a character that shows as nothing, as blank space that is not a plain space, or that
/// reorders the text around it: controls but tab, format characters (Unicode category Cf:
/// zero-width, bidirectional embeddings, overrides and isolates, BOM, soft hyphen, tags), space
/// separators other than U+0020 (Zs: NBSP, the en/em/thin/ideographic spaces), the
/// Default_Ignorable code points that are not Cf (variation selectors, Hangul fillers,
/// combining grapheme joiner), line and paragraph separators, the braille blank, and
/// [`MARK_OPEN`].
pub fn needs_marker(c: char) -> bool {
    matches!(u32::from(c),
        0x00..=0x08 | 0x0A..=0x1F | 0x7F..=0xA0 | 0xAD
        | 0x034F | 0x0600..=0x0605 | 0x061C | 0x06DD | 0x070F | 0x0890..=0x0891 | 0x08E2
        | 0x115F..=0x1160 | 0x1680 | 0x17B4..=0x17B5 | 0x180B..=0x180F
        | 0x2000..=0x200F | 0x2028..=0x202F | 0x205F..=0x206F
        | 0x27E8 | 0x2800 | 0x3000 | 0x3164
        | 0xFE00..=0xFE0F | 0xFEFF | 0xFFA0 | 0xFFF0..=0xFFFB
        | 0x110BD | 0x110CD | 0x13430..=0x1343F | 0x1BCA0..=0x1BCA3 | 0x1D173..=0x1D17A
        | 0xE0000..=0xE0FFF)
}

fn push_marker(out: &mut String, c: char) {
    let _ = write!(out, "{MARK_OPEN}U+{:04X}{MARK_CLOSE}", u32::from(c));
}

/// `line` with every character of [`needs_marker`] replaced by a visible `⟨U+XXXX⟩`.
pub fn visible(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    for c in line.chars() {
        if needs_marker(c) {
            push_marker(&mut out, c);
        } else {
            out.push(c);
        }
    }
    out
}

/// The lines of `source` as the reviewer reads them: split as JavaScript does, invisible
/// characters marked, and an unusual line ending marked at the end of its line.
pub fn shown_lines(source: &str) -> Vec<String> {
    js_lines(source)
        .into_iter()
        .map(|(line, ending)| {
            let mut s = visible(line);
            if let Ending::Unusual(c) = ending {
                push_marker(&mut s, c);
            }
            s
        })
        .collect()
}

/// `source` as the reviewer reads it, as one text: [`shown_lines`] joined with LF, ending with LF
/// when the source ends a line. A source of plain LF lines is returned unchanged.
pub fn shown_text(source: &str) -> String {
    let mut out = shown_lines(source).join("\n");
    if source.ends_with(['\n', '\r', '\u{2028}', '\u{2029}']) {
        out.push('\n');
    }
    out
}

/// A unified-style diff of `old` → `new` over [`shown_lines`]: the lines kept as unchanged are
/// those [`super::diff_align::common`] pairs (the common start and end, and the lines in between
/// both sides have once and in the same order), and each change is shown with three lines of
/// context, changes closer than that in one hunk. Bounded work, so a 256 KiB source cannot stall
/// the worker. Every line is in it; [`Preview`] bounds what is sent to the popup at once.
pub fn line_diff(old: &str, new: &str) -> Vec<String> {
    let a = shown_lines(old);
    let b = shown_lines(new);
    if a == b {
        return vec![if old == new {
            "(no change to the source)".to_owned()
        } else {
            "(the lines are the same; only line endings or the final line break differ)".to_owned()
        }];
    }
    // Each step: a line kept (its index on both sides), removed (in `a`) or added (in `b`);
    // removals before additions between two kept lines.
    #[derive(Clone, Copy)]
    enum Op {
        Same(usize),
        Del(usize),
        Add(usize),
    }
    let mut ops = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    for (x, y) in super::diff_align::common(&a, &b)
        .into_iter()
        .chain([(a.len(), b.len())])
    {
        ops.extend((i..x).map(Op::Del));
        ops.extend((j..y).map(Op::Add));
        if x < a.len() {
            ops.push(Op::Same(x));
        }
        (i, j) = (x + 1, y + 1);
    }
    // The hunks: each change with its context, merged where contexts meet.
    let ctx = 3;
    let mut hunks: Vec<(usize, usize)> = Vec::new();
    for (k, op) in ops.iter().enumerate() {
        if matches!(op, Op::Same(_)) {
            continue;
        }
        let (from, to) = (k.saturating_sub(ctx), (k + 1 + ctx).min(ops.len()));
        match hunks.last_mut() {
            Some(last) if from <= last.1 => last.1 = last.1.max(to),
            _ => hunks.push((from, to)),
        }
    }
    // Where each step starts on either side: the lines of `a` and of `b` before it.
    let mut at = Vec::with_capacity(ops.len() + 1);
    let (mut na, mut nb) = (0usize, 0usize);
    for op in &ops {
        at.push((na, nb));
        match op {
            Op::Same(_) => (na, nb) = (na + 1, nb + 1),
            Op::Del(_) => na += 1,
            Op::Add(_) => nb += 1,
        }
    }
    at.push((na, nb));
    let line = |v: &[String], n: usize| v.get(n).map_or("", String::as_str).to_owned();
    let mut out = Vec::with_capacity(ops.len() + hunks.len());
    for (from, to) in hunks {
        let (sa, sb) = at.get(from).copied().unwrap_or_default();
        let (ea, eb) = at.get(to).copied().unwrap_or_default();
        out.push(format!(
            "@@ -{},{} +{},{} @@",
            sa + 1,
            ea - sa,
            sb + 1,
            eb - sb
        ));
        for op in ops.get(from..to).unwrap_or(&[]) {
            out.push(match *op {
                Op::Same(x) => format!(" {}", line(&a, x)),
                Op::Del(x) => format!("-{}", line(&a, x)),
                Op::Add(y) => format!("+{}", line(&b, y)),
            });
        }
    }
    out
}

/// At most this many lines of a diff go to the popup with the review; the rest on request.
pub const PREVIEW_LINES: usize = 400;
/// At most this many bytes likewise (one 256 KiB line of markers must not ride along every second).
pub const PREVIEW_BYTES: usize = 64 * 1024;

/// The first part of a diff, and exactly how much of it is left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preview {
    /// Whole lines, joined with `\n` (no shown line contains a line break).
    pub text: String,
    /// Lines of the diff in `text`, the last maybe cut (see `cut_line`).
    pub shown_lines: usize,
    pub total_lines: usize,
    /// True when the last line in `text` was cut short to stay within [`PREVIEW_BYTES`].
    pub cut_line: bool,
}

impl Preview {
    pub fn of(lines: &[String]) -> Preview {
        Preview::within(lines, PREVIEW_LINES, PREVIEW_BYTES)
    }

    /// [`Preview::of`] within `max_lines` lines and `max_bytes` bytes (what is left of a budget
    /// several texts share).
    pub fn within(lines: &[String], max_lines: usize, max_bytes: usize) -> Preview {
        let mut text = String::new();
        let mut shown = 0;
        let mut cut_line = false;
        for line in lines.iter().take(max_lines) {
            let sep = usize::from(shown > 0);
            let room = max_bytes.saturating_sub(text.len() + sep);
            if room == 0 {
                break;
            }
            if sep == 1 {
                text.push('\n');
            }
            shown += 1;
            if line.len() <= room {
                text.push_str(line);
            } else {
                let mut end = room;
                while !line.is_char_boundary(end) {
                    end -= 1;
                }
                text.push_str(line.get(..end).unwrap_or(""));
                cut_line = true;
                break;
            }
        }
        Preview {
            text,
            shown_lines: shown,
            total_lines: lines.len(),
            cut_line,
        }
    }

    /// The first part of `source` as the reviewer reads it ([`shown_lines`]), within `max_lines`
    /// lines and `max_bytes` bytes, and how many lines it has: bounded work, so a 1 MiB file —
    /// of one line, or of a million — costs no more than its preview (each line is marked only
    /// as far as it can be shown, and none is kept past the bound).
    pub fn of_text(source: &str, max_lines: usize, max_bytes: usize) -> Preview {
        let mut text = String::new();
        let (mut shown, mut total, mut cut_line, mut full) = (0usize, 0usize, false, false);
        for (line, ending) in JsLines::new(source) {
            total += 1;
            if full || shown >= max_lines {
                continue;
            }
            let sep = usize::from(shown > 0);
            let room = max_bytes.saturating_sub(text.len() + sep);
            if room == 0 {
                full = true;
                continue;
            }
            // A marked character is never shorter than itself: `room` bytes of the line are
            // all that can show.
            let mut end = line.len().min(room);
            while !line.is_char_boundary(end) {
                end -= 1;
            }
            let mut l = visible(line.get(..end).unwrap_or(""));
            if let (true, Ending::Unusual(c)) = (end == line.len(), ending) {
                push_marker(&mut l, c);
            }
            if sep == 1 {
                text.push('\n');
            }
            shown += 1;
            if l.len() <= room && end == line.len() {
                text.push_str(&l);
            } else {
                let mut cut = room.min(l.len());
                while !l.is_char_boundary(cut) {
                    cut -= 1;
                }
                text.push_str(l.get(..cut).unwrap_or(""));
                cut_line = true;
                full = true;
            }
        }
        Preview {
            text,
            shown_lines: shown,
            total_lines: total,
            cut_line,
        }
    }

    /// True when the reviewer does not see all of the diff in the preview.
    pub fn is_partial(&self) -> bool {
        self.cut_line || self.shown_lines < self.total_lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(s: &str) -> Vec<&str> {
        js_lines(s).into_iter().map(|(l, _)| l).collect()
    }

    #[test]
    fn splits_where_javascript_ends_a_line() {
        assert_eq!(split("a\nb"), ["a", "b"]);
        assert_eq!(split("a\rb"), ["a", "b"]);
        assert_eq!(split("a\r\nb"), ["a", "b"]);
        assert_eq!(split("a\u{2028}b\u{2029}c"), ["a", "b", "c"]);
        assert_eq!(split("// comment\rpayload()"), ["// comment", "payload()"]);
        // CR LF is one ending; LF CR is two.
        assert_eq!(split("a\n\rb"), ["a", "", "b"]);
        assert_eq!(split("a\r\r\nb"), ["a", "", "b"]);
        // A final terminator does not start an empty line; an empty source has no line.
        assert_eq!(split("a\n"), ["a"]);
        assert_eq!(split("a\r"), ["a"]);
        assert_eq!(split("a\n\n"), ["a", ""]);
        assert_eq!(split(""), Vec::<&str>::new());
        assert_eq!(split("\n"), [""]);
        // Characters JavaScript does not treat as terminators stay inside the line.
        assert_eq!(
            split("a\u{0085}b\u{000B}c\u{000C}d"),
            ["a\u{0085}b\u{000B}c\u{000C}d"]
        );
        let endings: Vec<Ending> = js_lines("a\nb\r\nc\rd\u{2028}e")
            .into_iter()
            .map(|(_, e)| e)
            .collect();
        assert_eq!(
            endings,
            [
                Ending::Usual,
                Ending::Usual,
                Ending::Unusual('\r'),
                Ending::Unusual('\u{2028}'),
                Ending::None
            ]
        );
    }

    #[test]
    fn every_invisible_or_reordering_character_is_marked() {
        for (c, name) in [
            ('\u{202E}', "RIGHT-TO-LEFT OVERRIDE"),
            ('\u{2066}', "LEFT-TO-RIGHT ISOLATE"),
            ('\u{2069}', "POP DIRECTIONAL ISOLATE"),
            ('\u{200F}', "RIGHT-TO-LEFT MARK"),
            ('\u{061C}', "ARABIC LETTER MARK"),
            ('\u{200B}', "ZERO WIDTH SPACE"),
            ('\u{200D}', "ZERO WIDTH JOINER"),
            ('\u{2060}', "WORD JOINER"),
            ('\u{FEFF}', "BOM"),
            ('\u{00AD}', "SOFT HYPHEN"),
            ('\u{00A0}', "NO-BREAK SPACE"),
            ('\u{2007}', "FIGURE SPACE"),
            ('\u{202F}', "NARROW NO-BREAK SPACE"),
            ('\u{3000}', "IDEOGRAPHIC SPACE"),
            ('\u{3164}', "HANGUL FILLER"),
            ('\u{FE0F}', "VARIATION SELECTOR-16"),
            ('\u{E0041}', "TAG LATIN CAPITAL LETTER A"),
            ('\u{0000}', "NUL"),
            ('\u{001B}', "ESCAPE"),
            ('\u{0085}', "NEXT LINE"),
            ('\u{000B}', "LINE TABULATION"),
            ('\u{2028}', "LINE SEPARATOR"),
        ] {
            let shown = visible(&format!("a{c}b"));
            assert_eq!(
                shown,
                format!("a⟨U+{:04X}⟩b", u32::from(c)),
                "{name} must be visible"
            );
        }
        // Ordinary text, tabs and visible non-ASCII stay as they are.
        for s in ["let x = 1;\t// é ü 漢字 🙂 ➜", "→ ← ⟩"] {
            assert_eq!(visible(s), s);
        }
        // The marker's own bracket is escaped, so text cannot pose as a marker.
        assert_eq!(visible("⟨U+202E⟩"), "⟨U+27E8⟩U+202E⟩");
    }

    #[test]
    fn unusual_endings_are_marked_on_their_line() {
        assert_eq!(
            shown_lines("// comment\rpayload()\n"),
            ["// comment⟨U+000D⟩", "payload()"]
        );
        assert_eq!(shown_lines("a\u{2029}b\r\nc"), ["a⟨U+2029⟩", "b", "c"]);
    }

    #[test]
    fn shown_text_keeps_plain_sources_as_they_are() {
        for plain in ["", "a", "a\n", "a\nb\n\n", "\n"] {
            assert_eq!(shown_text(plain), plain);
        }
        assert_eq!(shown_text("a\r\nb\r\n"), "a\nb\n");
        assert_eq!(
            shown_text("// c\rpay()\u{2028}"),
            "// c⟨U+000D⟩\npay()⟨U+2028⟩\n"
        );
    }

    #[test]
    fn diff_shows_the_changed_middle_with_context() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nb\nc\nd\nX\nf\ng\nh\n";
        let d = line_diff(old, new).join("\n");
        assert_eq!(d, "@@ -2,7 +2,7 @@\n b\n c\n d\n-e\n+X\n f\n g\n h");
        assert_eq!(line_diff("same\n", "same\n"), ["(no change to the source)"]);
        assert_eq!(line_diff("", "new\n"), ["@@ -1,0 +1,1 @@", "+new"]);
        assert_eq!(line_diff("old\n", ""), ["@@ -1,1 +1,0 @@", "-old"]);
        assert_eq!(
            line_diff("a\r\nb", "a\nb\n"),
            ["(the lines are the same; only line endings or the final line break differ)"]
        );
    }

    /// R17: an update that changed `@version` and added lines at the end showed every line in
    /// between as removed and added again. Two changes far apart are two hunks.
    #[test]
    fn unchanged_lines_between_two_changes_are_context_not_changes() {
        let head = "// ==UserScript==\n// @name A\n// @version 1\n// @match https://a.test/*\n// @updateURL https://a.test/a.user.js\n// ==/UserScript==\n";
        let body: String = (0..10).map(|i| format!("step({i});\n")).collect();
        let old = format!("{head}{body}");
        let new = format!(
            "{}{body}more();\n",
            head.replace("@version 1", "@version 2")
        );
        let d = line_diff(&old, &new);
        assert_eq!(
            d,
            [
                "@@ -1,6 +1,6 @@",
                " // ==UserScript==",
                " // @name A",
                "-// @version 1",
                "+// @version 2",
                " // @match https://a.test/*",
                " // @updateURL https://a.test/a.user.js",
                " // ==/UserScript==",
                "@@ -14,3 +14,4 @@",
                " step(7);",
                " step(8);",
                " step(9);",
                "+more();",
            ]
        );
    }

    #[test]
    fn a_hidden_line_shows_as_its_own_added_line() {
        let old = "// ==UserScript==\n// @name A\n// ==/UserScript==\n// note\n";
        let new = "// ==UserScript==\n// @name A\n// ==/UserScript==\n// note\rfetch('//evil')\n";
        let d = line_diff(old, new);
        assert!(d.contains(&"-// note".to_owned()), "{d:?}");
        assert!(d.contains(&"+// note⟨U+000D⟩".to_owned()), "{d:?}");
        assert!(d.contains(&"+fetch('//evil')".to_owned()), "{d:?}");
        // A change of a single invisible character is a change the reviewer sees.
        let d = line_diff("let a = 1;\n", "let a\u{200B} = 1;\n");
        assert!(d.contains(&"+let a⟨U+200B⟩ = 1;".to_owned()), "{d:?}");
    }

    #[test]
    fn diff_handles_repeated_lines() {
        // Prefix and suffix overlap on repeated lines: must not go negative or panic.
        assert!(line_diff("x\nx\nx\n", "x\nx\n").contains(&"-x".to_owned()));
        assert!(line_diff("x\nx\n", "x\nx\nx\n").contains(&"+x".to_owned()));
    }

    #[test]
    fn the_preview_is_bounded_and_says_what_it_leaves_out() {
        let old: String = (0..5000).map(|i| format!("{i}\n")).collect();
        let new: String = (0..5000).map(|i| format!("n{i}\n")).collect();
        let d = line_diff(&old, &new);
        assert_eq!(d.len(), 10_001, "the whole diff has every line");
        let p = Preview::of(&d);
        assert_eq!(p.shown_lines, PREVIEW_LINES);
        assert_eq!(p.total_lines, 10_001);
        assert!(p.is_partial());
        assert_eq!(p.text.lines().count(), PREVIEW_LINES);
        // A payload after line 400 is in the diff, not in the preview.
        let mut src: String = (0..450).map(|i| format!("// line {i}\n")).collect();
        src.push_str("steal();\n");
        let d = line_diff("", &src);
        let p = Preview::of(&d);
        assert!(p.is_partial());
        assert!(!p.text.contains("steal()"));
        assert!(d.iter().any(|l| l == "+steal();"));
        // One huge line is cut by bytes, on a character boundary, and said to be cut.
        let long = "é".repeat(PREVIEW_BYTES);
        let d = line_diff("", &long);
        let p = Preview::of(&d);
        assert!(p.cut_line && p.is_partial());
        assert!(p.text.len() <= PREVIEW_BYTES);
        // A small diff is whole.
        let p = Preview::of(&line_diff("a\n", "b\n"));
        assert!(!p.is_partial());
        assert_eq!(p.text, "@@ -1,1 +1,1 @@\n-a\n+b");
    }

    /// The bounded preview of a text is the unbounded one cut (same lines, same markers), and
    /// marks no more of a long line than can show.
    #[test]
    fn a_texts_preview_is_its_lines_cut_within_the_bound() {
        let samples = [
            "a\nb\r\nc\rd\u{2028}e\u{202E}f\n".to_owned(),
            "x".repeat(100),
            "\u{200B}".repeat(50),
            "one\n\ntwo\r".to_owned(),
            String::new(),
        ];
        for src in &samples {
            for (lines, bytes) in [
                (usize::MAX, usize::MAX),
                (2, usize::MAX),
                (400, 7),
                (1, 13),
                (3, 0),
            ] {
                let full = Preview::within(&shown_lines(src), lines, bytes);
                let of = Preview::of_text(src, lines, bytes);
                assert_eq!(of, full, "{src:?} within {lines} lines, {bytes} bytes");
            }
        }
        let huge = "\u{1}".repeat(1 << 20);
        let p = Preview::of_text(&huge, 400, 64 * 1024);
        assert!(p.cut_line && p.text.len() <= 64 * 1024 && p.total_lines == 1);
    }
}
