//! `@connect`: the hosts a script's `GM_xmlhttpRequest` (and `GM_download`, which fetches through
//! it) may reach.
//!
//! Each line is one rule (Tampermonkey's spelling): a domain (itself and its subdomains), an IP
//! address (exactly), `self` (the host of the page the script runs in), `localhost` (the
//! machine itself: `localhost`, `*.localhost`, 127.0.0.0/8, `[::1]` and the other spellings
//! [`is_loopback`] knows), or `*` (any site on the internet, flagged in validation and review).
//! Loopback targets are reached only through `localhost`, their own address or `self`, never
//! through `*` or a domain; the user's local network ([`is_private_network`]: the router, the
//! printer, the NAS) only through a rule that names it or `self`, never through `*`: a script
//! that may talk to "any site" still cannot probe the user's local services or devices, nor be
//! led there by a server's redirect. A rule whose host is one of those is named as such in
//! validation and review, whatever its spelling (`2130706433` is 127.0.0.1).
//!
//! Hosts are compared in the URL parser's canonical form (lowercase, punycode, IPv4 in dotted
//! decimal, IPv6 in brackets), the same form the request's URL is parsed to.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::web::WebPlatform;

/// One parsed `@connect` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    /// `*`: any host but loopback and the local network.
    Any,
    /// `self`: the page's own host.
    SelfHost,
    /// `localhost`: loopback names and addresses.
    Localhost,
    /// A domain, canonical: it and its subdomains.
    Domain(String),
    /// An IP address, canonical (`1.2.3.4`, `[::1]`): exactly.
    Ip(String),
}

/// Why a `@connect` value was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleError {
    Empty,
    NotAHost(String),
}

impl std::fmt::Display for RuleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RuleError::Empty => f.write_str("@connect without a value"),
            RuleError::NotAHost(v) => write!(
                f,
                "@connect \"{v}\" is not a host name, an IP address, self, localhost or *"
            ),
        }
    }
}

/// Parses one `@connect` value. A URL (`https://api.example.com/v1`) or a leading `*.` is read
/// as its host, as Tampermonkey does; a port is dropped (rules are per host).
pub fn parse(web: &dyn WebPlatform, value: &str) -> Result<Rule, RuleError> {
    let v = value.trim();
    match v {
        "" => return Err(RuleError::Empty),
        "*" => return Ok(Rule::Any),
        "self" => return Ok(Rule::SelfHost),
        "localhost" => return Ok(Rule::Localhost),
        _ => {}
    }
    let not_a_host = || RuleError::NotAHost(crate::text::ellipsize(v, 80));
    let after_scheme = v.split_once("://").map_or(v, |(_, rest)| rest);
    let host_port = after_scheme
        .split(['/', '?', '#'])
        .next()
        .unwrap_or_default();
    let host_port = host_port.strip_prefix("*.").unwrap_or(host_port);
    if host_port.is_empty() || host_port.contains(['@', '*', ' ']) {
        return Err(not_a_host());
    }
    let url = web
        .parse_url(&format!("http://{host_port}/"))
        .map_err(|_| not_a_host())?;
    let host = url.host;
    if host.is_empty() {
        return Err(not_a_host());
    }
    if is_ip(&host) {
        Ok(Rule::Ip(host))
    } else if host == "localhost" || HOSTS_FILE_NAMES.contains(&host.as_str()) {
        // A domain rule reaches no loopback target (`allows`): such a name is `localhost`.
        Ok(Rule::Localhost)
    } else {
        Ok(Rule::Domain(host))
    }
}

