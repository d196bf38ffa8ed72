//! Virtual time and a single-threaded executor for many tasks at once: the
//! clock only moves when every task waits, and then jumps to the next timer.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use crate::platform::UnixMillis;

/// The virtual clock and its timers. Clones share state.
#[derive(Clone, Default)]
pub(crate) struct Clock(Rc<RefCell<Timers>>);

#[derive(Default)]
struct Timers {
    now: UnixMillis,
    seq: u64,
    pending: BTreeMap<(UnixMillis, u64), Waker>,
    /// The wakers an advance takes out, kept for the next one's.
    due: Vec<Waker>,
}

impl Clock {
    pub(crate) fn now(&self) -> UnixMillis {
        self.0.borrow().now
    }

    /// A future ready at `at`; dropping it cancels the timer.
    pub(crate) fn at(&self, at: UnixMillis) -> Timer {
        Timer {
            clock: self.clone(),
            at,
            key: None,
        }
    }

    fn next(&self) -> Option<UnixMillis> {
        self.0.borrow().pending.keys().next().map(|k| k.0)
    }

    /// Moves to `to` (never back) and wakes every timer due by then, in
    /// the order they are due.
    fn advance(&self, to: UnixMillis) {
        let mut due = {
            let mut t = self.0.borrow_mut();
            t.now = t.now.max(to);
            let now = t.now;
            let mut due = std::mem::take(&mut t.due);
            while let Some(entry) = t.pending.first_entry().filter(|e| e.key().0 <= now) {
                due.push(entry.remove());
            }
            due
        };
        // Woken outside the borrow: a waker may be anything.
        due.drain(..).for_each(Waker::wake);
        self.0.borrow_mut().due = due;
    }
}

/// A virtual-clock timer.
pub(crate) struct Timer {
    clock: Clock,
    at: UnixMillis,
    key: Option<(UnixMillis, u64)>,
}

impl Future for Timer {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        let mut t = this.clock.0.borrow_mut();
        if t.now >= this.at {
            if let Some(k) = this.key.take() {
                t.pending.remove(&k);
            }
            return Poll::Ready(());
        }
        let key = *this.key.get_or_insert_with(|| {
            t.seq += 1;
            (this.at, t.seq)
        });
        t.pending.insert(key, cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        if let Some(k) = self.key.take() {
            if let Ok(mut t) = self.clock.0.try_borrow_mut() {
                t.pending.remove(&k);
            }
        }
    }
}

type Task = Pin<Box<dyn Future<Output = ()>>>;

/// Tasks woken and not yet polled, by slot. Wakers must be `Send`, hence
/// the mutex; nothing here crosses a thread.
#[derive(Default)]
struct ReadyQueue(Mutex<Vec<usize>>);

struct TaskWaker {
    slot: usize,
    queue: Arc<ReadyQueue>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }
    fn wake_by_ref(self: &Arc<Self>) {
        if let Ok(mut q) = self.queue.0.lock() {
            q.push(self.slot);
        }
    }
}

/// Spawned tasks and the clock they run on.
#[derive(Clone)]
pub(crate) struct Executor {
    clock: Clock,
    inner: Rc<RefCell<Slots>>,
    queue: Arc<ReadyQueue>,
}

#[derive(Default)]
struct Slots {
    tasks: Vec<Option<Task>>,
    /// Each slot's waker, made once: a slot's tasks share it.
    wakers: Vec<Waker>,
    free: Vec<usize>,
    spawned: Vec<Task>,
    live: usize,
}

impl Executor {
    pub(crate) fn new(clock: Clock) -> Self {
        Executor {
            clock,
            inner: Rc::default(),
            queue: Arc::default(),
        }
    }

    /// Runs `task` from the next [`Executor::run_until`] step on.
    pub(crate) fn spawn(&self, task: impl Future<Output = ()> + 'static) {
        self.inner.borrow_mut().spawned.push(Box::pin(task));
    }

    /// Tasks not finished.
    pub(crate) fn live(&self) -> usize {
        let s = self.inner.borrow();
        s.live + s.spawned.len()
    }

