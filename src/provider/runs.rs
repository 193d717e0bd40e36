//! The provider's side of the userscript channel: a message the shell received on
//! `onUserScriptMessage` is decided by `channel::decide` and, if it is a run report of a live
//! script, appended to that script's ring (`scripts::runs`); a late error joins the run of the
//! same document. Every ring write also weighs all rings against their total budget
//! (`runs::enforce_budget`), and in `chrome.storage.local` against the agents' share of the
//! storage (`Provider::within_share`). Nothing here calls tools, the policy, the probe or a
//! session: the channel's only effect is a stored run.

use super::Provider;
use crate::channel::{self, key_store, ChannelKey, Dropped, Message, Verdict};
use crate::env::{Area, Env, EnvError};
use crate::scripts::in_tabs::{InTabs, Place, IN_TABS_KEY};
use crate::scripts::runs::{self, Budget, Ring, Seen, BUDGET_KEY, CURSOR_KEY, MAX_TOTAL_BYTES};
use serde_json::{Map, Value};

/// What Chrome says about the sender (`MessageSender`): trusted, unlike the message.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sender {
    pub url: Option<String>,
    pub frame_id: Option<i64>,
    pub tab_id: Option<i64>,
    /// `sender.documentId`: which document of the frame (a late error joins that document's
    /// run; menu commands go with it).
    pub document_id: Option<String>,
    /// `sender.tab.index` (GM_openInTab puts a new tab after it).
    pub tab_index: Option<i64>,
    /// `sender.tab.windowId` (GM_openInTab opens in that window, not the last focused one).
    pub window_id: Option<i64>,
    /// `sender.tab.incognito`: the page is in an incognito window, whose cookies the worker's
    /// `fetch` (in the regular profile) cannot use.
    pub incognito: bool,
}

/// The most of `sender.url` kept, in characters: a page can make its address megabytes long
/// (`history.replaceState`), and each menu entry and run report keeps the URL.
pub const MAX_SENDER_URL: usize = 8 * 1024;

impl Sender {
    /// What Chrome said, bounded before any of it is kept.
    fn bounded(mut self) -> Self {
        if let Some(u) = self.url.as_mut() {
            if u.len() > MAX_SENDER_URL {
                *u = crate::text::ellipsize(u, MAX_SENDER_URL);
            }
        }
        if let Some(d) = self.document_id.as_mut() {
            if d.len() > 128 {
                *d = crate::text::ellipsize(d, 128);
            }
        }
        self
    }
}

/// What a ring's write stores: a new run (with where it ran, for the popup), which may take
/// the place of its own script's older runs to stay within the agents' share of the storage;
/// or a late error or a retraction, which takes none.
enum RingChange {
    NewRun(Option<InTabs>),
    Late,
}

/// What became of one message (for tests and the worker's log).
#[derive(Debug, Clone, PartialEq)]
pub enum Received {
    Stored {
        uuid: String,
        id: u64,
    },
    Dropped(Dropped),
    /// Well-formed and proven, but the script is gone (deleted) or the revision is not one it had.
    NotLive,
    /// Storage refused the write.
    Failed(String),
    /// A GM request, and the answer the script gets.
    Answered(Value),
}

impl Received {
    /// What the script is answered: a GM request's answer, the reason for a refusal it can act
    /// on (too much of its own waiting), else nothing (`null`: a hostile script learns nothing).
    pub fn answer(self) -> Option<Value> {
        match self {
            Received::Answered(v) => Some(v),
            Received::Dropped(Dropped::Backlogged(full)) => Some(crate::value::object(vec![(
                "error",
                Value::from(full.message()),
            )])),
            // The script's own bound: it is told, so a refused `GM.setValue` rejects at once and
            // the page reads its values again (R15: silence read as "did not answer").
            Received::Dropped(Dropped::RateLimited) => Some(crate::value::object(vec![
                ("error", Value::from(RATE_LIMITED)),
                ("rate", Value::Bool(true)),
            ])),
            _ => None,
        }
    }
}

/// What a script over a bound of messages is told: its own (per kind, or its share of the
/// channel) or, while others flood, the channel's (R16: it blamed the script alone).
pub const RATE_LIMITED: &str = "GM: refused for the rate: this script's pages, or all scripts \
     together, sent more messages in the last minute than the provider takes (one script: 600 GM \
     requests and 1,200 value-listener waits); this one did nothing";

/// Where a run's ring is kept: a page in an incognito window leaves nothing on disk, so its
/// runs are in `chrome.storage.session` (memory only, gone when the browser quits).
fn runs_area(incognito: bool) -> Area {
    if incognito {
        Area::Session
    } else {
        Area::Local
    }
}

/// A message's place in the channel's backlog (`channel::backlog`), given back when its
/// handling ends, however it ends.
struct Held<'a> {
    limits: &'a std::cell::RefCell<channel::rate::RateLimit>,
    uuid: String,
    weight: usize,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if let Ok(mut l) = self.limits.try_borrow_mut() {
            l.backlog.release(&self.uuid, self.weight);
        }
    }
}

impl<E: Env> Provider<E> {
    /// The channel key as stored (cached once found; the cache is dropped when storage changes
    /// it, see `storage_changed`).
    async fn channel_key(&self) -> Option<ChannelKey> {
        if let Some(k) = self.channel_key.borrow().clone() {
            return Some(k);
        }
        let k = key_store::load(&self.env).await?;
        *self.channel_key.borrow_mut() = Some(k.clone());
        Some(k)
    }

