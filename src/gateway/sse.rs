//! Streamed answers: a [`ChatStream`] encoded as the client's server-sent
//! events. The gateway waits for the stream's first item before answering:
//! a failure before the commit point is an ordinary JSON error with its
//! status; from the commit point on the response is `200 text/event-stream`,
//! and an interrupted answer ends in the client's error event (OpenAI
//! `data: {"error":…}`, Anthropic `event: error`), never a clean end.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use futures_core::Stream;
use serde::Serialize;

use super::Format;
use crate::chat::{Delta, Usage};
use crate::engine::client::Client;
use crate::engine::store::BreakerStore;
use crate::engine::stream::ChatStream;
use crate::error::{Error, ErrorKind, ProviderError};
use crate::format::anthropic_stream::AnthropicStreamEncoder;
use crate::format::openai_stream::OpenAiStreamEncoder;
use crate::platform::Platform;

/// One piece of a streamed response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Bytes for the client.
    Bytes(Vec<u8>),
    /// A log line for the host, when the stream ends (never sent).
    Log(String),
}

/// A streamed response body.
pub type PieceStream = Pin<Box<dyn Stream<Item = Piece>>>;

/// The client format's event writer.
pub(crate) enum Encoder {
    OpenAi(OpenAiStreamEncoder),
    Anthropic(AnthropicStreamEncoder),
}

impl Encoder {
    pub(crate) fn new(
        format: Format,
        id: &str,
        created: u64,
        model: String,
        include_usage: bool,
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
        }
    }

    fn delta(&mut self, d: &Delta) -> Vec<u8> {
        match self {
            Encoder::OpenAi(e) => e.delta(d),
            Encoder::Anthropic(e) => e.delta(d),
        }
    }

    fn finish(&mut self) -> Vec<u8> {
        match self {
            Encoder::OpenAi(e) => e.finish(),
            Encoder::Anthropic(e) => e.finish(),
        }
    }

    fn error(&mut self, e: &ProviderError) -> Vec<u8> {
        match self {
            Encoder::OpenAi(enc) => enc.error(e),
            Encoder::Anthropic(enc) => enc.error(e),
        }
    }
}

/// Where the stream is.
enum Phase {
    /// Deltas flow; `first` is the item read before answering.
    Streaming(Option<Delta>),
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
}

/// The response body of a committed stream, starting with `first`.
pub(crate) fn body<P: Platform + 'static, S: BreakerStore + 'static>(
    stream: ChatStream<Rc<Client<P, S>>, P, S>,
    encoder: Encoder,
    first: Delta,
    request_id: String,
    started: u64,
) -> PieceStream {
    let state = State {
        stream,
        encoder,
        phase: Phase::Streaming(Some(first)),
        request_id,
        started,
    };
    Box::pin(Unfold {
        state: Some(state),
        step: next_piece::<P, S>,
        fut: None,
    })
}

async fn next_piece<P: Platform, S: BreakerStore>(
    mut st: State<P, S>,
) -> Option<(Piece, State<P, S>)> {
    loop {
        let first = match &mut st.phase {
            Phase::Over => return None,
            Phase::Ending(line) => {
                let line = std::mem::take(line);
                st.phase = Phase::Over;
                return Some((Piece::Log(line), st));
            }
            Phase::Streaming(first) => first.take(),
        };
        let item = match first {
            Some(d) => Some(Ok(d)),
            None => st.stream.next().await,
        };
        let bytes = match item {
            Some(Ok(Delta::Done)) | None => {
                st.phase = Phase::Ending(end_line(&st, "complete", None));
                st.encoder.finish()
            }
            Some(Ok(d)) => st.encoder.delta(&d),
            Some(Err(e)) => {
                let cause = cause_of(&e);
                st.phase = Phase::Ending(end_line(&st, "interrupted", Some(&cause)));
                st.encoder.error(&cause)
            }
        };
        if !bytes.is_empty() {
            return Some((Piece::Bytes(bytes), st));
        }
    }
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
        Error::InvalidRequest(_) | Error::UnknownRoute(_) => {
            ProviderError::new(ErrorKind::InvalidRequest, e.to_string())
        }
    }
}

/// The log line of a stream's end (keys sorted, as in a request's line).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EndLine<'a> {
    attempts: usize,
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

/// The log line of a stream's end.
fn end_line<P: Platform, S: BreakerStore>(
    st: &State<P, S>,
    outcome: &str,
    cause: Option<&ProviderError>,
) -> String {
    let now = st.stream.client().platform().now();
    let line = EndLine {
        attempts: st.stream.attempts().iter().filter(|a| a.number > 0).count(),
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
    super::to_json_text(&line, 256)
}

/// A stream from repeatedly running `step` on a state it hands back.
struct Unfold<T, F, Fut> {
    state: Option<T>,
    step: F,
    fut: Option<Pin<Box<Fut>>>,
}

impl<T, F, Fut> Stream for Unfold<T, F, Fut>
where
    T: Unpin,
    F: FnMut(T) -> Fut + Unpin,
    Fut: Future<Output = Option<(Piece, T)>>,
{
    type Item = Piece;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Piece>> {
        let this = self.get_mut();
        if this.fut.is_none() {
            let Some(state) = this.state.take() else {
                return Poll::Ready(None);
            };
            this.fut = Some(Box::pin((this.step)(state)));
        }
        let Some(fut) = this.fut.as_mut() else {
            return Poll::Ready(None);
        };
        match fut.as_mut().poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some((piece, state))) => {
                this.fut = None;
                this.state = Some(state);
                Poll::Ready(Some(piece))
            }
            Poll::Ready(None) => {
                this.fut = None;
                Poll::Ready(None)
            }
        }
    }
}
