// `resilient-llm/ai-sdk`: a Vercel AI SDK language model over a ResilientClient, so
// `generateText` and `streamText` get the client's routes, retries, breakers and failover.
// It implements the language model specification "v4" (`LanguageModelV4` of @ai-sdk/provider 4,
// which the `ai` 7 package calls). No imports: it only needs the client it is given.

const SPEC = "v4";

/** A finish reason of this package as the AI SDK's unified one. */
function finishReason(reason) {
  const unified = {
    stop: "stop",
    length: "length",
    tool_calls: "tool-calls",
    content_filter: "content-filter",
  }[reason];
  return { unified: unified || (reason ? "other" : "stop"), raw: reason || undefined };
}

/** Usage as the AI SDK counts it; what the provider did not report stays undefined. */
function usage(u) {
  if (!u) {
    return {
      inputTokens: { total: undefined, noCache: undefined, cacheRead: undefined, cacheWrite: undefined },
      outputTokens: { total: undefined, text: undefined, reasoning: undefined },
    };
  }
  const cached = u.cachedInputTokens;
  return {
    inputTokens: {
      total: u.inputTokens,
      noCache: cached === undefined ? undefined : u.inputTokens - cached,
      cacheRead: cached,
      cacheWrite: u.cacheWriteInputTokens,
    },
    outputTokens: {
      total: u.outputTokens,
      text: u.reasoningTokens === undefined ? undefined : u.outputTokens - u.reasoningTokens,
      reasoning: u.reasoningTokens,
    },
  };
}

/** A tool result's output as the text the neutral request carries. */
function toolOutput(output) {
  if (!output) return { content: "" };
  switch (output.type) {
    case "text":
      return { content: output.value };
    case "error-text":
      return { content: output.value, isError: true };
    case "json":
      return { content: JSON.stringify(output.value) };
    case "error-json":
      return { content: JSON.stringify(output.value), isError: true };
    case "execution-denied":
      return { content: output.reason || "the tool's execution was denied", isError: true };
    default:
      return { content: JSON.stringify(output.value ?? null) };
  }
}

function unsupported(feature, warnings) {
  warnings.push({ type: "unsupported", feature });
}

/** The AI SDK's prompt as this package's messages. */
function messages(prompt, warnings) {
  const out = [];
  for (const m of prompt) {
    switch (m.role) {
      case "system":
        out.push({ role: "system", content: m.content });
        break;
      case "user":
      case "assistant": {
        const parts = [];
        for (const p of m.content) {
          if (p.type === "text") parts.push({ type: "text", text: p.text });
          else if (p.type === "reasoning") parts.push({ type: "thinking", text: p.text });
          else if (p.type === "tool-call") {
            const input = typeof p.input === "string" ? p.input : JSON.stringify(p.input ?? {});
            parts.push({ type: "tool_call", id: p.toolCallId, name: p.toolName, arguments: input });
          } else if (p.type === "tool-result") {
            parts.push({ type: "tool_result", toolCallId: p.toolCallId, ...toolOutput(p.output) });
          } else unsupported(`${p.type} parts`, warnings);
        }
        out.push({ role: m.role, content: parts });
        break;
      }
      case "tool": {
        const parts = [];
        for (const p of m.content) {
          if (p.type === "tool-result") {
            parts.push({ type: "tool_result", toolCallId: p.toolCallId, ...toolOutput(p.output) });
          } else unsupported(`${p.type} parts`, warnings);
        }
        out.push({ role: "tool", content: parts });
        break;
      }
      default:
        unsupported(`${m.role} messages`, warnings);
    }
  }
  return out;
}

/** The AI SDK's call options as a request and call options of the client. */
function toRequest(route, options) {
  const warnings = [];
  const request = { model: route, messages: messages(options.prompt, warnings) };
  const copy = [
    ["maxOutputTokens", "maxTokens"],
    ["temperature", "temperature"],
    ["topP", "topP"],
    ["topK", "topK"],
    ["stopSequences", "stop"],
    ["seed", "seed"],
    ["presencePenalty", "presencePenalty"],
    ["frequencyPenalty", "frequencyPenalty"],
  ];
  for (const [from, to] of copy) if (options[from] !== undefined) request[to] = options[from];
  const tools = (options.tools || []).filter((t) => t.type === "function");
  if (options.tools && tools.length < options.tools.length) unsupported("provider-defined tools", warnings);
  if (tools.length > 0) {
    request.tools = tools.map((t) => ({ name: t.name, description: t.description, parameters: t.inputSchema }));
  }
  const choice = options.toolChoice;
  if (choice) {
    request.toolChoice = choice.type === "tool" ? { type: "tool", name: choice.toolName } : { type: choice.type };
  }
  const format = options.responseFormat;
  if (format && format.type === "json") {
    request.responseFormat = format.schema
      ? { type: "json_schema", name: format.name || "response", schema: format.schema, description: format.description }
      : { type: "json_object" };
  }
  if (options.reasoning && options.reasoning !== "provider-default") {
    if (options.reasoning === "none") request.reasoning = { disabled: true };
    else request.reasoning = { effort: options.reasoning === "xhigh" || options.reasoning === "max" ? "high" : options.reasoning };
  }
  const call = {};
  if (options.abortSignal) call.signal = options.abortSignal;
  return { request, call, warnings };
}

