// The mock provider's OpenAI Responses API (POST /p/<name>/v1/responses): a wire beside the
// Chat Completions and Messages ones of mock-answers.mjs, with the same faults (mock-provider.mjs
// applies them: status errors, resets, stream cuts and stalls after k content deltas, …).
// The request is read as the Chat Completions request it amounts to, planned by planAnswer
// (the same echo, tool calls, structured output and reasoning), and answered as a Response
// object or as the Responses stream events, with `sequence_number`s; every field the request
// sent is kept in what the mock received.
import { planAnswer } from "./mock-answers.mjs";

/** A Responses `input` item's content as Chat Completions content. */
function content(c) {
  if (typeof c === "string") return c;
  if (!Array.isArray(c)) return "";
  return c.map((p) => {
    if (p?.type === "input_image") return { type: "image_url", image_url: { url: p.image_url } };
    return { type: "text", text: p?.text ?? p?.refusal ?? "" };
  });
}

/** The Chat Completions request a Responses request amounts to (what planAnswer reads). */
export function chatBody(body) {
  const messages = [];
  if (typeof body.instructions === "string") messages.push({ role: "system", content: body.instructions });
  const input = typeof body.input === "string" ? [{ role: "user", content: body.input }] : Array.isArray(body.input) ? body.input : [];
  for (const item of input) {
    const type = item?.type ?? "message";
    if (type === "message") messages.push({ role: item.role, content: content(item.content) });
    else if (type === "function_call") {
      messages.push({ role: "assistant", content: null, tool_calls: [{ id: item.call_id, type: "function", function: { name: item.name, arguments: item.arguments } }] });
    } else if (type === "function_call_output") {
      messages.push({ role: "tool", tool_call_id: item.call_id, content: typeof item.output === "string" ? item.output : JSON.stringify(item.output) });
    }
  }
  const tools = (Array.isArray(body.tools) ? body.tools : []).filter((t) => t?.type === "function")
    .map((t) => ({ type: "function", function: { name: t.name, description: t.description, parameters: t.parameters } }));
  const tc = body.tool_choice;
  const format = body.text?.format;
  return {
    model: body.model,
    messages,
    ...(tools.length ? { tools } : {}),
    ...(tc === undefined ? {} : { tool_choice: tc?.type === "function" ? { type: "function", function: { name: tc.name } } : tc }),
    ...(format?.type === "json_schema" ? { response_format: { type: "json_schema", json_schema: { name: format.name, schema: format.schema, strict: format.strict } } } : {}),
    ...(format?.type === "json_object" ? { response_format: { type: "json_object" } } : {}),
    ...(body.reasoning?.effort ? { reasoning_effort: body.reasoning.effort } : {}),
    stream: body.stream === true,
  };
}

function usage(plan) {
  const output = plan.outputTokens + plan.reasoningTokens;
  return { input_tokens: plan.inputTokens, input_tokens_details: { cached_tokens: 0 }, output_tokens: output,
    output_tokens_details: { reasoning_tokens: plan.reasoningTokens }, total_tokens: plan.inputTokens + output };
}

/** The output items of a plan, in the API's order: reasoning, message, function calls. */
function outputItems(ctx) {
  const { plan } = ctx;
  const items = [];
  if (plan.thinking) items.push({ type: "reasoning", id: `rs_${ctx.rid}`, summary: [{ type: "summary_text", text: plan.thinking }] });
  if (plan.text !== null) {
    items.push({ type: "message", id: `msg_${ctx.rid}`, status: "completed", role: "assistant",
      content: [{ type: "output_text", text: plan.text, annotations: [] }] });
  }
  plan.tools.forEach((t, i) => items.push({ type: "function_call", id: `fc_${ctx.rid}_${i}`, call_id: t.id, name: t.name, arguments: t.args, status: "completed" }));
  return items;
}

function responseObject(ctx, body, status, output) {
  const incomplete = status === "incomplete";
  return {
    id: `resp_${ctx.rid}`, object: "response", created_at: ctx.created, status, model: ctx.model, output,
    error: null, incomplete_details: incomplete ? { reason: "max_output_tokens" } : null,
    instructions: body.instructions ?? null, tools: body.tools ?? [], tool_choice: body.tool_choice ?? "auto",
    parallel_tool_calls: true, previous_response_id: body.previous_response_id ?? null, store: body.store ?? true,
    text: body.text ?? { format: { type: "text" } }, metadata: body.metadata ?? {},
    usage: status === "in_progress" ? null : usage(ctx.plan),
  };
}

export const responses = {
  validate(body) {
    if (typeof body.model !== "string" || !body.model) return "model: a model name is required";
    if (typeof body.input !== "string" && !Array.isArray(body.input)) return "input: a string or an array of items is required";
    return null;
  },
  maxTokens: (body) => body.max_output_tokens,
  plan(provider, ctx, body, maxTokens) {
    ctx.rid = `mock_${provider.name}_${ctx.seq}`;
    return planAnswer(provider, { ...ctx, format: "openai" }, chatBody(body), maxTokens);
  },
  completion(ctx, body) {
    return responseObject(ctx, body, ctx.plan.truncated ? "incomplete" : "completed", outputItems(ctx));
  },
  /** { preamble, content, finish, done } lists of SSE events {event, data, count?}. */
  streamEvents(ctx, body) {
    const { plan } = ctx;
    let seq = 0;
    const ev = (type, fields, count = true) => ({ event: type, data: JSON.stringify({ type, sequence_number: seq++, ...fields }), count });
    const preamble = [
      ev("response.created", { response: responseObject(ctx, body, "in_progress", []) }, false),
      ev("response.in_progress", { response: responseObject(ctx, body, "in_progress", []) }, false),
    ];
    const content = [];
    const items = outputItems(ctx);
    items.forEach((item, output_index) => {
      if (item.type === "message") {
        content.push(ev("response.output_item.added", { output_index, item: { ...item, status: "in_progress", content: [] } }, false));
        const part = { type: "output_text", text: "", annotations: [] };
        content.push(ev("response.content_part.added", { item_id: item.id, output_index, content_index: 0, part }, false));
        for (const delta of plan.chunks) content.push(ev("response.output_text.delta", { item_id: item.id, output_index, content_index: 0, delta, logprobs: [] }));
        content.push(ev("response.output_text.done", { item_id: item.id, output_index, content_index: 0, text: plan.text, logprobs: [] }, false));
        content.push(ev("response.content_part.done", { item_id: item.id, output_index, content_index: 0, part: item.content[0] }, false));
      } else if (item.type === "function_call") {
        content.push(ev("response.output_item.added", { output_index, item: { ...item, arguments: "", status: "in_progress" } }, false));
        content.push(ev("response.function_call_arguments.delta", { item_id: item.id, output_index, delta: item.arguments }));
        content.push(ev("response.function_call_arguments.done", { item_id: item.id, output_index, arguments: item.arguments }, false));
      } else {
        content.push(ev("response.output_item.added", { output_index, item }, false));
      }
      content.push(ev("response.output_item.done", { output_index, item }, false));
    });
    const status = plan.truncated ? "incomplete" : "completed";
    const finish = [ev(`response.${status}`, { response: responseObject(ctx, body, status, items) }, false)];
    return { preamble, content, finish, done: [] };
  },
};
