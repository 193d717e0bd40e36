//! The syntax of one `@include`/`@exclude`/`@match` value, shared by the metadata parser (which
//! reports it) and `rules` (which compiles it): is it a regular expression, may that expression
//! run, does it use `.tld`. Its own module so the parser and the compiler do not import each
//! other.

use super::match_pattern::chrome_decodes;
use std::fmt;

/// Longest regular expression accepted in `@include`/`@exclude` (they run on every page load).
pub const MAX_REGEX_CHARS: usize = 1000;

/// Why a regular expression in `@include`/`@exclude` is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegexError {
    /// Over [`MAX_REGEX_CHARS`] characters.
    TooLong,
    /// `new RegExp` refused it; the browser's reason.
    Invalid(String),
    /// A repeated group that itself repeats or alternates (exponential backtracking).
    NestedRepeat,
    /// More than [`MAX_UNBOUNDED_REPEATS`] unbounded repetitions.
    TooManyRepeats,
    /// Repetitions whose tries multiply past [`MAX_REGEX_STEPS`] on a long address.
    TooSlow,
}

impl fmt::Display for RegexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegexError::TooLong => write!(
                f,
                "the regular expression is over {MAX_REGEX_CHARS} characters"
            ),
            RegexError::Invalid(why) => write!(f, "invalid regular expression: {why}"),
            RegexError::NestedRepeat => f.write_str(
                "a repeated group that itself repeats or alternates (such as (a+)+ or (a|b)*) \
                 can take exponential time to match; rewrite it, or use @match or a glob",
            ),
            RegexError::TooManyRepeats => write!(
                f,
                "more than {MAX_UNBOUNDED_REPEATS} unbounded repetitions (*, +, {{n,}}) can make \
                 matching very slow; use @match or a glob for the rest"
            ),
            RegexError::TooSlow => f.write_str(
                "its repetitions multiply: on a long address, matching could take seconds, \
                 in the provider and on every page load (each *, + or {n,} can try every \
                 position, {0,10} eleven counts, ? two, a group of alternatives each one, and \
                 without ^ every start is tried); start it with ^, use fewer or narrower \
                 repetitions, or use @match or a glob",
            ),
        }
    }
}

impl std::error::Error for RegexError {}

/// `/…/` → the RegExp source between the slashes (Violentmonkey's rule: no flags).
pub fn as_regex(value: &str) -> Option<&str> {
    (value.len() > 1 && value.starts_with('/') && value.ends_with('/'))
        .then(|| value.get(1..value.len() - 1))
        .flatten()
}

/// Most unbounded repetitions (`*`, `+`, `{n,}`, `{n,m}` with m > 10) in one expression.
pub const MAX_UNBOUNDED_REPEATS: usize = 2;

/// The length of address the cost of an expression is reckoned on: an unbounded repetition may
/// try this many counts, an unanchored expression this many starts. `match_url` and
/// `list_scripts {url}` test no longer address (`tools::read`: as the browser holds it,
/// percent-encoded, a 4 KiB URL of non-ASCII text is three times as long).
pub const COST_ADDRESS_CHARS: u64 = 4096;

/// The most tries an expression's starts and repetitions may multiply to
/// ([`RegexError::TooSlow`]): a backtracking matcher (V8's, the guard's in each page and
/// `match_url`'s in the worker, with no step limit) may take about that many steps — one
/// unbounded repetition (not the last) in an unanchored expression, or two in an anchored one,
/// and no more. Measured in V8: `.{0,10}` six times then `Z`, unanchored, 5.8 s on 115
/// characters; `.*a.*Z` 30 s on 4,000; `.*google.*search` 4.7 s on a crafted 4 KB address.
pub const MAX_REGEX_STEPS: u64 = 100_000_000;

/// The most choices an expression's bounded repetitions (`?` two, `{2,5}` four) and
/// alternatives (those of one group added, each branch's own multiplied) may make at one
/// start: they cost the same on a short address, and a choice through groups costs V8 far more
/// than a step of `.*` (24 `(?:a|\w)` then `Z`: 15 s on 55 characters).
pub const MAX_REGEX_CHOICES: u64 = 4096;

/// Checks a user regular expression the way `new RegExp(src)` would, and refuses the shapes
/// that make a backtracking matcher take exponential or high-polynomial time (`match_url`
/// evaluates it in the service worker, with no step limit, on a URL the agent chooses).
pub fn check_regex(src: &str) -> Result<(), RegexError> {
    check_regex_syntax(src)?;
    check_cost(src)
}

