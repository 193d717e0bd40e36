//! Keeps `chrome.userScripts` in step with storage. Storage is the truth; registrations follow.
//! When the API is unavailable (the "Allow User Scripts" toggle is off, or was turned off while
//! running) writes still succeed and the registry is marked stale; [`reconcile`] brings it back
//! in line as soon as the API works again.

use super::record::ScriptRecord;
use super::registry::{self, Registration};
use super::store;
use crate::channel::{key_store, ChannelKey};
use crate::env::{Area, Capabilities, EnvError, Ids, Storage, UserScripts, WorldConfig};
use crate::vec_map::VecSet;
use serde_json::Value;

/// The registration a stored script should have (None: it must not be registered).
pub fn desired_for(record: &ScriptRecord, source: &str) -> Option<Registration> {
    if record.enabled {
        let mut d = registry::desired(&record.uuid, record.revision, &record.metadata, source)?;
        if let Some(slot) = d.prelude_slot.as_mut() {
            slot.assets.clone_from(&record.assets);
        }
        Some(d)
    } else {
        None
    }
}

/// Why a registration could not be brought in line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncError {
    /// `chrome.userScripts` cannot be used now ("Allow User Scripts" is off): retry later.
    Unavailable(String),
    /// Chrome refused this registration (its message); retrying will not help.
    Refused(String),
}

impl std::fmt::Display for SyncError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SyncError::Unavailable(m) => write!(f, "chrome.userScripts is not available: {m}"),
            SyncError::Refused(m) => write!(f, "Chrome refused the registration: {m}"),
        }
    }
}

/// Why a reconcile did not run to the end (the registry stays stale and is retried).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReconcileError {
    /// "Allow User Scripts" is off.
    Unavailable,
    /// A `chrome.userScripts` or storage call failed (its message).
    Env(EnvError),
}

impl std::fmt::Display for ReconcileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReconcileError::Unavailable => f.write_str("chrome.userScripts is not available"),
            ReconcileError::Env(e) => write!(f, "{e}"),
        }
    }
}

/// A failed `register`: refused by Chrome when the API still works, else unavailable. Any
/// other failed call is "unavailable": the reconcile retries it.
fn classify<E: Capabilities>(env: &E, e: EnvError) -> SyncError {
    if env.user_scripts_available() {
        SyncError::Refused(e.0)
    } else {
        SyncError::Unavailable(e.0)
    }
}

/// The channel key for the preludes, made if needed. Without one (storage failing) scripts are
/// registered without the prelude: they run, they cannot report.
async fn channel_key<E: Storage + Ids>(env: &E) -> Option<ChannelKey> {
    key_store::ensure(env).await.ok()
}

/// The registration with the worker's prelude in it (see `prelude::apply`), with the script's
/// GM values when it was granted value functions and its `@require`/`@resource` files. A read
/// of either that fails is an error (the caller keeps what Chrome holds and leaves the registry
/// stale): registered without them, the script would read its defaults and write them back
/// over its values, or run without its library, until its next registration.
async fn with_prelude<E: Storage + Capabilities>(
    env: &E,
    mut d: Registration,
    key: Option<&ChannelKey>,
) -> Result<Registration, SyncError> {
    let unreadable = |e: String| SyncError::Unavailable(format!("a storage read failed: {e}"));
    let values = match &d.prelude_slot {
        Some(slot) if slot.gm.needs_values() => crate::gm::store::load(env, &d.id)
            .await
            .map_err(|e| unreadable(e.to_string()))?,
        _ => crate::gm::values::Values::default(),
    };
    let loaded = match &d.prelude_slot {
        Some(slot) => crate::gm::asset_store::load(env, &slot.assets)
            .await
            .map_err(|e| unreadable(e.0))?,
        None => Vec::new(),
    };
    super::prelude::apply_loaded(&mut d, key, &values, &loaded, &env.platform());
    Ok(d)
}

/// What Chrome holds for one script: its registration (read by id) and, when it may be
/// registered, the script worlds' configurations. Read before a write's `set` when the script's
/// id is known, beside the storage calls: only writes (under the write lock) change either.
#[derive(Debug)]
pub struct Held {
    registered: Result<Vec<Registration>, EnvError>,
    worlds: Worlds,
}

/// The worlds' configurations as far as they were asked for.
#[derive(Debug)]
enum Worlds {
    /// Not asked: the script was not going to be registered (a delete, a disable).
    NotAsked,
    /// Chrome's answer; `None` when it would not say (the world is configured anyway).
    Answered(Option<Vec<WorldConfig>>),
}

/// Both reads of [`Held`] at once; the worlds only when the script may be registered (`worlds`).
pub async fn read_held<E: UserScripts>(env: &E, uuid: &str, worlds: bool) -> Held {
    let ids = [uuid.to_owned()];
    let configs = async {
        if worlds {
            Worlds::Answered(env.world_configurations().await.ok())
        } else {
            Worlds::NotAsked
        }
    };
    let (registered, worlds) = futures::join!(env.registered(Some(&ids)), configs);
    Held { registered, worlds }
}

/// Whether `w` is the default world's configuration as [`UserScripts::configure_world`] gives it.
fn is_default_as_wanted(w: &WorldConfig) -> bool {
    w.world_id.is_none()
        && w.messaging != Some(true)
        && w.csp.as_deref() == Some(crate::env::WORLD_CSP)
}

/// Configures the world of `d` unless Chrome already holds that configuration: reconfiguring a
/// world that live pages use crashed their renderer at the next navigation (Chromium 156,
/// matching.test.mjs's update test). Messaging when its prelude needs the channel, none
/// otherwise; a world's configuration outlives its scripts.
async fn configure_world_of<E: UserScripts + Capabilities>(
    env: &E,
    d: &Registration,
    worlds: Option<&[WorldConfig]>,
) -> Result<(), SyncError> {
    let Some(world) = d.world_id.as_deref() else {
        return Ok(());
    };
    let held = worlds.is_some_and(|ws| {
        ws.iter().any(|w| {
            w.world_id.as_deref() == Some(world)
                && w.messaging == Some(d.messaging)
                && w.csp.as_deref() == Some(crate::env::WORLD_CSP)
        })
    });
    if held {
        return Ok(());
    }
    env.configure_script_world(world, d.messaging)
        .await
        .map_err(|e| classify(env, e))
}

