//! Hedged streams (docs/design.md, "Hedged requests"): until its commit
//! point a stream is one more request, so it is hedged like a whole answer.
//! When the stream has handed nothing to the caller by the hedge delay, the
//! same request goes to the next entry as a second stream (a *rival*) over
//! the entries from there on, and the stream being raced stops before them.
//! The first stream to reach its commit point (its first item) wins and
//! becomes the stream; the others are dropped, which aborts their upstream
//! fetches (the platform's contract) and gives their permits back without a
//! verdict. Their attempt in flight is recorded as `cancelled`, with any
//! tokens it reported (they count in cost). A rival that fails is out of
//! the race; a request the provider rejects ends it. The route's budget and
//! `x-hedge: off` / [`CallOptions::no_hedge`](crate::CallOptions) apply as
//! for whole answers.
//!
//! The race runs inside one [`ChatStream::next_item`]; the gateway and the
//! npm package await that call to its end. Dropped half-way it drops the
//! rivals too, and the stream goes on alone.

use std::cell::RefCell;
use std::ops::Deref;
use std::rc::Rc;

use super::{ChatStream, StreamItem};
use crate::engine::core::Client;
use crate::engine::cursor::{Cursor, Reach};
use crate::engine::hedge::{first_of, HedgePolicy, Leg, Woke};
use crate::engine::store::BreakerStore;
use crate::error::{Attempt, Error};
use crate::platform::{Platform, UnixMillis};

type Item = Option<Result<StreamItem, Error>>;
/// One hedge's stream, shared with the future that drives it (borrowed
/// only inside it; read once it is done or dropped).
type Rival<C, P, S> = Rc<RefCell<ChatStream<C, P, S>>>;

/// How the race ended.
enum End {
    /// The leg reached its commit point first, with its first item.
    Won(Option<usize>, StreamItem),
    /// The call ends: a leg's request was rejected, or every leg failed.
    Failed(Error),
    /// Every leg ended without an item or an error.
    Ended,
}

/// What a rival needs of the stream it races.
struct Template<C> {
    client: C,
    req: crate::chat::ChatRequest,
    pass: Option<crate::chat::Dialect>,
    timers: Option<super::IdleTimers>,
}

/// Runs `this` hedged under `policy` of `route` up to the first stream's
/// commit point; that stream's first item, or the call's error.
pub(super) async fn race<'a, C, P, S>(
    this: &'a mut ChatStream<C, P, S>,
    (route, policy): (String, HedgePolicy),
) -> Item
where
    C: Deref<Target = Client<P, S>> + Clone + 'a,
    P: Platform + 'a,
    S: BreakerStore + 'a,
{
    let owner = this.client.clone();
    let client = &owner.core;
    client.deposit_hedge(&route, &policy);
    // The record the winner keeps books every leg's attempts, once.
    let mut holder = this.walk.run.fork();
    this.walk.run.hand_booking(&mut holder);
    let routes: Cursor<'static> = this.walk.hedge(0);
    let template = Template {
        client: this.client.clone(),
        req: this.req.clone(),
        pass: this.pass,
        timers: this.timers.clone(),
    };
    let mut newest: (Option<usize>, Rc<Reach>) = (None, this.walk.reach());
    let mut timer = routes
        .current()
        .and_then(|e| client.hedge_delay(&policy, e, true))
        .map(|d| Box::pin(client.platform.sleep(d)));
    let mut rivals: Vec<Rival<C, P, S>> = Vec::new();
    let mut collected: Vec<Attempt> = Vec::new();
    let mut extra = 0;
    let end = {
        // Leg 0 is the stream raced, leg `i + 1` the rival `i`.
        let mut legs: Vec<Option<Leg<'_, Item>>> = vec![Some(Box::pin(this.advance()))];
        let mut last: Option<Error> = None;
        loop {
            match first_of(&mut legs, |l| l, &mut timer).await {
                Woke::Hedge => {
                    timer = None;
                    let live = legs[newest.0.map_or(0, |i| i + 1)].is_some();
                    let next = newest.1.at.get() + 1;
                    let Some(entry) = routes.entry_at(next).filter(|_| live) else {
                        continue; // nothing to hedge to, or no one to hedge
                    };
                    if extra >= policy.max_extra
                        || !client.take_hedge(&route, &policy, client.platform.now())
                    {
                        continue;
                    }
                    extra += 1;
                    // The leg hedged stops before the entries the rival asks.
                    newest.1.end.set(next);
                    let mut walk = routes.hedge(next);
                    let reach = walk.reach();
                    let stream = Rc::new(RefCell::new(template.rival(walk)));
                    let shared = Rc::clone(&stream);
                    // Borrowed only inside this future: read after it ends
                    // or is dropped.
                    #[allow(clippy::await_holding_refcell_ref)]
                    let leg: Leg<'a, Item> =
                        Box::pin(async move { shared.borrow_mut().advance().await });
                    legs.push(Some(leg));
                    rivals.push(stream);
                    newest = (Some(rivals.len() - 1), reach);
                    if extra < policy.max_extra {
                        timer = client
                            .hedge_delay(&policy, entry, true)
                            .map(|d| Box::pin(client.platform.sleep(d)));
                    }
                }
                Woke::Done(leg, item) => {
                    let who = leg.checked_sub(1);
                    match item {
                        Some(Ok(item)) => break End::Won(who, item),
                        Some(Err(e)) if matches!(e, Error::Rejected { .. }) => {
                            break End::Failed(e)
                        }
                        Some(Err(mut e)) => {
                            collected.append(&mut attempts_of(&mut e));
                            last = Some(e);
                        }
                        None => {}
                    }
                    if legs.iter().all(Option::is_none) {
                        break last.map_or(End::Ended, End::Failed);
                    }
                }
            }
        }
    };
    // The race is over: every leg still running is dropped (its fetch
    // aborted), and what it was doing recorded as cancelled.
    let now = client.platform.now();
    let winner = match &end {
        End::Won(Some(i), _) => Some(*i),
        _ => None,
    };
    for (i, r) in rivals.iter().enumerate() {
        if Some(i) != winner {
            collected.append(&mut r.borrow_mut().cancel(now));
        }
    }
    if !matches!(end, End::Won(None, _)) {
        collected.append(&mut this.cancel(now));
    }
    if let Some(i) = winner {
        if let Some(r) = rivals.get(i) {
            // The rival is the stream from now on.
            std::mem::swap(this, &mut *r.borrow_mut());
        }
    }
    drop(rivals);
    match end {
        End::Won(_, item) => {
            // The rest of the route is the winner's again, to continue on
            // after its commit point.
            this.walk.reach().end.set(usize::MAX);
            let run = &mut this.walk.run;
            run.attempts.append(&mut collected);
            run.attempts.sort_by_key(|a| a.started_at);
            holder.hand_booking(run);
            Some(Ok(item))
        }
        End::Failed(mut e) => {
            collected.append(&mut attempts_of(&mut e));
            collected.sort_by_key(|a| a.started_at);
            holder.attempts = collected;
            put_attempts(&mut e, holder.take_attempts());
            this.done = true;
            Some(Err(e))
        }
        End::Ended => {
            holder.attempts = collected;
            drop(holder.take_attempts());
            this.done = true;
            None
        }
    }
}

