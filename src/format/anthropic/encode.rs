//! Outbound: a neutral request as a Messages API body.

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::{EncodeOptions, StructuredOutput};
use crate::chat::{
    ChatRequest, Dialect, Hint, ImageSource, Message, Part, Reasoning, ResponseFormat, Role,
    ToolChoice,
};
use crate::format::mapping::{self, effort_budget, MIN_BUDGET};
use crate::format::structured::answer_tool;
use crate::format::{index, join, FormatError};

/// The forced tool's name for a `json_object` answer (a `json_schema`
/// answer's tool is named after the schema).
pub const ANSWER_TOOL: &str = "json_answer";

/// A Messages API request body, as [`encode_request`] renders it;
/// serialize it to send it.
#[derive(Debug, Serialize)]
pub struct RequestBody<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<OutSystem<'a>>,
    messages: Vec<Turn<'a>>,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_k: Option<u32>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<OutTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<OutToolChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<OutThinking>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_config: Option<OutputConfig<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    service_tier: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<OutMetadata<'a>>,
    /// Fields of the request this dialect has no setting for, left out of
    /// the body: sampling hints (`seed`, penalties), OpenAI-only hints
    /// (`prompt_cache_key`, image `detail`, …), and what thinking rules
    /// out (`temperature`, `top_k`). For the log line and the
    /// `x-omitted-fields` header.
    #[serde(skip)]
    pub omitted: Vec<String>,
    /// Top-level fields the client wrote in this dialect that the neutral
    /// request does not hold, sent as they came.
    #[serde(flatten)]
    extra: Map<String, Value>,
}

/// `system`: a string, or text blocks when some carry `cache_control`.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum OutSystem<'a> {
    Text(String),
    Blocks(Vec<Block<'a>>),
}

#[derive(Debug, Serialize)]
struct Turn<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

/// A content block of a request.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Block<'a> {
    Text {
        text: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<&'a Value>,
    },
    Image {
        source: &'a ImageSource,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<&'a Value>,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Value,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: ResultContent<'a>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<&'a Value>,
    },
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    RedactedThinking {
        data: &'a str,
    },
}

/// A tool result's content: its text, or text and image blocks.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(crate) enum ResultContent<'a> {
    Text(&'a str),
    Blocks(Vec<Block<'a>>),
}

#[derive(Debug, Serialize)]
struct OutTool<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<&'a Value>,
}

#[derive(Debug, Serialize)]
struct OutToolChoice<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    disable_parallel_tool_use: bool,
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum OutThinking {
    Enabled { budget_tokens: u32 },
    Adaptive,
    Disabled,
}

#[derive(Debug, Default, Serialize)]
struct OutputConfig<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    effort: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    format: Option<OutputFormat<'a>>,
}

#[derive(Debug, Serialize)]
struct OutputFormat<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    schema: &'a Value,
}

#[derive(Debug, Serialize)]
struct OutMetadata<'a> {
    user_id: &'a str,
}

