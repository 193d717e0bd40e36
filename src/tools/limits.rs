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
//! - on a name collision the first definition wins; later ones are rejected and reported, never
//!   silently overwritten.
//!
//! The yes/no checks are `const fn` ([`name_ok`], [`namespace_ok`]) so fixed catalogues can be
//! asserted at compile time. The detailed checks return [`CatalogError`], which owns the offending
//! name for its message and therefore cannot be built in a const context.

use std::fmt;

pub const MAX_TOOLS: usize = 64;
pub const MAX_NAMESPACE: usize = 16;
pub const MAX_TOOL_NAME: usize = 40;
pub const MAX_COMBINED: usize = 57;
pub const RESERVED_NAMESPACES: [&str; 7] = [
    "browser", "page", "file", "network", "devtools", "webmcp", "ext",
];
/// [`admit_names`] reports at most this many errors, then one [`CatalogError::Suppressed`]:
/// the input list is not bounded, the report must be.
pub const MAX_REPORTED: usize = 64;
/// Offending names are quoted in errors up to this many bytes, so one huge name cannot bloat
/// the report.
const QUOTE_MAX: usize = 64;

/// One broken rule, with the offending (possibly shortened) name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CatalogError {
    EmptyNamespace,
    /// `len` is the full length in bytes; `namespace` may be shortened.
    NamespaceTooLong {
        namespace: String,
        len: usize,
    },
    NamespaceBadChar {
        namespace: String,
        bad: char,
    },
    ReservedNamespace {
        namespace: String,
    },
    EmptyName,
    NameTooLong {
        name: String,
        len: usize,
    },
    NameBadChar {
        name: String,
        bad: char,
    },
    CombinedTooLong {
        namespace: String,
        name: String,
        len: usize,
    },
    /// A later definition of a name already admitted; the first one was kept.
    Duplicate {
        name: String,
    },
    /// Valid, but the provider already has [`MAX_TOOLS`] tools; dropped.
    TooManyTools {
        name: String,
    },
    /// This many further errors were found and not listed.
    Suppressed {
        count: usize,
    },
}

impl fmt::Display for CatalogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `{:?}` quotes and escapes names, so control characters cannot forge log lines.
        match self {
            Self::EmptyNamespace => write!(f, "namespace is empty"),
            Self::NamespaceTooLong { namespace, len } => write!(
                f,
                "namespace {namespace:?} is {len} bytes long; the limit is {MAX_NAMESPACE}"
            ),
            Self::NamespaceBadChar { namespace, bad } => write!(
                f,
                "namespace {namespace:?} contains {bad:?}; only A-Z a-z 0-9 _ - are allowed"
            ),
            Self::ReservedNamespace { namespace } => {
                write!(f, "namespace {namespace:?} is reserved")
            }
            Self::EmptyName => write!(f, "tool name is empty"),
            Self::NameTooLong { name, len } => write!(
                f,
                "tool name {name:?} is {len} bytes long; the limit is {MAX_TOOL_NAME}"
            ),
            Self::NameBadChar { name, bad } => write!(
                f,
                "tool name {name:?} contains {bad:?}; only A-Z a-z 0-9 _ - are allowed"
            ),
            Self::CombinedTooLong {
                namespace,
                name,
                len,
            } => write!(
                f,
                "{namespace:?} + \"_\" + {name:?} is {len} bytes long; the limit is {MAX_COMBINED}"
            ),
            Self::Duplicate { name } => write!(
                f,
                "tool {name:?} is defined more than once; the first definition is kept"
            ),
            Self::TooManyTools { name } => write!(
                f,
                "tool {name:?} dropped: a provider may define at most {MAX_TOOLS} tools"
            ),
            Self::Suppressed { count } => write!(f, "{count} further catalogue errors not listed"),
        }
    }
}

impl std::error::Error for CatalogError {}

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

const fn all_allowed(s: &[u8]) -> bool {
    let mut i = 0;
    while i < s.len() {
        if !allowed(s[i]) {
            return false;
        }
        i += 1;
    }
    true
}

const fn eq_ignore_ascii_case(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if !a[i].eq_ignore_ascii_case(&b[i]) {
            return false;
        }
        i += 1;
    }
    true
}

