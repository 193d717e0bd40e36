//! The user's policy: endpoint switch, allowlist, pending approvals, denials, write and review
//! switches — and the decisions made from it. Persisted as one JSON value (see `store::keys`),
//! re-read whenever a decision is made, so a change made by a page takes effect at once.
#![warn(clippy::must_use_candidate)] // pure decisions: a result dropped is a bug

use crate::ids::ExtensionId;
use crate::json_view::JsonView;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Bounds keep a flood of probing ids from growing storage without limit.
pub const MAX_PENDING: usize = 32;
pub const MAX_DENIED: usize = 256;
pub const MAX_ALLOWLIST: usize = 256;
/// Display names are untrusted and only ever shown as text; a cap keeps them displayable.
pub const MAX_NAME_CHARS: usize = 64;
/// `lastSeen` is refreshed at most this often, so warm probes do not write storage every time.
pub const LAST_SEEN_GRANULARITY_MS: f64 = 60_000.0;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Caller {
    pub id: ExtensionId,
    pub name: String,
    pub added_at: f64,
    pub last_seen: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingCaller {
    pub id: ExtensionId,
    pub name: String,
    pub first_seen: f64,
    pub last_seen: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeniedCaller {
    pub id: ExtensionId,
    pub name: String,
    pub at: f64,
}

/// Defaults are safe: nobody is authorized until the user approves a caller. The endpoint is on
/// so that a host's probe can ask for approval; writes are on and review off, because approving
/// a caller is already an explicit grant and the rate limit and audit still apply.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    pub endpoint_enabled: bool,
    pub writes_enabled: bool,
    pub review_writes: bool,
    pub allowlist: Vec<Caller>,
    pub pending: Vec<PendingCaller>,
    pub denied: Vec<DeniedCaller>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            endpoint_enabled: true,
            writes_enabled: true,
            review_writes: false,
            allowlist: Vec::new(),
            pending: Vec::new(),
            denied: Vec::new(),
        }
    }
}

/// Whether a sender may open L1 / call tools. L1 requires `enabled && authorized`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Granted,
    EndpointOff,
    /// The sender has no id that passes `is_extension_id` (e.g. a web page or a native app).
    NoValidSender,
    NotAllowlisted,
}

impl Access {
    #[must_use]
    pub fn reason(self) -> &'static str {
        match self {
            Access::Granted => "authorized",
            Access::EndpointOff => "Agent access is turned off in Lumo Userscripts.",
            Access::NoValidSender => "The sender has no valid extension id.",
            Access::NotAllowlisted => {
                "This caller is not on the Lumo Userscripts allowlist; approve it in the options page."
            }
        }
    }
}

/// Which switch a page flips.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Switch {
    Endpoint,
    Writes,
    Review,
}

/// Display names from callers are untrusted: strip control characters, trim, cap the length.
#[must_use]
pub fn clean_name(raw: &str) -> String {
    let s: String = raw
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_NAME_CHARS)
        .collect();
    s.trim().to_owned()
}

impl Policy {
    /// Decodes what storage holds, leniently: a corrupt entry is skipped (and reported) instead of
    /// costing the user the whole allowlist; a missing or wrong-typed switch takes its default.
    /// One decoder for both readers: the provider's (serde_json's `Value`) and the probe module's
    /// (`json_view::Json`).
    #[must_use]
    pub fn from_stored<J: JsonView>(v: Option<&J>) -> (Policy, Vec<String>) {
        let mut p = Policy::default();
        let mut problems = Vec::new();
        let Some(v) = v else { return (p, problems) };
        if !v.is_object() {
            problems.push("stored policy is not an object; using defaults".to_owned());
            return (p, problems);
        }
        let flag = |key: &str, default: bool, problems: &mut Vec<String>| match v.get(key) {
            None => default,
            Some(b) => b.as_bool().unwrap_or_else(|| {
                problems.push(format!(
                    "stored policy: {key} is not a boolean; using {default}"
                ));
                default
            }),
        };
        p.endpoint_enabled = flag("endpointEnabled", p.endpoint_enabled, &mut problems);
        p.writes_enabled = flag("writesEnabled", p.writes_enabled, &mut problems);
        p.review_writes = flag("reviewWrites", p.review_writes, &mut problems);
        p.allowlist = decode_list(
            v.get("allowlist"),
            "allowlist",
            MAX_ALLOWLIST,
            Caller::read,
            &mut problems,
        );
        p.pending = decode_list(
            v.get("pending"),
            "pending",
            MAX_PENDING,
            PendingCaller::read,
            &mut problems,
        );
        p.denied = decode_list(
            v.get("denied"),
            "denied",
            MAX_DENIED,
            DeniedCaller::read,
            &mut problems,
        );
        (p, problems)
    }

