//! Several isolates sharing breakers as the Worker's do: each a
//! [`FleetStore`](crate::fleet::FleetStore) over a link to the simulated
//! Durable Objects ([`Objects`]). The link calls the model's owner directly
//! (the protocol the Worker runs today) or its data centre's relay; reports
//! and refreshes run in the background, as tasks of the run's executor, and
//! every call gives up after [`CALL_TIMEOUT`], as the Worker's does.

use std::rc::Rc;

use super::exec::Executor;
use super::objects::Objects;
use super::reply::reply;
use crate::fleet::{
    Batch, FleetLink, Inbox, Journal, LeaseAnswer, LeaseStep, LinkError, CALL_TIMEOUT,
};
use crate::platform::millis;

/// One isolate's link to the objects.
pub(crate) struct SimLink {
    objects: Rc<Objects>,
    ex: Executor,
    isolate: usize,
}

impl SimLink {
    pub(crate) fn new(objects: Rc<Objects>, ex: Executor, isolate: usize) -> Self {
        SimLink {
            objects,
            ex,
            isolate,
        }
    }

    /// Counts a request about to start in this isolate.
    pub(crate) fn decide(&self, view_of: impl Fn(&str) -> Option<crate::fleet::View>) {
        self.objects.decide(self.isolate, view_of);
    }

    /// When a call sent now is given up.
    fn limit(&self) -> u64 {
        self.objects
            .clock()
            .now()
            .saturating_add(millis(CALL_TIMEOUT))
    }
}

fn unreachable() -> LinkError {
    LinkError("the object did not answer in time".into())
}

impl FleetLink for SimLink {
    async fn lease(&self, key: &str, holder: &str) -> Result<LeaseAnswer, LinkError> {
        let limit = self.limit();
        let (sender, receiver) = reply();
        let (o, k, holder, isolate) = (
            self.objects.clone(),
            key.to_owned(),
            holder.to_owned(),
            self.isolate,
        );
        self.ex.spawn(async move {
            let answer = if o.relayed {
                let (id, step) = o
                    .at_relay(isolate, &k, |r, now| r.lease(&holder, now))
                    .await;
                match step {
                    LeaseStep::Answer(a) => a,
                    LeaseStep::Ask => o.ask_owner(id, &holder).await,
                }
            } else {
                o.lease_at_owner(&k, &holder).await
            };
            sender.send(answer);
        });
        let answer = receiver
            .within(self.objects.clock(), limit)
            .await
            .ok_or_else(unreachable)?;
        let view = match &answer {
            LeaseAnswer::Granted { view, .. }
            | LeaseAnswer::Busy { view, .. }
            | LeaseAnswer::Closed { view } => view,
        };
        self.objects.told(self.isolate, key, view.generation);
        Ok(answer)
    }

    fn report(&self, key: &str, batch: Batch, inbox: Inbox) {
        let limit = self.limit();
        let (o, key, isolate) = (self.objects.clone(), key.to_owned(), self.isolate);
        self.ex.spawn(async move {
            if o.relayed {
                let (id, (urgent, view)) = o
                    .at_relay(isolate, &key, |r, now| (r.report(batch, now), r.view(now)))
                    .await;
                if urgent {
                    o.pass_on(id);
                }
                if o.clock().now() <= limit {
                    o.answer_from(id, view, isolate, inbox);
                }
            } else {
                let view = o.report_to_owner(&key, batch).await;
                if o.clock().now() <= limit {
                    o.deliver(isolate, &key, view, &inbox);
                }
            }
        });
    }

    fn refresh(&self, key: &str, inbox: Inbox) {
        let limit = self.limit();
        let (o, key, isolate) = (self.objects.clone(), key.to_owned(), self.isolate);
        self.ex.spawn(async move {
            if o.relayed {
                let (id, view) = o.at_relay(isolate, &key, |r, now| r.view(now)).await;
                if o.clock().now() <= limit {
                    o.answer_from(id, view, isolate, inbox);
                }
            } else {
                let view = o.at_owner(&key, |f, p, now, _| f.view(p, now)).await;
                if o.clock().now() <= limit {
                    o.deliver(isolate, &key, view, &inbox);
                }
            }
        });
    }

    /// Asked of the owner, queued like any call (only the status page asks).
    async fn journal(&self, key: &str) -> Result<Journal, LinkError> {
        Ok(self
            .objects
            .at_owner(key, |f, p, now, _| f.journal(p, now))
            .await)
    }
}