/// Renders a neutral request as a Messages API body for `model`.
///
/// Fails with [`FormatError::unsupported`] on what the request holds that
/// this dialect cannot be given (an unknown field or one without
/// equivalent from an OpenAI client, an unknown `reasoning_effort`).
/// `reasoning_effort` becomes a thinking budget
/// (`mapping::effort_budget`), kept under `max_tokens`; thinking is left
/// out (and named in `omitted`) where it cannot be had: a budget under
/// Anthropic's least, a forced tool, or a tool turn sent back without its
/// thinking blocks.
pub fn encode_request<'a>(
    req: &'a ChatRequest,
    model: &'a str,
    opts: EncodeOptions,
) -> Result<RequestBody<'a>, FormatError> {
    let mut omitted = Vec::new();
    let mut extra = Map::new();
    mapping::check_untranslated(req, Dialect::Anthropic, &mut omitted, &mut extra)?;
    let mut system_blocks: Vec<Block<'a>> = Vec::new();
    let mut system_texts: Vec<String> = Vec::new();
    let mut messages: Vec<Turn<'a>> = Vec::new();
    for (i, m) in req.messages.iter().enumerate() {
        let path = index("messages", i);
        if m.role == Role::System {
            for (j, p) in m.content.iter().enumerate() {
                match p {
                    Part::Text {
                        text,
                        cache_control,
                    } => system_blocks.push(Block::Text {
                        text,
                        cache_control: cache_control.as_ref(),
                    }),
                    _ => {
                        return Err(FormatError::unsupported(
                            index(&join(&path, "content"), j),
                            "a system message can only hold text",
                        ))
                    }
                }
            }
            system_texts.push(m.joined_text());
            continue;
        }
        let role = if m.role == Role::Assistant {
            "assistant"
        } else {
            "user"
        };
        let blocks = encode_blocks(m, &path, &mut omitted)?;
        if blocks.is_empty() {
            continue;
        }
        match messages.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => messages.push(Turn {
                role,
                content: blocks,
            }),
        }
    }
    for turn in &mut messages {
        // Tool results must open a user turn (a stable partition).
        let (mut content, rest): (Vec<Block<'a>>, Vec<Block<'a>>) =
            std::mem::take(&mut turn.content)
                .into_iter()
                .partition(|b| matches!(b, Block::ToolResult { .. }));
        content.extend(rest);
        turn.content = content;
    }
    let cached_system = system_blocks.iter().any(|b| {
        matches!(
            b,
            Block::Text {
                cache_control: Some(_),
                ..
            }
        )
    });
    let system = match (cached_system, system_texts.is_empty()) {
        (true, _) => Some(OutSystem::Blocks(system_blocks)),
        (false, true) => None,
        (false, false) => Some(OutSystem::Text(system_texts.join("\n\n"))),
    };
    let mut tools: Vec<OutTool<'a>> = req
        .tools
        .iter()
        .map(|t| OutTool {
            name: &t.name,
            description: t.description.as_deref(),
            input_schema: &t.parameters,
            cache_control: t.cache_control.as_ref(),
        })
        .collect();
    let mut tool_choice = req.tool_choice.as_ref().map(|choice| {
        let (kind, name) = match choice {
            ToolChoice::Auto => ("auto", None),
            ToolChoice::None => ("none", None),
            ToolChoice::Required => ("any", None),
            ToolChoice::Tool(name) => ("tool", Some(name.as_str())),
        };
        OutToolChoice {
            kind,
            name,
            disable_parallel_tool_use: false,
        }
    });
    let mut output_config = None;
    match (&req.response_format, opts.structured_output) {
        (None | Some(ResponseFormat::Text), _) => {}
        (Some(ResponseFormat::JsonSchema(s)), StructuredOutput::Native) => {
            output_config = Some(OutputConfig {
                effort: None,
                format: Some(OutputFormat {
                    kind: "json_schema",
                    schema: &s.schema,
                }),
            });
        }
        (Some(format), _) => {
            let (name, schema, description) = match format {
                ResponseFormat::JsonSchema(s) => {
                    (s.name.as_str(), &s.schema, s.description.as_deref())
                }
                _ => (ANSWER_TOOL, &*OBJECT_SCHEMA, None),
            };
            if req.tools.iter().any(|t| t.name == name) {
                return Err(FormatError::unsupported(
                    "response_format",
                    format!("the answer's tool \"{name}\" has the name of a tool of the request"),
                ));
            }
            tools.push(OutTool {
                name,
                description: Some(description.unwrap_or(
                    "Give your final answer by calling this tool; its input is the answer.",
                )),
                input_schema: schema,
                cache_control: None,
            });
            // The answer is forced unless the model may call the client's
            // tools first, or the client forced one itself.
            tool_choice = match &req.tool_choice {
                Some(ToolChoice::Tool(_)) => tool_choice,
                Some(ToolChoice::Auto | ToolChoice::Required) if !req.tools.is_empty() => {
                    Some(OutToolChoice {
                        kind: "any",
                        name: None,
                        disable_parallel_tool_use: false,
                    })
                }
                _ => Some(OutToolChoice {
                    kind: "tool",
                    name: answer_tool(req),
                    disable_parallel_tool_use: false,
                }),
            };
        }
    }
    if req.parallel_tool_calls == Some(false) && !tools.is_empty() {
        tool_choice
            .get_or_insert(OutToolChoice {
                kind: "auto",
                name: None,
                disable_parallel_tool_use: false,
            })
            .disable_parallel_tool_use = true;
    }
    let forced = tool_choice
        .as_ref()
        .is_some_and(|c| matches!(c.kind, "any" | "tool"));
    let mut max_tokens = req.max_tokens.unwrap_or(opts.default_max_tokens);
    let mut temperature = req.temperature;
    let mut top_p = req.top_p;
    let mut top_k = req.top_k;
    let thinking = match &req.reasoning {
        None => None,
        Some(Reasoning::Disabled) => Some(OutThinking::Disabled),
        Some(Reasoning::Budget { budget_tokens }) => Some(OutThinking::Enabled {
            budget_tokens: *budget_tokens,
        }),
        Some(Reasoning::Adaptive { effort }) => {
            if let Some(effort) = effort {
                output_config
                    .get_or_insert_with(OutputConfig::default)
                    .effort = Some(effort);
            }
            Some(OutThinking::Adaptive)
        }
        Some(Reasoning::Effort { effort }) => {
            let budget = effort_budget(effort).ok_or_else(|| {
                FormatError::unsupported(
                    "reasoning_effort",
                    format!("\"{effort}\" has no thinking budget for anthropic"),
                )
            })?;
            // The budget counts within max_tokens, as reasoning tokens
            // count within OpenAI's max_completion_tokens.
            let budget = match req.max_tokens {
                Some(m) => budget.min(m.saturating_sub(1)),
                None => {
                    max_tokens = opts.default_max_tokens.saturating_add(budget);
                    budget
                }
            };
            if budget < MIN_BUDGET || forced || unthought_tool_turn(&messages) {
                omitted.push("reasoning_effort".into());
                None
            } else {
                // Thinking takes neither temperature nor top_k, and top_p
                // only from 0.95.
                if temperature.take().is_some() {
                    omitted.push("temperature".into());
                }
                if top_k.take().is_some() {
                    omitted.push("top_k".into());
                }
                if top_p.is_some_and(|p| p < 0.95) {
                    top_p = None;
                    omitted.push("top_p".into());
                }
                Some(OutThinking::Enabled {
                    budget_tokens: budget,
                })
            }
        }
    };
    omitted.extend(req.omitted_hints(&[
        Hint::Seed,
        Hint::FrequencyPenalty,
        Hint::PresencePenalty,
        Hint::PromptCacheKey,
    ]));
    let service_tier = match req.service_tier.as_deref() {
        None => None,
        Some(tier) => {
            let mapped = mapping::anthropic_tier(tier);
            if mapped.is_none() {
                omitted.push("service_tier".into());
            }
            mapped
        }
    };
    Ok(RequestBody {
        model,
        system,
        messages,
        max_tokens,
        temperature,
        top_p,
        top_k,
        stop_sequences: &req.stop,
        tools,
        tool_choice,
        thinking,
        output_config,
        service_tier,
        stream: req.stream,
        metadata: crate::format::user_id(req.metadata.as_ref())
            .map(|user_id| OutMetadata { user_id }),
        extra,
        omitted,
    })
}