    /// The key a registration's prelude is made with: the cached one, else the stored one, made
    /// and stored first if there is none (callers hold the write lock; a key made now changes
    /// every token, so the registry is reconciled next). `None` when storage fails: the script
    /// is registered without the prelude, as `sync::sync_one` does.
    pub(crate) async fn prelude_key(&self) -> Option<ChannelKey> {
        if let Some(k) = self.channel_key.borrow().clone() {
            return Some(k);
        }
        let (k, made) = crate::channel::key_store::made(&self.env).await.ok()?;
        if made {
            self.mark_registry_stale().await;
        }
        *self.channel_key.borrow_mut() = Some(k.clone());
        Some(k)
    }

    pub(crate) fn forget_channel_key(&self) {
        *self.channel_key.borrow_mut() = None;
    }

    /// One message from a userscript world. `raw` gives its JSON text, and is called only if
    /// the channel admits one more message (a flood costs no conversion).
    pub async fn user_script_message(
        &self,
        raw: impl FnOnce() -> Option<String>,
        sender: Sender,
    ) -> Received {
        self.user_script_message_hinted(None, raw, sender).await
    }

    /// [`Self::user_script_message`] with the message's token read alone first (`hint`), so a
    /// flood is charged to the script that sends it (`channel::decide_hinted`).
    pub async fn user_script_message_hinted(
        &self,
        hint: Option<String>,
        raw: impl FnOnce() -> Option<String>,
        sender: Sender,
    ) -> Received {
        let sender = sender.bounded();
        let key = self.channel_key().await;
        let now = self.env.now_ms();
        let verdict = {
            let mut limits = self.channel_limits.borrow_mut();
            channel::decide_hinted(&mut limits, key.as_ref(), hint.as_deref(), raw, now)
        };
        let (from, message, weight) = match verdict {
            Verdict::Accept {
                from,
                message,
                held,
            } => (from, message, held),
            Verdict::Drop(d) => return Received::Dropped(d),
        };
        let _held = Held {
            limits: &self.channel_limits,
            uuid: from.uuid.clone(),
            weight,
        };
        let live = match self.scripts().await {
            Ok(s) => s
                .records
                .iter()
                .any(|r| r.uuid == from.uuid && from.revision <= r.revision),
            Err(_) => false,
        };
        if !live {
            return Received::NotLive;
        }
        match message {
            Message::Gm(req) => Received::Answered(self.gm_request(&from.uuid, &sender, req).await),
            Message::Late(late) => {
                let attach = |ring: &mut Ring, doc: &str, id| ring.attach_late(doc, &late, id);
                self.late_change(from.uuid, &sender, now, "store a late error", &attach)
                    .await
            }
            Message::Handled(n) => {
                let retract = |ring: &mut Ring, doc: &str, id| ring.retract_late(doc, n, id);
                self.late_change(from.uuid, &sender, now, "take back a late error", &retract)
                    .await
            }
            Message::Run(report) => {
                let seen = Seen {
                    uuid: from.uuid.clone(),
                    revision: from.revision,
                    // Where an incognito page was is not kept, not even here.
                    url: if sender.incognito {
                        String::new()
                    } else {
                        sender.url.unwrap_or_default()
                    },
                    frame_id: sender.frame_id,
                    tab_id: sender.tab_id,
                    document_id: sender.document_id,
                    at: now,
                    incognito: sender.incognito,
                };
                let dropped = self.channel_limits.borrow_mut().take_dropped(&from.uuid);
                match self.store_run(&seen, &report, dropped).await {
                    Ok(id) => Received::Stored {
                        uuid: from.uuid,
                        id,
                    },
                    Err(e) => {
                        self.note(format!("could not store a run report: {e}"));
                        Received::Failed(e.0)
                    }
                }
            }
        }
    }

    /// Runs `f` with the run reports' lock held: a purge rewrites `runs/budget`, which a report
    /// being stored reads and then writes under that lock (R18: a report read before the purge's
    /// `set` and written after it brought the purged script's entry back).
    pub(crate) async fn runs_locked<T>(&self, f: impl std::future::Future<Output = T>) -> T {
        let _guard = self.runs_lock.lock().await;
        f.await
    }

    async fn store_run(
        &self,
        seen: &Seen,
        report: &channel::message::RunReport,
        dropped: u64,
    ) -> Result<u64, EnvError> {
        let _guard = self.runs_lock.lock().await;
        let area = runs_area(seen.incognito);
        let key = runs::runs_key(&seen.uuid);
        let (got, last, mut in_tabs) = self.read_for_run(area, &key).await?;
        let id = runs::next_cursor(last, seen.at);
        let mut ring = Ring::decode(got.get(&key));
        ring.push(runs::run_json(id, seen, report), dropped);
        // Where it ran, for the popup (`in_tabs`): a page's run, not the worker's own.
        let place = match (seen.tab_id, &seen.document_id) {
            (Some(tab), Some(doc)) => {
                in_tabs.push(Place {
                    tab,
                    uuid: seen.uuid.clone(),
                    document: crate::text::ellipsize(doc, 64),
                    frame: seen.frame_id.unwrap_or(0),
                });
                Some(in_tabs)
            }
            _ => None,
        };
        let kept = self
            .save_rings(
                area,
                &seen.uuid,
                ring,
                Budget::decode(got.get(BUDGET_KEY)),
                id,
                RingChange::NewRun(place),
            )
            .await?;
        if !kept {
            return Err(EnvError(format!(
                "the extension's storage is nearly full (past the {} bytes run reports may \
                 fill) and this script's older runs cannot make room for it: the report was \
                 not kept",
                crate::scripts::quota::AGENT_LIMIT_BYTES
            )));
        }
        Ok(id)
    }

