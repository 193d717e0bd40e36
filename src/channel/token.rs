//! The proof that a message on the userscript channel comes from the script it names.
//!
//! Chromium 156's `onUserScriptMessage` sender carries no `userScriptWorldId`, so the world cannot
//! tell us which script sent a message. Instead each registered script's code holds a token, put
//! there by the worker (inside a closure, never a global): `<uuid>.<revision>.<mac>`, where `mac`
//! is HMAC-SHA256 of `"<uuid>.<revision>"` under a key that exists only in the worker's storage
//! (`channel/key`), cut to 128 bits. The worker checks the mac and believes the uuid and revision
//! only then; what the rest of a message claims is never used to attribute it.
//!
//! Why derived and not random per script: the registration must be a pure function of the stored
//! script (reconcile compares Chrome's registration with the desired one), so a token derived
//! from (key, uuid, revision) is stable across worker restarts without a table to keep in step,
//! and it changes by itself with every new revision — the code of an older revision, still
//! running in an open tab, can no longer report. A lost key is replaced by a new one, and the next
//! reconcile re-registers every script with new tokens.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// Storage key (`chrome.storage.local`) of the channel key.
pub const KEY_STORAGE: &str = "channel/key";
/// The key's text: at least this many characters (two v4 uuids: 244 random bits).
pub const MIN_KEY_CHARS: usize = 64;
const MAX_KEY_CHARS: usize = 256;
/// Hex characters of the mac kept in a token (128 bits).
const MAC_HEX: usize = 32;
/// A token is at most this long: uuid (36) + revision (≤ 20) + mac (32) + two dots.
pub const MAX_TOKEN_CHARS: usize = 96;

/// The worker's secret. Only built from text long enough to be one.
#[derive(Clone, PartialEq, Eq)]
pub struct ChannelKey(String);

impl std::fmt::Debug for ChannelKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChannelKey(…)")
    }
}

impl ChannelKey {
    /// None unless `text` has the length of a key this worker made.
    pub fn parse(text: &str) -> Option<ChannelKey> {
        (MIN_KEY_CHARS..=MAX_KEY_CHARS)
            .contains(&text.len())
            .then(|| ChannelKey(text.to_owned()))
    }

    /// A new key from two fresh random uuids (the `Ids` source: `crypto.randomUUID`).
    pub fn from_uuids(a: &str, b: &str) -> Option<ChannelKey> {
        Self::parse(&format!("{a}{b}").replace('-', ""))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    fn mac(&self, uuid: &str, revision: u64) -> String {
        // HMAC accepts a key of any length: `new_from_slice` cannot fail.
        let Ok(mut m) = Hmac::<Sha256>::new_from_slice(self.0.as_bytes()) else {
            return String::new();
        };
        m.update(format!("{uuid}.{revision}").as_bytes());
        let mut hex = crate::guard::digest::hex_lower(&m.finalize().into_bytes());
        hex.truncate(MAC_HEX);
        hex
    }

    /// The token for one revision of one script.
    pub fn token(&self, uuid: &str, revision: u64) -> String {
        format!("{uuid}.{revision}.{}", self.mac(uuid, revision))
    }

    /// The script and revision a token proves, or None (malformed, or a mac this key did not
    /// make). Compared in constant time.
    pub fn verify(&self, token: &str) -> Option<Proven> {
        if token.len() > MAX_TOKEN_CHARS {
            return None;
        }
        let mut parts = token.split('.');
        let (uuid, rev, mac) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || !crate::scripts::record::is_uuid(uuid) {
            return None;
        }
        // Only the canonical spelling of the number (no sign, no leading zero).
        let revision: u64 = rev.parse().ok()?;
        if revision.to_string() != rev {
            return None;
        }
        let expected = self.mac(uuid, revision);
        if expected.len() != MAC_HEX || !bool::from(expected.as_bytes().ct_eq(mac.as_bytes())) {
            return None;
        }
        Some(Proven {
            uuid: uuid.to_owned(),
            revision,
        })
    }
}

/// Who sent a message, as the token proves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proven {
    pub uuid: String,
    pub revision: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";
    const B: &str = "7c9e6679-7425-40de-944b-e07fc1f90ae7";

    fn key() -> ChannelKey {
        ChannelKey::from_uuids(A, B).unwrap()
    }

    #[test]
    fn a_token_maps_to_its_script_and_revision_only() {
        let k = key();
        let t = k.token(A, 3);
        assert_eq!(
            k.verify(&t),
            Some(Proven {
                uuid: A.into(),
                revision: 3
            })
        );
        // Registered code holds tokens across updates of the extension, so the form is fixed:
        // the first 32 hex digits of HMAC-SHA256(key = A and B without their dashes, "<A>.3"),
        // as Python's `hmac.new(key, msg, hashlib.sha256).hexdigest()[:32]` computes them.
        assert_eq!(t, format!("{A}.3.a29c9c40cc44f322a14b59f345042b5f"));
        // Stable: the same key gives the same token (a worker restart changes nothing).
        assert_eq!(ChannelKey::parse(k.as_str()).unwrap().token(A, 3), t);
        // Another script's uuid or another revision with this mac is refused.
        let mac = t.rsplit('.').next().unwrap();
        assert_eq!(k.verify(&format!("{B}.3.{mac}")), None);
        assert_eq!(k.verify(&format!("{A}.4.{mac}")), None);
        // A new revision has a new token; the old one still proves the old revision only.
        assert_ne!(k.token(A, 4), t);
        // Another key (the key was lost and made again) refuses every old token.
        let other = ChannelKey::from_uuids(B, A).unwrap();
        assert_eq!(other.verify(&t), None);
    }

    #[test]
    fn malformed_tokens_are_refused() {
        let k = key();
        let t = k.token(A, 1);
        let mac = t.rsplit('.').next().unwrap().to_owned();
        for bad in [
            String::new(),
            "x".into(),
            format!("{A}.1"),
            format!("{A}.01.{mac}"),
            format!("{A}.+1.{mac}"),
            format!("{A}.1.{mac}.x"),
            format!("{A}.1.{}", &mac[..31]),
            format!("{A}.1.{}", mac.to_uppercase()),
            format!("{}.1.{mac}", A.to_uppercase()),
            format!("{A}.1.{mac}{}", "0".repeat(100)),
            format!("{A}.99999999999999999999999.{mac}"),
        ] {
            assert_eq!(k.verify(&bad), None, "{bad}");
        }
    }

    #[test]
    fn short_keys_are_not_keys() {
        assert!(ChannelKey::parse("short").is_none());
        assert!(ChannelKey::parse(&"k".repeat(300)).is_none());
        assert!(ChannelKey::from_uuids(A, B).is_some());
        assert_eq!(format!("{:?}", key()), "ChannelKey(…)");
    }
}