/// Whether `new RegExp(src)` takes the expression, within [`MAX_REGEX_CHARS`]: what compiling a
/// stored script's rules asks (`rules::compile`). The cost is a write's question: a stored
/// script keeps every rule it was written with (dropped at registration, an exclude would let
/// it run where the user kept it off).
pub fn check_regex_syntax(src: &str) -> Result<(), RegexError> {
    if src.chars().count() > MAX_REGEX_CHARS {
        return Err(RegexError::TooLong);
    }
    crate::web::platform()
        .regex_compile_check(src, "")
        .map_err(|e| {
            // V8 already starts its message with this phrase; say it once.
            let why =
                e.0.strip_prefix("Invalid regular expression: ")
                    .unwrap_or(&e.0);
            RegexError::Invalid(why.to_owned())
        })?;
    Ok(())
}

/// A quantifier at the start of `rest`, or `None` when there is none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Quantifier {
    /// `*`, `+`, `{n,}` or a range past 10 ([`MAX_UNBOUNDED_REPEATS`]).
    unbounded: bool,
    /// How many counts the matcher may try: `?` two, `{2,5}` four, `{3}` one, `*` an address.
    tries: u64,
    /// The fewest counts: each try walks at least this many characters.
    min: u64,
}

fn quantifier(rest: &[char]) -> Option<Quantifier> {
    let any = |min| Quantifier {
        unbounded: true,
        tries: COST_ADDRESS_CHARS,
        min,
    };
    match rest.first()? {
        '*' => Some(any(0)),
        '+' => Some(any(1)),
        '?' => Some(Quantifier {
            unbounded: false,
            tries: 2,
            min: 0,
        }),
        '{' => {
            let close = rest.iter().position(|&c| c == '}')?;
            let body: String = rest.get(1..close)?.iter().collect();
            let (lo, hi) = match body.split_once(',') {
                Some((lo, hi)) => (lo, Some(hi)),
                None => (body.as_str(), None),
            };
            if lo.is_empty() || !lo.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let lo_n = lo.parse::<u64>().unwrap_or(u64::MAX);
            match hi {
                None => Some(Quantifier {
                    unbounded: lo_n > 10,
                    tries: 1,
                    min: lo_n,
                }),
                Some("") => Some(any(lo_n)),
                Some(h) if h.bytes().all(|b| b.is_ascii_digit()) => {
                    let hi_n = h.parse::<u64>().unwrap_or(u64::MAX);
                    Some(Quantifier {
                        unbounded: hi_n > 10,
                        tries: hi_n
                            .saturating_sub(lo_n)
                            .saturating_add(1)
                            .min(COST_ADDRESS_CHARS),
                        min: lo_n,
                    })
                }
                Some(_) => None,
            }
        }
        _ => None,
    }
}

/// Where the atom at `i` ends: an escape, a class (`[]` is an empty class and `[^]` any
/// character, as JavaScript reads them: the first `]` closes), or one character.
fn atom_end(chars: &[char], i: usize) -> usize {
    match chars.get(i) {
        Some('\\') => i + 2,
        Some('[') => {
            let mut j = i + 1;
            if chars.get(j) == Some(&'^') {
                j += 1;
            }
            while let Some(&d) = chars.get(j) {
                match d {
                    '\\' => j += 2,
                    ']' => break,
                    _ => j += 1,
                }
            }
            j + 1
        }
        _ => i + 1,
    }
}

/// Whether every top-level alternative of the expression starts with `^` (then it is tried at
/// one start only).
fn every_branch_anchored(chars: &[char]) -> bool {
    let mut all = chars.first() == Some(&'^');
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            '|' if depth == 0 => all &= chars.get(i + 1) == Some(&'^'),
            _ => {}
        }
        i = if c == '\\' || c == '[' {
            atom_end(chars, i)
        } else {
            i + 1
        };
    }
    all
}

/// An open group as the cost check reads it.
struct Frame {
    /// It repeats or alternates inside (a repetition of it would nest).
    complex: bool,
    /// The choices of its alternatives already closed, added.
    closed: u64,
    /// The choices of the alternative being read, multiplied.
    open: u64,
}

impl Frame {
    fn new() -> Self {
        Frame {
            complex: false,
            closed: 0,
            open: 1,
        }
    }

    fn choices(&self) -> u64 {
        self.closed.saturating_add(self.open)
    }
}