    #[must_use]
    pub fn to_stored(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    #[must_use]
    pub fn is_allowlisted(&self, id: &ExtensionId) -> bool {
        self.allowlist.iter().any(|c| &c.id == id)
    }

    #[must_use]
    pub fn is_pending(&self, id: &ExtensionId) -> bool {
        self.pending.iter().any(|c| &c.id == id)
    }

    #[must_use]
    pub fn is_denied(&self, id: &ExtensionId) -> bool {
        self.denied.iter().any(|c| &c.id == id)
    }

    /// The one authorization decision. It compares the sender id only: names are display-only.
    #[must_use]
    pub fn access(&self, sender: Option<&ExtensionId>) -> Access {
        if !self.endpoint_enabled {
            return Access::EndpointOff;
        }
        match sender {
            None => Access::NoValidSender,
            Some(id) if self.is_allowlisted(id) => Access::Granted,
            Some(_) => Access::NotAllowlisted,
        }
    }

    /// A session of `sender` was authorized at `now`: an allowed caller's `lastSeen` is
    /// refreshed as a probe refreshes it, so "Last seen" also tells of a caller that opens its
    /// sessions without probing first (a reconnect). Returns whether anything changed.
    pub fn note_session(&mut self, sender: &ExtensionId, now: f64) -> bool {
        self.endpoint_enabled && self.seen_allowed(sender, now) == Some(true)
    }

    /// `lastSeen` of `sender` refreshed if it is allowed (at most once per
    /// [`LAST_SEEN_GRANULARITY_MS`]): whether it changed; `None` when it is not allowed.
    fn seen_allowed(&mut self, sender: &ExtensionId, now: f64) -> Option<bool> {
        let c = self.allowlist.iter_mut().find(|c| &c.id == sender)?;
        Some(match c.last_seen {
            Some(t) if now - t < LAST_SEEN_GRANULARITY_MS && now >= t => false,
            _ => {
                c.last_seen = Some(now);
                true
            }
        })
    }

    /// A probe from `sender` was seen at `now`. Records a pending approval for an unknown caller
    /// (once: repeated probes refresh it, never duplicate it) and refreshes `lastSeen` of a known
    /// one. Returns whether anything changed, so the caller writes storage only then.
    pub fn note_probe(&mut self, sender: &ExtensionId, display_name: &str, now: f64) -> bool {
        if !self.endpoint_enabled {
            return false;
        }
        if let Some(changed) = self.seen_allowed(sender, now) {
            return changed;
        }
        if self.is_denied(sender) {
            return false;
        }
        if let Some(p) = self.pending.iter_mut().find(|p| &p.id == sender) {
            if now - p.last_seen < LAST_SEEN_GRANULARITY_MS && now >= p.last_seen {
                return false;
            }
            p.last_seen = now;
            return true;
        }
        if self.pending.len() >= MAX_PENDING {
            // Keep the freshest requests: the oldest one is the least likely to still be waiting.
            if let Some(oldest) = index_of_min(self.pending.iter().map(|p| p.last_seen)) {
                self.pending.remove(oldest);
            }
        }
        self.pending.push(PendingCaller {
            id: sender.clone(),
            name: clean_name(display_name),
            first_seen: now,
            last_seen: now,
        });
        true
    }

    /// Puts `id` on the allowlist (from pending, denied, or typed in by the user).
    pub fn approve(
        &mut self,
        id: &ExtensionId,
        name: Option<&str>,
        now: f64,
    ) -> Result<(), PolicyError> {
        if self.is_allowlisted(id) {
            return Ok(());
        }
        if self.allowlist.len() >= MAX_ALLOWLIST {
            return Err(PolicyError::AllowlistFull);
        }
        let known_name = self
            .pending
            .iter()
            .find(|p| &p.id == id)
            .map(|p| p.name.clone())
            .or_else(|| {
                self.denied
                    .iter()
                    .find(|d| &d.id == id)
                    .map(|d| d.name.clone())
            });
        let name = name
            .map(clean_name)
            .filter(|n| !n.is_empty())
            .or(known_name)
            .unwrap_or_default();
        let last_seen = self
            .pending
            .iter()
            .find(|p| &p.id == id)
            .map(|p| p.last_seen);
        self.pending.retain(|p| &p.id != id);
        self.denied.retain(|d| &d.id != id);
        self.allowlist.push(Caller {
            id: id.clone(),
            name,
            added_at: now,
            last_seen,
        });
        Ok(())
    }

    /// Refuses a pending caller: it stops asking (pendingApproval becomes false) until the user
    /// adds it by id. Denying an allowlisted caller also removes it from the allowlist.
    pub fn deny(&mut self, id: &ExtensionId, now: f64) {
        let name = self
            .pending
            .iter()
            .find(|p| &p.id == id)
            .map(|p| p.name.clone())
            .or_else(|| {
                self.allowlist
                    .iter()
                    .find(|c| &c.id == id)
                    .map(|c| c.name.clone())
            })
            .unwrap_or_default();
        self.pending.retain(|p| &p.id != id);
        self.allowlist.retain(|c| &c.id != id);
        self.denied.retain(|d| &d.id != id);
        if self.denied.len() >= MAX_DENIED {
            if let Some(oldest) = index_of_min(self.denied.iter().map(|d| d.at)) {
                self.denied.remove(oldest);
            }
        }
        self.denied.push(DeniedCaller {
            id: id.clone(),
            name,
            at: now,
        });
    }

    /// Forgets `id` everywhere: a later probe asks for approval again.
    pub fn remove(&mut self, id: &ExtensionId) -> bool {
        let before = self.allowlist.len() + self.pending.len() + self.denied.len();
        self.allowlist.retain(|c| &c.id != id);
        self.pending.retain(|p| &p.id != id);
        self.denied.retain(|d| &d.id != id);
        before != self.allowlist.len() + self.pending.len() + self.denied.len()
    }

    pub fn set_switch(&mut self, which: Switch, value: bool) {
        match which {
            Switch::Endpoint => self.endpoint_enabled = value,
            Switch::Writes => self.writes_enabled = value,
            Switch::Review => self.review_writes = value,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyError {
    AllowlistFull,
}

impl std::fmt::Display for PolicyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PolicyError::AllowlistFull => {
                write!(
                    f,
                    "the allowlist is full ({MAX_ALLOWLIST} callers); remove one first"
                )
            }
        }
    }
}

fn index_of_min(it: impl Iterator<Item = f64>) -> Option<usize> {
    it.enumerate()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(i, _)| i)
}

