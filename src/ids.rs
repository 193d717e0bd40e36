//! Extension ids. [`is_extension_id`] is the one and only validator (contract invariant): every
//! input path — `sender.id`, `client.id`, allowlist entries, ids typed into the options page —
//! goes through [`ExtensionId::parse`], which calls it.
#![warn(clippy::must_use_candidate)] // pure decisions: a result dropped is a bug

use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;

/// `/^[a-p]{32}$/`: Chrome's alphabet for extension ids (hex digits mapped 0-f → a-p).
#[must_use]
pub fn is_extension_id(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|b| (b'a'..=b'p').contains(&b))
}

/// A string known to pass [`is_extension_id`]. The only way to build one is `parse` (or serde,
/// which calls it), so holding an `ExtensionId` is proof of validation.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct ExtensionId(String);

impl ExtensionId {
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        is_extension_id(s).then(|| ExtensionId(s.to_owned()))
    }

    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ExtensionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ExtensionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ExtensionId({})", self.0)
    }
}

impl<'de> Deserialize<'de> for ExtensionId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ExtensionId::parse(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("not an extension id: {s:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_only_32_letters_a_to_p() {
        assert!(is_extension_id("imliakfdgonldkmaddnhnniclbhiobpo"));
        assert!(is_extension_id(&"a".repeat(32)));
        assert!(is_extension_id(&"p".repeat(32)));
        assert!(!is_extension_id(&"q".repeat(32)));
        assert!(!is_extension_id(&"a".repeat(31)));
        assert!(!is_extension_id(&"a".repeat(33)));
        assert!(!is_extension_id(&"A".repeat(32)));
        assert!(!is_extension_id(""));
        assert!(!is_extension_id("imliakfdgonldkmaddnhnniclbhiob0o"));
        // 32 bytes but multi-byte characters: must not pass on length alone.
        assert!(!is_extension_id(&"é".repeat(16)));
    }

    #[test]
    fn deserialize_validates() {
        let ok: Result<ExtensionId, _> =
            serde_json::from_str("\"imliakfdgonldkmaddnhnniclbhiobpo\"");
        assert_eq!(
            ok.map(|id| id.as_str().to_owned()).ok().as_deref(),
            Some("imliakfdgonldkmaddnhnniclbhiobpo")
        );
        let bad: Result<ExtensionId, _> = serde_json::from_str("\"not-an-id\"");
        assert!(bad.is_err());
    }
}
