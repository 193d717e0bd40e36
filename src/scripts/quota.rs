//! `chrome.storage.local`'s quota as this provider bounds it (a leaf: the import, the
//! `@require`/`@resource` files of a write and every agent's write check against it before
//! their one `set`).

use serde_json::{Map, Value};

/// `chrome.storage.local.QUOTA_BYTES` (the extension has no `unlimitedStorage`).
pub const QUOTA_BYTES: usize = 10 * 1024 * 1024;
/// Kept free after an import: the audit entry, the registry's and the policy's small writes.
pub const HEADROOM_BYTES: usize = 256 * 1024;
/// Kept for the user's own changes when agents write: turning a script off, deleting it, Undo
/// (each pushes a version into the history) and the audit entries they make.
pub const USER_RESERVE_BYTES: usize = 1024 * 1024;
/// How full an agent's write may leave `chrome.storage.local`: the quota less the user's
/// reserve and less the scripts' whole values budget (values stored are counted twice, in
/// use and reserved: values written later may fill it). Past it the write is refused, unless
/// it frees bytes: however many scripts an agent writes, and whatever their values hold, the
/// user can still turn a script off, delete it or undo (issue: an agent filled the storage to
/// the byte in 46 writes, and every change of the user's was then refused).
pub const AGENT_LIMIT_BYTES: usize =
    QUOTA_BYTES - USER_RESERVE_BYTES - crate::gm::values::MAX_TOTAL_BYTES;

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
