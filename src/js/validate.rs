//! JS functions as answer validators: `options.validators`, by route name,
//! a function or an array of them, each `(answer) => boolean | { ok, reason }
//! | Promise<…>`. They run after the route's configured validators; an
//! answer one of them refuses escalates like any rejected answer.

use js_sys::{Array, Function, Promise};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

use crate::chat::{ChatResponse, ToolCall, Usage};
use crate::config::ConfigIssue;
use crate::format::openai::finish_reason_name;
use crate::js::errors::{prop, to_js};
use crate::provider::LocalFuture;
use crate::quality::AnswerCheck;

/// A JS function judging answers.
pub(crate) struct JsCheck {
    name: String,
    f: Function,
}

/// What the function is given: the answer as `client.chat` would return it,
/// without the attempts (not over yet).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct AnswerJs<'a> {
    text: &'a str,
    model: &'a str,
    provider: &'a str,
    usage: Option<&'a Usage>,
    finish_reason: Option<&'a str>,
    tool_calls: &'a [ToolCall],
    raw: Option<&'a crate::chat::RawJson>,
}

impl AnswerCheck for JsCheck {
    fn name(&self) -> &str {
        &self.name
    }

    fn check<'a>(&'a self, answer: &'a ChatResponse) -> LocalFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let value = to_js(&AnswerJs {
                text: &answer.text,
                model: &answer.model,
                provider: &answer.provider,
                usage: answer.usage.as_ref(),
                finish_reason: answer.finish_reason.as_ref().map(finish_reason_name),
                tool_calls: &answer.tool_calls,
                raw: answer.raw.as_ref(),
            });
            // A validator that throws cannot vouch for the answer: rejected.
            let returned = self
                .f
                .call1(&JsValue::NULL, &value)
                .map_err(|e| format!("threw: {}", thrown(&e)))?;
            let settled = JsFuture::from(Promise::resolve(&returned))
                .await
                .map_err(|e| format!("rejected its promise: {}", thrown(&e)))?;
            verdict(&settled)
        })
    }
}

/// `true` / `{ ok: true }` passes; `false` / `{ ok: false, reason }` fails.
fn verdict(v: &JsValue) -> Result<(), String> {
    if let Some(ok) = v.as_bool() {
        return if ok {
            Ok(())
        } else {
            Err("returned false".into())
        };
    }
    match prop(v, "ok").as_bool() {
        Some(true) => Ok(()),
        Some(false) => Err(prop(v, "reason")
            .as_string()
            .unwrap_or_else(|| "returned { ok: false }".into())),
        None => Err("returned neither a boolean nor { ok, reason }".into()),
    }
}

/// A thrown value's message, for the rejection's reason.
fn thrown(e: &JsValue) -> String {
    match e.dyn_ref::<js_sys::Error>() {
        Some(err) => String::from(err.message()),
        None => e.as_string().unwrap_or_else(|| "a non-Error value".into()),
    }
}

/// Reads `options.validators`: `(route, check)` pairs, in order.
pub(crate) fn read(options: &JsValue, issues: &mut Vec<ConfigIssue>) -> Vec<(String, JsCheck)> {
    let all = prop(options, "validators");
    if all.is_undefined() || all.is_null() {
        return Vec::new();
    }
    if !all.is_object() || Array::is_array(&all) {
        issues.push(ConfigIssue::new(
            "options.validators",
            "must be an object: route name → function or array of functions",
        ));
        return Vec::new();
    }
    let mut out = Vec::new();
    let entries = js_sys::Object::entries(all.unchecked_ref());
    for pair in entries.iter() {
        let pair = Array::from(&pair);
        let route = pair.get(0).as_string().unwrap_or_default();
        let value = pair.get(1);
        let path = format!("options.validators.{route}");
        let fns: Vec<(String, JsValue)> = if Array::is_array(&value) {
            Array::from(&value)
                .iter()
                .enumerate()
                .map(|(i, f)| (format!("{path}[{i}]"), f))
                .collect()
        } else {
            vec![(path, value)]
        };
        for (at, f) in fns {
            match f.dyn_into::<Function>() {
                Ok(f) => {
                    let name = String::from(f.name());
                    let name = if name.is_empty() {
                        "function".into()
                    } else {
                        name
                    };
                    out.push((route.clone(), JsCheck { name, f }));
                }
                Err(_) => issues.push(ConfigIssue::new(
                    at,
                    "must be a function (answer) => boolean | { ok, reason } | Promise",
                )),
            }
        }
    }
    out
}
