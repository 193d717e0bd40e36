//! The backup file: every script as one JSON document that keeps its source (metadata included)
//! and enabled state, and (when the user asks for them) its GM values, and its reading. A backup
//! is hostile input like any other: its size is bounded before it is parsed, its version is
//! checked (a newer one is refused naming both numbers), and every entry is checked before
//! anything is written (`import` writes them all in one `set`, or none).
//!
//! Versions: 1 holds scripts; 2 adds an optional `"values"` object per script (key → the JSON
//! text `GM_setValue` stored). An export is written with the lowest version that holds it (1
//! without values), so a backup without values stays readable by older extensions; every
//! version up to [`VERSION`] is read.

use super::import::Item;
use super::record::ScriptRecord;
use super::store::MAX_SCRIPTS;
use crate::gm::values::{self, Op, ValueError, Values};
use crate::tools::catalog::MAX_SOURCE_BYTES;
use serde_json::{json, Value};
use std::fmt;

pub const FORMAT: &str = "lumo-userscripts-backup";
/// The newest format version read and written.
pub const VERSION: u64 = 2;
/// The version of a backup without values (what every earlier extension reads).
pub const VERSION_SCRIPTS_ONLY: u64 = 1;
/// The largest backup read: every script at the source limit would not fit in
/// `chrome.storage.local` anyway, so this bounds the parse, not what is kept.
pub const MAX_BACKUP_BYTES: usize = 20 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackupError {
    TooLarge {
        bytes: usize,
        max: usize,
    },
    NotJson(String),
    NotABackup,
    NewerVersion {
        found: u64,
        supported: u64,
    },
    BadVersion,
    Damaged(String),
    TooMany {
        count: usize,
        max: usize,
    },
    /// One script's values break a bound `GM_setValue` keeps (key length, JSON, its bytes or
    /// keys).
    Values {
        script: String,
        error: ValueError,
    },
    /// The values of all scripts together hold more than the total `GM_setValue` allows.
    ValuesTotal {
        bytes: usize,
    },
}

impl fmt::Display for BackupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackupError::TooLarge { bytes, max } => write!(
                f,
                "the backup is {bytes} bytes, over the {max}-byte limit; nothing was restored"
            ),
            BackupError::NotJson(e) => write!(
                f,
                "not a Lumo Userscripts backup (not JSON: {e}); nothing was restored"
            ),
            BackupError::NotABackup => write!(
                f,
                "not a Lumo Userscripts backup (no \"format\": \"{FORMAT}\"); nothing was restored"
            ),
            BackupError::NewerVersion { found, supported } => write!(
                f,
                "this backup is format version {found}, newer than version {supported}, the newest this extension reads: update the extension first; nothing was restored"
            ),
            BackupError::BadVersion => write!(
                f,
                "the backup is damaged: \"version\" must be a whole number from 1; nothing was restored"
            ),
            BackupError::Damaged(why) => {
                write!(f, "the backup is damaged: {why}; nothing was restored")
            }
            BackupError::TooMany { count, max } => write!(
                f,
                "the backup lists {count} scripts, more than the {max} this provider keeps; nothing was restored"
            ),
            // Not a bound: the file is damaged there.
            BackupError::Values {
                script,
                error: ValueError::NotJson,
            } => write!(
                f,
                "the backup is damaged: a value of {script} is not JSON text (GM values are stored as JSON); nothing was restored"
            ),
            BackupError::Values { script, error } => write!(
                f,
                "the values of {script} are over a bound this provider keeps ({}); nothing was restored",
                value_bound(error)
            ),
            BackupError::ValuesTotal { bytes } => write!(
                f,
                "the backup's values take {bytes} bytes, over the {} all scripts may hold; nothing was restored",
                values::MAX_TOTAL_BYTES
            ),
        }
    }
}

/// The bound a backup's values broke, in the words of a backup (not of a `GM_setValue` call).
fn value_bound(e: &ValueError) -> String {
    match e {
        ValueError::KeyTooLong { len } => format!(
            "a key of {len} bytes, longer than the {} allowed",
            values::MAX_KEY_BYTES
        ),
        ValueError::NotJson => "a value that is not JSON text".to_owned(),
        ValueError::ScriptFull { bytes } => format!(
            "{bytes} bytes, over the {} one script may hold",
            values::MAX_SCRIPT_BYTES
        ),
        ValueError::TooManyKeys { count } | ValueError::TooManyKeysInOp { count } => format!(
            "{count} keys, over the {} one script may hold",
            values::MAX_KEYS
        ),
        ValueError::AllFull { bytes } => format!(
            "{bytes} bytes, over the {} all scripts may hold",
            values::MAX_TOTAL_BYTES
        ),
    }
}

/// One script of a backup: its record, its source, and its values when the user exported them.
pub type Exported = (ScriptRecord, String, Option<Values>);

