//! `script_runs`: what installed scripts did on real page loads, as their run reports recorded
//! it (`scripts::runs`, filled by the userscript channel). A read: never prompts, never
//! rate-limited, not audited.

use super::result::{success, ErrorCode, ToolError};
use crate::env::Env;
use crate::provider::Provider;
use crate::scripts::record::is_uuid;
use crate::scripts::runs;
use serde::Deserialize;
use serde_json::{json, Value};

pub const NAME: &str = "script_runs";
/// Runs returned per call, newest first (`more` says when there were more).
pub const MAX_RETURNED: usize = 100;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawArgs {
    uuid: Option<String>,
    since: Option<u64>,
    errors_only: Option<bool>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RunsArgs {
    pub uuid: Option<String>,
    pub since: Option<u64>,
    pub errors_only: bool,
}

fn invalid(why: impl std::fmt::Display) -> ToolError {
    ToolError::new(
        ErrorCode::InvalidArguments,
        format!("invalid arguments for {NAME}: {why}"),
    )
}

pub fn parse(args: &Value) -> Result<RunsArgs, ToolError> {
    let a = RawArgs::deserialize(args).map_err(invalid)?;
    if let Some(u) = &a.uuid {
        if !is_uuid(u) {
            return Err(invalid(format!(
                "uuid {:?} is not a script uuid (list_scripts shows them)",
                crate::text::ellipsize(u, 40)
            )));
        }
    }
    Ok(RunsArgs {
        uuid: a.uuid,
        since: a.since,
        errors_only: a.errors_only.unwrap_or(false),
    })
}

pub async fn run<E: Env>(p: &Provider<E>, args: &Value) -> Result<Value, ToolError> {
    let a = parse(args)?;
    let storage = |e: crate::env::EnvError| {
        ToolError::new(
            ErrorCode::StorageError,
            format!("could not read run reports: {e}"),
        )
    };
    let snapshot = p.scripts().await.map_err(|e| {
        ToolError::new(
            ErrorCode::StorageError,
            format!("could not read scripts: {e}"),
        )
    })?;
    let uuids: Vec<String> = match &a.uuid {
        Some(u) => {
            let live = snapshot.records.iter().any(|r| &r.uuid == u);
            let trashed = !live
                && crate::scripts::trash::contains(&p.env, u)
                    .await
                    .unwrap_or(false);
            if !live && !trashed {
                return Err(ToolError::new(
                    ErrorCode::NotFound,
                    format!("no script with uuid {u} (list_scripts shows them)"),
                ));
            }
            vec![u.clone()]
        }
        None => snapshot.records.iter().map(|r| r.uuid.clone()).collect(),
    };
    let rings = p.run_rings(&uuids).await.map_err(storage)?;
    let (selected, more) = runs::select(&rings, a.since, a.errors_only, MAX_RETURNED);
    let cursor = selected
        .iter()
        .map(runs::seq_of)
        .max()
        .or(a.since)
        .unwrap_or(0);
    let dropped = rings
        .iter()
        .map(|r| r.dropped)
        .chain(uuids.iter().map(|u| p.runs_dropped_pending(u)))
        .fold(0u64, u64::saturating_add);
    let errors = selected
        .iter()
        .filter(|r| r.get("ok") == Some(&Value::Bool(false)))
        .count();
    let text = if selected.is_empty() {
        format!(
            "No runs{}{}. A script reports a run each time it runs on a page load (after write_script, load a page its rules match; pages open before the write run the old code until reloaded).",
            if a.errors_only { " with errors" } else { "" },
            if a.since.is_some() { " since that cursor" } else { "" },
        )
    } else {
        format!(
            "{} run(s), {errors} with an error, newest first{}. Pass cursor as since to get only newer runs.",
            selected.len(),
            match (more, a.since.is_some()) {
                (false, _) => "",
                (true, true) => " (more exist after these: pass cursor as since for the next ones)",
                (true, false) => " (more exist: these are the newest; narrow with uuid, or page from an earlier cursor with since)",
            },
        )
    };
    Ok(success(
        text,
        json!({ "runs": selected, "cursor": cursor, "more": more, "droppedByRateLimit": dropped }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_strict() {
        assert_eq!(
            parse(&json!({})).unwrap(),
            RunsArgs {
                uuid: None,
                since: None,
                errors_only: false
            }
        );
        assert!(parse(&json!({"uuid": "x"})).is_err());
        assert!(parse(&json!({"since": -1})).is_err());
        assert!(parse(&json!({"since": "5"})).is_err());
        assert!(parse(&json!({"other": 1})).is_err());
        assert!(
            parse(&json!({"errorsOnly": true, "since": 3}))
                .unwrap()
                .errors_only
        );
    }
}
