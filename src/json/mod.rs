//! JSON out, by hand: the compact text serde_json writes (same escapes,
//! same numbers, fields in declaration order), for the shapes this crate
//! sends to JS, logs and answers with, at a fraction of the code of a
//! derived `Serialize` per type over a generic serializer. The tests below
//! hold each writer to the derived `Serialize` it stands in for.

use std::fmt::Write as _;

use serde_json::Value;

/// A JSON text being written. Commas are placed by the writer: open an
/// object, then alternate [`Json::key`] and a value (or use the `key +
/// value` helpers), then close it.
#[derive(Default)]
pub(crate) struct Json {
    out: String,
    comma: bool,
}

impl Json {
    /// An empty text.
    pub(crate) fn new() -> Self {
        Json::default()
    }

    /// The text written.
    pub(crate) fn finish(self) -> String {
        self.out
    }

    /// The text of one value written by `write`.
    pub(crate) fn text(write: impl FnOnce(&mut Json)) -> String {
        let mut j = Json::new();
        write(&mut j);
        j.finish()
    }

    #[inline(never)]
    fn sep(&mut self) {
        if self.comma {
            self.out.push(',');
        }
        self.comma = true;
    }

    #[inline(never)]
    fn raw(&mut self, s: &str) -> &mut Self {
        self.sep();
        self.out.push_str(s);
        self
    }

    /// `{`.
    pub(crate) fn open(&mut self) -> &mut Self {
        self.raw("{");
        self.comma = false;
        self
    }

    /// `}`.
    pub(crate) fn close(&mut self) -> &mut Self {
        self.out.push('}');
        self.comma = true;
        self
    }

    /// `[`.
    pub(crate) fn open_array(&mut self) -> &mut Self {
        self.raw("[");
        self.comma = false;
        self
    }

    /// `]`.
    pub(crate) fn close_array(&mut self) -> &mut Self {
        self.out.push(']');
        self.comma = true;
        self
    }

    /// An object key; the value comes next.
    #[inline(never)]
    pub(crate) fn key(&mut self, k: &str) -> &mut Self {
        self.str(k);
        self.out.push(':');
        self.comma = false;
        self
    }

    /// A string, escaped as serde_json escapes it.
    #[inline(never)]
    pub(crate) fn str(&mut self, s: &str) -> &mut Self {
        self.sep();
        let out = &mut self.out;
        out.push('"');
        let mut start = 0;
        for (i, b) in s.bytes().enumerate() {
            let esc = match b {
                b'"' => "\\\"",
                b'\\' => "\\\\",
                b'\n' => "\\n",
                b'\r' => "\\r",
                b'\t' => "\\t",
                0x08 => "\\b",
                0x0c => "\\f",
                0..=0x1f => "",
                _ => continue,
            };
            out.push_str(s.get(start..i).unwrap_or_default());
            if esc.is_empty() {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.push_str("\\u00");
                out.push(HEX[usize::from(b >> 4)].into());
                out.push(HEX[usize::from(b & 15)].into());
            } else {
                out.push_str(esc);
            }
            start = i + 1;
        }
        out.push_str(s.get(start..).unwrap_or_default());
        out.push('"');
        self
    }

    /// An unsigned integer.
    #[inline(never)]
    pub(crate) fn u64(&mut self, n: u64) -> &mut Self {
        self.sep();
        let _ = write!(self.out, "{n}");
        self
    }

    /// A number as serde_json writes an `f64` (`null` when not finite).
    pub(crate) fn f64(&mut self, x: f64) -> &mut Self {
        match serde_json::Number::from_f64(x) {
            Some(n) => self.number(&n),
            None => self.null(),
        }
    }

    #[inline(never)]
    fn number(&mut self, n: &serde_json::Number) -> &mut Self {
        self.sep();
        let _ = write!(self.out, "{n}");
        self
    }

    /// `true` or `false`.
    pub(crate) fn bool(&mut self, b: bool) -> &mut Self {
        self.raw(if b { "true" } else { "false" })
    }

    /// `null`.
    pub(crate) fn null(&mut self) -> &mut Self {
        self.raw("null")
    }

