//! The audit log: one entry per write attempt, whatever its result. An entry holds the time, the
//! tool, the caller, the result, the target uuid and a sha256 digest of the canonical JSON of the
//! arguments — never an argument value, so script source never enters the log.
//!
//! Stored in `chrome.storage.local` as chunks of [`CHUNK`] entries (`audit/<n>`) plus a head
//! (`audit/head`), so appending rewrites one small chunk, not the whole log. The oldest chunk is
//! dropped past [`MAX_CHUNKS`]: the log keeps the newest 900–1000 entries.

use crate::env::{Area, Storage};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub const CHUNK: usize = 100;
pub const MAX_CHUNKS: u64 = 10;
#[allow(clippy::cast_possible_truncation)] // 10 fits any usize
pub const MAX_ENTRIES: usize = CHUNK * MAX_CHUNKS as usize;
pub const HEAD_KEY: &str = "audit/head";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub at: f64,
    pub tool: String,
    pub caller: String,
    /// `"ok"` or an error code (`WRITE_DISABLED`, `RATE_LIMITED`, `CONFLICT`, …).
    pub result: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// sha256 (hex) of the canonical JSON of the arguments.
    pub digest: String,
}

/// Chunks `first..=last` exist.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
struct Head {
    first: u64,
    last: u64,
}

fn chunk_key(n: u64) -> String {
    format!("audit/{n}")
}

fn decode_chunk(v: Option<&Value>) -> Vec<Entry> {
    // A damaged entry is skipped rather than costing the rest of the chunk.
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|e| serde_json::from_value(e.clone()).ok())
                .collect()
        })
        .unwrap_or_default()
}

async fn head<S: Storage>(s: &S) -> Result<Head, String> {
    let got = s
        .get(Area::Local, &[HEAD_KEY])
        .await
        .map_err(|e| e.to_string())?;
    Ok(got
        .get(HEAD_KEY)
        .and_then(|v| serde_json::from_value::<Head>(v.clone()).ok())
        // A head that cannot be right (or would overflow) starts the log over rather than panic.
        .filter(|h| h.first <= h.last && h.last - h.first < MAX_CHUNKS && h.last < u64::MAX / 2)
        .unwrap_or_default())
}

/// Appends one entry. The caller serializes appends (the provider's audit lock).
pub async fn append<S: Storage>(s: &S, entry: &Entry) -> Result<(), String> {
    let mut h = head(s).await?;
    let key = chunk_key(h.last);
    let got = s
        .get(Area::Local, &[&key])
        .await
        .map_err(|e| e.to_string())?;
    let mut chunk = decode_chunk(got.get(&key));
    let mut items = Map::new();
    let mut drop = None;
    if chunk.len() >= CHUNK {
        h.last += 1;
        chunk.clear();
        if h.last - h.first >= MAX_CHUNKS {
            drop = Some(chunk_key(h.first));
            h.first += 1;
        }
    }
    chunk.push(entry.clone());
    items.insert(
        chunk_key(h.last),
        serde_json::to_value(&chunk).map_err(|e| e.to_string())?,
    );
    items.insert(
        HEAD_KEY.to_owned(),
        serde_json::to_value(h).map_err(|e| e.to_string())?,
    );
    s.set(Area::Local, items).await.map_err(|e| e.to_string())?;
    if let Some(k) = drop {
        let _ = s.remove(Area::Local, &[&k]).await;
    }
    Ok(())
}

/// The whole log, newest first.
pub async fn read_all<S: Storage>(s: &S) -> Result<Vec<Entry>, String> {
    let h = head(s).await?;
    let keys: Vec<String> = (h.first..=h.last).map(chunk_key).collect();
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let got = s.get(Area::Local, &refs).await.map_err(|e| e.to_string())?;
    let mut out: Vec<Entry> = keys.iter().flat_map(|k| decode_chunk(got.get(k))).collect();
    out.reverse();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::memory::MemoryEnv;
    use futures::executor::block_on;

    fn entry(i: usize) -> Entry {
        Entry {
            at: i as f64,
            tool: "write_script".into(),
            caller: "a".repeat(32),
            result: "ok".into(),
            target: None,
            digest: format!("{i:064x}"),
        }
    }

    #[test]
    fn appends_newest_first_and_stays_bounded() {
        let env = MemoryEnv::new();
        for i in 0..(MAX_ENTRIES + 250) {
            block_on(append(&env, &entry(i))).unwrap();
        }
        let all = block_on(read_all(&env)).unwrap();
        assert!(
            all.len() <= MAX_ENTRIES && all.len() > MAX_ENTRIES - CHUNK,
            "{}",
            all.len()
        );
        assert_eq!(all[0].at, (MAX_ENTRIES + 249) as f64);
        assert!(all.windows(2).all(|w| w[0].at > w[1].at));
        let chunks = env
            .dump(Area::Local)
            .keys()
            .filter(|k| k.starts_with("audit/") && *k != HEAD_KEY)
            .count();
        assert!(chunks as u64 <= MAX_CHUNKS);
    }

    #[test]
    fn damaged_log_is_read_around() {
        let env = MemoryEnv::new();
        block_on(append(&env, &entry(1))).unwrap();
        block_on(append(&env, &entry(2))).unwrap();
        env.areas
            .borrow_mut()
            .get_mut(&Area::Local)
            .unwrap()
            .get_mut("audit/0")
            .unwrap()
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!(7));
        assert_eq!(block_on(read_all(&env)).unwrap().len(), 2);
        env.areas
            .borrow_mut()
            .get_mut(&Area::Local)
            .unwrap()
            .insert(HEAD_KEY.into(), serde_json::json!("junk"));
        assert_eq!(block_on(read_all(&env)).unwrap().len(), 2);
        block_on(append(&env, &entry(3))).unwrap();
        assert_eq!(block_on(read_all(&env)).unwrap()[0].at, 3.0);
    }
}
