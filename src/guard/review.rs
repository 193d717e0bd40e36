//! Write review: when the user's review switch is on, each write waits for the user's decision on
//! a surface in the extension (the popup). This module holds what the user sees — who asks, for
//! what, and the diff — and the bounded diff itself. The waiting lives in the provider.
//!
//! Decided: a review is not carried across a service-worker restart. The port that carried the
//! call dies with the worker, so the host has already seen its request fail ("in-flight requests
//! fail on disconnect"); executing it later would surprise the agent and the user alike. Stubs of
//! pending reviews are kept in `chrome.storage.session`, and on the next start each one is
//! audited as `REVIEW_INTERRUPTED` and dropped.

use serde::{Deserialize, Serialize};

/// Below the official MCP SDK's default 60 s request timeout, so the host hears our answer.
pub const REVIEW_TIMEOUT_MS: f64 = 50_000.0;
/// At most this many writes wait at once; more are refused rather than queued without bound.
pub const MAX_PENDING_REVIEWS: usize = 16;
/// The diff shown to the user is cut past this many lines (the full source is in get_script).
pub const MAX_DIFF_LINES: usize = 400;
pub const STUBS_KEY: &str = "reviews";

/// What the review surface shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewRequest {
    pub id: String,
    pub caller: String,
    pub caller_name: String,
    pub session: u64,
    pub tool: String,
    /// What the write does, in one line ("Create script X", "Disable script Y", …).
    pub summary: String,
    pub target: Option<String>,
    pub target_name: Option<String>,
    /// The revision the review was made against: approval re-checks it (CONFLICT otherwise).
    pub base_revision: Option<u64>,
    pub diff: Option<String>,
    pub created_at: f64,
    pub expires_at: f64,
    pub digest: String,
}

/// The part of a request kept in `chrome.storage.session` (no source, no diff).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stub {
    pub id: String,
    pub caller: String,
    pub tool: String,
    pub target: Option<String>,
    pub digest: String,
    pub created_at: f64,
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
        }
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
}

/// A unified-style diff of `old` → `new`: the common leading and trailing lines are trimmed and
/// the changed middle is shown with three lines of context. Linear time, so a 256 KiB source
/// cannot stall the worker; bounded output.
pub fn line_diff(old: &str, new: &str) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let max_suffix = a.len().min(b.len()) - prefix;
    let suffix = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(max_suffix)
        .take_while(|(x, y)| x == y)
        .count();
    if prefix == a.len() && prefix == b.len() {
        return String::from("(no change to the source)");
    }
    let ctx = 3;
    let start = prefix.saturating_sub(ctx);
    let a_end = a.len() - suffix;
    let b_end = b.len() - suffix;
    let post = ctx.min(a.len() - a_end);
    let mut out = vec![format!(
        "@@ -{},{} +{},{} @@",
        start + 1,
        a_end - start + post,
        start + 1,
        b_end - start + post
    )];
    out.extend(
        a.get(start..prefix)
            .unwrap_or(&[])
            .iter()
            .map(|l| format!(" {l}")),
    );
    out.extend(
        a.get(prefix..a_end)
            .unwrap_or(&[])
            .iter()
            .map(|l| format!("-{l}")),
    );
    out.extend(
        b.get(prefix..b_end)
            .unwrap_or(&[])
            .iter()
            .map(|l| format!("+{l}")),
    );
    out.extend(
        a.get(a_end..a_end + post)
            .unwrap_or(&[])
            .iter()
            .map(|l| format!(" {l}")),
    );
    if out.len() > MAX_DIFF_LINES {
        let more = out.len() - MAX_DIFF_LINES;
        out.truncate(MAX_DIFF_LINES);
        out.push(format!("… {more} more lines"));
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_shows_the_changed_middle_with_context() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nb\nc\nd\nX\nf\ng\nh\n";
        let d = line_diff(old, new);
        assert_eq!(d, "@@ -2,7 +2,7 @@\n b\n c\n d\n-e\n+X\n f\n g\n h");
        assert_eq!(line_diff("same\n", "same\n"), "(no change to the source)");
        assert_eq!(line_diff("", "new\n"), "@@ -1,0 +1,1 @@\n+new");
        assert_eq!(line_diff("old\n", ""), "@@ -1,1 +1,0 @@\n-old");
    }

    #[test]
    fn diff_handles_repeated_lines_and_is_bounded() {
        // Prefix and suffix overlap on repeated lines: must not go negative or panic.
        assert!(line_diff("x\nx\nx\n", "x\nx\n").contains("-x"));
        assert!(line_diff("x\nx\n", "x\nx\nx\n").contains("+x"));
        let big_old: String = (0..5000).map(|i| format!("{i}\n")).collect();
        let big_new: String = (0..5000).map(|i| format!("n{i}\n")).collect();
        let d = line_diff(&big_old, &big_new);
        assert!(d.lines().count() <= MAX_DIFF_LINES + 1);
        assert!(d.ends_with("more lines"));
    }
}
