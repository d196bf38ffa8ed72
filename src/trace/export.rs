//! Export of finished spans: which traces are kept (parent-based: a
//! caller's decision is followed, a trace that starts here is kept at the
//! configured ratio), a queue bounded in spans, and batches handed to the
//! host to send in the background ([`Exporter::next_batch`]), one at a
//! time, so a slow or dead collector costs no request anything and holds
//! no more than the queue.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::time::Duration;

use opentelemetry::trace::{TraceFlags, TraceId};

use super::span::Span;
use crate::secret::Secret;

/// Where and how spans are exported.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportPolicy {
    /// The collector's OTLP/HTTP traces URL (`http://host:4318/v1/traces`).
    pub endpoint: String,
    /// Headers sent with each export (an `authorization`, say); their
    /// values are secrets, never logged.
    pub headers: Vec<(String, Secret)>,
    /// The share of the traces that start here that are kept, in [0, 1].
    pub sample_ratio: f64,
    /// The `service.name` of the exported resource.
    pub service_name: String,
    /// How long one export may take.
    pub timeout: Duration,
    /// The most spans waiting to be sent; more are dropped and counted.
    pub max_queue: usize,
    /// The most spans in one export.
    pub max_batch: usize,
    /// Whether spans record the messages asked (`gen_ai.input.messages`)
    /// and answered (`gen_ai.output.messages`); off by default.
    pub capture_content: bool,
}

impl Default for ExportPolicy {
    fn default() -> Self {
        ExportPolicy {
            endpoint: String::new(),
            headers: Vec::new(),
            sample_ratio: 1.0,
            service_name: "resilient-llm".to_string(),
            timeout: Duration::from_secs(5),
            max_queue: 2048,
            max_batch: 512,
            capture_content: false,
        }
    }
}

/// What the exporter did, since the isolate started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExportCounts {
    /// Spans a collector accepted.
    pub exported: u64,
    /// Spans dropped: the queue was full, or their export failed.
    pub dropped: u64,
    /// Exports that failed (no answer in time, or not a 2xx).
    pub failed: u64,
}

/// The spans waiting to be exported, and the counts.
#[derive(Debug)]
pub struct Exporter {
    policy: ExportPolicy,
    queue: RefCell<VecDeque<Span>>,
    sending: Cell<bool>,
    counts: Cell<ExportCounts>,
}

/// One export: its spans, taken from the queue.
#[derive(Debug)]
pub struct Batch {
    /// The spans.
    pub spans: Vec<Span>,
}

impl Exporter {
    /// An exporter under `policy`, its queue empty.
    pub fn new(policy: ExportPolicy) -> Self {
        Exporter {
            policy,
            queue: RefCell::default(),
            sending: Cell::new(false),
            counts: Cell::default(),
        }
    }

    /// Its policy.
    pub fn policy(&self) -> &ExportPolicy {
        &self.policy
    }

    /// Whether a trace is kept: the caller's sampled flag when it sent a
    /// context (`caller`), else the ratio, decided by the trace id (every
    /// isolate decides the same for one trace, as OpenTelemetry's
    /// `TraceIdRatioBased` sampler does).
    pub fn sampled(&self, caller: Option<TraceFlags>, trace_id: TraceId) -> bool {
        match caller {
            Some(flags) => flags.is_sampled(),
            None => ratio_keeps(self.policy.sample_ratio, trace_id),
        }
    }

    /// Queues a request's spans; those that do not fit are dropped.
    pub fn record(&self, spans: Vec<Span>) {
        let mut queue = self.queue.borrow_mut();
        let room = self.policy.max_queue.saturating_sub(queue.len());
        let dropped = spans.len().saturating_sub(room);
        queue.extend(spans.into_iter().take(room));
        drop(queue);
        if dropped > 0 {
            self.count(|c| c.dropped += dropped as u64);
        }
    }

    /// The next export, when spans wait and none is being sent. Hand it
    /// back with [`Exporter::sent`].
    pub fn next_batch(&self) -> Option<Batch> {
        if self.sending.get() {
            return None;
        }
        let mut queue = self.queue.borrow_mut();
        if queue.is_empty() {
            return None;
        }
        let n = queue.len().min(self.policy.max_batch.max(1));
        self.sending.set(true);
        Some(Batch {
            spans: queue.drain(..n).collect(),
        })
    }

