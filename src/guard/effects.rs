//! Every effect of a write, in words, derived from the script as it is and as the write would
//! leave it. The review shows this list above the diff: a write whose code does not change can
//! still re-enable a script the user disabled, or widen where it runs, and the user must read that
//! without decoding a metadata block.
//!
//! One function, [`effects`], over (current, proposed); every tool's review goes through it.

use super::diff::visible;
use crate::gm::connect;
use crate::scripts::metadata::{Metadata, RunAt};
use crate::scripts::{match_pattern, rule_syntax};

/// One side of a write: a script as stored, or as the write would store it.
#[derive(Debug, Clone, Copy)]
pub struct Version<'a> {
    pub metadata: &'a Metadata,
    pub enabled: bool,
    pub source: &'a str,
}

/// More effects than this are summed up in one line (the diff has them all).
pub const MAX_EFFECTS: usize = 100;

/// Longest effect line, in characters: a rule with a 100 KB path must not become one line that
/// pushes every other effect, and the buttons, out of the reviewer's view. What is cut is in the
/// diff below the effects. A rule is cut before this, in its own parts (`MAX_RULE_CHARS`), so
/// its host stays in view; this bounds every other line.
pub const MAX_EFFECT_CHARS: usize = 1000;

/// Longest rule, or rule path, quoted in an effect: cut in its middle, so neither its start (the
/// scheme and host) nor its end (`*://aaa…aaa.evil.example/*`) is out of view.
const MAX_RULE_CHARS: usize = 200;

/// A rule (or a pattern's path) as an effect describes it: marked, and cut past
/// [`MAX_RULE_CHARS`]. (The rule quoted beside it is marked already, by `rules`.)
fn shown_rule(rule: &str) -> String {
    visible(&crate::text::ellipsize_middle(rule, MAX_RULE_CHARS))
}

/// `line` within [`MAX_EFFECT_CHARS`], saying when it was cut.
fn bounded(line: String) -> String {
    match line.char_indices().nth(MAX_EFFECT_CHARS) {
        None => line,
        Some((cut, _)) => {
            let more = line.get(cut..).map_or(0, |rest| rest.chars().count());
            format!(
                "{}… ({more} more characters, all in the diff below)",
                line.get(..cut).unwrap_or_default()
            )
        }
    }
}

fn quoted(s: &str) -> String {
    format!("\"{}\"", visible(s))
}

/// What a `try_script` does, in words: the tab it runs in (address and title, as the user reads
/// them), whether the script's own rules cover that page, and that nothing is kept.
pub fn try_effects(
    url: &str,
    title: &str,
    rules_match: bool,
    all_frames: bool,
    frame_urls: Option<&[String]>,
    timeout_ms: u32,
) -> Vec<String> {
    let frames = if all_frames {
        // The sites by name (a tester's: the review said "other sites" while the page hid a
        // bank's frame), as the tab holds them when the user is asked; when Chrome did not say,
        // only that they may be there.
        match frame_urls.map(|f| other_sites(url, f)) {
            None => ", in every frame of the page, including frames of other sites it embeds (a sign-in, a payment form, an ad)".to_owned(),
            Some((sites, _)) if sites.is_empty() => ", in every frame of the page (it embeds no other site now; one it adds before the run is included)".to_owned(),
            Some((sites, more)) => format!(
                ", in every frame of the page, including those of other sites it embeds now: {}{}",
                sites.join(", "),
                if more > 0 { format!(" and {more} more") } else { String::new() }
            ),
        }
    } else {
        String::new()
    };
    let mut out = vec![
        format!(
            "Runs the code below once, now, in the open tab {} ({}){frames}",
            quoted(&crate::text::ellipsize(title, 200)),
            visible(&crate::text::ellipsize(url, 500)),
        ),
        "It can read and change that page as you see it, with your logins, as an installed script would".to_owned(),
    ];
    if !rules_match {
        out.push("The script's own @match/@include rules do not cover this page: it runs here only because it is tried".to_owned());
    }
    out.push(format!(
        "Nothing is stored or registered; the agent gets back what it returned, threw and logged (stopped waiting after {} s)",
        timeout_ms / 1000
    ));
    out
}

/// The sites (hosts, as the browser holds them) of the frames in `frame_urls` other than the top
/// page's, each once, at most 10; and how many more. A `blob:` or `filesystem:` frame is its
/// inner address's site (a reviewer's: a bank's frame that replaced itself with a `blob:` page
/// went unnamed); an `about:` frame is its parent's, a `data:` one no site's.
pub fn other_sites(top: &str, frame_urls: &[String]) -> (Vec<String>, usize) {
    let web = crate::web::platform();
    let host_of = |u: &str| {
        let inner = u
            .strip_prefix("blob:")
            .or_else(|| u.strip_prefix("filesystem:"))
            .unwrap_or(u);
        web.parse_url(inner)
            .ok()
            .filter(|p| p.href.starts_with("http:") || p.href.starts_with("https:"))
            .map(|p| p.host)
    };
    let top = host_of(top);
    let mut sites: Vec<String> = Vec::new();
    for h in frame_urls.iter().filter_map(|u| host_of(u)) {
        if Some(&h) != top.as_ref() && !sites.contains(&h) {
            sites.push(h);
        }
    }
    let more = sites.len().saturating_sub(10);
    sites.truncate(10);
    (sites.iter().map(|s| visible(s)).collect(), more)
}

