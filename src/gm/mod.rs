//! The GM API model: which `@grant`s a script asks for and what each means here
//! ([`api`]), and which hosts its `@connect` lines let it reach ([`connect`]). Pure: the
//! metadata parser reports with these, the review shows them, the prelude
//! (`scripts::prelude`) gives a script exactly the functions its grants name.

pub mod api;
pub mod asset_store;
pub mod assets;
pub mod change_log;
pub mod charset;
pub mod clipboard;
pub mod clipboard_js;
pub mod connect;
pub mod download_js;
pub mod inject;
pub mod menu;
pub mod menu_js;
pub mod menu_message;
pub mod message;
mod public_suffixes;
pub mod resources;
pub mod store;
pub mod tab_objects;
pub mod tab_objects_js;
pub mod tabs;
pub mod tabs_js;
pub mod try_gm;
pub mod values;
pub mod xhr;
pub mod xhr_flight;
