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
/// What the audit log's two rings may hold at most: 1,000 entries each, an entry a few hundred
/// bytes (a name is kept to `guard::audit::MAX_ENTRY_NAME` characters).
pub const AUDIT_ALLOWANCE_BYTES: usize = 1024 * 1024;

/// How full an agent's write may leave `chrome.storage.local`, given what the scripts' values
/// and the run reports' rings hold now (`values_now`, `runs_now`, from their budgets): the
/// quota less the user's reserve, the audit's allowance, and what the values and the rings may
/// still grow by after the write, with no write at all (their bounds less what they hold).
/// Past it the write is refused, unless it frees bytes: however many scripts an agent writes,
/// whatever their values hold and however many pages report runs, the user can still turn a
/// script off, delete it or undo (R9: an agent filled the storage to the byte in 46 writes,
/// and every change of the user's was then refused).
pub fn agent_limit(values_now: usize, runs_now: usize) -> usize {
    let growth = crate::gm::values::MAX_TOTAL_BYTES
        .saturating_sub(values_now)
        .saturating_add(super::runs::MAX_TOTAL_BYTES.saturating_sub(runs_now));
    QUOTA_BYTES
        .saturating_sub(USER_RESERVE_BYTES)
        .saturating_sub(AUDIT_ALLOWANCE_BYTES)
        .saturating_sub(growth)
}

/// [`agent_limit`] with no values and no runs stored: the least an agent's writes may fill.
pub const AGENT_LIMIT_BYTES: usize = QUOTA_BYTES
    - USER_RESERVE_BYTES
    - AUDIT_ALLOWANCE_BYTES
    - crate::gm::values::MAX_TOTAL_BYTES
    - super::runs::MAX_TOTAL_BYTES;

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

#[cfg(test)]
mod tests {
    use super::*;

    /// R11: the agents' share leaves room for what grows without them — the values, the run
    /// reports, the audit — so once those are full too the user's reserve is still free.
    #[test]
    fn the_agents_share_leaves_the_users_reserve_once_everything_else_is_full() {
        let (values, runs) = (
            crate::gm::values::MAX_TOTAL_BYTES,
            super::super::runs::MAX_TOTAL_BYTES,
        );
        assert_eq!(agent_limit(0, 0), AGENT_LIMIT_BYTES);
        assert_eq!(AGENT_LIMIT_BYTES, 5 << 20);
        // An agent fills its share while nothing else is stored; then values, runs and the
        // audit grow to their bounds: the reserve is left.
        let worst = agent_limit(0, 0) + values + runs + AUDIT_ALLOWANCE_BYTES;
        assert_eq!(QUOTA_BYTES - worst, USER_RESERVE_BYTES);
        // What they hold already is in use, not reserved twice.
        assert_eq!(
            agent_limit(values, runs),
            QUOTA_BYTES - USER_RESERVE_BYTES - AUDIT_ALLOWANCE_BYTES
        );
        assert_eq!(agent_limit(values + 1, runs + 1), agent_limit(values, runs));
    }
}
