//! A message part and a tool in their JS shapes, both ways: what
//! `client.chat` reads and what a JS provider receives. JS names are
//! camelCase; each is mapped to the neutral [`Part`] and [`Tool`] here, so
//! the core's serde names never leak into the package's API.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::chat::{Image, ImageSource, Part, Thinking, Tool, ToolCall};
use crate::format::mapping::image_source;

/// A part as the caller writes it. Every shape refuses unknown fields, so a
/// typo (`cacheControll`) is an error with its path, not a silent no-op.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum PartIn {
    Text(TextIn),
    Image(ImageIn),
    ToolCall(ToolCallIn),
    ToolResult(ToolResultIn),
    Thinking(ThinkingIn),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct TextIn {
    text: String,
    #[serde(default)]
    cache_control: Option<Value>,
}

/// `{ url }` (an http(s) URL, or a base64 `data:` URL) or
/// `{ data, mediaType }`, with an optional `detail` and `cacheControl`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ImageFields {
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    data: Option<String>,
    #[serde(default)]
    media_type: Option<String>,
    #[serde(default)]
    detail: Option<String>,
    #[serde(default)]
    cache_control: Option<Value>,
}

/// An image, checked to say where its bytes are exactly once.
#[derive(Deserialize)]
#[serde(try_from = "ImageFields")]
pub(crate) struct ImageIn(Image);

impl TryFrom<ImageFields> for ImageIn {
    type Error = String;

    fn try_from(f: ImageFields) -> Result<Self, String> {
        let source = match (f.url, f.data, f.media_type) {
            (Some(url), None, None) => image_source(&url)
                .ok_or("url: a data: URL must be base64 (data:<type>;base64,…)")?,
            (None, Some(data), Some(media_type)) => ImageSource::Base64 { media_type, data },
            (None, Some(_), None) => return Err("mediaType: required beside data".into()),
            (None, None, _) => return Err("an image needs url, or data and mediaType".into()),
            (Some(_), _, _) => return Err("an image takes url or data, not both".into()),
        };
        Ok(ImageIn(Image {
            source,
            detail: f.detail,
            cache_control: f.cache_control,
        }))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToolCallIn {
    id: String,
    name: String,
    arguments: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ToolResultIn {
    // Read under the core's snake_case names too, which code written
    // against the neutral serde shape sends.
    #[serde(alias = "tool_call_id")]
    tool_call_id: String,
    content: String,
    #[serde(default)]
    images: Vec<ImageIn>,
    #[serde(default, alias = "is_error")]
    is_error: bool,
    #[serde(default)]
    cache_control: Option<Value>,
}

/// An earlier turn's reasoning sent back: `{ text, signature }` or
/// `{ redacted }`, exactly as a `chat()` result's `thinking` holds it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ThinkingIn {
    #[serde(default)]
    text: String,
    #[serde(default)]
    signature: Option<String>,
    #[serde(default)]
    redacted: Option<String>,
}

impl From<PartIn> for Part {
    fn from(p: PartIn) -> Part {
        match p {
            PartIn::Text(t) => Part::Text {
                text: t.text,
                cache_control: t.cache_control,
            },
            PartIn::Image(ImageIn(image)) => Part::Image(image),
            PartIn::ToolCall(c) => Part::ToolCall(ToolCall {
                id: c.id,
                name: c.name,
                arguments: c.arguments,
            }),
            PartIn::ToolResult(r) => Part::ToolResult {
                tool_call_id: r.tool_call_id,
                content: r.content,
                images: r.images.into_iter().map(|i| i.0).collect(),
                is_error: r.is_error,
                cache_control: r.cache_control,
            },
            PartIn::Thinking(t) => Part::Thinking(Thinking {
                text: t.text,
                signature: t.signature,
                redacted: t.redacted,
            }),
        }
    }
}

/// A tool as the caller writes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ToolIn {
    name: String,
    #[serde(default)]
    description: Option<String>,
    parameters: Value,
    #[serde(default)]
    cache_control: Option<Value>,
}

impl From<ToolIn> for Tool {
    fn from(t: ToolIn) -> Tool {
        Tool {
            name: t.name,
            description: t.description,
            parameters: t.parameters,
            cache_control: t.cache_control,
        }
    }
}

/// A part as a JS provider receives it: the shape [`PartIn`] reads.
#[derive(Serialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
enum PartOut<'a> {
    Text {
        text: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<&'a Value>,
    },
    Image(ImageOut<'a>),
    ToolCall(&'a ToolCall),
    ToolResult {
        tool_call_id: &'a str,
        content: &'a str,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        images: Vec<ImageOut<'a>>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<&'a Value>,
    },
    Thinking(&'a Thinking),
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ImageOut<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    url: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    media_type: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<&'a Value>,
}

impl<'a> From<&'a Image> for ImageOut<'a> {
    fn from(i: &'a Image) -> Self {
        let (url, data, media_type) = match &i.source {
            ImageSource::Url { url } => (Some(url.as_str()), None, None),
            ImageSource::Base64 { media_type, data } => {
                (None, Some(data.as_str()), Some(media_type.as_str()))
            }
        };
        ImageOut {
            url,
            data,
            media_type,
            detail: i.detail.as_deref(),
            cache_control: i.cache_control.as_ref(),
        }
    }
}

impl<'a> From<&'a Part> for PartOut<'a> {
    fn from(p: &'a Part) -> Self {
        match p {
            Part::Text {
                text,
                cache_control,
            } => PartOut::Text {
                text,
                cache_control: cache_control.as_ref(),
            },
            Part::Image(i) => PartOut::Image(i.into()),
            Part::ToolCall(c) => PartOut::ToolCall(c),
            Part::ToolResult {
                tool_call_id,
                content,
                images,
                is_error,
                cache_control,
            } => PartOut::ToolResult {
                tool_call_id,
                content,
                images: images.iter().map(ImageOut::from).collect(),
                is_error: *is_error,
                cache_control: cache_control.as_ref(),
            },
            Part::Thinking(t) => PartOut::Thinking(t),
        }
    }
}

/// Parts in their JS shape, written without collecting them.
#[derive(Clone, Copy)]
pub(crate) struct PartsOut<'a>(pub &'a [Part]);

impl Serialize for PartsOut<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(PartOut::from))
    }
}

/// Tools in their JS shape.
#[derive(Clone, Copy)]
pub(crate) struct ToolsOut<'a>(pub &'a [Tool]);

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolOut<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    parameters: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<&'a Value>,
}

impl Serialize for ToolsOut<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|t| ToolOut {
            name: &t.name,
            description: t.description.as_deref(),
            parameters: &t.parameters,
            cache_control: t.cache_control.as_ref(),
        }))
    }
}
