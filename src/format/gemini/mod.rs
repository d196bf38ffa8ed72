//! Gemini's own format (`generateContent`, `streamGenerateContent`), as
//! Vertex AI serves it: outbound only, a provider's side.
//!
//! [`encode_request`] writes a neutral request as a `generateContent` body
//! (text, images as `inlineData` or `fileData`, tools as
//! `functionDeclarations` with `toolConfig`, tool calls and results as
//! `functionCall` / `functionResponse` parts, JSON output as
//! `responseMimeType` + `responseSchema`, a thinking budget as
//! `thinkingConfig`); [`decode_response`] and [`decode_chunk`] read an
//! answer and a stream chunk back, with `usageMetadata` as the neutral
//! usage (never counts Gemini did not give).
//!
//! A streamed function call arrives whole in one part of one chunk, and
//! the last chunk carries the finish reason: a chunk is read alone, so a
//! call is numbered by its place in its chunk, and a finish says
//! `tool_calls` when the chunk that carries it holds a call (as Gemini
//! sends them, in the final chunk).

mod encode;
mod response;

pub use encode::{encode_request, RequestBody};
pub use response::{decode_chunk, decode_response};
