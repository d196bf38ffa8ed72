//! JSON into typed values, naming the path of the first mistake
//! (`routes.default[0].timeoutMs`), in a fraction of the code of wrapping
//! every typed deserializer (what `serde_path_to_error` does).
//!
//! The text is parsed once into a [`Node`] tree by the crate's parser
//! ([`super::parse`]: serde_json's grammar, nesting limit and syntax errors
//! with line and column). The crate's own types are read from the tree by
//! hand ([`super::read`]); any other `Deserialize` type (the public
//! [`super::parse_json`]) by one concrete [`serde::Deserializer`] here, so
//! each impl is compiled once. A failure's path is collected while the
//! error travels back up: each map entry and array element it passes
//! prepends its key or index. Strings without escapes are borrowed from the
//! text, as serde_json would lend them.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer as _, Visitor};
use serde::Deserialize;

/// A parsed JSON value. Objects keep their order and duplicate keys, so
/// typed reads see exactly what a streaming parser would have shown them.
#[cfg_attr(test, derive(Debug, PartialEq))]
pub(crate) enum Node<'de> {
    Null,
    Bool(bool),
    U64(u64),
    I64(i64),
    F64(f64),
    Str(Cow<'de, str>),
    Seq(Vec<Node<'de>>),
    Map(Vec<(Cow<'de, str>, Node<'de>)>),
}

/// One step of a path, collected innermost first.
pub(crate) enum Seg {
    Key(String),
    Index(usize),
}

/// A path, innermost step first.
#[derive(Default)]
pub(crate) struct Path(pub(crate) Vec<Seg>);

impl Path {
    /// `routes.default[0].timeoutMs`; `(root)` for the whole document.
    fn render(&self) -> String {
        if self.0.is_empty() {
            return "(root)".to_string();
        }
        let mut out = String::new();
        for seg in self.0.iter().rev() {
            match seg {
                Seg::Key(k) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(k);
                }
                Seg::Index(i) => {
                    out.push('[');
                    out.push_str(&i.to_string());
                    out.push(']');
                }
            }
        }
        out
    }
}

/// Parses `json` as `T`. On failure: the path of the mistake and the
/// message (`invalid type: string "5", expected u64`; syntax errors keep
/// serde_json's `at line 1 column 9`).
pub(crate) fn from_str<'de, T: Deserialize<'de>>(json: &'de str) -> Result<T, (String, String)> {
    let node = parse_tree(json.as_bytes())?;
    T::deserialize(NodeDe(&node)).map_err(Error::into_parts)
}

// ------------------------------------------------------------------ parsing

/// Parses `json` into a tree; on failure, where and what.
pub(crate) fn parse_tree(json: &[u8]) -> Result<Node<'_>, (String, String)> {
    super::parse::parse(json).map_err(|(path, message)| (path.render(), message))
}

/// serde_json's parser over the same tree: what [`super::parse`] is held to.
#[cfg(test)]
pub(crate) fn parse_tree_with_serde(json: &[u8]) -> Result<Node<'_>, (String, String)> {
    let mut path = Path::default();
    parse(json, &mut path).map_err(|e| (path.render(), e.to_string()))
}

#[cfg(test)]
fn parse<'de>(json: &'de [u8], path: &mut Path) -> Result<Node<'de>, serde_json::Error> {
    // From bytes: the one reader every JSON text in the crate goes through.
    let mut de = serde_json::Deserializer::from_slice(json);
    let node = NodeSeed(path).deserialize(&mut de)?;
    de.end()?;
    Ok(node)
}

/// Reads a [`Node`], recording in the path where a syntax error struck.
#[cfg(test)]
struct NodeSeed<'p>(&'p mut Path);

#[cfg(test)]
impl<'de> DeserializeSeed<'de> for NodeSeed<'_> {
    type Value = Node<'de>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Node<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

