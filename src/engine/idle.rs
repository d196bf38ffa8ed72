//! The idle deadline of a stream after its first content, kept by one
//! timer per attempt instead of one per read (docs/design.md §8).

use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;

use crate::engine::core::Core;
use crate::engine::store::BreakerStore;
use crate::engine::timeout::Elapsed;
use crate::platform::{Body, Platform, TransportError, UnixMillis};

/// A timer that owns what it needs: it can outlive any one read, so the
/// idle deadline of a whole stream is one timer, not one per chunk.
pub(crate) type OwnedSleep = Pin<Box<dyn Future<Output = ()>>>;

/// Makes [`OwnedSleep`]s (the gateway's, over its shared client).
pub(crate) type IdleTimers = Rc<dyn Fn(Duration) -> OwnedSleep>;

/// A chunk of `body`, or `Elapsed` once the clock reaches `due` (the idle
/// deadline from the start of this wait, or the end-to-end one) with none. `idle` is
/// the attempt's one timer: kept across reads while data flows, and when it
/// fires before `due` (data came since it was armed) armed again for what
/// is left. A read dropped when the timer fires loses nothing: the body
/// keeps its pending read.
pub(crate) async fn idle_read<P: Platform, S: BreakerStore>(
    core: &Core<P, S>,
    timers: &IdleTimers,
    body: &mut Body,
    idle: &mut Option<OwnedSleep>,
    due: UnixMillis,
) -> Result<Option<Result<Vec<u8>, TransportError>>, Elapsed> {
    loop {
        let timer = match idle {
            Some(t) => t,
            None => {
                let wait = due.saturating_sub(core.platform.now());
                idle.insert(timers(Duration::from_millis(wait)))
            }
        };
        let mut chunk = pin!(body.chunk());
        let fired = poll_fn(|cx| {
            if let Poll::Ready(c) = chunk.as_mut().poll(cx) {
                return Poll::Ready(Some(c));
            }
            timer.as_mut().poll(cx).map(|()| None)
        })
        .await;
        match fired {
            Some(c) => return Ok(c),
            None => {
                *idle = None;
                if core.platform.now() >= due {
                    return Err(Elapsed);
                }
            }
        }
    }
}