    /// How an export of `batch` ended: `ok` when the collector took it.
    /// Its spans are not sent again either way (a collector that failed
    /// may have kept them; a dead one must not fill the queue).
    pub fn sent(&self, batch: Batch, ok: bool) {
        self.sending.set(false);
        let n = batch.spans.len() as u64;
        self.count(|c| {
            if ok {
                c.exported += n;
            } else {
                c.failed += 1;
                c.dropped += n;
            }
        });
    }

    /// Spans waiting.
    pub fn queued(&self) -> usize {
        self.queue.borrow().len()
    }

    /// The counts so far.
    pub fn counts(&self) -> ExportCounts {
        self.counts.get()
    }

    fn count(&self, f: impl FnOnce(&mut ExportCounts)) {
        let mut c = self.counts.get();
        f(&mut c);
        self.counts.set(c);
    }
}

/// Whether ratio `ratio` keeps trace `id`: its last 63 bits below the
/// ratio's share of them.
fn ratio_keeps(ratio: f64, id: TraceId) -> bool {
    if ratio >= 1.0 {
        return true;
    }
    if ratio <= 0.0 {
        return false;
    }
    let bytes = id.to_bytes();
    let mut low = [0u8; 8];
    low.copy_from_slice(&bytes[8..]);
    let x = u64::from_be_bytes(low) >> 1;
    (x as f64) < ratio * (1u64 << 63) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::span::Span;
    use opentelemetry::trace::{SpanId, SpanKind, Status};

    fn span(n: u64) -> Span {
        Span {
            trace_id: TraceId::from(1u128),
            span_id: SpanId::from(n),
            parent_id: SpanId::INVALID,
            flags: TraceFlags::SAMPLED,
            trace_state: String::new(),
            name: "s".into(),
            kind: SpanKind::Server,
            start: 0,
            end: 1,
            attributes: Vec::new(),
            events: Vec::new(),
            status: Status::Unset,
        }
    }

    fn exporter(max_queue: usize, max_batch: usize) -> Exporter {
        Exporter::new(ExportPolicy {
            max_queue,
            max_batch,
            ..ExportPolicy::default()
        })
    }

    #[test]
    fn the_queue_is_bounded_and_counts_what_it_drops() {
        let e = exporter(3, 10);
        e.record(vec![span(1), span(2)]);
        e.record(vec![span(3), span(4), span(5)]);
        assert_eq!(e.queued(), 3);
        assert_eq!(e.counts().dropped, 2);
    }

    #[test]
    fn one_batch_at_a_time_at_most_max_batch_spans() {
        let e = exporter(10, 2);
        e.record((1..=5).map(span).collect());
        let b = e.next_batch().unwrap();
        assert_eq!(b.spans.len(), 2);
        assert!(e.next_batch().is_none(), "one export in flight at a time");
        e.sent(b, true);
        let b = e.next_batch().unwrap();
        e.sent(b, false);
        let b = e.next_batch().unwrap();
        assert_eq!(b.spans.len(), 1);
        e.sent(b, true);
        assert!(e.next_batch().is_none());
        let c = e.counts();
        assert_eq!((c.exported, c.dropped, c.failed), (3, 2, 1));
    }

    #[test]
    fn sampling_follows_the_caller_else_the_ratio_by_trace_id() {
        let e = exporter(10, 10);
        let id = TraceId::from(u128::MAX);
        assert!(e.sampled(Some(TraceFlags::SAMPLED), id));
        assert!(!e.sampled(Some(TraceFlags::default()), id));
        assert!(e.sampled(None, id), "ratio 1 keeps every trace");
        let half = Exporter::new(ExportPolicy {
            sample_ratio: 0.5,
            ..ExportPolicy::default()
        });
        assert!(half.sampled(None, TraceId::from(1u128)));
        assert!(!half.sampled(None, TraceId::from(u128::from(u64::MAX))));
        // Over many ids, about half are kept.
        let kept = (0..10_000u128)
            .map(|i| TraceId::from(i.wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835)))
            .filter(|&id| half.sampled(None, id))
            .count();
        assert!((4_500..5_500).contains(&kept), "{kept}");
        let none = Exporter::new(ExportPolicy {
            sample_ratio: 0.0,
            ..ExportPolicy::default()
        });
        assert!(!none.sampled(None, id));
    }
}
