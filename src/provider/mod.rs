//! The provider: the one object the shell drives. Policy, scripts and audit live in storage; the
//! provider holds locks, open sessions, waiting reviews, and caches of what it last read or
//! wrote (kept exact by `storage_changed`), so a recycled service worker loses nothing but
//! in-flight work.

mod bridge;
mod gm;
mod gm_clipboard;
mod gm_menu;
mod gm_tab_objects;
mod gm_tabs;
#[cfg(test)]
mod gm_test_support;
mod guards;
mod registry;
mod reviews;
pub(crate) mod runs;
mod sessions;
mod state;

use crate::env::Env;
use crate::guard::review::{Decision, ReviewRequest};
use crate::policy::Policy;
use crate::probe;
use crate::scripts::store::Snapshot;
use crate::session::Session;
use crate::vec_map::{VecMap, VecSet};
use futures::channel::oneshot;
use futures::lock::Mutex;
use serde_json::Value;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

pub use bridge::{BridgeAnswer, BridgeAuth, BridgeView, AUTH_KEY as BRIDGE_AUTH_KEY};
pub use guards::AdmitError;
pub use registry::{RegistryState, SyncOutcome};
pub use reviews::{Applied, Decided, Told};
pub use runs::{Received, Sender};
pub use sessions::{MAX_REFUSED_PORTS, MAX_UNOPENED_PORTS, REFUSED_WINDOW_MS};
pub use state::{watched, Watched};

/// Storage keys owned by the provider (the script store and audit log own theirs).
pub mod keys {
    /// `chrome.storage.local`
    pub const POLICY: &str = "policy";
    /// `chrome.storage.session`: survives service-worker recycling, so a stopped worker does not
    /// reset anyone's window.
    pub const RATE_WINDOW: &str = "rateWindow";
    /// `chrome.storage.session`: true once registrations were reconciled with storage. Session
    /// storage is cleared exactly when Chrome may drop registrations (extension update or
    /// reload), so a worker restart need not reconcile again.
    pub const REGISTRY_SYNCED: &str = "registrySynced";
    /// `chrome.storage.local`: uuid → Chrome's message, for registrations Chrome refused.
    pub const REGISTRY_ERRORS: &str = "registryErrors";
}

/// The shell's hook for [`Provider::tab_bound`] changes.
type OnTabs = Rc<dyn Fn(bool)>;

/// A try world tries are running in ([`Provider`]'s `try_worlds`, `tools::try_script::hold_world`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TryWorld {
    /// Tries there, counted from before their configuration is asked until they end.
    pub tries: u32,
    /// Chrome configured it for one of them.
    pub configured: bool,
    /// Configurations asked and not yet answered.
    pub asking: u32,
}

impl TryWorld {
    /// Holds, or is about to hold, one of Chrome's world configurations.
    pub(crate) fn holding(&self) -> bool {
        self.configured || self.asking > 0
    }
}