    fn admit(&self) {
        let mut s = self.inner.borrow_mut();
        let spawned = std::mem::take(&mut s.spawned);
        for task in spawned {
            let slot = s.free.pop().unwrap_or(s.tasks.len());
            if slot == s.tasks.len() {
                s.tasks.push(None);
                s.wakers.push(Waker::from(Arc::new(TaskWaker {
                    slot,
                    queue: self.queue.clone(),
                })));
            }
            s.tasks[slot] = Some(task);
            s.live += 1;
            if let Ok(mut q) = self.queue.0.lock() {
                q.push(slot);
            }
        }
    }

    /// Polls every woken task until none is left, without moving the clock;
    /// `None` once `budget` polls are spent.
    fn settle(&self, budget: &mut u64) -> Option<()> {
        // The woken slots of one round, swapped with the queue's.
        let mut ready = Vec::new();
        loop {
            self.admit();
            match self.queue.0.lock() {
                Ok(mut q) => std::mem::swap(&mut *q, &mut ready),
                Err(_) => return None,
            }
            if ready.is_empty() {
                return Some(());
            }
            for slot in ready.drain(..) {
                *budget = budget.checked_sub(1)?;
                // The task is taken out of its slot while polled: it may
                // spawn others, which touches the slots.
                let (task, waker) = {
                    let mut s = self.inner.borrow_mut();
                    let task = s.tasks.get_mut(slot).and_then(Option::take);
                    (task, s.wakers.get(slot).cloned())
                };
                let (Some(mut task), Some(waker)) = (task, waker) else {
                    continue; // a stale wake of a finished task
                };
                let done = task
                    .as_mut()
                    .poll(&mut Context::from_waker(&waker))
                    .is_ready();
                let mut s = self.inner.borrow_mut();
                if done {
                    s.free.push(slot);
                    s.live -= 1;
                } else {
                    s.tasks[slot] = Some(task);
                }
            }
        }
    }

    /// Runs tasks, moving the clock from timer to timer, until `stop` (a
    /// moment the caller has something to do at) or until no timer is left.
    /// Returns the clock's reading, or `None` when `budget` polls ran out
    /// (a runaway scenario).
    pub(crate) fn run_until(&self, stop: UnixMillis, budget: &mut u64) -> Option<UnixMillis> {
        loop {
            self.settle(budget)?;
            match self.clock.next() {
                Some(at) if at <= stop => self.clock.advance(at),
                _ => {
                    if self.clock.now() < stop {
                        self.clock.advance(stop);
                    }
                    self.settle(budget)?;
                    return Some(self.clock.now());
                }
            }
        }
    }

    /// The next timer's moment.
    pub(crate) fn next_timer(&self) -> Option<UnixMillis> {
        self.clock.next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn tasks_wait_on_virtual_time_and_the_clock_jumps_between_timers() {
        let clock = Clock::default();
        let ex = Executor::new(clock.clone());
        let log = Rc::new(RefCell::new(Vec::new()));
        for (name, at) in [("b", 300), ("a", 100), ("c", 300)] {
            let (clock, log) = (clock.clone(), log.clone());
            ex.spawn(async move {
                clock.at(at).await;
                log.borrow_mut().push((name, clock.now()));
            });
        }
        let mut budget = 100;
        assert_eq!(ex.run_until(200, &mut budget), Some(200));
        assert_eq!(*log.borrow(), [("a", 100)]);
        assert_eq!(ex.run_until(1_000, &mut budget), Some(1_000));
        assert_eq!(*log.borrow(), [("a", 100), ("b", 300), ("c", 300)]);
        assert_eq!(ex.live(), 0);
        assert_eq!(ex.next_timer(), None);
    }

    #[test]
    fn a_runaway_task_stops_at_the_poll_budget() {
        let clock = Clock::default();
        let ex = Executor::new(clock);
        let polls = Rc::new(Cell::new(0));
        let p = polls.clone();
        ex.spawn(std::future::poll_fn(move |cx| {
            p.set(p.get() + 1);
            cx.waker().wake_by_ref();
            Poll::<()>::Pending
        }));
        assert_eq!(ex.run_until(10, &mut 50), None);
        assert_eq!(polls.get(), 50);
    }
}
