//! The simulated Durable Objects of a fleet: one owner per model (the real
//! [`Fleet`] logic) and, when the policy relays, one [`Relay`] per data
//! centre and model (the real relay logic). Each object is one server: a
//! call waits for the calls before it, then takes `serviceMs` of virtual
//! time. Each call travels its whole round trip before the object acts and
//! its answer is back when the object is done; an answer held open (a
//! watch) travels back half a round trip.
//!
//! What the fleet does is measured here: every object's load and queue, how
//! late each breaker transition reaches each isolate, decisions made on an
//! outdated view, and whether a second probe was ever granted.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use super::exec::{Clock, Executor};
use super::report::ObjectLoad;
use super::scenario::FleetModel;
use crate::engine::key::provider_of;
use crate::fleet::{Batch, Fleet, FleetPolicy, Inbox, LeaseAnswer, Relay, View, HEARTBEAT};
use crate::platform::{millis, UnixMillis};
use crate::policy::breaker::BreakerPolicy;
use crate::policy::latency::DemotionPolicy;

/// One object's single thread: calls queue for it.
pub(crate) struct Server {
    service_ms: f64,
    free_at: f64,
    pub(crate) calls: u64,
    /// Calls that arrived in each second.
    per_sec: Vec<u32>,
    /// Each call's wait before its turn, in µs.
    waits_us: Vec<u32>,
}

impl Server {
    fn new(service_ms: f64) -> Self {
        Server {
            service_ms,
            free_at: 0.0,
            calls: 0,
            per_sec: Vec::new(),
            waits_us: Vec::new(),
        }
    }

    /// A call that arrives at `at`: when the object has done it.
    fn admit(&mut self, at: UnixMillis) -> UnixMillis {
        self.calls += 1;
        let s = usize::try_from(at / 1000).unwrap_or(usize::MAX);
        if self.per_sec.len() <= s {
            self.per_sec.resize(s + 1, 0);
        }
        self.per_sec[s] += 1;
        let start = self.free_at.max(at as f64);
        self.waits_us
            .push(((start - at as f64) * 1000.0).min(f64::from(u32::MAX)) as u32);
        self.work(at)
    }

    /// Work that is no new call (answering a held watch): when done.
    fn work(&mut self, at: UnixMillis) -> UnixMillis {
        self.free_at = self.free_at.max(at as f64) + self.service_ms;
        self.free_at.ceil() as UnixMillis
    }

    /// Its load over the run.
    pub(crate) fn load(&self) -> ObjectLoad {
        let mut waits = self.waits_us.clone();
        waits.sort_unstable();
        let at = |p: f64| {
            let rank = ((p / 100.0) * waits.len() as f64).ceil() as usize;
            waits
                .get(rank.clamp(1, waits.len().max(1)) - 1)
                .map_or(0.0, |us| f64::from(*us) / 1000.0)
        };
        ObjectLoad {
            calls: self.calls,
            peak_per_sec: self.per_sec.iter().copied().max().unwrap_or(0),
            wait_ms: [
                at(50.0),
                at(99.0),
                waits.last().map_or(0.0, |us| f64::from(*us) / 1000.0),
            ],
            per_sec: self.per_sec.clone(),
        }
    }
}

/// A model's owner object.
struct Owner {
    fleet: Fleet,
    server: Server,
    policy: BreakerPolicy,
    /// Watches held open (their number, the relay's): each transition
    /// writes them a view.
    parked: Vec<(u64, usize)>,
    /// Transitions: the generation reached, and when.
    transitions: Vec<(u64, UnixMillis)>,
    second_probes: u64,
}

/// A data centre's relay of one model.
struct RelayObject {
    relay: Relay,
    server: Server,
    key: String,
    watching: bool,
    /// Isolates whose refresh waits for the relay's first view.
    waiting: Vec<(usize, Inbox)>,
}