fn check_cost(src: &str) -> Result<(), RegexError> {
    let chars: Vec<char> = src.chars().collect();
    let mut frames: Vec<Frame> = vec![Frame::new()];
    let mut unbounded = 0usize;
    // Every start of the address is tried, unless every alternative is anchored.
    let mut steps: u64 = if every_branch_anchored(&chars) {
        1
    } else {
        COST_ADDRESS_CHARS
    };
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        let mut end = atom_end(&chars, i);
        let mut complex = false;
        let mut atom_choices = 1u64;
        match c {
            '(' => {
                frames.push(Frame::new());
                i += 1;
                continue;
            }
            ')' => {
                let inner = frames.pop().unwrap_or_else(Frame::new);
                if let Some(top) = frames.last_mut() {
                    top.complex |= inner.complex;
                }
                complex = inner.complex;
                atom_choices = inner.choices();
            }
            '|' => {
                if let Some(top) = frames.last_mut() {
                    top.complex = true;
                    top.closed = top.closed.saturating_add(top.open);
                    top.open = 1;
                }
                i += 1;
                continue;
            }
            // A backreference compares up to its group's length at each try.
            '\\' if chars
                .get(i + 1)
                .is_some_and(|d| matches!(d, '1'..='9' | 'k')) =>
            {
                steps = steps.saturating_mul(COST_ADDRESS_CHARS);
            }
            _ => {}
        }
        let rest = chars.get(end..).unwrap_or_default();
        if let Some(q) = quantifier(rest) {
            if complex && (q.unbounded || rest.first() == Some(&'{')) {
                return Err(RegexError::NestedRepeat);
            }
            if q.unbounded {
                unbounded += 1;
                if unbounded > MAX_UNBOUNDED_REPEATS {
                    return Err(RegexError::TooManyRepeats);
                }
            }
            if let Some(top) = frames.last_mut() {
                top.complex = true;
            }
            // Skip the quantifier (and a lazy '?').
            let qlen = if rest.first() == Some(&'{') {
                rest.iter().position(|&d| d == '}').map_or(1, |p| p + 1)
            } else {
                1
            };
            end += qlen;
            if chars.get(end) == Some(&'?') {
                end += 1;
            }
            // Each try walks at least its fewest counts.
            if q.min > 10 {
                steps = steps.saturating_mul(q.min.min(COST_ADDRESS_CHARS));
            }
            if q.tries == COST_ADDRESS_CHARS {
                // The last thing of the expression, of at most one count, succeeds at its
                // first try (nothing after it can fail): it is never tried again.
                let last = frames.len() == 1 && end >= chars.len() && q.min <= 1;
                if !last {
                    steps = steps.saturating_mul(COST_ADDRESS_CHARS);
                }
            } else {
                atom_choices = atom_choices.saturating_mul(q.tries);
            }
        }
        if let Some(top) = frames.last_mut() {
            top.open = top.open.saturating_mul(atom_choices);
        }
        if steps > MAX_REGEX_STEPS {
            return Err(RegexError::TooSlow);
        }
        i = end;
    }
    // Choices of literal alternatives mostly fail at their first character, so they and the
    // repetitions' steps are not held to one product's bound, but to one ten times as large.
    let choices = frames.first().map_or(1, Frame::choices);
    if choices > MAX_REGEX_CHOICES
        || steps.saturating_mul(choices) > MAX_REGEX_STEPS.saturating_mul(10)
    {
        return Err(RegexError::TooSlow);
    }
    Ok(())
}

/// Why a rule can never hold the text of an address Chrome loads. Chrome compares an
/// `@include`/`@exclude` glob with the whole address as the browser holds it: ASCII only (the
/// host in punycode, the rest %-encoded), never a space, `"`, `<`, `>` or a control character,
/// and the scheme and host in lowercase. Such a rule reads as the pages it names and matches none
/// of them: an `@exclude *://bank.example/café*` excludes nothing. (A match pattern's path is
/// compared after Chrome decodes some escapes, so `café` is fine there; a space is not.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unmatchable {
    /// A character no address holds where the rule needs it.
    Character(char),
    /// A capital letter in the scheme or host of a glob.
    Capital,
    /// A glob that starts with `/`: an address starts with its scheme. Most often a regular
    /// expression with flags (`/…/i`), which is not one here (Violentmonkey's rule), so it
    /// would run nowhere, or exclude nothing, without a word.
    Slash,
    /// A port no address shows: the scheme's default (`http://a:80/`), or one with a leading
    /// zero (`:080`).
    Port(String),
    /// A port the browser refuses to load a page from (`0`, and the Fetch standard's "bad
    /// ports": `:25`, `:6000`…): `net::ERR_UNSAFE_PORT`, so no script runs there.
    UnsafePort(String),
    /// `scheme://host` and nothing after it: the address always has its path, `/` at least.
    NoPath,
    /// A `.` or `..` path segment, which the browser resolves away before any rule sees it.
    DotSegment,
    /// `*.` before an IP address: Chrome matches no subdomain of an address.
    IpSubdomain,
    /// A glob whose literal start is no start of an address Chrome runs user scripts on
    /// (`about:blank`, `chrome://…`, `example.com/*`): it holds what it starts with.
    Scheme(String),
    /// A capital letter a regular expression asks for in the address's scheme or host.
    HostCapital(char),
}

