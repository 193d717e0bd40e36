//! What a reviewer is shown of any pair of sources: no panic, every line free of line breaks and
//! of every character that does not show (each is a ⟨U+XXXX⟩ marker), the preview within its
//! bounds, and the effects of any two parsable metadata blocks.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lumo_userscripts::guard::diff::{
    line_diff, needs_marker, shown_lines, Preview, MARK_OPEN, PREVIEW_BYTES, PREVIEW_LINES,
};
use lumo_userscripts::guard::effects::{effects, Version};
use lumo_userscripts::scripts::metadata::parse;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (old, new) = text.split_at(
        text.char_indices()
            .nth(text.chars().count() / 2)
            .map_or(text.len(), |(i, _)| i),
    );
    let diff = line_diff(old, new);
    for line in diff.iter().chain(shown_lines(new).iter()) {
        assert!(
            line.chars().all(|c| !needs_marker(c) || c == MARK_OPEN),
            "{line:?}"
        );
    }
    let p = Preview::of(&diff);
    assert!(p.text.len() <= PREVIEW_BYTES && p.shown_lines <= PREVIEW_LINES.min(diff.len()));
    if let (Some(om), Some(nm)) = (parse(old).metadata, parse(new).metadata) {
        let e = effects(
            Some(&Version {
                metadata: &om,
                enabled: false,
                source: old,
            }),
            Some(&Version {
                metadata: &nm,
                enabled: true,
                source: new,
            }),
        );
        assert!(!e.is_empty());
        assert!(
            e.iter()
                .all(|x| x.chars().all(|c| !needs_marker(c) || c == MARK_OPEN)),
            "{e:?}"
        );
    }
});
