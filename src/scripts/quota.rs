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
/// Most bytes a script's source may take as Chrome stores it ([`string_json_len`]): one and a
/// half times the tools' 256 KiB of text, room for the escapes an ordinary script holds (a
/// newline or a tab is two bytes, a `<` six), so the room a delete needs is bounded (R14:
/// 256 KiB of `<` is 1.5 MiB).
pub const MAX_STORED_SOURCE_BYTES: usize = 384 * 1024;
/// Kept free by the user's own switches: one that would leave less keeps no copy of the
/// version it replaced in the history (R13: each switch of a 250 KB script copied its source,
/// and after eight the user could delete nothing). A delete writes the script's trash copy —
/// its source and its record, which repeats the source's header at most — before it removes
/// the live one: at most twice [`MAX_STORED_SOURCE_BYTES`], and a little.
pub const DELETE_ROOM_BYTES: usize = 2 * MAX_STORED_SOURCE_BYTES + 64 * 1024;
/// What the audit log's two rings may hold at most: 1,000 entries each, an entry a few hundred
/// bytes (a name is kept to `guard::audit::MAX_NAME_STORED_BYTES` as Chrome stores it; the
/// test `a_full_log_stays_within_its_allowance_whatever_the_names` adds the worst up).
pub const AUDIT_ALLOWANCE_BYTES: usize = 1024 * 1024;

/// How full an agent's write may leave `chrome.storage.local`, and so may what grows without
/// the user's hand — a script's `GM_setValue`, the run reports' rings (`gm::store`,
/// `provider::runs`): the quota less the user's reserve and the audit's allowance. Past it an
/// agent's write, or a change of values, is refused unless it frees bytes, and a run report
/// takes the place of its script's older ones; so whatever agents write, whatever their
/// scripts' values hold and however many pages report runs, the user can still turn a script
/// off, delete it or undo (R9: an agent filled the storage to the byte in 46 writes, and every
/// change of the user's was then refused). Each bounds itself at its own write, against what Chrome counts in use:
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

/// The bytes `chrome.storage` counts for one item: the key and the value's JSON as Chrome
/// writes it ([`chrome_json_len`]; R12: counted as `serde_json` writes it, a source of `<`
/// took six times the bytes measured).
pub fn item_bytes(key: &str, v: &Value) -> usize {
    key.len().saturating_add(chrome_json_len(v))
}

/// The length of `v` as Chrome's `base::JSONWriter` writes it, which its storage quota and
/// `getBytesInUse` count (`SettingsStorageQuotaEnforcer`): strings escape `<` as `\u003C` and
/// U+2028/U+2029 (six bytes each, measured in Chromium 156); a number that is not an int32 is
/// a double, written in its shortest digits with an exponent from 10^12 (a timestamp in ms,
/// `1700000000001`, is `1.700000000001e+12`), else `.0` added when integral.
pub fn chrome_json_len(v: &Value) -> usize {
    match v {
        Value::Null => 4,
        Value::Bool(b) => 4 + usize::from(!*b),
        Value::Number(n) => number_len(n),
        Value::String(s) => string_json_len(s),
        Value::Array(a) => a.iter().fold(2 + a.len().saturating_sub(1), |n, x| {
            n.saturating_add(chrome_json_len(x))
        }),
        Value::Object(o) => o.iter().fold(2 + o.len().saturating_sub(1), |n, (k, x)| {
            n.saturating_add(string_json_len(k))
                .saturating_add(1)
                .saturating_add(chrome_json_len(x))
        }),
    }
}

/// A JSON string's length with its quotes, escaped as Chrome escapes it (by bytes: U+2028 and
/// U+2029 are `E2 80 A8`/`A9` in UTF-8, and no other character's bytes hold `E2 80 A8`).
pub fn string_json_len(s: &str) -> usize {
    let b = s.as_bytes();
    let extra = b.iter().enumerate().fold(0usize, |n, (i, &c)| {
        n.saturating_add(match c {
            b'"' | b'\\' | 0x08 | 0x0c | b'\n' | b'\r' | b'\t' => 1,
            b'<' | 0x00..=0x1f => 5,
            0xe2 if b.get(i + 1) == Some(&0x80) && matches!(b.get(i + 2), Some(0xa8 | 0xa9)) => 3,
            _ => 0,
        })
    });
    b.len().saturating_add(2).saturating_add(extra)
}

