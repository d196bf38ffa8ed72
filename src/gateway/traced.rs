//! The trace a request that calls providers joins: its caller's
//! (`traceparent`, `tracestate`) continued, or one started; the gateway's
//! own span under it is the parent of every attempt's. The trace id is in
//! the log line and the answer's `x-trace-id`.

use super::log::LogLine;
use super::proxy::Gateway;
use crate::engine::store::BreakerStore;
use crate::platform::{Headers, Platform};
use crate::trace::{new_span_id, TraceParent};

impl<P: Platform + 'static, S: BreakerStore + 'static> Gateway<P, S> {
    /// The trace of a request with `headers`, named in `log`.
    pub(super) fn trace_of(&self, headers: &Headers, log: &mut LogLine<'_>) -> TraceParent {
        let random = || self.client.platform().random();
        let caller = TraceParent::from_headers(headers);
        let trace = caller.unwrap_or_else(|| TraceParent::start(&random));
        log.trace_id = Some(trace.trace_id.to_string());
        trace.under(new_span_id(&random))
    }
}
