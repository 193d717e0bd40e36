//! Tool calls. [`call`] is the one place every check happens, in one fixed order:
//!
//! 1. **authorized** — the policy is re-read from storage; endpoint off or caller not on the
//!    allowlist refuses the call and closes the caller's ports;
//! 2. **known tool** — else JSON-RPC −32602;
//! 3. **write allowed** — write tools only: read-only mode refuses with WRITE_DISABLED (403);
//! 4. **valid arguments** — strict schemas; a refusal here does not spend a rate-limit slot;
//! 5. **rate limit** — write tools only: 30 per 60 s sliding window per caller;
//! 6. **review** — write tools only, when the review switch is on;
//! 7. **execute** — under the provider's write lock;
//! 8. **audit** — every write-tool attempt from step 3 on, whatever its result; a write that
//!    runs is journaled write-ahead with the script it stores (see `guard::audit`).

mod args;
pub mod catalog;
mod history;
pub mod limits;
mod read;
pub mod result;
mod review_request;
mod script_runs;
mod status;
mod try_script;
mod write;

use crate::caller::Caller;
use crate::env::Env;
use crate::guard::audit::Entry;
use crate::guard::digest::digest_hex;
use crate::guard::review::{Decision, REVIEW_TIMEOUT_MS};
use crate::policy::{Access, Policy};
use crate::provider::{Provider, Told};
use catalog::ToolDef;
use result::{ErrorCode, ToolError};
use serde_json::Value;

pub use args::WriteArgs;
pub use try_script::MAX_TRY_WORLDS;
pub(crate) use write::run_write;

#[derive(Debug, PartialEq)]
pub enum CallOutcome {
    /// The `tools/call` result (success or `isError`).
    Result(Value),
    /// The caller is no longer authorized: answer with this `isError` result, then close every
    /// port of the caller.
    AccessLost(Value),
    UnknownTool,
}

/// Who is calling, on which port, with which JSON-RPC id.
pub struct CallCtx<'a> {
    pub caller: &'a Caller,
    pub session: u64,
    pub rpc_id: &'a Value,
}

/// Where a finished tool call went, for the audit entry.
pub struct Executed {
    pub result: Result<Value, ToolError>,
    pub target: Option<String>,
}

pub async fn call<E: Env>(
    p: &Provider<E>,
    ctx: &CallCtx<'_>,
    name: &str,
    args: Value,
) -> CallOutcome {
    let caller = ctx.caller;
    let policy = p.policy().await;
    let access = caller.access(&policy);
    let def = catalog::find(name);
    if access != Access::Granted {
        let refused = ToolError::new(ErrorCode::Unauthorized, access.reason());
        // Every write attempt is on the record, also one that arrived as access ended.
        if let Some(def) = def.filter(|d| d.is_write()) {
            p.audit(&Entry {
                at: p.env.now_ms(),
                tool: def.name.to_owned(),
                caller: caller.key(),
                result: refused.code.as_str().to_owned(),
                target: named_target(&args),
                digest: digest_hex(&args),
                unchanged: false,
                from_trash: false,
                revision: None,
                purged: None,
                name: None,
                count: None,
            })
            .await;
        }
        return CallOutcome::AccessLost(refused.to_result());
    }
    let Some(def) = def else {
        return CallOutcome::UnknownTool;
    };
    if def.name == script_runs::NAME {
        let result = script_runs::run(p, &args).await;
        return CallOutcome::Result(result.unwrap_or_else(|e| e.to_result()));
    }
    if !def.is_write() {
        let result = match args::parse_read(def, &args) {
            Ok(read) => read::run_read(p, &caller.key(), &policy, read).await,
            Err(e) => Err(e),
        };
        return CallOutcome::Result(result.unwrap_or_else(|e| e.to_result()));
    }
    let digest = digest_hex(&args);
    let entry = Entry {
        at: p.env.now_ms(),
        tool: def.name.to_owned(),
        caller: caller.key(),
        result: String::new(),
        target: None,
        digest: digest.clone(),
        unchanged: false,
        from_trash: false,
        revision: None,
        purged: None,
        name: None,
        count: None,
    };
    // A write that ran was audited under the write lock, write-ahead; a refusal is audited here.
    // An approved write tells the review surface what it did.
    let mut told = Told::nobody();
    let ran = if def.name == try_script::NAME {
        try_script::call(p, ctx, &policy, &args, &digest, &entry, &mut told).await
    } else {
        write(p, ctx, &policy, def, args, &entry, &mut told).await
    };
    let done = match ran {
        Ok(ran) => ran,
        Err(refused) => {
            p.audit(&finished(&entry, &refused, p.env.now_ms())).await;
            refused
        }
    };
    told.tell(&done.result);
    if let Some(id) = told.review() {
        p.review_recorded(id).await;
    }
    CallOutcome::Result(done.result.unwrap_or_else(|e| e.to_result()))
}

