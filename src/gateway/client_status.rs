//! The named clients on `/health`, the status page and `/metrics`: each
//! by its name (never its key), with its limits, what it used of them and
//! what was refused, as this isolate counted since it started.

use std::fmt::Write as _;
use std::sync::atomic::AtomicU64;

use html_escape::encode_text as esc;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::Serialize;

use super::labels::Label;
use super::metrics::follow;
use super::tenants::{Tenant, Tenants, REFUSED_NAMES};
use crate::engine::shedding::RouteShed;
use crate::platform::UnixMillis;
use crate::policy::price::Cost;

/// One client's row.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ClientStatus {
    name: String,
    /// Its priority class.
    priority: &'static str,
    /// Its limits, those set.
    limits: Limits,
    /// Requests admitted since the isolate started.
    requests: u64,
    /// Requests refused, by reason.
    refused: Refused,
    /// Tokens its providers reported.
    tokens: u64,
    spend_usd: Cost,
    in_flight: u64,
    /// Requests and tokens over the last minute, and today's spend.
    requests_last_minute: u64,
    tokens_last_minute: u64,
    spent_today_usd: Cost,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Limits {
    #[serde(skip_serializing_if = "Option::is_none")]
    requests_per_minute: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tokens_per_minute: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_in_flight: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    daily_budget_usd: Option<Cost>,
}

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct Refused {
    requests: u64,
    tokens: u64,
    in_flight: u64,
    spend: u64,
    route: u64,
    shed: u64,
}

impl Refused {
    /// `t`'s refusals: [`Totals::refused`](super::tenants::Totals) is in
    /// [`REFUSED_NAMES`]'s order.
    fn of(t: &Tenant) -> Refused {
        let n = |i: usize| t.totals.refused[i].get();
        Refused {
            in_flight: n(0),
            spend: n(1),
            requests: n(2),
            tokens: n(3),
            route: n(4),
            shed: n(5),
        }
    }
}

/// Every client's row, as of `now`.
pub(super) fn rows(tenants: &Tenants, now: UnixMillis) -> Vec<ClientStatus> {
    tenants
        .0
        .iter()
        .map(|t| {
            let used = t.used.borrow();
            let l = &t.limits;
            ClientStatus {
                name: t.name.to_string(),
                priority: t.priority.name(),
                limits: Limits {
                    requests_per_minute: l.requests_per_minute,
                    tokens_per_minute: l.tokens_per_minute,
                    max_in_flight: l.in_flight,
                    daily_budget_usd: l.daily_spend,
                },
                requests: t.totals.admitted.get(),
                refused: Refused::of(t),
                tokens: t.totals.tokens.get(),
                spend_usd: t.totals.spend.get(),
                in_flight: used.in_flight,
                requests_last_minute: used.requests.estimate(now),
                tokens_last_minute: used.tokens.estimate(now),
                spent_today_usd: used.spend.today(now),
            }
        })
        .collect()
}

