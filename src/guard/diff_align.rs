//! Which lines of two texts a diff keeps as unchanged: each segment's common start and end, then
//! its patience anchors — lines that occur once on each side, kept in the order both sides have
//! them (their longest increasing run) — and the same again between each pair of anchors.
//!
//! Why: trimming only the common start and end showed every line between the first and the last
//! change as removed and added again (R17: an update that changed `@version` and added lines at
//! the end listed its unchanged `@match` lines as changes), and a reviewer looking for the real
//! change in a long script would not find it.
//!
//! Bounded: each segment costs its length (times a logarithm), and all of them together at most
//! [`BUDGET_PER_LINE`] times the lines of both texts, so a 256 KiB source cannot stall the
//! worker. A segment past the budget is left whole, shown as removed and added: coarse, never
//! wrong. Only equal lines are ever paired, so every change is shown.

use std::collections::BTreeMap;

/// How many times its lines the whole alignment may cost.
const BUDGET_PER_LINE: usize = 8;

/// The pairs `(index in a, index in b)` of lines kept as unchanged, increasing on both sides;
/// each pair's lines are equal.
pub fn common(a: &[String], b: &[String]) -> Vec<(usize, usize)> {
    let mut budget = BUDGET_PER_LINE
        .saturating_mul(a.len().saturating_add(b.len()))
        .saturating_add(1024);
    let mut kept = Vec::new();
    // Segments still to align, as `(a0, a1, b0, b1)` half-open ranges; a stack, not recursion,
    // so no input can nest deep enough to overflow the wasm's stack.
    let mut todo = vec![(0, a.len(), 0, b.len())];
    while let Some((mut a0, mut a1, mut b0, mut b1)) = todo.pop() {
        while a0 < a1 && b0 < b1 && a.get(a0) == b.get(b0) {
            kept.push((a0, b0));
            a0 += 1;
            b0 += 1;
        }
        while a0 < a1 && b0 < b1 && a.get(a1 - 1) == b.get(b1 - 1) {
            a1 -= 1;
            b1 -= 1;
            kept.push((a1, b1));
        }
        let cost = (a1 - a0) + (b1 - b0);
        if a0 == a1 || b0 == b1 || cost > budget {
            continue;
        }
        budget -= cost;
        let (mut pa, mut pb) = (a0, b0);
        for (x, y) in anchors(a, b, (a0, a1), (b0, b1)) {
            kept.push((x, y));
            todo.push((pa, x, pb, y));
            (pa, pb) = (x + 1, y + 1);
        }
        if (pa, pb) != (a0, b0) {
            todo.push((pa, a1, pb, b1));
        }
    }
    // Segments are disjoint and ordered on both sides: sorted by `a`, the pairs increase on `b`.
    kept.sort_unstable();
    kept
}

/// The lines of `a[a0..a1]` and `b[b0..b1]` that occur once in each, in the longest run that
/// both sides have in the same order.
fn anchors(
    a: &[String],
    b: &[String],
    (a0, a1): (usize, usize),
    (b0, b1): (usize, usize),
) -> Vec<(usize, usize)> {
    // A B-tree, not a hash map: a source is the agent's input, and a fixed-key hash could be
    // flooded with colliding lines.
    let mut seen: BTreeMap<&str, (u32, usize, u32, usize)> = BTreeMap::new();
    for (i, line) in a.iter().enumerate().take(a1).skip(a0) {
        let e = seen.entry(line.as_str()).or_insert((0, i, 0, 0));
        e.0 = e.0.saturating_add(1);
    }
    for (j, line) in b.iter().enumerate().take(b1).skip(b0) {
        if let Some(e) = seen.get_mut(line.as_str()) {
            e.2 = e.2.saturating_add(1);
            e.3 = j;
        }
    }
    let mut pairs: Vec<(usize, usize)> = seen
        .values()
        .filter(|e| e.0 == 1 && e.2 == 1)
        .map(|e| (e.1, e.3))
        .collect();
    pairs.sort_unstable();
    longest_increasing(&pairs)
}

