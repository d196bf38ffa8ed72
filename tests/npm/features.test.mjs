// The request's full reach from JS, against the mock provider server (127.0.0.1, free port),
// asserting on what the mock received: images, structured output, reasoning and thinking
// sent back, prompt caching and its usage, a native provider-format body passed through or
// translated, and typos refused with their path.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { startMock } from "../e2e/mock-provider.mjs";
import m from "./pkg.mjs";

const { ResilientClient, ClientRequestError, LLMError } = m;

const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
const IMAGE_URL = "https://example.com/cat.png";

let mock;
let client;
before(async () => {
  mock = await startMock({ port: 0, config: { providers: {} } });
  const provider = (kind, name) => ({ kind, baseUrl: mock.providerUrl(name), apiKey: "test-key" });
  client = new ResilientClient({
    providers: { oai: provider("openai", "oai"), ant: provider("anthropic", "ant") },
    routes: {
      gpt: [{ provider: "oai", model: "gpt-mock" }],
      claude: [{ provider: "ant", model: "claude-mock" }],
      mixed: [{ provider: "ant", model: "claude-mixed" }, { provider: "oai", model: "gpt-mixed" }],
    },
    retry: { maxAttempts: 1 },
    timeoutMs: 5000,
  });
});
after(async () => {
  await mock.close();
});

/** The body of the last request `name` received. */
const last = (name) => mock.received(name).at(-1);

const IMAGE_PARTS = [
  { type: "text", text: "what is in these images" },
  { type: "image", data: PNG, mediaType: "image/png" },
  { type: "image", url: IMAGE_URL, detail: "low" },
];

test("an image part arrives as an Anthropic image block", async () => {
  const r = await client.chat({ model: "claude", maxTokens: 256, messages: [{ role: "user", content: IMAGE_PARTS }] });
  assert.match(r.text, /what is in these images/);
  const content = last("ant").body.messages[0].content;
  assert.deepEqual(content.filter((b) => b.type === "image"), [
    { type: "image", source: { type: "base64", media_type: "image/png", data: PNG } },
    { type: "image", source: { type: "url", url: IMAGE_URL } },
  ]);
});

test("an image part arrives as an OpenAI image_url, detail kept", async () => {
  await client.chat({ model: "gpt", messages: [{ role: "user", content: IMAGE_PARTS }] });
  const content = last("oai").body.messages[0].content;
  assert.deepEqual(content.filter((p) => p.type === "image_url"), [
    { type: "image_url", image_url: { url: `data:image/png;base64,${PNG}` } },
    { type: "image_url", image_url: { url: IMAGE_URL, detail: "low" } },
  ]);
});

const CITY_SCHEMA = {
  type: "object",
  properties: { city: { type: "string" }, population: { type: "number" } },
  required: ["city", "population"],
  additionalProperties: false,
};

test("responseFormat json_schema through an Anthropic provider answers with the JSON text", async () => {
  const r = await client.chat({
    model: "claude",
    maxTokens: 512,
    messages: [{ role: "user", content: "Paris?" }],
    responseFormat: { type: "json_schema", name: "city", schema: CITY_SCHEMA, strict: true },
  });
  const city = JSON.parse(r.text);
  assert.equal(typeof city.city, "string");
  assert.equal(typeof city.population, "number");
  assert.deepEqual(r.toolCalls, [], "a forced tool carrying the schema is the client's, not the caller's");
  assert.equal(r.finishReason, "stop");
  const sent = last("ant").body;
  const schema = sent.output_config?.format?.schema ?? sent.tools?.find((t) => t.input_schema)?.input_schema;
  assert.deepEqual(schema?.properties, CITY_SCHEMA.properties, JSON.stringify(sent));
});

test("responseFormat json_schema reaches an OpenAI provider as response_format", async () => {
  const r = await client.chat({
    model: "gpt",
    messages: [{ role: "user", content: "Paris?" }],
    responseFormat: { type: "json_schema", name: "city", schema: CITY_SCHEMA, strict: true },
  });
  assert.equal(typeof JSON.parse(r.text).city, "string");
  assert.deepEqual(last("oai").body.response_format,
    { type: "json_schema", json_schema: { name: "city", schema: CITY_SCHEMA, strict: true } });
});

