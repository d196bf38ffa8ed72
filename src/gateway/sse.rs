//! Streamed answers: a [`ChatStream`] encoded as the client's server-sent
//! events. The gateway waits for the stream's first item before answering:
//! a failure before the commit point is an ordinary JSON error with its
//! status; from the commit point on the response is `200 text/event-stream`,
//! and an interrupted answer ends in the client's error event (OpenAI
//! `data: {"error":…}`, Anthropic `event: error`), never a clean end.
//!
//! When the answering provider speaks the client's dialect, its own events
//! go out as they came ([`PassWriter`]); otherwise the deltas are encoded.

use std::rc::Rc;

use serde::Serialize;

use super::cache::Recorder;
use super::http::{Format, Piece, PieceStream};
use super::metrics::StaleTally;
use super::pass::{write_event, PassWriter};
use super::tenants::{tokens_in, Ticket};
use super::traced::{Ending, TraceEnd};
use crate::chat::{Delta, Usage};
use crate::engine::client::Client;
use crate::engine::store::BreakerStore;
use crate::engine::stream::{ChatStream, IdleTimers, StreamItem};
use crate::error::{discarded_usage, Attempt, Error, ErrorKind, ProviderError};
use crate::format::anthropic::stream::AnthropicStreamEncoder;
use crate::format::openai::stream::OpenAiStreamEncoder;
use crate::format::responses::{Echo, ResponsesStreamEncoder};
use crate::platform::Platform;
use crate::policy::price::Bill;

/// Where a stream's end line goes when its body is dropped before handing
/// it out as a [`Piece::Log`]: the client went away mid-stream (see
/// [`super::proxy::Gateway::log_to`]).
pub(crate) type LogSink = Rc<dyn Fn(&str)>;

/// Where a stream's body hands what it leaves behind: its end line when
/// dropped unfinished, and its answer, to the response cache, once
/// complete.
pub(crate) struct Outlets<P: Platform, S: BreakerStore> {
    pub(crate) log: Option<LogSink>,
    pub(crate) record: Option<Recorder<P, S>>,
    /// A stored answer past its TTL, as the client's events: written
    /// instead of the error event when every entry failed before the
    /// commit point (the response already went out, keeping the
    /// connection alive).
    pub(crate) stale: Option<StaleAnswer>,
    /// The request's spans to record at the stream's end, when traced.
    pub(crate) trace: Option<TraceEnd>,
    /// Its named client's hold, settled with the stream's usage when its
    /// body is dropped, whichever way it ended.
    pub(crate) ticket: Option<Ticket>,
}

/// A stored answer past its TTL for a stream that went out before its
/// first item, and the cache's count of the request, taken once it is
/// known whether the answer was served.
pub(crate) struct StaleAnswer {
    pub(crate) events: Vec<u8>,
    /// What the answer cost when it was asked, in USD.
    pub(crate) saves: Option<f64>,
    pub(crate) tally: StaleTally,
}

/// The client format's event writer.
pub(crate) enum Encoder {
    OpenAi(OpenAiStreamEncoder),
    Anthropic(AnthropicStreamEncoder),
    Responses(ResponsesStreamEncoder),
    /// The provider's own events, in the client's dialect.
    Pass(PassWriter),
}

impl Encoder {
    pub(crate) fn new(
        format: Format,
        id: &str,
        created: u64,
        model: String,
        include_usage: bool,
        echo: Option<Echo>,
    ) -> Self {
        match format {
            Format::OpenAi => Encoder::OpenAi(OpenAiStreamEncoder::new(
                format!("chatcmpl-{id}"),
                created,
                model,
                include_usage,
            )),
            Format::Anthropic => {
                Encoder::Anthropic(AnthropicStreamEncoder::new(format!("msg_{id}"), model))
            }
            Format::Responses => Encoder::Responses(ResponsesStreamEncoder::new(
                id.to_string(),
                created,
                model,
                echo.unwrap_or_default(),
            )),
        }
    }

