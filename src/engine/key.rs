//! Which breaker a call counts against: one per (provider, model).
//!
//! A rate limit or overload is usually one model's (each has its own quota
//! and capacity), so each model a route lists for a provider gets its own
//! breaker, keyed `provider/model`; a provider id never holds a `/` (the
//! `provider/model` request form splits on the first one), so the key is
//! unambiguous. Models no route lists (reachable only with
//! [`Policy::any_model`](crate::Policy::any_model)) share one breaker per
//! provider, `provider/*`: names a client makes up add no state.
//!
//! Some failures say the whole provider is out: its key refused (401/403),
//! its host unreachable ([`ProviderError::is_provider_wide`]). Such a
//! failure also counts against every other model's breaker of that
//! provider ([`BreakerStore::note_failure`]), so the provider's models open
//! together, as one provider breaker did.

use std::collections::BTreeMap;
use std::rc::Rc;

use crate::engine::core::Core;
use crate::engine::route::Entry;
use crate::engine::store::BreakerStore;
use crate::error::ProviderError;
use crate::platform::{Platform, UnixMillis};
use crate::policy::breaker::{State, StateName};
use crate::policy::stats::ModelBreaker;

/// The model name in the key of the breaker shared by the models no route
/// lists.
pub(crate) const ANY_MODEL: &str = "*";

/// The breaker key of `model` at `provider`.
pub fn breaker_key(provider: &str, model: &str) -> String {
    let mut key = String::with_capacity(provider.len() + 1 + model.len());
    key.push_str(provider);
    key.push('/');
    key.push_str(model);
    key
}

/// The provider part of a breaker key (the whole key when it has none:
/// a store asked about a bare provider id).
pub fn provider_of(key: &str) -> &str {
    key.split_once('/').map_or(key, |(provider, _)| provider)
}

/// One model's breaker key at a provider, with what reports show of it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ModelKey {
    key: Rc<str>,
    model: String,
    /// The first label a route gives the entry.
    label: Option<String>,
}

/// Every breaker key a client can use, worked out once when it is built:
/// the hot path looks keys up, never formats them.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct BreakerKeys {
    /// Per provider: its listed models' keys, in route order.
    listed: BTreeMap<String, Vec<ModelKey>>,
    /// Per provider: the key its unlisted models share.
    any: BTreeMap<String, Rc<str>>,
}

impl BreakerKeys {
    /// The keys of `routes` over the providers `upstreams`.
    pub(crate) fn new<'a>(
        upstreams: impl IntoIterator<Item = &'a String>,
        routes: &BTreeMap<String, Vec<Entry>>,
    ) -> Self {
        let mut keys = BreakerKeys::default();
        for id in upstreams {
            keys.any
                .insert(id.clone(), breaker_key(id, ANY_MODEL).into());
        }
        for e in routes.values().flatten() {
            let models = keys.listed.entry(e.provider.clone()).or_default();
            if !models.iter().any(|m| m.model == e.model) {
                models.push(ModelKey {
                    key: breaker_key(&e.provider, &e.model).into(),
                    model: e.model.clone(),
                    label: e.label.clone(),
                });
            }
        }
        keys
    }

    /// The key of `model` at `provider`, if a route lists it.
    pub(crate) fn listed(&self, provider: &str, model: &str) -> Option<&Rc<str>> {
        self.listed
            .get(provider)?
            .iter()
            .find(|m| m.model == model)
            .map(|m| &m.key)
    }
}

/// How bad a state is, for a provider's summary of its models.
fn severity(state: State) -> u8 {
    match state {
        State::Closed => 0,
        State::HalfOpen { .. } => 1,
        State::Open { .. } => 2,
    }
}

impl<P: Platform, S: BreakerStore> Core<P, S> {
    /// The breaker key `entry`'s calls count against (a walk asks once per
    /// entry: [`Keyed`](crate::engine::route::Keyed)).
    pub(crate) fn key_of(&self, entry: &Entry) -> Rc<str> {
        if let Some(key) = self.keys.listed(&entry.provider, &entry.model) {
            return Rc::clone(key);
        }
        match self.keys.any.get(&entry.provider) {
            Some(key) => Rc::clone(key),
            // Not a configured provider: its call fails before any breaker
            // verdict, but the key stays well-formed.
            None => breaker_key(&entry.provider, ANY_MODEL).into(),
        }
    }

    /// Every breaker key of `provider` the client knows of: its listed
    /// models', and the shared one once it has been used.
    pub(crate) fn provider_keys(&self, provider: &str) -> Vec<(&str, &str, Option<&str>)> {
        self.keys_of(provider).collect()
    }

    /// [`provider_keys`](Self::provider_keys), not collected.
    fn keys_of<'k>(
        &'k self,
        provider: &str,
    ) -> impl Iterator<Item = (&'k str, &'k str, Option<&'k str>)> {
        let listed = self.keys.listed.get(provider).into_iter().flatten();
        let any = self
            .keys
            .any
            .get(provider)
            .filter(|k| self.store.state(k).is_some());
        listed
            .map(|m| (&*m.key, m.model.as_str(), m.label.as_deref()))
            .chain(any.map(|k| (&**k, ANY_MODEL, None)))
    }

    /// After `entry` (key `key`) failed with `error`: when the failure is
    /// provider-wide, every other model of the provider counts it too.
    pub(crate) fn spread_failure(&self, entry: &Entry, key: &str, error: &ProviderError) {
        if !(error.trips_breaker() && error.is_provider_wide()) {
            return;
        }
        let now: UnixMillis = self.platform.now();
        for (other, model, label) in self.provider_keys(&entry.provider) {
            if other == key {
                continue;
            }
            let before = self.store.state(other);
            self.store.note_failure(other, now);
            self.emit_transition(&entry.provider, model, label, other, before);
        }
    }

    /// The breakers of `provider`'s models, as health reports show them.
    pub(crate) fn model_breakers(&self, provider: &str) -> Vec<ModelBreaker> {
        let stats = self.model_stats.borrow();
        self.provider_keys(provider)
            .into_iter()
            .map(|(key, model, label)| {
                let (state, consecutive_failures) = self
                    .store
                    .snapshot(key)
                    .map_or((State::Closed, 0), |s| (s.state, s.consecutive_failures));
                ModelBreaker::new(
                    model.to_owned(),
                    label.map(str::to_owned),
                    state,
                    consecutive_failures,
                    stats.get(key),
                )
                .with_pool(self.pool_of(key))
            })
            .collect()
    }

    /// `provider`'s breaker as one: its worst model's state and failure
    /// count (an open one shows the provider open; its `models` say which).
    pub(crate) fn provider_breaker(&self, provider: &str) -> Option<(State, u32)> {
        self.provider_keys(provider)
            .iter()
            .filter_map(|(key, _, _)| self.store.snapshot(key))
            .map(|s| (s.state, s.consecutive_failures))
            .max_by_key(|(state, failures)| (severity(*state), *failures))
    }

    /// `provider`'s state as one, as [`provider_breaker`](Self::provider_breaker) has it.
    pub(crate) fn provider_state(&self, provider: &str) -> StateName {
        self.keys_of(provider)
            .filter_map(|(key, _, _)| self.store.state(key))
            .max_by_key(|s| severity(*s))
            .unwrap_or(State::Closed)
            .name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_split_at_the_first_slash() {
        assert_eq!(breaker_key("or", "anthropic/claude"), "or/anthropic/claude");
        assert_eq!(provider_of("or/anthropic/claude"), "or");
        assert_eq!(provider_of("openai"), "openai");
    }
}
