// Tests of what the mock provider records and answers for each feature a request asks for:
//   node --test tests/e2e/mock-answers.test.mjs
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { exampleOf } from "./mock-answers.mjs";
import { keyDigest, startMock } from "./mock-provider.mjs";

const post = (url, body, headers = {}) => fetch(url, {
  method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body),
});

/** Parses complete SSE text into [{event, data}] (data as parsed JSON, or the text "[DONE]"). */
function events(text) {
  return text.split("\n\n").filter((b) => b.trim()).map((block) => {
    const event = /^event: (.*)$/m.exec(block)?.[1] ?? null;
    const data = block.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
    return { event, data: data === "[DONE]" ? data : JSON.parse(data) };
  });
}

const user = (content) => [{ role: "user", content }];

describe("the mock records what it receives", () => {
  let mock;
  before(async () => { mock = await startMock({ config: { providers: {} } }); });
  after(() => mock.close());

  test("method, path, headers (keys redacted) and body, in process and over HTTP, and cleared", async () => {
    const body = { model: "m", messages: user("hi"), some_future_field: { nested: [1, 2] } };
    await (await post(`${mock.url}/p/rec/v1/chat/completions`, body, { authorization: "Bearer sk-secret", "openai-beta": "x=1" })).json();
    const [got] = mock.received("rec");
    assert.equal(got.method, "POST");
    assert.equal(got.path, "/p/rec/v1/chat/completions");
    assert.equal(got.format, "openai");
    assert.deepEqual(got.body, body);
    assert.equal(got.headers["openai-beta"], "x=1");
    assert.equal(got.headers.authorization, "[redacted]");
    assert.deepEqual(got.keyDigests, { authorization: keyDigest("Bearer sk-secret") });
    const viaHttp = await (await fetch(`${mock.url}/admin/rec/received`)).json();
    assert.deepEqual(viaHttp.received, [got]);
    assert.doesNotMatch(JSON.stringify(viaHttp), /sk-secret/);
    assert.equal((await fetch(`${mock.url}/admin/rec/received`, { method: "DELETE" })).status, 200);
    assert.deepEqual(mock.received("rec"), []);
  });

  test("bounded: the last 200 requests, oldest first", async () => {
    for (let i = 0; i < 205; i++) await (await post(`${mock.url}/p/many/v1/chat/completions`, { model: "m", messages: user(`n${i}`) })).arrayBuffer();
    const got = mock.received("many");
    assert.equal(got.length, 200);
    assert.equal(got[0].body.messages[0].content, "n5");
    assert.equal(got.at(-1).body.messages[0].content, "n204");
    mock.clearReceived();
    assert.equal(mock.received("many").length, 0);
  });
});