/// What validation says about a rule that reaches far or near: `*`, a bare top-level name such
/// as `com` (every site under it), and an address on this computer or the local network, which
/// a numeric spelling (`2130706433`, `0x7f.1`) would otherwise hide; and a name written with
/// letters that are not ASCII, read as its punycode form (`gіthub.com` is not github.com).
/// `written`: the line's value.
pub fn risk(rule: &Rule, written: &str) -> Option<String> {
    let spelled = |canonical: &str| {
        if written.trim().eq_ignore_ascii_case(canonical) {
            String::new()
        } else {
            format!(
                " ({} is read as {canonical})",
                crate::text::ellipsize(written.trim(), 80)
            )
        }
    };
    match rule {
        Rule::Any => Some(
            "@connect * lets the script send requests to any site on the internet (with your \
             cookies for that site); not to this computer or your local network, which need \
             a @connect line of their own"
                .to_owned(),
        ),
        Rule::Ip(a) if is_loopback(a) => Some(format!(
            "@connect {a} is this computer: the script may send requests to its local services{}",
            spelled(a)
        )),
        Rule::Ip(a) if is_private_network(a) => Some(format!(
            "@connect {a} is on your local network: the script may send requests to a device there (a router, a printer){}",
            spelled(a)
        )),
        // `localhost` says what it is; another name for this computer (the hosts file's
        // `localhost6.localdomain6`, a URL) does not.
        Rule::Localhost if !written.trim().eq_ignore_ascii_case("localhost") => Some(format!(
            "@connect {} is this computer: the script may send requests to its local services",
            crate::text::ellipsize(written.trim(), 80)
        )),
        Rule::Domain(d) if !bare(d).contains('.') => Some(format!(
            "@connect {d} lets the script send requests to every site under .{}",
            bare(d)
        )),
        Rule::Domain(d) if is_private_network(d) => Some(format!(
            "@connect {d} is on your local network: the script may send requests to a device there (a router, a printer){}",
            spelled(d)
        )),
        Rule::Domain(d) if is_public_suffix(d) => Some(format!(
            "@connect {d} lets the script send requests to every site under .{}: a public \
             suffix, under which each name is a different owner's site",
            bare(d)
        )),
        Rule::Domain(d) if read_as_punycode(d, written) => Some(format!(
            "@connect {}: the browser reads this host as {d}, the name of the site it names \
             (not of any site it looks like)",
            crate::text::ellipsize(written.trim(), 80)
        )),
        _ => None,
    }
}

/// What a rule lets the script reach, in the review's words (`written`: the line's value).
pub fn reach(rule: &Rule, written: &str) -> String {
    let line = format!("@connect {}", crate::text::ellipsize(written.trim(), 200));
    match rule {
        Rule::Any => format!(
            "May send requests to ANY site on the internet ({line}; not this computer or your local network)"
        ),
        Rule::SelfHost => format!("May send requests to the site it runs on ({line})"),
        Rule::Localhost => format!("May send requests to this computer's local services ({line})"),
        Rule::Ip(a) if is_loopback(a) => {
            format!("May send requests to this computer's local services at {a} ({line})")
        }
        Rule::Ip(a) if is_private_network(a) => {
            format!("May send requests to a device on your local network at {a} ({line})")
        }
        Rule::Ip(a) => format!("May send requests to {a} ({line})"),
        Rule::Domain(d) if !bare(d).contains('.') => format!(
            "May send requests to every site under .{b} and to a device named {b} on your local network ({line})",
            b = bare(d)
        ),
        Rule::Domain(d) if is_private_network(d) => format!(
            "May send requests to {d} and its subdomains, on your local network ({line})"
        ),
        Rule::Domain(d) if is_public_suffix(d) => format!(
            "May send requests to every site under .{}, each a different owner's ({line})",
            bare(d)
        ),
        Rule::Domain(d) => format!("May send requests to {d} and its subdomains ({line})"),
    }
}

/// What a rule reaches, in a few words beside its line where the line alone may mislead (the
/// options page's list): `*`, a bare top-level name, this computer, the local network, an
/// address spelled other than its canonical form, a name written with letters that are not
/// ASCII (the punycode name the browser reads). `None` where the line says it.
pub fn note(rule: &Rule, written: &str) -> Option<String> {
    let w = written.trim();
    match rule {
        Rule::Any => Some("any site on the internet".to_owned()),
        Rule::Localhost => Some("this computer".to_owned()),
        Rule::Ip(a) if is_loopback(a) => Some(format!("this computer: {a}")),
        Rule::Ip(a) if is_private_network(a) => Some(format!("your local network: {a}")),
        Rule::Ip(a) if !w.eq_ignore_ascii_case(a) => Some(a.clone()),
        Rule::Domain(d) if !bare(d).contains('.') => Some(format!("every site under .{}", bare(d))),
        Rule::Domain(d) if is_private_network(d) => Some(format!("your local network: {d}")),
        Rule::Domain(d) if is_public_suffix(d) => Some(format!("every site under .{}", bare(d))),
        // Letters that are not ASCII: another site than the one it may look like.
        Rule::Domain(d) if read_as_punycode(d, w) => Some(d.clone()),
        _ => None,
    }
}

