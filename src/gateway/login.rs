//! The status page's sign-in: a gateway key in the request, or a session
//! `POST /status/login` starts from the page's own form.

use super::http::Outbound;
use super::log::LogLine;
use super::proxy::Gateway;
use super::session;
use super::status::{self, html_response};
use crate::engine::store::BreakerStore;
use crate::platform::{Body, Headers, Platform};

impl<P: Platform + 'static, S: BreakerStore + 'static> Gateway<P, S> {
    /// Whether a status route's request carries a key, or a live sign-in.
    pub(super) fn signed_in(&self, headers: &Headers) -> bool {
        let now = self.client.platform().now();
        session::check(&self.auth, headers, status::COOKIE, now)
    }

    /// `POST /status/login`: a form with the gateway key, from the page's
    /// own origin; an accepted key starts a signed session (the cookie
    /// holds no key). Refused keys are throttled (`session.rs`).
    pub(super) async fn login(
        &self,
        headers: &Headers,
        body: Body,
        log: &mut LogLine<'_>,
    ) -> Outbound {
        let now = self.client.platform().now();
        if self.auth.is_open() {
            let problem = "auth is switched off: the status page needs no sign-in";
            return html_response(401, status::login_page(Some(problem)));
        }
        if !session::same_origin(headers) {
            log.error = Some("cross_origin");
            let problem = "sign in from the status page itself";
            return html_response(403, status::login_page(Some(problem)));
        }
        if let Some(until) = self.logins.borrow().blocked(now) {
            log.error = Some("unauthorized");
            let problem = "too many refused keys: try again in a minute";
            let mut out = html_response(429, status::login_page(Some(problem)));
            let wait = until.saturating_sub(now).div_ceil(1000);
            out.headers.insert("retry-after", wait.to_string());
            return out;
        }
        let Some(form) = self.read_in_time(body, 4096, false).await else {
            log.error = Some("body_timeout");
            let problem = "the form did not arrive in time";
            return html_response(408, status::login_page(Some(problem)));
        };
        let form = form.unwrap_or_default();
        let key = form_urlencoded::parse(&form)
            .find(|(k, _)| k == "key")
            .map(|(_, v)| v.trim().to_owned())
            .unwrap_or_default();
        let Some(secret) = self.auth.find(&key) else {
            self.logins.borrow_mut().fail(now);
            log.error = Some("unauthorized");
            return html_response(401, status::login_page(Some("that key is not accepted")));
        };
        let cookie = cookie::Cookie::build((status::COOKIE, session::issue(secret, now)))
            .path("/status")
            .http_only(true)
            .secure(true)
            .same_site(cookie::SameSite::Strict)
            .max_age(cookie::time::Duration::milliseconds(
                i64::try_from(session::LIFETIME_MS).unwrap_or(i64::MAX),
            ));
        let mut out = html_response(303, String::new());
        out.headers.insert("location", "/status");
        out.headers
            .insert("set-cookie", cookie.build().encoded().to_string());
        out
    }
}
