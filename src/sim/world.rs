//! The simulated providers behind a [`Platform`]: each HTTP call is answered
//! on the virtual clock as its provider's model says at that moment —
//! latency drawn from a log-normal distribution, faults from the timeline,
//! admission from its rate-limit pool when it has one.

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

use serde_json::json;

use super::exec::Clock;
use super::pool::{retry_after, Admission, Pool};
use super::scenario::{Effect, Fault, ProviderModel};
use crate::platform::{
    millis, Body, Headers, HttpRequest, HttpResponse, Platform, TransportError, TransportErrorKind,
    UnixMillis,
};

/// A request with no time limit that gets no answer waits this long.
const SILENCE: u64 = 3_600_000;

/// The z-score of the 95th percentile of a normal distribution.
const Z95: f64 = 1.644_853_626_951_472_2;

/// The platform the simulated clients run on. Clones share state.
#[derive(Clone)]
pub(crate) struct SimPlatform {
    clock: Clock,
    world: Rc<World>,
}

/// Which wire format a provider answers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Anthropic,
    OpenAi,
}

/// Calls one provider received.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Calls {
    /// Every call.
    pub(crate) total: u64,
    /// Calls that failed: an error status, silence, a refusal, or an answer
    /// slower than the call's time limit.
    pub(crate) failed: u64,
    /// Calls answered 429 (by its pool or a fault) within their time limit.
    pub(crate) rate_limited: u64,
}

pub(crate) struct SimProvider {
    pub(crate) id: String,
    base: String,
    model: ProviderModel,
    mu: f64,
    sigma: f64,
    ok: Vec<u8>,
    /// The error bodies, by [`error_slot`]: written once, not per call.
    errors: [Vec<u8>; 3],
    rng: RefCell<fastrand::Rng>,
    dialect: Dialect,
    /// Its rate-limit pool, and the tokens a call takes from it.
    pool: Option<RefCell<Pool>>,
    call_tokens: u64,
}

pub(crate) struct World {
    pub(crate) providers: Vec<SimProvider>,
    calls: RefCell<Vec<Calls>>,
    /// Per provider and bucket of `bucket_ms` (by the call's time): calls
    /// answered 429.
    rate_limited: RefCell<Vec<Vec<u64>>>,
    bucket_ms: u64,
    /// The clients' own randomness (backoff jitter).
    rng: RefCell<fastrand::Rng>,
}

/// What a call gets: an answer after `after` ms, or nothing.
enum Answer {
    Reply {
        after: u64,
        status: u16,
        retry_after: Option<u64>,
        /// The pool's headers (and its `retry-after`), as of the call.
        headers: Headers,
    },
    Silent,
    Refused,
}

