//! Quality escalation: validators on a route, and when a rejected answer
//! may go on to the route's next entry.
//!
//! A route with validators judges each answer it gets: one that passes is
//! the reply; one that fails is recorded as a rejected attempt (the provider
//! answered, so no breaker or error rate counts it) and the walk escalates to
//! the next entry, up to `maxEscalations` and while the attempts so far cost
//! less than `maxCostUsd`. When no answer passes, the route gives the last
//! one anyway or an error ([`OnExhausted`]). The checks themselves are pure
//! ([`Validator`]); a host may add async ones ([`AnswerCheck`], the npm
//! package's JS functions).

use std::rc::Rc;

use crate::chat::ChatResponse;
use crate::error::{Attempt, AttemptOutcome};
use crate::provider::LocalFuture;

pub(crate) mod check;
#[cfg(feature = "schema")]
pub(crate) mod schema;

pub use check::{refusal, Rejection, Validator};

/// A check written in the host's language (the npm package's
/// `(answer) => boolean | { ok, reason } | Promise<…>`).
pub trait AnswerCheck {
    /// The name its rejections carry.
    fn name(&self) -> &str;
    /// `Err(reason)` when `answer` is not good enough.
    fn check<'a>(&'a self, answer: &'a ChatResponse) -> LocalFuture<'a, Result<(), String>>;
}

/// The cost in US dollars of one attempt, from its reported usage and its
/// model's price; `None` when unknown (no price, or tokens not reported).
pub type AttemptCost = Rc<dyn Fn(&Attempt) -> Option<f64>>;

/// What a route answers when every answer was rejected.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnExhausted {
    /// The last answer, as it is (its attempt marked `kept`): a user sees
    /// something rather than nothing (the default).
    #[default]
    LastAnswer,
    /// [`Error::NoValidAnswer`](crate::Error::NoValidAnswer): a 502 in the
    /// client's format.
    Error,
}

/// A route's validators and escalation limits.
#[derive(Default)]
pub struct Quality {
    /// Checks every answer must pass, in order; the first failure rejects.
    pub validators: Vec<Validator>,
    /// Host checks, run after `validators`.
    pub functions: Vec<Box<dyn AnswerCheck>>,
    /// How many rejected answers may escalate to the next entry (`None`:
    /// as many as the route has entries).
    pub max_escalations: Option<u32>,
    /// No escalation once the request's attempts have cost this much.
    pub max_cost_usd: Option<f64>,
    /// What to answer when no answer passed.
    pub on_exhausted: OnExhausted,
    /// Prices attempts, for `max_cost_usd`.
    pub attempt_cost: Option<AttemptCost>,
}

impl std::fmt::Debug for Quality {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Quality")
            .field("validators", &self.validators)
            .field("functions", &self.functions.len())
            .field("max_escalations", &self.max_escalations)
            .field("max_cost_usd", &self.max_cost_usd)
            .field("on_exhausted", &self.on_exhausted)
            .field("attempt_cost", &self.attempt_cost.is_some())
            .finish()
    }
}

impl Quality {
    /// Validators and nothing else: unlimited escalation, the last answer
    /// when none passes.
    pub fn new(validators: Vec<Validator>) -> Self {
        Quality {
            validators,
            ..Quality::default()
        }
    }

    /// Whether the route judges answers at all.
    pub fn is_active(&self) -> bool {
        !self.validators.is_empty() || !self.functions.is_empty()
    }

    /// Judges `answer`: the first check it fails, if any.
    pub async fn check(&self, answer: &ChatResponse) -> Result<(), Rejection> {
        for v in &self.validators {
            v.check(answer)?;
        }
        for f in &self.functions {
            f.check(answer)
                .await
                .map_err(|reason| Rejection::new(f.name(), reason))?;
        }
        Ok(())
    }

