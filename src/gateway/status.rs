//! The status page: `GET /status`, HTML with inline CSS, JS and SVG and no
//! external asset, rendered on the server from the same data as
//! `GET /status/data`, which the page then polls to refresh itself.
//!
//! Where the Worker shares breakers through Durable Objects, the breakers'
//! transitions and the fleet's totals come from the objects (every
//! isolate's, kept there); failovers are this isolate's own (the objects
//! see verdicts, not routes).
//!
//! Browsers sign in through a form (`POST /status/login`) that sets an
//! `HttpOnly`, `Secure`, `SameSite=Strict` cookie holding a signed session
//! (`session.rs`), never the key; the key never goes in a URL. Only the status routes read that cookie: the chat
//! routes still need a header, so a page elsewhere cannot spend the key.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;

use super::cache_status::CacheStatus;
use base64::Engine as _;
use html_escape::{encode_double_quoted_attribute as attr, encode_text as esc};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::http::Outbound;
use super::log::LogLine;
use crate::fleet::{Counts, Journal};
use crate::platform::{Headers, UnixMillis};
use crate::policy::breaker::StateName;
use crate::policy::pool::{PoolReading, Quota};
use crate::policy::stats::Health;

/// The cookie the login form sets.
pub(super) const COOKIE: &str = "rl_status_session";

/// How many transitions and failovers the page lists.
const KEPT: usize = 100;

/// What changed, and when.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "type")]
pub(super) enum Change {
    /// A breaker moved.
    #[serde(rename = "breaker")]
    Breaker {
        at: UnixMillis,
        provider: String,
        from: StateName,
        to: StateName,
        /// Whether the fleet's breaker moved (its object's log), not only
        /// this isolate's view of it.
        fleet: bool,
    },
    /// A request moved from one entry to the next.
    #[serde(rename = "failover")]
    Failover {
        at: UnixMillis,
        from: String,
        to: String,
        reason: String,
    },
}

/// The recent transitions and failovers this isolate saw, newest last.
#[derive(Debug, Default)]
pub(super) struct Changes {
    states: BTreeMap<String, StateName>,
    recent: VecDeque<Change>,
}

impl Changes {
    fn push(&mut self, c: Change) {
        if self.recent.len() == KEPT {
            self.recent.pop_front();
        }
        self.recent.push_back(c);
    }

    /// Notes what a request did: its failovers, from its log line, and
    /// every breaker that moved since the last request.
    pub(super) fn observe<'s>(
        &mut self,
        now: UnixMillis,
        log: &LogLine<'_>,
        states: impl Iterator<Item = (&'s str, StateName)>,
    ) {
        for pair in log.trail.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            if b.number <= 1 && (a.provider != b.provider || a.model != b.model) {
                self.push(Change::Failover {
                    at: now,
                    from: format!("{}/{}", a.provider, a.model),
                    to: format!("{}/{}", b.provider, b.model),
                    reason: super::metrics::outcome_name(&a.outcome).into_owned(),
                });
            }
        }
        for (provider, state) in states {
            // A provider seen before keeps its key: no allocation per request.
            let before = match self.states.get_mut(provider) {
                Some(seen) => std::mem::replace(seen, state),
                None => {
                    self.states.insert(provider.to_owned(), state);
                    StateName::Closed
                }
            };
            if before != state {
                self.push(Change::Breaker {
                    at: now,
                    provider: provider.to_owned(),
                    from: before,
                    to: state,
                    fleet: false,
                });
            }
        }
    }
}

/// One breaker's fleet-wide totals, from its object.
#[derive(Debug, Serialize)]
pub(super) struct FleetRow<'a> {
    pub(super) provider: &'a str,
    pub(super) model: &'a str,
    #[serde(flatten)]
    pub(super) counts: Counts,
}

/// `GET /status/data`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct StatusBody<'a> {
    pub(super) time: UnixMillis,
    pub(super) status: &'static str,
    pub(super) providers: &'a [Health],
    /// Empty where breakers are not shared (no fleet objects, or none
    /// reachable).
    pub(super) fleet: Vec<FleetRow<'a>>,
    /// Newest first.
    pub(super) changes: Vec<Change>,
    /// The response cache, when a route caches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) cache: Option<CacheStatus>,
    /// The named clients.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) clients: Vec<super::client_status::ClientStatus>,
}

