//! Who makes a tool call. Two kinds reach the one tool walk (`tools::call`):
//!
//! - an **extension** (a Lumo host on a `lumo:mcp` port): its id went through the one validator
//!   (`ExtensionId::parse`) and it must be on the user's allowlist;
//! - the **local bridge** (`lumo-bridge`, any desktop MCP client behind it), over the loopback
//!   WebSocket the worker dialled after the user's click on the connect page. That click is the
//!   consent: the bridge needs no allowlist entry (it has no extension id to list), but the
//!   endpoint switch, read-only mode, review, rate limit and audit apply to it as to anyone.
//!
//! The bridge's key (`bridge:<port>`) contains a colon, so it can never equal an extension id
//! (`[a-p]{32}`): it cannot borrow an extension's rate window, allowance or audit trail.

use crate::ids::ExtensionId;
use crate::policy::{Access, Policy};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    Extension(ExtensionId),
    /// The local bridge on `<host>:<port>` (`127.0.0.1` unless the user allowed another host on
    /// the connect page). `readonly`: its `hello_ack` said the bridge runs with `--readonly`, so
    /// this end refuses its writes too.
    Bridge {
        host: String,
        port: u16,
        readonly: bool,
    },
}

impl Caller {
    /// The identity used by the rate window, audit entries, provenance and reviews.
    #[must_use]
    pub fn key(&self) -> String {
        match self {
            Caller::Extension(id) => id.as_str().to_owned(),
            Caller::Bridge { port, .. } => bridge_key(*port),
        }
    }

    /// What the user reads.
    #[must_use]
    pub fn display(&self) -> String {
        match self {
            Caller::Extension(id) => id.as_str().to_owned(),
            Caller::Bridge { host, port, .. } => bridge_label(host, *port),
        }
    }

    /// The name a review shows for this caller: the allowlist's name for an extension (with any
    /// invisible or direction character as a visible marker), the label for the bridge.
    #[must_use]
    pub fn review_name(&self, policy: &Policy) -> String {
        match self {
            Caller::Extension(id) => policy
                .allowlist
                .iter()
                .find(|c| &c.id == id)
                .map(|c| crate::guard::diff::visible(&c.name))
                .unwrap_or_default(),
            Caller::Bridge { host, port, .. } => bridge_label(host, *port),
        }
    }

    /// Step 1 of the tool walk: may this caller call tools now?
    #[must_use]
    pub fn access(&self, policy: &Policy) -> Access {
        match self {
            Caller::Extension(id) => policy.access(Some(id)),
            Caller::Bridge { .. } if !policy.endpoint_enabled => Access::EndpointOff,
            Caller::Bridge { .. } => Access::Granted,
        }
    }

    /// Writes refused whatever the policy says (the bridge's own `--readonly`).
    #[must_use]
    pub fn readonly(&self) -> bool {
        matches!(self, Caller::Bridge { readonly: true, .. })
    }
}

#[must_use]
pub fn bridge_key(port: u16) -> String {
    format!("bridge:{port}")
}

/// What the user reads for the bridge: a bridge on another host (the connect page's advanced
/// switch) says where it is, not "Local".
#[must_use]
pub fn bridge_label(host: &str, port: u16) -> String {
    if crate::bridge::dialer::is_loopback(host) {
        format!("Local bridge (port {port})")
    } else {
        format!("Bridge at {host}:{port} (not this computer)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bridge_key_is_never_an_extension_id() {
        let k = Caller::Bridge {
            host: "127.0.0.1".into(),
            port: 17817,
            readonly: false,
        }
        .key();
        assert_eq!(k, "bridge:17817");
        assert!(ExtensionId::parse(&k).is_none());
        assert!(!crate::ids::is_extension_id(&k));
    }

    /// Found in review: a bridge the user allowed on another host was shown as "Local bridge"
    /// in the popup's connected list and in every review.
    #[test]
    fn a_bridge_on_another_host_is_not_called_local() {
        let at = |host: &str| Caller::Bridge {
            host: host.into(),
            port: 17817,
            readonly: false,
        };
        assert_eq!(at("127.0.0.1").display(), "Local bridge (port 17817)");
        assert_eq!(at("localhost").display(), "Local bridge (port 17817)");
        let far = at("bridge.example");
        assert_eq!(
            far.display(),
            "Bridge at bridge.example:17817 (not this computer)"
        );
        assert_eq!(far.review_name(&Policy::default()), far.display());
        // The key (rate window, audit) stays the port's.
        assert_eq!(far.key(), "bridge:17817");
        // The link's view carries the same name for the pages.
        let p = crate::provider::Provider::new(crate::env::memory::MemoryEnv::new());
        p.bridge_dialing_fresh("bridge.example", 17817);
        assert_eq!(p.bridge_view().label, far.display());
    }

    #[test]
    fn the_bridge_needs_the_endpoint_but_no_allowlist_entry() {
        let b = Caller::Bridge {
            host: "127.0.0.1".into(),
            port: 1,
            readonly: false,
        };
        let mut policy = Policy::default();
        assert!(policy.allowlist.is_empty());
        assert_eq!(b.access(&policy), Access::Granted);
        policy.endpoint_enabled = false;
        assert_eq!(b.access(&policy), Access::EndpointOff);
        // An extension still needs its allowlist entry.
        let ext =
            Caller::Extension(ExtensionId::parse("mobcibglkcoacmddjpdoknlbbicjchlk").unwrap());
        policy.endpoint_enabled = true;
        assert_eq!(ext.access(&policy), Access::NotAllowlisted);
    }
}