    /// The writer for a stream whose first item is `first` (`None`: it
    /// failed first): the provider's own events when they come through,
    /// else the deltas encoded, under the model the stream names.
    pub(crate) fn for_first(
        format: Format,
        first: Option<&StreamItem>,
        served_model: Option<String>,
        id: &str,
        created: u64,
        include_usage: bool,
        echo: Option<Echo>,
    ) -> Self {
        let model = match first {
            // The answering provider's own events come first.
            Some(StreamItem::Raw(_) | StreamItem::Delta { passed: true, .. }) => {
                return Encoder::Pass(PassWriter::new(format, include_usage))
            }
            Some(StreamItem::Delta {
                delta: Delta::Start { model: Some(m) },
                ..
            }) => m.clone(),
            Some(StreamItem::Delta { .. }) | None => served_model.unwrap_or_default(),
        };
        Encoder::new(format, id, created, model, include_usage, echo)
    }

    fn item(&mut self, item: StreamItem) -> Vec<u8> {
        match (self, item) {
            (Encoder::Pass(w), StreamItem::Raw(ev)) => w.raw(ev),
            (Encoder::Pass(w), StreamItem::Delta { delta, passed }) => w.delta(&delta, passed),
            // Raw events come only to a stream that passes them through.
            (
                Encoder::OpenAi(_) | Encoder::Anthropic(_) | Encoder::Responses(_),
                StreamItem::Raw(_),
            ) => Vec::new(),
            (Encoder::OpenAi(e), StreamItem::Delta { delta, .. }) => e.delta(&delta),
            (Encoder::Anthropic(e), StreamItem::Delta { delta, .. }) => e.delta(&delta),
            (Encoder::Responses(e), StreamItem::Delta { delta, .. }) => e.delta(&delta),
        }
    }

    /// The client reads OpenAI chunks.
    fn is_openai(&self) -> bool {
        match self {
            Encoder::OpenAi(_) => true,
            Encoder::Anthropic(_) | Encoder::Responses(_) => false,
            Encoder::Pass(w) => w.is_openai(),
        }
    }

    fn finish(&mut self) -> Vec<u8> {
        match self {
            Encoder::OpenAi(e) => e.finish(),
            Encoder::Anthropic(e) => e.finish(),
            Encoder::Responses(e) => e.finish(),
            Encoder::Pass(w) => w.finish(),
        }
    }

    fn error(&mut self, e: &ProviderError) -> Vec<u8> {
        match self {
            Encoder::OpenAi(enc) => enc.error(e),
            Encoder::Anthropic(enc) => enc.error(e),
            Encoder::Responses(enc) => enc.error(e),
            Encoder::Pass(w) => w.error(e),
        }
    }
}

/// Where the stream is.
enum Phase {
    /// Items flow; `first` is the item read before answering (or the
    /// error, when the answer went out before it: [`super::keepalive`]).
    Streaming(Option<Result<StreamItem, Error>>),
    /// The answer ended (complete or not); the log line is still due.
    Ending(String),
    /// Nothing more.
    Over,
}

struct State<P: Platform, S: BreakerStore> {
    stream: ChatStream<Rc<Client<P, S>>, P, S>,
    encoder: Encoder,
    phase: Phase,
    request_id: String,
    started: u64,
    /// The attempts the response's `x-attempts` header counted.
    told: usize,
    /// Takes the end line of a body dropped before it was handed out.
    log: Option<LogSink>,
    /// Records the answer for the response cache.
    record: Option<Recorder<P, S>>,
    /// The bytes the answer was stored in, once it was.
    stored: Option<usize>,
    /// The stale answer ([`Outlets::stale`]).
    stale: Option<StaleAnswer>,
    /// The spans to record at the end ([`Outlets::trace`]).
    trace: Option<TraceEnd>,
    /// The client's hold ([`Outlets::ticket`]).
    ticket: Option<Ticket>,
    /// When the stream committed (its body began), and the attempts made
    /// by then.
    committed: (u64, usize),
}