pub struct Provider<E> {
    pub env: E,
    /// The event loop interleaves tasks at every `await`; each read-modify-write of shared
    /// stored state holds its lock so that no update is lost.
    policy_lock: Mutex<()>,
    write_lock: Mutex<()>,
    rate_lock: Mutex<()>,
    audit_lock: Mutex<()>,
    /// The policy as last read or written; dropped when storage says it changed otherwise.
    policy_cache: RefCell<Option<Policy>>,
    /// The script index and records as last read or written, likewise.
    scripts_cache: RefCell<Option<Rc<Snapshot>>>,
    /// Held while the snapshot is read, so that callers who come meanwhile take what it read
    /// instead of reading every record again.
    scripts_load: Mutex<()>,
    /// Bumped on every change to the caches above: a load that started before a change must not
    /// fill the cache with what it read.
    policy_gen: Cell<u64>,
    scripts_gen: Cell<u64>,
    /// The rate window (`storage.session`) and Chrome's registration refusals, likewise: a
    /// write and the `status` tool read them without a storage round trip.
    rate_cache: state::Cached<crate::guard::rate_limit::RateWindow>,
    registry_errors_cache: state::Cached<serde_json::Map<String, Value>>,
    /// Script-key changes that came in while a write was under way (`state::hold_echoes`).
    held_echoes: RefCell<Option<Vec<(String, Value)>>>,
    /// The audit rings' heads and newest chunks (`guard::audit::Tail`).
    pub(crate) audit_tail: crate::guard::audit::Tail,
    registry: Cell<RegistryState>,
    /// The session flag still says "not synced" although the registry is Synced: a write's
    /// registration is done and "synced" is stored after its reply (`settle_registry_flag`).
    flag_owed: Cell<bool>,
    /// What the session flag is known to hold (`None`: not read or written by this worker, or
    /// a write of it failed).
    flag_stored: Cell<Option<bool>>,
    /// GM value changes stored (or about to be) whose registration is not done yet: while any
    /// is, "synced" is not stored (`registry::value_change_begins`).
    values_unregistered: Cell<u32>,
    /// Problems worth showing the user (e.g. a failed audit write), newest last, bounded.
    pub log: RefCell<Vec<String>>,
    /// Open `lumo:mcp` ports by id. The shell keeps the `Port` objects under the same ids.
    sessions: RefCell<VecMap<u64, Rc<Session>>>,
    next_session: Cell<u64>,
    /// Writes waiting for the user's review, by arrival (`ReviewRequest::seq`).
    reviews: RefCell<VecMap<u64, Waiting>>,
    /// Reviews decided whose write has not yet recorded its outcome: their stubs stay on disk
    /// until it has, so a worker stopped between leaves a trace (`reviews`, R15).
    decided_stubs: RefCell<Vec<crate::guard::review::Stub>>,
    /// The last review's `seq`: arrival order, never reused in this worker.
    review_seq: Cell<u64>,
    /// Reviews being prepared (their files fetched), by a number of their own: caller and the
    /// bytes reserved. They count as waiting ([`Provider::reserve_review`]).
    preparing: RefCell<VecMap<u64, (String, usize)>>,
    preparing_seq: Cell<u64>,
    /// The previous worker's interrupted reviews have been settled (`reviews`).
    reviews_resumed: Cell<bool>,
    /// Sessions whose writes the user allowed without further review ("allow for this session").
    waived: RefCell<VecSet<u64>>,
    /// Whether this worker has finalized a write the previous one left pending (see
    /// `guard::audit`).
    journal_settled: Cell<bool>,
    /// The final entries of this worker's last write whose record could not be saved (storage
    /// full): the pending slot holds that write, which did happen and was answered, so it is
    /// recorded with them, not as INTERRUPTED, once storage takes it.
    unsaved_finals: RefCell<Vec<crate::guard::audit::Entry>>,
    /// Tries whose code may be running (`guard::audit::begin_try`), as stored; the next key;
    /// and whether this worker has recorded the previous one's as interrupted.
    pending_tries: RefCell<crate::guard::audit::PendingTries>,
    next_try: Cell<u64>,
    tries_settled: Cell<bool>,
    /// Requests being handled, so a cancelled one gets no reply.
    pub(crate) inflight: crate::mcp::inflight::InFlight,
    /// Per caller, ports refused in the current window (`sessions::admits_port`).
    refused_ports: RefCell<crate::vec_map::VecMap<crate::ids::ExtensionId, (f64, u32)>>,
    /// Whether `chrome.userScripts` worked at the last look (None: not looked yet this worker).
    last_available: Cell<Option<bool>>,
    /// Called when something a page shows changed (reviews, sessions): the shell refreshes the
    /// badge.
    /// Kept as an `Rc` so it is cloned out and called with no borrow held: the callback may
    /// re-enter the provider (close a session, set a new callback).
    on_change: RefCell<Option<Rc<dyn Fn()>>>,
    /// Told whether any state is bound to a tab ([`Provider::tab_bound`]) whenever that may
    /// have changed, so the shell listens to tab events only then (`tabs_changed`).
    on_tabs: RefCell<Option<OnTabs>>,
    /// The local bridge link, as the shell last reported it (see `bridge.rs`).
    bridge: RefCell<BridgeView>,
    /// The userscript channel (see `runs.rs`): its rate limits, its key as last read, and the
    /// lock of the run rings' read-modify-write.
    channel_limits: RefCell<crate::channel::rate::RateLimit>,
    channel_key: RefCell<Option<crate::channel::ChannelKey>>,
    runs_lock: Mutex<()>,
    /// Serializes every change of GM values (`gm::store`).
    pub(crate) gm_values: crate::gm::store::ValueStore,
    /// Scripts whose registration waits (for the write lock) to take their new values: a later
    /// change of the same script joins that wait (`gm::refresh_values_snapshot`).
    values_refresh_waiting: RefCell<crate::vec_map::VecSet<String>>,
    /// Pages waiting for another page's value changes: uuid → (tab, frame, answer).
    gm_waiters: RefCell<gm::Waiters>,
    /// Menu commands of open pages, and each page's held wait for a click (`gm_menu`).
    gm_menus: RefCell<crate::gm::menu::Menus>,
    /// One lock per tab a try runs in (`tools::try_script`): tries share the try world, whose
    /// `console` each one hooks while it runs, so two at once would mix their output.
    pub(crate) try_locks: RefCell<VecMap<i64, Rc<Mutex<()>>>>,
    /// Tries naming their page by address that have not found their tab yet
    /// (`tools::try_script::Unplaced`): a try admitted meanwhile may share it.
    pub(crate) tries_unplaced: Cell<usize>,
    /// The try worlds tries are running in, each from before its configuration is asked until
    /// the try ends. Configured while one runs, given back after the last
    /// (`tools::try_script::hold_world`); a reconcile leaves them alone.
    pub(crate) try_worlds: RefCell<VecMap<String, TryWorld>>,
    menu_waiters: RefCell<gm_menu::MenuWaiters>,
    /// A menu command's `GM_setClipboard` on its way to the popup (`gm_clipboard`).
    clipboard: RefCell<gm_clipboard::Handoff>,
    /// Tabs and notifications scripts opened (`gm_tabs`).
    gm_opened: RefCell<gm_tabs::Opened>,
    /// Scripts' tab objects (`GM_saveTab`: `gm_tab_objects`), and the lock of their first read.
    gm_tab_objects: RefCell<gm_tab_objects::TabState>,
    tab_objects_load: Mutex<()>,
    /// Scripts' `GM_xmlhttpRequest`s in flight, for `abort()` (`gm::xhr_flight`).
    gm_flights: RefCell<crate::gm::xhr_flight::Flights>,
}

