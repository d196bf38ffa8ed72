//! `tracing.export` checked into an [`ExportPolicy`]: an OTLP/HTTP
//! endpoint, the secrets its headers come from, the sampling ratio and the
//! queue's bounds.

use std::time::Duration;

use super::issues::Issues;
use super::shape::ExportConfig;
use crate::secret::Secret;
use crate::trace::export::ExportPolicy;

/// The export policy of `cfg`, every mistake reported at `tracing.export`.
pub(super) fn export_policy(
    cfg: &ExportConfig,
    secret: &dyn Fn(&str) -> Option<String>,
    issues: &mut Issues,
) -> Option<ExportPolicy> {
    const PATH: &str = "tracing.export";
    let before = issues.0.len();
    if !cfg!(feature = "otlp") {
        issues.add(
            PATH,
            "this build has no OTLP exporter (the Worker has; a Rust host enables the `otlp` feature)",
        );
    }
    match cfg.endpoint.parse::<http::Uri>() {
        Ok(u) if matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some() => {}
        _ => issues.add_at(
            PATH,
            "endpoint",
            "must be an http(s) URL, the collector's traces endpoint (http://127.0.0.1:4318/v1/traces)",
        ),
    }
    let mut headers = Vec::new();
    for (name, env) in &cfg.headers_env {
        let at = format!("{PATH}.headersEnv.{name}");
        if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
            issues.add(&at, "not a valid header name");
            continue;
        }
        match secret(env).filter(|v| !v.trim().is_empty()) {
            Some(v) if http::HeaderValue::from_str(&v).is_ok() => {
                headers.push((name.to_ascii_lowercase(), Secret::new(v)));
            }
            Some(_) => issues.add(&at, format!("secret \"{env}\" is not a valid header value")),
            None => issues.add(&at, format!("secret \"{env}\" is not set")),
        }
    }
    let d = ExportPolicy::default();
    let sample_ratio = issues.fraction(PATH, "sampleRatio", cfg.sample_ratio, 1.0, true);
    let service_name = match &cfg.service_name {
        Some(s) if s.trim().is_empty() => {
            issues.add_at(PATH, "serviceName", "must not be empty");
            d.service_name.clone()
        }
        Some(s) => s.clone(),
        None => d.service_name.clone(),
    };
    let timeout = match cfg.timeout_ms {
        Some(0) => {
            issues.add_at(PATH, "timeoutMs", "must be greater than 0");
            d.timeout
        }
        Some(ms) => Duration::from_millis(ms),
        None => d.timeout,
    };
    let mut count = |field: &str, v: Option<usize>, default: usize| match v {
        Some(0) => {
            issues.add_at(PATH, field, "must be greater than 0");
            default
        }
        Some(n) => n,
        None => default,
    };
    let max_queue = count("maxQueueSpans", cfg.max_queue_spans, d.max_queue);
    let max_batch = count("maxBatchSpans", cfg.max_batch_spans, d.max_batch);
    (issues.0.len() == before).then(|| ExportPolicy {
        endpoint: cfg.endpoint.clone(),
        headers,
        sample_ratio,
        service_name,
        timeout,
        max_queue,
        max_batch,
        capture_content: cfg.capture_content,
    })
}