/// Whether a domain written with letters that are not ASCII is read by the browser as a
/// punycode name (`xn--…`), which the line does not show: the site it names, not the one it may
/// look like. (An invisible character the URL parser drops, as in `bank.example` followed by
/// U+200B, leaves the name as shown: the options page marks that character.)
fn read_as_punycode(canonical: &str, written: &str) -> bool {
    !written.is_ascii() && canonical.split('.').any(|label| label.starts_with("xn--"))
}

/// A name without the root's trailing dot (`com.` is `com`).
fn bare(name: &str) -> &str {
    name.strip_suffix('.').unwrap_or(name)
}

fn is_ip(host: &str) -> bool {
    host.starts_with('[') || host.parse::<Ipv4Addr>().is_ok()
}

/// Names the stock hosts files of Linux distributions give this machine (Fedora and RHEL:
/// `localhost.localdomain`, `localhost4`, `localhost4.localdomain4`, `localhost6`,
/// `localhost6.localdomain6`; Debian and Ubuntu: `ip6-localhost`, `ip6-loopback`). Chrome
/// resolves them through the system, which answers them from that file.
const HOSTS_FILE_NAMES: &[&str] = &[
    "localhost.localdomain",
    "localhost4",
    "localhost4.localdomain4",
    "localhost6",
    "localhost6.localdomain6",
    "ip6-localhost",
    "ip6-loopback",
];

/// The machine itself, in the forms the URL parser keeps: `localhost` and `*.localhost` (with
/// or without the root's trailing dot, which Chrome resolves the same), the hosts file's names
/// for it ([`HOSTS_FILE_NAMES`]), 127.0.0.0/8, `0.0.0.0` (which connects to this machine),
/// `[::1]`, `[::]`, and IPv6 spellings of those IPv4 addresses (`[::ffff:7f00:1]`, which the
/// parser makes of `[::ffff:127.0.0.1]`). A name that resolves to a local address (a wildcard
/// DNS service, a line the user added to the hosts file) cannot be told from here.
pub fn is_loopback(host: &str) -> bool {
    let name = host.strip_suffix('.').unwrap_or(host);
    let local_v4 = |a: Ipv4Addr| a.is_loopback() || a.is_unspecified();
    name == "localhost"
        || name.ends_with(".localhost")
        || HOSTS_FILE_NAMES.contains(&name)
        || host.parse::<Ipv4Addr>().is_ok_and(local_v4)
        || host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .and_then(|h| h.parse::<Ipv6Addr>().ok())
            .is_some_and(|a| {
                a.is_loopback() || a.is_unspecified() || a.to_ipv4().is_some_and(local_v4)
            })
}

/// The user's own network, as far as a host in canonical form shows it: private and shared
/// IPv4 ranges (10/8, 172.16/12, 192.168/16, 100.64/10), link-local (169.254/16, `fe80::/10`),
/// unique local IPv6 (`fc00::/7`) and the IPv6 forms that carry one of those IPv4 addresses
/// ([`embedded_ipv4`]); and names only a local resolver answers ([`LOCAL_SUFFIXES`], and one
/// label such as `router`). A public name that resolves into the network cannot be told from
/// here, nor an address under a network's own NAT64 prefix.
pub fn is_private_network(host: &str) -> bool {
    let name = host.strip_suffix('.').unwrap_or(host);
    let v4 = |a: Ipv4Addr| {
        let [x, y, ..] = a.octets();
        a.is_private() || a.is_link_local() || (x == 100 && (64..128).contains(&y))
    };
    if let Ok(a) = name.parse::<Ipv4Addr>() {
        return v4(a);
    }
    if let Some(a) = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .and_then(|h| h.parse::<Ipv6Addr>().ok())
    {
        let [s0, ..] = a.segments();
        // Carried by NAT64 or 6to4, loopback and the unspecified address are not this computer
        // (the gateway, the tunnel's far end), nor the internet.
        let near = |b: Ipv4Addr| v4(b) || b.is_loopback() || b.is_unspecified();
        return (s0 & 0xfe00) == 0xfc00
            || (s0 & 0xffc0) == 0xfe80
            || embedded_ipv4(a).is_some_and(near);
    }
    !name.is_empty()
        && (!name.contains('.')
            || LOCAL_SUFFIXES.iter().any(|s| {
                name.strip_suffix(s)
                    .is_some_and(|head| head.is_empty() || head.ends_with('.'))
            }))
}

