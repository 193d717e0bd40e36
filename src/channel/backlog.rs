//! Messages of the channel accepted and not yet answered, weighed by their text: each one is
//! held in the wasm's memory (its parsed request: a `GM_setValue` batch of up to 256 KiB, a
//! request body) until the worker is done with it, and the wasm's memory never shrinks. The rate
//! windows bound how many messages a minute; this bounds how many bytes wait at once, per script
//! and in all. Measured before it (Chromium 156): one script setting a 200 KiB value 600 times,
//! each in a task of its own (2.2 s), grew the worker's memory from 1.4 to 127.7 MB for its
//! life, every message waiting for the values lock.
//!
//! A message is looked at only while its script holds less than [`PER_SCRIPT_BYTES`] and all
//! scripts less than [`ALL_BYTES`] (before its text is even copied into the wasm, when the shell
//! read its token first), so either bound is passed by at most one message
//! ([`super::message::MAX_MESSAGE_BYTES`]). A long wait (a menu, a value listener, a request in
//! flight) holds only its own small text.

use crate::vec_map::VecMap;

/// Bytes of message text one script may have waiting in the worker: 16 requests of the largest
/// body (256 KiB, base64) fit, or 30 batches of 256 KiB of values.
pub const PER_SCRIPT_BYTES: usize = 8 * 1024 * 1024;
/// Bytes of message text all scripts may have waiting together: four scripts' worth.
pub const ALL_BYTES: usize = 4 * PER_SCRIPT_BYTES;
/// The least a message weighs, whatever its length (what the worker keeps besides its text).
pub const MIN_WEIGHT: usize = 1024;

/// Which bound refused a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// The script's own.
    Script,
    /// All scripts' together.
    All,
}

impl Full {
    /// What the script is told (a GM request's answer; a run report is only counted).
    pub fn message(self) -> String {
        match self {
            Full::Script => format!(
                "GM: refused, this script already has {} MiB of requests waiting in the provider; \
                 wait for their answers before sending more",
                PER_SCRIPT_BYTES >> 20
            ),
            Full::All => format!(
                "GM: refused, userscripts already have {} MiB of requests waiting in the \
                 provider; try again shortly",
                ALL_BYTES >> 20
            ),
        }
    }
}

/// What each script has waiting, and the sum.
#[derive(Debug, Default)]
pub struct Backlog {
    held: VecMap<String, usize>,
    total: usize,
}

impl Backlog {
    /// Whether one more message of `uuid` may be looked at; which bound is full otherwise.
    pub fn room(&self, uuid: &str) -> Result<(), Full> {
        if self.held(uuid) >= PER_SCRIPT_BYTES {
            return Err(Full::Script);
        }
        if self.total >= ALL_BYTES {
            return Err(Full::All);
        }
        Ok(())
    }

    /// Counts a message of `len` bytes as waiting; returns its weight, to [`Self::release`].
    pub fn hold(&mut self, uuid: &str, len: usize) -> usize {
        let w = len.max(MIN_WEIGHT);
        if let Some(n) = self
            .held
            .get_or_insert_with(uuid.to_owned(), usize::default)
        {
            *n = n.saturating_add(w);
        }
        self.total = self.total.saturating_add(w);
        w
    }

    /// The message weighed `w` is answered (or dropped).
    pub fn release(&mut self, uuid: &str, w: usize) {
        let left = match self.held.get_mut(uuid) {
            Some(n) => {
                *n = n.saturating_sub(w);
                *n
            }
            None => 0,
        };
        if left == 0 {
            self.held.remove(uuid);
        }
        self.total = self.total.saturating_sub(w);
    }

    /// Bytes `uuid` has waiting.
    pub fn held(&self, uuid: &str) -> usize {
        self.held.get(uuid).copied().unwrap_or(0)
    }

    /// Bytes all scripts have waiting.
    pub fn total(&self) -> usize {
        self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_script_and_the_whole_are_bounded_and_released() {
        let mut b = Backlog::default();
        let mut held = Vec::new();
        while b.room("a").is_ok() {
            held.push(b.hold("a", 200 * 1024));
        }
        assert_eq!(b.room("a"), Err(Full::Script));
        // At most one message past the bound.
        assert!(b.held("a") < PER_SCRIPT_BYTES + 200 * 1024);
        // Another script still has room; a tiny message weighs its minimum.
        assert_eq!(b.room("b"), Ok(()));
        assert_eq!(b.hold("b", 3), MIN_WEIGHT);
        for w in held.drain(..) {
            b.release("a", w);
        }
        assert_eq!(b.held("a"), 0);
        assert_eq!(b.total(), MIN_WEIGHT);
        // The whole: four scripts fill it, a fifth is refused by it.
        for s in ["c", "d", "e", "f"] {
            while b.room(s).is_ok() {
                b.hold(s, 500 * 1024);
            }
        }
        assert_eq!(b.room("g"), Err(Full::All));
        assert!(Full::All.message().contains("32 MiB"));
        assert!(Full::Script.message().contains("8 MiB"));
    }
}
