//! One stable sort for the crate. Each `sort_by` on a new element type instantiates the standard
//! library's sort (quicksort, drift merge, small-sort networks: ~3 KB of wasm each, issue 17);
//! this sorts positions, with one instance for every caller, then moves the items.

use std::cmp::Ordering;

/// `v.sort_by(cmp)`: stable, `O(n log n)` comparisons, one allocation of `n` positions and one
/// of `n` slots. `cmp` must be a total order, as for `slice::sort_by`, which may panic on one
/// that is not (Rust 1.81+): every caller's is an `Ord` or `f64::total_cmp`.
pub fn sort_by<T>(v: &mut Vec<T>, mut cmp: impl FnMut(&T, &T) -> Ordering) {
    let mut order: Vec<usize> = (0..v.len()).collect();
    sort_positions(&mut order, &mut |a, b| match (v.get(a), v.get(b)) {
        (Some(x), Some(y)) => cmp(x, y),
        _ => Ordering::Equal, // not reached: every position is below `v.len()`
    });
    let mut slots: Vec<Option<T>> = v.drain(..).map(Some).collect();
    v.extend(
        order
            .iter()
            .filter_map(|&i| slots.get_mut(i).and_then(Option::take)),
    );
}

/// The positions `0..len` in the order `cmp` gives them (stable): for a caller that keeps an
/// order beside its items instead of moving them.
pub fn positions(len: usize, mut cmp: impl FnMut(usize, usize) -> Ordering) -> Vec<usize> {
    let mut order: Vec<usize> = (0..len).collect();
    sort_positions(&mut order, &mut cmp);
    order
}

#[inline(never)]
fn sort_positions(order: &mut [usize], cmp: &mut dyn FnMut(usize, usize) -> Ordering) {
    order.sort_by(|a, b| cmp(*a, *b));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_like_the_standard_sort_and_keeps_equal_items_in_order() {
        let mut seed = 0x2545_f491_u64;
        for len in [0, 1, 2, 3, 7, 20, 21, 64, 257, 1000] {
            let items: Vec<(u8, usize)> = (0..len)
                .map(|i| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    ((seed % 5) as u8, i) // few keys: many ties, told apart by position
                })
                .collect();
            let mut ours = items.clone();
            let mut expected = items;
            sort_by(&mut ours, |a, b| b.0.cmp(&a.0));
            expected.sort_by_key(|x| std::cmp::Reverse(x.0));
            assert_eq!(ours, expected, "len {len}");
        }
    }
}
