//! The npm package's readers: what `client.chat` is given (requests) and
//! what a JS provider resolves with, read by hand. Compiled for the package
//! and for the tests that hold these readers to the derived
//! deserializers.

use serde_json::Value;

use crate::chat::{ChatRequest, FinishReason, Part, Role, Tool, ToolCall, ToolChoice};
use crate::chat::{ChatResponse, Message, Usage};
use crate::config::read::{invalid_type, Node, Shape, R};

// ------------------------------------------------------------------ reading

/// `client.chat(request)`: the articles' request, plus the core's options.
pub(crate) fn read_request(n: &Node<'_>) -> R<ChatRequest> {
    const SHAPE: Shape = Shape {
        name: "struct JsRequest",
        fields: &[
            "model",
            "messages",
            "maxTokens",
            "temperature",
            "topP",
            "stop",
            "tools",
            "toolChoice",
            "metadata",
        ],
        required: 0b10,
        defaulted: !0b10,
        deny_unknown: true,
        skip: None,
    };
    let mut r = ChatRequest::default();
    n.fields(&SHAPE, &mut |i, v| {
        match i {
            0 => r.model = v.opt_string()?,
            1 => v.seq(&mut |_, m| {
                r.messages.push(read_message(m)?);
                Ok(())
            })?,
            2 => r.max_tokens = v.opt(Node::u32)?,
            3 => r.temperature = v.opt(Node::f64)?,
            4 => r.top_p = v.opt(Node::f64)?,
            5 => r.stop = v.strings()?,
            6 => v.seq(&mut |_, t| {
                r.tools.push(read_tool(t)?);
                Ok(())
            })?,
            7 => r.tool_choice = v.opt(read_tool_choice)?,
            _ => r.metadata = v.opt(|v| Ok(v.to_value()))?,
        }
        Ok(())
    })?;
    Ok(r)
}

/// `{ role, content }`, the content a string or parts.
pub(crate) fn read_message(n: &Node<'_>) -> R<Message> {
    const SHAPE: Shape = Shape {
        name: "struct JsMessage",
        fields: &["role", "content"],
        required: 0b11,
        defaulted: 0,
        deny_unknown: false,
        skip: None,
    };
    let mut m = Message {
        role: Role::User,
        content: Vec::new(),
    };
    n.fields(&SHAPE, &mut |i, v| {
        match i {
            0 => {
                const ROLES: [Role; 4] = [Role::System, Role::User, Role::Assistant, Role::Tool];
                m.role = ROLES[v.variant(&["system", "user", "assistant", "tool"])?];
            }
            _ => match v {
                Node::Str(text) => {
                    m.content = vec![Part::Text {
                        text: text.to_string(),
                    }]
                }
                Node::Seq(_) => v.seq(&mut |_, p| {
                    m.content.push(read_part(p)?);
                    Ok(())
                })?,
                _ => return Err(invalid_type(v, "a string or an array of parts")),
            },
        }
        Ok(())
    })?;
    Ok(m)
}

/// A part, tagged by `type`.
pub(crate) fn read_part(n: &Node<'_>) -> R<Part> {
    const TEXT: Shape = Shape {
        name: "struct variant Part::Text",
        fields: &["text"],
        required: 1,
        defaulted: 0,
        deny_unknown: false,
        skip: Some("type"),
    };
    const RESULT: Shape = Shape {
        name: "struct variant Part::ToolResult",
        fields: &["tool_call_id", "content", "is_error"],
        required: 0b11,
        defaulted: 0b100,
        deny_unknown: false,
        skip: Some("type"),
    };
    Ok(
        match n.tag(
            "type",
            &["text", "tool_call", "tool_result"],
            "internally tagged enum Part",
        )? {
            0 => {
                let mut text = String::new();
                n.fields(&TEXT, &mut |_, v| {
                    text = v.string()?;
                    Ok(())
                })?;
                Part::Text { text }
            }
            1 => Part::ToolCall(read_tool_call_in(n, Some("type"))?),
            _ => {
                let (mut id, mut content, mut is_error) = (String::new(), String::new(), false);
                n.fields(&RESULT, &mut |i, v| {
                    match i {
                        0 => id = v.string()?,
                        1 => content = v.string()?,
                        _ => is_error = v.bool()?,
                    }
                    Ok(())
                })?;
                Part::ToolResult {
                    tool_call_id: id,
                    content,
                    is_error,
                }
            }
        },
    )
}

pub(crate) fn read_tool_call(n: &Node<'_>) -> R<ToolCall> {
    read_tool_call_in(n, None)
}