/// Registers `d` in place of whatever is registered under its id (nothing, or `current`), its
/// world configured first (`worlds`: the configurations Chrome holds).
async fn put<E: UserScripts + Capabilities>(
    env: &E,
    d: &Registration,
    current: Option<&Registration>,
    worlds: Option<&[WorldConfig]>,
) -> Result<(), SyncError> {
    configure_world_of(env, d, worlds).await?;
    apply(env, d, current).await
}

/// [`put`] once the world is configured: one `update` when it gives exactly `d`, else `d`
/// registered whole (after `current` is unregistered).
async fn apply<E: UserScripts + Capabilities>(
    env: &E,
    d: &Registration,
    current: Option<&Registration>,
) -> Result<(), SyncError> {
    match current {
        Some(c) if updatable(c, d) => {
            let sent = with_every_field(d);
            match env.update(std::slice::from_ref(&sent)).await {
                Ok(()) => Ok(()),
                Err(e) => match classify(env, e) {
                    // Chrome kept the old registration: it must not go on running code that
                    // storage no longer holds.
                    SyncError::Refused(m) => {
                        env.unregister(std::slice::from_ref(&d.id))
                            .await
                            .map_err(|e| SyncError::Unavailable(e.0))?;
                        Err(SyncError::Refused(m))
                    }
                    unavailable @ SyncError::Unavailable(_) => Err(unavailable),
                },
            }
        }
        Some(_) => {
            env.unregister(std::slice::from_ref(&d.id))
                .await
                .map_err(|e| SyncError::Unavailable(e.0))?;
            env.register(std::slice::from_ref(d))
                .await
                .map_err(|e| classify(env, e))
        }
        None => env
            .register(std::slice::from_ref(d))
            .await
            .map_err(|e| classify(env, e)),
    }
}

/// Whether `update` can turn `current` into exactly `desired` (one call instead of unregister
/// and register: a write at 1,000 scripts pays Chrome's per-call cost once). It cannot when a
/// field would have to be cleared that `update` keeps: a world id, a glob list (an empty one is
/// ignored, Chromium 156), or a field Chrome reports that we never set.
fn updatable(current: &Registration, desired: &Registration) -> bool {
    current.id == desired.id
        && current.world_id == desired.world_id
        && current.include_globs == desired.include_globs
        && current.exclude_globs == desired.exclude_globs
        && current.extra.is_empty()
        && desired.extra.is_empty()
}

/// `desired` with Chrome's defaults written out, so `update` keeps nothing of the old one.
fn with_every_field(desired: &Registration) -> Registration {
    let mut d = desired.clone();
    d.run_at.get_or_insert_with(|| "document_idle".to_owned());
    d.world.get_or_insert_with(|| "USER_SCRIPT".to_owned());
    d
}

/// Brings one script's registration in line, comparing with Chrome's whole registration.
/// `Ok(true)` when it is registered to run now.
pub async fn sync_one<E: UserScripts + Capabilities + Storage + Ids>(
    env: &E,
    uuid: &str,
    desired: Option<Registration>,
) -> Result<bool, SyncError> {
    let key = match desired {
        Some(_) => channel_key(env).await,
        None => None,
    };
    sync_one_keyed(env, uuid, desired, key.as_ref(), None).await
}

/// [`sync_one`] with the channel key the caller holds (the provider caches it: one storage read
/// less per write), and what Chrome holds for the script if the caller read it already.
pub async fn sync_one_keyed<E: UserScripts + Capabilities + Storage>(
    env: &E,
    uuid: &str,
    desired: Option<Registration>,
    key: Option<&ChannelKey>,
    held: Option<Held>,
) -> Result<bool, SyncError> {
    // A registration the caller read just now shows the API was there; the toggle's check (a
    // synchronous refusal, 0.1–0.4 ms in a worker that was idle: issue 17) is not made again.
    // Turned off since, the calls below fail and are classified as unavailable all the same.
    let read_now = held.as_ref().is_some_and(|h| h.registered.is_ok());
    if !read_now && !env.user_scripts_available() {
        return Err(SyncError::Unavailable(
            "\"Allow User Scripts\" is off".into(),
        ));
    }
    let registering = desired.is_some();
    let prelude = async {
        match desired {
            Some(d) => Some(with_prelude(env, d, key).await),
            None => None,
        }
    };
    let held = async {
        match held {
            Some(h) => h,
            None => read_held(env, uuid, registering).await,
        }
    };
    let (desired, held) = futures::join!(prelude, held);
    let desired = desired.transpose()?;
    let existing = held.registered.map_err(|e| SyncError::Unavailable(e.0))?;
    let current = existing.iter().find(|r| r.id == uuid);
    let worlds = match (held.worlds, &desired) {
        (Worlds::Answered(w), _) => w,
        // A caller that expected no registration was wrong: ask now rather than configure blind.
        (Worlds::NotAsked, Some(_)) => env.world_configurations().await.ok(),
        (Worlds::NotAsked, None) => None,
    };
    let worlds = worlds.as_deref();
    match (desired, current) {
        // Nothing to change, so no call to Chrome would notice a toggle turned off since the
        // read: it is asked here.
        (Some(d), Some(c)) if registry::same_effect(c, &d) => {
            match read_now && !env.user_scripts_available() {
                true => Err(SyncError::Unavailable(
                    "\"Allow User Scripts\" is off".into(),
                )),
                false => Ok(true),
            }
        }
        (Some(d), c) => put(env, &d, c, worlds).await.map(|()| true),
        (None, current) => withdraw(env, uuid, current.is_some()).await.map(|()| false),
    }
}

