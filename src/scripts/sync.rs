//! Keeps `chrome.userScripts` in step with storage. Storage is the truth; registrations follow.
//! When the API is unavailable (the "Allow User Scripts" toggle is off, or was turned off while
//! running) writes still succeed and the registry is marked stale; [`reconcile`] brings it back
//! in line as soon as the API works again.

use super::record::ScriptRecord;
use super::registry::{self, Registration};
use super::store;
use crate::env::{Area, Capabilities, EnvError, Storage, UserScripts};
use serde_json::Value;

/// The registration a stored script should have (None: it must not be registered).
pub fn desired_for(record: &ScriptRecord, source: &str) -> Option<Registration> {
    if record.enabled {
        registry::desired(&record.uuid, &record.metadata, source)
    } else {
        None
    }
}

/// Brings one script's registration in line. `Ok(true)` when it is registered to run now.
pub async fn sync_one<E: UserScripts + Capabilities>(
    env: &E,
    uuid: &str,
    desired: Option<Registration>,
) -> Result<bool, EnvError> {
    if !env.user_scripts_available() {
        return Err(EnvError("chrome.userScripts is not available".into()));
    }
    let ids = [uuid.to_owned()];
    let existing = env.registered(Some(&ids)).await?;
    let is_registered = existing.iter().any(|r| r.id == uuid);
    match desired {
        Some(d) if is_registered => env.update(std::slice::from_ref(&d)).await.map(|()| true),
        Some(d) => env.register(std::slice::from_ref(&d)).await.map(|()| true),
        None if is_registered => env.unregister(&ids).await.map(|()| false),
        None => Ok(false),
    }
}

/// What a full reconcile did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    pub registered: usize,
    pub updated: usize,
    pub unregistered: usize,
    pub skipped: Vec<String>,
}

/// Makes Chrome's registrations exactly the enabled scripts of `snapshot` (the stored records).
pub async fn reconcile<E: Storage + UserScripts + Capabilities>(
    env: &E,
    snapshot: &store::Snapshot,
) -> Result<Report, String> {
    if !env.user_scripts_available() {
        return Err("chrome.userScripts is not available".into());
    }
    env.configure_world().await.map_err(|e| e.to_string())?;
    let enabled: Vec<&ScriptRecord> = snapshot.records.iter().filter(|r| r.enabled).collect();
    let keys: Vec<String> = enabled.iter().map(|r| store::source_key(&r.uuid)).collect();
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let sources = if refs.is_empty() {
        serde_json::Map::new()
    } else {
        env.get(Area::Local, &refs)
            .await
            .map_err(|e| e.to_string())?
    };
    let mut report = Report {
        skipped: snapshot
            .problems
            .iter()
            .map(|p| format!("{}: {}", p.uuid, p.message))
            .collect(),
        ..Report::default()
    };
    let mut desired = Vec::new();
    for (r, key) in enabled.iter().zip(&keys) {
        match sources.get(key).and_then(Value::as_str) {
            Some(src) => desired.extend(desired_for(r, src)),
            None => report
                .skipped
                .push(format!("{}: source is missing", r.uuid)),
        }
    }
    let actual = env.registered(None).await.map_err(|e| e.to_string())?;
    let plan = registry::plan(desired, &actual);
    if !plan.unregister.is_empty() {
        env.unregister(&plan.unregister)
            .await
            .map_err(|e| e.to_string())?;
    }
    // One by one, so a single script Chrome refuses does not keep the others from running.
    for r in &plan.update {
        match env.update(std::slice::from_ref(r)).await {
            Ok(()) => report.updated += 1,
            Err(e) => report.skipped.push(format!("{}: {e}", r.id)),
        }
    }
    for r in &plan.register {
        match env.register(std::slice::from_ref(r)).await {
            Ok(()) => report.registered += 1,
            Err(e) => report.skipped.push(format!("{}: {e}", r.id)),
        }
    }
    report.unregistered = plan.unregister.len();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::memory::MemoryEnv;
    use futures::executor::block_on;

    fn src(name: &str) -> String {
        format!("// ==UserScript==\n// @name {name}\n// @match https://example.com/*\n// ==/UserScript==\n")
    }

    fn create(env: &MemoryEnv, name: &str, enabled: bool) -> ScriptRecord {
        let snap = block_on(store::load_snapshot(env)).unwrap();
        block_on(store::create(
            env,
            &snap,
            "user",
            &src(name),
            enabled,
            1 << 20,
        ))
        .unwrap()
        .record
    }

    #[test]
    fn reconcile_registers_enabled_and_removes_strays() {
        let env = MemoryEnv::new();
        env.user_scripts.set(false);
        let a = create(&env, "A", true);
        let b = create(&env, "B", false);
        assert!(block_on(sync_one(&env, &a.uuid, desired_for(&a, &src("A")))).is_err());
        assert!(block_on(reconcile(
            &env,
            &block_on(store::load_snapshot(&env)).unwrap()
        ))
        .is_err());
        env.user_scripts.set(true);
        let stray = registry::desired("stray", &a.metadata, "x").unwrap();
        block_on(env.register(&[stray])).unwrap();
        let report = block_on(reconcile(
            &env,
            &block_on(store::load_snapshot(&env)).unwrap(),
        ))
        .unwrap();
        assert_eq!((report.registered, report.unregistered), (1, 1));
        let ids: Vec<String> = env.registrations.borrow().keys().cloned().collect();
        assert_eq!(ids, vec![a.uuid.clone()]);
        assert!(!ids.contains(&b.uuid));
        // A second pass has nothing to do.
        let again = block_on(reconcile(
            &env,
            &block_on(store::load_snapshot(&env)).unwrap(),
        ))
        .unwrap();
        assert_eq!(
            (again.registered, again.updated, again.unregistered),
            (0, 0, 0)
        );
    }

    #[test]
    fn sync_one_registers_updates_and_unregisters() {
        let env = MemoryEnv::new();
        let a = create(&env, "A", true);
        assert_eq!(
            block_on(sync_one(&env, &a.uuid, desired_for(&a, &src("A")))),
            Ok(true)
        );
        assert_eq!(
            block_on(sync_one(&env, &a.uuid, desired_for(&a, &src("A")))),
            Ok(true)
        );
        assert_eq!(block_on(sync_one(&env, &a.uuid, None)), Ok(false));
        assert!(env.registrations.borrow().is_empty());
    }
}
