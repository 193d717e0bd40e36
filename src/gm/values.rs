//! A script's `GM_setValue` store: its values, their bounds, and the changes one operation
//! makes. Pure: the provider loads `values/<uuid>`, applies an [`Op`] here and saves what comes
//! back in one `storage.set`.
//!
//! Values travel and are stored as JSON text (what `JSON.stringify` gave in the script's world),
//! so the core never interprets them and a value costs exactly its text. Every bound is checked
//! on the result *before* anything changes: an operation that would pass one is refused whole,
//! with an error the script sees, and the store is left as it was.

use crate::vec_map::VecMap;

use serde_json::{Map, Value};

/// Most bytes of keys plus values one script may hold (what is also put in its registered code,
/// so it is paid on every page load where the script runs).
pub const MAX_SCRIPT_BYTES: usize = 256 * 1024;
/// Most bytes of values all scripts together may hold (well inside `chrome.storage.local`'s
/// 10 MB default quota, next to the 4 MiB of history: no `unlimitedStorage` needed).
pub const MAX_TOTAL_BYTES: usize = 2 * 1024 * 1024;
/// Most keys one script may hold.
pub const MAX_KEYS: usize = 1000;
/// Longest key, in bytes.
pub const MAX_KEY_BYTES: usize = 256;
/// Most keys one operation may name.
pub const MAX_KEYS_PER_OP: usize = 1000;

/// The storage key of a script's values.
pub fn storage_key(uuid: &str) -> String {
    format!("values/{uuid}")
}

/// The storage key of the per-script byte counts (for the total bound).
pub const BUDGET_KEY: &str = "values/budget";

/// One script's values: key → JSON text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Values(VecMap<String, String>);

/// What a script asks to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// (key, JSON text) pairs, set in order.
    Set(Vec<(String, String)>),
    Delete(Vec<String>),
}

/// Why an operation was refused; the script sees the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueError {
    KeyTooLong { len: usize },
    TooManyKeysInOp { count: usize },
    NotJson,
    ScriptFull { bytes: usize },
    TooManyKeys { count: usize },
    AllFull { bytes: usize },
}

impl std::fmt::Display for ValueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ValueError::KeyTooLong { len } => write!(
                f,
                "GM_setValue: a key of {len} bytes is longer than the {MAX_KEY_BYTES} allowed"
            ),
            ValueError::TooManyKeysInOp { count } => write!(
                f,
                "GM values: {count} keys in one call; at most {MAX_KEYS_PER_OP}"
            ),
            ValueError::NotJson => f.write_str("GM_setValue: the value is not JSON-serializable"),
            ValueError::ScriptFull { bytes } => write!(
                f,
                "GM_setValue refused: this script's values would take {bytes} bytes, over its \
                 limit of {MAX_SCRIPT_BYTES}; nothing was changed"
            ),
            ValueError::TooManyKeys { count } => write!(
                f,
                "GM_setValue refused: this script would hold {count} keys, over the limit of \
                 {MAX_KEYS}; nothing was changed"
            ),
            ValueError::AllFull { bytes } => write!(
                f,
                "GM_setValue refused: the values of all scripts would take {bytes} bytes, over \
                 the total limit of {MAX_TOTAL_BYTES}; nothing was changed"
            ),
        }
    }
}

/// One key's change, for value-change listeners (`None` = absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub key: String,
    pub old: Option<String>,
    pub new: Option<String>,
}

