//! Building blocks of the typed provider wire structs: serde types that
//! read a JSON shape the way the formats need it, and [`read`], which
//! deserializes a body and names the offending field when it cannot.
//!
//! The answer structs themselves live beside their format (`openai`,
//! `openai::stream`, `anthropic`, `anthropic::stream`). Every field is an
//! `Option`, since a JSON `null` reads as absent there as everywhere in this
//! crate, and a required field is checked after the read, with its path.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Value;

use super::FormatError;

/// Reads `bytes` as `T`; a mistake is a [`FormatError`] naming the
/// offending field (a syntax error names none).
pub(crate) fn read<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, FormatError> {
    crate::json::read(bytes).map_err(|m| {
        if m.error.is_data() {
            FormatError::malformed(crate::json::path_text(&m.path), m.error.to_string())
        } else {
            FormatError::malformed("", format!("malformed JSON: {}", m.error))
        }
    })
}

/// A JSON object read as `T`. A derived struct would also take an array,
/// field by field in order; this one refuses it, as the formats do.
#[derive(Debug)]
pub(crate) struct Obj<T>(pub(crate) T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = T;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(V(PhantomData)).map(Obj)
    }
}

/// The first element of an array read as `T` (`None` for an empty array),
/// the others skipped unread: only the first choice is served.
#[derive(Debug)]
pub(crate) struct First<T>(pub(crate) Option<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for First<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Option<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Option<T>, A::Error> {
                let first = seq.next_element()?;
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(first)
            }
        }
        d.deserialize_seq(V(PhantomData)).map(First)
    }
}

/// Any JSON value, kept when it is a string: the `type` and `object`
/// members, which mark an error body when they are `"error"` and are not
/// checked otherwise.
#[derive(Debug, Default)]
pub(crate) struct Loose<'a>(pub(crate) Option<Cow<'a, str>>);

impl Loose<'_> {
    /// Whether the value is the string `"error"`.
    pub(crate) fn is_error(&self) -> bool {
        self.0.as_deref() == Some("error")
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Loose<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Loose<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Loose(Some(Cow::Borrowed(s))))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Loose(Some(Cow::Owned(s.to_string()))))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Self::Value, E> {
                Ok(Loose(Some(Cow::Owned(s))))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Loose(None))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Loose(None))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Loose(None))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Loose(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Loose(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Loose(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Loose(None))
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// A string, borrowed from the body when it has no escapes.
#[derive(Debug)]
pub(crate) struct Str<'a>(pub(crate) Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Str<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(s.to_string())))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(s)))
            }
        }
        d.deserialize_str(V(PhantomData))
    }
}

impl Str<'_> {
    /// The string, borrowed.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// Whether a 200's body is an error by its own members: an `error`
/// member, or `object` / `type` saying `"error"` (providers and proxies that
/// answer a failure with status 200).
pub(crate) fn says_error(error: &Option<IgnoredAny>, object: &Loose<'_>, kind: &Loose<'_>) -> bool {
    error.is_some() || object.is_error() || kind.is_error()
}

/// Whether an optional string is `"error"`.
pub(crate) fn is_error(s: Option<&Str<'_>>) -> bool {
    s.is_some_and(|s| s.as_str() == "error")
}

/// Tool call arguments: the JSON text OpenAI sends, or, from compatible
/// servers that send the arguments as an object, that value's JSON text.
#[derive(Debug)]
pub(crate) struct Arguments(pub(crate) String);

impl<'de> Deserialize<'de> for Arguments {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::String(s) => Ok(Arguments(s)),
            other => Ok(Arguments(other.to_string())),
        }
    }
}

/// Member `key` of an object, kept as text, read as `T` when present;
/// errors name `key` and the path inside it.
pub(crate) fn member<'a, T: Deserialize<'a>>(
    raw: Option<&'a RawValue>,
    key: &str,
) -> Result<Option<T>, FormatError> {
    raw.map(|r| {
        read::<T>(r.get().as_bytes()).map_err(|e| FormatError {
            path: if e.path.is_empty() {
                key.to_string()
            } else if e.path.starts_with('[') {
                format!("{key}{}", e.path)
            } else {
                super::join(key, &e.path)
            },
            ..e
        })
    })
    .transpose()
}

/// A required field, or an error at its path.
pub(crate) fn required<T>(v: Option<T>, path: impl FnOnce() -> String) -> Result<T, FormatError> {
    v.ok_or_else(|| FormatError::malformed(path(), "required"))
}
