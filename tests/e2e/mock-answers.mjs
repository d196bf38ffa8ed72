// What the mock provider answers, in the OpenAI chat-completions and Anthropic messages
// formats, as the real APIs answer for the features a request asks for:
//   - the deterministic echo "[<provider>] echo: <last user text>", cut to the token limit;
//   - structured output: `response_format` json_schema / json_object (OpenAI),
//     `output_config.format` / `output_format` json_schema (Anthropic): JSON built from the schema;
//   - tool calls: forced (`required`, a named function; `any`, a named tool) or, under `auto`,
//     every tool whose name the last user message mentions (Anthropic: after the echo's text
//     block, as Claude announces its calls); parallel unless the request says
//     not (`parallel_tool_calls: false`, `disable_parallel_tool_use`); arguments from the
//     tool's schema; never right after a tool result under `auto`;
//   - reasoning: Anthropic `thinking` (enabled/adaptive) → a thinking block with a signature
//     (a redacted_thinking block under the provider setting `redactThinking`);
//     OpenAI `reasoning_effort` → `message.reasoning_content` (as OpenAI-compatible servers
//     answer) and `completion_tokens_details.reasoning_tokens`;
//   - prompt caching: Anthropic blocks marked `cache_control` are written to the cache on first
//     sight (`cache_creation_input_tokens`) and read after (`cache_read_input_tokens`); OpenAI
//     caches a first message of CACHE_MIN_WORDS words or more automatically (the real API:
//     1024 tokens) and reports a repeat in `prompt_tokens_details.cached_tokens`;
//   - OpenAI `n` (several choices), `logprobs` / `top_logprobs`, `system_fingerprint`;
//   - streams with thinking_delta, signature_delta, input_json_delta, reasoning_content and
//     tool-call deltas; a usage chunk only when asked (`stream_options.include_usage`) and the
//     provider's `streamUsage` is not "never";
//   - provider setting `future: true`: an unknown top-level field in answers and chunks and,
//     in Anthropic streams, an event of an unknown type, as a newer API version would send.

const CACHE_MIN_WORDS = 50;
const MAX_CHOICES = 8;

// ---------------------------------------------------------------- message helpers

export function textOf(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.filter((p) => p && p.type === "text" && typeof p.text === "string").map((p) => p.text).join("");
}

function lastUserText(messages) {
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i]?.role === "user") return textOf(messages[i].content);
  }
  return "";
}

export function countWords(text) {
  return text.split(/\s+/).filter(Boolean).length;
}

function promptTokens(body) {
  const system = typeof body.system === "string" ? body.system : textOf(body.system);
  const words = body.messages.reduce((n, m) => n + countWords(textOf(m?.content)), countWords(system));
  return Math.max(1, words);
}

/** Word-sized pieces that join back into the text: "[p] echo: hi" -> ["[p] ", "echo: ", "hi"]. */
function splitChunks(text) {
  return text.match(/\S+\s*|\s+/g) ?? [""];
}

/** Pieces of about `size` characters that join back into `text` (JSON arguments, signatures). */
function slices(text, size = 6) {
  const out = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out.length ? out : [""];
}

/** The tokens repeated in order to exactly n (a space between words), or as they are when n is null. */
function padTokens(tokens, n) {
  if (!n) return tokens;
  const words = tokens.map((t) => t.trim()).filter(Boolean);
  if (words.length === 0) words.push("word");
  return Array.from({ length: n }, (_, i) => `${words[i % words.length]}${i < n - 1 ? " " : ""}`);
}