    /// Any JSON value (object keys in the value's order).
    pub(crate) fn value(&mut self, v: &Value) -> &mut Self {
        match v {
            Value::Null => self.null(),
            Value::Bool(b) => self.bool(*b),
            Value::Number(n) => self.number(n),
            Value::String(s) => self.str(s),
            Value::Array(items) => {
                self.open_array();
                for item in items {
                    self.value(item);
                }
                self.close_array()
            }
            Value::Object(map) => {
                self.open();
                for (k, v) in map {
                    self.key(k).value(v);
                }
                self.close()
            }
        }
    }

    /// `"k":"v"`.
    #[inline(never)]
    pub(crate) fn s(&mut self, k: &str, v: &str) -> &mut Self {
        self.key(k).str(v)
    }

    /// `"k":n`.
    #[inline(never)]
    pub(crate) fn n(&mut self, k: &str, v: u64) -> &mut Self {
        self.key(k).u64(v)
    }

    /// `"k":true`.
    pub(crate) fn b(&mut self, k: &str, v: bool) -> &mut Self {
        self.key(k).bool(v)
    }

    /// `"k":"v"`, or `"k":null`.
    #[inline(never)]
    pub(crate) fn opt_s(&mut self, k: &str, v: Option<&str>) -> &mut Self {
        self.key(k);
        match v {
            Some(v) => self.str(v),
            None => self.null(),
        }
    }

    /// `"k":n`, or `"k":null`.
    #[inline(never)]
    pub(crate) fn opt_n(&mut self, k: &str, v: Option<u64>) -> &mut Self {
        self.key(k);
        match v {
            Some(v) => self.u64(v),
            None => self.null(),
        }
    }

    /// `"k":"v"`, or nothing.
    #[inline(never)]
    pub(crate) fn some_s(&mut self, k: &str, v: Option<&str>) -> &mut Self {
        if let Some(v) = v {
            self.s(k, v);
        }
        self
    }

    /// `"k":n`, or nothing.
    #[inline(never)]
    pub(crate) fn some_n(&mut self, k: &str, v: Option<u64>) -> &mut Self {
        if let Some(v) = v {
            self.n(k, v);
        }
        self
    }
}

/// `v` as compact JSON text, as serde_json writes it.
pub(crate) fn text_of(v: &Value) -> String {
    Json::text(|j| {
        j.value(v);
    })
}

/// What `write` writes, as a [`Value`] (objects with their keys sorted, as
/// `serde_json::to_value` builds them).
pub(crate) fn to_value(write: impl FnOnce(&mut Json)) -> Value {
    crate::config::read::parse_value(Json::text(write).as_bytes()).unwrap_or(Value::Null)
}

// ------------------------------------------------------------------ values

/// A [`Value`] from a Rust value, as `serde_json::to_value` makes it, for
/// the few types the crate puts in JSON, without a serializer per type.
pub(crate) trait ToJson {
    /// The value.
    fn to_json(&self) -> Value;
}

impl ToJson for str {
    fn to_json(&self) -> Value {
        Value::String(self.to_string())
    }
}

impl ToJson for String {
    fn to_json(&self) -> Value {
        Value::String(self.clone())
    }
}

impl ToJson for bool {
    fn to_json(&self) -> Value {
        Value::Bool(*self)
    }
}

impl ToJson for i32 {
    fn to_json(&self) -> Value {
        Value::from(*self)
    }
}

impl ToJson for u32 {
    fn to_json(&self) -> Value {
        Value::from(*self)
    }
}

impl ToJson for u64 {
    fn to_json(&self) -> Value {
        Value::from(*self)
    }
}

impl ToJson for usize {
    fn to_json(&self) -> Value {
        Value::from(*self)
    }
}

impl ToJson for f64 {
    fn to_json(&self) -> Value {
        serde_json::Number::from_f64(*self).map_or(Value::Null, Value::Number)
    }
}

impl ToJson for Value {
    fn to_json(&self) -> Value {
        self.clone()
    }
}

impl ToJson for serde_json::Map<String, Value> {
    fn to_json(&self) -> Value {
        Value::Object(self.clone())
    }
}

impl<T: ToJson> ToJson for [T] {
    fn to_json(&self) -> Value {
        Value::Array(self.iter().map(ToJson::to_json).collect())
    }
}

impl<T: ToJson> ToJson for Vec<T> {
    fn to_json(&self) -> Value {
        self.as_slice().to_json()
    }
}

