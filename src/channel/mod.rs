//! The userscript channel: messages registered scripts send to the worker over
//! `chrome.runtime.onUserScriptMessage` (run reports today; the GM API adds kinds).
//!
//! **Trust boundary.** A web page's own JavaScript cannot reach this channel (only USER_SCRIPT
//! worlds configured with `messaging: true` can), but any userscript can send anything. So:
//! the whole channel is bounded before parsing ([`rate::ALL`], [`message::MAX_MESSAGE_BYTES`]);
//! a message is parsed into the closed [`Message`] enum or dropped; its sender is the script its
//! token proves ([`token`]), never what the message says; each script is rate-limited; and a
//! decision here only ever yields a [`Message`] for the provider's channel handlers
//! (`provider::runs`). This module imports nothing from tools, policy, probe, MCP or sessions,
//! and no channel handler calls them: nothing sent here can call a tool, change the policy,
//! answer a probe or reach a host.

pub mod backlog;
pub mod key_store;
pub mod message;
pub mod rate;
pub mod token;

pub use message::{ChannelError, Envelope, Message};
pub use token::{ChannelKey, Proven};

/// What to do with one message.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// `held`: the message's weight in [`rate::RateLimit::backlog`], counted as waiting until
    /// the caller releases it (once answered).
    Accept {
        from: Proven,
        message: Message,
        held: usize,
    },
    Drop(Dropped),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Dropped {
    /// The channel as a whole is over its bound: not even parsed.
    Flooded,
    Malformed(ChannelError),
    /// No key yet (nothing registered with a token), or a token this key did not make.
    UnknownSender,
    /// The script is over its own bound.
    RateLimited,
    /// Too many bytes of messages wait to be answered: the script's, or all scripts'
    /// ([`backlog`]). Not even parsed when the shell read the token first.
    Backlogged(backlog::Full),
}

/// The channel's decision for one message: bounded, parsed, attributed, rate-limited. `key` is
/// the worker's channel key (None: none exists, so no token can be valid). `raw` is asked for
/// only once the channel as a whole admits the message, so a flood costs no conversion to text.
pub fn decide(
    limits: &mut rate::RateLimit,
    key: Option<&ChannelKey>,
    raw: impl FnOnce() -> Option<String>,
    now: f64,
) -> Verdict {
    decide_hinted(limits, key, None, raw, now)
}

