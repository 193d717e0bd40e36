//! A script's `GM_xmlhttpRequest`s in flight, so `abort()` cancels the worker's fetch (not only
//! the page's wait), a script has at most [`MAX_XHR_IN_FLIGHT`] at once, and all scripts together
//! at most [`MAX_XHR_IN_FLIGHT_ALL`]; and the bytes of their answers, which a count alone does not
//! bound (see Bytes below).
//!
//! Past those bounds a request waits its turn, as a browser queues a page's requests past its
//! connections: scripts that check 50 links or download a gallery fire them all at once, and
//! refusing the 17th broke them. A waiting request is a flight too (so `abort()` and a progress
//! watch reach it) that holds no place and no bytes; when a place frees, the oldest waiting
//! request whose script has room starts ([`Flights::start`]'s `go`). Waiting is bounded by count
//! ([`MAX_XHR_WAITING`], [`MAX_XHR_WAITING_ALL`]) and, like every unanswered GM message, by the
//! channel's backlog of message bytes (`channel::backlog`); its time counts in its `timeout`.
//!
//! Who is who: a request is named by the uuid its script's token proved, the tab, frame and
//! document Chrome reported for the sender, and the page's own number for it. An abort names
//! the same five, so it reaches that script's request in that page and never another's (two
//! scripts, or two frames, both counting from 1 do not collide).
//!
//! Bytes: an answer's body is counted as it arrives ([`Flights::hold`], asked by the shell
//! before it keeps each chunk), against [`ANSWER_BYTES_PER_SCRIPT`] for the script's answers
//! being received at once and [`ANSWER_BYTES_ALL`] for all scripts'; a chunk that would pass
//! either is refused, the shell stops reading (the request is aborted) and the script is told
//! why ([`OverBudget`]). The bytes are given back when the request leaves the flights: its
//! answer made (the provider ends it only once the answer is built), aborted, or dropped.
//! Counted as they arrive, not reserved at 5 MiB a request, so many small answers at once are
//! never refused; an answer that says its length is counted whole before it is read, and
//! waits for room rather than being stopped ([`Flights::hold`]). Measured before the budget
//! (Chromium 156): one script's 16 requests of a 5 MiB answer at once grew the worker's wasm
//! memory from 1.4 to 53 MB for its life.
//!
//! Progress: the shell reports bytes received ([`Flights::progress`]); a page that has an
//! `onprogress` holds a watch ([`Flights::watch`]) answered at the next report, so the events
//! reach it while the download runs (one per report it was waiting for: reports that come
//! while no watch is held are merged into the next answer).

use crate::vec_map::VecMap;

use futures::channel::oneshot;

pub use super::message::MAX_XHR_IN_FLIGHT;

/// Most requests in flight for all scripts together (see the module's comment); their answers'
/// bytes are bounded by [`ANSWER_BYTES_ALL`].
pub const MAX_XHR_IN_FLIGHT_ALL: usize = 64;

/// Most requests of one script waiting for a place (beyond those in flight): as many as its GM
/// window (`channel::rate`, 600 a minute) lets it send, so a script within its window is never
/// refused for waiting.
pub const MAX_XHR_WAITING: usize = 600;
/// Most requests of all scripts waiting together.
pub const MAX_XHR_WAITING_ALL: usize = 2000;

/// Bytes of answers one script may have arriving in the worker at once: two answers of the
/// largest size ([`super::xhr::MAX_RESPONSE_BYTES`]), or many small ones.
pub const ANSWER_BYTES_PER_SCRIPT: u64 = 10 * 1024 * 1024;
/// Bytes of answers all scripts together may have arriving in the worker at once.
pub const ANSWER_BYTES_ALL: u64 = 32 * 1024 * 1024;

/// Why an answer's next bytes are refused: the request is stopped, and the script told this.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverBudget {
    /// The script's own answers would pass [`ANSWER_BYTES_PER_SCRIPT`]; `at`: the bytes this
    /// answer had received.
    Script { at: u64 },
    /// All scripts' answers would pass [`ANSWER_BYTES_ALL`].
    All { at: u64 },
    /// The request is no longer in flight (aborted meanwhile): nothing more is read.
    NotInFlight,
}

impl std::fmt::Display for OverBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OverBudget::Script { at } => write!(
                f,
                "GM_xmlhttpRequest: the answer was stopped after {at} bytes: this script's \
                 answers being received may hold at most {} MiB in the provider at once (each \
                 at most {} MiB); make fewer large requests at the same time",
                ANSWER_BYTES_PER_SCRIPT >> 20,
                super::xhr::MAX_RESPONSE_BYTES >> 20
            ),
            OverBudget::All { at } => write!(
                f,
                "GM_xmlhttpRequest: the answer was stopped after {at} bytes: the userscripts' \
                 answers being received may hold at most {} MiB in the provider at once; try \
                 again shortly",
                ANSWER_BYTES_ALL >> 20
            ),
            OverBudget::NotInFlight => {
                write!(f, "GM_xmlhttpRequest: the request is no longer in flight")
            }
        }
    }
}