/// Top-level names (and `home.arpa`) that only a local resolver answers, by convention: RFC
/// 6762 Appendix G's `intranet`, `internal` (reserved by ICANN for private use, 2024),
/// `private`, `corp`, `home`, `lan`; `local` (mDNS); `localdomain` (a distribution's default
/// domain); RFC 8375's `home.arpa`. None is delegated in the public DNS.
const LOCAL_SUFFIXES: &[&str] = &[
    "local",
    "lan",
    "home",
    "corp",
    "internal",
    "intranet",
    "private",
    "localdomain",
    "home.arpa",
];

/// The IPv4 address an IPv6 one carries, where a connection to it may reach that IPv4 address:
/// IPv4-mapped (`::ffff:0:0/96`, which is the IPv4 address), IPv4-compatible (`::/96` but `::`
/// and `::1`; deprecated, still what the URL parser keeps of `[::192.168.1.1]`), NAT64's
/// well-known prefix (`64:ff9b::/96`, RFC 6052) and 6to4 (`2002::/16`, RFC 3056: bits 16–47).
/// Measured in Chromium 156 on Linux: a fetch of `http://[::7f00:1]:port/` connects to that
/// IPv6 address as written (no route here, so it fails) and does not reach 127.0.0.1; what a
/// network with a NAT64 gateway or a 6to4 relay does with it is up to that network.
fn embedded_ipv4(a: Ipv6Addr) -> Option<Ipv4Addr> {
    let [s0, s1, s2, s3, s4, s5, s6, s7] = a.segments();
    let last = || Ipv4Addr::from((u32::from(s6) << 16) | u32::from(s7));
    match (s0, s1, s2, s3, s4, s5) {
        (0, 0, 0, 0, 0, 0xffff) => Some(last()),
        (0, 0, 0, 0, 0, 0) if (s6, s7) != (0, 0) && (s6, s7) != (0, 1) => Some(last()),
        (0x64, 0xff9b, 0, 0, 0, 0) => Some(last()),
        (0x2002, ..) => Some(Ipv4Addr::from((u32::from(s1) << 16) | u32::from(s2))),
        _ => None,
    }
}

/// Whether a name is a public suffix, as far as the small part of the Public Suffix List kept
/// here knows ([`super::public_suffixes`]): `co.uk`, `com.au`, `co.jp` and the other
/// second-level suffixes of the common labels under country codes, every second-level name
/// under `.ck`, `.bd` and the like, and the hosting suffixes (`github.io`, `pages.dev`…). A
/// bare top-level name is judged apart (one label). Not known here: the list's other 6,000
/// and more (`nom.fr`, `kyoto.jp`, `pvt.k12.ma.us`, most of its private section).
fn is_public_suffix(name: &str) -> bool {
    use super::public_suffixes::{EVERY_SECOND_LEVEL, HOSTED, SECOND_LEVEL};
    let name = bare(name);
    let Some((label, code)) = name.split_once('.') else {
        return false;
    };
    let has =
        |codes: &str| code.len() == 2 && codes.as_bytes().chunks(2).any(|c| c == code.as_bytes());
    HOSTED.contains(&name)
        || SECOND_LEVEL
            .iter()
            .any(|(l, codes)| *l == label && has(codes))
        || (has(EVERY_SECOND_LEVEL) && name != "www.ck")
}

/// A redirect that leads inward, which is never followed whatever the rules name: the request's
/// sender chose the server, not what it points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inward {
    /// Onto this computer, from another host.
    ThisComputer,
    /// Into the local network, from the internet.
    LocalNetwork,
}

/// Whether a hop from `from` to `to` (canonical hosts) leads inward (`None`: any other hop).
/// Shared by `GM_xmlhttpRequest` (`xhr::follow`) and `@require` fetches (`assets::follow`).
pub fn inward(from: &str, to: &str) -> Option<Inward> {
    let near = |h: &str| is_loopback(h) || is_private_network(h);
    if is_loopback(to) && !is_loopback(from) {
        Some(Inward::ThisComputer)
    } else if near(to) && !near(from) {
        Some(Inward::LocalNetwork)
    } else {
        None
    }
}