/// Whether the last assistant turn calls tools without opening with its
/// reasoning: Anthropic refuses thinking for such a conversation (an
/// OpenAI client that did not send `thinking_blocks` back), so it is
/// asked without.
fn unthought_tool_turn(messages: &[Turn<'_>]) -> bool {
    let Some(last) = messages.iter().rev().find(|t| t.role == "assistant") else {
        return false;
    };
    let calls = last
        .content
        .iter()
        .any(|b| matches!(b, Block::ToolUse { .. }));
    let thought = matches!(
        last.content.first(),
        Some(Block::Thinking { .. } | Block::RedactedThinking { .. })
    );
    calls && !thought
}

/// The input schema of a `json_object` answer's tool.
static OBJECT_SCHEMA: std::sync::LazyLock<Value> =
    std::sync::LazyLock::new(|| json!({"type": "object"}));

fn encode_blocks<'a>(
    m: &'a Message,
    path: &str,
    omitted: &mut Vec<String>,
) -> Result<Vec<Block<'a>>, FormatError> {
    let mut blocks = Vec::new();
    for (j, part) in m.content.iter().enumerate() {
        let at = || index(&join(path, "content"), j);
        match part {
            Part::Text { text, .. } if text.is_empty() => {}
            Part::Text {
                text,
                cache_control,
            } => blocks.push(Block::Text {
                text,
                cache_control: cache_control.as_ref(),
            }),
            Part::Image(image) if m.role != Role::Assistant => {
                if image.detail.is_some() {
                    omitted.push(join(&at(), "detail"));
                }
                blocks.push(Block::Image {
                    source: &image.source,
                    cache_control: image.cache_control.as_ref(),
                });
            }
            Part::ToolCall(c) if m.role == Role::Assistant => {
                let input: Value = if c.arguments.trim().is_empty() {
                    json!({})
                } else {
                    serde_json::from_str(&c.arguments).map_err(|e| {
                        FormatError::unsupported(
                            join(&at(), "arguments"),
                            format!("tool call arguments are not valid JSON: {e}"),
                        )
                    })?
                };
                if !input.is_object() {
                    return Err(FormatError::unsupported(
                        join(&at(), "arguments"),
                        "tool call arguments are not a JSON object",
                    ));
                }
                blocks.push(Block::ToolUse {
                    id: &c.id,
                    name: &c.name,
                    input,
                });
            }
            Part::ToolResult {
                tool_call_id,
                content,
                images,
                is_error,
                cache_control,
            } if m.role != Role::Assistant => {
                let content = if images.is_empty() {
                    ResultContent::Text(content)
                } else {
                    let mut inner = Vec::with_capacity(images.len() + 1);
                    if !content.is_empty() {
                        inner.push(Block::Text {
                            text: content,
                            cache_control: None,
                        });
                    }
                    inner.extend(images.iter().map(|i| Block::Image {
                        source: &i.source,
                        cache_control: i.cache_control.as_ref(),
                    }));
                    ResultContent::Blocks(inner)
                };
                blocks.push(Block::ToolResult {
                    tool_use_id: tool_call_id,
                    content,
                    is_error: *is_error,
                    cache_control: cache_control.as_ref(),
                });
            }
            Part::Thinking(t) if m.role == Role::Assistant => match (&t.redacted, &t.signature) {
                (Some(data), _) => blocks.push(Block::RedactedThinking { data }),
                (None, Some(signature)) => blocks.push(Block::Thinking {
                    thinking: &t.text,
                    signature,
                }),
                // Anthropic takes back only signed reasoning.
                (None, None) => omitted.push(at()),
            },
            Part::Image(_) | Part::ToolCall(_) | Part::ToolResult { .. } | Part::Thinking(_) => {
                return Err(FormatError::unsupported(
                    at(),
                    "this part cannot appear in a message of this role",
                ))
            }
        }
    }
    Ok(blocks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::Message;

    #[test]
    fn consecutive_roles_merge_and_tool_results_lead() {
        let req = ChatRequest::new(vec![
            Message::system("be brief"),
            Message::user("a"),
            Message {
                role: Role::Tool,
                content: vec![Part::ToolResult {
                    tool_call_id: "t1".into(),
                    content: "42".into(),
                    images: Vec::new(),
                    is_error: false,
                    cache_control: None,
                }],
            },
            Message::system("and kind"),
        ]);
        let opts = EncodeOptions {
            default_max_tokens: 100,
            structured_output: StructuredOutput::Tool,
        };
        let v = serde_json::to_value(encode_request(&req, "claude", opts).unwrap()).unwrap();
        assert_eq!(v["system"], "be brief\n\nand kind");
        assert_eq!(v["messages"].as_array().unwrap().len(), 1);
        assert_eq!(v["messages"][0]["content"][0]["type"], "tool_result");
        assert_eq!(v["messages"][0]["content"][1]["text"], "a");
        assert_eq!(v["max_tokens"], 100);
    }
}