/// The audit entry of a finished write attempt.
pub(crate) fn finished(base: &Entry, done: &Executed, at: f64) -> Entry {
    Entry {
        at,
        result: match &done.result {
            Ok(_) => "ok".to_owned(),
            Err(e) => e.code.as_str().to_owned(),
        },
        target: done.target.clone(),
        ..base.clone()
    }
}

/// Why a bridge caller may not write (or try): the link is read-only by the bridge's flag or by
/// the user's consent ([`crate::provider::BridgeAuth::readonly`]).
pub(super) const BRIDGE_READ_ONLY: &str = "the local bridge is read-only: it runs with --readonly, or the user connected it while a read-only bridge held its port (the user's new Connect click on its link allows writes)";

/// The uuid a write names, if it names a valid one: audited even when the call is refused.
fn named_target(args: &Value) -> Option<String> {
    args.get("uuid")
        .and_then(Value::as_str)
        .filter(|u| crate::scripts::record::is_uuid(u))
        .map(str::to_owned)
}

/// Steps 3–7 for a write tool: `Err` when refused before it ran (not audited yet), `Ok` when
/// it ran (audited write-ahead by [`run_write`]).
async fn write<E: Env>(
    p: &Provider<E>,
    ctx: &CallCtx<'_>,
    policy: &Policy,
    def: &ToolDef,
    args: Value,
    entry: &Entry,
    told: &mut Told,
) -> Result<Executed, Executed> {
    let refused = |e: ToolError| {
        Err(Executed {
            result: Err(e),
            target: named_target(&args),
        })
    };
    if ctx.caller.readonly() {
        return refused(ToolError::new(
            ErrorCode::WriteDisabled,
            format!("writes are turned off: {BRIDGE_READ_ONLY}"),
        ));
    }
    if !policy.writes_enabled {
        return refused(ToolError::new(
            ErrorCode::WriteDisabled,
            "writes are turned off: the user has put Lumo Userscripts in read-only mode",
        ));
    }
    let mut parsed = match args::parse_write(def, &args) {
        Ok(w) => w,
        Err(e) => return refused(e),
    };
    let mut slot = match p.admit_write_deferred(&ctx.caller.key()).await {
        Ok(slot) => Some(slot),
        Err(e) => return refused(e.into()),
    };
    let reviewed = policy.review_writes && !p.is_waived(ctx.session);
    // The files the review fetched and showed: the approved write takes exactly these.
    let mut fetched = None;
    if reviewed {
        // The slot is recorded before the user is asked (minutes, maybe).
        if let Some(s) = slot.take() {
            if let Err(e) = s.await {
                return refused(e.into());
            }
        }
        let digest = &entry.digest;
        let request =
            match review_request::review_request(p, ctx, policy, def, &parsed, digest).await {
                Ok(r) => r,
                Err(e) => return refused(e),
            };
        let base = request.base_revision;
        fetched = request.fetched.clone();
        let decision = match p.await_review(request, ctx.rpc_id.clone()).await {
            Ok((d, t)) => {
                *told = t;
                d
            }
            Err(e) => return refused(e.into()),
        };
        // The wait may have been long: the user may have withdrawn access or turned writes off
        // meanwhile, and that wins over an approval given in the popup.
        if let Err(e) = after_review(p, ctx, decision, "write", "nothing changed").await {
            return refused(e);
        }
        parsed = parsed.pinned(base);
    }
    let by = ctx.caller.key();
    let actor = crate::scripts::store::Actor {
        by: &by,
        via: Some(def.name),
    };
    // Unreviewed, the slot is stored beside the write's reads: one round trip less, and the
    // write's first change still waits for it. (One call of `run_write` either way: each call
    // site is a copy of its state machine in the wasm.)
    let (tx, rx) = futures::channel::oneshot::channel();
    let gate = slot.is_some().then_some(rx);
    let record = async move {
        if let Some(s) = slot {
            let _ = tx.send(s.await.map_err(|e| e.to_string()));
        }
    };
    let still = || -> std::pin::Pin<Box<dyn std::future::Future<Output = _> + '_>> {
        Box::pin(still_allowed(p, ctx, reviewed, Waited::Write))
    };
    // A reviewed write is dated at the decision: its entry then tells a stopped worker's stub
    // of this call apart from an earlier call's with the same arguments (`reviews`).
    let entry = Entry {
        at: if reviewed { p.env.now_ms() } else { entry.at },
        ..entry.clone()
    };
    let done = write::run_write(p, actor, parsed, Some(entry), gate, Some(&still), fetched);
    let ((), done) = futures::join!(record, done);
    Ok(done)
}