struct Waiting {
    request: ReviewRequest,
    /// The JSON-RPC id of the `tools/call`, so `notifications/cancelled` can find it.
    rpc_id: Value,
    decide: Option<oneshot::Sender<Decision>>,
    /// Set with an approval: where the write's outcome goes, for the review surface to say.
    told: Option<oneshot::Sender<Applied>>,
}

const MAX_LOG: usize = 50;

impl<E: Env> Provider<E> {
    pub fn new(env: E) -> Self {
        // Whole milliseconds of the start; `as` saturates (a clock before 1970 is epoch 0).
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let epoch = env.now_ms() as u64;
        Provider {
            env,
            policy_lock: Mutex::new(()),
            write_lock: Mutex::new(()),
            rate_lock: Mutex::new(()),
            audit_lock: Mutex::new(()),
            policy_cache: RefCell::new(None),
            scripts_cache: RefCell::new(None),
            scripts_load: Mutex::new(()),
            policy_gen: Cell::new(0),
            scripts_gen: Cell::new(0),
            rate_cache: Default::default(),
            registry_errors_cache: Default::default(),
            audit_tail: Default::default(),
            held_echoes: RefCell::new(None),
            registry: Cell::new(RegistryState::Unknown),
            flag_owed: Cell::new(false),
            flag_stored: Cell::new(None),
            values_unregistered: Cell::new(0),
            log: RefCell::new(Vec::new()),
            sessions: RefCell::new(VecMap::new()),
            next_session: Cell::new(1),
            reviews: RefCell::new(VecMap::new()),
            decided_stubs: RefCell::new(Vec::new()),
            review_seq: Cell::new(0),
            preparing: RefCell::new(VecMap::new()),
            preparing_seq: Cell::new(0),
            reviews_resumed: Cell::new(false),
            waived: RefCell::new(VecSet::new()),
            journal_settled: Cell::new(false),
            unsaved_finals: RefCell::new(Vec::new()),
            pending_tries: RefCell::new(Default::default()),
            next_try: Cell::new(0),
            tries_settled: Cell::new(false),
            inflight: Default::default(),
            refused_ports: Default::default(),
            last_available: Cell::new(None),
            on_change: RefCell::new(None),
            on_tabs: RefCell::new(None),
            bridge: RefCell::new(BridgeView::default()),
            channel_limits: RefCell::new(Default::default()),
            channel_key: RefCell::new(None),
            runs_lock: Mutex::new(()),
            // The cursors pages hold name this worker's changes only.
            gm_values: crate::gm::store::ValueStore::new(epoch),
            values_refresh_waiting: RefCell::new(Default::default()),
            gm_waiters: RefCell::new(Default::default()),
            gm_menus: RefCell::new(Default::default()),
            try_locks: RefCell::new(VecMap::new()),
            tries_unplaced: Cell::new(0),
            try_worlds: RefCell::new(VecMap::new()),
            menu_waiters: RefCell::new(Default::default()),
            clipboard: RefCell::new(Default::default()),
            gm_opened: RefCell::new(Default::default()),
            gm_tab_objects: RefCell::new(Default::default()),
            tab_objects_load: Mutex::new(()),
            gm_flights: RefCell::new(Default::default()),
        }
    }