fn decode_list<J: JsonView, T>(
    v: Option<&J>,
    what: &str,
    cap: usize,
    read: fn(&J) -> Result<T, String>,
    problems: &mut Vec<String>,
) -> Vec<T> {
    let Some(v) = v else { return Vec::new() };
    let Some(items) = v.as_array() else {
        problems.push(format!(
            "stored policy: {what} is not a list; treating it as empty"
        ));
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        if out.len() >= cap {
            problems.push(format!(
                "stored policy: {what} is over its cap of {cap}; extra entries skipped"
            ));
            break;
        }
        match read(item) {
            Ok(t) => out.push(t),
            Err(e) => problems.push(format!("stored policy: {what}[{i}] skipped: {e}")),
        }
    }
    out
}

/// The fields of one stored entry, read as serde's derive read the objects this provider writes
/// (it also took an array in field order, which nothing writes: refused here): an object, other
/// members ignored, each field of its type; `Option` fields may be absent or null.
struct Fields<'a, J>(&'a J);

impl<J: JsonView> Fields<'_, J> {
    fn of(v: &J) -> Result<Fields<'_, J>, String> {
        if v.is_object() {
            Ok(Fields(v))
        } else {
            Err("not an object".to_owned())
        }
    }

    fn present(&self, key: &'static str) -> Result<&J, String> {
        self.0
            .get(key)
            .ok_or_else(|| format!("missing field `{key}`"))
    }

    fn id(&self, key: &'static str) -> Result<ExtensionId, String> {
        let s = self.string(key)?;
        ExtensionId::parse(&s).ok_or_else(|| {
            format!(
                "`{key}` is not an extension id: {}",
                crate::text::ellipsize(&s, 40)
            )
        })
    }

    fn string(&self, key: &'static str) -> Result<String, String> {
        self.present(key)?
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("`{key}` is not a string"))
    }

    fn number(&self, key: &'static str) -> Result<f64, String> {
        self.present(key)?
            .as_f64()
            .ok_or_else(|| format!("`{key}` is not a number"))
    }

    fn optional_number(&self, key: &'static str) -> Result<Option<f64>, String> {
        match self.0.get(key) {
            None => Ok(None),
            Some(v) if v.is_null() => Ok(None),
            Some(_) => self.number(key).map(Some),
        }
    }
}

