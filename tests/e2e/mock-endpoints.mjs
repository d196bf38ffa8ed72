// The mock provider's endpoints besides chat (tests/e2e/mock-provider.mjs routes them here):
//
//   POST /p/<name>/v1/embeddings                OpenAI format: `input` a string, strings, token
//                                               ids or token-id lists; `encoding_format` float
//                                               (default) or base64 (little-endian float32);
//                                               `dimensions` (default 8). Each vector depends on
//                                               its input and the dimensions only, not on the
//                                               provider or model, so a failover between two
//                                               providers of one family gives the same vectors.
//                                               usage: prompt_tokens = total_tokens = the input's
//                                               words (one word, or one token id, = one token)
//   POST /p/<name>/v1/messages/count_tokens     Anthropic format: {input_tokens}, the words of
//                                               `system` and every text in `messages`
//
// Faults are the provider's, as for chat (status 529 overloaded, hang, reset, malformed, …);
// received requests and counters are kept the same way.
import { createHash } from "node:crypto";

/** The mock's endpoint for a path tail, or null: its format and the answer it gives. */
export function endpointFor(tail) {
  if (tail === "embeddings") return { format: "openai", answerWith: embeddings };
  if (tail === "messages/count_tokens") return { format: "anthropic", answerWith: countTokens };
  return null;
}

const words = (text) => text.split(/\s+/).filter(Boolean).length;

/** A deterministic unit vector of `dimensions` for one input. */
function vector(input, dimensions) {
  const out = [];
  for (let i = 0; out.length < dimensions; i++) {
    const digest = createHash("sha256").update(`${i}:${JSON.stringify(input)}`).digest();
    for (let j = 0; j + 4 <= digest.length && out.length < dimensions; j += 4) {
      out.push(digest.readUInt32LE(j) / 0xffffffff * 2 - 1);
    }
  }
  const norm = Math.hypot(...out) || 1;
  return out.map((x) => Math.fround(x / norm));
}

function base64(floats) {
  const buf = Buffer.alloc(floats.length * 4);
  floats.forEach((x, i) => buf.writeFloatLE(x, i * 4));
  return buf.toString("base64");
}

const isTokens = (v) => Array.isArray(v) && v.length > 0 && v.every((t) => Number.isInteger(t) && t >= 0);

/** The inputs of an embeddings body, or a problem. */
function inputsOf(input) {
  if (typeof input === "string") return { inputs: [input] };
  if (isTokens(input)) return { inputs: [input] };
  if (Array.isArray(input) && input.length > 0 && (input.every((s) => typeof s === "string") || input.every(isTokens))) {
    return { inputs: input };
  }
  return { problem: "'input' must be a string, an array of strings, an array of token ids or an array of token-id arrays, and not empty." };
}

function checkModel(ctx, body, tools) {
  if (typeof body.model !== "string" || body.model === "") {
    tools.replyError(ctx, 400, "invalid_request", "'model' is required.");
    return false;
  }
  const models = ctx.provider.settings.models;
  if (models && !models.includes(body.model)) {
    tools.replyError(ctx, 404, "not_found", `The model \`${body.model}\` does not exist or you do not have access to it.`);
    return false;
  }
  return true;
}

function embeddings(ctx, body, tools) {
  if (!checkModel(ctx, body, tools)) return;
  const { inputs, problem } = inputsOf(body.input);
  if (problem) return tools.replyError(ctx, 400, "invalid_request", problem);
  const encoding = body.encoding_format ?? "float";
  if (encoding !== "float" && encoding !== "base64") {
    return tools.replyError(ctx, 400, "invalid_request", `'encoding_format' must be float or base64, not ${JSON.stringify(encoding)}.`);
  }
  const dimensions = body.dimensions ?? 8;
  if (!Number.isInteger(dimensions) || dimensions < 1 || dimensions > 4096) {
    return tools.replyError(ctx, 400, "invalid_request", "'dimensions' must be a whole number in 1..4096.");
  }
  const tokens = inputs.reduce((n, x) => n + (typeof x === "string" ? words(x) : x.length), 0);
  const data = inputs.map((input, index) => {
    const v = vector(input, dimensions);
    return { object: "embedding", index, embedding: encoding === "base64" ? base64(v) : v };
  });
  ctx.status = 200;
  tools.sendJson(ctx.res, 200, { object: "list", data, model: body.model, usage: { prompt_tokens: tokens, total_tokens: tokens } },
    tools.responseHeaders(ctx, ctx.format));
}

/** Every text of a Messages body: `system` and the messages' string or text-block content. */
function texts(body) {
  const out = [];
  const add = (content) => {
    if (typeof content === "string") out.push(content);
    else if (Array.isArray(content)) for (const b of content) if (b?.type === "text" && typeof b.text === "string") out.push(b.text);
  };
  add(body.system);
  for (const m of body.messages) add(m?.content);
  return out;
}

function countTokens(ctx, body, tools) {
  if (!checkModel(ctx, body, tools)) return;
  if (!Array.isArray(body.messages) || body.messages.length === 0) {
    return tools.replyError(ctx, 400, "invalid_request", "messages: at least one message is required");
  }
  ctx.status = 200;
  const input_tokens = texts(body).reduce((n, t) => n + words(t), 0);
  tools.sendJson(ctx.res, 200, { input_tokens }, tools.responseHeaders(ctx, ctx.format));
}