/// Where a `@match` / `@exclude-match` pattern runs, in words: as Chrome reads it, which is not
/// always as it reads (a look-alike host is another site, a path with `é` matches nothing).
pub fn describe_match(pattern: &str) -> String {
    if pattern == "<all_urls>" {
        return "every page of every site (http, https, file and more)".to_owned();
    }
    if let Some(why) = rule_syntax::pattern_unmatchable(pattern) {
        return format!("no page at all: {why}");
    }
    let Some((scheme, rest)) = pattern.split_once("://") else {
        return format!("pages matching {}", shown_rule(pattern));
    };
    let (host, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    if scheme == "file" {
        // Chrome ignores a file pattern's host: `file://bank.example/*` is every local file.
        return match path {
            "/*" => "every file on this computer (file)".to_owned(),
            p => format!("files on this computer at {} (file)", shown_rule(p)),
        };
    }
    let scheme = match scheme {
        "*" => "http or https".to_owned(),
        s => visible(s),
    };
    let host = match host {
        "*" => "any site".to_owned(),
        "" => "this computer".to_owned(),
        h => match h.strip_prefix("*.") {
            Some(d) => format!("{} and all its subdomains", as_read(d)),
            None => as_read(h),
        },
    };
    let pages = match path {
        "/*" => "every page".to_owned(),
        "/" => "the start page".to_owned(),
        p => format!("pages at {}", shown_rule(p)),
    };
    format!("{pages} of {host} ({scheme})")
}

/// A pattern's host (and port) as written, and as the browser reads it when that differs in more
/// than letter case: `bаnk.example` with a Cyrillic `а` is `xn--bnk-…`, another site than the
/// one it looks like.
fn as_read(host_port: &str) -> String {
    let shown = visible(host_port);
    match read_differently(host_port) {
        Some(read) => format!("{shown} (the browser reads it as {read}{})", near(&read)),
        None => shown,
    }
}

/// What a host as the browser reads it is, when it is near: this computer, the local network.
fn near(read: &str) -> &'static str {
    if connect::is_loopback(read) {
        ": this computer"
    } else if connect::is_private_network(read) {
        ": a device on your local network"
    } else {
        ""
    }
}

/// A `@require`/`@resource` URL shown, with its host as the browser reads it where that is
/// another name (a look-alike CDN, `2130706433` for this computer), as `@match` and `@connect`
/// hosts are shown.
fn url_as_read(url: &str) -> String {
    let shown = visible(url);
    let authority = url.split_once("://").map_or("", |(_, rest)| {
        rest.split(['/', '?', '#', '\\']).next().unwrap_or("")
    });
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    match read_differently(host_port) {
        Some(read) => format!(
            "{shown} (the browser reads its host as {read}{})",
            near(&read)
        ),
        None => shown,
    }
}

/// The host of a pattern's `host[:port]` as the browser reads it, where that is another name
/// than the one written: a look-alike letter (`bаnk.example` is `xn--…`), or an address in
/// another form (`3232235777` is 192.168.1.1, `0x7f.1` is 127.0.0.1; a tester's review said
/// "every page of 3232235777" for the usual router address).
fn read_differently(host_port: &str) -> Option<String> {
    let host = match host_port.rsplit_once(':') {
        Some((h, _)) if !host_port.ends_with(']') => h,
        _ => host_port,
    };
    // A wildcard is no host the browser reads: Chrome's `URL` escapes `*` as `%2A` (a reviewer
    // saw every `*://*/*` get a note). Only a host the browser may read as another is asked of
    // its URL parser (one call into JavaScript per rule of every script the pages list): not
    // ASCII, an address in some form, or escaped.
    let may_differ = !host.is_ascii()
        || host.starts_with('[')
        || host.contains('%')
        || rule_syntax::ends_in_number(host);
    if host.contains('*') || !may_differ {
        return None;
    }
    match_pattern::canonicalize_host(host).filter(|read| !read.eq_ignore_ascii_case(host))
}

/// Where an `@include` / `@exclude` glob runs, in words.
pub fn describe_glob(glob: &str) -> String {
    match rule_syntax::as_regex(glob) {
        None => {
            if let Some(why) = rule_syntax::glob_unmatchable(glob) {
                return format!("no page at all: {why}");
            }
        }
        Some(src) => {
            if let Some(why) = rule_syntax::regex_foreign_char(src) {
                return format!(
                    "any address matching {}, though {why}: where the expression needs it, \
                     it matches nothing",
                    shown_rule(glob)
                );
            }
        }
    }
    match glob {
        "*" => "every page of every site".to_owned(),
        g => format!("any address matching {}", shown_rule(g)),
    }
}

/// What the options page adds to a rule as written, where the rule alone misleads: the pages it
/// really names (none, every local file, a look-alike host's real name). `None` when the rule
/// reads as it runs.
pub fn rule_note(kind: RuleKind, rule: &str) -> Option<String> {
    let words = match kind {
        RuleKind::Pattern => describe_match(rule),
        RuleKind::Glob => describe_glob(rule),
    };
    let misleads = match kind {
        RuleKind::Pattern => {
            rule_syntax::pattern_unmatchable(rule).is_some()
                || rule.starts_with("file://")
                || rule_syntax::host_of(rule).is_some_and(|h| {
                    let h = h.strip_prefix("*.").unwrap_or(h);
                    !h.is_ascii() || read_differently(h).is_some()
                })
        }
        RuleKind::Glob => {
            words.starts_with("no page")
                || rule_syntax::as_regex(rule)
                    .is_some_and(|r| rule_syntax::regex_foreign_char(r).is_some())
        }
    };
    misleads.then_some(words)
}

/// Which grammar a rule is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleKind {
    /// `@match`, `@exclude-match`.
    Pattern,
    /// `@include`, `@exclude`.
    Glob,
}

/// A rule as written (`@match …`), where it runs in words, and its [`Rank`] where it adds pages.
type Rule = (String, String, Rank);

/// How much an effect matters when the list is too long to show whole: the effects of the lowest
/// rank are the ones summed up. A hundred one-site `@match` lines must not push "Runs on every
/// page of any site" or "@connect *" out of the list into the diff.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Rank {
    /// Widens what the script does a lot: any site, every local file, a request to any host,
    /// code from elsewhere, an API.
    Wide,
    /// One site, or a narrowing.
    Narrow,
    /// Words about the script: version, description, other keys.
    About,
}

/// Does this `@match` pattern reach beyond named sites (any host, a `.tld`, local files)?
pub(crate) fn pattern_is_wide(p: &str) -> bool {
    match rule_syntax::host_of(p) {
        None => true,
        Some(_) if p.starts_with("file:") => true,
        Some(h) => h == "*" || rule_syntax::pattern_has_tld(p),
    }
}