    /// What a run's write reads of `area` (the script's ring, the cursor, the budget), the
    /// last cursor given in either area (the runs of both are read together, so each cursor is
    /// past the other area's too), and where scripts ran by tab (`storage.session`'s). The two
    /// areas are asked at once.
    async fn read_for_run(
        &self,
        area: Area,
        key: &str,
    ) -> Result<(Map<String, Value>, u64, InTabs), EnvError> {
        let local = [key, CURSOR_KEY, BUDGET_KEY];
        let session = [key, CURSOR_KEY, BUDGET_KEY, IN_TABS_KEY];
        let (other, own_keys, other_keys): (Area, &[&str], &[&str]) = match area {
            Area::Local => (Area::Session, &local, &[CURSOR_KEY, IN_TABS_KEY]),
            Area::Session => (Area::Local, &session, &[CURSOR_KEY]),
        };
        let (got, theirs) = futures::future::join(
            self.env.get(area, own_keys),
            self.env.get(other, other_keys),
        )
        .await;
        let (got, theirs) = (got?, theirs?);
        let last = [&got, &theirs]
            .iter()
            .filter_map(|m| m.get(CURSOR_KEY).and_then(Value::as_u64))
            .max()
            .unwrap_or(0);
        let in_tabs = InTabs::decode(got.get(IN_TABS_KEY).or(theirs.get(IN_TABS_KEY)));
        Ok((got, last, in_tabs))
    }

    /// A late error or a retraction (`change`, given the sender's document) in the ring of the
    /// script `uuid`; `what` names it for the worker's log.
    async fn late_change(
        &self,
        uuid: String,
        sender: &Sender,
        now: f64,
        what: &str,
        change: &dyn Fn(&mut Ring, &str, u64) -> bool,
    ) -> Received {
        let Some(doc) = sender.document_id.as_deref() else {
            return Received::NotLive;
        };
        let area = runs_area(sender.incognito);
        let apply = |ring: &mut Ring, id| change(ring, doc, id);
        match self.store_late(area, &uuid, &apply, now).await {
            Ok(Some(id)) => Received::Stored { uuid, id },
            Ok(None) => Received::NotLive,
            Err(e) => {
                self.note(format!("could not {what}: {e}"));
                Received::Failed(e.0)
            }
        }
    }

    /// A late error joins the newest run of that document in the script's ring, or a retraction
    /// takes one back (`change`, given the new cursor); `None` when no such run is kept. The
    /// run report is sent first, but two messages' tasks may reach the ring out of order (each
    /// awaits storage), so a change that finds no run yet looks again a few times, 250 ms apart
    /// (bounded: the late window is 60 a minute per script, retractions included).
    async fn store_late(
        &self,
        area: Area,
        uuid: &str,
        change: &dyn Fn(&mut Ring, u64) -> bool,
        now: f64,
    ) -> Result<Option<u64>, EnvError> {
        for attempt in 0..4 {
            if attempt > 0 {
                self.env.sleep(250.0).await;
            }
            let _guard = self.runs_lock.lock().await;
            let key = runs::runs_key(uuid);
            let (got, last, _) = self.read_for_run(area, &key).await?;
            let id = runs::next_cursor(last, now.max(self.env.now_ms()));
            let mut ring = Ring::decode(got.get(&key));
            if !change(&mut ring, id) {
                continue;
            }
            // At the storage's share, a change that would grow the ring is not stored.
            let kept = self
                .save_rings(
                    area,
                    uuid,
                    ring,
                    Budget::decode(got.get(BUDGET_KEY)),
                    id,
                    RingChange::Late,
                )
                .await?;
            return Ok(kept.then_some(id));
        }
        Ok(None)
    }

