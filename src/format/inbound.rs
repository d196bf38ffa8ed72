//! Pieces of a client's request that more than one client format spells
//! alike, read once for the readers of Chat Completions, Messages and
//! Responses: where gaps are recorded, text and image parts, a tool
//! result's text and images, function tools and tool choice, a JSON schema
//! response format, a reasoning effort and lists of strings.
//!
//! Where Chat Completions nests a piece in an object that Responses spells
//! flat (`{"type":"function","function":{"name":…}}` against
//! `{"type":"function","name":…}`), a reader takes `nested`: the key of
//! the inner object, or `None` for the flat spelling.

use serde_json::{json, Value};

use crate::chat::{
    ChatRequest, Dialect, Gap, Image, JsonSchema, Part, Reasoning, ResponseFormat, Tool,
    ToolChoice, Untranslated,
};
use crate::format::mapping::{self, GapFn};
use crate::format::{index, Fields, FormatError};

/// The neutral request's fields that every client format reads alike —
/// `model`, `temperature`, `top_p`, `stream`, `service_tier` — and the gaps found
/// while reading the rest, with their values. Each format's reader sets
/// its own fields over it.
pub(crate) fn request_tail(
    f: &Fields<'_>,
    gaps: Vec<Untranslated>,
) -> Result<ChatRequest, FormatError> {
    Ok(ChatRequest {
        model: Some(f.req_str("model")?.to_string()),
        temperature: f.f64("temperature")?,
        top_p: f.f64("top_p")?,
        stream: f.bool("stream")?.unwrap_or(false),
        service_tier: f.str("service_tier")?.map(str::to_string),
        untranslated: super::with_values(gaps, f),
        ..ChatRequest::default()
    })
}

/// A piece at `path` that a reader of `dialect` cannot translate, without
/// its value (added by [`super::with_values`]).
pub(crate) fn untranslated(dialect: Dialect, path: String, gap: Gap) -> Untranslated {
    Untranslated {
        path,
        gap,
        dialect,
        value: None,
    }
}

/// `f`, or the object at its field `nested`, which is then required.
fn inner<'a>(f: &Fields<'a>, nested: Option<&str>) -> Result<Fields<'a>, FormatError> {
    match nested {
        None => Ok(Fields {
            map: f.map,
            path: f.path.clone(),
        }),
        Some(key) => f.req_object(key),
    }
}

/// A `text` part or block: its `text` and `cache_control`.
pub(crate) fn text_part(b: &Fields<'_>) -> Result<Part, FormatError> {
    Ok(Part::Text {
        text: b.req_str("text")?.to_string(),
        cache_control: b.get("cache_control").cloned(),
    })
}

/// An image at `url` (field `url_key` of `f`, whose `detail` it takes),
/// `None` for a `data:` URL that is not base64, recorded at the URL.
pub(crate) fn url_image(
    f: &Fields<'_>,
    url_key: &str,
    url: &str,
    cache_control: Option<Value>,
    gap: &mut GapFn<'_>,
) -> Result<Option<Image>, FormatError> {
    match mapping::image_source(url) {
        Some(source) => Ok(Some(Image {
            source,
            detail: f.str("detail")?.map(str::to_string),
            cache_control,
        })),
        None => {
            gap(f.path(url_key), Gap::NoEquivalent);
            Ok(None)
        }
    }
}

/// Parts given as a tool's result: their text joined, and their images.
pub(crate) fn text_and_images(parts: Vec<Part>) -> (String, Vec<Image>) {
    let mut text = String::new();
    let mut images = Vec::new();
    for p in parts {
        match p {
            Part::Text { text: t, .. } => text.push_str(&t),
            Part::Image(image) => images.push(image),
            Part::ToolCall(_) | Part::ToolResult { .. } | Part::Thinking(_) => {}
        }
    }
    (text, images)
}

/// A `function` tool (its definition at `nested`), `None` for another
/// kind (recorded: no equivalent). `strict` is a hint.
pub(crate) fn function_tool(
    t: &Fields<'_>,
    nested: Option<&str>,
    cache_control: Option<Value>,
    gap: &mut GapFn<'_>,
) -> Result<Option<Tool>, FormatError> {
    if t.req_str("type")? != "function" {
        gap(t.path("type"), Gap::NoEquivalent);
        return Ok(None);
    }
    let function = inner(t, nested)?;
    if function.bool("strict")? == Some(true) {
        gap(function.path("strict"), Gap::Hint);
    }
    Ok(Some(Tool {
        name: function.req_str("name")?.to_string(),
        description: function.str("description")?.map(str::to_string),
        parameters: function
            .get("parameters")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
        cache_control,
    }))
}