/// Whether a request to `target` (a canonical host) is allowed by `rules`, for a script
/// running in a page whose host is `page` (`None` when unknown: `self` then allows nothing).
pub fn allows(rules: &[Rule], target: &str, page: Option<&str>) -> bool {
    if target.is_empty() {
        return false;
    }
    rules.iter().any(|r| match r {
        Rule::Any => !is_loopback(target) && !is_private_network(target),
        Rule::SelfHost => page.is_some_and(|p| !p.is_empty() && p == target),
        Rule::Localhost => is_loopback(target),
        Rule::Ip(a) => a == target,
        Rule::Domain(d) => {
            !is_ip(target)
                && !is_loopback(target)
                && (target == d
                    || target
                        .strip_suffix(d.as_str())
                        .is_some_and(|head| head.ends_with('.')))
        }
    })
}

/// Every rule of a script's `@connect` values that parses (the others were reported when the
/// script was validated).
pub fn rules(web: &dyn WebPlatform, values: &[String]) -> Vec<Rule> {
    values.iter().filter_map(|v| parse(web, v).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::web::platform;

    fn rule(v: &str) -> Rule {
        parse(platform(), v).unwrap()
    }

    fn ok(rules: &[&str], target: &str, page: Option<&str>) -> bool {
        let rs: Vec<Rule> = rules.iter().map(|r| rule(r)).collect();
        allows(&rs, target, page)
    }

    #[test]
    fn parses_every_form() {
        assert_eq!(rule("*"), Rule::Any);
        assert_eq!(rule("self"), Rule::SelfHost);
        assert_eq!(rule("localhost"), Rule::Localhost);
        assert_eq!(rule("Example.COM"), Rule::Domain("example.com".into()));
        assert_eq!(rule("*.example.com"), Rule::Domain("example.com".into()));
        assert_eq!(
            rule("https://api.example.com/v1?x"),
            Rule::Domain("api.example.com".into())
        );
        assert_eq!(rule("example.com:8443"), Rule::Domain("example.com".into()));
        assert_eq!(
            rule("bücher.example"),
            Rule::Domain("xn--bcher-kva.example".into())
        );
        assert_eq!(rule("10.0.0.1"), Rule::Ip("10.0.0.1".into()));
        assert_eq!(rule("127.1"), Rule::Ip("127.0.0.1".into()));
        assert_eq!(rule("[::1]"), Rule::Ip("[::1]".into()));
        assert_eq!(rule("LOCALHOST"), Rule::Localhost);
        for bad in [
            "",
            "  ",
            "a b",
            "user@host",
            "*.*",
            "exa*mple.com",
            "http://",
            "[::1",
        ] {
            assert!(parse(platform(), bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn domains_cover_subdomains_only() {
        let r = ["example.com"];
        assert!(ok(&r, "example.com", None));
        assert!(ok(&r, "api.example.com", None));
        assert!(ok(&r, "a.b.example.com", None));
        assert!(!ok(&r, "badexample.com", None));
        assert!(!ok(&r, "example.com.evil.net", None));
        assert!(!ok(&r, "example.org", None));
        assert!(!ok(&r, "", None));
    }

    #[test]
    fn ips_match_exactly_and_never_by_domain() {
        assert!(ok(&["10.0.0.1"], "10.0.0.1", None));
        assert!(!ok(&["10.0.0.1"], "10.0.0.2", None));
        // A domain rule ending like an address does not cover an address.
        assert!(!ok(&["0.1"], "10.0.0.1", None));
        assert!(ok(&["[::1]"], "[::1]", None));
    }

    #[test]
    fn self_is_the_page_host_exactly() {
        assert!(ok(&["self"], "a.test", Some("a.test")));
        assert!(!ok(&["self"], "b.a.test", Some("a.test")));
        assert!(!ok(&["self"], "a.test", None));
        assert!(!ok(&["self"], "", Some("")));
        // The page on the machine itself: self reaches it.
        assert!(ok(&["self"], "localhost", Some("localhost")));
    }

    #[test]
    fn loopback_only_when_declared() {
        for lo in [
            "localhost",
            "x.localhost",
            "127.0.0.1",
            "127.9.9.9",
            "[::1]",
            // What the URL parser keeps of other spellings of this machine.
            "localhost.",
            "x.localhost.",
            "0.0.0.0",
            "[::]",
            "[::ffff:7f00:1]",
            "[::ffff:0:0]",
            "[::7f00:1]",
        ] {
            assert!(!ok(&["*"], lo, None), "* must not reach {lo}");
            assert!(ok(&["localhost"], lo, None), "localhost reaches {lo}");
        }
        assert!(!ok(&["example.com"], "localhost", None));
        // Other hosts that merely look alike are not loopback.
        for other in [
            "localhost.example.com",
            "mylocalhost.example",
            "[::2]",
            "[::ffff:808:808]",
            "0.0.0.1",
        ] {
            assert!(ok(&["*"], other, None), "* reaches {other}");
        }
        assert!(ok(&["127.0.0.1"], "127.0.0.1", None));
        assert!(!ok(&["localhost"], "example.com", None));
    }

    /// The names a stock Linux hosts file gives this machine (Fedora and RHEL:
    /// `127.0.0.1 localhost localhost.localdomain localhost4 localhost4.localdomain4`, `::1 …
    /// localhost6 localhost6.localdomain6`; Debian and Ubuntu: `::1 ip6-localhost ip6-loopback`)
    /// are this computer: Chrome asks the system resolver, which answers them from that file.
    /// `*` must not reach them, nor a redirect from elsewhere lead there.
    #[test]
    fn the_hosts_file_names_of_this_computer_are_loopback() {
        for lo in [
            "localhost.localdomain",
            "localhost4.localdomain4",
            "localhost6.localdomain6",
            "localhost.localdomain.",
            "localhost4",
            "localhost6",
            "ip6-localhost",
            "ip6-loopback",
        ] {
            assert!(is_loopback(lo), "{lo}");
            assert!(!ok(&["*"], lo, None), "* must not reach {lo}");
            assert!(ok(&["localhost"], lo, None), "localhost reaches {lo}");
            assert_eq!(
                inward("api.example.com", lo),
                Some(Inward::ThisComputer),
                "{lo}"
            );
        }
        // Written as a rule, such a name is this computer, and said so.
        let r = rule("localhost.localdomain");
        assert_eq!(r, Rule::Localhost);
        assert!(ok(
            &["localhost.localdomain"],
            "localhost.localdomain",
            None
        ));
        assert!(reach(&r, "localhost.localdomain").contains("this computer"));
        // Names that only look alike are not.
        for other in [
            "localhost.localdomain.example.com",
            "mylocalhost6",
            "ip6-localhost.net",
        ] {
            assert!(!is_loopback(other), "{other}");
        }
    }

    #[test]
    fn star_is_any_other_site_and_flagged() {
        assert!(ok(&["*"], "example.com", None));
        assert!(ok(&["*"], "8.8.8.8", None));
        assert!(risk(&Rule::Any, "*").unwrap().contains("any site"));
        for com in ["com", "com."] {
            assert!(risk(&rule(com), com)
                .unwrap()
                .contains("every site under .com"));
        }
        assert!(risk(&rule("example.com"), "example.com").is_none());
        assert!(risk(&Rule::Localhost, "localhost").is_none());
        // Another name for this computer, or a device on the local network by name, is said
        // as its address would be.
        for lo in ["localhost6.localdomain6", "http://localhost:8080/"] {
            let w = risk(&rule(lo), lo).unwrap_or_default();
            assert!(w.contains("is this computer"), "{lo}: {w}");
        }
        for lan in ["router.local", "nas.lan", "printer.home.arpa"] {
            let w = risk(&rule(lan), lan).unwrap_or_default();
            assert!(w.contains("is on your local network"), "{lan}: {w}");
        }
    }

    /// The user's devices are not "any site": `*` reaches none of them; a rule naming one does,
    /// and says what it is whatever its spelling.
    #[test]
    fn the_local_network_is_reached_only_by_a_rule_that_names_it() {
        for near in [
            "192.168.1.1",
            "10.1.2.3",
            "172.16.0.1",
            "100.64.0.1",
            "169.254.169.254",
            "[fd00::1]",
            "[fe80::1]",
            "[::ffff:c0a8:101]",
            "router",
            "nas.local",
            "printer.lan",
        ] {
            assert!(!ok(&["*"], near, None), "* must not reach {near}");
        }
        assert!(ok(&["192.168.1.1"], "192.168.1.1", None));
        assert!(ok(&["nas.local"], "nas.local", None));
        assert!(ok(&["self"], "192.168.1.1", Some("192.168.1.1")));
        // Numeric spellings are read as the address they are, and said so.
        for (written, addr, words) in [
            ("2130706433", "127.0.0.1", "is this computer"),
            ("0x7f.1", "127.0.0.1", "is this computer"),
            ("127.1", "127.0.0.1", "is this computer"),
            ("3232235777", "192.168.1.1", "is on your local network"),
        ] {
            let r = rule(written);
            assert_eq!(r, Rule::Ip(addr.into()), "{written}");
            let warn = risk(&r, written).unwrap();
            assert!(
                warn.contains(words) && warn.contains(&format!("{written} is read as {addr}")),
                "{written}: {warn}"
            );
            let said = reach(&r, written);
            assert!(said.contains(addr) && said.contains(written), "{said}");
            assert!(note(&r, written).unwrap().contains(addr));
        }
        assert!(reach(&rule("2130706433"), "2130706433").contains("this computer"));
        assert!(reach(&rule("3232235777"), "3232235777").contains("your local network"));
        assert!(reach(&Rule::Any, "*").contains("not this computer or your local network"));
        assert_eq!(note(&rule("8.8.8.8"), "8.8.8.8"), None);
        assert_eq!(note(&rule("api.example.com"), "api.example.com"), None);
    }

    /// A host written with letters that are not ASCII is another site than the one it may look
    /// like (`gіthub.com` with a Cyrillic `і` is `xn--gthub-n2e.com`): validation warns and the
    /// options page (and an import's confirmation) shows the name the browser reads beside it,
    /// as for a match pattern's host.
    #[test]
    fn a_look_alike_host_is_shown_with_the_name_the_browser_reads() {
        let written = "g\u{456}thub.com";
        let r = rule(written);
        assert_eq!(r, Rule::Domain("xn--gthub-n2e.com".into()));
        let warn = risk(&r, written).expect("a warning");
        assert!(
            warn.contains("xn--gthub-n2e.com") && warn.contains(written),
            "{warn}"
        );
        assert_eq!(note(&r, written).as_deref(), Some("xn--gthub-n2e.com"));
        assert!(reach(&r, written).contains("xn--gthub-n2e.com"));
        // Through a URL or a leading `*.` too; an ASCII name is left as written.
        let url = "https://api.g\u{456}thub.com/v1";
        assert!(note(&rule(url), url).is_some_and(|n| n.contains("xn--")));
        for plain in [
            "github.com",
            "*.github.com",
            "https://api.github.com/v1",
            "xn--gthub-n2e.com",
        ] {
            assert_eq!(note(&rule(plain), plain), None, "{plain}");
            assert_eq!(risk(&rule(plain), plain), None, "{plain}");
        }
    }

    /// `co.uk` is no one's site: it is the suffix under which every UK company has its name,
    /// as `github.io` is the one under which every GitHub Pages site has its own. A rule naming
    /// one reaches all of them, and validation, the review and the options page say so; a site
    /// under one is that site.
    #[test]
    fn a_public_suffix_is_every_site_under_it() {
        for (written, suffix) in [
            ("co.uk", "co.uk"),
            ("*.com.au", "com.au"),
            ("co.jp", "co.jp"),
            ("ne.jp", "ne.jp"),
            ("ac.uk.", "ac.uk"),
            ("https://gov.br/x", "gov.br"),
            ("github.io", "github.io"),
            ("*.pages.dev", "pages.dev"),
            // Every second-level name under `.ck` is a suffix.
            ("co.ck", "co.ck"),
        ] {
            let r = rule(written);
            let warn = risk(&r, written).unwrap_or_default();
            assert!(
                warn.contains(&format!("every site under .{suffix}"))
                    && warn.contains("public suffix"),
                "{written}: {warn}"
            );
            let n = note(&r, written).unwrap_or_default();
            assert!(
                n.contains(&format!("every site under .{suffix}")),
                "{written}: {n}"
            );
            let said = reach(&r, written);
            assert!(
                said.contains(&format!("every site under .{suffix}")),
                "{said}"
            );
        }
        // A site under a suffix is one site; a name that is not a suffix is one too.
        for site in [
            "bbc.co.uk",
            "api.example.com.au",
            "user.github.io",
            "co.de",
            "com.de",
            "www.ck",
            "example.com",
        ] {
            let r = rule(site);
            assert_eq!(risk(&r, site), None, "{site}");
            assert_eq!(note(&r, site), None, "{site}");
        }
    }

    /// Names that only a local resolver answers, by convention (RFC 6762 Appendix G's
    /// `.intranet`, `.internal`, `.private`, `.corp`, `.home`, `.lan`; a distribution's default
    /// `.localdomain`; RFC 8375's `home.arpa`), are the local network wherever it is decided:
    /// `*` does not reach them, a redirect from the internet does not lead there, and a rule
    /// naming one says so.
    #[test]
    fn names_only_a_local_resolver_answers_are_the_local_network() {
        for near in [
            "nas.home",
            "nas.home.",
            "printer.corp",
            "wiki.intranet",
            "build.internal",
            "box.localdomain",
            "vault.private",
            "router.lan",
            "printer.home.arpa",
            "home.arpa",
        ] {
            assert!(is_private_network(near), "{near}");
            assert!(!ok(&["*"], near, None), "* must not reach {near}");
            assert_eq!(
                inward("api.example.com", near),
                Some(Inward::LocalNetwork),
                "{near}"
            );
            let w = risk(&rule(near), near).unwrap_or_default();
            assert!(w.contains("is on your local network"), "{near}: {w}");
        }
        // A public name that merely contains one of those words is not.
        for public in [
            "home.example.com",
            "corp.example",
            "mycorp.com",
            "intranet.example.org",
            "homelan.net",
            "arpa-home.org",
        ] {
            assert!(!is_private_network(public), "{public}");
            assert!(ok(&["*"], public, None), "* reaches {public}");
        }
    }

    /// An IPv6 address that carries a private IPv4 one is the local network too: the
    /// IPv4-compatible form (`[::c0a8:101]`, which the URL parser makes of `[::192.168.1.1]`),
    /// NAT64's well-known prefix (`64:ff9b::/96`: a NAT64 gateway connects to the IPv4 address
    /// it carries) and 6to4 (`2002::/16`: the IPv4 address is the tunnel's far end). Where the
    /// packet goes depends on the network, not on the browser (measured: Chromium connects to
    /// the IPv6 address as written, and the system routes it), so none of them is "any site".
    #[test]
    fn ipv6_forms_of_a_private_ipv4_address_are_the_local_network() {
        let canon = |h: &str| platform().parse_url(&format!("http://{h}/")).unwrap().host;
        for (written, host) in [
            ("[::192.168.1.1]", "[::c0a8:101]"),
            ("[::10.0.0.1]", "[::a00:1]"),
            ("[64:ff9b::192.168.1.1]", "[64:ff9b::c0a8:101]"),
            ("[64:ff9b::169.254.169.254]", "[64:ff9b::a9fe:a9fe]"),
            ("[2002:c0a8:101::1]", "[2002:c0a8:101::1]"),
            ("[2002:a00:1::]", "[2002:a00:1::]"),
            // Loopback and the unspecified address carried the same ways: not this computer
            // (the NAT64 gateway, the 6to4 tunnel's far end), but not the internet either.
            ("[64:ff9b::127.0.0.1]", "[64:ff9b::7f00:1]"),
            ("[2002:7f00:1::]", "[2002:7f00:1::]"),
        ] {
            assert_eq!(canon(written), host, "{written}");
            assert!(is_private_network(host), "{host}");
            assert!(!ok(&["*"], host, None), "* must not reach {host}");
            assert_eq!(
                inward("api.example.com", host),
                Some(Inward::LocalNetwork),
                "{host}"
            );
            let w = risk(&rule(written), written).unwrap_or_default();
            assert!(w.contains("is on your local network"), "{written}: {w}");
        }
        // Public IPv4 addresses carried the same ways are the internet's.
        for public in [
            "[::808:808]",
            "[64:ff9b::808:808]",
            "[2002:808:808::1]",
            "[2001:db8::c0a8:101]",
        ] {
            assert!(!is_private_network(public), "{public}");
            assert!(ok(&["*"], public, None), "* reaches {public}");
        }
    }

    #[test]
    fn no_rules_allow_nothing() {
        assert!(!allows(&[], "example.com", Some("example.com")));
    }
}
