// The OpenAI Responses API (POST /v1/responses) through the built Worker in workerd, with the
// official Node SDK's responses.create, responses.stream and responses.parse: passed through
// to an OpenAI provider (which speaks Responses), translated for an Anthropic provider
// (Messages) and an OpenAI-compatible one (Chat Completions), failover on a 529, stored state
// sent only to the entry that holds it, and a stream cut after the commit point (continued, or ended with the error event,
// never a clean end); an OpenAI provider's stream reaches the client as its own events, so a
// streamed answer's id chains with previous_response_id. Asserts on what the mock provider received and on what the SDK returned.
// Build first (scripts/test-worker.sh does): build/index.js.
import { after, before, beforeEach, describe, test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { zodTextFormat } from "openai/helpers/zod";
import { z } from "zod";
import { GATEWAY_KEY } from "./gateway-harness.mjs";
import { PNG, startResponses } from "./responses-setup.mjs";

const WEATHER = {
  type: "function",
  name: "get_weather",
  description: "get_weather of a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false },
  strict: false,
};

describe("the Responses API through the edge, official Node SDK", { timeout: 180000 }, () => {
  let f, mock, openai;
  const last = (name) => mock.received(name).at(-1);
  before(async () => {
    f = await startResponses();
    mock = f.mock;
    openai = new OpenAI({ apiKey: GATEWAY_KEY, baseURL: `${f.gw.url}/v1`, maxRetries: 0, timeout: 20000 });
  });
  after(() => f?.close());
  beforeEach(() => mock.clearReceived());

  test("responses.create translated to an Anthropic provider: instructions, usage, the answering model", async () => {
    const r = await openai.responses.create({ model: "claude", instructions: "Be terse.", input: "Paris?", max_output_tokens: 200 });
    assert.equal(r.object, "response");
    assert.equal(r.status, "completed");
    assert.equal(r.output_text, "[ant] echo: Paris?");
    assert.ok(r.usage.input_tokens > 0 && r.usage.output_tokens > 0, JSON.stringify(r.usage));
    assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
    const sent = last("ant");
    assert.equal(sent.path.endsWith("/v1/messages"), true);
    assert.equal(sent.body.system, "Be terse.");
    assert.equal(sent.body.max_tokens, 200);
  });

  test("responses.create passed through to an OpenAI provider: the client's body as sent, the provider's answer as it came", async () => {
    const body = { model: "gpt", input: "Bern?", include: ["reasoning.encrypted_content"], store: false, future_field: { x: 1 } };
    const r = await openai.responses.create(body);
    assert.equal(r.id, `resp_mock_oai_${mock.received("oai").at(-1).seq}`, "the provider's own response id");
    assert.equal(r.output_text, "[oai] echo: Bern?");
    const sent = last("oai");
    assert.equal(sent.path.endsWith("/v1/responses"), true);
    assert.deepEqual(sent.body, { ...body, model: "gpt-mock" }, "every field as sent, the entry's model");
  });

  test("responses.create translated to a Chat Completions provider: function tools, calls and their outputs", async () => {
    const first = await openai.responses.create({ model: "compat", input: "get_weather for Paris", tools: [WEATHER] });
    const calls = first.output.filter((o) => o.type === "function_call");
    assert.deepEqual(calls.map((c) => [c.name, JSON.parse(c.arguments)]), [["get_weather", { city: "mock" }]]);
    const sent = last("vllm");
    assert.equal(sent.path.endsWith("/v1/chat/completions"), true);
    assert.equal(sent.body.tools[0].function.name, "get_weather");
    const second = await openai.responses.create({
      model: "claude",
      tools: [WEATHER],
      input: [
        { role: "user", content: "get_weather for Paris" },
        ...calls.map(({ call_id, name, arguments: args }) => ({ type: "function_call", call_id, name, arguments: args })),
        { type: "function_call_output", call_id: calls[0].call_id, output: "18C" },
      ],
    });
    assert.equal(second.status, "completed");
    const turns = last("ant").body.messages;
    assert.equal(turns[1].content[0].type, "tool_use");
    assert.deepEqual(turns[2].content[0], { type: "tool_result", tool_use_id: calls[0].call_id, content: "18C" });
  });

  test("responses.create: an input_image reaches Anthropic as an image block", async () => {
    await openai.responses.create({
      model: "claude",
      input: [{ role: "user", content: [{ type: "input_text", text: "What is it?" }, { type: "input_image", image_url: `data:image/png;base64,${PNG}`, detail: "auto" }] }],
    });
    const block = last("ant").body.messages[0].content[1];
    assert.deepEqual(block, { type: "image", source: { type: "base64", media_type: "image/png", data: PNG } });
  });

  test("responses.create: reasoning effort becomes a thinking budget; the reasoning comes back as a reasoning item", async () => {
    const r = await openai.responses.create({ model: "claude", input: "Think about Paris", reasoning: { effort: "low" }, max_output_tokens: 4000 });
    assert.equal(last("ant").body.thinking.type, "enabled");
    const reasoning = r.output.find((o) => o.type === "reasoning");
    assert.ok(reasoning?.content?.[0]?.text, JSON.stringify(r.output));
    assert.equal(r.output_text, "[ant] echo: Think about Paris");
  });

  const City = z.object({ city: z.string(), population: z.number() });
  for (const model of ["claude", "compat", "gpt"]) {
    test(`responses.parse + zodTextFormat (${model === "gpt" ? "passthrough" : "translated"}: ${model})`, async () => {
      const r = await openai.responses.parse({ model, input: "Paris?", text: { format: zodTextFormat(City, "city") } });
      assert.deepEqual(r.output_parsed, { city: "mock", population: 1.5 });
    });
  }

  for (const [model, provider] of [["claude", "ant"], ["gpt", "oai"]]) {
  test(`responses.stream: typed events with sequence numbers, ending in response.completed (${model})`, async () => {
    const stream = openai.responses.stream({ model, input: "Rome?" });
    const types = [];
    let text = "";
    let seq = -1;
    for await (const ev of stream) {
      types.push(ev.type);
      assert.equal(ev.sequence_number, seq + 1, "numbered in order");
      seq = ev.sequence_number;
      if (ev.type === "response.output_text.delta") text += ev.delta;
    }
    const final = await stream.finalResponse();
    assert.deepEqual(types.slice(0, 2), ["response.created", "response.in_progress"]);
    assert.equal(types.at(-1), "response.completed");
    assert.equal(text, `[${provider}] echo: Rome?`);
    // The Node SDK sets output_text on whole answers only: the final Response's message.
    const message = final.output.find((o) => o.type === "message");
    assert.equal(message.content[0].text, text);
    assert.ok(final.usage.output_tokens > 0);
  });
  }

  test("responses.stream passed through to an OpenAI provider: its own events and response id, chained with previous_response_id", async () => {
    const stream = openai.responses.stream({ model: "gpt", input: "Riga?" });
    const created = [];
    for await (const ev of stream) if (ev.type === "response.created") created.push(ev.response.id);
    const final = await stream.finalResponse();
    assert.equal(final.id, `resp_mock_oai_${mock.received("oai").at(-1).seq}`, "the provider's own response id");
    assert.deepEqual(created, [final.id]);
    assert.equal(final.output.find((o) => o.type === "message").id, `msg_mock_oai_${mock.received("oai").at(-1).seq}`, "its item ids too");
    const { data, response } = await openai.responses.create({ model: "stateful", input: "and Vilnius?", previous_response_id: final.id }).withResponse();
    assert.equal(response.headers.get("x-served-by"), "oai/gpt-mock");
    assert.equal(last("oai").body.previous_response_id, final.id, "the streamed answer's id chains");
    assert.equal(data.output_text, "[oai] echo: and Vilnius?");
  });

  test("failover: the first entry answers 529, the next serves the answer", async () => {
    const { data, response } = await openai.responses.create({ model: "failover", input: "Oslo?" }).withResponse();
    assert.equal(data.output_text, "[oai] echo: Oslo?");
    assert.equal(response.headers.get("x-served-by"), "oai/gpt-mock");
    assert.equal(response.headers.get("x-attempts"), "3");
    assert.equal(mock.received("ant-busy").length, 2);
  });

  for (const [model, provider] of [["claude-cut", "ant-cut"], ["gpt-cut", "oai-cut"]]) {
    test(`a stream cut after the commit point is continued: one whole answer, completed (${model})`, async () => {
      const stream = openai.responses.stream({ model, input: "Lima?" });
      let text = "";
      for await (const ev of stream) if (ev.type === "response.output_text.delta") text += ev.delta;
      const final = await stream.finalResponse();
      assert.equal(final.status, "completed");
      assert.equal(text, `[${provider}] echo: Lima?`);
      assert.equal(mock.received(provider).length, 2, "a second attempt continued it");
      if (provider === "oai-cut") {
        // Passed through, then continued under the provider's own response.
        assert.equal(final.id, `resp_mock_oai-cut_${mock.received(provider)[0].seq}`);
      }
    });
  }

  test("a stream cut with no continuation ends with response.failed and the error event, never completed", async () => {
    const stream = openai.responses.stream({ model: "claude-dead", input: "Quito?" });
    const types = [];
    await assert.rejects(async () => {
      for await (const ev of stream) types.push(ev.type);
    }, (err) => err instanceof OpenAI.APIError);
    assert.ok(types.includes("response.output_text.delta"), "committed before the cut");
    assert.equal(types.at(-1), "response.failed");
    assert.ok(!types.includes("response.completed"));
  });

  test("stored state: previous_response_id goes only to the entry that holds it", async () => {
    const first = await openai.responses.create({ model: "gpt", input: "Riga?" });
    const { data, response } = await openai.responses.create({ model: "stateful", input: "and Vilnius?", previous_response_id: first.id }).withResponse();
    assert.equal(response.headers.get("x-served-by"), "oai/gpt-mock", "the Anthropic entry first in the route is skipped");
    assert.equal(data.output_text, "[oai] echo: and Vilnius?");
    assert.equal(last("oai").body.previous_response_id, first.id);
    assert.equal(mock.received("ant").length, 0);
  });

  test("stored state no entry holds: previous_response_id is a 400 naming it", async () => {
    await assert.rejects(
      openai.responses.create({ model: "claude", input: "again", previous_response_id: "resp_123" }),
      (err) => err instanceof OpenAI.BadRequestError && /previous_response_id/.test(err.message),
    );
  });
});