/// One request's name (see the module's comment).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct FlightKey {
    pub uuid: String,
    pub tab: Option<i64>,
    pub frame: Option<i64>,
    pub document: Option<String>,
    pub id: u32,
}

/// Why a request is not started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The page reused a number still in flight.
    Duplicate(u32),
    /// The script has [`MAX_XHR_IN_FLIGHT`] in flight and [`MAX_XHR_WAITING`] waiting.
    TooMany,
    /// All scripts together have [`MAX_XHR_WAITING_ALL`] waiting.
    TooManyAll,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Duplicate(id) => write!(
                f,
                "GM_xmlhttpRequest: request number {id} of this page is already in flight"
            ),
            Refused::TooMany => write!(
                f,
                "GM_xmlhttpRequest: this script already has {MAX_XHR_IN_FLIGHT} requests in \
                 flight and {MAX_XHR_WAITING} waiting for their turn; the request was not sent"
            ),
            Refused::TooManyAll => write!(
                f,
                "GM_xmlhttpRequest: the userscripts have {MAX_XHR_WAITING_ALL} requests waiting \
                 for their turn together; the request was not sent (try again when some have \
                 ended)"
            ),
        }
    }
}

/// Most watches held per request (a page holds one at a time; more is a misbehaving page).
pub const MAX_WATCHERS: usize = 4;

/// What a progress watch is answered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Bytes of the body received so far, the `Content-Length` if the server sent one, and the
    /// report's number (the page's next watch names it).
    At {
        loaded: u64,
        total: Option<u64>,
        seq: u64,
    },
    /// No such request in flight (ended, aborted, or not started yet).
    NotInFlight,
}

#[derive(Debug)]
struct Flight {
    abort: oneshot::Sender<()>,
    loaded: u64,
    total: Option<u64>,
    seq: u64,
    watchers: Vec<oneshot::Sender<Progress>>,
    /// Bytes of its answer counted against the budgets ([`Flights::hold`]).
    held: u64,
    /// The answer's status and headers once they came ([`Flights::head`]), and the report
    /// that brought them.
    head: Option<serde_json::Value>,
    head_seq: u64,
    /// While it waits for a place: the sender that starts it, and its turn (arrival order).
    waiting: Option<(oneshot::Sender<()>, u64)>,
    /// Its answer's whole length is counted in `held` (it said its length: [`Flights::hold`]).
    reserved: bool,
    /// While its answer waits for room in the budgets: told when bytes are given back.
    room: Option<oneshot::Sender<()>>,
}

/// What [`Flights::hold`] says of an answer's bytes.
#[derive(Debug)]
pub enum Hold {
    Keep,
    /// Read nothing until this completes, then ask again (an error: the request ended).
    Wait(oneshot::Receiver<()>),
    Stop(OverBudget),
}

/// Largest head ([`Flights::head`]) a flight keeps, in bytes of its JSON text: a page's
/// `readyState` 2 comes early only for an answer whose headers are no larger (else with the
/// answer), so 64 flights hold at most 1 MiB of heads.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;

/// What [`Flights::watch`] gives: an answer now, or one to wait for.
#[derive(Debug)]
pub enum Watch {
    Now(Progress),
    Later(oneshot::Receiver<Progress>),
}

/// The requests in flight or waiting, each with the sender that cancels it.
#[derive(Debug, Default)]
pub struct Flights {
    map: VecMap<FlightKey, Flight>,
    /// The sum of every flight's `held`.
    held_all: u64,
    /// The next waiting request's turn.
    turns: u64,
    /// The most `held_all` has been (for tests).
    #[cfg(test)]
    pub peak: u64,
}

/// A request [`Flights::start`] took.
#[derive(Debug)]
pub struct Started {
    /// Completes when the request is aborted.
    pub aborted: oneshot::Receiver<()>,
    /// `Some` while it waits for a place: completes when it may be sent.
    pub go: Option<oneshot::Receiver<()>>,
}

impl Flights {
    /// Records a request: in flight now if its script and all scripts have a place, else
    /// waiting for one (`go`).
    pub fn start(&mut self, key: FlightKey) -> Result<Started, Refused> {
        // Requests whose waiter went away (its future dropped) hold no place, nor bytes.
        let before = self.map.len();
        self.map.retain(|_, f| !f.abort.is_canceled());
        self.held_all = self
            .map
            .values()
            .map(|f| f.held)
            .fold(0, u64::saturating_add);
        if self.map.len() < before {
            self.wake_room();
            self.promote();
        }
        if self.map.contains_key(&key) {
            return Err(Refused::Duplicate(key.id));
        }
        let (mut script, mut all) = ((0, 0), (0, 0));
        for (k, f) in self.map.iter() {
            let slot = if f.waiting.is_some() {
                &mut all.1
            } else {
                &mut all.0
            };
            *slot += 1;
            if k.uuid == key.uuid {
                let slot = if f.waiting.is_some() {
                    &mut script.1
                } else {
                    &mut script.0
                };
                *slot += 1;
            }
        }
        // Waiting requests go first: a new one never overtakes its script's own.
        let now = script.1 == 0 && script.0 < MAX_XHR_IN_FLIGHT && all.0 < MAX_XHR_IN_FLIGHT_ALL;
        let (go, waiting) = if now {
            (None, None)
        } else if script.1 >= MAX_XHR_WAITING {
            return Err(Refused::TooMany);
        } else if all.1 >= MAX_XHR_WAITING_ALL {
            return Err(Refused::TooManyAll);
        } else {
            let (tx, rx) = oneshot::channel();
            self.turns = self.turns.wrapping_add(1);
            (Some(rx), Some((tx, self.turns)))
        };
        let (tx, rx) = oneshot::channel();
        self.map.insert(
            key,
            Flight {
                abort: tx,
                loaded: 0,
                total: None,
                seq: 0,
                watchers: Vec::new(),
                held: 0,
                head: None,
                head_seq: 0,
                waiting,
                reserved: false,
                room: None,
            },
        );
        Ok(Started { aborted: rx, go })
    }