impl<'a> StatusBody<'a> {
    /// The page's data: `fleet` holds the journals, by breaker key
    /// (`provider/model`), of the breakers whose objects answered; their
    /// logs replace this isolate's record of those providers' transitions.
    pub(super) fn new(
        now: UnixMillis,
        providers: &'a [Health],
        changes: &Changes,
        fleet: &'a [(String, Journal)],
    ) -> Self {
        let degraded = providers.iter().any(Health::is_degraded);
        let journaled = |p: &str| fleet.iter().any(|(k, _)| split(k).0 == p);
        let mut all: Vec<Change> = changes
            .recent
            .iter()
            .filter(|c| !matches!(c, Change::Breaker { provider, .. } if journaled(provider)))
            .cloned()
            .collect();
        for (key, journal) in fleet {
            all.extend(journal.recent.iter().map(|t| Change::Breaker {
                at: t.at,
                provider: key.clone(),
                from: t.from,
                to: t.to,
                fleet: true,
            }));
        }
        // Newest first; a stable sort keeps each source's own order.
        all.reverse();
        all.sort_by_key(|c| std::cmp::Reverse(c.at()));
        all.truncate(KEPT);
        StatusBody {
            time: now,
            status: if degraded { "degraded" } else { "ok" },
            providers,
            fleet: fleet
                .iter()
                .map(|(key, j)| FleetRow {
                    provider: split(key).0,
                    model: split(key).1,
                    counts: j.counts,
                })
                .collect(),
            changes: all,
            cache: None,
            clients: Vec::new(),
        }
    }
}

/// A breaker key's provider and model.
fn split(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or((key, ""))
}

impl Change {
    fn at(&self) -> UnixMillis {
        match self {
            Change::Breaker { at, .. } | Change::Failover { at, .. } => *at,
        }
    }
}

