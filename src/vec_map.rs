//! A map kept as a Vec sorted by key: the part of `BTreeMap`'s API this crate uses, the same
//! iteration order (ascending keys), a fraction of the code. Every `BTreeMap<K, V>` with a new
//! `V` instantiates the whole B-tree (node splits, merges, steals: ~7 KB of wasm each, 180 KB in
//! all, issue 17); this is a binary search over a `Vec`. Inserts and removals move the tail, so it
//! is for the small maps of things in flight (requests, watches, rate windows), bounded elsewhere.

use std::borrow::Borrow;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VecMap<K, V>(Vec<(K, V)>);

impl<K, V> Default for VecMap<K, V> {
    fn default() -> Self {
        VecMap(Vec::new())
    }
}

impl<K: Ord, V> VecMap<K, V> {
    #[must_use]
    pub const fn new() -> Self {
        VecMap(Vec::new())
    }

    /// Where `k` is (`Ok`) or would go (`Err`).
    fn find<Q: Ord + ?Sized>(&self, k: &Q) -> Result<usize, usize>
    where
        K: Borrow<Q>,
    {
        self.0.binary_search_by(|(x, _)| x.borrow().cmp(k))
    }

    pub fn get<Q: Ord + ?Sized>(&self, k: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        self.find(k)
            .ok()
            .and_then(|i| self.0.get(i))
            .map(|(_, v)| v)
    }

    pub fn get_mut<Q: Ord + ?Sized>(&mut self, k: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
    {
        let i = self.find(k).ok()?;
        self.0.get_mut(i).map(|(_, v)| v)
    }

    pub fn contains_key<Q: Ord + ?Sized>(&self, k: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.find(k).is_ok()
    }

    /// The old value when `k` was there (its key is kept, as `BTreeMap` does).
    pub fn insert(&mut self, k: K, v: V) -> Option<V> {
        match self.find(&k) {
            Ok(i) => self.0.get_mut(i).map(|(_, old)| std::mem::replace(old, v)),
            Err(i) => {
                self.0.insert(i, (k, v));
                None
            }
        }
    }

    pub fn remove<Q: Ord + ?Sized>(&mut self, k: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        let i = self.find(k).ok()?;
        Some(self.0.remove(i).1)
    }

    /// The value at `k`, inserted from `f` first when absent (`entry(k).or_insert_with(f)`).
    /// Always `Some` (found, or just inserted there); an `Option` only so that no index can
    /// panic.
    #[must_use]
    pub fn get_or_insert_with(&mut self, k: K, f: impl FnOnce() -> V) -> Option<&mut V> {
        let i = match self.find(&k) {
            Ok(i) => i,
            Err(i) => {
                self.0.insert(i, (k, f()));
                i
            }
        };
        self.0.get_mut(i).map(|(_, v)| v)
    }

    pub fn retain(&mut self, mut keep: impl FnMut(&K, &mut V) -> bool) {
        self.0.retain_mut(|(k, v)| keep(k, v));
    }
}

impl<K, V> VecMap<K, V> {
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&K, &V)> + ExactSizeIterator {
        self.0.iter().map(|(k, v)| (k, v))
    }

