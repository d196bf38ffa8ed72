//! The gateway's named clients (`gateway.clients`): what each may use,
//! what it used, and the [`Ticket`] an admitted request holds until it
//! ends.
//!
//! A request is admitted ([`crate::policy::tenant::admit`]) against the
//! client's counts here plus, with a [`ClientLedger`] (the Worker's client
//! objects), what it used through the other isolates as last seen, with
//! its tokens estimated (its text, and its `max_tokens` or 4,096 for the
//! answer). It holds that estimate until it ends; then the usage its
//! providers reported replaces the estimate and what it cost is added to
//! the day's spend. Each change to a limited client's count here is
//! noted to the ledger, which shares it in the background.

use std::cell::{Cell, OnceCell, RefCell};
use std::collections::BTreeSet;
use std::rc::Rc;
use std::sync::Arc;

use crate::chat::Usage;
use crate::config::clients::{ClientSpec, DEFAULT_CLIENT};
use crate::error::Attempt;
use crate::fleet::ClientLedger;
use crate::platform::UnixMillis;
use crate::policy::fair::Share;
use crate::policy::price::Cost;
use crate::policy::shed::Priority;
use crate::policy::tenant::{ClientLimits, Refusal, Used};

/// One named client.
#[derive(Debug)]
pub(crate) struct Tenant {
    /// Its name, as logs and metrics give it.
    pub(crate) name: Arc<str>,
    /// The routes it may name; `None`: any.
    routes: Option<BTreeSet<String>>,
    pub(crate) limits: ClientLimits,
    /// Its priority class: the highest its requests may have.
    pub(crate) priority: Priority,
    /// Its key and weight for fair shares within its class (its index
    /// among the clients, set by [`Tenants::new`]).
    pub(crate) share: Share,
    /// What it used, as this isolate counted.
    pub(crate) used: RefCell<Used>,
    /// What it asked and used since this isolate started.
    pub(crate) totals: Totals,
    /// Where its counts are shared with the other isolates (only a client
    /// with limits has one).
    fleet: Shared,
}

/// A client's [`ClientLedger`], once set.
#[derive(Default)]
struct Shared(OnceCell<Rc<dyn ClientLedger>>);

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "fleet"
        } else {
            "local"
        })
    }
}

/// A client's totals since the isolate started.
#[derive(Debug, Default)]
pub(crate) struct Totals {
    /// Requests admitted.
    pub(crate) admitted: Cell<u64>,
    /// Requests refused, by [`Refusal::ALL`]'s order, then a route it may
    /// not use, then shed.
    pub(crate) refused: [Cell<u64>; 6],
    /// Tokens its providers reported.
    pub(crate) tokens: Cell<u64>,
    /// What its requests cost.
    pub(crate) spend: Cell<Cost>,
}

/// The index of [`Totals::refused`] counting a route a client may not use.
pub(crate) const ROUTE_REFUSED: usize = 4;

/// The index of [`Totals::refused`] counting requests shed.
pub(crate) const SHED_REFUSED: usize = 5;

/// A refusal's name and its index in [`Totals::refused`].
pub(crate) fn refusal_index(r: Refusal) -> usize {
    Refusal::ALL.iter().position(|x| *x == r).unwrap_or(0)
}

/// The reasons [`Totals::refused`] counts, in its order.
pub(crate) const REFUSED_NAMES: [&str; 6] =
    ["in_flight", "spend", "requests", "tokens", "route", "shed"];

impl Tenant {
    /// A client without limits that may use every route.
    pub(crate) fn unlimited(name: &str) -> Tenant {
        Tenant::of(&ClientSpec {
            name: name.to_string(),
            keys_env: Vec::new(),
            routes: None,
            limits: ClientLimits::default(),
            priority: Priority::default(),
            weight: 1,
        })
    }

    pub(crate) fn of(spec: &ClientSpec) -> Tenant {
        Tenant {
            name: spec.name.as_str().into(),
            routes: spec.routes.clone(),
            limits: spec.limits,
            priority: spec.priority,
            share: Share {
                key: 0,
                weight: spec.weight,
            },
            used: RefCell::default(),
            totals: Totals::default(),
            fleet: Shared::default(),
        }
    }

    /// Whether it has a limit to judge.
    pub(crate) fn is_limited(&self) -> bool {
        self.limits != ClientLimits::default()
    }

    /// Shares its counts through `ledger`, when it has limits to judge.
    pub(crate) fn share_through(&self, ledger: &Rc<dyn ClientLedger>) {
        if self.is_limited() {
            let _ = self.fleet.0.set(Rc::clone(ledger));
        }
    }

    /// What it used as of `now`: here, and through the other isolates as
    /// last seen.
    pub(crate) fn judged(&self, now: UnixMillis) -> Used {
        let mine = *self.used.borrow();
        match self.fleet.0.get().and_then(|f| f.others(&self.name, now)) {
            Some(others) => mine.plus(&others, now),
            None => mine,
        }
    }

    /// Notes its count here at `now` to the ledger, which sends it when due.
    pub(crate) fn share(&self, now: UnixMillis) {
        if let Some(fleet) = self.fleet.0.get() {
            fleet.report(&self.name, now, &self.used.borrow());
        }
    }

