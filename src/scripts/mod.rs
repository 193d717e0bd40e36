//! The userscript model: metadata, match patterns, stored records and the registry diff.

mod confusables;
pub mod glob;
pub mod history;
pub mod match_pattern;
pub mod metadata;
pub mod names;
pub mod prelude;
pub mod record;
pub mod registry;
pub mod restore;
pub mod rules;
pub mod runs;
pub mod store;
pub mod sync;
pub mod trash;
pub mod wrap;