impl Caller {
    fn read<J: JsonView>(v: &J) -> Result<Self, String> {
        let f = Fields::of(v)?;
        Ok(Caller {
            id: f.id("id")?,
            name: f.string("name")?,
            added_at: f.number("addedAt")?,
            last_seen: f.optional_number("lastSeen")?,
        })
    }
}

impl PendingCaller {
    fn read<J: JsonView>(v: &J) -> Result<Self, String> {
        let f = Fields::of(v)?;
        Ok(PendingCaller {
            id: f.id("id")?,
            name: f.string("name")?,
            first_seen: f.number("firstSeen")?,
            last_seen: f.number("lastSeen")?,
        })
    }
}

impl DeniedCaller {
    fn read<J: JsonView>(v: &J) -> Result<Self, String> {
        let f = Fields::of(v)?;
        Ok(DeniedCaller {
            id: f.id("id")?,
            name: f.string("name")?,
            at: f.number("at")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn id(c: char) -> ExtensionId {
        ExtensionId::parse(&c.to_string().repeat(32)).unwrap()
    }

    #[test]
    fn defaults_authorize_nobody() {
        let p = Policy::default();
        assert_eq!(p.access(Some(&id('a'))), Access::NotAllowlisted);
        assert_eq!(p.access(None), Access::NoValidSender);
    }

    #[test]
    fn endpoint_off_wins() {
        let mut p = Policy::default();
        p.approve(&id('a'), None, 0.0).unwrap();
        assert_eq!(p.access(Some(&id('a'))), Access::Granted);
        p.set_switch(Switch::Endpoint, false);
        assert_eq!(p.access(Some(&id('a'))), Access::EndpointOff);
    }

    #[test]
    fn probe_records_pending_once_and_bounded() {
        let mut p = Policy::default();
        assert!(p.note_probe(&id('a'), "Lumo", 0.0));
        assert!(!p.note_probe(&id('a'), "Lumo", 10.0));
        assert_eq!(p.pending.len(), 1);
        // Flood with many ids: the list never passes its cap.
        for i in 0..1000u32 {
            let s: String = (0..32)
                .map(|k| (b'a' + ((i >> (k % 10)) as u8 % 16)) as char)
                .collect();
            p.note_probe(&ExtensionId::parse(&s).unwrap(), "x", f64::from(i));
        }
        assert!(p.pending.len() <= MAX_PENDING);
    }

    #[test]
    fn deny_stops_pending_and_approve_moves_to_allowlist() {
        let mut p = Policy::default();
        p.note_probe(&id('b'), "<img src=x>", 0.0);
        p.deny(&id('b'), 1.0);
        assert!(!p.is_pending(&id('b')));
        assert!(!p.note_probe(&id('b'), "again", 2.0));
        assert!(!p.is_pending(&id('b')));
        p.approve(&id('b'), None, 3.0).unwrap();
        assert!(p.is_allowlisted(&id('b')) && !p.is_denied(&id('b')));
        assert_eq!(p.allowlist[0].name, "<img src=x>");
    }

    #[test]
    fn endpoint_off_records_nothing() {
        let mut p = Policy::default();
        p.set_switch(Switch::Endpoint, false);
        assert!(!p.note_probe(&id('c'), "x", 0.0));
        assert!(p.pending.is_empty());
    }

    #[test]
    fn last_seen_refresh_is_coarse() {
        let mut p = Policy::default();
        p.approve(&id('a'), Some("Host"), 0.0).unwrap();
        assert!(p.note_probe(&id('a'), "Host", 1.0));
        assert!(!p.note_probe(&id('a'), "Host", 2.0));
        assert!(p.note_probe(&id('a'), "Host", 1.0 + LAST_SEEN_GRANULARITY_MS));
    }

    /// A session refreshes an allowed caller's `lastSeen` as a probe does, and records nothing
    /// for anyone else: no pending request (only a probe asks), nothing when the endpoint is off.
    #[test]
    fn a_session_refreshes_an_allowed_callers_last_seen_only() {
        let mut p = Policy::default();
        p.approve(&id('a'), Some("Host"), 0.0).unwrap();
        assert!(p.note_session(&id('a'), 1.0));
        assert_eq!(p.allowlist[0].last_seen, Some(1.0));
        assert!(!p.note_session(&id('a'), 2.0));
        assert!(p.note_session(&id('a'), 1.0 + LAST_SEEN_GRANULARITY_MS));
        assert!(!p.note_session(&id('b'), 5.0));
        assert!(p.pending.is_empty());
        p.set_switch(Switch::Endpoint, false);
        assert!(!p.note_session(&id('a'), 10.0 * LAST_SEEN_GRANULARITY_MS));
    }

    #[test]
    fn stored_round_trip_and_lenient_decode() {
        let mut p = Policy::default();
        p.approve(&id('a'), Some("Host"), 5.0).unwrap();
        p.set_switch(Switch::Review, true);
        let (back, problems) = Policy::from_stored(Some(&p.to_stored()));
        assert_eq!(back, p);
        assert!(problems.is_empty());

        let corrupt = json!({
            "endpointEnabled": "yes",
            "allowlist": [{"id": "bad", "name": "x", "addedAt": 0}, {"id": "a".repeat(32), "name": "ok", "addedAt": 1, "lastSeen": null}],
            "pending": 7
        });
        let (back, problems) = Policy::from_stored(Some(&corrupt));
        assert!(back.endpoint_enabled);
        assert_eq!(back.allowlist.len(), 1);
        assert_eq!(problems.len(), 3, "{problems:?}");
        let (d, problems) = Policy::from_stored(Some(&json!([1, 2])));
        assert_eq!(d, Policy::default());
        assert_eq!(problems.len(), 1);
    }

    #[test]
    fn names_are_cleaned() {
        assert_eq!(clean_name("  a\u{0}b\nc  "), "abc");
        assert_eq!(clean_name(&"x".repeat(500)).chars().count(), MAX_NAME_CHARS);
    }
}
