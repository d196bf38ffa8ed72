// W3C trace context through the built Worker in workerd, with the official Node SDKs as
// clients: a `traceparent` (and `tracestate`) sent by the SDK is continued to every attempt the
// mock provider receives, each with a span of its own, through a failover and in a stream; a
// request without one starts a trace; `x-trace-id` names it. Build first (scripts/test-worker.sh
// does): build/index.js.
import { after, before, beforeEach, describe, test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { GATEWAY_KEY, gatewayConfig, startGateway, startMock } from "./gateway-harness.mjs";

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT = `00-${TRACE}-00f067aa0ba902b7-01`;
const STATE = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE";
const user = (content) => [{ role: "user", content }];

describe("trace context through the Worker, official SDKs", { timeout: 60000 }, () => {
  let mock, gw;
  // What each provider request carried, oldest first.
  const sent = (name) => mock.received(name).map((r) => [r.headers.traceparent, r.headers.tracestate]);
  before(async () => {
    mock = await startMock({ config: { providers: { down: { faults: [{ mode: "status", status: 503 }] }, p: {}, a: {} } } });
    const config = gatewayConfig(mock, {
      providers: { down: "openai", p: "openai", a: "anthropic" },
      routes: { default: [{ provider: "down", model: "gpt" }, { provider: "p", model: "gpt" }], claude: [{ provider: "a", model: "claude" }] },
      retry: { maxAttempts: 1 },
      breaker: { failureThreshold: 100 },
    });
    gw = await startGateway(config);
  });
  after(async () => {
    await gw?.close();
    await mock?.close();
  });
  beforeEach(() => mock.clearReceived());

  test("the SDK's traceparent is continued to each attempt of a failover, each its own span", async () => {
    const openai = new OpenAI({ apiKey: GATEWAY_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0,
      defaultHeaders: { traceparent: PARENT, tracestate: STATE } });
    const { data, response } = await openai.chat.completions.create({ model: "default", messages: user("trace me") }).withResponse();
    assert.ok(data.choices[0].message.content);
    assert.equal(response.headers.get("x-trace-id"), TRACE);
    const attempts = [...sent("down"), ...sent("p")];
    assert.equal(attempts.length, 2, "the dead provider's attempt, then the one that answered");
    const spans = attempts.map(([parent, state]) => {
      const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(parent ?? "");
      assert.ok(m, `a traceparent: ${parent}`);
      assert.equal(m[1], TRACE);
      assert.notEqual(m[2], "00f067aa0ba902b7", "a span of the attempt's own");
      assert.equal(state, STATE);
      return m[2];
    });
    assert.notEqual(spans[0], spans[1]);
  });

  test("a stream carries it too, and a request without one starts a trace", async () => {
    const anthropic = new Anthropic({ apiKey: GATEWAY_KEY, baseURL: gw.url, maxRetries: 0,
      defaultHeaders: { traceparent: PARENT } });
    const { data: stream, response } = await anthropic.messages
      .create({ model: "claude", max_tokens: 64, stream: true, messages: user("stream me") })
      .withResponse();
    for await (const _ of stream) { /* read to the end */ }
    assert.equal(response.headers.get("x-trace-id"), TRACE);
    const [[parent, state]] = sent("a");
    assert.match(parent, new RegExp(`^00-${TRACE}-[0-9a-f]{16}-01$`));
    assert.equal(state, undefined, "no tracestate sent, none passed on");

    const plain = new OpenAI({ apiKey: GATEWAY_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const { response: r } = await plain.chat.completions.create({ model: "default", messages: user("no trace") }).withResponse();
    const id = r.headers.get("x-trace-id");
    assert.match(id, /^[0-9a-f]{32}$/);
    assert.notEqual(id, TRACE);
    assert.ok(sent("p").some(([p]) => p?.startsWith(`00-${id}-`)), "the started trace reached the provider");
  });
});