    /// Whether the answer rejected as the `rejected`-th may escalate to the
    /// next entry, given the request's `attempts` so far; `Err` says which
    /// limit stops it. The cost cap counts what was spent, not what the
    /// next entry will cost: one escalation may carry the total past it.
    /// An attempt that reported tokens but cannot be priced stops
    /// escalation under a cap (its cost is unknown, so the cap cannot be
    /// kept); one that reported none counts nothing.
    pub fn may_escalate(&self, rejected: u32, attempts: &[Attempt]) -> Result<(), String> {
        if let Some(max) = self.max_escalations {
            if rejected > max {
                return Err(format!("maxEscalations ({max}) reached"));
            }
        }
        let Some(cap) = self.max_cost_usd else {
            return Ok(());
        };
        let mut spent = 0.0;
        for a in attempts {
            match self.attempt_cost.as_ref().and_then(|cost| cost(a)) {
                Some(c) => spent += c,
                None if a.usage.is_some() => {
                    return Err(format!(
                        "maxCostUsd ({cap}): the cost of {}/{} is unknown (no price)",
                        a.provider, a.model
                    ))
                }
                None => {}
            }
        }
        if spent >= cap {
            return Err(format!("maxCostUsd ({cap}) reached: {spent} spent"));
        }
        Ok(())
    }
}

/// Marks the request's last attempt (the one that answered) as rejected.
pub(crate) fn reject_last(attempts: &mut [Attempt], rejection: Rejection) {
    if let Some(last) = attempts.last_mut() {
        last.outcome = AttemptOutcome::Rejected {
            validator: rejection.validator,
            reason: rejection.reason,
            kept: false,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::Usage;
    use std::time::Duration;

    fn attempt(model: &str, usage: Option<Usage>) -> Attempt {
        Attempt {
            provider: "p".into(),
            model: model.into(),
            number: 1,
            started_at: 0,
            duration: Duration::ZERO,
            reached: true,
            outcome: AttemptOutcome::Success,
            usage,
            omitted: Vec::new(),
            span: None,
            breaker: None,
        }
    }

    fn usage(input: u64, output: u64) -> Option<Usage> {
        Some(Usage {
            input_tokens: input,
            output_tokens: output,
            ..Usage::default()
        })
    }

    /// $1 per million input tokens, $2 per million output for "cheap";
    /// $10 and $30 for "strong".
    fn prices() -> AttemptCost {
        Rc::new(|a: &Attempt| {
            let (i, o) = match a.model.as_str() {
                "cheap" => (1.0, 2.0),
                "strong" => (10.0, 30.0),
                _ => return None,
            };
            let u = a.usage?;
            Some((u.input_tokens as f64 * i + u.output_tokens as f64 * o) / 1e6)
        })
    }

    #[test]
    fn escalations_stop_at_the_limit() {
        let q = Quality {
            max_escalations: Some(1),
            ..Quality::default()
        };
        assert_eq!(q.may_escalate(1, &[]), Ok(()));
        assert_eq!(
            q.may_escalate(2, &[]),
            Err("maxEscalations (1) reached".into())
        );
        let none = Quality {
            max_escalations: Some(0),
            ..Quality::default()
        };
        assert!(none.may_escalate(1, &[]).is_err());
        assert_eq!(Quality::default().may_escalate(99, &[]), Ok(()));
    }

    #[test]
    fn the_cost_cap_counts_every_attempt_so_far() {
        let q = Quality {
            max_cost_usd: Some(0.01),
            attempt_cost: Some(prices()),
            ..Quality::default()
        };
        // 1000 in, 500 out at cheap: $0.002.
        let cheap = attempt("cheap", usage(1000, 500));
        assert_eq!(q.may_escalate(1, std::slice::from_ref(&cheap)), Ok(()));
        // Plus 500 in, 200 out at strong ($0.011): $0.013 in all.
        let strong = attempt("strong", usage(500, 200));
        let err = q.may_escalate(2, &[cheap.clone(), strong]).unwrap_err();
        assert!(err.starts_with("maxCostUsd (0.01) reached: 0.013"), "{err}");
        // A failed attempt that reported no tokens costs nothing.
        let failed = attempt("unpriced", None);
        assert_eq!(q.may_escalate(1, &[failed, cheap]), Ok(()));
    }

    #[test]
    fn an_unpriced_answer_stops_escalation_under_a_cap() {
        let q = Quality {
            max_cost_usd: Some(1.0),
            attempt_cost: Some(prices()),
            ..Quality::default()
        };
        let err = q
            .may_escalate(1, &[attempt("unpriced", usage(10, 10))])
            .unwrap_err();
        assert_eq!(
            err,
            "maxCostUsd (1): the cost of p/unpriced is unknown (no price)"
        );
        let no_prices = Quality {
            max_cost_usd: Some(1.0),
            ..Quality::default()
        };
        assert!(no_prices
            .may_escalate(1, &[attempt("cheap", usage(10, 10))])
            .is_err());
    }
}