test("reasoning effort becomes a thinking budget; signed thinking comes back and goes back", async () => {
  const first = await client.chat({
    model: "claude",
    maxTokens: 8000,
    reasoning: { effort: "low" },
    messages: [{ role: "user", content: "why is the sky blue" }],
  });
  const thinking = last("ant").body.thinking;
  assert.equal(thinking?.type, "enabled", JSON.stringify(last("ant").body));
  assert.ok(thinking.budget_tokens >= 1024 && thinking.budget_tokens < 8000, JSON.stringify(thinking));
  assert.equal(first.thinking.length, 1);
  assert.match(first.thinking[0].text, /Considering: why is the sky blue/);
  assert.equal(typeof first.thinking[0].signature, "string");
  assert.ok(first.usage.outputTokens > 0);

  await client.chat({
    model: "claude",
    maxTokens: 8000,
    reasoning: { budgetTokens: 2048 },
    messages: [
      { role: "user", content: "why is the sky blue" },
      { role: "assistant", content: [...first.thinking.map((t) => ({ type: "thinking", ...t })), { type: "text", text: first.text }] },
      { role: "user", content: "and at sunset?" },
    ],
  });
  const sent = last("ant").body;
  assert.deepEqual(sent.thinking, { type: "enabled", budget_tokens: 2048 });
  assert.deepEqual(sent.messages[1].content[0],
    { type: "thinking", thinking: first.thinking[0].text, signature: first.thinking[0].signature });
});

test("reasoning through an OpenAI provider: reasoning_effort sent, reasoning tokens reported", async () => {
  const r = await client.chat({ model: "gpt", reasoning: { effort: "high" }, messages: [{ role: "user", content: "think" }] });
  assert.equal(last("oai").body.reasoning_effort, "high");
  assert.ok(r.usage.reasoningTokens > 0, JSON.stringify(r.usage));
});

test("adaptive reasoning: Anthropic's adaptive thinking with its effort, OpenAI's effort level", async () => {
  await client.chat({ model: "claude", maxTokens: 2000, reasoning: { adaptive: true, effort: "high" }, messages: [{ role: "user", content: "think" }] });
  const sent = last("ant").body;
  assert.deepEqual(sent.thinking, { type: "adaptive" });
  assert.deepEqual(sent.output_config, { effort: "high" });
  await client.chat({ model: "gpt", reasoning: { adaptive: true, effort: "low" }, messages: [{ role: "user", content: "think" }] });
  assert.equal(last("oai").body.reasoning_effort, "low");
  await client.chat({ model: "gpt", reasoning: { adaptive: true }, messages: [{ role: "user", content: "think" }] });
  assert.equal(last("oai").body.reasoning_effort, undefined, "the provider's default");
});

test("cacheControl reaches Anthropic; cache writes then reads are reported in usage", async () => {
  const long = "the same long system prompt ".repeat(40);
  const request = {
    model: "claude",
    maxTokens: 256,
    messages: [
      { role: "system", content: [{ type: "text", text: long, cacheControl: { type: "ephemeral" } }] },
      { role: "user", content: "hello" },
    ],
    tools: [{ name: "lookup", parameters: { type: "object" }, cacheControl: { type: "ephemeral" } }],
  };
  const first = await client.chat(request);
  const sent = last("ant").body;
  assert.deepEqual(sent.system, [{ type: "text", text: long, cache_control: { type: "ephemeral" } }]);
  assert.deepEqual(sent.tools[0].cache_control, { type: "ephemeral" });
  assert.ok(first.usage.cacheWriteInputTokens > 0, JSON.stringify(first.usage));
  const second = await client.chat(request);
  assert.ok(second.usage.cachedInputTokens > 0, JSON.stringify(second.usage));
  assert.ok(second.usage.inputTokens >= second.usage.cachedInputTokens, "inputTokens counts cached ones too");
});

test("sampling fields reach an OpenAI provider under their own names", async () => {
  await client.chat({
    model: "gpt",
    messages: [{ role: "user", content: "hi" }],
    seed: 7, frequencyPenalty: 0.5, presencePenalty: 0.25, parallelToolCalls: false,
    serviceTier: "flex", promptCacheKey: "k1", user: "u-1",
    tools: [{ name: "lookup", parameters: { type: "object" } }],
  });
  const sent = last("oai").body;
  assert.equal(sent.seed, 7);
  assert.equal(sent.frequency_penalty, 0.5);
  assert.equal(sent.presence_penalty, 0.25);
  assert.equal(sent.parallel_tool_calls, false);
  assert.equal(sent.service_tier, "flex");
  assert.equal(sent.prompt_cache_key, "k1");
  assert.equal(sent.user, "u-1");
});

test("a hint Anthropic has no setting for is left out and named in the attempt's omitted", async () => {
  const r = await client.chat({ model: "claude", maxTokens: 64, topK: 5, seed: 7, messages: [{ role: "user", content: "hi" }] });
  const sent = last("ant").body;
  assert.equal(sent.top_k, 5);
  assert.equal(sent.seed, undefined);
  assert.deepEqual(r.attempts.at(-1).omitted, ["seed"]);
  assert.equal(r.attempts.at(-1).usage.inputTokens, r.usage.inputTokens);
});