impl<T: ToJson> ToJson for Option<T> {
    fn to_json(&self) -> Value {
        self.as_ref().map_or(Value::Null, ToJson::to_json)
    }
}

impl<T: ToJson + ?Sized> ToJson for &T {
    fn to_json(&self) -> Value {
        (**self).to_json()
    }
}

/// `v` as a [`Value`].
pub(crate) fn to_json<T: ToJson + ?Sized>(v: &T) -> Value {
    v.to_json()
}

/// Sets `key` of an object (`v[key] = value` without the panic for a
/// non-object, which the crate never indexes).
pub(crate) fn set(v: &mut Value, key: &str, value: Value) {
    if let Value::Object(m) = v {
        put(m, key, value);
    }
}

/// Sets `key` in an object under construction.
#[inline(never)]
pub(crate) fn put(object: &mut serde_json::Map<String, Value>, key: &str, value: Value) {
    object.insert(key.to_string(), value);
}

/// `serde_json::json!` for the crate's own values: the same syntax (string
/// keys, nested objects and arrays, expressions) and the same values, with
/// expressions converted by [`ToJson`] instead of a serializer per type.
macro_rules! json_value {
    (null) => {
        serde_json::Value::Null
    };
    ([]) => {
        serde_json::Value::Array(Vec::new())
    };
    ([ $($tt:tt)+ ]) => {
        serde_json::Value::Array($crate::json::json_value!(@array [] $($tt)+))
    };
    ({}) => {
        serde_json::Value::Object(serde_json::Map::new())
    };
    ({ $($tt:tt)+ }) => {{
        let mut object = serde_json::Map::new();
        $crate::json::json_value!(@object object ($($tt)+));
        serde_json::Value::Object(object)
    }};
    (@array [$($elems:expr,)*]) => {
        vec![$($elems,)*]
    };
    (@array [$($elems:expr,)*] null $(, $($rest:tt)*)?) => {
        $crate::json::json_value!(@array [$($elems,)* serde_json::Value::Null,] $($($rest)*)?)
    };
    (@array [$($elems:expr,)*] [$($array:tt)*] $(, $($rest:tt)*)?) => {
        $crate::json::json_value!(@array [$($elems,)* $crate::json::json_value!([$($array)*]),] $($($rest)*)?)
    };
    (@array [$($elems:expr,)*] {$($map:tt)*} $(, $($rest:tt)*)?) => {
        $crate::json::json_value!(@array [$($elems,)* $crate::json::json_value!({$($map)*}),] $($($rest)*)?)
    };
    (@array [$($elems:expr,)*] $next:expr $(, $($rest:tt)*)?) => {
        $crate::json::json_value!(@array [$($elems,)* $crate::json::to_json(&$next),] $($($rest)*)?)
    };
    (@object $object:ident ()) => {};
    (@object $object:ident ($key:literal : null $(, $($rest:tt)*)?)) => {
        $crate::json::put(&mut $object, $key, serde_json::Value::Null);
        $crate::json::json_value!(@object $object ($($($rest)*)?));
    };
    (@object $object:ident ($key:literal : [$($array:tt)*] $(, $($rest:tt)*)?)) => {
        $crate::json::put(&mut $object, $key, $crate::json::json_value!([$($array)*]));
        $crate::json::json_value!(@object $object ($($($rest)*)?));
    };
    (@object $object:ident ($key:literal : {$($map:tt)*} $(, $($rest:tt)*)?)) => {
        $crate::json::put(&mut $object, $key, $crate::json::json_value!({$($map)*}));
        $crate::json::json_value!(@object $object ($($($rest)*)?));
    };
    (@object $object:ident ($key:literal : $value:expr $(, $($rest:tt)*)?)) => {
        $crate::json::put(&mut $object, $key, $crate::json::to_json(&$value));
        $crate::json::json_value!(@object $object ($($($rest)*)?));
    };
    ($other:expr) => {
        $crate::json::to_json(&$other)
    };
}
pub(crate) use json_value;

// ------------------------------------------------------------------ shapes

use crate::breaker::StateName;
use crate::chat::Usage;
use crate::error::{Attempt, AttemptOutcome, ErrorKind, ProviderError};
use crate::platform::millis;
use crate::stats::{Health, LastFailure, Latency};