impl<P: Platform, S: BreakerStore> Drop for State<P, S> {
    /// A body dropped before its end line went out (the client went away:
    /// the host stops reading) still logs its end: `client_closed` while
    /// the answer was under way, else the line its end had written. Its
    /// upstream request is aborted by the stream's own drop, after this.
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            let attempts = self.stream.attempts();
            let cost = bill(self, attempts).and_then(|b| b.total);
            let now = self.stream.client().platform().now();
            ticket.settle(now, tokens_in(attempts), cost);
        }
        let line = match std::mem::replace(&mut self.phase, Phase::Over) {
            Phase::Over => return,
            Phase::Ending(line) => line,
            Phase::Streaming(_) => {
                let bill = bill(self, self.stream.attempts());
                record_trace(self, None, None, Some("client_closed"));
                end_line(self, "client_closed", None, bill)
            }
        };
        if let Some(sink) = &self.log {
            sink(&line);
        }
    }
}

/// The response body of a committed stream, starting with `first`; `told`
/// is the attempts its `x-attempts` header counted; `outlets` take its end
/// line if it is dropped before handing it out, and its complete answer.
pub(crate) fn body<P: Platform + 'static, S: BreakerStore + 'static>(
    stream: ChatStream<Rc<Client<P, S>>, P, S>,
    encoder: Encoder,
    first: Result<StreamItem, Error>,
    request_id: String,
    started: u64,
    told: usize,
    outlets: Outlets<P, S>,
) -> PieceStream {
    let committed = (stream.client().platform().now(), told);
    let state = State {
        stream,
        encoder,
        phase: Phase::Streaming(Some(first)),
        request_id,
        started,
        told,
        log: outlets.log,
        record: outlets.record,
        stored: None,
        stale: outlets.stale,
        trace: outlets.trace,
        ticket: outlets.ticket,
        committed,
    };
    Box::pin(futures_util::stream::unfold(state, next_piece::<P, S>))
}

/// The next piece: the bytes of every item ready (all that one upstream
/// read brought, so that one read is one write to the client), or the log
/// line once the stream has ended.
async fn next_piece<P: Platform, S: BreakerStore>(
    mut st: State<P, S>,
) -> Option<(Piece, State<P, S>)> {
    let mut out = Vec::new();
    loop {
        let item = match &mut st.phase {
            Phase::Over => return None,
            Phase::Ending(_) if !out.is_empty() => return Some((Piece::Bytes(out), st)),
            Phase::Ending(line) => {
                let line = std::mem::take(line);
                st.phase = Phase::Over;
                return Some((Piece::Log(line), st));
            }
            Phase::Streaming(first) => match first.take() {
                Some(d) => Some(d),
                None if out.is_empty() => st.stream.next_item().await,
                None => match st.stream.ready_item() {
                    Some(d) => Some(Ok(d)),
                    None => return Some((Piece::Bytes(out), st)),
                },
            },
        };
        match (&mut st.record, &item) {
            (Some(record), Some(Ok(StreamItem::Delta { delta, .. }))) => record.push(delta),
            (Some(record), Some(Ok(StreamItem::Raw(raw)))) => match &raw.bytes {
                Some(bytes) => record.push_event(bytes, raw.usage_only),
                None => record.push_event(&write_event(&raw.event), raw.usage_only),
            },
            _ => {}
        }
        let bytes = match item {
            Some(Ok(StreamItem::Delta {
                delta: Delta::Done, ..
            }))
            | None => {
                if let Some(record) = st.record.take() {
                    let continued = attempts(&st) > st.told;
                    st.stored =
                        record.complete(st.stream.served_by(), st.stream.attempts(), continued);
                }
                let bill = bill(&st, st.stream.attempts());
                record_trace(&mut st, None, None, None);
                st.phase = Phase::Ending(end_line(&st, "complete", None, bill));
                let mut bytes = continuation_note(&st);
                bytes.extend(cost_note(&st, bill));
                bytes.extend(st.encoder.finish());
                bytes
            }
            Some(Ok(item)) => st.encoder.item(item),
            Some(Err(e @ Error::AllProvidersFailed(_)))
                if st.stale.is_some() && !st.stream.committed() =>
            {
                // Every entry failed before any content: the stored
                // answer past its TTL instead of the error event. The end
                // line names the failure that made it stale.
                let cause = cause_of(&e);
                let bill = bill(&st, e.attempts());
                record_trace(&mut st, Some(e.attempts()), Some("stale"), None);
                st.phase = Phase::Ending(end_line(&st, "stale", Some(&cause), bill));
                match st.stale.as_mut() {
                    Some(stale) => {
                        stale.tally.served(stale.saves.unwrap_or(0.0));
                        std::mem::take(&mut stale.events)
                    }
                    None => Vec::new(),
                }
            }
            Some(Err(e)) => {
                let cause = cause_of(&e);
                let bill = bill(&st, e.attempts());
                record_trace(&mut st, Some(e.attempts()), None, Some(cause.kind.code()));
                st.phase = Phase::Ending(end_line(&st, "interrupted", Some(&cause), bill));
                let mut bytes = continuation_note(&st);
                bytes.extend(cost_note(&st, bill));
                bytes.extend(st.encoder.error(&cause));
                bytes
            }
        };
        if out.is_empty() {
            out = bytes;
        } else {
            out.extend_from_slice(&bytes);
        }
    }
}

