//! [`Gateway::handle`]: one request routed to what answers it, past the
//! checks every route shares (header sizes, the gateway key), then logged,
//! counted and given its request id.

use super::http::{Format, Inbound, Outbound};
use super::limits;
use super::log::{log_line, LogLine};
use super::models;
use super::point::PointSource;
use super::proxy::Gateway;
use super::render::{error_response, json_response};
use super::request::{clip, request_id};
use super::route::{index, route, Route};
use super::status::{self, html_response};
use crate::engine::store::BreakerStore;
use crate::platform::Platform;

impl<P: Platform + 'static, S: BreakerStore + 'static> Gateway<P, S> {
    /// Answers one request.
    pub async fn handle(&self, req: Inbound) -> Outbound {
        let Inbound {
            method,
            path,
            headers,
            body,
        } = req;
        let start = self.client.platform().now();
        let request_id = request_id(&headers, self.client.platform());
        let client = self
            .auth
            .client_of(&headers)
            .and_then(|i| self.tenants.get(i))
            .cloned();
        let mut log = LogLine {
            client: client.as_ref().map(|t| &*t.name),
            request_id: &request_id,
            method: Some(&method),
            path: &path,
            auth_disabled: self.auth.is_open(),
            prices: Some(&self.client.cost_policy().prices).filter(|p| !p.is_empty()),
            ..LogLine::default()
        };
        let r = route(&method, &path);
        let format = match r {
            Route::Chat(f) => f,
            _ => Format::guess(&path, &headers),
        };
        log.format = Some(format);
        let oversized = limits::oversized_header(&headers);
        let mut out = match r {
            Route::NotFound => error_response(
                format,
                404,
                &format!("no such endpoint: {}", clip(&path, 200)),
                Some("not_found"),
            ),
            Route::WrongMethod(allow) => {
                let mut o = error_response(
                    format,
                    405,
                    &format!("method {} not allowed here; use {allow}", clip(&method, 16)),
                    Some("method_not_allowed"),
                );
                o.headers.insert("allow", allow);
                o
            }
            Route::Index => json_response(200, &index()),
            _ if oversized.is_some() => {
                log.error = Some("header_too_large");
                let name = oversized.unwrap_or_default();
                error_response(
                    format,
                    400,
                    &limits::header_message(name),
                    Some("invalid_request"),
                )
            }
            Route::Status if self.signed_in(&headers) => self.status(true).await,
            Route::Status => html_response(401, status::login_page(None)),
            Route::StatusData if self.signed_in(&headers) => self.status(false).await,
            Route::StatusLogin => self.login(&headers, body, &mut log).await,
            _ if client.is_none() && !self.auth.is_open() => {
                log.error = Some("unauthorized");
                error_response(
                    format,
                    401,
                    "invalid or missing API key: send it as Authorization: Bearer <key> or x-api-key",
                    Some("invalid_api_key"),
                )
            }
            Route::Health => self.health(),
            Route::Metrics => self.metrics_page().await,
            // Reached with a header key, which the guard above also takes.
            Route::StatusData => self.status(false).await,
            Route::Models => json_response(200, &models::list(self.client.routes(), format)),
            Route::Model => self.model(format, &path),
            Route::Call(e) => {
                self.endpoint(e, format, &headers, body, client.as_ref(), &mut log)
                    .await
            }
            Route::Chat(format) => {
                self.chat(format, &headers, body, client.as_ref(), &mut log)
                    .await
            }
        };
        if let Some(id) = &log.trace_id {
            out.headers.insert("x-trace-id", id.as_str());
        }
        let now = self.client.platform().now();
        out.headers.insert("x-request-id", request_id.as_str());
        log.status = out.status;
        log.latency_ms = now.saturating_sub(start);
        self.record_spans(&log, &method, now);
        self.metrics.record(&log);
        let states = self
            .client
            .provider_ids()
            .map(|k| (k, self.client.provider_state(k)));
        self.changes.borrow_mut().observe(now, &log, states);
        out.log = log_line(&mut log);
        *self.point.borrow_mut() = Some(PointSource::of(&mut log));
        out
    }
}