#[cfg(any(test, all(target_arch = "wasm32", feature = "worker")))]
pub(crate) mod fleet;
#[cfg(any(test, all(target_arch = "wasm32", feature = "js")))]
pub(crate) mod js;

impl ErrorKind {
    /// The wire name (`rate_limited`, …), as serde writes it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ErrorKind::RateLimited => "rate_limited",
            ErrorKind::QuotaExhausted => "quota_exhausted",
            ErrorKind::Server => "server",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Stalled => "stalled",
            ErrorKind::Transport => "transport",
            ErrorKind::Auth => "auth",
            ErrorKind::NotFound => "not_found",
            ErrorKind::ContextLength => "context_length",
            ErrorKind::ContentFilter => "content_filter",
            ErrorKind::InvalidRequest => "invalid_request",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Decode => "decode",
            ErrorKind::CircuitOpen => "circuit_open",
            ErrorKind::DeadlineExceeded => "deadline_exceeded",
        }
    }
}

impl StateName {
    /// The wire name (`half_open`), as serde writes it.
    pub(crate) fn wire(self) -> &'static str {
        match self {
            StateName::Closed => "closed",
            StateName::Open => "open",
            StateName::HalfOpen => "half_open",
        }
    }
}

impl ProviderError {
    pub(crate) fn write_json(&self, j: &mut Json) {
        j.open()
            .s("kind", self.kind.name())
            .some_n("status", self.status.map(u64::from))
            .some_s("code", self.code.as_deref())
            .s("message", &self.message)
            .some_n("retryAfterMs", self.retry_after.map(millis));
        if let Some(b) = self.should_retry {
            j.b("shouldRetry", b);
        }
        j.close();
    }
}

impl Attempt {
    pub(crate) fn write_json(&self, j: &mut Json) {
        j.open()
            .s("provider", &self.provider)
            .s("model", &self.model)
            .n("number", self.number.into())
            .n("startedAt", self.started_at)
            .n("durationMs", millis(self.duration))
            .b("reached", self.reached)
            .key("outcome")
            .open();
        match &self.outcome {
            AttemptOutcome::Success => {
                j.s("result", "success");
            }
            AttemptOutcome::Failure { error } => {
                j.s("result", "failure").key("error");
                error.write_json(j);
            }
        }
        j.close().close();
    }
}

impl Usage {
    pub(crate) fn write_json(&self, j: &mut Json) {
        j.open()
            .n("inputTokens", self.input_tokens)
            .n("outputTokens", self.output_tokens)
            .close();
    }
}

impl Latency {
    fn write_json(&self, j: &mut Json) {
        j.open()
            .opt_n("p50", self.p50)
            .opt_n("p95", self.p95)
            .opt_n("p99", self.p99)
            .close();
    }
}

impl LastFailure {
    fn write_json(&self, j: &mut Json) {
        j.open()
            .n("at", self.at)
            .s("kind", self.kind.name())
            .opt_n("status", self.status.map(u64::from))
            .s("message", &self.message)
            .close();
    }
}

impl Health {
    pub(crate) fn write_json(&self, j: &mut Json) {
        j.open()
            .s("provider", &self.provider)
            .s("state", self.state.wire())
            .opt_n("openUntil", self.open_until)
            .n("consecutiveFailures", self.consecutive_failures.into())
            .n("requests", self.requests)
            .n("failures", self.failures)
            .key("errorRate")
            .f64(self.error_rate)
            .key("latencyMs");
        self.latency_ms.write_json(j);
        j.key("ttftMs");
        self.ttft_ms.write_json(j);
        j.key("tokensPerSec");
        match self.tokens_per_sec {
            Some(x) => j.f64(x),
            None => j.null(),
        };
        j.key("lastFailure");
        match &self.last_failure {
            Some(f) => f.write_json(j),
            None => {
                j.null();
            }
        }
        j.close();
    }
}

#[cfg(test)]
mod tests {
    use super::Json;
    use serde_json::json;

