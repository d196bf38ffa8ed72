//! A gateway's setup: the configuration and the client keys it names, read
//! and checked once per isolate, and the 500 a configuration that did not
//! validate answers every request with.

use std::rc::Rc;
use std::time::Duration;

use super::auth::Auth;
use super::http::{Format, Outbound};
use super::log::{log_line, LogLine};
use super::proxy::Gateway;
use super::render::error_response;
use super::tenants::{Tenant, Tenants};
use crate::config::clients::{ClientSpec, DEFAULT_CLIENT};
use crate::config::{Config, ConfigError, ConfigIssue, Secret, Validated};
use crate::engine::store::BreakerStore;
use crate::fleet::{ClientLedger, JournalSource};
use crate::platform::{Headers, Platform};
use crate::policy::breaker::BreakerPolicy;

/// A configuration read and validated once per isolate, before a store and
/// platform make it a [`Gateway`].
pub struct Setup {
    validated: Validated,
    auth: Auth,
    tenants: Tenants,
    ledger: Option<Rc<dyn crate::engine::cost::SpendLedger>>,
    journals: Option<Rc<dyn JournalSource>>,
}

impl Setup {
    /// Reads the `CONFIG` JSON and the secrets it names. Every problem is
    /// reported at once, each with its path; no message holds a secret.
    pub fn load(
        config: Option<&str>,
        secret: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Setup, ConfigError> {
        let Some(json) = config.filter(|c| !c.trim().is_empty()) else {
            return Err(ConfigError {
                issues: vec![ConfigIssue::new(
                    "CONFIG",
                    "not set: give the gateway its configuration as one JSON document \
                     (wrangler.toml [vars] CONFIG)",
                )],
            });
        };
        let config = Config::parse(json)?;
        let mut issues = Vec::new();
        let validated = match config.validate(secret, &[]) {
            Ok(v) => Some(v),
            Err(e) => {
                issues.extend(e.issues);
                None
            }
        };
        let auth = auth_from(&config, secret, &mut issues);
        let clients = validated.as_ref().map_or(&[][..], |v| &v.clients[..]);
        let tenants = tenants_of(&config, clients);
        match validated {
            Some(validated) if issues.is_empty() => Ok(Setup {
                validated,
                auth,
                tenants,
                ledger: None,
                journals: None,
            }),
            _ => Err(ConfigError { issues }),
        }
    }

    /// Gateway auth.
    pub fn auth(&self) -> &Auth {
        &self.auth
    }

    /// The breaker policy of every provider without its own.
    pub fn breaker(&self) -> BreakerPolicy {
        self.validated.policies.breaker
    }

    /// Per-provider breaker policies, in provider id order.
    pub fn breakers(&self) -> &[(String, BreakerPolicy)] {
        &self.validated.breakers
    }

    /// The end-to-end deadline of a request.
    pub fn deadline(&self) -> Duration {
        self.validated.policies.client.deadline
    }

    /// The gateway, on `platform`, with breakers in `store`.
    pub fn into_gateway<P: Platform + 'static, S: BreakerStore + 'static>(
        mut self,
        platform: P,
        store: S,
    ) -> Gateway<P, S> {
        let caches = std::mem::take(&mut self.validated.cache);
        let bounds = self.validated.cache_bounds;
        let traces = self.validated.trace_export.take();
        let mut builder = self.validated.into_builder(platform, Vec::new());
        if let Some(ledger) = self.ledger {
            builder = builder.spend_ledger(ledger);
        }
        let mut gateway = Gateway::new(builder.build_with_store(store), self.auth)
            .cache(caches, bounds)
            .tenants(self.tenants);
        gateway.journals = self.journals;
        match traces {
            Some(policy) => gateway.traces(policy),
            None => gateway,
        }
    }

    /// Reads what the fleet remembers of each breaker from `journals`, for
    /// the status page and `/metrics` (the Worker's breaker objects).
    pub fn journals(mut self, journals: Rc<dyn JournalSource>) -> Self {
        self.journals = Some(journals);
        self
    }

    /// Shares the limited clients' counts with the other isolates through
    /// `ledger` (the Worker's client objects), so that their limits hold
    /// fleet-wide.
    pub fn client_ledger(self, ledger: Rc<dyn ClientLedger>) -> Self {
        for tenant in &self.tenants.0 {
            tenant.share_through(&ledger);
        }
        self
    }

    /// Whether any client has limits (only their requests reach the
    /// client objects).
    pub fn has_limited_clients(&self) -> bool {
        self.tenants.0.iter().any(|t| t.is_limited())
    }

    /// Keeps the routes' daily spending in `ledger` too (the Worker's
    /// fleet-wide spend objects).
    pub fn spend_ledger(mut self, ledger: Rc<dyn crate::engine::cost::SpendLedger>) -> Self {
        self.ledger = Some(ledger);
        self
    }
}

/// The gateway's auth: `gateway.clientKeysEnv`'s keys, of the client at
/// index 0 of [`tenants_of`], then each of `gateway.clients`' keys, of the
/// client at its place after it.
fn auth_from(
    config: &Config,
    secret: &dyn Fn(&str) -> Option<String>,
    issues: &mut Vec<ConfigIssue>,
) -> Auth {
    let g = &config.gateway;
    let mut keys = Vec::new();
    let mut read = |path: String, name: &str, client: usize| match secret(name)
        .filter(|k| !k.trim().is_empty())
    {
        Some(k) => keys.push((Secret::new(k.trim()), client)),
        None => issues.push(ConfigIssue::new(
            path,
            format!("secret \"{name}\" is not set (wrangler secret put {name})"),
        )),
    };
    for (i, name) in g.client_keys_env.iter().enumerate() {
        read(format!("gateway.clientKeysEnv[{i}]"), name, 0);
    }
    let first = usize::from(!g.client_keys_env.is_empty());
    for (i, c) in g.clients.iter().enumerate() {
        for (j, name) in c.keys_env.iter().enumerate() {
            read(
                format!("gateway.clients[{i}].keysEnv[{j}]"),
                name,
                first + i,
            );
        }
    }
    if g.allow_unauthenticated {
        if !g.client_keys_env.is_empty() || !g.clients.is_empty() {
            issues.push(ConfigIssue::new(
                "gateway.allowUnauthenticated",
                "cannot be combined with clientKeysEnv or clients",
            ));
        }
        return Auth::open();
    }
    if g.client_keys_env.is_empty() && g.clients.is_empty() {
        issues.push(ConfigIssue::new(
            "gateway.clientKeysEnv",
            "no client keys: name the secrets holding them (here or in gateway.clients), \
             or set gateway.allowUnauthenticated for a local demo only",
        ));
    }
    Auth::clients(keys)
}

/// The clients [`auth_from`]'s keys name: `gateway.clientKeysEnv`'s as one
/// unlimited client named `default`, then `clients`.
fn tenants_of(config: &Config, clients: &[ClientSpec]) -> Tenants {
    let default =
        (!config.gateway.client_keys_env.is_empty()).then(|| Tenant::unlimited(DEFAULT_CLIENT));
    let named = clients.iter().map(Tenant::of);
    Tenants::new(default.into_iter().chain(named))
}

/// The 500 for a configuration that did not validate: every issue with its
/// path, in the client's format.
pub fn config_error(
    err: &ConfigError,
    path: &str,
    headers: &Headers,
    request_id: &str,
) -> Outbound {
    let format = Format::guess(path, headers);
    let mut out = error_response(format, 500, &err.to_string(), Some("invalid_configuration"));
    out.headers.insert("x-request-id", request_id);
    out.log = log_line(&mut LogLine {
        level: "error",
        request_id,
        path,
        status: 500,
        error: Some("invalid_configuration"),
        message: Some(&err.to_string()),
        ..LogLine::default()
    });
    out
}
