//! Test faults of the fleet's objects. For end-to-end tests of the
//! isolates' fallback, and only when the Worker's `FLEET_FAULTS` variable is
//! `on` (never in a deployment), an owner or a relay can be made to fail for
//! real: `POST http://do/fault {"mode"}` makes every later call throw
//! (`throw`), hang past the isolates' call timeout (`hang`), answer 500
//! (`fail`) or work again (`none`).

use std::cell::Cell;
use std::time::Duration;

use serde::Deserialize;
use worker::{Delay, Env, Response, Result};

/// How an object fails when told to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Fault {
    #[default]
    None,
    Throw,
    Hang,
    Fail,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FaultCall {
    mode: Fault,
}

/// How long a `hang` holds a call: well past the isolates' call timeout.
const HANG: Duration = Duration::from_secs(5);

/// The fault an object was told to have.
#[derive(Default)]
pub(super) struct Faults(Cell<Fault>);

impl Faults {
    /// An admin call's answer, or the fault set for every other call.
    /// `None`: serve normally (always, unless `FLEET_FAULTS` is `on`).
    pub(super) async fn check(
        &self,
        env: &Env,
        op: &str,
        text: Option<&str>,
    ) -> Option<Result<Response>> {
        let on = env.var("FLEET_FAULTS").is_ok_and(|v| v.to_string() == "on");
        if !on {
            return None;
        }
        if op == "/fault" {
            let Some(call) = text.and_then(|t| serde_json::from_str::<FaultCall>(t).ok()) else {
                return Some(Response::error("bad fault", 400));
            };
            self.0.set(call.mode);
            return Some(Response::ok("{}"));
        }
        match self.0.get() {
            Fault::None => None,
            Fault::Throw => Some(Err(worker::Error::RustError("test fault: thrown".into()))),
            Fault::Fail => Some(Response::error("test fault: failing", 500)),
            Fault::Hang => {
                Delay::from(HANG).await;
                Some(Err(worker::Error::RustError("test fault: hung".into())))
            }
        }
    }
}
