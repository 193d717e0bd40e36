//! Guards every write passes: rate limit, review, audit; and the argument digest they share.

pub mod audit;
pub mod digest;
pub mod rate_limit;
pub mod review;
