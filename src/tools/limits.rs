//! Tool catalogue rules from the protocol contract.
//!
//! - at most [`MAX_TOOLS`] tools per provider;
//! - namespace 1..=[`MAX_NAMESPACE`] bytes, tool name 1..=[`MAX_TOOL_NAME`] bytes, both only
//!   `A-Z a-z 0-9 _ -` (so bytes are characters);
//! - `namespace + "_" + name` at most [`MAX_COMBINED`] bytes, below OpenAI's 64-character
//!   function-name limit. With today's constants (16 + 1 + 40 = 57) this is implied by the other
//!   two; it is still checked so that changing one constant cannot break the limit silently;
//! - the namespaces in [`RESERVED_NAMESPACES`] belong to the host, compared ignoring ASCII case so
//!   that `Browser` cannot pass for `browser` in front of a model;
//! - names are unique (the first definition wins on the host side).
//!
//! The provider's catalogue is fixed, so the checks are `const fn` ([`name_ok`], [`namespace_ok`])
//! and `catalog.rs` asserts them when the crate compiles: a catalogue that breaks a rule does not
//! build. There is no runtime checker: nothing registers tools at run time.
#![warn(clippy::must_use_candidate)] // pure decisions: a result dropped is a bug

pub const MAX_TOOLS: usize = 64;
pub const MAX_NAMESPACE: usize = 16;
pub const MAX_TOOL_NAME: usize = 40;
pub const MAX_COMBINED: usize = 57;
pub const RESERVED_NAMESPACES: [&str; 7] = [
    "browser", "page", "file", "network", "devtools", "webmcp", "ext",
];
/// Which rule failed, without data, so the checks can be `const fn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Violation {
    EmptyNamespace,
    NamespaceTooLong,
    NamespaceBadChar,
    ReservedNamespace,
    EmptyName,
    NameTooLong,
    NameBadChar,
    CombinedTooLong,
}

/// The limits, passed in so the combined rule can be tested on its own.
#[derive(Clone, Copy)]
struct Limits {
    namespace: usize,
    name: usize,
    combined: usize,
}

const LIMITS: Limits = Limits {
    namespace: MAX_NAMESPACE,
    name: MAX_TOOL_NAME,
    combined: MAX_COMBINED,
};

