//! A neutral request as a `generateContent` body.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::chat::{
    ChatRequest, Gap, Hint, Image, ImageSource, Part, Reasoning, ResponseFormat, Role, ToolChoice,
};
use crate::format::{index, join, FormatError};

/// A `generateContent` request body, and the hints left out of it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestBody<'a> {
    contents: Vec<Content<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system_instruction: Option<SystemInstruction>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tools<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_config: Option<ToolConfig<'a>>,
    #[serde(skip_serializing_if = "GenerationConfig::is_empty")]
    generation_config: GenerationConfig<'a>,
    /// Fields of the request left out, for the `x-omitted-fields` header.
    #[serde(skip)]
    pub omitted: Vec<String>,
}

#[derive(Debug, Serialize)]
struct Content<'a> {
    role: &'static str,
    parts: Vec<OutPart<'a>>,
}

#[derive(Debug, Serialize)]
struct SystemInstruction {
    parts: Vec<TextPart>,
}

#[derive(Debug, Serialize)]
struct TextPart {
    text: String,
}

/// One part: exactly one member is set.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
enum OutPart<'a> {
    Text(&'a str),
    InlineData {
        #[serde(rename = "mimeType")]
        mime_type: &'a str,
        data: &'a str,
    },
    FileData {
        #[serde(rename = "mimeType")]
        mime_type: &'static str,
        #[serde(rename = "fileUri")]
        file_uri: &'a str,
    },
    FunctionCall {
        name: &'a str,
        args: Value,
    },
    FunctionResponse {
        name: &'a str,
        response: Value,
    },
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Tools<'a> {
    function_declarations: Vec<FunctionDeclaration<'a>>,
}

#[derive(Debug, Serialize)]
struct FunctionDeclaration<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    parameters: Value,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolConfig<'a> {
    function_calling_config: FunctionCallingConfig<'a>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct FunctionCallingConfig<'a> {
    mode: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    allowed_function_names: Vec<&'a str>,
}

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerationConfig<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_k: Option<u32>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    presence_penalty: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    frequency_penalty: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_mime_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_schema: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_config: Option<ThinkingConfig>,
}

