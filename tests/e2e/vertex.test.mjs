// End to end: Google Vertex AI behind the built Worker in workerd (Miniflare), the mock's
// Vertex AI (tests/e2e/mock-vertex.mjs: a token endpoint checking the RS256 JWT, rawPredict,
// streamRawPredict, generateContent, streamGenerateContent) on 127.0.0.1, the service
// account's key a Worker secret. The official `@anthropic-ai/sdk` asks a route that fails
// over from Anthropic to Claude on Vertex and back, whole and streamed, counted at the mock;
// the official `openai` SDK is answered by a Gemini model on Vertex.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { GATEWAY_KEY, gatewayConfig, startGateway, startMock } from "./gateway-harness.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const COOLDOWN_MS = 400;

/** The test service account's key file, its token_uri the mock's. */
function keyFile(mock) {
  const key = JSON.parse(readFileSync(new URL("../fixtures/vertex/service-account.json", import.meta.url), "utf8"));
  return JSON.stringify({ ...key, token_uri: mock.vertex.tokenUri });
}

async function ask(anthropic, content = "hi") {
  const { data, response } = await anthropic.messages
    .create({ model: "claude", max_tokens: 64, messages: [{ role: "user", content }] })
    .withResponse();
  return { text: data.content.map((b) => b.text ?? "").join(""), data, servedBy: response.headers.get("x-served-by") };
}

async function askStream(anthropic, content = "stream please") {
  const { data: stream, response } = await anthropic.messages
    .create({ model: "claude", max_tokens: 64, stream: true, messages: [{ role: "user", content }] })
    .withResponse();
  let text = "";
  let stop = null;
  let usage = null;
  for await (const ev of stream) {
    if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") text += ev.delta.text;
    if (ev.type === "message_delta") {
      stop = ev.delta.stop_reason;
      usage = ev.usage;
    }
  }
  return { text, stop, usage, servedBy: response.headers.get("x-served-by") };
}