/// Does this `@include` reach beyond named sites (a RegExp, a glob with no literal host)?
pub(crate) fn glob_is_wide(g: &str) -> bool {
    rule_syntax::as_regex(g).is_some()
        || crate::scripts::rules::glob_superset(g) == "*://*/*"
        || g.starts_with("file:")
}

/// Does this `@connect` reach beyond named sites (any host, this computer, the local network;
/// or a value that names no host)?
pub(crate) fn connect_is_wide(c: &str) -> bool {
    match connect::parse(crate::web::platform(), c) {
        Ok(connect::Rule::Any | connect::Rule::Localhost) | Err(_) => true,
        Ok(connect::Rule::Ip(a)) => connect::is_loopback(&a) || connect::is_private_network(&a),
        Ok(connect::Rule::SelfHost | connect::Rule::Domain(_)) => false,
    }
}

/// At most `room` items of `v`, in their order: when they do not all fit, the wide ones are
/// kept first (as [`within`] keeps a review's effects), so twenty one-site rules cannot hide
/// the one that widens the script most.
pub(crate) fn wide_first(v: &[String], room: usize, wide: impl Fn(&str) -> bool) -> Vec<&String> {
    if v.len() <= room {
        return v.iter().collect();
    }
    let is_wide: Vec<bool> = v.iter().map(|x| wide(x)).collect();
    let wides = is_wide.iter().filter(|w| **w).count();
    let mut narrow_room = room.saturating_sub(wides);
    let mut wide_room = room;
    v.iter()
        .zip(is_wide)
        .filter(|(_, w)| {
            let left = if *w { &mut wide_room } else { &mut narrow_room };
            let keep = *left > 0;
            *left = left.saturating_sub(1);
            keep
        })
        .map(|(x, _)| x)
        .collect()
}

fn rank(wide: bool) -> Rank {
    if wide {
        Rank::Wide
    } else {
        Rank::Narrow
    }
}

/// The rules that decide where a script runs (where it runs, where it does not), with words.
fn rules(m: &Metadata) -> (Vec<Rule>, Vec<Rule>) {
    let runs = m
        .matches
        .iter()
        .map(|p| {
            let r = rank(pattern_is_wide(p));
            (format!("@match {}", visible(p)), describe_match(p), r)
        })
        .chain(m.include_globs.iter().map(|g| {
            let r = rank(glob_is_wide(g));
            (format!("@include {}", visible(g)), describe_glob(g), r)
        }))
        .collect();
    let except = m
        .exclude_matches
        .iter()
        .map(|p| {
            let r = rank(pattern_is_wide(p));
            (
                format!("@exclude-match {}", visible(p)),
                describe_match(p),
                r,
            )
        })
        .chain(m.exclude_globs.iter().map(|g| {
            let r = rank(glob_is_wide(g));
            (format!("@exclude {}", visible(g)), describe_glob(g), r)
        }))
        .collect();
    (runs, except)
}

/// Items of `a` not in `b`, counting repeats (a multiset difference), in `a`'s order.
fn minus<'a, T: Ord + Clone>(a: &'a [T], b: &[T]) -> Vec<&'a T> {
    let mut left: crate::vec_map::VecMap<&T, usize> = crate::vec_map::VecMap::new();
    for x in b {
        if let Some(n) = left.get_or_insert_with(x, usize::default) {
            *n += 1;
        }
    }
    a.iter()
        .filter(|x| match left.get_mut(x) {
            Some(n) if *n > 0 => {
                *n -= 1;
                false
            }
            _ => true,
        })
        .collect()
}

fn run_at_words(r: RunAt) -> &'static str {
    match r {
        RunAt::DocumentStart => "as soon as a page starts loading (document-start)",
        RunAt::DocumentEnd => "once the page's HTML is read (document-end)",
        RunAt::DocumentIdle => "after the page has loaded (document-idle)",
    }
}

fn code_lines(source: &str) -> usize {
    super::diff::js_lines(source).len()
}

/// Where the script runs: sites added and removed, in words, each with its [`Rank`].
fn site_effects(om: &Metadata, nm: &Metadata, creating: bool) -> Vec<(Rank, String)> {
    let mut meta: Vec<(Rank, String)> = Vec::new();
    let ((old_runs, old_except), (new_runs, new_except)) = (rules(om), rules(nm));
    // The rule beside its words, cut as `shown_rule` cuts them (compared whole above).
    let cut = |rule: &str| crate::text::ellipsize_middle(rule, MAX_RULE_CHARS);
    for (rule, words, r) in minus(&new_runs, &old_runs) {
        meta.push((
            *r,
            if creating {
                format!("Runs on {words} ({})", cut(rule))
            } else {
                format!("Now also runs on {words} ({})", cut(rule))
            },
        ));
    }
    for (rule, words, _) in minus(&old_runs, &new_runs) {
        meta.push((
            Rank::Narrow,
            format!("No longer runs on {words} ({} removed)", cut(rule)),
        ));
    }
    for (rule, words, _) in minus(&new_except, &old_except) {
        meta.push((
            Rank::Narrow,
            if creating {
                format!("Except on {words} ({})", cut(rule))
            } else {
                format!("No longer runs on {words} (new {})", cut(rule))
            },
        ));
    }
    for (rule, words, r) in minus(&old_except, &new_except) {
        meta.push((*r, format!("Runs again on {words} ({} removed)", cut(rule))));
    }
    if creating && new_runs.is_empty() {
        meta.push((
            Rank::Wide,
            "Runs on no site: it has no @match or @include".to_owned(),
        ));
    } else if !creating && !old_runs.is_empty() && new_runs.is_empty() {
        meta.push((
            Rank::Wide,
            "Runs on no site any more: no @match or @include is left".to_owned(),
        ));
    }

    meta
}