class ResilientLanguageModel {
  constructor(client, modelId, provider) {
    this.specificationVersion = SPEC;
    this.provider = provider;
    this.modelId = modelId;
    this.supportedUrls = {};
    this.client = client;
  }

  async doGenerate(options) {
    const { request, call, warnings } = toRequest(this.modelId, options);
    const res = await this.client.chat(request, call);
    const content = [];
    for (const t of res.thinking || []) if (t.text) content.push({ type: "reasoning", text: t.text });
    if (res.text) content.push({ type: "text", text: res.text });
    for (const c of res.toolCalls || []) {
      content.push({ type: "tool-call", toolCallId: c.id, toolName: c.name, input: c.arguments });
    }
    return {
      content,
      finishReason: finishReason(res.finishReason),
      usage: usage(res.usage),
      warnings,
      request: { body: request },
      response: { modelId: res.model },
      providerMetadata: {
        resilientLlm: { provider: res.servedBy.provider, model: res.servedBy.model, attempts: res.attempts.length },
      },
    };
  }

  async doStream(options) {
    const { request, call, warnings } = toRequest(this.modelId, options);
    const events = this.client.stream(request, call);
    let text = null;
    let reasoning = null;
    let reason = null;
    let used = null;
    const calls = new Map();
    let n = 0;
    const stream = new ReadableStream({
      start(controller) {
        controller.enqueue({ type: "stream-start", warnings });
      },
      // Reads events until one becomes a part: a pull that enqueues nothing is not called again.
      async pull(controller) {
        let sent = false;
        const enqueue = (part) => {
          sent = true;
          controller.enqueue(part);
        };
        while (!sent) {
          let r;
          try {
            r = await events.next();
          } catch (error) {
            controller.enqueue({ type: "error", error });
            controller.close();
            return;
          }
          if (r.done) {
            if (reasoning) enqueue({ type: "reasoning-end", id: reasoning });
            if (text) enqueue({ type: "text-end", id: text });
            for (const c of calls.values()) {
              enqueue({ type: "tool-input-end", id: c.id });
              enqueue({ type: "tool-call", toolCallId: c.id, toolName: c.name, input: c.input });
            }
            enqueue({ type: "finish", finishReason: finishReason(reason), usage: usage(used) });
            controller.close();
            return;
          }
          const ev = r.value;
          switch (ev.type) {
            case "start":
              enqueue({ type: "response-metadata", modelId: ev.model ?? undefined });
              break;
            case "thinking":
              if (!ev.text) break;
              if (!reasoning) {
                reasoning = `reasoning-${n++}`;
                enqueue({ type: "reasoning-start", id: reasoning });
              }
              enqueue({ type: "reasoning-delta", id: reasoning, delta: ev.text });
              break;
            case "text":
              if (reasoning) {
                enqueue({ type: "reasoning-end", id: reasoning });
                reasoning = null;
              }
              if (!text) {
                text = `text-${n++}`;
                enqueue({ type: "text-start", id: text });
              }
              enqueue({ type: "text-delta", id: text, delta: ev.text });
              break;
            case "tool_call": {
              let c = calls.get(ev.index);
              if (!c) {
                c = { id: ev.id || `call-${ev.index}`, name: ev.name || "", input: "" };
                calls.set(ev.index, c);
                enqueue({ type: "tool-input-start", id: c.id, toolName: c.name });
              }
              c.input += ev.arguments;
              if (ev.arguments) enqueue({ type: "tool-input-delta", id: c.id, delta: ev.arguments });
              break;
            }
            case "finish":
              reason = ev.reason;
              break;
            case "usage":
              used = ev.usage;
              break;
          }
        }
      },
      async cancel() {
        if (typeof events.return === "function") await events.return();
      },
    });
    return { stream, request: { body: request } };
  }
}

/**
 * A provider of language models over `client`: `provider(route)` is the model for that route of
 * the client's configuration (`"default"` when none is named).
 */
export function createResilient(settings) {
  const client = settings && settings.client;
  if (!client || typeof client.chat !== "function" || typeof client.stream !== "function") {
    throw new TypeError("createResilient: pass { client }, a ResilientClient");
  }
  const name = (settings && settings.name) || "resilient-llm";
  const provider = (route) => new ResilientLanguageModel(client, route || "default", name);
  provider.languageModel = provider;
  provider.specificationVersion = SPEC;
  return provider;
}