/// The clients' section of the status page.
pub(super) fn section(out: &mut String, rows: &[ClientStatus]) {
    out.push_str(
        "<section id=\"clients\"><h2>Clients</h2><table><thead><tr>\
         <th scope=\"col\">Client</th><th scope=\"col\">Class</th><th scope=\"col\">Requests (last minute / limit)</th>\
         <th scope=\"col\">Tokens (last minute / limit)</th><th scope=\"col\">In flight</th>\
         <th scope=\"col\">Spent today</th><th scope=\"col\">Refused</th></tr></thead><tbody>",
    );
    let of = |n: u64, limit: Option<u64>| match limit {
        Some(l) => format!("{n} / {l}"),
        None => n.to_string(),
    };
    for c in rows {
        let r = &c.refused;
        let budget = c
            .limits
            .daily_budget_usd
            .map(|b| format!(" / ${b}"))
            .unwrap_or_default();
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>${}{budget}</td>\
             <td>{} rate, {} tokens, {} in flight, {} spend, {} route, {} shed</td></tr>",
            esc(&c.name),
            c.priority,
            of(c.requests_last_minute, c.limits.requests_per_minute),
            of(c.tokens_last_minute, c.limits.tokens_per_minute),
            of(c.in_flight, c.limits.max_in_flight),
            c.spent_today_usd,
            r.requests,
            r.tokens,
            r.in_flight,
            r.spend,
            r.route,
            r.shed,
        );
    }
    out.push_str("</tbody></table></section>");
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClientLabels {
    client: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusalLabels {
    client: Label,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ShedLabels {
    route: Label,
    priority: &'static str,
}

/// The clients' and the routes' shedding series of `/metrics`: their
/// names come from the configuration, so they are few.
#[derive(Default)]
pub(super) struct ClientFamilies {
    shed_depth: Family<RouteLabels, Gauge<f64, AtomicU64>>,
    shed: Family<ShedLabels, Counter>,
    requests: Family<ClientLabels, Counter>,
    rejections: Family<RefusalLabels, Counter>,
    tokens: Family<ClientLabels, Counter>,
    spend: Family<ClientLabels, Counter<f64, AtomicU64>>,
    in_flight: Family<ClientLabels, Gauge>,
}

impl ClientFamilies {
    pub(super) fn register(&self, r: &mut Registry) {
        r.register(
            "client_requests",
            "Requests a named client's limits admitted",
            self.requests.clone(),
        );
        r.register(
            "client_rejections",
            "Requests of a named client refused, by reason: requests, tokens, in_flight, spend (its limits), route (one it may not use) or shed (its class, while its route sheds load)",
            self.rejections.clone(),
        );
        r.register(
            "client_tokens",
            "Tokens the providers reported for a named client's requests",
            self.tokens.clone(),
        );
        r.register(
            "client_spend_usd",
            "US dollars a named client's requests cost, as the configured prices price them",
            self.spend.clone(),
        );
        r.register(
            "route_shed_depth",
            "How deep a route sheds load by priority: 0 nothing, 1 every sheddable request, 2 every sheddable and standard one",
            self.shed_depth.clone(),
        );
        r.register(
            "route_shed",
            "Requests a route shed while its providers could not carry its load, by priority class",
            self.shed.clone(),
        );
        r.register(
            "client_in_flight",
            "A named client's requests under way in this isolate",
            self.in_flight.clone(),
        );
    }

    /// Brings the routes' shedding series up to `rows`.
    pub(super) fn follow_shedding(&self, rows: &[RouteShed]) {
        for r in rows {
            self.shed_depth
                .get_or_create(&RouteLabels {
                    route: Label::new(&r.route),
                })
                .set(r.depth);
            for (priority, total) in [
                ("standard", r.shed.standard),
                ("sheddable", r.shed.sheddable),
            ] {
                let labels = ShedLabels {
                    route: Label::new(&r.route),
                    priority,
                };
                follow(&self.shed.get_or_create(&labels), total);
            }
        }
    }

    /// Brings the series up to `tenants`' totals.
    pub(super) fn follow(&self, tenants: &Tenants) {
        for t in &tenants.0 {
            let client = || ClientLabels {
                client: Label::new(&t.name),
            };
            follow(
                &self.requests.get_or_create(&client()),
                t.totals.admitted.get(),
            );
            follow(&self.tokens.get_or_create(&client()), t.totals.tokens.get());
            for (i, reason) in REFUSED_NAMES.iter().copied().enumerate() {
                let labels = RefusalLabels {
                    client: Label::new(&t.name),
                    reason,
                };
                follow(
                    &self.rejections.get_or_create(&labels),
                    t.totals.refused[i].get(),
                );
            }
            let spend = self.spend.get_or_create(&client());
            let behind = t.totals.spend.get().usd() - spend.get();
            if behind > 0.0 {
                spend.inc_by(behind);
            }
            let in_flight = t.used.borrow().in_flight;
            self.in_flight
                .get_or_create(&client())
                .set(i64::try_from(in_flight).unwrap_or(i64::MAX));
        }
    }
}
