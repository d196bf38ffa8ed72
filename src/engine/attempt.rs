//! One HTTP exchange of an attempt at a whole answer, shared by chat and
//! the other endpoints: the provider's token made fresh, the request
//! encoded and signed, sent under the attempt's time limit (carried by the
//! request: the host's own timer aborts it) and its body read whole. What
//! differs by the answer (encoding, decoding) is the caller's.

use std::time::Duration;

use crate::engine::authorize::authorize;
use crate::engine::core::Core;
use crate::engine::store::BreakerStore;
use crate::error::{ErrorKind, ProviderError};
use crate::platform::{millis, BufferedResponse, HttpRequest, Platform, TransportErrorKind};
use crate::provider::Provider;
use crate::trace::AttemptTrace;

/// An exchange's end: the response read whole, or the error; whether the
/// request reached the provider; and the hints its encoder left out.
pub(crate) type Exchanged = (Result<BufferedResponse, ProviderError>, bool, Vec<String>);

impl<P: Platform, S: BreakerStore> Core<P, S> {
    /// Sends the request `encode` makes to `provider` (its place in the
    /// trace, `at`, stamped on it) and reads its answer, all within `limit`, noting what
    /// its headers say of the pool at breaker key `key`. A timeout before the status line is a silent
    /// provider (`timeout`), after it a stalled body (`stalled`).
    pub(super) async fn exchange(
        &self,
        provider: &dyn Provider,
        key: &str,
        limit: Duration,
        at: Option<AttemptTrace<'_>>,
        encode: impl FnOnce() -> Result<HttpRequest, ProviderError>,
    ) -> Exchanged {
        let started = self.platform.now();
        if let Err(e) = authorize(&self.platform, provider, limit).await {
            return (Err(e), false, Vec::new());
        }
        // A token fetched first spends part of the attempt's time.
        let spent = Duration::from_millis(self.platform.now().saturating_sub(started));
        let limit = limit.saturating_sub(spent);
        let mut http = match encode() {
            Ok(h) => h,
            Err(e) => return (Err(e), false, Vec::new()),
        };
        self.stamp_trace(&mut http, at);
        if let Err(e) = provider.sign(&mut http, self.platform.now()) {
            return (Err(e), false, Vec::new());
        }
        let omitted = std::mem::take(&mut http.omitted);
        http.timeout = Some(limit);
        let sending = self.sending(key);
        let fetched = self.platform.fetch(http).await;
        drop(sending);
        let resp = match fetched {
            Ok(resp) => resp,
            Err(t) if t.kind == TransportErrorKind::TimedOut => {
                return (Err(ProviderError::timeout(limit)), true, omitted)
            }
            Err(t) => {
                let reached = t.reached();
                return (Err(t.into()), reached, omitted);
            }
        };
        self.note_pool(provider, key, &resp.headers);
        let body = match resp.body.read_to_end(self.policy.max_response_bytes).await {
            Ok(body) => Ok(BufferedResponse {
                status: resp.status,
                headers: resp.headers,
                body,
            }),
            Err(t) if t.kind == TransportErrorKind::TimedOut => Err(ProviderError::new(
                ErrorKind::Stalled,
                format!("response body incomplete after {} ms", millis(limit)),
            )),
            Err(t) => Err(t.into()),
        };
        (body, true, omitted)
    }
}