const fn is_reserved(ns: &[u8]) -> bool {
    let mut i = 0;
    while i < RESERVED_NAMESPACES.len() {
        if eq_ignore_ascii_case(ns, RESERVED_NAMESPACES[i].as_bytes()) {
            return true;
        }
        i += 1;
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
pub const fn namespace_ok(namespace: &str) -> bool {
    namespace_violation(namespace.as_bytes(), LIMITS).is_none()
}

/// Whether the tool `name` may be declared under `namespace` (checks both, and the combined
/// length). Usable in `const` items: `const _: () = assert!(name_ok("userscripts", "list"));`
pub const fn name_ok(namespace: &str, name: &str) -> bool {
    pair_violation(namespace.as_bytes(), name.as_bytes(), LIMITS).is_none()
}

/// Checks a namespace, with the reason when it is refused.
pub fn check_namespace(namespace: &str) -> Result<(), CatalogError> {
    match namespace_violation(namespace.as_bytes(), LIMITS) {
        None => Ok(()),
        Some(v) => Err(detail(v, namespace, "")),
    }
}

/// Checks a namespace and tool name together, with the reason when refused. The namespace is
/// checked first, so a bad namespace is reported as such.
pub fn check_name(namespace: &str, name: &str) -> Result<(), CatalogError> {
    match pair_violation(namespace.as_bytes(), name.as_bytes(), LIMITS) {
        None => Ok(()),
        Some(v) => Err(detail(v, namespace, name)),
    }
}

/// Builds the final list: validates each, keeps the first of duplicates (reporting the rejected
/// duplicates), refuses past [`MAX_TOOLS`] (reporting the dropped). Invalid names do not take a
/// slot. An invalid namespace refuses the whole list with that single error. At most
/// [`MAX_REPORTED`] errors are listed, then one [`CatalogError::Suppressed`] with the rest's count.
pub fn admit_names<'a>(
    namespace: &str,
    names: impl IntoIterator<Item = &'a str>,
) -> (Vec<&'a str>, Vec<CatalogError>) {
    if let Err(e) = check_namespace(namespace) {
        return (Vec::new(), vec![e]);
    }
    let mut kept: Vec<&'a str> = Vec::new();
    let mut errors = Vec::new();
    let mut suppressed = 0usize;
    for name in names {
        let reject = match pair_violation(namespace.as_bytes(), name.as_bytes(), LIMITS) {
            Some(v) => Reject::Rule(v),
            // `kept` holds at most MAX_TOOLS names, so this scan is bounded.
            None if kept.contains(&name) => Reject::Duplicate,
            None if kept.len() >= MAX_TOOLS => Reject::Full,
            None => {
                kept.push(name);
                continue;
            }
        };
        if errors.len() >= MAX_REPORTED {
            suppressed = suppressed.saturating_add(1);
            continue;
        }
        errors.push(match reject {
            Reject::Rule(v) => detail(v, namespace, name),
            Reject::Duplicate => CatalogError::Duplicate { name: quote(name) },
            Reject::Full => CatalogError::TooManyTools { name: quote(name) },
        });
    }
    if suppressed > 0 {
        errors.push(CatalogError::Suppressed { count: suppressed });
    }
    (kept, errors)
}

enum Reject {
    Rule(Violation),
    Duplicate,
    Full,
}

fn detail(v: Violation, namespace: &str, name: &str) -> CatalogError {
    match v {
        Violation::EmptyNamespace => CatalogError::EmptyNamespace,
        Violation::NamespaceTooLong => CatalogError::NamespaceTooLong {
            namespace: quote(namespace),
            len: namespace.len(),
        },
        Violation::NamespaceBadChar => CatalogError::NamespaceBadChar {
            namespace: quote(namespace),
            bad: first_bad(namespace),
        },
        Violation::ReservedNamespace => CatalogError::ReservedNamespace {
            namespace: quote(namespace),
        },
        Violation::EmptyName => CatalogError::EmptyName,
        Violation::NameTooLong => CatalogError::NameTooLong {
            name: quote(name),
            len: name.len(),
        },
        Violation::NameBadChar => CatalogError::NameBadChar {
            name: quote(name),
            bad: first_bad(name),
        },
        Violation::CombinedTooLong => CatalogError::CombinedTooLong {
            namespace: quote(namespace),
            name: quote(name),
            len: namespace.len().saturating_add(1).saturating_add(name.len()),
        },
    }
}

fn first_bad(s: &str) -> char {
    s.chars()
        .find(|c| !(c.is_ascii() && allowed(*c as u8)))
        .unwrap_or('\u{fffd}')
}

/// At most QUOTE_MAX bytes of `s`, cut on a char boundary, with `…` when shortened.
fn quote(s: &str) -> String {
    if s.len() <= QUOTE_MAX {
        return s.to_string();
    }
    let mut end = QUOTE_MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let mut q = s.get(..end).unwrap_or("").to_string();
    q.push('…');
    q
}

#[cfg(test)]
mod tests {
    use super::*;

    // The point of the const fns: catalogues can be checked at compile time.
    const _: () = assert!(name_ok("userscripts", "list_scripts"));
    const _: () = assert!(!name_ok("browser", "list_scripts"));
    const _: () = assert!(namespace_ok("userscripts"));

    const NS: &str = "userscripts";

    fn s(c: char, n: usize) -> String {
        std::iter::repeat_n(c, n).collect()
    }

    #[test]
    fn namespace_length_boundary() {
        let ok = s('n', MAX_NAMESPACE);
        let long = s('n', MAX_NAMESPACE + 1);
        assert_eq!(check_namespace(&ok), Ok(()));
        assert!(namespace_ok(&ok) && name_ok(&ok, "t"));
        assert_eq!(
            check_namespace(&long),
            Err(CatalogError::NamespaceTooLong {
                namespace: long.clone(),
                len: 17
            })
        );
        assert!(!namespace_ok(&long) && !name_ok(&long, "t"));
        assert!(matches!(
            check_name(&long, "t"),
            Err(CatalogError::NamespaceTooLong { len: 17, .. })
        ));
    }

    #[test]
    fn name_length_boundary() {
        let ok = s('t', MAX_TOOL_NAME);
        let long = s('t', MAX_TOOL_NAME + 1);
        assert_eq!(check_name(NS, &ok), Ok(()));
        assert!(name_ok(NS, &ok));
        assert_eq!(
            check_name(NS, &long),
            Err(CatalogError::NameTooLong {
                name: long.clone(),
                len: 41
            })
        );
        assert!(!name_ok(NS, &long));
    }

    #[test]
    fn combined_length_boundary() {
        // 16 + 1 + 40 = 57: the longest pair allowed.
        let ns = s('n', MAX_NAMESPACE);
        let name = s('t', MAX_TOOL_NAME);
        assert_eq!(ns.len() + 1 + name.len(), MAX_COMBINED);
        assert_eq!(check_name(&ns, &name), Ok(()));
        // Every 58-byte pair breaks a part limit with today's constants; the part is reported.
        assert!(matches!(
            check_name(&s('n', 17), &name),
            Err(CatalogError::NamespaceTooLong { .. })
        ));
        assert!(matches!(
            check_name(&ns, &s('t', 41)),
            Err(CatalogError::NameTooLong { .. })
        ));
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
        let e = detail(Violation::CombinedTooLong, &ns20, &s('t', 37));
        assert!(matches!(e, CatalogError::CombinedTooLong { len: 58, .. }));
        assert!(e.to_string().contains("58"));
    }

    #[test]
    fn tool_count_boundary_and_first_wins() {
        let names: Vec<String> = (0..MAX_TOOLS + 1).map(|i| format!("t{i}")).collect();
        let (kept, errors) = admit_names(NS, names.iter().take(MAX_TOOLS).map(String::as_str));
        assert_eq!(kept.len(), MAX_TOOLS);
        assert!(errors.is_empty());
        let (kept, errors) = admit_names(NS, names.iter().map(String::as_str));
        assert_eq!(kept.len(), MAX_TOOLS);
        assert_eq!(kept.last(), Some(&"t63"));
        assert_eq!(
            errors,
            vec![CatalogError::TooManyTools {
                name: "t64".to_string()
            }]
        );
    }

    #[test]
    fn duplicates_first_wins_and_invalid_take_no_slot() {
        let (kept, errors) = admit_names(NS, ["a", "b", "a", "bad name", "c", "b"]);
        assert_eq!(kept, vec!["a", "b", "c"]);
        assert_eq!(
            errors,
            vec![
                CatalogError::Duplicate {
                    name: "a".to_string()
                },
                CatalogError::NameBadChar {
                    name: "bad name".to_string(),
                    bad: ' '
                },
                CatalogError::Duplicate {
                    name: "b".to_string()
                },
            ]
        );
        // Case differs: distinct names to a model, so both kept.
        let (kept, errors) = admit_names(NS, ["run", "Run"]);
        assert_eq!((kept.len(), errors.len()), (2, 0));
        // 64 invalid names plus 64 valid ones: all 64 valid kept.
        let valid: Vec<String> = (0..MAX_TOOLS).map(|i| format!("t{i}")).collect();
        let input = std::iter::repeat_n("", MAX_TOOLS).chain(valid.iter().map(String::as_str));
        let (kept, errors) = admit_names(NS, input);
        assert_eq!(kept.len(), MAX_TOOLS);
        assert_eq!(errors.len(), MAX_REPORTED);
    }

    #[test]
    fn every_reserved_namespace_refused_in_any_case() {
        for ns in RESERVED_NAMESPACES {
            let upper = ns.to_ascii_uppercase();
            for candidate in [ns, upper.as_str()] {
                assert_eq!(
                    check_namespace(candidate),
                    Err(CatalogError::ReservedNamespace {
                        namespace: candidate.to_string()
                    })
                );
                assert!(!name_ok(candidate, "tool"));
                let (kept, errors) = admit_names(candidate, ["tool", "other"]);
                assert!(kept.is_empty());
                assert_eq!(errors.len(), 1);
            }
            // Near misses are not reserved.
            assert_eq!(check_namespace(&format!("{ns}2")), Ok(()));
            assert_eq!(check_namespace(&format!("my-{ns}")), Ok(()));
        }
    }

    #[test]
    fn character_set_and_empty() {
        for ok in ["a", "Z", "0", "_", "-", "a_b-C9"] {
            assert_eq!(check_namespace(ok), Ok(()), "{ok}");
            assert_eq!(check_name(NS, ok), Ok(()), "{ok}");
        }
        for (bad, c) in [
            ("a b", ' '),
            ("a.b", '.'),
            ("a/b", '/'),
            ("é", 'é'),
            ("a\nb", '\n'),
            ("a\0", '\0'),
            ("日本", '日'),
        ] {
            assert_eq!(
                check_namespace(bad),
                Err(CatalogError::NamespaceBadChar {
                    namespace: bad.to_string(),
                    bad: c
                })
            );
            assert_eq!(
                check_name(NS, bad),
                Err(CatalogError::NameBadChar {
                    name: bad.to_string(),
                    bad: c
                })
            );
            assert!(!name_ok(NS, bad) && !namespace_ok(bad));
        }
        assert_eq!(check_namespace(""), Err(CatalogError::EmptyNamespace));
        assert_eq!(check_name(NS, ""), Err(CatalogError::EmptyName));
        assert_eq!(check_name("", "t"), Err(CatalogError::EmptyNamespace));
        assert!(!name_ok("", "t") && !name_ok(NS, ""));
        let (kept, errors) = admit_names("", ["t"]);
        assert!(kept.is_empty());
        assert_eq!(errors, vec![CatalogError::EmptyNamespace]);
    }

    #[test]
    fn reports_are_bounded() {
        let huge = format!("{}é", s('x', 100_000));
        let e = check_name(NS, &huge).unwrap_err();
        match &e {
            CatalogError::NameTooLong { name, len } => {
                assert_eq!(*len, 100_002);
                assert!(name.len() <= QUOTE_MAX + '…'.len_utf8());
            }
            other => panic!("{other:?}"),
        }
        // Cut on a char boundary.
        let multibyte = s('é', 100);
        assert!(quote(&multibyte).len() <= QUOTE_MAX + 3);
        // Control characters are escaped in messages.
        let msg = check_name(NS, "a\nb").unwrap_err().to_string();
        assert!(!msg.contains('\n'), "{msg}");
        // 10 000 bad names: 64 listed, then a count.
        let (kept, errors) = admit_names(NS, std::iter::repeat_n("bad!", 10_000));
        assert!(kept.is_empty());
        assert_eq!(errors.len(), MAX_REPORTED + 1);
        assert_eq!(
            errors.last(),
            Some(&CatalogError::Suppressed {
                count: 10_000 - MAX_REPORTED
            })
        );
    }

    #[test]
    fn messages_name_the_offender() {
        let cases = [
            check_namespace("browser").unwrap_err(),
            check_namespace(&s('n', 17)).unwrap_err(),
            check_name(NS, "x y").unwrap_err(),
            check_name(NS, &s('t', 41)).unwrap_err(),
        ];
        assert!(cases[0].to_string().contains("\"browser\""));
        assert!(cases[1].to_string().contains(&s('n', 17)));
        assert!(cases[2].to_string().contains("\"x y\""));
        assert!(cases[3].to_string().contains("41"));
        let (_, errors) = admit_names(NS, ["dup", "dup"]);
        assert!(errors[0].to_string().contains("\"dup\""));
    }
}
