//! The backup file: every script as one JSON document that keeps its source (metadata included)
//! and enabled state, and its reading. A backup is hostile input like any other: its size is
//! bounded before it is parsed, its version is checked (a newer one is refused naming both
//! numbers), and every entry is checked before anything is written (`import` writes them all in
//! one `set`, or none).

use super::import::Item;
use super::record::ScriptRecord;
use super::store::MAX_SCRIPTS;
use crate::tools::catalog::MAX_SOURCE_BYTES;
use serde_json::{json, Value};
use std::fmt;

pub const FORMAT: &str = "lumo-userscripts-backup";
pub const VERSION: u64 = 1;
/// The largest backup read: every script at the source limit would not fit in
/// `chrome.storage.local` anyway, so this bounds the parse, not what is kept.
pub const MAX_BACKUP_BYTES: usize = 20 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackupError {
    TooLarge { bytes: usize, max: usize },
    NotJson(String),
    NotABackup,
    NewerVersion { found: u64, supported: u64 },
    BadVersion,
    Damaged(String),
    TooMany { count: usize, max: usize },
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
        }
    }
}

/// One script of a backup, as written by [`export`].
fn entry(record: &ScriptRecord, source: &str) -> Value {
    json!({
        "uuid": record.uuid,
        "name": record.metadata.name,
        "namespace": record.metadata.namespace,
        "enabled": record.enabled,
        "source": source,
    })
}

/// The backup of `scripts` (records with their sources), made at `now_ms`.
pub fn export(scripts: &[(ScriptRecord, String)], now_ms: f64) -> Value {
    json!({
        "format": FORMAT,
        "version": VERSION,
        "exportedAt": now_ms,
        "scripts": scripts.iter().map(|(r, s)| entry(r, s)).collect::<Vec<_>>(),
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
    match top.get("version").and_then(Value::as_u64) {
        Some(n) if n > VERSION => {
            return Err(BackupError::NewerVersion {
                found: n,
                supported: VERSION,
            })
        }
        Some(n) if n >= 1 => {}
        _ => return Err(BackupError::BadVersion),
    }
    let Some(list) = top.get("scripts").and_then(Value::as_array) else {
        return Err(BackupError::Damaged("\"scripts\" must be a list".into()));
    };
    if list.len() > MAX_SCRIPTS {
        return Err(BackupError::TooMany {
            count: list.len(),
            max: MAX_SCRIPTS,
        });
    }
    list.iter()
        .enumerate()
        .map(|(i, s)| item(i.saturating_add(1), s))
        .collect()
}

fn item(n: usize, v: &Value) -> Result<Item, BackupError> {
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
        .map(|s| crate::text::ellipsize(s, 80))
        .unwrap_or_else(|| format!("script {n}"));
    Ok(Item {
        label,
        source: source.to_owned(),
        enabled,
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
                "format version 7, newer than version 1",
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
        ];
        for (text, want) in cases {
            let e = parse(&text).expect_err(want).to_string();
            assert!(e.contains(want), "{e} (wanted {want})");
            assert!(e.contains("nothing was restored"), "{e}");
        }
    }
}