    /// Starts the waiting requests that now have a place, oldest first; one whose script has
    /// no place yet lets a younger one of another script go.
    fn promote(&mut self) {
        // Every answer ends here: nothing to count when no one waits.
        if !self.map.values().any(|f| f.waiting.is_some()) {
            return;
        }
        let mut running: VecMap<String, usize> = VecMap::new();
        let mut all = 0;
        let mut queue = Vec::new();
        for (k, f) in self.map.iter() {
            match &f.waiting {
                Some((_, turn)) => queue.push((*turn, k.clone())),
                None => {
                    all += 1;
                    if let Some(n) = running.get_or_insert_with(k.uuid.clone(), || 0) {
                        *n += 1;
                    }
                }
            }
        }
        crate::sort::sort_by(&mut queue, |a, b| a.0.cmp(&b.0));
        for (_, key) in queue {
            if all >= MAX_XHR_IN_FLIGHT_ALL {
                return;
            }
            let Some(n) = running.get_or_insert_with(key.uuid.clone(), || 0) else {
                continue;
            };
            if *n >= MAX_XHR_IN_FLIGHT {
                continue;
            }
            let sent = self
                .map
                .get_mut(&key)
                .and_then(|f| f.waiting.take())
                .is_some_and(|(go, _)| go.send(()).is_ok());
            if sent {
                *n += 1;
                all += 1;
            } else {
                // Its waiter went away: it holds nothing.
                self.map.remove(&key);
            }
        }
    }

    /// Cancels the request so named, in flight or waiting; whether there was one. Its bytes
    /// and place are given back.
    pub fn abort(&mut self, key: &FlightKey) -> bool {
        let Some(f) = self.map.remove(key) else {
            return false;
        };
        let told = self.end(f).abort.send(()).is_ok();
        self.promote();
        told
    }

    /// The request ended (its answer made, or given up); its bytes and place are given back.
    pub fn finish(&mut self, key: &FlightKey) {
        if let Some(f) = self.map.remove(key) {
            self.end(f);
            self.promote();
        }
    }

    /// Whether the request's answer may hold `loaded` bytes (all its body so far, asked before
    /// the shell keeps a chunk): counted if so; refused, and nothing counted, if that passes
    /// the script's budget or all scripts' (or the request is not in flight). A smaller
    /// `loaded` (a redirect's next hop starts again) gives the difference back.
    ///
    /// An answer that says its length (`total`) is counted whole at its first ask, which the
    /// shell makes before reading any of it: it fits, and is then never stopped, or it waits
    /// ([`Hold::Wait`]), holding nothing, until bytes are given back. So a batch of downloads
    /// whose sizes are known takes turns instead of being stopped past the budget; only an
    /// answer of unknown length can be, or one longer than it said.
    pub fn hold(&mut self, key: &FlightKey, loaded: u64, total: Option<u64>) -> Hold {
        // One still waiting for a place was not sent: it has no answer to count.
        let Some(f) = self.map.get(key).filter(|f| f.waiting.is_none()) else {
            return Hold::Stop(OverBudget::NotInFlight);
        };
        let had = f.held;
        let reserve = !f.reserved && had == 0 && total.is_some();
        let want = match total {
            Some(t) if reserve => t.max(loaded),
            _ if f.reserved => had.max(loaded),
            _ => loaded,
        };
        if want > had {
            let more = want.saturating_sub(had);
            let script: u64 = self
                .map
                .iter()
                .filter(|(k, _)| k.uuid == key.uuid)
                .map(|(_, f)| f.held)
                .fold(0, u64::saturating_add);
            let over = if script.saturating_add(more) > ANSWER_BYTES_PER_SCRIPT {
                Some(OverBudget::Script { at: had })
            } else if self.held_all.saturating_add(more) > ANSWER_BYTES_ALL {
                Some(OverBudget::All { at: had })
            } else {
                None
            };
            if let Some(over) = over {
                // Alone it would fit (the shell refuses a length over the largest answer
                // first): others hold the room, and give it back as they end.
                if reserve && want <= ANSWER_BYTES_PER_SCRIPT {
                    let (tx, rx) = oneshot::channel();
                    if let Some(f) = self.map.get_mut(key) {
                        f.room = Some(tx);
                    }
                    return Hold::Wait(rx);
                }
                return Hold::Stop(over);
            }
        }
        if let Some(f) = self.map.get_mut(key) {
            f.held = want;
            f.reserved |= reserve;
        }
        self.held_all = self.held_all.saturating_sub(had).saturating_add(want);
        #[cfg(test)]
        {
            self.peak = self.peak.max(self.held_all);
        }
        if want < had {
            self.wake_room();
        }
        Hold::Keep
    }