/// Timers over the gateway's shared client, each owning a handle on it,
/// so a stream's idle deadline is one timer that outlives its reads.
pub(crate) fn idle_timers<P: Platform + 'static, S: BreakerStore + 'static>(
    client: &Rc<Client<P, S>>,
) -> IdleTimers {
    let client = Rc::clone(client);
    Rc::new(move |dur| {
        let client = Rc::clone(&client);
        Box::pin(async move { client.platform().sleep(dur).await })
    })
}

/// The failure to name in the client's error event.
fn cause_of(e: &Error) -> ProviderError {
    match e {
        Error::Interrupted { error, .. } | Error::Rejected { error, .. } => error.clone(),
        Error::AllProvidersFailed(x) => x
            .errors()
            .last()
            .cloned()
            .unwrap_or_else(|| ProviderError::new(ErrorKind::Server, x.headline())),
        Error::NoValidAnswer { .. } => ProviderError::new(ErrorKind::Server, e.to_string()),
        Error::InvalidRequest(_) | Error::UnknownRoute(_) | Error::SpendCapReached { .. } => {
            ProviderError::new(ErrorKind::InvalidRequest, e.to_string())
        }
        Error::Shed { .. } => ProviderError::new(ErrorKind::Server, e.to_string()),
    }
}

/// The log line of a stream's end (keys sorted, as in a request's line).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EndLine<'a> {
    attempts: usize,
    /// The bytes the answer was stored in by the response cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_stored_bytes: Option<usize>,
    /// The named client the stream answers (never its key).
    #[serde(skip_serializing_if = "Option::is_none")]
    client: Option<&'a str>,
    /// What every attempt cost, where usage and prices are known.
    #[serde(skip_serializing_if = "Option::is_none")]
    cost: Option<Bill>,
    /// Tokens consumed by attempts that did not become the answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    discarded_usage: Option<Usage>,
    error: Option<ErrorKind>,
    latency_ms: u64,
    level: &'static str,
    malformed_chunks: usize,
    msg: &'static str,
    outcome: &'a str,
    request_id: &'a str,
    served_by: Option<String>,
    usage: Option<Usage>,
}