#[cfg(test)]
impl<'de> Visitor<'de> for NodeSeed<'_> {
    type Value = Node<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E>(self) -> Result<Node<'de>, E> {
        Ok(Node::Null)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Node<'de>, E> {
        Ok(Node::Bool(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Node<'de>, E> {
        Ok(Node::U64(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Node<'de>, E> {
        Ok(Node::I64(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Node<'de>, E> {
        Ok(Node::F64(v))
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Node<'de>, E> {
        Ok(Node::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Node<'de>, E> {
        Ok(Node::Str(Cow::Owned(v.to_string())))
    }
    fn visit_string<E>(self, v: String) -> Result<Node<'de>, E> {
        Ok(Node::Str(Cow::Owned(v)))
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Node<'de>, A::Error> {
        let mut items = Vec::new();
        loop {
            match seq.next_element_seed(NodeSeed(self.0)) {
                Ok(Some(n)) => items.push(n),
                Ok(None) => return Ok(Node::Seq(items)),
                Err(e) => {
                    self.0 .0.push(Seg::Index(items.len()));
                    return Err(e);
                }
            }
        }
    }
    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Node<'de>, A::Error> {
        let mut entries = Vec::new();
        while let Some(Key(k)) = map.next_key()? {
            match map.next_value_seed(NodeSeed(self.0)) {
                Ok(v) => entries.push((k, v)),
                Err(e) => {
                    self.0 .0.push(Seg::Key(k.into_owned()));
                    return Err(e);
                }
            }
        }
        Ok(Node::Map(entries))
    }
}

/// An object key, borrowed when it has no escapes.
#[cfg(test)]
struct Key<'de>(Cow<'de, str>);

#[cfg(test)]
impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

// ------------------------------------------------------------------ errors

/// A typed read's failure: the message and where.
pub(crate) struct Error {
    pub(crate) message: String,
    pub(crate) path: Path,
}

impl Error {
    pub(crate) fn at(mut self, seg: Seg) -> Self {
        self.path.0.push(seg);
        self
    }

    /// The path, rendered, and the message.
    pub(crate) fn into_parts(self) -> (String, String) {
        (self.path.render(), self.message)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    #[cold]
    #[inline(never)]
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Error {
            message: msg.to_string(),
            path: Path::default(),
        }
    }

    // serde_json's wording (`null`, `floating point `1.5``), without
    // linking core's float formatting: JSON numbers print through
    // serde_json's own.
    #[cold]
    fn invalid_type(unexp: de::Unexpected<'_>, exp: &dyn de::Expected) -> Self {
        Error::custom(format_args!(
            "invalid type: {}, expected {}",
            Unexpected(unexp),
            exp
        ))
    }

    #[cold]
    fn invalid_value(unexp: de::Unexpected<'_>, exp: &dyn de::Expected) -> Self {
        Error::custom(format_args!(
            "invalid value: {}, expected {}",
            Unexpected(unexp),
            exp
        ))
    }
}

/// [`de::Unexpected`] as serde_json words it, every case by hand.
struct Unexpected<'a>(de::Unexpected<'a>);

impl fmt::Display for Unexpected<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use de::Unexpected as U;
        match self.0 {
            U::Bool(b) => write!(f, "boolean `{b}`"),
            U::Unsigned(n) => write!(f, "integer `{n}`"),
            U::Signed(n) => write!(f, "integer `{n}`"),
            U::Float(x) => match serde_json::Number::from_f64(x) {
                Some(n) => write!(f, "floating point `{n}`"),
                None => f.write_str("floating point"),
            },
            U::Char(c) => write!(f, "character `{c}`"),
            U::Str(s) => write!(f, "string {s:?}"),
            U::Bytes(_) => f.write_str("byte array"),
            U::Unit => f.write_str("null"),
            U::Option => f.write_str("Option value"),
            U::NewtypeStruct => f.write_str("newtype struct"),
            U::Seq => f.write_str("sequence"),
            U::Map => f.write_str("map"),
            U::Enum => f.write_str("enum"),
            U::UnitVariant => f.write_str("unit variant"),
            U::NewtypeVariant => f.write_str("newtype variant"),
            U::TupleVariant => f.write_str("tuple variant"),
            U::StructVariant => f.write_str("struct variant"),
            U::Other(other) => f.write_str(other),
        }
    }
}

// ------------------------------------------------------------------ typed reads

/// The one deserializer every typed read goes through.
struct NodeDe<'a, 'de>(&'a Node<'de>);

impl<'de> NodeDe<'_, 'de> {
    #[cold]
    fn invalid_type(&self, exp: &dyn de::Expected) -> Error {
        de::Error::invalid_type(self.unexpected(), exp)
    }

    fn unexpected(&self) -> de::Unexpected<'_> {
        match self.0 {
            Node::Null => de::Unexpected::Unit,
            Node::Bool(b) => de::Unexpected::Bool(*b),
            Node::U64(n) => de::Unexpected::Unsigned(*n),
            Node::I64(n) => de::Unexpected::Signed(*n),
            Node::F64(x) => de::Unexpected::Float(*x),
            Node::Str(s) => de::Unexpected::Str(s),
            Node::Seq(_) => de::Unexpected::Seq,
            Node::Map(_) => de::Unexpected::Map,
        }
    }
}