/// Unregisters one script (when Chrome holds it) and gives its world's configuration back to
/// Chrome's 100 (registering it again configures it again). A reset that fails stays until the
/// next reconcile.
async fn withdraw<E: UserScripts>(env: &E, uuid: &str, registered: bool) -> Result<(), SyncError> {
    if registered {
        env.unregister(&[uuid.to_owned()])
            .await
            .map_err(|e| SyncError::Unavailable(e.0))?;
    }
    let _ = env.reset_script_world(&registry::world_id(uuid)).await;
    Ok(())
}

/// [`sync_one_keyed`] for several scripts at once (an import, a restore): Chrome is asked once
/// what it holds, and the registrations to change are changed together ([`put_all`]).
/// Each script's result by its uuid, in no particular order.
pub async fn sync_many_keyed<E: UserScripts + Capabilities + Storage>(
    env: &E,
    items: Vec<(String, Option<Registration>)>,
    key: Option<&ChannelKey>,
) -> Vec<(String, Result<bool, SyncError>)> {
    let every = |e: SyncError| {
        items
            .iter()
            .map(|(u, _)| (u.clone(), Err(e.clone())))
            .collect::<Vec<_>>()
    };
    if !env.user_scripts_available() {
        return every(SyncError::Unavailable(
            "\"Allow User Scripts\" is off".into(),
        ));
    }
    let ids: Vec<String> = items.iter().map(|(u, _)| u.clone()).collect();
    let registering = items.iter().any(|(_, d)| d.is_some());
    let configs = async {
        if registering {
            env.world_configurations().await.ok()
        } else {
            None
        }
    };
    let (existing, worlds) = futures::join!(env.registered(Some(&ids)), configs);
    let existing = match existing {
        Ok(e) => e,
        Err(e) => return every(SyncError::Unavailable(e.0)),
    };
    let worlds = worlds.as_deref();
    let mut results = Vec::with_capacity(items.len());
    let mut todo = Vec::new();
    let mut gone = Vec::new();
    for (uuid, desired) in items {
        let current = existing.iter().find(|r| r.id == uuid);
        match desired {
            Some(d) => {
                let d = match with_prelude(env, d, key).await {
                    Ok(d) => d,
                    Err(e) => {
                        results.push((uuid, Err(e)));
                        continue;
                    }
                };
                match current {
                    Some(c) if registry::same_effect(c, &d) => results.push((uuid, Ok(true))),
                    c => todo.push((d, c.cloned())),
                }
            }
            None => gone.push((uuid, current.is_some())),
        }
    }
    results.extend(withdraw_all(env, gone).await);
    let put = put_all(env, todo, worlds).await;
    results.extend(put.into_iter().map(|(u, r)| (u, r.map(|()| true))));
    results
}

/// [`withdraw`] for several scripts (each with whether Chrome holds it): those Chrome holds
/// are unregistered in one call, as [`put_all`] registers (each call stalls every tab), then
/// each world's configuration is reset (that call re-sends no registration).
async fn withdraw_all<E: UserScripts>(
    env: &E,
    gone: Vec<(String, bool)>,
) -> Vec<(String, Result<bool, SyncError>)> {
    let held: Vec<String> = gone
        .iter()
        .filter(|(_, registered)| *registered)
        .map(|(u, _)| u.clone())
        .collect();
    let unregistered = if held.is_empty() {
        Ok(())
    } else {
        env.unregister(&held)
            .await
            .map_err(|e| SyncError::Unavailable(e.0))
    };
    let mut results = Vec::with_capacity(gone.len());
    for (uuid, registered) in gone {
        let result = match (&unregistered, registered) {
            (Err(e), true) => Err(e.clone()),
            _ => {
                let _ = env.reset_script_world(&registry::world_id(&uuid)).await;
                Ok(false)
            }
        };
        results.push((uuid, result));
    }
    results
}

/// [`put`] for several scripts (each with what Chrome holds under its id, if anything), in as
/// few calls as Chrome allows: the worlds that need it configured, then one `unregister` for the
/// registrations `update` cannot fix, one `update` for the others, one `register` for the new
/// and the unregistered. Chrome hands every renderer the extension's whole set of scripts after
/// each registration call, so one call per script stalled every tab that many times (Chromium
/// 156, from a provider page: 50 scripts configured and registered one call each 190 ms,
/// configured one by one and registered together 36 ms; 100 updates one call each 1.8–2.1 s,
/// together 20 ms). The worlds are configured one after another: side by side (`join_all`)
/// made an import of 100 no faster and the wasm 3 KB (gzip) larger. Chrome takes a `register` or an
/// `update` whole or not at all (one bad pattern, or an id it does not hold, refuses it and
/// changes nothing), so a refused batch is done again one script at a time ([`apply`]): a
/// script Chrome refuses keeps no other from running. Each script's result by its id.
async fn put_all<E: UserScripts + Capabilities>(
    env: &E,
    todo: Vec<(Registration, Option<Registration>)>,
    worlds: Option<&[WorldConfig]>,
) -> Vec<(String, Result<(), SyncError>)> {
    let mut configured = Vec::with_capacity(todo.len());
    for (d, _) in &todo {
        configured.push(configure_world_of(env, d, worlds).await);
    }
    let mut results = Vec::with_capacity(todo.len());
    let (mut updates, mut whole, mut new) = (Vec::new(), Vec::new(), Vec::new());
    for ((d, current), c) in todo.into_iter().zip(configured) {
        match (c, current) {
            (Err(e), _) => results.push((d.id, Err(e))),
            (Ok(()), None) => new.push(d),
            (Ok(()), Some(c)) if updatable(&c, &d) => updates.push((d, c)),
            (Ok(()), Some(_)) => whole.push(d),
        }
    }
    if !whole.is_empty() {
        let ids: Vec<String> = whole.iter().map(|d| d.id.clone()).collect();
        match env.unregister(&ids).await {
            Ok(()) => new.append(&mut whole),
            Err(e) => {
                let e = SyncError::Unavailable(e.0);
                results.extend(whole.into_iter().map(|d| (d.id, Err(e.clone()))));
            }
        }
    }
    if !updates.is_empty() {
        let sent: Vec<Registration> = updates.iter().map(|(d, _)| with_every_field(d)).collect();
        match env.update(&sent).await.map_err(|e| classify(env, e)) {
            Ok(()) => results.extend(updates.into_iter().map(|(d, _)| (d.id, Ok(())))),
            Err(SyncError::Refused(_)) => {
                for (d, c) in updates {
                    let r = apply(env, &d, Some(&c)).await;
                    results.push((d.id, r));
                }
            }
            Err(e) => results.extend(updates.into_iter().map(|(d, _)| (d.id, Err(e.clone())))),
        }
    }
    if !new.is_empty() {
        match env.register(&new).await.map_err(|e| classify(env, e)) {
            Ok(()) => results.extend(new.into_iter().map(|d| (d.id, Ok(())))),
            Err(SyncError::Refused(_)) => {
                for d in new {
                    let r = apply(env, &d, None).await;
                    results.push((d.id, r));
                }
            }
            Err(e) => results.extend(new.into_iter().map(|d| (d.id, Err(e.clone())))),
        }
    }
    results
}

