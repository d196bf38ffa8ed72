//! `GET /health`, `GET /metrics` and the status page's `GET /status` and
//! `GET /status/data`: the providers' health, with what the fleet's
//! breaker objects remember when there are any.

use serde::Serialize;

use super::client_status;
use super::http::Outbound;
use super::metrics;
use super::proxy::Gateway;
use super::render::json_response;
use super::status::{self, html_response};
use crate::engine::shedding::RouteShed;
use crate::engine::store::BreakerStore;
use crate::platform::{Headers, Platform, UnixMillis};
use crate::policy::stats::Health;

impl<P: Platform + 'static, S: BreakerStore + 'static> Gateway<P, S> {
    /// `GET /status` (`html`) or `GET /status/data`: the same data.
    pub(super) async fn status(&self, html: bool) -> Outbound {
        let fleet = self.fleet_journals().await;
        let health = self.client.health();
        let changes = self.changes.borrow();
        let now = self.client.platform().now();
        let mut body = status::StatusBody::new(now, &health, &changes, &fleet);
        body.cache = self.cache_status();
        body.clients = self.client_rows();
        if html {
            html_response(200, status::page(&body))
        } else {
            json_response(200, &body)
        }
    }

    /// What each breaker's object has journaled, by breaker key
    /// (`provider/model`), for the keys whose objects answer (none without
    /// fleet-wide breakers). Asked all at once: the slowest object bounds
    /// the wait.
    async fn fleet_journals(&self) -> Vec<(String, crate::fleet::Journal)> {
        let Some(journals) = &self.journals else {
            return Vec::new();
        };
        let keys: Vec<String> = self
            .client
            .provider_ids()
            .flat_map(|p| self.client.provider_keys(p))
            .map(|(key, _, _)| key.to_owned())
            .collect();
        let asked = keys.iter().map(|k| journals.journal_of(k));
        let answers = futures_util::future::join_all(asked).await;
        keys.into_iter()
            .zip(answers)
            .filter_map(|(k, j)| Some((k, j?)))
            .collect()
    }

    /// `GET /metrics`.
    pub(super) async fn metrics_page(&self) -> Outbound {
        let fleet = self.fleet_journals().await;
        if !self.auth.is_open() {
            self.metrics.clients.follow(&self.tenants);
        }
        self.metrics
            .clients
            .follow_shedding(&self.client.shedding());
        let mut headers = Headers::new();
        headers.insert("content-type", metrics::CONTENT_TYPE);
        Outbound {
            status: 200,
            headers,
            body: self
                .metrics
                .render(
                    &self.client.health(),
                    &fleet,
                    &self.client.cost_totals(),
                    self.exporter.as_ref().map(|e| e.counts()),
                )
                .into_bytes(),
            stream: None,
            log: String::new(),
        }
    }

    /// The named clients' rows (none when auth is off: no request has one).
    fn client_rows(&self) -> Vec<client_status::ClientStatus> {
        if self.auth.is_open() {
            return Vec::new();
        }
        client_status::rows(&self.tenants, self.client.platform().now())
    }

    /// The routes that shed load now or did since the isolate started.
    pub(super) fn shed_rows(&self) -> Vec<RouteShed> {
        let mut rows = self.client.shedding();
        rows.retain(|r| r.depth > 0.0 || r.shed.standard + r.shed.sheddable > 0);
        rows
    }

    /// `GET /health`.
    pub(super) fn health(&self) -> Outbound {
        let providers = self.client.health();
        let degraded = providers.iter().any(Health::is_degraded);
        let body = HealthBody {
            providers,
            status: if degraded { "degraded" } else { "ok" },
            time: self.client.platform().now(),
            costs: self.client.cost_totals(),
            spend: self.client.spend(),
            clients: self.client_rows(),
            shedding: self.shed_rows(),
        };
        json_response(200, &body)
    }
}

/// `GET /health`'s answer.
#[derive(Serialize)]
struct HealthBody {
    /// Each client: its limits, what it used and what was refused.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    clients: Vec<client_status::ClientStatus>,
    /// What each provider's model cost, from the usage reported.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    costs: Vec<crate::engine::cost::ModelCost>,
    providers: Vec<Health>,
    /// Each route that sheds load by priority, or did: how deep, and what
    /// it shed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    shedding: Vec<RouteShed>,
    /// Each route with a daily budget: what it spent today.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    spend: Vec<crate::engine::cost::SpendHealth>,
    status: &'static str,
    time: UnixMillis,
}