    /// Bytes were given back: every answer waiting for room asks again.
    fn wake_room(&mut self) {
        for f in self.map.values_mut() {
            if let Some(tx) = f.room.take() {
                let _ = tx.send(());
            }
        }
    }

    /// Bytes of answers counted for `uuid`'s requests, and for all.
    pub fn held(&self, uuid: &str) -> (u64, u64) {
        let script = self
            .map
            .iter()
            .filter(|(k, _)| k.uuid == uuid)
            .map(|(_, f)| f.held)
            .fold(0, u64::saturating_add);
        (script, self.held_all)
    }

    /// Its watchers hear that it is over; its bytes leave the sum.
    fn end(&mut self, mut f: Flight) -> Flight {
        self.held_all = self.held_all.saturating_sub(f.held);
        for w in f.watchers.drain(..) {
            let _ = w.send(Progress::NotInFlight);
        }
        if f.held > 0 {
            self.wake_room();
        }
        f
    }

    /// The shell received body bytes: `loaded` in all, of `total` if known.
    pub fn progress(&mut self, key: &FlightKey, loaded: u64, total: Option<u64>) {
        let Some(f) = self.map.get_mut(key) else {
            return;
        };
        f.loaded = loaded;
        f.total = total;
        f.seq = f.seq.saturating_add(1);
        let now = Progress::At {
            loaded,
            total,
            seq: f.seq,
        };
        for w in f.watchers.drain(..) {
            let _ = w.send(now);
        }
    }

    /// The answer's status and headers came, before its body: kept as the page reads them
    /// (`gm::xhr::head_json`) when no larger than [`MAX_HEAD_BYTES`], and reported, so a page's
    /// watch hears it (its `readyState` 2). Judged on the raw lengths first (its JSON is never
    /// shorter), so a head too big to keep is not formatted only to be dropped.
    pub fn head(&mut self, key: &FlightKey, r: &crate::env::HttpResponse) {
        let Some(f) = self.map.get_mut(key) else {
            return;
        };
        let raw = r.headers.iter().fold(
            r.final_url.len().saturating_add(r.status_text.len()),
            |n, (k, v)| n.saturating_add(k.len()).saturating_add(v.len()),
        );
        if raw > MAX_HEAD_BYTES {
            return;
        }
        let head = super::xhr::head_json(r);
        if head.to_string().len() > MAX_HEAD_BYTES {
            return;
        }
        f.head = Some(head);
        let (loaded, total) = (f.loaded, f.total);
        self.progress(key, loaded, total);
        if let Some(f) = self.map.get_mut(key) {
            f.head_seq = f.seq;
        }
    }

    /// The head, for a watch that has not seen the report that brought it.
    pub fn head_since(&self, key: &FlightKey, seen: u64) -> Option<serde_json::Value> {
        self.map
            .get(key)
            .filter(|f| f.head_seq > seen)
            .and_then(|f| f.head.clone())
    }

