//! The breaker Durable Object: one per provider, holding that provider's
//! [`Fleet`] in SQL storage. Each call loads it, runs one pure method and
//! stores it back, with no `.await` in between.
//!
//! `POST http://do/report {"key", "reports": [...]}` → the view after folding;
//! `POST http://do/watch {"key", "reports": [...]}` → the same, then the
//! view again at each transition, for about a heartbeat ([`super::watch`]);
//! `POST http://do/lease {"key", "holder"}` → a lease answer;
//! `POST http://do/view {"key"}` → the view;
//! `POST http://do/journal {"key"}` → its counters and recent transitions;
//! `POST http://do/spend {"route", "add"}` → a cap's standing today, after
//! booking (to the object `spend:<route>`, in a table of its own);
//! `POST http://do/hold {"route", "id", "amount", "budget", "ttlMs"}` → whether
//! it was held, and the standing; `POST http://do/settle {"route", "holds",
//! "add"}` → the standing after releasing and booking;
//! `POST http://do/client {"client", "holder", "used"}` → what the client
//! used through every other isolate (to the object `client:<name>`, in a
//! table of its own).
//!
//! With `FLEET_FAULTS=on`, `POST http://do/fault {"mode"}` makes it fail
//! ([`super::fault`]).

use std::cell::RefCell;
use std::time::Duration;

use worker::{durable_object, DurableObject, Env, Request, Response, Result, State};

use super::fault::Faults;
use super::watch::Watchers;

use crate::config::Config;
use crate::fleet::{
    Call, ClientBook, ClientReport, Fleet, HoldCall, SettleCall, SpendBook, SpendCall,
};
use crate::policy::breaker::BreakerPolicy;
use crate::policy::latency::DemotionPolicy;

/// The `BreakerStore` Durable Object class.
#[durable_object(fetch)]
pub struct BreakerStore {
    state: State,
    env: Env,
    policies: RefCell<Option<Policies>>,
    faults: Faults,
    watchers: Watchers,
}

#[derive(Clone)]
struct Policies {
    default: BreakerPolicy,
    per_provider: Vec<(String, BreakerPolicy)>,
    lease_ttl: Duration,
    demotion: DemotionPolicy,
}

impl DurableObject for BreakerStore {
    fn new(state: State, env: Env) -> Self {
        BreakerStore {
            state,
            env,
            policies: RefCell::new(None),
            faults: Faults::default(),
            watchers: Watchers::default(),
        }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        let op = req.path();
        let text = req.text().await.ok();
        if let Some(answer) = self.faults.check(&self.env, &op, text.as_deref()).await {
            return answer;
        }
        if matches!(op.as_str(), "/spend" | "/hold" | "/settle") {
            return self.spend(&op, text.as_deref());
        }
        if op == "/client" {
            return self.client(text.as_deref());
        }
        let call = text;
        let Some(call) = call.and_then(|t| serde_json::from_str::<Call>(&t).ok()) else {
            return Response::error("bad request", 400);
        };
        let Some(policies) = self.policies() else {
            return Response::error("invalid configuration", 500);
        };
        let policy = policies
            .per_provider
            .iter()
            .find(|(id, _)| *id == crate::engine::key::provider_of(&call.key))
            .map_or(policies.default, |(_, p)| *p);
        let now = worker::js_sys::Date::now() as u64;
        // Load, one pure step, store: no await in between.
        let mut fleet = self.load();
        let before = fleet.breaker.generation;
        let answer = match op.as_str() {
            "/report" | "/watch" => {
                let batch = call.into_batch();
                serde_json::to_string(&fleet.report(&policy, &policies.demotion, now, &batch))
            }
            "/lease" => {
                let holder = call.holder.as_deref().unwrap_or("unknown");
                serde_json::to_string(&fleet.lease(&policy, policies.lease_ttl, now, holder))
            }
            "/view" => serde_json::to_string(&fleet.view(&policy, now)),
            "/journal" => serde_json::to_string(&fleet.journal(&policy, now)),
            _ => return Response::error("not found", 404),
        }
        .map_err(|e| worker::Error::RustError(e.to_string()))?;
        let moved = (fleet.breaker.generation != before).then(|| fleet.view(&policy, now));
        self.store(&fleet)?;
        if let Some(view) = moved {
            let json = serde_json::to_string(&view)
                .map_err(|e| worker::Error::RustError(e.to_string()))?;
            self.watchers.tell(json, now);
        }
        if op == "/watch" {
            return self.watchers.open(answer, now);
        }
        let headers = worker::Headers::new();
        headers.set("content-type", "application/json")?;
        Ok(Response::ok(answer)?.with_headers(headers))
    }
}