    #[test]
    fn json_values_are_serde_json_values() {
        let s = String::from("s");
        let none: Option<&str> = None;
        let list = vec!["a".to_string(), "b".to_string()];
        let v = json!({"n": 5u32});
        assert_eq!(
            super::json_value!({
                "a": "x", "b": s, "c": 1u64, "d": -0.5, "e": f64::NAN, "f": true, "g": null,
                "h": [1u32, "y", null, {"i": [], "j": {}}, [false]], "k": none, "l": Some(&s),
                "m": list, "v": v, "w": {"x": {"y": 2usize}}, "z": &list[..]
            }),
            json!({
                "a": "x", "b": s, "c": 1u64, "d": -0.5, "e": f64::NAN, "f": true, "g": null,
                "h": [1u32, "y", null, {"i": [], "j": {}}, [false]], "k": none, "l": Some(&s),
                "m": list, "v": v, "w": {"x": {"y": 2usize}}, "z": &list[..]
            })
        );
        assert_eq!(super::json_value!("t"), json!("t"));
        assert_eq!(super::json_value!([]), json!([]));
        assert_eq!(super::json_value!({}), json!({}));
    }

    #[test]
    fn strings_and_values_are_written_as_serde_json_writes_them() {
        for s in [
            "",
            "plain",
            "q\"b\\s/",
            "\n\r\t\u{8}\u{c}\u{0}\u{1f}\u{7f}",
            "é ✓ 😀",
        ] {
            assert_eq!(
                Json::text(|j| {
                    j.str(s);
                }),
                serde_json::to_string(s).unwrap()
            );
        }
        let v = json!({"b": [1, -2, 1.5, 1e300, 0.1, null, true, false, "x\u{1}"],
                       "a": {"z": {}, "y": []}, "c": 18446744073709551615u64});
        assert_eq!(
            Json::text(|j| {
                j.value(&v);
            }),
            serde_json::to_string(&v).unwrap()
        );
        for x in [
            0.0,
            -0.0,
            1.0,
            2.5e-8,
            f64::NAN,
            f64::INFINITY,
            123456789.125,
        ] {
            assert_eq!(
                Json::text(|j| {
                    j.f64(x);
                }),
                serde_json::to_string(&x).unwrap()
            );
        }
        let mut j = Json::new();
        j.open()
            .s("a", "x")
            .n("b", 1)
            .b("c", false)
            .opt_s("d", None)
            .opt_n("e", Some(2))
            .some_s("f", None)
            .some_n("g", Some(3))
            .key("h")
            .open_array()
            .u64(1)
            .open()
            .close()
            .close_array()
            .close();
        assert_eq!(
            j.finish(),
            r#"{"a":"x","b":1,"c":false,"d":null,"e":2,"g":3,"h":[1,{}]}"#
        );
    }
}

/// Each writer against the derived `Serialize` it stands in for: the same
/// text, byte for byte.
#[cfg(test)]
mod golden {
    use std::time::Duration;

    use serde::Serialize;
    use serde_json::{json, Value};

    use super::js::{self, Init};
    use super::Json;
    use crate::breaker::StateName;
    use crate::chain::{Reply, ServedBy};
    use crate::chat::{
        ChatRequest, ChatResponse, Delta, FinishReason, Message, Part, Role, Tool, ToolCall,
        ToolChoice, Usage,
    };
    use crate::config::ConfigIssue;
    use crate::error::{Attempt, AttemptOutcome, ErrorKind, ProviderError};
    use crate::event::Event;
    use crate::platform::millis;
    use crate::stats::ProviderStats;

    fn text(write: impl FnOnce(&mut Json)) -> String {
        Json::text(write)
    }

    fn same<T: Serialize>(value: &T, write: impl FnOnce(&mut Json)) {
        assert_eq!(text(write), serde_json::to_string(value).unwrap());
    }

    fn errors() -> Vec<ProviderError> {
        let mut full = ProviderError::new(ErrorKind::RateLimited, "slow \"down\"\n")
            .with_status(429)
            .with_code("rate_limit")
            .with_retry_after(Some(Duration::from_millis(1500)));
        full.should_retry = Some(false);
        vec![
            ProviderError::new(ErrorKind::Timeout, ""),
            full,
            ProviderError::new(ErrorKind::Server, "x").with_status(503),
        ]
    }

