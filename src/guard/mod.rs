//! Guards every write passes: rate limit, review, audit; and the argument digest they share.

pub mod audit;
pub mod diff;
pub mod diff_align;
pub mod digest;
pub mod effects;
pub mod rate_limit;
pub mod review;
pub mod review_files;
