//! A one-shot answer between simulated tasks: a call's result that its
//! caller awaits, or gives up on when its time limit comes first (the
//! object still does the work, as a real one would).

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use futures_util::future::{select, Either};

use super::exec::Clock;
use crate::platform::UnixMillis;

struct Slot<T> {
    value: Option<T>,
    waker: Option<Waker>,
}

/// Where the answer is sent.
pub(crate) struct Sender<T>(Rc<RefCell<Slot<T>>>);

/// Where it is awaited.
pub(crate) struct Receiver<T>(Rc<RefCell<Slot<T>>>);

/// A sender and its receiver.
pub(crate) fn reply<T>() -> (Sender<T>, Receiver<T>) {
    let slot = Rc::new(RefCell::new(Slot {
        value: None,
        waker: None,
    }));
    (Sender(slot.clone()), Receiver(slot))
}

impl<T> Sender<T> {
    /// Sends the answer (kept until awaited; dropped with the receiver).
    pub(crate) fn send(self, value: T) {
        let waker = {
            let mut s = self.0.borrow_mut();
            s.value = Some(value);
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<T> Future for Receiver<T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut s = self.0.borrow_mut();
        match s.value.take() {
            Some(v) => Poll::Ready(v),
            None => {
                s.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl<T> Receiver<T> {
    /// The answer, or `None` once the clock reaches `limit` without one.
    pub(crate) async fn within(self, clock: &Clock, limit: UnixMillis) -> Option<T> {
        match select(self, clock.at(limit)).await {
            Either::Left((v, _)) => Some(v),
            Either::Right(_) => None,
        }
    }
}
