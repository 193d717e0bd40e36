//! How the pages' op arguments are read: loosely, so that a missing or mistyped field reaches
//! the op's own function, which refuses it naming the field and what it must be. A leaf module:
//! the op families outside `control` (`bridge_ops`, `by_hand`, `import_ops`) use it without
//! importing the dispatcher that calls them.

use serde::de::value::BorrowedStrDeserializer;
use serde::de::{self, DeserializeOwned, DeserializeSeed, EnumAccess, VariantAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// The value when it has type `T`; `None` for anything else (null included).
pub fn loose<'de, D: Deserializer<'de>, T: DeserializeOwned>(d: D) -> Result<Option<T>, D::Error> {
    // Through `&Value`: the one way this crate reads a `Value` into a type (no owned copy).
    Ok(T::deserialize(&Value::deserialize(d)?).ok())
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
            v => T::deserialize(&v).map_or(Arg::Wrong, Arg::Is),
        })
    }
}

/// Reads an op family's enum from a page's message: the variant named `name` (the message's
/// "op"), its fields from the message itself (other keys, "op" among them, are ignored). The
/// families are plain enums read through this rather than `#[serde(tag = "op")]`, which buffers
/// the message through serde's `Content` first, a copy of that code per family and variant
/// (~60 KB of wasm). An unknown name is an error (`unknown variant`).
pub fn by_name<'a, T: Deserialize<'a>>(
    name: &'a str,
    msg: &'a Value,
) -> Result<T, serde_json::Error> {
    T::deserialize(Tagged { name, msg })
}

struct Tagged<'a> {
    name: &'a str,
    msg: &'a Value,
}

impl<'de> Deserializer<'de> for Tagged<'de> {
    type Error = serde_json::Error;
    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("an op is read as an enum"))
    }
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_enum(self)
    }
    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option
        unit unit_struct newtype_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}

impl<'de> EnumAccess<'de> for Tagged<'de> {
    type Error = serde_json::Error;
    type Variant = Self;
    fn variant_seed<S: DeserializeSeed<'de>>(
        self,
        seed: S,
    ) -> Result<(S::Value, Self), Self::Error> {
        let variant = seed.deserialize(BorrowedStrDeserializer::<Self::Error>::new(self.name))?;
        Ok((variant, self))
    }
}

impl<'de> VariantAccess<'de> for Tagged<'de> {
    type Error = serde_json::Error;
    fn unit_variant(self) -> Result<(), Self::Error> {
        Ok(())
    }
    fn newtype_variant_seed<S: DeserializeSeed<'de>>(
        self,
        seed: S,
    ) -> Result<S::Value, Self::Error> {
        seed.deserialize(self.msg)
    }
    fn tuple_variant<V: Visitor<'de>>(self, _: usize, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("an op's fields are named"))
    }
    fn struct_variant<V: Visitor<'de>>(
        self,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        // As a map only: a message is an object (it has an "op"), and `deserialize_struct`
        // would also instantiate the array form of every variant.
        self.msg.deserialize_map(visitor)
    }
}