/// [`decide`], with the message's token read alone by the shell (`hint`: its `lumo` property)
/// before anything else is converted: a token that proves a script charges the message to that
/// script's share of the channel ([`rate::PER_SCRIPT_ANY`]), anything else to the unproven
/// share ([`rate::UNPROVEN`]), and both to the channel's bound. So a looping script spends its
/// own share, not every script's. The parsed message must carry that same token.
pub fn decide_hinted(
    limits: &mut rate::RateLimit,
    key: Option<&ChannelKey>,
    hint: Option<&str>,
    raw: impl FnOnce() -> Option<String>,
    now: f64,
) -> Verdict {
    let hinted = hint
        .filter(|t| t.len() <= token::MAX_TOKEN_CHARS)
        .and_then(|t| key.and_then(|k| k.verify(t)));
    let admitted = match &hinted {
        Some(p) => limits.admit_proven(&p.uuid, now),
        None if hint.is_some() => limits.admit_unproven(now),
        // No hint at all (tests, an older shell): the channel's bound alone.
        None => limits.admit_any(now),
    };
    if !admitted {
        return match hinted {
            Some(_) => Verdict::Drop(Dropped::RateLimited),
            None => Verdict::Drop(Dropped::Flooded),
        };
    }
    // A script with too much waiting: its message is not even turned into text.
    if let Some(p) = &hinted {
        if let Err(full) = limits.backlog.room(&p.uuid) {
            limits.count_dropped(&p.uuid);
            return Verdict::Drop(Dropped::Backlogged(full));
        }
    }
    let Some(raw) = raw() else {
        return Verdict::Drop(Dropped::Malformed(ChannelError::NotJson));
    };
    let envelope = match message::parse(&raw) {
        Ok(e) => e,
        Err(e) => return Verdict::Drop(Dropped::Malformed(e)),
    };
    if hint.is_some_and(|h| h != envelope.token) {
        return Verdict::Drop(Dropped::UnknownSender);
    }
    let Some(from) = key.and_then(|k| k.verify(&envelope.token)) else {
        return Verdict::Drop(Dropped::UnknownSender);
    };
    // GM requests have their own, larger window: run reports cannot starve them, nor they
    // the reports.
    let admitted = match envelope.message {
        Message::Gm(crate::gm::message::GmRequest::ValuesWait { .. }) => {
            limits.admit_wait(&from.uuid, now)
        }
        Message::Gm(_) => limits.admit_gm(&from.uuid, now),
        Message::Run(ref r) => limits.admit_run(&from.uuid, r.error.is_some(), now),
        // A retraction is charged as the late error it takes back.
        Message::Late(_) | Message::Handled(_) => limits.admit_late(&from.uuid, now),
    };
    if !admitted {
        return Verdict::Drop(Dropped::RateLimited);
    }
    if let Err(full) = limits.backlog.room(&from.uuid) {
        limits.count_dropped(&from.uuid);
        return Verdict::Drop(Dropped::Backlogged(full));
    }
    let held = limits.backlog.hold(&from.uuid, raw.len());
    Verdict::Accept {
        from,
        message: envelope.message,
        held,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const A: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";
    const B: &str = "7c9e6679-7425-40de-944b-e07fc1f90ae7";

    fn report(token: &str) -> String {
        json!({"lumo": token, "v": 1, "kind": "run", "runAt": "document_idle", "ms": 2}).to_string()
    }

    #[test]
    fn a_report_is_attributed_by_its_token_only() {
        let key = ChannelKey::from_uuids(A, B).unwrap();
        let mut l = rate::RateLimit::default();
        match decide(&mut l, Some(&key), || Some(report(&key.token(A, 2))), 1.0) {
            Verdict::Accept { from, .. } => assert_eq!((from.uuid.as_str(), from.revision), (A, 2)),
            v => panic!("{v:?}"),
        }
        // A script that knows its own token cannot claim another script's uuid with it.
        let own = key.token(A, 2);
        let forged = own.replacen(A, B, 1);
        assert_eq!(
            decide(&mut l, Some(&key), || Some(report(&forged)), 1.0),
            Verdict::Drop(Dropped::UnknownSender)
        );
        // No key: nothing is accepted.
        assert_eq!(
            decide(&mut l, None, || Some(report(&own)), 1.0),
            Verdict::Drop(Dropped::UnknownSender)
        );
    }

    #[test]
    fn a_script_flooding_before_parsing_spends_its_own_share_not_the_channel() {
        let key = ChannelKey::from_uuids(A, B).unwrap();
        let mut l = rate::RateLimit::default();
        let ta = key.token(A, 1);
        let a = report(&ta);
        // Thousands of messages from A, valid or not: A's share of the channel, then nothing.
        let mut parsed = 0;
        for i in 0..5000 {
            let body = if i % 2 == 0 {
                a.clone()
            } else {
                "garbage".into()
            };
            decide_hinted(
                &mut l,
                Some(&key),
                Some(&ta),
                || {
                    parsed += 1;
                    Some(body)
                },
                10.0,
            );
        }
        assert_eq!(parsed, rate::PER_SCRIPT_ANY);
        // Garbage without a valid token has a share of its own.
        for _ in 0..5000 {
            decide_hinted(
                &mut l,
                Some(&key),
                Some("x.1.00"),
                || Some("garbage".into()),
                10.0,
            );
        }
        // B's report still lands in the same window.
        let tb = key.token(B, 1);
        assert!(matches!(
            decide_hinted(&mut l, Some(&key), Some(&tb), || Some(report(&tb)), 10.0),
            Verdict::Accept { .. }
        ));
        // A message whose body names another token than the one read first is nobody's.
        assert_eq!(
            decide_hinted(&mut l, Some(&key), Some(&tb), || Some(report(&ta)), 10.0),
            Verdict::Drop(Dropped::UnknownSender)
        );
    }

    /// R15: three tabs' value heartbeats and the listeners' waits shared one window of 600, so
    /// the waits spent what the changes needed and the values were refused. Waits have their
    /// own: a script past its waits still changes values, and past its GM requests still waits.
    #[test]
    fn a_listeners_waits_do_not_spend_the_scripts_gm_requests() {
        let key = ChannelKey::from_uuids(A, B).unwrap();
        let mut l = rate::RateLimit::default();
        let ta = key.token(A, 1);
        let wait =
            json!({"lumo": ta, "v": 1, "kind": "gm", "op": "values.wait", "since": 1}).to_string();
        let set =
            json!({"lumo": ta, "v": 1, "kind": "gm", "op": "values.set", "items": [["k", "1"]]})
                .to_string();
        let mut send = |m: &str| match decide_hinted(
            &mut l,
            Some(&key),
            Some(&ta),
            || Some(m.to_owned()),
            1.0,
        ) {
            Verdict::Accept { from, held, .. } => {
                l.backlog.release(&from.uuid, held);
                true
            }
            Verdict::Drop(Dropped::RateLimited) => false,
            other => panic!("{other:?}"),
        };
        let waits = (0..rate::WAIT_PER_SCRIPT + 10)
            .filter(|_| send(&wait))
            .count();
        assert_eq!(waits, usize::try_from(rate::WAIT_PER_SCRIPT).unwrap());
        let sets = (0..rate::GM_PER_SCRIPT + 10).filter(|_| send(&set)).count();
        assert_eq!(sets, usize::try_from(rate::GM_PER_SCRIPT).unwrap());
    }

    /// Accepted messages wait in the worker (a value batch for the values lock): past its
    /// share of bytes waiting, a script's next message is refused before its text is made,
    /// while another script's still passes; an answered one gives its room back.
    #[test]
    fn a_script_with_too_much_waiting_is_refused_before_its_text_is_made() {
        let key = ChannelKey::from_uuids(A, B).unwrap();
        let mut l = rate::RateLimit::default();
        let ta = key.token(A, 1);
        let big = json!({"lumo": ta, "v": 1, "kind": "gm", "op": "values.set",
            "items": [["k", format!("\"{}\"", "x".repeat(200 * 1024))]]})
        .to_string();
        let mut held = Vec::new();
        let refused = loop {
            match decide_hinted(&mut l, Some(&key), Some(&ta), || Some(big.clone()), 1.0) {
                Verdict::Accept { held: w, .. } => held.push(w),
                other => break other,
            }
            assert!(held.len() < 1000, "never refused");
        };
        assert_eq!(
            refused,
            Verdict::Drop(Dropped::Backlogged(backlog::Full::Script))
        );
        assert_eq!(held.len(), backlog::PER_SCRIPT_BYTES / big.len() + 1);
        let asked = std::cell::Cell::new(false);
        let again = decide_hinted(
            &mut l,
            Some(&key),
            Some(&ta),
            || {
                asked.set(true);
                Some(big.clone())
            },
            1.0,
        );
        assert_eq!(
            again,
            Verdict::Drop(Dropped::Backlogged(backlog::Full::Script))
        );
        assert!(!asked.get());
        // Another script is not held up by A's backlog.
        let tb = key.token(B, 1);
        assert!(matches!(
            decide_hinted(&mut l, Some(&key), Some(&tb), || Some(report(&tb)), 1.0),
            Verdict::Accept { .. }
        ));
        // A's answered messages give their room back.
        for w in held {
            l.backlog.release(A, w);
        }
        assert!(matches!(
            decide_hinted(&mut l, Some(&key), Some(&ta), || Some(big.clone()), 1.0),
            Verdict::Accept { .. }
        ));
    }

    #[test]
    fn a_flooding_script_is_cut_off_and_others_still_pass() {
        let key = ChannelKey::from_uuids(A, B).unwrap();
        let mut l = rate::RateLimit::default();
        let a = report(&key.token(A, 1));
        let accepted = (0..100)
            .filter(|_| {
                matches!(
                    decide(&mut l, Some(&key), || Some(a.clone()), 10.0),
                    Verdict::Accept { .. }
                )
            })
            .count();
        assert_eq!(accepted, usize::try_from(rate::PER_SCRIPT).unwrap());
        assert!(matches!(
            decide(&mut l, Some(&key), || Some(report(&key.token(B, 1))), 10.0),
            Verdict::Accept { .. }
        ));
        assert_eq!(l.take_dropped(A), 70);
        // Past the channel's bound nothing is even parsed.
        for _ in 0..rate::ALL {
            decide(&mut l, Some(&key), || Some("garbage".into()), 10.0);
        }
        assert_eq!(
            decide(&mut l, Some(&key), || Some(report(&key.token(B, 1))), 10.0),
            Verdict::Drop(Dropped::Flooded)
        );
        // …and the message is not even turned into text.
        let asked = std::cell::Cell::new(false);
        decide(
            &mut l,
            Some(&key),
            || {
                asked.set(true);
                None
            },
            10.0,
        );
        assert!(!asked.get());
    }
}