    /// A page's watch for the request's next report after `seen` (answered at once if one
    /// came since, or if there is no such request).
    pub fn watch(&mut self, key: &FlightKey, seen: u64) -> Watch {
        let Some(f) = self.map.get_mut(key) else {
            return Watch::Now(Progress::NotInFlight);
        };
        if f.seq > seen {
            return Watch::Now(Progress::At {
                loaded: f.loaded,
                total: f.total,
                seq: f.seq,
            });
        }
        f.watchers.retain(|w| !w.is_canceled());
        if f.watchers.len() >= MAX_WATCHERS {
            // The oldest is answered with where things are; the page asks again.
            let old = f.watchers.remove(0);
            let _ = old.send(Progress::At {
                loaded: f.loaded,
                total: f.total,
                seq: f.seq,
            });
        }
        let (tx, rx) = oneshot::channel();
        f.watchers.push(tx);
        Watch::Later(rx)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer of unknown length's bytes: kept or stopped, never waiting.
    fn counted(f: &mut Flights, key: &FlightKey, loaded: u64) -> Result<(), OverBudget> {
        match f.hold(key, loaded, None) {
            Hold::Keep => Ok(()),
            Hold::Stop(e) => Err(e),
            Hold::Wait(_) => panic!("an answer of unknown length waited"),
        }
    }

    #[derive(Debug, PartialEq)]
    enum Turn {
        Waiting,
        /// Told it may be sent (now counted as in flight: no longer waiting).
        Go,
        Other,
    }

    /// Where a request started waiting stands now.
    fn turn(s: &mut Started) -> Turn {
        match s.go.as_mut().map(oneshot::Receiver::try_recv) {
            Some(Ok(None)) => Turn::Waiting,
            Some(Ok(Some(()))) => {
                s.go = None;
                Turn::Go
            }
            _ => Turn::Other,
        }
    }

    fn k(uuid: &str, frame: i64, id: u32) -> FlightKey {
        FlightKey {
            uuid: uuid.into(),
            tab: Some(1),
            frame: Some(frame),
            document: Some("D".into()),
            id,
        }
    }

    #[test]
    fn an_abort_reaches_only_its_own_request() {
        let mut f = Flights::default();
        let mut a = f.start(k("a", 0, 1)).unwrap();
        let mut b = f.start(k("b", 0, 1)).unwrap();
        let mut a_frame = f.start(k("a", 5, 1)).unwrap();
        // Another script's, another frame's, another document's number: nothing.
        let mut other_doc = k("a", 0, 1);
        other_doc.document = Some("E".into());
        assert!(!f.abort(&other_doc));
        assert!(!f.abort(&k("a", 0, 2)));
        assert!(f.abort(&k("a", 0, 1)));
        assert_eq!(a.aborted.try_recv(), Ok(Some(())));
        assert_eq!(b.aborted.try_recv(), Ok(None));
        assert_eq!(a_frame.aborted.try_recv(), Ok(None));
        // Once aborted it is gone.
        assert!(!f.abort(&k("a", 0, 1)));
        assert_eq!(f.len(), 2);
    }

    #[test]
    fn progress_reaches_a_held_watch_and_ending_releases_it() {
        let mut f = Flights::default();
        let _rx = f.start(k("a", 0, 1)).unwrap();
        // Another script's watch of the same number sees nothing of A's.
        assert!(matches!(
            f.watch(&k("b", 0, 1), 0),
            Watch::Now(Progress::NotInFlight)
        ));
        let Watch::Later(mut w) = f.watch(&k("a", 0, 1), 0) else {
            panic!()
        };
        assert_eq!(w.try_recv(), Ok(None));
        f.progress(&k("a", 0, 1), 10, Some(100));
        let first = Progress::At {
            loaded: 10,
            total: Some(100),
            seq: 1,
        };
        assert_eq!(w.try_recv(), Ok(Some(first)));
        // Reports while nobody watched are merged into the next answer.
        f.progress(&k("a", 0, 1), 20, Some(100));
        f.progress(&k("a", 0, 1), 30, Some(100));
        assert!(matches!(
            f.watch(&k("a", 0, 1), 1),
            Watch::Now(Progress::At {
                loaded: 30,
                seq: 3,
                ..
            })
        ));
        let Watch::Later(mut w) = f.watch(&k("a", 0, 1), 3) else {
            panic!()
        };
        f.finish(&k("a", 0, 1));
        assert_eq!(w.try_recv(), Ok(Some(Progress::NotInFlight)));
        // Watches of one request are bounded.
        let _rx = f.start(k("a", 0, 2)).unwrap();
        let ws: Vec<_> = (0..=MAX_WATCHERS)
            .map(|_| f.watch(&k("a", 0, 2), 0))
            .collect();
        let Watch::Later(mut oldest) = ws.into_iter().next().unwrap() else {
            panic!()
        };
        assert!(matches!(
            oldest.try_recv(),
            Ok(Some(Progress::At { seq: 0, .. }))
        ));
    }

    #[test]
    fn the_head_reaches_a_waiting_watch_once_and_a_large_one_is_not_kept() {
        let mut f = Flights::default();
        let _r = f.start(k("a", 0, 1)).unwrap();
        let Watch::Later(mut rx) = f.watch(&k("a", 0, 1), 0) else {
            panic!("nothing yet")
        };
        let answer = |header: &str| crate::env::HttpResponse {
            status: 200,
            status_text: "OK".into(),
            final_url: "http://a.test/x".into(),
            headers: vec![("a".into(), header.into())],
            body: Vec::new(),
            location: None,
        };
        let r = answer("b");
        f.head(&k("a", 0, 1), &r);
        let head = super::super::xhr::head_json(&r);
        assert_eq!(head["responseHeaders"], "a: b\r\n");
        let Ok(Some(Progress::At { loaded: 0, seq, .. })) = rx.try_recv() else {
            panic!("the watch was answered")
        };
        assert_eq!(f.head_since(&k("a", 0, 1), 0), Some(head));
        assert_eq!(f.head_since(&k("a", 0, 1), seq), None, "told once");
        assert_eq!(f.head_since(&k("b", 0, 1), 0), None, "another's");
        f.progress(&k("a", 0, 1), 10, Some(20));
        assert_eq!(f.head_since(&k("a", 0, 1), seq), None);
        // Over the bound: not kept, nothing reported (the page has it with the answer). Raw
        // lengths over it, or JSON over it (each control character is 6 in JSON).
        for (n, big) in [
            (3, "x".repeat(MAX_HEAD_BYTES)),
            (4, "\u{1}".repeat(MAX_HEAD_BYTES / 4)),
        ] {
            let _r2 = f.start(k("a", 0, n)).unwrap();
            f.head(&k("a", 0, n), &answer(&big));
            assert_eq!(f.head_since(&k("a", 0, n), 0), None);
            assert!(matches!(f.watch(&k("a", 0, n), 0), Watch::Later(_)));
        }
        // Under it: kept.
        let _r5 = f.start(k("a", 0, 5)).unwrap();
        f.head(&k("a", 0, 5), &answer(&"x".repeat(MAX_HEAD_BYTES / 2)));
        assert!(f.head_since(&k("a", 0, 5), 0).is_some());
    }

    /// Past its script's places a request waits, and starts, in its turn, when one frees: by
    /// an answer, an abort, or a waiter that went away. A number still in flight (or waiting)
    /// is refused, and so is waiting past its bound.
    #[test]
    fn past_its_places_a_request_waits_its_turn() {
        let mut f = Flights::default();
        let first = f.start(k("a", 0, 1)).unwrap();
        assert!(first.go.is_none(), "in flight at once");
        assert_eq!(f.start(k("a", 0, 1)).unwrap_err(), Refused::Duplicate(1));
        let mut keep = vec![first];
        for id in 2..=u32::try_from(MAX_XHR_IN_FLIGHT).unwrap() {
            let s = f.start(k("a", 0, id)).unwrap();
            assert!(s.go.is_none(), "request {id} in flight at once");
            keep.push(s);
        }
        let mut w1 = f.start(k("a", 0, 101)).unwrap();
        let mut w2 = f.start(k("a", 0, 102)).unwrap();
        let mut w3 = f.start(k("a", 0, 103)).unwrap();
        for w in [&mut w1, &mut w2, &mut w3] {
            assert_eq!(turn(w), Turn::Waiting);
        }
        assert_eq!(
            f.start(k("a", 0, 101)).unwrap_err(),
            Refused::Duplicate(101)
        );
        // Another script has places of its own.
        assert!(f.start(k("b", 0, 1)).unwrap().go.is_none());
        // An answer made frees a place: the oldest waiting goes, the others still wait.
        f.finish(&k("a", 0, 2));
        assert_eq!(turn(&mut w1), Turn::Go);
        assert_eq!(turn(&mut w2), Turn::Waiting);
        // A waiting one aborted is told, holds no turn, and frees nothing for the next.
        assert!(f.abort(&k("a", 0, 102)));
        assert_eq!(w2.aborted.try_recv(), Ok(Some(())));
        assert_eq!(turn(&mut w3), Turn::Waiting);
        // A request in flight whose waiter went away frees its place at the next start; the
        // new request waits behind the older one of its script, which goes first.
        drop(keep.pop());
        let mut w4 = f.start(k("a", 0, 104)).unwrap();
        assert_eq!(turn(&mut w3), Turn::Go);
        assert_eq!(turn(&mut w4), Turn::Waiting);
        // Waiting is bounded: past it, refused with the reason.
        let mut waiting = vec![w4];
        for id in 0..u32::try_from(MAX_XHR_WAITING - 1).unwrap() {
            waiting.push(f.start(k("a", 0, 1000 + id)).unwrap());
        }
        let over = f.start(k("a", 0, 9999)).unwrap_err();
        assert_eq!(over, Refused::TooMany);
        assert!(over.to_string().contains("600 waiting"), "{over}");
        assert!(over.to_string().contains("not sent"), "{over}");
        // A waiter gone away gives its turn up: the place goes to the next one.
        drop(waiting.remove(0));
        f.finish(&k("a", 0, 3));
        assert_eq!(turn(&mut waiting[0]), Turn::Go);
    }

    /// Many scripts (or one script's many uuids: a user may install any number) cannot have
    /// more than the total bound of requests in flight at once: the next waits, and an ended
    /// request lets it go; a script waiting on its own bound does not hold another's turn.
    #[test]
    fn all_scripts_together_are_bounded_too() {
        let mut f = Flights::default();
        let mut keep = Vec::new();
        let mut id = 0;
        'fill: for script in 0.. {
            for _ in 0..MAX_XHR_IN_FLIGHT {
                if keep.len() == MAX_XHR_IN_FLIGHT_ALL {
                    break 'fill;
                }
                id += 1;
                let s = f.start(k(&format!("s{script}"), 0, id)).unwrap();
                assert!(s.go.is_none());
                keep.push(s);
            }
        }
        assert_eq!(f.len(), MAX_XHR_IN_FLIGHT_ALL);
        // s0 is at its own bound and waits; a script with none in flight waits for all's.
        let mut s0 = f.start(k("s0", 0, 999)).unwrap();
        let mut fresh = f.start(k("fresh", 0, 1)).unwrap();
        assert_eq!(turn(&mut fresh), Turn::Waiting);
        // A place of s1 frees: s0's older request still has no place of its own, so the
        // fresh script's goes.
        f.finish(&k("s1", 0, u32::try_from(MAX_XHR_IN_FLIGHT).unwrap() + 1));
        assert_eq!(turn(&mut s0), Turn::Waiting);
        assert_eq!(turn(&mut fresh), Turn::Go);
        // Waiting all together is bounded.
        let mut waiting = Vec::new();
        for n in 0..MAX_XHR_WAITING_ALL - 1 {
            waiting.push(
                f.start(k(&format!("w{}", n % 8), 0, 1 + u32::try_from(n).unwrap()))
                    .unwrap(),
            );
        }
        let over = f.start(k("late", 0, 1)).unwrap_err();
        assert_eq!(over, Refused::TooManyAll);
        assert!(over.to_string().contains("not sent"), "{over}");
    }