impl GenerationConfig<'_> {
    fn is_empty(&self) -> bool {
        self.max_output_tokens.is_none()
            && self.temperature.is_none()
            && self.top_p.is_none()
            && self.top_k.is_none()
            && self.stop_sequences.is_empty()
            && self.seed.is_none()
            && self.presence_penalty.is_none()
            && self.frequency_penalty.is_none()
            && self.response_mime_type.is_none()
            && self.response_schema.is_none()
            && self.thinking_config.is_none()
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ThinkingConfig {
    thinking_budget: u32,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    include_thoughts: bool,
}

/// The members of a JSON Schema that Gemini's `responseSchema` (an OpenAPI
/// schema subset) refuses, left out wherever they appear.
const SCHEMA_MEMBERS_REFUSED: &[&str] = &["additionalProperties", "$schema", "$id"];

/// Encodes `req` as a `generateContent` body. System messages become
/// `systemInstruction`; assistant turns are `model` turns; tool results
/// are `functionResponse` parts of a user turn, named after the call they
/// answer; consecutive turns of one role are merged. What Gemini cannot
/// take is refused ([`FormatError::unsupported`]) or, for a hint, named in
/// `omitted`.
pub fn encode_request(req: &ChatRequest) -> Result<RequestBody<'_>, FormatError> {
    let mut omitted = Vec::new();
    for u in &req.untranslated {
        match u.gap {
            Gap::Hint => omitted.push(u.path.clone()),
            Gap::Unknown => {
                return Err(FormatError::unsupported(
                    &u.path,
                    "unknown field, cannot be translated for Gemini",
                ))
            }
            Gap::NoEquivalent => {
                return Err(FormatError::unsupported(
                    &u.path,
                    "not available from Gemini",
                ))
            }
        }
    }
    // Tool results name the call they answer by id; Gemini wants the
    // function's name, which the call carried.
    let names: HashMap<&str, &str> = req
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|p| match p {
            Part::ToolCall(c) => Some((c.id.as_str(), c.name.as_str())),
            _ => None,
        })
        .collect();
    let mut system = Vec::new();
    let mut contents: Vec<Content<'_>> = Vec::new();
    for (i, m) in req.messages.iter().enumerate() {
        let path = index("messages", i);
        if m.role == Role::System {
            for (j, p) in m.content.iter().enumerate() {
                match p {
                    Part::Text { text, .. } => system.push(TextPart { text: text.clone() }),
                    _ => {
                        return Err(FormatError::unsupported(
                            index(&join(&path, "content"), j),
                            "a system message holds only text for Gemini",
                        ))
                    }
                }
            }
            continue;
        }
        let role = match m.role {
            Role::Assistant => "model",
            Role::User | Role::Tool | Role::System => "user",
        };
        let mut parts = Vec::new();
        for (j, p) in m.content.iter().enumerate() {
            let at = index(&join(&path, "content"), j);
            match p {
                Part::Text {
                    text,
                    cache_control,
                } => {
                    if cache_control.is_some() {
                        omitted.push(join(&at, "cache_control"));
                    }
                    if !text.is_empty() {
                        parts.push(OutPart::Text(text));
                    }
                }
                Part::Image(image) => parts.push(image_part(image, &at)?),
                Part::ToolCall(call) => {
                    let args: Value = if call.arguments.trim().is_empty() {
                        Value::Object(Map::new())
                    } else {
                        serde_json::from_str(&call.arguments).map_err(|e| {
                            FormatError::malformed(join(&at, "arguments"), format!("not JSON: {e}"))
                        })?
                    };
                    parts.push(OutPart::FunctionCall {
                        name: &call.name,
                        args,
                    });
                }
                Part::ToolResult {
                    tool_call_id,
                    content,
                    images,
                    is_error,
                    ..
                } => {
                    let Some(name) = names.get(tool_call_id.as_str()) else {
                        return Err(FormatError::malformed(
                            join(&at, "tool_call_id"),
                            "answers no tool call of an earlier assistant message",
                        ));
                    };
                    if !images.is_empty() {
                        return Err(FormatError::unsupported(
                            join(&at, "images"),
                            "a tool result's images cannot be sent to Gemini",
                        ));
                    }
                    parts.push(OutPart::FunctionResponse {
                        name,
                        response: function_response(content, *is_error),
                    });
                }
                // Gemini's thoughts come back signed for its own use only:
                // earlier thinking is not sent again.
                Part::Thinking(_) => omitted.push(join(&at, "thinking")),
            }
        }
        if parts.is_empty() {
            continue;
        }
        match contents.last_mut() {
            Some(last) if last.role == role => last.parts.extend(parts),
            _ => contents.push(Content { role, parts }),
        }
    }
    let tools = if req.tools.is_empty() {
        Vec::new()
    } else {
        vec![Tools {
            function_declarations: req
                .tools
                .iter()
                .map(|t| FunctionDeclaration {
                    name: &t.name,
                    description: t.description.as_deref(),
                    parameters: schema(&t.parameters),
                })
                .collect(),
        }]
    };
    let tool_config = req.tool_choice.as_ref().map(|c| {
        let (mode, allowed) = match c {
            ToolChoice::Auto => ("AUTO", Vec::new()),
            ToolChoice::None => ("NONE", Vec::new()),
            ToolChoice::Required => ("ANY", Vec::new()),
            ToolChoice::Tool(name) => ("ANY", vec![name.as_str()]),
        };
        ToolConfig {
            function_calling_config: FunctionCallingConfig {
                mode,
                allowed_function_names: allowed,
            },
        }
    });
    let (response_mime_type, response_schema) = match &req.response_format {
        None | Some(ResponseFormat::Text) => (None, None),
        Some(ResponseFormat::JsonObject) => (Some("application/json"), None),
        Some(ResponseFormat::JsonSchema(s)) => (Some("application/json"), Some(schema(&s.schema))),
    };
    let thinking_config = match &req.reasoning {
        None => None,
        Some(Reasoning::Disabled) => Some(ThinkingConfig {
            thinking_budget: 0,
            include_thoughts: false,
        }),
        Some(Reasoning::Budget { budget_tokens }) => Some(ThinkingConfig {
            thinking_budget: *budget_tokens,
            include_thoughts: true,
        }),
        Some(Reasoning::Effort { .. } | Reasoning::Adaptive { .. }) => {
            omitted.push("reasoning_effort".into());
            None
        }
    };
    omitted.extend(req.omitted_hints(&[
        Hint::Metadata,
        Hint::ParallelToolCalls,
        Hint::ServiceTier,
        Hint::PromptCacheKey,
    ]));
    Ok(RequestBody {
        contents,
        system_instruction: (!system.is_empty()).then_some(SystemInstruction { parts: system }),
        tools,
        tool_config,
        generation_config: GenerationConfig {
            max_output_tokens: req.max_tokens,
            temperature: req.temperature,
            top_p: req.top_p,
            top_k: req.top_k,
            stop_sequences: &req.stop,
            seed: req.seed,
            presence_penalty: req.presence_penalty,
            frequency_penalty: req.frequency_penalty,
            response_mime_type,
            response_schema,
            thinking_config,
        },
        omitted,
    })
}

