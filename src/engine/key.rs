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

use crate::engine::client::{Client, Entry};
use crate::engine::store::BreakerStore;
use crate::error::ProviderError;
use crate::platform::{Platform, UnixMillis};
use crate::policy::breaker::{State, StateName};
use crate::policy::stats::ModelBreaker;

/// The model name in the key of the breaker shared by the models no route
/// lists.
pub const ANY_MODEL: &str = "*";

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

/// How bad a state is, for a provider's summary of its models.
fn severity(state: State) -> u8 {
    match state {
        State::Closed => 0,
        State::HalfOpen { .. } => 1,
        State::Open { .. } => 2,
    }
}

impl<P: Platform, S: BreakerStore> Client<P, S> {
    /// The breaker key `entry`'s calls count against.
    pub(crate) fn key_of(&self, entry: &Entry) -> String {
        if self.lists(&entry.provider, &entry.model) {
            breaker_key(&entry.provider, &entry.model)
        } else {
            breaker_key(&entry.provider, ANY_MODEL)
        }
    }

    /// The models routes list for `provider` (each once, in route order),
    /// with the first label given to each.
    pub(crate) fn listed_models(&self, provider: &str) -> Vec<(&str, Option<&str>)> {
        let mut out: Vec<(&str, Option<&str>)> = Vec::new();
        for e in self.routes().values().flatten() {
            if e.provider == provider && !out.iter().any(|(m, _)| *m == e.model) {
                out.push((&e.model, e.label.as_deref()));
            }
        }
        out
    }

    /// Every breaker key of `provider` the client knows of: its listed
    /// models', and the shared one when it has been used.
    pub(crate) fn provider_keys(&self, provider: &str) -> Vec<(String, String, Option<&str>)> {
        let mut keys: Vec<(String, String, Option<&str>)> = self
            .listed_models(provider)
            .into_iter()
            .map(|(m, label)| (breaker_key(provider, m), m.to_owned(), label))
            .collect();
        let any = breaker_key(provider, ANY_MODEL);
        if self.store.state(&any).is_some() {
            keys.push((any, ANY_MODEL.to_owned(), None));
        }
        keys
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
            let before = self.store.state(&other);
            self.store.note_failure(&other, now);
            self.emit_transition(&entry.provider, &model, label, &other, before);
        }
    }

    /// The breakers of `provider`'s models, as health reports show them.
    pub(crate) fn model_breakers(&self, provider: &str) -> Vec<ModelBreaker> {
        self.provider_keys(provider)
            .into_iter()
            .map(|(key, model, label)| {
                let (state, consecutive_failures) = self
                    .store
                    .snapshot(&key)
                    .map_or((State::Closed, 0), |s| (s.state, s.consecutive_failures));
                ModelBreaker::new(model, label.map(str::to_owned), state, consecutive_failures)
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
        self.provider_keys(provider)
            .iter()
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