test("a native OpenAI body: its unknown field reaches the OpenAI entry untouched, the Anthropic entry passes", async () => {
  const body = {
    model: "mixed",
    messages: [{ role: "user", content: "hi" }],
    future_field: { nested: [1, 2] },
    max_completion_tokens: 50,
  };
  const r = await client.chat({ native: { dialect: "openai", body, headers: { "OpenAI-Beta": "assistants=v2" } } });
  assert.equal(r.provider, "oai");
  const [skipped, served] = r.attempts;
  assert.equal(skipped.provider, "ant");
  assert.equal(skipped.reached, false);
  assert.match(skipped.message, /future_field/);
  assert.equal(served.ok, true);
  const received = last("oai");
  assert.deepEqual(received.body, { ...body, model: "gpt-mixed" });
  assert.equal(received.headers["openai-beta"], "assistants=v2");
});

test("a native OpenAI body is translated for the Anthropic entry of the same route", async () => {
  const body = {
    model: "mixed",
    messages: [{ role: "user", content: [{ type: "text", text: "look" }, { type: "image_url", image_url: { url: IMAGE_URL } }] }],
    max_tokens: 100,
    seed: 3,
  };
  const r = await client.chat({ native: { dialect: "openai", body } });
  assert.equal(r.provider, "ant");
  assert.deepEqual(r.attempts.map((a) => a.omitted ?? []), [["seed"]]);
  const sent = last("ant").body;
  assert.equal(sent.model, "claude-mixed");
  assert.equal(sent.max_tokens, 100);
  assert.deepEqual(sent.messages[0].content[1], { type: "image", source: { type: "url", url: IMAGE_URL } });
  assert.equal(sent.seed, undefined);
});

test("a native Anthropic body reaches an Anthropic provider as written; ChatRequest.model picks the route", async () => {
  const body = {
    model: "not-a-route",
    max_tokens: 64,
    messages: [{ role: "user", content: [{ type: "text", text: "hi", cache_control: { type: "ephemeral" } }] }],
    some_future_setting: true,
  };
  const r = await client.chat({ model: "claude", native: { dialect: "anthropic", body, headers: { "anthropic-beta": "b1" } } });
  assert.equal(r.provider, "ant");
  const received = last("ant");
  assert.deepEqual(received.body, { ...body, model: "claude-mock" });
  assert.match(received.headers["anthropic-beta"] ?? "", /b1/);
});

test("streams: thinking deltas are their own events, the usage event is what Anthropic reported", async () => {
  const events = [];
  const stream = client.stream({ model: "claude", maxTokens: 4000, reasoning: { budgetTokens: 1024 }, messages: [{ role: "user", content: "ponder" }] });
  for await (const e of stream) events.push(e);
  const thinking = events.filter((e) => e.type === "thinking");
  assert.ok(thinking.length > 1, JSON.stringify(events));
  assert.match(thinking.map((e) => e.text ?? "").join(""), /Considering: ponder/);
  assert.equal(typeof thinking.find((e) => e.signature)?.signature, "string");
  assert.ok(events.findIndex((e) => e.type === "thinking") < events.findIndex((e) => e.type === "text"));
  const usage = events.filter((e) => e.type === "usage").at(-1);
  assert.ok(usage?.usage.outputTokens > 0, JSON.stringify(events));
});

test("a typo'd field is a clear error naming it; a neutral field beside native is refused", async () => {
  const refused = async (request, pattern) => {
    await assert.rejects(client.chat(request), (e) => {
      assert.ok(e instanceof ClientRequestError, String(e));
      assert.equal(e.kind, "invalid_request");
      assert.match(e.message, pattern);
      return true;
    });
  };
  const msgs = [{ role: "user", content: "hi" }];
  await refused({ model: "gpt", messages: msgs, maxToken: 5 }, /unknown field `maxToken`/);
  await refused({ model: "gpt", messages: [{ role: "user", content: [{ type: "text", text: "x", cacheControll: {} }] }] },
    /messages\[0\]\.content\[0\].*unknown field `cacheControll`/);
  await refused({ model: "gpt", messages: [{ role: "user", content: [{ type: "image", data: PNG }] }] }, /mediaType/);
  await refused({ model: "gpt", messages: msgs, reasoning: { effort: "low", budgetTokens: 1024 } }, /reasoning: give one of/);
  await refused({ model: "gpt", messages: msgs, responseFormat: { type: "json_schema", name: "x" } }, /responseFormat.*schema/);
  await refused({ native: { dialect: "openai", body: { model: "gpt", messages: msgs } }, messages: msgs }, /native: .*no other field/);
  await refused({ native: { dialect: "openai", body: { model: "gpt", messages: msgs }, headers: { authorization: "Bearer x" } } },
    /native\.headers\.authorization: not forwarded/);
  await refused({ native: { dialect: "anthropic", body: { model: "claude", messages: "hi" } } }, /native\.body\.messages/);
  await refused({ model: "gpt" }, /messages: required/);
});

