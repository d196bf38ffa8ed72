//! Sleeps on the global `setTimeout`, all of them sharing one JS timer.
//!
//! A JS timer costs far more than the sleep it serves (workerd: ~14 µs of a
//! 450 µs request, for one `setTimeout` and its `clearTimeout`), and almost
//! every sleep is the timeout of an attempt that ends first. So the pending
//! sleeps of this wasm instance are a list in Rust and one JS timer is armed
//! for the earliest of them: a new sleep that ends later (a timeout started
//! after the pending ones, the usual case) costs no JS call at all, and
//! neither does dropping one while others remain. When the timer fires it
//! wakes every sleep that is due and re-arms for the next. When the last
//! sleep is dropped the timer is cleared: a pending Node timer keeps the
//! process alive.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use js_sys::Function;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

#[wasm_bindgen]
extern "C" {
    /// The global `setTimeout`. Node returns an object, browsers and workerd
    /// a number: the handle stays an opaque `JsValue`.
    #[wasm_bindgen(js_name = setTimeout)]
    fn set_timeout(handler: &Function, ms: f64) -> JsValue;

    /// The global `clearTimeout`.
    #[wasm_bindgen(js_name = clearTimeout)]
    fn clear_timeout(handle: &JsValue);
}

/// The longest delay `setTimeout` honours (2^31 − 1 ms); longer ones would
/// fire at once. A longer sleep re-arms when the clamped timer fires.
const MAX_DELAY_MS: u64 = i32::MAX as u64;

/// Completes after a delay; dropping it cancels it.
#[must_use = "a Sleep does nothing unless awaited"]
pub struct Sleep {
    id: u64,
    state: Rc<State>,
}

#[derive(Default)]
struct State {
    fired: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

struct Pending {
    deadline: u64,
    id: u64,
    state: Rc<State>,
}

/// The JS timer, due to fire at `deadline` (ms since the epoch).
struct Armed {
    deadline: u64,
    handle: JsValue,
}

#[derive(Default)]
struct Timers {
    pending: Vec<Pending>,
    next_id: u64,
    armed: Option<Armed>,
    /// The one callback every arming hands to `setTimeout`; lives as long
    /// as the wasm instance.
    callback: Option<Closure<dyn FnMut()>>,
}

thread_local! {
    static TIMERS: RefCell<Timers> = RefCell::new(Timers::default());
}

fn now_ms() -> u64 {
    // Date.now() is a non-negative integer in range; `as` saturates.
    js_sys::Date::now() as u64
}

impl Timers {
    fn add(&mut self, deadline: u64, now: u64, state: Rc<State>) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.pending.push(Pending {
            deadline,
            id,
            state,
        });
        if self.armed.as_ref().is_none_or(|a| deadline < a.deadline) {
            self.arm(deadline, now);
        }
        id
    }

    fn remove(&mut self, id: u64) {
        if let Some(i) = self.pending.iter().position(|p| p.id == id) {
            self.pending.swap_remove(i);
        }
        if self.pending.is_empty() {
            if let Some(a) = self.armed.take() {
                clear_timeout(&a.handle);
            }
        }
        // Otherwise the timer stays armed: if it was this sleep's, it fires
        // early for the others and re-arms.
    }

    fn arm(&mut self, deadline: u64, now: u64) {
        if let Some(a) = self.armed.take() {
            clear_timeout(&a.handle);
        }
        let callback = self
            .callback
            .get_or_insert_with(|| Closure::<dyn FnMut()>::new(fire));
        let ms = deadline.saturating_sub(now).min(MAX_DELAY_MS);
        let handle = set_timeout(callback.as_ref().unchecked_ref(), ms as f64);
        // When it fires: `deadline`, or earlier if the delay was clamped.
        self.armed = Some(Armed {
            deadline: now.saturating_add(ms),
            handle,
        });
    }
}

/// The JS timer fired: wakes every sleep that is due, re-arms for the rest.
fn fire() {
    let due: Vec<Rc<State>> = TIMERS.with(|t| {
        let mut t = t.borrow_mut();
        // The timer ran for the time it was armed for, whatever the wall
        // clock did meanwhile.
        let fired_for = t.armed.take().map_or(0, |a| a.deadline);
        let now = now_ms().max(fired_for);
        let mut due = Vec::new();
        t.pending.retain(|p| {
            let is_due = p.deadline <= now;
            if is_due {
                due.push(Rc::clone(&p.state));
            }
            !is_due
        });
        if let Some(next) = t.pending.iter().map(|p| p.deadline).min() {
            t.arm(next, now);
        }
        due
    });
    // Woken outside the borrow.
    for state in due {
        state.fired.set(true);
        if let Some(waker) = state.waker.borrow_mut().take() {
            waker.wake();
        }
    }
}

/// A sleep of `dur` (a zero one is over at once).
pub fn sleep(dur: Duration) -> Sleep {
    let state = Rc::new(State::default());
    let ms = u64::try_from(dur.as_millis()).unwrap_or(u64::MAX);
    if ms == 0 {
        state.fired.set(true);
        return Sleep { id: u64::MAX, state };
    }
    let now = now_ms();
    let id = TIMERS.with(|t| {
        t.borrow_mut()
            .add(now.saturating_add(ms), now, Rc::clone(&state))
    });
    Sleep { id, state }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.state.fired.get() {
            return Poll::Ready(());
        }
        let mut waker = self.state.waker.borrow_mut();
        match &*waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => *waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if !self.state.fired.get() {
            TIMERS.with(|t| t.borrow_mut().remove(self.id));
        }
    }
}
