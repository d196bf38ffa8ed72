//! Latency demotion on the client: each answer's time goes into its
//! entry's figures, and each request's route is put in the order its
//! entries' standing asks for ([`crate::policy::latency`] decides). With a
//! store shared fleet-wide, the samples travel with its verdicts and the
//! fleet's standing, judged over every isolate's samples, orders routes.

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::engine::core::Core;
use crate::engine::route::{Entry, Keyed};
use crate::engine::store::BreakerStore;
use crate::event::{Event, Standing};
use crate::platform::Platform;
use crate::policy::latency::{demote, Change, Demotion, Measure, Sample};

/// Whether `entry` has an objective on any measure (only those are judged).
fn judged(entry: &Entry) -> bool {
    entry.speed.latency_slo.is_some() || entry.speed.ttft_slo.is_some()
}

impl<P: Platform, S: BreakerStore> Core<P, S> {
    /// Records how long `entry` took to answer (`Latency`: a whole answer;
    /// `Ttft`: a stream's first token), when it has an objective for it,
    /// and shares it with the fleet through the store. Its own figures
    /// decide its standing unless the fleet's does; a change of standing
    /// is an event.
    pub(crate) fn record_latency(&self, entry: Keyed<'_>, measure: Measure, ms: u64) {
        let Some(slo) = slo_of(&entry, measure) else {
            return;
        };
        let key = entry.key;
        let shared = self.store.latencies(key).is_some();
        let change =
            self.latency
                .borrow_mut()
                .record(key, measure, ms, slo, &self.demotion, shared);
        let slo_ms = u64::try_from(slo.as_millis()).unwrap_or(u64::MAX);
        let sample = Sample {
            measure,
            ms,
            slo_ms,
        };
        self.store.sample(key, self.platform.now(), sample);
        if let Some(change) = change {
            self.announce(&entry, change);
        }
    }

    /// Takes the fleet's standing of `entry`, when the store has one, in
    /// place of this isolate's (an event when it differs).
    fn follow(&self, entry: &Entry, key: &str) {
        let Some(fleet) = self.store.latencies(key) else {
            return;
        };
        for measure in [Measure::Latency, Measure::Ttft] {
            let Some(slo) = slo_of(entry, measure) else {
                continue;
            };
            let change = self
                .latency
                .borrow_mut()
                .adopt(key, measure, fleet.get(measure), slo);
            if let Some(change) = change {
                self.announce(entry, change);
            }
        }
    }

    fn announce(&self, entry: &Entry, change: Change) {
        let standing = Standing {
            provider: &entry.provider,
            model: &entry.model,
            label: entry.label.as_deref(),
            measure: change.measure,
            p95_ms: change.p95_ms,
            slo_ms: change.slo_ms,
        };
        self.emit(|| match change.demoted {
            true => Event::Demoted(standing),
            false => Event::Restored(standing),
        });
    }

    /// `chain` in the order to try it: the entries that meet their
    /// objectives first, the demoted after them, but for an exploring share.
    pub(crate) fn by_latency<'c>(&self, chain: Cow<'c, [Entry]>) -> Cow<'c, [Entry]> {
        if !chain.iter().any(judged) {
            return chain; // nothing to judge: no flags, no lookups
        }
        for entry in chain.iter().filter(|e| judged(e)) {
            self.follow(entry, &self.key_of(entry));
        }
        let order = {
            let book = self.latency.borrow();
            demote(
                &chain,
                |e| judged(e) && book.is_demoted(&self.key_of(e)),
                &self.demotion,
                || self.platform.random(),
            )
        };
        match order {
            None => chain,
            Some(order) => order.into_iter().map(|i| chain[i].clone()).collect(),
        }
    }

    /// The measures `provider`'s models are demoted on, by model, with the
    /// p95 that demoted them (the fleet's standing where it has one), over
    /// the entries of `routes`.
    pub(crate) fn demotions(
        &self,
        routes: &BTreeMap<String, Vec<Entry>>,
        provider: &str,
    ) -> Vec<Demotion> {
        let mut out = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for entry in routes.values().flatten() {
            if entry.provider != provider || !seen.insert(&entry.model) {
                continue;
            }
            let key = self.key_of(entry);
            if judged(entry) {
                self.follow(entry, &key);
            }
            for (measure, p95_ms) in self.latency.borrow().demoted(&key) {
                out.push(Demotion {
                    model: entry.model.clone(),
                    measure,
                    p95_ms,
                });
            }
        }
        out
    }
}

/// `entry`'s objective for `measure`.
fn slo_of(entry: &Entry, measure: Measure) -> Option<std::time::Duration> {
    match measure {
        Measure::Latency => entry.speed.latency_slo,
        Measure::Ttft => entry.speed.ttft_slo,
    }
}