impl Values {
    /// Reads a stored `values/<uuid>` leniently: entries that are not strings are dropped (a
    /// damaged store loses those keys, not the script).
    pub fn decode(v: Option<&Value>) -> Values {
        let map = v
            .and_then(Value::as_object)
            .map(|o| {
                o.iter()
                    .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        Values(map)
    }

    pub fn encode(&self) -> Value {
        Value::Object(
            self.0
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect::<Map<String, Value>>(),
        )
    }

    /// As `[[key, JSON text], …]`, for code that builds the page's copy with
    /// `Object.fromEntries`: an object literal would drop a key named `__proto__` (in a literal
    /// it sets the prototype), so a value stored under it would not be read back.
    pub fn encode_pairs(&self) -> Value {
        Value::Array(
            self.0
                .iter()
                .map(|(k, v)| {
                    Value::Array(vec![Value::String(k.clone()), Value::String(v.clone())])
                })
                .collect(),
        )
    }

    /// Bytes counted against the bounds: every key and value's UTF-8 length.
    pub fn bytes(&self) -> usize {
        self.0.iter().fold(0usize, |n, (k, v)| {
            n.saturating_add(k.len()).saturating_add(v.len())
        })
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// Applies `op` if the result stays within every bound, given the bytes all *other*
    /// scripts hold; returns the changes (keys whose value really changed). On an error `self`
    /// is unchanged.
    pub fn apply(&mut self, op: &Op, others_bytes: usize) -> Result<Vec<Change>, ValueError> {
        let count = match op {
            Op::Set(pairs) => pairs.len(),
            Op::Delete(keys) => keys.len(),
        };
        if count > MAX_KEYS_PER_OP {
            return Err(ValueError::TooManyKeysInOp { count });
        }
        let mut next = self.0.clone();
        match op {
            Op::Set(pairs) => {
                for (k, v) in pairs {
                    if k.len() > MAX_KEY_BYTES {
                        return Err(ValueError::KeyTooLong { len: k.len() });
                    }
                    if serde_json::from_str::<serde::de::IgnoredAny>(v).is_err() {
                        return Err(ValueError::NotJson);
                    }
                    next.insert(k.clone(), v.clone());
                }
            }
            Op::Delete(keys) => {
                for k in keys {
                    next.remove(k);
                }
            }
        }
        let candidate = Values(next);
        let bytes = candidate.bytes();
        if bytes > MAX_SCRIPT_BYTES {
            return Err(ValueError::ScriptFull { bytes });
        }
        if candidate.0.len() > MAX_KEYS {
            return Err(ValueError::TooManyKeys {
                count: candidate.0.len(),
            });
        }
        let total = bytes.saturating_add(others_bytes);
        if total > MAX_TOTAL_BYTES && bytes > self.bytes() {
            return Err(ValueError::AllFull { bytes: total });
        }
        let changes = diff(&self.0, &candidate.0);
        *self = candidate;
        Ok(changes)
    }
}

fn diff(old: &VecMap<String, String>, new: &VecMap<String, String>) -> Vec<Change> {
    let mut out = Vec::new();
    for (k, v) in new {
        if old.get(k) != Some(v) {
            out.push(Change {
                key: k.clone(),
                old: old.get(k).cloned(),
                new: Some(v.clone()),
            });
        }
    }
    for (k, v) in old {
        if !new.contains_key(k) {
            out.push(Change {
                key: k.clone(),
                old: Some(v.clone()),
                new: None,
            });
        }
    }
    out
}

/// The budget (`values/budget`: uuid → bytes) read leniently.
pub fn decode_budget(v: Option<&Value>) -> VecMap<String, usize> {
    v.and_then(Value::as_object)
        .map(|o| {
            o.iter()
                .filter_map(|(k, n)| {
                    n.as_u64()
                        .and_then(|n| usize::try_from(n).ok())
                        .map(|n| (k.clone(), n))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Bytes held by every script but `uuid`.
pub fn others_bytes(budget: &VecMap<String, usize>, uuid: &str) -> usize {
    budget
        .iter()
        .filter(|(k, _)| k.as_str() != uuid)
        .fold(0usize, |n, (_, b)| n.saturating_add(*b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(k: &str, v: &str) -> Op {
        Op::Set(vec![(k.to_owned(), v.to_owned())])
    }

    #[test]
    fn set_get_delete_and_changes() {
        let mut v = Values::default();
        let c = v.apply(&set("a", "1"), 0).unwrap();
        assert_eq!(
            c,
            [Change {
                key: "a".into(),
                old: None,
                new: Some("1".into())
            }]
        );
        assert_eq!(v.get("a"), Some("1"));
        // Setting the same value changes nothing.
        assert!(v.apply(&set("a", "1"), 0).unwrap().is_empty());
        let c = v
            .apply(&Op::Delete(vec!["a".into(), "missing".into()]), 0)
            .unwrap();
        assert_eq!(
            c,
            [Change {
                key: "a".into(),
                old: Some("1".into()),
                new: None
            }]
        );
        assert_eq!(v, Values::default());
    }

    #[test]
    fn script_bound_refuses_whole_and_changes_nothing() {
        let mut v = Values::default();
        let big = format!("\"{}\"", "x".repeat(MAX_SCRIPT_BYTES - 10));
        v.apply(&set("k", &big), 0).unwrap();
        let before = v.clone();
        let e = v
            .apply(
                &Op::Set(vec![
                    ("ok".into(), "1".into()),
                    ("k2".into(), "\"xxxxxxxxxx\"".into()),
                ]),
                0,
            )
            .unwrap_err();
        assert!(matches!(e, ValueError::ScriptFull { .. }), "{e:?}");
        assert!(e.to_string().contains("nothing was changed"));
        assert_eq!(v, before);
        // Exactly at the bound is fine: replacing with a smaller value always is.
        v.apply(&set("k", "1"), 0).unwrap();
    }

    #[test]
    fn total_bound_counts_other_scripts_but_never_blocks_shrinking() {
        let mut v = Values::default();
        v.apply(&set("a", "\"0123456789\""), 0).unwrap();
        let e = v.apply(&set("b", "1"), MAX_TOTAL_BYTES).unwrap_err();
        assert!(matches!(e, ValueError::AllFull { .. }));
        // Deleting (or shrinking) is allowed even when the total is over.
        v.apply(&Op::Delete(vec!["a".into()]), MAX_TOTAL_BYTES + 5)
            .unwrap();
    }

    #[test]
    fn key_and_count_bounds() {
        let mut v = Values::default();
        let long = "k".repeat(MAX_KEY_BYTES + 1);
        assert!(matches!(
            v.apply(&set(&long, "1"), 0),
            Err(ValueError::KeyTooLong { .. })
        ));
        let many: Vec<(String, String)> = (0..=MAX_KEYS)
            .map(|i| (format!("{i}"), "1".into()))
            .collect();
        assert!(matches!(
            v.apply(&Op::Set(many), 0),
            Err(ValueError::TooManyKeysInOp { .. })
        ));
        let full: Vec<(String, String)> = (0..MAX_KEYS)
            .map(|i| (format!("{i}"), "1".into()))
            .collect();
        v.apply(&Op::Set(full), 0).unwrap();
        assert!(matches!(
            v.apply(&set("one-more", "1"), 0),
            Err(ValueError::TooManyKeys { .. })
        ));
        assert!(matches!(
            v.apply(&set("x", "not json"), 0),
            Err(ValueError::NotJson)
        ));
    }

    #[test]
    fn storage_round_trip_is_lenient() {
        let mut v = Values::default();
        v.apply(&set("a", "{\"b\":[1,2]}"), 0).unwrap();
        assert_eq!(Values::decode(Some(&v.encode())), v);
        let damaged = serde_json::json!({"a": "1", "b": 7, "c": null});
        assert_eq!(
            Values::decode(Some(&damaged)).keys().collect::<Vec<_>>(),
            ["a"]
        );
        assert_eq!(
            Values::decode(Some(&serde_json::json!([1]))),
            Values::default()
        );
        let b = decode_budget(Some(
            &serde_json::json!({"u1": 10, "u2": -1, "u3": "x", "u4": 5}),
        ));
        assert_eq!(others_bytes(&b, "u1"), 5);
    }
}
