//! `chrome.storage.local`'s quota as this provider bounds it: the import and the
//! `@require`/`@resource` files of a write check against it before their one `set`; every
//! agent's write, a script's change of its values and the run reports' rings stop at the
//! agents' share ([`AGENT_LIMIT_BYTES`]).

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

/// How full an agent's write may leave `chrome.storage.local`, and so may what grows without
/// the user's hand — a script's `GM_setValue`, the run reports' rings (`gm::store`,
/// `provider::runs`): the quota less the user's reserve and the audit's allowance. Past it an
/// agent's write, or a change of values, is refused unless it frees bytes, and a run report
/// takes the place of older ones; so whatever agents write, whatever their scripts' values hold
/// and however many pages report runs, the user can still turn a script off, delete it or undo
/// (R9: an agent filled the storage to the byte in 46 writes, and every change of the user's
/// was then refused). Each bounds itself at its own write, against what Chrome counts in use:
/// no share is held back for the others (a first version kept the values' and rings' whole
/// bounds free, 5 MiB, and refused every agent write once the user stored 1,000 scripts).
pub const AGENT_LIMIT_BYTES: usize = QUOTA_BYTES - USER_RESERVE_BYTES - AUDIT_ALLOWANCE_BYTES;

/// Whether a `set` of items adding `added` bytes, where `replaced` bytes of the keys it sets
/// are in use now of `in_use`, keeps the area within [`AGENT_LIMIT_BYTES`] or frees bytes:
/// `Err(needed)`, the bytes in use after it, when neither.
pub fn within_agent_limit(in_use: usize, replaced: usize, added: usize) -> Result<(), usize> {
    let needed = in_use.saturating_sub(replaced).saturating_add(added);
    if needed > AGENT_LIMIT_BYTES && needed > in_use {
        return Err(needed);
    }
    Ok(())
}

/// The most the run reports' rings may hold after a run is stored, given what they held
/// before it (`rings_now`) and the area's bytes in use: their own bound, or, nearer the
/// [`AGENT_LIMIT_BYTES`], no more than they hold plus what is left below it (a new run then
/// takes the place of older ones).
pub fn rings_limit(rings_bound: usize, rings_now: usize, in_use: usize) -> usize {
    rings_bound.min(rings_now.saturating_add(AGENT_LIMIT_BYTES.saturating_sub(in_use)))
}

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

    /// The agents' share, with the audit full too, leaves the user's reserve.
    #[test]
    fn the_agents_share_leaves_the_users_reserve_once_the_audit_is_full() {
        assert_eq!(AGENT_LIMIT_BYTES, 8 << 20);
        assert_eq!(
            QUOTA_BYTES - AGENT_LIMIT_BYTES - AUDIT_ALLOWANCE_BYTES,
            USER_RESERVE_BYTES
        );
    }

    #[test]
    fn a_set_is_within_the_share_or_frees_bytes() {
        let l = AGENT_LIMIT_BYTES;
        assert_eq!(within_agent_limit(0, 0, l), Ok(()));
        assert_eq!(within_agent_limit(0, 0, l + 1), Err(l + 1));
        // What it replaces is not counted twice.
        assert_eq!(within_agent_limit(l, 100, 100), Ok(()));
        assert_eq!(within_agent_limit(l, 100, 101), Err(l + 1));
        // Past the share (the user filled it), a set that shrinks is taken, one that grows not.
        assert_eq!(within_agent_limit(l + 500, 300, 200), Ok(()));
        assert_eq!(within_agent_limit(l + 500, 300, 300), Ok(()));
        assert_eq!(within_agent_limit(l + 500, 300, 301), Err(l + 501));
        assert_eq!(within_agent_limit(usize::MAX, 0, 1), Ok(()));
    }

    #[test]
    fn the_rings_grow_only_below_the_share() {
        let l = AGENT_LIMIT_BYTES;
        assert_eq!(rings_limit(1000, 10, 0), 1000);
        assert_eq!(rings_limit(1000, 10, l - 50), 60);
        assert_eq!(rings_limit(1000, 10, l), 10);
        assert_eq!(rings_limit(1000, 10, l + 99), 10);
        assert_eq!(rings_limit(1000, usize::MAX, 0), 1000);
    }
}