/// Every object of a run, and what is measured of them.
pub(crate) struct Objects {
    pub(crate) model: FleetModel,
    pub(crate) relayed: bool,
    clock: Clock,
    ex: Executor,
    isolates: usize,
    default_policy: BreakerPolicy,
    policies: BTreeMap<String, BreakerPolicy>,
    lease_ttl: Duration,
    owners: RefCell<BTreeMap<String, Owner>>,
    relays: RefCell<Vec<RelayObject>>,
    relay_ids: RefCell<BTreeMap<(usize, String), usize>>,
    /// Per model: the newest generation each isolate was told of.
    seen: RefCell<BTreeMap<String, Vec<Option<u64>>>>,
    /// Per model and transition: how long it took to reach each isolate.
    lags: RefCell<BTreeMap<String, Vec<Vec<u32>>>>,
    seq: Cell<u64>,
    /// Spreads how long owners hold watches.
    spread: RefCell<fastrand::Rng>,
    /// When each isolate last started a request.
    last_request: RefCell<Vec<UnixMillis>>,
    pub(crate) decisions: Cell<u64>,
    /// Views handed to isolates within their call's time limit.
    pub(crate) views_delivered: Cell<u64>,
    pub(crate) outdated: Cell<u64>,
}

impl Objects {
    pub(crate) fn new(
        model: FleetModel,
        relayed: bool,
        (clock, ex): (Clock, Executor),
        isolates: usize,
        default_policy: BreakerPolicy,
        policies: &[(String, BreakerPolicy)],
    ) -> Self {
        Objects {
            model,
            relayed,
            clock,
            ex,
            isolates,
            default_policy,
            policies: policies.iter().cloned().collect(),
            lease_ttl: FleetPolicy::default().lease_ttl,
            owners: RefCell::default(),
            relays: RefCell::default(),
            relay_ids: RefCell::default(),
            seen: RefCell::default(),
            lags: RefCell::default(),
            seq: Cell::new(0),
            spread: RefCell::new(fastrand::Rng::with_seed(0x5EED_0B1E)),
            last_request: RefCell::new(vec![0; isolates]),
            decisions: Cell::new(0),
            views_delivered: Cell::new(0),
            outdated: Cell::new(0),
        }
    }

    pub(crate) fn clock(&self) -> &Clock {
        &self.clock
    }

    fn policy_of(&self, key: &str) -> BreakerPolicy {
        self.policies
            .get(key)
            .or_else(|| self.policies.get(provider_of(key)))
            .copied()
            .unwrap_or(self.default_policy)
    }

    fn with_owner<T>(&self, key: &str, f: impl FnOnce(&mut Owner) -> T) -> T {
        let mut owners = self.owners.borrow_mut();
        if !owners.contains_key(key) {
            let owner = Owner {
                fleet: Fleet::new(),
                server: Server::new(self.model.service_ms),
                policy: self.policy_of(key),
                parked: Vec::new(),
                transitions: Vec::new(),
                second_probes: 0,
            };
            owners.insert(key.to_owned(), owner);
        }
        f(owners.get_mut(key).expect("inserted above"))
    }

    /// A call to `key`'s owner sent now: waits its round trip and its turn,
    /// then runs `op` on the fleet breaker. A transition it makes is
    /// recorded and answers every watch held open.
    pub(crate) async fn at_owner<T>(
        self: &Rc<Self>,
        key: &str,
        op: impl FnOnce(&mut Fleet, &BreakerPolicy, UnixMillis, Duration) -> T,
    ) -> T {
        let arrives = self.clock.now() + self.model.round_trip_ms;
        self.clock.at(arrives).await;
        let done = self.with_owner(key, |o| o.server.admit(arrives));
        self.clock.at(done).await;
        self.run_owner(key, op)
    }

