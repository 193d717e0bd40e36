//! Writes waiting for the user's review: the wait (raced against a timer), decisions from the
//! review surface, cancellation, and stubs kept for a worker restart.

use super::{Provider, Waiting};
use crate::env::{Area, Env};
use crate::guard::audit::Entry;
use crate::guard::review::{self, Decision, QueueFull, ReviewRequest, Stub};
use crate::tools::result::ToolError;
use futures::channel::oneshot;
use futures::future::{select, Either};
use serde_json::{Map, Value};

impl<E: Env> Provider<E> {
    /// The reviews that wait, oldest first.
    pub fn pending_reviews(&self) -> Vec<ReviewRequest> {
        self.reviews
            .borrow()
            .values()
            .map(|w| w.request.clone())
            .collect()
    }

    /// Every line of a waiting review's diff (the popup shows the first part with the review).
    /// None when no such review waits or the write changes no source.
    pub fn review_diff(&self, id: &str) -> Option<String> {
        let reviews = self.reviews.borrow();
        let w = reviews.values().find(|w| w.request.id == id)?;
        w.request.full_diff()
    }

    /// All of the text of a waiting review's file number `index`, as the browser reads it,
    /// marked. None when no such review waits or it has no such file.
    pub fn review_file(&self, id: &str, index: usize) -> Option<String> {
        let reviews = self.reviews.borrow();
        let r = &reviews.values().find(|w| w.request.id == id)?.request;
        let file = r.files.get(index)?;
        let bytes = r.fetched.as_ref()?.body(&file.sha256)?;
        crate::guard::review_files::whole_text(file.asset.as_ref()?, bytes)
    }