    const MIB: u64 = 1024 * 1024;

    /// An answer is counted as its bytes arrive: many small answers at once all fit, a script's
    /// large ones are stopped past its budget (with the reason), another script's are not, and
    /// an ended, aborted or dropped request gives its bytes back.
    #[test]
    fn answers_are_counted_as_they_arrive_and_stopped_past_the_scripts_budget() {
        let mut f = Flights::default();
        // 16 answers of 600 KiB at once: 9.4 MiB, within the budget; not one refused.
        let _small: Vec<_> = (1..=16).map(|id| f.start(k("a", 0, id)).unwrap()).collect();
        for id in 1..=16 {
            for part in 1..=6 {
                assert_eq!(counted(&mut f, &k("a", 0, id), part * 100 * 1024), Ok(()));
            }
        }
        for id in 1..=16 {
            f.finish(&k("a", 0, id));
        }
        assert_eq!(f.held("a"), (0, 0));
        // Large answers: the one that would pass 10 MiB is refused, nothing of it counted.
        let mut keep = Vec::new();
        for id in 1..=3 {
            keep.push(f.start(k("a", 0, id)).unwrap());
        }
        assert_eq!(counted(&mut f, &k("a", 0, 1), 5 * MIB), Ok(()));
        assert_eq!(counted(&mut f, &k("a", 0, 2), 4 * MIB), Ok(()));
        assert_eq!(counted(&mut f, &k("a", 0, 3), MIB), Ok(()));
        let over = counted(&mut f, &k("a", 0, 3), MIB + 1).unwrap_err();
        assert_eq!(over, OverBudget::Script { at: MIB });
        let said = over.to_string();
        assert!(said.contains("stopped after 1048576 bytes"), "{said}");
        assert!(said.contains("at most 10 MiB"), "{said}");
        assert_eq!(f.held("a"), (10 * MIB, 10 * MIB));
        // The same bytes again, or fewer (a redirect's next hop), are not new bytes.
        assert_eq!(counted(&mut f, &k("a", 0, 1), 5 * MIB), Ok(()));
        assert_eq!(counted(&mut f, &k("a", 0, 2), 0), Ok(()));
        assert_eq!(f.held("a"), (6 * MIB, 6 * MIB));
        // Another script has a budget of its own.
        let _b = f.start(k("b", 0, 1)).unwrap();
        assert_eq!(counted(&mut f, &k("b", 0, 1), 5 * MIB), Ok(()));
        // Given back: by the answer made, by an abort, by the waiter going away.
        f.finish(&k("a", 0, 1));
        assert_eq!(f.held("a"), (MIB, 6 * MIB));
        assert!(f.abort(&k("a", 0, 3)));
        assert_eq!(f.held("a"), (0, 5 * MIB));
        assert_eq!(counted(&mut f, &k("a", 0, 2), 3 * MIB), Ok(()));
        drop(keep);
        let _c = f.start(k("c", 0, 1)).unwrap();
        assert_eq!(f.held("a"), (0, 5 * MIB));
        // A request no longer in flight reads nothing more.
        assert_eq!(
            counted(&mut f, &k("a", 0, 3), 1),
            Err(OverBudget::NotInFlight)
        );
    }