/// The longest run of `pairs` (sorted by their first) whose seconds increase too (patience
/// sorting: n log n).
fn longest_increasing(pairs: &[(usize, usize)]) -> Vec<(usize, usize)> {
    // `tails[k]`: the pair ending the best run of length k + 1 found so far (its index).
    let mut tails: Vec<usize> = Vec::new();
    let mut before: Vec<Option<usize>> = vec![None; pairs.len()];
    for (k, &(_, y)) in pairs.iter().enumerate() {
        let at = tails.partition_point(|&t| pairs.get(t).is_some_and(|p| p.1 < y));
        if let (Some(slot), Some(prev)) = (before.get_mut(k), at.checked_sub(1)) {
            *slot = tails.get(prev).copied();
        }
        match tails.get_mut(at) {
            Some(t) => *t = k,
            None => tails.push(k),
        }
    }
    let mut run = Vec::with_capacity(tails.len());
    let mut at = tails.last().copied();
    while let Some(k) = at {
        if let Some(p) = pairs.get(k) {
            run.push(*p);
        }
        at = before.get(k).copied().flatten();
    }
    run.reverse();
    run
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(s: &str) -> Vec<String> {
        s.split_terminator('\n').map(str::to_owned).collect()
    }

    /// Every pair joins equal lines, and the pairs increase on both sides.
    fn check(a: &[String], b: &[String], kept: &[(usize, usize)]) {
        for w in kept.windows(2) {
            assert!(w[0].0 < w[1].0 && w[0].1 < w[1].1, "{kept:?}");
        }
        for &(x, y) in kept {
            assert_eq!(a[x], b[y]);
        }
    }

    #[test]
    fn a_change_at_the_top_and_lines_added_at_the_end_keep_the_middle() {
        let a = lines("// @name A\n// @version 1\n// @match x\n// @updateURL u\nbody();\n");
        let b = lines(
            "// @name A\n// @version 2\n// @match x\n// @updateURL u\nbody();\nmore();\nand();\n",
        );
        let kept = common(&a, &b);
        check(&a, &b, &kept);
        assert_eq!(kept, [(0, 0), (2, 2), (3, 3), (4, 4)]);
    }

    #[test]
    fn moved_and_repeated_lines_are_aligned_without_pairing_unequal_ones() {
        let a = lines("}\nf();\n}\ng();\n}\nh();\n");
        let b = lines("}\nh();\n}\nf();\n}\ng();\n");
        let kept = common(&a, &b);
        check(&a, &b, &kept);
        // f and g stay in order; h moved, so it is removed and added.
        assert!(kept.contains(&(1, 3)) && kept.contains(&(3, 5)), "{kept:?}");
    }

    #[test]
    fn pseudo_random_texts_are_always_paired_soundly() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..300 {
            let mut text = |len: u64| -> Vec<String> {
                (0..next(len)).map(|_| format!("l{}", next(6))).collect()
            };
            let (a, b) = (text(40), text(40));
            check(&a, &b, &common(&a, &b));
        }
    }

    #[test]
    fn the_work_is_bounded_on_texts_with_no_line_in_common_or_every_line_the_same() {
        let a: Vec<String> = (0..20_000).map(|i| format!("a{i}")).collect();
        let b: Vec<String> = (0..20_000).map(|i| format!("b{i}")).collect();
        assert!(common(&a, &b).is_empty());
        let same = vec!["x".to_owned(); 20_000];
        let fewer = vec!["x".to_owned(); 19_999];
        assert_eq!(common(&same, &fewer).len(), 19_999);
        // Reversed unique lines: one anchor per level at most, so the budget stops it.
        let rev: Vec<String> = a.iter().rev().cloned().collect();
        let kept = common(&a, &rev);
        check(&a, &rev, &kept);
    }
}
