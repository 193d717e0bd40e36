//! A stored script's record: everything but the source, which is stored under its own key so
//! that listing never loads sources.

use super::metadata::Metadata;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Provenance of a change made from the extension's own pages.
pub const BY_USER: &str = "user";

/// The audit log's caller for what the provider does by itself (a script's 30 days in the
/// trash over): no colon, not 32 letters, so never an agent's id or the bridge's key.
pub const BY_PROVIDER: &str = "lumo";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScriptRecord {
    pub uuid: String,
    pub metadata: Metadata,
    pub enabled: bool,
    /// Starts at 1 and grows by one with every change; writers pass the revision they read.
    pub revision: u64,
    pub created_at: f64,
    pub updated_at: f64,
    /// The caller's extension id, or [`BY_USER`].
    pub created_by: String,
    pub updated_by: String,
    /// Through which tool (`write_script`, …) or page (`options`, `popup`) the last change came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_via: Option<String>,
    /// sha256 (hex) of the source: lets a reviewer's decision be checked against what is stored.
    pub sha256: String,
    pub size: usize,
    /// The `@require`/`@resource` files this version loads, as fetched when it was written
    /// (`gm::assets`; the bytes are stored once per sha256).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assets: Vec<crate::gm::assets::Asset>,
}

impl ScriptRecord {
    /// The listing form: no source.
    pub fn summary(&self) -> Value {
        let m = &self.metadata;
        json!({
            "uuid": self.uuid,
            "name": m.name,
            "namespace": m.namespace,
            "version": m.version,
            "description": m.description,
            "enabled": self.enabled,
            "matches": m.matches,
            "excludeMatches": m.exclude_matches,
            "includeGlobs": m.include_globs,
            "excludeGlobs": m.exclude_globs,
            "runAt": m.run_at,
            "noframes": m.no_frames,
            "grants": m.grants,
            "connects": m.connects,
            "requires": m.requires,
            "assets": self.assets,
            "revision": self.revision,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
            "createdBy": self.created_by,
            "updatedBy": self.updated_by,
            "updatedVia": self.updated_via,
        })
    }

    /// The full form, with source and metadata.
    pub fn full(&self, source: &str, diagnostics: Value) -> Value {
        let mut v = self.summary();
        if let Some(o) = v.as_object_mut() {
            o.insert("source".into(), source.into());
            o.insert("sha256".into(), self.sha256.clone().into());
            o.insert(
                "metadata".into(),
                serde_json::to_value(&self.metadata).unwrap_or(Value::Null),
            );
            o.insert("diagnostics".into(), diagnostics);
        }
        v
    }

    /// The identity users of userscript managers expect to be unique.
    pub fn identity(&self) -> (Option<&str>, &str) {
        (
            self.metadata.namespace.as_deref(),
            self.metadata.name.as_str(),
        )
    }
}

/// A lowercase RFC 4122 uuid, as this provider creates them.
pub fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_digit() || (b'a'..=b'f').contains(c),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_shape() {
        assert!(is_uuid("123e4567-e89b-42d3-a456-426614174000"));
        assert!(!is_uuid("123E4567-e89b-42d3-a456-426614174000"));
        assert!(!is_uuid("123e4567e89b42d3a456426614174000"));
        assert!(!is_uuid("123e4567-e89b-42d3-a456-42661417400"));
        assert!(!is_uuid(""));
        assert!(!is_uuid("ééééééééé-e89b-42d3-a456-426614174"));
    }
}
