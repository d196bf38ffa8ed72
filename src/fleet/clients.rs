//! A named client's limits fleet-wide, the isolate's side: what the
//! client used through the other isolates, as their client object last
//! answered, added to what it used here.
//!
//! An isolate never waits for the object. It decides from its last view
//! of the others plus its own count, which holds everything it admitted
//! since; it reports its count in the background, one call at a time per
//! client, whenever the count changed or the view is older than its time
//! to live, and again as soon as an answer comes while the count moved on
//! meanwhile. So what one isolate admits reaches the others within a round
//! trip to the object and their next request: the overshoot of a limit is
//! what the other isolates admit in that time (docs/design.md, "Named
//! clients"). A client's first request through an isolate is decided by
//! that isolate's count alone while it asks.
//!
//! When the object cannot be reached, the last view ages (its minutes
//! slide out, and it is dropped after [`LAPSE`]) and the isolate's own
//! count decides; a failed call is tried again a time to live later.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::{Rc, Weak};
use std::time::Duration;

use super::client_object::{ClientReport, LAPSE};
use crate::platform::{millis, UnixMillis};
use crate::policy::tenant::Used;

/// The name of client `name`'s object.
pub fn client_key(name: &str) -> String {
    format!("client:{name}")
}

/// How a gateway shares its limited clients' counts with the fleet.
pub trait ClientLedger {
    /// What `client` used through the other isolates as last seen, as of
    /// `now`; `None` when that is not known.
    fn others(&self, client: &str, now: UnixMillis) -> Option<Used>;
    /// Notes `mine`, what `client` used through this isolate at `now`, and
    /// sends it in the background when that is due.
    fn report(&self, client: &str, now: UnixMillis, mine: &Used);
}

/// How an isolate reaches the client objects.
pub trait ClientLink {
    /// Sends `call` in the background; the object's answer (what the other
    /// isolates used) goes to `inbox`, or nothing when the call failed.
    fn report(&self, call: ClientReport, inbox: ClientInbox);
}

/// Where a client object's answers come back. Holds no strong reference.
#[derive(Clone)]
pub struct ClientInbox(Weak<dyn Answered>);

impl ClientInbox {
    /// Delivers, at `now`, the answer to `client`'s report: what the other
    /// isolates used, or `None` when the call failed.
    pub fn deliver(&self, client: &str, now: UnixMillis, answer: Option<Used>) {
        if let Some(shared) = self.0.upgrade() {
            shared.answered(client, now, answer);
        }
    }
}

/// The side of [`FleetClients`] an inbox delivers to.
trait Answered {
    fn answered(&self, client: &str, now: UnixMillis, answer: Option<Used>);
}

/// One client as this isolate knows it.
#[derive(Debug, Default)]
struct Seen {
    /// The others' counts, and when the call that brought them was sent.
    others: Option<(UnixMillis, Used)>,
    /// This isolate's count, as last noted.
    latest: Used,
    /// The count the last call carried.
    sent: Option<Used>,
    /// When the last call was sent.
    asked_at: Option<UnixMillis>,
    /// A call is on its way.
    waiting: bool,
    /// No call before this (a call failed).
    not_before: UnixMillis,
}

/// The isolate's fleet-wide [`ClientLedger`].
pub struct FleetClients<L: ClientLink + 'static> {
    shared: Rc<Shared<L>>,
}

struct Shared<L: ClientLink> {
    link: L,
    ttl: Duration,
    holder: String,
    clients: RefCell<BTreeMap<String, Seen>>,
    me: Weak<Shared<L>>,
}

impl<L: ClientLink + 'static> FleetClients<L> {
    /// A ledger over `link` for the isolate `holder`; a view is fresh for
    /// `ttl`.
    pub fn new(link: L, ttl: Duration, holder: impl Into<String>) -> Self {
        let holder = holder.into();
        FleetClients {
            shared: Rc::new_cyclic(|me| Shared {
                link,
                ttl,
                holder,
                clients: RefCell::default(),
                me: me.clone(),
            }),
        }
    }
}

impl<L: ClientLink + 'static> Shared<L> {
    /// Sends `client`'s latest count when that is due: it changed since
    /// the last call, or the view is older than the time to live.
    fn send_if_due(&self, client: &str, now: UnixMillis) {
        let call = {
            let mut clients = self.clients.borrow_mut();
            let Some(seen) = clients.get_mut(client) else {
                return;
            };
            let stale = seen
                .asked_at
                .is_none_or(|at| now.saturating_sub(at) >= millis(self.ttl));
            let changed = seen.sent != Some(seen.latest);
            if seen.waiting || now < seen.not_before || !(stale || changed) {
                return;
            }
            seen.waiting = true;
            seen.sent = Some(seen.latest);
            seen.asked_at = Some(now);
            ClientReport {
                client: client.to_owned(),
                holder: self.holder.clone(),
                used: seen.latest,
            }
        };
        let me: Weak<dyn Answered> = self.me.clone();
        self.link.report(call, ClientInbox(me));
    }
}

impl<L: ClientLink + 'static> Answered for Shared<L> {
    fn answered(&self, client: &str, now: UnixMillis, answer: Option<Used>) {
        {
            let mut clients = self.clients.borrow_mut();
            let Some(seen) = clients.get_mut(client) else {
                return;
            };
            seen.waiting = false;
            match answer {
                Some(used) => seen.others = Some((seen.asked_at.unwrap_or(now), used)),
                None => seen.not_before = now.saturating_add(millis(self.ttl)),
            }
        }
        // What was admitted while the call was away goes at once.
        self.send_if_due(client, now);
    }
}

impl<L: ClientLink + 'static> ClientLedger for FleetClients<L> {
    fn others(&self, client: &str, now: UnixMillis) -> Option<Used> {
        let clients = self.shared.clients.borrow();
        let (at, used) = clients.get(client)?.others?;
        (now.saturating_sub(at) < LAPSE).then_some(used)
    }

    fn report(&self, client: &str, now: UnixMillis, mine: &Used) {
        {
            let mut clients = self.shared.clients.borrow_mut();
            match clients.get_mut(client) {
                Some(seen) => seen.latest = *mine,
                None => {
                    clients.insert(
                        client.to_owned(),
                        Seen {
                            latest: *mine,
                            ..Seen::default()
                        },
                    );
                }
            }
        }
        self.shared.send_if_due(client, now);
    }
}
