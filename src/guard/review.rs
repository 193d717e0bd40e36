//! Write review: when the user's review switch is on, each write waits for the user's decision on
//! a surface in the extension (the popup). This module holds what the user sees — who asks, the
//! headline, every effect ([`super::effects`]) and the diff preview ([`super::diff`]) — and the
//! bound on waiting reviews, per caller. The waiting lives in the provider.
//!
//! Decided: a review is not carried across a service-worker restart. The port that carried the
//! call dies with the worker, so the host has already seen its request fail ("in-flight requests
//! fail on disconnect"); executing it later would surprise the agent and the user alike. Stubs of
//! pending reviews are kept in `chrome.storage.session`, and on the next start each one is
//! audited as `REVIEW_INTERRUPTED` and dropped.

use super::diff::{line_diff, Preview};
use super::effects::{effects, Version};
use super::review_files::ReviewedFile;
use crate::gm::asset_store::Reviewed;
use serde::{Deserialize, Serialize};
use std::rc::Rc;

/// Below the official MCP SDK's default 60 s request timeout, so the host hears our answer.
pub const REVIEW_TIMEOUT_MS: f64 = 50_000.0;
/// At most this many writes of one caller wait at once; more are refused (RATE_LIMITED) rather
/// than queued. Per caller, so one agent cannot fill the queue and refuse another's writes.
pub const MAX_PENDING_PER_CALLER: usize = 8;
/// At most this many writes wait in all: each holds up to two 256 KiB sources. Eight callers
/// flooding at once are needed to reach it.
pub const MAX_PENDING_REVIEWS: usize = 64;
/// At most this many bytes of `@require`/`@resource` files are held by the reviews that wait
/// (each write may fetch 2 MiB for its review): more is refused until some are decided.
pub const MAX_PENDING_FILE_BYTES: usize = 16 * 1024 * 1024;
pub const STUBS_KEY: &str = "reviews";

/// What the review surface shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewRequest {
    pub id: String,
    /// Arrival order (from the provider's counter): the popup lists reviews by it, oldest first,
    /// so a review queued later can never take the place of one the user is about to approve.
    #[serde(default)]
    pub seq: u64,
    pub caller: String,
    pub caller_name: String,
    pub session: u64,
    pub tool: String,
    /// What the write does, in one line ("Create script X", "Disable script Y", …).
    pub summary: String,
    /// Every effect of the write, in words (see [`super::effects`]).
    #[serde(default)]
    pub effects: Vec<String>,
    pub target: Option<String>,
    pub target_name: Option<String>,
    /// The revision the review was made against: approval re-checks it (CONFLICT otherwise).
    pub base_revision: Option<u64>,
    /// The first part of the diff; `diff_partial` says whether it is all of it. The whole diff
    /// is one `reviews.diff` away.
    pub diff: Option<String>,
    #[serde(default)]
    pub diff_shown_lines: usize,
    #[serde(default)]
    pub diff_total_lines: usize,
    #[serde(default)]
    pub diff_partial: bool,
    pub created_at: f64,
    pub expires_at: f64,
    pub digest: String,
    /// The sources the diff is made of, for the whole diff on request. Never serialized.
    #[serde(skip)]
    pub sources: Option<Rc<Sources>>,
    /// The `@require`/`@resource` files the write adds, fetched for this review and shown.
    #[serde(default)]
    pub files: Vec<ReviewedFile>,
    /// Their answers, which the approved write takes instead of asking the network again. Never
    /// serialized.
    #[serde(skip)]
    pub fetched: Option<Rc<Reviewed>>,
}

/// The source before and after the write ("" where the script does not exist).
#[derive(Debug, Clone, PartialEq)]
pub struct Sources {
    pub old: String,
    pub new: String,
}

/// The user-facing part of a request: headline, effects and diff.
#[derive(Debug, Clone, PartialEq)]
pub struct Shown {
    pub summary: String,
    pub effects: Vec<String>,
    pub diff: Option<Preview>,
    pub sources: Option<Rc<Sources>>,
}