/** The deterministic echo, cut to max tokens (one word = one token). */
function makeEcho(provider, body, maxTokens) {
  const full = `[${provider.name}] echo: ${lastUserText(body.messages)}`;
  // A trailing assistant message is a prefill: the answer continues it, as real models do.
  const last = body.messages.at(-1);
  const prefill = last?.role === "assistant" ? textOf(last.content) : "";
  const tokens = padTokens(splitChunks(prefill && full.startsWith(prefill) ? full.slice(prefill.length) : full),
    provider.settings.answerTokens);
  const truncated = Number.isInteger(maxTokens) && maxTokens < tokens.length;
  const kept = truncated ? tokens.slice(0, maxTokens) : tokens;
  const per = provider.settings.tokensPerChunk ?? 1;
  const chunks = [];
  for (let i = 0; i < kept.length; i += per) chunks.push(kept.slice(i, i + per).join(""));
  return { chunks, text: kept.join(""), truncated, tokens: kept.length };
}

// ---------------------------------------------------------------- JSON from a schema

/** A value that the JSON schema accepts: every property, the first choice of every union. */
export function exampleOf(schema, root = schema, depth = 0) {
  if (!schema || typeof schema !== "object" || depth > 12) return null;
  if (typeof schema.$ref === "string") {
    const target = schema.$ref.replace(/^#\//, "").split("/").reduce((node, key) => node?.[key], root);
    return exampleOf(target, root, depth + 1);
  }
  if ("const" in schema) return schema.const;
  if (Array.isArray(schema.enum) && schema.enum.length) return schema.enum[0];
  for (const key of ["anyOf", "oneOf", "allOf"]) {
    if (Array.isArray(schema[key]) && schema[key].length) {
      const choice = schema[key].find((s) => s?.type !== "null") ?? schema[key][0];
      return exampleOf(choice, root, depth + 1);
    }
  }
  const type = Array.isArray(schema.type) ? (schema.type.find((t) => t !== "null") ?? "null") : schema.type;
  switch (type ?? (schema.properties ? "object" : schema.items ? "array" : "string")) {
    case "object":
      return Object.fromEntries(Object.entries(schema.properties ?? {}).map(([k, s]) => [k, exampleOf(s, root, depth + 1)]));
    case "array": {
      const n = Math.max(1, schema.minItems ?? 1);
      return Array.from({ length: n }, () => exampleOf(schema.items ?? {}, root, depth + 1));
    }
    case "integer": return Math.max(1, Math.ceil(schema.minimum ?? 1));
    case "number": return Math.max(1.5, schema.minimum ?? 1.5);
    case "boolean": return true;
    case "null": return null;
    default: return "mock";
  }
}

// ---------------------------------------------------------------- what the request asks for

/**
 * The tools to call as { calls: [{name, schema}], forced }, by the request's tools and
 * tool_choice; `forced`: the request left the model no choice but a tool.
 */
function toolsToCall(format, body) {
  const tools = (Array.isArray(body.tools) ? body.tools : [])
    .map((t) => (format === "openai"
      ? (t?.type === "function" && t.function?.name ? { name: t.function.name, schema: t.function.parameters ?? {} } : null)
      : (t?.name && t.input_schema ? { name: t.name, schema: t.input_schema } : null)))
    .filter(Boolean);
  const none = { calls: [], forced: false };
  if (!tools.length) return none;
  const choice = body.tool_choice;
  const last = body.messages.at(-1);
  const afterResult = format === "openai" ? last?.role === "tool"
    : Array.isArray(last?.content) && last.content.some((b) => b?.type === "tool_result");
  const mentioned = () => (afterResult ? [] : tools.filter((t) => lastUserText(body.messages).includes(t.name)));
  if (format === "openai") {
    if (choice === "none") return none;
    const forced = choice?.type === "function" || choice === "required";
    const picked = choice?.type === "function" ? tools.filter((t) => t.name === choice.function?.name)
      : choice === "required" ? tools : mentioned();
    return { calls: body.parallel_tool_calls === false ? picked.slice(0, 1) : picked, forced };
  }
  if (choice?.type === "none") return none;
  const forced = choice?.type === "tool" || choice?.type === "any";
  const picked = choice?.type === "tool" ? tools.filter((t) => t.name === choice.name)
    : choice?.type === "any" ? tools : mentioned();
  return { calls: choice?.disable_parallel_tool_use === true ? picked.slice(0, 1) : picked, forced };
}

/** The JSON schema of a structured-output request: { schema } (json_schema), { schema: null } (JSON mode), or null. */
function structuredOutput(format, body) {
  if (format === "openai") {
    const rf = body.response_format;
    if (rf?.type === "json_schema") return { schema: rf.json_schema?.schema ?? {} };
    if (rf?.type === "json_object") return { schema: null };
    return null;
  }
  const f = body.output_config?.format ?? body.output_format;
  return f?.type === "json_schema" ? { schema: f.schema ?? {} } : null;
}

function wantsReasoning(format, body) {
  if (format === "anthropic") return ["enabled", "adaptive"].includes(body.thinking?.type);
  return typeof body.reasoning_effort === "string" && body.reasoning_effort !== "none";
}

/** The blocks of an Anthropic request marked `cache_control`. */
function cacheMarked(body) {
  const marked = [];
  const visit = (block) => { if (block && typeof block === "object" && block.cache_control) marked.push(block); };
  for (const t of Array.isArray(body.tools) ? body.tools : []) visit(t);
  if (Array.isArray(body.system)) body.system.forEach(visit);
  for (const m of body.messages) if (Array.isArray(m?.content)) m.content.forEach(visit);
  return marked;
}

/** Prompt-cache tokens { written, read } for this request, remembering what it wrote. */
function cacheUse(provider, format, body) {
  const seen = provider.cacheSeen;
  if (format === "anthropic") {
    const marked = cacheMarked(body);
    if (!marked.length) return { written: 0, read: 0 };
    const tokens = marked.reduce((n, b) => n + Math.max(1, Math.ceil(JSON.stringify(b).length / 4)), 0);
    const key = JSON.stringify([body.model, marked]);
    if (seen.has(key)) return { written: 0, read: tokens };
    seen.add(key);
    return { written: tokens, read: 0 };
  }
  const words = countWords(textOf(body.messages[0]?.content));
  if (words < CACHE_MIN_WORDS) return { written: 0, read: 0 };
  const key = JSON.stringify([body.model, body.prompt_cache_key ?? null, body.messages[0]]);
  if (seen.has(key)) return { written: 0, read: words };
  seen.add(key);
  return { written: words, read: 0 };
}

/**
 * The answer to a valid request, in neither format yet: { text, chunks, truncated, tools:
 * [{id, name, args}], thinking, signature, redacted (a redacted_thinking block's data), finish ("stop" | "length" | "tools"), inputTokens,
 * outputTokens, reasoningTokens, cache: {written, read}, choices }.
 */
export function planAnswer(provider, ctx, body, maxTokens) {
  const { format } = ctx;
  const echo = makeEcho(provider, body, maxTokens);
  const plan = { text: echo.text, chunks: echo.chunks, truncated: echo.truncated, tools: [], thinking: null, signature: null, redacted: null,
    inputTokens: promptTokens(body), outputTokens: echo.tokens, reasoningTokens: 0, cache: cacheUse(provider, format, body),
    choices: format === "openai" ? Math.min(MAX_CHOICES, Math.max(1, Number.isInteger(body.n) ? body.n : 1)) : 1 };
  if (wantsReasoning(format, body)) {
    plan.thinking = `Considering: ${lastUserText(body.messages)}`;
    plan.reasoningTokens = countWords(plan.thinking);
    if (format === "anthropic") plan.signature = Buffer.from(`mock-signature:${provider.name}:${ctx.seq}`).toString("base64");
    if (format === "anthropic" && provider.settings.redactThinking) plan.redacted = Buffer.from(`mock-redacted:${provider.name}:${ctx.seq}`).toString("base64");
  }
  const { calls, forced } = toolsToCall(format, body);
  const structured = structuredOutput(format, body);
  if (calls.length) {
    plan.tools = calls.map((t, i) => ({
      id: format === "openai" ? `call_mock_${ctx.seq}_${i}` : `toolu_mock_${ctx.seq}_${i}`,
      name: t.name, args: JSON.stringify(exampleOf(t.schema)),
    }));
    const argTokens = plan.tools.reduce((n, t) => n + slices(t.args).length, 0);
    // Claude says what it is about to do unless forced; OpenAI models answer with the calls alone.
    if (forced || format === "openai") {
      plan.text = null;
      plan.chunks = [];
      plan.outputTokens = argTokens;
    } else {
      plan.outputTokens += argTokens;
    }
    plan.truncated = false;
  } else if (structured) {
    plan.text = JSON.stringify(structured.schema ? exampleOf(structured.schema) : { answer: echo.text });
    plan.chunks = slices(plan.text);
    plan.truncated = false;
    plan.outputTokens = plan.chunks.length;
  }
  plan.finish = plan.tools.length ? "tools" : plan.truncated ? "length" : "stop";
  return plan;
}

// ---------------------------------------------------------------- OpenAI chat completions

function logprobsOf(body, pieces) {
  if (body.logprobs !== true) return null;
  const entry = (token) => ({ token, logprob: -0.25, bytes: [...Buffer.from(token)] });
  const top = Number.isInteger(body.top_logprobs) ? body.top_logprobs : 0;
  return { content: pieces.map((t) => ({ ...entry(t), top_logprobs: Array.from({ length: top }, () => entry(t)) })), refusal: null };
}

const OPENAI_FINISH = { stop: "stop", length: "length", tools: "tool_calls" };

export const openai = {
  validate(body) {
    if (typeof body.model !== "string" || !body.model) return "model: a model name is required";
    if (!Array.isArray(body.messages) || body.messages.length === 0) return "messages: must be a non-empty array";
    const roles = ["system", "developer", "user", "assistant", "tool", "function"];
    const bad = body.messages.findIndex((m) => !roles.includes(m?.role));
    if (bad >= 0) return `messages[${bad}].role: must be one of ${roles.join(", ")}`;
    for (const [i, m] of body.messages.entries()) {
      for (const [j, part] of (Array.isArray(m.content) ? m.content : []).entries()) {
        if (part?.type === "image_url" && typeof part.image_url?.url !== "string") return `messages[${i}].content[${j}].image_url.url: required`;
      }
    }
    const rf = body.response_format;
    if (rf?.type === "json_schema" && (typeof rf.json_schema?.name !== "string" || typeof rf.json_schema?.schema !== "object")) {
      return "response_format.json_schema: name and schema are required";
    }
    return null;
  },
  maxTokens: (body) => body.max_completion_tokens ?? body.max_tokens,
  usage(plan) {
    const completion = plan.outputTokens + plan.reasoningTokens;
    return { prompt_tokens: plan.inputTokens, completion_tokens: completion, total_tokens: plan.inputTokens + completion,
      prompt_tokens_details: { cached_tokens: Math.min(plan.cache.read, plan.inputTokens), audio_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: plan.reasoningTokens, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 } };
  },
  message(plan) {
    const message = { role: "assistant", content: plan.text, refusal: null, annotations: [] };
    if (plan.thinking) message.reasoning_content = plan.thinking;
    if (plan.tools.length) {
      message.tool_calls = plan.tools.map((t) => ({ id: t.id, type: "function", function: { name: t.name, arguments: t.args } }));
    }
    return message;
  },
  completion(ctx, body) {
    const { plan } = ctx;
    const choices = Array.from({ length: plan.choices }, (_, index) => ({ index, message: openai.message(plan),
      logprobs: plan.text === null ? null : logprobsOf(body, plan.chunks), finish_reason: OPENAI_FINISH[plan.finish] }));
    return {
      id: ctx.id, object: "chat.completion", created: ctx.created, model: ctx.model, choices,
      usage: openai.usage(plan), service_tier: "default", system_fingerprint: "fp_mock",
      ...(ctx.provider.settings.future ? { mock_future_field: { note: "a field from a newer API" } } : {}),
    };
  },
  /** { preamble, content, finish, done } lists of SSE events {event?, data, count?}. */
  streamEvents(ctx, body) {
    const { plan } = ctx;
    const settings = ctx.provider.settings;
    const withUsage = body.stream_options?.include_usage === true && settings.streamUsage !== "never";
    let first = true;
    const chunk = (choices, extra = {}) => {
      const future = first && settings.future ? { mock_future_field: { note: "a field from a newer API" } } : {};
      first = false;
      return { data: JSON.stringify({ id: ctx.id, object: "chat.completion.chunk", created: ctx.created, model: ctx.model,
        service_tier: "default", system_fingerprint: "fp_mock", choices, ...(withUsage ? { usage: null } : {}), ...future, ...extra }) };
    };
    const choice = (index, delta, finish = null, logprobs = null) => [{ index, delta, logprobs, finish_reason: finish }];
    const preamble = [];
    const content = [];
    const finish = [];
    for (let i = 0; i < plan.choices; i++) {
      (i === 0 ? preamble : content).push({ ...chunk(choice(i, { role: "assistant", content: "", refusal: null })), count: false });
      if (plan.thinking) for (const piece of splitChunks(plan.thinking)) content.push(chunk(choice(i, { reasoning_content: piece })));
      for (const piece of plan.chunks) content.push(chunk(choice(i, { content: piece }, null, logprobsOf(body, [piece]))));
      plan.tools.forEach((t, index) => {
        content.push(chunk(choice(i, { tool_calls: [{ index, id: t.id, type: "function", function: { name: t.name, arguments: "" } }] })));
        for (const piece of slices(t.args)) content.push(chunk(choice(i, { tool_calls: [{ index, function: { arguments: piece } }] })));
      });
      finish.push(chunk(choice(i, {}, OPENAI_FINISH[plan.finish])));
    }
    if (withUsage) finish.push(chunk([], { usage: openai.usage(plan) }));
    return { preamble, content, finish, done: [{ data: "[DONE]" }] };
  },
};

// ---------------------------------------------------------------- Anthropic messages

const ANTHROPIC_STOP = { stop: "end_turn", length: "max_tokens", tools: "tool_use" };

function anthropicBlockProblem(block, where) {
  if (block?.type === "thinking" && (typeof block.thinking !== "string" || typeof block.signature !== "string")) {
    return `${where}.signature: Field required (a thinking block needs its thinking and signature)`;
  }
  if (block?.type === "redacted_thinking" && typeof block.data !== "string") return `${where}.data: Field required`;
  if (block?.type === "image") {
    const s = block.source;
    if (s?.type === "base64" && (typeof s.media_type !== "string" || typeof s.data !== "string")) return `${where}.source: media_type and data are required`;
    if (s?.type === "url" && typeof s.url !== "string") return `${where}.source.url: Field required`;
    if (!["base64", "url", "file"].includes(s?.type)) return `${where}.source.type: Input should be 'base64', 'url' or 'file'`;
  }
  return null;
}

export const anthropic = {
  validate(body) {
    if (typeof body.model !== "string" || !body.model) return "model: Field required";
    if (!Number.isInteger(body.max_tokens) || body.max_tokens < 1) return "max_tokens: Field required (an integer >= 1)";
    if (!Array.isArray(body.messages) || body.messages.length === 0) return "messages: at least one message is required";
    const bad = body.messages.findIndex((m) => m?.role !== "user" && m?.role !== "assistant");
    if (bad >= 0) return `messages.${bad}.role: Input should be 'user' or 'assistant'`;
    for (const [i, m] of body.messages.entries()) {
      for (const [j, block] of (Array.isArray(m.content) ? m.content : []).entries()) {
        const problem = anthropicBlockProblem(block, `messages.${i}.content.${j}`);
        if (problem) return problem;
      }
    }
    if (body.thinking?.type === "enabled") {
      const budget = body.thinking.budget_tokens;
      if (!Number.isInteger(budget) || budget < 1024) return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024";
      if (budget >= body.max_tokens) return "max_tokens: must be greater than thinking.budget_tokens";
    }
    return null;
  },
  maxTokens: (body) => body.max_tokens,
  usage(plan) {
    return { input_tokens: plan.inputTokens, output_tokens: plan.outputTokens + plan.reasoningTokens,
      cache_creation_input_tokens: plan.cache.written, cache_read_input_tokens: plan.cache.read };
  },
  blocks(plan) {
    const blocks = [];
    if (plan.redacted) blocks.push({ type: "redacted_thinking", data: plan.redacted });
    else if (plan.thinking) blocks.push({ type: "thinking", thinking: plan.thinking, signature: plan.signature });
    if (plan.text !== null) blocks.push({ type: "text", text: plan.text });
    for (const t of plan.tools) blocks.push({ type: "tool_use", id: t.id, name: t.name, input: JSON.parse(t.args) });
    return blocks;
  },
  completion(ctx) {
    const { plan } = ctx;
    return { id: ctx.id, type: "message", role: "assistant", model: ctx.model, content: anthropic.blocks(plan),
      stop_reason: ANTHROPIC_STOP[plan.finish], stop_sequence: null, usage: anthropic.usage(plan),
      ...(ctx.provider.settings.future ? { mock_future_field: { note: "a field from a newer API" } } : {}) };
  },
  /**
   * The first block's start and a ping in the preamble, every delta (and the later blocks'
   * starts and stops, not counted as content) in content, the last block's stop in finish.
   */
  streamEvents(ctx) {
    const { plan } = ctx;
    const ev = (event, data, count = event === "content_block_delta") => ({ event, data: JSON.stringify({ type: event, ...data }), count });
    const start = { id: ctx.id, type: "message", role: "assistant", model: ctx.model, content: [],
      stop_reason: null, stop_sequence: null, usage: { ...anthropic.usage(plan), output_tokens: 1 } };
    const blocks = [];
    if (plan.redacted) {
      // A redacted block comes whole in its start event, with no deltas.
      blocks.push({ start: { type: "redacted_thinking", data: plan.redacted }, deltas: [] });
    } else if (plan.thinking) {
      blocks.push({ start: { type: "thinking", thinking: "", signature: "" }, deltas: [
        ...splitChunks(plan.thinking).map((thinking) => ({ type: "thinking_delta", thinking })),
        { type: "signature_delta", signature: plan.signature }] });
    }
    if (plan.text !== null) blocks.push({ start: { type: "text", text: "" }, deltas: plan.chunks.map((text) => ({ type: "text_delta", text })) });
    for (const t of plan.tools) {
      blocks.push({ start: { type: "tool_use", id: t.id, name: t.name, input: {} },
        deltas: slices(t.args).map((partial_json) => ({ type: "input_json_delta", partial_json })) });
    }
    const content = [];
    blocks.forEach((b, index) => {
      if (index > 0) content.push(ev("content_block_stop", { index: index - 1 }), ev("content_block_start", { index, content_block: b.start }));
      for (const delta of b.deltas) content.push(ev("content_block_delta", { index, delta }));
    });
    if (content.length > 2) content.splice(2, 0, ev("ping", {})); // pings may come between deltas
    if (ctx.provider.settings.future) content.splice(1, 0, ev("mock_future_event", { note: "an event type from a newer API" }, false));
    const last = Math.max(0, blocks.length - 1);
    return {
      preamble: [ev("message_start", { message: start }), ev("content_block_start", { index: 0, content_block: blocks[0]?.start ?? { type: "text", text: "" } }), ev("ping", {})],
      content,
      finish: [ev("content_block_stop", { index: last }),
        ev("message_delta", { delta: { stop_reason: ANTHROPIC_STOP[plan.finish], stop_sequence: null }, usage: { output_tokens: plan.outputTokens + plan.reasoningTokens } })],
      done: [ev("message_stop", {})],
    };
  },
};

export const FORMATS = { openai, anthropic };