    /// Stores `ring` (of `uuid`) and the cursor, after bringing all rings within their total
    /// budget: the oldest runs of the biggest rings go first, each ring it trims written in the
    /// same `set`. Bounded work: at most 16 other rings read and 512 runs dropped per write.
    /// With `in_tabs`, that too, in `storage.session` (in the same `set` when the ring is
    /// there, else in one of its own, at once). In `chrome.storage.local` the write stays
    /// within the agents' share of the storage ([`Self::within_share`]). Whether the ring was
    /// stored.
    async fn save_rings(
        &self,
        area: Area,
        uuid: &str,
        ring: Ring,
        mut budget: Budget,
        cursor: u64,
        change: RingChange,
    ) -> Result<bool, EnvError> {
        let (in_tabs, replaceable) = match change {
            RingChange::NewRun(place) => (place, true),
            RingChange::Late => (None, false),
        };
        budget.set(uuid, &ring);
        let mut loaded = crate::vec_map::VecMap::new();
        loaded.insert(uuid.to_owned(), ring);
        for _ in 0..16 {
            let Some(need) = runs::enforce_budget(&mut budget, &mut loaded, MAX_TOTAL_BYTES, 512)
            else {
                break;
            };
            let k = runs::runs_key(&need);
            let got = self.env.get(area, &[&k]).await?;
            loaded.insert(need, Ring::decode(got.get(&k)));
        }
        let mut m = Map::new();
        for (u, r) in &loaded {
            m.insert(runs::runs_key(u), r.encode());
        }
        m.insert(BUDGET_KEY.to_owned(), budget.encode());
        m.insert(CURSOR_KEY.to_owned(), Value::from(cursor));
        let kept =
            area == Area::Session || self.within_share(uuid, &mut m, budget, replaceable).await?;
        match in_tabs {
            Some(ix) if area == Area::Session => {
                m.insert(IN_TABS_KEY.to_owned(), ix.encode());
                self.env.set(area, m).await?;
            }
            Some(ix) => {
                let mut s = Map::new();
                s.insert(IN_TABS_KEY.to_owned(), ix.encode());
                let ring = async {
                    match kept {
                        true => self.env.set(area, m).await,
                        false => Ok(()),
                    }
                };
                let (ring, places) =
                    futures::future::join(ring, self.env.set(Area::Session, s)).await;
                ring.and(places)?;
            }
            None if kept => self.env.set(area, m).await?,
            None => {}
        }
        Ok(kept)
    }

    /// Whether the rings' `set` of `m` keeps `chrome.storage.local` within the agents' share
    /// (`quota::AGENT_LIMIT_BYTES`), as Chrome counts its bytes, or frees bytes: a script may be
    /// an agent's, and runs must not eat the user's reserve. Past it, when `replaceable` (a new
    /// run), the run takes the place of its own script's older runs, the oldest first (`m`
    /// updated); a late change takes none. False: nothing may be written.
    async fn within_share(
        &self,
        uuid: &str,
        m: &mut Map<String, Value>,
        mut budget: Budget,
        replaceable: bool,
    ) -> Result<bool, EnvError> {
        use crate::scripts::quota::{item_bytes, within_agent_limit};
        let keys: Vec<&str> = m.keys().map(String::as_str).collect();
        let (all, replaced) = futures::future::join(
            self.env.bytes_in_use(Area::Local, None),
            self.env.bytes_in_use(Area::Local, Some(&keys)),
        )
        .await;
        let (all, replaced) = (all?, replaced?);
        let key = runs::runs_key(uuid);
        let bytes = |m: &Map<String, Value>| {
            m.iter()
                .map(|(k, v)| item_bytes(k, v))
                .fold(0, usize::saturating_add)
        };
        let mut size = bytes(m);
        // What the write holds besides the two items a trim rewrites: the ring and the budget.
        let others = [key.as_str(), BUDGET_KEY].iter().fold(size, |n, k| {
            n.saturating_sub(m.get(*k).map_or(0, |v| item_bytes(k, v)))
        });
        let mut ring = Ring::decode(m.get(&key));
        while within_agent_limit(all, replaced, size).is_err() {
            if !replaceable || ring.runs.len() <= 1 {
                return Ok(false);
            }
            ring.runs.remove(0);
            budget.set(uuid, &ring);
            let (r, b) = (ring.encode(), budget.encode());
            size = others
                .saturating_add(item_bytes(BUDGET_KEY, &b))
                .saturating_add(item_bytes(&key, &r));
            m.insert(key.clone(), r);
            m.insert(BUDGET_KEY.to_owned(), b);
        }
        // What is written is what was weighed.
        debug_assert_eq!(size, bytes(m));
        Ok(true)
    }

    /// Reports of this script the rate limit refused that no stored ring counts yet.
    pub fn runs_dropped_pending(&self, uuid: &str) -> u64 {
        self.channel_limits.borrow().pending_dropped(uuid)
    }

