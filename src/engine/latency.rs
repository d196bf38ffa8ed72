//! Latency demotion on the client: each answer's time goes into its
//! entry's figures, and each request's route is put in the order its
//! entries' standing asks for ([`crate::policy::latency`] decides).

use std::borrow::Cow;

use crate::engine::client::{Client, Entry};
use crate::engine::store::BreakerStore;
use crate::event::{Event, Standing};
use crate::platform::Platform;
use crate::policy::latency::{demote, Demotion, Measure};

/// The key an entry's figures are kept under: one model at one provider.
pub(crate) fn key(entry: &Entry) -> String {
    format!("{}/{}", entry.provider, entry.model)
}

/// Whether `entry` has an objective on any measure (only those are judged).
fn judged(entry: &Entry) -> bool {
    entry.speed.latency_slo.is_some() || entry.speed.ttft_slo.is_some()
}

impl<P: Platform, S: BreakerStore> Client<P, S> {
    /// Records how long `entry` took to answer (`Latency`: a whole answer;
    /// `Ttft`: a stream's first token), when it has an objective for it;
    /// a change of standing is an event.
    pub(crate) fn record_latency(&self, entry: &Entry, measure: Measure, ms: u64) {
        let slo = match measure {
            Measure::Latency => entry.speed.latency_slo,
            Measure::Ttft => entry.speed.ttft_slo,
        };
        let Some(slo) = slo else {
            return;
        };
        let change =
            self.latency
                .borrow_mut()
                .record(&key(entry), measure, ms, slo, &self.demotion);
        let Some(change) = change else {
            return;
        };
        let standing = Standing {
            provider: &entry.provider,
            model: &entry.model,
            label: entry.label.as_deref(),
            measure,
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
        let order = {
            let book = self.latency.borrow();
            demote(
                &chain,
                |e| judged(e) && book.is_demoted(&key(e)),
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
    /// p95 that demoted them.
    pub(crate) fn demotions(&self, provider: &str) -> Vec<Demotion> {
        let book = self.latency.borrow();
        let mut out = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for entry in self.routes().values().flatten() {
            if entry.provider != provider || !seen.insert(&entry.model) {
                continue;
            }
            for (measure, p95_ms) in book.demoted(&key(entry)) {
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
