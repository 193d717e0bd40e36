//! What the review of a write shows: the write checked against the store now, and its
//! effects and diff from the current and proposed script.

use super::args::{invalid, WriteArgs};
use super::catalog::{ToolDef, MAX_SOURCE_BYTES};
use super::result::ToolError;
use super::CallCtx;
use crate::env::Env;
use crate::gm::asset_store::{self, Reviewed};
use crate::guard::effects::Version;
use crate::guard::review::{self, ReviewRequest, REVIEW_TIMEOUT_MS};
use crate::guard::review_files;
use crate::policy::Policy;
use crate::provider::Provider;
use crate::scripts::store::{self, ScriptError};

/// What the user reviews: checked against the store now, so a write that cannot succeed
/// (unknown uuid, stale revision, invalid metadata, a patch that does not apply) fails at once
/// instead of asking the user about it.
#[allow(clippy::too_many_lines)] // one arm per write tool, each short; a marked exception
pub(super) async fn review_request<E: Env>(
    p: &Provider<E>,
    ctx: &CallCtx<'_>,
    policy: &Policy,
    def: &ToolDef,
    w: &WriteArgs,
    digest: &str,
) -> Result<ReviewRequest, ToolError> {
    // The review ends 50 s after this, its files' fetching included: the client's request
    // timeout (60 s in the official SDKs) counts from its call, and the agent must hear why.
    let started = p.env.now_ms();
    // A restore's "before" is the live script (none when it comes back from the trash) and its
    // "after" the version it brings back.
    let (current, restored) = match w {
        WriteArgs::Restore {
            uuid,
            revision,
            current_revision,
            keep_enabled,
            ..
        } => {
            let (live, target) =
                super::history::preview(p, uuid, *revision, *current_revision, *keep_enabled)
                    .await?;
            (live, Some(target))
        }
        _ => match w.target() {
            Some(uuid) => (
                Some(
                    store::load_with_source(&p.env, uuid)
                        .await
                        .map_err(ToolError::from)?,
                ),
                None,
            ),
            None => (None, None),
        },
    };
    let restored_assets = restored.as_ref().map(|t| t.record.assets.clone());
    let check = |expected: u64| match &current {
        Some((r, _)) if r.revision != expected => {
            Err(ToolError::from(ScriptError::StaleRevision {
                expected,
                current: r.revision,
            }))
        }
        _ => Ok(()),
    };
    let meta_of = |src: &str| {
        store::validate(src, MAX_SOURCE_BYTES)
            .map(|(m, _)| m)
            .map_err(ToolError::from)
    };
    // The script as the write would leave it: (metadata, enabled, source); None when deleted.
    let proposed = match (w, &current) {
        (WriteArgs::Create { source, enabled }, _) => {
            Some((meta_of(source)?, *enabled, source.clone()))
        }
        (
            WriteArgs::Replace {
                revision,
                source,
                enabled,
                ..
            },
            Some((r, _)),
        ) => {
            check(*revision)?;
            Some((
                meta_of(source)?,
                enabled.unwrap_or(r.enabled),
                source.clone(),
            ))
        }
        (
            WriteArgs::Patch {
                revision, edits, ..
            },
            Some((r, old)),
        ) => {
            check(*revision)?;
            let new = store::apply_edits(old, edits, MAX_SOURCE_BYTES).map_err(ToolError::from)?;
            Some((meta_of(&new)?, r.enabled, new))
        }
        (
            WriteArgs::SetEnabled {
                enabled, revision, ..
            },
            Some((r, old)),
        ) => {
            if let Some(rev) = revision {
                check(*rev)?;
            }
            Some((r.metadata.clone(), *enabled, old.clone()))
        }
        (WriteArgs::Delete { revision, .. }, Some(_)) => {
            if let Some(rev) = revision {
                check(*rev)?;
            }
            None
        }
        (WriteArgs::Restore { .. }, _) => match restored {
            Some(t) => Some((meta_of(&t.source)?, t.record.enabled, t.source)),
            None => return Err(invalid(def.name, "no target")),
        },
        (_, None) => return Err(invalid(def.name, "no target")),
    };
    // The files the write would add, fetched now and shown: the approved write takes these bytes
    // (`Reviewed`), so a server cannot swap them between the review and the approval. A restore
    // plans from the revision it brings back, whose stored copies are read here to be shown.
    let before_assets = current.as_ref().map_or(&[][..], |(r, _)| &r.assets[..]);
    let before_grants = current
        .as_ref()
        .map_or(&[][..], |(r, _)| &r.metadata.grants[..]);
    let (files, fetched) = match (&proposed, w) {
        (None, _) | (_, WriteArgs::SetEnabled { .. }) => (Vec::new(), Reviewed::default()),
        (Some((meta, _, _)), _) => {
            let plan_from = match (&restored_assets, w) {
                (Some(a), _) => &a[..],
                (None, WriteArgs::Create { .. }) => &[][..],
                (None, _) => before_assets,
            };
            // Its place among the reviews that may wait, taken before anything is fetched.
            let _place = p.reserve_review(&ctx.caller.key(), files_at_most(meta))?;
            let before = review_files::shown_before(before_assets, before_grants, &meta.grants);
            let (new, fetched) = asset_store::fetch_for_review(&p.env, meta, plan_from, &before)
                .await
                .map_err(|e| ToolError::from(ScriptError::from(e)))?;
            (review_files::shown_all(&new, &meta.grants), fetched)
        }
    };
    let verb = match w {
        WriteArgs::Patch { .. } => "Edit",
        WriteArgs::Restore { .. } => "Restore",
        WriteArgs::SetEnabled { enabled: true, .. } => "Enable",
        WriteArgs::SetEnabled { enabled: false, .. } => "Disable",
        _ => "Replace",
    };
    let shown = review::describe(
        verb,
        current.as_ref().map(|(r, src)| Version {
            metadata: &r.metadata,
            enabled: r.enabled,
            source: src,
        }),
        proposed.as_ref().map(|(m, enabled, src)| Version {
            metadata: m,
            enabled: *enabled,
            source: src,
        }),
    );
    let now = p.env.now_ms();
    let caller_name = ctx.caller.review_name(policy);
    Ok(ReviewRequest {
        id: p.env.new_uuid(),
        caller: ctx.caller.key(),
        caller_name,
        session: ctx.session,
        tool: def.name.to_owned(),
        summary: shown.summary,
        effects: shown.effects,
        target: w.target().map(str::to_owned),
        target_name: current.as_ref().map(|(r, _)| r.metadata.name.clone()),
        base_revision: current.as_ref().map(|(r, _)| r.revision),
        diff_shown_lines: shown.diff.as_ref().map_or(0, |d| d.shown_lines),
        diff_total_lines: shown.diff.as_ref().map_or(0, |d| d.total_lines),
        diff_partial: shown.diff.as_ref().is_some_and(|d| d.is_partial()),
        diff: shown.diff.map(|d| d.text),
        created_at: now,
        expires_at: started + REVIEW_TIMEOUT_MS,
        digest: digest.to_owned(),
        seq: 0,
        sources: shown.sources,
        files,
        fetched: Some(std::rc::Rc::new(fetched)),
    })
}

/// The most bytes of files a script with `meta` may hold ([`crate::gm::assets`]' bounds).
fn files_at_most(meta: &crate::scripts::metadata::Metadata) -> usize {
    use crate::gm::assets::{MAX_ASSET_BYTES, MAX_SCRIPT_ASSET_BYTES};
    let n = meta.requires.len().saturating_add(meta.resources.len());
    n.saturating_mul(MAX_ASSET_BYTES)
        .min(MAX_SCRIPT_ASSET_BYTES)
}