    fn run_owner<T>(
        self: &Rc<Self>,
        key: &str,
        op: impl FnOnce(&mut Fleet, &BreakerPolicy, UnixMillis, Duration) -> T,
    ) -> T {
        let now = self.clock.now();
        let ttl = self.lease_ttl;
        let (out, woken) = self.with_owner(key, |o| {
            let before = o.fleet.breaker.generation;
            let out = op(&mut o.fleet, &o.policy, now, ttl);
            let after = o.fleet.breaker.generation;
            if after == before {
                return (out, Vec::new());
            }
            o.transitions.push((after, now));
            let view = o.fleet.view(&o.policy, now);
            let woken: Vec<(usize, View)> = o.parked.iter().map(|(_, r)| (*r, view)).collect();
            (out, woken)
        });
        for (relay, view) in woken {
            self.push(key, relay, view);
        }
        out
    }

    /// The owner writes `view` on `relay`'s open watch: its thread's work,
    /// then half a round trip.
    fn push(self: &Rc<Self>, key: &str, relay: usize, view: View) {
        let now = self.clock.now();
        let done = self.with_owner(key, |o| o.server.work(now));
        let arrives = done + self.model.round_trip_ms / 2;
        let this = self.clone();
        self.ex.spawn(async move {
            this.clock.at(arrives).await;
            this.relay_heard(relay, view, true);
        });
    }

    /// Folds a batch at the owner (the lease verdicts it carries end the
    /// lease the probe check follows).
    pub(crate) async fn report_to_owner(self: &Rc<Self>, key: &str, batch: Batch) -> View {
        self.at_owner(key, move |f, p, now, _| {
            f.report(p, &DemotionPolicy::default(), now, &batch)
        })
        .await
    }

    /// Asks the owner for the probe lease for `holder`.
    pub(crate) async fn lease_at_owner(self: &Rc<Self>, key: &str, holder: &str) -> LeaseAnswer {
        let answer = self
            .at_owner(key, |f, p, now, ttl| f.lease(p, ttl, now, holder))
            .await;
        if let LeaseAnswer::Granted { token, .. } = answer {
            // The object keeps every lease out (lapsed ones given back before
            // it grants): another beside this one is a second probe.
            self.with_owner(key, |o| {
                if o.fleet.leases.iter().any(|l| l.token != token) {
                    o.second_probes += 1;
                }
            });
        }
        answer
    }

    // ------------------------------------------------------------ relays

    fn relay_of(&self, isolate: usize, key: &str) -> usize {
        let dc = isolate % self.model.data_centres.max(1) as usize;
        let mut ids = self.relay_ids.borrow_mut();
        if let Some(id) = ids.get(&(dc, key.to_owned())) {
            return *id;
        }
        let mut relays = self.relays.borrow_mut();
        let share = self.spread.borrow_mut().f64();
        relays.push(RelayObject {
            relay: Relay::new().stagger(share),
            server: Server::new(self.model.service_ms),
            key: key.to_owned(),
            watching: false,
            waiting: Vec::new(),
        });
        ids.insert((dc, key.to_owned()), relays.len() - 1);
        relays.len() - 1
    }

    /// A call from `isolate` to its data centre's relay of `key`, sent now:
    /// waits its round trip and its turn; then `op` runs on the relay.
    pub(crate) async fn at_relay<T>(
        self: &Rc<Self>,
        isolate: usize,
        key: &str,
        op: impl FnOnce(&mut Relay, UnixMillis) -> T,
    ) -> (usize, T) {
        let id = self.relay_of(isolate, key);
        let arrives = self.clock.now() + self.model.nearby_round_trip_ms;
        self.clock.at(arrives).await;
        let done = self.relays.borrow_mut()[id].server.admit(arrives);
        self.clock.at(done).await;
        let now = self.clock.now();
        let out = op(&mut self.relays.borrow_mut()[id].relay, now);
        self.watch(id);
        (id, out)
    }

    /// Gives `inbox` the relay's view, or has it wait for the first.
    pub(crate) fn answer_from(&self, id: usize, view: Option<View>, isolate: usize, inbox: Inbox) {
        match view {
            Some(v) => {
                let key = self.relays.borrow()[id].key.clone();
                self.deliver(isolate, &key, v, &inbox);
            }
            None => self.relays.borrow_mut()[id].waiting.push((isolate, inbox)),
        }
    }