    /// Whether it may name `route` (a route's name, or `provider/model`).
    pub(crate) fn may_use(&self, route: &str) -> bool {
        self.routes.as_ref().is_none_or(|r| r.contains(route))
    }

    /// The routes it may name, when it may not name every one.
    pub(crate) fn routes(&self) -> Option<&BTreeSet<String>> {
        self.routes.as_ref()
    }

    /// Counts a refusal at `index` of [`Totals::refused`].
    pub(crate) fn count_refusal(&self, index: usize) {
        if let Some(c) = self.totals.refused.get(index) {
            c.set(c.get() + 1);
        }
    }
}

/// The clients, by the index [`super::Auth`] finds a key's client at.
#[derive(Debug, Clone)]
pub(crate) struct Tenants(pub(crate) Vec<Rc<Tenant>>);

impl Default for Tenants {
    /// The one client every key of [`super::Auth::keys`] is.
    fn default() -> Self {
        Tenants(vec![Rc::new(Tenant::unlimited(DEFAULT_CLIENT))])
    }
}

impl Tenants {
    /// `all`, each keyed by its place for fair shares.
    pub(crate) fn new(all: impl IntoIterator<Item = Tenant>) -> Tenants {
        let all = all.into_iter().enumerate().map(|(i, mut t)| {
            t.share.key = u32::try_from(i).unwrap_or(u32::MAX);
            Rc::new(t)
        });
        Tenants(all.collect())
    }

    /// The client at `index`.
    pub(crate) fn get(&self, index: usize) -> Option<&Rc<Tenant>> {
        self.0.get(index)
    }
}

/// An admitted request's hold on its client: one request in flight and
/// its estimated tokens, until [`Ticket::settle`] or its drop.
#[derive(Debug)]
pub(crate) struct Ticket {
    tenant: Rc<Tenant>,
    /// The tokens it holds.
    held: u64,
    settled: bool,
}

impl Ticket {
    /// The name of the client holding it.
    pub(crate) fn client(&self) -> &str {
        &self.tenant.name
    }

    /// Admits a request holding `tokens` at `now`: counted, and in flight.
    pub(crate) fn take(tenant: &Rc<Tenant>, now: UnixMillis, tokens: u64) -> Ticket {
        {
            let mut used = tenant.used.borrow_mut();
            used.requests.add(now, 1);
            used.tokens.add(now, tokens);
            used.in_flight += 1;
        }
        let admitted = &tenant.totals.admitted;
        admitted.set(admitted.get() + 1);
        tenant.share(now);
        Ticket {
            tenant: Rc::clone(tenant),
            held: tokens,
            settled: false,
        }
    }

    /// Ends the request at `now`: its estimate replaced by the `tokens`
    /// its providers reported, its `cost` spent, no longer in flight.
    pub(crate) fn settle(mut self, now: UnixMillis, tokens: u64, cost: Option<Cost>) {
        self.settled = true;
        let t = &self.tenant;
        let mut used = t.used.borrow_mut();
        if tokens >= self.held {
            used.tokens.add(now, tokens - self.held);
        } else {
            used.tokens.take_back(now, self.held - tokens);
        }
        used.in_flight = used.in_flight.saturating_sub(1);
        t.totals
            .tokens
            .set(t.totals.tokens.get().saturating_add(tokens));
        if let Some(cost) = cost {
            used.spend.add(now, cost);
            let spent = t
                .totals
                .spend
                .get()
                .picodollars()
                .saturating_add(cost.picodollars());
            t.totals.spend.set(Cost::from_picodollars(spent));
        }
        drop(used);
        t.share(now);
    }
}

impl Ticket {
    /// Gives back at `now` what its admission took: the request was shed
    /// before any provider, and counts toward none of its limits.
    pub(crate) fn refund(mut self, now: UnixMillis) {
        self.settled = true;
        let t = &self.tenant;
        {
            let mut used = t.used.borrow_mut();
            used.requests.take_back(now, 1);
            used.tokens.take_back(now, self.held);
            used.in_flight = used.in_flight.saturating_sub(1);
        }
        let admitted = &t.totals.admitted;
        admitted.set(admitted.get().saturating_sub(1));
        t.share(now);
    }
}

impl Drop for Ticket {
    /// A request never settled (its future dropped) is no longer in flight;
    /// its estimate stays counted, as nothing better is known.
    fn drop(&mut self) {
        if !self.settled {
            let mut used = self.tenant.used.borrow_mut();
            used.in_flight = used.in_flight.saturating_sub(1);
        }
    }
}

/// The tokens in `usage`, input and output.
pub(crate) fn tokens_of(usage: Option<&Usage>) -> u64 {
    usage.map_or(0, |u| u.input_tokens.saturating_add(u.output_tokens))
}

/// The tokens every one of `attempts` reported: the answer's, and those of
/// attempts that did not become it (a cut stream, a hedge's loser).
pub(crate) fn tokens_in(attempts: &[Attempt]) -> u64 {
    attempts
        .iter()
        .fold(0, |n: u64, a| n.saturating_add(tokens_of(a.usage.as_ref())))
}