test("a field no entry of the route can serve rejects, naming it, and reaches no provider", async () => {
  mock.clearReceived("ant");
  const body = { model: "claude", messages: [{ role: "user", content: "hi" }], logprobs: true };
  const e = await client.chat({ native: { dialect: "openai", body } }).catch((x) => x);
  assert.ok(e instanceof LLMError, String(e));
  assert.match(e.message, /logprobs: not available from anthropic/);
  assert.deepEqual(mock.received("ant"), []);
});

test("a JS provider receives the request's new fields in the same camelCase shape", async () => {
  const seen = [];
  const js = new ResilientClient({}, {
    providers: [{ name: "js", chat: async (req) => { seen.push(req); return { text: "ok", thinking: [{ text: "t", signature: "s" }] }; } }],
  });
  const r = await js.chat({
    messages: [{ role: "user", content: IMAGE_PARTS }],
    responseFormat: { type: "json_object" },
    reasoning: { effort: "low" },
    seed: 1,
  });
  assert.deepEqual(r.thinking, [{ text: "t", signature: "s" }]);
  assert.deepEqual(seen[0].messages[0].content, IMAGE_PARTS);
  assert.deepEqual(seen[0].responseFormat, { type: "json_object" });
  assert.deepEqual(seen[0].reasoning, { effort: "low" });
  assert.equal(seen[0].seed, 1);
});

test("a JS provider given a native body sees it whole beside its neutral reading", async () => {
  const seen = [];
  const js = new ResilientClient({}, { providers: [{ name: "js", chat: async (req) => { seen.push(req); return { text: "ok" }; } }] });
  const body = { model: "default", messages: [{ role: "user", content: "hi" }], future_field: 1 };
  await js.chat({ native: { dialect: "openai", body, headers: { "idempotency-key": "k-1" } } });
  assert.deepEqual(seen[0].messages, [{ role: "user", content: "hi" }]);
  assert.deepEqual(seen[0].native, { dialect: "openai", body, headers: { "idempotency-key": "k-1" } });
});

test("a native OpenAI body streams as written, asked for usage, which comes as reported", async () => {
  const body = { model: "gpt", messages: [{ role: "user", content: "stream me" }], stream_options: { future_option: 1 } };
  const events = [];
  for await (const e of client.stream({ native: { dialect: "openai", body } })) events.push(e);
  assert.equal(events.filter((e) => e.type === "text").map((e) => e.text).join(""), "[oai] echo: stream me");
  const sent = last("oai").body;
  assert.equal(sent.stream, true);
  assert.deepEqual(sent.stream_options, { future_option: 1, include_usage: true });
  assert.ok(events.at(-1).type === "usage" && events.at(-1).usage.inputTokens > 0, JSON.stringify(events.at(-1)));
});

test("a tool result with an image and a cache breakpoint reaches Anthropic as a tool_result block", async () => {
  const tools = [{ name: "snap", parameters: { type: "object" } }];
  await client.chat({
    model: "claude",
    maxTokens: 128,
    tools,
    messages: [
      { role: "user", content: "take a snap" },
      { role: "assistant", content: [{ type: "tool_call", id: "toolu_1", name: "snap", arguments: "{}" }] },
      { role: "tool", content: [{ type: "tool_result", toolCallId: "toolu_1", content: "here", images: [{ data: PNG, mediaType: "image/png" }],
        cacheControl: { type: "ephemeral" } }] },
    ],
  });
  const sent = last("ant").body;
  assert.deepEqual(sent.messages[1].content, [{ type: "tool_use", id: "toolu_1", name: "snap", input: {} }]);
  const result = sent.messages[2].content[0];
  assert.equal(result.type, "tool_result");
  assert.equal(result.tool_use_id, "toolu_1");
  assert.deepEqual(result.cache_control, { type: "ephemeral" });
  assert.deepEqual(result.content.find((b) => b.type === "image"),
    { type: "image", source: { type: "base64", media_type: "image/png", data: PNG } });
});

test("a tool result under the core's snake_case names is read too", async () => {
  const seen = [];
  const js = new ResilientClient({}, { providers: [{ name: "js", chat: async (req) => { seen.push(req); return { text: "ok" }; } }] });
  await js.chat({ messages: [{ role: "tool", content: [{ type: "tool_result", tool_call_id: "c1", content: "x", is_error: true }] }] });
  assert.deepEqual(seen[0].messages[0].content, [{ type: "tool_result", toolCallId: "c1", content: "x", isError: true }]);
});