/// An image: inline bytes, or a Cloud Storage file (`gs://`), whose media
/// type Gemini requires and is read from its extension.
fn image_part<'a>(image: &'a Image, at: &str) -> Result<OutPart<'a>, FormatError> {
    match &image.source {
        ImageSource::Base64 { media_type, data } => Ok(OutPart::InlineData {
            mime_type: media_type,
            data,
        }),
        ImageSource::Url { url } => {
            let mime = url
                .rsplit('.')
                .next()
                .map(str::to_ascii_lowercase)
                .and_then(|ext| match ext.as_str() {
                    "png" => Some("image/png"),
                    "jpg" | "jpeg" => Some("image/jpeg"),
                    "webp" => Some("image/webp"),
                    "gif" => Some("image/gif"),
                    _ => None,
                });
            match mime {
                Some(mime_type) if url.starts_with("gs://") => Ok(OutPart::FileData {
                    mime_type,
                    file_uri: url,
                }),
                _ => Err(FormatError::unsupported(
                    at,
                    "Gemini on Vertex AI takes images inline (base64) or as gs:// files \
                     ending in .png, .jpg, .webp or .gif",
                )),
            }
        }
    }
}

/// A tool result as `functionResponse.response`, which must be an object:
/// a JSON object as it is, anything else under `content` (`error` for a
/// failed call).
fn function_response(content: &str, is_error: bool) -> Value {
    match serde_json::from_str::<Value>(content) {
        Ok(Value::Object(o)) if !is_error => Value::Object(o),
        Ok(_) | Err(_) => {
            let key = if is_error { "error" } else { "content" };
            let mut o = Map::new();
            o.insert(key.into(), Value::String(content.into()));
            Value::Object(o)
        }
    }
}

/// A JSON Schema with the members Gemini refuses left out, at every depth.
/// The keys of `properties` (and of `$defs`, `definitions`) are names, not
/// keywords: they are all kept, their schemas cleaned.
fn schema(v: &Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(
            o.iter()
                .filter(|(k, _)| !SCHEMA_MEMBERS_REFUSED.contains(&k.as_str()))
                .map(|(k, v)| {
                    let v = match (k.as_str(), v) {
                        ("properties" | "$defs" | "definitions", Value::Object(named)) => {
                            Value::Object(
                                named
                                    .iter()
                                    .map(|(name, s)| (name.clone(), schema(s)))
                                    .collect(),
                            )
                        }
                        _ => schema(v),
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(schema).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_lose_what_gemini_refuses_at_every_depth() {
        let s = serde_json::json!({
            "type": "object", "additionalProperties": false, "$schema": "x",
            "properties": {
                "a": {"type": "object", "additionalProperties": false},
                "additionalProperties": {"type": "string"}
            }
        });
        assert_eq!(
            schema(&s),
            serde_json::json!({"type": "object", "properties": {
                "a": {"type": "object"},
                "additionalProperties": {"type": "string"}
            }})
        );
    }
}
