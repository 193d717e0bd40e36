//! The userscript model: metadata, match patterns, stored records and the registry diff.

pub mod backup;
mod confusables;
pub mod glob;
pub mod glob_regex;
pub mod history;
pub mod import;
pub mod in_tabs;
pub mod match_pattern;
pub mod metadata;
pub mod names;
pub mod prelude;
pub mod quota;
pub mod record;
pub mod registry;
pub mod restore;
pub mod rule_syntax;
pub mod rules;
pub mod runs;
pub mod store;
pub mod sync;
pub mod trash;
pub mod update;
pub mod wrap;