impl<'de> de::Deserializer<'de> for NodeDe<'_, 'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        match self.0 {
            Node::Null => v.visit_unit(),
            Node::Bool(b) => v.visit_bool(*b),
            Node::U64(n) => v.visit_u64(*n),
            Node::I64(n) => v.visit_i64(*n),
            Node::F64(x) => v.visit_f64(*x),
            Node::Str(Cow::Borrowed(s)) => v.visit_borrowed_str(s),
            Node::Str(Cow::Owned(s)) => v.visit_str(s),
            Node::Seq(items) => v.visit_seq(Seq {
                items: items.iter(),
                index: 0,
            }),
            Node::Map(entries) => v.visit_map(Map {
                entries: entries.iter(),
                value: None,
            }),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        match self.0 {
            Node::Null => v.visit_none(),
            _ => v.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        v: V,
    ) -> Result<V::Value, Error> {
        v.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Error> {
        match self.0 {
            Node::Str(s) => v.visit_enum(Enum {
                variant: s,
                value: None,
            }),
            Node::Map(entries) if entries.len() == 1 => v.visit_enum(Enum {
                variant: &entries[0].0,
                value: Some(&entries[0].1),
            }),
            Node::Map(_) => Err(de::Error::invalid_value(
                de::Unexpected::Map,
                &"map with a single key",
            )),
            _ => Err(de::Error::invalid_type(self.unexpected(), &"string or map")),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_unit()
    }

    // What a type asks for, only: a visitor is compiled with the one or two
    // `visit_*` it can accept instead of all of them (the rest would only
    // build the same `invalid type` error).
    fn deserialize_bool<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        match self.0 {
            Node::Bool(b) => v.visit_bool(*b),
            _ => Err(self.invalid_type(&v)),
        }
    }

    fn deserialize_u64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        match self.0 {
            Node::U64(n) => v.visit_u64(*n),
            Node::I64(n) => v.visit_i64(*n),
            Node::F64(x) => v.visit_f64(*x),
            _ => Err(self.invalid_type(&v)),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        match self.0 {
            Node::Str(Cow::Borrowed(s)) => v.visit_borrowed_str(s),
            Node::Str(Cow::Owned(s)) => v.visit_str(s),
            _ => Err(self.invalid_type(&v)),
        }
    }

    fn deserialize_seq<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        match self.0 {
            Node::Seq(items) => v.visit_seq(Seq {
                items: items.iter(),
                index: 0,
            }),
            _ => Err(self.invalid_type(&v)),
        }
    }

    fn deserialize_map<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        match self.0 {
            Node::Map(entries) => v.visit_map(Map {
                entries: entries.iter(),
                value: None,
            }),
            _ => Err(self.invalid_type(&v)),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Error> {
        match self.0 {
            Node::Seq(_) => self.deserialize_seq(v),
            _ => self.deserialize_map(v),
        }
    }

    fn deserialize_i64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.deserialize_u64(v)
    }
    fn deserialize_f64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.deserialize_u64(v)
    }
    fn deserialize_string<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.deserialize_str(v)
    }
    fn deserialize_identifier<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.deserialize_str(v)
    }
    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, v: V) -> Result<V::Value, Error> {
        self.deserialize_seq(v)
    }

    fn deserialize_i8<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.deserialize_u64(v)
    }
    fn deserialize_i16<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.deserialize_u64(v)
    }
    fn deserialize_i32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.deserialize_u64(v)
    }
    fn deserialize_u8<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.deserialize_u64(v)
    }
    fn deserialize_u16<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.deserialize_u64(v)
    }
    fn deserialize_u32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.deserialize_u64(v)
    }
    fn deserialize_f32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.deserialize_u64(v)
    }
    fn deserialize_char<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.deserialize_str(v)
    }

    serde::forward_to_deserialize_any! {
        i128 u128 bytes byte_buf unit unit_struct tuple_struct
    }
}

/// An enum: its variant's name, and the value of a `{ "variant": value }`.
struct Enum<'a, 'de> {
    variant: &'a Cow<'de, str>,
    value: Option<&'a Node<'de>>,
}

impl<'a, 'de> de::EnumAccess<'de> for Enum<'a, 'de> {
    type Error = Error;
    type Variant = Self;

    fn variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<(T::Value, Self), Error> {
        Ok((seed.deserialize(StrDe(self.variant))?, self))
    }
}