/// The hosts its requests may reach (`@connect`) and the code and files it loads from
/// elsewhere (`@require`, `@resource`), in words.
fn connect_effects(om: &Metadata, nm: &Metadata) -> Vec<(Rank, String)> {
    let mut out = Vec::new();
    // In the words of what the rule reaches once parsed, not as spelled: `2130706433` is this
    // computer, `3232235777` a device on the local network.
    for c in minus(&nm.connects, &om.connects) {
        out.push((
            Rank::Wide,
            match connect::parse(crate::web::platform(), c) {
                Ok(rule) => connect::reach(&rule, &visible(c)),
                Err(_) => format!("May send requests to {} (@connect)", visible(c)),
            },
        ));
    }
    for c in minus(&om.connects, &nm.connects) {
        out.push((
            Rank::Narrow,
            format!(
                "No longer sends requests to {} (@connect removed)",
                visible(c)
            ),
        ));
    }
    let mut new_files = false;
    for r in minus(&nm.requires, &om.requires) {
        new_files = true;
        out.push((
            Rank::Wide,
            format!(
                "This script loads code from {} (@require{})",
                url_as_read(r),
                fetched_when(r)
            ),
        ));
    }
    for r in minus(&om.requires, &nm.requires) {
        out.push((
            Rank::Narrow,
            format!(
                "No longer loads code from {} (@require removed)",
                visible(r)
            ),
        ));
    }
    for (name, url) in minus(&nm.resources, &om.resources) {
        new_files = true;
        out.push((
            Rank::Wide,
            format!(
                "Loads the file {} from {} (@resource{})",
                visible(name),
                url_as_read(url),
                fetched_when(url)
            ),
        ));
    }
    for (name, _) in minus(&om.resources, &nm.resources) {
        out.push((
            Rank::Narrow,
            format!("No longer loads {} (@resource removed)", visible(name)),
        ));
    }
    // Said once, not on each file's line (sixteen files made sixteen copies of it).
    if new_files {
        out.push((
            Rank::Wide,
            "Its new @require/@resource files are listed below as this review read them, with their code when it is text: the write stores exactly those bytes, read the same way, or nothing, and records their sha256".to_owned(),
        ));
    }
    out
}

/// When a new file's bytes are fixed: every review lists the file as it read it (fetched, or the
/// stored copy a restore brings back), its code shown when it is text (`guard::review_files`),
/// and the write stores those bytes; a URL naming its hash is held to it too. A tester had
/// swapped a file between a review that named only its URL and the approval, and the swapped
/// code ran.
fn fetched_when(url: &str) -> &'static str {
    let pinned = url
        .split_once('#')
        .and_then(|(_, f)| crate::gm::assets::pins(f).ok())
        .is_some_and(|p| !p.is_empty());
    if pinned {
        ", held to the hash its URL names; listed below"
    } else {
        "; listed below"
    }
}

/// What it asks for, when and where in a page it runs, and the rest of its metadata.
fn other_effects(om: &Metadata, nm: &Metadata, creating: bool) -> Vec<(Rank, String)> {
    let mut meta: Vec<(Rank, String)> = Vec::new();
    for g in minus(&nm.grants, &om.grants) {
        if g != "none" {
            meta.push((Rank::Wide, format!("Asks for @grant {}", visible(g))));
        }
    }
    for g in minus(&om.grants, &nm.grants) {
        if g != "none" {
            meta.push((Rank::Narrow, format!("Gives up @grant {}", visible(g))));
        }
    }
    meta.extend(connect_effects(om, nm));

    if om.run_at != nm.run_at && !(creating && nm.run_at == RunAt::default()) {
        meta.push((
            Rank::Wide,
            format!(
                "Runs {}{}",
                run_at_words(nm.run_at),
                if creating {
                    String::new()
                } else {
                    format!(", no longer {}", run_at_words(om.run_at))
                }
            ),
        ));
    }
    if om.no_frames != nm.no_frames {
        meta.push(if nm.no_frames {
            (
                Rank::Narrow,
                "Runs only in the top frame of a page (@noframes)".to_owned(),
            )
        } else {
            (
                Rank::Wide,
                "Now also runs inside frames of a page (@noframes removed)".to_owned(),
            )
        });
    }
    if !creating && om.version != nm.version {
        meta.push((
            Rank::About,
            format!(
                "Version {} → {}",
                om.version.as_deref().map_or("none".into(), visible),
                nm.version.as_deref().map_or("none".into(), visible)
            ),
        ));
    }
    if !creating && om.description != nm.description {
        meta.push((Rank::About, "Changes its description".to_owned()));
    }
    let key = |(k, v): &(String, String)| format!("@{} {}", visible(k), visible(v));
    // Where the script's updates come from: whoever serves that URL writes its next versions,
    // so a change there is never summed up with the details.
    let updates = |(k, _): &(String, String)| {
        k.eq_ignore_ascii_case("updateURL") || k.eq_ignore_ascii_case("downloadURL")
    };
    let rank = |kv| if updates(kv) { Rank::Wide } else { Rank::About };
    let why = |kv| {
        if updates(kv) {
            " (where updates of this script come from)"
        } else {
            ""
        }
    };
    for kv in minus(&nm.other, &om.other) {
        meta.push((
            rank(kv),
            if creating {
                format!("Declares {}{}", key(kv), why(kv))
            } else {
                format!("Adds {}{}", key(kv), why(kv))
            },
        ));
    }
    for kv in minus(&om.other, &nm.other) {
        meta.push((rank(kv), format!("Removes {}", key(kv))));
    }

    meta
}

/// At most `room` lines of `meta`, in their order: when they do not all fit, the lowest-ranked
/// ones are summed up in the last line, so what widens the script most is always read.
fn within(meta: Vec<(Rank, String)>, room: usize) -> Vec<String> {
    if meta.len() <= room {
        return meta.into_iter().map(|(_, line)| line).collect();
    }
    let keep = room.saturating_sub(1);
    let mut kept = vec![false; meta.len()];
    let mut left = keep;
    for want in [Rank::Wide, Rank::Narrow, Rank::About] {
        for (slot, (r, _)) in kept.iter_mut().zip(&meta) {
            if left > 0 && *r == want {
                *slot = true;
                left -= 1;
            }
        }
    }
    let more = meta.len() - keep;
    let mut out: Vec<String> = meta
        .into_iter()
        .zip(kept)
        .filter_map(|((_, line), k)| k.then_some(line))
        .collect();
    out.push(format!(
        "… and {more} more changes to the metadata block (fewer sites or other details), all \
         of them in the diff below"
    ));
    out
}