/// What the user reads about a write that turns `before` into `after` (None where the script
/// does not exist). `verb` names the tool's action on an existing script ("Replace", "Edit",
/// "Enable"); the headline says what really happens when that differs (a replace that only
/// re-enables is "Enable"). Everything the write changes is
/// in the effects, whichever tool asks for it.
/// New `@require`/`@resource` files are said to be shown with it: the review surface shows
/// [`ReviewRequest::files`].
pub fn describe(verb: &str, before: Option<Version>, after: Option<Version>) -> Shown {
    let q = |s: &str| super::diff::visible(s);
    let summary = match (&before, &after) {
        (None, Some(a)) => format!(
            "Create the script \"{}\"{}",
            q(&a.metadata.name),
            if a.enabled { "" } else { " (disabled)" }
        ),
        (Some(b), None) => format!("Delete the script \"{}\"", q(&b.metadata.name)),
        (Some(b), Some(a)) => {
            let same = b.source == a.source && b.metadata == a.metadata;
            let name = q(&b.metadata.name);
            match (same, b.enabled, a.enabled) {
                (true, false, true) => format!("Enable the script \"{name}\""),
                (true, true, false) => format!("Disable the script \"{name}\""),
                (true, _, _) => format!("{verb} the script \"{name}\" (nothing changes)"),
                (false, false, true) => format!("{verb} the script \"{name}\" and re-enable it"),
                (false, true, false) => format!("{verb} the script \"{name}\" and disable it"),
                (false, _, _) => format!("{verb} the script \"{name}\""),
            }
        }
        (None, None) => String::new(),
    };
    let effects = effects(before.as_ref(), after.as_ref());
    let old = before.map_or("", |b| b.source);
    let new = after.map_or("", |a| a.source);
    let (diff, sources) = if before.is_some() && after.is_some() && old == new {
        (None, None)
    } else {
        (
            Some(Preview::of(&line_diff(old, new))),
            Some(Rc::new(Sources {
                old: old.to_owned(),
                new: new.to_owned(),
            })),
        )
    };
    Shown {
        summary,
        effects,
        diff,
        sources,
    }
}

/// The part of a request kept in `chrome.storage.local` (no source, no diff).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stub {
    pub id: String,
    pub caller: String,
    pub tool: String,
    pub target: Option<String>,
    pub digest: String,
    pub created_at: f64,
    /// When the user decided it: its write's entry is dated from then on (a stub kept until
    /// that entry is recorded, `Provider::review_recorded`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<f64>,
}

impl ReviewRequest {
    pub fn stub(&self) -> Stub {
        Stub {
            id: self.id.clone(),
            caller: self.caller.clone(),
            tool: self.tool.clone(),
            target: self.target.clone(),
            digest: self.digest.clone(),
            created_at: self.created_at,
            decided_at: None,
        }
    }

    /// Every line of the diff, for the user who asks to see all of it.
    pub fn full_diff(&self) -> Option<String> {
        self.sources
            .as_ref()
            .map(|s| line_diff(&s.old, &s.new).join("\n"))
    }
}

/// Why a new review cannot wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueFull {
    Caller,
    Everyone,
    /// The files fetched for the reviews that wait, with this one's, would pass
    /// [`MAX_PENDING_FILE_BYTES`].
    Files,
}

impl std::fmt::Display for QueueFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueueFull::Caller => write!(
                f,
                "{MAX_PENDING_PER_CALLER} of your writes are already waiting for the user's review; wait for those first"
            ),
            QueueFull::Everyone => write!(
                f,
                "{MAX_PENDING_REVIEWS} writes are already waiting for the user's review; wait for those first"
            ),
            QueueFull::Files => write!(
                f,
                "the writes waiting for the user's review already hold {} MiB of @require/@resource files fetched to show them; wait for those first",
                MAX_PENDING_FILE_BYTES / (1024 * 1024)
            ),
        }
    }
}