const STYLE: &str = r#"
body{font:16px/1.45 system-ui,sans-serif;margin:0;background:#fff;color:#1a1a1a}
header{background:#12263a;color:#fff;padding:14px 24px;display:flex;gap:16px;align-items:center}
h1{font-size:20px;margin:0}main{padding:16px 24px;max-width:1100px}
h2{font-size:17px;margin:24px 0 8px}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:7px 10px;border-bottom:1px solid #c8ccd0}
th{background:#eef1f4;font-weight:600}
.state{display:inline-flex;gap:6px;align-items:center;font-weight:600}
.closed{color:#0b6b2f}.open{color:#a0141e}.half_open{color:#7a4d00}
.pill{padding:2px 10px;border-radius:12px;font-weight:600}
.pill.ok{background:#d8f0df;color:#0b4d22}.pill.degraded{background:#fbe0e2;color:#7d0f18}
form{max-width:360px;margin:48px auto;display:flex;flex-direction:column;gap:10px}
input{font-size:16px;padding:8px}button{font-size:16px;padding:8px;background:#12263a;color:#fff;border:0;border-radius:4px}
.err{color:#a0141e}small{color:#444}
tr.model td{border-bottom-style:dotted}.sub{padding-left:18px}.sub::before{content:"↳ ";color:#444}
"#;

/// The `content-security-policy` of the status pages: nothing from
/// elsewhere, and no inline script or style but the page's own, named by
/// their SHA-256 (an attribute a name slipped past the escaping could not
/// run).
fn csp() -> String {
    let hash =
        |s: &str| base64::engine::general_purpose::STANDARD.encode(Sha256::digest(s.as_bytes()));
    format!(
        "default-src 'none'; style-src 'sha256-{}'; script-src 'sha256-{}'; \
         connect-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; \
         base-uri 'none'",
        hash(STYLE),
        hash(SCRIPT)
    )
}

/// An HTML page that loads nothing from elsewhere, and is not cached.
pub(super) fn html_response(status: u16, html: String) -> Outbound {
    let mut headers = Headers::new();
    headers.insert("content-type", "text/html; charset=utf-8");
    headers.insert("cache-control", "no-store");
    headers.insert("content-security-policy", csp());
    Outbound {
        status,
        headers,
        body: html.into_bytes(),
        stream: None,
        log: String::new(),
    }
}

/// The sign-in page (`problem` when a key was refused).
pub(super) fn login_page(problem: Option<&str>) -> String {
    let mut out = head("Sign in · resilient-llm status");
    out.push_str(
        "<main><form method=\"post\" action=\"/status/login\">\
         <h1>Gateway status</h1>\
         <label for=\"key\">Gateway key</label>\
         <input id=\"key\" name=\"key\" type=\"password\" autocomplete=\"current-password\" required>\
         <button type=\"submit\">Sign in</button>",
    );
    if let Some(p) = problem {
        let _ = write!(out, "<p class=\"err\" role=\"alert\">{}</p>", esc(p));
    }
    out.push_str(
        "<small>Signing in keeps a 12-hour session in an HttpOnly cookie for this page only.</small></form></main></body></html>",
    );
    out
}

fn head(title: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>{}</title><style>{STYLE}</style></head><body>",
        esc(title)
    )
}

fn state_label(s: StateName) -> (&'static str, &'static str) {
    match s {
        StateName::Closed => ("closed", "closed"),
        StateName::Open => ("open", "open"),
        StateName::HalfOpen => ("half_open", "half-open"),
    }
}

/// A breaker state as the page shows it: a coloured dot and its name.
fn state_badge(s: StateName) -> String {
    let (class, label) = state_label(s);
    format!(
        "<span class=\"state {class}\"><svg width=\"12\" height=\"12\" aria-hidden=\"true\">\
         <circle cx=\"6\" cy=\"6\" r=\"6\" fill=\"currentColor\"/></svg>\
         <span class=\"label\">{label}</span></span>"
    )
}

/// When an open breaker lets its next probe through.
fn next_probe(open_until: Option<UnixMillis>, state: StateName, now: UnixMillis) -> String {
    match open_until {
        Some(t) if t > now => format!("in {:.1} s", (t - now) as f64 / 1000.0),
        _ if state == StateName::Closed => "–".into(),
        _ => "now".into(),
    }
}

/// `at` as an HTTP date (what JS's `Date#toUTCString` writes too).
fn date(at: UnixMillis) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(at);
    httpdate::fmt_http_date(t)
}

fn ms(v: Option<u64>) -> String {
    v.map_or("–".into(), |v| format!("{v} ms"))
}

/// What a model's provider last said of its rate-limit pool, as of `now`:
/// each quota's left / limit (its limit again once it has reset), a
/// Retry-After in force, and when the last quota is full again. The
/// page's script writes the same (`pool` in [`SCRIPT`]).
fn pool_cell(p: Option<&PoolReading>, now: UnixMillis) -> String {
    let Some(p) = p else {
        return "–".into();
    };
    let secs = |t: UnixMillis| (t - now) as f64 / 1000.0;
    let count = |v: Option<u64>| v.map_or("?".into(), |v| v.to_string());
    let mut parts = Vec::new();
    if let Some(until) = p.retry_after_until.filter(|t| *t > now) {
        parts.push(format!("429: empty for {:.1} s", secs(until)));
    }
    let quotas: [(&str, &Quota); 4] = [
        ("requests", &p.requests),
        ("tokens", &p.tokens),
        ("input tokens", &p.input_tokens),
        ("output tokens", &p.output_tokens),
    ];
    let mut full_at = None;
    for (name, q) in quotas.into_iter().filter(|(_, q)| !q.is_empty()) {
        let reset = q.reset_at.is_some_and(|t| t <= now);
        let left = if reset { q.limit } else { q.remaining };
        parts.push(format!("{name} {} / {}", count(left), count(q.limit)));
        full_at = full_at.max(q.reset_at.filter(|t| *t > now));
    }
    if let Some(t) = full_at {
        parts.push(format!("full in {:.1} s", secs(t)));
    }
    if parts.is_empty() {
        return "–".into();
    }
    parts.join(" · ")
}

/// The page, as of `body`.
pub(super) fn page(body: &StatusBody<'_>) -> String {
    let mut out = head("resilient-llm status");
    let _ = write!(
        out,
        "<header><h1>Gateway status</h1><span id=\"overall\" class=\"pill {0}\">{0}</span>\
         <span id=\"asof\" data-time=\"{1}\">as of {2}</span></header><main>\
         <h2>Providers</h2><table><thead><tr><th scope=\"col\">Provider</th>\
         <th scope=\"col\">Breaker</th><th scope=\"col\">Next probe</th>\
         <th scope=\"col\">Error rate</th><th scope=\"col\">Latency p50 / p95 / p99</th>\
         <th scope=\"col\">Time to first token p50 / p95</th><th scope=\"col\">Calls</th>\
         <th scope=\"col\">Rate-limit pool</th></tr></thead><tbody id=\"providers\">",
        body.status,
        body.time,
        date(body.time)
    );
    for h in body.providers {
        let probe = next_probe(h.open_until, h.state, body.time);
        let _ = write!(
            out,
            "<tr data-provider=\"{pa}\"><td>{p}</td><td>{}</td><td>{probe}</td><td>{:.1} %</td>\
             <td>{} / {} / {}</td><td>{} / {}</td><td>{}</td><td>–</td></tr>",
            state_badge(h.state),
            h.error_rate * 100.0,
            ms(h.latency_ms.p50),
            ms(h.latency_ms.p95),
            ms(h.latency_ms.p99),
            ms(h.ttft_ms.p50),
            ms(h.ttft_ms.p95),
            h.requests,
            p = esc(&h.provider),
            pa = attr(&h.provider),
        );
        // Each model's own breaker and figures: one model's rate limit
        // opens only it.
        for m in &h.models {
            let _ = write!(
                out,
                "<tr class=\"model\" data-provider=\"{pa}\" data-model=\"{na}\">\
                 <td><span class=\"sub\">{name}</span></td><td>{}</td><td>{}</td><td>{:.1} %</td>\
                 <td>{} / {} / {}</td><td>{} / {}</td><td>{}</td><td>{}</td></tr>",
                state_badge(m.state),
                next_probe(m.open_until, m.state, body.time),
                m.error_rate * 100.0,
                ms(m.latency_ms.p50),
                ms(m.latency_ms.p95),
                ms(m.latency_ms.p99),
                ms(m.ttft_ms.p50),
                ms(m.ttft_ms.p95),
                m.requests,
                esc(&pool_cell(m.pool.as_ref(), body.time)),
                pa = attr(&h.provider),
                name = esc(&m.model),
                na = attr(&m.model),
            );
        }
    }
    out.push_str("</tbody></table>");
    fleet_table(&mut out, &body.fleet);
    if let Some(cache) = &body.cache {
        super::cache_status::section(&mut out, cache);
    }
    if !body.clients.is_empty() {
        super::client_status::section(&mut out, &body.clients);
    }
    out.push_str(
        "<h2>Recent transitions and failovers</h2>\
         <table><thead><tr><th scope=\"col\">When</th><th scope=\"col\">What</th></tr></thead>\
         <tbody id=\"changes\">",
    );
    for c in &body.changes {
        let (at, what) = describe(c);
        let _ = write!(out, "<tr><td>{}</td><td>{}</td></tr>", date(at), esc(&what));
    }
    let _ = write!(
        out,
        "</tbody></table></main><script>{SCRIPT}</script></body></html>"
    );
    out
}

/// The fleet's totals, when there are breaker objects to ask (the table
/// is always there for the script to fill; hidden while empty).
fn fleet_table(out: &mut String, rows: &[FleetRow<'_>]) {
    let _ = write!(
        out,
        "<section id=\"fleet\"{}><h2>Fleet-wide, from the breaker objects</h2><table><thead><tr>\
         <th scope=\"col\">Provider</th><th scope=\"col\">Model</th><th scope=\"col\">Calls answered</th>\
         <th scope=\"col\">Calls failed</th><th scope=\"col\">Probes</th>\
         <th scope=\"col\">Transitions</th></tr></thead><tbody id=\"fleet-rows\">",
        if rows.is_empty() { " hidden" } else { "" }
    );
    for r in rows {
        let c = r.counts;
        let _ = write!(
            out,
            "<tr data-provider=\"{pa}\" data-model=\"{ma}\"><td>{p}</td><td>{m}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            c.successes,
            c.failures,
            c.probes,
            c.transitions,
            p = esc(r.provider),
            m = esc(r.model),
            pa = attr(r.provider),
            ma = attr(r.model),
        );
    }
    out.push_str("</tbody></table></section>");
}

fn describe(c: &Change) -> (UnixMillis, String) {
    match c {
        Change::Breaker {
            at,
            provider,
            from,
            to,
            fleet,
        } => (
            *at,
            format!(
                "{}breaker of {provider}: {} → {}",
                if *fleet { "fleet " } else { "" },
                state_label(*from).1,
                state_label(*to).1
            ),
        ),
        Change::Failover {
            at,
            from,
            to,
            reason,
        } => (*at, format!("failover {from} → {to} ({reason})")),
    }
}

/// Refreshes the page from `/status.json` every 2 s, rendering what the
/// server rendered, the same way.
const SCRIPT: &str = r#"
(function(){
const LABEL={closed:"closed",open:"open",half_open:"half-open"};
const ms=v=>v==null?"–":v+" ms";
function cell(tr,text){const td=document.createElement("td");td.textContent=text;tr.appendChild(td);return td;}
function state(s){const cls=s==="halfOpen"||s==="half_open"?"half_open":s;
  const span=document.createElement("span");span.className="state "+cls;
  span.innerHTML='<svg width="12" height="12" aria-hidden="true"><circle cx="6" cy="6" r="6" fill="currentColor"/></svg>';
  const l=document.createElement("span");l.className="label";l.textContent=LABEL[cls]||cls;span.appendChild(l);return span;}
function when(t){return new Date(t).toUTCString();}
function probe(u,st,now){const s=st==="halfOpen"?"half_open":st;return u&&u>now?"in "+((u-now)/1000).toFixed(1)+" s":s==="closed"?"–":"now";}
function pool(p,now){if(!p)return"–";const parts=[],s=t=>((t-now)/1000).toFixed(1),n=v=>v==null?"?":String(v);
  if(p.retryAfterUntil&&p.retryAfterUntil>now)parts.push("429: empty for "+s(p.retryAfterUntil)+" s");
  let full=null;
  for(const [name,k] of [["requests","requests"],["tokens","tokens"],["input tokens","inputTokens"],["output tokens","outputTokens"]]){
    const q=p[k];if(!q||(q.limit==null&&q.remaining==null&&q.resetAt==null))continue;
    const reset=q.resetAt!=null&&q.resetAt<=now;parts.push(name+" "+n(reset?q.limit:q.remaining)+" / "+n(q.limit));
    if(q.resetAt!=null&&q.resetAt>now&&(full===null||q.resetAt>full))full=q.resetAt;}
  if(full!==null)parts.push("full in "+s(full)+" s");
  return parts.length?parts.join(" · "):"–";}
function describe(c){if(c.type==="breaker"){const f=c.from==="halfOpen"?"half_open":c.from,t=c.to==="halfOpen"?"half_open":c.to;
  return (c.fleet?"fleet ":"")+"breaker of "+c.provider+": "+LABEL[f]+" → "+LABEL[t];}
  return "failover "+c.from+" → "+c.to+" ("+c.reason+")";}
function render(d){
  const o=document.getElementById("overall");o.textContent=d.status;o.className="pill "+d.status;
  const a=document.getElementById("asof");a.textContent="as of "+when(d.time);a.dataset.time=d.time;
  const body=document.getElementById("providers");body.replaceChildren();
  for(const h of d.providers){const tr=document.createElement("tr");tr.dataset.provider=h.provider;
    cell(tr,h.provider);cell(tr,"").appendChild(state(h.state));
    cell(tr,probe(h.openUntil,h.state,d.time));
    cell(tr,(h.errorRate*100).toFixed(1)+" %");
    cell(tr,ms(h.latencyMs.p50)+" / "+ms(h.latencyMs.p95)+" / "+ms(h.latencyMs.p99));
    cell(tr,ms(h.ttftMs.p50)+" / "+ms(h.ttftMs.p95));cell(tr,String(h.requests));cell(tr,"–");body.appendChild(tr);
    for(const m of h.models||[]){const r=document.createElement("tr");r.className="model";r.dataset.provider=h.provider;r.dataset.model=m.model;
      const n=document.createElement("span");n.className="sub";n.textContent=m.model;cell(r,"").appendChild(n);
      cell(r,"").appendChild(state(m.state));cell(r,probe(m.openUntil,m.state,d.time));
      cell(r,(m.errorRate*100).toFixed(1)+" %");
      cell(r,ms(m.latencyMs.p50)+" / "+ms(m.latencyMs.p95)+" / "+ms(m.latencyMs.p99));
      cell(r,ms(m.ttftMs.p50)+" / "+ms(m.ttftMs.p95));cell(r,String(m.requests));cell(r,pool(m.pool,d.time));body.appendChild(r);}}
  const fl=document.getElementById("fleet"),fr=document.getElementById("fleet-rows");fr.replaceChildren();
  fl.hidden=!d.fleet.length;
  for(const r of d.fleet){const tr=document.createElement("tr");tr.dataset.provider=r.provider;tr.dataset.model=r.model;cell(tr,r.provider);cell(tr,r.model);
    for(const k of ["successes","failures","probes","transitions"])cell(tr,String(r[k]));fr.appendChild(tr);}
  const ch=document.getElementById("changes");ch.replaceChildren();
  for(const c of d.changes){const tr=document.createElement("tr");cell(tr,when(c.at));cell(tr,describe(c));ch.appendChild(tr);}
}
async function refresh(){try{const r=await fetch("/status/data",{credentials:"same-origin",cache:"no-store"});
  if(r.ok)render(await r.json());}catch(e){}}
setInterval(refresh,2000);
})();
"#;