/// What the user's decision on a review means for a `what` ("write", "try"): go on (approved,
/// and still granted as the policy stands now), or the refusal, ending in `nothing`.
pub(super) async fn after_review<E: Env>(
    p: &Provider<E>,
    ctx: &CallCtx<'_>,
    d: Decision,
    what: &str,
    nothing: &str,
) -> Result<(), ToolError> {
    let off = format!("writes were turned off while this {what} waited for review; {nothing}");
    let (code, message) = match d {
        Decision::Approve { .. } => return still_granted(p, ctx, &off).await.map(drop),
        Decision::WritesOff => (ErrorCode::WriteDisabled, off),
        Decision::Deny => (
            ErrorCode::UserRejected,
            format!("the user rejected this {what}; {nothing}"),
        ),
        Decision::Expired => (
            ErrorCode::ReviewExpired,
            format!(
                "the user did not decide within {} s of the request; {nothing}",
                REVIEW_TIMEOUT_MS / 1000.0
            ),
        ),
        // A session closed by a revocation (the caller removed, agent access off) cancels its
        // reviews too: that is the reason, as `still_allowed` says it.
        Decision::Cancelled => match ctx.caller.access(&p.policy().await) {
            Access::Granted => (
                ErrorCode::Cancelled,
                format!("the request was cancelled, or its session closed, before the user decided; {nothing}"),
            ),
            denied => (ErrorCode::Unauthorized, denied.reason().to_string()),
        },
    };
    Err(ToolError::new(code, message))
}

/// After a wait (the user's review, the write lock): the caller still granted and writes still
/// on, as the policy stands now (returned); `writes_off` says what writes being off stopped.
pub(super) async fn still_granted<E: Env>(
    p: &Provider<E>,
    ctx: &CallCtx<'_>,
    writes_off: &str,
) -> Result<Policy, ToolError> {
    let now = p.policy().await;
    let access = ctx.caller.access(&now);
    if access != Access::Granted {
        return Err(ToolError::new(ErrorCode::Unauthorized, access.reason()));
    }
    if !now.writes_enabled {
        return Err(ToolError::new(ErrorCode::WriteDisabled, writes_off));
    }
    Ok(now)
}

/// What waited its turn, for [`still_allowed`]'s messages.
#[derive(Clone, Copy)]
pub(super) enum Waited {
    /// A write, behind the write lock.
    Write,
    /// A `try_script`, behind the tab's try lock.
    Try,
}

/// Whether a write (or try) admitted earlier may still begin once it has its turn
/// (`run_write`, `try_script::run`): its session open, its caller granted, writes on, and
/// review off unless the user reviewed it (or allowed its session). Writes queue behind the
/// write lock, each for as long as its `@require` fetches take, and tries behind the one
/// running in their tab, each up to its timeout: a switch the user flipped meanwhile stops
/// those that have not begun.
pub(super) async fn still_allowed<E: Env>(
    p: &Provider<E>,
    ctx: &CallCtx<'_>,
    reviewed: bool,
    waited: Waited,
) -> Result<(), ToolError> {
    let [cancelled, closed, off, review] = match waited {
        Waited::Write => [
            "the caller cancelled this write while it waited (its turn, or its @require files); nothing changed",
            "the session was closed while this write waited (its turn, or its @require files); nothing changed",
            "writes were turned off while this write waited (its turn, or its @require files); nothing changed",
            "the user turned review on while this write waited (its turn, or its @require files); nothing changed (call again: the user will be asked)",
        ],
        Waited::Try => [
            "the caller cancelled this try while it waited for the one before it in that tab; nothing ran",
            "the session was closed while this try waited for the one before it in that tab; nothing ran",
            "writes were turned off while this try waited for the one before it in that tab; nothing ran",
            "the user turned review on while this try waited for the one before it in that tab; nothing ran (call again: the user will be asked)",
        ],
    };
    if !p.session_open(ctx.session) {
        // Closed by a revocation (the caller removed, agent access off): that is the reason;
        // else the host or the user's Disconnect ended it, and the write is cancelled.
        let access = ctx.caller.access(&p.policy().await);
        return Err(match access {
            Access::Granted => ToolError::new(ErrorCode::Cancelled, closed),
            denied => ToolError::new(ErrorCode::Unauthorized, denied.reason()),
        });
    }
    // MCP: the receiver should stop a cancelled request; this one has not begun.
    if p.inflight.is_cancelled(ctx.session, ctx.rpc_id) {
        return Err(ToolError::new(ErrorCode::Cancelled, cancelled));
    }
    let now = still_granted(p, ctx, off).await?;
    if now.review_writes && !reviewed && !p.is_waived(ctx.session) {
        return Err(ToolError::new(ErrorCode::ReviewRequired, review));
    }
    Ok(())
}
