//! A glob as a RegExp source that a backtracking matcher runs in linear time, with Chrome's
//! glob meaning (`base::MatchPattern`, see [`super::glob`]): each literal run that follows a
//! wildcard is committed to at its leftmost place, and no earlier wildcard is tried again.
//!
//! Written plainly (`[\s\S]*` per `*`), a glob with several wildcards made V8 try every way of
//! splitting the address between them: `@include ********Z` took 73 s on a 59-character
//! address, in every page the script's registration reached and in the worker's `match_url`
//! (R10). Here a wildcard followed by a literal run and more of the glob is
//! `(?=(W*?RUN))\N`: the lookahead finds the run's leftmost place, and a lookahead, once it
//! holds, is never entered again, so the backreference consumes that much and nothing before it
//! is tried twice. Only the last run keeps a plain wildcard before it (it must end the text:
//! one pass). That commitment is Chrome's own reading of a glob, so the guard and Chrome agree
//! on `?` globs too. A run holding `.tld` (labels of any length, the guard's own extension) is
//! not committed: the wildcard before it stays plain, so such a glob may take time in the
//! square of the address's length.

/// One piece of a glob: a run of wildcards, or a literal run as RegExp source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// `star`: the run holds a `*` (any length); else `q` `?`s (at most `q` characters).
    /// `class`: what one character it covers may be (`[\s\S]`, `[^/]`, `[^#]`).
    Wild { star: bool, q: usize, class: String },
    /// RegExp source of literal characters (escaped), `.tld`'s expansion included; `fixed`
    /// unless it holds one (`.tld` is labels of any length: locked inside a lookahead to its
    /// first match, a run holding one would match less than the glob means, so the wildcard
    /// before it stays plain and the engine may try its other lengths).
    Lit { src: String, fixed: bool },
}

/// Appends a wildcard (`star`, or one `?`) of `class` to `pieces`, merged with a run before it
/// of the same class.
pub fn push_wild(pieces: &mut Vec<Piece>, star: bool, class: &str) {
    if let Some(Piece::Wild {
        star: s,
        q,
        class: c,
    }) = pieces.last_mut()
    {
        if c == class {
            *s |= star;
            if !star {
                *q = q.saturating_add(1);
            }
            return;
        }
    }
    pieces.push(Piece::Wild {
        star,
        q: usize::from(!star),
        class: class.to_owned(),
    });
}

/// Appends literal RegExp source to `pieces`, merged with a literal run before it; `fixed`
/// unless it is `.tld`'s expansion (see [`Piece::Lit`]).
pub fn push_lit(pieces: &mut Vec<Piece>, src: &str, fixed: bool) {
    if let Some(Piece::Lit { src: s, fixed: f }) = pieces.last_mut() {
        s.push_str(src);
        *f &= fixed;
        return;
    }
    pieces.push(Piece::Lit {
        src: src.to_owned(),
        fixed,
    });
}

/// The pieces as RegExp source, unanchored (the caller puts `^` before and what must end the
/// address after). Capturing groups are numbered from `*group + 1`; `*group` is left at the
/// last one used: the source must hold no other capturing group before these.
pub fn committed(pieces: &[Piece], group: &mut usize) -> String {
    let mut out = String::new();
    let mut i = 0;
    while let Some(p) = pieces.get(i) {
        match p {
            Piece::Lit { src, .. } => out.push_str(src),
            Piece::Wild { star, q, class } => {
                let quant = if *star {
                    "*".to_owned()
                } else {
                    format!("{{0,{q}}}")
                };
                match (pieces.get(i + 1), pieces.get(i + 2)) {
                    // A run with more glob after it: its leftmost place, committed.
                    (
                        Some(Piece::Lit {
                            src: run,
                            fixed: true,
                        }),
                        Some(_),
                    ) => {
                        *group = group.saturating_add(1);
                        out.push_str(&format!("(?=({class}{quant}?{run}))\\{group}"));
                        i += 1;
                    }
                    _ => {
                        out.push_str(class);
                        out.push_str(&quant);
                    }
                }
            }
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(glob: &str) -> Vec<Piece> {
        let mut p = Vec::new();
        for c in glob.chars() {
            match c {
                '*' => push_wild(&mut p, true, "[\\s\\S]"),
                '?' => push_wild(&mut p, false, "[\\s\\S]"),
                c => push_lit(
                    &mut p,
                    &super::super::match_pattern::regex_escape(&c.to_string()),
                    true,
                ),
            }
        }
        p
    }

    #[test]
    fn runs_merge_and_middle_runs_are_committed() {
        let mut g = 0;
        assert_eq!(
            committed(&pieces("a**?b*c"), &mut g),
            "a(?=([\\s\\S]*?b))\\1[\\s\\S]*c"
        );
        assert_eq!(g, 1);
        let mut g = 0;
        assert_eq!(
            committed(&pieces("??x*"), &mut g),
            "(?=([\\s\\S]{0,2}?x))\\1[\\s\\S]*"
        );
        let mut g = 2;
        assert_eq!(
            committed(&pieces("*a*b*"), &mut g),
            "(?=([\\s\\S]*?a))\\3(?=([\\s\\S]*?b))\\4[\\s\\S]*"
        );
    }
}