const fn allowed(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

// The const fns walk slices with patterns (`slice::get` is not const), so no index can panic.

const fn all_allowed(mut s: &[u8]) -> bool {
    while let [b, rest @ ..] = s {
        if !allowed(*b) {
            return false;
        }
        s = rest;
    }
    true
}

const fn eq_ignore_ascii_case(mut a: &[u8], mut b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    while let ([x, xs @ ..], [y, ys @ ..]) = (a, b) {
        if !x.eq_ignore_ascii_case(y) {
            return false;
        }
        (a, b) = (xs, ys);
    }
    true
}

const fn is_reserved(ns: &[u8]) -> bool {
    let mut reserved: &[&str] = &RESERVED_NAMESPACES;
    while let [r, rest @ ..] = reserved {
        if eq_ignore_ascii_case(ns, r.as_bytes()) {
            return true;
        }
        reserved = rest;
    }
    false
}

const fn namespace_violation(ns: &[u8], limits: Limits) -> Option<Violation> {
    if ns.is_empty() {
        Some(Violation::EmptyNamespace)
    } else if ns.len() > limits.namespace {
        Some(Violation::NamespaceTooLong)
    } else if !all_allowed(ns) {
        Some(Violation::NamespaceBadChar)
    } else if is_reserved(ns) {
        Some(Violation::ReservedNamespace)
    } else {
        None
    }
}

const fn pair_violation(ns: &[u8], name: &[u8], limits: Limits) -> Option<Violation> {
    if let Some(v) = namespace_violation(ns, limits) {
        Some(v)
    } else if name.is_empty() {
        Some(Violation::EmptyName)
    } else if name.len() > limits.name {
        Some(Violation::NameTooLong)
    } else if !all_allowed(name) {
        Some(Violation::NameBadChar)
    } else if ns.len().saturating_add(1).saturating_add(name.len()) > limits.combined {
        Some(Violation::CombinedTooLong)
    } else {
        None
    }
}

/// Whether `namespace` may be used by a provider. Usable in `const` items.
#[must_use]
pub const fn namespace_ok(namespace: &str) -> bool {
    namespace_violation(namespace.as_bytes(), LIMITS).is_none()
}

/// Whether the tool `name` may be declared under `namespace` (checks both, and the combined
/// length). Usable in `const` items: `const _: () = assert!(name_ok("userscripts", "list"));`
#[must_use]
pub const fn name_ok(namespace: &str, name: &str) -> bool {
    pair_violation(namespace.as_bytes(), name.as_bytes(), LIMITS).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    // The point of the const fns: catalogues are checked at compile time.
    const _: () = assert!(name_ok("userscripts", "list_scripts"));
    const _: () = assert!(!name_ok("browser", "list_scripts"));
    const _: () = assert!(namespace_ok("userscripts"));

    const NS: &str = "userscripts";

    fn s(c: char, n: usize) -> String {
        std::iter::repeat_n(c, n).collect()
    }

    fn pair(ns: &str, name: &str) -> Option<Violation> {
        pair_violation(ns.as_bytes(), name.as_bytes(), LIMITS)
    }

    #[test]
    fn namespace_length_boundary() {
        let ok = s('n', MAX_NAMESPACE);
        let long = s('n', MAX_NAMESPACE + 1);
        assert!(namespace_ok(&ok) && name_ok(&ok, "t"));
        assert!(!namespace_ok(&long) && !name_ok(&long, "t"));
        assert_eq!(pair(&long, "t"), Some(Violation::NamespaceTooLong));
    }

    #[test]
    fn name_length_boundary() {
        assert!(name_ok(NS, &s('t', MAX_TOOL_NAME)));
        assert_eq!(
            pair(NS, &s('t', MAX_TOOL_NAME + 1)),
            Some(Violation::NameTooLong)
        );
    }

    #[test]
    fn combined_length_boundary() {
        // 16 + 1 + 40 = 57: the longest pair allowed.
        let ns = s('n', MAX_NAMESPACE);
        let name = s('t', MAX_TOOL_NAME);
        assert_eq!(ns.len() + 1 + name.len(), MAX_COMBINED);
        assert!(name_ok(&ns, &name));
        // Every 58-byte pair breaks a part limit with today's constants; the part is reported.
        assert_eq!(pair(&s('n', 17), &name), Some(Violation::NamespaceTooLong));
        assert_eq!(pair(&ns, &s('t', 41)), Some(Violation::NameTooLong));
        // The combined rule on its own, under looser part limits.
        let loose = Limits {
            namespace: 20,
            name: 50,
            combined: MAX_COMBINED,
        };
        let ns20 = s('n', 20);
        assert_eq!(
            pair_violation(ns20.as_bytes(), s('t', 36).as_bytes(), loose),
            None
        );
        assert_eq!(
            pair_violation(ns20.as_bytes(), s('t', 37).as_bytes(), loose),
            Some(Violation::CombinedTooLong)
        );
    }

    #[test]
    fn every_reserved_namespace_refused_in_any_case() {
        for ns in RESERVED_NAMESPACES {
            let upper = ns.to_ascii_uppercase();
            for candidate in [ns, upper.as_str()] {
                assert_eq!(pair(candidate, "tool"), Some(Violation::ReservedNamespace));
                assert!(!namespace_ok(candidate) && !name_ok(candidate, "tool"));
            }
            // Near misses are not reserved.
            assert!(namespace_ok(&format!("{ns}2")));
            assert!(namespace_ok(&format!("my-{ns}")));
        }
    }

    #[test]
    fn character_set_and_empty() {
        for ok in ["a", "Z", "0", "_", "-", "a_b-C9"] {
            assert!(namespace_ok(ok) && name_ok(NS, ok), "{ok}");
        }
        for bad in ["a b", "a.b", "a/b", "é", "a\nb", "a\0", "日本"] {
            assert_eq!(pair(bad, "t"), Some(Violation::NamespaceBadChar), "{bad:?}");
            assert_eq!(pair(NS, bad), Some(Violation::NameBadChar), "{bad:?}");
            assert!(!name_ok(NS, bad) && !namespace_ok(bad));
        }
        assert_eq!(pair("", "t"), Some(Violation::EmptyNamespace));
        assert_eq!(pair(NS, ""), Some(Violation::EmptyName));
        assert!(!name_ok("", "t") && !name_ok(NS, ""));
    }
}