/// One script of a backup, as written by [`export`].
fn entry((record, source, values): &Exported) -> Value {
    let mut e = json!({
        "uuid": record.uuid,
        "name": record.metadata.name,
        "namespace": record.metadata.namespace,
        "enabled": record.enabled,
        "source": source,
    });
    if let (Some(v), Some(o)) = (values, e.as_object_mut()) {
        o.insert("values".to_owned(), v.encode());
    }
    e
}

/// The backup of `scripts` (records with their sources, and values or not), made at `now_ms`.
pub fn export(scripts: &[Exported], now_ms: f64) -> Value {
    let version = if scripts.iter().any(|s| s.2.is_some()) {
        VERSION
    } else {
        VERSION_SCRIPTS_ONLY
    };
    json!({
        "format": FORMAT,
        "version": version,
        "exportedAt": now_ms,
        "scripts": scripts.iter().map(entry).collect::<Vec<_>>(),
    })
}

/// Reads a backup into the items an import stores. The metadata of each source is checked by
/// the import (the same check for a backup and for `.user.js` files).
pub fn parse(text: &str) -> Result<Vec<Item>, BackupError> {
    if text.len() > MAX_BACKUP_BYTES {
        return Err(BackupError::TooLarge {
            bytes: text.len(),
            max: MAX_BACKUP_BYTES,
        });
    }
    // serde_json bounds nesting (128 levels), so a deep document is an error, not a crash.
    let v: Value =
        crate::text::parse_json(text).map_err(|e| BackupError::NotJson(e.to_string()))?;
    let Some(top) = v.as_object() else {
        return Err(BackupError::NotABackup);
    };
    if top.get("format").and_then(Value::as_str) != Some(FORMAT) {
        return Err(BackupError::NotABackup);
    }
    let version = match top.get("version").and_then(Value::as_u64) {
        Some(n) if n > VERSION => {
            return Err(BackupError::NewerVersion {
                found: n,
                supported: VERSION,
            })
        }
        Some(n) if n >= 1 => n,
        _ => return Err(BackupError::BadVersion),
    };
    let Some(list) = top.get("scripts").and_then(Value::as_array) else {
        return Err(BackupError::Damaged("\"scripts\" must be a list".into()));
    };
    if list.len() > MAX_SCRIPTS {
        return Err(BackupError::TooMany {
            count: list.len(),
            max: MAX_SCRIPTS,
        });
    }
    let items = list
        .iter()
        .enumerate()
        .map(|(i, s)| item(i.saturating_add(1), s, version))
        .collect::<Result<Vec<_>, _>>()?;
    // The total bound, over the backup alone (the import checks it again with what is stored).
    let bytes = items
        .iter()
        .filter_map(|i| i.values.as_ref())
        .fold(0usize, |n, v| n.saturating_add(v.bytes()));
    if bytes > values::MAX_TOTAL_BYTES {
        return Err(BackupError::ValuesTotal { bytes });
    }
    Ok(items)
}

/// A backup entry's values (version 2 on), held to the bounds of `GM_setValue`: `None` when
/// the entry has none (the restore then leaves a replaced script's values as they are).
fn values_of(
    o: &serde_json::Map<String, Value>,
    label: &str,
) -> Result<Option<Values>, BackupError> {
    let bad = |error| BackupError::Values {
        script: label.to_owned(),
        error,
    };
    let map = match o.get("values") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(m)) => m,
        Some(_) => {
            return Err(BackupError::Damaged(format!(
                "{label} has \"values\" that are not an object"
            )))
        }
    };
    // Bounded before anything is copied.
    if map.len() > values::MAX_KEYS {
        return Err(bad(ValueError::TooManyKeys { count: map.len() }));
    }
    let mut pairs = Vec::with_capacity(map.len());
    for (k, v) in map {
        let Some(text) = v.as_str() else {
            return Err(BackupError::Damaged(format!(
                "{label} has a value that is not JSON text (key {:?})",
                crate::text::ellipsize(k, 40)
            )));
        };
        pairs.push((k.clone(), text.to_owned()));
    }
    let mut vals = Values::default();
    vals.apply(&Op::Set(pairs), 0).map_err(bad)?;
    Ok(Some(vals))
}