    /// A place for a review about to be prepared, whose files (`bytes` at most) are fetched
    /// before it waits: refused as a waiting review would be, so an agent cannot make the worker
    /// fetch and hold files for more reviews than may wait (a reviewer had 20 reviewed writes
    /// fetch 40 MiB before 12 were refused). The place is kept until the [`Preparing`] is
    /// dropped, which the review's own admission follows.
    pub fn reserve_review(
        &self,
        caller: &str,
        bytes: usize,
    ) -> Result<Preparing<'_, E>, QueueFull> {
        self.admit_review(caller, bytes)?;
        let n = self.preparing_seq.get().saturating_add(1);
        self.preparing_seq.set(n);
        self.preparing
            .borrow_mut()
            .insert(n, (caller.to_owned(), bytes));
        Ok(Preparing { p: self, n })
    }

    /// Whether `caller` may have one more review, holding `bytes` of files, beside those that
    /// wait and those being prepared.
    fn admit_review(&self, caller: &str, bytes: usize) -> Result<(), QueueFull> {
        review::admit(
            self.reviews
                .borrow()
                .values()
                .map(|w| (w.request.caller.as_str(), held(&w.request)))
                .chain(
                    self.preparing
                        .borrow()
                        .values()
                        .map(|(c, b)| (c.as_str(), *b)),
                ),
            caller,
            bytes,
        )
    }

    pub fn is_waived(&self, session: u64) -> bool {
        self.waived.borrow().contains(&session)
    }

    /// Waits for the user's decision on one write, until the request's `expires_at` (at most
    /// [`review::REVIEW_TIMEOUT_MS`] from now).
    /// With an approval comes where to tell what the approved write did ([`Told`]).
    pub async fn await_review(
        &self,
        request: ReviewRequest,
        rpc_id: Value,
    ) -> Result<(Decision, Told), QueueFull> {
        // The session closed (the user's Disconnect, a revocation) after the call's checks: a
        // review shown now would ask the user about a caller already sent away.
        if !self.session_open(request.session) {
            return Ok((Decision::Cancelled, Told::nobody()));
        }
        let mut request = request;
        let wait = (request.expires_at - self.env.now_ms()).clamp(0.0, review::REVIEW_TIMEOUT_MS);
        self.admit_review(&request.caller, held(&request))?;
        let seq = self.review_seq.get().saturating_add(1);
        self.review_seq.set(seq);
        request.seq = seq;
        let (tx, rx) = oneshot::channel();
        let session = request.session;
        self.reviews.borrow_mut().insert(
            seq,
            Waiting {
                request,
                rpc_id,
                decide: Some(tx),
                told: None,
            },
        );
        // The stubs of the previous worker's reviews are settled (audited) first: saved over
        // before the start-up settles them, they would be lost from the record.
        self.resume_interrupted_reviews().await;
        self.save_review_stubs().await;
        self.changed();
        let decision = match select(rx, Box::pin(self.env.sleep(wait))).await {
            Either::Left((Ok(d), _)) => d,
            Either::Left((Err(_), _)) => Decision::Cancelled,
            Either::Right(_) => Decision::Expired,
        };
        // Its stub stays stored, with the time of the decision, until the call has recorded
        // what became of the write (`review_recorded`): removed now, a worker stopped before
        // the write's journaled `set` or the refusal's entry left no trace of the user's
        // decision (R15).
        let decided = self.reviews.borrow_mut().remove(&seq);
        let told = match decided {
            Some(w) => {
                let stub = Stub {
                    decided_at: Some(self.env.now_ms()),
                    ..w.request.stub()
                };
                self.decided_stubs.borrow_mut().push(stub);
                Told {
                    tell: w.told,
                    review: Some(w.request.id),
                }
            }
            None => Told::nobody(),
        };
        if let Decision::Approve {
            allow_session: true,
        } = decision
        {
            self.allow_session(session);
        }
        // Stored with the time of the decision, which tells this call's entry from an earlier
        // call's with the same arguments at the next start.
        if told.review.is_some() {
            self.save_review_stubs().await;
        }
        self.changed();
        Ok((decision, told))
    }

    /// The call whose write review `id` asked about has recorded its outcome (in the audit log,
    /// or pending in the write's journaled `set`): its stub goes.
    pub(crate) async fn review_recorded(&self, id: &str) {
        self.decided_stubs.borrow_mut().retain(|s| s.id != id);
        self.save_review_stubs().await;
    }

    /// The user's decision from the review surface. False when no such review waits (it
    /// expired, or was already decided).
    pub fn decide(&self, id: &str, decision: Decision) -> bool {
        self.decide_told(id, decision).is_some()
    }

    /// [`Self::decide`], and where the decided write's outcome will come: an approved write
    /// may still not apply (the script changed or went meanwhile, writes were turned off), and
    /// the review surface must not say it did. None when no such review waits.
    ///
    /// "Approve all from this session" approves that session's other waiting writes too: its
    /// later writes will not ask, and those already listed are no different (R15: they kept
    /// waiting, though the button said "all"). Their ids come with the answer.
    pub fn decide_told(&self, id: &str, decision: Decision) -> Option<Decided> {
        let mut reviews = self.reviews.borrow_mut();
        let w = reviews.values_mut().find(|w| w.request.id == id)?;
        let tx = w.decide.take()?;
        let session = w.request.session;
        let (told, outcome) = oneshot::channel();
        w.told = Some(told);
        drop(reviews);
        tx.send(decision).ok()?;
        // Taken only once this one is decided: a sender taken and dropped cancels its write.
        let rest: Vec<(String, oneshot::Sender<Decision>)> = match decision {
            Decision::Approve {
                allow_session: true,
            } => self
                .reviews
                .borrow_mut()
                .values_mut()
                .filter(|w| w.request.session == session)
                .filter_map(|w| Some((w.request.id.clone(), w.decide.take()?)))
                .collect(),
            _ => Vec::new(),
        };
        let also = rest
            .into_iter()
            .filter_map(|(id, tx)| tx.send(decision).ok().map(|()| id))
            .collect();
        Some(Decided { outcome, also })
    }

    /// Every waiting review ends with `decision` (the user turned writes off: none can apply).
    pub fn withdraw_reviews(&self, decision: Decision) {
        let senders: Vec<oneshot::Sender<Decision>> = self
            .reviews
            .borrow_mut()
            .values_mut()
            .filter_map(|w| w.decide.take())
            .collect();
        for tx in senders {
            let _ = tx.send(decision);
        }
    }

    /// Cancels the reviews of a session: all of them (port closed) or the one for a cancelled
    /// JSON-RPC request.
    pub fn cancel_reviews(&self, session: u64, rpc_id: Option<&Value>) {
        let senders: Vec<oneshot::Sender<Decision>> = self
            .reviews
            .borrow_mut()
            .values_mut()
            .filter(|w| w.request.session == session && rpc_id.is_none_or(|id| &w.rpc_id == id))
            .filter_map(|w| w.decide.take())
            .collect();
        for tx in senders {
            let _ = tx.send(Decision::Cancelled);
        }
    }

    pub(crate) async fn save_review_stubs(&self) {
        let stubs: Vec<Stub> = self
            .reviews
            .borrow()
            .values()
            .map(|w| w.request.stub())
            .chain(self.decided_stubs.borrow().iter().cloned())
            .collect();
        let mut m = Map::new();
        m.insert(
            review::STUBS_KEY.to_owned(),
            serde_json::to_value(stubs).unwrap_or(Value::Null),
        );
        // On disk: an extension reload or a browser restart clears the session area, and the
        // write the user was asked about must still reach the audit log as interrupted.
        if let Err(e) = self.env.set(Area::Local, m).await {
            self.note(format!("could not save pending reviews: {e}"));
        }
    }

    /// At worker start: reviews that were waiting when the previous worker stopped (or the
    /// extension reloaded, or the browser quit) cannot be answered any more (their port died
    /// with it). Each is audited as REVIEW_INTERRUPTED.
    /// Once per worker: at start, or before the first review saves its stub if that comes
    /// first.
    pub async fn resume_interrupted_reviews(&self) {
        if self.reviews_resumed.replace(true) {
            return;
        }
        let stored = match self.env.get(Area::Local, &[review::STUBS_KEY]).await {
            Ok(m) => m.get(review::STUBS_KEY).cloned().unwrap_or(Value::Null),
            Err(_) => return,
        };
        let stubs: Vec<Stub> = stored
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| serde::Deserialize::deserialize(v).ok())
                    .collect()
            })
            .unwrap_or_default();
        let live = |s: &Stub| {
            self.reviews.borrow().values().any(|w| w.request.id == s.id)
                || self.decided_stubs.borrow().iter().any(|d| d.id == s.id)
        };
        let orphans: Vec<Stub> = stubs.into_iter().filter(|s| !live(s)).collect();
        if orphans.is_empty() {
            return;
        }
        let earliest = orphans.iter().filter_map(|s| s.decided_at).reduce(f64::min);
        let mut recorded = match earliest {
            Some(since) => crate::guard::audit::recorded_since(&self.env, since).await,
            None => Vec::new(),
        };
        // Decided, and its write recorded itself (pending, or finished) before the stop: the
        // entry of the same caller and arguments dated from the decision on (a reviewed write's
        // entry is dated at the decision, `tools::write`; an earlier call with the same
        // arguments, refused or done, is dated before it, R16). Each entry answers for one
        // stub, the earliest decided taking the earliest entry it can (R18: taken newest first,
        // a later stub was left without its own entry and audited as interrupted).
        recorded.sort_by(|x, y| x.at.total_cmp(&y.at));
        let mut by_decision: Vec<usize> = (0..orphans.len()).collect();
        let decided = |k: usize| {
            orphans
                .get(k)
                .and_then(|s| s.decided_at)
                .unwrap_or(f64::INFINITY)
        };
        by_decision.sort_by(|&i, &j| decided(i).total_cmp(&decided(j)));
        let mut answered = vec![false; orphans.len()];
        for k in by_decision {
            let Some(s) = orphans.get(k) else { continue };
            let Some(t) = s.decided_at else { continue };
            let own = |e: &Entry| e.caller == s.caller && e.digest == s.digest && e.at >= t;
            if let Some(i) = recorded.iter().position(own) {
                recorded.remove(i);
                if let Some(a) = answered.get_mut(k) {
                    *a = true;
                }
            }
        }
        for (s, answered) in orphans.iter().zip(answered) {
            if answered {
                continue;
            }
            self.audit(&Entry {
                at: self.env.now_ms(),
                tool: s.tool.clone(),
                caller: s.caller.clone(),
                result: "REVIEW_INTERRUPTED".to_owned(),
                target: s.target.clone(),
                digest: s.digest.clone(),
                unchanged: false,
                from_trash: false,
                revision: None,
                purged: None,
                name: None,
                count: None,
            })
            .await;
        }
        self.save_review_stubs().await;
    }
}