/// A number's length as Chrome writes the double JavaScript gave it (an int32 as an integer).
fn number_len(n: &serde_json::Number) -> usize {
    let Some(f) = n.as_f64().filter(|f| f.is_finite()) else {
        return 4; // `null`: not a JSON number in JavaScript.
    };
    if f.fract() == 0.0 && f >= f64::from(i32::MIN) && f <= f64::from(i32::MAX) {
        // `{}` of an integral f64 prints its integer digits (`-0` counts as `0`: V8 gives it as
        // the int32 0).
        return format!("{}", f.abs()).len() + usize::from(f < 0.0);
    }
    // Shortest round-trip digits and the decimal exponent, from Rust's `{:e}`: `d.ddde±x`.
    let e = format!("{:e}", f.abs());
    let (mantissa, exp) = e.split_once('e').unwrap_or((e.as_str(), "0"));
    let digits = mantissa.len() - usize::from(mantissa.contains('.'));
    let exp: i32 = exp.parse().unwrap_or(0);
    let sign = usize::from(f < 0.0);
    // `base::NumberToString`: decimal for exponents -6 to 11, else `d.ddde+x` / `de-x`.
    if (-6..12).contains(&exp) {
        // Digits before the decimal point: 0.000ddd, ddd000 (and `.0` added by the writer),
        // or dd.d.
        let point = exp + 1;
        let zeros = usize::try_from(point.unsigned_abs()).unwrap_or(0);
        let body = if point <= 0 {
            2 + zeros + digits
        } else if zeros >= digits {
            zeros + 2
        } else {
            digits + 1
        };
        sign + body
    } else {
        let exp_digits = exp.unsigned_abs().to_string().len();
        sign + digits + usize::from(digits > 1) + 2 + exp_digits
    }
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
    use serde_json::json;

    /// What Chromium 156's `getBytesInUse` counted for each value (less the key), measured.
    #[test]
    fn values_count_as_chrome_writes_them() {
        for (v, chrome) in [
            (json!("a"), 3),
            (json!("<"), 8),
            (json!(">"), 3),
            (json!("\u{2028}"), 8),
            (json!("&"), 3),
            (json!("\u{7f}"), 3),
            (json!("\u{1}"), 8),
            (json!(5), 1),
            (json!(1_700_000_000_001u64), 18),
            (json!(1.5), 3),
            (json!({"a": [1, "x"]}), 13),
            (json!(1e21), 5),
            (json!(1e-7), 4),
            (json!("é"), 4),
            (json!("😀"), 6),
        ] {
            assert_eq!(chrome_json_len(&v), chrome, "{v}");
        }
        // Measured too, as `base::NumberToString` and the writer give them.
        for (v, chrome) in [
            (json!(-3), 2),
            (json!(2_147_483_648u64), 12),   // 2147483648.0
            (json!(999_999_999_999u64), 14), // 999999999999.0
            (json!(1e12), 5),                // 1e+12
            (json!(1_700_000_000_000.0), 7), // 1.7e+12
            (json!(-1.25e15), 9),            // -1.25e+15
            (json!(0.001), 5),
            (json!(1e-6), 8), // 0.000001
            (json!("\"\\\n"), 8),
            (json!(null), 4),
            (json!(false), 5),
            (json!([]), 2),
            (json!({}), 2),
            (json!("\t"), 4),
            (json!(1.5e20), 7), // 1.5e+20
            (json!(-0.0), 1),   // JSON.parse("-0.0") is -0, stored as 0
        ] {
            assert_eq!(chrome_json_len(&v), chrome, "{v}");
        }
        assert_eq!(item_bytes("k<", &json!("<")), 2 + 8);
    }

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
}
