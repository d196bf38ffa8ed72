//! A named client's request admitted against its routes and limits, or
//! refused in the client's format: 403 for a route it may not use, 429
//! with `retry-after` over a limit, 400 for an unknown `x-priority`.
//! Every answer to a client with limits carries OpenAI's `x-ratelimit-*`
//! headers for them. A request's priority class is its client's, or lower
//! when its `x-priority` header says so (never higher); its route's load
//! shedding judges it by that class ([`crate::engine::shedding`]), and a
//! shed request gives its client's counts back.
//!
//! Only admission is judged here: an admitted request fails over, retries
//! and continues its stream as any other does.

use std::rc::Rc;

use super::http::{Format, Outbound};
use super::log::LogLine;
use super::proxy::Gateway;
use super::render::error_response;
use super::request::clip;
use super::tenants::{refusal_index, tokens_of, Tenant, Ticket, ROUTE_REFUSED, SHED_REFUSED};
use crate::engine::store::BreakerStore;
use crate::platform::{Headers, Platform, UnixMillis};
use crate::policy::pool::write_go_duration;
use crate::policy::shed::Priority;
use crate::policy::tenant::{admit, Refusal, Refused};

impl<P: Platform + 'static, S: BreakerStore + 'static> Gateway<P, S> {
    /// Admits a request of `client` (none: auth is off) with `headers` to
    /// `route` (the name its `model` looks up) that may use `tokens`: its
    /// priority class and the [`Ticket`] it holds until it ends, or the
    /// refusal to answer.
    pub(super) fn admit(
        &self,
        client: Option<&Rc<Tenant>>,
        route: Option<&str>,
        tokens: u64,
        headers: &Headers,
        format: Format,
        log: &mut LogLine<'_>,
    ) -> Result<(Priority, Option<Ticket>), Outbound> {
        let own = client.map_or(Priority::default(), |t| t.priority);
        let priority = match priority_of(own, headers) {
            Ok(p) => p,
            Err(message) => {
                log.error = Some("invalid_priority");
                return Err(error_response(
                    format,
                    400,
                    &message,
                    Some("invalid_priority"),
                ));
            }
        };
        log.priority = Some(priority.name());
        let Some(tenant) = client else {
            return Ok((priority, None));
        };
        let now = self.client.platform().now();
        let route = route.or(self.client.default_route()).unwrap_or_default();
        if !tenant.may_use(route) {
            tenant.count_refusal(ROUTE_REFUSED);
            log.refused = Some("route");
            log.error = Some("route_not_allowed");
            let allowed: Vec<&str> = tenant
                .routes()
                .into_iter()
                .flatten()
                .map(String::as_str)
                .collect();
            return Err(error_response(
                format,
                403,
                &format!(
                    "this key may not use route \"{}\"; it may use: {}",
                    clip(route, 200),
                    allowed.join(", ")
                ),
                Some("route_not_allowed"),
            ));
        }
        let refused = admit(&tenant.limits, &tenant.judged(now), now, tokens);
        match refused {
            Ok(()) => Ok((priority, Some(Ticket::take(tenant, now, tokens)))),
            Err(r) => {
                // A view older than its time to live is asked for again.
                tenant.share(now);
                tenant.count_refusal(refusal_index(r.reason));
                log.refused = Some(r.reason.name());
                log.error = Some("client_rate_limited");
                let mut out = refusal(format, tenant, &r);
                rate_headers(tenant, now, &mut out.headers);
                Err(out)
            }
        }
    }
}

impl<P: Platform + 'static, S: BreakerStore + 'static> Gateway<P, S> {
    /// Ends an answered request of `client`: a `ticket` its stream did not
    /// take is settled with the usage and cost of `log`'s attempts (a
    /// request its route shed gives its counts back), and the answer gets
    /// the client's rate headers.
    pub(super) fn settle(
        &self,
        client: Option<&Rc<Tenant>>,
        ticket: Option<Ticket>,
        log: &mut LogLine<'_>,
        out: &mut Outbound,
    ) {
        let now = self.client.platform().now();
        if log.error == Some(SHED) {
            // Shed before any provider: it used nothing of its limits.
            log.refused = Some("shed");
            if let Some(t) = client {
                t.count_refusal(SHED_REFUSED);
            }
            if let Some(ticket) = ticket {
                ticket.refund(now);
            }
        } else if let Some(ticket) = ticket {
            let tokens = log
                .trail
                .iter()
                .fold(0, |n: u64, a| n.saturating_add(tokens_of(a.usage.as_ref())));
            ticket.settle(now, tokens, log.cost.and_then(|b| b.total));
        }
        if let Some(tenant) = client {
            rate_headers(tenant, now, &mut out.headers);
        }
    }
}

