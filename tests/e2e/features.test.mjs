// Nothing lost between client and provider, proven with the official Node SDKs (`openai`,
// `@anthropic-ai/sdk`) through the built Worker in workerd: each feature through both
// endpoints (/v1/chat/completions, /v1/messages) to both kinds of provider (same format:
// passthrough; the other format: translation), asserting on what the mock provider received
// and on what the SDK returned. Build first (scripts/test-worker.sh does): build/index.js.
import { after, before, beforeEach, describe, test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { zodResponseFormat } from "openai/helpers/zod";
import Anthropic from "@anthropic-ai/sdk";
import { zodOutputFormat } from "@anthropic-ai/sdk/helpers/zod";
import { z } from "zod";
import { z as z4 } from "zod/v4";
import { eventually, GATEWAY_KEY, MOCK_KEY } from "./gateway-harness.mjs";
import { keyDigest } from "./mock-provider.mjs";
import { IMAGE_URL, LONG_SYSTEM, mockSignature, PNG, startFeatures } from "./features-setup.mjs";

const user = (content) => [{ role: "user", content }];
const plain = (v) => JSON.parse(JSON.stringify(v));
const TOOLS_OAI = ["get_weather", "get_time"].map((name) => ({
  type: "function",
  function: { name, description: `${name} of a city`, parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } },
}));
const TOOLS_ANT = TOOLS_OAI.map(({ function: f }) => ({ name: f.name, description: f.description, input_schema: f.parameters }));

/** Reads an OpenAI stream into { text, reasoning, thinkingBlocks, calls, finish, usages, chunks }. */
async function readOpenAiStream(stream) {
  const out = { text: "", reasoning: "", thinkingBlocks: [], calls: [], finish: null, usages: [], chunks: [] };
  for await (const chunk of stream) {
    out.chunks.push(chunk);
    if (chunk.usage) out.usages.push(chunk.usage);
    const c = chunk.choices[0];
    if (!c) continue;
    out.text += c.delta?.content ?? "";
    out.reasoning += c.delta?.reasoning_content ?? "";
    out.thinkingBlocks.push(...(c.delta?.thinking_blocks ?? []));
    for (const tc of c.delta?.tool_calls ?? []) {
      const call = (out.calls[tc.index] ??= { id: null, name: "", arguments: "" });
      if (tc.id) call.id = tc.id;
      call.name += tc.function?.name ?? "";
      call.arguments += tc.function?.arguments ?? "";
    }
    if (c.finish_reason) out.finish = c.finish_reason;
  }
  return out;
}