impl SimProvider {
    pub(crate) fn new(
        id: &str,
        model: ProviderModel,
        dialect: Dialect,
        tokens: (u64, u64),
        seed: u64,
    ) -> Self {
        let (input, output) = tokens;
        let ok = match dialect {
            Dialect::Anthropic => json!({
                "id": "msg_sim", "type": "message", "role": "assistant", "model": "sim",
                "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
                "usage": {"input_tokens": input, "output_tokens": output}
            }),
            Dialect::OpenAi => json!({
                "id": "chatcmpl-sim", "object": "chat.completion", "created": 0, "model": "sim",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": input, "completion_tokens": output,
                          "total_tokens": input + output}
            }),
        };
        SimProvider {
            id: id.to_string(),
            base: base_url(id),
            mu: model.median_ms.ln(),
            sigma: (model.p95_ms / model.median_ms).ln() / Z95,
            pool: model.pool.as_ref().map(|p| RefCell::new(Pool::new(p))),
            model,
            ok: ok.to_string().into_bytes(),
            errors: ERRORS.map(|(kind, message)| error_json(dialect, kind, message)),
            rng: RefCell::new(fastrand::Rng::with_seed(seed)),
            dialect,
            call_tokens: input.saturating_add(output),
        }
    }

    /// When the provider's last failing window ends, if it has one.
    pub(crate) fn last_fault_end(&self) -> Option<u64> {
        self.model
            .faults
            .iter()
            .filter(|f| !matches!(f.effect, Effect::Slow { .. }))
            .map(|f| f.to_ms)
            .max()
    }

    /// What a call at `now` gets: refused by the pool at once (a rate
    /// limiter answers before any model runs), or as the timeline says;
    /// either way with the pool's headers.
    fn answer(&self, now: UnixMillis) -> Answer {
        let Some(pool) = &self.pool else {
            return self.served(now, Headers::new());
        };
        let mut pool = pool.borrow_mut();
        let admission = pool.admit(now, self.call_tokens);
        let mut headers = Headers::new();
        match self.dialect {
            Dialect::OpenAi => pool.openai_headers(&mut headers),
            Dialect::Anthropic => pool.anthropic_headers(&mut headers),
        }
        match admission {
            Admission::Admitted => self.served(now, headers),
            Admission::Refused { wait_ms } => {
                headers.insert("retry-after", retry_after(wait_ms));
                Answer::Reply {
                    after: 1,
                    status: 429,
                    retry_after: None,
                    headers,
                }
            }
        }
    }

    /// An admitted call's answer, as the fault timeline has it at `now`.
    fn served(&self, now: UnixMillis, headers: Headers) -> Answer {
        let mut rng = self.rng.borrow_mut();
        let z = normal(&mut rng);
        let mut latency = (self.mu + self.sigma * z).exp();
        let mut hit = None;
        for f in self.model.faults.iter().filter(|f| is_on(f, now)) {
            if rng.f64() >= f.probability {
                continue;
            }
            match &f.effect {
                Effect::Slow {
                    factor,
                    ramp,
                    tail_only,
                } => {
                    if !tail_only || z > 0.0 {
                        let share = if *ramp {
                            (now - f.from_ms) as f64 / (f.to_ms - f.from_ms) as f64
                        } else {
                            1.0
                        };
                        latency *= 1.0 + (factor - 1.0) * share;
                    }
                }
                other => {
                    hit.get_or_insert(other);
                }
            }
        }
        let after = latency.round().max(1.0) as u64;
        match hit {
            None => Answer::Reply {
                after,
                status: 200,
                retry_after: None,
                headers,
            },
            Some(Effect::Status {
                status,
                retry_after_ms,
            }) => Answer::Reply {
                after,
                status: *status,
                retry_after: *retry_after_ms,
                headers,
            },
            Some(Effect::Silent) => Answer::Silent,
            Some(Effect::Refused | Effect::Slow { .. }) => Answer::Refused,
        }
    }

    fn error_body(&self, status: u16) -> Vec<u8> {
        self.errors[error_slot(status)].clone()
    }
}

/// The error types and messages a simulated provider answers with: for 429,
/// for 529, for any other status.
const ERRORS: [(&str, &str); 3] = [
    ("rate_limit_error", "simulated rate limit"),
    ("overloaded_error", "simulated overload"),
    ("api_error", "simulated failure"),
];

/// Where `status`'s body is in [`ERRORS`].
fn error_slot(status: u16) -> usize {
    match status {
        429 => 0,
        529 => 1,
        _ => 2,
    }
}

/// An error object in `dialect`'s shape.
fn error_json(dialect: Dialect, kind: &str, message: &str) -> Vec<u8> {
    let body = match dialect {
        Dialect::Anthropic => {
            json!({"type": "error", "error": {"type": kind, "message": message}})
        }
        Dialect::OpenAi => json!({"error": {"type": kind, "message": message}}),
    };
    body.to_string().into_bytes()
}

/// Whether fault `f` is on at `now`.
fn is_on(f: &Fault, now: UnixMillis) -> bool {
    if now < f.from_ms || now >= f.to_ms {
        return false;
    }
    match f.flap {
        Some(flap) => (now - f.from_ms) % flap.period_ms < flap.on_ms,
        None => true,
    }
}