    pub fn iter_mut(
        &mut self,
    ) -> impl DoubleEndedIterator<Item = (&K, &mut V)> + ExactSizeIterator {
        self.0.iter_mut().map(|(k, v)| (&*k, v))
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &K> + ExactSizeIterator {
        self.0.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + ExactSizeIterator {
        self.0.iter().map(|(_, v)| v)
    }

    pub fn values_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut V> + ExactSizeIterator {
        self.0.iter_mut().map(|(_, v)| v)
    }

    pub fn clear(&mut self) {
        self.0.clear();
    }
}

impl<K, V> IntoIterator for VecMap<K, V> {
    type Item = (K, V);
    type IntoIter = std::vec::IntoIter<(K, V)>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a, K, V> IntoIterator for &'a VecMap<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = std::iter::Map<std::slice::Iter<'a, (K, V)>, fn(&'a (K, V)) -> (&'a K, &'a V)>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

/// As `BTreeMap`'s: a later value for the same key wins.
impl<K: Ord, V> FromIterator<(K, V)> for VecMap<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(items: I) -> Self {
        let mut m = VecMap::new();
        for (k, v) in items {
            m.insert(k, v);
        }
        m
    }
}

/// As `BTreeMap`'s: a map, in key order.
impl<K: serde::Serialize, V: serde::Serialize> serde::Serialize for VecMap<K, V> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

/// A set kept the same way: `BTreeSet`'s order and the part of its API this crate uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VecSet<K>(VecMap<K, ()>);

impl<K> Default for VecSet<K> {
    fn default() -> Self {
        VecSet(VecMap::default())
    }
}

impl<K: Ord> VecSet<K> {
    #[must_use]
    pub const fn new() -> Self {
        VecSet(VecMap::new())
    }

    /// Whether `k` was new.
    pub fn insert(&mut self, k: K) -> bool {
        self.0.insert(k, ()).is_none()
    }

    pub fn contains<Q: Ord + ?Sized>(&self, k: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.0.contains_key(k)
    }

    /// Whether `k` was there.
    pub fn remove<Q: Ord + ?Sized>(&mut self, k: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.0.remove(k).is_some()
    }
}

impl<K> VecSet<K> {
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &K> + ExactSizeIterator {
        self.0.keys()
    }

    pub fn clear(&mut self) {
        self.0.clear();
    }
}

impl<K: Ord> FromIterator<K> for VecSet<K> {
    fn from_iter<I: IntoIterator<Item = K>>(items: I) -> Self {
        let mut s = VecSet::new();
        for k in items {
            s.insert(k);
        }
        s
    }
}

/// Tests read entries as `map["key"]`, as with `BTreeMap`; the shipped code never indexes.
#[cfg(test)]
impl<K: Ord + Borrow<Q>, Q: Ord + ?Sized, V> std::ops::Index<&Q> for VecMap<K, V> {
    type Output = V;
    fn index(&self, k: &Q) -> &V {
        self.get(k).expect("no such key")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// The same operations on a `BTreeMap` and a `VecMap` leave the same entries in the same order
    /// and answer the same.
    #[test]
    fn behaves_as_a_btreemap() {
        let mut b = BTreeMap::new();
        let mut v = VecMap::new();
        // A fixed pseudo-random walk of inserts, removals, lookups and retains.
        let mut x: u32 = 7;
        for step in 0..5000u32 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            let k = (x >> 16) % 97;
            match step % 7 {
                0..=2 => assert_eq!(b.insert(k, step), v.insert(k, step)),
                3 => assert_eq!(b.remove(&k), v.remove(&k)),
                4 => {
                    *b.entry(k).or_insert_with(|| step) += 1;
                    *v.get_or_insert_with(k, || step).unwrap() += 1;
                }
                5 => assert_eq!(b.get(&k), v.get(&k)),
                _ if step % 700 == 6 => {
                    b.retain(|k, s| (k + *s) % 3 != 0);
                    v.retain(|k, s| (k + *s) % 3 != 0);
                }
                _ => assert_eq!(b.contains_key(&k), v.contains_key(&k)),
            }
            assert_eq!(b.len(), v.len());
        }
        assert!(b.iter().eq(v.iter()));
        assert_eq!(
            serde_json::to_string(&b).unwrap(),
            serde_json::to_string(&v).unwrap()
        );
        let pairs = [(3, 1), (1, 2), (3, 4), (2, 0)];
        assert!(BTreeMap::from_iter(pairs)
            .into_iter()
            .eq(VecMap::from_iter(pairs)));
        assert!(b.keys().rev().eq(v.keys().rev()));
        assert!(b.into_iter().eq(v.into_iter()));
    }

    #[test]
    fn the_set_behaves_as_a_btreeset() {
        use std::collections::BTreeSet;
        let items = [5, 1, 5, 3, 9, 1, 0];
        let mut b = BTreeSet::new();
        let mut v = VecSet::new();
        for x in items {
            assert_eq!(b.insert(x), v.insert(x));
        }
        assert!(b.iter().eq(v.iter()));
        assert_eq!(b.remove(&3), v.remove(&3));
        assert_eq!(b.remove(&3), v.remove(&3));
        assert_eq!(b.contains(&9), v.contains(&9));
        assert!(b.iter().eq(v.iter()));
        assert!(VecSet::from_iter([2, 1, 2]) == VecSet::from_iter([1, 2]));
        assert!(VecSet::from_iter([2, 1]) != VecSet::from_iter([1, 3]));
    }

    #[test]
    fn looks_up_by_borrowed_key() {
        let mut v: VecMap<String, u8> = VecMap::new();
        v.insert("b".into(), 2);
        v.insert("a".into(), 1);
        assert_eq!(v.get("a"), Some(&1));
        assert_eq!(v.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(v.remove("b"), Some(2));
        assert!(!v.contains_key("b"));
    }
}