/// A decision taken: where the decided write's outcome will come, and the other reviews an
/// "approve all" decided with it.
pub struct Decided {
    pub outcome: oneshot::Receiver<Applied>,
    pub also: Vec<String>,
}

/// What an approved write did: done, or refused after all (with the refusal the agent got).
pub type Applied = Result<(), ToolError>;

/// Where an approved write tells its outcome ([`Provider::decide_told`]); nothing for a write
/// that was not approved from the review surface.
pub struct Told {
    tell: Option<oneshot::Sender<Applied>>,
    /// The review decided, whose stub waits for the call's record ([`Provider::review_recorded`]).
    review: Option<String>,
}

impl Told {
    pub fn nobody() -> Self {
        Told {
            tell: None,
            review: None,
        }
    }

    /// The review whose decision this call carried out, if any.
    pub fn review(&self) -> Option<&str> {
        self.review.as_deref()
    }

    pub fn tell<T>(&mut self, outcome: &Result<T, ToolError>) {
        if let Some(tx) = self.tell.take() {
            let _ = tx.send(outcome.as_ref().map(drop).map_err(Clone::clone));
        }
    }
}

/// The bytes of files a review holds.
fn held(r: &ReviewRequest) -> usize {
    r.fetched.as_ref().map_or(0, |f| f.bytes())
}

/// A review's place while it is prepared ([`Provider::reserve_review`]); given up when dropped.
pub struct Preparing<'a, E: Env> {
    p: &'a Provider<E>,
    n: u64,
}

impl<E: Env> Drop for Preparing<'_, E> {
    fn drop(&mut self) {
        self.p.preparing.borrow_mut().remove(&self.n);
    }
}