/// `tool_choice`: `auto`, `none`, `required`, or a function named at
/// `nested`; another kind is recorded (no equivalent).
pub(crate) fn tool_choice(
    v: Option<&Value>,
    nested: Option<&str>,
    gap: &mut GapFn<'_>,
) -> Result<Option<ToolChoice>, FormatError> {
    let path = "tool_choice";
    match v {
        None => Ok(None),
        Some(Value::String(s)) => match s.as_str() {
            "auto" => Ok(Some(ToolChoice::Auto)),
            "none" => Ok(Some(ToolChoice::None)),
            "required" => Ok(Some(ToolChoice::Required)),
            other => Err(FormatError::malformed(
                path,
                format!("unknown tool choice \"{other}\""),
            )),
        },
        Some(obj) => {
            let f = Fields::of(obj, path)?;
            if f.req_str("type")? != "function" {
                gap(path.into(), Gap::NoEquivalent);
                return Ok(None);
            }
            let function = inner(&f, nested)?;
            Ok(Some(ToolChoice::Tool(
                function.req_str("name")?.to_string(),
            )))
        }
    }
}

/// A response format `rf`: `text`, `json_object`, or `json_schema` (the
/// schema's fields at `nested`); another type is recorded at `rf`.
pub(crate) fn response_format(
    rf: &Fields<'_>,
    nested: Option<&str>,
    gap: &mut GapFn<'_>,
) -> Result<Option<ResponseFormat>, FormatError> {
    Ok(Some(match rf.req_str("type")? {
        "text" => ResponseFormat::Text,
        "json_object" => ResponseFormat::JsonObject,
        "json_schema" => {
            let s = inner(rf, nested)?;
            ResponseFormat::JsonSchema(JsonSchema {
                name: s.req_str("name")?.to_string(),
                description: s.str("description")?.map(str::to_string),
                schema: s
                    .get("schema")
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "object"})),
                strict: s.bool("strict")?,
            })
        }
        _ => {
            gap(rf.path.clone(), Gap::Unknown);
            return Ok(None);
        }
    }))
}

/// A reasoning effort level: `none` is no reasoning.
pub(crate) fn effort(level: Option<&str>) -> Option<Reasoning> {
    match level {
        None => None,
        Some("none") => Some(Reasoning::Disabled),
        Some(effort) => Some(Reasoning::Effort {
            effort: effort.to_string(),
        }),
    }
}

/// `values` (the array at `path`) as strings.
pub(crate) fn strings(values: &[Value], path: &str) -> Result<Vec<String>, FormatError> {
    values
        .iter()
        .enumerate()
        .map(|(i, s)| {
            s.as_str()
                .map(str::to_string)
                .ok_or_else(|| FormatError::malformed(index(path, i), "expected a string"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_gaps(_: String, gap: Gap) {
        panic!("unexpected gap {gap:?}");
    }

    #[test]
    fn nested_and_flat_spellings_read_alike_and_errors_name_the_inner_field() {
        let nested = json!({"type": "function", "function": {"name": "get", "strict": false}});
        let flat = json!({"type": "function", "name": "get", "strict": false});
        let read = |v: &Value, at: Option<&str>| {
            function_tool(&Fields::of(v, "tools[0]").unwrap(), at, None, &mut no_gaps)
        };
        let tool = read(&nested, Some("function")).unwrap().unwrap();
        assert_eq!(Some(tool), read(&flat, None).unwrap());
        let e = read(&json!({"type": "function"}), Some("function")).unwrap_err();
        assert_eq!(e.to_string(), "tools[0].function: required");
        let e = read(&json!({"type": "function"}), None).unwrap_err();
        assert_eq!(e.to_string(), "tools[0].name: required");
    }

    #[test]
    fn an_unknown_response_format_is_recorded_at_its_own_path() {
        let v = json!({"type": "grammar"});
        let mut gaps = Vec::new();
        let rf = Fields::of(&v, "text.format").unwrap();
        let read = response_format(&rf, None, &mut |path, gap| gaps.push((path, gap)));
        assert_eq!(read.unwrap(), None);
        assert_eq!(gaps, [("text.format".to_string(), Gap::Unknown)]);
    }
}