impl Unmatchable {
    /// How to write the rule so it names what it meant to.
    pub fn advice(&self) -> &'static str {
        match self {
            Unmatchable::Slash => {
                "write a regular expression as /…/ with nothing after the last slash (no \
                 flags: it is tested case-sensitively against the address, whose scheme and \
                 host are lowercase), or a glob from the scheme (*://…)"
            }
            Unmatchable::Port(_) => "leave the port out, or write it as the address does",
            Unmatchable::UnsafePort(_) => "name a port a page can be loaded from",
            Unmatchable::NoPath => "add the path: scheme://host/ or scheme://host/*",
            Unmatchable::DotSegment => "write the path as it reads once resolved",
            Unmatchable::IpSubdomain => "write the address itself, without *.",
            Unmatchable::Scheme(_) => {
                "start it with the scheme of a web page or file (http://, https://, *://, \
                 file://)"
            }
            _ => {
                "write the address as the browser holds it (a host in lowercase, or punycode \
                 as xn--…; other characters %-encoded, as é is %C3%A9)"
            }
        }
    }
}

impl fmt::Display for Unmatchable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unmatchable::Character(c) => {
                let code = u32::from(*c);
                if c.is_alphanumeric() || c.is_ascii_punctuation() {
                    write!(f, "\"{c}\" (U+{code:04X})")?;
                } else {
                    write!(f, "the character U+{code:04X}")?;
                }
                f.write_str(
                    " is in no address Chrome loads (it holds a host in punycode and \
                     %-encodes the rest, and compares the rule with that text)",
                )
            }
            Unmatchable::Capital => f.write_str(
                "its scheme or host has capital letters, and Chrome compares a glob \
                 case-sensitively with the address, whose scheme and host are lowercase",
            ),
            Unmatchable::Slash => f.write_str(
                "an address starts with its scheme, never \"/\" (a regular expression with \
                 flags, /…/i, is not one: it is read as a glob)",
            ),
            Unmatchable::Port(p) => write!(
                f,
                "no address shows the port {p} (the browser leaves a scheme's default port \
                 out, and writes none with a leading zero)"
            ),
            Unmatchable::UnsafePort(p) => write!(
                f,
                "the browser loads no page from port {p} (it refuses it as unsafe: \
                 ERR_UNSAFE_PORT)"
            ),
            Unmatchable::NoPath => f.write_str(
                "it ends at the host, but an address always goes on with its path (/ at least)",
            ),
            Unmatchable::DotSegment => f.write_str(
                "its path has a . or .. segment, which the browser resolves away before the \
                 address is compared",
            ),
            Unmatchable::IpSubdomain => f.write_str(
                "an IP address has no subdomains: Chrome matches *. only before a host name",
            ),
            Unmatchable::Scheme(start) => write!(
                f,
                "Chrome runs user scripts only on pages whose address starts with http://, \
                 https:// or file://, never \"{start}\""
            ),
            Unmatchable::HostCapital(c) => write!(
                f,
                "it asks for the capital \"{c}\" in the address's scheme or host, which the \
                 browser holds in lowercase (the expression is tested case-sensitively)"
            ),
        }
    }
}

/// The first character of a `/regular expression/`'s source that no address holds: the guard
/// tests the expression against `location.href`, which is ASCII (a host in punycode, the rest
/// %-encoded) with no space. So where the expression needs that character it matches nothing
/// (`/café/` never, `/caf(é|%C3%A9)/` by its second branch): said, not refused, since only the
/// expression's shape tells which. (`<` and `>` are left out: `(?<name>…)` is syntax.)
pub fn regex_foreign_char(src: &str) -> Option<Unmatchable> {
    src.chars()
        .find(|&c| !c.is_ascii() || c.is_ascii_control() || c == ' ')
        .map(Unmatchable::Character)
        .or_else(|| regex_host_capital(src).map(Unmatchable::HostCapital))
}

