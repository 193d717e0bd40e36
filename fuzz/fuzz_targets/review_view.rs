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
    every_change_is_shown(old, new, &diff);
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

/// The hunks are the two texts: each hunk's kept and removed lines are `old`'s lines where its
/// header says, its kept and added lines `new`'s, and between hunks (and around them) the two
/// texts hold the same lines. So no change can be left out of what the reviewer reads.
fn every_change_is_shown(old: &str, new: &str, diff: &[String]) {
    let (a, b) = (shown_lines(old), shown_lines(new));
    if diff.len() == 1 && diff[0].starts_with('(') {
        assert_eq!(a, b);
        return;
    }
    let (mut ia, mut ib) = (0usize, 0usize);
    let mut k = 0;
    while k < diff.len() {
        let h = &diff[k];
        let nums: Vec<usize> = h
            .trim_start_matches("@@ -")
            .trim_end_matches(" @@")
            .split([',', ' ', '+'])
            .filter(|x| !x.is_empty())
            .map(|x| x.parse().unwrap())
            .collect();
        let (sa, la, sb, lb) = (nums[0] - 1, nums[1], nums[2] - 1, nums[3]);
        // The lines between the last hunk and this one are the same on both sides.
        assert_eq!(sa - ia, sb - ib, "{diff:?}");
        assert_eq!(a[ia..sa], b[ib..sb], "{diff:?}");
        let (mut ra, mut rb) = (Vec::new(), Vec::new());
        k += 1;
        while k < diff.len() && !diff[k].starts_with("@@ ") {
            let (sign, rest) = diff[k].split_at(1);
            match sign {
                " " => {
                    ra.push(rest.to_owned());
                    rb.push(rest.to_owned());
                }
                "-" => ra.push(rest.to_owned()),
                "+" => rb.push(rest.to_owned()),
                _ => panic!("{diff:?}"),
            }
            k += 1;
        }
        assert_eq!(ra, a[sa..sa + la], "{diff:?}");
        assert_eq!(rb, b[sb..sb + lb], "{diff:?}");
        (ia, ib) = (sa + la, sb + lb);
    }
    assert_eq!(a[ia..], b[ib..], "{diff:?}");
}
