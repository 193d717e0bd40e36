//! Tool arguments: strict parsing (unknown properties, wrong types and oversized values are
//! refused with a readable reason, before anything runs) into typed reads and writes.

use super::catalog::{
    ToolDef, MAX_PAGE, MAX_PATCH_EDITS, MAX_QUERY_CHARS, MAX_SOURCE_BYTES, MAX_URL_BYTES,
};
use super::result::{ErrorCode, ToolError};
use crate::scripts::record::is_uuid;
use crate::scripts::store::Edit;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListArgs {
    pub(super) enabled: Option<bool>,
    pub(super) url: Option<String>,
    pub(super) query: Option<String>,
    pub(super) cursor: Option<String>,
    pub(super) limit: Option<u64>,
    pub(super) deleted: Option<bool>,
}

/// `list_scripts`' cursor: the last script of the page it ended, its `updatedAt` (the bits of
/// the `f64`, 16 hex digits: 53 characters in all, whatever the time) and uuid, so the next page
/// starts after it in `by_recency`'s order (`store::recency_after`).
pub(super) struct ListCursor {
    updated_at: f64,
    uuid: String,
}

impl ListCursor {
    pub(super) fn parse(text: &str) -> Option<Self> {
        let (bits, uuid) = text.split_once('~')?;
        if bits.len() != 16 {
            return None;
        }
        let bits = u64::from_str_radix(bits, 16).ok()?;
        crate::scripts::record::is_uuid(uuid).then(|| ListCursor {
            updated_at: f64::from_bits(bits),
            uuid: uuid.to_owned(),
        })
    }

    /// Where the page after this cursor's script starts in `records`, wherever that script is
    /// now: an offset skipped scripts (and gave one twice) when a script was deleted or written
    /// between two pages.
    pub(super) fn start_in(&self, records: &[&crate::scripts::record::ScriptRecord]) -> usize {
        records
            .iter()
            .position(|r| crate::scripts::store::recency_after(r, self.updated_at, &self.uuid))
            .unwrap_or(records.len())
    }