    /// An answer that says its length is counted whole at its first ask: it fits, and its
    /// chunks are then within it, or it waits holding nothing, and is told when bytes are
    /// given back. One that could never fit is stopped, not left waiting; an abort ends a wait.
    #[test]
    fn an_answer_that_says_its_length_waits_for_room_and_is_then_never_stopped() {
        let mut f = Flights::default();
        let _keep: Vec<_> = (1..=5).map(|id| f.start(k("a", 0, id)).unwrap()).collect();
        let five = Some(5 * MIB);
        assert!(matches!(f.hold(&k("a", 0, 1), 0, five), Hold::Keep));
        assert_eq!(f.held("a"), (5 * MIB, 5 * MIB));
        assert!(matches!(f.hold(&k("a", 0, 1), 3 * MIB, five), Hold::Keep));
        assert!(matches!(f.hold(&k("a", 0, 1), 5 * MIB, five), Hold::Keep));
        assert_eq!(f.held("a"), (5 * MIB, 5 * MIB), "its chunks are within it");
        assert!(matches!(f.hold(&k("a", 0, 2), 0, five), Hold::Keep));
        // The budget is full: the next waits, holding nothing.
        let Hold::Wait(mut room) = f.hold(&k("a", 0, 3), 0, Some(MIB)) else {
            panic!("did not wait")
        };
        assert_eq!(f.held("a"), (10 * MIB, 10 * MIB));
        assert_eq!(room.try_recv(), Ok(None));
        // Longer than the budget itself: stopped at once.
        assert!(matches!(
            f.hold(&k("a", 0, 4), 0, Some(ANSWER_BYTES_PER_SCRIPT + 1)),
            Hold::Stop(OverBudget::Script { at: 0 })
        ));
        // One ends: the waiting one is told, asks again, and fits.
        f.finish(&k("a", 0, 1));
        assert_eq!(room.try_recv(), Ok(Some(())));
        assert!(matches!(f.hold(&k("a", 0, 3), 0, Some(MIB)), Hold::Keep));
        // Aborted while it waits: the wait ends with an error (the shell stops reading).
        let Hold::Wait(mut room) = f.hold(&k("a", 0, 5), 0, five) else {
            panic!("did not wait")
        };
        assert!(f.abort(&k("a", 0, 5)));
        assert!(room.try_recv().is_err());
        assert_eq!(f.held("a"), (6 * MIB, 6 * MIB));
    }