/// A capital letter the expression names as itself in the address's scheme or host: before its
/// first `//` and after it, up to the first thing that may stand for a `/` (a `/`, `.`, a class,
/// an escape that is one) — `location.href` holds both in lowercase, so where the expression
/// needs it, it matches nothing (`/^https?:\/\/(www\.)?Bank\.test\//` excludes nothing). `None`
/// without a scheme's `://`, with a lookaround (`(?!Admin)` never needs its capital), or with an
/// inline modifier (`(?i:…)`), which may make it match either case. A capital before a
/// character no scheme has (`\/Redirect\?url=https?:\/\/`) is a path's, not the scheme's.
fn regex_host_capital(src: &str) -> Option<char> {
    let mut chars = src.chars().peekable();
    // The first capital seen, and whether the scheme's `://` came (a `//` elsewhere may be a
    // path's).
    let mut found = None;
    let mut slashes = 0u8;
    let mut after = false;
    let mut last = None;
    while let Some(c) = chars.next() {
        // A literal character, or `None` for syntax.
        let lit = match c {
            '\\' => match chars.next()? {
                e @ ('/' | '-' | ':' | '?' | '#' | '@' | '.' | '&' | '=' | '%' | '\\') => Some(e),
                // Any other escape may stand for a `/` (`\S`), or hold letters that are not
                // the address's (`\p{Lu}`, `\x4A`, `\cJ`): the host ends here.
                _ => break,
            },
            '(' => {
                if chars.peek() == Some(&'?') {
                    chars.next();
                    match chars.next()? {
                        ':' => {}
                        // A group's name.
                        '<' if !matches!(chars.peek(), Some('=' | '!')) => {
                            chars.by_ref().find(|&n| n == '>')?;
                        }
                        // A lookaround (`(?!Admin)` never needs its capital) or a modifier
                        // (`(?i:…)`): not read.
                        _ => return None,
                    }
                }
                None
            }
            '[' | '.' => break,
            '^' | '$' | ')' | '|' | '?' | '*' | '+' => None,
            '{' => {
                chars.by_ref().find(|&n| n == '}')?;
                None
            }
            other => Some(other),
        };
        match lit {
            Some('/') if after => break,
            Some('/') if slashes == 1 || last == Some(':') => {
                slashes += 1;
                after = slashes == 2;
            }
            Some(l) => {
                slashes = 0;
                let scheme_char = l.is_ascii_alphanumeric() || matches!(l, '+' | '-' | '.' | ':');
                if !after && !scheme_char {
                    // Not a scheme's character: what came before is a path's or a query's
                    // (`\/Redirect\?url=https?:\/\/`), where capitals are at home.
                    found = None;
                } else if l.is_ascii_uppercase() && found.is_none() {
                    found = Some(l);
                }
            }
            None => slashes = 0,
        }
        last = lit;
    }
    found.filter(|_| after)
}

/// A character that is in no address as the browser holds it.
fn never_in_address(c: char) -> bool {
    !c.is_ascii() || c.is_ascii_control() || matches!(c, ' ' | '"' | '<' | '>')
}

/// Why this `@include`/`@exclude` glob matches no page it names, if it cannot. Not for a
/// `/regular expression/`.
pub fn glob_unmatchable(glob: &str) -> Option<Unmatchable> {
    if glob.starts_with('/') {
        return Some(Unmatchable::Slash);
    }
    if let Some(c) = glob.chars().find(|&c| never_in_address(c)) {
        return Some(Unmatchable::Character(c));
    }
    // Its literal start (to the first wildcard or escape) against an address's: compared in
    // lowercase, since a capital is `Capital`'s to say.
    let literal = glob.split(['*', '?', '\\']).next().unwrap_or_default();
    let lower = literal.to_ascii_lowercase();
    let starts = ["http://", "https://", "file://"];
    if !starts
        .iter()
        .any(|s| lower.starts_with(s) || s.starts_with(lower.as_str()))
    {
        let start = match literal.find(':') {
            Some(i) => literal.get(..=i).unwrap_or(literal),
            None => literal,
        };
        return Some(Unmatchable::Scheme(crate::text::ellipsize(start, 40)));
    }
    // `scheme://host/…` with a literal host: its letters must be lowercase. (A wildcard in the
    // host may reach into the path, where capitals are at home.)
    let (scheme, rest) = glob.split_once("://")?;
    // The host without its port (`:*` is any port, not a wildcard in the host).
    let host = rest
        .split('/')
        .next()
        .and_then(|h| h.split(':').next())
        .unwrap_or_default();
    let scheme_like = !scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.*?".contains(c));
    let literal_host = !host.contains(['*', '?']);
    if let Some(why) = literal_glob_unmatchable(scheme, rest) {
        return Some(why);
    }
    (scheme_like
        && literal_host
        && format!("{scheme}{host}")
            .chars()
            .any(|c| c.is_ascii_uppercase()))
    .then_some(Unmatchable::Capital)
}