/// The code of a request its route shed ([`crate::Error::Shed`]).
const SHED: &str = "load_shed";

/// The header that lowers a request's class.
pub(crate) const PRIORITY_HEADER: &str = "x-priority";

/// The class of a request of a client of class `own`: the header's when
/// it names a lower one, else `own`; an unknown name is the error to
/// answer with.
fn priority_of(own: Priority, headers: &Headers) -> Result<Priority, String> {
    let Some(asked) = headers.get(PRIORITY_HEADER) else {
        return Ok(own);
    };
    match Priority::parse(asked.trim()) {
        Some(p) => Ok(p.min(own)),
        None => Err(format!(
            "{PRIORITY_HEADER} must be critical, standard or sheddable (a class no higher than \
             the client's own, which is {})",
            own.name()
        )),
    }
}

/// The 429 of a request over `tenant`'s limit.
fn refusal(format: Format, tenant: &Tenant, r: &Refused) -> Outbound {
    let l = &tenant.limits;
    let what = match r.reason {
        Refusal::Requests => format!(
            "its {} requests per minute",
            l.requests_per_minute.unwrap_or_default()
        ),
        Refusal::Tokens => format!(
            "its {} tokens per minute (this request may use up to its estimate)",
            l.tokens_per_minute.unwrap_or_default()
        ),
        Refusal::InFlight => format!("its {} requests in flight", l.in_flight.unwrap_or_default()),
        Refusal::Spend => format!("its daily budget of ${}", l.daily_spend.unwrap_or_default()),
    };
    let ms = r.retry_after.as_millis() as u64;
    let message = format!(
        "client \"{}\" is over {what}; retry after {}",
        tenant.name,
        write_go_duration(ms)
    );
    let mut out = error_response(format, 429, &message, Some("rate_limit_exceeded"));
    // Retry-After takes whole seconds: rounded up, at least one. OpenAI's
    // SDKs read the exact wait from `retry-after-ms` first.
    out.headers
        .insert("retry-after", ms.div_ceil(1000).max(1).to_string());
    out.headers.insert("retry-after-ms", ms.to_string());
    out
}

/// OpenAI's `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` for
/// `tenant`'s limits per minute, as of `now` and fleet-wide as far as
/// known: the reset is the time until the limit is whole again, in Go's
/// duration notation as OpenAI writes it.
pub(super) fn rate_headers(tenant: &Tenant, now: UnixMillis, headers: &mut Headers) {
    if tenant.limits.requests_per_minute.is_none() && tenant.limits.tokens_per_minute.is_none() {
        return;
    }
    let used = tenant.judged(now);
    let limits = [
        (
            [
                "x-ratelimit-limit-requests",
                "x-ratelimit-remaining-requests",
                "x-ratelimit-reset-requests",
            ],
            tenant.limits.requests_per_minute,
            &used.requests,
        ),
        (
            [
                "x-ratelimit-limit-tokens",
                "x-ratelimit-remaining-tokens",
                "x-ratelimit-reset-tokens",
            ],
            tenant.limits.tokens_per_minute,
            &used.tokens,
        ),
    ];
    for ([limit_name, remaining_name, reset_name], limit, count) in limits {
        let Some(limit) = limit else { continue };
        let remaining = limit.saturating_sub(count.estimate(now));
        // Nothing else writes these names: appended, not replaced.
        headers.append(limit_name, limit.to_string());
        headers.append(remaining_name, remaining.to_string());
        headers.append(reset_name, write_go_duration(count.until_empty(now)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_lowers_a_class_and_never_raises_it() {
        let h = |v: &str| [(PRIORITY_HEADER, v)].into_iter().collect::<Headers>();
        let none = Headers::new();
        assert_eq!(
            priority_of(Priority::Critical, &none),
            Ok(Priority::Critical)
        );
        assert_eq!(
            priority_of(Priority::Critical, &h("sheddable")),
            Ok(Priority::Sheddable)
        );
        assert_eq!(
            priority_of(Priority::Sheddable, &h("critical")),
            Ok(Priority::Sheddable)
        );
        assert_eq!(
            priority_of(Priority::Standard, &h(" standard ")),
            Ok(Priority::Standard)
        );
        let err = priority_of(Priority::Standard, &h("urgent")).unwrap_err();
        assert!(err.contains("which is standard"), "{err}");
    }
}