    /// Several scripts, each within its own budget, cannot together hold more than the total.
    #[test]
    fn all_scripts_answers_together_are_bounded() {
        let mut f = Flights::default();
        let scripts = ANSWER_BYTES_ALL / ANSWER_BYTES_PER_SCRIPT;
        let mut keep = Vec::new();
        for s in 0..scripts {
            keep.push(f.start(k(&format!("s{s}"), 0, 1)).unwrap());
            assert_eq!(
                counted(&mut f, &k(&format!("s{s}"), 0, 1), ANSWER_BYTES_PER_SCRIPT),
                Ok(())
            );
        }
        keep.push(f.start(k("late", 0, 1)).unwrap());
        let room = ANSWER_BYTES_ALL - scripts * ANSWER_BYTES_PER_SCRIPT;
        assert_eq!(counted(&mut f, &k("late", 0, 1), room), Ok(()));
        let over = counted(&mut f, &k("late", 0, 1), room + 1).unwrap_err();
        assert_eq!(over, OverBudget::All { at: room });
        assert!(over.to_string().contains("at most 32 MiB"), "{over}");
        f.finish(&k("s0", 0, 1));
        assert_eq!(counted(&mut f, &k("late", 0, 1), room + 1), Ok(()));
    }

    /// Random starts, ends, aborts, dropped waiters and byte asks over a few scripts: after
    /// each, no script has more than its places in flight nor all scripts more than theirs, no
    /// request waits while a place is free for it, a waiting one holds no bytes, and the byte
    /// budgets and their sum hold.
    #[test]
    fn random_traffic_keeps_the_bounds_and_lets_no_request_wait_for_a_free_place() {
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut f = Flights::default();
        let mut live: Vec<(FlightKey, Started)> = Vec::new();
        let mut started_once = 0;
        for _ in 0..10_000 {
            let pick = |n: usize, r: u64| usize::try_from(r).unwrap_or(0) % n.max(1);
            match next(10) {
                0..=3 => {
                    let key = k(
                        &format!("s{}", next(5)),
                        0,
                        u32::try_from(next(400)).unwrap(),
                    );
                    if let Ok(s) = f.start(key.clone()) {
                        live.push((key, s));
                    }
                }
                4 if !live.is_empty() => {
                    let (key, _) = live.swap_remove(pick(live.len(), next(1 << 20)));
                    f.finish(&key);
                }
                5 if !live.is_empty() => {
                    let (key, _) = live.swap_remove(pick(live.len(), next(1 << 20)));
                    f.abort(&key);
                }
                // A waiter that went away without ending its flight (found by the next start).
                6 if !live.is_empty() => {
                    live.swap_remove(pick(live.len(), next(1 << 20)));
                }
                _ if !live.is_empty() => {
                    let i = pick(live.len(), next(1 << 20));
                    let total = match next(3) {
                        0 => None,
                        _ => Some(next(6 * MIB)),
                    };
                    let key = live[i].0.clone();
                    let _ = f.hold(&key, next(6 * MIB), total);
                }
                _ => {}
            }
            for (_, s) in &mut live {
                if turn(s) == Turn::Go {
                    started_once += 1;
                }
            }
            let mut per_script: VecMap<&str, usize> = VecMap::new();
            for (k, fl) in f.map.iter() {
                if fl.waiting.is_none() {
                    if let Some(n) = per_script.get_or_insert_with(k.uuid.as_str(), || 0) {
                        *n += 1;
                    }
                }
            }
            let all: usize = per_script.values().sum();
            assert!(all <= MAX_XHR_IN_FLIGHT_ALL);
            let mut sum = 0u64;
            for (k, fl) in f.map.iter() {
                let script = per_script.get(k.uuid.as_str()).copied().unwrap_or(0);
                assert!(script <= MAX_XHR_IN_FLIGHT);
                if fl.waiting.is_some() {
                    assert!(
                        script >= MAX_XHR_IN_FLIGHT || all >= MAX_XHR_IN_FLIGHT_ALL,
                        "{k:?} waits while a place is free"
                    );
                    assert_eq!(fl.held, 0);
                }
                sum += fl.held;
            }
            assert_eq!(sum, f.held_all);
            assert!(f.held_all <= ANSWER_BYTES_ALL);
            for s in 0..5 {
                assert!(f.held(&format!("s{s}")).0 <= ANSWER_BYTES_PER_SCRIPT);
            }
        }
        assert!(
            started_once > 100,
            "the queue was exercised: {started_once}"
        );
    }
}
