//! A streamed request's connection kept alive before its commit point.
//!
//! The gateway waits for a stream's first item before it answers, so that
//! a failure before the commit point is an ordinary error with its status.
//! A wait longer than `keepaliveMs` (retries, backoff, a slow first token
//! and then the next entry) would leave the client and any proxy between
//! staring at a silent socket: past that wait the gateway answers
//! `200 text/event-stream` and writes what the client's format ignores,
//! once at once and then every `keepaliveMs` until the first item comes
//! (Anthropic's `ping` event, an SSE comment for an OpenAI client). A
//! failure before the commit point is then the client's error event, as
//! after it.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::Stream;

use super::http::{Format, Piece, PieceStream};
use super::sse;
use crate::engine::client::Client;
use crate::engine::idle::OwnedSleep;
use crate::engine::store::BreakerStore;
use crate::engine::stream::{ChatStream, StreamItem};
use crate::error::{Error, Exhausted};
use crate::platform::Platform;

/// The gateway's stream, over its shared client.
pub(crate) type Shared<P, S> = ChatStream<Rc<Client<P, S>>, P, S>;

/// The stream's first item, with the stream handed back.
pub(crate) type First<P, S> = (Shared<P, S>, Option<Result<StreamItem, Error>>);

/// The wait for the first item, owning the stream: it goes on (its
/// attempt in flight is not dropped) while the response is already out.
pub(crate) type Pending<P, S> = Pin<Box<dyn Future<Output = First<P, S>>>>;

/// What makes the rest of the body of the first item (or its error).
pub(crate) type Then<P, S> =
    Box<dyn FnOnce(Shared<P, S>, Result<StreamItem, Error>) -> PieceStream>;

/// Waits up to `after` for the stream's first item: `Ok` with it, or `Err`
/// with the wait still going.
pub(crate) async fn first_item<P: Platform + 'static, S: BreakerStore + 'static>(
    client: &Client<P, S>,
    stream: Shared<P, S>,
    after: Duration,
) -> Result<First<P, S>, Pending<P, S>> {
    let mut pending: Pending<P, S> = Box::pin(async move {
        let mut stream = stream;
        let item = stream.next_item().await;
        (stream, item)
    });
    let mut timer = std::pin::pin!(client.platform().sleep(after));
    let ready = poll_fn(|cx| {
        if let Poll::Ready(first) = pending.as_mut().poll(cx) {
            return Poll::Ready(Some(first));
        }
        timer.as_mut().poll(cx).map(|()| None)
    })
    .await;
    ready.ok_or(pending)
}

/// What the client's format reads as nothing: Anthropic's `ping` event
/// (which its SDKs skip), an SSE comment for an OpenAI client.
pub(crate) fn keepalive(format: Format) -> &'static [u8] {
    match format {
        // An SSE comment: every OpenAI client (Responses' too) skips it.
        Format::OpenAi | Format::Responses => b": keepalive\n\n",
        Format::Anthropic => b"event: ping\ndata: {\"type\": \"ping\"}\n\n",
    }
}

/// The body of a response sent before the first item: keepalives every
/// `every` while `pending` waits, then what `then` makes of the first item
/// (the events of the answer, or the client's error event).
pub(crate) fn body<P: Platform + 'static, S: BreakerStore + 'static>(
    client: Rc<Client<P, S>>,
    pending: Pending<P, S>,
    format: Format,
    every: Duration,
    then: Then<P, S>,
) -> PieceStream {
    Box::pin(Waiting {
        client,
        pending: Some(pending),
        format,
        every,
        timer: None,
        then: Some(then),
        rest: None,
    })
}

/// The first item's absence, when the stream ended with neither an item
/// nor an error (it cannot before its first item; an error event still
/// tells the client its answer did not come).
pub(crate) fn or_ended(item: Option<Result<StreamItem, Error>>) -> Result<StreamItem, Error> {
    item.unwrap_or_else(|| {
        Err(Error::AllProvidersFailed(Exhausted {
            attempts: Vec::new(),
        }))
    })
}

struct Waiting<P: Platform, S: BreakerStore> {
    client: Rc<Client<P, S>>,
    pending: Option<Pending<P, S>>,
    format: Format,
    every: Duration,
    /// The next keepalive's timer; `None` before the first, written at once.
    timer: Option<OwnedSleep>,
    then: Option<Then<P, S>>,
    /// The answer's own body, once the first item came.
    rest: Option<PieceStream>,
}

impl<P: Platform + 'static, S: BreakerStore + 'static> Waiting<P, S> {
    fn arm(&mut self) {
        let client = Rc::clone(&self.client);
        let every = self.every;
        self.timer = Some(Box::pin(
            async move { client.platform().sleep(every).await },
        ));
    }
}

impl<P: Platform + 'static, S: BreakerStore + 'static> Stream for Waiting<P, S> {
    type Item = Piece;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Piece>> {
        let this = self.get_mut();
        loop {
            if let Some(rest) = this.rest.as_mut() {
                return rest.as_mut().poll_next(cx);
            }
            if this.timer.is_none() {
                this.arm();
                return Poll::Ready(Some(Piece::Bytes(keepalive(this.format).to_vec())));
            }
            if let Some(pending) = this.pending.as_mut() {
                if let Poll::Ready((stream, item)) = pending.as_mut().poll(cx) {
                    this.pending = None;
                    this.timer = None;
                    let Some(then) = this.then.take() else {
                        return Poll::Ready(None);
                    };
                    this.rest = Some(then(stream, or_ended(item)));
                    continue;
                }
            }
            let Some(timer) = this.timer.as_mut() else {
                return Poll::Pending;
            };
            match timer.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    this.arm();
                    return Poll::Ready(Some(Piece::Bytes(keepalive(this.format).to_vec())));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// The body for a first item that came after the response went out.
pub(crate) fn answer<P: Platform + 'static, S: BreakerStore + 'static>(
    format: Format,
    request_id: String,
    started: u64,
    include_usage: bool,
    echo: Option<crate::format::responses::Echo>,
    outlets: sse::Outlets<P, S>,
) -> Then<P, S> {
    Box::new(move |stream, first| {
        let served = stream.served_by().cloned();
        let encoder = sse::Encoder::for_first(
            format,
            first.as_ref().ok(),
            served.map(|s| s.model),
            &request_id,
            started / 1000,
            include_usage,
            echo,
        );
        // What a continuation note counts from: the attempts up to the
        // first item, the one answering included.
        let told = stream.attempts().iter().filter(|a| a.number > 0).count()
            + usize::from(stream.in_flight());
        sse::body(stream, encoder, first, request_id, started, told, outlets)
    })
}
