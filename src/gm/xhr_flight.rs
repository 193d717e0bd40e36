//! A script's `GM_xmlhttpRequest`s in flight, so `abort()` cancels the worker's fetch (not only
//! the page's wait) and a script has at most [`MAX_XHR_IN_FLIGHT`] at once.
//!
//! Who is who: a request is named by the uuid its script's token proved, the tab, frame and
//! document Chrome reported for the sender, and the page's own number for it. An abort names
//! the same five, so it reaches that script's request in that page and never another's (two
//! scripts, or two frames, both counting from 1 do not collide).

use std::collections::BTreeMap;

use futures::channel::oneshot;

pub use super::message::MAX_XHR_IN_FLIGHT;

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
    TooMany,
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
                 flight; the request was not sent"
            ),
        }
    }
}

/// The requests in flight, each with the sender that cancels it.
#[derive(Debug, Default)]
pub struct Flights {
    map: BTreeMap<FlightKey, oneshot::Sender<()>>,
}

impl Flights {
    /// Records a request; its receiver completes when it is aborted.
    pub fn start(&mut self, key: FlightKey) -> Result<oneshot::Receiver<()>, Refused> {
        // Requests whose waiter went away (its future dropped) hold no place.
        self.map.retain(|_, s| !s.is_canceled());
        if self.map.contains_key(&key) {
            return Err(Refused::Duplicate(key.id));
        }
        let n = self.map.keys().filter(|k| k.uuid == key.uuid).count();
        if n >= MAX_XHR_IN_FLIGHT {
            return Err(Refused::TooMany);
        }
        let (tx, rx) = oneshot::channel();
        self.map.insert(key, tx);
        Ok(rx)
    }

    /// Cancels the request so named; whether there was one.
    pub fn abort(&mut self, key: &FlightKey) -> bool {
        self.map.remove(key).is_some_and(|tx| tx.send(()).is_ok())
    }

    /// The request ended (answered or aborted).
    pub fn finish(&mut self, key: &FlightKey) {
        self.map.remove(key);
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
        assert_eq!(a.try_recv(), Ok(Some(())));
        assert_eq!(b.try_recv(), Ok(None));
        assert_eq!(a_frame.try_recv(), Ok(None));
        // Once aborted it is gone.
        assert!(!f.abort(&k("a", 0, 1)));
        assert_eq!(f.len(), 2);
    }

    #[test]
    fn duplicates_and_too_many_are_refused_and_ended_ones_free_their_place() {
        let mut f = Flights::default();
        let _r = f.start(k("a", 0, 1)).unwrap();
        assert_eq!(f.start(k("a", 0, 1)).unwrap_err(), Refused::Duplicate(1));
        let mut keep = Vec::new();
        for id in 2..=u32::try_from(MAX_XHR_IN_FLIGHT).unwrap() {
            keep.push(f.start(k("a", 0, id)).unwrap());
        }
        let over = f.start(k("a", 0, 999)).unwrap_err();
        assert_eq!(over, Refused::TooMany);
        assert!(over.to_string().contains("not sent"));
        // Another script has its own bound.
        assert!(f.start(k("b", 0, 999)).is_ok());
        f.finish(&k("a", 0, 2));
        assert!(f.start(k("a", 0, 999)).is_ok());
        // A request whose waiter went away frees its place too.
        drop(keep.pop());
        assert!(f.start(k("a", 0, 1000)).is_ok());
    }
}