/// What a full reconcile did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    pub registered: usize,
    pub replaced: usize,
    pub unregistered: usize,
    /// Scripts that could not be read (problems in storage).
    pub skipped: Vec<String>,
    /// Scripts Chrome refused: (uuid, Chrome's message).
    pub refused: Vec<(String, String)>,
    /// Scripts registered fine (their earlier refusal, if any, is over).
    pub ok: Vec<String>,
    /// The API stopped working part-way: the registry is still stale.
    pub interrupted: bool,
    /// World configurations given back to Chrome (no registration used them).
    pub worlds_released: usize,
}

/// Gives back the world configurations in `all` no script of `enabled` uses and `in_use` does not
/// name (counted in `report`); the others, the default world's among them.
async fn release_unused_worlds<E: UserScripts>(
    env: &E,
    all: Vec<WorldConfig>,
    enabled: &[&ScriptRecord],
    in_use: &impl Fn(&str) -> bool,
    report: &mut Report,
) -> Vec<WorldConfig> {
    let wanted: VecSet<String> = enabled
        .iter()
        .map(|r| registry::world_id(&r.uuid))
        .collect();
    let (keep, unused): (Vec<WorldConfig>, Vec<WorldConfig>) =
        all.into_iter().partition(|w| match w.world_id.as_deref() {
            Some(id) => wanted.contains(id),
            None => true,
        });
    for id in unused.iter().filter_map(|w| w.world_id.as_deref()) {
        // Checked as the call goes out: a try counts its world before it configures it.
        if in_use(id) {
            continue;
        }
        let _ = env.reset_script_world(id).await;
        report.worlds_released += 1;
    }
    keep
}

/// Makes Chrome's registrations exactly the enabled scripts of `snapshot` (the stored records).
pub async fn reconcile<E: Storage + UserScripts + Capabilities + Ids>(
    env: &E,
    snapshot: &store::Snapshot,
) -> Result<Report, ReconcileError> {
    reconcile_sparing(env, snapshot, |_| false).await
}

