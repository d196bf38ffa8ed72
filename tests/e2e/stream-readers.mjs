// What the stream suites share: the prompt the mock echoes,
// readers of the official SDKs' streams, and the rule that an answer is whole or an error.
import assert from "node:assert/strict";

export const PROMPT = "tell me a short story about a resilient fox";
export const answer = (name) => `[${name}] echo: ${PROMPT}`;

/** Reads an OpenAI stream: its text, finish reason and usage, or the error it raised. */
export async function openaiStream(client, model, extra = {}) {
  const out = { text: "", finish: null, usage: null, error: null };
  try {
    const stream = await client.chat.completions.create({
      model, stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: PROMPT }], ...extra,
    });
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      if (choice?.delta?.content) out.text += choice.delta.content;
      if (choice?.finish_reason) out.finish = choice.finish_reason;
      if (chunk.usage) out.usage = chunk.usage;
    }
  } catch (e) {
    out.error = e;
  }
  return out;
}

/** Reads an Anthropic stream the same way. */
export async function anthropicStream(client, model) {
  const out = { text: "", finish: null, usage: null, error: null };
  try {
    const stream = await client.messages.create({
      model, max_tokens: 256, stream: true, messages: [{ role: "user", content: PROMPT }],
    });
    for await (const ev of stream) {
      if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") out.text += ev.delta.text;
      if (ev.type === "message_delta") {
        out.finish = ev.delta.stop_reason;
        out.usage = ev.usage;
      }
    }
  } catch (e) {
    out.error = e;
  }
  return out;
}

/** Complete, or an error with a strict prefix of the answer: never a short success. */
export function assertNeverTruncated(r, full) {
  if (r.error) {
    assert.ok(full.startsWith(r.text) && r.text.length < full.length, `partial text must be a prefix: ${r.text}`);
    assert.equal(r.finish, null, "no finish after an incomplete answer");
  } else {
    assert.equal(r.text, full);
    assert.ok(r.finish, "a complete answer has a finish reason");
  }
}