/// Whether `caller` may queue another review holding `bytes` of fetched files, given the
/// caller and the held bytes of each review that waits.
pub fn admit<'a>(
    waiting: impl Iterator<Item = (&'a str, usize)>,
    caller: &str,
    bytes: usize,
) -> Result<(), QueueFull> {
    let (mut all, mut mine, mut held) = (0usize, 0usize, bytes);
    for (c, b) in waiting {
        all += 1;
        held = held.saturating_add(b);
        if c == caller {
            mine += 1;
        }
    }
    if mine >= MAX_PENDING_PER_CALLER {
        Err(QueueFull::Caller)
    } else if all >= MAX_PENDING_REVIEWS {
        Err(QueueFull::Everyone)
    } else if held > MAX_PENDING_FILE_BYTES {
        Err(QueueFull::Files)
    } else {
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Approve {
        allow_session: bool,
    },
    Deny,
    Expired,
    /// The client cancelled the request, or its port closed.
    Cancelled,
    /// The user turned writes off while it waited: it can no longer apply.
    WritesOff,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripts::metadata::parse;

    #[test]
    fn the_queue_is_bounded_per_caller_then_overall_then_by_the_files_held() {
        let a = ["a"; MAX_PENDING_PER_CALLER];
        let none = |c: &'static str| (c, 0usize);
        assert_eq!(
            admit(a.iter().copied().map(none), "a", 0),
            Err(QueueFull::Caller)
        );
        assert_eq!(admit(a.iter().copied().map(none), "b", 0), Ok(()));
        let mut many: Vec<String> = Vec::new();
        for i in 0..MAX_PENDING_REVIEWS {
            many.push(format!(
                "c{}",
                i % (MAX_PENDING_REVIEWS / (MAX_PENDING_PER_CALLER - 1) + 1)
            ));
        }
        assert_eq!(
            admit(many.iter().map(|c| (c.as_str(), 0)), "new", 0),
            Err(QueueFull::Everyone)
        );
        assert_eq!(admit(std::iter::empty(), "a", 0), Ok(()));
        // Eight 2 MiB reviews of eight callers fill it; the ninth is refused, however small.
        let mib2 = 2 * 1024 * 1024;
        let big: Vec<(String, usize)> = (0..8).map(|i| (format!("c{i}"), mib2)).collect();
        let held = || big.iter().map(|(c, b)| (c.as_str(), *b));
        assert_eq!(admit(held(), "new", 0), Ok(()));
        assert_eq!(admit(held(), "new", 1), Err(QueueFull::Files));
        assert_eq!(
            admit(std::iter::once(("a", 0)), "a", MAX_PENDING_FILE_BYTES + 1),
            Err(QueueFull::Files)
        );
    }

    #[test]
    fn the_headline_names_an_enabled_change_whatever_the_tool() {
        let src =
            "// ==UserScript==\n// @name X\n// @match https://a.example/*\n// ==/UserScript==\n";
        let m = parse(src).metadata.unwrap();
        let off = Version {
            metadata: &m,
            enabled: false,
            source: src,
        };
        let on = Version {
            enabled: true,
            ..off
        };
        let s = describe("Replace", Some(off), Some(on));
        assert_eq!(s.summary, "Enable the script \"X\"");
        assert!(s.diff.is_none(), "no code change, no diff");
        let changed = format!("{src}go();\n");
        let m2 = parse(&changed).metadata.unwrap();
        let on2 = Version {
            metadata: &m2,
            enabled: true,
            source: &changed,
        };
        let s = describe("Replace", Some(off), Some(on2));
        assert_eq!(s.summary, "Replace the script \"X\" and re-enable it");
        assert!(
            s.effects[0].starts_with("Re-enables the script"),
            "{:?}",
            s.effects
        );
        let d = s.diff.unwrap();
        assert!(d.text.ends_with("+go();"), "{}", d.text);
        assert!(!d.is_partial());
        assert_eq!(
            describe("Replace", None, Some(on)).summary,
            "Create the script \"X\""
        );
        assert_eq!(
            describe("Replace", None, Some(off)).summary,
            "Create the script \"X\" (disabled)"
        );
        assert_eq!(
            describe("Replace", Some(on), None).summary,
            "Delete the script \"X\""
        );
    }

    #[test]
    fn the_whole_diff_is_kept_for_the_user_who_asks() {
        let mut src = String::from("// ==UserScript==\n// @name X\n// ==/UserScript==\n");
        for i in 0..450 {
            src.push_str(&format!("// filler {i}\n"));
        }
        src.push_str("exfiltrate();\n");
        let m = parse(&src).metadata.unwrap();
        let s = describe(
            "Replace",
            None,
            Some(Version {
                metadata: &m,
                enabled: true,
                source: &src,
            }),
        );
        let d = s.diff.clone().unwrap();
        assert!(d.is_partial() && !d.text.contains("exfiltrate"));
        let req = ReviewRequest {
            id: "r".into(),
            seq: 1,
            caller: "c".into(),
            caller_name: String::new(),
            session: 1,
            tool: "write_script".into(),
            summary: s.summary,
            effects: s.effects,
            target: None,
            target_name: None,
            base_revision: None,
            diff: Some(d.text),
            diff_shown_lines: d.shown_lines,
            diff_total_lines: d.total_lines,
            diff_partial: true,
            created_at: 0.0,
            expires_at: 0.0,
            digest: String::new(),
            sources: s.sources,
            files: Vec::new(),
            fetched: None,
        };
        let full = req.full_diff().unwrap();
        assert!(
            full.ends_with("+exfiltrate();"),
            "{}",
            &full[full.len() - 40..]
        );
        assert_eq!(full.split('\n').count(), d.total_lines);
        // The sources never reach the page state or the stub.
        let v = serde_json::to_value(&req).unwrap();
        assert!(!v.to_string().contains("exfiltrate"));
        assert_eq!(v["diffPartial"], serde_json::json!(true));
    }
}
