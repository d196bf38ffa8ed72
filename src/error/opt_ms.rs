//! Serde for `Option<Duration>` as whole milliseconds.

use serde::{Deserialize, Deserializer, Serializer};
use std::time::Duration;

pub(crate) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&crate::platform::millis(*d)),
        None => s.serialize_none(),
    }
}

pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    Option::<u64>::deserialize(d).map(|o| o.map(Duration::from_millis))
}
