// Type-checked only (`tsc --noEmit -p tests/npm/types`, scripts/test-npm.sh): the request and
// answer shapes of types.d.ts as a caller writes and reads them. `@ts-expect-error` marks what
// the types must refuse.
import type {
  ChatRequest,
  Config,
  ChatResult,
  ContentPart,
  NativeRequest,
  ProviderRequest,
  ResilientClient,
  StreamEvent,
  Thinking,
  Usage,
} from "resilient-llm";

const parts: ContentPart[] = [
  { type: "text", text: "look", cacheControl: { type: "ephemeral", ttl: "1h" } },
  { type: "image", url: "https://example.com/cat.png", detail: "low" },
  { type: "image", data: "iVBORw0KGgo=", mediaType: "image/png", cacheControl: { type: "ephemeral" } },
  { type: "tool_result", toolCallId: "call_1", content: "42", images: [{ url: "data:image/png;base64,AAAA" }] },
  { type: "thinking", text: "because", signature: "c2ln" },
  { type: "thinking", redacted: "ZW5j" },
];

export const neutral: ChatRequest = {
  model: "default",
  messages: [{ role: "user", content: parts }],
  maxTokens: 1024,
  topK: 5,
  seed: 1,
  frequencyPenalty: 0.1,
  presencePenalty: 0.2,
  parallelToolCalls: false,
  serviceTier: "flex",
  promptCacheKey: "k",
  user: "u-1",
  tools: [{ name: "lookup", parameters: { type: "object" }, cacheControl: { type: "ephemeral" } }],
  responseFormat: { type: "json_schema", name: "city", schema: { type: "object" }, strict: true },
  reasoning: { effort: "low" },
};

export const budget: ChatRequest = { messages: [{ role: "user", content: "hi" }], reasoning: { budgetTokens: 2048 } };
export const off: ChatRequest = { messages: [{ role: "user", content: "hi" }], reasoning: { disabled: true } };

const native: NativeRequest = {
  dialect: "openai",
  body: { model: "gpt", messages: [{ role: "user", content: "hi" }], logit_bias: {} },
  headers: { "openai-beta": "assistants=v2" },
};
export const passthrough: ChatRequest = { native, model: "mixed" };

// @ts-expect-error an image says where its bytes are once
export const both: ContentPart = { type: "image", url: "https://x", data: "AA", mediaType: "image/png" };
// @ts-expect-error only the forwarded headers
export const auth: NativeRequest = { dialect: "openai", body: {}, headers: { authorization: "Bearer x" } };
// @ts-expect-error a typo is no field
export const typo: ChatRequest = { messages: [], maxToken: 5 };

export async function read(client: ResilientClient): Promise<string> {
  const r: ChatResult = await client.chat(neutral);
  const signed: Thinking[] = r.thinking.filter((t) => t.signature !== undefined);
  const usage: Usage | null = r.usage;
  const cached: number | undefined = usage?.cachedInputTokens;
  const omitted: string[] = r.attempts.flatMap((a) => a.omitted ?? []);
  let text = `${signed.length} ${cached ?? "-"} ${omitted.join(",")} ${usage?.reasoningTokens ?? "-"}`;
  for await (const e of client.stream(passthrough)) {
    const event: StreamEvent = e;
    if (event.type === "thinking") text += event.signature ?? event.text;
    if (event.type === "usage") text += event.usage.cacheWriteInputTokens ?? 0;
  }
  return text;
}

export function seen(req: ProviderRequest): string | undefined {
  return req.responseFormat?.type ?? (req.reasoning && "effort" in req.reasoning ? req.reasoning.effort : undefined);
}

// AWS Bedrock with its credentials in the config (or named secrets); a region is required.
export const bedrock: Config = {
  providers: { aws: { kind: "bedrock", region: "us-east-1", accessKeyId: "AKIDEXAMPLE", secretAccessKey: "secret", sessionTokenEnv: "AWS_SESSION_TOKEN" } },
  routes: { claude: [{ provider: "aws", model: "us.anthropic.claude-sonnet-4-5-20250929-v1:0" }] },
};
// @ts-expect-error a Bedrock provider names its region
export const noRegion: Config = { providers: { aws: { kind: "bedrock" } } };

// An OpenAI-compatible preset is one of the preset names.
export const presets: Config = {
  providers: {
    local: { kind: "openai-compatible", preset: "ollama", baseUrl: "http://127.0.0.1:11434/v1" },
    router: { kind: "openai-compatible", preset: "openrouter" },
  },
  routes: { default: [{ provider: "local", model: "llama3" }] },
};
// @ts-expect-error "grok" is no preset
export const madeUpPreset: Config = { providers: { x: { kind: "openai-compatible", preset: "grok" } } };

// A client is disposable: `[Symbol.dispose]` is typed, and `using` takes it.
export function disposed(client: ResilientClient): void {
  const dispose: () => void = client[Symbol.dispose];
  void dispose;
  using owned = client;
  void owned;
}
