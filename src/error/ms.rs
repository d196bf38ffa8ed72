//! Serde for `Duration` as whole milliseconds.

use serde::{Deserialize, Deserializer, Serializer};
use std::time::Duration;

pub(crate) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(crate::platform::millis(*d))
}

pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    u64::deserialize(d).map(Duration::from_millis)
}