describe("OpenAI answers", () => {
  let mock;
  before(async () => { mock = await startMock({ config: { providers: { never: { streamUsage: "never" }, fut: { future: true } } } }); });
  after(() => mock.close());
  const chat = async (name, body) => (await post(`${mock.url}/p/${name}/v1/chat/completions`, { model: "gpt-x", ...body })).json();
  const stream = async (name, body) => events(await (await post(`${mock.url}/p/${name}/v1/chat/completions`, { model: "gpt-x", stream: true, ...body })).text());

  test("several choices, logprobs, system_fingerprint", async () => {
    const r = await chat("o", { messages: user("two words"), n: 2, logprobs: true, top_logprobs: 2 });
    assert.equal(r.choices.length, 2);
    assert.deepEqual(r.choices.map((c) => c.index), [0, 1]);
    assert.equal(r.system_fingerprint, "fp_mock");
    const lp = r.choices[0].logprobs.content;
    assert.equal(lp.map((t) => t.token).join(""), r.choices[0].message.content);
    assert.equal(lp[0].top_logprobs.length, 2);
  });

  test("reasoning: reasoning_content and reasoning tokens", async () => {
    const r = await chat("o", { messages: user("think hard"), reasoning_effort: "high" });
    assert.equal(r.choices[0].message.reasoning_content, "Considering: think hard");
    assert.equal(r.usage.completion_tokens_details.reasoning_tokens, 3);
    assert.equal(r.usage.completion_tokens, 3 + 4);
  });

  test("structured output from the schema, and JSON mode", async () => {
    const schema = { type: "object", properties: { city: { type: "string" }, pop: { type: "integer" }, tags: { type: "array", items: { enum: ["a", "b"] } } }, required: ["city", "pop", "tags"] };
    const r = await chat("o", { messages: user("x"), response_format: { type: "json_schema", json_schema: { name: "City", schema, strict: true } } });
    assert.deepEqual(JSON.parse(r.choices[0].message.content), { city: "mock", pop: 1, tags: ["a"] });
    const j = await chat("o", { messages: user("x"), response_format: { type: "json_object" } });
    assert.deepEqual(JSON.parse(j.choices[0].message.content), { answer: "[o] echo: x" });
  });

  test("tool calls: required is parallel, a named one alone, none after a tool result", async () => {
    const tools = ["get_weather", "get_time"].map((name) => ({ type: "function", function: { name, parameters: { type: "object", properties: { city: { type: "string" } } } } }));
    const r = await chat("o", { messages: user("x"), tools, tool_choice: "required" });
    assert.equal(r.choices[0].finish_reason, "tool_calls");
    assert.deepEqual(r.choices[0].message.tool_calls.map((c) => [c.function.name, JSON.parse(c.function.arguments)]), [["get_weather", { city: "mock" }], ["get_time", { city: "mock" }]]);
    const one = await chat("o", { messages: user("x"), tools, tool_choice: { type: "function", function: { name: "get_time" } } });
    assert.deepEqual(one.choices[0].message.tool_calls.map((c) => c.function.name), ["get_time"]);
    const auto = await chat("o", { messages: user("use get_weather please"), tools });
    assert.deepEqual(auto.choices[0].message.tool_calls.map((c) => c.function.name), ["get_weather"]);
    const call = auto.choices[0].message.tool_calls[0];
    const done = await chat("o", { messages: [...user("use get_weather please"), { role: "assistant", content: null, tool_calls: [call] }, { role: "tool", tool_call_id: call.id, content: "sunny" }], tools });
    assert.equal(done.choices[0].finish_reason, "stop");
  });

  test("a long first message is cached on its second sight", async () => {
    const system = { role: "system", content: Array(60).fill("word").join(" ") };
    const first = await chat("o", { messages: [system, ...user("a")] });
    assert.equal(first.usage.prompt_tokens_details.cached_tokens, 0);
    const second = await chat("o", { messages: [system, ...user("b")] });
    assert.equal(second.usage.prompt_tokens_details.cached_tokens, 60);
  });

  test("streams: reasoning and tool-call deltas; usage only when asked and given", async () => {
    const tools = [{ type: "function", function: { name: "f", parameters: { type: "object", properties: { q: { type: "string" } } } } }];
    const evs = await stream("o", { messages: user("think"), reasoning_effort: "low", tools, tool_choice: "required", stream_options: { include_usage: true } });
    const chunks = evs.filter((e) => e.data !== "[DONE]").map((e) => e.data);
    assert.equal(chunks.map((c) => c.choices[0]?.delta?.reasoning_content ?? "").join(""), "Considering: think");
    const calls = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []);
    assert.match(calls[0].id, /^call_mock_\d+_0$/);
    assert.equal(calls[0].function.name, "f");
    assert.deepEqual(JSON.parse(calls.map((c) => c.function.arguments).join("")), { q: "mock" });
    assert.ok(calls.length > 2, "arguments come in pieces");
    assert.equal(chunks.at(-1).usage.completion_tokens_details.reasoning_tokens, 2);
    const none = (await stream("never", { messages: user("x"), stream_options: { include_usage: true } })).filter((e) => e.data !== "[DONE]");
    assert.ok(none.every((e) => !e.data.usage), "no usage chunk, not even zeros");
  });

  test("future: an unknown field in answers and chunks", async () => {
    assert.ok((await chat("fut", { messages: user("x") })).mock_future_field);
    assert.ok((await stream("fut", { messages: user("x") }))[0].data.mock_future_field);
  });

  test("validation: an image part without a URL is refused", async () => {
    const res = await post(`${mock.url}/p/o/v1/chat/completions`, { model: "m", messages: user([{ type: "image_url", image_url: {} }]) });
    assert.equal(res.status, 400);
    assert.match((await res.json()).error.message, /image_url\.url/);
  });
});