describe("Vertex AI through the edge", { timeout: 180000 }, () => {
  let mock, gw, anthropic, openai;
  const count = () => ({ direct: mock.stats("direct").total, vertex: mock.stats("vertex").total });
  before(async () => {
    mock = await startMock({ config: { providers: { direct: {}, vertex: {}, gemini: {} } } });
    const config = gatewayConfig(mock, {
      providers: { direct: "anthropic" },
      routes: {
        claude: [{ provider: "direct", model: "claude-sonnet-4-5" },
          { provider: "vertex", model: "claude-sonnet-4-5@20250929" }],
        gemini: [{ provider: "gemini", model: "gemini-2.5-flash" }],
      },
      retry: { maxAttempts: 1 },
      breaker: { failureThreshold: 2, cooldownMs: COOLDOWN_MS, maxCooldownMs: COOLDOWN_MS },
    });
    const vertex = (publisher, name) => ({ kind: "vertex", publisher, project: "test-project", region: "us-east5",
      baseUrl: mock.vertex.baseUrl(name), serviceAccountKeyEnv: "VERTEX_SA_KEY" });
    config.providers.vertex = vertex("anthropic", "vertex");
    config.providers.gemini = vertex("google", "gemini");
    gw = await startGateway(config, { bindings: { VERTEX_SA_KEY: keyFile(mock) } });
    anthropic = new Anthropic({ apiKey: GATEWAY_KEY, baseURL: gw.url, maxRetries: 0, timeout: 20000 });
    openai = new OpenAI({ apiKey: GATEWAY_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0, timeout: 20000 });
  });
  after(async () => {
    await gw?.close();
    await mock?.close();
  });

  test("anthropic -> Claude on Vertex and back, whole and streamed, one token throughout", async () => {
    let r = await ask(anthropic, "first");
    assert.equal(r.servedBy, "direct/claude-sonnet-4-5");
    assert.deepEqual(count(), { direct: 1, vertex: 0 });
    assert.equal(mock.vertex.tokenStats().calls, 0, "no token before Vertex is needed");

    // Anthropic breaks: Vertex answers, whole and streamed.
    mock.setFault("direct", { mode: "status", status: 529 });
    r = await ask(anthropic, "while direct is down");
    assert.equal(r.servedBy, "vertex/claude-sonnet-4-5@20250929");
    assert.match(r.text, /\[vertex\] echo: while direct is down/);
    assert.equal(r.data.model, "claude-sonnet-4-5@20250929");
    assert.deepEqual(count(), { direct: 2, vertex: 1 });
    const s = await askStream(anthropic, "a streamed answer");
    assert.equal(s.servedBy, "vertex/claude-sonnet-4-5@20250929");
    assert.equal(s.text, "[vertex] echo: a streamed answer");
    assert.equal(s.stop, "end_turn");
    assert.ok(s.usage?.output_tokens > 0, "the provider's own usage");
    // Two failures opened Anthropic's breaker: Vertex alone is called now.
    assert.deepEqual(count(), { direct: 3, vertex: 2 });
    r = await ask(anthropic, "breaker open");
    assert.equal(r.servedBy, "vertex/claude-sonnet-4-5@20250929");
    assert.deepEqual(count(), { direct: 3, vertex: 3 });

    // What Vertex received: the Messages body with Vertex's version and no model.
    const sent = mock.received("vertex").at(-1);
    assert.equal(sent.body.anthropic_version, "vertex-2023-10-16");
    assert.equal(sent.body.model, undefined);
    assert.match(sent.path, /\/publishers\/anthropic\/models\/claude-sonnet-4-5@20250929:rawPredict$/);
    assert.match(mock.received("vertex").at(-2).path, /:streamRawPredict$/);

    // Anthropic heals; after the cooldown the route goes back to it, whole and streamed.
    mock.reset("direct");
    await sleep(COOLDOWN_MS + 100);
    r = await ask(anthropic, "healed");
    assert.equal(r.servedBy, "direct/claude-sonnet-4-5");
    const back = await askStream(anthropic, "healed stream");
    assert.equal(back.servedBy, "direct/claude-sonnet-4-5");
    assert.equal(back.text, "[direct] echo: healed stream");
    assert.equal(mock.stats("vertex").total, 3, "Vertex no longer called");
  });

  test("Vertex's own failures are classified and the token is fetched once per isolate", async () => {
    mock.reset("direct");
    mock.reset("vertex");
    await sleep(COOLDOWN_MS + 100);
    for (let i = 0; i < 4; i++) {
      const r = await ask(anthropic, `again ${i}`);
      assert.equal(r.servedBy, "direct/claude-sonnet-4-5");
    }
    // Anthropic down, Vertex rate limited (RESOURCE_EXHAUSTED): the client gets the failure
    // as an Anthropic error, both reached.
    mock.setFault("direct", { mode: "status", status: 529 });
    mock.setFault("vertex", { mode: "status", status: 429 });
    const e = await anthropic.messages
      .create({ model: "claude", max_tokens: 64, messages: [{ role: "user", content: "all down" }] })
      .catch((err) => err);
    assert.ok(e instanceof Anthropic.APIError, String(e));
    assert.ok(e.status >= 500 || e.status === 429, `status ${e.status}`);
    mock.reset("vertex");
    await sleep(COOLDOWN_MS + 100);
    const r = await ask(anthropic, "vertex back");
    assert.equal(r.servedBy, "vertex/claude-sonnet-4-5@20250929");
    // One token since the isolate started, for every Vertex call of both tests.
    assert.deepEqual(mock.vertex.tokenStats(), { calls: 1, issued: 1, refused: 0 });
  });

  test("a token endpoint that refuses is an auth failure: the route fails over", async () => {
    mock.reset("direct");
    mock.reset("vertex");
    // A fresh gateway (a new isolate) has no token yet and cannot get one.
    mock.vertex.setTokenFault({ status: 400, error: "invalid_grant" });
    const config = gatewayConfig(mock, {
      providers: { direct: "anthropic" },
      routes: { claude: [{ provider: "vertex", model: "claude-sonnet-4-5@20250929" },
        { provider: "direct", model: "claude-sonnet-4-5" }] },
      retry: { maxAttempts: 1 },
    });
    config.providers.vertex = { kind: "vertex", publisher: "anthropic", project: "test-project", region: "us-east5",
      baseUrl: mock.vertex.baseUrl("vertex"), serviceAccountKeyEnv: "VERTEX_SA_KEY" };
    const gw2 = await startGateway(config, { bindings: { VERTEX_SA_KEY: keyFile(mock) } });
    try {
      const a2 = new Anthropic({ apiKey: GATEWAY_KEY, baseURL: gw2.url, maxRetries: 0, timeout: 20000 });
      const calls = mock.stats("vertex").total;
      const r = await ask(a2, "no token");
      assert.equal(r.servedBy, "direct/claude-sonnet-4-5");
      assert.equal(mock.stats("vertex").total, calls, "no model call without a token");
      assert.ok(gw2.logs.every((l) => !l.includes("BEGIN PRIVATE KEY") && !l.includes("ya29.")), "no key or token in logs");
    } finally {
      mock.vertex.setTokenFault(null);
      await gw2.close();
    }
  });

  test("an OpenAI client served by Gemini on Vertex: text, tools, JSON, usage, streamed", async () => {
    const calls = mock.stats("gemini").total;
    const { data, response } = await openai.chat.completions
      .create({ model: "gemini", messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "hello gemini" }] })
      .withResponse();
    assert.equal(response.headers.get("x-served-by"), "gemini/gemini-2.5-flash");
    assert.equal(data.object, "chat.completion");
    assert.equal(data.choices[0].message.content, "[gemini] echo: hello gemini");
    assert.equal(data.choices[0].finish_reason, "stop");
    assert.ok(data.usage.prompt_tokens > 0 && data.usage.completion_tokens > 0, JSON.stringify(data.usage));
    const sent = mock.received("gemini").at(-1);
    assert.deepEqual(sent.body.systemInstruction, { parts: [{ text: "Be brief." }] });
    assert.match(sent.path, /\/publishers\/google\/models\/gemini-2\.5-flash:generateContent$/);

    // A tool call, and its result sent back.
    const tools = [{ type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false } } }];
    const first = await openai.chat.completions.create({ model: "gemini", tools, messages: [{ role: "user", content: "use get_weather" }] });
    const call = first.choices[0].message.tool_calls?.[0];
    assert.equal(call?.function.name, "get_weather");
    assert.deepEqual(JSON.parse(call.function.arguments), { city: "mock" });
    assert.equal(first.choices[0].finish_reason, "tool_calls");
    const second = await openai.chat.completions.create({ model: "gemini", tools, messages: [
      { role: "user", content: "use get_weather" }, first.choices[0].message,
      { role: "tool", tool_call_id: call.id, content: "18C" }] });
    assert.match(second.choices[0].message.content, /echo/);
    const answered = mock.received("gemini").at(-1).body.contents.at(-1);
    assert.deepEqual(answered.parts[0].functionResponse, { name: "get_weather", response: { content: "18C" } });

    // JSON output with a schema.
    const json = await openai.chat.completions.create({ model: "gemini", messages: [{ role: "user", content: "a city" }],
      response_format: { type: "json_schema", json_schema: { name: "city", schema: { type: "object", properties: { name: { type: "string" } }, required: ["name"], additionalProperties: false } } } });
    assert.equal(typeof JSON.parse(json.choices[0].message.content).name, "string");
    assert.equal(mock.received("gemini").at(-1).body.generationConfig.responseMimeType, "application/json");

    // Streamed, with usage.
    const stream = await openai.chat.completions.create({ model: "gemini", stream: true, stream_options: { include_usage: true },
      messages: [{ role: "user", content: "stream from gemini" }] });
    let text = "";
    let usage = null;
    let finish = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (chunk.usage) usage = chunk.usage;
    }
    assert.equal(text, "[gemini] echo: stream from gemini");
    assert.equal(finish, "stop");
    assert.ok(usage?.completion_tokens > 0, JSON.stringify(usage));
    assert.match(mock.received("gemini").at(-1).path, /:streamGenerateContent$/);

    // A streamed tool call.
    const calling = await openai.chat.completions.create({ model: "gemini", stream: true, tools,
      messages: [{ role: "user", content: "stream a get_weather call" }] });
    const streamed = { name: "", args: "", finish: null };
    for await (const chunk of calling) {
      for (const t of chunk.choices[0]?.delta?.tool_calls ?? []) {
        streamed.name += t.function?.name ?? "";
        streamed.args += t.function?.arguments ?? "";
      }
      streamed.finish = chunk.choices[0]?.finish_reason ?? streamed.finish;
    }
    assert.equal(streamed.name, "get_weather");
    assert.deepEqual(JSON.parse(streamed.args), { city: "mock" });
    assert.equal(streamed.finish, "tool_calls");
    assert.equal(mock.stats("gemini").total, calls + 6);
  });
});