    pub(super) fn of(r: &crate::scripts::record::ScriptRecord) -> String {
        format!("{:016x}~{}", r.updated_at.to_bits(), r.uuid)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UuidArgs {
    uuid: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GetArgs {
    uuid: String,
    revision: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RestoreArgs {
    uuid: String,
    revision: u64,
    current_revision: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SourceArgs {
    source: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UrlArgs {
    url: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteScriptArgs {
    source: String,
    uuid: Option<String>,
    revision: Option<u64>,
    enabled: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PatchArgs {
    uuid: String,
    revision: u64,
    edits: Vec<Edit>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SetEnabledArgs {
    uuid: String,
    enabled: bool,
    revision: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeleteArgs {
    uuid: String,
    revision: Option<u64>,
}

pub(super) enum ReadArgs {
    Status,
    List(ListArgs),
    Get(String, Option<u64>),
    Revisions(String),
    Validate(String),
    Match(String),
}

/// A parsed write, ready for the guards and then the store.
#[derive(Debug, Clone, PartialEq)]
pub enum WriteArgs {
    Create {
        source: String,
        enabled: bool,
    },
    Replace {
        uuid: String,
        revision: u64,
        source: String,
        enabled: Option<bool>,
    },
    Patch {
        uuid: String,
        revision: u64,
        edits: Vec<Edit>,
    },
    SetEnabled {
        uuid: String,
        enabled: bool,
        revision: Option<u64>,
    },
    Delete {
        uuid: String,
        revision: Option<u64>,
    },
    /// Brings back `revision` of a live or trashed script that is at `current_revision`.
    Restore {
        uuid: String,
        revision: u64,
        current_revision: u64,
        /// Only a live script: one deleted since it was read is a CONFLICT, not brought back
        /// (an Undo of an edit must not undo a delete; `restore_script` may restore from the
        /// trash, so it leaves this off).
        live_only: bool,
        /// Keep the script's on/off state and bring back only the revision's code (the user's
        /// History page: a script the user turned off must not come back on because an older
        /// version was on). Off for an Undo (undoing a switch is the point) and the agent's
        /// restore, whose review says the state it restores.
        keep_enabled: bool,
    },
}

impl WriteArgs {
    /// The tool this write is, for the provenance of the version it stores.
    pub fn tool(&self) -> &'static str {
        match self {
            WriteArgs::Create { .. } | WriteArgs::Replace { .. } => "write_script",
            WriteArgs::Patch { .. } => "patch_script",
            WriteArgs::SetEnabled { .. } => "set_script_enabled",
            WriteArgs::Delete { .. } => "delete_script",
            WriteArgs::Restore { .. } => "restore_script",
        }
    }

    /// After the user approved a write reviewed at revision `base`, the write must apply to that
    /// revision and no other: a change in between is a CONFLICT, not a silent overwrite. A
    /// restore reviewed with a live script (`base`) must find it still live: a delete keeps
    /// the revision, and the review never said the restore would bring it out of the trash.
    #[must_use]
    pub fn pinned(self, base: Option<u64>) -> Self {
        match self {
            WriteArgs::Restore {
                uuid,
                revision,
                current_revision,
                live_only,
                keep_enabled,
            } => WriteArgs::Restore {
                uuid,
                revision,
                current_revision,
                live_only: live_only || base.is_some(),
                keep_enabled,
            },
            WriteArgs::SetEnabled {
                uuid,
                enabled,
                revision,
            } => WriteArgs::SetEnabled {
                uuid,
                enabled,
                revision: revision.or(base),
            },
            WriteArgs::Delete { uuid, revision } => WriteArgs::Delete {
                uuid,
                revision: revision.or(base),
            },
            other => other,
        }
    }

    pub fn target(&self) -> Option<&str> {
        match self {
            WriteArgs::Create { .. } => None,
            WriteArgs::Replace { uuid, .. }
            | WriteArgs::Patch { uuid, .. }
            | WriteArgs::SetEnabled { uuid, .. }
            | WriteArgs::Delete { uuid, .. }
            | WriteArgs::Restore { uuid, .. } => Some(uuid),
        }
    }
}

pub(super) fn invalid(tool: &str, why: impl std::fmt::Display) -> ToolError {
    ToolError::new(
        ErrorCode::InvalidArguments,
        format!("invalid arguments for {tool}: {why}"),
    )
}

fn parse<T: DeserializeOwned>(def: &ToolDef, args: &Value) -> Result<T, ToolError> {
    T::deserialize(args).map_err(|e| invalid(def.name, e))
}

fn check_uuid(def: &ToolDef, uuid: &str) -> Result<(), ToolError> {
    if is_uuid(uuid) {
        Ok(())
    } else {
        Err(invalid(
            def.name,
            format!(
                "uuid {:?} is not a script uuid (list_scripts shows them)",
                crate::text::ellipsize(uuid, 40)
            ),
        ))
    }
}

fn check_source(source: &str) -> Result<(), ToolError> {
    if source.len() > MAX_SOURCE_BYTES {
        return Err(ToolError::new(
            ErrorCode::PayloadTooLarge,
            format!(
                "the source is {} bytes, over the {MAX_SOURCE_BYTES}-byte limit",
                source.len()
            ),
        ));
    }
    Ok(())
}

fn check_revision(def: &ToolDef, r: Option<u64>) -> Result<(), ToolError> {
    match r {
        Some(0) => Err(invalid(def.name, "revision starts at 1")),
        _ => Ok(()),
    }
}

fn check_url(url: &str) -> Result<(), ToolError> {
    if url.len() > MAX_URL_BYTES {
        return Err(ToolError::new(
            ErrorCode::PayloadTooLarge,
            format!("the URL is over {MAX_URL_BYTES} bytes"),
        ));
    }
    let scheme_ok = url.split_once(':').is_some_and(|(s, _)| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'-' || b == b'.')
    });
    if !scheme_ok {
        return Err(ToolError::new(
            ErrorCode::InvalidArguments,
            "url must be an absolute URL such as https://example.com/",
        ));
    }
    Ok(())
}

pub(super) fn parse_read(def: &ToolDef, args: &Value) -> Result<ReadArgs, ToolError> {
    Ok(match def.name {
        "status" => {
            parse::<NoArgs>(def, args)?;
            ReadArgs::Status
        }
        "list_scripts" => {
            let a: ListArgs = parse(def, args)?;
            match a.limit {
                Some(0) => return Err(invalid(def.name, "limit must be at least 1")),
                // An argument out of its schema's range, not a payload too large (R17: an agent
                // may read 413 as "the data is too big").
                Some(n) if n > MAX_PAGE as u64 => {
                    return Err(invalid(
                        def.name,
                        format!("limit {n} is over the page size of {MAX_PAGE}: ask for at most {MAX_PAGE}, and page on with nextCursor"),
                    ))
                }
                _ => {}
            }
            if let Some(u) = &a.url {
                check_url(u)?;
            }
            if a.query
                .as_ref()
                .is_some_and(|q| q.chars().count() > MAX_QUERY_CHARS)
            {
                return Err(ToolError::new(
                    ErrorCode::PayloadTooLarge,
                    format!("query is over {MAX_QUERY_CHARS} characters"),
                ));
            }
            if a.cursor
                .as_deref()
                .is_some_and(|c| ListCursor::parse(c).is_none())
            {
                return Err(invalid(
                    def.name,
                    "cursor must be a nextCursor value returned by list_scripts",
                ));
            }
            ReadArgs::List(a)
        }
        "get_script" => {
            let a: GetArgs = parse(def, args)?;
            check_uuid(def, &a.uuid)?;
            check_revision(def, a.revision)?;
            ReadArgs::Get(a.uuid, a.revision)
        }
        "list_revisions" => {
            let a: UuidArgs = parse(def, args)?;
            check_uuid(def, &a.uuid)?;
            ReadArgs::Revisions(a.uuid)
        }
        "validate_script" => {
            let a: SourceArgs = parse(def, args)?;
            check_source(&a.source)?;
            ReadArgs::Validate(a.source)
        }
        "match_url" => {
            let a: UrlArgs = parse(def, args)?;
            // The URL parser drops leading and trailing C0 controls and spaces (WHATWG), as an
            // address pasted with them is loaded.
            let url = a.url.trim_matches(|c: char| c <= ' ').to_owned();
            check_url(&url)?;
            ReadArgs::Match(url)
        }
        other => return Err(invalid(other, "not a read tool")),
    })
}

pub(super) fn parse_write(def: &ToolDef, args: &Value) -> Result<WriteArgs, ToolError> {
    Ok(match def.name {
        "write_script" => {
            let a: WriteScriptArgs = parse(def, args)?;
            check_source(&a.source)?;
            check_revision(def, a.revision)?;
            match (a.uuid, a.revision) {
                (None, None) => WriteArgs::Create {
                    source: a.source,
                    enabled: a.enabled.unwrap_or(true),
                },
                (Some(uuid), Some(revision)) => {
                    check_uuid(def, &uuid)?;
                    WriteArgs::Replace {
                        uuid,
                        revision,
                        source: a.source,
                        enabled: a.enabled,
                    }
                }
                (Some(_), None) => {
                    return Err(invalid(
                        def.name,
                        "updating needs revision: pass the revision you last read with get_script",
                    ))
                }
                (None, Some(_)) => {
                    return Err(invalid(
                        def.name,
                        "revision without uuid: to update, pass the script's uuid too",
                    ))
                }
            }
        }
        "patch_script" => {
            let a: PatchArgs = parse(def, args)?;
            check_uuid(def, &a.uuid)?;
            check_revision(def, Some(a.revision))?;
            if a.edits.is_empty() {
                return Err(invalid(def.name, "edits is empty"));
            }
            if a.edits.len() > MAX_PATCH_EDITS {
                return Err(ToolError::new(
                    ErrorCode::PayloadTooLarge,
                    format!(
                        "{} edits is over the limit of {MAX_PATCH_EDITS} per call",
                        a.edits.len()
                    ),
                ));
            }
            if let Some(i) = a.edits.iter().position(|e| e.search.is_empty()) {
                return Err(invalid(def.name, format!("edits[{i}].search is empty")));
            }
            let total: usize = a
                .edits
                .iter()
                .map(|e| e.search.len() + e.replace.len())
                .sum();
            if total > MAX_SOURCE_BYTES {
                return Err(ToolError::new(
                    ErrorCode::PayloadTooLarge,
                    format!("the edits are over {MAX_SOURCE_BYTES} bytes in all"),
                ));
            }
            WriteArgs::Patch {
                uuid: a.uuid,
                revision: a.revision,
                edits: a.edits,
            }
        }
        "set_script_enabled" => {
            let a: SetEnabledArgs = parse(def, args)?;
            check_uuid(def, &a.uuid)?;
            check_revision(def, a.revision)?;
            WriteArgs::SetEnabled {
                uuid: a.uuid,
                enabled: a.enabled,
                revision: a.revision,
            }
        }
        "delete_script" => {
            let a: DeleteArgs = parse(def, args)?;
            check_uuid(def, &a.uuid)?;
            check_revision(def, a.revision)?;
            WriteArgs::Delete {
                uuid: a.uuid,
                revision: a.revision,
            }
        }
        "restore_script" => parse_restore(def, args)?,
        other => return Err(invalid(other, "not a write tool")),
    })
}

fn parse_restore(def: &ToolDef, args: &Value) -> Result<WriteArgs, ToolError> {
    let a: RestoreArgs = parse(def, args)?;
    check_uuid(def, &a.uuid)?;
    check_revision(def, Some(a.revision))?;
    check_revision(def, Some(a.current_revision))?;
    Ok(WriteArgs::Restore {
        uuid: a.uuid,
        revision: a.revision,
        current_revision: a.current_revision,
        live_only: false,
        // The user's off switch holds: only the revision's code comes back, as the options
        // page's Restore does (R17: an agent's restore of an older revision turned back on a
        // script the user had turned off). set_script_enabled is the agent's way to switch.
        keep_enabled: true,
    })
}