/// What a glob's literal start (`scheme://authority/path…` before its first `*`, `?` or `#`)
/// says that no address the browser holds can say (a tester's excludes, each shown as an
/// exclusion, each excluding nothing).
fn literal_glob_unmatchable(scheme: &str, rest: &str) -> Option<Unmatchable> {
    const SPECIAL: [(&str, Option<&str>); 6] = [
        ("http", Some("80")),
        ("https", Some("443")),
        ("ws", Some("80")),
        ("wss", Some("443")),
        ("ftp", Some("21")),
        ("file", None),
    ];
    let (_, default_port) = SPECIAL.iter().find(|(s, _)| *s == scheme)?;
    let authority = rest.split(['/', '\\']).next().unwrap_or_default();
    if authority.contains(['*', '?', '#']) {
        return None;
    }
    // The port: after the last `:` past an IPv6 address's `]`.
    let after_v6 = authority.rsplit_once(']').map_or(authority, |(_, a)| a);
    if let Some((_, port)) = after_v6.rsplit_once(':') {
        let zero_led = port.len() > 1 && port.starts_with('0');
        if port.bytes().all(|b| b.is_ascii_digit()) && (zero_led || Some(port) == *default_port) {
            return Some(Unmatchable::Port(port.to_owned()));
        }
        if is_unsafe_port(port) {
            return Some(Unmatchable::UnsafePort(port.to_owned()));
        }
    }
    let path = rest.get(authority.len()..).unwrap_or_default();
    if path.is_empty() {
        return Some(Unmatchable::NoPath);
    }
    let literal = path.split(['*', '?', '#']).next().unwrap_or_default();
    let whole = literal.len() == path.len();
    let dotted = literal.contains("/./")
        || literal.contains("/../")
        || (whole && (literal.ends_with("/.") || literal.ends_with("/..")));
    dotted.then_some(Unmatchable::DotSegment)
}

/// Whether the browser refuses to load a page from `port` (written in decimal, no leading zero):
/// `0`, and the Fetch standard's "bad ports" (<https://fetch.spec.whatwg.org/#bad-port>), which
/// Chromium blocks as `net::ERR_UNSAFE_PORT`.
fn is_unsafe_port(port: &str) -> bool {
    const BAD: &[u16] = &[
        0, 1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95,
        101, 102, 103, 104, 109, 110, 111, 113, 115, 117, 119, 123, 135, 137, 139, 143, 161, 179,
        389, 427, 465, 512, 513, 514, 515, 526, 530, 531, 532, 540, 548, 554, 556, 563, 587, 601,
        636, 989, 990, 993, 995, 1719, 1720, 1723, 2049, 3659, 4045, 4190, 5060, 5061, 6000, 6566,
        6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080,
    ];
    !(port.len() > 1 && port.starts_with('0'))
        && port.parse::<u16>().is_ok_and(|p| BAD.contains(&p))
}

/// Whether the URL parser reads `host` as an IPv4 address (WHATWG's "ends in a number": its last
/// label, a trailing dot aside, is decimal digits or `0x` hex), so no name is meant by it.
pub(crate) fn ends_in_number(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host);
    let last = host.rsplit('.').next().unwrap_or_default();
    let hex = last
        .strip_prefix("0x")
        .or_else(|| last.strip_prefix("0X"))
        .is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
    hex || (!last.is_empty() && last.bytes().all(|b| b.is_ascii_digit()))
}

/// Why this match pattern (valid) matches no page, if it cannot: a path holding a character that
/// the address's path and query never hold, even as Chrome decodes them for matching
/// (`match_pattern::chrome_unescape`: `é` is read from `%C3%A9`, a space never from `%20`).
/// (Its host is read as the browser reads it: punycode.)
pub fn pattern_unmatchable(pattern: &str) -> Option<Unmatchable> {
    // Chrome (since 95) opens no `ftp://` page, so no script runs on one; `match_pattern` keeps
    // the scheme, which a match pattern may name.
    if pattern.starts_with("ftp://") {
        return Some(Unmatchable::Scheme("ftp:".to_owned()));
    }
    // A `file:` pattern's host and port are ignored by Chrome (`match_pattern::parse`).
    if let Some(authority) = pattern
        .split_once("://")
        .filter(|(scheme, _)| *scheme != "file")
        .and_then(|(_, rest)| rest.split('/').next())
    {
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with('[') && !p.contains(']') => (h, Some(p)),
            _ => (authority, None),
        };
        if let Some(p) = port.filter(|p| p.len() > 1 && p.starts_with('0')) {
            return Some(Unmatchable::Port(p.to_owned()));
        }
        if let Some(p) = port.filter(|p| is_unsafe_port(p)) {
            return Some(Unmatchable::UnsafePort(p.to_owned()));
        }
        // `*.168.1.1`: what follows `*.` ends in a number, so only an address could match it,
        // and Chrome matches no subdomain of an address (a full `*.127.0.0.1` is left alone).
        if let Some(rest) = host.strip_prefix("*.") {
            if ends_in_number(rest) && rest.split('.').count() < 4 {
                return Some(Unmatchable::IpSubdomain);
            }
        }
    }
    let path = match pattern.split_once("://") {
        Some((_, rest)) => rest.find('/').and_then(|i| rest.get(i..))?,
        None => pattern.split_once(':')?.1,
    };
    path.chars()
        .find(|&c| {
            c.is_ascii_control() || c == ' ' || c == '#' || !(c.is_ascii() || chrome_decodes(c))
        })
        .map(Unmatchable::Character)
}

