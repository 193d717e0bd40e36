//! The toolbar badge: what the user sees at a glance. A decision of the core so the shell only
//! paints it.

/// Text and background colour of the action badge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Badge {
    pub text: String,
    pub color: &'static str,
}

const ATTENTION: &str = "#d93025";
const CONNECTED: &str = "#188038";

/// `!` while the user is awaited (a caller asks for approval or a write waits for review) —
/// that outranks the count; otherwise the number of open sessions, or nothing.
#[must_use]
pub fn badge(pending_approvals: usize, pending_reviews: usize, open_sessions: usize) -> Badge {
    if pending_approvals > 0 || pending_reviews > 0 {
        Badge {
            text: "!".to_owned(),
            color: ATTENTION,
        }
    } else if open_sessions > 0 {
        Badge {
            text: open_sessions.to_string(),
            color: CONNECTED,
        }
    } else {
        Badge {
            text: String::new(),
            color: CONNECTED,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attention_outranks_the_count() {
        assert_eq!(badge(0, 0, 0).text, "");
        assert_eq!(badge(0, 0, 3).text, "3");
        assert_eq!(badge(0, 0, 3).color, CONNECTED);
        for (a, r) in [(1, 0), (0, 1), (2, 5)] {
            let b = badge(a, r, 3);
            assert_eq!((b.text.as_str(), b.color), ("!", ATTENTION));
        }
    }
}