    pub fn set_on_change(&self, f: Box<dyn Fn()>) {
        *self.on_change.borrow_mut() = Some(Rc::from(f));
    }

    pub(crate) fn changed(&self) {
        let f = self.on_change.borrow().clone();
        if let Some(f) = f {
            f();
        }
    }

    pub fn set_on_tabs(&self, f: Box<dyn Fn(bool)>) {
        *self.on_tabs.borrow_mut() = Some(Rc::from(f));
    }

    /// Whether anything the worker holds belongs to a tab: a page's menu commands, a tab a
    /// script opened, a script's tab object (`GM_saveTab`). Only then do tab events (a navigation, a closed tab) matter; all of it is
    /// in memory, so a fresh worker has none, and the shell need not be woken for every
    /// navigation in the browser.
    pub fn tab_bound(&self) -> bool {
        !self.gm_menus.borrow().is_empty()
            || self.gm_opened.borrow().has_tabs()
            || self.has_tab_objects()
    }

    /// Called after every change of what [`Provider::tab_bound`] reads, with no borrow held.
    pub(crate) fn tabs_changed(&self) {
        let f = self.on_tabs.borrow().clone();
        if let Some(f) = f {
            f(self.tab_bound());
        }
    }

    pub fn note(&self, msg: String) {
        let mut log = self.log.borrow_mut();
        if log.len() >= MAX_LOG {
            log.remove(0);
        }
        log.push(msg);
    }

    /// L0: answers one `lumo:probe` message (its JSON text; `None`: it has none) from `sender`
    /// (Chrome's `sender.id`, unvalidated). A message that is not a probe is refused before the
    /// policy is read.
    pub async fn probe(&self, text: Option<&str>, sender: Option<&str>) -> probe::Reply {
        self.probe_read(probe::parse_text(text), sender).await
    }

    /// A probe of `len` bytes (at least), too long for the shell to copy into the wasm, whose
    /// memory never shrinks: refused as [`Provider::probe`] refuses any probe over the bound.
    pub fn probe_over(&self, len: usize) -> probe::Reply {
        probe::Reply::Refused(probe::ProbeError::TooLarge(
            len.max(probe::MAX_PROBE_BYTES.saturating_add(1)),
        ))
    }