    fn attempts() -> Vec<Attempt> {
        let mut out = vec![Attempt {
            provider: "p".into(),
            model: "m".into(),
            number: 1,
            started_at: 1_700_000_000_000,
            duration: Duration::from_micros(2_500_700),
            reached: true,
            outcome: AttemptOutcome::Success,
        }];
        for (i, error) in errors().into_iter().enumerate() {
            out.push(Attempt {
                provider: format!("q{i}"),
                model: "é".into(),
                number: i as u32,
                started_at: 5,
                duration: Duration::ZERO,
                reached: i % 2 == 0,
                outcome: AttemptOutcome::Failure { error },
            });
        }
        out
    }

    fn parts() -> Vec<Part> {
        vec![
            Part::Text { text: "hi".into() },
            Part::ToolCall(ToolCall {
                id: "c1".into(),
                name: "f".into(),
                arguments: "{\"a\":1}".into(),
            }),
            Part::ToolResult {
                tool_call_id: "c1".into(),
                content: "ok".into(),
                is_error: false,
            },
            Part::ToolResult {
                tool_call_id: "c2".into(),
                content: "no".into(),
                is_error: true,
            },
        ]
    }

    #[test]
    fn core_shapes() {
        for kind in ErrorKind::ALL {
            same(&kind, |j| {
                j.str(kind.name());
            });
        }
        for s in [StateName::Closed, StateName::Open, StateName::HalfOpen] {
            same(&s, |j| {
                j.str(s.wire());
            });
        }
        for e in errors() {
            same(&e, |j| e.write_json(j));
        }
        for a in attempts() {
            same(&a, |j| a.write_json(j));
        }
        for p in parts() {
            same(&p, |j| p.write_json(j));
        }
        let u = Usage {
            input_tokens: 3,
            output_tokens: u64::MAX,
        };
        same(&u, |j| u.write_json(j));
        for t in [
            Tool {
                name: "f".into(),
                description: None,
                parameters: json!({"type": "object", "properties": {"b": {}, "a": [1.5]}}),
            },
            Tool {
                name: "g".into(),
                description: Some("does g".into()),
                parameters: Value::Null,
            },
        ] {
            same(&t, |j| t.write_json(j));
        }
        for c in [
            ToolChoice::Auto,
            ToolChoice::None,
            ToolChoice::Required,
            ToolChoice::Tool("f".into()),
        ] {
            same(&c, |j| c.write_json(j));
        }
        let reasons = [
            FinishReason::Stop,
            FinishReason::Length,
            FinishReason::ToolCalls,
            FinishReason::ContentFilter,
            FinishReason::Other("pause_turn".into()),
        ];
        for r in &reasons {
            same(r, |j| r.write_json(j));
        }
        let mut deltas = vec![
            Delta::Start { model: None },
            Delta::Start {
                model: Some("m".into()),
            },
            Delta::Text { text: "t".into() },
            Delta::ToolCall {
                index: 2,
                id: Some("c".into()),
                name: None,
                arguments: "{".into(),
            },
            Delta::ToolCall {
                index: 0,
                id: None,
                name: Some("f".into()),
                arguments: String::new(),
            },
            Delta::Usage { usage: u },
            Delta::Done,
        ];
        deltas.extend(reasons.iter().map(|r| Delta::Finish { reason: r.clone() }));
        for d in &deltas {
            same(d, |j| d.write_json(j));
        }
        for label in [None, Some("primary".to_string())] {
            let s = ServedBy {
                provider: "p".into(),
                model: "m".into(),
                label,
            };
            same(&s, |j| s.write_json(j));
        }
    }

    #[test]
    fn health_and_events() {
        let mut s = ProviderStats::default();
        let h = s.health("p", None);
        same(&h, |j| h.write_json(j));
        s.record(1, 10, None);
        s.record(2, 30, Some(&errors()[1]));
        s.record_stream(100, 50, 1000);
        s.record_stream(300, 0, 1000);
        s.record_stream(200, 7, 3000);
        let h = s.health("q", Some((crate::breaker::State::Open { until: 99 }, 2)));
        same(&h, |j| h.write_json(j));
        s.record(3, 20, Some(&errors()[0]));
        let h = s.health(
            "r",
            Some((
                crate::breaker::State::HalfOpen {
                    in_flight: 1,
                    successes: 0,
                },
                0,
            )),
        );
        same(&h, |j| h.write_json(j));

        let e = &errors()[1];
        let events = [
            Event::Retry {
                provider: "p",
                model: "m",
                attempt: 2,
                delay: Duration::from_millis(250),
                error: e,
            },
            Event::ProviderFailed {
                provider: "p",
                model: "m",
                error: e,
            },
            Event::Failover {
                from: "p",
                to: "q",
                error: e,
            },
            Event::Breaker {
                provider: "p",
                from: StateName::Closed,
                to: StateName::HalfOpen,
            },
            Event::MalformedChunk {
                provider: "p",
                error: e,
            },
            Event::BudgetExhausted { provider: "p" },
        ];
        for ev in &events {
            same(ev, |j| ev.write_json(j));
        }
    }