/// Where `.tld` stands for a suffix in a glob: before `/`, `:` or at the end.
pub(super) fn tld_positions(glob: &str) -> Vec<usize> {
    glob.match_indices(".tld")
        .filter(|(i, _)| {
            matches!(
                glob.as_bytes().get(i + 4),
                None | Some(b'/') | Some(b':') | Some(b'*')
            )
        })
        .map(|(i, _)| i)
        .collect()
}

/// Does this glob use `.tld`?
pub fn glob_has_tld(glob: &str) -> bool {
    !tld_positions(glob).is_empty()
}

/// Does this match pattern's host end in `.tld`?
pub fn pattern_has_tld(pattern: &str) -> bool {
    host_of(pattern).is_some_and(|h| h.ends_with(".tld"))
}

/// The host part of `scheme://host[:port]/path`, as written.
pub(crate) fn host_of(pattern: &str) -> Option<&str> {
    let rest = pattern.split_once("://")?.1;
    let authority = rest.split('/').next()?;
    Some(
        authority
            .rsplit_once(':')
            .map_or(authority, |(h, _)| h)
            .trim_end_matches('.'),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the URL parser reads as an address, so that only such hosts are asked of it.
    #[test]
    fn a_host_ending_in_a_number_is_an_address() {
        for h in ["127.1", "3232235777", "0x7f.1", "a.0X7F", "1.2.3.4.", "0x"] {
            assert!(ends_in_number(h), "{h}");
        }
        for h in ["example.com", "example10", "1.2.x", "", "0xg"] {
            assert!(!ends_in_number(h), "{h}");
        }
    }

    /// A capital the expression asks for in the scheme or host is said, as a tester found
    /// `@exclude /^https?:\/\/(www\.)?Bank\.test\//` excluding nothing without a word (the same
    /// as a glob is refused). Capitals past the host, in a class, in an escape or a group's
    /// name, or under a modifier, are not the address's scheme or host.
    #[test]
    fn a_capital_in_a_regex_scheme_or_host_is_named() {
        let cap = |s: &str| regex_foreign_char(s);
        for (src, c) in [
            (r"^https?:\/\/(www\.)?Bank\.test\/", 'B'),
            (r"^HTTP:\/\/bank\.test\/", 'H'),
            (r"https:\/\/bank\.tEst", 'E'),
            (r"^https:\/\/(bank|Bank)\.test", 'B'),
        ] {
            assert_eq!(cap(src), Some(Unmatchable::HostCapital(c)), "{src}");
        }
        for src in [
            r"^https:\/\/bank\.test\/Admin",
            r"^https?:\/\/[^\/]+\/Foo",
            r"^https:\/\/.*Foo",
            r"^https:\/\/(?i:Bank)\.test",
            r"^https:\/\/(?<Host>bank)\.test",
            r"^https:\/\/\x41bank",
            r"^https:\/\/\p{Lu}",
            r"\/\/Bank",
            r"Foo",
            r"^https:\/\/a{1,2}\.test\/",
            r"^https:\/\/(?!Admin)bank\.test",
            r"^https:\/\/(?<!X)bank\.test",
            r"\/Redirect\?url=https?:\/\/",
        ] {
            assert_eq!(cap(src), None, "{src}");
        }
        let why = Unmatchable::HostCapital('B').to_string();
        assert!(
            why.contains("capital \"B\"") && why.contains("lowercase"),
            "{why}"
        );
    }

    #[test]
    fn each_refusal_is_its_own_variant_with_its_reason() {
        assert_eq!(check_regex("(a+)+$"), Err(RegexError::NestedRepeat));
        assert_eq!(check_regex("^a*b*c*"), Err(RegexError::TooManyRepeats));
        assert_eq!(
            check_regex(&"a".repeat(MAX_REGEX_CHARS + 1)),
            Err(RegexError::TooLong)
        );
        let Err(RegexError::Invalid(why)) = check_regex("a(") else {
            panic!("an unclosed group is invalid");
        };
        assert!(!why.is_empty());
        // What the metadata parser shows the agent.
        assert_eq!(
            RegexError::TooManyRepeats.to_string(),
            format!(
                "more than {MAX_UNBOUNDED_REPEATS} unbounded repetitions (*, +, {{n,}}) can make \
                 matching very slow; use @match or a glob for the rest"
            )
        );
        assert!(RegexError::NestedRepeat
            .to_string()
            .contains("(such as (a+)+ or (a|b)*) can take exponential time"));
        assert_eq!(check_regex("^https://a\\.example/"), Ok(()));
    }

    /// Repetitions whose tries multiply (each in V8 a backtracking point) are refused where a
    /// long address could make them take seconds; the usual shapes pass.
    #[test]
    fn repetitions_that_multiply_past_the_step_bound_are_refused() {
        for slow in [
            // A tester's: 9 s in `match_url` on a 115-character URL, 1.3 s a page load.
            ".{0,10}.{0,10}.{0,10}.{0,10}.{0,10}.{0,10}.{0,10}Z",
            ".{0,10}.{0,10}.{0,10}.{0,10}.{0,10}.{0,10}Z",
            // 16 s on 4,000 characters: two unbounded, unanchored, then something that fails.
            "a.*a.*Z",
            ".*a.*Z",
            "^(x?)?(x?)?a?b?c?d?e?f?g?h?i?j?k?l?m?n?o?p?q?r?s?t?u?v?w?x?y?z?.*Z",
            // A reviewer's: an empty class `[]` hid what followed; alternatives were not
            // counted (15 s on 55 characters); one anchored branch stood for all.
            "(?:[]|).{0,10}.{0,10}.{0,10}.{0,10}.{0,10}.{0,10}Z",
            "(?:a|\\w)(?:a|\\w)(?:a|\\w)(?:a|\\w)(?:a|\\w)(?:a|\\w)(?:a|\\w)(?:a|\\w)(?:a|\\w)(?:a|\\w)(?:a|\\w)(?:a|\\w)(?:a|\\w)Z",
            "^x|a.*a.*Z",
            // A second review's: a literal that matches everywhere, a last repetition of many
            // counts, fixed counts, backreferences; and two unbounded ones unanchored, however
            // rare what separates them (4.7 s on a crafted 4 KB address).
            "qqqqqqqqqqqqqqqq|.*a.*Z",
            "aaaaaaaaaaaaaaaa.*aaaaaaaaaaaaaaaa.*Z",
            ".*a.{1000,}",
            ".*a.{900}Z",
            "(.{0,63}).{0,63}\\1\\1\\1Z",
            ".*google.*search",
            "^(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)(a|a).*a.*Z",
        ] {
            assert_eq!(check_regex(slow), Err(RegexError::TooSlow), "{slow}");
        }
        for fine in [
            "^https?:\\/\\/(www\\.)?example\\.com\\/.*$",
            "^https?:\\/\\/(.*\\.)?google\\.[a-z]+\\/search",
            ".*youtube\\.com.*",
            "^.*a.*Z",
            "example\\.com\\/watch\\?v=.{11}",
            ".{0,10}.{0,10}.{0,10}Z",
            "^https?:\\/\\/.*\\.example\\.com\\/.*\\/settings",
            "^https?:\\/\\/a\\.test\\/|^https?:\\/\\/b\\.test\\/.*x",
            "[^]*x",
            // A router script's @include (a reviewer's find): alternatives are added, not
            // multiplied.
            "^https?:\\/\\/(192\\.168\\.\\d{1,3}\\.\\d{1,3}|10\\.\\d{1,3}\\.\\d{1,3}\\.\\d{1,3}|172\\.(1[6-9]|2\\d|3[01])\\.\\d{1,3}\\.\\d{1,3}):8086\\/",
            // Bangumi scripts' (tests/e2e/compat.test.mjs): alternatives of literals and two
            // unbounded repetitions, anchored.
            "^https?:\\/\\/(bangumi|bgm|chii)\\.(tv|in)(:\\d+)?\\/subject\\/.*$",
        ] {
            assert_eq!(check_regex(fine), Ok(()), "{fine}");
        }
        assert!(RegexError::TooSlow.to_string().contains("start it with ^"));
    }
}