impl BreakerStore {
    /// A cap's spend object (`spend:<cap>`), in its own table: `/spend`
    /// books an amount (every isolate version's call), `/hold` holds what
    /// a request may cost if it fits, `/settle` releases holds and books;
    /// each answers the cap's standing after it. Load, one pure step,
    /// store: no await in between.
    fn spend(&self, op: &str, text: Option<&str>) -> Result<Response> {
        let text = text.unwrap_or_default();
        let stored = self.row("spend")?;
        let now = worker::js_sys::Date::now() as u64;
        let mut book = SpendBook::load(stored, now);
        let answer = match op {
            "/spend" => serde_json::from_str::<SpendCall>(text).map(|call| {
                book.add(call.add);
                serde_json::to_string(&book.standing())
            }),
            "/hold" => serde_json::from_str::<HoldCall>(text)
                .map(|call| serde_json::to_string(&book.hold(now, &call))),
            _ => serde_json::from_str::<SettleCall>(text).map(|call| {
                book.settle(&call);
                serde_json::to_string(&book.standing())
            }),
        };
        let Ok(answer) = answer else {
            return Response::error("bad request", 400);
        };
        let answer = answer.map_err(|e| worker::Error::RustError(e.to_string()))?;
        self.keep_row("spend", &book)?;
        json_answer(answer)
    }

    /// A limited client's object (`client:<name>`), in its own table: each
    /// isolate's last report, and the answer of what the others used.
    /// Load, one pure step, store: no await in between.
    fn client(&self, text: Option<&str>) -> Result<Response> {
        let Some(report) = text.and_then(|t| serde_json::from_str::<ClientReport>(t).ok()) else {
            return Response::error("bad request", 400);
        };
        let mut book: ClientBook = self.row("client")?.unwrap_or_default();
        let now = worker::js_sys::Date::now() as u64;
        let others = book.report(now, &report);
        let answer =
            serde_json::to_string(&others).map_err(|e| worker::Error::RustError(e.to_string()))?;
        self.keep_row("client", &book)?;
        json_answer(answer)
    }

    /// The state kept in `table` (its one row), if any and readable.
    fn row<T: serde::de::DeserializeOwned>(&self, table: &'static str) -> Result<Option<T>> {
        let sql = self.state.storage().sql();
        sql.exec(
            &format!(
                "CREATE TABLE IF NOT EXISTS {table} (id INTEGER PRIMARY KEY, state TEXT NOT NULL)"
            ),
            None,
        )?;
        let row = sql
            .exec(&format!("SELECT state FROM {table} WHERE id = 1"), None)?
            .raw()
            .next()
            .transpose()?;
        Ok(match row.as_deref() {
            Some([worker::SqlStorageValue::String(state)]) => serde_json::from_str(state).ok(),
            _ => None,
        })
    }

    /// Keeps `state` as `table`'s one row.
    fn keep_row(&self, table: &'static str, state: &impl serde::Serialize) -> Result<()> {
        let json =
            serde_json::to_string(state).map_err(|e| worker::Error::RustError(e.to_string()))?;
        self.state.storage().sql().exec(
            &format!("INSERT OR REPLACE INTO {table} (id, state) VALUES (1, ?)"),
            vec![json.into()],
        )?;
        Ok(())
    }

    fn sql_init(&self) -> Result<()> {
        self.state.storage().sql().exec(
            "CREATE TABLE IF NOT EXISTS fleet (id INTEGER PRIMARY KEY, state TEXT NOT NULL)",
            None,
        )?;
        Ok(())
    }

    fn load(&self) -> Fleet {
        let row = self.sql_init().and_then(|()| {
            let cursor = self
                .state
                .storage()
                .sql()
                .exec("SELECT state FROM fleet WHERE id = 1", None)?;
            cursor.raw().next().transpose()
        });
        match row.ok().flatten().as_deref() {
            Some([worker::SqlStorageValue::String(state)]) => serde_json::from_str(state).ok(),
            _ => None,
        }
        .unwrap_or_default()
    }

    fn store(&self, fleet: &Fleet) -> Result<()> {
        let json =
            serde_json::to_string(fleet).map_err(|e| worker::Error::RustError(e.to_string()))?;
        self.state.storage().sql().exec(
            "INSERT OR REPLACE INTO fleet (id, state) VALUES (1, ?)",
            vec![json.into()],
        )?;
        Ok(())
    }

    /// The breaker policies from the same `CONFIG` the isolates read.
    fn policies(&self) -> Option<Policies> {
        if let Some(p) = self.policies.borrow().as_ref() {
            return Some(p.clone());
        }
        let json = self.env.var("CONFIG").ok()?.to_string();
        let env = &self.env;
        let secret = |name: &str| super::secret(env, name);
        let v = Config::parse(&json).ok()?.validate(&secret, &[]).ok()?;
        let p = Policies {
            default: v.policies.breaker,
            per_provider: v.breakers,
            // A probe lives at most one request deadline; a second more
            // and its lease lapses.
            lease_ttl: v.policies.client.deadline + Duration::from_secs(1),
            demotion: v.policies.demotion,
        };
        *self.policies.borrow_mut() = Some(p.clone());
        Some(p)
    }
}

/// `answer`, a JSON text, as a 200.
fn json_answer(answer: String) -> Result<Response> {
    let headers = worker::Headers::new();
    headers.set("content-type", "application/json")?;
    Ok(Response::ok(answer)?.with_headers(headers))
}
