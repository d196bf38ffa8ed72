//! A deadline on a future: the only hand-written future in the crate. For
//! waits the platform cannot bound itself: a custom provider's call, a
//! stream's first-token and idle deadlines. An HTTP attempt's limit goes
//! with its request instead ([`HttpRequest::timeout`]), so that the host's
//! own timer aborts it.
//!
//! [`HttpRequest::timeout`]: crate::platform::HttpRequest::timeout

use std::future::{poll_fn, Future};
use std::pin::pin;
use std::task::Poll;

/// The deadline passed first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

/// Runs `fut` until `timer` completes. When the timer wins, `fut` is dropped,
/// which aborts its request (the platform's contract); when `fut` wins, the
/// timer is dropped, which cancels it.
pub async fn timeout<F: Future>(
    timer: impl Future<Output = ()>,
    fut: F,
) -> Result<F::Output, Elapsed> {
    let mut fut = pin!(fut);
    let mut timer = pin!(timer);
    poll_fn(|cx| {
        if let Poll::Ready(v) = fut.as_mut().poll(cx) {
            return Poll::Ready(Ok(v));
        }
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(Elapsed)),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}