    async fn probe_read(
        &self,
        read: Result<probe::ProbeRequest, probe::ProbeError>,
        sender: Option<&str>,
    ) -> probe::Reply {
        let req = match read {
            Ok(r) => r,
            Err(e) => return probe::Reply::Refused(e),
        };
        let cap = self.capability();
        let now = self.env.now_ms();
        let mut answered = None;
        let recorded = self
            .update_policy(|p| {
                let (reply, changed) = probe::answer(&req, sender, p, &cap, now);
                answered = Some(reply);
                ((), changed)
            })
            .await;
        match (recorded, answered) {
            // Only recording the probe failed (`lastSeen`, a pending request; storage full): the
            // policy was read, so the answer stands. Saying "turned off" would send the user
            // looking for a switch that is on.
            (Ok(_) | Err(state::PolicyStoreError::Save(_)), Some(reply)) => reply,
            // Storage is unreadable: still answer, from the defaults, without recording anything.
            _ => {
                let mut p = Policy {
                    endpoint_enabled: false,
                    ..Policy::default()
                };
                probe::answer(&req, sender, &mut p, &cap, now).0
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::memory::MemoryEnv;
    use crate::env::Area;
    use crate::ids::ExtensionId;
    use crate::policy::LAST_SEEN_GRANULARITY_MS;
    use futures::executor::block_on;
    use serde_json::json;
    use serde_json::Map;

    const HOST: &str = "mobcibglkcoacmddjpdoknlbbicjchlk";

    fn probe_msg() -> String {
        json!({"channel": "lumo:probe", "version": 1, "id": 1, "client": {"id": HOST, "name": "Lumo"}})
            .to_string()
    }

    /// The provider's reply to a probe from HOST, as the host reads it.
    fn probe(p: &Provider<MemoryEnv>) -> Value {
        let reply = block_on(p.probe(Some(&probe_msg()), Some(HOST)));
        serde_json::from_str(&reply.to_json()).unwrap()
    }

    #[test]
    fn probe_persists_pending_approval() {
        let p = Provider::new(MemoryEnv::new());
        let r = probe(&p);
        assert_eq!(r["status"]["pendingApproval"], json!(true));
        let stored = block_on(p.policy());
        assert_eq!(stored.pending.len(), 1);
        assert_eq!(stored.pending[0].name, "Lumo");
    }

    #[test]
    fn probe_reports_capability() {
        let p = Provider::new(MemoryEnv::new());
        p.env.user_scripts.set(false);
        let r = probe(&p);
        assert_eq!(r["status"]["ready"], json!(false));
    }

    /// A probe that changes nothing (agent access off here) must still leave the policy cached,
    /// so the next probe does not read storage. Storage is changed below WITHOUT the change
    /// notification Chrome always sends, only to see whether the second probe read it.
    #[test]
    fn a_probe_that_changes_nothing_caches_the_policy() {
        let off = Policy {
            endpoint_enabled: false,
            ..Default::default()
        };
        let mut m = Map::new();
        m.insert(keys::POLICY.into(), off.to_stored());
        for warm_first in [false, true] {
            let p = Provider::new(MemoryEnv::new());
            block_on(crate::env::Storage::set(&p.env, Area::Local, m.clone())).unwrap();
            // The first reader: a probe, or the shell's start-up `warm_policy`.
            if warm_first {
                block_on(p.warm_policy());
            } else {
                probe(&p);
            }
            let mut on = Map::new();
            on.insert(keys::POLICY.into(), Policy::default().to_stored());
            block_on(crate::env::Storage::set(&p.env, Area::Local, on)).unwrap();
            let r = probe(&p);
            assert_eq!(
                r["status"]["enabled"],
                json!(false),
                "read storage again: {r}"
            );
        }
    }

    #[test]
    fn caches_follow_storage_changed_by_another_hand() {
        let p = Provider::new(MemoryEnv::new());
        probe(&p);
        assert_eq!(block_on(p.policy()).pending.len(), 1);
        // Storage changed behind the provider's back (devtools, another copy of the worker).
        let other = crate::policy::Policy {
            writes_enabled: false,
            ..Default::default()
        };
        let mut m = Map::new();
        m.insert(keys::POLICY.into(), other.to_stored());
        block_on(crate::env::Storage::set(&p.env, Area::Local, m.clone())).unwrap();
        // Our own write arriving as a change notification keeps the cache…
        let mine = block_on(p.policy());
        assert!(!mine.pending.is_empty(), "the echo carries a timestamp");
        let mut echo = Map::new();
        echo.insert(
            keys::POLICY.into(),
            MemoryEnv::as_chrome_returns(&mine.to_stored()),
        );
        p.storage_changed(Area::Local, &echo);
        assert!(block_on(p.policy()).writes_enabled);
        // …anything else drops it.
        p.storage_changed(Area::Local, &m);
        assert!(!block_on(p.policy()).writes_enabled);
    }

    #[test]
    fn script_cache_survives_own_writes_and_drops_foreign_ones() {
        use crate::scripts::store;
        let p = Provider::new(MemoryEnv::new());
        let src = "// ==UserScript==\n// @name A\n// @match https://a.com/*\n// ==/UserScript==\n";
        let snap = block_on(p.scripts()).unwrap();
        let c = block_on(store::create(&p.env, &snap, "user", src, true, 1 << 20)).unwrap();
        p.scripts_written(&c);
        let key = store::record_key(&c.record.uuid);
        let mut echo = Map::new();
        // As Chrome hands it back: `createdAt` (an f64 here) arrives as an integer.
        echo.insert(
            key.clone(),
            MemoryEnv::as_chrome_returns(&serde_json::to_value(&c.record).unwrap()),
        );
        echo.insert(store::INDEX_KEY.into(), json!({ "uuids": [c.record.uuid] }));
        p.storage_changed(Area::Local, &echo);
        assert!(
            p.scripts_cache.borrow().is_some(),
            "our own write keeps the cache"
        );
        let mut foreign = Map::new();
        foreign.insert(key, json!({ "garbage": true }));
        p.storage_changed(Area::Local, &foreign);
        assert!(
            p.scripts_cache.borrow().is_none(),
            "a foreign write drops it"
        );
        assert_eq!(block_on(p.scripts()).unwrap().records.len(), 1);
    }

    /// The rate window is read once and then kept: our own write's echo keeps it, anyone else's
    /// change (a page clearing it, another copy of the worker) drops it.
    #[test]
    fn the_rate_window_cache_follows_storage() {
        use crate::guard::rate_limit::MAX_WRITES;
        let p = Provider::new(MemoryEnv::new());
        for _ in 0..MAX_WRITES {
            block_on(p.admit_write(HOST)).unwrap();
        }
        let stored = p.env.dump(Area::Session)[keys::RATE_WINDOW].clone();
        let mut echo = Map::new();
        echo.insert(
            keys::RATE_WINDOW.into(),
            MemoryEnv::as_chrome_returns(&stored),
        );
        p.storage_changed(Area::Session, &echo);
        // Storage emptied WITHOUT a notification: only a cached window still refuses.
        p.env.areas.borrow_mut().insert(Area::Session, Map::new());
        assert!(
            block_on(p.admit_write(HOST)).is_err(),
            "the echo kept the window"
        );
        assert_eq!(block_on(p.writes_left(HOST)), 0);
        // A foreign change (the window removed by a page) is read again.
        let mut removed = Map::new();
        removed.insert(keys::RATE_WINDOW.into(), Value::Null);
        p.storage_changed(Area::Session, &removed);
        assert_eq!(block_on(p.writes_left(HOST)), MAX_WRITES);
        assert!(block_on(p.admit_write(HOST)).is_ok());
    }

    /// An append is one `set` once the ring's tail is known; a change by another hand (the log
    /// rewritten in devtools) is read again before the next append, never overwritten.
    #[test]
    fn the_audit_tail_follows_storage() {
        use crate::guard::audit::{self, Entry};
        let p = Provider::new(MemoryEnv::new());
        let entry = |at: f64| Entry {
            at,
            tool: "write_script".into(),
            caller: HOST.into(),
            result: "ok".into(),
            target: None,
            digest: String::new(),
            unchanged: false,
            from_trash: false,
            revision: None,
            purged: None,
            name: None,
            count: None,
        };
        let echo = |p: &Provider<MemoryEnv>| {
            let local = p.env.dump(Area::Local);
            let changes: Map<String, Value> = local
                .iter()
                .filter(|(k, _)| k.starts_with("audit/"))
                .map(|(k, v)| (k.clone(), MemoryEnv::as_chrome_returns(v)))
                .collect();
            p.storage_changed(Area::Local, &changes);
        };
        let ats = |p: &Provider<MemoryEnv>| -> Vec<f64> {
            block_on(audit::read_all(&p.env))
                .unwrap()
                .iter()
                .map(|e| e.at)
                .collect()
        };
        block_on(p.audit(&entry(1.0)));
        echo(&p);
        block_on(p.audit(&entry(2.0)));
        echo(&p);
        // Changed WITHOUT a notification: only a kept tail ignores it.
        p.env
            .areas
            .borrow_mut()
            .get_mut(&Area::Local)
            .unwrap()
            .insert("audit/0".into(), json!([]));
        block_on(p.audit(&entry(3.0)));
        assert_eq!(ats(&p), [3.0, 2.0, 1.0], "the echo kept the tail");
        // Another hand's change, notified: read again, kept.
        let mut foreign = Map::new();
        foreign.insert(
            "audit/0".into(),
            serde_json::to_value([entry(9.0)]).unwrap(),
        );
        block_on(crate::env::Storage::set(
            &p.env,
            Area::Local,
            foreign.clone(),
        ))
        .unwrap();
        p.storage_changed(Area::Local, &foreign);
        block_on(p.audit(&entry(10.0)));
        assert_eq!(ats(&p), [10.0, 9.0]);
    }

    #[test]
    fn the_registration_errors_cache_follows_storage() {
        let p = Provider::new(MemoryEnv::new());
        block_on(p.set_registration_errors(&[("u1".into(), "Invalid host.".into())], &[]));
        let stored = p.env.dump(Area::Local)[keys::REGISTRY_ERRORS].clone();
        let mut echo = Map::new();
        echo.insert(keys::REGISTRY_ERRORS.into(), stored);
        p.storage_changed(Area::Local, &echo);
        p.env.areas.borrow_mut().insert(Area::Local, Map::new());
        assert_eq!(
            block_on(p.registration_errors()).len(),
            1,
            "the echo kept it"
        );
        let mut other = Map::new();
        other.insert(keys::REGISTRY_ERRORS.into(), json!({"u2": "x", "u3": "y"}));
        p.storage_changed(Area::Local, &other);
        assert!(block_on(p.registration_errors()).is_empty(), "read again");
    }

    /// Chrome may deliver a write's own echo before the write has updated the cache (seen with
    /// 1,000 scripts): held and judged after the write, it keeps the cache; a foreign change
    /// held the same way still drops it.
    #[test]
    fn an_echo_that_arrives_before_the_cache_is_updated_keeps_it() {
        use crate::scripts::store;
        let p = Provider::new(MemoryEnv::new());
        let src = "// ==UserScript==\n// @name A\n// @match https://a.com/*\n// ==/UserScript==\n";
        let snap = block_on(p.scripts()).unwrap();
        let c = block_on(store::create(&p.env, &snap, "user", src, true, 1 << 20)).unwrap();
        p.scripts_written(&c);
        let snap = block_on(p.scripts()).unwrap();
        let key = store::record_key(&c.record.uuid);
        for foreign in [false, true] {
            let held = p.hold_echoes();
            let d = block_on(store::replace(
                &p.env,
                &snap,
                "user",
                &c.record.uuid,
                block_on(p.scripts()).unwrap().records[0].revision,
                src,
                None,
                1 << 20,
            ))
            .unwrap();
            let mut echo = Map::new();
            let stored = if foreign {
                json!({ "garbage": true })
            } else {
                MemoryEnv::as_chrome_returns(&serde_json::to_value(&d.record).unwrap())
            };
            echo.insert(key.clone(), stored);
            p.storage_changed(Area::Local, &echo); // before the cache knows of the write
            assert!(p.scripts_cache.borrow().is_some(), "held, not judged yet");
            p.scripts_written(&d);
            drop(held);
            assert_eq!(
                p.scripts_cache.borrow().is_some(),
                !foreign,
                "foreign: {foreign}"
            );
            if foreign {
                break;
            }
        }
    }

    #[test]
    fn registry_reconciles_once_then_trusts_the_session_flag() {
        let p = Provider::new(MemoryEnv::new());
        block_on(p.ensure_registry());
        assert_eq!(p.registry_state(), RegistryState::Synced);
        assert_eq!(
            p.env.dump(Area::Session)[keys::REGISTRY_SYNCED],
            json!(true)
        );
        // A new worker over the same storage does not reconcile again…
        let q = Provider::new(MemoryEnv::new());
        *q.env.areas.borrow_mut() = p.env.areas.borrow().clone();
        block_on(q.ensure_registry());
        assert_eq!(q.registry_state(), RegistryState::Synced);
        // …until the API is seen coming back after being unavailable.
        q.env.user_scripts.set(false);
        q.capability();
        q.env.user_scripts.set(true);
        q.capability();
        assert_eq!(q.registry_state(), RegistryState::Stale);
        block_on(q.ensure_registry());
        assert_eq!(q.registry_state(), RegistryState::Synced);
    }

    #[test]
    fn the_change_callback_may_reenter_the_provider() {
        // The shell's callback runs with no borrow of the provider held: it may close another
        // session (a re-entrant disconnect) or replace itself without a BorrowMutError panic.
        let p = Rc::new(Provider::new(MemoryEnv::new()));
        let host = crate::ids::ExtensionId::parse(HOST).unwrap();
        let a = p.open_session(host.clone()).id;
        let b = p.open_session(host).id;
        let calls = Rc::new(Cell::new(0));
        let (weak, seen) = (Rc::downgrade(&p), Rc::clone(&calls));
        p.set_on_change(Box::new(move || {
            seen.set(seen.get() + 1);
            let Some(p) = weak.upgrade() else { return };
            // Closing `b` from inside the callback calls the callback again (nested).
            p.close_session(b);
            let seen = Rc::clone(&seen);
            p.set_on_change(Box::new(move || seen.set(seen.get() + 100)));
        }));
        assert!(p.close_session(a));
        assert!(p.session(b).is_none(), "closed from inside the callback");
        assert!(calls.get() >= 1);
        // The replacement is the one called from now on.
        let before = calls.get();
        let c = p
            .open_session(crate::ids::ExtensionId::parse(HOST).unwrap())
            .id;
        p.close_session(c);
        assert_eq!(calls.get(), before + 100);
    }

    #[test]
    fn unwritable_storage_still_answers_without_authorizing() {
        let p = Provider::new(MemoryEnv::new());
        *p.env.fail_writes.borrow_mut() = Some("QUOTA_BYTES quota exceeded".into());
        let r = probe(&p);
        assert_eq!(r["ok"], json!(true));
        assert_eq!(r["status"]["authorized"], json!(false));
        assert_eq!(r["status"]["enabled"], json!(true));
    }

    /// Storage full: an approved caller's probe cannot record `lastSeen`, and must still be
    /// told the truth (enabled, authorized), not that agent access is turned off.
    #[test]
    fn a_probe_that_cannot_be_recorded_is_answered_from_the_policy_read() {
        let p = Provider::new(MemoryEnv::new());
        let host = ExtensionId::parse(HOST).unwrap();
        block_on(p.update_policy(|pol| (pol.approve(&host, Some("Lumo"), 0.0), true)))
            .unwrap()
            .0
            .unwrap();
        p.env.now.set(10.0 * LAST_SEEN_GRANULARITY_MS);
        *p.env.fail_writes.borrow_mut() = Some("QUOTA_BYTES quota exceeded".into());
        let r = probe(&p);
        assert_eq!(r["status"]["enabled"], json!(true), "{r}");
        assert_eq!(r["status"]["authorized"], json!(true), "{r}");
        // Nothing was recorded: storage still has no lastSeen.
        assert_eq!(block_on(p.policy()).allowlist[0].last_seen, None);
    }
}