    // ---- the npm package's shapes, as they were derived

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct AttemptJs<'a> {
        provider: &'a str,
        model: &'a str,
        attempt: u32,
        ok: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        kind: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        status: Option<u16>,
        #[serde(skip_serializing_if = "Option::is_none")]
        code: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        message: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        retry_after_ms: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        retryable: Option<bool>,
        duration_ms: u64,
        started_at: u64,
        reached: bool,
    }

    impl<'a> AttemptJs<'a> {
        fn new(a: &'a Attempt) -> Self {
            let error = a.error();
            AttemptJs {
                provider: &a.provider,
                model: &a.model,
                attempt: a.number,
                ok: error.is_none(),
                kind: error.map(|e| e.kind.name().to_string()),
                status: error.and_then(|e| e.status),
                code: error.and_then(|e| e.code.as_deref()),
                message: error.map(|e| e.message.as_str()),
                retry_after_ms: error.and_then(|e| e.retry_after).map(millis),
                retryable: error.map(ProviderError::is_retryable),
                duration_ms: millis(a.duration),
                started_at: a.started_at,
                reached: a.reached,
            }
        }
    }

    #[derive(Serialize, Default)]
    #[serde(rename_all = "camelCase")]
    struct InitDerived<'a> {
        kind: String,
        retryable: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        status: Option<u16>,
        #[serde(skip_serializing_if = "Option::is_none")]
        retry_after_ms: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        code: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        provider: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        attempts: Option<Vec<AttemptJs<'a>>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        failures: Option<Vec<AttemptJs<'a>>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        issues: Option<Vec<Issue<'a>>>,
    }

    #[derive(Serialize)]
    struct Issue<'a> {
        path: &'a str,
        message: &'a str,
    }

    #[derive(Serialize)]
    #[serde(untagged)]
    enum Content {
        Text(String),
        Parts(Vec<Part>),
    }

    #[derive(Serialize)]
    struct JsMessage {
        role: Role,
        content: Content,
    }

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct ProviderRequest<'a> {
        model: &'a str,
        messages: Vec<JsMessage>,
        #[serde(skip_serializing_if = "Option::is_none")]
        max_tokens: Option<u32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        temperature: Option<f64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        top_p: Option<f64>,
        #[serde(skip_serializing_if = "<[_]>::is_empty")]
        stop: &'a [String],
        #[serde(skip_serializing_if = "<[_]>::is_empty")]
        tools: &'a [Tool],
        #[serde(skip_serializing_if = "Option::is_none")]
        tool_choice: Option<&'a ToolChoice>,
        #[serde(skip_serializing_if = "Option::is_none")]
        metadata: Option<&'a Value>,
    }

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct ChatResult<'a> {
        text: &'a str,
        model: &'a str,
        provider: &'a str,
        served_by: &'a ServedBy,
        attempts: Vec<AttemptJs<'a>>,
        usage: Option<&'a Usage>,
        finish_reason: Option<&'a str>,
        tool_calls: &'a [ToolCall],
        raw: &'a Value,
    }

    #[test]
    fn npm_package_shapes() {
        let list = attempts();
        for a in &list {
            same(&AttemptJs::new(a), |j| js::attempt(j, a));
        }
        for e in errors() {
            for provider in [None, Some("p")] {
                let derived = InitDerived {
                    kind: e.kind.name().to_string(),
                    retryable: e.is_retryable(),
                    status: e.status,
                    retry_after_ms: e.retry_after.map(millis),
                    code: e.code.as_deref(),
                    provider,
                    attempts: Some(list.iter().map(AttemptJs::new).collect()),
                    ..InitDerived::default()
                };
                same(&derived, |j| {
                    Init {
                        attempts: Some(&list),
                        ..Init::of(&e, provider)
                    }
                    .write(j)
                });
            }
        }
        let issues = [
            ConfigIssue::new("routes.default[0].provider", "unknown provider \"x\""),
            ConfigIssue::new("(root)", "bad"),
        ];
        let derived = InitDerived {
            kind: "config".into(),
            issues: Some(
                issues
                    .iter()
                    .map(|i| Issue {
                        path: &i.path,
                        message: &i.message,
                    })
                    .collect(),
            ),
            ..InitDerived::default()
        };
        same(&derived, |j| {
            Init {
                kind: "config",
                issues: Some(&issues),
                ..Init::default()
            }
            .write(j)
        });
        let derived = InitDerived {
            kind: "all_providers_failed".into(),
            retryable: true,
            status: Some(503),
            retry_after_ms: Some(7),
            failures: Some(list.iter().map(AttemptJs::new).collect()),
            ..InitDerived::default()
        };
        same(&derived, |j| {
            Init {
                kind: "all_providers_failed",
                retryable: true,
                status: Some(503),
                retry_after_ms: Some(7),
                failures: Some(&list),
                ..Init::default()
            }
            .write(j)
        });

        let mut full = ChatRequest::new(vec![
            Message::system("be brief"),
            Message {
                role: Role::Assistant,
                content: parts(),
            },
            Message {
                role: Role::Tool,
                content: vec![],
            },
            Message {
                role: Role::User,
                content: vec![
                    Part::Text { text: "a".into() },
                    Part::Text { text: "b".into() },
                ],
            },
        ]);
        full.max_tokens = Some(100);
        full.temperature = Some(0.7);
        full.top_p = Some(1.0);
        full.stop = vec!["\n\n".into(), "END".into()];
        full.tools = vec![Tool {
            name: "f".into(),
            description: Some("d".into()),
            parameters: json!({"type": "object"}),
        }];
        full.tool_choice = Some(ToolChoice::Tool("f".into()));
        full.metadata = Some(json!({"user_id": "u", "n": [1, 2.5]}));
        for req in [ChatRequest::new(vec![Message::user("hi")]), full] {
            let derived = ProviderRequest {
                model: "m",
                messages: req
                    .messages
                    .iter()
                    .map(|m| JsMessage {
                        role: m.role,
                        content: if m.content.iter().all(|p| matches!(p, Part::Text { .. })) {
                            Content::Text(m.joined_text())
                        } else {
                            Content::Parts(m.content.clone())
                        },
                    })
                    .collect(),
                max_tokens: req.max_tokens,
                temperature: req.temperature,
                top_p: req.top_p,
                stop: &req.stop,
                tools: &req.tools,
                tool_choice: req.tool_choice.as_ref(),
                metadata: req.metadata.as_ref(),
            };
            same(&derived, |j| js::provider_request(j, &req, "m"));
        }

        for (usage, finish, raw) in [
            (None, None, Value::Null),
            (
                Some(Usage {
                    input_tokens: 1,
                    output_tokens: 2,
                }),
                Some(FinishReason::Other("x".into())),
                json!({"id": "r", "choices": [{"a": null}]}),
            ),
        ] {
            let reply = Reply {
                response: ChatResponse {
                    text: "hello".into(),
                    tool_calls: vec![ToolCall {
                        id: "c".into(),
                        name: "f".into(),
                        arguments: "{}".into(),
                    }],
                    model: "m-2025".into(),
                    provider: "p".into(),
                    finish_reason: finish,
                    usage,
                    raw: crate::chat::RawJson::from_value(&raw).ok(),
                },
                served_by: ServedBy {
                    provider: "p".into(),
                    model: "m".into(),
                    label: Some("l".into()),
                },
                attempts: list.clone(),
            };
            let r = &reply.response;
            let derived = ChatResult {
                text: &r.text,
                model: &r.model,
                provider: &r.provider,
                served_by: &reply.served_by,
                attempts: reply.attempts.iter().map(AttemptJs::new).collect(),
                usage: r.usage.as_ref(),
                finish_reason: r.finish_reason.as_ref().map(js::finish_reason_name),
                tool_calls: &r.tool_calls,
                raw: &r.raw_value().unwrap_or_default(),
            };
            same(&derived, |j| js::chat_result(j, &reply));
        }
    }
}