describe("Anthropic answers", () => {
  let mock;
  before(async () => { mock = await startMock({ config: { providers: { fut: { future: true }, red: { redactThinking: true } } } }); });
  after(() => mock.close());
  const send = (name, body) => post(`${mock.url}/p/${name}/v1/messages`, { model: "claude-x", max_tokens: 2048, ...body });
  const msg = async (name, body) => (await send(name, body)).json();

  test("thinking: a thinking block with a signature before the text", async () => {
    const r = await msg("a", { messages: user("ponder"), thinking: { type: "enabled", budget_tokens: 1024 } });
    assert.deepEqual(r.content.map((b) => b.type), ["thinking", "text"]);
    assert.equal(r.content[0].thinking, "Considering: ponder");
    assert.ok(r.content[0].signature.length > 10);
    assert.equal(r.usage.output_tokens, 2 + 3);
  });

  test("redactThinking: a redacted_thinking block, whole and at the start of a stream", async () => {
    const thinking = { type: "enabled", budget_tokens: 1024 };
    const r = await msg("red", { messages: user("secret"), thinking });
    assert.deepEqual(r.content.map((b) => b.type), ["redacted_thinking", "text"]);
    assert.ok(r.content[0].data.length > 10);
    const evs = events(await (await send("red", { stream: true, messages: user("secret"), thinking })).text());
    const starts = evs.filter((e) => e.event === "content_block_start").map((e) => e.data.content_block);
    assert.equal(starts[0].type, "redacted_thinking");
    assert.ok(starts[0].data);
    assert.ok(evs.filter((e) => e.event === "content_block_delta").every((e) => e.data.index === 1));
  });

  test("thinking is validated as the real API does", async () => {
    const low = await send("a", { messages: user("x"), thinking: { type: "enabled", budget_tokens: 100 } });
    assert.equal(low.status, 400);
    const unsigned = await send("a", { messages: [...user("x"), { role: "assistant", content: [{ type: "thinking", thinking: "t" }, { type: "text", text: "y" }] }, ...user("z")] });
    assert.equal(unsigned.status, 400);
    assert.match((await unsigned.json()).error.message, /messages\.1\.content\.0\.signature/);
  });

  test("tools: forced, parallel unless disabled; structured output from output_config", async () => {
    const tools = ["a_tool", "b_tool"].map((name) => ({ name, input_schema: { type: "object", properties: { n: { type: "number" } }, required: ["n"] } }));
    const any = await msg("a", { messages: user("x"), tools, tool_choice: { type: "any" } });
    assert.equal(any.stop_reason, "tool_use");
    assert.deepEqual(any.content.map((b) => [b.type, b.name, b.input]), [["tool_use", "a_tool", { n: 1.5 }], ["tool_use", "b_tool", { n: 1.5 }]]);
    const single = await msg("a", { messages: user("x"), tools, tool_choice: { type: "any", disable_parallel_tool_use: true } });
    assert.equal(single.content.length, 1);
    const so = await msg("a", { messages: user("x"), output_config: { format: { type: "json_schema", schema: { type: "object", properties: { ok: { type: "boolean" } } } } } });
    assert.deepEqual(JSON.parse(so.content[0].text), { ok: true });
  });

  test("cache_control: written on first sight, read on the second", async () => {
    const system = [{ type: "text", text: "a long system prompt", cache_control: { type: "ephemeral" } }];
    const first = await msg("a", { system, messages: user("x") });
    assert.ok(first.usage.cache_creation_input_tokens > 0);
    assert.equal(first.usage.cache_read_input_tokens, 0);
    const second = await msg("a", { system, messages: user("y") });
    assert.equal(second.usage.cache_read_input_tokens, first.usage.cache_creation_input_tokens);
    assert.equal(second.usage.cache_creation_input_tokens, 0);
  });

  test("a stream with thinking, signature, text and tool input deltas, and an unknown event", async () => {
    const tools = [{ name: "t", input_schema: { type: "object", properties: { q: { type: "string" } } } }];
    const res = await send("fut", { stream: true, messages: user("go t"), thinking: { type: "enabled", budget_tokens: 1024 }, tools });
    const evs = events(await res.text());
    for (const e of evs) assert.equal(e.data.type, e.event);
    const deltas = evs.filter((e) => e.event === "content_block_delta").map((e) => e.data);
    assert.deepEqual([...new Set(deltas.map((d) => d.delta.type))], ["thinking_delta", "signature_delta", "text_delta", "input_json_delta"]);
    assert.equal(deltas.filter((d) => d.delta.type === "thinking_delta").map((d) => d.delta.thinking).join(""), "Considering: go t");
    assert.deepEqual(JSON.parse(deltas.filter((d) => d.index === 2).map((d) => d.delta.partial_json).join("")), { q: "mock" });
    const starts = evs.filter((e) => e.event === "content_block_start").map((e) => [e.data.index, e.data.content_block.type]);
    assert.deepEqual(starts, [[0, "thinking"], [1, "text"], [2, "tool_use"]]);
    assert.equal(evs.filter((e) => e.event === "content_block_stop").length, 3);
    assert.ok(evs.some((e) => e.event === "mock_future_event"));
    assert.equal(evs.find((e) => e.event === "message_delta").data.delta.stop_reason, "tool_use");
  });

  test("image blocks are validated", async () => {
    const bad = await send("a", { messages: user([{ type: "image", source: { type: "base64", data: "xx" } }]) });
    assert.equal(bad.status, 400);
    const ok = await send("a", { messages: user([{ type: "image", source: { type: "url", url: "https://example.com/a.png" } }, { type: "text", text: "what" }]) });
    assert.equal(ok.status, 200);
  });
});

test("exampleOf follows $ref, unions and enums", () => {
  const schema = { $defs: { P: { type: "object", properties: { kind: { enum: ["x", "y"] }, at: { anyOf: [{ type: "null" }, { type: "string" }] } } } },
    type: "object", properties: { p: { $ref: "#/$defs/P" }, n: { type: ["null", "integer"] } } };
  assert.deepEqual(exampleOf(schema), { p: { kind: "x", at: "mock" }, n: 1 });
});
