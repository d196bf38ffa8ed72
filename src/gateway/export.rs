//! [`Gateway::export_traces`]: the queued spans sent to the collector, one
//! batch at a time, as OTLP/HTTP protobuf, by the host in the background
//! (the Worker's `waitUntil`): a slow or dead collector delays no answer,
//! and its failures are counted, never retried into a growing queue.

use std::future::Future;
use std::rc::Rc;

use super::proxy::Gateway;
use crate::engine::store::BreakerStore;
use crate::engine::timeout::timeout;
use crate::platform::{HttpRequest, Platform};
use crate::trace::otlp;

impl<P: Platform + 'static, S: BreakerStore + 'static> Gateway<P, S> {
    /// The next export of the spans waiting, to run in the background;
    /// `None` when none wait, or one is already being sent (its end sends
    /// nothing more: the next request's export takes the rest).
    pub fn export_traces(&self) -> Option<impl Future<Output = ()> + 'static> {
        let exporter = Rc::clone(self.exporter.as_ref()?);
        let batch = exporter.next_batch()?;
        let client = Rc::clone(&self.client);
        Some(async move {
            let policy = exporter.policy();
            let body = otlp::encode(&policy.service_name, &batch.spans);
            let mut http = HttpRequest::post_json(policy.endpoint.clone(), body);
            http.headers.insert("content-type", otlp::CONTENT_TYPE);
            for (name, value) in &policy.headers {
                http.headers.insert(name, value.expose());
            }
            http.timeout = Some(policy.timeout);
            let platform = client.platform();
            let sent = async {
                let resp = platform.fetch(http).await.ok()?;
                let ok = (200..300).contains(&resp.status);
                // Read (a little of) the answer, so the exchange ends.
                let _ = resp.body.read_to_end(64 << 10).await;
                Some(ok)
            };
            let ok = matches!(
                timeout(platform.sleep(policy.timeout), sent).await,
                Ok(Some(true))
            );
            exporter.sent(batch, ok);
        })
    }
}