/// The attempts that reached a provider, the one still open included.
fn attempts<P: Platform, S: BreakerStore>(st: &State<P, S>) -> usize {
    st.stream.attempts().iter().filter(|a| a.number > 0).count()
        + usize::from(st.stream.in_flight())
}

/// For an OpenAI client, when attempts were made after the headers went
/// (a continuation after the commit point), an SSE comment before the end
/// saying how many there were in all and which provider made the last:
/// the headers' count stays true of what happened before the commit
/// point, and clients ignore comments.
fn continuation_note<P: Platform, S: BreakerStore>(st: &State<P, S>) -> Vec<u8> {
    let all = attempts(st);
    if !st.encoder.is_openai() || all <= st.told {
        return Vec::new();
    }
    let last = st
        .stream
        .attempts()
        .iter()
        .rev()
        .find(|a| a.number > 0)
        .map(|a| format!(" last={}/{}", a.provider, a.model))
        .unwrap_or_default();
    format!(": continued after the commit point: attempts={all}{last}\n\n").into_bytes()
}

/// What a stream's attempts cost, when any had usage and a price.
fn bill<P: Platform, S: BreakerStore>(st: &State<P, S>, attempts: &[Attempt]) -> Option<Bill> {
    let prices = &st.stream.client().cost_policy().prices;
    if prices.is_empty() {
        return None;
    }
    Some(prices.bill(attempts)).filter(|b| b.total.is_some())
}

/// For an OpenAI client, the stream's final cost as an SSE comment before
/// the end (`: cost usd=0.0042 answer=0.004`): the headers went before the
/// answer had any, and clients ignore comments.
fn cost_note<P: Platform, S: BreakerStore>(st: &State<P, S>, bill: Option<Bill>) -> Vec<u8> {
    let Some(total) = bill
        .and_then(|b| b.total)
        .filter(|_| st.encoder.is_openai())
    else {
        return Vec::new();
    };
    let answer = bill
        .and_then(|b| b.answer)
        .map(|a| format!(" answer={a}"))
        .unwrap_or_default();
    format!(": cost usd={total}{answer}\n\n").into_bytes()
}

/// Queues a traced stream's spans at its end, after `attempts` (the
/// stream's own unless its error carries them): served stale (`cache`),
/// or failed with `error`.
fn record_trace<P: Platform, S: BreakerStore>(
    st: &mut State<P, S>,
    attempts: Option<&[Attempt]>,
    cache: Option<&'static str>,
    error: Option<&str>,
) {
    let Some(trace) = st.trace.take() else {
        return;
    };
    let model = st.stream.served_by().map(|s| s.model.as_str());
    let ending = Ending {
        attempts: attempts.unwrap_or(st.stream.attempts()),
        committed: st.committed,
        end: st.stream.client().platform().now(),
        model,
        cache,
        error,
        text: st.stream.text(),
    };
    trace.record(st.stream.client(), ending);
}

/// The log line of a stream's end.
fn end_line<P: Platform, S: BreakerStore>(
    st: &State<P, S>,
    outcome: &str,
    cause: Option<&ProviderError>,
    cost: Option<Bill>,
) -> String {
    let now = st.stream.client().platform().now();
    let line = EndLine {
        attempts: attempts(st),
        cache_stored_bytes: st.stored,
        client: st.ticket.as_ref().map(Ticket::client),
        cost,
        discarded_usage: discarded_usage(st.stream.attempts()),
        error: cause.map(|c| c.kind),
        latency_ms: now.saturating_sub(st.started),
        level: if cause.is_some() { "warn" } else { "info" },
        malformed_chunks: st.stream.malformed_chunks(),
        msg: "stream end",
        outcome,
        request_id: &st.request_id,
        served_by: st
            .stream
            .served_by()
            .map(|s| format!("{}/{}", s.provider, s.model)),
        usage: st.stream.usage(),
    };
    super::render::to_json_text(&line, 256)
}
