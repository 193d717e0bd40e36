//! `chrome.storage.local`'s quota as this provider bounds it (a leaf: the import and the
//! `@require`/`@resource` files of a write check against it before their one `set`).

use serde_json::{Map, Value};

/// `chrome.storage.local.QUOTA_BYTES` (the extension has no `unlimitedStorage`).
pub const QUOTA_BYTES: usize = 10 * 1024 * 1024;
/// Kept free after an import: the audit entry, the registry's and the policy's small writes.
pub const HEADROOM_BYTES: usize = 256 * 1024;

/// The bytes `chrome.storage` counts for one item: the key and the value's JSON.
pub fn item_bytes(key: &str, v: &Value) -> usize {
    key.len()
        .saturating_add(serde_json::to_string(v).map_or(usize::MAX, |s| s.len()))
}

/// The bytes in use after `items` are set over `all` (the area's current content).
pub fn bytes_after(all: &Map<String, Value>, items: &Map<String, Value>) -> (usize, usize) {
    let in_use = all
        .iter()
        .map(|(k, v)| item_bytes(k, v))
        .fold(0usize, usize::saturating_add);
    let after = items.iter().fold(in_use, |n, (k, v)| {
        let old = all.get(k).map_or(0, |o| item_bytes(k, o));
        n.saturating_sub(old).saturating_add(item_bytes(k, v))
    });
    (in_use, after)
}