    /// Relay `id`'s model, and what it gathered for the owner.
    fn gathered(&self, id: usize) -> (String, Batch) {
        let mut relays = self.relays.borrow_mut();
        let r = &mut relays[id];
        (r.key.clone(), r.relay.take())
    }

    /// Sends what the relay gathered to its owner now, and again while
    /// what gathers meanwhile is urgent.
    pub(crate) fn pass_on(self: &Rc<Self>, id: usize) {
        let this = self.clone();
        self.ex.spawn(async move {
            loop {
                let (key, batch) = this.gathered(id);
                let view = this.report_to_owner(&key, batch).await;
                let now = this.clock.now();
                let again = this.relays.borrow_mut()[id].relay.passed(Some(view), now);
                this.flush_waiting(id);
                if !again {
                    return;
                }
            }
        });
    }

    /// The relay's lease question, asked of its owner for `holder`.
    pub(crate) async fn ask_owner(self: &Rc<Self>, id: usize, holder: &str) -> LeaseAnswer {
        let key = self.relays.borrow()[id].key.clone();
        let answer = self.lease_at_owner(&key, holder).await;
        let now = self.clock.now();
        self.relays.borrow_mut()[id]
            .relay
            .leased(holder, &answer, now);
        self.flush_waiting(id);
        answer
    }

    /// Keeps a watch open on the owner while the relay's isolates call it.
    fn watch(self: &Rc<Self>, id: usize) {
        {
            let mut relays = self.relays.borrow_mut();
            if relays[id].watching {
                return;
            }
            relays[id].watching = true;
        }
        let this = self.clone();
        self.ex.spawn(async move {
            loop {
                let (key, batch) = this.gathered(id);
                this.watch_once(id, &key, batch).await;
                let now = this.clock.now();
                let mut relays = this.relays.borrow_mut();
                if !relays[id].relay.wants_watch(now) {
                    relays[id].watching = false;
                    return;
                }
            }
        });
    }

    /// One watch: the owner folds the batch and writes the view at once,
    /// then holds the call open for about a heartbeat (spread, so that
    /// relays do not call in step), writing the view again on each
    /// transition. Returns when the owner ends it.
    async fn watch_once(self: &Rc<Self>, id: usize, key: &str, batch: Batch) {
        let view = self.report_to_owner(key, batch).await;
        let seq = self.seq.get() + 1;
        self.seq.set(seq);
        // The owner answers with how many relays watch it, this one among
        // them.
        let relays = self.with_owner(key, |o| {
            o.parked.push((seq, id));
            o.parked.len() as u32
        });
        self.relays.borrow_mut()[id].relay.watched_by(relays);
        self.relay_heard(id, view, true);
        let spread = self.spread.borrow_mut().u64(0..millis(HEARTBEAT) / 4);
        let ends = self.clock.now() + millis(HEARTBEAT) - spread;
        self.clock.at(ends).await;
        self.with_owner(key, |o| o.parked.retain(|(s, _)| *s != seq));
    }

    fn relay_heard(&self, id: usize, view: View, watched: bool) {
        let now = self.clock.now();
        self.relays.borrow_mut()[id].relay.apply(view, now, watched);
        self.flush_waiting(id);
    }

    fn flush_waiting(&self, id: usize) {
        let now = self.clock.now();
        let (key, view, waiting) = {
            let mut relays = self.relays.borrow_mut();
            let r = &mut relays[id];
            let Some(view) = r.relay.current(now) else {
                return;
            };
            (r.key.clone(), view, std::mem::take(&mut r.waiting))
        };
        for (isolate, inbox) in waiting {
            self.deliver(isolate, &key, view, &inbox);
        }
    }

    // ------------------------------------------------------ measurements

    /// Hands `view` to `isolate`'s store, noting which transitions it
    /// brings the isolate and how late.
    pub(crate) fn deliver(&self, isolate: usize, key: &str, view: View, inbox: &Inbox) {
        self.told(isolate, key, view.generation);
        inbox.deliver(key, view);
    }