/// `{ id, name, arguments }`; `skip` is the tag of the part holding it.
fn read_tool_call_in(n: &Node<'_>, skip: Option<&'static str>) -> R<ToolCall> {
    let shape = Shape {
        name: "struct ToolCall",
        fields: &["id", "name", "arguments"],
        required: 0b111,
        defaulted: 0,
        deny_unknown: false,
        skip,
    };
    let mut c = ToolCall {
        id: String::new(),
        name: String::new(),
        arguments: String::new(),
    };
    n.fields(&shape, &mut |i, v| {
        *[&mut c.id, &mut c.name, &mut c.arguments][i] = v.string()?;
        Ok(())
    })?;
    Ok(c)
}

/// `{ name, description?, parameters }`.
pub(crate) fn read_tool(n: &Node<'_>) -> R<Tool> {
    const SHAPE: Shape = Shape {
        name: "struct Tool",
        fields: &["name", "description", "parameters"],
        required: 0b101,
        defaulted: 0b010,
        deny_unknown: false,
        skip: None,
    };
    let mut t = Tool {
        name: String::new(),
        description: None,
        parameters: Value::Null,
    };
    n.fields(&SHAPE, &mut |i, v| {
        match i {
            0 => t.name = v.string()?,
            1 => t.description = v.opt_string()?,
            _ => t.parameters = v.to_value(),
        }
        Ok(())
    })?;
    Ok(t)
}

/// `{ type: "auto" | "none" | "required" }` or `{ type: "tool", name }`.
pub(crate) fn read_tool_choice(n: &Node<'_>) -> R<ToolChoice> {
    const SHAPE: Shape = Shape {
        name: "adjacently tagged enum ToolChoice",
        fields: &["name"],
        required: 0,
        defaulted: 0,
        deny_unknown: false,
        skip: Some("type"),
    };
    const UNITS: [&str; 3] = [
        "unit variant ToolChoice::Auto",
        "unit variant ToolChoice::None",
        "unit variant ToolChoice::Required",
    ];
    let variant = n.tag(
        "type",
        &["auto", "none", "required", "tool"],
        "adjacently tagged enum ToolChoice",
    )?;
    // The content: a unit variant's must be absent or null, the tool's name
    // is required.
    let mut name = None;
    n.fields(&SHAPE, &mut |_, v| {
        match UNITS.get(variant) {
            Some(unit) if !v.is_null() => return Err(invalid_type(v, unit)),
            Some(_) => {}
            None => name = Some(v.string()?),
        }
        Ok(())
    })?;
    Ok(match variant {
        0 => ToolChoice::Auto,
        1 => ToolChoice::None,
        2 => ToolChoice::Required,
        _ => ToolChoice::Tool(name.ok_or_else(|| crate::config::read::missing_field("name"))?),
    })
}

/// Token counts: `{ inputTokens, outputTokens }`.
pub(crate) fn read_usage(n: &Node<'_>) -> R<Usage> {
    const SHAPE: Shape = Shape {
        name: "struct Usage",
        fields: &["inputTokens", "outputTokens"],
        required: 0b11,
        defaulted: 0,
        deny_unknown: false,
        skip: None,
    };
    let mut u = Usage::default();
    n.fields(&SHAPE, &mut |i, v| {
        *[&mut u.input_tokens, &mut u.output_tokens][i] = v.u64()?;
        Ok(())
    })?;
    Ok(u)
}

/// What a JS provider resolves with: the articles' `{ text, model }`, plus
/// optional tool calls, finish reason and usage. Other fields (`provider`,
/// `raw`) are allowed; `raw` is kept when it is JSON.
pub(crate) fn read_response(n: &Node<'_>) -> R<(ChatResponse, Option<String>)> {
    const SHAPE: Shape = Shape {
        name: "struct ProviderResponse",
        fields: &RESPONSE_FIELDS,
        required: 0,
        defaulted: !0,
        deny_unknown: false,
        skip: None,
    };
    let mut model = None;
    let mut r = ChatResponse {
        text: String::new(),
        tool_calls: Vec::new(),
        model: String::new(),
        provider: String::new(),
        finish_reason: None,
        usage: None,
        raw: Value::Null,
    };
    n.fields(&SHAPE, &mut |i, v| {
        match i {
            0 => r.text = v.string()?,
            1 => model = v.opt_string()?,
            2 => v.seq(&mut |_, c| {
                r.tool_calls.push(read_tool_call(c)?);
                Ok(())
            })?,
            3 => r.finish_reason = v.opt(|v| v.str().map(finish_reason))?,
            _ => r.usage = v.opt(read_usage)?,
        }
        Ok(())
    })?;
    Ok((r, model))
}

pub(crate) const RESPONSE_FIELDS: [&str; 5] =
    ["text", "model", "toolCalls", "finishReason", "usage"];