impl<C: Clone> Template<C> {
    /// A fresh stream of the same request over `walk`.
    fn rival<P, S>(&self, walk: Cursor<'static>) -> ChatStream<C, P, S>
    where
        C: Deref<Target = Client<P, S>>,
        P: Platform,
        S: BreakerStore,
    {
        ChatStream::fresh(
            self.client.clone(),
            self.req.clone(),
            walk,
            self.pass,
            self.timers.clone(),
            None,
        )
    }
}

impl<C, P, S> ChatStream<C, P, S>
where
    C: Deref<Target = Client<P, S>> + Clone,
    P: Platform,
    S: BreakerStore,
{
    /// Ends a stream that lost the race: its attempt in flight (request
    /// out, or body open) is recorded as cancelled with what it reported,
    /// its body dropped (the fetch aborted) and its permit given back
    /// without a verdict. Its attempts, taken.
    fn cancel(&mut self, now: UnixMillis) -> Vec<Attempt> {
        let in_flight = match (&self.conn, self.walk.run.in_flight.take()) {
            (Some(conn), _) => Some(((self.held.number, conn.started, conn.span), conn.usage)),
            (None, Some(in_flight)) => Some((in_flight, None)),
            (None, None) => None,
        };
        self.conn = None;
        if let (Some((in_flight, usage)), Some(_)) = (in_flight, self.walk.current()) {
            let (entry, run) = self.walk.entry_and_run();
            run.cancelled(&entry, in_flight, now).usage = usage;
        }
        self.release_permit();
        self.done = true;
        std::mem::take(&mut self.walk.run.attempts)
    }
}

/// The attempts an error carries, taken out of it.
fn attempts_of(e: &mut Error) -> Vec<Attempt> {
    match e {
        Error::AllProvidersFailed(x) => std::mem::take(&mut x.attempts),
        Error::Rejected { attempts, .. }
        | Error::Interrupted { attempts, .. }
        | Error::NoValidAnswer { attempts } => std::mem::take(attempts),
        _ => Vec::new(),
    }
}

/// Gives an error every leg's attempts.
fn put_attempts(e: &mut Error, all: Vec<Attempt>) {
    match e {
        Error::AllProvidersFailed(x) => x.attempts = all,
        Error::Rejected { attempts, .. }
        | Error::Interrupted { attempts, .. }
        | Error::NoValidAnswer { attempts } => *attempts = all,
        _ => {}
    }
}