/// Every effect of turning `before` into `after` (None: the script does not exist on that side),
/// most consequential first: existence and enabled state, name, where it runs, what it asks for,
/// when it runs, other metadata, and the code.
pub fn effects(before: Option<&Version>, after: Option<&Version>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let (old, new) = match (before, after) {
        (None, None) => return out,
        (Some(b), None) => {
            out.push(format!(
                "Deletes the script {} and its code",
                quoted(&b.metadata.name)
            ));
            if b.enabled {
                out.push("It stops running on every site it ran on".to_owned());
            }
            return out;
        }
        (None, Some(a)) => {
            out.push(format!("Creates the script {}", quoted(&a.metadata.name)));
            out.push(if a.enabled {
                "It is enabled: it runs as soon as it is saved".to_owned()
            } else {
                "It is created disabled: it does not run until it is enabled".to_owned()
            });
            (None, a)
        }
        (Some(b), Some(a)) => {
            match (b.enabled, a.enabled) {
                (false, true) => out.push(
                    "Re-enables the script: you or an agent disabled it, and it will run again"
                        .to_owned(),
                ),
                (true, false) => {
                    out.push("Disables the script: it stops running on every site".to_owned())
                }
                _ => {}
            }
            if b.metadata.name != a.metadata.name {
                out.push(format!(
                    "Renames the script from {} to {}",
                    quoted(&b.metadata.name),
                    quoted(&a.metadata.name)
                ));
            }
            if b.metadata.namespace != a.metadata.namespace {
                out.push(format!(
                    "Changes its namespace from {} to {}",
                    b.metadata
                        .namespace
                        .as_deref()
                        .map_or("none".into(), quoted),
                    a.metadata
                        .namespace
                        .as_deref()
                        .map_or("none".into(), quoted),
                ));
            }
            (Some(b), a)
        }
    };
    let empty = Metadata::default();
    let om = old.map_or(&empty, |o| o.metadata);
    let nm = new.metadata;
    let mut meta: Vec<(Rank, String)> = Vec::new();
    let creating = old.is_none();
    meta.extend(site_effects(om, nm, creating));
    meta.extend(other_effects(om, nm, creating));
    out.extend(within(meta, MAX_EFFECTS.saturating_sub(out.len() + 1)));

    out.push(match old {
        None => format!(
            "Its code: {} lines, all in the diff below",
            code_lines(new.source)
        ),
        Some(o) if o.source == new.source => "The code does not change".to_owned(),
        Some(o) => format!(
            "Changes the code (was {} lines, becomes {}): see the diff below",
            code_lines(o.source),
            code_lines(new.source)
        ),
    });
    out.into_iter().map(bounded).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripts::metadata::parse;

    fn meta(src: &str) -> Metadata {
        parse(src).metadata.expect("valid test metadata")
    }

    fn script(extra: &[&str]) -> String {
        let mut s = String::from("// ==UserScript==\n// @name Bank helper\n");
        for l in extra {
            s.push_str("// ");
            s.push_str(l);
            s.push('\n');
        }
        s.push_str("// ==/UserScript==\nconsole.log(1);\n");
        s
    }

    #[test]
    fn a_try_in_every_frame_names_the_other_sites_it_embeds() {
        let one = try_effects("https://shop.test/", "Shop", true, false, Some(&[]), 5000);
        assert!(!one[0].contains("frame"), "{one:?}");
        let frames: Vec<String> = [
            "https://shop.test/",
            "https://bank.test/widget",
            "about:blank",
            "https://shop.test/inner",
            "https://bank.test/other",
            "https://ads.test/x",
            "blob:https://vault.test/1f2e",
            "data:text/html,x",
        ]
        .map(str::to_owned)
        .to_vec();
        let all = try_effects(
            "https://shop.test/",
            "Shop",
            true,
            true,
            Some(&frames),
            5000,
        );
        assert!(
            all[0].ends_with(
                "in every frame of the page, including those of other sites it embeds now: \
                 bank.test, ads.test, vault.test"
            ),
            "{all:?}"
        );
        let alone = try_effects(
            "https://shop.test/",
            "Shop",
            true,
            true,
            Some(&frames[..1]),
            5000,
        );
        assert!(
            alone[0].contains("it embeds no other site now"),
            "{alone:?}"
        );
        // Chrome did not list the frames: no "none now".
        let unknown = try_effects("https://shop.test/", "Shop", true, true, None, 5000);
        assert!(
            unknown[0].contains("including frames of other sites it embeds (a sign-in"),
            "{unknown:?}"
        );
        let many: Vec<String> = (0..13).map(|i| format!("https://s{i}.test/")).collect();
        let (sites, more) = other_sites("https://shop.test/", &many);
        assert_eq!((sites.len(), more), (10, 3));
    }

    fn between(old: &str, old_on: bool, new: &str, new_on: bool) -> Vec<String> {
        let (om, nm) = (meta(old), meta(new));
        effects(
            Some(&Version {
                metadata: &om,
                enabled: old_on,
                source: old,
            }),
            Some(&Version {
                metadata: &nm,
                enabled: new_on,
                source: new,
            }),
        )
    }

    #[test]
    fn same_code_on_a_disabled_script_says_it_re_enables_it() {
        let src = script(&["@match https://bank.example/*"]);
        let e = between(&src, false, &src, true);
        assert_eq!(
            e,
            [
                "Re-enables the script: you or an agent disabled it, and it will run again",
                "The code does not change"
            ]
        );
        let e = between(&src, true, &src, false);
        assert_eq!(e[0], "Disables the script: it stops running on every site");
        assert_eq!(
            between(&src, true, &src, true),
            ["The code does not change"]
        );
    }

    /// A rule with a 100 KB path is cut in its middle in its effect line, so the site it names
    /// stays in view; the other effects stay whole, and any other line is held to
    /// [`MAX_EFFECT_CHARS`], saying how much was cut.
    #[test]
    fn an_effect_line_is_bounded() {
        let long = format!("@match https://bank.example/{}*", "a".repeat(100_000));
        let new = script(&[long.as_str(), "@match *://*/*"]);
        let nm = meta(&new);
        let e = effects(
            None,
            Some(&Version {
                metadata: &nm,
                enabled: true,
                source: &new,
            }),
        );
        let cut = e
            .iter()
            .find(|l| l.starts_with("Runs on pages at /aaa"))
            .expect("the long rule's line");
        assert!(
            cut.chars().count() < 2 * MAX_RULE_CHARS + 60,
            "{}",
            cut.len()
        );
        // Cut in its parts, so the site it names stays in view.
        assert!(
            cut.contains("a* of bank.example (https) (@match https://bank.example/aaa"),
            "{cut}"
        );
        assert!(
            cut.ends_with("aaa*)") && cut.matches('…').count() == 2,
            "{cut}"
        );
        // A glob's end stays in view: the site it really names may be there.
        let glob = format!("@include *://{}.evil.example/*", "a".repeat(300));
        let gm = meta(&script(&[glob.as_str()]));
        let g = effects(
            None,
            Some(&Version {
                metadata: &gm,
                enabled: true,
                source: "",
            }),
        );
        assert!(
            g.iter()
                .any(|l| l.starts_with("Runs on any address matching *://aaa")
                    && l.contains("a.evil.example/* (@include *://aaa")),
            "{g:?}"
        );
        assert!(
            e.iter()
                .any(|l| l == "Runs on every page of any site (http or https) (@match *://*/*)"),
            "{e:?}"
        );
        // Two long rules that differ only past the cut are still two changes.
        let other = format!("@match https://bank.example/{}b*", "a".repeat(100_000));
        let changed = script(&[other.as_str(), "@match *://*/*"]);
        let cm = meta(&changed);
        let e = effects(
            Some(&Version {
                metadata: &nm,
                enabled: true,
                source: &new,
            }),
            Some(&Version {
                metadata: &cm,
                enabled: true,
                source: &changed,
            }),
        );
        assert!(
            e.iter()
                .any(|l| l.starts_with("Now also runs on pages at /aaa")),
            "{e:?}"
        );
        assert!(
            e.iter()
                .any(|l| l.starts_with("No longer runs on pages at /aaa")),
            "{e:?}"
        );
        // Any other line is bounded as a whole.
        assert_eq!(
            bounded("x".repeat(MAX_EFFECT_CHARS)),
            "x".repeat(MAX_EFFECT_CHARS)
        );
        let b = bounded("x".repeat(MAX_EFFECT_CHARS + 5));
        assert!(
            b.ends_with("x… (5 more characters, all in the diff below)"),
            "{b}"
        );
    }

    /// An agent that lists a hundred one-site `@match` lines before `@match *://*/*` and
    /// `@connect *` does not push those out of the review's effects into "… more changes": when
    /// the list is too long, what widens the script most stays, in order, and the one-site rules
    /// and other details are summed up.
    #[test]
    fn a_long_list_keeps_what_widens_the_script_most() {
        let mut lines: Vec<String> = (0..120)
            .map(|i| format!("@match https://s{i}.example/*"))
            .collect();
        lines.extend(
            [
                "@match *://*/*",
                "@include /.*/",
                "@grant GM_xmlhttpRequest",
                "@connect *",
                "@require https://cdn.example/x.js",
                "@run-at document-start",
                "@author Someone",
            ]
            .map(str::to_owned),
        );
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let new = script(&refs);
        let nm = meta(&new);
        let e = effects(
            None,
            Some(&Version {
                metadata: &nm,
                enabled: true,
                source: &new,
            }),
        );
        assert!(e.len() <= MAX_EFFECTS + 1, "{}", e.len());
        for wide in [
            "Runs on every page of any site (http or https) (@match *://*/*)",
            "Runs on any address matching /.*/ (@include /.*/)",
            "Asks for @grant GM_xmlhttpRequest",
            "This script loads code from https://cdn.example/x.js",
            "Runs as soon as a page starts loading (document-start)",
        ] {
            assert!(e.iter().any(|l| l.starts_with(wide)), "{wide}: {e:?}");
        }
        assert!(e.iter().any(|l| l.contains("(@connect *")), "{e:?}");
        // In order: the one-site rules first, as many as fit, then the wide ones.
        let first_wide = e.iter().position(|l| l.contains("@match *://*/*"));
        assert!(
            first_wide > e.iter().position(|l| l.contains("s0.example")),
            "{e:?}"
        );
        assert!(
            !e.iter().any(|l| l.contains("s119.example")),
            "summed up: {e:?}"
        );
        assert!(!e.iter().any(|l| l.contains("@author")), "summed up: {e:?}");
        assert!(
            e.iter().any(|l| l.starts_with("… and ")),
            "the rest is counted: {e:?}"
        );
    }

    /// The review says where a rule runs as Chrome reads it, not as it reads: an exclusion of a
    /// look-alike host names the site the browser matches (Chrome runs the script on the real
    /// one), a file pattern is every file whatever host it names, and an include that no address
    /// can hold runs nowhere.
    #[test]
    fn rules_are_said_as_chrome_reads_them() {
        let old = script(&["@match *://*/*"]);
        let new = script(&[
            "@match *://*/*",
            "@exclude-match https://b\u{430}nk.example/*",
            "@match file://bank.example/*",
            "@include *://BANK.example/*",
        ]);
        let e = between(&old, true, &new, true);
        assert!(
            e.iter().any(|l| l.starts_with(
                "No longer runs on every page of b\u{430}nk.example (the browser reads it as xn--"
            )),
            "{e:?}"
        );
        assert!(e.contains(&"Now also runs on every file on this computer (file) (@match file://bank.example/*)".to_owned()), "{e:?}");
        // An address in another form is named as the browser reads it (a tester's review said
        // "every page of 3232235777", the usual router address).
        let new_ip = script(&[
            "@match *://*/*",
            "@match http://3232235777/*",
            "@match http://0x7f.1/*",
        ]);
        let ip = between(&old, true, &new_ip, true);
        for want in [
            "3232235777 (the browser reads it as 192.168.1.1: a device on your local network)",
            "0x7f.1 (the browser reads it as 127.0.0.1: this computer)",
        ] {
            assert!(ip.iter().any(|l| l.contains(want)), "{want}: {ip:?}");
        }
        // So is the host of a file the script loads: a look-alike CDN, this computer.
        let new_files = script(&[
            "@match *://*/*",
            "@require https://cdn.jsd\u{435}livr.net/npm/x.js",
            "@resource css http://2130706433:8080/a.css",
            "@require https://cdn.jsdelivr.net/npm/y.js",
        ]);
        let files = between(&old, true, &new_files, true);
        for want in [
            "This script loads code from https://cdn.jsd\u{435}livr.net/npm/x.js (the browser reads its host as cdn.xn--jsdlivr-",
            "Loads the file css from http://2130706433:8080/a.css (the browser reads its host as 127.0.0.1: this computer)",
            "This script loads code from https://cdn.jsdelivr.net/npm/y.js (@require",
        ] {
            assert!(files.iter().any(|l| l.starts_with(want)), "{want}: {files:?}");
        }
        assert_eq!(
            rule_note(RuleKind::Pattern, "http://3232235777/*").as_deref(),
            Some("every page of 3232235777 (the browser reads it as 192.168.1.1: a device on your local network) (http)")
        );
        assert_eq!(rule_note(RuleKind::Pattern, "https://example.com/*"), None);
        assert!(
            e.iter().any(|l| l.starts_with(
                "Now also runs on no page at all: its scheme or host has capital letters"
            )),
            "{e:?}"
        );
        assert_eq!(rule_note(RuleKind::Pattern, "https://bank.example/*"), None);
        assert_eq!(
            rule_note(RuleKind::Pattern, "https://bank.example/caf\u{e9}*"),
            None
        );
        assert_eq!(rule_note(RuleKind::Glob, "*://bank.example/*"), None);
        assert!(rule_note(RuleKind::Glob, "*://bank.example/*\u{200b}")
            .is_some_and(|n| n.starts_with("no page at all")));
        // The guard tests a regular expression against `location.href`, which holds `é` as
        // %C3%A9: the note says so, and an ASCII expression needs none.
        let note = rule_note(RuleKind::Glob, "/bank\\.example\\/caf\u{e9}/");
        assert!(
            note.as_deref()
                .is_some_and(|n| n.starts_with("any address matching /bank")
                    && n.contains("\"\u{e9}\" (U+00E9) is in no address")
                    && n.ends_with("where the expression needs it, it matches nothing")),
            "{note:?}"
        );
        assert_eq!(
            rule_note(RuleKind::Glob, "/bank\\.example\\/caf%C3%A9/"),
            None
        );
        assert_eq!(rule_note(RuleKind::Glob, "/(?<n>bank)\\.example/"), None);
    }

    #[test]
    fn match_rule_changes_are_said_in_words() {
        let old = script(&[
            "@match https://bank.example/*",
            "@exclude-match https://bank.example/login*",
        ]);
        let new = script(&[
            "@match https://bank.example/*",
            "@match *://*/*",
            "@include *",
        ]);
        let e = between(&old, true, &new, true);
        assert!(
            e.contains(
                &"Now also runs on every page of any site (http or https) (@match *://*/*)"
                    .to_owned()
            ),
            "{e:?}"
        );
        assert!(
            e.contains(&"Now also runs on every page of every site (@include *)".to_owned()),
            "{e:?}"
        );
        assert!(e.contains(&"Runs again on pages at /login* of bank.example (https) (@exclude-match https://bank.example/login* removed)".to_owned()), "{e:?}");
        let e = between(&new, true, &old, true);
        assert!(e.contains(&"No longer runs on every page of any site (http or https) (@match *://*/* removed)".to_owned()), "{e:?}");
        assert!(e.contains(&"No longer runs on pages at /login* of bank.example (https) (new @exclude-match https://bank.example/login*)".to_owned()), "{e:?}");
        let none = script(&[]);
        let e = between(&old, true, &none, true);
        assert!(
            e.contains(&"Runs on no site any more: no @match or @include is left".to_owned()),
            "{e:?}"
        );
        assert_eq!(
            describe_match("https://*.example.com/*"),
            "every page of example.com and all its subdomains (https)"
        );
        assert_eq!(
            describe_match("file:///home/*"),
            "files on this computer at /home/* (file)"
        );
    }

    #[test]
    fn connect_require_and_resource_are_said_in_words() {
        let old = script(&["@match https://a.example/*"]);
        let new = script(&[
            "@match https://a.example/*",
            "@connect *",
            "@connect localhost",
            "@require https://cdn.example/lib.js",
            "@resource logo https://cdn.example/logo.png",
        ]);
        let e = between(&old, true, &new, true);
        for want in [
            "May send requests to ANY site on the internet (@connect *; not this computer or your local network)",
            "May send requests to this computer's local services (@connect localhost)",
            "This script loads code from https://cdn.example/lib.js (@require; listed below)",
            "Loads the file logo from https://cdn.example/logo.png (@resource; listed below)",
            "Its new @require/@resource files are listed below as this review read them, with their code when it is text: the write stores exactly those bytes, read the same way, or nothing, and records their sha256",
        ] {
            assert!(e.contains(&want.to_owned()), "{want}: {e:?}");
        }
    }

    #[test]
    fn a_review_says_the_new_files_are_shown_and_their_bytes_kept() {
        let old = script(&[]);
        let new = script(&[
            "@require https://cdn.example/lib.js",
            "@require https://cdn.example/p.js#sha256=2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
        ]);
        let (om, nm) = (meta(&old), meta(&new));
        let v = |m, s| Version {
            metadata: m,
            enabled: true,
            source: s,
        };
        let e = effects(Some(&v(&om, &old)), Some(&v(&nm, &new)));
        assert!(
            e.contains(
                &"This script loads code from https://cdn.example/lib.js (@require; listed below)"
                    .to_owned()
            ),
            "{e:?}"
        );
        assert!(
            e.iter().any(|l| l
                .starts_with("This script loads code from https://cdn.example/p.js#sha256=")
                && l.ends_with("(@require, held to the hash its URL names; listed below)")),
            "{e:?}"
        );
        // What "listed below" means, said once.
        let said: Vec<&String> = e
            .iter()
            .filter(|l| l.contains("the write stores exactly those bytes"))
            .collect();
        assert_eq!(said.len(), 1, "{e:?}");
        assert!(!e.iter().any(|l| l.contains("not shown")), "{e:?}");
        // No new file, nothing to say.
        let e = effects(Some(&v(&nm, &new)), Some(&v(&nm, &new)));
        assert!(!e.iter().any(|l| l.contains("listed below")), "{e:?}");
    }

    #[test]
    fn grants_timing_frames_and_other_keys_are_listed() {
        let old = script(&["@match https://a.example/*", "@grant none", "@author me"]);
        let new = script(&[
            "@match https://a.example/*",
            "@grant GM_xmlhttpRequest",
            "@run-at document-start",
            "@noframes",
            "@connect evil.example",
            "@author me",
        ]);
        let e = between(&old, true, &new, true);
        for want in [
            "Asks for @grant GM_xmlhttpRequest",
            "Runs as soon as a page starts loading (document-start), no longer after the page has loaded (document-idle)",
            "Runs only in the top frame of a page (@noframes)",
            "May send requests to evil.example and its subdomains (@connect evil.example)",
        ] {
            assert!(e.contains(&want.to_owned()), "{want}: {e:?}");
        }
        assert!(
            !e.iter().any(|x| x.contains("@author")),
            "unchanged keys are not listed: {e:?}"
        );
        let e = between(&new, true, &old, true);
        assert!(
            e.contains(&"Gives up @grant GM_xmlhttpRequest".to_owned()),
            "{e:?}"
        );
        assert!(
            e.contains(&"No longer sends requests to evil.example (@connect removed)".to_owned()),
            "{e:?}"
        );
        assert!(
            e.contains(&"Now also runs inside frames of a page (@noframes removed)".to_owned()),
            "{e:?}"
        );
    }

    /// A new `@updateURL`/`@downloadURL` names who writes the script's next versions: said
    /// among what widens the script, never summed up behind a hundred other lines. (Before, it
    /// was a detail, the first to be summed up.)
    #[test]
    fn a_new_update_url_is_never_summed_up() {
        let old = script(&[
            "@match https://a.example/*",
            "@updateURL https://good.example/x.user.js",
        ]);
        let mut lines: Vec<String> = (0..120)
            .map(|i| format!("@match https://s{i}.example/*"))
            .collect();
        lines.push("@updateURL https://evil.example/x.user.js".into());
        lines.push("@downloadURL https://evil.example/x.user.js".into());
        lines.push("@author Someone".into());
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let e = between(&old, true, &script(&refs), true);
        assert!(e.len() <= MAX_EFFECTS + 1, "{}", e.len());
        for want in [
            "Adds @updateURL https://evil.example/x.user.js (where updates of this script come from)",
            "Adds @downloadURL https://evil.example/x.user.js (where updates of this script come from)",
            "Removes @updateURL https://good.example/x.user.js",
        ] {
            assert!(e.contains(&want.to_owned()), "{want}: {e:?}");
        }
        assert!(!e.iter().any(|l| l.contains("@author")), "summed up: {e:?}");
    }

    #[test]
    fn create_and_delete_state_everything() {
        let src = script(&[
            "@match https://a.example/*",
            "@exclude *://a.example/admin*",
            "@grant GM_setValue",
        ]);
        let m = meta(&src);
        let v = Version {
            metadata: &m,
            enabled: false,
            source: &src,
        };
        let e = effects(None, Some(&v));
        assert_eq!(e[0], "Creates the script \"Bank helper\"");
        assert_eq!(
            e[1],
            "It is created disabled: it does not run until it is enabled"
        );
        assert!(
            e.contains(
                &"Runs on every page of a.example (https) (@match https://a.example/*)".to_owned()
            ),
            "{e:?}"
        );
        assert!(e.contains(&"Except on any address matching *://a.example/admin* (@exclude *://a.example/admin*)".to_owned()), "{e:?}");
        assert!(
            e.contains(&"Asks for @grant GM_setValue".to_owned()),
            "{e:?}"
        );
        assert_eq!(
            e.last().map(String::as_str),
            Some("Its code: 7 lines, all in the diff below")
        );
        let v = Version { enabled: true, ..v };
        let e = effects(Some(&v), None);
        assert_eq!(
            e,
            [
                "Deletes the script \"Bank helper\" and its code",
                "It stops running on every site it ran on"
            ]
        );
    }

    #[test]
    fn hidden_characters_in_rules_are_visible_and_the_list_is_bounded() {
        let old = script(&[]);
        let new = script(&["@match https://a.example/*\u{202E}"]);
        // Whatever the parser makes of it, no hidden character reaches the words.
        if let Some(nm) = parse(&new).metadata {
            let om = meta(&old);
            let e = effects(
                Some(&Version {
                    metadata: &om,
                    enabled: true,
                    source: &old,
                }),
                Some(&Version {
                    metadata: &nm,
                    enabled: true,
                    source: &new,
                }),
            );
            assert!(e.iter().all(|x| !x.contains('\u{202E}')), "{e:?}");
        }
        let many: Vec<String> = (0..200)
            .map(|i| format!("@match https://s{i}.example/*"))
            .chain((0..200).map(|i| format!("@exclude-match https://s{i}.example/x")))
            .collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        let e = between(&old, true, &script(&refs), true);
        assert!(e.len() <= MAX_EFFECTS + 1, "{}", e.len());
        assert!(
            e.iter()
                .any(|x| x.starts_with("… and ") && x.contains("more changes")),
            "{e:?}"
        );
    }
}