/// A standard normal draw (Box–Muller).
fn normal(rng: &mut fastrand::Rng) -> f64 {
    let u1 = 1.0 - rng.f64(); // (0, 1]: ln is finite
    let u2 = rng.f64();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Where the simulator points provider `id`.
pub(crate) fn base_url(id: &str) -> String {
    format!("http://{id}.sim")
}

impl World {
    pub(crate) fn new(providers: Vec<SimProvider>, seed: u64, bucket_ms: u64) -> Self {
        World {
            calls: RefCell::new(vec![Calls::default(); providers.len()]),
            rate_limited: RefCell::new(vec![Vec::new(); providers.len()]),
            bucket_ms,
            providers,
            rng: RefCell::new(fastrand::Rng::with_seed(seed)),
        }
    }

    pub(crate) fn calls(&self) -> Vec<Calls> {
        self.calls.borrow().clone()
    }

    /// Per provider and bucket: calls answered 429.
    pub(crate) fn rate_limited(&self) -> Vec<Vec<u64>> {
        self.rate_limited.borrow().clone()
    }

    /// Counts a 429 to provider `i` at `now`.
    fn note_429(&self, i: usize, now: UnixMillis) {
        self.calls.borrow_mut()[i].rate_limited += 1;
        let b = usize::try_from(now / self.bucket_ms).unwrap_or(usize::MAX);
        let mut series = self.rate_limited.borrow_mut();
        if series[i].len() <= b {
            series[i].resize(b + 1, 0);
        }
        series[i][b] += 1;
    }

    fn find(&self, url: &str) -> Option<usize> {
        self.providers.iter().position(|p| {
            url.strip_prefix(p.base.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        })
    }
}

impl SimPlatform {
    pub(crate) fn new(clock: Clock, world: Rc<World>) -> Self {
        SimPlatform { clock, world }
    }

    pub(crate) fn clock(&self) -> Clock {
        self.clock.clone()
    }

    pub(crate) fn world(&self) -> &World {
        &self.world
    }
}

impl Platform for SimPlatform {
    fn now(&self) -> UnixMillis {
        self.clock.now()
    }

    fn random(&self) -> f64 {
        self.world.rng.borrow_mut().f64()
    }

    fn sleep(&self, dur: Duration) -> impl Future<Output = ()> {
        self.clock.at(self.clock.now().saturating_add(millis(dur)))
    }

    fn fetch(
        &self,
        req: HttpRequest,
    ) -> impl Future<Output = Result<HttpResponse, TransportError>> {
        let now = self.clock.now();
        let limit = req.timeout.map(millis);
        let found = self.world.find(&req.url);
        let answer = found.map(|i| self.world.providers[i].answer(now));
        if let (Some(i), Some(a)) = (found, &answer) {
            let in_time = |after: &u64| limit.is_none_or(|l| *after <= l);
            {
                let mut calls = self.world.calls.borrow_mut();
                calls[i].total += 1;
                let failed =
                    !matches!(a, Answer::Reply { status: 200, after, .. } if in_time(after));
                calls[i].failed += u64::from(failed);
            }
            if matches!(a, Answer::Reply { status: 429, after, .. } if in_time(after)) {
                self.world.note_429(i, now);
            }
        }
        let clock = self.clock.clone();
        let world = self.world.clone();
        async move {
            let (Some(i), Some(answer)) = (found, answer) else {
                return Err(TransportError::new(
                    TransportErrorKind::Refused,
                    "no simulated provider at this URL",
                ));
            };
            let timed_out = |limit: Option<u64>| {
                TransportError::new(
                    TransportErrorKind::TimedOut,
                    format!("no answer within {} ms", limit.unwrap_or(SILENCE)),
                )
            };
            match answer {
                Answer::Refused => Err(TransportError::new(
                    TransportErrorKind::Refused,
                    "simulated refusal",
                )),
                Answer::Silent => {
                    clock.at(now + limit.unwrap_or(SILENCE)).await;
                    Err(timed_out(limit))
                }
                Answer::Reply { after, .. } if limit.is_some_and(|l| after > l) => {
                    clock.at(now + limit.unwrap_or(SILENCE)).await;
                    Err(timed_out(limit))
                }
                Answer::Reply {
                    after,
                    status,
                    retry_after,
                    mut headers,
                } => {
                    clock.at(now + after).await;
                    let p = &world.providers[i];
                    headers.insert("content-type", "application/json");
                    if let Some(ms) = retry_after {
                        headers.insert("retry-after-ms", ms.to_string());
                    }
                    let body = if status == 200 {
                        p.ok.clone()
                    } else {
                        p.error_body(status)
                    };
                    Ok(HttpResponse {
                        status,
                        headers,
                        body: Body::full(body),
                    })
                }
            }
        }
    }
}
