//! How the pages' op arguments are read: loosely, so that a missing or mistyped field reaches
//! the op's own function, which refuses it naming the field and what it must be. A leaf module:
//! the op families outside `control` (`bridge_ops`, `by_hand`, `import_ops`) use it without
//! importing the dispatcher that calls them.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// The value when it has type `T`; `None` for anything else (null included).
pub fn loose<'de, D: Deserializer<'de>, T: DeserializeOwned>(d: D) -> Result<Option<T>, D::Error> {
    Ok(serde_json::from_value(Value::deserialize(d)?).ok())
}

/// A field whose absence means something (a default) and whose wrong type is refused: absent or
/// null, a `T`, or anything else. Use with `#[serde(default)]`.
#[derive(Debug, Default, PartialEq)]
pub enum Arg<T> {
    #[default]
    Absent,
    Is(T),
    Wrong,
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Arg<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::Null => Arg::Absent,
            v => serde_json::from_value(v).map_or(Arg::Wrong, Arg::Is),
        })
    }
}