describe("features through the edge, official Node SDKs", { timeout: 180000 }, () => {
  let f, mock, openai, anthropic;
  const received = (name) => mock.received(name);
  const last = (name) => received(name).at(-1);
  before(async () => {
    f = await startFeatures();
    mock = f.mock;
    openai = new OpenAI({ apiKey: GATEWAY_KEY, baseURL: `${f.gw.url}/v1`, maxRetries: 0, timeout: 20000 });
    anthropic = new Anthropic({ apiKey: GATEWAY_KEY, baseURL: f.gw.url, maxRetries: 0, timeout: 20000 });
  });
  after(() => f?.close());
  beforeEach(() => mock.clearReceived());

  // ------------------------------------------------------------ structured outputs

  const City = z.object({ city: z.string(), population: z.number() });
  const City4 = z4.object({ city: z4.string(), population: z4.number() });
  const CITY = { city: "mock", population: 1.5 };

  test("structured output: openai parse + zodResponseFormat, passthrough to an OpenAI provider", async () => {
    const response_format = zodResponseFormat(City, "city");
    const r = await openai.chat.completions.parse({ model: "gpt", messages: user("Paris?"), response_format });
    assert.deepEqual(r.choices[0].message.parsed, CITY);
    const sent = last("oai").body;
    assert.equal(sent.model, "gpt-mock");
    assert.deepEqual(sent.response_format, plain(response_format), "response_format arrives as sent");
  });

  test("structured output: openai parse + zodResponseFormat, translated to an Anthropic provider (forced tool)", async () => {
    const response_format = zodResponseFormat(City, "city");
    const r = await openai.chat.completions.parse({ model: "claude", messages: user("Paris?"), response_format });
    const message = r.choices[0].message;
    assert.deepEqual(message.parsed, CITY);
    assert.deepEqual(JSON.parse(message.content), CITY, "the JSON comes as message.content");
    assert.ok(!message.tool_calls?.length, "the forced tool is the gateway's, not the client's");
    assert.equal(r.choices[0].finish_reason, "stop");
    const sent = last("ant").body;
    const tool = sent.tools?.find((t) => t.input_schema);
    assert.ok(tool, `a tool carries the schema: ${JSON.stringify(sent)}`);
    assert.deepEqual(tool.input_schema.properties, response_format.json_schema.schema.properties);
    assert.deepEqual(tool.input_schema.required, response_format.json_schema.schema.required);
    assert.deepEqual(sent.tool_choice, { type: "tool", name: tool.name });
  });

  test("structured output: anthropic parse + zodOutputFormat, passthrough to an Anthropic provider", async () => {
    const format = zodOutputFormat(City4);
    const r = await anthropic.messages.parse({ model: "claude", max_tokens: 512, messages: user("Paris?"), output_config: { format } });
    assert.deepEqual(r.parsed_output, CITY);
    assert.deepEqual(last("ant").body.output_config, plain({ format }), "output_config arrives as sent");
  });

  test("structured output: anthropic parse + zodOutputFormat, translated to an OpenAI provider", async () => {
    const format = zodOutputFormat(City4);
    const r = await anthropic.messages.parse({ model: "gpt", max_tokens: 512, messages: user("Paris?"), output_config: { format } });
    assert.deepEqual(r.parsed_output, CITY);
    const rf = last("oai").body.response_format;
    assert.equal(rf?.type, "json_schema");
    assert.deepEqual(rf.json_schema.schema.properties, plain(format.schema).properties);
  });

  // ------------------------------------------------------------ images

  const OAI_IMAGE_PARTS = [
    { type: "text", text: "what is in these images" },
    { type: "image_url", image_url: { url: `data:image/png;base64,${PNG}` } },
    { type: "image_url", image_url: { url: IMAGE_URL } },
  ];
  const ANT_IMAGE_BLOCKS = [
    { type: "text", text: "what is in these images" },
    { type: "image", source: { type: "base64", media_type: "image/png", data: PNG } },
    { type: "image", source: { type: "url", url: IMAGE_URL } },
  ];
  const images = (content) => content.filter((p) => p.type !== "text");

  test("images: image_url parts (base64 data URL and URL), passthrough to an OpenAI provider", async () => {
    const r = await openai.chat.completions.create({ model: "gpt", messages: user(OAI_IMAGE_PARTS) });
    assert.match(r.choices[0].message.content, /what is in these images/);
    assert.deepEqual(last("oai").body.messages, user(OAI_IMAGE_PARTS));
  });

  test("images: image_url parts translated to Anthropic image blocks", async () => {
    const r = await openai.chat.completions.create({ model: "claude", messages: user(OAI_IMAGE_PARTS) });
    assert.match(r.choices[0].message.content, /what is in these images/);
    const content = last("ant").body.messages[0].content;
    assert.deepEqual(images(content).map((b) => [b.type, b.source]), images(ANT_IMAGE_BLOCKS).map((b) => [b.type, b.source]));
  });

  test("images: Anthropic image blocks, passthrough to an Anthropic provider", async () => {
    await anthropic.messages.create({ model: "claude", max_tokens: 64, messages: user(ANT_IMAGE_BLOCKS) });
    assert.deepEqual(last("ant").body.messages, user(ANT_IMAGE_BLOCKS));
  });

  test("images: Anthropic image blocks translated to image_url parts", async () => {
    const r = await anthropic.messages.create({ model: "gpt", max_tokens: 64, messages: user(ANT_IMAGE_BLOCKS) });
    assert.match(r.content[0].text, /what is in these images/);
    const content = last("oai").body.messages[0].content;
    assert.deepEqual(images(content).map((p) => p.image_url.url), [`data:image/png;base64,${PNG}`, IMAGE_URL]);
  });

  // ------------------------------------------------------------ reasoning and thinking

  test("reasoning: reasoning_effort passthrough; reasoning_content and reasoning tokens come back", async () => {
    const r = await openai.chat.completions.create({ model: "gpt", messages: user("think it over"), reasoning_effort: "high" });
    assert.equal(last("oai").body.reasoning_effort, "high");
    assert.equal(r.choices[0].message.reasoning_content, "Considering: think it over");
    assert.equal(r.usage.completion_tokens_details.reasoning_tokens, 4);
  });

  test("reasoning: reasoning_effort becomes a thinking budget; thinking blocks come back with their signature", async () => {
    const budgets = {};
    for (const effort of ["low", "high"]) {
      const r = await openai.chat.completions.create({ model: "claude", messages: user("think it over"), reasoning_effort: effort });
      const got = last("ant");
      assert.equal(got.body.thinking?.type, "enabled", JSON.stringify(got.body));
      assert.ok(got.body.thinking.budget_tokens >= 1024 && got.body.max_tokens > got.body.thinking.budget_tokens);
      budgets[effort] = got.body.thinking.budget_tokens;
      const message = r.choices[0].message;
      assert.equal(message.reasoning_content, "Considering: think it over");
      assert.deepEqual(message.thinking_blocks, [{ type: "thinking", thinking: "Considering: think it over", signature: mockSignature("ant", got.seq) }]);
      assert.equal(message.content, "[ant] echo: think it over");
    }
    assert.ok(budgets.high > budgets.low, `a higher effort is a bigger budget: ${JSON.stringify(budgets)}`);
  });

  test("reasoning: thinking_blocks sent back in a second turn reach Anthropic as signed thinking blocks", async () => {
    const first = await openai.chat.completions.create({ model: "claude", messages: user("step one"), reasoning_effort: "medium" });
    const m = first.choices[0].message;
    const messages = [...user("step one"), { role: "assistant", content: m.content, thinking_blocks: m.thinking_blocks }, ...user("step two")];
    const second = await openai.chat.completions.create({ model: "claude", messages, reasoning_effort: "medium" });
    assert.equal(second.choices[0].message.content, "[ant] echo: step two");
    const assistant = last("ant").body.messages[1];
    assert.equal(assistant.role, "assistant");
    assert.deepEqual(assistant.content[0], m.thinking_blocks[0]);
    assert.deepEqual(assistant.content.slice(1).map((b) => [b.type, b.text]), [["text", m.content]]);
  });

  test("reasoning: streamed reasoning_content and thinking_blocks deltas from an Anthropic provider", async () => {
    const stream = await openai.chat.completions.create({ model: "claude", stream: true, messages: user("stream thoughts"), reasoning_effort: "low" });
    const out = await readOpenAiStream(stream);
    assert.equal(out.reasoning, "Considering: stream thoughts");
    assert.equal(out.text, "[ant] echo: stream thoughts");
    const signature = mockSignature("ant", last("ant").seq);
    assert.ok(out.thinkingBlocks.some((b) => b.signature === signature), `the signature is streamed: ${JSON.stringify(out.thinkingBlocks)}`);
  });

  test("reasoning: redacted thinking comes back as a redacted_thinking block and goes back as one", async () => {
    const first = await openai.chat.completions.create({ model: "claude-redacted", messages: user("secret plan"), reasoning_effort: "low" });
    const m = first.choices[0].message;
    const data = Buffer.from(`mock-redacted:ant-red:${last("ant-red").seq}`).toString("base64");
    assert.deepEqual(m.thinking_blocks, [{ type: "redacted_thinking", data }]);
    const messages = [...user("secret plan"), { role: "assistant", content: m.content, thinking_blocks: m.thinking_blocks }, ...user("next")];
    await openai.chat.completions.create({ model: "claude-redacted", messages, reasoning_effort: "low" });
    assert.deepEqual(last("ant-red").body.messages[1].content[0], { type: "redacted_thinking", data });
  });

  test("reasoning: an OpenAI-format stream passes reasoning_content deltas and unknown chunk fields through", async () => {
    const out = await readOpenAiStream(await openai.chat.completions.create({ model: "gpt-future", stream: true, messages: user("stream thoughts"), reasoning_effort: "low" }));
    assert.equal(last("oai-fut").body.reasoning_effort, "low");
    assert.equal(out.reasoning, "Considering: stream thoughts");
    assert.equal(out.text, "[oai-fut] echo: stream thoughts");
    assert.ok(out.chunks.some((c) => c.mock_future_field), "an unknown chunk field comes through");
  });

  test("thinking: Anthropic thinking passthrough, whole and streamed, and sent back as it came", async () => {
    const thinking = { type: "enabled", budget_tokens: 2048 };
    const r = await anthropic.messages.create({ model: "claude", max_tokens: 4096, thinking, messages: user("ponder this") });
    assert.deepEqual(last("ant").body.thinking, thinking);
    const signature = mockSignature("ant", last("ant").seq);
    assert.deepEqual(r.content[0], { type: "thinking", thinking: "Considering: ponder this", signature });
    const types = new Set();
    const stream = anthropic.messages.stream({ model: "claude", max_tokens: 4096, thinking, messages: user("ponder more") });
    stream.on("streamEvent", (ev) => { if (ev.type === "content_block_delta") types.add(ev.delta.type); });
    const final = await stream.finalMessage();
    assert.ok(types.has("thinking_delta") && types.has("signature_delta"), [...types].join());
    assert.equal(final.content[0].signature, mockSignature("ant", last("ant").seq));
    const messages = [...user("ponder this"), { role: "assistant", content: r.content }, ...user("and then?")];
    await anthropic.messages.create({ model: "claude", max_tokens: 4096, thinking, messages });
    assert.deepEqual(last("ant").body.messages, messages);
  });

  test("thinking: Anthropic thinking becomes reasoning_effort; reasoning_content comes back as thinking, whole and streamed", async () => {
    const thinking = { type: "enabled", budget_tokens: 2048 };
    const r = await anthropic.messages.create({ model: "gpt", max_tokens: 4096, thinking, messages: user("ponder this") });
    assert.ok(["minimal", "low", "medium", "high"].includes(last("oai").body.reasoning_effort), JSON.stringify(last("oai").body));
    const block = r.content.find((b) => b.type === "thinking");
    assert.equal(block?.thinking, "Considering: ponder this");
    assert.equal(r.content.find((b) => b.type === "text")?.text, "[oai] echo: ponder this");
    let streamed = "";
    const stream = anthropic.messages.stream({ model: "gpt", max_tokens: 4096, thinking, messages: user("ponder more") });
    stream.on("streamEvent", (ev) => { if (ev.type === "content_block_delta" && ev.delta.type === "thinking_delta") streamed += ev.delta.thinking; });
    await stream.finalMessage();
    assert.equal(streamed, "Considering: ponder more");
  });

  // ------------------------------------------------------------ roles and stop reasons

  test("system and developer messages become Anthropic's system; a max_tokens stop is length", async () => {
    const r = await openai.chat.completions.create({
      model: "claude", max_completion_tokens: 2,
      messages: [{ role: "system", content: "be brief" }, { role: "developer", content: "be kind" }, ...user("one two three four")],
    });
    const sent = last("ant").body;
    const system = typeof sent.system === "string" ? sent.system : sent.system.map((b) => b.text).join("\n");
    assert.match(system, /be brief/);
    assert.match(system, /be kind/);
    assert.deepEqual(sent.messages.map((m) => m.role), ["user"]);
    assert.equal(sent.max_tokens, 2);
    assert.equal(r.choices[0].finish_reason, "length");
    const a = await anthropic.messages.create({ model: "gpt", max_tokens: 2, system: "be brief", messages: user("one two three four") });
    assert.deepEqual(last("oai").body.messages[0], { role: "system", content: "be brief" });
    assert.equal(a.stop_reason, "max_tokens");
  });

  // ------------------------------------------------------------ prompt caching

  test("prompt caching: cache_control arrives at an Anthropic provider as sent; cache usage in the SDK's usage", async () => {
    const body = {
      model: "claude", max_tokens: 64,
      system: [{ type: "text", text: LONG_SYSTEM, cache_control: { type: "ephemeral" } }],
      tools: [{ ...TOOLS_ANT[0], cache_control: { type: "ephemeral" } }],
      messages: user([{ type: "text", text: "cached question", cache_control: { type: "ephemeral", ttl: "1h" } }]),
    };
    const first = await anthropic.messages.create(body);
    const sent = last("ant").body;
    assert.deepEqual([sent.system, sent.tools, sent.messages], [body.system, body.tools, body.messages]);
    assert.ok(first.usage.cache_creation_input_tokens > 0);
    const second = await anthropic.messages.create(body);
    assert.equal(second.usage.cache_read_input_tokens, first.usage.cache_creation_input_tokens);
  });

  test("prompt caching: cache_control on Chat Completions parts reaches Anthropic; cached_tokens in the usage", async () => {
    const messages = [{ role: "system", content: [{ type: "text", text: LONG_SYSTEM, cache_control: { type: "ephemeral" } }] }, ...user("cached question")];
    await openai.chat.completions.create({ model: "claude", messages });
    const system = last("ant").body.system;
    assert.deepEqual(Array.isArray(system) ? system.map((b) => b.cache_control) : system, [{ type: "ephemeral" }]);
    const second = await openai.chat.completions.create({ model: "claude", messages });
    const cached = second.usage.prompt_tokens_details?.cached_tokens;
    assert.ok(cached > 0, JSON.stringify(second.usage));
    assert.ok(second.usage.prompt_tokens >= cached, "prompt_tokens counts the cached ones too");
  });

  test("prompt caching: OpenAI cached tokens passthrough (prompt_cache_key forwarded)", async () => {
    const body = { model: "gpt", prompt_cache_key: "user-42", messages: [{ role: "system", content: LONG_SYSTEM }, ...user("q")] };
    await openai.chat.completions.create(body);
    assert.equal(last("oai").body.prompt_cache_key, "user-42");
    const second = await openai.chat.completions.create(body);
    assert.equal(second.usage.prompt_tokens_details.cached_tokens, 60);
  });

  test("prompt caching: OpenAI cached tokens become cache_read_input_tokens for a Messages client", async () => {
    const body = { model: "gpt", max_tokens: 64, system: LONG_SYSTEM, messages: user("q") };
    await anthropic.messages.create(body);
    const second = await anthropic.messages.create(body);
    assert.equal(second.usage.cache_read_input_tokens, 60);
  });

  // ------------------------------------------------------------ streamed tool calls

  const expectCalls = (calls) => assert.deepEqual(calls.map((c) => [c.name, JSON.parse(c.arguments)]), [["get_weather", { city: "mock" }], ["get_time", { city: "mock" }]]);

  test("streamed tool calls: parallel, passthrough to an OpenAI provider", async () => {
    const body = { model: "gpt", stream: true, messages: user("weather and time"), tools: TOOLS_OAI, tool_choice: "required", parallel_tool_calls: true };
    const out = await readOpenAiStream(await openai.chat.completions.create(body));
    expectCalls(out.calls);
    assert.equal(out.finish, "tool_calls");
    const sent = last("oai").body;
    assert.deepEqual([sent.tools, sent.tool_choice, sent.parallel_tool_calls], [TOOLS_OAI, "required", true]);
  });

  test("streamed tool calls: parallel, translated from an Anthropic provider's input_json_delta", async () => {
    const out = await readOpenAiStream(await openai.chat.completions.create({ model: "claude", stream: true, messages: user("weather and time"), tools: TOOLS_OAI, tool_choice: "required" }));
    expectCalls(out.calls);
    assert.ok(out.calls.every((c) => c.id), "every call has its id");
    assert.equal(out.finish, "tool_calls");
    const sent = last("ant").body;
    assert.deepEqual(sent.tools.map((t) => [t.name, t.input_schema]), TOOLS_ANT.map((t) => [t.name, t.input_schema]));
    assert.equal(sent.tool_choice?.type, "any");
  });

  test("streamed tool calls: Messages client, passthrough to an Anthropic provider", async () => {
    const final = await anthropic.messages.stream({ model: "claude", max_tokens: 256, messages: user("weather and time"), tools: TOOLS_ANT, tool_choice: { type: "any" } }).finalMessage();
    assert.equal(final.stop_reason, "tool_use");
    assert.deepEqual(final.content.map((b) => [b.type, b.name, b.input]), [["tool_use", "get_weather", { city: "mock" }], ["tool_use", "get_time", { city: "mock" }]]);
    assert.deepEqual(last("ant").body.tools, TOOLS_ANT);
  });

  test("streamed tool calls: Messages client, translated from an OpenAI provider's tool-call deltas", async () => {
    const final = await anthropic.messages.stream({ model: "gpt", max_tokens: 256, messages: user("weather and time"), tools: TOOLS_ANT, tool_choice: { type: "any" } }).finalMessage();
    assert.equal(final.stop_reason, "tool_use");
    const uses = final.content.filter((b) => b.type === "tool_use");
    assert.deepEqual(uses.map((b) => [b.name, b.input]), [["get_weather", { city: "mock" }], ["get_time", { city: "mock" }]]);
    const sent = last("oai").body;
    assert.deepEqual(sent.tools.map((t) => [t.function.name, t.function.parameters]), TOOLS_OAI.map((t) => [t.function.name, t.function.parameters]));
    assert.equal(sent.tool_choice, "required");
  });

  // ------------------------------------------------------------ unknown fields, whole answers

  test("an unknown future field is forwarded untouched to an OpenAI provider; the answer keeps all its fields", async () => {
    const future = { some_future_param: { mode: "x", weights: [1, 2, 3] } };
    const messages = user([{ type: "text", text: "hi", future_part_field: { keep: true } }]);
    const headers = { "openai-beta": "future=v1", "idempotency-key": "idem-1" };
    const { data, response } = await openai.chat.completions
      .create({ model: "gpt-future", messages, n: 2, logprobs: true, top_logprobs: 1, ...future }, { headers })
      .withResponse();
    const got = last("oai-fut");
    assert.deepEqual(got.body.some_future_param, future.some_future_param);
    assert.deepEqual(got.body.messages, messages);
    assert.deepEqual([got.headers["openai-beta"], got.headers["idempotency-key"]], ["future=v1", "idem-1"]);
    assert.deepEqual(got.keyDigests, { authorization: keyDigest(`Bearer ${MOCK_KEY}`) }, "the provider's key, never the client's");
    assert.ok(data.mock_future_field, "an unknown answer field comes back");
    assert.equal(data.choices.length, 2);
    assert.equal(data.system_fingerprint, "fp_mock");
    assert.ok(data.choices[0].logprobs.content.length > 0);
    assert.equal(data.model, "gpt-future");
    assert.equal(response.headers.get("x-served-by"), "oai-fut/gpt-future");
  });

  test("an unknown future field is forwarded untouched to an Anthropic provider; unknown stream events come through", async () => {
    const body = { model: "claude-future", max_tokens: 64, messages: user("hi"), some_future_param: { level: 3 } };
    const r = await anthropic.messages.create(body, { headers: { "anthropic-beta": "future-2026-01-01" } });
    const got = last("ant-fut");
    assert.deepEqual(got.body.some_future_param, { level: 3 });
    assert.equal(got.headers["anthropic-beta"], "future-2026-01-01");
    assert.deepEqual(got.keyDigests, { "x-api-key": keyDigest(MOCK_KEY) }, "the provider's key, never the client's");
    assert.ok(r.mock_future_field, "an unknown answer field comes back");
    const types = [];
    for await (const ev of await anthropic.messages.create({ ...body, stream: true })) types.push(ev.type);
    assert.ok(types.includes("mock_future_event"), types.join());
  });

  // ------------------------------------------------------------ stream usage

  test("stream usage: asked by the client, asked of a provider whose preset does not ask; real numbers", async () => {
    const out = await readOpenAiStream(await openai.chat.completions.create({ model: "gpt-nousage", stream: true, stream_options: { include_usage: true }, messages: user("count these words") }));
    assert.equal(last("oai-nousage").body.stream_options?.include_usage, true);
    assert.equal(out.usages.length, 1);
    assert.equal(out.usages[0].completion_tokens, 5);
    assert.ok(out.usages[0].prompt_tokens > 0);
  });

  test("stream usage: a provider that gives none: no usage numbers, never zeros (Chat Completions)", async () => {
    const out = await readOpenAiStream(await openai.chat.completions.create({ model: "gpt-silent", stream: true, stream_options: { include_usage: true }, messages: user("count these words") }));
    assert.equal(out.text, "[oai-silent] echo: count these words");
    assert.deepEqual(out.usages, [], "no usage invented");
  });

  test("stream usage: Messages client, real numbers from the provider, none invented when it gave none", async () => {
    const real = await anthropic.messages.stream({ model: "gpt-nousage", max_tokens: 64, messages: user("count these words") }).finalMessage();
    assert.equal(last("oai-nousage").body.stream_options?.include_usage, true);
    assert.equal(real.usage.output_tokens, 5);
    const numbers = [];
    for await (const ev of await anthropic.messages.create({ model: "gpt-silent", max_tokens: 64, stream: true, messages: user("count these words") })) {
      const usage = ev.type === "message_start" ? ev.message.usage : ev.usage;
      for (const [k, v] of Object.entries(usage ?? {})) if (typeof v === "number") numbers.push(`${ev.type}.${k}=${v}`);
    }
    assert.deepEqual(numbers, [], "the provider reported no usage");
  });

  test("usage of an attempt that did not become the answer is reported: a cut stream, continued", async () => {
    const { data: stream, response } = await anthropic.messages
      .create({ model: "claude-cut", max_tokens: 256, stream: true, messages: user("a story about a resilient fox") })
      .withResponse();
    let text = "";
    for await (const ev of stream) if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") text += ev.delta.text;
    assert.equal(text, "[ant-cut] echo: a story about a resilient fox");
    assert.equal(received("ant-cut").length, 2, "cut once, then continued");
    const line = await eventually(() => f.logLine(response.headers.get("x-request-id"), "stream end")).catch(() => null);
    // The cut attempt's message_start reported its input tokens (6 words) and one output token.
    assert.equal(line?.discardedUsage?.inputTokens, 6, JSON.stringify(line));
    assert.ok(line.discardedUsage.outputTokens >= 1);
  });

  // ------------------------------------------------------------ mixed routes

  test("a mixed route: logprobs only the OpenAI entry can serve; the Anthropic entry is skipped, in the attempts", async () => {
    const { data, response } = await openai.chat.completions.create({ model: "mixed", messages: user("hi"), logprobs: true }).withResponse();
    assert.equal(response.headers.get("x-served-by"), "oai/gpt-mixed");
    assert.ok(data.choices[0].logprobs.content.length > 0);
    assert.equal(received("ant").length, 0, "nothing sent to the entry that cannot serve it");
    const line = await eventually(() => f.logLine(response.headers.get("x-request-id"))).catch(() => null);
    const skipped = line?.trail?.find((t) => t.provider === "ant");
    assert.ok(skipped, `the skipped entry is in the attempts: ${JSON.stringify(line)}`);
    assert.equal(skipped.reached, false, "it did not reach the provider");
    assert.notEqual(skipped.outcome, "ok");
    assert.match(JSON.stringify(line), /logprobs: not available from anthropic/, "the reason is recorded");
  });

  test("n > 1 and logprobs with no entry able to serve them: 400 naming the field", async () => {
    await assert.rejects(openai.chat.completions.create({ model: "claude", messages: user("hi"), logprobs: true }),
      (e) => e.status === 400 && /logprobs: not available from anthropic/.test(e.message));
    await assert.rejects(openai.chat.completions.create({ model: "claude", messages: user("hi"), n: 2 }),
      (e) => e.status === 400 && /\bn: not available from anthropic/.test(e.message));
    assert.equal(received("ant").length, 0);
    const { data } = await openai.chat.completions.create({ model: "mixed", messages: user("hi"), n: 2 }).withResponse();
    assert.equal(data.choices.length, 2);
  });

  test("sampling hints an Anthropic provider lacks are left out, and named in x-omitted-fields", async () => {
    const { response } = await openai.chat.completions.create({ model: "claude", messages: user("hi"), seed: 7, frequency_penalty: 0.5 }).withResponse();
    const omitted = (response.headers.get("x-omitted-fields") ?? "").split(",").map((s) => s.trim());
    assert.ok(omitted.includes("seed") && omitted.includes("frequency_penalty"), omitted.join());
    const sent = last("ant").body;
    assert.equal(sent.seed, undefined);
    assert.equal(sent.frequency_penalty, undefined);
    const same = await openai.chat.completions.create({ model: "gpt", messages: user("hi"), seed: 7, frequency_penalty: 0.5 }).withResponse();
    assert.equal(same.response.headers.get("x-omitted-fields"), null);
    assert.deepEqual([last("oai").body.seed, last("oai").body.frequency_penalty], [7, 0.5]);
  });
});
