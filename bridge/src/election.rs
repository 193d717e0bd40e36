//! Who owns the extension link when several bridges run (seed 001's shared daemon): the process
//! that binds the control port is the owner; the others forward their tool calls to it. When the
//! owner exits, its forwarders see the control connection close and run the election again: one
//! of them wins the bind and takes over, the rest forward to it. A pure function of what was
//! observed, so the rules are tested without sockets.

use std::time::Duration;

/// What trying to bind the control port gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bind {
    Bound,
    InUse,
    /// Any other error (permission, bad address): not something waiting fixes.
    Failed(String),
}

/// What dialling the owner's control port gave (only tried when the bind found it in use).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dial {
    /// Connected and our `fwd_hello` was accepted.
    Accepted,
    /// The owner answered and refused us (wrong token, other protocol): its words.
    Refused(String),
    /// Nothing answered, or the connection dropped before the ack: the owner may be exiting, or
    /// a newly elected one not yet listening.
    Unreachable,
    /// Not dialled: no control token in this state directory (named) to prove. A new owner
    /// may not have written it yet; for good, the port's holder keeps its token elsewhere.
    NoToken(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Own,
    Forward,
    RetryAfter(Duration),
    GiveUp(String),
}

/// Attempts before giving up on a port that is taken but does not answer as a bridge.
pub const MAX_ATTEMPTS: u32 = 20;

/// One round of the election. `attempt` counts from 0; `pid` spreads the retries of several
/// forwarders so that they do not race in lockstep.
pub fn elect(bind: &Bind, dial: Option<&Dial>, attempt: u32, pid: u32, port: u16) -> Decision {
    match (bind, dial) {
        (Bind::Bound, _) => Decision::Own,
        (Bind::Failed(e), _) => Decision::GiveUp(format!("cannot listen on port {port}: {e}")),
        (Bind::InUse, Some(Dial::Accepted)) => Decision::Forward,
        // A refusal is retried a while (a new owner may be rewriting the token file), then
        // reported with the owner's words.
        (Bind::InUse, Some(Dial::Refused(why))) if attempt >= MAX_ATTEMPTS => Decision::GiveUp(
            format!("another bridge owns port {port} and refused this one: {why}"),
        ),
        (Bind::InUse, Some(Dial::NoToken(dir))) if attempt >= MAX_ATTEMPTS => Decision::GiveUp(format!(
            "port {port} is taken, and there is no control token in {dir}: if another Lumo bridge holds it, it keeps its state elsewhere (bridges sharing one extension need the same --state-dir, or the same XDG_RUNTIME_DIR); otherwise choose another --control-port"
        )),
        (Bind::InUse, Some(Dial::Unreachable) | None) if attempt >= MAX_ATTEMPTS => {
            Decision::GiveUp(format!(
                "port {port} is taken by a program that does not answer as a Lumo bridge; choose another with --control-port"
            ))
        }
        (Bind::InUse, _) => Decision::RetryAfter(backoff(attempt, pid)),
    }
}

/// 50 ms growing to 800 ms, plus up to 49 ms from the pid.
fn backoff(attempt: u32, pid: u32) -> Duration {
    let base = 50u64 << attempt.min(4);
    Duration::from_millis(base + u64::from(pid % 50))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binder_owns() {
        assert_eq!(elect(&Bind::Bound, None, 0, 1, 9), Decision::Own);
        // Even if a stale dial result is around.
        assert_eq!(
            elect(&Bind::Bound, Some(&Dial::Unreachable), 5, 1, 9),
            Decision::Own
        );
    }

    #[test]
    fn a_second_bridge_forwards_when_the_owner_accepts() {
        assert_eq!(
            elect(&Bind::InUse, Some(&Dial::Accepted), 0, 1, 9),
            Decision::Forward
        );
    }

    #[test]
    fn an_exiting_owner_means_retry_then_take_over() {
        // The owner's port is still held while it exits: retry, with backoff spread by pid.
        let a = elect(&Bind::InUse, Some(&Dial::Unreachable), 0, 1, 9);
        let b = elect(&Bind::InUse, Some(&Dial::Unreachable), 0, 2, 9);
        assert!(matches!(a, Decision::RetryAfter(_)));
        assert_ne!(a, b, "two forwarders do not retry in lockstep");
        let late = elect(&Bind::InUse, None, 10, 1, 9);
        assert_eq!(late, Decision::RetryAfter(Duration::from_millis(801)));
        // The next round, the port is free: the forwarder takes over.
        assert_eq!(elect(&Bind::Bound, None, 1, 1, 9), Decision::Own);
    }

    #[test]
    fn a_foreign_program_on_the_port_is_given_up_on_with_a_reason() {
        let d = elect(
            &Bind::InUse,
            Some(&Dial::Unreachable),
            MAX_ATTEMPTS,
            1,
            4242,
        );
        match d {
            Decision::GiveUp(m) => assert!(m.contains("4242") && m.contains("--control-port")),
            other => panic!("{other:?}"),
        }
    }

    /// A bridge of another state directory (a desktop client and a terminal that see different
    /// XDG_RUNTIME_DIRs) holds the port: waited for a while (a new owner writes its token a
    /// moment after binding), then named for what it is, not as a foreign program.
    #[test]
    fn no_control_token_here_is_retried_then_named_with_the_directory() {
        let none = Dial::NoToken("/run/user/1000/lumo-userscripts".into());
        assert!(matches!(
            elect(&Bind::InUse, Some(&none), 3, 1, 9),
            Decision::RetryAfter(_)
        ));
        match elect(&Bind::InUse, Some(&none), MAX_ATTEMPTS, 1, 4242) {
            Decision::GiveUp(m) => {
                assert!(
                    m.contains("no control token in /run/user/1000/lumo-userscripts"),
                    "{m}"
                );
                assert!(
                    m.contains("--state-dir") && !m.contains("does not answer"),
                    "{m}"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_lasting_refusal_or_a_bind_error_is_final() {
        let refused = Dial::Refused("wrong token".into());
        assert!(matches!(
            elect(&Bind::InUse, Some(&refused), 0, 1, 9),
            Decision::RetryAfter(_)
        ));
        assert!(matches!(
            elect(&Bind::InUse, Some(&refused), MAX_ATTEMPTS, 1, 9),
            Decision::GiveUp(m) if m.contains("wrong token")
        ));
        assert!(matches!(
            elect(&Bind::Failed("permission denied".into()), None, 0, 1, 9),
            Decision::GiveUp(m) if m.contains("permission denied")
        ));
    }
}