impl<'de> de::VariantAccess<'de> for Enum<'_, 'de> {
    type Error = Error;

    fn unit_variant(self) -> Result<(), Error> {
        match self.value {
            None | Some(Node::Null) => Ok(()),
            Some(v) => Err(de::Error::invalid_type(
                NodeDe(v).unexpected(),
                &"unit variant",
            )),
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, Error> {
        let v = self.content(&"newtype variant")?;
        seed.deserialize(NodeDe(v))
            .map_err(|e| e.at(Seg::Key(self.variant.to_string())))
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, Error> {
        let v = self.content(&"tuple variant")?;
        NodeDe(v)
            .deserialize_any(visitor)
            .map_err(|e| e.at(Seg::Key(self.variant.to_string())))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let v = self.content(&"struct variant")?;
        NodeDe(v)
            .deserialize_any(visitor)
            .map_err(|e| e.at(Seg::Key(self.variant.to_string())))
    }
}

impl<'a, 'de> Enum<'a, 'de> {
    fn content(&self, exp: &dyn de::Expected) -> Result<&'a Node<'de>, Error> {
        self.value
            .ok_or_else(|| de::Error::invalid_type(de::Unexpected::UnitVariant, exp))
    }
}

/// An array's elements.
struct Seq<'a, 'de> {
    items: std::slice::Iter<'a, Node<'de>>,
    index: usize,
}

impl<'de> de::SeqAccess<'de> for Seq<'_, 'de> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        let Some(item) = self.items.next() else {
            return Ok(None);
        };
        let i = self.index;
        self.index += 1;
        seed.deserialize(NodeDe(item))
            .map(Some)
            .map_err(|e| e.at(Seg::Index(i)))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

/// An object's entries.
struct Map<'a, 'de> {
    entries: std::slice::Iter<'a, (Cow<'de, str>, Node<'de>)>,
    value: Option<(&'a Cow<'de, str>, &'a Node<'de>)>,
}

impl<'de> de::MapAccess<'de> for Map<'_, 'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some((k, v)) = self.entries.next() else {
            return Ok(None);
        };
        self.value = Some((k, v));
        seed.deserialize(StrDe(k))
            .map(Some)
            .map_err(|e| e.at(Seg::Key(k.to_string())))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let (k, v) = self
            .value
            .take()
            .ok_or_else(|| de::Error::custom("value without a key"))?;
        seed.deserialize(NodeDe(v))
            .map_err(|e| e.at(Seg::Key(k.to_string())))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

/// A key or a variant name as a deserializer: borrowed when the text had
/// no escapes.
struct StrDe<'a, 'de>(&'a Cow<'de, str>);

impl<'de> de::Deserializer<'de> for StrDe<'_, 'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        match self.0 {
            Cow::Borrowed(s) => v.visit_borrowed_str(s),
            Cow::Owned(s) => v.visit_str(s),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Error> {
        v.visit_enum(Enum {
            variant: self.0,
            value: None,
        })
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::from_str;
    use crate::config::Config;

    fn err<'de, T: serde::Deserialize<'de> + std::fmt::Debug>(json: &'de str) -> (String, String) {
        from_str::<T>(json).unwrap_err()
    }

    #[test]
    fn type_errors_name_their_path_in_serde_json_words() {
        let (path, message) = err::<Config>(
            r#"{"routes":{"default":[{"provider":"a","model":"m","timeoutMs":"5"}]}}"#,
        );
        assert_eq!(path, "routes.default[0].timeoutMs");
        assert_eq!(message, r#"invalid type: string "5", expected u64"#);
        let (path, message) = err::<Config>(r#"{"retry":{"maxAttempts":1.5}}"#);
        assert_eq!(path, "retry.maxAttempts");
        assert_eq!(message, "invalid type: floating point `1.5`, expected u32");
        let (path, message) = err::<Config>(r#"{"timeoutMs":null,"limits":[]}"#);
        assert_eq!(path, "limits");
        assert!(
            message.starts_with("invalid length 0, expected"),
            "{message}"
        );
        let (path, message) = err::<Config>(r#"{"deadlineMs":-1}"#);
        assert_eq!(path, "deadlineMs");
        assert_eq!(message, "invalid value: integer `-1`, expected u64");
    }

    #[test]
    fn unknown_and_missing_fields_and_variants() {
        let (path, message) = err::<Config>(r#"{"retry":{"maxAttempt":3}}"#);
        assert_eq!(path, "retry.maxAttempt");
        assert!(message.starts_with("unknown field `maxAttempt`, expected one of"));
        let (path, message) = err::<Config>(r#"{"routes":{"r":[{"provider":"a"}]}}"#);
        assert_eq!(
            (path.as_str(), message.as_str()),
            ("routes.r[0]", "missing field `model`")
        );
        let (path, message) =
            err::<Config>(r#"{"providers":{"p":{"kind":"openai-compatible","preset":"nope"}}}"#);
        assert_eq!(path, "providers.p");
        assert!(message.starts_with("unknown variant `nope`"), "{message}");
        let (path, _) =
            err::<Config>(r#"{"providers":{"p":{"kind":"openai","maxTokensField":"x"}}}"#);
        assert_eq!(path, "providers.p");
    }

    #[test]
    fn syntax_errors_keep_their_position_and_path() {
        let (path, message) = err::<Config>(r#"{"retry":{"maxAttempts":3,}}"#);
        assert_eq!(path, "retry");
        assert!(message.contains("at line 1 column"), "{message}");
        let (path, message) = err::<Config>("{");
        assert_eq!(path, "(root)");
        assert!(message.contains("EOF"), "{message}");
        let (path, message) = err::<Config>("{} x");
        assert_eq!(path, "(root)");
        assert!(message.starts_with("trailing characters"), "{message}");
        let deep = "[".repeat(200) + &"]".repeat(200);
        let (_, message) = err::<serde_json::Value>(&deep);
        assert!(message.starts_with("recursion limit exceeded"), "{message}");
    }

    #[test]
    fn values_read_as_serde_json_reads_them() {
        let json = r#"{"a":[1,-2,3.5,"x\n",true,null,{"b":{}}],"c":"d"}"#;
        let v: serde_json::Value = from_str(json).unwrap();
        assert_eq!(v, serde_json::from_str::<serde_json::Value>(json).unwrap());
        let m: BTreeMap<&str, Option<Vec<u8>>> = from_str(r#"{"k":null,"l":[1,2]}"#).unwrap();
        assert_eq!(m["k"], None);
        assert_eq!(m["l"], Some(vec![1, 2]));
        let (path, message) = err::<Vec<u8>>("[1, 300]");
        assert_eq!(path, "[1]");
        assert_eq!(message, "invalid value: integer `300`, expected u8");
        let (path, message) = err::<BTreeMap<String, String>>(r#"{"k":"\u0041","l":2}"#);
        assert_eq!(path, "l");
        assert_eq!(message, "invalid type: integer `2`, expected a string");
        let (_, message) = err::<BTreeMap<String, String>>(r#"{"k":{}}"#);
        assert_eq!(message, "invalid type: map, expected a string");
    }

    #[test]
    fn duplicate_fields_are_refused_as_serde_json_refuses_them() {
        // Raised by the struct itself, as with serde_path_to_error: the
        // path is the object's.
        let (path, message) = err::<Config>(r#"{"retry":{"maxAttempts":1,"maxAttempts":2}}"#);
        assert_eq!(path, "retry");
        assert_eq!(message, "duplicate field `maxAttempts`");
        let (path, message) = err::<Config>(r#"{"timeoutMs":1,"timeoutMs":2}"#);
        assert_eq!(path, "(root)");
        assert_eq!(message, "duplicate field `timeoutMs`");
    }

    #[test]
    fn externally_tagged_enums() {
        #[derive(Debug, PartialEq, serde::Deserialize)]
        #[serde(rename_all = "lowercase")]
        enum E {
            Unit,
            New(u8),
            Pair(u8, u8),
            Named { x: u8 },
        }
        let v: Vec<E> =
            from_str(r#"["unit",{"unit":null},{"new":1},{"pair":[1,2]},{"named":{"x":3}}]"#)
                .unwrap();
        assert_eq!(
            v,
            [
                E::Unit,
                E::Unit,
                E::New(1),
                E::Pair(1, 2),
                E::Named { x: 3 }
            ]
        );
        let (path, message) = err::<Vec<E>>(r#"["unit",{"named":{"x":"3"}}]"#);
        assert_eq!(path, "[1].named.x");
        assert_eq!(message, r#"invalid type: string "3", expected u8"#);
        let (path, message) = err::<Vec<E>>(r#"["new"]"#);
        assert_eq!(path, "[0]");
        assert_eq!(
            message,
            "invalid type: unit variant, expected newtype variant"
        );
        let (path, message) = err::<Vec<E>>(r#"["bogus"]"#);
        assert_eq!(path, "[0]");
        assert!(message.starts_with("unknown variant `bogus`"), "{message}");
    }
}