    /// Notes that `isolate` now knows of `generation` of `key`.
    pub(crate) fn told(&self, isolate: usize, key: &str, generation: u64) {
        self.views_delivered.set(self.views_delivered.get() + 1);
        let now = self.clock.now();
        let mut seen = self.seen.borrow_mut();
        let slots = seen
            .entry(key.to_owned())
            .or_insert_with(|| vec![None; self.isolates]);
        let Some(slot) = slots.get_mut(isolate) else {
            return;
        };
        let last = *slot;
        if last.is_some_and(|l| generation <= l) {
            return;
        }
        *slot = Some(generation);
        let Some(last) = last else {
            return; // its first view: the baseline
        };
        let owners = self.owners.borrow();
        let Some(owner) = owners.get(key) else {
            return;
        };
        let mut lags = self.lags.borrow_mut();
        let lags = lags.entry(key.to_owned()).or_default();
        for (i, (g, at)) in owner.transitions.iter().enumerate() {
            if last < *g && *g <= generation {
                if lags.len() <= i {
                    lags.resize_with(i + 1, Vec::new);
                }
                lags[i].push(u32::try_from(now.saturating_sub(*at)).unwrap_or(u32::MAX));
            }
        }
    }

    /// Counts a decision about to be made by `isolate`, whose views are
    /// `view_of`; outdated when any is behind its owner.
    pub(crate) fn decide(&self, isolate: usize, view_of: impl Fn(&str) -> Option<View>) {
        self.decisions.set(self.decisions.get() + 1);
        if let Some(t) = self.last_request.borrow_mut().get_mut(isolate) {
            *t = self.clock.now();
        }
        let owners = self.owners.borrow();
        let behind = owners.iter().any(|(key, o)| {
            view_of(key).is_some_and(|v| v.generation < o.fleet.breaker.generation)
        });
        if behind {
            self.outdated.set(self.outdated.get() + 1);
        }
    }

    /// The busiest owner's load.
    pub(crate) fn owner_load(&self) -> Option<ObjectLoad> {
        busiest(self.owners.borrow().values().map(|o| o.server.load()))
    }

    /// The busiest relay's load, and how many relays there were.
    pub(crate) fn relay_load(&self) -> (Option<ObjectLoad>, usize) {
        let relays = self.relays.borrow();
        (
            busiest(relays.iter().map(|r| r.server.load())),
            relays.len(),
        )
    }

    /// Probe leases granted while another was out.
    pub(crate) fn second_probes(&self) -> u64 {
        self.owners.borrow().values().map(|o| o.second_probes).sum()
    }

    /// Per transition: its model, when, and how long it took to reach each
    /// isolate that held an older view (`None`: one that it never reached
    /// and that started a request after it).
    pub(crate) fn transition_lags(&self) -> Vec<(String, UnixMillis, Vec<Option<u32>>)> {
        let owners = self.owners.borrow();
        let lags = self.lags.borrow();
        let seen = self.seen.borrow();
        let mut out = Vec::new();
        for (key, owner) in owners.iter() {
            for (i, (g, at)) in owner.transitions.iter().enumerate() {
                let mut reached: Vec<Option<u32>> = lags
                    .get(key)
                    .and_then(|l| l.get(i))
                    .map(|l| l.iter().copied().map(Some).collect())
                    .unwrap_or_default();
                // Isolates with a view from before it that never heard of it.
                let last_request = self.last_request.borrow();
                let never = seen.get(key).map_or(0, |s| {
                    s.iter()
                        .zip(last_request.iter())
                        .filter(|(l, r)| l.is_some_and(|l| l < *g) && **r > *at)
                        .count()
                });
                reached.extend(std::iter::repeat_n(None, never));
                out.push((key.clone(), *at, reached));
            }
        }
        out.sort_by_key(|(_, at, _)| *at);
        out
    }
}

fn busiest(loads: impl Iterator<Item = ObjectLoad>) -> Option<ObjectLoad> {
    loads.max_by_key(|l| (l.peak_per_sec, l.calls))
}