    /// The rings of these scripts (missing or damaged ones read as empty).
    pub async fn run_rings(&self, uuids: &[String]) -> Result<Vec<Ring>, EnvError> {
        if uuids.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = uuids.iter().map(|u| runs::runs_key(u)).collect();
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let got = self.env.get(Area::Local, &refs).await?;
        let private = self.env.get(Area::Session, &refs).await?;
        Ok(keys
            .iter()
            .map(|k| Ring::decode(got.get(k)).merged(Ring::decode(private.get(k))))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::memory::MemoryEnv;
    use crate::scripts::{store, sync};
    use futures::executor::block_on;
    use serde_json::json;

    fn setup() -> (Provider<MemoryEnv>, String, ChannelKey) {
        let p = Provider::new(MemoryEnv::new());
        let src =
            "// ==UserScript==\n// @name A\n// @match https://example.com/*\n// ==/UserScript==\n";
        let snap = block_on(store::load_snapshot(&p.env)).unwrap();
        let c = block_on(store::create(&p.env, &snap, "user", src, true, 1 << 20)).unwrap();
        let uuid = c.record.uuid.clone();
        // Registering makes the key and puts the token in the registered code.
        block_on(p.sync_registration(&uuid, sync::desired_for(&c.record, &c.source), None));
        let key = block_on(key_store::load(&p.env)).unwrap();
        (p, uuid, key)
    }

    fn report(token: &str) -> String {
        json!({"lumo": token, "v": 1, "kind": "run", "runAt": "document_idle", "ms": 3,
               "error": {"name": "TypeError", "message": "x", "line": 5, "column": 2}})
        .to_string()
    }

    fn page() -> Sender {
        Sender {
            url: Some("https://example.com/a".into()),
            frame_id: Some(0),
            tab_id: Some(9),
            document_id: Some("DOC1".into()),
            ..Sender::default()
        }
    }

    /// Scripts registered beside `setup`'s, named `S0`…
    fn more_scripts(p: &Provider<MemoryEnv>, n: usize) -> Vec<String> {
        (0..n)
            .map(|i| super::super::gm_test_support::script(p, &format!("S{i}"), ""))
            .collect()
    }

    /// A run of `uuid` in document `doc` with `lines` console lines of 500 `ch`.
    fn run_of(
        p: &Provider<MemoryEnv>,
        key: &ChannelKey,
        uuid: &str,
        doc: &str,
        ch: &str,
        lines: usize,
    ) -> Received {
        p.env.advance(1000.0);
        let line = json!({"level": "log", "text": ch.repeat(500)});
        let msg =
            json!({"lumo": key.token(uuid, 1), "v": 1, "kind": "run", "runAt": "document_idle",
                         "ms": 3, "console": vec![line; lines]})
            .to_string();
        let from = Sender {
            document_id: Some(doc.into()),
            ..page()
        };
        block_on(p.user_script_message(|| Some(msg), from))
    }

    fn in_use(p: &Provider<MemoryEnv>) -> usize {
        use crate::env::Storage;
        block_on(p.env.bytes_in_use(Area::Local, None)).unwrap()
    }

    /// Fills `chrome.storage.local` to `past` bytes past the agents' share.
    fn fill_past_share(p: &Provider<MemoryEnv>, past: usize) {
        use crate::env::Storage;
        let limit = crate::scripts::quota::AGENT_LIMIT_BYTES;
        let mut m = Map::new();
        m.insert(
            "filler".into(),
            "f".repeat(limit + past - in_use(p) - "filler".len() - 2)
                .into(),
        );
        block_on(p.env.set(Area::Local, m)).unwrap();
        assert_eq!(in_use(p), limit + past);
    }

    fn docs(p: &Provider<MemoryEnv>, uuid: &str) -> Vec<String> {
        let ring = &block_on(p.run_rings(&[uuid.to_owned()])).unwrap()[0];
        ring.runs
            .iter()
            .filter_map(|r| r["documentId"].as_str().map(str::to_owned))
            .collect()
    }

    /// Run reports never grow the storage past the agents' share: a new one takes the place of
    /// its own script's older ones; one whose script has none is not kept, says so, and costs
    /// no other script a run.
    #[test]
    fn at_the_agents_share_a_run_takes_the_place_of_its_scripts_older_ones() {
        let (p, uuid, key) = setup();
        let b = more_scripts(&p, 1).remove(0);
        for doc in ["D1", "D2", "D3"] {
            assert!(matches!(
                run_of(&p, &key, &uuid, doc, "a", 2),
                Received::Stored { .. }
            ));
        }
        fill_past_share(&p, 10);
        let before = in_use(&p);
        assert!(matches!(
            run_of(&p, &key, &uuid, "D4", "a", 2),
            Received::Stored { .. }
        ));
        assert!(in_use(&p) <= before, "{before} → {}", in_use(&p));
        assert_eq!(docs(&p, &uuid), ["D2", "D3", "D4"]);
        // A bigger run takes two places.
        assert!(matches!(
            run_of(&p, &key, &uuid, "D5", "a", 4),
            Received::Stored { .. }
        ));
        assert_eq!(docs(&p, &uuid), ["D4", "D5"]);
        // B has no run to give up: its first is not kept, and A keeps all of its own.
        let got = run_of(&p, &key, &b, "B1", "a", 1);
        let Received::Failed(why) = got else {
            panic!("{got:?}")
        };
        assert!(
            why.contains("nearly full") && why.contains("older runs cannot make room"),
            "{why}"
        );
        assert!(docs(&p, &b).is_empty());
        assert_eq!(docs(&p, &uuid), ["D4", "D5"]);
        assert!(in_use(&p) <= before, "{before} → {}", in_use(&p));
    }

    /// R12: Chrome counts a `<` as `\u003C`, six bytes: runs of `<` console lines taking the
    /// place of runs of `a` grew the storage past the share, to past the quota, when the rings
    /// were weighed as `serde_json` writes them.
    #[test]
    fn runs_of_escaped_characters_are_weighed_as_chrome_counts_them() {
        let (p, _, key) = setup();
        let uuids = more_scripts(&p, 8);
        for i in 0..4 {
            for u in &uuids {
                let _ = run_of(&p, &key, u, &format!("A{i}"), "a", 16);
            }
        }
        fill_past_share(&p, 0);
        for i in 0..4 {
            for u in &uuids {
                let _ = run_of(&p, &key, u, &format!("L{i}"), "<", 16);
            }
        }
        let limit = crate::scripts::quota::AGENT_LIMIT_BYTES;
        assert!(in_use(&p) <= limit, "{} past the share", in_use(&p) - limit);
        // The newest `<` run of each script took its place.
        for u in &uuids {
            assert_eq!(docs(&p, u).last().map(String::as_str), Some("L3"), "{u}");
        }
    }

    /// R12: at the share a late error that would grow a ring is not stored, and not said to
    /// be; the run it belongs to stays.
    #[test]
    fn at_the_agents_share_a_late_error_is_not_stored_and_takes_no_run() {
        let (p, uuid, key) = setup();
        for doc in ["D0", "D1", "D2"] {
            assert!(matches!(
                run_of(&p, &key, &uuid, doc, "a", 1),
                Received::Stored { .. }
            ));
        }
        fill_past_share(&p, 0);
        let late = json!({"lumo": key.token(&uuid, 1), "v": 1, "kind": "late", "rejection": false,
                          "error": {"name": "Error", "message": "late one", "line": 3, "column": 1}})
        .to_string();
        let from = Sender {
            document_id: Some("D0".into()),
            ..page()
        };
        let got = block_on(p.user_script_message(|| Some(late), from));
        assert_eq!(got, Received::NotLive);
        assert_eq!(docs(&p, &uuid), ["D0", "D1", "D2"]);
        assert_eq!(in_use(&p), crate::scripts::quota::AGENT_LIMIT_BYTES);
    }

    /// R12: what a purge left in `runs/budget` (entries of rings no longer stored) does not let
    /// the rings grow past the share.
    #[test]
    fn stale_budget_entries_do_not_let_the_rings_grow_past_the_share() {
        use crate::env::Storage;
        let (p, _, key) = setup();
        let uuids = more_scripts(&p, 8);
        let stale: Map<String, Value> = (1..10)
            .map(|i| {
                (
                    format!("0e0e0e0e-0000-4000-8000-00000000000{i}"),
                    json!(60_000),
                )
            })
            .collect();
        let mut m = Map::new();
        m.insert(BUDGET_KEY.into(), Value::Object(stale));
        block_on(p.env.set(Area::Local, m)).unwrap();
        fill_past_share(&p, 0);
        for i in 0..6 {
            for u in &uuids {
                let _ = run_of(&p, &key, u, &format!("D{i}"), "é", 16);
            }
        }
        let limit = crate::scripts::quota::AGENT_LIMIT_BYTES;
        assert!(in_use(&p) <= limit, "{} past the share", in_use(&p) - limit);
    }

    #[test]
    fn a_registered_script_holds_its_token_and_its_world_has_messaging() {
        let (p, uuid, key) = setup();
        let regs = p.env.registrations.borrow();
        let code = regs[&uuid].js[0].code.clone().unwrap();
        assert!(code.contains(&key.token(&uuid, 1)));
        assert_eq!(p.env.worlds.borrow().get(&uuid), Some(&true));
    }

    #[test]
    fn a_proven_report_is_stored_with_chromes_url_and_survives_a_restart() {
        let (p, uuid, key) = setup();
        let got = block_on(p.user_script_message(|| Some(report(&key.token(&uuid, 1))), page()));
        let Received::Stored { id, .. } = got else {
            panic!("{got:?}")
        };
        // A new provider on the same storage (a worker restart) reads the same ring.
        let q = Provider::new(MemoryEnv::new());
        *q.env.areas.borrow_mut() = p.env.areas.borrow().clone();
        let rings = block_on(q.run_rings(std::slice::from_ref(&uuid))).unwrap();
        let run = &rings[0].runs[0];
        assert_eq!(run["id"], id);
        assert_eq!(run["url"], "https://example.com/a");
        assert_eq!(run["error"]["line"], 5);
        assert_eq!(run["tabId"], 9);
        // The next run's cursor is after this one.
        let again = block_on(q.user_script_message(|| Some(report(&key.token(&uuid, 1))), page()));
        assert!(matches!(again, Received::Stored { id: next, .. } if next > id));
    }

    #[test]
    fn forged_unknown_and_future_senders_store_nothing() {
        let (p, uuid, key) = setup();
        let other = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
        let forged = key.token(&uuid, 1).replacen(&uuid, other, 1);
        assert_eq!(
            block_on(p.user_script_message(|| Some(report(&forged)), page())),
            Received::Dropped(Dropped::UnknownSender)
        );
        // A real token of a script that does not exist (or a revision it never had).
        assert_eq!(
            block_on(p.user_script_message(|| Some(report(&key.token(other, 1))), page())),
            Received::NotLive
        );
        assert_eq!(
            block_on(p.user_script_message(|| Some(report(&key.token(&uuid, 2))), page())),
            Received::NotLive
        );
        assert!(!p.env.dump(Area::Local).contains_key(&runs::runs_key(&uuid)));
        assert!(!p.env.dump(Area::Session).contains_key(IN_TABS_KEY));
    }

    /// Each run's place (tab, document, frame) is kept in `storage.session` for the popup, so it
    /// finds a script that ran in a page whose address no longer reaches it; a frame's run and
    /// an incognito one's too (the ring of the latter in the same area, in one `set`).
    #[test]
    fn a_runs_place_is_kept_by_tab_in_the_session_area() {
        let (p, uuid, key) = setup();
        let frame = Sender {
            frame_id: Some(4),
            tab_id: Some(9),
            document_id: Some("DOC2".into()),
            incognito: true,
            ..page()
        };
        for s in [page(), frame] {
            let got = block_on(p.user_script_message(|| Some(report(&key.token(&uuid, 1))), s));
            assert!(matches!(got, Received::Stored { .. }), "{got:?}");
        }
        let ix = InTabs::decode(p.env.dump(Area::Session).get(IN_TABS_KEY));
        let places: Vec<(i64, &str, &str, i64)> = ix
            .of_tab(9)
            .map(|p| (p.tab, p.uuid.as_str(), p.document.as_str(), p.frame))
            .collect();
        assert_eq!(
            places,
            [(9, uuid.as_str(), "DOC2", 4), (9, uuid.as_str(), "DOC1", 0)]
        );
        assert!(!p.env.dump(Area::Local).contains_key(IN_TABS_KEY));
    }

    #[test]
    fn a_late_error_joins_the_run_of_its_document_only() {
        let (p, uuid, key) = setup();
        // A late error with no run looks again after a wait: let the env's timers fire.
        p.env.timers_fire.set(true);
        let token = key.token(&uuid, 1);
        let ok = json!({"lumo": token, "v": 1, "kind": "run", "runAt": "document_idle", "ms": 1})
            .to_string();
        let late = json!({"lumo": token, "v": 1, "kind": "late", "rejection": false,
            "error": {"name": "TypeError", "message": "in a click", "line": 7, "column": 3}})
        .to_string();
        let Received::Stored { id: run_id, .. } =
            block_on(p.user_script_message(|| Some(ok.clone()), page()))
        else {
            panic!("run not stored")
        };
        // Another document of the same script, and a message with no document, join nothing.
        let mut other = page();
        other.document_id = Some("DOC2".into());
        assert_eq!(
            block_on(p.user_script_message(|| Some(late.clone()), other)),
            Received::NotLive
        );
        let mut none = page();
        none.document_id = None;
        assert_eq!(
            block_on(p.user_script_message(|| Some(late.clone()), none)),
            Received::NotLive
        );
        p.env.advance(5.0);
        let got =
            block_on(p.user_script_message_hinted(Some(token.clone()), || Some(late), page()));
        let Received::Stored { id: changed, .. } = got else {
            panic!("{got:?}")
        };
        assert!(changed > run_id);
        let rings = block_on(p.run_rings(std::slice::from_ref(&uuid))).unwrap();
        let run = &rings[0].runs[0];
        assert_eq!(run["id"], run_id);
        assert_eq!(run["ok"], false);
        assert_eq!(run["lateErrors"][0]["message"], "in a click");
        assert_eq!(run["lateErrors"][0]["line"], 7);
        let budget = Budget::decode(p.env.dump(Area::Local).get(BUDGET_KEY));
        assert_eq!(budget.bytes[&uuid], rings[0].bytes());
    }

    /// W: a rejection the script handled a moment later (`rejectionhandled`) stayed a late error,
    /// and the run read failed. Taken back by its number, the run is ok again; an error thrown
    /// (not a rejection) and another document's number take nothing back.
    #[test]
    fn a_rejection_handled_later_is_taken_back_from_its_run() {
        let (p, uuid, key) = setup();
        p.env.timers_fire.set(true);
        let token = key.token(&uuid, 1);
        let send = |m: Value, sender: Sender| {
            let raw = m.to_string();
            block_on(p.user_script_message(|| Some(raw), sender))
        };
        let run = json!({"lumo": token, "v": 1, "kind": "run", "runAt": "document_idle", "ms": 1});
        assert!(matches!(send(run, page()), Received::Stored { .. }));
        let late = |n: u64, rejection: bool| {
            json!({"lumo": token, "v": 1, "kind": "late", "rejection": rejection, "n": n,
            "error": {"name": "Error", "message": format!("late {n}"), "line": 2, "column": 1}})
        };
        let handled = |n: u64| json!({"lumo": token, "v": 1, "kind": "handled", "n": n});
        let read =
            || block_on(p.run_rings(std::slice::from_ref(&uuid))).unwrap()[0].runs[0].clone();
        for (n, rejection) in [(1, true), (2, false), (3, true)] {
            assert!(matches!(
                send(late(n, rejection), page()),
                Received::Stored { .. }
            ));
        }
        assert_eq!(read()["lateErrors"].as_array().unwrap().len(), 3);
        // Another document's number 1, and the thrown error's 2, take nothing back.
        let mut other = page();
        other.document_id = Some("DOC2".into());
        assert_eq!(send(handled(1), other), Received::NotLive);
        assert_eq!(send(handled(2), page()), Received::NotLive);
        assert!(matches!(send(handled(1), page()), Received::Stored { .. }));
        assert!(matches!(send(handled(3), page()), Received::Stored { .. }));
        let r = read();
        let left: Vec<&str> = r["lateErrors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["message"].as_str().unwrap())
            .collect();
        assert_eq!(left, ["late 2"]);
        assert_eq!(r["ok"], false, "the thrown error stays");
        // Readers never see the number.
        let (selected, _) = runs::select(
            &block_on(p.run_rings(std::slice::from_ref(&uuid))).unwrap(),
            None,
            false,
            10,
        );
        assert_eq!(selected[0]["lateErrors"][0].get("n"), None);

        // A run whose only late error is taken back is ok again.
        let mut fresh = page();
        fresh.document_id = Some("DOC3".into());
        let run = json!({"lumo": token, "v": 1, "kind": "run", "runAt": "document_idle", "ms": 1});
        assert!(matches!(send(run, fresh.clone()), Received::Stored { .. }));
        assert!(matches!(
            send(late(1, true), fresh.clone()),
            Received::Stored { .. }
        ));
        assert!(matches!(send(handled(1), fresh), Received::Stored { .. }));
        let rings = block_on(p.run_rings(std::slice::from_ref(&uuid))).unwrap();
        let r = rings[0]
            .runs
            .iter()
            .find(|r| r["documentId"] == "DOC3")
            .unwrap();
        assert_eq!((r["ok"].clone(), r.get("lateErrors")), (json!(true), None));
    }

    /// Each message's place in the backlog is given back once it is handled, whatever became
    /// of it; a script refused for its backlog or its rate is told why, anything else learns
    /// nothing.
    #[test]
    fn a_handled_message_leaves_the_backlog_and_a_backlog_refusal_says_why() {
        let (p, uuid, key) = setup();
        let token = key.token(&uuid, 1);
        for t in [token.clone(), key.token(&uuid, 9)] {
            block_on(p.user_script_message(|| Some(report(&t)), page()));
        }
        assert_eq!(p.channel_limits.borrow().backlog.total(), 0);
        let full = channel::backlog::Full::Script;
        let said = Received::Dropped(Dropped::Backlogged(full))
            .answer()
            .unwrap();
        assert_eq!(said["error"], full.message());
        // Over its own rate, the script is told so (a refused GM change must not read as a
        // provider that never answered, R15).
        let said = Received::Dropped(Dropped::RateLimited).answer().unwrap();
        assert_eq!(
            (&said["error"], &said["rate"]),
            (&json!(RATE_LIMITED), &json!(true))
        );
        assert_eq!(Received::NotLive.answer(), None);
    }

    /// A run on a page in an incognito window leaves nothing on disk: its ring (and a late
    /// error joining it) is in session storage, without the page's address, and readers still
    /// see it, in cursor order with the runs of regular pages.
    #[test]
    fn an_incognito_run_is_kept_in_memory_only_and_without_its_address() {
        let (p, uuid, key) = setup();
        p.env.timers_fire.set(true);
        let token = key.token(&uuid, 1);
        let local_before = serde_json::to_string(&p.env.dump(Area::Local)).unwrap();
        let private = Sender {
            url: Some("https://example.com/secret-path?q=1".into()),
            incognito: true,
            ..page()
        };
        let got = block_on(p.user_script_message(|| Some(report(&token)), private.clone()));
        let Received::Stored { id: first, .. } = got else {
            panic!("{got:?}")
        };
        let late = json!({"lumo": token, "v": 1, "kind": "late", "rejection": false,
            "error": {"name": "Error", "message": "later", "line": 7, "column": 3}})
        .to_string();
        p.env.advance(5.0);
        assert!(matches!(
            block_on(p.user_script_message(|| Some(late), private)),
            Received::Stored { .. }
        ));
        // Nothing of it reached local storage.
        assert_eq!(
            serde_json::to_string(&p.env.dump(Area::Local)).unwrap(),
            local_before
        );
        let session = serde_json::to_string(&p.env.dump(Area::Session)).unwrap();
        assert!(session.contains(&runs::runs_key(&uuid)));
        assert!(!session.contains("secret-path") && !session.contains("example.com"));
        // A regular page's run after it is on disk, with a later cursor.
        p.env.advance(5.0);
        let Received::Stored { id: second, .. } =
            block_on(p.user_script_message(|| Some(report(&token)), page()))
        else {
            panic!("regular run not stored")
        };
        assert!(second > first);
        let rings = block_on(p.run_rings(std::slice::from_ref(&uuid))).unwrap();
        let got: Vec<(u64, &str)> = rings[0]
            .runs
            .iter()
            .map(|r| (r["id"].as_u64().unwrap(), r["url"].as_str().unwrap()))
            .collect();
        assert_eq!(
            got,
            [
                (first, runs::INCOGNITO_URL),
                (second, "https://example.com/a")
            ]
        );
        assert_eq!(rings[0].runs[0]["incognito"], true);
        assert_eq!(rings[0].runs[0]["lateErrors"][0]["message"], "later");
        assert_eq!(rings[0].runs[1].get("incognito"), None);
    }

    #[test]
    fn a_flood_is_bounded_and_counted() {
        let (p, uuid, key) = setup();
        let r = report(&key.token(&uuid, 1));
        for _ in 0..200 {
            block_on(p.user_script_message(|| Some(r.clone()), page()));
        }
        let rings = block_on(p.run_rings(std::slice::from_ref(&uuid))).unwrap();
        assert_eq!(
            rings[0].runs.len(),
            usize::try_from(channel::rate::PER_SCRIPT).unwrap()
        );
        // The next accepted run (next window) carries the count of the refused ones.
        p.env.advance(channel::rate::WINDOW_MS);
        block_on(p.user_script_message(|| Some(r.clone()), page()));
        let rings = block_on(p.run_rings(std::slice::from_ref(&uuid))).unwrap();
        assert_eq!(rings[0].dropped, 170);
    }
}
