//! The label values of `GET /metrics`: every one from a bounded set, and
//! written as the OpenMetrics text format requires.
//!
//! A series lives as long as the isolate, so a label value taken from a
//! request would let anyone grow its memory, one series per value (a unique
//! path per request, key or no key). Paths are named by the route they
//! reach (a known path, `/v1/models/:id`, or `other`); providers and
//! models by the configuration (a model no route lists, reachable with
//! `allowAnyModel`, is `other`; the breaker shared by such models is `*`).
//!
//! Configured names are the operator's and may hold any character: values
//! are escaped on the way out (`\` `"` and newline, OpenMetrics 1.0,
//! "Escaping"), so no name writes a series of its own.

use std::borrow::{Borrow, Cow};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};

use crate::engine::key::ANY_MODEL;

/// The value every name outside the bounded set becomes.
pub(super) const OTHER: &str = "other";

/// The path label of a request to `/v1/models/:id`.
pub(super) const MODEL_PATH: &str = "/v1/models/:id";

/// Every path the gateway answers on, as its path label.
pub(super) const PATHS: [&str; 13] = [
    "/",
    "/v1/chat/completions",
    "/v1/messages",
    "/v1/responses",
    "/v1/embeddings",
    "/v1/messages/count_tokens",
    "/v1/models",
    "/health",
    "/metrics",
    "/status",
    "/status/data",
    "/status/login",
    MODEL_PATH,
];

/// The path label of a request to `path`: the known path it names (one
/// trailing `/` aside), [`MODEL_PATH`] for one route, [`OTHER`] for the rest.
pub(super) fn path_label(path: &str) -> &'static str {
    let p = path
        .strip_suffix('/')
        .filter(|p| !p.is_empty())
        .unwrap_or(path);
    if p.strip_prefix("/v1/models/")
        .is_some_and(|id| !id.is_empty())
    {
        return MODEL_PATH;
    }
    PATHS
        .iter()
        .find(|known| **known == p && **known != MODEL_PATH)
        .copied()
        .unwrap_or(OTHER)
}

/// A label value, escaped when the exposition is written: a fixed name, or
/// one of the values [`Known`] holds, shared so that labelling a request
/// allocates nothing (`Arc`, not `Rc`: the metrics registry asks for `Send`).
/// Compared, ordered and hashed by its text, as [`Borrow<str>`] asks.
#[derive(Clone, Debug)]
pub(super) enum Label {
    /// A name written in the code.
    Fixed(&'static str),
    /// A value from the configuration's bounded set.
    Shared(Arc<str>),
}

impl Label {
    /// A value from the bounded set.
    pub(super) fn new(v: &str) -> Self {
        Label::Shared(v.into())
    }

    fn as_str(&self) -> &str {
        match self {
            Label::Fixed(s) => s,
            Label::Shared(s) => s,
        }
    }
}

impl From<Cow<'static, str>> for Label {
    fn from(v: Cow<'static, str>) -> Self {
        match v {
            Cow::Borrowed(s) => Label::Fixed(s),
            Cow::Owned(s) => Label::Shared(s.into()),
        }
    }
}

impl PartialEq for Label {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Label {}

impl Hash for Label {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialOrd for Label {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Label {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_str().cmp(other.as_str())
    }
}

/// Looked up by its text.
impl Borrow<str> for Label {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl EncodeLabelValue for Label {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        // The crate writes label values as they are.
        for c in self.as_str().chars() {
            match c {
                '\\' => encoder.write_str("\\\\")?,
                '"' => encoder.write_str("\\\"")?,
                '\n' => encoder.write_str("\\n")?,
                c => encoder.write_char(c)?,
            }
        }
        Ok(())
    }
}

/// The configured providers and the models routes list for each: what a
/// provider or model label may name.
#[derive(Debug)]
pub(super) struct Known {
    models: BTreeMap<Label, BTreeSet<Label>>,
    other: Label,
    any: Label,
}

impl Known {
    /// `providers`, with the `(provider, model)` pairs routes list.
    pub(super) fn new<'a>(
        providers: impl IntoIterator<Item = &'a str>,
        listed: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Self {
        let mut models: BTreeMap<Label, BTreeSet<Label>> = providers
            .into_iter()
            .map(|p| (Label::new(p), BTreeSet::new()))
            .collect();
        for (provider, model) in listed {
            if let Some(m) = models.get_mut(provider) {
                m.insert(Label::new(model));
            }
        }
        let (other, any) = (Label::new(OTHER), Label::new(ANY_MODEL));
        Known { models, other, any }
    }

    /// The label of `provider`.
    pub(super) fn provider(&self, provider: &str) -> Label {
        let known = self.models.get_key_value(provider).map(|(p, _)| p);
        known.unwrap_or(&self.other).clone()
    }

    /// The labels of `model` at `provider`.
    pub(super) fn model(&self, provider: &str, model: &str) -> (Label, Label) {
        let Some((provider, models)) = self.models.get_key_value(provider) else {
            return (self.other.clone(), self.other.clone());
        };
        let model = match model == ANY_MODEL {
            true => &self.any,
            false => models.get(model).unwrap_or(&self.other),
        };
        (provider.clone(), model.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::route::{route, Route};

    #[test]
    fn every_known_path_is_a_route_and_keeps_its_name() {
        for p in PATHS {
            let concrete = if p == MODEL_PATH { "/v1/models/x" } else { p };
            let routed = ["GET", "POST"]
                .iter()
                .any(|m| route(m, concrete) != Route::NotFound);
            assert!(routed, "{p}");
            assert_eq!(path_label(concrete), p);
            assert_eq!(path_label(&format!("{concrete}/")), p);
        }
        assert_eq!(path_label("/v1/models/"), "/v1/models");
        assert_eq!(path_label("/v1/models/a%2Fb/"), MODEL_PATH);
        assert_eq!(path_label("/v1/models/{id}"), MODEL_PATH);
        assert_eq!(path_label("//"), "/", "as route() reads it");
        for other in ["", "/nowhere", "/v1/modelsx", "/health/x", "/METRICS"] {
            assert_eq!(path_label(other), OTHER, "{other:?}");
        }
    }

    #[test]
    fn names_outside_the_configuration_are_other() {
        let k = Known::new(["p", "q"], [("p", "m"), ("r", "m")]);
        assert_eq!(k.provider("p"), Label::new("p"));
        assert_eq!(k.provider("r"), Label::new(OTHER));
        assert_eq!(k.model("p", "m"), (Label::new("p"), Label::new("m")));
        assert_eq!(k.model("p", "*"), (Label::new("p"), Label::new("*")));
        assert_eq!(k.model("q", "m"), (Label::new("q"), Label::new(OTHER)));
        assert_eq!(k.model("r", "m"), (Label::new(OTHER), Label::new(OTHER)));
    }
}