pub(crate) fn finish_reason(s: &str) -> FinishReason {
    match s {
        "stop" | "end_turn" | "stop_sequence" => FinishReason::Stop,
        "length" | "max_tokens" => FinishReason::Length,
        "tool_calls" | "tool_use" => FinishReason::ToolCalls,
        "content_filter" | "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()),
    }
}

/// The readers against the derived `Deserialize` impls they replaced,
/// through the same tree (what `parse_json` gave the package): the same
/// value, or the same first mistake. Inside a tagged part the hand-written
/// path may be longer: it names the field.
#[cfg(test)]
mod reading {
    use serde::Deserialize;
    use serde_json::Value;

    use crate::chat::{ChatRequest, Message, Part, Role, Tool, ToolChoice};
    use crate::config::path::from_str;
    use crate::config::read::read_json;

    /// A message's content, as the package read it.
    #[derive(Debug)]
    enum Content {
        Text(String),
        Parts(Vec<Part>),
    }

    impl<'de> Deserialize<'de> for Content {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> serde::de::Visitor<'de> for V {
                type Value = Content;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a string or an array of parts")
                }
                fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Content, E> {
                    Ok(Content::Text(s.to_string()))
                }
                fn visit_seq<A: serde::de::SeqAccess<'de>>(
                    self,
                    mut seq: A,
                ) -> Result<Content, A::Error> {
                    let mut parts = Vec::new();
                    while let Some(p) = seq.next_element::<Part>()? {
                        parts.push(p);
                    }
                    Ok(Content::Parts(parts))
                }
            }
            d.deserialize_any(V)
        }
    }

    #[derive(Debug, Deserialize)]
    struct JsMessage {
        role: Role,
        content: Content,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct JsRequest {
        #[serde(default)]
        model: Option<String>,
        messages: Vec<JsMessage>,
        #[serde(default)]
        max_tokens: Option<u32>,
        #[serde(default)]
        temperature: Option<f64>,
        #[serde(default)]
        top_p: Option<f64>,
        #[serde(default)]
        stop: Vec<String>,
        #[serde(default)]
        tools: Vec<Tool>,
        #[serde(default)]
        tool_choice: Option<ToolChoice>,
        #[serde(default)]
        metadata: Option<Value>,
    }

    impl From<JsRequest> for ChatRequest {
        fn from(r: JsRequest) -> Self {
            ChatRequest {
                model: r.model,
                messages: r
                    .messages
                    .into_iter()
                    .map(|m| Message {
                        role: m.role,
                        content: match m.content {
                            Content::Text(text) => vec![Part::Text { text }],
                            Content::Parts(parts) => parts,
                        },
                    })
                    .collect(),
                max_tokens: r.max_tokens,
                temperature: r.temperature,
                top_p: r.top_p,
                stop: r.stop,
                tools: r.tools,
                tool_choice: r.tool_choice,
                stream: false,
                metadata: r.metadata,
            }
        }
    }

    fn same_request(json: &str) {
        let derived = from_str::<JsRequest>(json).map(ChatRequest::from);
        let by_hand = read_json(json, super::read_request);
        match (&derived, &by_hand) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{json}"),
            (Err((pa, ma)), Err((pb, mb))) => {
                assert_eq!(ma, mb, "{json}");
                assert!(pb.starts_with(pa.as_str()), "{json}: {pa} vs {pb}");
            }
            _ => panic!("{json}: derived {derived:?}, by hand {by_hand:?}"),
        }
    }

    #[test]
    fn requests_read_as_derived() {
        for json in [
            r#"{"messages":[{"role":"user","content":"hi"}]}"#,
            r#"{"model":"m","messages":[{"role":"system","content":"s"},{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"tool_call","id":"c","name":"f","arguments":"{}"}]},{"role":"tool","content":[{"type":"tool_result","tool_call_id":"c","content":"ok","is_error":true},{"type":"tool_result","tool_call_id":"d","content":"ok","extra":1}]}],"maxTokens":5,"temperature":0.5,"topP":1,"stop":["x"],"tools":[{"name":"f","parameters":{"type":"object"}},{"name":"g","description":"d","parameters":null,"x":1}],"toolChoice":{"type":"tool","name":"f"},"metadata":{"user_id":"u"}}"#,
            r#"{"messages":[],"toolChoice":{"type":"auto"},"metadata":null,"model":null}"#,
            r#"{"messages":[],"toolChoice":{"type":"none","x":1}}"#,
            r#"{"messages":[],"toolChoice":{"type":"required"}}"#,
            r#"{"messages":[{"role":{"user":null},"content":[]}]}"#,
            r#"{"messages":[{"content":"x","role":"user","name":"n"}]}"#,
            r#"{"messages":[["user","hi"]]}"#,
        ] {
            assert!(read_json(json, super::read_request).is_ok(), "{json}");
            same_request(json);
        }
        for json in [
            "{}",
            "[]",
            "null",
            r#"{"messages":{}}"#,
            r#"{"messages":[{"role":"admin","content":"x"}]}"#,
            r#"{"messages":[{"role":"user","content":42}]}"#,
            r#"{"messages":[{"role":"user"}]}"#,
            r#"{"messages":[{"content":"x"}]}"#,
            r#"{"messages":[{"role":"user","content":[{"text":"x"}]}]}"#,
            r#"{"messages":[{"role":"user","content":[{"type":"image","url":"x"}]}]}"#,
            r#"{"messages":[{"role":"user","content":[{"type":"text"}]}]}"#,
            r#"{"messages":[{"role":"user","content":[{"type":"text","text":5}]}]}"#,
            r#"{"messages":[{"role":"user","content":[{"type":"tool_call","id":"c"}]}]}"#,
            r#"{"messages":[{"role":"user","content":[{"type":"tool_result","tool_call_id":"c","content":"x","is_error":"no"}]}]}"#,
            r#"{"messages":[{"role":"user","content":[{"type":"text","text":"a","type":"text"}]}]}"#,
            r#"{"messages":[{"role":"user","content":["x"]}]}"#,
            r#"{"messages":[],"maxTokens":-1}"#,
            r#"{"messages":[],"maxTokens":1.5}"#,
            r#"{"messages":[],"temperature":"hot"}"#,
            r#"{"messages":[],"stop":"x"}"#,
            r#"{"messages":[],"stop":[1]}"#,
            r#"{"messages":[],"tools":[{"name":"f"}]}"#,
            r#"{"messages":[],"tools":[{"parameters":{}}]}"#,
            r#"{"messages":[],"tools":[{"name":1,"parameters":{}}]}"#,
            r#"{"messages":[],"toolChoice":"auto"}"#,
            r#"{"messages":[],"toolChoice":{"type":"any"}}"#,
            r#"{"messages":[],"toolChoice":{"type":"tool"}}"#,
            r#"{"messages":[],"toolChoice":{"type":"tool","name":1}}"#,
            r#"{"messages":[],"toolChoice":{"name":"f"}}"#,
            r#"{"messages":[],"bogus":1}"#,
            r#"{"messages":[],"messages":[]}"#,
            r#"{"messages":[],"stream":true}"#,
        ] {
            assert!(read_json(json, super::read_request).is_err(), "{json}");
            same_request(json);
        }
        for json in [
            r#"{"messages":[],"toolChoice":{"type":"auto","name":"x"}}"#,
            r#"{"messages":[],"toolChoice":{"type":"auto","name":null}}"#,
            r#"{"messages":[],"toolChoice":{"name":"f","type":"tool"}}"#,
            r#"{"messages":[],"toolChoice":["tool","f"]}"#,
            r#"{"messages":[],"toolChoice":{"type":"tool","name":"f","name":"g"}}"#,
            r#"{"messages":[],"toolChoice":{"type":"tool","name":null}}"#,
            r#"{"messages":[],"toolChoice":{"type":"tool","name":"f","x":1}}"#,
            r#"{"messages":[],"toolChoice":{"type":"auto","type":"auto"}}"#,
        ] {
            same_request(json);
        }
    }

    /// What a JS provider resolved with, as the package read it.
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct ProviderResponse {
        #[serde(default)]
        text: String,
        #[serde(default)]
        model: Option<String>,
        #[serde(default)]
        tool_calls: Vec<crate::chat::ToolCall>,
        #[serde(default)]
        finish_reason: Option<String>,
        #[serde(default)]
        usage: Option<crate::chat::Usage>,
    }

    #[test]
    fn providers_answers_read_as_derived() {
        for json in [
            "{}",
            r#"{"text":"hi","model":"m","toolCalls":[{"id":"c","name":"f","arguments":"{}"}],"finishReason":"tool_use","usage":{"inputTokens":1,"outputTokens":2}}"#,
            r#"{"text":"hi","finishReason":"weird","usage":null,"model":null}"#,
            r#"{"text":5}"#,
            r#"{"toolCalls":[{"id":"c"}]}"#,
            r#"{"usage":{"inputTokens":1}}"#,
            r#"{"usage":{"inputTokens":-1,"outputTokens":2}}"#,
            r#"{"finishReason":1}"#,
            "[]",
            r#"["t","m"]"#,
        ] {
            let derived = from_str::<ProviderResponse>(json).map(|r| {
                (
                    r.text,
                    r.model,
                    r.tool_calls,
                    r.finish_reason.map(|f| super::finish_reason(&f)),
                    r.usage,
                )
            });
            let by_hand = read_json(json, super::read_response)
                .map(|(r, model)| (r.text, model, r.tool_calls, r.finish_reason, r.usage));
            assert_eq!(derived, by_hand, "{json}");
        }
    }
}