/// [`reconcile`], leaving alone the world configurations `in_use` names (the worlds of tries
/// running now, `tools::try_script::hold_world`): asked just before each one would be given
/// back, so a try that began meanwhile keeps its world.
pub async fn reconcile_sparing<E: Storage + UserScripts + Capabilities + Ids>(
    env: &E,
    snapshot: &store::Snapshot,
    in_use: impl Fn(&str) -> bool,
) -> Result<Report, ReconcileError> {
    if !env.user_scripts_available() {
        return Err(ReconcileError::Unavailable);
    }
    let enabled: Vec<&ScriptRecord> = snapshot.records.iter().filter(|r| r.enabled).collect();
    // Chrome holds at most 100 world configurations (the default world's among them), each
    // until the extension is updated: those of worlds no enabled script uses (deleted or
    // disabled before a stop, or by an earlier version) go back first, or even the default
    // world could not be configured. Read once: each script has a world of its own, so
    // configuring one changes no other's.
    let mut report = Report::default();
    let (actual, worlds) = futures::join!(env.registered(None), env.world_configurations());
    let actual = actual.map_err(ReconcileError::Env)?;
    let mut default_held = false;
    let worlds = match worlds {
        Ok(all) => {
            let keep = release_unused_worlds(env, all, &enabled, &in_use, &mut report).await;
            default_held = keep.iter().any(is_default_as_wanted);
            Some(keep)
        }
        Err(_) => None,
    };
    // Configured again only when Chrome does not hold it so (as a script's world: reconfiguring
    // a world live pages use crashed them, `configure_world_of`); an older version's default,
    // without `WORLD_CSP`, is configured over.
    if !default_held {
        env.configure_world().await.map_err(ReconcileError::Env)?;
    }
    let keys: Vec<String> = enabled.iter().map(|r| store::source_key(&r.uuid)).collect();
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let sources = if refs.is_empty() {
        serde_json::Map::new()
    } else {
        env.get(Area::Local, &refs)
            .await
            .map_err(ReconcileError::Env)?
    };
    report.skipped = snapshot
        .problems
        .iter()
        .map(|p| format!("{}: {}", p.uuid, p.message))
        .collect();
    let channel = channel_key(env).await;
    // Without the key (storage failing) the scripts are registered without their prelude: they
    // run, with no GM functions or reports. The registry stays stale, so a later reconcile
    // registers them whole.
    report.interrupted |= channel.is_none() && !enabled.is_empty();
    let mut desired = Vec::new();
    for (r, key) in enabled.iter().zip(&keys) {
        match sources.get(key).and_then(Value::as_str) {
            Some(src) => {
                if let Some(d) = desired_for(r, src) {
                    // Unreadable values or files: the whole reconcile waits (it would register
                    // the script without them, or drop it), and the registry stays stale.
                    let d = with_prelude(env, d, channel.as_ref())
                        .await
                        .map_err(|e| ReconcileError::Env(crate::env::EnvError(e.to_string())))?;
                    desired.push(d);
                }
            }
            None => report
                .skipped
                .push(format!("{}: source is missing", r.uuid)),
        }
    }
    let wanted: Vec<String> = desired.iter().map(|d| d.id.clone()).collect();
    let plan = registry::plan(desired, &actual);
    if !plan.unregister.is_empty() {
        env.unregister(&plan.unregister)
            .await
            .map_err(ReconcileError::Env)?;
    }
    report.unregistered = plan.unregister.len();
    // Together, in as few calls as Chrome allows (`put_all`); a script Chrome refuses keeps no
    // other from running.
    let replaced: Vec<String> = plan.replace.iter().map(|r| r.id.clone()).collect();
    let todo = plan
        .replace
        .into_iter()
        .map(|r| {
            let current = actual.iter().find(|a| a.id == r.id).cloned();
            (r, current)
        })
        .chain(plan.register.into_iter().map(|r| (r, None)));
    for (id, r) in put_all(env, todo.collect(), worlds.as_deref()).await {
        match r {
            Ok(()) if replaced.contains(&id) => report.replaced += 1,
            Ok(()) => report.registered += 1,
            Err(SyncError::Refused(m)) => report.refused.push((id, m)),
            Err(SyncError::Unavailable(_)) => report.interrupted = true,
        }
    }
    if report.interrupted {
        return Ok(report);
    }
    report.ok = wanted
        .into_iter()
        .filter(|id| !report.refused.iter().any(|(u, _)| u == id))
        .collect();
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

    fn edited(env: &MemoryEnv, r: &ScriptRecord, source: &str) -> ScriptRecord {
        let snap = block_on(store::load_snapshot(env)).unwrap();
        block_on(store::replace(
            env,
            &snap,
            "user",
            &r.uuid,
            r.revision,
            source,
            Some(true),
            1 << 20,
        ))
        .unwrap()
        .record
    }

    /// The core decides whether a world needs configuring, from what Chrome reports: a world
    /// Chrome holds as wanted is left alone (reconfiguring one live pages use crashed their
    /// renderer), one it holds otherwise is configured before the registration.
    #[test]
    fn a_world_is_configured_only_when_chrome_holds_another_configuration() {
        let env = MemoryEnv::new();
        let mut a = create(&env, "W", true);
        assert!(block_on(sync_one(&env, &a.uuid, desired_for(&a, &src("W")))).unwrap());
        assert_eq!(*env.registry_calls.borrow(), ["configureWorld", "register"]);
        let world = registry::world_id(&a.uuid);
        let messaging = env.worlds.borrow()[&world];
        // Held with the messaging wanted but another CSP (an older version's): configured.
        env.worlds_other_csp.borrow_mut().insert(world.clone());
        env.registry_calls.borrow_mut().clear();
        let v = format!("{}// csp\n", src("W"));
        a = edited(&env, &a, &v);
        assert!(block_on(sync_one(&env, &a.uuid, desired_for(&a, &v))).unwrap());
        assert_eq!(*env.registry_calls.borrow(), ["configureWorld", "update"]);
        assert!(env.worlds_other_csp.borrow().is_empty());
        for (held_as_wanted, calls) in [
            (true, &["update"][..]),
            (false, &["configureWorld", "update"][..]),
        ] {
            env.worlds.borrow_mut().insert(
                world.clone(),
                if held_as_wanted {
                    messaging
                } else {
                    !messaging
                },
            );
            env.registry_calls.borrow_mut().clear();
            let v = format!("{}// {held_as_wanted}\n", src("W"));
            a = edited(&env, &a, &v);
            assert!(block_on(sync_one(&env, &a.uuid, desired_for(&a, &v))).unwrap());
            assert_eq!(*env.registry_calls.borrow(), calls);
            assert_eq!(env.worlds.borrow()[&world], messaging);
        }
    }

    /// A changed registration is one `update` when that gives exactly the new one, so the
    /// result is what a fresh registration would be: an @exclude-match dropped is gone.
    #[test]
    fn a_changed_registration_is_updated_in_one_call_with_nothing_of_the_old_kept() {
        let env = MemoryEnv::new();
        let v1 = "// ==UserScript==\n// @name U\n// @match https://example.com/*\n// @exclude-match https://example.com/x*\n// @run-at document-start\n// ==/UserScript==\n";
        let a = create(&env, "U", true);
        let a = edited(&env, &a, v1);
        assert!(block_on(sync_one(&env, &a.uuid, desired_for(&a, v1))).unwrap());
        env.registry_calls.borrow_mut().clear();
        let v2 = src("U");
        let b = edited(&env, &a, &v2);
        assert!(block_on(sync_one(&env, &b.uuid, desired_for(&b, &v2))).unwrap());
        assert_eq!(*env.registry_calls.borrow(), ["update"]);
        let key = block_on(key_store::ensure(&env)).ok();
        let want = block_on(with_prelude(
            &env,
            desired_for(&b, &v2).unwrap(),
            key.as_ref(),
        ))
        .unwrap();
        let got = env.registrations.borrow()[&b.uuid].clone();
        assert!(registry::same_effect(&got, &want), "{got:?}\n{want:?}");
        assert!(got.exclude_matches.is_empty());
        assert_eq!(got.run_at.as_deref(), Some("document_idle"));
    }

    /// What `update` cannot clear (a glob left in Chrome by an older version) is replaced whole.
    #[test]
    fn a_registration_update_cannot_fix_is_replaced_whole() {
        let env = MemoryEnv::new();
        let a = create(&env, "G", true);
        assert!(block_on(sync_one(&env, &a.uuid, desired_for(&a, &src("G")))).unwrap());
        env.registrations
            .borrow_mut()
            .get_mut(&a.uuid)
            .unwrap()
            .include_globs = vec!["https://leftover.test/*".into()];
        env.registry_calls.borrow_mut().clear();
        let v2 = src("G2");
        let b = edited(&env, &a, &v2);
        assert!(block_on(sync_one(&env, &b.uuid, desired_for(&b, &v2))).unwrap());
        assert_eq!(*env.registry_calls.borrow(), ["unregister", "register"]);
        assert!(env.registrations.borrow()[&b.uuid].include_globs.is_empty());
    }

    /// Chrome refusing the update would leave the old code running: it is unregistered.
    #[test]
    fn a_refused_update_leaves_nothing_of_the_old_registration_running() {
        let env = MemoryEnv::new();
        let a = create(&env, "R", true);
        assert!(block_on(sync_one(&env, &a.uuid, desired_for(&a, &src("R")))).unwrap());
        *env.refuse_register.borrow_mut() = Some("Invalid host.".into());
        let v2 = src("R2");
        let b = edited(&env, &a, &v2);
        assert_eq!(
            block_on(sync_one(&env, &b.uuid, desired_for(&b, &v2))),
            Err(SyncError::Refused("Invalid host.".into()))
        );
        assert!(!env.registrations.borrow().contains_key(&b.uuid));
    }

    /// With what Chrome holds read just before (a write's `held`), the toggle is not asked for
    /// again: a call that changes the registration fails if it was turned off since. One that
    /// has nothing to change makes no call, so the toggle is asked for then.
    #[test]
    fn a_registration_read_just_now_stands_for_the_toggle_check() {
        let env = MemoryEnv::new();
        let a = create(&env, "A", true);
        let desired = || desired_for(&a, &src("A"));
        assert_eq!(block_on(sync_one(&env, &a.uuid, desired())), Ok(true));
        let held = || block_on(read_held(&env, &a.uuid, true));
        let key = block_on(channel_key(&env));
        let key = key.as_ref();
        let checks = env.toggle_checks.get();
        let same = sync_one_keyed(&env, &a.uuid, desired(), key, Some(held()));
        assert_eq!(block_on(same), Ok(true));
        assert_eq!(
            env.toggle_checks.get(),
            checks + 1,
            "nothing to change: asked"
        );
        let other = desired_for(&a, &source_at("2"));
        let checks = env.toggle_checks.get();
        let changed = sync_one_keyed(&env, &a.uuid, other, key, Some(held()));
        assert_eq!(block_on(changed), Ok(true));
        assert_eq!(env.toggle_checks.get(), checks, "the read stood for it");

        // Turned off after the read: with nothing to change (what is registered now), and with
        // a change.
        for v in ["2", "3"] {
            let d = desired_for(&a, &source_at(v));
            let h = held();
            env.user_scripts.set(false);
            let r = block_on(sync_one_keyed(&env, &a.uuid, d, key, Some(h)));
            assert!(matches!(r, Err(SyncError::Unavailable(_))), "{r:?}");
            env.user_scripts.set(true);
        }
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
        let stray = registry::desired("stray", 1, &a.metadata, "x").unwrap();
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
            (again.registered, again.replaced, again.unregistered),
            (0, 0, 0)
        );
    }

    /// Chrome holds at most 100 world configurations for as long as the extension is installed:
    /// a script that stops being registered gives its back, and a reconcile gives back those no
    /// registration uses (left by a stop between the two calls, or by an earlier version).
    #[test]
    fn a_world_configuration_is_held_only_while_its_script_is_registered() {
        let env = MemoryEnv::new();
        let a = create(&env, "A", true);
        let b = create(&env, "B", true);
        for r in [&a, &b] {
            assert!(block_on(sync_one(&env, &r.uuid, desired_for(r, &src("x")))).unwrap());
        }
        let (wa, wb) = (registry::world_id(&a.uuid), registry::world_id(&b.uuid));
        assert!(env.worlds.borrow().contains_key(&wa) && env.worlds.borrow().contains_key(&wb));
        // Disabled or deleted: unregistered, then its world's configuration reset.
        env.registry_calls.borrow_mut().clear();
        assert!(!block_on(sync_one(&env, &a.uuid, None)).unwrap());
        assert_eq!(
            *env.registry_calls.borrow(),
            ["unregister", "resetWorldConfiguration"]
        );
        assert!(!env.worlds.borrow().contains_key(&wa));
        // Registered again: configured again.
        assert!(block_on(sync_one(&env, &a.uuid, desired_for(&a, &src("x")))).unwrap());
        assert!(env.worlds.borrow().contains_key(&wa));
        // Left behind (a stop between the calls, an earlier version): a reconcile sweeps them,
        // and keeps the worlds its registrations use.
        // As many as Chrome holds: not even the default world could be configured before them.
        for i in 0..98 {
            env.worlds.borrow_mut().insert(format!("left-{i}"), true);
        }
        assert!(block_on(env.configure_world()).is_err());
        let report = block_on(reconcile(
            &env,
            &block_on(store::load_snapshot(&env)).unwrap(),
        ))
        .unwrap();
        assert_eq!(report.worlds_released, 98);
        let left: Vec<String> = env.worlds.borrow().keys().cloned().collect();
        let mut want = vec![wa, wb];
        want.sort();
        assert_eq!(left, want);
    }

    /// The default world (tries, the scripts past a page's tenth) gets the scripts' own policy,
    /// configured only when Chrome does not hold it so; it is one of the 100, so the 100th
    /// script world is refused.
    #[test]
    fn the_default_world_gets_the_scripts_policy_once_and_counts_among_the_100() {
        let env = MemoryEnv::new();
        let a = create(&env, "A", true);
        let reconciled = || {
            block_on(reconcile(
                &env,
                &block_on(store::load_snapshot(&env)).unwrap(),
            ))
            .unwrap()
        };
        reconciled();
        assert_eq!(env.default_world.get(), Some(true));
        assert_eq!(env.default_configured.get(), 1);
        // Held so: not configured again (a reconfigured world crashed live pages).
        reconciled();
        assert_eq!(env.default_configured.get(), 1);
        // As an older version left it, without the policy: configured over.
        env.default_world.set(Some(false));
        reconciled();
        assert_eq!(
            (env.default_world.get(), env.default_configured.get()),
            (Some(true), 2)
        );
        // A's world and 98 others are held, with the default: the 100 Chrome allows.
        for i in 0..98 {
            env.worlds.borrow_mut().insert(format!("other-{i}"), true);
        }
        assert!(env
            .worlds
            .borrow()
            .contains_key(&registry::world_id(&a.uuid)));
        assert!(block_on(env.configure_script_world("one-more", true)).is_err());
        assert!(block_on(env.configure_world()).is_ok());
    }

    /// Enabled scripts named `names`, stored.
    fn created(env: &MemoryEnv, names: &[&str]) -> Vec<ScriptRecord> {
        names.iter().map(|n| create(env, n, true)).collect()
    }

    /// A script's source at version `v` (what the registration's code then holds).
    fn source_at(v: &str) -> String {
        format!("{}// {v}\n", src("x"))
    }

    /// Each record's wanted registration at version `v`, as a sync of several takes them.
    fn wanted(all: &[ScriptRecord], v: &str) -> Vec<(String, Option<Registration>)> {
        all.iter()
            .map(|r| (r.uuid.clone(), desired_for(r, &source_at(v))))
            .collect()
    }

    /// How many of Chrome's registry calls since they were last cleared were `name`.
    fn calls_to(env: &MemoryEnv, name: &str) -> usize {
        env.registry_calls
            .borrow()
            .iter()
            .filter(|c| **c == name)
            .count()
    }

    /// The scripts of an import, synced together: Chrome is read once, each new script's world
    /// configured, and all of them registered in one call (Chrome stalls every tab after each);
    /// one already held as wanted is left alone, a changed one updated, a disabled one withdrawn.
    #[test]
    fn scripts_synced_together_are_registered_in_one_call() {
        let env = MemoryEnv::new();
        let same = create(&env, "Same", true);
        let changed = create(&env, "Changed", true);
        let off = create(&env, "Off", true);
        for r in [&same, &changed, &off] {
            assert!(block_on(sync_one(&env, &r.uuid, desired_for(r, &source_at("v1")))).unwrap());
        }
        let new = created(&env, &["N1", "N2", "N3"]);
        env.registry_calls.borrow_mut().clear();
        env.world_reads.set(0);
        let key = block_on(key_store::ensure(&env)).ok();
        let mut items = wanted(&new, "v1");
        items.extend(wanted(std::slice::from_ref(&same), "v1"));
        items.extend(wanted(std::slice::from_ref(&changed), "v2"));
        items.push((off.uuid.clone(), None));
        let mut got = block_on(sync_many_keyed(&env, items, key.as_ref()));
        got.sort_by(|a, b| a.0.cmp(&b.0));
        let mut want: Vec<(String, Result<bool, SyncError>)> = new
            .iter()
            .chain([&same, &changed])
            .map(|r| (r.uuid.clone(), Ok(true)))
            .collect();
        want.push((off.uuid.clone(), Ok(false)));
        want.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(got, want);
        assert_eq!(env.world_reads.get(), 1);
        let count = |c: &str| calls_to(&env, c);
        assert_eq!(
            (count("register"), count("update"), count("unregister")),
            (1, 1, 1)
        );
        assert_eq!(count("configureWorld"), 3);
        let regs = env.registrations.borrow();
        for r in new.iter().chain([&same, &changed]) {
            assert!(regs.contains_key(&r.uuid));
        }
        assert!(!regs.contains_key(&off.uuid));
        assert!(!env
            .worlds
            .borrow()
            .contains_key(&registry::world_id(&off.uuid)));
    }

    /// Scripts a restore disables, synced together: those Chrome holds are unregistered in one
    /// call (each call stalls every tab: 50 one call each took 250–365 ms, together 3–11 ms,
    /// Chromium 156), one it never held is not named in it (Chrome would refuse the whole call
    /// for that id), and every world's configuration is given back.
    #[test]
    fn scripts_withdrawn_together_are_unregistered_in_one_call() {
        let env = MemoryEnv::new();
        let held = created(&env, &["A", "B", "C"]);
        for r in &held {
            assert!(block_on(sync_one(&env, &r.uuid, desired_for(r, &source_at("v1")))).unwrap());
        }
        let never = create(&env, "Never", false);
        env.registry_calls.borrow_mut().clear();
        let items: Vec<(String, Option<Registration>)> = held
            .iter()
            .chain([&never])
            .map(|r| (r.uuid.clone(), None))
            .collect();
        let got = block_on(sync_many_keyed(&env, items, None));
        assert_eq!(got.len(), 4);
        assert!(got.iter().all(|(_, r)| *r == Ok(false)), "{got:?}");
        assert_eq!(calls_to(&env, "unregister"), 1);
        assert_eq!(calls_to(&env, "resetWorldConfiguration"), 4);
        assert!(env.registrations.borrow().is_empty());
        assert!(env.worlds.borrow().is_empty());
    }

    /// Chrome refuses a batch whole when one script in it is bad: the others are registered
    /// one call each, and only the bad one carries Chrome's refusal.
    #[test]
    fn a_script_chrome_refuses_keeps_none_of_the_others_from_running() {
        let env = MemoryEnv::new();
        let all = created(&env, &["A", "B", "C"]);
        let bad = all[1].uuid.clone();
        env.refuse_ids.borrow_mut().push(bad.clone());
        let got = block_on(sync_many_keyed(&env, wanted(&all, "v1"), None));
        for (uuid, r) in &got {
            match r {
                Err(SyncError::Refused(m)) => {
                    assert_eq!(*uuid, bad);
                    assert!(m.contains(&bad), "{m}");
                }
                other => assert_eq!((uuid != &bad, other), (true, &Ok(true))),
            }
        }
        assert_eq!(got.len(), 3);
        let regs = env.registrations.borrow();
        assert!(regs.contains_key(&all[0].uuid) && regs.contains_key(&all[2].uuid));
        assert!(!regs.contains_key(&bad));
        // The batch, then one call each.
        assert_eq!(calls_to(&env, "register"), 4);
    }

    /// Past Chrome's 100 world configurations, the scripts whose world could not be configured
    /// are refused with Chrome's message and left unregistered; those before them run.
    #[test]
    fn scripts_past_the_world_limit_are_refused_and_the_others_registered() {
        let env = MemoryEnv::new();
        for i in 0..98 {
            env.worlds.borrow_mut().insert(format!("held-{i}"), true);
        }
        let all = created(&env, &["A", "B", "C"]);
        let got = block_on(sync_many_keyed(&env, wanted(&all, "v1"), None));
        let ok = got.iter().filter(|(_, r)| *r == Ok(true)).count();
        let refused: Vec<&String> = got
            .iter()
            .filter_map(|(u, r)| match r {
                Err(SyncError::Refused(m)) if m.contains("100") => Some(u),
                _ => None,
            })
            .collect();
        assert_eq!((ok, refused.len()), (2, 1), "{got:?}");
        let regs = env.registrations.borrow();
        assert_eq!(regs.len(), 2);
        assert!(!regs.contains_key(refused[0]));
    }

    /// With the toggle off nothing is called and every script is "unavailable" (the registry
    /// is reconciled later); lost part-way, the scripts of the batch are unavailable too.
    #[test]
    fn scripts_synced_together_without_the_api_are_unavailable() {
        let env = MemoryEnv::new();
        let all = created(&env, &["A", "B"]);
        env.user_scripts.set(false);
        let got = block_on(sync_many_keyed(&env, wanted(&all, "v1"), None));
        assert!(got
            .iter()
            .all(|(_, r)| matches!(r, Err(SyncError::Unavailable(_)))));
        assert!(env.registry_calls.borrow().is_empty());
        env.user_scripts.set(true);
        env.lose_api_on_register.set(true);
        let got = block_on(sync_many_keyed(&env, wanted(&all, "v1"), None));
        assert_eq!(got.len(), 2);
        assert!(got
            .iter()
            .all(|(_, r)| matches!(r, Err(SyncError::Unavailable(_)))));
        assert!(env.registrations.borrow().is_empty());
    }

    /// Registrations that changed (a new prelude after an extension update, here a new
    /// version) are updated in one call; when Chrome refuses that batch, each is updated on
    /// its own, and the one it refuses is unregistered: its old code must not go on running.
    #[test]
    fn changed_registrations_are_updated_in_one_call_and_a_refused_one_is_withdrawn() {
        let env = MemoryEnv::new();
        let all = created(&env, &["A", "B", "C"]);
        block_on(sync_many_keyed(&env, wanted(&all, "v1"), None));
        env.registry_calls.borrow_mut().clear();
        let got = block_on(sync_many_keyed(&env, wanted(&all, "v2"), None));
        assert!(got.iter().all(|(_, r)| *r == Ok(true)), "{got:?}");
        assert_eq!(*env.registry_calls.borrow(), ["update"]);
        let code = |u: &str| {
            let regs = env.registrations.borrow();
            regs.get(u).map(|r| {
                r.js.iter()
                    .filter_map(|c| c.code.clone())
                    .collect::<String>()
            })
        };
        for r in &all {
            assert!(code(&r.uuid).is_some_and(|c| c.contains("// v2")));
        }

        let bad = all[1].uuid.clone();
        env.refuse_ids.borrow_mut().push(bad.clone());
        env.registry_calls.borrow_mut().clear();
        let got = block_on(sync_many_keyed(&env, wanted(&all, "v3"), None));
        assert_eq!(got.len(), 3);
        for (u, r) in &got {
            assert_eq!(
                matches!(r, Err(SyncError::Refused(_))),
                *u == bad,
                "{u}: {r:?}"
            );
        }
        assert_eq!(code(&bad), None);
        for r in [&all[0], &all[2]] {
            assert!(code(&r.uuid).is_some_and(|c| c.contains("// v3")));
        }
        // The batch, then one update each, and the refused one's unregister.
        assert_eq!(
            (calls_to(&env, "update"), calls_to(&env, "unregister")),
            (4, 1)
        );
    }

    /// Registrations `update` cannot fix (a glob left behind) are unregistered together and
    /// registered again with the new ones, in one call each.
    #[test]
    fn registrations_replaced_whole_are_unregistered_and_registered_together() {
        let env = MemoryEnv::new();
        let all = created(&env, &["A", "B"]);
        block_on(sync_many_keyed(&env, wanted(&all, "v1"), None));
        for r in &all {
            env.registrations
                .borrow_mut()
                .get_mut(&r.uuid)
                .unwrap()
                .include_globs = vec!["https://leftover.test/*".into()];
        }
        let fresh = created(&env, &["Fresh"]);
        env.registry_calls.borrow_mut().clear();
        let mut list = wanted(&all, "v2");
        list.extend(wanted(&fresh, "v2"));
        let got = block_on(sync_many_keyed(&env, list, None));
        assert!(got.iter().all(|(_, r)| *r == Ok(true)), "{got:?}");
        let calls = env.registry_calls.borrow().clone();
        assert_eq!(calls, ["configureWorld", "unregister", "register"]);
        let regs = env.registrations.borrow();
        assert_eq!(regs.len(), 3);
        assert!(regs.values().all(|r| r.include_globs.is_empty()));
    }

    /// A reconcile registers what Chrome lacks in one call, and updates what changed in one.
    #[test]
    fn a_reconcile_registers_the_missing_scripts_in_one_call() {
        let env = MemoryEnv::new();
        for n in ["A", "B", "C"] {
            create(&env, n, true);
        }
        let report = block_on(reconcile(
            &env,
            &block_on(store::load_snapshot(&env)).unwrap(),
        ))
        .unwrap();
        assert_eq!((report.registered, report.ok.len()), (3, 3));
        assert_eq!(calls_to(&env, "register"), 1);
        assert_eq!(env.registrations.borrow().len(), 3);
        // Every registration changed (a new prelude after an extension update): one update.
        for r in env.registrations.borrow_mut().values_mut() {
            r.js[0].code = Some("// an older prelude".into());
        }
        env.registry_calls.borrow_mut().clear();
        let report = block_on(reconcile(
            &env,
            &block_on(store::load_snapshot(&env)).unwrap(),
        ))
        .unwrap();
        assert_eq!((report.registered, report.replaced), (0, 3));
        assert_eq!(*env.registry_calls.borrow(), ["update"]);
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