fn item(n: usize, v: &Value, version: u64) -> Result<Item, BackupError> {
    let damaged = |why: &str| BackupError::Damaged(format!("script {n} {why}"));
    let Some(o) = v.as_object() else {
        return Err(damaged("is not an object"));
    };
    let Some(source) = o.get("source").and_then(Value::as_str) else {
        return Err(damaged("has no \"source\" text"));
    };
    if source.len() > MAX_SOURCE_BYTES {
        return Err(damaged(&format!(
            "is {} bytes, over the {MAX_SOURCE_BYTES}-byte limit",
            source.len()
        )));
    }
    let enabled = match o.get("enabled") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => return Err(damaged("has an \"enabled\" that is not true or false")),
    };
    // The name shown in messages: the entry's own (bounded), else its position.
    let label = o
        .get("name")
        .and_then(Value::as_str)
        .map(super::import::label)
        .unwrap_or_else(|| format!("script {n}"));
    // Version 1 had no values: a field of that name in it is not ours to read.
    let values = if version >= 2 {
        values_of(o, &format!("script {n} ({label})"))?
    } else {
        None
    };
    Ok(Item {
        label,
        source: source.to_owned(),
        enabled,
        values,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_backups_are_refused_with_clear_errors() {
        let cases: Vec<(String, &str)> = vec![
            ("[]".into(), "no \"format\""),
            ("{".into(), "not JSON"),
            ("[".repeat(10_000), "not JSON"),
            (
                json!({"format": FORMAT, "version": 7, "scripts": []}).to_string(),
                "format version 7, newer than version 2",
            ),
            (
                json!({"format": FORMAT, "version": 0, "scripts": []}).to_string(),
                "\"version\" must be",
            ),
            (
                json!({"format": FORMAT, "version": "1", "scripts": []}).to_string(),
                "\"version\" must be",
            ),
            (
                json!({"format": FORMAT, "version": 1}).to_string(),
                "\"scripts\" must be a list",
            ),
            (
                json!({"format": FORMAT, "version": 1, "scripts": [1]}).to_string(),
                "script 1 is not an object",
            ),
            (
                json!({"format": FORMAT, "version": 1, "scripts": [{"source": "x", "enabled": "yes"}]})
                    .to_string(),
                "\"enabled\" that is not",
            ),
            (
                json!({"format": FORMAT, "version": 1, "scripts": [{"source": "x".repeat(MAX_SOURCE_BYTES + 1)}]})
                    .to_string(),
                "over the 262144-byte limit",
            ),
            (
                json!({"format": FORMAT, "version": 1, "scripts": vec![json!({"source": ""}); MAX_SCRIPTS + 1]})
                    .to_string(),
                "more than the 2000",
            ),
            (" ".repeat(MAX_BACKUP_BYTES + 1), "over the 20971520-byte limit"),
            (
                json!({"format": FORMAT, "version": 2, "scripts": [{"name": "V", "source": "x", "values": [1]}]})
                    .to_string(),
                "\"values\" that are not an object",
            ),
            (
                json!({"format": FORMAT, "version": 2, "scripts": [{"source": "x", "values": {"k": 1}}]})
                    .to_string(),
                "not JSON text (key \"k\")",
            ),
            (
                json!({"format": FORMAT, "version": 2, "scripts": [{"name": "V", "source": "x", "values": {"k": "not json"}}]})
                    .to_string(),
                "the backup is damaged: a value of script 1 (V) is not JSON text",
            ),
            (
                json!({"format": FORMAT, "version": 2, "scripts": [{"source": "x", "values": {"k".repeat(values::MAX_KEY_BYTES + 1): "1"}}]})
                    .to_string(),
                "longer than the 256 allowed",
            ),
            (
                json!({"format": FORMAT, "version": 2, "scripts": [{"source": "x", "values": {"k": format!("\"{}\"", "x".repeat(values::MAX_SCRIPT_BYTES))}}]})
                    .to_string(),
                "over the 262144 one script may hold",
            ),
            (
                json!({"format": FORMAT, "version": 2, "scripts": [{"source": "x", "values": (0..=values::MAX_KEYS).map(|i| (i.to_string(), json!("1"))).collect::<serde_json::Map<_, _>>()}]})
                    .to_string(),
                "1001 keys, over the 1000",
            ),
            (
                json!({"format": FORMAT, "version": 2, "scripts": vec![json!({"source": "x", "values": {"k": format!("\"{}\"", "x".repeat(values::MAX_SCRIPT_BYTES - 10))}}); 9]})
                    .to_string(),
                "over the 2097152 all scripts may hold",
            ),
        ];
        for (text, want) in cases {
            let e = parse(&text).expect_err(want).to_string();
            assert!(e.contains(want), "{e} (wanted {want})");
            assert!(e.contains("nothing was restored"), "{e}");
        }
    }

    #[test]
    fn values_are_read_from_version_2_and_ignored_in_version_1() {
        let entry = json!({"source": "x", "values": {"a": "1", "b": "{\"c\":[true]}"}});
        let v2 = parse(&json!({"format": FORMAT, "version": 2, "scripts": [entry]}).to_string())
            .unwrap();
        let vals = v2[0].values.as_ref().unwrap();
        assert_eq!(
            (vals.get("a"), vals.get("b")),
            (Some("1"), Some("{\"c\":[true]}"))
        );
        let v1 = parse(&json!({"format": FORMAT, "version": 1, "scripts": [entry]}).to_string())
            .unwrap();
        assert_eq!(v1[0].values, None);
        // No "values" in a v2 entry: none to restore (not an empty set that would clear them).
        let none = parse(
            &json!({"format": FORMAT, "version": 2, "scripts": [{"source": "x"}]}).to_string(),
        )
        .unwrap();
        assert_eq!(none[0].values, None);
    }
}
